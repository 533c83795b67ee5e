//! `import SOURCE --to pi|omp`: the library's `session::import::import_file`, printed;
//! SOURCE is a file or the beginning of a Claude Code or Codex session id.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use session::Dialect;
use session::discovery::{ProcessEnv, claude_projects_dir, codex_home, find_other_sessions};
use session::import::{ImportOptions, import_file};
use session::store::FileStorage;

use crate::args::Global;
use crate::commands::{Result, env, wants_json};

/// Returns the source file `arg` names: itself where it is a path that exists or has a
/// folder, else the one Claude Code or Codex session whose id begins with it.
fn source(arg: &Path) -> Result<PathBuf> {
    let id = match arg.to_str() {
        Some(id) if !arg.exists() && arg.components().count() == 1 && !id.ends_with(".jsonl") => id,
        _ => return Ok(arg.to_path_buf()),
    };
    let process = ProcessEnv::from_process_env()?;
    let found = find_other_sessions(&FileStorage::new(), &process, None, id)?;
    match found.as_slice() {
        [one] => Ok(one.path.clone()),
        [] => Err(format!(
            "{id}: no such file, and no session of Claude Code (in {}) or Codex (in {}) has an id beginning so",
            claude_projects_dir(&process).display(),
            codex_home(&process).display()
        )
        .into()),
        many => {
            let list: Vec<String> =
                many.iter().take(10).map(|s| format!("  {} {} {}", s.agent.name(), s.id, s.path.display())).collect();
            Err(format!(
                "{id}: {} sessions have an id beginning so; give more of the id, or the file:\n{}",
                many.len(),
                list.join("\n")
            )
            .into())
        }
    }
}

/// Imports `file` into `to`'s bucket for `cwd` (default: the source's) or into
/// `session_dir`, and says what was written.
pub(crate) fn import(
    g: &Global,
    file: &Path,
    to: Dialect,
    cwd: Option<&Path>,
    session_dir: Option<&Path>,
) -> Result<String> {
    let mut env = env(g, to);
    if let Ok(process) = session::discovery::ProcessEnv::from_process_env() {
        env = env.with_dirs(Some(session::discovery::AgentDirs::for_dialect(to, &process, g.omp_home.into())));
    }
    let cwd = cwd.map(std::path::absolute).transpose()?.map(|c| c.to_string_lossy().into_owned());
    let options = ImportOptions { to, cwd, session_dir: session_dir.map(Path::to_path_buf) };
    let found = source(file)?;
    let file = found.as_path();
    let r = import_file(file, &options, &env)?;
    if wants_json(g) {
        let diagnostics: Vec<Value> = r
            .diagnostics
            .iter()
            .map(|d| json!({"line": d.line, "kind": d.kind.name(), "message": d.message}))
            .collect();
        return Ok(json!({
            "path": r.path.to_string_lossy(), "agent": r.dialect.name(), "source": r.source.name(),
            "sessionId": r.session_id, "cwd": r.cwd, "created": r.created, "appended": r.appended.len(),
            "differing": r.differing, "leaf": r.leaf, "forkedFrom": r.forked_from, "parentSession": r.parent_session,
            "diagnostics": diagnostics,
        })
        .to_string());
    }
    let mut out = if r.created {
        format!(
            "imported {} session {} as {} ({} entries)",
            r.source.name(),
            r.session_id,
            r.path.display(),
            r.appended.len()
        )
    } else if r.appended.is_empty() {
        format!("{} already holds every entry of {}; nothing written", r.path.display(), file.display())
    } else {
        format!("appended {} new entr(y/ies) of {} to {}", r.appended.len(), file.display(), r.path.display())
    };
    if !r.differing.is_empty() {
        let _ = write!(
            out,
            "\n{} entr(y/ies) differ from the source now; the session's bytes were kept: {}",
            r.differing.len(),
            r.differing.join(", ")
        );
    }
    let _ = match (&r.forked_from, &r.parent_session) {
        (Some(_), Some(path)) => write!(out, "\nforked from {path}"),
        (Some(parent), None) => {
            write!(out, "\nforked from {parent}, not imported here (import it first to link the two)")
        }
        _ => Ok(()),
    };
    for d in &r.diagnostics {
        let _ = write!(out, "\n{}: {d}", file.display());
    }
    Ok(out)
}
