//! The command's caches (`src/cache.rs`): the listing cache, the session indexes and
//! the search catalog live in a folder that is the user's alone, are written 0600
//! without following links, are never trusted when damaged, and a cache folder that
//! is not private is passed over with a warning while the command still answers.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Result, TempDir, in_home, outcome};

/// Sessions for `ls` to list through its cache (it keeps none for fewer than 64).
const SESSIONS: usize = 70;

/// A home with `SESSIONS` pi sessions and one large one (the session index is kept
/// for files of 4 MiB and more), and a cache home of its own.
struct Setup {
    tmp: TempDir,
}

impl Setup {
    fn new(tag: &str) -> Result<Setup> {
        let tmp = TempDir::try_new(tag)?;
        let bucket = tmp.path().join("home/.pi/agent/sessions/--p--");
        fs_err::create_dir_all(&bucket)?;
        for i in 0..SESSIONS {
            let text = format!(r#"note {i}: say \"hi\" to C:\\path\nand the zebra"#);
            let body = format!(
                "{{\"type\":\"session\",\"version\":3,\"id\":\"s{i:03}\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/p\"}}\n\
                 {{\"type\":\"message\",\"id\":\"u{i:03}\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"{text}\",\"timestamp\":{}}}}}\n",
                1_767_225_601_000u64 + i as u64
            );
            let file = bucket.join(format!("2026-01-01T00-00-{:02}-000Z_s{i:03}.jsonl", i % 60));
            fs_err::write(&file, body)?;
            // Settled long before the cache is written: the cache answers for it.
            let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000 + i as u64);
            fs_err::OpenOptions::new().write(true).open(&file)?.file().set_modified(old)?;
        }
        let mut big = String::from(
            "{\"type\":\"session\",\"version\":3,\"id\":\"big\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/q\"}\n",
        );
        let words = "words of a long conversation ".repeat(40);
        for i in 0..4000 {
            let parent = if i == 0 { "null".to_owned() } else { format!("\"e{:05}\"", i - 1) };
            big.push_str(&format!(
                "{{\"type\":\"message\",\"id\":\"e{i:05}\",\"parentId\":{parent},\"timestamp\":\"2026-01-01T00:00:02.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"{words}{i}\",\"timestamp\":1}}}}\n"
            ));
        }
        assert!(big.len() > 4 << 20);
        fs_err::write(tmp.path().join("big.jsonl"), big)?;
        Ok(Setup { tmp })
    }

    fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    /// `$XDG_CACHE_HOME`.
    fn cache_home(&self) -> PathBuf {
        self.tmp.path().join("xdg-cache")
    }

    /// The command's cache folder.
    fn cache(&self) -> PathBuf {
        self.cache_home().join("session-store")
    }

    fn big(&self) -> PathBuf {
        self.tmp.path().join("big.jsonl")
    }

    /// Runs `session ARGS` with this home and cache home, caches on; returns (exit
    /// code, stdout, stderr).
    fn run(&self, args: &[&str]) -> Result<(i32, String, String)> {
        let mut c = in_home(&self.home(), self.tmp.path());
        c.env("XDG_CACHE_HOME", self.cache_home()).env_remove("SESSION_NO_CACHE").env_remove("XDG_RUNTIME_DIR");
        outcome(c.args(args))
    }

    /// Runs a command that must succeed; returns its stdout and stderr.
    fn ok(&self, args: &[&str]) -> Result<(String, String)> {
        let (code, out, err) = self.run(args)?;
        if code != 0 {
            return Err(format!("session {args:?} exited {code}: {err}").into());
        }
        Ok((out, err))
    }

    /// `ls` of every pi session, as JSON, through the cache (or not).
    fn ls(&self, cache: bool) -> Result<(String, String)> {
        let mut args = vec!["--dialect", "pi", "--json", "ls", "--all"];
        if !cache {
            args.push("--no-cache");
        }
        self.ok(&args)
    }

    /// `info` of the large session (through its index, when there is one).
    fn info(&self) -> Result<(String, String)> {
        let big = self.big();
        let big = big.to_str().ok_or("utf-8 path")?.to_owned();
        self.ok(&["--dialect", "pi", "--json", "info", &big])
    }

    /// `search zebra` in every project, as JSON; returns the hit count and stderr.
    fn search(&self) -> Result<(usize, String)> {
        let (out, err) = self.ok(&["--dialect", "pi", "--json", "search", "zebra", "--all", "--limit", "1000"])?;
        let hits: serde_json::Value = serde_json::from_str(&out)?;
        let n = hits.as_array().map(Vec::len).or_else(|| hits["hits"].as_array().map(Vec::len));
        Ok((n.ok_or(format!("no hits in {out}"))?, err))
    }

    /// Writes text over a message text in the listing cache so that, were it believed,
    /// it would add a key to the JSON `ls` prints; returns the cache file and its bytes.
    fn damage_a_cached_text(&self) -> Result<(PathBuf, Vec<u8>)> {
        const EVIL: &[u8] = br#"","path":"/tmp/EVIL","x":""#;
        let file = self.cache_file(&self.cache(), "list-")?;
        let mut bytes = fs_err::read(&file)?;
        let text = br#"note 7: say \"hi\" to C:\\path\nand the zebra"#;
        let at = bytes.windows(text.len()).rposition(|w| w == text).ok_or("a cached text")?;
        bytes[at..at + EVIL.len()].copy_from_slice(EVIL);
        fs_err::write(&file, &bytes)?;
        Ok((file, bytes))
    }

    /// The one file of the cache folder whose name starts with `prefix`.
    fn cache_file(&self, dir: &Path, prefix: &str) -> Result<PathBuf> {
        let found: Vec<PathBuf> = fs_err::read_dir(dir)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix)))
            .collect();
        match &found[..] {
            [one] => Ok(one.clone()),
            _ => Err(format!("{} files named {prefix}* in {}", found.len(), dir.display()).into()),
        }
    }
}

fn mode(path: &Path) -> Result<u32> {
    Ok(fs_err::symlink_metadata(path)?.permissions().mode() & 0o777)
}

/// A file's state: its path, length, a hash of its bytes (of its target's name, for a
/// link) and its mode (0 for a link).
type FileState = (PathBuf, usize, u64, u32);

/// Returns a 64-bit FNV-1a hash of `bytes`.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// The state of the file (or link) at `p`.
fn file_state(p: &Path) -> Result<FileState> {
    let m = fs_err::symlink_metadata(p)?;
    Ok(if m.file_type().is_symlink() {
        let target = fs_err::read_link(p)?.into_os_string().into_encoded_bytes();
        (p.to_path_buf(), target.len(), fnv(&target), 0)
    } else {
        let bytes = fs_err::read(p)?;
        (p.to_path_buf(), bytes.len(), fnv(&bytes), m.mode())
    })
}

/// Every file below `dir` with its state.
fn tree(dir: &Path) -> Result<Vec<FileState>> {
    let mut out = Vec::new();
    for e in fs_err::read_dir(dir)? {
        let p = e?.path();
        if fs_err::symlink_metadata(&p)?.is_dir() {
            out.extend(tree(&p)?);
        } else {
            out.push(file_state(&p)?);
        }
    }
    out.sort();
    Ok(out)
}

/// The cache folder (and the missing cache home above it) is made 0700, every cache
/// file 0600, and a listing through the cache prints what one without it prints.
#[test]
fn the_caches_are_private() -> Result<()> {
    let s = Setup::new("cache-private")?;
    let (plain, _) = s.ls(false)?;
    let (cached, err) = s.ls(true)?;
    assert_eq!(cached, plain);
    assert!(err.is_empty(), "{err}");
    assert_eq!(s.ls(true)?.0, plain, "read from the cache");
    let (info, _) = s.info()?;
    assert_eq!(s.info()?.0, info, "read from the index");
    assert_eq!(s.search()?.0, SESSIONS);
    assert_eq!(mode(&s.cache_home())?, 0o700);
    assert_eq!(mode(&s.cache())?, 0o700);
    assert_eq!(mode(&s.cache().join("index"))?, 0o700);
    let files = tree(&s.cache())?;
    assert!(files.iter().any(|(p, ..)| p.extension().is_some_and(|e| e == "bin")), "a listing cache");
    assert!(files.iter().any(|(p, ..)| p.extension().is_some_and(|e| e == "idx")), "a session index");
    assert!(files.iter().any(|(p, ..)| p.ends_with("search.db")), "a search catalog");
    for (path, _, _, mode) in &files {
        assert_eq!(mode & 0o777, 0o600, "{}", path.display());
    }
    Ok(())
}

/// A cache folder that is not the user's alone (others may write it, another user owns
/// it, it is a link to a folder of ours) is never used: every command still answers as
/// it does without caches, says why on stderr, and leaves the folder as it was.
#[test]
fn a_cache_folder_that_is_not_private_is_passed_over() -> Result<()> {
    let probe = TempDir::try_new("cache-uid")?;
    let root = fs_err::metadata(probe.path())?.uid() == 0;
    let mut cases = vec!["group-writable", "world-writable", "link"];
    if root {
        cases.push("foreign");
    } else {
        println!(
            "skipped: a_cache_folder_that_is_not_private_is_passed_over (foreign owner): needs root to give a folder away"
        );
    }
    for case in cases {
        let s = Setup::new(&format!("cache-refused-{case}"))?;
        let (plain, _) = s.ls(false)?;
        let (info, _) = s.info()?;
        // `info` made the cache folder: start without one.
        fs_err::remove_dir_all(s.cache_home())?;
        fs_err::create_dir_all(s.cache_home())?;
        let elsewhere = s.tmp.path().join("elsewhere");
        match case {
            "group-writable" | "world-writable" | "foreign" => {
                fs_err::create_dir(s.cache())?;
                let mode = if case == "world-writable" { 0o777 } else { 0o770 };
                fs_err::set_permissions(s.cache(), std::fs::Permissions::from_mode(mode))?;
                if case == "foreign" {
                    fs_err::set_permissions(s.cache(), std::fs::Permissions::from_mode(0o700))?;
                    std::os::unix::fs::chown(s.cache(), Some(65534), Some(65534))?;
                }
            }
            _ => {
                fs_err::create_dir(&elsewhere)?;
                fs_err::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o700))?;
                std::os::unix::fs::symlink(&elsewhere, s.cache())?;
            }
        }
        let (cached, err) = s.ls(true)?;
        assert_eq!(cached, plain, "{case}");
        assert!(err.contains("warning: running without the cache"), "{case}: {err}");
        assert!(err.contains("session-store"), "{case}: the folder is named: {err}");
        assert_eq!(err.matches("warning").count(), 1, "{case}: one warning: {err}");
        assert_eq!(s.info()?.0, info, "{case}");
        let (hits, err) = s.search()?;
        assert_eq!(hits, SESSIONS, "{case}: search answers without its catalog");
        assert!(err.contains("warning: running without the cache"), "{case}: {err}");
        let looked_at = if case == "link" { elsewhere } else { s.cache() };
        assert!(tree(&looked_at)?.is_empty(), "{case}: nothing written in {}", looked_at.display());
        assert!(!looked_at.join("index").exists(), "{case}");
        if case == "foreign" {
            assert_eq!(fs_err::metadata(s.cache())?.uid(), 65534, "left as it was");
        }
    }
    Ok(())
}

/// A link planted where a cache file goes (the listing cache, a session index, the
/// search catalog) is neither read nor written through: the files they name keep
/// their bytes, and every command answers as before.
#[test]
fn links_planted_at_cache_files_are_not_followed() -> Result<()> {
    let s = Setup::new("cache-links")?;
    let (plain, _) = s.ls(true)?;
    let (info, _) = s.info()?;
    s.search()?;
    let planted = [
        s.cache_file(&s.cache(), "list-")?,
        s.cache_file(&s.cache().join("index"), "pi-")?,
        s.cache().join("search.db"),
    ];
    for (i, path) in planted.iter().enumerate() {
        for companion in ["-wal", "-shm"] {
            let mut p = path.clone().into_os_string();
            p.push(companion);
            let _ = fs_err::remove_file(PathBuf::from(p));
        }
        // A copy of the real file: followed, the link would answer as the cache does.
        let target = s.tmp.path().join(format!("target-{i}"));
        fs_err::copy(path, &target)?;
        fs_err::remove_file(path)?;
        std::os::unix::fs::symlink(&target, path)?;
    }
    let targets = || -> Result<Vec<FileState>> {
        (0..planted.len()).map(|i| file_state(&s.tmp.path().join(format!("target-{i}")))).collect()
    };
    let targets_before = targets()?;
    let (out, err) = s.ls(true)?;
    assert_eq!(out, plain);
    assert!(err.is_empty(), "{err}");
    assert_eq!(s.info()?.0, info);
    let (hits, err) = s.search()?;
    assert_eq!(hits, SESSIONS);
    assert!(err.contains("warning") && err.contains("search.db") && err.contains("symbolic link"), "{err}");
    assert_eq!(targets()?, targets_before, "the links' targets are unchanged");
    // The listing cache and the index were replaced by files of their own; the link at
    // the catalog's path is left for the user to remove.
    for path in &planted[..2] {
        assert!(!fs_err::symlink_metadata(path)?.file_type().is_symlink(), "{}", path.display());
        assert_eq!(mode(path)?, 0o600);
    }
    assert!(fs_err::symlink_metadata(&planted[2])?.file_type().is_symlink());
    Ok(())
}

/// Another program's SQLite database at the catalog's path (here omp's prompt
/// history) is not taken for a catalog: no table is added, its `user_version` stays,
/// the command says what to do and still answers.
#[test]
fn a_foreign_database_at_the_catalog_path_is_left_alone() -> Result<()> {
    let s = Setup::new("cache-foreign-db")?;
    let catalog = s.cache().join("search.db");
    fs_err::create_dir_all(s.cache())?;
    fs_err::set_permissions(s.cache(), std::fs::Permissions::from_mode(0o700))?;
    let opened = session::history::HistoryStore::open(&catalog, session::history::HistoryOptions::default())?;
    opened.store.add("a prompt of someone's", Some("/p"), None)?;
    drop(opened);
    let before = tree(&s.cache())?;
    let user_version = || -> Result<String> {
        let out =
            Command::new("sqlite3").arg(&catalog).arg("PRAGMA user_version; SELECT name FROM sqlite_master;").output();
        Ok(out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default())
    };
    let schema = user_version()?;
    let (hits, err) = s.search()?;
    assert_eq!(hits, SESSIONS, "the search answers");
    assert!(err.contains("is not a search catalog") && err.contains("remove it"), "{err}");
    assert!(err.contains("XDG_CACHE_HOME"), "says where else the catalog may go: {err}");
    assert_eq!(tree(&s.cache())?, before, "the database is unchanged");
    assert_eq!(user_version()?, schema);
    Ok(())
}

/// Text written over a message text in the listing cache so that it would add a key
/// to the JSON `ls` prints: the listing is the one without a cache.
#[test]
fn a_damaged_listing_cache_never_changes_ls() -> Result<()> {
    let s = Setup::new("cache-evil")?;
    let (plain, _) = s.ls(false)?;
    assert_eq!(s.ls(true)?.0, plain);
    s.damage_a_cached_text()?;
    let (out, _) = s.ls(true)?;
    assert_eq!(out, plain);
    let parsed: serde_json::Value = serde_json::from_str(&out)?;
    assert!(!out.contains("EVIL"), "{parsed}");
    Ok(())
}

/// A table of sessions reads no message text from the listing cache: a damaged text is
/// not even looked at (the cache stays as it is), while a listing that prints the texts
/// finds the damage, scans that file again and mends the cache.
#[test]
fn a_table_listing_reads_no_text() -> Result<()> {
    let s = Setup::new("cache-table")?;
    let (plain, _) = s.ls(false)?;
    assert_eq!(s.ls(true)?.0, plain);
    let (file, bytes) = s.damage_a_cached_text()?;
    let (table, _) = s.ok(&["--dialect", "pi", "--text", "ls", "--all"])?;
    assert!(table.contains(&format!("{SESSIONS} session(s)")) && !table.contains("EVIL"), "{table}");
    assert!(fs_err::read(&file)? == bytes, "the table read no text: the cache is as it was");
    assert_eq!(s.ls(true)?.0, plain);
    assert!(fs_err::read(&file)? != bytes, "the listing with texts mended the cache");
    Ok(())
}
