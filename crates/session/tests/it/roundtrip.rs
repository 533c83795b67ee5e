//! Property: whatever sequence of operations a session goes through, the file it
//! leaves reopens with the same entries (byte for byte), the same leaf and the same
//! labels and name, in both dialects.

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::json;
use session::store::MemoryStorage;
use session::{Dialect, Env, SessionManager};

#[derive(Clone, Debug)]
enum Op {
    User(String),
    Assistant(String),
    Custom(u8),
    Label(usize, Option<String>),
    Branch(usize),
    Reset,
    BranchSummary(Option<usize>, String),
    Compaction(Option<usize>),
    Name(String),
    Thinking(u8),
}

fn op() -> impl Strategy<Value = Op> {
    let text = "[a-z \\n\"\\\\é🚀]{0,12}";
    prop_oneof![
        3 => text.prop_map(Op::User),
        3 => text.prop_map(Op::Assistant),
        1 => any::<u8>().prop_map(Op::Custom),
        1 => (any::<usize>(), proptest::option::of("[a-z]{0,5}")).prop_map(|(i, l)| Op::Label(i, l)),
        1 => any::<usize>().prop_map(Op::Branch),
        1 => Just(Op::Reset),
        1 => (proptest::option::of(any::<usize>()), text).prop_map(|(i, s)| Op::BranchSummary(i, s)),
        1 => proptest::option::of(any::<usize>()).prop_map(Op::Compaction),
        1 => "[a-zA-Z ]{0,10}".prop_map(Op::Name),
        1 => any::<u8>().prop_map(Op::Thinking),
    ]
}

fn apply(m: &mut SessionManager, op: &Op) {
    let ids: Vec<String> = m.tree().entries().iter().filter_map(|r| r.id().map(str::to_owned)).collect();
    let pick = |i: usize| (!ids.is_empty()).then(|| ids[i % ids.len()].clone());
    // Operations the reference refuses (unknown ids) are simply not applied.
    let _ = match op {
        Op::User(t) => m.append_message_json(json!({"role": "user", "content": t, "timestamp": 1})).map(drop),
        Op::Assistant(t) => m
            .append_message_json(json!({"role": "assistant", "content": [{"type": "text", "text": t}], "provider": "p",
                                   "model": "m", "stopReason": "stop", "timestamp": 2}))
            .map(drop),
        Op::Custom(n) => m.append_custom_entry("prop", Some(json!({ "n": n }))).map(drop),
        Op::Label(i, l) => match pick(*i) {
            Some(id) => m.append_label_change(&id, l.as_deref()).map(drop),
            None => Ok(()),
        },
        Op::Branch(i) => {
            if let Some(id) = pick(*i) {
                let _ = m.branch(&id);
            }
            Ok(())
        }
        Op::Reset => {
            m.reset_leaf();
            Ok(())
        }
        Op::BranchSummary(i, s) => {
            let from = i.and_then(pick);
            m.branch_with_summary(from.as_deref(), s, None, None, None).map(drop)
        }
        Op::Compaction(i) => {
            let keep = i.and_then(pick);
            m.append_compaction("summary", keep.as_deref(), json!(10), Default::default()).map(drop)
        }
        Op::Name(n) => m.set_session_name(n, Some("user")).map(drop),
        Op::Thinking(n) => {
            m.append_thinking_level_change(Some(["off", "low", "high"][*n as usize % 3]), None).map(drop)
        }
    };
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn a_written_session_reopens_as_it_was(ops in proptest::collection::vec(op(), 1..40), omp in any::<bool>()) {
        let dialect = if omp { Dialect::Omp } else { Dialect::Pi };
        let storage = Arc::new(MemoryStorage::new());
        let env = Env::memory().with_storage(storage.clone()).with_process_cwd("/w");
        let mut m = SessionManager::create(dialect, "/w", Path::new("/s"), env.clone()).unwrap();
        // Make sure the file exists whatever the operations are.
        m.append_message_json(json!({"role": "user", "content": "q", "timestamp": 1})).unwrap();
        m.append_message_json(json!({"role": "assistant", "content": [], "provider": "p", "model": "m", "timestamp": 2})).unwrap();
        for op in &ops {
            apply(&mut m, op);
        }
        m.flush().unwrap();
        let file = m.session_file().unwrap().to_path_buf();
        let entries: Vec<String> = m.tree().entries().iter().map(|r| r.text().to_owned()).collect();
        let last = m.tree().entries().last().and_then(|r| r.id()).map(str::to_owned);
        let labels: Vec<(String, String)> = m.tree().labels().map(|(a, b)| (a.to_owned(), b.to_owned())).collect();
        let name = m.session_name();
        drop(m);
        let again = SessionManager::open(dialect, &file, env).unwrap();
        let reread: Vec<String> = again.tree().entries().iter().map(|r| r.text().to_owned()).collect();
        prop_assert_eq!(reread, entries);
        // The leaf is not stored: after a reload it is the last entry written.
        prop_assert_eq!(again.tree().leaf_id().map(str::to_owned), last);
        let relabels: Vec<(String, String)> = again.tree().labels().map(|(a, b)| (a.to_owned(), b.to_owned())).collect();
        prop_assert_eq!(relabels, labels);
        prop_assert_eq!(again.session_name(), name);
        prop_assert!(again.diagnostics().is_empty(), "{:?}", again.diagnostics());
    }
}
