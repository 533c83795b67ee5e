//! What the last sync with one remote saw of each session: the sizes and modification
//! times of both copies and the hash of the local one, so that the next sync reads no
//! body whose sizes and times are the same. Kept at
//! `<state dir>/sync/<hash of the remote>.json`, a private file (0600, in a 0700
//! folder), written atomically. It only saves reads: a missing or damaged state file
//! makes the next sync compare every session's bytes, and a session noted without its
//! times (a file of version 1, which had none) is read once, nothing more.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use session_store::{BlobRef, FileStorage, Op, PrivateDir, Storage, StoreError};

/// The folder below the state folder that holds one file per remote.
const SYNC_DIR: &str = "sync";

/// The version of the state file written: 2 added `localMtime` and `remoteMtime`, 3
/// `remoteVersion`.
const VERSION: u64 = 3;

/// One session as the last sync left it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Seen {
    /// The local file.
    pub(super) local: PathBuf,
    /// Its size then.
    pub(super) local_size: u64,
    /// Its modification time then (milliseconds, as a listing gives it); `None` when
    /// not known (noted by a state file of version 1, or not learnt after our own
    /// write): the session is read at the next sync.
    pub(super) local_mtime: Option<i64>,
    /// The remote copy's size then.
    pub(super) remote_size: u64,
    /// The remote copy's modification time then, likewise.
    pub(super) remote_mtime: Option<i64>,
    /// The remote copy's version as a listing gave it ([`Storage::list_versions`]) before
    /// this machine read it, or, for a copy this sync wrote, as the write returned it
    /// (`Storage::write_atomic_versioned`) or a stat showed it right after; `None` when
    /// neither told (the session is read next time) or when noted by an older state file.
    pub(super) remote_version: Option<String>,
    /// The SHA-256 of the local bytes then.
    pub(super) sha256: String,
}

/// The state of one remote: each session by its remote path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct State {
    /// By remote path.
    pub(super) sessions: BTreeMap<PathBuf, Seen>,
}

/// Returns `url` without its secrets: the password of its user information, the values
/// of query parameters whose names speak of one (`password`, `secret`, `token`, `key`,
/// `credential`, `signature`, `auth`), and any fragment
/// (`postgres://me:secret@host/db` becomes `postgres://me@host/db`). The user information
/// ends at the last `@` before the query, so a password holding an unescaped `/` goes
/// too.
///
/// ```
/// use session::sync::redact_url;
/// assert_eq!(redact_url("postgres://me:secret@host/db"), "postgres://me@host/db");
/// assert_eq!(redact_url("postgres://me:se/cr@et@host/db"), "postgres://me@host/db");
/// assert_eq!(
///     redact_url("s3://b/p?endpoint=http://h:9000&secret_access_key=X#f"),
///     "s3://b/p?endpoint=http://h:9000&secret_access_key=***"
/// );
/// assert_eq!(redact_url("/srv/sync"), "/srv/sync");
/// ```
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    let (base, tail) = rest.split_at(end);
    let base = match base.rsplit_once('@') {
        Some((userinfo, after)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            format!("{user}@{after}")
        }
        None => base.to_owned(),
    };
    let query = tail.strip_prefix('?').map(|q| q.split_once('#').map_or(q, |(q, _)| q)).unwrap_or_default();
    if query.is_empty() {
        return format!("{scheme}://{base}");
    }
    let secret = |name: &str| {
        let name = name.to_ascii_lowercase();
        ["pass", "secret", "token", "key", "credential", "signature", "auth"].iter().any(|w| name.contains(w))
    };
    let params: Vec<String> = query
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some((k, _)) if secret(k) => format!("{k}=***"),
            _ => kv.to_owned(),
        })
        .collect();
    format!("{scheme}://{base}?{}", params.join("&"))
}

/// Returns the state file of the remote `url` (its password left out) with `prefix` in our
/// state folder `state_dir`.
pub fn state_file(state_dir: &Path, url: &str, prefix: &Path) -> PathBuf {
    state_dir.join(SYNC_DIR).join(file_name(url, prefix))
}

fn file_name(url: &str, prefix: &Path) -> String {
    let key = format!("{}\n{}", redact_url(url), prefix.to_string_lossy());
    format!("{}.json", BlobRef::for_bytes(key.as_bytes()).hash())
}

/// Reads the state of the remote; creates nothing. A missing or damaged file is an
/// empty state.
///
/// # Errors
///
/// The state folder exists but is not private ([`StoreError::NotPrivate`]) or cannot be
/// read.
pub(super) fn read(state_dir: &Path, url: &str, prefix: &Path) -> Result<State, StoreError> {
    let dir = state_dir.join(SYNC_DIR);
    if !FileStorage::new().exists(&dir)? {
        return Ok(State::default());
    }
    let dir = PrivateDir::open(&dir)?;
    let name = file_name(url, prefix);
    let Some(mut file) = dir.open_file(&name)? else { return Ok(State::default()) };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| StoreError::io_raw(Op::Read, &dir.path().join(&name), e))?;
    Ok(parse(&bytes).unwrap_or_default())
}

fn parse(bytes: &[u8]) -> Option<State> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let mut state = State::default();
    for (remote, s) in v.get("sessions")?.as_object()? {
        let seen = Seen {
            local: PathBuf::from(s.get("local")?.as_str()?),
            local_size: s.get("localSize")?.as_u64()?,
            // Absent in version 1: the session is read once, and noted with them.
            local_mtime: s.get("localMtime").and_then(Value::as_i64),
            remote_size: s.get("remoteSize")?.as_u64()?,
            remote_mtime: s.get("remoteMtime").and_then(Value::as_i64),
            remote_version: s.get("remoteVersion").and_then(Value::as_str).map(str::to_owned),
            sha256: s.get("sha256")?.as_str()?.to_owned(),
        };
        state.sessions.insert(PathBuf::from(remote), seen);
    }
    Some(state)
}

/// Writes the state of the remote atomically (0600, its folder 0700); the URL is kept
/// without its password. Returns the file written.
pub(super) fn write(state_dir: &Path, url: &str, prefix: &Path, state: &State) -> Result<PathBuf, StoreError> {
    let dir = PrivateDir::open(state_dir)?.subdir(SYNC_DIR)?;
    let mut sessions = Map::new();
    for (remote, s) in &state.sessions {
        sessions.insert(
            remote.to_string_lossy().into_owned(),
            json!({
                "local": s.local.to_string_lossy(),
                "localSize": s.local_size,
                "localMtime": s.local_mtime,
                "remoteSize": s.remote_size,
                "remoteMtime": s.remote_mtime,
                "remoteVersion": s.remote_version,
                "sha256": s.sha256,
            }),
        );
    }
    let value = json!({
        "version": VERSION,
        "remote": redact_url(url),
        "prefix": prefix.to_string_lossy(),
        "sessions": Value::Object(sessions),
    });
    let mut text = serde_json::to_vec_pretty(&value)
        .map_err(|e| StoreError::io_raw(Op::Write, dir.path(), std::io::Error::other(e)))?;
    text.push(b'\n');
    let name = file_name(url, prefix);
    dir.write_file_durable(&name, &mut |w| w.write_all(&text))?;
    Ok(dir.path().join(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_left_out() {
        assert_eq!(redact_url("redis://:pw@h:6379/0"), "redis://@h:6379/0");
        assert_eq!(redact_url("mysql://u@h/db"), "mysql://u@h/db");
        assert_eq!(redact_url("s3://bucket/p@x"), "s3://bucket/p@x");
        assert_eq!(file_name("postgres://u:a@h/d", Path::new("/p")), file_name("postgres://u:b@h/d", Path::new("/p")));
    }

    #[test]
    fn a_version_1_file_loads_without_times() {
        let v1 = br#"{"version":1,"sessions":{"/r":{"local":"/l","localSize":1,"remoteSize":2,"sha256":"x"}}}"#;
        let state = parse(v1).expect("a version 1 file loads");
        let seen = &state.sessions[Path::new("/r")];
        assert_eq!((seen.local_size, seen.local_mtime, seen.remote_size, seen.remote_mtime), (1, None, 2, None));
        let v2 = br#"{"version":2,"sessions":{"/r":{"local":"/l","localSize":1,"localMtime":5,"remoteSize":2,"remoteMtime":6,"sha256":"x"}}}"#;
        let seen = &parse(v2).expect("a version 2 file loads").sessions[Path::new("/r")];
        assert_eq!((seen.local_mtime, seen.remote_mtime, seen.remote_version.as_deref()), (Some(5), Some(6), None));
        let v3 = br#"{"version":3,"sessions":{"/r":{"local":"/l","localSize":1,"localMtime":5,"remoteSize":2,"remoteMtime":6,"remoteVersion":"etag:x","sha256":"x"}}}"#;
        let seen = &parse(v3).expect("a version 3 file loads").sessions[Path::new("/r")];
        assert_eq!(seen.remote_version.as_deref(), Some("etag:x"));
    }

    #[test]
    fn damaged_state_is_empty() {
        assert_eq!(parse(b"{"), None);
        assert_eq!(
            parse(br#"{"sessions":{"/r":{"local":"/l","localSize":1,"remoteSize":2,"sha256":"x"}}}"#)
                .map(|s| s.sessions.len()),
            Some(1)
        );
    }
}
