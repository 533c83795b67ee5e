//! Where the agents keep what the jobs may touch: every folder either agent may keep
//! sessions in, omp's blob stores and its registry of session files kept elsewhere.

use std::path::{Path, PathBuf};

use session_discovery::{AgentDirs, OmpHome, ProcessEnv};
use session_model::Dialect;

/// A folder of project buckets one agent (or both) keeps sessions in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    /// The folder, as the agent derives it.
    pub path: PathBuf,
    /// The folder with every link resolved (the derived path where it does not exist):
    /// what tells two roots apart and what a path is placed in.
    pub real: PathBuf,
    /// Whose sessions it holds: one agent's, or `None` when both use it (pi and omp
    /// both read `PI_CODING_AGENT_DIR`); a file's own first line then says whose it is.
    pub dialect: Option<Dialect>,
}

impl Root {
    /// Returns this root's trash folder: [`super::TRASH_DIR`] beside it (`None` for a
    /// root with no folder above it).
    pub fn trash(&self) -> Option<PathBuf> {
        self.real.parent().map(|d| d.join(super::TRASH_DIR))
    }
}

/// Every place the agents may keep sessions and blobs, as the environment says now and
/// as it may have said when the agent ran: a job that must see every session (gc) looks
/// in all of them, and a job that deletes acts only inside them.
///
/// * pi: `$PI_CODING_AGENT_DIR/sessions` and `~/.pi/agent/sessions`;
/// * omp, for both home spellings (`~/.omp` and `~/.musepi`): the agent directory's
///   `sessions` under `$PI_CODING_AGENT_DIR`, `~/$PI_CONFIG_DIR/agent` and the default
///   home, and the XDG layout `<data>/<omp|musepi>/sessions` for `$XDG_DATA_HOME` and
///   its default `~/.local/share` (omp moves its sessions there whenever the folder
///   exists, so a gc run without the variable must still look there);
/// * blob stores: `<agent dir>/blobs` of every omp agent directory above;
/// * omp's registry of sessions kept outside its roots: `<agent dir>/custom-session-files`.
///
/// Roots that resolve to the same folder are one root.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Homes {
    roots: Vec<Root>,
    blob_dirs: Vec<PathBuf>,
    registries: Vec<PathBuf>,
}

impl Homes {
    /// Returns the places of both agents for the environment `env` (see [`Homes`]).
    pub fn from_env(env: &ProcessEnv) -> Homes {
        let mut homes = Homes::default();
        let bare = ProcessEnv { vars: Default::default(), ..env.clone() };
        for e in [env, &bare] {
            let pi = AgentDirs::pi(e);
            homes.add_root(&pi.sessions_root, Some(Dialect::Pi));
            for home in [OmpHome::Omp, OmpHome::MusePi] {
                let omp = AgentDirs::omp(e, home);
                homes.add_root(&omp.sessions_root, Some(Dialect::Omp));
                homes.add_root(&omp.agent_dir.join("sessions"), Some(Dialect::Omp));
                push_once(&mut homes.blob_dirs, omp.agent_dir.join("blobs"));
                push_once(&mut homes.registries, omp.agent_dir.join("custom-session-files"));
            }
        }
        let mut data_homes: Vec<PathBuf> = env.var("XDG_DATA_HOME").map(PathBuf::from).into_iter().collect();
        data_homes.push(env.home.join(".local").join("share"));
        for data in data_homes {
            for name in ["omp", "musepi"] {
                homes.add_root(&data.join(name).join("sessions"), Some(Dialect::Omp));
            }
        }
        homes
    }

    /// Returns these places with `dir` as a sessions root too, whose sessions are
    /// `dialect`'s (`None`: each file says).
    #[must_use]
    pub fn with_root(mut self, dir: &Path, dialect: Option<Dialect>) -> Homes {
        self.add_root(dir, dialect);
        self
    }

    /// Returns these places with `dir` as a blob store too.
    #[must_use]
    pub fn with_blob_dir(mut self, dir: &Path) -> Homes {
        push_once(&mut self.blob_dirs, dir.to_path_buf());
        self
    }

    /// Returns the sessions roots.
    pub fn roots(&self) -> &[Root] {
        &self.roots
    }

    /// Returns the blob stores.
    pub fn blob_dirs(&self) -> &[PathBuf] {
        &self.blob_dirs
    }

    /// Returns the folders of omp's registry of sessions kept outside its roots (each file
    /// in them holds one session's absolute path).
    pub fn registries(&self) -> &[PathBuf] {
        &self.registries
    }

    /// Returns the trash folder of each root ([`super::trash_of`]), each once.
    pub fn trashes(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self.roots.iter().filter_map(Root::trash).collect();
        out.sort();
        out.dedup();
        out
    }

    /// Returns the root `path` is in (its folder resolved, the file name itself not),
    /// if any.
    pub fn root_of(&self, path: &Path) -> Option<&Root> {
        let real = real_location(path);
        self.roots.iter().find(|r| real.starts_with(&r.real) && real != r.real)
    }

    /// Returns whether `path` is inside a sessions root or a blob store.
    pub fn contains(&self, path: &Path) -> bool {
        let real = real_location(path);
        self.root_of(path).is_some()
            || self.blob_dirs.iter().any(|d| real.starts_with(real_path(d)) && real != real_path(d))
    }

    fn add_root(&mut self, dir: &Path, dialect: Option<Dialect>) {
        let real = real_path(dir);
        match self.roots.iter_mut().find(|r| r.real == real) {
            Some(r) if r.dialect != dialect => r.dialect = None,
            Some(_) => {}
            None => self.roots.push(Root { path: lexical(dir), real, dialect }),
        }
    }
}

fn push_once(list: &mut Vec<PathBuf>, p: PathBuf) {
    if !list.contains(&p) {
        list.push(p);
    }
}

/// Returns `path` with every link resolved, or made absolute and normalised (`.` and
/// `..` taken out as text) where it does not exist.
pub(crate) fn real_path(path: &Path) -> PathBuf {
    PathBuf::from(session_discovery::canonicalize_best_effort(&lexical(path).to_string_lossy()))
}

/// Returns where `path` is: its folder with links resolved, then its own name (a link
/// named there is not followed).
pub(crate) fn real_location(path: &Path) -> PathBuf {
    let abs = lexical(path);
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => real_path(parent).join(name),
        _ => abs,
    }
}

/// `path` made absolute against the working directory, `.` and `..` resolved as text
/// (Node's `path.resolve`, as the agents name files).
pub(crate) fn lexical(path: &Path) -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    session_discovery::resolve_path(&cwd, path)
}
