//! What a [`crate::SessionManager`] runs on: storage, clock, blob store, durability,
//! and the agent directories that omp's lifecycle writes beside the session (terminal
//! breadcrumbs, default buckets).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use session_discovery::{AgentDirs, OmpHome};
use session_model::ids::SessionIdGenerator;
use session_model::{Parallelism, SpanPolicy};
use session_store::blob::BlobStore;
use session_store::clock::{Clock, SystemClock};
use session_store::{Durability, FileStorage, MemoryStorage, PrivateDir, Storage};

/// The environment of a session: where bytes go and where time comes from.
///
/// [`Env::files`] is the real thing (files, fsync where asked, the system clock, omp's
/// agent directory of this process with its blob store and this terminal's
/// breadcrumbs); [`Env::memory`] keeps everything in memory (tests, `in_memory`
/// sessions) and has no agent directory. Every other setting is a `with_` method of
/// either, and each has a getter:
///
/// ```
/// use session::Env;
/// use session::store::Durability;
///
/// let env = Env::memory().with_durability(Durability::Fsync).with_process_cwd("/work");
/// assert_eq!(env.durability(), Durability::Fsync);
/// assert_eq!(env.process_cwd(), std::path::Path::new("/work"));
/// ```
#[derive(Clone)]
pub struct Env {
    /// Where session files are read and written.
    pub(crate) storage: Arc<dyn Storage>,
    /// Where timestamps come from.
    pub(crate) clock: Arc<dyn Clock>,
    /// The blob store of omp's persistence transforms (images externalised, huge strings
    /// cut, `jsonlEvents` dropped on write; `blob:` references resolved on load). `None`
    /// turns the transforms off: omp lines are written as they are.
    pub(crate) blobs: Option<BlobStore>,
    /// How hard each append tries to reach the disk.
    pub(crate) durability: Durability,
    /// The process working directory, used where a reference uses `process.cwd()`.
    pub(crate) process_cwd: PathBuf,
    /// The agent's directories: default session buckets (omp's `moveTo`,
    /// `createEmptySessionFile`) and the terminal breadcrumbs. `None`: no default
    /// bucket and no breadcrumbs.
    pub(crate) dirs: Option<AgentDirs>,
    /// The terminal whose breadcrumb omp sessions keep up to date (`None`: none is
    /// written).
    pub(crate) terminal_id: Option<String>,
    /// How many threads one operation on a large session may use (the piecewise parse
    /// of an open or fork, the write of a branched or forked session beside its index);
    /// [`Parallelism::SERIAL`] keeps everything on the calling thread. Results never
    /// depend on it.
    pub(crate) parallelism: Parallelism,
    /// When an opened session leaves the text of its large records in its file, read
    /// when first asked for ([`session_model::span`]): memory then grows with the
    /// number of entries, not their bytes. `None` keeps every text in memory. The
    /// default ([`SpanPolicy::default`]) does so for files of 4 MiB and more.
    pub(crate) spans: Option<SpanPolicy>,
    /// Where opening a session whose texts stay in its file keeps its index (the parse
    /// of the file, reused while the file is unchanged or only grew; see
    /// [`crate::IndexUse`]). `None` (the default) keeps none: every open parses the
    /// file. A private cache folder outside the session directories
    /// ([`PrivateDir::open`]: this user's alone, its files written 0600); deleting it
    /// costs only speed.
    pub(crate) index_dir: Option<PrivateDir>,
}

impl Env {
    /// Real files, the system clock, no fsync per append (what the references do), and
    /// omp's agent directory of this process (`~/.musepi/agent` or what the environment
    /// variables say): its blob store `<agent dir>/blobs` for the persistence transforms,
    /// and this terminal's breadcrumbs. Without a home directory there is neither.
    pub fn files() -> Env {
        let mut env = Env::bare(Arc::new(FileStorage::new()));
        if let Ok(process) = session_discovery::ProcessEnv::from_process_env() {
            let terminal = process.terminal_id();
            env = env.with_agent_dirs(AgentDirs::omp(&process, OmpHome::MusePi)).with_terminal(terminal);
        }
        env
    }

    /// Everything in memory, with the system clock: an in-memory blob store, no agent
    /// directory, no breadcrumbs.
    pub fn memory() -> Env {
        Env { blobs: Some(BlobStore::in_memory()), ..Env::bare(Arc::new(MemoryStorage::new())) }
    }

    /// Returns an environment on `storage` with the system clock and nothing else: no
    /// blob store (omp's persistence transforms off), no agent directory, no breadcrumbs.
    pub fn bare(storage: Arc<dyn Storage>) -> Env {
        Env {
            storage,
            clock: Arc::new(SystemClock),
            blobs: None,
            durability: Durability::None,
            process_cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
            dirs: None,
            terminal_id: None,
            parallelism: Parallelism::default(),
            spans: Some(SpanPolicy::default()),
            index_dir: None,
        }
    }

    setters! { Env;
        /// Returns this environment with another parallelism setting.
        with_parallelism(parallelism: Parallelism) => parallelism = parallelism;

        /// Returns this environment with another policy for texts left in the file
        /// (`None`: every text of an opened session is kept in memory).
        with_spans(spans: Option<SpanPolicy>) => spans = spans;

        /// Returns this environment keeping session indexes in `dir` (see [`Env::index_dir`]).
        with_index_dir(dir: PrivateDir) => index_dir = Some(dir);

        /// Returns this environment with a blob store.
        with_blobs(blobs: BlobStore) => blobs = Some(blobs);
    }

    /// Returns this environment with omp's persistence transforms turned off: lines are
    /// written as they are and `blob:` references stay unresolved.
    pub fn without_persistence_transforms(mut self) -> Env {
        self.blobs = None;
        self
    }

    /// Returns this environment with the agent directories `dirs` and their blob store
    /// (`<agent dir>/blobs`, as omp uses it).
    pub fn with_agent_dirs(mut self, dirs: AgentDirs) -> Env {
        self.blobs = Some(BlobStore::open(dirs.agent_dir.join("blobs")));
        self.dirs = Some(dirs);
        self
    }

    setters! { Env;
        /// Returns this environment keeping the breadcrumb of `terminal_id` (`None`: none).
        with_terminal(terminal_id: Option<String>) => terminal_id = terminal_id;

        /// Returns this environment with another durability setting.
        with_durability(durability: Durability) => durability = durability;

        /// Returns this environment with another process working directory.
        with_process_cwd(cwd: impl Into<PathBuf>) => process_cwd = cwd.into();

        /// Returns this environment on another storage (the blob store, if any, stays where
        /// it is).
        with_storage(storage: Arc<dyn Storage>) => storage = storage;

        /// Returns this environment with another clock.
        with_clock(clock: Arc<dyn Clock>) => clock = clock;

        /// Returns this environment with the agent directories `dirs` alone (`None`: none),
        /// its blob store unchanged; [`Env::with_agent_dirs`] takes the agent's blob store too.
        with_dirs(dirs: Option<AgentDirs>) => dirs = dirs;
    }

    /// Where session files are read and written.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// Where timestamps come from.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The blob store of omp's persistence transforms (images externalised, huge strings
    /// cut, `jsonlEvents` dropped on write; `blob:` references resolved on load). `None`:
    /// the transforms are off and omp lines are written as they are.
    pub fn blobs(&self) -> Option<&BlobStore> {
        self.blobs.as_ref()
    }

    /// How hard each append tries to reach the disk.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// The process working directory, used where a reference uses `process.cwd()`.
    pub fn process_cwd(&self) -> &Path {
        &self.process_cwd
    }

    /// The agent's directories: default session buckets (omp's `moveTo`,
    /// `createEmptySessionFile`) and the terminal breadcrumbs. `None`: no default bucket
    /// and no breadcrumbs.
    pub fn dirs(&self) -> Option<&AgentDirs> {
        self.dirs.as_ref()
    }

    /// The terminal whose breadcrumb omp sessions keep up to date (`None`: none is
    /// written).
    pub fn terminal_id(&self) -> Option<&str> {
        self.terminal_id.as_deref()
    }

    /// How many threads one operation on a large session may use.
    pub fn parallelism(&self) -> Parallelism {
        self.parallelism
    }

    /// When an opened session leaves the text of its large records in its file (`None`:
    /// every text stays in memory).
    pub fn spans(&self) -> Option<SpanPolicy> {
        self.spans
    }

    /// Where opening a session whose texts stay in its file keeps its index (`None`:
    /// nowhere; every open parses the file).
    pub fn index_dir(&self) -> Option<&PrivateDir> {
        self.index_dir.as_ref()
    }

    /// Returns the current time in epoch milliseconds.
    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Returns the current time as an ISO string.
    pub(crate) fn now_iso(&self) -> String {
        session_model::timestamp::format_iso_millis(self.now_ms())
    }

    /// Returns a fresh UUIDv7 session id (monotonic within the process).
    pub(crate) fn new_session_id(&self) -> String {
        static IDS: Mutex<Option<SessionIdGenerator>> = Mutex::new(None);
        let mut guard = IDS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let generator = guard.get_or_insert_with(SessionIdGenerator::new);
        generator.next(self.now_ms().max(0) as u64, &mut rand::rng())
    }

    /// Writes the terminal breadcrumb for `session_file` (omp), best effort as in omp:
    /// without agent directories or a terminal nothing is written, and a failure only
    /// costs the next `--continue` its shortcut.
    pub(crate) fn write_breadcrumb(&self, cwd: &str, session_file: &Path, fresh: bool) {
        let (Some(dirs), Some(terminal)) = (&self.dirs, &self.terminal_id) else { return };
        let identity = session_discovery::cwd_identity(Path::new(cwd));
        let _ = session_discovery::write_breadcrumb(dirs, terminal, cwd, session_file, fresh, identity);
    }
}
