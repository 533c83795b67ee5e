//! The MySQL/MariaDB storage on the machine's server: the shared storage contract,
//! discovery through it, omp's own statements on the same table, limits and two writers
//! on two connections.
//!
//! Each test makes a database of its own and drops it at the end. Without a reachable
//! server a test prints `skipped: <test>: <reason>` and passes, unless
//! `SESSION_REQUIRE_SERVERS=1`, where it fails.

use std::path::Path;
use std::sync::Arc;

use mysql::prelude::Queryable;
use session_store::contract::{racing_writers, run_contract};
use session_store::{ExpectedSize, LockWait, Storage, StoreError};
use session_store_mysql::{ConnectError, MysqlError, MysqlOptions, MysqlStorage};

use session_testkit::mysql::TestDb;

type TestResult = Result<(), session_testkit::BoxError>;

#[test]
fn mysql_storage_meets_the_contract() -> TestResult {
    let Some(db) = TestDb::create("mysql_storage_meets_the_contract")? else { return Ok(()) };
    let storage = MysqlStorage::connect(&db.url())?;
    run_contract(&|| Box::new(storage.clone()), &|case| format!("/contract/{case}"))
}

#[test]
fn another_table_meets_the_contract_too() -> TestResult {
    let Some(db) = TestDb::create("another_table_meets_the_contract_too")? else { return Ok(()) };
    let storage = MysqlStorage::connect_with(&db.url(), MysqlOptions::default().table("other_sessions_2"))?;
    run_contract(&|| Box::new(storage.clone()), &|case| format!("/c/{case}"))?;
    let n: Option<i64> = db.conn()?.query_first("SELECT count(*) FROM other_sessions_2")?;
    assert!(n > Some(0), "the rows went to the other table");
    let bad = MysqlStorage::connect_with(&db.url(), MysqlOptions::default().table("no-dashes"));
    assert!(matches!(&bad, Err(ConnectError::BadTableName(t)) if t == "no-dashes"), "{:?}", bad.err());
    Ok(())
}

#[test]
fn discovery_answers_through_the_storage_as_on_memory() -> TestResult {
    let Some(db) = TestDb::create("discovery_answers_through_the_storage_as_on_memory")? else { return Ok(()) };
    session_discovery::parity::check_parity(Arc::new(MysqlStorage::connect(&db.url())?), "/parity".as_ref())
}

/// A table an older omp made (three columns) gains the title columns; rows omp writes
/// with its own statements read here, and ours read there.
#[test]
fn omps_own_statements_share_the_table() -> TestResult {
    let Some(db) = TestDb::create("omps_own_statements_share_the_table")? else { return Ok(()) };
    let mut omp = db.conn()?;
    omp.query_drop(
        "CREATE TABLE omp_session_files (path VARCHAR(512) NOT NULL PRIMARY KEY, content LONGTEXT NOT NULL, \
         mtime_ms BIGINT NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
    )?;
    let storage = MysqlStorage::connect(&db.url())?;
    let cols: Vec<String> = omp.query(format!(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = '{}' AND table_name = 'omp_session_files' ORDER BY ordinal_position",
        db.name()
    ))?;
    assert_eq!(cols, ["path", "content", "mtime_ms", "title", "title_source", "title_updated_at"]);
    // omp 18.3.4's append, as SqlSessionStorage sends it on MySQL.
    let append = "INSERT INTO omp_session_files (path, content, mtime_ms) VALUES (?, ?, ?) \
                  ON DUPLICATE KEY UPDATE content = CONCAT(content, ?), mtime_ms = ?";
    let (head, line) = ("{\"type\":\"session\",\"id\":\"é\"}\n", "{\"x\":1}\n");
    omp.exec_drop(append, ("/s/a.jsonl", head, 1_i64, head, 1_i64))?;
    omp.exec_drop(append, ("/s/a.jsonl", line, 2_i64, line, 2_i64))?;
    let path = Path::new("/s/a.jsonl");
    assert_eq!(storage.read(path)?, format!("{head}{line}").as_bytes());
    assert_eq!(storage.stat(path)?.map(|s| (s.size, s.mtime_ms)), Some((37, 2)));
    storage.append(path, b"{\"y\":2}\n")?;
    let omp_len: Option<i64> =
        omp.exec_first("SELECT length(content) FROM omp_session_files WHERE path = ?", ("/s/a.jsonl",))?;
    assert_eq!(omp_len, Some(45), "omp's byte length agrees with ours");
    // A size-checked rewrite with the same bytes is a success (CLIENT_FOUND_ROWS).
    let same = storage.read(path)?;
    storage.write_atomic(path, &same, ExpectedSize::Bytes(45))?;
    assert_eq!(storage.list(Path::new("/s"))?, ["a.jsonl"]);
    Ok(())
}

/// Content and paths the table cannot hold are refused before anything is written.
#[test]
fn limits_are_typed_errors() -> TestResult {
    let Some(db) = TestDb::create("limits_are_typed_errors")? else { return Ok(()) };
    let storage = MysqlStorage::connect(&db.url())?;
    let path = Path::new("/t/s.jsonl");
    storage.write(path, "ok\n".as_bytes())?;
    for bad in [&b"a\0b\n"[..], &b"\xff\xfe\n"[..]] {
        for result in [storage.write(path, bad), storage.append(path, bad)] {
            let e = result.expect_err("refused");
            assert!(matches!(MysqlError::find(&e), Some(MysqlError::InvalidContent { .. })), "{e}");
        }
    }
    let e = storage.write(Path::new("/t/s.jsonl "), b"x").expect_err("a trailing space would alias /t/s.jsonl");
    assert!(matches!(MysqlError::find(&e), Some(MysqlError::BadPath { .. })), "{e}");
    let long = format!("/{}", "k".repeat(600));
    let e = storage.write(Path::new(&long), b"x").expect_err("a key past VARCHAR(512)");
    assert!(matches!(MysqlError::find(&e), Some(MysqlError::BadPath { .. })), "{e}");
    let big = "x".repeat(usize::try_from(storage.max_content_bytes())? + 1);
    let e = storage.write(path, big.as_bytes()).expect_err("past max_allowed_packet");
    assert!(matches!(MysqlError::find(&e), Some(MysqlError::TooLarge { .. })), "{e}");
    let e = storage.append(path, big.as_bytes()).expect_err("past max_allowed_packet");
    assert!(matches!(&e, StoreError::Io { source, .. } if source.kind() == std::io::ErrorKind::FileTooLarge), "{e}");
    assert_eq!(storage.read(path)?, b"ok\n", "nothing was written");
    // A row near the limit: the append that would pass it (by the server's CONCAT) is
    // refused, typed with the sizes, and writes nothing.
    let near = Path::new("/t/near.jsonl");
    let body = "y".repeat(usize::try_from(storage.max_content_bytes())? - 100);
    storage.write(near, body.as_bytes())?;
    let e = storage.append(near, "z".repeat(200).as_bytes()).expect_err("past the limit once concatenated");
    assert!(matches!(MysqlError::find(&e), Some(MysqlError::TooLarge { .. })), "{e}");
    assert_eq!(storage.stat(near)?.map(|s| s.size), Some(body.len() as u64), "nothing was appended");
    Ok(())
}

/// Two storages on two connections append to one session ([`racing_writers`]).
#[test]
fn two_writers_never_interleave() -> TestResult {
    let Some(db) = TestDb::create("two_writers_never_interleave")? else { return Ok(()) };
    racing_writers(&|| Ok(Box::new(MysqlStorage::connect(&db.url())?)), Path::new("/race"))
}

/// A lock excludes a second holder on another storage, and is free once dropped.
#[test]
fn locks_exclude_across_storages() -> TestResult {
    let Some(db) = TestDb::create("locks_exclude_across_storages")? else { return Ok(()) };
    let (a, b) = (MysqlStorage::connect(&db.url())?, MysqlStorage::connect(&db.url())?);
    let path = Path::new("/l/s.jsonl");
    let held = a.lock(path, LockWait::NoWait)?;
    assert!(matches!(b.lock(path, LockWait::NoWait), Err(StoreError::Locked { .. })));
    let other = b.lock(Path::new("/l/other.jsonl"), LockWait::NoWait)?;
    held.release()?;
    drop(b.lock(path, LockWait::Timeout(std::time::Duration::from_secs(2)))?);
    drop(other);
    Ok(())
}

/// Returns the tables of `db`, from the catalog.
fn tables(db: &TestDb) -> Result<Vec<String>, mysql::Error> {
    db.conn()?.exec("SELECT table_name FROM information_schema.tables WHERE table_schema = ? ORDER BY 1", (db.name(),))
}

/// Returns whether `err` is the refusal of a read-only storage.
fn refused(err: &StoreError) -> bool {
    let io = matches!(err, StoreError::Io { source, .. } if source.kind() == std::io::ErrorKind::ReadOnlyFilesystem);
    io && matches!(MysqlError::find(err), Some(MysqlError::ReadOnly { .. }))
}

#[test]
fn a_read_only_storage_creates_no_table_and_reads_none_as_empty() -> TestResult {
    let Some(db) = TestDb::create("a_read_only_storage_creates_no_table_and_reads_none_as_empty")? else {
        return Ok(());
    };
    let s = MysqlStorage::connect_with(&db.url(), MysqlOptions::default().read_only(true))?;
    session_testkit::assert_read_only_and_empty!(s, refused);
    assert!(tables(&db)?.is_empty(), "nothing was created");
    Ok(())
}

#[test]
fn a_read_only_storage_reads_the_table_and_an_older_one_as_it_is() -> TestResult {
    let Some(db) = TestDb::create("a_read_only_storage_reads_the_table_and_an_older_one_as_it_is")? else {
        return Ok(());
    };
    let w = MysqlStorage::connect_with(&db.url(), MysqlOptions::default().table("t_full"))?;
    let r = || MysqlStorage::connect_with(&db.url(), MysqlOptions::default().table("t_full").read_only(true));
    session_testkit::assert_read_only_reads_what_was_written!(w, r()?, refused);
    // omp before the title columns: read as it is, no column added.
    let mut c = db.conn()?;
    c.query_drop(
        "CREATE TABLE t_old (path VARCHAR(512) NOT NULL PRIMARY KEY, content LONGTEXT NOT NULL, \
         mtime_ms BIGINT NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
    )?;
    c.query_drop("INSERT INTO t_old (path, content, mtime_ms) VALUES ('/s/old.jsonl', 'x\n', 5)")?;
    let old = MysqlStorage::connect_with(&db.url(), MysqlOptions::default().table("t_old").read_only(true))?;
    session_testkit::assert_reads_the_older_table!(old);
    let n: Option<u64> = c.exec_first(
        "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = ? AND table_name = 't_old'",
        (db.name(),),
    )?;
    assert_eq!(n, Some(3), "no title column was added");
    assert_eq!(tables(&db)?, ["t_full", "t_old"]);
    Ok(())
}
