//! Entry ids, session ids and the custom session id rule.
//!
//! * Entry ids are 8 lowercase hex characters (32 random bits), checked against the
//!   ids already in use; after 100 collisions pi falls back to a full UUIDv4 and omp
//!   to a 16-hex Snowflake.
//! * Session ids are UUIDv7 strings, monotonic within one [`SessionIdGenerator`].
//! * A caller-chosen session id must match
//!   `^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$` ([`validate_custom_session_id`]).
//!
//! Ids read from files are never validated: readers accept any string.
//!
//! Randomness and time are inputs here; this crate reads no clock.

use rand::Rng;

use crate::Dialect;

const HEX: &[u8; 16] = b"0123456789abcdef";

fn hex_u32(v: u32) -> String {
    (0..8).map(|i| HEX[((v >> (28 - 4 * i)) & 0xf) as usize] as char).collect()
}

/// Returns a fresh entry id: 8 lowercase hex characters not accepted by `taken`.
///
/// ```
/// use rand::SeedableRng;
/// let mut rng = rand::rngs::StdRng::seed_from_u64(7);
/// let id = session_model::ids::new_entry_id(session_model::Dialect::Pi, &mut rng, |id| id == "x");
/// assert_eq!(id.len(), 8);
/// assert!(id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
/// ```
pub fn new_entry_id<R: Rng + ?Sized>(dialect: Dialect, rng: &mut R, taken: impl Fn(&str) -> bool) -> String {
    for _ in 0..100 {
        let id = hex_u32(rng.next_u32());
        if !taken(&id) {
            return id;
        }
    }
    match dialect {
        Dialect::Pi => uuid_v4(rng),
        Dialect::Omp => format!("{:016x}", rng.next_u64()),
    }
}

/// Returns a random lowercase, hyphenated UUIDv4.
pub fn uuid_v4<R: Rng + ?Sized>(rng: &mut R) -> String {
    let mut b = [0u8; 16];
    rng.fill_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    format_uuid(&b)
}

fn format_uuid(b: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(HEX[(byte >> 4) as usize] as char);
        s.push(HEX[(byte & 0xf) as usize] as char);
    }
    s
}

/// Mints UUIDv7 session ids: 48-bit millisecond time, a 41-bit counter that starts
/// from random bits and increments on every call, and random tail bits. Ids from
/// one generator are strictly increasing even when the clock stands still or
/// steps back.
#[derive(Debug, Default)]
pub struct SessionIdGenerator {
    last_ms: u64,
    counter: Option<u64>,
}

impl SessionIdGenerator {
    /// Creates a generator.
    pub fn new() -> SessionIdGenerator {
        SessionIdGenerator::default()
    }

    /// Returns the next id for the wall-clock time `now_ms` (epoch milliseconds).
    ///
    /// ```
    /// use rand::SeedableRng;
    /// let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    /// let mut g = session_model::ids::SessionIdGenerator::new();
    /// let a = g.next(1_795_981_423_043, &mut rng);
    /// let b = g.next(1_795_981_423_000, &mut rng); // the clock stepped back
    /// assert!(a < b);
    /// assert_eq!(&a[14..15], "7");
    /// ```
    pub fn next<R: Rng + ?Sized>(&mut self, now_ms: u64, rng: &mut R) -> String {
        const COUNTER_BITS: u32 = 41;
        let mask = (1u64 << COUNTER_BITS) - 1;
        let mut counter = self.counter.map_or_else(|| rng.next_u64() & ((1u64 << 40) - 1), |c| c + 1);
        let ms = now_ms.max(self.last_ms);
        if counter > mask {
            // Counter overflow: borrow a millisecond rather than break monotonicity.
            self.last_ms = ms + 1;
            counter &= (1u64 << 40) - 1;
        } else {
            self.last_ms = ms;
        }
        self.counter = Some(counter);
        let ms = self.last_ms & ((1u64 << 48) - 1);
        let mut b = [0u8; 16];
        b[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
        // 12 counter bits in rand_a, 29 in the top of rand_b (after the variant).
        let hi = (counter >> 29) as u16; // 12 bits
        let lo = (counter & ((1 << 29) - 1)) as u32; // 29 bits
        b[6] = 0x70 | ((hi >> 8) as u8 & 0x0f);
        b[7] = hi as u8;
        let rand_tail = rng.next_u32();
        let rb: u64 = (0b10u64 << 62) | (u64::from(lo) << 33) | (u64::from(rand_tail) << 1) | 1;
        b[8..].copy_from_slice(&rb.to_be_bytes());
        format_uuid(&b)
    }
}

/// Why a caller-chosen session id was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "Session id must be non-empty, contain only alphanumeric characters, '-', '_', and '.', and start and end with an alphanumeric character"
)]
pub struct InvalidSessionId;

/// Checks a caller-chosen session id against pi's rule (the reference's message).
///
/// ```
/// use session_model::ids::validate_custom_session_id as v;
/// assert!(v("my-custom-id").is_ok());
/// assert!(v("a").is_ok());
/// assert!(v("bad id").is_err());
/// assert!(v("-x").is_err());
/// assert!(v("x.").is_err());
/// assert!(v("").is_err());
/// ```
pub fn validate_custom_session_id(id: &str) -> Result<(), InvalidSessionId> {
    let b = id.as_bytes();
    let ok = !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'));
    if ok { Ok(()) } else { Err(InvalidSessionId) }
}

/// Returns whether `s` is a lowercase hyphenated UUIDv7.
pub fn is_uuid_v7(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(c),
        })
        && b[14] == b'7'
        && matches!(b[19], b'8' | b'9' | b'a' | b'b')
}

/// The id of an entry, as an append returns it and as the tree is navigated by it.
///
/// New entries get 8 lowercase hex characters ([`new_entry_id`]); an id read from a file
/// is whatever string it holds. It reads as a `&str` wherever one is taken (it
/// dereferences to `str`), compares with strings, and serializes as a JSON string.
///
/// ```
/// use session_model::ids::EntryId;
///
/// let id = EntryId::from("0a1b2c3d");
/// assert_eq!(id, "0a1b2c3d");
/// assert_eq!(id.len(), 8);
/// assert_eq!(format!("{id}"), "0a1b2c3d");
/// assert_eq!(serde_json::to_string(&id).unwrap(), r#""0a1b2c3d""#);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct EntryId(String);

impl EntryId {
    /// Returns the id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Returns the id's string.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl std::ops::Deref for EntryId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for EntryId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for EntryId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for EntryId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for EntryId {
    fn from(id: String) -> EntryId {
        EntryId(id)
    }
}

impl From<&str> for EntryId {
    fn from(id: &str) -> EntryId {
        EntryId(id.to_owned())
    }
}

impl From<EntryId> for String {
    fn from(id: EntryId) -> String {
        id.0
    }
}

impl PartialEq<str> for EntryId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for EntryId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for EntryId {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl PartialEq<EntryId> for str {
    fn eq(&self, other: &EntryId) -> bool {
        self == other.0
    }
}

impl PartialEq<EntryId> for &str {
    fn eq(&self, other: &EntryId) -> bool {
        *self == other.0
    }
}

impl PartialEq<EntryId> for String {
    fn eq(&self, other: &EntryId) -> bool {
        *self == other.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn v7_shape_and_monotonic() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut g = SessionIdGenerator::new();
        let mut prev = String::new();
        for i in 0..1000u64 {
            let id = g.next(1_700_000_000_000 + i / 10, &mut rng);
            assert!(is_uuid_v7(&id), "{id}");
            assert!(id > prev);
            prev = id;
        }
    }

    #[test]
    fn collisions_fall_back() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        assert_eq!(new_entry_id(Dialect::Pi, &mut rng, |_| true).len(), 36);
        assert_eq!(new_entry_id(Dialect::Omp, &mut rng, |_| true).len(), 16);
    }
}
