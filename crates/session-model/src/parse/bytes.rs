//! The one-pass parse of a file's bytes held in memory: checked as UTF-8 (bytes that
//! are not become U+FFFD, with offsets still counted in the file's bytes), then read
//! by the dialect's grammar.

use std::borrow::Cow;

use crate::Dialect;
use crate::engine::ws::is_ws;

use super::grammar::{self, Maker};
use super::lines::LineCounter;
use super::parsed::{Diagnostic, DiagnosticKind, ParsedFile, check_structure};

/// Parses the bytes of a session file the way `dialect`'s reference reads it.
///
/// ```
/// use session_model::{parse_session_bytes, Dialect, HeaderCheck};
/// let text = b"{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\nnot json\n{\"type\":\"custom\",\"id\":\"a\"";
/// let parsed = parse_session_bytes(text, Dialect::Pi);
/// assert_eq!(parsed.records.len(), 1);
/// assert_eq!(parsed.header_check(Dialect::Pi), HeaderCheck::Valid { index: 0 });
/// assert_eq!(parsed.diagnostics.len(), 2); // the garbage line and the torn last line
/// ```
pub fn parse_session_bytes(bytes: &[u8], dialect: Dialect) -> ParsedFile {
    let mut out = parse_bytes(bytes, dialect, true);
    let notes = check_structure(&out, 0);
    let mut lines = LineCounter::default();
    for (offset, kind) in notes {
        let line = lines.line_at(bytes, offset);
        out.diagnostics.push(Diagnostic { line, offset, kind });
    }
    out
}

/// Parses `bytes` as [`parse_session_bytes`] does, from the start of a file
/// (`at_file_start`) or from a line start after it (no title slot or byte-order mark
/// at their start), without the record-level notes (the caller finds those among all
/// the file's records). Offsets and lines are the bytes' own.
pub(super) fn parse_bytes(bytes: &[u8], dialect: Dialect, at_file_start: bool) -> ParsedFile {
    let mut out = ParsedFile {
        byte_len: bytes.len(),
        ends_with_newline: bytes.is_empty() || bytes.last() == Some(&b'\n'),
        has_content: has_content(bytes),
        ..ParsedFile::default()
    };
    // SIMD validation first; the standard library's says where the first bad byte is.
    let valid = simdutf8::basic::from_utf8(bytes).map_err(|_| std::str::from_utf8(bytes));
    let (text, shifts) = match valid {
        Ok(t) | Err(Ok(t)) => (Cow::Borrowed(t), Vec::new()),
        Err(Err(e)) => {
            out.diagnostics.push(Diagnostic {
                line: LineCounter::default().line_at(bytes, e.valid_up_to()),
                offset: e.valid_up_to(),
                kind: DiagnosticKind::InvalidUtf8,
            });
            let (t, shifts) = decode_lossy(bytes);
            (Cow::Owned(t), shifts)
        }
    };
    let first_own = out.diagnostics.len();
    grammar::read(&text, dialect, at_file_start, &mut out, &mut Maker::Resident);
    if !shifts.is_empty() {
        // Offsets were taken in the decoded text; report them in the file's bytes.
        for d in &mut out.diagnostics[first_own..] {
            d.offset = original_offset(&shifts, d.offset);
        }
        for o in &mut out.record_offsets {
            *o = original_offset(&shifts, *o);
        }
    }
    out
}

/// Returns whether `bytes` hold anything but JSON whitespace.
pub(super) fn has_content(bytes: &[u8]) -> bool {
    bytes.iter().any(|&b| !is_ws(b))
}

/// Decodes `bytes` replacing invalid sequences by U+FFFD (as the references' decoders do),
/// and returns the points where decoded and original offsets diverge:
/// `(decoded offset after a replacement, original offset there)`.
fn decode_lossy(bytes: &[u8]) -> (String, Vec<(usize, usize)>) {
    let mut text = String::with_capacity(bytes.len() + 16);
    let mut shifts = Vec::new();
    let mut original = 0;
    for chunk in bytes.utf8_chunks() {
        text.push_str(chunk.valid());
        original += chunk.valid().len();
        if !chunk.invalid().is_empty() {
            text.push('\u{fffd}');
            original += chunk.invalid().len();
            shifts.push((text.len(), original));
        }
    }
    (text, shifts)
}

/// Maps an offset in the decoded text back to the file's bytes (see [`decode_lossy`]).
fn original_offset(shifts: &[(usize, usize)], decoded: usize) -> usize {
    match shifts.partition_point(|(d, _)| *d <= decoded) {
        0 => decoded,
        i => {
            let (d, o) = shifts[i - 1];
            o + (decoded - d)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_count_the_files_bytes_after_invalid_utf8() {
        let input = b"\xff\xfe{\"type\":\"session\",\"id\":\"s\"}\nnot json\n";
        let p = parse_session_bytes(input, Dialect::Pi);
        let bad = p.diagnostics.iter().find(|d| matches!(d.kind, DiagnosticKind::Malformed { .. } if d.line == 2));
        assert_eq!(bad.map(|d| d.offset), Some(input.len() - "not json\n".len()));
        assert!(p.diagnostics.iter().all(|d| d.offset <= input.len()));
    }

    /// Content is anything but JSON whitespace: a form feed is content (`JSON.parse`
    /// does not skip it, and the line holding it is malformed).
    #[test]
    fn content_is_anything_but_json_whitespace() {
        assert!(!parse_session_bytes(b" \t\r\n\n", Dialect::Pi).has_content);
        for dialect in [Dialect::Pi, Dialect::Omp] {
            let p = parse_session_bytes(b"\x0c\n", dialect);
            assert!(p.has_content && p.malformed == 1, "{dialect:?}");
        }
    }
}
