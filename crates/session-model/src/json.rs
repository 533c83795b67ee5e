//! JSON text exactly as JavaScript's `JSON.stringify` writes it.
//!
//! Both reference agents serialise every record with `JSON.stringify(value)`. A record
//! we create must be byte-identical to what they would write, so this module
//! reproduces the three places where a generic JSON writer differs:
//!
//! * **key order**: insertion order, except that integer-like keys (`"0"`, `"42"`)
//!   come first in ascending numeric order, as in every JavaScript object;
//! * **numbers**: the ECMAScript `Number::toString` algorithm (`1e+21`, `1e-7`,
//!   `0.000001`, `-0` as `0`, integers beyond 2^53 rounded through `f64`);
//! * **strings**: only `"`, `\` and C0 controls are escaped, with the short forms
//!   `\b \f \n \r \t` and lowercase `\u00XX` otherwise.

use std::ops::Range;

use serde_json::{Map, Number, Value};

pub(crate) use crate::js::number_plain;
pub use crate::js::{js_number, lone_surrogate_char, stand_in_surrogate, write_js_number};

/// Returns `value` serialised as JavaScript's `JSON.stringify(value)` would.
///
/// ```
/// let v: serde_json::Value = serde_json::from_str(r#"{"b":1.0,"2":0,"1":1e21}"#).unwrap();
/// assert_eq!(session_model::json::to_js_string(&v), r#"{"1":1e+21,"2":0,"b":1}"#);
/// ```
pub fn to_js_string(value: &Value) -> String {
    let mut out = String::with_capacity(64);
    write_js_value(&mut out, value);
    out
}

/// Appends `value` to `out` as JavaScript's `JSON.stringify(value)` would.
pub fn write_js_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_js_number_value(out, n),
        Value::String(s) => write_js_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_js_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => write_js_object(out, map),
    }
}

fn write_js_object(out: &mut String, map: &Map<String, Value>) {
    write_js_members(out, map.iter().map(|(k, v)| (k.as_str(), v)), &mut |_, _| {});
}

/// Writes an object made of `members` (in insertion order, keys distinct), telling
/// `member` where each member's value landed.
fn write_js_members<'a, I>(out: &mut String, members: I, member: &mut dyn FnMut(&str, Range<usize>))
where
    I: Iterator<Item = (&'a str, &'a Value)> + Clone,
{
    out.push('{');
    let mut first = true;
    let mut emit = |out: &mut String, k: &str, v: &Value| {
        if !first {
            out.push(',');
        }
        first = false;
        write_js_str(out, k);
        out.push(':');
        let start = out.len();
        write_js_value(out, v);
        member(k, start..out.len());
    };
    if members.clone().any(|(k, _)| array_index(k).is_some()) {
        let mut indexed: Vec<(u32, &str, &Value)> =
            members.clone().filter_map(|(k, v)| array_index(k).map(|i| (i, k, v))).collect();
        indexed.sort_by_key(|(i, _, _)| *i);
        for (_, k, v) in indexed {
            emit(out, k, v);
        }
        for (k, v) in members.filter(|(k, _)| array_index(k).is_none()) {
            emit(out, k, v);
        }
    } else {
        for (k, v) in members {
            emit(out, k, v);
        }
    }
    out.push('}');
}

/// Serialises an object made of `members` (keys distinct, in insertion order) like
/// [`to_js_string`] into `out`, and returns where the values of the members named in
/// `keys` are in `out` (so a record can be built without reading its own text back).
pub(crate) fn write_js_members_spans<'a, I, const N: usize>(
    out: &mut String,
    members: I,
    keys: [&str; N],
) -> [Option<Range<usize>>; N]
where
    I: Iterator<Item = (&'a str, &'a Value)> + Clone,
{
    let mut spans: [Option<Range<usize>>; N] = std::array::from_fn(|_| None);
    write_js_members(out, members, &mut |k, span| {
        if let Some(i) = keys.iter().position(|key| *key == k) {
            spans[i] = Some(span);
        }
    });
    spans
}

/// Returns the numeric value of `key` when JavaScript treats it as an array index
/// (a canonical decimal below 2^32 - 1), which makes it enumerate before other keys.
pub fn array_index(key: &str) -> Option<u32> {
    let bytes = key.as_bytes();
    if bytes.is_empty() || bytes.len() > 10 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if bytes.len() > 1 && bytes[0] == b'0' {
        return None;
    }
    let n: u64 = key.parse().ok()?;
    (n < u64::from(u32::MAX)).then_some(n as u32)
}

/// Returns `s` with every lone-surrogate stand-in replaced by U+FFFD, as a terminal
/// or a UTF-8 file shows a lone surrogate.
pub fn display_str(s: &str) -> std::borrow::Cow<'_, str> {
    if !has_stand_in(s) {
        return std::borrow::Cow::Borrowed(s);
    }
    std::borrow::Cow::Owned(s.chars().map(|c| if stand_in_surrogate(c).is_some() { '\u{fffd}' } else { c }).collect())
}

/// Whether `s` may hold a stand-in (its UTF-8 starts with 0xF4 0x8F 0xA0..0xBF).
fn has_stand_in(s: &str) -> bool {
    let b = s.as_bytes();
    memchr::memchr_iter(0xF4, b).any(|i| b.get(i + 1) == Some(&0x8F) && b.get(i + 2).is_some_and(|&c| c >= 0xA0))
}

/// Appends `s` as a JSON string literal with JavaScript's escaping rules (a
/// lone-surrogate stand-in as its `\\udXXX` escape).
pub fn write_js_str(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    let mut rest = s;
    if has_stand_in(s) {
        while let Some((at, unit)) = rest.char_indices().find_map(|(i, c)| stand_in_surrogate(c).map(|u| (i, u))) {
            write_escaped(out, &rest[..at]);
            out.push_str(&format!("\\u{unit:04x}"));
            rest = &rest[at + lone_surrogate_char(unit).len_utf8()..];
        }
    }
    write_escaped(out, rest);
    out.push('"');
}

/// Appends the escaped content of `s` (no quotes, no stand-ins).
fn write_escaped(out: &mut String, s: &str) {
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    loop {
        // Skip plain bytes: nothing to escape is the common case.
        i = crate::scan::plain_run_end(bytes, i);
        let Some(&b) = bytes.get(i) else { break };
        let esc: Option<&str> = match b {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            b'\n' => Some("\\n"),
            b'\r' => Some("\\r"),
            b'\t' => Some("\\t"),
            0x08 => Some("\\b"),
            0x0c => Some("\\f"),
            _ => None,
        };
        out.push_str(&s[start..i]);
        match esc {
            Some(e) => out.push_str(e),
            None => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(HEX[(b >> 4) as usize] as char);
                out.push(HEX[(b & 0xf) as usize] as char);
            }
        }
        i += 1;
        start = i;
    }
    out.push_str(&s[start..]);
}

fn write_js_number_value(out: &mut String, n: &Number) {
    const SAFE: u64 = 1 << 53;
    if let Some(u) = n.as_u64() {
        if u <= SAFE {
            out.push_str(&u.to_string());
            return;
        }
    } else if let Some(i) = n.as_i64()
        && i.unsigned_abs() <= SAFE
    {
        out.push_str(&i.to_string());
        return;
    }
    match n.as_f64() {
        Some(f) => write_js_number(out, f),
        None => out.push_str("null"),
    }
}

/// Returns whether every number in valid JSON `text` is read by JavaScript's
/// `JSON.parse` as the value it spells, so that `JSON.stringify(JSON.parse(text))`
/// holds the same numbers. A number beyond a double (`1e400`, read as `Infinity`,
/// written as `null`), one with more digits than a double keeps
/// (`123456789012345678901234567890`, written `1.2345678901234568e+29`), one that
/// underflows to zero and `-0` (written `0`) are not exact; `1.50` or `1E3` are.
///
/// ```
/// use session_model::json::numbers_exact;
/// assert!(numbers_exact(r#"{"a":[1.50,1E3,-2.5e-7],"b":"1e400"}"#));
/// assert!(!numbers_exact(r#"{"a":1e400}"#));
/// assert!(!numbers_exact("[123456789012345678901234567890]"));
/// ```
pub fn numbers_exact(text: &str) -> bool {
    number_tokens(text).all(|r| number_exact(&text[r]))
}

/// The byte ranges of the number tokens of valid JSON `text` (outside strings), in
/// order: what the number rules of this module look at.
fn number_tokens(text: &str) -> impl Iterator<Item = Range<usize>> + '_ {
    let b = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < b.len() {
            match b[i] {
                b'"' => {
                    // Skip the string: its end is the next quote not escaped.
                    i += 1;
                    loop {
                        match memchr::memchr2(b'"', b'\\', &b[i..]) {
                            None => {
                                i = b.len();
                                break;
                            }
                            // An escape at the very end (invalid JSON, which `parse`
                            // also hands here) ends the text.
                            Some(k) if b[i + k] == b'\\' => i = (i + k + 2).min(b.len()),
                            Some(k) => {
                                i += k + 1;
                                break;
                            }
                        }
                    }
                }
                b'-' | b'0'..=b'9' => {
                    let start = i;
                    i += b[i..]
                        .iter()
                        .position(|c| !matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                        .unwrap_or(b.len() - i);
                    return Some(start..i);
                }
                _ => i += 1,
            }
        }
        None
    })
}

/// Returns `text` (valid JSON) as JavaScript holds it: `text` itself when its numbers
/// are exact (see [`numbers_exact`]), else `JSON.stringify(JSON.parse(text))`.
///
/// ```
/// use session_model::json::js_exact;
/// assert_eq!(js_exact(r#"{"a": 1.50}"#), r#"{"a": 1.50}"#);
/// assert_eq!(js_exact(r#"{"a": 1e400, "b": 12345678901234567890}"#), r#"{"a":null,"b":12345678901234567000}"#);
/// ```
pub fn js_exact(text: &str) -> std::borrow::Cow<'_, str> {
    if numbers_exact(text) {
        return std::borrow::Cow::Borrowed(text);
    }
    match parse(text) {
        Some(v) => std::borrow::Cow::Owned(to_js_string(&v)),
        None => std::borrow::Cow::Borrowed(text),
    }
}

/// The digits of a JSON number without leading or trailing zeros, and the power of
/// ten `p` with value = 0.d1d2.. × 10^p (`None` for a text that is not a number).
fn decimal(tok: &str) -> Option<(bool, Vec<u8>, i64)> {
    let (neg, rest) = match tok.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, tok),
    };
    let (mantissa, exp) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], rest[at + 1..].parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut digits: Vec<u8> = int.bytes().chain(frac.bytes()).collect();
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut point = int.len() as i64 + exp;
    let lead = digits.iter().take_while(|&&d| d == b'0').count();
    digits.drain(..lead);
    point -= lead as i64;
    while digits.last() == Some(&b'0') {
        digits.pop();
    }
    Some((neg, digits, point))
}

/// Whether one JSON number token reads as a double to the value it spells.
fn number_exact(tok: &str) -> bool {
    // The common case without allocating.
    if number_plain(tok.as_bytes()) {
        return true;
    }
    let Some((neg, digits, point)) = decimal(tok) else { return true };
    if digits.is_empty() {
        // Zero: `-0` is written `0`.
        return !neg;
    }
    // Up to 15 significant digits within the normal range always survive a double.
    if digits.len() <= 15 && (-300..=300).contains(&point) {
        return true;
    }
    let Ok(f) = tok.parse::<f64>() else { return false };
    if !f.is_finite() {
        return false;
    }
    decimal(&js_number(f)).is_some_and(|(n2, d2, p2)| n2 == neg && d2 == digits && p2 == point)
}

/// Parses JSON text into a value: the one JSON reader of the workspace for session
/// text. Text that only JavaScript accepts is read as `JSON.stringify(JSON.parse(text))`
/// would write it: an escaped lone surrogate as its stand-in
/// ([`lone_surrogate_char`]), numbers beyond `f64` (±Infinity in JavaScript) as
/// `null`. `None` when even that fails (text that is not JSON, or nesting deeper than
/// the JSON reader allows).
///
/// ```
/// use session_model::json::{lone_surrogate_char, parse};
/// let v = parse(r#"{"a":1e400,"b":"\ud800"}"#);
/// assert_eq!(v, Some(serde_json::json!({"a": null, "b": lone_surrogate_char(0xD800).to_string()})));
/// assert_eq!(parse("{"), None);
/// ```
pub fn parse(text: &str) -> Option<Value> {
    serde_json::from_str(text).ok().or_else(|| {
        let text = replace_lone_surrogates(text);
        serde_json::from_str(&text).ok().or_else(|| serde_json::from_str(&null_infinite_numbers(&text)).ok())
    })
}

/// Replaces the numbers of valid JSON `text` that round to ±Infinity by `null`.
fn null_infinite_numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for r in number_tokens(text) {
        if text[r.clone()].parse::<f64>().is_ok_and(f64::is_infinite) {
            out.push_str(&text[last..r.start]);
            out.push_str("null");
            last = r.end;
        }
    }
    out.push_str(&text[last..]);
    out
}

/// Replaces escaped lone surrogates (`\ud800` without its pair) by their stand-ins.
fn replace_lone_surrogates(text: &str) -> String {
    let b = text.as_bytes();
    let hex = |at: usize| -> Option<u32> {
        let h = b.get(at..at + 4)?;
        u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()
    };
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut last = 0;
    while i + 1 < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        if b[i + 1] != b'u' {
            i += 2;
            continue;
        }
        let Some(cp) = hex(i + 2) else {
            i += 2;
            continue;
        };
        let paired = (0xD800..0xDC00).contains(&cp)
            && b.get(i + 6) == Some(&b'\\')
            && b.get(i + 7) == Some(&b'u')
            && hex(i + 8).is_some_and(|lo| (0xDC00..0xE000).contains(&lo));
        if paired {
            i += 12;
        } else if (0xD800..0xE000).contains(&cp) {
            out.push_str(&text[last..i]);
            out.push(lone_surrogate_char(cp));
            i += 6;
            last = i;
        } else {
            i += 6;
        }
    }
    out.push_str(&text[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(s: &str) -> String {
        to_js_string(&serde_json::from_str::<Value>(s).unwrap())
    }

    #[test]
    fn numbers_follow_ecmascript() {
        assert_eq!(js_number(1.0), "1");
        assert_eq!(js_number(123456789012345680000.0), "123456789012345680000");
        assert_eq!(js_number(1.5e300), "1.5e+300");
        assert_eq!(js_number(5e-7), "5e-7");
        assert_eq!(js_number(1.25e-6), "0.00000125");
        assert_eq!(js_number(-2.5), "-2.5");
        assert_eq!(js_number(f64::NAN), "null");
        assert_eq!(rt("12345678901234567890"), "12345678901234567000");
        assert_eq!(rt("-9007199254740993"), "-9007199254740992");
        assert_eq!(rt("9007199254740992"), "9007199254740992");
        assert_eq!(rt("-0"), "0");
        assert_eq!(rt("-0.0"), "0");
        assert_eq!(rt("1E3"), "1000");
    }

    #[test]
    fn strings_follow_ecmascript() {
        assert_eq!(rt(r#""a/b\u2028é\u0001\u001f\b\f""#), "\"a/b\u{2028}é\\u0001\\u001f\\b\\f\"");
        assert_eq!(rt(r#""\"\\\n\r\t""#), r#""\"\\\n\r\t""#);
    }

    proptest::proptest! {
        /// The allocation-free shortcut of `number_exact` agrees with the definition:
        /// the token and the double JavaScript reads from it spell the same decimal.
        #[test]
        fn number_exact_agrees_with_its_definition(tok in "-?(0|[1-9][0-9]{0,24})(\\.[0-9]{1,20})?([eE][-+]?[0-9]{1,3})?") {
            let f: f64 = tok.parse().unwrap();
            let (neg, digits, point) = decimal(&tok).unwrap();
            let by_definition = if digits.is_empty() {
                !neg
            } else {
                f.is_finite() && decimal(&js_number(f)) == Some((neg, digits, point))
            };
            proptest::prop_assert_eq!(number_exact(&tok), by_definition, "{}", tok);
        }

        /// A plain token (what the scan lets through without a second look) is exact.
        #[test]
        fn a_plain_number_is_exact(tok in "-?(0|[1-9][0-9]{0,18})(\\.[0-9]{1,6})?([eE][-+]?[0-9]{1,3})?") {
            if number_plain(tok.as_bytes()) {
                proptest::prop_assert!(number_exact(&tok), "{}", tok);
            }
        }
    }

    #[test]
    fn plain_numbers() {
        for tok in ["0", "-1", "1.5", "123456789012345", "-0.5", "0.00000001"] {
            assert!(number_plain(tok.as_bytes()), "{tok}");
        }
        for tok in ["-0", "-0.0", "1e3", "1E3", "1234567890123456", "12345678901234567890", ""] {
            assert!(!number_plain(tok.as_bytes()), "{tok}");
        }
    }

    #[test]
    fn integer_keys_first() {
        assert_eq!(rt(r#"{"b":1,"2":0,"1":0,"01":3,"4294967295":4}"#), r#"{"1":0,"2":0,"b":1,"01":3,"4294967295":4}"#);
    }
    /// `parse` hands text that is not JSON to the number rules too: an escape cut off
    /// at the end of the text is read as the end, never past it.
    #[test]
    fn parse_survives_a_cut_escape() {
        assert_eq!(parse("\"abc\\"), None);
        assert_eq!(parse("[\"\\"), None);
        assert_eq!(parse("{\"a\":1e400,\"b\":\"\\"), None);
        assert_eq!(null_infinite_numbers("[1e400,\"\\"), "[null,\"\\");
        assert_eq!(parse("[1e400]"), Some(serde_json::json!([null])));
    }

    proptest::proptest! {
        /// `parse` never panics on any text, and reads valid JSON as serde_json does
        /// (apart from the values JavaScript reads differently).
        #[test]
        fn parse_takes_any_text(text in "[\\\"\\[\\]{}:,0-9eE.+ a-z-]{0,24}") {
            let got = parse(&text);
            if let Ok(v) = serde_json::from_str::<Value>(&text) {
                proptest::prop_assert_eq!(got, Some(v));
            }
        }
    }
}
