//! Properties: normalization is idempotent and canonical, search never fails, every
//! stored prompt is found by each of its tokens, and the store behaves like a naive
//! model of omp's upsert.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use proptest::prelude::*;
use session_history::{HistoryOptions, HistoryScope, HistoryStore, normalize_prompt, tokenize};

/// Text rich in line breaks and JavaScript whitespace.
fn messy_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("\r\n".to_owned()),
            Just("\r".to_owned()),
            Just("\n".to_owned()),
            Just(" ".to_owned()),
            Just("\t".to_owned()),
            Just("\u{A0}".to_owned()),
            Just("\u{3000}".to_owned()),
            Just("\u{FEFF}".to_owned()),
            Just("\u{85}".to_owned()),
            "[a-zA-Z0-9éÜж日本%_\\\\\"*-]{1,6}",
        ],
        0..24,
    )
    .prop_map(|parts| parts.concat())
}

/// Words of letters and digits from several scripts, joined by separators.
fn wordy_prompt() -> impl Strategy<Value = String> {
    let word = "[a-zA-Z0-9éèüÜöçñжЖдя日本語한국]{1,8}";
    let sep = prop_oneof![Just(" "), Just("-"), Just("\n"), Just("/"), Just("_"), Just(", "), Just("\""), Just("%")];
    proptest::collection::vec((word, sep), 1..8)
        .prop_map(|parts| parts.into_iter().map(|(w, s)| format!("{w}{s}")).collect::<String>())
}

/// A model row: first insertion order, time, cwd, session, uses.
type ModelRow = (usize, i64, Option<&'static str>, Option<String>, i64);

proptest! {
    #[test]
    fn normalization_is_idempotent_and_canonical(text in messy_text()) {
        let once = normalize_prompt(&text);
        prop_assert_eq!(normalize_prompt(&once), once.clone());
        prop_assert!(!once.contains('\r'));
        for line in once.split('\n').take(once.split('\n').count().saturating_sub(1)) {
            prop_assert!(!line.ends_with([' ', '\t', '\u{A0}', '\u{3000}', '\u{FEFF}']), "{:?}", line);
        }
        prop_assert_eq!(once.trim_matches([' ', '\t', '\n', '\u{A0}', '\u{3000}', '\u{FEFF}']), once.as_str());
    }

    #[test]
    fn search_never_fails(query in any::<String>(), other in messy_text(), limit in any::<usize>()) {
        let store = HistoryStore::open_in_memory().expect("open");
        store.add("git commit \"quoted\" 50% done_now", Some("/a"), Some("s")).expect("add");
        store.add(&other, None, None).expect("add");
        let hits = store.search(&query, limit, &HistoryScope::Global);
        prop_assert!(hits.is_ok(), "{:?}", hits.err());
        prop_assert!(store.search(&query, limit, &HistoryScope::Cwd(query.clone())).is_ok());
        prop_assert!(store.matching_session_ids(&query, limit).is_ok());
    }

    #[test]
    fn every_token_finds_its_prompt(prompts in proptest::collection::vec(wordy_prompt(), 1..6)) {
        let store = HistoryStore::open_in_memory().expect("open");
        for p in &prompts {
            store.add(p, None, None).expect("add");
        }
        for p in &prompts {
            let stored = normalize_prompt(p);
            for token in tokenize(p) {
                let hits = store.search(&token, 1000, &HistoryScope::Global).expect("search");
                prop_assert!(hits.iter().any(|h| h.prompt == stored), "{:?} not found by {:?}", stored, token);
                // Results are newest first.
                prop_assert!(hits.windows(2).all(|w| (w[0].created_at, w[0].id) > (w[1].created_at, w[1].id)));
            }
        }
    }

    #[test]
    fn store_matches_a_naive_model(
        ops in proptest::collection::vec((0usize..5, 0usize..3, 0i64..4, prop::option::of(0usize..2)), 1..40)
    ) {
        const PROMPTS: [&str; 5] = ["alpha", "alpha  \r\n", "beta\ngamma", "  ", "delta"];
        const CWDS: [Option<&str>; 3] = [None, Some("/a"), Some("/b")];
        let now = Arc::new(AtomicI64::new(0));
        let clock = Arc::clone(&now);
        let store = HistoryStore::open_in_memory_with(
            HistoryOptions::default().with_clock(move || clock.load(Ordering::SeqCst)),
        ).expect("open");
        // The model: normalized prompt -> (first insertion order, time, cwd, session, uses).
        let mut model: HashMap<String, ModelRow> = HashMap::new();
        for (p, c, t, s) in ops {
            now.store(t, Ordering::SeqCst);
            let session = s.map(|s| format!("s{s}"));
            store.add(PROMPTS[p], CWDS[c], session.as_deref()).expect("add");
            let key = normalize_prompt(PROMPTS[p]);
            if key.is_empty() {
                continue;
            }
            let order = model.len();
            let row = model.entry(key).or_insert((order, t, None, None, 0));
            *row = (row.0, t, CWDS[c], session, row.4 + 1);
        }
        let mut expected: Vec<_> = model.into_iter().collect();
        expected.sort_by_key(|(_, row)| std::cmp::Reverse((row.1, row.0)));
        let got = store.recent(1000, &HistoryScope::Global).expect("recent");
        let got: Vec<_> = got.iter().map(|e| (e.prompt.clone(), e.created_at, e.cwd.clone(), e.session_id.clone(), e.use_count)).collect();
        let expected: Vec<_> = expected.into_iter().map(|(k, v)| (k, v.1, v.2.map(str::to_owned), v.3, v.4)).collect();
        prop_assert_eq!(got, expected);
    }
}
