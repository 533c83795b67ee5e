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

use serde_json::Value;
use session_model::entries::{self, Base};
use session_model::{Diagnostic, Dialect, EntryType, HeaderCheck, Record, SLOT_BYTES, TitleSlot, ids, timestamp};
use session_store::{AppendWriter, ExpectedSize, StoreError};
use session_tree::SessionTree;

use crate::body::{Body, persist_line};
use crate::{Env, SessionError};

type Result<T> = std::result::Result<T, SessionError>;

/// A session of one dialect: its header, its entry tree and where it lives.
pub struct SessionManager {
    dialect: Dialect,
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
    /// pi: the file exists and holds everything in memory.
    flushed: bool,
    /// omp: the file on disk equals the in-memory journal (modulo appends).
    file_is_current: bool,
    /// omp: every entry persists even before an assistant message.
    force_file_creation: bool,
    /// omp: the next write must be a full rewrite.
    rewrite_required: bool,
    /// omp: the file size we last wrote or read (the rewrite CAS token).
    expected_size: Option<u64>,
    writer: Option<Box<dyn AppendWriter>>,
    /// Reused buffer for one line and its newline.
    line_buf: Vec<u8>,
    failure: Option<String>,
    diagnostics: Vec<Diagnostic>,
    /// Opened with [`OpenMode::ReadOnly`]: every write is refused.
    read_only: bool,
    /// What the open did (or, read-only, did in memory only).
    load_report: LoadReport,
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
    /// Never writes and never creates: a missing file is [`SessionError::NotFound`];
    /// a migration, a repaired last line or the fresh header of an empty file happen in
    /// memory only ([`SessionManager::load_report`] says which), so the session reads
    /// exactly as the agent would see it after opening. Every write through the
    /// manager then fails with [`SessionError::ReadOnly`] and changes nothing.
    ReadOnly,
}

/// What [`SessionManager::open`] did to the file while loading it (with
/// [`OpenMode::ReadOnly`]: what it did in memory, the file left as it was).
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
}

impl SessionManager {
    // ------------------------------------------------------------------ construction

    fn blank(dialect: Dialect, env: Env, cwd: String, session_dir: Option<PathBuf>, persist: bool) -> SessionManager {
        SessionManager {
            dialect,
            env,
            cwd,
            session_dir,
            file: None,
            persist,
            header: Record::from_value(Value::Null),
            slot: None,
            tree: SessionTree::new(dialect, Vec::new()),
            has_conversation: false,
            flushed: false,
            file_is_current: false,
            force_file_creation: false,
            rewrite_required: false,
            expected_size: None,
            writer: None,
            line_buf: Vec::new(),
            failure: None,
            diagnostics: Vec::new(),
            read_only: false,
            load_report: LoadReport::default(),
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
    /// m.append_message(serde_json::json!({"role": "user", "content": "hi", "timestamp": 1}))?;
    /// assert_eq!(m.tree().entries().len(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn open(dialect: Dialect, path: &Path, env: Env) -> Result<SessionManager> {
        SessionManager::open_with(dialect, path, env, OpenMode::AsAgent)
    }

    /// Opens the session file at `path` for reading only: nothing is ever written or
    /// created, and a missing file is [`SessionError::NotFound`]. The session reads as
    /// the agent would see it after opening (migrated, repaired in memory);
    /// [`SessionManager::load_report`] says what the agent would have written.
    pub fn open_read_only(dialect: Dialect, path: &Path, env: Env) -> Result<SessionManager> {
        SessionManager::open_with(dialect, path, env, OpenMode::ReadOnly)
    }

    /// Opens the session file at `path` as `mode` says.
    pub fn open_with(dialect: Dialect, path: &Path, env: Env, mode: OpenMode) -> Result<SessionManager> {
        let path = absolute(&env.process_cwd, path);
        let dir = path.parent().map(Path::to_path_buf);
        let process_cwd = env.process_cwd.to_string_lossy().into_owned();
        let mut m = SessionManager::blank(dialect, env, process_cwd, dir, true);
        m.read_only = mode == OpenMode::ReadOnly;
        let must_exist = mode != OpenMode::AsAgent;
        m.load_report = m.load_file(&path, must_exist)?;
        Ok(m)
    }

    /// Returns what opening the file did (or, read-only, would have written).
    pub fn load_report(&self) -> &LoadReport {
        &self.load_report
    }

    /// Returns whether the manager was opened read-only ([`OpenMode::ReadOnly`]).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Fails with [`SessionError::ReadOnly`] when the manager may not write.
    fn writable(&self) -> Result<()> {
        if self.read_only {
            return Err(SessionError::ReadOnly { path: self.file.clone().unwrap_or_default() });
        }
        Ok(())
    }

    /// Starts a new persisted session for `cwd` in `session_dir`; no file is written
    /// until the first-write rule says so.
    pub fn create(dialect: Dialect, cwd: &str, session_dir: &Path, env: Env) -> Result<SessionManager> {
        env.storage.ensure_dir(session_dir)?;
        let mut m = SessionManager::blank(dialect, env, cwd.to_owned(), Some(session_dir.to_path_buf()), true);
        m.new_session(None, None)?;
        Ok(m)
    }

    /// Starts a session that is never written.
    pub fn in_memory(dialect: Dialect, cwd: &str, env: Env) -> SessionManager {
        let mut m = SessionManager::blank(dialect, env, cwd.to_owned(), None, false);
        // In memory nothing can fail.
        let _ = m.new_session(None, None);
        m
    }

    /// Starts a fresh session (new id and header) in this manager; the old file is
    /// left as it is. Returns the new file path (`None` in memory).
    pub fn new_session(&mut self, id: Option<&str>, parent_session: Option<&str>) -> Result<Option<PathBuf>> {
        if let Some(id) = id {
            ids::validate_custom_session_id(id)?;
        }
        self.close_writer();
        let id = id.map_or_else(|| self.env.new_session_id(), str::to_owned);
        let ts = self.env.now_iso();
        self.header = match self.dialect {
            Dialect::Pi => entries::pi::header(&id, &ts, &self.cwd, parent_session),
            Dialect::Omp => entries::omp::header(
                &id,
                &ts,
                &self.cwd,
                entries::omp::HeaderExtra { parent_session: parent_session.map(str::to_owned), ..Default::default() },
            ),
        };
        self.slot = (self.dialect == Dialect::Omp).then(|| TitleSlot {
            title: String::new(),
            source: None,
            updated_at: ts.clone(),
        });
        self.tree = SessionTree::new(self.dialect, Vec::new());
        self.has_conversation = false;
        self.flushed = false;
        self.file_is_current = false;
        self.rewrite_required = false;
        self.expected_size = None;
        self.force_file_creation = false;
        self.file = match (&self.session_dir, self.persist) {
            (Some(dir), true) => Some(dir.join(format!("{}_{id}.jsonl", timestamp::file_safe(&ts)))),
            _ => None,
        };
        Ok(self.file.clone())
    }

    /// Starts a new session at `path`; with `write_now`, publishes its header at once,
    /// atomically, over a file of exactly `found` bytes (`None`: no file).
    fn fresh_at(&mut self, path: &Path, write_now: bool, found: Option<u64>) -> Result<()> {
        let dir = self.session_dir.clone();
        self.new_session(None, None)?;
        self.session_dir = dir;
        self.file = Some(path.to_path_buf());
        if write_now {
            let expected = found.map_or(ExpectedSize::Missing, ExpectedSize::Bytes);
            let size = self.publish(path, expected)?;
            match self.dialect {
                Dialect::Pi => self.flushed = true,
                Dialect::Omp => {
                    self.expected_size = Some(size);
                    self.file_is_current = true;
                    self.force_file_creation = true;
                }
            }
        }
        Ok(())
    }

    fn load_file(&mut self, path: &Path, must_exist: bool) -> Result<LoadReport> {
        let mut report = LoadReport::default();
        let storage = self.env.storage.clone();
        let write = !self.read_only;
        let stat = storage.stat(path)?;
        let Some(stat) = stat else {
            if must_exist {
                return Err(SessionError::NotFound { path: path.to_path_buf() });
            }
            // Missing: a new session at this exact path (omp writes it at once).
            let now = self.dialect == Dialect::Omp;
            self.fresh_at(path, now, None)?;
            report.wrote = now;
            return Ok(report);
        };
        let parsed = storage.read_parsed(path, self.dialect)?;
        match parsed.header_check(self.dialect) {
            HeaderCheck::Valid { .. } => {}
            HeaderCheck::Empty if self.dialect == Dialect::Omp || stat.size == 0 => {
                report.reinitialised = true;
                report.wrote = write;
                self.fresh_at(path, write, Some(stat.size))?;
                return Ok(report);
            }
            _ => {
                return Err(match self.dialect {
                    Dialect::Pi => SessionError::InvalidPiSession { path: path.to_path_buf() },
                    Dialect::Omp => SessionError::CannotResume { path: path.to_path_buf() },
                });
            }
        }
        self.file = Some(path.to_path_buf());
        self.diagnostics = parsed.diagnostics;
        let mut records = parsed.records;
        if self.dialect == Dialect::Pi && !parsed.ends_with_newline {
            if write {
                storage.append(path, b"\n")?;
                report.wrote = true;
            }
            report.repaired_final_newline = true;
        }
        let migration = session_migrate::migrate(&mut records, &mut || {
            ids::new_entry_id(self.dialect, &mut rand::rng(), |_| false)
        });
        report.migrated = migration.ran();
        if report.migrated {
            report.migrated_from = migration.found_version.clone();
        }
        let header = records.remove(0);
        if let Some(cwd) = header.get_str("cwd")
            && !(self.dialect == Dialect::Pi && cwd.is_empty())
        {
            self.cwd = cwd.to_owned();
        }
        match self.dialect {
            Dialect::Pi => {
                self.header = header;
                self.replace_entries(records, None);
                self.flushed = true;
                // An unrecognised version counts as migrated but changes no byte: pi
                // would rewrite the same file on every open; we write nothing.
                if migration.changed() && write {
                    let size = stat.size + u64::from(report.repaired_final_newline);
                    self.publish(path, ExpectedSize::Bytes(size))?;
                    report.wrote = true;
                }
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
                self.expected_size = Some(parsed.byte_len as u64);
                self.file_is_current = true;
                self.force_file_creation = true;
                self.rewrite_required = report.migrated || parsed.malformed > 0;
            }
        }
        Ok(report)
    }

    fn resolve_blobs(&mut self, records: Vec<Record>) -> Vec<Record> {
        let Some(blobs) = self.env.blobs.clone() else {
            return records;
        };
        records
            .into_iter()
            .map(|r| {
                if !r.text().contains("blob:sha256:") {
                    return r;
                }
                let (value, _warnings) = session_store::persist::resolve_blob_refs_shared(r.value(), &blobs);
                match value {
                    Some(v) => Record::from_value(v),
                    None => r,
                }
            })
            .collect()
    }

    fn counts_as_conversation(&self, r: &Record) -> bool {
        matches!(
            (self.dialect, r.message_role()),
            (Dialect::Pi, Some("user" | "assistant")) | (Dialect::Omp, Some("assistant"))
        )
    }

    // ------------------------------------------------------------------ reads

    /// Returns the dialect.
    pub fn dialect(&self) -> Dialect {
        self.dialect
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

    /// Returns the entry tree for navigation (`branch`, `reset_leaf`).
    pub fn tree_mut(&mut self) -> &mut SessionTree {
        &mut self.tree
    }

    /// Returns what the parser reported while loading the file.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// Returns the session name: pi's latest `session_info`, omp's title.
    pub fn session_name(&self) -> Option<String> {
        match self.dialect {
            Dialect::Pi => self.tree.session_info_name(),
            Dialect::Omp => self.header.get_str("title").filter(|t| !t.is_empty()).map(str::to_owned),
        }
    }

    // ------------------------------------------------------------------ appends

    fn next_base(&self) -> Base {
        let id = ids::new_entry_id(self.dialect, &mut rand::rng(), |id| self.tree.contains_id(id));
        Base { id, parent_id: self.tree.next_parent().map(str::to_owned), timestamp: self.env.now_iso() }
    }

    /// Appends a record built by `build` (given the next id, parent and timestamp),
    /// persists it, and returns its id. On a write failure the append is undone.
    pub fn append_with(&mut self, build: impl FnOnce(&Base) -> Record) -> Result<String> {
        let base = self.next_base();
        let record = build(&base);
        self.append_record(record)?;
        Ok(base.id)
    }

    fn append_record(&mut self, record: Record) -> Result<()> {
        let previous_leaf = self.tree.leaf_id().map(str::to_owned);
        let conversation_before = self.has_conversation;
        if !self.has_conversation && self.counts_as_conversation(&record) {
            self.has_conversation = true;
        }
        // The tree and the write share the record (an `Arc`): no copy of the line.
        let written = record.clone();
        self.tree.append(record)?;
        if let Err(e) = self.persist_appended(&written.line()) {
            if e.landed() {
                // In the file (not yet durable): kept, and the error says so.
                return Err(e);
            }
            self.tree.pop_last(previous_leaf);
            self.has_conversation = conversation_before;
            return Err(e);
        }
        Ok(())
    }

    fn persist_appended(&mut self, line: &str) -> Result<()> {
        self.writable()?;
        if !self.persist || self.file.is_none() {
            return Ok(());
        }
        match self.dialect {
            Dialect::Pi => {
                if !self.flushed {
                    if !self.has_conversation {
                        return Ok(());
                    }
                    // pi creates the file exclusively (`wx`); we publish it atomically with
                    // the same must-not-exist check, so a crash or a full disk never
                    // leaves a partial file that would block every later first write.
                    let published = self.publish_current(ExpectedSize::Missing);
                    if published.as_ref().map_or_else(SessionError::landed, |_| true) {
                        self.flushed = true;
                    }
                    return published.map(|_| ());
                }
                self.append_line(line)
            }
            Dialect::Omp => {
                if self.failure.is_some() {
                    // A latched failure: the full rewrite is the writability probe.
                    self.rewrite_required = true;
                }
                if !(self.force_file_creation || self.file_is_current || self.has_conversation) {
                    self.file_is_current = false;
                    return Ok(());
                }
                if !self.file_is_current || self.rewrite_required {
                    return self.rewrite_omp();
                }
                let line = persist_line(self.dialect, &self.env, line)?;
                self.append_line(&line)?;
                self.expected_size = self.expected_size.map(|s| s + line.len() as u64 + 1);
                Ok(())
            }
        }
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
        writer.append(&self.line_buf).map_err(|e| {
            self.failure.get_or_insert_with(|| e.to_string());
            SessionError::Store(e)
        })
    }

    fn rewrite_omp(&mut self) -> Result<()> {
        self.close_writer();
        let expected = match self.expected_size {
            Some(n) => ExpectedSize::Bytes(n),
            None => ExpectedSize::Missing,
        };
        let published = self.publish_current(expected);
        let landed = match &published {
            Ok(size) => Some(*size),
            Err(SessionError::Store(e)) => e.landed(),
            Err(_) => None,
        };
        if let Some(size) = landed {
            // The file is ours now, synced or not: the next write builds on it.
            self.expected_size = Some(size);
            self.file_is_current = true;
            self.rewrite_required = false;
            self.failure = None;
        }
        match published {
            Ok(_) => Ok(()),
            Err(e) if landed.is_some() => Err(e),
            Err(e) => {
                self.file_is_current = false;
                self.rewrite_required = true;
                self.failure.get_or_insert_with(|| e.to_string());
                Err(e)
            }
        }
    }

    /// The whole-file view of this session: what a full write puts on disk.
    fn body(&self) -> Body<'_> {
        Body {
            dialect: self.dialect,
            env: &self.env,
            header: &self.header,
            slot: self.slot.as_ref(),
            entries: self.tree.entries(),
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
    pub fn flush(&mut self) -> Result<()> {
        if let Some(w) = self.writer.as_mut() {
            w.flush()?;
        }
        match &self.failure {
            Some(message) => {
                Err(SessionError::DiskFailure { path: self.file.clone().unwrap_or_default(), message: message.clone() })
            }
            None => Ok(()),
        }
    }

    /// Writes the whole session to its file now, atomically, in place of what is there
    /// (omp's `rewriteEntries`): a migration done at open, or edits made in memory,
    /// become the file. Fails with [`StoreError::Conflict`] (and writes nothing) when the
    /// file changed size meanwhile (omp: since this manager last read or wrote it; pi:
    /// since just before the write); the file keeps its mode.
    pub fn rewrite_entries(&mut self) -> Result<()> {
        self.writable()?;
        let path = self.file.clone().ok_or_else(|| SessionError::NotFound { path: PathBuf::new() })?;
        match self.dialect {
            Dialect::Omp => self.rewrite_omp(),
            Dialect::Pi => {
                self.close_writer();
                let expected = match self.env.storage.stat(&path)? {
                    Some(st) => ExpectedSize::Bytes(st.size),
                    None => ExpectedSize::Missing,
                };
                self.publish_current(expected)?;
                self.flushed = true;
                Ok(())
            }
        }
    }

    /// Flushes and closes the session's writer.
    pub fn close(mut self) -> Result<()> {
        self.flush()?;
        if let Some(w) = self.writer.take() {
            w.close()?;
        }
        Ok(())
    }

    // ------------------------------------------------------------------ typed appends

    /// Appends a `message` entry (any role, stored as given).
    pub fn append_message(&mut self, message: Value) -> Result<String> {
        self.append_with(|b| entries::pi::message(b, message))
    }

    /// Appends a `custom` entry (extension state, never in the context).
    pub fn append_custom_entry(&mut self, custom_type: &str, data: Option<Value>) -> Result<String> {
        self.append_with(|b| entries::pi::custom(b, custom_type, data))
    }

    /// Appends a `label` on `target_id` (`None` or `""` clears it).
    pub fn append_label_change(&mut self, target_id: &str, label: Option<&str>) -> Result<String> {
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
        self.header = self.header.map_value(|v| {
            if let Value::Object(m) = v {
                m.insert("title".into(), title.into());
                m.insert("titleSource".into(), source.into());
            }
        });
        self.slot = Some(TitleSlot {
            title: title.to_owned(),
            source: Some(source.to_owned()),
            updated_at: self.env.now_iso(),
        });
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
        self.persist && self.file.is_some() && self.file_is_current && !self.rewrite_required && self.failure.is_none()
    }

    /// Persists a changed title slot after an append in place: the slot is written
    /// over the file's first line, as omp does, or when that cannot be done the whole
    /// file is rewritten.
    pub(crate) fn persist_title(&mut self) -> Result<()> {
        if matches!(self.overwrite_slot(), Ok(true)) {
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
        let (Some(path), Some(_), Some(slot)) = (self.file.as_deref(), self.expected_size, self.slot.as_ref()) else {
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
            .filter_map(|text| serde_json::from_str::<Value>(text).ok())
            .collect::<Vec<_>>();
        crate::snapshot::current_system_message(systems)
    }

    // ------------------------------------------------------------------ whole-file operations

    /// Extracts the path from the root to `leaf_id` into a new session file next to
    /// this one (`createBranchedSession`) and switches this manager to it. Returns
    /// the new file (`None` in memory).
    pub fn create_branched_session(&mut self, leaf_id: &str) -> Result<Option<PathBuf>> {
        self.writable()?;
        let path: Vec<Record> = self.tree.get_branch(Some(leaf_id)).into_iter().cloned().collect();
        if path.is_empty() {
            return Err(SessionError::EntryNotFound { id: leaf_id.to_owned() });
        }
        let labels: Vec<(String, String, Option<String>)> = self
            .tree
            .labels()
            .map(|(t, l)| (t.to_owned(), l.to_owned(), self.tree.label_timestamp(t).map(str::to_owned)))
            .collect();
        let old_file = self.file.clone();
        let id = self.env.new_session_id();
        let ts = self.env.now_iso();
        let mut kept: Vec<Record> = Vec::with_capacity(path.len());
        match self.dialect {
            Dialect::Pi => {
                // Re-chain around dropped labels; remap compactions that kept from a label.
                let mut replaced_by: Vec<(String, Option<String>)> = Vec::new();
                let mut pending: Vec<usize> = Vec::new();
                for r in &path {
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
                        r.parent_id() == parent
                            && (parent.is_some() || matches!(r.parent(), session_model::ParentRef::Null))
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
                self.header = entries::pi::header(
                    &id,
                    &ts,
                    &self.cwd,
                    if self.persist { old_file.as_deref().map(|p| p.to_str().unwrap_or_default()) } else { None },
                );
            }
            Dialect::Omp => {
                kept.extend(path.iter().filter(|r| r.entry_type() != EntryType::Label).cloned());
                let mut h = serde_json::Map::new();
                h.insert("type".into(), "session".into());
                h.insert("version".into(), 3.into());
                h.insert("id".into(), id.clone().into());
                h.insert("timestamp".into(), ts.clone().into());
                h.insert("cwd".into(), self.cwd.clone().into());
                for key in ["title", "titleSource"] {
                    if let Some(v) = self.header.get(key) {
                        h.insert(key.into(), v.clone());
                    }
                }
                if self.persist
                    && let Some(p) = &old_file
                {
                    h.insert("parentSession".into(), p.to_string_lossy().into_owned().into());
                }
                if let Some(v) = self.header.get("additionalDirectories") {
                    h.insert("additionalDirectories".into(), v.clone());
                }
                self.header = Record::from_value(Value::Object(h));
            }
        }
        // Labels whose target was kept are re-created after the last kept entry.
        let kept_ids: std::collections::HashSet<&str> =
            if labels.is_empty() { Default::default() } else { kept.iter().filter_map(Record::id).collect() };
        let mut new_ids: std::collections::HashSet<String> = std::collections::HashSet::new();
        let mut parent = kept.last().and_then(|r| r.id().map(str::to_owned));
        let mut new_labels = Vec::new();
        for (target, label, label_ts) in labels {
            if !kept_ids.contains(target.as_str()) {
                continue;
            }
            let new_id =
                ids::new_entry_id(self.dialect, &mut rand::rng(), |i| kept_ids.contains(i) || new_ids.contains(i));
            new_ids.insert(new_id.clone());
            let ts_label = match self.dialect {
                Dialect::Pi => label_ts.unwrap_or_else(|| ts.clone()),
                Dialect::Omp => self.env.now_iso(),
            };
            new_labels.push(entries::pi::label(
                &Base::new(new_id.clone(), parent.as_deref(), ts_label),
                &target,
                Some(&label),
            ));
            parent = Some(new_id);
        }
        drop(kept_ids);
        kept.extend(new_labels);
        self.close_writer();
        self.slot = (self.dialect == Dialect::Omp).then(|| TitleSlot {
            title: self.header.get_str("title").unwrap_or_default().to_owned(),
            source: self.header.get_str("titleSource").map(str::to_owned),
            updated_at: ts.clone(),
        });
        let has_conversation = kept.iter().any(|r| self.counts_as_conversation(r));
        let new_file = self.persist.then(|| {
            let dir = self.session_dir.clone().unwrap_or_default();
            dir.join(format!("{}_{id}.jsonl", timestamp::file_safe(&ts)))
        });
        // pi writes the new file only once it holds a conversation; omp always does.
        let write_to = new_file.as_deref().filter(|_| self.dialect == Dialect::Omp || has_conversation);
        let published = self.replace_entries(kept, write_to);
        let Some(new_file) = new_file else {
            return Ok(None);
        };
        self.file = Some(new_file.clone());
        match self.dialect {
            Dialect::Pi => {
                self.flushed = false;
                if let Some(written) = published {
                    written?;
                    self.flushed = true;
                }
            }
            Dialect::Omp => {
                self.rewrite_required = false;
                self.force_file_creation = true;
                self.expected_size = None;
                if let Some(written) = published {
                    self.expected_size = Some(written?);
                }
                self.file_is_current = true;
            }
        }
        Ok(Some(new_file))
    }

    /// Makes `entries` the session's entries and, when `target` is given, writes the
    /// whole session (current header and title slot) to that new file, returning what
    /// the write gave. For a large session the file is written on a second thread
    /// while the new index is built and the old one freed.
    ///
    /// When writing, `entries` must be what the tree keeps ([`SessionTree::keeps`]),
    /// so that the file holds exactly the tree's entries.
    fn replace_entries(&mut self, entries: Vec<Record>, target: Option<&Path>) -> Option<Result<u64>> {
        debug_assert!(target.is_none() || entries.iter().all(SessionTree::keeps));
        self.has_conversation = entries.iter().any(|r| self.counts_as_conversation(r));
        let old = std::mem::replace(&mut self.tree, SessionTree::new(self.dialect, Vec::new()));
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
            return (SessionTree::new(self.dialect, entries), None);
        };
        let body = Body {
            dialect: self.dialect,
            env: &self.env,
            header: &self.header,
            slot: self.slot.as_ref(),
            entries: &entries,
        };
        if entries.len() < PARALLEL_FROM {
            let written = body.publish(path, ExpectedSize::Missing);
            return (SessionTree::new(self.dialect, entries), Some(written));
        }
        std::thread::scope(|s| {
            let writer = s.spawn(|| body.publish(path, ExpectedSize::Missing));
            let tree = SessionTree::new(self.dialect, entries.clone());
            drop(old);
            let written = writer.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (tree, Some(written))
        })
    }

    /// Copies the whole session at `source` into a new session for `target_cwd` in
    /// `session_dir` (`forkFrom`). The source is migrated in memory first and left
    /// untouched on disk (pi repairs a missing final newline, as it does on any load).
    pub fn fork_from(
        dialect: Dialect,
        source: &Path,
        target_cwd: &str,
        session_dir: &Path,
        env: Env,
    ) -> Result<SessionManager> {
        let source = absolute(&env.process_cwd, source);
        let storage = env.storage.clone();
        let Some(_) = storage.stat(&source)? else {
            return Err(match dialect {
                Dialect::Pi => SessionError::ForkSourceInvalid { path: source },
                Dialect::Omp => SessionError::ForkSourceNotFound { path: source },
            });
        };
        let parsed = storage.read_parsed(&source, dialect)?;
        if !matches!(parsed.header_check(dialect), HeaderCheck::Valid { .. }) {
            return Err(SessionError::ForkSourceInvalid { path: source });
        }
        if dialect == Dialect::Pi && !parsed.ends_with_newline {
            storage.append(&source, b"\n")?;
        }
        let mut records = parsed.records;
        session_migrate::migrate(&mut records, &mut || ids::new_entry_id(dialect, &mut rand::rng(), |_| false));
        let src_header = records.remove(0);
        // Stray headers and nulls are not entries: the copy leaves them out.
        records.retain(SessionTree::keeps);
        storage.ensure_dir(session_dir)?;
        let target_cwd_abs = absolute(&env.process_cwd, Path::new(target_cwd)).to_string_lossy().into_owned();
        let mut m = SessionManager::blank(dialect, env, target_cwd_abs.clone(), Some(session_dir.to_path_buf()), true);
        let id = m.env.new_session_id();
        let ts = m.env.now_iso();
        let file = session_dir.join(format!("{}_{id}.jsonl", timestamp::file_safe(&ts)));
        match dialect {
            Dialect::Pi => {
                m.header = entries::pi::header(&id, &ts, &target_cwd_abs, Some(&source.to_string_lossy()));
                m.file = Some(file.clone());
                m.replace_entries(records, Some(&file)).unwrap_or(Ok(0))?;
                m.flushed = true;
            }
            Dialect::Omp => {
                let src_id = src_header.id().unwrap_or_default().to_owned();
                let folded = fold_slot(&src_header, parsed.title_slot.as_ref());
                let mut h = serde_json::Map::new();
                h.insert("type".into(), "session".into());
                h.insert("version".into(), 3.into());
                h.insert("id".into(), id.clone().into());
                h.insert("timestamp".into(), ts.clone().into());
                h.insert("cwd".into(), target_cwd_abs.clone().into());
                h.insert("parentSession".into(), src_id.clone().into());
                let key = folded.get_str("providerPromptCacheKey").map_or(src_id.clone(), str::to_owned);
                h.insert("providerPromptCacheKey".into(), key.into());
                for k in ["title", "titleSource"] {
                    if let Some(v) = folded.get(k) {
                        h.insert(k.into(), v.clone());
                    }
                }
                if let Some(Value::Array(dirs)) = folded.get("additionalDirectories") {
                    let dirs: Vec<Value> =
                        dirs.iter().filter(|d| d.as_str() != Some(target_cwd_abs.as_str())).cloned().collect();
                    if !dirs.is_empty() {
                        h.insert("additionalDirectories".into(), Value::Array(dirs));
                    }
                }
                m.header = Record::from_value(Value::Object(h));
                m.slot = Some(TitleSlot {
                    title: folded.get_str("title").unwrap_or_default().to_owned(),
                    source: folded.get_str("titleSource").map(str::to_owned),
                    updated_at: ts.clone(),
                });
                let records = m.resolve_blobs(records);
                m.file = Some(file.clone());
                m.force_file_creation = true;
                m.expected_size = Some(m.replace_entries(records, Some(&file)).unwrap_or(Ok(0))?);
                m.file_is_current = true;
            }
        }
        Ok(m)
    }
}

impl Drop for SessionManager {
    fn drop(&mut self) {
        self.close_writer();
    }
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
