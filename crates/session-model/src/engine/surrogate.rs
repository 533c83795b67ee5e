//! The stand-ins a Rust string uses for JavaScript's lone surrogates. A leaf: it names
//! no other module of the crate.

/// The first of the 2,048 characters (U+10F800 to U+10FFFF, the end of plane 16's
/// private use area) that stand in a Rust string for JavaScript's lone surrogates
/// U+D800 to U+DFFF.
const SURROGATE_BASE: u32 = 0x10_F800;

/// Returns the character that stands for the lone surrogate `unit` (U+D800 to
/// U+DFFF) in a decoded string. A JavaScript string can hold a lone surrogate (a
/// session file can spell one, `"\ud800"`) and a Rust string cannot: the JSON reader
/// decodes it to this stand-in and [`crate::json::write_js_str`] writes the stand-in back as the
/// escape, as `JSON.stringify` writes the lone surrogate. The cost: a character of
/// that range written raw in a string we re-serialise comes back as the escape.
///
/// ```
/// use session_model::json::{lone_surrogate_char, parse, to_js_string};
/// assert_eq!(lone_surrogate_char(0xD800), '\u{10F800}');
/// let v = parse(r#"["\ud800", "\udc00\ud800", "\ud83d\ude80"]"#).unwrap();
/// assert_eq!(to_js_string(&v), r#"["\ud800","\udc00\ud800","🚀"]"#);
/// ```
pub fn lone_surrogate_char(unit: u32) -> char {
    char::from_u32(SURROGATE_BASE + (unit.clamp(0xD800, 0xDFFF) - 0xD800)).unwrap_or('\u{fffd}')
}

/// Returns the lone surrogate `c` stands for, if it is a stand-in
/// ([`lone_surrogate_char`]).
pub fn stand_in_surrogate(c: char) -> Option<u32> {
    let c = u32::from(c);
    (c >= SURROGATE_BASE).then(|| 0xD800 + (c - SURROGATE_BASE))
}

/// Whether `s` may hold a stand-in (its UTF-8 starts with 0xF4 0x8F 0xA0..0xBF).
pub(crate) fn has_stand_in(s: &str) -> bool {
    let b = s.as_bytes();
    memchr::memchr_iter(0xF4, b).any(|i| b.get(i + 1) == Some(&0x8F) && b.get(i + 2).is_some_and(|&c| c >= 0xA0))
}

/// Returns `s` with every lone-surrogate stand-in replaced by U+FFFD, as a terminal
/// or a UTF-8 file shows a lone surrogate.
pub fn display_str(s: &str) -> std::borrow::Cow<'_, str> {
    if !has_stand_in(s) {
        return std::borrow::Cow::Borrowed(s);
    }
    std::borrow::Cow::Owned(s.chars().map(|c| if stand_in_surrogate(c).is_some() { '\u{fffd}' } else { c }).collect())
}
