//! What the two layouts share: the pool, the storage's [`KeyedState`], and the primitives that need only the metadata of "which files are
//! there": a file's stat, the keys and stats under a prefix, the title columns and the
//! advisory session lock.

use std::sync::Arc;

use session_store::keyed::{At, KeyedState, TitleMeta, poll_lock};
use session_store::{LockWait, Op, SessionLock, StoreError, Watch};

use crate::error::db;
use crate::pool::{Pool, Pooled};

/// The statements of a layout the shared operations run, with its table names inlined.
#[derive(Debug)]
pub(crate) struct FileQueries {
    /// `SELECT size, mtime_ms … WHERE path = $1`: one row when the file exists.
    pub(crate) stat: String,
    /// `SELECT max(mtime_ms) … WHERE starts_with(path, $1)`.
    pub(crate) newest_with_prefix: String,
    /// `SELECT path … WHERE starts_with(path, $1)`.
    pub(crate) with_prefix: String,
    /// `SELECT path, size, mtime_ms … WHERE starts_with(path, $1)`.
    pub(crate) stats_with_prefix: String,
    /// `UPDATE … SET title = $2, title_source = $3, title_updated_at = $4, mtime_ms = $5 WHERE path = $1`.
    pub(crate) title: String,
}

/// Returns the columns of `table` (as the statements name it, so resolved through the
/// `search_path`), or `None` when there is no such table: a look at the catalog that
/// changes nothing.
pub(crate) fn columns_of(c: &mut Pooled, table: &str) -> Result<Option<Vec<String>>, postgres::Error> {
    let exists: bool = c.client().query_one("SELECT to_regclass($1::text) IS NOT NULL", &[&table])?.try_get(0)?;
    if !exists {
        return Ok(None);
    }
    let rows = c.client().query(
        "SELECT attname::text FROM pg_attribute WHERE attrelid = to_regclass($1::text) AND attnum > 0 \
         AND NOT attisdropped",
        &[&table],
    )?;
    Ok(Some(rows.iter().map(|r| r.try_get::<_, String>(0)).collect::<Result<_, _>>()?))
}

/// The pool and the [`KeyedState`] of one storage, and the
/// [`KeyedBackend`](session_store::keyed::KeyedBackend) primitives both layouts answer the
/// same way: the file's stat, the keys and stats under a prefix, the title columns and the
/// advisory lock.
#[derive(Debug)]
pub(crate) struct Base {
    pool: Arc<Pool>,
    files: FileQueries,
    pub(crate) state: KeyedState,
}

impl Base {
    pub(crate) fn new(pool: Arc<Pool>, files: FileQueries, state: KeyedState) -> Base {
        Base { pool, files, state }
    }

    pub(crate) fn client(&self, at: At<'_>) -> Result<Pooled, StoreError> {
        self.pool.get().map_err(db(at))
    }

    /// Watches the file `key` on `table`'s notification channel, on a connection of its
    /// own ([`crate::watch`]).
    pub(crate) fn watch(&self, at: At<'_>, key: &str, table: &str) -> Result<Box<dyn Watch>, StoreError> {
        let client = self.pool.connect_unpooled().map_err(db(at))?;
        Ok(Box::new(crate::watch::PgWatch::start(client, table, key.to_owned(), at.path)?))
    }

    pub(crate) fn stat_key(&self, at: At<'_>, k: &str) -> Result<Option<(u64, i64)>, StoreError> {
        let mut c = self.client(at)?;
        let Some(row) = c.client().query_opt(&self.files.stat, &[&k]).map_err(db(at))? else { return Ok(None) };
        let size: i64 = row.try_get(0).map_err(db(at))?;
        let mtime_ms: i64 = row.try_get(1).map_err(db(at))?;
        Ok(Some((size.max(0) as u64, mtime_ms)))
    }

    pub(crate) fn newest_under(&self, at: At<'_>, prefix: &str) -> Result<Option<i64>, StoreError> {
        let mut c = self.client(at)?;
        c.client().query_one(&self.files.newest_with_prefix, &[&prefix]).and_then(|r| r.try_get(0)).map_err(db(at))
    }

    pub(crate) fn keys_under(&self, at: At<'_>, prefix: &str) -> Result<Vec<String>, StoreError> {
        let mut c = self.client(at)?;
        let rows = c.client().query(&self.files.with_prefix, &[&prefix]).map_err(db(at))?;
        rows.iter().map(|r| r.try_get::<_, String>(0)).collect::<Result<Vec<_>, _>>().map_err(db(at))
    }

    pub(crate) fn stats_under(&self, at: At<'_>, prefix: &str) -> Result<Vec<(String, u64, i64)>, StoreError> {
        let mut c = self.client(at)?;
        let rows = c.client().query(&self.files.stats_with_prefix, &[&prefix]).map_err(db(at))?;
        let stat = |r: &postgres::Row| -> Result<_, postgres::Error> {
            Ok((r.try_get::<_, String>(0)?, r.try_get::<_, i64>(1)?.max(0) as u64, r.try_get::<_, i64>(2)?))
        };
        rows.iter().map(stat).collect::<Result<Vec<_>, _>>().map_err(db(at))
    }

    pub(crate) fn set_title(&self, at: At<'_>, k: &str, meta: &TitleMeta, now: i64) -> Result<bool, StoreError> {
        let mut c = self.client(at)?;
        let args: [&(dyn postgres::types::ToSql + Sync); 5] = [&k, &meta.title, &meta.source, &meta.updated_at, &now];
        Ok(c.client().execute(&self.files.title, &args).map_err(db(at))? > 0)
    }

    /// Takes a session-level `pg_advisory_lock` keyed by `lock_key` on a connection of its
    /// own, which stays out of the pool while the lock is held.
    pub(crate) fn lock(&self, at: At<'_>, wait: LockWait, lock_key: String) -> Result<SessionLock, StoreError> {
        let mut c = self.client(at)?;
        poll_lock(at.path, wait, || {
            let row = c
                .client()
                .query_one("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", &[&lock_key])
                .map_err(db(at))?;
            row.try_get::<_, bool>(0).map_err(db(at))
        })?;
        let locked = at.path.to_path_buf();
        Ok(SessionLock::new(
            at.path,
            Box::new(move || {
                match c.client().execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", &[&lock_key]) {
                    Ok(_) => Ok(()),
                    Err(e) => {
                        // The connection may still hold the lock: close it rather than reuse it.
                        c.discard();
                        Err(At::new(Op::Lock, &locked).wrap(crate::error::server(e)))
                    }
                }
            }),
        ))
    }
}
