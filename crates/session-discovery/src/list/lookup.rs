//! Lookups over a listing: the most recent session of a directory, a session by id,
//! what a `--resume` argument names, and the welcome screen's recent sessions.

use std::path::{Path, PathBuf};

use session_model::Dialect;
use session_store::FileStat;

use super::files::{Listed, omp_dir_files, pi_dir_files};
use super::{Discovery, Progress};
use crate::error::DiscoveryError;
use crate::info::SessionInfo;
use crate::{io, omp_scan, pi_scan};

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

/// The progress of a listing a lookup makes: not reported.
fn noop(_: Progress<'_>) {}

impl Discovery {
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
                    pi_scan::read_header(self.storage(), p).is_some_and(|h| {
                        resolved_cwd.as_ref().is_none_or(|rc| h.cwd.as_deref().is_some_and(|c| self.cwd_matches(c, rc)))
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
                let d = dir.map_or_else(|| self.session_dir_of(cwd), |d| Ok(self.resolve_dir(d)))?;
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
                let local_dir = dir.map_or_else(|| self.session_dir_of(cwd), |d| Ok(self.resolve_dir(d)))?;
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
