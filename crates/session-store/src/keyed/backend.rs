//! [`KeyedBackend`]: what a server storage's driver answers, and the one [`Storage`]
//! every driver gets from it.
//!
//! A key-prefix storage (the SQL tables, Redis) keeps each file as a value under a `/`
//! key and knows a directory only as the prefix its keys share. What such a storage means
//! by each [`Storage`] operation is the same whatever the server: how a path becomes a
//! key, what a stat of a directory says, what a listing holds, when a write is refused,
//! how a size check fails, which keys a deletion takes with a file. That meaning lives
//! here, once; a driver implements the handful of primitives that speak its server's
//! language (a statement, a script, a pipeline) and gets the [`Storage`] implementation
//! below. The contract suite (`session_store::contract`, with the `testing` feature) pins the semantics on every driver.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{
    AppendingWriter, Cause, LocalDirs, Mtimes, TitleMeta, backups, child_entries, children, lay_over, read_into_buffer,
    slices_into_buffers,
};
use crate::{
    AppendWriter, DirEntry, Durability, ExpectedSize, FileStat, LockWait, Note, Op, PollWatch, SessionLock, Storage,
    StoreError, Watch, artifacts_dir,
};

/// Where a driver call happens: the operation and the path it was asked about, which
/// the driver's errors name.
#[derive(Clone, Copy, Debug)]
pub struct At<'a> {
    /// The operation.
    pub op: Op,
    /// The path asked about.
    pub path: &'a Path,
}

impl<'a> At<'a> {
    /// Returns the place of `op` on `path`.
    pub fn new(op: Op, path: &'a Path) -> At<'a> {
        At { op, path }
    }

    /// Wraps a driver's `cause` as the [`StoreError`] of this operation ([`super::wrap`]).
    pub fn wrap<C: Cause>(self, cause: C) -> StoreError {
        super::wrap(cause, self.op, self.path)
    }

    /// Returns [`StoreError::NotFound`] for this path.
    pub fn not_found(self) -> StoreError {
        StoreError::NotFound { path: self.path.to_path_buf() }
    }

    /// The same operation on another path (a rename's target).
    pub fn on(self, path: &'a Path) -> At<'a> {
        At { op: self.op, path }
    }
}

/// Content on its way to a driver's write, checked against the driver's rule
/// ([`KeyedState::body`]): bytes, and the same bytes as text when the storage keeps
/// text.
#[derive(Clone, Copy, Debug)]
pub struct Body<'a> {
    bytes: &'a [u8],
    text: Option<&'a str>,
}

impl<'a> Body<'a> {
    /// Content for a driver that keeps any bytes (Redis strings, `bytea`).
    pub fn bytes(bytes: &'a [u8]) -> Body<'a> {
        Body { bytes, text: None }
    }

    /// Content for a driver whose column is text: UTF-8 without NUL bytes
    /// ([`super::text_content`]); else why not, for the driver's "invalid content" error.
    pub fn text(bytes: &'a [u8]) -> Result<Body<'a>, String> {
        let text = super::text_content(bytes)?;
        Ok(Body { bytes, text: Some(text) })
    }

    /// Returns the bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Returns the content as text when it was made with [`Body::text`].
    pub fn as_text(&self) -> Option<&'a str> {
        self.text
    }

    /// Returns the length in bytes.
    pub fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// Returns whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// A whole file as a driver reads it: its stored bytes (the title slot as stored), the
/// title metadata beside them and the modification time.
#[derive(Clone, Debug)]
pub struct Row {
    /// The stored bytes.
    pub content: Vec<u8>,
    /// The title metadata kept beside them.
    pub meta: TitleMeta,
    /// The modification time, in milliseconds.
    pub mtime_ms: i64,
}

/// A file's two windows as a driver reads them ([`Storage::read_slices`]), with what the
/// title's overlay needs.
#[derive(Clone, Debug)]
pub struct Windows {
    /// The first `min(prefix, size)` bytes.
    pub head: Vec<u8>,
    /// The last bytes, as [`Storage::read_slices`] defines them.
    pub tail: Vec<u8>,
    /// The file's size.
    pub size: u64,
    /// The title metadata kept beside the bytes.
    pub meta: TitleMeta,
    /// The first 256 stored bytes when there is metadata to lay over them (a driver may
    /// leave it `None` when the metadata is empty).
    pub first: Option<Vec<u8>>,
    /// The modification time, in milliseconds.
    pub mtime_ms: i64,
}

/// How a whole-file write ([`KeyedBackend::put`]) treats the file that is there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Put {
    /// Replace it, or create it.
    Upsert,
    /// Create it; refuse when it exists.
    Create,
    /// Replace it when it exists with exactly this many bytes; refuse otherwise.
    IfSize(u64),
}

impl Put {
    fn of(expected: ExpectedSize) -> Put {
        match expected {
            ExpectedSize::Any => Put::Upsert,
            ExpectedSize::Missing => Put::Create,
            ExpectedSize::Bytes(n) | ExpectedSize::Unchanged { size: n, .. } => Put::IfSize(n),
        }
    }
}

/// What a conditional write of a driver did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cas {
    /// It wrote.
    Done,
    /// The file was not as expected, and nothing was written; the storage asks for the
    /// size it has now.
    Refused,
    /// As [`Cas::Refused`], and the driver saw the size in the same step (`None`: no file).
    RefusedAt(Option<u64>),
}

/// The keys a deletion of a file takes, in one step where the server has transactions.
#[derive(Clone, Copy, Debug)]
pub struct Doomed<'a> {
    /// The file's key.
    pub key: &'a str,
    /// Its `<name>.<anything>.bak` siblings.
    pub backups: &'a [String],
    /// The key prefix of its artifacts directory, every key under which goes too.
    pub artifacts: Option<&'a str>,
}

/// Why an operation of a key-prefix storage failed: the cause inside a
/// [`StoreError::Io`], one type for every driver, `D` being the driver's own error
/// (`rusqlite::Error`, `mysql::Error`, `postgres::Error`, `redis::RedisError`).
///
/// [`StoreError::Io`] carries it as the source of its [`std::io::Error`], whose
/// [`std::io::ErrorKind`] tells the broad case apart ([`BackendError::kind`]); reach it
/// with [`BackendError::find`]. Each storage crate names its own (`SqliteError`,
/// `MysqlError`, and the `ServerError` of PostgreSQL and of Redis).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError<D: std::error::Error + Send + Sync + 'static> {
    /// The file would grow past what the server takes; nothing was written.
    #[error("content of {size} bytes exceeds the server's limit of {limit} bytes ({what})")]
    TooLarge {
        /// The size the file would have had (or the size of the refused value).
        size: u64,
        /// The limit.
        limit: u64,
        /// Which limit it is (`SQLite's SQLITE_MAX_LENGTH`, `max_allowed_packet`, …).
        what: &'static str,
    },
    /// The content is not valid UTF-8 or holds a NUL byte, which a text column cannot
    /// hold (or a cut would split a character, or an extension add NUL bytes); nothing
    /// was written.
    #[error("content is not storable as the table's text: {reason}")]
    InvalidContent {
        /// What is wrong with it.
        reason: String,
    },
    /// The path cannot be a key: not UTF-8, a NUL byte, a `..` component, too long, or
    /// past the driver's own rule (MySQL's `VARCHAR(512)`, a trailing space).
    #[error("path cannot be a key: {reason}")]
    BadPath {
        /// What is wrong with it.
        reason: String,
    },
    /// The storage was opened read-only ([`super::TableOptions::read_only`] and the
    /// like), so it refuses every write; nothing was written.
    #[error(
        "the table {table} was opened read-only, for a command that only reads or a dry run; \
         nothing was written (a writing command opens it for writing, and creates it when missing)"
    )]
    ReadOnly {
        /// The table (for PostgreSQL's native layout, the metadata table).
        table: String,
    },
    /// The server refused the request, or the connection failed.
    #[error("the server refused the request, or the connection failed")]
    Server {
        /// What the driver made of the failure ([`BackendError::kind`]).
        kind: std::io::ErrorKind,
        /// The driver's error.
        #[source]
        source: D,
    },
}

impl<D: std::error::Error + Send + Sync + 'static> BackendError<D> {
    /// Returns the [`std::io::ErrorKind`] a [`StoreError::Io`] reports for this cause:
    /// `FileTooLarge`, `InvalidData` for content the server cannot hold, `InvalidInput`
    /// for a bad key, `ReadOnlyFilesystem` for a write refused by a read-only storage, and
    /// for a server's error the kind its driver gave it (`StorageFull`, `ResourceBusy`,
    /// `ConnectionRefused`, `ConnectionAborted`, …; each crate's docs list them).
    pub fn kind(&self) -> std::io::ErrorKind {
        match self {
            BackendError::TooLarge { .. } => std::io::ErrorKind::FileTooLarge,
            BackendError::InvalidContent { .. } => std::io::ErrorKind::InvalidData,
            BackendError::BadPath { .. } => std::io::ErrorKind::InvalidInput,
            BackendError::ReadOnly { .. } => std::io::ErrorKind::ReadOnlyFilesystem,
            BackendError::Server { kind, .. } => *kind,
        }
    }

    /// Returns the cause inside `err`, when `err` came from a storage of this driver.
    pub fn find(err: &StoreError) -> Option<&BackendError<D>> {
        super::find(err)
    }

    /// The text of a body a text storage made ([`Keeps::Text`]); a body made otherwise is
    /// [`BackendError::InvalidContent`].
    pub fn text_of<'b>(at: At<'_>, body: Body<'b>) -> Result<&'b str, StoreError> {
        body.as_text()
            .ok_or_else(|| at.wrap(BackendError::<D>::InvalidContent { reason: "not checked as text".to_owned() }))
    }
}

impl<D: std::error::Error + Send + Sync + 'static> Cause for BackendError<D> {
    fn bad_path(reason: String) -> BackendError<D> {
        BackendError::BadPath { reason }
    }

    fn kind(&self) -> std::io::ErrorKind {
        BackendError::kind(self)
    }
}

/// What a key-prefix storage holds as content ([`KeyedState::new`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keeps {
    /// Text: UTF-8 without NUL bytes ([`Body::text`]), as a text column holds.
    Text,
    /// Any bytes ([`Body::bytes`]): Redis strings, `bytea`.
    Bytes,
}

/// What a key-prefix storage keeps beside its driver ([`KeyedBackend::state`]): the
/// directories [`Storage::ensure_dir`] made that hold no key yet, the modification times,
/// and the rules every write passes (the read-only mode, what content the server keeps,
/// how large a file may grow).
#[derive(Debug)]
pub struct KeyedState {
    dirs: LocalDirs,
    times: Mtimes,
    read_only: Option<String>,
    keeps: Keeps,
    limit: u64,
    what: &'static str,
}

impl KeyedState {
    /// Returns the state of a writable storage on the system clock that keeps `keeps` and
    /// files of at most `limit` bytes; `what` names the limit in [`BackendError::TooLarge`].
    pub fn new(keeps: Keeps, limit: u64, what: &'static str) -> KeyedState {
        let times = Mtimes::new(std::sync::Arc::new(crate::clock::SystemClock));
        KeyedState { dirs: LocalDirs::new(), times, read_only: None, keeps, limit, what }
    }

    /// Opens the storage read-only when `table` names the table (for PostgreSQL's native
    /// layout, the metadata table): every write is then refused with
    /// [`BackendError::ReadOnly`].
    pub fn read_only(self, table: Option<String>) -> KeyedState {
        KeyedState { read_only: table, ..self }
    }

    /// Returns the storage's modification times.
    pub fn times(&self) -> &Mtimes {
        &self.times
    }

    /// Returns whether the storage was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.read_only.is_some()
    }

    /// Returns the largest file the storage writes, in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Refuses a write on a read-only storage with [`BackendError::ReadOnly`].
    pub fn writable<D: std::error::Error + Send + Sync + 'static>(&self, at: At<'_>) -> Result<(), StoreError> {
        match &self.read_only {
            Some(table) => Err(at.wrap(BackendError::<D>::ReadOnly { table: table.clone() })),
            None => Ok(()),
        }
    }

    /// Checks a write of `bytes`: refused on a read-only storage, and as
    /// [`BackendError::InvalidContent`] when the storage keeps text and they are not.
    pub fn body<'b, D: std::error::Error + Send + Sync + 'static>(
        &self,
        at: At<'_>,
        bytes: &'b [u8],
    ) -> Result<Body<'b>, StoreError> {
        self.writable::<D>(at)?;
        match self.keeps {
            Keeps::Bytes => Ok(Body::bytes(bytes)),
            Keeps::Text => Body::text(bytes).map_err(|reason| at.wrap(BackendError::<D>::InvalidContent { reason })),
        }
    }

    /// Refuses a file that would grow to `size` bytes, past the limit, with
    /// [`BackendError::TooLarge`].
    pub fn check_len<D: std::error::Error + Send + Sync + 'static>(
        &self,
        at: At<'_>,
        size: u64,
    ) -> Result<(), StoreError> {
        if size > self.limit {
            return Err(at.wrap(BackendError::<D>::TooLarge { size, limit: self.limit, what: self.what }));
        }
        Ok(())
    }
}

/// The cause of a driver's errors.
type CauseOf<B> = BackendError<<B as KeyedBackend>::Driver>;

/// The primitives of a key-prefix storage's driver. Every type that implements it is a
/// [`Storage`], whose operations hold the shared meaning (see the module docs): paths
/// become keys, writes are refused on a read-only storage and checked against the
/// storage's content rule and size limit, directories are prefixes (and the empty ones
/// [`Storage::ensure_dir`] made are remembered), modification times come from the
/// storage's [`KeyedState`], size checks fail as [`StoreError::Conflict`] with the size
/// found, and a file's deletion takes its backups and artifacts.
///
/// Each primitive gets the place of the call ([`At`]) for its errors, and keys already
/// checked; a primitive that finds no file says so by its return value, not by an error.
pub trait KeyedBackend: Clone + Send + Sync + 'static {
    /// The driver's own error, the source of a [`BackendError::Server`].
    type Driver: std::error::Error + Send + Sync + 'static;

    /// What the storage keeps beside its driver: its local directories, its modification
    /// times and the rules every write passes.
    fn state(&self) -> &KeyedState;

    /// Refuses a key the server cannot keep beyond [`Cause::key`]'s rule (MySQL's
    /// `VARCHAR(512)`); none by default. A stat of such a key finds no file.
    fn check_key(&self, at: At<'_>, key: &str) -> Result<(), StoreError> {
        let _ = (at, key);
        Ok(())
    }

    /// Returns the size and modification time of the file `key`, `None` when there is none.
    fn stat_key(&self, at: At<'_>, key: &str) -> Result<Option<(u64, i64)>, StoreError>;

    /// Returns the newest modification time among the files whose keys start with
    /// `prefix`, `None` when there are none.
    fn newest_under(&self, at: At<'_>, prefix: &str) -> Result<Option<i64>, StoreError>;

    /// Returns the keys of every file whose key starts with `prefix`, in any order.
    fn keys_under(&self, at: At<'_>, prefix: &str) -> Result<Vec<String>, StoreError>;

    /// Returns each file whose key starts with `prefix` with its size and modification
    /// time, in any order. The default asks [`KeyedBackend::stat_key`] of each key of
    /// [`KeyedBackend::keys_under`] (a file gone between the two is left out); a driver
    /// that can answer in one request does.
    fn stats_under(&self, at: At<'_>, prefix: &str) -> Result<Vec<(String, u64, i64)>, StoreError> {
        let mut out = Vec::new();
        for key in self.keys_under(at, prefix)? {
            if let Some((size, mtime_ms)) = self.stat_key(at, &key)? {
                out.push((key, size, mtime_ms));
            }
        }
        Ok(out)
    }

    /// Reads the file `key` whole, in one snapshot.
    fn read_row(&self, at: At<'_>, key: &str) -> Result<Option<Row>, StoreError>;

    /// Reads the windows of the file `key` ([`Storage::read_slices`]), in one snapshot.
    fn read_windows(&self, at: At<'_>, key: &str, prefix: u64, suffix: u64) -> Result<Option<Windows>, StoreError>;

    /// Writes the file `key` whole with its title metadata, as `how` says.
    fn put(
        &self,
        at: At<'_>,
        key: &str,
        body: Body<'_>,
        meta: &TitleMeta,
        mtime_ms: i64,
        how: Put,
    ) -> Result<Cas, StoreError>;

    /// Appends to the file `key`, creating it (omp's blind append).
    fn append_key(&self, at: At<'_>, key: &str, body: Body<'_>, mtime_ms: i64) -> Result<(), StoreError>;

    /// Appends to the file `key` when it has exactly `size` bytes, in one step.
    fn append_at(&self, at: At<'_>, key: &str, body: Body<'_>, mtime_ms: i64, size: u64) -> Result<Cas, StoreError>;

    /// Cuts the file `key` to `len` bytes (or refuses what the server cannot keep);
    /// `false` when there is no such file.
    fn truncate_key(&self, at: At<'_>, key: &str, len: u64, mtime_ms: i64) -> Result<bool, StoreError>;

    /// Moves the file `from` (with its title metadata) to `to`, replacing `to`, in one
    /// step; `false` when there is no file `from`. The keys differ.
    fn rename_key(&self, at: At<'_>, from: &str, to: &str, mtime_ms: i64) -> Result<bool, StoreError>;

    /// Deletes the file `key`; `false` when there was none.
    fn delete_key(&self, at: At<'_>, key: &str) -> Result<bool, StoreError>;

    /// Deletes a file with its backups and artifacts, in one transaction where the server
    /// has them.
    fn delete_doomed(&self, at: At<'_>, doomed: Doomed<'_>) -> Result<(), StoreError>;

    /// Creates the file `key` empty when it is missing (an append writer's open).
    fn touch_empty(&self, at: At<'_>, key: &str, mtime_ms: i64) -> Result<(), StoreError>;

    /// Sets the title metadata of the file `key` and its modification time, leaving the
    /// bytes alone; `false` when there is no such file.
    fn set_title(&self, at: At<'_>, key: &str, meta: &TitleMeta, mtime_ms: i64) -> Result<bool, StoreError>;

    /// Takes the server's advisory lock of the session `key` ([`Storage::lock`]);
    /// [`poll_lock`] waits for a lock that is tried.
    fn lock_key(&self, at: At<'_>, key: &str, wait: LockWait) -> Result<SessionLock, StoreError>;

    /// Starts watching the file `key` ([`Storage::watch`]). The default polls the stat
    /// ([`PollWatch`]).
    fn watch_key(&self, at: At<'_>, key: &str) -> Result<Option<Box<dyn Watch>>, StoreError> {
        let _ = key;
        Ok(Some(Box::new(PollWatch::new(self.clone(), at.path)?)))
    }

    /// [`Storage::read_notes`]; none by default.
    fn read_notes(&self, paths: &[PathBuf], kind: &str) -> Result<Option<Vec<Option<Note>>>, StoreError> {
        let _ = (paths, kind);
        Ok(None)
    }

    /// [`Storage::write_notes`]; ignored by default.
    fn write_notes(&self, kind: &str, notes: &[(PathBuf, u64, Vec<u8>)]) -> Result<(), StoreError> {
        let _ = (kind, notes);
        Ok(())
    }
}

/// How long a waiting [`poll_lock`] sleeps between attempts.
pub const LOCK_POLL: Duration = Duration::from_millis(10);

/// Tries `take` until it takes the lock (`true`), every [`LOCK_POLL`] while `wait`
/// allows, then fails with [`StoreError::Locked`] on `path`.
pub fn poll_lock(
    path: &Path,
    wait: LockWait,
    mut take: impl FnMut() -> Result<bool, StoreError>,
) -> Result<(), StoreError> {
    let deadline = match wait {
        LockWait::NoWait => None,
        LockWait::Timeout(d) => Some(Instant::now() + d),
    };
    loop {
        if take()? {
            return Ok(());
        }
        if deadline.is_none_or(|d| Instant::now() >= d) {
            return Err(StoreError::Locked { path: path.to_path_buf() });
        }
        std::thread::sleep(LOCK_POLL);
    }
}

/// What a cut of text content to `len` bytes keeps ([`cut_text`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Cut<'a> {
    /// The length is the content's: nothing to cut (the mtime still moves).
    Same,
    /// The content's first `len` bytes.
    To(&'a str),
}

/// Cuts text content to `len` bytes for a text column's truncate: an extension (which
/// would add NUL bytes) or a cut inside a character is refused with the reason.
pub fn cut_text(content: &str, len: u64) -> Result<Cut<'_>, String> {
    let size = content.len() as u64;
    if len > size {
        return Err(format!("extending {size} bytes to {len} would add NUL bytes"));
    }
    if len == size {
        return Ok(Cut::Same);
    }
    match usize::try_from(len).ok().and_then(|n| content.get(..n)) {
        Some(kept) => Ok(Cut::To(kept)),
        None => Err(format!("cutting at byte {len} would split a character")),
    }
}

/// Returns the key of the file `at.path`: [`Cause::file_key`] and the driver's own rule.
fn file_key<B: KeyedBackend>(b: &B, at: At<'_>) -> Result<String, StoreError> {
    let k = <CauseOf<B>>::file_key(at.op, at.path)?;
    b.check_key(at, &k)?;
    Ok(k)
}

/// The error of a refused conditional write: the size found, asked for when the driver
/// did not see it.
fn conflict<B: KeyedBackend>(b: &B, at: At<'_>, key: &str, expected: ExpectedSize, cas: Cas) -> StoreError {
    let found = match cas {
        Cas::RefusedAt(found) => found,
        Cas::Done | Cas::Refused => match b.stat_key(at, key) {
            Ok(stat) => stat.map(|(size, _)| size),
            Err(e) => return e,
        },
    };
    StoreError::Conflict { path: at.path.to_path_buf(), expected: expected.as_option().flatten(), found }
}

/// Reads the whole file with its stat, the title laid over its slot.
fn read_with_stat<B: KeyedBackend>(b: &B, path: &Path) -> Result<(FileStat, Vec<u8>), StoreError> {
    let at = At::new(Op::Read, path);
    let k = file_key(b, at)?;
    let Row { mut content, meta, mtime_ms } = b.read_row(at, &k)?.ok_or_else(|| at.not_found())?;
    if let Some(slot) = meta.overlay_for(&content) {
        lay_over(&slot, &mut content, 0);
    }
    Ok((FileStat::new(content.len() as u64, mtime_ms, true), content))
}

/// Reads the two windows with the stat, the title laid over the slot.
fn slices_with_stat<B: KeyedBackend>(
    b: &B,
    path: &Path,
    prefix: u64,
    suffix: u64,
) -> Result<(FileStat, Vec<u8>, Vec<u8>), StoreError> {
    let at = At::new(Op::Read, path);
    let k = file_key(b, at)?;
    let w = b.read_windows(at, &k, prefix, suffix)?.ok_or_else(|| at.not_found())?;
    let Windows { mut head, mut tail, size, meta, first, mtime_ms } = w;
    if let Some(slot) = first.and_then(|f| meta.overlay_for(&f)) {
        lay_over(&slot, &mut head, 0);
        let tail_at = size.saturating_sub(tail.len() as u64);
        lay_over(&slot, &mut tail, tail_at);
    }
    Ok((FileStat::new(size, mtime_ms, true), head, tail))
}

/// A whole-file write checking `expected`; [`StoreError::AlreadyExists`] for
/// [`Op::WriteNew`] on a file that exists.
fn replace<B: KeyedBackend>(
    b: &B,
    op: Op,
    path: &Path,
    bytes: &[u8],
    expected: ExpectedSize,
) -> Result<(), StoreError> {
    let at = At::new(op, path);
    let k = file_key(b, at)?;
    let body = b.state().body::<B::Driver>(at, bytes)?;
    b.state().check_len::<B::Driver>(at, body.len())?;
    let meta = TitleMeta::of_body(bytes);
    let now = b.state().times.next();
    match b.put(at, &k, body, &meta, now, Put::of(expected))? {
        Cas::Done => Ok(()),
        _ if op == Op::WriteNew => Err(StoreError::AlreadyExists { path: path.to_path_buf() }),
        cas => Err(conflict(b, at, &k, expected, cas)),
    }
}

/// Updates the title metadata of `path` and its mtime, leaving the bytes alone (omp's
/// `updateSessionTitle` on an indexed storage): what each server storage's
/// `update_title` does. [`StoreError::NotFound`] when there is no such file.
pub fn update_title<B: KeyedBackend>(
    b: &B,
    path: &Path,
    title: Option<&str>,
    source: Option<&str>,
    updated_at: &str,
) -> Result<(), StoreError> {
    let at = At::new(Op::Overwrite, path);
    let k = file_key(b, at)?;
    b.state().writable::<B::Driver>(at)?;
    let meta = TitleMeta {
        title: title.map(str::to_owned),
        source: source.map(str::to_owned),
        updated_at: Some(updated_at.to_owned()),
    };
    let now = b.state().times.next();
    if !b.set_title(at, &k, &meta, now)? {
        return Err(at.not_found());
    }
    Ok(())
}

impl<B: KeyedBackend> Storage for B {
    fn ensure_dir(&self, dir: &Path) -> Result<(), StoreError> {
        let at = At::new(Op::EnsureDir, dir);
        let k = <CauseOf<B>>::key(at.op, dir)?;
        self.check_key(at, &k)?;
        if self.stat_key(at, &k)?.is_some() {
            let err = std::io::Error::new(std::io::ErrorKind::AlreadyExists, "a file is in the way");
            return Err(StoreError::io_raw(at.op, dir, err));
        }
        self.state().dirs.remember(k, self.state().times.next());
        Ok(())
    }

    fn exists(&self, path: &Path) -> Result<bool, StoreError> {
        Ok(self.stat(path)?.is_some())
    }

    fn stat(&self, path: &Path) -> Result<Option<FileStat>, StoreError> {
        let at = At::new(Op::Stat, path);
        let k = <CauseOf<B>>::key(at.op, path)?;
        let prefix = <CauseOf<B>>::dir_prefix(at.op, path)?;
        // A key no file can have (past the driver's own rule) is no file.
        if self.check_key(at, &k).is_ok()
            && let Some((size, mtime_ms)) = self.stat_key(at, &k)?
        {
            return Ok(Some(FileStat::new(size, mtime_ms, true)));
        }
        let mtime = match self.newest_under(at, &prefix)? {
            Some(newest) => Some(newest),
            None => self.state().dirs.mtime(&k, &prefix),
        };
        Ok(mtime.map(|mtime_ms| FileStat::new(0, mtime_ms, false)))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>, StoreError> {
        let at = At::new(Op::List, dir);
        let prefix = <CauseOf<B>>::dir_prefix(at.op, dir)?;
        Ok(children(&prefix, self.keys_under(at, &prefix)?))
    }

    fn list_stats(&self, dir: &Path) -> Result<Vec<(String, FileStat)>, StoreError> {
        let at = At::new(Op::List, dir);
        let prefix = <CauseOf<B>>::dir_prefix(at.op, dir)?;
        // Only files directly in `dir`, dot-files left out, as `list` gives them.
        let mut out: Vec<(String, FileStat)> = self
            .stats_under(at, &prefix)?
            .into_iter()
            .filter_map(|(key, size, mtime_ms)| {
                let name = key.strip_prefix(&prefix)?;
                (!name.is_empty() && !name.contains('/') && !name.starts_with('.'))
                    .then(|| (name.to_owned(), FileStat::new(size, mtime_ms, true)))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    fn read_dir(&self, dir: &Path) -> Result<Vec<DirEntry>, StoreError> {
        let at = At::new(Op::List, dir);
        let prefix = <CauseOf<B>>::dir_prefix(at.op, dir)?;
        let keys = self.keys_under(at, &prefix)?;
        Ok(child_entries(&prefix, keys, self.state().dirs.under(&prefix)))
    }

    fn read(&self, path: &Path) -> Result<Vec<u8>, StoreError> {
        Ok(read_with_stat(self, path)?.1)
    }

    fn read_into(&self, path: &Path, buf: &mut Vec<u8>) -> Result<(FileStat, usize), StoreError> {
        Ok(read_into_buffer(read_with_stat(self, path)?, buf))
    }

    fn read_slices(&self, path: &Path, prefix: u64, suffix: u64) -> Result<(Vec<u8>, Vec<u8>), StoreError> {
        let (_, head, tail) = slices_with_stat(self, path, prefix, suffix)?;
        Ok((head, tail))
    }

    fn read_slices_into(
        &self,
        path: &Path,
        prefix: u64,
        suffix: u64,
        head: &mut Vec<u8>,
        tail: &mut Vec<u8>,
    ) -> Result<(FileStat, usize, usize), StoreError> {
        Ok(slices_into_buffers(slices_with_stat(self, path, prefix, suffix)?, head, tail))
    }

    fn write(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        replace(self, Op::Write, path, bytes, ExpectedSize::Any)
    }

    fn write_new(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        replace(self, Op::WriteNew, path, bytes, ExpectedSize::Missing)
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        replace(self, Op::Write, path, bytes, expected)
    }

    fn append(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        let at = At::new(Op::Append, path);
        let k = file_key(self, at)?;
        let body = self.state().body::<B::Driver>(at, bytes)?;
        self.state().check_len::<B::Driver>(at, body.len())?;
        let now = self.state().times.next();
        self.append_key(at, &k, body, now)
    }

    /// One conditional statement (or script): the bytes are sent once, never the file.
    fn append_expected(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        let at = At::new(Op::Append, path);
        let k = file_key(self, at)?;
        let body = self.state().body::<B::Driver>(at, bytes)?;
        let cas = match expected {
            ExpectedSize::Any => return self.append(path, bytes),
            ExpectedSize::Missing => {
                self.state().check_len::<B::Driver>(at, body.len())?;
                let now = self.state().times.next();
                self.put(at, &k, body, &TitleMeta::default(), now, Put::Create)?
            }
            ExpectedSize::Bytes(n) | ExpectedSize::Unchanged { size: n, .. } => {
                self.state().check_len::<B::Driver>(at, n.saturating_add(body.len()))?;
                let now = self.state().times.next();
                self.append_at(at, &k, body, now, n)?
            }
        };
        match cas {
            Cas::Done => Ok(()),
            cas => Err(conflict(self, at, &k, expected, cas)),
        }
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<(), StoreError> {
        let at = At::new(Op::Truncate, path);
        let k = file_key(self, at)?;
        self.state().writable::<B::Driver>(at)?;
        let now = self.state().times.next();
        if !self.truncate_key(at, &k, len, now)? {
            return Err(at.not_found());
        }
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        let at = At::new(Op::Rename, from);
        let src = file_key(self, at)?;
        let dst = file_key(self, at.on(to))?;
        self.state().writable::<B::Driver>(at)?;
        let moved = if src == dst {
            self.stat_key(at, &src)?.is_some()
        } else {
            let now = self.state().times.next();
            self.rename_key(at, &src, &dst, now)?
        };
        if !moved {
            return Err(at.not_found());
        }
        Ok(())
    }

    fn unlink(&self, path: &Path) -> Result<(), StoreError> {
        let at = At::new(Op::Unlink, path);
        let k = file_key(self, at)?;
        self.state().writable::<B::Driver>(at)?;
        if !self.delete_key(at, &k)? {
            return Err(at.not_found());
        }
        Ok(())
    }

    fn remove_empty_dir(&self, dir: &Path) -> Result<(), StoreError> {
        let k = <CauseOf<B>>::key(Op::RemoveDir, dir)?;
        self.state().dirs.forget_if_empty(&k);
        Ok(())
    }

    fn delete_with_artifacts(&self, path: &Path) -> Result<(), StoreError> {
        let at = At::new(Op::Unlink, path);
        let k = file_key(self, at)?;
        self.state().writable::<B::Driver>(at)?;
        let artifacts = artifacts_dir(path).map(|d| <CauseOf<B>>::dir_prefix(Op::RemoveDir, &d)).transpose()?;
        // `<name>.<anything>.bak` siblings: keys that start with `<key>.`, then filtered.
        let backups = backups(&k, self.keys_under(at, &format!("{k}."))?);
        self.delete_doomed(at, Doomed { key: &k, backups: &backups, artifacts: artifacts.as_deref() })?;
        if let Some(prefix) = artifacts {
            self.state().dirs.forget_under(&prefix);
        }
        Ok(())
    }

    /// Every append of the writer is one [`Storage::append`], a committed statement (or
    /// script), so every level of [`Durability`] is as durable as the server makes it.
    fn open_writer(&self, path: &Path, durability: Durability) -> Result<Box<dyn AppendWriter>, StoreError> {
        let _ = durability;
        let at = At::new(Op::Open, path);
        let k = file_key(self, at)?;
        self.state().writable::<B::Driver>(at)?;
        let now = self.state().times.next();
        self.touch_empty(at, &k, now)?;
        Ok(Box::new(AppendingWriter::new(self.clone(), path)))
    }

    fn lock(&self, path: &Path, wait: LockWait) -> Result<SessionLock, StoreError> {
        let at = At::new(Op::Lock, path);
        let k = file_key(self, at)?;
        self.lock_key(at, &k, wait)
    }

    fn read_notes(&self, paths: &[PathBuf], kind: &str) -> Result<Option<Vec<Option<Note>>>, StoreError> {
        KeyedBackend::read_notes(self, paths, kind)
    }

    fn write_notes(&self, kind: &str, notes: &[(PathBuf, u64, Vec<u8>)]) -> Result<(), StoreError> {
        KeyedBackend::write_notes(self, kind, notes)
    }

    fn watch(&self, path: &Path) -> Result<Option<Box<dyn Watch>>, StoreError> {
        let at = At::new(Op::Stat, path);
        let k = <CauseOf<B>>::file_key(at.op, path)?;
        self.watch_key(at, &k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_keep_whole_characters() {
        assert_eq!(cut_text("héllo", 6), Ok(Cut::Same));
        assert_eq!(cut_text("héllo", 1), Ok(Cut::To("h")));
        assert_eq!(cut_text("héllo", 2), Err("cutting at byte 2 would split a character".to_owned()));
        assert_eq!(cut_text("ab", 3), Err("extending 2 bytes to 3 would add NUL bytes".to_owned()));
    }

    #[test]
    fn bodies_of_text_drivers_are_text() {
        assert_eq!(Body::text(b"ok\n").ok().and_then(|b| b.as_text()), Some("ok\n"));
        assert!(Body::text(b"a\0").is_err());
        assert_eq!(Body::bytes(b"a\0").as_text(), None);
        assert_eq!(Body::bytes(b"a\0").len(), 2);
    }

    #[test]
    fn locks_poll_until_the_deadline() {
        let mut tries = 0;
        let got = poll_lock(Path::new("/s"), LockWait::Timeout(Duration::from_millis(30)), || {
            tries += 1;
            Ok(tries == 3)
        });
        assert!(got.is_ok());
        let refused = poll_lock(Path::new("/s"), LockWait::NoWait, || Ok(false));
        assert!(matches!(refused, Err(StoreError::Locked { .. })));
    }
}
