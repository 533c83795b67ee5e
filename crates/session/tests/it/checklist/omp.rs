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
//! - 1, 2, 4–6, 10, 12, 15, 16, 19–28, 30–37: shared with pi, in `both.rs`.

use serde_json::json;
use session::{Dialect, Env, Leaf, SessionManager};

use super::{
    Result, V1, assistant, chain, compacted, compaction, complex_tree, ctx, entry, labelled, mem, restored, texts, user,
};
use session_testkit::TempDir;

const OMP: Dialect = Dialect::Omp;

#[test]
fn item_03_empty_context() -> Result<()> {
    let c = ctx(&mem(OMP), Leaf::Current)?;
    assert_eq!((&c["messages"], &c["thinkingLevel"], &c["models"]), (&json!([]), &json!("off"), &json!({})));
    Ok(())
}

#[test]
fn item_07_assistant_sets_the_default_model() -> Result<()> {
    let m = chain(OMP, vec![user("a"), assistant("b")])?;
    assert_eq!(ctx(&m, Leaf::Current)?["models"]["default"], "anthropic/claude-test");
    Ok(())
}

#[test]
fn item_08_explicit_model_change_wins_over_a_later_assistant() -> Result<()> {
    // 18.3.4's behaviour (#849).
    let m = chain(OMP, vec![user("a"), json!({"type": "model_change", "model": "openai/gpt-4"}), assistant("b")])?;
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
fn item_11_latest_of_two_compactions() -> Result<()> {
    let first = compaction("First summary", "1", 1);
    let m = chain(OMP, vec![user("a"), first, user("c"), compaction("Second summary", "3", 2), user("e")])?;
    let t = texts(&ctx(&m, Leaf::Current)?);
    assert!(t[0].contains("Second summary") && !t.iter().any(|s| s.contains("First summary")), "{t:?}");
    assert_eq!(&t[1..], ["user: c", "user: e"]);
    Ok(())
}

#[test]
fn item_13_branch_summary_on_the_path() -> Result<()> {
    let summary = json!({"type": "branch_summary", "fromId": "1", "summary": "Summary of abandoned work"});
    let m = chain(OMP, vec![user("start"), summary, user("new direction")])?;
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
fn item_39_legacy_open_migrates_in_memory_until_a_write() -> Result<()> {
    let tmp = TempDir::new("omp-39");
    let file = tmp.path().join("v1.jsonl");
    fs_err::write(&file, V1)?;
    let mut m = SessionManager::open(OMP, &file, Env::files())?;
    m.flush()?;
    assert_eq!(fs_err::read_to_string(&file)?, V1, "open and flush leave the file alone");
    m.append_message_json(user("b"))?;
    m.flush()?;
    let again = SessionManager::open_read_only(OMP, &file, Env::files())?;
    assert_eq!(again.header().get("version"), Some(&json!(3)), "the append rewrote the whole file");
    assert!(again.tree().entries().iter().all(|r| r.id().is_some()));
    fs_err::write(&file, V1)?;
    let mut m = SessionManager::open(OMP, &file, Env::files())?;
    m.rewrite_entries()?;
    assert_ne!(fs_err::read_to_string(&file)?, V1, "rewrite_entries writes at once");
    Ok(())
}

/// A new session file in `tmp` holding a user message and an assistant reply, and their ids.
fn two_messages_on_disk(tmp: &TempDir) -> Result<(SessionManager, [String; 2])> {
    let mut m = SessionManager::create(OMP, "/w", tmp.path(), Env::files())?;
    let a = m.append_message_json(user("1"))?;
    let b = m.append_message_json(assistant("2"))?;
    Ok((m, [a.into(), b.into()]))
}

/// The session in `file`, opened again read-only.
fn reopen(file: &std::path::Path) -> Result<session::Session> {
    Ok(SessionManager::open_read_only(OMP, file, Env::files())?)
}

#[test]
fn item_41_fork_takes_a_new_uuidv7_and_points_at_its_parent() -> Result<()> {
    let tmp = TempDir::new("omp-41");
    let (mut m, _) = two_messages_on_disk(&tmp)?;
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
    let (mut m, _) = two_messages_on_disk(&tmp)?;
    assert!(m.set_session_name("Chosen", Some("user"))?.is_some());
    assert!(m.set_session_name("   ", Some("user"))?.is_none(), "blank names are refused");
    assert!(m.set_session_name("Auto", Some("auto"))?.is_none(), "auto never replaces a user title");
    let file = m.session_file().ok_or("file")?.to_path_buf();
    drop(m);
    let again = reopen(&file)?;
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
    let (mut m, [a, b]) = two_messages_on_disk(&tmp)?;
    m.branch(&a)?;
    let file = m.session_file().ok_or("file")?.to_path_buf();
    drop(m);
    let again = reopen(&file)?;
    assert_eq!(again.tree().leaf_id(), Some(b.as_str()), "the leaf is the last entry");
    Ok(())
}

#[test]
fn item_52_branched_session_leaf_is_the_last_label() -> Result<()> {
    let (mut m, [_, b, _]) = labelled(OMP)?;
    m.create_branched_session(&b)?;
    let last = m.tree().entries().last().ok_or("entries")?;
    assert_eq!(last.type_str(), Some("label"));
    assert_eq!(m.tree().leaf_id(), last.id());
    Ok(())
}
