//! Properties of generated Codex rollouts (user turns, responses made of text,
//! reasoning and calls, tool outputs, usage, model switches, compactions): pi's context
//! at the leaf is the rollout's conversation since its last compaction, in order, and a
//! rollout cut anywhere imports to the whole import's entries (only a response still
//! being written at the cut may differ).

use std::collections::HashMap;

use proptest::prelude::*;
use serde_json::json;

use super::fixtures::context_lines;

#[derive(Clone, Debug)]
enum Ev {
    User,
    Text,
    Reasoning,
    Call,
    Output,
    Usage,
    Model(bool),
    Compact,
}

fn events() -> impl Strategy<Value = Vec<Ev>> {
    let ev = prop_oneof![
        3 => Just(Ev::User),
        3 => Just(Ev::Text),
        1 => Just(Ev::Reasoning),
        2 => Just(Ev::Call),
        2 => Just(Ev::Output),
        2 => Just(Ev::Usage),
        1 => any::<bool>().prop_map(Ev::Model),
        1 => Just(Ev::Compact),
    ];
    prop::collection::vec(ev, 0..40)
}

fn rollout(evs: &[Ev]) -> String {
    let mut out = String::new();
    let mut line = |i: usize, ty: &str, payload: serde_json::Value| {
        let ts = format!("2026-01-01T00:{:02}:{:02}.000Z", i / 60, i % 60);
        out.push_str(&json!({"timestamp": ts, "type": ty, "payload": payload}).to_string());
        out.push('\n');
    };
    line(
        0,
        "session_meta",
        json!({"id": "gen", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w", "model_provider": "openai"}),
    );
    for (i, e) in evs.iter().enumerate() {
        let i = i + 1;
        match e {
            Ev::User => line(
                i,
                "response_item",
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": format!("u{i}")}]}),
            ),
            Ev::Text => line(
                i,
                "response_item",
                json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": format!("a{i}")}]}),
            ),
            Ev::Reasoning => line(
                i,
                "response_item",
                json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": format!("r{i}")}], "encrypted_content": "x"}),
            ),
            Ev::Call => line(
                i,
                "response_item",
                json!({"type": "function_call", "name": "shell", "arguments": format!("{{\"n\":{i}}}"), "call_id": format!("c{i}")}),
            ),
            Ev::Output => line(
                i,
                "response_item",
                json!({"type": "function_call_output", "call_id": format!("c{}", i.saturating_sub(1)), "output": format!("o{i}")}),
            ),
            Ev::Usage => line(
                i,
                "event_msg",
                json!({"type": "token_count", "info": {"last_token_usage": {"input_tokens": 10, "cached_input_tokens": 4, "output_tokens": i, "reasoning_output_tokens": 0, "total_tokens": 10 + i}}}),
            ),
            Ev::Model(b) => line(
                i,
                "turn_context",
                json!({"turn_id": format!("t{i}"), "cwd": "/w", "model": if *b { "m1" } else { "m2" }}),
            ),
            Ev::Compact => line(i, "compacted", json!({"message": format!("s{i}")})),
        }
    }
    out
}

fn expected(evs: &[Ev]) -> Vec<String> {
    let mut ctx: Vec<(String, Vec<String>)> = Vec::new();
    let mut open = false;
    for (i, e) in evs.iter().enumerate() {
        let i = i + 1;
        let part = match e {
            Ev::Text => Some(format!("a{i}")),
            Ev::Reasoning => Some("[thinking]".to_owned()),
            Ev::Call => Some("[call shell]".to_owned()),
            _ => None,
        };
        if let Some(p) = part {
            if !open {
                ctx.push(("assistant".to_owned(), Vec::new()));
                open = true;
            }
            if let Some(last) = ctx.last_mut() {
                last.1.push(p);
            }
            continue;
        }
        match e {
            Ev::User => {
                open = false;
                ctx.push(("user".to_owned(), vec![format!("u{i}")]));
            }
            Ev::Output => {
                open = false;
                ctx.push(("toolResult".to_owned(), vec![format!("o{i}")]));
            }
            Ev::Model(_) => open = false,
            Ev::Compact => {
                open = false;
                ctx = vec![("compactionSummary".to_owned(), vec![format!("s{i}")])];
            }
            _ => {}
        }
    }
    ctx.into_iter().map(|(role, parts)| format!("{role}: {}", parts.join(" | "))).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn the_conversation_since_the_last_compaction_in_order(evs in events()) {
        let text = rollout(&evs);
        let imported = session_import::import(text.as_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(context_lines(&imported), expected(&evs));
    }

    #[test]
    fn a_rollout_cut_anywhere_imports_to_the_whole_imports_entries(evs in events(), cut in any::<prop::sample::Index>()) {
        let text = rollout(&evs);
        let whole = session_import::import(text.as_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let keep = 1 + cut.index(lines.len());
        let prefix: String = lines[..keep].concat();
        let part = session_import::import(prefix.as_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let by_id: HashMap<&str, String> = whole.entries.iter().filter_map(|r| Some((r.id()?, r.line().into_owned()))).collect();
        let last_assistant = part.entries.iter().rev().find(|r| r.message_role() == Some("assistant")).and_then(|r| r.id());
        for r in &part.entries {
            let id = r.id().unwrap_or_default();
            let same = by_id.get(id).map(String::as_str) == Some(&*r.line());
            prop_assert!(same || (by_id.contains_key(id) && Some(id) == last_assistant), "{} changed", r.line());
        }
    }
}
