//! Reading JSON text as JavaScript's `JSON.parse` reads it: into a value (lone
//! surrogates as their stand-ins, numbers beyond a double as `null`, as
//! `JSON.stringify` writes them back), and whether a text's numbers survive that.

use std::ops::Range;

use serde_json::Value;

use super::number::number_exact;
use super::surrogate::lone_surrogate_char;
use super::write::to_js_string;

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
    parse(text).map_or(std::borrow::Cow::Borrowed(text), |v| std::borrow::Cow::Owned(to_js_string(&v)))
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
