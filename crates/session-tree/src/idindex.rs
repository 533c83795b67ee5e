//! The id index of a [`crate::SessionTree`]: from an id to its slot (the id's place in
//! first-insertion order, which `slot_pos` turns into the position of the latest entry
//! with that id).
//!
//! An open-addressing table of 8-byte cells (32 bits of the id's hash and the slot),
//! probed linearly and at most half full. It holds no id: a cell whose hash bits match
//! is confirmed by comparing the id of the entry its slot names, which the caller
//! gives as [`Keys`]. A table of a session's slots is then a few bytes per entry and
//! small enough to stay in the processor's cache far longer than a map of owned keys,
//! which is what loading a large session spends most of its indexing time on.
//!
//! Hashes come from [`IdHashState`] (seeded per process), so ids cannot be chosen to
//! collide in advance.

use std::borrow::Cow;
use std::hash::BuildHasher;

use session_model::Record;
use session_model::idhash::IdHashState;

/// A free cell.
const EMPTY: u64 = 0;

/// What the index needs to confirm a match: the entries and the position of each
/// slot's latest entry.
#[derive(Clone, Copy)]
pub(crate) struct Keys<'a> {
    pub(crate) entries: &'a [Record],
    pub(crate) slot_pos: &'a [usize],
}

impl<'a> Keys<'a> {
    /// Returns the id of slot `slot` (as the id map keys it).
    fn id(&self, slot: u32) -> Option<Cow<'a, str>> {
        self.entries.get(*self.slot_pos.get(slot as usize)?)?.id_key()
    }
}

/// The id → slot table.
#[derive(Clone, Debug)]
pub(crate) struct IdIndex {
    cells: Vec<u64>,
    len: usize,
    hasher: IdHashState,
}

impl IdIndex {
    /// Returns an index with room for `n` ids before it grows.
    pub(crate) fn with_capacity(n: usize) -> IdIndex {
        IdIndex { cells: vec![EMPTY; cells_for(n)], len: 0, hasher: IdHashState::default() }
    }

    /// Returns how many ids it holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn hash(&self, id: &[u8]) -> u64 {
        self.hasher.hash_one(id)
    }

    fn mask(&self) -> usize {
        self.cells.len() - 1
    }

    /// Returns where `id` is (`Ok`: its cell and slot) or where it would go (`Err`:
    /// the free cell that ends its probe).
    fn probe(&self, id: &[u8], h: u64, keys: Keys<'_>) -> Result<(usize, u32), usize> {
        let tag = h >> 32;
        let mut i = (h as usize) & self.mask();
        loop {
            let c = self.cells[i];
            if c == EMPTY {
                return Err(i);
            }
            let slot = (c as u32).wrapping_sub(1);
            if c >> 32 == tag && keys.id(slot).is_some_and(|k| k.as_bytes() == id) {
                return Ok((i, slot));
            }
            i = (i + 1) & self.mask();
        }
    }

    /// Returns the slot of `id`.
    pub(crate) fn get(&self, id: &[u8], keys: Keys<'_>) -> Option<u32> {
        self.probe(id, self.hash(id), keys).ok().map(|(_, slot)| slot)
    }

    /// Returns the slot of `id` if it is there; otherwise files `id` under `slot` (which
    /// `keys` need not know yet) and returns `None`.
    pub(crate) fn get_or_insert(&mut self, id: &[u8], slot: u32, keys: Keys<'_>) -> Option<u32> {
        if (self.len + 1) * 2 > self.cells.len() {
            self.grow(keys);
        }
        let h = self.hash(id);
        match self.probe(id, h, keys) {
            Ok((_, found)) => Some(found),
            Err(free) => {
                self.cells[free] = (h & !0xffff_ffff) | u64::from(slot.wrapping_add(1));
                self.len += 1;
                None
            }
        }
    }

    /// Removes `id`, filed under `slot`.
    pub(crate) fn remove(&mut self, id: &[u8], keys: Keys<'_>) {
        let Ok((mut hole, _)) = self.probe(id, self.hash(id), keys) else { return };
        // Backward-shift deletion: later cells of the same run move up into the hole
        // unless their own home lies between the hole and them.
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let c = self.cells[j];
            if c == EMPTY {
                break;
            }
            let Some(home) = keys.id((c as u32).wrapping_sub(1)).map(|k| (self.hash(k.as_bytes()) as usize) & mask)
            else {
                continue;
            };
            let stays = if hole <= j { hole < home && home <= j } else { hole < home || home <= j };
            if !stays {
                self.cells[hole] = c;
                hole = j;
            }
        }
        self.cells[hole] = EMPTY;
        self.len -= 1;
    }

    /// Doubles the table, filing every id again (their hashes from `keys`).
    fn grow(&mut self, keys: Keys<'_>) {
        let old = std::mem::replace(&mut self.cells, vec![EMPTY; cells_for(self.len * 2 + 2)]);
        let mask = self.mask();
        for c in old.into_iter().filter(|&c| c != EMPTY) {
            let Some(id) = keys.id((c as u32).wrapping_sub(1)) else { continue };
            let h = self.hash(id.as_bytes());
            let mut i = (h as usize) & mask;
            while self.cells[i] != EMPTY {
                i = (i + 1) & mask;
            }
            self.cells[i] = (h & !0xffff_ffff) | (c & 0xffff_ffff);
        }
    }
}

/// The index of entries indexed at once ([`IdIndex::build`]), with what inserting them
/// one by one in order would have found.
pub(crate) struct Built {
    pub(crate) index: IdIndex,
    /// For each slot, the position of the latest entry with its id.
    pub(crate) slot_pos: Vec<usize>,
    /// For each entry, its id's slot ([`NONE`] for an entry without an id).
    pub(crate) slot_at: Vec<u32>,
    /// For each entry whose id an earlier entry has, the position of the latest such
    /// entry ([`NONE`] for the first entry with an id).
    pub(crate) prev_at: Vec<u32>,
}

/// No slot, no earlier entry.
pub(crate) const NONE: u32 = u32::MAX;

impl IdIndex {
    /// Indexes `entries` at once, as [`IdIndex::get_or_insert`] for each in order would
    /// (slots in first-insertion order), without its random accesses: the ids' hashes
    /// are sorted by their home cell (a radix sort), equal ids found among equal
    /// hashes, and the cells filled in order, so building the index of a large session
    /// costs a few sequential passes instead of a cache miss per entry.
    pub(crate) fn build(entries: &[Record]) -> Built {
        let n = entries.len();
        let mut index = IdIndex::with_capacity(n);
        let mask = index.mask() as u64;
        // (hash, position) of every entry with an id, in file order.
        let mut items: Vec<(u64, u32)> = Vec::with_capacity(n);
        for (pos, r) in entries.iter().enumerate() {
            if let Some(id) = r.id_key() {
                items.push((index.hash(id.as_bytes()), pos as u32));
            }
        }
        radix_sort_by_home(&mut items, mask);
        // Equal ids hash equal, so they share a home: look among the same home's
        // earlier items (in file order, as the sort is stable).
        let mut prev_at = vec![NONE; n];
        let mut first = vec![false; n];
        let mut group = 0;
        for k in 0..items.len() {
            let (h, pos) = items[k];
            if k > 0 && (items[k - 1].0 & mask) != (h & mask) {
                group = k;
            }
            let earlier = items[group..k]
                .iter()
                .rev()
                .find(|(h2, p2)| *h2 == h && entries[*p2 as usize].id_key() == entries[pos as usize].id_key());
            match earlier {
                Some(&(_, p2)) => prev_at[pos as usize] = p2,
                None => first[pos as usize] = true,
            }
        }
        // Slots in file order of first appearance.
        let mut slot_at = vec![NONE; n];
        let mut slot_pos = Vec::with_capacity(items.len());
        for pos in 0..n {
            if first[pos] {
                slot_at[pos] = slot_pos.len() as u32;
                slot_pos.push(pos);
            } else if prev_at[pos] != NONE {
                let slot = slot_at[prev_at[pos] as usize];
                slot_at[pos] = slot;
                slot_pos[slot as usize] = pos;
            }
        }
        // Cells in home order: each goes to its home or right after the run before it;
        // the few that would run past the end are filed as usual (they wrap around).
        let mut next_free = 0u64;
        let mut wrapped = Vec::new();
        for &(h, pos) in &items {
            if !first[pos as usize] {
                continue;
            }
            let cell = u64::from(slot_at[pos as usize].wrapping_add(1)) | (h & !0xffff_ffff);
            let at = (h & mask).max(next_free);
            if at > mask {
                wrapped.push((h, cell));
                continue;
            }
            index.cells[at as usize] = cell;
            next_free = at + 1;
        }
        for (h, cell) in wrapped {
            let mut i = (h & mask) as usize;
            while index.cells[i] != EMPTY {
                i = (i + 1) & index.mask();
            }
            index.cells[i] = cell;
        }
        index.len = slot_pos.len();
        Built { index, slot_pos, slot_at, prev_at }
    }
}

/// Sorts `items` by their home cell (`hash & mask`), stably: two passes of a radix
/// sort on the home's bits.
fn radix_sort_by_home(items: &mut Vec<(u64, u32)>, mask: u64) {
    let bits = 64 - mask.leading_zeros();
    let low = bits / 2;
    let mut out = vec![(0u64, 0u32); items.len()];
    for (shift, width) in [(0, low), (low, bits - low)] {
        if width == 0 {
            continue;
        }
        let digit = |h: u64| ((h >> shift) & ((1u64 << width) - 1)) as usize;
        let mut counts = vec![0usize; (1usize << width) + 1];
        for &(h, _) in items.iter() {
            counts[digit(h) + 1] += 1;
        }
        for i in 1..counts.len() {
            counts[i] += counts[i - 1];
        }
        for &item in items.iter() {
            let d = digit(item.0);
            out[counts[d]] = item;
            counts[d] += 1;
        }
        std::mem::swap(items, &mut out);
    }
}

/// The cells for `n` ids: at most half full, a power of two.
fn cells_for(n: usize) -> usize {
    (n.max(4) * 2).next_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn record(id: &str) -> Record {
        Record::parse(&format!(r#"{{"type":"custom","id":{}}}"#, serde_json::Value::from(id))).expect("json")
    }

    proptest::proptest! {
        /// Building the index at once finds what inserting the entries one by one finds,
        /// and answers the same afterwards (more appends included).
        #[test]
        fn a_built_index_is_the_one_built_one_by_one(ids in proptest::collection::vec(proptest::option::of(0u16..200), 0..500), more in proptest::collection::vec(0u16..300, 0..50)) {
            let entries: Vec<Record> = ids
                .iter()
                .map(|id| match id {
                    Some(n) => record(&format!("{n:x}")),
                    None => Record::parse(r#"{"type":"custom"}"#).expect("json"),
                })
                .collect();
            let built = IdIndex::build(&entries);
            // One by one.
            let mut index = IdIndex::with_capacity(0);
            let (mut slot_pos, mut slot_at, mut prev_at) = (Vec::new(), Vec::new(), Vec::new());
            for (pos, r) in entries.iter().enumerate() {
                let Some(id) = r.id_key() else {
                    slot_at.push(NONE);
                    prev_at.push(NONE);
                    continue;
                };
                let keys = Keys { entries: &entries, slot_pos: &slot_pos };
                match index.get_or_insert(id.as_bytes(), slot_pos.len() as u32, keys) {
                    Some(slot) => {
                        prev_at.push(slot_pos[slot as usize] as u32);
                        slot_at.push(slot);
                        slot_pos[slot as usize] = pos;
                    }
                    None => {
                        prev_at.push(NONE);
                        slot_at.push(slot_pos.len() as u32);
                        slot_pos.push(pos);
                    }
                }
            }
            proptest::prop_assert_eq!(&built.slot_pos, &slot_pos);
            proptest::prop_assert_eq!(&built.slot_at, &slot_at);
            proptest::prop_assert_eq!(&built.prev_at, &prev_at);
            let (mut a, mut b) = (built.index, index);
            let mut entries = entries;
            let (mut pa, mut pb) = (built.slot_pos, slot_pos);
            for n in more {
                let id = format!("{n:x}");
                let ra = a.get_or_insert(id.as_bytes(), pa.len() as u32, Keys { entries: &entries, slot_pos: &pa });
                let rb = b.get_or_insert(id.as_bytes(), pb.len() as u32, Keys { entries: &entries, slot_pos: &pb });
                proptest::prop_assert_eq!(ra, rb);
                entries.push(record(&id));
                if ra.is_none() {
                    pa.push(entries.len() - 1);
                    pb.push(entries.len() - 1);
                }
                for probe in 0u16..300 {
                    let id = format!("{probe:x}");
                    let ka = Keys { entries: &entries, slot_pos: &pa };
                    let kb = Keys { entries: &entries, slot_pos: &pb };
                    proptest::prop_assert_eq!(a.get(id.as_bytes(), ka), b.get(id.as_bytes(), kb));
                }
            }
        }

        /// The index answers as a map from id to slot, through inserts of new and
        /// known ids, removals of the newest id, and growth.
        #[test]
        fn answers_as_a_map(ops in proptest::collection::vec((0u8..4, 0u16..300), 0..400), cap in 0usize..8) {
            let mut entries: Vec<Record> = Vec::new();
            let mut slot_pos: Vec<usize> = Vec::new();
            let mut model: HashMap<String, u32> = HashMap::new();
            let mut index = IdIndex::with_capacity(cap);
            for (op, n) in ops {
                let id = format!("{n:x}");
                match op {
                    0..=2 => {
                        let slot = slot_pos.len() as u32;
                        let keys = Keys { entries: &entries, slot_pos: &slot_pos };
                        let found = index.get_or_insert(id.as_bytes(), slot, keys);
                        proptest::prop_assert_eq!(found, model.get(&id).copied());
                        entries.push(record(&id));
                        match found {
                            Some(s) => slot_pos[s as usize] = entries.len() - 1,
                            None => {
                                slot_pos.push(entries.len() - 1);
                                model.insert(id, slot);
                            }
                        }
                    }
                    _ => {
                        // Remove the newest slot's id, as undoing an append does.
                        let Some(&pos) = slot_pos.last() else { continue };
                        let newest = entries[pos].id().unwrap_or_default().to_owned();
                        index.remove(newest.as_bytes(), Keys { entries: &entries, slot_pos: &slot_pos });
                        slot_pos.pop();
                        model.remove(&newest);
                    }
                }
                proptest::prop_assert_eq!(index.len(), model.len());
                let keys = Keys { entries: &entries, slot_pos: &slot_pos };
                for probe in 0u16..300 {
                    let id = format!("{probe:x}");
                    proptest::prop_assert_eq!(index.get(id.as_bytes(), keys), model.get(&id).copied(), "{}", id);
                }
            }
        }
    }
}
