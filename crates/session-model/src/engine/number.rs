//! JavaScript's numbers as the JSON engine needs them: ECMAScript's
//! `Number::toString`, and which number tokens a double keeps exactly. A leaf: it
//! names no other module of the crate.

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
/// `-0`. Such a token reads as a double to the value it spells ([`number_exact`]
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

/// Whether one JSON number token reads as a double to the value it spells: what
/// `json::numbers_exact` asks of every token of a text.
pub(crate) fn number_exact(tok: &str) -> bool {
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

/// The digits of a JSON number without leading or trailing zeros, and the power of
/// ten `p` with value = 0.d1d2.. × 10^p (`None` for a text that is not a number).
fn decimal(tok: &str) -> Option<(bool, Vec<u8>, i64)> {
    let (neg, rest) = tok.strip_prefix('-').map_or((false, tok), |r| (true, r));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_follow_ecmascript() {
        assert_eq!(js_number(1.0), "1");
        assert_eq!(js_number(123456789012345680000.0), "123456789012345680000");
        assert_eq!(js_number(1.5e300), "1.5e+300");
        assert_eq!(js_number(5e-7), "5e-7");
        assert_eq!(js_number(1.25e-6), "0.00000125");
        assert_eq!(js_number(-2.5), "-2.5");
        assert_eq!(js_number(f64::NAN), "null");
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
}
