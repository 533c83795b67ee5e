//! [`SqliteStorage`]: omp's `omp_session_files` table in a SQLite database file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, Row, TransactionBehavior, params};
use session_store::clock::SystemClock;
use session_store::keyed::{
    AppendingWriter, Cause, LocalDirs, Mtimes, TableOptions, TitleMeta, backups, child_entries, children, lay_over,
    read_relation, valid_table_name,
};
use session_store::{
    AppendWriter, DirEntry, Durability, ExpectedSize, FileStat, FileStorage, LockWait, Op, PollWatch, SessionLock,
    Storage, StoreError, Watch,
};

use crate::error::{ConnectError, MAX_CONTENT_BYTES, SqliteError, db};

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
    newest_with_prefix: String,
    delete_prefix: String,
    title: String,
    exists: String,
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
            newest_with_prefix: format!("SELECT max(mtime_ms) FROM {from} WHERE {under}"),
            delete_prefix: format!("DELETE FROM {t} WHERE {under}"),
            title: format!(
                "UPDATE {t} SET title = ?2, title_source = ?3, title_updated_at = ?4, mtime_ms = ?5 WHERE path = ?1"
            ),
            exists: format!("SELECT 1 FROM {from} WHERE path = ?1"),
        }
    }
}

struct Inner {
    conn: Mutex<Connection>,
    db_path: PathBuf,
    table: String,
    q: Queries,
    /// Directories made by `ensure_dir` that hold no key yet (omp's `ensureDirSync` is a
    /// no-op; ours is remembered by this storage only).
    dirs: LocalDirs,
    times: Mtimes,
    /// `<database>.locks/`: one lock file per locked session (see [`Storage::lock`]).
    locks_dir: PathBuf,
    /// Opened read-only: every write is refused, and the lock directory is made only
    /// when a lock is taken.
    read_only: bool,
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
        let inner = Inner {
            conn: Mutex::new(conn),
            db_path: db.to_path_buf(),
            table: options.table_name().to_owned(),
            q,
            dirs: LocalDirs::new(),
            times: Mtimes::new(Arc::new(SystemClock)),
            locks_dir,
            read_only,
        };
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
        let op = Op::Overwrite;
        let k = SqliteError::file_key(op, path)?;
        self.writable(op, path)?;
        let now = self.mtime();
        let c = self.conn();
        let n = c.execute(&self.inner.q.title, params![k, title, source, updated_at, now]).map_err(db(op, path))?;
        if n == 0 {
            return Err(StoreError::NotFound { path: path.to_path_buf() });
        }
        Ok(())
    }

    /// Appends `bytes` only when the file is as `expected` says (omp appends blindly; this is
    /// the check-then-append a second writer needs), in one statement. A mismatch is
    /// [`StoreError::Conflict`] and appends nothing; [`ExpectedSize::Missing`] creates the
    /// file with `bytes`.
    pub fn append_if_size(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        let op = Op::Append;
        let k = SqliteError::file_key(op, path)?;
        self.writable(op, path)?;
        let body = text(op, path, bytes)?;
        let now = self.mtime();
        let c = self.conn();
        let written = match expected {
            ExpectedSize::Any => {
                drop(c);
                return self.append(path, bytes);
            }
            ExpectedSize::Missing => {
                check_len(op, path, bytes.len() as u64)?;
                let none: Option<&str> = None;
                c.execute(&self.inner.q.insert_if_missing, params![k, body, now, none, none, none])
                    .map_err(db(op, path))?
            }
            ExpectedSize::Bytes(n) | ExpectedSize::Unchanged { size: n, .. } => {
                check_len(op, path, n.saturating_add(bytes.len() as u64))?;
                match i64::try_from(n) {
                    Ok(n) => c.execute(&self.inner.q.append_if_size, params![k, body, now, n]).map_err(db(op, path))?,
                    Err(_) => 0,
                }
            }
        };
        if written == 0 {
            return Err(self.conflict(&c, op, path, &k, expected));
        }
        Ok(())
    }

    /// Refuses `op` on `path` when the storage was opened read-only.
    fn writable(&self, op: Op, path: &Path) -> Result<(), StoreError> {
        if self.inner.read_only {
            return Err(SqliteError::ReadOnly { table: self.inner.table.clone() }.at(op, path));
        }
        Ok(())
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.inner.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Returns a modification time, strictly increasing per storage.
    fn mtime(&self) -> i64 {
        self.inner.times.next()
    }

    fn size_of(&self, c: &Connection, op: Op, path: &Path, k: &str) -> Result<Option<u64>, StoreError> {
        let size: Option<i64> = c.query_row(&self.inner.q.size, [k], |r| r.get(0)).optional().map_err(db(op, path))?;
        Ok(size.map(|n| n.max(0) as u64))
    }

    /// The error of a refused size check: the size found now.
    fn conflict(&self, c: &Connection, op: Op, path: &Path, k: &str, expected: ExpectedSize) -> StoreError {
        match self.size_of(c, op, path, k) {
            Ok(found) => {
                StoreError::Conflict { path: path.to_path_buf(), expected: expected.as_option().flatten(), found }
            }
            Err(e) => e,
        }
    }

    /// Reads the whole file and its stat in one statement, the title laid over its slot.
    fn read_with_stat(&self, path: &Path) -> Result<(FileStat, Vec<u8>), StoreError> {
        let op = Op::Read;
        let k = SqliteError::file_key(op, path)?;
        let c = self.conn();
        let row = c
            .query_row(&self.inner.q.read, [&k], |r| Ok((r.get::<_, String>(0)?, meta_at(r, 1)?, r.get::<_, i64>(4)?)))
            .optional()
            .map_err(db(op, path))?;
        let (content, meta, mtime_ms) = row.ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })?;
        let mut bytes = content.into_bytes();
        if let Some(slot) = meta.overlay_for(&bytes) {
            lay_over(&slot, &mut bytes, 0);
        }
        Ok((FileStat::new(bytes.len() as u64, mtime_ms, true), bytes))
    }

    /// Reads the head and tail windows and the stat in one statement.
    fn slices_with_stat(
        &self,
        path: &Path,
        prefix: u64,
        suffix: u64,
    ) -> Result<(FileStat, Vec<u8>, Vec<u8>), StoreError> {
        let op = Op::Read;
        let k = SqliteError::file_key(op, path)?;
        let (p, s) = (clamp_i64(prefix), clamp_i64(suffix));
        let c = self.conn();
        let row = c
            .query_row(&self.inner.q.slices, params![k, p, s], |r| {
                Ok((
                    r.get::<_, Vec<u8>>(0)?,
                    r.get::<_, Vec<u8>>(1)?,
                    r.get::<_, i64>(2)?,
                    meta_at(r, 3)?,
                    r.get::<_, Option<Vec<u8>>>(6)?,
                    r.get::<_, i64>(7)?,
                ))
            })
            .optional()
            .map_err(db(op, path))?;
        let (mut head, mut tail, size, meta, first, mtime_ms) =
            row.ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })?;
        let size = size.max(0) as u64;
        if let Some(slot) = first.and_then(|f| meta.overlay_for(&f)) {
            lay_over(&slot, &mut head, 0);
            let tail_at = size.saturating_sub(tail.len() as u64);
            lay_over(&slot, &mut tail, tail_at);
        }
        Ok((FileStat::new(size, mtime_ms, true), head, tail))
    }

    fn replace(&self, op: Op, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        let k = SqliteError::file_key(op, path)?;
        self.writable(op, path)?;
        let body = text(op, path, bytes)?;
        check_len(op, path, bytes.len() as u64)?;
        let meta = TitleMeta::of_body(bytes);
        let now = self.mtime();
        let q = &self.inner.q;
        let c = self.conn();
        let args = params![k, body, now, meta.title, meta.source, meta.updated_at];
        let written = match expected {
            ExpectedSize::Any => c.execute(&q.upsert, args).map_err(db(op, path))?,
            ExpectedSize::Missing => c.execute(&q.insert_if_missing, args).map_err(db(op, path))?,
            ExpectedSize::Bytes(n) | ExpectedSize::Unchanged { size: n, .. } => match i64::try_from(n) {
                Ok(n) => c
                    .execute(&q.update_if_size, params![k, body, now, meta.title, meta.source, meta.updated_at, n])
                    .map_err(db(op, path))?,
                Err(_) => 0,
            },
        };
        if written == 0 {
            if op == Op::WriteNew {
                return Err(StoreError::AlreadyExists { path: path.to_path_buf() });
            }
            return Err(self.conflict(&c, op, path, &k, expected));
        }
        Ok(())
    }

    /// Returns the keys of every file whose key starts with `prefix`.
    fn keys_with_prefix(&self, op: Op, path: &Path, prefix: &str) -> Result<Vec<String>, StoreError> {
        let c = self.conn();
        let mut stmt = c.prepare_cached(&self.inner.q.with_prefix).map_err(db(op, path))?;
        let rows = stmt.query_map([prefix], |r| r.get::<_, String>(0)).map_err(db(op, path))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(db(op, path))
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

/// The content as text: UTF-8 without NUL bytes, or [`SqliteError::InvalidContent`].
fn text<'a>(op: Op, path: &Path, bytes: &'a [u8]) -> Result<&'a str, StoreError> {
    session_store::keyed::text_content(bytes).map_err(|reason| SqliteError::InvalidContent { reason }.at(op, path))
}

fn check_len(op: Op, path: &Path, size: u64) -> Result<(), StoreError> {
    if size > MAX_CONTENT_BYTES {
        return Err(SqliteError::TooLarge { size, limit: MAX_CONTENT_BYTES }.at(op, path));
    }
    Ok(())
}

fn meta_at(row: &Row<'_>, at: usize) -> rusqlite::Result<TitleMeta> {
    Ok(TitleMeta { title: row.get(at)?, source: row.get(at + 1)?, updated_at: row.get(at + 2)? })
}

fn clamp_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Storage for SqliteStorage {
    session_store::keyed_storage_methods!();

    fn ensure_dir(&self, dir: &Path) -> Result<(), StoreError> {
        let op = Op::EnsureDir;
        let k = SqliteError::key(op, dir)?;
        let found = self.conn().query_row(&self.inner.q.exists, [&k], |_| Ok(())).optional().map_err(db(op, dir))?;
        if found.is_some() {
            let err = std::io::Error::new(std::io::ErrorKind::AlreadyExists, "a file is in the way");
            return Err(StoreError::io_raw(op, dir, err));
        }
        self.inner.dirs.remember(k, self.mtime());
        Ok(())
    }

    fn stat(&self, path: &Path) -> Result<Option<FileStat>, StoreError> {
        let op = Op::Stat;
        let k = SqliteError::key(op, path)?;
        let prefix = SqliteError::dir_prefix(op, path)?;
        let c = self.conn();
        let row = c
            .query_row(&self.inner.q.stat, [&k], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
            .optional()
            .map_err(db(op, path))?;
        if let Some((size, mtime_ms)) = row {
            return Ok(Some(FileStat::new(size.max(0) as u64, mtime_ms, true)));
        }
        let newest: Option<i64> =
            c.query_row(&self.inner.q.newest_with_prefix, [&prefix], |r| r.get(0)).map_err(db(op, path))?;
        let mtime = newest.or_else(|| self.inner.dirs.mtime(&k, &prefix));
        Ok(mtime.map(|mtime_ms| FileStat::new(0, mtime_ms, false)))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>, StoreError> {
        let op = Op::List;
        let prefix = SqliteError::dir_prefix(op, dir)?;
        Ok(children(&prefix, self.keys_with_prefix(op, dir, &prefix)?))
    }

    fn read_dir(&self, dir: &Path) -> Result<Vec<DirEntry>, StoreError> {
        let op = Op::List;
        let prefix = SqliteError::dir_prefix(op, dir)?;
        let keys = self.keys_with_prefix(op, dir, &prefix)?;
        Ok(child_entries(&prefix, keys, self.inner.dirs.under(&prefix)))
    }

    fn remove_empty_dir(&self, dir: &Path) -> Result<(), StoreError> {
        let k = SqliteError::key(Op::RemoveDir, dir)?;
        self.inner.dirs.forget_if_empty(&k);
        Ok(())
    }

    fn append(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        let op = Op::Append;
        let k = SqliteError::file_key(op, path)?;
        self.writable(op, path)?;
        let body = text(op, path, bytes)?;
        check_len(op, path, bytes.len() as u64)?;
        let now = self.mtime();
        let c = self.conn();
        match c.execute(&self.inner.q.append, params![k, body, now]) {
            Ok(_) => Ok(()),
            // The concatenation past `SQLITE_MAX_LENGTH`: nothing was written, and the
            // sizes say why.
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::TooBig) => {
                let size = self.size_of(&c, op, path, &k)?.unwrap_or(0);
                Err(SqliteError::TooLarge { size: size.saturating_add(bytes.len() as u64), limit: MAX_CONTENT_BYTES }
                    .at(op, path))
            }
            Err(e) => Err(db(op, path)(e)),
        }
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<(), StoreError> {
        let op = Op::Truncate;
        let k = SqliteError::file_key(op, path)?;
        self.writable(op, path)?;
        let now = self.mtime();
        let mut c = self.conn();
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db(op, path))?;
        let content: Option<String> =
            tx.query_row(&self.inner.q.content, [&k], |r| r.get(0)).optional().map_err(db(op, path))?;
        let content = content.ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })?;
        let size = content.len() as u64;
        if len > size {
            let reason = format!("extending {size} bytes to {len} would add NUL bytes");
            return Err(SqliteError::InvalidContent { reason }.at(op, path));
        }
        if len == size {
            tx.execute(&self.inner.q.touch, params![k, now]).map_err(db(op, path))?;
        } else {
            let cut = len as usize;
            let Some(kept) = content.get(..cut) else {
                let reason = format!("cutting at byte {len} would split a character");
                return Err(SqliteError::InvalidContent { reason }.at(op, path));
            };
            tx.execute(&self.inner.q.set_content, params![k, kept, now, clamp_i64(len)]).map_err(db(op, path))?;
        }
        tx.commit().map_err(db(op, path))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        let op = Op::Rename;
        let src = SqliteError::file_key(op, from)?;
        let dst = SqliteError::file_key(op, to)?;
        self.writable(op, from)?;
        let now = self.mtime();
        let mut c = self.conn();
        if src == dst {
            let found = c.query_row(&self.inner.q.exists, [&src], |_| Ok(())).optional().map_err(db(op, from))?;
            return found.ok_or_else(|| StoreError::NotFound { path: from.to_path_buf() });
        }
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db(op, from))?;
        tx.execute(&self.inner.q.delete, [&dst]).map_err(db(op, to))?;
        let moved = tx.execute(&self.inner.q.rename, params![dst, now, src]).map_err(db(op, from))?;
        if moved == 0 {
            return Err(StoreError::NotFound { path: from.to_path_buf() });
        }
        tx.commit().map_err(db(op, from))
    }

    fn unlink(&self, path: &Path) -> Result<(), StoreError> {
        let op = Op::Unlink;
        let k = SqliteError::file_key(op, path)?;
        self.writable(op, path)?;
        match self.conn().execute(&self.inner.q.delete, [&k]).map_err(db(op, path))? {
            0 => Err(StoreError::NotFound { path: path.to_path_buf() }),
            _ => Ok(()),
        }
    }

    fn delete_with_artifacts(&self, path: &Path) -> Result<(), StoreError> {
        let op = Op::Unlink;
        let k = SqliteError::file_key(op, path)?;
        self.writable(op, path)?;
        let artifacts =
            session_store::artifacts_dir(path).map(|d| SqliteError::dir_prefix(Op::RemoveDir, &d)).transpose()?;
        let candidates = self.keys_with_prefix(op, path, &format!("{k}."))?;
        let mut c = self.conn();
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db(op, path))?;
        tx.execute(&self.inner.q.delete, [&k]).map_err(db(op, path))?;
        if let Some(prefix) = &artifacts {
            tx.execute(&self.inner.q.delete_prefix, [prefix]).map_err(db(Op::RemoveDir, path))?;
        }
        // `<name>.<anything>.bak` siblings.
        for candidate in backups(&k, candidates) {
            tx.execute(&self.inner.q.delete, [&candidate]).map_err(db(op, path))?;
        }
        tx.commit().map_err(db(op, path))?;
        if let Some(prefix) = artifacts {
            self.inner.dirs.forget_under(&prefix);
        }
        Ok(())
    }

    fn open_writer(&self, path: &Path, durability: Durability) -> Result<Box<dyn AppendWriter>, StoreError> {
        let _ = durability; // every append is a committed statement
        let op = Op::Open;
        let k = SqliteError::file_key(op, path)?;
        self.writable(op, path)?;
        let now = self.mtime();
        self.conn().execute(&self.inner.q.touch_empty, params![k, now]).map_err(db(op, path))?;
        Ok(Box::new(AppendingWriter::new(self.clone(), path)))
    }

    /// Takes the file storage's lock of a file of its own in `<database>.locks/`, named by
    /// a hash of the table and the session's key: it excludes every holder on this
    /// machine (a SQLite database is a local file) and is dropped with its holder.
    fn lock(&self, path: &Path, wait: LockWait) -> Result<SessionLock, StoreError> {
        let k = SqliteError::file_key(Op::Lock, path)?;
        if self.inner.read_only {
            make_private_dir(&self.inner.locks_dir)
                .map_err(|e| StoreError::io_raw(Op::Lock, &self.inner.locks_dir, e))?;
        }
        let held = FileStorage::new().lock(&self.lock_file(&k), wait).map_err(|e| match e {
            StoreError::Locked { .. } => StoreError::Locked { path: path.to_path_buf() },
            other => other,
        })?;
        Ok(SessionLock::new(path, Box::new(move || held.release())))
    }

    /// Polls the row's size and mtime ([`PollWatch`]): SQLite has no change feed between
    /// connections.
    fn watch(&self, path: &Path) -> Result<Option<Box<dyn Watch>>, StoreError> {
        Ok(Some(Box::new(PollWatch::new(self.clone(), path)?)))
    }
}
