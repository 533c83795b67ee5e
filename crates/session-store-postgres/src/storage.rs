//! [`PostgresStorage`]: the [`Storage`](session_store::Storage) trait on omp's `omp_session_files` table.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use postgres::Config;
use session_store::keyed::{
    self, At, Body, Cas, Doomed, Keeps, KeyedBackend, KeyedState, Put, Row, TitleMeta, Windows, read_relation,
    valid_table_name,
};
use session_store::{LockWait, Op, SessionLock, StoreError, Watch};

use crate::base::{Base, FileQueries, columns_of};
use crate::error::{ConnectError, MAX_CONTENT_BYTES, ServerError, db};
use crate::pool::{Pool, Pooled};

/// The table omp uses unless told otherwise.
pub const DEFAULT_TABLE: &str = session_store::keyed::OMP_TABLE;

/// Settings of [`PostgresStorage::connect_with`].
#[derive(Clone, Debug)]
pub struct PostgresOptions {
    table: String,
    create_table: bool,
    max_idle: usize,
    read_only: bool,
}

impl Default for PostgresOptions {
    fn default() -> PostgresOptions {
        PostgresOptions { table: DEFAULT_TABLE.to_owned(), create_table: true, max_idle: 8, read_only: false }
    }
}

impl PostgresOptions {
    /// Uses `table` instead of `omp_session_files`; it must match
    /// `[A-Za-z_][A-Za-z0-9_]{0,62}` (checked by [`PostgresStorage::connect_with`]).
    pub fn table(mut self, table: &str) -> PostgresOptions {
        table.clone_into(&mut self.table);
        self
    }

    /// Whether to create the table (and add missing title columns) when connecting, as omp
    /// does unless `createTable: false`; on by default.
    pub fn create_table(mut self, create: bool) -> PostgresOptions {
        self.create_table = create;
        self
    }

    /// Whether to open the table read-only (off by default): nothing is created or
    /// altered, whatever [`PostgresOptions::create_table`] says, and every write is refused
    /// with [`ServerError::ReadOnly`] (a `StoreError::Io` of kind `ReadOnlyFilesystem`).
    /// A missing table reads as an empty store (no files, every read `NotFound`), and
    /// missing title columns (an older omp table) read as unset.
    pub fn read_only(mut self, read_only: bool) -> PostgresOptions {
        self.read_only = read_only;
        self
    }

    /// How many idle connections the pool keeps for reuse (8 by default).
    pub fn max_idle(mut self, n: usize) -> PostgresOptions {
        self.max_idle = n;
        self
    }
}

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
    size_for_update: String,
    cut: String,
    touch: String,
    delete: String,
    rename: String,
    with_prefix: String,
    newest_with_prefix: String,
    delete_prefix: String,
    title: String,
}

/// omp's columns and their `NULL`s: what a read-only storage reads where the table lacks them.
const COLUMNS: [(&str, &str); 6] = [
    ("path", "NULL::text"),
    ("content", "NULL::text"),
    ("mtime_ms", "NULL::bigint"),
    ("title", "NULL::text"),
    ("title_source", "NULL::text"),
    ("title_updated_at", "NULL::text"),
];

impl Queries {
    /// The statements on table `t`, whose reads name `from` (the table, or what stands in
    /// for it in a read-only storage: [`read_relation`]).
    fn new(t: &str, from: &str) -> Queries {
        let meta = "title, title_source, title_updated_at";
        Queries {
            read: format!("SELECT content, {meta}, mtime_ms FROM {from} WHERE path = $1"),
            slices: format!(
                "SELECT substring(convert_to(content, 'UTF8') from 1 for $2::int) AS head, \
                 CASE WHEN $3::int <= 0 THEN ''::bytea \
                 ELSE substring(convert_to(content, 'UTF8') from greatest(1, octet_length(content) - $3::int + 1)) END AS tail, \
                 octet_length(content)::bigint, {meta}, \
                 CASE WHEN title IS NULL AND title_source IS NULL AND title_updated_at IS NULL THEN NULL \
                 ELSE substring(convert_to(content, 'UTF8') from 1 for 256) END AS first, mtime_ms \
                 FROM {from} WHERE path = $1"
            ),
            size: format!("SELECT octet_length(content)::bigint FROM {from} WHERE path = $1"),
            stat: format!("SELECT octet_length(content)::bigint, mtime_ms FROM {from} WHERE path = $1"),
            upsert: format!(
                "INSERT INTO {t} (path, content, mtime_ms, {meta}) VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (path) DO UPDATE SET content = excluded.content, mtime_ms = excluded.mtime_ms, \
                 title = excluded.title, title_source = excluded.title_source, title_updated_at = excluded.title_updated_at"
            ),
            insert_if_missing: format!(
                "INSERT INTO {t} (path, content, mtime_ms, {meta}) VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (path) DO NOTHING"
            ),
            update_if_size: format!(
                "UPDATE {t} SET content = $2, mtime_ms = $3, title = $4, title_source = $5, title_updated_at = $6 \
                 WHERE path = $1 AND octet_length(content) = $7::bigint"
            ),
            append: format!(
                "INSERT INTO {t} (path, content, mtime_ms) VALUES ($1, $2, $3) \
                 ON CONFLICT (path) DO UPDATE SET content = {t}.content || excluded.content, mtime_ms = excluded.mtime_ms"
            ),
            append_if_size: format!(
                "UPDATE {t} SET content = content || $2, mtime_ms = $3 WHERE path = $1 AND octet_length(content) = $4::bigint"
            ),
            touch_empty: format!(
                "INSERT INTO {t} (path, content, mtime_ms) VALUES ($1, '', $2) ON CONFLICT (path) DO NOTHING"
            ),
            size_for_update: format!("SELECT octet_length(content)::bigint FROM {t} WHERE path = $1 FOR UPDATE"),
            cut: format!(
                "UPDATE {t} SET content = convert_from(substring(convert_to(content, 'UTF8') from 1 for $2::int), 'UTF8'), \
                 mtime_ms = $3, \
                 title = CASE WHEN $2::int < 256 THEN NULL ELSE title END, \
                 title_source = CASE WHEN $2::int < 256 THEN NULL ELSE title_source END, \
                 title_updated_at = CASE WHEN $2::int < 256 THEN NULL ELSE title_updated_at END \
                 WHERE path = $1"
            ),
            touch: format!("UPDATE {t} SET mtime_ms = $2 WHERE path = $1"),
            delete: format!("DELETE FROM {t} WHERE path = $1"),
            rename: format!("UPDATE {t} SET path = $1, mtime_ms = $2 WHERE path = $3"),
            with_prefix: format!("SELECT path FROM {from} WHERE starts_with(path, $1)"),
            newest_with_prefix: format!("SELECT max(mtime_ms) FROM {from} WHERE starts_with(path, $1)"),
            delete_prefix: format!("DELETE FROM {t} WHERE starts_with(path, $1)"),
            title: format!(
                "UPDATE {t} SET title = $2, title_source = $3, title_updated_at = $4, mtime_ms = $5 WHERE path = $1"
            ),
        }
    }
}

#[derive(Debug)]
struct Inner {
    base: Base,
    table: String,
    q: Queries,
}

/// Session files as rows of omp 18.3.4's `omp_session_files` table on a PostgreSQL server.
///
/// Each file is one row keyed by its path; directories are key prefixes. Clones share the
/// connection pool. See the crate docs for the schema, the statements, the limits and the
/// errors.
#[derive(Clone, Debug)]
pub struct PostgresStorage {
    inner: Arc<Inner>,
}

impl PostgresStorage {
    /// Connects with a libpq-style string (`host=/var/run/postgresql dbname=sessions`) or a
    /// URL (`postgres://user@host:5432/sessions`) and creates the `omp_session_files` table
    /// when it is missing.
    pub fn connect(conn: &str) -> Result<PostgresStorage, ConnectError> {
        PostgresStorage::connect_with(conn, PostgresOptions::default())
    }

    /// [`PostgresStorage::connect`] with other [`PostgresOptions`].
    pub fn connect_with(conn: &str, options: PostgresOptions) -> Result<PostgresStorage, ConnectError> {
        if !valid_table_name(&options.table) {
            return Err(ConnectError::BadTableName(options.table));
        }
        let config = Config::from_str(conn).map_err(ConnectError::BadConfig)?;
        let pool = Pool::new(config, options.max_idle);
        let mut c = pool.get().map_err(ConnectError::Connect)?;
        let from = if options.read_only {
            let schema = |source| ConnectError::Schema { table: options.table.clone(), source };
            let columns = columns_of(&mut c, &options.table).map_err(schema)?;
            read_relation(&options.table, &COLUMNS, columns.as_deref(), "WHERE false")
        } else {
            if options.create_table {
                create_table(&mut c, &options.table)?;
            }
            options.table.clone()
        };
        drop(c);
        let q = Queries::new(&options.table, &from);
        let files = FileQueries {
            stat: q.stat.clone(),
            newest_with_prefix: q.newest_with_prefix.clone(),
            with_prefix: q.with_prefix.clone(),
            stats_with_prefix: format!(
                "SELECT path, octet_length(content)::bigint, mtime_ms FROM {from} WHERE starts_with(path, $1)"
            ),
            title: q.title.clone(),
        };
        let read_only = options.read_only.then(|| options.table.clone());
        let state = KeyedState::new(Keeps::Text, MAX_CONTENT_BYTES, crate::error::LIMIT).read_only(read_only);
        let inner = Inner { base: Base::new(pool, files, state), q, table: options.table };
        Ok(PostgresStorage { inner: Arc::new(inner) })
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

    fn client(&self, at: At<'_>) -> Result<Pooled, StoreError> {
        self.inner.base.client(at)
    }

    /// What a conditional statement that changed `written` rows did: when none, the size
    /// found now.
    fn cas(&self, c: &mut Pooled, at: At<'_>, k: &str, written: u64) -> Result<Cas, StoreError> {
        if written > 0 {
            return Ok(Cas::Done);
        }
        let row = c.client().query_opt(&self.inner.q.size, &[&k]).map_err(db(at))?;
        let found = row.map(|r| r.try_get::<_, i64>(0).map(|n| n.max(0) as u64)).transpose().map_err(db(at))?;
        Ok(Cas::RefusedAt(found))
    }
}

/// Creates the table as omp 18.3.4 does: `CREATE TABLE IF NOT EXISTS` with the three
/// original columns, then each title column by `ALTER TABLE`, ignoring "already exists".
fn create_table(c: &mut Pooled, table: &str) -> Result<(), ConnectError> {
    let schema = |source| ConnectError::Schema { table: table.to_owned(), source };
    let create = format!(
        "CREATE TABLE IF NOT EXISTS {table} (path TEXT PRIMARY KEY, content TEXT NOT NULL, mtime_ms BIGINT NOT NULL)"
    );
    c.client().batch_execute(&create).map_err(schema)?;
    for column in ["title", "title_source", "title_updated_at"] {
        match c.client().batch_execute(&format!("ALTER TABLE {table} ADD COLUMN {column} TEXT")) {
            Ok(()) => {}
            Err(e) if e.code() == Some(&postgres::error::SqlState::DUPLICATE_COLUMN) => {}
            Err(e) => return Err(schema(e)),
        }
    }
    // The change notifications (ours; omp's statements do not see them), one connect at
    // a time so that two processes starting together do not race on the function.
    let notify = format!(
        "BEGIN; SELECT pg_advisory_xact_lock(hashtext('{table}')); {} COMMIT",
        crate::watch::trigger_ddl(table, "octet_length(NEW.content)")
    );
    c.client().batch_execute(&notify).map_err(schema)?;
    Ok(())
}

pub(crate) fn meta_at(row: &postgres::Row, at: usize) -> Result<TitleMeta, postgres::Error> {
    Ok(TitleMeta { title: row.try_get(at)?, source: row.try_get(at + 1)?, updated_at: row.try_get(at + 2)? })
}

fn clamp_i32(n: u64) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

impl KeyedBackend for PostgresStorage {
    type Driver = postgres::Error;

    fn state(&self) -> &KeyedState {
        &self.inner.base.state
    }

    fn stat_key(&self, at: At<'_>, k: &str) -> Result<Option<(u64, i64)>, StoreError> {
        self.inner.base.stat_key(at, k)
    }

    fn newest_under(&self, at: At<'_>, prefix: &str) -> Result<Option<i64>, StoreError> {
        self.inner.base.newest_under(at, prefix)
    }

    fn keys_under(&self, at: At<'_>, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.inner.base.keys_under(at, prefix)
    }

    fn stats_under(&self, at: At<'_>, prefix: &str) -> Result<Vec<(String, u64, i64)>, StoreError> {
        self.inner.base.stats_under(at, prefix)
    }

    fn read_row(&self, at: At<'_>, k: &str) -> Result<Option<Row>, StoreError> {
        let mut c = self.client(at)?;
        let Some(row) = c.client().query_opt(&self.inner.q.read, &[&k]).map_err(db(at))? else { return Ok(None) };
        let get = |row: &postgres::Row| -> Result<Row, postgres::Error> {
            let content: String = row.try_get(0)?;
            Ok(Row { content: content.into_bytes(), meta: meta_at(row, 1)?, mtime_ms: row.try_get(4)? })
        };
        get(&row).map(Some).map_err(db(at))
    }

    fn read_windows(&self, at: At<'_>, k: &str, prefix: u64, suffix: u64) -> Result<Option<Windows>, StoreError> {
        let mut c = self.client(at)?;
        let (p, s) = (clamp_i32(prefix), clamp_i32(suffix));
        let row = c.client().query_opt(&self.inner.q.slices, &[&k, &p, &s]).map_err(db(at))?;
        let Some(row) = row else { return Ok(None) };
        let get = |row: &postgres::Row| -> Result<Windows, postgres::Error> {
            Ok(Windows {
                head: row.try_get(0)?,
                tail: row.try_get(1)?,
                size: row.try_get::<_, i64>(2)?.max(0) as u64,
                meta: meta_at(row, 3)?,
                first: row.try_get(6)?,
                mtime_ms: row.try_get(7)?,
            })
        };
        get(&row).map(Some).map_err(db(at))
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
        let body = ServerError::text_of(at, body)?;
        let mut c = self.client(at)?;
        let args: [&(dyn postgres::types::ToSql + Sync); 6] =
            [&k, &body, &now, &meta.title, &meta.source, &meta.updated_at];
        let q = &self.inner.q;
        let written = match how {
            Put::Upsert => c.client().execute(&q.upsert, &args).map_err(db(at))?,
            Put::Create => c.client().execute(&q.insert_if_missing, &args).map_err(db(at))?,
            Put::IfSize(n) => match i64::try_from(n) {
                Ok(n) => {
                    let mut with_size = args.to_vec();
                    with_size.push(&n);
                    c.client().execute(&q.update_if_size, &with_size).map_err(db(at))?
                }
                Err(_) => 0,
            },
        };
        self.cas(&mut c, at, k, written)
    }

    fn append_key(&self, at: At<'_>, k: &str, body: Body<'_>, now: i64) -> Result<(), StoreError> {
        let body = ServerError::text_of(at, body)?;
        let mut c = self.client(at)?;
        c.client().execute(&self.inner.q.append, &[&k, &body, &now]).map_err(db(at))?;
        Ok(())
    }

    fn append_at(&self, at: At<'_>, k: &str, body: Body<'_>, now: i64, size: u64) -> Result<Cas, StoreError> {
        let body = ServerError::text_of(at, body)?;
        let mut c = self.client(at)?;
        let written = match i64::try_from(size) {
            Ok(n) => c.client().execute(&self.inner.q.append_if_size, &[&k, &body, &now, &n]).map_err(db(at))?,
            Err(_) => 0,
        };
        self.cas(&mut c, at, k, written)
    }

    /// Cuts inside the server (`convert_to`, `substring`): the row never comes here.
    fn truncate_key(&self, at: At<'_>, k: &str, len: u64, now: i64) -> Result<bool, StoreError> {
        let mut c = self.client(at)?;
        let mut tx = c.client().transaction().map_err(db(at))?;
        let Some(row) = tx.query_opt(&self.inner.q.size_for_update, &[&k]).map_err(db(at))? else { return Ok(false) };
        let size = row.try_get::<_, i64>(0).map_err(db(at))?.max(0) as u64;
        if len > size {
            let reason = format!("extending {size} bytes to {len} would add NUL bytes");
            return Err(at.wrap(ServerError::InvalidContent { reason }));
        }
        if len == size {
            tx.execute(&self.inner.q.touch, &[&k, &now]).map_err(db(at))?;
        } else {
            let n = clamp_i32(len);
            tx.execute(&self.inner.q.cut, &[&k, &n, &now]).map_err(db(at))?;
        }
        tx.commit().map_err(db(at))?;
        Ok(true)
    }

    fn rename_key(&self, at: At<'_>, from: &str, to: &str, now: i64) -> Result<bool, StoreError> {
        let mut c = self.client(at)?;
        let mut tx = c.client().transaction().map_err(db(at))?;
        tx.execute(&self.inner.q.delete, &[&to]).map_err(db(at))?;
        if tx.execute(&self.inner.q.rename, &[&to, &now, &from]).map_err(db(at))? == 0 {
            return Ok(false);
        }
        tx.commit().map_err(db(at))?;
        Ok(true)
    }

    fn delete_key(&self, at: At<'_>, k: &str) -> Result<bool, StoreError> {
        let mut c = self.client(at)?;
        Ok(c.client().execute(&self.inner.q.delete, &[&k]).map_err(db(at))? > 0)
    }

    fn delete_doomed(&self, at: At<'_>, doomed: Doomed<'_>) -> Result<(), StoreError> {
        let mut c = self.client(at)?;
        let mut tx = c.client().transaction().map_err(db(at))?;
        tx.execute(&self.inner.q.delete, &[&doomed.key]).map_err(db(at))?;
        if let Some(prefix) = doomed.artifacts {
            tx.execute(&self.inner.q.delete_prefix, &[&prefix]).map_err(db(At::new(Op::RemoveDir, at.path)))?;
        }
        for backup in doomed.backups {
            tx.execute(&self.inner.q.delete, &[backup]).map_err(db(at))?;
        }
        tx.commit().map_err(db(at))
    }

    fn touch_empty(&self, at: At<'_>, k: &str, now: i64) -> Result<(), StoreError> {
        let mut c = self.client(at)?;
        c.client().execute(&self.inner.q.touch_empty, &[&k, &now]).map_err(db(at))?;
        Ok(())
    }

    fn set_title(&self, at: At<'_>, k: &str, meta: &TitleMeta, now: i64) -> Result<bool, StoreError> {
        self.inner.base.set_title(at, k, meta, now)
    }

    fn lock_key(&self, at: At<'_>, k: &str, wait: LockWait) -> Result<SessionLock, StoreError> {
        self.inner.base.lock(at, wait, format!("{}:{k}", self.inner.table))
    }

    /// `LISTEN`s for the table's notifications (the crate docs' trigger; a table this
    /// storage did not create, [`PostgresOptions::create_table`] off, may lack it, and
    /// then no change is reported).
    fn watch_key(&self, at: At<'_>, k: &str) -> Result<Option<Box<dyn Watch>>, StoreError> {
        self.inner.base.watch(at, k, &self.inner.table).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_follow_omp() {
        assert!(valid_table_name("omp_session_files"));
        assert!(valid_table_name("_t9"));
        assert!(valid_table_name(&"a".repeat(63)));
        assert!(!valid_table_name(&"a".repeat(64)));
        assert!(!valid_table_name("9t"));
        assert!(!valid_table_name("a.b"));
        assert!(!valid_table_name("a-b"));
        assert!(!valid_table_name(""));
        assert!(!valid_table_name("t; DROP TABLE x"));
    }
}
