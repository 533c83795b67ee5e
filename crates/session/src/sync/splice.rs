//! The header's `cwd` of a session file, read and replaced in place: only the bytes of
//! its value change, every other byte of the file is kept.

use session_model::json::write_js_str;
use session_model::scan::{self, Obj};

/// How many lines before the header are looked at (omp's title slot is one).
const HEADER_WITHIN: usize = 2;

/// Where the header's `cwd` value is in a file: its byte range and its decoded text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct CwdSpan {
    /// The byte range of the JSON string (quotes included).
    pub(super) range: std::ops::Range<usize>,
    /// The decoded value.
    pub(super) value: String,
}

/// Returns the `cwd` of the file's header (the first `type: "session"` object among its
/// first lines), or `None` when there is no header or its `cwd` is not a string.
pub(super) fn header_cwd(bytes: &[u8]) -> Option<CwdSpan> {
    let mut start = 0;
    for _ in 0..HEADER_WITHIN {
        let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
        let line = std::str::from_utf8(&bytes[start..end]).ok()?;
        if let Some(obj) = Obj::parse(line)
            && obj.get_str("type").as_deref() == Some("session")
        {
            let raw = obj.get("cwd")?;
            let value = scan::decode_string(raw)?.into_owned();
            // `raw` is a slice of `line`: its place in the file follows from the pointers.
            let at = (raw.as_ptr() as usize).checked_sub(line.as_ptr() as usize)?;
            let from = start + at;
            return Some(CwdSpan { range: from..from + raw.len(), value });
        }
        if end >= bytes.len() {
            break;
        }
        start = end + 1;
    }
    None
}

/// Returns `bytes` with the header's `cwd` set to `cwd` (written as JavaScript writes the
/// string), every other byte as it was; `None` when the file has no header with a string
/// `cwd`. A `cwd` already equal is returned unchanged, its bytes untouched.
pub(super) fn with_cwd(bytes: &[u8], cwd: &str) -> Option<Vec<u8>> {
    let span = header_cwd(bytes)?;
    if span.value == cwd {
        return Some(bytes.to_vec());
    }
    let mut text = String::new();
    write_js_str(&mut text, cwd);
    let mut out = Vec::with_capacity(bytes.len() + text.len());
    out.extend_from_slice(&bytes[..span.range.start]);
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&bytes[span.range.end..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_value_changes() {
        let file =
            b"{\"type\":\"session\",\"version\":3,\"id\":\"x\",\"cwd\" : \"/a/b\",\"z\":1}\n{\"type\":\"message\"}\n";
        let out = with_cwd(file, "/c/\"d\"").expect("a header");
        assert_eq!(
            out,
            b"{\"type\":\"session\",\"version\":3,\"id\":\"x\",\"cwd\" : \"/c/\\\"d\\\"\",\"z\":1}\n{\"type\":\"message\"}\n"
        );
        assert_eq!(header_cwd(&out).map(|s| s.value).as_deref(), Some("/c/\"d\""));
        assert_eq!(with_cwd(file, "/a/b").as_deref(), Some(&file[..]));
    }

    #[test]
    fn the_header_may_follow_a_title_slot() {
        let file = b"{\"title\":\"t\"}   \n{\"type\":\"session\",\"cwd\":\"/a\"}\n";
        assert_eq!(header_cwd(file).map(|s| s.value).as_deref(), Some("/a"));
        assert_eq!(with_cwd(b"{\"type\":\"session\",\"cwd\":1}\n", "/a"), None);
        assert_eq!(with_cwd(b"\xff\n", "/a"), None);
        assert_eq!(with_cwd(b"", "/a"), None);
    }
}
