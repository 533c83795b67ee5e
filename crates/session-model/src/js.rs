//! JavaScript's values as the JSON engine needs them, with no other part of the crate
//! below: the stand-ins a Rust string uses for JavaScript's lone surrogates, and
//! ECMAScript's `Number::toString`. The scanner, the decoder and the serializer
//! ([`crate::scan`], [`crate::json`]) all build on this module, never the reverse.

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

/// Returns `f` formatted by ECMAScript's `Number::toString` (`NaN` and infinities as
/// `null`, as `JSON.stringify` writes them).
///
/// ```
/// use session_model::json::js_number;
/// assert_eq!(js_number(1e21), "1e+21");
/// assert_eq!(js_number(1e20), "100000000000000000000");
/// assert_eq!(js_number(1e-7), "1e-7");
/// assert_eq!(js_number(0.000001), "0.000001");
/// assert_eq!(js_number(-0.0), "0");
/// assert_eq!(js_number(0.1 + 0.2), "0.30000000000000004");
/// ```
pub fn js_number(f: f64) -> String {
    let mut s = String::new();
    write_js_number(&mut s, f);
    s
}

/// Appends `f` formatted by ECMAScript's `Number::toString`.
pub fn write_js_number(out: &mut String, f: f64) {
    if !f.is_finite() {
        out.push_str("null");
        return;
    }
    if f == 0.0 {
        out.push('0');
        return;
    }
    if f < 0.0 {
        out.push('-');
    }
    // Rust's `{:e}` gives the shortest round-trip digits, like ECMAScript requires.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = digits.len() as i32;
    // ECMAScript: value = 0.d1d2..dk * 10^n, with n = exp + 1.
    let n = exp + 1;
    if k <= n && n <= 21 {
        out.push_str(&digits);
        for _ in 0..(n - k) {
            out.push('0');
        }
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        for _ in 0..(-n) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        let e = n - 1;
        out.push(if e >= 0 { '+' } else { '-' });
        out.push_str(&e.abs().to_string());
    }
}

/// Whether a JSON number token is plainly exact: no exponent, at most 15 digits, not
/// `-0`. Such a token reads as a double to the value it spells ([`crate::json::numbers_exact`]
/// without looking further); the validating scan notes whether every token of a record
/// is plain, so that most records never need the slower look.
#[inline]
pub(crate) fn number_plain(b: &[u8]) -> bool {
    if b.is_empty() || b.len() > 16 || b.iter().any(|&c| c == b'e' || c == b'E') {
        return false;
    }
    let digits = b.iter().filter(|c| c.is_ascii_digit()).count();
    let negative_zero = b[0] == b'-' && b[1..].iter().all(|&c| c == b'0' || c == b'.');
    digits <= 15 && !negative_zero
}
