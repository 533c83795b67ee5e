//! JSON values built from fuzz bytes for the serializer target: every kind of value,
//! strings rich in what JavaScript escapes (and long enough to cross the scanner's
//! 64-byte blocks), numbers where JavaScript's formatting is tricky, and keys that
//! JavaScript orders first (array indexes) or that the record skeleton reads.

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use serde_json::{Map, Number, Value};

/// Characters that exercise escaping and decoding.
const CHARS: &[char] = &[
    'a', 'z', '0', ' ', '"', '\\', '/', '\n', '\r', '\t', '\u{0}', '\u{1}', '\u{8}', '\u{c}', '\u{1f}', '\u{7f}',
    '\u{85}', '\u{a0}', '\u{2028}', '\u{2029}', '\u{feff}', '\u{fffd}', 'é', '日', '🚀', '{', '}', '[', ']', ':', ',',
    'u',
];

/// Keys the record skeleton reads, and keys JavaScript orders as array indexes (or
/// nearly: `"01"`, `"4294967295"` are ordinary keys).
const KEYS: &[&str] = &[
    "type",
    "id",
    "parentId",
    "timestamp",
    "message",
    "role",
    "content",
    "version",
    "0",
    "1",
    "10",
    "2",
    "01",
    "-1",
    "4294967294",
    "4294967295",
    "",
];

/// Numbers where `Number::prototype.toString` is tricky.
const NUMBERS: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.1,
    1e21,
    1e20,
    1e-7,
    1e-6,
    5e-324,
    1.7976931348623157e308,
    9007199254740992.0,
    9007199254740993.0,
    123456789012345680000.0,
    0.30000000000000004,
    1.5e300,
    -2.5e-8,
];

/// Builds a value of at most `depth` levels of nesting from `u`.
pub fn value(u: &mut Unstructured<'_>, depth: usize) -> Result<Value> {
    let kinds = if depth == 0 { 4 } else { 6 };
    Ok(match u.int_in_range(0..=kinds)? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::Number(number(u)?),
        3 | 4 => Value::String(string(u)?),
        5 => {
            let n = u.int_in_range(0..=6)?;
            Value::Array((0..n).map(|_| value(u, depth - 1)).collect::<Result<_>>()?)
        }
        _ => {
            let n = u.int_in_range(0..=6)?;
            let mut map = Map::new();
            for _ in 0..n {
                let k = key(u)?;
                map.insert(k, value(u, depth - 1)?);
            }
            Value::Object(map)
        }
    })
}

/// Builds a number: a tricky one, an integer of any size, or any finite `f64`.
pub fn number(u: &mut Unstructured<'_>) -> Result<Number> {
    Ok(match u.int_in_range(0..=4)? {
        0 => Number::from_f64(*u.choose(NUMBERS)?).unwrap_or_else(|| Number::from(0)),
        1 => Number::from(u.arbitrary::<u64>()?),
        2 => Number::from(u.arbitrary::<i64>()?),
        3 => Number::from(u.int_in_range(-1000i64..=1000)?),
        _ => Number::from_f64(f64::from_bits(u.arbitrary()?)).unwrap_or_else(|| Number::from(1)),
    })
}

/// Builds a string: any UTF-8, or one made of the characters that matter, up to a
/// few hundred bytes.
pub fn string(u: &mut Unstructured<'_>) -> Result<String> {
    if u.ratio(1, 3)? {
        return u.arbitrary();
    }
    let n = u.int_in_range(0..=150)?;
    let mut s = String::new();
    for _ in 0..n {
        s.push(*u.choose(CHARS)?);
    }
    Ok(s)
}

/// Builds an object key: one of [`KEYS`], an index-like number, or a string.
pub fn key(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(match u.int_in_range(0..=2)? {
        0 => (*u.choose(KEYS)?).to_owned(),
        1 => u.arbitrary::<u32>()?.to_string(),
        _ => string(u)?,
    })
}
