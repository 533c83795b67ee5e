//! The two dialects' grammars: how pi reads lines and omp reads values, each
//! reference's start of a file (a byte-order mark, omp's title slot), and what each
//! skips, keeps and reports. A text in, records and diagnostics out; the readers in
//! `bytes.rs` and `pieces.rs` hand it the text.
//!
//! * **pi** splits on `\n` and trims JSON whitespace; a line that is blank, does not
//!   parse, or parses to a falsy value is skipped; every other value is kept.
//! * **omp** reads values with the lenient splitter ([`LenientValues`]); `null` is
//!   skipped.

use crate::Dialect;
use crate::engine::ws::trim_ws;
use crate::record::{Record, RecordParseError};
use crate::scan::{Kind, Lenient, LenientValues, Obj, Skipped, kind, truthy};
use crate::span::SpanBuilder;
use crate::title::TitleSlot;

use super::lines::LineCounter;
use super::parsed::{Diagnostic, DiagnosticKind, ParsedFile};

fn push_diag(out: &mut ParsedFile, lines: &mut LineCounter, text: &str, offset: usize, kind: DiagnosticKind) {
    let line = lines.line_at(text.as_bytes(), offset);
    out.diagnostics.push(Diagnostic { line, offset, kind });
}

/// How a parse makes records: all in memory, or large ones read by position.
pub(super) enum Maker {
    /// Every record holds its text.
    Resident,
    /// Records that qualify become rows of the piece's span table.
    Spans(SpanBuilder),
}

impl Maker {
    /// Parses one line (a slice of the text being parsed) into a record.
    pub(super) fn record(&mut self, line: &str) -> Result<Record, RecordParseError> {
        match self {
            Maker::Resident => Record::parse(line),
            Maker::Spans(b) => b.record(line),
        }
    }
}

/// Where a parse of part of a text ended.
pub(super) struct Stop {
    /// The position reached: where the next value would start.
    pub(super) pos: usize,
    /// Whether the parser gave up on the rest of the text (omp: an incomplete value).
    pub(super) rest_lost: bool,
}

/// Parses `text` into `out` as `dialect` reads it, from the start of a file
/// (`at_file_start`: a byte-order mark, omp's title slot) or from a line start after
/// it, making records with `maker`. Offsets and lines are the text's own.
pub(super) fn read(text: &str, dialect: Dialect, at_file_start: bool, out: &mut ParsedFile, maker: &mut Maker) -> Stop {
    let mut lines = LineCounter::default();
    match dialect {
        Dialect::Pi => {
            let from = if at_file_start { pi_start(text, out, &mut lines) } else { 0 };
            parse_pi(text, from, text.len(), out, &mut lines, maker)
        }
        Dialect::Omp => {
            let from = if at_file_start { omp_start(text, out, &mut lines) } else { 0 };
            parse_omp(text, from, text.len(), out, &mut lines, maker)
        }
    }
}

/// pi's handling of the start of a file; returns where the lines begin.
fn pi_start(text: &str, out: &mut ParsedFile, lines: &mut LineCounter) -> usize {
    if text.starts_with('\u{feff}') {
        push_diag(out, lines, text, 0, DiagnosticKind::Bom);
    }
    0
}

/// Parses pi's lines from `from` (a line start) until a line starts at or after
/// `stop_at`.
fn parse_pi(
    text: &str,
    from: usize,
    stop_at: usize,
    out: &mut ParsedFile,
    lines: &mut LineCounter,
    maker: &mut Maker,
) -> Stop {
    let bytes = text.as_bytes();
    let mut start = from;
    while start < stop_at.min(bytes.len()) {
        let nl = memchr::memchr(b'\n', &bytes[start..]);
        let end = nl.map_or(bytes.len(), |i| start + i);
        let last = nl.is_none();
        let raw = &text[start..end];
        let line = trim_ws(raw);
        if raw.ends_with('\r') && !line.is_empty() {
            push_diag(out, lines, text, start, DiagnosticKind::CrLf);
        }
        if line.is_empty() {
            if !raw.is_empty() || !last {
                push_diag(out, lines, text, start, DiagnosticKind::BlankLine);
            }
        } else {
            match maker.record(line) {
                // Read from the text: a value that does not fit a tree (`1e400`, which
                // JavaScript reads as Infinity, or absurd nesting) has no `value()` but
                // is still truthy.
                Ok(r) if !r.is_object() && !truthy(r.text()) => {
                    out.malformed += 1;
                    push_diag(out, lines, text, start, DiagnosticKind::SkippedValue { text: line.to_owned() });
                }
                Ok(r) => {
                    if last {
                        push_diag(out, lines, text, start, DiagnosticKind::MissingFinalNewline);
                    }
                    out.records.push(r);
                    out.record_offsets.push(start);
                }
                Err(e) => {
                    out.malformed += 1;
                    let kind = if last {
                        DiagnosticKind::TornLastLine
                    } else {
                        DiagnosticKind::Malformed { reason: e.to_string() }
                    };
                    push_diag(out, lines, text, start, kind);
                }
            }
        }
        start = end + 1;
    }
    Stop { pos: start, rest_lost: false }
}

/// omp's handling of the start of a file (byte order mark, title slot); returns
/// where the values begin.
fn omp_start(text: &str, out: &mut ParsedFile, lines: &mut LineCounter) -> usize {
    let mut pos = 0;
    if text.starts_with('\u{feff}') {
        push_diag(out, lines, text, 0, DiagnosticKind::Bom);
        pos = '\u{feff}'.len_utf8();
    }
    // The title slot is the first physical line when it parses as one.
    let first_end = memchr::memchr(b'\n', &text.as_bytes()[pos..]).map_or(text.len(), |i| pos + i);
    let first = &text[pos..first_end];
    if let Some(slot) = TitleSlot::parse(first) {
        out.title_slot = Some(slot);
        pos = (first_end + 1).min(text.len());
    } else if is_title_object(first) {
        // A slot written over in place and torn by a crash: old bytes after new ones
        // can still be JSON, of type "title", yet no slot. It is no record either (omp
        // would then find no header and refuse the session): skip it, as omp's listing
        // does, and take the title from the header.
        push_diag(out, lines, text, pos, DiagnosticKind::DamagedTitleSlot);
        // Counted as malformed, so omp's next write is a full rewrite with a whole slot.
        out.malformed += 1;
        pos = (first_end + 1).min(text.len());
    }
    pos
}

/// Returns whether `line` is one JSON object whose `type` is `"title"`.
fn is_title_object(line: &str) -> bool {
    let line = line.trim_end_matches('\r');
    line.starts_with('{') && Obj::parse(line).is_some_and(|o| o.get_str("type").as_deref() == Some("title"))
}

/// Parses omp's values from `from` until a value starts at or after `stop_at` (a
/// value that starts before it is read whole, wherever it ends).
fn parse_omp(
    text: &str,
    from: usize,
    stop_at: usize,
    out: &mut ParsedFile,
    lines: &mut LineCounter,
    maker: &mut Maker,
) -> Stop {
    let len = text.len();
    // Most lines hold exactly one value: validated and parsed in one pass.
    let mut values = LenientValues::starting_at(text, from, |line| maker.record(line).ok());
    loop {
        let resumed = values.position();
        if resumed >= stop_at.min(len) {
            return Stop { pos: resumed, rest_lost: false };
        }
        let Some(step) = values.next() else {
            note_blank_lines(text, resumed, len, out, lines);
            return Stop { pos: len, rest_lost: false };
        };
        let at = match &step {
            Lenient::Value { start, .. } => *start,
            Lenient::Syntax(Skipped { at, .. }) | Lenient::Incomplete { at } => *at,
        };
        note_blank_lines(text, resumed, at, out, lines);
        match step {
            Lenient::Value { start, end, parsed: Some(r), .. } => {
                if text[start..end].ends_with('\r') {
                    push_diag(out, lines, text, start, DiagnosticKind::CrLf);
                }
                if end == len {
                    push_diag(out, lines, text, start, DiagnosticKind::MissingFinalNewline);
                }
                keep_omp(r, text, start, out, lines);
            }
            Lenient::Value { start, end, parsed: None, glued } => {
                let value_text = &text[start..end];
                if value_text.contains('\n') {
                    push_diag(out, lines, text, start, DiagnosticKind::SpansLines);
                }
                if let Ok(r) = Record::parse(value_text) {
                    keep_omp(r, text, start, out, lines);
                }
                if let Some(Skipped { at, resume }) = glued {
                    // Text after the value on its line: the rest of that line is lost.
                    // Bun's reader drops it silently when a line follows (so omp counts
                    // nothing malformed and does not rewrite the file for it); on the
                    // last line it reports an error, which omp counts.
                    push_diag(out, lines, text, at, DiagnosticKind::TrailingGarbage);
                    if resume.is_none() {
                        out.malformed += 1;
                        out.open_end = true;
                        return Stop { pos: len, rest_lost: true };
                    }
                }
            }
            Lenient::Incomplete { at } => {
                // An incomplete value runs to the end of the text: omp stops here, so
                // everything from its start on is lost (a torn tail, or garbage that
                // swallowed the following lines).
                out.malformed += 1;
                let kind = if !text[at..].contains('\n') {
                    DiagnosticKind::TornLastLine
                } else {
                    DiagnosticKind::Malformed {
                        reason: "a value runs to the end of the file; the rest is unreadable".into(),
                    }
                };
                push_diag(out, lines, text, at, kind);
                out.open_end = true;
                return Stop { pos: len, rest_lost: true };
            }
            Lenient::Syntax(Skipped { at, resume }) => {
                out.malformed += 1;
                push_diag(out, lines, text, at, DiagnosticKind::Malformed { reason: "not JSON".into() });
                if resume.is_none() {
                    out.open_end = true;
                    return Stop { pos: len, rest_lost: true };
                }
            }
        }
    }
}

fn keep_omp(r: Record, text: &str, pos: usize, out: &mut ParsedFile, lines: &mut LineCounter) {
    // The literal `null` only: `-1e400` (no `value()`, -Infinity in JavaScript) is kept.
    if !r.is_object() && kind(r.text()) == Kind::Null {
        // omp crashes on a null record; skip it and say so.
        out.malformed += 1;
        push_diag(out, lines, text, pos, DiagnosticKind::SkippedValue { text: "null".into() });
        return;
    }
    out.records.push(r);
    out.record_offsets.push(pos);
}

fn note_blank_lines(text: &str, from: usize, to: usize, out: &mut ParsedFile, lines: &mut LineCounter) {
    // A blank line is a `\n` whose line held only whitespace.
    let bytes = text.as_bytes();
    let mut line_start = from;
    let mut at_line_start = from == 0 || bytes.get(from.wrapping_sub(1)) == Some(&b'\n');
    for (i, &b) in bytes.iter().enumerate().take(to).skip(from) {
        if b == b'\n' {
            if at_line_start {
                push_diag(out, lines, text, line_start, DiagnosticKind::BlankLine);
            }
            at_line_start = true;
            line_start = i + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{HeaderCheck, parse_session_bytes};

    fn texts(p: &ParsedFile) -> Vec<&str> {
        p.records.iter().map(Record::text).collect()
    }

    /// A title slot torn at any byte by an interrupted in-place rename (new bytes, then
    /// old ones) never hides the header: the file still loads with its header first.
    #[test]
    fn a_torn_title_slot_never_hides_the_header() -> Result<(), crate::SlotTooLong> {
        let old = TitleSlot { title: "old".into(), source: None, updated_at: "2026-01-01T00:00:00.000Z".into() };
        let new = TitleSlot {
            title: "a much longer new title".into(),
            source: Some("user".into()),
            updated_at: "2026-12-01T22:33:04.123Z".into(),
        };
        let (old, new) = (old.to_line()?, new.to_line()?);
        let rest = concat!(
            r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/","title":"h"}"#,
            "\n",
            r#"{"type":"custom","id":"a","parentId":null}"#,
            "\n"
        );
        for cut in 0..=old.len() {
            let torn = format!("{}{}\n{rest}", &new[..cut], &old[cut..]);
            let parsed = parse_session_bytes(torn.as_bytes(), Dialect::Omp);
            assert!(
                parsed.records.first().is_some_and(Record::is_header),
                "cut at {cut}: {:?}",
                parsed.records.first()
            );
            assert_eq!(parsed.records.len(), 2, "cut at {cut}");
            if parsed.title_slot.is_none() {
                assert!(
                    parsed.diagnostics.iter().any(|d| d.kind == DiagnosticKind::DamagedTitleSlot
                        || matches!(d.kind, DiagnosticKind::Malformed { .. })),
                    "cut at {cut}"
                );
            }
        }
        Ok(())
    }

    #[test]
    fn omp_table_from_the_spec() {
        let cases: &[(&str, &[&str], usize)] = &[
            ("{\"a\":1}\n{\"b\":2}", &["{\"a\":1}", "{\"b\":2}"], 0),
            ("{\"a\":1}\n{\"b\":2", &["{\"a\":1}"], 1),
            ("{\"a\":1}\n{\"b\":2\n{\"c\":3}\n", &["{\"a\":1}", "{\"c\":3}"], 1),
            ("{\"a\":1}\nnot json\n{\"c\":3}\n", &["{\"a\":1}", "{\"c\":3}"], 1),
            // Text after a value on its line is dropped; Bun 1.3.14 counts it only on
            // the last line (the spec's Bun 1.4.5 counts both).
            ("{\"a\":1} x\n{\"c\":3}\n", &["{\"a\":1}", "{\"c\":3}"], 0),
            ("{\"a\":1}{\"b\":2}\n{\"c\":3}\n", &["{\"a\":1}", "{\"c\":3}"], 0),
            ("{\"a\":1} {\"b\":2}\n{\"c\":3}\r{\"d\":4}\n", &["{\"a\":1}", "{\"c\":3}"], 0),
            ("{\"a\":1}\n{\"c\":3}  {\"d\":4}", &["{\"a\":1}", "{\"c\":3}"], 1),
            ("{\"a\":1} \t\r\n{\"c\":3}\r", &["{\"a\":1}", "{\"c\":3}"], 0),
            ("\n  \n{\"a\":1}\r\n\r\n{\"c\":3}\r\n", &["{\"a\":1}", "{\"c\":3}"], 0),
            ("{\"a\":\n1}\n", &["{\"a\":\n1}"], 0),
            ("42\n\"s\"\n[1]\n", &["42", "\"s\"", "[1]"], 0),
            ("xx\n", &[], 1),
            // An incomplete value swallows the following lines up to the end.
            ("{\"a\":1}\n{\"t\":\"m\",\"id\":\n{\"c\":3}\n", &["{\"a\":1}"], 1),
            ("", &[], 0),
            ("   \n ", &[], 0),
        ];
        for (input, want, malformed) in cases {
            let p = parse_session_bytes(input.as_bytes(), Dialect::Omp);
            assert_eq!(texts(&p), *want, "{input:?}");
            assert_eq!(p.malformed, *malformed, "{input:?}");
        }
    }

    #[test]
    fn pi_lines() {
        let p = parse_session_bytes(
            b"xx\n{\"type\":\"session\",\"id\":\"s\"}\r\n\n0\nnull\n42\n{\"type\":\"mess",
            Dialect::Pi,
        );
        assert_eq!(texts(&p), ["{\"type\":\"session\",\"id\":\"s\"}", "42"]);
        assert!(p.diagnostics.iter().any(|d| d.kind == DiagnosticKind::TornLastLine && d.line == 7));
        assert!(!p.ends_with_newline);
        assert_eq!(p.header_check(Dialect::Pi), HeaderCheck::Valid { index: 0 });
    }

    #[test]
    fn bom_differs_by_dialect() {
        let input = "\u{feff}{\"type\":\"session\",\"id\":\"s\"}\n";
        assert_eq!(parse_session_bytes(input.as_bytes(), Dialect::Pi).header_check(Dialect::Pi), HeaderCheck::Empty);
        assert_eq!(
            parse_session_bytes(input.as_bytes(), Dialect::Omp).header_check(Dialect::Omp),
            HeaderCheck::Valid { index: 0 }
        );
    }
}
