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
use session_model::{Bodies, Diagnostic, Dialect, EntryType, Record, SLOT_BYTES, TitleSlot, ids};
use session_store::{ExpectedSize, FileStat, StoreError};
use session_tree::SessionTree;

mod branch;
mod drafts;
mod journal;
mod lifecycle;
mod load;

pub use lifecycle::ForkOptions;
pub(crate) use load::{fold_slot, repair_final_newline};

use self::journal::{Journal, NextWrite};
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
    /// The write state: the dialect's persistence rules, the writer, the latched
    /// failure, the file as read.
    pub(crate) journal: Journal,
    diagnostics: Vec<Diagnostic>,
    /// Whether the manager may write: opened read-only, or sealed.
    pub(crate) access: Access,
    /// What the open did (or, read-only, did in memory only).
    load_report: LoadReport,
    /// Where the texts of the records read by position come from (`None`: every text
    /// is in memory).
    pub(crate) bodies: Option<FileTexts>,
}

/// The texts of records read by position and the file they are read from: the
/// session's own file, or for a fork its source until the fork is opened again. A
/// failed read names that file.
pub(crate) struct FileTexts {
    pub(crate) bodies: Arc<Bodies>,
    pub(crate) path: PathBuf,
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

    setters! { NewSessionOptions;
        /// Returns these options with the header's `parentSession`.
        parent_session(parent: &str) => parent_session = Some(parent.to_owned());
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
            journal: Journal::new(dialect),
            diagnostics: Vec::new(),
            access: Access::ReadWrite,
            load_report: LoadReport::default(),
            bodies: None,
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
        match self.journal.in_batch() {
            true => Err(SessionError::InBatch),
            false => Ok(()),
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
                m.slot = (dialect == Dialect::Omp)
                    .then(|| slot_of(&header, header.get_str("timestamp").unwrap_or_default()));
                m.header = header;
            }
            None => m.start_session(&options)?,
        }
        records.retain(|r| SessionTree::keeps(dialect, r));
        m.replace_entries(records, None);
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
        self.journal.reset();
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
            self.journal.on_disk(size);
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

    fn counts_as_conversation(&self, r: &Record) -> bool {
        matches!(
            (self.dialect(), r.message_role()),
            (Dialect::Pi, Some("user" | "assistant")) | (Dialect::Omp, Some("assistant"))
        )
    }

    // ------------------------------------------------------------------ reads

    /// Returns the dialect.
    pub fn dialect(&self) -> Dialect {
        self.journal.dialect()
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
        match self.bodies.as_ref().and_then(|b| b.bodies.take_failure()) {
            Some(e) => Err(self.read_error(e)),
            None => Ok(()),
        }
    }

    /// Returns how many texts of records left in the file were read from it since the
    /// session was opened (0 when every text was in memory from the start), whether for
    /// the records or to write them again; lines a whole-file write copied from the file
    /// as they are are not read, and not counted.
    pub fn texts_read(&self) -> u64 {
        self.bodies.as_ref().map_or(0, |b| b.bodies.reads())
    }

    /// Reads into memory the texts of `records` that are still in the session's file,
    /// nearby ones together, so that reading them afterwards cannot fail.
    pub fn load_texts<'a>(&self, records: impl IntoIterator<Item = &'a Record>) -> Result<()> {
        session_model::span::load_all(records).map_err(|e| self.read_error(e))
    }

    /// The error of a failed read of a text left in the file it names.
    fn read_error(&self, e: std::io::Error) -> SessionError {
        let path = self.texts_file().unwrap_or(Path::new(""));
        SessionError::Store(StoreError::io(session_store::Op::Read, path, e))
    }

    /// The file the texts of records read by position are read from: the one they
    /// were read by position in, else the session's file.
    pub(crate) fn texts_file(&self) -> Option<&Path> {
        self.bodies.as_ref().map(|b| b.path.as_path()).or(self.file.as_deref())
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
                self.journal.stale();
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
        self.journal.note_failure(e, self.file.as_deref());
    }

    /// Returns the latched persistence failure: the first write error since the last
    /// successful full rewrite (omp), or of the append writer (pi). omp's appends do not
    /// return it ([`SessionManager::append_message`] and the others return `Ok` and keep
    /// the entry); [`SessionManager::flush`] and [`SessionManager::flush_sync`] do.
    pub fn persistence_error(&self) -> Option<&SessionError> {
        self.journal.failure()
    }

    fn persist_appended(&mut self, line: &str) -> Result<()> {
        if !self.persist || self.file.is_none() {
            return Ok(());
        }
        match self.journal.next_write(self.has_conversation) {
            NextWrite::Nothing => Ok(()),
            NextWrite::Create => {
                // pi creates the file exclusively (`wx`); we publish it atomically with
                // the same must-not-exist check, so a crash or a full disk never
                // leaves a partial file that would block every later first write.
                self.publish_whole(ExpectedSize::Missing).0
            }
            NextWrite::Append if self.dialect() == Dialect::Pi => self.append_line(line),
            NextWrite::Append => self.append_omp_line(line),
            NextWrite::Rewrite => self.rewrite_omp(),
            NextWrite::BesideDraftCleanup => self.persist_beside_draft_cleanup(line),
        }
    }

    /// omp's hot path: the line as omp persists it, appended (the expected size moves
    /// past it).
    fn append_omp_line(&mut self, line: &str) -> Result<()> {
        let line = persist_line(Dialect::Omp, &self.env, line)?;
        self.append_line(&line)
    }

    fn append_line(&mut self, line: &str) -> Result<()> {
        let Some(path) = self.file.as_deref() else { return Ok(()) };
        self.journal.append_line(&*self.env.storage, self.env.durability, path, line)
    }

    /// Rewrites the whole omp session at its file, atomically, guarded by the size last
    /// seen. Success (or a replace that landed without its directory sync) clears the
    /// latched failure; a failure latches it and leaves the file to the next rewrite.
    fn rewrite_omp(&mut self) -> Result<()> {
        self.journal.close_writer();
        if self.dialect() != Dialect::Omp {
            return Err(wrong_dialect("a full omp rewrite", Dialect::Pi));
        }
        let fresh_file = self.journal.omp_expected_size().is_none();
        let path = self.file.clone().unwrap_or_default();
        let expected = self.journal.rewrite_precondition(&*self.env.storage, &path)?;
        let (published, landed) = self.publish_whole(expected);
        if landed {
            // The file is ours now, synced or not: the next write builds on it.
            self.journal.clear_failure();
            if fresh_file {
                // The session has materialised: its breadcrumb is no longer `fresh`.
                self.breadcrumb(false);
            }
        } else {
            self.journal.stale();
        }
        match published {
            Ok(()) => Ok(()),
            Err(e) if landed => Err(e),
            Err(e) => {
                self.note_failure(&e);
                Err(e)
            }
        }
    }

    /// Returns the size of the session's file as this manager last read or wrote it
    /// (`None`: no file yet, or not known).
    pub(crate) fn known_size(&self) -> Option<u64> {
        self.journal.known_size()
    }

    /// The whole-file view of this session: what a full write puts on disk.
    fn body(&self) -> Body<'_> {
        Body {
            dialect: self.dialect(),
            env: &self.env,
            header: &self.header,
            slot: self.slot.as_ref(),
            entries: self.tree.entries(),
            source: self.texts_file(),
        }
    }

    /// Publishes the whole session at `path` (see [`Body::publish`]).
    fn publish(&self, path: &Path, expected: ExpectedSize) -> Result<u64> {
        self.body().publish(path, expected)
    }

    /// Publishes the whole session over its own file under `expected` and records in
    /// the journal what landed (a whole file of that size, synced or not: the next
    /// write builds on it). Returns the write's result and whether it landed.
    fn publish_whole(&mut self, expected: ExpectedSize) -> (Result<()>, bool) {
        let published = self.publish_current(expected);
        self.journal.written_since_read();
        let landed = match &published {
            Ok(size) => Some(*size),
            Err(e) => e.landed_size(),
        };
        if let Some(size) = landed {
            self.journal.rewritten(size);
        }
        (published.map(drop), landed.is_some())
    }

    /// [`SessionManager::publish`] to the session's own file (none: nothing to do).
    fn publish_current(&self, expected: ExpectedSize) -> Result<u64> {
        match self.file.as_deref() {
            Some(path) => self.publish(path, expected),
            None => Ok(0),
        }
    }

    fn close_writer(&mut self) {
        self.journal.close_writer();
    }

    /// Writes any buffered appends and returns the first write error, if one happened.
    ///
    /// omp: the latched failure ([`SessionManager::persistence_error`]) is returned until
    /// a full rewrite succeeds (the next append tries one).
    pub fn flush(&mut self) -> Result<()> {
        self.journal.flush(self.file.as_deref())
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
        if self.dialect() == Dialect::Omp {
            return self.rewrite_omp();
        }
        self.close_writer();
        let expected = self.journal.rewrite_precondition(&*self.env.storage, &path)?;
        self.publish_whole(expected).0
    }

    /// Flushes and closes the session's writer. omp: then removes the session's file and
    /// artifacts if it was written only to carry a draft that is gone since (see
    /// [`Omp::save_draft`](crate::Omp::save_draft)).
    pub fn close(mut self) -> Result<()> {
        self.flush()?;
        self.journal.close()?;
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
        self.persist && self.file.is_some() && self.journal.appends_in_place()
    }

    /// Persists a changed title slot after an append in place: the slot is written
    /// over the file's first line, as omp does, or when that cannot be done the whole
    /// file is rewritten.
    pub(crate) fn persist_title(&mut self) -> Result<()> {
        // Written in place or whole: either way no longer the file read.
        let overwritten = self.overwrite_slot();
        self.journal.written_since_read();
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
        let expected_size = self.journal.omp_expected_size();
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
            source: self.texts_file(),
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

/// The title slot of omp's `header` (its `title` and `titleSource`), dated `updated_at`.
pub(crate) fn slot_of(header: &Record, updated_at: &str) -> TitleSlot {
    TitleSlot {
        title: header.get_str("title").unwrap_or_default().to_owned(),
        source: header.get_str("titleSource").map(str::to_owned),
        updated_at: updated_at.to_owned(),
    }
}

/// Returns `path` made absolute against `base` and lexically normalised
/// ([`session_discovery::resolve_path`]: `.`/`..` collapsed, as `path.resolve` does;
/// symlinks are not followed).
pub(crate) fn absolute(base: &Path, path: &Path) -> PathBuf {
    session_discovery::resolve_path(base, path)
}
