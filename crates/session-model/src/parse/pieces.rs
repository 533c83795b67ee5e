//! A file read by position and parsed in pieces: from 4 MiB on, pieces of about 1 MiB
//! cut at line starts are read and parsed by a few threads as they are read, each into
//! a buffer its thread reuses, and joined in order; a piece that cannot stand alone
//! (omp: a value across its end), bytes that are not UTF-8 or a file that shrank send
//! the parse back to one whole read ([`parse_bytes`]). Records that [`SpanPolicy`]
//! allows keep only their skeleton ([`crate::span`]).

use std::sync::Arc;

use crate::pool::Pool;
use crate::read_at::ReadAt;
use crate::span::{Bodies, SPAN_FROM, SpanBuilder};
use crate::{Dialect, Parallelism};

use super::bytes::{has_content, parse_bytes};
use super::grammar::{self, Maker};
use super::lines::newlines;
use super::parsed::{Diagnostic, ParsedFile, check_structure};

/// [`parse_session_at`] reading a file of any size in pieces of `piece` bytes, for
/// the fuzz targets, which compare it with [`parse_session_bytes`] on inputs far
/// smaller than the size the library reads in pieces from.
///
/// [`parse_session_bytes`]: crate::parse_session_bytes
#[cfg(feature = "fuzzing")]
pub fn parse_session_at_in_pieces<R: ReadAt + ?Sized>(
    file: &R,
    size: u64,
    dialect: Dialect,
    piece: u64,
) -> std::io::Result<ParsedFile> {
    parse_in_pieces(file, size, dialect, piece, 0, MAX_PIECE_WORKERS, None)
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
///
/// [`parse_session_bytes`]: crate::parse_session_bytes
pub fn parse_session_at<R: ReadAt + ?Sized>(file: &R, size: u64, dialect: Dialect) -> std::io::Result<ParsedFile> {
    parse_session_at_with(file, size, dialect, Parallelism::default())
}

/// [`parse_session_at`] with at most `parallelism` threads (and never more than four:
/// past that the disk, not the parse, sets the pace).
pub fn parse_session_at_with<R: ReadAt + ?Sized>(
    file: &R,
    size: u64,
    dialect: Dialect,
    parallelism: Parallelism,
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
    parallelism: Parallelism,
    policy: SpanPolicy,
) -> std::io::Result<ParsedFile> {
    let workers = parallelism.threads().min(MAX_PIECE_WORKERS);
    let spans = Some((bodies, policy.from_record_size));
    parse_in_pieces(bodies.reader(), size, dialect, policy.piece.max(1), policy.from_file_size, workers, spans)
}

/// The most threads a piecewise parse uses.
pub(super) const MAX_PIECE_WORKERS: usize = 4;

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
pub(super) struct Job<'a, R: ?Sized> {
    pub(super) file: &'a R,
    /// The file's size when it was opened.
    pub(super) size: u64,
    pub(super) dialect: Dialect,
    pub(super) piece: u64,
    /// Where the parse starts: 0, or for a continuation ([`super::parse_session_tail`]) the
    /// start of a line after a parse that needs nothing before it.
    pub(super) start: u64,
    /// Records are held by position through these bodies when at least this long.
    pub(super) spans: Option<(&'a Arc<Bodies>, usize)>,
}

impl<R: ReadAt + ?Sized> Job<'_, R> {
    /// Reads `[start, end of file)` whole and parses it in one pass, every text in
    /// memory, without the record-level notes (the caller adds them for every parse).
    fn whole(&self) -> std::io::Result<ParsedFile> {
        let mut bytes = Vec::with_capacity(usize::try_from(self.size.saturating_sub(self.start)).unwrap_or(0));
        read_to_end_at(self.file, &mut bytes, self.start)?;
        let mut parsed = parse_bytes(&bytes, self.dialect, self.start == 0);
        if self.start == 0 {
            return Ok(parsed);
        }
        let base = usize::try_from(self.start).unwrap_or(usize::MAX);
        let lines_before = if parsed.diagnostics.is_empty() { 0 } else { count_newlines(self.file, 0, self.start)? };
        // Offsets and the length count from the file's start, as a parse in pieces counts them.
        parsed.byte_len += base;
        for o in &mut parsed.record_offsets {
            *o += base;
        }
        for d in &mut parsed.diagnostics {
            d.offset += base;
            d.line += lines_before;
        }
        Ok(parsed)
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
pub(super) fn with_notes(mut parsed: ParsedFile, earlier: Vec<Diagnostic>, notes: Vec<Diagnostic>) -> ParsedFile {
    parsed.diagnostics.extend(earlier);
    parsed.diagnostics.extend(notes);
    parsed
}

/// Parses what `job` covers, in pieces on `workers` threads from `pieces_from` bytes on
/// (one pass over the whole below, or when a piece cannot stand alone), without the
/// record-level notes.
pub(super) fn parse_job<R: ReadAt + ?Sized>(
    job: &Job<'_, R>,
    pieces_from: u64,
    workers: usize,
) -> std::io::Result<ParsedFile> {
    let count = job.size.saturating_sub(job.start).div_ceil(job.piece);
    if job.size < pieces_from || count < 2 {
        return job.whole();
    }
    // Every thread reads pieces into a buffer of its own. A piece that cannot stand
    // alone (the whole file is read anyway) or a failed read stops the others' claims.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let pieces: Vec<u64> = (0..count).collect();
    let mut results: Vec<Option<std::io::Result<Option<Piece>>>> = pieces.iter().map(|_| None).collect();
    Pool::new(Parallelism::new(workers)).run(
        &pieces,
        Vec::new,
        |buf, _, &k| {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                return None;
            }
            let got = read_piece(job, k, k + 1 == count, buf);
            if !matches!(got, Ok(Some(_))) {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            Some(got)
        },
        &mut |i, got| results[i] = got,
    );
    let mut whole = Vec::with_capacity(results.len());
    for got in results {
        match got {
            Some(Ok(Some(p))) => whole.push(p),
            Some(Err(e)) => return Err(e),
            Some(Ok(None)) | None => whole.clear(),
        }
    }
    if whole.len() as u64 != count {
        return job.whole();
    }
    let mut out = ParsedFile::default();
    // Lines before a piece, counted only up to the last piece with a diagnostic (the
    // file is read again for that: only damaged files have diagnostics).
    let (mut lines_before, mut counted_to) = (0, 0);
    let mut end = job.start;
    for p in whole {
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
pub(super) fn structure_notes<R: ReadAt + ?Sized>(
    job: &Job<'_, R>,
    parsed: &ParsedFile,
    from: usize,
) -> std::io::Result<Vec<Diagnostic>> {
    let (mut at, mut before) = (0u64, 0usize);
    let mut notes = Vec::new();
    for (offset, kind) in check_structure(parsed, from) {
        let to = offset as u64;
        if to > at {
            before += count_newlines(job.file, at, to)?;
            at = to;
        }
        notes.push(Diagnostic { line: before + 1, offset, kind });
    }
    Ok(notes)
}

/// Counts the `\n` bytes of the file in `[from, to)`.
pub(super) fn count_newlines<R: ReadAt + ?Sized>(file: &R, from: u64, to: u64) -> std::io::Result<usize> {
    let mut buf = vec![0u8; PIECE.min(to - from) as usize];
    let (mut at, mut count) = (from, 0);
    while at < to {
        let want = buf.len().min((to - at) as usize);
        let n = file.read_full_at(&mut buf[..want], at)?;
        if n == 0 {
            break;
        }
        count += newlines(&buf[..n]);
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
    let base = lo + start as u64;
    let mut maker = match spans {
        Some((_, span_from)) => Maker::Spans(SpanBuilder::new(text, base, span_from)),
        None => Maker::Resident,
    };
    let stop = grammar::read(text, dialect, k == 0 && origin == 0, &mut parsed, &mut maker);
    if let (Maker::Spans(builder), Some((bodies, _))) = (maker, spans) {
        builder.finish(bodies, &mut parsed.records);
    }
    if !last && (stop.rest_lost || stop.pos != text.len()) {
        return Ok(None); // A value runs past the cut (omp): read the file whole.
    }
    Ok(Some(Piece {
        start: base,
        parsed,
        has_content: has_content(bytes),
        last_byte: if last { Some(bytes.last().copied().unwrap_or(b'\n')) } else { None },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::fixtures::{LINES, SPAN_LINES, ShortReads, file_bytes, same_parse, skeleton};
    use crate::parse::{DiagnosticKind, parse_session_bytes};
    use crate::span;

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
            let bytes = file_bytes(slot, &pieces.concat(), invalid_at);
            let whole = parse_session_bytes(&bytes, dialect);
            let stated = (bytes.len() as i64 - delta).max(0) as u64;
            let got = parse_in_pieces(&ShortReads { bytes: &bytes }, stated, dialect, piece, 0, MAX_PIECE_WORKERS, None)
                .expect("reads");
            same_parse(&got, &whole)?;
        }
    }

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
            let got = parse_session_spans(&bodies, bytes.len() as u64, dialect, Parallelism::new(4), policy)
                .expect("reads");
            proptest::prop_assert_eq!(got.records.len(), whole.records.len());
            for (a, b) in got.records.iter().zip(&whole.records) {
                proptest::prop_assert_eq!(skeleton(a), skeleton(b));
                proptest::prop_assert_eq!(a.span().is_some(), !a.is_loaded());
            }
            proptest::prop_assert_eq!(bodies.reads(), 0, "the skeleton reads no text");
            same_parse(&got, &whole)?;
            let fresh = parse_session_spans(&bodies, bytes.len() as u64, dialect, Parallelism::new(4), policy)
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
}
