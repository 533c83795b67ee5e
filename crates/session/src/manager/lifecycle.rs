//! omp's session lifecycle beyond appends: materialising (`ensure_on_disk`,
//! `flush_sync`), atomic batches, switching and dropping files, forks, copies, moves;
//! and pi's extra constructors.
//!
//! Every operation here either completes or changes nothing durable: a fork or copy is
//! published whole or not at all, a move is rolled back (renames undone, the header
//! restored) when its rewrite fails.

use std::path::{Path, PathBuf};

use serde_json::Value;
use session_model::entries::{self, Base};
use session_model::{Dialect, Record, TitleSlot, ids};
use session_store::{ExpectedSize, StoreError, artifacts_dir};
use session_tree::SessionTree;

use super::{Access, OpenMode, SessionManager, absolute, copy_error, wrong_dialect};
use crate::body::Body;
use crate::error::unless_missing;
use crate::{Env, SessionError};

type Result<T> = std::result::Result<T, SessionError>;

/// Options of [`SessionManager::fork_from_with`] (omp's `forkFrom` options).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ForkOptions {
    /// Copies the source's artifacts directory beside the new file (default `true`).
    pub copy_artifacts: bool,
    /// The new session file; `None`: `<session dir>/<timestamp>_<id>.jsonl`.
    pub session_file: Option<PathBuf>,
    /// Zeroes the inherited cost (`usage.cost.*`, `usage.credits`,
    /// `usage.premiumRequests`) of every copied entry.
    pub reset_inherited_cost: bool,
    /// Closes the tool calls left open by the active leaf's last assistant turn with
    /// synthetic aborted tool results, chained after the leaf.
    pub repair_interrupted_tail: bool,
    /// Leaves the terminal breadcrumb alone (omp writes it by default).
    pub suppress_breadcrumb: bool,
}

impl Default for ForkOptions {
    fn default() -> ForkOptions {
        ForkOptions {
            copy_artifacts: true,
            session_file: None,
            reset_inherited_cost: false,
            repair_interrupted_tail: false,
            suppress_breadcrumb: false,
        }
    }
}

setters! { impl ForkOptions;
    /// Returns these options with `session_file` as the new file.
    session_file(path: &Path) => session_file = Some(path.to_path_buf());

    /// Returns these options with the artifacts copy on or off.
    copy_artifacts(copy: bool) => copy_artifacts = copy;

    /// Returns these options with the breadcrumb left alone (`true`) or written.
    suppress_breadcrumb(suppress: bool) => suppress_breadcrumb = suppress;

    /// Returns these options with the inherited cost zeroed (`true`) or kept.
    reset_inherited_cost(reset: bool) => reset_inherited_cost = reset;

    /// Returns these options with an interrupted tail repaired (`true`) or kept.
    repair_interrupted_tail(repair: bool) => repair_interrupted_tail = repair;
}

impl SessionManager {
    // ------------------------------------------------------------------ pi's constructors

    /// Opens the session file at `path` as [`SessionManager::open`] does, with pi's
    /// `open(path, sessionDir?, cwdOverride?)` arguments: later sessions of the manager
    /// (new sessions, branches) go to `session_dir` (default: the file's directory,
    /// created), and `cwd_override` is the manager's cwd (default: the header's), also
    /// the cwd of a new session started at a missing path.
    pub fn open_in(
        dialect: Dialect,
        path: &Path,
        session_dir: Option<&Path>,
        cwd_override: Option<&str>,
        env: Env,
    ) -> Result<SessionManager> {
        let path = absolute(&env.process_cwd, path);
        let dir = match session_dir {
            Some(d) => absolute(&env.process_cwd, d),
            None => path.parent().map(Path::to_path_buf).unwrap_or_default(),
        };
        env.storage.ensure_dir(&dir)?;
        let cwd = cwd_override.map(|c| absolute(&env.process_cwd, Path::new(c)).to_string_lossy().into_owned());
        let process_cwd = env.process_cwd.to_string_lossy().into_owned();
        let mut m = SessionManager::blank(dialect, env, cwd.clone().unwrap_or(process_cwd), Some(dir), true);
        m.load_report = m.load_file(&path, false, None)?;
        if let Some(cwd) = cwd {
            m.cwd = cwd;
        }
        m.breadcrumb(false);
        Ok(m)
    }

    // ------------------------------------------------------------------ materialising

    /// [`Omp::ensure_on_disk`](crate::Omp::ensure_on_disk) (the handle checked the dialect).
    pub(crate) fn ensure_on_disk(&mut self) -> Result<()> {
        self.writable()?;
        self.journal.force_file_creation()?;
        if !self.persist || self.file.is_none() || self.journal.in_batch() {
            return Ok(());
        }
        if self.journal.needs_rewrite() {
            return self.rewrite_omp();
        }
        Ok(())
    }

    /// Makes what was appended reach the file before returning (omp's `flushSync`, for
    /// exit paths).
    ///
    /// omp: returns the latched failure if there is one; when the file is current only
    /// the writer is flushed (cheap for large sessions); otherwise the whole session is
    /// rewritten now. Before the first-write gate opens nothing is written. Inside an
    /// atomic batch it is [`SessionError::InBatch`]. pi: [`SessionManager::flush`].
    pub fn flush_sync(&mut self) -> Result<()> {
        if self.dialect() == Dialect::Pi {
            return self.flush();
        }
        self.not_in_batch()?;
        if let Some(e) = self.journal.failure() {
            return Err(copy_error(e, self.file.as_deref()));
        }
        if !self.persist || self.file.is_none() || !self.journal.gate_open(self.has_conversation) {
            return Ok(());
        }
        if !self.journal.needs_rewrite() {
            return self.flush();
        }
        self.writable()?;
        self.rewrite_omp()
    }

    /// Raises the terminal write barrier (omp's `seal`): from now on every append,
    /// rename and rewrite of this manager is refused with [`SessionError::Sealed`] and
    /// writes nothing, so a late event handler cannot write over a session that another
    /// manager (or process) has taken over. What was appended before is in the file;
    /// [`SessionManager::flush`] and [`SessionManager::close`] still work, and reads
    /// still answer. Idempotent. omp drops such writes with a warning; here the caller
    /// is told. Available for pi sessions too (pi has no seal).
    ///
    /// ```
    /// use session::{Dialect, Env, SessionError, SessionManager};
    /// let mut m = SessionManager::in_memory(Dialect::Omp, "/work", Env::memory());
    /// m.seal();
    /// let refused = m.append_message_json(serde_json::json!({"role": "user", "content": "late", "timestamp": 1}));
    /// assert!(matches!(refused, Err(SessionError::Sealed { .. })));
    /// assert!(m.tree().entries().is_empty());
    /// ```
    pub fn seal(&mut self) {
        self.access = Access::Sealed;
    }

    /// Returns whether [`SessionManager::seal`] (or
    /// [`SessionManager::release_retained_entries`]) was called.
    pub fn is_sealed(&self) -> bool {
        self.access == Access::Sealed
    }

    /// Seals the manager and drops what it holds in memory (omp's
    /// `releaseRetainedEntries`, for a session that is done but still referenced): the
    /// entries, their index and any text cache are freed and the append writer is
    /// flushed and closed; its first error, if any, is returned (the memory is released
    /// either way). The tree is empty afterwards; open the file again to read the session.
    pub fn release_retained_entries(&mut self) -> Result<()> {
        self.seal();
        let flushed = self.flush();
        let closed = self.journal.close();
        self.tree = SessionTree::new(self.dialect(), Vec::new());
        self.bodies = None;
        self.has_conversation = false;
        flushed.and(closed)
    }

    /// [`Omp::append_entries_atomically`](crate::Omp::append_entries_atomically) (the handle checked the dialect).
    pub(crate) fn append_entries_atomically<T>(
        &mut self,
        stage: impl FnOnce(&mut SessionManager) -> Result<T>,
    ) -> Result<T> {
        self.writable()?;
        self.journal.begin_batch()?;
        let before_len = self.tree.entries().len();
        let before_leaf = self.tree.leaf_id().map(str::to_owned);
        let before_conversation = self.has_conversation;
        let before_title = self.title_state();
        let staged = stage(self);
        let (gate, dirty) = self.journal.end_batch(self.has_conversation);
        let written = match staged {
            Ok(value) if !self.persist || self.file.is_none() || !gate || !dirty => return Ok(value),
            Ok(value) => match self.rewrite_omp() {
                Ok(()) => return Ok(value),
                Err(e) if e.landed() => return Err(e),
                Err(e) => e,
            },
            Err(e) => e,
        };
        // Unstage: the entries go, and the file is repaired to the remaining state.
        let kept = self.tree.entries()[..before_len.min(self.tree.entries().len())].to_vec();
        self.tree = SessionTree::new(self.dialect(), kept);
        match before_leaf {
            Some(id) => {
                let _ = self.tree.branch(&id);
            }
            None => self.tree.reset_leaf(),
        }
        self.has_conversation = before_conversation;
        self.restore_title(before_title);
        self.journal.require_rewrite();
        if self.persist && self.file.is_some() && gate {
            // A failed repair stays latched; the next append retries it.
            let _ = self.rewrite_omp();
        }
        Err(written)
    }

    // ------------------------------------------------------------------ switching files

    /// Switches this manager to the session file at `path`, loading it as
    /// [`SessionManager::open`] does (pi's and omp's `setSessionFile`). The session
    /// directory stays; pi keeps the manager's cwd, omp takes the header's. On an error
    /// the manager is unchanged.
    pub fn set_session_file(&mut self, path: &Path) -> Result<()> {
        self.writable()?;
        self.not_in_batch()?;
        let mut next = SessionManager::open_with(self.dialect(), path, self.env.clone(), OpenMode::AsAgent)?;
        if self.session_dir.is_some() {
            next.session_dir.clone_from(&self.session_dir);
        }
        if self.dialect() == Dialect::Pi {
            next.cwd.clone_from(&self.cwd);
        }
        *self = next;
        Ok(())
    }

    /// Deletes the session file at `path` with its artifacts directory and stale backups
    /// (omp's `dropSession`); a missing file is fine. When it is this manager's own file,
    /// the writer is closed first and the next write writes the whole session again.
    pub fn drop_session(&mut self, path: &Path) -> Result<()> {
        self.writable()?;
        self.not_in_batch()?;
        let path = absolute(&self.env.process_cwd, path);
        if self.file.as_deref() == Some(path.as_path()) {
            self.journal.file_gone();
        }
        unless_missing(self.env.storage.delete_with_artifacts(&path))?;
        Ok(())
    }

    // ------------------------------------------------------------------ copies

    /// [`Omp::fork`](crate::Omp::fork) (the handle checked the dialect).
    pub(crate) fn fork(&mut self) -> Result<Option<PathBuf>> {
        self.writable()?;
        self.not_in_batch()?;
        if self.dialect() != Dialect::Omp {
            return Err(wrong_dialect("fork", Dialect::Pi));
        }
        let id = self.env.new_session_id();
        let ts = self.env.now_iso();
        let header = entries::omp::fork_header(&id, &ts, &self.cwd, &self.header);
        let slot = super::slot_of(&header, &ts);
        if !self.persist {
            self.header = header;
            self.slot = Some(slot);
            return Ok(None);
        }
        let dir =
            self.session_dir.clone().or_else(|| self.file.as_deref().and_then(Path::parent).map(Path::to_path_buf));
        let dir = dir.ok_or_else(|| SessionError::NotFound { path: PathBuf::new() })?;
        let new_file = dir.join(session_discovery::session_file_name(&ts, &id));
        let old_artifacts = self.file.as_deref().and_then(artifacts_dir);
        let new_artifacts = artifacts_dir(&new_file);
        let storage = self.env.storage.clone();
        if let (Some(from), Some(to)) = (&old_artifacts, &new_artifacts)
            && storage.exists(from)?
        {
            storage.copy_dir(from, to).inspect_err(|_| remove_copied_artifacts(&*storage, &new_file))?;
        }
        let body = Body {
            dialect: Dialect::Omp,
            env: &self.env,
            header: &header,
            slot: Some(&slot),
            entries: self.tree.entries(),
            source: self.texts_file(),
        };
        let size = match body.publish(&new_file, ExpectedSize::Missing) {
            Ok(size) => size,
            // In place, only not synced: the file holds exactly this many bytes.
            Err(e) => match e.landed_size() {
                Some(size) => size,
                None => {
                    remove_copied_artifacts(&*storage, &new_file);
                    return Err(e);
                }
            },
        };
        self.close_writer();
        self.header = header;
        self.slot = Some(slot);
        self.file = Some(new_file.clone());
        self.session_dir = Some(dir);
        self.journal.reset();
        self.journal.on_disk(size);
        self.breadcrumb(false);
        Ok(Some(new_file))
    }

    /// [`Omp::persist_copy`](crate::Omp::persist_copy) (the handle checked the dialect).
    pub(crate) fn persist_copy(&self, session_dir: Option<&Path>) -> Result<PathBuf> {
        if self.dialect() != Dialect::Omp {
            return Err(wrong_dialect("persist_copy", Dialect::Pi));
        }
        let dir = match session_dir {
            Some(d) => absolute(&self.env.process_cwd, d),
            None => self
                .session_dir
                .clone()
                .or_else(|| self.file.as_deref().and_then(Path::parent).map(Path::to_path_buf))
                .ok_or_else(|| SessionError::NoAgentDir { cwd: self.cwd.clone() })?,
        };
        self.env.storage.ensure_dir(&dir)?;
        let extra = entries::omp::HeaderExtra {
            parent_session: None,
            provider_prompt_cache_key: self.header.get_str("providerPromptCacheKey").map(str::to_owned),
            additional_directories: string_array(self.header.get("additionalDirectories")),
        };
        publish_new_omp(&self.env, &dir, &self.cwd, extra, self.tree.entries(), self.file.as_deref())
    }

    /// Writes an empty omp session for `cwd` (title slot and header `type, version, id,
    /// timestamp, cwd`, the cwd resolved) into `session_dir`, or by default into the
    /// cwd's bucket of the environment's agent directory, and returns its file (omp's
    /// `createEmptySessionFile`). Published whole; the file must not exist.
    pub fn create_empty_session_file(cwd: &str, session_dir: Option<&Path>, env: &Env) -> Result<PathBuf> {
        let cwd = absolute(&env.process_cwd, Path::new(cwd)).to_string_lossy().into_owned();
        let dir = match session_dir {
            Some(d) => {
                let d = absolute(&env.process_cwd, d);
                env.storage.ensure_dir(&d)?;
                d
            }
            None => {
                let dirs = env.dirs.as_ref().ok_or_else(|| SessionError::NoAgentDir { cwd: cwd.clone() })?;
                dirs.ensure_default_session_dir(&*env.storage, &cwd)?
            }
        };
        publish_new_omp(env, &dir, &cwd, entries::omp::HeaderExtra::default(), &[], None)
    }

    // ------------------------------------------------------------------ moves

    /// Moves this session to `new_cwd` (omp's `moveTo`) and returns its file.
    ///
    /// pi has no `moveTo`; a pi session moves the same way into pi's bucket of
    /// `new_cwd`, and its header only takes the new cwd (pi keeps no
    /// `previousSessionFiles`); a pi session not yet written moves in memory only.
    ///
    /// The new directory is `target_session_dir`, else the bucket of `new_cwd`: under
    /// the same root when the current directory is the bucket of the old cwd (a custom
    /// `--session-dir` root is kept), else in the environment's agent directory. Nothing
    /// changes when neither the directory nor the cwd does. The journal is renamed into
    /// the new directory and the artifacts directory merged into its new place (entries
    /// whose names are taken stay behind); the header records the old path in
    /// `previousSessionFiles`, takes the new cwd and drops it from
    /// `additionalDirectories`; the file is then rewritten whole, atomically, at its new
    /// path, and the breadcrumb updated. When any step fails the renames are undone and
    /// the manager is unchanged. A rename or rewrite that landed but could not be made
    /// durable is a move: the manager names the new file and the error
    /// ([`SessionError::landed`]) is returned once the move is done. The target file must
    /// not exist. In memory only the header changes.
    ///
    /// A target on another file system, where nothing can be renamed (as omp does, copy
    /// then delete): the session is written whole at the new path and the artifacts
    /// copied into a new directory (one already there is [`SessionError::TargetExists`]),
    /// then the old file and artifacts are deleted. A failure before the new file is in
    /// place removes the copy and leaves the session where it was; a failure to delete
    /// the old copy is returned after the move (the manager names the new file), and a
    /// new file that landed but could not be made durable keeps the old one as well.
    ///
    /// ```
    /// use session::{Dialect, Env, SessionManager};
    /// use std::path::Path;
    /// # fn main() -> Result<(), session::SessionError> {
    /// let mut m = SessionManager::create(Dialect::Omp, "/work/a", Path::new("/s/a"), Env::memory())?;
    /// m.omp()?.ensure_on_disk()?;
    /// let old = m.session_file().unwrap().to_path_buf();
    /// let new = m.move_to("/work/b", Some(Path::new("/s/b")))?.expect("a file");
    /// assert!(new.starts_with("/s/b"));
    /// assert_eq!(m.cwd(), "/work/b");
    /// let previous = m.header().get("previousSessionFiles").unwrap();
    /// assert_eq!(previous[0].as_str(), old.to_str());
    /// # Ok(())
    /// # }
    /// ```
    pub fn move_to(&mut self, new_cwd: &str, target_session_dir: Option<&Path>) -> Result<Option<PathBuf>> {
        self.writable()?;
        self.not_in_batch()?;
        let dialect = self.dialect();
        let new_cwd = absolute(&self.env.process_cwd, Path::new(new_cwd)).to_string_lossy().into_owned();
        let Some(old_file) = self.file.clone().filter(|_| self.persist) else {
            let header = moved_header(dialect, &self.header, &new_cwd, None);
            self.header = header;
            self.cwd = new_cwd;
            return Ok(None);
        };
        let old_dir = self.session_dir.clone().or_else(|| old_file.parent().map(Path::to_path_buf)).unwrap_or_default();
        let new_dir = match target_session_dir {
            Some(d) => absolute(&self.env.process_cwd, d),
            None => self.bucket_for_move(&old_dir, &new_cwd, true)?,
        };
        if new_dir == old_dir && new_cwd == self.cwd {
            return Ok(Some(old_file));
        }
        let name = old_file.file_name().map(PathBuf::from).unwrap_or_default();
        let new_file = new_dir.join(name);
        let storage = self.env.storage.clone();
        if new_file != old_file && storage.exists(&new_file)? {
            return Err(SessionError::TargetExists { path: new_file });
        }
        self.close_writer();
        storage.ensure_dir(&new_dir)?;
        let existed = storage.stat(&old_file)?.is_some();
        let mut renames: Vec<(PathBuf, PathBuf)> = Vec::new();
        // A rename that landed without its directory sync is a move: the session follows
        // its file, and the error is returned once the move is done.
        let mut not_durable: Option<StoreError> = None;
        let mut rewrite_landed: Option<SessionError> = None;
        // The target is on another file system (omp: copy, then unlink): the session is
        // written whole at the new path, the artifacts copied, and the old file and
        // artifacts deleted once the new file is in place.
        let mut across = false;
        // The artifacts were copied into a directory this move created.
        let mut copied = false;
        if new_file != old_file {
            if existed {
                match storage.rename(&old_file, &new_file) {
                    Ok(()) => renames.push((old_file.clone(), new_file.clone())),
                    Err(e) if e.landed().is_some() => {
                        not_durable = Some(e);
                        renames.push((old_file.clone(), new_file.clone()));
                    }
                    Err(e) if e.crosses_devices() => across = true,
                    Err(e) => return Err(e.into()),
                }
            }
            if let (Some(from), Some(to)) = (artifacts_dir(&old_file), artifacts_dir(&new_file))
                && storage.exists(&from)?
            {
                let moved = if across { Err(None) } else { storage.move_dir(&from, &to).map_err(Some) };
                match moved {
                    Ok(moved) => renames.extend(moved),
                    Err(e) if e.as_ref().is_none_or(StoreError::crosses_devices) && renames.is_empty() => {
                        // Copied into a directory of its own, so that a failure can remove
                        // the copy without touching anything that was there.
                        if storage.exists(&to)? {
                            return Err(SessionError::TargetExists { path: to });
                        }
                        across = true;
                        copied = true;
                        if let Err(e) = storage.copy_dir(&from, &to) {
                            let _ = storage.delete_with_artifacts(&new_file);
                            return Err(e.into());
                        }
                    }
                    Err(e) => {
                        undo_renames(&*storage, &renames);
                        return Err(e.unwrap_or_else(|| StoreError::NotFound { path: from.clone() }).into());
                    }
                }
            }
        }
        let saved = (
            self.header.clone(),
            self.cwd.clone(),
            self.session_dir.clone(),
            self.file.clone(),
            self.journal.set_aside(),
        );
        // A rename changes the file's status time: from here on its size guards it.
        self.journal.written_since_read();
        let previous = (existed && new_file != old_file).then_some(old_file.as_path());
        let previous_path = previous.map(Path::to_path_buf);
        self.header = moved_header(dialect, &self.header, &new_cwd, previous);
        self.cwd = new_cwd;
        self.session_dir = Some(new_dir);
        self.file = Some(new_file.clone());
        // Texts still read from the renamed file are read from it under its new name
        // (across devices they are read from the old file until it goes).
        let renamed = existed && !across;
        let texts_path = self.bodies.as_mut().filter(|t| renamed && t.path == old_file).map(|t| {
            t.path = new_file.clone();
            old_file.clone()
        });
        // pi writes nothing before its first-write rule says so.
        self.journal.moved(&saved.4, renamed);
        let rewrite = match dialect {
            Dialect::Omp if existed || self.has_conversation => Some(Dialect::Omp),
            Dialect::Pi if existed => Some(Dialect::Pi),
            _ => None,
        };
        if rewrite.is_some() {
            let written = match dialect {
                Dialect::Omp => self.rewrite_omp(),
                Dialect::Pi => self.rewrite_entries(),
            };
            let mut forward = false;
            let written = match written {
                // The file grew between the read and the rename (a writer that takes no
                // lock, as pi, appended to it): renaming it back could replace a file
                // such a writer has since made at the old path. The rename stands; the
                // session is read again at its new place and rewritten from what it
                // holds now.
                Err(e) if super::is_conflict(&e) && !renames.is_empty() && !across => {
                    forward = true;
                    let cwd = self.cwd.clone();
                    self.rewrite_after_move(&cwd, previous_path.as_deref(), e)
                }
                other => other,
            };
            if let Err(e) = written {
                if e.landed() {
                    // The rewrite is in place, not yet durable: the move stands, reported.
                    if not_durable.is_none() {
                        rewrite_landed = Some(e);
                    }
                } else if forward {
                    // The session stays at its new place, whole, its header not rewritten
                    // (it kept changing, or could not be read again): nothing is undone.
                    return Err(e);
                } else {
                    undo_renames(&*storage, &renames);
                    if copied {
                        // The copy goes, and only it: the directory is this move's.
                        let _ = storage.delete_with_artifacts(&new_file);
                    } else if across {
                        // The new path held no file before (checked above).
                        let _ = storage.unlink(&new_file);
                    }
                    let (header, cwd, dir, file, journal) = saved;
                    self.header = header;
                    self.cwd = cwd;
                    self.session_dir = dir;
                    self.file = file;
                    self.journal.put_back(journal);
                    if let (Some(texts), Some(path)) = (&mut self.bodies, texts_path) {
                        texts.path = path;
                    }
                    return Err(e);
                }
            }
        } else {
            self.journal.put_back_failure(saved.4);
        }
        let on_disk = storage.exists(&new_file).unwrap_or(false);
        self.breadcrumb(!on_disk);
        if across && rewrite_landed.is_none() {
            // The session is whole and durable at its new path: the source goes. A
            // failure here leaves a copy behind, which the error names; the move itself
            // stands. A new file that landed but is not durable keeps the source (two
            // copies rather than none after a power loss), and the error says so.
            storage.delete_with_artifacts(&old_file)?;
        }
        match (not_durable, rewrite_landed) {
            (Some(e), _) => Err(e.into()),
            (None, Some(e)) => Err(e),
            (None, None) => Ok(Some(new_file)),
        }
    }

    /// After a move's rename, reads the session again at its new file (which grew since
    /// it was read: `conflict` said so) and rewrites it with the moved header, up to a
    /// few times while it keeps growing; the last conflict is returned if it never stops.
    fn rewrite_after_move(&mut self, new_cwd: &str, previous: Option<&Path>, conflict: SessionError) -> Result<()> {
        const TRIES: usize = 5;
        let mut last = conflict;
        let Some(file) = self.file.clone() else { return Err(last) };
        for _ in 0..TRIES {
            let mut fresh = SessionManager::open_with(self.dialect(), &file, self.env.clone(), OpenMode::MustExist)?;
            fresh.header = moved_header(self.dialect(), &fresh.header, new_cwd, previous);
            fresh.cwd = new_cwd.to_owned();
            fresh.session_dir.clone_from(&self.session_dir);
            fresh.access = self.access;
            let written = match fresh.dialect() {
                Dialect::Omp => {
                    fresh.journal.require_rewrite();
                    fresh.journal.force_file_creation()?;
                    fresh.rewrite_omp()
                }
                Dialect::Pi => fresh.rewrite_entries(),
            };
            match written {
                Err(e) if super::is_conflict(&e) => last = e,
                other => {
                    let failure = self.journal.take_failure();
                    *self = fresh;
                    self.journal.keep_failure(failure.filter(|_| other.is_err()));
                    return other;
                }
            }
        }
        Err(last)
    }

    /// Returns the directory a move to `new_cwd` goes to without a target: the bucket of
    /// `new_cwd` beside `old_dir` when that is the bucket of the current cwd (omp's
    /// `resolveManagedSessionRoot`), else the default bucket of the agent directory
    /// (created, and omp's legacy buckets moved into it, when `create`).
    fn bucket_for_move(&self, old_dir: &Path, new_cwd: &str, create: bool) -> Result<PathBuf> {
        let dirs = self.env.dirs.as_ref().ok_or_else(|| SessionError::NoAgentDir { cwd: new_cwd.to_owned() })?;
        let old_name = old_dir.file_name().map(|n| n.to_string_lossy().into_owned());
        let managed = old_name.as_deref().is_some_and(|n| {
            n == dirs.bucket_name(&self.cwd)
                || n == session_discovery::legacy_absolute_bucket(&dirs.env.resolve(&self.cwd))
        });
        match (managed, old_dir.parent()) {
            (true, Some(root)) => Ok(root.join(dirs.bucket_name(new_cwd))),
            _ if create => Ok(dirs.ensure_default_session_dir(&*self.env.storage, new_cwd)?),
            _ => Ok(dirs.default_session_dir(new_cwd)),
        }
    }

    /// Returns the file [`SessionManager::move_to`] with these arguments would move this
    /// session to (`None`: it has no file), changing nothing; the same file when the move
    /// would leave it where it is.
    pub(crate) fn planned_move(&self, new_cwd: &str, target_session_dir: Option<&Path>) -> Result<Option<PathBuf>> {
        let new_cwd = absolute(&self.env.process_cwd, Path::new(new_cwd)).to_string_lossy().into_owned();
        let Some(old_file) = self.file.clone().filter(|_| self.persist) else { return Ok(None) };
        let old_dir = self.session_dir.clone().or_else(|| old_file.parent().map(Path::to_path_buf)).unwrap_or_default();
        let new_dir = match target_session_dir {
            Some(d) => absolute(&self.env.process_cwd, d),
            None => self.bucket_for_move(&old_dir, &new_cwd, false)?,
        };
        Ok(Some(new_dir.join(old_file.file_name().map(PathBuf::from).unwrap_or_default())))
    }

    // ------------------------------------------------------------------ fork_from

    /// Copies the whole session at `source` into a new session for `target_cwd` in
    /// `session_dir` (`forkFrom`) with the default [`ForkOptions`]. The source is
    /// migrated in memory first and left untouched on disk (pi repairs a missing final
    /// newline, as it does on any load). A source without a valid header is
    /// [`SessionError::ForkSourceInvalid`] for pi; omp forks it as a new, empty session
    /// with no lineage, as omp 18.3.4 does.
    ///
    /// ```
    /// use session::{Dialect, Env, SessionManager};
    /// # fn main() -> Result<(), session::SessionError> {
    /// let env = Env::memory();
    /// let mut m = SessionManager::create(Dialect::Pi, "/a", std::path::Path::new("/s/a"), env.clone())?;
    /// m.append_message_json(serde_json::json!({"role": "user", "content": "hi", "timestamp": 1}))?;
    /// let source = m.session_file().expect("persisted").to_path_buf();
    /// let copy = SessionManager::fork_from(Dialect::Pi, &source, "/b", std::path::Path::new("/s/b"), env)?;
    /// assert_eq!(copy.cwd(), "/b");
    /// assert_eq!(copy.tree().entries().len(), 1);
    /// assert_eq!(copy.header().get_str("parentSession"), source.to_str());
    /// # Ok(())
    /// # }
    /// ```
    pub fn fork_from(
        dialect: Dialect,
        source: &Path,
        target_cwd: &str,
        session_dir: &Path,
        env: Env,
    ) -> Result<SessionManager> {
        SessionManager::fork_from_with(dialect, source, target_cwd, session_dir, ForkOptions::default(), env)
    }

    /// [`SessionManager::fork_from`] with omp's options: the artifacts directory copied
    /// (by default), a chosen file, the inherited cost zeroed, an interrupted tail
    /// repaired, the breadcrumb (omp) suppressed.
    pub fn fork_from_with(
        dialect: Dialect,
        source: &Path,
        target_cwd: &str,
        session_dir: &Path,
        options: ForkOptions,
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
        // Read as an open reads it: the texts of large records stay in the source, so the
        // lines the copy does not change are copied from it ([`Body::publish`]).
        let (parsed, bodies, _) = super::load::read_indexed(&env, &source, dialect)?;
        let valid = matches!(parsed.header_check(dialect), session_model::HeaderCheck::Valid { .. });
        // pi refuses a source without a valid header; omp loads it as no entries and
        // forks a new, empty session (no lineage, no title).
        if !valid && dialect == Dialect::Pi {
            return Err(SessionError::ForkSourceInvalid { path: source });
        }
        if dialect == Dialect::Pi && !parsed.ends_with_newline {
            super::repair_final_newline(&*storage, &source, parsed.byte_len as u64)?;
        }
        let mut records = if valid { parsed.records } else { Vec::new() };
        session_migrate::migrate(&mut records, &mut || ids::new_entry_id(dialect, &mut rand::rng(), |_| false));
        let src_header = (!records.is_empty()).then(|| records.remove(0));
        // Nulls (and for pi stray headers) are not entries: the copy leaves them out.
        records.retain(|r| SessionTree::keeps(dialect, r));
        if options.reset_inherited_cost {
            records = records.into_iter().map(|r| reset_cost(&r).unwrap_or(r)).collect();
        }
        storage.ensure_dir(session_dir)?;
        let target_cwd_abs = absolute(&env.process_cwd, Path::new(target_cwd)).to_string_lossy().into_owned();
        let mut m = SessionManager::blank(dialect, env, target_cwd_abs.clone(), Some(session_dir.to_path_buf()), true);
        m.bodies = bodies.map(|bodies| super::FileTexts { bodies, path: source.clone() });
        let id = m.env.new_session_id();
        let ts = m.env.now_iso();
        let file = match &options.session_file {
            Some(f) => absolute(&m.env.process_cwd, f),
            None => session_dir.join(session_discovery::session_file_name(&ts, &id)),
        };
        if options.repair_interrupted_tail {
            let tree = SessionTree::new(dialect, records.clone());
            let now_ms = m.env.now_ms();
            let mut parent = tree.leaf_id().map(str::to_owned);
            for (call_id, name) in dangling_tool_calls(&tree) {
                let eid = ids::new_entry_id(dialect, &mut rand::rng(), |i| tree.contains_id(i));
                let message = serde_json::json!({
                    "role": "toolResult",
                    "toolCallId": call_id,
                    "toolName": name,
                    "content": [{"type": "text", "text": ABORTED_TOOL_RESULT}],
                    "isError": true,
                    "timestamp": now_ms,
                });
                records.push(entries::pi::message(&Base::new(eid.clone(), parent.as_deref(), ts.clone()), message));
                parent = Some(eid);
            }
        }
        let source_artifacts = artifacts_dir(&source);
        let target_artifacts = artifacts_dir(&file);
        // The target must be new: nothing is copied over another session (or the source
        // itself) or over an artifacts directory that is already there.
        if storage.exists(&file)? {
            return Err(SessionError::TargetExists { path: file });
        }
        if options.copy_artifacts
            && dialect == Dialect::Omp
            && let Some(to) = &target_artifacts
            && storage.exists(to)?
        {
            return Err(SessionError::TargetExists { path: to.clone() });
        }
        match dialect {
            Dialect::Pi => {
                m.header = entries::pi::header(&id, &ts, &target_cwd_abs, Some(&source.to_string_lossy()));
                m.file = Some(file.clone());
                let size = m.replace_entries(records, Some(&file)).unwrap_or(Ok(0))?;
                m.journal.on_disk(size);
            }
            Dialect::Omp => {
                // Without a source header (omp forks an invalid source as an empty one)
                // there is no parent, cache key, title or extra directory to carry.
                let folded = src_header.as_ref().map(|h| super::fold_slot(h, parsed.title_slot.as_ref()));
                let get_str = |k: &str| folded.as_ref().and_then(|f| f.get_str(k));
                m.header = entries::omp::fork_from_header(&id, &ts, &target_cwd_abs, folded.as_ref());
                m.slot = Some(TitleSlot {
                    title: get_str("title").unwrap_or_default().to_owned(),
                    source: get_str("titleSource").map(str::to_owned),
                    updated_at: ts.clone(),
                });
                let records = m.resolve_blobs(records);
                m.file = Some(file.clone());
                // The artifacts go first: a fork whose file exists is whole.
                if options.copy_artifacts
                    && let (Some(from), Some(to)) = (&source_artifacts, &target_artifacts)
                    && storage.exists(from)?
                {
                    storage.copy_dir(from, to).inspect_err(|_| remove_copied_artifacts(&*storage, &file))?;
                }
                let size = match m.replace_entries(records, Some(&file)).unwrap_or(Ok(0)) {
                    Ok(size) => size,
                    Err(e) => {
                        if !e.landed() && options.copy_artifacts {
                            remove_copied_artifacts(&*storage, &file);
                        }
                        return Err(e);
                    }
                };
                m.journal.on_disk(size);
                if !options.suppress_breadcrumb {
                    m.breadcrumb(false);
                }
            }
        }
        Ok(m)
    }
}

/// The text of the tool results that close an interrupted turn in a fork.
const ABORTED_TOOL_RESULT: &str = "Tool execution was aborted.";

/// Returns the `(id, name)` of each tool call of the last assistant message on the
/// active branch that no later tool result on the branch answers.
fn dangling_tool_calls(tree: &SessionTree) -> Vec<(String, String)> {
    let branch = tree.get_branch(None);
    let Some(at) = branch.iter().rposition(|r| r.message_role() == Some("assistant")) else {
        return Vec::new();
    };
    let Some(Value::Array(blocks)) = branch[at].get("message").and_then(|m| m.get("content")).cloned() else {
        return Vec::new();
    };
    let answered: Vec<String> = branch[at + 1..]
        .iter()
        .filter(|r| r.message_role() == Some("toolResult"))
        .filter_map(|r| r.get("message").and_then(|m| m.get("toolCallId")).and_then(Value::as_str).map(str::to_owned))
        .collect();
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("toolCall"))
        .filter_map(|b| {
            let id = b.get("id").and_then(Value::as_str)?;
            let name = b.get("name").and_then(Value::as_str).unwrap_or_default();
            (!answered.iter().any(|a| a == id)).then(|| (id.to_owned(), name.to_owned()))
        })
        .collect()
}

/// Returns `record` with its inherited cost zeroed, or `None` when it has none.
fn reset_cost(record: &Record) -> Option<Record> {
    let has_usage = |v: &Value| {
        v.get("message").and_then(|m| m.get("usage")).is_some_and(Value::is_object)
            || v.get("usage").is_some_and(Value::is_object)
    };
    if !has_usage(record.value()) {
        return None;
    }
    Some(record.map_value(|v| {
        let usage = match v.get_mut("message").and_then(|m| m.get_mut("usage")) {
            Some(u) => Some(u),
            None => v.get_mut("usage"),
        };
        let Some(Value::Object(usage)) = usage else { return };
        if let Some(Value::Object(cost)) = usage.get_mut("cost") {
            for value in cost.values_mut() {
                if value.is_number() {
                    *value = 0.into();
                }
            }
        }
        for key in ["credits", "premiumRequests"] {
            if let Some(value) = usage.get_mut(key)
                && value.is_number()
            {
                *value = 0.into();
            }
        }
    }))
}

/// Returns the strings of a JSON array (nothing for anything else).
/// Publishes a new omp session in `dir` (a fresh id, an empty title slot, the header with
/// `extra`) holding `records`, and returns its file, which must not exist yet (a write
/// that landed but could not be made durable is kept).
fn publish_new_omp(
    env: &Env,
    dir: &Path,
    cwd: &str,
    extra: entries::omp::HeaderExtra,
    records: &[Record],
    source: Option<&Path>,
) -> Result<PathBuf> {
    let id = env.new_session_id();
    let ts = env.now_iso();
    let header = entries::omp::header(&id, &ts, cwd, extra);
    let slot = TitleSlot { title: String::new(), source: None, updated_at: ts.clone() };
    let file = dir.join(session_discovery::session_file_name(&ts, &id));
    let body = Body { dialect: Dialect::Omp, env, header: &header, slot: Some(&slot), entries: records, source };
    match body.publish(&file, ExpectedSize::Missing) {
        Ok(_) => Ok(file),
        Err(e) if e.landed() => Ok(file),
        Err(e) => Err(e),
    }
}

fn string_array(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => Vec::new(),
    }
}

/// Returns the header after a move to `new_cwd`: `previous` appended to
/// `previousSessionFiles` (once), `cwd` replaced, `new_cwd` dropped from
/// `additionalDirectories` (the key removed when empty).
fn moved_header(dialect: Dialect, header: &Record, new_cwd: &str, previous: Option<&Path>) -> Record {
    header.map_value(|v| {
        let Value::Object(m) = v else { return };
        if dialect == Dialect::Pi {
            // pi's header knows nothing of moves: only its cwd changes.
            m.insert("cwd".into(), new_cwd.into());
            return;
        }
        if let Some(previous) = previous {
            let previous = Value::from(previous.to_string_lossy().into_owned());
            let mut list = match m.get("previousSessionFiles") {
                Some(Value::Array(items)) => items.clone(),
                _ => Vec::new(),
            };
            if !list.contains(&previous) {
                list.push(previous);
            }
            m.insert("previousSessionFiles".into(), Value::Array(list));
        }
        m.insert("cwd".into(), new_cwd.into());
        if let Some(Value::Array(dirs)) = m.get("additionalDirectories") {
            let kept: Vec<Value> = dirs.iter().filter(|d| d.as_str() != Some(new_cwd)).cloned().collect();
            if kept.is_empty() {
                m.shift_remove("additionalDirectories");
            } else {
                m.insert("additionalDirectories".into(), Value::Array(kept));
            }
        }
    })
}

/// Removes the artifacts directory copied for `file` after the fork failed, best
/// effort; only while no journal exists at `file` (one that exists is someone else's).
fn remove_copied_artifacts(storage: &dyn session_store::Storage, file: &Path) {
    if matches!(storage.exists(file), Ok(false)) {
        let _ = storage.delete_with_artifacts(file);
    }
}

/// Undoes `renames` (in reverse), best effort: a rename that cannot be undone leaves its
/// file at the new place, where the next move or open finds it.
fn undo_renames(storage: &dyn session_store::Storage, renames: &[(PathBuf, PathBuf)]) {
    for (from, to) in renames.iter().rev() {
        let _ = storage.rename(to, from);
    }
}
