//! Both directions against omp: files built by raw SQL exactly as omp (18.3.4 and
//! its predecessors) wrote them are read and migrated; files this crate writes have
//! exactly the `sqlite_master` omp 18.3.4 produces and accept omp's statements.

use rusqlite::Connection;
use session_history::{AddOutcome, HistoryScope, HistoryStore, OpenNotice, Opened};

use crate::{TempDir, TestResult, fixed};

/// omp 18.3.4's `HISTORY_TABLE_DDL`, copied from its source (tabs included).
const OMP_HISTORY_TABLE_DDL: &str = "
CREATE TABLE IF NOT EXISTS history (
\tid INTEGER PRIMARY KEY AUTOINCREMENT,
\tprompt TEXT NOT NULL UNIQUE,
\tcreated_at INTEGER NOT NULL DEFAULT (CAST(strftime('%s','now') AS INTEGER)),
\tcwd TEXT,
\tsession_id TEXT,
\tuse_count INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS idx_history_created_at ON history(created_at DESC);
";

/// omp 18.3.4's FTS statements.
const OMP_FTS_DDL: &str = "
CREATE VIRTUAL TABLE IF NOT EXISTS history_fts USING fts5(prompt, content='history', content_rowid='id');

CREATE TRIGGER IF NOT EXISTS history_ai AFTER INSERT ON history BEGIN
\tINSERT INTO history_fts(rowid, prompt) VALUES (new.id, new.prompt);
END;
";

/// omp 18.3.4's `SESSION_INDEX_DDL` (`session-index.ts`).
const OMP_SESSION_INDEX_DDL: &str = "
CREATE TABLE IF NOT EXISTS session_titles (
\tsession_id TEXT PRIMARY KEY,
\ttitle TEXT NOT NULL,
\tupdated_at INTEGER NOT NULL DEFAULT (CAST(strftime('%s','now') AS INTEGER))
);
CREATE TABLE IF NOT EXISTS session_recaps (
\tid INTEGER PRIMARY KEY AUTOINCREMENT,
\tsession_id TEXT NOT NULL,
\tcwd TEXT NOT NULL,
\trecap TEXT NOT NULL,
\tcreated_at INTEGER NOT NULL DEFAULT (CAST(strftime('%s','now') AS INTEGER))
);
CREATE INDEX IF NOT EXISTS idx_session_recaps_session ON session_recaps(session_id, created_at);
";

/// omp 18.3.4's upsert statement.
const OMP_UPSERT: &str = "
INSERT INTO history (prompt, created_at, cwd, session_id)
VALUES (?, CAST(strftime('%s','now') AS INTEGER), ?, ?)
ON CONFLICT(prompt) DO UPDATE SET
\tcreated_at = excluded.created_at,
\tcwd = excluded.cwd,
\tsession_id = excluded.session_id,
\tuse_count = history.use_count + 1
";

/// The 17.x shape (seed era): duplicates allowed, no `use_count`, no version.
const SHAPE_17: &str = "
CREATE TABLE IF NOT EXISTS history (
\tid INTEGER PRIMARY KEY AUTOINCREMENT,
\tprompt TEXT NOT NULL,
\tcreated_at INTEGER NOT NULL DEFAULT (CAST(strftime('%s','now') AS INTEGER)),
\tcwd TEXT,
\tsession_id TEXT
);
CREATE INDEX IF NOT EXISTS idx_history_created_at ON history(created_at DESC);
CREATE VIRTUAL TABLE IF NOT EXISTS history_fts USING fts5(prompt, content='history', content_rowid='id');
CREATE TRIGGER IF NOT EXISTS history_ai AFTER INSERT ON history BEGIN
\tINSERT INTO history_fts(rowid, prompt) VALUES (new.id, new.prompt);
\tEND;
";

/// The index, full-text table and trigger the older shapes create after their table.
macro_rules! index_and_fts {
    () => {
        "CREATE INDEX IF NOT EXISTS idx_history_created_at ON history(created_at DESC);
CREATE VIRTUAL TABLE IF NOT EXISTS history_fts USING fts5(prompt, content='history', content_rowid='id');
CREATE TRIGGER IF NOT EXISTS history_ai AFTER INSERT ON history BEGIN
\tINSERT INTO history_fts(rowid, prompt) VALUES (new.id, new.prompt);
END;
"
    };
}

/// The omp 5.x shape: `unixepoch()` default, no `session_id`, duplicates allowed.
const SHAPE_5: &str = concat!(
    "
CREATE TABLE IF NOT EXISTS history (
\tid INTEGER PRIMARY KEY AUTOINCREMENT,
\tprompt TEXT NOT NULL,
\tcreated_at INTEGER NOT NULL DEFAULT (unixepoch()),
\tcwd TEXT
);
",
    index_and_fts!()
);

/// The shape between (unique prompt, rebuilt to `user_version` 1, no `use_count`).
const SHAPE_UNIQUE_NO_COUNT: &str = concat!(
    "
CREATE TABLE IF NOT EXISTS history (
\tid INTEGER PRIMARY KEY AUTOINCREMENT,
\tprompt TEXT NOT NULL UNIQUE,
\tcreated_at INTEGER NOT NULL DEFAULT (CAST(strftime('%s','now') AS INTEGER)),
\tcwd TEXT,
\tsession_id TEXT
);
",
    index_and_fts!(),
    "PRAGMA user_version = 1;\n"
);

/// Creates a file the way omp 18.3.4 does on first use: WAL, base DDL, the rebuild
/// pass on the empty table (`user_version` 0 -> 1), FTS, FTS rebuild, session index.
fn omp_fresh_file(path: &std::path::Path) -> rusqlite::Result<Connection> {
    let db = Connection::open(path)?;
    db.execute_batch("PRAGMA busy_timeout = 5000")?;
    db.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))?;
    db.execute_batch("PRAGMA synchronous=NORMAL")?;
    db.execute_batch(OMP_HISTORY_TABLE_DDL)?;
    db.execute_batch(
        "BEGIN;
         DROP INDEX IF EXISTS idx_history_created_at;
         DROP TRIGGER IF EXISTS history_ai;
         DROP TABLE IF EXISTS history_fts;
         DROP TABLE history;",
    )?;
    db.execute_batch(OMP_HISTORY_TABLE_DDL)?;
    db.execute_batch("PRAGMA user_version = 1; COMMIT;")?;
    db.execute_batch(OMP_FTS_DDL)?;
    db.execute_batch("INSERT INTO history_fts(history_fts) VALUES('rebuild')")?;
    db.execute_batch(OMP_SESSION_INDEX_DDL)?;
    Ok(db)
}

/// One `sqlite_master` row without its page number: type, name, table, SQL text.
type MasterRow = (String, String, String, Option<String>);

/// The schema as SQLite records it, without page numbers.
fn master(db: &Connection) -> rusqlite::Result<Vec<MasterRow>> {
    let mut stmt = db.prepare("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
    rows.collect()
}

fn user_version(db: &Connection) -> rusqlite::Result<i64> {
    db.query_row("PRAGMA user_version", [], |r| r.get(0))
}

/// An older omp's file: `shape`'s statements, then `fill`'s rows; and the store opened
/// on it at time 1000.
fn open_legacy(
    tag: &str,
    shape: &str,
    fill: impl FnOnce(&Connection) -> rusqlite::Result<()>,
) -> Result<(TempDir, Opened), Box<dyn std::error::Error>> {
    let dir = TempDir::new(tag);
    let db = Connection::open(dir.join("history.db"))?;
    db.execute_batch(shape)?;
    fill(&db)?;
    drop(db);
    let opened = HistoryStore::open(dir.join("history.db"), fixed(1000))?;
    Ok((dir, opened))
}

#[test]
fn written_file_has_exactly_omps_schema() -> TestResult {
    let ours = TempDir::new("schema-ours");
    let theirs = TempDir::new("schema-theirs");
    let opened = HistoryStore::open(ours.join("history.db"), fixed(100))?;
    opened.store.add("hello", None, None)?;
    opened.store.close()?;
    let omp = omp_fresh_file(&theirs.join("history.db"))?;

    let written = Connection::open(ours.join("history.db"))?;
    assert_eq!(master(&written)?, master(&omp)?);
    assert_eq!(user_version(&written)?, 1);
    let mode: String = written.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
    assert_eq!(mode, "wal");
    // Spot-check the text SQLite stored, so a change on both sides still fails.
    let sql: String = written.query_row("SELECT sql FROM sqlite_master WHERE name = 'history_ai'", [], |r| r.get(0))?;
    assert_eq!(
        sql,
        "CREATE TRIGGER history_ai AFTER INSERT ON history BEGIN\n\tINSERT INTO history_fts(rowid, prompt) VALUES (new.id, new.prompt);\nEND"
    );
    Ok(())
}

#[test]
fn reads_a_file_omp_wrote_and_omp_reads_ours() -> TestResult {
    let dir = TempDir::new("omp-written");
    {
        let omp = omp_fresh_file(&dir.join("history.db"))?;
        omp.execute(OMP_UPSERT, rusqlite::params!["git commit -m fix", "/repo", "s1"])?;
        omp.execute(OMP_UPSERT, rusqlite::params!["explain lifetimes", "/repo", "s2"])?;
        omp.execute(OMP_UPSERT, rusqlite::params!["git commit -m fix", "/other", "s3"])?;
        omp.execute("UPDATE history SET created_at = 1000 + id", [])?;
    }
    let opened = HistoryStore::open(dir.join("history.db"), fixed(5000))?;
    assert!(opened.notices.is_empty(), "{:?}", opened.notices);
    let store = opened.store;
    let hits = store.search("commit", 10, &HistoryScope::Global)?;
    assert_eq!(hits.len(), 1);
    assert_eq!((hits[0].use_count, hits[0].cwd.as_deref()), (2, Some("/other")));
    assert_eq!(store.add("explain lifetimes", Some("/x"), None)?, AddOutcome::Updated { id: 2, use_count: 2 });
    store.add("new prompt from rust", Some("/x"), Some("s9"))?;
    drop(store);

    // omp opening our file again: nothing to migrate, its statements work.
    let omp = Connection::open(dir.join("history.db"))?;
    assert_eq!(user_version(&omp)?, 1);
    omp.execute(OMP_UPSERT, rusqlite::params!["new prompt from rust", "/y", "s10"])?;
    let (count, session): (i64, String) =
        omp.query_row("SELECT use_count, session_id FROM history WHERE prompt = 'new prompt from rust'", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    assert_eq!((count, session.as_str()), (2, "s10"));
    let fts: Vec<i64> = omp
        .prepare("SELECT rowid FROM history_fts WHERE history_fts MATCH '\"rust\"*'")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    assert_eq!(fts.len(), 1);
    Ok(())
}

#[test]
fn migrates_the_17x_shape_with_duplicates_and_padding() -> TestResult {
    let (dir, opened) = open_legacy("shape17", SHAPE_17, |db| {
        let rows: [(i64, &str, i64, &str, Option<&str>); 6] = [
            (1, "fix the build", 100, "/a", Some("s1")),
            (2, "fix the build  \r\n", 300, "/b", Some("s2")),
            (3, "other", 200, "/a", None),
            (4, "fix the build", 300, "/c", Some("s4")),
            (5, "   ", 400, "/a", None),
            (6, "line one   \nline two", 50, "/a", Some("s6")),
        ];
        for (id, prompt, at, cwd, sid) in rows {
            db.execute(
                "INSERT INTO history (id, prompt, created_at, cwd, session_id) VALUES (?, ?, ?, ?, ?)",
                rusqlite::params![id, prompt, at, cwd, sid],
            )?;
        }
        Ok(())
    })?;
    assert_eq!(opened.notices, [OpenNotice::Rebuilt { rows_before: 6, rows_after: 3 }]);
    let store = opened.store;
    let recent = store.recent(10, &HistoryScope::Global)?;
    let got: Vec<_> =
        recent.iter().map(|e| (e.id, e.prompt.as_str(), e.created_at, e.cwd.as_deref(), e.use_count)).collect();
    // Ties on created_at go to the higher id; use counts of collapsed rows add up.
    assert_eq!(
        got,
        [
            (4, "fix the build", 300, Some("/c"), 3),
            (3, "other", 200, Some("/a"), 1),
            (6, "line one\nline two", 50, Some("/a"), 1)
        ]
    );
    assert_eq!(recent[0].session_id.as_deref(), Some("s4"));
    // The full-text index was rebuilt for the surviving rows.
    assert_eq!(store.search("buil", 10, &HistoryScope::Global)?.len(), 1);
    assert_eq!(store.add("fix the build", None, None)?, AddOutcome::Updated { id: 4, use_count: 4 });
    drop(store);

    let db = Connection::open(dir.join("history.db"))?;
    assert_eq!(user_version(&db)?, 1);
    let sql: String = db.query_row("SELECT sql FROM sqlite_master WHERE name = 'history'", [], |r| r.get(0))?;
    assert!(sql.contains("prompt TEXT NOT NULL UNIQUE") && sql.contains("use_count INTEGER NOT NULL DEFAULT 1"));
    Ok(())
}

#[test]
fn migrates_the_5x_shape_without_session_id() -> TestResult {
    let (_dir, opened) = open_legacy("shape5", SHAPE_5, |db| {
        db.execute_batch(
            "INSERT INTO history (prompt, created_at, cwd) VALUES ('hello world', 10, '/a');
             INSERT INTO history (prompt, created_at, cwd) VALUES ('hello world', 20, '/b');
             INSERT INTO history (prompt, created_at, cwd) VALUES ('bye', 15, NULL);",
        )
    })?;
    assert_eq!(opened.notices, [OpenNotice::Rebuilt { rows_before: 3, rows_after: 2 }]);
    let recent = opened.store.recent(10, &HistoryScope::Global)?;
    assert_eq!(recent.len(), 2);
    assert_eq!(
        (recent[0].id, recent[0].cwd.as_deref(), recent[0].session_id.as_deref(), recent[0].use_count),
        (2, Some("/b"), None, 2)
    );
    assert_eq!((recent[1].prompt.as_str(), recent[1].cwd.as_deref()), ("bye", None));
    assert_eq!(opened.store.search("wor", 5, &HistoryScope::Global)?.len(), 1);
    Ok(())
}

#[test]
fn adds_use_count_to_a_versioned_file_without_rewriting_it() -> TestResult {
    let (dir, opened) = open_legacy("shape-unique", SHAPE_UNIQUE_NO_COUNT, |db| {
        db.execute_batch(
            "INSERT INTO history (prompt, created_at, cwd, session_id) VALUES ('keep me   \n', 10, '/a', 's');",
        )
    })?;
    // Already at version 1 with a unique prompt: only the column is added, rows untouched.
    assert!(opened.notices.is_empty(), "{:?}", opened.notices);
    let recent = opened.store.recent(10, &HistoryScope::Global)?;
    assert_eq!((recent[0].prompt.as_str(), recent[0].use_count), ("keep me   \n", 1));
    assert_eq!(opened.store.search("keep", 10, &HistoryScope::Global)?.len(), 1);
    drop(opened);
    let db = Connection::open(dir.join("history.db"))?;
    let sql: String = db.query_row("SELECT sql FROM sqlite_master WHERE name = 'history'", [], |r| r.get(0))?;
    assert!(sql.ends_with("session_id TEXT\n, use_count INTEGER NOT NULL DEFAULT 1)"), "{sql}");
    Ok(())
}

#[test]
fn rebuilds_a_versioned_file_whose_prompts_are_not_unique() -> TestResult {
    let (dir, opened) = open_legacy("shape-versioned-dupes", SHAPE_17, |db| {
        db.execute_batch(
            "INSERT INTO history (prompt, created_at) VALUES ('dup', 1), ('dup', 2);
             PRAGMA user_version = 3;",
        )
    })?;
    assert_eq!(opened.notices, [OpenNotice::Rebuilt { rows_before: 2, rows_after: 1 }]);
    assert!(matches!(opened.store.add("dup", None, None)?, AddOutcome::Updated { use_count: 3, .. }));
    drop(opened);
    // A newer version number is kept.
    assert_eq!(user_version(&Connection::open(dir.join("history.db"))?)?, 3);
    Ok(())
}
