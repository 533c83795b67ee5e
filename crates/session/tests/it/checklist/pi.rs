//! pi's checklist (`spec/pi.md` §8), one test per item the library covers.
//!
//! Not here:
//! - 19–31 (`loadEntriesFromFile`, `findMostRecentSession`): session-discovery's own
//!   tests and the conformance corpus (`load`, `recent` in `conformance/check.py`).
//! - 33, 35 fail on pi 1.6.0 by design; the library keeps 1.6.0's refusal (item 98).
//! - 75 (first assertion) fails on 1.6.0 by design; the library keeps 1.6.0's behaviour.
//! - 77, 118–121: listings (session-discovery's tests, the corpus's `list` checks).
//! - 83, 84: the upstream fixture `large-session.jsonl` is not in `testdata/`; v1
//!   migration of long files is covered by `testdata/v1` and the generated corpora.
//! - 85–90, 92, 93, 99–101, 114, 116, 117: byte-level behaviours checked file by file by
//!   the conformance corpus (`roundtrip`, `load`, `fork`, `branch`) and session-model's,
//!   session-migrate's and session-discovery's own tests.
//! - 97: `pi_full_disk_on_the_first_write_leaves_no_file` and the exclusive-create tests
//!   of `tests/faults`.
//! - 108: session-tree's compaction tests (`compaction_system_snapshot_and_retain_none`).
//! - 123: the library stops on a revisit (session-tree's cycle tests) where pi 1.6.0
//!   hangs: the choice is written in docs/format.md ("Choice (cycles)").
//! - 2–4, 8, 10, 13, 14, 36–47, 52–60, 62, 64–73: shared with omp, in `both.rs`.
//! - 8.C (the session selector) is UI, not storage; 8.D names later versions of pi.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use session::{CompactionOptions, Dialect, EntryId, Env, Leaf, NewSessionOptions, SessionError, SessionManager};

use super::{
    Result, assistant, branch_ids, chain, compacted, compaction, complex_tree, ctx, entry, exchange, ids, mem, msg,
    restored, texts, user,
};
use session_testkit::TempDir;

const PI: Dialect = Dialect::Pi;

/// A model change to openai/gpt-4, for [`chain`].
fn model_change() -> Value {
    json!({"type": "model_change", "provider": "openai", "modelId": "gpt-4"})
}

#[test]
fn item_01_empty_context() -> Result<()> {
    assert_eq!(ctx(&mem(PI), Leaf::Current)?, json!({"messages": [], "thinkingLevel": "off", "model": null}));
    Ok(())
}

#[test]
fn item_05_assistant_sets_the_model() -> Result<()> {
    let m = chain(PI, vec![user("a"), assistant("b")])?;
    assert_eq!(ctx(&m, Leaf::Current)?["model"], json!({"provider": "anthropic", "modelId": "claude-test"}));
    Ok(())
}

#[test]
fn item_06_later_assistant_wins_over_model_change() -> Result<()> {
    let m = chain(PI, vec![user("a"), model_change(), assistant("b")])?;
    assert_eq!(ctx(&m, Leaf::Current)?["model"], json!({"provider": "anthropic", "modelId": "claude-test"}));
    Ok(())
}

#[test]
fn item_07_compaction_summary_then_kept_entries() -> Result<()> {
    let c = ctx(&compacted(PI, "3")?, Leaf::Current)?;
    assert_eq!(
        texts(&c),
        [
            "compactionSummary: Summary of first two turns",
            "user: second",
            "assistant: response2",
            "user: third",
            "assistant: response3"
        ]
    );
    Ok(())
}

#[test]
fn item_09_latest_of_two_compactions() -> Result<()> {
    let (first, second) = (compaction("First summary", "1", 1), compaction("Second summary", "4", 2));
    let m = chain(PI, vec![user("a"), assistant("b"), first, user("c"), assistant("d"), second, user("e")])?;
    let t = texts(&ctx(&m, Leaf::Current)?);
    assert_eq!(t, ["compactionSummary: Second summary", "user: c", "assistant: d", "user: e"]);
    Ok(())
}

#[test]
fn item_11_branch_summary_on_the_path() -> Result<()> {
    let m = restored(
        PI,
        vec![
            msg("1", None, user("start")),
            msg("2", Some("1"), assistant("r1")),
            msg("3", Some("2"), user("abandoned")),
            entry("branch_summary", "4", Some("2"), json!({"fromId": "3", "summary": "Summary of abandoned work"})),
            msg("5", Some("4"), user("new direction")),
        ],
    )?;
    let t = texts(&ctx(&m, Leaf::Id("5"))?);
    assert_eq!(t.len(), 4);
    assert_eq!(t[2], "branchSummary: Summary of abandoned work");
    assert_eq!(t[3], "user: new direction");
    Ok(())
}

#[test]
fn item_12_complex_tree_each_leaf_its_own_path() -> Result<()> {
    let m = complex_tree(PI)?;
    assert_eq!(
        texts(&ctx(&m, Leaf::Id("7"))?),
        ["compactionSummary: Compacted history", "user: q2", "assistant: r2", "user: q3", "assistant: r3"]
    );
    assert_eq!(
        texts(&ctx(&m, Leaf::Id("11"))?),
        ["user: start", "assistant: r1", "user: q2", "branchSummary: Tried wrong approach", "user: better approach"]
    );
    Ok(())
}

#[test]
fn item_15_new_session_with_a_custom_id() -> Result<()> {
    let mut m = mem(PI);
    m.new_session(NewSessionOptions::with_id("my-custom-id"))?;
    assert_eq!(m.session_id(), "my-custom-id");
    Ok(())
}

#[test]
fn item_16_new_session_id_is_not_empty() -> Result<()> {
    let mut m = mem(PI);
    m.new_session(NewSessionOptions::default())?;
    assert!(!m.session_id().is_empty());
    Ok(())
}

#[test]
fn item_17_parent_session_keeps_a_generated_id() -> Result<()> {
    let mut m = mem(PI);
    m.new_session(NewSessionOptions::default().parent_session("parent.jsonl"))?;
    assert!(!m.session_id().is_empty());
    assert_eq!(m.header().get_str("parentSession"), Some("parent.jsonl"));
    Ok(())
}

#[test]
fn item_18_header_takes_the_custom_id() -> Result<()> {
    let mut m = mem(PI);
    m.new_session(NewSessionOptions::with_id("header-test-id"))?;
    assert_eq!(m.header().get_str("id"), Some("header-test-id"));
    Ok(())
}

/// An empty file `name` in `tmp`, and it opened as a pi session.
fn open_empty(tmp: &TempDir, name: &str) -> Result<(PathBuf, SessionManager)> {
    let file = tmp.path().join(name);
    fs_err::write(&file, "")?;
    let m = SessionManager::open(PI, &file, Env::files())?;
    Ok((file, m))
}

#[test]
fn item_32_open_an_empty_file_writes_one_header() -> Result<()> {
    let tmp = TempDir::new("pi-32");
    let (file, m) = open_empty(&tmp, "empty.jsonl")?;
    assert!(!m.session_id().is_empty());
    assert_eq!(m.header().get_str("type"), Some("session"));
    let text = fs_err::read_to_string(&file)?;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1);
    let header: Value = serde_json::from_str(lines[0])?;
    assert_eq!(header["id"].as_str(), Some(m.session_id()));
    Ok(())
}

#[test]
fn item_34_open_an_empty_explicit_path_keeps_it() -> Result<()> {
    let tmp = TempDir::new("pi-34");
    let (file, m) = open_empty(&tmp, "explicit.jsonl")?;
    assert_eq!(m.session_file(), Some(file.as_path()));
    Ok(())
}

/// Appends with `append` after a user message, then appends an assistant message; checks
/// that each entry is the previous one's child, and returns the session and the entry.
fn chained(
    append: impl FnOnce(&mut SessionManager) -> std::result::Result<EntryId, SessionError>,
) -> Result<(SessionManager, EntryId)> {
    let mut m = mem(PI);
    let a = m.append_message_json(user("1"))?;
    let e = append(&mut m)?;
    let b = m.append_message_json(assistant("2"))?;
    assert_eq!(m.tree().get(&e).and_then(|r| r.parent_id()), Some(a.as_str()));
    assert_eq!(m.tree().get(&b).and_then(|r| r.parent_id()), Some(e.as_str()));
    Ok((m, e))
}

#[test]
fn item_48_thinking_level_change_is_chained() -> Result<()> {
    chained(|m| m.append_thinking_level_change(Some("high"), None))?;
    Ok(())
}

#[test]
fn item_49_model_change_is_stored_and_chained() -> Result<()> {
    let (m, c) = chained(|m| m.pi()?.append_model_change("openai", "gpt-4"))?;
    let e = m.tree().get(&c).ok_or("model change")?;
    assert_eq!((e.get_str("provider"), e.get_str("modelId")), (Some("openai"), Some("gpt-4")));
    Ok(())
}

#[test]
fn item_50_compaction_is_stored_and_chained() -> Result<()> {
    let (mut m, a, b) = exchange(PI)?;
    let c = m.append_compaction("summary", Some(&a), json!(1000), CompactionOptions::default())?;
    let e = m.tree().get(&c).ok_or("compaction")?;
    assert_eq!(e.parent_id(), Some(b.as_str()));
    assert_eq!((e.get_str("summary"), e.get_str("firstKeptEntryId")), (Some("summary"), Some(a.as_str())));
    assert_eq!(e.get("tokensBefore"), Some(&json!(1000)));
    let next = m.append_message_json(user("3"))?;
    assert_eq!(m.tree().get(&next).and_then(|r| r.parent_id()), Some(c.as_str()));
    Ok(())
}

#[test]
fn item_51_custom_entry_is_chained() -> Result<()> {
    chained(|m| m.append_custom_entry("my_data", Some(json!({"key": "value"}))))?;
    Ok(())
}

#[test]
fn item_61_deep_branching() -> Result<()> {
    let (mut m, _, two) = exchange(PI)?;
    let three = m.append_message_json(user("3"))?;
    m.append_message_json(assistant("4"))?;
    m.branch(&two)?;
    let five = m.append_message_json(user("5"))?;
    m.append_message_json(assistant("6"))?;
    m.branch(&five)?;
    m.append_message_json(assistant("7"))?;
    let children = |id: &str| m.tree().children(id).len();
    assert_eq!((children(&two), children(&five), children(&three)), (2, 2, 1));
    Ok(())
}

#[test]
fn item_63_branch_to_an_unknown_id_fails() -> Result<()> {
    let mut m = mem(PI);
    let err = m.branch("nonexistent").err().ok_or("refused")?;
    assert_eq!(err.to_string(), "Entry nonexistent not found");
    Ok(())
}

#[test]
fn item_74_branched_session_of_a_branch_leaf() -> Result<()> {
    let (mut m, a, b) = exchange(PI)?;
    m.append_message_json(user("3"))?;
    m.branch(&b)?;
    let d = m.append_message_json(user("4"))?;
    let e = m.append_message_json(assistant("5"))?;
    m.create_branched_session(&e)?;
    assert_eq!(ids(&m), [a, b, d, e]);
    Ok(())
}

/// The header lines of `file`.
fn headers(file: &Path) -> Result<usize> {
    Ok(fs_err::read_to_string(file)?.lines().filter(|l| l.contains(r#""type":"session""#)).count())
}

#[test]
fn item_76_branched_session_with_an_assistant_is_written_at_once() -> Result<()> {
    let tmp = TempDir::new("pi-76");
    let mut m = SessionManager::create(PI, "/w", tmp.path(), Env::files())?;
    m.append_message_json(user("1"))?;
    let b = m.append_message_json(assistant("2"))?;
    m.append_message_json(user("3"))?;
    let file = m.create_branched_session(&b)?.ok_or("a file")?;
    assert!(file.exists());
    assert_eq!(headers(&file)?, 1);
    Ok(())
}

#[test]
fn item_78_context_without_compaction() -> Result<()> {
    let m = chain(PI, vec![user("1"), assistant("a"), user("2"), assistant("b")])?;
    let c = ctx(&m, Leaf::Current)?;
    assert_eq!((texts(&c).len(), &c["thinkingLevel"]), (4, &json!("off")));
    assert_eq!(c["model"], json!({"provider": "anthropic", "modelId": "claude-test"}));
    Ok(())
}

#[test]
fn item_79_compaction_summary_is_the_first_message() -> Result<()> {
    let c = ctx(&compacted(PI, "3")?, Leaf::Current)?;
    assert_eq!(c["messages"][0]["role"], "compactionSummary");
    assert_eq!(texts(&c).len(), 5);
    Ok(())
}

#[test]
fn item_80_two_compactions_the_latest_keeps_from_u3() -> Result<()> {
    // u1 a1 u2 C1(keeps u2) a2 u3 a3 C2(keeps u3) u4 a4, as ids 1 to 10.
    let (old, new) = (compaction("Old summary", "3", 1), compaction("New summary", "6", 2));
    let (u, a) = (user, assistant);
    let m = chain(PI, vec![u("1"), a("a"), u("2"), old, a("b"), u("3"), a("c"), new, u("4"), a("d")])?;
    let t = texts(&ctx(&m, Leaf::Current)?);
    assert_eq!(t, ["compactionSummary: New summary", "user: 3", "assistant: c", "user: 4", "assistant: d"]);
    Ok(())
}

#[test]
fn item_81_compaction_keeping_the_very_first_entry() -> Result<()> {
    let c = ctx(&compacted(PI, "1")?, Leaf::Current)?;
    // summary, 1, 2, 3, 4 (kept), then 6, 7.
    assert_eq!(texts(&c).len(), 7);
    assert_eq!(texts(&c)[1], "user: first");
    Ok(())
}

#[test]
fn item_82_model_and_thinking_after_a_model_change() -> Result<()> {
    let high = json!({"type": "thinking_level_change", "thinkingLevel": "high"});
    let m = chain(PI, vec![user("a"), model_change(), assistant("b"), high])?;
    let c = ctx(&m, Leaf::Current)?;
    assert_eq!(c["model"], json!({"provider": "anthropic", "modelId": "claude-test"}));
    assert_eq!(c["thinkingLevel"], "high");
    Ok(())
}

#[test]
fn item_91_bad_custom_id_is_refused() -> Result<()> {
    let mut m = mem(PI);
    assert!(m.new_session(NewSessionOptions::with_id("bad id")).is_err());
    m.new_session(NewSessionOptions::with_id("my-custom-id"))?;
    assert_eq!(m.session_id(), "my-custom-id");
    Ok(())
}

#[test]
fn item_94_no_file_before_the_first_user_message() -> Result<()> {
    let tmp = TempDir::new("pi-94");
    let mut m = SessionManager::create(PI, "/w", tmp.path(), Env::files())?;
    m.pi()?.append_model_change("openai", "gpt-4")?;
    m.append_thinking_level_change(Some("high"), None)?;
    m.append_message_json(json!({"role": "system", "content": "s", "timestamp": 1}))?;
    let file = m.session_file().ok_or("a path")?.to_path_buf();
    assert!(!file.exists(), "no conversation yet");
    m.append_message_json(user("hi"))?;
    assert_eq!(fs_err::read_to_string(&file)?.lines().count(), 5, "the header and every earlier entry");
    Ok(())
}

#[test]
fn item_95_open_a_missing_path_creates_it_on_the_first_user_message() -> Result<()> {
    let tmp = TempDir::new("pi-95");
    let file = tmp.path().join("later.jsonl");
    let mut m = SessionManager::open(PI, &file, Env::files())?;
    m.pi()?.append_model_change("openai", "gpt-4")?;
    assert!(!file.exists());
    m.append_message_json(user("hi"))?;
    assert!(file.exists());
    Ok(())
}

#[test]
fn item_96_open_an_empty_file_appends_at_once() -> Result<()> {
    let tmp = TempDir::new("pi-96");
    let (file, mut m) = open_empty(&tmp, "empty.jsonl")?;
    m.pi()?.append_model_change("openai", "gpt-4")?;
    assert_eq!(fs_err::read_to_string(&file)?.lines().count(), 2, "header and the model change");
    Ok(())
}

#[test]
fn item_98_invalid_files_are_refused_and_left_alone() -> Result<()> {
    let tmp = TempDir::new("pi-98");
    let cases = [
        "   \n",
        "\u{feff}{\"type\":\"session\",\"version\":3,\"id\":\"x\",\"timestamp\":\"t\",\"cwd\":\"/w\"}\n",
        "garbage content\n",
        "{\"type\":\"message\",\"id\":\"1\"}\n",
        "{\"type\":\"session\",\"version\":3,\"id\":5,\"timestamp\":\"t\",\"cwd\":\"/w\"}\n",
    ];
    for (i, text) in cases.iter().enumerate() {
        let file = tmp.path().join(format!("bad{i}.jsonl"));
        fs_err::write(&file, text)?;
        let err = SessionManager::open(PI, &file, Env::files()).err().ok_or("refused")?;
        assert!(matches!(err, SessionError::InvalidPiSession { .. }), "{i}: {err:?}");
        assert!(err.to_string().starts_with("Session file is not a valid pi session: "), "{err}");
        assert_eq!(fs_err::read_to_string(&file)?, *text, "{i}: byte-identical");
    }
    Ok(())
}

#[test]
fn item_102_leaf_after_load_is_the_last_line() -> Result<()> {
    let m = chain(PI, vec![user("a"), assistant("b"), json!({"type": "label", "targetId": "1", "label": "x"})])?;
    assert_eq!(m.tree().leaf_id(), Some("3"));
    Ok(())
}

#[test]
fn item_103_session_name_is_sanitised_and_latest_wins() -> Result<()> {
    let mut m = mem(PI);
    m.set_session_name("  My\nname\r\n x ", None)?;
    assert_eq!(m.session_name().as_deref(), Some("My name  x"));
    m.set_session_name("second", None)?;
    assert_eq!(m.session_name().as_deref(), Some("second"));
    m.set_session_name("", None)?;
    assert_eq!(m.session_name(), None, "an empty name clears");
    Ok(())
}

#[test]
fn item_104_empty_label_is_stored_and_clears() -> Result<()> {
    let mut m = mem(PI);
    let a = m.append_message_json(user("1"))?;
    m.append_label_change(&a, Some("x"))?;
    let e = m.append_label_change(&a, Some(""))?;
    assert_eq!(m.tree().get(&e).and_then(|r| r.get_str("label")), Some(""));
    assert_eq!(m.tree().label(&a), None);
    let n = m.append_label_change(&a, None)?;
    assert!(m.tree().get(&n).and_then(|r| r.get("label")).is_none(), "None omits the key");
    Ok(())
}

#[test]
fn item_105_usage_note_only_when_truthy() -> Result<()> {
    let mut m = mem(PI);
    let input_usage = session::model::typed::Usage { input: Some(1.0), ..Default::default() };
    let with = m.pi()?.append_usage("k", "p", "m", &input_usage, Some("n"))?;
    let empty = m.pi()?.append_usage("k", "p", "m", &input_usage, Some(""))?;
    let without = m.pi()?.append_usage("k", "p", "m", &input_usage, None)?;
    let note = |id: &str| m.tree().get(id).and_then(|r| r.get("note")).cloned();
    assert_eq!((note(&with), note(&empty), note(&without)), (Some(json!("n")), None, None));
    // The typed usage is written as pi writes `{input: 1}`.
    let line = m.tree().get(&without).map(|r| r.line().into_owned()).unwrap_or_default();
    assert!(line.contains(r#""usage":{"input":1}"#), "{line}");
    Ok(())
}

#[test]
fn item_106_compaction_without_a_kept_entry_keeps_from_itself() -> Result<()> {
    let mut m = mem(PI);
    m.append_message_json(user("1"))?;
    let c = m.append_compaction("s", None, json!(5), CompactionOptions::default())?;
    assert_eq!(m.tree().get(&c).and_then(|r| r.get_str("firstKeptEntryId")), Some(c.as_str()));
    m.append_message_json(user("after"))?;
    assert_eq!(texts(&ctx(&m, Leaf::Current)?), ["compactionSummary: s", "user: after"]);
    Ok(())
}

#[test]
fn item_107_compaction_without_system_messages_has_no_snapshot() -> Result<()> {
    let mut m = mem(PI);
    m.append_message_json(user("1"))?;
    let c = m.append_compaction("s", None, json!(5), CompactionOptions::default())?;
    assert!(m.tree().get(&c).and_then(|r| r.get("systemMessage")).is_none());
    Ok(())
}

#[test]
fn item_109_context_edit_errors() -> Result<()> {
    let mut m = mem(PI);
    let a = m.append_message_json(user("1"))?;
    for bad in [json!("text"), json!({}), json!({"content": 5})] {
        assert!(matches!(m.pi()?.append_context_edit(&a, bad), Err(SessionError::InvalidContextEdit)));
    }
    let mc = m.pi()?.append_model_change("openai", "gpt-4")?;
    let err = m.pi()?.append_context_edit(&mc, json!({"content": "x"})).err().ok_or("refused")?;
    assert!(err.to_string().contains("does not contribute editable model content"), "{err}");
    Ok(())
}

#[test]
fn item_110_replacement_content_shapes() -> Result<()> {
    let mut m = mem(PI);
    let u = m.append_message_json(user("q"))?;
    let a = m.append_message_json(assistant("r"))?;
    m.pi()?.append_context_edit(&u, json!({"content": "edited q"}))?;
    m.pi()?.append_context_edit(&a, json!({"content": "edited r"}))?;
    let c = ctx(&m, Leaf::Current)?;
    assert_eq!(c["messages"][0]["content"], "edited q");
    assert_eq!(c["messages"][1]["content"], json!([{"type": "text", "text": "edited r"}]));
    assert_eq!(c["messages"][1]["provider"], "anthropic", "only content is replaced");
    Ok(())
}

#[test]
fn item_111_edits_apply_on_their_branch_only() -> Result<()> {
    let mut m = mem(PI);
    let u = m.append_message_json(user("q"))?;
    let a = m.append_message_json(assistant("r"))?;
    m.pi()?.append_context_edit(&a, Value::Null)?;
    assert_eq!(texts(&ctx(&m, Leaf::Current)?), ["user: q"], "null omits the message");
    assert!(m.tree().get(&a).is_some(), "the raw entry stays");
    m.branch(&a)?;
    assert_eq!(texts(&ctx(&m, Leaf::Current)?), ["user: q", "assistant: r"], "off the edit's branch");
    assert_eq!(m.tree().get(&u).map(|r| r.value()["message"]["content"].clone()), Some(json!("q")));
    Ok(())
}

#[test]
fn item_112_branch_summary_from_the_root() -> Result<()> {
    let mut m = mem(PI);
    m.append_message_json(user("1"))?;
    m.reset_leaf();
    let s = m.branch_with_summary(None, "from the root", None, None, None)?;
    let e = m.tree().get(&s).ok_or("summary")?;
    assert_eq!((e.get("parentId"), e.get_str("fromId")), (Some(&Value::Null), Some("root")));
    Ok(())
}

#[test]
fn item_113_empty_branch_summary_adds_no_message() -> Result<()> {
    let m = chain(PI, vec![user("a"), json!({"type": "branch_summary", "fromId": "1", "summary": ""})])?;
    assert_eq!(texts(&ctx(&m, Leaf::Current)?), ["user: a"]);
    Ok(())
}

#[test]
fn item_115_in_memory_restore_uses_the_header_id() -> Result<()> {
    let header = json!({"type": "session", "version": 3, "id": "restored-id", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/elsewhere"});
    let records = vec![session::Record::from_value(header), session::Record::from_value(msg("1", None, user("a")))];
    let m = SessionManager::in_memory_with(PI, "/w", records, NewSessionOptions::with_id("ignored"), Env::memory())?;
    assert_eq!(m.session_id(), "restored-id");
    assert_eq!(m.cwd(), "/w");
    let fresh =
        SessionManager::in_memory_with(PI, "/w", Vec::new(), NewSessionOptions::with_id("given-id"), Env::memory())?;
    assert_eq!((fresh.session_id(), fresh.header().get_str("cwd")), ("given-id", Some("/w")));
    Ok(())
}

#[test]
fn item_122_branch_of_an_unknown_id_is_empty_but_context_falls_back() -> Result<()> {
    let m = chain(PI, vec![user("a")])?;
    assert!(branch_ids(&m, Some("unknown")).is_empty());
    assert_eq!(texts(&ctx(&m, Leaf::Id("unknown"))?), ["user: a"]);
    Ok(())
}
