//! Fault injection for tests: a shared [`Faults`] plan and the [`FaultStorage`] wrapper.
//!
//! A [`Faults`] plan says which operations fail next: a full disk (`ENOSPC` once a byte budget is
//! used up, after writing the part that fits), failing renames, failing syncs, short writes, or
//! any [`Op`] failing outright. The same plan drives two mechanisms:
//!
//! * [`FileStorage::with_faults`](crate::FileStorage::with_faults) consults it inside the real
//!   code paths (temporary file writes, `sync_data`, rename, directory sync, appends), so tests
//!   exercise the real clean-up and roll-back logic;
//! * [`FaultStorage`] wraps any [`Storage`] at the trait level, modelling what each operation's
//!   contract allows on failure (a plain write leaves a prefix, an append leaves nothing, an
//!   atomic replace leaves the old file).
//!
//! Power loss is simulated by [`MemoryStorage::power_loss`](crate::MemoryStorage::power_loss).

use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Op, StoreError};
use crate::storage::{AppendWriter, Durability, ExpectedSize, FileStat, LockWait, SessionLock, Storage};

#[derive(Debug, Default)]
struct Plan {
    disk_free: Option<u64>,
    fail_renames: u32,
    fail_syncs: u32,
    short_write: Option<usize>,
    fail_ops: Vec<(Op, u32)>,
    injected: u64,
}

/// A shared, mutable fault plan; clones share the same plan.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    plan: Arc<Mutex<Plan>>,
}

/// How much of a data write a fault plan lets through.
#[derive(Debug)]
pub(crate) enum WriteVerdict {
    /// Write everything.
    All,
    /// Write this many bytes, then report the error (`None`: report a short write).
    Partial(usize, Option<StoreError>),
}

impl Faults {
    /// Returns an empty plan (nothing fails).
    pub fn new() -> Faults {
        Faults::default()
    }

    fn plan(&self) -> MutexGuard<'_, Plan> {
        // A panic while holding the plan cannot leave it inconsistent (plain counters).
        self.plan.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lets `bytes` more bytes be written, then fails data writes with `ENOSPC` (full disk).
    pub fn disk_full_after(&self, bytes: u64) {
        self.plan().disk_free = Some(bytes);
    }

    /// Makes the next `n` renames fail (`u32::MAX`: all of them).
    pub fn fail_renames(&self, n: u32) {
        self.plan().fail_renames = n;
    }

    /// Makes the next `n` file or directory syncs fail with an IO error.
    pub fn fail_syncs(&self, n: u32) {
        self.plan().fail_syncs = n;
    }

    /// Makes the next data write store only `accept` bytes and then report a short write.
    pub fn short_write_next(&self, accept: usize) {
        self.plan().short_write = Some(accept);
    }

    /// Makes the next `n` operations of kind `op` fail with [`StoreError::Injected`].
    pub fn fail_next(&self, op: Op, n: u32) {
        self.plan().fail_ops.push((op, n));
    }

    /// Removes every planned fault.
    pub fn clear(&self) {
        let mut p = self.plan();
        let injected = p.injected;
        *p = Plan { injected, ..Plan::default() };
    }

    /// Returns how many faults have fired so far.
    pub fn injected(&self) -> u64 {
        self.plan().injected
    }

    /// Fails when the plan says `op` on `path` fails now.
    pub(crate) fn check(&self, op: Op, path: &Path) -> Result<(), StoreError> {
        let mut p = self.plan();
        if let Some(slot) = p.fail_ops.iter_mut().find(|(o, n)| *o == op && *n > 0) {
            slot.1 -= 1;
            p.injected += 1;
            return Err(StoreError::Injected { op, path: path.to_path_buf() });
        }
        let counter = match op {
            Op::Rename => Some(&mut p.fail_renames),
            Op::SyncData | Op::SyncDir => Some(&mut p.fail_syncs),
            _ => None,
        };
        if let Some(c) = counter
            && *c > 0
        {
            if *c != u32::MAX {
                *c -= 1;
            }
            p.injected += 1;
            let err = io::Error::other(format!("injected {op} failure"));
            return Err(StoreError::io_raw(op, path, err));
        }
        Ok(())
    }

    /// Decides how much of a `len`-byte data write goes through and consumes the disk budget.
    pub(crate) fn on_write(&self, op: Op, path: &Path, len: usize) -> WriteVerdict {
        if let Err(e) = self.check(op, path) {
            return WriteVerdict::Partial(0, Some(e));
        }
        let mut p = self.plan();
        if let Some(accept) = p.short_write.take() {
            p.injected += 1;
            return WriteVerdict::Partial(accept.min(len), None);
        }
        if let Some(free) = p.disk_free.as_mut() {
            let len64 = len as u64;
            if len64 > *free {
                let fits = usize::try_from(*free).unwrap_or(usize::MAX).min(len);
                *free = 0;
                p.injected += 1;
                let err = io::Error::new(io::ErrorKind::StorageFull, "no space left on device");
                return WriteVerdict::Partial(fits, Some(StoreError::io_raw(op, path, err)));
            }
            *free -= len64;
        }
        WriteVerdict::All
    }
}

/// Applies a fault plan (if any) to a data write: returns the number of bytes to write and the
/// error to report after writing them.
pub(crate) fn plan_write(faults: Option<&Faults>, op: Op, path: &Path, len: usize) -> (usize, Option<StoreError>) {
    match faults.map(|f| f.on_write(op, path, len)) {
        None | Some(WriteVerdict::All) => (len, None),
        Some(WriteVerdict::Partial(n, err)) => {
            let err = err.unwrap_or_else(|| short_write_error(op, path));
            (n, Some(err))
        }
    }
}

/// The error reported when a write stores fewer bytes than asked.
pub(crate) fn short_write_error(op: Op, path: &Path) -> StoreError {
    StoreError::io_raw(op, path, io::Error::new(io::ErrorKind::WriteZero, "short write"))
}

/// A [`Storage`] wrapper that fails operations as a [`Faults`] plan says; for tests.
///
/// Failures model each operation's contract: a plain [`Storage::write`] or
/// [`Storage::write_new`] stores the prefix that fits, an append (plain or through a writer)
/// stores nothing, an atomic replace leaves the old file untouched. With an empty plan it behaves
/// exactly like the wrapped storage.
#[derive(Debug)]
pub struct FaultStorage<S> {
    inner: S,
    faults: Faults,
}

impl<S: Storage> FaultStorage<S> {
    /// Wraps `inner`, failing as `faults` says.
    pub fn new(inner: S, faults: Faults) -> FaultStorage<S> {
        FaultStorage { inner, faults }
    }

    /// Returns the wrapped storage.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Returns the fault plan.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }
}

impl<S: Storage> Storage for FaultStorage<S> {
    fn ensure_dir(&self, dir: &Path) -> Result<(), StoreError> {
        self.faults.check(Op::EnsureDir, dir)?;
        self.inner.ensure_dir(dir)
    }

    fn exists(&self, path: &Path) -> Result<bool, StoreError> {
        self.faults.check(Op::Exists, path)?;
        self.inner.exists(path)
    }

    fn stat(&self, path: &Path) -> Result<Option<FileStat>, StoreError> {
        self.faults.check(Op::Stat, path)?;
        self.inner.stat(path)
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>, StoreError> {
        self.faults.check(Op::List, dir)?;
        self.inner.list(dir)
    }

    fn read(&self, path: &Path) -> Result<Vec<u8>, StoreError> {
        self.faults.check(Op::Read, path)?;
        self.inner.read(path)
    }

    fn read_slices(&self, path: &Path, prefix: u64, suffix: u64) -> Result<(Vec<u8>, Vec<u8>), StoreError> {
        self.faults.check(Op::Read, path)?;
        self.inner.read_slices(path, prefix, suffix)
    }

    fn write(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        let (n, err) = plan_write(Some(&self.faults), Op::Write, path, bytes.len());
        self.inner.write(path, &bytes[..n])?;
        err.map_or(Ok(()), Err)
    }

    fn write_new(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        let (n, err) = plan_write(Some(&self.faults), Op::WriteNew, path, bytes.len());
        self.inner.write_new(path, &bytes[..n])?;
        err.map_or(Ok(()), Err)
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        let (_, err) = plan_write(Some(&self.faults), Op::WriteTemp, path, bytes.len());
        if let Some(e) = err {
            return Err(e);
        }
        self.faults.check(Op::SyncData, path)?;
        self.faults.check(Op::Rename, path)?;
        self.inner.write_atomic(path, bytes, expected)?;
        // The rename happened; a failed directory sync is still reported.
        self.faults.check(Op::SyncDir, path)
    }

    fn overwrite_prefix(
        &self,
        path: &Path,
        bytes: &[u8],
        expected: ExpectedSize,
        durability: Durability,
    ) -> Result<(), StoreError> {
        // A short write leaves the first bytes written: a torn overwrite.
        let (n, err) = plan_write(Some(&self.faults), Op::Overwrite, path, bytes.len());
        self.inner.overwrite_prefix(path, &bytes[..n], expected, durability)?;
        if let Some(e) = err {
            return Err(e);
        }
        if durability != Durability::None {
            self.faults.check(Op::SyncData, path)?;
        }
        Ok(())
    }

    fn append(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        let (_, err) = plan_write(Some(&self.faults), Op::Append, path, bytes.len());
        match err {
            Some(e) => Err(e),
            None => self.inner.append(path, bytes),
        }
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<(), StoreError> {
        self.faults.check(Op::Truncate, path)?;
        self.inner.truncate(path, len)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        self.faults.check(Op::Rename, from)?;
        self.inner.rename(from, to)
    }

    fn unlink(&self, path: &Path) -> Result<(), StoreError> {
        self.faults.check(Op::Unlink, path)?;
        self.inner.unlink(path)
    }

    fn delete_with_artifacts(&self, path: &Path) -> Result<(), StoreError> {
        self.faults.check(Op::Unlink, path)?;
        self.inner.delete_with_artifacts(path)
    }

    fn open_writer(&self, path: &Path, durability: Durability) -> Result<Box<dyn AppendWriter>, StoreError> {
        self.faults.check(Op::Open, path)?;
        let inner = self.inner.open_writer(path, durability)?;
        Ok(Box::new(FaultWriter {
            inner,
            faults: self.faults.clone(),
            path: path.to_path_buf(),
            durability,
            failed: None,
        }))
    }

    fn lock(&self, path: &Path, wait: LockWait) -> Result<SessionLock, StoreError> {
        self.faults.check(Op::Lock, path)?;
        self.inner.lock(path, wait)
    }
}

struct FaultWriter {
    inner: Box<dyn AppendWriter>,
    faults: Faults,
    path: std::path::PathBuf,
    durability: Durability,
    failed: Option<StoreError>,
}

impl FaultWriter {
    fn latch(&mut self, e: StoreError) -> StoreError {
        self.failed.get_or_insert(e).clone()
    }
}

impl AppendWriter for FaultWriter {
    fn append(&mut self, line: &[u8]) -> Result<(), StoreError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let (_, err) = plan_write(Some(&self.faults), Op::Append, &self.path, line.len());
        if let Some(e) = err {
            return Err(self.latch(e));
        }
        if self.durability == Durability::Fsync
            && let Err(e) = self.faults.check(Op::SyncData, &self.path)
        {
            return Err(self.latch(e));
        }
        self.inner.append(line)
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.durability != Durability::None
            && let Err(e) = self.faults.check(Op::SyncData, &self.path)
        {
            return Err(self.latch(e));
        }
        self.inner.flush()
    }

    fn error(&self) -> Option<&StoreError> {
        self.failed.as_ref().or_else(|| self.inner.error())
    }

    fn close(self: Box<Self>) -> Result<(), StoreError> {
        let FaultWriter { inner, failed, .. } = *self;
        let closed = inner.close();
        match failed {
            Some(e) => Err(e),
            None => closed,
        }
    }
}
