//! A fast hasher for entry ids.
//!
//! Ids are short (8 hex digits in pi, 8 to 36 characters in general) and the index
//! hashes every id of a session on load and on each lookup, where SipHash's cost
//! shows. This one reads eight bytes at a time, starts from a per-process random
//! seed (so crafted ids cannot be chosen to collide in advance), and finishes with
//! a full 64-bit avalanche, since the table keys its buckets on the high bits.
//!
//! ```
//! use session_model::idhash::IdSet;
//! let mut seen = IdSet::default();
//! assert!(seen.insert("3c075b4d"));
//! assert!(!seen.insert("3c075b4d"));
//! ```

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// Builds [`IdHasher`]s that share this process's random seed.
#[derive(Clone, Copy, Debug)]
pub struct IdHashState {
    seed: u64,
}

impl Default for IdHashState {
    fn default() -> IdHashState {
        static SEED: OnceLock<u64> = OnceLock::new();
        let seed = *SEED.get_or_init(|| {
            // The standard library's per-process random keys, without another dependency.
            std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64)
        });
        IdHashState { seed }
    }
}

impl BuildHasher for IdHashState {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher { h: self.seed }
    }
}

/// The hasher of [`IdHashState`]; see the module documentation.
#[derive(Debug)]
pub struct IdHasher {
    h: u64,
}

const K: u64 = 0x9e37_79b9_7f4a_7c15;

impl IdHasher {
    #[inline]
    fn mix(&mut self, w: u64) {
        self.h = (self.h.rotate_left(23) ^ w).wrapping_mul(K);
    }
}

impl Hasher for IdHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.mix(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.mix(u64::from(i) | 0x100);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // murmur3's fmix64.
        let mut h = self.h;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// A map keyed by ids.
pub type IdMap<K, V> = std::collections::HashMap<K, V, IdHashState>;
/// A set of ids.
pub type IdSet<K> = std::collections::HashSet<K, IdHashState>;

/// An id as a map key that holds short ids in place (up to 22 bytes, which covers
/// every id the agents mint) and longer ones on the heap: a large session's index
/// then makes no allocation per entry, and a lookup reads no second place in memory.
///
/// It hashes and compares as the bytes of the id it holds, so an `IdMap<IdKey, V>` is
/// looked up with `id.as_bytes()` (no UTF-8 check on the way).
///
/// ```
/// use session_model::idhash::{IdKey, IdMap};
/// let mut m: IdMap<IdKey, u32> = IdMap::default();
/// m.insert(IdKey::new("3c075b4d"), 1);
/// let long = "x".repeat(40);
/// m.insert(IdKey::new(&long), 2);
/// assert_eq!((m.get(&b"3c075b4d"[..]), m.get(long.as_bytes())), (Some(&1), Some(&2)));
/// ```
#[derive(Clone)]
pub enum IdKey {
    /// An id of at most [`IdKey::INLINE`] bytes: its length and bytes.
    Inline(u8, [u8; IdKey::INLINE]),
    /// A longer id.
    Heap(Box<str>),
}

impl IdKey {
    /// The longest id held in place.
    pub const INLINE: usize = 22;

    /// Returns the key of `id`.
    #[inline]
    pub fn new(id: &str) -> IdKey {
        let len = id.len();
        if len <= IdKey::INLINE {
            let mut buf = [0u8; IdKey::INLINE];
            buf[..len].copy_from_slice(id.as_bytes());
            IdKey::Inline(len as u8, buf)
        } else {
            IdKey::Heap(id.into())
        }
    }

    /// Returns the id's bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            IdKey::Inline(len, buf) => &buf[..usize::from(*len)],
            IdKey::Heap(s) => s.as_bytes(),
        }
    }

    /// Returns the id.
    pub fn as_str(&self) -> &str {
        match self {
            // Bytes copied from a `str`, cut at its end: always UTF-8.
            IdKey::Inline(..) => std::str::from_utf8(self.as_bytes()).unwrap_or_default(),
            IdKey::Heap(s) => s,
        }
    }
}

impl std::borrow::Borrow<[u8]> for IdKey {
    #[inline]
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl std::hash::Hash for IdKey {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl PartialEq for IdKey {
    #[inline]
    fn eq(&self, other: &IdKey) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for IdKey {}

impl std::fmt::Debug for IdKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<&str> for IdKey {
    fn from(id: &str) -> IdKey {
        IdKey::new(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_ids_hash_equal_and_near_ids_differ() {
        let s = IdHashState::default();
        assert_eq!(s.hash_one("3c075b4d"), s.hash_one("3c075b4d"));
        let mut seen = std::collections::HashSet::new();
        for i in 0..10_000u32 {
            assert!(seen.insert(s.hash_one(format!("{i:08x}"))), "collision at {i}");
        }
        // Length is part of the hash: a prefix padded with zero bytes is another id.
        assert_ne!(s.hash_one("ab"), s.hash_one("ab\0"));
    }

    #[test]
    fn keys_hash_and_compare_as_their_ids() {
        let s = IdHashState::default();
        for id in ["", "a", "3c075b4d", "0123456789abcdef012345", "0123456789abcdef0123456", "é\u{1F680}"] {
            let k = IdKey::new(id);
            assert_eq!(k.as_str(), id);
            assert_eq!(s.hash_one(&k), s.hash_one(id.as_bytes()));
            assert_eq!(matches!(k, IdKey::Inline(..)), id.len() <= IdKey::INLINE);
        }
        assert_eq!(std::mem::size_of::<IdKey>(), 24);
    }

    #[test]
    fn high_bits_spread() {
        // The table picks buckets by the high bits: ids that differ in one digit must
        // not share them.
        let s = IdHashState::default();
        let tops: std::collections::HashSet<u64> = (0..256u32).map(|i| s.hash_one(format!("{i:08x}")) >> 56).collect();
        assert!(tops.len() > 128, "only {} distinct top bytes", tops.len());
    }
}
