//! Finding where JSON strings end, 64 bytes at a time.
//!
//! Session text is mostly string content, and escapes are dense in it (a quote or a
//! backslash every 20 bytes or so in agent transcripts: `\n`, `\"`, `\t`), so
//! stopping at each one costs more than reading the bytes. [`Marks`] instead classifies
//! a block of 64 bytes at once with SIMD compares (quotes, backslashes, control
//! characters, valid escape letters), works out which characters are escaped and which
//! bytes lie inside strings with bit arithmetic (the first stage of simdjson, Langdale
//! and Lemire 2019), and keeps two bitmaps: the quotes that end strings and the string
//! bytes that break the grammar. A string's end is then the next set bit.
//!
//! The index runs forward from a point outside any string and trusts that every quote
//! it meets opens or closes a string. The grammar walker (`scan.rs`) makes
//! that true: it only asks for the end of a string it has just seen open, and it
//! rejects a text at the first byte outside strings that is not JSON, so every quote
//! before the one it asks about was, for it too, an opening or closing quote.
//! `Sequential`, in the tests, is the one-byte-at-a-time definition [`Marks`] is held to.
//!
//! [`plain_run_end`] finds the end of a run of plain string content from a point
//! known to be inside a string, for the decoder's and the serializer's copies.

use wide::u8x16;

use super::number::number_plain;

/// Why a text is not one JSON value (the scanner's error, [`crate::scan::ScanError`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanError {
    /// The text ended inside a value.
    Incomplete,
    /// The text breaks the grammar.
    Syntax,
}

/// Finds the end of the string that opens at a given quote.
pub(crate) trait StringEnds {
    /// Returns the position after the closing quote of the string whose opening quote
    /// is at `open`; `Syntax` if a byte before that quote cannot be in a string
    /// (a control character or a bad escape); `Incomplete` if the text ends first.
    /// `open` never decreases from one call to the next.
    fn string_end(&mut self, b: &[u8], open: usize) -> Result<usize, ScanError>;

    /// The walk met the number token `tok` (outside any string). Nothing by default;
    /// [`Marks`] notes whether every token was plain ([`Marks::numbers_plain`]).
    #[inline(always)]
    fn number(&mut self, tok: &[u8]) {
        let _ = tok;
    }
}

/// Returns whether any byte of `w` is `"`, `\\` or below 0x20 (exact for every byte
/// value: the control test only flags bytes whose high bit is clear).
#[inline]
fn has_special(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let quote = zero(w ^ (ONES * u64::from(b'"')));
    let backslash = zero(w ^ (ONES * u64::from(b'\\')));
    let control = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    (quote | backslash | control) != 0
}

/// Returns the position of the first byte at or after `from` that plain string
/// content cannot hold (`"`, `\\` or a control character below 0x20), or `b.len()`.
///
/// The first 64 bytes are read eight at a time (keys, ids, values and the
/// text between two escaped newlines end there; a SIMD search costs more to start).
/// Past them, quotes and backslashes are found with SIMD (`memchr2`) and the run before
/// one is proven free of control characters by one vectorised pass (they are rare).
#[inline]
pub(crate) fn plain_run_end(b: &[u8], from: usize) -> usize {
    let mut pos = from;
    let short_end = b.len().min(from.saturating_add(SHORT_RUN));
    while pos + 8 <= short_end {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[pos..pos + 8]);
        if has_special(u64::from_le_bytes(w)) {
            return pos + b[pos..pos + 8].iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20).unwrap_or(8);
        }
        pos += 8;
    }
    if short_end - pos < 8 && short_end == b.len() {
        let tail = &b[pos..];
        return pos + tail.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20).unwrap_or(tail.len());
    }
    let rest = &b[pos..];
    let stop = memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len());
    let run = &rest[..stop];
    let at = if run.iter().fold(u8::MAX, |m, &c| m.min(c)) >= 0x20 {
        stop
    } else {
        run.iter().position(|&c| c < 0x20).unwrap_or(stop)
    };
    pos + at
}

/// How many bytes [`plain_run_end`] reads word by word before it searches.
const SHORT_RUN: usize = 64;

/// Bits at even positions.
const EVEN: u64 = 0x5555_5555_5555_5555;

/// Bit masks of one 64-byte block (bit `i` is byte `i`).
#[derive(Default)]
struct Classes {
    quote: u64,
    backslash: u64,
    /// Bytes below 0x20 (only when checking).
    control: u64,
}

/// The 16-byte lanes of a block.
#[inline(always)]
fn lanes(block: &[u8; 64]) -> impl Iterator<Item = (u32, u8x16)> + '_ {
    block.chunks_exact(16).zip((0..).step_by(16)).map(|(lane, shift)| {
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(lane);
        (shift, u8x16::new(bytes))
    })
}

/// Classifies 64 bytes, 16 at a time; control characters only if `CHECK`.
#[inline(always)]
fn classify<const CHECK: bool>(block: &[u8; 64]) -> Classes {
    let splat = u8x16::splat;
    let mut c = Classes::default();
    for (shift, v) in lanes(block) {
        let bits = |m: u8x16| u64::from(m.to_bitmask()) << shift;
        c.quote |= bits(v.simd_eq(splat(b'"')));
        c.backslash |= bits(v.simd_eq(splat(b'\\')));
        if CHECK {
            c.control |= bits(v.min(splat(0x1f)).simd_eq(v));
        }
    }
    c
}

/// Of the `escaped` characters of a block starting at `start` of `b`, the ones that
/// break an escape: not one of `"` `\` `/` `b` `f` `n` `r` `t` `u`, or a `u` without
/// four hex digits after it (fewer digits before the end of the text is a torn
/// text, not an error). Only blocks with escapes need it.
///
/// Checking the escapes one by one takes fewer instructions but is no faster (its
/// branches mispredict on transcripts dense with escapes), so the block is
/// classified with SIMD compares.
fn bad_escapes(b: &[u8], start: usize, block: &[u8; 64], escaped: u64) -> u64 {
    let splat = u8x16::splat;
    let (mut escapable, mut u) = (0u64, 0u64);
    for (shift, v) in lanes(block) {
        let bits = |m: u8x16| u64::from(m.to_bitmask()) << shift;
        let is_u = v.simd_eq(splat(b'u'));
        let others = v.simd_eq(splat(b'"'))
            | v.simd_eq(splat(b'\\'))
            | v.simd_eq(splat(b'/'))
            | v.simd_eq(splat(b'b'))
            | v.simd_eq(splat(b'f'))
            | v.simd_eq(splat(b'n'))
            | v.simd_eq(splat(b'r'))
            | v.simd_eq(splat(b't'));
        u |= bits(is_u);
        escapable |= bits(is_u | others);
    }
    let mut bad = escaped & !escapable;
    let mut unicode = escaped & u;
    while unicode != 0 {
        let i = unicode.trailing_zeros() as usize;
        unicode &= unicode - 1;
        if !hex_digits_follow(b, start + i) {
            bad |= 1 << i;
        }
    }
    bad
}

/// Whether the (up to) four bytes after the `u` at `at` are hex digits.
#[inline]
fn hex_digits_follow(b: &[u8], at: usize) -> bool {
    b[at + 1..b.len().min(at + 5)].iter().all(u8::is_ascii_hexdigit)
}

/// Bit `i` of the result is the XOR of bits `0..=i` of `x`.
#[inline(always)]
fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

/// A forward-only index of the strings of a text, begun at a point outside any
/// string; see the module documentation. With `CHECK` it also validates string
/// content; without, it only finds the ends of strings in text already validated.
#[derive(Debug)]
pub(crate) struct Marks<const CHECK: bool> {
    /// Start of the block the bitmaps describe.
    block: usize,
    /// Start of the next block to classify.
    next: usize,
    /// Quotes that open or close a string.
    quotes: u64,
    /// Bytes inside strings that a string cannot hold.
    bad: u64,
    /// 1 if the first byte of the next block is escaped.
    escaped_carry: u64,
    /// All ones if the next block starts inside a string.
    inside_carry: u64,
    /// Whether every number token met so far was plain (`number_plain`).
    numbers_plain: bool,
}

/// [`Marks`] that validates string content.
pub(crate) type Checked = Marks<true>;

/// [`Marks`] for text already validated: it only finds where strings end.
pub(crate) type Quotes = Marks<false>;

impl<const CHECK: bool> Marks<CHECK> {
    /// An index of the text from `origin`, which must not be inside a string.
    pub(crate) fn new(origin: usize) -> Marks<CHECK> {
        Marks { block: origin, next: origin, quotes: 0, bad: 0, escaped_carry: 0, inside_carry: 0, numbers_plain: true }
    }

    /// Returns whether every number token the walk met was plain
    /// ([`number_plain`]): then the text's numbers are exact without looking
    /// at them again.
    pub(crate) fn numbers_plain(&self) -> bool {
        self.numbers_plain
    }

    /// Classifies the next block (the text must extend into it).
    fn advance(&mut self, b: &[u8]) {
        let start = self.next;
        let len = b.len() - start;
        let mut block = [b' '; 64];
        let valid = if len >= 64 {
            block.copy_from_slice(&b[start..start + 64]);
            u64::MAX
        } else {
            block[..len].copy_from_slice(&b[start..]);
            (1u64 << len) - 1
        };
        let c = classify::<CHECK>(&block);
        // Escaped characters: after an odd run of backslashes (simdjson's
        // find_escaped_branchless).
        let backslash = c.backslash & !self.escaped_carry;
        let follows = (backslash << 1) | self.escaped_carry;
        let odd_starts = backslash & !EVEN & !follows;
        let (sequences, carry) = odd_starts.overflowing_add(backslash);
        self.escaped_carry = u64::from(carry);
        let escaped = (EVEN ^ (sequences << 1)) & follows;
        let quotes = c.quote & !escaped;
        self.block = start;
        self.next = start + 64;
        self.quotes = quotes & valid;
        if !CHECK {
            return;
        }
        let inside = prefix_xor(quotes) ^ self.inside_carry;
        self.inside_carry = ((inside as i64) >> 63) as u64;
        let in_string = inside & valid;
        let escaped = escaped & in_string;
        let mut bad = c.control & in_string;
        if escaped != 0 {
            bad |= bad_escapes(b, start, &block, escaped);
        }
        self.bad = bad;
    }
}

impl<const CHECK: bool> StringEnds for Marks<CHECK> {
    #[inline]
    fn number(&mut self, tok: &[u8]) {
        if self.numbers_plain && !number_plain(tok) {
            self.numbers_plain = false;
        }
    }

    #[inline]
    fn string_end(&mut self, b: &[u8], open: usize) -> Result<usize, ScanError> {
        while open >= self.next {
            self.advance(b);
        }
        // The bits after `open` in its block.
        let mut after = !((2u64 << (open - self.block)).wrapping_sub(1));
        loop {
            let quotes = self.quotes & after;
            let bad = self.bad & after;
            if quotes != 0 {
                let at = quotes.trailing_zeros();
                if bad & ((1u64 << at) - 1) != 0 {
                    return Err(ScanError::Syntax);
                }
                return Ok(self.block + at as usize + 1);
            }
            if bad != 0 {
                return Err(ScanError::Syntax);
            }
            if self.next >= b.len() {
                return Err(ScanError::Incomplete);
            }
            self.advance(b);
            after = u64::MAX;
        }
    }
}

/// The definition: reads a string one byte at a time.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct Sequential;

#[cfg(test)]
impl StringEnds for Sequential {
    fn string_end(&mut self, b: &[u8], open: usize) -> Result<usize, ScanError> {
        let mut pos = open + 1;
        loop {
            match *b.get(pos).ok_or(ScanError::Incomplete)? {
                b'"' => return Ok(pos + 1),
                b'\\' => {
                    pos += 1;
                    match *b.get(pos).ok_or(ScanError::Incomplete)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => pos += 1,
                        b'u' => {
                            for i in 1..=4 {
                                if !b.get(pos + i).ok_or(ScanError::Incomplete)?.is_ascii_hexdigit() {
                                    return Err(ScanError::Syntax);
                                }
                            }
                            pos += 5;
                        }
                        _ => return Err(ScanError::Syntax),
                    }
                }
                c if c < 0x20 => return Err(ScanError::Syntax),
                _ => pos += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Bytes that exercise every class: quotes, backslashes, escape letters, hex
    /// digits, control characters, plain ASCII and UTF-8.
    fn byte() -> impl Strategy<Value = u8> {
        prop_oneof![
            4 => Just(b'"'),
            6 => Just(b'\\'),
            2 => prop::sample::select(b"nrtbfu/".to_vec()),
            2 => prop::sample::select(b"0123456789aAfF".to_vec()),
            1 => 0u8..0x20,
            6 => 0x20u8..0x7f,
            1 => 0x80u8..=0xff,
        ]
    }

    /// Asks for the ends of strings as the grammar walker would: each opens at the
    /// first quote after the previous one's end, and the walk stops at a backslash
    /// outside strings (the walker rejects the text there).
    fn all_ends(ends: &mut impl StringEnds, b: &[u8]) -> Vec<Result<usize, ScanError>> {
        let mut out = Vec::new();
        let mut pos = 0;
        while let Some(open) = b[pos..].iter().position(|&c| c == b'"').map(|i| pos + i) {
            if b[pos..open].contains(&b'\\') {
                break;
            }
            let r = ends.string_end(b, open);
            out.push(r);
            match r {
                Ok(end) => pos = end,
                Err(_) => break,
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Walking from string to string, the block index finds the same ends and the
        /// same errors as reading byte by byte.
        #[test]
        fn marks_agree_with_sequential(text in prop::collection::vec(byte(), 0..300)) {
            let expected = all_ends(&mut Sequential, &text);
            prop_assert_eq!(all_ends(&mut Checked::new(0), &text), expected.clone());
            // Without checking, the ends of valid strings are the same.
            let valid: Vec<_> = expected.iter().take_while(|r| r.is_ok()).collect();
            let quotes = all_ends(&mut Quotes::new(0), &text);
            prop_assert_eq!(quotes.iter().take(valid.len()).collect::<Vec<_>>(), valid);
        }

        /// Strings with long runs: ends past several blocks, and backslash runs across
        /// block boundaries.
        #[test]
        fn marks_agree_across_blocks(
            pad in 0usize..70,
            run in 0usize..5,
            body in prop::collection::vec(prop_oneof![8 => Just(b'a'), 2 => Just(b'\\'), 1 => Just(b'"'), 1 => Just(b'u'), 1 => Just(b'\t')], 0..200),
        ) {
            let mut b = vec![b' '; pad];
            b.push(b'"');
            b.extend(std::iter::repeat_n(b'x', 60));
            b.extend(std::iter::repeat_n(b'\\', run));
            b.extend_from_slice(&body);
            prop_assert_eq!(all_ends(&mut Checked::new(0), &b), all_ends(&mut Sequential, &b));
        }
    }

    #[test]
    fn escapes_at_the_end_are_torn_not_wrong() {
        for text in [&br#""abc\"#[..], br#""\u12"#, br#""\u"#, br#""ab"#] {
            assert_eq!(Checked::new(0).string_end(text, 0), Err(ScanError::Incomplete), "{text:?}");
        }
        for text in [&br#""\u12x"#[..], br#""\x""#, b"\"a\tb\"", br#""\u12"""#] {
            assert_eq!(Checked::new(0).string_end(text, 0), Err(ScanError::Syntax), "{text:?}");
        }
        assert_eq!(Checked::new(0).string_end(br#""\\\"\u00e9""#, 0), Ok(12));
    }
}
