//! One test per item of the conformance checklists at the end of `spec/pi.md` (§8) and
//! `spec/omp.md` (§10) that the library covers, named after the item's number, each
//! asserting the behaviour through the facade. Items the library deliberately does
//! otherwise point at `docs/conformance-deviations.md`; items outside the library (the
//! `session` command, the agents' UI) and items not covered here are listed in each
//! module's documentation. Items both checklists share are tested once, for both
//! dialects, in `both.rs` (`pi_36_omp_19_label_set_and_read`).

mod both;
mod omp;
mod pi;

use serde_json::{Value, json};
use session::{Dialect, EntryId, Env, Leaf, NewSessionOptions, Record, SessionManager};

pub(crate) use crate::common::{Result, user};

/// The tests' assistant message (`assistantMsg`: one text block, anthropic/claude-test).
pub(crate) fn assistant(text: &str) -> Value {
    json!({"role": "assistant", "content": [{"type": "text", "text": text}], "provider": "anthropic", "model": "claude-test", "timestamp": 2})
}

/// An empty in-memory session of `dialect`.
pub(crate) fn mem(dialect: Dialect) -> SessionManager {
    SessionManager::in_memory(dialect, "/w", Env::memory())
}

/// A message entry with a chosen id and parent (`None`: a root).
pub(crate) fn msg(id: &str, parent: Option<&str>, message: Value) -> Value {
    json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2025-01-01T00:00:00Z", "message": message})
}

/// Any entry with a chosen id and parent, and the fields of `rest`.
pub(crate) fn entry(kind: &str, id: &str, parent: Option<&str>, rest: Value) -> Value {
    let mut v = json!({"type": kind, "id": id, "parentId": parent, "timestamp": "2025-01-01T00:00:00Z"});
    if let (Some(o), Value::Object(r)) = (v.as_object_mut(), rest) {
        o.extend(r);
    }
    v
}

/// An in-memory session of `dialect` restored from `entries` (no header: one is made).
pub(crate) fn restored(dialect: Dialect, entries: Vec<Value>) -> Result<SessionManager> {
    let records = entries.into_iter().map(Record::from_value).collect();
    Ok(SessionManager::in_memory_with(dialect, "/w", records, NewSessionOptions::default(), Env::memory())?)
}

/// The context at `leaf`, as the JSON the agent's `buildSessionContext` returns.
pub(crate) fn ctx(m: &SessionManager, leaf: Leaf<'_>) -> Result<Value> {
    Ok(serde_json::from_str(&m.context_at(leaf)?.to_json())?)
}

/// Each context message as `role: text` (the string content, the first text block, or
/// the summary).
pub(crate) fn texts(v: &Value) -> Vec<String> {
    let Some(ms) = v["messages"].as_array() else { return Vec::new() };
    ms.iter()
        .map(|m| {
            let role = m["role"].as_str().unwrap_or("?");
            let text = match &m["content"] {
                Value::String(s) => s.clone(),
                Value::Array(a) => a.first().and_then(|b| b["text"].as_str()).unwrap_or("").to_owned(),
                _ => m["summary"].as_str().unwrap_or("").to_owned(),
            };
            format!("{role}: {text}")
        })
        .collect()
}

/// The ids of `m`'s entries in file order.
pub(crate) fn ids(m: &SessionManager) -> Vec<String> {
    m.tree().entries().iter().filter_map(|r| r.id().map(str::to_owned)).collect()
}

/// The ids of the path to `from` (the leaf when `None`).
pub(crate) fn branch_ids(m: &SessionManager, from: Option<&str>) -> Vec<String> {
    m.tree().get_branch(from).iter().filter_map(|r| r.id().map(str::to_owned)).collect()
}

/// An in-memory session of `dialect` restored from one chain: item `n` (from 1) gets the
/// id `n` and item `n - 1` as parent. A message (it has a `role`) goes into a message
/// entry; any other item is an entry that names its own `type`.
pub(crate) fn chain(dialect: Dialect, items: Vec<Value>) -> Result<SessionManager> {
    let entries = items.into_iter().enumerate().map(|(i, mut item)| {
        let (id, parent) = ((i + 1).to_string(), (i > 0).then(|| i.to_string()));
        if item.get("role").is_some() {
            return msg(&id, parent.as_deref(), item);
        }
        let kind = item.as_object_mut().and_then(|o| o.remove("type"));
        entry(kind.as_ref().and_then(Value::as_str).unwrap_or_default(), &id, parent.as_deref(), item)
    });
    restored(dialect, entries.collect())
}

/// A compaction item for [`chain`].
pub(crate) fn compaction(summary: &str, first_kept: &str, tokens_before: u64) -> Value {
    json!({"type": "compaction", "summary": summary, "firstKeptEntryId": first_kept, "tokensBefore": tokens_before})
}

/// The shared build-context fixtures (pi 1–14, omp 3–16): `1 2 3 4 C5 6 7`.
pub(crate) fn compacted(dialect: Dialect, first_kept: &str) -> Result<SessionManager> {
    let summary = compaction("Summary of first two turns", first_kept, 1000);
    chain(
        dialect,
        vec![
            user("first"),
            assistant("response1"),
            user("second"),
            assistant("response2"),
            summary,
            user("third"),
            assistant("response3"),
        ],
    )
}

/// Siblings `3` and `4` under `2`.
pub(crate) fn siblings(d: Dialect) -> Result<SessionManager> {
    restored(
        d,
        vec![
            msg("1", None, user("start")),
            msg("2", Some("1"), assistant("r1")),
            msg("3", Some("2"), user("branch A")),
            msg("4", Some("2"), user("branch B")),
        ],
    )
}

/// An in-memory session of `d` holding `user("1")` and `assistant("2")`, and their ids.
pub(crate) fn exchange(d: Dialect) -> Result<(SessionManager, EntryId, EntryId)> {
    let mut m = mem(d);
    let a = m.append_message_json(user("1"))?;
    let b = m.append_message_json(assistant("2"))?;
    Ok((m, a, b))
}

/// msg1, msg2, msg3 each labelled (`l1`, `l2`, `l3`).
pub(crate) fn labelled(d: Dialect) -> Result<(SessionManager, [String; 3])> {
    let (mut m, a, b) = exchange(d)?;
    let c = m.append_message_json(user("3"))?;
    for (id, l) in [(&a, "l1"), (&b, "l2"), (&c, "l3")] {
        m.append_label_change(id, Some(l))?;
    }
    Ok((m, [a.into(), b.into(), c.into()]))
}

/// A v1 file (no version, no ids) of two messages.
pub(crate) const V1: &str = concat!(
    r#"{"type":"session","id":"v1-session","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#,
    "\n",
    r#"{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"a","timestamp":1}}"#,
    "\n",
    r#"{"type":"message","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"b"}],"timestamp":2}}"#,
    "\n"
);

/// The complex tree of pi 12 / omp 14.
pub(crate) fn complex_tree(dialect: Dialect) -> Result<SessionManager> {
    restored(
        dialect,
        vec![
            msg("1", None, user("start")),
            msg("2", Some("1"), assistant("r1")),
            msg("3", Some("2"), user("q2")),
            msg("4", Some("3"), assistant("r2")),
            entry(
                "compaction",
                "5",
                Some("4"),
                json!({"summary": "Compacted history", "firstKeptEntryId": "3", "tokensBefore": 1000}),
            ),
            msg("6", Some("5"), user("q3")),
            msg("7", Some("6"), assistant("r3")),
            msg("8", Some("3"), user("wrong approach")),
            msg("9", Some("8"), assistant("wrong")),
            entry("branch_summary", "10", Some("3"), json!({"fromId": "9", "summary": "Tried wrong approach"})),
            msg("11", Some("10"), user("better approach")),
        ],
    )
}
