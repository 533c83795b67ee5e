//! The validating walk of the JSON grammar: text checked exactly as `JSON.parse`
//! accepts it (iteratively, so deep nesting cannot exhaust the stack; strings 64 bytes
//! at a time, `strings.rs`), the members of objects handed out as raw spans
//! ([`Obj`], [`object_fields`], [`record_fields`]) without building value trees, and
//! the unchecked splitters for text already validated. The tape (`tape.rs`) and the
//! lenient splitter (`lenient.rs`) walk through here.

use std::borrow::Cow;

use super::decode::{decode_string, key_eq};
use super::kind::{Kind, kind};
use super::number::js_number;
use super::strings::{Checked, Quotes, ScanError, StringEnds};
use super::ws::{is_ws, skip_ws};

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

/// Where a walk notes the values it meets (see `Tape`).
pub(super) trait Recorder {
    /// A value of `depth` (0: the walked value itself) starts at `start`, under
    /// `parent` with member name `key` (its raw span); returns its id, or
    /// [`NOT_RECORDED`].
    fn open(&mut self, parent: u32, key: Option<(usize, usize)>, start: usize, depth: usize) -> u32;
    /// The value `id` ends at `end`.
    fn close(&mut self, id: u32, end: usize);
}

/// The id of a value a [`Recorder`] did not keep.
pub(super) const NOT_RECORDED: u32 = u32::MAX;

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
pub(super) fn walk_recording(
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

/// The members of one object, as raw spans. Duplicate keys: the last one wins, as
/// in JavaScript.
#[derive(Debug, Default)]
pub struct Obj<'a> {
    pub(super) members: Vec<(&'a str, &'a str)>,
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

/// Returns `String(value)` for a validated raw value, as `Array.prototype.join`
/// converts elements (`null` becomes the empty string).
pub fn js_join_string(raw: &str) -> String {
    match kind(raw) {
        Kind::Null => String::new(),
        Kind::False => "false".into(),
        Kind::True => "true".into(),
        Kind::String => decode_string(raw).map(Cow::into_owned).unwrap_or_default(),
        Kind::Number => raw.parse::<f64>().map(js_number).unwrap_or_default(),
        Kind::Object => "[object Object]".into(),
        Kind::Array => array_elements(raw).into_iter().map(js_join_string).collect::<Vec<_>>().join(","),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::decode::push_decoded;
    use crate::engine::strings::Sequential;
    use crate::engine::tape::Tape;
    use crate::engine::testing::json_value;

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
                let sequential = walk_value(b, 0, &mut Sequential);
                proptest::prop_assert_eq!(walk_value(b, 0, &mut Checked::new(0)), sequential);
                proptest::prop_assert_eq!(skip_value(b, 0), sequential);
            }
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

    #[test]
    fn join_strings() {
        assert_eq!(js_join_string("[1,null,[2,\"a\"]]"), "1,,2,a");
        assert_eq!(js_join_string("1.0"), "1");
        assert_eq!(js_join_string("{}"), "[object Object]");
    }
}
