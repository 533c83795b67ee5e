//! The typed causes inside this crate's [`StoreError`]s, and how Redis errors map onto
//! [`std::io::ErrorKind`]s.

use std::io;

use session_store::StoreError;
use session_store::keyed::{self, At, Cause};

/// The largest string Redis accepts by default, in bytes (`proto-max-bulk-len`, 512 MiB). A
/// server configured higher still gets no larger write from this crate.
pub const MAX_CONTENT_BYTES: u64 = 512 << 20;

/// The longest key accepted, in bytes (the limit of every key-prefix backend).
pub use session_store::keyed::MAX_KEY_BYTES;

/// Why a Redis storage operation failed: the cause inside a [`StoreError::Io`].
///
/// [`StoreError::Io`] carries it as the source of its [`io::Error`], whose
/// [`io::ErrorKind`] tells the broad case apart (see [`ServerError::kind`]); reach it with
/// [`ServerError::find`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The value would grow past [`MAX_CONTENT_BYTES`], or the server refused it as larger
    /// than its `proto-max-bulk-len`; nothing was written.
    #[error("content of {size} bytes exceeds the Redis string limit of {limit} bytes")]
    TooLarge {
        /// The size the value would have had (0 when the server refused it without saying).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The path cannot be a key: not UTF-8, a NUL byte, a `..` component or too long.
    #[error("path cannot be a key: {reason}")]
    BadPath {
        /// What is wrong with it.
        reason: String,
    },
    /// The server refused the command or the connection failed.
    #[error("redis error")]
    Redis(#[from] redis::RedisError),
}

impl ServerError {
    /// Returns the [`io::ErrorKind`] a [`StoreError::Io`] reports for this cause:
    /// `FileTooLarge` for a full string, `InvalidInput` for a bad key, `OutOfMemory` when
    /// `maxmemory` refuses a write, `ConnectionAborted` for a lost connection,
    /// `ConnectionRefused` when the server cannot be reached, `Other` otherwise.
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            ServerError::TooLarge { .. } => io::ErrorKind::FileTooLarge,
            ServerError::BadPath { .. } => io::ErrorKind::InvalidInput,
            ServerError::Redis(e) => redis_kind(e),
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
    move |e| at.wrap(ServerError::Redis(e))
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
