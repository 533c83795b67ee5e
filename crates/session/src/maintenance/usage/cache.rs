//! The usage cache: the usage records of each session file `usage` read, kept in one
//! private file ([`USAGE_CACHE`] in the cache folder, a [`PrivateDir`]) so that the next
//! run reads only the files that changed.
//!
//! A file's records are trusted only while its size, modification and change times,
//! inode and device are those noted (a storage without inodes is never cached), and
//! only when it had settled when it was read (last changed more than two seconds
//! before: [`session_store::FileIdentity::settled_at`]). The cache is written whole,
//! 0600 and atomically, only when a run read a file or a file left it; a file a run did
//! not count (another dialect's) stays while its stat is unchanged. Its header carries a BLAKE3 hash of everything: a
//! cache that is damaged, of another format, or larger than 1 GiB is ignored (and
//! replaced by the next run), never half used. Deleting it costs one slower run.
//!
//! ```text
//! magic "SSUSAGE\0", format u32 (1), body length u64, BLAKE3 of the body (32 bytes)
//! body: files u64, then per file: path (u64 length + bytes), whose u8 (0 pi, 1 omp,
//!       2 another agent's, read as the pi session its import writes),
//!       size, mtime ns, ctime ns, inode, device (5 u64), cwd (u64 length + UTF-8),
//!       records u64, then per record: has id u8, id (u64 length + UTF-8, if it has
//!       one), index u64, timestamp and model (u64 length + UTF-8 each),
//!       input, output, cache read, cache write, cost (5 f64)
//! ```
//!
//! All numbers little-endian.

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use session_model::Dialect;
use session_store::PrivateDir;

use super::{FileUsage, Tokens, UsageRecord};

/// The name of the usage cache in the cache folder.
pub const USAGE_CACHE: &str = "usage.bin";

const MAGIC: &[u8; 8] = b"SSUSAGE\0";
const FORMAT: u32 = 1;
const HEADER: usize = 8 + 4 + 8 + 32;
/// A cache claiming more than this is not read.
const MAX_BYTES: u64 = 1 << 30;

/// Returns the cached files, empty when there is no usable cache.
pub(super) fn load(dir: &PrivateDir) -> HashMap<PathBuf, Arc<FileUsage>> {
    read(dir).unwrap_or_default()
}

fn read(dir: &PrivateDir) -> Option<HashMap<PathBuf, Arc<FileUsage>>> {
    let file = dir.open_file(USAGE_CACHE).ok()??;
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1).read_to_end(&mut bytes).ok()?;
    decode(&bytes)
}

/// Reads a whole cache file; `None` when anything is off.
pub(super) fn decode(bytes: &[u8]) -> Option<HashMap<PathBuf, Arc<FileUsage>>> {
    if bytes.len() < HEADER || bytes.len() as u64 > MAX_BYTES || &bytes[..8] != MAGIC {
        return None;
    }
    let mut c = Cursor { bytes: &bytes[8..HEADER] };
    if c.u32()? != FORMAT {
        return None;
    }
    let len = usize::try_from(c.u64()?).ok()?;
    let sum = c.take(32)?;
    let body = &bytes[HEADER..];
    if body.len() != len || blake3::hash(body).as_bytes() != sum {
        return None;
    }
    let mut c = Cursor { bytes: body };
    let files = c.u64()?;
    let mut out = HashMap::new();
    for _ in 0..files {
        let path = PathBuf::from(std::str::from_utf8(c.bytes()?).ok()?);
        let (dialect, other) = match c.u8()? {
            0 => (Dialect::Pi, false),
            1 => (Dialect::Omp, false),
            2 => (Dialect::Pi, true),
            _ => return None,
        };
        let mut stat = [0u64; 5];
        for s in &mut stat {
            *s = c.u64()?;
        }
        let cwd = c.string()?;
        let n = c.u64()?;
        let mut records = Vec::new();
        for _ in 0..n {
            let id = match c.u8()? {
                0 => None,
                1 => Some(c.string()?),
                _ => return None,
            };
            let index = c.u64()?;
            let at = c.string()?;
            let model = c.string()?;
            let tokens = Tokens {
                input: c.f64()?,
                output: c.f64()?,
                cache_read: c.f64()?,
                cache_write: c.f64()?,
                cost: c.f64()?,
            };
            records.push(UsageRecord { id, index, at, model, tokens });
        }
        out.insert(path, Arc::new(FileUsage { dialect, other, stat, cwd, records }));
    }
    c.bytes.is_empty().then_some(out)
}

/// Returns the cache file holding `files`.
pub(super) fn encode(files: &[(PathBuf, Arc<FileUsage>)]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    put_u64(&mut body, files.len() as u64);
    for (path, f) in files {
        // A path that is not UTF-8 is not kept: the cache stays portable text.
        put_str(&mut body, path.to_str()?);
        body.push(match f.whose() {
            (_, true) => 2,
            (Dialect::Pi, false) => 0,
            (Dialect::Omp, false) => 1,
        });
        for s in f.stat {
            put_u64(&mut body, s);
        }
        put_str(&mut body, &f.cwd);
        put_u64(&mut body, f.records.len() as u64);
        for r in &f.records {
            match &r.id {
                Some(id) => {
                    body.push(1);
                    put_str(&mut body, id);
                }
                None => body.push(0),
            }
            put_u64(&mut body, r.index);
            put_str(&mut body, &r.at);
            put_str(&mut body, &r.model);
            let t = &r.tokens;
            for v in [t.input, t.output, t.cache_read, t.cache_write, t.cost] {
                body.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    put_u64(&mut out, body.len() as u64);
    out.extend_from_slice(blake3::hash(&body).as_bytes());
    out.extend_from_slice(&body);
    Some(out)
}

/// Replaces the cache with `files` (best effort: a cache that cannot be written costs
/// only time).
pub(super) fn store(dir: &PrivateDir, files: &[(PathBuf, Arc<FileUsage>)]) {
    let kept: Vec<(PathBuf, Arc<FileUsage>)> = files.iter().filter(|(p, _)| p.to_str().is_some()).cloned().collect();
    let Some(bytes) = encode(&kept) else { return };
    let _ = dir.write_file(USAGE_CACHE, &mut |w| w.write_all(&bytes));
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Reads the body, every length checked against what is left.
struct Cursor<'a> {
    bytes: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.bytes.len() {
            return None;
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn f64(&mut self) -> Option<f64> {
        Some(f64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.u64()?).ok()?;
        self.take(n)
    }

    fn string(&mut self) -> Option<String> {
        std::str::from_utf8(self.bytes()?).ok().map(str::to_owned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<(PathBuf, Arc<FileUsage>)> {
        let record = |id: Option<&str>, i: u64| UsageRecord {
            id: id.map(str::to_owned),
            index: i,
            at: "2026-03-01T10:00:00.000Z".to_owned(),
            model: "p/m".to_owned(),
            tokens: Tokens { input: 1.0, output: 2.5, cache_read: 3.0, cache_write: 4.0, cost: 0.125 },
        };
        vec![
            (
                PathBuf::from("/s/a.jsonl"),
                Arc::new(FileUsage {
                    dialect: Dialect::Omp,
                    other: false,
                    stat: [1, 2, 3, 4, 5],
                    cwd: "/p".to_owned(),
                    records: vec![record(Some("aaaaaaaa"), 1), record(None, 2)],
                }),
            ),
            (
                PathBuf::from("/c/rollout.jsonl.zst"),
                Arc::new(FileUsage {
                    dialect: Dialect::Pi,
                    other: true,
                    stat: [6, 7, 8, 9, 10],
                    cwd: "/q".to_owned(),
                    records: vec![record(Some("bbbbbbbb"), 3)],
                }),
            ),
        ]
    }

    #[test]
    fn a_cache_reads_back_as_written() {
        let files = sample();
        let bytes = encode(&files).expect("utf-8 paths");
        let back = decode(&bytes).expect("a valid cache");
        assert_eq!(back.len(), 2);
        for (path, file) in &files {
            assert_eq!(back.get(path), Some(file));
        }
    }

    #[test]
    fn a_damaged_cache_is_ignored() {
        let bytes = encode(&sample()).expect("utf-8 paths");
        for cut in [0, 7, HEADER - 1, HEADER, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        for at in [0, 9, HEADER + 3, bytes.len() - 9] {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x40;
            assert!(decode(&flipped).is_none(), "flipped at {at}");
        }
        let mut longer = bytes;
        longer.push(0);
        assert!(decode(&longer).is_none());
    }
}
