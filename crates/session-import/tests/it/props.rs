//! Properties of generated Claude Code trees: random parents (so branches), responses
//! split over several lines. The import has one entry per source turn, pi's context
//! at the leaf holds the source's active branch in order, and importing is
//! deterministic and stable as the source grows.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::fixtures::context_lines;

/// One generated turn: who speaks, the turn its parent is (by index), and for an
/// assistant how many lines its response is split over.
#[derive(Clone, Debug)]
struct Turn {
    assistant: bool,
    parent: Option<usize>,
    lines: usize,
}

fn turns() -> impl Strategy<Value = Vec<Turn>> {
    prop::collection::vec((any::<bool>(), any::<prop::sample::Index>(), 1usize..4, 0u8..10), 1..40).prop_map(|raw| {
        raw.into_iter()
            .enumerate()
            .map(|(i, (assistant, parent, lines, root))| Turn {
                assistant,
                parent: (i > 0 && root > 0).then(|| parent.index(i)),
                lines: if assistant { lines } else { 1 },
            })
            .collect()
    })
}

/// The source lines of `turns`, and for each turn the uuid its children name.
fn source(turns: &[Turn]) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut last_uuid: Vec<String> = Vec::new();
    for (i, t) in turns.iter().enumerate() {
        let mut parent = t.parent.map(|p| last_uuid[p].clone());
        let ts = format!("2026-01-01T00:{:02}:{:02}.000Z", i / 60, i % 60);
        for k in 0..t.lines {
            let uuid = format!("uuid-{i}-{k}");
            let line = if t.assistant {
                json!({
                    "type": "assistant", "uuid": uuid, "parentUuid": parent, "sessionId": "gen", "timestamp": ts,
                    "message": {"id": format!("msg_{i}"), "role": "assistant", "model": "m",
                        "content": [{"type": "text", "text": format!("a{i}.{k}")}],
                        "usage": {"input_tokens": 7, "output_tokens": k + 1}},
                })
            } else {
                json!({"type": "user", "uuid": uuid, "parentUuid": parent, "sessionId": "gen", "timestamp": ts,
                    "message": {"role": "user", "content": format!("u{i}")}})
            };
            out.push_str(&line.to_string());
            out.push('\n');
            parent = Some(uuid);
        }
        last_uuid.push(parent.unwrap_or_default());
    }
    (out, last_uuid)
}

/// The source's active branch (from its last turn up), as the context lines render it.
fn expected_context(turns: &[Turn]) -> Vec<String> {
    let mut path = Vec::new();
    let mut at = Some(turns.len() - 1);
    while let Some(i) = at {
        path.push(i);
        at = turns[i].parent;
    }
    path.reverse();
    path.into_iter()
        .map(|i| {
            let t = &turns[i];
            if t.assistant {
                let texts: Vec<String> = (0..t.lines).map(|k| format!("a{i}.{k}")).collect();
                format!("assistant: {}", texts.join(" | "))
            } else {
                format!("user: u{i}")
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn one_entry_per_turn_and_the_active_branch_in_order(turns in turns()) {
        let (text, _) = source(&turns);
        let imported = session_import::import(text.as_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(imported.diagnostics.is_empty(), "{:?}", imported.diagnostics);
        prop_assert_eq!(imported.entries.len(), turns.len());
        prop_assert_eq!(context_lines(&imported), expected_context(&turns));
        // The last turn's entry is the leaf.
        let leaf = imported.leaf().map(str::to_owned);
        let last = imported.entries.iter().find(|r| {
            r.get("message").and_then(|m| m.get("timestamp")).and_then(Value::as_i64)
                == Some(((turns.len() - 1) as i64) * 1000 + 1_767_225_600_000)
        });
        prop_assert_eq!(last.and_then(|r| r.id()).map(str::to_owned), leaf);
        // Usage is the response's last line's, counted once.
        for r in &imported.entries {
            if r.message_role() == Some("assistant") {
                let content = r.get("message").and_then(|m| m.get("content")).and_then(Value::as_array).map_or(0, Vec::len);
                let output = r.get("message").and_then(|m| m.get("usage")).and_then(|u| u.get("output")).and_then(Value::as_u64);
                prop_assert_eq!(output, Some(content as u64));
            }
        }
    }

    #[test]
    fn deterministic_and_stable_as_the_source_grows(turns in turns(), cut in any::<prop::sample::Index>()) {
        let (text, _) = source(&turns);
        let a = session_import::import(text.as_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let b = session_import::import(text.as_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let lines = |i: &session_import::Imported| i.records(None).iter().map(|r| r.line().to_string()).collect::<Vec<_>>();
        prop_assert_eq!(lines(&a), lines(&b));
        // A source cut after any whole turn imports to records the whole import holds.
        let keep = cut.index(turns.len()) + 1;
        let (prefix, _) = source(&turns[..keep]);
        let p = session_import::import(prefix.as_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let whole: std::collections::HashSet<String> = lines(&a).into_iter().collect();
        for l in lines(&p) {
            prop_assert!(whole.contains(&l), "{} is not in the whole import", l);
        }
    }
}
