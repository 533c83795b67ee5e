//! The entries an import builds, before they become records: ids from the source,
//! timestamps from the source, and the order that puts the active branch last.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};
use session_model::Record;
use session_model::entries::{Base, pi};
use session_model::timestamp::{format_iso_millis, parse_iso_millis};

/// Returns the entry id the import gives the source key `key` (a Claude Code uuid, a
/// Codex line): 8 lowercase hex digits of the key's 64-bit FNV-1a hash, mixed.
/// Collisions within one import are resolved by hashing the key again with a counter
/// (`key#1`, `key#2`, …).
///
/// ```
/// assert_eq!(session_import::entry_id("u1"), session_import::entry_id("u1"));
/// assert_eq!(session_import::entry_id("u1").len(), 8);
/// ```
pub fn entry_id(key: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // FNV alone spreads short keys that differ in their last bytes poorly: finish
    // with splitmix64's avalanche.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    format!("{:08x}", (h >> 32) as u32)
}

/// The ids given so far; a key whose id is taken gets `key#1`'s, `key#2`'s, ….
#[derive(Default)]
pub(crate) struct Ids {
    used: HashSet<String>,
}

impl Ids {
    pub(crate) fn mint(&mut self, key: &str) -> String {
        let mut id = entry_id(key);
        let mut n = 0u32;
        while !self.used.insert(id.clone()) {
            n += 1;
            id = entry_id(&format!("{key}#{n}"));
        }
        id
    }
}

/// An ISO timestamp as pi writes it (milliseconds, `Z`), or `None` when `raw` is not one.
pub(crate) fn iso(raw: &str) -> Option<(String, i64)> {
    let ms = parse_iso_millis(raw)?;
    Some((format_iso_millis(ms), ms))
}

/// What an entry is.
#[derive(Clone, Debug)]
pub(crate) enum Kind {
    /// A `message` entry with this payload.
    Message(Value),
    /// A `custom` entry.
    Custom { custom_type: String, data: Value },
    /// A `compaction` that keeps nothing before it.
    Compaction { summary: String, tokens_before: Value, details: Option<Value> },
    /// A `model_change`.
    ModelChange { provider: String, model: String },
    /// A `session_info`.
    SessionInfo(String),
}

/// One entry to write.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub(crate) id: String,
    pub(crate) parent: Option<String>,
    pub(crate) timestamp: String,
    pub(crate) kind: Kind,
}

impl Node {
    pub(crate) fn into_record(self) -> Record {
        let b = Base::new(self.id.clone(), self.parent.as_deref(), self.timestamp);
        match self.kind {
            Kind::Message(m) => pi::message(&b, m),
            Kind::Custom { custom_type, data } => pi::custom(&b, &custom_type, Some(data)),
            Kind::Compaction { summary, tokens_before, details } => pi::compaction(
                &b,
                &summary,
                &self.id,
                tokens_before,
                pi::CompactionExtra { details, from_hook: Some(false), ..Default::default() },
            ),
            Kind::ModelChange { provider, model } => pi::model_change(&b, &provider, &model),
            Kind::SessionInfo(name) => pi::session_info(&b, &pi::sanitize_session_name(&name)),
        }
    }
}

/// Returns `nodes` as records, parents before children: roots and children in the
/// order they were made, except that the subtree holding `leaf` comes last at every
/// level, so `leaf` (a node with no children) is the last record.
pub(crate) fn ordered(nodes: Vec<Node>, leaf: Option<&str>) -> Vec<Record> {
    let index: HashMap<&str, usize> = nodes.iter().enumerate().map(|(i, n)| (n.id.as_str(), i)).collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut roots = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        match n.parent.as_deref().and_then(|p| index.get(p)) {
            Some(&p) if p < i => children[p].push(i),
            _ => roots.push(i),
        }
    }
    let mut on_path = vec![false; nodes.len()];
    let mut at = leaf.and_then(|l| index.get(l).copied());
    while let Some(i) = at {
        if on_path[i] {
            break;
        }
        on_path[i] = true;
        at = nodes[i].parent.as_deref().and_then(|p| index.get(p)).copied().filter(|&p| p < i);
    }
    let last_first = |list: &[usize]| -> Vec<usize> {
        // Reversed for the stack: the path's child is pushed first, so popped last.
        let mut v: Vec<usize> = list.iter().rev().copied().collect();
        if let Some(pos) = v.iter().position(|&c| on_path[c]) {
            let c = v.remove(pos);
            v.insert(0, c);
        }
        v
    };
    let mut order = Vec::with_capacity(nodes.len());
    let mut stack = last_first(&roots);
    while let Some(i) = stack.pop() {
        order.push(i);
        stack.extend(last_first(&children[i]));
    }
    drop(index);
    let mut slots: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).map(Node::into_record).collect()
}

/// pi's usage object from token counts (costs unknown: zero).
pub(crate) fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Value {
    json!({
        "input": input,
        "output": output,
        "cacheRead": cache_read,
        "cacheWrite": cache_write,
        "totalTokens": input.saturating_add(output).saturating_add(cache_read).saturating_add(cache_write),
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    })
}

/// Returns the unsigned integer at `key` of `obj` (0 when absent or not one).
pub(crate) fn count(obj: Option<&Value>, key: &str) -> u64 {
    obj.and_then(|o| o.get(key)).and_then(Value::as_u64).unwrap_or(0)
}

/// A pi image block from a `data:` URL (`data:image/png;base64,…`), or `None`.
pub(crate) fn image_from_data_url(url: &str) -> Option<Value> {
    let rest = url.strip_prefix("data:")?;
    let (mime, data) = rest.split_once(";base64,")?;
    Some(json!({"type": "image", "data": data, "mimeType": mime}))
}
