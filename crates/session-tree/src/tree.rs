//! The in-memory session: entries in file order, the id index, the leaf, labels,
//! and the tree view.
//!
//! The index follows the references' `Map` semantics: a later entry with an
//! already-known id replaces the earlier one in lookups but keeps the id's first
//! position in iteration order. Walks up the parent chain stop at the first
//! revisited entry, so a cycle or a self-parented entry never hangs.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;

use session_model::{Dialect, EntryType, ParentRef, Record, id_key_is_falsy};

use crate::raw::{self, RawFields};
use session_model::idhash::IdSet;

use crate::idindex::{IdIndex, Keys, NONE};

/// Which leaf a context query starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leaf<'a> {
    /// The tree's current leaf (after load: the last entry).
    Current,
    /// No leaf (`resetLeaf()`): the context is empty.
    Null,
    /// This entry; an unknown id falls back to the last entry, as
    /// `buildSessionContext(entries, leafId)` does.
    Id(&'a str),
}

/// Why a tree operation was refused.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TreeError {
    /// The id is not in the index. The text is the references' own message.
    #[error("Entry {0} not found")]
    NotFound(String),
    /// An appended record has no string `id`.
    #[error("record has no string id; give every appended entry an id")]
    MissingId,
    /// An appended record is a session header.
    #[error("a session header cannot be appended as an entry; append entries only")]
    Header,
}

/// Something odd about the tree, found while indexing. None of these stop loading.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TreeDiagnostic {
    /// Two entries share an id; lookups use the later one (`index` is its position
    /// in [`SessionTree::entries`], `first` the earlier one's).
    DuplicateId {
        /// The shared id.
        id: String,
        /// Position of the earlier entry.
        first: usize,
        /// Position of the later entry.
        index: usize,
    },
    /// An entry names itself as its parent; it is a root.
    SelfParent {
        /// The entry's id.
        id: String,
    },
    /// An entry's parent id is unknown; the entry is a root.
    Orphan {
        /// The entry's id.
        id: String,
        /// The missing parent id.
        parent: String,
    },
    /// Following parent links from `id` comes back to `id`; walks stop there.
    Cycle {
        /// One entry on the cycle.
        id: String,
    },
}

impl fmt::Display for TreeDiagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TreeDiagnostic::DuplicateId { id, first, index } => {
                write!(f, "entry {index} reuses id {id} of entry {first}; the later entry wins")
            }
            TreeDiagnostic::SelfParent { id } => write!(f, "entry {id} is its own parent; treated as a root"),
            TreeDiagnostic::Orphan { id, parent } => {
                write!(f, "entry {id} has unknown parent {parent}; treated as a root")
            }
            TreeDiagnostic::Cycle { id } => write!(f, "parent links from entry {id} form a cycle; walks stop there"),
        }
    }
}

/// One node of [`SessionTree::tree`]: an entry, its children (sorted as the
/// reference sorts them) and its label.
#[derive(Debug)]
pub struct TreeNode {
    /// The entry.
    pub entry: Record,
    /// Child nodes.
    pub children: Vec<TreeNode>,
    /// The entry's current label (for a label that is not a JSON string, such as `5`,
    /// its JSON text; see [`TreeNode::label_is_json`]).
    pub label: Option<String>,
    /// Whether [`TreeNode::label`] holds JSON text (the label entry's `label` was not a
    /// string, which the references keep as it is: `5` stays a number).
    pub label_is_json: bool,
    /// When the label was set (the label entry's `timestamp`).
    pub label_timestamp: Option<String>,
}

impl Drop for TreeNode {
    fn drop(&mut self) {
        // Deep trees (a long linear session is one long chain) would overflow the
        // stack with the default recursive drop.
        let mut stack = std::mem::take(&mut self.children);
        while let Some(mut node) = stack.pop() {
            stack.append(&mut node.children);
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum LeafState {
    /// `leafId === null`.
    Null,
    /// `leafId === undefined`: the last entry had no id.
    Undefined,
    Id(Box<str>),
}

impl LeafState {
    fn id(&self) -> Option<&str> {
        match self {
            LeafState::Id(id) => Some(id),
            _ => None,
        }
    }

    fn after(record: &Record) -> LeafState {
        record.id_key().map_or(LeafState::Undefined, |id| LeafState::Id(id.into()))
    }
}

/// [`SessionTree::parent_slot`] value for "no known parent".
const NO_PARENT: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Slot {
    /// Position of the latest entry with this id.
    pos: usize,
    /// Position of this id in `order` (first insertion).
    order: usize,
}

#[derive(Clone, Debug)]
struct LabelSlot {
    seq: u64,
    label: String,
    /// `label` is JSON text (the value was not a string).
    is_json: bool,
    timestamp: Option<String>,
}

/// What one append changed, so that [`SessionTree::pop_last`] can undo it in O(1).
#[derive(Debug)]
struct Undo {
    pos: usize,
    id: Box<str>,
    prev_slot: Option<Slot>,
    prev_leaf: LeafState,
    prev_label: Option<(Box<str>, Option<LabelSlot>)>,
    diag_len: usize,
}

/// A session's entries as a tree with a movable leaf.
///
/// Built from the records after the header; pure and in memory. Lookups are
/// O(1), appends O(1) amortised, a branch walk O(path), [`SessionTree::tree`]
/// O(n log n).
#[derive(Debug)]
pub struct SessionTree {
    dialect: Dialect,
    entries: Vec<Record>,
    /// Each id's slot (see [`IdIndex`]).
    by_id: IdIndex,
    /// For each id in first-insertion order, the position of its latest entry.
    slot_pos: Vec<usize>,
    /// For each entry, the slot of its parent id ([`NO_PARENT`] when the parent is
    /// absent or unknown), so that walks do not hash.
    parent_slot: Vec<u32>,
    /// Whether a parent cycle exists (walks then track visited entries).
    has_cycle: bool,
    /// The last id-less entry: JavaScript indexes such entries under `undefined`.
    idless_last: Option<usize>,
    leaf: LeafState,
    labels: HashMap<Box<str>, LabelSlot>,
    label_seq: u64,
    undo: Option<Undo>,
    diagnostics: Vec<TreeDiagnostic>,
    /// Parent ids that orphans name: appending one of them may close a cycle.
    missing_parents: IdSet<Box<str>>,
}

impl SessionTree {
    /// Indexes `entries`: every record after the header, in file order.
    ///
    /// `null` values are left out, and for pi stray headers too, as the references
    /// leave them out of `getEntries()` (omp keeps a later header as an entry, a root
    /// with the header's id). The leaf becomes the last entry's id (no leaf when that
    /// entry has no id).
    pub fn new(dialect: Dialect, entries: Vec<Record>) -> SessionTree {
        let entries: Vec<Record> = entries.into_iter().filter(|r| SessionTree::keeps(dialect, r)).collect();
        let built = IdIndex::build(&entries);
        let (index, slot_pos) = (built.index, built.slot_pos);
        let mut tree = SessionTree {
            dialect,
            entries: Vec::new(),
            by_id: IdIndex::with_capacity(0),
            slot_pos: Vec::new(),
            parent_slot: Vec::with_capacity(entries.len()),
            has_cycle: false,
            idless_last: None,
            leaf: LeafState::Null,
            labels: HashMap::new(),
            label_seq: 0,
            undo: None,
            diagnostics: Vec::new(),
            missing_parents: IdSet::default(),
        };
        // One pass: duplicate ids and self-parents (in entry order), labels, and each
        // entry's parent slot; orphans are reported after them.
        let mut orphans = Vec::new();
        {
            let keys = Keys { entries: &entries, slot_pos: &slot_pos };
            let mut previous: Option<Cow<'_, str>> = None;
            for (pos, record) in entries.iter().enumerate() {
                // Keyed as the references' `Map` keys ids: a number id apart from a string.
                let id = record.id_key();
                match &id {
                    Some(id) => {
                        if let Some(&first) = built.prev_at.get(pos).filter(|&&p| p != NONE) {
                            let (id, first) = (id.clone().into_owned(), first as usize);
                            tree.diagnostics.push(TreeDiagnostic::DuplicateId { id, first, index: pos });
                        }
                        if record.parent_key().as_deref() == Some(&**id) {
                            tree.has_cycle = true;
                            tree.diagnostics.push(TreeDiagnostic::SelfParent { id: id.clone().into_owned() });
                        }
                    }
                    None => tree.idless_last = Some(pos),
                }
                tree.replay_label(record);
                let parent = record.parent_key().filter(|p| !id_key_is_falsy(p));
                // Most entries follow their parent: its slot is known without a lookup.
                let slot = match (&parent, pos.checked_sub(1).and_then(|p| built.slot_at.get(p))) {
                    (Some(_), Some(&prev_slot)) if prev_slot != NONE && previous == parent => Some(prev_slot),
                    (Some(p), _) => index.get(p.as_bytes(), keys),
                    (None, _) => None,
                };
                tree.parent_slot.push(slot.unwrap_or(NO_PARENT));
                if slot.is_none()
                    && let (Some(id), Some(p)) = (&id, &parent)
                    && p != id
                {
                    tree.missing_parents.insert((**p).into());
                    orphans
                        .push(TreeDiagnostic::Orphan { id: id.clone().into_owned(), parent: p.clone().into_owned() });
                }
                previous = id;
            }
        }
        tree.diagnostics.extend(orphans);
        tree.entries = entries;
        tree.by_id = index;
        tree.slot_pos = slot_pos;
        tree.leaf = tree.entries.last().map_or(LeafState::Null, LeafState::after);
        tree.find_cycles();
        tree
    }

    /// Returns whether [`SessionTree::new`] keeps `record` as an entry of a `dialect`
    /// session: not `null`, and for pi not a stray header.
    pub fn keeps(dialect: Dialect, record: &Record) -> bool {
        // An object is never `null`: its text (perhaps still in the file) is not read.
        (dialect == Dialect::Omp || !record.is_header()) && (record.is_object() || record.text() != "null")
    }

    /// Adds one record (appended after loading) to the index and makes it the leaf.
    /// Returns the undo record.
    fn index_one(&mut self, record: Record) -> Option<Undo> {
        let pos = self.entries.len();
        let prev_leaf = std::mem::replace(&mut self.leaf, LeafState::after(&record));
        let diag_len = self.diagnostics.len();
        let mut undo = None;
        // Keyed as the references' `Map` keys ids: a number id apart from a string.
        let key = record.id_key();
        match key.as_deref() {
            Some(id) => {
                // One probe of the index: the id's slot is found or made in place.
                let fresh = Slot { pos, order: self.slot_pos.len() };
                let keys = Keys { entries: &self.entries, slot_pos: &self.slot_pos };
                let prev_slot = self
                    .by_id
                    .get_or_insert(id.as_bytes(), fresh.order as u32, keys)
                    .map(|order| Slot { pos: self.slot_pos[order as usize], order: order as usize });
                match prev_slot {
                    Some(slot) => {
                        self.diagnostics.push(TreeDiagnostic::DuplicateId {
                            id: id.to_owned(),
                            first: slot.pos,
                            index: pos,
                        });
                        self.slot_pos[slot.order] = pos;
                    }
                    None => self.slot_pos.push(pos),
                }
                match record.parent_key().as_deref() {
                    Some(p) if p == id => {
                        self.has_cycle = true;
                        self.diagnostics.push(TreeDiagnostic::SelfParent { id: id.to_owned() });
                    }
                    Some(p) if !id_key_is_falsy(p) && self.slot_of(p).is_none() => {
                        self.missing_parents.insert(p.into());
                        self.diagnostics.push(TreeDiagnostic::Orphan { id: id.to_owned(), parent: p.to_owned() })
                    }
                    _ => {}
                }
                undo = Some(Undo { pos, id: id.into(), prev_slot, prev_leaf, prev_label: None, diag_len });
            }
            None => self.idless_last = Some(pos),
        }
        let prev_label = self.replay_label(&record);
        if let Some(u) = undo.as_mut() {
            u.prev_label = prev_label;
        }
        let parent = self.parent_slot_of(&record);
        self.entries.push(record);
        self.parent_slot.push(parent);
        if undo.as_ref().is_some_and(|u| u.prev_slot.is_none() && self.missing_parents.contains(&u.id)) {
            // An orphan's parent arrived: re-resolve every parent link.
            self.resolve_parents();
        }
        // Only a reused id, or an id some orphan was waiting for, can close a cycle.
        if let Some(u) = &undo
            && (u.prev_slot.is_some() || self.missing_parents.contains(&u.id))
            && self.walk(pos).first().is_some_and(|&root| {
                let r = &self.entries[root];
                r.parent_key() != r.id_key() && r.parent_key().is_some_and(|p| self.lookup(&p).is_some())
            })
        {
            self.diagnostics.push(TreeDiagnostic::Cycle { id: u.id.to_string() });
            self.has_cycle = true;
        }
        undo
    }

    /// Applies a label entry to the label map; returns the previous state of its target.
    fn replay_label(&mut self, record: &Record) -> Option<(Box<str>, Option<LabelSlot>)> {
        if record.entry_type() != EntryType::Label {
            return None;
        }
        let fields = RawFields::parse(record.text());
        // The label map is keyed as the id map: a number target is a number id's key.
        let raw_target = fields.raw("targetId")?;
        let target = match raw::as_string(raw_target) {
            Some(t) => t,
            None => session_model::number_id_key(session_model::scan::number(raw_target)?),
        };
        let prev = self.labels.get(target.as_str()).cloned();
        let label = fields.raw("label").filter(|r| raw::is_truthy(r));
        match label {
            Some(raw_label) => {
                let (label, is_json) = match raw::as_string(raw_label) {
                    Some(s) => (s, false),
                    None => (session_model::json::js_exact(raw_label).into_owned(), true),
                };
                let timestamp = record.timestamp().map(str::to_owned);
                match self.labels.get_mut(target.as_str()) {
                    Some(slot) => {
                        slot.label = label;
                        slot.is_json = is_json;
                        slot.timestamp = timestamp;
                    }
                    None => {
                        self.label_seq += 1;
                        let slot = LabelSlot { seq: self.label_seq, label, is_json, timestamp };
                        self.labels.insert(target.as_str().into(), slot);
                    }
                }
            }
            None => {
                self.labels.remove(target.as_str());
            }
        }
        Some((target.into(), prev))
    }

    fn parent_slot_of(&self, record: &Record) -> u32 {
        // A falsy parent (`""`, 0) ends the references' walk: no parent slot.
        match record.parent_key().filter(|p| !id_key_is_falsy(p)).and_then(|p| self.slot_of(&p)) {
            Some(slot) => u32::try_from(slot.order).unwrap_or(NO_PARENT),
            None => NO_PARENT,
        }
    }

    fn resolve_parents(&mut self) {
        let slots: Vec<u32> = self.entries.iter().map(|r| self.parent_slot_of(r)).collect();
        self.parent_slot = slots;
    }

    /// Returns the position of the parent of the entry at `pos`.
    fn parent_pos(&self, pos: usize) -> Option<usize> {
        match self.parent_slot[pos] {
            NO_PARENT => None,
            slot => Some(self.slot_pos[slot as usize]),
        }
    }

    fn find_cycles(&mut self) {
        // 0 = not seen, 1 = on the current walk, 2 = done.
        let mut state = vec![0u8; self.entries.len()];
        let mut chain = Vec::new();
        let mut found = Vec::new();
        for &start in &self.slot_pos {
            let mut pos = start;
            chain.clear();
            loop {
                match state[pos] {
                    1 => {
                        let rec = &self.entries[pos];
                        if rec.parent_key() != rec.id_key() {
                            found.push(rec.id_key().unwrap_or_default().into_owned());
                        }
                        break;
                    }
                    2 => break,
                    _ => {}
                }
                state[pos] = 1;
                chain.push(pos);
                match self.parent_pos(pos) {
                    Some(next) => pos = next,
                    None => break,
                }
            }
            for &p in &chain {
                state[p] = 2;
            }
        }
        found.sort();
        self.has_cycle =
            !found.is_empty() || self.diagnostics.iter().any(|d| matches!(d, TreeDiagnostic::SelfParent { .. }));
        self.diagnostics.extend(found.into_iter().map(|id| TreeDiagnostic::Cycle { id }));
    }

    /// Returns the slot of `id` (the position of its latest entry and its place in
    /// first-insertion order).
    fn slot_of(&self, id: &str) -> Option<Slot> {
        let keys = Keys { entries: &self.entries, slot_pos: &self.slot_pos };
        let order = self.by_id.get(id.as_bytes(), keys)? as usize;
        Some(Slot { pos: self.slot_pos[order], order })
    }

    /// Returns the position of the entry `id` resolves to (non-empty ids only).
    fn lookup(&self, id: &str) -> Option<usize> {
        if id.is_empty() {
            return None;
        }
        self.slot_of(id).map(|s| s.pos)
    }

    /// Returns the root..`pos` path as positions, stopping at a missing parent or
    /// the first revisited entry.
    pub(crate) fn walk(&self, pos: usize) -> Vec<usize> {
        if !self.has_cycle {
            let mut path = vec![pos];
            let mut current = pos;
            while let Some(next) = self.parent_pos(current) {
                if path.len() > self.entries.len() {
                    // Longer than the session: a cycle after all; walk again carefully.
                    return self.walk_checked(pos);
                }
                path.push(next);
                current = next;
            }
            path.reverse();
            return path;
        }
        self.walk_checked(pos)
    }

    fn walk_checked(&self, pos: usize) -> Vec<usize> {
        let mut path = vec![pos];
        let mut seen = HashSet::new();
        seen.insert(pos);
        let mut current = pos;
        while let Some(next) = self.parent_pos(current) {
            if !seen.insert(next) {
                break;
            }
            path.push(next);
            current = next;
        }
        path.reverse();
        path
    }

    /// Resolves the leaf a context build starts from: `None` for an empty context.
    pub(crate) fn resolve_leaf(&self, leaf: Leaf<'_>) -> Option<usize> {
        let last = self.entries.len().checked_sub(1);
        match leaf {
            Leaf::Null => None,
            Leaf::Current => match &self.leaf {
                LeafState::Null => None,
                LeafState::Undefined => last,
                LeafState::Id(id) => self.lookup(id).or(last),
            },
            Leaf::Id(id) => self.lookup(id).or(last),
        }
    }

    /// Returns the entry at `pos` (positions come from this tree).
    pub(crate) fn at(&self, pos: usize) -> &Record {
        &self.entries[pos]
    }

    /// Returns the dialect whose rules apply.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Returns every entry in file order (`getEntries()`).
    pub fn entries(&self) -> &[Record] {
        &self.entries
    }

    /// Returns the current leaf id (`None` after `resetLeaf()`, when the last entry
    /// has no id, or when its id is not a string).
    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf.id().filter(|id| !session_model::is_scalar_id_key(id))
    }

    /// Returns the entry with this id (the later one for duplicate ids).
    pub fn get(&self, id: &str) -> Option<&Record> {
        self.lookup(id).map(|p| &self.entries[p])
    }

    /// Moves the leaf to `id` without writing anything: the next entry appended
    /// becomes a child of `id`, a sibling of what followed it, and the context and
    /// [`SessionTree::get_branch`] follow the new leaf.
    ///
    /// ```
    /// use session_model::{Dialect, Record};
    /// use session_tree::SessionTree;
    /// let line = |id: &str, parent: &str| {
    ///     Record::parse(&format!(r#"{{"type":"custom","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:00.000Z","customType":"x"}}"#))
    ///         .expect("valid")
    /// };
    /// let mut t = SessionTree::new(Dialect::Pi, vec![line("a", "null"), line("b", r#""a""#)]);
    /// t.branch("a")?;
    /// t.append(line("c", r#""a""#))?;
    /// let path: Vec<_> = t.get_branch(None).iter().filter_map(|r| r.id()).collect();
    /// assert_eq!(path, ["a", "c"]);
    /// assert!(t.branch("zz").is_err());
    /// # Ok::<(), session_tree::TreeError>(())
    /// ```
    ///
    /// An entry whose id is `""` can be branched to, as `byId.has("")` finds it; the
    /// context then starts from the last entry and the path is empty, as a falsy
    /// leaf id gives in the references.
    pub fn branch(&mut self, id: &str) -> Result<(), TreeError> {
        if self.slot_of(id).is_none() {
            return Err(TreeError::NotFound(id.to_owned()));
        }
        self.leaf = LeafState::Id(id.into());
        Ok(())
    }

    /// Sets the leaf to none: the next append starts a new root.
    pub fn reset_leaf(&mut self) {
        self.leaf = LeafState::Null;
    }

    /// Returns the root..leaf path from `from` (default: the current leaf), as
    /// `getBranch` does: an unknown or empty start gives an empty path (no fallback).
    pub fn get_branch(&self, from: Option<&str>) -> Vec<&Record> {
        let start = from.or_else(|| self.leaf.id());
        match start.and_then(|id| self.lookup(id)) {
            Some(pos) => self.walk(pos).into_iter().map(|p| &self.entries[p]).collect(),
            None => Vec::new(),
        }
    }

    /// Returns the root..leaf path a context at `leaf` is built from (an unknown id
    /// falls back to the last entry, [`Leaf::Null`] gives an empty path), as the
    /// projections of [`crate::pi`] and [`crate::omp`] walk it.
    pub fn path(&self, leaf: Leaf<'_>) -> Vec<&Record> {
        match self.resolve_leaf(leaf) {
            Some(pos) => self.walk(pos).into_iter().map(|p| &self.entries[p]).collect(),
            None => Vec::new(),
        }
    }

    /// Returns the entries whose `parentId` is `parent_id`, in index order (first
    /// appearance of each id), not sorted by time.
    pub fn children(&self, parent_id: &str) -> Vec<&Record> {
        self.slot_pos.iter().map(|&pos| &self.entries[pos]).filter(|r| r.parent_id() == Some(parent_id)).collect()
    }

    /// Returns the label of `id`, if set.
    pub fn label(&self, id: &str) -> Option<&str> {
        self.labels.get(id).map(|s| s.label.as_str())
    }

    /// Returns when the label of `id` was set.
    pub fn label_timestamp(&self, id: &str) -> Option<&str> {
        self.labels.get(id).and_then(|s| s.timestamp.as_deref())
    }

    /// Returns `(targetId, label)` pairs in the order the reference's label map
    /// iterates (first set first; a clear and a later set moves a label to the end).
    /// A number target is given as its key ([`session_model::number_id_key`]).
    pub fn labels(&self) -> impl Iterator<Item = (&str, &str)> {
        let mut all: Vec<(&Box<str>, &LabelSlot)> = self.labels.iter().collect();
        all.sort_by_key(|(_, s)| s.seq);
        all.into_iter().map(|(k, s)| (&**k, s.label.as_str()))
    }

    /// Returns pi's session name: the latest `session_info` entry's `name`,
    /// trimmed; `None` when there is none or it is empty (a clear).
    pub fn session_info_name(&self) -> Option<String> {
        let entry = self.entries.iter().rev().find(|r| r.entry_type() == EntryType::SessionInfo)?;
        let name = RawFields::parse(entry.text()).string("name")?;
        let name = session_model::js_trim(&name);
        (!name.is_empty()).then(|| name.to_owned())
    }

    /// Appends one entry: indexes it and makes it the leaf.
    pub fn append(&mut self, record: Record) -> Result<(), TreeError> {
        if record.is_header() {
            return Err(TreeError::Header);
        }
        if record.id().is_none() {
            return Err(TreeError::MissingId);
        }
        self.undo = self.index_one(record);
        Ok(())
    }

    /// Undoes the last [`SessionTree::append`] (when writing it failed) and sets the
    /// leaf back to `previous_leaf`.
    pub fn pop_last(&mut self, previous_leaf: Option<String>) {
        let Some(record) = self.entries.last() else {
            return;
        };
        let restore_leaf = |prev: Option<&LeafState>| match (prev, previous_leaf.as_deref()) {
            (Some(state), wanted) if state.id() == wanted => state.clone(),
            (_, Some(id)) => LeafState::Id(id.into()),
            (_, None) => LeafState::Null,
        };
        match self.undo.take() {
            Some(undo) if undo.pos + 1 == self.entries.len() && record.id_key().as_deref() == Some(&*undo.id) => {
                if undo.prev_slot.is_none() {
                    // A new id: out of the index while its entry still names it.
                    let keys = Keys { entries: &self.entries, slot_pos: &self.slot_pos };
                    self.by_id.remove(undo.id.as_bytes(), keys);
                }
                self.entries.pop();
                self.parent_slot.pop();
                match undo.prev_slot {
                    Some(slot) => self.slot_pos[slot.order] = slot.pos,
                    None => {
                        self.slot_pos.pop();
                        if self.missing_parents.contains(&undo.id) {
                            self.resolve_parents();
                        }
                    }
                }
                if let Some((target, prev)) = undo.prev_label {
                    match prev {
                        Some(slot) => {
                            self.labels.insert(target, slot);
                        }
                        None => {
                            self.labels.remove(&target);
                        }
                    }
                }
                self.diagnostics.truncate(undo.diag_len);
                self.leaf = restore_leaf(Some(&undo.prev_leaf));
            }
            _ => {
                let mut entries = std::mem::take(&mut self.entries);
                entries.pop();
                let rebuilt = SessionTree::new(self.dialect, entries);
                *self = rebuilt;
                self.leaf = restore_leaf(None);
            }
        }
    }

    /// Returns the `parentId` the next appended entry gets: the leaf (none when the
    /// leaf's id is a number, which a string `parentId` cannot name).
    pub fn next_parent(&self) -> Option<&str> {
        self.leaf_id()
    }

    /// Returns whether an entry has this id (for id collision checks).
    pub fn contains_id(&self, id: &str) -> bool {
        self.slot_of(id).is_some()
    }

    /// Returns what indexing found odd: duplicate ids, self parents, orphans, cycles.
    pub fn diagnostics(&self) -> &[TreeDiagnostic] {
        &self.diagnostics
    }

    /// Returns the tree (`getTree()`): roots in file order, children sorted by
    /// entry time (stable), labels attached.
    ///
    /// Roots are entries with a `null` parent, their own id as parent, or an
    /// unknown parent. As in the reference, an id used twice is one node (the later
    /// entry) placed once per occurrence. Cycles are cut at the first revisit and the
    /// output is bounded, so a damaged file cannot make this hang.
    pub fn tree(&self) -> Vec<TreeNode> {
        let n = self.entries.len();
        let node_of = |pos: usize| -> usize {
            match self.entries[pos].id_key() {
                Some(id) => self.slot_of(&id).map_or(pos, |s| s.pos),
                None => self.idless_last.unwrap_or(pos),
            }
        };
        let mut roots = Vec::new();
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
        for pos in 0..n {
            let rec = &self.entries[pos];
            let node = node_of(pos);
            let parent_key = rec.parent_key();
            let parent = match rec.parent() {
                ParentRef::Null => None,
                _ if parent_key.is_some() && parent_key == rec.id_key() => None,
                // `byId.get(parentId)` links a falsy parent (`""`, 0) too, where the
                // path walk stops.
                ParentRef::Id(_) | ParentRef::Invalid => match parent_key {
                    Some(p) if id_key_is_falsy(&p) => self.slot_of(&p).map(|s| s.pos),
                    Some(_) => self.parent_pos(pos),
                    None => None,
                },
                ParentRef::Absent => match rec.id() {
                    None => None,
                    Some(_) => self.idless_last,
                },
            };
            match parent {
                Some(p) => children[p].push(node),
                None => roots.push(node),
            }
        }
        // `new Date(entry.timestamp).getTime()`: a string as `Date.parse` reads it, `null`
        // as 0, a number as milliseconds, anything else (or no key) as `NaN`.
        let times: Vec<Option<i64>> = self
            .entries
            .iter()
            .map(|r| match r.timestamp() {
                Some(ts) => session_model::timestamp::parse_js_date(ts),
                None => raw::entry_time(&RawFields::parse(r.text())),
            })
            .collect();
        for list in &mut children {
            if list.len() > 1 {
                stable_sort_by_time(list, &times);
            }
        }
        self.build_nodes(&roots, &children)
    }

    fn build_nodes(&self, roots: &[usize], children: &[Vec<usize>]) -> Vec<TreeNode> {
        struct Frame {
            pos: usize,
            next: usize,
            built: Vec<TreeNode>,
        }
        let mut budget = self.entries.len().saturating_mul(8).saturating_add(4096);
        let mut on_path = vec![false; self.entries.len()];
        let mut out = Vec::with_capacity(roots.len());
        let make = |pos: usize, built: Vec<TreeNode>| {
            let entry = self.entries[pos].clone();
            let label = entry.id_key().and_then(|id| self.labels.get(&*id));
            TreeNode {
                label: label.map(|l| l.label.clone()),
                label_is_json: label.is_some_and(|l| l.is_json),
                label_timestamp: label.and_then(|l| l.timestamp.clone()),
                entry,
                children: built,
            }
        };
        for &root in roots {
            if budget == 0 {
                break;
            }
            budget -= 1;
            let mut stack = vec![Frame { pos: root, next: 0, built: Vec::new() }];
            on_path[root] = true;
            while let Some(top) = stack.last_mut() {
                let kids = &children[top.pos];
                if top.next < kids.len() {
                    let child = kids[top.next];
                    top.next += 1;
                    if on_path[child] || budget == 0 {
                        continue;
                    }
                    budget -= 1;
                    on_path[child] = true;
                    stack.push(Frame { pos: child, next: 0, built: Vec::new() });
                } else {
                    let done = stack.pop().expect("stack is non-empty inside the loop");
                    on_path[done.pos] = false;
                    let node = make(done.pos, done.built);
                    match stack.last_mut() {
                        Some(parent) => parent.built.push(node),
                        None => out.push(node),
                    }
                }
            }
        }
        out
    }
}

/// Sorts by time ascending, keeping file order for equal times. An unparseable
/// time compares equal to everything (`NaN` in the reference's comparator). A merge
/// sort that never panics, whatever the comparator does.
fn stable_sort_by_time(list: &mut Vec<usize>, times: &[Option<i64>]) {
    let le = |a: usize, b: usize| match (times[a], times[b]) {
        (Some(x), Some(y)) => x <= y,
        _ => true,
    };
    let mut buf = list.clone();
    let len = list.len();
    let mut width = 1;
    while width < len {
        let mut i = 0;
        while i < len {
            let mid = (i + width).min(len);
            let end = (i + 2 * width).min(len);
            let (mut l, mut r, mut k) = (i, mid, i);
            while l < mid && r < end {
                if le(list[l], list[r]) {
                    buf[k] = list[l];
                    l += 1;
                } else {
                    buf[k] = list[r];
                    r += 1;
                }
                k += 1;
            }
            buf[k..k + (mid - l)].copy_from_slice(&list[l..mid]);
            k += mid - l;
            buf[k..k + (end - r)].copy_from_slice(&list[r..end]);
            i = end;
        }
        std::mem::swap(list, &mut buf);
        width *= 2;
    }
}

/// Writes a tree as the conformance contract's JSON: `[{id, label?,
/// labelTimestamp?, children:[...]}]`. pi includes label timestamps, omp does not.
pub fn tree_to_json(nodes: &[TreeNode], with_label_timestamp: bool) -> String {
    enum Step<'a> {
        Open(&'a TreeNode, bool),
        Close,
    }
    let mut out = String::with_capacity(nodes.len() * 48 + 2);
    out.push('[');
    let mut stack: Vec<Step<'_>> = Vec::new();
    for (i, node) in nodes.iter().enumerate().rev() {
        stack.push(Step::Open(node, i > 0));
    }
    while let Some(step) = stack.pop() {
        match step {
            Step::Close => out.push_str("]}"),
            Step::Open(node, comma) => {
                if comma {
                    out.push(',');
                }
                out.push('{');
                let mut fields = String::new();
                match node.entry.id() {
                    Some(id) => {
                        fields.push_str("\"id\":");
                        session_model::json::write_js_str(&mut fields, id);
                        fields.push(',');
                    }
                    None => {
                        if let Some(raw_id) = RawFields::parse(node.entry.text()).raw("id") {
                            fields.push_str("\"id\":");
                            fields.push_str(raw_id);
                            fields.push(',');
                        }
                    }
                }
                if let Some(label) = &node.label {
                    fields.push_str("\"label\":");
                    if node.label_is_json {
                        fields.push_str(label);
                    } else {
                        session_model::json::write_js_str(&mut fields, label);
                    }
                    fields.push(',');
                }
                if with_label_timestamp && let Some(ts) = &node.label_timestamp {
                    fields.push_str("\"labelTimestamp\":");
                    session_model::json::write_js_str(&mut fields, ts);
                    fields.push(',');
                }
                out.push_str(&fields);
                out.push_str("\"children\":[");
                stack.push(Step::Close);
                for (i, child) in node.children.iter().enumerate().rev() {
                    stack.push(Step::Open(child, i > 0));
                }
            }
        }
    }
    out.push(']');
    out
}
