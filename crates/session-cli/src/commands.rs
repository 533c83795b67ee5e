//! The commands: each returns the text to print (one JSON value for the queries).

use std::path::{Path, PathBuf};

use serde_json::Value;
use session::model::json::{write_js_str, write_js_value};
use session::store::blob::BlobStore;
use session::tree::{self, Leaf};
use session::{Dialect, Env, OpenMode, SessionManager};

use crate::args::{Args, LeafArg};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

pub(crate) fn run(a: &Args) -> Result<String> {
    match a.command.as_str() {
        "info" => info(a),
        "entries" => entries(a),
        "tree" => tree_cmd(a),
        "context" => context(a),
        "projection" => projection(a),
        "branch" => branch(a),
        "check" => check(a),
        "append" => append(a),
        "extract" => extract(a),
        "fork" => fork(a),
        "rename" => rename(a),
        "ls" => crate::find::ls(a),
        "resume" => crate::find::resume(a),
        "history" => crate::find::history(a),
        other => Err(format!("unknown command {other:?}; see session --help").into()),
    }
}

/// The environment for `dialect`: real files, and for omp the blob store (`--blob-dir`,
/// else `<agent dir>/blobs` as omp uses it).
fn env(a: &Args, dialect: Dialect) -> Env {
    let env = Env::files();
    let blobs = match (&a.blob_dir, dialect) {
        (Some(dir), _) => Some(dir.clone()),
        (None, Dialect::Omp) => session::discovery::Env::from_process_env()
            .ok()
            .map(|e| session::discovery::AgentDirs::omp(&e, a.omp_home).agent_dir.join("blobs")),
        (None, Dialect::Pi) => None,
    };
    match blobs {
        Some(dir) => env.with_blobs(BlobStore::open(dir)),
        None => env,
    }
}

/// The dialect from `--dialect`, else the file's own (a title slot means omp).
fn dialect_for(a: &Args, file: &Path) -> Dialect {
    if let Some(d) = a.dialect {
        return d;
    }
    use session::store::Storage;
    match session::store::FileStorage::new().read_slices(file, 16, 0) {
        Ok((prefix, _)) if prefix.starts_with(b"{\"type\":\"title\"") => Dialect::Omp,
        _ => Dialect::Pi,
    }
}

/// Opens the session to inspect it: read-only (nothing written, a missing file is an
/// error), or as the agent opens it with `--as-agent`.
fn open(a: &Args) -> Result<SessionManager> {
    open_as(a, OpenMode::ReadOnly)
}

/// Opens the session to write to it: it must exist (`--as-agent`: as the agent opens it,
/// a missing file starting a new session there).
fn open_for_writing(a: &Args) -> Result<SessionManager> {
    open_as(a, OpenMode::MustExist)
}

fn open_as(a: &Args, mode: OpenMode) -> Result<SessionManager> {
    let file = PathBuf::from(a.arg(0, "a session file")?);
    let dialect = dialect_for(a, &file);
    let mode = if a.as_agent { OpenMode::AsAgent } else { mode };
    Ok(SessionManager::open_with(dialect, &file, env(a, dialect), mode)?)
}

/// Applies `--leaf` / `--leaf-null` as the reference does: `branch(id)` or `resetLeaf()`.
fn apply_leaf(a: &Args, m: &mut SessionManager) -> Result<()> {
    match &a.leaf {
        Some(LeafArg::Id(id)) => m.tree_mut().branch(id)?,
        Some(LeafArg::Null) => m.tree_mut().reset_leaf(),
        None => {}
    }
    Ok(())
}

fn push_opt_str(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => write_js_str(out, s),
        None => out.push_str("null"),
    }
}

fn info(a: &Args) -> Result<String> {
    let m = open(a)?;
    let mut out = String::from("{\"header\":");
    out.push_str(&m.header().line());
    let t = m.tree();
    // A leaf entry without an id is `undefined` in the reference: the key disappears.
    if t.leaf_id().is_some() || t.entries().is_empty() {
        out.push_str(",\"leafId\":");
        push_opt_str(&mut out, t.leaf_id());
    }
    out.push_str(",\"name\":");
    push_opt_str(&mut out, m.session_name().as_deref());
    out.push('}');
    Ok(out)
}

fn entries(a: &Args) -> Result<String> {
    let m = open(a)?;
    let mut out = String::from("[");
    for (i, r) in m.tree().entries().iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if a.full {
            out.push_str(&r.line());
        } else {
            push_opt_str(&mut out, r.id());
        }
    }
    out.push(']');
    Ok(out)
}

fn tree_cmd(a: &Args) -> Result<String> {
    let m = open(a)?;
    let nodes = m.tree().tree();
    Ok(tree::tree_to_json(&nodes, m.dialect() == Dialect::Pi))
}

fn context(a: &Args) -> Result<String> {
    let mut m = open(a)?;
    apply_leaf(a, &mut m)?;
    Ok(match m.dialect() {
        Dialect::Pi => tree::pi::build_context(m.tree(), Leaf::Current).to_json_string(),
        Dialect::Omp => {
            let opts = tree::omp::ContextOptions { transcript: a.transcript };
            tree::omp::build_context(m.tree(), Leaf::Current, opts).to_json_string()
        }
    })
}

fn projection(a: &Args) -> Result<String> {
    let mut m = open(a)?;
    if m.dialect() != Dialect::Pi {
        return Err("projection is a pi query; use context for omp".into());
    }
    apply_leaf(a, &mut m)?;
    Ok(tree::pi::build_projection(m.tree(), Leaf::Current).to_json_string())
}

fn branch(a: &Args) -> Result<String> {
    let m = open(a)?;
    let from = match &a.leaf {
        Some(LeafArg::Id(id)) => Some(id.as_str()),
        _ => None,
    };
    let mut out = String::from("[");
    for (i, r) in m.tree().get_branch(from).iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_opt_str(&mut out, r.id());
    }
    out.push(']');
    Ok(out)
}

fn check(a: &Args) -> Result<String> {
    let m = open(a)?;
    let mut out = String::from("{\"diagnostics\":[");
    for (i, d) in m.diagnostics().iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"line\":");
        out.push_str(&d.line.to_string());
        out.push_str(",\"offset\":");
        out.push_str(&d.offset.to_string());
        out.push_str(",\"message\":");
        write_js_str(&mut out, &d.to_string());
        out.push('}');
    }
    out.push_str("],\"treeDiagnostics\":[");
    for (i, d) in m.tree().diagnostics().iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_js_str(&mut out, &d.to_string());
    }
    out.push_str("]}");
    Ok(out)
}

fn append(a: &Args) -> Result<String> {
    let custom_type = a.custom_type.as_deref().ok_or("append needs --custom-type")?;
    let data: Option<Value> = match &a.data {
        Some(d) => Some(serde_json::from_str(d).map_err(|e| format!("--data is not JSON: {e}"))?),
        None => None,
    };
    let mut m = open_for_writing(a)?;
    let id = m.append_custom_entry(custom_type, data)?;
    m.close()?;
    let mut out = String::from("{\"id\":");
    write_js_str(&mut out, &id);
    out.push('}');
    Ok(out)
}

/// Names the session as a person would in the agent (pi: a `session_info` entry;
/// omp: a `title_change` entry and the title slot, written in place). Prints
/// `{"id": …}`, with `null` when omp refuses the name (empty after cleaning).
fn rename(a: &Args) -> Result<String> {
    let name = a.arg(1, "a name")?.to_owned();
    let mut m = open_for_writing(a)?;
    let id = m.set_session_name(&name, Some("user"))?;
    m.close()?;
    let mut out = String::from("{\"id\":");
    push_opt_str(&mut out, id.as_deref());
    out.push('}');
    Ok(out)
}

fn path_json(p: Option<&Path>) -> String {
    let mut out = String::from("{\"path\":");
    match p {
        Some(p) => write_js_value(&mut out, &Value::from(p.to_string_lossy().into_owned())),
        None => out.push_str("null"),
    }
    out.push('}');
    out
}

fn extract(a: &Args) -> Result<String> {
    let leaf = match &a.leaf {
        Some(LeafArg::Id(id)) => id.clone(),
        _ => return Err("extract needs --leaf ID".into()),
    };
    let mut m = open_for_writing(a)?;
    let path = m.create_branched_session(&leaf)?;
    m.close()?;
    Ok(path_json(path.as_deref()))
}

fn fork(a: &Args) -> Result<String> {
    let file = PathBuf::from(a.arg(0, "a session file")?);
    let dialect = dialect_for(a, &file);
    let cwd = a.cwd.as_deref().ok_or("fork needs --cwd")?;
    let dir = a.session_dir.as_deref().ok_or("fork needs --session-dir")?;
    let m = SessionManager::fork_from(dialect, &file, cwd, dir, env(a, dialect))?;
    let out = path_json(m.session_file());
    m.close()?;
    Ok(out)
}
