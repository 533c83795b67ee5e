//! The one error type of the storage layer and the operation names it reports.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The storage operation that failed; part of every IO error so a message says what was attempted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// Creating a directory and its parents.
    EnsureDir,
    /// Checking whether a path exists.
    Exists,
    /// Reading a file's metadata.
    Stat,
    /// Listing a directory.
    List,
    /// Reading a file.
    Read,
    /// Replacing a file in place (truncate and write).
    Write,
    /// Creating a file that must not exist yet.
    WriteNew,
    /// Writing the temporary file of an atomic replace.
    WriteTemp,
    /// Flushing a file's data to stable storage.
    SyncData,
    /// Flushing a directory entry to stable storage.
    SyncDir,
    /// Renaming a file.
    Rename,
    /// Appending to a file.
    Append,
    /// Cutting a file back to a length.
    Truncate,
    /// Opening a file.
    Open,
    /// Removing a file.
    Unlink,
    /// Removing a directory tree.
    RemoveDir,
    /// Taking or releasing a session lock.
    Lock,
    /// Creating a hard link.
    Link,
    /// Copying a file.
    Copy,
    /// Writing over the start of a file in place.
    Overwrite,
}

impl Op {
    /// Returns the verb phrase used in messages (`"rename"`, `"append to"`).
    pub fn verb(self) -> &'static str {
        match self {
            Op::EnsureDir => "create directory",
            Op::Exists => "check existence of",
            Op::Stat => "stat",
            Op::List => "list",
            Op::Read => "read",
            Op::Write => "write",
            Op::WriteNew => "create",
            Op::WriteTemp => "write temporary file for",
            Op::SyncData => "sync",
            Op::SyncDir => "sync directory of",
            Op::Rename => "rename",
            Op::Append => "append to",
            Op::Truncate => "truncate",
            Op::Open => "open",
            Op::Unlink => "delete",
            Op::RemoveDir => "remove directory",
            Op::Lock => "lock",
            Op::Link => "link",
            Op::Copy => "copy",
            Op::Overwrite => "overwrite the start of",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.verb())
    }
}

/// Everything that can go wrong in the storage layer.
///
/// Cheap to clone (IO errors are shared), so an append writer can latch its first error and
/// return it from every later call.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// An operating-system IO error.
    #[error("cannot {op} {}", path.display())]
    Io {
        /// What was attempted.
        op: Op,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: Arc<io::Error>,
    },
    /// An exclusive create found the file already present.
    #[error("file already exists: {}; choose another name or open the existing session", path.display())]
    AlreadyExists {
        /// The existing file.
        path: PathBuf,
    },
    /// The file does not exist.
    #[error("file not found: {}", path.display())]
    NotFound {
        /// The missing file.
        path: PathBuf,
    },
    /// A size-checked replace found a different file than the caller last saw (equal
    /// sizes: the same size, but another file or another write; see
    /// [`crate::ExpectedSize::Unchanged`]).
    #[error(
        "session file changed before rewrite: {} ({}); reload the session before writing",
        path.display(),
        conflict_text(*expected, *found)
    )]
    Conflict {
        /// The file that changed.
        path: PathBuf,
        /// The size the caller expected (`None`: the file should not exist).
        expected: Option<u64>,
        /// The size found (`None`: the file is missing).
        found: Option<u64>,
    },
    /// Another writer holds the session's lock.
    #[error("session file is locked by another writer: {}; close the other session or try again", path.display())]
    Locked {
        /// The session file whose lock is held.
        path: PathBuf,
    },
    /// A path without a file name (such as `/` or `..`) was given where a file is needed.
    #[error("not a file path: {}; pass the path of a file", path.display())]
    NotAFile {
        /// The offending path.
        path: PathBuf,
    },
    /// The writer was already closed.
    #[error("append writer for {} is closed; open a new writer", path.display())]
    Closed {
        /// The writer's file.
        path: PathBuf,
    },
    /// A write failed and cutting the file back to its previous size failed too, so the file may
    /// end in a torn line (readers skip it).
    #[error("a write to {} failed and removing its partial write also failed: {}; the next load skips the torn line", path.display(), io_detail(rollback))]
    RollbackFailed {
        /// The file that may end in a torn line.
        path: PathBuf,
        /// The write error.
        #[source]
        error: Box<StoreError>,
        /// Why the file could not be cut back.
        rollback: Arc<io::Error>,
    },
    /// The path names something other than a regular file (a FIFO, a device, a directory, a
    /// symbolic link where none may be): session files and their locks must be regular files.
    #[error("not a regular file: {} is a {kind}; session files must be regular files", path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is instead (see [`NotRegularFile::kind`](crate::open::NotRegularFile::kind)).
        kind: &'static str,
    },
    /// A folder or file that must be private to this user (a cache folder, a derived
    /// file in it, the lock gates' folder) is not: see [`crate::private`]. Whoever
    /// wanted it goes on without it.
    #[error(
        "{} is not private to this user: {why}; remove it, or make it a folder of yours that nobody else may use (chmod 700)",
        path.display()
    )]
    NotPrivate {
        /// The folder or file.
        path: PathBuf,
        /// Why it was refused.
        why: crate::private::Exposure,
    },
    /// A replace or a rename landed (readers see the complete new file at `path`) but the
    /// directory could not be synced, so after a power loss the old file (or the old name)
    /// may come back. The write or rename must not be repeated as if it had failed.
    #[error("{} was written ({written} bytes) but not made durable; the new content is in place, do not write it again", path.display())]
    NotDurable {
        /// The replaced file, or the new name of a renamed one.
        path: PathBuf,
        /// How many bytes the new file holds (0 for a renamed directory).
        written: u64,
        /// Why the directory sync failed.
        source: Box<StoreError>,
    },
    /// A replace landed (readers see the complete new file at `path`), but lines another
    /// writer appended to the replaced file after the size check, which a replace carries
    /// over to the new file, could not be: they are in the old file only, which is no
    /// longer reachable by its name. The write must not be repeated as if it had failed.
    #[error(
        "{} was written ({written} bytes), but {late} byte(s) another writer appended to the old file meanwhile could not be carried over to it",
        path.display()
    )]
    LateAppendsLost {
        /// The replaced file.
        path: PathBuf,
        /// How many bytes the new file holds.
        written: u64,
        /// How many bytes were appended to the old file after the check.
        late: u64,
        /// Why they could not be carried over.
        source: Box<StoreError>,
    },
    /// A fault injected by a test (see `Faults`; only with the `testing` feature).
    #[cfg(feature = "testing")]
    #[error("injected fault: cannot {op} {}", path.display())]
    Injected {
        /// The operation that was made to fail.
        op: Op,
        /// The path it was applied to.
        path: PathBuf,
    },
}

impl StoreError {
    /// Returns whether this is the operating system's refusal to rename across file
    /// systems (`EXDEV`): the move has to copy instead.
    pub fn crosses_devices(&self) -> bool {
        matches!(self, StoreError::Io { source, .. } if source.kind() == io::ErrorKind::CrossesDevices)
    }

    /// The error reported when a write stores fewer bytes than asked.
    pub(crate) fn short_write(op: Op, path: &Path) -> StoreError {
        StoreError::io_raw(op, path, io::Error::new(io::ErrorKind::WriteZero, "short write"))
    }

    /// Wraps an IO error, turning `NotFound`, `AlreadyExists` and a refused non-regular file
    /// into their own variants.
    pub fn io(op: Op, path: &Path, err: io::Error) -> StoreError {
        if let Some(found) = crate::open::NotRegularFile::find(&err) {
            return StoreError::NotRegular { path: found.path.clone(), kind: found.kind };
        }
        match err.kind() {
            io::ErrorKind::NotFound => StoreError::NotFound { path: path.to_path_buf() },
            io::ErrorKind::AlreadyExists => StoreError::AlreadyExists { path: path.to_path_buf() },
            _ => StoreError::Io { op, path: path.to_path_buf(), source: Arc::new(err) },
        }
    }

    /// Wraps an IO error as [`StoreError::Io`] whatever its kind (only a refused non-regular file
    /// still becomes [`StoreError::NotRegular`]).
    pub fn io_raw(op: Op, path: &Path, err: io::Error) -> StoreError {
        if let Some(found) = crate::open::NotRegularFile::find(&err) {
            return StoreError::NotRegular { path: found.path.clone(), kind: found.kind };
        }
        StoreError::Io { op, path: path.to_path_buf(), source: Arc::new(err) }
    }

    /// Returns the size of the new file when this error says a replace landed anyway
    /// ([`StoreError::NotDurable`], [`StoreError::LateAppendsLost`]).
    pub fn landed(&self) -> Option<u64> {
        match self {
            StoreError::NotDurable { written, .. } | StoreError::LateAppendsLost { written, .. } => Some(*written),
            _ => None,
        }
    }

    /// Returns true for [`StoreError::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, StoreError::NotFound { .. })
    }

    /// Returns the IO error kind when this wraps an IO error.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            StoreError::Io { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
}

fn conflict_text(expected: Option<u64>, found: Option<u64>) -> String {
    if expected.is_some() && expected == found {
        return format!("{}, but written since it was read", size_text(found));
    }
    format!("expected {}, found {}", size_text(expected), size_text(found))
}

fn size_text(size: Option<u64>) -> String {
    match size {
        Some(n) => format!("{n} bytes"),
        None => "missing".to_owned(),
    }
}

/// `fs_err` already names the path in its message; show only the innermost cause so the path
/// appears once.
fn io_detail(err: &io::Error) -> String {
    let inner = err.get_ref().and_then(|e| e.source());
    match inner {
        Some(cause) => cause.to_string(),
        None => err.to_string(),
    }
}
