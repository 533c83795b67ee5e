//! Lock objects: exclusion across storages, renewal while held, and an expired lock of a
//! holder that died broken by the next taker.

use std::path::Path;
use std::time::Duration;

use session_store::clock::{Clock, SystemClock};
use session_store::{LockWait, Storage, StoreError};

use crate::support::{TestPrefix, TestResult};

#[test]
fn locks_hold_across_storages_and_are_renewed() -> TestResult {
    let Some(t) = TestPrefix::create("locks_hold_across_storages_and_are_renewed")? else { return Ok(()) };
    let a = t.builder().lock_ttl(Duration::from_millis(900)).build()?;
    let b = t.builder().lock_ttl(Duration::from_millis(900)).build()?;
    let p = Path::new("/l/s.jsonl");
    let held = a.lock(p, LockWait::NoWait)?;
    let body: serde_json::Value = serde_json::from_slice(&t.get("locks/l/s.jsonl!")?)?;
    assert!(body["token"].as_str().is_some_and(|s| s.len() == 32) && body["expires"].as_i64().is_some());
    // Past the TTL the holder has renewed it: still held.
    std::thread::sleep(Duration::from_millis(2000));
    assert!(matches!(b.lock(p, LockWait::NoWait), Err(StoreError::Locked { .. })));
    held.release()?;
    let body: serde_json::Value = serde_json::from_slice(&t.get("locks/l/s.jsonl!")?)?;
    assert_eq!(body["expires"], 0, "release leaves an expired lock object");
    drop(b.lock(p, LockWait::NoWait)?);
    Ok(())
}

#[test]
fn an_expired_lock_is_broken() -> TestResult {
    let Some(t) = TestPrefix::create("an_expired_lock_is_broken")? else { return Ok(()) };
    let s = t.storage()?;
    let p = Path::new("/l/s.jsonl");
    // A holder that died: its lock object expires in the future, then in the past.
    let now = SystemClock.now_ms();
    let dead = |expires: i64| format!("{{\"v\":1,\"token\":\"dead\",\"expires\":{expires},\"pid\":1}}").into_bytes();
    t.put("locks/l/s.jsonl!", dead(now + 60_000))?;
    assert!(matches!(s.lock(p, LockWait::NoWait), Err(StoreError::Locked { .. })), "an unexpired lock holds");
    t.put("locks/l/s.jsonl!", dead(now - 1))?;
    let held = s.lock(p, LockWait::NoWait)?;
    let body: serde_json::Value = serde_json::from_slice(&t.get("locks/l/s.jsonl!")?)?;
    assert_ne!(body["token"], "dead", "the expired lock was replaced");
    held.release()?;
    // A holder's lock that is no longer its own (it expired and another took it) is
    // left alone on release.
    let held = s.lock(p, LockWait::NoWait)?;
    let other = format!("{{\"v\":1,\"token\":\"{}\",\"expires\":{},\"pid\":2}}", "7".repeat(32), now + 60_000);
    t.put("locks/l/s.jsonl!", other.clone().into_bytes())?;
    held.release()?;
    assert_eq!(t.get("locks/l/s.jsonl!")?, other.into_bytes(), "another holder's lock stays");
    // A lock written again since the holder's last known write (a renewal whose reply
    // was lost) but still holding its token is released all the same.
    t.delete("locks/l/s.jsonl!")?;
    let held = s.lock(p, LockWait::NoWait)?;
    let mut body: serde_json::Value = serde_json::from_slice(&t.get("locks/l/s.jsonl!")?)?;
    body["pid"] = 3.into();
    t.put("locks/l/s.jsonl!", serde_json::to_vec(&body)?)?;
    held.release()?;
    let body: serde_json::Value = serde_json::from_slice(&t.get("locks/l/s.jsonl!")?)?;
    assert_eq!(body["expires"], 0, "released: {body}");
    Ok(())
}
