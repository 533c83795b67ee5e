//! [`HistoryStore`]: one connection to a `history.db`, with omp 18.3.4's write
//! (upsert) and read (recent, two-stage search) semantics, plus the session title
//! and recap tables that live in the same file.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::types::{Value, ValueRef};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params_from_iter};

use crate::clock::{Clock, SystemClock};
use crate::error::{HistoryError, is_busy};
use crate::recover;
use crate::schema::{self, OpenNotice};
use crate::text::{fts_query, like_pattern, normalize_prompt, query_words};

/// The file name of the prompt history inside an agent directory.
pub const HISTORY_DB_FILE_NAME: &str = "history.db";

/// The largest `limit` a read honours; larger limits are clamped (omp's rule).
pub const MAX_LIMIT: usize = 1000;

/// The default `limit` of [`HistoryStore::matching_session_ids`] (omp's default).
pub const DEFAULT_SESSION_MATCH_LIMIT: usize = 500;

/// The default busy timeout: how long a write waits for another writer (omp uses
/// 5000 ms in interactive mode, 1000 ms headless).
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_millis(5000);

/// Returns `<agent_dir>/history.db`, where omp and musepi keep the prompt history.
///
/// `agent_dir` is the resolved agent directory (`~/.omp/agent`, `~/.musepi/agent`,
/// `$PI_CODING_AGENT_DIR`, or the flattened `$XDG_DATA_HOME/omp` data directory);
/// resolving it is the caller's business.
pub fn history_db_path(agent_dir: &Path) -> PathBuf {
    agent_dir.join(HISTORY_DB_FILE_NAME)
}

/// How to open a [`HistoryStore`].
#[derive(Clone)]
#[non_exhaustive]
pub struct HistoryOptions {
    /// How long a statement waits for a lock held by another connection before it
    /// fails with [`HistoryError::Busy`].
    pub busy_timeout: Duration,
    /// Where `created_at` / `updated_at` come from.
    pub clock: Arc<dyn Clock>,
}

impl Default for HistoryOptions {
    fn default() -> Self {
        HistoryOptions { busy_timeout: DEFAULT_BUSY_TIMEOUT, clock: Arc::new(SystemClock) }
    }
}

impl fmt::Debug for HistoryOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HistoryOptions").field("busy_timeout", &self.busy_timeout).finish_non_exhaustive()
    }
}

impl HistoryOptions {
    /// Returns these options with another busy timeout.
    #[must_use]
    pub fn with_busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Returns these options with another clock (any `Fn() -> i64` works).
    #[must_use]
    pub fn with_clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }
}

/// Which rows a read considers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HistoryScope {
    /// Every row (omp 18.3.4's only behaviour).
    #[default]
    Global,
    /// Rows whose latest submission came from this working directory (exact match).
    Cwd(String),
    /// Rows whose latest submission came from this session id (exact match).
    Session(String),
}

/// One distinct prompt with the provenance of its latest submission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryEntry {
    /// The row id, stable across submissions of the same prompt.
    pub id: i64,
    /// The normalized prompt text, unique in the database.
    pub prompt: String,
    /// Unix seconds of the latest submission.
    pub created_at: i64,
    /// Working directory of the latest submission, if recorded.
    pub cwd: Option<String>,
    /// Session id of the latest submission, if recorded.
    pub session_id: Option<String>,
    /// How many times the prompt was submitted, the first time included.
    pub use_count: i64,
}

/// What [`HistoryStore::add`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AddOutcome {
    /// The prompt was empty after normalization; nothing was written.
    Ignored,
    /// A new row was created.
    Inserted {
        /// The new row's id.
        id: i64,
    },
    /// The prompt existed: its time, cwd and session were replaced and its use count
    /// incremented.
    Updated {
        /// The existing row's id.
        id: i64,
        /// The use count after this submission.
        use_count: i64,
    },
}

/// One idle recap of a session (`session_recaps`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRecap {
    /// The row id.
    pub id: i64,
    /// The session the recap belongs to.
    pub session_id: String,
    /// The working directory it was recorded in.
    pub cwd: String,
    /// The recap text.
    pub recap: String,
    /// Unix seconds when it was recorded.
    pub created_at: i64,
}

/// The result of [`HistoryStore::open`]: the store and what opening it did.
///
/// `notices` is empty on an ordinary open. It reports a corrupt file that was moved
/// aside ([`OpenNotice::Quarantined`]), a migration of an older file, and anything
/// the open skipped; callers should at least log it.
#[derive(Debug)]
#[must_use = "the notices may report a corrupt database that was moved aside"]
pub struct Opened {
    /// The open store.
    pub store: HistoryStore,
    /// What the open sequence did beyond opening, in order.
    pub notices: Vec<OpenNotice>,
}

/// A connection to a prompt history database.
///
/// The store is `Send` but not `Sync`: give each thread its own store (they may share
/// the file; WAL lets readers run beside a writer) or put one behind a `Mutex`.
pub struct HistoryStore {
    conn: Connection,
    /// The database file, or `:memory:`.
    path: PathBuf,
    in_memory: bool,
    options: HistoryOptions,
}

impl fmt::Debug for HistoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HistoryStore").field("path", &self.path).field("options", &self.options).finish()
    }
}

/// A failed open attempt, keeping the connection for the quarantine to close.
struct OpenFailure {
    op: &'static str,
    error: rusqlite::Error,
    conn: Option<Connection>,
}

/// Opens a connection, sets the busy timeout first, then runs the open sequence.
fn try_open(path: Option<&Path>, options: &HistoryOptions) -> Result<(Connection, Vec<OpenNotice>), Box<OpenFailure>> {
    let conn = path
        .map_or_else(Connection::open_in_memory, Connection::open)
        .map_err(|error| Box::new(OpenFailure { op: "open", error, conn: None }))?;
    // Before any statement that takes a lock, so the migration waits for a busy
    // writer instead of failing at once.
    if let Err(error) = conn.busy_timeout(options.busy_timeout) {
        return Err(Box::new(OpenFailure { op: "set busy_timeout", error, conn: Some(conn) }));
    }
    match schema::initialize(&conn) {
        Ok(notices) => Ok((conn, notices)),
        Err((op, error)) => Err(Box::new(OpenFailure { op, error, conn: Some(conn) })),
    }
}

impl HistoryStore {
    /// Opens (creating if needed) the prompt history at `path`, usually
    /// [`history_db_path`]`(agent_dir)`, and converges its schema on omp 18.3.4's.
    ///
    /// Creates the parent directory. Older files (without `session_id` or
    /// `use_count`, or with duplicate prompts) are migrated in place the way omp
    /// migrates them. A corrupt file is preserved as
    /// `history.db.corrupt-<ms>-<uuid>` and replaced by an empty database; this is
    /// reported in [`Opened::notices`], never done silently.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Io`] when the directory cannot be created;
    /// [`HistoryError::Busy`] when another process holds the file locked beyond the
    /// busy timeout; [`HistoryError::Quarantine`] when a corrupt file cannot be moved
    /// aside; [`HistoryError::Sqlite`] otherwise.
    pub fn open(path: impl AsRef<Path>, options: HistoryOptions) -> Result<Opened, HistoryError> {
        let path = path.as_ref().to_path_buf();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| HistoryError::Io {
                path: path.clone(),
                op: "create directory",
                target: parent.to_path_buf(),
                source,
            })?;
        }
        let identity = recover::file_identity(&path).map_err(|source| HistoryError::Io {
            path: path.clone(),
            op: "inspect",
            target: path.clone(),
            source,
        })?;
        let failure = match try_open(Some(&path), &options) {
            Ok((conn, notices)) => {
                return Ok(Opened { store: HistoryStore { conn, path, in_memory: false, options }, notices });
            }
            Err(failure) => failure,
        };
        if !crate::error::is_corrupt(&failure.error) {
            return Err(open_error(&path, &options, failure.op, failure.error));
        }
        let cause = failure.error.to_string();
        let quarantined = recover::quarantine(&path, &identity, failure.conn)
            .map_err(|source| HistoryError::Quarantine { path: path.clone(), cause: cause.clone(), source })?;
        let (conn, mut notices) =
            try_open(Some(&path), &options).map_err(|f| open_error(&path, &options, f.op, f.error))?;
        if let Some(q) = quarantined {
            notices.insert(0, OpenNotice::Quarantined { backup: q.backup, files: q.files, cause });
        }
        Ok(Opened { store: HistoryStore { conn, path, in_memory: false, options }, notices })
    }

    /// Opens an empty in-memory store with the default options (for tests and
    /// examples).
    ///
    /// # Errors
    ///
    /// [`HistoryError::Sqlite`] if SQLite cannot allocate the database.
    pub fn open_in_memory() -> Result<HistoryStore, HistoryError> {
        HistoryStore::open_in_memory_with(HistoryOptions::default())
    }

    /// Opens an empty in-memory store with `options` (a fixed clock, say).
    ///
    /// # Errors
    ///
    /// [`HistoryError::Sqlite`] if SQLite cannot allocate the database.
    pub fn open_in_memory_with(options: HistoryOptions) -> Result<HistoryStore, HistoryError> {
        let path = PathBuf::from(":memory:");
        let (conn, _notices) = try_open(None, &options).map_err(|f| open_error(&path, &options, f.op, f.error))?;
        Ok(HistoryStore { conn, path, in_memory: true, options })
    }

    /// Returns the database file, or `None` for an in-memory store.
    pub fn path(&self) -> Option<&Path> {
        (!self.in_memory).then_some(self.path.as_path())
    }

    /// Records a submitted prompt.
    ///
    /// The prompt is normalized ([`normalize_prompt`]); an
    /// empty result is ignored. Otherwise one `BEGIN IMMEDIATE` transaction upserts
    /// the row: a new prompt is inserted with `use_count` 1; a known one gets
    /// `created_at` = now, the given `cwd` and `session_id` (replacing the old ones,
    /// even with NULL) and `use_count + 1`. An empty `session_id` is stored as NULL.
    ///
    /// The write is durable when this returns (WAL, `synchronous=NORMAL`: durable
    /// against a process crash; a power cut may lose the last commits).
    ///
    /// # Contention
    ///
    /// Readers never block the write. If another connection holds the write lock,
    /// SQLite retries until the busy timeout elapses, then this fails with
    /// [`HistoryError::Busy`] and nothing is written; the caller may retry or drop
    /// the prompt (omp logs and drops it). Writes are single-row and take
    /// milliseconds, so waits are short unless another process holds a long
    /// transaction.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Busy`] as above, [`HistoryError::Sqlite`] otherwise.
    pub fn add(&self, prompt: &str, cwd: Option<&str>, session_id: Option<&str>) -> Result<AddOutcome, HistoryError> {
        let prompt = normalize_prompt(prompt);
        if prompt.is_empty() {
            return Ok(AddOutcome::Ignored);
        }
        let session_id = session_id.filter(|s| !s.is_empty());
        let now = self.options.clock.now_unix_seconds();
        let run = || -> rusqlite::Result<AddOutcome> {
            let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)?;
            let existed = tx
                .prepare_cached("SELECT 1 FROM history WHERE prompt = ?")?
                .query_row([&prompt], |_| Ok(()))
                .optional()?
                .is_some();
            let (id, use_count) = tx
                .prepare_cached(
                    "INSERT INTO history (prompt, created_at, cwd, session_id)
VALUES (?, ?, ?, ?)
ON CONFLICT(prompt) DO UPDATE SET
\tcreated_at = excluded.created_at,
\tcwd = excluded.cwd,
\tsession_id = excluded.session_id,
\tuse_count = history.use_count + 1
RETURNING id, use_count",
                )?
                .query_row(rusqlite::params![prompt, now, cwd, session_id], |r| {
                    Ok((r.get::<_, i64>(0)?, integer_value(r.get_ref(1)?).unwrap_or(1)))
                })?;
            tx.commit()?;
            Ok(if existed { AddOutcome::Updated { id, use_count } } else { AddOutcome::Inserted { id } })
        };
        run().map_err(|e| self.error("add", e))
    }

    /// Returns up to `limit` (at most [`MAX_LIMIT`]) prompts in `scope`, most recent
    /// first (`created_at DESC, id DESC`).
    ///
    /// # Errors
    ///
    /// [`HistoryError::Sqlite`] or [`HistoryError::Busy`] when the read fails.
    pub fn recent(&self, limit: usize, scope: &HistoryScope) -> Result<Vec<HistoryEntry>, HistoryError> {
        let limit = clamp_limit(limit);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let (predicate, mut params) = scope_predicate(scope, "");
        let filter = predicate.map(|p| format!(" WHERE {p}")).unwrap_or_default();
        let sql = format!(
            "SELECT id, prompt, created_at, cwd, session_id, use_count FROM history{filter} \
             ORDER BY created_at DESC, id DESC LIMIT ?"
        );
        params.push(limit_value(limit));
        self.query_entries(&sql, params).map_err(|e| self.error("recent", e))
    }

    /// Finds up to `limit` (at most [`MAX_LIMIT`]) prompts in `scope` containing every
    /// token of `query`, most recent first.
    ///
    /// Tokens are the lowercase runs of letters and digits of `query`, each once, the
    /// first [`crate::MAX_QUERY_WORDS`] ([`crate::query_words`]); no tokens, no results.
    /// Two stages, as omp:
    ///
    /// 1. Full text: every token as an FTS5 prefix (`"tok"*`, all required), which
    ///    folds case and diacritics for any script. Errors of this stage are
    ///    ignored: the second stage still answers.
    /// 2. Substring: every token must occur in the prompt
    ///    (`LIKE '%tok%' ESCAPE '\' COLLATE NOCASE`; SQLite folds ASCII case only),
    ///    which finds infixes such as `mit` in `commit`.
    ///
    /// If stage 1 found nothing the result is stage 2's rows; otherwise the union
    /// (by id) sorted by `created_at DESC, id DESC` and cut to `limit`.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Sqlite`] or [`HistoryError::Busy`] when the substring stage
    /// fails.
    pub fn search(&self, query: &str, limit: usize, scope: &HistoryScope) -> Result<Vec<HistoryEntry>, HistoryError> {
        let limit = clamp_limit(limit);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let tokens = query_words(query).words;
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        let (predicate, scope_params) = scope_predicate(scope, "h.");
        let clause = predicate.map(|p| format!(" AND {p}")).unwrap_or_default();

        let fts_sql = format!(
            "SELECT h.id, h.prompt, h.created_at, h.cwd, h.session_id, h.use_count \
             FROM history_fts f JOIN history h ON h.id = f.rowid \
             WHERE history_fts MATCH ?{clause} ORDER BY h.created_at DESC, h.id DESC LIMIT ?"
        );
        let mut fts_params = vec![Value::Text(fts_query(&tokens))];
        fts_params.extend(scope_params.iter().cloned());
        fts_params.push(limit_value(limit));
        // omp ignores every failure of this stage (a malformed expression, a damaged
        // index); the substring stage below answers on its own.
        let fts_rows = self.query_entries(&fts_sql, fts_params).unwrap_or_default();

        let sub_clause = scope_predicate(scope, "").0.map(|p| format!(" AND {p}")).unwrap_or_default();
        let like = vec!["prompt LIKE ? ESCAPE '\\' COLLATE NOCASE"; tokens.len()].join(" AND ");
        let sub_sql = format!(
            "SELECT id, prompt, created_at, cwd, session_id, use_count FROM history \
             WHERE {like}{sub_clause} ORDER BY created_at DESC, id DESC LIMIT ?"
        );
        let mut sub_params: Vec<Value> = tokens.iter().map(|t| Value::Text(like_pattern(t))).collect();
        sub_params.extend(scope_params);
        sub_params.push(limit_value(limit));
        let sub_rows = self.query_entries(&sub_sql, sub_params).map_err(|e| self.error("search", e))?;

        if fts_rows.is_empty() {
            return Ok(sub_rows);
        }
        let mut seen: HashSet<i64> = fts_rows.iter().map(|e| e.id).collect();
        let mut merged = fts_rows;
        merged.extend(sub_rows.into_iter().filter(|e| seen.insert(e.id)));
        merged.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
        merged.truncate(limit);
        Ok(merged)
    }

    /// Returns the session ids of [`search`](Self::search)`(query, limit, Global)`
    /// results, first-seen order, without duplicates or missing ids (the resume
    /// picker uses this to find sessions by prompts beyond their file prefix).
    /// omp's default `limit` is [`DEFAULT_SESSION_MATCH_LIMIT`].
    ///
    /// # Errors
    ///
    /// As [`search`](Self::search).
    pub fn matching_session_ids(&self, query: &str, limit: usize) -> Result<Vec<String>, HistoryError> {
        let mut seen = HashSet::new();
        Ok(self
            .search(query, limit, &HistoryScope::Global)?
            .into_iter()
            .filter_map(|e| e.session_id)
            .filter(|id| !id.is_empty() && seen.insert(id.clone()))
            .collect())
    }

    /// Returns the number of stored prompts.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Sqlite`] or [`HistoryError::Busy`] when the read fails.
    pub fn len(&self) -> Result<u64, HistoryError> {
        self.conn
            .query_row("SELECT count(*) FROM history", [], |r| r.get::<_, i64>(0))
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(|e| self.error("count", e))
    }

    /// Returns whether no prompt is stored.
    ///
    /// # Errors
    ///
    /// As [`len`](Self::len).
    pub fn is_empty(&self) -> Result<bool, HistoryError> {
        Ok(self.len()? == 0)
    }

    /// Records (or replaces) the display title of a session, with `updated_at` = now.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Busy`] or [`HistoryError::Sqlite`] when the write fails.
    pub fn set_session_title(&self, session_id: &str, title: &str) -> Result<(), HistoryError> {
        let now = self.options.clock.now_unix_seconds();
        self.conn
            .prepare_cached(
                "INSERT INTO session_titles (session_id, title, updated_at)
VALUES (?, ?, ?)
ON CONFLICT(session_id) DO UPDATE SET
\ttitle = excluded.title,
\tupdated_at = excluded.updated_at",
            )
            .and_then(|mut s| s.execute(rusqlite::params![session_id, title, now]))
            .map(|_| ())
            .map_err(|e| self.error("set session title", e))
    }

    /// Returns the recorded title of a session, if any.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Busy`] or [`HistoryError::Sqlite`] when the read fails.
    pub fn session_title(&self, session_id: &str) -> Result<Option<String>, HistoryError> {
        self.conn
            .prepare_cached("SELECT title FROM session_titles WHERE session_id = ?")
            .and_then(|mut s| s.query_row([session_id], |r| Ok(text_value(r.get_ref(0)?))).optional())
            .map(Option::flatten)
            .map_err(|e| self.error("read session title", e))
    }

    /// Appends an idle recap to a session's journal and returns its row id.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Busy`] or [`HistoryError::Sqlite`] when the write fails.
    pub fn record_session_recap(&self, session_id: &str, cwd: &str, recap: &str) -> Result<i64, HistoryError> {
        let now = self.options.clock.now_unix_seconds();
        self.conn
            .prepare_cached("INSERT INTO session_recaps (session_id, cwd, recap, created_at) VALUES (?, ?, ?, ?)")
            .and_then(|mut s| s.insert(rusqlite::params![session_id, cwd, recap, now]))
            .map_err(|e| self.error("record session recap", e))
    }

    /// Returns a session's recaps, oldest first.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Busy`] or [`HistoryError::Sqlite`] when the read fails.
    pub fn session_recaps(&self, session_id: &str) -> Result<Vec<SessionRecap>, HistoryError> {
        let run = || -> rusqlite::Result<Vec<SessionRecap>> {
            let mut stmt = self.conn.prepare_cached(
                "SELECT id, session_id, cwd, recap, created_at FROM session_recaps \
                 WHERE session_id = ? ORDER BY created_at, id",
            )?;
            let mut rows = stmt.query([session_id])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                out.push(SessionRecap {
                    id: row.get(0)?,
                    session_id: text_value(row.get_ref(1)?).unwrap_or_default(),
                    cwd: text_value(row.get_ref(2)?).unwrap_or_default(),
                    recap: text_value(row.get_ref(3)?).unwrap_or_default(),
                    created_at: integer_value(row.get_ref(4)?).unwrap_or(0),
                });
            }
            Ok(out)
        };
        run().map_err(|e| self.error("read session recaps", e))
    }

    /// Checkpoints the WAL (`PASSIVE`, never waiting for readers) and closes the
    /// connection, as omp does on exit. Dropping the store closes it too, without
    /// the explicit checkpoint.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Sqlite`] when the checkpoint or close fails.
    pub fn close(self) -> Result<(), HistoryError> {
        let path = self.path.clone();
        let options = self.options.clone();
        self.conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
            .map_err(|e| open_error(&path, &options, "checkpoint", e))?;
        self.conn.close().map_err(|(_, e)| open_error(&path, &options, "close", e))
    }

    /// Runs a query returning history rows.
    fn query_entries(&self, sql: &str, params: Vec<Value>) -> rusqlite::Result<Vec<HistoryEntry>> {
        let mut stmt = self.conn.prepare_cached(sql)?;
        let mut rows = stmt.query(params_from_iter(params))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            out.push(HistoryEntry {
                id: row.get(0)?,
                prompt: text_value(row.get_ref(1)?).unwrap_or_default(),
                created_at: integer_value(row.get_ref(2)?).unwrap_or(0),
                cwd: text_value(row.get_ref(3)?),
                session_id: text_value(row.get_ref(4)?),
                use_count: integer_value(row.get_ref(5)?).unwrap_or(1),
            });
        }
        Ok(out)
    }

    fn error(&self, op: &'static str, e: rusqlite::Error) -> HistoryError {
        open_error(&self.path, &self.options, op, e)
    }
}

/// Classifies a SQLite error of `op` on the database at `path`.
fn open_error(path: &Path, options: &HistoryOptions, op: &'static str, source: rusqlite::Error) -> HistoryError {
    if is_busy(&source) {
        HistoryError::Busy {
            path: path.to_path_buf(),
            op,
            timeout_ms: u64::try_from(options.busy_timeout.as_millis()).unwrap_or(u64::MAX),
            source,
        }
    } else {
        HistoryError::Sqlite { path: path.to_path_buf(), op, source }
    }
}

/// Clamps a limit to `[0, MAX_LIMIT]`.
fn clamp_limit(limit: usize) -> usize {
    limit.min(MAX_LIMIT)
}

fn limit_value(limit: usize) -> Value {
    // `limit` is at most MAX_LIMIT.
    Value::Integer(i64::try_from(limit).unwrap_or(i64::MAX))
}

/// Returns the SQL predicate selecting `scope` (columns prefixed with `prefix`), if
/// any, and its parameters.
fn scope_predicate(scope: &HistoryScope, prefix: &str) -> (Option<String>, Vec<Value>) {
    match scope {
        HistoryScope::Global => (None, Vec::new()),
        HistoryScope::Cwd(cwd) => (Some(format!("{prefix}cwd = ?")), vec![Value::Text(cwd.clone())]),
        HistoryScope::Session(id) => (Some(format!("{prefix}session_id = ?")), vec![Value::Text(id.clone())]),
    }
}

/// Reads a stored value as text, leniently: invalid UTF-8 is replaced, numbers are
/// formatted, NULL is `None`. Old or foreign writers may have stored anything.
pub(crate) fn text_value(value: ValueRef<'_>) -> Option<String> {
    match value {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(r) => Some(r.to_string()),
        ValueRef::Text(bytes) | ValueRef::Blob(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
    }
}

/// Reads a stored value as an integer, leniently: reals are truncated, numeric text
/// is parsed, anything else is `None`.
pub(crate) fn integer_value(value: ValueRef<'_>) -> Option<i64> {
    match value {
        ValueRef::Integer(i) => Some(i),
        // Saturating float-to-int conversion is the intent for an out-of-range time.
        #[allow(clippy::cast_possible_truncation)] // truncation towards zero is the intent
        ValueRef::Real(r) => Some(r as i64),
        ValueRef::Text(bytes) => std::str::from_utf8(bytes).ok().and_then(|s| s.trim().parse().ok()),
        ValueRef::Null | ValueRef::Blob(_) => None,
    }
}
