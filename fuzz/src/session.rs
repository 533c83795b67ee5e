//! The checks of one lenient parse of a session file: what the `parse_pi` and
//! `parse_omp` targets assert, and what `migrate` reuses to write records back.

use serde_json::Value;
use session_model::scan;
use session_model::typed::TypedError;
use std::sync::Arc;

use session_model::{
    Bodies, DiagnosticKind, Dialect, HeaderCheck, Parallelism, ParentRef, ParsedFile, ReadAt, Record, SpanPolicy,
    parse_session_at, parse_session_at_in_pieces, parse_session_bytes, parse_session_spans, parse_session_tail, span,
    stored,
};

/// A file that gives at most `max` bytes per read, as a real file may.
struct ShortReads<'a> {
    bytes: &'a [u8],
    max: usize,
}

impl ReadAt for ShortReads<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let n = buf.len().min(self.max);
        self.bytes.read_at(&mut buf[..n], offset)
    }
}

/// Returns whether a diagnostic kind is about the kept records as a whole (reported
/// at line 0, offset 0) rather than about a place in the text.
pub fn is_structural(kind: &DiagnosticKind) -> bool {
    matches!(
        kind,
        DiagnosticKind::NonObject { .. } | DiagnosticKind::DuplicateHeader | DiagnosticKind::DuplicateId { .. }
    )
}

/// Writes a parsed file back without changes, as a writer that rewrites it does:
/// the title slot (omp) then every record's line, each followed by `\n`. `None` when
/// the slot cannot be written back (its timestamp alone overflows the slot).
pub fn write_back(parsed: &ParsedFile) -> Option<String> {
    let mut out = String::new();
    if let Some(slot) = &parsed.title_slot {
        out.push_str(&slot.to_line().ok()?);
    }
    for r in &parsed.records {
        out.push_str(&r.line());
        out.push('\n');
    }
    Some(out)
}

/// Asserts that two parses of the same bytes are the same in every field.
pub fn assert_same_parse(got: &ParsedFile, want: &ParsedFile, what: &str) {
    assert_eq!(got.records, want.records, "{what}: records differ");
    assert_eq!(got.diagnostics, want.diagnostics, "{what}: diagnostics differ");
    assert_eq!(got.malformed, want.malformed, "{what}: malformed counts differ");
    assert_eq!(got.title_slot, want.title_slot, "{what}: title slots differ");
    assert_eq!(got.ends_with_newline, want.ends_with_newline, "{what}: ends_with_newline differs");
    assert_eq!(got.byte_len, want.byte_len, "{what}: byte_len differs");
    assert_eq!(got.has_content, want.has_content, "{what}: has_content differs");
}

/// Runs every check of the parse of `data` as `dialect` and returns the parse.
///
/// * the file-level fields describe the bytes (length, final newline, content);
/// * each diagnostic's line is 1 + the newlines before its byte offset (record-level
///   ones, a non-object value, a second header, a duplicate id, at their record's);
/// * every kept record passes [`check_record`];
/// * a file with a valid header, written back from what was kept, parses to the same
///   lines with nothing skipped but blank lines;
/// * the piecewise parse (`parse_session_at`) with a piece size, a stated size and a
///   read size derived from the input's hash and the public `parse_session_at` give
///   exactly the same result as `parse_session_bytes`.
pub fn check_parse(data: &[u8], dialect: Dialect) -> ParsedFile {
    let parsed = parse_session_bytes(data, dialect);
    assert_eq!(parsed.byte_len, data.len());
    assert_eq!(parsed.ends_with_newline, data.last().is_none_or(|&b| b == b'\n'));
    // Content is anything but JSON whitespace (space, tab, line feed, carriage return).
    assert_eq!(parsed.has_content, data.iter().any(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r')));
    for d in &parsed.diagnostics {
        assert!(d.offset <= data.len(), "offset past the end of the file: {d}");
        let line = 1 + data[..d.offset].iter().filter(|&&b| b == b'\n').count();
        assert_eq!(d.line, line, "line and offset disagree: {d}");
    }
    for d in &parsed.diagnostics {
        // pi skips the falsy values (`null`, `false`, `0`, `""`), omp only `null`.
        if let DiagnosticKind::SkippedValue { text } = &d.kind {
            match dialect {
                Dialect::Pi => assert!(!scan::truthy(text), "a truthy value was skipped: {d}"),
                Dialect::Omp => {
                    assert!(data[d.offset..].starts_with(b"null"), "a value that is not null was skipped: {d}")
                }
            }
        }
    }
    for r in &parsed.records {
        check_record(r);
        if !r.is_object() {
            match dialect {
                Dialect::Pi => assert!(scan::truthy(r.text()), "a falsy value was kept: {:?}", r.text()),
                Dialect::Omp => assert!(r.text() != "null", "a null was kept"),
            }
        }
    }
    match parsed.header_check(dialect) {
        HeaderCheck::Valid { index } => {
            assert!(parsed.records[index].is_valid_header());
            assert!(parsed.header().is_some());
            check_written_back(&parsed, dialect);
        }
        HeaderCheck::Empty => assert!(parsed.records.is_empty()),
        HeaderCheck::Invalid { .. } => assert!(parsed.header().is_none()),
    }

    let h = crate::hash(data);
    // From one piece to about 32 of them (pieces of one byte for the smallest inputs).
    let len = data.len() as u64;
    let piece = (len / 32).max(1) + (h >> 8) % (len + 1);
    let stated = (data.len() as i64 - ((h >> 32) % 17) as i64 + 8).max(0) as u64;
    let max = if h & 2 == 0 { usize::MAX } else { 1 + ((h >> 40) % 4096) as usize };
    let file = ShortReads { bytes: data, max };
    let pieces = parse_session_at_in_pieces(&file, stated, dialect, piece).expect("a slice reads");
    assert_same_parse(&pieces, &parsed, &format!("pieces of {piece} bytes, stated size {stated}, reads of {max}"));
    let at = parse_session_at(data, data.len() as u64, dialect).expect("a slice reads");
    assert_same_parse(&at, &parsed, "parse_session_at");
    check_spans(data, dialect, &parsed, h, piece);
    parsed
}

/// The skeleton of a record, read without its text.
fn skeleton(r: &Record) -> (session_model::EntryType, Option<String>, Option<String>, String, Option<String>, Option<String>, bool) {
    (
        r.entry_type(),
        r.type_str().map(str::to_owned),
        r.id_key().map(|k| k.into_owned()),
        format!("{:?}", r.parent()),
        r.timestamp().map(str::to_owned),
        r.message_role().map(str::to_owned),
        r.is_object(),
    )
}

/// Records read by position: the parse that leaves texts in the file (pieces and the
/// smallest record kept by position from the input's hash) has the one-pass parse's
/// skeletons before any text is read, then its records and everything else; written
/// down and read back ([`stored`]) it is the same parse; the lines a whole-file write
/// reads back ([`span::lines`]) are the records' lines; and a parse of the first lines
/// continued over the rest ([`parse_session_tail`]) is the one-pass parse.
fn check_spans(data: &[u8], dialect: Dialect, parsed: &ParsedFile, h: u64, piece: u64) {
    let len = data.len() as u64;
    let policy = SpanPolicy { from_record_size: ((h >> 50) % 96) as usize, ..SpanPolicy::everything(piece) };
    let threads = Parallelism::new(2);
    let bodies = Arc::new(Bodies::new(Box::new(data.to_vec())));
    let spans = parse_session_spans(&bodies, len, dialect, threads, policy).expect("a slice reads");
    assert_eq!(spans.records.len(), parsed.records.len(), "spans: record counts differ");
    for (a, b) in spans.records.iter().zip(&parsed.records) {
        assert_eq!(skeleton(a), skeleton(b), "spans: skeletons differ");
    }
    assert_eq!(bodies.reads(), 0, "spans: a skeleton read a text");
    let back = stored::decode(&stored::encode(&spans), &bodies).expect("a stored parse reads back");
    let mut buf = Vec::new();
    let lines: Vec<String> =
        span::lines(&spans.records, &mut buf).expect("the texts read").iter().map(|l| l.to_string()).collect();
    let want: Vec<String> = parsed.records.iter().map(|r| r.line().into_owned()).collect();
    assert_eq!(lines, want, "spans: lines read back for a write differ");
    assert_same_parse(&spans, parsed, "spans");
    assert_same_parse(&back, parsed, "stored and read back");
    assert_eq!(back.open_end, parsed.open_end, "stored: open_end differs");
    // A prefix ending at a line's end (or anywhere), continued over the rest.
    let ends: Vec<usize> = data.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i + 1).collect();
    let cut = match ends.len() {
        0 => data.len() / 2,
        _ if h % 7 == 0 => (h >> 16) as usize % (data.len() + 1),
        n => ends[(h >> 16) as usize % n],
    };
    let first = Arc::new(Bodies::new(Box::new(data[..cut].to_vec())));
    let before = parse_session_spans(&first, cut as u64, dialect, threads, policy).expect("a slice reads");
    let continued = parse_session_tail(&bodies, before, len, dialect, threads, policy).expect("a slice reads");
    assert_same_parse(&continued, parsed, &format!("continued after byte {cut}"));
}

/// Writes `parsed` back and checks that it reads back the same, cleanly.
pub fn check_written_back(parsed: &ParsedFile, dialect: Dialect) {
    let Some(written) = write_back(parsed) else { return };
    let again = parse_session_bytes(written.as_bytes(), dialect);
    let lines = |p: &ParsedFile| p.records.iter().map(|r| r.line().into_owned()).collect::<Vec<_>>();
    assert_eq!(lines(&again), lines(parsed), "written back and read again: {written:?}");
    // A slot is written back whole, its title shortened only if it did not fit.
    match (&parsed.title_slot, &again.title_slot) {
        (None, None) => {}
        (Some(read), Some(back)) => {
            assert!(
                read.title.starts_with(&back.title),
                "slot title {:?} written back as {:?}",
                read.title,
                back.title
            );
            assert_eq!((&read.source, &read.updated_at), (&back.source, &back.updated_at));
        }
        (read, back) => panic!("title slot {read:?} written back as {back:?}"),
    }
    let unclean: Vec<_> =
        again.diagnostics.iter().filter(|d| !is_structural(&d.kind) && d.kind != DiagnosticKind::BlankLine).collect();
    assert!(unclean.is_empty(), "{unclean:?} in a file written back: {written:?}");
}

/// Checks one kept record.
///
/// * its line is one line (no `\n`, no `\r`), the text itself when the text is one
///   line and its numbers are exact (else what `JSON.stringify` writes), and parses
///   back to a record with the same value (or, for a record too deep to read as a
///   tree, to the same text), the same kind and string fields;
/// * in it and in the record read back from its line, the skeleton the scanner read
///   (type, id, parent, timestamp, message) agrees with the value serde_json reads;
/// * its serialisations (`Serialize`, `canonical_line`) succeed.
pub fn check_record(r: &Record) {
    let line = r.line();
    assert!(!line.contains(['\n', '\r']), "a record line holds a line break: {line:?}");
    if !r.text().contains(['\n', '\r']) && (r.numbers_exact() || !r.is_object()) {
        assert_eq!(line, r.text(), "a one-line record is not written back as read");
    }
    if r.is_object() && !r.numbers_exact() {
        // Numbers JavaScript reads as other values are written as it writes them back.
        assert_eq!(line, r.canonical_line(), "a record with inexact numbers is not written as JSON.stringify would");
    }
    let again = Record::parse(&line).unwrap_or_else(|e| panic!("a kept record's line does not parse ({e}): {line:?}"));
    let same = match (again.try_value(), r.try_value()) {
        (Some(a), Some(b)) => crate::same_json(a, b),
        (a, b) => a == b,
    };
    assert!(same, "the line of {:?} reads as another value: {line:?}", r.text());
    // Numbers beyond f64 are written as null (as JSON.stringify writes Infinity), so
    // only the fields that are strings or kinds must read back unchanged.
    assert_eq!(again.is_object(), r.is_object());
    assert_eq!(again.entry_type(), r.entry_type());
    assert_eq!(again.type_str(), r.type_str());
    assert_eq!(again.id(), r.id());
    assert_eq!(again.parent().id(), r.parent().id());
    assert_eq!(again.timestamp(), r.timestamp());
    assert_eq!(again.message_info().role(), r.message_info().role());
    check_skeleton(r);
    check_skeleton(&again);
    serde_json::to_string(r).unwrap_or_else(|e| panic!("a kept record does not serialise ({e}): {:?}", r.text()));
    let _ = r.canonical_line();
    check_typed(r);
}

/// Checks that the typed model reads a record as an entry that writes back the same
/// value, or refuses it with an error naming a key (never a panic).
fn check_typed(r: &Record) {
    match r.entry() {
        Ok(entry) => {
            let written = Record::from_entry(&entry);
            if let (Some(a), Some(b)) = (written.try_value(), r.try_value()) {
                assert!(crate::same_json(a, b), "the typed entry of {:?} writes {:?}", r.text(), written.text());
            }
        }
        Err(TypedError::Field { path, .. }) => assert!(!path.is_empty(), "a typed error without a path"),
        Err(e) => assert!(r.try_value().is_none(), "a record with a JSON tree is refused: {e}"),
    }
}

/// Checks that the skeleton the scanner read from a record's text agrees with the
/// value serde_json reads from it, where a number beyond f64 reads as null.
fn check_skeleton(r: &Record) {
    let Some(value) = r.try_value() else { return };
    assert_eq!(r.is_object(), value.is_object());
    let str_field = |k: &str| value.get(k).and_then(Value::as_str);
    assert_eq!(r.type_str(), str_field("type"), "type of {:?}", r.text());
    assert_eq!(r.id(), str_field("id"), "id of {:?}", r.text());
    assert_eq!(r.timestamp(), str_field("timestamp"), "timestamp of {:?}", r.text());
    // The raw member `key`, when it is a number beyond f64 (null in the value).
    let obj = scan::Obj::parse(r.text());
    let infinite =
        |key: &str| obj.as_ref().and_then(|o| o.get(key)).and_then(scan::number).is_some_and(f64::is_infinite);
    let parent = match value.get("parentId") {
        _ if !value.is_object() => ParentRef::Absent,
        None => ParentRef::Absent,
        Some(Value::Null) if infinite("parentId") => ParentRef::Invalid,
        Some(Value::Null) => ParentRef::Null,
        Some(Value::String(s)) => ParentRef::Id(s),
        Some(_) => ParentRef::Invalid,
    };
    assert_eq!(r.parent(), parent, "parentId of {:?}", r.text());
    let message = value.get("message").filter(|m| !m.is_null() || infinite("message"));
    let raw = r.message_raw();
    assert_eq!(raw.is_some(), message.is_some(), "message of {:?}", r.text());
    if let (Some(raw), Some(message)) = (raw, message) {
        let read = serde_json::from_str::<Value>(&raw).ok();
        if let Some(read) = read {
            assert!(crate::same_json(&read, message), "message of {:?}", r.text());
        }
        let role = message.get("role").and_then(Value::as_str);
        assert_eq!(r.message_info().role(), role, "message role of {:?}", r.text());
    }
}
