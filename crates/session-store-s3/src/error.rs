//! The typed causes inside this crate's [`StoreError`]s, and how object store errors map
//! onto [`std::io::ErrorKind`]s.

use std::io;
use std::path::Path;

use session_store::keyed::{self, Cause};
use session_store::{Op, StoreError};

/// The largest single write, in bytes: S3's limit on one `PUT` (5 GiB). A write, an
/// append's tail or a compaction larger than this is refused.
pub const MAX_SEGMENT_BYTES: u64 = 5 << 30;

/// The longest key accepted, in bytes (the limit of every key-prefix backend).
pub use session_store::keyed::MAX_KEY_BYTES;

/// Why an object storage operation failed: the cause inside a [`StoreError::Io`].
///
/// [`StoreError::Io`] carries it as the source of its [`io::Error`], whose
/// [`io::ErrorKind`] tells the broad case apart (see [`S3Error::kind`]); reach it with
/// [`S3Error::find`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum S3Error {
    /// One write would be larger than [`MAX_SEGMENT_BYTES`]; nothing was written.
    #[error("a write of {size} bytes exceeds the object storage limit of {limit} bytes per write")]
    TooLarge {
        /// The size of the write.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// An object of the layout is not what this crate writes: a head that is not a head
    /// of a known version, a segment whose length or SHA-256 differs from its head's
    /// record, or a segment the head names that is gone.
    #[error("invalid object {key}: {reason}")]
    InvalidContent {
        /// The object's key in the bucket.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The path cannot be a key: not UTF-8, a NUL byte, a `..` component or too long.
    #[error("path cannot be a key: {reason}")]
    BadPath {
        /// What is wrong with it.
        reason: String,
    },
    /// The store accepted a second create of the same object
    /// ([`S3Storage::probe_conditional_writes`](crate::S3Storage::probe_conditional_writes)):
    /// it ignores conditional writes (Garage does), so a concurrent write could be lost.
    #[error(
        "the object store ignores conditional writes, so concurrent writers could overwrite each other; \
         pass --allow-unconditional (S3StorageBuilder::allow_unconditional) to write under a lock object instead"
    )]
    Unconditional,
    /// The object store refused the request or could not be reached.
    #[error("object store error")]
    Backend(#[source] object_store::Error),
}

impl S3Error {
    /// Returns the [`io::ErrorKind`] a [`StoreError::Io`] reports for this cause:
    /// `FileTooLarge` for a write past the limit, `InvalidData` for an object of another
    /// shape, `InvalidInput` for a bad key, `Unsupported` for a store without conditional
    /// writes, and for a backend error the kind of the IO error inside it (a refused or
    /// lost connection), `PermissionDenied` for refused credentials, else `Other`.
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            S3Error::TooLarge { .. } => io::ErrorKind::FileTooLarge,
            S3Error::InvalidContent { .. } => io::ErrorKind::InvalidData,
            S3Error::BadPath { .. } => io::ErrorKind::InvalidInput,
            S3Error::Unconditional => io::ErrorKind::Unsupported,
            S3Error::Backend(e) => backend_kind(e),
        }
    }

    /// Returns the cause inside `err`, when `err` came from this crate.
    pub fn find(err: &StoreError) -> Option<&S3Error> {
        keyed::find(err)
    }

    /// Wraps the cause as the [`StoreError`] of `op` on `path`.
    pub(crate) fn at(self, op: Op, path: &Path) -> StoreError {
        keyed::wrap(self, op, path)
    }
}

impl Cause for S3Error {
    fn bad_path(reason: String) -> S3Error {
        S3Error::BadPath { reason }
    }

    fn kind(&self) -> io::ErrorKind {
        S3Error::kind(self)
    }
}

fn backend_kind(e: &object_store::Error) -> io::ErrorKind {
    match e {
        object_store::Error::NotFound { .. } => return io::ErrorKind::NotFound,
        object_store::Error::Unauthenticated { .. } | object_store::Error::PermissionDenied { .. } => {
            return io::ErrorKind::PermissionDenied;
        }
        _ => {}
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<io::Error>() {
            return io.kind();
        }
        cause = c.source();
    }
    io::ErrorKind::Other
}

/// Wraps an object store error as the [`StoreError`] of `op` on `path`.
pub(crate) fn backend(op: Op, path: &Path) -> impl FnOnce(object_store::Error) -> StoreError + '_ {
    move |e| S3Error::Backend(e).at(op, path)
}

/// Why [`S3Storage::from_url`](crate::S3Storage::from_url) or
/// [`S3StorageBuilder::build`](crate::S3StorageBuilder::build) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The URL could not be parsed, or names an option this crate does not know.
    #[error("bad object storage URL: {reason}; pass `s3://bucket/prefix?endpoint=http://host:port&region=us-east-1`")]
    BadUrl {
        /// What is wrong with it.
        reason: String,
    },
    /// The object store client could not be configured (a missing bucket or region, a
    /// malformed endpoint).
    #[error("cannot configure the object store client")]
    Config(#[source] object_store::Error),
    /// The storage's runtime could not be started.
    #[error("cannot start the object storage's runtime")]
    Runtime(#[source] io::Error),
}
