//! The errors of [`crate::SessionManager`].

use std::path::PathBuf;

use session_store::StoreError;

/// `r` with a missing file ([`StoreError::NotFound`]) as `None`.
pub(crate) fn unless_missing<T>(r: Result<T, StoreError>) -> Result<Option<T>, StoreError> {
    match r {
        Err(StoreError::NotFound { .. }) => Ok(None),
        r => r.map(Some),
    }
}

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// pi refuses a non-empty file whose first record is not a valid header; the file
    /// is left untouched.
    #[error("Session file is not a valid pi session: {}", path.display())]
    InvalidPiSession {
        /// The file.
        path: PathBuf,
    },
    /// omp refuses a file whose header is missing or malformed; the file is left untouched.
    #[error(
        "Cannot resume session \"{}\": the session header is missing or malformed. The file was not modified.",
        path.display()
    )]
    CannotResume {
        /// The file.
        path: PathBuf,
    },
    /// An entry id that is not in the session.
    #[error("Entry {id} not found")]
    EntryNotFound {
        /// The id.
        id: String,
    },
    /// A context edit whose replacement is not `null` or `{content: string | array}`.
    #[error("Context edit replacement must be null or contain string/array content")]
    InvalidContextEdit,
    /// A context edit whose target is not on the active branch.
    #[error("Entry {id} is not on the active branch")]
    NotOnActiveBranch {
        /// The id.
        id: String,
    },
    /// A context edit whose target contributes no editable content.
    #[error("Entry {id} does not contribute editable model content")]
    NotEditable {
        /// The id.
        id: String,
    },
    /// A caller-chosen session id that breaks the id rule.
    #[error(transparent)]
    InvalidSessionId(#[from] session_model::ids::InvalidSessionId),
    /// pi's `fork_from` of a file that holds no valid session (omp forks it as an empty one).
    #[error("Cannot fork: source session file is empty or invalid: {}", path.display())]
    ForkSourceInvalid {
        /// The source file.
        path: PathBuf,
    },
    /// `fork_from` of a file that does not exist.
    #[error("Session \"{}\" not found.", path.display())]
    ForkSourceNotFound {
        /// The source file.
        path: PathBuf,
    },
    /// Finding a session (directories, listing) failed.
    #[error(transparent)]
    Discovery(#[from] session_discovery::DiscoveryError),
    /// A record the tree cannot hold (no string id, or a header).
    #[error(transparent)]
    Tree(#[from] session_tree::TreeError),
    /// The storage failed; the in-memory session was rolled back to before the call.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An earlier write failed (the first error, latched, when it was not a storage
    /// error): pi refuses further appends, omp retries with a full rewrite.
    #[error("an earlier write to {} failed ({message}); the next write retries it, or reopen the session", path.display())]
    DiskFailure {
        /// The session file.
        path: PathBuf,
        /// The first error.
        message: String,
    },
    /// The session file does not exist (an open that must not create it).
    #[error("session file not found: {}; check the path, or open it as the agent does to start a new session there", path.display())]
    NotFound {
        /// The missing file.
        path: PathBuf,
    },
    /// The session was opened read-only; nothing was written.
    #[error("session {} was opened read-only; open it for writing to change it", path.display())]
    ReadOnly {
        /// The session file.
        path: PathBuf,
    },
    /// The session was sealed ([`crate::SessionManager::seal`]): later appends and
    /// rewrites are refused; nothing was written.
    #[error("session {} is sealed: it takes no more writes; open it again to continue it", path.display())]
    Sealed {
        /// The session file (empty for a session in memory).
        path: PathBuf,
    },
    /// The title slot could not be written.
    #[error(transparent)]
    Slot(#[from] session_model::SlotTooLong),
    /// A record could not be read as the typed value asked for
    /// ([`crate::SessionManager::context`]).
    #[error(transparent)]
    Typed(#[from] session_model::typed::TypedError),
    /// A rename's `title_change` entry was appended and is in the file, but the title
    /// slot and header that listings read still hold the old title: the file kept
    /// changing under another writer. Do not rename again (that appends a second entry);
    /// reopen the session, whose next full rewrite carries the title.
    #[error(
        "the title change {entry_id} was appended to {} but its title slot was not updated; reopen the session instead of renaming again",
        path.display()
    )]
    TitleNotPersisted {
        /// The session file.
        path: PathBuf,
        /// The id of the `title_change` entry that landed.
        entry_id: String,
        /// Why the slot could not be written.
        source: Box<SessionError>,
    },
    /// An operation of one dialect asked of a session of the other (omp's
    /// `append_ttsr_injection` on a pi session, pi's `append_usage` on an omp one, ...):
    /// nothing was written.
    #[error("{operation} is not an operation of {} sessions", dialect.name())]
    WrongDialect {
        /// The operation.
        operation: &'static str,
        /// The session's dialect.
        dialect: session_model::Dialect,
    },
    /// An omp operation that needs the agent's directories (a default bucket) in an
    /// environment without them ([`crate::Env::dirs`]); pass a session directory.
    #[error("no agent directory to find the default session directory of {cwd} in; pass a session directory")]
    NoAgentDir {
        /// The working directory whose bucket was asked for.
        cwd: String,
    },
    /// The target of an omp move or fork already exists; nothing was written.
    #[error("{} already exists; choose another session directory", path.display())]
    TargetExists {
        /// The existing path.
        path: PathBuf,
    },
    /// An operation that writes the whole file (`flush_sync`, `rewrite_entries`, forks,
    /// moves, new sessions, another batch) inside an atomic batch; nothing was written.
    #[error("not allowed inside an atomic entry batch")]
    InBatch,
    /// An IO failure outside the storage (resolving the working directory).
    #[error("cannot resolve {}", path.display())]
    Path {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

impl SessionError {
    /// Returns whether the write this error reports landed anyway (the file was replaced
    /// but its directory could not be synced, [`StoreError::NotDurable`]): the session
    /// holds what it wrote, and repeating the call would write it twice.
    pub fn landed(&self) -> bool {
        self.landed_size().is_some()
    }

    /// Returns the size of the file a write published anyway when [`Self::landed`].
    pub fn landed_size(&self) -> Option<u64> {
        match self {
            SessionError::Store(e) => e.landed(),
            _ => None,
        }
    }
}
