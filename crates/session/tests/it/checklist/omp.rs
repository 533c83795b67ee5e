//! omp's checklist (`spec/omp.md` §10), one test per item the library covers.
//!
//! Not here:
//! - 17, 18, 40, 54, 59–61: loading by path, recent-session lookup, resume arguments and
//!   listings (session-discovery's tests, the conformance corpus's `load`, `recent`,
//!   `resume` and `list` checks).
//! - 38: `omp_migrates_legacy_buckets` (session-discovery) and `check_parity` on every
//!   backend.
//! - 42, 43: the move-aside rename and orphaned backups (session-store's tests).
//! - 44 (listeners), 46 (quadratic depth, server-tool blocks): UI callbacks and the
//!   provider layer; the attribution part is `item_46_custom_message_attribution`.
//! - 47, 49, 50, 55–57: byte-level loading, truncation and blobs (session-model's,
//!   session-migrate's and `tests/it/persist.rs`'s tests, the corpus).
//! - 48: done otherwise on purpose: non-object records are kept as id-less entries and
//!   never crash migration (docs/format.md, the table of odd records).
//! - 53: a fork of a source with an invalid header is not checked here.
//! - 58: session-tree's cycle tests. 62: the server storages' own tests.

use serde_json::json;
use session::{Dialect, Env, Leaf, SessionManager};

use super::pi::{
    item_44_check, item_45_check, item_46_check, item_52_check, linear_conversation_check, one_user_message_check,
};
use super::{Result, assistant, branch_ids, compacted, complex_tree, ctx, entry, ids, mem, msg, restored, texts, user};
use session_testkit::TempDir;

const OMP: Dialect = Dialect::Omp;

#[test]
fn item_01_v1_migration_gives_ids_and_a_chain() -> Result<()> {
    item_44_check(OMP)
}

#[test]
fn item_02_v2_ids_unchanged() -> Result<()> {
    item_45_check(OMP)
}

#[test]
fn item_03_empty_context() -> Result<()> {
    let c = ctx(&mem(OMP), Leaf::Current)?;
    assert_eq!((&c["messages"], &c["thinkingLevel"], &c["models"]), (&json!([]), &json!("off"), &json!({})));
    Ok(())
}

#[test]
fn item_04_one_user_message() -> Result<()> {
    one_user_message_check(OMP)
}

#[test]
fn item_05_linear_conversation_in_order() -> Result<()> {
    linear_conversation_check(OMP)
}

#[test]
fn item_06_thinking_level_change_adds_no_message() -> Result<()> {
    let m = restored(
        OMP,
        vec![
            msg("1", None, user("a")),
            entry("thinking_level_change", "2", Some("1"), json!({"thinkingLevel": "high"})),
            msg("3", Some("2"), assistant("b")),
        ],
    )?;
    let c = ctx(&m, Leaf::Current)?;
    assert_eq!((&c["thinkingLevel"], texts(&c).len()), (&json!("high"), 2));
    Ok(())
}

#[test]
fn item_07_assistant_sets_the_default_model() -> Result<()> {
    let m = restored(OMP, vec![msg("1", None, user("a")), msg("2", Some("1"), assistant("b"))])?;
    assert_eq!(ctx(&m, Leaf::Current)?["models"]["default"], "anthropic/claude-test");
    Ok(())
}

#[test]
fn item_08_explicit_model_change_wins_over_a_later_assistant() -> Result<()> {
    // 18.3.4's behaviour (#849).
    let m = restored(
        OMP,
        vec![
            msg("1", None, user("a")),
            entry("model_change", "2", Some("1"), json!({"model": "openai/gpt-4"})),
            msg("3", Some("2"), assistant("b")),
        ],
    )?;
    assert_eq!(ctx(&m, Leaf::Current)?["models"]["default"], "openai/gpt-4");
    Ok(())
}

#[test]
fn item_09_compaction_summary_then_kept_entries() -> Result<()> {
    let t = texts(&ctx(&compacted(OMP, "3")?, Leaf::Current)?);
    assert_eq!(t.len(), 5);
    assert!(t[0].contains("Summary of first two turns"), "{t:?}");
    assert_eq!(&t[1..], ["user: second", "assistant: response2", "user: third", "assistant: response3"]);
    Ok(())
}

#[test]
fn item_10_compaction_keeping_from_the_first_message() -> Result<()> {
    let m = restored(
        OMP,
        vec![
            msg("1", None, user("a")),
            msg("2", Some("1"), assistant("b")),
            entry("compaction", "3", Some("2"), json!({"summary": "S", "firstKeptEntryId": "1", "tokensBefore": 10})),
            msg("4", Some("3"), user("c")),
        ],
    )?;
    let t = texts(&ctx(&m, Leaf::Current)?);
    assert_eq!(&t[1..], ["user: a", "assistant: b", "user: c"]);
    Ok(())
}

#[test]
fn item_11_latest_of_two_compactions() -> Result<()> {
    let m = restored(
        OMP,
        vec![
            msg("1", None, user("a")),
            entry(
                "compaction",
                "2",
                Some("1"),
                json!({"summary": "First summary", "firstKeptEntryId": "1", "tokensBefore": 1}),
            ),
            msg("3", Some("2"), user("c")),
            entry(
                "compaction",
                "4",
                Some("3"),
                json!({"summary": "Second summary", "firstKeptEntryId": "3", "tokensBefore": 2}),
            ),
            msg("5", Some("4"), user("e")),
        ],
    )?;
    let t = texts(&ctx(&m, Leaf::Current)?);
    assert!(t[0].contains("Second summary") && !t.iter().any(|s| s.contains("First summary")), "{t:?}");
    assert_eq!(&t[1..], ["user: c", "user: e"]);
    Ok(())
}

#[test]
fn item_12_explicit_leaf_selects_the_branch() -> Result<()> {
    let m = restored(
        OMP,
        vec![
            msg("1", None, user("start")),
            msg("2", Some("1"), assistant("r1")),
            msg("3", Some("2"), user("branch A")),
            msg("4", Some("2"), user("branch B")),
        ],
    )?;
    assert_eq!(texts(&ctx(&m, Leaf::Id("3"))?).last().map(String::as_str), Some("user: branch A"));
    assert_eq!(texts(&ctx(&m, Leaf::Id("4"))?).last().map(String::as_str), Some("user: branch B"));
    Ok(())
}

#[test]
fn item_13_branch_summary_on_the_path() -> Result<()> {
    let m = restored(
        OMP,
        vec![
            msg("1", None, user("start")),
            entry("branch_summary", "2", Some("1"), json!({"fromId": "1", "summary": "Summary of abandoned work"})),
            msg("3", Some("2"), user("new direction")),
        ],
    )?;
    let t = texts(&ctx(&m, Leaf::Current)?);
    assert_eq!(t.len(), 3);
    assert!(t[1].contains("Summary of abandoned work"), "{t:?}");
    Ok(())
}

#[test]
fn item_14_complex_tree_each_leaf_its_own_path() -> Result<()> {
    let m = complex_tree(OMP)?;
    let (a, b) = (texts(&ctx(&m, Leaf::Id("7"))?), texts(&ctx(&m, Leaf::Id("11"))?));
    assert_eq!((a.len(), b.len()), (5, 5));
    assert!(a[0].contains("Compacted history") && a[4] == "assistant: r3", "{a:?}");
    assert!(b[3].contains("Tried wrong approach") && b[4] == "user: better approach", "{b:?}");
    Ok(())
}

#[test]
fn item_15_unknown_leaf_falls_back_to_the_last_entry() -> Result<()> {
    let m = restored(OMP, vec![msg("1", None, user("a")), msg("2", Some("1"), assistant("b"))])?;
    assert_eq!(texts(&ctx(&m, Leaf::Id("nonexistent"))?).len(), 2);
    Ok(())
}

#[test]
fn item_16_orphan_path_is_the_orphan() -> Result<()> {
    let m = restored(OMP, vec![msg("1", None, user("a")), msg("2", Some("missing"), assistant("b"))])?;
    assert_eq!(texts(&ctx(&m, Leaf::Id("2"))?), ["assistant: b"]);
    Ok(())
}

#[test]
fn item_19_label_set_and_read() -> Result<()> {
    let mut m = mem(OMP);
    let id = m.append_message_json(user("a"))?;
    assert_eq!(m.tree().label(&id), None);
    let l = m.append_label_change(&id, Some("checkpoint"))?;
    assert_eq!(m.tree().label(&id), Some("checkpoint"));
    let e = m.tree().get(&l).ok_or("label entry")?;
    assert_eq!((e.get_str("targetId"), e.get_str("label")), (Some(id.as_str()), Some("checkpoint")));
    Ok(())
}

#[test]
fn item_20_label_cleared_with_none() -> Result<()> {
    let mut m = mem(OMP);
    let id = m.append_message_json(user("a"))?;
    m.append_label_change(&id, Some("x"))?;
    m.append_label_change(&id, None)?;
    assert_eq!(m.tree().label(&id), None);
    Ok(())
}

#[test]
fn item_21_last_label_wins() -> Result<()> {
    let mut m = mem(OMP);
    let id = m.append_message_json(user("a"))?;
    m.append_label_change(&id, Some("one"))?;
    m.append_label_change(&id, Some("two"))?;
    assert_eq!(m.tree().label(&id), Some("two"));
    Ok(())
}

#[test]
fn item_22_tree_nodes_carry_labels() -> Result<()> {
    let mut m = mem(OMP);
    let a = m.append_message_json(user("a"))?;
    let b = m.append_message_json(assistant("b"))?;
    m.append_label_change(&a, Some("start"))?;
    let roots = m.tree().tree();
    assert_eq!(roots[0].label.as_deref(), Some("start"));
    assert_eq!(roots[0].children[0].entry.id(), Some(b.as_str()));
    Ok(())
}

/// Three messages, each labelled.
fn labelled() -> Result<(SessionManager, [String; 3])> {
    let mut m = mem(OMP);
    let a = m.append_message_json(user("1"))?;
    let b = m.append_message_json(assistant("2"))?;
    let c = m.append_message_json(user("3"))?;
    for (id, l) in [(&a, "l1"), (&b, "l2"), (&c, "l3")] {
        m.append_label_change(id, Some(l))?;
    }
    Ok((m, [a.into(), b.into(), c.into()]))
}

#[test]
fn item_23_branched_session_keeps_path_labels() -> Result<()> {
    let (mut m, [a, b, _]) = labelled()?;
    m.create_branched_session(&b)?;
    assert_eq!((m.tree().label(&a), m.tree().label(&b)), (Some("l1"), Some("l2")));
    assert_eq!(m.tree().entries().iter().filter(|r| r.type_str() == Some("label")).count(), 2);
    Ok(())
}

#[test]
fn item_24_labels_off_the_branch_are_not_carried() -> Result<()> {
    let (mut m, [_, b, c]) = labelled()?;
    m.create_branched_session(&b)?;
    assert_eq!(m.tree().label(&c), None);
    Ok(())
}

#[test]
fn item_25_labels_add_no_context_message() -> Result<()> {
    let mut m = mem(OMP);
    let id = m.append_message_json(user("a"))?;
    m.append_label_change(&id, Some("x"))?;
    assert_eq!(texts(&ctx(&m, Leaf::Current)?), ["user: a"]);
    Ok(())
}

#[test]
fn item_26_labelling_an_unknown_entry_fails() -> Result<()> {
    let err = mem(OMP).append_label_change("non-existent", Some("l")).err().ok_or("refused")?;
    assert_eq!(err.to_string(), "Entry non-existent not found");
    Ok(())
}

#[test]
fn item_27_custom_entry_joins_the_chain_not_the_context() -> Result<()> {
    item_46_check(OMP)
}

#[test]
fn item_28_appends_chain_parent_ids() -> Result<()> {
    let mut m = mem(OMP);
    let a = m.append_message_json(user("1"))?;
    let b = m.append_message_json(assistant("2"))?;
    let es = m.tree().entries();
    assert_eq!((es[0].parent_id(), es[1].parent_id()), (None, Some(a.as_str())));
    assert_eq!(ids(&m), [a, b]);
    Ok(())
}

#[test]
fn item_29_other_entry_types_join_the_chain_verbatim() -> Result<()> {
    let mut m = mem(OMP);
    let a = m.append_message_json(user("1"))?;
    let t = m.append_thinking_level_change(Some("high"), None)?;
    let mc = m.omp()?.append_model_change("openai/gpt-4", None, false)?;
    let c = m.append_compaction("sum", Some(&a), json!(10), session::CompactionOptions::default())?;
    let x = m.append_custom_entry("k", Some(json!({"v": 1})))?;
    let chain = [&a, &t, &mc, &c, &x];
    for w in chain.windows(2) {
        assert_eq!(m.tree().get(w[1]).and_then(|r| r.parent_id()), Some(w[0].as_str()));
    }
    assert_eq!(m.tree().get(&t).and_then(|r| r.get_str("thinkingLevel")), Some("high"));
    assert_eq!(m.tree().get(&mc).and_then(|r| r.get_str("model")), Some("openai/gpt-4"));
    assert_eq!(m.tree().get(&c).and_then(|r| r.get_str("summary")), Some("sum"));
    assert_eq!(m.tree().get(&x).and_then(|r| r.get("data")), Some(&json!({"v": 1})));
    Ok(())
}

#[test]
fn item_30_leaf_follows_each_append() -> Result<()> {
    item_52_check(OMP)
}

#[test]
fn item_31_branch_paths() -> Result<()> {
    let mut m = mem(OMP);
    assert!(branch_ids(&m, None).is_empty());
    let a = m.append_message_json(user("1"))?;
    assert_eq!(branch_ids(&m, None), vec![a.clone()]);
    let b = m.append_message_json(assistant("2"))?;
    let c = m.append_message_json(user("3"))?;
    assert_eq!(branch_ids(&m, None), [a.clone(), b.clone(), c]);
    assert_eq!(branch_ids(&m, Some(&b)), [a, b.clone()]);
    Ok(())
}

#[test]
fn item_32_tree_shapes() -> Result<()> {
    let mut m = mem(OMP);
    assert!(m.tree().tree().is_empty());
    m.append_message_json(user("1"))?;
    let two = m.append_message_json(assistant("2"))?;
    m.append_message_json(user("3"))?;
    assert_eq!(m.tree().tree().len(), 1);
    for i in 0..2 {
        m.branch(&two)?;
        m.append_message_json(user(&format!("b{i}")))?;
    }
    assert_eq!(m.tree().tree()[0].children[0].children.len(), 3, "three siblings");
    Ok(())
}

#[test]
fn item_33_branch_moves_the_leaf_and_parents_the_next_append() -> Result<()> {
    let mut m = mem(OMP);
    let a = m.append_message_json(user("1"))?;
    m.append_message_json(assistant("2"))?;
    m.branch(&a)?;
    assert_eq!(m.tree().leaf_id(), Some(a.as_str()));
    let c = m.append_message_json(user("3"))?;
    assert_eq!(m.tree().get(&c).and_then(|r| r.parent_id()), Some(a.as_str()));
    let err = m.branch("nonexistent").err().ok_or("refused")?;
    assert_eq!(err.to_string(), "Entry nonexistent not found");
    Ok(())
}

#[test]
fn item_34_branch_with_summary() -> Result<()> {
    let mut m = mem(OMP);
    let a = m.append_message_json(user("1"))?;
    let s = m.branch_with_summary(Some(&a), "text", None, None, None)?;
    assert_eq!(m.tree().leaf_id(), Some(s.as_str()));
    let e = m.tree().get(&s).ok_or("summary")?;
    assert_eq!((e.parent_id(), e.get_str("summary")), (Some(a.as_str()), Some("text")));
    assert!(m.branch_with_summary(Some("nonexistent"), "x", None, None, None).is_err());
    Ok(())
}

#[test]
fn item_35_leaf_entry_and_entries_by_id() -> Result<()> {
    let mut m = mem(OMP);
    assert!(m.tree().leaf_id().is_none());
    let a = m.append_message_json(user("first"))?;
    assert_eq!(m.tree().leaf_id().and_then(|id| m.tree().get(id)).and_then(|r| r.id()), Some(a.as_str()));
    assert_eq!(m.tree().get(&a).map(|r| r.value()["message"]["content"].clone()), Some(json!("first")));
    assert!(m.tree().get("unknown").is_none());
    Ok(())
}

#[test]
fn item_36_context_after_branching_is_the_active_branch() -> Result<()> {
    let mut m = mem(OMP);
    m.append_message_json(user("1"))?;
    let b = m.append_message_json(assistant("2"))?;
    m.append_message_json(user("3"))?;
    m.branch(&b)?;
    m.append_message_json(assistant("4"))?;
    assert_eq!(texts(&ctx(&m, Leaf::Current)?), ["user: 1", "assistant: 2", "assistant: 4"]);
    Ok(())
}

#[test]
fn item_37_branched_session_in_memory() -> Result<()> {
    let mut m = mem(OMP);
    let a = m.append_message_json(user("1"))?;
    let b = m.append_message_json(assistant("2"))?;
    m.append_message_json(user("3"))?;
    assert_eq!(
        m.create_branched_session("nonexistent").err().map(|e| e.to_string()).as_deref(),
        Some("Entry nonexistent not found")
    );
    assert_eq!(m.create_branched_session(&b)?, None);
    assert_eq!(ids(&m), [a, b]);
    Ok(())
}

#[test]
fn item_39_legacy_open_migrates_in_memory_until_a_write() -> Result<()> {
    let tmp = TempDir::new("omp-39");
    let file = tmp.path().join("v1.jsonl");
    let v1 = concat!(
        r#"{"type":"session","id":"old","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#,
        "\n",
        r#"{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"a","timestamp":1}}"#,
        "\n"
    );
    fs_err::write(&file, v1)?;
    let mut m = SessionManager::open(OMP, &file, Env::files())?;
    m.flush()?;
    assert_eq!(fs_err::read_to_string(&file)?, v1, "open and flush leave the file alone");
    m.append_message_json(user("b"))?;
    m.flush()?;
    let again = SessionManager::open_read_only(OMP, &file, Env::files())?;
    assert_eq!(again.header().get("version"), Some(&json!(3)), "the append rewrote the whole file");
    assert!(again.tree().entries().iter().all(|r| r.id().is_some()));
    fs_err::write(&file, v1)?;
    let mut m = SessionManager::open(OMP, &file, Env::files())?;
    m.rewrite_entries()?;
    assert_ne!(fs_err::read_to_string(&file)?, v1, "rewrite_entries writes at once");
    Ok(())
}

#[test]
fn item_41_fork_takes_a_new_uuidv7_and_points_at_its_parent() -> Result<()> {
    let tmp = TempDir::new("omp-41");
    let mut m = SessionManager::create(OMP, "/w", tmp.path(), Env::files())?;
    m.append_message_json(user("1"))?;
    m.append_message_json(assistant("2"))?;
    let old = m.session_id().to_owned();
    let file = m.session_file().ok_or("file")?.to_path_buf();
    fs_err::create_dir_all(file.with_extension(""))?;
    fs_err::write(file.with_extension("").join("0.read.log"), "log")?;
    let new = m.omp()?.fork()?.ok_or("a fork file")?;
    let v7 = |id: &str| id.len() == 36 && id.as_bytes()[14] == b'7';
    assert!(v7(m.session_id()) && m.session_id() != old, "{}", m.session_id());
    assert_eq!(m.header().get_str("parentSession"), Some(old.as_str()));
    assert_eq!(fs_err::read_to_string(new.with_extension("").join("0.read.log"))?, "log");
    assert!(v7(mem(OMP).session_id()));
    Ok(())
}

#[test]
fn item_44_title_source_survives_reopen() -> Result<()> {
    let tmp = TempDir::new("omp-44");
    let mut m = SessionManager::create(OMP, "/w", tmp.path(), Env::files())?;
    m.append_message_json(user("1"))?;
    m.append_message_json(assistant("2"))?;
    assert!(m.set_session_name("Chosen", Some("user"))?.is_some());
    assert!(m.set_session_name("   ", Some("user"))?.is_none(), "blank names are refused");
    assert!(m.set_session_name("Auto", Some("auto"))?.is_none(), "auto never replaces a user title");
    let file = m.session_file().ok_or("file")?.to_path_buf();
    drop(m);
    let again = SessionManager::open_read_only(OMP, &file, Env::files())?;
    assert_eq!(again.session_name().as_deref(), Some("Chosen"));
    Ok(())
}

#[test]
fn item_45_create_empty_session_file() -> Result<()> {
    let tmp = TempDir::new("omp-45");
    let env = Env::files();
    let a = SessionManager::create_empty_session_file("/w/sub", Some(tmp.path()), &env)?;
    let b = SessionManager::create_empty_session_file("/w/sub", Some(tmp.path()), &env)?;
    assert_ne!(a, b, "distinct paths per call");
    let text = fs_err::read_to_string(&a)?;
    assert_eq!(text.lines().filter(|l| l.contains(r#""type":"session""#)).count(), 1);
    let mut m = SessionManager::create(OMP, "/w", tmp.path(), env)?;
    m.set_session_file(&a)?;
    assert!(m.tree().entries().is_empty());
    assert_eq!(m.cwd(), "/w/sub");
    Ok(())
}

#[test]
fn item_46_custom_message_attribution() -> Result<()> {
    // Entries as stored: one with `attribution`, one (older) without the key.
    let m = restored(
        OMP,
        vec![
            entry(
                "custom_message",
                "1",
                None,
                json!({"customType": "k", "content": "with", "display": true, "attribution": "user"}),
            ),
            entry("custom_message", "2", Some("1"), json!({"customType": "k", "content": "without", "display": true})),
        ],
    )?;
    let c = ctx(&m, Leaf::Current)?;
    assert_eq!(c["messages"][0]["attribution"], "user");
    assert!(c["messages"][1].get("attribution").is_none(), "{}", c["messages"][1]);
    Ok(())
}

#[test]
fn item_51_branch_without_an_append_is_lost_on_reload() -> Result<()> {
    let tmp = TempDir::new("omp-51");
    let mut m = SessionManager::create(OMP, "/w", tmp.path(), Env::files())?;
    let a = m.append_message_json(user("1"))?;
    let b = m.append_message_json(assistant("2"))?;
    m.branch(&a)?;
    let file = m.session_file().ok_or("file")?.to_path_buf();
    drop(m);
    let again = SessionManager::open_read_only(OMP, &file, Env::files())?;
    assert_eq!(again.tree().leaf_id(), Some(b.as_str()), "the leaf is the last entry");
    Ok(())
}

#[test]
fn item_52_branched_session_leaf_is_the_last_label() -> Result<()> {
    let (mut m, [_, b, _]) = labelled()?;
    m.create_branched_session(&b)?;
    let last = m.tree().entries().last().ok_or("entries")?;
    assert_eq!(last.type_str(), Some("label"));
    assert_eq!(m.tree().leaf_id(), last.id());
    Ok(())
}
