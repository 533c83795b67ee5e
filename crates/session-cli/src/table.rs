//! Tables for a terminal: columns sized by display width (a CJK character or an emoji
//! takes two cells), fitted to the terminal's width, bold headers only where colour is
//! wanted.

use std::io::IsTerminal;

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Whether to colour stdout: a terminal, and `NO_COLOR` unset or empty.
pub(crate) fn colour() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The terminal's width in cells: the terminal's own, else `COLUMNS`, else 100.
pub(crate) fn width() -> usize {
    if let Some((terminal_size::Width(w), _)) = terminal_size::terminal_size() {
        return usize::from(w);
    }
    std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()).filter(|&w| w > 0).unwrap_or(100)
}

/// Returns `s` on one line, cut with `…` to at most `cells` display cells.
pub(crate) fn fit(s: &str, cells: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.width() <= cells {
        return flat;
    }
    let mut out = String::new();
    let mut used = 0;
    for c in flat.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > cells {
            break;
        }
        out.push(c);
        used += w;
    }
    if cells > 0 {
        out.push('…');
    }
    out
}

/// Pads `s` with spaces to `cells` display cells (left-aligned, or right-aligned).
pub(crate) fn pad(s: &str, cells: usize, right: bool) -> String {
    let fill = " ".repeat(cells.saturating_sub(s.width()));
    if right { format!("{fill}{s}") } else { format!("{s}{fill}") }
}

/// A column: its header, whether it is right-aligned, and whether it shares the room
/// left over by the fixed columns (with this weight) instead of fitting its content.
pub(crate) struct Column {
    pub(crate) header: &'static str,
    pub(crate) right: bool,
    pub(crate) flex: u16,
}

/// Lays out `rows` under `columns` in at most `total` cells: fixed columns take their
/// widest cell, flexible ones share what remains by weight (at least 8 cells each), and
/// every cell is cut to its column.
pub(crate) fn render(columns: &[Column], rows: &[Vec<String>], total: usize, bold: bool) -> String {
    let natural: Vec<usize> = (0..columns.len())
        .map(|i| rows.iter().map(|r| r[i].width()).chain([columns[i].header.width()]).max().unwrap_or(0))
        .collect();
    let widths = widths(columns, &natural, total);
    let line = |cells: &mut dyn Iterator<Item = (usize, String)>| {
        let parts: Vec<String> = cells
            .map(|(i, s)| {
                let last = i + 1 == columns.len();
                let cut = fit(&s, widths[i]);
                if last && !columns[i].right { cut } else { pad(&cut, widths[i], columns[i].right) }
            })
            .collect();
        parts.join(&" ".repeat(GAP)).trim_end().to_owned()
    };
    let mut out = String::new();
    let header = line(&mut columns.iter().map(|c| c.header.to_owned()).enumerate());
    if bold {
        out.push_str(&format!("\x1b[1m{header}\x1b[0m\n"));
    } else {
        out.push_str(&header);
        out.push('\n');
    }
    for r in rows {
        out.push_str(&line(&mut r.iter().cloned().enumerate()));
        out.push('\n');
    }
    out
}

/// The cells between two columns.
pub(crate) const GAP: usize = 2;

/// The width of each column in at most `total` cells, given each column's natural
/// width (its widest cell, header included): fixed columns take theirs, flexible ones
/// share what remains by weight (at least 8 cells each).
pub(crate) fn widths(columns: &[Column], natural: &[usize], total: usize) -> Vec<usize> {
    let fixed: usize = columns.iter().zip(natural).filter(|(c, _)| c.flex == 0).map(|(_, w)| *w).sum();
    let gaps = GAP * columns.len().saturating_sub(1);
    let weights: u16 = columns.iter().map(|c| c.flex).sum();
    let room = total.saturating_sub(fixed + gaps);
    let mut widths = natural.to_vec();
    let mut spare = room;
    for (i, c) in columns.iter().enumerate().filter(|(_, c)| c.flex > 0) {
        let share = (room * usize::from(c.flex)) / usize::from(weights.max(1));
        widths[i] = natural[i].min(share.max(8));
        spare = spare.saturating_sub(widths[i]);
    }
    // What a narrow flexible column does not need goes to the others.
    for (i, _) in columns.iter().enumerate().filter(|(_, c)| c.flex > 0) {
        let more = natural[i].saturating_sub(widths[i]).min(spare);
        widths[i] += more;
        spare -= more;
    }
    widths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_cut_by_display_width() {
        assert_eq!(fit("日本語のテキスト", 7), "日本語…");
        assert_eq!(fit("abc  def\nghi", 20), "abc def ghi");
        assert_eq!(fit("abcdef", 4), "abc…");
        assert!(fit("🚀🚀🚀🚀", 5).width() <= 5);
    }

    #[test]
    fn tables_fit_the_width() {
        let columns = [
            Column { header: "A", right: false, flex: 0 },
            Column { header: "NAME", right: false, flex: 2 },
            Column { header: "CWD", right: false, flex: 1 },
        ];
        let rows = vec![
            vec!["x".to_owned(), "日本語 ".repeat(30), "/home/user/".repeat(10)],
            vec!["yy".to_owned(), "short".to_owned(), "/".to_owned()],
        ];
        for total in [40, 60, 200] {
            let text = render(&columns, &rows, total, false);
            for l in text.lines() {
                assert!(l.width() <= total, "{total}: {l:?} is {} cells", l.width());
            }
        }
        let wide = render(&columns, &rows, 400, false);
        assert!(wide.contains("short"));
    }
}
