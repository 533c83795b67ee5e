//! The typed causes inside this crate's [`StoreError`]s, and how SQLite's errors map onto
//! [`std::io::ErrorKind`]s.

use std::io;
use std::path::PathBuf;

use session_store::StoreError;
use session_store::keyed::{At, BackendError};

/// The largest content one row holds, in bytes: SQLite's default `SQLITE_MAX_LENGTH`
/// (1,000,000,000 bytes), which the bundled library keeps.
pub const MAX_CONTENT_BYTES: u64 = 1_000_000_000;

/// The longest key accepted, in bytes (the limit of every key-prefix backend).
pub use session_store::keyed::MAX_KEY_BYTES;

/// Why a SQLite storage operation failed: the cause inside a [`StoreError::Io`], the
/// shared [`BackendError`] over `rusqlite`'s error.
///
/// [`SqliteError::kind`] gives the [`io::ErrorKind`] of each case: `FileTooLarge` for a
/// full row, `InvalidData` for content text cannot hold, `InvalidInput` for a bad key,
/// `ReadOnlyFilesystem` for a write refused by a storage (or a database) opened read-only;
/// for SQLite's own errors `StorageFull` for a full disk or database, `ResourceBusy` when
/// another connection held the database past the busy timeout, `Other` otherwise. Reach
/// it with [`SqliteError::find`].
pub type SqliteError = BackendError<rusqlite::Error>;

/// The limit a [`SqliteError::TooLarge`] names.
pub(crate) const LIMIT: &str = "SQLite's SQLITE_MAX_LENGTH per session row";

/// SQLite's error as the cause of this crate's [`StoreError`]s, with its kind.
pub(crate) fn server(e: rusqlite::Error) -> SqliteError {
    SqliteError::Server { kind: db_kind(&e), source: e }
}

fn db_kind(e: &rusqlite::Error) -> io::ErrorKind {
    use rusqlite::ffi::ErrorCode;
    match e.sqlite_error_code() {
        Some(ErrorCode::DiskFull) => io::ErrorKind::StorageFull,
        Some(ErrorCode::TooBig) => io::ErrorKind::FileTooLarge,
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => io::ErrorKind::ResourceBusy,
        Some(ErrorCode::ReadOnly) => io::ErrorKind::ReadOnlyFilesystem,
        Some(ErrorCode::OutOfMemory) => io::ErrorKind::OutOfMemory,
        Some(ErrorCode::CannotOpen) => io::ErrorKind::NotFound,
        _ => io::ErrorKind::Other,
    }
}

/// Wraps a database error as the [`StoreError`] of the call at `at`.
pub(crate) fn db(at: At<'_>) -> impl FnOnce(rusqlite::Error) -> StoreError + '_ {
    move |e| at.wrap(server(e))
}

/// Why [`SqliteStorage::open`](crate::SqliteStorage::open) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The table name is not `[A-Za-z_][A-Za-z0-9_]{0,62}`.
    #[error("invalid table name {0:?}: use letters, digits and underscores, not starting with a digit")]
    BadTableName(String),
    /// The database file could not be opened or created.
    #[error("cannot open the SQLite database {}", path.display())]
    Open {
        /// The database file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rusqlite::Error,
    },
    /// The table could not be created or brought to omp's columns (or, read-only, looked
    /// up in the catalog).
    #[error("cannot prepare the table {table}")]
    Schema {
        /// The table.
        table: String,
        /// Why.
        #[source]
        source: rusqlite::Error,
    },
    /// The directory beside the database that holds the session locks could not be made.
    #[error("cannot create the lock directory {}", path.display())]
    LockDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}
