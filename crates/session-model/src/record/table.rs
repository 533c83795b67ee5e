//! The span table: the skeletons of records read by position, one row of 24 bytes
//! each, with the file's [`Bodies`] their texts are read from and the records read so
//! far; the rows a piece's parse makes ([`SpanBuilder`]); texts read back for a
//! whole-file write ([`lines`], [`load_all`]). See [`crate::span`].

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::{EntryType, ParentRef, Record, RecordParseError};
use crate::read_at::ReadAt;
use crate::scan;

/// Records shorter than this keep their text in memory: their row would save little.
pub const SPAN_FROM: usize = 256;

/// What [`Bodies`] does to a record read from the file before it is kept (the
/// facade resolves omp's blob references this way, as it does for records it keeps
/// in memory).
pub type LoadHook = Box<dyn Fn(Record) -> Record + Send + Sync>;

/// The file that records read by position read their text from, and what went wrong
/// reading it.
///
/// One per opened file, shared by its records (an `Arc`): the file stays open as long
/// as any of them lives. Made by whoever opens the file (`session` opens it through
/// its storage) and given to [`crate::parse_session_spans`].
pub struct Bodies {
    reader: Box<dyn ReadAt + Send>,
    /// The reader's stamp when the bodies were made (before the file was parsed).
    stamp: Option<u128>,
    hook: Option<LoadHook>,
    failure: Mutex<Option<std::io::Error>>,
    reads: AtomicU64,
}

impl fmt::Debug for Bodies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bodies").field("reads", &self.reads()).field("failed", &self.has_failed()).finish()
    }
}

impl Bodies {
    /// Returns the bodies of the file `reader` reads.
    pub fn new(reader: Box<dyn ReadAt + Send>) -> Bodies {
        let stamp = reader.stamp();
        Bodies { reader, stamp, hook: None, failure: Mutex::new(None), reads: AtomicU64::new(0) }
    }

    /// Returns whether the reader says no byte changed since the bodies were made.
    fn unchanged(&self) -> bool {
        self.stamp.is_some() && self.reader.stamp() == self.stamp
    }

    /// Returns these bodies with `hook` applied to every record read from the file.
    pub fn with_hook(mut self, hook: LoadHook) -> Bodies {
        self.hook = Some(hook);
        self
    }

    /// Returns the file's reader.
    pub fn reader(&self) -> &(dyn ReadAt + Send) {
        &*self.reader
    }

    /// Returns (and clears) the first error of a read that an accessor could not
    /// return: the record read as `null` for that call.
    pub fn take_failure(&self) -> Option<std::io::Error> {
        self.failure.lock().map_or(None, |mut f| f.take())
    }

    /// Returns whether a read failed since the last [`Bodies::take_failure`].
    pub fn has_failed(&self) -> bool {
        self.failure.lock().map_or(true, |f| f.is_some())
    }

    /// Returns how many record texts were read from the file so far: for their records,
    /// and for whole-file writes ([`lines`]); not the runs a write copied ([`copy_runs`]).
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    fn fail(&self, e: std::io::Error) {
        if let Ok(mut f) = self.failure.lock()
            && f.is_none()
        {
            *f = Some(e);
        }
    }
}

/// Where a row's `parentId` is.
const PARENT_ABSENT: u8 = 0;
const PARENT_NULL: u8 = 1;
const PARENT_ID: u8 = 2;
/// The `parentId` is the id of the row before it in the same table (most entries follow
/// the one before them): it is not written again in the table's text.
const PARENT_PREV: u8 = 3;

/// Row flags.
const HAS_ID: u8 = 1;
const HAS_ROLE: u8 = 2;
const HAS_TYPE: u8 = 4;
/// Every number of the record's text is plain (`number_plain`, in the JSON engine): its numbers are
/// exact without a look at them when it is written back.
const PLAIN_NUMBERS: u8 = 8;

/// The names of a row, in the order they follow each other in the table's text.
const NAME_ID: usize = 0;
const NAME_PARENT: usize = 1;
const NAME_TIMESTAMP: usize = 2;
const NAME_ROLE: usize = 3;
const NAME_TYPE: usize = 4;

/// The skeleton of one record read by position (24 bytes; its strings are in the
/// table's text).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SpanRow {
    /// Byte offset of the record's first byte in the file.
    pub(crate) at: u64,
    /// Length of the record's text in bytes.
    pub(crate) len: u32,
    /// Where the row's names start in the table's text.
    names: u32,
    kind: EntryType,
    parent: u8,
    flags: u8,
    /// Lengths of the id, parent id, timestamp, role and type.
    lens: [u8; 5],
}

impl SpanRow {
    /// The size of a row as [`SpanRow::write`] writes it.
    pub(crate) const BYTES: usize = 24;

    /// Returns where the row's names start in its table's text.
    pub(crate) fn names_at(&self) -> u32 {
        self.names
    }

    /// Returns the row with its names starting at `at` (rows of several tables joined).
    pub(crate) fn with_names_at(self, at: u32) -> SpanRow {
        SpanRow { names: at, ..self }
    }

    /// Returns whether the row's names lie in `names`, each on character boundaries.
    pub(crate) fn names_fit(&self, names: &str) -> bool {
        let mut at = self.names as usize;
        self.lens.iter().all(|&l| {
            let end = at + usize::from(l);
            let ok = names.get(at..end).is_some();
            at = end;
            ok
        })
    }

    /// Appends the row's [`SpanRow::BYTES`] bytes, little-endian.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.at.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.names.to_le_bytes());
        out.push(kind_code(self.kind));
        out.push(self.parent);
        out.push(self.flags);
        out.extend_from_slice(&self.lens);
    }

    /// Reads a row [`SpanRow::write`] wrote (`None`: not one).
    pub(crate) fn read(b: &[u8]) -> Option<SpanRow> {
        let b: &[u8; SpanRow::BYTES] = b.try_into().ok()?;
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut at = [0u8; 8];
        at.copy_from_slice(&b[..8]);
        let row = SpanRow {
            at: u64::from_le_bytes(at),
            len: u32_at(8),
            names: u32_at(12),
            kind: *KINDS.get(usize::from(b[16]))?,
            parent: b[17],
            flags: b[18],
            lens: [b[19], b[20], b[21], b[22], b[23]],
        };
        (row.parent <= PARENT_PREV && row.flags & !(HAS_ID | HAS_ROLE | HAS_TYPE | PLAIN_NUMBERS) == 0).then_some(row)
    }
}

/// Every entry type, in the order of their codes in a stored row.
const KINDS: [EntryType; 21] = [
    EntryType::Session,
    EntryType::Message,
    EntryType::CustomMessage,
    EntryType::Custom,
    EntryType::Compaction,
    EntryType::BranchSummary,
    EntryType::ModelChange,
    EntryType::ThinkingLevelChange,
    EntryType::ServiceTierChange,
    EntryType::ContextEdit,
    EntryType::Label,
    EntryType::SessionInfo,
    EntryType::Usage,
    EntryType::TtsrInjection,
    EntryType::SessionInit,
    EntryType::ModeChange,
    EntryType::ResetBoundary,
    EntryType::TitleChange,
    EntryType::CredentialPin,
    EntryType::ModelUsage,
    EntryType::Unknown,
];

/// The code of an entry type in a stored row: its place in [`KINDS`].
fn kind_code(kind: EntryType) -> u8 {
    KINDS.iter().position(|k| *k == kind).map_or(u8::MAX, |i| i as u8)
}

/// The skeleton of a record read by position, as strings: what a row holds, and what
/// a text read again must match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Skeleton<'a> {
    pub(crate) kind: EntryType,
    /// The `type` string of an unknown type (known types are [`Skeleton::kind`]).
    pub(crate) ty: Option<&'a str>,
    pub(crate) id: Option<&'a str>,
    pub(crate) parent: ParentRef<'a>,
    pub(crate) timestamp: &'a str,
    pub(crate) role: Option<&'a str>,
}

/// The rows of one piece of a file (or of one persisted index) and their texts once
/// read.
pub(crate) struct SpanTable {
    bodies: Arc<Bodies>,
    rows: Box<[SpanRow]>,
    names: Box<str>,
    /// The texts read so far, one cell per row; made when the first text is read (a
    /// session that only shows its tree never makes it).
    loaded: OnceLock<Box<[OnceLock<Record>]>>,
}

impl SpanTable {
    /// Returns a table of `rows` whose names are in `names`, reading through `bodies`.
    pub(crate) fn new(bodies: &Arc<Bodies>, rows: Vec<SpanRow>, names: String) -> Arc<SpanTable> {
        Arc::new(SpanTable {
            bodies: Arc::clone(bodies),
            rows: rows.into_boxed_slice(),
            names: names.into_boxed_str(),
            loaded: OnceLock::new(),
        })
    }

    fn row(&self, row: u32) -> &SpanRow {
        &self.rows[row as usize]
    }

    /// Returns whether every row that names the row before it as its parent has one
    /// with an id (rows read back from a stored index are checked before use).
    pub(crate) fn parents_fit(rows: &[SpanRow]) -> bool {
        rows.iter()
            .enumerate()
            .all(|(i, r)| r.parent != PARENT_PREV || i.checked_sub(1).is_some_and(|p| rows[p].flags & HAS_ID != 0))
    }

    fn name(&self, row: u32, which: usize) -> &str {
        let r = self.row(row);
        let start = r.names as usize + r.lens[..which].iter().map(|&l| usize::from(l)).sum::<usize>();
        self.names.get(start..start + usize::from(r.lens[which])).unwrap_or_default()
    }

    pub(crate) fn span(&self, row: u32) -> (u64, u32) {
        let r = self.row(row);
        (r.at, r.len)
    }

    pub(crate) fn kind(&self, row: u32) -> EntryType {
        self.row(row).kind
    }

    pub(crate) fn type_str(&self, row: u32) -> Option<&str> {
        let r = self.row(row);
        if r.flags & HAS_TYPE != 0 { Some(self.name(row, NAME_TYPE)) } else { r.kind.as_str() }
    }

    pub(crate) fn id(&self, row: u32) -> Option<&str> {
        (self.row(row).flags & HAS_ID != 0).then(|| self.name(row, NAME_ID))
    }

    pub(crate) fn parent(&self, row: u32) -> ParentRef<'_> {
        match self.row(row).parent {
            PARENT_NULL => ParentRef::Null,
            PARENT_ID => ParentRef::Id(self.name(row, NAME_PARENT)),
            // Checked when the table is made: the row before it has an id.
            PARENT_PREV => ParentRef::Id(self.name(row.wrapping_sub(1), NAME_ID)),
            _ => ParentRef::Absent,
        }
    }

    pub(crate) fn timestamp(&self, row: u32) -> Option<&str> {
        Some(self.name(row, NAME_TIMESTAMP))
    }

    pub(crate) fn role(&self, row: u32) -> Option<&str> {
        (self.row(row).flags & HAS_ROLE != 0).then(|| self.name(row, NAME_ROLE))
    }

    pub(crate) fn skeleton(&self, row: u32) -> Skeleton<'_> {
        let r = self.row(row);
        Skeleton {
            kind: r.kind,
            ty: (r.flags & HAS_TYPE != 0).then(|| self.name(row, NAME_TYPE)),
            id: self.id(row),
            parent: self.parent(row),
            timestamp: self.name(row, NAME_TIMESTAMP),
            role: self.role(row),
        }
    }

    pub(crate) fn rows(&self) -> &[SpanRow] {
        &self.rows
    }

    /// Returns the text holding the rows' names.
    pub(crate) fn names(&self) -> &str {
        &self.names
    }

    /// Returns whether `text`, read from the row's place in a file that did not change
    /// since it was parsed, looks like the row's record: one object holding the row's
    /// id (a text that does not is checked in full).
    fn looks_like(&self, row: u32, text: &str) -> bool {
        if !(text.starts_with('{') && text.ends_with('}')) {
            return false;
        }
        match self.id(row) {
            Some(id) => {
                let b = text.as_bytes();
                memchr::memmem::find_iter(b, id.as_bytes()).any(|at| {
                    at >= 7
                        && b[at - 1] == b'"'
                        && b.get(at + id.len()) == Some(&b'"')
                        && b[..at - 1].ends_with(b"\"id\":")
                })
            }
            None => false,
        }
    }

    /// Returns whether the scan found every number of the row's text plain.
    fn numbers_plain(&self, row: u32) -> bool {
        self.row(row).flags & PLAIN_NUMBERS != 0
    }

    /// Returns the row's text if it was read.
    pub(crate) fn loaded(&self, row: u32) -> Option<&Record> {
        self.loaded.get()?[row as usize].get()
    }

    /// Keeps `record` as the row's text (the first one kept wins).
    fn keep(&self, row: u32, record: Record) -> &Record {
        let cells = self.loaded.get_or_init(|| (0..self.rows.len()).map(|_| OnceLock::new()).collect());
        cells[row as usize].get_or_init(|| record)
    }

    /// Returns the row's text, reading it now if it was not yet; a failure is kept by
    /// the bodies and gives `None`.
    pub(crate) fn loaded_or_read(&self, row: u32) -> Option<&Record> {
        match self.load(row) {
            Ok(r) => Some(r),
            Err(e) => {
                self.bodies.fail(e);
                None
            }
        }
    }

    /// Returns the row's text, reading it now if it was not yet.
    pub(crate) fn load(&self, row: u32) -> std::io::Result<&Record> {
        if let Some(r) = self.loaded(row) {
            return Ok(r);
        }
        let record = self.read(row)?;
        Ok(self.keep(row, record))
    }

    /// Reads the row's text from the file (without keeping it), checks it is the
    /// record that was indexed and applies the bodies' hook.
    pub(crate) fn read(&self, row: u32) -> std::io::Result<Record> {
        let (at, len) = self.span(row);
        let mut buf = vec![0u8; len as usize];
        let n = self.bodies.reader.read_full_at(&mut buf, at)?;
        if n < buf.len() {
            return Err(changed(at, "the file is shorter than when it was read"));
        }
        self.accept(row, &buf)
    }

    /// Checks that `bytes` (read from the row's place) are the record that was indexed,
    /// and makes the record the table hands out for the row.
    fn accept(&self, row: u32, bytes: &[u8]) -> std::io::Result<Record> {
        let (at, _) = self.span(row);
        let text = std::str::from_utf8(bytes).map_err(|_| changed(at, "the bytes there are not UTF-8"))?;
        let record = Record::parse(text).map_err(|_| changed(at, "the bytes there are not one JSON value"))?;
        if skeleton_of(&record).as_ref() != Some(&self.skeleton(row)) {
            return Err(changed(at, "another record is there"));
        }
        self.bodies.reads.fetch_add(1, Ordering::Relaxed);
        Ok(match &self.bodies.hook {
            Some(hook) => hook(record),
            None => record,
        })
    }
}

/// The error of a text read again that is not the record indexed there.
fn changed(at: u64, why: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("the session file changed since it was read: at byte {at}, {why}; open it again"),
    )
}

/// Returns the skeleton a record held in memory would have as a row, `None` if it
/// could not be one.
fn skeleton_of(r: &Record) -> Option<Skeleton<'_>> {
    if !r.is_object() {
        return None;
    }
    let kind = r.entry_type();
    Some(Skeleton {
        kind,
        ty: if kind == EntryType::Unknown { r.type_str() } else { None },
        id: r.id(),
        parent: r.parent(),
        timestamp: r.timestamp()?,
        role: if kind == EntryType::Message { r.message_info().role() } else { None },
    })
}

/// Reads the texts of `records` that were read by position and are not in memory yet,
/// nearby ones in one read each; afterwards they read without touching the file.
///
/// # Errors
/// The first failed read, or a record that is no longer where it was read
/// ([`std::io::ErrorKind::InvalidData`]); the texts read before it stay in memory.
pub fn load_all<'a>(records: impl IntoIterator<Item = &'a Record>) -> std::io::Result<()> {
    let mut wanted: Vec<Wanted<'a>> = records
        .into_iter()
        .filter_map(|r| {
            let (table, row) = r.span_row().filter(|(t, row)| t.loaded(*row).is_none())?;
            let (at, len) = table.span(row);
            Some(Wanted { record: 0, table, row, at, len, place: 0 })
        })
        .collect();
    let mut buf = Vec::new();
    read_runs(&mut wanted, &mut buf)?;
    for w in &wanted {
        if w.table.loaded(w.row).is_none() {
            let record = w.table.accept(w.row, &buf[w.place..w.place + w.len as usize])?;
            w.table.keep(w.row, record);
        }
    }
    Ok(())
}

/// Returns the line to write for each of `records` ([`Record::line`]): borrowed from
/// the record when its text is in memory, else read from its file for this call only
/// (not kept), nearby texts in one read each, into `buf` (reused from call to call).
/// This is how a whole-file write streams a session whose texts are in its file.
///
/// A text read again is checked to be the record indexed there: in full (it must
/// parse to the same skeleton) unless the file says no byte changed since it was
/// parsed, when its first and last bytes and its id are looked at.
///
/// # Errors
/// As [`load_all`].
pub fn lines<'a>(records: &'a [Record], buf: &'a mut Vec<u8>) -> std::io::Result<Vec<Cow<'a, str>>> {
    let mut wanted: Vec<Wanted<'a>> = records
        .iter()
        .enumerate()
        .filter_map(|(record, r)| {
            let (table, row) = r.span_row().filter(|(t, row)| t.loaded(*row).is_none())?;
            let (at, len) = table.span(row);
            Some(Wanted { record, table, row, at, len, place: 0 })
        })
        .collect();
    let runs = read_runs(&mut wanted, buf)?;
    let buf: &'a [u8] = buf;
    // Each run is checked as UTF-8 once (a record's text then is a slice of it).
    let texts: Vec<Option<&'a str>> =
        runs.iter().map(|r| simdutf8::basic::from_utf8(&buf[r.place..r.place + r.len]).ok()).collect();
    let text_at = |place: usize, len: usize| -> Option<&'a str> {
        let k = runs.partition_point(|r| r.place <= place).checked_sub(1)?;
        texts[k]?.get(place - runs[k].place..place - runs[k].place + len)
    };
    let mut unchanged: Vec<(*const Bodies, bool)> = Vec::new();
    let mut out: Vec<Cow<'a, str>> = records.iter().map(|_| Cow::Borrowed("")).collect();
    let mut read = wanted.iter().peekable();
    for (i, r) in records.iter().enumerate() {
        let Some(w) = read.next_if(|w| w.record == i) else {
            out[i] = r.line();
            continue;
        };
        let (table, len) = (w.table, w.len as usize);
        let bytes = &buf[w.place..w.place + len];
        let key = Arc::as_ptr(&table.bodies);
        let trusted = match unchanged.iter().find(|(b, _)| *b == key) {
            Some(&(_, u)) => u,
            None => {
                let u = table.bodies.unchanged();
                unchanged.push((key, u));
                u
            }
        };
        out[i] = match text_at(w.place, len) {
            // The file says nothing changed and the text holds the row's id: its bytes
            // as they are, unless JavaScript reads its numbers as other values.
            Some(text)
                if trusted
                    && !(table.bodies.hook.is_some() && text.contains("blob:sha256:"))
                    && table.looks_like(w.row, text)
                    && (table.numbers_plain(w.row) || crate::json::numbers_exact(text)) =>
            {
                table.bodies.reads.fetch_add(1, Ordering::Relaxed);
                Cow::Borrowed(text)
            }
            _ => Cow::Owned(table.accept(w.row, bytes)?.line().into_owned()),
        };
    }
    Ok(out)
}

/// Consecutive records whose lines are, byte for byte, one stretch of the file they
/// were read from: a whole-file write can copy the stretch instead of writing the lines
/// ([`copy_runs`]).
#[derive(Debug)]
pub struct CopyRun<'a> {
    /// Which of the records (indexes into the slice given to [`copy_runs`]).
    pub records: std::ops::Range<usize>,
    /// Where the stretch starts in the file.
    pub at: u64,
    /// Its length: the lines and the single `\n` between each two, not the last
    /// line's newline.
    pub len: u64,
    bodies: &'a Bodies,
}

impl CopyRun<'_> {
    /// Returns the file the stretch is in.
    pub fn source(&self) -> &dyn ReadAt {
        &*self.bodies.reader
    }

    /// Returns whether the file still says no byte changed since its records were
    /// parsed: checked after a copy, so that bytes copied while the file changed are
    /// never kept.
    pub fn unchanged(&self) -> bool {
        self.bodies.unchanged()
    }
}

/// Returns the stretches of `records` that a whole-file write can copy from their file
/// instead of writing: runs of consecutive records read by position from one file, at
/// least `min_len` bytes long, each the next line of the file after the one before (one
/// `\n` between them). Only a record whose line is its file's bytes qualifies: one
/// read by position (not changed since, as a changed record is no longer a row), from a
/// file that is an open file ([`ReadAt::fd`]), that says no byte changed since it was
/// parsed ([`ReadAt::stamp`]), with no load hook, and whose numbers JavaScript reads as
/// written. Everything else is written by [`lines`] as before.
pub fn copy_runs<'a>(records: &'a [Record], min_len: u64) -> Vec<CopyRun<'a>> {
    let mut runs: Vec<CopyRun<'a>> = Vec::new();
    let mut trusted: Vec<(*const Bodies, bool)> = Vec::new();
    let mut current: Option<CopyRun<'a>> = None;
    let close = |run: Option<CopyRun<'a>>, runs: &mut Vec<CopyRun<'a>>| {
        runs.extend(run.filter(|r| r.len >= min_len));
    };
    for (i, r) in records.iter().enumerate() {
        let Some((table, row)) = r.span_row() else {
            close(current.take(), &mut runs);
            continue;
        };
        let bodies = &*table.bodies;
        let key: *const Bodies = bodies;
        let ok = match trusted.iter().find(|(b, _)| *b == key) {
            Some(&(_, ok)) => ok,
            None => {
                let ok = copyable(bodies);
                trusted.push((key, ok));
                ok
            }
        };
        if !ok || !table.numbers_plain(row) {
            close(current.take(), &mut runs);
            continue;
        }
        let (at, len) = table.span(row);
        match current.as_mut() {
            Some(run) if std::ptr::eq(run.bodies, bodies) && run.at + run.len + 1 == at => {
                run.records.end = i + 1;
                run.len += 1 + u64::from(len);
            }
            _ => {
                close(current.take(), &mut runs);
                current = Some(CopyRun { records: i..i + 1, at, len: u64::from(len), bodies });
            }
        }
    }
    close(current.take(), &mut runs);
    runs
}

/// Whether records of `bodies` may be copied from its file as they are.
fn copyable(bodies: &Bodies) -> bool {
    #[cfg(unix)]
    let open_file = bodies.reader.fd().is_some();
    #[cfg(not(unix))]
    let open_file = false;
    open_file && bodies.hook.is_none() && bodies.unchanged()
}

/// A text [`lines`] reads from a file.
struct Wanted<'a> {
    /// Which of the records.
    record: usize,
    table: &'a Arc<SpanTable>,
    row: u32,
    /// Where it is in its file.
    at: u64,
    len: u32,
    /// Where it lands in the buffer.
    place: usize,
}

/// One read of [`lines`]: `len` bytes into the buffer at `place`.
struct Run {
    place: usize,
    len: usize,
}

/// Reads the texts `wanted` into `buf`, nearby ones of one file in one read each, and
/// sets where each landed; returns the reads, in buffer order.
fn read_runs(wanted: &mut [Wanted<'_>], buf: &mut Vec<u8>) -> std::io::Result<Vec<Run>> {
    /// Texts at most this far apart are read in one read.
    const GAP: u64 = 16 << 10;
    /// The most one read takes in.
    const MAX_READ: u64 = 8 << 20;
    let mut order: Vec<usize> = (0..wanted.len()).collect();
    order.sort_by_key(|&k| (Arc::as_ptr(&wanted[k].table.bodies) as usize, wanted[k].at));
    let mut planned: Vec<(usize, &Arc<SpanTable>, u64, u64)> = Vec::new();
    let mut total = 0usize;
    let mut k = 0;
    while k < order.len() {
        let first = &wanted[order[k]];
        let (table, from) = (first.table, first.at);
        let mut to = from + u64::from(first.len);
        let mut j = k + 1;
        while let Some(w) = order.get(j).map(|&m| &wanted[m]) {
            if !Arc::ptr_eq(&w.table.bodies, &table.bodies)
                || w.at > to + GAP
                || w.at + u64::from(w.len) - from > MAX_READ
            {
                break;
            }
            to = to.max(w.at + u64::from(w.len));
            j += 1;
        }
        for &m in &order[k..j] {
            wanted[m].place = total + (wanted[m].at - from) as usize;
        }
        planned.push((total, table, from, to));
        total += (to - from) as usize;
        k = j;
    }
    buf.clear();
    buf.resize(total, 0);
    let mut runs = Vec::with_capacity(planned.len());
    for (place, table, from, to) in planned {
        let len = (to - from) as usize;
        if table.bodies.reader.read_full_at(&mut buf[place..place + len], from)? < len {
            return Err(changed(from, "the file is shorter than when it was read"));
        }
        runs.push(Run { place, len });
    }
    Ok(runs)
}

/// Returns an absent field as `Some(None)`, a string field decoded, and `None` for a
/// field of any other type (which keeps its record in memory).
fn decoded(raw: Option<&str>) -> Option<Option<Cow<'_, str>>> {
    match raw {
        None => Some(None),
        Some(r) if scan::kind(r) == scan::Kind::String => scan::decode_string(r).map(Some),
        Some(_) => None,
    }
}

/// Makes the records of one piece of a file as it is parsed: records that qualify
/// (see the module documentation) become rows of the piece's table, the rest keep
/// their text.
pub(crate) struct SpanBuilder {
    /// The file offset of the piece's first byte.
    base: u64,
    /// The address of the piece's text, which every parsed line is a slice of.
    origin: usize,
    span_from: usize,
    rows: Vec<SpanRow>,
    names: String,
}

impl SpanBuilder {
    /// Returns a builder for the piece `text`, which starts at byte `base` of the file.
    pub(crate) fn new(text: &str, base: u64, span_from: usize) -> SpanBuilder {
        SpanBuilder { base, origin: text.as_ptr() as usize, span_from, rows: Vec::new(), names: String::new() }
    }

    /// Parses `line` (a slice of the piece's text) as [`Record::parse`] does; a record
    /// that qualifies comes back unbound, a row of the table [`SpanBuilder::finish`]
    /// makes.
    pub(crate) fn record(&mut self, line: &str) -> Result<Record, RecordParseError> {
        let bytes = line.as_bytes();
        let start = scan::skip_ws(bytes, 0);
        if bytes.get(start) != Some(&b'{') {
            return Record::parse_non_object(line);
        }
        let scan = Record::scan_object(line, start)?;
        let raw = &line[start..scan.end];
        match self.row_for(raw, scan.fields, scan.role, scan.numbers_plain) {
            Some(row) => Ok(row),
            None => Ok(Record::from_fields(raw, &scan)),
        }
    }

    /// Adds a row for the object `raw` when it qualifies and returns its record.
    fn row_for(
        &mut self,
        raw: &str,
        [ty, id, parent, ts, _]: [Option<&str>; 5],
        role: Option<&str>,
        numbers_plain: bool,
    ) -> Option<Record> {
        if raw.len() < self.span_from {
            return None;
        }
        let len = u32::try_from(raw.len()).ok()?;
        let ty = decoded(ty)??;
        let kind = EntryType::from_type_str(&ty);
        if matches!(kind, EntryType::Session | EntryType::Label) {
            return None;
        }
        let id = decoded(id)?;
        let (mut parent_tag, mut parent) = match parent {
            None => (PARENT_ABSENT, None),
            Some("null") => (PARENT_NULL, None),
            Some(_) => (PARENT_ID, Some(decoded(parent)??)),
        };
        if parent.is_some() && parent.as_deref() == self.last_id() {
            (parent_tag, parent) = (PARENT_PREV, None);
        }
        let ts = decoded(ts)??;
        // The role a message's skeleton answers: a string, or none (no string role).
        let role = match role {
            Some(r) if kind == EntryType::Message && scan::kind(r) == scan::Kind::String => scan::decode_string(r),
            _ => None,
        };
        if memchr::memchr2(b'\n', b'\r', raw.as_bytes()).is_some() {
            return None;
        }
        let ty_name = (kind == EntryType::Unknown).then_some(ty.as_ref());
        let names = [id.as_deref(), parent.as_deref(), Some(ts.as_ref()), role.as_deref(), ty_name];
        let mut lens = [0u8; 5];
        for (l, n) in lens.iter_mut().zip(names) {
            *l = u8::try_from(n.map_or(0, str::len)).ok()?;
        }
        let at = self.base + (raw.as_ptr() as usize - self.origin) as u64;
        let row = u32::try_from(self.rows.len()).ok()?;
        let start = u32::try_from(self.names.len()).ok()?;
        let mut flags = if numbers_plain { PLAIN_NUMBERS } else { 0 };
        for (i, n) in names.iter().enumerate() {
            if let Some(n) = n {
                self.names.push_str(n);
                flags |= match i {
                    NAME_ID => HAS_ID,
                    NAME_ROLE => HAS_ROLE,
                    NAME_TYPE => HAS_TYPE,
                    _ => 0,
                };
            }
        }
        self.rows.push(SpanRow { at, len, names: start, kind, parent: parent_tag, flags, lens });
        Some(Record::unbound(row))
    }

    /// Returns the id of the last row added, if it has one.
    fn last_id(&self) -> Option<&str> {
        let r = self.rows.last().filter(|r| r.flags & HAS_ID != 0)?;
        let at = r.names as usize;
        self.names.get(at..at + usize::from(r.lens[NAME_ID]))
    }

    /// Makes the piece's table and binds the piece's unbound records to it.
    pub(crate) fn finish(self, bodies: &Arc<Bodies>, records: &mut [Record]) {
        if self.rows.is_empty() {
            return;
        }
        let table = SpanTable::new(bodies, self.rows, self.names);
        for r in records {
            r.bind(&table);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span;
    use crate::{Dialect, SpanPolicy, parse_session_bytes, parse_session_spans};

    #[test]
    fn a_row_is_24_bytes() {
        assert_eq!(std::mem::size_of::<SpanRow>(), 24);
        assert_eq!(std::mem::size_of::<Record>(), 16);
    }

    /// A row whose parent is the row before it keeps that id once in the table's text;
    /// a stored row claiming so with no row before it (or one without an id) is refused.
    #[test]
    fn a_parent_that_is_the_row_before_is_not_written_again() -> std::io::Result<()> {
        let text = concat!(
            "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n",
            "{\"type\":\"custom\",\"id\":\"aaaa\",\"parentId\":null,\"timestamp\":\"t\"}\n",
            "{\"type\":\"custom\",\"id\":\"bbbb\",\"parentId\":\"aaaa\",\"timestamp\":\"t\"}\n",
            "{\"type\":\"custom\",\"id\":\"cccc\",\"parentId\":\"aaaa\",\"timestamp\":\"t\"}\n",
        );
        let bodies = Arc::new(Bodies::new(Box::new(text.as_bytes().to_vec())));
        let parsed = crate::parse_session_spans(
            &bodies,
            text.len() as u64,
            crate::Dialect::Pi,
            crate::Parallelism::new(2),
            // A piece smaller than the file (read by position), holding the three rows.
            crate::SpanPolicy::everything(text.len() as u64 - 1),
        )?;
        let parents: Vec<_> = parsed.records[1..].iter().map(|r| r.parent().id().map(str::to_owned)).collect();
        assert_eq!(parents, [None, Some("aaaa".to_owned()), Some("aaaa".to_owned())]);
        let (table, _) = parsed.records[1].span_row().expect("a row");
        // aaaa t, bbbb t (its parent shared), cccc aaaa t.
        assert_eq!(table.names(), "aaaatbbbbtccccaaaat");
        let rows = table.rows();
        assert_eq!(rows[1].parent, PARENT_PREV);
        assert_eq!(rows[2].parent, PARENT_ID);
        assert!(SpanTable::parents_fit(rows));
        assert!(!SpanTable::parents_fit(&rows[1..]));
        let no_id = SpanRow { flags: rows[0].flags & !HAS_ID, ..rows[0] };
        assert!(!SpanTable::parents_fit(&[no_id, rows[1]]));
        let stored = crate::stored::encode(&parsed);
        let again = crate::stored::decode(&stored, &bodies).expect("reads back");
        assert_eq!(again.records, parsed.records);
        Ok(())
    }

    #[test]
    fn every_entry_type_has_a_code() {
        for (i, k) in KINDS.iter().enumerate() {
            assert_eq!(kind_code(*k) as usize, i);
        }
        for name in ["session", "message", "label", "usage", "model_usage", "nope"] {
            assert!(KINDS.contains(&EntryType::from_type_str(name)));
        }
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
}
