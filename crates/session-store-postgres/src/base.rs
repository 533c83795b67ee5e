//! What the two layouts share: the pool, the directories [`Storage::ensure_dir`] made,
//! the modification times, and the operations that need only "which files are there":
//! stat, listing, directory reads and the advisory session lock.
//!
//! [`Storage::ensure_dir`]: session_store::Storage::ensure_dir

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use session_store::clock::SystemClock;
use session_store::keyed::{Cause, LocalDirs, Mtimes, child_entries, children};
use session_store::{DirEntry, FileStat, LockWait, Op, SessionLock, StoreError};

use crate::error::{ServerError, db};
use crate::pool::{Pool, Pooled};

/// How long a waiting [`Storage::lock`](session_store::Storage::lock) sleeps between attempts.
const LOCK_POLL: Duration = Duration::from_millis(10);

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

/// The pool, the local directories and the clock of one storage, and its shared operations.
#[derive(Debug)]
pub(crate) struct Base {
    pool: Arc<Pool>,
    files: FileQueries,
    /// Directories made by `ensure_dir` that hold no key yet (omp's `ensureDirSync` is a
    /// no-op; ours is remembered by this storage only).
    pub(crate) dirs: LocalDirs,
    times: Mtimes,
    /// The table named in the error of a refused write, when opened read-only.
    read_only: Option<String>,
}

impl Base {
    /// `read_only` names the table when the storage was opened read-only.
    pub(crate) fn new(pool: Arc<Pool>, files: FileQueries, read_only: Option<String>) -> Base {
        Base { pool, files, dirs: LocalDirs::new(), times: Mtimes::new(Arc::new(SystemClock)), read_only }
    }

    /// Refuses `op` on `path` when the storage was opened read-only.
    pub(crate) fn writable(&self, op: Op, path: &Path) -> Result<(), StoreError> {
        match &self.read_only {
            Some(table) => Err(ServerError::ReadOnly { table: table.clone() }.at(op, path)),
            None => Ok(()),
        }
    }

    /// Returns whether the storage was opened read-only.
    pub(crate) fn is_read_only(&self) -> bool {
        self.read_only.is_some()
    }

    pub(crate) fn client(&self, op: Op, path: &Path) -> Result<Pooled, StoreError> {
        self.pool.get().map_err(db(op, path))
    }

    /// Watches the file `path` on `table`'s notification channel, on a connection of
    /// its own ([`crate::watch`]).
    pub(crate) fn watch(&self, path: &Path, table: &str) -> Result<Box<dyn session_store::Watch>, StoreError> {
        let op = Op::Stat;
        let key = ServerError::file_key(op, path)?;
        let client = self.pool.connect_unpooled().map_err(db(op, path))?;
        Ok(Box::new(crate::watch::PgWatch::start(client, table, key, path)?))
    }

    /// Returns a modification time, strictly increasing per storage.
    pub(crate) fn mtime(&self) -> i64 {
        self.times.next()
    }

    pub(crate) fn ensure_dir(&self, dir: &Path) -> Result<(), StoreError> {
        let op = Op::EnsureDir;
        let k = ServerError::key(op, dir)?;
        let mut c = self.client(op, dir)?;
        if c.client().query_opt(&self.files.stat, &[&k]).map_err(db(op, dir))?.is_some() {
            let err = std::io::Error::new(std::io::ErrorKind::AlreadyExists, "a file is in the way");
            return Err(StoreError::io_raw(op, dir, err));
        }
        self.dirs.remember(k, self.mtime());
        Ok(())
    }

    pub(crate) fn stat(&self, path: &Path) -> Result<Option<FileStat>, StoreError> {
        let op = Op::Stat;
        let k = ServerError::key(op, path)?;
        let prefix = ServerError::dir_prefix(op, path)?;
        let mut c = self.client(op, path)?;
        if let Some(row) = c.client().query_opt(&self.files.stat, &[&k]).map_err(db(op, path))? {
            let size: i64 = row.try_get(0).map_err(db(op, path))?;
            let mtime_ms: i64 = row.try_get(1).map_err(db(op, path))?;
            return Ok(Some(FileStat::new(size.max(0) as u64, mtime_ms, true)));
        }
        let newest: Option<i64> = c
            .client()
            .query_one(&self.files.newest_with_prefix, &[&prefix])
            .and_then(|r| r.try_get(0))
            .map_err(db(op, path))?;
        let mtime = newest.or_else(|| self.dirs.mtime(&k, &prefix));
        Ok(mtime.map(|mtime_ms| FileStat::new(0, mtime_ms, false)))
    }

    /// Returns the keys of every file whose key starts with `prefix`.
    pub(crate) fn keys_with_prefix(&self, op: Op, path: &Path, prefix: &str) -> Result<Vec<String>, StoreError> {
        let mut c = self.client(op, path)?;
        let rows = c.client().query(&self.files.with_prefix, &[&prefix]).map_err(db(op, path))?;
        rows.iter().map(|r| r.try_get::<_, String>(0)).collect::<Result<Vec<_>, _>>().map_err(db(op, path))
    }

    pub(crate) fn list(&self, dir: &Path) -> Result<Vec<String>, StoreError> {
        let op = Op::List;
        let prefix = ServerError::dir_prefix(op, dir)?;
        Ok(children(&prefix, self.keys_with_prefix(op, dir, &prefix)?))
    }

    /// [`Storage::list_stats`](session_store::Storage::list_stats) in one query.
    pub(crate) fn list_stats(&self, dir: &Path) -> Result<Vec<(String, FileStat)>, StoreError> {
        let op = Op::List;
        let prefix = ServerError::dir_prefix(op, dir)?;
        let mut c = self.client(op, dir)?;
        let rows = c.client().query(&self.files.stats_with_prefix, &[&prefix]).map_err(db(op, dir))?;
        let mut out = Vec::new();
        for r in rows {
            let key: String = r.try_get(0).map_err(db(op, dir))?;
            let size: i64 = r.try_get(1).map_err(db(op, dir))?;
            let mtime_ms: i64 = r.try_get(2).map_err(db(op, dir))?;
            // Only files directly in `dir`, dot-files left out, as `list` gives them.
            if let Some(name) = key.strip_prefix(&prefix)
                && !name.is_empty()
                && !name.contains('/')
                && !name.starts_with('.')
            {
                out.push((name.to_owned(), FileStat::new(size.max(0) as u64, mtime_ms, true)));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    pub(crate) fn read_dir(&self, dir: &Path) -> Result<Vec<DirEntry>, StoreError> {
        let op = Op::List;
        let prefix = ServerError::dir_prefix(op, dir)?;
        let keys = self.keys_with_prefix(op, dir, &prefix)?;
        Ok(child_entries(&prefix, keys, self.dirs.under(&prefix)))
    }

    pub(crate) fn remove_empty_dir(&self, dir: &Path) -> Result<(), StoreError> {
        let k = ServerError::key(Op::RemoveDir, dir)?;
        self.dirs.forget_if_empty(&k);
        Ok(())
    }

    /// Sets the title columns (title, source, time set) and the mtime of `path`, leaving
    /// the body alone; [`StoreError::NotFound`] when there is no such file.
    pub(crate) fn update_title(
        &self,
        path: &Path,
        (title, source, updated_at): (Option<&str>, Option<&str>, &str),
    ) -> Result<(), StoreError> {
        let op = Op::Overwrite;
        let k = ServerError::file_key(op, path)?;
        self.writable(op, path)?;
        let now = self.mtime();
        let mut c = self.client(op, path)?;
        let n =
            c.client().execute(&self.files.title, &[&k, &title, &source, &updated_at, &now]).map_err(db(op, path))?;
        if n == 0 {
            return Err(StoreError::NotFound { path: path.to_path_buf() });
        }
        Ok(())
    }

    /// Forgets the local directories of a deleted artifacts directory.
    pub(crate) fn forget_dirs(&self, artifacts: Option<String>) {
        if let Some(prefix) = artifacts {
            self.dirs.forget_under(&prefix);
        }
    }

    /// Takes a session-level `pg_advisory_lock` keyed by `lock_key` on a connection of its
    /// own, which stays out of the pool while the lock is held.
    pub(crate) fn lock(&self, path: &Path, wait: LockWait, lock_key: String) -> Result<SessionLock, StoreError> {
        let op = Op::Lock;
        let deadline = match wait {
            LockWait::NoWait => None,
            LockWait::Timeout(d) => Some(Instant::now() + d),
        };
        let mut c = self.client(op, path)?;
        loop {
            let row = c
                .client()
                .query_one("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", &[&lock_key])
                .map_err(db(op, path))?;
            if row.try_get::<_, bool>(0).map_err(db(op, path))? {
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
                match c.client().execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", &[&lock_key]) {
                    Ok(_) => Ok(()),
                    Err(e) => {
                        // The connection may still hold the lock: close it rather than reuse it.
                        c.discard();
                        Err(ServerError::Database(e).at(Op::Lock, &locked))
                    }
                }
            }),
        ))
    }
}

/// Writes, inside an `impl Storage for …` block of a layout whose `inner` holds a
/// [`Base`] as `base`, the methods the base answers: `ensure_dir`, `stat`, `list`,
/// `list_stats`, `read_dir` and `remove_empty_dir`.
macro_rules! base_storage_methods {
    () => {
        fn ensure_dir(&self, dir: &Path) -> Result<(), StoreError> {
            self.inner.base.ensure_dir(dir)
        }

        fn stat(&self, path: &Path) -> Result<Option<FileStat>, StoreError> {
            self.inner.base.stat(path)
        }

        fn list(&self, dir: &Path) -> Result<Vec<String>, StoreError> {
            self.inner.base.list(dir)
        }

        fn read_dir(&self, dir: &Path) -> Result<Vec<session_store::DirEntry>, StoreError> {
            self.inner.base.read_dir(dir)
        }

        fn list_stats(&self, dir: &Path) -> Result<Vec<(String, FileStat)>, StoreError> {
            self.inner.base.list_stats(dir)
        }

        fn remove_empty_dir(&self, dir: &Path) -> Result<(), StoreError> {
            self.inner.base.remove_empty_dir(dir)
        }
    };
}
pub(crate) use base_storage_methods;
