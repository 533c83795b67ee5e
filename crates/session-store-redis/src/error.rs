//! The typed causes inside this crate's [`StoreError`]s, and how Redis errors map onto
//! [`std::io::ErrorKind`]s.

use std::io;

use session_store::StoreError;
use session_store::keyed::{At, BackendError};

/// The largest string Redis accepts by default, in bytes (`proto-max-bulk-len`, 512 MiB). A
/// server configured higher still gets no larger write from this crate.
pub const MAX_CONTENT_BYTES: u64 = 512 << 20;

/// The longest key accepted, in bytes (the limit of every key-prefix backend).
pub use session_store::keyed::MAX_KEY_BYTES;

/// Why a Redis storage operation failed: the cause inside a [`StoreError::Io`], the
/// shared [`BackendError`] over the `redis` crate's error (Redis keeps any bytes, so never
/// `InvalidContent`, and has no read-only mode, so never `ReadOnly`).
///
/// [`ServerError::kind`] gives the [`io::ErrorKind`] of each case: `FileTooLarge` for a
/// string past [`MAX_CONTENT_BYTES`], `InvalidInput` for a bad key; for the server's own
/// errors `OutOfMemory` when `maxmemory` refuses a write, `ConnectionRefused` when no
/// connection could be made, `ConnectionAborted` for a lost one, `Other` otherwise.
/// Reach it with [`ServerError::find`].
pub type ServerError = BackendError<redis::RedisError>;

/// The limit a [`ServerError::TooLarge`] names.
pub(crate) const LIMIT: &str = "Redis's proto-max-bulk-len per string";

/// The server's (or the driver's) error as the cause of this crate's [`StoreError`]s,
/// with its kind.
pub(crate) fn server(e: redis::RedisError) -> ServerError {
    ServerError::Server { kind: redis_kind(&e), source: e }
}

fn redis_kind(e: &redis::RedisError) -> io::ErrorKind {
    let text = e.to_string();
    if text.contains("exceeds maximum allowed size") {
        io::ErrorKind::FileTooLarge
    } else if e.code() == Some("OOM") || text.contains("OOM command not allowed") {
        io::ErrorKind::OutOfMemory
    } else if e.is_connection_refusal() {
        io::ErrorKind::ConnectionRefused
    } else if e.is_connection_dropped() || e.is_io_error() || e.is_unrecoverable_error() {
        io::ErrorKind::ConnectionAborted
    } else {
        io::ErrorKind::Other
    }
}

/// Wraps a Redis error as the [`StoreError`] of `op` on `path`.
pub(crate) fn rd(at: At<'_>) -> impl FnOnce(redis::RedisError) -> StoreError + '_ {
    move |e| at.wrap(server(e))
}

/// Why [`RedisStorage::connect`](crate::RedisStorage::connect) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL could not be parsed.
    #[error("bad Redis URL; pass `redis://host:port/db`")]
    BadUrl(#[source] redis::RedisError),
    /// The server could not be reached or refused the login.
    #[error("cannot connect to Redis")]
    Connect(#[source] redis::RedisError),
}
