//! [`PostgresStorage`]: the [`Storage`] trait on omp's `omp_session_files` table.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use postgres::Config;
use session_store::keyed::{AppendingWriter, Cause, TitleMeta, backups, lay_over, read_relation, valid_table_name};
use session_store::{AppendWriter, Durability, ExpectedSize, FileStat, LockWait, Op, SessionLock, Storage, StoreError};

use crate::base::{Base, FileQueries, base_storage_methods, columns_of};
use crate::error::{ConnectError, MAX_CONTENT_BYTES, ServerError, db};
use crate::keys::text;
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
    exists: String,
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
            exists: format!("SELECT 1 FROM {from} WHERE path = $1"),
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
        let inner = Inner { base: Base::new(pool, files, read_only), q, table: options.table };
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
        self.inner.base.update_title(path, (title, source, updated_at))
    }

    /// Appends `bytes` only when the file is as `expected` says (omp appends blindly; this is
    /// the check-then-append a second writer needs). A mismatch is [`StoreError::Conflict`]
    /// and appends nothing; [`ExpectedSize::Missing`] creates the file with `bytes`.
    pub fn append_if_size(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        let op = Op::Append;
        let k = ServerError::file_key(op, path)?;
        self.inner.base.writable(op, path)?;
        let body = text(op, path, bytes)?;
        let now = self.mtime();
        let mut c = self.client(op, path)?;
        let written = match expected {
            ExpectedSize::Any => return self.append(path, bytes),
            ExpectedSize::Missing => {
                check_len(op, path, bytes.len() as u64)?;
                let none: Option<&str> = None;
                let q = &self.inner.q.insert_if_missing;
                c.client().execute(q, &[&k, &body, &now, &none, &none, &none]).map_err(db(op, path))?
            }
            ExpectedSize::Bytes(n) | ExpectedSize::Unchanged { size: n, .. } => {
                check_len(op, path, n.saturating_add(bytes.len() as u64))?;
                match i64::try_from(n) {
                    Ok(n) => c
                        .client()
                        .execute(&self.inner.q.append_if_size, &[&k, &body, &now, &n])
                        .map_err(db(op, path))?,
                    Err(_) => 0,
                }
            }
        };
        if written == 0 {
            return Err(self.conflict(&mut c, op, path, &k, expected));
        }
        Ok(())
    }

    fn client(&self, op: Op, path: &Path) -> Result<Pooled, StoreError> {
        self.inner.base.client(op, path)
    }

    fn mtime(&self) -> i64 {
        self.inner.base.mtime()
    }

    fn size_of(&self, c: &mut Pooled, op: Op, path: &Path, k: &str) -> Result<Option<u64>, StoreError> {
        let row = c.client().query_opt(&self.inner.q.size, &[&k]).map_err(db(op, path))?;
        row.map(|r| r.try_get::<_, i64>(0).map(|n| n.max(0) as u64)).transpose().map_err(db(op, path))
    }

    /// The error of a refused size check: the size found now.
    fn conflict(&self, c: &mut Pooled, op: Op, path: &Path, k: &str, expected: ExpectedSize) -> StoreError {
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
        let k = ServerError::file_key(op, path)?;
        let mut c = self.client(op, path)?;
        let row = c.client().query_opt(&self.inner.q.read, &[&k]).map_err(db(op, path))?;
        let row = row.ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })?;
        let content: String = row.try_get(0).map_err(db(op, path))?;
        let meta = meta_at(&row, 1).map_err(db(op, path))?;
        let mtime_ms: i64 = row.try_get(4).map_err(db(op, path))?;
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
        let k = ServerError::file_key(op, path)?;
        let mut c = self.client(op, path)?;
        let (p, s) = (clamp_i32(prefix), clamp_i32(suffix));
        let row = c.client().query_opt(&self.inner.q.slices, &[&k, &p, &s]).map_err(db(op, path))?;
        let row = row.ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })?;
        let get = |row: &postgres::Row| -> Result<_, postgres::Error> {
            let head: Vec<u8> = row.try_get(0)?;
            let tail: Vec<u8> = row.try_get(1)?;
            let size: i64 = row.try_get(2)?;
            let meta = meta_at(row, 3)?;
            let first: Option<Vec<u8>> = row.try_get(6)?;
            let mtime_ms: i64 = row.try_get(7)?;
            Ok((head, tail, size.max(0) as u64, meta, first, mtime_ms))
        };
        let (mut head, mut tail, size, meta, first, mtime_ms) = get(&row).map_err(db(op, path))?;
        if let Some(slot) = first.and_then(|f| meta.overlay_for(&f)) {
            lay_over(&slot, &mut head, 0);
            let tail_at = size.saturating_sub(tail.len() as u64);
            lay_over(&slot, &mut tail, tail_at);
        }
        Ok((FileStat::new(size, mtime_ms, true), head, tail))
    }

    fn replace(&self, op: Op, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        let k = ServerError::file_key(op, path)?;
        self.inner.base.writable(op, path)?;
        let body = text(op, path, bytes)?;
        check_len(op, path, bytes.len() as u64)?;
        let meta = TitleMeta::of_body(bytes);
        let now = self.mtime();
        let mut c = self.client(op, path)?;
        let args: [&(dyn postgres::types::ToSql + Sync); 6] =
            [&k, &body, &now, &meta.title, &meta.source, &meta.updated_at];
        let q = &self.inner.q;
        let written = match expected {
            ExpectedSize::Any => c.client().execute(&q.upsert, &args).map_err(db(op, path))?,
            ExpectedSize::Missing => c.client().execute(&q.insert_if_missing, &args).map_err(db(op, path))?,
            ExpectedSize::Bytes(n) | ExpectedSize::Unchanged { size: n, .. } => match i64::try_from(n) {
                Ok(n) => {
                    let mut with_size = args.to_vec();
                    with_size.push(&n);
                    c.client().execute(&q.update_if_size, &with_size).map_err(db(op, path))?
                }
                Err(_) => 0,
            },
        };
        if written == 0 {
            if op == Op::WriteNew {
                return Err(StoreError::AlreadyExists { path: path.to_path_buf() });
            }
            return Err(self.conflict(&mut c, op, path, &k, expected));
        }
        Ok(())
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

fn check_len(op: Op, path: &Path, size: u64) -> Result<(), StoreError> {
    if size > MAX_CONTENT_BYTES {
        return Err(ServerError::TooLarge { size, limit: MAX_CONTENT_BYTES }.at(op, path));
    }
    Ok(())
}

pub(crate) fn meta_at(row: &postgres::Row, at: usize) -> Result<TitleMeta, postgres::Error> {
    Ok(TitleMeta { title: row.try_get(at)?, source: row.try_get(at + 1)?, updated_at: row.try_get(at + 2)? })
}

fn clamp_i32(n: u64) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

impl Storage for PostgresStorage {
    session_store::keyed_storage_methods!();
    base_storage_methods!();

    fn append(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        let op = Op::Append;
        let k = ServerError::file_key(op, path)?;
        self.inner.base.writable(op, path)?;
        let body = text(op, path, bytes)?;
        check_len(op, path, bytes.len() as u64)?;
        let now = self.mtime();
        let mut c = self.client(op, path)?;
        c.client().execute(&self.inner.q.append, &[&k, &body, &now]).map_err(db(op, path))?;
        Ok(())
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<(), StoreError> {
        let op = Op::Truncate;
        let k = ServerError::file_key(op, path)?;
        self.inner.base.writable(op, path)?;
        let now = self.mtime();
        let mut c = self.client(op, path)?;
        let mut tx = c.client().transaction().map_err(db(op, path))?;
        let row = tx.query_opt(&self.inner.q.size_for_update, &[&k]).map_err(db(op, path))?;
        let row = row.ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })?;
        let size: i64 = row.try_get(0).map_err(db(op, path))?;
        let size = size.max(0) as u64;
        if len > size {
            let reason = format!("extending {size} bytes to {len} would add NUL bytes");
            return Err(ServerError::InvalidContent { reason }.at(op, path));
        }
        if len == size {
            tx.execute(&self.inner.q.touch, &[&k, &now]).map_err(db(op, path))?;
        } else {
            let n = clamp_i32(len);
            tx.execute(&self.inner.q.cut, &[&k, &n, &now]).map_err(db(op, path))?;
        }
        tx.commit().map_err(db(op, path))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        let op = Op::Rename;
        let src = ServerError::file_key(op, from)?;
        let dst = ServerError::file_key(op, to)?;
        self.inner.base.writable(op, from)?;
        let now = self.mtime();
        let mut c = self.client(op, from)?;
        if src == dst {
            return match c.client().query_opt(&self.inner.q.exists, &[&src]).map_err(db(op, from))? {
                Some(_) => Ok(()),
                None => Err(StoreError::NotFound { path: from.to_path_buf() }),
            };
        }
        let mut tx = c.client().transaction().map_err(db(op, from))?;
        tx.execute(&self.inner.q.delete, &[&dst]).map_err(db(op, to))?;
        let moved = tx.execute(&self.inner.q.rename, &[&dst, &now, &src]).map_err(db(op, from))?;
        if moved == 0 {
            return Err(StoreError::NotFound { path: from.to_path_buf() });
        }
        tx.commit().map_err(db(op, from))
    }

    fn unlink(&self, path: &Path) -> Result<(), StoreError> {
        let op = Op::Unlink;
        let k = ServerError::file_key(op, path)?;
        self.inner.base.writable(op, path)?;
        let mut c = self.client(op, path)?;
        match c.client().execute(&self.inner.q.delete, &[&k]).map_err(db(op, path))? {
            0 => Err(StoreError::NotFound { path: path.to_path_buf() }),
            _ => Ok(()),
        }
    }

    fn delete_with_artifacts(&self, path: &Path) -> Result<(), StoreError> {
        let op = Op::Unlink;
        let k = ServerError::file_key(op, path)?;
        self.inner.base.writable(op, path)?;
        let artifacts =
            session_store::artifacts_dir(path).map(|d| ServerError::dir_prefix(Op::RemoveDir, &d)).transpose()?;
        let mut c = self.client(op, path)?;
        let mut tx = c.client().transaction().map_err(db(op, path))?;
        tx.execute(&self.inner.q.delete, &[&k]).map_err(db(op, path))?;
        if let Some(prefix) = &artifacts {
            tx.execute(&self.inner.q.delete_prefix, &[prefix]).map_err(db(Op::RemoveDir, path))?;
        }
        // `<name>.<anything>.bak` siblings: keys that start with `<path>.`, then filtered.
        let rows = tx.query(&self.inner.q.with_prefix, &[&format!("{k}.")]).map_err(db(op, path))?;
        let candidates =
            rows.iter().map(|r| r.try_get::<_, String>(0)).collect::<Result<Vec<_>, _>>().map_err(db(op, path))?;
        for candidate in backups(&k, candidates) {
            tx.execute(&self.inner.q.delete, &[&candidate]).map_err(db(op, path))?;
        }
        tx.commit().map_err(db(op, path))?;
        self.inner.base.forget_dirs(artifacts);
        Ok(())
    }

    fn open_writer(&self, path: &Path, durability: Durability) -> Result<Box<dyn AppendWriter>, StoreError> {
        let _ = durability; // every append is a committed statement
        let op = Op::Open;
        let k = ServerError::file_key(op, path)?;
        self.inner.base.writable(op, path)?;
        let now = self.mtime();
        let mut c = self.client(op, path)?;
        c.client().execute(&self.inner.q.touch_empty, &[&k, &now]).map_err(db(op, path))?;
        Ok(Box::new(AppendingWriter::new(self.clone(), path)))
    }

    fn lock(&self, path: &Path, wait: LockWait) -> Result<SessionLock, StoreError> {
        let k = ServerError::file_key(Op::Lock, path)?;
        self.inner.base.lock(path, wait, format!("{}:{k}", self.inner.table))
    }

    /// `LISTEN`s for the table's notifications (the crate docs' trigger; a table this
    /// storage did not create, [`PostgresOptions::create_table`] off, may lack it, and
    /// then no change is reported).
    fn watch(&self, path: &Path) -> Result<Option<Box<dyn session_store::Watch>>, StoreError> {
        self.inner.base.watch(path, &self.inner.table).map(Some)
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
