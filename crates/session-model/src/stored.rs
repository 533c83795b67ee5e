//! A parse written down: a [`ParsedFile`] as bytes, and back, without the file's
//! texts.
//!
//! Records read by position ([`crate::span`]) are stored as their rows (offset,
//! length, skeleton), records held in memory as their text; diagnostics, counts and
//! omp's title slot as they are. Reading the bytes back gives the same parse, its
//! records reading their texts through the [`Bodies`] given, so reopening a large
//! session costs the size of its skeleton, not of its text.
//!
//! The bytes say nothing about which file they describe: whoever keeps them (the
//! facade's session index) also keeps the file's identity and checks it before using
//! them. A damaged or foreign text is refused ([`decode`] gives `None`), never read
//! into records that point anywhere.
//!
//! ```
//! use std::sync::Arc;
//! use session_model::{parse_session_spans, stored, Bodies, Dialect, Parallelism, SpanPolicy};
//! let text = b"{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n{\"type\":\"custom\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"t\",\"data\":1}\n".to_vec();
//! let size = text.len() as u64;
//! let bodies = Arc::new(Bodies::new(Box::new(text.clone())));
//! let parsed = parse_session_spans(&bodies, size, Dialect::Pi, Parallelism::new(2), SpanPolicy::everything(8))?;
//! let bytes = stored::encode(&parsed);
//! let again = stored::decode(&bytes, &Arc::new(Bodies::new(Box::new(text)))).expect("stored by encode");
//! assert_eq!(again.records, parsed.records);
//! assert!(stored::decode(&bytes[..bytes.len() - 1], &bodies).is_none());
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io::Read;
use std::sync::Arc;

use crate::parse::{Diagnostic, DiagnosticKind, ParsedFile};
use crate::record::Record;
use crate::span::{Bodies, SpanRow, SpanTable};
use crate::title::TitleSlot;

/// The version of the format; another version is refused.
const FORMAT: u32 = 2;

/// A record held in memory: its text's index and its offset follow.
const TAG_TEXT: u8 = 0;
/// A record read by position, the row after the previous one, at the row's offset.
const TAG_NEXT_ROW: u8 = 1;
/// A record read by position: its row's index and its offset follow.
const TAG_ROW: u8 = 2;

/// Returns `parsed` as bytes that [`decode`] reads back.
pub fn encode(parsed: &ParsedFile) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(64 + parsed.records.len() * 40));
    w.u32(FORMAT);
    match &parsed.title_slot {
        None => w.u8(0),
        Some(slot) => {
            w.u8(1);
            w.str(&slot.title);
            match &slot.source {
                None => w.u8(0),
                Some(s) => {
                    w.u8(1);
                    w.str(s);
                }
            }
            w.str(&slot.updated_at);
        }
    }
    w.u64(parsed.malformed as u64);
    w.u8(u8::from(parsed.ends_with_newline) | u8::from(parsed.has_content) << 1 | u8::from(parsed.open_end) << 2);
    w.u64(parsed.byte_len as u64);
    w.u32(len32(parsed.diagnostics.len()));
    for d in &parsed.diagnostics {
        w.u64(d.line as u64);
        w.u64(d.offset as u64);
        diagnostic_kind(&mut w, &d.kind);
    }
    // Rows of every table, renumbered into one table; texts in order. A record read by
    // position is usually the next row at its own offset: one byte.
    let mut rows: Vec<SpanRow> = Vec::new();
    let mut names = String::new();
    let mut texts: Vec<&str> = Vec::new();
    let mut tables: Vec<(*const SpanTable, u32)> = Vec::new();
    let mut next_row = 0u32;
    w.u32(len32(parsed.records.len()));
    // The records' section is read in one piece: its length first, filled in after.
    let section = w.0.len();
    w.u64(0);
    for (i, r) in parsed.records.iter().enumerate() {
        let offset = parsed.record_offsets.get(i).copied().unwrap_or(0) as u64;
        match r.span_row() {
            Some((table, row)) => {
                let key = Arc::as_ptr(table);
                // Records come table by table: the last table first.
                let row_base = match tables.iter().rev().find(|(t, _)| *t == key) {
                    Some(&(_, base)) => base,
                    None => {
                        let (base, names_base) = (len32(rows.len()), len32(names.len()));
                        rows.extend(table.rows().iter().map(|r| r.with_names_at(r.names_at() + names_base)));
                        names.push_str(table.names());
                        tables.push((key, base));
                        base
                    }
                };
                let index = row_base + row;
                if index == next_row && rows.get(index as usize).is_some_and(|r| r.at == offset) {
                    w.u8(TAG_NEXT_ROW);
                } else {
                    w.u8(TAG_ROW);
                    w.u32(index);
                    w.u64(offset);
                }
                next_row = index + 1;
            }
            None => {
                w.u8(TAG_TEXT);
                w.u32(len32(texts.len()));
                w.u64(offset);
                texts.push(r.text());
            }
        }
    }
    let section_len = (w.0.len() - section - 8) as u64;
    w.0[section..section + 8].copy_from_slice(&section_len.to_le_bytes());
    w.u32(len32(rows.len()));
    for r in &rows {
        r.write(&mut w.0);
    }
    w.str(&names);
    w.u32(len32(texts.len()));
    for t in texts {
        w.str(t);
    }
    w.0
}

/// Reads bytes [`encode`] wrote; the records that were read by position read their
/// texts through `bodies`. `None` when the bytes are not such a text (damaged, cut,
/// another version).
pub fn decode(bytes: &[u8], bodies: &Arc<Bodies>) -> Option<ParsedFile> {
    let mut r = bytes;
    let parsed = decode_from(&mut r, bodies)?;
    r.is_empty().then_some(parsed)
}

/// [`decode`] reading the bytes from `r` as it goes (give it a buffered reader), so
/// that a large parse is never held twice; it reads exactly what [`encode`] wrote
/// and nothing after it.
pub fn decode_from(r: &mut dyn Read, bodies: &Arc<Bodies>) -> Option<ParsedFile> {
    let mut r = Reader { r };
    if r.u32()? != FORMAT {
        return None;
    }
    let title_slot = match r.u8()? {
        0 => None,
        1 => {
            let title = r.string()?;
            let source = match r.u8()? {
                0 => None,
                1 => Some(r.string()?),
                _ => return None,
            };
            Some(TitleSlot { title, source, updated_at: r.string()? })
        }
        _ => return None,
    };
    let malformed = usize::try_from(r.u64()?).ok()?;
    let flags = r.u8()?;
    let byte_len = usize::try_from(r.u64()?).ok()?;
    let n = r.u32()? as usize;
    let mut diagnostics = Vec::new();
    for _ in 0..n {
        let line = usize::try_from(r.u64()?).ok()?;
        let offset = usize::try_from(r.u64()?).ok()?;
        diagnostics.push(Diagnostic { line, offset, kind: read_kind(&mut r)? });
    }
    let n = r.u32()? as usize;
    // The records' section is walked twice: once for the offsets (those of the next
    // rows are theirs, known once the rows are read), once to make the records.
    let section_len = r.u64()?;
    let section = r.bytes(section_len)?;
    let mut record_offsets: Vec<usize> = Vec::with_capacity(n.min(section.len()));
    walk_section(&section, n, |_, _, offset| {
        record_offsets.push(offset.map_or(Some(usize::MAX), |o| usize::try_from(o).ok())?);
        Some(())
    })?;
    let n_rows = r.u32()? as usize;
    // Room for every row at once (no regrowth of a large table), bounded by the records
    // read above so a damaged count cannot ask for more.
    let mut rows = Vec::with_capacity(n_rows.min(record_offsets.len()));
    let mut chunk = vec![0u8; 4096 * SpanRow::BYTES];
    let mut left = n_rows;
    while left > 0 {
        let k = left.min(4096);
        let bytes = &mut chunk[..k * SpanRow::BYTES];
        r.exact(bytes)?;
        for b in bytes.chunks_exact(SpanRow::BYTES) {
            rows.push(SpanRow::read(b)?);
        }
        left -= k;
    }
    let names = r.string()?;
    if !rows.iter().all(|row| row.names_fit(&names)) || !SpanTable::parents_fit(&rows) {
        return None;
    }
    let n_texts = r.u32()? as usize;
    let mut texts = Vec::new();
    for _ in 0..n_texts {
        texts.push(Some(r.string()?));
    }
    let table = SpanTable::new(bodies, rows, names);
    let mut records = Vec::with_capacity(record_offsets.len());
    let mut k = 0;
    walk_section(&section, n, |tag, i, _| {
        let offset = record_offsets.get_mut(k)?;
        k += 1;
        if tag == TAG_TEXT {
            records.push(Record::parse(&texts.get_mut(i as usize)?.take()?).ok()?);
            return Some(());
        }
        let at = table.rows().get(i as usize)?.at;
        if *offset == usize::MAX {
            *offset = usize::try_from(at).ok()?;
        }
        records.push(Record::span_of(&table, i));
        Some(())
    })?;
    Some(ParsedFile {
        title_slot,
        records,
        record_offsets,
        diagnostics,
        malformed,
        ends_with_newline: flags & 1 != 0,
        has_content: flags & 2 != 0,
        open_end: flags & 4 != 0,
        byte_len,
    })
}

/// Walks the records' section of `n` records: `each` gets each record's tag
/// ([`TAG_TEXT`] or [`TAG_ROW`]), its text's or row's index and its offset when the
/// section holds one (a next row's is its row's); a [`TAG_NEXT_ROW`] stands for the
/// row after the last one. `None` when the section is not `n` such records (or `each`
/// gives `None`).
fn walk_section(section: &[u8], n: usize, mut each: impl FnMut(u8, u32, Option<u64>) -> Option<()>) -> Option<()> {
    let mut s = Slice { b: section, at: 0 };
    let mut next_row = 0u32;
    for _ in 0..n {
        match s.u8()? {
            TAG_NEXT_ROW => {
                each(TAG_ROW, next_row, None)?;
                next_row = next_row.checked_add(1)?;
            }
            tag @ (TAG_ROW | TAG_TEXT) => {
                let index = s.u32()?;
                let offset = s.u64()?;
                each(tag, index, Some(offset))?;
                if tag == TAG_ROW {
                    next_row = index.checked_add(1)?;
                }
            }
            _ => return None,
        }
    }
    (s.at == section.len()).then_some(())
}

/// A count that fits the format's `u32` fields (a session larger than that is not
/// stored: the facade writes no index for it).
fn len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn diagnostic_kind(w: &mut Writer, kind: &DiagnosticKind) {
    match kind {
        DiagnosticKind::BlankLine => w.u8(0),
        DiagnosticKind::CrLf => w.u8(1),
        DiagnosticKind::Bom => w.u8(2),
        DiagnosticKind::InvalidUtf8 => w.u8(3),
        DiagnosticKind::Malformed { reason } => {
            w.u8(4);
            w.str(reason);
        }
        DiagnosticKind::TornLastLine => w.u8(5),
        DiagnosticKind::MissingFinalNewline => w.u8(6),
        DiagnosticKind::SkippedValue { text } => {
            w.u8(7);
            w.str(text);
        }
        DiagnosticKind::NonObject { text } => {
            w.u8(8);
            w.str(text);
        }
        DiagnosticKind::TrailingGarbage => w.u8(9),
        DiagnosticKind::SpansLines => w.u8(10),
        DiagnosticKind::DuplicateHeader => w.u8(11),
        DiagnosticKind::DuplicateId { id } => {
            w.u8(12);
            w.str(id);
        }
        DiagnosticKind::BeforeHeader => w.u8(13),
        DiagnosticKind::DamagedTitleSlot => w.u8(14),
    }
}

fn read_kind(r: &mut Reader<'_>) -> Option<DiagnosticKind> {
    Some(match r.u8()? {
        0 => DiagnosticKind::BlankLine,
        1 => DiagnosticKind::CrLf,
        2 => DiagnosticKind::Bom,
        3 => DiagnosticKind::InvalidUtf8,
        4 => DiagnosticKind::Malformed { reason: r.string()? },
        5 => DiagnosticKind::TornLastLine,
        6 => DiagnosticKind::MissingFinalNewline,
        7 => DiagnosticKind::SkippedValue { text: r.string()? },
        8 => DiagnosticKind::NonObject { text: r.string()? },
        9 => DiagnosticKind::TrailingGarbage,
        10 => DiagnosticKind::SpansLines,
        11 => DiagnosticKind::DuplicateHeader,
        12 => DiagnosticKind::DuplicateId { id: r.string()? },
        13 => DiagnosticKind::BeforeHeader,
        14 => DiagnosticKind::DamagedTitleSlot,
        _ => return None,
    })
}

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.u32(len32(s.len()));
        self.0.extend_from_slice(s.as_bytes());
    }
}

struct Reader<'a> {
    r: &'a mut dyn Read,
}

/// The most a length read from the input reserves before its bytes arrive (a damaged
/// length must not allocate much; a real one beyond this grows as it is read).
const ROOM: u64 = 64 << 20;

/// Reads fields from a section read whole.
struct Slice<'a> {
    b: &'a [u8],
    at: usize,
}

impl Slice<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let out = self.b.get(self.at..self.at.checked_add(N)?)?.try_into().ok()?;
        self.at += N;
        Some(out)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take::<1>()?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take()?))
    }
}

impl Reader<'_> {
    fn exact(&mut self, buf: &mut [u8]) -> Option<()> {
        self.r.read_exact(buf).ok()
    }
    fn u8(&mut self) -> Option<u8> {
        let mut b = [0u8; 1];
        self.exact(&mut b)?;
        Some(b[0])
    }
    fn u32(&mut self) -> Option<u32> {
        let mut b = [0u8; 4];
        self.exact(&mut b)?;
        Some(u32::from_le_bytes(b))
    }
    fn u64(&mut self) -> Option<u64> {
        let mut b = [0u8; 8];
        self.exact(&mut b)?;
        Some(u64::from_le_bytes(b))
    }
    /// `n` bytes, read into their own allocation (beyond [`ROOM`] grown as bytes
    /// arrive, so a damaged length never allocates much more than the input holds).
    fn bytes(&mut self, n: u64) -> Option<Vec<u8>> {
        if n <= ROOM {
            // Zeroed by the allocator (fresh pages are), not by the reader as it goes.
            let mut bytes = vec![0u8; usize::try_from(n).ok()?];
            self.exact(&mut bytes)?;
            return Some(bytes);
        }
        let mut bytes = Vec::with_capacity(usize::try_from(ROOM).ok()?);
        let got = std::io::Read::take(&mut self.r, n).read_to_end(&mut bytes).ok()?;
        (got as u64 == n).then_some(bytes)
    }

    /// A string, read straight into its own allocation ([`Reader::bytes`]).
    fn string(&mut self) -> Option<String> {
        let n = u64::from(self.u32()?);
        String::from_utf8(self.bytes(n)?).ok()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::parse::fixtures::{LINES, SPAN_LINES, same_parse, skeleton};
    use crate::{Dialect, Parallelism, SpanPolicy, parse_session_spans};

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
            let parsed = parse_session_spans(&bodies, bytes.len() as u64, dialect, Parallelism::new(2), policy)
                .expect("reads");
            let stored = encode(&parsed);
            let again = decode(&stored, &bodies).expect("reads back");
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
            if let Some(p) = decode(&damaged, &bodies) {
                for r in &p.records {
                    let _ = (r.text(), r.id(), r.parent(), r.timestamp(), r.message_role());
                }
            }
        }
    }
}
