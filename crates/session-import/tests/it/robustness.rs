//! Damaged and drifted sources: lines of the fixtures cut short or with a field of
//! another JSON type, in any order. The import never panics; what it returns is a tree
//! whose every entry has an id and whose context pi can build.

use proptest::prelude::*;
use serde_json::Value;
use session_model::Dialect;
use session_tree::{Leaf, SessionTree};

const SOURCES: &[&str] = &[
    include_str!("../../../../testdata/import/claude/branched.jsonl"),
    include_str!("../../../../testdata/import/claude/compacted.jsonl"),
    include_str!(
        "../../../../testdata/import/codex/rollout-2026-03-03T08-00-00-019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b.jsonl"
    ),
];

/// Replaces the value at a pseudo-random path of `v` (chosen by `pick`) with `with`.
fn drift(v: &mut Value, pick: usize, with: Value) {
    let deeper = !pick.is_multiple_of(3);
    let child = match v {
        Value::Object(m) if deeper && !m.is_empty() => {
            let k = m.keys().nth(pick % m.len()).cloned().unwrap_or_default();
            m.get_mut(&k)
        }
        Value::Array(a) if deeper && !a.is_empty() => {
            let n = a.len();
            a.get_mut(pick % n)
        }
        _ => None,
    };
    match child {
        Some(c) => drift(c, pick / 7, with),
        None => *v = with,
    }
}

fn mutated() -> impl Strategy<Value = (usize, Vec<(usize, u8, usize)>)> {
    (0..SOURCES.len(), prop::collection::vec((any::<usize>(), 0u8..8, any::<usize>()), 1..30))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn damaged_and_drifted_sources_import_without_panicking((src, picks) in mutated()) {
        let lines: Vec<&str> = SOURCES[src].lines().collect();
        let mut out = String::new();
        for (line, how, pick) in picks {
            let l = lines[line % lines.len()];
            let text = match how {
                0 => l.chars().take(pick % (l.len() + 1)).collect(),
                1..=6 => match serde_json::from_str::<Value>(l) {
                    Ok(mut v) => {
                        let with = [Value::Null, Value::from(1), Value::from("s"), Value::Array(vec![]), serde_json::json!({}), Value::from(true)][usize::from(how) - 1].clone();
                        drift(&mut v, pick, with);
                        v.to_string()
                    }
                    Err(_) => l.to_owned(),
                },
                _ => l.to_owned(),
            };
            out.push_str(&text);
            out.push('\n');
        }
        if let Ok(imported) = session_import::import(out.as_bytes()) {
            prop_assert!(imported.entries.iter().all(|r| r.id().is_some()));
            let tree = SessionTree::new(Dialect::Pi, imported.entries.clone());
            let _ = session_tree::pi::build_context(&tree, Leaf::Current).to_json_string();
            let _ = imported.header(None).line();
        }
    }
}
