//! The finding commands: `ls`, `resume`, `history search`.
//!
//! Output is JSON when stdout is not a terminal or `--json` is given (the
//! conformance contract), and a readable table on a terminal.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use session::Dialect;
use session::discovery::{self, AgentDirs, Discovery, Progress, ResumeTarget, SessionInfo};
use session::history::{HistoryOptions, HistoryScope, HistoryStore, history_db_path};
use session::model::json::{to_js_string, write_js_str};
use session::model::timestamp::format_iso_millis;

use crate::args::{AgentArg, Global, HistoryCommand};
use crate::commands::{Result, wants_json};

/// The listing of `dialect`'s sessions as the command reads them: read-only unless
/// `--as-agent`, with the listing cache unless `no_cache` (or `SESSION_NO_CACHE`).
pub(crate) fn discovery_for(g: &Global, dialect: Dialect, no_cache: bool) -> Result<Discovery> {
    let env = discovery::ProcessEnv::from_process_env()?;
    let mut discovery =
        Discovery::new(AgentDirs::for_dialect(dialect, &env, g.omp_home.into())).with_storage(crate::store::current());
    if !g.as_agent {
        discovery = discovery.read_only();
    }
    // The listing cache is a local file keyed by local stats: files only.
    if no_cache || !crate::store::on_files() || env.var("SESSION_NO_CACHE").is_some_and(|v| v != "0") {
        return Ok(discovery);
    }
    Ok(match crate::cache::dir() {
        Some(dir) => discovery.with_list_cache(dir.clone(), 64),
        None => discovery,
    })
}

/// `--cwd`, else the process's working directory.
pub(crate) fn cwd_arg(cwd: Option<&str>) -> Result<String> {
    match cwd {
        Some(c) => Ok(c.to_owned()),
        None => Ok(std::env::current_dir()?.to_string_lossy().into_owned()),
    }
}

/// Draws a progress line on stderr when it is a terminal and the scan takes a while.
pub(crate) struct ProgressLine {
    label: &'static str,
    start: Instant,
    after: Duration,
    enabled: bool,
    drawn: bool,
}

impl ProgressLine {
    fn new() -> ProgressLine {
        ProgressLine::labeled("scanning")
    }

    /// Returns a line that names what it counts `label`.
    pub(crate) fn labeled(label: &'static str) -> ProgressLine {
        // How long a scan runs before its line is drawn (`SESSION_PROGRESS_AFTER_MS`,
        // default 250 ms).
        let after = std::env::var("SESSION_PROGRESS_AFTER_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(250);
        ProgressLine {
            label,
            start: Instant::now(),
            after: Duration::from_millis(after),
            enabled: std::io::stderr().is_terminal(),
            drawn: false,
        }
    }

    fn update(&mut self, p: &Progress<'_>) {
        self.tick(p.loaded, p.total);
    }

    pub(crate) fn tick(&mut self, loaded: usize, total: usize) {
        if !self.enabled || self.start.elapsed() < self.after {
            return;
        }
        if loaded == total || loaded.is_multiple_of(25) {
            let width = 30;
            let done = (loaded * width).checked_div(total).unwrap_or(width).min(width);
            let bar: String = "#".repeat(done) + &" ".repeat(width - done);
            let _ = write!(std::io::stderr(), "\r{} [{bar}] {loaded}/{total}", self.label);
            self.drawn = true;
        }
    }

    pub(crate) fn finish(&mut self) {
        if self.drawn {
            let _ = write!(std::io::stderr(), "\r{}\r", " ".repeat(60));
        }
    }
}

/// pi and omp, or only `--dialect`'s.
pub(crate) fn dialects(g: &Global) -> Vec<Dialect> {
    match g.dialect {
        Some(d) => vec![Dialect::from(d)],
        None => vec![Dialect::Pi, Dialect::Omp],
    }
}

/// Whose sessions a listing or a search reads: pi's and omp's (through discovery) and
/// Claude Code's and Codex's (read where they keep them).
pub(crate) struct Agents {
    /// pi and omp, as asked.
    pub(crate) dialects: Vec<Dialect>,
    /// Claude Code and Codex, as asked (none for `--dialect`, a DIR or `--store`).
    pub(crate) others: Vec<discovery::OtherAgent>,
}

/// The agents of `--agent` (all four when empty) under `--dialect` (only that
/// reference), a session DIR or `--store` (only pi and omp: the other agents' homes are
/// local folders of their own).
pub(crate) fn agents(g: &Global, asked: &[AgentArg], dir_given: bool) -> Result<Agents> {
    use discovery::OtherAgent;
    if let Some(d) = g.dialect {
        if !asked.is_empty() {
            return Err("--agent and --dialect: give one (--dialect prints one reference's own JSON)".into());
        }
        return Ok(Agents { dialects: vec![Dialect::from(d)], others: Vec::new() });
    }
    let only_others = !asked.is_empty() && asked.iter().all(|a| matches!(a, AgentArg::Claude | AgentArg::Codex));
    if only_others && (dir_given || g.store.is_some()) {
        let why = if dir_given { "a session DIR" } else { "--store" };
        return Err(format!(
            "Claude Code's and Codex's sessions are read from their own homes, not from {why}: leave it out"
        )
        .into());
    }
    let has = |a: AgentArg| asked.is_empty() || asked.contains(&a);
    let dialects = [(AgentArg::Pi, Dialect::Pi), (AgentArg::Omp, Dialect::Omp)]
        .into_iter()
        .filter(|(a, _)| has(*a))
        .map(|(_, d)| d)
        .collect();
    let mut others = Vec::new();
    if !dir_given && g.store.is_none() {
        others = [(AgentArg::Claude, OtherAgent::Claude), (AgentArg::Codex, OtherAgent::Codex)]
            .into_iter()
            .filter(|(a, _)| has(*a))
            .map(|(_, o)| o)
            .collect();
    }
    Ok(Agents { dialects, others })
}

/// One agent's sessions as a listing found them: the agent's name, its dialect (`None`
/// for Claude Code and Codex, listed as pi lists their imports) and the sessions.
pub(crate) type Found = (&'static str, Option<Dialect>, Vec<SessionInfo>);

/// Lists the sessions of `agents`: those of `cwd` (every project's for `None`), in `dir`
/// instead of the default folders when given, with their message texts only when
/// `texts` (`all_messages_text`, else empty); `progress` is called as files are read.
pub(crate) fn gather(
    g: &Global,
    agents: Agents,
    (dir, cwd): (Option<&Path>, Option<&str>),
    no_cache: bool,
    texts: bool,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Vec<Found>> {
    let discovery =
        |dialect| discovery_for(g, dialect, no_cache).map(|d| if texts { d } else { d.without_message_texts() });
    let mut found: Vec<Found> = Vec::new();
    for dialect in agents.dialects {
        let d = discovery(dialect)?;
        let sessions = match cwd {
            None => d.list_all(dir, progress)?,
            Some(cwd) => d.list(cwd, dir, progress)?,
        };
        found.push((dialect.name(), Some(dialect), sessions));
    }
    if !agents.others.is_empty() {
        let d = discovery(Dialect::Pi)?;
        for agent in agents.others {
            // Another agent's home that cannot be read costs its sessions, not the listing.
            match d.list_others(Some(agent), cwd, progress) {
                Ok(listed) => found.push((agent.name(), None, listed.into_iter().map(|l| l.info).collect())),
                Err(e) => eprintln!("warning: {}'s sessions left out: {}", agent.name(), crate::commands::chain(&e)),
            }
        }
    }
    Ok(found)
}

/// `ls`: one dialect's listing in its reference's shape (`--dialect`), or every agent's
/// sessions merged newest first, each JSON object with an `agent` field.
pub(crate) fn ls(g: &Global, o: &LsOptions<'_>) -> Result<String> {
    let mut agents = agents(g, o.agents, o.dir.is_some())?;
    // Claude Code's and Codex's: archived and pinned are marks of ours, which they never have.
    if o.archived || o.pinned {
        agents.others.clear();
    }
    let cwd = cwd_arg(o.cwd)?;
    let mut bar = ProgressLine::new();
    let mut skipped: Vec<PathBuf> = Vec::new();
    let mut progress = |p: Progress<'_>| {
        for s in p.skipped {
            if !skipped.contains(s) {
                skipped.push(s.clone());
            }
        }
        bar.update(&p);
    };
    // A table shows no message text: the listing reads none it need not.
    let texts = o.jsonl || wants_json(g);
    let scope = (o.dir, (!o.all).then_some(cwd.as_str()));
    let mut found = gather(g, agents, scope, o.no_cache, texts, &mut progress)?;
    bar.finish();
    for s in &skipped {
        eprintln!("note: skipped {}: not a regular file", s.display());
    }
    // The marks: one small read. Archived sessions are left out (or only they are shown).
    let marks = crate::jobs::read_marks(g);
    let mark = |dialect: Option<Dialect>, id: &str| dialect.map(|d| marks.of(d, id)).unwrap_or_default();
    for (_, dialect, sessions) in &mut found {
        sessions.retain(|s| {
            let m = mark(*dialect, &s.id);
            m.archived == o.archived && (m.pinned || !o.pinned)
        });
    }
    if g.dialect.is_some()
        && let [(_, Some(dialect), sessions)] = &found[..]
        && wants_json(g)
        && !o.jsonl
    {
        // Streamed: a listing of thousands of sessions (each with all its message text)
        // is never assembled whole; the command's closing newline follows.
        let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
        discovery::write_sessions_json(*dialect, sessions, &mut out)?;
        std::io::Write::flush(&mut out)?;
        return Ok(String::new());
    }
    if !(o.jsonl || wants_json(g)) {
        let mut rows: Vec<(&str, &SessionInfo, bool)> =
            found.iter().flat_map(|(a, d, ss)| ss.iter().map(move |s| (*a, s, mark(*d, &s.id).pinned))).collect();
        rows.sort_by_key(|(_, s, pinned)| (!pinned, std::cmp::Reverse(s.modified)));
        return Ok(table(&rows, o.archived));
    }
    // Every agent (or a stream): each session's reference shape (pi's for Claude Code
    // and Codex), with its agent and its marks; pinned sessions first, then newest first.
    // Each object is written as the reference writes it (a text cut inside a surrogate
    // pair keeps its lone escape), with the agent and the marks after its members.
    let mut merged: Vec<(bool, Option<i64>, String)> = Vec::new();
    for (agent, dialect, sessions) in &found {
        let shape = dialect.unwrap_or(Dialect::Pi);
        let agent_json = serde_json::Value::from(*agent).to_string();
        for s in sessions {
            let m = mark(*dialect, &s.id);
            let extra =
                [("agent", agent_json.as_str()), ("pinned", bool_json(m.pinned)), ("archived", bool_json(m.archived))];
            merged.push((m.pinned, s.modified, discovery::session_to_json(shape, s, &extra)));
        }
    }
    merged.sort_by_key(|m| (!m.0, std::cmp::Reverse(m.1)));
    let objects: Vec<String> = merged.into_iter().map(|m| m.2).collect();
    if o.jsonl {
        return Ok(objects.join("\n"));
    }
    Ok(format!("[{}]", objects.join(",")))
}

/// `true` or `false`, as JSON.
fn bool_json(b: bool) -> &'static str {
    if b { "true" } else { "false" }
}

/// What `ls` lists.
pub(crate) struct LsOptions<'a> {
    /// Whose sessions (`--agent`; all when empty).
    pub(crate) agents: &'a [AgentArg],
    /// A session directory instead of the working directory's.
    pub(crate) dir: Option<&'a Path>,
    /// Whose sessions.
    pub(crate) cwd: Option<&'a str>,
    /// Every project's.
    pub(crate) all: bool,
    /// Skip the listing cache.
    pub(crate) no_cache: bool,
    /// One JSON object a line.
    pub(crate) jsonl: bool,
    /// Only the archived sessions (left out otherwise).
    pub(crate) archived: bool,
    /// Only the pinned sessions.
    pub(crate) pinned: bool,
}

/// The table of `ls`: pinned sessions marked `*`.
fn table(sessions: &[(&str, &SessionInfo, bool)], archived: bool) -> String {
    use crate::table::{Column, render};
    if sessions.is_empty() {
        return if archived { "no archived sessions" } else { "no sessions" }.into();
    }
    let now = session::store::clock::Clock::now_ms(&session::store::clock::SystemClock);
    let columns = [
        Column { header: "PIN", right: false, flex: 0 },
        Column { header: "MODIFIED", right: false, flex: 0 },
        Column { header: "AGENT", right: false, flex: 0 },
        Column { header: "MSGS", right: true, flex: 0 },
        Column { header: "ID", right: false, flex: 0 },
        Column { header: "NAME / FIRST MESSAGE", right: false, flex: 3 },
        Column { header: "CWD", right: false, flex: 2 },
    ];
    let rows: Vec<Vec<String>> = sessions
        .iter()
        .map(|(d, s, pinned)| {
            let name = s.name.as_deref().or(s.title.as_deref()).unwrap_or(&s.first_message);
            vec![
                if *pinned { "*" } else { "" }.to_owned(),
                s.modified.map_or_else(|| "?".to_owned(), |m| discovery::time_ago(m, now)),
                (*d).to_owned(),
                s.message_count.to_string(),
                s.id.chars().take(8).collect(),
                name.to_owned(),
                s.cwd.clone(),
            ]
        })
        .collect();
    let mut out = render(&columns, &rows, crate::table::width(), crate::table::colour());
    let what = if archived { "archived session(s)" } else { "session(s)" };
    out.push_str(&format!("{} {what}", sessions.len()));
    out
}

/// `resume QUERY`: the reference's own lookup (an id prefix, a file-name prefix or a
/// path) in the dialect given or in pi then omp; failing that, the sessions of both
/// agents whose name, title or first message contains the query (case-insensitively):
/// one is the answer, several are an error that lists them.
pub(crate) fn resume(
    g: &Global,
    arg: &str,
    cwd: Option<&str>,
    session_dir: Option<&Path>,
    no_cache: bool,
) -> Result<String> {
    let (dialect, path, scope) = find_session(g, arg, cwd, session_dir, no_cache)?;
    if !wants_json(g) {
        return Ok(path.display().to_string());
    }
    let mut out = serde_json::json!({"path": path.to_string_lossy(), "scope": scope});
    if g.dialect.is_none() {
        out["agent"] = dialect.name().into();
    }
    Ok(to_js_string(&out))
}

/// The session `arg` names, as `resume` looks it up: whose it is, its path, and how it
/// was found (`path`, `local`, `global` or `name`).
pub(crate) fn find_session(
    g: &Global,
    arg: &str,
    cwd: Option<&str>,
    session_dir: Option<&Path>,
    no_cache: bool,
) -> Result<(Dialect, PathBuf, &'static str)> {
    let cwd = cwd_arg(cwd)?;
    let dialects = dialects(g);
    let mut hit: Option<(Dialect, PathBuf, &'static str)> = None;
    for &dialect in &dialects {
        let d = discovery_for(g, dialect, no_cache)?;
        match d.resolve_resumable(arg, &cwd, session_dir)? {
            ResumeTarget::Path(p) => {
                hit = Some((dialect, p, "path"));
                break;
            }
            ResumeTarget::Session { session, scope } => {
                let scope = if scope == discovery::Scope::Local { "local" } else { "global" };
                hit = Some((dialect, session.path, scope));
                break;
            }
            ResumeTarget::NotFound => {}
        }
    }
    if hit.is_none() {
        let needle = arg.to_lowercase();
        let mut matches: Vec<(Dialect, SessionInfo)> = Vec::new();
        for &dialect in &dialects {
            let d = discovery_for(g, dialect, no_cache)?;
            for s in d.list_all(session_dir, &mut |_| {})? {
                let name = s.name.as_deref().or(s.title.as_deref()).unwrap_or_default();
                if name.to_lowercase().contains(&needle) || s.first_message.to_lowercase().contains(&needle) {
                    matches.push((dialect, s));
                }
            }
        }
        match matches.len() {
            0 => {
                return Err(format!(
                    "no session matches {arg:?} (by id, file name, name or first message); `session ls --all` lists every session"
                )
                .into());
            }
            1 => {
                let (dialect, s) = matches.remove(0);
                hit = Some((dialect, s.path, "name"));
            }
            n => {
                let mut text = format!("{n} sessions match {arg:?}; give more of the name or an id prefix:");
                for (dialect, s) in matches.iter().take(10) {
                    let name = s.name.as_deref().or(s.title.as_deref()).unwrap_or(&s.first_message);
                    text.push_str(&format!("\n  {}  {:<3}  {}", s.id, dialect.name(), crate::table::fit(name, 60)));
                }
                if n > 10 {
                    text.push_str(&format!("\n  … and {} more", n - 10));
                }
                return Err(text.into());
            }
        }
    }
    hit.ok_or_else(|| "no session found".into())
}

/// `continue`: the session the agent's own `--continue` would open in `cwd` (omp: the
/// terminal's breadcrumb first, then the newest non-empty session; pi: the newest
/// session of the directory), or, without `--dialect`, the newer of the two agents'
/// picks. Writes nothing (no breadcrumb).
pub(crate) fn continue_cmd(g: &Global, cwd: Option<&str>, no_cache: bool) -> Result<String> {
    let cwd = cwd_arg(cwd)?;
    let dialects = dialects(g);
    let env = discovery::ProcessEnv::from_process_env()?;
    let mut best: Option<(i64, Dialect, PathBuf, &str)> = None;
    for dialect in dialects {
        let d = discovery_for(g, dialect, no_cache)?;
        let pick = match dialect {
            Dialect::Omp => match d.continue_recent(&cwd, None, env.terminal_id().as_deref())? {
                discovery::ContinueDecision::Open(s) => Some((s.modified.unwrap_or(0), s.path, "open")),
                discovery::ContinueDecision::Reroot { session_file, .. } => {
                    let stat = crate::store::current().stat(&session_file)?;
                    let modified = stat.map_or(0, |s| s.mtime_ms);
                    Some((modified, session_file, "reroot"))
                }
                discovery::ContinueDecision::New => None,
            },
            Dialect::Pi => {
                let dir = d.dirs().default_session_dir(&cwd);
                d.find_most_recent(&dir, None).map(|p| {
                    let modified = d
                        .list("", Some(&dir), &mut |_| {})
                        .ok()
                        .and_then(|ss| ss.into_iter().find(|s| s.path == p).and_then(|s| s.modified));
                    (modified.unwrap_or(0), p, "open")
                })
            }
        };
        if let Some((modified, path, how)) = pick
            && best.as_ref().is_none_or(|b| modified > b.0)
        {
            best = Some((modified, dialect, path, how));
        }
    }
    let Some((_, dialect, path, how)) = best else {
        if wants_json(g) {
            return Ok("{\"path\":null,\"decision\":\"new\"}".to_owned());
        }
        return Err(format!("no session to continue in {cwd}; the agent would start a new one").into());
    };
    if !wants_json(g) {
        return Ok(path.display().to_string());
    }
    Ok(to_js_string(&serde_json::json!({"path": path.to_string_lossy(), "decision": how, "agent": dialect.name()})))
}

pub(crate) fn history(g: &Global, command: &HistoryCommand) -> Result<String> {
    let HistoryCommand::Search { query, limit, cwd } = command;
    let dialect = g.dialect.map_or(Dialect::Omp, Dialect::from);
    let env = discovery::ProcessEnv::from_process_env()?;
    let dirs = AgentDirs::for_dialect(dialect, &env, g.omp_home.into());
    let path = history_db_path(&dirs.agent_dir);
    if !path.exists() {
        return Err(format!("no prompt history at {}", path.display()).into());
    }
    let opened = HistoryStore::open(&path, HistoryOptions::default())?;
    for notice in &opened.notices {
        eprintln!("note: {notice}");
    }
    let scope = match cwd {
        Some(c) => HistoryScope::Cwd(c.clone()),
        None => HistoryScope::Global,
    };
    note_left_out_words(query);
    let rows = opened.store.search(query, *limit, &scope)?;
    if !wants_json(g) {
        let mut out = String::new();
        for r in &rows {
            out.push_str(&format!(
                "{}  {}\n",
                format_iso_millis(r.created_at * 1000),
                crate::table::fit(&r.prompt, 100)
            ));
        }
        out.push_str(&format!("{} prompt(s)", rows.len()));
        return Ok(out);
    }
    let mut out = String::new();
    crate::commands::push_array(&mut out, &rows, |out, r| {
        out.push_str("{\"prompt\":");
        write_js_str(out, &r.prompt);
        out.push_str(&format!(",\"createdAt\":{},\"useCount\":{}", r.created_at, r.use_count));
        for (k, v) in [("cwd", &r.cwd), ("sessionId", &r.session_id)] {
            if let Some(v) = v {
                out.push_str(&format!(",\"{k}\":"));
                write_js_str(out, v);
            }
        }
        out.push('}');
    });
    Ok(out)
}

/// What `search` looks for and where.
pub(crate) struct SearchOptions<'a> {
    /// Whose sessions (`--agent`; all when empty).
    pub(crate) agents: &'a [AgentArg],
    /// The words.
    pub(crate) query: &'a str,
    /// Every project's sessions.
    pub(crate) all: bool,
    /// Whose sessions (default: the working directory).
    pub(crate) cwd: Option<&'a str>,
    /// Start the catalog over.
    pub(crate) rebuild: bool,
    /// Answer from the catalog without bringing it up to date.
    pub(crate) no_update: bool,
    /// At most this many hits.
    pub(crate) limit: usize,
    /// One JSON object a line.
    pub(crate) jsonl: bool,
}

/// The search catalog of the sessions in scope, brought up to date.
pub(crate) struct OpenCatalog {
    /// The catalog.
    pub(crate) index: session::search::SearchIndex,
    /// The folders searched (one per agent).
    pub(crate) scopes: Vec<PathBuf>,
    /// What bringing it up to date read.
    pub(crate) report: session::search::UpdateReport,
    /// The session files in scope (empty without an update).
    pub(crate) files: Vec<session::search::SessionFile>,
}

/// Opens the search catalog in the cache folder (`search`, and the picker's full-text
/// filter) for the sessions of both agents (or `--dialect`'s) of `cwd` (every
/// project's for `None`); `rebuild` starts it over, `update` brings it up to date with
/// the sessions written or changed since (calling `progress`).
pub(crate) fn open_catalog(
    g: &Global,
    asked: &[AgentArg],
    cwd: Option<&str>,
    rebuild: bool,
    update: bool,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<OpenCatalog> {
    use session::search::{SearchIndex, SessionFile};
    let Agents { dialects, others } = agents(g, asked, false)?;
    let mut files = Vec::new();
    let mut scopes = Vec::new();
    if !others.is_empty() {
        let env = discovery::ProcessEnv::from_process_env()?;
        let d = discovery_for(g, Dialect::Pi, false)?;
        for agent in others {
            match cwd {
                // A cwd's: the files listed as its (through the listing cache), each a scope.
                Some(cwd) => {
                    let listed = match d.list_others(Some(agent), Some(cwd), &mut |_| {}) {
                        Ok(listed) => listed,
                        Err(e) => {
                            eprintln!("warning: {}'s sessions left out: {}", agent.name(), crate::commands::chain(&e));
                            continue;
                        }
                    };
                    for l in listed {
                        scopes.push(l.info.path.clone());
                        files.push(SessionFile::other(l.info.path));
                    }
                }
                None => {
                    scopes.push(match agent {
                        discovery::OtherAgent::Claude => discovery::claude_projects_dir(&env),
                        _ => discovery::codex_home(&env),
                    });
                    if update {
                        match discovery::list_other_sessions(&*crate::store::current(), &env, Some(agent)) {
                            Ok(listed) => files.extend(listed.into_iter().map(|s| SessionFile::other(s.path))),
                            // Unlisted, the catalog keeps what it had of them.
                            Err(e) => {
                                eprintln!(
                                    "warning: {}'s sessions not brought up to date: {}",
                                    agent.name(),
                                    crate::commands::chain(&e)
                                );
                                scopes.pop();
                            }
                        }
                    }
                }
            }
        }
    }
    for dialect in dialects {
        let d = discovery_for(g, dialect, true)?.read_only();
        if !update {
            // The catalog answers alone: nothing is listed.
            scopes.push(d.session_scope(cwd));
            continue;
        }
        let (scope, found) = d.session_files(cwd)?;
        files.extend(found.into_iter().map(|path| SessionFile::session(path, dialect)));
        scopes.push(scope);
    }
    let name = match (&g.store, crate::store::on_files()) {
        // The stable hash of the `--store` URL names the catalog of that storage.
        (Some(url), false) => format!("search-{:016x}.db", session::search::stable_hash(url.as_bytes())),
        _ => "search.db".to_owned(),
    };
    let catalog = crate::cache::catalog(&name)?;
    let mut index = SearchIndex::new(catalog, crate::store::current());
    if rebuild {
        index.clear()?;
    }
    let report =
        if update { index.update(&files, &scopes, progress)? } else { session::search::UpdateReport::default() };
    Ok(OpenCatalog { index, scopes, report, files })
}

/// `search QUERY`: brings the catalog in the cache directory up to date with the
/// sessions in scope (both agents', or `--dialect`'s; the working directory's, or
/// every project's with `--all`), then answers from it, best match first.
pub(crate) fn search(g: &Global, o: &SearchOptions<'_>) -> Result<String> {
    let cwd = if o.all { None } else { Some(cwd_arg(o.cwd)?) };
    let mut bar = ProgressLine::new();
    let catalog =
        open_catalog(g, o.agents, cwd.as_deref(), o.rebuild, !o.no_update, &mut |done, total| bar.tick(done, total))?;
    bar.finish();
    let OpenCatalog { index, scopes, report, files } = catalog;
    note_left_out_words(o.query);
    let hits = index.search(o.query, o.limit, &scopes)?;
    let hit_json = |h: &session::search::SearchHit| {
        serde_json::json!({
            "path": h.hit.path.to_string_lossy(),
            "agent": h.hit.agent,
            "sessionId": h.hit.session_id,
            "name": h.hit.name,
            "cwd": h.hit.cwd,
            "entryId": h.hit.entry_id,
            "timestamp": h.hit.timestamp,
            "kind": h.hit.kind,
            "score": h.hit.score,
            "snippet": h.snippet,
        })
    };
    if o.jsonl {
        return Ok(hits.iter().map(|h| hit_json(h).to_string()).collect::<Vec<_>>().join("\n"));
    }
    if wants_json(g) {
        let index = serde_json::json!({
            "filesSeen": report.files_seen,
            "filesUnchanged": report.files_unchanged,
            "filesTail": report.files_tail,
            "filesWhole": report.files_whole,
            "filesRemoved": report.files_removed,
            "filesUnreadable": report.files_unreadable,
            "bytesRead": report.bytes_read,
            "entriesIndexed": report.entries_indexed,
        });
        let hits: Vec<_> = hits.iter().map(hit_json).collect();
        return Ok(serde_json::json!({ "hits": hits, "index": index }).to_string());
    }
    if hits.is_empty() && o.no_update {
        return Ok(format!(
            "no match for {:?} in the catalog (--no-update: sessions changed since are not searched)",
            o.query
        ));
    }
    if hits.is_empty() {
        return Ok(format!("no match for {:?} in {} session(s)", o.query, files.len()));
    }
    let width = crate::table::width();
    let mut out = String::new();
    for h in &hits {
        let name = h.hit.name.as_deref().unwrap_or_default();
        let head = format!(
            "{}  {}  {}  {}  {}",
            h.hit.timestamp.as_deref().unwrap_or("-"),
            h.hit.agent,
            h.hit.entry_id.as_deref().unwrap_or("-"),
            h.hit.kind,
            name
        );
        out.push_str(&crate::table::fit(head.trim_end(), width));
        out.push('\n');
        out.push_str(&crate::table::fit(&format!("  {}", h.hit.path.display()), width));
        out.push('\n');
        out.push_str(&crate::table::fit(&format!("  {}", h.snippet), width));
        out.push('\n');
    }
    out.push_str(&format!("{} hit(s) in {} session(s)", hits.len(), files.len()));
    Ok(out)
}

/// Says on stderr which words of a long query a search leaves out.
fn note_left_out_words(query: &str) {
    let q = session::history::query_words(query);
    if q.left_out > 0 {
        eprintln!(
            "note: searching for the first {} distinct words of the query; {} more left out",
            q.words.len(),
            q.left_out
        );
    }
}
