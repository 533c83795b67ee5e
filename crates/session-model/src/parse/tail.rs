//! A parse continued over bytes appended to a file since it was parsed: only the new
//! bytes are read and parsed (in pieces, as `pieces.rs` reads a file), then joined to
//! the earlier parse, whose record-level notes are found again among all records.

use std::sync::Arc;

use crate::span::Bodies;
use crate::{Dialect, Parallelism};

use super::parsed::{Diagnostic, DiagnosticKind, ParsedFile};
use super::pieces::{Job, MAX_PIECE_WORKERS, SpanPolicy, parse_job, parse_session_spans, structure_notes, with_notes};

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
    parallelism: Parallelism,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::fixtures::{LINES, SPAN_LINES, file_bytes, same_parse};
    use crate::parse::parse_session_bytes;
    use crate::read_at::ReadAt;

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
            let bytes = file_bytes(slot, &lines.concat(), invalid_at);
            // The prefix ends at a line's end (or anywhere: then the whole file is parsed).
            let ends: Vec<usize> = memchr::memchr_iter(b'\n', &bytes).map(|i| i + 1).collect();
            let prefix = match ends.len() {
                0 => bytes.len() / 2,
                _ if cut % 5 == 0 => cut % bytes.len().max(1),
                n => ends[cut % n],
            };
            let policy = SpanPolicy { from_record_size: span_from, ..SpanPolicy::everything(piece) };
            let threads = Parallelism::new(3);
            let first = Arc::new(Bodies::new(Box::new(bytes[..prefix].to_vec())));
            let before = parse_session_spans(&first, prefix as u64, dialect, threads, policy).expect("reads");
            let all = Arc::new(Bodies::new(Box::new(bytes.clone())));
            let got = parse_session_tail(&all, before, bytes.len() as u64, dialect, threads, policy).expect("reads");
            let whole = parse_session_bytes(&bytes, dialect);
            same_parse(&got, &whole)?;
            proptest::prop_assert_eq!(got.open_end, whole.open_end);
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
                let threads = Parallelism::new(2);
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
}
