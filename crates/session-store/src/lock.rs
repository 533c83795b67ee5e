//! omp's two publish locks on a session file.
//!
//! For a session file `<dir>/<name>`:
//!
//! 1. the OS gate: an exclusive `flock`-style lock ([`std::fs::File::try_lock`]) on a gate
//!    file named by the SHA-256 of the session file's absolute path, in a directory private
//!    to this process's user: `$XDG_RUNTIME_DIR/session-store-locks`, else
//!    `<temp dir>/session-store-locks-<uid>`, opened as a [`crate::PrivateDir`]: created with
//!    mode 0700 and used only when it is a real directory owned by the user that nobody else
//!    can enter (a directory someone else made first, or a link planted in its place, is
//!    passed over). Only when no such
//!    directory can be had does the gate fall back to omp's own `<dir>/.<name>.lock.os`. The
//!    gate is created if needed (mode 0600), never deleted (so it never races with its own
//!    removal), and leaves nothing in the session's folder; the kernel drops the lock when
//!    the holder dies. Being per user, it can never lock another user out;
//! 2. the lock file `<dir>/.<name>.lock`, omp's, created exclusively (mode 0600) with the record
//!    `<pid>:<epoch-ms>\n` and re-read to verify ownership. An existing lock file is stolen only
//!    when its pid is dead (`/proc/<pid>` is gone or a zombie; on systems without `/proc` a pid is
//!    assumed alive) or when it holds no parseable record and is older than 500 ms. It is what
//!    excludes writers of other users and omp's writers.
//!
//! Both are opened without following symbolic links and without blocking, and both must be
//! regular files ([`crate::open`]): a link or a FIFO planted in their place is refused with
//! [`StoreError::NotRegular`] (the gate) or judged as a stale lock by its own age and removed
//! (the lock file), never followed, so nobody who can create files in the session's folder can
//! make a writer create or truncate a file elsewhere. The gate is opened read-only once it
//! exists (a `flock` needs no write access), so an open never truncates anything. A lock file
//! this process created is removed on every error path.
//!
//! Both are polled every 2 ms until the caller's deadline. omp takes the same two files, so a
//! Rust writer and an omp writer never publish into the same file at the same moment.
//!
//! An append writer holds the locks for its whole life ([`lock_for_writer`]): each append is
//! then one `write`, and no other writer (ours or omp's) can interleave or replace the file
//! while it is open.
//!
//! Locks taken through [`Storage::lock`](crate::Storage::lock) are registered per process: the
//! storage's own short publish locks (around appends and size-checked renames) are skipped for a
//! path this process has locked, which makes the explicit lock re-entrant for its holder.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::clock::Clock;
use crate::error::{Op, StoreError};
use crate::fault::Faults;
use crate::storage::{LockWait, SessionLock};

/// How long the storage's internal publish lock waits (omp: 500 ms).
pub(crate) const PUBLISH_WAIT: Duration = Duration::from_millis(500);
const POLL: Duration = Duration::from_millis(2);
const UNPARSEABLE_STALE_MS: i64 = 500;
/// How many stale lock files one acquisition removes before it waits like any contender.
const MAX_STEALS: u32 = 16;

/// Per-path replacement counters: a whole-file write bumps the path's counter so that an open
/// writer of this process notices without a `stat` per append.
fn generations() -> &'static Mutex<std::collections::HashMap<PathBuf, Arc<std::sync::atomic::AtomicU64>>> {
    static GEN: OnceLock<Mutex<std::collections::HashMap<PathBuf, Arc<std::sync::atomic::AtomicU64>>>> =
        OnceLock::new();
    GEN.get_or_init(|| Mutex::new(std::collections::HashMap::new()))
}

/// Returns the replacement counter of `path` (shared by every writer of this process).
pub(crate) fn generation(path: &Path) -> Arc<std::sync::atomic::AtomicU64> {
    let mut map = generations().lock().unwrap_or_else(|p| p.into_inner());
    map.entry(registry_key(path)).or_default().clone()
}

/// Notes that `path` was replaced or removed by this process.
pub(crate) fn bump_generation(path: &Path) {
    let map = generations().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(g) = map.get(&registry_key(path)) {
        g.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

fn held() -> &'static Mutex<HashSet<PathBuf>> {
    static HELD: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
    HELD.get_or_init(|| Mutex::new(HashSet::new()))
}

fn held_set() -> std::sync::MutexGuard<'static, HashSet<PathBuf>> {
    held().lock().unwrap_or_else(|p| p.into_inner())
}

/// Returns the key under which an explicit lock of `path` is registered in this process.
pub(crate) fn registry_key(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Returns the two lock files of a session file, `(OS gate, lock file)`, that
/// [`Storage::lock`](crate::Storage::lock) and every write of the file storage take.
///
/// The lock file is omp's `<dir>/.<name>.lock`. The gate is
/// `<gate dir>/<sha256 of the absolute path, 32 hex>.gate` in a directory private to this
/// process's user (`$XDG_RUNTIME_DIR/session-store-locks`, else
/// `<temp dir>/session-store-locks-<uid>`: a real directory owned by the user, mode
/// 0700), or omp's own `<dir>/.<name>.lock.os` when no such directory can be had.
pub fn lock_paths(path: &Path) -> Result<(PathBuf, PathBuf), StoreError> {
    let name = path.file_name().ok_or_else(|| StoreError::NotAFile { path: path.to_path_buf() })?;
    let sibling = |suffix: &str| {
        let mut n = std::ffi::OsString::from(".");
        n.push(name);
        n.push(suffix);
        path.with_file_name(n)
    };
    let gate = match private_gate_dir() {
        Some(dir) => {
            use sha2::Digest;
            let digest = sha2::Sha256::digest(registry_key(path).as_os_str().as_encoded_bytes());
            let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
            dir.join(format!("{hex}.gate"))
        }
        None => sibling(".lock.os"),
    };
    Ok((gate, sibling(".lock")))
}

/// Returns this process's private directory for OS gates, chosen once: the first of
/// `$XDG_RUNTIME_DIR/session-store-locks` and `<temp dir>/session-store-locks-<uid>` that
/// opens as a [`PrivateDir`](crate::PrivateDir) (a real directory owned by this
/// process's user with no access for anyone else, created 0700 when missing), the
/// runtime directory only when it is itself private to the user. `None` when neither is.
fn private_gate_dir() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let uid = crate::private::own_uid()?;
        let mut candidates = Vec::new();
        #[cfg(unix)]
        if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).filter(|d| d.is_absolute())
            && crate::private::check(&runtime, uid).is_ok()
        {
            candidates.push(runtime.join("session-store-locks"));
        }
        candidates.push(std::env::temp_dir().join(format!("session-store-locks-{uid}")));
        candidates.into_iter().find_map(|c| crate::PrivateDir::open(c).ok()).map(|d| d.path().to_path_buf())
    })
    .as_deref()
}

/// A held pair of locks; releases on drop.
pub(crate) struct FileLockGuard {
    os: Option<fs_err::File>,
    lockfile: PathBuf,
    record: String,
    registered: Option<PathBuf>,
}

impl FileLockGuard {
    pub(crate) fn release(mut self) -> Result<(), StoreError> {
        self.release_inner()
    }

    fn release_inner(&mut self) -> Result<(), StoreError> {
        let Some(os) = self.os.take() else { return Ok(()) };
        // Remove the lock file only while it still holds our record: after a (mistaken) steal it
        // belongs to someone else.
        let mut result = Ok(());
        if read_small(&self.lockfile).as_deref() == Some(self.record.as_str())
            && let Err(e) = fs_err::remove_file(&self.lockfile)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            result = Err(StoreError::io_raw(Op::Lock, &self.lockfile, e));
        }
        // Closing the descriptor drops the OS lock.
        drop(os);
        if let Some(key) = self.registered.take() {
            held_set().remove(&key);
        }
        result
    }
}

impl Drop for FileLockGuard {
    fn drop(&mut self) {
        let _ = self.release_inner();
    }
}

/// Takes the explicit session lock of `path` for [`Storage::lock`](crate::Storage::lock).
pub(crate) fn lock_explicit(
    path: &Path,
    wait: LockWait,
    clock: &Arc<dyn Clock>,
    faults: Option<&Faults>,
) -> Result<SessionLock, StoreError> {
    let deadline = deadline(wait);
    let key = registry_key(path);
    loop {
        if held_set().insert(key.clone()) {
            break;
        }
        if past(deadline) {
            return Err(StoreError::Locked { path: path.to_path_buf() });
        }
        std::thread::sleep(POLL);
    }
    match acquire(path, deadline, clock.as_ref(), faults) {
        Ok(mut guard) => {
            guard.registered = Some(key);
            Ok(SessionLock::new(path, Box::new(move || guard.release())))
        }
        Err(e) => {
            held_set().remove(&key);
            Err(e)
        }
    }
}

/// Takes the short publish lock around one append or rename, or nothing when this process holds
/// the explicit lock of `path`.
pub(crate) fn lock_publish(
    path: &Path,
    clock: &dyn Clock,
    faults: Option<&Faults>,
) -> Result<Option<FileLockGuard>, StoreError> {
    if held_set().contains(&registry_key(path)) {
        return Ok(None);
    }
    acquire(path, Some(Instant::now() + PUBLISH_WAIT), clock, faults).map(Some)
}

/// Takes the locks of `path` for an append writer's lifetime and registers them, or nothing when
/// this process already holds them.
pub(crate) fn lock_for_writer(
    path: &Path,
    clock: &dyn Clock,
    faults: Option<&Faults>,
) -> Result<Option<FileLockGuard>, StoreError> {
    let key = registry_key(path);
    if !held_set().insert(key.clone()) {
        return Ok(None);
    }
    match acquire(path, Some(Instant::now() + PUBLISH_WAIT), clock, faults) {
        Ok(mut guard) => {
            guard.registered = Some(key);
            Ok(Some(guard))
        }
        Err(e) => {
            held_set().remove(&key);
            Err(e)
        }
    }
}

fn deadline(wait: LockWait) -> Option<Instant> {
    match wait {
        LockWait::NoWait => None,
        LockWait::Timeout(d) => Some(Instant::now() + d),
    }
}

fn past(deadline: Option<Instant>) -> bool {
    deadline.is_none_or(|d| Instant::now() >= d)
}

fn acquire(
    path: &Path,
    deadline: Option<Instant>,
    clock: &dyn Clock,
    faults: Option<&Faults>,
) -> Result<FileLockGuard, StoreError> {
    if let Some(f) = faults {
        f.check(Op::Lock, path)?;
    }
    let (os_path, lockfile) = lock_paths(path)?;
    if let Some(dir) = lockfile.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs_err::create_dir_all(dir).map_err(|e| StoreError::io(Op::EnsureDir, dir, e))?;
    }
    let os = open_gate(&os_path).map_err(|e| StoreError::io_raw(Op::Lock, &os_path, e))?;
    loop {
        match os.file().try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) => {
                if past(deadline) {
                    return Err(StoreError::Locked { path: path.to_path_buf() });
                }
                std::thread::sleep(POLL);
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(StoreError::io_raw(Op::Lock, &os_path, e)),
        }
    }
    let record = format!("{}:{}\n", std::process::id(), clock.now_ms());
    let mut steals = 0;
    loop {
        match publish_record(&lockfile, &record, faults) {
            Ok(()) => {
                if read_small(&lockfile).as_deref() == Some(record.as_str()) {
                    return Ok(FileLockGuard { os: Some(os), lockfile, record, registered: None });
                }
                // Someone replaced our file between create and verify; treat as contended.
            }
            Err(StoreError::AlreadyExists { .. }) => {
                // A steal removed the file (or it vanished): retry at once, a bounded number of
                // times (only a writer that keeps planting stale files could make us steal again).
                if steal_if_stale(&lockfile, clock) && steals < MAX_STEALS {
                    steals += 1;
                    continue;
                }
            }
            Err(e) => return Err(e),
        }
        if past(deadline) {
            return Err(StoreError::Locked { path: path.to_path_buf() });
        }
        std::thread::sleep(POLL);
    }
}

/// Creates the lock file `lockfile` holding `record`, exclusively: the record is written
/// to a temporary file (`.<name>.lock.<pid>.<hex>.tmp`) that is then hard-linked to the
/// lock file's name, so a lock file never exists without its record, whenever the
/// writer dies (an empty lock would block everyone for 500 ms and name nobody). Fails
/// with [`StoreError::AlreadyExists`] when the lock file exists. Where the file system
/// has no hard links, the lock file is created exclusively and written, as omp does.
/// Nothing is left behind on any error.
fn publish_record(lockfile: &Path, record: &str, faults: Option<&Faults>) -> Result<(), StoreError> {
    let io = |e| StoreError::io_raw(Op::Lock, lockfile, e);
    let write = |f: &mut fs_err::File, at: &Path| -> Result<(), StoreError> {
        // A fault plan's full disk applies to the record as to any data write.
        let (n, injected) = crate::fault::plan_write(faults, Op::Lock, at, record.len());
        f.write_all(&record.as_bytes()[..n]).map_err(|e| StoreError::io_raw(Op::Lock, at, e))?;
        injected.map_or(Ok(()), Err)
    };
    let temp = crate::atomic::temp_path(lockfile)?;
    let mut f = create_private(&temp).map_err(io)?;
    let written = write(&mut f, &temp);
    drop(f);
    let linked = written.and_then(|()| match std::fs::hard_link(&temp, lockfile) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            Err(StoreError::AlreadyExists { path: lockfile.to_path_buf() })
        }
        Err(e) if matches!(e.kind(), std::io::ErrorKind::Unsupported | std::io::ErrorKind::PermissionDenied) => {
            Ok(false)
        }
        Err(e) => Err(io(e)),
    });
    let _ = fs_err::remove_file(&temp);
    if linked? {
        return Ok(());
    }
    // No hard links here: omp's way, removing the file again if its record fails.
    let mut f = create_private(lockfile).map_err(|e| StoreError::io(Op::Lock, lockfile, e))?;
    let written = write(&mut f, lockfile);
    drop(f);
    if written.is_err() {
        let _ = fs_err::remove_file(lockfile);
    }
    written
}

/// Opens (creating it if needed) the OS gate: read-only once it exists, never through a link.
fn open_gate(path: &Path) -> std::io::Result<fs_err::File> {
    loop {
        let mut existing = fs_err::OpenOptions::new();
        existing.read(true);
        match crate::open::open_no_follow(&mut existing, path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            other => return other,
        }
        match create_private(path) {
            // Created by someone else meanwhile: open theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            other => return other,
        }
    }
}

/// Creates `path` exclusively (mode 0600), never through a link.
fn create_private(path: &Path) -> std::io::Result<fs_err::File> {
    let mut o = fs_err::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use fs_err::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    crate::open::open_no_follow(&mut o, path)
}

/// Reads a lock record: at most 256 bytes of a regular file, never through a link or a FIFO.
fn read_small(path: &Path) -> Option<String> {
    let mut options = fs_err::OpenOptions::new();
    options.read(true);
    let mut f = crate::open::open_no_follow(&mut options, path).ok()?;
    let mut s = String::new();
    Read::by_ref(&mut f).take(256).read_to_string(&mut s).ok()?;
    Some(s)
}

/// Removes a lock file left by a dead process; returns true when the caller should retry.
fn steal_if_stale(lockfile: &Path, clock: &dyn Clock) -> bool {
    // `lstat`: a link or a FIFO in the lock file's place is judged (and removed) itself.
    let meta = match fs_err::symlink_metadata(lockfile) {
        Ok(m) => m,
        // Vanished between our create and this look: retry at once.
        Err(e) => return e.kind() == std::io::ErrorKind::NotFound,
    };
    let content = read_small(lockfile);
    let stale = match content.as_deref().and_then(parse_record) {
        Some((pid, _)) => !pid_alive(pid),
        None => {
            let age = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .and_then(|d| i64::try_from(d.as_millis()).ok())
                .map(|mtime| clock.now_ms() - mtime);
            age.is_some_and(|a| a > UNPARSEABLE_STALE_MS)
        }
    };
    if !stale || read_small(lockfile) != content {
        return false;
    }
    match fs_err::remove_file(lockfile) {
        Ok(()) => true,
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// Removes the lock file `path` when its record names a pid that no longer runs (read
/// twice, never through a link); returns whether it did.
pub(crate) fn remove_if_dead(path: &Path) -> bool {
    let Some(content) = read_small(path) else { return false };
    let dead = match parse_record(&content) {
        Some((pid, _)) => !pid_alive(pid),
        // A writer killed between creating the file and writing its record: judged by
        // age, as a steal judges it.
        None => fs_err::symlink_metadata(path)
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age.as_millis() > UNPARSEABLE_STALE_MS as u128),
    };
    dead && read_small(path).as_deref() == Some(content.as_str()) && fs_err::remove_file(path).is_ok()
}

/// Parses `<pid>:<epoch-ms>\n`.
pub(crate) fn parse_record(s: &str) -> Option<(u32, i64)> {
    let (pid, ms) = s.trim_end_matches('\n').split_once(':')?;
    let pid: u32 = pid.parse().ok()?;
    let ms: i64 = ms.parse().ok()?;
    (pid > 0).then_some((pid, ms))
}

/// Returns whether a process with this pid runs (zombies count as dead).
pub(crate) fn pid_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    let proc_root = Path::new("/proc/self");
    if !proc_root.exists() {
        return true;
    }
    let stat = Path::new("/proc").join(pid.to_string()).join("stat");
    match fs_err::read_to_string(&stat) {
        // The state letter follows the parenthesised command name, which may itself contain ')'.
        Ok(s) => s.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next()) != Some('Z'),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_file_is_omps_and_the_gate_is_private() -> Result<(), StoreError> {
        let (os, lf) = lock_paths(Path::new("/d/s.jsonl"))?;
        assert_eq!(lf, Path::new("/d/.s.jsonl.lock"));
        assert_ne!(os, lock_paths(Path::new("/d/t.jsonl"))?.0);
        match private_gate_dir() {
            Some(dir) => {
                assert!(os.starts_with(dir), "{}", os.display());
                #[cfg(unix)]
                crate::private::check(dir, crate::private::own_uid().unwrap_or(u32::MAX))?;
            }
            None => assert_eq!(os, Path::new("/d/.s.jsonl.lock.os")),
        }
        Ok(())
    }

    #[test]
    fn records_parse() {
        assert_eq!(parse_record("12:345\n"), Some((12, 345)));
        assert_eq!(parse_record("x:1\n"), None);
        assert_eq!(parse_record("0:1\n"), None);
        assert_eq!(parse_record(""), None);
    }

    #[test]
    fn own_pid_is_alive_and_absurd_pid_is_dead() {
        assert!(pid_alive(std::process::id()));
        if Path::new("/proc/self").exists() {
            assert!(!pid_alive(u32::MAX - 7));
        }
    }
}
