//! Errors of discovery operations.

use std::path::PathBuf;

/// An error of a discovery operation. Listing skips unreadable *files* as the
/// references do; only a directory that exists but cannot be read, or a failed
/// write, is reported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoveryError {
    /// A directory could not be listed.
    #[error("cannot list session directory {path}; check that it is readable")]
    ReadDir {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file or directory could not be written.
    #[error("cannot write {path}; check permissions and free space")]
    Write {
        /// The path.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The home directory is unknown.
    #[error("cannot find the home directory: set HOME")]
    NoHome,
    /// The working directory is unknown.
    #[error("cannot read the current directory: {0}")]
    NoCwd(std::io::Error),
}
