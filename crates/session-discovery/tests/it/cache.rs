//! The listing cache (`src/cache.rs`): a cached listing always equals a fresh scan.

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use session_discovery::{AgentDirs, Dialect, Discovery, OmpHome, ProcessEnv, SessionInfo};
use session_store::PrivateDir;
use session_store::clock::ManualClock;

use crate::support::{TempDir, header, lines, load_fixture, set_mtime, user, write};

fn discovery(dialect: Dialect, root: &Path) -> Discovery {
    let env = ProcessEnv::new(root.join("home"), root, "/nonexistent-tmp");
    Discovery::new(AgentDirs::for_dialect(dialect, &env, OmpHome::MusePi))
}

/// Opens `dir` as the private folder of a listing cache.
fn private(dir: &Path) -> PrivateDir {
    PrivateDir::open(dir).expect("a private cache folder")
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
    let cached = discovery(dialect, td.path()).with_list_cache(private(&cache_dir), 0);
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
    // The listing's clock says the file was modified just now.
    let now_ms = 1_767_225_600_000;
    write(&f, &text, now_ms);
    let clock = Arc::new(ManualClock::new(now_ms as i64));
    let cached =
        discovery(Dialect::Pi, td.path()).with_clock(clock).with_list_cache(private(&td.path().join("cache")), 0);
    assert_eq!(list(&cached, &dir)[0].first_message, "first");
    // Same size, same mtime: only the change time moves (here; a file system with a
    // coarse clock may not show even that, which is what the racy rule is for). The
    // listing must see the new text either way.
    let same_size = text.replace("first", "other");
    fs_err::write(&f, &same_size).expect("rewrite");
    set_mtime(&f, now_ms);
    assert_eq!(list(&cached, &dir)[0].first_message, "other");
}

/// Returns the time a cache file says it was written at (ns).
fn written_at(file: &Path) -> i64 {
    let bytes = fs_err::read(file).expect("cache");
    let len = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
    let dialect_at = 8 + 4;
    let scope_at = dialect_at + 4 + len(dialect_at);
    let at = scope_at + 4 + len(scope_at);
    i64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// The cache is written at the time of the listing's clock, and the racy window is
/// measured on it: a file modified within `RACY_NS` (2 s) of the time a cache was
/// written is scanned again by the next listing (which writes the cache anew), one
/// modified before is answered from the cache (which stays as it is).
#[test]
fn the_racy_window_is_measured_on_the_listings_clock() {
    const MTIME_MS: i64 = 1_767_225_600_000;
    let td = TempDir::new("cache-clock");
    let dir = td.path().join("s");
    let text = lines(&[header("a", "2026-01-01T00:00:00.000Z", "/tmp"), user("u1", "hi", 1000)]);
    write(&dir.join("2026-01-01T00-00-00-000Z_a.jsonl"), &text, MTIME_MS as u64);
    let cache_dir = td.path().join("cache");
    let clock = Arc::new(ManualClock::new(MTIME_MS + 500));
    let cached = discovery(Dialect::Pi, td.path()).with_clock(clock.clone()).with_list_cache(private(&cache_dir), 0);
    let fresh = list(&discovery(Dialect::Pi, td.path()), &dir);
    assert_eq!(list(&cached, &dir), fresh);
    let [file] = &cache_files(&cache_dir)[..] else { panic!("one cache file") };
    assert_eq!(written_at(file), (MTIME_MS + 500) * 1_000_000, "written at the clock's time");
    // That cache was written half a second after the file changed: its entry is not
    // trusted.
    clock.set(MTIME_MS + 10_000);
    assert_eq!(list(&cached, &dir), fresh);
    assert_eq!(written_at(file), (MTIME_MS + 10_000) * 1_000_000, "the racy entry was scanned again");
    // This one ten seconds after: it is.
    clock.set(MTIME_MS + 20_000);
    assert_eq!(list(&cached, &dir), fresh);
    assert_eq!(written_at(file), (MTIME_MS + 10_000) * 1_000_000, "answered from the cache, not written");
}

#[test]
fn the_cache_directory_stays_bounded() {
    let td = TempDir::new("cache-bounded");
    let cache_dir = td.path().join("cache");
    let cached = discovery(Dialect::Pi, td.path()).with_list_cache(private(&cache_dir), 0);
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
    let cached = discovery(Dialect::Pi, td.path()).with_list_cache(private(&td.path().join("cache")), 2);
    assert_eq!(list(&cached, &dir).len(), 1);
    assert!(cache_files(&td.path().join("cache")).is_empty());
}

/// A listing directory of sessions whose texts need escaping in JSON (quotes,
/// backslashes, newlines, control characters), listed once through a cache in
/// `<root>/cache`; returns the directory, the cache file and the listing without a
/// cache, as JSON.
fn escaped_listing(root: &Path, dialect: Dialect) -> (std::path::PathBuf, std::path::PathBuf, String) {
    let dir = root.join("s");
    let texts = [
        r#"say \"hi\" and C:\\path"#,
        r#"two\nlines\tand a \u0001 control"#,
        "plain words here",
        r#"quote \" at the end \""#,
    ];
    for (i, text) in texts.iter().enumerate() {
        let name = format!("2026-01-0{}T00-00-00-000Z_s{i}.jsonl", i + 1);
        let body = lines(&[
            header(&format!("s{i}"), "2026-01-01T00:00:00.000Z", "/tmp"),
            user(&format!("u{i}"), text, 1_767_225_600_000 + i as u64),
            crate::support::assistant(&format!("a{i}"), &format!("answer {i}: {text}"), 1_767_225_601_000, "stop"),
        ]);
        write(&dir.join(name), &body, 1_700_000_000_000 + i as u64);
    }
    let plain = session_discovery::sessions_to_json(dialect, &list(&discovery(dialect, root), &dir));
    let cached = discovery(dialect, root).with_list_cache(private(&root.join("cache")), 0);
    assert_eq!(session_discovery::sessions_to_json(dialect, &list(&cached, &dir)), plain, "filled");
    let [file] = &cache_files(&root.join("cache"))[..] else { panic!("one cache file") };
    (dir, file.clone(), plain)
}

/// Lists `dir` through the cache in `<root>/cache` and returns the listing as JSON.
fn cached_json(root: &Path, dialect: Dialect, dir: &Path) -> String {
    let cached = discovery(dialect, root).with_list_cache(private(&root.join("cache")), 0);
    session_discovery::sessions_to_json(dialect, &list(&cached, dir))
}

/// The cache folder is created 0700 and its files 0600.
#[cfg(unix)]
#[test]
fn the_cache_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let td = TempDir::new("cache-private");
    let (_, file, _) = escaped_listing(td.path(), Dialect::Pi);
    let mode = |p: &Path| fs_err::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&td.path().join("cache")), 0o700);
    assert_eq!(mode(&file), 0o600);
}

/// A link planted where the cache file goes is neither read nor written through: the
/// file it names keeps its bytes, and the listing is what it is without a cache.
#[cfg(unix)]
#[test]
fn a_link_at_the_cache_path_is_not_followed() {
    let td = TempDir::new("cache-link");
    let (dir, file, plain) = escaped_listing(td.path(), Dialect::Pi);
    let target = td.path().join("elsewhere.bin");
    // Someone else's copy of a valid cache: read through the link it would answer.
    fs_err::copy(&file, &target).expect("copy");
    let before = fs_err::read(&target).expect("target");
    fs_err::remove_file(&file).expect("rm");
    std::os::unix::fs::symlink(&target, &file).expect("link");
    assert_eq!(cached_json(td.path(), Dialect::Pi, &dir), plain);
    assert_eq!(fs_err::read(&target).expect("target"), before, "the link's target is unchanged");
    assert!(!fs_err::symlink_metadata(&file).expect("cache").file_type().is_symlink(), "replaced by a file");
}

/// The text `","path":"/tmp/EVIL","x":"` written over a cached message text: the
/// listing printed as JSON is still the one without a cache (one `path` per session).
/// (A cache whose hashes were made to match such a text is refused too: the unit
/// tests of `src/cache.rs`.)
#[test]
fn a_text_overwritten_to_inject_json_is_never_copied() {
    const EVIL: &[u8] = br#"","path":"/tmp/EVIL","x":""#;
    let td = TempDir::new("cache-evil");
    let (dir, file, plain) = escaped_listing(td.path(), Dialect::Pi);
    let good = fs_err::read(&file).expect("cache");
    // The last copy: the message texts follow the records.
    let text = b"plain words here answer 2: plain words here";
    let at = good.windows(text.len()).rposition(|w| w == text).expect("a cached text");
    let mut evil = good.clone();
    evil[at..at + EVIL.len()].copy_from_slice(EVIL);
    fs_err::write(&file, &evil).expect("overwrite");
    let json = cached_json(td.path(), Dialect::Pi, &dir);
    assert_eq!(json, plain);
    let parsed: Vec<serde_json::Value> = serde_json::from_str(&json).expect("valid JSON");
    assert!(parsed.iter().all(|s| s["path"].as_str().is_some_and(|p| !p.contains("EVIL"))));
    assert_eq!(json.matches(r#""path":"#).count(), parsed.len(), "one path per session");
}

/// A cache whose header claims a record section of a terabyte (a sparse file of that
/// size) is ignored without allocating it: the listing is the one without a cache.
#[test]
fn a_cache_claiming_a_huge_size_is_ignored() {
    let td = TempDir::new("cache-huge");
    let (dir, file, plain) = escaped_listing(td.path(), Dialect::Pi);
    let mut bytes = fs_err::read(&file).expect("cache");
    let len = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
    let dialect_at = 8 + 4;
    let scope_at = dialect_at + 4 + len(dialect_at);
    let records_end_at = scope_at + 4 + len(scope_at) + 8;
    let huge: u64 = 1 << 40;
    bytes[records_end_at..records_end_at + 8].copy_from_slice(&huge.to_le_bytes());
    bytes[records_end_at + 8..records_end_at + 16].copy_from_slice(&huge.to_le_bytes());
    fs_err::write(&file, &bytes).expect("overwrite");
    fs_err::OpenOptions::new().write(true).open(&file).expect("open").set_len(huge).expect("a sparse file");
    assert_eq!(cached_json(td.path(), Dialect::Pi, &dir), plain);
}

/// A mutation of a cache file.
#[derive(Clone, Debug)]
enum Mutation {
    /// Flips bit `1` of the byte at `0` (modulo the length).
    Flip(usize, u8),
    /// Writes the bytes at the offset.
    Overwrite(usize, Vec<u8>),
    /// Writes `","path":"/tmp/EVIL","x":"` at the offset.
    Evil(usize),
    /// Cuts the file to this length (modulo the length).
    Truncate(usize),
    /// Appends the bytes.
    Append(Vec<u8>),
}

fn mutate(bytes: &mut Vec<u8>, m: &Mutation) {
    let len = bytes.len().max(1);
    let mut put = |at: usize, b: &[u8]| {
        let at = at % len;
        let end = (at + b.len()).min(bytes.len());
        bytes[at..end].copy_from_slice(&b[..end - at]);
    };
    match m {
        Mutation::Flip(at, bit) => {
            let at = at % len;
            if let Some(b) = bytes.get_mut(at) {
                *b ^= 1 << (bit % 8);
            }
        }
        Mutation::Overwrite(at, b) => put(*at, b),
        Mutation::Evil(at) => put(*at, br#"","path":"/tmp/EVIL","x":""#),
        Mutation::Truncate(n) => bytes.truncate(n % len),
        Mutation::Append(b) => bytes.extend_from_slice(b),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]

    /// Whatever happens to the bytes of a cache file (bits flipped, bytes overwritten,
    /// JSON written over a text, cut short, grown), a listing through it prints what
    /// a listing without a cache prints, and so does the next one.
    #[test]
    fn a_damaged_cache_never_changes_a_listing(
        dialect in proptest::sample::select(vec![Dialect::Pi, Dialect::Omp]),
        mutations in proptest::collection::vec(proptest::prop_oneof![
            (proptest::num::usize::ANY, 0u8..8).prop_map(|(a, b)| Mutation::Flip(a, b)),
            (proptest::num::usize::ANY, proptest::collection::vec(proptest::num::u8::ANY, 1..12))
                .prop_map(|(a, b)| Mutation::Overwrite(a, b)),
            proptest::num::usize::ANY.prop_map(Mutation::Evil),
            proptest::num::usize::ANY.prop_map(Mutation::Truncate),
            proptest::collection::vec(proptest::num::u8::ANY, 1..40).prop_map(Mutation::Append),
        ], 1..4),
    ) {
        let td = TempDir::new("cache-mutations");
        let (dir, file, plain) = escaped_listing(td.path(), dialect);
        let mut bytes = fs_err::read(&file).expect("cache");
        for m in &mutations {
            mutate(&mut bytes, m);
        }
        fs_err::write(&file, &bytes).expect("mutated");
        prop_assert_eq!(cached_json(td.path(), dialect, &dir), plain.clone(), "{:?}", mutations);
        prop_assert_eq!(cached_json(td.path(), dialect, &dir), plain, "rewritten");
    }
}
