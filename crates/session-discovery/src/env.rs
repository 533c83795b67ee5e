//! Where sessions live: the environment a process sees and the directories the
//! references derive from it.
//!
//! [`ProcessEnv`] is an explicit snapshot (variables, home, working directory, temp root,
//! terminal) so tests stay hermetic; [`ProcessEnv::from_process_env`] takes the real one.
//! [`AgentDirs`] turns it into the agent directory, the sessions root and the
//! state directories of one dialect.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use session_model::Dialect;
use session_store::Storage;

use crate::error::DiscoveryError;
use crate::paths;

/// A snapshot of the process environment that discovery depends on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessEnv {
    /// Environment variables.
    pub vars: BTreeMap<String, String>,
    /// The home directory (`os.homedir()`).
    pub home: PathBuf,
    /// The working directory relative paths resolve against.
    pub cwd: PathBuf,
    /// The temp root (`os.tmpdir()`).
    pub tmp: PathBuf,
    /// The terminal device of stdin when it is a TTY (`/dev/pts/3`), if known.
    pub tty: Option<String>,
}

impl ProcessEnv {
    /// Creates an environment with no variables.
    pub fn new(home: impl Into<PathBuf>, cwd: impl Into<PathBuf>, tmp: impl Into<PathBuf>) -> ProcessEnv {
        ProcessEnv { vars: BTreeMap::new(), home: home.into(), cwd: cwd.into(), tmp: tmp.into(), tty: None }
    }

    /// Returns a copy with variable `key` set.
    #[must_use]
    pub fn with_var(mut self, key: &str, value: &str) -> ProcessEnv {
        self.vars.insert(key.to_string(), value.to_string());
        self
    }

    /// Takes the environment of this process.
    pub fn from_process_env() -> Result<ProcessEnv, DiscoveryError> {
        let vars: BTreeMap<String, String> =
            std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))).collect();
        let home = vars
            .get("HOME")
            .or_else(|| vars.get("USERPROFILE"))
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .ok_or(DiscoveryError::NoHome)?;
        let cwd = std::env::current_dir().map_err(DiscoveryError::NoCwd)?;
        let tmp = std::env::temp_dir();
        Ok(ProcessEnv { vars, home, cwd, tmp, tty: stdin_tty() })
    }

    /// Returns a variable if it is set and non-empty.
    pub fn var(&self, key: &str) -> Option<&str> {
        self.vars.get(key).map(String::as_str).filter(|v| !v.is_empty())
    }

    fn home_str(&self) -> String {
        self.home.to_string_lossy().into_owned()
    }

    fn cwd_str(&self) -> String {
        self.cwd.to_string_lossy().into_owned()
    }

    /// Normalises a user-supplied path (tilde, `file://`) and resolves it against
    /// the working directory, as `path.resolve` does.
    pub fn resolve(&self, p: &str) -> String {
        paths::resolve(&self.cwd_str(), &paths::expand_user_path(p, &self.home_str()))
    }

    /// Returns the terminal id omp keys breadcrumbs by (`getTerminalId`), or `None`
    /// when no terminal can be identified.
    pub fn terminal_id(&self) -> Option<String> {
        if let Some(tty) = &self.tty
            && let Some(rest) = tty.strip_prefix("/dev/")
        {
            return Some(rest.replace('/', "-"));
        }
        if let Some(pane) = self.var("ZELLIJ_PANE_ID") {
            return Some(match self.var("ZELLIJ_SESSION_NAME") {
                Some(s) => format!("zellij-{}-{pane}", s.replace(['/', '\\'], "-")),
                None => format!("zellij-{pane}"),
            });
        }
        for (var, prefix) in [
            ("TMUX_PANE", "tmux"),
            ("CMUX_SURFACE_ID", "cmux"),
            ("KITTY_WINDOW_ID", "kitty"),
            ("WEZTERM_PANE", "wezterm"),
            ("TERM_SESSION_ID", "apple"),
            ("WT_SESSION", "wt"),
        ] {
            if let Some(v) = self.var(var) {
                return Some(format!("{prefix}-{v}"));
            }
        }
        None
    }
}

#[cfg(target_os = "linux")]
fn stdin_tty() -> Option<String> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() {
        return None;
    }
    fs_err::read_link("/proc/self/fd/0").ok().map(|p| p.to_string_lossy().into_owned())
}

#[cfg(not(target_os = "linux"))]
fn stdin_tty() -> Option<String> {
    None
}

/// Which home-directory spelling omp uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OmpHome {
    /// `~/.musepi` (XDG name `musepi`): this project's default.
    #[default]
    MusePi,
    /// `~/.omp` (XDG name `omp`): upstream omp.
    Omp,
}

impl OmpHome {
    fn dir_name(self) -> &'static str {
        match self {
            OmpHome::MusePi => ".musepi",
            OmpHome::Omp => ".omp",
        }
    }

    fn xdg_name(self) -> &'static str {
        match self {
            OmpHome::MusePi => "musepi",
            OmpHome::Omp => "omp",
        }
    }
}

/// The directories of one dialect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentDirs {
    /// The dialect.
    pub dialect: Dialect,
    /// The agent directory (`~/.pi/agent`, `~/.musepi/agent`, ...).
    pub agent_dir: PathBuf,
    /// Where project buckets live (`<agentDir>/sessions`, or the XDG data dir).
    pub sessions_root: PathBuf,
    /// Where omp keeps state such as terminal breadcrumbs (the agent dir, or the XDG
    /// state dir).
    pub state_dir: PathBuf,
    /// The environment the directories were derived from.
    pub env: ProcessEnv,
}

impl AgentDirs {
    /// Returns pi's directories: `$PI_CODING_AGENT_DIR` (tilde-expanded) or
    /// `~/.pi/agent`.
    pub fn pi(env: &ProcessEnv) -> AgentDirs {
        let agent_dir = env
            .var("PI_CODING_AGENT_DIR")
            .map_or_else(|| env.home.join(".pi").join("agent"), |d| PathBuf::from(env.resolve(d)));
        AgentDirs {
            dialect: Dialect::Pi,
            sessions_root: agent_dir.join("sessions"),
            state_dir: agent_dir.clone(),
            agent_dir,
            env: env.clone(),
        }
    }

    /// Returns omp's directories: config root `~/<.musepi|.omp>` (or
    /// `~/$PI_CONFIG_DIR`), agent dir `<root>/agent` (or `$PI_CODING_AGENT_DIR`).
    /// Without an explicit agent dir, an existing `$XDG_DATA_HOME/<name>` takes the
    /// sessions (flattened: `<xdg>/sessions`) and an existing
    /// `$XDG_STATE_HOME/<name>` the state (breadcrumbs).
    pub fn omp(env: &ProcessEnv, home: OmpHome) -> AgentDirs {
        let root = env.home.join(env.var("PI_CONFIG_DIR").unwrap_or(home.dir_name()));
        let explicit = env.var("PI_CODING_AGENT_DIR").map(|d| PathBuf::from(env.resolve(d)));
        let agent_dir = explicit.clone().unwrap_or_else(|| root.join("agent"));
        let mut sessions_root = agent_dir.join("sessions");
        let mut state_dir = agent_dir.clone();
        if explicit.is_none() && !cfg!(windows) {
            if let Some(x) = env.var("XDG_DATA_HOME") {
                let d = Path::new(x).join(home.xdg_name());
                if d.is_dir() {
                    sessions_root = d.join("sessions");
                }
            }
            if let Some(x) = env.var("XDG_STATE_HOME") {
                let d = Path::new(x).join(home.xdg_name());
                if d.is_dir() {
                    state_dir = d;
                }
            }
        }
        AgentDirs { dialect: Dialect::Omp, agent_dir, sessions_root, state_dir, env: env.clone() }
    }

    /// Returns the directories of `dialect` (`omp_home` only matters for omp).
    pub fn for_dialect(dialect: Dialect, env: &ProcessEnv, omp_home: OmpHome) -> AgentDirs {
        match dialect {
            Dialect::Pi => AgentDirs::pi(env),
            Dialect::Omp => AgentDirs::omp(env, omp_home),
        }
    }

    /// Returns the directory of terminal breadcrumbs.
    pub fn terminal_sessions_dir(&self) -> PathBuf {
        self.state_dir.join("terminal-sessions")
    }

    /// Returns the bucket name of `cwd` (no side effects).
    pub fn bucket_name(&self, cwd: &str) -> String {
        let resolved = self.env.resolve(cwd);
        match self.dialect {
            Dialect::Pi => paths::encode_cwd_pi(&resolved),
            Dialect::Omp => {
                paths::encode_cwd_omp(&resolved, &self.env.home.to_string_lossy(), &self.env.tmp.to_string_lossy())
            }
        }
    }

    /// Returns the default session directory of `cwd` without touching the disk.
    pub fn default_session_dir(&self, cwd: &str) -> PathBuf {
        self.sessions_root.join(self.bucket_name(cwd))
    }

    /// Returns the default session directory of `cwd` the way the references
    /// compute it, in `storage`: omp first migrates legacy bucket names into it (best
    /// effort), then both create it (`mkdir -p`).
    pub fn ensure_default_session_dir(&self, storage: &dyn Storage, cwd: &str) -> Result<PathBuf, DiscoveryError> {
        let dir = self.default_session_dir(cwd);
        if self.dialect == Dialect::Omp {
            crate::migrate::migrate_buckets(storage, self, cwd, &dir);
        }
        storage
            .ensure_dir(&dir)
            .map_err(|e| DiscoveryError::Write { path: dir.clone(), source: crate::io::to_io(e) })?;
        Ok(dir)
    }

    /// Returns whether `dir` is the default session directory of `cwd`.
    pub fn is_default_dir(&self, dir: &Path, cwd: &str) -> bool {
        let d = self.env.resolve(&dir.to_string_lossy());
        let def = self.env.resolve(&self.default_session_dir(cwd).to_string_lossy());
        d == def
    }
}
