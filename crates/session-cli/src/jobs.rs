//! The jobs beyond the references' API: `repair`, `migrate`, `move`, `rm`, `fsck`, `gc`,
//! `export` and `stats`. Each calls its library function (`session::maintenance`) and
//! prints what it returns.

use std::fmt::Write as _;
use std::io::{BufRead, IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use session::Dialect;
use session::maintenance::{self, ExportFormat as Format, FsckOptions, GcOptions, Homes, RewriteOptions};
use session::search::SessionFile;
use session::store::blob::{BlobStore, StoredBlob};

use crate::args::{AgentArg, ExportFormat, Global, TrashCommand};
use crate::commands::{Result, env, open, wants_json};

/// Every place either agent may keep sessions and blobs, with `--blob-dir` and the
/// folders given on the command line.
pub(crate) fn homes(g: &Global, dirs: &[PathBuf]) -> Result<Homes> {
    let process = session::discovery::ProcessEnv::from_process_env()?;
    let mut homes = Homes::from_env(&process);
    if let Some(dir) = &g.blob_dir {
        homes = homes.with_blob_dir(dir);
    }
    for dir in dirs {
        homes = homes.with_root(dir, g.dialect.map(Dialect::from));
    }
    Ok(homes)
}

/// The blob store `gc` and `fsck` look at: `--blob-dir`, else omp's as the environment
/// says now.
fn blob_dir(g: &Global) -> Result<PathBuf> {
    if let Some(dir) = &g.blob_dir {
        return Ok(dir.clone());
    }
    let process = session::discovery::ProcessEnv::from_process_env()?;
    Ok(session::discovery::AgentDirs::omp(&process, g.omp_home.into()).agent_dir.join("blobs"))
}

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn opt_path(p: Option<&Path>) -> Value {
    p.map_or(Value::Null, |p| Value::from(path_str(p)))
}

fn dialect_of(g: &Global) -> Option<Dialect> {
    g.dialect.map(Dialect::from)
}

/// `repair FILE` (`repair`), or `migrate FILE`.
pub(crate) fn rewrite(g: &Global, file: &Path, no_backup: bool, json: bool, repair: bool) -> Result<String> {
    let dialect = crate::commands::dialect_for(g, file);
    let options = RewriteOptions::default().dialect(Some(dialect)).no_backup(no_backup);
    let env = env(g, dialect);
    let r =
        if repair { maintenance::repair(&env, file, &options)? } else { maintenance::migrate(&env, file, &options)? };
    if json {
        let mut out = serde_json::Map::new();
        if repair {
            out.insert("repaired".into(), r.rewritten.into());
            out.insert("findings".into(), r.findings.into());
            out.insert("migrated".into(), r.migrated.into());
        } else {
            out.insert("migrated".into(), r.rewritten.into());
            out.insert("from".into(), r.migrated_from.clone().map_or(Value::Null, Value::from));
        }
        out.insert("backup".into(), opt_path(r.backup.as_deref()));
        out.insert("tries".into(), r.tries.into());
        out.insert("carried".into(), r.carried.into());
        return Ok(Value::Object(out).to_string());
    }
    let mut text = match (repair, r.rewritten) {
        (true, false) => format!("{}: nothing to repair", file.display()),
        (false, false) => format!("{}: already version 3, nothing written", file.display()),
        (true, true) => format!(
            "{}: repaired ({} finding(s){})",
            file.display(),
            r.findings,
            if r.migrated { ", migrated" } else { "" }
        ),
        (false, true) => format!("{}: migrated to version 3", file.display()),
    };
    if let Some(b) = &r.backup {
        let _ = write!(text, "; original kept as {}", b.display());
    }
    if r.carried > 0 {
        let _ = write!(text, "; {} byte(s) another writer appended meanwhile were kept", r.carried);
    }
    Ok(text)
}

/// `merge FILE THEIRS [--leaf …]`.
pub(crate) fn merge(g: &Global, file: &Path, theirs: &Path, leaf: &str) -> Result<String> {
    let leaf = match leaf {
        "auto" => maintenance::MergeLeaf::Auto,
        "ours" => maintenance::MergeLeaf::Ours,
        "theirs" => maintenance::MergeLeaf::Theirs,
        id => maintenance::MergeLeaf::Id(id.to_owned()),
    };
    let storage = crate::store::current();
    let r = maintenance::merge(&*storage, file, theirs, dialect_of(g), &leaf)?;
    if wants_json(g) {
        return Ok(json!({
            "path": path_str(&r.path), "written": r.written, "added": r.added, "differing": r.differing,
            "leaf": r.leaf, "artifactsCopied": r.artifacts_copied,
        })
        .to_string());
    }
    if !r.written && r.added.is_empty() {
        return Ok(format!("{}: already holds every entry of {}; nothing written", r.path.display(), theirs.display()));
    }
    let mut text = format!("merged {} entr(y/ies) into {}; leaf {}", r.added.len(), r.path.display(), r.leaf);
    if !r.differing.is_empty() {
        let _ = write!(
            text,
            "\n{} entr(y/ies) differ between the copies; this copy's bytes were kept: {}",
            r.differing.len(),
            r.differing.join(", ")
        );
    }
    if r.artifacts_copied > 0 {
        let _ = write!(text, "\n{} artifact file(s) copied", r.artifacts_copied);
    }
    Ok(text)
}

/// The environment of a move: `dialect`'s, with its agent folders (where the buckets are).
fn move_env(g: &Global, dialect: Dialect) -> session::Env {
    let mut env = env(g, dialect);
    if dialect == Dialect::Pi
        && let Ok(process) = session::discovery::ProcessEnv::from_process_env()
    {
        env = env.with_dirs(Some(session::discovery::AgentDirs::pi(&process)));
    }
    env
}

/// `relocate OLD NEW`: every session of both agents (or `--dialect`'s) whose cwd is OLD
/// or below it, listed, or with `yes` moved to the bucket of its new cwd.
pub(crate) fn relocate(g: &Global, old: &Path, new: &Path, yes: bool) -> Result<String> {
    let (old, new) = (std::path::absolute(old)?, std::path::absolute(new)?);
    if old == new || new.starts_with(&old) {
        return Err(format!("{} is {} or inside it: nothing to move", new.display(), old.display()).into());
    }
    let listed = every_session(g, &crate::find::dialects(g), None)?;
    let moves = maintenance::project_moves(&listed, &old, &new);
    let outcomes: Vec<(maintenance::ProjectMove, std::result::Result<Option<PathBuf>, String>)> = if yes {
        maintenance::relocate_project(&|d| move_env(g, d), &moves)
            .into_iter()
            .map(|(m, r)| (m, r.map(|r| Some(r.to)).map_err(|e| crate::commands::chain(&e))))
            .collect()
    } else {
        moves.into_iter().map(|m| (m, Ok(None))).collect()
    };
    let failed = outcomes.iter().filter(|(_, r)| r.is_err()).count();
    let text = if wants_json(g) {
        let rows: Vec<Value> = outcomes
            .iter()
            .map(|(m, r)| {
                json!({
                    "path": path_str(&m.path), "agent": m.dialect.name(), "from": m.from_cwd, "to": m.to_cwd,
                    "moved": r.as_ref().ok().and_then(|p| p.as_deref().map(path_str)),
                    "error": r.as_ref().err(),
                })
            })
            .collect();
        json!({"moved": yes, "sessions": rows}).to_string()
    } else {
        let mut out = String::new();
        for (m, r) in &outcomes {
            let _ = write!(out, "{:<3}  {}  {} -> {}", m.dialect.name(), m.path.display(), m.from_cwd, m.to_cwd);
            let _ = match r {
                Ok(Some(to)) => write!(out, "  now {}", to.display()),
                Ok(None) => Ok(()),
                Err(e) => write!(out, "  NOT MOVED: {e}"),
            };
            out.push('\n');
        }
        let n = outcomes.len() - failed;
        if yes {
            let _ = write!(out, "moved {n} session(s) from {} to {}", old.display(), new.display());
        } else {
            let _ = write!(
                out,
                "would move {n} session(s) from {} to {} (run again with --yes)",
                old.display(),
                new.display()
            );
        }
        out
    };
    if failed > 0 {
        return Err(format!("{text}\n{failed} session(s) could not be moved; run again to finish").into());
    }
    Ok(text)
}

/// `move FILE --cwd DIR`.
pub(crate) fn move_cmd(g: &Global, file: &Path, cwd: &str, session_dir: Option<&Path>, json: bool) -> Result<String> {
    let dialect = crate::commands::dialect_for(g, file);
    let r = maintenance::relocate(&move_env(g, dialect), file, Some(dialect), cwd, session_dir)?;
    if json {
        let mut out = String::from("{\"path\":");
        session::model::json::write_js_str(&mut out, &path_str(&r.to));
        out.push_str(",\"backup\":");
        out.push_str(&opt_path(r.backup.as_deref()).to_string());
        out.push('}');
        return Ok(out);
    }
    let mut text = if r.moved {
        format!("moved {} to {}", r.from.display(), r.to.display())
    } else {
        format!("{}: already in place, nothing moved", r.from.display())
    };
    if let Some(b) = &r.backup {
        let _ = write!(text, "; {} line(s) the move left out are kept in {}", r.dropped, b.display());
    }
    Ok(text)
}

/// `rm FILE`: moves the session with its artifacts directory and backups to the trash
/// of its sessions folder (deletes them for good with `purge`, or outside the agents'
/// folders, where `force` is needed), after showing what goes and asking on a terminal
/// (or with `yes`).
pub(crate) fn rm(g: &Global, file: &Path, yes: bool, force: bool, purge: bool) -> Result<String> {
    let storage = crate::store::current();
    let homes = homes(g, &[])?;
    let plan = maintenance::plan_rm(&*storage, &homes, file, dialect_of(g), force)?;
    let p = plan.proof();
    let trash = if purge { None } else { maintenance::trash_of(&homes, &p.path) };
    if !yes {
        let verb = if trash.is_some() { "move to the trash" } else { "delete for good" };
        if !std::io::stdin().is_terminal() {
            return Err(
                format!("refusing to {verb} {} without --yes (stdin is not a terminal)", p.path.display()).into()
            );
        }
        let mut what = format!("{verb} the {} session {}", p.dialect.name(), p.path.display());
        if let Some(a) = &p.artifacts {
            let _ = write!(what, ", its artifacts directory {}", a.display());
        }
        if !p.backups.is_empty() {
            let _ = write!(what, " and {} backup(s)", p.backups.len());
        }
        eprint!("{what}? [y/N] ");
        std::io::stderr().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            return Err("nothing removed".into());
        }
    }
    if trash.is_some() {
        let r = plan.trash(&*storage, &homes, now_ms())?;
        if wants_json(g) {
            return Ok(json!({
                "trashed": path_str(&r.item.original),
                "trash": path_str(&r.item.dir),
                "artifacts": opt_path(r.artifacts.as_deref()),
                "backups": r.backups.iter().map(|b| path_str(b)).collect::<Vec<_>>(),
                "left": opt_path(r.left.as_deref()),
            })
            .to_string());
        }
        let mut text = format!("moved {} to the trash", r.item.original.display());
        if r.artifacts.is_some() {
            text.push_str(" with its artifacts directory");
        }
        if !r.backups.is_empty() {
            let _ = write!(text, " and {} backup(s)", r.backups.len());
        }
        let name = r.item.dir.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
        let _ = write!(text, "\nrestore it with: session trash restore {name}");
        if let Some(l) = &r.left {
            let _ = write!(text, "\nleft {} in place: it is not a directory of artifacts", l.display());
        }
        return Ok(text);
    }
    let r = plan.execute(&*storage)?;
    if wants_json(g) {
        return Ok(json!({
            "deleted": path_str(&r.session),
            "artifacts": opt_path(r.artifacts.as_deref()),
            "backups": r.backups.iter().map(|b| path_str(b)).collect::<Vec<_>>(),
            "left": opt_path(r.left.as_deref()),
        })
        .to_string());
    }
    let mut text = format!("deleted {}", r.session.display());
    if let Some(a) = &r.artifacts {
        let _ = write!(text, " and its artifacts directory {}", a.display());
    }
    if !r.backups.is_empty() {
        let _ = write!(text, " and {} backup(s)", r.backups.len());
    }
    if let Some(l) = &r.left {
        let _ = write!(text, "\nleft {} in place: it is not a directory of artifacts", l.display());
    }
    Ok(text)
}

fn now_ms() -> i64 {
    session::store::clock::Clock::now_ms(&session::store::clock::SystemClock)
}

/// Every session of `dialects`, below `dir` when given, each file
/// once: where pi and omp share a sessions folder (`PI_CODING_AGENT_DIR`) both list it,
/// and a file is taken as whose its first bytes say.
fn every_session(
    g: &Global,
    dialects: &[Dialect],
    dir: Option<&Path>,
) -> Result<Vec<(Dialect, session::discovery::SessionInfo)>> {
    let storage = crate::store::current();
    let mut listed: Vec<(Dialect, session::discovery::SessionInfo)> = Vec::new();
    let mut at: std::collections::HashMap<PathBuf, usize> = std::collections::HashMap::new();
    for dialect in dialects {
        let d = crate::find::discovery_for(g, *dialect, false)?;
        for info in d.list_all(dir, &mut |_| {})? {
            match at.get(&info.path) {
                Some(&i) => {
                    if maintenance::detect_dialect(&*storage, &info.path) == *dialect {
                        listed[i] = (*dialect, info);
                    }
                }
                None => {
                    at.insert(info.path.clone(), listed.len());
                    listed.push((*dialect, info));
                }
            }
        }
    }
    Ok(listed)
}

/// `du [--all]`: the space of the sessions of both agents (or `--dialect`'s), of the
/// working directory's project or of every project.
pub(crate) fn du(g: &Global, all: bool, top: usize) -> Result<String> {
    let cwd = std::env::current_dir()?;
    let storage = crate::store::current();
    let homes = homes(g, &[])?;
    let mut blob_dirs = homes.blob_dirs().to_vec();
    blob_dirs.insert(0, blob_dir(g)?);
    let mut spaces = Vec::new();
    let mut unreadable = 0;
    for (dialect, info) in every_session(g, &crate::find::dialects(g), None)? {
        if !all && Path::new(&info.cwd) != cwd {
            continue;
        }
        match maintenance::session_space(&*storage, dialect, &info.path, &blob_dirs) {
            Ok(s) => spaces.push(s),
            Err(_) => unreadable += 1,
        }
    }
    let projects = maintenance::by_project(&spaces);
    spaces.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.path.cmp(&b.path)));
    let total: u64 = spaces.iter().map(|s| s.bytes).sum();
    if wants_json(g) {
        let session = |s: &maintenance::SessionSpace| {
            json!({
                "path": path_str(&s.path), "agent": s.dialect.map(Dialect::name), "cwd": s.cwd, "bytes": s.bytes,
                "text": s.text, "toolOutput": s.tool_output, "images": s.images, "other": s.other,
                "entries": s.entries, "artifacts": s.artifacts, "blobs": s.blobs,
            })
        };
        let project = |p: &maintenance::ProjectSpace| json!({"cwd": p.cwd, "sessions": p.sessions, "bytes": p.bytes, "artifacts": p.artifacts, "blobs": p.blobs});
        return Ok(json!({
            "bytes": total,
            "sessions": spaces.len(),
            "unreadable": unreadable,
            "projects": projects.iter().map(project).collect::<Vec<_>>(),
            "largest": spaces.iter().take(top).map(session).collect::<Vec<_>>(),
        })
        .to_string());
    }
    let mb = |n: u64| format!("{:.1} MB", n as f64 / 1e6);
    let mut out = String::new();
    let _ = writeln!(out, "{:>10}  {:>10}  {:>10}  {:>8}  project", "sessions", "artifacts", "blobs", "count");
    for p in &projects {
        let _ = writeln!(
            out,
            "{:>10}  {:>10}  {:>10}  {:>8}  {}",
            mb(p.bytes),
            mb(p.artifacts),
            mb(p.blobs),
            p.sessions,
            p.cwd
        );
    }
    let _ = writeln!(out, "\nlargest sessions ({} of {}):", top.min(spaces.len()), spaces.len());
    let _ =
        writeln!(out, "{:>10}  {:>10}  {:>10}  {:>10}  {:>8}  session", "bytes", "text", "tools", "images", "entries");
    for s in spaces.iter().take(top) {
        let _ = writeln!(
            out,
            "{:>10}  {:>10}  {:>10}  {:>10}  {:>8}  {}",
            mb(s.bytes),
            mb(s.text),
            mb(s.tool_output),
            mb(s.images),
            s.entries,
            s.path.display()
        );
    }
    let _ = write!(out, "{} session(s), {}", spaces.len(), mb(total));
    if unreadable > 0 {
        let _ = write!(out, "; {unreadable} could not be read (see `session fsck`)");
    }
    Ok(out)
}

/// Parses `--since`: a date `YYYY-MM-DD`.
pub(crate) fn parse_date(s: &str) -> std::result::Result<String, String> {
    let ok = s.len() == 10
        && s.bytes().enumerate().all(|(i, b)| if i == 4 || i == 7 { b == b'-' } else { b.is_ascii_digit() });
    if ok { Ok(s.to_owned()) } else { Err(format!("{s:?} is not a date YYYY-MM-DD")) }
}

/// The session files of `asked` (all four agents when empty; only `--dialect`'s with
/// it), below `dir` when given (then pi's and omp's only): pi's and omp's as discovery
/// lists them, Claude Code's and Codex's as their homes hold them (listed, not read).
fn every_file(g: &Global, asked: &[AgentArg], dir: Option<&Path>) -> Result<Vec<SessionFile>> {
    let agents = crate::find::agents(g, asked, dir.is_some())?;
    let mut files: Vec<SessionFile> =
        every_session(g, &agents.dialects, dir)?.into_iter().map(|(d, i)| SessionFile::session(i.path, d)).collect();
    if !agents.others.is_empty() {
        let env = session::discovery::ProcessEnv::from_process_env()?;
        let storage = crate::store::current();
        for agent in agents.others {
            // Another agent's home that cannot be read costs its sessions, not the count.
            match session::discovery::list_other_sessions(&*storage, &env, Some(agent)) {
                Ok(listed) => files.extend(listed.into_iter().map(|s| SessionFile::other(s.path))),
                Err(e) => eprintln!("warning: {}'s sessions left out: {}", agent.name(), crate::commands::chain(&e)),
            }
        }
    }
    Ok(files)
}

/// `usage [--agent …] [--by …] [--since DATE]`: tokens and cost of every session of the
/// agents asked (all four by default), each entry once.
pub(crate) fn usage(
    g: &Global,
    asked: &[AgentArg],
    by: maintenance::UsageBy,
    since: Option<String>,
    no_cache: bool,
) -> Result<String> {
    let mut sessions = every_file(g, asked, None)?;
    // Oldest path first: a fork's repeated entries count in the session listed first.
    sessions.sort_by(|a, b| a.path.cmp(&b.path));
    let storage = crate::store::current();
    // The usage cache keys on local stats: files only, and not with SESSION_NO_CACHE.
    let no_cache = no_cache || std::env::var("SESSION_NO_CACHE").is_ok_and(|v| !v.is_empty() && v != "0");
    let cache = if crate::store::on_files() && !no_cache { crate::cache::dir().cloned() } else { None };
    let options = maintenance::UsageOptions::by(by).since(since).cache(cache);
    let r = maintenance::usage(&*storage, &sessions, &options);
    if wants_json(g) {
        let row = |u: &maintenance::UsageRow| {
            json!({"key": u.key, "input": u.input, "output": u.output, "cacheRead": u.cache_read,
                   "cacheWrite": u.cache_write, "cost": u.cost, "records": u.records})
        };
        return Ok(json!({
            "rows": r.rows.iter().map(row).collect::<Vec<_>>(),
            "total": row(&r.total),
            "repeated": r.repeated,
            "unreadable": r.unreadable,
            "cached": r.cached,
        })
        .to_string());
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>14}  {:>14}  {:>14}  {:>14}  {:>10}  group",
        "input", "output", "cache read", "cache write", "cost"
    );
    for u in r.rows.iter().chain(std::iter::once(&r.total)) {
        let _ = writeln!(
            out,
            "{:>14}  {:>14}  {:>14}  {:>14}  {:>10.4}  {}",
            u.input, u.output, u.cache_read, u.cache_write, u.cost, u.key
        );
    }
    let _ = write!(out, "{} usage record(s) in {} session(s)", r.total.records, sessions.len());
    if r.repeated > 0 {
        let _ = write!(out, "; {} repeated by forks, counted once", r.repeated);
    }
    if r.unreadable > 0 {
        let _ = write!(out, "; {} session(s) could not be read", r.unreadable);
    }
    Ok(out)
}

/// Where the marks of sessions are kept: our state folder, and the agent directory of
/// `--omp-home` for omp's pins.
pub(crate) fn mark_store(g: &Global) -> Result<maintenance::MarkStore> {
    let process = session::discovery::ProcessEnv::from_process_env()?;
    Ok(maintenance::MarkStore::from_env(&process, g.omp_home.into()))
}

/// Every mark, or why they cannot be read (naming the file).
pub(crate) fn try_read_marks(g: &Global) -> std::result::Result<maintenance::Marks, String> {
    mark_store(g)
        .map_err(|e| crate::commands::chain(&*e))
        .and_then(|m| m.read().map_err(|e| crate::commands::chain(&e)))
}

/// Every mark, for a listing: a file of marks that cannot be read is named in a warning
/// and the listing goes on without marks.
pub(crate) fn read_marks(g: &Global) -> maintenance::Marks {
    match try_read_marks(g) {
        Ok(marks) => marks,
        Err(e) => {
            eprintln!("warning: listing without pins and archive marks: {e}");
            maintenance::Marks::default()
        }
    }
}

/// `pin`, `unpin`, `archive`, `unarchive SESSION`: the session `arg` names (a file, or
/// what `resume` takes) gets the mark `mark` put on (`on`) or taken off.
pub(crate) fn mark(g: &Global, arg: &str, mark: maintenance::Mark, on: bool) -> Result<String> {
    let (_, path, _) = crate::find::find_session(g, arg, None, None, false)?;
    mark_file(g, &path, dialect_of(g), mark, on)
}

/// Puts the mark `mark` on (`on`) or off the session file `path` (proved a session of
/// `dialect`, or of either agent), with no lookup by name; says what it did.
pub(crate) fn mark_file(
    g: &Global,
    path: &Path,
    dialect: Option<Dialect>,
    mark: maintenance::Mark,
    on: bool,
) -> Result<String> {
    let storage = crate::store::current();
    let proof = maintenance::prove_session(&*storage, path, dialect)?;
    let marks = mark_store(g)?;
    let changed = marks.set(proof.dialect, &proof.id, mark, on)?;
    // The mark is written: its state is known; the other mark is read back for the
    // report only (a file that cannot be read now leaves it unknown, not an error).
    let other = marks.read().ok().map(|m| m.of(proof.dialect, &proof.id));
    let (pinned, archived) = match mark {
        maintenance::Mark::Pinned => (Some(on), other.map(|o| o.archived)),
        _ => (other.map(|o| o.pinned), Some(on)),
    };
    if wants_json(g) {
        return Ok(json!({
            "path": path_str(&proof.path), "agent": proof.dialect.name(), "id": proof.id,
            "pinned": pinned, "archived": archived, "changed": changed,
        })
        .to_string());
    }
    let what = match (mark, on) {
        (maintenance::Mark::Pinned, true) => "pinned",
        (maintenance::Mark::Pinned, false) => "unpinned",
        (maintenance::Mark::Archived, true) => "archived",
        (maintenance::Mark::Archived, false) => "taken out of the archive",
        _ => "marked",
    };
    let already = if changed { "" } else { "already " };
    Ok(format!("{already}{what}: {} session {} ({})", proof.dialect.name(), proof.id, proof.path.display()))
}

/// What `prune` was asked.
pub(crate) struct PruneArgs<'a> {
    /// Sessions whose last activity is older than this.
    pub(crate) older_than: Duration,
    /// Keep named sessions.
    pub(crate) keep_named: bool,
    /// Keep pinned sessions.
    pub(crate) keep_pinned: bool,
    /// Only this project's sessions.
    pub(crate) project: Option<&'a Path>,
    /// Move them instead of listing them.
    pub(crate) yes: bool,
}

/// `prune --older-than AGE`: the old sessions of both agents (or `--dialect`'s), listed,
/// or with `yes` moved to the trash one by one (a session that cannot be moved is
/// reported and the others still go).
pub(crate) fn prune(g: &Global, a: &PruneArgs<'_>) -> Result<String> {
    let (older_than, yes) = (a.older_than, a.yes);
    if older_than.is_zero() {
        return Err("--older-than 0 would choose every session, the ones in use too; give an age such as 30d".into());
    }
    let listed = every_session(g, &crate::find::dialects(g), None)?;
    let project = a.project.map(std::path::absolute).transpose()?.map(|p| p.to_string_lossy().into_owned());
    // With --keep-pinned, pins that cannot be read must not let a pinned session go.
    let marks = if a.keep_pinned { mark_store(g)?.read()? } else { read_marks(g) };
    let mut options = maintenance::PruneOptions::older_than(older_than).keep_named(a.keep_named).project(project);
    if a.keep_pinned {
        options = options.keep_pinned(marks.clone());
    }
    let now = now_ms();
    let chosen = maintenance::prune_candidates(&listed, &options, now);
    let storage = crate::store::current();
    let homes = homes(g, &[])?;
    let mut rows = Vec::new();
    let mut failed = 0;
    let cutoff = now.saturating_sub(i64::try_from(older_than.as_millis()).unwrap_or(i64::MAX));
    for (dialect, s) in &chosen {
        // Written to since (pi's listing dates a session by its messages, and an agent
        // may have resumed it since the listing): kept, in the dry run as in the run.
        if storage.stat(&s.path)?.is_none_or(|st| st.mtime_ms >= cutoff) {
            continue;
        }
        let outcome = if yes {
            match maintenance::plan_rm(&*storage, &homes, &s.path, Some(*dialect), false)
                .and_then(|p| p.trash(&*storage, &homes, now))
            {
                Ok(r) => Ok(Some(r.item.dir)),
                Err(e) => Err(crate::commands::chain(&e)),
            }
        } else {
            Ok(None)
        };
        failed += usize::from(outcome.is_err());
        rows.push((dialect, s, outcome));
    }
    if wants_json(g) {
        let v: Vec<Value> = rows
            .iter()
            .map(|(d, s, o)| {
                json!({
                    "path": path_str(&s.path),
                    "agent": d.name(),
                    "cwd": s.cwd,
                    "modified": s.modified,
                    "name": s.name.as_ref().or(s.title.as_ref()),
                    "pinned": marks.of(**d, &s.id).pinned,
                    "trash": o.as_ref().ok().and_then(|t| t.as_deref().map(path_str)),
                    "error": o.as_ref().err(),
                })
            })
            .collect();
        let out = json!({"moved": yes, "sessions": v}).to_string();
        return if failed > 0 {
            Err(format!("{out}\n{failed} session(s) could not be moved to the trash").into())
        } else {
            Ok(out)
        };
    }
    let mut out = String::new();
    for (d, s, o) in &rows {
        let when = s.modified.map(session::model::timestamp::format_iso_millis).unwrap_or_default();
        let _ = write!(out, "{when}  {:<3}  {}", d.name(), s.path.display());
        if let Err(e) = o {
            let _ = write!(out, "  NOT MOVED: {e}");
        }
        out.push('\n');
    }
    let n = rows.len() - failed;
    if yes {
        let _ = write!(out, "moved {n} session(s) to the trash (see `session trash list`)");
    } else {
        let _ = write!(out, "would move {n} session(s) to the trash (run again with --yes)");
    }
    if failed > 0 {
        return Err(format!("{out}\n{failed} session(s) could not be moved to the trash").into());
    }
    Ok(out)
}

/// `trash list|restore|empty`.
pub(crate) fn trash(g: &Global, command: &TrashCommand) -> Result<String> {
    let storage = crate::store::current();
    let homes = homes(g, &[])?;
    let items = maintenance::trash_list(&*storage, &homes)?;
    let item_json = |i: &maintenance::TrashItem| {
        json!({
            "trash": path_str(&i.dir),
            "path": path_str(&i.original),
            "agent": i.dialect.name(),
            "sessionId": i.session_id,
            "deletedAt": i.deleted_at_ms,
            "complete": i.complete,
            "restoring": i.restoring,
            "bytes": i.bytes,
        })
    };
    match command {
        TrashCommand::List => {
            if wants_json(g) {
                return Ok(json!({"sessions": items.iter().map(item_json).collect::<Vec<_>>()}).to_string());
            }
            let mut out = String::new();
            for i in &items {
                let name = i.dir.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
                let _ = writeln!(
                    out,
                    "{}  {:<3}  {:>10}  {}{}  (was {})",
                    session::model::timestamp::format_iso_millis(i.deleted_at_ms),
                    i.dialect.name(),
                    i.bytes,
                    name,
                    match (i.restoring, i.complete) {
                        (true, _) => "  [restoring: run trash restore again]",
                        (false, true) => "",
                        (false, false) => "  [unfinished: run rm again]",
                    },
                    i.original.display()
                );
            }
            let bytes: u64 = items.iter().map(|i| i.bytes).sum();
            let _ = write!(out, "{} session(s) in the trash, {bytes} bytes", items.len());
            Ok(out)
        }
        TrashCommand::Restore { what } => {
            let found: Vec<&maintenance::TrashItem> = items
                .iter()
                .filter(|i| {
                    i.dir.file_name().is_some_and(|n| n.to_string_lossy() == what.as_str())
                        || i.dir == Path::new(what)
                        || i.original == Path::new(what)
                        || i.session_id == *what
                })
                .collect();
            let item = match found.as_slice() {
                [one] => *one,
                [] => return Err(format!("nothing in the trash is {what} (see `session trash list`)").into()),
                many => {
                    let names: Vec<String> = many.iter().map(|i| i.dir.display().to_string()).collect();
                    return Err(format!(
                        "{what} names {} sessions in the trash; give one of:\n{}",
                        many.len(),
                        names.join("\n")
                    )
                    .into());
                }
            };
            let back = maintenance::restore(&*storage, &homes, item)?;
            if wants_json(g) {
                return Ok(json!({"restored": path_str(&back), "from": path_str(&item.dir)}).to_string());
            }
            Ok(format!("restored {}", back.display()))
        }
        TrashCommand::Empty { older_than, yes } => {
            let cutoff = older_than.map(|d| now_ms().saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)));
            let chosen: Vec<maintenance::TrashItem> =
                items.into_iter().filter(|i| cutoff.is_none_or(|c| i.deleted_at_ms < c)).collect();
            let gone = if *yes { maintenance::trash_empty(&*storage, &chosen)? } else { chosen };
            let bytes: u64 = gone.iter().map(|i| i.bytes).sum();
            if wants_json(g) {
                return Ok(
                    json!({"deleted": yes, "sessions": gone.iter().map(item_json).collect::<Vec<_>>(), "bytes": bytes})
                        .to_string(),
                );
            }
            let mut out = String::new();
            for i in &gone {
                let _ = writeln!(out, "{}  (was {})", i.dir.display(), i.original.display());
            }
            if *yes {
                let _ = write!(out, "deleted {} session(s) from the trash, {bytes} bytes", gone.len());
            } else {
                let _ = write!(out, "would delete {} session(s), {bytes} bytes (run again with --yes)", gone.len());
            }
            Ok(out)
        }
    }
}

/// Moves one session to the trash without asking (the picker asked): `rm FILE --yes`.
pub(crate) fn trash_session(g: &Global, file: &Path) -> Result<maintenance::TrashReport> {
    let storage = crate::store::current();
    let homes = homes(g, &[])?;
    let plan = maintenance::plan_rm(&*storage, &homes, file, dialect_of(g), false)?;
    Ok(plan.trash(&*storage, &homes, now_ms())?)
}

/// Exports the branch at the current leaf as Markdown into a new file in `dir`
/// (`session-<id>.md`, `-2`, `-3`… when taken; never over a file), and returns its path.
pub(crate) fn export_to(g: &Global, file: &Path, dir: &Path) -> Result<PathBuf> {
    let m = open(g, file)?;
    let text = maintenance::export(&m, None, Format::Markdown)?;
    let id: String = m.session_id().chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').take(36).collect();
    let stem = if id.is_empty() { "session".to_owned() } else { format!("session-{id}") };
    for n in 1..1000 {
        let path = if n == 1 { dir.join(format!("{stem}.md")) } else { dir.join(format!("{stem}-{n}.md")) };
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(mut f) => {
                f.write_all(text.as_bytes())
                    .and_then(|()| f.sync_all())
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(
                    format!("cannot create {}: {e} (export from a folder you can write to)", path.display()).into()
                );
            }
        }
    }
    Err(format!("{} already holds {stem}.md to {stem}-999.md; remove some", dir.display()).into())
}

/// `export FILE`.
pub(crate) fn export(g: &Global, file: &Path, leaf: Option<&str>, format: ExportFormat) -> Result<String> {
    let m = open(g, file)?;
    let format = match format {
        ExportFormat::Md => Format::Markdown,
        ExportFormat::Html => Format::Html,
    };
    Ok(maintenance::export(&m, leaf, format)?)
}

/// `stats [--agent …] [DIR]`: every session of the agents asked (all four by default),
/// or pi's and omp's below `dir`.
pub(crate) fn stats(g: &Global, asked: &[AgentArg], dir: Option<&Path>) -> Result<String> {
    let sessions = every_file(g, asked, dir)?;
    // One environment per dialect: omp's resolves blob references (another agent's are
    // read with pi's rules).
    let mut s = maintenance::Stats::default();
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let mine: Vec<SessionFile> = sessions.iter().filter(|f| f.dialect == dialect).cloned().collect();
        if mine.is_empty() {
            continue;
        }
        let part = maintenance::stats(&env(g, dialect), &mine)?;
        s.sessions += part.sessions;
        s.bytes += part.bytes;
        s.unreadable += part.unreadable;
        s.largest.extend(part.largest);
        for (t, n) in part.entries_by_type {
            *s.entries_by_type.entry(t).or_default() += n;
        }
        s.input_tokens += part.input_tokens;
        s.output_tokens += part.output_tokens;
        s.cache_read_tokens += part.cache_read_tokens;
        s.cost += part.cost;
    }
    s.largest.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    s.largest.truncate(5);
    if wants_json(g) {
        let v = json!({
            "sessions": s.sessions,
            "bytes": s.bytes,
            "unreadable": s.unreadable,
            "largest": s.largest.iter().map(|(p, n)| json!({"path": path_str(p), "bytes": n})).collect::<Vec<_>>(),
            "entriesByType": s.entries_by_type,
            "tokens": {"input": s.input_tokens, "output": s.output_tokens, "cacheRead": s.cache_read_tokens},
            "cost": s.cost,
        });
        return Ok(v.to_string());
    }
    let mut out = String::new();
    let _ = writeln!(out, "{} session(s), {}", s.sessions, human_bytes(s.bytes));
    if s.unreadable > 0 {
        let _ = writeln!(out, "{} could not be read (see `session check`)", s.unreadable);
    }
    let _ = writeln!(out, "\nlargest:");
    for (p, n) in &s.largest {
        let _ = writeln!(out, "  {:>9}  {}", human_bytes(*n), p.display());
    }
    let _ = writeln!(out, "\nentries by type:");
    for (t, n) in &s.entries_by_type {
        let _ = writeln!(out, "  {n:>9}  {t}");
    }
    let _ = write!(
        out,
        "\ntokens: {:.0} input, {:.0} output, {:.0} cache read\ncost: ${:.4}",
        s.input_tokens, s.output_tokens, s.cache_read_tokens, s.cost
    );
    Ok(out)
}

pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{n} B") } else { format!("{v:.1} {}", UNITS[unit]) }
}

/// `fsck [DIR...]`: prints a line per finding and a summary; exits 1 when anything is
/// wrong.
pub(crate) fn fsck(g: &Global, dirs: &[PathBuf], repair_them: bool) -> Result<crate::commands::Output> {
    let homes = homes(g, &[])?;
    let options = FsckOptions::default().dirs(dirs).dialect(dialect_of(g)).repair(repair_them).blob_dir(&blob_dir(g)?);
    // An omp environment: it reads pi's files the same and resolves omp's blobs.
    let r = maintenance::fsck(&env(g, Dialect::Omp), &homes, &options)?;
    let failed = !r.findings.is_empty();
    let text = if wants_json(g) {
        json!({
            "sessions": r.sessions,
            "findings": r.findings.iter().map(|f| json!({"path": path_str(&f.path), "message": f.message})).collect::<Vec<_>>(),
            "missingBlobs": r.missing_blobs,
            "unreferencedBlobs": r.unreferenced_blobs,
            "repaired": r.repaired,
        })
        .to_string()
    } else {
        let mut out = String::new();
        for f in &r.findings {
            let _ = writeln!(out, "{}: {}", f.path.display(), f.message);
        }
        let _ = write!(
            out,
            "{} session(s) checked: {} finding(s), {} missing blob(s), {} unreferenced blob(s){}",
            r.sessions,
            r.findings.len(),
            r.missing_blobs,
            r.unreferenced_blobs,
            if repair_them { format!(", {} repaired", r.repaired) } else { String::new() }
        );
        out
    };
    Ok(crate::commands::Output { text, failed, streamed: false })
}

/// Parses a duration: a number with `s`, `m`, `h`, `d` or `w` (`0` alone is none).
pub(crate) fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(|| format!("{s:?}: give a unit (s, m, h, d, w)"))?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().map_err(|_| format!("{s:?}: not a number of seconds, minutes, hours, days or weeks"))?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (s, m, h, d, w)")),
    };
    Ok(Duration::from_secs(n.saturating_mul(secs)))
}

/// `gc`: the blobs no session in any home (nor in `dirs`) refers to, older than the
/// grace period; deletes them only with `yes`, else lists what it would delete.
pub(crate) fn gc(g: &Global, dirs: &[PathBuf], yes: bool, grace: Duration) -> Result<String> {
    let homes = homes(g, dirs)?;
    let dir = blob_dir(g)?;
    let current = crate::store::current();
    let files = session::store::FileStorage::new();
    // Sessions on a server refer to this machine's blobs as well as local ones do.
    let storages: Vec<&dyn session::store::Storage> =
        if crate::store::on_files() { vec![&files] } else { vec![&files, &*current] };
    let now = now_ms();
    let blobs = BlobStore::on(Arc::new(session::store::FileStorage::new()), dir);
    let r = maintenance::gc(&storages, &homes, &blobs, &GcOptions::default().grace(grace).delete(yes), now)?;
    let bytes: u64 = r.unused.iter().map(|b| b.bytes).sum();
    if wants_json(g) {
        let blob = |b: &StoredBlob| json!({"hash": b.blob.hash(), "files": b.files.iter().map(|p| path_str(p)).collect::<Vec<_>>(), "bytes": b.bytes, "modified": b.modified_ms});
        return Ok(json!({
            "deleted": r.deleted,
            "unused": r.unused.iter().map(blob).collect::<Vec<_>>(),
            "recent": r.recent.iter().map(blob).collect::<Vec<_>>(),
            "blobs": r.blobs,
            "referenced": r.referenced,
            "sessions": r.sessions,
            "filesScanned": r.files_scanned,
            "roots": r.roots.iter().map(|p| path_str(p)).collect::<Vec<_>>(),
        })
        .to_string());
    }
    let mut out = String::new();
    for b in &r.unused {
        for f in &b.files {
            let _ = writeln!(out, "{} {}", if r.deleted { "deleted" } else { "would delete" }, f.display());
        }
    }
    let _ = write!(
        out,
        "{} unused blob(s), {} ({} file(s) of {} session(s) read; {} blob(s) in use",
        r.unused.len(),
        human_bytes(bytes),
        r.files_scanned,
        r.sessions,
        r.referenced
    );
    if !r.recent.is_empty() {
        let _ = write!(out, ", {} unused but newer than the grace period, kept", r.recent.len());
    }
    out.push(')');
    if !r.deleted && !r.unused.is_empty() {
        out.push_str("; run with --yes to delete them");
    }
    Ok(out)
}
