//! Faults on a real PostgreSQL: connections killed by the server, and writers racing on
//! one session from separate connections.

#[allow(dead_code, reason = "the support module is shared with the it binary")]
#[path = "../it/support.rs"]
mod support;

use std::path::Path;

use session_store::{ExpectedSize, Storage, StoreError};
use session_store_postgres::{NativePostgresStorage, PostgresStorage};

use support::{TestDb, TestResult};

/// Kills every connection to the test's database from the server side.
fn kill_connections(db: &TestDb) -> Result<u64, postgres::Error> {
    let mut admin = postgres::Client::connect(&support::admin_conn(), postgres::NoTls)?;
    let rows = admin.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
        &[&db.name()],
    )?;
    Ok(rows.len() as u64)
}

fn killed_connection_is_typed_then_healed(s: &dyn Storage, db: &TestDb) -> TestResult {
    let p = Path::new("/f/s.jsonl");
    s.write_atomic(p, b"one\n", ExpectedSize::Missing)?;
    assert!(kill_connections(db)? >= 1, "the pooled connection was killed");
    // The pooled connection is dead: the first call may fail, typed, and names the path.
    match s.append(p, b"two\n") {
        Ok(()) => {}
        Err(e @ StoreError::Io { .. }) => {
            assert_eq!(e.io_kind(), Some(std::io::ErrorKind::ConnectionAborted), "{e}");
            assert!(e.to_string().contains("/f/s.jsonl"), "{e}");
            s.append(p, b"two\n")?;
        }
        Err(e) => return Err(format!("unexpected error: {e}").into()),
    }
    // The next calls reconnect; nothing acknowledged is lost.
    assert_eq!(s.read(p)?, b"one\ntwo\n");
    Ok(())
}

#[test]
fn killed_connections_omp_layout() -> TestResult {
    let Some(db) = TestDb::create("killed_connections_omp_layout")? else { return Ok(()) };
    killed_connection_is_typed_then_healed(&PostgresStorage::connect(&db.conn())?, &db)
}

#[test]
fn killed_connections_native_layout() -> TestResult {
    let Some(db) = TestDb::create("killed_connections_native_layout")? else { return Ok(()) };
    killed_connection_is_typed_then_healed(&NativePostgresStorage::connect(&db.conn())?, &db)
}

/// Two writers on two storages (two connections each) append to one session: blind
/// appends never interleave inside a line; checked appends lose no line and duplicate none.
fn racing_writers(
    make: &dyn Fn() -> Result<Box<dyn CheckedAppend>, Box<dyn std::error::Error + Send + Sync>>,
) -> TestResult {
    let blind = Path::new("/race/blind.jsonl");
    let checked = Path::new("/race/checked.jsonl");
    let writers: Vec<Box<dyn CheckedAppend>> = vec![make()?, make()?];
    std::thread::scope(|scope| -> TestResult {
        let handles: Vec<_> = writers
            .iter()
            .enumerate()
            .map(|(w, s)| {
                scope.spawn(move || -> Result<(), StoreError> {
                    for i in 0..40 {
                        let line = format!("{{\"w\":{w},\"i\":{i},\"pad\":\"{}\"}}\n", "x".repeat(100 + i));
                        s.storage().append(blind, line.as_bytes())?;
                        // Check-then-append: on a conflict, reload the size and try again.
                        loop {
                            let size = s.storage().stat(checked)?.map(|st| st.size);
                            let expected = size.map_or(ExpectedSize::Missing, ExpectedSize::Bytes);
                            match s.checked_append(checked, line.as_bytes(), expected) {
                                Ok(()) => break,
                                Err(StoreError::Conflict { .. }) => continue,
                                Err(e) => return Err(e),
                            }
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| "writer panicked")??;
        }
        Ok(())
    })?;
    let reader = make()?;
    for p in [blind, checked] {
        let text = String::from_utf8(reader.storage().read(p)?)?;
        let mut seen: Vec<(u64, u64)> = Vec::new();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line)?;
            seen.push((v["w"].as_u64().ok_or("w")?, v["i"].as_u64().ok_or("i")?));
        }
        seen.sort_unstable();
        let want: Vec<(u64, u64)> = (0..2).flat_map(|w| (0..40).map(move |i| (w, i))).collect();
        assert_eq!(seen, want, "{}: every line once, whole", p.display());
    }
    Ok(())
}

/// A storage with a check-then-append.
trait CheckedAppend: Send + Sync {
    fn storage(&self) -> &dyn Storage;
    fn checked_append(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError>;
}

impl CheckedAppend for PostgresStorage {
    fn storage(&self) -> &dyn Storage {
        self
    }
    fn checked_append(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        self.append_if_size(path, bytes, expected)
    }
}

impl CheckedAppend for NativePostgresStorage {
    fn storage(&self) -> &dyn Storage {
        self
    }
    fn checked_append(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        self.append_if_size(path, bytes, expected)
    }
}

#[test]
fn racing_writers_omp_layout() -> TestResult {
    let Some(db) = TestDb::create("racing_writers_omp_layout")? else { return Ok(()) };
    let conn = db.conn();
    racing_writers(&|| Ok(Box::new(PostgresStorage::connect(&conn)?)))
}

#[test]
fn racing_writers_native_layout() -> TestResult {
    let Some(db) = TestDb::create("racing_writers_native_layout")? else { return Ok(()) };
    let conn = db.conn();
    racing_writers(&|| Ok(Box::new(NativePostgresStorage::connect(&conn)?)))
}

/// Connections that died while idle in the pool (a server restart, an idle timeout) are
/// replaced without an error once they have been idle a while.
#[test]
fn connections_that_died_idle_are_replaced() -> TestResult {
    let Some(db) = TestDb::create("connections_that_died_idle_are_replaced")? else { return Ok(()) };
    let s = PostgresStorage::connect(&db.conn())?;
    let p = Path::new("/f/s.jsonl");
    s.write_atomic(p, b"one\n", ExpectedSize::Missing)?;
    kill_connections(&db)?;
    std::thread::sleep(std::time::Duration::from_millis(2100));
    s.append(p, b"two\n")?;
    assert_eq!(s.read(p)?, b"one\ntwo\n");
    Ok(())
}

#[test]
fn urls_connect_too() -> TestResult {
    let Some(db) = TestDb::create("urls_connect_too")? else { return Ok(()) };
    let url = format!("postgres://root@127.0.0.1:5432/{}", db.name());
    let s = match PostgresStorage::connect(&url) {
        Ok(s) => s,
        // The socket is what the tests need; TCP may be closed on some machines.
        Err(session_store_postgres::ConnectError::Connect(e)) => {
            eprintln!("no TCP connection to {url}: {e}");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    s.write(Path::new("/u/s.jsonl"), b"x\n")?;
    assert_eq!(s.list(Path::new("/u"))?, ["s.jsonl"]);
    Ok(())
}
