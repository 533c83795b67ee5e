//! Decoding JSON strings: escapes resolved as `JSON.parse` resolves them, a lone
//! surrogate to its stand-in, and raw keys compared with keys as decoded.

use std::borrow::Cow;

use super::surrogate::lone_surrogate_char;

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
/// cannot) becomes its stand-in ([`crate::json::lone_surrogate_char`]), which the
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
                    out.push(lone_surrogate_char(hi));
                } else if (0xDC00..0xE000).contains(&hi) {
                    out.push(lone_surrogate_char(hi));
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

/// Returns whether the raw key `raw_key` (with its quotes) decodes to `key`, without
/// decoding it when its length or first byte already tells.
pub(crate) fn key_eq(raw_key: &str, key: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

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
                        out.push(lone_surrogate_char(hi));
                    } else if (0xDC00..0xE000).contains(&hi) {
                        out.push(lone_surrogate_char(hi));
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
}
