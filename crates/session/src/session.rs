//! [`Session`]: a session opened for reading only, as a type.

use std::path::Path;

use session_model::{Diagnostic, Dialect, Record};
use session_tree::{Leaf, SessionTree};

use crate::context::Context;
use crate::env::Env;
use crate::error::SessionError;
use crate::manager::{LoadReport, SessionManager};

type Result<T> = std::result::Result<T, SessionError>;

/// A session opened for reading only: its header, tree, leaf, the context at any leaf,
/// what the parser reported and what the open would have written. It has no method that
/// writes, so holding one is the proof that nothing reaches the session's storage.
///
/// A session reads as the agent would see it after opening: a migration, a repaired last
/// line or the fresh header of an empty file happen in memory only, and
/// [`Session::load_report`] says which. Moving the leaf ([`Session::branch`],
/// [`Session::reset_leaf`]) is a change in memory, as in the agents.
///
/// ```
/// use session::model::typed::UserMessage;
/// use session::{Dialect, Env, Session, SessionManager};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let env = Env::memory();
/// let mut writer = SessionManager::open(Dialect::Pi, "/s/a.jsonl".as_ref(), env.clone())?;
/// writer.append_message(UserMessage::new("hi", 1.0))?;
/// writer.flush()?;
///
/// let session = Session::open(Dialect::Pi, "/s/a.jsonl".as_ref(), env)?;
/// assert_eq!(session.context()?.messages.len(), 1);
/// assert_eq!(session.session_id(), writer.session_id());
/// # Ok(())
/// # }
/// ```
///
/// Writing through a `Session` does not compile: it has no such method (E0599), and
/// it never lends the manager mutably.
///
/// ```compile_fail,E0599
/// use session::{Dialect, Env, Session, UserMessage};
///
/// let mut session = Session::open(Dialect::Pi, "/s/a.jsonl".as_ref(), Env::memory()).unwrap();
/// session.append_message(UserMessage::new("hi", 1.0));
/// ```
///
/// ```compile_fail,E0596
/// use session::{Dialect, Env, Session, UserMessage};
///
/// let session = Session::open(Dialect::Pi, "/s/a.jsonl".as_ref(), Env::memory()).unwrap();
/// session.as_manager().append_message(UserMessage::new("hi", 1.0));
/// ```
pub struct Session {
    /// A manager opened read-only: every write through it would be refused, and none is
    /// reachable from here.
    inner: SessionManager,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("dialect", &self.dialect())
            .field("id", &self.session_id())
            .field("file", &self.session_file())
            .field("entries", &self.tree().entries().len())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Opens the session file at `path` for reading only: nothing is ever written or
    /// created.
    ///
    /// # Errors
    ///
    /// [`SessionError::NotFound`] for a missing file; the storage's error when it cannot
    /// be read; a file that is not a session of `dialect` as the agent would refuse it.
    pub fn open(dialect: Dialect, path: &Path, env: Env) -> Result<Session> {
        SessionManager::open_inner(dialect, path, env, None).map(Session::from_read_only)
    }

    /// Wraps a manager opened read-only.
    pub(crate) fn from_read_only(inner: SessionManager) -> Session {
        debug_assert!(inner.is_read_only(), "a Session wraps a read-only manager");
        Session { inner }
    }

    /// Returns the session's manager for its reading methods (every method that takes
    /// `&self`), for code written against [`SessionManager`]; every write takes `&mut`,
    /// which a `Session` never gives.
    pub fn as_manager(&self) -> &SessionManager {
        &self.inner
    }

    /// Returns the dialect.
    pub fn dialect(&self) -> Dialect {
        self.inner.dialect()
    }

    /// Returns the header (omp: with the title slot folded in).
    pub fn header(&self) -> &Record {
        self.inner.header()
    }

    /// Returns the session id.
    pub fn session_id(&self) -> &str {
        self.inner.session_id()
    }

    /// Returns the session file (`None` for a session built in memory).
    pub fn session_file(&self) -> Option<&Path> {
        self.inner.session_file()
    }

    /// Returns the session's working directory.
    pub fn cwd(&self) -> &str {
        self.inner.cwd()
    }

    /// Returns the session name: pi's latest `session_info`, omp's title.
    pub fn session_name(&self) -> Option<String> {
        self.inner.session_name()
    }

    /// Returns the entry tree (index, leaf, labels).
    pub fn tree(&self) -> &SessionTree {
        self.inner.tree()
    }

    /// Returns the environment the session was opened on.
    pub fn env(&self) -> &Env {
        self.inner.env()
    }

    /// Returns what the parser reported while loading the file.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        self.inner.diagnostics()
    }

    /// Returns what opening the file would have written (as the agent opens it).
    pub fn load_report(&self) -> &LoadReport {
        self.inner.load_report()
    }

    /// Returns the model context at the leaf, typed.
    ///
    /// # Errors
    ///
    /// A text left in the file that could not be read back.
    pub fn context(&self) -> Result<Context> {
        self.inner.context()
    }

    /// Returns the model context at `leaf`, typed (an unknown id falls back to the last
    /// entry, [`Leaf::Null`] gives the empty context, as the references do).
    ///
    /// # Errors
    ///
    /// A text left in the file that could not be read back.
    pub fn context_at(&self, leaf: Leaf<'_>) -> Result<Context> {
        self.inner.context_at(leaf)
    }

    /// Returns the model context at `leaf` as the reference's JSON text, byte for byte
    /// (see [`SessionManager::context_json`]).
    ///
    /// # Errors
    ///
    /// A text left in the file that could not be read back.
    pub fn context_json(&self, leaf: Leaf<'_>, transcript: bool) -> Result<String> {
        self.inner.context_json(leaf, transcript)
    }

    /// Moves the leaf to the entry `id` in memory (the agents' `branch`), so that
    /// [`Session::context`] reads there.
    ///
    /// # Errors
    ///
    /// [`SessionError::EntryNotFound`]: no entry has that id (the leaf stays).
    pub fn branch(&mut self, id: &str) -> Result<()> {
        self.inner.branch(id)
    }

    /// Moves the leaf before the first entry in memory (the agents' `resetLeaf`).
    pub fn reset_leaf(&mut self) {
        self.inner.reset_leaf();
    }

    /// Returns the error of a text read from the file for an accessor that cannot
    /// return one, and clears it (see [`SessionManager::check_reads`]).
    ///
    /// # Errors
    ///
    /// That error.
    pub fn check_reads(&self) -> Result<()> {
        self.inner.check_reads()
    }

    /// Returns how many texts of records left in the file were read from it since the
    /// session was opened.
    pub fn texts_read(&self) -> u64 {
        self.inner.texts_read()
    }

    /// Reads into memory the texts of `records` that are still in the session's file,
    /// so that reading them afterwards cannot fail.
    ///
    /// # Errors
    ///
    /// A failed read of the file.
    pub fn load_texts<'a>(&self, records: impl IntoIterator<Item = &'a Record>) -> Result<()> {
        self.inner.load_texts(records)
    }
}
