//! The typed causes inside this crate's [`StoreError`]s, and how database errors map onto
//! [`std::io::ErrorKind`]s.

use std::io;

use session_store::StoreError;
use session_store::keyed::{At, BackendError};

/// The largest content one row holds, in bytes: PostgreSQL's limit for one `text` value
/// (1 GiB minus one byte; the server may run out of memory before).
pub const MAX_CONTENT_BYTES: u64 = (1 << 30) - 1;

/// The longest key accepted, in bytes (the limit of every key-prefix backend).
pub use session_store::keyed::MAX_KEY_BYTES;

/// Why a PostgreSQL storage operation failed: the cause inside a [`StoreError::Io`], the
/// shared [`BackendError`] over the `postgres` crate's error (whose SQLSTATE
/// `as_db_error` gives).
///
/// [`ServerError::kind`] gives the [`io::ErrorKind`] of each case: `FileTooLarge` for a
/// full row, `InvalidData` for content text cannot hold, `InvalidInput` for a bad key,
/// `ReadOnlyFilesystem` for a write refused by a read-only storage; for the server's own
/// errors `StorageFull` for a full disk, `OutOfMemory` when the server ran out of memory,
/// `ConnectionRefused` when no connection could be made, `ConnectionAborted` for a lost
/// one, `Other` otherwise. Reach it with [`ServerError::find`].
pub type ServerError = BackendError<postgres::Error>;

/// The limit a [`ServerError::TooLarge`] names.
pub(crate) const LIMIT: &str = "PostgreSQL's 1 GiB per value";

/// The server's (or the driver's) error as the cause of this crate's [`StoreError`]s,
/// with its kind.
pub(crate) fn server(e: postgres::Error) -> ServerError {
    ServerError::Server { kind: db_kind(&e), source: e }
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
        at.wrap(server(e))
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
