//! The shared storage contract on PostgreSQL.

use std::path::Path;

use session_store::contract::run_contract;
use session_store::{ExpectedSize, Storage};
use session_store_postgres::{PostgresOptions, PostgresStorage, ServerError};

use crate::support::{TestDb, TestResult};

#[test]
fn postgres_storage_meets_the_contract() -> TestResult {
    let Some(db) = TestDb::create("postgres_storage_meets_the_contract")? else { return Ok(()) };
    let storage = PostgresStorage::connect(&db.conn())?;
    run_contract(&|| Box::new(storage.clone()), &|case| format!("/contract/{case}"))
}

#[test]
fn another_table_meets_the_contract_too() -> TestResult {
    let Some(db) = TestDb::create("another_table_meets_the_contract_too")? else { return Ok(()) };
    let storage = PostgresStorage::connect_with(&db.conn(), PostgresOptions::default().table("Other_Sessions_2"))?;
    run_contract(&|| Box::new(storage.clone()), &|case| format!("/c/{case}"))?;
    let rows = db.client()?.query("SELECT count(*) FROM other_sessions_2", &[])?;
    let n: i64 = rows[0].try_get(0)?;
    assert!(n > 0, "the rows went to the other table");
    Ok(())
}

#[test]
fn text_cannot_hold_nul_or_invalid_utf8() -> TestResult {
    let Some(db) = TestDb::create("text_cannot_hold_nul_or_invalid_utf8")? else { return Ok(()) };
    let s = PostgresStorage::connect(&db.conn())?;
    let p = Path::new("/x/s.jsonl");
    s.write_atomic(p, b"ok\n", ExpectedSize::Missing)?;
    for bad in [&b"a\0b\n"[..], b"\xff\n", b"\xc3"] {
        for err in [s.append(p, bad).err(), s.write_atomic(p, bad, ExpectedSize::Any).err(), s.write(p, bad).err()] {
            let err = err.ok_or("bad content refused")?;
            assert_eq!(err.io_kind(), Some(std::io::ErrorKind::InvalidData), "{err}");
            assert!(matches!(ServerError::find(&err), Some(ServerError::InvalidContent { .. })), "{err}");
            assert!(err.to_string().contains("/x/s.jsonl"), "the path is named: {err}");
        }
    }
    assert_eq!(s.read(p)?, b"ok\n", "nothing half-written");
    let grow = s.truncate(p, 10).err().ok_or("extending refused")?;
    assert_eq!(grow.io_kind(), Some(std::io::ErrorKind::InvalidData));
    s.write(p, "é\n".as_bytes())?;
    let cut = s.truncate(p, 1).err().ok_or("cutting a character refused")?;
    assert_eq!(cut.io_kind(), Some(std::io::ErrorKind::InvalidData), "{cut}");
    assert_eq!(s.read(p)?, "é\n".as_bytes());
    Ok(())
}

#[test]
fn bad_keys_are_refused() -> TestResult {
    let Some(db) = TestDb::create("bad_keys_are_refused")? else { return Ok(()) };
    let s = PostgresStorage::connect(&db.conn())?;
    let long = format!("/{}", "a".repeat(3000));
    for p in ["/a/../b.jsonl", "/a/\0.jsonl", long.as_str()] {
        let err = s.write(Path::new(p), b"x").err().ok_or("bad key refused")?;
        assert_eq!(err.io_kind(), Some(std::io::ErrorKind::InvalidInput), "{err}");
    }
    assert!(matches!(s.write(Path::new("/"), b"x"), Err(session_store::StoreError::NotAFile { .. })));
    Ok(())
}

#[test]
fn bad_table_names_are_refused() -> TestResult {
    for name in ["9x", "a-b", "x; DROP TABLE y", "", &"t".repeat(64)] {
        let got = PostgresStorage::connect_with("host=/nonexistent", PostgresOptions::default().table(name));
        assert!(matches!(got, Err(session_store_postgres::ConnectError::BadTableName(_))), "{name:?}");
    }
    Ok(())
}

#[test]
fn append_expected_checks_first() -> TestResult {
    let Some(db) = TestDb::create("append_expected_checks_first")? else { return Ok(()) };
    let s = PostgresStorage::connect(&db.conn())?;
    let p = Path::new("/a/s.jsonl");
    s.append_expected(p, b"1\n", ExpectedSize::Missing)?;
    let again = s.append_expected(p, b"x\n", ExpectedSize::Missing);
    assert!(matches!(again, Err(session_store::StoreError::Conflict { expected: None, found: Some(2), .. })));
    s.append_expected(p, b"2\n", ExpectedSize::Bytes(2))?;
    let stale = s.append_expected(p, b"3\n", ExpectedSize::Bytes(2));
    assert!(matches!(stale, Err(session_store::StoreError::Conflict { expected: Some(2), found: Some(4), .. })));
    assert_eq!(s.read(p)?, b"1\n2\n");
    Ok(())
}

#[test]
fn locks_hold_across_storages() -> TestResult {
    let Some(db) = TestDb::create("locks_hold_across_storages")? else { return Ok(()) };
    let a = PostgresStorage::connect(&db.conn())?;
    let b = PostgresStorage::connect(&db.conn())?;
    let p = Path::new("/l/s.jsonl");
    let held = a.lock(p, session_store::LockWait::NoWait)?;
    assert!(matches!(b.lock(p, session_store::LockWait::NoWait), Err(session_store::StoreError::Locked { .. })));
    held.release()?;
    drop(b.lock(p, session_store::LockWait::NoWait)?);
    Ok(())
}

/// A watcher hears writes that do not come through this crate: the trigger is on the
/// table, so omp's own statements (its append is this upsert) notify too.
#[test]
fn watchers_hear_omps_own_statements() -> TestResult {
    let Some(db) = TestDb::create("watchers_hear_omps_own_statements")? else { return Ok(()) };
    let storage = PostgresStorage::connect(&db.conn())?;
    let path = Path::new("/s/--p--/a.jsonl");
    storage.write(path, b"{\"type\":\"session\"}\n")?;
    let mut watch = storage.watch(path)?.ok_or("PostgreSQL storage watches")?;
    let mut c = db.client()?;
    // omp 18.3.4's append, as SqlSessionStorage sends it.
    c.execute(
        "INSERT INTO omp_session_files (path, content, mtime_ms) VALUES ($1, $2, $3) \
         ON CONFLICT (path) DO UPDATE SET content = omp_session_files.content || excluded.content, mtime_ms = excluded.mtime_ms",
        &[&"/s/--p--/a.jsonl", &"{\"x\":1}\n", &1_i64],
    )?;
    let change = watch.next(std::time::Duration::from_secs(10))?.ok_or("omp's append was heard")?;
    assert_eq!(change.size, Some(27));
    // Another path of the same table wakes nobody watching this one.
    c.execute("INSERT INTO omp_session_files (path, content, mtime_ms) VALUES ('/s/b.jsonl', 'b', 1)", &[])?;
    assert_eq!(watch.next(std::time::Duration::from_millis(300))?, None);
    c.execute("DELETE FROM omp_session_files WHERE path = '/s/--p--/a.jsonl'", &[])?;
    assert_eq!(watch.next(std::time::Duration::from_secs(10))?.map(|c| c.size), Some(None));
    Ok(())
}
