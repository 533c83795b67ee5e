//! omp's cross-process lock of a small shared file (`pi-utils`' `withFileLock`, on the
//! native `FileLock` of `pi-natives`): how omp 18 serialises its read-modify-write of
//! files such as `<agent dir>/session-pins.json`, and how we serialise ours, so that two
//! writers (two of ours, or one of ours and omp) never lose each other's update.
//!
//! The lock of `<file>` is named after `<file>.lock`, the absolute path as given (omp
//! passes Node's `path.resolve`: absolute, `.` and `..` taken out as text, links not
//! resolved):
//!
//! * Linux: a datagram socket bound in the abstract namespace to
//!   `omp-file-lock-<hi><lo>`, where `hi` and `lo` are the XXH64 digests of the lock
//!   path's UTF-8 bytes with the seeds `0x4f4d502d4c4f434b` and `0x50492d46494c454c`,
//!   each as 16 lower-case hex digits. Nothing appears on disk; the kernel frees the
//!   name when its holder exits.
//! * other Unix systems: an exclusive `flock` on the file `<file>.lock` (created 0600,
//!   never through a link, never removed).
//!
//! [`FileLock::acquire`] tries every 10 ms until its deadline (omp: 50 tries 100 ms
//! apart), then gives up with [`StoreError::Locked`]. The lock is released when the
//! [`FileLock`] is dropped.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Op, StoreError};

const POLL: Duration = Duration::from_millis(10);

/// An exclusive hold of omp's cross-process lock of a file (see the module docs),
/// released on drop.
#[derive(Debug)]
pub struct FileLock {
    #[cfg(target_os = "linux")]
    _socket: std::os::unix::net::UnixDatagram,
    #[cfg(not(target_os = "linux"))]
    _file: fs_err::File,
}

impl FileLock {
    /// Takes the lock of `path` (the file the lock guards, not `<file>.lock`), waiting
    /// up to `wait` while another process holds it.
    ///
    /// # Errors
    ///
    /// [`StoreError::Locked`] (naming `path`) when it is still held after `wait`;
    /// [`StoreError::Io`] when the lock cannot be made (a path that is not UTF-8, no
    /// socket, a lock file that cannot be created).
    pub fn acquire(path: &Path, wait: Duration) -> Result<FileLock, StoreError> {
        let lock_path = lock_path(path)?;
        let deadline = Instant::now() + wait;
        loop {
            if let Some(lock) = try_acquire(&lock_path)? {
                return Ok(lock);
            }
            if Instant::now() >= deadline {
                return Err(StoreError::Locked { path: path.to_path_buf() });
            }
            std::thread::sleep(POLL);
        }
    }
}

/// Returns `<path>.lock`, absolute.
fn lock_path(path: &Path) -> Result<PathBuf, StoreError> {
    let abs = std::path::absolute(path).map_err(|e| StoreError::io_raw(Op::Lock, path, e))?;
    let mut name = abs.into_os_string();
    name.push(".lock");
    Ok(PathBuf::from(name))
}

/// Returns the abstract socket name omp's native lock binds for `lock_path`
/// (`<file>.lock`).
pub fn lock_name(lock_path: &str) -> String {
    const HIGH_SEED: u64 = 0x4f4d_502d_4c4f_434b;
    const LOW_SEED: u64 = 0x5049_2d46_494c_454c;
    let bytes = lock_path.as_bytes();
    let high = xxhash_rust::xxh64::xxh64(bytes, HIGH_SEED);
    let low = xxhash_rust::xxh64::xxh64(bytes, LOW_SEED);
    format!("omp-file-lock-{high:016x}{low:016x}")
}

#[cfg(target_os = "linux")]
fn try_acquire(lock_path: &Path) -> Result<Option<FileLock>, StoreError> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};

    let text = lock_path.to_str().ok_or_else(|| {
        StoreError::io_raw(
            Op::Lock,
            lock_path,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "lock path is not valid UTF-8"),
        )
    })?;
    let addr = SocketAddr::from_abstract_name(lock_name(text).as_bytes())
        .map_err(|e| StoreError::io_raw(Op::Lock, lock_path, e))?;
    match UnixDatagram::bind_addr(&addr) {
        Ok(socket) => Ok(Some(FileLock { _socket: socket })),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Ok(None),
        Err(e) => Err(StoreError::io_raw(Op::Lock, lock_path, e)),
    }
}

#[cfg(not(target_os = "linux"))]
fn try_acquire(lock_path: &Path) -> Result<Option<FileLock>, StoreError> {
    let mut options = fs_err::OpenOptions::new();
    options.read(true).write(true).create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file =
        crate::open::open_no_follow(&mut options, lock_path).map_err(|e| StoreError::io_raw(Op::Lock, lock_path, e))?;
    match file.file().try_lock() {
        Ok(()) => Ok(Some(FileLock { _file: file })),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(StoreError::io_raw(Op::Lock, lock_path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names omp 18's native lock binds, read back from the kernel
    /// (`/proc/net/unix`) while omp held them, and published vectors of the same
    /// derivation.
    #[test]
    fn lock_names_are_omps() {
        assert_eq!(lock_name(""), "omp-file-lock-dd4458733774f8b02ff557a2e70c6e06");
        assert_eq!(lock_name("/tmp/config.yml.lock"), "omp-file-lock-71327ba360366b2a3eb5de2fa0093fa0");
        assert_eq!(lock_name("/tmp/test.lock"), "omp-file-lock-c0b11536af4af31f2f1b828aaf87ec00");
        assert_eq!(lock_name("/tmp/locktest/session-pins.json.lock"), "omp-file-lock-3707603815fe3cef353b09828f831836");
    }

    #[test]
    fn a_held_lock_excludes_a_second_holder_until_dropped() -> Result<(), StoreError> {
        let dir = std::env::temp_dir().join(format!("file-lock-{}", std::process::id()));
        let file = dir.join("pins.json");
        let first = FileLock::acquire(&file, Duration::ZERO)?;
        let second = FileLock::acquire(&file, Duration::from_millis(30));
        assert!(matches!(second, Err(StoreError::Locked { ref path }) if path == &file), "{second:?}");
        drop(first);
        // Free once dropped; a child another test forks at this moment holds a copy of
        // the socket until its exec closes it, so this waits a little.
        let third = FileLock::acquire(&file, Duration::from_secs(5));
        assert!(third.is_ok(), "{third:?}");
        let _ = fs_err::remove_dir_all(&dir);
        Ok(())
    }
}
