//! [`SessionManager`]: one session, loaded or new, with the persistence rules of its
//! dialect.
//!
//! * **pi**: nothing is written until the session holds a user or assistant message;
//!   then the whole file is created exclusively and every later entry is appended.
//!   Opening repairs a missing final newline, and rewrites a migrated file at once.
//! * **omp**: nothing is written until the first assistant message (or a load, a
//!   fork, a branch: the file then exists); then the title slot, header and entries
//!   are written in full and later entries appended. Migrations and dropped garbage
//!   lines are written by one atomic full rewrite on the next write, guarded by the
//!   file size last seen so another process's appends are never clobbered.
//!
//! A failed write rolls back the in-memory change and returns the error; the file on
//! disk never holds a half-written record in place of a good file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use session_model::entries::{self, Base};
use session_model::ids::EntryId;
use session_model::{Bodies, Diagnostic, Dialect, EntryType, HeaderCheck, Record, SLOT_BYTES, TitleSlot, ids};
use session_store::{AppendWriter, ExpectedSize, FileStat, StoreError};
use session_tree::SessionTree;

mod drafts;
mod lifecycle;

pub use lifecycle::ForkOptions;

use crate::body::{Body, persist_line};
pub use crate::index::IndexUse;
use crate::{Env, Session, SessionError};

type Result<T> = std::result::Result<T, SessionError>;

/// A session of one dialect: its header, its entry tree and where it lives.
pub struct SessionManager {
    env: Env,
    cwd: String,
    session_dir: Option<PathBuf>,
    file: Option<PathBuf>,
    persist: bool,
    header: Record,
    slot: Option<TitleSlot>,
    tree: SessionTree,
    /// pi: a user or assistant message exists; omp: an assistant message exists.
    has_conversation: bool,
    /// The dialect and what its persistence rules track.
    pub(crate) persistence: Persistence,
    writer: Option<Box<dyn AppendWriter>>,
    /// Reused buffer for one line and its newline.
    line_buf: Vec<u8>,
    /// The first write error, latched (pi: the append writer's, for good; omp: until a
    /// full rewrite succeeds).
    failure: Option<SessionError>,
    diagnostics: Vec<Diagnostic>,
    /// Whether the manager may write: opened read-only, or sealed.
    pub(crate) access: Access,
    /// What the open did (or, read-only, did in memory only).
    load_report: LoadReport,
    /// Where the texts of the records read by position come from (`None`: every text
    /// is in memory).
    pub(crate) bodies: Option<Arc<Bodies>>,
    /// The file's stat when it was read, while this manager has not written it since: a
    /// full rewrite then requires the very file read ([`ExpectedSize::Unchanged`]), not
    /// only one of its size.
    pub(crate) seen: Option<FileStat>,
}

/// What a manager may do to its session's storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Reads and writes.
    ReadWrite,
    /// Opened for a [`Session`]: every write is refused.
    ReadOnly,
    /// [`SessionManager::seal`]ed: every later write is refused, for good.
    Sealed,
}

/// The dialect of a session and the state its persistence rules keep.
#[derive(Debug)]
pub(crate) enum Persistence {
    /// pi's rules.
    Pi(PiState),
    /// omp's rules.
    Omp(OmpState),
}

/// What pi's persistence tracks.
#[derive(Debug, Default)]
pub(crate) struct PiState {
    /// The file exists and holds everything in memory (later entries are appended).
    pub(crate) flushed: bool,
    /// The file's size as this manager last read or wrote it (`None`: not known, after
    /// an append whose partial write could not be removed). pi checks nothing before it
    /// rewrites a file; a rewrite here is guarded by this size, so a line another
    /// process appended since is never written over.
    pub(crate) size: Option<u64>,
}

/// What omp's persistence tracks.
#[derive(Debug, Default)]
pub(crate) struct OmpState {
    /// The file on disk equals the in-memory journal (modulo appends).
    pub(crate) file_is_current: bool,
    /// Every entry persists even before an assistant message.
    pub(crate) force_file_creation: bool,
    /// The next write must be a full rewrite.
    pub(crate) rewrite_required: bool,
    /// The file size we last wrote or read (the rewrite CAS token).
    pub(crate) expected_size: Option<u64>,
    /// Inside [`Omp::append_entries_atomically`](crate::Omp::append_entries_atomically): appends are staged.
    pub(crate) in_batch: bool,
    /// This manager wrote the file only to carry a draft (or found such a file and
    /// consumed its draft): [`SessionManager::close`] removes it if nothing was added.
    pub(crate) draft_cleanup_armed: bool,
}

impl Persistence {
    fn new(dialect: Dialect) -> Persistence {
        match dialect {
            Dialect::Pi => Persistence::Pi(PiState::default()),
            Dialect::Omp => Persistence::Omp(OmpState::default()),
        }
    }

    /// Returns the dialect.
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Persistence::Pi(_) => Dialect::Pi,
            Persistence::Omp(_) => Dialect::Omp,
        }
    }
}

/// Options of a new session ([`SessionManager::new_session`], [`SessionManager::create_with`],
/// [`SessionManager::in_memory_with`]).
#[derive(Clone, Debug, Default)]
pub struct NewSessionOptions {
    /// The session id (checked against the custom-id rule); `None`: a fresh UUIDv7.
    pub id: Option<String>,
    /// The header's `parentSession`.
    pub parent_session: Option<String>,
    /// omp: the header's `providerPromptCacheKey`.
    pub provider_prompt_cache_key: Option<String>,
    /// omp: the header's `additionalDirectories` (entries equal to the cwd are left out).
    pub additional_directories: Vec<String>,
    /// A new session directory for this and later sessions of the manager.
    pub session_dir: Option<PathBuf>,
}

impl NewSessionOptions {
    /// Returns options with the session id `id`.
    pub fn with_id(id: &str) -> NewSessionOptions {
        NewSessionOptions { id: Some(id.to_owned()), ..NewSessionOptions::default() }
    }

    /// Returns these options with the header's `parentSession`.
    pub fn parent_session(mut self, parent: &str) -> NewSessionOptions {
        self.parent_session = Some(parent.to_owned());
        self
    }
}

/// How [`SessionManager::open_with`] treats the file it opens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpenMode {
    /// As the dialect's agent opens it ([`SessionManager::open`]): a missing file starts
    /// a new session at that path, an empty file gets a fresh header, a migration or a
    /// torn last line (pi) is written back at once.
    #[default]
    AsAgent,
    /// As [`OpenMode::AsAgent`], but a missing file is [`SessionError::NotFound`].
    MustExist,
}

/// What [`SessionManager::open`] did to the file while loading it (for a [`Session`]:
/// what it did in memory, the file left as it was).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// A newline was appended after a torn or unterminated last line (pi).
    pub repaired_final_newline: bool,
    /// The file was migrated from an older version.
    pub migrated: bool,
    /// The header `version` the file had before a migration, as written (`None` when
    /// absent).
    pub migrated_from: Option<String>,
    /// The file was empty and received a fresh header.
    pub reinitialised: bool,
    /// Whether the file was written while opening (always false read-only).
    pub wrote: bool,
    /// How the session index was used ([`crate::Env::index_dir`]).
    pub index: IndexUse,
    /// The file's stat taken just before it was read (`None`: there was no file). A job
    /// that read the file itself compares it with what it read.
    pub stat: Option<FileStat>,
}

impl SessionManager {
    // ------------------------------------------------------------------ construction

    fn blank(dialect: Dialect, env: Env, cwd: String, session_dir: Option<PathBuf>, persist: bool) -> SessionManager {
        SessionManager {
            env,
            cwd,
            session_dir,
            file: None,
            persist,
            header: Record::from_value(Value::Null),
            slot: None,
            tree: SessionTree::new(dialect, Vec::new()),
            has_conversation: false,
            persistence: Persistence::new(dialect),
            writer: None,
            line_buf: Vec::new(),
            failure: None,
            diagnostics: Vec::new(),
            access: Access::ReadWrite,
            load_report: LoadReport::default(),
            bodies: None,
            seen: None,
        }
    }

    /// Opens the session file at `path` the way the dialect's reference does.
    ///
    /// A missing file starts a new session at that path (written later, by the
    /// first-write rule; omp writes its header at once). An empty file gets a fresh
    /// header. A non-empty file without a valid header is an error and is never
    /// modified.
    ///
    /// ```
    /// use session::{Dialect, Env, SessionManager};
    /// # fn main() -> Result<(), session::SessionError> {
    /// let mut m = SessionManager::open(Dialect::Pi, std::path::Path::new("/s/a.jsonl"), Env::memory())?;
    /// m.append_message_json(serde_json::json!({"role": "user", "content": "hi", "timestamp": 1}))?;
    /// assert_eq!(m.tree().entries().len(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn open(dialect: Dialect, path: &Path, env: Env) -> Result<SessionManager> {
        SessionManager::open_with(dialect, path, env, OpenMode::AsAgent)
    }

    /// Opens the session file at `path` for reading only, as a [`Session`]: nothing is
    /// ever written or created, and a missing file is [`SessionError::NotFound`]. The
    /// session reads as the agent would see it after opening (migrated, repaired in
    /// memory); [`Session::load_report`] says what the agent would have written.
    pub fn open_read_only(dialect: Dialect, path: &Path, env: Env) -> Result<Session> {
        Session::open(dialect, path, env)
    }

    /// Opens the session file at `path` as `mode` says.
    pub fn open_with(dialect: Dialect, path: &Path, env: Env, mode: OpenMode) -> Result<SessionManager> {
        SessionManager::open_inner(dialect, path, env, Some(mode))
    }

    /// Opens the session file at `path` as `mode` says, or read-only for `None` (what a
    /// [`Session`] wraps).
    pub(crate) fn open_inner(
        dialect: Dialect,
        path: &Path,
        env: Env,
        mode: Option<OpenMode>,
    ) -> Result<SessionManager> {
        let path = absolute(&env.process_cwd, path);
        let dir = path.parent().map(Path::to_path_buf);
        let process_cwd = env.process_cwd.to_string_lossy().into_owned();
        let mut m = SessionManager::blank(dialect, env, process_cwd, dir, true);
        if mode.is_none() {
            m.access = Access::ReadOnly;
        }
        let must_exist = mode != Some(OpenMode::AsAgent);
        m.load_report = m.load_file(&path, must_exist, None)?;
        if mode == Some(OpenMode::AsAgent) {
            m.breadcrumb(false);
        }
        Ok(m)
    }

    /// Opens the existing session at `path` as [`OpenMode::MustExist`] does, but only
    /// while its file is still the one `expected` describes ([`FileStat::same_bytes_as`]):
    /// a file that changed since is [`StoreError::Conflict`] before the open writes
    /// anything (pi writes a migration or a torn line's newline as it opens). The jobs
    /// that rewrite a session from bytes they read use it, so what they back up is what
    /// the open replaces.
    pub(crate) fn open_guarded(dialect: Dialect, path: &Path, env: Env, expected: &FileStat) -> Result<SessionManager> {
        let path = absolute(&env.process_cwd, path);
        let dir = path.parent().map(Path::to_path_buf);
        let process_cwd = env.process_cwd.to_string_lossy().into_owned();
        let mut m = SessionManager::blank(dialect, env, process_cwd, dir, true);
        m.load_report = m.load_file(&path, true, Some(expected))?;
        Ok(m)
    }

    /// Returns what opening the file did (or, read-only, would have written).
    pub fn load_report(&self) -> &LoadReport {
        &self.load_report
    }

    /// Returns whether the manager is read-only (the one a [`Session`] wraps).
    pub fn is_read_only(&self) -> bool {
        self.access == Access::ReadOnly
    }

    /// Fails with [`SessionError::InBatch`] inside an atomic batch: whole-file
    /// operations would publish the staged entries early.
    fn not_in_batch(&self) -> Result<()> {
        match &self.persistence {
            Persistence::Omp(omp) if omp.in_batch => Err(SessionError::InBatch),
            _ => Ok(()),
        }
    }

    /// Fails with [`SessionError::ReadOnly`] when the manager may not write.
    pub(crate) fn writable(&self) -> Result<()> {
        let path = || self.file.clone().unwrap_or_default();
        match self.access {
            Access::ReadWrite => Ok(()),
            Access::ReadOnly => Err(SessionError::ReadOnly { path: path() }),
            Access::Sealed => Err(SessionError::Sealed { path: path() }),
        }
    }

    /// Starts a new persisted session for `cwd` in `session_dir`; no file is written
    /// until the first-write rule says so (omp: its breadcrumb points at the future file,
    /// marked `fresh`).
    ///
    /// ```
    /// use session::{Dialect, Env, SessionManager};
    /// # fn main() -> Result<(), session::SessionError> {
    /// let env = Env::memory();
    /// let storage = env.storage().clone();
    /// let mut m = SessionManager::create(Dialect::Pi, "/work", std::path::Path::new("/s"), env)?;
    /// let file = m.session_file().expect("persisted").to_path_buf();
    /// assert!(!storage.exists(&file)?, "pi writes nothing before the first message");
    /// m.append_message_json(serde_json::json!({"role": "user", "content": "hi", "timestamp": 1}))?;
    /// assert!(storage.exists(&file)?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn create(dialect: Dialect, cwd: &str, session_dir: &Path, env: Env) -> Result<SessionManager> {
        SessionManager::create_with(dialect, cwd, session_dir, NewSessionOptions::default(), env)
    }

    /// [`SessionManager::create`] with options: a given session id (pi's and omp's
    /// `create(cwd, dir, {id})`), a parent session, omp's header extras.
    pub fn create_with(
        dialect: Dialect,
        cwd: &str,
        session_dir: &Path,
        options: NewSessionOptions,
        env: Env,
    ) -> Result<SessionManager> {
        env.storage.ensure_dir(session_dir)?;
        let mut m = SessionManager::blank(dialect, env, cwd.to_owned(), Some(session_dir.to_path_buf()), true);
        m.start_session(&options)?;
        m.breadcrumb(true);
        Ok(m)
    }

    /// Starts a session that is never written.
    ///
    /// ```
    /// use session::{Dialect, Env, SessionManager};
    /// # fn main() -> Result<(), session::SessionError> {
    /// let mut m = SessionManager::in_memory(Dialect::Omp, "/work", Env::memory());
    /// m.append_message_json(serde_json::json!({"role": "user", "content": "hi", "timestamp": 1}))?;
    /// assert_eq!(m.session_file(), None);
    /// assert_eq!(m.context()?.messages.len(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn in_memory(dialect: Dialect, cwd: &str, env: Env) -> SessionManager {
        let mut m = SessionManager::blank(dialect, env, cwd.to_owned(), None, false);
        // In memory nothing can fail, and no custom id is checked.
        let _ = m.start_session(&NewSessionOptions::default());
        m
    }

    /// Starts a session that is never written, restored from `records` (pi's
    /// `inMemory(cwd, options, entries)`).
    ///
    /// When `records` hold a header (the first `type: "session"` record) it is the
    /// session's header and `options.id` is ignored; otherwise a new header is made from
    /// `options` and the records are appended after it. Older versions are migrated. The
    /// manager's cwd is `cwd`, whatever the header says.
    pub fn in_memory_with(
        dialect: Dialect,
        cwd: &str,
        records: Vec<Record>,
        options: NewSessionOptions,
        env: Env,
    ) -> Result<SessionManager> {
        let mut m = SessionManager::blank(dialect, env, cwd.to_owned(), None, false);
        let mut records = records;
        let header_at = records.iter().position(|r| r.entry_type() == EntryType::Session);
        match header_at {
            Some(at) => {
                session_migrate::migrate(&mut records, &mut || ids::new_entry_id(dialect, &mut rand::rng(), |_| false));
                let header = records.remove(at);
                m.slot = (dialect == Dialect::Omp).then(|| TitleSlot {
                    title: header.get_str("title").unwrap_or_default().to_owned(),
                    source: header.get_str("titleSource").map(str::to_owned),
                    updated_at: header.get_str("timestamp").unwrap_or_default().to_owned(),
                });
                m.header = header;
                records.retain(|r| SessionTree::keeps(dialect, r));
                m.replace_entries(records, None);
            }
            None => {
                m.start_session(&options)?;
                records.retain(|r| SessionTree::keeps(dialect, r));
                m.replace_entries(records, None);
            }
        }
        Ok(m)
    }

    /// Starts a fresh session (new id and header) in this manager; the old file is
    /// left as it is. Returns the new file path (`None` in memory).
    ///
    /// omp writes the new session's title slot and header at once (`ensureOnDisk`), so
    /// the file exists before this returns, and points the terminal breadcrumb at it; pi
    /// writes nothing until its first-write rule says so.
    pub fn new_session(&mut self, options: NewSessionOptions) -> Result<Option<PathBuf>> {
        self.writable()?;
        self.not_in_batch()?;
        self.start_session(&options)?;
        if self.dialect() == Dialect::Omp && self.persist && self.file.is_some() {
            self.breadcrumb(true);
            self.ensure_on_disk()?;
        }
        Ok(self.file.clone())
    }

    /// Resets this manager to a fresh session as `options` say, in memory only.
    fn start_session(&mut self, options: &NewSessionOptions) -> Result<()> {
        if let Some(id) = &options.id {
            ids::validate_custom_session_id(id)?;
        }
        self.close_writer();
        if let Some(dir) = &options.session_dir {
            let dir = absolute(&self.env.process_cwd, dir);
            if self.persist {
                self.env.storage.ensure_dir(&dir)?;
            }
            self.session_dir = Some(dir);
        }
        let id = options.id.clone().unwrap_or_else(|| self.env.new_session_id());
        let ts = self.env.now_iso();
        self.header = match self.dialect() {
            Dialect::Pi => entries::pi::header(&id, &ts, &self.cwd, options.parent_session.as_deref()),
            Dialect::Omp => {
                let dirs: Vec<String> =
                    options.additional_directories.iter().filter(|d| **d != self.cwd).cloned().collect();
                entries::omp::header(
                    &id,
                    &ts,
                    &self.cwd,
                    entries::omp::HeaderExtra {
                        parent_session: options.parent_session.clone(),
                        provider_prompt_cache_key: options.provider_prompt_cache_key.clone(),
                        additional_directories: dirs,
                    },
                )
            }
        };
        self.slot = (self.dialect() == Dialect::Omp).then(|| TitleSlot {
            title: String::new(),
            source: None,
            updated_at: ts.clone(),
        });
        self.tree = SessionTree::new(self.dialect(), Vec::new());
        self.has_conversation = false;
        self.persistence = Persistence::new(self.dialect());
        self.failure = None;
        self.file = match (&self.session_dir, self.persist) {
            (Some(dir), true) => Some(dir.join(session_discovery::session_file_name(&ts, &id))),
            _ => None,
        };
        Ok(())
    }

    /// Starts a new session at `path`; with `write_now`, publishes its header at once,
    /// atomically, over a file of exactly `found` bytes (`None`: no file).
    fn fresh_at(&mut self, path: &Path, write_now: bool, found: Option<u64>) -> Result<()> {
        let dir = self.session_dir.clone();
        self.start_session(&NewSessionOptions::default())?;
        self.session_dir = dir;
        self.file = Some(path.to_path_buf());
        if write_now {
            let expected = found.map_or(ExpectedSize::Missing, ExpectedSize::Bytes);
            let size = self.publish(path, expected)?;
            match &mut self.persistence {
                Persistence::Pi(pi) => {
                    pi.flushed = true;
                    pi.size = Some(size);
                }
                Persistence::Omp(omp) => {
                    omp.expected_size = Some(size);
                    omp.file_is_current = true;
                    omp.force_file_creation = true;
                }
            }
        }
        Ok(())
    }

    /// Writes the terminal breadcrumb of this omp session (see [`Env::write_breadcrumb`]).
    pub(crate) fn breadcrumb(&self, fresh: bool) {
        if self.dialect() != Dialect::Omp || !self.persist || self.access != Access::ReadWrite {
            return;
        }
        if let Some(file) = &self.file {
            self.env.write_breadcrumb(&self.cwd, file, fresh);
        }
    }

    fn load_file(&mut self, path: &Path, must_exist: bool, guard: Option<&FileStat>) -> Result<LoadReport> {
        let mut report = LoadReport::default();
        let storage = self.env.storage.clone();
        let write = self.access == Access::ReadWrite;
        let stat = storage.stat(path)?;
        if let Some(expected) = guard
            && !stat.as_ref().is_some_and(|s| s.same_bytes_as(expected))
        {
            return Err(StoreError::Conflict {
                path: path.to_path_buf(),
                expected: Some(expected.size),
                found: stat.map(|s| s.size),
            }
            .into());
        }
        let Some(stat) = stat else {
            if must_exist {
                return Err(SessionError::NotFound { path: path.to_path_buf() });
            }
            // Missing: a new session at this exact path (omp writes it at once).
            let now = self.dialect() == Dialect::Omp;
            self.fresh_at(path, now, None)?;
            report.wrote = now;
            return Ok(report);
        };
        let (parsed, bodies, index) = read_indexed(&self.env, path, self.dialect())?;
        report.index = index;
        report.stat = Some(stat);
        match parsed.header_check(self.dialect()) {
            HeaderCheck::Valid { .. } => {}
            HeaderCheck::Empty if self.dialect() == Dialect::Omp || stat.size == 0 => {
                report.reinitialised = true;
                report.wrote = write;
                self.fresh_at(path, write, Some(stat.size))?;
                return Ok(report);
            }
            _ => {
                return Err(match self.dialect() {
                    Dialect::Pi => SessionError::InvalidPiSession { path: path.to_path_buf() },
                    Dialect::Omp => SessionError::CannotResume { path: path.to_path_buf() },
                });
            }
        }
        self.file = Some(path.to_path_buf());
        self.bodies = bodies;
        self.diagnostics = parsed.diagnostics;
        let mut records = parsed.records;
        if self.dialect() == Dialect::Pi && !parsed.ends_with_newline {
            if write && repair_final_newline(&*storage, path, stat.size)? {
                report.wrote = true;
            }
            report.repaired_final_newline = true;
        }
        let migration = session_migrate::migrate(&mut records, &mut || {
            ids::new_entry_id(self.dialect(), &mut rand::rng(), |_| false)
        });
        report.migrated = migration.ran();
        if report.migrated {
            report.migrated_from = migration.found_version.clone();
        }
        let header = records.remove(0);
        if let Some(cwd) = header.get_str("cwd")
            && !(self.dialect() == Dialect::Pi && cwd.is_empty())
        {
            self.cwd = cwd.to_owned();
        }
        match self.dialect() {
            Dialect::Pi => {
                self.header = header;
                self.replace_entries(records, None);
                let mut size = parsed.byte_len as u64;
                if report.wrote {
                    // The final newline this open appended.
                    size += 1;
                }
                // An unrecognised version counts as migrated but changes no byte: pi
                // would rewrite the same file on every open; we write nothing.
                if migration.changed() && write {
                    let expected = stat.size + u64::from(report.repaired_final_newline);
                    size = self.publish(path, ExpectedSize::Bytes(expected))?;
                    report.wrote = true;
                }
                self.persistence = Persistence::Pi(PiState { flushed: true, size: Some(size) });
            }
            Dialect::Omp => {
                self.slot = Some(parsed.title_slot.clone().unwrap_or_else(|| TitleSlot {
                    title: String::new(),
                    source: None,
                    updated_at: header.get_str("timestamp").unwrap_or_default().to_owned(),
                }));
                self.header = fold_slot(&header, parsed.title_slot.as_ref());
                let records = self.resolve_blobs(records);
                self.replace_entries(records, None);
                self.persistence = Persistence::Omp(OmpState {
                    file_is_current: true,
                    force_file_creation: true,
                    rewrite_required: report.migrated || parsed.malformed > 0,
                    expected_size: Some(parsed.byte_len as u64),
                    ..OmpState::default()
                });
            }
        }
        // The stat taken before the read describes what was read only when the read
        // found exactly its bytes and nothing was written since.
        self.seen = (!report.wrote && parsed.byte_len as u64 == stat.size).then_some(stat);
        Ok(report)
    }

    fn resolve_blobs(&mut self, records: Vec<Record>) -> Vec<Record> {
        let Some(blobs) = self.env.blobs.clone() else {
            return records;
        };
        // A record whose text is still in the file is resolved when it is read (the
        // bodies' hook, see `read_indexed`).
        records.into_iter().map(|r| if r.is_loaded() { resolve_blob_refs(r, &blobs) } else { r }).collect()
    }

    fn counts_as_conversation(&self, r: &Record) -> bool {
        matches!(
            (self.dialect(), r.message_role()),
            (Dialect::Pi, Some("user" | "assistant")) | (Dialect::Omp, Some("assistant"))
        )
    }

    // ------------------------------------------------------------------ reads

    /// Returns the dialect.
    pub fn dialect(&self) -> Dialect {
        self.persistence.dialect()
    }

    /// Returns the header (omp: with the title slot folded in).
    pub fn header(&self) -> &Record {
        &self.header
    }

    /// Returns the session id.
    pub fn session_id(&self) -> &str {
        self.header.id().unwrap_or_default()
    }

    /// Returns the session file (`None` in memory).
    pub fn session_file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Returns the session's working directory.
    pub fn cwd(&self) -> &str {
        &self.cwd
    }

    /// Sets the working directory the session runs in (not written to the header).
    pub(crate) fn set_cwd(&mut self, cwd: &str) {
        cwd.clone_into(&mut self.cwd);
    }

    /// Returns the entry tree (index, leaf, labels, context).
    pub fn tree(&self) -> &SessionTree {
        &self.tree
    }

    /// Moves the leaf to the entry `id`, as the agents' `branch` does: the next append
    /// becomes its child (a sibling of whatever followed it). Nothing is written; the
    /// tree itself changes only through appends.
    ///
    /// ```
    /// use session::{Dialect, Env, SessionManager};
    /// # fn main() -> Result<(), session::SessionError> {
    /// let mut m = SessionManager::in_memory(Dialect::Pi, "/work", Env::memory());
    /// let first = m.append_custom_entry("note", None)?;
    /// m.append_custom_entry("note", None)?;
    /// m.branch(&first)?;
    /// let sibling = m.append_custom_entry("note", None)?;
    /// assert_eq!(m.tree().get(&sibling).and_then(|r| r.get_str("parentId")), Some(first.as_str()));
    /// assert!(m.branch("no-such-id").is_err());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`SessionError::EntryNotFound`]: no entry has that id (the leaf stays).
    pub fn branch(&mut self, id: &str) -> Result<()> {
        self.tree.branch(id).map_err(|_| SessionError::EntryNotFound { id: id.into() })
    }

    /// Moves the leaf before the first entry (the agents' `resetLeaf`): the next append
    /// starts a new root. Nothing is written.
    pub fn reset_leaf(&mut self) {
        self.tree.reset_leaf();
    }

    /// Returns the environment the session runs on.
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// Returns the session directory new files of this manager go to (`None` in memory).
    pub fn session_dir(&self) -> Option<&Path> {
        self.session_dir.as_deref()
    }

    /// Returns what the parser reported while loading the file.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// Returns the error of a text this session read from its file for an accessor
    /// that cannot return one, and clears it.
    ///
    /// A large session keeps the text of most records in its file until they are
    /// first read ([`session_model::span`]): [`Record::text`] and what is built on it
    /// then read the file. Should that read fail (the disk failed, or another program
    /// changed the file in place since it was opened), the record reads as `null`
    /// and the error waits here. The manager's own operations check it and return it;
    /// code that reads records itself calls this when it is done, or
    /// [`SessionManager::load_texts`] first.
    pub fn check_reads(&self) -> Result<()> {
        match self.bodies.as_ref().and_then(|b| b.take_failure()) {
            Some(e) => Err(self.read_error(e)),
            None => Ok(()),
        }
    }

    /// Returns how many texts of records left in the file were read from it since the
    /// session was opened (0 when every text was in memory from the start).
    pub fn texts_read(&self) -> u64 {
        self.bodies.as_ref().map_or(0, |b| b.reads())
    }

    /// Reads into memory the texts of `records` that are still in the session's file,
    /// nearby ones together, so that reading them afterwards cannot fail.
    pub fn load_texts<'a>(&self, records: impl IntoIterator<Item = &'a Record>) -> Result<()> {
        session_model::span::load_all(records).map_err(|e| self.read_error(e))
    }

    /// The error of a failed read of the session's file.
    fn read_error(&self, e: std::io::Error) -> SessionError {
        let path = self.file.clone().unwrap_or_default();
        SessionError::Store(StoreError::io(session_store::Op::Read, &path, e))
    }

    /// Returns the session name: pi's latest `session_info`, omp's title.
    pub fn session_name(&self) -> Option<String> {
        match self.dialect() {
            Dialect::Pi => self.tree.session_info_name(),
            Dialect::Omp => self.header.get_str("title").filter(|t| !t.is_empty()).map(str::to_owned),
        }
    }

    // ------------------------------------------------------------------ appends

    fn next_base(&self) -> Base {
        let id = ids::new_entry_id(self.dialect(), &mut rand::rng(), |id| self.tree.contains_id(id));
        Base { id, parent_id: self.tree.next_parent().map(str::to_owned), timestamp: self.env.now_iso() }
    }

    /// Appends a record built by `build` (given the next id, parent and timestamp),
    /// persists it, and returns its id.
    ///
    /// pi: on a write failure the append is undone and the error returned. omp (which
    /// never throws from an append): the entry is kept, the error latched
    /// ([`SessionManager::persistence_error`], returned by [`SessionManager::flush`]) and
    /// `Ok` returned; the next append rewrites the whole file, which clears the latch when
    /// it works. A write conflict (the file changed under another writer) is returned and
    /// undoes the append in both dialects, and keeps failing: the session never clobbers
    /// the other writer's lines.
    pub fn append_with(&mut self, build: impl FnOnce(&Base) -> Record) -> Result<EntryId> {
        let base = self.next_base();
        let record = build(&base);
        self.append_record(record)?;
        Ok(base.id.into())
    }

    /// [`SessionManager::append_with`] that undoes the append and returns the error when
    /// its write fails, in both dialects (omp's renames rethrow).
    pub(crate) fn append_with_strict(&mut self, build: impl FnOnce(&Base) -> Record) -> Result<EntryId> {
        let base = self.next_base();
        let record = build(&base);
        self.append_record_as(record, false)?;
        Ok(base.id.into())
    }

    fn append_record(&mut self, record: Record) -> Result<()> {
        self.append_record_as(record, self.dialect() == Dialect::Omp)
    }

    /// Appends `record` and persists it. `lenient` is omp's never-throw append: a write
    /// that fails keeps the entry in memory, latches the error (the first one wins) and
    /// returns `Ok`; the next append rewrites the whole file and, when that works (or
    /// lands without its directory sync), clears the latch. A write conflict (the file changed under another writer) and a
    /// read-only manager still undo the append and return the error. Otherwise (pi, and
    /// omp's renames) a failed write undoes the append and returns the error.
    fn append_record_as(&mut self, record: Record, lenient: bool) -> Result<()> {
        self.writable()?;
        let previous_leaf = self.tree.leaf_id().map(str::to_owned);
        let conversation_before = self.has_conversation;
        if !self.has_conversation && self.counts_as_conversation(&record) {
            self.has_conversation = true;
        }
        // The tree and the write share the record (an `Arc`): no copy of the line.
        let written = record.clone();
        self.tree.append(record)?;
        let Err(e) = self.persist_appended(&written.line()) else {
            return Ok(());
        };
        if lenient && !is_conflict(&e) {
            // A write that landed (not yet durable) is in the file: it healed any latched
            // failure, and latching it would only cost the next append a full rewrite.
            if !e.landed() {
                self.note_failure(&e);
                if let Persistence::Omp(omp) = &mut self.persistence {
                    omp.file_is_current = false;
                    omp.rewrite_required = true;
                }
            }
            return Ok(());
        }
        if e.landed() {
            // In the file (not yet durable): kept, and the error says so.
            return Err(e);
        }
        self.tree.pop_last(previous_leaf);
        self.has_conversation = conversation_before;
        Err(e)
    }

    /// Latches `e` as the session's persistence failure unless one is latched already.
    fn note_failure(&mut self, e: &SessionError) {
        if self.failure.is_none() {
            self.failure = Some(copy_error(e, self.file.as_deref()));
        }
    }

    /// Returns the latched persistence failure: the first write error since the last
    /// successful full rewrite (omp), or of the append writer (pi). omp's appends do not
    /// return it ([`SessionManager::append_message`] and the others return `Ok` and keep
    /// the entry); [`SessionManager::flush`] and [`SessionManager::flush_sync`] do.
    pub fn persistence_error(&self) -> Option<&SessionError> {
        self.failure.as_ref()
    }

    fn persist_appended(&mut self, line: &str) -> Result<()> {
        if !self.persist || self.file.is_none() {
            return Ok(());
        }
        let has_conversation = self.has_conversation;
        let latched = self.failure.is_some();
        match &mut self.persistence {
            Persistence::Pi(pi) => {
                if !pi.flushed {
                    if !has_conversation {
                        return Ok(());
                    }
                    // pi creates the file exclusively (`wx`); we publish it atomically with
                    // the same must-not-exist check, so a crash or a full disk never
                    // leaves a partial file that would block every later first write.
                    let published = self.publish_current(ExpectedSize::Missing);
                    let landed = match &published {
                        Ok(size) => Some(*size),
                        Err(e) => e.landed_size(),
                    };
                    if let Some(size) = landed
                        && let Persistence::Pi(pi) = &mut self.persistence
                    {
                        pi.flushed = true;
                        pi.size = Some(size);
                    }
                    return published.map(|_| ());
                }
                self.append_line(line)
            }
            Persistence::Omp(omp) => {
                if omp.in_batch {
                    // Staged: the batch's one atomic rewrite writes it.
                    omp.rewrite_required = true;
                    return Ok(());
                }
                if latched {
                    // A latched failure: the full rewrite is the writability probe.
                    omp.rewrite_required = true;
                }
                if !(omp.force_file_creation || omp.file_is_current || has_conversation) {
                    omp.file_is_current = false;
                    return Ok(());
                }
                if omp.draft_cleanup_armed {
                    return self.persist_beside_draft_cleanup(line);
                }
                if !omp.file_is_current || omp.rewrite_required {
                    return self.rewrite_omp();
                }
                self.append_omp_line(line)
            }
        }
    }

    /// omp's hot path: the line as omp persists it, appended, and the expected size
    /// moved past it.
    fn append_omp_line(&mut self, line: &str) -> Result<()> {
        let line = persist_line(Dialect::Omp, &self.env, line)?;
        self.append_line(&line)?;
        if let Persistence::Omp(omp) = &mut self.persistence {
            omp.expected_size = omp.expected_size.map(|s| s + line.len() as u64 + 1);
        }
        Ok(())
    }

    fn append_line(&mut self, line: &str) -> Result<()> {
        if self.writer.is_none() {
            let Some(path) = self.file.as_deref() else { return Ok(()) };
            self.writer = Some(self.env.storage.open_writer(path, self.env.durability)?);
        }
        let writer = self.writer.as_mut().expect("writer was just opened");
        self.line_buf.clear();
        self.line_buf.extend_from_slice(line.as_bytes());
        self.line_buf.push(b'\n');
        self.seen = None;
        match writer.append(&self.line_buf) {
            Ok(()) => {
                if let Persistence::Pi(pi) = &mut self.persistence {
                    pi.size = pi.size.map(|n| n + self.line_buf.len() as u64);
                }
                Ok(())
            }
            Err(e) => {
                if let (Persistence::Pi(pi), StoreError::RollbackFailed { .. }) = (&mut self.persistence, &e) {
                    // The file may end in part of the line: its size is no longer known.
                    pi.size = None;
                }
                if self.dialect() == Dialect::Omp {
                    // omp's writer is opened afresh after a failure; pi's stays failed.
                    self.close_writer();
                }
                let e = SessionError::Store(e);
                self.note_failure(&e);
                Err(e)
            }
        }
    }

    /// Rewrites the whole omp session at its file, atomically, guarded by the size last
    /// seen. Success (or a replace that landed without its directory sync) clears the
    /// latched failure; a failure latches it and leaves the file to the next rewrite.
    fn rewrite_omp(&mut self) -> Result<()> {
        self.close_writer();
        let Persistence::Omp(omp) = &self.persistence else {
            return Err(wrong_dialect("a full omp rewrite", Dialect::Pi));
        };
        let fresh_file = omp.expected_size.is_none();
        let expected = self.expected_for_rewrite(omp.expected_size);
        let published = self.publish_current(expected);
        self.seen = None;
        let landed = match &published {
            Ok(size) => Some(*size),
            Err(SessionError::Store(e)) => e.landed(),
            Err(_) => None,
        };
        if let Persistence::Omp(omp) = &mut self.persistence {
            if let Some(size) = landed {
                // The file is ours now, synced or not: the next write builds on it.
                omp.expected_size = Some(size);
                omp.file_is_current = true;
                omp.rewrite_required = false;
            } else {
                omp.file_is_current = false;
                omp.rewrite_required = true;
            }
        }
        if landed.is_some() {
            self.failure = None;
            if fresh_file {
                // The session has materialised: its breadcrumb is no longer `fresh`.
                self.breadcrumb(false);
            }
        }
        match published {
            Ok(_) => Ok(()),
            Err(e) if landed.is_some() => Err(e),
            Err(e) => {
                self.note_failure(&e);
                Err(e)
            }
        }
    }

    /// Returns the size of the session's file as this manager last read or wrote it
    /// (`None`: no file yet, or not known).
    pub(crate) fn known_size(&self) -> Option<u64> {
        match &self.persistence {
            Persistence::Pi(pi) => pi.size.filter(|_| pi.flushed),
            Persistence::Omp(omp) => omp.expected_size,
        }
    }

    /// Returns the precondition of a full rewrite of a file this manager last knew to
    /// hold `size` bytes (`None`: no file): the very file read when nothing was written
    /// since ([`ExpectedSize::Unchanged`]), else its size.
    fn expected_for_rewrite(&self, size: Option<u64>) -> ExpectedSize {
        match (size, &self.seen) {
            (Some(n), Some(seen)) if seen.size == n => ExpectedSize::unchanged(Some(seen)),
            (Some(n), _) => ExpectedSize::Bytes(n),
            (None, _) => ExpectedSize::Missing,
        }
    }

    /// The whole-file view of this session: what a full write puts on disk.
    fn body(&self) -> Body<'_> {
        Body {
            dialect: self.dialect(),
            env: &self.env,
            header: &self.header,
            slot: self.slot.as_ref(),
            entries: self.tree.entries(),
            source: self.file.as_deref(),
        }
    }

    /// Publishes the whole session at `path` (see [`Body::publish`]).
    fn publish(&self, path: &Path, expected: ExpectedSize) -> Result<u64> {
        self.body().publish(path, expected)
    }

    /// [`SessionManager::publish`] to the session's own file (none: nothing to do).
    fn publish_current(&self, expected: ExpectedSize) -> Result<u64> {
        match self.file.as_deref() {
            Some(path) => self.publish(path, expected),
            None => Ok(0),
        }
    }

    fn close_writer(&mut self) {
        if let Some(w) = self.writer.take() {
            let _ = w.close();
        }
    }

    /// Writes any buffered appends and returns the first write error, if one happened.
    ///
    /// omp: the latched failure ([`SessionManager::persistence_error`]) is returned until
    /// a full rewrite succeeds (the next append tries one).
    pub fn flush(&mut self) -> Result<()> {
        if let Some(w) = self.writer.as_mut()
            && let Err(e) = w.flush()
        {
            let e = SessionError::Store(e);
            self.note_failure(&e);
            return Err(e);
        }
        match &self.failure {
            Some(e) => Err(copy_error(e, self.file.as_deref())),
            None => Ok(()),
        }
    }

    /// Writes the whole session to its file now, atomically, in place of what is there
    /// (omp's `rewriteEntries`): a migration done at open, or edits made in memory,
    /// become the file. Fails with [`StoreError::Conflict`] (and writes nothing) when the
    /// file changed since this manager last read or wrote it: another size, or, when
    /// this manager has not written it since it read it, any write at all (the file's
    /// identity: [`ExpectedSize::Unchanged`]). pi itself checks nothing; a line another
    /// process appended is never written over here. The file keeps its mode. Lines
    /// another writer appended between the check and the rename are carried over by the
    /// file storage (see [`session_store::atomic`]).
    pub fn rewrite_entries(&mut self) -> Result<()> {
        self.writable()?;
        self.not_in_batch()?;
        let path = self.file.clone().ok_or_else(|| SessionError::NotFound { path: PathBuf::new() })?;
        match &self.persistence {
            Persistence::Omp(_) => self.rewrite_omp(),
            &Persistence::Pi(PiState { flushed, size }) => {
                self.close_writer();
                let expected = match (flushed, size) {
                    (_, Some(n)) => self.expected_for_rewrite(Some(n)),
                    (false, None) => ExpectedSize::Missing,
                    // A partial write that could not be removed: only the file knows its
                    // size now.
                    (true, None) => match self.env.storage.stat(&path)? {
                        Some(st) => ExpectedSize::Bytes(st.size),
                        None => ExpectedSize::Missing,
                    },
                };
                let published = self.publish_current(expected);
                self.seen = None;
                let landed = match &published {
                    Ok(size) => Some(*size),
                    Err(e) => e.landed_size(),
                };
                if let Some(size) = landed {
                    self.persistence = Persistence::Pi(PiState { flushed: true, size: Some(size) });
                }
                published.map(|_| ())
            }
        }
    }

    /// Flushes and closes the session's writer. omp: then removes the session's file and
    /// artifacts if it was written only to carry a draft that is gone since (see
    /// [`Omp::save_draft`](crate::Omp::save_draft)).
    pub fn close(mut self) -> Result<()> {
        self.flush()?;
        if let Some(w) = self.writer.take() {
            w.close()?;
        }
        self.drop_if_only_for_draft()?;
        Ok(())
    }

    // ------------------------------------------------------------------ typed appends

    /// Appends a `message` entry as a child of the leaf, persists it by the dialect's
    /// rule and returns its id; the entry becomes the leaf. The message is the typed
    /// model ([`model::typed::Message`](crate::model::typed::Message) or any of its
    /// role structs), written as the agents write it; a [`Message::Unknown`] must be an
    /// object with a string `role` (anything else is refused before a byte is written;
    /// [`SessionManager::append_message_json`] writes any JSON).
    ///
    /// [`Message::Unknown`]: crate::model::typed::Message::Unknown
    ///
    /// ```
    /// use session::model::typed::{AssistantMessage, ContentBlock, ToolResultMessage, UserMessage};
    /// use session::{Dialect, Env, SessionManager};
    /// # fn main() -> Result<(), session::SessionError> {
    /// let mut m = SessionManager::in_memory(Dialect::Pi, "/work", Env::memory());
    /// let q = m.append_message(UserMessage::new("How many files?", 1.0))?;
    /// let call = ContentBlock::tool_call("call_1", "bash", serde_json::json!({"command": "ls | wc -l"}));
    /// let mut turn = AssistantMessage::new(vec![call], 2.0);
    /// turn.stop_reason = Some("toolUse".into());
    /// m.append_message(turn)?;
    /// m.append_message(ToolResultMessage::new("call_1", "bash", "3", false, 3.0))?;
    /// let a = m.append_message(AssistantMessage::new(vec![ContentBlock::text("Three.")], 4.0))?;
    /// assert_eq!(m.tree().get_branch(None).len(), 4);
    /// assert_eq!(m.tree().leaf_id(), Some(a.as_str()));
    /// assert_ne!(q, a);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`SessionError::Typed`] for an unknown message without a string `role`; else as
    /// every append (a refused or failed write).
    pub fn append_message(&mut self, message: impl Into<session_model::typed::Message>) -> Result<EntryId> {
        let message = message.into();
        if let session_model::typed::Message::Unknown(v) = &message
            && !v.get("role").is_some_and(Value::is_string)
        {
            return Err(session_model::typed::TypedError::Field {
                path: "role".to_owned(),
                message: "a message needs a string role (append_message_json writes any JSON)".to_owned(),
            }
            .into());
        }
        self.append_message_json(message.to_value())
    }

    /// Appends a `message` entry holding `message` as given, whatever JSON it is: the
    /// escape hatch beside [`SessionManager::append_message`], for messages the typed
    /// model does not describe. Nothing checks it; the agents read what they can of it.
    ///
    /// ```
    /// use session::{Dialect, Env, SessionManager};
    /// # fn main() -> Result<(), session::SessionError> {
    /// let mut m = SessionManager::in_memory(Dialect::Pi, "/work", Env::memory());
    /// let q = m.append_message_json(serde_json::json!({"role": "user", "content": "2+2?", "timestamp": 1}))?;
    /// let a = m.append_message_json(serde_json::json!({
    ///     "role": "assistant", "content": [{"type": "text", "text": "4"}], "timestamp": 2,
    /// }))?;
    /// assert_eq!(m.tree().get(&a).and_then(|r| r.parent_id()), Some(q.as_str()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn append_message_json(&mut self, message: Value) -> Result<EntryId> {
        self.append_with(|b| entries::pi::message(b, message))
    }

    /// Appends a `custom` entry (extension state, never in the context).
    pub fn append_custom_entry(&mut self, custom_type: &str, data: Option<Value>) -> Result<EntryId> {
        self.append_with(|b| entries::pi::custom(b, custom_type, data))
    }

    /// Appends a `label` on `target_id` (`None` or `""` clears it).
    pub fn append_label_change(&mut self, target_id: &str, label: Option<&str>) -> Result<EntryId> {
        if self.tree.get(target_id).is_none() {
            return Err(SessionError::EntryNotFound { id: target_id.to_owned() });
        }
        self.append_with(|b| entries::pi::label(b, target_id, label))
    }

    pub(crate) fn next_base_public(&self) -> Base {
        self.next_base()
    }

    pub(crate) fn append_prebuilt(&mut self, record: Record) -> Result<()> {
        self.append_record(record)
    }

    /// Updates omp's title in the header and the title slot, in memory.
    pub(crate) fn retitle(&mut self, title: &str, source: &str) {
        let now = self.env.now_iso();
        self.retitle_at(title, source, now);
    }

    /// [`Self::retitle`] with the slot's `updatedAt` given (an import takes its source's).
    pub(crate) fn retitle_at(&mut self, title: &str, source: &str, updated_at: String) {
        self.header = self.header.map_value(|v| {
            if let Value::Object(m) = v {
                m.insert("title".into(), title.into());
                m.insert("titleSource".into(), source.into());
            }
        });
        self.slot = Some(TitleSlot { title: title.to_owned(), source: Some(source.to_owned()), updated_at });
    }

    /// The in-memory header and title slot, to restore with [`Self::restore_title`].
    pub(crate) fn title_state(&self) -> (Record, Option<TitleSlot>) {
        (self.header.clone(), self.slot.clone())
    }

    /// Undoes [`Self::retitle`] after a failed write.
    pub(crate) fn restore_title(&mut self, (header, slot): (Record, Option<TitleSlot>)) {
        self.header = header;
        self.slot = slot;
    }

    /// Whether the next omp append goes to the end of the current file (rather than
    /// into a full rewrite, or nowhere while the file waits for its first write).
    pub(crate) fn appends_in_place(&self) -> bool {
        let Persistence::Omp(omp) = &self.persistence else { return false };
        self.persist
            && self.file.is_some()
            && omp.file_is_current
            && !omp.rewrite_required
            && !omp.in_batch
            && self.failure.is_none()
    }

    /// Persists a changed title slot after an append in place: the slot is written
    /// over the file's first line, as omp does, or when that cannot be done the whole
    /// file is rewritten.
    pub(crate) fn persist_title(&mut self) -> Result<()> {
        // Written in place or whole: either way no longer the file read.
        let overwritten = self.overwrite_slot();
        self.seen = None;
        if matches!(overwritten, Ok(true)) {
            return Ok(());
        }
        self.rewrite_omp()
    }

    /// Writes the title slot over the first line of the session file, in place
    /// (`updateSessionTitle`); returns whether it did. It does not when that line is
    /// not a slot of exactly [`SLOT_BYTES`] bytes. The slot is all it writes, so lines
    /// another writer appended meanwhile do not stop it: the storage checks the size it
    /// has just seen (a file replaced or cut in between is looked at again), and an
    /// append that lands between the look and the write makes it look again, a few
    /// times.
    fn overwrite_slot(&self) -> Result<bool> {
        const LOOKS: usize = 8;
        let expected_size = match &self.persistence {
            Persistence::Omp(omp) => omp.expected_size,
            Persistence::Pi(_) => None,
        };
        let (Some(path), Some(_), Some(slot)) = (self.file.as_deref(), expected_size, self.slot.as_ref()) else {
            return Ok(false);
        };
        let line = slot.to_line()?;
        let storage = &self.env.storage;
        for _ in 0..LOOKS {
            let Some(size) = storage.stat(path)?.map(|s| s.size) else { return Ok(false) };
            let (head, _) = storage.read_slices(path, SLOT_BYTES as u64, 0)?;
            let is_slot = head.len() == SLOT_BYTES
                && head.iter().position(|&b| b == b'\n') == Some(SLOT_BYTES - 1)
                && std::str::from_utf8(&head[..SLOT_BYTES - 1]).ok().and_then(TitleSlot::parse).is_some();
            if !is_slot {
                return Ok(false);
            }
            match storage.overwrite_prefix(path, line.as_bytes(), ExpectedSize::Bytes(size), self.env.durability) {
                Err(StoreError::Conflict { .. }) => continue,
                done => return done.map(|()| true).map_err(Into::into),
            }
        }
        Ok(false)
    }

    /// Returns pi's system-message snapshot of the current context
    /// (`getCurrentSystemMessage` over the projected messages), without its timestamp fixed.
    pub(crate) fn system_snapshot(&self) -> Option<Value> {
        let context = session_tree::pi::build_context(&self.tree, session_tree::Leaf::Current);
        let systems = context
            .messages()
            .filter(|text| text.contains("system"))
            .filter_map(session_model::json::parse)
            .collect::<Vec<_>>();
        crate::snapshot::current_system_message(systems)
    }

    // ------------------------------------------------------------------ whole-file operations

    /// Extracts the path from the root to `leaf_id` into a new session file next to
    /// this one (`createBranchedSession`) and switches this manager to it. Returns
    /// the new file (`None` in memory).
    ///
    /// To branch within the session instead, move the leaf:
    /// [`SessionManager::branch`], and the next append becomes a sibling.
    ///
    /// ```
    /// use session::{Dialect, Env, SessionManager};
    /// # fn main() -> Result<(), session::SessionError> {
    /// let mut m = SessionManager::create(Dialect::Omp, "/work", std::path::Path::new("/s"), Env::memory())?;
    /// let first = m.append_message_json(serde_json::json!({"role": "user", "content": "a", "timestamp": 1}))?;
    /// m.append_message_json(serde_json::json!({"role": "user", "content": "b", "timestamp": 2}))?;
    /// let old = m.session_file().map(std::path::Path::to_path_buf);
    /// let new = m.create_branched_session(&first)?.expect("persisted");
    /// assert_ne!(Some(new), old);
    /// assert_eq!(m.tree().entries().len(), 1, "only the path to `first`");
    /// # Ok(())
    /// # }
    /// ```
    pub fn create_branched_session(&mut self, leaf_id: &str) -> Result<Option<PathBuf>> {
        self.writable()?;
        self.not_in_batch()?;
        let path: Vec<Record> = self.tree.get_branch(Some(leaf_id)).into_iter().cloned().collect();
        if path.is_empty() {
            return Err(SessionError::EntryNotFound { id: leaf_id.to_owned() });
        }
        let old_file = self.file.clone();
        let parent_file = if self.persist { old_file.as_deref() } else { None };
        let id = self.env.new_session_id();
        let ts = self.env.now_iso();
        let mut kept = match self.dialect() {
            Dialect::Pi => {
                self.header =
                    entries::pi::header(&id, &ts, &self.cwd, parent_file.map(|p| p.to_str().unwrap_or_default()));
                pi_branch_entries(&path)
            }
            Dialect::Omp => {
                self.header = self.omp_branch_header(&id, &ts, parent_file);
                path.iter().filter(|r| r.entry_type() != EntryType::Label).cloned().collect()
            }
        };
        let labels = self.carried_labels(&kept, &ts);
        kept.extend(labels);
        self.close_writer();
        self.slot = (self.dialect() == Dialect::Omp).then(|| TitleSlot {
            title: self.header.get_str("title").unwrap_or_default().to_owned(),
            source: self.header.get_str("titleSource").map(str::to_owned),
            updated_at: ts.clone(),
        });
        let has_conversation = kept.iter().any(|r| self.counts_as_conversation(r));
        let new_file = self.persist.then(|| {
            let dir = self.session_dir.clone().unwrap_or_default();
            dir.join(session_discovery::session_file_name(&ts, &id))
        });
        // pi writes the new file only once it holds a conversation; omp always does.
        let write_to = new_file.as_deref().filter(|_| self.dialect() == Dialect::Omp || has_conversation);
        let published = self.replace_entries(kept, write_to);
        let Some(new_file) = new_file else {
            return Ok(None);
        };
        self.switch_to_new_file(new_file.clone(), published)?;
        Ok(Some(new_file))
    }

    /// The header of an omp branch: a new id and time, the cwd, the title carried,
    /// `parentSession` = the old file (when persisted), additional directories carried.
    fn omp_branch_header(&self, id: &str, ts: &str, parent_file: Option<&Path>) -> Record {
        let mut h = serde_json::Map::new();
        h.insert("type".into(), "session".into());
        h.insert("version".into(), 3.into());
        h.insert("id".into(), id.into());
        h.insert("timestamp".into(), ts.into());
        h.insert("cwd".into(), self.cwd.clone().into());
        for key in ["title", "titleSource"] {
            if let Some(v) = self.header.get(key) {
                h.insert(key.into(), v.clone());
            }
        }
        if let Some(p) = parent_file {
            h.insert("parentSession".into(), p.to_string_lossy().into_owned().into());
        }
        if let Some(v) = self.header.get("additionalDirectories") {
            h.insert("additionalDirectories".into(), v.clone());
        }
        Record::from_value(Value::Object(h))
    }

    /// The labels in effect whose target is among `kept`, re-created as new `label`
    /// entries chained after the last kept entry (pi keeps each label's time, omp
    /// stamps them now).
    fn carried_labels(&self, kept: &[Record], ts: &str) -> Vec<Record> {
        let labels: Vec<(&str, &str, Option<&str>)> =
            self.tree.labels().map(|(t, l)| (t, l, self.tree.label_timestamp(t))).collect();
        if labels.is_empty() {
            return Vec::new();
        }
        let kept_ids: std::collections::HashSet<&str> = kept.iter().filter_map(Record::id).collect();
        let mut new_ids: std::collections::HashSet<String> = std::collections::HashSet::new();
        let mut parent = kept.last().and_then(|r| r.id().map(str::to_owned));
        let mut out = Vec::new();
        for (target, label, label_ts) in labels {
            if !kept_ids.contains(target) {
                continue;
            }
            let new_id =
                ids::new_entry_id(self.dialect(), &mut rand::rng(), |i| kept_ids.contains(i) || new_ids.contains(i));
            new_ids.insert(new_id.clone());
            let stamp = match self.dialect() {
                Dialect::Pi => label_ts.unwrap_or(ts).to_owned(),
                Dialect::Omp => self.env.now_iso(),
            };
            out.push(entries::pi::label(&Base::new(new_id.clone(), parent.as_deref(), stamp), target, Some(label)));
            parent = Some(new_id);
        }
        out
    }

    /// Makes `file` this manager's session file after a branch wrote it (`published`:
    /// what the write gave, `None` when pi waits for a conversation).
    fn switch_to_new_file(&mut self, file: PathBuf, published: Option<Result<u64>>) -> Result<()> {
        self.file = Some(file);
        self.seen = None;
        self.failure = None;
        // What landed: the size of a whole file (synced or not), or nothing.
        let (landed, result) = match published {
            None => (None, Ok(())),
            Some(Ok(size)) => (Some(size), Ok(())),
            Some(Err(e)) => (e.landed_size(), Err(e)),
        };
        match self.dialect() {
            Dialect::Pi => {
                // Not written (no conversation yet, or the write failed): the first
                // write after this creates the file whole.
                self.persistence = Persistence::Pi(PiState { flushed: landed.is_some(), size: landed });
            }
            Dialect::Omp => {
                let mut omp = OmpState { force_file_creation: true, file_is_current: true, ..OmpState::default() };
                match landed {
                    Some(size) => omp.expected_size = Some(size),
                    None => {
                        // Nothing whole is on disk: the next write publishes the branch
                        // whole, never an append to a file without its header.
                        omp.file_is_current = false;
                        omp.rewrite_required = true;
                    }
                }
                self.persistence = Persistence::Omp(omp);
                if landed.is_some() {
                    self.breadcrumb(false);
                }
            }
        }
        // omp latches the failure until the full rewrite heals it; pi returns it only.
        if let Err(e) = &result
            && landed.is_none()
            && self.dialect() == Dialect::Omp
        {
            self.note_failure(e);
        }
        result
    }

    /// Makes `entries` the session's entries and, when `target` is given, writes the
    /// whole session (current header and title slot) to that new file, returning what
    /// the write gave. For a large session the file is written on a second thread
    /// while the new index is built and the old one freed.
    ///
    /// When writing, `entries` must be what the tree keeps ([`SessionTree::keeps`]),
    /// so that the file holds exactly the tree's entries.
    fn replace_entries(&mut self, entries: Vec<Record>, target: Option<&Path>) -> Option<Result<u64>> {
        debug_assert!(target.is_none() || entries.iter().all(|r| SessionTree::keeps(self.dialect(), r)));
        self.has_conversation = entries.iter().any(|r| self.counts_as_conversation(r));
        let dialect = self.dialect();
        let old = std::mem::replace(&mut self.tree, SessionTree::new(dialect, Vec::new()));
        let (tree, written) = self.publish_while_indexing(entries, target, old);
        self.tree = tree;
        written
    }

    /// [`SessionManager::replace_entries`] without touching `self`: returns the new
    /// index (dropping `old` meanwhile) and what the write gave.
    fn publish_while_indexing(
        &self,
        entries: Vec<Record>,
        target: Option<&Path>,
        old: SessionTree,
    ) -> (SessionTree, Option<Result<u64>>) {
        /// Below this many entries a thread costs more than it saves.
        const PARALLEL_FROM: usize = 2_000;
        let Some(path) = target else {
            return (SessionTree::new(self.dialect(), entries), None);
        };
        let body = Body {
            dialect: self.dialect(),
            env: &self.env,
            header: &self.header,
            slot: self.slot.as_ref(),
            entries: &entries,
            source: self.file.as_deref(),
        };
        if entries.len() < PARALLEL_FROM || self.env.parallelism.threads() < 2 {
            let written = body.publish(path, ExpectedSize::Missing);
            return (SessionTree::new(self.dialect(), entries), Some(written));
        }
        std::thread::scope(|s| {
            let writer = s.spawn(|| body.publish(path, ExpectedSize::Missing));
            let tree = SessionTree::new(self.dialect(), entries.clone());
            drop(old);
            let written = writer.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (tree, Some(written))
        })
    }
}

/// Returns whether `e` is a write conflict: the file changed under another writer.
pub(crate) fn is_conflict(e: &SessionError) -> bool {
    matches!(e, SessionError::Store(StoreError::Conflict { .. }))
}

/// Returns [`SessionError::WrongDialect`] for `operation` on a `dialect` session.
pub(crate) fn wrong_dialect(operation: &'static str, dialect: Dialect) -> SessionError {
    SessionError::WrongDialect { operation, dialect }
}

/// Returns a copy of `e` to latch or to report again: storage errors as they are,
/// anything else as a [`SessionError::DiskFailure`] of `path` with its message.
pub(crate) fn copy_error(e: &SessionError, path: Option<&Path>) -> SessionError {
    match e {
        SessionError::Store(s) => SessionError::Store(s.clone()),
        SessionError::DiskFailure { path, message } => {
            SessionError::DiskFailure { path: path.clone(), message: message.clone() }
        }
        other => {
            SessionError::DiskFailure { path: path.unwrap_or(Path::new("")).to_path_buf(), message: other.to_string() }
        }
    }
}

impl Drop for SessionManager {
    fn drop(&mut self) {
        self.close_writer();
    }
}

/// pi's repair of a file without a final newline: appends one, but only onto the
/// `read` bytes: a file that grew since was read in the middle of another writer's line
/// (a torn read), which ends with its own newline. Returns whether it wrote.
pub(crate) fn repair_final_newline(storage: &dyn session_store::Storage, path: &Path, read: u64) -> Result<bool> {
    if storage.stat(path)?.is_some_and(|now| now.size == read) {
        storage.append(path, b"\n")?;
        return Ok(true);
    }
    Ok(false)
}

/// Folds omp's title slot into the header: a non-empty slot title replaces the
/// header's, an empty one removes it; likewise the source.
fn fold_slot(header: &Record, slot: Option<&TitleSlot>) -> Record {
    let Some(slot) = slot else {
        return header.clone();
    };
    let has_title = header.get("title").is_some();
    let has_source = header.get("titleSource").is_some();
    let same_title = header.get_str("title") == Some(slot.title.as_str()) && !slot.title.is_empty();
    let same_source = header.get_str("titleSource") == slot.source.as_deref() && slot.source.is_some();
    if (same_title || (slot.title.is_empty() && !has_title)) && (same_source || (slot.source.is_none() && !has_source))
    {
        return header.clone();
    }
    header.map_value(|v| {
        if let Value::Object(m) = v {
            if slot.title.is_empty() {
                m.shift_remove("title");
            } else {
                m.insert("title".into(), slot.title.clone().into());
            }
            match &slot.source {
                Some(s) => {
                    m.insert("titleSource".into(), s.clone().into());
                }
                None => {
                    m.shift_remove("titleSource");
                }
            }
        }
    })
}

/// pi's branch of `path` (root to leaf): the entries without the labels, each chained
/// to the entry kept before it (a parent that was a dropped label is replaced), and a
/// compaction that kept from a dropped label keeping from the entry after it.
fn pi_branch_entries(path: &[Record]) -> Vec<Record> {
    let mut kept: Vec<Record> = Vec::with_capacity(path.len());
    let mut replaced_by: Vec<(String, Option<String>)> = Vec::new();
    let mut pending: Vec<usize> = Vec::new();
    for r in path {
        if r.entry_type() == EntryType::Label {
            replaced_by.push((r.id().unwrap_or_default().to_owned(), None));
            pending.push(replaced_by.len() - 1);
            continue;
        }
        for i in pending.drain(..) {
            replaced_by[i].1 = r.id().map(str::to_owned);
        }
        let chained = {
            let parent = kept.last().and_then(Record::id);
            r.parent_id() == parent && (parent.is_some() || matches!(r.parent(), session_model::ParentRef::Null))
        };
        let mut rec = r.clone();
        if !chained {
            let parent = kept.last().and_then(|k| k.id().map(str::to_owned));
            rec = rec.map_value(|v| {
                if let Value::Object(m) = v {
                    m.insert("parentId".into(), parent.clone().map_or(Value::Null, Value::from));
                }
            });
        }
        if rec.entry_type() == EntryType::Compaction
            && let Some(fk) = rec.get_str("firstKeptEntryId").map(str::to_owned)
            && Some(fk.as_str()) != rec.id()
            && let Some((_, Some(to))) = replaced_by.iter().find(|(from, _)| *from == fk)
        {
            let to = to.clone();
            rec = rec.map_value(|v| {
                if let Value::Object(m) = v {
                    m.insert("firstKeptEntryId".into(), Value::from(to));
                }
            });
        }
        kept.push(rec);
    }
    kept
}

/// Reads and parses the session file at `path` as `dialect`'s reference reads it,
/// through [`Storage::open_reader`](session_store::Storage::open_reader): a large file
/// is parsed in pieces as it is read, never held whole, and every text of it is kept.
/// The result is what [`session_model::parse_session_bytes`] gives for the file's
/// bytes.
pub(crate) fn read_parsed(
    storage: &dyn session_store::Storage,
    path: &Path,
    dialect: Dialect,
    parallelism: session_model::Parallelism,
) -> Result<session_model::ParsedFile> {
    let (st, reader) = storage.open_reader(path)?;
    session_model::parse_session_at_with(&*reader, st.size, dialect, parallelism)
        .map_err(|e| SessionError::Store(StoreError::io(session_store::Op::Read, path, e)))
}

/// [`read_parsed`] leaving the text of large records in the file
/// ([`session_model::parse_session_spans`]): they are read through the returned
/// [`Bodies`] when first asked for. The bodies are `None` when every text is in memory
/// (a small file). omp's records read later get their blob references resolved as
/// [`SessionManager::open`] resolves the others.
pub(crate) fn read_indexed(
    env: &Env,
    path: &Path,
    dialect: Dialect,
) -> Result<(session_model::ParsedFile, Option<Arc<Bodies>>, IndexUse)> {
    let Some(policy) = env.spans else {
        return Ok((read_parsed(&*env.storage, path, dialect, env.parallelism)?, None, IndexUse::None));
    };
    let read_error = |e| SessionError::Store(StoreError::io(session_store::Op::Read, path, e));
    // The time the file is read at, for the index's racy-write rule.
    let now_ns = env.clock.now_ms().saturating_mul(1_000_000);
    let (st, reader) = env.storage.open_reader(path)?;
    let mut bodies = Bodies::new(reader);
    if dialect == Dialect::Omp
        && let Some(blobs) = env.blobs.clone()
    {
        bodies = bodies.with_hook(Box::new(move |r| resolve_blob_refs(r, &blobs)));
    }
    let bodies = Arc::new(bodies);
    let index = env
        .index_dir
        .as_ref()
        .filter(|_| st.identity.is_some() && st.size >= policy.from_file_size)
        .map(crate::index::IndexDir::new);
    let keep = |parsed: session_model::ParsedFile, how| {
        let spans = parsed.records.iter().any(|r| r.span().is_some());
        (parsed, spans.then(|| Arc::clone(&bodies)), how)
    };
    if let Some(index) = &index
        && let Some((parsed, how, tail)) = index.lookup(path, dialect, &st, &bodies, policy, env.parallelism)
    {
        // A few appended entries are parsed again next time rather than rewriting the
        // whole index for them; past a file-sized tail the index is brought up to date.
        if how == IndexUse::Grown && tail >= policy.from_file_size {
            index.store(path, dialect, &st, &bodies, &parsed, now_ns);
        }
        return Ok(keep(parsed, how));
    }
    let parsed =
        session_model::parse_session_spans(&bodies, st.size, dialect, env.parallelism, policy).map_err(read_error)?;
    let Some(index) = index else { return Ok(keep(parsed, IndexUse::None)) };
    // Only a file that did not change while it was read is indexed.
    if env.storage.stat(path).ok().flatten().is_some_and(|now| crate::freshness::Seen::of_stat(&st).same_stat(&now)) {
        index.store(path, dialect, &st, &bodies, &parsed, now_ns);
    }
    Ok(keep(parsed, IndexUse::Rebuilt))
}

/// Returns `r` with omp's blob references resolved to the images they stand for
/// (unchanged when it holds none, or none resolves).
pub(crate) fn resolve_blob_refs(r: Record, blobs: &session_store::blob::BlobStore) -> Record {
    if !r.text().contains("blob:sha256:") {
        return r;
    }
    match crate::persist::resolve_blob_refs_shared(r.value(), blobs).0 {
        Some(v) => Record::from_value(v),
        None => r,
    }
}

/// Returns `path` made absolute against `base` and lexically normalised
/// (`.`/`..` collapsed, as `path.resolve` does; symlinks are not followed).
pub(crate) fn absolute(base: &Path, path: &Path) -> PathBuf {
    let joined = if path.is_absolute() { path.to_path_buf() } else { base.join(path) };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}
