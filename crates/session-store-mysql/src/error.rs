//! The typed causes inside this crate's [`StoreError`]s, and how MySQL's and MariaDB's
//! errors map onto [`std::io::ErrorKind`]s.

use std::io;

use session_store::StoreError;
use session_store::keyed::{At, BackendError};

/// The longest key accepted, in characters: omp's `path VARCHAR(512)` primary key.
pub const MAX_KEY_CHARS: usize = 512;

/// Why a MySQL storage operation failed: the cause inside a [`StoreError::Io`], the
/// shared [`BackendError`] over the `mysql` crate's error.
///
/// [`MysqlError::kind`] gives the [`io::ErrorKind`] of each case: `FileTooLarge` for a row
/// or statement past the server's limits, `InvalidData` for content the column cannot
/// hold, `InvalidInput` for a bad key, `ReadOnlyFilesystem` for a write refused by a
/// read-only storage; for the server's own errors `StorageFull` for a full table or disk,
/// `ResourceBusy` for a lock wait timeout or deadlock, `ConnectionRefused` when no
/// connection could be made, `ConnectionAborted` for a lost one, `Other` otherwise.
/// Reach it with [`MysqlError::find`].
pub type MysqlError = BackendError<mysql::Error>;

/// The limit a [`MysqlError::TooLarge`] names.
pub(crate) const LIMIT: &str = "max_allowed_packet, per statement";

/// The server's (or the driver's) error as the cause of this crate's [`StoreError`]s,
/// with its kind.
pub(crate) fn server(e: mysql::Error) -> MysqlError {
    MysqlError::Server { kind: db_kind(&e), source: e }
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
    move |e| at.wrap(server(e))
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
