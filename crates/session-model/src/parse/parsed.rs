//! What a parse gives: the [`ParsedFile`], its [`Diagnostic`]s and whether its header
//! is valid, and the record-level notes found among its records once they are read.

use std::fmt;

use crate::Dialect;
use crate::record::Record;
use crate::title::TitleSlot;

/// Something the parser skipped, repaired or noticed, with where it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// 1-based line number of the start of the offending text.
    pub line: usize,
    /// Byte offset of the start of the offending text in the file.
    pub offset: usize,
    /// What happened.
    pub kind: DiagnosticKind,
}

/// The kinds of [`Diagnostic`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DiagnosticKind {
    /// A blank or whitespace-only line (skipped, harmless).
    BlankLine,
    /// A line ending in `\r\n` (the `\r` is ignored).
    CrLf,
    /// A UTF-8 byte-order mark at the start of the file.
    Bom,
    /// Bytes that are not UTF-8 (replaced by U+FFFD).
    InvalidUtf8,
    /// Text that is not JSON (skipped).
    Malformed {
        /// The JSON error.
        reason: String,
    },
    /// The last line has no newline and does not parse: a write that was cut off.
    TornLastLine,
    /// The last line has no terminating newline (but parses).
    MissingFinalNewline,
    /// A value that is not an object and is skipped (`null`, `false`, `0`, `""`).
    SkippedValue {
        /// The value's JSON text.
        text: String,
    },
    /// A value that is not an object and is kept, as the reference keeps it.
    NonObject {
        /// The value's JSON text.
        text: String,
    },
    /// Text after a value on the same line (omp: lost).
    TrailingGarbage,
    /// A JSON value that spans several lines (omp accepts it).
    SpansLines,
    /// A second `type: "session"` record after the header.
    DuplicateHeader,
    /// An entry id seen before (the later record wins in the index).
    DuplicateId {
        /// The id.
        id: String,
    },
    /// Records before the header that a reference tolerates.
    BeforeHeader,
    /// omp: the first line is a title slot that an interrupted in-place rename left
    /// damaged (an object of type `"title"` that is no valid slot); it is skipped and
    /// the title comes from the header.
    DamagedTitleSlot,
}

impl DiagnosticKind {
    /// Returns whether this is a note about a record as a whole (a value that is not an
    /// object, a second header, a reused id), found after the lines were read, rather
    /// than about a line's text. A parse lists such notes after the others.
    pub fn is_note(&self) -> bool {
        matches!(
            self,
            DiagnosticKind::NonObject { .. } | DiagnosticKind::DuplicateHeader | DiagnosticKind::DuplicateId { .. }
        )
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {} (byte {}): ", self.line, self.offset)?;
        match &self.kind {
            DiagnosticKind::BlankLine => f.write_str("blank line skipped"),
            DiagnosticKind::CrLf => f.write_str("CRLF line ending"),
            DiagnosticKind::Bom => f.write_str("UTF-8 byte-order mark"),
            DiagnosticKind::DamagedTitleSlot => {
                f.write_str("damaged title slot skipped (the title comes from the header)")
            }
            DiagnosticKind::InvalidUtf8 => f.write_str("invalid UTF-8 replaced by U+FFFD"),
            DiagnosticKind::Malformed { reason } => write!(f, "not JSON, skipped: {reason}"),
            DiagnosticKind::TornLastLine => f.write_str("torn last line skipped (an interrupted write)"),
            DiagnosticKind::MissingFinalNewline => f.write_str("last line has no newline"),
            DiagnosticKind::SkippedValue { text } => write!(f, "value {text} skipped"),
            DiagnosticKind::NonObject { text } => write!(f, "non-object value {text} kept"),
            DiagnosticKind::TrailingGarbage => f.write_str("text after a value on the same line skipped"),
            DiagnosticKind::SpansLines => f.write_str("value spans several lines"),
            DiagnosticKind::DuplicateHeader => f.write_str("stray duplicate header"),
            DiagnosticKind::DuplicateId { id } => write!(f, "duplicate entry id {id}"),
            DiagnosticKind::BeforeHeader => f.write_str("record before the header"),
        }
    }
}

/// The result of parsing one session file.
#[derive(Clone, Debug, Default)]
pub struct ParsedFile {
    /// omp's title slot (first physical line), when present.
    pub title_slot: Option<TitleSlot>,
    /// Every kept value in file order, the header included.
    pub records: Vec<Record>,
    /// The byte offset in the file of the line (pi) or value (omp) each record was read
    /// from, parallel to [`ParsedFile::records`].
    pub record_offsets: Vec<usize>,
    /// Everything skipped or noticed.
    pub diagnostics: Vec<Diagnostic>,
    /// Number of malformed records (omp's `malformedRecords`): unparseable text,
    /// torn lines, trailing garbage and skipped `null`s.
    pub malformed: usize,
    /// Whether the file ends with `\n` (or is empty).
    pub ends_with_newline: bool,
    /// Byte length of the input.
    pub byte_len: usize,
    /// Whether the file held any byte but JSON whitespace (space, tab, `\n`, `\r`).
    pub has_content: bool,
    /// Whether the parse stopped inside a value that runs to the end of the file (omp:
    /// everything from its start on is lost; bytes appended later may complete it).
    pub open_end: bool,
}

/// Whether a parsed file has a usable header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeaderCheck {
    /// The first record is a header with a string id (at `records[index]`).
    Valid {
        /// Index of the header in [`ParsedFile::records`].
        index: usize,
    },
    /// No record at all (an empty or whitespace-only file, for pi also pure garbage).
    Empty,
    /// The first record is not a valid header, or (omp) only garbage was found.
    Invalid {
        /// Why, for the error message.
        reason: String,
    },
}

impl ParsedFile {
    /// Returns whether the file starts (after skipped text) with a valid header,
    /// following the reference's rule for `dialect`.
    pub fn header_check(&self, dialect: Dialect) -> HeaderCheck {
        match self.records.first() {
            None => match dialect {
                Dialect::Omp if self.malformed > 0 => {
                    HeaderCheck::Invalid { reason: "the file holds no JSON record".into() }
                }
                _ => HeaderCheck::Empty,
            },
            Some(r) if r.is_valid_header() => HeaderCheck::Valid { index: 0 },
            Some(r) if r.is_header() => HeaderCheck::Invalid { reason: "the header has no string id".into() },
            Some(_) => HeaderCheck::Invalid { reason: "the first record is not a session header".into() },
        }
    }

    /// Returns the header record, if the file has a valid one.
    pub fn header(&self) -> Option<&Record> {
        self.records.first().filter(|r| r.is_valid_header())
    }
}

/// Returns the non-object values, stray headers and duplicate ids of a parsed file's
/// records from index `from` on, each with the byte offset of its record, in file
/// order (the records before `from` count only for their ids).
pub(super) fn check_structure(out: &ParsedFile, from: usize) -> Vec<(usize, DiagnosticKind)> {
    fn id_of(r: &Record) -> Option<&str> {
        if r.is_object() && !r.is_header() { r.id() } else { None }
    }
    let from = from.min(out.records.len());
    // The ids seen before `from` matter only where a later record reuses them: the later
    // records' ids (few, when a parse continues over appended bytes) are looked up in
    // the earlier ones, not the other way round.
    let later = out.records.len() - from;
    // Sized for every id at once: growing would hash every id again.
    let mut seen = crate::idhash::IdSet::with_capacity_and_hasher(later, Default::default());
    if from > 0 && later > 0 {
        let ids: crate::idhash::IdSet<&str> = out.records[from..].iter().filter_map(id_of).collect();
        seen.extend(out.records[..from].iter().filter_map(id_of).filter(|id| ids.contains(id)));
    }
    let mut notes = Vec::new();
    for (i, r) in out.records.iter().enumerate().skip(from) {
        let offset = out.record_offsets.get(i).copied().unwrap_or(0);
        if !r.is_object() {
            notes.push((offset, DiagnosticKind::NonObject { text: r.text().to_owned() }));
            continue;
        }
        if r.is_header() {
            if i > 0 {
                notes.push((offset, DiagnosticKind::DuplicateHeader));
            }
            continue;
        }
        if let Some(id) = r.id()
            && !seen.insert(id)
        {
            notes.push((offset, DiagnosticKind::DuplicateId { id: id.to_owned() }));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_session_bytes;

    #[test]
    fn header_rules() {
        let p = parse_session_bytes(b"{\"type\":\"session\",\"id\":5}\n", Dialect::Pi);
        assert!(matches!(p.header_check(Dialect::Pi), HeaderCheck::Invalid { .. }));
        let p = parse_session_bytes(b"garbage\n", Dialect::Omp);
        assert!(matches!(p.header_check(Dialect::Omp), HeaderCheck::Invalid { .. }));
        let p = parse_session_bytes(b"garbage\n", Dialect::Pi);
        assert_eq!(p.header_check(Dialect::Pi), HeaderCheck::Empty);
        assert!(p.has_content);
    }
}
