//! The lenient JSONL parser: bytes in, records and diagnostics out. Pure; never panics.
//!
//! The two references read differently, so the parser takes a [`Dialect`]:
//!
//! * **pi** splits on `\n`; a line that is blank, does not parse, or parses to a
//!   falsy value (`null`, `0`, `false`, `""`) is skipped; every other value is kept,
//!   non-objects included. A UTF-8 BOM is not stripped (the header line then fails).
//! * **omp** strips a leading BOM, splits off the 256-byte title slot, and reads a
//!   stream of JSON values separated by whitespace, so a value may span lines. After
//!   a syntax error it resynchronises at the next `\n` after the failing value's
//!   start. A value directly followed by non-whitespace loses the rest of its line.
//!   `null` records (which crash omp) are skipped and reported.
//!
//! Everything skipped is reported as a [`Diagnostic`] with its 1-based line number
//! and byte offset. Whether the header is valid is decided by [`ParsedFile::header_check`].

use std::fmt;
use std::sync::Arc;

use crate::Dialect;
use crate::record::{Record, RecordParseError};
use crate::span::{Bodies, SPAN_FROM, SpanBuilder};
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
    /// Whether the file held any non-whitespace byte.
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
    let mut out = ParsedFile {
        byte_len: bytes.len(),
        ends_with_newline: bytes.is_empty() || bytes.last() == Some(&b'\n'),
        has_content: bytes.iter().any(|b| !b.is_ascii_whitespace()),
        ..ParsedFile::default()
    };
    // SIMD validation first; the standard library's says where the first bad byte is.
    let valid = simdutf8::basic::from_utf8(bytes).map_err(|_| std::str::from_utf8(bytes));
    let (text, shifts) = match valid {
        Ok(t) | Err(Ok(t)) => (std::borrow::Cow::Borrowed(t), Vec::new()),
        Err(Err(e)) => {
            out.diagnostics.push(Diagnostic {
                line: line_of(bytes, e.valid_up_to()),
                offset: e.valid_up_to(),
                kind: DiagnosticKind::InvalidUtf8,
            });
            let (t, shifts) = decode_lossy(bytes);
            (std::borrow::Cow::Owned(t), shifts)
        }
    };
    let first_own = out.diagnostics.len();
    parse_text(&text, dialect, &mut out);
    if !shifts.is_empty() {
        // Offsets were taken in the decoded text; report them in the file's bytes.
        for d in &mut out.diagnostics[first_own..] {
            d.offset = original_offset(&shifts, d.offset);
        }
        for o in &mut out.record_offsets {
            *o = original_offset(&shifts, *o);
        }
    }
    let notes = check_structure(&out, 0);
    let mut lines = ByteLines::default();
    for (offset, kind) in notes {
        let line = lines.line_at(bytes, offset);
        out.diagnostics.push(Diagnostic { line, offset, kind });
    }
    out
}

/// [`parse_session_at`] reading a file of any size in pieces of `piece` bytes, for
/// the fuzz targets, which compare it with [`parse_session_bytes`] on inputs far
/// smaller than the size the library reads in pieces from.
#[cfg(feature = "fuzzing")]
pub fn parse_session_at_in_pieces<R: ReadAt + ?Sized>(
    file: &R,
    size: u64,
    dialect: Dialect,
    piece: u64,
) -> std::io::Result<ParsedFile> {
    parse_in_pieces(file, size, dialect, piece, 0, MAX_PIECE_WORKERS, None)
}

/// Line numbers of increasing offsets in bytes, counted once over the bytes.
#[derive(Default)]
struct ByteLines {
    pos: usize,
    newlines: usize,
}

impl ByteLines {
    fn line_at(&mut self, bytes: &[u8], offset: usize) -> usize {
        let offset = offset.min(bytes.len());
        if offset < self.pos {
            *self = ByteLines::default();
        }
        self.newlines += memchr::memchr_iter(b'\n', &bytes[self.pos..offset]).count();
        self.pos = offset;
        self.newlines + 1
    }
}

/// A file read by position: what [`parse_session_at`] reads from.
pub trait ReadAt: Sync {
    /// Reads bytes from `offset` into `buf`; returns how many were read (0 at the
    /// end of the file). May read fewer than asked for.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize>;

    /// Reads into `buf` from `offset` until it is full or the file ends (retrying
    /// interrupted reads); returns how many bytes were read.
    fn read_full_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match self.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    /// Returns a stamp of the bytes' state: two calls give the same stamp only if no
    /// byte changed in between, as far as the reader can tell (a file's size, times
    /// and identity; any constant for bytes that never change). `None` (the default)
    /// when it cannot tell: every text read again is then checked in full.
    fn stamp(&self) -> Option<u128> {
        None
    }
}

impl ReadAt for [u8] {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let start = usize::try_from(offset).map_or(self.len(), |o| o.min(self.len()));
        let n = buf.len().min(self.len() - start);
        buf[..n].copy_from_slice(&self[start..start + n]);
        Ok(n)
    }

    fn stamp(&self) -> Option<u128> {
        Some(0) // Bytes in memory never change behind the reader.
    }
}

impl ReadAt for Vec<u8> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.as_slice().read_at(buf, offset)
    }

    fn stamp(&self) -> Option<u128> {
        Some(0)
    }
}

/// The piece size of [`parse_session_at`]: a piece and its parse stay in the
/// processor's cache.
const PIECE: u64 = 1 << 20;

/// From this size on, [`parse_session_at`] reads a file in pieces on several threads;
/// below it one whole read and one pass cost less than the threads.
const PIECES_FROM: u64 = 4 << 20;

/// Parses a session file of `size` bytes (its size when it was opened) read through
/// `file`, exactly as [`parse_session_bytes`] parses its bytes, without holding the
/// whole file in memory: a file of 4 MiB or more is read in pieces of about 1 MiB cut
/// at line starts, each validated and parsed by one of a few threads as soon as it
/// is read, into a buffer the thread reuses. A file smaller than that, one whose
/// bytes are not all UTF-8, one that shrinks while it is read, and (omp) one with a
/// value that spans a cut are read whole and parsed with [`parse_session_bytes`].
/// Bytes appended while the file is read are read too, as a whole read would.
///
/// ```
/// use session_model::{parse_session_at, parse_session_bytes, Dialect};
/// let text = b"{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n".to_vec();
/// let parsed = parse_session_at(&text, text.len() as u64, Dialect::Pi).unwrap();
/// assert_eq!(parsed.records, parse_session_bytes(&text, Dialect::Pi).records);
/// ```
pub fn parse_session_at<R: ReadAt + ?Sized>(file: &R, size: u64, dialect: Dialect) -> std::io::Result<ParsedFile> {
    parse_session_at_with(file, size, dialect, crate::Parallelism::default())
}

/// [`parse_session_at`] with at most `parallelism` threads (and never more than four:
/// past that the disk, not the parse, sets the pace).
pub fn parse_session_at_with<R: ReadAt + ?Sized>(
    file: &R,
    size: u64,
    dialect: Dialect,
    parallelism: crate::Parallelism,
) -> std::io::Result<ParsedFile> {
    parse_in_pieces(file, size, dialect, PIECE, PIECES_FROM, parallelism.threads().min(MAX_PIECE_WORKERS), None)
}

/// When [`parse_session_spans`] leaves texts in the file, and how it reads it.
///
/// The default keeps every text of a file under 4 MiB in memory (one read and one
/// pass cost less than pieces there), and in larger files the text of every record
/// of 256 bytes or more that can be read by position (see [`crate::span`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpanPolicy {
    /// Files smaller than this are read whole and keep every text in memory.
    pub from_file_size: u64,
    /// Records shorter than this keep their text in memory.
    pub from_record_size: usize,
    /// The size of the pieces a file is read and parsed in (at least 1).
    pub piece: u64,
}

impl Default for SpanPolicy {
    fn default() -> SpanPolicy {
        SpanPolicy { from_file_size: PIECES_FROM, from_record_size: SPAN_FROM, piece: PIECE }
    }
}

impl SpanPolicy {
    /// A policy that leaves every text it can in the file, whatever the sizes, reading
    /// the file in pieces of `piece` bytes: for tests, which make every record of small
    /// files go through the file.
    pub fn everything(piece: u64) -> SpanPolicy {
        SpanPolicy { from_file_size: 0, from_record_size: 0, piece: piece.max(1) }
    }
}

/// [`parse_session_at_with`] keeping the text of large records in the file: each
/// record that `policy` and [`crate::span`] allow keeps only its skeleton in memory
/// and reads its text through `bodies` when first asked for. Memory then grows with
/// the number of records, not with their bytes. A file that is read whole (smaller
/// than the policy's size, not all UTF-8, or with an omp value across a piece's end)
/// keeps every text in memory, as [`parse_session_at_with`] does; either way every
/// record reads the same as there.
///
/// ```
/// use std::sync::Arc;
/// use session_model::{parse_session_bytes, parse_session_spans, Bodies, Dialect, Parallelism, SpanPolicy};
/// let mut text = b"{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n".to_vec();
/// let line = format!("{{\"type\":\"custom\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"t\",\"data\":\"{}\"}}\n", "x".repeat(1000));
/// while text.len() < 5 << 20 {
///     text.extend_from_slice(line.as_bytes());
/// }
/// let size = text.len() as u64;
/// let bodies = Arc::new(Bodies::new(Box::new(text.clone())));
/// let parsed = parse_session_spans(&bodies, size, Dialect::Pi, Parallelism::new(2), SpanPolicy::default()).unwrap();
/// assert!(!parsed.records[1].is_loaded());
/// assert_eq!(parsed.records[1].id(), Some("a"));
/// assert_eq!(parsed.records[1].text(), line.trim_end());
/// assert_eq!(bodies.reads(), 1);
/// assert_eq!(parsed.records, parse_session_bytes(&text, Dialect::Pi).records);
/// ```
pub fn parse_session_spans(
    bodies: &Arc<Bodies>,
    size: u64,
    dialect: Dialect,
    parallelism: crate::Parallelism,
    policy: SpanPolicy,
) -> std::io::Result<ParsedFile> {
    let workers = parallelism.threads().min(MAX_PIECE_WORKERS);
    let spans = Some((bodies, policy.from_record_size));
    parse_in_pieces(bodies.reader(), size, dialect, policy.piece.max(1), policy.from_file_size, workers, spans)
}

/// The most threads a piecewise parse uses.
const MAX_PIECE_WORKERS: usize = 4;

/// One piece's parse: the piece's place, what it gave and whether it holds anything
/// but whitespace.
struct Piece {
    start: u64,
    parsed: ParsedFile,
    has_content: bool,
    /// The last byte of the file (final piece only).
    last_byte: Option<u8>,
}

/// What a parse in pieces reads and how.
struct Job<'a, R: ?Sized> {
    file: &'a R,
    /// The file's size when it was opened.
    size: u64,
    dialect: Dialect,
    piece: u64,
    /// Where the parse starts: 0, or for a continuation ([`parse_session_tail`]) the
    /// start of a line after a parse that needs nothing before it.
    start: u64,
    /// Records are held by position through these bodies when at least this long.
    spans: Option<(&'a Arc<Bodies>, usize)>,
}

impl<R: ReadAt + ?Sized> Job<'_, R> {
    /// Reads `[start, end of file)` whole and parses it in one pass, every text in memory.
    fn whole(&self) -> std::io::Result<ParsedFile> {
        let mut bytes = Vec::with_capacity(usize::try_from(self.size.saturating_sub(self.start)).unwrap_or(0));
        read_to_end_at(self.file, &mut bytes, self.start)?;
        if self.start == 0 {
            // Without the record-level notes, which the caller adds for every parse.
            let mut parsed = parse_session_bytes(&bytes, self.dialect);
            parsed.diagnostics.retain(|d| !d.kind.is_note());
            return Ok(parsed);
        }
        let mut tail = parse_continuation(&bytes, self.dialect);
        let base = usize::try_from(self.start).unwrap_or(usize::MAX);
        let lines_before = if tail.diagnostics.is_empty() { 0 } else { count_newlines(self.file, 0, self.start)? };
        // Offsets and the length count from the file's start, as a parse in pieces counts them.
        tail.byte_len += base;
        for o in &mut tail.record_offsets {
            *o += base;
        }
        for d in &mut tail.diagnostics {
            d.offset += base;
            d.line += lines_before;
        }
        Ok(tail)
    }
}

/// [`parse_session_at`] with its piece size and the size from which it reads in
/// pieces.
fn parse_in_pieces<R: ReadAt + ?Sized>(
    file: &R,
    size: u64,
    dialect: Dialect,
    piece: u64,
    pieces_from: u64,
    workers: usize,
    spans: Option<(&Arc<Bodies>, usize)>,
) -> std::io::Result<ParsedFile> {
    let job = Job { file, size, dialect, piece: piece.max(1), start: 0, spans };
    let parsed = parse_job(&job, pieces_from, workers)?;
    let notes = structure_notes(&job, &parsed, 0)?;
    Ok(with_notes(parsed, Vec::new(), notes))
}

/// Returns `parsed` with the record-level notes after the line diagnostics: `earlier`
/// (those of the records before a continuation) first, then `notes`.
fn with_notes(mut parsed: ParsedFile, earlier: Vec<Diagnostic>, notes: Vec<Diagnostic>) -> ParsedFile {
    parsed.diagnostics.extend(earlier);
    parsed.diagnostics.extend(notes);
    parsed
}

/// Parses what `job` covers, in pieces on `workers` threads from `pieces_from` bytes on
/// (one pass over the whole below, or when a piece cannot stand alone), without the
/// record-level notes.
fn parse_job<R: ReadAt + ?Sized>(job: &Job<'_, R>, pieces_from: u64, workers: usize) -> std::io::Result<ParsedFile> {
    let count = job.size.saturating_sub(job.start).div_ceil(job.piece);
    if job.size < pieces_from || count < 2 {
        return job.whole();
    }
    let next = std::sync::atomic::AtomicU64::new(0);
    let work = || -> std::io::Result<Vec<(u64, Option<Piece>)>> {
        let mut buf = Vec::new();
        let mut done = Vec::new();
        loop {
            let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if k >= count {
                return Ok(done);
            }
            let got = read_piece(job, k, k + 1 == count, &mut buf);
            if !matches!(got, Ok(Some(_))) {
                // The whole file is read anyway, or the parse fails: stop claiming pieces.
                next.store(count, std::sync::atomic::Ordering::Relaxed);
            }
            match got? {
                Some(p) => done.push((k, Some(p))),
                None => {
                    done.push((k, None));
                    return Ok(done);
                }
            }
        }
    };
    let mut results: Vec<(u64, Option<Piece>)> = std::thread::scope(|s| {
        let others: Vec<_> = (1..workers).map(|_| s.spawn(work)).collect();
        let mut all = work()?;
        for o in others {
            all.extend(o.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))?);
        }
        Ok::<_, std::io::Error>(all)
    })?;
    results.sort_by_key(|(k, _)| *k);
    if results.len() as u64 != count {
        return job.whole();
    }
    let mut out = ParsedFile::default();
    // Lines before a piece, counted only up to the last piece with a diagnostic (the
    // file is read again for that: only damaged files have diagnostics).
    let (mut lines_before, mut counted_to) = (0, 0);
    let mut end = job.start;
    for (_, p) in results {
        let Some(p) = p else { return job.whole() };
        let base = usize::try_from(p.start).unwrap_or(usize::MAX);
        if !p.parsed.diagnostics.is_empty() && counted_to < p.start {
            lines_before += count_newlines(job.file, counted_to, p.start)?;
            counted_to = p.start;
        }
        let ParsedFile { title_slot, records, record_offsets, diagnostics, malformed, open_end, .. } = p.parsed;
        if title_slot.is_some() {
            out.title_slot = title_slot;
        }
        out.records.extend(records);
        out.record_offsets.extend(record_offsets.into_iter().map(|o| o + base));
        out.diagnostics.extend(diagnostics.into_iter().map(|mut d| {
            d.line += lines_before;
            d.offset += base;
            d
        }));
        out.malformed += malformed;
        out.open_end |= open_end;
        out.has_content |= p.has_content;
        if let Some(b) = p.last_byte {
            out.ends_with_newline = b == b'\n';
        }
        end = end.max(p.start + p.parsed.byte_len as u64);
    }
    out.byte_len = usize::try_from(end).unwrap_or(usize::MAX);
    Ok(out)
}

/// The record-level notes of the records of `parsed` from index `from` on (rare:
/// damaged files only), with their lines, which are found by counting the file's
/// newlines again, once, up to the last of them.
fn structure_notes<R: ReadAt + ?Sized>(
    job: &Job<'_, R>,
    parsed: &ParsedFile,
    from: usize,
) -> std::io::Result<Vec<Diagnostic>> {
    let (mut at, mut newlines) = (0u64, 0usize);
    let mut notes = Vec::new();
    for (offset, kind) in check_structure(parsed, from) {
        let to = offset as u64;
        if to > at {
            newlines += count_newlines(job.file, at, to)?;
            at = to;
        }
        notes.push(Diagnostic { line: newlines + 1, offset, kind });
    }
    Ok(notes)
}

/// Continues `prev`, the parse of the first `prev.byte_len` bytes of a file that has
/// grown since, to the file's `size` bytes: only the new bytes are read and validated,
/// and the result is what [`parse_session_spans`] gives for the whole file. When `prev`
/// did not end at the end of a line, or (omp) ended inside a value the new bytes may
/// complete, or the file is not larger, the whole file is parsed again instead.
///
/// `prev` must be the parse of the same file's first bytes (a persisted index checks
/// that the file only grew); the records it holds by position keep reading through
/// their own bodies.
pub fn parse_session_tail(
    bodies: &Arc<Bodies>,
    prev: ParsedFile,
    size: u64,
    dialect: Dialect,
    parallelism: crate::Parallelism,
    policy: SpanPolicy,
) -> std::io::Result<ParsedFile> {
    let start = prev.byte_len as u64;
    let workers = parallelism.threads().min(MAX_PIECE_WORKERS);
    let spans = Some((bodies, policy.from_record_size));
    let piece = policy.piece.max(1);
    // Bytes that are not UTF-8 get one note for the whole file, first of all: a file
    // holding any is parsed whole again (they are rare).
    let not_utf8 = |p: &ParsedFile| p.diagnostics.iter().any(|d| d.kind == DiagnosticKind::InvalidUtf8);
    if start == 0 || size <= start || !prev.ends_with_newline || prev.open_end || not_utf8(&prev) {
        return parse_session_spans(bodies, size, dialect, parallelism, policy);
    }
    let job = Job { file: bodies.reader(), size, dialect, piece, start, spans };
    let tail = parse_job(&job, policy.from_file_size.saturating_add(start), workers)?;
    if not_utf8(&tail) {
        return parse_session_spans(bodies, size, dialect, parallelism, policy);
    }
    let ParsedFile { title_slot, records, record_offsets, diagnostics, malformed, has_content, .. } = prev;
    let (notes, lines): (Vec<Diagnostic>, Vec<Diagnostic>) = diagnostics.into_iter().partition(|d| d.kind.is_note());
    let from = records.len();
    let mut out = ParsedFile {
        title_slot,
        records,
        record_offsets,
        diagnostics: lines,
        malformed: malformed + tail.malformed,
        ends_with_newline: tail.ends_with_newline,
        byte_len: tail.byte_len,
        has_content: has_content || tail.has_content,
        open_end: tail.open_end,
    };
    out.records.extend(tail.records);
    out.record_offsets.extend(tail.record_offsets);
    out.diagnostics.extend(tail.diagnostics);
    let tail_notes = structure_notes(&job, &out, from)?;
    Ok(with_notes(out, notes, tail_notes))
}

/// Counts the `\n` bytes of the file in `[from, to)`.
fn count_newlines<R: ReadAt + ?Sized>(file: &R, from: u64, to: u64) -> std::io::Result<usize> {
    let mut buf = vec![0u8; PIECE.min(to - from) as usize];
    let (mut at, mut count) = (from, 0);
    while at < to {
        let want = buf.len().min((to - at) as usize);
        let n = file.read_full_at(&mut buf[..want], at)?;
        if n == 0 {
            break;
        }
        count += memchr::memchr_iter(b'\n', &buf[..n]).count();
        at += n as u64;
    }
    Ok(count)
}

/// Reads from `offset` to the end of the file, appending to `buf`.
fn read_to_end_at<R: ReadAt + ?Sized>(file: &R, buf: &mut Vec<u8>, mut offset: u64) -> std::io::Result<()> {
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        match file.read_at(&mut chunk, offset) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Reads and parses piece `k` of `job`: the lines that start in
/// `[start + k * piece, start + (k + 1) * piece)` (a line starts at `start` or after a
/// `\n`), read into `buf`. `None` when the whole region must be read instead.
fn read_piece<R: ReadAt + ?Sized>(
    job: &Job<'_, R>,
    k: u64,
    last: bool,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<Piece>> {
    let Job { file, size, dialect, piece, start: origin, spans } = *job;
    // From the byte before the piece (a `\n` there means a line starts with it) to
    // the piece's last byte, where the next piece's search for a line start begins.
    let lo = (origin + k * piece).saturating_sub(1).max(origin);
    let hi = (origin + (k + 1) * piece).min(size);
    let want = usize::try_from(hi - lo).map_err(std::io::Error::other)?;
    buf.clear();
    buf.resize(want, 0);
    if file.read_full_at(buf, lo)? < want {
        return Ok(None); // The file shrank.
    }
    let start = if k == 0 {
        0
    } else {
        match memchr::memchr(b'\n', buf) {
            Some(i) => i + 1,
            // A line runs over the whole last piece: read the file whole (it may be
            // growing, and the line may not end where this piece's search would).
            None if last => return Ok(None),
            // No line starts here: the piece is empty (the line that runs over it
            // belongs to an earlier piece).
            None => {
                return Ok(Some(Piece {
                    start: hi,
                    parsed: ParsedFile::default(),
                    has_content: false,
                    last_byte: None,
                }));
            }
        }
    };
    let end = if last {
        read_to_end_at(file, buf, hi)?;
        buf.len()
    } else {
        // The next piece starts after the first `\n` from its search start on.
        let mut from = want - 1;
        loop {
            if let Some(i) = memchr::memchr(b'\n', &buf[from..]) {
                break from + i + 1;
            }
            from = buf.len();
            let at = lo + buf.len() as u64;
            buf.resize(buf.len() + (64 << 10), 0);
            let n = file.read_full_at(&mut buf[from..], at)?;
            buf.truncate(from + n);
            if n == 0 {
                return Ok(None); // A line runs to the end of the file: read it whole.
            }
        }
    };
    let bytes = &buf[start..end];
    let Ok(text) = simdutf8::basic::from_utf8(bytes) else { return Ok(None) };
    let mut parsed = ParsedFile { byte_len: bytes.len(), ..ParsedFile::default() };
    let mut lines = LineCounter::default();
    let from = match (k == 0 && origin == 0, dialect) {
        (true, Dialect::Pi) => pi_start(text, &mut parsed, &mut lines),
        (true, Dialect::Omp) => omp_start(text, &mut parsed, &mut lines),
        (false, _) => 0,
    };
    let base = lo + start as u64;
    let mut maker = match spans {
        Some((_, span_from)) => Maker::Spans(SpanBuilder::new(text, base, span_from)),
        None => Maker::Resident,
    };
    let stop = match dialect {
        Dialect::Pi => parse_pi(text, from, text.len(), &mut parsed, &mut lines, &mut maker),
        Dialect::Omp => parse_omp(text, from, text.len(), &mut parsed, &mut lines, &mut maker),
    };
    if let (Maker::Spans(builder), Some((bodies, _))) = (maker, spans) {
        builder.finish(bodies, &mut parsed.records);
    }
    if !last && (stop.rest_lost || stop.pos != text.len()) {
        return Ok(None); // A value runs past the cut (omp): read the file whole.
    }
    Ok(Some(Piece {
        start: base,
        parsed,
        has_content: bytes.iter().any(|b| !b.is_ascii_whitespace()),
        last_byte: if last { Some(bytes.last().copied().unwrap_or(b'\n')) } else { None },
    }))
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

/// Parses the bytes of a file after a line start, as [`parse_session_bytes`] would parse
/// them there: no title slot or byte-order mark at their start, and no record-level
/// notes (the caller finds those among all the file's records). Offsets and lines are
/// the bytes' own.
fn parse_continuation(bytes: &[u8], dialect: Dialect) -> ParsedFile {
    let mut out = ParsedFile {
        byte_len: bytes.len(),
        ends_with_newline: bytes.is_empty() || bytes.last() == Some(&b'\n'),
        has_content: bytes.iter().any(|b| !b.is_ascii_whitespace()),
        ..ParsedFile::default()
    };
    let valid = simdutf8::basic::from_utf8(bytes).map_err(|_| std::str::from_utf8(bytes));
    let (text, shifts) = match valid {
        Ok(t) | Err(Ok(t)) => (std::borrow::Cow::Borrowed(t), Vec::new()),
        Err(Err(e)) => {
            out.diagnostics.push(Diagnostic {
                line: line_of(bytes, e.valid_up_to()),
                offset: e.valid_up_to(),
                kind: DiagnosticKind::InvalidUtf8,
            });
            let (t, shifts) = decode_lossy(bytes);
            (std::borrow::Cow::Owned(t), shifts)
        }
    };
    let first_own = out.diagnostics.len();
    let mut lines = LineCounter::default();
    match dialect {
        Dialect::Pi => parse_pi(&text, 0, text.len(), &mut out, &mut lines, &mut Maker::Resident),
        Dialect::Omp => parse_omp(&text, 0, text.len(), &mut out, &mut lines, &mut Maker::Resident),
    };
    if !shifts.is_empty() {
        for d in &mut out.diagnostics[first_own..] {
            d.offset = original_offset(&shifts, d.offset);
        }
        for o in &mut out.record_offsets {
            *o = original_offset(&shifts, *o);
        }
    }
    out
}

/// Counts lines incrementally so diagnostics cost O(n) overall.
#[derive(Default)]
struct LineCounter {
    pos: usize,
    line: usize,
}

impl LineCounter {
    fn line_at(&mut self, text: &str, offset: usize) -> usize {
        if offset < self.pos {
            self.pos = 0;
            self.line = 0;
        }
        self.line += text.as_bytes()[self.pos..offset].iter().filter(|&&b| b == b'\n').count();
        self.pos = offset;
        self.line + 1
    }
}

fn line_of(bytes: &[u8], offset: usize) -> usize {
    bytes[..offset.min(bytes.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

fn is_falsy(r: &Record) -> bool {
    // Read from the text: a value that does not fit a tree (`1e400`, which JavaScript
    // reads as Infinity, or absurd nesting) has no `value()` but is still truthy.
    !r.is_object() && !crate::scan::truthy(r.text())
}

fn push_diag(out: &mut ParsedFile, lines: &mut LineCounter, text: &str, offset: usize, kind: DiagnosticKind) {
    let line = lines.line_at(text, offset);
    out.diagnostics.push(Diagnostic { line, offset, kind });
}

/// How a parse makes records: all in memory, or large ones read by position.
enum Maker {
    /// Every record holds its text.
    Resident,
    /// Records that qualify become rows of the piece's span table.
    Spans(SpanBuilder),
}

impl Maker {
    /// Parses one line (a slice of the text being parsed) into a record.
    fn record(&mut self, line: &str) -> Result<Record, RecordParseError> {
        match self {
            Maker::Resident => Record::parse(line),
            Maker::Spans(b) => b.record(line),
        }
    }
}

/// Where a parse of part of a text ended.
struct Stop {
    /// The position reached: where the next value would start.
    pos: usize,
    /// Whether the parser gave up on the rest of the text (omp: an incomplete value).
    rest_lost: bool,
}

/// Parses `text` into `out` as `dialect` does, in one pass.
fn parse_text(text: &str, dialect: Dialect, out: &mut ParsedFile) {
    let mut lines = LineCounter::default();
    match dialect {
        Dialect::Pi => {
            let start = pi_start(text, out, &mut lines);
            parse_pi(text, start, text.len(), out, &mut lines, &mut Maker::Resident);
        }
        Dialect::Omp => {
            let start = omp_start(text, out, &mut lines);
            parse_omp(text, start, text.len(), out, &mut lines, &mut Maker::Resident);
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
        let line = raw.trim_matches(|c: char| matches!(c, ' ' | '\t' | '\r' | '\n'));
        if raw.ends_with('\r') && !line.is_empty() {
            push_diag(out, lines, text, start, DiagnosticKind::CrLf);
        }
        if line.is_empty() {
            if !raw.is_empty() || !last {
                push_diag(out, lines, text, start, DiagnosticKind::BlankLine);
            }
        } else {
            match maker.record(line) {
                Ok(r) if is_falsy(&r) => {
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
    line.starts_with('{')
        && crate::scan::Obj::parse(line).is_some_and(|o| o.get_str("type").as_deref() == Some("title"))
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
    use crate::scan::{Lenient, LenientValues, Skipped};
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
    if !r.is_object() && crate::scan::kind(r.text()) == crate::scan::Kind::Null {
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

/// Returns the non-object values, stray headers and duplicate ids of a parsed file's
/// records from index `from` on, each with the byte offset of its record, in file
/// order (the records before `from` count only for their ids).
fn check_structure(out: &ParsedFile, from: usize) -> Vec<(usize, DiagnosticKind)> {
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
    use crate::span;

    fn texts(p: &ParsedFile) -> Vec<&str> {
        p.records.iter().map(Record::text).collect()
    }

    /// Record-level notes (a value that is not an object, a second header, a duplicate
    /// id) carry the line and byte offset of their record, whole and in pieces.
    #[test]
    fn record_notes_carry_their_true_place() -> std::io::Result<()> {
        let lines = [
            r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#,
            r#"{"type":"custom","id":"a","parentId":null}"#,
            "42",
            r#"{"type":"custom","id":"a","parentId":null}"#,
            r#"{"type":"session","version":3,"id":"s2","timestamp":"t","cwd":"/"}"#,
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let start = |n: usize| lines[..n].iter().map(|l| l.len() + 1).sum::<usize>();
        for dialect in [Dialect::Pi, Dialect::Omp] {
            let whole = parse_session_bytes(text.as_bytes(), dialect);
            let notes: Vec<(usize, usize, DiagnosticKind)> =
                whole.diagnostics.iter().map(|d| (d.line, d.offset, d.kind.clone())).collect();
            assert_eq!(
                notes,
                [
                    (3, start(2), DiagnosticKind::NonObject { text: "42".into() }),
                    (4, start(3), DiagnosticKind::DuplicateId { id: "a".into() }),
                    (5, start(4), DiagnosticKind::DuplicateHeader),
                ],
                "{dialect:?}"
            );
            let bytes = text.as_bytes();
            for piece in [1, 7, 40] {
                let pieces =
                    parse_in_pieces(&bytes.to_vec(), bytes.len() as u64, dialect, piece, 0, MAX_PIECE_WORKERS, None)?;
                assert_eq!(pieces.diagnostics, whole.diagnostics, "{dialect:?} in pieces of {piece}");
                assert_eq!(pieces.record_offsets, whole.record_offsets);
            }
        }
        Ok(())
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

    /// Lines (and parts of lines) that exercise the parsers: a header, entries, a
    /// value across lines, glued and torn values, garbage, blank and CRLF lines.
    const LINES: &[&str] = &[
        "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n",
        "{\"type\":\"custom\",\"id\":\"a\",\"parentId\":null}\n",
        "{\"type\":\"custom\",\n\"id\":\"b\"}\n",
        "{\"type\":\"custom\",\"id\":\"c\"}garbage\n",
        "not json\n",
        "\n",
        "  \r\n",
        "null\n",
        "[1,\n",
        "{\"type\":\"custom\"",
        "\"str\"\n",
    ];

    /// A file read with short reads, as a real file may give.
    struct ShortReads<'a> {
        bytes: &'a [u8],
    }

    impl ReadAt for ShortReads<'_> {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
            let n = buf.len().min(7);
            self.bytes.read_at(&mut buf[..n], offset)
        }
    }

    fn same_parse(a: &ParsedFile, b: &ParsedFile) -> Result<(), proptest::test_runner::TestCaseError> {
        proptest::prop_assert_eq!(&a.records, &b.records);
        proptest::prop_assert_eq!(&a.diagnostics, &b.diagnostics);
        proptest::prop_assert_eq!(a.malformed, b.malformed);
        proptest::prop_assert_eq!(&a.title_slot, &b.title_slot);
        proptest::prop_assert_eq!(a.ends_with_newline, b.ends_with_newline);
        proptest::prop_assert_eq!(a.byte_len, b.byte_len);
        proptest::prop_assert_eq!(a.has_content, b.has_content);
        Ok(())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1024))]

        /// Reading in pieces parses exactly as parsing the whole bytes, whatever the
        /// text, the piece size, and the file having grown or shrunk since it was
        /// stated.
        #[test]
        fn pieces_parse_like_the_whole_file(
            pieces in proptest::collection::vec(proptest::sample::select([LINES, &[
                "{\"type\":\"custom\",\"id\":\"a\",\"parentId\":null,\"data\":\"\\u00e9\\n\u{e9}\u{1f680}\"}\n",
                "\u{feff}",
                "\u{e9}",
            ]].concat()), 0..24),
            slot in proptest::bool::ANY,
            invalid_at in proptest::option::of(proptest::num::usize::ANY),
            piece in 1u64..48,
            delta in -8i64..8,
            dialect in proptest::sample::select(vec![Dialect::Pi, Dialect::Omp]),
        ) {
            let mut bytes = Vec::new();
            if slot {
                let slot = TitleSlot { title: "t".into(), source: None, updated_at: "u".into() };
                bytes.extend_from_slice(slot.to_line().expect("slot").as_bytes());
                bytes.push(b'\n');
            }
            bytes.extend_from_slice(pieces.concat().as_bytes());
            if let Some(at) = invalid_at.filter(|_| !bytes.is_empty()) {
                let at = at % bytes.len();
                bytes[at] = 0xff;
            }
            let whole = parse_session_bytes(&bytes, dialect);
            let stated = (bytes.len() as i64 - delta).max(0) as u64;
            let got = parse_in_pieces(&ShortReads { bytes: &bytes }, stated, dialect, piece, 0, MAX_PIECE_WORKERS, None)
                .expect("reads");
            same_parse(&got, &whole)?;
        }
    }

    /// Lines that may be read by position, and odd ones that must not be.
    const SPAN_LINES: &[&str] = &[
        "{\"type\":\"message\",\"id\":\"m1\",\"parentId\":\"a\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"message\":{\"role\":\"user\",\"content\":\"hi \\u00e9\"}}\n",
        "{\"type\":\"message\",\"id\":\"m2\",\"parentId\":null,\"timestamp\":\"t\",\"message\":{\"content\":[],\"role\":\"assistant\",\"role\":\"toolResult\"}}\n",
        "{\"type\":\"message\",\"id\":\"m3\",\"timestamp\":\"t\",\"message\":{\"role\":7}}\n",
        "{\"type\":\"message\",\"id\":\"m4\",\"timestamp\":\"t\",\"message\":{\"role\":\"user\"},\"message\":null}\n",
        "{\"type\":\"message\",\"id\":\"m5\",\"timestamp\":\"t\",\"message\":\"text\"}\n",
        "{\"type\":\"mess\\u0061ge\",\"id\":\"a\\u0062\",\"parentId\":\"\\ud800\",\"timestamp\":\"t\\n\",\"message\":{\"r\\u006fle\":\"us\\u0065r\"}}\n",
        "{\"type\":\"future_kind\",\"id\":\"f1\",\"parentId\":\"m1\",\"timestamp\":\"t\",\"x\":[1,{\"y\":1e400}]}\n",
        "{\"type\":\"custom\",\"id\":\"f2\",\"parentId\":\"f1\",\"timestamp\":\"t\",\"x\":[1.50,-0,12345678901234567890,\"1e400\"]}\n",
        "{\"type\":\"custom\",\"id\":\"f3\",\"parentId\":\"f2\",\"timestamp\":\"t\",\"x\":[1E3,0.1,-2.5e-7]}\n",
        "{\"type\":\"label\",\"id\":\"l1\",\"parentId\":\"m1\",\"timestamp\":\"t\",\"targetId\":\"m1\",\"label\":\"x\"}\n",
        "{\"type\":\"custom\",\"id\":7,\"parentId\":\"a\",\"timestamp\":\"t\"}\n",
        "{\"type\":\"custom\",\"id\":\"n1\",\"parentId\":7,\"timestamp\":\"t\"}\n",
        "{\"type\":\"custom\",\"id\":\"n2\",\"parentId\":\"a\",\"timestamp\":5}\n",
        "{\"type\":\"custom\",\"id\":\"n3\",\"parentId\":\"a\"}\n",
        "{\"type\":5,\"id\":\"n4\",\"timestamp\":\"t\"}\n",
        "{\"id\":\"n5\",\"timestamp\":\"t\"}\n",
        "{\"type\":\"custom\", \"id\":\"n6\" ,\"timestamp\":\"t\"\r}\n",
        " {\"type\":\"compaction\",\"id\":\"c1\",\"parentId\":\"m1\",\"timestamp\":\"t\",\"summary\":\"s\",\"firstKeptEntryId\":\"m1\"}  \n",
        "{\"type\":\"custom\",\"id\":\"x\",\"id\":\"y\",\"timestamp\":\"t\",\"timestamp\":\"u\",\"parentId\":null,\"parentId\":\"p\"}\n",
    ];

    /// Skeleton fields of a record, read without its text.
    fn skeleton(r: &Record) -> (EntryTypeView, Option<String>, Option<String>, String, Option<String>, Option<String>) {
        (
            EntryTypeView(r.entry_type(), r.type_str().map(str::to_owned), r.is_object(), r.is_header()),
            r.id().map(str::to_owned),
            r.id_key().map(|k| k.into_owned()),
            format!("{:?}", r.parent()),
            r.timestamp().map(str::to_owned),
            r.message_role().map(str::to_owned),
        )
    }

    #[derive(Debug, PartialEq)]
    struct EntryTypeView(crate::EntryType, Option<String>, bool, bool);

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Records read by position read exactly as records held in memory: the same
        /// skeleton without reading any text, then the same texts, diagnostics and
        /// offsets, whatever the text and the pieces.
        #[test]
        fn records_read_by_position_read_as_the_whole_parse(
            pieces in proptest::collection::vec(proptest::sample::select([LINES, SPAN_LINES].concat()), 0..24),
            piece in 1u64..64,
            span_from in 0usize..160,
            dialect in proptest::sample::select(vec![Dialect::Pi, Dialect::Omp]),
        ) {
            let bytes = pieces.concat().into_bytes();
            let whole = parse_session_bytes(&bytes, dialect);
            let bodies = Arc::new(Bodies::new(Box::new(bytes.clone())));
            let policy = SpanPolicy { from_record_size: span_from, ..SpanPolicy::everything(piece) };
            let got = parse_session_spans(&bodies, bytes.len() as u64, dialect, crate::Parallelism::new(4), policy)
                .expect("reads");
            proptest::prop_assert_eq!(got.records.len(), whole.records.len());
            for (a, b) in got.records.iter().zip(&whole.records) {
                proptest::prop_assert_eq!(skeleton(a), skeleton(b));
                proptest::prop_assert_eq!(a.span().is_some(), !a.is_loaded());
            }
            proptest::prop_assert_eq!(bodies.reads(), 0, "the skeleton reads no text");
            same_parse(&got, &whole)?;
            let fresh = parse_session_spans(&bodies, bytes.len() as u64, dialect, crate::Parallelism::new(4), policy)
                .expect("reads");
            let mut buf = Vec::new();
            let lines = span::lines(&fresh.records, &mut buf).expect("reads");
            for ((a, b), line) in got.records.iter().zip(&whole.records).zip(&lines) {
                proptest::prop_assert_eq!(a.line(), b.line());
                proptest::prop_assert_eq!(a.message_info(), b.message_info());
                proptest::prop_assert_eq!(line, &b.line());
            }
            proptest::prop_assert!(bodies.take_failure().is_none());
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// A parse continued over bytes appended to the file reads as a parse of the
        /// whole file: records, offsets, diagnostics (their lines and order), counts.
        #[test]
        fn a_continued_parse_reads_as_the_whole_file(
            lines in proptest::collection::vec(proptest::sample::select([LINES, SPAN_LINES].concat()), 0..24),
            cut in proptest::num::usize::ANY,
            piece in 1u64..64,
            span_from in 0usize..160,
            slot in proptest::bool::ANY,
            invalid_at in proptest::option::of(proptest::num::usize::ANY),
            dialect in proptest::sample::select(vec![Dialect::Pi, Dialect::Omp]),
        ) {
            let mut bytes = Vec::new();
            if slot {
                let slot = TitleSlot { title: "t".into(), source: None, updated_at: "u".into() };
                bytes.extend_from_slice(slot.to_line().expect("slot").as_bytes());
                bytes.push(b'\n');
            }
            bytes.extend_from_slice(lines.concat().as_bytes());
            if let Some(at) = invalid_at.filter(|_| !bytes.is_empty()) {
                let at = at % bytes.len();
                bytes[at] = 0xff;
            }
            // The prefix ends at a line's end (or anywhere: then the whole file is parsed).
            let ends: Vec<usize> = memchr::memchr_iter(b'\n', &bytes).map(|i| i + 1).collect();
            let prefix = match ends.len() {
                0 => bytes.len() / 2,
                _ if cut % 5 == 0 => cut % bytes.len().max(1),
                n => ends[cut % n],
            };
            let policy = SpanPolicy { from_record_size: span_from, ..SpanPolicy::everything(piece) };
            let threads = crate::Parallelism::new(3);
            let first = Arc::new(Bodies::new(Box::new(bytes[..prefix].to_vec())));
            let before = parse_session_spans(&first, prefix as u64, dialect, threads, policy).expect("reads");
            let all = Arc::new(Bodies::new(Box::new(bytes.clone())));
            let got = parse_session_tail(&all, before, bytes.len() as u64, dialect, threads, policy).expect("reads");
            let whole = parse_session_bytes(&bytes, dialect);
            same_parse(&got, &whole)?;
            proptest::prop_assert_eq!(got.open_end, whole.open_end);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// A parse written down and read back is the same parse; damaged bytes are
        /// refused or read as some parse, never a panic.
        #[test]
        fn a_stored_parse_reads_back_the_same(
            lines in proptest::collection::vec(proptest::sample::select([LINES, SPAN_LINES].concat()), 0..24),
            piece in 1u64..64,
            span_from in 0usize..160,
            slot in proptest::bool::ANY,
            damage in proptest::collection::vec((proptest::num::usize::ANY, proptest::num::u8::ANY), 0..3),
            cut in proptest::option::of(proptest::num::usize::ANY),
            dialect in proptest::sample::select(vec![Dialect::Pi, Dialect::Omp]),
        ) {
            let mut bytes = Vec::new();
            if slot {
                let slot = TitleSlot { title: "t".into(), source: Some("user".into()), updated_at: "u".into() };
                bytes.extend_from_slice(slot.to_line().expect("slot").as_bytes());
                bytes.push(b'\n');
            }
            bytes.extend_from_slice(lines.concat().as_bytes());
            let bodies = Arc::new(Bodies::new(Box::new(bytes.clone())));
            let policy = SpanPolicy { from_record_size: span_from, ..SpanPolicy::everything(piece) };
            let parsed = parse_session_spans(&bodies, bytes.len() as u64, dialect, crate::Parallelism::new(2), policy)
                .expect("reads");
            let stored = crate::stored::encode(&parsed);
            let again = crate::stored::decode(&stored, &bodies).expect("reads back");
            proptest::prop_assert_eq!(bodies.reads(), 0);
            for (a, b) in again.records.iter().zip(&parsed.records) {
                proptest::prop_assert_eq!(skeleton(a), skeleton(b));
                proptest::prop_assert_eq!(a.span(), b.span());
            }
            proptest::prop_assert_eq!(&again.record_offsets, &parsed.record_offsets);
            proptest::prop_assert_eq!(again.open_end, parsed.open_end);
            same_parse(&again, &parsed)?;
            let mut damaged = stored.clone();
            for (at, b) in damage {
                if !damaged.is_empty() {
                    let at = at % damaged.len();
                    damaged[at] ^= b;
                }
            }
            if let Some(cut) = cut {
                damaged.truncate(cut % (damaged.len() + 1));
            }
            if let Some(p) = crate::stored::decode(&damaged, &bodies) {
                for r in &p.records {
                    let _ = (r.text(), r.id(), r.parent(), r.timestamp(), r.message_role());
                }
            }
        }
    }

    /// A file whose bytes before an offset cannot be read.
    struct FailsBefore {
        bytes: Vec<u8>,
        before: u64,
    }

    impl ReadAt for FailsBefore {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
            if offset < self.before {
                return Err(std::io::Error::other("read before the tail"));
            }
            self.bytes.read_at(buf, offset)
        }
    }

    /// A continued parse reads nothing before the bytes it continues over, whole or in
    /// pieces (a clean file: diagnostics would send it back for their line numbers).
    #[test]
    fn a_continued_parse_reads_only_the_new_bytes() -> std::io::Result<()> {
        let line = |i: usize| {
            format!(
                "{{\"type\":\"message\",\"id\":\"e{i}\",\"parentId\":null,\"timestamp\":\"t\",\"message\":{{\"role\":\"user\",\"content\":\"{}\"}}}}\n",
                "w".repeat(i % 50)
            )
        };
        let text: String = (0..400).map(line).collect();
        for dialect in [Dialect::Pi, Dialect::Omp] {
            for (cut, piece) in [(100, 64), (399, 64), (100, 1 << 20)] {
                let start: usize = (0..cut).map(|i| line(i).len()).sum();
                let policy = SpanPolicy { from_file_size: 0, ..SpanPolicy::everything(piece) };
                let first = Arc::new(Bodies::new(Box::new(text.as_bytes()[..start].to_vec())));
                let threads = crate::Parallelism::new(2);
                let before = parse_session_spans(&first, start as u64, dialect, threads, policy)?;
                let tail = FailsBefore { bytes: text.clone().into_bytes(), before: start as u64 };
                let all = Arc::new(Bodies::new(Box::new(tail)));
                let got = parse_session_tail(&all, before, text.len() as u64, dialect, threads, policy)?;
                assert_eq!(got.records.len(), 400);
                assert_eq!(got.records, parse_session_bytes(text.as_bytes(), dialect).records);
            }
        }
        Ok(())
    }

    /// A file that can be changed after it was parsed.
    struct Changing(std::sync::Mutex<Vec<u8>>);

    impl ReadAt for Changing {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
            self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.as_slice().read_at(buf, offset)
        }
    }

    impl ReadAt for Arc<Changing> {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
            (**self).read_at(buf, offset)
        }
    }

    /// A text read after the file changed in place is refused (never another record's
    /// text): `load` returns the error, `text` reads `null` and keeps the error.
    #[test]
    fn a_file_changed_in_place_is_caught_when_a_text_is_read() -> std::io::Result<()> {
        let line = |id: &str, body: &str| {
            format!(
                "{{\"type\":\"custom\",\"id\":\"{id}\",\"parentId\":null,\"timestamp\":\"t\",\"data\":\"{body}\"}}\n"
            )
        };
        let text = format!("{}{}{}", line("aaaaaaaa", "one"), line("bbbbbbbb", "two"), line("cccccccc", "three"));
        let file = Arc::new(Changing(std::sync::Mutex::new(text.clone().into_bytes())));
        let bodies = Arc::new(Bodies::new(Box::new(Arc::clone(&file))));
        let parsed = parse_session_spans(
            &bodies,
            text.len() as u64,
            Dialect::Pi,
            crate::Parallelism::new(2),
            SpanPolicy::everything(16),
        )?;
        assert!(parsed.records.iter().all(|r| !r.is_loaded()));
        parsed.records[0].load()?;
        // Same length, other record: the ids of the second and third lines swapped.
        let swapped = format!("{}{}{}", line("aaaaaaaa", "one"), line("cccccccc", "two"), line("bbbbbbbb", "three"));
        assert_eq!(swapped.len(), text.len());
        *file.0.lock().map_err(|_| std::io::Error::other("poisoned"))? = swapped.into_bytes();
        let err = parsed.records[1].load().map(|()| "loaded").unwrap_or_else(|e| {
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
            "refused"
        });
        assert_eq!(err, "refused");
        assert_eq!(parsed.records[1].text(), "null");
        assert!(bodies.take_failure().is_some_and(|e| e.to_string().contains("changed since it was read")));
        assert!(span::lines(&parsed.records[1..2], &mut Vec::new()).is_err());
        // What was read before the change stays as it was.
        assert!(parsed.records[0].text().contains("aaaaaaaa"));
        // A shorter file is caught too.
        file.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.truncate(10);
        assert!(span::load_all(&parsed.records).is_err());
        Ok(())
    }

    /// A reader that says its bytes never change, whatever happens to them.
    struct Trusting(Arc<Changing>);

    impl ReadAt for Trusting {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
            self.0.read_at(buf, offset)
        }
        fn stamp(&self) -> Option<u128> {
            Some(7)
        }
    }

    /// The lines a whole-file write reads back are the records' lines, read in few
    /// reads and not kept; a file changed in place is refused even when its reader
    /// claims nothing changed (another record at the place does not hold the id).
    #[test]
    fn lines_read_back_for_a_write_are_checked() -> std::io::Result<()> {
        let line = |id: &str, body: &str| {
            format!(
                "{{\"type\":\"custom\",\"id\":\"{id}\",\"parentId\":null,\"timestamp\":\"t\",\"n\":[1e400],\"data\":\"{body}\"}}\n"
            )
        };
        let text = format!("{}{}{}", line("aaaaaaaa", "one"), line("bbbbbbbb", "two"), line("cccccccc", "three"));
        let file = Arc::new(Changing(std::sync::Mutex::new(text.clone().into_bytes())));
        let bodies = Arc::new(Bodies::new(Box::new(Trusting(Arc::clone(&file)))));
        let threads = crate::Parallelism::new(2);
        let parsed = parse_session_spans(&bodies, text.len() as u64, Dialect::Pi, threads, SpanPolicy::everything(16))?;
        let whole = parse_session_bytes(text.as_bytes(), Dialect::Pi);
        let mut buf = Vec::new();
        let lines = span::lines(&parsed.records, &mut buf)?;
        let want: Vec<String> = whole.records.iter().map(|r| r.line().into_owned()).collect();
        assert_eq!(lines.iter().map(|l| l.to_string()).collect::<Vec<_>>(), want);
        assert!(parsed.records.iter().all(|r| !r.is_loaded()), "lines read for a write are not kept");
        let swapped = format!("{}{}{}", line("aaaaaaaa", "one"), line("cccccccc", "two"), line("bbbbbbbb", "three"));
        *file.0.lock().map_err(|_| std::io::Error::other("poisoned"))? = swapped.into_bytes();
        let err = span::lines(&parsed.records, &mut buf).map(|_| ()).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        Ok(())
    }

    /// [`span::load_all`] reads nearby texts in one go and leaves every record read.
    #[test]
    fn load_all_reads_every_text_it_is_given() -> std::io::Result<()> {
        let text: String = (0..50)
            .map(|i| {
                format!("{{\"type\":\"custom\",\"id\":\"e{i}\",\"parentId\":null,\"timestamp\":\"t\",\"n\":{i}}}\n")
            })
            .collect();
        let bodies = Arc::new(Bodies::new(Box::new(text.clone().into_bytes())));
        let parsed = parse_session_spans(
            &bodies,
            text.len() as u64,
            Dialect::Omp,
            crate::Parallelism::new(2),
            SpanPolicy::everything(64),
        )?;
        span::load_all(parsed.records.iter().step_by(2))?;
        assert_eq!(bodies.reads(), 25);
        assert!(parsed.records.iter().step_by(2).all(Record::is_loaded));
        assert!(!parsed.records[1].is_loaded());
        assert_eq!(parsed.records, parse_session_bytes(text.as_bytes(), Dialect::Omp).records);
        Ok(())
    }

    /// A file whose reads fail from an offset on.
    struct FailsFrom<'a> {
        bytes: &'a [u8],
        from: u64,
    }

    impl ReadAt for FailsFrom<'_> {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
            if offset + buf.len() as u64 > self.from {
                return Err(std::io::Error::other("the disk failed"));
            }
            self.bytes.read_at(buf, offset)
        }
    }

    #[test]
    fn read_errors_are_returned() {
        let text = "{\"type\":\"custom\",\"id\":\"a\"}\n".repeat(40);
        for from in [0, 100, 500, text.len() as u64 - 1] {
            let file = FailsFrom { bytes: text.as_bytes(), from };
            for (piece, pieces_from) in [(16, 0), (1 << 20, u64::MAX)] {
                let got =
                    parse_in_pieces(&file, text.len() as u64, Dialect::Pi, piece, pieces_from, MAX_PIECE_WORKERS, None);
                assert_eq!(got.map(|p| p.records.len()).map_err(|e| e.to_string()), Err("the disk failed".to_owned()));
            }
        }
    }

    #[test]
    fn large_files_parse_in_pieces_like_the_whole() {
        let mut text =
            String::from("{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n");
        let mut i = 0;
        while text.len() < PIECES_FROM as usize + (3 << 20) {
            let data = "x\\n\u{e9}".repeat(i % 700);
            text.push_str(&format!("{{\"type\":\"custom\",\"id\":\"e{i}\",\"parentId\":null,\"data\":\"{data}\"}}\n"));
            i += 1;
        }
        text.push_str("{\"torn\":");
        for dialect in [Dialect::Pi, Dialect::Omp] {
            let whole = parse_session_bytes(text.as_bytes(), dialect);
            let got = parse_session_at(text.as_bytes(), text.len() as u64, dialect).expect("reads");
            same_parse(&got, &whole).expect("same parse");
            assert!(got.records.len() > 1000);
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

    #[test]
    fn offsets_count_the_files_bytes_after_invalid_utf8() {
        let input = b"\xff\xfe{\"type\":\"session\",\"id\":\"s\"}\nnot json\n";
        let p = parse_session_bytes(input, Dialect::Pi);
        let bad = p.diagnostics.iter().find(|d| matches!(d.kind, DiagnosticKind::Malformed { .. } if d.line == 2));
        assert_eq!(bad.map(|d| d.offset), Some(input.len() - "not json\n".len()));
        assert!(p.diagnostics.iter().all(|d| d.offset <= input.len()));
    }

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
