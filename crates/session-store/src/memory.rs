//! [`MemoryStorage`]: session files in a map, for tests and in-memory sessions.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crate::clock::{Clock, SystemClock};
use crate::error::{Op, StoreError};
use crate::storage::{
    AppendWriter, DirEntry, Durability, EntryKind, ExpectedSize, FileStat, LockWait, PollWatch, SessionLock, Storage,
    Watch, artifacts_dir, is_backup_of, slice_windows,
};

#[derive(Debug)]
struct MemFile {
    data: Vec<u8>,
    mtime_ms: i64,
    /// How many leading bytes would survive a power loss.
    synced: usize,
}

#[derive(Debug, Default)]
struct State {
    files: BTreeMap<PathBuf, MemFile>,
    dirs: BTreeMap<PathBuf, i64>,
    locks: HashSet<PathBuf>,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    clock: Arc<dyn Clock>,
}

/// Session files kept in memory, with mtimes from an injectable [`Clock`].
///
/// Behaves like [`FileStorage`](crate::FileStorage) under the shared contract tests (directories
/// are implied by the files in them). It also tracks, per file, how many bytes have been synced,
/// so [`MemoryStorage::power_loss`] can model what a machine crash leaves behind. Clones share
/// the same files.
#[derive(Clone, Debug)]
pub struct MemoryStorage {
    inner: Arc<Inner>,
}

impl Default for MemoryStorage {
    fn default() -> MemoryStorage {
        MemoryStorage::new()
    }
}

impl MemoryStorage {
    /// Returns an empty storage using the system clock for mtimes.
    pub fn new() -> MemoryStorage {
        MemoryStorage::with_clock(Arc::new(SystemClock))
    }

    /// Returns an empty storage using `clock` for mtimes.
    pub fn with_clock(clock: Arc<dyn Clock>) -> MemoryStorage {
        MemoryStorage { inner: Arc::new(Inner { state: Mutex::new(State::default()), clock }) }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every mutation below completes before it can panic, so a poisoned map is still consistent.
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now(&self) -> i64 {
        self.inner.clock.now_ms()
    }

    /// Drops every byte that was not synced, as a power loss would.
    ///
    /// Synced bytes are those of atomic replaces (except a [`Storage::write_atomic_stream`] with
    /// [`Durability::None`]), renames, and appends made durable by a writer's [`Durability`]. A
    /// file that was only written without sync survives as an empty file.
    pub fn power_loss(&self) {
        let mut st = self.state();
        for f in st.files.values_mut() {
            f.data.truncate(f.synced);
        }
    }

    /// Returns an independent copy of every file (with how much of it is synced) and
    /// directory, sharing the clock; locks are not copied. A test can check the copy
    /// (possibly writing to it) and still simulate a power loss on the original.
    pub fn snapshot(&self) -> MemoryStorage {
        let st = self.state();
        let files = st
            .files
            .iter()
            .map(|(p, f)| (p.clone(), MemFile { data: f.data.clone(), mtime_ms: f.mtime_ms, synced: f.synced }))
            .collect();
        let state = State { files, dirs: st.dirs.clone(), locks: HashSet::new() };
        MemoryStorage { inner: Arc::new(Inner { state: Mutex::new(state), clock: self.inner.clock.clone() }) }
    }

    /// Returns the path of every file, dot-files included (which [`Storage::list`] skips),
    /// sorted: a test can check that nothing was left behind.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.state().files.keys().cloned().collect()
    }

    /// Returns how many bytes of `path` would survive a power loss, or `None` when it is missing.
    pub fn synced_len(&self, path: &Path) -> Option<usize> {
        self.state().files.get(path).map(|f| f.synced)
    }
}

impl State {
    fn add_dirs(&mut self, dir: &Path, now: i64) {
        for d in dir.ancestors() {
            if d.as_os_str().is_empty() {
                break;
            }
            self.dirs.entry(d.to_path_buf()).or_insert(now);
        }
    }

    /// Moves every file and directory at or under `from` to the same place under `to`.
    fn move_tree(&mut self, from: &Path, to: &Path, now: i64) {
        let files: Vec<PathBuf> = self.files.keys().filter(|p| p.starts_with(from)).cloned().collect();
        for p in files {
            if let Some(f) = self.files.remove(&p) {
                self.files.insert(rebase(&p, from, to), f);
            }
        }
        let dirs: Vec<PathBuf> = self.dirs.keys().filter(|p| p.starts_with(from)).cloned().collect();
        for d in dirs {
            if let Some(t) = self.dirs.remove(&d) {
                self.dirs.insert(rebase(&d, from, to), t);
            }
        }
        self.add_dirs(to, now);
    }

    fn put(&mut self, path: &Path, data: Vec<u8>, synced: usize, now: i64) {
        if let Some(parent) = path.parent() {
            self.add_dirs(parent, now);
        }
        self.files.insert(path.to_path_buf(), MemFile { data, mtime_ms: now, synced });
    }
}

/// Returns `path` (at or under `from`) moved under `to`.
fn rebase(path: &Path, from: &Path, to: &Path) -> PathBuf {
    match path.strip_prefix(from) {
        Ok(rest) if rest.as_os_str().is_empty() => to.to_path_buf(),
        Ok(rest) => to.join(rest),
        Err(_) => path.to_path_buf(),
    }
}

fn require_file(path: &Path) -> Result<(), StoreError> {
    match path.file_name() {
        Some(_) => Ok(()),
        None => Err(StoreError::NotAFile { path: path.to_path_buf() }),
    }
}

impl Storage for MemoryStorage {
    fn ensure_dir(&self, dir: &Path) -> Result<(), StoreError> {
        let now = self.now();
        let mut st = self.state();
        if st.files.contains_key(dir) {
            let err = std::io::Error::new(std::io::ErrorKind::AlreadyExists, "a file is in the way");
            return Err(StoreError::io_raw(Op::EnsureDir, dir, err));
        }
        st.add_dirs(dir, now);
        Ok(())
    }

    fn exists(&self, path: &Path) -> Result<bool, StoreError> {
        let st = self.state();
        Ok(st.files.contains_key(path) || st.dirs.contains_key(path))
    }

    fn stat(&self, path: &Path) -> Result<Option<FileStat>, StoreError> {
        let st = self.state();
        if let Some(f) = st.files.get(path) {
            return Ok(Some(FileStat::new(f.data.len() as u64, f.mtime_ms, true)));
        }
        Ok(st.dirs.get(path).map(|&mtime_ms| FileStat::new(0, mtime_ms, false)))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>, StoreError> {
        let st = self.state();
        let mut names: Vec<String> = st
            .files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        Ok(names)
    }

    fn read_dir(&self, dir: &Path) -> Result<Vec<DirEntry>, StoreError> {
        let st = self.state();
        let child =
            |p: &PathBuf| (p.parent() == Some(dir)).then(|| p.file_name()?.to_str().map(str::to_owned)).flatten();
        let files = st.files.keys().filter_map(child).map(|name| DirEntry { name, kind: EntryKind::File });
        let dirs = st.dirs.keys().filter_map(child).map(|name| DirEntry { name, kind: EntryKind::Dir });
        Ok(files.chain(dirs).collect())
    }

    fn remove_empty_dir(&self, dir: &Path) -> Result<(), StoreError> {
        let mut st = self.state();
        let occupied = st.files.keys().chain(st.dirs.keys()).any(|p| p.parent() == Some(dir));
        if !occupied {
            st.dirs.remove(dir);
        }
        Ok(())
    }

    fn read(&self, path: &Path) -> Result<Vec<u8>, StoreError> {
        let st = self.state();
        st.files.get(path).map(|f| f.data.clone()).ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })
    }

    fn read_slices(&self, path: &Path, prefix: u64, suffix: u64) -> Result<(Vec<u8>, Vec<u8>), StoreError> {
        let st = self.state();
        let f = st.files.get(path).ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })?;
        Ok(slice_windows(&f.data, prefix, suffix))
    }

    fn write(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        require_file(path)?;
        let now = self.now();
        // Truncate-then-write: after a power loss nothing of either version is guaranteed.
        self.state().put(path, bytes.to_vec(), 0, now);
        Ok(())
    }

    fn write_new(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        require_file(path)?;
        let now = self.now();
        let mut st = self.state();
        if st.files.contains_key(path) || st.dirs.contains_key(path) {
            return Err(StoreError::AlreadyExists { path: path.to_path_buf() });
        }
        st.put(path, bytes.to_vec(), 0, now);
        Ok(())
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        require_file(path)?;
        let now = self.now();
        let mut st = self.state();
        let found = st.files.get(path).map(|f| f.data.len() as u64);
        expected.check(path, found)?;
        st.put(path, bytes.to_vec(), bytes.len(), now);
        Ok(())
    }

    fn write_atomic_stream(
        &self,
        path: &Path,
        expected: ExpectedSize,
        durability: Durability,
        fill: &mut dyn FnMut(&mut dyn crate::Sink) -> std::io::Result<()>,
    ) -> Result<u64, StoreError> {
        require_file(path)?;
        let bytes = crate::storage::collect(path, fill)?;
        let now = self.now();
        let mut st = self.state();
        let found = st.files.get(path).map(|f| f.data.len() as u64);
        expected.check(path, found)?;
        // Unsynced (`Durability::None`), the file may be empty after a power loss: readers saw
        // it whole, the disk may never have held its data.
        let synced = if durability == Durability::None { 0 } else { bytes.len() };
        let len = bytes.len() as u64;
        st.put(path, bytes, synced, now);
        Ok(len)
    }

    fn overwrite_prefix(
        &self,
        path: &Path,
        bytes: &[u8],
        expected: ExpectedSize,
        durability: Durability,
    ) -> Result<(), StoreError> {
        let _ = durability;
        let now = self.now();
        let mut st = self.state();
        let found = st.files.get(path).map(|f| f.data.len() as u64);
        expected.check(path, found)?;
        let Some(f) = st.files.get_mut(path) else {
            return Err(StoreError::NotFound { path: path.to_path_buf() });
        };
        crate::storage::check_prefix_fits(path, bytes, f.data.len() as u64)?;
        // The power-loss model keeps a synced prefix of the current bytes; it cannot keep
        // old bytes under new ones, so an overwrite counts as surviving either way.
        f.data[..bytes.len()].copy_from_slice(bytes);
        f.mtime_ms = now;
        Ok(())
    }

    fn append(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        require_file(path)?;
        let now = self.now();
        let mut st = self.state();
        match st.files.get_mut(path) {
            Some(f) => {
                f.data.extend_from_slice(bytes);
                f.mtime_ms = now;
            }
            None => st.put(path, bytes.to_vec(), 0, now),
        }
        Ok(())
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<(), StoreError> {
        let now = self.now();
        let mut st = self.state();
        let f = st.files.get_mut(path).ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })?;
        let len = usize::try_from(len).map_err(|_| {
            StoreError::io_raw(Op::Truncate, path, std::io::Error::other("length does not fit in memory"))
        })?;
        f.data.resize(len, 0);
        f.synced = f.synced.min(len);
        f.mtime_ms = now;
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        require_file(to)?;
        let now = self.now();
        let mut st = self.state();
        if !st.files.contains_key(from) && st.dirs.contains_key(from) {
            st.move_tree(from, to, now);
            return Ok(());
        }
        let f = st.files.remove(from).ok_or_else(|| StoreError::NotFound { path: from.to_path_buf() })?;
        if let Some(parent) = to.parent() {
            st.add_dirs(parent, now);
        }
        st.files.insert(to.to_path_buf(), f);
        Ok(())
    }

    fn move_dir(&self, from: &Path, to: &Path) -> Result<Vec<(PathBuf, PathBuf)>, StoreError> {
        require_file(to)?;
        let now = self.now();
        let mut st = self.state();
        if !st.dirs.contains_key(from) {
            return Ok(Vec::new());
        }
        if st.files.contains_key(to) {
            let err = std::io::Error::new(std::io::ErrorKind::AlreadyExists, "a file is in the way");
            return Err(StoreError::io_raw(Op::Rename, to, err));
        }
        if !st.dirs.contains_key(to) {
            st.move_tree(from, to, now);
            return Ok(vec![(from.to_path_buf(), to.to_path_buf())]);
        }
        let children: std::collections::BTreeSet<PathBuf> =
            st.files.keys().chain(st.dirs.keys()).filter(|p| p.parent() == Some(from)).cloned().collect();
        let mut moves = Vec::new();
        for child in children {
            let Some(name) = child.file_name() else { continue };
            let target = to.join(name);
            if st.files.contains_key(&target) || st.dirs.contains_key(&target) {
                continue;
            }
            st.move_tree(&child, &target, now);
            moves.push((child, target));
        }
        let empty = !st.files.keys().chain(st.dirs.keys()).any(|p| p != from && p.starts_with(from));
        if empty {
            st.dirs.remove(from);
        }
        Ok(moves)
    }

    fn copy_dir(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        require_file(to)?;
        let now = self.now();
        let mut st = self.state();
        if !st.dirs.contains_key(from) {
            return Ok(());
        }
        let dirs: Vec<PathBuf> = st.dirs.keys().filter(|p| p.starts_with(from)).cloned().collect();
        for d in dirs {
            let target = rebase(&d, from, to);
            st.add_dirs(&target, now);
        }
        let files: Vec<(PathBuf, Vec<u8>)> =
            st.files.iter().filter(|(p, _)| p.starts_with(from)).map(|(p, f)| (p.clone(), f.data.clone())).collect();
        for (p, data) in files {
            let target = rebase(&p, from, to);
            let len = data.len();
            st.put(&target, data, len, now);
        }
        Ok(())
    }

    fn unlink(&self, path: &Path) -> Result<(), StoreError> {
        match self.state().files.remove(path) {
            Some(_) => Ok(()),
            None => Err(StoreError::NotFound { path: path.to_path_buf() }),
        }
    }

    fn delete_with_artifacts(&self, path: &Path) -> Result<(), StoreError> {
        let mut st = self.state();
        st.files.remove(path);
        if let Some(dir) = artifacts_dir(path) {
            st.files.retain(|p, _| !p.starts_with(&dir));
            st.dirs.retain(|p, _| !p.starts_with(&dir));
        }
        if let (Some(name), Some(parent)) = (path.file_name().and_then(|n| n.to_str()), path.parent()) {
            st.files.retain(|p, _| {
                let sibling = p.parent() == Some(parent);
                !(sibling && p.file_name().and_then(|n| n.to_str()).is_some_and(|c| is_backup_of(name, c)))
            });
        }
        Ok(())
    }

    fn open_writer(&self, path: &Path, durability: Durability) -> Result<Box<dyn AppendWriter>, StoreError> {
        require_file(path)?;
        let now = self.now();
        {
            let mut st = self.state();
            if !st.files.contains_key(path) {
                st.put(path, Vec::new(), 0, now);
            }
        }
        Ok(Box::new(MemWriter { storage: self.clone(), path: path.to_path_buf(), durability, failed: None }))
    }

    fn lock(&self, path: &Path, wait: LockWait) -> Result<SessionLock, StoreError> {
        let deadline = match wait {
            LockWait::NoWait => None,
            LockWait::Timeout(d) => Some(Instant::now() + d),
        };
        loop {
            if self.state().locks.insert(path.to_path_buf()) {
                break;
            }
            if deadline.is_none_or(|d| Instant::now() >= d) {
                return Err(StoreError::Locked { path: path.to_path_buf() });
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let storage = self.clone();
        let key = path.to_path_buf();
        Ok(SessionLock::new(
            path,
            Box::new(move || {
                storage.state().locks.remove(&key);
                Ok(())
            }),
        ))
    }

    /// Polls the file's stat ([`PollWatch`]).
    fn watch(&self, path: &Path) -> Result<Option<Box<dyn Watch>>, StoreError> {
        Ok(Some(Box::new(PollWatch::new(self.clone(), path)?)))
    }
}

struct MemWriter {
    storage: MemoryStorage,
    path: PathBuf,
    durability: Durability,
    failed: Option<StoreError>,
}

impl MemWriter {
    fn mark_synced(&self) {
        if let Some(f) = self.storage.state().files.get_mut(&self.path) {
            f.synced = f.data.len();
        }
    }
}

impl AppendWriter for MemWriter {
    fn append(&mut self, line: &[u8]) -> Result<(), StoreError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if let Err(e) = self.storage.append(&self.path, line) {
            return Err(self.failed.get_or_insert(e).clone());
        }
        if self.durability == Durability::Fsync {
            self.mark_synced();
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.durability != Durability::None {
            self.mark_synced();
        }
        Ok(())
    }

    fn error(&self) -> Option<&StoreError> {
        self.failed.as_ref()
    }

    fn close(mut self: Box<Self>) -> Result<(), StoreError> {
        self.flush()
    }
}
