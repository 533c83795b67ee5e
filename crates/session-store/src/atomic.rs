//! The one audited module that replaces files atomically and renames them durably.
//!
//! An atomic replace of `<dir>/<name>`:
//!
//! 1. creates `<dir>` if needed, then `<dir>/.<name>.<pid>.<16 random hex>.tmp` exclusively;
//! 2. writes the new content and `sync_data`s it, so the data is on disk before it has a name;
//! 3. runs the caller's publish step (take the publish lock, check the expected size), holding
//!    whatever it returns until the rename is done;
//! 4. renames the temporary file over `<name>` (atomic on POSIX file systems), then tells the
//!    publish step it happened: the file storage carries over to the new file the lines a
//!    writer that takes no lock (pi) appended to the replaced one after the check;
//! 5. syncs `<dir>` so the rename itself survives a power loss.
//!
//! Any failure before the rename deletes the temporary file and leaves `<name>` untouched; a
//! failure after it is an error that says the new file landed ([`StoreError::landed`]).
//!
//! The new file keeps the mode of the one it replaces, and its owner and group where the
//! process may set them (root, or a group it belongs to): a 0600 session stays 0600. The
//! temporary file is created 0600, exclusively and never through a link, and given the
//! old file's mode before any content is written.
//!
//! A new file written with [`crate::Durability::None`] skips the syncs of steps 2 and 5
//! (see [`crate::Storage::write_atomic_stream`]): readers still never see it partly
//! written, but after a power loss it may be missing, empty or cut short.
//!
//! What a reader can observe: before step 4 the old file (or none); after it the complete new
//! file. After a crash or power loss at any point a reader finds either the complete old file or
//! the complete new one, never a mixture, plus possibly an orphaned `.<name>.<pid>.<hex>.tmp`
//! (dot-files are ignored by listing), which the next replace or append writer in the same
//! directory removes once its pid no longer runs ([`remove_dead_leftovers`]). Only when step 5 fails is the outcome after a power loss open (old or new,
//! each complete); the error is reported.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Op, StoreError};
use crate::fault::{Faults, plan_write};

/// Replaces `path` with `bytes` atomically and durably (see the module docs for the steps).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    write_atomic_with(path, bytes, None, || Ok(()))
}

/// What the publish step of a replace hands over: held until the rename is done, then
/// told that it happened ([`Published::renamed`]), so that it can act on the file just
/// published before letting go (the file storage carries over lines appended to the
/// replaced file after its check, then releases the session's lock).
pub(crate) trait Published {
    /// Runs once the new file of `written` bytes has been renamed to `path`; an error
    /// must say that the replace landed ([`StoreError::landed`]).
    fn renamed(self, path: &Path, written: u64) -> Result<(), StoreError>;
}

impl Published for () {
    fn renamed(self, _path: &Path, _written: u64) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Like [`write_atomic`], running `publish` just before the rename and holding its result (a lock
/// guard) until the rename is done; an error from `publish` abandons the write.
pub(crate) fn write_atomic_with<G: Published>(
    path: &Path,
    bytes: &[u8],
    faults: Option<&Faults>,
    publish: impl FnOnce() -> Result<G, StoreError>,
) -> Result<(), StoreError> {
    let dir = parent_dir(path)?;
    fs_err::create_dir_all(&dir).map_err(|e| StoreError::io(Op::EnsureDir, &dir, e))?;
    let temp = temp_path(path)?;
    let mut renamed = false;
    let result = (|| {
        write_temp(&temp, path, bytes, faults)?;
        let guard = publish()?;
        rename_raw(&temp, path, faults)?;
        renamed = true;
        guard.renamed(path, bytes.len() as u64)
    })();
    if !renamed {
        // The temporary file may or may not exist; either is fine.
        let _ = fs_err::remove_file(&temp);
        return result;
    }
    remove_dead_leftovers(&dir);
    // The new file is in place: an error of the step after the rename says so, and
    // the rename is made durable either way.
    let synced = sync_dir_with(&dir, faults).map_err(|e| not_durable(path, bytes.len() as u64, e));
    result.and(synced)
}

/// The error of a replace whose rename happened but whose directory sync failed.
fn not_durable(path: &Path, written: u64, error: StoreError) -> StoreError {
    StoreError::NotDurable { path: path.to_path_buf(), written, source: Box::new(error) }
}

/// Replaces `path` atomically with the content `fill` writes piece by piece, taking no
/// session lock: for files that are not sessions (caches, breadcrumbs), which no append
/// writer holds open. With `sync` false the data and the rename are not synced: readers
/// still see the file appear whole, but a power loss may leave it missing, empty or cut
/// short. Returns the number of bytes written.
pub fn write_atomic_stream(
    path: &Path,
    sync: bool,
    fill: &mut dyn FnMut(&mut dyn crate::Sink) -> std::io::Result<()>,
) -> Result<u64, StoreError> {
    write_atomic_stream_with(path, fill, sync, NewFile::LikeTarget, || Ok(()))
}

/// Replaces `path` atomically and durably with what `fill` writes, as a file private to
/// this user whatever `path` was: the temporary file is created 0600, exclusively and
/// never through a link, in `path`'s folder, which must exist. For small files of the
/// agents' own that they write the same way (omp's `session-pins.json`, written 0600
/// through a temporary file and a rename). Returns the bytes written.
pub fn write_atomic_private(
    path: &Path,
    fill: &mut dyn FnMut(&mut dyn crate::Sink) -> std::io::Result<()>,
) -> Result<u64, StoreError> {
    write_atomic_stream_with(path, fill, true, NewFile::Private, || Ok(()))
}

/// How the temporary file of a replace is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NewFile {
    /// With the mode (and, where it may, the owner) of the file it replaces, in a
    /// folder created when missing.
    LikeTarget,
    /// Mode 0600, in a private folder that must exist.
    Private,
}

/// [`write_atomic_with`] for content produced piece by piece by `fill` (written
/// through a buffer straight into the temporary file, large vectored writes
/// directly); returns the bytes written. Used without a fault plan only.
///
/// With `sync` false, steps 2 and 5 skip their syncs: readers still see the file appear
/// whole, but a power loss may leave it missing, empty or cut short. Only for new files
/// whose loss loses nothing else ([`crate::Durability::None`]).
pub(crate) fn write_atomic_stream_with<G: Published>(
    path: &Path,
    fill: &mut dyn FnMut(&mut dyn crate::Sink) -> std::io::Result<()>,
    sync: bool,
    new_file: NewFile,
    publish: impl FnOnce() -> Result<G, StoreError>,
) -> Result<u64, StoreError> {
    let dir = parent_dir(path)?;
    if new_file == NewFile::LikeTarget {
        fs_err::create_dir_all(&dir).map_err(|e| StoreError::io(Op::EnsureDir, &dir, e))?;
    }
    let temp = temp_path(path)?;
    let mut renamed = false;
    let result = (|| {
        let file = match new_file {
            NewFile::LikeTarget => create_temp(&temp, path),
            NewFile::Private => create_private_temp(&temp),
        }
        .map_err(|e| StoreError::io_raw(Op::WriteTemp, path, e))?;
        // The std file under the buffer: it takes large vectored writes (`writev`) as they are.
        let (file, _) = file.into_parts();
        let mut out = Counting { inner: std::io::BufWriter::with_capacity(STREAM_BUFFER, file), written: 0 };
        fill(&mut out).map_err(|e| StoreError::io_raw(Op::WriteTemp, path, e))?;
        let written = out.written;
        let file = out.inner.into_inner().map_err(|e| StoreError::io_raw(Op::WriteTemp, path, e.into_error()))?;
        if sync {
            file.sync_data().map_err(|e| StoreError::io_raw(Op::SyncData, path, e))?;
        }
        let guard = publish()?;
        rename_raw(&temp, path, None)?;
        renamed = true;
        guard.renamed(path, written)?;
        Ok(written)
    })();
    if !renamed {
        // The temporary file may or may not exist; either is fine.
        let _ = fs_err::remove_file(&temp);
        return result;
    }
    remove_dead_leftovers(&dir);
    // The new file is in place: an error of the step after the rename says so, and the
    // rename is made durable either way.
    let synced = match (sync, &result) {
        (true, Ok(written)) => sync_dir_with(&dir, None).map_err(|e| not_durable(path, *written, e)),
        (true, Err(_)) => sync_dir_with(&dir, None),
        (false, _) => Ok(()),
    };
    result.and_then(|written| synced.map(|()| written))
}

/// The buffer of a streamed atomic write: small pieces are gathered in it, vectored
/// writes at least this large go straight to the file.
const STREAM_BUFFER: usize = 64 << 10;

/// A writer that counts what passes through it.
struct Counting<W> {
    inner: W,
    written: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }
    fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        let n = self.inner.write_vectored(bufs)?;
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl crate::Sink for Counting<std::io::BufWriter<std::fs::File>> {
    /// Runs of an open file are copied by the kernel: `std::io::copy` from a duplicate
    /// of `source`'s descriptor, positioned at `at`, into the temporary file (on Linux
    /// `copy_file_range`, which falls back to reading and writing where the two files
    /// cannot share it). The duplicate's position is its own business: `source` is read
    /// by position only.
    fn copy_from(&mut self, source: &dyn session_model::ReadAt, at: u64, len: u64) -> std::io::Result<()> {
        #[cfg(unix)]
        if let Some(fd) = source.fd() {
            use std::io::{Read, Seek};
            let mut from = std::fs::File::from(fd.try_clone_to_owned()?);
            from.seek(std::io::SeekFrom::Start(at))?;
            let copied = std::io::copy(&mut (&from).take(len), &mut self.inner)?;
            self.written += copied;
            if copied < len {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            return Ok(());
        }
        crate::storage::copy_by_reading(self, source, at, len)
    }
}

/// Creates the temporary file of a replace of `target`, exclusively and never through a
/// link, with `target`'s permissions and (where this process may give them) its owner and
/// group, so a replaced session stays exactly as private as it was. The file is created
/// 0600 and only then given the target's mode: its content is never more exposed than the
/// target's. A new file (no `target` yet) gets the default mode (0666 less the umask).
fn create_temp(temp: &Path, target: &Path) -> std::io::Result<fs_err::File> {
    let existing = fs_err::metadata(target).ok().filter(std::fs::Metadata::is_file);
    let mut options = fs_err::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    if existing.is_some() {
        use fs_err::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let file = crate::open::open_no_follow(&mut options, temp)?;
    #[cfg(unix)]
    if let Some(meta) = existing {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let mine = file.metadata()?;
        if (mine.uid(), mine.gid()) != (meta.uid(), meta.gid()) {
            // Only root may give a file away; anyone may keep a group they belong to. A
            // replace that cannot keep the owner keeps the mode and goes on: whoever may
            // replace the file may already write it.
            let _ = std::os::unix::fs::fchown(file.file(), Some(meta.uid()), Some(meta.gid()))
                .or_else(|_| std::os::unix::fs::fchown(file.file(), None, Some(meta.gid())));
        }
        // After the owner: a change of owner clears the set-id bits.
        file.set_permissions(std::fs::Permissions::from_mode(meta.mode() & 0o7777))?;
    }
    Ok(file)
}

/// Creates the temporary file of a replace in a private folder: exclusively, never
/// through a link, mode 0600.
fn create_private_temp(temp: &Path) -> std::io::Result<fs_err::File> {
    let mut options = fs_err::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use fs_err::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    crate::open::open_no_follow(&mut options, temp)
}

fn write_temp(temp: &Path, target: &Path, bytes: &[u8], faults: Option<&Faults>) -> Result<(), StoreError> {
    let mut file = create_temp(temp, target).map_err(|e| StoreError::io_raw(Op::WriteTemp, target, e))?;
    let (n, injected) = plan_write(faults, Op::WriteTemp, target, bytes.len());
    file.write_all(&bytes[..n]).map_err(|e| StoreError::io_raw(Op::WriteTemp, target, e))?;
    if let Some(e) = injected {
        return Err(e);
    }
    if let Some(f) = faults {
        f.check(Op::SyncData, target)?;
    }
    file.sync_data().map_err(|e| StoreError::io_raw(Op::SyncData, target, e))
}

/// Renames `from` to `to` (replacing it) and syncs the target's directory (and the
/// source's, when it is another one). A rename that happened but whose directory sync
/// failed returns [`StoreError::NotDurable`]: the rename landed and must not be repeated.
pub fn rename(from: &Path, to: &Path) -> Result<(), StoreError> {
    rename_with(from, to, None)
}

/// [`rename`] with a fault plan. Once the rename has happened, a failed directory sync is reported as
/// [`StoreError::NotDurable`] (the rename landed; `written` is the size of what `to` now
/// names, 0 for a directory), never as a failed rename.
pub(crate) fn rename_with(from: &Path, to: &Path, faults: Option<&Faults>) -> Result<(), StoreError> {
    let (to_dir, from_dir) = (parent_dir(to)?, parent_dir(from)?);
    rename_raw(from, to, faults)?;
    let synced = sync_dir_with(&to_dir, faults).and_then(|()| match from_dir != to_dir {
        true => sync_dir_with(&from_dir, faults),
        false => Ok(()),
    });
    synced.map_err(|e| {
        let written = fs_err::symlink_metadata(to).map(|m| if m.is_file() { m.len() } else { 0 }).unwrap_or(0);
        not_durable(to, written, e)
    })
}

#[allow(clippy::disallowed_methods)] // this module is the audited home of renames
fn rename_raw(from: &Path, to: &Path, faults: Option<&Faults>) -> Result<(), StoreError> {
    if let Some(f) = faults {
        f.check(Op::Rename, to)?;
    }
    std::fs::rename(from, to).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => StoreError::NotFound { path: from.to_path_buf() },
        _ => StoreError::io_raw(Op::Rename, from, e),
    })
}

/// Syncs a directory so renames and creations in it survive a power loss.
pub fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    sync_dir_with(dir, None)
}

pub(crate) fn sync_dir_with(dir: &Path, faults: Option<&Faults>) -> Result<(), StoreError> {
    if let Some(f) = faults {
        f.check(Op::SyncDir, dir)?;
    }
    #[cfg(unix)]
    {
        let d = fs_err::File::open(dir).map_err(|e| StoreError::io_raw(Op::SyncDir, dir, e))?;
        d.sync_all().map_err(|e| StoreError::io_raw(Op::SyncDir, dir, e))?;
    }
    Ok(())
}

/// Returns the directory of `path` (`.` for a bare file name).
pub(crate) fn parent_dir(path: &Path) -> Result<PathBuf, StoreError> {
    if path.file_name().is_none() {
        return Err(StoreError::NotAFile { path: path.to_path_buf() });
    }
    Ok(match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    })
}

/// Returns a fresh temporary path `<dir>/.<name>.<pid>.<16 random hex>.tmp` beside
/// `path`; the pid says whose it is, so a temporary file left by a killed writer can be
/// told from one being written ([`remove_dead_leftovers`]).
pub(crate) fn temp_path(path: &Path) -> Result<PathBuf, StoreError> {
    use rand::Rng;
    let name = path.file_name().ok_or_else(|| StoreError::NotAFile { path: path.to_path_buf() })?;
    let mut tmp = std::ffi::OsString::from(".");
    tmp.push(name);
    tmp.push(format!(".{}.{:016x}.tmp", std::process::id(), rand::rng().next_u64()));
    Ok(path.with_file_name(tmp))
}

/// Returns the pid of a temporary file name made by [`temp_path`], if it is one.
fn temp_owner(file_name: &str) -> Option<u32> {
    let rest = file_name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let (rest, hex) = rest.rsplit_once('.')?;
    let (name, pid) = rest.rsplit_once('.')?;
    let ours = !name.is_empty()
        && hex.len() == 16
        && hex.bytes().all(|b| b.is_ascii_hexdigit())
        && !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit());
    ours.then(|| pid.parse().ok()).flatten()
}

/// Removes what writers of this workspace left in `dir` when they were killed:
/// temporary files whose pid no longer runs, and lock files (`.<name>.lock`) whose
/// record names a pid that no longer runs while `<name>` itself does not exist (the
/// lock of a new file that was never published, which no later writer of that file
/// would steal). Files of other programs, and of live writers, are left alone. Returns
/// how many it removed.
///
/// The file storage runs it after every replace it publishes and when it opens an
/// append writer, so a crashed writer's leftovers go with the next write in their
/// directory.
pub fn remove_dead_leftovers(dir: &Path) -> usize {
    let Ok(entries) = fs_err::read_dir(dir) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(pid) = temp_owner(name) {
            if pid != std::process::id() && !crate::lock::pid_alive(pid) && fs_err::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        } else if let Some(session) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".lock"))
            && !session.is_empty()
            && !dir.join(session).exists()
            && crate::lock::remove_if_dead(&entry.path())
        {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_hidden_siblings_that_name_their_writer() -> Result<(), StoreError> {
        let t = temp_path(Path::new("/x/s.jsonl"))?;
        let name = t.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        assert!(name.starts_with(".s.jsonl.") && name.ends_with(".tmp"), "{name}");
        let pid = std::process::id().to_string();
        assert_eq!(name.len(), ".s.jsonl.".len() + pid.len() + 1 + 16 + 4);
        assert_eq!(t.parent(), Some(Path::new("/x")));
        assert_eq!(temp_owner(&name), Some(std::process::id()));
        assert_eq!(temp_owner(".a.b.jsonl.12.0123456789abcdef.tmp"), Some(12));
        // omp's own temporary files, and anything else, are not ours.
        assert_eq!(temp_owner(".s.jsonl.0123456789abcdef.tmp"), None);
        assert_eq!(temp_owner(".s.jsonl.1a.0123456789abcdef.tmp"), None);
        assert_eq!(temp_owner("s.jsonl.12.0123456789abcdef.tmp"), None);
        Ok(())
    }

    #[test]
    fn parent_of_bare_name_is_dot() -> Result<(), StoreError> {
        assert_eq!(parent_dir(Path::new("a.jsonl"))?, PathBuf::from("."));
        assert!(parent_dir(Path::new("/")).is_err());
        Ok(())
    }
}
