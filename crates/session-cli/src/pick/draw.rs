//! Drawing the picker on a ratatui frame: the filter line, the list in columns that fit
//! the width (`crate::table`'s layout and cutting by display cells), the preview and
//! the key line. Colour only where wanted; the selection is shown reversed either way.

use ratatui::Frame;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use session::Dialect;
use unicode_width::UnicodeWidthStr;

use super::state::{FullText, Mode, Picker, Row};
use crate::table::{Column, GAP, fit, pad, widths};

/// The keys, for `?`.
pub(crate) const HELP: &[(&str, &str)] = &[
    ("enter", "open the session in its agent (pi --session, omp --resume)"),
    ("↑ ↓ ^P ^N", "move"),
    ("PgUp PgDn Home End", "move by a page, to the ends"),
    ("type, /", "filter by name and first message (after a pause, what was said)"),
    ("esc", "leave the filter; clear it; quit"),
    ("y c", "copy the path (and print it on exit)"),
    ("r", "rename"),
    ("d del", "move to the trash (asks first)"),
    ("e", "export to Markdown in the working directory"),
    ("P", "pin, or take the pin off (pinned sessions come first)"),
    ("A", "archive: out of this list and ls (session unarchive brings it back)"),
    ("^U ^D", "scroll the preview"),
    ("tab", "the preview in place of the list (small terminals)"),
    ("q", "quit"),
];

/// How the picker looks.
#[derive(Clone, Debug)]
pub(crate) struct Look {
    /// Colour (`NO_COLOR` unset).
    pub(crate) colour: bool,
    /// Now, epoch ms (for "3h ago").
    pub(crate) now_ms: i64,
    /// `$HOME`, shown as `~` in projects.
    pub(crate) home: Option<String>,
}

impl Look {
    fn style(&self, fg: Color) -> Style {
        if self.colour { Style::default().fg(fg) } else { Style::default() }
    }
}

/// Draws the picker on `f`.
pub(crate) fn draw(f: &mut Frame<'_>, p: &mut Picker, look: &Look) {
    let area = f.area();
    if area.height < 3 || area.width < 10 {
        f.render_widget(Paragraph::new("too small"), area);
        return;
    }
    let [top, body, bottom] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(1), Constraint::Length(1)]).areas(area);
    filter_line(f, p, look, top);
    key_line(f, p, look, bottom);
    if area.width >= 120 {
        let [list_area, preview_area] =
            Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(body);
        list(f, p, look, list_area);
        preview(f, p, look, preview_area, Borders::LEFT);
    } else if body.height >= 14 {
        let [list_area, preview_area] = Layout::default()
            .direction(Direction::Vertical)
            .constraints([Constraint::Percentage(50), Constraint::Percentage(50)])
            .areas(body);
        list(f, p, look, list_area);
        preview(f, p, look, preview_area, Borders::TOP);
    } else if p.show_preview {
        preview(f, p, look, body, Borders::NONE);
    } else {
        list(f, p, look, body);
    }
    if *p.mode() == Mode::Help {
        help(f, body);
    }
}

fn filter_line(f: &mut Frame<'_>, p: &Picker, look: &Look, area: Rect) {
    let mut state = format!("{}/{}", p.matches().len(), p.rows().len());
    if p.loading {
        state.push_str(" loading…");
    }
    if !p.query().is_empty() {
        match &p.full_text {
            FullText::Indexing => state.push_str(" indexing…"),
            FullText::Off(_) => state.push_str(" no full text"),
            FullText::Ready => {}
        }
    }
    let room = usize::from(area.width).saturating_sub(state.width() + 3);
    let query = tail(p.query(), room);
    let cursor = if *p.mode() == Mode::Filter { "▏" } else { "" };
    let used = 2 + query.width() + cursor.width();
    let gap = usize::from(area.width).saturating_sub(used + state.width());
    let line = Line::from(vec![
        Span::styled("> ", look.style(Color::Cyan).add_modifier(Modifier::BOLD)),
        Span::raw(query),
        Span::raw(cursor),
        Span::raw(" ".repeat(gap)),
        Span::styled(state, look.style(Color::DarkGray)),
    ]);
    f.render_widget(Paragraph::new(line), area);
}

/// The end of `s` that fits in `cells` (the filter shows what was typed last).
fn tail(s: &str, cells: usize) -> String {
    if s.width() <= cells {
        return s.to_owned();
    }
    let mut out: Vec<char> = Vec::new();
    let mut used = 1;
    for c in s.chars().rev() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w > cells {
            break;
        }
        used += w;
        out.push(c);
    }
    out.push('…');
    out.iter().rev().collect()
}

fn key_line(f: &mut Frame<'_>, p: &Picker, look: &Look, area: Rect) {
    let width = usize::from(area.width);
    let (text, style) = match p.mode() {
        Mode::ConfirmTrash(_, label) => {
            let what = fit(label, width / 2);
            (format!("move \"{what}\" to the trash? [y/N]"), look.style(Color::Yellow).add_modifier(Modifier::BOLD))
        }
        Mode::Rename(_, name) => (format!("name: {}▏  (enter: save, esc: cancel)", name), Style::default()),
        _ => match p.status() {
            Some(s) => (s.to_owned(), look.style(Color::Yellow)),
            None => (
                "enter open  y copy  r rename  d trash  e export  / filter  ? help  q quit".to_owned(),
                look.style(Color::DarkGray),
            ),
        },
    };
    f.render_widget(Paragraph::new(Line::styled(text, style)), area);
}

/// The columns that fit `width`: the name always, then the time, the agent, the
/// messages and the project as room allows.
fn columns(width: usize) -> Vec<(Column, usize)> {
    let all = [
        (Column { header: "MODIFIED", right: false, flex: 0 }, 0),
        (Column { header: "AGENT", right: false, flex: 0 }, 1),
        (Column { header: "MSGS", right: true, flex: 0 }, 2),
        (Column { header: "NAME / FIRST MESSAGE", right: false, flex: 3 }, 3),
        (Column { header: "PROJECT", right: false, flex: 2 }, 4),
    ];
    let keep: &[usize] = match width {
        0..40 => &[3],
        40..56 => &[0, 3],
        56..66 => &[0, 1, 3],
        66..76 => &[0, 1, 2, 3],
        _ => &[0, 1, 2, 3, 4],
    };
    all.into_iter().filter(|(_, k)| keep.contains(k)).collect()
}

fn cell(r: &Row, snippet: Option<&str>, k: usize, look: &Look) -> String {
    match k {
        0 => r.modified.map_or_else(|| "?".to_owned(), |m| session::discovery::time_ago(m, look.now_ms)),
        1 if r.pinned => format!("{}*", r.dialect.name()),
        1 => r.dialect.name().to_owned(),
        2 => r.messages.to_string(),
        3 => match snippet {
            Some(s) if r.name.is_none() || !s.is_empty() => format!("{} — {s}", r.label()),
            _ => r.label().to_owned(),
        },
        _ => match look.home.as_deref() {
            // `~` only for the home folder itself and below it (`/home/meow` is not `~ow`).
            Some(h)
                if !h.is_empty()
                    && r.cwd.starts_with(h)
                    && (r.cwd.len() == h.len() || r.cwd[h.len()..].starts_with('/') || h.ends_with('/')) =>
            {
                format!("~{}", &r.cwd[h.len()..])
            }
            _ => r.cwd.clone(),
        },
    }
}

fn list(f: &mut Frame<'_>, p: &mut Picker, look: &Look, area: Rect) {
    let width = usize::from(area.width);
    let height = usize::from(area.height);
    p.set_page(height.saturating_sub(1));
    let columns = columns(width);
    let shown: Vec<(usize, Vec<String>)> = p
        .matches()
        .iter()
        .enumerate()
        .skip(p.top())
        .take(height.saturating_sub(1))
        .map(|(i, m)| {
            let r = &p.rows()[m.row];
            (i, columns.iter().map(|(_, k)| cell(r, m.snippet.as_deref(), *k, look)).collect())
        })
        .collect();
    let cols: Vec<Column> =
        columns.iter().map(|(c, _)| Column { header: c.header, right: c.right, flex: c.flex }).collect();
    // Fixed columns as wide as their widest possible cell, so they do not jump as the
    // list scrolls.
    let natural: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, (c, k))| {
            let least = match k {
                0 => 10,
                1 => 3,
                2 => 4,
                _ => 0,
            };
            shown.iter().map(|(_, r)| r[i].width()).chain([c.header.width(), least]).max().unwrap_or(0)
        })
        .collect();
    let widths = widths(&cols, &natural, width);
    let render = |cells: &[String]| -> String {
        let parts: Vec<String> =
            cells.iter().enumerate().map(|(i, s)| pad(&fit(s, widths[i]), widths[i], cols[i].right)).collect();
        // Each cell is cut to its column; the frame cuts what is left past the edge.
        parts.join(&" ".repeat(GAP))
    };
    let mut lines = Vec::with_capacity(shown.len() + 1);
    let headers: Vec<String> = cols.iter().map(|c| c.header.to_owned()).collect();
    lines.push(Line::styled(render(&headers), Style::default().add_modifier(Modifier::BOLD)));
    for (i, cells) in &shown {
        let text = render(cells);
        let line = if *i == p.selected() {
            let full = pad(&text, width, false);
            Line::styled(full, Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD))
        } else {
            let r = &p.rows()[p.matches()[*i].row];
            let colour = match r.dialect {
                Dialect::Pi => Color::Cyan,
                Dialect::Omp => Color::Magenta,
            };
            Line::styled(text, look.style(colour))
        };
        lines.push(line);
    }
    if shown.is_empty() {
        let why = if p.loading {
            "looking for sessions…"
        } else if p.rows().is_empty() {
            "no sessions"
        } else {
            "no session matches"
        };
        lines.push(Line::raw(why));
    }
    f.render_widget(Paragraph::new(lines), area);
}

fn preview(f: &mut Frame<'_>, p: &mut Picker, look: &Look, area: Rect, borders: Borders) {
    let title = match p.selected_row() {
        Some(r) => {
            format!(" {} · {} ", r.dialect.name(), r.path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default())
        }
        None => String::new(),
    };
    let width = usize::from(area.width);
    let block = Block::default().borders(borders).title(fit(&title, width.saturating_sub(2)));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let height = usize::from(inner.height);
    let mut lines: Vec<Line<'_>> = Vec::new();
    if let Some(snippet) = p.selected_match().and_then(|m| m.snippet.clone()) {
        lines.push(Line::styled(format!("match: {snippet}"), look.style(Color::Yellow).add_modifier(Modifier::BOLD)));
    }
    match &p.preview.lines {
        None if p.selected_row().is_some() => lines.push(Line::raw("loading…")),
        None => {}
        Some(text) => {
            let last = text.len().saturating_sub(1);
            p.preview.scroll = p.preview.scroll.min(last);
            for l in text.iter().skip(p.preview.scroll).take(height) {
                let style = if l.starts_with("── ") {
                    look.style(Color::Green).add_modifier(Modifier::BOLD)
                } else {
                    Style::default()
                };
                lines.push(Line::styled(l.clone(), style));
            }
        }
    }
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
}

fn help(f: &mut Frame<'_>, body: Rect) {
    let width = body.width.min(78);
    let height = body.height.min(u16::try_from(HELP.len() + 2).unwrap_or(u16::MAX));
    let area = Rect { x: body.x + (body.width - width) / 2, y: body.y, width, height };
    let keys = HELP.iter().map(|(k, _)| k.width()).max().unwrap_or(0);
    let lines: Vec<Line<'_>> =
        HELP.iter().map(|(k, what)| Line::raw(format!("{}  {what}", pad(k, keys, false)))).collect();
    f.render_widget(Clear, area);
    f.render_widget(Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" keys ")), area);
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use expect_test::{Expect, expect};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    use super::*;

    const NOW: i64 = 1_767_225_600_000 + 3 * 86_400_000;

    fn picker() -> Picker {
        let mut p = Picker::new();
        let rows = [
            ("Fix the config loader", "", "/home/me/proj", 3_600_000, Dialect::Pi, 12),
            (
                "",
                "write a parser for the 日本語 settings file and test it well",
                "/home/me/proj",
                7_200_000,
                Dialect::Omp,
                40,
            ),
            ("", "why does the build fail on CI but not here", "/home/me/other", 86_400_000, Dialect::Pi, 3),
        ];
        p.add(
            rows.iter()
                .enumerate()
                .map(|(k, (name, first, cwd, ago, dialect, messages))| Row {
                    dialect: *dialect,
                    path: PathBuf::from(format!("/home/me/.pi/agent/sessions/--p--/s{k}.jsonl")),
                    name: (!name.is_empty()).then(|| (*name).to_owned()),
                    first_message: if first.is_empty() { "hello".to_owned() } else { (*first).to_owned() },
                    cwd: (*cwd).to_owned(),
                    modified: Some(NOW - ago),
                    messages: *messages,
                    here: *cwd == "/home/me/proj",
                    pinned: false,
                })
                .collect(),
        );
        p.loading = false;
        p.full_text = FullText::Ready;
        p
    }

    fn screen(p: &mut Picker, w: u16, h: u16) -> String {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap_or_else(|e| panic!("{e}"));
        let look = Look { colour: false, now_ms: NOW, home: Some("/home/me".into()) };
        t.draw(|f| draw(f, p, &look)).unwrap_or_else(|e| panic!("{e}"));
        let buf = t.backend().buffer().clone();
        let mut out = String::new();
        for y in 0..h {
            let mut line = String::new();
            let mut skip = 0;
            for x in 0..w {
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                let s = buf[(x, y)].symbol();
                skip = s.width().saturating_sub(1);
                line.push_str(s);
            }
            out.push_str(line.trim_end());
            // The selection is drawn reversed: shown here as a mark after the line.
            if buf[(0, y)].modifier.contains(Modifier::REVERSED) {
                out.push_str(" ◀");
            }
            out.push('\n');
        }
        out
    }

    fn check(p: &mut Picker, w: u16, h: u16, e: Expect) {
        let s = screen(p, w, h);
        for l in s.lines() {
            assert!(l.trim_end_matches(" ◀").width() <= usize::from(w), "{l:?} is wider than {w}");
        }
        e.assert_eq(&s);
    }

    #[test]
    fn draws_at_80x24() {
        let mut p = picker();
        p.set_preview(
            &PathBuf::from("/home/me/.pi/agent/sessions/--p--/s0.jsonl"),
            "── user ──\nthe config loader drops the last key\n── assistant ──\nLet me look.\n2 message(s)",
        );
        check(
            &mut p,
            80,
            24,
            expect![[r#"
                >                                                                            3/3
                MODIFIED    AGENT  MSGS  NAME / FIRST MESSAGE                            PROJECT
                1h ago      pi       12  Fix the config loader                           ~/proj ◀
                2h ago      omp      40  write a parser for the 日本語 settings file a…  ~/proj
                1d ago      pi        3  why does the build fail on CI but not here      ~/other







                pi · s0.jsonl───────────────────────────────────────────────────────────────────
                ── user ──
                the config loader drops the last key
                ── assistant ──
                Let me look.
                2 message(s)





                enter open  y copy  r rename  d trash  e export  / filter  ? help  q quit
            "#]],
        );
    }

    /// The home folder shows as `~` only for itself and what is below it.
    #[test]
    fn home_is_shortened_only_at_a_folder_boundary() {
        let look = Look { colour: false, now_ms: NOW, home: Some("/home/me".into()) };
        let at = |cwd: &str| {
            let mut r = picker().rows()[0].clone();
            r.cwd = cwd.to_owned();
            cell(&r, None, 4, &look)
        };
        assert_eq!(at("/home/me/proj"), "~/proj");
        assert_eq!(at("/home/me"), "~");
        assert_eq!(at("/home/meow/x"), "/home/meow/x");
    }

    /// `NO_COLOR`: no cell has a colour of its own; the selection is still reversed.
    #[test]
    fn no_colour_when_not_wanted() {
        let coloured = |colour: bool| {
            let mut p = picker();
            let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap_or_else(|e| panic!("{e}"));
            let look = Look { colour, now_ms: NOW, home: None };
            t.draw(|f| draw(f, &mut p, &look)).unwrap_or_else(|e| panic!("{e}"));
            let buf = t.backend().buffer().clone();
            let fg = buf.content().iter().filter(|c| c.fg != Color::Reset).count();
            let reversed = buf.content().iter().filter(|c| c.modifier.contains(Modifier::REVERSED)).count();
            (fg, reversed)
        };
        let (fg, reversed) = coloured(true);
        assert!(fg > 0 && reversed == 80, "{fg} {reversed}");
        let (fg, reversed) = coloured(false);
        assert!(fg == 0 && reversed == 80, "{fg} {reversed}");
    }

    #[test]
    fn draws_at_40x10() {
        let mut p = picker();
        check(
            &mut p,
            40,
            10,
            expect![[r#"
                >                                    3/3
                MODIFIED    NAME / FIRST MESSAGE
                1h ago      Fix the config loader ◀
                2h ago      write a parser for the 日本…
                1d ago      why does the build fail on …




                enter open  y copy  r rename  d trash  e
            "#]],
        );
        p.key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
        check(
            &mut p,
            40,
            10,
            expect![[r#"
                >                                    3/3
                pi · s0.jsonl
                loading…






                enter open  y copy  r rename  d trash  e
            "#]],
        );
    }

    #[test]
    fn draws_the_filter_the_snippet_and_the_confirmation() {
        let mut p = picker();
        for c in "parser".chars() {
            p.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
        }
        p.set_hits(
            "parser",
            vec![(PathBuf::from("/home/me/.pi/agent/sessions/--p--/s2.jsonl"), "a parser error".into())],
        );
        p.key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
        p.key(KeyEvent::new(KeyCode::Char('d'), KeyModifiers::NONE));
        check(
            &mut p,
            80,
            24,
            expect![[r#"
                > parser                                                                     2/3
                MODIFIED    AGENT  MSGS  NAME / FIRST MESSAGE                            PROJECT
                2h ago      omp      40  write a parser for the 日本語 settings file a…  ~/proj ◀
                1d ago      pi        3  why does the build fail on CI but not here — …  ~/other








                omp · s1.jsonl──────────────────────────────────────────────────────────────────
                loading…









                move "write a parser for the 日本語 settings …" to the trash? [y/N]
            "#]],
        );
        p.key(KeyEvent::new(KeyCode::Char('n'), KeyModifiers::NONE));
        p.key(KeyEvent::new(KeyCode::Char('?'), KeyModifiers::NONE));
        check(
            &mut p,
            80,
            24,
            expect![[r#"
                > parser                                                                     2/3
                M┌ keys ──────────────────────────────────────────────────────────────────────┐T
                2│enter               open the session in its agent (pi --session, omp --resum│ ◀
                1│↑ ↓ ^P ^N           move                                                    │r
                 │PgUp PgDn Home End  move by a page, to the ends                             │
                 │type, /             filter by name and first message (after a pause, what wa│
                 │esc                 leave the filter; clear it; quit                        │
                 │y c                 copy the path (and print it on exit)                    │
                 │r                   rename                                                  │
                 │d del               move to the trash (asks first)                          │
                 │e                   export to Markdown in the working directory             │
                 │P                   pin, or take the pin off (pinned sessions come first)   │
                o│A                   archive: out of this list and ls (session unarchive brin│─
                l│^U ^D               scroll the preview                                      │
                 │tab                 the preview in place of the list (small terminals)      │
                 │q                   quit                                                    │
                 └────────────────────────────────────────────────────────────────────────────┘






                enter open  y copy  r rename  d trash  e export  / filter  ? help  q quit
            "#]],
        );
    }
}
