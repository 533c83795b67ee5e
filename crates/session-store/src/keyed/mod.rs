//! Backends whose directories are key prefixes: the server storages (SQLite, MySQL,
//! PostgreSQL, Redis, S3) keep each file under a `/`-separated key and know a directory
//! only as the prefix its keys share.
//!
//! * [`key`], [`file_key`] and [`dir_prefix`] turn paths into keys, refusing `..`, NUL
//!   bytes, non-UTF-8 names and keys past [`MAX_KEY_BYTES`] with the backend's own
//!   [`Cause`] inside the [`StoreError`].
//! * [`children`] and [`child_entries`] answer [`Storage::list`] and
//!   [`Storage::read_dir`] from the keys below a prefix; [`backups`] picks a file's
//!   `<name>.<anything>.bak` siblings for [`Storage::delete_with_artifacts`].
//! * [`valid_table_name`], [`text_content`] and [`parse_change`] are the SQL storages'
//!   table-name rule, their text-column rule and the servers' change notifications.
//! * [`TitleMeta`] is omp's title metadata, kept beside a body and laid over its
//!   256-byte title slot on read ([`lay_over`]).
//! * [`LocalDirs`] remembers the empty directories [`Storage::ensure_dir`] made (a key
//!   store has none of its own), [`Mtimes`] hands out strictly increasing modification
//!   times, and [`AppendingWriter`] is an [`AppendWriter`] whose every append is one
//!   [`Storage::append`].
//! * [`KeyedBackend`] is what a driver implements: a few primitives in its server's
//!   language (a statement, a script). Every [`KeyedBackend`] is a [`Storage`], whose
//!   operations (one blanket implementation) hold what such a storage means.
//!
//! [`Storage`]: crate::Storage
//! [`Storage::list`]: crate::Storage::list
//! [`Storage::read_dir`]: crate::Storage::read_dir
//! [`Storage::ensure_dir`]: crate::Storage::ensure_dir
//! [`Storage::append`]: crate::Storage::append
//! [`Storage::delete_with_artifacts`]: crate::Storage::delete_with_artifacts

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use session_model::{SLOT_BYTES, TitleSlot};

use crate::clock::Clock;
use crate::{AppendWriter, DirEntry, EntryKind, FileStat, Op, Storage, StoreError, grow, is_backup_of};

mod backend;
pub use backend::{
    At, BackendError, Body, Cas, Cut, Doomed, Keeps, KeyedBackend, KeyedState, LOCK_POLL, Put, Row, Windows, cut_text,
    poll_lock, update_title,
};

/// The longest key accepted, in bytes: a PostgreSQL B-tree index entry must fit in a third
/// of a page (2,704 bytes), and every key-prefix backend keeps the same limit so that
/// sessions move between them.
pub const MAX_KEY_BYTES: usize = 2048;

/// A backend's typed failure cause, carried inside [`StoreError::Io`].
pub trait Cause: std::error::Error + Send + Sync + Sized + 'static {
    /// Returns the cause for a path that cannot be a key (`reason` says why).
    fn bad_path(reason: String) -> Self;

    /// Returns the [`io::ErrorKind`] the [`StoreError::Io`] reports for this cause.
    fn kind(&self) -> io::ErrorKind;

    /// Returns the key of `path` ([`key`] with this cause).
    fn key(op: Op, path: &Path) -> Result<String, StoreError> {
        key::<Self>(op, path)
    }

    /// Returns the key of a file ([`file_key`] with this cause).
    fn file_key(op: Op, path: &Path) -> Result<String, StoreError> {
        file_key::<Self>(op, path)
    }

    /// Returns the key prefix of a directory ([`dir_prefix`] with this cause).
    fn dir_prefix(op: Op, dir: &Path) -> Result<String, StoreError> {
        dir_prefix::<Self>(op, dir)
    }
}

/// Wraps `cause` as the [`StoreError`] of `op` on `path`, with the cause's kind.
pub fn wrap<C: Cause>(cause: C, op: Op, path: &Path) -> StoreError {
    let kind = cause.kind();
    StoreError::io_raw(op, path, io::Error::new(kind, cause))
}

/// Returns the cause of type `C` inside `err`, when there is one.
pub fn find<C: Cause>(err: &StoreError) -> Option<&C> {
    match err {
        StoreError::Io { source, .. } => source.get_ref()?.downcast_ref::<C>(),
        _ => None,
    }
}

/// omp 18.3.4's table of session files on SQL storages.
pub const OMP_TABLE: &str = "omp_session_files";

/// The options every SQL storage of omp's table takes (the SQLite and MySQL storages'
/// `…Options`): which table, and whether to create it.
#[derive(Clone, Debug)]
pub struct TableOptions {
    table: String,
    create_table: bool,
    read_only: bool,
}

impl Default for TableOptions {
    fn default() -> TableOptions {
        TableOptions { table: OMP_TABLE.to_owned(), create_table: true, read_only: false }
    }
}

impl TableOptions {
    /// Uses the table `table` instead of `omp_session_files` (omp's `table` option).
    pub fn table(mut self, table: &str) -> TableOptions {
        table.clone_into(&mut self.table);
        self
    }

    /// Whether to create the table (and add omp's title columns) when it is missing; on
    /// by default, as omp does unless told `createTable: false`.
    pub fn create_table(mut self, create: bool) -> TableOptions {
        self.create_table = create;
        self
    }

    /// Whether to open the table read-only (off by default), for a command that only
    /// reads or a dry run: nothing is created or altered, whatever
    /// [`TableOptions::create_table`] says; the storage refuses every write with its
    /// read-only error, reads a missing table as an empty store (no files, every read
    /// `NotFound`) and missing title columns (an older omp table) as unset.
    pub fn read_only(mut self, read_only: bool) -> TableOptions {
        self.read_only = read_only;
        self
    }

    /// Returns the table's name.
    pub fn table_name(&self) -> &str {
        &self.table
    }

    /// Returns whether the table is created when missing (never when read-only).
    pub fn creates_table(&self) -> bool {
        self.create_table && !self.read_only
    }

    /// Returns whether the table is opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }
}

/// Returns what the reads of a storage opened read-only name in `FROM` in place of
/// `table`: `table` itself when it has every column of `columns`; else a subquery, named
/// `table` too, that reads the columns it has and each missing one as its `NULL`
/// expression (omp's title columns on an older table); and when `present` is `None`
/// (no such table), a subquery of those `NULL`s that yields no row, `nothing` being the
/// dialect's clause for that (`WHERE false`, `FROM DUAL WHERE FALSE`).
///
/// `columns` pairs each column with its `NULL` expression in the dialect
/// (`NULL::text`, `CAST(NULL AS SIGNED)`). The statements stay the same, and nothing is
/// created or altered.
pub fn read_relation(table: &str, columns: &[(&str, &str)], present: Option<&[String]>, nothing: &str) -> String {
    let Some(present) = present else {
        let cols: Vec<String> = columns.iter().map(|(c, null)| format!("{null} AS {c}")).collect();
        return format!("(SELECT {} {nothing}) AS {table}", cols.join(", "));
    };
    let has = |c: &str| present.iter().any(|p| p.eq_ignore_ascii_case(c));
    if columns.iter().all(|(c, _)| has(c)) {
        return table.to_owned();
    }
    let cols: Vec<String> =
        columns.iter().map(|(c, null)| if has(c) { (*c).to_owned() } else { format!("{null} AS {c}") }).collect();
    format!("(SELECT {} FROM {table}) AS {table}", cols.join(", "))
}

/// Returns whether `name` is a table name the SQL storages accept:
/// `[A-Za-z_][A-Za-z0-9_]{0,62}` (it is written into their statements, so nothing else
/// is let through).
pub fn valid_table_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// Returns `bytes` as the content of a text column (PostgreSQL `text`, SQLite `TEXT`,
/// MySQL `utf8mb4`): UTF-8 without NUL bytes; else why not, for the backend's
/// "invalid content" error.
pub fn text_content(bytes: &[u8]) -> Result<&str, String> {
    let s = std::str::from_utf8(bytes).map_err(|e| format!("invalid UTF-8 at byte {}", e.valid_up_to()))?;
    match memchr_nul(s.as_bytes()) {
        Some(at) => Err(format!("NUL byte at byte {at}")),
        None => Ok(s),
    }
}

fn memchr_nul(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == 0)
}

/// Reads a change notification of a server storage's watch, `<path>:<size>` (a write
/// that left `size` bytes) or `<path>:` (the file is gone): the path and the size.
/// `None` for a payload of another shape. The path may hold `:`; the size follows the
/// last one.
pub fn parse_change(payload: &str) -> Option<(&str, Option<u64>)> {
    let (path, size) = payload.rsplit_once(':')?;
    if size.is_empty() {
        return Some((path, None));
    }
    Some((path, Some(size.parse().ok()?)))
}

/// Returns the key of `path`: its components joined by `/` (a leading `/` when absolute).
pub fn key<C: Cause>(op: Op, path: &Path) -> Result<String, StoreError> {
    let bad = |reason: &str| wrap(C::bad_path(reason.to_owned()), op, path);
    let mut key = String::new();
    for c in path.components() {
        match c {
            Component::RootDir => key.push('/'),
            Component::CurDir => {}
            Component::Normal(part) => {
                let part = part.to_str().ok_or_else(|| bad("not valid UTF-8"))?;
                if !key.is_empty() && !key.ends_with('/') {
                    key.push('/');
                }
                key.push_str(part);
            }
            Component::ParentDir => return Err(bad("`..` components are not allowed")),
            Component::Prefix(_) => return Err(bad("path prefixes are not allowed")),
        }
    }
    if key.contains('\0') {
        return Err(bad("NUL byte"));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(bad(&format!("{} bytes, more than {MAX_KEY_BYTES}", key.len())));
    }
    Ok(key)
}

/// Returns the key of a file: as [`key`], and it must name something below the root.
pub fn file_key<C: Cause>(op: Op, path: &Path) -> Result<String, StoreError> {
    let k = key::<C>(op, path)?;
    if k.is_empty() || k == "/" {
        return Err(StoreError::NotAFile { path: path.to_path_buf() });
    }
    Ok(k)
}

/// Returns the prefix every key inside the directory `dir` starts with (`a/b` → `a/b/`).
pub fn dir_prefix<C: Cause>(op: Op, dir: &Path) -> Result<String, StoreError> {
    let mut k = key::<C>(op, dir)?;
    if !k.is_empty() && !k.ends_with('/') {
        k.push('/');
    }
    Ok(k)
}

/// Returns the names of the direct children among `keys` under `prefix`, dot-files
/// skipped, sorted by bytes ([`Storage::list`]).
pub fn children(prefix: &str, keys: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut names: Vec<String> = keys
        .into_iter()
        .filter_map(|k| {
            let rest = k.strip_prefix(prefix)?;
            (!rest.is_empty() && !rest.contains('/') && !rest.starts_with('.')).then(|| rest.to_owned())
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Returns the entries directly under `prefix` ([`Storage::read_dir`]):
/// a key with nothing after its next `/` is a file, a key with more is inside a directory
/// (reported once), and `dirs` (keys of directories known otherwise, as [`LocalDirs`]
/// holds them) add directories of their own. Dot-files are included; sorted by name.
pub fn child_entries(
    prefix: &str,
    keys: impl IntoIterator<Item = String>,
    dirs: impl IntoIterator<Item = String>,
) -> Vec<DirEntry> {
    let mut files = BTreeSet::new();
    let mut subdirs = BTreeSet::new();
    for k in keys {
        let Some(rest) = k.strip_prefix(prefix) else { continue };
        match rest.split_once('/') {
            Some((dir, _)) if !dir.is_empty() => {
                subdirs.insert(dir.to_owned());
            }
            Some(_) => {}
            None if !rest.is_empty() => {
                files.insert(rest.to_owned());
            }
            None => {}
        }
    }
    for d in dirs {
        let Some(rest) = d.strip_prefix(prefix) else { continue };
        if let Some(name) = rest.split('/').next().filter(|n| !n.is_empty()) {
            subdirs.insert(name.to_owned());
        }
    }
    files.retain(|f| !subdirs.contains(f));
    let mut out: Vec<DirEntry> = files
        .into_iter()
        .map(|name| DirEntry { name, kind: EntryKind::File })
        .chain(subdirs.into_iter().map(|name| DirEntry { name, kind: EntryKind::Dir }))
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Returns the keys among `candidates` that are `<name>.<anything>.bak` siblings of the
/// file `k` (candidates are usually the keys that start with `<k>.`).
pub fn backups(k: &str, candidates: impl IntoIterator<Item = String>) -> Vec<String> {
    let (parent, name) = match k.rsplit_once('/') {
        Some((parent, name)) => (format!("{parent}/"), name),
        None => (String::new(), k),
    };
    candidates
        .into_iter()
        .filter(|cand| children(&parent, [cand.clone()]).first().is_some_and(|n| is_backup_of(name, n)))
        .collect()
}

/// omp's title metadata of a session: title, its source and when it was set, stored beside
/// the body (columns in SQL, a JSON hash value in Redis).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TitleMeta {
    /// The title.
    pub title: Option<String>,
    /// Who set it (`user`, `auto`, …).
    pub source: Option<String>,
    /// When it was set, an ISO 8601 time.
    pub updated_at: Option<String>,
}

impl TitleMeta {
    /// Returns the metadata omp stores for a body: the title slot it starts with, when the
    /// slot is exactly what [`TitleSlot::to_line`] writes (so laying it back over the body on
    /// read changes no byte); none otherwise.
    pub fn of_body(body: &[u8]) -> TitleMeta {
        let Some(line) = body.get(..SLOT_BYTES) else { return TitleMeta::default() };
        let Ok(text) = std::str::from_utf8(line) else { return TitleMeta::default() };
        let Some(slot) = text.strip_suffix('\n').and_then(TitleSlot::parse) else { return TitleMeta::default() };
        if slot.to_line().ok().as_deref() != Some(text) {
            return TitleMeta::default();
        }
        TitleMeta { title: Some(slot.title), source: slot.source, updated_at: Some(slot.updated_at) }
    }

    /// Returns whether no field is set.
    pub fn is_empty(&self) -> bool {
        self.title.is_none() && self.source.is_none() && self.updated_at.is_none()
    }

    /// Returns the slot line omp's indexed storage shows in place of a body's first 256
    /// bytes, when there is metadata and `first` (the body's first bytes) is a slot.
    pub fn overlay_for(&self, first: &[u8]) -> Option<Vec<u8>> {
        if self.is_empty() || first.len() < SLOT_BYTES {
            return None;
        }
        let text = std::str::from_utf8(&first[..SLOT_BYTES]).ok()?;
        TitleSlot::parse(text.strip_suffix('\n')?)?;
        let slot = TitleSlot {
            title: self.title.clone().unwrap_or_default(),
            source: self.source.clone(),
            updated_at: self.updated_at.clone().unwrap_or_default(),
        };
        let line = slot.to_line().ok()?;
        (line.len() == SLOT_BYTES).then(|| line.into_bytes())
    }

    /// Returns the JSON value omp's Redis storage keeps in its title hash:
    /// `{"title":…,"source":…,"updatedAt":…}`, absent fields left out; `None` when there is
    /// no metadata.
    pub fn to_json(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let mut m = serde_json::Map::new();
        if let Some(t) = &self.title {
            m.insert("title".into(), t.clone().into());
        }
        if let Some(s) = &self.source {
            m.insert("source".into(), s.clone().into());
        }
        m.insert("updatedAt".into(), self.updated_at.clone().unwrap_or_default().into());
        Some(serde_json::Value::Object(m).to_string())
    }

    /// Parses a value of [`TitleMeta::to_json`]; anything but an object gives no metadata.
    pub fn from_json(text: &str) -> TitleMeta {
        let Ok(serde_json::Value::Object(m)) = serde_json::from_str::<serde_json::Value>(text) else {
            return TitleMeta::default();
        };
        let field = |k: &str| m.get(k).and_then(|v| v.as_str()).map(str::to_owned);
        TitleMeta { title: field("title"), source: field("source"), updated_at: field("updatedAt") }
    }
}

/// Lays `slot` (the first [`SLOT_BYTES`] bytes of the body) over `window`, the bytes of the
/// body that start at `offset`.
pub fn lay_over(slot: &[u8], window: &mut [u8], offset: u64) {
    let Ok(offset) = usize::try_from(offset) else { return };
    if offset >= slot.len() {
        return;
    }
    let n = (slot.len() - offset).min(window.len());
    window[..n].copy_from_slice(&slot[offset..offset + n]);
}

/// The directories [`Storage::ensure_dir`] made that hold no
/// key yet, by key, with the time they were made. A key store has no directories, so these
/// are known to the storage value (and its clones) only.
#[derive(Debug, Default)]
pub struct LocalDirs {
    dirs: Mutex<BTreeMap<String, i64>>,
}

impl LocalDirs {
    /// Returns an empty set.
    pub fn new() -> LocalDirs {
        LocalDirs::default()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, i64>> {
        self.dirs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers the directory `k`, made at `now` (an earlier time is kept).
    pub fn remember(&self, k: String, now: i64) {
        self.lock().entry(k).or_insert(now);
    }

    /// Returns the time the directory `k` (whose keys start with `prefix`) was made, or the
    /// time of a remembered directory inside it; `None` when neither is remembered.
    pub fn mtime(&self, k: &str, prefix: &str) -> Option<i64> {
        let dirs = self.lock();
        dirs.get(k)
            .copied()
            .or_else(|| dirs.range(prefix.to_owned()..).next().filter(|(d, _)| d.starts_with(prefix)).map(|(_, m)| *m))
    }

    /// Returns the remembered directories whose keys start with `prefix`.
    pub fn under(&self, prefix: &str) -> Vec<String> {
        let dirs = self.lock();
        dirs.range(prefix.to_owned()..).take_while(|(d, _)| d.starts_with(prefix)).map(|(d, _)| d.clone()).collect()
    }

    /// Forgets the directory whose keys start with `prefix` and every directory inside it.
    pub fn forget_under(&self, prefix: &str) {
        let dir = prefix.trim_end_matches('/');
        self.lock().retain(|d, _| d != dir && !d.starts_with(prefix));
    }

    /// Forgets the directory `k` when no remembered directory is inside it.
    pub fn forget_if_empty(&self, k: &str) {
        let prefix = format!("{}/", k.trim_end_matches('/'));
        let mut dirs = self.lock();
        let occupied = dirs.range(prefix.clone()..).next().is_some_and(|(d, _)| d.starts_with(&prefix));
        if !occupied {
            dirs.remove(k);
        }
    }
}

/// Modification times from a clock, strictly increasing per storage (as omp's indexed
/// storage allocates them), so two writes in one millisecond stay ordered.
pub struct Mtimes {
    clock: Arc<dyn Clock>,
    last: Mutex<i64>,
}

impl Mtimes {
    /// Returns times from `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Mtimes {
        Mtimes { clock, last: Mutex::new(0) }
    }

    /// Returns the clock's time as it is, for reads that need no new time.
    pub fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Returns the next modification time: the clock's, or one more than the last.
    pub fn next(&self) -> i64 {
        let now = self.clock.now_ms();
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        *last = now.max(*last + 1);
        *last
    }
}

impl std::fmt::Debug for Mtimes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mtimes").finish_non_exhaustive()
    }
}

/// An [`AppendWriter`] whose every append is one [`Storage::append`]
/// on a storage value it holds: for backends whose appends are committed statements, so
/// every level of [`Durability`](crate::Durability) is as durable as the server makes it.
/// The first error is latched.
pub struct AppendingWriter<S> {
    storage: S,
    path: PathBuf,
    failed: Option<StoreError>,
}

impl<S: Storage> AppendingWriter<S> {
    /// Returns a writer appending to `path` through `storage`.
    pub fn new(storage: S, path: &Path) -> AppendingWriter<S> {
        AppendingWriter { storage, path: path.to_path_buf(), failed: None }
    }
}

impl<S: Storage> AppendWriter for AppendingWriter<S> {
    fn append(&mut self, line: &[u8]) -> Result<(), StoreError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if let Err(e) = self.storage.append(&self.path, line) {
            return Err(self.failed.get_or_insert(e).clone());
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn error(&self) -> Option<&StoreError> {
        self.failed.as_ref()
    }

    fn close(mut self: Box<Self>) -> Result<(), StoreError> {
        self.flush()
    }
}

/// Copies a whole read with its stat into a reused buffer, as
/// [`Storage::read_into`] returns it (a storage that reads a file with its stat in one
/// step, and is no [`KeyedBackend`]).
pub fn read_into_buffer(read: (FileStat, Vec<u8>), buf: &mut Vec<u8>) -> (FileStat, usize) {
    let (stat, bytes) = read;
    grow(buf, bytes.len()).copy_from_slice(&bytes);
    (stat, bytes.len())
}

/// Copies windows read with their stat into reused buffers, as
/// [`Storage::read_slices_into`] returns them.
pub fn slices_into_buffers(
    read: (FileStat, Vec<u8>, Vec<u8>),
    head: &mut Vec<u8>,
    tail: &mut Vec<u8>,
) -> (FileStat, usize, usize) {
    let (stat, h, t) = read;
    grow(head, h.len()).copy_from_slice(&h);
    grow(tail, t.len()).copy_from_slice(&t);
    (stat, h.len(), t.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_checks() {
        assert!(valid_table_name("omp_session_files") && valid_table_name("_x9"));
        assert!(!valid_table_name("1x") && !valid_table_name("a-b") && !valid_table_name(""));
        assert!(!valid_table_name(&"a".repeat(64)));
        assert_eq!(text_content(b"ok\n"), Ok("ok\n"));
        assert_eq!(text_content(b"a\0b"), Err("NUL byte at byte 1".to_owned()));
        assert_eq!(text_content(b"\xff"), Err("invalid UTF-8 at byte 0".to_owned()));
        assert_eq!(parse_change("a/b:c.jsonl:12"), Some(("a/b:c.jsonl", Some(12))));
        assert_eq!(parse_change("a.jsonl:"), Some(("a.jsonl", None)));
        assert_eq!(parse_change(":"), Some(("", None)));
        assert_eq!(parse_change("no size"), None);
        assert_eq!(parse_change("a:x"), None);
    }

    #[test]
    fn read_relations_stand_in_for_what_is_missing() {
        let cols = [("path", "NULL"), ("title", "NULL")];
        let all = ["PATH".to_owned(), "title".to_owned()];
        assert_eq!(read_relation("t", &cols, Some(&all), "WHERE 0"), "t");
        assert_eq!(read_relation("t", &cols, Some(&all[..1]), "WHERE 0"), "(SELECT path, NULL AS title FROM t) AS t");
        assert_eq!(read_relation("t", &cols, None, "WHERE 0"), "(SELECT NULL AS path, NULL AS title WHERE 0) AS t");
        let o = TableOptions::default().read_only(true);
        assert!(o.is_read_only() && !o.creates_table());
    }

    #[derive(Debug, thiserror::Error)]
    #[error("bad: {0}")]
    struct Bad(String);

    impl Cause for Bad {
        fn bad_path(reason: String) -> Bad {
            Bad(reason)
        }
        fn kind(&self) -> io::ErrorKind {
            io::ErrorKind::InvalidInput
        }
    }

    #[test]
    fn keys_are_normalized_paths() {
        assert_eq!(key::<Bad>(Op::Read, Path::new("/a//b/./c.jsonl")).ok(), Some("/a/b/c.jsonl".to_owned()));
        assert_eq!(key::<Bad>(Op::Read, Path::new("a/b")).ok(), Some("a/b".to_owned()));
        let err = key::<Bad>(Op::Read, Path::new("/a/../b")).err();
        assert!(err.as_ref().and_then(find::<Bad>).is_some());
        assert!(file_key::<Bad>(Op::Read, Path::new("/")).is_err());
        assert_eq!(dir_prefix::<Bad>(Op::List, Path::new("/")).ok(), Some("/".to_owned()));
        assert_eq!(dir_prefix::<Bad>(Op::List, Path::new("/a/b")).ok(), Some("/a/b/".to_owned()));
    }

    #[test]
    fn children_are_direct_visible_and_sorted() {
        let keys = ["/d/b", "/d/a", "/d/.h", "/d/sub/x", "/dd/y"].map(str::to_owned);
        assert_eq!(children("/d/", keys), ["a", "b"]);
    }

    #[test]
    fn entries_report_dirs_once_and_dot_files() {
        let keys = ["/d/b", "/d/.h", "/d/sub/x", "/d/sub/y/z", "/dd/y"].map(str::to_owned);
        let got = child_entries("/d/", keys, ["/d/empty".to_owned(), "/d/sub/w".to_owned()]);
        let want =
            [(".h", EntryKind::File), ("b", EntryKind::File), ("empty", EntryKind::Dir), ("sub", EntryKind::Dir)];
        let got: Vec<(&str, EntryKind)> = got.iter().map(|e| (e.name.as_str(), e.kind)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn backups_are_siblings_only() {
        let cands = ["/d/s.jsonl.1.bak", "/d/s.jsonl.bak", "/d/s.jsonl.x/y.bak"].map(str::to_owned);
        assert_eq!(backups("/d/s.jsonl", cands), ["/d/s.jsonl.1.bak"]);
    }

    #[test]
    fn slots_round_trip_through_metadata() {
        let slot = TitleSlot {
            title: "hi".into(),
            source: Some("user".into()),
            updated_at: "2026-01-01T00:00:00.000Z".into(),
        };
        let line = slot.to_line().map_err(|e| e.to_string()).unwrap_or_default();
        let body = format!("{line}{{\"type\":\"session\"}}\n");
        let meta = TitleMeta::of_body(body.as_bytes());
        assert_eq!(meta.title.as_deref(), Some("hi"));
        assert_eq!(meta.overlay_for(body.as_bytes()).as_deref(), Some(line.as_bytes()));
        assert_eq!(TitleMeta::of_body(b"{\"type\":\"session\"}\n"), TitleMeta::default());
        let json = meta.to_json().unwrap_or_default();
        assert_eq!(json, r#"{"title":"hi","source":"user","updatedAt":"2026-01-01T00:00:00.000Z"}"#);
        assert_eq!(TitleMeta::from_json(&json), meta);
    }

    #[test]
    fn local_dirs_answer_by_prefix() {
        let dirs = LocalDirs::new();
        dirs.remember("/a/b".into(), 5);
        assert_eq!(dirs.mtime("/a", "/a/"), Some(5));
        assert_eq!(dirs.under("/a/"), ["/a/b"]);
        dirs.forget_if_empty("/a/b");
        assert_eq!(dirs.mtime("/a", "/a/"), None);
    }
}
