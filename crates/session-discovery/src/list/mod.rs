//! [`Discovery`]: the builder, and the listings (`list`, `list_all`, `list_others`)
//! through the listing cache or a storage's notes.
//!
//! Split by concern: [`files`] finds the files a listing reads, [`pool`] scans them on
//! worker threads, [`notes`] keeps what was learned beside the files of a storage that
//! keeps notes, [`lookup`] answers the lookups built on a listing (by id, most recent,
//! `--resume`, recent sessions), [`pins`] reads omp's pinned sessions. The references'
//! orders are `crate::sort`, omp's backup recovery `crate::recover`, the listing cache
//! `crate::cache`.

mod files;
mod lookup;
mod notes;
mod pins;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use session_model::{Dialect, Parallelism};
use session_store::clock::{Clock, SystemClock};
use session_store::{FileStat, FileStorage, PrivateDir, Storage};

use self::files::{Listed, bucket_files, omp_dir_files, pi_dir_files};
use self::notes::{NOTE_OMP, NOTE_OMP_PREFIX, NOTE_OTHERS, NOTE_PI};
use crate::cache::ListCache;
use crate::env::{AgentDirs, ProcessEnv};
use crate::error::DiscoveryError;
use crate::info::MessagesText;
use crate::info::SessionInfo;
use crate::recover::recover_orphaned_backups;
use crate::sort::{collation_key, sort_by_modified, sort_omp};
use crate::{io, omp_scan, pi_scan};

pub use self::lookup::{RecentSession, ResumeTarget, Scope, time_ago};
pub use self::pins::{PINS_FILE, parse_pins};

/// Progress of a listing, reported once per file in completion order.
#[derive(Debug)]
pub struct Progress<'a> {
    /// Files done so far.
    pub loaded: usize,
    /// Files to do (every `.jsonl`, including invalid and filtered ones).
    pub total: usize,
    /// At the points where pi publishes a partial list (first file, every 10th —
    /// every 100th for `list_all` —, last), the sessions found so far (after the cwd
    /// filter), in completion order; sort them by `modified` to display.
    pub partial: Option<&'a [SessionInfo]>,
    /// The `.jsonl` entries of the listed directories that are not regular files
    /// (FIFOs, sockets, devices) and were skipped without being opened, so that
    /// nobody who can create a file there can make a listing wait; the same slice
    /// at every report.
    pub skipped: &'a [PathBuf],
}

/// Discovery over one dialect's directories. Every command of the CLI is one call.
///
/// Sessions are read through a [`Storage`]: the file storage by default,
/// any other backend with [`Discovery::with_storage`].
#[derive(Clone)]
pub struct Discovery {
    dirs: AgentDirs,
    storage: Arc<dyn Storage>,
    /// How many threads a listing scans files on.
    parallelism: Parallelism,
    /// Where the listing cache lives and the smallest listing it is used for.
    cache: Option<(PrivateDir, usize)>,
    /// Never create, move or rename anything in the agents' directories.
    read_only: bool,
    /// Where the time the listing cache is written at comes from.
    clock: Arc<dyn Clock>,
    /// Whether listings return every session's message text (`all_messages_text`).
    texts: bool,
}

impl std::fmt::Debug for Discovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discovery")
            .field("dirs", &self.dirs)
            .field("cache", &self.cache)
            .field("parallelism", &self.parallelism)
            .field("read_only", &self.read_only)
            .field("clock", &self.clock)
            .field("texts", &self.texts)
            .finish_non_exhaustive()
    }
}

impl Discovery {
    /// Creates discovery over `dirs`, reading session files from the file system.
    pub fn new(dirs: AgentDirs) -> Discovery {
        Discovery {
            dirs,
            storage: Arc::new(FileStorage::new()),
            parallelism: Parallelism::default(),
            cache: None,
            read_only: false,
            clock: Arc::new(SystemClock),
            texts: true,
        }
    }

    /// Reads (and, unless [`Discovery::read_only`], creates and moves) sessions through
    /// `storage` instead of the file system: listing, resume and continue then work on
    /// that backend. The listing cache is used only for files whose stat carries a
    /// [`session_store::FileIdentity`] (the file storage's); others are read every time.
    ///
    /// ```
    /// use std::path::Path;
    /// use std::sync::Arc;
    /// use session_discovery::{AgentDirs, Discovery, ProcessEnv};
    /// use session_store::{MemoryStorage, Storage};
    ///
    /// let storage = Arc::new(MemoryStorage::new());
    /// let dir = Path::new("/sessions/p");
    /// storage.write(&dir.join("2026-01-01T00-00-00-000Z_abc.jsonl"), concat!(
    ///     r#"{"type":"session","version":3,"id":"abc","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#, "\n",
    ///     r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1767225601000}}"#, "\n",
    /// ).as_bytes())?;
    /// let env = ProcessEnv::new("/home/u", "/p", "/tmp");
    /// let d = Discovery::new(AgentDirs::pi(&env)).with_storage(storage);
    /// let sessions = d.list("/p", Some(dir), &mut |_| {}).expect("listed");
    /// assert_eq!(sessions[0].first_message, "hi");
    /// # Ok::<(), session_store::StoreError>(())
    /// ```
    pub fn with_storage(mut self, storage: Arc<dyn Storage>) -> Discovery {
        self.storage = storage;
        self
    }

    /// Scans files on at most `parallelism` threads (the default: as many as the
    /// machine offers); [`Parallelism::SERIAL`] scans on the calling thread.
    pub fn with_parallelism(mut self, parallelism: Parallelism) -> Discovery {
        self.parallelism = parallelism;
        self
    }

    /// Reads the current time from `clock` instead of the system clock. The listing
    /// cache records when it was written, and does not trust what it holds about files
    /// modified within [`session_store::FileIdentity::RACY_NS`] of that moment (their
    /// times may not have moved since): with a clock that lags, more files are read
    /// again; with one that runs ahead, changes made within that window can be missed.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Discovery {
        self.clock = clock;
        self
    }

    /// Returns the storage sessions are read through.
    pub fn storage(&self) -> &dyn Storage {
        &*self.storage
    }

    /// Makes every call leave the agents' directories as it found them: the default
    /// session directory of a cwd is not created when missing (it lists as empty),
    /// omp's legacy buckets are not moved and its orphaned backups are not promoted
    /// (the references do all three while listing). The listing cache, outside those
    /// directories, is still kept.
    pub fn read_only(mut self) -> Discovery {
        self.read_only = true;
        self
    }

    /// Returns the default session directory of `cwd`: created (and omp's legacy
    /// buckets moved into it) as the references do, or only named when read-only.
    pub(crate) fn session_dir_of(&self, cwd: &str) -> Result<PathBuf, DiscoveryError> {
        if self.read_only {
            return Ok(self.dirs.default_session_dir(cwd));
        }
        self.dirs.ensure_default_session_dir(self.storage(), cwd)
    }

    /// Keeps what listings learn about each session file in `dir` between runs and
    /// reuses it while the file is unchanged (same size, times, inode and device),
    /// so listing a large directory again reads only what changed. Listings of fewer
    /// than `min_files` files skip the cache (scanning them costs little). The cache
    /// is disposable and private: its files are written 0600 in `dir`, a folder shown
    /// to be this user's alone ([`PrivateDir::open`]); a damaged one (each is checked
    /// against hashes of its own) is ignored and replaced, and `dir` keeps the caches
    /// of the [`crate::MAX_CACHE_FILES`] most recently changed listings. See
    /// [`Discovery::default_cache_dir`].
    pub fn with_list_cache(mut self, dir: PrivateDir, min_files: usize) -> Discovery {
        self.cache = Some((dir, min_files));
        self
    }

    /// Returns this discovery with listings that leave every session's
    /// `all_messages_text` empty, for callers that do not show it (a table of
    /// sessions): a session answered from the listing cache then costs its record, not
    /// the read and check of its text. Files read afresh still give the cache their
    /// text, so a later listing with texts finds them there.
    #[must_use]
    pub fn without_message_texts(mut self) -> Discovery {
        self.texts = false;
        self
    }

    /// Returns where the `session` command keeps its caches (the listing cache, the
    /// session indexes, the search catalog): `$XDG_CACHE_HOME/session-store`, else
    /// `~/.cache/session-store`. Open it with [`PrivateDir::open`].
    pub fn default_cache_dir(env: &ProcessEnv) -> PathBuf {
        let cache =
            env.var("XDG_CACHE_HOME").map_or_else(|| env.home.join(".cache"), |d| PathBuf::from(env.resolve(d)));
        cache.join("session-store")
    }

    /// [`collect`] over the files `list_files` finds, through the listing cache of
    /// `scope` when there is one; without texts, each info's is emptied (and the cache
    /// reads none). The cache is read while the files are listed.
    #[allow(clippy::too_many_arguments, reason = "the listing's scope, note kind, files, scan, filter and progress")]
    fn collect(
        &self,
        scope: &str,
        note_kind: &str,
        list_files: impl FnOnce() -> Result<Listed, DiscoveryError> + Send,
        build: impl Fn(&Path) -> Option<SessionInfo> + Sync,
        keep: &(dyn Fn(&SessionInfo) -> bool + Sync),
        publish_every: usize,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<Vec<SessionInfo>, DiscoveryError> {
        let mut out = match self.cache.as_ref() {
            None => {
                let files = list_files()?;
                match self.storage().read_notes(&files.files, note_kind) {
                    Ok(Some(notes)) => {
                        self.collect_with_notes(&files, notes, note_kind, build, keep, publish_every, progress)
                    }
                    _ => collect(&files, build, keep, publish_every, self.parallelism, progress),
                }
            }
            Some((dir, min)) => {
                let (cache, files) = std::thread::scope(|s| {
                    let files = s.spawn(list_files);
                    let cache = ListCache::load(dir, self.dialect(), scope).with_texts(self.texts);
                    (cache, files.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
                });
                let files = files?;
                if files.files.len() < *min {
                    collect(&files, build, keep, publish_every, self.parallelism, progress)
                } else {
                    let answer = |p: &Path| cache.info(self.storage(), p, &build);
                    let out = collect(&files, answer, keep, publish_every, self.parallelism, progress);
                    cache.save(self.now_ns());
                    out
                }
            }
        };
        if !self.texts {
            for info in &mut out {
                info.all_messages_text = MessagesText::default();
            }
        }
        Ok(out)
    }

    /// Returns the session files a listing would read, without reading them: with
    /// `cwd`, those of its default session directory (not created when missing);
    /// without, those of every project bucket one level below the sessions root. Also
    /// returns the directory they were looked for in (the bucket, or the root), so a
    /// caller can tell a deleted file from one out of scope. Entries that are not
    /// regular files are left out.
    ///
    /// # Errors
    ///
    /// [`DiscoveryError`] when a directory that exists cannot be read.
    pub fn session_files(&self, cwd: Option<&str>) -> Result<(PathBuf, Vec<PathBuf>), DiscoveryError> {
        let omp = self.dialect() == Dialect::Omp;
        let scope = self.session_scope(cwd);
        let listed = match cwd {
            Some(_) if omp => omp_dir_files(self.storage(), &scope)?,
            Some(_) => pi_dir_files(self.storage(), &scope)?,
            None => bucket_files(self.storage(), &scope, omp)?,
        };
        Ok((scope, listed.files))
    }

    /// Returns the directory [`Discovery::session_files`] lists: `cwd`'s session
    /// directory, or with no `cwd` the sessions root.
    pub fn session_scope(&self, cwd: Option<&str>) -> PathBuf {
        cwd.map_or_else(|| self.dirs.sessions_root.clone(), |cwd| self.dirs.default_session_dir(cwd))
    }

    /// Returns the directories.
    pub fn dirs(&self) -> &AgentDirs {
        &self.dirs
    }

    /// Returns the dialect.
    pub fn dialect(&self) -> Dialect {
        self.dirs.dialect
    }

    fn resolve_dir(&self, dir: &Path) -> PathBuf {
        PathBuf::from(self.dirs.env.resolve(&dir.to_string_lossy()))
    }

    /// Returns the current time in nanoseconds since the epoch (whole milliseconds of
    /// the clock).
    fn now_ns(&self) -> i64 {
        self.clock.now_ms().saturating_mul(1_000_000)
    }

    /// Lists the sessions of `cwd` as `SessionManager.list(cwd, dir)` does.
    ///
    /// * pi: `dir` (or the cwd's default dir, created) read flat; when `dir` is not
    ///   the cwd's default dir only sessions whose header cwd resolves to `cwd` are
    ///   kept; every file is read whole; newest `modified` (last activity) first.
    /// * omp: orphaned backups in the directory are recovered first; each file is
    ///   scanned (4 KiB prefix, 32 KiB tail); newest mtime first, pinned ids first.
    pub fn list(
        &self,
        cwd: &str,
        dir: Option<&Path>,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<Vec<SessionInfo>, DiscoveryError> {
        let resolved_cwd = self.dirs.env.resolve(cwd);
        let (dir, filter) = match dir {
            Some(d) => {
                let filter = !self.dirs.is_default_dir(d, cwd);
                (self.resolve_dir(d), filter)
            }
            None => (self.session_dir_of(cwd)?, false),
        };
        match self.dialect() {
            Dialect::Pi => {
                let keep = |i: &SessionInfo| !filter || self.cwd_matches(&i.cwd, &resolved_cwd);
                let scope = format!("dir\0{}", dir.display());
                let files = || pi_dir_files(self.storage(), &dir);
                let build = |p: &Path| pi_scan::build_session_info(self.storage(), p);
                let mut out = self.collect(&scope, NOTE_PI, files, build, &keep, 10, progress)?;
                sort_by_modified(&mut out);
                Ok(out)
            }
            Dialect::Omp => {
                let mut out = self.omp_scan_dir(&dir, true, true, progress)?;
                self.pinned_first(&mut out);
                Ok(out)
            }
        }
    }

    /// Lists the Claude Code and Codex sessions of `agent` (both when `None`) found in
    /// their homes as those agents find them ([`crate::list_other_sessions`], the homes
    /// from this listing's environment), each as pi lists the session an import of it
    /// writes ([`crate::other_session_info`]); with `cwd`, only those whose working
    /// directory resolves to it (Claude Code's project folders whose names cannot be
    /// the cwd's are not read). Newest `modified` first. Through the listing cache
    /// when there is one; nothing is written into the agents' homes.
    ///
    /// # Errors
    ///
    /// [`DiscoveryError`] when a folder of a home cannot be listed.
    pub fn list_others(
        &self,
        agent: Option<crate::OtherAgent>,
        cwd: Option<&str>,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<Vec<crate::OtherSessionInfo>, DiscoveryError> {
        use crate::others::{OtherAgent, OtherSessionInfo, claude_folder_may_be, list_other_sessions};
        let env = &self.dirs.env;
        let resolved = cwd.map(|c| env.resolve(c));
        let projects = crate::claude_projects_dir(env);
        let listed = list_other_sessions(self.storage(), env, agent).map_err(|e| {
            let home = if agent == Some(OtherAgent::Codex) { crate::codex_home(env) } else { projects.clone() };
            DiscoveryError::ReadDir { path: home, source: io::to_io(e) }
        })?;
        let mut out = Vec::new();
        for agent in [OtherAgent::Claude, OtherAgent::Codex] {
            let files: Vec<PathBuf> = listed
                .iter()
                .filter(|s| s.agent == agent)
                .filter(|s| match (agent, &resolved) {
                    (OtherAgent::Claude, Some(cwd)) => s
                        .path
                        .strip_prefix(&projects)
                        .ok()
                        .and_then(|rest| rest.iter().next())
                        .is_some_and(|folder| claude_folder_may_be(&folder.to_string_lossy(), cwd)),
                    _ => true,
                })
                .map(|s| s.path.clone())
                .collect();
            if files.is_empty() {
                continue;
            }
            // One cache per agent and cwd: a cwd's holds nothing for the rollouts of
            // another (their first line says whose they are; the rest is not read).
            let scope = match &resolved {
                Some(cwd) => format!("others\0{}\0{cwd}", agent.name()),
                None => format!("others\0{}", agent.name()),
            };
            let keep = |i: &SessionInfo| resolved.as_ref().is_none_or(|cwd| self.cwd_matches(&i.cwd, cwd));
            let build = |p: &Path| {
                if agent == OtherAgent::Codex
                    && let Some(cwd) = &resolved
                    && crate::others::codex_cwd(self.storage(), p).is_some_and(|c| !self.cwd_matches(&c, cwd))
                {
                    return None;
                }
                crate::other_session_info(self.storage(), p)
            };
            let listed = move || Ok(Listed { files, skipped: Vec::new() });
            let infos = self.collect(&scope, NOTE_OTHERS, listed, build, &keep, 10, progress)?;
            out.extend(infos.into_iter().map(|info| OtherSessionInfo { agent, info }));
        }
        out.sort_by_key(|o| std::cmp::Reverse(o.info.modified));
        Ok(out)
    }

    fn cwd_matches(&self, header_cwd: &str, resolved_cwd: &str) -> bool {
        !header_cwd.is_empty() && self.dirs.env.resolve(header_cwd) == resolved_cwd
    }

    /// Lists every session as `SessionManager.listAll(dir)` does: with `dir`, that
    /// flat directory without a cwd filter (omp: same as `list` there); without,
    /// every project bucket one level below the sessions root (files directly in
    /// the root are not listed).
    pub fn list_all(
        &self,
        dir: Option<&Path>,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<Vec<SessionInfo>, DiscoveryError> {
        match (self.dialect(), dir) {
            (Dialect::Pi, Some(d)) => {
                let dir = self.resolve_dir(d);
                let scope = format!("dir\0{}", dir.display());
                let files = || pi_dir_files(self.storage(), &dir);
                let build = |p: &Path| pi_scan::build_session_info(self.storage(), p);
                let mut out = self.collect(&scope, NOTE_PI, files, build, &|_| true, 10, progress)?;
                sort_by_modified(&mut out);
                Ok(out)
            }
            (Dialect::Omp, Some(d)) => {
                let mut out = self.omp_scan_dir(&self.resolve_dir(d), true, true, progress)?;
                self.pinned_first(&mut out);
                Ok(out)
            }
            (Dialect::Pi, None) => {
                let files = || {
                    let listed = bucket_files(self.storage(), &self.dirs.sessions_root, false)?;
                    let mut files: Vec<(PathBuf, Option<FileStat>)> = listed
                        .files
                        .into_iter()
                        .map(|p| {
                            let st = io::stat(self.storage(), &p);
                            (p, st)
                        })
                        .collect();
                    // Newest first (unreadable last), then names in reverse locale order.
                    files.sort_by_cached_key(|(path, st)| {
                        let mtime = st.map(|s| s.mtime_ns());
                        (mtime.is_none(), std::cmp::Reverse(mtime), std::cmp::Reverse(collation_key(&file_name(path))))
                    });
                    Ok(Listed { files: files.into_iter().map(|f| f.0).collect(), skipped: listed.skipped })
                };
                let scope = format!("all\0{}", self.dirs.sessions_root.display());
                let build = |p: &Path| pi_scan::build_session_info(self.storage(), p);
                let mut out = self.collect(&scope, NOTE_PI, files, build, &|_| true, 100, progress)?;
                sort_by_modified(&mut out);
                Ok(out)
            }
            (Dialect::Omp, None) => {
                let files = || bucket_files(self.storage(), &self.dirs.sessions_root, true);
                let scope = format!("all\0{}", self.dirs.sessions_root.display());
                let build = |p: &Path| omp_scan::scan_session_file(self.storage(), p, true);
                let mut out = self.collect(&scope, NOTE_OMP, files, build, &|_| true, 10, progress)?;
                sort_omp(&mut out);
                self.pinned_first(&mut out);
                Ok(out)
            }
        }
    }

    fn omp_scan_dir(
        &self,
        dir: &Path,
        recover: bool,
        with_status: bool,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<Vec<SessionInfo>, DiscoveryError> {
        let files = || {
            if recover && !self.read_only {
                recover_orphaned_backups(self.storage(), dir);
            }
            omp_dir_files(self.storage(), dir)
        };
        let scope = format!("dir\0{with_status}\0{}", dir.display());
        let build = |p: &Path| omp_scan::scan_session_file(self.storage(), p, with_status);
        let kind = if with_status { NOTE_OMP } else { NOTE_OMP_PREFIX };
        let mut out = self.collect(&scope, kind, files, build, &|_| true, 10, progress)?;
        sort_omp(&mut out);
        Ok(out)
    }
}

fn file_name(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The most threads a listing scans files on.
const MAX_LIST_WORKERS: usize = 16;

/// Builds infos for `files` on worker threads ([`session_model::pool`]) and reports progress in
/// completion order on the calling thread. Returns the kept infos in file order.
fn collect(
    listed: &Listed,
    build: impl Fn(&Path) -> Option<SessionInfo> + Sync,
    keep: &(dyn Fn(&SessionInfo) -> bool + Sync),
    publish_every: usize,
    parallelism: Parallelism,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Vec<SessionInfo> {
    let (files, skipped) = (&listed.files[..], &listed.skipped[..]);
    let total = files.len();
    if total == 0 && !skipped.is_empty() {
        progress(Progress { loaded: 0, total, partial: None, skipped });
    }
    let mut done: Vec<SessionInfo> = Vec::with_capacity(total);
    let mut done_idx: Vec<usize> = Vec::with_capacity(total);
    let mut loaded = 0;
    let mut on_result = |idx: usize, info: Option<SessionInfo>| {
        loaded += 1;
        if let Some(i) = info.filter(|i| keep(i)) {
            done.push(i);
            done_idx.push(idx);
        }
        let publish = loaded == 1 || loaded % publish_every == 0 || loaded == total;
        progress(Progress { loaded, total, partial: publish.then_some(&done[..]), skipped });
    };
    // A thread for every eight files at least: fewer are not worth starting.
    let parallelism = Parallelism::new(parallelism.threads().min(MAX_LIST_WORKERS));
    let pool = session_model::pool::Pool::new(parallelism).per_thread(8).chunk(8);
    pool.run(files, || (), |_, _, f| build(f), &mut on_result);
    // Back into file order: each info moves once.
    let mut slots: Vec<Option<SessionInfo>> = std::iter::repeat_with(|| None).take(total).collect();
    for (i, info) in done_idx.into_iter().zip(done) {
        slots[i] = Some(info);
    }
    slots.into_iter().flatten().collect()
}
