//! pi's per-file discovery: the header scan (`readSessionHeader`) and
//! `buildSessionInfo`, which reads the whole file.
//!
//! The whole-file read is what pi does, so listings agree on `messageCount`,
//! `modified` and the texts; it is made cheap by validating each line once and
//! decoding only the few fields that are read.

use std::borrow::Cow;
use std::path::Path;

use session_model::js_trim;
use session_store::Storage;

use crate::info::SessionInfo;
use crate::io;
use crate::jsonscan::{self, Kind, Obj, Tape};

/// The most the header scan reads before giving up (pi's 1 MiB limit).
const HEADER_SCAN_LIMIT: u64 = 1024 * 1024;

/// A header found by the header scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PiHeader {
    pub(crate) id: String,
    pub(crate) cwd: Option<String>,
}

/// Decodes bytes as Node's UTF-8 decoder does (invalid bytes become U+FFFD).
pub(crate) fn decode(bytes: &[u8]) -> Cow<'_, str> {
    session_model::decode_utf8_lossy(bytes)
}

/// Scans the first lines of a file for its header, as `readSessionHeader` does:
/// the first line that parses to a truthy value decides. Any error, and a header
/// that does not fit in 1 MiB, give `None`.
pub(crate) fn read_header(storage: &dyn Storage, path: &Path) -> Option<PiHeader> {
    let bytes = io::read_prefix(storage, path, HEADER_SCAN_LIMIT + 1).ok()?;
    let at_eof = bytes.len() as u64 <= HEADER_SCAN_LIMIT;
    let window = &bytes[..bytes.len().min(HEADER_SCAN_LIMIT as usize)];
    let text = decode(window);
    let mut rest: &str = &text;
    while let Some(nl) = rest.find('\n') {
        match header_candidate(&rest[..nl]) {
            Candidate::Skip => rest = &rest[nl + 1..],
            Candidate::NotSession => return None,
            Candidate::Header(h) => return Some(h),
        }
    }
    if !at_eof {
        return None;
    }
    match header_candidate(rest) {
        Candidate::Header(h) => Some(h),
        _ => None,
    }
}

enum Candidate {
    Skip,
    NotSession,
    Header(PiHeader),
}

fn header_candidate(line: &str) -> Candidate {
    if js_trim(line).is_empty() {
        return Candidate::Skip;
    }
    let Ok((obj, raw)) = Obj::parse_line(line) else { return Candidate::Skip };
    if !jsonscan::truthy(raw) {
        return Candidate::Skip;
    }
    let Some(obj) = obj else { return Candidate::NotSession };
    if obj.get_str("type").as_deref() != Some("session") {
        return Candidate::NotSession;
    }
    match obj.get_str("id") {
        Some(id) => Candidate::Header(PiHeader { id: id.into_owned(), cwd: obj.get_str("cwd").map(Cow::into_owned) }),
        None => Candidate::NotSession,
    }
}

/// Returns `new Date(value).getTime()` for a raw JSON value (`None` = NaN).
pub(crate) fn js_date(raw: Option<&str>) -> Option<i64> {
    session_model::timestamp::js_date_raw(raw?)
}

pub(crate) use session_model::timestamp::time_clip;

/// Splits text into lines as Node's `readline` does (`\n`, `\r\n` and a lone `\r`).
fn readline_lines(text: &str) -> impl Iterator<Item = &str> {
    let b = text.as_bytes();
    let mut pos = 0;
    std::iter::from_fn(move || {
        if pos >= b.len() {
            return None;
        }
        let start = pos;
        pos = memchr::memchr2(b'\n', b'\r', &b[pos..]).map_or(b.len(), |i| pos + i);
        let line = &text[start..pos];
        if pos < b.len() {
            if b[pos] == b'\r' && b.get(pos + 1) == Some(&b'\n') {
                pos += 2;
            } else {
                pos += 1;
            }
        }
        Some(line)
    })
}

/// The text of a user/assistant `content`, as a string.
#[cfg(test)]
fn content_text(content: &str) -> Result<String, ()> {
    let tape = Tape::parse(content, 2).map_err(|_| ())?;
    let mut out = String::new();
    content_text_into(&tape, 0, &mut out)?;
    Ok(out)
}

/// Appends the text of a user/assistant `content`, value `id` of `tape` (recorded two
/// levels below it), to `out` (the listing's running text, so that message texts
/// are decoded straight into it): a string as is, an array's `text` blocks joined
/// with a space. `Err` where pi throws (which drops the file); omp's
/// `extractTextFromContent` is the same function.
fn content_text_into(tape: &Tape<'_>, id: usize, out: &mut String) -> Result<(), ()> {
    let content = tape.raw(id);
    match jsonscan::kind(content) {
        Kind::String => {
            jsonscan::push_decoded(content, out);
            Ok(())
        }
        Kind::Array => {
            let mut first = true;
            for block in tape.children(id) {
                match jsonscan::kind(tape.raw(block)) {
                    Kind::Null => return Err(()),
                    Kind::Object if tape.get_str(block, "type").as_deref() == Some("text") => {
                        if !first {
                            out.push(' ');
                        }
                        first = false;
                        push_joined(out, tape.get(block, "text").map(|t| tape.raw(t)));
                    }
                    _ => {}
                }
            }
            Ok(())
        }
        _ => Err(()),
    }
}

/// Adds one user/assistant message's text (`content`, value `id` of `tape`) to the
/// running all-messages text, after a space (an empty text adds nothing), and keeps
/// it as `first_user` when it is the first non-empty user text. `Err` where the
/// references throw.
pub(crate) fn add_message_text(
    all: &mut String,
    first_user: &mut String,
    is_user: bool,
    tape: &Tape<'_>,
    id: usize,
) -> Result<(), ()> {
    let before = all.len();
    if !all.is_empty() {
        all.push(' ');
    }
    let at = all.len();
    content_text_into(tape, id, all)?;
    if all.len() == at {
        all.truncate(before);
    } else if is_user && first_user.is_empty() {
        *first_user = all[at..].to_owned();
    }
    Ok(())
}

/// Appends `String(value)` of a raw JSON value (nothing for a missing one).
fn push_joined(out: &mut String, raw: Option<&str>) {
    match raw {
        Some(raw) if jsonscan::kind(raw) == Kind::String => {
            jsonscan::push_decoded(raw, out);
        }
        Some(raw) => out.push_str(&jsonscan::js_join_string(raw)),
        None => {}
    }
}

/// The header fields a listing reports (`ts` is the raw JSON of `timestamp`).
struct Header {
    id: String,
    id_raw: Option<String>,
    has_id: bool,
    cwd: Option<String>,
    parent: Option<String>,
    ts: Option<String>,
}

/// Builds pi's `SessionInfo` for one file (`buildSessionInfo`), or `None` where pi
/// returns `null`: unreadable, no header first, or a record that makes pi throw
/// (a non-string `session_info.name`, a `message` entry without a message, a
/// user/assistant message whose content is not a string or array).
///
/// Deviation: a header whose `id` is not a string is not listed (pi lists it with
/// that id, but cannot open it).
pub(crate) fn build_session_info(storage: &dyn Storage, path: &Path) -> Option<SessionInfo> {
    thread_local! {
        /// The file's bytes and the running all-messages text: buffers reused from
        /// file to file, so that a listing neither allocates nor faults in fresh memory
        /// per file, nor regrows the text; the info gets an exact copy of the text.
        static BUFS: std::cell::RefCell<(Vec<u8>, String)> = const { std::cell::RefCell::new((Vec::new(), String::new())) };
    }
    BUFS.with(|bufs| {
        let (bytes, all) = &mut *bufs.borrow_mut();
        all.clear();
        let info = build_with(storage, path, bytes, all);
        // A file far larger than the rest does not keep its memory.
        if bytes.capacity() > 1 << 22 {
            *bytes = Vec::new();
        }
        if all.capacity() > 1 << 22 {
            *all = String::new();
        }
        info
    })
}

/// [`build_session_info`] with the buffers: `bytes` for the file, `all` (empty) for
/// the text.
fn build_with(storage: &dyn Storage, path: &Path, bytes: &mut Vec<u8>, all: &mut String) -> Option<SessionInfo> {
    let (st, n) = storage.read_into(path, bytes).ok()?;
    info_of_bytes(path, st.mtime_ms, &bytes[..n], all)
}

/// pi's `SessionInfo` of a session's `bytes` (as [`build_session_info`] reads a file),
/// named `path`, whose file was last modified at `mtime_ms`; `all` (empty) collects the
/// messages' text.
pub(crate) fn info_of_bytes(path: &Path, mtime_ms: i64, bytes: &[u8], all: &mut String) -> Option<SessionInfo> {
    let text = decode(bytes);
    let mut header: Option<Header> = None;
    let mut message_count = 0u64;
    let mut first_message = String::new();
    let mut name: Option<String> = None;
    let mut last_activity: Option<f64> = None;
    for line in readline_lines(&text) {
        if js_trim(line).is_empty() {
            continue;
        }
        // The line, validated, with its values recorded down to the content blocks'
        // members (line 0, message 1, content 2, block 3, `text` 4).
        let Ok(tape) = Tape::parse(line, 4) else { continue };
        if !jsonscan::truthy(tape.raw(0)) {
            continue;
        }
        if jsonscan::kind(tape.raw(0)) != Kind::Object {
            header.as_ref()?;
            continue;
        }
        let get = |id: usize, key: &str| tape.get(id, key).map(|c| tape.raw(c));
        let ty = tape.get_str(0, "type");
        if header.is_none() {
            if ty.as_deref() != Some("session") {
                return None;
            }
            // pi lists a header whatever its id (a missing or odd id shows as such).
            let raw_id = get(0, "id");
            let id = tape.get_str(0, "id").map(Cow::into_owned);
            let id_raw = match (&id, raw_id) {
                (None, Some(raw)) => Some(raw.to_owned()),
                _ => None,
            };
            let has_id = raw_id.is_some();
            let id = id.unwrap_or_default();
            let cwd = tape.get_str(0, "cwd").map(Cow::into_owned);
            let parent = tape.get_str(0, "parentSession").map(Cow::into_owned);
            let ts = get(0, "timestamp").map(str::to_string);
            header = Some(Header { id, id_raw, has_id, cwd, parent, ts });
            continue;
        }
        match ty.as_deref() {
            Some("session_info") => match get(0, "name") {
                None => name = None,
                Some(n) => match jsonscan::kind(n) {
                    Kind::Null => name = None,
                    Kind::String => {
                        let s = jsonscan::decode_string(n).unwrap_or_default();
                        let t = js_trim(&s);
                        name = (!t.is_empty()).then(|| t.to_string());
                    }
                    _ => return None,
                },
            },
            Some("message") => {
                message_count += 1;
                let m = tape.get(0, "message")?;
                match jsonscan::kind(tape.raw(m)) {
                    Kind::Null => return None,
                    Kind::Object => {}
                    _ => continue,
                }
                let Some(role) = tape.get_str(m, "role") else { continue };
                let Some(content) = tape.get(m, "content") else { continue };
                if role != "user" && role != "assistant" {
                    continue;
                }
                let activity = get(m, "timestamp")
                    .and_then(jsonscan::number)
                    .or_else(|| js_date(get(0, "timestamp")).map(|t| t as f64));
                if let Some(t) = activity {
                    last_activity = Some(last_activity.unwrap_or(0.0).max(t));
                }
                add_message_text(all, &mut first_message, role == "user", &tape, content).ok()?;
            }
            _ => {}
        }
    }
    let Header { id, id_raw, has_id, cwd, parent, ts } = header?;
    let header_time = ts.as_deref().filter(|t| jsonscan::kind(t) == Kind::String).and_then(|t| js_date(Some(t)));
    // `lastActivityTime > 0 ? new Date(lastActivityTime) : ...`: an activity beyond
    // JavaScript's dates (`Infinity` from `1e400`) is an Invalid Date, not a fallback.
    let modified = last_activity.filter(|t| *t > 0.0).map_or(Some(header_time.unwrap_or(mtime_ms)), time_clip);
    Some(SessionInfo {
        path: path.to_path_buf(),
        id,
        id_raw,
        has_id,
        cwd: cwd.unwrap_or_default(),
        name,
        title: None,
        parent_session_path: parent,
        created: js_date(ts.as_deref()),
        modified,
        message_count,
        assistant_turns: None,
        size: None,
        first_message: if first_message.is_empty() { "(no messages)".to_string() } else { first_message },
        all_messages_text: all.as_str().into(),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readline_splits_like_node() {
        let v: Vec<&str> = readline_lines("a\r\nb\rc\n\nd").collect();
        assert_eq!(v, ["a", "b", "c", "", "d"]);
    }

    #[test]
    fn content_text_rules() {
        assert_eq!(content_text(r#""hi""#), Ok("hi".into()));
        assert_eq!(
            content_text(r#"[{"type":"text","text":"a"},{"type":"thinking"},{"type":"text","text":"b"}]"#),
            Ok("a b".into())
        );
        assert_eq!(content_text("null"), Err(()));
        assert_eq!(content_text("[null]"), Err(()));
        assert_eq!(content_text("[1,{\"type\":\"text\"}]"), Ok(String::new()));
    }
}
