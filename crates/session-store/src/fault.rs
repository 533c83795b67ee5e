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
//!
//! For crash-point exploration a plan also counts *boundaries*: every storage call that
//! changes something or makes it durable (each write, sync, rename, truncate, lock, open,
//! unlink, link, directory creation; not the reads `exists`, `stat`, `list`, `read`).
//! [`Faults::record_boundaries`] lists the boundaries one run of an operation passes;
//! [`Faults::crash_at`] makes the `k`-th boundary of the next run a process death: that call
//! and every later one (reads included) fails with [`StoreError::Injected`], and
//! [`FaultStorage`] then leaves its inner storage exactly as the death left it (no roll-back,
//! no close, no sync). A [`CrashKind::Torn`] crash at a data write lets the first half of its
//! bytes through first, as a death in the middle of a `write` would. [`Faults::fail_at`]
//! makes the `k`-th boundary fail once instead, and the process lives on.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Op, StoreError};
use crate::storage::{AppendWriter, DirEntry, Durability, ExpectedSize, FileStat, LockWait, SessionLock, Storage};

#[derive(Debug, Default)]
struct Plan {
    /// Renames between two directories fail as between two file systems.
    cross_devices: bool,
    disk_free: Option<u64>,
    fail_renames: u32,
    fail_syncs: u32,
    short_write: Option<usize>,
    fail_ops: Vec<(Op, u32)>,
    injected: u64,
    crash: Crash,
}

/// What a crash at a boundary does to the call it interrupts (see [`Faults::crash_at`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashKind {
    /// The process dies just before the call: the call has no effect.
    Before,
    /// The process dies in the middle of a data write (`write`, `write_new`, `append`, an
    /// append writer's `append`, `overwrite_prefix`): the first half of the bytes reach the
    /// file (through [`FaultStorage`]; a file storage with this plan rolls the write back, as
    /// after any failed write). At any other boundary, or for a write of less than two bytes,
    /// it is [`CrashKind::Before`].
    Torn,
}

/// One storage call that counts as a crash boundary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Boundary {
    /// The operation.
    pub op: Op,
    /// The path it was applied to.
    pub path: PathBuf,
    /// The number of bytes of a data write (`None` for other operations).
    pub len: Option<usize>,
}

impl Boundary {
    /// Returns whether a [`CrashKind::Torn`] crash here would leave a torn write.
    pub fn can_tear(&self) -> bool {
        self.len.is_some_and(|n| n > 1) && self.op != Op::WriteTemp
    }
}

impl fmt::Display for Boundary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.op, self.path.display())?;
        match self.len {
            Some(n) => write!(f, " ({n} bytes)"),
            None => Ok(()),
        }
    }
}

/// Called once when a crash point is reached, before the call (or its torn part) runs.
type CrashHook = Arc<dyn Fn(&Boundary) + Send + Sync>;

/// The crash-point part of a plan.
#[derive(Default)]
struct Crash {
    /// Boundaries passed since counting started.
    seen: usize,
    /// Whether passed boundaries are kept in `trace`.
    recording: bool,
    trace: Vec<Boundary>,
    /// The armed crash point: the `k`-th boundary (1-based) and what it does.
    at: Option<(usize, CrashKind)>,
    /// The boundary where the crash happened; from then on every call fails.
    fired: Option<Boundary>,
    hook: Option<CrashHook>,
    /// The armed transient fault: the `k`-th boundary fails once (the process lives on).
    fail_at: Option<usize>,
    /// The boundary where the transient fault fired.
    failed: Option<Boundary>,
}

impl fmt::Debug for Crash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Crash")
            .field("seen", &self.seen)
            .field("recording", &self.recording)
            .field("at", &self.at)
            .field("fired", &self.fired)
            .field("hook", &self.hook.is_some())
            .field("fail_at", &self.fail_at)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

/// Returns whether a call of `op` is a crash boundary: everything but the pure reads.
fn is_boundary(op: Op) -> bool {
    !matches!(op, Op::Exists | Op::Stat | Op::List | Op::Read)
}

/// What the crash part of a plan says about one call.
enum CrashStep {
    /// No crash here: the call goes on (other faults may still apply).
    Go,
    /// The process is dead: fail with this error; `Some(n)`: after `n` bytes of the write.
    Dead(StoreError, Option<usize>),
    /// A transient fault: this call fails (a data write stores nothing), later ones work.
    Fail(StoreError),
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
    /// The process dies here: this many bytes reach the file (0: none, and the call must have
    /// no effect at all), then the error is reported and nothing may clean up.
    Crash(usize, StoreError),
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

    /// Makes every rename between two directories, and every directory move, fail with
    /// `EXDEV` as if the two were on different file systems ([`StoreError::crosses_devices`]),
    /// so that a move takes its copy-then-delete path; a rename within one directory (an
    /// atomic replace) still works. Not a crash boundary of its own.
    pub fn cross_devices(&self, on: bool) {
        self.plan().cross_devices = on;
    }

    /// Returns the error of a rename from `from` to `to` across file systems, when the plan
    /// says they are.
    fn crossing(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        if self.plan().cross_devices && from.parent() != to.parent() {
            return Err(StoreError::Io {
                op: Op::Rename,
                path: from.to_path_buf(),
                source: Arc::new(std::io::Error::from(std::io::ErrorKind::CrossesDevices)),
            });
        }
        Ok(())
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

    /// Starts counting crash boundaries from zero and keeping a list of them (see the module
    /// docs); [`Faults::boundaries`] returns the list. Nothing fails because of it.
    pub fn record_boundaries(&self) {
        let mut p = self.plan();
        p.crash = Crash { recording: true, hook: p.crash.hook.take(), ..Crash::default() };
    }

    /// Returns the boundaries passed since [`Faults::record_boundaries`] (empty when not
    /// recording).
    pub fn boundaries(&self) -> Vec<Boundary> {
        self.plan().crash.trace.clone()
    }

    /// Arms a crash at the `k`-th boundary from now (1-based; 0 never fires): that call fails
    /// with [`StoreError::Injected`], as does every later call of any kind, as if the process
    /// had died there. [`FaultStorage`] leaves its inner storage as the death left it.
    /// [`Faults::clear`] revives the plan.
    pub fn crash_at(&self, k: usize, kind: CrashKind) {
        let mut p = self.plan();
        p.crash = Crash { at: Some((k, kind)), hook: p.crash.hook.take(), ..Crash::default() };
    }

    /// Calls `hook` with the boundary when an armed crash fires, before the call (or the torn
    /// part of it) runs, outside the plan's lock: a test can copy the files a process death
    /// at that moment leaves behind. One hook at a time; [`Faults::clear`] removes it.
    pub fn on_crash(&self, hook: impl Fn(&Boundary) + Send + Sync + 'static) {
        self.plan().crash.hook = Some(Arc::new(hook));
    }

    /// Makes the `k`-th boundary from now (1-based) fail once with [`StoreError::Injected`]
    /// while the process lives on: unlike a crash, the code's clean-up runs and every later
    /// call works (a failed data write stores nothing, as [`FaultStorage`] models any failed
    /// write). [`Faults::failed`] tells whether it fired.
    pub fn fail_at(&self, k: usize) {
        let mut p = self.plan();
        p.crash = Crash { fail_at: Some(k), hook: p.crash.hook.take(), ..Crash::default() };
    }

    /// Returns the boundary where a [`Faults::fail_at`] fault fired, or `None`.
    pub fn failed(&self) -> Option<Boundary> {
        self.plan().crash.failed.clone()
    }

    /// Returns the boundary where an armed crash fired, or `None`.
    pub fn crashed(&self) -> Option<Boundary> {
        self.plan().crash.fired.clone()
    }

    /// Returns whether an armed crash has fired (every call now fails).
    pub(crate) fn is_dead(&self) -> bool {
        self.plan().crash.fired.is_some()
    }

    /// Applies the crash part of the plan to one call.
    fn crash_step(&self, op: Op, path: &Path, len: Option<usize>) -> CrashStep {
        let (hook, boundary, torn) = {
            let mut p = self.plan();
            let c = &mut p.crash;
            if c.fired.is_some() {
                return CrashStep::Dead(StoreError::Injected { op, path: path.to_path_buf() }, None);
            }
            if !is_boundary(op) || !(c.recording || c.at.is_some() || c.fail_at.is_some()) {
                return CrashStep::Go;
            }
            c.seen += 1;
            let boundary = Boundary { op, path: path.to_path_buf(), len };
            if c.recording {
                c.trace.push(boundary.clone());
            }
            if c.fail_at == Some(c.seen) {
                c.failed = Some(boundary);
                p.injected += 1;
                return CrashStep::Fail(StoreError::Injected { op, path: path.to_path_buf() });
            }
            let kind = match c.at {
                Some((k, kind)) if k == c.seen => kind,
                _ => return CrashStep::Go,
            };
            let torn = match kind {
                CrashKind::Torn if boundary.can_tear() => len.map(|n| n / 2),
                _ => None,
            };
            c.fired = Some(boundary.clone());
            let hook = c.hook.clone();
            p.injected += 1;
            (hook, boundary, torn)
        };
        if let Some(hook) = hook {
            hook(&boundary);
        }
        CrashStep::Dead(StoreError::Injected { op, path: path.to_path_buf() }, torn)
    }

    /// Removes every planned fault (and an armed or fired crash, and the crash hook).
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
        match self.crash_step(op, path, None) {
            CrashStep::Go => self.check_planned(op, path),
            CrashStep::Dead(e, _) | CrashStep::Fail(e) => Err(e),
        }
    }

    /// [`Faults::check`] without the crash part.
    fn check_planned(&self, op: Op, path: &Path) -> Result<(), StoreError> {
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
        match self.crash_step(op, path, Some(len)) {
            CrashStep::Go => {}
            CrashStep::Dead(e, torn) => return WriteVerdict::Crash(torn.unwrap_or(0), e),
            CrashStep::Fail(e) => return WriteVerdict::Partial(0, Some(e)),
        }
        if let Err(e) = self.check_planned(op, path) {
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
    match faults {
        None => (len, None),
        Some(f) => split_verdict(f.on_write(op, path, len), op, path, len),
    }
}

/// Turns a verdict on a `len`-byte write into the number of bytes to write and the error to
/// report after writing them.
fn split_verdict(verdict: WriteVerdict, op: Op, path: &Path, len: usize) -> (usize, Option<StoreError>) {
    match verdict {
        WriteVerdict::All => (len, None),
        WriteVerdict::Partial(n, err) => (n, Some(err.unwrap_or_else(|| StoreError::short_write(op, path)))),
        WriteVerdict::Crash(n, err) => (n, Some(err)),
    }
}

/// The error of a replace that was renamed into place before its directory sync failed.
fn landed(path: &Path, written: u64, error: StoreError) -> StoreError {
    StoreError::NotDurable { path: path.to_path_buf(), written, source: Box::new(error) }
}

/// A [`Storage`] wrapper that fails operations as a [`Faults`] plan says; for tests.
///
/// Failures model each operation's contract: a plain [`Storage::write`] or
/// [`Storage::write_new`] stores the prefix that fits, an append (plain or through a writer)
/// stores nothing, an atomic replace leaves the old file untouched. With an empty plan it behaves
/// exactly like the wrapped storage.
///
/// A crash ([`Faults::crash_at`]) is not a failure but a death: the call at the crash point has
/// no effect (a [`CrashKind::Torn`] data write leaves its first half), nothing is rolled back,
/// and no later call (writer closes included) reaches the wrapped storage. An atomic replace
/// passes four boundaries (temporary write, sync, rename, directory sync) and replaces the file
/// between the last two.
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

    fn list_stats(&self, dir: &Path) -> Result<Vec<(String, FileStat)>, StoreError> {
        self.faults.check(Op::List, dir)?;
        self.inner.list_stats(dir)
    }

    fn list_versions(&self, dir: &Path) -> Result<Vec<(String, String)>, StoreError> {
        self.faults.check(Op::List, dir)?;
        self.inner.list_versions(dir)
    }

    fn stat_version(&self, path: &Path) -> Result<Option<(FileStat, String)>, StoreError> {
        self.faults.check(Op::Stat, path)?;
        self.inner.stat_version(path)
    }

    fn read_dir(&self, dir: &Path) -> Result<Vec<DirEntry>, StoreError> {
        self.faults.check(Op::List, dir)?;
        self.inner.read_dir(dir)
    }

    fn read(&self, path: &Path) -> Result<Vec<u8>, StoreError> {
        self.faults.check(Op::Read, path)?;
        self.inner.read(path)
    }

    fn read_into(&self, path: &Path, buf: &mut Vec<u8>) -> Result<(FileStat, usize), StoreError> {
        self.faults.check(Op::Read, path)?;
        self.inner.read_into(path, buf)
    }

    fn read_slices_into(
        &self,
        path: &Path,
        prefix: u64,
        suffix: u64,
        head: &mut Vec<u8>,
        tail: &mut Vec<u8>,
    ) -> Result<(FileStat, usize, usize), StoreError> {
        self.faults.check(Op::Read, path)?;
        self.inner.read_slices_into(path, prefix, suffix, head, tail)
    }

    fn remove_empty_dir(&self, dir: &Path) -> Result<(), StoreError> {
        self.faults.check(Op::RemoveDir, dir)?;
        self.inner.remove_empty_dir(dir)
    }

    fn read_slices(&self, path: &Path, prefix: u64, suffix: u64) -> Result<(Vec<u8>, Vec<u8>), StoreError> {
        self.faults.check(Op::Read, path)?;
        self.inner.read_slices(path, prefix, suffix)
    }

    fn write(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        let (n, err) = match self.faults.on_write(Op::Write, path, bytes.len()) {
            WriteVerdict::Crash(0, e) => return Err(e),
            verdict => split_verdict(verdict, Op::Write, path, bytes.len()),
        };
        self.inner.write(path, &bytes[..n])?;
        err.map_or(Ok(()), Err)
    }

    fn write_new(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        let (n, err) = match self.faults.on_write(Op::WriteNew, path, bytes.len()) {
            WriteVerdict::Crash(0, e) => return Err(e),
            verdict => split_verdict(verdict, Op::WriteNew, path, bytes.len()),
        };
        self.inner.write_new(path, &bytes[..n])?;
        err.map_or(Ok(()), Err)
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        self.write_atomic_versioned(path, bytes, expected).map(|_| ())
    }

    fn write_atomic_versioned(
        &self,
        path: &Path,
        bytes: &[u8],
        expected: ExpectedSize,
    ) -> Result<Option<(FileStat, String)>, StoreError> {
        let (_, err) = plan_write(Some(&self.faults), Op::WriteTemp, path, bytes.len());
        if let Some(e) = err {
            return Err(e);
        }
        self.faults.check(Op::SyncData, path)?;
        self.faults.check(Op::Rename, path)?;
        let made = self.inner.write_atomic_versioned(path, bytes, expected)?;
        // The rename happened; a failed directory sync is still reported, as landed.
        self.faults.check(Op::SyncDir, path).map_err(|e| landed(path, bytes.len() as u64, e))?;
        Ok(made)
    }

    fn write_atomic_stream(
        &self,
        path: &Path,
        expected: ExpectedSize,
        durability: Durability,
        fill: &mut dyn FnMut(&mut dyn crate::Sink) -> std::io::Result<()>,
    ) -> Result<u64, StoreError> {
        // The boundaries of the file storage's streamed write: without durability it skips
        // both syncs.
        let bytes = crate::storage::collect(path, fill)?;
        let (_, err) = plan_write(Some(&self.faults), Op::WriteTemp, path, bytes.len());
        if let Some(e) = err {
            return Err(e);
        }
        let sync = durability != Durability::None;
        if sync {
            self.faults.check(Op::SyncData, path)?;
        }
        self.faults.check(Op::Rename, path)?;
        let written = self.inner.write_atomic_stream(path, expected, durability, &mut |w| w.write_all(&bytes))?;
        if sync {
            // The rename happened; a failed directory sync is still reported, as landed.
            self.faults.check(Op::SyncDir, path).map_err(|e| landed(path, written, e))?;
        }
        Ok(written)
    }

    fn overwrite_prefix(
        &self,
        path: &Path,
        bytes: &[u8],
        expected: ExpectedSize,
        durability: Durability,
    ) -> Result<(), StoreError> {
        // A short write leaves the first bytes written: a torn overwrite.
        let (n, err) = match self.faults.on_write(Op::Overwrite, path, bytes.len()) {
            WriteVerdict::Crash(0, e) => return Err(e),
            verdict => split_verdict(verdict, Op::Overwrite, path, bytes.len()),
        };
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
        match self.faults.on_write(Op::Append, path, bytes.len()) {
            WriteVerdict::All => self.inner.append(path, bytes),
            // A failed append is rolled back: nothing stays.
            WriteVerdict::Partial(_, err) => Err(err.unwrap_or_else(|| StoreError::short_write(Op::Append, path))),
            // A death leaves what was written, and nobody rolls it back.
            WriteVerdict::Crash(n, e) => {
                if n > 0 {
                    let _ = self.inner.append(path, &bytes[..n]);
                }
                Err(e)
            }
        }
    }

    fn append_expected(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        self.append_expected_versioned(path, bytes, expected).map(|_| ())
    }

    fn append_expected_versioned(
        &self,
        path: &Path,
        bytes: &[u8],
        expected: ExpectedSize,
    ) -> Result<Option<(FileStat, String)>, StoreError> {
        // The inner storage's own conditional append (an object store's segment and head),
        // one boundary as a plain append is; it lands whole or not at all (its contract),
        // so a death leaves nothing of it.
        match self.faults.on_write(Op::Append, path, bytes.len()) {
            WriteVerdict::All => self.inner.append_expected_versioned(path, bytes, expected),
            WriteVerdict::Partial(_, err) => Err(err.unwrap_or_else(|| StoreError::short_write(Op::Append, path))),
            WriteVerdict::Crash(_, e) => Err(e),
        }
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<(), StoreError> {
        self.faults.check(Op::Truncate, path)?;
        self.inner.truncate(path, len)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        self.faults.check(Op::Rename, from)?;
        self.faults.crossing(from, to)?;
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

    fn move_dir(&self, from: &Path, to: &Path) -> Result<Vec<(PathBuf, PathBuf)>, StoreError> {
        self.faults.check(Op::Rename, from)?;
        self.faults.crossing(from, to)?;
        self.inner.move_dir(from, to)
    }

    fn copy_dir(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        self.faults.check(Op::Copy, from)?;
        self.inner.copy_dir(from, to)
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

    fn watch(&self, path: &Path) -> Result<Option<Box<dyn crate::Watch>>, StoreError> {
        self.faults.check(Op::Stat, path)?;
        self.inner.watch(path)
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
        match self.faults.on_write(Op::Append, &self.path, line.len()) {
            WriteVerdict::All => {}
            WriteVerdict::Partial(_, err) => {
                // A failed append is rolled back: nothing stays.
                let e = err.unwrap_or_else(|| StoreError::short_write(Op::Append, &self.path));
                return Err(self.latch(e));
            }
            WriteVerdict::Crash(n, e) => {
                // A death leaves what was written, and nobody rolls it back.
                if n > 0 {
                    let _ = self.inner.append(&line[..n]);
                }
                return Err(self.latch(e));
            }
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
        let FaultWriter { inner, failed, faults, path, .. } = *self;
        if faults.is_dead() {
            // A dead process neither flushes nor syncs: the inner writer is dropped unclosed.
            drop(inner);
            return Err(failed.unwrap_or(StoreError::Injected { op: Op::SyncData, path }));
        }
        let closed = inner.close();
        match failed {
            Some(e) => Err(e),
            None => closed,
        }
    }
}
