//! `import FILE --to pi|omp`: the library's `session::import::import_file`, printed.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Value, json};
use session::Dialect;
use session::import::{ImportOptions, import_file};

use crate::args::Global;
use crate::commands::{Result, env, wants_json};

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
        env.dirs = Some(session::discovery::AgentDirs::for_dialect(to, &process, g.omp_home.into()));
    }
    let cwd = match cwd {
        Some(c) => Some(std::path::absolute(c)?.to_string_lossy().into_owned()),
        None => None,
    };
    let options = ImportOptions { to, cwd, session_dir: session_dir.map(Path::to_path_buf) };
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
    match (&r.forked_from, &r.parent_session) {
        (Some(_), Some(path)) => {
            let _ = write!(out, "\nforked from {path}");
        }
        (Some(parent), None) => {
            let _ = write!(out, "\nforked from {parent}, not imported here (import it first to link the two)");
        }
        _ => {}
    }
    for d in &r.diagnostics {
        let _ = write!(out, "\n{}: {d}", file.display());
    }
    Ok(out)
}
