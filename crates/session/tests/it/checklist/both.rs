//! The items pi's and omp's checklists share, one test per group of items that runs the
//! same body for both dialects, named after the items' numbers (`pi_36_omp_19_…`). Where
//! one original asserted more than the other, the body makes every assertion of both.

use serde_json::{Value, json};
use session::{Dialect, Env, Leaf, SessionManager};

use super::{
    Result, V1, assistant, branch_ids, chain, compaction, ctx, exchange, ids, labelled, mem, msg, restored, siblings,
    texts, user,
};
use session_testkit::TempDir;

/// Runs `check` for pi, then for omp. The dialect is printed first, so a failing
/// assertion's captured output names it.
fn each_dialect(check: impl Fn(Dialect) -> Result<()>) -> Result<()> {
    for d in [Dialect::Pi, Dialect::Omp] {
        eprintln!("dialect: {d:?}");
        check(d).map_err(|e| format!("{d:?}: {e}"))?;
    }
    Ok(())
}

#[test]
fn pi_02_omp_04_one_user_message() -> Result<()> {
    each_dialect(|d| {
        let m = chain(d, vec![user("hi")])?;
        assert_eq!(texts(&ctx(&m, Leaf::Current)?), ["user: hi"]);
        Ok(())
    })
}

#[test]
fn pi_03_omp_05_linear_conversation_in_order() -> Result<()> {
    each_dialect(|d| {
        let m = chain(d, vec![user("a"), assistant("b"), user("c"), assistant("d")])?;
        assert_eq!(texts(&ctx(&m, Leaf::Current)?), ["user: a", "assistant: b", "user: c", "assistant: d"]);
        Ok(())
    })
}

#[test]
fn pi_04_omp_06_thinking_level_change_adds_no_message() -> Result<()> {
    each_dialect(|d| {
        let m = chain(
            d,
            vec![user("a"), json!({"type": "thinking_level_change", "thinkingLevel": "high"}), assistant("b")],
        )?;
        let c = ctx(&m, Leaf::Current)?;
        assert_eq!((&c["thinkingLevel"], texts(&c).len()), (&json!("high"), 2));
        Ok(())
    })
}

#[test]
fn pi_08_omp_10_compaction_keeping_from_the_first_entry() -> Result<()> {
    each_dialect(|d| {
        let m = chain(d, vec![user("a"), assistant("b"), compaction("Empty summary", "1", 10), user("c")])?;
        let t = texts(&ctx(&m, Leaf::Current)?);
        assert!(t[0].contains("Empty summary"), "{t:?}");
        assert_eq!(&t[1..], ["user: a", "assistant: b", "user: c"]);
        if d == Dialect::Pi {
            assert_eq!(t[0], "compactionSummary: Empty summary");
        }
        Ok(())
    })
}

#[test]
fn pi_10_omp_12_explicit_leaf_selects_the_branch() -> Result<()> {
    each_dialect(|d| {
        let m = siblings(d)?;
        let a = texts(&ctx(&m, Leaf::Id("3"))?);
        let b = texts(&ctx(&m, Leaf::Id("4"))?);
        assert_eq!((a.len(), a.last().map(String::as_str)), (3, Some("user: branch A")));
        assert_eq!((b.len(), b.last().map(String::as_str)), (3, Some("user: branch B")));
        Ok(())
    })
}

#[test]
fn pi_13_omp_15_unknown_leaf_falls_back_to_the_last_entry() -> Result<()> {
    each_dialect(|d| {
        let m = chain(d, vec![user("a"), assistant("b")])?;
        assert_eq!(texts(&ctx(&m, Leaf::Id("nonexistent"))?).len(), 2);
        Ok(())
    })
}

#[test]
fn pi_14_omp_16_orphan_path_is_the_orphan() -> Result<()> {
    each_dialect(|d| {
        let m = restored(d, vec![msg("1", None, user("a")), msg("2", Some("missing"), assistant("b"))])?;
        assert_eq!(texts(&ctx(&m, Leaf::Id("2"))?), ["assistant: b"]);
        Ok(())
    })
}

#[test]
fn pi_36_omp_19_label_set_and_read() -> Result<()> {
    each_dialect(|d| {
        let mut m = mem(d);
        let id = m.append_message_json(user("a"))?;
        assert_eq!(m.tree().label(&id), None);
        let label_id = m.append_label_change(&id, Some("checkpoint"))?;
        assert_eq!(m.tree().label(&id), Some("checkpoint"));
        let e = m.tree().get(&label_id).ok_or("the label entry")?;
        assert_eq!((e.get_str("targetId"), e.get_str("label")), (Some(id.as_str()), Some("checkpoint")));
        Ok(())
    })
}

#[test]
fn pi_37_omp_20_label_cleared_with_none() -> Result<()> {
    each_dialect(|d| {
        let mut m = mem(d);
        let id = m.append_message_json(user("a"))?;
        m.append_label_change(&id, Some("x"))?;
        m.append_label_change(&id, None)?;
        assert_eq!(m.tree().label(&id), None);
        Ok(())
    })
}

#[test]
fn pi_38_omp_21_last_label_wins() -> Result<()> {
    each_dialect(|d| {
        let mut m = mem(d);
        let id = m.append_message_json(user("a"))?;
        for l in ["first", "second", "third"] {
            m.append_label_change(&id, Some(l))?;
            assert_eq!(m.tree().label(&id), Some(l));
        }
        Ok(())
    })
}

#[test]
fn pi_39_omp_22_tree_nodes_carry_labels() -> Result<()> {
    each_dialect(|d| {
        let mut m = mem(d);
        let a = m.append_message_json(user("a"))?;
        let b = m.append_message_json(assistant("b"))?;
        m.append_label_change(&a, Some("start"))?;
        m.append_label_change(&b, Some("response"))?;
        let roots = m.tree().tree();
        assert_eq!(roots.len(), 1);
        assert_eq!((roots[0].entry.id(), roots[0].label.as_deref()), (Some(a.as_str()), Some("start")));
        let child = &roots[0].children[0];
        assert_eq!((child.entry.id(), child.label.as_deref()), (Some(b.as_str()), Some("response")));
        Ok(())
    })
}

#[test]
fn pi_40_41_omp_23_24_branched_session_keeps_path_labels_only() -> Result<()> {
    each_dialect(|d| {
        let (mut m, [a, b, c]) = labelled(d)?;
        assert_eq!(m.create_branched_session(&b)?, None, "in memory");
        assert_eq!((m.tree().label(&a), m.tree().label(&b)), (Some("l1"), Some("l2")));
        let labels = m.tree().entries().iter().filter(|r| r.type_str() == Some("label")).count();
        assert_eq!(labels, 2);
        assert_eq!(m.tree().label(&c), None);
        Ok(())
    })
}

#[test]
fn pi_42_omp_25_labels_add_no_context_message() -> Result<()> {
    each_dialect(|d| {
        let mut m = mem(d);
        let id = m.append_message_json(user("a"))?;
        m.append_label_change(&id, Some("x"))?;
        assert_eq!(texts(&ctx(&m, Leaf::Current)?), ["user: a"]);
        Ok(())
    })
}

#[test]
fn pi_43_omp_26_labelling_an_unknown_entry_fails() -> Result<()> {
    each_dialect(|d| {
        let err = mem(d).append_label_change("non-existent", Some("label")).err().ok_or("refused")?;
        assert_eq!(err.to_string(), "Entry non-existent not found");
        Ok(())
    })
}

#[test]
fn pi_44_omp_01_v1_migration_gives_ids_and_a_chain() -> Result<()> {
    each_dialect(|d| {
        let tmp = TempDir::new("v1-migrate");
        let file = tmp.path().join("v1.jsonl");
        fs_err::write(&file, V1)?;
        let m = SessionManager::open_read_only(d, &file, Env::files())?;
        assert_eq!(m.header().get("version"), Some(&json!(3)));
        let es = m.tree().entries();
        assert_eq!(es.len(), 2);
        assert!(es.iter().all(|r| r.id().is_some_and(|id| id.len() == 8)));
        assert_eq!(es[0].get("parentId"), Some(&Value::Null));
        assert_eq!(es[1].parent_id(), es[0].id());
        assert_eq!(fs_err::read_to_string(&file)?, V1, "read-only: the file is left alone");
        Ok(())
    })
}

#[test]
fn pi_45_omp_02_v2_ids_unchanged() -> Result<()> {
    each_dialect(|d| {
        let tmp = TempDir::new("v2-keep");
        let file = tmp.path().join("v2.jsonl");
        let text = concat!(
            r#"{"type":"session","version":2,"id":"v2","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#,
            "\n",
            r#"{"type":"message","id":"abc12345","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"a","timestamp":1}}"#,
            "\n",
            r#"{"type":"message","id":"def67890","parentId":"abc12345","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"user","content":"b","timestamp":2}}"#,
            "\n"
        );
        fs_err::write(&file, text)?;
        let m = SessionManager::open_read_only(d, &file, Env::files())?;
        assert_eq!(ids(m.as_manager()), ["abc12345", "def67890"]);
        assert_eq!(m.tree().entries()[1].parent_id(), Some("abc12345"));
        Ok(())
    })
}

#[test]
fn pi_46_omp_27_custom_entry_joins_the_chain_not_the_context() -> Result<()> {
    each_dialect(|d| {
        let mut m = mem(d);
        let u = m.append_message_json(user("a"))?;
        let c = m.append_custom_entry("my_data", Some(json!({"foo": "bar"})))?;
        let a = m.append_message_json(assistant("b"))?;
        assert_eq!(m.tree().entries().len(), 3);
        let e = m.tree().get(&c).ok_or("custom entry")?;
        assert_eq!((e.get_str("customType"), e.get("data")), (Some("my_data"), Some(&json!({"foo": "bar"}))));
        assert_eq!(e.parent_id(), Some(u.as_str()));
        assert_eq!(branch_ids(&m, None), [u, c, a]);
        assert_eq!(texts(&ctx(&m, Leaf::Current)?).len(), 2);
        Ok(())
    })
}

#[test]
fn pi_47_omp_28_appends_chain_parent_ids() -> Result<()> {
    each_dialect(|d| {
        let (mut m, a, b) = exchange(d)?;
        let c = m.append_message_json(user("3"))?;
        assert_eq!(ids(&m), [a.clone(), b.clone(), c]);
        let es = m.tree().entries();
        assert!(es.iter().all(|r| r.type_str() == Some("message")));
        let parents = (es[0].parent_id(), es[1].parent_id(), es[2].parent_id());
        assert_eq!(parents, (None, Some(a.as_str()), Some(b.as_str())));
        Ok(())
    })
}

#[test]
fn pi_52_omp_30_leaf_follows_each_append() -> Result<()> {
    each_dialect(|d| {
        let mut m = mem(d);
        assert_eq!(m.tree().leaf_id(), None);
        let a = m.append_message_json(user("1"))?;
        assert_eq!(m.tree().leaf_id(), Some(a.as_str()));
        let t = m.append_thinking_level_change(Some("high"), None)?;
        assert_eq!(m.tree().leaf_id(), Some(t.as_str()));
        Ok(())
    })
}

#[test]
fn pi_53_to_56_omp_31_branch_paths() -> Result<()> {
    each_dialect(|d| {
        let mut m = mem(d);
        assert!(branch_ids(&m, None).is_empty());
        let a = m.append_message_json(user("1"))?;
        assert_eq!(branch_ids(&m, None), std::slice::from_ref(&a));
        let b = m.append_message_json(assistant("2"))?;
        let t = m.append_thinking_level_change(Some("low"), None)?;
        let c = m.append_message_json(user("3"))?;
        assert_eq!(branch_ids(&m, None), [a.clone(), b.clone(), t, c]);
        m.append_message_json(assistant("4"))?;
        assert_eq!(branch_ids(&m, Some(&b)), [a, b.clone()]);
        Ok(())
    })
}

#[test]
fn pi_57_to_60_omp_32_tree_shapes() -> Result<()> {
    each_dialect(|d| {
        let mut m = mem(d);
        assert!(m.tree().tree().is_empty());
        m.append_message_json(user("1"))?;
        let two = m.append_message_json(assistant("2"))?;
        m.append_message_json(user("3"))?;
        let roots = m.tree().tree();
        assert_eq!(roots.len(), 1);
        assert!(roots[0].children[0].children[0].children.is_empty(), "one chain");
        for siblings in 2..=3 {
            m.branch(&two)?;
            m.append_message_json(user(&format!("b{siblings}")))?;
            let roots = m.tree().tree();
            assert_eq!(roots.len(), 1);
            assert_eq!(roots[0].children[0].entry.id(), Some(two.as_str()));
            assert_eq!(roots[0].children[0].children.len(), siblings);
        }
        Ok(())
    })
}

#[test]
fn pi_62_64_omp_33_branch_moves_the_leaf_and_parents_the_next_append() -> Result<()> {
    each_dialect(|d| {
        let (mut m, a, _) = exchange(d)?;
        m.branch(&a)?;
        assert_eq!(m.tree().leaf_id(), Some(a.as_str()));
        let c = m.append_message_json(user("3"))?;
        assert_eq!(m.tree().get(&c).and_then(|r| r.parent_id()), Some(a.as_str()));
        let err = m.branch("nonexistent").err().ok_or("refused")?;
        assert_eq!(err.to_string(), "Entry nonexistent not found");
        Ok(())
    })
}

#[test]
fn pi_65_66_omp_34_branch_with_summary() -> Result<()> {
    each_dialect(|d| {
        let (mut m, a, _) = exchange(d)?;
        let s = m.branch_with_summary(Some(&a), "Summary of abandoned work", None, None, None)?;
        assert_eq!(m.tree().leaf_id(), Some(s.as_str()));
        let e = m.tree().get(&s).ok_or("summary entry")?;
        assert_eq!(e.type_str(), Some("branch_summary"));
        assert_eq!((e.parent_id(), e.get_str("summary")), (Some(a.as_str()), Some("Summary of abandoned work")));
        let err = m.branch_with_summary(Some("nonexistent"), "summary", None, None, None).err().ok_or("refused")?;
        assert_eq!(err.to_string(), "Entry nonexistent not found");
        Ok(())
    })
}

#[test]
fn pi_67_to_70_omp_35_leaf_entry_and_entries_by_id() -> Result<()> {
    each_dialect(|d| {
        let mut m = mem(d);
        assert!(m.tree().leaf_id().is_none());
        assert!(m.tree().leaf_id().and_then(|id| m.tree().get(id)).is_none());
        let a = m.append_message_json(user("first"))?;
        assert_eq!(m.tree().leaf_id().and_then(|id| m.tree().get(id)).and_then(|r| r.id()), Some(a.as_str()));
        let b = m.append_message_json(assistant("second"))?;
        let leaf = m.tree().leaf_id().and_then(|id| m.tree().get(id)).ok_or("a leaf")?;
        assert_eq!(leaf.id(), Some(b.as_str()));
        assert_eq!(m.tree().get(&a).ok_or("user")?.value()["message"]["content"], "first");
        assert_eq!(m.tree().get(&b).ok_or("assistant")?.value()["message"]["content"][0]["text"], "second");
        assert!(m.tree().get("unknown").is_none() && m.tree().get("nonexistent").is_none());
        Ok(())
    })
}

#[test]
fn pi_71_omp_36_context_after_branching_is_the_active_branch() -> Result<()> {
    each_dialect(|d| {
        let mut m = mem(d);
        m.append_message_json(user("msg1"))?;
        let b = m.append_message_json(assistant("msg2"))?;
        m.append_message_json(user("msg3"))?;
        m.branch(&b)?;
        m.append_message_json(assistant("msg4-branch"))?;
        assert_eq!(texts(&ctx(&m, Leaf::Current)?), ["user: msg1", "assistant: msg2", "assistant: msg4-branch"]);
        Ok(())
    })
}

#[test]
fn pi_72_73_omp_37_in_memory_branched_session_keeps_the_path() -> Result<()> {
    each_dialect(|d| {
        let mut m = mem(d);
        let a = m.append_message_json(user("1"))?;
        let err = m.create_branched_session("nonexistent").err().ok_or("refused")?;
        assert_eq!(err.to_string(), "Entry nonexistent not found");
        let b = m.append_message_json(assistant("2"))?;
        let c = m.append_message_json(user("3"))?;
        m.append_message_json(assistant("4"))?;
        m.branch(&c)?;
        m.append_message_json(assistant("5"))?;
        assert_eq!(m.create_branched_session(&b)?, None);
        assert_eq!(ids(&m), [a, b]);
        Ok(())
    })
}
