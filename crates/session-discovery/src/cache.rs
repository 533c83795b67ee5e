//! The listing cache: what a listing learned about each session file, kept between
//! runs and reused while the file is unchanged.
//!
//! pi's session info needs every message text of every file, so a listing reads
//! every byte of every session. The cache keeps each file's [`SessionInfo`] keyed by
//! the file's identity: path, size, modification and change times (nanoseconds),
//! inode and device. A file whose identity is unchanged is not read again; any
//! change (an append, a rewrite, a rename over it, a touch) makes it a miss.
//!
//! * **Racy entries.** A file modified within [`RACY_NS`] of the moment the cache
//!   was written could change again without its times moving (coarse timestamps), so
//!   such entries are never trusted: they are rescanned (git's "racy clean" rule).
//! * **Private and disposable.** The cache lives in a [`PrivateDir`] outside the
//!   session directories (`$XDG_CACHE_HOME/session-store/` for the `session` command):
//!   written 0600 and atomically without following a link, never synced (losing it to
//!   a power cut only costs one full scan), read only when it is this user's private
//!   file. Both go through `session-store` ([`PrivateDir::write_file`], and
//!   [`PrivateDir::open_reader`] to read by position), which makes every check: nothing
//!   here opens a file. A missing, unreadable, foreign or damaged cache file is ignored
//!   as a whole and replaced; a damaged text costs only its own file a scan.
//! * **Checked.** A BLAKE3 hash of the header and the record section is checked when
//!   the file is loaded, before any record is believed; each message text carries its
//!   own hash, checked when the text is read, and must be the content of a JSON string
//!   (no unescaped quote, backslash or control character) before it is copied as it
//!   is into a listing printed as JSON. Bounds are checked everywhere: a text must lie
//!   after the records and inside the file.
//! * **Format.** Binary, little-endian, versioned: a header (magic, version, dialect,
//!   scope, write time, where the records end, file length, the hash of header and
//!   records), one record per file (path, identity, the info or "not listable", the
//!   hash of its message text and where that text is), then every message text, as
//!   the content of a JSON string (escaped as `JSON.stringify` escapes it). Strings
//!   are length-prefixed UTF-8, validated on read. Only the records are read up front;
//!   each text is read straight into the [`MessagesText`] that returns it, so a listing
//!   holds one copy of the texts, not two, and a listing printed as JSON copies them
//!   without escaping them again. Records of files that did not change are copied to
//!   the next cache as raw bytes.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use session_model::{Dialect, ReadAt};
use session_store::{PrivateDir, Storage};

use crate::info::{MessagesText, SessionInfo, SessionStatus};

const MAGIC: &[u8; 8] = b"SSLCACHE";
/// 5: a hash of header and records, and one per message text.
const VERSION: u32 = 5;
/// How many listing caches a cache directory keeps: saving one more removes the
/// caches written longest ago.
pub const MAX_CACHE_FILES: usize = 32;
/// Entries of files modified less than this long before the cache was written are
/// rescanned (timestamps may be coarser than the changes).
pub(crate) const RACY_NS: i64 = session_store::FileIdentity::RACY_NS;

/// A file's identity as far as the cache is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileKey {
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    ino: u64,
    dev: u64,
}

impl FileKey {
    /// Returns the identity of the file at `path` as `storage` states it (following
    /// links), or `None` where the storage has no identity to offer: such files are
    /// never answered from the cache.
    pub(crate) fn of(storage: &dyn Storage, path: &Path) -> Option<FileKey> {
        let st = storage.stat(path).ok()??;
        let id = st.identity?;
        Some(FileKey { size: st.size, mtime_ns: id.mtime_ns, ctime_ns: id.ctime_ns, ino: id.ino, dev: id.dev })
    }
}

/// One listing's view of the cache: the records loaded from disk, and the files
/// scanned afresh during the listing.
pub(crate) struct ListCache {
    dir: PrivateDir,
    /// The cache file's name in `dir`.
    name: String,
    dialect: Dialect,
    scope: String,
    /// The previous cache file (open, for its texts) and its record section.
    old_file: Option<Box<dyn ReadAt + Send>>,
    records: Vec<u8>,
    written_at_ns: i64,
    old: Index,
    /// Paths answered from the cache.
    hits: Mutex<Vec<PathBuf>>,
    /// Files scanned afresh: their identity (when known) and what the scan gave.
    fresh: Mutex<Vec<Fresh>>,
    /// Whether infos answered from the cache get their message text (read and checked);
    /// without, it is left empty.
    texts: bool,
}

/// A file scanned afresh during a listing: its path, its identity (when it could be
/// read) and what the scan gave.
type Fresh = (PathBuf, Option<FileKey>, Option<SessionInfo>);

/// Where a record's parts are: the whole record and its info in the record section,
/// its message text in the file.
#[derive(Clone, Debug)]
struct Spans {
    record: Range<usize>,
    info: Range<usize>,
    text: Range<u64>,
    /// The BLAKE3 hash of the text.
    text_hash: [u8; 32],
}

/// A cache file's records by path (its bytes: hashing a `Path` goes component by
/// component).
type Index = HashMap<Vec<u8>, (FileKey, Spans)>;

/// The fixed part of the header after the magic, version, dialect and scope:
/// write time, end of the record section, file length, and the hash of the header
/// before it and of the record section.
const HEADER_TAIL: usize = 24 + 32;

impl ListCache {
    /// Loads the cache of `scope` (what was listed, and how) for `dialect` from
    /// `dir`. Anything wrong with the file gives an empty cache.
    pub(crate) fn load(dir: &PrivateDir, dialect: Dialect, scope: &str) -> ListCache {
        let name = format!("list-{}-{}.bin", dialect.name(), &blake3::hash(scope.as_bytes()).to_hex()[..16]);
        let mut cache = ListCache {
            dir: dir.clone(),
            name,
            dialect,
            scope: scope.to_owned(),
            old_file: None,
            records: Vec::new(),
            written_at_ns: 0,
            old: HashMap::new(),
            hits: Mutex::new(Vec::new()),
            fresh: Mutex::new(Vec::new()),
            texts: true,
        };
        if let Ok(Some((stat, file))) = dir.open_reader(&cache.name)
            && let Some((records, written_at_ns, old)) = read_records(&*file, stat.size, dialect, scope)
        {
            cache.old_file = Some(file);
            cache.records = records;
            cache.written_at_ns = written_at_ns;
            cache.old = old;
        }
        cache
    }

    /// Returns this cache answering without message texts when `texts` is false: a
    /// text is then neither read nor checked (a later save still copies it).
    pub(crate) fn with_texts(mut self, texts: bool) -> ListCache {
        self.texts = texts;
        self
    }

    /// Returns the info of `path`: from the cache when the file is unchanged since it
    /// was cached (and was not modified just before), else from `build`.
    pub(crate) fn info(
        &self,
        storage: &dyn Storage,
        path: &Path,
        build: &dyn Fn(&Path) -> Option<SessionInfo>,
    ) -> Option<SessionInfo> {
        let key = FileKey::of(storage, path);
        if let Some(key) = key
            && let Some((cached, spans)) = self.old.get(path.as_os_str().as_encoded_bytes())
            && *cached == key
            && key.mtime_ns < self.written_at_ns.saturating_sub(RACY_NS)
            && let Some(decoded) = self.decode(spans, path)
        {
            lock(&self.hits).push(path.to_path_buf());
            return decoded;
        }
        let built = build(path);
        lock(&self.fresh).push((path.to_path_buf(), key, built.clone()));
        built
    }

    /// Decodes a cached record, reading its text from the file (unless texts are not
    /// wanted); `None` when the record or its text is damaged.
    fn decode(&self, spans: &Spans, path: &Path) -> Option<Option<SessionInfo>> {
        let mut info = decode_info(&self.records[spans.info.clone()], path)?;
        if let Some(i) = info.as_mut().filter(|_| self.texts) {
            thread_local! {
                /// The text is read here, between quotes, then copied into its string
                /// once checked.
                static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
            }
            // Read into a reused buffer, checked and copied: cheaper than reading into
            // the string's own memory and validating with std's checker.
            i.all_messages_text = BUF.with(|buf| {
                let mut buf = buf.borrow_mut();
                read_quoted_into(self.old_file.as_deref()?, &spans.text, &mut buf).ok()?;
                checked_text(&buf, &spans.text_hash, true)
            })?;
        }
        Some(info)
    }

    /// Writes the cache back when the listing found anything new, changed or gone.
    /// Failures are ignored: the cache is only an accelerator.
    pub(crate) fn save(self, now_ns: i64) {
        let hits = self.hits.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        let fresh = self.fresh.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        if fresh.is_empty() && hits.len() == self.old.len() {
            return;
        }
        // The record section, with text offsets relative to the text section for now.
        let mut records = Vec::with_capacity(self.records.len() + fresh.len() * 256);
        let mut texts: Vec<TextSource<'_>> = Vec::new();
        let mut text_len = 0u64;
        for path in &hits {
            let Some((_, spans)) = self.old.get(path.as_os_str().as_encoded_bytes()) else { continue };
            // The old record up to its text location, then the new location.
            let record = &self.records[spans.record.clone()];
            records.extend_from_slice(&record[..record.len() - 16]);
            let len = spans.text.end - spans.text.start;
            put_u64(&mut records, text_len);
            put_u64(&mut records, len);
            text_len += len;
            texts.push(TextSource::Old(spans.text.clone()));
        }
        for (path, key, info) in &fresh {
            let (Some(key), Some(p)) = (key, path.to_str()) else { continue };
            let text = put_record(&mut records, p, key, info.as_ref(), text_len);
            text_len += text.len() as u64;
            texts.push(TextSource::New(text));
        }
        let Some(head) = seal(self.dialect, &self.scope, now_ns, &mut records, text_len) else { return };
        let pick = |n: &str| n.starts_with("list-") && n.ends_with(".bin");
        self.dir.evict_oldest(&pick, &self.name, MAX_CACHE_FILES);
        let old_file = self.old_file.as_deref();
        // A cache is no session: no append writer holds it, so no session lock is taken
        // (and no lock files are left in the cache directory).
        let _ = self.dir.write_file(&self.name, &mut |w| {
            w.write_all(&head)?;
            w.write_all(&records)?;
            for t in &texts {
                match t {
                    TextSource::New(s) => w.write_all(s.as_bytes())?,
                    TextSource::Old(range) => {
                        let file = old_file.ok_or_else(|| std::io::Error::other("old cache closed"))?;
                        w.copy_from(file, range.start, range.end - range.start)?;
                    }
                }
            }
            Ok(())
        });
    }
}

/// Appends the record of the file at `path` (identity `key`, info `info`) whose text
/// will be at `text_at` in the text section; returns that text.
fn put_record<'a>(
    records: &mut Vec<u8>,
    path: &str,
    key: &FileKey,
    info: Option<&'a SessionInfo>,
    text_at: u64,
) -> std::borrow::Cow<'a, str> {
    put_str(records, path);
    for v in [key.size, key.mtime_ns as u64, key.ctime_ns as u64, key.ino, key.dev] {
        put_u64(records, v);
    }
    let info_at = records.len();
    put_u64(records, 0);
    encode_info(records, info);
    let info_len = (records.len() - info_at - 8) as u64;
    records[info_at..info_at + 8].copy_from_slice(&info_len.to_le_bytes());
    let text = info.map_or(std::borrow::Cow::Borrowed(""), |i| i.all_messages_text.as_json());
    records.extend_from_slice(blake3::hash(text.as_bytes()).as_bytes());
    put_u64(records, text_at);
    put_u64(records, text.len() as u64);
    text
}

/// Returns the header of a cache of `dialect` and `scope` written at `now_ns` whose
/// record section is `records` (text offsets relative to the text section, made
/// absolute here) and whose texts take `text_len` bytes, its hash included. `None` when
/// `records` is not a record section.
fn seal(dialect: Dialect, scope: &str, now_ns: i64, records: &mut [u8], text_len: u64) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&VERSION.to_le_bytes());
    put_str(&mut head, dialect.name());
    put_str(&mut head, scope);
    let records_start = (head.len() + HEADER_TAIL) as u64;
    let records_end = records_start + records.len() as u64;
    put_u64(&mut head, now_ns as u64);
    put_u64(&mut head, records_end);
    put_u64(&mut head, records_end + text_len);
    // Text offsets become absolute.
    let mut r = Reader { b: records, pos: 0 };
    let mut fixups = Vec::new();
    while r.pos < records.len() {
        fixups.push(skip_record(&mut r)?);
    }
    for at in fixups {
        let rel = u64::from_le_bytes(records[at..at + 8].try_into().unwrap_or_default());
        records[at..at + 8].copy_from_slice(&(rel + records_end).to_le_bytes());
    }
    let sum = blake3::Hasher::new().update(&head).update(records).finalize();
    head.extend_from_slice(sum.as_bytes());
    Some(head)
}

/// What the fuzz targets reach of the listing cache: its decoder and encoder on bytes
/// in memory, through the same functions a listing uses.
#[cfg(feature = "fuzzing")]
pub mod fuzzing {
    use super::*;

    /// A file's identity in a cache record: size, mtime and ctime (ns), inode, device.
    pub type Key = [u64; 5];

    /// Reads `bytes` as a cache file of `dialect` and `scope`, every record and its
    /// text as a listing would read them; with `verify` off the hashes are not checked,
    /// so that every other check meets any input. `None` when the file is refused as a
    /// whole; else each record's path and its decoded info (`None`: the record or its
    /// text was refused, `Some(None)`: a file that is not listable).
    #[allow(clippy::type_complexity, reason = "the decoder's own answer, for the fuzz target")]
    pub fn decode(
        bytes: &[u8],
        dialect: Dialect,
        scope: &str,
        verify: bool,
    ) -> Option<Vec<(Vec<u8>, Option<Option<SessionInfo>>)>> {
        let size = bytes.len() as u64;
        let head = bytes.get(..header_len(dialect, scope))?;
        let (_, records_end) = parse_header(head, dialect, scope, size)?;
        let records = bytes.get(head.len()..usize::try_from(records_end).ok()?)?;
        let index = parse_records(head, records, size, verify)?;
        let mut out: Vec<(Vec<u8>, Option<Option<SessionInfo>>)> = index
            .into_iter()
            .map(|(path, (_, spans))| {
                let decoded = decode_info(&records[spans.info.clone()], Path::new(&*String::from_utf8_lossy(&path)))
                    .and_then(|mut info| {
                        if let Some(i) = info.as_mut() {
                            let text = bytes
                                .get(usize::try_from(spans.text.start).ok()?..usize::try_from(spans.text.end).ok()?)?;
                            let quoted = [&b"\""[..], text, b"\""].concat();
                            i.all_messages_text = checked_text(&quoted, &spans.text_hash, verify)?;
                        }
                        Some(info)
                    });
                (path, decoded)
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Some(out)
    }

    /// Returns a cache file of `dialect` and `scope`, written at `now_ns`, holding
    /// `entries` (path, identity, info) as a listing writes them.
    pub fn encode(
        dialect: Dialect,
        scope: &str,
        now_ns: i64,
        entries: &[(String, Key, Option<SessionInfo>)],
    ) -> Vec<u8> {
        let mut records = Vec::new();
        let mut texts = Vec::new();
        for (path, [size, mtime_ns, ctime_ns, ino, dev], info) in entries {
            let key =
                FileKey { size: *size, mtime_ns: *mtime_ns as i64, ctime_ns: *ctime_ns as i64, ino: *ino, dev: *dev };
            let text = put_record(&mut records, path, &key, info.as_ref(), texts.len() as u64);
            texts.extend_from_slice(text.as_bytes());
        }
        let head = seal(dialect, scope, now_ns, &mut records, texts.len() as u64).unwrap_or_default();
        [head, records, texts].concat()
    }
}

/// Where a text of the next cache comes from.
enum TextSource<'a> {
    New(std::borrow::Cow<'a, str>),
    Old(Range<u64>),
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Fills `buf` from `file` at `offset`; a file that ends first is an error.
fn read_exact_at(file: &dyn ReadAt, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    if file.read_full_at(buf, offset)? != buf.len() {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// Reads `range` of `file` into `buf` between two quotes, as the JSON string whose
/// content it must be (its old contents are replaced).
fn read_quoted_into(file: &dyn ReadAt, range: &Range<u64>, buf: &mut Vec<u8>) -> std::io::Result<()> {
    let len = usize::try_from(range.end.saturating_sub(range.start)).map_err(std::io::Error::other)?;
    buf.clear();
    buf.resize(len + 2, b'"');
    read_exact_at(file, &mut buf[1..=len], range.start)
}

/// Returns the message text of a record from `quoted` (the text between two quotes)
/// when it is what the cache wrote: its hash is `hash` (unless `verify` is off, for the
/// fuzz targets' sake) and it is valid UTF-8 and the content of one JSON string, so
/// that it can be copied as it is into JSON output.
fn checked_text(quoted: &[u8], hash: &[u8; 32], verify: bool) -> Option<MessagesText> {
    let text = quoted.get(1..quoted.len().checked_sub(1)?)?;
    if verify && blake3::hash(text).as_bytes() != hash {
        return None;
    }
    let text = simdutf8::basic::from_utf8(text).ok()?;
    if session_model::scan::skip_value(quoted, 0) != Ok(quoted.len()) {
        return None;
    }
    Some(MessagesText::from_json(text.to_owned()))
}

/// The most bytes a cache's record section may claim (about a million sessions).
const MAX_RECORDS_BYTES: u64 = 1 << 30;

/// The length of a cache header for `dialect` and `scope`.
fn header_len(dialect: Dialect, scope: &str) -> usize {
    8 + 4 + 4 + dialect.name().len() + 4 + scope.len() + HEADER_TAIL
}

/// Reads the header and record section of a cache file of `size` bytes; `None` when it
/// is not a complete, intact cache of this dialect and scope.
fn read_records(file: &dyn ReadAt, size: u64, dialect: Dialect, scope: &str) -> Option<(Vec<u8>, i64, Index)> {
    let mut head = vec![0u8; header_len(dialect, scope)];
    read_exact_at(file, &mut head, 0).ok()?;
    let (written_at_ns, records_end) = parse_header(&head, dialect, scope, size)?;
    let n = records_end.checked_sub(head.len() as u64)?;
    // Not what any listing writes (a few hundred bytes a session): a damaged or planted
    // size, never allocated.
    if n > MAX_RECORDS_BYTES {
        return None;
    }
    // No more than the file holds: `parse_header` checked `records_end` against its size.
    let mut records = vec![0u8; usize::try_from(n).ok()?];
    read_exact_at(file, &mut records, head.len() as u64).ok()?;
    let old = parse_records(&head, &records, size, true)?;
    Some((records, written_at_ns, old))
}

/// Reads a header of `dialect` and `scope` from a file of `size` bytes: the write time
/// and where the records end. `None` when it is not such a header.
fn parse_header(head: &[u8], dialect: Dialect, scope: &str, size: u64) -> Option<(i64, u64)> {
    let mut r = Reader { b: head, pos: 0 };
    if r.take(8)? != &MAGIC[..] || r.u32()? != VERSION || r.str()? != dialect.name() || r.str()? != scope {
        return None;
    }
    let written_at_ns = r.u64()? as i64;
    let records_end = r.u64()?;
    if r.u64()? != size || records_end < head.len() as u64 || records_end > size {
        return None;
    }
    Some((written_at_ns, records_end))
}

/// Reads the record section `records` that follows `head` in a file of `size` bytes,
/// once the hash at the end of `head` is shown to cover both (unless `verify` is off);
/// `None` when anything is off.
fn parse_records(head: &[u8], records: &[u8], size: u64, verify: bool) -> Option<Index> {
    let (before, sum) = head.split_at(head.len().checked_sub(32)?);
    if verify && blake3::Hasher::new().update(before).update(records).finalize().as_bytes() != sum {
        return None;
    }
    let records_end = (head.len() + records.len()) as u64;
    let mut old = HashMap::new();
    let mut r = Reader { b: records, pos: 0 };
    while r.pos < records.len() {
        let start = r.pos;
        let path = r.str()?.as_bytes().to_vec();
        let key = FileKey {
            size: r.u64()?,
            mtime_ns: r.u64()? as i64,
            ctime_ns: r.u64()? as i64,
            ino: r.u64()?,
            dev: r.u64()?,
        };
        let info_len = usize::try_from(r.u64()?).ok()?;
        let info_at = r.pos;
        r.take(info_len)?;
        let info = info_at..r.pos;
        let text_hash: [u8; 32] = r.take(32)?.try_into().ok()?;
        let text_at = r.u64()?;
        let text = text_at..text_at.checked_add(r.u64()?)?;
        if text.start < records_end || text.end > size {
            return None;
        }
        old.insert(path, (key, Spans { record: start..r.pos, info, text, text_hash }));
    }
    Some(old)
}

/// Skips one record of a record section; returns where its text offset is.
fn skip_record(r: &mut Reader<'_>) -> Option<usize> {
    r.str()?;
    r.take(40)?;
    let info_len = usize::try_from(r.u64()?).ok()?;
    r.take(info_len)?;
    r.take(32)?;
    let at = r.pos;
    r.take(16)?;
    Some(at)
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn str(&mut self) -> Option<&'a str> {
        let n = usize::try_from(self.u32()?).ok()?;
        simdutf8::basic::from_utf8(self.take(n)?).ok()
    }
    /// A flag byte (`0`: none, `1`: some), then the value `read` reads.
    fn opt<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        match self.u8()? {
            0 => Some(None),
            1 => Some(Some(read(self)?)),
            _ => None,
        }
    }
    fn opt_str(&mut self) -> Option<Option<String>> {
        self.opt(|r| r.str().map(str::to_owned))
    }
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    // Longer strings than 4 GiB do not occur in a listing; clamp rather than fail.
    let n = u32::try_from(s.len()).unwrap_or(u32::MAX) as usize;
    out.extend_from_slice(&(n as u32).to_le_bytes());
    out.extend_from_slice(&s.as_bytes()[..n]);
}

/// Writes what [`Reader::opt`] reads: a flag byte, then `v` as `put` writes it.
fn put_opt<T>(out: &mut Vec<u8>, v: Option<T>, put: impl FnOnce(&mut Vec<u8>, T)) {
    match v {
        None => out.push(0),
        Some(v) => {
            out.push(1);
            put(out, v);
        }
    }
}

const STATUSES: [SessionStatus; 6] = [
    SessionStatus::Complete,
    SessionStatus::Interrupted,
    SessionStatus::Aborted,
    SessionStatus::Error,
    SessionStatus::Pending,
    SessionStatus::Unknown,
];

/// Encodes an info (`None`: the file is not listable). The path is not stored: it
/// is the record's key.
pub(crate) fn encode_info(out: &mut Vec<u8>, info: Option<&SessionInfo>) {
    let Some(i) = info else {
        out.push(0);
        return;
    };
    out.push(1);
    put_str(out, &i.id);
    put_opt(out, i.id_raw.as_deref(), put_str);
    out.push(u8::from(i.has_id));
    put_str(out, &i.cwd);
    put_opt(out, i.name.as_deref(), put_str);
    put_opt(out, i.title.as_deref(), put_str);
    put_opt(out, i.parent_session_path.as_deref(), put_str);
    put_opt(out, i.created.map(|c| c as u64), put_u64);
    put_opt(out, i.modified.map(|m| m as u64), put_u64);
    out.extend_from_slice(&i.message_count.to_le_bytes());
    put_opt(out, i.assistant_turns, put_u64);
    put_opt(out, i.size, put_u64);
    put_str(out, &i.first_message);
    match i.status {
        None => out.push(0),
        Some(s) => out.push(1 + STATUSES.iter().position(|x| *x == s).unwrap_or(5) as u8),
    }
}

/// Decodes what [`encode_info`] wrote; `None` when the bytes are damaged (then the
/// file is scanned) or the raw id, which a listing printed as JSON copies as it is, is
/// not one JSON value; `Some(None)` for a file that is not listable.
pub(crate) fn decode_info(bytes: &[u8], path: &Path) -> Option<Option<SessionInfo>> {
    let mut r = Reader { b: bytes, pos: 0 };
    if r.u8()? == 0 {
        return (r.pos == bytes.len()).then_some(None);
    }
    let info = SessionInfo {
        path: path.to_path_buf(),
        id: r.str()?.to_owned(),
        // Printed as it is in a listing as JSON: it must be one JSON value, whole.
        id_raw: match r.opt_str()? {
            Some(raw) if session_model::scan::parse_whole(&raw) != Ok(raw.as_str()) => return None,
            raw => raw,
        },
        has_id: r.u8()? != 0,
        cwd: r.str()?.to_owned(),
        name: r.opt_str()?,
        title: r.opt_str()?,
        parent_session_path: r.opt_str()?,
        created: r.opt(Reader::u64)?.map(|c| c as i64),
        modified: r.opt(Reader::u64)?.map(|m| m as i64),
        message_count: r.u64()?,
        assistant_turns: r.opt(Reader::u64)?,
        size: r.opt(Reader::u64)?,
        first_message: r.str()?.to_owned(),
        // Stored apart (see the module docs).
        all_messages_text: MessagesText::default(),
        status: match r.u8()? {
            0 => None,
            n => Some(*STATUSES.get(usize::from(n) - 1)?),
        },
    };
    (r.pos == bytes.len()).then_some(Some(info))
}

#[cfg(test)]
mod tests {
    use super::*;
    use session_store::FileStorage;

    fn sample(path: &Path) -> SessionInfo {
        SessionInfo {
            path: path.to_path_buf(),
            id: "01a2".into(),
            id_raw: None,
            has_id: true,
            cwd: "/tmp/é".into(),
            name: Some("n".into()),
            title: None,
            parent_session_path: Some("/x.jsonl".into()),
            created: Some(-5),
            modified: Some(1_767_225_600_000),
            message_count: 3,
            assistant_turns: Some(1),
            size: None,
            first_message: "hi".into(),
            all_messages_text: "hi there 日本語".into(),
            status: Some(SessionStatus::Aborted),
        }
    }

    /// A cache written `after_ns` after the file's mtime answers with what it holds
    /// only when that is outside the racy window.
    #[test]
    fn racy_entries_are_rescanned_and_settled_ones_are_not() {
        let root = session_testkit::TempDir::new("sd-cache-racy");
        let root = root.path();
        let file = root.join("a.jsonl");
        FileStorage::new().write(&file, b"{}\n").expect("file");
        let mtime = FileKey::of(&FileStorage::new(), &file).expect("stat").mtime_ns;
        fn named(name: &'static str) -> impl Fn(&Path) -> Option<SessionInfo> {
            move |p| Some(SessionInfo { name: Some(name.into()), ..sample(p) })
        }
        let dir = PrivateDir::open(root.join("c")).expect("cache dir");
        for (scope, after_ns, expected) in [("settled", 10 * RACY_NS, "cached"), ("racy", RACY_NS / 2, "rebuilt")] {
            let cache = ListCache::load(&dir, Dialect::Pi, scope);
            assert_eq!(
                cache.info(&FileStorage::new(), &file, &named("cached")).and_then(|i| i.name).as_deref(),
                Some("cached")
            );
            cache.save(mtime + after_ns);
            let cache = ListCache::load(&dir, Dialect::Pi, scope);
            let got = cache.info(&FileStorage::new(), &file, &named("rebuilt"));
            assert_eq!(got.as_ref().and_then(|i| i.name.as_deref()), Some(expected), "{scope}");
            assert_eq!(got.map(|i| i.all_messages_text), Some(sample(&file).all_messages_text), "{scope}");
        }
    }

    #[test]
    fn info_round_trips_and_damage_is_detected() {
        let p = Path::new("/s/a.jsonl");
        let mut out = Vec::new();
        encode_info(&mut out, Some(&sample(p)));
        // The message text is stored apart from the other fields.
        let without_text = SessionInfo { all_messages_text: String::new().into(), ..sample(p) };
        assert_eq!(decode_info(&out, p), Some(Some(without_text)));
        for cut in 0..out.len() {
            assert_eq!(decode_info(&out[..cut], p), None, "cut at {cut}");
        }
        let mut none = Vec::new();
        encode_info(&mut none, None);
        assert_eq!(decode_info(&none, p), Some(None));
        // A raw id is printed as it is: only one whole JSON value is taken.
        for (raw, taken) in
            [("42", true), ("{\"a\":[1,2]}", true), ("1,\"path\":\"/tmp/EVIL\"", false), (" 1", false), ("", false)]
        {
            let mut out = Vec::new();
            encode_info(&mut out, Some(&SessionInfo { id_raw: Some(raw.into()), ..sample(p) }));
            assert_eq!(decode_info(&out, p).is_some(), taken, "{raw}");
        }
    }

    /// A text is copied into JSON output only when it is the content of one JSON
    /// string, even when its hash matches.
    #[test]
    fn only_json_string_content_is_taken_as_a_text() {
        let check = |text: &[u8]| {
            let quoted = [&b"\""[..], text, b"\""].concat();
            checked_text(&quoted, blake3::hash(text).as_bytes(), true).map(|t| t.as_json().into_owned())
        };
        for good in [&br#"plain"#[..], br#"say \"hi\" \\ \n \u00e9 \ud800"#, b"", "日本語".as_bytes()] {
            assert_eq!(check(good).as_deref().map(str::as_bytes), Some(good), "{}", String::from_utf8_lossy(good));
        }
        for bad in [
            &br#"","path":"/tmp/EVIL","x":""#[..],
            br#"a"b"#,
            br#"ends in \"#,
            br#"bad \x escape"#,
            br#"short \u12"#,
            b"control \x01 char",
            b"\xff not utf-8",
        ] {
            assert_eq!(check(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        // A hash that does not match.
        assert_eq!(checked_text(b"\"plain\"", &[0; 32], true), None);
        assert!(checked_text(b"\"plain\"", &[0; 32], false).is_some());
    }
}
