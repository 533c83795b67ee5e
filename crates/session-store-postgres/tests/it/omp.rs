//! omp's side of the table: its DDL column for column, and rows written and read with the
//! statements omp 18.3.4's `SqlSessionStorage` sends.

use std::path::Path;

use session_model::TitleSlot;
use session_store::{ExpectedSize, Storage, StoreError};
use session_store_postgres::{PostgresOptions, PostgresStorage, ServerError};

use crate::support::{TestDb, TestResult};

/// omp 18.3.4's DDL for PostgreSQL, for a table `t`: the create, then the title columns.
fn omp_ddl(t: &str) -> Vec<String> {
    let mut v = vec![format!(
        "CREATE TABLE IF NOT EXISTS {t} (path TEXT PRIMARY KEY, content TEXT NOT NULL, mtime_ms BIGINT NOT NULL)"
    )];
    for c in ["title", "title_source", "title_updated_at"] {
        v.push(format!("ALTER TABLE {t} ADD COLUMN {c} TEXT"));
    }
    v
}

/// Every property of a table's columns and keys that a client could observe.
fn shape(c: &mut postgres::Client, t: &str) -> Result<Vec<String>, postgres::Error> {
    let cols = c.query(
        "SELECT column_name::text, ordinal_position::int, data_type::text, is_nullable::text, \
         coalesce(column_default::text, ''), coalesce(character_maximum_length, -1)::int, \
         coalesce(collation_name::text, '') \
         FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position",
        &[&t],
    )?;
    let mut out = Vec::new();
    for r in cols {
        let (name, pos, ty, null, def, len, coll): (String, i32, String, String, String, i32, String) =
            (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?, r.try_get(4)?, r.try_get(5)?, r.try_get(6)?);
        out.push(format!("{pos} {name} {ty} null={null} default={def} len={len} collation={coll}"));
    }
    let keys = c.query(
        "SELECT tc.constraint_type::text, kcu.column_name::text FROM information_schema.table_constraints tc \
         JOIN information_schema.key_column_usage kcu ON tc.constraint_name = kcu.constraint_name \
         WHERE tc.table_name = $1 ORDER BY 1, 2",
        &[&t],
    )?;
    for r in keys {
        let (kind, col): (String, String) = (r.try_get(0)?, r.try_get(1)?);
        out.push(format!("{kind} {col}"));
    }
    let idx = c.query("SELECT count(*) FROM pg_indexes WHERE tablename = $1", &[&t])?;
    let n: i64 = idx[0].try_get(0)?;
    out.push(format!("{n} indexes"));
    Ok(out)
}

#[test]
fn the_table_is_omps_column_for_column() -> TestResult {
    let Some(db) = TestDb::create("the_table_is_omps_column_for_column")? else { return Ok(()) };
    let _ours = PostgresStorage::connect(&db.conn())?;
    let _again = PostgresStorage::connect(&db.conn())?; // creating twice is harmless
    let mut c = db.client()?;
    for stmt in omp_ddl("omp_reference") {
        c.batch_execute(&stmt)?;
    }
    let ours = shape(&mut c, "omp_session_files")?;
    let theirs = shape(&mut c, "omp_reference")?;
    assert_eq!(ours, theirs);
    assert_eq!(ours.len(), 6 + 1 + 1, "six columns, a primary key, one index: {ours:?}");
    Ok(())
}

#[test]
fn an_older_table_gets_the_title_columns() -> TestResult {
    let Some(db) = TestDb::create("an_older_table_gets_the_title_columns")? else { return Ok(()) };
    let mut c = db.client()?;
    let ddl = omp_ddl("omp_session_files");
    c.batch_execute(&ddl[0])?;
    c.execute("INSERT INTO omp_session_files (path, content, mtime_ms) VALUES ('/old.jsonl', 'x\n', 5)", &[])?;
    let s = PostgresStorage::connect(&db.conn())?;
    assert_eq!(s.read(Path::new("/old.jsonl"))?, b"x\n");
    for stmt in omp_ddl("omp_reference") {
        c.batch_execute(&stmt)?;
    }
    assert_eq!(shape(&mut c, "omp_session_files")?, shape(&mut c, "omp_reference")?);
    Ok(())
}

#[test]
fn omp_reads_what_we_write() -> TestResult {
    let Some(db) = TestDb::create("omp_reads_what_we_write")? else { return Ok(()) };
    let s = PostgresStorage::connect(&db.conn())?;
    let slot = TitleSlot {
        title: "Ünïcode".into(),
        source: Some("user".into()),
        updated_at: "2026-01-01T00:00:00.000Z".into(),
    };
    let line = slot.to_line()?;
    let header = "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/w\"}\n";
    let p = Path::new("/sessions/--w--/s.jsonl");
    s.write_atomic(p, format!("{line}{header}").as_bytes(), ExpectedSize::Missing)?;
    s.append(p, "{\"type\":\"message\",\"x\":\"é\"}\n".as_bytes())?;
    let want = format!("{line}{header}{{\"type\":\"message\",\"x\":\"é\"}}\n");
    let mut c = db.client()?;
    // omp's loadIndex, readFull and readSlices.
    let rows = c.query("SELECT path, mtime_ms, octet_length(content) AS byte_len FROM omp_session_files", &[])?;
    assert_eq!(rows.len(), 1);
    let (path, len): (String, i32) = (rows[0].try_get(0)?, rows[0].try_get(2)?);
    assert_eq!((path.as_str(), len as usize), ("/sessions/--w--/s.jsonl", want.len()));
    let content: String =
        c.query_one("SELECT content AS content FROM omp_session_files WHERE path = $1", &[&path])?.try_get(0)?;
    assert_eq!(content, want);
    let row = c.query_one(
        "SELECT substring(convert_to(content, 'UTF8') from 1 for $1) AS head, \
         CASE WHEN $2 <= 0 THEN ''::bytea \
         ELSE substring(convert_to(content, 'UTF8') from greatest(1, octet_length(content) - $2 + 1)) END AS tail \
         FROM omp_session_files WHERE path = $3",
        &[&300i32, &10i32, &path],
    )?;
    let (head, tail): (Vec<u8>, Vec<u8>) = (row.try_get(0)?, row.try_get(1)?);
    assert_eq!(head, &want.as_bytes()[..300]);
    assert_eq!(tail, &want.as_bytes()[want.len() - 10..]);
    // omp's writeFull keeps the title parsed from the slot.
    let t =
        c.query_one("SELECT title, title_source, title_updated_at FROM omp_session_files WHERE path = $1", &[&path])?;
    let (title, source, at): (Option<String>, Option<String>, Option<String>) =
        (t.try_get(0)?, t.try_get(1)?, t.try_get(2)?);
    assert_eq!(
        (title.as_deref(), source.as_deref(), at.as_deref()),
        (Some("Ünïcode"), Some("user"), Some("2026-01-01T00:00:00.000Z"))
    );
    // A rename moves the row.
    s.rename(p, Path::new("/sessions/--w--/t.jsonl"))?;
    let moved: i64 = c
        .query_one("SELECT count(*) FROM omp_session_files WHERE path = '/sessions/--w--/t.jsonl'", &[])?
        .try_get(0)?;
    assert_eq!(moved, 1);
    Ok(())
}

#[test]
fn we_read_what_omp_writes() -> TestResult {
    let Some(db) = TestDb::create("we_read_what_omp_writes")? else { return Ok(()) };
    let s = PostgresStorage::connect(&db.conn())?;
    let mut c = db.client()?;
    let t = "omp_session_files";
    let slot = TitleSlot { title: String::new(), source: None, updated_at: "2026-01-01T00:00:00.000Z".into() };
    let line = slot.to_line()?;
    let body = format!("{line}{{\"type\":\"session\"}}\n");
    // omp's upsertReplace, then two upsertAppends.
    c.execute(
        &format!(
            "INSERT INTO {t} (path, content, mtime_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (path) DO UPDATE SET content = excluded.content, mtime_ms = excluded.mtime_ms"
        ),
        &[&"/o/s.jsonl", &body, &1_700_000_000_000i64],
    )?;
    for (i, l) in ["{\"a\":\"ü\"}\n", "{\"b\":2}\n"].iter().enumerate() {
        c.execute(
            &format!(
                "INSERT INTO {t} (path, content, mtime_ms) VALUES ($1, $2, $3) \
                 ON CONFLICT (path) DO UPDATE SET content = {t}.content || excluded.content, mtime_ms = excluded.mtime_ms"
            ),
            &[&"/o/s.jsonl", l, &(1_700_000_000_001i64 + i as i64)],
        )?;
    }
    let p = Path::new("/o/s.jsonl");
    let want = format!("{body}{{\"a\":\"ü\"}}\n{{\"b\":2}}\n");
    assert_eq!(s.read(p)?, want.as_bytes());
    let st = s.stat(p)?.ok_or("stat")?;
    assert_eq!((st.size, st.mtime_ms, st.is_file), (want.len() as u64, 1_700_000_000_002, true));
    assert_eq!(s.list(Path::new("/o"))?, ["s.jsonl"]);
    // omp's updateSessionTitle changes only the columns; readers see the title in the slot.
    c.execute(
        &format!("UPDATE {t} SET title = $2, title_source = $3, title_updated_at = $4, mtime_ms = $5 WHERE path = $1"),
        &[&"/o/s.jsonl", &"Renamed", &"user", &"2026-02-02T00:00:00.000Z", &1_700_000_000_010i64],
    )?;
    let renamed = TitleSlot {
        title: "Renamed".into(),
        source: Some("user".into()),
        updated_at: "2026-02-02T00:00:00.000Z".into(),
    };
    let new_line = renamed.to_line()?;
    let got = s.read(p)?;
    assert_eq!(&got[..256], new_line.as_bytes());
    assert_eq!(&got[256..], &want.as_bytes()[256..]);
    for (prefix, suffix) in [(100usize, 20usize), (300, 280), (1000, 1000), (10, 0)] {
        let (head, tail) = s.read_slices(p, prefix as u64, suffix as u64)?;
        assert_eq!(head, &got[..got.len().min(prefix)]);
        assert_eq!(tail, &got[got.len() - got.len().min(suffix)..]);
    }
    // A CAS write at the size omp's index holds succeeds; at another size it conflicts.
    let size = want.len() as u64;
    let stale = s.write_atomic(p, b"x\n", ExpectedSize::Bytes(size + 1));
    assert!(matches!(stale, Err(StoreError::Conflict { .. })), "{stale:?}");
    s.write_atomic(p, &got, ExpectedSize::Bytes(size))?;
    let content: String =
        c.query_one(&format!("SELECT content FROM {t} WHERE path = $1"), &[&"/o/s.jsonl"])?.try_get(0)?;
    assert_eq!(content.as_bytes(), got.as_slice(), "the rewrite stored the renamed slot");
    // Our update_title is omp's.
    s.update_title(p, Some("Again"), Some("auto"), "2026-03-03T00:00:00.000Z")?;
    let r = c.query_one(&format!("SELECT title, title_source, content FROM {t} WHERE path = $1"), &[&"/o/s.jsonl"])?;
    let (title, source, content): (String, String, String) = (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?);
    assert_eq!((title.as_str(), source.as_str()), ("Again", "auto"));
    assert_eq!(content.as_bytes(), got.as_slice(), "the body is not touched");
    Ok(())
}

/// Returns the tables of the test database's public schema.
pub(crate) fn tables(c: &mut postgres::Client) -> Result<Vec<String>, postgres::Error> {
    let rows = c.query(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1",
        &[],
    )?;
    rows.iter().map(|r| r.try_get(0)).collect()
}

/// Returns whether `err` is the refusal of a read-only storage.
pub(crate) fn refused(err: &StoreError) -> bool {
    let io = matches!(err, StoreError::Io { source, .. } if source.kind() == std::io::ErrorKind::ReadOnlyFilesystem);
    io && matches!(ServerError::find(err), Some(ServerError::ReadOnly { .. }))
}

#[test]
fn a_read_only_storage_creates_no_table_and_reads_none_as_empty() -> TestResult {
    let Some(db) = TestDb::create("a_read_only_storage_creates_no_table_and_reads_none_as_empty")? else {
        return Ok(());
    };
    let s = PostgresStorage::connect_with(&db.conn(), PostgresOptions::default().read_only(true))?;
    session_testkit::assert_read_only_and_empty!(s, refused);
    assert!(tables(&mut db.client()?)?.is_empty(), "nothing was created");
    Ok(())
}

#[test]
fn a_read_only_storage_reads_the_table_and_an_older_one_as_it_is() -> TestResult {
    let Some(db) = TestDb::create("a_read_only_storage_reads_the_table_and_an_older_one_as_it_is")? else {
        return Ok(());
    };
    let w = PostgresStorage::connect_with(&db.conn(), PostgresOptions::default().table("t_full"))?;
    let r = || PostgresStorage::connect_with(&db.conn(), PostgresOptions::default().table("t_full").read_only(true));
    session_testkit::assert_read_only_reads_what_was_written!(w, r()?, refused);
    // omp before the title columns: read as it is, no column added.
    let mut c = db.client()?;
    c.batch_execute(&omp_ddl("t_old")[0])?;
    c.execute("INSERT INTO t_old (path, content, mtime_ms) VALUES ('/s/old.jsonl', 'x\n', 5)", &[])?;
    let old = PostgresStorage::connect_with(&db.conn(), PostgresOptions::default().table("t_old").read_only(true))?;
    session_testkit::assert_reads_the_older_table!(old);
    let n: i64 =
        c.query_one("SELECT count(*) FROM information_schema.columns WHERE table_name = 't_old'", &[])?.try_get(0)?;
    assert_eq!(n, 3, "no title column was added");
    assert_eq!(tables(&mut c)?, ["t_full", "t_old"]);
    Ok(())
}
