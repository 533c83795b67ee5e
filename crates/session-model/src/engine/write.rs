//! The serializer: JSON text exactly as JavaScript's `JSON.stringify` writes it (see
//! [`crate::json`] for the three places where it differs from a generic writer).

use std::ops::Range;

use serde_json::{Map, Number, Value};

use super::number::write_js_number;
use super::strings::plain_run_end;
use super::surrogate::{has_stand_in, lone_surrogate_char, stand_in_surrogate};

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
        i = plain_run_end(bytes, i);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(s: &str) -> String {
        to_js_string(&serde_json::from_str::<Value>(s).unwrap())
    }

    #[test]
    fn numbers_follow_ecmascript() {
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

    #[test]
    fn integer_keys_first() {
        assert_eq!(rt(r#"{"b":1,"2":0,"1":0,"01":3,"4294967295":4}"#), r#"{"1":0,"2":0,"b":1,"01":3,"4294967295":4}"#);
    }
}
