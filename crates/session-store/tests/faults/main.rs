//! Fault tests: full disks, failing renames and syncs, short writes and power loss.
//!
//! The invariant throughout: a good file is never replaced by a half-written one, a failed append
//! leaves the file as it was, and the first writer error is latched.

use session_testkit::TempDir;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use session_store::{
    BlobRef, BlobStore, Boundary, CrashKind, Durability, ExpectedSize, FaultStorage, Faults, FileStorage,
    MemoryStorage, Op, Storage, StoreError,
};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const GOOD: &[u8] = b"{\"type\":\"session\",\"id\":\"good\"}\n{\"type\":\"message\"}\n";

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
    let dir = TempDir::new("session-store-it");
    let path = dir.path().join("s.jsonl");
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
    assert!(strays(dir.path()).is_empty(), "temp file removed: {:?}", strays(dir.path()));
    Ok(())
}

#[test]
fn failing_rename_keeps_the_good_file() -> TestResult {
    let (dir, path, s, faults) = file_setup()?;
    faults.fail_renames(1);
    assert!(fails_with_io(s.write_atomic(&path, &big_body(), ExpectedSize::Any), Op::Rename, ErrorKind::Other));
    assert_eq!(s.read(&path)?, GOOD);
    assert!(strays(dir.path()).is_empty(), "{:?}", strays(dir.path()));
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
    assert!(strays(dir.path()).is_empty());
    Ok(())
}

#[test]
fn failing_directory_sync_is_reported_after_the_rename() -> TestResult {
    let (dir, path, s, faults) = file_setup()?;
    faults.fail_next(Op::SyncDir, 1);
    let err = s.write_atomic(&path, b"new\n", ExpectedSize::Any);
    // The error says the replace landed (4 bytes), and why it is not durable.
    match &err {
        Err(e @ StoreError::NotDurable { source, .. }) => {
            assert_eq!(e.landed(), Some(4));
            assert!(matches!(**source, StoreError::Injected { op: Op::SyncDir, .. }), "{source:?}");
        }
        other => return Err(format!("expected NotDurable, got {other:?}").into()),
    }
    // The complete new file is visible; only its durability is in doubt.
    assert_eq!(s.read(&path)?, b"new\n");
    assert!(strays(dir.path()).is_empty());
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
    assert!(fails_with_io(w.flush(), Op::Append, ErrorKind::StorageFull) && w.error().is_some());
    assert!(fails_with_io(w.close(), Op::Append, ErrorKind::StorageFull));
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
    assert!(fails_with_io(w.append(b"{\"torn\":true}\n"), Op::Append, ErrorKind::WriteZero));
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
    assert!(fails_with_io(w.flush(), Op::SyncData, ErrorKind::Other));
    assert!(fails_with_io(w.append(b"{\"ok\":2}\n"), Op::SyncData, ErrorKind::Other), "latched");
    Ok(())
}

#[test]
fn wrapper_models_each_contract_on_failure() -> TestResult {
    let faults = Faults::new();
    let s = FaultStorage::new(MemoryStorage::new(), faults.clone());
    let p = Path::new("/d/s.jsonl");
    s.write_atomic(p, GOOD, ExpectedSize::Missing)?;

    faults.disk_full_after(10);
    assert!(fails_with_io(s.write_atomic(p, &big_body(), ExpectedSize::Any), Op::WriteTemp, ErrorKind::StorageFull));
    assert_eq!(s.read(p)?, GOOD, "atomic replace leaves the old file");

    faults.disk_full_after(0);
    assert!(fails_with_io(s.append(p, b"line\n"), Op::Append, ErrorKind::StorageFull));
    let mut w = s.open_writer(p, Durability::Fsync)?;
    assert!(fails_with_io(w.append(b"line\n"), Op::Append, ErrorKind::StorageFull));
    assert!(fails_with_io(w.append(b"line\n"), Op::Append, ErrorKind::StorageFull), "latched");
    assert_eq!(s.read(p)?, GOOD, "failed appends leave nothing");

    // pi's plain truncate-and-write is not atomic: a full disk leaves a prefix.
    faults.disk_full_after(4);
    assert!(fails_with_io(s.write(p, GOOD), Op::Write, ErrorKind::StorageFull));
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

fn ops(boundaries: &[Boundary]) -> Vec<Op> {
    boundaries.iter().map(|b| b.op).collect()
}

#[test]
fn boundaries_are_counted_and_reads_are_not() -> TestResult {
    let faults = Faults::new();
    let s = FaultStorage::new(MemoryStorage::new(), faults.clone());
    let p = Path::new("/d/s.jsonl");
    faults.record_boundaries();
    s.write_atomic(p, GOOD, ExpectedSize::Missing)?;
    assert_eq!(s.read(p)?, GOOD);
    assert!(s.stat(p)?.is_some());
    let mut w = s.open_writer(p, Durability::Fsync)?;
    w.append(b"{\"n\":1}\n")?;
    w.close()?;
    let b = faults.boundaries();
    assert_eq!(
        ops(&b),
        [Op::WriteTemp, Op::SyncData, Op::Rename, Op::SyncDir, Op::Open, Op::Append, Op::SyncData],
        "{b:?}"
    );
    assert_eq!(b[0].len, Some(GOOD.len()));
    assert!(!b[0].can_tear(), "a temporary file is never seen torn");
    assert!(b[5].can_tear());
    assert!(faults.crashed().is_none(), "counting fails nothing");
    Ok(())
}

#[test]
fn a_crash_freezes_the_storage_as_the_death_left_it() -> TestResult {
    let faults = Faults::new();
    let s = FaultStorage::new(MemoryStorage::new(), faults.clone());
    let p = Path::new("/d/s.jsonl");
    s.write_atomic(p, GOOD, ExpectedSize::Missing)?;
    // Die at the sync of the temporary file: the old file stays.
    faults.crash_at(2, CrashKind::Before);
    let err = s.write_atomic(p, b"new\n", ExpectedSize::Any);
    assert!(matches!(err, Err(StoreError::Injected { op: Op::SyncData, .. })), "{err:?}");
    assert_eq!(faults.crashed().map(|b| b.op), Some(Op::SyncData));
    // Dead: every later call fails, reads included, and nothing reaches the inner storage.
    assert!(fails_injected(s.read(p), Op::Read));
    assert!(fails_injected(s.append(p, b"more\n"), Op::Append));
    assert!(fails_injected(s.truncate(p, 0), Op::Truncate));
    assert_eq!(s.inner().read(p)?, GOOD);
    faults.clear();
    assert_eq!(s.read(p)?, GOOD, "cleared: alive again");
    // Die after the rename, at the directory sync: the new file is in place.
    faults.crash_at(4, CrashKind::Before);
    assert!(fails_not_durable(s.write_atomic(p, b"new\n", ExpectedSize::Any), Op::SyncDir));
    assert_eq!(s.inner().read(p)?, b"new\n");
    Ok(())
}

#[test]
fn a_torn_crash_leaves_half_a_line_that_nobody_rolls_back_or_syncs() -> TestResult {
    let faults = Faults::new();
    let s = FaultStorage::new(MemoryStorage::new(), faults.clone());
    let p = Path::new("/d/s.jsonl");
    s.write_atomic(p, GOOD, ExpectedSize::Missing)?;
    let mut w = s.open_writer(p, Durability::Flush)?;
    let line = b"{\"n\":1,\"pad\":\"xxxxxxxx\"}\n";
    faults.crash_at(1, CrashKind::Torn);
    assert!(fails_injected(w.append(line), Op::Append));
    let mut expected = GOOD.to_vec();
    expected.extend_from_slice(&line[..line.len() / 2]);
    assert_eq!(s.inner().read(p)?, expected, "half the line, not rolled back");
    assert!(fails_injected(w.close(), Op::Append), "a dead writer does not close");
    assert_eq!(s.inner().synced_len(p), Some(GOOD.len()), "nor sync");
    s.inner().power_loss();
    assert_eq!(s.inner().read(p)?, GOOD);

    // A Before crash of a plain write has no effect at all (no truncation).
    faults.crash_at(1, CrashKind::Before);
    assert!(fails_injected(s.write(p, b"other\n"), Op::Write));
    assert_eq!(s.inner().read(p)?, GOOD);
    Ok(())
}

#[test]
fn the_crash_hook_sees_the_files_of_the_moment_and_the_error_path_cleans_up() -> TestResult {
    let (dir, path, _, _) = file_setup()?;
    let faults = Faults::new();
    let s = FileStorage::new().with_faults(faults.clone());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (at, seen_in_hook) = (dir.path().to_path_buf(), seen.clone());
    faults.on_crash(move |b| {
        let temps = strays(&at).into_iter().filter(|n| n.ends_with(".tmp")).count();
        seen_in_hook.lock().unwrap_or_else(|p| p.into_inner()).push((b.op, temps));
    });
    faults.record_boundaries();
    s.write_atomic(&path, b"v2\n", ExpectedSize::Bytes(GOOD.len() as u64))?;
    let rename = faults.boundaries().iter().position(|b| b.op == Op::Rename).ok_or("no rename boundary")?;
    faults.crash_at(rename + 1, CrashKind::Before);
    assert!(fails_injected(s.write_atomic(&path, b"v3\n", ExpectedSize::Bytes(3)), Op::Rename));
    assert_eq!(*seen.lock().unwrap_or_else(|p| p.into_inner()), [(Op::Rename, 1)], "the temporary file at death");
    assert_eq!(fs_err::read(&path)?, b"v2\n");
    assert!(strays(dir.path()).is_empty(), "the error path removed it: {:?}", strays(dir.path()));
    Ok(())
}

#[test]
fn blob_puts_obey_the_fault_plan() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let faults = Faults::new();
    let store = BlobStore::on(Arc::new(FileStorage::new().with_faults(faults.clone())), dir.path().join("blobs"));
    let bytes = vec![7u8; 3000];
    faults.record_boundaries();
    let blob = store.put(&bytes, Some("image/png"))?;
    // The first put makes the directory; a blob is written atomically, without the
    // session's publish lock (nothing appends to it).
    let write = [Op::WriteTemp, Op::SyncData, Op::Rename, Op::SyncDir];
    let first: Vec<Op> = [Op::EnsureDir].into_iter().chain(write).chain([Op::Link]).collect();
    assert_eq!(ops(&faults.boundaries()), first);
    let other = vec![8u8; 3000];
    faults.crash_at(3, CrashKind::Before);
    assert!(fails_injected(store.put(&other, None), Op::Rename));
    faults.clear();
    assert_eq!(store.get(&BlobRef::for_bytes(&other))?, None, "no blob before its rename");
    assert_eq!(store.get(&blob)?, Some(bytes));
    let names = strays(&dir.path().join("blobs"));
    assert_eq!(names.len(), 2, "the blob and its sidecar, no temporary file: {names:?}");
    Ok(())
}

#[test]
fn a_transient_fault_fails_one_boundary_and_the_process_lives_on() -> TestResult {
    let faults = Faults::new();
    let s = FaultStorage::new(MemoryStorage::new(), faults.clone());
    let p = Path::new("/d/s.jsonl");
    s.write_atomic(p, GOOD, ExpectedSize::Missing)?;
    let mut w = s.open_writer(p, Durability::None)?;
    faults.fail_at(1);
    assert!(matches!(w.append(b"{\"n\":1}\n"), Err(StoreError::Injected { op: Op::Append, .. })));
    assert_eq!(faults.failed().map(|b| b.op), Some(Op::Append));
    assert!(faults.crashed().is_none(), "not a death");
    assert_eq!(s.read(p)?, GOOD, "a failed append stores nothing");
    assert!(fails_injected(w.append(b"{\"n\":2}\n"), Op::Append), "the writer latched its error");
    s.append(p, b"{\"n\":3}\n")?;
    assert!(s.read(p)?.ends_with(b"{\"n\":3}\n"), "later calls work");
    Ok(())
}

#[test]
fn a_rename_whose_directory_sync_fails_is_reported_as_landed() -> TestResult {
    let (dir, path, s, faults) = file_setup()?;
    let moved = dir.path().join("sub").join("moved.jsonl");
    s.ensure_dir(moved.parent().ok_or("parent")?)?;
    faults.fail_next(Op::SyncDir, 1);
    let err = s.rename(&path, &moved);
    // The rename happened: the error says so (with the moved file's size), not that it failed.
    match &err {
        Err(e @ StoreError::NotDurable { path: named, source, .. }) => {
            assert_eq!(e.landed(), Some(GOOD.len() as u64));
            assert_eq!(named, &moved);
            assert!(matches!(**source, StoreError::Injected { op: Op::SyncDir, .. }), "{source:?}");
        }
        other => return Err(format!("expected NotDurable, got {other:?}").into()),
    }
    assert_eq!(s.read(&moved)?, GOOD);
    assert!(!s.exists(&path)?, "the old name is gone");
    Ok(())
}

#[test]
fn move_dir_undoes_a_rename_whose_directory_sync_fails() -> TestResult {
    let (dir, _path, s, faults) = file_setup()?;
    let (from, to) = (dir.path().join("from"), dir.path().join("to"));
    s.write_atomic(&from.join("a.log"), b"a", ExpectedSize::Missing)?;
    s.write_atomic(&to.join("b.log"), b"b", ExpectedSize::Missing)?;
    faults.fail_next(Op::SyncDir, 1);
    let err = s.move_dir(&from, &to);
    // All or nothing: the move is undone, so the error is not a landed one.
    let e = err.err().ok_or("the sync failure is reported")?;
    assert_eq!(e.landed(), None, "{e:?}");
    assert_eq!(s.read(&from.join("a.log"))?, b"a");
    assert!(!s.exists(&to.join("a.log"))?);
    Ok(())
}

/// Whether `r` failed with an IO error of `op` whose kind is `kind` (printing what it was
/// otherwise).
fn fails_with_io<T: std::fmt::Debug>(r: Result<T, StoreError>, op: Op, kind: ErrorKind) -> bool {
    let ok = matches!(&r, Err(StoreError::Io { op: o, source, .. }) if *o == op && source.kind() == kind);
    if !ok {
        eprintln!("expected an IO error of {op:?} ({kind:?}), got {r:?}");
    }
    ok
}

/// Whether `r` failed with the fault injected into `op` (printing what it was otherwise).
fn fails_injected<T: std::fmt::Debug>(r: Result<T, StoreError>, op: Op) -> bool {
    let ok = matches!(&r, Err(StoreError::Injected { op: o, .. }) if *o == op);
    if !ok {
        eprintln!("expected the fault injected into {op:?}, got {r:?}");
    }
    ok
}

/// Whether `r` landed but is not durable because of the fault injected into `op`.
fn fails_not_durable<T: std::fmt::Debug>(r: Result<T, StoreError>, op: Op) -> bool {
    let ok = matches!(&r, Err(StoreError::NotDurable { source, .. })
        if matches!(**source, StoreError::Injected { op: o, .. } if o == op));
    if !ok {
        eprintln!("expected a write that landed without {op:?}, got {r:?}");
    }
    ok
}
