//! Listing, recent sessions, most-recent lookup, lookup by id and resume matching.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::mpsc;

use session_model::{Dialect, Parallelism};
use session_store::{EntryKind, FileStat, FileStorage, PrivateDir, Storage};

use crate::cache::ListCache;
use crate::env::{AgentDirs, ProcessEnv};
use crate::error::DiscoveryError;
use crate::info::SessionInfo;
use crate::io;
use crate::{omp_scan, pi_scan};

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

/// The session files a listing reads, and the entries it skips.
#[derive(Debug, Default)]
struct Listed {
    files: Vec<PathBuf>,
    skipped: Vec<PathBuf>,
}

impl Listed {
    fn extend(&mut self, other: Listed) {
        self.files.extend(other.files);
        self.skipped.extend(other.skipped);
    }
}

/// Where a resume argument was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// In the cwd's session directory (or the explicit one).
    Local,
    /// In another project's directory.
    Global,
}

/// What a resume argument resolved to.
#[derive(Clone, Debug, PartialEq)]
pub enum ResumeTarget {
    /// The argument is a path (contains `/` or `\`, or ends in `.jsonl`), resolved
    /// against the working directory; open it directly.
    Path(PathBuf),
    /// A listed session matched.
    Session {
        /// The session.
        session: Box<SessionInfo>,
        /// Where it was found.
        scope: Scope,
    },
    /// Nothing matched.
    NotFound,
}

/// An entry of the welcome screen's recent list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecentSession {
    /// The session file.
    pub path: PathBuf,
    /// Display name (title, first message, or `Untitled · HH:MM`).
    pub name: String,
    /// `just now`, `5m ago`, `3h ago`, `2d ago`, else the date (`YYYY-MM-DD`, UTC).
    pub time_ago: String,
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
}

impl std::fmt::Debug for Discovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discovery")
            .field("dirs", &self.dirs)
            .field("cache", &self.cache)
            .field("parallelism", &self.parallelism)
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

fn noop(_: Progress<'_>) {}

/// The kinds of note ([`Storage::read_notes`]) a listing keeps beside each session: what
/// pi's scan, omp's scan and omp's prefix-only scan say about it, in the listing cache's
/// encoding (its version in the name).
const NOTE_PI: &str = "session-discovery/1/pi";
/// See [`NOTE_PI`].
const NOTE_OMP: &str = "session-discovery/1/omp";
/// The notes of other agents' sessions (no storage keeps them; the homes are local).
const NOTE_OTHERS: &str = "session-discovery/1/others";
/// See [`NOTE_PI`].
const NOTE_OMP_PREFIX: &str = "session-discovery/1/omp-prefix";

/// A note of a session: the length of the listing cache's record (4 bytes, little
/// endian), the record, then the all-messages text.
fn encode_note(info: Option<&SessionInfo>) -> Vec<u8> {
    let mut out = vec![0; 4];
    crate::cache::encode_info(&mut out, info);
    let len = u32::try_from(out.len() - 4).unwrap_or(u32::MAX);
    out[..4].copy_from_slice(&len.to_le_bytes());
    if let Some(i) = info {
        out.extend_from_slice(i.all_messages_text.as_bytes());
    }
    out
}

/// Decodes what [`encode_note`] wrote; `None` when the bytes are damaged.
fn decode_note(bytes: &[u8], path: &Path) -> Option<Option<SessionInfo>> {
    let len = usize::try_from(u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?)).ok()?;
    let record = bytes.get(4..4usize.checked_add(len)?)?;
    let mut info = crate::cache::decode_info(record, path)?;
    let text = &bytes[4 + len..];
    match info.as_mut() {
        Some(i) => i.all_messages_text = std::str::from_utf8(text).ok()?.into(),
        None if !text.is_empty() => return None,
        None => {}
    }
    Some(info)
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

    /// Returns where the `session` command keeps its caches (the listing cache, the
    /// session indexes, the search catalog): `$XDG_CACHE_HOME/session-store`, else
    /// `~/.cache/session-store`. Open it with [`PrivateDir::open`].
    pub fn default_cache_dir(env: &ProcessEnv) -> PathBuf {
        match env.var("XDG_CACHE_HOME") {
            Some(d) => PathBuf::from(env.resolve(d)).join("session-store"),
            None => env.home.join(".cache").join("session-store"),
        }
    }

    /// [`collect`] over the files `list_files` finds, through the listing cache of
    /// `scope` when there is one. The cache is read while the files are listed.
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
        let Some((dir, min)) = self.cache.as_ref() else {
            let files = list_files()?;
            if let Ok(Some(notes)) = self.storage().read_notes(&files.files, note_kind) {
                return Ok(self.collect_with_notes(&files, notes, note_kind, build, keep, publish_every, progress));
            }
            return Ok(collect(&files, build, keep, publish_every, self.parallelism, progress));
        };
        let (cache, files) = std::thread::scope(|s| {
            let files = s.spawn(list_files);
            let cache = ListCache::load(dir, self.dialect(), scope);
            (cache, files.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
        });
        let files = files?;
        if files.files.len() < *min {
            return Ok(collect(&files, build, keep, publish_every, self.parallelism, progress));
        }
        let out =
            collect(&files, |p| cache.info(self.storage(), p, &build), keep, publish_every, self.parallelism, progress);
        cache.save(now_ns());
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
        match cwd {
            Some(cwd) => self.dirs.default_session_dir(cwd),
            None => self.dirs.sessions_root.clone(),
        }
    }

    /// [`collect`] answered from the notes a storage keeps beside its files
    /// ([`Storage::read_notes`]): a file with a note is not read; the others are read as
    /// usual and their notes stored for the next listing. Notes that cannot be stored
    /// are only a slower next listing.
    #[allow(clippy::too_many_arguments, reason = "collect's arguments and the notes read for them")]
    fn collect_with_notes(
        &self,
        files: &Listed,
        notes: Vec<Option<session_store::Note>>,
        note_kind: &str,
        build: impl Fn(&Path) -> Option<SessionInfo> + Sync,
        keep: &(dyn Fn(&SessionInfo) -> bool + Sync),
        publish_every: usize,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Vec<SessionInfo> {
        let notes: std::collections::HashMap<&Path, session_store::Note> =
            files.files.iter().zip(notes).filter_map(|(p, n)| Some((p.as_path(), n?))).collect();
        let fresh = std::sync::Mutex::new(Vec::new());
        let from_note = |p: &Path| {
            let Some(note) = notes.get(p) else { return build(p) };
            if let Some(info) = note.bytes.as_deref().and_then(|b| decode_note(b, p)) {
                return info;
            }
            let info = build(p);
            let bytes = encode_note(info.as_ref());
            fresh.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((
                p.to_path_buf(),
                note.version,
                bytes,
            ));
            info
        };
        let out = collect(files, from_note, keep, publish_every, self.parallelism, progress);
        let fresh = fresh.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !fresh.is_empty() {
            let _ = self.storage().write_notes(note_kind, &fresh);
        }
        out
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

    /// Reads `<agentDir>/session-pins.json` (omp) and moves pinned sessions first,
    /// keeping the order otherwise.
    fn pinned_first(&self, out: &mut [SessionInfo]) {
        let pins = self.pinned_ids();
        if pins.is_empty() {
            return;
        }
        out.sort_by_key(|s| !pins.contains(&s.id));
    }

    /// Returns the pinned session ids (omp's `session-pins.json`), empty if none (or,
    /// as omp reads it, when the file is not a JSON array).
    pub fn pinned_ids(&self) -> Vec<String> {
        // The agent's own configuration, on this machine.
        let path = self.dirs.agent_dir.join(PINS_FILE);
        let Ok(bytes) = io::local().read(&path) else { return Vec::new() };
        parse_pins(&bytes).unwrap_or_default()
    }

    /// Returns the most recent session file of `dir`.
    ///
    /// * pi (`findMostRecentSession(dir, cwd?)`): newest mtime whose header scan
    ///   succeeds and, with `cwd`, whose header cwd resolves to it.
    /// * omp: the first of the directory's listing (prefix-only scans; empty
    ///   sessions included; `cwd` is ignored).
    pub fn find_most_recent(&self, dir: &Path, cwd: Option<&str>) -> Option<PathBuf> {
        let dir = self.resolve_dir(dir);
        match self.dialect() {
            Dialect::Pi => {
                let resolved_cwd = cwd.map(|c| self.dirs.env.resolve(c));
                let entries = io::read_dir(self.storage(), &dir).ok()?;
                let mut files: Vec<(PathBuf, i64)> = Vec::new();
                for e in entries.into_iter().filter(|e| e.name.ends_with(".jsonl")) {
                    let st = io::stat(self.storage(), &e.path)?;
                    files.push((e.path, st.mtime_ns()));
                }
                files.sort_by_key(|f| std::cmp::Reverse(f.1));
                files.into_iter().map(|f| f.0).find(|p| {
                    pi_scan::read_header(self.storage(), p).is_some_and(|h| match &resolved_cwd {
                        None => true,
                        Some(rc) => h.cwd.as_deref().is_some_and(|c| self.cwd_matches(c, rc)),
                    })
                })
            }
            Dialect::Omp => self.omp_scan_dir(&dir, true, false, &mut noop).ok()?.into_iter().next().map(|s| s.path),
        }
    }

    /// Returns omp's newest non-empty session of `dir` (`findMostRecentNonEmptySession`).
    pub fn find_most_recent_non_empty(&self, dir: &Path) -> Option<SessionInfo> {
        let dir = self.resolve_dir(dir);
        self.omp_scan_dir(&dir, true, true, &mut noop).ok()?.into_iter().find(|s| !s.is_empty())
    }

    /// Finds a session by exact id as pi's `SessionManager.findById(cwd, id, dir)`:
    /// directory order, header scans only; with an explicit `dir` that is not the
    /// cwd's default dir, the header cwd must match. omp: exact id in the listing.
    pub fn find_by_id(&self, cwd: &str, id: &str, dir: Option<&Path>) -> Result<Option<PathBuf>, DiscoveryError> {
        match self.dialect() {
            Dialect::Pi => {
                let (d, filter) = match dir {
                    Some(d) => (self.resolve_dir(d), !self.dirs.is_default_dir(d, cwd)),
                    None => (self.session_dir_of(cwd)?, false),
                };
                let resolved_cwd = self.dirs.env.resolve(cwd);
                let Ok(entries) = io::read_dir(self.storage(), &d) else { return Ok(None) };
                Ok(entries.into_iter().filter(|e| e.name.ends_with(".jsonl")).map(|e| e.path).find(|p| {
                    pi_scan::read_header(self.storage(), p).is_some_and(|h| {
                        h.id == id && (!filter || h.cwd.as_deref().is_some_and(|c| self.cwd_matches(c, &resolved_cwd)))
                    })
                }))
            }
            Dialect::Omp => {
                let d = match dir {
                    Some(d) => self.resolve_dir(d),
                    None => self.session_dir_of(cwd)?,
                };
                Ok(self.omp_scan_dir(&d, true, true, &mut noop)?.into_iter().find(|s| s.id == id).map(|s| s.path))
            }
        }
    }

    /// Resolves a `--resume` argument.
    ///
    /// A path-like argument (`/`, `\`, or ending in `.jsonl`) is returned as a path.
    /// Otherwise:
    /// * omp (`resolveResumableSession`): the local list (`dir` or the cwd's
    ///   bucket), then — only without an explicit `dir` — every bucket; a session
    ///   matches when its id, its file name, or the id part of its file name starts
    ///   with the argument, case-insensitively; the first in list order wins.
    /// * pi (CLI resolution): exact local id, then local id prefix, then global
    ///   exact id, then global id prefix (global = `list_all(dir)`); case-sensitive.
    pub fn resolve_resumable(&self, arg: &str, cwd: &str, dir: Option<&Path>) -> Result<ResumeTarget, DiscoveryError> {
        if arg.contains(['/', '\\']) || arg.ends_with(".jsonl") {
            return Ok(ResumeTarget::Path(PathBuf::from(self.dirs.env.resolve(arg))));
        }
        let found = |s: SessionInfo, scope| ResumeTarget::Session { session: Box::new(s), scope };
        match self.dialect() {
            Dialect::Omp => {
                let local_dir = match dir {
                    Some(d) => self.resolve_dir(d),
                    None => self.session_dir_of(cwd)?,
                };
                let local = self.omp_scan_dir(&local_dir, true, true, &mut noop)?;
                if let Some(s) = local.into_iter().find(|s| omp_matches(s, arg)) {
                    return Ok(found(s, Scope::Local));
                }
                if dir.is_some() {
                    return Ok(ResumeTarget::NotFound);
                }
                let global = self.list_all(None, &mut noop)?;
                Ok(global
                    .into_iter()
                    .find(|s| omp_matches(s, arg))
                    .map_or(ResumeTarget::NotFound, |s| found(s, Scope::Global)))
            }
            Dialect::Pi => {
                let local = self.list(cwd, dir, &mut noop)?;
                if let Some(s) =
                    local.iter().find(|s| s.id == arg).or_else(|| local.iter().find(|s| s.id.starts_with(arg)))
                {
                    return Ok(found(s.clone(), Scope::Local));
                }
                let global = self.list_all(dir, &mut noop)?;
                let hit = global.iter().find(|s| s.id == arg).or_else(|| global.iter().find(|s| s.id.starts_with(arg)));
                Ok(hit.map_or(ResumeTarget::NotFound, |s| found(s.clone(), Scope::Global)))
            }
        }
    }

    /// Returns the welcome screen's recent sessions of `dir` (omp's
    /// `getRecentSessions`): files by mtime, newest first; each scanned with status,
    /// empty sessions skipped, until `limit` are found. `now_ms` is the current time
    /// for the `time_ago` text.
    pub fn recent(&self, dir: &Path, limit: usize, now_ms: i64) -> Vec<RecentSession> {
        let dir = self.resolve_dir(dir);
        let files = match self.dialect() {
            Dialect::Pi => pi_dir_files(self.storage(), &dir),
            Dialect::Omp => omp_dir_files(self.storage(), &dir),
        };
        let Ok(Listed { files, .. }) = files else { return Vec::new() };
        let mut by_mtime: Vec<(PathBuf, FileStat)> =
            files.into_iter().filter_map(|f| io::stat(self.storage(), &f).map(|s| (f, s))).collect();
        by_mtime.sort_by_key(|f| std::cmp::Reverse(f.1.mtime_ns()));
        let mut out = Vec::new();
        for (file, _) in by_mtime {
            if out.len() >= limit {
                break;
            }
            let info = match self.dialect() {
                Dialect::Pi => pi_scan::build_session_info(self.storage(), &file),
                Dialect::Omp => omp_scan::scan_session_file(self.storage(), &file, true),
            };
            let Some(info) = info else { continue };
            if self.dialect() == Dialect::Omp && info.is_empty() {
                continue;
            }
            out.push(RecentSession {
                path: file,
                name: info.display_name(),
                time_ago: info.modified.map_or_else(String::new, |m| time_ago(m, now_ms)),
            });
        }
        out
    }
}

/// Formats the age of `ms` at `now_ms` as omp's `formatTimeAgo` (dates in UTC).
pub fn time_ago(ms: i64, now_ms: i64) -> String {
    let diff = now_ms - ms;
    let mins = diff.div_euclid(60_000);
    let hours = diff.div_euclid(3_600_000);
    let days = diff.div_euclid(86_400_000);
    if mins < 1 {
        "just now".into()
    } else if mins < 60 {
        format!("{mins}m ago")
    } else if hours < 24 {
        format!("{hours}h ago")
    } else if days < 7 {
        format!("{days}d ago")
    } else {
        session_model::timestamp::format_iso_millis(ms).chars().take(10).collect()
    }
}

fn omp_matches(s: &SessionInfo, arg: &str) -> bool {
    let arg = arg.to_lowercase();
    if s.id.to_lowercase().starts_with(&arg) {
        return true;
    }
    let stem = s.file_stem().to_lowercase();
    if stem.starts_with(&arg) {
        return true;
    }
    stem.rfind('_').is_some_and(|i| stem[i + 1..].starts_with(&arg))
}

fn file_name(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// pi's session files of a flat directory: `*.jsonl` names, descending by
/// `localeCompare`. A missing directory has none.
fn pi_dir_files(storage: &dyn Storage, dir: &Path) -> Result<Listed, DiscoveryError> {
    let entries = list_dir(storage, dir)?;
    let (mut names, skipped) = split_special(entries.into_iter().filter(|e| e.name.ends_with(".jsonl")));
    names.sort_by_cached_key(|e| std::cmp::Reverse(collation_key(&e.name)));
    Ok(Listed { files: names.into_iter().map(|e| e.path).collect(), skipped })
}

/// Lists a directory of sessions: a missing one has none, one that cannot be read is
/// an error.
fn list_dir(storage: &dyn Storage, dir: &Path) -> Result<Vec<io::DirEntry>, DiscoveryError> {
    io::read_dir(storage, dir).map_err(|e| DiscoveryError::ReadDir { path: dir.to_path_buf(), source: io::to_io(e) })
}

/// Separates the entries that are neither files, directories nor links (FIFOs, sockets,
/// devices, as the directory itself reports them) from the rest. A link to such a
/// thing is kept: its open refuses it without waiting.
fn split_special(entries: impl Iterator<Item = io::DirEntry>) -> (Vec<io::DirEntry>, Vec<PathBuf>) {
    let mut skipped = Vec::new();
    let kept = entries
        .filter_map(|e| {
            if e.kind != EntryKind::Other {
                Some(e)
            } else {
                skipped.push(e.path);
                None
            }
        })
        .collect();
    (kept, skipped)
}

/// omp's session files of a directory (`*.jsonl` glob: regular files, no dot files).
fn omp_dir_files(storage: &dyn Storage, dir: &Path) -> Result<Listed, DiscoveryError> {
    let entries = list_dir(storage, dir)?;
    let (kept, skipped) =
        split_special(entries.into_iter().filter(|e| e.name.ends_with(".jsonl") && !e.name.starts_with('.')));
    let files = kept
        .into_iter()
        .filter(|e| match e.kind {
            EntryKind::File => true,
            EntryKind::Symlink => io::stat(storage, &e.path).is_some_and(|s| s.is_file),
            EntryKind::Dir | EntryKind::Other => false,
        })
        .map(|e| e.path)
        .collect();
    Ok(Listed { files, skipped })
}

/// Session files one level below the sessions root. pi: subdirectories and
/// symlinks, every `*.jsonl` name; omp: the `*/*.jsonl` glob.
fn bucket_files(storage: &dyn Storage, root: &Path, omp: bool) -> Result<Listed, DiscoveryError> {
    let buckets = list_dir(storage, root)?;
    let mut out = Listed::default();
    for b in buckets.into_iter().filter(io::DirEntry::is_dir_or_symlink) {
        if omp && b.name.starts_with('.') {
            continue;
        }
        let files = if omp { omp_dir_files(storage, &b.path) } else { pi_dir_files(storage, &b.path) };
        if let Ok(f) = files {
            out.extend(f);
        }
    }
    Ok(out)
}

/// Promotes orphaned `<primary>.jsonl.<x>.bak` backups (newest per primary) to
/// their missing primary, as omp does before listing a directory.
pub(crate) fn recover_orphaned_backups(storage: &dyn Storage, dir: &Path) {
    let Ok(entries) = io::read_dir(storage, dir) else { return };
    let mut best: Vec<(PathBuf, PathBuf, i64)> = Vec::new();
    for e in entries {
        if e.name.starts_with('.') {
            continue;
        }
        let Some(trimmed) = e.name.strip_suffix(".bak") else { continue };
        let Some(dot) = trimmed.rfind('.') else { continue };
        if dot == 0 {
            continue;
        }
        let primary = &trimmed[..dot];
        if !primary.ends_with(".jsonl") {
            continue;
        }
        let Some(st) = io::stat(storage, &e.path) else { continue };
        let primary_path = dir.join(primary);
        match best.iter_mut().find(|b| b.0 == primary_path) {
            Some(b) if st.mtime_ns() > b.2 => {
                b.1 = e.path;
                b.2 = st.mtime_ns();
            }
            Some(_) => {}
            None => best.push((primary_path, e.path, st.mtime_ns())),
        }
    }
    for (primary, backup, _) in best {
        if !io::exists(storage, &primary) {
            let _ = storage.rename(&backup, &primary);
        }
    }
}

/// Sorts newest `modified` first; ties keep their order. With an Invalid Date
/// (`None`) among them, pi's comparator (`b - a`, `NaN` for it) is no order at all and
/// the result is what V8's sort makes of it: below 64 sessions it is reproduced
/// exactly ([`v8_short_sort`]); from 64 on, Invalid Dates go last.
fn sort_by_modified(v: &mut [SessionInfo]) {
    if v.len() < 64 && v.iter().any(|s| s.modified.is_none()) {
        v8_short_sort(v, |a, b| match (a.modified, b.modified) {
            (Some(a), Some(b)) => (b - a) as f64,
            _ => f64::NAN,
        });
        return;
    }
    // Sorting (key, index) pairs and then moving each info once is cheaper than a
    // merge sort moving the large infos around; the index keeps it stable.
    v.sort_by_cached_key(|s| std::cmp::Reverse(s.modified));
}

/// V8's `Array.prototype.sort` for fewer than 64 elements (its TimSort makes one run:
/// the leading ascending or strictly descending run, then binary insertion), with a
/// comparator that may answer `NaN` (neither less nor more: treated as "not less").
fn v8_short_sort<T>(v: &mut [T], compare: impl Fn(&T, &T) -> f64) {
    let n = v.len();
    if n < 2 {
        return;
    }
    // CountAndMakeRun(0, n).
    let descending = compare(&v[1], &v[0]) < 0.0;
    let mut run = 2;
    while run < n {
        let order = compare(&v[run], &v[run - 1]);
        // `order >= 0` and `order < 0` are both false for NaN: the run goes on.
        if (descending && order >= 0.0) || (!descending && order < 0.0) {
            break;
        }
        run += 1;
    }
    if descending {
        v[..run].reverse();
    }
    // BinaryInsertionSort(0, run, n).
    for start in run..n {
        let (mut left, mut right) = (0, start);
        while left < right {
            let mid = left + ((right - left) >> 1);
            if compare(&v[start], &v[mid]) < 0.0 {
                right = mid;
            } else {
                left = mid + 1;
            }
        }
        v[left..=start].rotate_right(1);
    }
}

/// omp's order: `modified` desc, then `created` desc (invalid as 0), then path in
/// reverse locale order.
fn sort_omp(v: &mut [SessionInfo]) {
    use std::cmp::Reverse;
    // Keys computed once: ties on the times (files copied together) are common.
    v.sort_by_cached_key(|s| {
        (Reverse(s.modified), Reverse(s.created.unwrap_or(0)), Reverse(collation_key(&s.path.to_string_lossy())))
    });
}

/// A character's primary collation weight: its class (punctuation and symbols,
/// digits, letters) and its value (letters lower-cased).
fn primary_weight(c: char) -> (u8, u32) {
    if c.is_ascii_digit() {
        (1, c as u32)
    } else if c.is_alphabetic() {
        (2, c.to_lowercase().next().unwrap_or(c) as u32)
    } else {
        (0, c as u32)
    }
}

/// A key whose plain order approximates ICU root collation (`localeCompare`) for
/// file names: punctuation and symbols sort before digits, digits before letters,
/// letters compare case-insensitively first (lower case first on ties), then code
/// points. Sorting with keys computes each once.
///
/// The key is bytes in three parts, each ended by a 0 that sorts before every
/// element, so that its plain order is the order of the parts in turn: the primary
/// weights (class, then the lower-cased character; see [`push_primary`]), then the
/// case of each character, then the bytes (each offset by one). Keys of ASCII names
/// take one byte per element and compare with `memcmp`.
fn collation_key(name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(name.len() * 3 + 2);
    for c in name.chars() {
        push_primary(&mut key, primary_weight(c));
    }
    key.push(0);
    key.extend(name.chars().map(|c| 1 + u8::from(c.is_uppercase())));
    key.push(0);
    // UTF-8 never holds 0xFF, so the offset bytes stay in range.
    key.extend(name.bytes().map(|b| b.saturating_add(1)));
    key
}

/// Appends a primary weight as bytes whose order is the weights' order: a code's
/// first byte says how long it is and sorts the groups (ASCII symbols, other
/// symbols, digits, letters below `a`, `a` to `z`, other letters); a long code
/// follows its group's byte with the value in three big-endian bytes. No code is a
/// prefix of another, so comparing the concatenations compares the sequences.
fn push_primary(key: &mut Vec<u8>, (class, value): (u8, u32)) {
    let [_, hi, mid, lo] = value.to_be_bytes();
    match (class, value) {
        // Below 0x80, so the code stays below 0x81.
        (0, 0..=0x7f) => key.push(value as u8 + 1),
        (0, _) => key.extend_from_slice(&[0x81, hi, mid, lo]),
        // Digits are ASCII digits: 0x82 to 0x8b.
        (1, _) => key.push(0x82 + (value as u8).wrapping_sub(b'0').min(9)),
        (_, 0..=0x60) => key.extend_from_slice(&[0x8c, hi, mid, lo]),
        (_, 0x61..=0x7a) => key.push(0x8d + (value as u8 - b'a')),
        (_, _) => key.extend_from_slice(&[0xa7, hi, mid, lo]),
    }
}

/// The most threads a listing scans files on.
const MAX_LIST_WORKERS: usize = 16;

/// Builds infos for `files` on worker threads and reports progress in completion
/// order on the calling thread. Returns the kept infos in file order.
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
    let workers = parallelism.threads().min(MAX_LIST_WORKERS).min(total / 8 + 1);
    if workers <= 1 {
        for (i, f) in files.iter().enumerate() {
            on_result(i, build(f));
        }
    } else {
        // Every thread, this one included, claims files a few at a time. The others hand
        // their results over in batches; this one reports its own and whatever has
        // arrived between its batches, so no thread sits waiting while files remain.
        const CHUNK: usize = 8;
        let next = AtomicUsize::new(0);
        let claim = || {
            let start = next.fetch_add(CHUNK, AtomicOrdering::Relaxed);
            files.get(start..files.len().min(start + CHUNK)).filter(|c| !c.is_empty()).map(|c| (start, c))
        };
        let (tx, rx) = mpsc::channel::<Vec<(usize, Option<SessionInfo>)>>();
        std::thread::scope(|s| {
            for _ in 1..workers {
                let tx = tx.clone();
                let (build, claim) = (&build, &claim);
                s.spawn(move || {
                    while let Some((start, chunk)) = claim() {
                        let batch = chunk.iter().enumerate().map(|(k, f)| (start + k, build(f))).collect();
                        if tx.send(batch).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            while let Some((start, chunk)) = claim() {
                for (k, f) in chunk.iter().enumerate() {
                    on_result(start + k, build(f));
                }
                for batch in rx.try_iter() {
                    for (i, info) in batch {
                        on_result(i, info);
                    }
                }
            }
            for batch in rx {
                for (i, info) in batch {
                    on_result(i, info);
                }
            }
        });
    }
    // Back into file order: each info moves once.
    let mut slots: Vec<Option<SessionInfo>> = std::iter::repeat_with(|| None).take(total).collect();
    for (i, info) in done_idx.into_iter().zip(done) {
        slots[i] = Some(info);
    }
    slots.into_iter().flatten().collect()
}

/// The current time in nanoseconds since the epoch (whole milliseconds).
fn now_ns() -> i64 {
    use session_store::clock::Clock;
    session_store::clock::SystemClock.now_ms().saturating_mul(1_000_000)
}

/// The name of omp's list of pinned sessions in its agent directory.
pub const PINS_FILE: &str = "session-pins.json";

/// Reads omp's `session-pins.json` as omp 18 does (`loadPinnedSessionIds`): the string
/// elements of a JSON array (other elements are no pins), the bytes decoded as UTF-8
/// with replacement. `None` when the content is not a JSON array: omp then reads no
/// pins, and a writer must not take that for an empty list.
pub fn parse_pins(bytes: &[u8]) -> Option<Vec<String>> {
    let text = String::from_utf8_lossy(bytes);
    let raw = crate::jsonscan::parse_whole(&text).ok()?;
    if crate::jsonscan::kind(raw) != crate::jsonscan::Kind::Array {
        return None;
    }
    Some(
        crate::jsonscan::array_elements(raw)
            .into_iter()
            .filter_map(|e| crate::jsonscan::decode_string(e).map(|s| s.into_owned()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;

    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// With a comparator that is an order, V8's short sort is a stable sort.
        #[test]
        fn v8_short_sort_is_stable_for_an_order(keys in proptest::collection::vec(0i64..6, 0..63)) {
            let mut v: Vec<(i64, usize)> = keys.iter().copied().zip(0..).collect();
            let mut want = v.clone();
            want.sort_by_key(|&(k, _)| std::cmp::Reverse(k));
            v8_short_sort(&mut v, |a, b| (b.0 - a.0) as f64);
            prop_assert_eq!(v, want);
        }
    }

    /// What pi 1.6.0 listed for testdata/conformance-odd/b/pi/message-timestamps (file
    /// names descending, two Invalid Dates among them): the order it was given, where
    /// an order-respecting sort would move the 8.64e15 session first.
    #[test]
    fn v8_short_sort_with_invalid_dates_as_pi_lists_them() {
        const T: i64 = 1_767_225_600_000;
        let input = [
            (0x1d, Some(T)),
            (0x1c, None),
            (0x1b, Some(8_640_000_000_000_000)),
            (0x1a, Some(T + 1000)),
            (0x19, Some(T)),
            (0x18, Some(T)),
            (0x17, None),
            (0x16, Some(T)),
            (0x15, Some(1)),
        ];
        let mut v = input.to_vec();
        v8_short_sort(&mut v, |a: &(i32, Option<i64>), b| match (a.1, b.1) {
            (Some(a), Some(b)) => (b - a) as f64,
            _ => f64::NAN,
        });
        assert_eq!(v, input);
        // Without the Invalid Dates it is an order, and the newest comes first.
        let mut valid: Vec<_> = input.iter().copied().filter(|x| x.1.is_some()).collect();
        v8_short_sort(&mut valid, |a, b| (b.1.unwrap() - a.1.unwrap()) as f64);
        assert_eq!(valid.iter().map(|x| x.0).collect::<Vec<_>>(), [0x1b, 0x1a, 0x1d, 0x19, 0x18, 0x16, 0x15]);
    }

    /// `localeCompare` as the rule reads, one comparison at a time.
    fn locale_compare(a: &str, b: &str) -> Ordering {
        a.chars()
            .map(primary_weight)
            .cmp(b.chars().map(primary_weight))
            .then_with(|| a.chars().map(char::is_uppercase).cmp(b.chars().map(char::is_uppercase)))
            .then_with(|| a.cmp(b))
    }

    proptest! {
        #[test]
        fn collation_keys_order_like_the_comparison(a in "[ -~éÉßİ\u{212a}€\u{80}\u{ff}\u{10ffff}日😀]{0,12}", b in "[ -~éÉßİ\u{212a}€\u{80}\u{ff}\u{10ffff}日😀]{0,12}") {
            prop_assert_eq!(collation_key(&a).cmp(&collation_key(&b)), locale_compare(&a, &b));
        }

        #[test]
        fn primary_codes_order_like_the_weights(
            a in prop_oneof![any::<char>(), proptest::char::range('\0', '\u{7f}')],
            b in prop_oneof![any::<char>(), proptest::char::range('\0', '\u{7f}')],
        ) {
            let code = |c: char| {
                let mut key = Vec::new();
                push_primary(&mut key, primary_weight(c));
                key
            };
            prop_assert_eq!(code(a).cmp(&code(b)), primary_weight(a).cmp(&primary_weight(b)));
        }
    }

    #[test]
    fn session_names_order() {
        let mut v = vec!["b_2.jsonl", "B_1.jsonl", "a-1.jsonl", "_z.jsonl", "10.jsonl", "9.jsonl"];
        v.sort_by_cached_key(|n| collation_key(n));
        assert_eq!(v, ["_z.jsonl", "10.jsonl", "9.jsonl", "a-1.jsonl", "B_1.jsonl", "b_2.jsonl"]);
    }
}
