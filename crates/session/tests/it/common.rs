//! What several modules of these tests share.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde_json::{Value, json};
use session::model::ReadAt;
use session::store::{
    AppendWriter, DirEntry, Durability, ExpectedSize, FileStat, FileStorage, LockWait, SessionLock, Sink, Storage,
    StoreError,
};
use session::{Env, SessionManager};

/// What a test returns: any error fails it.
pub(crate) type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The tests' user message (`userMsg`).
pub(crate) fn user(text: &str) -> Value {
    json!({"role": "user", "content": text, "timestamp": 1})
}

/// The texts of the entries `m` holds, in order.
pub(crate) fn texts(m: &SessionManager) -> Vec<String> {
    m.tree().entries().iter().map(|r| r.text().to_owned()).collect()
}

/// Real files, with `dir` as the process's working folder.
pub(crate) fn env_in(dir: &Path) -> Env {
    Env::bare(Arc::new(FileStorage::new())).with_process_cwd(dir)
}

/// Writes the file `path`, its folder made first.
pub(crate) fn put(path: &Path, bytes: impl AsRef<[u8]>) -> std::io::Result<()> {
    fs_err::create_dir_all(path.parent().ok_or_else(|| std::io::Error::other("no folder"))?)?;
    fs_err::write(path, bytes)
}

/// Appends `text` to the existing file `path`.
pub(crate) fn append(path: &Path, text: &str) -> std::io::Result<()> {
    fs_err::OpenOptions::new().append(true).open(path)?.write_all(text.as_bytes())
}

/// A file storage that counts reads of whole files and listings with sizes; (with a
/// `line`) the first time a session file is written conditionally has another writer
/// append `line` to it first, so the write finds another size; and (with a `on_copy`)
/// does something before each run a streamed write copies from another file
/// ([`session::store::Sink::copy_from`]), which may fail the copy.
#[derive(Default)]
pub(crate) struct Racing {
    pub(crate) inner: FileStorage,
    pub(crate) line: String,
    pub(crate) fired: AtomicBool,
    pub(crate) reads: AtomicUsize,
    pub(crate) listings: AtomicUsize,
    pub(crate) on_copy: Option<CopyHook>,
    pub(crate) copies: AtomicUsize,
    /// While set, every read through a reader `open_reader` gave fails (a disk that
    /// stopped answering); the kernel's copies from it do not.
    pub(crate) fail_reads: Arc<AtomicBool>,
}

/// A reader of [`Racing`]'s that fails while its storage's `fail_reads` is set.
struct FailingReader {
    inner: Box<dyn ReadAt + Send>,
    fail: Arc<AtomicBool>,
}

impl ReadAt for FailingReader {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(std::io::Error::other("the disk stopped answering"));
        }
        self.inner.read_at(buf, offset)
    }
    fn stamp(&self) -> Option<u128> {
        self.inner.stamp()
    }
    fn fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.inner.fd()
    }
}

type StoreResult<T> = std::result::Result<T, StoreError>;

/// What [`Racing`] does before a copy.
pub(crate) type CopyHook = Box<dyn Fn() -> std::io::Result<()> + Send + Sync>;

/// The sink of [`Racing`]'s streamed writes: runs its `on_copy` before each copy.
struct RacingSink<'a> {
    inner: &'a mut dyn Sink,
    storage: &'a Racing,
}

impl std::io::Write for RacingSink<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl Sink for RacingSink<'_> {
    fn copy_from(&mut self, source: &dyn ReadAt, at: u64, len: u64) -> std::io::Result<()> {
        self.storage.copies.fetch_add(1, Ordering::SeqCst);
        if let Some(hook) = &self.storage.on_copy {
            hook()?;
        }
        self.inner.copy_from(source, at, len)
    }
}

impl Racing {
    fn race(&self, path: &Path) -> StoreResult<()> {
        if !self.line.is_empty()
            && path.extension().is_some_and(|e| e == "jsonl")
            && !self.fired.swap(true, Ordering::SeqCst)
        {
            self.inner.append(path, self.line.as_bytes())?;
        }
        Ok(())
    }
}

impl Storage for Racing {
    fn ensure_dir(&self, dir: &Path) -> StoreResult<()> {
        self.inner.ensure_dir(dir)
    }
    fn exists(&self, path: &Path) -> StoreResult<bool> {
        self.inner.exists(path)
    }
    fn stat(&self, path: &Path) -> StoreResult<Option<FileStat>> {
        self.inner.stat(path)
    }
    fn list(&self, dir: &Path) -> StoreResult<Vec<String>> {
        self.inner.list(dir)
    }
    fn read_dir(&self, dir: &Path) -> StoreResult<Vec<DirEntry>> {
        self.inner.read_dir(dir)
    }
    fn read(&self, path: &Path) -> StoreResult<Vec<u8>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read(path)
    }
    fn read_into(&self, path: &Path, buf: &mut Vec<u8>) -> StoreResult<(FileStat, usize)> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read_into(path, buf)
    }
    fn list_stats(&self, dir: &Path) -> StoreResult<Vec<(String, FileStat)>> {
        self.listings.fetch_add(1, Ordering::SeqCst);
        self.inner.list_stats(dir)
    }
    fn read_slices(&self, path: &Path, prefix: u64, suffix: u64) -> StoreResult<(Vec<u8>, Vec<u8>)> {
        self.inner.read_slices(path, prefix, suffix)
    }
    fn write(&self, path: &Path, bytes: &[u8]) -> StoreResult<()> {
        self.inner.write(path, bytes)
    }
    fn write_new(&self, path: &Path, bytes: &[u8]) -> StoreResult<()> {
        self.inner.write_new(path, bytes)
    }
    fn write_atomic(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> StoreResult<()> {
        self.race(path)?;
        self.inner.write_atomic(path, bytes, expected)
    }
    fn append(&self, path: &Path, bytes: &[u8]) -> StoreResult<()> {
        self.inner.append(path, bytes)
    }
    fn append_expected(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> StoreResult<()> {
        self.race(path)?;
        self.inner.append_expected(path, bytes, expected)
    }
    fn truncate(&self, path: &Path, len: u64) -> StoreResult<()> {
        self.inner.truncate(path, len)
    }
    fn rename(&self, from: &Path, to: &Path) -> StoreResult<()> {
        self.inner.rename(from, to)
    }
    fn unlink(&self, path: &Path) -> StoreResult<()> {
        self.inner.unlink(path)
    }
    fn remove_empty_dir(&self, dir: &Path) -> StoreResult<()> {
        self.inner.remove_empty_dir(dir)
    }
    fn delete_with_artifacts(&self, path: &Path) -> StoreResult<()> {
        self.inner.delete_with_artifacts(path)
    }
    fn open_writer(&self, path: &Path, durability: Durability) -> StoreResult<Box<dyn AppendWriter>> {
        self.inner.open_writer(path, durability)
    }
    fn lock(&self, path: &Path, wait: LockWait) -> StoreResult<SessionLock> {
        self.inner.lock(path, wait)
    }
    fn open_reader(&self, path: &Path) -> StoreResult<(FileStat, Box<dyn ReadAt + Send>)> {
        let (st, inner) = self.inner.open_reader(path)?;
        Ok((st, Box::new(FailingReader { inner, fail: Arc::clone(&self.fail_reads) })))
    }
    fn write_atomic_stream(
        &self,
        path: &Path,
        expected: ExpectedSize,
        durability: Durability,
        fill: &mut dyn FnMut(&mut dyn Sink) -> std::io::Result<()>,
    ) -> StoreResult<u64> {
        self.inner
            .write_atomic_stream(path, expected, durability, &mut |w| fill(&mut RacingSink { inner: w, storage: self }))
    }
}
