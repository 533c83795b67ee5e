//! Moving a project: every session of a project folder that moved (or was renamed) goes
//! to the bucket of its new folder, as [`super::relocate`] moves one session.

use std::path::{Component, Path, PathBuf};

use session_discovery::SessionInfo;
use session_model::Dialect;

use super::{JobError, RelocateReport, relocate};
use crate::Env;

/// One session a project move takes along.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProjectMove {
    /// Whose session it is.
    pub dialect: Dialect,
    /// The session file.
    pub path: PathBuf,
    /// Its `cwd` now (the old folder or one below it).
    pub from_cwd: String,
    /// Its `cwd` after the move (the same place below the new folder).
    pub to_cwd: String,
}

/// Returns the sessions of `listed` whose `cwd` is `old` or a folder below it, each with
/// the `cwd` it gets below `new` (folders compared component by component, so
/// `/work/app` does not take `/work/app2` along). Oldest path first; changes nothing.
pub fn project_moves(listed: &[(Dialect, SessionInfo)], old: &Path, new: &Path) -> Vec<ProjectMove> {
    let mut out: Vec<ProjectMove> = listed
        .iter()
        .filter_map(|(dialect, s)| {
            let rest = Path::new(&s.cwd).strip_prefix(old).ok()?;
            // `strip_prefix` ignores a trailing `.`; a rest of `..` would climb out.
            if rest.components().any(|c| !matches!(c, Component::Normal(_))) {
                return None;
            }
            let to = if rest.as_os_str().is_empty() { new.to_path_buf() } else { new.join(rest) };
            Some(ProjectMove {
                dialect: *dialect,
                path: s.path.clone(),
                from_cwd: s.cwd.clone(),
                to_cwd: to.to_string_lossy().into_owned(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// Moves each session of `moves` with [`relocate`] into the bucket of its new `cwd`
/// (`env_for` gives the environment of each dialect: its agent folders), one by one,
/// and returns each outcome: one that fails leaves that session where it was (as
/// [`relocate`] says) and the others still move. Running it again with the moves
/// [`project_moves`] then finds finishes an interrupted run: a moved session's `cwd` is
/// no longer below the old folder.
pub fn relocate_project(
    env_for: &dyn Fn(Dialect) -> Env,
    moves: &[ProjectMove],
) -> Vec<(ProjectMove, Result<RelocateReport, JobError>)> {
    moves
        .iter()
        .map(|m| {
            let env = env_for(m.dialect);
            (m.clone(), relocate(&env, &m.path, Some(m.dialect), &m.to_cwd, None))
        })
        .collect()
}
