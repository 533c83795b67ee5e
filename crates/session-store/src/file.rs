//! [`FileStorage`]: session files on the real file system.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[cfg(any(unix, windows))]
use session_model::ReadAt;

use crate::atomic;
use crate::clock::{Clock, SystemClock};
use crate::error::{Op, StoreError};
use crate::fault::{Faults, plan_write};
use crate::lock;
use crate::storage::{
    AppendWriter, DirEntry, Durability, EntryKind, ExpectedSize, FileIdentity, FileStat, LockWait, PollWatch,
    SessionLock, Storage, Watch, artifacts_dir, grow, is_backup_of,
};

/// Session files on the real file system, with real `fsync`.
///
/// Appends and size-checked replaces take omp's publish lock (see [`Storage::lock`]); replaces go
/// through the audited [`atomic`] module. Cheap to clone.
#[derive(Clone, Debug)]
pub struct FileStorage {
    clock: Arc<dyn Clock>,
    faults: Option<Faults>,
}

impl Default for FileStorage {
    fn default() -> FileStorage {
        FileStorage::new()
    }
}

impl FileStorage {
    /// Returns a file storage that stamps lock records with the system clock.
    pub fn new() -> FileStorage {
        FileStorage { clock: Arc::new(SystemClock), faults: None }
    }

    /// Returns a file storage that stamps lock records with `clock`.
    pub fn with_clock(clock: Arc<dyn Clock>) -> FileStorage {
        FileStorage { clock, faults: None }
    }

    #[cfg(feature = "testing")]
    /// Makes the real write paths fail as `faults` says; for fault tests.
    pub fn with_faults(mut self, faults: Faults) -> FileStorage {
        self.faults = Some(faults);
        self
    }

    fn check(&self, op: Op, path: &Path) -> Result<(), StoreError> {
        match &self.faults {
            Some(f) => f.check(op, path),
            None => Ok(()),
        }
    }

    /// Opens `path` with `options` and writes `bytes` (a fault plan may cut it short).
    fn write_with(&self, options: &fs_err::OpenOptions, op: Op, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        ensure_parent(path)?;
        let mut f =
            crate::open::open_regular_with(&mut options.clone(), path).map_err(|e| StoreError::io(op, path, e))?;
        let (n, injected) = plan_write(self.faults.as_ref(), op, path, bytes.len());
        f.write_all(&bytes[..n]).map_err(|e| StoreError::io_raw(op, path, e))?;
        injected.map_or(Ok(()), Err)
    }

    /// Takes the publish lock and checks what is there (its size, and for
    /// [`ExpectedSize::Unchanged`] its identity), just before a rename publishes a new
    /// file. The file checked is kept open until the rename is done ([`Publish`]).
    fn publish_check(&self, path: &Path, expected: ExpectedSize) -> Result<Publish, StoreError> {
        let guard = lock::lock_publish(path, self.clock.as_ref(), self.faults.as_ref())?;
        let mut replaced = None;
        if expected != ExpectedSize::Any {
            self.check(Op::Stat, path)?;
            // Opened, then checked on the open descriptor: the very file the rename
            // replaces, whose later growth is then read from it.
            let old = match crate::open::open_regular(path) {
                Ok(f) => Some(f),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(StoreError::io_raw(Op::Stat, path, e)),
            };
            let found = match &old {
                Some(f) => Some(stat_of(&f.metadata().map_err(|e| StoreError::io_raw(Op::Stat, path, e))?)),
                None => None,
            };
            expected.check_stat(path, found.as_ref())?;
            replaced = old.zip(found.map(|st| st.size));
        }
        Ok(Publish { _guard: guard, replaced })
    }
}

/// What a size-checked replace of the file storage holds from its check to its rename:
/// the session's publish lock, and the file being replaced, open, with the size the check
/// found.
///
/// Writers that take the lock (this workspace's, omp's) cannot append between the check
/// and the rename. pi takes none: it opens the file, appends and closes it for each
/// entry, so an append that opened the file before the rename lands in the replaced file
/// after it, where no reader would ever find it. Such late lines are carried over to the
/// new file ([`carry_late_appends`]) before the lock is let go.
struct Publish {
    _guard: Option<lock::FileLockGuard>,
    replaced: Option<(fs_err::File, u64)>,
}

impl atomic::Published for Publish {
    fn renamed(self, path: &Path, written: u64) -> Result<(), StoreError> {
        match &self.replaced {
            Some((old, seen)) => carry_late_appends(path, old, *seen, written),
            None => Ok(()),
        }
    }
}

/// How long a replace waits, after it looked for late appends once, before it looks again:
/// long enough for an append that opened the old file just before the rename to write.
const LATE_APPEND_PAUSE: std::time::Duration = std::time::Duration::from_millis(2);

/// Appends to the file just published at `path` whatever was appended to the replaced
/// file `old` (`seen` bytes when checked) since the check: at once, and again after
/// [`LATE_APPEND_PAUSE`]. The carried bytes are synced. A failure is
/// [`StoreError::LateAppendsLost`] (the replace itself landed).
fn carry_late_appends(path: &Path, old: &fs_err::File, seen: u64, written: u64) -> Result<(), StoreError> {
    let mut carried = seen;
    for pause in [None, Some(LATE_APPEND_PAUSE)] {
        if let Some(pause) = pause {
            std::thread::sleep(pause);
        }
        let carry = || -> Result<u64, StoreError> {
            let now = old.metadata().map_err(|e| StoreError::io_raw(Op::Read, path, e))?.len();
            if now <= carried {
                return Ok(carried);
            }
            let len = usize::try_from(now - carried)
                .map_err(|e| StoreError::io_raw(Op::Read, path, std::io::Error::other(e)))?;
            let mut late = vec![0; len];
            read_exact_at(old, &mut late, carried).map_err(|e| StoreError::io_raw(Op::Read, path, e))?;
            let mut f = open_append(path)?;
            f.write_all(&late).map_err(|e| StoreError::io_raw(Op::Append, path, e))?;
            f.sync_data().map_err(|e| StoreError::io_raw(Op::SyncData, path, e))?;
            Ok(now)
        };
        match carry() {
            Ok(now) => carried = now,
            Err(e) => {
                let late = old.metadata().map_or(0, |m| m.len().saturating_sub(carried));
                return Err(StoreError::LateAppendsLost {
                    path: path.to_path_buf(),
                    written,
                    late,
                    source: Box::new(e),
                });
            }
        }
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes of `file` at `offset`.
fn read_exact_at(file: &fs_err::File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        file.file().read_exact_at(buf, offset)
    }
    #[cfg(not(unix))]
    {
        let mut f = file.file().try_clone()?;
        f.seek(SeekFrom::Start(offset))?;
        f.read_exact(buf)
    }
}

/// Reads a whole file, as [`std::fs::read`] does: whatever it holds when read, up to
/// its end. Only regular files are opened.
fn read_whole(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut file = crate::open::open_regular(path)?;
    let len = file.metadata()?.len();
    let mut buf = Vec::with_capacity(usize::try_from(len).unwrap_or(0).saturating_add(1));
    file.read_to_end(&mut buf)?;
    Ok(buf)
}

/// An open file (owned or borrowed) read by position, by the piecewise parse of a
/// session (elsewhere the storage reads files whole) and by the readers of derived
/// files ([`crate::PrivateDir::open_reader`]).
#[cfg(any(unix, windows))]
pub(crate) struct PositionalFile<F>(pub(crate) F);

#[cfg(any(unix, windows))]
impl<F: std::borrow::Borrow<std::fs::File> + Sync> ReadAt for PositionalFile<F> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileExt;
            self.0.borrow().read_at(buf, offset)
        }
        #[cfg(windows)]
        {
            use std::os::windows::fs::FileExt;
            self.0.borrow().seek_read(buf, offset)
        }
    }

    /// The open file's size, modification and change times, inode and device: any write
    /// to it moves one of them (a rename over its path does not touch it at all).
    fn stamp(&self) -> Option<u128> {
        let st = stat_of(&self.0.borrow().metadata().ok()?);
        let id = st.identity?;
        let mut h = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(&(st.size, id.mtime_ns, id.ctime_ns, id.ino, id.dev), &mut h);
        Some(u128::from(std::hash::Hasher::finish(&h)) | u128::from(st.size) << 64)
    }

    #[cfg(unix)]
    fn fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        Some(self.0.borrow().as_fd())
    }
}

/// Writes all of `bytes` at `offset` (positionally where the platform can).
fn write_all_at(file: &std::fs::File, bytes: &[u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        file.write_all_at(bytes, offset)
    }
    #[cfg(not(unix))]
    {
        let mut f = file.try_clone()?;
        f.seek(SeekFrom::Start(offset))?;
        f.write_all(bytes)
    }
}

/// Copies the directory tree `from` into `to`: directories created, regular files
/// copied (replacing), symbolic links made again with the same target (never followed).
/// A FIFO, socket or device anywhere in the tree is refused with
/// [`StoreError::NotRegular`] before anything is written (as omp's `fs.cp` refuses them),
/// so that a move that copies and then deletes never deletes what it could not copy.
fn copy_tree(from: &Path, to: &Path) -> Result<(), StoreError> {
    refuse_special(from)?;
    copy_checked_tree(from, to)
}

/// Fails with [`StoreError::NotRegular`] at the first entry below `dir` that is neither a
/// regular file, a directory nor a symbolic link.
fn refuse_special(dir: &Path) -> Result<(), StoreError> {
    let entries = fs_err::read_dir(dir).map_err(|e| StoreError::io(Op::List, dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io_raw(Op::List, dir, e))?;
        let kind = entry.file_type().map_err(|e| StoreError::io_raw(Op::Stat, &entry.path(), e))?;
        if kind.is_dir() {
            refuse_special(&entry.path())?;
        } else if !kind.is_file() && !kind.is_symlink() {
            return Err(StoreError::NotRegular { path: entry.path(), kind: crate::open::kind_name(kind) });
        }
    }
    Ok(())
}

fn copy_checked_tree(from: &Path, to: &Path) -> Result<(), StoreError> {
    fs_err::create_dir_all(to).map_err(|e| StoreError::io(Op::EnsureDir, to, e))?;
    let entries = fs_err::read_dir(from).map_err(|e| StoreError::io(Op::List, from, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io_raw(Op::List, from, e))?;
        let kind = entry.file_type().map_err(|e| StoreError::io_raw(Op::Stat, &entry.path(), e))?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_checked_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            fs_err::copy(entry.path(), &target).map_err(|e| StoreError::io(Op::Copy, &target, e))?;
        } else if kind.is_symlink() {
            copy_link(&entry.path(), &target)?;
        } else {
            return Err(StoreError::NotRegular { path: entry.path(), kind: crate::open::kind_name(kind) });
        }
    }
    Ok(())
}

/// Makes `target` a symbolic link with the same target as the link `link`.
#[cfg(unix)]
fn copy_link(link: &Path, target: &Path) -> Result<(), StoreError> {
    let points_to = fs_err::read_link(link).map_err(|e| StoreError::io_raw(Op::Read, link, e))?;
    match fs_err::symlink_metadata(target) {
        Ok(m) if !m.is_dir() => fs_err::remove_file(target).map_err(|e| StoreError::io_raw(Op::Copy, target, e))?,
        _ => {}
    }
    fs_err::os::unix::fs::symlink(&points_to, target).map_err(|e| StoreError::io(Op::Copy, target, e))
}

/// Links are not copied where the platform cannot make them without privileges.
#[cfg(not(unix))]
fn copy_link(link: &Path, _target: &Path) -> Result<(), StoreError> {
    Err(StoreError::NotRegular { path: link.to_path_buf(), kind: "symbolic link" })
}

fn ensure_parent(path: &Path) -> Result<(), StoreError> {
    let dir = atomic::parent_dir(path)?;
    fs_err::create_dir_all(&dir).map_err(|e| StoreError::io(Op::EnsureDir, &dir, e))
}

/// Returns a time as nanoseconds since the Unix epoch (0 when the platform has none).
fn epoch_ns(t: std::io::Result<std::time::SystemTime>) -> i64 {
    match t {
        Ok(t) => match t.duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
            Err(e) => i64::try_from(e.duration().as_nanos()).map(|ns| -ns).unwrap_or(i64::MIN),
        },
        Err(_) => 0,
    }
}

/// Returns what [`Storage::stat`] reports for a file's metadata.
pub(crate) fn stat_of(meta: &std::fs::Metadata) -> FileStat {
    let mtime_ns = epoch_ns(meta.modified());
    #[cfg(unix)]
    let identity = {
        use std::os::unix::fs::MetadataExt;
        let ctime_ns = meta.ctime().saturating_mul(1_000_000_000).saturating_add(meta.ctime_nsec());
        FileIdentity { mtime_ns, ctime_ns, ino: meta.ino(), dev: meta.dev() }
    };
    #[cfg(not(unix))]
    let identity = FileIdentity { mtime_ns, ctime_ns: epoch_ns(meta.created()), ino: 0, dev: 0 };
    FileStat {
        size: meta.len(),
        mtime_ms: mtime_ns.div_euclid(1_000_000),
        is_file: meta.is_file(),
        identity: Some(identity),
    }
}

/// Writes `bytes` at the end of `file`; on any failure cuts the file back to its size before.
/// Returns the size of an open file.
fn size_of(file: &fs_err::File, path: &Path) -> Result<u64, StoreError> {
    Ok(file.metadata().map_err(|e| StoreError::io_raw(Op::Append, path, e))?.len())
}

/// Appends `bytes` to `file`, whose size is `before`, cutting it back on failure.
fn append_or_rollback(
    file: &mut fs_err::File,
    path: &Path,
    bytes: &[u8],
    faults: Option<&Faults>,
    before: u64,
) -> Result<(), StoreError> {
    let (allowed, injected) = plan_write(faults, Op::Append, path, bytes.len());
    let mut written = 0;
    let result = loop {
        if written == allowed {
            break injected.map_or(Ok(()), Err);
        }
        match file.write(&bytes[written..allowed]) {
            Ok(0) => break Err(StoreError::short_write(Op::Append, path)),
            Ok(n) => written += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => break Err(StoreError::io_raw(Op::Append, path, e)),
        }
    };
    match result {
        Ok(()) => Ok(()),
        Err(error) => rollback(file, path, before, error),
    }
}

fn rollback(file: &fs_err::File, path: &Path, before: u64, error: StoreError) -> Result<(), StoreError> {
    match file.set_len(before) {
        Ok(()) => Err(error),
        Err(e) => {
            Err(StoreError::RollbackFailed { path: path.to_path_buf(), error: Box::new(error), rollback: Arc::new(e) })
        }
    }
}

fn open_append(path: &Path) -> Result<fs_err::File, StoreError> {
    crate::open::open_regular_with(fs_err::OpenOptions::new().append(true).create(true), path)
        .map_err(|e| StoreError::io(Op::Open, path, e))
}

impl Storage for FileStorage {
    fn ensure_dir(&self, dir: &Path) -> Result<(), StoreError> {
        self.check(Op::EnsureDir, dir)?;
        fs_err::create_dir_all(dir).map_err(|e| StoreError::io(Op::EnsureDir, dir, e))
    }

    fn exists(&self, path: &Path) -> Result<bool, StoreError> {
        self.check(Op::Exists, path)?;
        path.try_exists().map_err(|e| StoreError::io_raw(Op::Exists, path, e))
    }

    fn stat(&self, path: &Path) -> Result<Option<FileStat>, StoreError> {
        self.check(Op::Stat, path)?;
        match fs_err::metadata(path) {
            Ok(m) => Ok(Some(stat_of(&m))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::io_raw(Op::Stat, path, e)),
        }
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>, StoreError> {
        self.check(Op::List, dir)?;
        let entries = match fs_err::read_dir(dir) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::io_raw(Op::List, dir, e)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io_raw(Op::List, dir, e))?;
            let Ok(name) = entry.file_name().into_string() else { continue };
            if name.starts_with('.') {
                continue;
            }
            // Follow symlinks, as a glob does.
            let is_file = fs_err::metadata(entry.path()).map(|m| m.is_file()).unwrap_or(false);
            if is_file {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    fn read_dir(&self, dir: &Path) -> Result<Vec<DirEntry>, StoreError> {
        self.check(Op::List, dir)?;
        let entries = match fs_err::read_dir(dir) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::io_raw(Op::List, dir, e)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io_raw(Op::List, dir, e))?;
            let ft = entry.file_type().map_err(|e| StoreError::io_raw(Op::List, dir, e))?;
            let kind = if ft.is_file() {
                EntryKind::File
            } else if ft.is_dir() {
                EntryKind::Dir
            } else if ft.is_symlink() {
                EntryKind::Symlink
            } else {
                EntryKind::Other
            };
            out.push(DirEntry { name: entry.file_name().to_string_lossy().into_owned(), kind });
        }
        Ok(out)
    }

    fn read(&self, path: &Path) -> Result<Vec<u8>, StoreError> {
        self.check(Op::Read, path)?;
        read_whole(path).map_err(|e| StoreError::io(Op::Read, path, e))
    }

    fn read_into(&self, path: &Path, buf: &mut Vec<u8>) -> Result<(FileStat, usize), StoreError> {
        self.check(Op::Read, path)?;
        let io = |e| StoreError::io(Op::Read, path, e);
        let mut f = crate::open::open_regular(path).map_err(io)?;
        let stat = stat_of(&f.metadata().map_err(io)?);
        let room = grow(buf, usize::try_from(stat.size).map_err(|e| io(std::io::Error::other(e)))?);
        let mut done = 0;
        // No further than the stated size: the read that would only find the end is spared.
        while done < room.len() {
            match f.read(&mut room[done..]) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io(e)),
            }
        }
        Ok((stat, done))
    }

    fn read_slices_into(
        &self,
        path: &Path,
        prefix: u64,
        suffix: u64,
        head: &mut Vec<u8>,
        tail: &mut Vec<u8>,
    ) -> Result<(FileStat, usize, usize), StoreError> {
        self.check(Op::Read, path)?;
        let io = |e| StoreError::io(Op::Read, path, e);
        let mut f = crate::open::open_regular(path).map_err(io)?;
        let stat = stat_of(&f.metadata().map_err(io)?);
        let size = stat.size;
        let p = usize::try_from(prefix.min(size)).map_err(|e| io(std::io::Error::other(e)))?;
        let whole = usize::try_from(size).map_err(|e| io(std::io::Error::other(e)))?;
        if suffix >= size && size > prefix {
            // The tail window is the whole file: one read serves both.
            let all = grow(tail, whole);
            f.read_exact(all).map_err(io)?;
            let (all, head_room) = (&*all, grow(head, p));
            head_room.copy_from_slice(&all[..p]);
            return Ok((stat, p, whole));
        }
        f.read_exact(grow(head, p)).map_err(io)?;
        let s = usize::try_from(suffix.min(size)).unwrap_or(whole);
        if s == 0 {
            return Ok((stat, p, 0));
        }
        if whole == s && s <= p {
            let (head, tail_room) = (&head[..s], grow(tail, s));
            tail_room.copy_from_slice(head);
        } else {
            f.seek(SeekFrom::Start(size - s as u64)).map_err(io)?;
            f.read_exact(grow(tail, s)).map_err(io)?;
        }
        Ok((stat, p, s))
    }

    fn remove_empty_dir(&self, dir: &Path) -> Result<(), StoreError> {
        self.check(Op::RemoveDir, dir)?;
        match fs_err::remove_dir(dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.kind() == std::io::ErrorKind::DirectoryNotEmpty => {
                Ok(())
            }
            Err(e) => Err(StoreError::io_raw(Op::RemoveDir, dir, e)),
        }
    }

    #[cfg(any(unix, windows))]
    fn open_reader(&self, path: &Path) -> Result<(FileStat, Box<dyn ReadAt + Send>), StoreError> {
        self.check(Op::Read, path)?;
        let io = |e| StoreError::io(Op::Read, path, e);
        // Only regular files: a FIFO or a device is refused, never waited on.
        let file = crate::open::open_regular(path).map_err(io)?;
        // The stat of the open descriptor: the very file the reader reads.
        let meta = file.metadata().map_err(io)?;
        Ok((stat_of(&meta), Box::new(PositionalFile(file.into_file()))))
    }

    fn read_slices(&self, path: &Path, prefix: u64, suffix: u64) -> Result<(Vec<u8>, Vec<u8>), StoreError> {
        self.check(Op::Read, path)?;
        let io = |e| StoreError::io(Op::Read, path, e);
        let mut f = crate::open::open_regular(path).map_err(io)?;
        let size = f.metadata().map_err(io)?.len();
        let head_len = prefix.min(size);
        let mut head = Vec::new();
        Read::by_ref(&mut f).take(head_len).read_to_end(&mut head).map_err(io)?;
        let tail = if suffix == 0 {
            Vec::new()
        } else if size <= prefix {
            head[head.len().saturating_sub(usize::try_from(suffix).unwrap_or(usize::MAX))..].to_vec()
        } else {
            f.seek(SeekFrom::Start(size.saturating_sub(suffix))).map_err(io)?;
            let mut tail = Vec::new();
            f.take(suffix).read_to_end(&mut tail).map_err(io)?;
            tail
        };
        Ok((head, tail))
    }

    fn write(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        let mut options = fs_err::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        self.write_with(&options, Op::Write, path, bytes)
    }

    fn write_new(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        let mut options = fs_err::OpenOptions::new();
        options.write(true).create_new(true);
        self.write_with(&options, Op::WriteNew, path, bytes)
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        let done = atomic::write_atomic_with(path, bytes, self.faults.as_ref(), || self.publish_check(path, expected));
        if done.as_ref().map_or_else(|e| e.landed().is_some(), |()| true) {
            lock::bump_generation(path);
        }
        done
    }

    fn write_atomic_stream(
        &self,
        path: &Path,
        expected: ExpectedSize,
        durability: Durability,
        fill: &mut dyn FnMut(&mut dyn crate::Sink) -> std::io::Result<()>,
    ) -> Result<u64, StoreError> {
        if self.faults.is_some() {
            // Injected faults act on whole writes: take the buffered path.
            let buf = crate::storage::collect(path, fill)?;
            self.write_atomic(path, &buf, expected)?;
            return Ok(buf.len() as u64);
        }
        let sync = durability != Durability::None;
        let written = atomic::write_atomic_stream_with(path, fill, sync, atomic::NewFile::LikeTarget, || {
            self.publish_check(path, expected)
        });
        if written.as_ref().map_or_else(|e| e.landed().is_some(), |_| true) {
            lock::bump_generation(path);
        }
        written
    }

    fn overwrite_prefix(
        &self,
        path: &Path,
        bytes: &[u8],
        expected: ExpectedSize,
        durability: Durability,
    ) -> Result<(), StoreError> {
        let _guard = self.publish_check(path, expected)?;
        let io = |e| StoreError::io(Op::Overwrite, path, e);
        // `r+`: the file must exist, and nothing is truncated.
        let f = crate::open::open_regular_with(fs_err::OpenOptions::new().write(true), path).map_err(io)?;
        let size = f.metadata().map_err(io)?.len();
        crate::storage::check_prefix_fits(path, bytes, size)?;
        let (n, injected) = plan_write(self.faults.as_ref(), Op::Overwrite, path, bytes.len());
        write_all_at(f.file(), &bytes[..n], 0).map_err(|e| StoreError::io_raw(Op::Overwrite, path, e))?;
        if let Some(e) = injected {
            return Err(e);
        }
        if durability != Durability::None {
            self.check(Op::SyncData, path)?;
            f.sync_data().map_err(|e| StoreError::io_raw(Op::SyncData, path, e))?;
        }
        Ok(())
    }

    fn append(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        ensure_parent(path)?;
        let _guard = lock::lock_publish(path, self.clock.as_ref(), self.faults.as_ref())?;
        let mut f = open_append(path)?;
        let before = size_of(&f, path)?;
        append_or_rollback(&mut f, path, bytes, self.faults.as_ref(), before)
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<(), StoreError> {
        self.check(Op::Truncate, path)?;
        let f = crate::open::open_regular_with(fs_err::OpenOptions::new().write(true), path)
            .map_err(|e| StoreError::io(Op::Truncate, path, e))?;
        f.set_len(len).map_err(|e| StoreError::io_raw(Op::Truncate, path, e))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        let renamed = atomic::rename_with(from, to, self.faults.as_ref());
        if renamed.is_ok() || renamed.as_ref().is_err_and(|e| e.landed().is_some()) {
            // Both names now name other files, synced or not.
            lock::bump_generation(from);
            lock::bump_generation(to);
        }
        renamed
    }

    fn unlink(&self, path: &Path) -> Result<(), StoreError> {
        self.check(Op::Unlink, path)?;
        fs_err::remove_file(path).map_err(|e| StoreError::io(Op::Unlink, path, e))?;
        lock::bump_generation(path);
        Ok(())
    }

    fn delete_with_artifacts(&self, path: &Path) -> Result<(), StoreError> {
        // Backups first: a crash part-way must not leave a backup that omp's listing
        // would promote into the session just deleted.
        if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
            let parent = atomic::parent_dir(path)?;
            let entries = match fs_err::read_dir(&parent) {
                Ok(entries) => Some(entries),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(StoreError::io_raw(Op::List, &parent, e)),
            };
            for entry in entries.into_iter().flatten() {
                let entry = entry.map_err(|e| StoreError::io_raw(Op::List, &parent, e))?;
                if entry.file_name().to_str().is_some_and(|c| is_backup_of(name, c)) {
                    match self.unlink(&entry.path()) {
                        Ok(()) | Err(StoreError::NotFound { .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        // Then the artifacts: a real directory only. A link in its place is not followed
        // (nor removed: whatever it is, it was not made as this session's artifacts).
        if let Some(dir) = artifacts_dir(path) {
            self.check(Op::RemoveDir, &dir)?;
            match fs_err::symlink_metadata(&dir) {
                Ok(m) if m.is_dir() => match fs_err::remove_dir_all(&dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(StoreError::io_raw(Op::RemoveDir, &dir, e)),
                },
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io_raw(Op::Stat, &dir, e)),
            }
        }
        // The journal last: until it goes, the session is there to delete again.
        match self.unlink(path) {
            Ok(()) | Err(StoreError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn move_dir(&self, from: &Path, to: &Path) -> Result<Vec<(PathBuf, PathBuf)>, StoreError> {
        match fs_err::symlink_metadata(from) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(StoreError::NotAFile { path: from.to_path_buf() }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::io_raw(Op::Stat, from, e)),
        }
        if !to.exists() {
            ensure_parent(to)?;
            self.rename(from, to)?;
            return Ok(vec![(from.to_path_buf(), to.to_path_buf())]);
        }
        let mut moves: Vec<(PathBuf, PathBuf)> = Vec::new();
        let entries = fs_err::read_dir(from).map_err(|e| StoreError::io(Op::List, from, e))?;
        let mut names: Vec<std::ffi::OsString> = Vec::new();
        for entry in entries {
            names.push(entry.map_err(|e| StoreError::io_raw(Op::List, from, e))?.file_name());
        }
        names.sort();
        for name in names {
            let (source, target) = (from.join(&name), to.join(&name));
            if fs_err::symlink_metadata(&target).is_ok() {
                continue;
            }
            if let Err(e) = self.rename(&source, &target) {
                // Undo this call's moves before reporting: all or nothing. A rename that
                // landed without its directory sync is undone too, so the error is the sync's
                // (nothing moved), not a landed one.
                let e = match e {
                    StoreError::NotDurable { source: cause, .. } => {
                        moves.push((source, target));
                        *cause
                    }
                    e => e,
                };
                for (a, b) in moves.iter().rev() {
                    let _ = self.rename(b, a);
                }
                return Err(e);
            }
            moves.push((source, target));
        }
        // Left in place when names clashed (omp leaves them at the source too).
        let _ = fs_err::remove_dir(from);
        Ok(moves)
    }

    /// The atomic write without the publish lock (nothing appends to such a file).
    fn write_immutable(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        atomic::write_atomic_with(path, bytes, self.faults.as_ref(), || Ok(()))
    }

    /// A hard link; where the file system has none, a copy written atomically.
    fn link_or_copy(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        self.check(Op::Link, to)?;
        match fs_err::hard_link(from, to) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(StoreError::AlreadyExists { path: to.to_path_buf() })
            }
            // No hard links here (or no `from`, which the read reports): a copy.
            Err(_) => {
                let bytes = self.read(from)?;
                self.write_new(to, &bytes)
            }
        }
    }

    /// Sets the modification time on the open file (no byte is written), opened without
    /// following a link.
    fn renew(&self, path: &Path) -> Result<(), StoreError> {
        let now =
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(self.clock.now_ms()).unwrap_or(0));
        // A link in the file's place is not followed: its target is not ours to touch.
        let mut options = fs_err::OpenOptions::new();
        options.read(true);
        let file = crate::open::open_no_follow(&mut options, path).map_err(|e| StoreError::io(Op::Write, path, e))?;
        file.file().set_modified(now).map_err(|e| StoreError::io_raw(Op::Write, path, e))
    }

    fn remove_leftovers(&self, dir: &Path) -> Result<usize, StoreError> {
        Ok(atomic::remove_dead_leftovers(dir))
    }

    fn copy_dir(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        match fs_err::symlink_metadata(from) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(StoreError::NotAFile { path: from.to_path_buf() }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StoreError::io_raw(Op::Stat, from, e)),
        }
        self.check(Op::Copy, from)?;
        copy_tree(from, to)?;
        atomic::sync_dir_with(&atomic::parent_dir(to)?, self.faults.as_ref())
    }

    fn open_writer(&self, path: &Path, durability: Durability) -> Result<Box<dyn AppendWriter>, StoreError> {
        self.check(Op::Open, path)?;
        ensure_parent(path)?;
        let lock = lock::lock_for_writer(path, self.clock.as_ref(), self.faults.as_ref())?;
        // A writer killed in this directory may have left a temporary or a lock file.
        atomic::remove_dead_leftovers(&atomic::parent_dir(path)?);
        let existed = path.exists();
        let file = open_append(path)?;
        let ino = inode_of_file(&file);
        Ok(Box::new(FileWriter {
            path: path.to_path_buf(),
            generation: lock::generation(path),
            seen_generation: lock::generation(path).load(std::sync::atomic::Ordering::SeqCst),
            lock,
            size: None,
            file: Some(file),
            ino,
            durability,
            dir_unsynced: !existed,
            storage: self.clone(),
            failed: None,
        }))
    }

    fn lock(&self, path: &Path, wait: LockWait) -> Result<SessionLock, StoreError> {
        lock::lock_explicit(path, wait, &self.clock, self.faults.as_ref())
    }

    /// Polls the file's stat ([`PollWatch`]): no watch of the operating system, which
    /// would need a dependency per platform and still miss writes over a network file
    /// system.
    fn watch(&self, path: &Path) -> Result<Option<Box<dyn Watch>>, StoreError> {
        Ok(Some(Box::new(PollWatch::new(self.clone(), path)?)))
    }
}

#[cfg(unix)]
fn inode_of_file(file: &fs_err::File) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    file.metadata().ok().map(|m| m.ino())
}

#[cfg(unix)]
fn inode_of_path(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    fs_err::metadata(path).ok().map(|m| m.ino())
}

#[cfg(not(unix))]
fn inode_of_file(_file: &fs_err::File) -> Option<u64> {
    None
}

#[cfg(not(unix))]
fn inode_of_path(path: &Path) -> Option<u64> {
    path.exists().then_some(0)
}

struct FileWriter {
    path: PathBuf,
    /// The session's locks, held for the writer's life (`None` when this process held them
    /// already, e.g. through [`Storage::lock`]).
    lock: Option<lock::FileLockGuard>,
    /// Bumped when this process replaces the file; other processes cannot while we hold the lock.
    generation: Arc<std::sync::atomic::AtomicU64>,
    seen_generation: u64,
    /// The file's size after our last append (`None`: ask the file).
    size: Option<u64>,
    file: Option<fs_err::File>,
    ino: Option<u64>,
    durability: Durability,
    dir_unsynced: bool,
    storage: FileStorage,
    failed: Option<StoreError>,
}

impl FileWriter {
    fn latch(&mut self, e: StoreError) -> StoreError {
        self.failed.get_or_insert(e).clone()
    }

    fn faults(&self) -> Option<&Faults> {
        self.storage.faults.as_ref()
    }

    /// Reopens the path when someone renamed another file over it (or removed it).
    /// Makes sure the writer's descriptor is the path's current file; returns whether
    /// it had to (re)open it.
    fn current_file(&mut self) -> Result<bool, StoreError> {
        let stale = match (&self.file, self.ino) {
            (None, _) => true,
            // While we hold the lock only this process can replace the file, and it says so.
            (Some(_), _) if self.lock.is_some() => {
                let now = self.generation.load(std::sync::atomic::Ordering::SeqCst);
                std::mem::replace(&mut self.seen_generation, now) != now
            }
            (Some(_), ino) => inode_of_path(&self.path) != ino || ino.is_none() && !self.path.exists(),
        };
        if stale {
            let existed = self.path.exists();
            let file = open_append(&self.path)?;
            self.ino = inode_of_file(&file);
            self.dir_unsynced |= !existed;
            self.file = Some(file);
        }
        Ok(stale)
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        if let Some(f) = self.faults() {
            f.check(Op::SyncData, &self.path)?;
        }
        let file = self.file.as_ref().ok_or_else(|| StoreError::Closed { path: self.path.clone() })?;
        file.sync_data().map_err(|e| StoreError::io_raw(Op::SyncData, &self.path, e))?;
        if self.dir_unsynced {
            atomic::sync_dir_with(&atomic::parent_dir(&self.path)?, self.faults())?;
            self.dir_unsynced = false;
        }
        Ok(())
    }

    fn append_locked(&mut self, line: &[u8]) -> Result<(), StoreError> {
        let _guard = match self.lock {
            Some(_) => None,
            None => lock::lock_publish(&self.path, self.storage.clock.as_ref(), self.faults())?,
        };
        let reopened = self.current_file()?;
        let file = self.file.as_mut().ok_or_else(|| StoreError::Closed { path: self.path.clone() })?;
        // While we hold the lock nobody else appends: the size we track is the file's.
        let before = match self.size {
            Some(size) if self.lock.is_some() && !reopened => size,
            _ => size_of(file, &self.path)?,
        };
        self.size = None;
        append_or_rollback(file, &self.path, line, self.storage.faults.as_ref(), before)?;
        if self.durability == Durability::Fsync
            && let Err(e) = self.sync()
        {
            // The caller is told the line failed, so it must not stay in the file.
            let file = self.file.as_ref().ok_or_else(|| StoreError::Closed { path: self.path.clone() })?;
            return rollback(file, &self.path, before, e);
        }
        self.size = Some(before + line.len() as u64);
        Ok(())
    }
}

impl AppendWriter for FileWriter {
    fn append(&mut self, line: &[u8]) -> Result<(), StoreError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        self.append_locked(line).map_err(|e| self.latch(e))
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.durability == Durability::None || self.file.is_none() {
            return Ok(());
        }
        self.sync().map_err(|e| self.latch(e))
    }

    fn error(&self) -> Option<&StoreError> {
        self.failed.as_ref()
    }

    fn close(mut self: Box<Self>) -> Result<(), StoreError> {
        let flushed = self.flush();
        self.file = None;
        let released = self.lock.take().map_or(Ok(()), lock::FileLockGuard::release);
        flushed.and(released)
    }
}
