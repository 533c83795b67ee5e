//! The file reads and writes discovery performs, in one place.
//!
//! Reads go through `fs_err` so errors name their path. Everything that creates,
//! renames or writes goes through `session-store`'s file storage, the one crate that
//! writes files (renames and directory creation are then synced like every other
//! write of the project). Removing an empty legacy directory and a non-directory in
//! the way of a bucket migration are the only mutations done here directly.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// What `stat` tells discovery about a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stat {
    /// Modification time in nanoseconds since the epoch.
    pub(crate) mtime_ns: i128,
    /// Size in bytes.
    pub(crate) size: u64,
    /// Whether it is a regular file (after following symlinks).
    pub(crate) is_file: bool,
    /// Whether it is a directory (after following symlinks).
    pub(crate) is_dir: bool,
}

impl Stat {
    /// Returns the modification time as a JavaScript `Date` value (whole ms).
    pub(crate) fn mtime_ms(&self) -> i64 {
        i64::try_from(self.mtime_ns.div_euclid(1_000_000)).unwrap_or(i64::MAX)
    }
}

/// Stats `path`, following symlinks.
pub(crate) fn stat(path: &Path) -> std::io::Result<Stat> {
    Ok(stat_of(&fs_err::metadata(path)?))
}

fn stat_of(m: &std::fs::Metadata) -> Stat {
    let mtime_ns = match m.modified() {
        Ok(t) => match t.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i128,
            Err(e) => -(e.duration().as_nanos() as i128),
        },
        Err(_) => 0,
    };
    Stat { mtime_ns, size: m.len(), is_file: m.is_file(), is_dir: m.is_dir() }
}

/// One directory entry.
#[derive(Clone, Debug)]
pub(crate) struct DirEntry {
    /// File name (lossy UTF-8).
    pub(crate) name: String,
    /// Full path.
    pub(crate) path: PathBuf,
    /// Whether the entry is a directory or a symlink (not followed).
    pub(crate) is_dir_or_symlink: bool,
    /// Whether the entry is a regular file (not followed).
    pub(crate) is_file: bool,
    /// Whether the entry is a symlink.
    pub(crate) is_symlink: bool,
}

/// Lists a directory in the order the OS returns.
pub(crate) fn read_dir(dir: &Path) -> std::io::Result<Vec<DirEntry>> {
    let mut out = Vec::new();
    for e in fs_err::read_dir(dir)? {
        let e = e?;
        let ft = e.file_type()?;
        out.push(DirEntry {
            name: e.file_name().to_string_lossy().into_owned(),
            path: e.path(),
            is_dir_or_symlink: ft.is_dir() || ft.is_symlink(),
            is_file: ft.is_file(),
            is_symlink: ft.is_symlink(),
        });
    }
    Ok(out)
}

/// Reads a whole file into `buf` and returns its stat and bytes, with one open: the
/// bytes it held when it was stated (fewer if it shrank; bytes appended since are
/// not read). Reading no further than the stated size spares the read that would
/// only find the end. `buf` is a reused buffer: it only grows (zeroed once), so that
/// reading a file costs neither an allocation nor clearing memory.
pub(crate) fn read_all_with_stat<'b>(path: &Path, buf: &'b mut Vec<u8>) -> std::io::Result<(Stat, &'b [u8])> {
    let mut f = open(path)?;
    let st = stat_of(&f.metadata()?);
    let room = room(buf, usize::try_from(st.size).map_err(std::io::Error::other)?);
    let mut done = 0;
    while done < room.len() {
        match f.read(&mut room[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let read: &'b [u8] = room;
    Ok((st, &read[..done]))
}

/// The first `n` bytes of a reused buffer, grown (and zeroed) only if it is shorter.
fn room(buf: &mut Vec<u8>, n: usize) -> &mut [u8] {
    if buf.len() < n {
        buf.resize(n, 0);
    }
    &mut buf[..n]
}

/// Reads a whole file.
pub(crate) fn read_all(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    open(path)?.read_to_end(&mut out)?;
    Ok(out)
}

/// Opens a regular file for reading, as every read of discovery does: without waiting
/// (a FIFO planted in a sessions folder is refused at once, never read) and refusing
/// anything but a regular file (`session_store::open`).
pub(crate) fn open(path: &Path) -> std::io::Result<fs_err::File> {
    session_store::open::open_regular(path)
}

/// Reads at most `prefix` bytes from the start and the last `suffix` bytes of a file
/// (the windows may overlap on small files), with one open; returns the file's stat
/// and the two windows. `head` and `tail` are reused buffers: they only grow (zeroed
/// once), so that reading a file costs neither an allocation nor clearing memory.
pub(crate) fn read_slices<'h, 't>(
    path: &Path,
    prefix: u64,
    suffix: u64,
    head: &'h mut Vec<u8>,
    tail: &'t mut Vec<u8>,
) -> std::io::Result<(Stat, &'h [u8], &'t [u8])> {
    let mut f = open(path)?;
    let st = stat_of(&f.metadata()?);
    let size = st.size;
    let p = prefix.min(size) as usize;
    if suffix >= size && size > prefix {
        // The tail window is the whole file: one read serves both.
        let all = room(tail, size as usize);
        f.read_exact(all)?;
        room(head, p).copy_from_slice(&all[..p]);
        return Ok((st, &head[..p], &tail[..size as usize]));
    }
    f.read_exact(room(head, p))?;
    let s = suffix.min(size) as usize;
    if s == 0 {
        return Ok((st, &head[..p], &[]));
    }
    if size as usize == s && s <= p {
        room(tail, s).copy_from_slice(&head[..s]);
    } else {
        f.seek(SeekFrom::Start(size - s as u64))?;
        f.read_exact(room(tail, s))?;
    }
    Ok((st, &head[..p], &tail[..s]))
}

/// Reads up to `limit` bytes from the start of a file.
pub(crate) fn read_prefix(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let f = open(path)?;
    let mut out = Vec::new();
    f.take(limit).read_to_end(&mut out)?;
    Ok(out)
}

/// Returns whether `path` exists (without following a final symlink's target
/// failure into an error).
pub(crate) fn exists(path: &Path) -> bool {
    fs_err::symlink_metadata(path).is_ok()
}

fn store_error(e: session_store::StoreError) -> std::io::Error {
    std::io::Error::new(e.io_kind().unwrap_or(std::io::ErrorKind::Other), e)
}

/// Renames `from` to `to` (and syncs the directory).
pub(crate) fn rename(from: &Path, to: &Path) -> std::io::Result<()> {
    use session_store::Storage;
    session_store::FileStorage::new().rename(from, to).map_err(store_error)
}

/// Creates a directory and its parents.
pub(crate) fn create_dir_all(path: &Path) -> std::io::Result<()> {
    use session_store::Storage;
    session_store::FileStorage::new().ensure_dir(path).map_err(store_error)
}

/// Removes an empty directory.
pub(crate) fn remove_dir(path: &Path) -> std::io::Result<()> {
    fs_err::remove_dir(path)
}

/// Removes a file or a directory tree.
pub(crate) fn remove_any(path: &Path) -> std::io::Result<()> {
    match fs_err::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs_err::remove_dir_all(path),
        Ok(_) => fs_err::remove_file(path),
        Err(e) => Err(e),
    }
}

/// Writes a small whole file (breadcrumbs), atomically: a reader never sees half a
/// breadcrumb (omp writes it in place).
pub(crate) fn write_small(path: &Path, content: &str) -> std::io::Result<()> {
    // No session lock: a breadcrumb is no session, and omp writes it without one.
    session_store::atomic::write_atomic(path, content.as_bytes()).map_err(store_error)
}

/// Returns the canonical path, or `None` if it cannot be resolved.
pub(crate) fn realpath(path: &Path) -> Option<PathBuf> {
    fs_err::canonicalize(path).ok()
}

/// Returns `(dev, ino)` of a path, where the platform has them.
#[cfg(unix)]
pub(crate) fn dev_ino(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = fs_err::metadata(path).ok()?;
    Some((m.dev(), m.ino()))
}

/// Returns `(dev, ino)` of a path, where the platform has them.
#[cfg(not(unix))]
pub(crate) fn dev_ino(_path: &Path) -> Option<(u64, u64)> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every size against the two windows: smaller than the prefix, between the
    /// windows (one read serves both) and larger than the tail window.
    #[test]
    fn slices_are_the_windows_of_the_file() -> std::io::Result<()> {
        let dir = std::env::temp_dir().join(format!("session-discovery-slices-{}", std::process::id()));
        fs_err::create_dir_all(&dir)?;
        let path = dir.join("s.jsonl");
        for size in [0usize, 1, 9, 10, 11, 39, 40, 41, 100] {
            let content: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            fs_err::write(&path, &content)?;
            for suffix in [0u64, 10, 40] {
                // Buffers holding something already: the windows are what was read.
                let (mut head, mut tail) = (vec![7u8; 3], vec![7u8; 50]);
                let (st, head, tail) = read_slices(&path, 10, suffix, &mut head, &mut tail)?;
                assert_eq!(st.size, size as u64);
                assert_eq!(head, &content[..size.min(10)], "head of {size} bytes");
                let s = (suffix as usize).min(size);
                assert_eq!(tail, &content[size - s..], "tail {suffix} of {size} bytes");
            }
        }
        fs_err::remove_dir_all(&dir)
    }
}
