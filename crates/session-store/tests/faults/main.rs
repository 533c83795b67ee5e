//! Fault tests: full disks, failing renames and syncs, short writes and power loss.
//!
//! The invariant throughout: a good file is never replaced by a half-written one, a failed append
//! leaves the file as it was, and the first writer error is latched.

use std::path::{Path, PathBuf};

use session_store::{
    Durability, ExpectedSize, FaultStorage, Faults, FileStorage, MemoryStorage, Op, Storage, StoreError,
};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const GOOD: &[u8] = b"{\"type\":\"session\",\"id\":\"good\"}\n{\"type\":\"message\"}\n";

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        use rand::Rng;
        let p = std::env::temp_dir().join(format!("session-store-faults-{:016x}", rand::rng().next_u64()));
        fs_err::create_dir_all(&p).expect("temp dir is creatable");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs_err::remove_dir_all(&self.0);
    }
}

/// Returns the names in `dir` that are not the session file or its lock gate.
fn strays(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs_err::read_dir(dir)
        .map(|r| r.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    v.retain(|n| n != "s.jsonl" && !n.ends_with(".lock.os"));
    v
}

/// A file storage with a good session file in a fresh directory.
fn file_setup() -> Result<(TempDir, PathBuf, FileStorage, Faults), StoreError> {
    let dir = TempDir::new();
    let path = dir.0.join("s.jsonl");
    let faults = Faults::new();
    let storage = FileStorage::new().with_faults(faults.clone());
    storage.write_atomic(&path, GOOD, ExpectedSize::Missing)?;
    Ok((dir, path, storage, faults))
}

fn big_body() -> Vec<u8> {
    (0..2000).flat_map(|i| format!("{{\"type\":\"message\",\"n\":{i}}}\n").into_bytes()).collect()
}

#[test]
fn full_disk_during_rewrite_keeps_the_good_file() -> TestResult {
    let (dir, path, s, faults) = file_setup()?;
    faults.disk_full_after(100);
    let err = s.write_atomic(&path, &big_body(), ExpectedSize::Bytes(GOOD.len() as u64));
    assert_eq!(err.as_ref().err().and_then(StoreError::io_kind), Some(std::io::ErrorKind::StorageFull), "{err:?}");
    assert_eq!(s.read(&path)?, GOOD);
    assert!(strays(&dir.0).is_empty(), "temp file removed: {:?}", strays(&dir.0));
    Ok(())
}

#[test]
fn failing_rename_keeps_the_good_file() -> TestResult {
    let (dir, path, s, faults) = file_setup()?;
    faults.fail_renames(1);
    assert!(s.write_atomic(&path, &big_body(), ExpectedSize::Any).is_err());
    assert_eq!(s.read(&path)?, GOOD);
    assert!(strays(&dir.0).is_empty(), "{:?}", strays(&dir.0));
    // The next attempt works.
    s.write_atomic(&path, b"new\n", ExpectedSize::Bytes(GOOD.len() as u64))?;
    assert_eq!(s.read(&path)?, b"new\n");
    Ok(())
}

#[test]
fn failing_fsync_keeps_the_good_file() -> TestResult {
    let (dir, path, s, faults) = file_setup()?;
    faults.fail_syncs(1);
    let err = s.write_atomic(&path, &big_body(), ExpectedSize::Any);
    assert!(matches!(err, Err(StoreError::Io { op: Op::SyncData, .. })), "{err:?}");
    assert_eq!(s.read(&path)?, GOOD);
    assert!(strays(&dir.0).is_empty());
    Ok(())
}

#[test]
fn failing_directory_sync_is_reported_after_the_rename() -> TestResult {
    let (dir, path, s, faults) = file_setup()?;
    faults.fail_next(Op::SyncDir, 1);
    let err = s.write_atomic(&path, b"new\n", ExpectedSize::Any);
    assert!(matches!(err, Err(StoreError::Injected { op: Op::SyncDir, .. })), "{err:?}");
    // The complete new file is visible; only its durability is in doubt.
    assert_eq!(s.read(&path)?, b"new\n");
    assert!(strays(&dir.0).is_empty());
    Ok(())
}

#[test]
fn full_disk_during_append_cuts_back_and_latches() -> TestResult {
    let (_dir, path, s, faults) = file_setup()?;
    let mut w = s.open_writer(&path, Durability::None)?;
    w.append(b"{\"n\":1}\n")?;
    let before = s.read(&path)?;
    faults.disk_full_after(5);
    let err = w.append(b"{\"n\":2,\"pad\":\"xxxxxxxxxxxxxxxx\"}\n");
    assert_eq!(err.as_ref().err().and_then(StoreError::io_kind), Some(std::io::ErrorKind::StorageFull));
    assert_eq!(s.read(&path)?, before, "partial line removed");
    faults.clear();
    let again = w.append(b"{\"n\":3}\n");
    assert_eq!(again.as_ref().err().map(ToString::to_string), err.as_ref().err().map(ToString::to_string));
    assert!(w.flush().is_err() && w.error().is_some());
    assert!(w.close().is_err());
    assert_eq!(s.read(&path)?, before);
    // The size token from before the failure is still right, so a full rewrite goes through.
    s.write_atomic(&path, b"rewritten\n", ExpectedSize::Bytes(before.len() as u64))?;
    Ok(())
}

#[test]
fn short_write_is_cut_back() -> TestResult {
    let (_dir, path, s, faults) = file_setup()?;
    faults.short_write_next(3);
    let err = s.append(&path, b"{\"torn\":true}\n");
    assert_eq!(err.err().and_then(|e| e.io_kind()), Some(std::io::ErrorKind::WriteZero));
    assert_eq!(s.read(&path)?, GOOD);
    let mut w = s.open_writer(&path, Durability::Flush)?;
    faults.short_write_next(1);
    assert!(w.append(b"{\"torn\":true}\n").is_err());
    assert_eq!(s.read(&path)?, GOOD);
    Ok(())
}

#[test]
fn failing_fsync_of_an_append_removes_the_line() -> TestResult {
    let (_dir, path, s, faults) = file_setup()?;
    let mut w = s.open_writer(&path, Durability::Fsync)?;
    w.append(b"{\"ok\":1}\n")?;
    faults.fail_syncs(1);
    assert!(matches!(w.append(b"{\"ok\":2}\n"), Err(StoreError::Io { op: Op::SyncData, .. })));
    let mut expected = GOOD.to_vec();
    expected.extend_from_slice(b"{\"ok\":1}\n");
    assert_eq!(s.read(&path)?, expected);
    Ok(())
}

#[test]
fn failing_flush_sync_is_latched() -> TestResult {
    let (_dir, path, s, faults) = file_setup()?;
    let mut w = s.open_writer(&path, Durability::Flush)?;
    w.append(b"{\"ok\":1}\n")?;
    faults.fail_syncs(1);
    assert!(w.flush().is_err());
    assert!(w.append(b"{\"ok\":2}\n").is_err(), "latched");
    Ok(())
}

#[test]
fn wrapper_models_each_contract_on_failure() -> TestResult {
    let faults = Faults::new();
    let s = FaultStorage::new(MemoryStorage::new(), faults.clone());
    let p = Path::new("/d/s.jsonl");
    s.write_atomic(p, GOOD, ExpectedSize::Missing)?;

    faults.disk_full_after(10);
    assert!(s.write_atomic(p, &big_body(), ExpectedSize::Any).is_err());
    assert_eq!(s.read(p)?, GOOD, "atomic replace leaves the old file");

    faults.disk_full_after(0);
    assert!(s.append(p, b"line\n").is_err());
    let mut w = s.open_writer(p, Durability::Fsync)?;
    assert!(w.append(b"line\n").is_err());
    assert!(w.append(b"line\n").is_err(), "latched");
    assert_eq!(s.read(p)?, GOOD, "failed appends leave nothing");

    // pi's plain truncate-and-write is not atomic: a full disk leaves a prefix.
    faults.disk_full_after(4);
    assert!(s.write(p, GOOD).is_err());
    assert_eq!(s.read(p)?, &GOOD[..4]);

    faults.clear();
    faults.fail_next(Op::Rename, 1);
    assert!(matches!(s.rename(p, Path::new("/d/t.jsonl")), Err(StoreError::Injected { op: Op::Rename, .. })));
    s.rename(p, Path::new("/d/t.jsonl"))?;
    assert!(faults.injected() >= 5);
    Ok(())
}

#[test]
fn power_loss_keeps_acknowledged_fsync_lines() -> TestResult {
    let s = FaultStorage::new(MemoryStorage::new(), Faults::new());
    let p = Path::new("/d/s.jsonl");
    s.write_atomic(p, GOOD, ExpectedSize::Missing)?;
    let mut w = s.open_writer(p, Durability::Fsync)?;
    w.append(b"{\"n\":1}\n")?;
    s.append(p, b"{\"unsynced\":true}\n")?;
    s.inner().power_loss();
    let mut expected = GOOD.to_vec();
    expected.extend_from_slice(b"{\"n\":1}\n");
    assert_eq!(s.read(p)?, expected);
    Ok(())
}
