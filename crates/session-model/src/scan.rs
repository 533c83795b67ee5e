//! The JSON scanner: validates text exactly as `JSON.parse` accepts it and exposes
//! the members of objects as raw text spans, without building value trees.
//!
//! Loading a session and listing sessions read every byte but need only a handful of
//! fields, so this module only checks the grammar (iteratively, so deep nesting cannot
//! exhaust the stack; strings 64 bytes at a time, see `strings.rs`) and hands out
//! borrowed spans;
//! strings are decoded on demand. [`Obj`] splits one object into its members;
//! [`Tape`] records the spans of a whole line's values down to a depth in the same
//! pass that validates it, for readers of nested fields. Unlike `serde_json`, it
//! accepts escaped lone surrogates (`"\udc00"`), as JavaScript does; they decode to
//! U+FFFD.
//!
//! ```
//! use session_model::scan::{Obj, decode_string};
//! let (obj, raw) = Obj::parse_line(r#" {"type":"label","id":"a\u0062","n":[1,{"x":null}]} "#).unwrap();
//! let obj = obj.unwrap();
//! assert_eq!(obj.get("n"), Some(r#"[1,{"x":null}]"#));
//! assert_eq!(obj.get_str("id").as_deref(), Some("ab"));
//! assert!(raw.starts_with('{') && raw.ends_with('}'));
//! assert!(Obj::parse_line("{\"a\":").is_err());
//! ```

use std::borrow::Cow;

use crate::strings::{Checked, Quotes, StringEnds};

pub use crate::lenient::{Lenient, LenientValues, Skipped};
pub use crate::strings::ScanError;

/// The kind of a JSON value, from its first byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `null`.
    Null,
    /// `false`.
    False,
    /// `true`.
    True,
    /// A number.
    Number,
    /// A string.
    String,
    /// An array.
    Array,
    /// An object.
    Object,
}

/// Returns the kind of a validated raw value.
pub fn kind(raw: &str) -> Kind {
    match raw.as_bytes().first() {
        Some(b'n') => Kind::Null,
        Some(b'f') => Kind::False,
        Some(b't') => Kind::True,
        Some(b'"') => Kind::String,
        Some(b'[') => Kind::Array,
        Some(b'{') => Kind::Object,
        _ => Kind::Number,
    }
}

/// Returns whether a validated raw value is truthy in JavaScript.
pub fn truthy(raw: &str) -> bool {
    match kind(raw) {
        Kind::Null | Kind::False => false,
        Kind::True | Kind::Array | Kind::Object => true,
        Kind::String => raw.len() > 2,
        Kind::Number => raw.parse::<f64>().map(|f| f != 0.0 && !f.is_nan()).unwrap_or(true),
    }
}

/// Returns whether `b` is JSON whitespace.
pub(crate) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Skips JSON whitespace from `pos`.
pub fn skip_ws(b: &[u8], mut pos: usize) -> usize {
    while pos < b.len() && is_ws(b[pos]) {
        pos += 1;
    }
    pos
}

/// Returns whether any byte of `w` is `"`, `\\` or below 0x20 (exact for every byte
/// value: the control test only flags bytes whose high bit is clear).
#[inline]
fn has_special(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let quote = zero(w ^ (ONES * u64::from(b'"')));
    let backslash = zero(w ^ (ONES * u64::from(b'\\')));
    let control = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    (quote | backslash | control) != 0
}

/// Returns the position of the first byte at or after `from` that plain string
/// content cannot hold (`"`, `\\` or a control character below 0x20), or `b.len()`.
///
/// The first 64 bytes are read eight at a time (keys, ids, values and the
/// text between two escaped newlines end there; a SIMD search costs more to start).
/// Past them, quotes and backslashes are found with SIMD (`memchr2`) and the run before
/// one is proven free of control characters by one vectorised pass (they are rare).
#[inline]
pub(crate) fn plain_run_end(b: &[u8], from: usize) -> usize {
    let mut pos = from;
    let short_end = b.len().min(from.saturating_add(SHORT_RUN));
    while pos + 8 <= short_end {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[pos..pos + 8]);
        if has_special(u64::from_le_bytes(w)) {
            return pos + b[pos..pos + 8].iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20).unwrap_or(8);
        }
        pos += 8;
    }
    if short_end - pos < 8 && short_end == b.len() {
        let tail = &b[pos..];
        return pos + tail.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20).unwrap_or(tail.len());
    }
    let rest = &b[pos..];
    let stop = memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len());
    let run = &rest[..stop];
    let at = if run.iter().fold(u8::MAX, |m, &c| m.min(c)) >= 0x20 {
        stop
    } else {
        run.iter().position(|&c| c < 0x20).unwrap_or(stop)
    };
    pos + at
}

/// How many bytes [`plain_run_end`] reads word by word before it searches.
const SHORT_RUN: usize = 64;

fn skip_digits(b: &[u8], mut pos: usize) -> usize {
    while pos < b.len() && b[pos].is_ascii_digit() {
        pos += 1;
    }
    pos
}

fn skip_number(b: &[u8], mut pos: usize) -> Result<usize, ScanError> {
    if b[pos] == b'-' {
        pos += 1;
    }
    match b.get(pos) {
        None => return Err(ScanError::Incomplete),
        Some(b'0') => pos += 1,
        Some(b'1'..=b'9') => pos = skip_digits(b, pos),
        Some(_) => return Err(ScanError::Syntax),
    }
    if b.get(pos) == Some(&b'.') {
        pos += 1;
        match b.get(pos) {
            None => return Err(ScanError::Incomplete),
            Some(c) if c.is_ascii_digit() => pos = skip_digits(b, pos),
            Some(_) => return Err(ScanError::Syntax),
        }
    }
    if matches!(b.get(pos), Some(b'e' | b'E')) {
        pos += 1;
        if matches!(b.get(pos), Some(b'+' | b'-')) {
            pos += 1;
        }
        match b.get(pos) {
            None => return Err(ScanError::Incomplete),
            Some(c) if c.is_ascii_digit() => pos = skip_digits(b, pos),
            Some(_) => return Err(ScanError::Syntax),
        }
    }
    Ok(pos)
}

fn skip_literal(b: &[u8], pos: usize, lit: &[u8]) -> Result<usize, ScanError> {
    for (i, &c) in lit.iter().enumerate() {
        match b.get(pos + i) {
            None => return Err(ScanError::Incomplete),
            Some(&x) if x == c => {}
            Some(_) => return Err(ScanError::Syntax),
        }
    }
    Ok(pos + lit.len())
}

/// Validates one value starting at `pos` (no leading whitespace); returns its end.
pub fn skip_value(b: &[u8], pos: usize) -> Result<usize, ScanError> {
    walk_value(b, pos, &mut Checked::new(pos))
}

/// [`skip_value`] with the strings' ends found by `strings`, which must have begun
/// at or before `pos`, outside any string.
fn walk_value(b: &[u8], pos: usize, strings: &mut impl StringEnds) -> Result<usize, ScanError> {
    walk_recording(b, pos, strings, &mut NoRecord)
}

/// Where a walk notes the values it meets (see [`Tape`]).
trait Recorder {
    /// A value of `depth` (0: the walked value itself) starts at `start`, under
    /// `parent` with member name `key` (its raw span); returns its id, or
    /// [`NOT_RECORDED`].
    fn open(&mut self, parent: u32, key: Option<(usize, usize)>, start: usize, depth: usize) -> u32;
    /// The value `id` ends at `end`.
    fn close(&mut self, id: u32, end: usize);
}

/// The id of a value a [`Recorder`] did not keep.
const NOT_RECORDED: u32 = u32::MAX;

/// A [`Recorder`] that keeps nothing: the plain validating walk.
struct NoRecord;

impl Recorder for NoRecord {
    #[inline(always)]
    fn open(&mut self, _: u32, _: Option<(usize, usize)>, _: usize, _: usize) -> u32 {
        NOT_RECORDED
    }
    #[inline(always)]
    fn close(&mut self, _: u32, _: usize) {}
}

/// The validating walk, telling `rec` where each value starts and ends.
fn walk_recording(
    b: &[u8],
    pos: usize,
    strings: &mut impl StringEnds,
    rec: &mut impl Recorder,
) -> Result<usize, ScanError> {
    thread_local! {
        /// The container stack, kept between walks so that a walk allocates nothing.
        static STACK: std::cell::Cell<Vec<(bool, u32)>> = const { std::cell::Cell::new(Vec::new()) };
    }
    // Containers are tracked on an explicit stack: (is an object, recorded id).
    let mut stack = STACK.take();
    stack.clear();
    let result = walk_with_stack(b, pos, strings, rec, &mut stack);
    STACK.set(stack);
    result
}

/// [`walk_recording`] on a given (empty) container stack.
fn walk_with_stack(
    b: &[u8],
    pos: usize,
    strings: &mut impl StringEnds,
    rec: &mut impl Recorder,
    stack: &mut Vec<(bool, u32)>,
) -> Result<usize, ScanError> {
    let mut pos = pos;
    let mut key: Option<(usize, usize)> = None;
    loop {
        // Parse one value at `pos`.
        let c = *b.get(pos).ok_or(ScanError::Incomplete)?;
        let parent = stack.last().map_or(NOT_RECORDED, |e| e.1);
        let id = rec.open(parent, key.take(), pos, stack.len());
        let mut end = match c {
            b'"' => strings.string_end(b, pos)?,
            b'-' | b'0'..=b'9' => {
                let end = skip_number(b, pos)?;
                strings.number(&b[pos..end]);
                end
            }
            b't' => skip_literal(b, pos, b"true")?,
            b'f' => skip_literal(b, pos, b"false")?,
            b'n' => skip_literal(b, pos, b"null")?,
            b'[' => {
                let p = skip_ws(b, pos + 1);
                match b.get(p) {
                    None => return Err(ScanError::Incomplete),
                    Some(b']') => p + 1,
                    Some(_) => {
                        stack.push((false, id));
                        pos = p;
                        continue;
                    }
                }
            }
            b'{' => {
                let p = skip_ws(b, pos + 1);
                match b.get(p) {
                    None => return Err(ScanError::Incomplete),
                    Some(b'}') => p + 1,
                    Some(b'"') => {
                        let (kend, v) = object_key(b, p, strings)?;
                        key = Some((p, kend));
                        stack.push((true, id));
                        pos = v;
                        continue;
                    }
                    Some(_) => return Err(ScanError::Syntax),
                }
            }
            _ => return Err(ScanError::Syntax),
        };
        rec.close(id, end);
        // Close containers / move to the next element.
        loop {
            let Some(&(is_obj, open)) = stack.last() else {
                return Ok(end);
            };
            let p = skip_ws(b, end);
            match b.get(p) {
                None => return Err(ScanError::Incomplete),
                Some(b',') => {
                    let p = skip_ws(b, p + 1);
                    if is_obj {
                        match b.get(p) {
                            None => return Err(ScanError::Incomplete),
                            Some(b'"') => {
                                let (kend, v) = object_key(b, p, strings)?;
                                key = Some((p, kend));
                                pos = v;
                            }
                            Some(_) => return Err(ScanError::Syntax),
                        }
                    } else {
                        pos = p;
                    }
                    break;
                }
                Some(b'}') if is_obj => {
                    stack.pop();
                    end = p + 1;
                    rec.close(open, end);
                }
                Some(b']') if !is_obj => {
                    stack.pop();
                    end = p + 1;
                    rec.close(open, end);
                }
                Some(_) => return Err(ScanError::Syntax),
            }
        }
    }
}

/// Skips one value of text already validated (a span of a parsed line) without
/// checking it again; returns its end. Strings are crossed with the block index
/// (`strings::Quotes`). On text that is not valid JSON it still never reads out of
/// bounds and always moves forward, but the span it finds is meaningless.
#[cfg(test)]
pub(crate) fn skip_value_validated(b: &[u8], pos: usize) -> Result<usize, ScanError> {
    skip_validated(b, pos, &mut Quotes::new(pos))
}

/// Skips one value of text already validated (see `skip_value_validated`), with the
/// strings' ends found by `quotes`, which must have begun at or before `pos`.
fn skip_validated(b: &[u8], pos: usize, quotes: &mut Quotes) -> Result<usize, ScanError> {
    match b.get(pos) {
        None => Err(ScanError::Incomplete),
        Some(b'"') => quotes.string_end(b, pos),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut p = pos;
            while let Some(&c) = b.get(p) {
                match c {
                    b'"' => {
                        p = quotes.string_end(b, p)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return Ok(p + 1);
                        }
                    }
                    _ => {}
                }
                p += 1;
            }
            Err(ScanError::Incomplete)
        }
        Some(_) => {
            // A number or a literal: up to the next delimiter.
            let len = b[pos..].iter().position(|&c| matches!(c, b',' | b'}' | b']') || is_ws(c));
            Ok(len.map_or(b.len(), |n| pos + n.max(1)))
        }
    }
}

/// Validates `"key" :` at `pos`; returns the key's end and the position of the value.
fn object_key(b: &[u8], pos: usize, strings: &mut impl StringEnds) -> Result<(usize, usize), ScanError> {
    let kend = strings.string_end(b, pos)?;
    let p = skip_ws(b, kend);
    match b.get(p) {
        None => Err(ScanError::Incomplete),
        Some(b':') => Ok((kend, skip_ws(b, p + 1))),
        Some(_) => Err(ScanError::Syntax),
    }
}

/// Parses `text` as `JSON.parse` does (one value, surrounding whitespace allowed)
/// and returns the value's raw span.
pub fn parse_whole(text: &str) -> Result<&str, ScanError> {
    let b = text.as_bytes();
    let start = skip_ws(b, 0);
    let end = walk_value(b, start, &mut Checked::new(start))?;
    if skip_ws(b, end) != b.len() {
        return Err(ScanError::Syntax);
    }
    Ok(&text[start..end])
}

/// Validates the object that starts at `start` (its `{`) and returns the raw values
/// of the top-level members named in `keys` (the last occurrence wins, as in
/// JavaScript) and the object's end. Allocates nothing.
///
/// ```
/// let text = r#"{"id":"a","x":{"id":"nested"},"id":"b"}"#;
/// let ([id, x, t], end) = session_model::scan::object_fields(text, 0, ["id", "x", "type"]).unwrap();
/// assert_eq!((id, x, t, end), (Some("\"b\""), Some(r#"{"id":"nested"}"#), None, text.len()));
/// ```
pub fn object_fields<'a, const N: usize>(
    raw: &'a str,
    start: usize,
    keys: [&str; N],
) -> Result<([Option<&'a str>; N], usize), ScanError> {
    let b = raw.as_bytes();
    let mut out = [None; N];
    let end = walk_members(raw, start, &mut Checked::new(start), &mut |key, vstart, strings| {
        let vend = walk_value(b, vstart, strings)?;
        if let Some(i) = keys.iter().position(|k| key_eq(key, k)) {
            out[i] = Some(&raw[vstart..vend]);
        }
        Ok(vend)
    })?;
    Ok((out, end))
}

/// [`object_fields`] for a session record, which also needs one member of a nested
/// object: the members named in `keys`, and when the member `keys[nested]` is an
/// object, its member `inner` (the last occurrence of each wins, as in JavaScript;
/// `inner` is `None` when the last `keys[nested]` is no object or lacks it). The
/// whole object is validated in the same single pass.
///
/// ```
/// let text = r#"{"type":"message","message":{"role":"user","content":"hi"}}"#;
/// let ([ty, m], role, end) = session_model::scan::record_fields(text, 0, ["type", "message"], 1, "role").unwrap();
/// assert_eq!((ty, role, end), (Some("\"message\""), Some("\"user\""), text.len()));
/// assert!(m.is_some_and(|m| m.starts_with("{\"role\"")));
/// ```
pub fn record_fields<'a, const N: usize>(
    raw: &'a str,
    start: usize,
    keys: [&str; N],
    nested: usize,
    inner: &str,
) -> Result<RecordFields<'a, N>, ScanError> {
    record_fields_with(raw, start, keys, nested, inner, &mut Checked::new(start))
}

/// [`record_fields`] with the walk's string index `strings` (begun at `start`), which
/// then also says whether every number of the object was plain.
pub(crate) fn record_fields_with<'a, const N: usize>(
    raw: &'a str,
    start: usize,
    keys: [&str; N],
    nested: usize,
    inner: &str,
    strings: &mut Checked,
) -> Result<RecordFields<'a, N>, ScanError> {
    let b = raw.as_bytes();
    let mut out = [None; N];
    let mut found = None;
    let end = walk_members(raw, start, strings, &mut |key, vstart, strings| {
        let Some(i) = keys.iter().position(|k| key_eq(key, k)) else {
            return walk_value(b, vstart, strings);
        };
        let vend = if i == nested && b.get(vstart) == Some(&b'{') {
            let mut member = None;
            let vend = walk_members(raw, vstart, strings, &mut |k, vs, strings| {
                let ve = walk_value(b, vs, strings)?;
                if key_eq(k, inner) {
                    member = Some(&raw[vs..ve]);
                }
                Ok(ve)
            })?;
            found = member;
            vend
        } else {
            if i == nested {
                found = None;
            }
            walk_value(b, vstart, strings)?
        };
        out[i] = Some(&raw[vstart..vend]);
        Ok(vend)
    })?;
    Ok((out, found, end))
}

/// What [`record_fields`] finds: the members asked for, the nested member, and where
/// the object ends.
pub type RecordFields<'a, const N: usize> = ([Option<&'a str>; N], Option<&'a str>, usize);

/// Validates the object that starts at `start` (its `{`), handing each member's raw
/// key and the position of its value to `on`, which validates the value and returns
/// its end; returns the object's end. `strings` must have begun at or before `start`.
fn walk_members<'a, S: StringEnds>(
    raw: &'a str,
    start: usize,
    strings: &mut S,
    on: &mut dyn FnMut(&'a str, usize, &mut S) -> Result<usize, ScanError>,
) -> Result<usize, ScanError> {
    let b = raw.as_bytes();
    match b.get(start) {
        None => return Err(ScanError::Incomplete),
        Some(b'{') => {}
        Some(_) => return Err(ScanError::Syntax),
    }
    let mut p = skip_ws(b, start + 1);
    match b.get(p) {
        None => return Err(ScanError::Incomplete),
        Some(b'}') => return Ok(p + 1),
        _ => {}
    }
    loop {
        match b.get(p) {
            None => return Err(ScanError::Incomplete),
            Some(b'"') => {}
            Some(_) => return Err(ScanError::Syntax),
        }
        let kend = strings.string_end(b, p)?;
        let key = &raw[p..kend];
        p = skip_ws(b, kend);
        match b.get(p) {
            None => return Err(ScanError::Incomplete),
            Some(b':') => {}
            Some(_) => return Err(ScanError::Syntax),
        }
        let vstart = skip_ws(b, p + 1);
        let vend = on(key, vstart, strings)?;
        p = skip_ws(b, vend);
        match b.get(p) {
            None => return Err(ScanError::Incomplete),
            Some(b',') => p = skip_ws(b, p + 1),
            Some(b'}') => return Ok(p + 1),
            Some(_) => return Err(ScanError::Syntax),
        }
    }
}

/// A line validated as `JSON.parse` would, with the spans of its values down to a
/// depth recorded on the way: nested members and elements are then found without
/// walking the text again.
///
/// Ids are indexes in document order; the line's own value is id 0.
///
/// ```
/// use session_model::scan::Tape;
/// let t = Tape::parse(r#" {"type":"message","message":{"role":"user","content":[{"type":"text","text":"hi"}]}} "#, 4).unwrap();
/// let message = t.get(0, "message").unwrap();
/// assert_eq!(t.raw(t.get(message, "role").unwrap()), r#""user""#);
/// let content = t.get(message, "content").unwrap();
/// let blocks: Vec<&str> = t.children(content).map(|b| t.raw(t.get(b, "text").unwrap())).collect();
/// assert_eq!(blocks, [r#""hi""#]);
/// assert!(Tape::parse("{\"a\":", 2).is_err());
/// ```
#[derive(Debug)]
pub struct Tape<'a> {
    text: &'a str,
    nodes: Vec<Node>,
    depth: usize,
}

/// One recorded value of a [`Tape`].
#[derive(Clone, Copy, Debug)]
struct Node {
    /// The member name's raw span (`start == end`: an array element or the root).
    key: (u32, u32),
    start: u32,
    end: u32,
    /// The id after this value's recorded descendants: its next sibling, if any.
    after: u32,
}

thread_local! {
    /// The node list of the last tape dropped on this thread, reused by the next one
    /// (a listing parses one tape per line).
    static SPARE_NODES: std::cell::Cell<Vec<Node>> = const { std::cell::Cell::new(Vec::new()) };
}

impl Drop for Tape<'_> {
    fn drop(&mut self) {
        SPARE_NODES.set(std::mem::take(&mut self.nodes));
    }
}

impl Recorder for Tape<'_> {
    fn open(&mut self, parent: u32, key: Option<(usize, usize)>, start: usize, depth: usize) -> u32 {
        if depth > self.depth || (depth > 0 && parent == NOT_RECORDED) {
            return NOT_RECORDED;
        }
        let (ks, ke) = key.unwrap_or((0, 0));
        let id = self.nodes.len() as u32;
        let node = Node { key: (ks as u32, ke as u32), start: start as u32, end: start as u32, after: id + 1 };
        self.nodes.push(node);
        id
    }

    fn close(&mut self, id: u32, end: usize) {
        let after = self.nodes.len() as u32;
        if let Some(n) = self.nodes.get_mut(id as usize) {
            n.end = end as u32;
            n.after = after;
        }
    }
}

impl<'a> Tape<'a> {
    /// Validates `line` (one JSON value, surrounding whitespace allowed) and records
    /// its values down to `depth` (the value itself is depth 0, its members 1, …).
    /// Lines of 4 GiB or more are refused as [`ScanError::Syntax`].
    pub fn parse(line: &'a str, depth: usize) -> Result<Tape<'a>, ScanError> {
        Tape::parse_with(line, depth, Checked::new)
    }

    /// [`Tape::parse`] for text already validated (a span of a parsed line): string
    /// contents are not checked again. On text that is not valid JSON the spans are
    /// meaningless, but nothing panics.
    pub fn parse_validated(raw: &'a str, depth: usize) -> Result<Tape<'a>, ScanError> {
        Tape::parse_with(raw, depth, Quotes::new)
    }

    fn parse_with<S: StringEnds>(line: &'a str, depth: usize, strings: fn(usize) -> S) -> Result<Tape<'a>, ScanError> {
        if u32::try_from(line.len()).is_err() {
            return Err(ScanError::Syntax);
        }
        let b = line.as_bytes();
        let start = skip_ws(b, 0);
        let mut nodes = SPARE_NODES.take();
        nodes.clear();
        let mut tape = Tape { text: line, nodes, depth };
        let end = walk_recording(b, start, &mut strings(start), &mut tape)?;
        if skip_ws(b, end) != b.len() {
            return Err(ScanError::Syntax);
        }
        Ok(tape)
    }

    /// The raw text of value `id` (the whole value, without surrounding whitespace).
    pub fn raw(&self, id: usize) -> &'a str {
        self.nodes.get(id).map_or("", |n| &self.text[n.start as usize..n.end as usize])
    }

    /// The ids of the members or elements of value `id`, in order (none beyond the
    /// recorded depth).
    pub fn children(&self, id: usize) -> impl Iterator<Item = usize> + '_ {
        // Descendants follow their parent; each child's `after` is its next sibling.
        let end = self.nodes.get(id).map_or(id + 1, |n| n.after as usize);
        let mut next = id + 1;
        std::iter::from_fn(move || {
            if next >= end {
                return None;
            }
            let child = next;
            next = self.nodes[child].after as usize;
            Some(child)
        })
    }

    /// The member `key` of object `id` (the last one, as in JavaScript).
    pub fn get(&self, id: usize, key: &str) -> Option<usize> {
        // `children`, unrolled: lookups are the listing's inner loop.
        let end = self.nodes.get(id)?.after as usize;
        let mut child = id + 1;
        let mut found = None;
        while let Some(n) = self.nodes.get(child).filter(|_| child < end) {
            let (ks, ke) = (n.key.0 as usize, n.key.1 as usize);
            // A raw key (quotes included) is at least two bytes longer than its value.
            if ke >= ks + key.len() + 2 && key_eq(&self.text[ks..ke], key) {
                found = Some(child);
            }
            child = n.after as usize;
        }
        found
    }

    /// The decoded string value of member `key` of object `id`, if it is a string.
    pub fn get_str(&self, id: usize, key: &str) -> Option<Cow<'a, str>> {
        self.get(id, key).and_then(|c| decode_string(self.raw(c)))
    }
}

/// The members of one object, as raw spans. Duplicate keys: the last one wins, as
/// in JavaScript.
#[derive(Debug, Default)]
pub struct Obj<'a> {
    members: Vec<(&'a str, &'a str)>,
}

impl<'a> Obj<'a> {
    /// Splits a raw object into members, validating it. Returns `None` if `raw` is
    /// not exactly one object.
    pub fn parse(raw: &'a str) -> Option<Obj<'a>> {
        let (obj, end) = Obj::parse_at(raw, 0)?;
        (skip_ws(raw.as_bytes(), end) == raw.len()).then_some(obj)
    }

    /// Splits a raw object that was already validated (a member of a parsed line)
    /// into members without checking it again. Returns `None` if `raw` does not start
    /// with an object; on text that is not valid JSON the members are meaningless,
    /// but nothing panics.
    pub fn parse_validated(raw: &'a str) -> Option<Obj<'a>> {
        let b = raw.as_bytes();
        if b.first() != Some(&b'{') {
            return None;
        }
        let mut members = Vec::new();
        let mut quotes = Quotes::new(0);
        let mut p = skip_ws(b, 1);
        while b.get(p) == Some(&b'"') {
            let kend = quotes.string_end(b, p).ok()?;
            let key = raw.get(p..kend)?;
            p = skip_ws(b, kend);
            if b.get(p) != Some(&b':') {
                return None;
            }
            let vstart = skip_ws(b, p + 1);
            let vend = skip_validated(b, vstart, &mut quotes).ok()?;
            members.push((key, raw.get(vstart..vend)?));
            p = skip_ws(b, vend);
            match b.get(p) {
                Some(b',') => p = skip_ws(b, p + 1),
                _ => break,
            }
        }
        Some(Obj { members })
    }

    /// Parses one JSON text that must be a whole line as `JSON.parse` would: an
    /// object yields its members (validated in one pass); `Err` if the line is not
    /// one JSON value; `Ok(None)` for a valid non-object (with its raw span).
    pub fn parse_line(line: &'a str) -> Result<(Option<Obj<'a>>, &'a str), ScanError> {
        let b = line.as_bytes();
        let start = skip_ws(b, 0);
        if b.get(start) == Some(&b'{') {
            let (obj, end) = Obj::parse_at(line, start).ok_or(ScanError::Syntax)?;
            if skip_ws(b, end) != b.len() {
                return Err(ScanError::Syntax);
            }
            return Ok((Some(obj), &line[start..end]));
        }
        parse_whole(line).map(|raw| (None, raw))
    }

    /// Parses (and validates) an object starting at `start`; returns it and its end.
    fn parse_at(raw: &'a str, start: usize) -> Option<(Obj<'a>, usize)> {
        let b = raw.as_bytes();
        if b.get(start) != Some(&b'{') {
            return None;
        }
        let mut members = Vec::new();
        let mut strings = Checked::new(start);
        let mut p = skip_ws(b, start + 1);
        if b.get(p) == Some(&b'}') {
            return Some((Obj { members }, p + 1));
        }
        loop {
            if b.get(p) != Some(&b'"') {
                return None;
            }
            let kend = strings.string_end(b, p).ok()?;
            let key = &raw[p..kend];
            p = skip_ws(b, kend);
            if b.get(p) != Some(&b':') {
                return None;
            }
            let vstart = skip_ws(b, p + 1);
            let vend = walk_value(b, vstart, &mut strings).ok()?;
            members.push((key, &raw[vstart..vend]));
            p = skip_ws(b, vend);
            match b.get(p) {
                Some(b',') => p = skip_ws(b, p + 1),
                Some(b'}') => return Some((Obj { members }, p + 1)),
                _ => return None,
            }
        }
    }

    /// Returns the raw value of `key` (the last occurrence).
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.members.iter().rev().find(|(k, _)| key_eq(k, key)).map(|(_, v)| *v)
    }

    /// Returns the decoded string value of `key`, if it is a string.
    pub fn get_str(&self, key: &str) -> Option<Cow<'a, str>> {
        self.get(key).and_then(decode_string)
    }
}

fn key_eq(raw_key: &str, key: &str) -> bool {
    let inner = &raw_key.as_bytes()[1..raw_key.len() - 1];
    let key = key.as_bytes();
    let has_escape = |b: &[u8]| b.contains(&b'\\');
    // Every escape decodes to fewer bytes than it takes: a raw key as long as `key`
    // matches only without escapes, and only a longer one with an escape can decode to it.
    match inner.len().cmp(&key.len()) {
        std::cmp::Ordering::Equal => inner == key && !has_escape(inner),
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Greater => {
            // A first byte that is not a backslash decodes to itself.
            if inner[0] != b'\\' && key.first() != Some(&inner[0]) {
                return false;
            }
            has_escape(inner) && decode_string(raw_key).is_some_and(|k| k.as_bytes() == key)
        }
    }
}

/// Iterates the elements of a raw array (already validated).
pub fn array_elements(raw: &str) -> Vec<&str> {
    let b = raw.as_bytes();
    let mut out = Vec::new();
    if b.first() != Some(&b'[') {
        return out;
    }
    let mut quotes = Quotes::new(0);
    let mut p = skip_ws(b, 1);
    if b.get(p) == Some(&b']') {
        return out;
    }
    loop {
        let Ok(end) = skip_validated(b, p, &mut quotes) else { return out };
        let Some(element) = raw.get(p..end) else { return out };
        out.push(element);
        p = skip_ws(b, end);
        match b.get(p) {
            Some(b',') => p = skip_ws(b, p + 1),
            _ => return out,
        }
    }
}

/// Decodes a raw JSON string (with quotes). Returns `None` if `raw` is not a string.
pub fn decode_string(raw: &str) -> Option<Cow<'_, str>> {
    if raw.len() < 2 || !raw.starts_with('"') || !raw.ends_with('"') {
        return None;
    }
    let inner = &raw[1..raw.len() - 1];
    if !inner.contains('\\') {
        return Some(Cow::Borrowed(inner));
    }
    Some(Cow::Owned(unescape(inner)))
}

/// Resolves JSON escapes in `inner` (text between the quotes). Invalid escapes are
/// kept verbatim; a lone surrogate (which a JavaScript string holds and a Rust one
/// cannot) becomes its stand-in ([`crate::js::lone_surrogate_char`]), which the
/// serializer writes back as the same escape.
pub fn unescape(inner: &str) -> String {
    let mut out = String::with_capacity(inner.len());
    unescape_into(inner, &mut out);
    out
}

/// Appends the decoded string value of a raw JSON string to `out`; `false` (and
/// nothing appended) when `raw` is not a string. Decodes straight into `out`, with
/// no intermediate string.
pub fn push_decoded(raw: &str, out: &mut String) -> bool {
    if raw.len() < 2 || !raw.starts_with('"') || !raw.ends_with('"') {
        return false;
    }
    unescape_into(&raw[1..raw.len() - 1], out);
    true
}

/// [`unescape`], appending to `out`.
pub(crate) fn unescape_into(inner: &str, out: &mut String) {
    out.reserve(inner.len());
    let b = inner.as_bytes();
    let mut i = 0;
    // Runs without a backslash are copied whole; escapes are ASCII.
    while let Some(k) = memchr::memchr(b'\\', &b[i..]) {
        let at = i + k;
        out.push_str(&inner[i..at]);
        let Some(&e) = b.get(at + 1) else {
            out.push('\\');
            return;
        };
        i = at + 2;
        match e {
            b'"' => out.push('"'),
            b'\\' => out.push('\\'),
            b'/' => out.push('/'),
            b'b' => out.push('\u{8}'),
            b'f' => out.push('\u{c}'),
            b'n' => out.push('\n'),
            b'r' => out.push('\r'),
            b't' => out.push('\t'),
            b'u' => {
                let Some(hi) = hex4(b, at + 2) else {
                    out.push_str("\\u");
                    continue;
                };
                i = at + 6;
                if (0xD800..0xDC00).contains(&hi) {
                    // A high surrogate: combine with a following low one.
                    if b.get(at + 6) == Some(&b'\\')
                        && b.get(at + 7) == Some(&b'u')
                        && let Some(lo) = hex4(b, at + 8)
                        && (0xDC00..0xE000).contains(&lo)
                    {
                        i = at + 12;
                        let cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                        out.push(char::from_u32(cp).unwrap_or('\u{fffd}'));
                        continue;
                    }
                    out.push(crate::js::lone_surrogate_char(hi));
                } else if (0xDC00..0xE000).contains(&hi) {
                    out.push(crate::js::lone_surrogate_char(hi));
                } else {
                    out.push(char::from_u32(hi).unwrap_or('\u{fffd}'));
                }
            }
            _ => {
                // Not an escape: keep the backslash; the character after it starts
                // the next run.
                out.push('\\');
                i = at + 1;
            }
        }
    }
    out.push_str(&inner[i..]);
}

fn hex4(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 4)?;
    let s = std::str::from_utf8(s).ok()?;
    if !s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(s, 16).ok()
}

/// Returns `String(value)` for a validated raw value, as `Array.prototype.join`
/// converts elements (`null` becomes the empty string).
pub fn js_join_string(raw: &str) -> String {
    match kind(raw) {
        Kind::Null => String::new(),
        Kind::False => "false".into(),
        Kind::True => "true".into(),
        Kind::String => decode_string(raw).map(Cow::into_owned).unwrap_or_default(),
        Kind::Number => raw.parse::<f64>().map(crate::js::js_number).unwrap_or_default(),
        Kind::Object => "[object Object]".into(),
        Kind::Array => array_elements(raw).into_iter().map(js_join_string).collect::<Vec<_>>().join(","),
    }
}

/// Parses a raw number as JavaScript does.
pub fn number(raw: &str) -> Option<f64> {
    if kind(raw) != Kind::Number {
        return None;
    }
    raw.parse::<f64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_like_json_parse() {
        for ok in ["{}", "[]", " 1 ", "-0.5e+3", r#"{"a":[1,{"b":null}],"c":"\ud800"}"#, "\"\\u00e9\""] {
            assert!(parse_whole(ok).is_ok(), "{ok}");
        }
        for bad in ["{", "[1,]", "01", "{\"a\"}", "\"\t\"", "1 2", "tru", "{\"a\":1,}", "nul"] {
            assert!(parse_whole(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_whole("{\"a\":"), Err(ScanError::Incomplete));
        assert_eq!(parse_whole("{\"a\":x"), Err(ScanError::Syntax));
    }

    #[test]
    fn word_at_a_time_string_scan_finds_every_special() {
        for i in 0..20 {
            let pad = "é".repeat(i / 2) + &"a".repeat(i % 2);
            assert!(parse_whole(&format!("\"{pad}\u{1}xxxxxxxxxx\"")).is_err(), "{i}");
            assert_eq!(parse_whole(&format!("\"{pad}\\\"xxxxxxxxx\"")).map(str::len), Ok(pad.len() + 13));
            assert_eq!(skip_value(format!("\"{pad}\"xxxxxxxxxx").as_bytes(), 0), Ok(pad.len() + 2));
        }
    }

    /// The character-by-character decoder [`unescape`] replaced, as an oracle.
    fn unescape_by_chars(inner: &str) -> String {
        let mut out = String::new();
        let mut chars = inner.char_indices().peekable();
        let b = inner.as_bytes();
        while let Some((i, c)) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            let Some((_, e)) = chars.next() else {
                out.push('\\');
                break;
            };
            match e {
                '"' => out.push('"'),
                '\\' => out.push('\\'),
                '/' => out.push('/'),
                'b' => out.push('\u{8}'),
                'f' => out.push('\u{c}'),
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                't' => out.push('\t'),
                'u' => {
                    let Some(hi) = hex4(b, i + 2) else {
                        out.push_str("\\u");
                        continue;
                    };
                    for _ in 0..4 {
                        chars.next();
                    }
                    if (0xD800..0xDC00).contains(&hi) {
                        if b.get(i + 6) == Some(&b'\\')
                            && b.get(i + 7) == Some(&b'u')
                            && let Some(lo) = hex4(b, i + 8)
                            && (0xDC00..0xE000).contains(&lo)
                        {
                            for _ in 0..6 {
                                chars.next();
                            }
                            out.push(
                                char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)).unwrap_or('\u{fffd}'),
                            );
                            continue;
                        }
                        out.push(crate::js::lone_surrogate_char(hi));
                    } else if (0xDC00..0xE000).contains(&hi) {
                        out.push(crate::js::lone_surrogate_char(hi));
                    } else {
                        out.push(char::from_u32(hi).unwrap_or('\u{fffd}'));
                    }
                }
                other => {
                    out.push('\\');
                    out.push(other);
                }
            }
        }
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        #[test]
        fn unescape_decodes_like_the_char_by_char_decoder(
            inner in "([a-zé😀 ]|\\\\[\"\\\\/bfnrtxé]|\\\\u[0-9a-fA-FdD]{0,4}|\\\\u[dD][89abAB][0-9a-f]{2}(\\\\u[dD][c-fC-F][0-9a-f]{2})?|\\\\){0,12}"
        ) {
            proptest::prop_assert_eq!(unescape(&inner), unescape_by_chars(&inner));
        }
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i32>().prop_map(serde_json::Value::from),
            (-1e6f64..1e6).prop_map(serde_json::Value::from),
            "([a-z\"\\\\/\n\t{}\\[\\],:é😀 ]|\u{1}){0,30}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(serde_json::Value::Array),
                proptest::collection::vec(("[a-z\"{}]{0,6}", inner), 0..5)
                    .prop_map(|kv| serde_json::Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1024))]

        /// On valid JSON the unchecked splitters find exactly what the validating ones do.
        #[test]
        fn validated_splitting_agrees_with_validating(v in json_value(), pretty in proptest::bool::ANY) {
            // Compact as the references write, or with whitespace between tokens.
            let text = if pretty {
                serde_json::to_string_pretty(&v).expect("serialises")
            } else {
                crate::json::to_js_string(&v)
            };
            let b = text.as_bytes();
            proptest::prop_assert_eq!(skip_value_validated(b, 0), skip_value(b, 0));
            if let Some(obj) = Obj::parse(&text) {
                let fast = Obj::parse_validated(&text).expect("an object");
                proptest::prop_assert_eq!(fast.members, obj.members);
            }
            if text.starts_with('[') {
                let elements = array_elements(&text);
                let expected = serde_json::from_str::<Vec<serde_json::Value>>(&text).map(|a| a.len()).unwrap_or(0);
                proptest::prop_assert_eq!(elements.len(), expected);
            }
        }

        /// The validator finds strings' ends with the block index; on valid JSON, on
        /// JSON cut anywhere and on JSON with one byte changed it gives exactly the
        /// answer of the byte-at-a-time definition.
        #[test]
        fn block_index_validates_like_byte_by_byte(
            v in json_value(),
            cut in proptest::num::usize::ANY,
            (at, byte) in (proptest::num::usize::ANY, proptest::sample::select(b"\"\\\n\t{}[],:u0 ".to_vec())),
        ) {
            let text = crate::json::to_js_string(&v);
            let cut = &text.as_bytes()[..cut % (text.len() + 1)];
            let mut changed = text.clone().into_bytes();
            let at = at % changed.len();
            changed[at] = byte;
            for b in [text.as_bytes(), cut, &changed] {
                let sequential = walk_value(b, 0, &mut crate::strings::Sequential);
                proptest::prop_assert_eq!(walk_value(b, 0, &mut Checked::new(0)), sequential);
                proptest::prop_assert_eq!(skip_value(b, 0), sequential);
            }
        }

        /// A tape records exactly the members and elements the splitters find, at every
        /// depth it keeps, and accepts exactly what `parse_whole` accepts.
        #[test]
        fn tape_agrees_with_the_splitters(v in json_value(), depth in 0usize..6, pretty in proptest::bool::ANY, cut in proptest::num::usize::ANY) {
            let text = if pretty {
                serde_json::to_string_pretty(&v).expect("serialises")
            } else {
                crate::json::to_js_string(&v)
            };
            let tape = Tape::parse(&text, depth).expect("valid JSON");
            proptest::prop_assert_eq!(tape.raw(0), parse_whole(&text).expect("valid"));
            let unchecked = Tape::parse_validated(&text, depth).expect("valid JSON");
            let spans = |t: &Tape<'_>| t.nodes.iter().map(|n| (n.key, n.start, n.end, n.after)).collect::<Vec<_>>();
            proptest::prop_assert_eq!(spans(&unchecked), spans(&tape));
            drop(unchecked);
            // Every recorded value, with its depth, reached from the root.
            let mut todo = vec![(0usize, 0usize)];
            let mut seen = 0;
            while let Some((id, node_depth)) = todo.pop() {
                seen += 1;
                let raw = tape.raw(id);
                let children: Vec<usize> = tape.children(id).collect();
                todo.extend(children.iter().map(|&c| (c, node_depth + 1)));
                if node_depth == depth {
                    proptest::prop_assert!(children.is_empty());
                    continue;
                }
                match kind(raw) {
                    Kind::Object => {
                        let members = Obj::parse_validated(raw).expect("an object").members;
                        let got: Vec<(&str, &str)> = children.iter().map(|&c| {
                            let (ks, ke) = tape.nodes[c].key;
                            (&text[ks as usize..ke as usize], tape.raw(c))
                        }).collect();
                        proptest::prop_assert_eq!(&got, &members);
                        // Lookups find the last member of a name, as the splitter's do.
                        let obj = Obj { members };
                        for (k, _) in &got {
                            let name = decode_string(k).expect("a key");
                            proptest::prop_assert_eq!(tape.get(id, &name).map(|c| tape.raw(c)), obj.get(&name));
                        }
                        proptest::prop_assert_eq!(tape.get(id, "\u{0}missing"), None);
                    }
                    Kind::Array => {
                        let got: Vec<&str> = children.iter().map(|&c| tape.raw(c)).collect();
                        proptest::prop_assert_eq!(got, array_elements(raw));
                    }
                    _ => proptest::prop_assert!(children.is_empty()),
                }
            }
            proptest::prop_assert_eq!(seen, tape.nodes.len(), "every recorded value is reachable");
            let cut = &text[..text.floor_char_boundary(cut % (text.len() + 1))];
            proptest::prop_assert_eq!(Tape::parse(cut, depth).map(|t| t.raw(0)), parse_whole(cut));
        }

        /// On anything else they stay in bounds and terminate.
        #[test]
        fn validated_splitting_survives_garbage(text in "[\"\\\\{}\\[\\],: a1é]{0,40}") {
            let _ = skip_value_validated(text.as_bytes(), 0);
            let _ = Obj::parse_validated(&text).map(|o| o.get_str("a"));
            let _ = array_elements(&text);
            if let Ok(t) = Tape::parse_validated(&text, 3) {
                for c in t.children(0) {
                    proptest::prop_assert!(t.raw(c).len() <= text.len());
                }
            }
        }
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let deep = "[".repeat(1_000_000) + &"]".repeat(1_000_000);
        assert!(parse_whole(&deep).is_ok());
    }

    #[test]
    fn members_last_wins_and_decode() {
        let o = Obj::parse(r#"{"a":1,"b":"x\ny","a":"two","\u0063":3}"#).unwrap();
        assert_eq!(o.get("a"), Some("\"two\""));
        assert_eq!(o.get_str("b").unwrap(), "x\ny");
        assert_eq!(o.get("c"), Some("3"));
        assert_eq!(decode_string(r#""\ud83d\ude80 \udc00""#).unwrap(), "🚀 \u{10fc00}");
        let t = Tape::parse(r#"{"a":1,"b":"x\ny","a":"two","\u0063":3}"#, 1).unwrap();
        assert_eq!(t.raw(t.get(0, "a").unwrap()), "\"two\"");
        assert_eq!(t.get_str(0, "b").unwrap(), "x\ny");
        assert_eq!(t.raw(t.get(0, "c").unwrap()), "3");
        assert_eq!(t.get(0, "d"), None);
        let mut out = String::from("x");
        assert!(push_decoded(r#""a\nb""#, &mut out));
        assert!(!push_decoded("12", &mut out));
        assert_eq!(out, "xa\nb");
    }

    proptest::proptest! {
        /// A raw key equals a key exactly when it decodes to it, however it is escaped.
        #[test]
        fn key_eq_is_decoded_equality(a in "[ab\\\\\"é\n]{0,5}", b in "[ab\\\\\"é\n]{0,5}", unicode in proptest::bool::ANY) {
            let mut raw = String::new();
            crate::json::write_js_str(&mut raw, &a);
            if unicode {
                raw = raw.replace('a', "\\u0061");
            }
            proptest::prop_assert!(key_eq(&raw, &a));
            proptest::prop_assert_eq!(key_eq(&raw, &b), a == b);
        }
    }

    #[test]
    fn keys_compare_decoded() {
        for (raw, key, eq) in [
            (r#""type""#, "type", true),
            (r#""typ\u0065""#, "type", true),
            (r#""\u0074ype""#, "type", true),
            (r#""ty\npe""#, "ty\npe", true),
            (r#""ty\\pe""#, "ty\\pe", true),
            (r#""ty\\pe""#, "ty\\\\pe", false),
            (r#""types""#, "type", false),
            (r#""typ""#, "type", false),
            (r#""\ud83d\ude80""#, "🚀", true),
            (r#""""#, "", true),
        ] {
            assert_eq!(key_eq(raw, key), eq, "{raw} vs {key:?}");
        }
    }

    #[test]
    fn join_strings() {
        assert_eq!(js_join_string("[1,null,[2,\"a\"]]"), "1,,2,a");
        assert_eq!(js_join_string("1.0"), "1");
        assert_eq!(js_join_string("{}"), "[object Object]");
    }
}
