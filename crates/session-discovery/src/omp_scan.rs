//! omp's per-file discovery (`scanSessionFile`): a 4 KiB prefix and, for the
//! lifecycle status, a 32 KiB tail. Nothing else of the file is read (except the
//! rare full scan for an assistant turn when neither window shows one).
//!
//! The prefix is parsed with omp's lenient JSONL rules; when the header does not fit
//! in it, omp's string-scanning fallback (`extractStringProperty`) is reproduced,
//! quirks included: it finds the first `"<key>"` anywhere, then the next `:`.

use std::borrow::Cow;
use std::path::Path;

use session_model::js_trim;
use session_model::timestamp::parse_iso_millis;
use session_store::{FileStat, Storage};

use crate::info::{SessionInfo, SessionStatus};
use crate::jsonscan::{self, Kind, Lenient, LenientValues, Obj};

/// Bytes read from the start of each file.
pub const PREFIX_BYTES: u64 = 4096;
/// Bytes read from the end of each file for the status.
pub const SUFFIX_BYTES: u64 = 32_768;

/// Decodes a window as omp's text decoder does: lossy UTF-8, a leading BOM dropped.
fn decode(bytes: &[u8]) -> Cow<'_, str> {
    let b = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    session_model::decode_utf8_lossy(b)
}

/// Parses text as omp's `parseJsonlLenient`: whitespace-separated JSON values; a
/// bad value skips to the next line; an unfinished last value is dropped. Returns
/// the raw spans of the values kept, validated (so their parts are split with
/// [`Obj::parse_validated`]).
pub(crate) fn parse_jsonl_lenient(text: &str) -> Vec<&str> {
    LenientValues::new(text, |_| None::<()>)
        .filter_map(|step| match step {
            Lenient::Value { start, end, .. } => Some(&text[start..end]),
            Lenient::Syntax(_) | Lenient::Incomplete { .. } => None,
        })
        .collect()
}

/// `decodeJsonStringFragment`.
fn decode_fragment(v: &str) -> String {
    let safe = v.strip_suffix('\\').unwrap_or(v);
    let quoted = format!("\"{safe}\"");
    if jsonscan::parse_whole(&quoted).is_ok() {
        return jsonscan::unescape(safe);
    }
    safe.replace("\\n", "\n").replace("\\r", "\r").replace("\\t", "\t").replace("\\\"", "\"").replace("\\\\", "\\")
}

fn find_from(source: &str, needle: &str, from: usize) -> Option<usize> {
    let hay = source.get(from..)?.as_bytes();
    let found = match needle.as_bytes() {
        [byte] => memchr::memchr(*byte, hay),
        n => memchr::memmem::find(hay, n),
    };
    found.map(|i| i + from)
}

/// `extractStringProperty(source, name, startIndex)`.
pub(crate) fn extract_string_property(source: &str, name: &str, start: usize) -> Option<String> {
    string_property_span(source, name, start).map(decode_fragment)
}

/// Whether `extractStringProperty(source, name, startIndex)` is `want`, without
/// decoding (or allocating) unless the raw value holds an escape.
fn string_property_is(source: &str, name: &str, start: usize, want: &str) -> bool {
    match string_property_span(source, name, start) {
        // Without a backslash, the fragment decodes to itself.
        Some(raw) if !raw.contains('\\') => raw == want,
        Some(raw) => decode_fragment(raw) == want,
        None => false,
    }
}

/// The raw fragment `extractStringProperty` decodes: the first `"<name>"` from
/// `start`, then the next `:`, then a string up to its closing quote (or the end).
fn string_property_span<'a>(source: &'a str, name: &str, start: usize) -> Option<&'a str> {
    let b = source.as_bytes();
    let prop = find_quoted(source, name, start)?;
    let colon = find_from(source, ":", prop + name.len() + 2)?;
    let mut v = colon + 1;
    while v < b.len() && matches!(b[v], b' ' | b'\t' | b'\n' | b'\r') {
        v += 1;
    }
    if b.get(v) != Some(&b'"') {
        return None;
    }
    let vs = v + 1;
    let mut escaped = false;
    for (i, &c) in b.iter().enumerate().skip(vs) {
        if escaped {
            escaped = false;
            continue;
        }
        if c == b'\\' {
            escaped = true;
            continue;
        }
        if c == b'"' {
            return Some(&source[vs..i]);
        }
    }
    Some(&source[vs..])
}

/// The first `"<name>"` in `source` from `from`.
fn find_quoted(source: &str, name: &str, from: usize) -> Option<usize> {
    let hay = source.as_bytes().get(from..)?;
    let n = name.as_bytes();
    // Each `"` that starts a match: the name and a closing quote follow it.
    let mut at = 0;
    while let Some(i) = memchr::memchr(b'"', &hay[at..]) {
        let q = at + i;
        let rest = &hay[q + 1..];
        if rest.len() > n.len() && rest.starts_with(n) && rest[n.len()] == b'"' {
            return Some(from + q);
        }
        at = q + 1;
    }
    None
}

/// Finders of the patterns the scans look for in every file, built once.
struct Finders {
    type_key: memchr::memmem::Finder<'static>,
    role_key: memchr::memmem::Finder<'static>,
    assistant: memchr::memmem::Finder<'static>,
}

fn finders() -> &'static Finders {
    static FINDERS: std::sync::OnceLock<Finders> = std::sync::OnceLock::new();
    FINDERS.get_or_init(|| Finders {
        type_key: memchr::memmem::Finder::new("\"type\""),
        role_key: memchr::memmem::Finder::new("\"role\""),
        assistant: memchr::memmem::Finder::new("\"role\":\"assistant\""),
    })
}

/// The first match of `finder` in `source` from `from`.
fn find_with(finder: &memchr::memmem::Finder<'_>, source: &str, from: usize) -> Option<usize> {
    finder.find(source.as_bytes().get(from..)?).map(|i| i + from)
}

/// `countMessageMarkers`: occurrences of a `"type"` key whose value is `"message"`.
fn count_message_markers(content: &str) -> u64 {
    let mut count = 0;
    let mut index = 0;
    while index < content.len() {
        let Some(ti) = find_with(&finders().type_key, content, index) else { break };
        let Some(ci) = find_from(content, ":", ti + 6) else { break };
        if string_property_is(content, "type", ti, "message") {
            count += 1;
        }
        index = ci + 1;
    }
    count
}

/// `extractFirstDisplayMessageFromPrefix`.
fn first_display_message(content: &str) -> Option<String> {
    let mut fallback = None;
    let mut index = find_with(&finders().role_key, content, 0);
    while let Some(i) = index {
        let role = extract_string_property(content, "role", i);
        let text =
            extract_string_property(content, "content", i).or_else(|| extract_string_property(content, "text", i));
        if let Some(t) = text.filter(|t| !t.is_empty()) {
            match role.as_deref() {
                Some("user") => return Some(t),
                Some("developer" | "assistant") if fallback.is_none() => fallback = Some(t),
                _ => {}
            }
        }
        index = find_with(&finders().role_key, content, i + 6);
    }
    fallback
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum TitleOverride {
    NotGiven,
    Suppress,
    Set(String),
}

fn normalize_title(t: Option<String>) -> TitleOverride {
    match t {
        None => TitleOverride::NotGiven,
        Some(t) if js_trim(&t).is_empty() => TitleOverride::Suppress,
        Some(t) => TitleOverride::Set(t),
    }
}

struct ListHeader {
    id: String,
    cwd: Option<String>,
    title: Option<String>,
    parent: Option<String>,
    timestamp: Option<String>,
}

fn apply_override(o: &TitleOverride, own: impl FnOnce() -> Option<String>) -> Option<String> {
    match o {
        TitleOverride::Suppress => None,
        TitleOverride::Set(t) => Some(t.clone()),
        TitleOverride::NotGiven => own(),
    }
}

fn parse_list_header(content: &str, entries: &[&str]) -> Option<ListHeader> {
    let first = entries.first().and_then(|r| Obj::parse_validated(r));
    let is_title = first.as_ref().is_some_and(|o| o.get_str("type").as_deref() == Some("title"));
    let slot = if is_title {
        normalize_title(first.as_ref().and_then(|o| o.get_str("title")).map(Cow::into_owned))
    } else {
        TitleOverride::NotGiven
    };
    let idx = usize::from(is_title);
    if let Some(h) = entries.get(idx).and_then(|r| Obj::parse_validated(r))
        && h.get_str("type").as_deref() == Some("session")
        && let Some(id) = h.get_str("id")
    {
        return Some(ListHeader {
            id: id.into_owned(),
            cwd: h.get_str("cwd").map(Cow::into_owned),
            title: apply_override(&slot, || h.get_str("title").map(Cow::into_owned)),
            parent: h.get_str("parentSession").map(Cow::into_owned),
            timestamp: h.get_str("timestamp").map(Cow::into_owned),
        });
    }
    // String-scanning fallback for a header line longer than the prefix.
    let mut slot = TitleOverride::NotGiven;
    let mut first_non_empty = true;
    for raw_line in content.split('\n') {
        let line = js_trim(raw_line.strip_suffix('\r').unwrap_or(raw_line));
        if line.is_empty() {
            continue;
        }
        if first_non_empty && extract_string_property(line, "type", 0).as_deref() == Some("title") {
            slot = normalize_title(extract_string_property(line, "title", 0));
            first_non_empty = false;
            continue;
        }
        if extract_string_property(line, "type", 0).as_deref() != Some("session") {
            return None;
        }
        let id = extract_string_property(line, "id", 0).filter(|i| !i.is_empty())?;
        return Some(ListHeader {
            id,
            cwd: extract_string_property(line, "cwd", 0),
            title: apply_override(&slot, || extract_string_property(line, "title", 0)),
            parent: extract_string_property(line, "parentSession", 0),
            timestamp: extract_string_property(line, "timestamp", 0),
        });
    }
    None
}

/// Derives the lifecycle status from a tail window (`deriveSessionStatus`).
pub(crate) fn derive_status(suffix: &str) -> SessionStatus {
    if suffix.is_empty() {
        return SessionStatus::Unknown;
    }
    for line in suffix.split('\n').rev() {
        if !line.starts_with('{') {
            continue;
        }
        let Ok((Some(o), _)) = Obj::parse_line(line) else { continue };
        if o.get_str("type").as_deref() != Some("message") {
            continue;
        }
        let Some(m) = o.get("message").filter(|m| jsonscan::truthy(m)) else { continue };
        let Some(m) = Obj::parse_validated(m) else { return SessionStatus::Unknown };
        return match m.get_str("role").as_deref() {
            Some("assistant") => match m.get_str("stopReason").as_deref() {
                Some("error") => SessionStatus::Error,
                Some("aborted") => SessionStatus::Aborted,
                Some("length") => SessionStatus::Interrupted,
                _ => {
                    let tool_call = m.get("content").is_some_and(|c| {
                        jsonscan::kind(c) == Kind::Array
                            && jsonscan::array_elements(c).into_iter().any(|b| {
                                Obj::parse_validated(b)
                                    .is_some_and(|o| o.get_str("type").as_deref() == Some("toolCall"))
                            })
                    });
                    if tool_call { SessionStatus::Interrupted } else { SessionStatus::Complete }
                }
            },
            Some("toolResult") => SessionStatus::Interrupted,
            Some("user") => SessionStatus::Pending,
            _ => SessionStatus::Unknown,
        };
    }
    SessionStatus::Unknown
}

/// Whether any line of the file is an assistant `message` entry.
fn has_assistant_turn(storage: &dyn Storage, path: &Path) -> bool {
    let Ok(bytes) = storage.read(path) else { return false };
    let text = session_model::decode_utf8_lossy(&bytes);
    text.split('\n').filter(|l| l.contains("\"assistant\"")).any(|l| {
        jsonscan::parse_whole(l).ok().and_then(Obj::parse_validated).is_some_and(|o| {
            o.get_str("type").as_deref() == Some("message")
                && o.get("message")
                    .and_then(Obj::parse_validated)
                    .is_some_and(|m| m.get_str("role").as_deref() == Some("assistant"))
        })
    })
}

/// Scans one file into omp's `SessionInfo`, or `None` where omp skips it.
pub(crate) fn scan_session_file(storage: &dyn Storage, path: &Path, with_status: bool) -> Option<SessionInfo> {
    thread_local! {
        /// The two windows' buffers, reused from file to file.
        static WINDOWS: std::cell::RefCell<(Vec<u8>, Vec<u8>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    }
    WINDOWS.with(|w| {
        let (head, tail) = &mut *w.borrow_mut();
        let suffix = if with_status { SUFFIX_BYTES } else { 0 };
        let (st, h, t) = storage.read_slices_into(path, PREFIX_BYTES, suffix, head, tail).ok()?;
        scan_windows(storage, path, st, &head[..h], &tail[..t], with_status)
    })
}

/// [`scan_session_file`] of the windows read.
fn scan_windows(
    storage: &dyn Storage,
    path: &Path,
    st: FileStat,
    head: &[u8],
    tail: &[u8],
    with_status: bool,
) -> Option<SessionInfo> {
    if !st.is_file {
        return None;
    }
    let content = decode(head);
    let suffix = decode(tail);
    let entries = parse_jsonl_lenient(&content);
    let header = parse_list_header(&content, &entries)?;

    let mut parsed_messages = 0u64;
    let mut parsed_assistant = 0u64;
    let mut first_message = String::new();
    // Every message text, joined with a space as it is found.
    let mut all = String::new();
    let mut short_summary: Option<String> = None;
    for raw in entries.iter().skip(1) {
        let k = jsonscan::kind(raw);
        if k == Kind::Null {
            return None;
        }
        if k != Kind::Object {
            continue;
        }
        let Some(o) = Obj::parse_validated(raw) else { continue };
        let ty = o.get_str("type");
        if ty.as_deref() == Some("compaction")
            && let Some(s) = o.get_str("shortSummary")
        {
            short_summary = Some(s.into_owned());
        }
        if ty.as_deref() == Some("message")
            && let Some(m) = o.get("message").filter(|m| jsonscan::truthy(m))
        {
            parsed_messages += 1;
            let Some(m) = Obj::parse_validated(m) else { continue };
            let role = m.get_str("role");
            if role.as_deref() == Some("assistant") {
                parsed_assistant += 1;
            }
            if matches!(role.as_deref(), Some("user" | "assistant")) {
                // omp's `extractTextFromContent` is pi's: the same rules, the same throws.
                let content = m.get("content")?;
                let tape = jsonscan::Tape::parse_validated(content, 2).ok()?;
                let is_user = role.as_deref() == Some("user");
                crate::pi_scan::add_message_text(&mut all, &mut first_message, is_user, &tape, 0).ok()?;
            }
        }
    }
    if first_message.is_empty() {
        first_message = first_display_message(&content).unwrap_or_default();
    }
    let message_count = parsed_messages.max(count_message_markers(&content));
    let count = |text: &str| finders().assistant.find_iter(text.as_bytes()).count() as u64;
    let mut assistant_turns = parsed_assistant.max(count(&content)).max(count(&suffix));
    if assistant_turns == 0 && has_assistant_turn(storage, path) {
        assistant_turns = 1;
    }
    let all_messages_text = if all.is_empty() { first_message.clone() } else { all };
    Some(SessionInfo {
        path: path.to_path_buf(),
        id: header.id,
        id_raw: None,
        has_id: true,
        cwd: header.cwd.unwrap_or_default(),
        name: None,
        title: header.title.or(short_summary),
        parent_session_path: header.parent,
        created: header.timestamp.as_deref().and_then(parse_iso_millis),
        modified: Some(st.mtime_ms),
        message_count,
        assistant_turns: Some(assistant_turns),
        size: Some(st.size),
        first_message: if first_message.is_empty() { "(no messages)".to_string() } else { first_message },
        all_messages_text: all_messages_text.into(),
        status: with_status.then(|| derive_status(&suffix)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_table() {
        let cases: &[(&str, &[&str])] = &[
            ("{\"a\":1}\n{\"b\":2}", &["{\"a\":1}", "{\"b\":2}"]),
            ("{\"a\":1}\n{\"b\":2", &["{\"a\":1}"]),
            ("{\"a\":1}\n{\"b\":2\n{\"c\":3}\n", &["{\"a\":1}", "{\"c\":3}"]),
            ("{\"a\":1}\nnot json\n{\"c\":3}\n", &["{\"a\":1}", "{\"c\":3}"]),
            ("{\"a\":1} x\n{\"c\":3}\n", &["{\"a\":1}", "{\"c\":3}"]),
            ("{\"a\":1}{\"b\":2}\n{\"c\":3}\n", &["{\"a\":1}", "{\"c\":3}"]),
            ("{\"a\":\n1}\n", &["{\"a\":\n1}"]),
            ("42\nnull\n", &["42", "null"]),
            ("xx\n", &[]),
            ("  \n", &[]),
        ];
        for (input, want) in cases {
            assert_eq!(parse_jsonl_lenient(input), *want, "{input:?}");
        }
    }

    #[test]
    fn extract_property_quirks() {
        assert_eq!(extract_string_property(r#"{"type":"session","id":"x"}"#, "id", 0).as_deref(), Some("x"));
        assert_eq!(extract_string_property(r#"{"a":"tr\"unc"#, "a", 0).as_deref(), Some("tr\"unc"));
        assert_eq!(extract_string_property(r#"{"a":1}"#, "a", 0), None);
        assert_eq!(extract_string_property(r#"{"a":"x\"#, "a", 0).as_deref(), Some("x"));
        // The comparison without decoding agrees with decoding.
        for (text, want) in [
            (r#"{"type":"message"}"#, true),
            (r#"{"type" :  "message","x":1}"#, true),
            (r#"{"type":"mess\u0061ge"}"#, true),
            (r#"{"type":"messages"}"#, false),
            (r#"{"xtype":"message"}"#, false),
            (r#"{"type":1,"b":"message"}"#, false),
        ] {
            assert_eq!(string_property_is(text, "type", 0, "message"), want, "{text}");
            assert_eq!(extract_string_property(text, "type", 0).as_deref() == Some("message"), want, "{text}");
        }
        let two = r#"{"type":"message","message":{"content":[{"type":"text"}]}}{"type":"mess\u0061ge"}"#;
        assert_eq!(count_message_markers(two), 2);
    }

    #[test]
    fn status_from_tail() {
        let m = |msg: &str| format!("partial\n{{\"type\":\"message\",\"message\":{msg}}}\n{{\"type\":\"label\"}}\n");
        assert_eq!(derive_status(&m(r#"{"role":"user","content":"x"}"#)), SessionStatus::Pending);
        assert_eq!(derive_status(&m(r#"{"role":"assistant","stopReason":"error"}"#)), SessionStatus::Error);
        assert_eq!(derive_status(&m(r#"{"role":"assistant","stopReason":"aborted"}"#)), SessionStatus::Aborted);
        assert_eq!(derive_status(&m(r#"{"role":"assistant","stopReason":"length"}"#)), SessionStatus::Interrupted);
        assert_eq!(
            derive_status(&m(r#"{"role":"assistant","content":[{"type":"toolCall"}]}"#)),
            SessionStatus::Interrupted
        );
        assert_eq!(derive_status(&m(r#"{"role":"assistant","content":[]}"#)), SessionStatus::Complete);
        assert_eq!(derive_status(&m(r#"{"role":"toolResult"}"#)), SessionStatus::Interrupted);
        assert_eq!(derive_status(&m(r#"{"role":"bashExecution"}"#)), SessionStatus::Unknown);
        assert_eq!(derive_status("no messages\n"), SessionStatus::Unknown);
    }
}
