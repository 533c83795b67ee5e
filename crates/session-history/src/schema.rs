//! The on-disk schema of `history.db` and the open sequence that converges every
//! historical shape on it (omp 18.3.4 `HistoryStorage` constructor and
//! `session-index.ts`).
//!
//! The DDL strings are byte-for-byte those of omp 18.3.4 (tabs included): SQLite
//! stores the statement text in `sqlite_master`, so a database written by this crate
//! is indistinguishable from one omp wrote.

use std::collections::HashMap;

use rusqlite::types::Value;
use rusqlite::{Connection, Transaction, TransactionBehavior};

use crate::text::normalize_prompt;

/// The `history` table and its recency index, exactly as omp 18.3.4 creates them.
pub(crate) const HISTORY_TABLE_DDL: &str = "
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

/// The external-content FTS5 index over `history.prompt` and its insert trigger.
/// There are no update or delete triggers: upserts never change `prompt`.
pub(crate) const HISTORY_FTS_DDL: &str = "
CREATE VIRTUAL TABLE IF NOT EXISTS history_fts USING fts5(prompt, content='history', content_rowid='id');

CREATE TRIGGER IF NOT EXISTS history_ai AFTER INSERT ON history BEGIN
\tINSERT INTO history_fts(rowid, prompt) VALUES (new.id, new.prompt);
END;
";

/// The per-session index tables omp keeps in the same file (`session-index.ts`).
pub(crate) const SESSION_INDEX_DDL: &str = "
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

/// The `PRAGMA user_version` the rebuild pass leaves behind (omp's
/// `HISTORY_DATA_VERSION`); only that pass versions the file.
pub(crate) const HISTORY_DATA_VERSION: i64 = 1;

/// Something the open sequence did that the caller should know about.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpenNotice {
    /// The file was corrupt (`SQLITE_CORRUPT` / `SQLITE_NOTADB`): it was copied
    /// aside, with its `-wal`, `-shm` and `-journal` companions, and a fresh
    /// database was created in its place. Nothing was deleted before the copies
    /// existed.
    Quarantined {
        /// The copy of the main file: `history.db.corrupt-<ms>-<uuid>`.
        backup: std::path::PathBuf,
        /// Every copy made, the main file's first.
        files: Vec<std::path::PathBuf>,
        /// The SQLite error that revealed the corruption.
        cause: String,
    },
    /// The one-time rebuild pass ran (the file was older than `user_version` 1, or
    /// its `prompt` column was not unique): prompts were normalized and duplicates
    /// collapsed into their most recent row, with use counts summed. Not reported
    /// for a file that had no rows.
    Rebuilt {
        /// Rows before the pass.
        rows_before: usize,
        /// Rows after the pass (fewer when duplicates or empty prompts collapsed).
        rows_after: usize,
    },
    /// The rebuild pass could not read the old table and was skipped, leaving the
    /// rows as they were (omp does the same).
    RebuildSkipped {
        /// The SQLite error.
        reason: String,
    },
    /// Re-indexing the full-text index failed; search still works through the
    /// substring fallback.
    FtsRebuildFailed {
        /// The SQLite error.
        reason: String,
    },
}

impl std::fmt::Display for OpenNotice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenNotice::Quarantined { backup, cause, .. } => write!(
                f,
                "the history database was damaged ({cause}); it was copied to {} and a new one was started",
                backup.display()
            ),
            OpenNotice::Rebuilt { rows_before, rows_after } => {
                write!(f, "the history database was rebuilt once: {rows_before} prompts became {rows_after}")
            }
            OpenNotice::RebuildSkipped { reason } => {
                write!(f, "the history database's one-time rebuild was skipped ({reason}); its rows are as they were")
            }
            OpenNotice::FtsRebuildFailed { reason } => {
                write!(
                    f,
                    "the history's full-text index could not be rebuilt ({reason}); search falls back to substrings"
                )
            }
        }
    }
}

/// The journal every database of the crate uses: WAL, `synchronous=NORMAL`.
fn set_journal(conn: &Connection) -> Result<(), (&'static str, rusqlite::Error)> {
    // `journal_mode` answers with a row; an in-memory database answers "memory".
    conn.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(())).map_err(|e| ("set journal_mode", e))?;
    conn.execute_batch("PRAGMA synchronous=NORMAL").map_err(|e| ("set synchronous", e))
}

/// Sets up a connection of the crate's other database (the search catalog) as
/// `history.db`'s is: the busy timeout first, then the journal.
pub(crate) fn configure(
    conn: &Connection,
    busy_timeout: std::time::Duration,
) -> Result<(), (&'static str, rusqlite::Error)> {
    conn.busy_timeout(busy_timeout).map_err(|e| ("set busy_timeout", e))?;
    set_journal(conn)
}

/// Applies the connection pragmas and converges the schema; the body of `open`.
///
/// Order as in omp: busy timeout (set by the caller before anything takes a lock),
/// `journal_mode=WAL`, `synchronous=NORMAL`; then, in one `BEGIN IMMEDIATE`
/// transaction so two processes opening an old file cannot both migrate it: note
/// whether `history_fts` existed, base DDL, add `use_count` if missing, the rebuild
/// pass when needed, FTS DDL, FTS `'rebuild'` when the pass ran or the index is new,
/// and the session index tables.
pub(crate) fn initialize(conn: &Connection) -> Result<Vec<OpenNotice>, (&'static str, rusqlite::Error)> {
    let mut notices = Vec::new();
    set_journal(conn)?;

    let tx = Transaction::new_unchecked(conn, TransactionBehavior::Immediate).map_err(|e| ("lock for migration", e))?;
    let had_fts = tx
        .query_row("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='history_fts'", [], |r| {
            r.get::<_, i64>(0)
        })
        .map_err(|e| ("read schema", e))?
        > 0;
    tx.execute_batch(HISTORY_TABLE_DDL).map_err(|e| ("create history table", e))?;
    if !has_column(&tx, "use_count").map_err(|e| ("read schema", e))? {
        tx.execute_batch("ALTER TABLE history ADD COLUMN use_count INTEGER NOT NULL DEFAULT 1")
            .map_err(|e| ("add use_count column", e))?;
    }
    let rebuilt = match rebuild_if_needed(&tx) {
        Ok(Some(notice)) => {
            // A new file goes through the pass too (it sets the version); that is
            // not worth a notice.
            if notice != (OpenNotice::Rebuilt { rows_before: 0, rows_after: 0 }) {
                notices.push(notice);
            }
            true
        }
        Ok(None) => false,
        Err(RebuildError::Dump(e)) => {
            if crate::error::is_corrupt(&e) || crate::error::is_busy(&e) {
                return Err(("read history rows", e));
            }
            notices.push(OpenNotice::RebuildSkipped { reason: e.to_string() });
            false
        }
        Err(RebuildError::Write(e)) => return Err(("rebuild history table", e)),
    };
    tx.execute_batch(HISTORY_FTS_DDL).map_err(|e| ("create full-text index", e))?;
    if (rebuilt || !had_fts)
        && let Err(e) = tx.execute_batch("INSERT INTO history_fts(history_fts) VALUES('rebuild')")
    {
        // A failed statement normally leaves the transaction open; if SQLite rolled it
        // back (I/O error, corruption) nothing above was applied, so fail the open.
        if tx.is_autocommit() || crate::error::is_corrupt(&e) {
            return Err(("rebuild full-text index", e));
        }
        notices.push(OpenNotice::FtsRebuildFailed { reason: e.to_string() });
    }
    tx.execute_batch(SESSION_INDEX_DDL).map_err(|e| ("create session index tables", e))?;
    tx.commit().map_err(|e| ("commit migration", e))?;
    Ok(notices)
}

/// Returns whether `history` has a column named `column`.
fn has_column(conn: &Connection, column: &str) -> rusqlite::Result<bool> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info('history')")?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        if row.get_ref(0)?.as_str().ok() == Some(column) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Returns whether `history.prompt` alone carries a UNIQUE index, which the upsert's
/// `ON CONFLICT(prompt)` needs.
fn has_unique_prompt(conn: &Connection) -> rusqlite::Result<bool> {
    let mut stmt = conn.prepare(
        "SELECT count(*) FROM pragma_index_list('history') AS il \
         WHERE il.\"unique\" = 1 \
         AND (SELECT count(*) FROM pragma_index_info(il.name)) = 1 \
         AND (SELECT name FROM pragma_index_info(il.name)) = 'prompt'",
    )?;
    Ok(stmt.query_row([], |r| r.get::<_, i64>(0))? > 0)
}

/// Why the rebuild pass stopped.
enum RebuildError {
    /// Reading the old rows failed; nothing was changed.
    Dump(rusqlite::Error),
    /// Rewriting the table failed; the enclosing transaction must be abandoned.
    Write(rusqlite::Error),
}

/// One row of the old table, values kept as stored.
struct OldRow {
    id: Value,
    prompt: String,
    created_at: Value,
    cwd: Value,
    session_id: Value,
    use_count: i64,
}

/// Runs the one-time dump-and-rebuild pass when `user_version < 1`, or when the
/// table cannot take the upsert because `prompt` is not unique (a shape omp would
/// fail to write to; rebuilding is the sensible answer).
///
/// Every row is read, its prompt normalized; per normalized prompt the most recent
/// row wins (higher `created_at`, ties to the higher id) and carries the sum of the
/// collapsed rows' use counts; rows whose prompt normalizes to nothing are dropped.
/// Then the index, trigger, FTS table and table are dropped, the table is recreated
/// from [`HISTORY_TABLE_DDL`] and the winners reinserted with their original ids.
fn rebuild_if_needed(tx: &Transaction<'_>) -> Result<Option<OpenNotice>, RebuildError> {
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(RebuildError::Dump)?;
    if version >= HISTORY_DATA_VERSION && has_unique_prompt(tx).map_err(RebuildError::Dump)? {
        return Ok(None);
    }
    let rows = dump(tx).map_err(RebuildError::Dump)?;
    let rows_before = rows.len();

    let mut winners: Vec<OldRow> = Vec::new();
    let mut slot_of: HashMap<String, usize> = HashMap::new();
    for mut row in rows {
        let prompt = normalize_prompt(&row.prompt);
        if prompt.is_empty() {
            continue;
        }
        row.prompt = prompt;
        match slot_of.get(&row.prompt) {
            None => {
                slot_of.insert(row.prompt.clone(), winners.len());
                winners.push(row);
            }
            Some(&slot) => {
                let incumbent = &mut winners[slot];
                let use_count = incumbent.use_count.saturating_add(row.use_count);
                if is_more_recent(&row, incumbent) {
                    *incumbent = row;
                }
                incumbent.use_count = use_count;
            }
        }
    }

    let write = || -> rusqlite::Result<()> {
        tx.execute_batch(
            "DROP INDEX IF EXISTS idx_history_created_at;
             DROP TRIGGER IF EXISTS history_ai;
             DROP TABLE IF EXISTS history_fts;
             DROP TABLE history;",
        )?;
        tx.execute_batch(HISTORY_TABLE_DDL)?;
        let mut insert = tx.prepare(
            "INSERT INTO history (id, prompt, created_at, cwd, session_id, use_count) VALUES (?, ?, ?, ?, ?, ?)",
        )?;
        for row in &winners {
            insert.execute(rusqlite::params![
                row.id,
                row.prompt,
                row.created_at,
                row.cwd,
                row.session_id,
                row.use_count
            ])?;
        }
        // Never lower a version a newer release may have set.
        tx.execute_batch(&format!("PRAGMA user_version = {}", version.max(HISTORY_DATA_VERSION)))?;
        Ok(())
    };
    write().map_err(RebuildError::Write)?;
    Ok(Some(OpenNotice::Rebuilt { rows_before, rows_after: winners.len() }))
}

/// Reads every row of `history`, whatever its shape; a missing `session_id` reads
/// as NULL and a missing or NULL `use_count` as 1.
fn dump(tx: &Transaction<'_>) -> rusqlite::Result<Vec<OldRow>> {
    let session_id = if has_column(tx, "session_id")? { "session_id" } else { "NULL AS session_id" };
    let use_count = if has_column(tx, "use_count")? { "use_count" } else { "1 AS use_count" };
    let mut stmt =
        tx.prepare(&format!("SELECT id, prompt, created_at, cwd, {session_id}, {use_count} FROM history"))?;
    let mut rows = stmt.query([])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        // A NULL prompt has nothing to recall; the reference would crash on it.
        let Some(prompt) = crate::store::text_value(row.get_ref(1)?) else { continue };
        out.push(OldRow {
            id: row.get(0)?,
            prompt,
            created_at: row.get(2)?,
            cwd: row.get(3)?,
            session_id: row.get(4)?,
            use_count: crate::store::integer_value(row.get_ref(5)?).unwrap_or(1),
        });
    }
    Ok(out)
}

/// omp's "latest provenance wins" rule: `created_at` compared as JavaScript numbers
/// (anything non-numeric never wins), ties to the higher id.
fn is_more_recent(row: &OldRow, incumbent: &OldRow) -> bool {
    let (a, b) = (number(&row.created_at), number(&incumbent.created_at));
    a > b || (a == b && number(&row.id) > number(&incumbent.id))
}

/// Returns a stored value as a JavaScript number would compare (NaN if not numeric).
fn number(value: &Value) -> f64 {
    match value {
        // Precision loss beyond 2^53 matches JavaScript's numbers.
        #[allow(clippy::cast_precision_loss)] // the reference compares JS doubles
        Value::Integer(i) => *i as f64,
        Value::Real(r) => *r,
        Value::Null | Value::Text(_) | Value::Blob(_) => f64::NAN,
    }
}

#[cfg(test)]
mod notice_tests {
    use super::OpenNotice;

    #[test]
    fn notices_read_as_sentences_naming_what_to_look_at() {
        let q = OpenNotice::Quarantined {
            backup: "/h/history.db.corrupt-1-x".into(),
            files: vec!["/h/history.db.corrupt-1-x".into()],
            cause: "file is not a database".into(),
        };
        let text = q.to_string();
        assert!(text.contains("/h/history.db.corrupt-1-x") && text.contains("file is not a database"), "{text}");
        assert!(!text.contains('{') && !text.contains("Quarantined"), "{text}");
        let r = OpenNotice::Rebuilt { rows_before: 5, rows_after: 3 }.to_string();
        assert!(r.contains("5 prompts became 3"), "{r}");
    }
}
