//! Writing and reading through [`HistoryStore`]: upsert rules, limits, search
//! stages, scopes, session titles and recaps.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use session_history::{AddOutcome, HistoryOptions, HistoryScope, HistoryStore, MAX_LIMIT, history_db_path};

use crate::{TempDir, TestResult, fixed};

/// A store whose clock the test advances.
fn ticking() -> Result<(HistoryStore, Arc<AtomicI64>), session_history::HistoryError> {
    let now = Arc::new(AtomicI64::new(1000));
    let clock = Arc::clone(&now);
    let store =
        HistoryStore::open_in_memory_with(HistoryOptions::default().with_clock(move || clock.load(Ordering::SeqCst)))?;
    Ok((store, now))
}

fn prompts(entries: &[session_history::HistoryEntry]) -> Vec<&str> {
    entries.iter().map(|e| e.prompt.as_str()).collect()
}

#[test]
fn add_upserts_and_replaces_provenance() -> TestResult {
    let (store, now) = ticking()?;
    assert_eq!(store.add(" \r\n\t", Some("/a"), Some("s"))?, AddOutcome::Ignored);
    assert_eq!(store.add("first", Some("/a"), Some("s1"))?, AddOutcome::Inserted { id: 1 });
    now.store(2000, Ordering::SeqCst);
    assert_eq!(store.add("first   \r\n", None, Some(""))?, AddOutcome::Updated { id: 1, use_count: 2 });
    let entry = &store.recent(1, &HistoryScope::Global)?[0];
    // Newer values replace older ones, even with nothing; an empty session id is NULL.
    assert_eq!((entry.created_at, entry.cwd.as_deref(), entry.session_id.as_deref()), (2000, None, None));
    assert_eq!(store.len()?, 1);
    Ok(())
}

#[test]
fn recent_orders_by_time_then_id_and_clamps_the_limit() -> TestResult {
    let (store, now) = ticking()?;
    for (i, p) in ["a", "b", "c"].iter().enumerate() {
        now.store(if i == 0 { 5 } else { 1 }, Ordering::SeqCst);
        store.add(p, None, None)?;
    }
    assert_eq!(prompts(&store.recent(10, &HistoryScope::Global)?), ["a", "c", "b"]);
    assert!(store.recent(0, &HistoryScope::Global)?.is_empty());
    for i in 0..(MAX_LIMIT + 5) {
        store.add(&format!("p{i}"), None, None)?;
    }
    assert_eq!(store.recent(usize::MAX, &HistoryScope::Global)?.len(), MAX_LIMIT);
    Ok(())
}

#[test]
fn search_merges_prefix_and_substring_stages() -> TestResult {
    let (store, now) = ticking()?;
    let items = ["git commit -m fix", "Commitment issues", "recommit the ÉCOLE data", "unrelated", "50%_off \\ sale"];
    for (i, p) in items.iter().enumerate() {
        now.store(100 + i64::try_from(i)?, Ordering::SeqCst);
        store.add(p, None, None)?;
    }
    let g = &HistoryScope::Global;
    // Prefix through FTS (case-insensitive), infix "recommit" through the substring stage.
    assert_eq!(
        prompts(&store.search("COMMIT", 10, g)?),
        ["recommit the ÉCOLE data", "Commitment issues", "git commit -m fix"]
    );
    // Non-ASCII case folding comes from the FTS stage (LIKE folds ASCII only).
    assert_eq!(prompts(&store.search("école", 10, g)?), ["recommit the ÉCOLE data"]);
    // Diacritics are folded by FTS too.
    assert_eq!(prompts(&store.search("ecole", 10, g)?), ["recommit the ÉCOLE data"]);
    // Only the substring stage matches: its rows come back alone.
    assert_eq!(prompts(&store.search("mmitment", 10, g)?), ["Commitment issues"]);
    // All tokens are required; punctuation only separates.
    assert_eq!(prompts(&store.search("git-fix", 10, g)?), ["git commit -m fix"]);
    assert!(store.search("git unrelated", 10, g)?.is_empty());
    // LIKE wildcards in the query are tokens' separators, never wildcards.
    assert_eq!(prompts(&store.search("50%", 10, g)?), ["50%_off \\ sale"]);
    assert!(store.search("%_\\", 10, g)?.is_empty());
    assert!(store.search("commit", 0, g)?.is_empty());
    assert_eq!(store.search("commit", 2, g)?.len(), 2);
    Ok(())
}

#[test]
fn scopes_filter_by_cwd_and_session() -> TestResult {
    let store = HistoryStore::open_in_memory_with(fixed(7))?;
    store.add("build the docs", Some("/a"), Some("s1"))?;
    store.add("build the site", Some("/b"), Some("s2"))?;
    store.add("build the app", Some("/a"), Some("s2"))?;
    let cwd = HistoryScope::Cwd("/a".into());
    let session = HistoryScope::Session("s2".into());
    assert_eq!(prompts(&store.search("build", 10, &cwd)?), ["build the app", "build the docs"]);
    assert_eq!(prompts(&store.search("uild", 10, &session)?), ["build the app", "build the site"]);
    assert_eq!(prompts(&store.recent(10, &cwd)?), ["build the app", "build the docs"]);
    assert!(store.recent(10, &HistoryScope::Cwd("/none".into()))?.is_empty());
    Ok(())
}

#[test]
fn matching_session_ids_dedupes_in_recency_order() -> TestResult {
    let (store, now) = ticking()?;
    for (i, (p, s)) in
        [("deploy one", Some("s1")), ("deploy two", Some("s2")), ("deploy three", Some("s1")), ("deploy four", None)]
            .into_iter()
            .enumerate()
    {
        now.store(i64::try_from(i)?, Ordering::SeqCst);
        store.add(p, None, s)?;
    }
    assert_eq!(store.matching_session_ids("deploy", 500)?, ["s1", "s2"]);
    assert!(store.matching_session_ids("", 500)?.is_empty());
    Ok(())
}

#[test]
fn session_titles_and_recaps_round_trip() -> TestResult {
    let store = HistoryStore::open_in_memory_with(fixed(42))?;
    assert_eq!(store.session_title("s")?, None);
    store.set_session_title("s", "First")?;
    store.set_session_title("s", "Renamed")?;
    assert_eq!(store.session_title("s")?.as_deref(), Some("Renamed"));
    let id = store.record_session_recap("s", "/repo", "did things")?;
    store.record_session_recap("other", "/repo", "elsewhere")?;
    let recaps = store.session_recaps("s")?;
    assert_eq!(recaps.len(), 1);
    assert_eq!((recaps[0].id, recaps[0].recap.as_str(), recaps[0].created_at), (id, "did things", 42));
    Ok(())
}

#[test]
fn open_creates_the_directory_and_reopens() -> TestResult {
    let dir = TempDir::new("reopen");
    let path = history_db_path(&dir.path().join("agent"));
    let first = HistoryStore::open(&path, fixed(1))?;
    assert!(first.notices.is_empty());
    assert_eq!(first.store.path(), Some(path.as_path()));
    first.store.add("persisted", Some("/a"), None)?;
    first.store.close()?;
    let second = HistoryStore::open(&path, fixed(2))?;
    assert!(second.notices.is_empty(), "{:?}", second.notices);
    assert_eq!(prompts(&second.store.search("persist", 5, &HistoryScope::Global)?), ["persisted"]);
    Ok(())
}
