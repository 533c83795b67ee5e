//! The typed causes inside this crate's [`StoreError`]s, and how MySQL's and MariaDB's
//! errors map onto [`std::io::ErrorKind`]s.

use std::io;

use session_store::StoreError;
use session_store::keyed::{self, At, Cause};

/// The longest key accepted, in characters: omp's `path VARCHAR(512)` primary key.
pub const MAX_KEY_CHARS: usize = 512;

/// Why a MySQL storage operation failed: the cause inside a [`StoreError::Io`].
///
/// [`StoreError::Io`] carries it as the source of its [`io::Error`], whose
/// [`io::ErrorKind`] tells the broad case apart (see [`MysqlError::kind`]); reach it with
/// [`MysqlError::find`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MysqlError {
    /// The row, or the statement that writes it, would pass the server's
    /// `max_allowed_packet` (or `LONGTEXT`'s 4 GiB); nothing was written.
    #[error("content of {size} bytes exceeds the server's limit of {limit} bytes (max_allowed_packet) per statement")]
    TooLarge {
        /// The size the row (or statement) would have had.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The content is not valid UTF-8 or holds a NUL byte, which omp's `utf8mb4` column
    /// is not given here; nothing was written.
    #[error("content is not storable as MySQL utf8mb4 text: {reason}")]
    InvalidContent {
        /// What is wrong with it.
        reason: String,
    },
    /// The path cannot be a key: not UTF-8, a NUL byte, a `..` component or longer than
    /// omp's `VARCHAR(512)`.
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
    /// The server refused the statement or the connection failed.
    #[error("database error")]
    Database(#[from] mysql::Error),
}

impl MysqlError {
    /// Returns the [`io::ErrorKind`] a [`StoreError::Io`] reports for this cause:
    /// `FileTooLarge` for a row or statement past the server's limits, `InvalidData` for
    /// content the column cannot hold, `InvalidInput` for a bad key, `ReadOnlyFilesystem`
    /// for a write refused by a read-only storage, `StorageFull` for a
    /// full table or disk, `ResourceBusy` for a lock wait timeout or deadlock,
    /// `ConnectionRefused` when no connection could be made, `ConnectionAborted` for a
    /// lost one, `Other` otherwise.
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            MysqlError::TooLarge { .. } => io::ErrorKind::FileTooLarge,
            MysqlError::InvalidContent { .. } => io::ErrorKind::InvalidData,
            MysqlError::BadPath { .. } => io::ErrorKind::InvalidInput,
            MysqlError::ReadOnly { .. } => io::ErrorKind::ReadOnlyFilesystem,
            MysqlError::Database(e) => db_kind(e),
        }
    }

    /// Returns the cause inside `err`, when `err` came from this crate.
    pub fn find(err: &StoreError) -> Option<&MysqlError> {
        keyed::find(err)
    }
}

impl Cause for MysqlError {
    fn bad_path(reason: String) -> MysqlError {
        MysqlError::BadPath { reason }
    }

    fn kind(&self) -> io::ErrorKind {
        MysqlError::kind(self)
    }
}

fn db_kind(e: &mysql::Error) -> io::ErrorKind {
    match e {
        mysql::Error::MySqlError(s) => match s.code {
            // ER_NET_PACKET_TOO_LARGE, ER_TOO_BIG_ROWSIZE, ER_WARN_ALLOWED_PACKET_OVERFLOWED
            1153 | 1118 | 1301 => io::ErrorKind::FileTooLarge,
            // ER_RECORD_FILE_FULL, ER_DISK_FULL
            1114 | 1021 => io::ErrorKind::StorageFull,
            // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD (incorrect string value)
            1366 => io::ErrorKind::InvalidData,
            // ER_DATA_TOO_LONG: a value longer than its column (a title source past
            // omp's VARCHAR(16); paths are checked before)
            1406 => io::ErrorKind::InvalidData,
            // ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK
            1205 | 1213 => io::ErrorKind::ResourceBusy,
            // ER_CON_COUNT_ERROR, ER_SERVER_SHUTDOWN, ER_CONNECTION_KILLED
            1040 | 1053 | 1927 => io::ErrorKind::ConnectionAborted,
            _ => io::ErrorKind::Other,
        },
        mysql::Error::IoError(io) => match io.kind() {
            io::ErrorKind::ConnectionRefused => io::ErrorKind::ConnectionRefused,
            _ => io::ErrorKind::ConnectionAborted,
        },
        mysql::Error::DriverError(_) => io::ErrorKind::ConnectionAborted,
        _ => io::ErrorKind::Other,
    }
}

/// Wraps a database error as the [`StoreError`] of the call at `at`.
pub(crate) fn db(at: At<'_>) -> impl FnOnce(mysql::Error) -> StoreError + '_ {
    move |e| at.wrap(MysqlError::Database(e))
}

/// Why [`MysqlStorage::connect`](crate::MysqlStorage::connect) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The table name is not `[A-Za-z_][A-Za-z0-9_]{0,62}`.
    #[error("invalid table name {0:?}: use letters, digits and underscores, not starting with a digit")]
    BadTableName(String),
    /// The URL could not be parsed.
    #[error("invalid MySQL URL")]
    BadUrl(#[source] mysql::UrlError),
    /// No connection could be made.
    #[error("cannot connect to MySQL")]
    Connect(#[source] mysql::Error),
    /// The table could not be created or brought to omp's columns (or, read-only, looked
    /// up in the catalog).
    #[error("cannot prepare the table {table}")]
    Schema {
        /// The table.
        table: String,
        /// Why.
        #[source]
        source: mysql::Error,
    },
}
