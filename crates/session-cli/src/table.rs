//! Tables for a terminal: columns sized by display width (a CJK character or an emoji
//! takes two cells), fitted to the terminal's width, bold headers only where colour is
//! wanted.

use std::io::IsTerminal;

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Whether to colour stdout: a terminal, and `NO_COLOR` unset or empty.
pub(crate) fn colour() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The terminal's width in cells: the terminal's own, else `COLUMNS` (at most
/// [`MAX_WIDTH`]), else 100.
pub(crate) fn width() -> usize {
    if let Some((terminal_size::Width(w), _)) = terminal_size::terminal_size() {
        return usize::from(w);
    }
    let columns = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()).filter(|&w: &usize| w > 0);
    columns.map_or(100, |w| w.min(MAX_WIDTH))
}

/// The widest table `COLUMNS` asks for: wider than any terminal (`u16` cells), and
/// small enough that no width computation overflows.
pub(crate) const MAX_WIDTH: usize = 1 << 16;

/// Returns `s` on one line (each run of whitespace one space, none at the ends), cut
/// with `…` to at most `cells` display cells.
///
/// Only the start of `s` that can show is looked at: a first message of a megabyte
/// costs what its first line costs.
pub(crate) fn fit(s: &str, cells: usize) -> String {
    let (flat, whole) = flatten(s, cells);
    if !whole && flat.width() <= cells {
        // Only zero-width characters could make a cut prefix this narrow: measure all.
        return fit_flat(flatten(s, usize::MAX).0, cells);
    }
    fit_flat(flat, cells)
}

/// [`fit`] of text already on one line.
fn fit_flat(flat: String, cells: usize) -> String {
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

/// The display width of `s` on one line as [`fit`] shows it, counted character by
/// character as [`fit`] cuts, or more than `cap` when it is wider than that (the rest
/// is not looked at).
pub(crate) fn flat_width(s: &str, cap: usize) -> usize {
    let mut width = 0;
    for c in FlatChars::new(s) {
        width += c.width().unwrap_or(0);
        if width > cap {
            break;
        }
    }
    width
}

/// `s` with each run of whitespace made one space and none at the ends, stopped after
/// `cells + 2` characters (every character but a zero-width one takes a cell, so they
/// are more than `cells` cells unless some are zero-width, see [`fit`]): the text, and
/// whether it is all of `s`.
fn flatten(s: &str, cells: usize) -> (String, bool) {
    let limit = cells.saturating_add(2);
    let mut out = String::new();
    for (taken, c) in FlatChars::new(s).enumerate() {
        if taken == limit {
            return (out, false);
        }
        out.push(c);
    }
    (out, true)
}

/// The characters of a text with each run of whitespace made one space and none at
/// the ends.
struct FlatChars<'a> {
    chars: std::str::Chars<'a>,
    /// Whitespace was skipped after something was given.
    space: bool,
    /// Something was given.
    started: bool,
    /// The character after a run of whitespace, given after its space.
    held: Option<char>,
}

impl FlatChars<'_> {
    fn new(s: &str) -> FlatChars<'_> {
        FlatChars { chars: s.chars(), space: false, started: false, held: None }
    }
}

impl Iterator for FlatChars<'_> {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        if let Some(c) = self.held.take() {
            return Some(c);
        }
        for c in self.chars.by_ref() {
            if c.is_whitespace() {
                self.space = self.started;
                continue;
            }
            self.started = true;
            if std::mem::take(&mut self.space) {
                self.held = Some(c);
                return Some(' ');
            }
            return Some(c);
        }
        None
    }
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
    let natural_of = |i: usize, cap: usize| {
        rows.iter().map(|r| flat_width(&r[i], cap)).chain([columns[i].header.width()]).max().unwrap_or(0)
    };
    let mut natural: Vec<usize> =
        columns.iter().enumerate().map(|(i, c)| if c.flex == 0 { natural_of(i, usize::MAX) } else { 0 }).collect();
    // A flexible column gets no more than the room the fixed ones leave (or 8 cells):
    // widths past that are not measured, which changes no width (see `widths`).
    let gaps = GAP * columns.len().saturating_sub(1);
    let cap = total.saturating_sub(natural.iter().sum::<usize>() + gaps).max(8);
    for (i, _) in columns.iter().enumerate().filter(|(_, c)| c.flex > 0) {
        natural[i] = natural_of(i, cap);
    }
    let widths = widths(columns, &natural, total);
    // Each cell cut and padded to its column, written in place; the line's trailing
    // spaces dropped.
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let start = out.len();
        for (i, s) in cells.enumerate() {
            if i > 0 {
                out.extend(std::iter::repeat_n(' ', GAP));
            }
            let cut = fit(s, widths[i]);
            let fill = widths[i].saturating_sub(cut.width());
            let last = i + 1 == columns.len();
            if columns[i].right {
                out.extend(std::iter::repeat_n(' ', fill));
                out.push_str(&cut);
            } else {
                out.push_str(&cut);
                if !last {
                    out.extend(std::iter::repeat_n(' ', fill));
                }
            }
        }
        let kept = out[start..].trim_end().len();
        out.truncate(start + kept);
    };
    // Room for lines of ordinary width; a wider table grows as it is written.
    let mut out = String::with_capacity((rows.len() + 1) * (total.min(512) + 1));
    if bold {
        out.push_str("\x1b[1m");
    }
    line(&mut out, &mut columns.iter().map(|c| c.header));
    if bold {
        out.push_str("\x1b[0m");
    }
    out.push('\n');
    for r in rows {
        line(&mut out, &mut r.iter().map(String::as_str));
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
        let share = room.saturating_mul(usize::from(c.flex)) / usize::from(weights.max(1));
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

    /// The definition of [`fit`]: flatten all of `s`, then cut.
    fn fit_whole(s: &str, cells: usize) -> String {
        fit_flat(s.split_whitespace().collect::<Vec<_>>().join(" "), cells)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Looking at the start of a text only cuts it as looking at all of it does,
        /// with wide, zero-width and combining characters and runs of whitespace.
        #[test]
        fn fit_reads_only_what_it_shows_and_cuts_as_the_whole(
            parts in proptest::collection::vec(proptest::sample::select(vec![
                "a", "bc", " ", "\n\t ", "日本", "🚀", "\u{200b}", "e\u{301}", "\u{fe0f}", "👨\u{200d}👩", "x".repeat(40).leak(),
            ]), 0..200),
            cells in 0usize..60,
        ) {
            let s = parts.concat();
            proptest::prop_assert_eq!(fit(&s, cells), fit_whole(&s, cells));
            let whole: usize = fit_whole(&s, usize::MAX).chars().map(|c| c.width().unwrap_or(0)).sum();
            let got = flat_width(&s, cells);
            if whole <= cells {
                proptest::prop_assert_eq!(got, whole);
            } else {
                proptest::prop_assert!(got > cells, "{got} for a text {whole} wide, cap {cells}");
            }
        }
    }

    proptest::proptest! {
        /// Measuring a flexible column only up to the room the fixed ones leave gives
        /// the widths that measuring all of it gives.
        #[test]
        fn capped_widths_are_the_widths(
            columns in proptest::collection::vec((0u16..4, 0usize..300), 1..8),
            total in 0usize..250,
        ) {
            let cols: Vec<Column> = columns.iter().map(|&(flex, _)| Column { header: "", right: false, flex }).collect();
            let natural: Vec<usize> = columns.iter().map(|&(_, n)| n).collect();
            let fixed: usize = cols.iter().zip(&natural).filter(|(c, _)| c.flex == 0).map(|(_, n)| n).sum();
            let cap = total.saturating_sub(fixed + GAP * (cols.len() - 1)).max(8);
            let capped: Vec<usize> =
                cols.iter().zip(&natural).map(|(c, &n)| if c.flex > 0 && n > cap { cap + 1 } else { n }).collect();
            proptest::prop_assert_eq!(widths(&cols, &capped, total), widths(&cols, &natural, total));
        }
    }

    /// The definition of [`render`]'s lines: each cell cut and padded on its own, the
    /// cells joined, the line's end trimmed.
    fn render_by_cells(columns: &[Column], rows: &[Vec<String>], total: usize, bold: bool) -> String {
        let natural: Vec<usize> = (0..columns.len())
            .map(|i| {
                rows.iter().map(|r| flat_width(&r[i], usize::MAX)).chain([columns[i].header.width()]).max().unwrap_or(0)
            })
            .collect();
        let widths = widths(columns, &natural, total);
        let line = |cells: Vec<&str>| {
            let parts: Vec<String> = cells
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let cut = fit(s, widths[i]);
                    let fill = " ".repeat(widths[i].saturating_sub(cut.width()));
                    match (columns[i].right, i + 1 == columns.len()) {
                        (true, _) => format!("{fill}{cut}"),
                        (false, true) => cut,
                        (false, false) => format!("{cut}{fill}"),
                    }
                })
                .collect();
            parts.join(&" ".repeat(GAP)).trim_end().to_owned()
        };
        let header = line(columns.iter().map(|c| c.header).collect());
        let mut out = if bold { format!("\x1b[1m{header}\x1b[0m\n") } else { format!("{header}\n") };
        for r in rows {
            out.push_str(&line(r.iter().map(String::as_str).collect()));
            out.push('\n');
        }
        out
    }

    proptest::proptest! {
        /// Writing the cells in place gives the lines cutting and padding each cell on
        /// its own gives.
        #[test]
        fn tables_render_as_their_cells(
            rows in proptest::collection::vec(proptest::collection::vec(
                proptest::sample::select(vec!["", "a", "bb  b", "日本語", "🚀 x", "   ", "long text ".repeat(12).leak()]), 3), 0..8),
            total in 0usize..120,
            bold in proptest::bool::ANY,
        ) {
            let columns = [
                Column { header: "A", right: false, flex: 0 },
                Column { header: "N", right: true, flex: 0 },
                Column { header: "TEXT", right: false, flex: 2 },
            ];
            let rows: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(|c| (*c).to_owned()).collect()).collect();
            proptest::prop_assert_eq!(render(&columns, &rows, total, bold), render_by_cells(&columns, &rows, total, bold));
        }
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
        // Any width, however absurd, lays out without overflowing or reserving it.
        for total in [MAX_WIDTH, usize::MAX] {
            assert_eq!(render(&columns, &rows, total, false), render(&columns, &rows, 10_000, false));
        }
    }
}
