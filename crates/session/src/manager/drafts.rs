//! omp's unsent-editor drafts (`saveDraft`, `consumeDraft`) and the close-time removal
//! of a session file that was written only to carry a draft.
//!
//! A draft lives in the session's artifacts directory as `draft.txt`. Saving one forces
//! the session onto disk (so that resume finds the file the draft belongs to); when that
//! write is what creates the file and the session holds nothing but startup metadata
//! (model, thinking level, service tier, mode changes and credential pins), the marker
//! `.draft-only-session` is written beside it. [`SessionManager::close`] then deletes
//! such a file with its artifacts once its draft is gone, provided the file on disk,
//! read again under the session's lock, still holds nothing else.

use std::path::PathBuf;

use std::time::Duration;

use session_model::{Dialect, EntryType, Record, parse_session_bytes};
use session_store::{LockWait, artifacts_dir};

use super::{Access, SessionManager, wrong_dialect};
use crate::SessionError;
use crate::error::unless_missing;

type Result<T> = std::result::Result<T, SessionError>;

/// The draft's file name inside the artifacts directory.
pub(crate) const DRAFT_FILE: &str = "draft.txt";

/// The marker of a session file written only for a draft.
pub(crate) const DRAFT_ONLY_MARKER: &str = ".draft-only-session";

/// How long a write of a session whose draft-only cleanup is armed waits for the
/// session's lock (another manager's cleanup holds it for one read and one delete).
const CLEANUP_LOCK_WAIT: Duration = Duration::from_secs(5);

/// Returns whether `entry` is startup metadata that does not keep a draft-only session
/// alive once its draft is gone (omp's `isDraftOnlyMetadataEntry`): a model, thinking
/// level, service tier or mode change, or a credential pin. Messages, compactions,
/// custom entries, labels, titles and every other type keep the session.
pub(crate) fn is_draft_only_metadata(entry: &Record) -> bool {
    matches!(
        entry.entry_type(),
        EntryType::ModelChange
            | EntryType::ThinkingLevelChange
            | EntryType::ServiceTierChange
            | EntryType::ModeChange
            | EntryType::CredentialPin
    )
}

impl SessionManager {
    /// The artifacts directory of a persisted omp session, or why there is none.
    fn draft_dir(&self, operation: &'static str) -> Result<Option<PathBuf>> {
        if self.dialect() != Dialect::Omp {
            return Err(wrong_dialect(operation, self.dialect()));
        }
        if !self.persist {
            return Ok(None);
        }
        Ok(self.file.as_deref().and_then(artifacts_dir))
    }

    /// [`Omp::save_draft`](crate::Omp::save_draft) (the handle checked the dialect).
    pub(crate) fn save_draft(&mut self, text: &str) -> Result<()> {
        self.writable()?;
        let Some(dir) = self.draft_dir("save_draft")? else { return Ok(()) };
        let storage = self.env.storage.clone();
        let draft = dir.join(DRAFT_FILE);
        if text.is_empty() {
            unless_missing(storage.unlink(&draft))?;
            return Ok(());
        }
        let file = self.file.clone().unwrap_or_default();
        let only_for_draft = !storage.exists(&file)? && self.tree.entries().iter().all(is_draft_only_metadata);
        self.ensure_on_disk()?;
        storage.ensure_dir(&dir)?;
        if only_for_draft {
            storage.write(&dir.join(DRAFT_ONLY_MARKER), b"")?;
            self.arm_draft_cleanup(true);
        }
        storage.write(&draft, text.as_bytes())?;
        Ok(())
    }

    /// [`Omp::consume_draft`](crate::Omp::consume_draft) (the handle checked the dialect).
    pub(crate) fn consume_draft(&mut self) -> Result<Option<String>> {
        if self.access == Access::ReadOnly {
            return Err(SessionError::ReadOnly { path: self.file.clone().unwrap_or_default() });
        }
        let Some(dir) = self.draft_dir("consume_draft")? else { return Ok(None) };
        let storage = self.env.storage.clone();
        let draft = dir.join(DRAFT_FILE);
        let Some(bytes) = unless_missing(storage.read(&draft))? else { return Ok(None) };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        unless_missing(storage.unlink(&draft))?;
        if self.tree.entries().iter().all(is_draft_only_metadata) && storage.exists(&dir.join(DRAFT_ONLY_MARKER))? {
            self.arm_draft_cleanup(true);
        }
        Ok(Some(text))
    }

    /// Persists an appended entry while this session's draft-only cleanup is armed, so
    /// that it cannot race another manager's cleanup of the same file (two terminals on
    /// one session: one consumed the draft, the other closes): under the session's lock,
    /// which the cleanup holds for its read and delete, the file is looked at first; a
    /// file the cleanup removed is written again whole (header and every entry), one
    /// still there takes the append. omp takes the same lock for the first such entry;
    /// it would append to the removed path.
    pub(super) fn persist_beside_draft_cleanup(&mut self, line: &str) -> Result<()> {
        let Some(path) = self.file.clone() else { return Ok(()) };
        let storage = self.env.storage.clone();
        let lock = storage.lock(&path, LockWait::Timeout(CLEANUP_LOCK_WAIT))?;
        let on_disk = storage.stat(&path)?;
        if self.dialect() != Dialect::Omp {
            return Err(wrong_dialect("an omp append", self.dialect()));
        }
        let written = if on_disk.is_none() {
            self.journal.file_gone();
            self.rewrite_omp()
        } else if self.journal.needs_rewrite() {
            self.rewrite_omp()
        } else {
            self.append_omp_line(line)
        };
        // A writer opened under this lock holds none of its own (the storage leaves the
        // session's locks to their holder): it goes with the lock, and the next one
        // takes its own.
        self.close_writer();
        drop(lock);
        written
    }

    fn arm_draft_cleanup(&mut self, armed: bool) {
        self.journal.arm_draft_cleanup(armed);
    }

    /// The close-time cleanup (omp's `#dropIfEmptyAndNoDraft`): deletes the session file
    /// and its artifacts when this manager wrote it only for a draft, the draft is gone,
    /// and the file, read again under the session's lock, holds a valid header, no
    /// damaged record and only startup metadata. Returns whether it deleted the file.
    ///
    /// The lock is the session's lock ([`Storage::lock`](session_store::Storage::lock));
    /// every append of a manager whose cleanup is armed (one that consumed this draft)
    /// takes it too and writes the session whole if the file is gone
    /// ([`SessionManager::persist_beside_draft_cleanup`]), so a session another manager
    /// took over is never lost to this cleanup. On the file storage omp's append writer
    /// holds the same lock. When the lock is busy, or cannot be taken, the file stays (a
    /// leftover file loses nothing).
    pub(crate) fn drop_if_only_for_draft(&mut self) -> Result<bool> {
        let armed = self.journal.draft_cleanup_armed();
        let (Some(file), Some(dir)) = (self.file.clone(), self.file.as_deref().and_then(artifacts_dir)) else {
            return Ok(false);
        };
        if !armed {
            return Ok(false);
        }
        let storage = self.env.storage.clone();
        if !storage.exists(&file)? {
            self.arm_draft_cleanup(false);
            return Ok(false);
        }
        if storage.exists(&dir.join(DRAFT_FILE))? {
            return Ok(false);
        }
        let disarm = |m: &mut SessionManager| -> Result<bool> {
            unless_missing(storage.unlink(&dir.join(DRAFT_ONLY_MARKER)))?;
            m.arm_draft_cleanup(false);
            Ok(false)
        };
        if !self.tree.entries().iter().all(is_draft_only_metadata) {
            return disarm(self);
        }
        // Busy (another writer has the file open) or not to be had: the file stays.
        let Ok(_lock) = storage.lock(&file, LockWait::NoWait) else { return Ok(false) };
        let Some(bytes) = unless_missing(storage.read(&file))? else {
            self.arm_draft_cleanup(false);
            return Ok(false);
        };
        let on_disk = parse_session_bytes(&bytes, Dialect::Omp);
        let only_metadata = on_disk.header().is_some()
            && on_disk.malformed == 0
            && on_disk.records[1..].iter().all(is_draft_only_metadata);
        if !only_metadata {
            return disarm(self);
        }
        storage.delete_with_artifacts(&file)?;
        self.journal.draft_file_deleted();
        Ok(true)
    }
}
