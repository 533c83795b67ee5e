//! The file commands: each returns what to print and the exit status. With `--json`, or
//! when stdout is not a terminal, the inspecting commands print one JSON value shaped
//! exactly as the reference's API returns it (`docs/cli.md`); on a terminal they print
//! for a person (`crate::human`).

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::Path;

use serde_json::{Value, json};
use session::maintenance::Mark;
use session::model::json::{to_js_string, write_js_str};
use session::store::blob::BlobStore;
use session::tree::{self, Leaf};
use session::{Dialect, Env, OpenMode, Session, SessionManager};

use crate::args::{Cli, Command, Global, LeafArgs};
use crate::human;

pub(crate) type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// What a command prints on stdout and how the process exits.
pub(crate) struct Output {
    /// The text (a newline is added).
    pub(crate) text: String,
    /// Exit status 1 for "done, but something is wrong" (`check` found damage).
    pub(crate) failed: bool,
    /// Everything was printed as it came (`sync --watch`): nothing more is, not even a
    /// newline.
    pub(crate) streamed: bool,
}

impl From<String> for Output {
    fn from(text: String) -> Output {
        Output { text, failed: false, streamed: false }
    }
}

/// An error followed by the errors it was caused by, outermost first.
pub(crate) fn causes<'e>(
    e: &'e (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'e (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |c| c.source())
}

/// An error and its causes on one line, each after a colon (for warnings).
pub(crate) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    causes(e).map(|c| c.to_string()).collect::<Vec<_>>().join(": ")
}

/// Whether to print JSON: asked for, or stdout is not a terminal and `--text` was not
/// given.
pub(crate) fn wants_json(g: &Global) -> bool {
    g.json || (!g.text && !std::io::stdout().is_terminal())
}

pub(crate) fn run(g: &Global, command: &Command) -> Result<Output> {
    let json = wants_json(g);
    Ok(match command {
        Command::Info { file } => info(g, file, json)?.into(),
        Command::Entries { file, full } => entries(g, file, *full, json)?.into(),
        Command::Tree { file } => tree_cmd(g, file, json)?.into(),
        Command::Tail { file, lines, follow } => crate::tail::tail(g, file, *lines, *follow, json)?.into(),
        Command::Context { file, leaf, transcript } => context(g, file, leaf, *transcript, json)?.into(),
        Command::Projection { file, leaf } => projection(g, file, leaf)?.into(),
        Command::Branch { file, leaf } => branch(g, file, leaf.as_deref(), json)?.into(),
        Command::Check { file } => check(g, file, json)?,
        Command::Append { file, custom_type, data } => append(g, file, custom_type, data.as_deref())?.into(),
        Command::Extract { file, leaf } => extract(g, file, leaf)?.into(),
        Command::Fork { file, cwd, session_dir } => fork(g, file, cwd, session_dir)?.into(),
        Command::Rename { file, name } => rename(g, file, name)?.into(),
        Command::Label { file, id, text } => label(g, file, id, text.as_deref())?.into(),
        Command::Move { file, cwd, session_dir } => {
            crate::jobs::move_cmd(g, file, cwd, session_dir.as_deref(), json)?.into()
        }
        Command::Migrate { file, no_backup } => crate::jobs::rewrite(g, file, *no_backup, json, false)?.into(),
        Command::Repair { file, no_backup } => crate::jobs::rewrite(g, file, *no_backup, json, true)?.into(),
        Command::Rm { file, yes, force, purge } => crate::jobs::rm(g, file, *yes, *force, *purge)?.into(),
        Command::Trash { command } => crate::jobs::trash(g, command)?.into(),
        Command::Du { all, top } => crate::jobs::du(g, *all, *top)?.into(),
        Command::Merge { file, theirs, leaf } => crate::jobs::merge(g, file, theirs, leaf)?.into(),
        Command::Relocate { old, new, yes } => crate::jobs::relocate(g, old, new, *yes)?.into(),
        Command::Usage { by, since, no_cache, agent } => {
            crate::jobs::usage(g, agent, *by, since.clone(), *no_cache)?.into()
        }
        Command::Prune { older_than, keep_named, keep_pinned, project, yes } => {
            let o = crate::jobs::PruneArgs {
                older_than: *older_than,
                keep_named: *keep_named,
                keep_pinned: *keep_pinned,
                project: project.as_deref(),
                yes: *yes,
            };
            crate::jobs::prune(g, &o)?.into()
        }
        Command::Pin { session } => crate::jobs::mark(g, session, Mark::Pinned, true)?.into(),
        Command::Unpin { session } => crate::jobs::mark(g, session, Mark::Pinned, false)?.into(),
        Command::Archive { session } => crate::jobs::mark(g, session, Mark::Archived, true)?.into(),
        Command::Unarchive { session } => crate::jobs::mark(g, session, Mark::Archived, false)?.into(),
        Command::Export { file, leaf, format } => crate::jobs::export(g, file, leaf.as_deref(), *format)?.into(),
        Command::Fsck { dirs, repair } => crate::jobs::fsck(g, dirs, *repair)?,
        Command::Gc { dirs, yes, grace } => crate::jobs::gc(g, dirs, *yes, *grace)?.into(),
        Command::Stats { dir, agent } => crate::jobs::stats(g, agent, dir.as_deref())?.into(),
        Command::Ls { dir, cwd, all, no_cache, jsonl, archived, pinned, agent } => {
            let o = crate::find::LsOptions {
                agents: agent,
                dir: dir.as_deref(),
                cwd: cwd.as_deref(),
                all: *all,
                no_cache: *no_cache,
                jsonl: *jsonl,
                archived: *archived,
                pinned: *pinned,
            };
            crate::find::ls(g, &o)?.into()
        }
        Command::Resume { query, cwd, session_dir, no_cache } => {
            crate::find::resume(g, query, cwd.as_deref(), session_dir.as_deref(), *no_cache)?.into()
        }
        Command::Search { query, all, cwd, rebuild, no_update, limit, jsonl, agent } => {
            let o = crate::find::SearchOptions {
                agents: agent,
                query,
                all: *all,
                cwd: cwd.as_deref(),
                rebuild: *rebuild,
                no_update: *no_update,
                limit: *limit,
                jsonl: *jsonl,
            };
            crate::find::search(g, &o)?.into()
        }
        Command::Continue { cwd, no_cache } => crate::find::continue_cmd(g, cwd.as_deref(), *no_cache)?.into(),
        Command::History { command } => crate::find::history(g, command)?.into(),
        Command::Push { file, to, force } => crate::transfer::push(file, to, *force)?.into(),
        Command::Pull { source, to, force } => crate::transfer::pull(source, to, *force)?.into(),
        Command::Sync { to, prefix, map, project, dry_run, watch, interval } => {
            let a = crate::sync::SyncArgs {
                to,
                prefix: prefix.as_deref(),
                map,
                projects: project,
                dry_run: *dry_run,
                watch: watch.then_some(*interval),
            };
            crate::sync::sync(g, &a)?
        }
        Command::Pick { all } => {
            crate::pick::run(g, *all)?;
            String::new().into()
        }
        Command::Import { file, to, cwd, session_dir } => {
            crate::import::import(g, file, (*to).into(), cwd.as_deref(), session_dir.as_deref())?.into()
        }
        Command::Mcp => {
            crate::mcp::serve(g)?;
            String::new().into()
        }
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            let mut out = Vec::new();
            clap_complete::generate(*shell, &mut cmd, "session", &mut out);
            String::from_utf8(out)?.trim_end().to_owned().into()
        }
    })
}

/// The environment for `dialect`: the `--store` storage (real files by default), and
/// for omp the agent directory of
/// `--omp-home` with its blob store (`--blob-dir`, else `<agent dir>/blobs` as omp uses
/// it). The command never moves the terminal's breadcrumb.
pub(crate) fn env(g: &Global, dialect: Dialect) -> Env {
    let mut env = Env::files().with_terminal(None);
    env = env.with_storage(crate::store::current());
    if let Ok(process) = session::discovery::ProcessEnv::from_process_env() {
        if dialect == Dialect::Omp {
            env = env.with_agent_dirs(session::discovery::AgentDirs::omp(&process, g.omp_home.into()));
        }
        // Large sessions' indexes, beside the listing cache (local files only).
        if crate::store::on_files()
            && process.var("SESSION_NO_CACHE").is_none_or(|v| v == "0")
            && let Some(dir) = crate::cache::index_dir()
        {
            env = env.with_index_dir(dir.clone());
        }
    }
    match &g.blob_dir {
        Some(dir) => env.with_blobs(BlobStore::open(dir)),
        None => env,
    }
}

/// The dialect from `--dialect`, else the file's own (a title slot means omp).
pub(crate) fn dialect_for(g: &Global, file: &Path) -> Dialect {
    if let Some(d) = g.dialect {
        return d.into();
    }
    match crate::store::current().read_slices(file, 16, 0) {
        Ok((prefix, _)) if prefix.starts_with(b"{\"type\":\"title\"") => Dialect::Omp,
        _ => Dialect::Pi,
    }
}

/// Opens the session to inspect it: read-only (nothing written, a missing file is an
/// error), or as the agent opens it with `--as-agent`.
/// A Claude Code transcript or a Codex rollout opens as the pi session its import writes,
/// built in memory (`session::import::open_foreign`).
pub(crate) fn open(g: &Global, file: &Path) -> Result<Inspected> {
    Ok(open_inspect(g, file)?.0)
}

/// A session opened to inspect it: a read-only [`Session`], or with `--as-agent` the
/// manager the agent's open makes (which may have written a migration or a repair).
/// Either reads through [`SessionManager`]'s `&self` methods.
pub(crate) enum Inspected {
    /// Read-only: nothing can be written.
    Read(Session),
    /// `--as-agent`.
    Agent(SessionManager),
}

impl Inspected {
    /// Moves the leaf in memory (the agents' `branch`).
    pub(crate) fn branch(&mut self, id: &str) -> std::result::Result<(), session::SessionError> {
        match self {
            Inspected::Read(s) => s.branch(id),
            Inspected::Agent(m) => m.branch(id),
        }
    }

    /// Moves the leaf before the first entry in memory (the agents' `resetLeaf`).
    pub(crate) fn reset_leaf(&mut self) {
        match self {
            Inspected::Read(s) => s.reset_leaf(),
            Inspected::Agent(m) => m.reset_leaf(),
        }
    }
}

impl std::ops::Deref for Inspected {
    type Target = SessionManager;

    fn deref(&self) -> &SessionManager {
        match self {
            Inspected::Read(s) => s.as_manager(),
            Inspected::Agent(m) => m,
        }
    }
}

/// Opens the session to inspect it, read-only or (`--as-agent`) as its agent does.
pub(crate) fn inspect(g: &Global, file: &Path) -> Result<Inspected> {
    if g.as_agent {
        return Ok(Inspected::Agent(open_as(g, file, OpenMode::AsAgent)?));
    }
    let dialect = dialect_for(g, file);
    Ok(Inspected::Read(Session::open(dialect, file, env(g, dialect))?))
}

/// [`open`], with the import's report when `file` is another agent's session.
fn open_inspect(g: &Global, file: &Path) -> Result<(Inspected, Option<session::import::ImportReport>)> {
    if g.dialect.is_none() && !g.as_agent && g.store.is_none() && file.is_file() {
        let env = env(g, Dialect::Pi);
        if let Some((s, report)) = session::import::open_foreign(file, &env)? {
            return Ok((Inspected::Read(s), Some(report)));
        }
    }
    Ok((inspect(g, file)?, None))
}

/// Opens the session to write to it: it must exist (`--as-agent`: as the agent opens it,
/// a missing file starting a new session there).
fn open_for_writing(g: &Global, file: &Path) -> Result<SessionManager> {
    open_as(g, file, OpenMode::MustExist)
}

pub(crate) fn open_as(g: &Global, file: &Path, mode: OpenMode) -> Result<SessionManager> {
    let dialect = dialect_for(g, file);
    let mode = if g.as_agent { OpenMode::AsAgent } else { mode };
    Ok(SessionManager::open_with(dialect, file, env(g, dialect), mode)?)
}

/// Returns `value` unless a text of the session failed to be read from its file while
/// `value` was made (the record then read as `null`).
pub(crate) fn done<T>(m: &SessionManager, value: T) -> Result<T> {
    m.check_reads()?;
    Ok(value)
}

/// Applies `--leaf` / `--leaf-null` as the reference does: `branch(id)` or `resetLeaf()`.
fn apply_leaf(leaf: &LeafArgs, m: &mut Inspected) -> Result<()> {
    if let Some(id) = &leaf.leaf {
        m.branch(id)?;
    } else if leaf.leaf_null {
        m.reset_leaf();
    }
    Ok(())
}

/// Writes an entry's id as the reference prints it: the string, else whatever JSON
/// value the `id` holds (a number stays a number), else `null`.
fn push_id(out: &mut String, r: &session::Record) {
    if let Some(id) = r.id() {
        return write_js_str(out, id);
    }
    match r.get("id") {
        Some(v) => out.push_str(&to_js_string(v)),
        None => out.push_str("null"),
    }
}

/// Writes `items` as a JSON array, each written by `f`.
pub(crate) fn push_array<T>(out: &mut String, items: impl IntoIterator<Item = T>, mut f: impl FnMut(&mut String, T)) {
    out.push('[');
    for (i, x) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        f(out, x);
    }
    out.push(']');
}

fn push_opt_str(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => write_js_str(out, s),
        None => out.push_str("null"),
    }
}

fn info(g: &Global, file: &Path, json: bool) -> Result<String> {
    let (m, foreign) = open_inspect(g, file)?;
    if !json {
        return done(&m, human::info(&m, foreign.as_ref().map(|r| (file, r))));
    }
    let mut out = String::from("{\"header\":");
    out.push_str(&m.header().line());
    let t = m.tree();
    // A leaf entry without an id is `undefined` in the reference: the key disappears.
    if t.leaf_id().is_some() || t.entries().is_empty() {
        out.push_str(",\"leafId\":");
        push_opt_str(&mut out, t.leaf_id());
    }
    out.push_str(",\"name\":");
    match m.header().get("title") {
        // omp's name is the header's title whatever it holds (`42`, an object).
        Some(v) if m.dialect() == Dialect::Omp && !v.is_string() && !v.is_null() => {
            out.push_str(&to_js_string(v));
        }
        _ => push_opt_str(&mut out, m.session_name().as_deref()),
    }
    // Another agent's session: whose, and what its import skipped or kept as custom.
    if let Some(report) = &foreign {
        out.push_str(",\"source\":{\"agent\":");
        write_js_str(&mut out, report.source.name());
        out.push_str(",\"path\":");
        write_js_str(&mut out, &file.to_string_lossy());
        let _ = write!(out, ",\"importNotes\":{}}}", report.diagnostics.len());
    }
    out.push('}');
    done(&m, out)
}

fn entries(g: &Global, file: &Path, full: bool, json: bool) -> Result<String> {
    let m = open(g, file)?;
    if !json {
        return done(&m, human::entries(&m, full));
    }
    let mut out = String::new();
    push_array(&mut out, m.tree().entries(), |out, r| if full { out.push_str(&r.line()) } else { push_id(out, r) });
    done(&m, out)
}

fn tree_cmd(g: &Global, file: &Path, json: bool) -> Result<String> {
    let m = open(g, file)?;
    let nodes = m.tree().tree();
    if !json {
        return done(&m, human::tree(&m, &nodes));
    }
    done(&m, tree::tree_to_json(&nodes, m.dialect() == Dialect::Pi))
}

fn context(g: &Global, file: &Path, leaf: &LeafArgs, transcript: bool, json: bool) -> Result<String> {
    let mut m = open(g, file)?;
    apply_leaf(leaf, &mut m)?;
    let text = m.context_json(Leaf::Current, transcript)?;
    if !json {
        return human::transcript(&text);
    }
    Ok(text)
}

fn projection(g: &Global, file: &Path, leaf: &LeafArgs) -> Result<String> {
    let mut m = open(g, file)?;
    if m.dialect() != Dialect::Pi {
        return Err("projection is a pi query; use context for omp".into());
    }
    apply_leaf(leaf, &mut m)?;
    Ok(m.projection_json(Leaf::Current)?)
}

fn branch(g: &Global, file: &Path, leaf: Option<&str>, json: bool) -> Result<String> {
    let m = open(g, file)?;
    let path = m.tree().get_branch(leaf);
    if !json {
        return done(&m, human::branch(&path));
    }
    let mut out = String::new();
    push_array(&mut out, &path, |out, r| push_id(out, r));
    done(&m, out)
}

fn check(g: &Global, file: &Path, json: bool) -> Result<Output> {
    let m = open(g, file)?;
    let damaged = !m.diagnostics().is_empty() || !m.tree().diagnostics().is_empty();
    if !json {
        return done(&m, Output { text: human::check(file, &m), failed: damaged, streamed: false });
    }
    let mut out = String::from("{\"diagnostics\":");
    push_array(&mut out, m.diagnostics(), |out, d| {
        let _ = write!(out, "{{\"line\":{},\"offset\":{},\"message\":", d.line, d.offset);
        write_js_str(out, &d.to_string());
        out.push('}');
    });
    out.push_str(",\"treeDiagnostics\":");
    push_array(&mut out, m.tree().diagnostics(), |out, d| write_js_str(out, &d.to_string()));
    out.push('}');
    done(&m, Output { text: out, failed: damaged, streamed: false })
}

fn id_json(id: Option<&str>) -> String {
    to_js_string(&json!({ "id": id }))
}

fn append(g: &Global, file: &Path, custom_type: &str, data: Option<&str>) -> Result<String> {
    // Read as JavaScript reads it (`1e400` is `null` once written, a lone surrogate is
    // kept), by the model's one JSON reader; serde's error says where it is not JSON.
    let data = data.map(|d| session::model::json::parse(d).ok_or(d)).transpose().map_err(|d| {
        let e = serde_json::from_str::<Value>(d).err().map_or_else(String::new, |e| format!(": {e}"));
        format!("--data is not JSON{e}")
    })?;
    let mut m = open_for_writing(g, file)?;
    let id = m.append_custom_entry(custom_type, data)?;
    m.close()?;
    Ok(id_json(Some(&id)))
}

/// Names the session as a person would in the agent (pi: a `session_info` entry;
/// omp: a `title_change` entry and the title slot, written in place). Prints
/// `{"id": …}`, with `null` when omp refuses the name (empty after cleaning).
fn rename(g: &Global, file: &Path, name: &str) -> Result<String> {
    Ok(id_json(set_name(g, file, name)?.as_deref()))
}

/// Names the session (`rename`, and the picker's `r`): the new entry's id, `None` when
/// omp refuses the name.
pub(crate) fn set_name(g: &Global, file: &Path, name: &str) -> Result<Option<session::EntryId>> {
    let mut m = open_for_writing(g, file)?;
    let id = m.set_session_name(name, Some("user"))?;
    m.close()?;
    Ok(id)
}

/// The transcript `context --transcript` prints on a terminal: what the model sees at
/// the current leaf (the picker's preview).
pub(crate) fn transcript(g: &Global, file: &Path) -> Result<String> {
    let m = open(g, file)?;
    human::transcript(&m.context_json(Leaf::Current, true)?)
}

/// Labels an entry (`label` entry); an empty or absent text clears the label.
fn label(g: &Global, file: &Path, id: &str, text: Option<&str>) -> Result<String> {
    let mut m = open_for_writing(g, file)?;
    if m.tree().get(id).is_none() {
        return Err(format!("no entry {id:?} in {}; `session entries` lists the ids", file.display()).into());
    }
    let label_id = m.set_label(id, text.filter(|t| !t.is_empty()))?;
    m.close()?;
    Ok(id_json(Some(&label_id)))
}

fn path_json(p: Option<&Path>) -> String {
    to_js_string(&json!({ "path": p.map(|p| p.to_string_lossy()) }))
}

fn extract(g: &Global, file: &Path, leaf: &str) -> Result<String> {
    let mut m = open_for_writing(g, file)?;
    let path = m.create_branched_session(leaf)?;
    m.close()?;
    Ok(path_json(path.as_deref()))
}

fn fork(g: &Global, file: &Path, cwd: &str, dir: &Path) -> Result<String> {
    let dialect = dialect_for(g, file);
    let m = SessionManager::fork_from(dialect, file, cwd, dir, env(g, dialect))?;
    let out = path_json(m.session_file());
    m.close()?;
    Ok(out)
}
