//! The picker's state machine: the sessions, the filter, the selection and the modes.
//! Keys go in, [`Effect`]s come out; it never touches a terminal or a file, so that it
//! is tested and measured without either.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use session::Dialect;

/// How many characters of a first message the filter looks at (the list shows fewer).
const HAY_CHARS: usize = 240;

/// One session in the list.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    /// Whose session.
    pub(crate) dialect: Dialect,
    /// The session file.
    pub(crate) path: PathBuf,
    /// pi's name or omp's title.
    pub(crate) name: Option<String>,
    /// The first user text.
    pub(crate) first_message: String,
    /// The header's cwd.
    pub(crate) cwd: String,
    /// The last activity as the agent lists it (epoch ms).
    pub(crate) modified: Option<i64>,
    /// How many messages.
    pub(crate) messages: u64,
    /// A session of the working directory's project (listed first).
    pub(crate) here: bool,
    /// Pinned (`session pin`; listed before the rest).
    pub(crate) pinned: bool,
}

impl Row {
    /// The row of a listed session.
    pub(crate) fn from_info(dialect: Dialect, s: &session::discovery::SessionInfo, here: bool) -> Row {
        Row {
            dialect,
            path: s.path.clone(),
            name: s.name.clone().or_else(|| s.title.clone()),
            first_message: s.first_message.clone(),
            cwd: s.cwd.clone(),
            modified: s.modified,
            messages: s.message_count,
            here,
            pinned: false,
        }
    }

    /// What the list shows for it: the name, else the first message.
    pub(crate) fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.first_message)
    }
}

/// The list's order: pinned sessions, then this project's, then the newest first.
fn order(a: &Row, b: &Row) -> std::cmp::Ordering {
    b.pinned
        .cmp(&a.pinned)
        .then_with(|| b.here.cmp(&a.here))
        .then_with(|| b.modified.cmp(&a.modified))
        .then_with(|| a.path.cmp(&b.path))
}

/// The lowercased text a row is filtered by.
#[derive(Clone, Debug)]
struct Hay {
    name: Vec<char>,
    first: Vec<char>,
}

impl Hay {
    fn of(r: &Row) -> Hay {
        Hay { name: r.name.as_deref().map_or_else(Vec::new, lower), first: lower(&r.first_message) }
    }
}

/// The first [`HAY_CHARS`] characters of `s`, lowercased (ASCII without the Unicode
/// tables: most text is ASCII, and this is most of the work of adding 10,000 rows).
fn lower(s: &str) -> Vec<char> {
    let mut out = Vec::with_capacity(s.len().min(HAY_CHARS));
    for c in s.chars().take(HAY_CHARS) {
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// A row the filter kept.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Match {
    /// Its index in [`Picker::rows`].
    pub(crate) row: usize,
    /// Higher is better.
    pub(crate) score: i64,
    /// The full-text hit's snippet, when the catalog found the query in it.
    pub(crate) snippet: Option<String>,
}

/// Scores `hay` for `needle` (both lowercased): every character of the needle in order
/// (a subsequence), more for runs, word starts and an early start; `None` when it is
/// not a subsequence.
pub(crate) fn fuzzy(needle: &[char], hay: &[char]) -> Option<i64> {
    if needle.is_empty() {
        return Some(0);
    }
    let mut score = 0i64;
    let mut at = 0usize;
    let mut last: Option<usize> = None;
    for &c in needle {
        let found = hay[at..].iter().position(|&h| h == c)? + at;
        score += 16;
        match last {
            Some(l) if found == l + 1 => score += 12,
            Some(l) => score -= i64::try_from((found - l - 1).min(8)).unwrap_or(8),
            None => score -= i64::try_from(found.min(16)).unwrap_or(16),
        }
        if found == 0 || !hay[found - 1].is_alphanumeric() {
            score += 8;
        }
        last = Some(found);
        at = found + 1;
    }
    Some(score)
}

/// What the keys do now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Letters are commands; other printable keys start a filter.
    List,
    /// Typing goes into the filter.
    Filter,
    /// Typing goes into the new name of the session chosen when `r` was pressed (rows
    /// that stream in meanwhile do not change which).
    Rename(Target, String),
    /// `y` moves the session chosen when `d` was pressed (shown by its label) to the
    /// trash, anything else keeps it.
    ConfirmTrash(Target, String),
    /// The keys are shown; any key closes them.
    Help,
}

/// What a key asks of the terminal side; the picker learns the outcome through
/// [`Picker::removed`], [`Picker::renamed`] and [`Picker::set_status`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Nothing beyond a redraw.
    None,
    /// Leave the picker.
    Quit,
    /// Leave the picker and open the session in its agent.
    Open(Target),
    /// Copy the path to the terminal's clipboard.
    Copy(Target),
    /// Give the session this name.
    Rename(Target, String),
    /// Move the session to the trash.
    Trash(Target),
    /// Export the session to a Markdown file.
    Export(Target),
    /// Pin the session (`true`) or take its pin off.
    Pin(Target, bool),
    /// Put the session in the archive (out of the list).
    Archive(Target),
}

/// The session an [`Effect`] is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    /// Whose session.
    pub(crate) dialect: Dialect,
    /// The session file.
    pub(crate) path: PathBuf,
    /// The header's cwd.
    pub(crate) cwd: String,
}

/// A key's meaning in the list (and, for moves, in every mode). Another action (pin,
/// archive) is a variant here, a line in [`Picker::action`], and an [`Effect`] that
/// `pick::perform` carries out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    PreviewUp,
    PreviewDown,
    TogglePreview,
    Open,
    Copy,
    Rename,
    Trash,
    Export,
    Pin,
    Archive,
    Help,
    Quit,
    Back,
    Filter,
    Type(char),
    Backspace,
    Ignore,
}

/// The preview of the selected session.
#[derive(Clone, Debug, Default)]
pub(crate) struct Preview {
    /// The session it shows (or is being loaded for).
    pub(crate) path: Option<PathBuf>,
    /// Its lines, once loaded.
    pub(crate) lines: Option<Vec<String>>,
    /// The first line shown.
    pub(crate) scroll: usize,
}

/// Whether full-text hits can be had.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FullText {
    /// The catalog is being brought up to date.
    Indexing,
    /// Queries are answered.
    Ready,
    /// Not available (why).
    Off(String),
}

/// The picker.
#[derive(Clone, Debug)]
pub(crate) struct Picker {
    rows: Vec<Row>,
    hay: Vec<Hay>,
    paths: HashSet<PathBuf>,
    /// Sessions trashed or archived here: a listing still under way does not bring
    /// them back.
    gone: HashSet<PathBuf>,
    query: String,
    matches: Vec<Match>,
    /// The query whose fuzzy matches `narrowed` holds, over rows as they are now.
    narrowed: Option<(String, Vec<usize>)>,
    /// Full-text hits for `query`: path → snippet.
    hits: HashMap<PathBuf, String>,
    selected: usize,
    selected_path: Option<PathBuf>,
    /// Whether a key moved the selection (until then it stays on the first row while
    /// sessions stream in).
    moved: bool,
    top: usize,
    page: usize,
    mode: Mode,
    status: Option<String>,
    /// The preview.
    pub(crate) preview: Preview,
    /// On a short terminal: the preview in place of the list.
    pub(crate) show_preview: bool,
    /// Whether more sessions may still come.
    pub(crate) loading: bool,
    /// Whether full-text hits can be had.
    pub(crate) full_text: FullText,
}

impl Default for Picker {
    fn default() -> Picker {
        Picker::new()
    }
}

impl Picker {
    /// An empty picker, waiting for sessions.
    pub(crate) fn new() -> Picker {
        Picker {
            rows: Vec::new(),
            hay: Vec::new(),
            paths: HashSet::new(),
            gone: HashSet::new(),
            query: String::new(),
            matches: Vec::new(),
            narrowed: None,
            hits: HashMap::new(),
            selected: 0,
            selected_path: None,
            moved: false,
            top: 0,
            page: 10,
            mode: Mode::List,
            status: None,
            preview: Preview::default(),
            show_preview: false,
            loading: true,
            full_text: FullText::Indexing,
        }
    }

    /// Every session, this project's first, then newest first.
    pub(crate) fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// The rows the filter keeps, best first.
    pub(crate) fn matches(&self) -> &[Match] {
        &self.matches
    }

    /// The filter.
    pub(crate) fn query(&self) -> &str {
        &self.query
    }

    /// The mode.
    pub(crate) fn mode(&self) -> &Mode {
        &self.mode
    }

    /// The line shown at the bottom until the next key.
    pub(crate) fn status(&self) -> Option<&str> {
        self.status.as_deref()
    }

    /// Says something at the bottom.
    pub(crate) fn set_status(&mut self, text: impl Into<String>) {
        self.status = Some(text.into());
    }

    /// The index in [`Picker::matches`] of the selected row.
    pub(crate) fn selected(&self) -> usize {
        self.selected
    }

    /// The first match shown.
    pub(crate) fn top(&self) -> usize {
        self.top
    }

    /// The selected session.
    pub(crate) fn selected_row(&self) -> Option<&Row> {
        self.matches.get(self.selected).map(|m| &self.rows[m.row])
    }

    /// The selected match.
    pub(crate) fn selected_match(&self) -> Option<&Match> {
        self.matches.get(self.selected)
    }

    /// Adds sessions (one already listed is left as it is), keeping the order and the
    /// selection.
    pub(crate) fn add(&mut self, rows: Vec<Row>) {
        let before = self.rows.len();
        for r in rows {
            if !self.gone.contains(&r.path) && self.paths.insert(r.path.clone()) {
                self.hay.push(Hay::of(&r));
                self.rows.push(r);
            }
        }
        if self.rows.len() > before {
            self.resort();
        }
    }

    /// Puts the rows in the list's order and filters them again.
    fn resort(&mut self) {
        // Each row keeps its filter text: only the new ones were lowercased.
        let mut both: Vec<(Row, Hay)> = std::mem::take(&mut self.rows).into_iter().zip(self.hay.drain(..)).collect();
        both.sort_by(|(a, _), (b, _)| order(a, b));
        (self.rows, self.hay) = both.into_iter().unzip();
        self.narrowed = None;
        self.refilter();
    }

    /// Forgets a session (moved to the trash).
    pub(crate) fn removed(&mut self, path: &Path) {
        let Some(i) = self.rows.iter().position(|r| r.path == path) else { return };
        self.rows.remove(i);
        self.hay.remove(i);
        self.paths.remove(path);
        self.gone.insert(path.to_path_buf());
        self.narrowed = None;
        if self.selected_path.as_deref() == Some(path) {
            // The next one takes its place.
            self.selected_path = None;
        }
        self.refilter();
    }

    /// Shows a session pinned (`on`) or unpinned, in its new place.
    pub(crate) fn pinned(&mut self, path: &Path, on: bool) {
        if let Some(i) = self.rows.iter().position(|r| r.path == path) {
            self.rows[i].pinned = on;
            self.resort();
        }
    }

    /// Shows a session's new name.
    pub(crate) fn renamed(&mut self, path: &Path, name: &str) {
        if let Some(i) = self.rows.iter().position(|r| r.path == path) {
            self.rows[i].name = Some(name.to_owned());
            self.hay[i] = Hay::of(&self.rows[i]);
            self.narrowed = None;
            self.refilter();
        }
    }

    /// Takes the catalog's hits for `query` (ignored when the filter has changed since).
    pub(crate) fn set_hits(&mut self, query: &str, hits: Vec<(PathBuf, String)>) {
        if query != self.query {
            return;
        }
        self.hits = hits.into_iter().collect();
        self.refilter();
    }

    /// The session whose preview is wanted: the selected one.
    pub(crate) fn wanted_preview(&self) -> Option<&Row> {
        self.selected_row()
    }

    /// Takes a preview (ignored when it is no longer the selected session's).
    pub(crate) fn set_preview(&mut self, path: &Path, text: &str) {
        if self.selected_row().is_some_and(|r| r.path == path) {
            self.preview = Preview {
                path: Some(path.to_owned()),
                lines: Some(text.lines().map(str::to_owned).collect()),
                scroll: 0,
            };
        }
    }

    /// Tells how many rows the list shows, for paging and scrolling.
    pub(crate) fn set_page(&mut self, rows: usize) {
        self.page = rows.max(1);
        if self.selected < self.top {
            self.top = self.selected;
        } else if self.selected >= self.top + self.page {
            self.top = self.selected + 1 - self.page;
        }
        self.top = self.top.min(self.matches.len().saturating_sub(self.page));
    }

    /// Recomputes the matches for the filter, keeping the selected session selected.
    fn refilter(&mut self) {
        let needle = lower(&self.query);
        if needle.is_empty() {
            self.matches = (0..self.rows.len()).map(|row| Match { row, score: 0, snippet: None }).collect();
        } else {
            // A longer filter only narrows: look at what the shorter one kept.
            let candidates: Vec<usize> = match &self.narrowed {
                Some((q, rows)) if self.query.starts_with(q.as_str()) => rows.clone(),
                _ => (0..self.rows.len()).collect(),
            };
            let mut matches: Vec<Match> = candidates
                .into_iter()
                .filter_map(|row| {
                    let h = &self.hay[row];
                    let name = fuzzy(&needle, &h.name).map(|s| s + 32);
                    let first = fuzzy(&needle, &h.first);
                    name.max(first).map(|score| Match { row, score, snippet: None })
                })
                .collect();
            self.narrowed = Some((self.query.clone(), matches.iter().map(|m| m.row).collect()));
            if !self.hits.is_empty() {
                let mut seen = HashSet::new();
                for m in &mut matches {
                    if let Some(s) = self.hits.get(&self.rows[m.row].path) {
                        m.snippet = Some(s.clone());
                        m.score += 64;
                        seen.insert(m.row);
                    }
                }
                for (row, r) in self.rows.iter().enumerate() {
                    if !seen.contains(&row)
                        && let Some(s) = self.hits.get(&r.path)
                    {
                        matches.push(Match { row, score: 8, snippet: Some(s.clone()) });
                    }
                }
            }
            matches.sort_by(|a, b| b.score.cmp(&a.score).then(a.row.cmp(&b.row)));
            self.matches = matches;
        }
        let at = match (&self.selected_path, self.moved) {
            (_, false) => Some(0),
            (Some(p), true) => self.matches.iter().position(|m| &self.rows[m.row].path == p),
            (None, true) => None,
        };
        self.selected = at.unwrap_or(self.selected.min(self.matches.len().saturating_sub(1)));
        self.note_selection();
        self.set_page(self.page);
    }

    fn note_selection(&mut self) {
        self.selected_path = self.selected_row().map(|r| r.path.clone());
        if self.preview.path != self.selected_path {
            self.preview = Preview { path: self.selected_path.clone(), lines: None, scroll: 0 };
        }
    }

    fn set_query(&mut self, query: String) {
        if query != self.query {
            // A new filter starts at its best match.
            self.moved = false;
            self.query = query;
            self.hits.clear();
            self.refilter();
        }
    }

    fn move_to(&mut self, i: usize) {
        self.moved = true;
        self.selected = i.min(self.matches.len().saturating_sub(1));
        self.note_selection();
        self.set_page(self.page);
    }

    fn target(&self) -> Option<Target> {
        self.selected_row().map(|r| Target { dialect: r.dialect, path: r.path.clone(), cwd: r.cwd.clone() })
    }

    fn action(&self, k: &KeyEvent) -> Action {
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        match k.code {
            KeyCode::Char('c') if ctrl => Action::Quit,
            KeyCode::Char('n') if ctrl => Action::Down,
            KeyCode::Char('p') if ctrl => Action::Up,
            KeyCode::Char('d') if ctrl => Action::PreviewDown,
            KeyCode::Char('u') if ctrl => Action::PreviewUp,
            _ if ctrl => Action::Ignore,
            KeyCode::Up => Action::Up,
            KeyCode::Down => Action::Down,
            KeyCode::PageUp => Action::PageUp,
            KeyCode::PageDown => Action::PageDown,
            KeyCode::Home => Action::Home,
            KeyCode::End => Action::End,
            KeyCode::Tab => Action::TogglePreview,
            KeyCode::Enter => Action::Open,
            KeyCode::Esc => Action::Back,
            KeyCode::Backspace => Action::Backspace,
            KeyCode::Delete if self.mode == Mode::List => Action::Trash,
            KeyCode::Char(c) if self.mode == Mode::Filter => Action::Type(c),
            KeyCode::Char('y' | 'c') => Action::Copy,
            KeyCode::Char('r') => Action::Rename,
            KeyCode::Char('d') => Action::Trash,
            KeyCode::Char('e') => Action::Export,
            // Capitals: a filter rarely starts with one.
            KeyCode::Char('P') => Action::Pin,
            KeyCode::Char('A') => Action::Archive,
            KeyCode::Char('?') => Action::Help,
            KeyCode::Char('q') => Action::Quit,
            KeyCode::Char('/') => Action::Filter,
            KeyCode::Char(c) => Action::Type(c),
            _ => Action::Ignore,
        }
    }

    /// Handles a key.
    pub(crate) fn key(&mut self, k: KeyEvent) -> Effect {
        if k.kind == KeyEventKind::Release {
            return Effect::None;
        }
        self.status = None;
        match self.mode.clone() {
            Mode::Help => {
                self.mode = Mode::List;
                Effect::None
            }
            Mode::ConfirmTrash(t, _) => {
                self.mode = Mode::List;
                match k.code {
                    KeyCode::Char('y' | 'Y') => Effect::Trash(t),
                    _ => {
                        self.status = Some("nothing moved to the trash".into());
                        Effect::None
                    }
                }
            }
            Mode::Rename(t, mut name) => match k.code {
                KeyCode::Enter => {
                    self.mode = Mode::List;
                    match name.trim().is_empty() {
                        false => Effect::Rename(t, name),
                        true => {
                            self.status = Some("not renamed (an empty name)".into());
                            Effect::None
                        }
                    }
                }
                KeyCode::Esc => {
                    self.mode = Mode::List;
                    self.status = Some("not renamed".into());
                    Effect::None
                }
                KeyCode::Backspace => {
                    name.pop();
                    self.mode = Mode::Rename(t, name);
                    Effect::None
                }
                KeyCode::Char(c) if !k.modifiers.contains(KeyModifiers::CONTROL) => {
                    name.push(c);
                    self.mode = Mode::Rename(t, name);
                    Effect::None
                }
                KeyCode::Char('c') => {
                    self.mode = Mode::List;
                    Effect::None
                }
                _ => Effect::None,
            },
            Mode::List | Mode::Filter => self.apply(self.action(&k)),
        }
    }

    fn apply(&mut self, a: Action) -> Effect {
        let last = self.matches.len().saturating_sub(1);
        match a {
            Action::Up => self.move_to(self.selected.saturating_sub(1)),
            Action::Down => self.move_to((self.selected + 1).min(last)),
            Action::PageUp => self.move_to(self.selected.saturating_sub(self.page)),
            Action::PageDown => self.move_to((self.selected + self.page).min(last)),
            Action::Home => self.move_to(0),
            Action::End => self.move_to(last),
            Action::PreviewDown => self.preview.scroll += self.page.div_ceil(2),
            Action::PreviewUp => self.preview.scroll = self.preview.scroll.saturating_sub(self.page.div_ceil(2)),
            Action::TogglePreview => self.show_preview = !self.show_preview,
            Action::Help => self.mode = Mode::Help,
            Action::Quit => return Effect::Quit,
            Action::Filter => self.mode = Mode::Filter,
            Action::Type(c) => {
                self.mode = Mode::Filter;
                let mut q = self.query.clone();
                q.push(c);
                self.set_query(q);
            }
            Action::Backspace => {
                let mut q = self.query.clone();
                q.pop();
                self.set_query(q);
            }
            Action::Back => match self.mode {
                Mode::Filter => self.mode = Mode::List,
                _ if !self.query.is_empty() => self.set_query(String::new()),
                _ => return Effect::Quit,
            },
            Action::Ignore => {}
            Action::Open
            | Action::Copy
            | Action::Rename
            | Action::Trash
            | Action::Export
            | Action::Pin
            | Action::Archive => {
                let Some(t) = self.target() else {
                    self.status = Some("no session selected".into());
                    return Effect::None;
                };
                return match a {
                    Action::Open => Effect::Open(t),
                    Action::Copy => Effect::Copy(t),
                    Action::Export => Effect::Export(t),
                    Action::Pin => Effect::Pin(t, !self.selected_row().is_some_and(|r| r.pinned)),
                    Action::Archive => Effect::Archive(t),
                    Action::Rename => {
                        let name = self.selected_row().and_then(|r| r.name.clone()).unwrap_or_default();
                        self.mode = Mode::Rename(t, name);
                        Effect::None
                    }
                    _ => {
                        let label = self.selected_row().map(|r| r.label().to_owned()).unwrap_or_default();
                        self.mode = Mode::ConfirmTrash(t, label);
                        Effect::None
                    }
                };
            }
        }
        Effect::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(k: u64, name: Option<&str>, first: &str, here: bool) -> Row {
        Row {
            dialect: if k.is_multiple_of(2) { Dialect::Pi } else { Dialect::Omp },
            path: PathBuf::from(format!("/s/{k}.jsonl")),
            name: name.map(str::to_owned),
            first_message: first.to_owned(),
            cwd: "/work".into(),
            modified: Some(1_000_000 + i64::try_from(k).unwrap_or(0)),
            messages: k,
            here,
            pinned: false,
        }
    }

    fn key(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    fn typed(p: &mut Picker, s: &str) {
        for c in s.chars() {
            p.key(key(KeyCode::Char(c)));
        }
    }

    fn labels(p: &Picker) -> Vec<String> {
        p.matches().iter().map(|m| p.rows()[m.row].label().to_owned()).collect()
    }

    #[test]
    fn fuzzy_scores_runs_and_word_starts_higher() {
        let c = |s: &str| s.chars().collect::<Vec<_>>();
        assert_eq!(fuzzy(&c("xyz"), &c("the config loader")), None);
        assert_eq!(fuzzy(&c(""), &c("anything")), Some(0));
        let run = fuzzy(&c("conf"), &c("fix the config loader")).unwrap_or(i64::MIN);
        let spread = fuzzy(&c("conf"), &c("count of nothing fun")).unwrap_or(i64::MIN);
        assert!(run > spread, "{run} <= {spread}");
        assert!(fuzzy(&c("cl"), &c("config loader")) > fuzzy(&c("cl"), &c("xcxxl")));
    }

    #[test]
    fn this_project_first_then_newest() {
        let mut p = Picker::new();
        p.add(vec![
            row(1, None, "old here", true),
            row(5, None, "new elsewhere", false),
            row(3, None, "new here", true),
        ]);
        assert_eq!(labels(&p), ["new here", "old here", "new elsewhere"]);
    }

    #[test]
    fn pinned_sessions_come_first_and_shift_p_and_shift_a_mark_the_selected_one() {
        let mut p = Picker::new();
        p.add(vec![
            row(1, None, "old here", true),
            Row { pinned: true, ..row(2, None, "pinned elsewhere", false) },
            row(3, None, "new here", true),
        ]);
        assert_eq!(labels(&p), ["pinned elsewhere", "new here", "old here"]);
        // The selection is "pinned elsewhere": `p` takes its pin off.
        let t = |k: u64, dialect| Target { dialect, path: format!("/s/{k}.jsonl").into(), cwd: "/work".into() };
        assert_eq!(p.key(key(KeyCode::Char('P'))), Effect::Pin(t(2, Dialect::Pi), false));
        p.pinned(Path::new("/s/2.jsonl"), false);
        assert_eq!(labels(&p), ["new here", "old here", "pinned elsewhere"]);
        // On "new here", `p` pins it; `a` archives it.
        assert_eq!(p.key(key(KeyCode::Char('P'))), Effect::Pin(t(3, Dialect::Omp), true));
        assert_eq!(p.key(key(KeyCode::Char('A'))), Effect::Archive(t(3, Dialect::Omp)));
        p.removed(Path::new("/s/3.jsonl"));
        assert_eq!(labels(&p), ["old here", "pinned elsewhere"]);
    }

    #[test]
    fn typing_filters_by_name_and_first_message() {
        let mut p = Picker::new();
        p.add(vec![
            row(1, Some("Fix the config loader"), "hello", true),
            row(2, None, "write a config parser", true),
            row(3, None, "unrelated", true),
        ]);
        // `c` copies in the list; `/` starts a filter, as any other letter does.
        typed(&mut p, "/cfg");
        assert_eq!(p.mode(), &Mode::Filter);
        assert_eq!(labels(&p), ["Fix the config loader", "write a config parser"]);
        typed(&mut p, "l");
        assert_eq!(labels(&p), ["Fix the config loader"]);
        p.key(key(KeyCode::Backspace));
        assert_eq!(labels(&p).len(), 2, "a shorter filter widens again");
        // Letters that are commands in the list are text in the filter.
        typed(&mut p, "q");
        assert_eq!(p.query(), "cfgq");
        assert!(p.matches().is_empty());
        // Esc leaves the filter, a second Esc clears it, a third quits.
        p.key(key(KeyCode::Esc));
        assert_eq!(p.mode(), &Mode::List);
        assert_eq!(p.key(key(KeyCode::Esc)), Effect::None);
        assert_eq!(p.matches().len(), 3);
        assert_eq!(p.key(key(KeyCode::Esc)), Effect::Quit);
    }

    #[test]
    fn full_text_hits_join_the_matches_with_their_snippet() {
        let mut p = Picker::new();
        p.add(vec![row(1, Some("alpha"), "a", true), row(2, Some("beta"), "b", true)]);
        typed(&mut p, "alp");
        assert_eq!(labels(&p), ["alpha"]);
        // Hits for an older filter are dropped.
        p.set_hits("al", vec![(PathBuf::from("/s/2.jsonl"), "said alpine".into())]);
        assert_eq!(labels(&p), ["alpha"]);
        p.set_hits("alp", vec![(PathBuf::from("/s/2.jsonl"), "said alpine".into())]);
        assert_eq!(labels(&p), ["alpha", "beta"]);
        assert_eq!(p.matches()[1].snippet.as_deref(), Some("said alpine"));
        typed(&mut p, "h");
        assert_eq!(labels(&p), ["alpha"], "a new filter forgets the old hits");
    }

    #[test]
    fn the_selection_stays_on_its_session_as_the_list_changes() {
        let mut p = Picker::new();
        p.add(vec![row(10, None, "ten", true), row(8, None, "eight", true)]);
        p.key(key(KeyCode::Down));
        assert_eq!(p.selected_row().map(Row::label), Some("eight"));
        // Newer sessions stream in above it.
        p.add(vec![row(12, None, "twelve", true), row(11, None, "eleven", true)]);
        assert_eq!(p.selected_row().map(Row::label), Some("eight"));
        assert_eq!(p.selected(), 3);
        // It goes: the next one is selected, never past the end.
        p.removed(Path::new("/s/8.jsonl"));
        assert_eq!(p.selected_row().map(Row::label), Some("ten"));
        p.removed(Path::new("/s/10.jsonl"));
        assert_eq!(p.selected_row().map(Row::label), Some("eleven"));
        // A filter that drops it selects within what is left.
        typed(&mut p, "twe");
        assert_eq!(p.selected_row().map(Row::label), Some("twelve"));
        typed(&mut p, "zzz");
        assert!(p.selected_row().is_none());
        assert_eq!(p.key(key(KeyCode::Enter)), Effect::None);
        assert_eq!(p.status(), Some("no session selected"));
    }

    #[test]
    fn until_a_key_moves_it_the_selection_is_the_first_row() {
        let mut p = Picker::new();
        p.add(vec![row(5, None, "five", true)]);
        p.add(vec![row(9, None, "nine", true)]);
        assert_eq!(p.selected_row().map(Row::label), Some("nine"));
    }

    #[test]
    fn paging_keeps_the_selection_in_view() {
        let mut p = Picker::new();
        p.add((0..100).map(|k| row(k, None, &format!("m{k}"), true)).collect());
        p.set_page(10);
        p.key(key(KeyCode::PageDown));
        assert_eq!((p.selected(), p.top()), (10, 1));
        p.key(key(KeyCode::End));
        assert_eq!((p.selected(), p.top()), (99, 90));
        p.key(key(KeyCode::Home));
        assert_eq!((p.selected(), p.top()), (0, 0));
        p.key(KeyEvent::new(KeyCode::Char('n'), KeyModifiers::CONTROL));
        assert_eq!(p.selected(), 1);
        p.key(KeyEvent::new(KeyCode::Char('p'), KeyModifiers::CONTROL));
        assert_eq!(p.selected(), 0);
    }

    #[test]
    fn trash_asks_first() {
        let mut p = Picker::new();
        p.add(vec![row(1, None, "one", true)]);
        let t = Target { dialect: Dialect::Omp, path: "/s/1.jsonl".into(), cwd: "/work".into() };
        assert_eq!(p.key(key(KeyCode::Char('d'))), Effect::None);
        assert_eq!(p.mode(), &Mode::ConfirmTrash(t.clone(), "one".into()));
        assert_eq!(p.key(key(KeyCode::Char('n'))), Effect::None);
        assert_eq!(p.status(), Some("nothing moved to the trash"));
        assert_eq!(p.key(key(KeyCode::Delete)), Effect::None);
        assert_eq!(p.key(key(KeyCode::Char('y'))), Effect::Trash(t.clone()));
        assert_eq!(p.mode(), &Mode::List);
        assert_eq!(p.key(key(KeyCode::Enter)), Effect::Open(t.clone()));
        assert_eq!(p.key(key(KeyCode::Char('c'))), Effect::Copy(t.clone()));
        assert_eq!(p.key(key(KeyCode::Char('e'))), Effect::Export(t));
    }

    #[test]
    fn a_prompt_acts_on_its_session_and_a_gone_session_stays_gone() {
        let mut p = Picker::new();
        p.add(vec![row(1, None, "one", true)]);
        p.key(key(KeyCode::Char('d')));
        // A newer session streams in on top before the answer: the prompt's session goes.
        p.add(vec![row(9, None, "nine", true)]);
        let t1 = Target { dialect: Dialect::Omp, path: "/s/1.jsonl".into(), cwd: "/work".into() };
        assert_eq!(p.key(key(KeyCode::Char('y'))), Effect::Trash(t1.clone()));
        p.removed(Path::new("/s/1.jsonl"));
        // The listing of every project still under way lists it again: it stays out.
        p.add(vec![row(1, None, "one", false)]);
        assert_eq!(labels(&p), ["nine"]);
        // The same for a rename begun before rows arrive.
        let mut p = Picker::new();
        p.add(vec![row(1, Some("old"), "one", true)]);
        p.key(key(KeyCode::Char('r')));
        p.add(vec![row(9, None, "nine", true)]);
        typed(&mut p, "x");
        assert_eq!(p.key(key(KeyCode::Enter)), Effect::Rename(t1, "oldx".into()));
    }

    #[test]
    fn rename_edits_the_name_in_place() {
        let mut p = Picker::new();
        p.add(vec![row(1, Some("old"), "one", true)]);
        p.key(key(KeyCode::Char('r')));
        let t = Target { dialect: Dialect::Omp, path: "/s/1.jsonl".into(), cwd: "/work".into() };
        assert_eq!(p.mode(), &Mode::Rename(t, "old".into()));
        for _ in 0..3 {
            p.key(key(KeyCode::Backspace));
        }
        typed(&mut p, "new q");
        let t = Target { dialect: Dialect::Omp, path: "/s/1.jsonl".into(), cwd: "/work".into() };
        assert_eq!(p.key(key(KeyCode::Enter)), Effect::Rename(t, "new q".into()));
        p.renamed(Path::new("/s/1.jsonl"), "new q");
        assert_eq!(labels(&p), ["new q"]);
        p.key(key(KeyCode::Char('r')));
        assert_eq!(p.key(key(KeyCode::Esc)), Effect::None);
        assert_eq!(p.status(), Some("not renamed"));
    }

    #[test]
    fn previews_follow_the_selection() {
        let mut p = Picker::new();
        p.add(vec![row(2, None, "two", true), row(1, None, "one", true)]);
        assert_eq!(p.wanted_preview().map(|r| r.path.clone()), Some(PathBuf::from("/s/2.jsonl")));
        p.key(key(KeyCode::Down));
        // A late preview of the session left behind is not shown.
        p.set_preview(Path::new("/s/2.jsonl"), "stale");
        assert_eq!(p.preview.lines, None);
        p.set_preview(Path::new("/s/1.jsonl"), "a\nb");
        assert_eq!(p.preview.lines, Some(vec!["a".to_owned(), "b".to_owned()]));
        p.key(KeyEvent::new(KeyCode::Char('d'), KeyModifiers::CONTROL));
        assert!(p.preview.scroll > 0);
    }
}
