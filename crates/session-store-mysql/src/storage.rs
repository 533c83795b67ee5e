//! [`MysqlStorage`]: omp's `omp_session_files` table on a MySQL or MariaDB server.

use std::path::Path;
use std::sync::Arc;

use mysql::prelude::Queryable;
use mysql::{Opts, OptsBuilder, Pool, PooledConn, TxOpts, params};
use session_store::keyed::{
    self, At, Body, Cas, Cut, Doomed, Keeps, KeyedBackend, KeyedState, Put, Row, TableOptions, TitleMeta, Windows,
    cut_text, poll_lock, read_relation, valid_table_name,
};
use session_store::{LockWait, Op, SessionLock, StoreError};

use crate::error::{ConnectError, LIMIT, MAX_KEY_CHARS, MysqlError, db, server};

/// Room left in `max_allowed_packet` for the rest of a statement (path, mtime, title).
const STATEMENT_ROOM: u64 = 8 * 1024;

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
    /// Text, at most the server's `max_allowed_packet` less room for the rest of the
    /// statement.
    state: KeyedState,
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
        let limit = max_packet.unwrap_or(16 << 20).saturating_sub(STATEMENT_ROOM);
        let state =
            KeyedState::new(Keeps::Text, limit, LIMIT).read_only(options.is_read_only().then(|| table.to_owned()));
        let inner = Inner { pool, table: table.to_owned(), q, state };
        Ok(MysqlStorage { inner: Arc::new(inner) })
    }

    /// Returns the table's name.
    pub fn table(&self) -> &str {
        &self.inner.table
    }

    /// Returns the largest session this storage can write whole: the server's
    /// `max_allowed_packet` less room for the rest of the statement.
    pub fn max_content_bytes(&self) -> u64 {
        self.inner.state.limit()
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

    fn conn(&self, at: At<'_>) -> Result<PooledConn, StoreError> {
        self.inner.pool.get_conn().map_err(db(at))
    }

    fn size_of(&self, c: &mut PooledConn, at: At<'_>, k: &str) -> Result<Option<u64>, StoreError> {
        c.exec_first(&self.inner.q.size, params! {"path" => k}).map_err(db(at))
    }

    /// Runs a conditional statement; when it wrote nothing, the size found.
    fn refused_at(&self, c: &mut PooledConn, at: At<'_>, k: &str, written: bool) -> Result<Cas, StoreError> {
        if written {
            return Ok(Cas::Done);
        }
        Ok(Cas::RefusedAt(self.size_of(c, at, k)?))
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

/// Column `at` of `row` as a `T`.
fn take<T: mysql::prelude::FromValue>(row: &mysql::Row, at: usize) -> Result<T, MysqlError> {
    match row.get_opt::<T, usize>(at) {
        Some(Ok(v)) => Ok(v),
        Some(Err(e)) => Err(server(mysql::Error::FromValueError(e.0))),
        None => Err(server(mysql::Error::FromRowError(row.clone()))),
    }
}

fn meta_at(row: &mysql::Row, at: usize) -> Result<TitleMeta, MysqlError> {
    Ok(TitleMeta { title: take(row, at)?, source: take(row, at + 1)?, updated_at: take(row, at + 2)? })
}

impl KeyedBackend for MysqlStorage {
    type Driver = mysql::Error;

    fn state(&self) -> &KeyedState {
        &self.inner.state
    }

    /// At most omp's `VARCHAR(512)` characters, and no trailing space (`utf8mb4_bin` pads:
    /// `a ` and `a` would be one row).
    fn check_key(&self, at: At<'_>, k: &str) -> Result<(), StoreError> {
        if k.ends_with(' ') {
            let reason = "a trailing space, which MySQL's PAD SPACE collation ignores".to_owned();
            return Err(at.wrap(MysqlError::BadPath { reason }));
        }
        let chars = k.chars().count();
        if chars > MAX_KEY_CHARS {
            let reason = format!("{chars} characters, more than omp's VARCHAR({MAX_KEY_CHARS})");
            return Err(at.wrap(MysqlError::BadPath { reason }));
        }
        Ok(())
    }

    fn stat_key(&self, at: At<'_>, k: &str) -> Result<Option<(u64, i64)>, StoreError> {
        self.conn(at)?.exec_first(&self.inner.q.stat, params! {"path" => k}).map_err(db(at))
    }

    fn newest_under(&self, at: At<'_>, prefix: &str) -> Result<Option<i64>, StoreError> {
        let newest: Option<Option<i64>> = self
            .conn(at)?
            .exec_first(&self.inner.q.newest_with_prefix, params! {"prefix" => like_prefix(prefix)})
            .map_err(db(at))?;
        Ok(newest.flatten())
    }

    fn keys_under(&self, at: At<'_>, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.conn(at)?.exec(&self.inner.q.with_prefix, params! {"prefix" => like_prefix(prefix)}).map_err(db(at))
    }

    fn stats_under(&self, at: At<'_>, prefix: &str) -> Result<Vec<(String, u64, i64)>, StoreError> {
        let rows: Vec<(String, i64, i64)> = self
            .conn(at)?
            .exec(&self.inner.q.stats_with_prefix, params! {"prefix" => like_prefix(prefix)})
            .map_err(db(at))?;
        Ok(rows.into_iter().map(|(k, size, mtime_ms)| (k, size.max(0) as u64, mtime_ms)).collect())
    }

    fn read_row(&self, at: At<'_>, k: &str) -> Result<Option<Row>, StoreError> {
        let row: Option<mysql::Row> =
            self.conn(at)?.exec_first(&self.inner.q.read, params! {"path" => k}).map_err(db(at))?;
        let read = |row: &mysql::Row| -> Result<Row, MysqlError> {
            Ok(Row { content: take(row, 0)?, meta: meta_at(row, 1)?, mtime_ms: take(row, 4)? })
        };
        row.map(|row| read(&row).map_err(|e| at.wrap(e))).transpose()
    }

    fn read_windows(&self, at: At<'_>, k: &str, prefix: u64, suffix: u64) -> Result<Option<Windows>, StoreError> {
        // Signed: `LENGTH(content) - :tail` must not be unsigned arithmetic.
        let (head, tail) = (i64::try_from(prefix).unwrap_or(i64::MAX), i64::try_from(suffix).unwrap_or(i64::MAX));
        let args = params! {"path" => k, "head" => head, "tail" => tail};
        let row: Option<mysql::Row> = self.conn(at)?.exec_first(&self.inner.q.slices, args).map_err(db(at))?;
        let read = |row: &mysql::Row| -> Result<Windows, MysqlError> {
            Ok(Windows {
                head: take(row, 0)?,
                tail: take(row, 1)?,
                size: take(row, 2)?,
                meta: meta_at(row, 3)?,
                first: take(row, 6)?,
                mtime_ms: take(row, 7)?,
            })
        };
        row.map(|row| read(&row).map_err(|e| at.wrap(e))).transpose()
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
        let q = &self.inner.q;
        let mut c = self.conn(at)?;
        let mut args = vec![
            ("path".to_owned(), mysql::Value::from(k)),
            ("content".to_owned(), mysql::Value::from(body.as_bytes())),
            ("mtime".to_owned(), mysql::Value::from(now)),
            ("title".to_owned(), mysql::Value::from(meta.title.as_deref())),
            ("source".to_owned(), mysql::Value::from(meta.source.as_deref())),
            ("updated".to_owned(), mysql::Value::from(meta.updated_at.as_deref())),
        ];
        let written = match how {
            Put::Upsert => {
                c.exec_drop(&q.upsert, mysql::Params::from(args)).map_err(db(at))?;
                true
            }
            Put::Create => inserted(c.exec_drop(&q.insert_if_missing, mysql::Params::from(args))).map_err(db(at))?,
            Put::IfSize(n) => {
                args.push(("expected".to_owned(), mysql::Value::from(n)));
                c.exec_drop(&q.update_if_size, mysql::Params::from(args)).map_err(db(at))?;
                c.affected_rows() == 1
            }
        };
        self.refused_at(&mut c, at, k, written)
    }

    fn append_key(&self, at: At<'_>, k: &str, body: Body<'_>, now: i64) -> Result<(), StoreError> {
        let mut c = self.conn(at)?;
        let limit = self.max_content_bytes();
        let args = params! {"path" => k, "content" => body.as_bytes(), "mtime" => now, "limit" => limit};
        match c.exec_drop(&self.inner.q.append, args) {
            // Past the limit the statement sets NULL, which strict mode refuses for the
            // `NOT NULL` column (`ER_BAD_NULL_ERROR`): nothing was written, and the sizes
            // say why.
            Err(mysql::Error::MySqlError(e)) if e.code == 1048 => {
                let size = self.size_of(&mut c, at, k)?.unwrap_or(0);
                Err(at.wrap(MysqlError::TooLarge { size: size.saturating_add(body.len()), limit, what: LIMIT }))
            }
            other => other.map_err(db(at)),
        }
    }

    fn append_at(&self, at: At<'_>, k: &str, body: Body<'_>, now: i64, size: u64) -> Result<Cas, StoreError> {
        let mut c = self.conn(at)?;
        let args = params! {"path" => k, "content" => body.as_bytes(), "mtime" => now, "expected" => size};
        c.exec_drop(&self.inner.q.append_if_size, args).map_err(db(at))?;
        let written = c.affected_rows() == 1;
        self.refused_at(&mut c, at, k, written)
    }

    fn truncate_key(&self, at: At<'_>, k: &str, len: u64, now: i64) -> Result<bool, StoreError> {
        let mut c = self.conn(at)?;
        let mut tx = c.start_transaction(TxOpts::default()).map_err(db(at))?;
        let content: Option<String> =
            tx.exec_first(&self.inner.q.content_for_update, params! {"path" => k}).map_err(db(at))?;
        let Some(content) = content else { return Ok(false) };
        match cut_text(&content, len).map_err(|reason| at.wrap(MysqlError::InvalidContent { reason }))? {
            Cut::Same => tx.exec_drop(&self.inner.q.touch, params! {"path" => k, "mtime" => now}).map_err(db(at))?,
            Cut::To(kept) => {
                let args = params! {"path" => k, "content" => kept, "mtime" => now, "len" => len};
                tx.exec_drop(&self.inner.q.set_content, args).map_err(db(at))?;
            }
        }
        tx.commit().map_err(db(at))?;
        Ok(true)
    }

    fn rename_key(&self, at: At<'_>, from: &str, to: &str, now: i64) -> Result<bool, StoreError> {
        let mut c = self.conn(at)?;
        let mut tx = c.start_transaction(TxOpts::default()).map_err(db(at))?;
        tx.exec_drop(&self.inner.q.delete, params! {"path" => to}).map_err(db(at))?;
        tx.exec_drop(&self.inner.q.rename, params! {"to" => to, "mtime" => now, "from" => from}).map_err(db(at))?;
        if tx.affected_rows() == 0 {
            return Ok(false);
        }
        tx.commit().map_err(db(at))?;
        Ok(true)
    }

    fn delete_key(&self, at: At<'_>, k: &str) -> Result<bool, StoreError> {
        let mut c = self.conn(at)?;
        c.exec_drop(&self.inner.q.delete, params! {"path" => k}).map_err(db(at))?;
        Ok(c.affected_rows() > 0)
    }

    fn delete_doomed(&self, at: At<'_>, doomed: Doomed<'_>) -> Result<(), StoreError> {
        let mut c = self.conn(at)?;
        let mut tx = c.start_transaction(TxOpts::default()).map_err(db(at))?;
        tx.exec_drop(&self.inner.q.delete, params! {"path" => doomed.key}).map_err(db(at))?;
        if let Some(prefix) = doomed.artifacts {
            tx.exec_drop(&self.inner.q.delete_prefix, params! {"prefix" => like_prefix(prefix)})
                .map_err(db(At::new(Op::RemoveDir, at.path)))?;
        }
        for backup in doomed.backups {
            tx.exec_drop(&self.inner.q.delete, params! {"path" => backup}).map_err(db(at))?;
        }
        tx.commit().map_err(db(at))
    }

    fn touch_empty(&self, at: At<'_>, k: &str, now: i64) -> Result<(), StoreError> {
        self.conn(at)?.exec_drop(&self.inner.q.touch_empty, params! {"path" => k, "mtime" => now}).map_err(db(at))
    }

    fn set_title(&self, at: At<'_>, k: &str, meta: &TitleMeta, now: i64) -> Result<bool, StoreError> {
        let mut c = self.conn(at)?;
        let args = params! {
            "path" => k, "title" => &meta.title, "source" => &meta.source, "updated" => &meta.updated_at, "mtime" => now
        };
        c.exec_drop(&self.inner.q.title, args).map_err(db(at))?;
        Ok(c.affected_rows() > 0)
    }

    /// Takes `GET_LOCK` on a name made from the database, the table and the key (a SHA-2
    /// prefix: lock names are server-wide and hold 64 characters) on a connection of its
    /// own, held until the lock is released or the connection dies. omp takes no lock on
    /// SQL storage.
    fn lock_key(&self, at: At<'_>, k: &str, wait: LockWait) -> Result<SessionLock, StoreError> {
        let name_sql = "CONCAT('sess:', LEFT(SHA2(CONCAT(IFNULL(DATABASE(), ''), ':', :name), 256), 59))";
        let name = format!("{}:{k}", self.inner.table);
        let mut c = self.conn(at)?;
        poll_lock(at.path, wait, || {
            let got: Option<Option<i64>> =
                c.exec_first(format!("SELECT GET_LOCK({name_sql}, 0)"), params! {"name" => &name}).map_err(db(at))?;
            Ok(got.flatten() == Some(1))
        })?;
        let locked = at.path.to_path_buf();
        Ok(SessionLock::new(
            at.path,
            Box::new(move || {
                c.exec_drop(format!("DO RELEASE_LOCK({name_sql})"), params! {"name" => &name})
                    .map_err(|e| At::new(Op::Lock, &locked).wrap(server(e)))
            }),
        ))
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
