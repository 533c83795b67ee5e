//! Base64 as the references use it: lenient decoding like Node's `Buffer.from(s, "base64")`,
//! canonical encoding (standard alphabet, padded).
//!
//! Decoding accepts both the standard (`+/`) and the URL-safe (`-_`) alphabet, skips every
//! other character (whitespace, garbage), stops at the first `=`, and drops trailing bits that do
//! not make a whole byte. It never fails. The blob store hashes decoded bytes, so two spellings of
//! the same image share one blob.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn sextet(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    }
}

/// Decodes `s` leniently (see the module docs); never fails.
pub fn decode_lenient(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3 + 2);
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    for &c in s.as_bytes() {
        if c == b'=' {
            break;
        }
        let Some(v) = sextet(c) else { continue };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            // Truncation to the low byte is the point: the top bits were already emitted.
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// Encodes `bytes` with the standard alphabet and `=` padding.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let idx = |shift: u32| char::from(ALPHABET[((n >> shift) & 63) as usize]);
        out.push(idx(18));
        out.push(idx(12));
        out.push(if chunk.len() > 1 { idx(6) } else { '=' });
        out.push(if chunk.len() > 2 { idx(0) } else { '=' });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        for (raw, enc) in [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foobar", "Zm9vYmFy")] {
            assert_eq!(encode(raw.as_bytes()), enc);
            assert_eq!(decode_lenient(enc), raw.as_bytes());
        }
    }

    #[test]
    fn lenient_like_node() {
        assert_eq!(decode_lenient("Zm9v\nYmFy"), b"foobar");
        assert_eq!(decode_lenient(" Z m 9 v "), b"foo");
        assert_eq!(decode_lenient("Zg"), b"f");
        assert_eq!(decode_lenient("Zm8"), b"fo");
        assert_eq!(decode_lenient("Z"), b"");
        assert_eq!(decode_lenient("Zg==Zm9v"), b"f");
        assert_eq!(decode_lenient("-_-_"), decode_lenient("+/+/"));
        assert_eq!(decode_lenient("Zm9v!!YmFy\u{e9}"), b"foobar");
    }
}
