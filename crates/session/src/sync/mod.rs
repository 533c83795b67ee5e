//! Syncing the sessions of this machine with a remote copy on any [`Storage`] (a folder,
//! a database, an object store), both ways, session by session.
//!
//! [`sync`] pairs each local session with the remote file of the same dialect and name
//! and brings both to the same entries:
//!
//! * the same bytes (the header's `cwd` aside, which each side keeps as its own): nothing
//!   to do ([`SyncOutcome::Unchanged`]);
//! * one copy a prefix of the other: the missing tail is appended to the shorter one
//!   ([`SyncOutcome::Pushed`], [`SyncOutcome::Pulled`]), on the remote with
//!   [`Storage::append_expected`] at the size read, locally under the session's lock with
//!   the same conditional append;
//! * one copy holding every entry of the other (by id, in another order or with other
//!   bytes for an entry; the remote one when both hold the same entries): that copy
//!   replaces the other with compare-and-set ([`Storage::write_atomic`] with the size
//!   read), so that every machine ends with the same file;
//! * two continuations: [`merge_bytes`] makes their union (this machine's bytes kept for
//!   an entry both hold, this machine's leaf last when no entry continues from it) and
//!   both sides are replaced with compare-and-set ([`SyncOutcome::Merged`]);
//! * on one side only: copied to the other ([`SyncOutcome::Uploaded`],
//!   [`SyncOutcome::Downloaded`]); a download is filed in this machine's bucket of the
//!   project's folder here, its header's `cwd` rewritten for this machine (only the
//!   value's bytes change; [`project_of`] says which folder).
//!
//! Every remote write is conditional: a writer that got there between our read and our
//! write makes it fail, and the session is read again and synced again, up to
//! [`SYNC_ROUNDS`] times. Nothing is deleted on either side. With
//! [`SyncOptions::dry_run`] nothing is written anywhere (the state file included), and
//! each outcome says what a sync would do.
//!
//! The remote layout (`docs/format.md`, "Sync remote"): omp's sessions at
//! `<prefix>/sessions/<project slug>/<file>.jsonl`, pi's at
//! `<prefix>/pi/sessions/<project slug>/<file>.jsonl`, beside each a
//! `<file stem>.meta.json` naming its project, and omp's blobs at
//! `<prefix>/blobs/<sha256>` (uploaded once, downloaded when a session here names one
//! this machine lacks). Each remote project folder is listed once with its files'
//! versions ([`Storage::list_versions`]: one request on object storage); a session whose
//! local size and modification time and whose remote version are those the last sync
//! left (the state file, [`SyncLocal::state_dir`]) is not read, and one whose remote
//! copy is as the last sync left it while the local copy only grew (it still begins with
//! the bytes noted then, by their hash) is fast-forwarded without the sync reading the
//! remote copy: its version is looked at once more, then the new lines go through the
//! storage's conditional append (on object storage an upload of those lines alone; a
//! folder's rewrites the file).
//!
//! [`watch`] follows this machine's sessions after a first sync: each session that
//! changes here is synced alone as soon as a listing shows it ([`SyncOptions::only`]),
//! and every session again at an interval, which brings the remote's changes here.
//!
//! ```
//! use std::sync::Arc;
//! use session::discovery::{AgentDirs, ProcessEnv};
//! use session::store::{MemoryStorage, Storage};
//! use session::sync::{SyncLocal, SyncOptions, SyncOutcome, SyncRemote, sync};
//!
//! let env = ProcessEnv::new("/home/me", "/home/me/app", "/tmp");
//! let pi = AgentDirs::pi(&env);
//! let here = Arc::new(MemoryStorage::new());
//! let file = pi.default_session_dir("/home/me/app").join("2026-01-01T00-00-00-000Z_s1.jsonl");
//! here.write(&file, b"{\"type\":\"session\",\"version\":3,\"id\":\"s1\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/home/me/app\"}\n")?;
//! let local = SyncLocal::new(here, vec![pi], "/home/me/.local/state/session-store");
//! let remote = SyncRemote::new(Arc::new(MemoryStorage::new()), "memory", "/sync");
//! // A dry run: it says what it would do and writes nothing (the state file included).
//! let report = sync(&local, &remote, &SyncOptions::default().dry_run(true), &mut |_| {})?;
//! assert!(matches!(report.sessions[0].outcome, SyncOutcome::Uploaded));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod project;
mod splice;
mod state;
mod watch;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use session_discovery::AgentDirs;
use session_model::Dialect;
use session_store::blob::find_refs;
use session_store::{
    BlobHasher, BlobRef, BlobStore, EntryKind, ExpectedSize, FileStat, LockWait, Storage, StoreError, is_plain_name,
};

pub use project::{Project, ProjectMap, normalize_git_url, project_of, project_slug};
pub use state::{redact_url, state_file};
pub use watch::{WatchEvent, WatchOptions, watch};

use crate::error::unless_missing;
use crate::maintenance::{JobError, MergeInput, MergeLeaf, merge_bytes};

/// How many times a session is read and synced again after another writer changed it
/// between our read and our write.
pub const SYNC_ROUNDS: usize = 4;

/// How long a local write waits for the agent that holds the session's lock.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// How many bytes of a file are read to find its header first.
const HEAD_WINDOW: u64 = 64 * 1024;

/// The suffix of a session's sidecar on the remote (after the file's stem).
pub const META_SUFFIX: &str = ".meta.json";

/// This machine's side of a sync.
#[derive(Clone)]
#[non_exhaustive]
pub struct SyncLocal {
    /// Where the sessions are (the file system).
    pub storage: Arc<dyn Storage>,
    /// The agents' folders: each home's sessions root is walked, and downloads go to its
    /// bucket of the session's folder.
    pub homes: Vec<AgentDirs>,
    /// omp's blob store here, if blobs are synced.
    pub blobs: Option<BlobStore>,
    /// Our state folder (`${XDG_STATE_HOME:-~/.local/state}/session-store`), which holds
    /// `sync/<hash of the remote>.json`.
    pub state_dir: PathBuf,
}

impl SyncLocal {
    /// Returns the local side: sessions in `storage` below the `homes`' roots, the state
    /// kept in `state_dir`, no blobs.
    pub fn new(storage: Arc<dyn Storage>, homes: Vec<AgentDirs>, state_dir: impl Into<PathBuf>) -> SyncLocal {
        SyncLocal { storage, homes, blobs: None, state_dir: state_dir.into() }
    }

    setters! { SyncLocal;
        /// Returns this side with omp's blob store `blobs`.
        #[must_use]
        with_blobs(blobs: BlobStore) => blobs = Some(blobs);
    }
}

impl std::fmt::Debug for SyncLocal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncLocal").field("homes", &self.homes).field("state_dir", &self.state_dir).finish()
    }
}

/// The remote side of a sync: any storage, below a prefix.
#[derive(Clone)]
#[non_exhaustive]
pub struct SyncRemote {
    /// The storage.
    pub storage: Arc<dyn Storage>,
    /// What names it (a URL or a folder); the state file is kept per URL and prefix, the
    /// URL written without its password.
    pub url: String,
    /// The folder (key prefix) of the layout in the storage.
    pub prefix: PathBuf,
}

impl SyncRemote {
    /// Returns the remote `storage` named `url`, the layout below `prefix`.
    pub fn new(storage: Arc<dyn Storage>, url: &str, prefix: impl Into<PathBuf>) -> SyncRemote {
        SyncRemote { storage, url: url.to_owned(), prefix: prefix.into() }
    }

    /// Returns the folder of `dialect`'s project folders.
    pub fn sessions_dir(&self, dialect: Dialect) -> PathBuf {
        match dialect {
            Dialect::Omp => self.prefix.join("sessions"),
            Dialect::Pi => self.prefix.join("pi").join("sessions"),
        }
    }

    /// Returns the path of a blob.
    pub fn blob_path(&self, blob: &BlobRef) -> PathBuf {
        self.prefix.join("blobs").join(blob.hash())
    }
}

impl std::fmt::Debug for SyncRemote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncRemote").field("url", &redact_url(&self.url)).field("prefix", &self.prefix).finish()
    }
}

/// What [`sync`] does.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct SyncOptions {
    /// Writes nothing anywhere; each outcome says what would be done.
    pub dry_run: bool,
    /// Project ids of folders here (`--map ID=PATH`).
    pub map: ProjectMap,
    /// Only sessions whose folder (here) is one of these or below one; the others are
    /// neither synced nor reported.
    pub projects: Vec<PathBuf>,
    /// Only these local session files (as a listing of the agents' folders names them),
    /// or every session (`None`). The others are neither synced nor reported, and
    /// nothing is downloaded. Each is synced with the remote copy the state file notes
    /// for it (one stat); the remote's folders of its agent are listed only for one it
    /// notes none for (a session not synced yet). [`watch`] syncs what changed here so.
    pub only: Option<BTreeSet<PathBuf>>,
}

setters! { impl SyncOptions;
    /// Returns these options writing nothing (`true`).
    #[must_use]
    dry_run(dry_run: bool) => dry_run = dry_run;

    /// Returns these options with the project ids `map`.
    #[must_use]
    map(map: ProjectMap) => map = map;

    /// Returns these options limited to sessions of `projects` (folders here).
    #[must_use]
    projects(projects: Vec<PathBuf>) => projects = projects.iter().map(|p| project::lexical(p)).collect();

    /// Returns these options limited to the local session files `paths` (see
    /// [`SyncOptions::only`]).
    #[must_use]
    only(paths: impl IntoIterator<Item = PathBuf>) => only = Some(paths.into_iter().collect());
}

/// Why two copies of a session could not be merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConflictReason {
    /// Both copies hold the entry with another type or parent.
    EntryDisagrees,
    /// The copies' headers name different sessions.
    DifferentSessions,
    /// No entry of the union can be its leaf.
    NoLeaf,
    /// A copy cannot be merged as it is (a damaged line, an entry without an id, no
    /// header): repair or migrate it first.
    Unsupported,
}

/// What a sync did with one session (or would do, in a dry run).
#[derive(Debug)]
#[non_exhaustive]
pub enum SyncOutcome {
    /// Both copies hold the same entries.
    Unchanged,
    /// The remote copy was fast-forwarded with this many bytes, or replaced by the local
    /// one, which held every entry of it.
    Pushed {
        /// Bytes the remote copy grew by.
        bytes: u64,
    },
    /// The local copy was fast-forwarded with this many bytes, or replaced by the remote
    /// one, which held every entry of it.
    Pulled {
        /// Bytes the local copy grew by.
        bytes: u64,
    },
    /// The session was new on the remote.
    Uploaded,
    /// The session was new here.
    Downloaded,
    /// Two continuations were merged and both copies replaced with the union.
    Merged {
        /// Entries the local copy gained.
        local_added: usize,
        /// Entries the remote copy gained.
        remote_added: usize,
    },
    /// The copies could not be merged; neither was changed.
    Conflict {
        /// Why.
        reason: ConflictReason,
        /// The entry at fault, where one is.
        entry: Option<String>,
        /// What the merge said.
        detail: String,
    },
    /// Left alone.
    Skipped {
        /// Why.
        reason: String,
    },
    /// An error; what landed before it is whole (each write is atomic or a conditional
    /// append).
    Failed(Box<SyncError>),
}

/// One session of a sync.
#[derive(Debug)]
#[non_exhaustive]
pub struct SessionSync {
    /// Whose session it is.
    pub dialect: Dialect,
    /// Its file name.
    pub name: String,
    /// Its project id, where known.
    pub project: Option<String>,
    /// The local file (where there is one, or where the download goes).
    pub local: Option<PathBuf>,
    /// The remote file (where there is one, or where the upload goes).
    pub remote: Option<PathBuf>,
    /// What happened.
    pub outcome: SyncOutcome,
}

/// The sessions' outcomes counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SyncCounts {
    /// [`SyncOutcome::Unchanged`].
    pub unchanged: usize,
    /// [`SyncOutcome::Pushed`] and [`SyncOutcome::Uploaded`].
    pub pushed: usize,
    /// [`SyncOutcome::Pulled`] and [`SyncOutcome::Downloaded`].
    pub pulled: usize,
    /// [`SyncOutcome::Merged`].
    pub merged: usize,
    /// [`SyncOutcome::Conflict`].
    pub conflicts: usize,
    /// [`SyncOutcome::Skipped`].
    pub skipped: usize,
    /// [`SyncOutcome::Failed`].
    pub failed: usize,
}

/// What [`sync`] did.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct SyncReport {
    /// Each session, local ones first in path order.
    pub sessions: Vec<SessionSync>,
    /// Blobs copied to the remote.
    pub blobs_uploaded: usize,
    /// Blobs copied here.
    pub blobs_downloaded: usize,
    /// The state file written (none in a dry run or when nothing in it changed).
    pub state_file: Option<PathBuf>,
    /// Whether it was a dry run.
    pub dry_run: bool,
}

impl SyncReport {
    /// Returns whether anything moved: a session pushed, pulled, uploaded, downloaded or
    /// merged, or a blob copied (a dry run: would move).
    pub fn moved(&self) -> bool {
        let c = self.counts();
        c.pushed + c.pulled + c.merged + self.blobs_uploaded + self.blobs_downloaded > 0
    }

    /// Returns the outcomes counted.
    pub fn counts(&self) -> SyncCounts {
        let mut c = SyncCounts::default();
        for s in &self.sessions {
            match s.outcome {
                SyncOutcome::Unchanged => c.unchanged += 1,
                SyncOutcome::Pushed { .. } | SyncOutcome::Uploaded => c.pushed += 1,
                SyncOutcome::Pulled { .. } | SyncOutcome::Downloaded => c.pulled += 1,
                SyncOutcome::Merged { .. } => c.merged += 1,
                SyncOutcome::Conflict { .. } => c.conflicts += 1,
                SyncOutcome::Skipped { .. } => c.skipped += 1,
                SyncOutcome::Failed(_) => c.failed += 1,
            }
        }
        c
    }
}

/// Where a sync is: after each session.
#[derive(Debug)]
#[non_exhaustive]
pub struct SyncProgress<'a> {
    /// Sessions done.
    pub done: usize,
    /// Sessions in all.
    pub total: usize,
    /// The session just done.
    pub session: &'a SessionSync,
}

/// Why a sync failed as a whole (one session's failure is its
/// [`SyncOutcome::Failed`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SyncError {
    /// A storage operation failed (its error names the path).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A job failed.
    #[error(transparent)]
    Job(#[from] JobError),
    /// A session kept changing while it was synced.
    #[error("{}: changed by another writer in each of {SYNC_ROUNDS} rounds; run the sync again", path.display())]
    KeptChanging {
        /// The session.
        path: PathBuf,
    },
    /// A file is not what the layout says it is.
    #[error("{}: {what}", path.display())]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
}

/// One session of either side, before it is synced.
#[derive(Clone, Debug)]
struct Side {
    path: PathBuf,
    /// Its stat: always for a local file, for a remote one found by [`Storage::stat`].
    stat: Option<FileStat>,
    /// Its version ([`Storage::list_versions`]): for a remote file found by a listing.
    version: Option<String>,
}

/// A session's two sides.
#[derive(Debug, Default)]
struct Pair {
    local: Option<Side>,
    remote: Option<Side>,
    /// More files of the same dialect and name (in other folders): left alone.
    extra: Vec<PathBuf>,
}

/// Syncs the sessions of `local` with `remote` (see the module docs), calling `progress`
/// after each session.
///
/// # Errors
///
/// Listing either side or reading or writing the state file failed; one session's error
/// is its [`SyncOutcome::Failed`].
pub fn sync(
    local: &SyncLocal,
    remote: &SyncRemote,
    options: &SyncOptions,
    progress: &mut dyn FnMut(&SyncProgress<'_>),
) -> Result<SyncReport, SyncError> {
    let state = state::read(&local.state_dir, &remote.url, &remote.prefix)?;
    let pairs = pairs(local, remote, options, &state)?;
    let mut run = Run {
        local,
        remote,
        options,
        state,
        report: SyncReport { dry_run: options.dry_run, ..SyncReport::default() },
        roots: None,
        outside: false,
        blobs_missing: false,
        listed: None,
    };
    let before = run.state.clone();
    let total = pairs.len();
    for (done, ((d, name), pair)) in pairs.into_iter().enumerate() {
        let dialect = if d == 0 { Dialect::Pi } else { Dialect::Omp };
        let mut s = SessionSync {
            dialect,
            name: name.clone(),
            project: None,
            local: pair.local.as_ref().map(|s| s.path.clone()),
            remote: pair.remote.as_ref().map(|s| s.path.clone()),
            outcome: SyncOutcome::Unchanged,
        };
        run.outside = false;
        s.outcome = if let Some(other) = pair.extra.first() {
            SyncOutcome::Skipped { reason: format!("another file of this name at {}", other.display()) }
        } else {
            match run.one(dialect, &name, &pair, &mut s) {
                Ok(o) => o,
                Err(e) => SyncOutcome::Failed(Box::new(e)),
            }
        };
        progress(&SyncProgress { done: done + 1, total, session: &s });
        if !run.outside {
            run.report.sessions.push(s);
        }
    }
    if !options.dry_run && run.state != before {
        run.report.state_file = Some(state::write(&local.state_dir, &remote.url, &remote.prefix, &run.state)?);
    }
    Ok(run.report)
}

/// A session's key: its dialect (0 pi, 1 omp) and file name.
type Key = (u8, String);

fn key(dialect: Dialect, name: String) -> Key {
    (u8::from(dialect == Dialect::Omp), name)
}

/// Returns the sessions of both sides paired by dialect and name: every one, or with
/// [`SyncOptions::only`] those local files, each with the remote copy the state notes
/// for it (the remote's folders of a dialect listed only for one it notes none for).
fn pairs(
    local: &SyncLocal,
    remote: &SyncRemote,
    options: &SyncOptions,
    state: &state::State,
) -> Result<BTreeMap<Key, Pair>, SyncError> {
    let mut pairs: BTreeMap<Key, Pair> = BTreeMap::new();
    let dialects = dialects(local);
    for home in &dialects {
        for (name, side) in local_sessions(local.storage.as_ref(), &home.sessions_root)? {
            add(&mut pairs, home.dialect, name, side, true);
        }
    }
    let Some(only) = &options.only else {
        for home in &dialects {
            list_remote(remote, home.dialect, &mut pairs, &|_| true)?;
        }
        return Ok(pairs);
    };
    pairs.retain(|_, p| p.local.iter().map(|s| &s.path).chain(&p.extra).any(|path| only.contains(path)));
    let mut noted: HashMap<&Path, Vec<&Path>> = HashMap::new();
    for (at, seen) in &state.sessions {
        noted.entry(seen.local.as_path()).or_default().push(at.as_path());
    }
    let mut unknown = BTreeSet::new();
    for (key, pair) in &mut pairs {
        // Two files of one name here are left alone whatever the remote holds.
        let Some(l) = pair.local.as_ref().filter(|_| pair.extra.is_empty()) else { continue };
        let side = match noted.get(l.path.as_path()).map(Vec::as_slice) {
            // A copy that cannot be looked at now is found again by a listing.
            Some([at]) => remote.storage.stat(at).ok().flatten().filter(|s| s.is_file).map(|stat| Side {
                path: at.to_path_buf(),
                stat: Some(stat),
                version: None,
            }),
            _ => None,
        };
        match side {
            Some(side) => pair.remote = Some(side),
            None => {
                unknown.insert(key.clone());
            }
        }
    }
    for home in &dialects {
        let d = u8::from(home.dialect == Dialect::Omp);
        if unknown.iter().any(|k: &Key| k.0 == d) {
            list_remote(remote, home.dialect, &mut pairs, &|k| unknown.contains(k))?;
        }
    }
    Ok(pairs)
}

/// Returns the homes of `local`, the first of each dialect.
fn dialects(local: &SyncLocal) -> Vec<&AgentDirs> {
    let mut out: Vec<&AgentDirs> = Vec::new();
    for home in &local.homes {
        if !out.iter().any(|h| h.dialect == home.dialect) {
            out.push(home);
        }
    }
    out
}

/// Adds the remote sessions of `dialect` whose keys `wanted` takes, each project folder
/// listed once with its files' versions (on object storage, one request: no head read).
fn list_remote(
    remote: &SyncRemote,
    dialect: Dialect,
    pairs: &mut BTreeMap<Key, Pair>,
    wanted: &dyn Fn(&Key) -> bool,
) -> Result<(), StoreError> {
    let root = remote.sessions_dir(dialect);
    for slug in dirs(remote.storage.as_ref(), &root)? {
        let dir = root.join(&slug);
        for (name, version) in remote.storage.list_versions(&dir)? {
            if name.ends_with(".jsonl") && is_plain_name(&name) && wanted(&key(dialect, name.clone())) {
                let path = dir.join(&name);
                add(pairs, dialect, name, Side { path, stat: None, version: Some(version) }, false);
            }
        }
    }
    Ok(())
}

fn add(pairs: &mut BTreeMap<Key, Pair>, dialect: Dialect, name: String, side: Side, local: bool) {
    let pair = pairs.entry(key(dialect, name)).or_default();
    let slot = if local { &mut pair.local } else { &mut pair.remote };
    match slot {
        Some(_) => pair.extra.push(side.path),
        None => *slot = Some(side),
    }
}

/// Returns the names of the folders directly in `dir` (none when it is missing).
fn dirs(storage: &dyn Storage, dir: &Path) -> Result<Vec<String>, StoreError> {
    let entries = unless_missing(storage.read_dir(dir))?.unwrap_or_default();
    let mut out: Vec<String> = entries.into_iter().filter(|e| e.kind == EntryKind::Dir).map(|e| e.name).collect();
    out.sort();
    Ok(out)
}

/// Returns the session files of each bucket below `root`, with their stats.
fn local_sessions(storage: &dyn Storage, root: &Path) -> Result<Vec<(String, Side)>, StoreError> {
    let mut out = Vec::new();
    for bucket in dirs(storage, root)? {
        let dir = root.join(&bucket);
        for (name, stat) in storage.list_stats(&dir)? {
            if name.ends_with(".jsonl") {
                out.push((name.clone(), Side { path: dir.join(&name), stat: Some(stat), version: None }));
            }
        }
    }
    Ok(out)
}

/// What an attempt at one session came to.
enum Step {
    Done(SyncOutcome),
    /// Another writer changed a side between our read and our write: read again.
    Again,
}

struct Run<'a> {
    local: &'a SyncLocal,
    remote: &'a SyncRemote,
    options: &'a SyncOptions,
    state: state::State,
    report: SyncReport,
    /// Project id → folder here, from the local sessions' own folders (found once, when
    /// a download first needs it).
    roots: Option<HashMap<String, PathBuf>>,
    /// The session just looked at is outside [`SyncOptions::projects`]: it is left out
    /// of the report.
    outside: bool,
    /// A blob the session just synced names is on neither side yet (its session was
    /// written before it): the session is not noted as synced, so the next sync looks
    /// at it again.
    blobs_missing: bool,
    /// The version the remote listing gave the session just looked at.
    listed: Option<String>,
}

impl Run<'_> {
    /// Notes that the session is outside the projects asked for.
    fn out_of_scope(&mut self) -> SyncOutcome {
        self.outside = true;
        SyncOutcome::Skipped { reason: "not in the projects asked for".to_owned() }
    }

    fn one(
        &mut self,
        dialect: Dialect,
        name: &str,
        pair: &Pair,
        s: &mut SessionSync,
    ) -> Result<SyncOutcome, SyncError> {
        // The remote copy's version as listed: noted for a copy this sync reads but does
        // not write (the listing came before the read, so a change since shows next time).
        self.listed = pair.remote.as_ref().and_then(|r| r.version.clone());
        match (&pair.local, &pair.remote) {
            (Some(l), Some(r)) => {
                // Here sizes and times both: a change in place that keeps the size (omp's
                // title slot) moves the time. There the version a listing gives, or the
                // size and time a stat gives.
                let here_same = |seen: &state::Seen| {
                    l.stat.is_some_and(|st| seen.local_size == st.size && seen.local_mtime == Some(st.mtime_ms))
                };
                let there_same = |seen: &state::Seen| match (&r.version, &r.stat) {
                    (Some(v), _) => seen.remote_version.as_deref() == Some(v.as_str()),
                    (None, Some(st)) => seen.remote_size == st.size && seen.remote_mtime == Some(st.mtime_ms),
                    (None, None) => false,
                };
                if let Some(seen) = self.state.sessions.get(&r.path)
                    && seen.local == l.path
                    && here_same(seen)
                    && there_same(seen)
                    && self.wanted_here(&l.path)?
                {
                    return Ok(SyncOutcome::Unchanged);
                }
                // The remote copy is as the last sync left it and only this one grew: its
                // new lines go there without reading the remote copy.
                let grew = |seen: &state::Seen| l.stat.is_some_and(|st| st.size > seen.local_size);
                let seen = self
                    .state
                    .sessions
                    .get(&r.path)
                    .filter(|seen| seen.local == l.path && there_same(seen) && grew(seen) && !self.options.dry_run);
                if let Some(seen) = seen.cloned()
                    && let Some(outcome) = self.push_tail(dialect, &l.path, &r.path, &seen, s)?
                {
                    return Ok(outcome);
                }
                self.reconcile(dialect, &l.path, &r.path, s)
            }
            (Some(l), None) => self.upload(dialect, name, &l.path, s),
            (None, Some(r)) => self.download(dialect, name, &r.path, s),
            (None, None) => Ok(SyncOutcome::Unchanged),
        }
    }

    /// Fast-forwards the remote copy `remote`, which is as the last sync left it (`seen`),
    /// without the sync reading it: when the local copy still begins with the bytes noted then
    /// (their hash), its whole lines after them are appended there on the condition that
    /// the remote copy still has the size noted. `None` when that does not hold (the
    /// local copy changed before its end, or the remote one since its listing): the
    /// session is then synced by reading both.
    fn push_tail(
        &mut self,
        dialect: Dialect,
        local: &Path,
        remote: &Path,
        seen: &state::Seen,
        s: &mut SessionSync,
    ) -> Result<Option<SyncOutcome>, SyncError> {
        let (ls, lr) = (self.local.storage.as_ref(), self.remote.storage.as_ref());
        let mut lbytes = Vec::new();
        let (lstat, n) = ls.read_into(local, &mut lbytes)?;
        lbytes.truncate(n);
        lbytes.truncate(complete_lines(&lbytes));
        let Ok(noted) = usize::try_from(seen.local_size) else { return Ok(None) };
        if lbytes.len() <= noted {
            return Ok(None);
        }
        // One pass over the bytes: the hash of the part noted, then of the whole.
        let mut hasher = BlobHasher::new();
        hasher.update(&lbytes[..noted]);
        if hasher.clone().finish().hash() != seen.sha256 {
            return Ok(None);
        }
        let Some(lcwd) = splice::header_cwd(&lbytes).map(|c| c.value) else { return Ok(None) };
        if !self.wanted(Path::new(&lcwd)) {
            return Ok(None);
        }
        s.project = Some(project_of(ls, &self.options.map, &lcwd).id);
        let tail = &lbytes[noted..];
        hasher.update(tail);
        // Blobs first, so that a session is never on a side before the blobs it names.
        self.blobs(dialect, tail, b"")?;
        // The listing was taken before the sessions synced so far: the remote copy is
        // looked at again (no bytes fetched), so that a rewrite of the same size since
        // (omp's title slot on another machine) is read, not appended to.
        if lr.stat_version(remote)?.map(|(_, v)| v) != seen.remote_version {
            return Ok(None);
        }
        let made = match lr.append_expected_versioned(remote, tail, ExpectedSize::Bytes(seen.remote_size)) {
            Err(StoreError::Conflict { .. }) => return Ok(None),
            r => r?,
        };
        let size = seen.remote_size + tail.len() as u64;
        let (rmtime, rversion) = version_after(lr, remote, size, made);
        let there = There(size, rmtime, rversion);
        self.remember_hashed(remote, local, &lbytes, hasher.finish(), Some(lstat.mtime_ms), there);
        Ok(Some(SyncOutcome::Pushed { bytes: tail.len() as u64 }))
    }

    /// Returns whether the local session at `path` is in the projects asked for.
    fn wanted_here(&self, path: &Path) -> Result<bool, SyncError> {
        if self.options.projects.is_empty() {
            return Ok(true);
        }
        let cwd = read_head_cwd(self.local.storage.as_ref(), path)?;
        Ok(cwd.is_some_and(|c| self.wanted(Path::new(&c))))
    }

    fn wanted(&self, cwd: &Path) -> bool {
        let cwd = project::lexical(cwd);
        self.options.projects.is_empty() || self.options.projects.iter().any(|p| project::below(&cwd, p).is_some())
    }

    fn reconcile(
        &mut self,
        dialect: Dialect,
        local: &Path,
        remote: &Path,
        s: &mut SessionSync,
    ) -> Result<SyncOutcome, SyncError> {
        for _ in 0..SYNC_ROUNDS {
            if let Step::Done(o) = self.reconcile_once(dialect, local, remote, s)? {
                return Ok(o);
            }
        }
        Err(SyncError::KeptChanging { path: local.to_path_buf() })
    }

    fn reconcile_once(
        &mut self,
        dialect: Dialect,
        local: &Path,
        remote: &Path,
        s: &mut SessionSync,
    ) -> Result<Step, SyncError> {
        let (ls, lr) = (self.local.storage.as_ref(), self.remote.storage.as_ref());
        let mut lbytes = Vec::new();
        let (lstat, n) = ls.read_into(local, &mut lbytes)?;
        lbytes.truncate(n);
        // A last line without its newline is being written (or was cut off): only whole
        // lines go anywhere, and this copy is written to only when it has none.
        let whole = complete_lines(&lbytes);
        let torn_here = whole < lbytes.len();
        lbytes.truncate(whole);
        let Some(lcwd) = splice::header_cwd(&lbytes).map(|c| c.value) else {
            return Ok(Step::Done(skip(local, "no session header with a cwd")));
        };
        if !self.wanted(Path::new(&lcwd)) {
            return Ok(Step::Done(self.out_of_scope()));
        }
        s.project = Some(project_of(ls, &self.options.map, &lcwd).id);
        let mut rbytes = Vec::new();
        let (rstat, n) = lr.read_into(remote, &mut rbytes)?;
        rbytes.truncate(n);
        let rsize = rbytes.len() as u64;
        if complete_lines(&rbytes) < rbytes.len() {
            return Ok(Step::Done(skip(remote, "the remote copy ends inside a line; repair it there first")));
        }
        // The times the two copies had when read: noted for a side this sync leaves as it
        // was (a change since makes the next listing show another).
        let (lmtime, rmtime) = (Some(lstat.mtime_ms), Some(rstat.mtime_ms));
        let Some(rcwd) = splice::header_cwd(&rbytes).map(|c| c.value) else {
            return Ok(Step::Done(skip(remote, "no session header with a cwd")));
        };
        let dry = self.options.dry_run;
        // Blobs first, so that a session is never on a side before the blobs it names.
        self.blobs_missing = false;
        if !dry {
            self.blobs(dialect, &lbytes, &rbytes)?;
        }
        // Our bytes as the remote keeps them (its own `cwd`).
        let as_remote = splice::with_cwd(&lbytes, &rcwd).unwrap_or_else(|| lbytes.clone());
        let busy = || skip(local, "its last line is still being written; sync again");
        let outcome = if as_remote == rbytes {
            SyncOutcome::Unchanged
        } else if as_remote.starts_with(&rbytes) {
            let tail = &as_remote[rbytes.len()..];
            let mut made = None;
            if !dry {
                made = match lr.append_expected_versioned(remote, tail, ExpectedSize::Bytes(rsize)) {
                    Err(StoreError::Conflict { .. }) => return Ok(Step::Again),
                    r => r?,
                };
            }
            let (rmtime, rversion) =
                if dry { (rmtime, None) } else { version_after(lr, remote, as_remote.len() as u64, made) };
            self.remember(remote, local, &lbytes, lmtime, There(as_remote.len() as u64, rmtime, rversion));
            SyncOutcome::Pushed { bytes: tail.len() as u64 }
        } else if torn_here {
            // Taking the remote's tail, or a merge, would write over a line being written.
            return Ok(Step::Done(busy()));
        } else if rbytes.starts_with(&as_remote) {
            let tail = &rbytes[as_remote.len()..];
            let mut now = lbytes.clone();
            now.extend_from_slice(tail);
            let mut lmtime = lmtime;
            if !dry {
                let _lock = ls.lock(local, LockWait::Timeout(LOCK_WAIT))?;
                match ls.append_expected(local, tail, ExpectedSize::unchanged(Some(&lstat))) {
                    Err(StoreError::Conflict { .. }) => return Ok(Step::Again),
                    r => r?,
                }
                lmtime = mtime_after(ls, local, now.len() as u64);
            }
            self.remember(remote, local, &now, lmtime, There(rsize, rmtime, self.listed.clone()));
            SyncOutcome::Pulled { bytes: tail.len() as u64 }
        } else {
            // The remote copy as ours would be (our `cwd`).
            let theirs = splice::with_cwd(&rbytes, &lcwd).unwrap_or_else(|| rbytes.clone());
            let merged = match merge_bytes(
                MergeInput { path: local, bytes: &lbytes },
                MergeInput { path: remote, bytes: &theirs },
                dialect,
                &MergeLeaf::Auto,
            ) {
                Ok(m) => m,
                Err(e) => return Ok(Step::Done(conflict(e))),
            };
            let remote_added = added_to(&rbytes, &merged.bytes, dialect);
            // One copy already holds every entry of the other (in another order, or with
            // other bytes for an entry): that copy is the result, so that two machines
            // agree on it; only two continuations make a new file. A tie (the same
            // entries, some with other bytes: a repair or a migration on one side) goes to
            // ours when only ours changed since the last sync, else to the remote: the
            // first machine to write it decides, and every other one takes its file.
            let ours_only = self.state.sessions.get(remote).is_some_and(|seen| {
                seen.local == local
                    && seen.remote_size == rsize
                    // Unknown (a state file of version 1): the size decides, as it did.
                    && seen.remote_mtime.is_none_or(|t| t == rstat.mtime_ms)
                    && seen.sha256 != BlobRef::for_bytes(&lbytes).hash()
            });
            let (new_local, new_remote) = if remote_added == 0 && !(ours_only && merged.added.is_empty()) {
                (theirs.clone(), rbytes.clone())
            } else if merged.added.is_empty() {
                (lbytes.clone(), as_remote.clone())
            } else {
                let new_remote = splice::with_cwd(&merged.bytes, &rcwd).unwrap_or_else(|| merged.bytes.clone());
                (merged.bytes, new_remote)
            };
            let (mut lmtime, mut rmtime, mut rversion) = (lmtime, rmtime, self.listed.clone());
            if !dry {
                if new_remote != rbytes {
                    let made = match lr.write_atomic_versioned(remote, &new_remote, ExpectedSize::Bytes(rsize)) {
                        Err(StoreError::Conflict { .. }) => return Ok(Step::Again),
                        r => r?,
                    };
                    (rmtime, rversion) = version_after(lr, remote, new_remote.len() as u64, made);
                }
                if new_local != lbytes {
                    let _lock = ls.lock(local, LockWait::Timeout(LOCK_WAIT))?;
                    match ls.write_atomic(local, &new_local, ExpectedSize::unchanged(Some(&lstat))) {
                        Err(StoreError::Conflict { .. }) => return Ok(Step::Again),
                        r => r?,
                    }
                    lmtime = mtime_after(ls, local, new_local.len() as u64);
                }
            }
            self.remember(remote, local, &new_local, lmtime, There(new_remote.len() as u64, rmtime, rversion));
            let (grew_here, grew_there) =
                (new_local.len().saturating_sub(lbytes.len()), new_remote.len().saturating_sub(rbytes.len()));
            if new_local == lbytes {
                SyncOutcome::Pushed { bytes: grew_there as u64 }
            } else if new_remote == rbytes {
                SyncOutcome::Pulled { bytes: grew_here as u64 }
            } else {
                SyncOutcome::Merged { local_added: merged.added.len(), remote_added }
            }
        };
        if matches!(outcome, SyncOutcome::Unchanged) {
            self.remember(remote, local, &lbytes, lmtime, There(rsize, rmtime, self.listed.clone()));
        }
        Ok(Step::Done(outcome))
    }

    fn upload(
        &mut self,
        dialect: Dialect,
        name: &str,
        local: &Path,
        s: &mut SessionSync,
    ) -> Result<SyncOutcome, SyncError> {
        let ls = self.local.storage.as_ref();
        let mut lbytes = Vec::new();
        let (lstat, n) = ls.read_into(local, &mut lbytes)?;
        // Only whole lines go up (a last line without its newline is being written).
        lbytes.truncate(complete_lines(&lbytes[..n]));
        let Some(cwd) = splice::header_cwd(&lbytes).map(|c| c.value) else {
            return Ok(skip(local, "no session header with a cwd"));
        };
        if !self.wanted(Path::new(&cwd)) {
            return Ok(self.out_of_scope());
        }
        let project = project_of(ls, &self.options.map, &cwd);
        let dir = self.remote.sessions_dir(dialect).join(project_slug(&project.id));
        let path = dir.join(name);
        s.project = Some(project.id.clone());
        s.remote = Some(path.clone());
        if self.options.dry_run {
            return Ok(SyncOutcome::Uploaded);
        }
        self.blobs(dialect, &lbytes, &[])?;
        let lr = self.remote.storage.as_ref();
        lr.ensure_dir(&dir)?;
        let meta = serde_json::json!({
            "project": project.id,
            "cwd": cwd,
            "path": project.rel.to_string_lossy(),
        });
        let mut text = meta.to_string().into_bytes();
        text.push(b'\n');
        match lr.write_atomic(&meta_path(&path), &text, ExpectedSize::Missing) {
            // Another machine's upload of this session: its sidecar stays.
            Ok(()) | Err(StoreError::Conflict { .. } | StoreError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        let made = match lr.write_atomic_versioned(&path, &lbytes, ExpectedSize::Missing) {
            Ok(made) => made,
            // Uploaded meanwhile from elsewhere: the two copies are synced as any.
            Err(StoreError::Conflict { .. } | StoreError::AlreadyExists { .. }) => {
                return self.reconcile(dialect, local, &path, s);
            }
            Err(e) => return Err(e.into()),
        };
        let (rmtime, rversion) = version_after(lr, &path, lbytes.len() as u64, made);
        self.remember(&path, local, &lbytes, Some(lstat.mtime_ms), There(lbytes.len() as u64, rmtime, rversion));
        Ok(SyncOutcome::Uploaded)
    }

    fn download(
        &mut self,
        dialect: Dialect,
        name: &str,
        remote: &Path,
        s: &mut SessionSync,
    ) -> Result<SyncOutcome, SyncError> {
        let lr = self.remote.storage.as_ref();
        let meta_at = meta_path(remote);
        let Some(meta) = unless_missing(lr.read(&meta_at))? else {
            return Ok(skip(remote, &format!("no {} beside it names its project", meta_at.display())));
        };
        let (id, rel) = parse_meta(&meta).ok_or_else(|| SyncError::Damaged {
            path: meta_at.clone(),
            what: "not a sync sidecar ({\"project\", \"cwd\", \"path\"})".to_owned(),
        })?;
        s.project = Some(id.clone());
        let Some(root) = self.root_of(&id)? else {
            return Ok(SyncOutcome::Skipped {
                reason: format!("project {id} has no folder on this machine; pass --map {id}=PATH"),
            });
        };
        let cwd = if rel.as_os_str().is_empty() { root } else { root.join(rel) };
        if !self.wanted(&cwd) {
            return Ok(self.out_of_scope());
        }
        let cwd = cwd.to_string_lossy().into_owned();
        let Some(home) = self.local.homes.iter().find(|h| h.dialect == dialect) else {
            return Ok(skip(remote, "no home of its agent here"));
        };
        let dir = home.default_session_dir(&cwd);
        let path = dir.join(name);
        s.local = Some(path.clone());
        let mut rbytes = Vec::new();
        let (rstat, n) = lr.read_into(remote, &mut rbytes)?;
        rbytes.truncate(n);
        if complete_lines(&rbytes) < rbytes.len() {
            return Ok(skip(remote, "the remote copy ends inside a line; repair it there first"));
        }
        let Some(lbytes) = splice::with_cwd(&rbytes, &cwd) else {
            return Ok(skip(remote, "no session header with a cwd"));
        };
        if self.options.dry_run {
            return Ok(SyncOutcome::Downloaded);
        }
        self.blobs(dialect, &lbytes, &rbytes)?;
        let ls = self.local.storage.as_ref();
        ls.ensure_dir(&dir)?;
        match ls.write_atomic(&path, &lbytes, ExpectedSize::Missing) {
            Ok(()) => {}
            Err(StoreError::Conflict { .. } | StoreError::AlreadyExists { .. }) => {
                return self.reconcile(dialect, &path, remote, s);
            }
            Err(e) => return Err(e.into()),
        }
        let lmtime = mtime_after(ls, &path, lbytes.len() as u64);
        let there = There(rbytes.len() as u64, Some(rstat.mtime_ms), self.listed.clone());
        self.remember(remote, &path, &lbytes, lmtime, there);
        Ok(SyncOutcome::Downloaded)
    }

    /// Returns the folder here of the project `id`: mapped, else that of a local session
    /// of the project, else the id itself when it is an absolute folder.
    fn root_of(&mut self, id: &str) -> Result<Option<PathBuf>, SyncError> {
        if let Some(dir) = self.options.map.folder(id) {
            return Ok(Some(dir.to_path_buf()));
        }
        if self.roots.is_none() {
            let mut roots = HashMap::new();
            let ls = self.local.storage.as_ref();
            let mut seen = HashSet::new();
            for home in &self.local.homes {
                for (_, side) in local_sessions(ls, &home.sessions_root)? {
                    let Some(cwd) = read_head_cwd(ls, &side.path)? else { continue };
                    if seen.insert(cwd.clone()) {
                        let p = project_of(ls, &self.options.map, &cwd);
                        roots.entry(p.id).or_insert(p.root);
                    }
                }
            }
            self.roots = Some(roots);
        }
        if let Some(dir) = self.roots.as_ref().and_then(|r| r.get(id)) {
            return Ok(Some(dir.clone()));
        }
        Ok(Path::new(id).is_absolute().then(|| PathBuf::from(id)))
    }

    /// Notes what both sides hold after a sync of a session: the local bytes, the remote
    /// size, each side's modification time and the remote version where known.
    fn remember(&mut self, remote: &Path, local: &Path, local_bytes: &[u8], local_mtime: Option<i64>, there: There) {
        self.remember_hashed(remote, local, local_bytes, BlobRef::for_bytes(local_bytes), local_mtime, there);
    }

    /// [`Run::remember`] with the hash of `local_bytes` already taken.
    fn remember_hashed(
        &mut self,
        remote: &Path,
        local: &Path,
        local_bytes: &[u8],
        hash: BlobRef,
        local_mtime: Option<i64>,
        there: There,
    ) {
        let There(remote_size, remote_mtime, remote_version) = there;
        // A time within a moment of now may stay the same through one more write (file
        // times are coarser than writes: git's "racy clean" case): not noted, so the
        // next sync reads the file.
        let racy_ms = session_store::FileIdentity::RACY_NS / 1_000_000;
        let now = session_store::clock::Clock::now_ms(&session_store::clock::SystemClock);
        let local_mtime = local_mtime.filter(|t| now.saturating_sub(*t) >= racy_ms);
        if self.blobs_missing {
            self.state.sessions.remove(remote);
            return;
        }
        let seen = state::Seen {
            local: local.to_path_buf(),
            local_size: local_bytes.len() as u64,
            local_mtime,
            remote_size,
            remote_mtime,
            remote_version,
            sha256: hash.hash().to_owned(),
        };
        self.state.sessions.insert(remote.to_path_buf(), seen);
    }

    /// Copies the blobs `local` names that the remote lacks there, and those `remote`
    /// names that this machine lacks here (an omp session's: pi's name none), starting
    /// the session's note of blobs missing on both sides afresh.
    fn blobs(&mut self, dialect: Dialect, local: &[u8], remote: &[u8]) -> Result<(), SyncError> {
        self.blobs_missing = false;
        let Some(store) = self.local.blobs.as_ref().filter(|_| dialect == Dialect::Omp) else { return Ok(()) };
        let lr = self.remote.storage.as_ref();
        let mut done = HashSet::new();
        for blob in find_refs(local) {
            if !done.insert(blob.clone()) {
                continue;
            }
            let at = self.remote.blob_path(&blob);
            if lr.exists(&at)? {
                continue;
            }
            let Some(bytes) = store.get(&blob)? else { continue };
            if let Some(dir) = at.parent() {
                lr.ensure_dir(dir)?;
            }
            match lr.write_new(&at, &bytes) {
                Ok(()) => self.report.blobs_uploaded += 1,
                Err(StoreError::AlreadyExists { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let mut wanted = HashSet::new();
        for blob in find_refs(remote).chain(find_refs(local)) {
            if !wanted.insert(blob.clone()) || store.has(&blob)? {
                continue;
            }
            let at = self.remote.blob_path(&blob);
            let Some(bytes) = unless_missing(lr.read(&at))? else {
                self.blobs_missing = true;
                continue;
            };
            if BlobRef::for_bytes(&bytes) != blob {
                return Err(SyncError::Damaged { path: at, what: "its bytes do not hash to its name".to_owned() });
            }
            store.put(&bytes, None)?;
            self.report.blobs_downloaded += 1;
        }
        Ok(())
    }
}

/// Returns the modification time of `path` after this sync wrote `size` bytes there: the
/// storage's, when it still shows that size; else `None`, and the next sync reads the
/// session (another writer got in, or the storage could not say).
fn mtime_after(storage: &dyn Storage, path: &Path, size: u64) -> Option<i64> {
    // The state only saves reads: a stat that fails costs the next sync one read.
    match storage.stat(path) {
        Ok(Some(stat)) if stat.is_file && stat.size == size => Some(stat.mtime_ms),
        _ => None,
    }
}

/// The remote copy as a sync leaves it: its size, and its modification time and version
/// where known.
struct There(u64, Option<i64>, Option<String>);

/// Returns the modification time and version of the remote copy `path` after this sync
/// wrote `size` bytes there: those the write returned (`made`), else those
/// [`Storage::stat_version`] shows when it still shows that size (a write by another
/// machine in between, of the same size, would be taken for ours: storages that return
/// their writes' versions have no such window); else `None`s, and the next sync reads
/// the session.
fn version_after(
    storage: &dyn Storage,
    path: &Path,
    size: u64,
    made: Option<(FileStat, String)>,
) -> (Option<i64>, Option<String>) {
    if let Some((stat, version)) = made.filter(|(stat, _)| stat.size == size) {
        return (Some(stat.mtime_ms), Some(version));
    }
    match storage.stat_version(path) {
        Ok(Some((stat, version))) if stat.size == size => (Some(stat.mtime_ms), Some(version)),
        _ => (None, None),
    }
}

/// The length of `bytes` up to and with its last newline: its whole lines.
fn complete_lines(bytes: &[u8]) -> usize {
    memchr::memrchr(b'\n', bytes).map_or(0, |i| i + 1)
}

fn skip(path: &Path, why: &str) -> SyncOutcome {
    SyncOutcome::Skipped { reason: format!("{}: {why}", path.display()) }
}

/// Returns the outcome of a merge that could not be made.
fn conflict(e: JobError) -> SyncOutcome {
    let detail = e.to_string();
    let (reason, entry) = match e {
        JobError::MergeConflict { id, .. } => (ConflictReason::EntryDisagrees, Some(id)),
        JobError::NotTheSameSession { .. } => (ConflictReason::DifferentSessions, None),
        JobError::BadLeaf { id, .. } => (ConflictReason::NoLeaf, Some(id)),
        _ => (ConflictReason::Unsupported, None),
    };
    SyncOutcome::Conflict { reason, entry, detail }
}

/// Returns how many entries `after` holds that `before` lacks.
fn added_to(before: &[u8], after: &[u8], dialect: Dialect) -> usize {
    let ids = |b: &[u8]| -> HashSet<String> {
        let parsed = session_model::parse_session_bytes(b, dialect);
        parsed.records.iter().skip(1).filter_map(|r| r.id().map(str::to_owned)).collect()
    };
    let had = ids(before);
    ids(after).difference(&had).count()
}

/// Returns the sidecar of a remote session file.
fn meta_path(session: &Path) -> PathBuf {
    let name = session.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.strip_suffix(".jsonl").unwrap_or(&name);
    session.with_file_name(format!("{stem}{META_SUFFIX}"))
}

/// Returns the project id and the folder below the project of a sidecar.
fn parse_meta(bytes: &[u8]) -> Option<(String, PathBuf)> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let id = v.get("project")?.as_str()?.to_owned();
    let rel = PathBuf::from(v.get("path").and_then(|p| p.as_str()).unwrap_or(""));
    // The folder below the project stays below it.
    if !rel.components().all(|c| matches!(c, std::path::Component::Normal(_))) {
        return None;
    }
    Some((id, rel))
}

/// Returns the header's `cwd` of a local session, reading its start first.
fn read_head_cwd(storage: &dyn Storage, path: &Path) -> Result<Option<String>, StoreError> {
    let (head, _) = storage.read_slices(path, HEAD_WINDOW, 0)?;
    if let Some(c) = splice::header_cwd(&head) {
        return Ok(Some(c.value));
    }
    if (head.len() as u64) < HEAD_WINDOW {
        return Ok(None);
    }
    Ok(splice::header_cwd(&storage.read(path)?).map(|c| c.value))
}
