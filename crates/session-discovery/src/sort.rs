//! How the references order sessions: V8's `Array.prototype.sort` (pi sorts by
//! `modified` with a comparator that is no order when a date is invalid) and ICU root
//! collation (`localeCompare`, which orders file names in both references).

use crate::info::SessionInfo;

/// Sorts newest `modified` first; ties keep their order. With an Invalid Date
/// (`None`) among them, pi's comparator (`b - a`, `NaN` for it) is no order at all and
/// the result is what V8's sort makes of it: below 64 sessions it is reproduced
/// exactly ([`v8_short_sort`]); from 64 on, Invalid Dates go last.
pub(crate) fn sort_by_modified(v: &mut [SessionInfo]) {
    if v.len() < 64 && v.iter().any(|s| s.modified.is_none()) {
        v8_short_sort(v, |a, b| match (a.modified, b.modified) {
            (Some(a), Some(b)) => (b - a) as f64,
            _ => f64::NAN,
        });
        return;
    }
    // Sorting (key, index) pairs and then moving each info once is cheaper than a
    // merge sort moving the large infos around; the index keeps it stable.
    v.sort_by_cached_key(|s| std::cmp::Reverse(s.modified));
}

/// V8's `Array.prototype.sort` for fewer than 64 elements (its TimSort makes one run:
/// the leading ascending or strictly descending run, then binary insertion), with a
/// comparator that may answer `NaN` (neither less nor more: treated as "not less").
fn v8_short_sort<T>(v: &mut [T], compare: impl Fn(&T, &T) -> f64) {
    let n = v.len();
    if n < 2 {
        return;
    }
    // CountAndMakeRun(0, n).
    let descending = compare(&v[1], &v[0]) < 0.0;
    let mut run = 2;
    while run < n {
        let order = compare(&v[run], &v[run - 1]);
        // `order >= 0` and `order < 0` are both false for NaN: the run goes on.
        if (descending && order >= 0.0) || (!descending && order < 0.0) {
            break;
        }
        run += 1;
    }
    if descending {
        v[..run].reverse();
    }
    // BinaryInsertionSort(0, run, n).
    for start in run..n {
        let (mut left, mut right) = (0, start);
        while left < right {
            let mid = left + ((right - left) >> 1);
            if compare(&v[start], &v[mid]) < 0.0 {
                right = mid;
            } else {
                left = mid + 1;
            }
        }
        v[left..=start].rotate_right(1);
    }
}

/// omp's order: `modified` desc, then `created` desc (invalid as 0), then path in
/// reverse locale order.
pub(crate) fn sort_omp(v: &mut [SessionInfo]) {
    use std::cmp::Reverse;
    // Keys computed once: ties on the times (files copied together) are common.
    v.sort_by_cached_key(|s| {
        (Reverse(s.modified), Reverse(s.created.unwrap_or(0)), Reverse(collation_key(&s.path.to_string_lossy())))
    });
}

/// A character's primary collation weight: its class (punctuation and symbols,
/// digits, letters) and its value (letters lower-cased).
fn primary_weight(c: char) -> (u8, u32) {
    if c.is_ascii_digit() {
        (1, c as u32)
    } else if c.is_alphabetic() {
        (2, c.to_lowercase().next().unwrap_or(c) as u32)
    } else {
        (0, c as u32)
    }
}

/// A key whose plain order approximates ICU root collation (`localeCompare`) for
/// file names: punctuation and symbols sort before digits, digits before letters,
/// letters compare case-insensitively first (lower case first on ties), then code
/// points. Sorting with keys computes each once.
///
/// The key is bytes in three parts, each ended by a 0 that sorts before every
/// element, so that its plain order is the order of the parts in turn: the primary
/// weights (class, then the lower-cased character; see [`push_primary`]), then the
/// case of each character, then the bytes (each offset by one). Keys of ASCII names
/// take one byte per element and compare with `memcmp`.
pub(crate) fn collation_key(name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(name.len() * 3 + 2);
    for c in name.chars() {
        push_primary(&mut key, primary_weight(c));
    }
    key.push(0);
    key.extend(name.chars().map(|c| 1 + u8::from(c.is_uppercase())));
    key.push(0);
    // UTF-8 never holds 0xFF, so the offset bytes stay in range.
    key.extend(name.bytes().map(|b| b.saturating_add(1)));
    key
}

/// Appends a primary weight as bytes whose order is the weights' order: a code's
/// first byte says how long it is and sorts the groups (ASCII symbols, other
/// symbols, digits, letters below `a`, `a` to `z`, other letters); a long code
/// follows its group's byte with the value in three big-endian bytes. No code is a
/// prefix of another, so comparing the concatenations compares the sequences.
fn push_primary(key: &mut Vec<u8>, (class, value): (u8, u32)) {
    let [_, hi, mid, lo] = value.to_be_bytes();
    match (class, value) {
        // Below 0x80, so the code stays below 0x81.
        (0, 0..=0x7f) => key.push(value as u8 + 1),
        (0, _) => key.extend_from_slice(&[0x81, hi, mid, lo]),
        // Digits are ASCII digits: 0x82 to 0x8b.
        (1, _) => key.push(0x82 + (value as u8).wrapping_sub(b'0').min(9)),
        (_, 0..=0x60) => key.extend_from_slice(&[0x8c, hi, mid, lo]),
        (_, 0x61..=0x7a) => key.push(0x8d + (value as u8 - b'a')),
        (_, _) => key.extend_from_slice(&[0xa7, hi, mid, lo]),
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;

    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// With a comparator that is an order, V8's short sort is a stable sort.
        #[test]
        fn v8_short_sort_is_stable_for_an_order(keys in proptest::collection::vec(0i64..6, 0..63)) {
            let mut v: Vec<(i64, usize)> = keys.iter().copied().zip(0..).collect();
            let mut want = v.clone();
            want.sort_by_key(|&(k, _)| std::cmp::Reverse(k));
            v8_short_sort(&mut v, |a, b| (b.0 - a.0) as f64);
            prop_assert_eq!(v, want);
        }
    }

    /// What pi 1.6.0 listed for testdata/conformance-odd/b/pi/message-timestamps (file
    /// names descending, two Invalid Dates among them): the order it was given, where
    /// an order-respecting sort would move the 8.64e15 session first.
    #[test]
    fn v8_short_sort_with_invalid_dates_as_pi_lists_them() {
        const T: i64 = 1_767_225_600_000;
        let input = [
            (0x1d, Some(T)),
            (0x1c, None),
            (0x1b, Some(8_640_000_000_000_000)),
            (0x1a, Some(T + 1000)),
            (0x19, Some(T)),
            (0x18, Some(T)),
            (0x17, None),
            (0x16, Some(T)),
            (0x15, Some(1)),
        ];
        let mut v = input.to_vec();
        v8_short_sort(&mut v, |a: &(i32, Option<i64>), b| match (a.1, b.1) {
            (Some(a), Some(b)) => (b - a) as f64,
            _ => f64::NAN,
        });
        assert_eq!(v, input);
        // Without the Invalid Dates it is an order, and the newest comes first.
        let mut valid: Vec<_> = input.iter().copied().filter(|x| x.1.is_some()).collect();
        v8_short_sort(&mut valid, |a, b| (b.1.unwrap() - a.1.unwrap()) as f64);
        assert_eq!(valid.iter().map(|x| x.0).collect::<Vec<_>>(), [0x1b, 0x1a, 0x1d, 0x19, 0x18, 0x16, 0x15]);
    }

    /// `localeCompare` as the rule reads, one comparison at a time.
    fn locale_compare(a: &str, b: &str) -> Ordering {
        a.chars()
            .map(primary_weight)
            .cmp(b.chars().map(primary_weight))
            .then_with(|| a.chars().map(char::is_uppercase).cmp(b.chars().map(char::is_uppercase)))
            .then_with(|| a.cmp(b))
    }

    proptest! {
        #[test]
        fn collation_keys_order_like_the_comparison(a in "[ -~éÉßİ\u{212a}€\u{80}\u{ff}\u{10ffff}日😀]{0,12}", b in "[ -~éÉßİ\u{212a}€\u{80}\u{ff}\u{10ffff}日😀]{0,12}") {
            prop_assert_eq!(collation_key(&a).cmp(&collation_key(&b)), locale_compare(&a, &b));
        }

        #[test]
        fn primary_codes_order_like_the_weights(
            a in prop_oneof![any::<char>(), proptest::char::range('\0', '\u{7f}')],
            b in prop_oneof![any::<char>(), proptest::char::range('\0', '\u{7f}')],
        ) {
            let code = |c: char| {
                let mut key = Vec::new();
                push_primary(&mut key, primary_weight(c));
                key
            };
            prop_assert_eq!(code(a).cmp(&code(b)), primary_weight(a).cmp(&primary_weight(b)));
        }
    }

    #[test]
    fn session_names_order() {
        let mut v = vec!["b_2.jsonl", "B_1.jsonl", "a-1.jsonl", "_z.jsonl", "10.jsonl", "9.jsonl"];
        v.sort_by_cached_key(|n| collation_key(n));
        assert_eq!(v, ["_z.jsonl", "10.jsonl", "9.jsonl", "a-1.jsonl", "B_1.jsonl", "b_2.jsonl"]);
    }
}
