//! Faults on a real PostgreSQL: connections killed by the server, writers racing on one
//! session from separate connections, and, on a private cluster of the test's own, a
//! restart in the middle of an append loop and a tablespace on a full disk.

#[allow(dead_code, reason = "the support module is shared with the it binary")]
#[path = "../it/support.rs"]
mod support;

mod own_cluster;

use std::path::Path;

use session_store::contract::racing_writers;
use session_store::{ExpectedSize, Storage, StoreError};
use session_store_postgres::{NativePostgresStorage, PostgresStorage};

use own_cluster::OwnCluster;
use support::{TestDb, TestResult};

/// Starts a private cluster, or reports the test skipped (failed when servers are required).
fn own_cluster(test: &str) -> Result<Option<OwnCluster>, Box<dyn std::error::Error + Send + Sync>> {
    match OwnCluster::start() {
        Ok(c) => Ok(Some(c)),
        Err(reason) => session_testkit::servers::skip(test, &reason.to_string()),
    }
}

/// Kills every connection to the test's database from the server side.
fn kill_connections(db: &TestDb) -> Result<u64, postgres::Error> {
    let mut admin = postgres::Client::connect(&session_testkit::postgres::admin_conn(), postgres::NoTls)?;
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

#[test]
fn racing_writers_omp_layout() -> TestResult {
    let Some(db) = TestDb::create("racing_writers_omp_layout")? else { return Ok(()) };
    let make = || Ok(Box::new(PostgresStorage::connect(&db.conn())?) as Box<dyn Storage>);
    racing_writers(&make, Path::new("/race"))
}

#[test]
fn racing_writers_native_layout() -> TestResult {
    let Some(db) = TestDb::create("racing_writers_native_layout")? else { return Ok(()) };
    let make = || Ok(Box::new(NativePostgresStorage::connect(&db.conn())?) as Box<dyn Storage>);
    racing_writers(&make, Path::new("/race"))
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

/// The server restarts in the middle of an append loop. Appends during the restart fail
/// typed (a lost or refused connection, naming the path); the writer then stats the
/// session, to learn whether its append landed, and goes on with a size check, as the
/// crate docs tell callers to: every acknowledged line is there once, in order.
#[test]
fn a_restart_mid_loop_loses_no_acknowledged_append() -> TestResult {
    let test = "a_restart_mid_loop_loses_no_acknowledged_append";
    let Some(cluster) = own_cluster(test)? else { return Ok(()) };
    for name in ["omp", "native"] {
        // Connected after the previous layout's restart.
        let s: Box<dyn Storage> = match name {
            "omp" => Box::new(PostgresStorage::connect(&cluster.conn())?),
            _ => Box::new(NativePostgresStorage::connect(&cluster.conn())?),
        };
        let p = Path::new("/restart/s.jsonl");
        let header = b"{\"type\":\"session\"}\n";
        s.write_atomic(p, header, ExpectedSize::Missing)?;
        let mut size = header.len() as u64;
        let mut failures = 0;
        std::thread::scope(|scope| -> TestResult {
            // The restart comes while the loop appends (a line every 20 ms).
            let restart = scope.spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(300));
                cluster.restart()
            });
            for i in 0..60 {
                std::thread::sleep(std::time::Duration::from_millis(20));
                let line = format!("{{\"i\":{i}}}\n");
                let mut tries = 0;
                loop {
                    match s.append_expected(p, line.as_bytes(), ExpectedSize::Bytes(size)) {
                        Ok(()) => break,
                        Err(e @ StoreError::Io { .. }) => {
                            let kind = e.io_kind();
                            assert!(
                                matches!(
                                    kind,
                                    Some(std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::ConnectionRefused)
                                ),
                                "{name}: {e}"
                            );
                            assert!(e.to_string().contains("/restart/s.jsonl"), "{name}: {e}");
                            failures += 1;
                            tries += 1;
                            assert!(tries < 50, "{name}: the storage did not reconnect: {e}");
                            std::thread::sleep(std::time::Duration::from_millis(100));
                        }
                        // The append landed before the connection broke: the size says so.
                        Err(StoreError::Conflict { found: Some(found), .. }) if found == size + line.len() as u64 => {
                            break;
                        }
                        Err(e) => return Err(format!("{name}: unexpected error: {e}").into()),
                    }
                }
                size += line.len() as u64;
            }
            restart.join().map_err(|_| "the restart panicked")??;
            Ok(())
        })?;
        let text = String::from_utf8(s.read(p)?)?;
        let want: String = std::iter::once("{\"type\":\"session\"}\n".to_owned())
            .chain((0..60).map(|i| format!("{{\"i\":{i}}}\n")))
            .collect();
        assert_eq!(text, want, "{name}: every acknowledged line once, in order");
        assert!(failures > 0, "{name}: the restart came while the loop appended");
    }
    Ok(())
}

/// The session table lives in a tablespace on a tiny disk: the write that fills it is a
/// typed `StorageFull` error and writes nothing; the session reads as it was.
#[test]
fn a_full_tablespace_is_storage_full_and_writes_nothing() -> TestResult {
    let test = "a_full_tablespace_is_storage_full_and_writes_nothing";
    let Some(mut cluster) = own_cluster(test)? else { return Ok(()) };
    let disk = match cluster.tiny_disk(4 << 20) {
        Ok(d) => d,
        // Mounting needs privileges the machine may not give.
        Err(reason) => return session_testkit::servers::skip(test, &reason.to_string()).map(|_: Option<()>| ()),
    };
    let mut admin = postgres::Client::connect(&cluster.conn(), postgres::NoTls)?;
    admin.batch_execute(&format!("CREATE TABLESPACE tiny LOCATION '{}'", disk.display()))?;
    admin.batch_execute(
        "CREATE TABLE omp_session_files (path TEXT PRIMARY KEY, content TEXT NOT NULL, mtime_ms BIGINT NOT NULL) TABLESPACE tiny; \
         ALTER TABLE omp_session_files ALTER COLUMN content SET STORAGE EXTERNAL",
    )?;
    let s = PostgresStorage::connect(&cluster.conn())?;
    let p = Path::new("/full/s.jsonl");
    s.write_atomic(p, b"{\"type\":\"session\"}\n", ExpectedSize::Missing)?;
    // Lines of 256 KiB that do not compress, until the disk is full.
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut full = None;
    for _ in 0..64 {
        let line: String = (0..(256 << 10))
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                char::from(b'a' + (seed % 26) as u8)
            })
            .chain(std::iter::once('\n'))
            .collect();
        let before = s.read(p)?;
        match s.append(p, line.as_bytes()) {
            Ok(()) => {}
            Err(e) => {
                assert_eq!(s.read(p)?, before, "the failed append wrote nothing");
                full = Some(e);
                break;
            }
        }
    }
    let e = full.ok_or("a 4 MiB disk took 16 MiB")?;
    assert_eq!(e.io_kind(), Some(std::io::ErrorKind::StorageFull), "{e}");
    assert!(e.to_string().contains("/full/s.jsonl"), "{e}");
    Ok(())
}
