//! Regression tests for a file system that someone else prepared: links and FIFOs planted
//! where a session or its locks should be, and a disk that fills up under the lock.
//!
//! Each case is one a local attacker or an unlucky user can produce; none may hang, follow a
//! link out of the session's folder, or leave a file behind that blocks the next writer.

#![cfg(unix)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use session_store::clock::{Clock, ManualClock, SystemClock};
use session_store::{Durability, ExpectedSize, FaultStorage, Faults, FileStorage, LockWait, Storage, StoreError};

use crate::support::{TempDir, raw_names};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn mkfifo(path: &Path) -> TestResult {
    let made = std::process::Command::new("mkfifo").arg(path).status()?;
    if !made.success() {
        return Err("mkfifo failed".into());
    }
    Ok(())
}

fn is_not_regular(r: Result<impl Sized, StoreError>, kind: &str) -> bool {
    matches!(r, Err(StoreError::NotRegular { kind: k, .. }) if k == kind)
}

/// The OS gate lives in a directory private to the user (nothing is left in the
/// session's folder, and no other user can prepare it); a link planted in place of the
/// gate file is refused, and the file it names is neither created nor truncated.
#[test]
fn the_gate_is_private_and_a_link_in_its_place_is_refused() -> TestResult {
    use std::os::unix::fs::MetadataExt;
    let dir = TempDir::new("session-store-it");
    let p = dir.path().join("s.jsonl");
    let victim = dir.path().join("victim");
    fs_err::write(&victim, b"precious")?;
    let absent = dir.path().join("absent");
    let s = FileStorage::new();
    drop(s.lock(&p, LockWait::NoWait)?);
    assert_eq!(raw_names(dir.path()), ["victim"], "no lock file is left in the session's folder");
    let (gate, lockfile) = session_store::lock_paths(&p)?;
    assert_eq!(lockfile, dir.path().join(".s.jsonl.lock"));
    let gate_dir = gate.parent().ok_or("the gate has a folder")?;
    assert!(!gate_dir.starts_with(dir.path()), "{}", gate.display());
    let meta = fs_err::symlink_metadata(gate_dir)?;
    assert!(meta.is_dir() && meta.mode() & 0o077 == 0, "the gate folder is private: {:o}", meta.mode());
    fs_err::remove_file(&gate)?;

    for target in [&victim, &absent] {
        std::os::unix::fs::symlink(target, &gate)?;
        let locked = s.lock(&p, LockWait::NoWait);
        assert!(is_not_regular(locked.as_ref().map(|_| ()).map_err(Clone::clone), "symbolic link"), "{locked:?}");
        assert!(is_not_regular(s.append(&p, b"x\n"), "symbolic link"));
        assert!(is_not_regular(s.write_atomic(&p, b"y\n", ExpectedSize::Any), "symbolic link"));
        assert!(is_not_regular(s.open_writer(&p, Durability::None), "symbolic link"));
        fs_err::remove_file(&gate)?;
    }
    assert_eq!(fs_err::read(&victim)?, b"precious");
    assert!(!absent.exists(), "nothing was created through the link");
    assert!(!p.exists(), "nothing was written");
    drop(s.lock(&p, LockWait::NoWait)?);
    Ok(())
}

/// A link planted as the lock file (`.<name>.lock`) is never followed: the exclusive create
/// fails on it, it is judged as an unparseable lock by its own age, and stolen (the link
/// removed, its target untouched) once older than 500 ms.
#[test]
fn a_link_in_place_of_the_lock_file_is_judged_as_a_stale_lock() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let p = dir.path().join("s.jsonl");
    let victim = dir.path().join("victim");
    fs_err::write(&victim, b"1:1\n")?;
    let lockfile = dir.path().join(".s.jsonl.lock");
    std::os::unix::fs::symlink(&victim, &lockfile)?;
    let clock = Arc::new(ManualClock::new(SystemClock.now_ms()));
    let s = FileStorage::with_clock(clock.clone());
    // pid 1 runs, but the record is not read through the link: a young unknown lock is respected.
    assert!(matches!(s.lock(&p, LockWait::NoWait), Err(StoreError::Locked { .. })));
    clock.advance(10_000);
    s.append(&p, b"x\n")?;
    assert_eq!(fs_err::read(&victim)?, b"1:1\n", "the link's target is untouched");
    assert_eq!(raw_names(dir.path()), ["s.jsonl", "victim"], "the link is gone");
    Ok(())
}

/// A FIFO planted as the lock file cannot block a writer: it is not read (no open waits for
/// a peer) and is removed like any unparseable stale lock.
#[test]
fn a_fifo_in_place_of_the_lock_file_does_not_block() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let p = dir.path().join("s.jsonl");
    mkfifo(&dir.path().join(".s.jsonl.lock"))?;
    let clock = Arc::new(ManualClock::new(SystemClock.now_ms()));
    clock.advance(10_000);
    let s = FileStorage::with_clock(clock);
    s.append(&p, b"x\n")?;
    assert_eq!(s.read(&p)?, b"x\n");
    Ok(())
}

/// Every operation on a session path that names a FIFO fails at once with a typed error
/// instead of waiting for a writer that never comes; listing skips it.
#[test]
fn a_fifo_session_is_refused_by_every_operation() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let fifo = dir.path().join("pipe.jsonl");
    mkfifo(&fifo)?;
    fs_err::write(dir.path().join("real.jsonl"), b"{}\n")?;
    let s = FileStorage::new();
    let started = Instant::now();
    assert!(is_not_regular(s.read(&fifo), "fifo"));
    assert!(is_not_regular(s.open_reader(&fifo).map(|_| ()), "fifo"));
    assert!(is_not_regular(s.read_slices(&fifo, 4096, 32768), "fifo"));
    // Opening a FIFO for writing without a reader fails at once (ENXIO) or is refused.
    assert!(s.truncate(&fifo, 0).is_err());
    assert!(s.append(&fifo, b"x\n").is_err());
    assert!(s.write(&fifo, b"x\n").is_err());
    assert!(s.open_writer(&fifo, Durability::None).is_err());
    assert!(s.overwrite_prefix(&fifo, b"x", ExpectedSize::Any, Durability::None).is_err());
    assert_eq!(s.stat(&fifo)?.map(|st| st.is_file), Some(false));
    assert_eq!(s.list(dir.path())?, ["real.jsonl"]);
    assert!(started.elapsed() < Duration::from_secs(60), "nothing waited for a peer");
    let message = s.read(&fifo).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("pipe.jsonl") && message.contains("fifo"), "{message}");
    Ok(())
}

/// A disk that fills up while the lock record is written leaves no empty `.<name>.lock`
/// behind: the next writer (once space is back) takes the lock at once.
#[test]
fn a_full_disk_while_locking_leaves_no_lock_file() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let p = dir.path().join("s.jsonl");
    let faults = Faults::new();
    let s = FileStorage::new().with_faults(faults.clone());
    faults.disk_full_after(3);
    let err = s.append(&p, b"x\n").err().ok_or("append on a full disk succeeded")?;
    assert_eq!(err.io_kind(), Some(std::io::ErrorKind::StorageFull), "{err}");
    assert!(raw_names(dir.path()).is_empty(), "no empty lock file left");
    faults.clear();
    let quick = FileStorage::new();
    quick.lock(&p, LockWait::NoWait)?.release()?;
    quick.append(&p, b"x\n")?;
    Ok(())
}

/// The same through the trait-level fault wrapper: a refused lock leaves nothing either.
#[test]
fn a_failed_lock_through_the_wrapper_leaves_nothing() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let p = dir.path().join("s.jsonl");
    let faults = Faults::new();
    let s = FaultStorage::new(FileStorage::new(), faults.clone());
    faults.fail_next(session_store::Op::Lock, 1);
    assert!(s.lock(&p, LockWait::NoWait).is_err());
    assert!(raw_names(dir.path()).iter().all(|n| !n.ends_with(".lock")));
    Ok(())
}

/// A rewrite keeps the mode of the file it replaces (a private session stays private),
/// and its owner and group where the process may set them (as root: always).
#[test]
fn rewrites_keep_mode_and_owner() -> TestResult {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = TempDir::new("session-store-it");
    let s = FileStorage::new();
    for (i, mode) in [0o600u32, 0o640, 0o644, 0o604].into_iter().enumerate() {
        let p = dir.path().join(format!("s{i}.jsonl"));
        fs_err::write(&p, b"a\n")?;
        fs_err::set_permissions(&p, std::fs::Permissions::from_mode(mode))?;
        s.write_atomic(&p, b"b\n", ExpectedSize::Bytes(2))?;
        assert_eq!(fs_err::metadata(&p)?.mode() & 0o7777, mode, "write_atomic of a {mode:o} file");
        s.write_atomic_stream(&p, ExpectedSize::Bytes(2), Durability::Fsync, &mut |w| w.write_all(b"cc\n"))?;
        assert_eq!(fs_err::metadata(&p)?.mode() & 0o7777, mode, "write_atomic_stream of a {mode:o} file");
        s.overwrite_prefix(&p, b"d", ExpectedSize::Bytes(3), Durability::None)?;
        assert_eq!(fs_err::metadata(&p)?.mode() & 0o7777, mode);
    }
    // Giving a file to another user needs root (CI runs as root); elsewhere this part
    // cannot be set up and says so.
    let p = dir.path().join("theirs.jsonl");
    fs_err::write(&p, b"a\n")?;
    let given = std::process::Command::new("chown").arg("12345:12346").arg(&p).status()?.success();
    if given {
        s.write_atomic(&p, b"b\n", ExpectedSize::Bytes(2))?;
        let m = fs_err::metadata(&p)?;
        assert_eq!((m.uid(), m.gid()), (12345, 12346), "owner and group kept");
    } else {
        eprintln!("rewrites_keep_mode_and_owner: not root, the owner part was not run");
    }
    Ok(())
}

/// Temporary files left by a killed writer (its pid no longer runs), and the lock of a
/// new file it never published, go with the next replace in their directory; those of
/// a live writer and of other programs stay.
#[test]
fn a_killed_writers_leftovers_are_removed_by_the_next_replace() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let mut child = std::process::Command::new("true").spawn()?;
    let dead = child.id();
    child.wait()?;
    let left = format!(".s.jsonl.{dead}.0123456789abcdef.tmp");
    let live = ".s.jsonl.1.0123456789abcdef.tmp";
    let foreign = ".s.jsonl.0123456789abcdef.tmp";
    for name in [left.as_str(), live, foreign] {
        fs_err::write(dir.path().join(name), b"partial")?;
    }
    // The lock of a new file that a killed writer never published; a live one stays.
    fs_err::write(dir.path().join(".never.jsonl.lock"), format!("{dead}:1\n"))?;
    fs_err::write(dir.path().join(".busy.jsonl.lock"), "1:1\n")?;
    FileStorage::new().write_atomic(&dir.path().join("s.jsonl"), b"a\n", ExpectedSize::Missing)?;
    let names = raw_names(dir.path());
    assert!(!names.contains(&left), "{names:?}");
    assert!(!names.iter().any(|n| n == ".never.jsonl.lock"), "{names:?}");
    assert!(names.iter().any(|n| n == ".busy.jsonl.lock"), "{names:?}");
    assert!(names.iter().any(|n| n == live) && names.iter().any(|n| n == foreign), "{names:?}");
    Ok(())
}
