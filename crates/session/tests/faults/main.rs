//! Fault tests of the facade: injected IO failures (full disk, failing rename,
//! failing append, failing fsync) and killed writers. The manager must report the
//! error, roll its in-memory state back, and never leave a half-written file in place
//! of a good one.

use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use session::store::{Durability, FaultStorage, Faults, MemoryStorage, Op, Storage, StoreError};
use session::{Dialect, Env, SessionError, SessionManager};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// An environment over memory storage wrapped by a fault plan.
fn faulty() -> (Env, Arc<FaultStorage<MemoryStorage>>, Faults) {
    let faults = Faults::new();
    let storage = Arc::new(FaultStorage::new(MemoryStorage::new(), faults.clone()));
    let env = Env::memory().with_storage(storage.clone()).with_process_cwd("/work");
    (env, storage, faults)
}

fn user(t: &str) -> serde_json::Value {
    json!({"role": "user", "content": t, "timestamp": 1})
}

fn assistant(t: &str) -> serde_json::Value {
    json!({"role": "assistant", "content": [{"type": "text", "text": t}], "provider": "p", "model": "m", "timestamp": 2})
}

fn read(storage: &dyn Storage, path: &Path) -> Result<String> {
    Ok(String::from_utf8(storage.read(path)?)?)
}

#[test]
fn pi_failed_append_rolls_back_and_stays_failed() -> Result<()> {
    let (env, storage, faults) = faulty();
    let mut m = SessionManager::create(Dialect::Pi, "/work", Path::new("/s"), env.clone())?;
    m.append_message_json(user("hi"))?;
    let a = m.append_message_json(assistant("hello"))?;
    let file = m.session_file().ok_or("file")?.to_path_buf();
    let before = read(storage.as_ref(), &file)?;
    faults.fail_next(Op::Append, 1);
    assert!(fails_injected(m.append_custom_entry("x", None), Op::Append));
    assert_eq!(m.tree().leaf_id(), Some(a.as_str()), "the leaf is restored");
    assert_eq!(m.tree().entries().len(), 2, "the entry is rolled back");
    assert_eq!(read(storage.as_ref(), &file)?, before, "nothing half-written");
    // The first error is latched: later writes report it instead of writing past a gap.
    faults.clear();
    assert!(fails_injected(m.append_custom_entry("y", None), Op::Append));
    assert!(fails_injected(m.flush(), Op::Append));
    drop(m);
    let again = SessionManager::open(Dialect::Pi, &file, env)?;
    assert_eq!(again.tree().entries().len(), 2);
    assert!(again.diagnostics().is_empty(), "{:?}", again.diagnostics());
    Ok(())
}

#[test]
fn pi_full_disk_on_the_first_write_leaves_no_file() -> Result<()> {
    let (env, storage, faults) = faulty();
    let mut m = SessionManager::create(Dialect::Pi, "/work", Path::new("/s"), env)?;
    m.append_thinking_level_change(Some("high"), None)?;
    let file = m.session_file().ok_or("file")?.to_path_buf();
    faults.disk_full_after(20);
    assert!(fails_with_io(m.append_message_json(user("hi")), Op::WriteTemp, ErrorKind::StorageFull));
    assert!(!storage.exists(&file)?, "no partial file that would block the next first write");
    assert_eq!(m.tree().entries().len(), 1);
    faults.clear();
    m.append_message_json(user("hi again"))?;
    assert_eq!(read(storage.as_ref(), &file)?.lines().count(), 3);
    Ok(())
}

const V1: &str = concat!(
    r#"{"type":"session","id":"legacy","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/tmp"}"#,
    "\n",
    r#"{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#,
    "\n",
);

/// omp's never-throw append: the failed migration rewrite keeps the old file and the
/// entry in memory, latches the error, and the next append heals the file.
#[test]
fn omp_failed_rewrite_keeps_the_old_file_and_heals() -> Result<()> {
    let (env, storage, faults) = faulty();
    let file = Path::new("/s/legacy.jsonl");
    storage.write(file, V1.as_bytes())?;
    let mut m = SessionManager::open(Dialect::Omp, file, env.clone())?;
    faults.fail_renames(1);
    m.append_custom_entry("x", None)?;
    assert_eq!(read(storage.as_ref(), file)?, V1, "the old file is untouched");
    assert_eq!(m.tree().entries().len(), 2, "the entry is kept in memory");
    assert!(m.persistence_error().is_some(), "the failure is latched");
    assert!(fails_with_io(m.flush(), Op::Rename, ErrorKind::Other), "the failure is reported until a write succeeds");
    faults.clear();
    m.append_custom_entry("y", None)?;
    m.flush()?;
    assert!(m.persistence_error().is_none(), "healed");
    let text = read(storage.as_ref(), file)?;
    assert!(text.starts_with(r#"{"type":"title""#) && text.contains(r#""customType":"y""#));
    assert!(text.contains(r#""customType":"x""#), "the kept entry is written by the healing rewrite");
    drop(m);
    let again = SessionManager::open(Dialect::Omp, file, env)?;
    assert_eq!(again.tree().entries().len(), 3);
    Ok(())
}

/// A healing rewrite that landed without its directory sync heals: the append latches
/// nothing, and the next append goes to the end of the file instead of rewriting it again.
#[test]
fn omp_rewrite_that_landed_unsynced_latches_nothing() -> Result<()> {
    let (env, storage, faults) = faulty();
    let env = env.with_durability(Durability::Fsync);
    let file = Path::new("/s/legacy.jsonl");
    storage.write(file, V1.as_bytes())?;
    let mut m = SessionManager::open(Dialect::Omp, file, env.clone())?;
    faults.fail_renames(1);
    m.append_custom_entry("x", None)?;
    assert!(m.persistence_error().is_some(), "the failed rewrite is latched");
    faults.clear();
    // The healing rewrite is renamed into place; only the directory sync fails.
    faults.fail_next(Op::SyncDir, 1);
    m.append_custom_entry("y", None)?;
    assert!(faults.injected() > 0, "the directory sync failed");
    let text = read(storage.as_ref(), file)?;
    assert!(text.contains(r#""customType":"x""#) && text.contains(r#""customType":"y""#), "{text}");
    assert!(m.persistence_error().is_none(), "the landed rewrite healed: {:?}", m.persistence_error());
    faults.clear();
    faults.record_boundaries();
    m.append_custom_entry("z", None)?;
    let ops: Vec<Op> = faults.boundaries().iter().map(|b| b.op).collect();
    assert!(!ops.contains(&Op::WriteTemp), "the next append appends instead of rewriting: {ops:?}");
    assert!(ops.contains(&Op::Append), "{ops:?}");
    m.flush()?;
    drop(m);
    let again = SessionManager::open(Dialect::Omp, file, env)?;
    assert_eq!(again.tree().entries().len(), 4);
    Ok(())
}

#[test]
fn fsync_failure_in_fsync_mode_is_an_error_and_rolls_back() -> Result<()> {
    let (env, storage, faults) = faulty();
    let env = env.with_durability(Durability::Fsync);
    let mut m = SessionManager::create(Dialect::Pi, "/work", Path::new("/s"), env)?;
    m.append_message_json(user("q"))?;
    m.append_message_json(assistant("a"))?;
    let file = m.session_file().ok_or("file")?.to_path_buf();
    let before = read(storage.as_ref(), &file)?;
    faults.fail_syncs(1);
    assert!(fails_with_io(m.append_custom_entry("x", None), Op::SyncData, ErrorKind::Other));
    assert_eq!(m.tree().entries().len(), 2);
    assert_eq!(read(storage.as_ref(), &file)?, before, "an unsynced line is not left behind");
    Ok(())
}

#[test]
fn unreadable_files_are_never_overwritten() -> Result<()> {
    let (env, storage, _faults) = faulty();
    let file = Path::new("/s/bad.jsonl");
    storage.write(file, b"not a session\n")?;
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let opened = SessionManager::open(dialect, file, env.clone()).err();
        match dialect {
            Dialect::Pi => assert!(matches!(opened, Some(SessionError::InvalidPiSession { .. })), "{opened:?}"),
            _ => assert!(matches!(opened, Some(SessionError::CannotResume { .. })), "{opened:?}"),
        }
        // pi refuses to fork it; omp forks it as a new, empty session (as omp 18.3.4).
        let forked = SessionManager::fork_from(dialect, file, "/x", Path::new("/out"), env.clone());
        match dialect {
            Dialect::Pi => assert!(matches!(forked, Err(SessionError::ForkSourceInvalid { .. }))),
            _ => assert!(forked.is_ok_and(|m| m.tree().entries().is_empty())),
        }
        assert_eq!(read(storage.as_ref(), file)?, "not a session\n");
    }
    Ok(())
}

#[test]
fn fsync_mode_survives_power_loss_and_none_mode_may_not() -> Result<()> {
    for (durability, must_survive) in [(Durability::Fsync, true), (Durability::None, false)] {
        let storage = Arc::new(MemoryStorage::new());
        let env = Env::memory().with_storage(storage.clone()).with_process_cwd("/work").with_durability(durability);
        let mut m = SessionManager::create(Dialect::Pi, "/work", Path::new("/s"), env.clone())?;
        m.append_message_json(user("q"))?;
        let mut ids = vec![m.append_message_json(assistant("a"))?];
        for i in 0..20 {
            ids.push(m.append_custom_entry("tick", Some(json!({ "i": i })))?);
        }
        let file = m.session_file().ok_or("file")?.to_path_buf();
        std::mem::forget(m); // the process dies: no close, no flush
        storage.power_loss();
        let survived = match SessionManager::open(Dialect::Pi, &file, env) {
            Ok(again) => ids.iter().filter(|id| again.tree().get(id).is_some()).count(),
            Err(_) => 0,
        };
        if must_survive {
            assert_eq!(survived, ids.len(), "{durability:?}: every acknowledged entry survives a power loss");
        } else {
            assert!(survived <= ids.len());
        }
    }
    Ok(())
}

/// Builds a session large enough that branching writes the new file on a second
/// thread, with labels and a side branch.
fn large_session(dialect: Dialect, env: Env) -> Result<(SessionManager, String)> {
    let mut m = SessionManager::create(dialect, "/work", Path::new("/s"), env)?;
    let mut fork_point = String::new();
    for i in 0..1_200 {
        let u = m.append_message_json(user(&format!("question {i}")))?;
        if i % 100 == 0 {
            m.append_label_change(&u, Some(&format!("L{i}")))?;
        }
        let a = m.append_message_json(assistant(&format!("answer {i}")))?;
        if i == 600 {
            fork_point = a.into();
        }
    }
    let last = m.tree().leaf_id().ok_or("leaf")?.to_owned();
    m.branch(&fork_point)?;
    m.append_message_json(user("a side branch"))?;
    Ok((m, last))
}

#[test]
fn large_branched_sessions_are_written_whole() -> Result<()> {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let (env, storage, _faults) = faulty();
        let (mut m, last) = large_session(dialect, env.clone())?;
        let new = m.create_branched_session(&last)?.ok_or("new file")?;
        assert!(m.tree().entries().len() > 2_000, "the two-thread path");
        let again = SessionManager::open(dialect, &new, env)?;
        assert!(again.diagnostics().is_empty(), "{:?}", again.diagnostics());
        let texts = |m: &SessionManager| m.tree().entries().iter().map(|r| r.text().to_owned()).collect::<Vec<_>>();
        assert_eq!(texts(&again), texts(&m), "{}: the file holds what the manager holds", dialect.name());
        assert_eq!(again.tree().leaf_id(), m.tree().leaf_id());
        assert!(read(storage.as_ref(), &new)?.ends_with('\n'));
    }
    Ok(())
}

#[test]
fn a_failed_large_branch_leaves_no_file() -> Result<()> {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let (env, storage, faults) = faulty();
        let (mut m, last) = large_session(dialect, env)?;
        let before = storage.list(Path::new("/s"))?;
        faults.disk_full_after(100_000);
        assert!(
            fails_with_io(m.create_branched_session(&last), Op::WriteTemp, ErrorKind::StorageFull),
            "{}: the full disk is reported",
            dialect.name()
        );
        faults.clear();
        assert_eq!(storage.list(Path::new("/s"))?, before, "no partial file beside the session");
    }
    Ok(())
}

/// A rename whose in-place slot write fails falls back to rewriting the whole file,
/// as omp does: the title is on disk either way and nothing else is lost.
#[test]
fn omp_failed_slot_overwrite_falls_back_to_a_full_rewrite() -> Result<()> {
    let (env, storage, faults) = faulty();
    let mut m = SessionManager::create(Dialect::Omp, "/p", Path::new("/s"), env.clone())?;
    m.append_message_json(user("q"))?;
    m.append_message_json(assistant("a"))?;
    m.flush()?;
    let file = m.session_file().ok_or("file")?.to_path_buf();
    faults.fail_next(Op::Overwrite, 1);
    m.set_session_name("Renamed", Some("user"))?;
    assert_eq!(faults.injected(), 1, "the in-place write was tried");
    let text = read(storage.as_ref(), &file)?;
    assert!(text.starts_with(r#"{"type":"title","v":1,"title":"Renamed""#), "{text}");
    assert!(text.lines().nth(1).is_some_and(|h| h.contains(r#""title":"Renamed""#)), "rewritten whole");
    drop(m);
    let again = SessionManager::open(Dialect::Omp, &file, env)?;
    assert_eq!(again.session_name().as_deref(), Some("Renamed"));
    assert_eq!(again.tree().entries().len(), 3, "both messages and the title change");
    Ok(())
}

/// A rename whose `title_change` cannot be written changes nothing in memory.
#[test]
fn omp_failed_rename_keeps_the_old_title() -> Result<()> {
    let (env, _storage, faults) = faulty();
    let mut m = SessionManager::create(Dialect::Omp, "/p", Path::new("/s"), env)?;
    m.append_message_json(user("q"))?;
    m.append_message_json(assistant("a"))?;
    m.set_session_name("Old", Some("user"))?;
    faults.fail_next(Op::Append, 1);
    assert!(fails_injected(m.set_session_name("New", Some("user")), Op::Append));
    assert_eq!(m.session_name().as_deref(), Some("Old"));
    assert_eq!(m.tree().entries().len(), 3, "the failed title change is rolled back");
    Ok(())
}

/// Whether `r` failed with the storage's IO error of `op` whose kind is `kind`
/// (printing what it was otherwise).
fn fails_with_io<T>(r: std::result::Result<T, SessionError>, op: Op, kind: ErrorKind) -> bool {
    let ok = matches!(&r, Err(SessionError::Store(StoreError::Io { op: o, source, .. })) if *o == op && source.kind() == kind);
    if let (false, Err(e)) = (ok, &r) {
        eprintln!("expected an IO error of {op:?} ({kind:?}), got {e:?}");
    }
    ok
}

/// Whether `r` failed with the fault injected into `op` (printing what it was otherwise).
fn fails_injected<T>(r: std::result::Result<T, SessionError>, op: Op) -> bool {
    let ok = matches!(&r, Err(SessionError::Store(StoreError::Injected { op: o, .. })) if *o == op);
    if let (false, Err(e)) = (ok, &r) {
        eprintln!("expected the fault injected into {op:?}, got {e:?}");
    }
    ok
}
