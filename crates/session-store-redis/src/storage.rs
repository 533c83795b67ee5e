//! [`RedisStorage`]: the [`Storage`](session_store::Storage) trait on omp's Redis keys.

use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use redis::{Connection, Script};
use session_store::keyed::{
    self, At, Body, Cas, Cause, Doomed, Keeps, KeyedBackend, KeyedState, Put, Row, TitleMeta, Windows, poll_lock,
};
use session_store::{LockWait, Op, SessionLock, StoreError, Watch};

use crate::error::{ConnectError, LIMIT, MAX_CONTENT_BYTES, ServerError, rd, server};
use crate::scripts;

/// The key prefix omp uses unless told otherwise.
pub const DEFAULT_PREFIX: &str = "omp:sessions:";

/// How long a lock key lives without renewal; its holder renews it every third of that.
const LOCK_TTL: Duration = Duration::from_secs(30);

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
    /// Any bytes (Redis strings are binary), at most [`MAX_CONTENT_BYTES`]; always
    /// writable.
    state: KeyedState,
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
            state: KeyedState::new(Keeps::Bytes, MAX_CONTENT_BYTES, LIMIT),
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
        keyed::update_title(self, path, title, source, updated_at)
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

    fn conn(&self, at: At<'_>) -> Result<Conn, StoreError> {
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
        let conn = self.inner.client.get_connection().map_err(rd(at))?;
        Ok(Conn { conn: Some(conn), inner: self.inner.clone() })
    }

    /// Returns the paths of every body under the key prefix `prefix` (a `SCAN`, as omp's
    /// index load does).
    fn paths_under(&self, c: &mut Conn, at: At<'_>, prefix: &str) -> Result<Vec<String>, StoreError> {
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
                .map_err(rd(at))?;
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

    /// The append script: `expected` as [`expected_arg`] makes it.
    fn append_script(&self, at: At<'_>, k: &str, body: Body<'_>, now: i64, expected: &str) -> Result<Cas, StoreError> {
        let mut c = self.conn(at)?;
        let (written, size): (i64, i64) = self
            .inner
            .scripts
            .append
            .key(self.body(k))
            .key(self.meta())
            .arg(k)
            .arg(body.as_bytes())
            .arg(now)
            .arg(expected)
            .invoke(c.get())
            .map_err(|e| {
                if redis_too_large(&e) {
                    at.wrap(ServerError::TooLarge { size: 0, limit: MAX_CONTENT_BYTES, what: LIMIT })
                } else {
                    at.wrap(server(e))
                }
            })?;
        Ok(cas(written, size))
    }

    /// Returns an invocation of `script` on the file `k`: KEYS body, meta, title; ARGV[1] the path.
    fn on_file<'a>(&self, script: &'a Script, k: &str) -> redis::ScriptInvocation<'a> {
        let mut inv = script.prepare_invoke();
        inv.key(self.body(k)).key(self.meta()).key(self.titles()).arg(k);
        inv
    }

    fn delete_keys(&self, c: &mut Conn, at: At<'_>, keys: &[String]) -> Result<(), StoreError> {
        if keys.is_empty() {
            return Ok(());
        }
        let bodies: Vec<String> = keys.iter().map(|k| self.body(k)).collect();
        let mut pipe = redis::pipe();
        pipe.atomic().del(&bodies).ignore().hdel(self.meta(), keys).ignore().hdel(self.titles(), keys).ignore();
        for k in keys {
            pipe.publish(self.changes(), format!("{k}:")).ignore();
        }
        pipe.query::<()>(c.get()).map_err(rd(at))
    }
}

/// The reply of the slices script: size, head, tail, first 256 bytes, title JSON, mtime.
type SliceReply = (u64, Vec<u8>, Vec<u8>, Vec<u8>, String, String);

fn redis_too_large(e: &redis::RedisError) -> bool {
    e.to_string().contains("exceeds maximum allowed size")
}

/// The expected size as the scripts take it: empty for none, `-1` for no file.
fn expected_arg(how: Put) -> String {
    match how {
        Put::Upsert => String::new(),
        Put::Create => "-1".to_owned(),
        Put::IfSize(n) => n.to_string(),
    }
}

/// What a script that replies `{written, size}` did (`size` -1: no file).
fn cas(written: i64, size: i64) -> Cas {
    if written == 0 { Cas::RefusedAt(u64::try_from(size).ok()) } else { Cas::Done }
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

impl KeyedBackend for RedisStorage {
    type Driver = redis::RedisError;

    fn state(&self) -> &KeyedState {
        &self.inner.state
    }

    /// One atomic pipeline: `EXISTS`, `STRLEN` and the mtime.
    fn stat_key(&self, at: At<'_>, k: &str) -> Result<Option<(u64, i64)>, StoreError> {
        let mut c = self.conn(at)?;
        let (there, size, mtime): (bool, u64, Option<String>) = redis::pipe()
            .atomic()
            .exists(self.body(k))
            .strlen(self.body(k))
            .hget(self.meta(), k)
            .query(c.get())
            .map_err(rd(at))?;
        Ok(there.then(|| (size, mtime_of(mtime, self.inner.state.times().now()))))
    }

    /// A `SCAN` for the bodies, then one `HMGET` of their mtimes.
    fn newest_under(&self, at: At<'_>, prefix: &str) -> Result<Option<i64>, StoreError> {
        let mut c = self.conn(at)?;
        let inside = self.paths_under(&mut c, at, prefix)?;
        if inside.is_empty() {
            return Ok(None);
        }
        let times: Vec<Option<String>> =
            redis::cmd("HMGET").arg(self.meta()).arg(&inside).query(c.get()).map_err(rd(at))?;
        let now = self.inner.state.times().now();
        Ok(times.into_iter().map(|t| mtime_of(t, now)).max())
    }

    fn keys_under(&self, at: At<'_>, prefix: &str) -> Result<Vec<String>, StoreError> {
        let mut c = self.conn(at)?;
        self.paths_under(&mut c, at, prefix)
    }

    /// One atomic pipeline: the body, the title metadata and the mtime.
    fn read_row(&self, at: At<'_>, k: &str) -> Result<Option<Row>, StoreError> {
        let mut c = self.conn(at)?;
        let (body, title, mtime): (Option<Vec<u8>>, Option<String>, Option<String>) = redis::pipe()
            .atomic()
            .get(self.body(k))
            .hget(self.titles(), k)
            .hget(self.meta(), k)
            .query(c.get())
            .map_err(rd(at))?;
        Ok(body.map(|content| Row {
            content,
            meta: title.map(|t| TitleMeta::from_json(&t)).unwrap_or_default(),
            mtime_ms: mtime_of(mtime, self.inner.state.times().now()),
        }))
    }

    /// One script call.
    fn read_windows(&self, at: At<'_>, k: &str, prefix: u64, suffix: u64) -> Result<Option<Windows>, StoreError> {
        let mut c = self.conn(at)?;
        let got: Option<SliceReply> = self
            .on_file(&self.inner.scripts.slices, k)
            .arg(prefix.min(MAX_CONTENT_BYTES * 4))
            .arg(suffix.min(MAX_CONTENT_BYTES * 4))
            .invoke(c.get())
            .map_err(rd(at))?;
        Ok(got.map(|(size, head, tail, first, title, mtime)| {
            let mtime = (!mtime.is_empty()).then_some(mtime);
            Windows {
                head,
                tail,
                size,
                meta: if title.is_empty() { TitleMeta::default() } else { TitleMeta::from_json(&title) },
                first: (!title.is_empty()).then_some(first),
                mtime_ms: mtime_of(mtime, self.inner.state.times().now()),
            }
        }))
    }

    /// One script: the size check, the body, the mtime and the title metadata.
    fn put(
        &self,
        at: At<'_>,
        k: &str,
        body: Body<'_>,
        meta: &TitleMeta,
        now: i64,
        how: Put,
    ) -> Result<Cas, StoreError> {
        let mut c = self.conn(at)?;
        let (written, size): (i64, i64) = self
            .on_file(&self.inner.scripts.write_full, k)
            .arg(body.as_bytes())
            .arg(now)
            .arg(meta.to_json().unwrap_or_default())
            .arg(expected_arg(how))
            .invoke(c.get())
            .map_err(rd(at))?;
        Ok(cas(written, size))
    }

    fn append_key(&self, at: At<'_>, k: &str, body: Body<'_>, now: i64) -> Result<(), StoreError> {
        self.append_script(at, k, body, now, &expected_arg(Put::Upsert)).map(drop)
    }

    fn append_at(&self, at: At<'_>, k: &str, body: Body<'_>, now: i64, size: u64) -> Result<Cas, StoreError> {
        self.append_script(at, k, body, now, &expected_arg(Put::IfSize(size)))
    }

    /// One script (`SETRANGE` of zeros to extend, `GETRANGE` and `SET` to cut).
    fn truncate_key(&self, at: At<'_>, k: &str, len: u64, now: i64) -> Result<bool, StoreError> {
        self.inner.state.check_len::<redis::RedisError>(at, len)?;
        let mut c = self.conn(at)?;
        let done: i64 =
            self.on_file(&self.inner.scripts.truncate, k).arg(len).arg(now).invoke(c.get()).map_err(rd(at))?;
        Ok(done != 0)
    }

    fn rename_key(&self, at: At<'_>, from: &str, to: &str, now: i64) -> Result<bool, StoreError> {
        let mut c = self.conn(at)?;
        let moved: i64 = self
            .inner
            .scripts
            .rename
            .key(self.body(from))
            .key(self.body(to))
            .key(self.meta())
            .key(self.titles())
            .arg(from)
            .arg(to)
            .arg(now)
            .invoke(c.get())
            .map_err(rd(at))?;
        Ok(moved != 0)
    }

    fn delete_key(&self, at: At<'_>, k: &str) -> Result<bool, StoreError> {
        let mut c = self.conn(at)?;
        let (gone, _, _): (i64, i64, i64) = redis::pipe()
            .atomic()
            .del(self.body(k))
            .hdel(self.meta(), k)
            .hdel(self.titles(), k)
            .publish(self.changes(), format!("{k}:"))
            .ignore()
            .query(c.get())
            .map_err(rd(at))?;
        Ok(gone != 0)
    }

    /// Three atomic pipelines: the file, what its artifacts directory holds, its backups.
    fn delete_doomed(&self, at: At<'_>, doomed: Doomed<'_>) -> Result<(), StoreError> {
        let mut c = self.conn(at)?;
        self.delete_keys(&mut c, at, &[doomed.key.to_owned()])?;
        if let Some(prefix) = doomed.artifacts {
            let gone = At::new(Op::RemoveDir, at.path);
            let inside = self.paths_under(&mut c, gone, prefix)?;
            self.delete_keys(&mut c, gone, &inside)?;
        }
        self.delete_keys(&mut c, at, doomed.backups)
    }

    fn touch_empty(&self, at: At<'_>, k: &str, now: i64) -> Result<(), StoreError> {
        let mut c = self.conn(at)?;
        let _: i64 = self
            .inner
            .scripts
            .ensure
            .key(self.body(k))
            .key(self.meta())
            .arg(k)
            .arg(now)
            .invoke(c.get())
            .map_err(rd(at))?;
        Ok(())
    }

    fn set_title(&self, at: At<'_>, k: &str, meta: &TitleMeta, now: i64) -> Result<bool, StoreError> {
        let json = meta.to_json().unwrap_or_default();
        let mut c = self.conn(at)?;
        let done: i64 =
            self.on_file(&self.inner.scripts.title, k).arg(json).arg(now).invoke(c.get()).map_err(rd(at))?;
        Ok(done != 0)
    }

    /// `SET <prefix>lock:<path> <token> NX PX 30000`, renewed every 10 s by a keeper
    /// thread on the lock's own connection; a holder that dies stops renewing and the key
    /// expires. The release deletes the key only while it still holds this token.
    fn lock_key(&self, at: At<'_>, k: &str, wait: LockWait) -> Result<SessionLock, StoreError> {
        let lock_key = format!("{}lock:{k}", self.inner.prefix);
        let token = format!("{:016x}{:016x}", rand::rng().next_u64(), rand::rng().next_u64());
        let ttl_ms = u64::try_from(LOCK_TTL.as_millis()).unwrap_or(u64::MAX);
        let mut c = self.conn(at)?;
        poll_lock(at.path, wait, || {
            let got: Option<String> = redis::cmd("SET")
                .arg(&lock_key)
                .arg(&token)
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms)
                .query(c.get())
                .map_err(rd(at))?;
            Ok(got.is_some())
        })?;
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
        let locked = at.path.to_path_buf();
        Ok(SessionLock::new(
            at.path,
            Box::new(move || {
                let at = At::new(Op::Lock, &locked);
                drop(stop);
                let mut c = keeper.join().map_err(|_| {
                    StoreError::io_raw(at.op, at.path, std::io::Error::other("the lock keeper thread panicked"))
                })?;
                let released: redis::RedisResult<i64> = scripts.lock_release.key(&lock_key).arg(&token).invoke(c.get());
                released.map(drop).map_err(rd(at))
            }),
        ))
    }

    /// Subscribes to `<prefix>changes` (see the crate docs): writes through this crate
    /// are heard, omp's own are not.
    fn watch_key(&self, at: At<'_>, k: &str) -> Result<Option<Box<dyn Watch>>, StoreError> {
        let watch = crate::watch::RedisWatch::start(&self.inner.client, self.changes(), k.to_owned(), at.path)?;
        Ok(Some(Box::new(watch)))
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
