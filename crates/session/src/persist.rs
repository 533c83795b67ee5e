//! What an entry looks like on disk: omp's `prepareEntryForPersistence` and its reverse.
//!
//! [`prepare_entry`] is a pure function from an entry's JSON to the JSON to write (omp 18.3.4
//! §5.6), plus the blobs the caller must store *before* writing the line:
//!
//! 1. assistant messages carrying OpenAI Responses history drop a thinking block's
//!    `thinkingSignature` when the same reasoning item is already in `providerPayload.items`;
//! 2. MCP tool results whose `details` carry `serverName`, `mcpToolName`, `structuredContent` and
//!    `meta.truncation.artifactId` drop `details.structuredContent`;
//! 3. a recursive walk (the parent key is threaded through; array elements inherit their array's
//!    key):
//!    * image payloads — objects with a string `data` that are image blocks (`type: "image"`)
//!      under key `content`, or image blocks / `mimeType: image/*` objects under `images` or
//!      `frames` — whose `data` is not a ref and is at least 1024 JS characters long get
//!      `data: "blob:sha256:<sha256 of the base64-decoded bytes>"`;
//!    * `image_generation_call` objects do the same with `result`;
//!    * strings under key `image_url` that are image data URLs are always externalized (hash of
//!      the URL's UTF-8 bytes);
//!    * signed or encrypted provider blocks are kept verbatim, neither truncated nor descended
//!      into: `thinking` with `thinkingSignature`, `text` with `textSignature`, `toolCall` with
//!      `thoughtSignature`, `redactedThinking` with `data`, `reasoning` with
//!      `encrypted_content` (each non-empty), `anthropicCompaction` blocks and objects under key
//!      `anthropicCompaction` with a string `content`, and `anthropicServerTool` blocks;
//!    * any other string longer than 500,000 UTF-16 units is cut to 499,953 units (a split
//!      surrogate pair is dropped) followed by [`TRUNCATION_NOTICE`], except under the keys
//!      `thinkingSignature`, `thoughtSignature` and `textSignature`;
//!    * `jsonlEvents` properties are removed; an object that changed and has a string `content`
//!      and a numeric `lineCount` gets `lineCount` = number of `\n` in `content` + 1.
//!
//! Unchanged input gives `None`, so the caller writes the record's original bytes. The walk is
//! idempotent: preparing a prepared entry changes nothing.
//!
//! [`resolve_blob_refs`] reverses only the blob step (omp §2.7); truncation is permanent.
//! Approximation: omp keeps an `anthropicServerTool` block verbatim only when its inner block
//! passes Anthropic's history validation; here every such block is kept verbatim.

use std::fmt;

use serde_json::{Map, Value};

use session_store::StoreError;
use session_store::base64;
use session_store::blob::{BLOB_REF_PREFIX, BlobRef, BlobStore};

/// The notice appended to a truncated string (47 UTF-16 units).
pub const TRUNCATION_NOTICE: &str = "\n\n[Session persistence truncated large content]";
/// Strings longer than this many UTF-16 units are truncated.
pub const MAX_STRING_UNITS: usize = 500_000;
/// Image payloads of at least this many characters are externalized.
pub const IMAGE_INLINE_LIMIT: usize = 1024;

const SIGNATURE_KEYS: [&str; 3] = ["thinkingSignature", "thoughtSignature", "textSignature"];

/// A blob the caller must store before writing the prepared line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewBlob {
    /// Its reference, as written into the JSON.
    pub blob: BlobRef,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// The image MIME type, for the typed sidecar.
    pub mime: Option<String>,
}

/// The result of [`prepare_entry`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Prepared {
    /// The JSON to write, or `None` when the entry is written unchanged.
    pub value: Option<Value>,
    /// Blobs referenced by `value` that must be stored first.
    pub blobs: Vec<NewBlob>,
}

/// Returns the on-disk form of an entry and the blobs it needs (see the module docs).
pub fn prepare_entry(entry: &Value) -> Prepared {
    let pre = dedupe_responses_signatures(entry);
    let pre = match strip_mcp_structured_content(pre.as_ref().unwrap_or(entry)) {
        Some(v) => Some(v),
        None => pre,
    };
    let mut walker = Walker { blobs: Vec::new() };
    let walked = walker.walk(pre.as_ref().unwrap_or(entry), None);
    Prepared { value: walked.or(pre), blobs: walker.blobs }
}

/// Prepares an entry and stores its blobs in `store`; returns the JSON to write, `None` if unchanged.
pub fn prepare_entry_with(entry: &Value, store: &BlobStore) -> Result<Option<Value>, StoreError> {
    let prepared = prepare_entry(entry);
    for b in &prepared.blobs {
        // A blob that landed without its directory sync is not durable, and the entry
        // that names it is not written yet: the append failed, it did not land. Its
        // cause is reported instead, so nobody takes the entry as in the file.
        store.put(&b.bytes, b.mime.as_deref()).map_err(|e| match e {
            StoreError::NotDurable { source, .. } => *source,
            e => e,
        })?;
    }
    Ok(prepared.value)
}

/// Returns false only when [`prepare_entry`] is sure to leave the entry whose JSON text is
/// `line` unchanged; a cheap filter before parsing a line.
///
/// Conservative: it looks for the keys and string values every transform needs (`"data"` and
/// `"result"` in lines long enough for an image, `"image_url"`, `"jsonlEvents"`, the OpenAI and MCP
/// markers), for any `\u` escape that could spell one of them, and for lines long enough to hold
/// a string over [`MAX_STRING_UNITS`]. One pass over the line: it stops only at quotes and
/// backslashes (this runs on every omp append).
pub fn may_change(line: &str) -> bool {
    if line.len() > MAX_STRING_UNITS {
        return true;
    }
    let b = line.as_bytes();
    let image_sized = line.len() >= IMAGE_INLINE_LIMIT;
    let mut i = 0;
    while let Some(at) = next_quote_or_backslash(b, i) {
        let rest = &b[at + 1..];
        if b[at] == b'\\' {
            if rest.first() == Some(&b'u') {
                return true;
            }
            // Any other escape stands for one character (an escaped quote is not a key).
            i = at + 2;
            continue;
        }
        let marker: &[u8] = match rest.first() {
            Some(b'j') => b"jsonlEvents\"",
            Some(b'i') => b"image_url\"",
            Some(b'o') => b"openaiResponsesHistory\"",
            Some(b's') => b"structuredContent\"",
            Some(b'd') if image_sized => b"data\"",
            Some(b'r') if image_sized => b"result\"",
            _ => b"",
        };
        if !marker.is_empty() && rest.starts_with(marker) {
            return true;
        }
        i = at + 1;
    }
    false
}

/// Returns the position of the first `"` or `\\` in `b` at or after `from` (SIMD search).
///
/// The first bytes are looked at one by one: quotes come close together in the
/// skeleton of a line, where starting a SIMD search costs more than it saves.
fn next_quote_or_backslash(b: &[u8], from: usize) -> Option<usize> {
    let rest = b.get(from..)?;
    let head = rest.len().min(24);
    match rest[..head].iter().position(|&c| c == b'"' || c == b'\\') {
        Some(p) => Some(from + p),
        None => memchr::memchr2(b'"', b'\\', &rest[head..]).map(|p| from + head + p),
    }
}

/// Returns the length of `s` in UTF-16 code units (JavaScript's `length`).
pub(crate) fn js_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// Returns `s` cut for persistence when it is longer than [`MAX_STRING_UNITS`], else `None`.
pub fn truncate_large_string(s: &str) -> Option<String> {
    // UTF-8 never takes fewer bytes than UTF-16 units, so short byte lengths need no counting.
    if s.len() <= MAX_STRING_UNITS || js_len(s) <= MAX_STRING_UNITS {
        return None;
    }
    let keep = MAX_STRING_UNITS - js_len(TRUNCATION_NOTICE);
    let mut units = 0;
    let mut end = 0;
    for (i, c) in s.char_indices() {
        if units + c.len_utf16() > keep {
            break;
        }
        units += c.len_utf16();
        end = i + c.len_utf8();
    }
    let mut out = String::with_capacity(end + TRUNCATION_NOTICE.len());
    out.push_str(&s[..end]);
    out.push_str(TRUNCATION_NOTICE);
    Some(out)
}

fn is_ref(s: &str) -> bool {
    s.starts_with(BLOB_REF_PREFIX)
}

fn is_image_data_url(s: &str) -> bool {
    let head = s.get(..s.len().min(256)).unwrap_or(s);
    let lower = head.to_ascii_lowercase();
    lower.starts_with("data:image/") && lower.contains(";base64,")
}

fn str_of<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    o.get(key).and_then(Value::as_str)
}

fn non_empty(o: &Map<String, Value>, key: &str) -> bool {
    str_of(o, key).is_some_and(|s| !s.is_empty())
}

fn is_verbatim(o: &Map<String, Value>, key: Option<&str>) -> bool {
    let signed = match str_of(o, "type") {
        Some("thinking") => non_empty(o, "thinkingSignature"),
        Some("text") => non_empty(o, "textSignature"),
        Some("toolCall") => non_empty(o, "thoughtSignature"),
        Some("redactedThinking") => non_empty(o, "data"),
        Some("reasoning") => non_empty(o, "encrypted_content"),
        Some("anthropicCompaction" | "anthropicServerTool") => true,
        _ => false,
    };
    signed || (key == Some("anthropicCompaction") && str_of(o, "content").is_some())
}

/// Whether an object sits where an image payload may be externalized (`frames` included).
fn image_position(o: &Map<String, Value>, key: Option<&str>, include_frames: bool) -> bool {
    let block = str_of(o, "type") == Some("image");
    let image_mime =
        str_of(o, "mimeType").is_some_and(|m| m.get(..6).is_some_and(|p| p.eq_ignore_ascii_case("image/")));
    match key {
        Some("content") => block,
        Some("images") => block || image_mime,
        Some("frames") => include_frames && (block || image_mime),
        _ => false,
    }
}

fn long_enough(s: &str) -> bool {
    s.len() >= IMAGE_INLINE_LIMIT && js_len(s) >= IMAGE_INLINE_LIMIT
}

struct Walker {
    blobs: Vec<NewBlob>,
}

impl Walker {
    fn externalize(&mut self, bytes: Vec<u8>, mime: Option<&str>) -> Value {
        let blob = BlobRef::for_bytes(&bytes);
        let text = blob.to_string();
        if !self.blobs.iter().any(|b| b.blob == blob) {
            self.blobs.push(NewBlob { blob, bytes, mime: mime.map(str::to_owned) });
        }
        Value::String(text)
    }

    fn walk(&mut self, v: &Value, key: Option<&str>) -> Option<Value> {
        match v {
            Value::String(s) => self.walk_str(s, key),
            Value::Array(items) => changed_items(items, |item| self.walk(item, key)).map(Value::Array),
            Value::Object(o) => self.walk_object(o, key).map(Value::Object),
            _ => None,
        }
    }

    fn walk_str(&mut self, s: &str, key: Option<&str>) -> Option<Value> {
        if key == Some("image_url") && is_image_data_url(s) {
            return Some(self.externalize(s.as_bytes().to_vec(), None));
        }
        if key.is_some_and(|k| SIGNATURE_KEYS.contains(&k)) {
            return None;
        }
        truncate_large_string(s).map(Value::String)
    }

    fn walk_object(&mut self, o: &Map<String, Value>, key: Option<&str>) -> Option<Map<String, Value>> {
        if is_verbatim(o, key) {
            return None;
        }
        let image = image_position(o, key, true) && str_of(o, "data").is_some_and(|d| !is_ref(d) && long_enough(d));
        let generated = str_of(o, "type") == Some("image_generation_call")
            && str_of(o, "result").is_some_and(|r| !is_ref(r) && long_enough(r));
        let mut out: Option<Map<String, Value>> = None;
        for (i, (k, child)) in o.iter().enumerate() {
            let change = if k == "jsonlEvents" {
                Change::Remove
            } else if image && k == "data" {
                let bytes = base64::decode_lenient(child.as_str().unwrap_or_default());
                Change::Set(self.externalize(bytes, str_of(o, "mimeType")))
            } else if generated && k == "result" {
                let bytes = base64::decode_lenient(child.as_str().unwrap_or_default());
                Change::Set(self.externalize(bytes, None))
            } else {
                match self.walk(child, Some(k)) {
                    Some(v) => Change::Set(v),
                    None => Change::Keep,
                }
            };
            match change {
                Change::Keep => {
                    if let Some(m) = out.as_mut() {
                        m.insert(k.clone(), child.clone());
                    }
                }
                Change::Set(v) => {
                    out.get_or_insert_with(|| prefix_of(o, i)).insert(k.clone(), v);
                }
                Change::Remove => {
                    out.get_or_insert_with(|| prefix_of(o, i));
                }
            }
        }
        if let Some(m) = out.as_mut()
            && m.get("lineCount").is_some_and(Value::is_number)
            && let Some(content) = str_of(m, "content")
        {
            let lines = content.bytes().filter(|&b| b == b'\n').count() + 1;
            m.insert("lineCount".to_owned(), Value::from(lines));
        }
        out
    }
}

/// `items` with the ones `change` returns a new value for replaced; `None` when it
/// changes none (nothing is copied).
fn changed_items(items: &[Value], mut change: impl FnMut(&Value) -> Option<Value>) -> Option<Vec<Value>> {
    let mut out: Option<Vec<Value>> = None;
    for (i, item) in items.iter().enumerate() {
        match (change(item), out.as_mut()) {
            (Some(new), Some(o)) => o.push(new),
            (Some(new), None) => {
                let mut o = items[..i].to_vec();
                o.push(new);
                out = Some(o);
            }
            (None, Some(o)) => o.push(item.clone()),
            (None, None) => {}
        }
    }
    out
}

enum Change {
    Keep,
    Set(Value),
    Remove,
}

fn prefix_of(o: &Map<String, Value>, n: usize) -> Map<String, Value> {
    o.iter().take(n).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Returns the entry's `message` object when the entry is a message entry.
fn message_of(entry: &Value) -> Option<&Map<String, Value>> {
    let o = entry.as_object()?;
    if str_of(o, "type") != Some("message") {
        return None;
    }
    o.get("message")?.as_object()
}

fn with_message(entry: &Value, message: Map<String, Value>) -> Option<Value> {
    let mut o = entry.as_object()?.clone();
    o.insert("message".to_owned(), Value::Object(message));
    Some(Value::Object(o))
}

/// Step 1: drop thinking signatures duplicated in OpenAI Responses history.
fn dedupe_responses_signatures(entry: &Value) -> Option<Value> {
    let msg = message_of(entry)?;
    if str_of(msg, "role") != Some("assistant") {
        return None;
    }
    let payload = msg.get("providerPayload")?.as_object()?;
    if str_of(payload, "type") != Some("openaiResponsesHistory") {
        return None;
    }
    let items = payload.get("items")?.as_array()?;
    let content = msg.get("content")?.as_array()?;
    let known = |sig: &str| -> bool {
        let Some(Value::Object(item)) = session_model::json::parse(sig) else { return false };
        if let Some(enc) = str_of(&item, "encrypted_content") {
            return items.iter().any(|i| i.get("encrypted_content").and_then(Value::as_str) == Some(enc));
        }
        match str_of(&item, "id") {
            Some(id) => items.iter().any(|i| i.get("id").and_then(Value::as_str) == Some(id)),
            None => false,
        }
    };
    let mut changed = false;
    let new_content: Vec<Value> = content
        .iter()
        .map(|block| match block.as_object() {
            Some(b) if str_of(b, "type") == Some("thinking") && str_of(b, "thinkingSignature").is_some_and(known) => {
                changed = true;
                let mut b = b.clone();
                b.shift_remove("thinkingSignature");
                Value::Object(b)
            }
            _ => block.clone(),
        })
        .collect();
    if !changed {
        return None;
    }
    let mut m = msg.clone();
    m.insert("content".to_owned(), Value::Array(new_content));
    with_message(entry, m)
}

/// Step 2: MCP tool results whose full output is kept as an artifact drop `structuredContent`.
fn strip_mcp_structured_content(entry: &Value) -> Option<Value> {
    let msg = message_of(entry)?;
    if str_of(msg, "role") != Some("toolResult") {
        return None;
    }
    let details = msg.get("details")?.as_object()?;
    let has_artifact = details
        .get("meta")
        .and_then(|m| m.get("truncation"))
        .and_then(|t| t.get("artifactId"))
        .is_some_and(|a| !a.is_null());
    if !(details.contains_key("serverName")
        && details.contains_key("mcpToolName")
        && details.contains_key("structuredContent")
        && has_artifact)
    {
        return None;
    }
    let mut d = details.clone();
    d.shift_remove("structuredContent");
    let mut m = msg.clone();
    m.insert("details".to_owned(), Value::Object(d));
    with_message(entry, m)
}

/// A problem met while resolving blob references; the reference is left in place.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// The referenced blob is not in the store.
    MissingBlob {
        /// The reference string.
        reference: String,
    },
    /// A string starts with `blob:sha256:` but is not a canonical reference.
    InvalidRef {
        /// The rejected string.
        value: String,
    },
    /// Reading the blob failed.
    ReadFailed {
        /// The reference string.
        reference: String,
        /// The error message.
        error: String,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::MissingBlob { reference } => {
                write!(f, "blob {reference} is missing from the blob store; the reference is kept")
            }
            Warning::InvalidRef { value } => write!(f, "ignoring malformed blob reference {value:?}"),
            Warning::ReadFailed { reference, error } => write!(f, "cannot read blob {reference}: {error}"),
        }
    }
}

/// Returns whether any string in `value` starts with `blob:sha256:` (the cheap pre-check).
pub fn has_blob_refs(value: &Value) -> bool {
    match value {
        Value::String(s) => is_ref(s),
        Value::Array(a) => a.iter().any(has_blob_refs),
        Value::Object(o) => o.values().any(has_blob_refs),
        _ => false,
    }
}

/// Replaces blob references by their content (omp §2.7); see [`resolve_blob_refs_shared`].
pub fn resolve_blob_refs(value: &Value, store: &BlobStore) -> (Value, Vec<Warning>) {
    let (v, w) = resolve_blob_refs_shared(value, store);
    (v.unwrap_or_else(|| value.clone()), w)
}

/// Replaces blob references by their content, returning `None` when nothing changed.
///
/// Image payloads under `content` and `images` (not snapcompact `frames`) and
/// `image_generation_call` results become base64 (standard alphabet, padded); `image_url` refs
/// become the blob's bytes as UTF-8 text. A missing blob or a malformed ref is reported and left in
/// place.
pub fn resolve_blob_refs_shared(value: &Value, store: &BlobStore) -> (Option<Value>, Vec<Warning>) {
    let mut warnings = Vec::new();
    if !has_blob_refs(value) {
        return (None, warnings);
    }
    let v = resolve(value, None, store, &mut warnings);
    (v, warnings)
}

fn fetch(s: &str, store: &BlobStore, warnings: &mut Vec<Warning>) -> Option<Vec<u8>> {
    let blob = match BlobRef::parse(s) {
        Ok(b) => b,
        Err(_) => {
            warnings.push(Warning::InvalidRef { value: s.to_owned() });
            return None;
        }
    };
    match store.get(&blob) {
        Ok(Some(bytes)) => Some(bytes),
        Ok(None) => {
            warnings.push(Warning::MissingBlob { reference: s.to_owned() });
            None
        }
        Err(e) => {
            warnings.push(Warning::ReadFailed { reference: s.to_owned(), error: e.to_string() });
            None
        }
    }
}

fn resolve(v: &Value, key: Option<&str>, store: &BlobStore, warnings: &mut Vec<Warning>) -> Option<Value> {
    match v {
        Value::Array(items) => changed_items(items, |item| resolve(item, key, store, warnings)).map(Value::Array),
        Value::Object(o) => {
            if !o.values().any(has_blob_refs) {
                return None;
            }
            let image = image_position(o, key, false);
            let generated = str_of(o, "type") == Some("image_generation_call");
            let mut out: Option<Map<String, Value>> = None;
            for (i, (k, child)) in o.iter().enumerate() {
                let new = match child.as_str() {
                    Some(s) if is_ref(s) && ((image && k == "data") || (generated && k == "result")) => {
                        fetch(s, store, warnings).map(|b| Value::String(base64::encode(&b)))
                    }
                    Some(s) if is_ref(s) && k == "image_url" => {
                        fetch(s, store, warnings).map(|b| Value::String(String::from_utf8_lossy(&b).into_owned()))
                    }
                    _ => resolve(child, Some(k), store, warnings),
                };
                match (new, out.as_mut()) {
                    (Some(n), _) => {
                        out.get_or_insert_with(|| prefix_of(o, i)).insert(k.clone(), n);
                    }
                    (None, Some(m)) => {
                        m.insert(k.clone(), child.clone());
                    }
                    (None, None) => {}
                }
            }
            out.map(Value::Object)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn truncation_cuts_to_the_limit() {
        let s = "a".repeat(MAX_STRING_UNITS + 1);
        let t = truncate_large_string(&s).unwrap_or_default();
        assert_eq!(js_len(&t), MAX_STRING_UNITS);
        assert!(t.ends_with(TRUNCATION_NOTICE));
        assert_eq!(truncate_large_string(&t), None);
        assert_eq!(truncate_large_string(&"a".repeat(MAX_STRING_UNITS)), None);
    }

    #[test]
    fn truncation_drops_a_split_surrogate_pair() {
        let keep = MAX_STRING_UNITS - 47;
        let s = format!("{}{}", "a".repeat(keep - 1), "😀".repeat(10));
        let t = truncate_large_string(&format!("{s}{}", "b".repeat(MAX_STRING_UNITS))).unwrap_or_default();
        assert_eq!(js_len(&t), MAX_STRING_UNITS - 1);
        assert!(t.starts_with(&"a".repeat(keep - 1)));
        assert_eq!(&t[keep - 1..], TRUNCATION_NOTICE);
    }

    #[test]
    fn notice_is_47_units() {
        assert_eq!(js_len(TRUNCATION_NOTICE), 47);
    }

    #[test]
    fn unchanged_entries_give_none() {
        let e = json!({"type":"message","message":{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","data":"AAAA","mimeType":"image/png"}]}});
        assert_eq!(prepare_entry(&e), Prepared::default());
    }

    #[test]
    fn images_are_externalized_and_resolved() {
        let data = base64::encode(&[7u8; 2000]);
        let e = json!({"type":"message","message":{"role":"user","content":[{"type":"image","data":data,"mimeType":"image/png"}]}});
        let p = prepare_entry(&e);
        let expected_ref = BlobRef::for_bytes(&[7u8; 2000]).to_string();
        assert_eq!(p.value.as_ref().and_then(|v| v.pointer("/message/content/0/data")), Some(&json!(expected_ref)));
        assert_eq!(p.blobs.len(), 1);
        assert_eq!(p.blobs[0].mime.as_deref(), Some("image/png"));
        let store = BlobStore::in_memory();
        for b in &p.blobs {
            store.put(&b.bytes, b.mime.as_deref()).ok();
        }
        let (back, warnings) = resolve_blob_refs(p.value.as_ref().unwrap_or(&e), &store);
        assert!(warnings.is_empty());
        assert_eq!(back, e);
    }

    #[test]
    fn image_positions() {
        let big = "QUFB".repeat(300);
        // Not an image block under `content`, and an unknown key: both stay inline.
        let e =
            json!({"content":[{"type":"file","data":big,"mimeType":"image/png"}],"other":{"type":"image","data":big}});
        assert_eq!(prepare_entry(&e).value, None);
        let e = json!({"images":[{"data":big,"mimeType":"IMAGE/jpeg"}],"frames":[{"type":"image","data":big}]});
        let v = prepare_entry(&e).value.unwrap_or_default();
        assert!(v["images"][0]["data"].as_str().is_some_and(is_ref));
        assert!(v["frames"][0]["data"].as_str().is_some_and(is_ref));
        // Frames stay as refs on load.
        let store = BlobStore::in_memory();
        store.put(&base64::decode_lenient(&big), None).ok();
        let (r, _) = resolve_blob_refs(&v, &store);
        assert_eq!(r["images"][0]["data"], json!(big));
        assert!(r["frames"][0]["data"].as_str().is_some_and(is_ref));
    }

    #[test]
    fn data_urls_are_always_externalized() {
        let url = "data:image/png;base64,AAAA";
        let e = json!({"x":{"image_url":url}});
        let p = prepare_entry(&e);
        let r = BlobRef::for_bytes(url.as_bytes()).to_string();
        assert_eq!(p.value, Some(json!({"x":{"image_url":r}})));
        assert_eq!(p.blobs[0].mime, None);
        let store = BlobStore::in_memory();
        store.put(url.as_bytes(), None).ok();
        assert_eq!(resolve_blob_refs(&json!({"x":{"image_url":r}}), &store).0, e);
    }

    #[test]
    fn signed_blocks_and_signature_keys_are_verbatim() {
        let big = "x".repeat(MAX_STRING_UNITS + 10);
        for block in [
            json!({"type":"thinking","thinking":big,"thinkingSignature":"s"}),
            json!({"type":"text","text":big,"textSignature":"s"}),
            json!({"type":"toolCall","arguments":{"a":big},"thoughtSignature":"s"}),
            json!({"type":"redactedThinking","data":big}),
            json!({"type":"reasoning","summary":big,"encrypted_content":"e"}),
            json!({"type":"anthropicCompaction","content":big,"jsonlEvents":[]}),
            json!({"thinkingSignature":big,"thoughtSignature":big,"textSignature":big}),
        ] {
            assert_eq!(prepare_entry(&block).value, None, "{}", &block.to_string()[..60]);
        }
        let unsigned = json!({"type":"thinking","thinking":big,"thinkingSignature":""});
        assert!(prepare_entry(&unsigned).value.is_some());
        let compaction = json!({"anthropicCompaction":{"content":big}});
        assert_eq!(prepare_entry(&compaction).value, None);
    }

    #[test]
    fn jsonl_events_dropped_and_line_count_recomputed() {
        let big = format!("a\nb\n{}", "c".repeat(MAX_STRING_UNITS));
        let e = json!({"content":big,"lineCount":999,"jsonlEvents":[1]});
        let v = prepare_entry(&e).value.unwrap_or_default();
        assert_eq!(v.get("jsonlEvents"), None);
        // Two newlines of the content plus the two of the notice.
        assert_eq!(v["lineCount"], json!(5));
        let e = json!({"content":"a\nb","lineCount":7,"jsonlEvents":[1]});
        assert_eq!(prepare_entry(&e).value, Some(json!({"content":"a\nb","lineCount":2})));
        let e = json!({"content":"a\nb","lineCount":7});
        assert_eq!(prepare_entry(&e).value, None);
    }

    #[test]
    fn image_generation_results() {
        let r = "QUJD".repeat(300);
        let e = json!({"type":"image_generation_call","result":r});
        let v = prepare_entry(&e).value.unwrap_or_default();
        assert!(v["result"].as_str().is_some_and(is_ref));
    }

    #[test]
    fn responses_signatures_deduped() {
        let sig = json!({"type":"reasoning","id":"rs_1","encrypted_content":"ENC"}).to_string();
        let e = json!({"type":"message","message":{"role":"assistant",
            "content":[{"type":"thinking","thinking":"t","thinkingSignature":sig},{"type":"thinking","thinking":"u","thinkingSignature":"{\"id\":\"rs_9\"}"}],
            "providerPayload":{"type":"openaiResponsesHistory","items":[{"type":"reasoning","id":"other","encrypted_content":"ENC"}]}}});
        let v = prepare_entry(&e).value.unwrap_or_default();
        assert_eq!(v.pointer("/message/content/0/thinkingSignature"), None);
        assert!(v.pointer("/message/content/1/thinkingSignature").is_some());
    }

    #[test]
    fn mcp_structured_content_dropped() {
        let e = json!({"type":"message","message":{"role":"toolResult","details":{"serverName":"s","mcpToolName":"t","structuredContent":{"a":1},"meta":{"truncation":{"artifactId":"x"}}}}});
        let v = prepare_entry(&e).value.unwrap_or_default();
        assert_eq!(v.pointer("/message/details/structuredContent"), None);
        assert_eq!(v.pointer("/message/details/serverName"), Some(&json!("s")));
        let e = json!({"type":"message","message":{"role":"toolResult","details":{"serverName":"s","mcpToolName":"t","structuredContent":{"a":1}}}});
        assert_eq!(prepare_entry(&e).value, None);
    }

    #[test]
    fn resolve_warns_and_keeps_refs() {
        let missing = BlobRef::for_bytes(b"nope").to_string();
        let bad = "blob:sha256:../../x";
        let e = json!({"content":[{"type":"image","data":missing},{"type":"image","data":bad}]});
        let (v, w) = resolve_blob_refs(&e, &BlobStore::in_memory());
        assert_eq!(v, e);
        assert_eq!(w, vec![Warning::MissingBlob { reference: missing }, Warning::InvalidRef { value: bad.to_owned() }]);
    }

    #[test]
    fn key_order_is_preserved() {
        let big = "z".repeat(MAX_STRING_UNITS + 1);
        let e = json!({"a":1,"b":big,"c":{"jsonlEvents":1,"d":2},"e":3});
        let v = prepare_entry(&e).value.unwrap_or_default();
        let keys: Vec<&String> = v.as_object().map(|o| o.keys().collect()).unwrap_or_default();
        assert_eq!(keys, ["a", "b", "c", "e"]);
        assert_eq!(v["c"], json!({"d":2}));
    }
}
