//! The listing cache (`src/cache.rs`): a cached listing always equals a fresh scan.

use std::path::Path;

use session_discovery::{AgentDirs, Dialect, Discovery, OmpHome, ProcessEnv, SessionInfo};

use crate::support::{TempDir, header, lines, load_fixture, set_mtime, user, write};

fn discovery(dialect: Dialect, root: &Path) -> Discovery {
    let env = ProcessEnv::new(root.join("home"), root, "/nonexistent-tmp");
    Discovery::new(AgentDirs::for_dialect(dialect, &env, OmpHome::MusePi))
}

fn list(d: &Discovery, dir: &Path) -> Vec<SessionInfo> {
    d.list("/tmp", Some(dir), &mut |_| {}).expect("list")
}

fn cache_files(dir: &Path) -> Vec<std::path::PathBuf> {
    fs_err::read_dir(dir).map_or_else(|_| Vec::new(), |rd| rd.map(|e| e.expect("entry").path()).collect())
}

/// Lists `dir` with and without the cache after each change and compares.
fn follows_changes(dialect: Dialect, fixture: &str) {
    let td = TempDir::new(&format!("cache-{}", dialect.name()));
    let dir = td.path().join("s");
    fs_err::create_dir_all(&dir).expect("dir");
    load_fixture(fixture, &dir);
    let cache_dir = td.path().join("cache");
    let plain = discovery(dialect, td.path());
    let cached = discovery(dialect, td.path()).with_list_cache(&cache_dir, 0);
    let fresh = list(&plain, &dir);
    assert!(!fresh.is_empty());
    assert_eq!(list(&cached, &dir), fresh, "first listing fills the cache");
    let files = cache_files(&cache_dir);
    assert_eq!(files.len(), 1, "one cache file");
    let cache = files[0].clone();
    let written = fs_err::metadata(&cache).expect("cache").modified().expect("mtime");
    assert_eq!(list(&cached, &dir), fresh, "second listing reads the cache");
    assert_eq!(fs_err::metadata(&cache).expect("cache").modified().expect("mtime"), written, "nothing to rewrite");

    // An append changes size and times: that file is read again.
    let changed = &fresh[0].path;
    let mut text = fs_err::read_to_string(changed).expect("read");
    text.push_str(&lines(&[user("zz-new", "a brand new prompt", 1_900_000_000_000)]));
    write(changed, &text, 1_700_000_000_000);
    let after = list(&plain, &dir);
    assert_ne!(after, fresh);
    assert_eq!(list(&cached, &dir), after, "a changed file is rescanned");

    // A removed file disappears; a damaged cache is ignored and replaced.
    fs_err::remove_file(&fresh[fresh.len() - 1].path).expect("rm");
    let after = list(&plain, &dir);
    assert_eq!(list(&cached, &dir), after, "a removed file is gone");
    for damage in [&b""[..], b"SSLCACHE garbage", &fs_err::read(&cache).expect("cache")[..100]] {
        fs_err::write(&cache, damage).expect("damage");
        assert_eq!(list(&cached, &dir), after, "damaged cache ignored");
        assert_eq!(list(&cached, &dir), after, "and replaced");
    }
}

#[test]
fn pi_cached_listing_follows_changes() {
    follows_changes(Dialect::Pi, "pi-branchy");
}

#[test]
fn omp_cached_listing_follows_changes() {
    follows_changes(Dialect::Omp, "omp-fork");
}

#[test]
fn files_modified_just_now_are_not_trusted() {
    let td = TempDir::new("cache-racy");
    let dir = td.path().join("s");
    let f = dir.join("2026-01-01T00-00-00-000Z_a.jsonl");
    let text = lines(&[header("a", "2026-01-01T00:00:00.000Z", "/tmp"), user("u1", "first", 1000)]);
    let now_ms = u64::try_from(session_store::clock::Clock::now_ms(&session_store::clock::SystemClock)).expect("clock");
    write(&f, &text, now_ms);
    let cached = discovery(Dialect::Pi, td.path()).with_list_cache(td.path().join("cache"), 0);
    assert_eq!(list(&cached, &dir)[0].first_message, "first");
    // Same size, same mtime: only the change time moves (here; a file system with a
    // coarse clock may not show even that, which is what the racy rule is for). The
    // listing must see the new text either way.
    let same_size = text.replace("first", "other");
    fs_err::write(&f, &same_size).expect("rewrite");
    set_mtime(&f, now_ms);
    assert_eq!(list(&cached, &dir)[0].first_message, "other");
}

#[test]
fn the_cache_directory_stays_bounded() {
    let td = TempDir::new("cache-bounded");
    let cache_dir = td.path().join("cache");
    let cached = discovery(Dialect::Pi, td.path()).with_list_cache(&cache_dir, 0);
    for i in 0..session_discovery::MAX_CACHE_FILES + 5 {
        let dir = td.path().join(format!("s{i}"));
        let text = lines(&[header("a", "2026-01-01T00:00:00.000Z", "/tmp"), user("u1", "hi", 1000)]);
        write(&dir.join("2026-01-01T00-00-00-000Z_a.jsonl"), &text, 1_700_000_000_000);
        assert_eq!(list(&cached, &dir).len(), 1);
    }
    assert_eq!(cache_files(&cache_dir).len(), session_discovery::MAX_CACHE_FILES);
}

#[test]
fn small_listings_skip_the_cache() {
    let td = TempDir::new("cache-small");
    let dir = td.path().join("s");
    let text = lines(&[header("a", "2026-01-01T00:00:00.000Z", "/tmp"), user("u1", "hi", 1000)]);
    write(&dir.join("2026-01-01T00-00-00-000Z_a.jsonl"), &text, 1_700_000_000_000);
    let cached = discovery(Dialect::Pi, td.path()).with_list_cache(td.path().join("cache"), 2);
    assert_eq!(list(&cached, &dir).len(), 1);
    assert!(cache_files(&td.path().join("cache")).is_empty());
}
