//! Oracles and helpers shared by the fuzz targets in `fuzz_targets/`.
//!
//! * [`model`]: a naive recursive-descent JSON reader, the reference the scanner's
//!   spans and error kinds are compared with;
//! * [`values`]: JSON values built from fuzz bytes, for the serializer;
//! * [`session`]: the checks of one lenient parse of a session file, shared by the
//!   `parse_pi` and `parse_omp` targets (and reused by `migrate`).
//!
//! Every check panics with a message naming the broken property: a panic is what
//! libFuzzer reports as a crash.

#![forbid(unsafe_code)]

pub mod model;
pub mod session;
pub mod values;

/// Returns a 64-bit FNV-1a hash of `data`: the fuzz targets derive their secondary
/// choices (piece sizes, depths) from it so that an input is still the file itself.
pub fn hash(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// Returns the offset of `part` in `whole`, which must be a subslice of it.
pub fn offset_in(whole: &str, part: &str) -> usize {
    let at = (part.as_ptr() as usize).wrapping_sub(whole.as_ptr() as usize);
    assert!(at + part.len() <= whole.len(), "a span {part:?} lies outside its text");
    at
}

/// Returns whether two JSON values are the same JavaScript value: numbers compared
/// as `f64` (serde_json tells `0` from `0.0`, JavaScript does not), objects by their
/// members whatever their order (JavaScript orders integer-like keys first).
pub fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        (x, y) => x == y,
    }
}
