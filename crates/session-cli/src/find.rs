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
use session::model::json::write_js_str;
use session::model::timestamp::format_iso_millis;

use crate::args::{Global, HistoryCommand};
use crate::commands::{Result, wants_json};

fn discovery_for(g: &Global, no_cache: bool) -> Result<Discovery> {
    let env = discovery::Env::from_process_env()?;
    let dialect = g.dialect.map_or(Dialect::Pi, Dialect::from);
    let discovery = Discovery::new(AgentDirs::for_dialect(dialect, &env, g.omp_home.into()));
    if no_cache || env.var("SESSION_NO_CACHE").is_some_and(|v| v != "0") {
        return Ok(discovery);
    }
    Ok(discovery.with_list_cache(Discovery::default_cache_dir(&env), 64))
}

fn cwd_arg(cwd: Option<&str>) -> Result<String> {
    match cwd {
        Some(c) => Ok(c.to_owned()),
        None => Ok(std::env::current_dir()?.to_string_lossy().into_owned()),
    }
}

/// Draws a progress line on stderr when it is a terminal and the scan takes a while.
struct ProgressLine {
    start: Instant,
    enabled: bool,
    drawn: bool,
}

impl ProgressLine {
    fn new() -> ProgressLine {
        ProgressLine { start: Instant::now(), enabled: std::io::stderr().is_terminal(), drawn: false }
    }

    fn update(&mut self, p: &Progress<'_>) {
        if !self.enabled || self.start.elapsed() < Duration::from_millis(200) {
            return;
        }
        if p.loaded == p.total || p.loaded.is_multiple_of(25) {
            let width = 30;
            let done = (p.loaded * width).checked_div(p.total).unwrap_or(width).min(width);
            let bar: String = "#".repeat(done) + &" ".repeat(width - done);
            let _ = write!(std::io::stderr(), "\rscanning [{bar}] {}/{}", p.loaded, p.total);
            self.drawn = true;
        }
    }

    fn finish(&mut self) {
        if self.drawn {
            let _ = write!(std::io::stderr(), "\r{}\r", " ".repeat(60));
        }
    }
}

pub(crate) fn ls(g: &Global, dir: Option<&Path>, cwd: Option<&str>, all: bool, no_cache: bool) -> Result<String> {
    let d = discovery_for(g, no_cache)?;
    let cwd = cwd_arg(cwd)?;
    let mut bar = ProgressLine::new();
    let mut skipped: Vec<PathBuf> = Vec::new();
    let mut progress = |p: Progress<'_>| {
        if skipped.is_empty() && !p.skipped.is_empty() {
            skipped = p.skipped.to_vec();
        }
        bar.update(&p);
    };
    let sessions = if all { d.list_all(dir, &mut progress)? } else { d.list(&cwd, dir, &mut progress)? };
    bar.finish();
    for s in &skipped {
        eprintln!("note: skipped {}: not a regular file", s.display());
    }
    if wants_json(g) {
        return Ok(discovery::sessions_to_json(d.dialect(), &sessions));
    }
    Ok(table(&sessions))
}

fn shorten(s: &str, max: usize) -> String {
    let one_line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut out: String = one_line.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn table(sessions: &[SessionInfo]) -> String {
    if sessions.is_empty() {
        return "no sessions".into();
    }
    let mut out = format!("{:<24}  {:<36}  {:>5}  {}\n", "MODIFIED (UTC)", "ID", "MSGS", "NAME / FIRST MESSAGE");
    for s in sessions {
        let modified = format_iso_millis(s.modified);
        let name = s.name.as_deref().or(s.title.as_deref()).unwrap_or(&s.first_message);
        out.push_str(&format!(
            "{:<24}  {:<36}  {:>5}  {}\n",
            &modified[..modified.len().min(24)],
            shorten(&s.id, 36),
            s.message_count,
            shorten(name, 60)
        ));
    }
    out.push_str(&format!("{} session(s)", sessions.len()));
    out
}

pub(crate) fn resume(
    g: &Global,
    arg: &str,
    cwd: Option<&str>,
    session_dir: Option<&Path>,
    no_cache: bool,
) -> Result<String> {
    let d = discovery_for(g, no_cache)?;
    let cwd = cwd_arg(cwd)?;
    let (path, scope): (PathBuf, &str) = match d.resolve_resumable(arg, &cwd, session_dir)? {
        ResumeTarget::Path(p) => (p, "path"),
        ResumeTarget::Session { session, scope } => {
            (session.path, if scope == discovery::Scope::Local { "local" } else { "global" })
        }
        ResumeTarget::NotFound => {
            return Err(format!("no session matches {arg:?}; try `session ls --all` to see every session").into());
        }
    };
    if !wants_json(g) {
        return Ok(path.display().to_string());
    }
    let mut out = String::from("{\"path\":");
    write_js_str(&mut out, &path.to_string_lossy());
    out.push_str(",\"scope\":");
    write_js_str(&mut out, scope);
    out.push('}');
    Ok(out)
}

pub(crate) fn history(g: &Global, command: &HistoryCommand) -> Result<String> {
    let HistoryCommand::Search { query, limit, cwd } = command;
    let dialect = g.dialect.map_or(Dialect::Omp, Dialect::from);
    let env = discovery::Env::from_process_env()?;
    let dirs = AgentDirs::for_dialect(dialect, &env, g.omp_home.into());
    let path = history_db_path(&dirs.agent_dir);
    if !path.exists() {
        return Err(format!("no prompt history at {}", path.display()).into());
    }
    let opened = HistoryStore::open(&path, HistoryOptions::default())?;
    for notice in &opened.notices {
        eprintln!("note: {notice:?}");
    }
    let scope = match cwd {
        Some(c) => HistoryScope::Cwd(c.clone()),
        None => HistoryScope::Global,
    };
    let rows = opened.store.search(query, *limit, &scope)?;
    if !wants_json(g) {
        let mut out = String::new();
        for r in &rows {
            out.push_str(&format!("{}  {}\n", format_iso_millis(r.created_at * 1000), shorten(&r.prompt, 100)));
        }
        out.push_str(&format!("{} prompt(s)", rows.len()));
        return Ok(out);
    }
    let mut out = String::from("[");
    for (i, r) in rows.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"prompt\":");
        write_js_str(&mut out, &r.prompt);
        out.push_str(&format!(",\"createdAt\":{},\"useCount\":{}", r.created_at, r.use_count));
        for (k, v) in [("cwd", &r.cwd), ("sessionId", &r.session_id)] {
            if let Some(v) = v {
                out.push_str(&format!(",\"{k}\":"));
                write_js_str(&mut out, v);
            }
        }
        out.push('}');
    }
    out.push(']');
    Ok(out)
}
