//! omp's context and transcript: omp.md §10.1 items 3-16 and the §4 rules on
//! settings, reset boundaries, tool-call stripping and failed turns.

use serde_json::{Value, json};
use session_model::{Dialect, Record};
use session_tree::{Leaf, SessionTree, omp};

use crate::support::{texts, tree_of, value};

fn ctx(t: &SessionTree, leaf: Leaf<'_>) -> Value {
    value(&omp::build_context(t, leaf, omp::ContextOptions::default()).to_json_string())
}

fn transcript(t: &SessionTree, leaf: Leaf<'_>) -> Value {
    value(&omp::build_context(t, leaf, omp::ContextOptions { transcript: true }).to_json_string())
}

#[test]
fn build_context_checklist_3_to_8() {
    let empty = json!({"messages": [], "thinkingLevel": "off", "models": {}, "injectedTtsrRules": [], "mode": "none"});
    // 3
    assert_eq!(ctx(&SessionTree::new(Dialect::Omp, Vec::new()), Leaf::Current), empty);
    assert_eq!(transcript(&tree_of("1 - user a", Dialect::Omp), Leaf::Null), empty);
    // 4, 5
    assert_eq!(texts(&ctx(&tree_of("1 - user hi", Dialect::Omp), Leaf::Current)), ["user: hi"]);
    let v = ctx(&tree_of("1 - user a\n2 ^ assistant b\n3 ^ user c\n4 ^ assistant d", Dialect::Omp), Leaf::Current);
    assert_eq!(texts(&v), ["user: a", "assistant: b", "user: c", "assistant: d"]);
    // 6
    let v = ctx(&tree_of("1 - user a\n2 ^ thinking high\n3 ^ assistant b", Dialect::Omp), Leaf::Current);
    assert_eq!((v["thinkingLevel"].as_str(), v["messages"].as_array().map(Vec::len)), (Some("high"), Some(2)));
    assert_eq!(v["configuredThinkingLevel"], json!("high"));
    // 7
    let v = ctx(&tree_of("1 - assistant b", Dialect::Omp), Leaf::Current);
    assert_eq!(v["models"], json!({"default": "anthropic/claude-test"}));
    // 8 (18.3.4): an explicit default model_change is not overridden by later assistants.
    let v = ctx(&tree_of("1 - model openai/gpt-4\n2 ^ assistant b", Dialect::Omp), Leaf::Current);
    assert_eq!(v["models"], json!({"default": "openai/gpt-4"}));
    let v = ctx(&tree_of("1 - assistant b\n2 ^ model openai/gpt-4", Dialect::Omp), Leaf::Current);
    assert_eq!(v["models"], json!({"default": "openai/gpt-4"}));
}

#[test]
fn build_context_checklist_9_to_16() {
    // 9
    let s = "1 - user first\n2 ^ assistant r1\n3 ^ user second\n4 ^ assistant r2\n5 ^ compaction 3 S\n6 ^ user third\n7 ^ assistant r3";
    assert_eq!(
        texts(&ctx(&tree_of(s, Dialect::Omp), Leaf::Current)),
        ["compactionSummary: S", "user: second", "assistant: r2", "user: third", "assistant: r3"]
    );
    // 10
    let s = "1 - user a\n2 ^ assistant b\n3 ^ compaction 1 S\n4 ^ user c";
    assert_eq!(
        texts(&ctx(&tree_of(s, Dialect::Omp), Leaf::Current)),
        ["compactionSummary: S", "user: a", "assistant: b", "user: c"]
    );
    // 11
    let s = "1 - user a\n2 ^ assistant b\n3 ^ compaction 1 First\n4 ^ user c\n5 ^ assistant d\n6 ^ compaction 4 Second\n7 ^ user e";
    assert_eq!(
        texts(&ctx(&tree_of(s, Dialect::Omp), Leaf::Current)),
        ["compactionSummary: Second", "user: c", "assistant: d", "user: e"]
    );
    // 12
    let t = tree_of("1 - user a\n2 ^ assistant b\n3 2 user A\n4 2 user B", Dialect::Omp);
    assert_eq!(texts(&ctx(&t, Leaf::Id("3"))).last().map(String::as_str), Some("user: A"));
    assert_eq!(texts(&ctx(&t, Leaf::Id("4"))).last().map(String::as_str), Some("user: B"));
    // 13, 14
    let s = "1 - user start\n2 ^ assistant r1\n3 ^ user q2\n4 ^ assistant r2\n5 ^ compaction 3 Compacted\n6 ^ user q3\n7 ^ assistant r3\n8 2 user wrong\n9 ^ assistant bad\n10 2 branch_summary 9 Tried wrong\n11 ^ user better";
    let t = tree_of(s, Dialect::Omp);
    assert_eq!(texts(&ctx(&t, Leaf::Id("7"))).len(), 5);
    assert_eq!(
        texts(&ctx(&t, Leaf::Id("11"))),
        ["user: start", "assistant: r1", "branchSummary: Tried wrong", "user: better"]
    );
    // 15
    assert_eq!(texts(&ctx(&tree_of("1 - user a\n2 ^ assistant b", Dialect::Omp), Leaf::Id("zz"))).len(), 2);
    // 16
    assert_eq!(
        texts(&ctx(&tree_of("1 - user a\n2 missing user orphan", Dialect::Omp), Leaf::Id("2"))),
        ["user: orphan"]
    );
}

#[test]
fn transcript_inlines_compactions_and_marks_cache_misses() {
    let s = "1 - user a\n2 ^ assistant b\n3 ^ compaction 1 First\n4 ^ user c\n5 ^ assistant d\n6 ^ compaction 4 Second\n7 ^ user e\n8 ^ assistant f";
    let v = transcript(&tree_of(s, Dialect::Omp), Leaf::Current);
    assert_eq!(
        texts(&v),
        [
            "user: a",
            "assistant: b",
            "compactionSummary: [Superseded compaction summary elided after a newer compaction]",
            "user: c",
            "assistant: d",
            "compactionSummary: Second",
            "user: e",
            "assistant: f"
        ]
    );
    assert_eq!(v["cacheMissExplainedAt"], json!([false, false, false, false, true, false, false, true]));
}

#[test]
fn dangling_tool_calls_are_stripped() {
    let s = "1 - user a\n2 ^ call t1 looking\n3 ^ tool t1 result\n4 ^ call t2 again";
    let t = tree_of(s, Dialect::Omp);
    let v = ctx(&t, Leaf::Current);
    assert_eq!(texts(&v), ["user: a", "assistant: looking | <toolCall t1>", "toolResult: result", "assistant: again"]);
    assert_eq!(v["messages"][3].get("strippedToolCalls"), None);
    let tv = transcript(&t, Leaf::Current);
    assert_eq!(tv["messages"][3]["strippedToolCalls"], json!(1));
    // A turn with only a dangling call disappears from the model context.
    let raw = r#"{"type":"message","id":"5","parentId":"4","timestamp":"2026-01-01T00:00:09.000Z","message":{"role":"assistant","content":[{"type":"redactedThinking","data":"x"},{"type":"toolCall","id":"t3","name":"r","arguments":{}}],"provider":"p","model":"m","stopReason":"toolUse"}}"#;
    let mut recs = crate::support::parse_session(s, Dialect::Omp);
    recs.push(Record::parse(raw).expect("json"));
    let t = SessionTree::new(Dialect::Omp, recs);
    assert_eq!(ctx(&t, Leaf::Current)["messages"].as_array().map(Vec::len), Some(4));
    assert_eq!(transcript(&t, Leaf::Current)["messages"][4]["content"], json!([]));
}

#[test]
fn failed_turns_are_dropped_with_their_results() {
    let raw = [
        r#"{"type":"message","id":"1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"go","timestamp":1}}"#,
        r#"{"type":"message","id":"2","parentId":"1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"t","name":"r","arguments":{}}],"provider":"p","model":"m","stopReason":"error"}}"#,
        r#"{"type":"message","id":"3","parentId":"2","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"toolResult","toolCallId":"t","toolName":"r","content":[],"isError":true}}"#,
        r#"{"type":"message","id":"4","parentId":"3","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"retry ok"}],"provider":"p","model":"m","stopReason":"stop"}}"#,
    ];
    let t = SessionTree::new(Dialect::Omp, raw.iter().map(|l| Record::parse(l).expect("json")).collect());
    assert_eq!(texts(&ctx(&t, Leaf::Current)), ["user: go", "assistant: retry ok"]);
    assert_eq!(texts(&transcript(&t, Leaf::Current)).len(), 4);
}

#[test]
fn settings_from_the_path() {
    let s = "1 - user a\n2 ^ tier \"priority\"\n3 ^ json {\"type\":\"ttsr_injection\",\"id\":\"4\",\"parentId\":\"2\",\"timestamp\":\"2026-01-01T00:00:03.000Z\",\"injectedRules\":[\"r1\",\"r2\",\"r1\"]}\n5 4 json {\"type\":\"mode_change\",\"id\":\"5\",\"parentId\":\"4\",\"timestamp\":\"2026-01-01T00:00:05.000Z\",\"mode\":\"plan\",\"data\":{\"step\":1}}";
    let v = ctx(&tree_of(s, Dialect::Omp), Leaf::Current);
    assert_eq!(v["serviceTier"], json!({"openai": "priority", "anthropic": "priority", "google": "priority"}));
    assert_eq!(v["injectedTtsrRules"], json!(["r1", "r2"]));
    assert_eq!((v["mode"].clone(), v["modeData"].clone()), (json!("plan"), json!({"step": 1})));
    let v = ctx(
        &tree_of("1 - tier {\"openai\":\"flex\",\"google\":\"bogus\"}\n2 ^ tier \"bogus\"", Dialect::Omp),
        Leaf::Id("1"),
    );
    assert_eq!(v["serviceTier"], json!({"openai": "flex"}));
    let v = ctx(&tree_of("1 - tier {\"openai\":\"flex\"}\n2 ^ tier \"bogus\"", Dialect::Omp), Leaf::Current);
    assert_eq!(v.get("serviceTier"), None);
}

/// A thinking block kept beside a stripped dangling tool call loses a truthy
/// `thinkingSignature`; truthiness is JavaScript's on the value as read, so `1e400`
/// (`Infinity`) is truthy and goes, `0` is falsy and stays (omp 18.3.4's answer).
#[test]
fn an_infinite_thinking_signature_is_truthy() {
    let lines = [
        r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"q","timestamp":1}}"#,
        r#"{"type":"message","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hm","thinkingSignature":1e400},{"type":"thinking","thinking":"h2","thinkingSignature":0},{"type":"text","text":"t"},{"type":"toolCall","id":"t1","name":"bash","arguments":{}}],"stopReason":"toolUse","timestamp":2}}"#,
        r#"{"type":"message","id":"c","parentId":"b","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"user","content":"next","timestamp":3}}"#,
    ];
    let records = lines.iter().map(|l| Record::parse(l).expect("json")).collect();
    let t = SessionTree::new(Dialect::Omp, records);
    let out = session_tree::omp::build_context(&t, Leaf::Current, Default::default()).to_json_string();
    assert!(
        out.contains(r#""content":[{"type":"thinking","thinking":"hm"},{"type":"thinking","thinking":"h2","thinkingSignature":0},{"type":"text","text":"t"}]"#),
        "{out}"
    );
    // The same truth test drops a retry-recovery turn whose flag is `1e400`.
    let lines = [
        lines[0],
        r#"{"type":"message","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"retrying"}],"retryRecovery":1e400,"stopReason":"stop","timestamp":2}}"#,
        lines[2],
    ];
    let records = lines.iter().map(|l| Record::parse(l).expect("json")).collect();
    let t = SessionTree::new(Dialect::Omp, records);
    let out = session_tree::omp::build_context(&t, Leaf::Current, Default::default()).to_json_string();
    assert!(
        out.starts_with(r#"{"messages":[{"role":"user","content":"q","timestamp":1},{"role":"user","content":"next","timestamp":3}],"#),
        "{out}"
    );
}
