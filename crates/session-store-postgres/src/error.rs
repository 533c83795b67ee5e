//! The typed causes inside this crate's [`StoreError`]s, and how database errors map onto
//! [`std::io::ErrorKind`]s.

use std::io;

use session_store::StoreError;
use session_store::keyed::{self, At, Cause};

/// The largest content one row holds, in bytes: PostgreSQL's limit for one `text` value
/// (1 GiB minus one byte; the server may run out of memory before).
pub const MAX_CONTENT_BYTES: u64 = (1 << 30) - 1;

/// The longest key accepted, in bytes (the limit of every key-prefix backend).
pub use session_store::keyed::MAX_KEY_BYTES;

/// Why a PostgreSQL storage operation failed: the cause inside a [`StoreError::Io`].
///
/// [`StoreError::Io`] carries it as the source of its [`io::Error`], whose
/// [`io::ErrorKind`] tells the broad case apart (see [`ServerError::kind`]); reach it with
/// [`ServerError::find`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The row would grow past [`MAX_CONTENT_BYTES`] (or the server refused a value as too
    /// large); nothing was written.
    #[error("content of {size} bytes exceeds PostgreSQL's limit of {limit} bytes per session row")]
    TooLarge {
        /// The size the row would have had (or the size of the refused value).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The content is not valid UTF-8 or holds a NUL byte, which a `text` column refuses;
    /// nothing was written.
    #[error("content is not storable as PostgreSQL text: {reason}")]
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
    /// The storage was opened read-only ([`PostgresOptions::read_only`]), so it refuses
    /// every write; nothing was written.
    ///
    /// [`PostgresOptions::read_only`]: crate::PostgresOptions::read_only
    #[error(
        "the table {table} was opened read-only, for a command that only reads or a dry run; \
         nothing was written (a writing command opens it for writing, and creates it when missing)"
    )]
    ReadOnly {
        /// The table (for the native layout, the metadata table).
        table: String,
    },
    /// The database refused the statement or the connection failed.
    #[error("database error: {}", detail(.0))]
    Database(postgres::Error),
}

impl From<postgres::Error> for ServerError {
    fn from(e: postgres::Error) -> ServerError {
        ServerError::Database(e)
    }
}

impl ServerError {
    /// Returns the [`io::ErrorKind`] a [`StoreError::Io`] reports for this cause:
    /// `FileTooLarge` for a full row, `InvalidData` for content text cannot hold,
    /// `InvalidInput` for a bad key, `ReadOnlyFilesystem` for a write refused by a read-only
    /// storage, `StorageFull` for a full disk, `OutOfMemory` when the
    /// server ran out of memory, `ConnectionAborted` for a lost connection, `Other` otherwise.
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            ServerError::TooLarge { .. } => io::ErrorKind::FileTooLarge,
            ServerError::InvalidContent { .. } => io::ErrorKind::InvalidData,
            ServerError::BadPath { .. } => io::ErrorKind::InvalidInput,
            ServerError::ReadOnly { .. } => io::ErrorKind::ReadOnlyFilesystem,
            ServerError::Database(e) => db_kind(e),
        }
    }

    /// Returns the cause inside `err`, when `err` came from this crate.
    pub fn find(err: &StoreError) -> Option<&ServerError> {
        keyed::find(err)
    }
}

impl Cause for ServerError {
    fn bad_path(reason: String) -> ServerError {
        ServerError::BadPath { reason }
    }

    fn kind(&self) -> io::ErrorKind {
        ServerError::kind(self)
    }
}

/// The server's own message when there is one (`postgres::Error` alone says "db error").
fn detail(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => format!("{} (SQLSTATE {})", d.message(), d.code().code()),
        None => e.to_string(),
    }
}

fn db_kind(e: &postgres::Error) -> io::ErrorKind {
    if e.is_closed() {
        return io::ErrorKind::ConnectionAborted;
    }
    let Some(db) = e.as_db_error() else {
        // Not the server's answer: either no connection could be made, or the one in use
        // broke (`postgres::Error` tells them apart only in its message).
        if e.to_string().starts_with("error connecting") {
            return io::ErrorKind::ConnectionRefused;
        }
        return io::ErrorKind::ConnectionAborted;
    };
    let code = db.code().code();
    match code {
        // program_limit_exceeded, or a value past palloc's 1 GB limit.
        "54000" => io::ErrorKind::FileTooLarge,
        "XX000" if db.message().contains("invalid memory alloc request size") => io::ErrorKind::FileTooLarge,
        "53100" => io::ErrorKind::StorageFull,
        "53200" => io::ErrorKind::OutOfMemory,
        // admin_shutdown, crash_shutdown, cannot_connect_now (57P01..57P03)
        c if c.starts_with("57P") => io::ErrorKind::ConnectionAborted,
        c if c.starts_with("08") => io::ErrorKind::ConnectionAborted,
        // character_not_in_repertoire, untranslatable_character: bytes text cannot hold
        "22021" | "22P05" => io::ErrorKind::InvalidData,
        _ => io::ErrorKind::Other,
    }
}

/// Wraps a database error as the [`StoreError`] of the call at `at`.
pub(crate) fn db(at: At<'_>) -> impl FnOnce(postgres::Error) -> StoreError + '_ {
    move |e| {
        if db_kind(&e) == io::ErrorKind::ConnectionAborted {
            crate::pool::note_broken();
        }
        at.wrap(ServerError::Database(e))
    }
}

/// Why [`PostgresStorage::connect`](crate::PostgresStorage::connect) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The table name is not an identifier omp accepts.
    #[error("table name {0:?} must match [A-Za-z_][A-Za-z0-9_]{{0,62}}")]
    BadTableName(String),
    /// The connection string could not be parsed.
    #[error("bad PostgreSQL connection string; pass `host=... dbname=...` or `postgres://user@host/db`")]
    BadConfig(#[source] postgres::Error),
    /// The server could not be reached or refused the login.
    #[error("cannot connect to PostgreSQL")]
    Connect(#[source] postgres::Error),
    /// Creating or checking the table failed.
    #[error("cannot create or check the session table {table}")]
    Schema {
        /// The table.
        table: String,
        /// The database's error.
        #[source]
        source: postgres::Error,
    },
}
