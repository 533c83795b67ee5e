//! The session index: what opening a large session file found, kept in a cache
//! directory so that the next open reads it instead of the file.
//!
//! An open that reads texts by position ([`crate::Env::spans`]) still validates every
//! byte of the file once. The index keeps the result ([`session_model::stored`]: the
//! records' skeletons and where their texts are, the diagnostics, omp's title slot)
//! with what the file was then ([`Seen`]: size, times, inode and device, hashes of its
//! head and of its last bytes). The next open of the same file:
//!
//! * **unchanged** (same stat, settled when indexed, same hashes): reads the index
//!   and no byte of the session but those hashes;
//! * **grown** (the same file, larger, its first and last indexed bytes unchanged):
//!   reads the index and validates only the new bytes ([`parse_session_tail`]);
//! * **anything else**, or no usable index: parses the file as if there were none.
//!
//! Every such open writes the index again. It is never the source of truth: deleting
//! the directory changes nothing but speed; a damaged, foreign or outdated index file
//! is ignored (a checksum covers every byte of it). A file changed within the
//! timestamps' granularity of its indexing (a racy write) is never taken as unchanged:
//! its index is marked unsettled and it is parsed again. The index lives outside the
//! session directories, in a [`PrivateDir`]: written 0600 and atomically without
//! following a link, read only when it is this user's private file (an index of an
//! older version, 0644, is parsed afresh and replaced); writing it never touches a
//! session file.
//!
//! Format (little-endian): magic, format version, dialect, the session path, the
//! [`Seen`] fields, a settled flag, the length and bytes of [`session_model::stored`],
//! and the BLAKE3 hash of everything before it.

use std::path::Path;
use std::sync::Arc;

use std::io::Read;

use session_model::{Bodies, Dialect, ParsedFile, SpanPolicy, parse_session_tail, stored};

use session_store::{FileStat, PrivateDir};

use crate::freshness::{Change, Head, Seen, stable_hash};

const MAGIC: &[u8; 8] = b"SSINDEX\0";
const FORMAT: u32 = 1;
/// How many index files a directory keeps: writing one more removes the ones written
/// longest ago.
pub(crate) const MAX_FILES: usize = 64;

/// How an open used the session index ([`crate::Env::index_dir`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum IndexUse {
    /// No index was asked for, or the file is too small or has no identity.
    #[default]
    None,
    /// The index described the file: no byte of it was parsed.
    Unchanged,
    /// The file had grown: only the new bytes were parsed.
    Grown,
    /// There was no index, or it no longer described the file: the file was parsed.
    Rebuilt,
}

/// A directory of session indexes.
#[derive(Clone, Debug)]
pub(crate) struct IndexDir {
    dir: PrivateDir,
}

/// What an index file holds besides the parse.
struct Header {
    seen: Seen,
    settled: bool,
    /// The length of the stored parse that follows.
    body_len: u64,
}

impl IndexDir {
    pub(crate) fn new(dir: &PrivateDir) -> IndexDir {
        IndexDir { dir: dir.clone() }
    }

    /// Returns the name of the index file of `path` read as `dialect`.
    fn name_for(path: &Path, dialect: Dialect) -> String {
        let key = stable_hash(path.as_os_str().as_encoded_bytes());
        format!("{}-{key:016x}.idx", dialect.name())
    }

    /// Returns the parse of the session at `path` (stat `st` when opened, read through
    /// `bodies`) from its index: as stored when the file is unchanged, continued over
    /// the new bytes when it only grew, with how many bytes the index did not cover.
    /// `None` when there is no usable index.
    pub(crate) fn lookup(
        &self,
        path: &Path,
        dialect: Dialect,
        st: &FileStat,
        bodies: &Arc<Bodies>,
        policy: SpanPolicy,
        parallelism: session_model::Parallelism,
    ) -> Option<(ParsedFile, IndexUse, u64)> {
        let file = self.dir.open_file(&IndexDir::name_for(path, dialect)).ok()??;
        let mut change = Change::Changed;
        let (header, parsed) = decode(
            &mut std::io::BufReader::with_capacity(1 << 18, file),
            path,
            dialect,
            bodies,
            true,
            &mut |header| {
                change =
                    header.seen.change(st, bodies.reader(), Head::Whole, header.settled).unwrap_or(Change::Changed);
                change != Change::Changed
            },
        )?;
        match change {
            Change::Unchanged => Some((parsed, IndexUse::Unchanged, 0)),
            _ => {
                let grown = parse_session_tail(bodies, parsed, st.size, dialect, parallelism, policy).ok()?;
                Some((grown, IndexUse::Grown, st.size - header.seen.covered))
            }
        }
    }

    /// Writes the index of `parsed`, the parse of the session at `path` as it was when
    /// opened (stat `st`, read through `bodies`), read at `now_ns`. Best effort: a
    /// file that changed while it was parsed, or any failure, leaves no index (the
    /// next open parses the file).
    pub(crate) fn store(
        &self,
        path: &Path,
        dialect: Dialect,
        st: &FileStat,
        bodies: &Bodies,
        parsed: &ParsedFile,
        now_ns: i64,
    ) {
        let Some(identity) = st.identity else { return };
        if parsed.byte_len as u64 != st.size {
            return;
        }
        let Ok(seen) = Seen::of(st, bodies.reader(), st.size, Head::Whole) else { return };
        let settled = identity.settled_at(now_ns);
        let (head, body, sum) = encode(path, dialect, &seen, settled, parsed);
        let name = IndexDir::name_for(path, dialect);
        let pick = |n: &str| n.ends_with(".idx");
        self.dir.evict_oldest(&pick, &name, MAX_FILES);
        // An index is no session: no lock, and no sync (losing it costs one parse).
        let _ = self.dir.write_file(&name, &mut |w| {
            w.write_all(&head)?;
            w.write_all(&body)?;
            w.write_all(&sum)
        });
    }
}

/// Returns the index of `parsed`, the parse of `path` as `dialect` when it was as
/// `seen` says: the header, the stored parse, and the BLAKE3 hash of both.
fn encode(
    path: &Path,
    dialect: Dialect,
    seen: &Seen,
    settled: bool,
    parsed: &ParsedFile,
) -> (Vec<u8>, Vec<u8>, [u8; 32]) {
    let body = stored::encode(parsed);
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    out.push(dialect_code(dialect));
    put_bytes(&mut out, path.as_os_str().as_encoded_bytes());
    for v in [seen.size, seen.mtime_ns as u64, seen.ctime_ns.unwrap_or(0) as u64] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let (ino, dev) = seen.file.unwrap_or((0, 0));
    for v in [ino, dev, seen.covered, seen.head_hash, seen.tail_hash] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.push(u8::from(settled));
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    let sum = blake3::Hasher::new().update(&out).update(&body).finalize();
    (out, body, *sum.as_bytes())
}

/// Reads an index from `r`: the header (of `path` read as `dialect`), which `proceed`
/// must accept before the stored parse is read (its texts read through `bodies`),
/// then the checksum over both (unless `verify` is off, for the fuzz targets' sake).
/// `None` when anything is off.
fn decode(
    r: &mut dyn Read,
    path: &Path,
    dialect: Dialect,
    bodies: &Arc<Bodies>,
    verify: bool,
    proceed: &mut dyn FnMut(&Header) -> bool,
) -> Option<(Header, ParsedFile)> {
    let mut r = Hashing { inner: r, hash: blake3::Hasher::new() };
    let header = read_header(&mut r, path, dialect)?;
    if !proceed(&header) {
        return None;
    }
    let mut body = Read::take(&mut r, header.body_len);
    let parsed = stored::decode_from(&mut body, bodies)?;
    if body.limit() != 0 {
        return None;
    }
    let computed = r.hash.finalize();
    let mut sum = [0u8; 32];
    r.inner.read_exact(&mut sum).ok()?;
    if (verify && computed.as_bytes() != &sum) || parsed.byte_len as u64 != header.seen.covered {
        return None;
    }
    Some((header, parsed))
}

/// What the fuzz targets reach of the session index: its decoder and encoder on bytes
/// in memory, through the same functions an open uses.
#[cfg(feature = "fuzzing")]
pub mod fuzzing {
    use super::*;

    /// Reads `bytes` as the index of the session `session` at `path` read as
    /// `dialect`, as an open reads one (the freshness check of the header left out);
    /// with `verify` off the checksum is not checked, so that every other check meets
    /// any input. The parse when it is accepted.
    pub fn decode(bytes: &[u8], path: &Path, dialect: Dialect, session: &[u8], verify: bool) -> Option<ParsedFile> {
        let bodies = Arc::new(Bodies::new(Box::new(session.to_vec())));
        let mut r = bytes;
        super::decode(&mut r, path, dialect, &bodies, verify, &mut |_| true).map(|(_, parsed)| parsed)
    }

    /// Returns the parse of `session` (at `path`, read as `dialect`, its large records
    /// left in the file) and the index an open writes of it.
    pub fn encode(path: &Path, dialect: Dialect, session: &[u8]) -> Option<(ParsedFile, Vec<u8>)> {
        let bodies = Arc::new(Bodies::new(Box::new(session.to_vec())));
        let policy = SpanPolicy { from_file_size: 0, from_record_size: 64, piece: 2048 };
        let size = session.len() as u64;
        let parsed =
            session_model::parse_session_spans(&bodies, size, dialect, session_model::Parallelism::SERIAL, policy)
                .ok()?;
        let seen = Seen {
            size,
            mtime_ns: 1,
            ctime_ns: Some(2),
            file: Some((3, 4)),
            covered: size,
            head_hash: crate::freshness::stable_hash(session),
            tail_hash: 5,
        };
        let (head, body, sum) = super::encode(path, dialect, &seen, true, &parsed);
        Some((parsed, [head, body, sum.to_vec()].concat()))
    }
}

fn dialect_code(dialect: Dialect) -> u8 {
    match dialect {
        Dialect::Pi => 0,
        Dialect::Omp => 1,
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Reads an index file's header, checking its magic, format, dialect and session path.
fn read_header(r: &mut dyn Read, path: &Path, dialect: Dialect) -> Option<Header> {
    fn take<const N: usize>(r: &mut dyn Read) -> Option<[u8; N]> {
        let mut b = [0u8; N];
        r.read_exact(&mut b).ok()?;
        Some(b)
    }
    let u64_ = |r: &mut dyn Read| take::<8>(r).map(u64::from_le_bytes);
    if take::<8>(r)? != *MAGIC || take::<4>(r)? != FORMAT.to_le_bytes() || take::<1>(r)? != [dialect_code(dialect)] {
        return None;
    }
    let expected = path.as_os_str().as_encoded_bytes();
    if u64_(r)? != expected.len() as u64 {
        return None;
    }
    let mut named = vec![0u8; expected.len()];
    r.read_exact(&mut named).ok()?;
    if named != expected {
        return None;
    }
    let mut fields = [0u64; 8];
    for f in &mut fields {
        *f = u64_(r)?;
    }
    let [size, mtime, ctime, ino, dev, covered, head_hash, tail_hash] = fields;
    let settled = take::<1>(r)? == [1];
    let body_len = u64_(r)?;
    let seen = Seen {
        size,
        mtime_ns: mtime as i64,
        ctime_ns: Some(ctime as i64),
        file: Some((ino, dev)),
        covered,
        head_hash,
        tail_hash,
    };
    Some(Header { seen, settled, body_len })
}

/// A reader that hashes what passes through it.
struct Hashing<R> {
    inner: R,
    hash: blake3::Hasher,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}
