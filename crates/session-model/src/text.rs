//! Text as the references' JavaScript handles it outside JSON: `String.prototype.trim`'s
//! whitespace (wider than JSON's, see `engine/ws.rs`) and the decoders' U+FFFD for
//! bytes that are not UTF-8.

/// Returns whether `c` is whitespace for JavaScript's `String.prototype.trim`.
pub fn js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}' | '\u{feff}'
    )
}

/// Decodes bytes as the references' UTF-8 decoders do: invalid sequences become
/// U+FFFD. Valid input (the common case) is borrowed after one fast check, and a
/// window cut in the middle of a character (a read prefix) costs no slow pass.
///
/// ```
/// assert_eq!(session_model::decode_utf8_lossy(b"caf\xc3\xa9"), "café");
/// assert_eq!(session_model::decode_utf8_lossy(b"caf\xc3"), "caf\u{fffd}");
/// assert_eq!(session_model::decode_utf8_lossy(b"a\xffb"), "a\u{fffd}b");
/// ```
pub fn decode_utf8_lossy(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    if let Ok(s) = simdutf8::basic::from_utf8(bytes) {
        return std::borrow::Cow::Borrowed(s);
    }
    match std::str::from_utf8(bytes) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(e) if e.error_len().is_none() => {
            // Only the tail is an incomplete character: keep the valid part as is.
            let valid = &bytes[..e.valid_up_to()];
            let mut s = String::with_capacity(valid.len() + 3);
            s.push_str(std::str::from_utf8(valid).unwrap_or_default());
            s.push('\u{fffd}');
            std::borrow::Cow::Owned(s)
        }
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// Returns `s` trimmed as JavaScript's `String.prototype.trim` does.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(js_whitespace)
}
