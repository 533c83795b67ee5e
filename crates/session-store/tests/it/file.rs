//! FileStorage specifics: lock files on disk, stale-lock stealing, publish locks around
//! appends, no stray temporary files, and an atomic-write property.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use session_store::clock::{Clock, ManualClock, SystemClock};
use session_store::{Durability, ExpectedSize, FileStorage, LockWait, Storage, StoreError};

use crate::support::{TempDir, raw_names};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Returns the pid of a process that has exited and been reaped.
fn dead_pid() -> Result<u32, std::io::Error> {
    let mut child = std::process::Command::new("true").spawn()?;
    let pid = child.id();
    child.wait()?;
    Ok(pid)
}

#[test]
fn lock_writes_the_omp_lock_file_and_leaves_nothing() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let p = dir.path().join("s.jsonl");
    let s = FileStorage::new();
    let lock = s.lock(&p, LockWait::NoWait)?;
    let record = fs_err::read_to_string(dir.path().join(".s.jsonl.lock"))?;
    let (pid, ms) = record.strip_suffix('\n').and_then(|r| r.split_once(':')).ok_or("record shape")?;
    assert_eq!(pid, std::process::id().to_string());
    assert!(ms.parse::<i64>()? > 0);
    lock.release()?;
    assert!(raw_names(dir.path()).is_empty(), "lock file removed; the OS gate lives outside the session dir");
    Ok(())
}

#[test]
fn stale_lock_of_dead_pid_is_stolen() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let p = dir.path().join("s.jsonl");
    fs_err::write(dir.path().join(".s.jsonl.lock"), format!("{}:1\n", dead_pid()?))?;
    let s = FileStorage::new();
    drop(s.lock(&p, LockWait::NoWait)?);
    s.append(&p, b"x\n")?;
    assert_eq!(s.read(&p)?, b"x\n");
    Ok(())
}

#[test]
fn lock_of_live_pid_is_respected() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let p = dir.path().join("s.jsonl");
    // pid 1 always runs.
    fs_err::write(dir.path().join(".s.jsonl.lock"), "1:1\n")?;
    let s = FileStorage::new();
    assert!(matches!(s.lock(&p, LockWait::Timeout(Duration::from_millis(20))), Err(StoreError::Locked { .. })));
    // Appends and size-checked rewrites take the publish lock too, and give up after 500 ms.
    assert!(matches!(s.append(&p, b"x\n"), Err(StoreError::Locked { .. })));
    // A writer takes the locks for its whole life, so it cannot even open.
    assert!(matches!(s.open_writer(&p, Durability::None), Err(StoreError::Locked { .. })));
    assert!(matches!(s.write_atomic(&p, b"z\n", ExpectedSize::Any), Err(StoreError::Locked { .. })));
    assert!(!p.exists(), "nothing was written");
    assert_eq!(raw_names(dir.path()), [".s.jsonl.lock"], "temp file removed, the other lock untouched");
    Ok(())
}

#[test]
fn unparseable_lock_is_stolen_only_when_old() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let p = dir.path().join("s.jsonl");
    fs_err::write(dir.path().join(".s.jsonl.lock"), "garbage")?;
    let clock = Arc::new(ManualClock::new(SystemClock.now_ms()));
    let s = FileStorage::with_clock(clock.clone());
    assert!(matches!(s.lock(&p, LockWait::NoWait), Err(StoreError::Locked { .. })), "young garbage is respected");
    clock.advance(10_000);
    drop(s.lock(&p, LockWait::NoWait)?);
    Ok(())
}

#[test]
fn holder_of_the_session_lock_can_still_write() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let p = dir.path().join("s.jsonl");
    let s = FileStorage::new();
    let lock = s.lock(&p, LockWait::NoWait)?;
    s.write_atomic(&p, b"a\n", ExpectedSize::Missing)?;
    s.append(&p, b"b\n")?;
    let mut w = s.open_writer(&p, Durability::Fsync)?;
    w.append(b"c\n")?;
    w.close()?;
    assert_eq!(s.read(&p)?, b"a\nb\nc\n");
    drop(lock);
    Ok(())
}

#[test]
fn rewrites_leave_no_temp_files() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let p = dir.path().join("s.jsonl");
    let s = FileStorage::new();
    for i in 0..5u64 {
        let expected = if i == 0 { ExpectedSize::Missing } else { ExpectedSize::Bytes(i) };
        s.write_atomic(&p, "x".repeat(usize::try_from(i)? + 1).as_bytes(), expected)?;
    }
    let _ = s.write_atomic(&p, b"conflict", ExpectedSize::Bytes(99));
    assert_eq!(raw_names(dir.path()), ["s.jsonl"]);
    Ok(())
}

#[test]
fn errors_name_path_and_operation() {
    let s = FileStorage::new();
    let err = s.read(Path::new("/proc/self/mem")).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("/proc/self/mem"), "{err}");
    let err = s.write_new(Path::new("/"), b"").err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("not a file path"), "{err}");
}

/// An error's message says what failed and its `source()` says why; the message does
/// not repeat the cause, so a report that prints the chain says each thing once.
#[test]
fn messages_do_not_repeat_their_source() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let file = dir.path().join("f");
    fs_err::write(&file, b"x")?;
    // A path through a file: the OS says "Not a directory".
    let err = FileStorage::new().read_dir(&file.join("d")).err().ok_or("reading below a file fails")?;
    let cause = std::error::Error::source(&err).ok_or("the OS error is the source")?.to_string();
    assert!(!cause.is_empty() && !err.to_string().contains(&cause), "{err} / {cause}");
    assert!(err.to_string().contains(&*file.to_string_lossy()), "the path is named: {err}");
    Ok(())
}

#[test]
fn atomic_helper_replaces_files() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let p = dir.path().join("deep/f");
    session_store::atomic::write_atomic(&p, b"one")?;
    session_store::atomic::write_atomic(&p, b"two")?;
    assert_eq!(fs_err::read(&p)?, b"two");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn atomic_write_then_read_returns_the_bytes(
        first in proptest::collection::vec(any::<u8>(), 0..4096),
        second in proptest::collection::vec(any::<u8>(), 0..4096),
    ) {
        let dir = TempDir::new("session-store-it");
        let p = dir.path().join("s.jsonl");
        let s = FileStorage::new();
        s.write_atomic(&p, &first, ExpectedSize::Missing).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(s.read(&p).map_err(|e| TestCaseError::fail(e.to_string()))?, first.clone());
        s.write_atomic(&p, &second, ExpectedSize::Bytes(first.len() as u64))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(s.read(&p).map_err(|e| TestCaseError::fail(e.to_string()))?, second);
    }
}

/// Large files are read by two threads: the result is the file, byte for byte, on
/// both sides of the threshold and at odd lengths.
#[test]
fn large_files_are_read_exactly() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let s = FileStorage::new();
    for len in [(8usize << 20) - 1, 8 << 20, (8 << 20) + 12_345] {
        let p = dir.path().join(format!("big-{len}.jsonl"));
        let content: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        fs_err::write(&p, &content)?;
        assert!(s.read(&p)? == content, "{len} bytes");
    }
    Ok(())
}

/// A large file read while another writer appends to it: every read is a prefix of
/// the final file and holds at least what the file held before.
#[test]
fn large_files_read_while_growing_are_prefixes() -> TestResult {
    use std::io::Write;
    let dir = TempDir::new("session-store-it");
    let p = dir.path().join("growing.jsonl");
    let start: Vec<u8> = (0..(9usize << 20)).map(|i| b'a' + (i % 26) as u8).collect();
    fs_err::write(&p, &start)?;
    let writer_path = p.clone();
    let appender = std::thread::spawn(move || -> std::io::Result<()> {
        let mut f = fs_err::OpenOptions::new().append(true).open(writer_path)?;
        for i in 0..3_000 {
            f.write_all(format!("{{\"n\":{i}}}\n").as_bytes())?;
        }
        Ok(())
    });
    let s = FileStorage::new();
    let mut reads = vec![s.read(&p)?];
    while !appender.is_finished() {
        reads.push(s.read(&p)?);
    }
    appender.join().map_err(|_| "appender panicked")??;
    reads.push(s.read(&p)?);
    let last = fs_err::read(&p)?;
    assert!(reads.last() == Some(&last));
    for r in &reads {
        assert!(r.len() >= start.len() && last.starts_with(r), "a read of {} bytes", r.len());
    }
    Ok(())
}

/// A large session parsed (in pieces) while another writer appends entries to it:
/// every parse gives the records of a prefix of the final file, all the records the
/// file held before, and at most a torn last line, skipped and reported.
#[test]
fn large_sessions_parsed_while_growing_are_prefixes() -> TestResult {
    use session_model::{DiagnosticKind, Dialect, parse_session_bytes};
    use std::io::Write;
    let dir = TempDir::new("session-store-it");
    let p = dir.path().join("growing.jsonl");
    let mut start =
        String::from("{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n");
    while start.len() < 6 << 20 {
        let i = start.len();
        start.push_str(&format!(
            "{{\"type\":\"custom\",\"id\":\"b{i}\",\"parentId\":null,\"data\":\"{}\"}}\n",
            "x".repeat(900)
        ));
    }
    fs_err::write(&p, &start)?;
    let before = parse_session_bytes(start.as_bytes(), Dialect::Pi).records.len();
    let writer_path = p.clone();
    let appender = std::thread::spawn(move || -> std::io::Result<()> {
        let mut f = fs_err::OpenOptions::new().append(true).open(writer_path)?;
        for i in 0..2_000 {
            // Each entry in two writes, so that a parse may find half of one.
            let line =
                format!("{{\"type\":\"custom\",\"id\":\"n{i}\",\"parentId\":null,\"data\":\"{}\"}}\n", "y".repeat(500));
            let (a, b) = line.split_at(line.len() / 2);
            f.write_all(a.as_bytes())?;
            f.write_all(b.as_bytes())?;
        }
        Ok(())
    });
    let s = FileStorage::new();
    let mut parses = vec![parsed(&s, &p)?];
    while !appender.is_finished() {
        parses.push(parsed(&s, &p)?);
    }
    appender.join().map_err(|_| "appender panicked")??;
    parses.push(parsed(&s, &p)?);
    let last = parse_session_bytes(&fs_err::read(&p)?, Dialect::Pi);
    assert!(parses.last().map(|p| &p.records) == Some(&last.records));
    for parsed in &parses {
        let n = parsed.records.len();
        assert!(n >= before && parsed.records[..] == last.records[..n], "a parse of {n} records");
        for d in &parsed.diagnostics {
            assert!(matches!(d.kind, DiagnosticKind::TornLastLine), "only a torn last line: {d}");
        }
    }
    Ok(())
}

/// Every size against the two windows of `read_slices_into`: smaller than the prefix,
/// between the windows (one read serves both) and larger than the tail window, into
/// buffers that already hold something; the windows equal `read_slices`, and the
/// stat is the file's, with the identity a cache keys on.
#[test]
fn reads_into_buffers_are_the_windows_of_the_file() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let s = FileStorage::new();
    let path = dir.path().join("s.jsonl");
    for size in [0usize, 1, 9, 10, 11, 39, 40, 41, 100] {
        let content: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        s.write(&path, &content)?;
        let mut buf = vec![7u8; 3];
        let (st, n) = s.read_into(&path, &mut buf)?;
        assert_eq!((st.size, &buf[..n]), (size as u64, &content[..]), "whole file of {size} bytes");
        let id = st.identity.ok_or("the file storage has identities")?;
        assert_eq!(st.mtime_ns(), id.mtime_ns);
        assert!(id.ino != 0, "inode");
        for suffix in [0u64, 10, 40] {
            let (mut head, mut tail) = (vec![7u8; 3], vec![7u8; 50]);
            let (st, h, t) = s.read_slices_into(&path, 10, suffix, &mut head, &mut tail)?;
            assert_eq!(st.size, size as u64);
            assert_eq!(&head[..h], &content[..size.min(10)], "head of {size} bytes");
            let w = (suffix as usize).min(size);
            assert_eq!(&tail[..t], &content[size - w..], "tail {suffix} of {size} bytes");
            assert_eq!(s.read_slices(&path, 10, suffix)?, (head[..h].to_vec(), tail[..t].to_vec()));
        }
    }
    Ok(())
}

/// Parses the session at `p` by position, as the session manager does.
fn parsed(s: &FileStorage, p: &Path) -> Result<session_model::ParsedFile, StoreError> {
    let (st, reader) = s.open_reader(p)?;
    let size = st.size;
    session_model::parse_session_at(&*reader, size, session_model::Dialect::Pi)
        .map_err(|e| StoreError::io(session_store::Op::Read, p, e))
}
