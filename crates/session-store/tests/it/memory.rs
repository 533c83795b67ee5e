//! MemoryStorage specifics: injectable mtimes and the power-loss model.

use std::path::Path;
use std::sync::Arc;

use session_store::clock::ManualClock;
use session_store::{Durability, ExpectedSize, MemoryStorage, Storage};

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[test]
fn mtimes_come_from_the_clock() -> TestResult {
    let clock = Arc::new(ManualClock::new(1_000));
    let s = MemoryStorage::with_clock(clock.clone());
    let p = Path::new("/d/s.jsonl");
    s.write(p, b"a")?;
    assert_eq!(s.stat(p)?.map(|st| st.mtime_ms), Some(1_000));
    clock.advance(5);
    s.append(p, b"b")?;
    assert_eq!(s.stat(p)?.map(|st| st.mtime_ms), Some(1_005));
    Ok(())
}

#[test]
fn power_loss_keeps_only_synced_bytes() -> TestResult {
    let s = MemoryStorage::new();
    let atomic = Path::new("/d/atomic.jsonl");
    let fsync = Path::new("/d/fsync.jsonl");
    let flush = Path::new("/d/flush.jsonl");
    let none = Path::new("/d/none.jsonl");
    s.write_atomic(atomic, b"header\n", ExpectedSize::Missing)?;
    s.append(atomic, b"unsynced\n")?;

    let mut w = s.open_writer(fsync, Durability::Fsync)?;
    w.append(b"1\n")?;
    w.append(b"2\n")?;

    let mut f = s.open_writer(flush, Durability::Flush)?;
    f.append(b"1\n")?;
    f.flush()?;
    f.append(b"2\n")?;

    let mut n = s.open_writer(none, Durability::None)?;
    n.append(b"1\n")?;
    n.flush()?;

    let streamed = Path::new("/d/streamed.jsonl");
    let unsynced = Path::new("/d/unsynced.jsonl");
    s.write_atomic_stream(streamed, ExpectedSize::Missing, Durability::Flush, &mut |w| w.write_all(b"whole\n"))?;
    s.write_atomic_stream(unsynced, ExpectedSize::Missing, Durability::None, &mut |w| w.write_all(b"whole\n"))?;
    assert_eq!(s.read(unsynced)?, b"whole\n", "readers see it whole");

    s.power_loss();
    assert_eq!(s.read(streamed)?, b"whole\n");
    assert_eq!(s.read(unsynced)?, b"", "a new file written without durability may be empty");
    assert_eq!(s.read(atomic)?, b"header\n");
    assert_eq!(s.read(fsync)?, b"1\n2\n");
    assert_eq!(s.read(flush)?, b"1\n");
    assert_eq!(s.read(none)?, b"");
    Ok(())
}
