//! The objects of the layout: their keys in the bucket, and the head's JSON.
//!
//! A path key's components are percent-encoded one by one ([`encode_part`]) so that every
//! object key is a valid `object_store` path whatever the file names hold (`*`, `%`,
//! `[`, control characters); listings decode them back ([`decode_part`]).

use object_store::path::Path as ObjectPath;
use sha2::{Digest, Sha256};

/// Ends the last component of a file's head and lock objects (`heads/a/s.jsonl!`), so that
/// a file's object never has the name of a directory's prefix: stores that keep objects as
/// files (MinIO, s3s-fs) cannot hold `a/b` and `a/b/c` at once. [`encode_part`] escapes
/// the character in names, so a directory component never ends with it.
pub(crate) const FILE_MARK: char = '!';

/// A head's format version, the `"v"` field.
pub(crate) const HEAD_VERSION: u64 = 1;

/// Where the storage's objects live in its bucket: `<prefix>/heads/…`,
/// `<prefix>/segments/…`, `<prefix>/locks/…`, `<prefix>/probe/…`.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    /// The prefix, without leading or trailing `/`; empty for the bucket's root.
    prefix: String,
}

impl Layout {
    /// Returns the layout under `prefix` (slashes around it are ignored).
    pub(crate) fn new(prefix: &str) -> Layout {
        let parts: Vec<String> = prefix.split('/').filter(|p| !p.is_empty()).map(encode_part).collect();
        Layout { prefix: parts.join("/") }
    }

    /// Returns the prefix as given to [`Layout::new`], normalized.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    fn area(&self, area: &str) -> String {
        if self.prefix.is_empty() { area.to_owned() } else { format!("{}/{area}", self.prefix) }
    }

    /// Returns the object path of `area` followed by the key `k` (a `/`-separated key of
    /// `session_store::keyed`, leading `/` ignored), each component encoded, the last one
    /// marked as a file's ([`FILE_MARK`]) when `file`.
    fn under(&self, area: &str, k: &str, file: bool) -> ObjectPath {
        let mut s = self.area(area);
        for part in k.split('/').filter(|p| !p.is_empty()) {
            s.push('/');
            s.push_str(&encode_part(part));
        }
        if file {
            s.push(FILE_MARK);
        }
        // Every component is encoded (never empty, `.` or `..`), so the path is valid.
        ObjectPath::parse(&s).expect("encoded components make a valid object path")
    }

    /// Returns the head object of the file `k`.
    pub(crate) fn head(&self, k: &str) -> ObjectPath {
        self.under("heads", k, true)
    }

    /// Returns the prefix of the heads of the files in the directory `k`.
    pub(crate) fn head_dir(&self, k: &str) -> ObjectPath {
        self.under("heads", k, false)
    }

    /// Returns the lock object of the file `k`.
    pub(crate) fn lock(&self, k: &str) -> ObjectPath {
        self.under("locks", k, true)
    }

    /// Returns the folder of every head.
    pub(crate) fn heads(&self) -> ObjectPath {
        self.under("heads", "", false)
    }

    /// Returns the folder of every segment.
    pub(crate) fn segments(&self) -> ObjectPath {
        self.under("segments", "", false)
    }

    /// Returns the segment object of the SHA-256 `sha` (lowercase hex).
    pub(crate) fn segment(&self, sha: &str) -> ObjectPath {
        self.under("segments", sha, false)
    }

    /// Returns a probe object named `name`.
    pub(crate) fn probe(&self, name: &str) -> ObjectPath {
        self.under("probe", name, false)
    }
}

/// Returns `part` with every byte S3 or `object_store` treats specially percent-encoded:
/// control characters, `/`, `%`, and the characters AWS and Google advise against in
/// keys. A part that would be `.` or `..` is encoded too.
pub(crate) fn encode_part(part: &str) -> String {
    if part == "." || part == ".." {
        return part.replace('.', "%2E");
    }
    let mut out = String::with_capacity(part.len());
    for ch in part.chars() {
        let special = ch.is_ascii_control()
            || matches!(ch, '/' | '\\' | '{' | '^' | '}' | '%' | '`' | ']' | '"' | '>' | '[' | '~' | '<' | '#' | '|')
            || matches!(ch, '*' | '?' | FILE_MARK);
        if special {
            out.push_str(&format!("%{:02X}", ch as u32));
        } else {
            out.push(ch);
        }
    }
    out
}

/// Returns the file name of an object's last component `part` (a head's or a lock's):
/// `None` for a directory's or anything else.
pub(crate) fn decode_file(part: &str) -> Option<String> {
    decode_part(part.strip_suffix(FILE_MARK)?)
}

/// Returns the directory name of an object's last component `part`: `None` for a file's.
pub(crate) fn decode_dir(part: &str) -> Option<String> {
    if part.ends_with(FILE_MARK) { None } else { decode_part(part) }
}

/// Decodes a part [`encode_part`] made; `None` for text it cannot have made.
pub(crate) fn decode_part(part: &str) -> Option<String> {
    let b = part.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// One segment a head names: the object `segments/<sha256>` holding `len` bytes, or, for
/// a copy, `segments/<sha256>.<copy>`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Segment {
    /// The SHA-256 of the segment's bytes, lowercase hex.
    pub sha256: String,
    /// Its length in bytes.
    pub len: u64,
    /// For a copy of the bytes under a name of its own (16 lowercase hex digits), made by
    /// a write that needed bytes whose segment was too old to count on: `None` for the
    /// segment named by its hash alone.
    pub copy: Option<String>,
}

impl Segment {
    /// Returns the segment record of `bytes`.
    pub(crate) fn of(bytes: &[u8]) -> Segment {
        Segment { sha256: hex(&Sha256::digest(bytes)), len: bytes.len() as u64, copy: None }
    }

    /// Returns the name of the segment's object below `segments/`: `<sha256>` or
    /// `<sha256>.<copy>`.
    pub fn object_name(&self) -> String {
        match &self.copy {
            Some(c) => format!("{}.{c}", self.sha256),
            None => self.sha256.clone(),
        }
    }
}

/// A file's head: its size, mtime and segments, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) size: u64,
    pub(crate) mtime: i64,
    pub(crate) segments: Vec<Segment>,
}

impl Head {
    /// Returns the head's JSON: `{"v":1,"size":N,"mtime":MS,"segments":[{"sha256":"…","len":N},…]}`,
    /// a copy's segment with `"copy":"…"` after its length.
    pub(crate) fn to_json(&self) -> String {
        let segments: Vec<String> = self
            .segments
            .iter()
            .map(|s| match &s.copy {
                Some(c) => format!("{{\"sha256\":\"{}\",\"len\":{},\"copy\":\"{c}\"}}", s.sha256, s.len),
                None => format!("{{\"sha256\":\"{}\",\"len\":{}}}", s.sha256, s.len),
            })
            .collect();
        format!(
            "{{\"v\":{HEAD_VERSION},\"size\":{},\"mtime\":{},\"segments\":[{}]}}",
            self.size,
            self.mtime,
            segments.join(",")
        )
    }

    /// Parses a head, checking that its segments add up to its size; why not otherwise.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Head, String> {
        let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
        let obj = v.as_object().ok_or("not a JSON object")?;
        match obj.get("v").and_then(serde_json::Value::as_u64) {
            Some(HEAD_VERSION) => {}
            Some(n) => return Err(format!("head format version {n}; this version reads version {HEAD_VERSION}")),
            None => return Err("no format version".to_owned()),
        }
        let size = obj.get("size").and_then(serde_json::Value::as_u64).ok_or("no size")?;
        let mtime = obj.get("mtime").and_then(serde_json::Value::as_i64).ok_or("no mtime")?;
        let list = obj.get("segments").and_then(serde_json::Value::as_array).ok_or("no segments")?;
        let mut segments = Vec::with_capacity(list.len());
        let mut total: u64 = 0;
        for s in list {
            let sha = s.get("sha256").and_then(serde_json::Value::as_str).ok_or("a segment without sha256")?;
            if !is_hex(sha, 64) {
                return Err(format!("segment hash {sha:?} is not 64 lowercase hex digits"));
            }
            let len = s.get("len").and_then(serde_json::Value::as_u64).ok_or("a segment without len")?;
            total = total.checked_add(len).ok_or("segment lengths overflow")?;
            let copy = match s.get("copy") {
                None => None,
                Some(c) => {
                    let c =
                        c.as_str().filter(|c| is_hex(c, 16)).ok_or("a segment copy is not 16 lowercase hex digits")?;
                    Some(c.to_owned())
                }
            };
            segments.push(Segment { sha256: sha.to_owned(), len, copy });
        }
        if total != size {
            return Err(format!("segments hold {total} bytes, the head says {size}"));
        }
        Ok(Head { size, mtime, segments })
    }
}

/// Whether `s` is `len` lowercase hex digits.
fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

/// Returns `bytes` as lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_round_trip() {
        for p in ["plain.jsonl", "a*b?[c]%d", "é ü", ".", "..", "x\ny", "--home--", "wow!"] {
            let e = encode_part(p);
            assert!(ObjectPath::parse(format!("h/{e}")).is_ok(), "{e}");
            assert_eq!(decode_part(&e).as_deref(), Some(p));
        }
        assert_eq!(decode_file("a%21!").as_deref(), Some("a!"));
        assert_eq!((decode_file("a"), decode_dir("a!")), (None, None));
        assert_eq!(decode_part("%zz"), None);
        assert_eq!(decode_part("%4"), None);
    }

    #[test]
    fn keys_live_under_the_prefix() {
        let l = Layout::new("/team/sessions/");
        assert_eq!(l.head("/a/b*.jsonl").as_ref(), "team/sessions/heads/a/b%2A.jsonl!");
        assert_eq!(l.head_dir("/a/b").as_ref(), "team/sessions/heads/a/b");
        assert_eq!(l.lock("a").as_ref(), "team/sessions/locks/a!");
        assert_eq!(Layout::new("").segment("ab").as_ref(), "segments/ab");
        assert_eq!(Layout::new("").heads().as_ref(), "heads");
    }

    #[test]
    fn heads_round_trip_and_are_checked() {
        let h = Head { size: 3, mtime: 7, segments: vec![Segment::of(b"ab"), Segment::of(b"c")] };
        assert_eq!(Head::parse(h.to_json().as_bytes()), Ok(h.clone()));
        assert!(h.to_json().starts_with("{\"v\":1,\"size\":3,\"mtime\":7,\"segments\":[{\"sha256\":\""));
        let bad = h.to_json().replace("\"size\":3", "\"size\":4");
        assert!(Head::parse(bad.as_bytes()).is_err());
        assert!(Head::parse(b"{\"v\":2}").is_err_and(|e| e.contains("version 2")));
        let mut copy = Segment::of(b"c");
        copy.copy = Some("0123456789abcdef".to_owned());
        let h = Head { size: 1, mtime: 7, segments: vec![copy] };
        assert!(h.to_json().ends_with("\"len\":1,\"copy\":\"0123456789abcdef\"}]}"));
        assert_eq!(Head::parse(h.to_json().as_bytes()), Ok(h.clone()));
        assert_eq!(h.segments[0].object_name(), format!("{}.0123456789abcdef", h.segments[0].sha256));
        let bad = h.to_json().replace("0123456789abcdef", "../x");
        assert!(Head::parse(bad.as_bytes()).is_err_and(|e| e.contains("copy")));
        assert!(Head::parse(b"[]").is_err());
        assert!(Head::parse(b"\xff").is_err());
    }
}
