//! [`SqliteStorage`]: omp's `omp_session_files` table in a SQLite database file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use session_store::keyed::{
    self, At, Body, Cas, Cut, Doomed, Keeps, KeyedBackend, KeyedState, Put, Row, TableOptions, TitleMeta, Windows,
    cut_text, read_relation, valid_table_name,
};
use session_store::{FileStorage, LockWait, Op, SessionLock, Storage, StoreError};

use crate::error::{ConnectError, LIMIT, MAX_CONTENT_BYTES, SqliteError, db};

/// How long a statement waits for another connection's write lock before it fails with
/// `ResourceBusy`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Options of [`SqliteStorage::open_with`]: which table, and whether to create it.
pub type SqliteOptions = TableOptions;

/// The statements, with the validated table name inlined (values are always bound).
#[derive(Debug)]
struct Queries {
    read: String,
    slices: String,
    size: String,
    stat: String,
    upsert: String,
    insert_if_missing: String,
    update_if_size: String,
    append: String,
    append_if_size: String,
    touch_empty: String,
    content: String,
    set_content: String,
    touch: String,
    delete: String,
    rename: String,
    with_prefix: String,
    stats_with_prefix: String,
    newest_with_prefix: String,
    delete_prefix: String,
    title: String,
}

/// omp's columns and their `NULL`s: what a read-only storage reads where the table lacks them.
const COLUMNS: [(&str, &str); 6] = [
    ("path", "NULL"),
    ("content", "NULL"),
    ("mtime_ms", "NULL"),
    ("title", "NULL"),
    ("title_source", "NULL"),
    ("title_updated_at", "NULL"),
];

impl Queries {
    /// The statements on table `t`, whose reads name `from` (the table, or what stands in
    /// for it in a read-only storage: [`read_relation`]).
    fn new(t: &str, from: &str) -> Queries {
        let meta = "title, title_source, title_updated_at";
        // Keys below a prefix: `substr` compares the prefix's own characters, so nothing
        // in it (`%`, `_`, `*`) is a pattern.
        let under = "substr(path, 1, length(?1)) = ?1";
        Queries {
            read: format!("SELECT content, {meta}, mtime_ms FROM {from} WHERE path = ?1"),
            slices: format!(
                "SELECT substr(CAST(content AS BLOB), 1, ?2) AS head, \
                 CASE WHEN ?3 <= 0 THEN x'' ELSE substr(CAST(content AS BLOB), -?3) END AS tail, \
                 octet_length(content), {meta}, \
                 CASE WHEN title IS NULL AND title_source IS NULL AND title_updated_at IS NULL THEN NULL \
                 ELSE substr(CAST(content AS BLOB), 1, 256) END AS first, mtime_ms \
                 FROM {from} WHERE path = ?1"
            ),
            size: format!("SELECT octet_length(content) FROM {from} WHERE path = ?1"),
            stat: format!("SELECT octet_length(content), mtime_ms FROM {from} WHERE path = ?1"),
            upsert: format!(
                "INSERT INTO {t} (path, content, mtime_ms, {meta}) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                 ON CONFLICT (path) DO UPDATE SET content = excluded.content, mtime_ms = excluded.mtime_ms, \
                 title = excluded.title, title_source = excluded.title_source, title_updated_at = excluded.title_updated_at"
            ),
            insert_if_missing: format!(
                "INSERT INTO {t} (path, content, mtime_ms, {meta}) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                 ON CONFLICT (path) DO NOTHING"
            ),
            update_if_size: format!(
                "UPDATE {t} SET content = ?2, mtime_ms = ?3, title = ?4, title_source = ?5, title_updated_at = ?6 \
                 WHERE path = ?1 AND octet_length(content) = ?7"
            ),
            append: format!(
                "INSERT INTO {t} (path, content, mtime_ms) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (path) DO UPDATE SET content = {t}.content || excluded.content, mtime_ms = excluded.mtime_ms"
            ),
            append_if_size: format!(
                "UPDATE {t} SET content = content || ?2, mtime_ms = ?3 WHERE path = ?1 AND octet_length(content) = ?4"
            ),
            touch_empty: format!(
                "INSERT INTO {t} (path, content, mtime_ms) VALUES (?1, '', ?2) ON CONFLICT (path) DO NOTHING"
            ),
            content: format!("SELECT content FROM {t} WHERE path = ?1"),
            set_content: format!(
                "UPDATE {t} SET content = ?2, mtime_ms = ?3, \
                 title = CASE WHEN ?4 < 256 THEN NULL ELSE title END, \
                 title_source = CASE WHEN ?4 < 256 THEN NULL ELSE title_source END, \
                 title_updated_at = CASE WHEN ?4 < 256 THEN NULL ELSE title_updated_at END \
                 WHERE path = ?1"
            ),
            touch: format!("UPDATE {t} SET mtime_ms = ?2 WHERE path = ?1"),
            delete: format!("DELETE FROM {t} WHERE path = ?1"),
            rename: format!("UPDATE {t} SET path = ?1, mtime_ms = ?2 WHERE path = ?3"),
            with_prefix: format!("SELECT path FROM {from} WHERE {under}"),
            stats_with_prefix: format!("SELECT path, octet_length(content), mtime_ms FROM {from} WHERE {under}"),
            newest_with_prefix: format!("SELECT max(mtime_ms) FROM {from} WHERE {under}"),
            delete_prefix: format!("DELETE FROM {t} WHERE {under}"),
            title: format!(
                "UPDATE {t} SET title = ?2, title_source = ?3, title_updated_at = ?4, mtime_ms = ?5 WHERE path = ?1"
            ),
        }
    }
}

struct Inner {
    conn: Mutex<Connection>,
    db_path: PathBuf,
    table: String,
    q: Queries,
    /// Text, at most [`MAX_CONTENT_BYTES`]; when opened read-only, the lock directory is
    /// made only when a lock is taken.
    state: KeyedState,
    /// `<database>.locks/`: one lock file per locked session (see [`Storage::lock`]).
    locks_dir: PathBuf,
}

/// Session files as rows of omp 18.3.4's `omp_session_files` table in a SQLite database.
///
/// Each file is one row keyed by its path; directories are key prefixes. Clones share one
/// connection (statements of one storage run one at a time; other connections and
/// processes wait for SQLite's write lock up to five seconds). See the crate docs for the
/// schema, the statements, the limits and the errors.
#[derive(Clone)]
pub struct SqliteStorage {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SqliteStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStorage")
            .field("db", &self.inner.db_path)
            .field("table", &self.inner.table)
            .finish_non_exhaustive()
    }
}

impl SqliteStorage {
    /// Opens (creating it when missing) the database file `db` and creates the
    /// `omp_session_files` table when it is missing.
    ///
    /// With [`SqliteOptions::read_only`](TableOptions::read_only), [`SqliteStorage::open_with`]
    /// creates nothing: an existing file is opened with `SQLITE_OPEN_READONLY`, a missing
    /// one is an empty store (and stays missing), and the lock directory beside it is made
    /// only when a lock is taken.
    pub fn open(db: &Path) -> Result<SqliteStorage, ConnectError> {
        SqliteStorage::open_with(db, SqliteOptions::default())
    }

    /// [`SqliteStorage::open`] with other [`SqliteOptions`].
    pub fn open_with(db: &Path, options: SqliteOptions) -> Result<SqliteStorage, ConnectError> {
        if !valid_table_name(options.table_name()) {
            return Err(ConnectError::BadTableName(options.table_name().to_owned()));
        }
        let open = |source| ConnectError::Open { path: db.to_path_buf(), source };
        let table = options.table_name();
        let read_only = options.is_read_only();
        let conn = match (read_only, db.exists()) {
            (false, _) => Connection::open(db),
            (true, true) => {
                Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
            }
            // No file: nothing to read, and nothing is created.
            (true, false) => Connection::open_in_memory(),
        }
        .map_err(open)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open)?;
        let from = if read_only {
            let columns =
                columns_of(&conn, table).map_err(|source| ConnectError::Schema { table: table.to_owned(), source })?;
            read_relation(table, &COLUMNS, columns.as_deref(), "WHERE 0")
        } else {
            if options.creates_table() {
                create_table(&conn, table)?;
            }
            table.to_owned()
        };
        let mut locks = db.as_os_str().to_owned();
        locks.push(".locks");
        let locks_dir = PathBuf::from(locks);
        if !read_only {
            make_private_dir(&locks_dir).map_err(|source| ConnectError::LockDir { path: locks_dir.clone(), source })?;
        }
        let q = Queries::new(table, &from);
        let state =
            KeyedState::new(Keeps::Text, MAX_CONTENT_BYTES, LIMIT).read_only(read_only.then(|| table.to_owned()));
        let inner =
            Inner { conn: Mutex::new(conn), db_path: db.to_path_buf(), table: table.to_owned(), q, state, locks_dir };
        Ok(SqliteStorage { inner: Arc::new(inner) })
    }

    /// Returns the database file.
    pub fn db_path(&self) -> &Path {
        &self.inner.db_path
    }

    /// Returns the table's name.
    pub fn table(&self) -> &str {
        &self.inner.table
    }

    /// Sets the title metadata of `path` and its mtime, leaving the body alone (omp's
    /// `updateSessionTitle` on an indexed storage); readers see the title laid over the
    /// body's title slot. [`StoreError::NotFound`] when there is no such file.
    pub fn update_title(
        &self,
        path: &Path,
        title: Option<&str>,
        source: Option<&str>,
        updated_at: &str,
    ) -> Result<(), StoreError> {
        keyed::update_title(self, path, title, source, updated_at)
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.inner.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn size_of(&self, c: &Connection, at: At<'_>, k: &str) -> Result<Option<u64>, StoreError> {
        let size: Option<i64> = c.query_row(&self.inner.q.size, [k], |r| r.get(0)).optional().map_err(db(at))?;
        Ok(size.map(|n| n.max(0) as u64))
    }

    /// The lock file of the session `k`: a short, stable name (two 64-bit FNV-1a hashes of
    /// the table and key) in `<database>.locks/`.
    fn lock_file(&self, k: &str) -> PathBuf {
        let hash = |seed: u64| {
            let mut h = seed;
            for b in self.inner.table.bytes().chain([0]).chain(k.bytes()) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
            h
        };
        self.inner.locks_dir.join(format!("{:016x}{:016x}", hash(0xcbf2_9ce4_8422_2325), hash(0x6c62_272e_07bb_0142)))
    }
}

/// Creates the table as omp 18.3.4 creates it on SQLite: `CREATE TABLE IF NOT EXISTS`
/// with every column, then each title column by `ALTER TABLE`, ignoring "duplicate
/// column" (a table an older omp made has only the first three).
fn create_table(conn: &Connection, table: &str) -> Result<(), ConnectError> {
    let schema = |source| ConnectError::Schema { table: table.to_owned(), source };
    conn.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS {table} (path TEXT PRIMARY KEY, content TEXT NOT NULL, mtime_ms INTEGER NOT NULL, \
         title TEXT, title_source TEXT, title_updated_at TEXT)"
    ))
    .map_err(schema)?;
    for column in ["title", "title_source", "title_updated_at"] {
        match conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} TEXT")) {
            Ok(()) => {}
            Err(e) if e.to_string().to_lowercase().contains("duplicate column") => {}
            Err(e) => return Err(schema(e)),
        }
    }
    Ok(())
}

/// Returns the columns of `table`, or `None` when there is no such table: a look at the
/// catalog that changes nothing.
fn columns_of(conn: &Connection, table: &str) -> rusqlite::Result<Option<Vec<String>>> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let columns = stmt.query_map([table], |r| r.get::<_, String>(0))?.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok((!columns.is_empty()).then_some(columns))
}

/// Creates `dir` (mode 0700 on Unix) unless it exists.
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    match b.create(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        other => other,
    }
}

fn meta_at(row: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<TitleMeta> {
    Ok(TitleMeta { title: row.get(at)?, source: row.get(at + 1)?, updated_at: row.get(at + 2)? })
}

fn clamp_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl KeyedBackend for SqliteStorage {
    type Driver = rusqlite::Error;

    fn state(&self) -> &KeyedState {
        &self.inner.state
    }

    fn stat_key(&self, at: At<'_>, k: &str) -> Result<Option<(u64, i64)>, StoreError> {
        let row = self
            .conn()
            .query_row(&self.inner.q.stat, [k], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
            .optional()
            .map_err(db(at))?;
        Ok(row.map(|(size, mtime_ms)| (size.max(0) as u64, mtime_ms)))
    }

    fn newest_under(&self, at: At<'_>, prefix: &str) -> Result<Option<i64>, StoreError> {
        self.conn().query_row(&self.inner.q.newest_with_prefix, [prefix], |r| r.get(0)).map_err(db(at))
    }

    fn keys_under(&self, at: At<'_>, prefix: &str) -> Result<Vec<String>, StoreError> {
        let c = self.conn();
        let mut stmt = c.prepare_cached(&self.inner.q.with_prefix).map_err(db(at))?;
        let rows = stmt.query_map([prefix], |r| r.get::<_, String>(0)).map_err(db(at))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(db(at))
    }

    fn stats_under(&self, at: At<'_>, prefix: &str) -> Result<Vec<(String, u64, i64)>, StoreError> {
        let c = self.conn();
        let mut stmt = c.prepare_cached(&self.inner.q.stats_with_prefix).map_err(db(at))?;
        let rows = stmt
            .query_map([prefix], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?.max(0) as u64, r.get(2)?)))
            .map_err(db(at))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(db(at))
    }

    fn read_row(&self, at: At<'_>, k: &str) -> Result<Option<Row>, StoreError> {
        let row = self
            .conn()
            .query_row(&self.inner.q.read, [k], |r| Ok((r.get::<_, String>(0)?, meta_at(r, 1)?, r.get::<_, i64>(4)?)))
            .optional()
            .map_err(db(at))?;
        Ok(row.map(|(content, meta, mtime_ms)| Row { content: content.into_bytes(), meta, mtime_ms }))
    }

    fn read_windows(&self, at: At<'_>, k: &str, prefix: u64, suffix: u64) -> Result<Option<Windows>, StoreError> {
        let (p, s) = (clamp_i64(prefix), clamp_i64(suffix));
        let row = self
            .conn()
            .query_row(&self.inner.q.slices, params![k, p, s], |r| {
                Ok(Windows {
                    head: r.get(0)?,
                    tail: r.get(1)?,
                    size: r.get::<_, i64>(2)?.max(0) as u64,
                    meta: meta_at(r, 3)?,
                    first: r.get(6)?,
                    mtime_ms: r.get(7)?,
                })
            })
            .optional()
            .map_err(db(at))?;
        Ok(row)
    }

    fn put(
        &self,
        at: At<'_>,
        k: &str,
        body: Body<'_>,
        meta: &TitleMeta,
        now: i64,
        how: Put,
    ) -> Result<Cas, StoreError> {
        let body = SqliteError::text_of(at, body)?;
        let q = &self.inner.q;
        let c = self.conn();
        let args = params![k, body, now, meta.title, meta.source, meta.updated_at];
        let written = match how {
            Put::Upsert => c.execute(&q.upsert, args).map_err(db(at))?,
            Put::Create => c.execute(&q.insert_if_missing, args).map_err(db(at))?,
            Put::IfSize(n) => match i64::try_from(n) {
                Ok(n) => c
                    .execute(&q.update_if_size, params![k, body, now, meta.title, meta.source, meta.updated_at, n])
                    .map_err(db(at))?,
                Err(_) => 0,
            },
        };
        if written == 0 {
            return Ok(Cas::RefusedAt(self.size_of(&c, at, k)?));
        }
        Ok(Cas::Done)
    }

    fn append_key(&self, at: At<'_>, k: &str, body: Body<'_>, now: i64) -> Result<(), StoreError> {
        let text = SqliteError::text_of(at, body)?;
        let c = self.conn();
        match c.execute(&self.inner.q.append, params![k, text, now]) {
            Ok(_) => Ok(()),
            // The concatenation past `SQLITE_MAX_LENGTH`: nothing was written, and the
            // sizes say why.
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::TooBig) => {
                let size = self.size_of(&c, at, k)?.unwrap_or(0);
                Err(at.wrap(SqliteError::TooLarge {
                    size: size.saturating_add(body.len()),
                    limit: MAX_CONTENT_BYTES,
                    what: LIMIT,
                }))
            }
            Err(e) => Err(db(at)(e)),
        }
    }

    fn append_at(&self, at: At<'_>, k: &str, body: Body<'_>, now: i64, size: u64) -> Result<Cas, StoreError> {
        let text = SqliteError::text_of(at, body)?;
        let c = self.conn();
        let written = match i64::try_from(size) {
            Ok(n) => c.execute(&self.inner.q.append_if_size, params![k, text, now, n]).map_err(db(at))?,
            Err(_) => 0,
        };
        if written == 0 {
            return Ok(Cas::RefusedAt(self.size_of(&c, at, k)?));
        }
        Ok(Cas::Done)
    }

    fn truncate_key(&self, at: At<'_>, k: &str, len: u64, now: i64) -> Result<bool, StoreError> {
        let mut c = self.conn();
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db(at))?;
        let content: Option<String> =
            tx.query_row(&self.inner.q.content, [k], |r| r.get(0)).optional().map_err(db(at))?;
        let Some(content) = content else { return Ok(false) };
        match cut_text(&content, len).map_err(|reason| at.wrap(SqliteError::InvalidContent { reason }))? {
            Cut::Same => tx.execute(&self.inner.q.touch, params![k, now]).map_err(db(at))?,
            Cut::To(kept) => {
                tx.execute(&self.inner.q.set_content, params![k, kept, now, clamp_i64(len)]).map_err(db(at))?
            }
        };
        tx.commit().map_err(db(at))?;
        Ok(true)
    }

    fn rename_key(&self, at: At<'_>, from: &str, to: &str, now: i64) -> Result<bool, StoreError> {
        let mut c = self.conn();
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db(at))?;
        tx.execute(&self.inner.q.delete, [to]).map_err(db(at))?;
        if tx.execute(&self.inner.q.rename, params![to, now, from]).map_err(db(at))? == 0 {
            return Ok(false);
        }
        tx.commit().map_err(db(at))?;
        Ok(true)
    }

    fn delete_key(&self, at: At<'_>, k: &str) -> Result<bool, StoreError> {
        Ok(self.conn().execute(&self.inner.q.delete, [k]).map_err(db(at))? > 0)
    }

    fn delete_doomed(&self, at: At<'_>, doomed: Doomed<'_>) -> Result<(), StoreError> {
        let mut c = self.conn();
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db(at))?;
        tx.execute(&self.inner.q.delete, [doomed.key]).map_err(db(at))?;
        if let Some(prefix) = doomed.artifacts {
            tx.execute(&self.inner.q.delete_prefix, [prefix]).map_err(db(At::new(Op::RemoveDir, at.path)))?;
        }
        for backup in doomed.backups {
            tx.execute(&self.inner.q.delete, [backup]).map_err(db(at))?;
        }
        tx.commit().map_err(db(at))
    }

    fn touch_empty(&self, at: At<'_>, k: &str, now: i64) -> Result<(), StoreError> {
        self.conn().execute(&self.inner.q.touch_empty, params![k, now]).map_err(db(at))?;
        Ok(())
    }

    fn set_title(&self, at: At<'_>, k: &str, meta: &TitleMeta, now: i64) -> Result<bool, StoreError> {
        let args = params![k, meta.title, meta.source, meta.updated_at, now];
        Ok(self.conn().execute(&self.inner.q.title, args).map_err(db(at))? > 0)
    }

    /// Takes the file storage's lock of a file of its own in `<database>.locks/`, named by
    /// a hash of the table and the session's key: it excludes every holder on this
    /// machine (a SQLite database is a local file) and is dropped with its holder.
    fn lock_key(&self, at: At<'_>, k: &str, wait: LockWait) -> Result<SessionLock, StoreError> {
        if self.inner.state.is_read_only() {
            make_private_dir(&self.inner.locks_dir).map_err(|e| StoreError::io_raw(at.op, &self.inner.locks_dir, e))?;
        }
        let held = FileStorage::new().lock(&self.lock_file(k), wait).map_err(|e| match e {
            StoreError::Locked { .. } => StoreError::Locked { path: at.path.to_path_buf() },
            other => other,
        })?;
        Ok(SessionLock::new(at.path, Box::new(move || held.release())))
    }
}
