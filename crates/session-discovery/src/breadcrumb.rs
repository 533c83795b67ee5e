//! omp's terminal breadcrumbs: which session a terminal last used, so `--continue`
//! resumes the session of *this* terminal.
//!
//! File `<state>/terminal-sessions/<terminal-id>`:
//!
//! ```text
//! <cwd as given>
//! <session file path>
//! fresh                 (optional: the session file does not exist yet)
//! cwdstat <dev> <ino>   (optional: identity of the cwd when written)
//! ```

use std::path::{Path, PathBuf};

use session_store::Storage;

use crate::env::AgentDirs;
use crate::error::DiscoveryError;
use crate::info::SessionInfo;
use crate::io;
use crate::list::Discovery;

/// A breadcrumb as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Breadcrumb {
    /// The cwd recorded with it.
    pub cwd: String,
    /// The session file.
    pub session_file: PathBuf,
    /// The session had not been written yet.
    pub fresh: bool,
    /// Device and inode of the cwd when written.
    pub cwd_stat: Option<(u64, u64)>,
    /// Whether the session file exists as a regular file.
    pub exists: bool,
}

fn breadcrumb_path(dirs: &AgentDirs, terminal_id: &str) -> PathBuf {
    dirs.terminal_sessions_dir().join(terminal_id)
}

/// Writes the breadcrumb of `terminal_id` (creating the directory). `cwd_stat` is
/// the cwd's `(dev, ino)`; pass [`cwd_identity`] of the cwd.
pub fn write_breadcrumb(
    dirs: &AgentDirs,
    terminal_id: &str,
    cwd: &str,
    session_file: &Path,
    fresh: bool,
    cwd_stat: Option<(u64, u64)>,
) -> Result<(), DiscoveryError> {
    let path = breadcrumb_path(dirs, terminal_id);
    let mut text = format!("{cwd}\n{}\n", session_file.to_string_lossy());
    if fresh {
        text.push_str("fresh\n");
    }
    if let Some((dev, ino)) = cwd_stat {
        text.push_str(&format!("cwdstat {dev} {ino}\n"));
    }
    let dir = dirs.terminal_sessions_dir();
    io::local().ensure_dir(&dir).map_err(|e| DiscoveryError::Write { path: dir.clone(), source: io::to_io(e) })?;
    io::write_small(&path, &text).map_err(|source| DiscoveryError::Write { path, source })
}

/// Returns `(dev, ino)` of a directory, for the breadcrumb's `cwdstat` line.
pub fn cwd_identity(cwd: &Path) -> Option<(u64, u64)> {
    io::dev_ino(cwd)
}

/// Reads the breadcrumb of `terminal_id`: `None` if absent, unreadable, shorter
/// than two lines, or naming a file that is neither a regular file nor `fresh`.
/// The session file is looked for on this machine's file system;
/// [`Discovery::read_breadcrumb`] looks for it in the discovery's storage.
pub fn read_breadcrumb(dirs: &AgentDirs, terminal_id: &str) -> Option<Breadcrumb> {
    read_breadcrumb_in(&io::local(), dirs, terminal_id)
}

/// [`read_breadcrumb`], looking for the session file in `storage`.
fn read_breadcrumb_in(storage: &dyn Storage, dirs: &AgentDirs, terminal_id: &str) -> Option<Breadcrumb> {
    let bytes = io::local().read(&breadcrumb_path(dirs, terminal_id)).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = session_model::js_trim(&text).split('\n').collect();
    if lines.len() < 2 {
        return None;
    }
    let mut fresh = false;
    let mut cwd_stat = None;
    for extra in &lines[2..] {
        let extra = extra.trim();
        if extra == "fresh" {
            fresh = true;
        } else if let Some(rest) = extra.strip_prefix("cwdstat ") {
            let mut it = rest.split_whitespace();
            if let (Some(d), Some(i)) = (it.next(), it.next())
                && let (Ok(d), Ok(i)) = (d.parse(), i.parse())
            {
                cwd_stat = Some((d, i));
            }
        }
    }
    let session_file = PathBuf::from(lines[1]);
    let exists = io::stat(storage, &session_file).is_some_and(|s| s.is_file);
    if !exists && !fresh {
        return None;
    }
    Some(Breadcrumb { cwd: lines[0].to_string(), session_file, fresh, cwd_stat, exists })
}

/// What `--continue` should do (omp's `continueRecent` decision).
#[derive(Clone, Debug, PartialEq)]
pub enum ContinueDecision {
    /// Open this session.
    Open(Box<SessionInfo>),
    /// Open this session file and move it to the current cwd (its old cwd was
    /// renamed to the current one: same device and inode).
    Reroot {
        /// The session file.
        session_file: PathBuf,
        /// The cwd it was recorded with.
        old_cwd: String,
    },
    /// Start a new session.
    New,
}

impl Discovery {
    /// Reads the breadcrumb of `terminal_id` as [`read_breadcrumb`] does, looking for
    /// its session file in this discovery's storage.
    pub fn read_breadcrumb(&self, terminal_id: &str) -> Option<Breadcrumb> {
        read_breadcrumb_in(self.storage(), self.dirs(), terminal_id)
    }

    /// Decides what `--continue` resumes in `cwd` (omp), using the breadcrumb of
    /// `terminal_id` when there is one: a fresh breadcrumb whose file is missing
    /// means a new session; a breadcrumb for this cwd is used directly; for another
    /// cwd the newest non-empty session of the breadcrumb's bucket is used, and the
    /// breadcrumb's own session is re-rooted only when the old cwd is gone *and* the
    /// current directory has the recorded device and inode. Without a breadcrumb:
    /// the newest non-empty session of the cwd's bucket.
    pub fn continue_recent(
        &self,
        cwd: &str,
        dir: Option<&Path>,
        terminal_id: Option<&str>,
    ) -> Result<ContinueDecision, DiscoveryError> {
        let env = &self.dirs().env;
        let resolved_cwd = env.resolve(cwd);
        let inside = |p: &Path| dir.is_none_or(|d| p.starts_with(env.resolve(&d.to_string_lossy())));
        if let Some(bc) = terminal_id.and_then(|t| self.read_breadcrumb(t)) {
            if bc.fresh && !bc.exists && inside(&bc.session_file) {
                return Ok(ContinueDecision::New);
            }
            // Walk back from subagent transcripts to the interactive root.
            let mut target = bc.session_file.clone();
            for _ in 0..8 {
                let Some(parent) = target.parent() else { break };
                let candidate = parent.with_extension("jsonl");
                if parent.extension().is_none() && io::stat(self.storage(), &candidate).is_some_and(|s| s.is_file) {
                    target = candidate;
                } else {
                    break;
                }
            }
            if env.resolve(&bc.cwd) == resolved_cwd {
                if bc.exists
                    && inside(&target)
                    && let Some(info) = crate::omp_scan::scan_session_file(self.storage(), &target, true)
                {
                    return Ok(ContinueDecision::Open(Box::new(info)));
                }
            } else if let Some(bucket) = target.parent() {
                let sessions = self.list_all(Some(bucket), &mut |_| {}).unwrap_or_default();
                let non_empty: Vec<&SessionInfo> = sessions.iter().filter(|s| !s.is_empty()).collect();
                let mut candidate = non_empty.first().copied();
                // The old working directory is on this machine, not in the storage.
                let old_missing = !Path::new(&env.resolve(&bc.cwd)).exists();
                let is_crumb = |s: Option<&SessionInfo>| s.is_some_and(|s| s.path == target);
                if old_missing && is_crumb(candidate) {
                    let alt =
                        non_empty.iter().copied().find(|s| s.path != target && env.resolve(&s.cwd) == resolved_cwd);
                    if alt.is_some() {
                        candidate = alt;
                    }
                }
                let same_dir = bc.cwd_stat.is_some() && bc.cwd_stat == cwd_identity(Path::new(&resolved_cwd));
                if old_missing && (candidate.is_none() || is_crumb(candidate)) && same_dir {
                    return Ok(ContinueDecision::Reroot { session_file: target, old_cwd: bc.cwd });
                }
                return Ok(candidate.map_or(ContinueDecision::New, |s| ContinueDecision::Open(Box::new(s.clone()))));
            }
        }
        let d =
            dir.map_or_else(|| self.session_dir_of(cwd), |d| Ok(PathBuf::from(env.resolve(&d.to_string_lossy()))))?;
        Ok(self.find_most_recent_non_empty(&d).map_or(ContinueDecision::New, |s| ContinueDecision::Open(Box::new(s))))
    }
}
