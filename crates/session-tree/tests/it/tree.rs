//! The index, leaf, branching, labels and tree view, with the checklist items of
//! pi.md §8.A (36-43, 47-74) and omp.md §10.1 (19-37) that concern them.

use serde_json::{Value, json};
use session_model::{Dialect, Record};
use session_tree::{Leaf, SessionTree, TreeDiagnostic, TreeError, omp, pi, tree_to_json};

use crate::support::{entry, ids, render_tree, tree_of, ts};

/// A session being appended to, like a `SessionManager` in memory.
struct Session {
    tree: SessionTree,
    n: i64,
}

impl Session {
    fn new(dialect: Dialect) -> Session {
        Session { tree: SessionTree::new(dialect, Vec::new()), n: 0 }
    }

    fn add(&mut self, kind: &str, args: &[&str]) -> String {
        self.n += 1;
        let id = format!("id{:02}", self.n);
        let parent = self.tree.next_parent().map(str::to_owned);
        let v = entry(&id, parent.as_deref(), self.n, kind, args, self.tree.dialect());
        self.tree.append(Record::from_value(v)).expect("append of a fresh id");
        id
    }

    fn label(&mut self, target: &str, label: Option<&str>) -> Result<String, TreeError> {
        if !self.tree.contains_id(target) {
            return Err(TreeError::NotFound(target.to_owned()));
        }
        Ok(match label {
            Some(l) => self.add("label", &[target, l]),
            None => self.add("label", &[target]),
        })
    }

    fn branch_with_summary(&mut self, from: &str, summary: &str) -> Result<String, TreeError> {
        let before = self.tree.leaf_id().unwrap_or("root").to_owned();
        self.tree.branch(from)?;
        Ok(self.add("branch_summary", &[&before, summary]))
    }

    fn branch_ids(&self, from: Option<&str>) -> Vec<String> {
        ids(self.tree.get_branch(from)).into_iter().map(str::to_owned).collect()
    }

    fn pi_messages(&self) -> Vec<Value> {
        let v: Value =
            serde_json::from_str(&pi::build_context(&self.tree, Leaf::Current).to_json_string()).expect("json");
        v["messages"].as_array().cloned().unwrap_or_default()
    }
}

#[test]
fn appends_chain_parents_and_move_the_leaf() {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let mut s = Session::new(dialect);
        // pi 52 / omp 30: no leaf initially, then every append is the leaf.
        assert_eq!(s.tree.leaf_id(), None);
        let a = s.add("user", &["first"]);
        assert_eq!(s.tree.leaf_id(), Some(a.as_str()));
        let t = s.add("thinking", &["high"]);
        assert_eq!(s.tree.leaf_id(), Some(t.as_str()));
        let m = s.add("model", &["openai/gpt-4"]);
        let c = s.add("compaction", &[&a, "summary"]);
        let x = s.add("custom", &["my_data"]);
        let b = s.add("assistant", &["second"]);
        // pi 47-51 / omp 28-29: each entry's parent is the previous one, fields verbatim.
        let entries = s.tree.entries();
        assert_eq!(entries[0].parent_id(), None);
        for w in entries.windows(2) {
            assert_eq!(w[1].parent_id(), w[0].id());
        }
        assert_eq!(s.tree.get(&c).and_then(|r| r.get("firstKeptEntryId")), Some(&json!(a)));
        assert_eq!(s.tree.get(&c).and_then(|r| r.get("tokensBefore")), Some(&json!(100)));
        assert_eq!(s.tree.get(&x).and_then(|r| r.get_str("customType")), Some("my_data"));
        assert!(s.tree.get(&m).is_some());
        // pi 68-70 / omp 35: leaf entry and lookups.
        assert_eq!(s.tree.get(&b).and_then(|r| r.id()), Some(b.as_str()));
        assert_eq!(
            s.tree.get(&a).map(|r| r.message_info().content.clone()),
            Some(session_model::Scalar::Str("first".into()))
        );
        assert!(s.tree.get("nonexistent").is_none());
        assert_eq!(s.tree.next_parent(), Some(b.as_str()));
    }
}

#[test]
fn branches_are_root_to_leaf_paths() -> Result<(), TreeError> {
    let mut s = Session::new(Dialect::Pi);
    // pi 53 / omp 31: empty session.
    assert!(s.tree.get_branch(None).is_empty());
    let id1 = s.add("user", &["one"]);
    // pi 54: one entry.
    assert_eq!(s.branch_ids(None), std::slice::from_ref(&id1));
    let id2 = s.add("assistant", &["two"]);
    let id3 = s.add("thinking", &["low"]);
    let id4 = s.add("user", &["four"]);
    // pi 55: the whole path; pi 56: from an inner id.
    assert_eq!(s.branch_ids(None), [id1.clone(), id2.clone(), id3.clone(), id4.clone()]);
    assert_eq!(s.branch_ids(Some(&id2)), [id1.clone(), id2.clone()]);
    // pi 122: unknown start gives [] (no fallback), an empty start too.
    assert!(s.tree.get_branch(Some("nope")).is_empty());
    assert!(s.tree.get_branch(Some("")).is_empty());
    // pi 62-64 / omp 33: branch moves the leaf; unknown throws; the next append hangs there.
    s.tree.branch(&id1)?;
    assert_eq!(s.tree.leaf_id(), Some(id1.as_str()));
    assert_eq!(s.tree.branch("nonexistent"), Err(TreeError::NotFound("nonexistent".into())));
    assert_eq!(s.tree.branch("nonexistent").map_err(|e| e.to_string()), Err("Entry nonexistent not found".to_owned()));
    let id5 = s.add("user", &["five"]);
    assert_eq!(s.tree.get(&id5).and_then(|r| r.parent_id()), Some(id1.as_str()));
    // reset: no leaf, the next append is a root, context empty.
    s.tree.reset_leaf();
    assert_eq!(s.tree.leaf_id(), None);
    assert!(s.pi_messages().is_empty());
    let root2 = s.add("user", &["again"]);
    assert_eq!(s.tree.get(&root2).map(|r| r.parent_id()), Some(None));
    Ok(())
}

#[test]
fn branch_with_summary_and_context_follow_the_active_branch() -> Result<(), TreeError> {
    let mut s = Session::new(Dialect::Pi);
    let id1 = s.add("user", &["msg1"]);
    let id2 = s.add("assistant", &["msg2"]);
    let _id3 = s.add("user", &["msg3"]);
    // pi 71 / omp 36: after branching only the active branch is in context.
    s.tree.branch(&id2)?;
    let _id4 = s.add("assistant", &["msg4-branch"]);
    let texts: Vec<String> = s.pi_messages().iter().map(crate::support::render_message).collect();
    assert_eq!(texts, ["user: msg1", "assistant: msg2", "assistant: msg4-branch"]);
    // pi 65-66 / omp 34: branch with summary.
    let bs = s.branch_with_summary(&id1, "Summary of abandoned work")?;
    assert_eq!(s.tree.leaf_id(), Some(bs.as_str()));
    let rec = s.tree.get(&bs).expect("summary entry");
    assert_eq!(rec.type_str(), Some("branch_summary"));
    assert_eq!(rec.parent_id(), Some(id1.as_str()));
    assert_eq!(rec.get_str("summary"), Some("Summary of abandoned work"));
    assert_eq!(s.branch_with_summary("nonexistent", "summary"), Err(TreeError::NotFound("nonexistent".into())));
    Ok(())
}

#[test]
fn tree_shapes() -> Result<(), TreeError> {
    let mut s = Session::new(Dialect::Pi);
    // pi 57 / omp 32: empty.
    assert!(s.tree.tree().is_empty());
    let id1 = s.add("user", &["1"]);
    let id2 = s.add("assistant", &["2"]);
    let id3 = s.add("user", &["3"]);
    // pi 58: one root, depth 3, the leaf has no children.
    let t = s.tree.tree();
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].children[0].children[0].entry.id(), Some(id3.as_str()));
    assert!(t[0].children[0].children[0].children.is_empty());
    // pi 59: siblings after a branch.
    s.tree.branch(&id2)?;
    let id4 = s.add("user", &["4"]);
    assert_eq!(ids(s.tree.children(&id2)), [id3.as_str(), id4.as_str()]);
    // pi 60: three siblings.
    s.tree.branch(&id2)?;
    let id5 = s.add("user", &["5"]);
    let t = s.tree.tree();
    assert_eq!(t[0].children[0].children.len(), 3);
    // pi 61: deep branching.
    let id6 = s.add("assistant", &["6"]);
    s.tree.branch(&id5)?;
    let id7 = s.add("assistant", &["7"]);
    let t = s.tree.tree();
    let node5 = &t[0].children[0].children[2];
    assert_eq!(ids(node5.children.iter().map(|n| &n.entry)), [id6.as_str(), id7.as_str()]);
    assert_eq!(t[0].entry.id(), Some(id1.as_str()));
    assert_eq!(tree_to_json(&t, true).matches("\"id\"").count(), 7);
    Ok(())
}

#[test]
fn tree_sorts_children_by_time_but_children_keeps_file_order() {
    // pi 114: getChildren is file order, getTree sorts by timestamp (stable), roots in file order.
    let t = tree_of(
        "r - user root @10\nlate r user late @50\nearly r user early @20\ntie r user tie @20\nr2 - user root2 @1\n",
        Dialect::Pi,
    );
    assert_eq!(ids(t.children("r")), ["late", "early", "tie"]);
    assert_eq!(render_tree(&t.tree()), "r\n  early\n  tie\n  late\nr2\n");
}

#[test]
fn labels_set_clear_and_last_wins() -> Result<(), TreeError> {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let mut s = Session::new(dialect);
        let m1 = s.add("user", &["hello"]);
        // pi 36 / omp 19.
        assert_eq!(s.tree.label(&m1), None);
        let l = s.label(&m1, Some("checkpoint"))?;
        assert_eq!(s.tree.label(&m1), Some("checkpoint"));
        let le = s.tree.get(&l).expect("label entry");
        assert_eq!((le.get_str("targetId"), le.get_str("label")), (Some(m1.as_str()), Some("checkpoint")));
        assert_eq!(s.tree.label_timestamp(&m1), le.timestamp());
        // pi 37 / omp 20: clear.
        s.label(&m1, None)?;
        assert_eq!(s.tree.label(&m1), None);
        assert_eq!(s.tree.label_timestamp(&m1), None);
        // pi 38 / omp 21: last wins.
        for l in ["first", "second", "third"] {
            s.label(&m1, Some(l))?;
        }
        assert_eq!(s.tree.label(&m1), Some("third"));
        // pi 39 / omp 22: tree nodes carry labels.
        let m2 = s.add("assistant", &["hi"]);
        s.label(&m2, Some("response"))?;
        let t = s.tree.tree();
        assert_eq!(t[0].label.as_deref(), Some("third"));
        assert_eq!(t[0].children[0].label, None);
        // pi 42 / omp 25: labels add no context messages.
        s.tree.branch(&m1)?;
        let ctx = pi::build_context(&s.tree, Leaf::Id(&l));
        assert_eq!(ctx.messages().count(), 1);
        // pi 43 / omp 26.
        assert_eq!(
            s.label("non-existent", Some("label")).map_err(|e| e.to_string()),
            Err("Entry non-existent not found".to_owned())
        );
        // pi 40-41 / omp 23-24: the labels in effect whose targets are on a path.
        let path: Vec<&str> = ids(s.tree.get_branch(Some(&m2)));
        let carried: Vec<(&str, &str)> = s.tree.labels().filter(|(t, _)| path.contains(t)).collect();
        assert_eq!(carried, [(m1.as_str(), "third"), (m2.as_str(), "response")]);
    }
    Ok(())
}

#[test]
fn label_map_order_follows_javascript_map() {
    let t = tree_of(
        "a - user a\nb ^ user b\nl1 ^ label a A\nl2 ^ label b B\nl3 ^ label a A2\nl4 ^ label b\nl5 ^ label b B2\n",
        Dialect::Pi,
    );
    assert_eq!(t.labels().collect::<Vec<_>>(), [("a", "A2"), ("b", "B2")]);
    let t =
        tree_of("a - user a\nb ^ user b\nl1 ^ label a A\nl2 ^ label b B\nl4 ^ label a\nl5 ^ label a A3\n", Dialect::Pi);
    assert_eq!(t.labels().collect::<Vec<_>>(), [("b", "B"), ("a", "A3")]);
}

#[test]
fn session_name_is_the_latest_session_info() {
    let t = tree_of("a - user a\ni1 ^ info  first \ni2 ^ info second\n", Dialect::Pi);
    assert_eq!(t.session_info_name().as_deref(), Some("second"));
    let t = tree_of("a - user a\ni1 ^ info first\ni2 ^ info \n", Dialect::Pi);
    assert_eq!(t.session_info_name(), None);
}

#[test]
fn leaf_after_load_is_the_last_entry_of_any_type() {
    // pi 102: even a label.
    let t = tree_of("a - user a\nb ^ user b\nl a label a x\n", Dialect::Pi);
    assert_eq!(t.leaf_id(), Some("l"));
    // An id-less last record: no leaf, but context falls back to the last entry.
    let mut recs = crate::support::parse_session("a - user a\n", Dialect::Pi);
    recs.push(Record::parse("42").expect("json"));
    recs.push(Record::parse("null").expect("json"));
    let t = SessionTree::new(Dialect::Pi, recs);
    assert_eq!(t.leaf_id(), None);
    assert_eq!(t.entries().len(), 2);
    assert_eq!(tree_to_json(&t.tree(), true), r#"[{"id":"a","children":[]},{"children":[]}]"#);
    let ctx: Value = serde_json::from_str(&pi::build_context(&t, Leaf::Current).to_json_string()).expect("json");
    assert_eq!(ctx, json!({"messages": [], "thinkingLevel": "off", "model": null}));
}

#[test]
fn damaged_trees_terminate_and_are_reported() {
    let recs = crate::support::parse_session(
        "a b user cycle a\nb a user cycle b\nc c user self\nd zz user orphan\n",
        Dialect::Omp,
    );
    let t = SessionTree::new(Dialect::Omp, recs);
    assert_eq!(ids(t.get_branch(Some("a"))), ["b", "a"]);
    assert_eq!(ids(t.get_branch(Some("c"))), ["c"]);
    assert_eq!(ids(t.get_branch(Some("d"))), ["d"]);
    let d = t.diagnostics();
    assert!(d.contains(&TreeDiagnostic::SelfParent { id: "c".into() }));
    assert!(d.contains(&TreeDiagnostic::Orphan { id: "d".into(), parent: "zz".into() }));
    assert!(d.iter().any(|x| matches!(x, TreeDiagnostic::Cycle { .. })));
    // The cycle is unreachable from any root; self parents and orphans are roots.
    assert_eq!(render_tree(&t.tree()), "c\nd\n");
    let ctx = omp::build_context(&t, Leaf::Id("a"), omp::ContextOptions::default());
    assert_eq!(ctx.messages().count(), 2);
}

#[test]
fn duplicate_ids_last_wins_and_tree_repeats_the_node() {
    let t = tree_of("a - user a\nb a user first b\nb a user second b\nc b user c\n", Dialect::Pi);
    assert_eq!(
        t.get("b").and_then(|r| r.message_info().content.as_str().map(str::to_owned)).as_deref(),
        Some("second b")
    );
    assert_eq!(render_tree(&t.tree()), "a\n  b\n    c\n  b\n    c\n");
    assert!(matches!(t.diagnostics()[0], TreeDiagnostic::DuplicateId { first: 1, index: 2, .. }));
    // A duplicate that closes a cycle through the tree does not hang.
    let t = tree_of("a - user a\nb a user b\na b user a again\n", Dialect::Pi);
    let json = tree_to_json(&t.tree(), true);
    assert!(json.len() < 200, "{json}");
}

#[test]
fn append_validates_and_pop_last_restores() -> Result<(), TreeError> {
    let mut t = tree_of("a - user a\nl ^ label a one\n", Dialect::Pi);
    assert_eq!(t.append(Record::parse(r#"{"type":"session","id":"x"}"#).expect("json")), Err(TreeError::Header));
    assert_eq!(t.append(Record::parse(r#"{"type":"custom"}"#).expect("json")), Err(TreeError::MissingId));
    let before = t.leaf_id().map(str::to_owned);
    let v = entry("l2", Some("l"), 9, "label", &["a", "two"], Dialect::Pi);
    t.append(Record::from_value(v))?;
    assert_eq!(t.label("a"), Some("two"));
    t.pop_last(before);
    assert_eq!(t.label("a"), Some("one"));
    assert_eq!(t.leaf_id(), Some("l"));
    assert!(!t.contains_id("l2"));
    assert_eq!(t.entries().len(), 2);
    // Duplicate id append and undo keep the earlier entry findable.
    t.append(Record::from_value(entry("a", None, 9, "user", &["dup"], Dialect::Pi)))?;
    assert_eq!(t.get("a").map(|r| r.timestamp().map(str::to_owned)), Some(Some(ts(9))));
    t.pop_last(Some("l".into()));
    assert_eq!(t.get("a").map(|r| r.timestamp().map(str::to_owned)), Some(Some(ts(1))));
    // Without an undo record (nothing appended) pop_last rebuilds.
    t.pop_last(None);
    assert_eq!(t.entries().len(), 1);
    assert_eq!(t.label("a"), None);
    assert_eq!(t.leaf_id(), None);
    Ok(())
}

#[test]
fn late_parents_and_appended_cycles() -> Result<(), TreeError> {
    // An orphan whose parent is appended later joins the tree; undoing the append orphans it again.
    let mut t = tree_of("a - user a\nx p user waiting\n", Dialect::Pi);
    assert_eq!(ids(t.get_branch(Some("x"))), ["x"]);
    t.append(Record::from_value(entry("p", Some("a"), 9, "user", &["parent"], Dialect::Pi)))?;
    assert_eq!(ids(t.get_branch(Some("x"))), ["a", "p", "x"]);
    t.pop_last(Some("x".into()));
    assert_eq!(ids(t.get_branch(Some("x"))), ["x"]);
    // Appending the missing parent as a child of the orphan closes a cycle: reported, walks stop.
    t.append(Record::from_value(entry("p", Some("x"), 9, "user", &["loop"], Dialect::Pi)))?;
    assert_eq!(ids(t.get_branch(Some("x"))), ["p", "x"]);
    assert!(t.diagnostics().iter().any(|d| matches!(d, TreeDiagnostic::Cycle { .. })));
    Ok(())
}

/// Ids as the references' `Map` keys them (testdata/conformance-odd/a/pi/ids-odd): a
/// number id `7` is apart from the string `"7"`, a `parentId` of `""` links in the
/// tree but ends the path walk, and a label can target a number id.
#[test]
fn number_ids_and_falsy_parents_follow_the_references() {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let msg = |id: &str, parent: &str, text: &str| {
            format!(
                r#"{{"type":"message","id":{id},"parentId":{parent},"timestamp":"2026-01-02T03:04:05.000Z","message":{{"role":"user","content":"{text}","timestamp":1}}}}"#
            )
        };
        let lines = [
            msg(r#""""#, "null", "empty id"),
            msg(r#""__proto__""#, r#""""#, "proto"),
            msg("7", r#""__proto__""#, "number seven"),
            msg(r#""7""#, "7", "string seven"),
            msg(r#""x1""#, r#""7""#, "child"),
            r#"{"type":"label","id":"l1","parentId":"x1","timestamp":"2026-01-02T03:04:05.000Z","targetId":7,"label":"seven"}"#
                .to_owned(),
        ];
        let records: Vec<Record> = lines.iter().map(|l| Record::parse(l).expect("valid")).collect();
        let mut t = SessionTree::new(dialect, records);
        let ids = |path: Vec<&Record>| -> Vec<String> {
            path.iter()
                .map(|r| session_model::json::to_js_string(r.get("id").unwrap_or(&serde_json::Value::Null)))
                .collect()
        };
        // The walk stops at `__proto__`, whose parent `""` is falsy.
        assert_eq!(ids(t.get_branch(None)), [r#""__proto__""#, "7", r#""7""#, r#""x1""#, r#""l1""#], "{dialect:?}");
        assert_eq!(ids(t.get_branch(Some("7"))), [r#""__proto__""#, "7", r#""7""#]);
        // The tree links `__proto__` under `""`, and 7 under it carries the label.
        let roots = t.tree();
        assert_eq!(roots.len(), 1);
        assert_eq!(roots[0].entry.id(), Some(""));
        let proto = &roots[0].children[0];
        assert_eq!(proto.entry.id(), Some("__proto__"));
        assert_eq!(proto.children[0].entry.id(), None);
        assert_eq!(proto.children[0].label.as_deref(), Some("seven"));
        assert_eq!(proto.children[0].children[0].entry.id(), Some("7"));
        // `""` can be branched to (it exists); its path is empty, as a falsy id gives.
        t.branch("").expect("an entry has the id \"\"");
        assert!(t.get_branch(None).is_empty());
        assert!(t.branch("missing").is_err());
    }
}
