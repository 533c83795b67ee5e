//! [`RedisStorage`]: the [`Storage`] trait on omp's Redis keys.

use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use redis::{Commands, Connection, Script};
use session_store::clock::SystemClock;
use session_store::keyed::{
    AppendingWriter, Cause, LocalDirs, Mtimes, TitleMeta, backups, child_entries, children, lay_over,
};
use session_store::{
    AppendWriter, DirEntry, Durability, ExpectedSize, FileStat, LockWait, Op, SessionLock, Storage, StoreError,
};

use crate::error::{ConnectError, MAX_CONTENT_BYTES, ServerError, rd};
use crate::scripts;

/// The key prefix omp uses unless told otherwise.
pub const DEFAULT_PREFIX: &str = "omp:sessions:";

/// How long a lock key lives without renewal; its holder renews it every third of that.
const LOCK_TTL: Duration = Duration::from_secs(30);

/// How long a waiting [`Storage::lock`] sleeps between attempts.
const LOCK_POLL: Duration = Duration::from_millis(10);

/// A pooled connection idle this long is checked with a `PING` before it is reused.
const CHECK_AFTER: Duration = Duration::from_secs(2);

/// How many keys one `SCAN` step asks for (omp's `COUNT`).
const SCAN_COUNT: usize = 500;

struct Scripts {
    write_full: Script,
    append: Script,
    title: Script,
    ensure: Script,
    rename: Script,
    truncate: Script,
    slices: Script,
    lock_renew: Script,
    lock_release: Script,
}

struct Inner {
    client: redis::Client,
    idle: Mutex<Vec<(Connection, Instant)>>,
    max_idle: usize,
    prefix: String,
    scripts: Arc<Scripts>,
    /// Directories made by [`Storage::ensure_dir`] that hold no key yet (omp's
    /// `ensureDirSync` is a no-op; ours is remembered by this storage only).
    dirs: LocalDirs,
    times: Mtimes,
}

/// Session files in Redis under omp 18.3.4's keys: the body at `<prefix>file:<path>`, its
/// mtime in the `<prefix>meta` hash, its title metadata in the `<prefix>title` hash.
///
/// Directories are key prefixes. Clones share the connections. See the crate docs for the
/// scripts, the limits and the errors.
#[derive(Clone)]
pub struct RedisStorage {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RedisStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStorage").field("prefix", &self.inner.prefix).finish_non_exhaustive()
    }
}

/// A connection on loan, given back on drop unless it broke.
struct Conn {
    conn: Option<Connection>,
    inner: Arc<Inner>,
}

impl Conn {
    fn get(&mut self) -> &mut Connection {
        self.conn.as_mut().expect("a loaned connection is present until drop")
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take() {
            if !redis::ConnectionLike::is_open(&c) {
                return;
            }
            let mut idle = self.inner.idle.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() < self.inner.max_idle {
                idle.push((c, Instant::now()));
            }
        }
    }
}

impl RedisStorage {
    /// Connects to `url` (`redis://127.0.0.1:6379/0`) with omp's default prefix
    /// `omp:sessions:`.
    pub fn connect(url: &str) -> Result<RedisStorage, ConnectError> {
        RedisStorage::connect_with_prefix(url, DEFAULT_PREFIX)
    }

    /// Connects to `url` with the key prefix `prefix` (any string; omp's default is
    /// [`DEFAULT_PREFIX`]).
    pub fn connect_with_prefix(url: &str, prefix: &str) -> Result<RedisStorage, ConnectError> {
        let client = redis::Client::open(url).map_err(ConnectError::BadUrl)?;
        let conn = client.get_connection().map_err(ConnectError::Connect)?;
        let scripts = Scripts {
            write_full: Script::new(scripts::WRITE_FULL),
            append: Script::new(scripts::APPEND),
            title: Script::new(scripts::TITLE),
            ensure: Script::new(scripts::ENSURE),
            rename: Script::new(scripts::MOVE),
            truncate: Script::new(scripts::TRUNCATE),
            slices: Script::new(scripts::SLICES),
            lock_renew: Script::new(scripts::LOCK_RENEW),
            lock_release: Script::new(scripts::LOCK_RELEASE),
        };
        let inner = Inner {
            client,
            idle: Mutex::new(vec![(conn, Instant::now())]),
            max_idle: 8,
            prefix: prefix.to_owned(),
            scripts: Arc::new(scripts),
            dirs: LocalDirs::new(),
            times: Mtimes::new(Arc::new(SystemClock)),
        };
        Ok(RedisStorage { inner: Arc::new(inner) })
    }

    /// Returns the key prefix.
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// Returns the key of the body of `path`: `<prefix>file:<path>`.
    pub fn body_key(&self, path: &Path) -> Result<String, StoreError> {
        Ok(self.body(&ServerError::file_key(Op::Read, path)?))
    }

    /// Sets the title metadata of `path` and its mtime, leaving the body alone (omp's
    /// `updateSessionTitle`); readers see the title laid over the body's title slot.
    /// [`StoreError::NotFound`] when there is no such file.
    pub fn update_title(
        &self,
        path: &Path,
        title: Option<&str>,
        source: Option<&str>,
        updated_at: &str,
    ) -> Result<(), StoreError> {
        let op = Op::Overwrite;
        let k = ServerError::file_key(op, path)?;
        let meta = TitleMeta {
            title: title.map(str::to_owned),
            source: source.map(str::to_owned),
            updated_at: Some(updated_at.to_owned()),
        };
        let json = meta.to_json().unwrap_or_default();
        let now = self.mtime();
        let mut c = self.conn(op, path)?;
        let done: i64 =
            self.on_file(&self.inner.scripts.title, &k).arg(json).arg(now).invoke(c.get()).map_err(rd(op, path))?;
        if done == 0 {
            return Err(StoreError::NotFound { path: path.to_path_buf() });
        }
        Ok(())
    }

    /// Appends `bytes` only when the file is as `expected` says, in one script (omp appends
    /// blindly; this is the check-then-append a second writer needs). A mismatch is
    /// [`StoreError::Conflict`] and appends nothing; [`ExpectedSize::Missing`] creates the
    /// file with `bytes`.
    pub fn append_if_size(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        self.append_checked(path, bytes, expected)
    }

    fn body(&self, k: &str) -> String {
        format!("{}file:{k}", self.inner.prefix)
    }

    fn meta(&self) -> String {
        format!("{}meta", self.inner.prefix)
    }

    fn titles(&self) -> String {
        format!("{}title", self.inner.prefix)
    }

    /// The channel the scripts publish each write on (see [`crate::watch`]).
    fn changes(&self) -> String {
        format!("{}changes", self.inner.prefix)
    }

    fn conn(&self, op: Op, path: &Path) -> Result<Conn, StoreError> {
        loop {
            let idle = self.inner.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
            match idle {
                // Idle a while: a server restart or an idle timeout may have closed it.
                Some((mut c, since)) if since.elapsed() >= CHECK_AFTER => {
                    if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                        return Ok(Conn { conn: Some(c), inner: self.inner.clone() });
                    }
                }
                Some((c, _)) => return Ok(Conn { conn: Some(c), inner: self.inner.clone() }),
                None => break,
            }
        }
        let conn = self.inner.client.get_connection().map_err(rd(op, path))?;
        Ok(Conn { conn: Some(conn), inner: self.inner.clone() })
    }

    /// Returns a modification time: the clock, but strictly increasing per storage (as omp's
    /// indexed storage allocates them).
    fn mtime(&self) -> i64 {
        self.inner.times.next()
    }

    /// Returns the paths of every body under the key prefix `prefix` (a `SCAN`, as omp's
    /// index load does).
    fn paths_under(&self, c: &mut Conn, op: Op, path: &Path, prefix: &str) -> Result<Vec<String>, StoreError> {
        let body_prefix = self.body("");
        let pattern = format!("{}*", glob_escape(&format!("{body_prefix}{prefix}")));
        let mut out = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(SCAN_COUNT)
                .query(c.get())
                .map_err(rd(op, path))?;
            for k in keys {
                if let Ok(k) = String::from_utf8(k)
                    && let Some(p) = k.strip_prefix(&body_prefix)
                {
                    out.push(p.to_owned());
                }
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        Ok(out)
    }

    fn replace(&self, op: Op, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        let k = ServerError::file_key(op, path)?;
        check_len(op, path, bytes.len() as u64)?;
        let title = TitleMeta::of_body(bytes).to_json().unwrap_or_default();
        let now = self.mtime();
        let mut c = self.conn(op, path)?;
        let (written, size): (i64, i64) = self
            .on_file(&self.inner.scripts.write_full, &k)
            .arg(bytes)
            .arg(now)
            .arg(title)
            .arg(expected_arg(expected))
            .invoke(c.get())
            .map_err(rd(op, path))?;
        if written == 0 {
            if op == Op::WriteNew {
                return Err(StoreError::AlreadyExists { path: path.to_path_buf() });
            }
            return Err(conflict(path, expected, size));
        }
        Ok(())
    }

    fn append_checked(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        let op = Op::Append;
        let k = ServerError::file_key(op, path)?;
        let now = self.mtime();
        let mut c = self.conn(op, path)?;
        let (written, size): (i64, i64) = self
            .inner
            .scripts
            .append
            .key(self.body(&k))
            .key(self.meta())
            .arg(&k)
            .arg(bytes)
            .arg(now)
            .arg(expected_arg(expected))
            .invoke(c.get())
            .map_err(|e| {
                if redis_too_large(&e) {
                    ServerError::TooLarge { size: 0, limit: MAX_CONTENT_BYTES }.at(op, path)
                } else {
                    ServerError::Redis(e).at(op, path)
                }
            })?;
        if written == 0 {
            return Err(conflict(path, expected, size));
        }
        Ok(())
    }

    /// Reads the whole file and its stat in one atomic pipeline, the title laid over its slot.
    fn read_with_stat(&self, path: &Path) -> Result<(FileStat, Vec<u8>), StoreError> {
        let op = Op::Read;
        let k = ServerError::file_key(op, path)?;
        let mut c = self.conn(op, path)?;
        let (body, title, mtime): (Option<Vec<u8>>, Option<String>, Option<String>) = redis::pipe()
            .atomic()
            .get(self.body(&k))
            .hget(self.titles(), &k)
            .hget(self.meta(), &k)
            .query(c.get())
            .map_err(rd(op, path))?;
        let mut bytes = body.ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })?;
        if let Some(slot) = title.and_then(|t| TitleMeta::from_json(&t).overlay_for(&bytes)) {
            lay_over(&slot, &mut bytes, 0);
        }
        let stat = FileStat::new(bytes.len() as u64, mtime_of(mtime, self.inner.times.now()), true);
        Ok((stat, bytes))
    }

    /// Reads the head and tail windows and the stat in one script call.
    fn slices_with_stat(
        &self,
        path: &Path,
        prefix: u64,
        suffix: u64,
    ) -> Result<(FileStat, Vec<u8>, Vec<u8>), StoreError> {
        let op = Op::Read;
        let k = ServerError::file_key(op, path)?;
        let mut c = self.conn(op, path)?;
        let got: Option<SliceReply> = self
            .on_file(&self.inner.scripts.slices, &k)
            .arg(prefix.min(MAX_CONTENT_BYTES * 4))
            .arg(suffix.min(MAX_CONTENT_BYTES * 4))
            .invoke(c.get())
            .map_err(rd(op, path))?;
        let (size, mut head, mut tail, first, title, mtime) =
            got.ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })?;
        if !title.is_empty()
            && let Some(slot) = TitleMeta::from_json(&title).overlay_for(&first)
        {
            lay_over(&slot, &mut head, 0);
            let tail_at = size.saturating_sub(tail.len() as u64);
            lay_over(&slot, &mut tail, tail_at);
        }
        let mtime = (!mtime.is_empty()).then_some(mtime);
        Ok((FileStat::new(size, mtime_of(mtime, self.inner.times.now()), true), head, tail))
    }

    /// Returns an invocation of `script` on the file `k`: KEYS body, meta, title; ARGV[1] the path.
    fn on_file<'a>(&self, script: &'a Script, k: &str) -> redis::ScriptInvocation<'a> {
        let mut inv = script.prepare_invoke();
        inv.key(self.body(k)).key(self.meta()).key(self.titles()).arg(k);
        inv
    }

    fn delete_keys(&self, c: &mut Conn, op: Op, path: &Path, keys: &[String]) -> Result<(), StoreError> {
        if keys.is_empty() {
            return Ok(());
        }
        let bodies: Vec<String> = keys.iter().map(|k| self.body(k)).collect();
        let mut pipe = redis::pipe();
        pipe.atomic().del(&bodies).ignore().hdel(self.meta(), keys).ignore().hdel(self.titles(), keys).ignore();
        for k in keys {
            pipe.publish(self.changes(), format!("{k}:")).ignore();
        }
        pipe.query::<()>(c.get()).map_err(rd(op, path))
    }
}

/// The reply of the slices script: size, head, tail, first 256 bytes, title JSON, mtime.
type SliceReply = (u64, Vec<u8>, Vec<u8>, Vec<u8>, String, String);

fn redis_too_large(e: &redis::RedisError) -> bool {
    e.to_string().contains("exceeds maximum allowed size")
}

fn check_len(op: Op, path: &Path, size: u64) -> Result<(), StoreError> {
    if size > MAX_CONTENT_BYTES {
        return Err(ServerError::TooLarge { size, limit: MAX_CONTENT_BYTES }.at(op, path));
    }
    Ok(())
}

fn expected_arg(expected: ExpectedSize) -> String {
    match expected {
        ExpectedSize::Any => String::new(),
        ExpectedSize::Missing => "-1".to_owned(),
        ExpectedSize::Bytes(n) | ExpectedSize::Unchanged { size: n, .. } => n.to_string(),
    }
}

fn conflict(path: &Path, expected: ExpectedSize, size: i64) -> StoreError {
    let found = u64::try_from(size).ok();
    StoreError::Conflict { path: path.to_path_buf(), expected: expected.as_option().flatten(), found }
}

/// Escapes the glob characters of `SCAN MATCH`.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        if matches!(ch, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

fn mtime_of(raw: Option<String>, fallback: i64) -> i64 {
    raw.and_then(|s| s.parse().ok()).unwrap_or(fallback)
}

impl Storage for RedisStorage {
    session_store::keyed_storage_methods!();

    fn ensure_dir(&self, dir: &Path) -> Result<(), StoreError> {
        let op = Op::EnsureDir;
        let k = ServerError::key(op, dir)?;
        let mut c = self.conn(op, dir)?;
        let there: bool = c.get().exists(self.body(&k)).map_err(rd(op, dir))?;
        if there {
            let err = std::io::Error::new(std::io::ErrorKind::AlreadyExists, "a file is in the way");
            return Err(StoreError::io_raw(op, dir, err));
        }
        self.inner.dirs.remember(k, self.mtime());
        Ok(())
    }

    fn stat(&self, path: &Path) -> Result<Option<FileStat>, StoreError> {
        let op = Op::Stat;
        let k = ServerError::key(op, path)?;
        let prefix = ServerError::dir_prefix(op, path)?;
        let mut c = self.conn(op, path)?;
        let (there, size, mtime): (bool, u64, Option<String>) = redis::pipe()
            .atomic()
            .exists(self.body(&k))
            .strlen(self.body(&k))
            .hget(self.meta(), &k)
            .query(c.get())
            .map_err(rd(op, path))?;
        let now = self.inner.times.now();
        if there {
            return Ok(Some(FileStat::new(size, mtime_of(mtime, now), true)));
        }
        let inside = self.paths_under(&mut c, op, path, &prefix)?;
        if !inside.is_empty() {
            let times: Vec<Option<String>> =
                redis::cmd("HMGET").arg(self.meta()).arg(&inside).query(c.get()).map_err(rd(op, path))?;
            let newest = times.into_iter().map(|t| mtime_of(t, now)).max().unwrap_or(now);
            return Ok(Some(FileStat::new(0, newest, false)));
        }
        Ok(self.inner.dirs.mtime(&k, &prefix).map(|mtime_ms| FileStat::new(0, mtime_ms, false)))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>, StoreError> {
        let op = Op::List;
        let prefix = ServerError::dir_prefix(op, dir)?;
        let mut c = self.conn(op, dir)?;
        let paths = self.paths_under(&mut c, op, dir, &prefix)?;
        Ok(children(&prefix, paths))
    }

    fn read_dir(&self, dir: &Path) -> Result<Vec<DirEntry>, StoreError> {
        let op = Op::List;
        let prefix = ServerError::dir_prefix(op, dir)?;
        let mut c = self.conn(op, dir)?;
        let paths = self.paths_under(&mut c, op, dir, &prefix)?;
        Ok(child_entries(&prefix, paths, self.inner.dirs.under(&prefix)))
    }

    fn remove_empty_dir(&self, dir: &Path) -> Result<(), StoreError> {
        let k = ServerError::key(Op::RemoveDir, dir)?;
        self.inner.dirs.forget_if_empty(&k);
        Ok(())
    }

    fn append(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        self.append_checked(path, bytes, ExpectedSize::Any)
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<(), StoreError> {
        let op = Op::Truncate;
        let k = ServerError::file_key(op, path)?;
        check_len(op, path, len)?;
        let now = self.mtime();
        let mut c = self.conn(op, path)?;
        let done: i64 =
            self.on_file(&self.inner.scripts.truncate, &k).arg(len).arg(now).invoke(c.get()).map_err(rd(op, path))?;
        if done == 0 {
            return Err(StoreError::NotFound { path: path.to_path_buf() });
        }
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        let op = Op::Rename;
        let src = ServerError::file_key(op, from)?;
        let dst = ServerError::file_key(op, to)?;
        let now = self.mtime();
        let mut c = self.conn(op, from)?;
        if src == dst {
            let there: bool = c.get().exists(self.body(&src)).map_err(rd(op, from))?;
            return if there { Ok(()) } else { Err(StoreError::NotFound { path: from.to_path_buf() }) };
        }
        let moved: i64 = self
            .inner
            .scripts
            .rename
            .key(self.body(&src))
            .key(self.body(&dst))
            .key(self.meta())
            .key(self.titles())
            .arg(&src)
            .arg(&dst)
            .arg(now)
            .invoke(c.get())
            .map_err(rd(op, from))?;
        if moved == 0 {
            return Err(StoreError::NotFound { path: from.to_path_buf() });
        }
        Ok(())
    }

    fn unlink(&self, path: &Path) -> Result<(), StoreError> {
        let op = Op::Unlink;
        let k = ServerError::file_key(op, path)?;
        let mut c = self.conn(op, path)?;
        let (gone, _, _): (i64, i64, i64) = redis::pipe()
            .atomic()
            .del(self.body(&k))
            .hdel(self.meta(), &k)
            .hdel(self.titles(), &k)
            .publish(self.changes(), format!("{k}:"))
            .ignore()
            .query(c.get())
            .map_err(rd(op, path))?;
        if gone == 0 {
            return Err(StoreError::NotFound { path: path.to_path_buf() });
        }
        Ok(())
    }

    fn delete_with_artifacts(&self, path: &Path) -> Result<(), StoreError> {
        let op = Op::Unlink;
        let k = ServerError::file_key(op, path)?;
        let artifacts =
            session_store::artifacts_dir(path).map(|d| ServerError::dir_prefix(Op::RemoveDir, &d)).transpose()?;
        let mut c = self.conn(op, path)?;
        self.delete_keys(&mut c, op, path, std::slice::from_ref(&k))?;
        if let Some(prefix) = &artifacts {
            let inside = self.paths_under(&mut c, Op::RemoveDir, path, prefix)?;
            self.delete_keys(&mut c, Op::RemoveDir, path, &inside)?;
        }
        let candidates = self.paths_under(&mut c, op, path, &format!("{k}."))?;
        self.delete_keys(&mut c, op, path, &backups(&k, candidates))?;
        if let Some(prefix) = artifacts {
            self.inner.dirs.forget_under(&prefix);
        }
        Ok(())
    }

    fn open_writer(&self, path: &Path, durability: Durability) -> Result<Box<dyn AppendWriter>, StoreError> {
        let _ = durability; // the server decides (see the crate docs on persistence)
        let op = Op::Open;
        let k = ServerError::file_key(op, path)?;
        let now = self.mtime();
        let mut c = self.conn(op, path)?;
        let _: i64 = self
            .inner
            .scripts
            .ensure
            .key(self.body(&k))
            .key(self.meta())
            .arg(&k)
            .arg(now)
            .invoke(c.get())
            .map_err(rd(op, path))?;
        Ok(Box::new(AppendingWriter::new(self.clone(), path)))
    }

    fn lock(&self, path: &Path, wait: LockWait) -> Result<SessionLock, StoreError> {
        let op = Op::Lock;
        let k = ServerError::file_key(op, path)?;
        let lock_key = format!("{}lock:{k}", self.inner.prefix);
        let token = format!("{:016x}{:016x}", rand::rng().next_u64(), rand::rng().next_u64());
        let ttl_ms = u64::try_from(LOCK_TTL.as_millis()).unwrap_or(u64::MAX);
        let deadline = match wait {
            LockWait::NoWait => None,
            LockWait::Timeout(d) => Some(Instant::now() + d),
        };
        let mut c = self.conn(op, path)?;
        loop {
            let got: Option<String> = redis::cmd("SET")
                .arg(&lock_key)
                .arg(&token)
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms)
                .query(c.get())
                .map_err(rd(op, path))?;
            if got.is_some() {
                break;
            }
            if deadline.is_none_or(|d| Instant::now() >= d) {
                return Err(StoreError::Locked { path: path.to_path_buf() });
            }
            std::thread::sleep(LOCK_POLL);
        }
        // A keeper renews the key while the lock is held, on the lock's own connection; a
        // holder that dies stops renewing and the key expires after LOCK_TTL.
        let (stop, stopped) = mpsc::channel::<()>();
        let scripts = self.inner.scripts.clone();
        let keeper_key = lock_key.clone();
        let keeper_token = token.clone();
        let keeper = std::thread::spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(LOCK_TTL / 3) {
                let renewed: redis::RedisResult<i64> =
                    scripts.lock_renew.key(&keeper_key).arg(&keeper_token).arg(ttl_ms).invoke(c.get());
                if !matches!(renewed, Ok(1)) {
                    break;
                }
            }
            c
        });
        let scripts = self.inner.scripts.clone();
        let locked = path.to_path_buf();
        Ok(SessionLock::new(
            path,
            Box::new(move || {
                drop(stop);
                let mut c = keeper.join().map_err(|_| {
                    StoreError::io_raw(Op::Lock, &locked, std::io::Error::other("the lock keeper thread panicked"))
                })?;
                let released: redis::RedisResult<i64> = scripts.lock_release.key(&lock_key).arg(&token).invoke(c.get());
                released.map(drop).map_err(rd(Op::Lock, &locked))
            }),
        ))
    }

    /// Subscribes to `<prefix>changes` (see the crate docs): writes through this crate
    /// are heard, omp's own are not.
    fn watch(&self, path: &Path) -> Result<Option<Box<dyn session_store::Watch>>, StoreError> {
        let key = ServerError::file_key(Op::Stat, path)?;
        Ok(Some(Box::new(crate::watch::RedisWatch::start(&self.inner.client, self.changes(), key, path)?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_are_escaped() {
        assert_eq!(glob_escape("a*b?[c]\\d"), "a\\*b\\?\\[c\\]\\\\d");
    }
}
