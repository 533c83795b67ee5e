//! The SQLite storage: the shared storage contract, discovery through it, omp's own
//! statements on the same table, text limits and two writers on two connections.

use std::path::Path;
use std::sync::Arc;

use session_store::contract::{racing_writers, run_contract};
use session_store::{Storage, StoreError};
use session_store_sqlite::{ConnectError, SqliteError, SqliteOptions, SqliteStorage};
pub(crate) use session_testkit::TempDir;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

#[test]
fn sqlite_storage_meets_the_contract() -> TestResult {
    let tmp = TempDir::new("contract");
    let storage = SqliteStorage::open(&tmp.join("sessions.db"))?;
    run_contract(&|| Box::new(storage.clone()), &|case| format!("/contract/{case}"))
}

#[test]
fn another_table_meets_the_contract_too() -> TestResult {
    let tmp = TempDir::new("table");
    let storage =
        SqliteStorage::open_with(&tmp.join("sessions.db"), SqliteOptions::default().table("Other_Sessions_2"))?;
    run_contract(&|| Box::new(storage.clone()), &|case| format!("/c/{case}"))?;
    let c = rusqlite::Connection::open(tmp.join("sessions.db"))?;
    let n: i64 = c.query_row("SELECT count(*) FROM other_sessions_2", [], |r| r.get(0))?;
    assert!(n > 0, "the rows went to the other table");
    let bad = SqliteStorage::open_with(&tmp.join("sessions.db"), SqliteOptions::default().table("no-dashes"));
    assert!(matches!(&bad, Err(ConnectError::BadTableName(t)) if t == "no-dashes"), "{:?}", bad.err());
    Ok(())
}

#[test]
fn discovery_answers_through_the_storage_as_on_memory() -> TestResult {
    let tmp = TempDir::new("parity");
    let storage = SqliteStorage::open(&tmp.join("sessions.db"))?;
    session_discovery::parity::check_parity(Arc::new(storage), "/parity".as_ref())
}

/// A table an older omp made (three columns) gains the title columns; rows omp writes
/// with its own statements read here, and ours read there.
#[test]
fn omps_own_statements_share_the_table() -> TestResult {
    let tmp = TempDir::new("omp");
    let omp = rusqlite::Connection::open(tmp.join("sessions.db"))?;
    omp.execute_batch(
        "CREATE TABLE omp_session_files (path TEXT PRIMARY KEY, content TEXT NOT NULL, mtime_ms INTEGER NOT NULL)",
    )?;
    let storage = SqliteStorage::open(&tmp.join("sessions.db"))?;
    let cols: Vec<String> = omp
        .prepare("SELECT name FROM pragma_table_info('omp_session_files')")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    assert_eq!(cols, ["path", "content", "mtime_ms", "title", "title_source", "title_updated_at"]);
    // omp 18.3.4's append and size, as SqlSessionStorage sends them on SQLite.
    let append = "INSERT INTO omp_session_files (path, content, mtime_ms) VALUES (?, ?, ?) \
                  ON CONFLICT (path) DO UPDATE SET content = omp_session_files.content || excluded.content, mtime_ms = excluded.mtime_ms";
    omp.execute(append, rusqlite::params!["/s/a.jsonl", "{\"type\":\"session\",\"id\":\"é\"}\n", 1_i64])?;
    omp.execute(append, rusqlite::params!["/s/a.jsonl", "{\"x\":1}\n", 2_i64])?;
    let path = Path::new("/s/a.jsonl");
    assert_eq!(storage.read(path)?, "{\"type\":\"session\",\"id\":\"é\"}\n{\"x\":1}\n".as_bytes());
    assert_eq!(storage.stat(path)?.map(|s| (s.size, s.mtime_ms)), Some((37, 2)));
    storage.append(path, b"{\"y\":2}\n")?;
    let omp_len: i64 = omp.query_row(
        "SELECT length(cast(content AS blob)) FROM omp_session_files WHERE path = ?",
        ["/s/a.jsonl"],
        |r| r.get(0),
    )?;
    assert_eq!(omp_len, 45, "omp's byte length agrees with ours");
    assert_eq!(storage.list(Path::new("/s"))?, ["a.jsonl"]);
    Ok(())
}

/// Content a `TEXT` column cannot hold is refused before anything is written.
#[test]
fn text_cannot_hold_nul_or_invalid_utf8() -> TestResult {
    let tmp = TempDir::new("text");
    let storage = SqliteStorage::open(&tmp.join("sessions.db"))?;
    let path = Path::new("/t/s.jsonl");
    storage.write(path, "ok\n".as_bytes())?;
    for bad in [&b"a\0b\n"[..], &b"\xff\xfe\n"[..]] {
        for result in [storage.write(path, bad), storage.append(path, bad)] {
            let e = result.expect_err("refused");
            assert!(matches!(SqliteError::find(&e), Some(SqliteError::InvalidContent { .. })), "{e}");
            assert!(matches!(&e, StoreError::Io { source, .. } if source.kind() == std::io::ErrorKind::InvalidData));
        }
    }
    let e = storage.truncate(path, 10).expect_err("no NUL padding");
    assert!(matches!(SqliteError::find(&e), Some(SqliteError::InvalidContent { .. })), "{e}");
    storage.write(path, "é\n".as_bytes())?;
    let e = storage.truncate(path, 1).expect_err("a cut inside a character");
    assert!(matches!(SqliteError::find(&e), Some(SqliteError::InvalidContent { .. })), "{e}");
    assert_eq!(storage.read(path)?, "é\n".as_bytes(), "nothing was written");
    let long = format!("/{}", "k".repeat(3000));
    let e = storage.write(Path::new(&long), b"x").expect_err("key too long");
    assert!(matches!(SqliteError::find(&e), Some(SqliteError::BadPath { .. })), "{e}");
    Ok(())
}

/// Two storages on two connections append to one session ([`racing_writers`]).
#[test]
fn two_writers_never_interleave() -> TestResult {
    let tmp = TempDir::new("writers");
    let db = tmp.join("sessions.db");
    racing_writers(&|| Ok(Box::new(SqliteStorage::open(&db)?)), Path::new("/race"))
}

/// A lock excludes a second holder, also through another storage of the same database,
/// and is free again once dropped.
#[test]
fn locks_exclude_across_storages() -> TestResult {
    let tmp = TempDir::new("locks");
    let (a, b) = (SqliteStorage::open(&tmp.join("sessions.db"))?, SqliteStorage::open(&tmp.join("sessions.db"))?);
    let path = Path::new("/l/s.jsonl");
    let held = a.lock(path, session_store::LockWait::NoWait)?;
    assert!(matches!(b.lock(path, session_store::LockWait::NoWait), Err(StoreError::Locked { .. })));
    let other = b.lock(Path::new("/l/other.jsonl"), session_store::LockWait::NoWait)?;
    drop(held);
    drop(b.lock(path, session_store::LockWait::NoWait)?);
    drop(other);
    Ok(())
}

/// Returns the tables of the database `db`, from `sqlite_master`.
fn tables(db: &Path) -> Result<Vec<String>, rusqlite::Error> {
    let c = rusqlite::Connection::open(db)?;
    let mut stmt = c.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1")?;
    stmt.query_map([], |r| r.get(0))?.collect()
}

/// Returns whether `err` is the refusal of a read-only storage.
fn refused(err: &StoreError) -> bool {
    let io = matches!(err, StoreError::Io { source, .. } if source.kind() == std::io::ErrorKind::ReadOnlyFilesystem);
    io && matches!(SqliteError::find(err), Some(SqliteError::ReadOnly { .. }))
}

#[test]
fn a_read_only_storage_creates_no_file_and_no_table() -> TestResult {
    let tmp = TempDir::new("ro-missing");
    let s = SqliteStorage::open_with(&tmp.join("sessions.db"), SqliteOptions::default().read_only(true))?;
    session_testkit::assert_read_only_and_empty!(s, refused);
    let p = Path::new("/sessions/--w--/s.jsonl");
    drop(s);
    assert!(fs_err::read_dir(tmp.path())?.next().is_none(), "no database file, no lock directory");
    // A database without the table: still no table, and not one byte changed.
    rusqlite::Connection::open(tmp.join("sessions.db"))?.execute_batch("CREATE TABLE other (x INTEGER)")?;
    let before = fs_err::read(tmp.join("sessions.db"))?;
    let s = SqliteStorage::open_with(&tmp.join("sessions.db"), SqliteOptions::default().read_only(true))?;
    assert!(s.list(Path::new("/"))?.is_empty());
    assert!(refused(&s.append(p, b"{}\n").err().ok_or("refused")?));
    drop(s);
    assert_eq!(tables(&tmp.join("sessions.db"))?, ["other"]);
    assert_eq!(fs_err::read(tmp.join("sessions.db"))?, before);
    Ok(())
}

#[test]
fn a_read_only_storage_reads_the_table_and_an_older_one_as_it_is() -> TestResult {
    let tmp = TempDir::new("ro-existing");
    let w = SqliteStorage::open(&tmp.join("sessions.db"))?;
    let r = || SqliteStorage::open_with(&tmp.join("sessions.db"), SqliteOptions::default().read_only(true));
    session_testkit::assert_read_only_reads_what_was_written!(w, r()?, refused);
    // omp before the title columns: read as it is, no column added.
    let c = rusqlite::Connection::open(tmp.join("sessions.db"))?;
    c.execute_batch(
        "CREATE TABLE t_old (path TEXT PRIMARY KEY, content TEXT NOT NULL, mtime_ms INTEGER NOT NULL); \
         INSERT INTO t_old (path, content, mtime_ms) VALUES ('/s/old.jsonl', 'x\n', 5)",
    )?;
    let old =
        SqliteStorage::open_with(&tmp.join("sessions.db"), SqliteOptions::default().table("t_old").read_only(true))?;
    session_testkit::assert_reads_the_older_table!(old);
    let n: i64 = c.query_row("SELECT count(*) FROM pragma_table_info('t_old')", [], |r| r.get(0))?;
    assert_eq!(n, 3, "no title column was added");
    assert_eq!(tables(&tmp.join("sessions.db"))?, ["omp_session_files", "t_old"]);
    Ok(())
}
