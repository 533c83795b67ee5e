//! The operations only one dialect has, on handles of their own: [`SessionManager::pi`]
//! gives a [`Pi`], [`SessionManager::omp`] an [`Omp`], and either is
//! [`SessionError::WrongDialect`] on a session of the other agent, so a caller checks
//! the dialect once instead of at every call.

use session_model::ids::EntryId;
use std::path::{Path, PathBuf};

use serde_json::Value;
use session_model::typed::Usage;
use session_model::{Dialect, EntryType, entries};

use crate::{SessionError, SessionManager};

type Result<T> = std::result::Result<T, SessionError>;

impl SessionManager {
    /// Returns the pi-only operations of this session.
    ///
    /// ```
    /// use session::{Dialect, Env, SessionError, SessionManager};
    ///
    /// let mut m = SessionManager::in_memory(Dialect::Pi, "/work", Env::memory());
    /// m.pi()?.append_model_change("anthropic", "claude-sonnet-4-5")?;
    /// let mut omp = SessionManager::in_memory(Dialect::Omp, "/work", Env::memory());
    /// assert!(matches!(omp.pi(), Err(SessionError::WrongDialect { .. })));
    /// # Ok::<(), SessionError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`SessionError::WrongDialect`] for an omp session.
    pub fn pi(&mut self) -> Result<Pi<'_>> {
        match self.dialect() {
            Dialect::Pi => Ok(Pi(self)),
            dialect => Err(SessionError::WrongDialect { operation: "SessionManager::pi", dialect }),
        }
    }

    /// Returns the omp-only operations of this session.
    ///
    /// ```
    /// use session::{Dialect, Env, SessionError, SessionManager};
    ///
    /// let mut m = SessionManager::in_memory(Dialect::Omp, "/work", Env::memory());
    /// m.omp()?.append_model_change("anthropic/claude-sonnet-4-5", None, false)?;
    /// let mut pi = SessionManager::in_memory(Dialect::Pi, "/work", Env::memory());
    /// assert!(matches!(pi.omp(), Err(SessionError::WrongDialect { .. })));
    /// # Ok::<(), SessionError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`SessionError::WrongDialect`] for a pi session.
    pub fn omp(&mut self) -> Result<Omp<'_>> {
        match self.dialect() {
            Dialect::Omp => Ok(Omp(self)),
            dialect => Err(SessionError::WrongDialect { operation: "SessionManager::omp", dialect }),
        }
    }
}

/// The operations only pi's sessions have ([`SessionManager::pi`]).
///
/// An omp-only operation is not on it (E0599):
///
/// ```compile_fail,E0599
/// use session::{Dialect, Env, SessionManager};
///
/// let mut m = SessionManager::in_memory(Dialect::Pi, "/work", Env::memory());
/// m.pi().unwrap().ensure_on_disk();
/// ```
pub struct Pi<'a>(&'a mut SessionManager);

impl std::fmt::Debug for Pi<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Pi").field(&self.0.session_id()).finish()
    }
}

impl Pi<'_> {
    /// Appends pi's `model_change` (`provider`, `modelId`).
    pub fn append_model_change(&mut self, provider: &str, model_id: &str) -> Result<EntryId> {
        self.0.append_with(|b| entries::pi::model_change(b, provider, model_id))
    }

    /// Appends pi's `usage` record (`note` is written only when non-empty).
    pub fn append_usage(
        &mut self,
        kind: &str,
        provider: &str,
        model: &str,
        usage: &Usage,
        note: Option<&str>,
    ) -> Result<EntryId> {
        let usage = usage.to_value()?;
        self.0.append_with(|b| entries::pi::usage(b, kind, provider, model, usage, note))
    }

    /// Appends pi's `context_edit`: replaces (`{content}`) or omits (`null`) the content
    /// of an earlier user, assistant, tool-result or custom message on the active branch.
    pub fn append_context_edit(&mut self, target_id: &str, replacement: Value) -> Result<EntryId> {
        let valid = match &replacement {
            Value::Null => true,
            Value::Object(m) => matches!(m.get("content"), Some(Value::String(_) | Value::Array(_))),
            _ => false,
        };
        if !valid {
            return Err(SessionError::InvalidContextEdit);
        }
        let target = self
            .0
            .tree()
            .get(target_id)
            .cloned()
            .ok_or_else(|| SessionError::EntryNotFound { id: target_id.into() })?;
        if !self.0.tree().get_branch(None).iter().any(|r| r.id() == Some(target_id)) {
            return Err(SessionError::NotOnActiveBranch { id: target_id.into() });
        }
        let role = target.message_role().map(str::to_owned);
        let editable = match target.entry_type() {
            EntryType::CustomMessage => true,
            EntryType::Message => matches!(role.as_deref(), Some("user" | "assistant" | "toolResult")),
            _ => false,
        };
        if !editable {
            return Err(SessionError::NotEditable { id: target_id.into() });
        }
        let replacement = match (&replacement, role.as_deref()) {
            (Value::Object(m), Some("assistant" | "toolResult")) if m.get("content").is_some_and(Value::is_string) => {
                let text = m.get("content").cloned().unwrap_or_default();
                serde_json::json!({"content": [{"type": "text", "text": text}]})
            }
            _ => replacement,
        };
        self.0.append_with(|b| entries::pi::context_edit(b, target_id, replacement))
    }
}

/// The operations only omp's sessions have ([`SessionManager::omp`]): omp's own entry
/// types, its lifecycle (first write, atomic batches, forks, copies) and drafts.
///
/// A pi-only operation is not on it, nor on the manager (E0599):
///
/// ```compile_fail,E0599
/// use session::{Dialect, Env, SessionManager};
///
/// let mut m = SessionManager::in_memory(Dialect::Omp, "/work", Env::memory());
/// m.omp().unwrap().append_context_edit("0a1b2c3d", serde_json::json!(null));
/// ```
///
/// ```compile_fail,E0599
/// use session::{Dialect, Env, SessionManager};
///
/// let mut m = SessionManager::in_memory(Dialect::Omp, "/work", Env::memory());
/// m.ensure_on_disk();
/// ```
pub struct Omp<'a>(&'a mut SessionManager);

impl std::fmt::Debug for Omp<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Omp").field(&self.0.session_id()).finish()
    }
}

impl Omp<'_> {
    /// Appends omp's `model_change` (`model` = `provider/modelId`, optional role).
    pub fn append_model_change(&mut self, model: &str, role: Option<&str>, is_fallback: bool) -> Result<EntryId> {
        self.0.append_with(|b| entries::omp::model_change(b, model, role, is_fallback))
    }

    /// Appends omp's `service_tier_change` (a per-family map, or `null` to clear).
    pub fn append_service_tier_change(&mut self, tier: Value) -> Result<EntryId> {
        self.0.append_with(|b| entries::omp::service_tier_change(b, tier))
    }

    /// Appends omp's `mode_change`.
    pub fn append_mode_change(&mut self, mode: &str, data: Option<Value>) -> Result<EntryId> {
        self.0.append_with(|b| entries::omp::mode_change(b, mode, data))
    }

    /// Appends omp's `session_init` (the caller's fields in their order).
    pub fn append_session_init(&mut self, init: Value) -> Result<EntryId> {
        self.0.append_with(|b| entries::omp::session_init(b, init))
    }

    /// Appends omp's `reset_boundary` (`/clear`: the model sees only what follows).
    pub fn append_reset_boundary(&mut self) -> Result<EntryId> {
        self.0.append_with(entries::omp::reset_boundary)
    }

    /// Appends omp's `ttsr_injection`.
    pub fn append_ttsr_injection(&mut self, rules: &[String]) -> Result<EntryId> {
        self.0.append_with(|b| entries::omp::ttsr_injection(b, rules))
    }

    /// Appends omp's `credential_pin`.
    pub fn append_credential_pin(&mut self, provider: &str, hash: &str) -> Result<EntryId> {
        self.0.append_with(|b| entries::omp::credential_pin(b, provider, hash))
    }

    /// Appends omp's `model_usage` (usage of a side call; the caller's fields in order).
    pub fn append_model_usage(&mut self, usage: Value) -> Result<EntryId> {
        self.0.append_with(|b| entries::omp::model_usage(b, usage))
    }

    /// Makes sure the session's file exists and holds everything in memory (omp's
    /// `ensureOnDisk`): from now on every entry is written, even before an assistant
    /// message, and a file that is missing, migrated or behind is rewritten whole,
    /// atomically. In memory it only opens the first-write gate.
    pub fn ensure_on_disk(&mut self) -> Result<()> {
        self.0.ensure_on_disk()
    }

    /// Runs `stage`, whose appends are staged in memory, then publishes them with one
    /// atomic rewrite of the whole file (omp's `appendEntriesAtomically`): a reader sees
    /// all of them or none.
    ///
    /// When `stage` fails, or the rewrite does, the staged entries are removed again
    /// (the leaf restored), the remaining state is rewritten to repair the file (a
    /// failure of that repair stays latched, see [`SessionManager::persistence_error`]),
    /// and the error is returned. A rewrite that landed but was not synced
    /// ([`SessionError::landed`]) keeps the entries: they are in the file, and the error
    /// says so. Before omp's first-write gate opens nothing is written.
    /// omp only; batches do not nest ([`SessionError::InBatch`]).
    ///
    /// ```
    /// use session::{Dialect, Env, SessionManager};
    /// use serde_json::json;
    /// # fn main() -> Result<(), session::SessionError> {
    /// let dir = std::path::Path::new("/sessions");
    /// let mut m = SessionManager::create(Dialect::Omp, "/work", dir, Env::memory())?;
    /// m.omp()?.ensure_on_disk()?;
    /// let ids = m.omp()?.append_entries_atomically(|m| {
    ///     let call = m.append_message_json(json!({"role": "assistant", "content": [], "timestamp": 1}))?;
    ///     let result = m.append_message_json(json!({"role": "toolResult", "toolCallId": "c", "content": [], "timestamp": 2}))?;
    ///     Ok([call, result])
    /// })?;
    /// let file = m.session_file().unwrap().to_path_buf();
    /// let again = SessionManager::open_read_only(Dialect::Omp, &file, m.env().clone())?;
    /// assert!(ids.iter().all(|id| again.tree().get(id).is_some()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn append_entries_atomically<T>(&mut self, stage: impl FnOnce(&mut SessionManager) -> Result<T>) -> Result<T> {
        self.0.append_entries_atomically(stage)
    }

    /// Continues this session under a new id in a new file of the session directory
    /// (omp's `fork`): every entry is kept, the header copies the title,
    /// `parentSession` is the old id and `providerPromptCacheKey` the old key (or the
    /// old id). The artifacts directory is copied first, then the file is published
    /// whole (it must not exist); on a failure neither is left behind and the manager
    /// is unchanged. The manager then writes to the new file, whose path it returns
    /// (`None` in memory, where only the header changes).
    ///
    /// ```
    /// use session::{Dialect, Env, SessionManager};
    /// # fn main() -> Result<(), session::SessionError> {
    /// let mut m = SessionManager::create(Dialect::Omp, "/work", std::path::Path::new("/s"), Env::memory())?;
    /// m.append_message_json(serde_json::json!({"role": "user", "content": "hi", "timestamp": 1}))?;
    /// let old_id = m.session_id().to_owned();
    /// let file = m.omp()?.fork()?.expect("a persisted session forks into a file");
    /// assert_eq!(m.header().get_str("parentSession"), Some(old_id.as_str()));
    /// assert_eq!(m.session_file(), Some(file.as_path()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn fork(&mut self) -> Result<Option<PathBuf>> {
        self.0.fork()
    }

    /// Writes the current transcript (every entry) as a new session with a fresh id
    /// into `session_dir` (default: this session's directory) and returns its file
    /// (omp's `persistCopy`). The manager stays on its own session; the breadcrumb is
    /// left alone. The copy is published whole or not at all.
    pub fn persist_copy(&self, session_dir: Option<&Path>) -> Result<PathBuf> {
        self.0.persist_copy(session_dir)
    }

    /// Saves the unsent editor text `text` as the session's draft (omp's `saveDraft`):
    /// `<artifacts>/draft.txt`. An empty `text` deletes the draft. Otherwise the session
    /// is put on disk first ([`Omp::ensure_on_disk`](crate::Omp::ensure_on_disk)); when that creates the
    /// file for a session holding only startup metadata, the `.draft-only-session` marker
    /// is written too, and [`SessionManager::close`] removes the file again if the draft
    /// is consumed and nothing else is added. A session in memory has nowhere to keep a
    /// draft: nothing is done. omp only ([`SessionError::WrongDialect`]).
    ///
    /// ```
    /// use session::{Dialect, Env, SessionManager};
    /// # fn main() -> Result<(), session::SessionError> {
    /// let env = Env::memory();
    /// let mut m = SessionManager::create(Dialect::Omp, "/work", std::path::Path::new("/s"), env.clone())?;
    /// m.omp()?.save_draft("half a thought")?;
    /// let file = m.session_file().expect("persisted").to_path_buf();
    /// assert!(env.storage().exists(&file)?, "the draft's session is on disk");
    /// assert_eq!(m.omp()?.consume_draft()?.as_deref(), Some("half a thought"));
    /// m.close()?;
    /// assert!(!env.storage().exists(&file)?, "a session written only for its draft is removed");
    /// # Ok(())
    /// # }
    /// ```
    pub fn save_draft(&mut self, text: &str) -> Result<()> {
        self.0.save_draft(text)
    }

    /// Reads and deletes the session's draft (omp's `consumeDraft`); `None` when there
    /// is none (or the session is in memory). Bytes that are not UTF-8 are read as
    /// U+FFFD, as omp reads them. A session written only for its draft and still holding
    /// nothing else is removed by [`SessionManager::close`] afterwards. It deletes a
    /// file: a read-only manager is refused ([`SessionError::ReadOnly`]).
    pub fn consume_draft(&mut self) -> Result<Option<String>> {
        self.0.consume_draft()
    }
}
