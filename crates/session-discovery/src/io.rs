//! How discovery reaches what it reads and writes, in one place.
//!
//! Session files, the directories that hold them and omp's legacy buckets are reached
//! through the [`Storage`] a [`crate::Discovery`] was given, so listing, resume and
//! continue work on any backend (files, memory, a server) and keep typed errors.
//! Only the local machine's own state is read here directly: the identity and real
//! path of the process's working directory (which no backend holds), and through the
//! file storage of this machine the terminal breadcrumbs and omp's pins. The listing
//! cache is read and written through the [`session_store::PrivateDir`] it lives in
//! (`crate::cache`).

use std::path::{Path, PathBuf};

use session_store::{EntryKind, FileStat, FileStorage, Storage, StoreError};

/// One directory entry, with its full path.
#[derive(Clone, Debug)]
pub(crate) struct DirEntry {
    /// File name.
    pub(crate) name: String,
    /// Full path.
    pub(crate) path: PathBuf,
    /// What the directory says it is (a link not followed).
    pub(crate) kind: EntryKind,
}

impl DirEntry {
    /// Whether the entry is a directory or a link (which may lead to one).
    pub(crate) fn is_dir_or_symlink(&self) -> bool {
        matches!(self.kind, EntryKind::Dir | EntryKind::Symlink)
    }
}

/// Lists a directory (a missing one has no entries).
pub(crate) fn read_dir(storage: &dyn Storage, dir: &Path) -> Result<Vec<DirEntry>, StoreError> {
    Ok(storage
        .read_dir(dir)?
        .into_iter()
        .map(|e| DirEntry { path: dir.join(&e.name), name: e.name, kind: e.kind })
        .collect())
}

/// Stats `path` following links; `None` when it is missing or cannot be stated.
pub(crate) fn stat(storage: &dyn Storage, path: &Path) -> Option<FileStat> {
    storage.stat(path).ok().flatten()
}

/// Returns whether something exists at `path` (an error counts as present, so that
/// nothing is moved over what could not be looked at).
pub(crate) fn exists(storage: &dyn Storage, path: &Path) -> bool {
    storage.exists(path).unwrap_or(true)
}

/// Reads up to `limit` bytes from the start of a file.
pub(crate) fn read_prefix(storage: &dyn Storage, path: &Path, limit: u64) -> Result<Vec<u8>, StoreError> {
    Ok(storage.read_slices(path, limit, 0)?.0)
}

/// The file storage of this machine, for its own state (breadcrumbs, pins).
pub(crate) fn local() -> FileStorage {
    FileStorage::new()
}

/// Returns a store error as an IO error of the same kind, for the error variants that
/// carry one.
pub(crate) fn to_io(e: StoreError) -> std::io::Error {
    std::io::Error::new(e.io_kind().unwrap_or(std::io::ErrorKind::Other), e)
}

/// Writes a small whole file of this machine's state (a breadcrumb) atomically: a
/// reader never sees half of it (omp writes it in place).
pub(crate) fn write_small(path: &Path, content: &str) -> std::io::Result<()> {
    // No session lock: a breadcrumb is no session, and omp writes it without one.
    session_store::atomic::write_atomic(path, content.as_bytes()).map_err(to_io)
}

/// Returns the canonical path of a local directory, or `None` if it cannot be resolved.
pub(crate) fn realpath(path: &Path) -> Option<PathBuf> {
    fs_err::canonicalize(path).ok()
}

/// Returns `(dev, ino)` of a local path, where the platform has them.
#[cfg(unix)]
pub(crate) fn dev_ino(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = fs_err::metadata(path).ok()?;
    Some((m.dev(), m.ino()))
}

/// Returns `(dev, ino)` of a local path, where the platform has them.
#[cfg(not(unix))]
pub(crate) fn dev_ino(_path: &Path) -> Option<(u64, u64)> {
    None
}
