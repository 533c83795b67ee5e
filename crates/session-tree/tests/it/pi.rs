//! pi's context and projection: pi.md §8.A items 1-14 (build-context.test.ts) and
//! the §4 rules on null content, custom messages, compaction snapshots and edits.

use serde_json::{Value, json};
use session_model::{Dialect, Record};
use session_tree::{Leaf, SessionTree, pi};

use crate::support::{texts, tree_of, value};

fn ctx(t: &SessionTree, leaf: Leaf<'_>) -> Value {
    value(&pi::build_context(t, leaf).to_json_string())
}

#[test]
fn build_context_checklist_1_to_6() {
    // 1
    let t = SessionTree::new(Dialect::Pi, Vec::new());
    assert_eq!(ctx(&t, Leaf::Current), json!({"messages": [], "thinkingLevel": "off", "model": null}));
    // 2
    assert_eq!(texts(&ctx(&tree_of("1 - user hi", Dialect::Pi), Leaf::Current)), ["user: hi"]);
    // 3
    let v = ctx(&tree_of("1 - user a\n2 ^ assistant b\n3 ^ user c\n4 ^ assistant d", Dialect::Pi), Leaf::Current);
    let roles: Vec<&str> = v["messages"].as_array().into_iter().flatten().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    // 4
    let v = ctx(&tree_of("1 - user a\n2 ^ thinking high\n3 ^ assistant b", Dialect::Pi), Leaf::Current);
    assert_eq!((v["thinkingLevel"].as_str(), v["messages"].as_array().map(Vec::len)), (Some("high"), Some(2)));
    // 5
    let v = ctx(&tree_of("1 - assistant b", Dialect::Pi), Leaf::Current);
    assert_eq!(v["model"], json!({"provider": "anthropic", "modelId": "claude-test"}));
    // 6
    let v = ctx(&tree_of("1 - model openai/gpt-4\n2 ^ assistant b", Dialect::Pi), Leaf::Current);
    assert_eq!(v["model"], json!({"provider": "anthropic", "modelId": "claude-test"}));
    let v = ctx(&tree_of("1 - assistant b\n2 ^ model openai/gpt-4", Dialect::Pi), Leaf::Current);
    assert_eq!(v["model"], json!({"provider": "openai", "modelId": "gpt-4"}));
}

#[test]
fn build_context_checklist_7_to_9_compaction() {
    // 7
    let s = "1 - user first\n2 ^ assistant response1\n3 ^ user second\n4 ^ assistant response2\n5 ^ compaction 3 Summary of first two turns\n6 ^ user third\n7 ^ assistant response3";
    let v = ctx(&tree_of(s, Dialect::Pi), Leaf::Current);
    assert_eq!(
        texts(&v),
        [
            "compactionSummary: Summary of first two turns",
            "user: second",
            "assistant: response2",
            "user: third",
            "assistant: response3"
        ]
    );
    // 8
    let s = "1 - user a\n2 ^ assistant b\n3 ^ compaction 1 Empty summary\n4 ^ user c";
    let v = ctx(&tree_of(s, Dialect::Pi), Leaf::Current);
    assert_eq!(texts(&v), ["compactionSummary: Empty summary", "user: a", "assistant: b", "user: c"]);
    // 9
    let s = "1 - user a\n2 ^ assistant b\n3 ^ compaction 1 First summary\n4 ^ user c\n5 ^ assistant d\n6 ^ compaction 4 Second summary\n7 ^ user e";
    let v = ctx(&tree_of(s, Dialect::Pi), Leaf::Current);
    assert_eq!(texts(&v), ["compactionSummary: Second summary", "user: c", "assistant: d", "user: e"]);
}

#[test]
fn build_context_checklist_10_to_14_branches() {
    // 10
    let s = "1 - user start\n2 ^ assistant r1\n3 2 user branch A\n4 2 user branch B";
    let t = tree_of(s, Dialect::Pi);
    assert_eq!(texts(&ctx(&t, Leaf::Id("3"))).last().map(String::as_str), Some("user: branch A"));
    assert_eq!(texts(&ctx(&t, Leaf::Id("4"))).last().map(String::as_str), Some("user: branch B"));
    // 11
    let s = "1 - user start\n2 ^ assistant r1\n3 ^ user abandoned\n4 2 branch_summary 3 Summary of abandoned work\n5 ^ user new direction";
    let v = ctx(&tree_of(s, Dialect::Pi), Leaf::Id("5"));
    assert_eq!(
        texts(&v)[2..],
        ["branchSummary: Summary of abandoned work".to_owned(), "user: new direction".to_owned()]
    );
    assert_eq!(v["messages"][2]["fromId"], json!("3"));
    // 12
    let s = "1 - user start\n2 ^ assistant r1\n3 ^ user q2\n4 ^ assistant r2\n5 ^ compaction 3 Compacted history\n6 ^ user q3\n7 ^ assistant r3\n8 2 user wrong\n9 ^ assistant bad\n10 2 branch_summary 9 Tried wrong approach\n11 ^ user better approach";
    let t = tree_of(s, Dialect::Pi);
    assert_eq!(
        texts(&ctx(&t, Leaf::Id("7"))),
        ["compactionSummary: Compacted history", "user: q2", "assistant: r2", "user: q3", "assistant: r3"]
    );
    assert_eq!(
        texts(&ctx(&t, Leaf::Id("11"))),
        ["user: start", "assistant: r1", "branchSummary: Tried wrong approach", "user: better approach"]
    );
    // 13
    let t = tree_of("1 - user a\n2 ^ assistant b", Dialect::Pi);
    assert_eq!(texts(&ctx(&t, Leaf::Id("nonexistent"))).len(), 2);
    // 14
    let t = tree_of("1 - user a\n2 missing user orphan", Dialect::Pi);
    assert_eq!(texts(&ctx(&t, Leaf::Id("2"))), ["user: orphan"]);
}

#[test]
fn null_content_and_synthesized_messages() {
    let raw = [
        r#"{"type":"message","id":"s","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"system","content":null,"timestamp":1}}"#,
        r#"{"type":"message","id":"u","parentId":"s","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","timestamp":2}}"#,
        r#"{"type":"message","id":"b","parentId":"u","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"bashExecution","command":"ls","content":null}}"#,
        r#"{"type":"custom_message","customType":"cm","content":null,"display":false,"id":"c","parentId":"b","timestamp":"bad date"}"#,
        r#"{"type":"branch_summary","id":"e","parentId":"c","timestamp":"2026-01-01T00:00:04.000Z","fromId":"root","summary":""}"#,
    ];
    let t = SessionTree::new(Dialect::Pi, raw.iter().map(|l| Record::parse(l).expect("json")).collect());
    let v = ctx(&t, Leaf::Current);
    assert_eq!(
        v["messages"],
        json!([
            {"role": "system", "content": "", "timestamp": 1},
            {"role": "user", "timestamp": 2, "content": []},
            {"role": "bashExecution", "command": "ls", "content": null},
            {"role": "custom", "customType": "cm", "content": [], "display": false, "timestamp": null},
        ])
    );
    // Key order of a synthesized custom message: details sits before timestamp and is omitted when absent.
    let out = pi::build_context(&t, Leaf::Current).to_json_string();
    assert!(
        out.contains(r#"{"role":"custom","customType":"cm","content":[],"display":false,"timestamp":null}"#),
        "{out}"
    );
}

#[test]
fn compaction_system_snapshot_and_retain_none() {
    let raw = [
        r#"{"type":"message","id":"u","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"q","timestamp":1}}"#,
        r#"{"type":"compaction","id":"c","parentId":"u","timestamp":"2026-01-01T00:00:01.000Z","summary":"s","firstKeptEntryId":"c","tokensBefore":5,"systemMessage":{"role":"system","content":"snap","timestamp":1767225601000}}"#,
        r#"{"type":"message","id":"v","parentId":"c","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"user","content":"after","timestamp":3}}"#,
    ];
    let t = SessionTree::new(Dialect::Pi, raw.iter().map(|l| Record::parse(l).expect("json")).collect());
    // pi 106: retain none; the snapshot comes first.
    assert_eq!(texts(&ctx(&t, Leaf::Current)), ["system: snap", "compactionSummary: s", "user: after"]);
    let p = value(&pi::build_projection(&t, Leaf::Current).to_json_string());
    assert_eq!(p["entries"][0]["sourceEntry"]["id"], json!("c"));
    assert_eq!(p["entries"][0]["messages"].as_array().map(Vec::len), Some(2));
    assert_eq!(p["messages"].as_array().map(Vec::len), Some(3));
}

#[test]
fn context_edits_are_branch_local() {
    // pi 110-111: an assistant string replacement becomes one text block; a user one stays a string.
    let s = "u - user original\na ^ assistant answer\ne1 ^ edit u new question\ne2 ^ edit a new answer";
    let t = tree_of(s, Dialect::Pi);
    let v = ctx(&t, Leaf::Current);
    assert_eq!(v["messages"][0]["content"], json!("new question"));
    assert_eq!(v["messages"][1]["content"], json!([{"type": "text", "text": "new answer"}]));
    assert_eq!(v["messages"][1]["provider"], json!("anthropic"));
    // Above the edit the original shows; the raw entry is unchanged.
    assert_eq!(texts(&ctx(&t, Leaf::Id("a"))), ["user: original", "assistant: answer"]);
    assert_eq!(
        t.get("u").and_then(|r| r.message_info().content.as_str().map(str::to_owned)).as_deref(),
        Some("original")
    );
    // A null replacement drops the message but not the entry.
    let t = tree_of("u - user original\ne ^ edit u null", Dialect::Pi);
    assert!(texts(&ctx(&t, Leaf::Current)).is_empty());
    assert!(t.get("u").is_some());
}

/// A lone surrogate anywhere in a record (which JavaScript accepts) does not hide its
/// other fields: the branch summary, the compaction's kept entry and the timestamps
/// are read as from any other record, in both dialects.
#[test]
fn lone_surrogates_do_not_hide_fields() {
    let lines = [
        r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"x\ud800y","timestamp":1}}"#,
        r#"{"type":"branch_summary","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","fromId":"a","summary":"s\udc00t"}"#,
        r#"{"type":"message","id":"c","parentId":"b","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"user","content":"z","timestamp":3}}"#,
        r#"{"type":"compaction","id":"d","parentId":"c","timestamp":"2026-01-01T00:00:04.000Z","summary":"sum\ud800","firstKeptEntryId":"c","tokensBefore":1}"#,
    ];
    // The output keeps the lone surrogates as written; read it as JavaScript would.
    let js = |text: &str| session_model::json::parse(text).expect("JSON");
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let records = lines.iter().map(|l| Record::parse(l).expect("a JavaScript-valid line")).collect();
        let t = SessionTree::new(dialect, records);
        let v = match dialect {
            Dialect::Pi => js(&pi::build_context(&t, Leaf::Current).to_json_string()),
            Dialect::Omp => {
                js(&session_tree::omp::build_context(&t, Leaf::Current, Default::default()).to_json_string())
            }
        };
        let roles: Vec<&str> =
            v["messages"].as_array().into_iter().flatten().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, ["compactionSummary", "user"], "{dialect:?}: {v}");
        assert_eq!(v["messages"][0]["timestamp"], json!(1767225604000_i64), "{dialect:?}");
    }
    let records = lines[..3].iter().map(|l| Record::parse(l).expect("a JavaScript-valid line")).collect();
    let v = js(&pi::build_context(&SessionTree::new(Dialect::Pi, records), Leaf::Current).to_json_string());
    let roles: Vec<&str> = v["messages"].as_array().into_iter().flatten().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["user", "branchSummary", "user"], "{v}");
    assert_eq!(v["messages"][1]["timestamp"], json!(1767225602000_i64));
}

/// A message whose content is replaced (null content) and a compaction whose kept id
/// holds a lone surrogate: the message stays an object and the kept entry is found.
#[test]
fn lone_surrogates_in_replaced_content_and_kept_ids() {
    let js = |text: &str| session_model::json::parse(text).expect("JSON");
    let lines = [
        r#"{"type":"message","id":"k\ud800","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":null,"note":"n\udc00","timestamp":1}}"#,
        r#"{"type":"compaction","id":"d","parentId":"k\ud800","timestamp":"2026-01-01T00:00:04.000Z","summary":"sum","firstKeptEntryId":"k\ud800","tokensBefore":1}"#,
    ];
    let records = lines.iter().map(|l| Record::parse(l).expect("a JavaScript-valid line")).collect();
    let v = js(&pi::build_context(&SessionTree::new(Dialect::Pi, records), Leaf::Current).to_json_string());
    let messages = v["messages"].as_array().cloned().unwrap_or_default();
    assert_eq!(messages.len(), 2, "{v}");
    assert_eq!(messages[1]["role"], json!("user"), "the kept message is an object: {v}");
    assert_eq!(messages[1]["content"], json!([]));
}

/// A timestamp whose day runs past its month's end (`2026-02-30`) is read as pi and
/// omp read it (`new Date(...)` in V8 and JavaScriptCore rolls it over to March 2),
/// not as an invalid date: the messages the context builds from entries carry it.
#[test]
fn days_past_the_months_end_roll_over_in_built_messages() {
    let lines = [
        r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"q","timestamp":1}}"#,
        r#"{"type":"branch_summary","id":"b","parentId":"a","timestamp":"2026-02-30T10:00:00.000Z","fromId":"a","summary":"s"}"#,
        r#"{"type":"compaction","id":"c","parentId":"b","timestamp":"2026-04-31T00:00:00Z","summary":"sum","firstKeptEntryId":"b","tokensBefore":1}"#,
        r#"{"type":"custom_message","customType":"cm","content":"x","display":true,"id":"d","parentId":"c","timestamp":"2026-02-31"}"#,
    ];
    // What pi 1.6.0 and omp 18.3.4 answer for this branch (ref-cli.sh context).
    let want = json!([
        {"role": "compactionSummary", "summary": "sum", "tokensBefore": 1, "timestamp": 1_777_593_600_000_i64},
        {"role": "branchSummary", "summary": "s", "fromId": "a", "timestamp": 1_772_445_600_000_i64},
        {"role": "custom", "customType": "cm", "content": "x", "display": true, "timestamp": 1_772_496_000_000_i64},
    ]);
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let records = lines.iter().map(|l| Record::parse(l).expect("json")).collect();
        let t = SessionTree::new(dialect, records);
        let out = match dialect {
            Dialect::Pi => pi::build_context(&t, Leaf::Current).to_json_string(),
            Dialect::Omp => session_tree::omp::build_context(&t, Leaf::Current, Default::default()).to_json_string(),
        };
        let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(v["messages"], want, "{dialect:?}");
    }
}
