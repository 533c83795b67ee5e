//! `session pick`: a full-screen picker over the sessions of both agents.
//!
//! Three parts: the state machine (`state`: the list, the filter, the selection, the
//! modes; keys in, effects out), the drawing (`draw`, on any ratatui backend), and this
//! module, which owns the terminal and the threads. Sessions are listed on a thread
//! (from the listing cache when it is there; the working directory's project first,
//! then with `--all` every project's, streamed as they are read); the selected
//! session's transcript is read on another; the search catalog is brought up to date
//! and asked on a third, so that no key waits for a file. The terminal is given back
//! on every way out: a guard when this function returns, a panic hook before a panic's
//! message, and before the agent is started.

pub(crate) mod draw;
pub(crate) mod state;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event};
use ratatui::crossterm::terminal::{self, EnterAlternateScreen, LeaveAlternateScreen};
use ratatui::crossterm::{cursor, execute};
use session::Dialect;
use session::discovery::Progress;
use session::maintenance::{Mark, Marks};

use crate::args::{AgentArg, DialectArg, Global};
use crate::commands::Result;
use state::{Effect, FullText, Picker, Row, Target};

/// How long typing must pause before the catalog is asked.
const PAUSE: Duration = Duration::from_millis(150);

/// How many full-text hits the filter takes.
const HITS: usize = 200;

/// The picker needs a terminal on stdin and stdout.
#[derive(Debug)]
pub(crate) struct NotATerminal;

impl std::fmt::Display for NotATerminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "the picker needs a terminal on stdin and stdout; `session ls` lists sessions and `session search` finds them in scripts",
        )
    }
}

impl std::error::Error for NotATerminal {}

/// What the threads tell the picker.
enum Msg {
    Rows(Vec<Row>),
    /// Every session was listed, or why not all could be.
    Listed(std::result::Result<(), String>),
    Preview(PathBuf, String),
    Indexed(std::result::Result<(), String>),
    Hits(String, Vec<(PathBuf, String)>),
    /// A line for the status bar.
    Status(String),
}

/// Gives the terminal back: raw mode off, the main screen, the cursor shown.
fn restore() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(std::io::stdout(), LeaveAlternateScreen, cursor::Show);
}

/// Restores the terminal when dropped.
struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

/// `g` for one agent's session.
fn for_dialect(g: &Global, d: Dialect) -> Global {
    let mut g = g.clone();
    g.dialect = Some(match d {
        Dialect::Pi => DialectArg::Pi,
        Dialect::Omp => DialectArg::Omp,
    });
    g
}

/// The rows of listed sessions: archived ones left out, pinned ones marked.
fn rows_of(dialect: Dialect, listed: &[session::discovery::SessionInfo], here: bool, marks: &Marks) -> Vec<Row> {
    listed
        .iter()
        .filter_map(|s| {
            let m = marks.of(dialect, &s.id);
            (!m.archived).then(|| Row { pinned: m.pinned, ..Row::from_info(dialect, s, here) })
        })
        .collect()
}

/// Lists the sessions on a thread: this project's of each agent, then with `all`
/// every project's, sending them as they are read.
fn lister(g: Global, cwd: String, all: bool, tx: Sender<Msg>) {
    // The marks, read once: archived sessions stay out, pinned ones go first. Marks that
    // cannot be read leave the list unmarked, said on the status line.
    let marks = crate::jobs::try_read_marks(&g).unwrap_or_else(|e| {
        let _ = tx.send(Msg::Status(format!("listing without pins and archive marks: {e}")));
        Marks::default()
    });
    let list = || -> Result<()> {
        for pass in [true, false] {
            if !pass && !all {
                break;
            }
            for dialect in crate::find::dialects(&g) {
                let d = crate::find::discovery_for(&g, dialect, false)?;
                let mut sent = 0;
                let mut progress = |p: Progress<'_>| {
                    if let Some(part) = p.partial
                        && part.len() > sent
                    {
                        let rows = rows_of(dialect, &part[sent..], pass, &marks);
                        sent = part.len();
                        let _ = tx.send(Msg::Rows(rows));
                    }
                };
                let found = if pass { d.list(&cwd, None, &mut progress)? } else { d.list_all(None, &mut progress)? };
                let _ = tx.send(Msg::Rows(rows_of(dialect, &found, pass, &marks)));
            }
        }
        Ok(())
    };
    let _ = tx.send(Msg::Listed(list().map_err(|e| e.to_string())));
}

/// Reads transcripts on a thread, the newest request only.
fn previewer(g: Global, rx: Receiver<(Dialect, PathBuf)>, tx: Sender<Msg>) {
    while let Ok(mut want) = rx.recv() {
        while let Ok(newer) = rx.try_recv() {
            want = newer;
        }
        let (dialect, path) = want;
        let text = crate::commands::transcript(&for_dialect(&g, dialect), &path)
            .unwrap_or_else(|e| format!("cannot show this session: {e}"));
        if tx.send(Msg::Preview(path, text)).is_err() {
            return;
        }
    }
}

/// Brings the search catalog up to date on a thread, then answers queries, the newest
/// only. It starts on its first message (sent once the sessions are listed, so that
/// it does not compete with the first paint); an empty query asks nothing.
fn searcher(g: Global, cwd: Option<String>, rx: Receiver<String>, tx: Sender<Msg>) {
    if rx.recv().is_err() {
        return;
    }
    let catalog = match crate::find::open_catalog(
        &g,
        &[AgentArg::Pi, AgentArg::Omp],
        cwd.as_deref(),
        false,
        true,
        &mut |_, _| {},
    ) {
        Ok(c) => c,
        Err(e) => {
            let _ = tx.send(Msg::Indexed(Err(e.to_string())));
            return;
        }
    };
    let _ = tx.send(Msg::Indexed(Ok(())));
    while let Ok(mut query) = rx.recv() {
        while let Ok(newer) = rx.try_recv() {
            query = newer;
        }
        if query.is_empty() {
            continue;
        }
        let hits = match catalog.index.search(&query, HITS, &catalog.scopes) {
            Ok(hits) => hits.into_iter().map(|h| (h.hit.path, h.snippet)).collect(),
            Err(_) => Vec::new(),
        };
        if tx.send(Msg::Hits(query, hits)).is_err() {
            return;
        }
    }
}

/// The agent's program: `SESSION_PI_BIN` / `SESSION_OMP_BIN` (as `var` reads the
/// environment), else `pi` / `omp` on PATH; and the arguments that open `path`.
fn agent_command(t: &Target, var: &dyn Fn(&str) -> Option<String>) -> (String, [String; 2]) {
    let path = t.path.to_string_lossy().into_owned();
    match t.dialect {
        Dialect::Pi => (var("SESSION_PI_BIN").unwrap_or_else(|| "pi".into()), ["--session".into(), path]),
        Dialect::Omp => (var("SESSION_OMP_BIN").unwrap_or_else(|| "omp".into()), ["--resume".into(), path]),
    }
}

/// Opens the session in its agent, in the session's directory when it exists: the
/// process becomes the agent; an error is returned only when it could not start.
fn open_in_agent(t: &Target) -> Result<()> {
    use std::os::unix::process::CommandExt;
    let (bin, args) = agent_command(t, &|k| std::env::var(k).ok().filter(|v| !v.is_empty()));
    let mut cmd = std::process::Command::new(&bin);
    cmd.args(&args);
    if !t.cwd.is_empty() && Path::new(&t.cwd).is_dir() {
        cmd.current_dir(&t.cwd);
    }
    let e = cmd.exec();
    Err(format!(
        "cannot start {bin} {} {}: {e} (is {bin} on PATH? SESSION_{}_BIN names another program)",
        args[0],
        args[1],
        t.dialect.name().to_uppercase()
    )
    .into())
}

/// Writes the OSC 52 sequence that puts `text` on the terminal's clipboard.
fn osc52(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout();
    write!(out, "\x1b]52;c;{}\x07", session::store::base64::encode(text.as_bytes()))?;
    out.flush()
}

/// Does what a key asked; `Some(target)` to leave and open it.
fn perform(g: &Global, p: &mut Picker, effect: Effect, copied: &mut Vec<PathBuf>) -> Option<Target> {
    match effect {
        Effect::None | Effect::Quit => {}
        Effect::Open(t) => return Some(t),
        Effect::Copy(t) => {
            match osc52(&t.path.to_string_lossy()) {
                Ok(()) => p.set_status(format!("copied {}", t.path.display())),
                Err(e) => p.set_status(format!("cannot copy: {e}")),
            }
            copied.push(t.path);
        }
        Effect::Rename(t, name) => match crate::commands::set_name(&for_dialect(g, t.dialect), &t.path, &name) {
            Ok(Some(_)) => {
                p.renamed(&t.path, name.trim());
                p.set_status(format!("renamed to {:?}", name.trim()));
            }
            Ok(None) => p.set_status("omp refuses that name (empty once cleaned)"),
            Err(e) => p.set_status(format!("not renamed: {e}")),
        },
        Effect::Trash(t) => match crate::jobs::trash_session(&for_dialect(g, t.dialect), &t.path) {
            Ok(r) => {
                p.removed(&t.path);
                let name = r.item.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                p.set_status(format!("moved to the trash; session trash restore {name}"));
            }
            Err(e) => p.set_status(format!("not moved: {e}")),
        },
        Effect::Pin(t, on) => {
            let g = for_dialect(g, t.dialect);
            match crate::jobs::mark_file(&g, &t.path, Some(t.dialect), Mark::Pinned, on) {
                Ok(said) => {
                    p.pinned(&t.path, on);
                    p.set_status(said);
                }
                Err(e) => p.set_status(format!("not {}: {e}", if on { "pinned" } else { "unpinned" })),
            }
        }
        Effect::Archive(t) => {
            match crate::jobs::mark_file(&for_dialect(g, t.dialect), &t.path, Some(t.dialect), Mark::Archived, true) {
                Ok(_) => {
                    p.removed(&t.path);
                    p.set_status(format!("archived; session unarchive {} brings it back", t.path.display()));
                }
                Err(e) => p.set_status(format!("not archived: {e}")),
            }
        }
        Effect::Export(t) => {
            let dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
            match crate::jobs::export_to(&for_dialect(g, t.dialect), &t.path, &dir) {
                Ok(path) => p.set_status(format!("exported to {}", path.display())),
                Err(e) => p.set_status(format!("not exported: {e}")),
            }
        }
    }
    None
}

/// `session pick`: runs the picker until a key leaves it; prints the paths copied.
pub(crate) fn run(g: &Global, all: bool) -> Result<()> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(Box::new(NotATerminal));
    }
    let cwd = crate::find::cwd_arg(None)?;
    let (tx, rx) = mpsc::channel();
    {
        let (g, cwd, tx) = (g.clone(), cwd.clone(), tx.clone());
        std::thread::spawn(move || lister(g, cwd, all, tx));
    }
    let (preview_tx, preview_rx) = mpsc::channel();
    {
        let (g, tx) = (g.clone(), tx.clone());
        std::thread::spawn(move || previewer(g, preview_rx, tx));
    }
    let (search_tx, search_rx) = mpsc::channel();
    {
        let (g, scope) = (g.clone(), (!all).then(|| cwd.clone()));
        std::thread::spawn(move || searcher(g, scope, search_rx, tx));
    }

    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        hook(info);
    }));
    terminal::enable_raw_mode()?;
    let guard = Guard;
    execute!(std::io::stdout(), EnterAlternateScreen, cursor::Hide)?;
    let mut term = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
    let look = draw::Look {
        colour: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        now_ms: session::store::clock::Clock::now_ms(&session::store::clock::SystemClock),
        home: std::env::var("HOME").ok(),
    };

    let mut p = Picker::new();
    let mut copied = Vec::new();
    let mut dirty = true;
    let mut typed_at = Instant::now();
    let mut asked_query = String::new();
    let mut asked_preview: Option<PathBuf> = None;
    let open = loop {
        // Everything the threads said since the last frame; rows are added at once.
        let mut rows = Vec::new();
        while let Ok(m) = rx.try_recv() {
            dirty = true;
            match m {
                Msg::Rows(more) => rows.extend(more),
                Msg::Listed(listed) => {
                    p.loading = false;
                    let _ = search_tx.send(String::new());
                    if let Err(e) = listed {
                        p.set_status(format!("cannot list every session: {e}"));
                    }
                }
                Msg::Status(text) => p.set_status(text),
                Msg::Preview(path, text) => p.set_preview(&path, &text),
                Msg::Indexed(Ok(())) => p.full_text = FullText::Ready,
                Msg::Indexed(Err(e)) => p.full_text = FullText::Off(e),
                Msg::Hits(query, hits) => p.set_hits(&query, hits),
            }
        }
        if !rows.is_empty() {
            p.add(rows);
        }
        if let Some(r) = p.wanted_preview()
            && asked_preview.as_ref() != Some(&r.path)
        {
            asked_preview = Some(r.path.clone());
            let _ = preview_tx.send((r.dialect, r.path.clone()));
        }
        if p.full_text == FullText::Ready
            && !p.query().is_empty()
            && asked_query != p.query()
            && typed_at.elapsed() >= PAUSE
        {
            asked_query = p.query().to_owned();
            let _ = search_tx.send(asked_query.clone());
        }
        if dirty {
            term.draw(|f| draw::draw(f, &mut p, &look))?;
            dirty = false;
        }
        if !event::poll(Duration::from_millis(20))? {
            continue;
        }
        match event::read()? {
            Event::Key(k) => {
                dirty = true;
                typed_at = Instant::now();
                let effect = p.key(k);
                if effect == Effect::Quit {
                    break None;
                }
                if let Some(t) = perform(g, &mut p, effect, &mut copied) {
                    break Some(t);
                }
            }
            Event::Resize(..) => {
                term.autoresize()?;
                dirty = true;
            }
            _ => {}
        }
    };
    drop(term);
    drop(guard);
    let mut out = std::io::stdout().lock();
    for path in &copied {
        // A folder name may hold control characters: none reaches the terminal raw.
        let shown: String = path
            .display()
            .to_string()
            .chars()
            .map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() })
            .collect();
        writeln!(out, "{shown}")?;
    }
    out.flush()?;
    drop(out);
    match open {
        Some(t) => open_in_agent(&t),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn each_agent_opens_its_session_its_own_way() {
        let t = |dialect| Target { dialect, path: "/s/a b.jsonl".into(), cwd: "/w".into() };
        let none = |_: &str| None;
        assert_eq!(agent_command(&t(Dialect::Pi), &none), ("pi".into(), ["--session".into(), "/s/a b.jsonl".into()]));
        assert_eq!(agent_command(&t(Dialect::Omp), &none), ("omp".into(), ["--resume".into(), "/s/a b.jsonl".into()]));
        let stub = |k: &str| (k == "SESSION_OMP_BIN").then(|| "/tmp/stub-omp".to_owned());
        assert_eq!(agent_command(&t(Dialect::Omp), &stub).0, "/tmp/stub-omp");
        assert_eq!(agent_command(&t(Dialect::Pi), &stub).0, "pi");
    }

    /// `e` writes the export beside the working directory under a free name, never
    /// over a file; `d` moves nothing outside the agents' folders.
    #[test]
    fn export_takes_a_free_name_and_trash_stays_in_the_agents_folders() -> Result<()> {
        let dir = std::env::temp_dir().join(format!("session-pick-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let file = dir.join("s.jsonl");
        std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/sample/pi.jsonl"), &file)?;
        let g = crate::args::Cli::try_parse_from(["session", "--dialect", "pi", "pick"])?.global;
        let first = crate::jobs::export_to(&g, &file, &dir)?;
        let second = crate::jobs::export_to(&g, &file, &dir)?;
        let id = crate::commands::open(&g, &file)?.session_id().to_owned();
        assert_eq!(first, dir.join(format!("session-{id}.md")));
        assert_eq!(second, dir.join(format!("session-{id}-2.md")));
        let text = std::fs::read_to_string(&first)?;
        assert!(!text.is_empty());
        assert_eq!(text, std::fs::read_to_string(&second)?);
        let refused = crate::jobs::trash_session(&g, &file);
        assert!(refused.is_err(), "{refused:?}");
        assert!(file.exists());
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
