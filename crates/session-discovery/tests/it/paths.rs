//! cwd encodings and file naming (`src/paths.rs`).

use proptest::prelude::*;
use session_discovery::{
    encode_cwd_omp, encode_cwd_omp_canonical, encode_cwd_pi, hashed_bucket_name, legacy_absolute_bucket, resolve,
    resolve_path, session_file_name, session_id_from_file_name,
};

use crate::support::TempDir;

#[test]
fn pi_examples_from_the_spec() {
    let cases = [
        ("/home/user/project", "--home-user-project--"),
        ("/", "----"),
        ("/tmp/a:b", "--tmp-a-b--"),
        ("/home/u/my.proj/", "--home-u-my.proj--"),
        ("/home/u/with space", "--home-u-with space--"),
        ("//double//slash", "--double-slash--"),
        ("/a\\b", "--a-b--"),
        ("/home/ü/日本語", "--home-ü-日本語--"),
        ("C:\\Users\\me\\proj", "--C--Users-me-proj--"),
        ("C:/Users/me/proj/", "--C--Users-me-proj--"),
    ];
    for (cwd, want) in cases {
        assert_eq!(encode_cwd_pi(cwd), want, "{cwd}");
    }
}

#[test]
fn pi_relative_and_tilde_through_env() {
    let env = session_discovery::ProcessEnv::new("/root", "/home/user/work", "/tmp");
    let dirs = session_discovery::AgentDirs::pi(&env);
    assert_eq!(dirs.bucket_name("rel/dir"), "--home-user-work-rel-dir--");
    assert_eq!(dirs.bucket_name("~/x"), "--root-x--");
    assert_eq!(dirs.bucket_name("../up/./z"), "--home-user-up-z--");
}

#[test]
fn resolve_like_node() {
    assert_eq!(resolve("/base", "a/../b/./c/"), "/base/b/c");
    assert_eq!(resolve("/base", "/x//y/"), "/x/y");
    assert_eq!(resolve("/base", "/.."), "/");
    assert_eq!(resolve("/base", "C:\\a\\..\\b"), "C:\\b");
}

#[test]
fn omp_examples_from_the_spec() {
    let h = "/home/u";
    let t = "/tmp";
    assert_eq!(encode_cwd_omp_canonical("/home/u", h, t), "-");
    assert_eq!(encode_cwd_omp_canonical("/home/u/proj", h, t), "-proj");
    assert_eq!(encode_cwd_omp_canonical("/home/u/a b/ü:x", h, t), "-a b-ü-x");
    assert_eq!(encode_cwd_omp_canonical("/tmp", h, t), "-tmp");
    assert_eq!(encode_cwd_omp_canonical("/tmp/x/y", h, t), "-tmp-x-y");
    assert_eq!(encode_cwd_omp_canonical("/", h, t), "----");
    assert_eq!(encode_cwd_omp_canonical("/srv/p", h, t), "--srv-p--");
    assert_eq!(encode_cwd_omp_canonical("C:\\x", "C:\\Users\\me", "C:\\Temp"), "--C--x--");
    assert_eq!(encode_cwd_omp_canonical("C:\\Users\\me\\p", "C:\\Users\\me", "C:\\Temp"), "-p");
    // Home is tested before tmp: a temp root inside home is home-scoped.
    assert_eq!(encode_cwd_omp_canonical("/home/u/tmp/x", h, "/home/u/tmp"), "-tmp-x");
    // A child whose relative path starts with `..` is treated as outside home.
    assert_eq!(encode_cwd_omp_canonical("/home/u/..foo", h, t), "--home-u-..foo--");
    // A sibling sharing a prefix is not inside.
    assert_eq!(encode_cwd_omp_canonical("/home/user2", h, t), "--home-user2--");
}

#[cfg(unix)]
#[test]
fn omp_resolves_symlinks() {
    let td = TempDir::new("symlink");
    let real = td.path().join("real");
    fs_err::create_dir_all(real.join("proj")).unwrap();
    let link = td.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let home = link.to_string_lossy().into_owned();
    let via_link = format!("{home}/proj/");
    assert_eq!(encode_cwd_omp(&via_link, &home, "/nonexistent-tmp"), "-proj");
    let via_real = real.join("proj").to_string_lossy().into_owned();
    assert_eq!(encode_cwd_omp(&via_real, &home, "/nonexistent-tmp"), "-proj");
}

#[test]
fn legacy_and_hashed_names() {
    assert_eq!(legacy_absolute_bucket("/tmp/x"), "--tmp-x--");
    let n = hashed_bucket_name("/home/u/My Project!!", "/home/u", "/tmp");
    assert!(n.starts_with("home-My-Project-"), "{n}");
    assert_eq!(n.len(), "home-My-Project-".len() + 64);
    assert!(hashed_bucket_name("/", "/home/u", "/tmp").starts_with("abs-project-"));
    assert!(hashed_bucket_name("/tmp/a", "/home/u", "/tmp").starts_with("tmp-a-"));
    let long = format!("/srv/{}", "x".repeat(100));
    let n = hashed_bucket_name(&long, "/home/u", "/tmp");
    assert_eq!(n, format!("abs-{}-{}", "x".repeat(80), &n[n.len() - 64..]));
}

#[test]
fn file_names() {
    assert_eq!(session_file_name("2026-02-16T10:20:30.000Z", "id-1"), "2026-02-16T10-20-30-000Z_id-1.jsonl");
    assert_eq!(session_id_from_file_name("2026-02-16T10-20-30-000Z_a_b.jsonl"), Some("b"));
    assert_eq!(session_id_from_file_name("_x.jsonl"), None);
    assert_eq!(session_id_from_file_name("x.json"), None);
}

proptest! {
    #[test]
    fn pi_encoding_has_no_separators(cwd in "[/a-zA-Z0-9 .:\\\\ü-]{0,40}") {
        let e = encode_cwd_pi(&format!("/{cwd}"));
        prop_assert!(e.starts_with("--") && e.ends_with("--"));
        prop_assert!(!e.contains(['/', '\\', ':']));
    }

    #[test]
    fn resolve_is_idempotent(p in "[/a-z.]{0,30}") {
        let once = resolve("/b", &p);
        prop_assert_eq!(resolve("/b", &once), once.clone());
        prop_assert!(once.starts_with('/'));
        prop_assert!(once == "/" || !once.ends_with('/'));
    }

    #[test]
    fn omp_encoding_has_no_separators(rel in "[a-z/ ]{0,30}") {
        let e = encode_cwd_omp_canonical(&resolve("/", &format!("/home/u/{rel}")), "/home/u", "/tmp");
        prop_assert!(e.starts_with('-'));
        prop_assert!(!e.contains(['/', '\\', ':']));
    }
}

proptest! {
    /// The path form of `path.resolve` gives what the text form gives for POSIX paths
    /// (segments of names, `.`, `..` and empty ones; absolute or relative; any base).
    #[test]
    fn resolve_path_is_resolve_for_posix_paths(
        base in proptest::collection::vec(prop_oneof!["[a-z\\\\é]{1,3}", Just(".".to_owned()), Just("..".to_owned()), Just(String::new())], 0..5),
        p in proptest::collection::vec(prop_oneof!["[a-zé]{1,3}", Just(".".to_owned()), Just("..".to_owned()), Just(String::new())], 0..6),
        absolute in any::<bool>(),
    ) {
        let base = format!("/{}", base.join("/"));
        let p = format!("{}{}", if absolute { "/" } else { "" }, p.join("/"));
        let text = resolve(&base, &p);
        let path = resolve_path(std::path::Path::new(&base), std::path::Path::new(&p));
        prop_assert_eq!(path.to_str(), Some(text.as_str()), "{:?} {:?}", base, p);
    }
}

/// A name that is not UTF-8 keeps its bytes (the text form cannot hold it).
#[cfg(unix)]
#[test]
fn resolve_path_keeps_names_that_are_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9");
    let got = resolve_path(std::path::Path::new("/work/x"), &std::path::Path::new("..").join(name));
    assert_eq!(got.as_os_str().as_bytes(), b"/work/caf\xe9");
}
