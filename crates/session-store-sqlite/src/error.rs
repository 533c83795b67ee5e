//! The typed causes inside this crate's [`StoreError`]s, and how SQLite's errors map onto
//! [`std::io::ErrorKind`]s.

use std::io;
use std::path::PathBuf;

use session_store::StoreError;
use session_store::keyed::{self, At, Cause};

/// The largest content one row holds, in bytes: SQLite's default `SQLITE_MAX_LENGTH`
/// (1,000,000,000 bytes), which the bundled library keeps.
pub const MAX_CONTENT_BYTES: u64 = 1_000_000_000;

/// The longest key accepted, in bytes (the limit of every key-prefix backend).
pub use session_store::keyed::MAX_KEY_BYTES;

/// Why a SQLite storage operation failed: the cause inside a [`StoreError::Io`].
///
/// [`StoreError::Io`] carries it as the source of its [`io::Error`], whose
/// [`io::ErrorKind`] tells the broad case apart (see [`SqliteError::kind`]); reach it with
/// [`SqliteError::find`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqliteError {
    /// The row would grow past [`MAX_CONTENT_BYTES`]; nothing was written.
    #[error("content of {size} bytes exceeds SQLite's limit of {limit} bytes per session row")]
    TooLarge {
        /// The size the row would have had.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The content is not valid UTF-8 or holds a NUL byte, which omp's `TEXT` column (and
    /// SQLite's text functions) cannot hold; nothing was written.
    #[error("content is not storable as SQLite text: {reason}")]
    InvalidContent {
        /// What is wrong with it.
        reason: String,
    },
    /// The path cannot be a key: not UTF-8, a NUL byte, a `..` component or too long.
    #[error("path cannot be a key: {reason}")]
    BadPath {
        /// What is wrong with it.
        reason: String,
    },
    /// The storage was opened read-only ([`TableOptions::read_only`]), so it refuses
    /// every write; nothing was written.
    ///
    /// [`TableOptions::read_only`]: session_store::keyed::TableOptions::read_only
    #[error(
        "the table {table} was opened read-only, for a command that only reads or a dry run; \
         nothing was written (a writing command opens it for writing, and creates it when missing)"
    )]
    ReadOnly {
        /// The table.
        table: String,
    },
    /// SQLite refused the statement.
    #[error("database error")]
    Database(#[from] rusqlite::Error),
}

impl SqliteError {
    /// Returns the [`io::ErrorKind`] a [`StoreError::Io`] reports for this cause:
    /// `FileTooLarge` for a full row, `InvalidData` for content text cannot hold,
    /// `InvalidInput` for a bad key, `StorageFull` for a full disk or database,
    /// `ResourceBusy` when another connection held the database past the busy timeout,
    /// `ReadOnlyFilesystem` for a write refused by a storage (or a database) opened
    /// read-only, `Other` otherwise.
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            SqliteError::TooLarge { .. } => io::ErrorKind::FileTooLarge,
            SqliteError::InvalidContent { .. } => io::ErrorKind::InvalidData,
            SqliteError::BadPath { .. } => io::ErrorKind::InvalidInput,
            SqliteError::ReadOnly { .. } => io::ErrorKind::ReadOnlyFilesystem,
            SqliteError::Database(e) => db_kind(e),
        }
    }

    /// Returns the cause inside `err`, when `err` came from this crate.
    pub fn find(err: &StoreError) -> Option<&SqliteError> {
        keyed::find(err)
    }
}

impl Cause for SqliteError {
    fn bad_path(reason: String) -> SqliteError {
        SqliteError::BadPath { reason }
    }

    fn kind(&self) -> io::ErrorKind {
        SqliteError::kind(self)
    }
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
    move |e| at.wrap(SqliteError::Database(e))
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
