//! [`MysqlStorage`]: omp's `omp_session_files` table on a MySQL or MariaDB server.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql::prelude::Queryable;
use mysql::{Opts, OptsBuilder, Pool, PooledConn, Row, TxOpts, params};
use session_store::clock::SystemClock;
use session_store::keyed::{
    AppendingWriter, Cause, LocalDirs, Mtimes, TableOptions, TitleMeta, backups, child_entries, children, lay_over,
    read_relation, valid_table_name,
};
use session_store::{
    AppendWriter, DirEntry, Durability, ExpectedSize, FileStat, LockWait, Op, PollWatch, SessionLock, Storage,
    StoreError, Watch,
};

use crate::error::{ConnectError, MAX_KEY_CHARS, MysqlError, db};

/// Room left in `max_allowed_packet` for the rest of a statement (path, mtime, title).
const STATEMENT_ROOM: u64 = 8 * 1024;

/// How long a waiting [`Storage::lock`] sleeps between attempts.
const LOCK_POLL: Duration = Duration::from_millis(10);

/// Options of [`MysqlStorage::connect_with`]: which table, and whether to create it.
pub type MysqlOptions = TableOptions;

/// The statements, with the validated table name inlined (values are always bound,
/// by name).
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
    content_for_update: String,
    set_content: String,
    touch: String,
    delete: String,
    rename: String,
    with_prefix: String,
    stats_with_prefix: String,
    newest_with_prefix: String,
    delete_prefix: String,
    title: String,
    exists: String,
}

/// omp's columns and their `NULL`s: what a read-only storage reads where the table lacks them.
const COLUMNS: [(&str, &str); 6] = [
    ("path", "CAST(NULL AS CHAR)"),
    ("content", "CAST(NULL AS CHAR)"),
    ("mtime_ms", "CAST(NULL AS SIGNED)"),
    ("title", "CAST(NULL AS CHAR)"),
    ("title_source", "CAST(NULL AS CHAR)"),
    ("title_updated_at", "CAST(NULL AS CHAR)"),
];

impl Queries {
    /// The statements on table `t`, whose reads name `from` (the table, or what stands in
    /// for it in a read-only storage: [`read_relation`]).
    fn new(t: &str, from: &str) -> Queries {
        let meta = "title, title_source, title_updated_at";
        // `LIKE` on the binary-collated primary key is a range scan; `!` escapes.
        let under = "path LIKE :prefix ESCAPE '!'";
        Queries {
            read: format!("SELECT content, {meta}, mtime_ms FROM {from} WHERE path = :path"),
            slices: format!(
                "SELECT SUBSTRING(CAST(content AS BINARY), 1, :head) AS head, \
                 CASE WHEN :tail <= 0 THEN CAST('' AS BINARY) \
                 ELSE SUBSTRING(CAST(content AS BINARY), GREATEST(1, LENGTH(content) - :tail + 1)) END AS tail, \
                 LENGTH(content), {meta}, \
                 CASE WHEN title IS NULL AND title_source IS NULL AND title_updated_at IS NULL THEN NULL \
                 ELSE SUBSTRING(CAST(content AS BINARY), 1, 256) END AS first, mtime_ms \
                 FROM {from} WHERE path = :path"
            ),
            size: format!("SELECT LENGTH(content) FROM {from} WHERE path = :path"),
            stat: format!("SELECT LENGTH(content), mtime_ms FROM {from} WHERE path = :path"),
            upsert: format!(
                "INSERT INTO {t} (path, content, mtime_ms, {meta}) VALUES (:path, :content, :mtime, :title, :source, :updated) \
                 ON DUPLICATE KEY UPDATE content = :content, mtime_ms = :mtime, title = :title, \
                 title_source = :source, title_updated_at = :updated"
            ),
            // A plain insert whose duplicate-key error says the file exists: not `INSERT
            // IGNORE` (omp's), which would also turn other errors into warnings.
            insert_if_missing: format!(
                "INSERT INTO {t} (path, content, mtime_ms, {meta}) VALUES (:path, :content, :mtime, :title, :source, :updated)"
            ),
            update_if_size: format!(
                "UPDATE {t} SET content = :content, mtime_ms = :mtime, title = :title, title_source = :source, \
                 title_updated_at = :updated WHERE path = :path AND LENGTH(content) = :expected"
            ),
            // omp's append, with the storage's size limit checked in the same statement:
            // past it the new value is NULL, which strict mode refuses for the column.
            append: format!(
                "INSERT INTO {t} (path, content, mtime_ms) VALUES (:path, :content, :mtime) \
                 ON DUPLICATE KEY UPDATE content = IF(LENGTH(content) + LENGTH(:content) <= :limit, \
                 CONCAT(content, :content), NULL), mtime_ms = :mtime"
            ),
            append_if_size: format!(
                "UPDATE {t} SET content = CONCAT(content, :content), mtime_ms = :mtime \
                 WHERE path = :path AND LENGTH(content) = :expected"
            ),
            touch_empty: format!(
                "INSERT INTO {t} (path, content, mtime_ms) VALUES (:path, '', :mtime) ON DUPLICATE KEY UPDATE path = path"
            ),
            content_for_update: format!("SELECT content FROM {t} WHERE path = :path FOR UPDATE"),
            set_content: format!(
                "UPDATE {t} SET content = :content, mtime_ms = :mtime, \
                 title = IF(:len < 256, NULL, title), title_source = IF(:len < 256, NULL, title_source), \
                 title_updated_at = IF(:len < 256, NULL, title_updated_at) WHERE path = :path"
            ),
            touch: format!("UPDATE {t} SET mtime_ms = :mtime WHERE path = :path"),
            delete: format!("DELETE FROM {t} WHERE path = :path"),
            rename: format!("UPDATE {t} SET path = :to, mtime_ms = :mtime WHERE path = :from"),
            with_prefix: format!("SELECT path FROM {from} WHERE {under}"),
            stats_with_prefix: format!("SELECT path, LENGTH(content), mtime_ms FROM {from} WHERE {under}"),
            newest_with_prefix: format!("SELECT MAX(mtime_ms) FROM {from} WHERE {under}"),
            delete_prefix: format!("DELETE FROM {t} WHERE {under}"),
            title: format!(
                "UPDATE {t} SET title = :title, title_source = :source, title_updated_at = :updated, mtime_ms = :mtime \
                 WHERE path = :path"
            ),
            exists: format!("SELECT 1 FROM {from} WHERE path = :path"),
        }
    }
}

/// `prefix` as a `LIKE … ESCAPE '!'` pattern for every key that starts with it.
fn like_prefix(prefix: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '!' | '%' | '_') {
            out.push('!');
        }
        out.push(c);
    }
    out.push('%');
    out
}

struct Inner {
    pool: Pool,
    table: String,
    q: Queries,
    /// The server's `max_allowed_packet`: no statement or value may be larger.
    max_packet: u64,
    /// Directories made by `ensure_dir` that hold no key yet (omp's `ensureDirSync` is a
    /// no-op; ours is remembered by this storage only).
    dirs: LocalDirs,
    times: Mtimes,
    /// Opened read-only: every write is refused.
    read_only: bool,
}

/// Session files as rows of omp 18.3.4's `omp_session_files` table on a MySQL or MariaDB
/// server.
///
/// Each file is one row keyed by its path; directories are key prefixes. Clones share the
/// connection pool. See the crate docs for the schema, the statements, the limits and the
/// errors.
#[derive(Clone)]
pub struct MysqlStorage {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for MysqlStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MysqlStorage").field("table", &self.inner.table).finish_non_exhaustive()
    }
}

impl MysqlStorage {
    /// Connects with a URL (`mysql://root@127.0.0.1:3306/sessions`) and creates the
    /// `omp_session_files` table when it is missing.
    pub fn connect(url: &str) -> Result<MysqlStorage, ConnectError> {
        MysqlStorage::connect_with(url, MysqlOptions::default())
    }

    /// [`MysqlStorage::connect`] with other [`MysqlOptions`].
    pub fn connect_with(url: &str, options: MysqlOptions) -> Result<MysqlStorage, ConnectError> {
        if !valid_table_name(options.table_name()) {
            return Err(ConnectError::BadTableName(options.table_name().to_owned()));
        }
        let opts = Opts::from_url(url).map_err(ConnectError::BadUrl)?;
        // One connection opened at first (the driver's default opens ten per pool, and
        // every command is a process of its own), at most sixteen.
        let pool_opts = mysql::PoolOpts::default()
            .with_constraints(mysql::PoolConstraints::new(1, 16).unwrap_or(mysql::PoolConstraints::DEFAULT));
        let opts = OptsBuilder::from_opts(opts)
            .pool_opts(pool_opts)
            // An UPDATE reports the rows it matched, not only those it changed: a
            // size-checked write of the same bytes is a success, not a conflict.
            .additional_capabilities(mysql::consts::CapabilityFlags::CLIENT_FOUND_ROWS)
            // Strict: a value that does not fit is an error, never a truncated row.
            .init(vec!["SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'"]);
        let pool = Pool::new(opts).map_err(ConnectError::Connect)?;
        let mut c = pool.get_conn().map_err(ConnectError::Connect)?;
        let table = options.table_name();
        let from = if options.is_read_only() {
            let columns =
                columns_of(&mut c, table).map_err(|source| ConnectError::Schema { table: table.to_owned(), source })?;
            read_relation(table, &COLUMNS, columns.as_deref(), "FROM DUAL WHERE FALSE")
        } else {
            if options.creates_table() {
                create_table(&mut c, table)?;
            }
            table.to_owned()
        };
        let max_packet: Option<u64> = c.query_first("SELECT @@max_allowed_packet").map_err(ConnectError::Connect)?;
        drop(c);
        let q = Queries::new(table, &from);
        let inner = Inner {
            pool,
            table: options.table_name().to_owned(),
            q,
            max_packet: max_packet.unwrap_or(16 << 20),
            dirs: LocalDirs::new(),
            times: Mtimes::new(Arc::new(SystemClock)),
            read_only: options.is_read_only(),
        };
        Ok(MysqlStorage { inner: Arc::new(inner) })
    }

    /// Returns the table's name.
    pub fn table(&self) -> &str {
        &self.inner.table
    }

    /// Returns the largest session this storage can write whole: the server's
    /// `max_allowed_packet` less room for the rest of the statement.
    pub fn max_content_bytes(&self) -> u64 {
        self.inner.max_packet.saturating_sub(STATEMENT_ROOM)
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
        let k = key(op, path)?;
        self.writable(op, path)?;
        let mut c = self.conn(op, path)?;
        let args = params! {"path" => &k, "title" => title, "source" => source, "updated" => updated_at, "mtime" => self.mtime()};
        c.exec_drop(&self.inner.q.title, args).map_err(db(op, path))?;
        if c.affected_rows() == 0 {
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
        let k = key(op, path)?;
        self.writable(op, path)?;
        let body = text(op, path, bytes)?;
        let now = self.mtime();
        let written = match expected {
            ExpectedSize::Any => return self.append(path, bytes),
            ExpectedSize::Missing => {
                self.check_len(op, path, bytes.len() as u64)?;
                let mut c = self.conn(op, path)?;
                let none: Option<&str> = None;
                let args = params! {"path" => &k, "content" => body, "mtime" => now, "title" => none, "source" => none, "updated" => none};
                (inserted(c.exec_drop(&self.inner.q.insert_if_missing, args)).map_err(db(op, path))?, c)
            }
            ExpectedSize::Bytes(n) | ExpectedSize::Unchanged { size: n, .. } => {
                self.check_len(op, path, n.saturating_add(bytes.len() as u64))?;
                let mut c = self.conn(op, path)?;
                let args = params! {"path" => &k, "content" => body, "mtime" => now, "expected" => n};
                c.exec_drop(&self.inner.q.append_if_size, args).map_err(db(op, path))?;
                (c.affected_rows() == 1, c)
            }
        };
        match written {
            (true, _) => Ok(()),
            (false, mut c) => Err(self.conflict(&mut c, op, path, &k, expected)),
        }
    }

    /// Refuses `op` on `path` when the storage was opened read-only.
    fn writable(&self, op: Op, path: &Path) -> Result<(), StoreError> {
        if self.inner.read_only {
            return Err(MysqlError::ReadOnly { table: self.inner.table.clone() }.at(op, path));
        }
        Ok(())
    }

    fn conn(&self, op: Op, path: &Path) -> Result<PooledConn, StoreError> {
        self.inner.pool.get_conn().map_err(db(op, path))
    }

    /// Returns a modification time, strictly increasing per storage.
    fn mtime(&self) -> i64 {
        self.inner.times.next()
    }

    /// Refuses content the server would refuse to take in one statement.
    fn check_len(&self, op: Op, path: &Path, size: u64) -> Result<(), StoreError> {
        let limit = self.max_content_bytes();
        if size > limit {
            return Err(MysqlError::TooLarge { size, limit }.at(op, path));
        }
        Ok(())
    }

    fn size_of(&self, c: &mut PooledConn, op: Op, path: &Path, k: &str) -> Result<Option<u64>, StoreError> {
        c.exec_first(&self.inner.q.size, params! {"path" => k}).map_err(db(op, path))
    }

    /// The error of a refused size check: the size found now.
    fn conflict(&self, c: &mut PooledConn, op: Op, path: &Path, k: &str, expected: ExpectedSize) -> StoreError {
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
        let k = key(op, path)?;
        let mut c = self.conn(op, path)?;
        let row: Option<Row> = c.exec_first(&self.inner.q.read, params! {"path" => &k}).map_err(db(op, path))?;
        let row = row.ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })?;
        let mut bytes: Vec<u8> = take(&row, 0).map_err(|e| e.at(op, path))?;
        let meta = meta_at(&row, 1).map_err(|e| e.at(op, path))?;
        let mtime_ms: i64 = take(&row, 4).map_err(|e| e.at(op, path))?;
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
        let k = key(op, path)?;
        let mut c = self.conn(op, path)?;
        // Signed: `LENGTH(content) - :tail` must not be unsigned arithmetic.
        let (head, tail) = (i64::try_from(prefix).unwrap_or(i64::MAX), i64::try_from(suffix).unwrap_or(i64::MAX));
        let args = params! {"path" => &k, "head" => head, "tail" => tail};
        let row: Option<Row> = c.exec_first(&self.inner.q.slices, args).map_err(db(op, path))?;
        let row = row.ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })?;
        let read = |row: &Row| -> Result<_, MysqlError> {
            let head: Vec<u8> = take(row, 0)?;
            let tail: Vec<u8> = take(row, 1)?;
            let size: u64 = take(row, 2)?;
            let meta = meta_at(row, 3)?;
            let first: Option<Vec<u8>> = take(row, 6)?;
            let mtime_ms: i64 = take(row, 7)?;
            Ok((head, tail, size, meta, first, mtime_ms))
        };
        let (mut head, mut tail, size, meta, first, mtime_ms) = read(&row).map_err(|e| e.at(op, path))?;
        if let Some(slot) = first.and_then(|f| meta.overlay_for(&f)) {
            lay_over(&slot, &mut head, 0);
            let tail_at = size.saturating_sub(tail.len() as u64);
            lay_over(&slot, &mut tail, tail_at);
        }
        Ok((FileStat::new(size, mtime_ms, true), head, tail))
    }

    fn replace(&self, op: Op, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        let k = key(op, path)?;
        self.writable(op, path)?;
        let body = text(op, path, bytes)?;
        self.check_len(op, path, bytes.len() as u64)?;
        let meta = TitleMeta::of_body(bytes);
        let now = self.mtime();
        let q = &self.inner.q;
        let mut c = self.conn(op, path)?;
        let mut args = vec![
            ("path".to_owned(), mysql::Value::from(&k)),
            ("content".to_owned(), mysql::Value::from(body)),
            ("mtime".to_owned(), mysql::Value::from(now)),
            ("title".to_owned(), mysql::Value::from(meta.title.as_deref())),
            ("source".to_owned(), mysql::Value::from(meta.source.as_deref())),
            ("updated".to_owned(), mysql::Value::from(meta.updated_at.as_deref())),
        ];
        let written = match expected {
            ExpectedSize::Any => {
                c.exec_drop(&q.upsert, mysql::Params::from(args)).map_err(db(op, path))?;
                true
            }
            ExpectedSize::Missing => {
                inserted(c.exec_drop(&q.insert_if_missing, mysql::Params::from(args))).map_err(db(op, path))?
            }
            ExpectedSize::Bytes(n) | ExpectedSize::Unchanged { size: n, .. } => {
                args.push(("expected".to_owned(), mysql::Value::from(n)));
                c.exec_drop(&q.update_if_size, mysql::Params::from(args)).map_err(db(op, path))?;
                c.affected_rows() == 1
            }
        };
        if !written {
            if op == Op::WriteNew {
                return Err(StoreError::AlreadyExists { path: path.to_path_buf() });
            }
            return Err(self.conflict(&mut c, op, path, &k, expected));
        }
        Ok(())
    }

    /// Returns the keys of every file whose key starts with `prefix`.
    fn keys_with_prefix(&self, op: Op, path: &Path, prefix: &str) -> Result<Vec<String>, StoreError> {
        let mut c = self.conn(op, path)?;
        c.exec(&self.inner.q.with_prefix, params! {"prefix" => like_prefix(prefix)}).map_err(db(op, path))
    }
}

/// Whether an insert inserted: a duplicate key (`ER_DUP_ENTRY`) is `false`.
fn inserted(result: mysql::Result<()>) -> mysql::Result<bool> {
    match result {
        Ok(()) => Ok(true),
        Err(mysql::Error::MySqlError(e)) if e.code == 1062 => Ok(false),
        Err(e) => Err(e),
    }
}

/// The key of a file: [`Cause::file_key`], and at most omp's 512 characters.
fn key(op: Op, path: &Path) -> Result<String, StoreError> {
    let k = MysqlError::file_key(op, path)?;
    check_key_len(op, path, &k)?;
    Ok(k)
}

fn check_key_len(op: Op, path: &Path, k: &str) -> Result<(), StoreError> {
    if k.ends_with(' ') {
        // `utf8mb4_bin` pads: `a ` and `a` would be one row.
        let reason = "a trailing space, which MySQL's PAD SPACE collation ignores".to_owned();
        return Err(MysqlError::BadPath { reason }.at(op, path));
    }
    let chars = k.chars().count();
    if chars > MAX_KEY_CHARS {
        let reason = format!("{chars} characters, more than omp's VARCHAR({MAX_KEY_CHARS})");
        return Err(MysqlError::BadPath { reason }.at(op, path));
    }
    Ok(())
}

/// Returns the columns of `table` in the connection's database, or `None` when there is
/// no such table: a look at the catalog that changes nothing.
fn columns_of(c: &mut PooledConn, table: &str) -> Result<Option<Vec<String>>, mysql::Error> {
    let tables: Option<u64> = c.exec_first(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
        (table,),
    )?;
    if tables.unwrap_or(0) == 0 {
        return Ok(None);
    }
    c.exec(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ?",
        (table,),
    )
    .map(Some)
}

/// Creates the table as omp 18.3.4 creates it on MySQL, then each title column by
/// `ALTER TABLE`, ignoring "duplicate column" (a table an older omp made lacks them).
fn create_table(c: &mut PooledConn, table: &str) -> Result<(), ConnectError> {
    let schema = |source| ConnectError::Schema { table: table.to_owned(), source };
    c.query_drop(format!(
        "CREATE TABLE IF NOT EXISTS {table} (path VARCHAR(512) NOT NULL PRIMARY KEY, content LONGTEXT NOT NULL, \
         mtime_ms BIGINT NOT NULL, title TEXT NULL, title_source VARCHAR(16) NULL, title_updated_at VARCHAR(64) NULL\
         ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
    ))
    .map_err(schema)?;
    for (column, ty) in [("title", "TEXT"), ("title_source", "VARCHAR(16)"), ("title_updated_at", "VARCHAR(64)")] {
        match c.query_drop(format!("ALTER TABLE {table} ADD COLUMN {column} {ty} NULL")) {
            Ok(()) => {}
            // ER_DUP_FIELDNAME
            Err(mysql::Error::MySqlError(e)) if e.code == 1060 => {}
            Err(e) => return Err(schema(e)),
        }
    }
    Ok(())
}

/// The content as text: UTF-8 without NUL bytes, or [`MysqlError::InvalidContent`].
fn text<'a>(op: Op, path: &Path, bytes: &'a [u8]) -> Result<&'a str, StoreError> {
    session_store::keyed::text_content(bytes).map_err(|reason| MysqlError::InvalidContent { reason }.at(op, path))
}

/// Column `at` of `row` as a `T`.
fn take<T: mysql::prelude::FromValue>(row: &Row, at: usize) -> Result<T, MysqlError> {
    match row.get_opt::<T, usize>(at) {
        Some(Ok(v)) => Ok(v),
        Some(Err(e)) => Err(MysqlError::Database(mysql::Error::FromValueError(e.0))),
        None => Err(MysqlError::Database(mysql::Error::FromRowError(row.clone()))),
    }
}

fn meta_at(row: &Row, at: usize) -> Result<TitleMeta, MysqlError> {
    Ok(TitleMeta { title: take(row, at)?, source: take(row, at + 1)?, updated_at: take(row, at + 2)? })
}

impl Storage for MysqlStorage {
    session_store::keyed_storage_methods!();

    fn ensure_dir(&self, dir: &Path) -> Result<(), StoreError> {
        let op = Op::EnsureDir;
        let k = MysqlError::key(op, dir)?;
        check_key_len(op, dir, &k)?;
        let mut c = self.conn(op, dir)?;
        let found: Option<u8> = c.exec_first(&self.inner.q.exists, params! {"path" => &k}).map_err(db(op, dir))?;
        if found.is_some() {
            let err = std::io::Error::new(std::io::ErrorKind::AlreadyExists, "a file is in the way");
            return Err(StoreError::io_raw(op, dir, err));
        }
        self.inner.dirs.remember(k, self.mtime());
        Ok(())
    }

    fn stat(&self, path: &Path) -> Result<Option<FileStat>, StoreError> {
        let op = Op::Stat;
        let k = MysqlError::key(op, path)?;
        let prefix = MysqlError::dir_prefix(op, path)?;
        let mut c = self.conn(op, path)?;
        // A key no row can have (too long, or padded by the collation) is no file.
        if check_key_len(op, path, &k).is_ok() {
            let row: Option<(u64, i64)> =
                c.exec_first(&self.inner.q.stat, params! {"path" => &k}).map_err(db(op, path))?;
            if let Some((size, mtime_ms)) = row {
                return Ok(Some(FileStat::new(size, mtime_ms, true)));
            }
        }
        let newest: Option<Option<i64>> = c
            .exec_first(&self.inner.q.newest_with_prefix, params! {"prefix" => like_prefix(&prefix)})
            .map_err(db(op, path))?;
        let mtime = newest.flatten().or_else(|| self.inner.dirs.mtime(&k, &prefix));
        Ok(mtime.map(|mtime_ms| FileStat::new(0, mtime_ms, false)))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>, StoreError> {
        let op = Op::List;
        let prefix = MysqlError::dir_prefix(op, dir)?;
        Ok(children(&prefix, self.keys_with_prefix(op, dir, &prefix)?))
    }

    fn list_stats(&self, dir: &Path) -> Result<Vec<(String, FileStat)>, StoreError> {
        let op = Op::List;
        let prefix = MysqlError::dir_prefix(op, dir)?;
        let mut c = self.conn(op, dir)?;
        let rows: Vec<(String, i64, i64)> =
            c.exec(&self.inner.q.stats_with_prefix, params! {"prefix" => like_prefix(&prefix)}).map_err(db(op, dir))?;
        // Only files directly in `dir`, dot-files left out, as `list` gives them.
        let mut out: Vec<(String, FileStat)> = rows
            .into_iter()
            .filter_map(|(key, size, mtime_ms)| {
                let name = key.strip_prefix(&prefix)?;
                (!name.is_empty() && !name.contains('/') && !name.starts_with('.'))
                    .then(|| (name.to_owned(), FileStat::new(size.max(0) as u64, mtime_ms, true)))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    fn read_dir(&self, dir: &Path) -> Result<Vec<DirEntry>, StoreError> {
        let op = Op::List;
        let prefix = MysqlError::dir_prefix(op, dir)?;
        let keys = self.keys_with_prefix(op, dir, &prefix)?;
        Ok(child_entries(&prefix, keys, self.inner.dirs.under(&prefix)))
    }

    fn remove_empty_dir(&self, dir: &Path) -> Result<(), StoreError> {
        let k = MysqlError::key(Op::RemoveDir, dir)?;
        self.inner.dirs.forget_if_empty(&k);
        Ok(())
    }

    fn append(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        let op = Op::Append;
        let k = key(op, path)?;
        self.writable(op, path)?;
        let body = text(op, path, bytes)?;
        self.check_len(op, path, bytes.len() as u64)?;
        let mut c = self.conn(op, path)?;
        let limit = self.max_content_bytes();
        let args = params! {"path" => &k, "content" => body, "mtime" => self.mtime(), "limit" => limit};
        match c.exec_drop(&self.inner.q.append, args) {
            // Past the limit the statement sets NULL, which strict mode refuses for the
            // `NOT NULL` column (`ER_BAD_NULL_ERROR`): nothing was written, and the sizes
            // say why.
            Err(mysql::Error::MySqlError(e)) if e.code == 1048 => {
                let size = self.size_of(&mut c, op, path, &k)?.unwrap_or(0);
                Err(MysqlError::TooLarge { size: size.saturating_add(bytes.len() as u64), limit }.at(op, path))
            }
            other => other.map_err(db(op, path)),
        }
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<(), StoreError> {
        let op = Op::Truncate;
        let k = key(op, path)?;
        self.writable(op, path)?;
        let now = self.mtime();
        let mut c = self.conn(op, path)?;
        let mut tx = c.start_transaction(TxOpts::default()).map_err(db(op, path))?;
        let content: Option<String> =
            tx.exec_first(&self.inner.q.content_for_update, params! {"path" => &k}).map_err(db(op, path))?;
        let content = content.ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })?;
        let size = content.len() as u64;
        if len > size {
            let reason = format!("extending {size} bytes to {len} would add NUL bytes");
            return Err(MysqlError::InvalidContent { reason }.at(op, path));
        }
        if len == size {
            tx.exec_drop(&self.inner.q.touch, params! {"path" => &k, "mtime" => now}).map_err(db(op, path))?;
        } else {
            let Some(kept) = content.get(..len as usize) else {
                let reason = format!("cutting at byte {len} would split a character");
                return Err(MysqlError::InvalidContent { reason }.at(op, path));
            };
            let args = params! {"path" => &k, "content" => kept, "mtime" => now, "len" => len};
            tx.exec_drop(&self.inner.q.set_content, args).map_err(db(op, path))?;
        }
        tx.commit().map_err(db(op, path))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        let op = Op::Rename;
        let src = key(op, from)?;
        let dst = key(op, to)?;
        self.writable(op, from)?;
        let now = self.mtime();
        let mut c = self.conn(op, from)?;
        if src == dst {
            let found: Option<u8> =
                c.exec_first(&self.inner.q.exists, params! {"path" => &src}).map_err(db(op, from))?;
            return found.map(|_| ()).ok_or_else(|| StoreError::NotFound { path: from.to_path_buf() });
        }
        let mut tx = c.start_transaction(TxOpts::default()).map_err(db(op, from))?;
        tx.exec_drop(&self.inner.q.delete, params! {"path" => &dst}).map_err(db(op, to))?;
        tx.exec_drop(&self.inner.q.rename, params! {"to" => &dst, "mtime" => now, "from" => &src})
            .map_err(db(op, from))?;
        if tx.affected_rows() == 0 {
            return Err(StoreError::NotFound { path: from.to_path_buf() });
        }
        tx.commit().map_err(db(op, from))
    }

    fn unlink(&self, path: &Path) -> Result<(), StoreError> {
        let op = Op::Unlink;
        let k = key(op, path)?;
        self.writable(op, path)?;
        let mut c = self.conn(op, path)?;
        c.exec_drop(&self.inner.q.delete, params! {"path" => &k}).map_err(db(op, path))?;
        match c.affected_rows() {
            0 => Err(StoreError::NotFound { path: path.to_path_buf() }),
            _ => Ok(()),
        }
    }

    fn delete_with_artifacts(&self, path: &Path) -> Result<(), StoreError> {
        let op = Op::Unlink;
        let k = key(op, path)?;
        self.writable(op, path)?;
        let artifacts =
            session_store::artifacts_dir(path).map(|d| MysqlError::dir_prefix(Op::RemoveDir, &d)).transpose()?;
        let candidates = self.keys_with_prefix(op, path, &format!("{k}."))?;
        let mut c = self.conn(op, path)?;
        let mut tx = c.start_transaction(TxOpts::default()).map_err(db(op, path))?;
        tx.exec_drop(&self.inner.q.delete, params! {"path" => &k}).map_err(db(op, path))?;
        if let Some(prefix) = &artifacts {
            tx.exec_drop(&self.inner.q.delete_prefix, params! {"prefix" => like_prefix(prefix)})
                .map_err(db(Op::RemoveDir, path))?;
        }
        // `<name>.<anything>.bak` siblings.
        for candidate in backups(&k, candidates) {
            tx.exec_drop(&self.inner.q.delete, params! {"path" => &candidate}).map_err(db(op, path))?;
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
        let k = key(op, path)?;
        self.writable(op, path)?;
        let mut c = self.conn(op, path)?;
        c.exec_drop(&self.inner.q.touch_empty, params! {"path" => &k, "mtime" => self.mtime()})
            .map_err(db(op, path))?;
        Ok(Box::new(AppendingWriter::new(self.clone(), path)))
    }

    /// Takes `GET_LOCK` on a name made from the database, the table and the key (a SHA-2
    /// prefix: lock names are server-wide and hold 64 characters) on a connection of its
    /// own, held until the lock is released or the connection dies. omp takes no lock on
    /// SQL storage.
    fn lock(&self, path: &Path, wait: LockWait) -> Result<SessionLock, StoreError> {
        let op = Op::Lock;
        let k = key(op, path)?;
        let name_sql = "CONCAT('sess:', LEFT(SHA2(CONCAT(IFNULL(DATABASE(), ''), ':', :name), 256), 59))";
        let name = format!("{}:{k}", self.inner.table);
        let deadline = match wait {
            LockWait::NoWait => None,
            LockWait::Timeout(d) => Some(Instant::now() + d),
        };
        let mut c = self.conn(op, path)?;
        loop {
            let got: Option<Option<i64>> = c
                .exec_first(format!("SELECT GET_LOCK({name_sql}, 0)"), params! {"name" => &name})
                .map_err(db(op, path))?;
            if got.flatten() == Some(1) {
                break;
            }
            if deadline.is_none_or(|d| Instant::now() >= d) {
                return Err(StoreError::Locked { path: path.to_path_buf() });
            }
            std::thread::sleep(LOCK_POLL);
        }
        let locked = path.to_path_buf();
        Ok(SessionLock::new(
            path,
            Box::new(move || {
                c.exec_drop(format!("DO RELEASE_LOCK({name_sql})"), params! {"name" => &name})
                    .map_err(|e| MysqlError::Database(e).at(Op::Lock, &locked))
            }),
        ))
    }

    /// Polls the row's size and mtime ([`PollWatch`]): MySQL has no change feed.
    fn watch(&self, path: &Path) -> Result<Option<Box<dyn Watch>>, StoreError> {
        Ok(Some(Box::new(PollWatch::new(self.clone(), path)?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_literal_in_like() {
        assert_eq!(like_prefix("/a_b/%!/"), "/a!_b/!%!!/%");
    }

    #[test]
    fn table_names_are_checked() {
        assert!(valid_table_name("omp_session_files"));
        assert!(!valid_table_name("1x") && !valid_table_name("a-b") && !valid_table_name(""));
    }
}
