//! The one error type of the jobs.

use std::path::PathBuf;

use session_model::Dialect;
use session_store::StoreError;

use crate::SessionError;

/// Why a job refused or failed. Every refusal comes before anything is changed; an
/// error after a change says what landed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// The path does not hold a session of the dialect: no valid header.
    #[error("{}: not a {} session ({reason}); nothing was changed", path.display(), dialect.name())]
    NotASession {
        /// The path.
        path: PathBuf,
        /// Whose session it was expected to be.
        dialect: Dialect,
        /// What is wrong with it.
        reason: String,
    },
    /// The path is a symbolic link: the job acts on the session it names only when told
    /// that path.
    #[error("{} is a symbolic link to {}; {hint}", path.display(), target.display())]
    Link {
        /// The link.
        path: PathBuf,
        /// What it points to.
        target: PathBuf,
        /// What to do instead.
        hint: &'static str,
    },
    /// The path is outside every folder where the agents keep sessions.
    #[error(
        "{} is outside the agents' session folders ({}); pass --force to act on it anyway",
        path.display(),
        list(roots)
    )]
    OutsideHomes {
        /// The path.
        path: PathBuf,
        /// The folders looked at.
        roots: Vec<PathBuf>,
    },
    /// A folder or file that may hold sessions could not be read: a job that must see
    /// every session (gc) does nothing.
    #[error("cannot read {}; gc deletes nothing while it cannot see every session", path.display())]
    Unreadable {
        /// What could not be read.
        path: PathBuf,
        /// Why.
        #[source]
        source: StoreError,
    },
    /// A compressed session archive (`*.jsonl.gz`, which omp's gc reads) cannot be read
    /// here, so the blobs it refers to are unknown.
    #[error(
        "{} is a compressed session archive, which gc cannot read; gc deletes nothing while it cannot see every session (decompress it, or move it out of the agent's folders)",
        path.display()
    )]
    CompressedArchive {
        /// The archive.
        path: PathBuf,
    },
    /// No session was found while blobs exist: gc does nothing rather than delete every
    /// blob of sessions it failed to find.
    #[error(
        "no session found in {} while the blob store holds {blobs} blob(s); gc deletes nothing (are the sessions elsewhere? pass their folder)",
        list(roots)
    )]
    NoSessions {
        /// The folders looked at.
        roots: Vec<PathBuf>,
        /// How many blobs there are.
        blobs: usize,
    },
    /// The session changed every time it was read for a rewrite: nothing was written.
    #[error(
        "{}: the session kept changing while it was being rewritten ({tries} tries); nothing was written, try again when no agent is writing it",
        path.display()
    )]
    KeptChanging {
        /// The session.
        path: PathBuf,
        /// How many times it was read.
        tries: usize,
    },
    /// A path that names more than a plain file path: `.` or `..` segments, or not
    /// absolute where a storage key is needed.
    #[error("{}: not a plain session path (absolute, without `.` or `..` segments)", path.display())]
    BadPath {
        /// The path.
        path: PathBuf,
    },
    /// A symbolic link where a copy would write: nothing is written through it.
    #[error("{}: a symbolic link is in the way; nothing is written through links", path.display())]
    LinkInTheWay {
        /// The link.
        path: PathBuf,
    },
    /// A directory where a copy would write a file.
    #[error("{}: a directory is in the way", path.display())]
    DirectoryInTheWay {
        /// The directory.
        path: PathBuf,
    },
    /// A different file where a copy would write, and replacing was not asked for.
    #[error(
        "{}: a different file is already there ({found} bytes, copying {size}); pass --force to replace it",
        path.display()
    )]
    TargetDiffers {
        /// The file.
        path: PathBuf,
        /// Its size.
        found: u64,
        /// The size of what would replace it.
        size: u64,
    },
    /// A copy read back differently from what was written.
    #[error(
        "{}: the copy reads back as {read} bytes that differ from the {written} written; the target changed them",
        path.display()
    )]
    ReadBackDiffers {
        /// The copy.
        path: PathBuf,
        /// Bytes written.
        written: u64,
        /// Bytes read back.
        read: u64,
    },
    /// A copy failed part-way: what is there and what to do.
    #[error("a copy failed part-way: {done}")]
    Partial {
        /// What was done before the failure, and how to finish.
        done: String,
        /// The failure.
        #[source]
        source: Box<JobError>,
    },
    /// A file or directory kind a job does not copy or move.
    #[error("{}: {what}", path.display())]
    Unsupported {
        /// The path.
        path: PathBuf,
        /// What is not supported.
        what: String,
    },
    /// Two files to merge are not copies of one session: their headers' ids differ.
    #[error(
        "{} ({ours_id}) and {} ({theirs_id}) are different sessions; only copies of one session (the same header id) merge",
        ours.display(),
        theirs.display()
    )]
    NotTheSameSession {
        /// The file merged into.
        ours: PathBuf,
        /// Its session id.
        ours_id: String,
        /// The file merged from.
        theirs: PathBuf,
        /// Its session id.
        theirs_id: String,
    },
    /// An entry the two copies of a session disagree on in a way no rule reconciles.
    #[error("entry {id} of {}: {reason}; nothing was changed", theirs.display())]
    MergeConflict {
        /// The file merged from.
        theirs: PathBuf,
        /// The entry.
        id: String,
        /// How the copies disagree.
        reason: String,
    },
    /// The leaf chosen for a merge cannot be the last line: it is missing, or an entry of
    /// the merged tree continues from it (the agents take the last line as the leaf).
    #[error("{id} cannot be the merged session's leaf: {reason}; nothing was changed")]
    BadLeaf {
        /// The entry asked for.
        id: String,
        /// Why.
        reason: String,
    },
    /// A file of marks (our `marks.json`, omp's `session-pins.json`) is not what it
    /// should be: nothing was written, and it is left as it is.
    #[error("{}: not a list of session marks ({why}); nothing was changed: fix or remove the file", path.display())]
    MarksDamaged {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// Another process kept a file of marks locked: nothing was changed.
    #[error("{} stayed locked by another process (omp, or another `session`); nothing was changed, try again", path.display())]
    MarksBusy {
        /// The file.
        path: PathBuf,
    },
    /// The engine's error.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The storage's error.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl JobError {
    /// Returns the storage's error inside this one, if it carries one.
    pub fn store(&self) -> Option<&StoreError> {
        match self {
            JobError::Store(e) | JobError::Unreadable { source: e, .. } => Some(e),
            JobError::Session(SessionError::Store(e)) => Some(e),
            JobError::Partial { source, .. } => source.store(),
            _ => None,
        }
    }
}

fn list(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "no folder".to_owned();
    }
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}
