//! The shared storage contract on Redis, and what Redis adds to it.

use std::path::Path;

use session_store::contract::{run_byte_contract, run_contract};
use session_store::{ExpectedSize, LockWait, Storage, StoreError};
use session_store_redis::{DEFAULT_PREFIX, RedisStorage, ServerError};

use crate::support::{TestPrefix, TestResult, storage, url};

#[test]
fn redis_storage_meets_the_contract() -> TestResult {
    let Some(t) = TestPrefix::create("redis_storage_meets_the_contract")? else { return Ok(()) };
    let storage = storage(&t)?;
    run_contract(&|| Box::new(storage.clone()), &|case| format!("/contract/{case}"))?;
    run_byte_contract(&|| Box::new(storage.clone()), &|case| format!("/bytes/{case}"))
}

#[test]
fn prefixes_keep_storages_apart() -> TestResult {
    let Some(mut t) = TestPrefix::create("prefixes_keep_storages_apart")? else { return Ok(()) };
    let a = storage(&t)?;
    let b = RedisStorage::connect_with_prefix(&url(), &format!("{}other:", t.prefix()))?;
    a.write(Path::new("/d/s.jsonl"), b"a")?;
    assert!(!b.exists(Path::new("/d/s.jsonl"))?);
    assert!(b.list(Path::new("/d"))?.is_empty());
    b.write(Path::new("/d/s.jsonl"), b"b")?;
    assert_eq!(a.read(Path::new("/d/s.jsonl"))?, b"a");
    assert!(t.keys()?.iter().all(|k| k.starts_with(t.prefix())));
    assert_eq!(a.body_key(Path::new("/d/s.jsonl"))?, format!("{}file:/d/s.jsonl", t.prefix()));
    assert_eq!(DEFAULT_PREFIX, "omp:sessions:");
    Ok(())
}

#[test]
fn glob_characters_in_paths_are_literal() -> TestResult {
    let Some(t) = TestPrefix::create("glob_characters_in_paths_are_literal")? else { return Ok(()) };
    let s = storage(&t)?;
    s.write(Path::new("/a*/[x]/s?.jsonl"), b"1")?;
    s.write(Path::new("/ab/[x]/t.jsonl"), b"2")?;
    assert_eq!(s.list(Path::new("/a*/[x]"))?, ["s?.jsonl"]);
    assert!(s.list(Path::new("/a?/[x]"))?.is_empty());
    Ok(())
}

#[test]
fn append_expected_checks_first() -> TestResult {
    let Some(t) = TestPrefix::create("append_expected_checks_first")? else { return Ok(()) };
    let s = storage(&t)?;
    let p = Path::new("/a/s.jsonl");
    s.append_expected(p, b"1\n", ExpectedSize::Missing)?;
    let again = s.append_expected(p, b"x\n", ExpectedSize::Missing);
    assert!(matches!(again, Err(StoreError::Conflict { expected: None, found: Some(2), .. })), "{again:?}");
    s.append_expected(p, b"2\n", ExpectedSize::Bytes(2))?;
    let stale = s.append_expected(p, b"3\n", ExpectedSize::Bytes(2));
    assert!(matches!(stale, Err(StoreError::Conflict { expected: Some(2), found: Some(4), .. })), "{stale:?}");
    let missing = s.append_expected(Path::new("/a/none.jsonl"), b"x", ExpectedSize::Bytes(0));
    assert!(matches!(missing, Err(StoreError::Conflict { expected: Some(0), found: None, .. })), "{missing:?}");
    assert_eq!(s.read(p)?, b"1\n2\n");
    assert!(!s.exists(Path::new("/a/none.jsonl"))?);
    Ok(())
}

#[test]
fn locks_hold_across_storages_and_expire_with_their_holder() -> TestResult {
    let Some(mut t) = TestPrefix::create("locks_hold_across_storages_and_expire_with_their_holder")? else {
        return Ok(());
    };
    let a = storage(&t)?;
    let b = storage(&t)?;
    let p = Path::new("/l/s.jsonl");
    let held = a.lock(p, LockWait::NoWait)?;
    assert!(matches!(b.lock(p, LockWait::NoWait), Err(StoreError::Locked { .. })));
    let lock_key = format!("{}lock:/l/s.jsonl", t.prefix());
    let ttl: i64 = redis::cmd("PTTL").arg(&lock_key).query(t.raw())?;
    assert!(ttl > 0 && ttl <= 30_000, "the lock key expires: {ttl}");
    held.release()?;
    let gone: bool = redis::cmd("EXISTS").arg(&lock_key).query(t.raw())?;
    assert!(!gone, "release deletes the key");
    drop(b.lock(p, LockWait::NoWait)?);
    Ok(())
}

#[test]
fn bad_keys_are_refused() -> TestResult {
    let Some(t) = TestPrefix::create("bad_keys_are_refused")? else { return Ok(()) };
    let s = storage(&t)?;
    let long = format!("/{}", "a".repeat(3000));
    for p in ["/a/../b.jsonl", "/a/\0.jsonl", long.as_str()] {
        let err = s.write(Path::new(p), b"x").err().ok_or("bad key refused")?;
        assert_eq!(err.io_kind(), Some(std::io::ErrorKind::InvalidInput), "{err}");
        assert!(matches!(ServerError::find(&err), Some(ServerError::BadPath { .. })));
    }
    assert!(matches!(s.write(Path::new("/"), b"x"), Err(StoreError::NotAFile { .. })));
    Ok(())
}

#[test]
fn an_unreachable_server_is_a_connect_error() -> TestResult {
    let got = RedisStorage::connect("redis://127.0.0.1:1/");
    assert!(matches!(got, Err(session_store_redis::ConnectError::Connect(_))));
    Ok(())
}

#[test]
fn blobs_live_on_redis_beside_the_sessions() -> TestResult {
    let Some(t) = TestPrefix::create("blobs_live_on_redis_beside_the_sessions")? else { return Ok(()) };
    let storage = storage(&t)?;
    let blobs = session_store::BlobStore::on(std::sync::Arc::new(storage.clone()), "/blobs");
    // Image bytes are not text: Redis strings hold them as they are.
    let image = [0x89, b'P', b'N', b'G', 0, 0xff, 0xfe];
    let blob = blobs.put(&image, Some("image/png"))?;
    assert_eq!(blobs.get(&blob)?, Some(image.to_vec()));
    assert_eq!(blobs.size(&blob)?, Some(7));
    assert_eq!(storage.read(&blobs.path(&blob))?, image);
    let sidecar = Path::new("/blobs").join(format!("{}.png", blob.hash()));
    assert_eq!(storage.read(&sidecar)?, image, "the typed sidecar is a copy");
    // Stored again: the same blob, nothing else written.
    assert_eq!(blobs.put(&image, Some("image/png"))?, blob);
    assert_eq!(storage.list(Path::new("/blobs"))?.len(), 2);
    assert_eq!(blobs.get(&session_store::BlobRef::for_bytes(b"none"))?, None);
    Ok(())
}
