//! Preserving a corrupt `history.db` before a fresh one replaces it, as omp's
//! `openSqliteDatabaseSync(…, {recoverCorruption: true})` does.
//!
//! The database and its `-wal`, `-shm` and `-journal` companions are *copied* to
//! `history.db.corrupt-<ms>-<uuid>` (plus the same suffix), never overwriting an
//! existing file; only when every copy exists are the originals removed. If a removal
//! fails, the removed files are copied back and the open fails. The work happens under
//! an exclusive lock on `history.db.recovery.lock`, and only if the file is still the
//! one that failed to open (same device and inode), so two processes that both find
//! the file corrupt quarantine it once.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Suffixes of the files that make up a database, the main file last (omp's order).
const SUFFIXES: [&str; 4] = ["-wal", "-shm", "-journal", ""];

/// How often and how long to try for the recovery lock (omp: 50 × 100 ms).
const LOCK_ATTEMPTS: u32 = 50;
const LOCK_RETRY_DELAY: Duration = Duration::from_millis(100);

/// What identifies "the same file" across the failed open and the quarantine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileIdentity(Option<(u64, u64)>);

/// Returns the identity of the file at `path` (`None` inside when it does not exist).
pub(crate) fn file_identity(path: &Path) -> io::Result<FileIdentity> {
    match fs::metadata(path) {
        Ok(meta) => Ok(FileIdentity(Some(identity_of(&meta)))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(FileIdentity(None)),
        Err(e) => Err(e),
    }
}

#[cfg(unix)]
fn identity_of(meta: &fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn identity_of(meta: &fs::Metadata) -> (u64, u64) {
    // Without inode numbers, creation time and length tell a replaced file apart.
    let created = meta
        .created()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    (created, meta.len())
}

/// The result of a successful quarantine.
#[derive(Debug)]
pub(crate) struct Quarantined {
    /// The copy of the main file.
    pub(crate) backup: PathBuf,
    /// Every copy made, the main file's first.
    pub(crate) files: Vec<PathBuf>,
}

/// Appends `suffix` to the file name of `path`.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Formats 16 random bytes as a version-4 UUID, like `crypto.randomUUID()`.
fn random_uuid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// Copies the corrupt database at `path` aside and removes the originals.
///
/// `expected` is the identity taken before the failed open; `conn` is the failed
/// connection, closed after the copies exist and before the originals go. Returns
/// `Ok(None)` when the file changed meanwhile (another process already recovered
/// it) or no longer exists.
pub(crate) fn quarantine(
    path: &Path,
    expected: &FileIdentity,
    conn: Option<rusqlite::Connection>,
) -> io::Result<Option<Quarantined>> {
    let lock_path = with_suffix(path, ".recovery.lock");
    let lock = acquire_lock(&lock_path)?;
    let result = quarantine_locked(path, expected, conn);
    drop(lock);
    // Best effort: a stale lock file is harmless, the lock is the OS lock on it.
    let _ = fs::remove_file(&lock_path);
    result
}

/// Takes an exclusive OS lock on `lock_path`, retrying like omp before giving up.
fn acquire_lock(lock_path: &Path) -> io::Result<File> {
    let file = OpenOptions::new().create(true).truncate(false).write(true).open(lock_path)?;
    for attempt in 0..LOCK_ATTEMPTS {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(fs::TryLockError::WouldBlock) => {
                if attempt + 1 < LOCK_ATTEMPTS {
                    std::thread::sleep(LOCK_RETRY_DELAY);
                }
            }
            Err(fs::TryLockError::Error(e)) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::WouldBlock,
        format!("could not lock {} after {LOCK_ATTEMPTS} attempts", lock_path.display()),
    ))
}

fn quarantine_locked(
    path: &Path,
    expected: &FileIdentity,
    conn: Option<rusqlite::Connection>,
) -> io::Result<Option<Quarantined>> {
    let current = file_identity(path)?;
    if current.0.is_none() || &current != expected {
        return Ok(None);
    }
    let backup = with_suffix(path, &format!(".corrupt-{}-{}", crate::clock::unix_millis_now(), random_uuid()));
    let mut copied: Vec<&str> = Vec::new();
    for suffix in SUFFIXES {
        let source = with_suffix(path, suffix);
        match copy_exclusive(&source, &with_suffix(&backup, suffix)) {
            Ok(()) => copied.push(suffix),
            Err(e) if e.kind() == io::ErrorKind::NotFound && !suffix.is_empty() => {}
            Err(e) => return Err(e),
        }
    }
    // The connection must be closed before its files go; its close error (if any) is
    // irrelevant for a file that is being discarded.
    drop(conn);

    let mut removed: Vec<&str> = Vec::new();
    for suffix in &copied {
        match fs::remove_file(with_suffix(path, suffix)) {
            Ok(()) => removed.push(suffix),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                // Put back what was already removed; the copies stay as well.
                for back in &removed {
                    let _ = copy_exclusive(&with_suffix(&backup, back), &with_suffix(path, back));
                }
                return Err(e);
            }
        }
    }
    // Main file first in the report.
    let mut files: Vec<PathBuf> = Vec::new();
    for suffix in copied.iter().rev() {
        files.push(with_suffix(&backup, suffix));
    }
    Ok(Some(Quarantined { backup, files }))
}

/// Copies `from` to a new file `to`, failing if `to` exists, and syncs the copy.
fn copy_exclusive(from: &Path, to: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        // omp makes the original owner-readable first, so an unreadable file can
        // still be preserved.
        use std::os::unix::fs::PermissionsExt;
        let _ = fs::set_permissions(from, fs::Permissions::from_mode(0o600));
    }
    let mut source = File::open(from)?;
    let mut target = OpenOptions::new().write(true).create_new(true).open(to)?;
    io::copy(&mut source, &mut target)?;
    target.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_has_version_and_variant() {
        let id = random_uuid();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"));
    }
}
