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
    fn high_bits_spread() {
        // The table picks buckets by the high bits: ids that differ in one digit must
        // not share them.
        let s = IdHashState::default();
        let tops: std::collections::HashSet<u64> = (0..256u32).map(|i| s.hash_one(format!("{i:08x}")) >> 56).collect();
        assert!(tops.len() > 128, "only {} distinct top bytes", tops.len());
    }
}
