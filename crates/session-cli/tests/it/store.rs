//! The command on real servers: `push` a session with its artifacts, inspect it with
//! `--store`, `pull` it back, and compare every byte.
//!
//! Each test makes its own PostgreSQL database, Redis key prefix or S3 key prefix and
//! removes it at the end. Without a reachable server a test prints `skipped: <test>: <reason>` and passes,
//! unless `SESSION_REQUIRE_SERVERS=1`, where it fails.
#![cfg_attr(
    not(all(feature = "postgres", feature = "redis", feature = "sqlite", feature = "mysql", feature = "s3")),
    allow(dead_code, reason = "the helpers of a backend built without its feature")
)]

use std::path::{Path, PathBuf};
use std::process::Output;

use rand::Rng;
use session_testkit::mysql::TestDb as MysqlDb;
use session_testkit::postgres::TestDb;
use session_testkit::redis::TestPrefix;

use crate::{Result, TempDir, bin, next_line, spawn_lines, stdout};

/// Runs `session ARGS` and returns its output, whatever the status.
fn run(args: &[&str], cwd: &Path) -> Result<Output> {
    Ok(bin(cwd).args(args).output()?)
}

/// Runs `session ARGS`, which must succeed, and returns its standard output.
fn ok(args: &[&str], cwd: &Path) -> Result<String> {
    stdout(bin(cwd).args(args))
}

/// Reports a skipped test; an error when the servers are required.
fn skip(test: &str, reason: &str) -> Result<()> {
    session_testkit::servers::skip::<()>(test, reason)?;
    Ok(())
}

/// Copies a testdata session and gives it an artifacts directory with a nested file.
fn sample(dir: &Path, name: &str) -> Result<PathBuf> {
    let file = dir.join(format!("{name}.jsonl"));
    fs_err::copy(session_testkit::testdata().join(format!("sample/{name}.jsonl")), &file)?;
    let artifacts = dir.join(name);
    fs_err::create_dir_all(artifacts.join("sub"))?;
    fs_err::write(artifacts.join("0.log"), "tool output\n")?;
    fs_err::write(artifacts.join("sub/.1.log"), "nested, hidden\n")?;
    Ok(file)
}

/// Pushes both samples to `url`, inspects them there as on files, pulls them back and
/// compares every byte; then checks the overwrite rules. A pull names the session by
/// the URL `pull_url` gives, or (`None`) by its path with `--store url`.
fn round_trip(url: &str, pull_url: Option<&dyn Fn(&Path) -> String>, tag: &str) -> Result<()> {
    let tmp = TempDir::try_new(tag)?;
    let (src, back) = (tmp.path().join("src"), tmp.path().join("back"));
    fs_err::create_dir_all(&src)?;
    fs_err::create_dir_all(&back)?;
    for name in ["pi", "omp"] {
        let file = sample(&src, name)?;
        let f = file.to_str().ok_or("utf-8 path")?;
        let pushed: serde_json::Value = serde_json::from_str(&ok(&["push", f, "--to", url], tmp.path())?)?;
        assert_eq!(pushed["artifacts"], 2, "{name}: {pushed}");
        assert_eq!(pushed["bytes"], fs_err::metadata(&file)?.len(), "{name}: {pushed}");
        let dir = src.to_str().ok_or("utf-8 path")?;
        for (cmd, at) in [("info", f), ("context", f), ("entries", f), ("tree", f), ("stats", dir), ("fsck", dir)] {
            let there = ok(&[cmd, at, "--json", "--store", url], tmp.path())?;
            assert_eq!(there, ok(&[cmd, at, "--json"], tmp.path())?, "{name}: {cmd} on the server and on files");
        }
        let (source, to) = (pull_url.map(|u| u(&file)), back.to_str().ok_or("utf-8 path")?);
        let pull = match &source {
            Some(u) => vec!["pull", u, "--to", to],
            None => vec!["--store", url, "pull", f, "--to", to],
        };
        let pulled = ok(&pull, tmp.path())?;
        assert!(pulled.contains("\"artifacts\":2"), "{name}: {pulled}");
        assert_eq!(fs_err::read(back.join(format!("{name}.jsonl")))?, fs_err::read(&file)?, "{name}: the session");
        for rel in ["0.log", "sub/.1.log"] {
            assert_eq!(fs_err::read(back.join(name).join(rel))?, fs_err::read(src.join(name).join(rel))?, "{rel}");
        }
        // The same bytes again change nothing; other bytes are refused unless forced.
        let again = ok(&["push", f, "--to", url], tmp.path())?;
        assert!(again.contains("\"unchanged\":true"), "{name}: {again}");
        let mut other = fs_err::read(&file)?;
        other.extend_from_slice(b"{\"type\":\"custom\",\"customType\":\"x\",\"id\":\"ffffffff\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:00.000Z\"}\n");
        fs_err::write(&file, &other)?;
        let refused = run(&["push", f, "--to", url], tmp.path())?;
        assert!(!refused.status.success(), "{name}: a different session is not overwritten");
        assert!(String::from_utf8_lossy(&refused.stderr).contains("--force"), "{name}: the error says what to do");
        ok(&["push", f, "--to", url, "--force"], tmp.path())?;
        ok(&[&pull[..], &["--force"]].concat(), tmp.path())?;
        assert_eq!(fs_err::read(back.join(format!("{name}.jsonl")))?, other, "{name}: the forced copy");
    }
    Ok(())
}

/// Writes, lists, resumes and deletes sessions kept in the agents' homes on the server:
/// `ls`, `resume` and `continue` answer there as on files, and the write commands work
/// through `--store`.
fn agents_on_the_server(url: &str, tag: &str) -> Result<()> {
    let tmp = TempDir::try_new(tag)?;
    let (home, work) = (tmp.path().join("home"), tmp.path().join("work"));
    let [pi, omp] = crate::samples_in_homes(&home, &work)?;
    let run_home = |args: &[&str]| stdout(crate::in_home(&home, &work).args(args));
    let json = |args: &[&str]| -> Result<serde_json::Value> { Ok(serde_json::from_str(&run_home(args)?)?) };
    for file in [&pi, &omp] {
        run_home(&["push", file.to_str().ok_or("utf-8 path")?, "--to", url])?;
    }
    // pi's listing does not depend on the mtime: the whole answer is the same.
    for args in [&["ls", "--dialect", "pi", "--json"][..], &["ls", "--all", "--dialect", "pi", "--json"]] {
        let on_files = run_home(args)?;
        assert!(on_files.contains("2026-01-01T00-00-00-000Z_a.jsonl"), "{on_files}");
        assert_eq!(run_home(&[args, &["--store", url]].concat())?, on_files, "{args:?}");
    }
    // Both agents: the same sessions (omp's `modified` is the server's mtime).
    let listed = json(&["ls", "--all", "--json", "--store", url])?;
    let mut agents: Vec<&str> =
        listed.as_array().ok_or("an array")?.iter().filter_map(|s| s["agent"].as_str()).collect();
    agents.sort_unstable();
    assert_eq!(agents, ["omp", "pi"], "{listed}");
    for query in ["019b76da-a800-7dc3", "019b76da-a800-7d68"] {
        let on_files = json(&["resume", query, "--json"])?;
        let there = json(&["resume", query, "--json", "--store", url])?;
        assert_eq!(there["path"], on_files["path"], "resume {query}");
    }
    let cont = json(&["continue", "--dialect", "pi", "--json", "--store", url])?;
    assert_eq!(cont["path"], pi.to_string_lossy().as_ref(), "{cont}");
    // Writes go to the server only.
    let p = pi.to_str().ok_or("utf-8 path")?;
    let before = fs_err::read(&pi)?;
    let added = json(&["append", p, "--custom-type", "note", "--data", "{\"text\":\"hi\"}", "--store", url])?;
    let id = added["id"].as_str().ok_or("an id")?;
    let entries = run_home(&["entries", p, "--json", "--store", url])?;
    assert!(entries.contains(id), "{entries}");
    assert!(!run_home(&["entries", p, "--json"])?.contains(id), "the file is untouched");
    assert_eq!(fs_err::read(&pi)?, before);
    run_home(&["rename", p, "On the server", "--store", url])?;
    let info = json(&["info", p, "--json", "--store", url])?;
    assert_eq!(info["name"], "On the server");
    let o = omp.to_str().ok_or("utf-8 path")?;
    run_home(&["rename", o, "Omp on the server", "--store", url])?;
    let info = json(&["info", o, "--json", "--store", url])?;
    assert_eq!(info["name"], "Omp on the server");
    run_home(&["rm", p, "--yes", "--force", "--store", url])?;
    assert!(run_home(&["info", p, "--json", "--store", url]).is_err(), "deleted on the server");
    assert!(pi.exists(), "and not on the file system");
    Ok(())
}

/// `tail --follow --store URL` prints an entry another process appends on the server, as
/// the storage's change feed reports it, and ends (exit 1) when the session is removed.
fn follow_on_the_server(url: &str, tag: &str) -> Result<()> {
    let tmp = TempDir::try_new(tag)?;
    let file = sample(tmp.path(), "pi")?;
    let f = file.to_str().ok_or("utf-8 path")?;
    ok(&["push", f, "--to", url], tmp.path())?;
    let mut tail = bin(tmp.path());
    tail.args(["--dialect", "pi", "--json", "--store", url, "tail", f, "-n", "1", "--follow"]);
    let (mut child, lines) = spawn_lines(tail.stderr(std::process::Stdio::piped()))?;
    // The child is watching once it printed the last entry.
    let first = next_line(&lines, &format!("{tag}: the last entry"))?;
    assert!(first.starts_with('{'), "{tag}: {first}");
    for n in 0..2 {
        let custom = format!("followed-{n}");
        ok(&["--dialect", "pi", "--store", url, "append", f, "--custom-type", &custom], tmp.path())?;
        let line = next_line(&lines, &format!("{tag}: {custom}"))?;
        assert!(line.contains(&format!(r#""customType":"{custom}""#)), "{tag}: {line}");
    }
    ok(&["--store", url, "rm", f, "--yes", "--force"], tmp.path())?;
    let status = child.wait()?;
    assert_eq!(status.code(), Some(1), "{tag}: tail ends when the session is removed");
    Ok(())
}

/// [`round_trip`], [`agents_on_the_server`] and [`follow_on_the_server`] through `url`.
fn on_the_server(url: &str, pull_url: Option<&dyn Fn(&Path) -> String>, tag: &str) -> Result<()> {
    round_trip(url, pull_url, tag)?;
    agents_on_the_server(url, &format!("{tag}-agents"))?;
    follow_on_the_server(url, &format!("{tag}-follow"))
}

#[cfg(feature = "postgres")]
#[test]
fn push_inspect_and_pull_on_postgres() -> Result<()> {
    let Some(db) = TestDb::create("push_inspect_and_pull_on_postgres")? else { return Ok(()) };
    for scheme in ["postgres", "postgresql+native"] {
        let url = format!("{scheme}:///{}?host=/var/run/postgresql", db.name());
        let pull = |file: &Path| format!("{scheme}:///{}{}?host=/var/run/postgresql", db.name(), file.display());
        on_the_server(&url, Some(&pull), &format!("pg-{}", scheme.len()))?;
    }
    Ok(())
}

/// omp's table in a SQLite file: push, inspect as on files, pull back through `--store`,
/// the agents' homes there, and `tail --follow`. No server: never skipped.
#[cfg(feature = "sqlite")]
#[test]
fn push_inspect_and_pull_on_sqlite() -> Result<()> {
    let tmp = TempDir::try_new("sqlite-store")?;
    let url = format!("sqlite://{}", tmp.path().join("sessions.db").display());
    on_the_server(&url, None, "sqlite")?;
    let refused = run(&["pull", &format!("{url}/x.jsonl"), "--to", "."], tmp.path())?;
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--store sqlite:///"), "{refused:?}");
    Ok(())
}

#[cfg(feature = "mysql")]
#[test]
fn push_inspect_and_pull_on_mariadb() -> Result<()> {
    let Some(db) = MysqlDb::create("push_inspect_and_pull_on_mariadb")? else { return Ok(()) };
    let url = format!("mariadb://root@127.0.0.1:3306/{}", db.name());
    let pull = |file: &Path| format!("mysql://root@127.0.0.1:3306/{}{}", db.name(), file.display());
    on_the_server(&url, Some(&pull), "mariadb")
}

#[cfg(feature = "redis")]
#[test]
fn push_inspect_and_pull_on_redis() -> Result<()> {
    let Some(t) = TestPrefix::create("push_inspect_and_pull_on_redis")? else { return Ok(()) };
    let url = format!("redis://127.0.0.1:6379/0?prefix={}", t.prefix());
    let pull = |file: &Path| format!("redis://127.0.0.1:6379/0{}?prefix={}", file.display(), t.prefix());
    on_the_server(&url, Some(&pull), "redis")?;
    // A plain path pulls from the --store storage.
    let tmp = TempDir::try_new("redis-store-pull")?;
    let missing = run(&["pull", "/nowhere/s.jsonl", "--to", ".", "--store", &url], tmp.path())?;
    assert!(!missing.status.success(), "a missing session is an error");
    Ok(())
}

/// A key prefix of its own in the test bucket of `SESSION_TEST_S3` (`.ci/run`'s s3s-fs),
/// emptied on drop: every session's head, then the segments no head names.
#[cfg(feature = "s3")]
struct TestS3 {
    url: String,
    bucket: String,
    prefix: String,
    endpoint: String,
}

#[cfg(feature = "s3")]
impl TestS3 {
    fn create() -> std::result::Result<TestS3, String> {
        let endpoint = std::env::var("SESSION_TEST_S3").map_err(|_| "SESSION_TEST_S3 is not set".to_owned())?;
        let bucket = std::env::var("SESSION_TEST_S3_BUCKET").unwrap_or_else(|_| "session-test".to_owned());
        // Short: s3s-fs names a file after the base64 of each object's bucket and key,
        // and the agents' paths below a temporary folder are long already.
        let prefix = format!("c{:08x}", rand::rng().next_u32());
        let url = format!("s3://{bucket}/{prefix}?endpoint={endpoint}&region=us-east-1&allow_http=true");
        let t = TestS3 { url, bucket, prefix, endpoint };
        session::store::Storage::list(&t.storage()?, Path::new("/")).map_err(|e| e.to_string())?;
        Ok(t)
    }

    /// The prefix for `test`, or `None` (the test skipped) without a reachable S3.
    fn for_test(test: &str) -> Result<Option<TestS3>> {
        match Self::create() {
            Ok(t) => Ok(Some(t)),
            Err(e) => skip(test, &format!("S3 not reachable: {e}")).map(|()| None),
        }
    }

    fn storage(&self) -> std::result::Result<session_store_s3::S3Storage, String> {
        session_store_s3::S3Storage::from_url(&self.url).map_err(|e| e.to_string())
    }

    /// Deletes every file below `dir`.
    fn empty(s: &session_store_s3::S3Storage, dir: &Path) -> std::result::Result<(), session::store::StoreError> {
        use session::store::{EntryKind, Storage};
        for e in s.read_dir(dir)? {
            match e.kind {
                EntryKind::Dir => Self::empty(s, &dir.join(&e.name))?,
                _ => s.unlink(&dir.join(&e.name))?,
            }
        }
        Ok(())
    }
}

#[cfg(feature = "s3")]
impl Drop for TestS3 {
    fn drop(&mut self) {
        let Ok(s) = self.storage() else { return };
        if let Err(e) = Self::empty(&s, Path::new("/")) {
            eprintln!("cannot empty s3://{}/{} on {}: {e}", self.bucket, self.prefix, self.endpoint);
        }
        if let Err(e) = s.gc_segments_older_than(false, std::time::Duration::ZERO) {
            eprintln!("cannot delete the segments under {}: {e}", self.prefix);
        }
    }
}

#[cfg(feature = "s3")]
#[test]
fn push_inspect_and_pull_on_s3() -> Result<()> {
    let Some(t) = TestS3::for_test("push_inspect_and_pull_on_s3")? else { return Ok(()) };
    let pull = |file: &Path| {
        format!(
            "s3://{}/{}{}?endpoint={}&region=us-east-1&allow_http=true",
            t.bucket,
            t.prefix,
            file.display(),
            t.endpoint
        )
    };
    on_the_server(&t.url, Some(&pull), "s3")?;
    // A store that is not told to send conditions is refused, unless allowed.
    let tmp = TempDir::try_new("s3-unconditional")?;
    let off = format!("{}&conditional_put=disabled", t.url);
    let src = tmp.path().join("src");
    fs_err::create_dir_all(&src)?;
    let file = sample(&src, "pi")?;
    let f = file.to_str().ok_or("utf-8 path")?;
    let refused = run(&["push", f, "--to", &off], tmp.path())?;
    assert!(!refused.status.success(), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--allow-unconditional"), "{refused:?}");
    ok(&["--allow-unconditional", "push", f, "--to", &off], tmp.path())?;
    let there = ok(&["info", f, "--json", "--store", &t.url], tmp.path())?;
    assert_eq!(there, ok(&["info", f, "--json"], tmp.path())?);
    Ok(())
}

#[test]
fn a_storage_url_without_its_backend_or_scheme_is_an_error() -> Result<()> {
    let tmp = TempDir::try_new("bad-store")?;
    let out = run(&["ls", "--store", "mongodb://h/db"], tmp.path())?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown store mongodb://"), "{out:?}");
    let out = run(&["push", "x.jsonl", "--to", "/some/dir"], tmp.path())?;
    assert!(!out.status.success(), "push needs a storage URL");
    Ok(())
}

/// `session sync` with a PostgreSQL remote (see [`sync_between_two_homes`]).
#[cfg(feature = "postgres")]
#[test]
fn sync_through_postgres() -> Result<()> {
    let Some(db) = TestDb::create("sync_through_postgres")? else { return Ok(()) };
    sync_between_two_homes(&format!("postgres:///{}?host=/var/run/postgresql", db.name()), "sync-pg")
}

/// `session sync` with an S3 remote (see [`sync_between_two_homes`]); every remote write
/// is a conditional put on s3s-fs.
#[cfg(feature = "s3")]
#[test]
fn sync_through_s3() -> Result<()> {
    let Some(t) = TestS3::for_test("sync_through_s3")? else { return Ok(()) };
    sync_between_two_homes(&t.url, "sync-s3")
}

/// `session sync --watch` with an S3 remote pushes a line appended here as it lands (see
/// [`crate::sync::watch_pushes`]).
#[cfg(feature = "s3")]
#[test]
fn sync_watch_through_s3() -> Result<()> {
    use session::store::Storage;
    let Some(t) = TestS3::for_test("sync_watch_through_s3")? else { return Ok(()) };
    let tmp = TempDir::try_new("watch-s3")?;
    let a = crate::sync::Home::new(tmp.path(), "a", "git@example.org:me/app.git")?;
    let storage = t.storage()?;
    let at = crate::sync::on_remote(Path::new("/session-sync"), "s1");
    crate::sync::watch_pushes(&a, &t.url, &|| match storage.read(&at) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e.into()),
    })
}

/// `session sync` to an S3 remote killed with SIGKILL part-way (see [`sigkilled_syncs`]).
#[cfg(feature = "s3")]
#[test]
fn a_sync_killed_with_sigkill_through_s3() -> Result<()> {
    let Some(t) = TestS3::for_test("a_sync_killed_with_sigkill_through_s3")? else { return Ok(()) };
    sigkilled_syncs(&t.url, "sigkill-s3")
}

/// `session sync` to a PostgreSQL remote killed with SIGKILL part-way (see
/// [`sigkilled_syncs`]).
#[cfg(feature = "postgres")]
#[test]
fn a_sync_killed_with_sigkill_through_postgres() -> Result<()> {
    let Some(db) = TestDb::create("a_sync_killed_with_sigkill_through_postgres")? else { return Ok(()) };
    sigkilled_syncs(&format!("postgres:///{}?host=/var/run/postgresql", db.name()), "sigkill-pg")
}

/// Two machines share five pi sessions through the remote `url`, in every state a sync
/// meets (a merge, a fast-forward each way, an upload, a download); machine A's `session
/// sync` process is then killed with SIGKILL at moments spread over the time one such
/// sync takes (measured first, without a kill). After each kill, syncs of A, B and A
/// complete and leave both machines with every entry either wrote, each once, and a sync
/// after that has nothing to do. (Deaths at each write of the protocol, one by one: see
/// [`killed_at_every_remote_write`].)
#[cfg(any(feature = "postgres", feature = "s3"))]
fn sigkilled_syncs(url: &str, tag: &str) -> Result<()> {
    use std::collections::BTreeMap;
    use std::time::{Duration, Instant};

    use crate::sync::{Home, append, line, two_homes};

    const KILLS: u32 = 10;
    const SIDS: [&str; 5] = ["s1", "s2", "s3", "s4", "s5"];
    // The shortest of the runs without a kill (a busy machine makes some longer).
    const TIMED: u32 = 2;
    let mut took = Duration::MAX;
    // Kills that found the sync running, and those that left a session changed on one
    // side but not yet on the other (a kill in the middle of the protocol).
    let (mut running, mut midway) = (0, 0);
    for k in (0..TIMED).map(|_| 0).chain(1..=KILLS) {
        let tmp = TempDir::try_new(&format!("{tag}-{k}-{:08x}", rand::rng().next_u32()))?;
        let homes = two_homes(tmp.path())?;
        let prefix = format!("/{}", tmp.path().file_name().and_then(|n| n.to_str()).ok_or("a name")?);
        let args = |h: &Home| -> Vec<String> {
            let map = format!("example.org/me/app={}", h.project.display());
            ["--to", url, "--prefix", &prefix, "--map", &map].map(str::to_owned).to_vec()
        };
        let sync = |h: &Home| -> Result<serde_json::Value> {
            let args = args(h);
            h.sync(&args.iter().map(String::as_str).collect::<Vec<_>>())
        };
        let mut written: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        let mut write = |h: &Home, sid: &'static str, side: &str| -> Result<()> {
            let file = h.pi_file(sid);
            let ids: Vec<String> = (0..2).map(|i| format!("{side}{sid}{i}")).collect();
            written.entry(sid).or_default().extend(ids.iter().cloned());
            if !file.exists() {
                h.put_pi(sid, &[line(&ids[0], None), line(&ids[1], Some(&ids[0]))])?;
                return Ok(());
            }
            let text = fs_err::read_to_string(&file)?;
            let last = text.lines().last().and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok());
            let parent = last.and_then(|v| v["id"].as_str().map(str::to_owned));
            append(&file, &(line(&ids[0], parent.as_deref()) + &line(&ids[1], Some(&ids[0]))))
        };
        for sid in &SIDS[..3] {
            write(&homes[0], sid, "base")?;
        }
        sync(&homes[0])?;
        sync(&homes[1])?;
        write(&homes[0], "s1", "a")?;
        write(&homes[1], "s1", "b")?;
        write(&homes[0], "s2", "a")?;
        write(&homes[1], "s3", "b")?;
        write(&homes[0], "s4", "a")?;
        write(&homes[1], "s5", "b")?;
        sync(&homes[1])?;
        // A's sync, killed `k / KILLS` of the way through (k = 0: not killed, timed).
        let a = &homes[0];
        let started = Instant::now();
        let mut child = crate::in_home(&a.home, &a.home)
            .env("XDG_CONFIG_HOME", a.home.join(".config"))
            .arg("sync")
            .args(args(a))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        if k == 0 {
            let out = child.wait_with_output()?;
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            took = took.min(started.elapsed());
        } else {
            std::thread::sleep(took * k / KILLS);
            running += usize::from(child.try_wait()?.is_none());
            child.kill()?;
            child.wait()?;
            // The merge of s1 writes the remote then here; s2 goes up, s3 comes down.
            let s1 = fs_err::read_to_string(a.pi_file("s1"))?;
            let s3 = fs_err::read_to_string(a.pi_file("s3"))?;
            let changed_here = s1.contains("bs11") || s3.contains("bs31");
            let done_here = s1.contains("bs11") && s3.contains("bs31") && a.pi_file("s5").exists();
            midway += usize::from(changed_here && !done_here);
        }
        sync(&homes[0])?;
        sync(&homes[1])?;
        let last = sync(&homes[0])?;
        assert_eq!(last["summary"]["upToDate"], 5, "after a kill at {k}/{KILLS}: {last}");
        for sid in SIDS {
            for h in &homes {
                let text = fs_err::read_to_string(h.pi_file(sid))?;
                for id in &written[sid] {
                    let n = text.matches(&format!("\"id\":\"{id}\"")).count();
                    assert_eq!(n, 1, "after a kill at {k}/{KILLS}: {sid}: {id} {n} times\n{text}");
                }
                assert_eq!(text.lines().count(), 1 + written[sid].len(), "{sid}\n{text}");
            }
        }
    }
    eprintln!("{tag}: a sync of {took:?} killed at {KILLS} moments: {running} running, {midway} part-way");
    // The first kill comes at a tenth of the shortest run, while the process still starts.
    assert!(running >= 1, "no kill found the sync running");
    Ok(())
}

/// Two machines through the remote `url`: one uploads, another (its project elsewhere,
/// the same git origin through `--map`) downloads with its own `cwd`; a continuation
/// goes up and comes down as a fast-forward; two continuations at once are merged, and
/// both machines end with every entry once.
#[cfg(any(feature = "postgres", feature = "s3"))]
fn sync_between_two_homes(url: &str, tag: &str) -> Result<()> {
    use crate::sync::{append, line, two_homes, with_cwd};
    let tmp = TempDir::try_new(tag)?;
    let [a, b] = two_homes(tmp.path())?;
    let file_a = a.put_pi("s1", &[line("aaaaaaaa", None)])?;
    let out = a.sync(&["--to", url])?;
    assert_eq!(out["summary"]["pushed"], 1, "{out}");
    let map = format!("example.org/me/app={}", b.project.display());
    let out = b.sync(&["--to", url, "--map", &map])?;
    assert_eq!(out["summary"]["pulled"], 1, "{out}");
    let file_b = b.pi_file("s1");
    assert_eq!(fs_err::read(&file_b)?, with_cwd(&fs_err::read(&file_a)?, &a.project, &b.project));
    append(&file_a, &line("bbbbbbbb", Some("aaaaaaaa")))?;
    let out = a.sync(&["--to", url])?;
    assert_eq!(out["summary"]["pushed"], 1, "{out}");
    let out = b.sync(&["--to", url, "--map", &map])?;
    assert_eq!(out["summary"]["pulled"], 1, "{out}");
    assert_eq!(out["sessions"][0]["outcome"], "pulled", "{out}");
    assert_eq!(fs_err::read(&file_b)?, with_cwd(&fs_err::read(&file_a)?, &a.project, &b.project));
    let out = b.sync(&["--to", url, "--map", &map])?;
    assert_eq!(out["summary"]["upToDate"], 1, "{out}");
    // Both machines go on from the same entry; the second to sync merges.
    append(&file_a, &line("cccccccc", Some("bbbbbbbb")))?;
    append(&file_b, &line("dddddddd", Some("bbbbbbbb")))?;
    assert_eq!(a.sync(&["--to", url])?["summary"]["pushed"], 1);
    let out = b.sync(&["--to", url, "--map", &map])?;
    assert_eq!(out["summary"]["merged"], 1, "{out}");
    assert_eq!(a.sync(&["--to", url])?["summary"]["pulled"], 1);
    assert_eq!(fs_err::read(&file_b)?, with_cwd(&fs_err::read(&file_a)?, &a.project, &b.project));
    let text = String::from_utf8(fs_err::read(&file_a)?)?;
    for id in ["aaaaaaaa", "bbbbbbbb", "cccccccc", "dddddddd"] {
        assert_eq!(text.matches(&format!("\"id\":\"{id}\"")).count(), 1, "{text}");
    }
    Ok(())
}

/// Two machines through a PostgreSQL remote at once (see [`machines_at_once`]).
#[cfg(feature = "postgres")]
#[test]
fn two_machines_at_once_through_postgres() -> Result<()> {
    let Some(db) = TestDb::create("two_machines_at_once_through_postgres")? else { return Ok(()) };
    let conn = format!("host=/var/run/postgresql dbname={}", db.name());
    let open = || -> Result<std::sync::Arc<dyn session::store::Storage>> {
        Ok(std::sync::Arc::new(session_store_postgres::PostgresStorage::connect(&conn)?))
    };
    machines_at_once(&open, "at-once-pg")
}

/// Two machines through an S3 remote at once (see [`machines_at_once`]).
#[cfg(feature = "s3")]
#[test]
fn two_machines_at_once_through_s3() -> Result<()> {
    let Some(t) = TestS3::for_test("two_machines_at_once_through_s3")? else { return Ok(()) };
    let open = || -> Result<std::sync::Arc<dyn session::store::Storage>> { Ok(std::sync::Arc::new(t.storage()?)) };
    machines_at_once(&open, "at-once-s3")
}

/// A sync killed at every write of its protocol to a PostgreSQL remote (see
/// [`killed_at_every_remote_write`]).
#[cfg(feature = "postgres")]
#[test]
fn a_sync_killed_at_every_remote_write_through_postgres() -> Result<()> {
    let Some(db) = TestDb::create("a_sync_killed_at_every_remote_write_through_postgres")? else { return Ok(()) };
    let conn = format!("host=/var/run/postgresql dbname={}", db.name());
    killed_at_every_remote_write(&|| Ok(session_store_postgres::PostgresStorage::connect(&conn)?), "killed-pg")
}

/// A sync killed at every write of its protocol to an S3 remote (see
/// [`killed_at_every_remote_write`]).
#[cfg(feature = "s3")]
#[test]
fn a_sync_killed_at_every_remote_write_through_s3() -> Result<()> {
    let Some(t) = TestS3::for_test("a_sync_killed_at_every_remote_write_through_s3")? else { return Ok(()) };
    killed_at_every_remote_write(&|| Ok(t.storage()?), "killed-s3")
}

/// Two machines share five sessions through the remote `open` gives, in every state a
/// sync meets (both went on: a merge; one went on: a fast-forward each way; one side
/// only: an upload and a download). Machine A's sync is then killed at each remote write
/// in turn: the `k`-th call that changes the remote and every later one fail, and the
/// remote is left as that call found it. After each death every copy still holds every
/// entry it held, and a later sync of A, then B, then A completes, leaves both machines
/// and the remote with every entry either machine wrote exactly once, and a sync after
/// that has nothing to do. (The local side of the same protocol is killed at every write
/// by the crash-point campaign, `crates/session/tests/crash_points`, case `job sync`.)
#[cfg(any(feature = "postgres", feature = "s3"))]
fn killed_at_every_remote_write<S: session::store::Storage + 'static>(
    open: &dyn Fn() -> Result<S>,
    tag: &str,
) -> Result<()> {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use session::store::{Boundary, CrashKind, EntryKind, FaultStorage, Faults, Storage};
    use session::sync::{SyncOutcome, sync};

    use crate::sync::{Home, append, line, two_homes};

    const SIDS: [&str; 5] = ["s1both", "s2here", "s3there", "s4new-here", "s5new-there"];
    /// Every file below `dir` of `storage` named `name`.
    fn find(storage: &dyn Storage, dir: &std::path::Path, name: &str, out: &mut Vec<PathBuf>) -> Result<()> {
        let entries = match storage.read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        for e in entries {
            match e.kind {
                EntryKind::Dir => find(storage, &dir.join(&e.name), name, out)?,
                _ if e.name == name => out.push(dir.join(&e.name)),
                _ => {}
            }
        }
        Ok(())
    }
    /// The entry ids of a session's bytes, in order.
    fn ids_in(bytes: &[u8]) -> Vec<String> {
        let parsed = session::model::parse_session_bytes(bytes, session::Dialect::Pi);
        parsed.records.iter().filter(|r| !r.is_header()).filter_map(|r| r.id().map(str::to_owned)).collect()
    }
    let one_run = |k: Option<usize>| -> Result<Vec<Boundary>> {
        let name = k.map_or_else(|| "count".to_owned(), |k| k.to_string());
        let tmp = TempDir::try_new(&format!("{tag}-{name}"))?;
        let homes = two_homes(tmp.path())?;
        let faults = Faults::new();
        let faulty: Arc<dyn Storage> = Arc::new(FaultStorage::new(open()?, faults.clone()));
        let clean: Arc<dyn Storage> = Arc::new(open()?);
        let prefix = PathBuf::from(format!("/killed-{name}"));
        let machine = |h: &Home, remote: &Arc<dyn Storage>| sync_sides(h, remote.clone(), tag, &prefix);
        let sync_clean = |h: &Home| -> Result<session::sync::SyncReport> {
            let m = machine(h, &clean)?;
            let report = sync(&m.0, &m.1, &m.2, &mut |_| {})?;
            let bad = |o: &SyncOutcome| {
                matches!(o, SyncOutcome::Failed(_) | SyncOutcome::Skipped { .. } | SyncOutcome::Conflict { .. })
            };
            if let Some(s) = report.sessions.iter().find(|s| bad(&s.outcome)) {
                return Err(format!("{}: {:?}", s.name, s.outcome).into());
            }
            Ok(report)
        };
        // written[sid]: every entry id either machine wrote.
        let mut written: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        let mut write = |h: &Home, sid: &'static str, ids: &[String]| -> Result<()> {
            let file = h.pi_file(sid);
            let exists = file.exists();
            let mut parent = if exists { ids_in(&fs_err::read(&file)?).last().cloned() } else { None };
            let mut text = String::new();
            for id in ids {
                text.push_str(&line(id, parent.as_deref()));
                parent = Some(id.clone());
                written.entry(sid).or_default().push(id.clone());
            }
            if exists {
                append(&file, &text)?;
            } else {
                h.put_pi(sid, &[text])?;
            }
            Ok(())
        };
        let ids = |side: &str, sid: &str, n: usize| -> Vec<String> {
            (0..n).map(|i| format!("{side}{}{i}", &sid[..2])).collect()
        };
        for sid in &SIDS[..3] {
            write(&homes[0], sid, &ids("base", sid, 2))?;
        }
        sync_clean(&homes[0])?;
        sync_clean(&homes[1])?;
        write(&homes[0], SIDS[0], &ids("a", SIDS[0], 2))?;
        write(&homes[1], SIDS[0], &ids("b", SIDS[0], 2))?;
        write(&homes[0], SIDS[1], &ids("a", SIDS[1], 2))?;
        write(&homes[1], SIDS[2], &ids("b", SIDS[2], 2))?;
        write(&homes[0], SIDS[3], &ids("a", SIDS[3], 2))?;
        write(&homes[1], SIDS[4], &ids("b", SIDS[4], 2))?;
        sync_clean(&homes[1])?;
        // What each copy holds before A's sync, and keeps after its death.
        let remote_copy = |sid: &str| -> Result<Option<PathBuf>> {
            let mut found = Vec::new();
            find(clean.as_ref(), &prefix, &format!("2026-01-01T00-00-00-000Z_{sid}.jsonl"), &mut found)?;
            match found.as_slice() {
                [] => Ok(None),
                [one] => Ok(Some(one.clone())),
                more => Err(format!("{sid}: {more:?}").into()),
            }
        };
        // A's copy and the remote's of `sid`, each named with the ids it holds.
        let copies = |sid: &str| -> Result<Vec<(String, Vec<String>)>> {
            let mut copies = Vec::new();
            let local = homes[0].pi_file(sid);
            if local.exists() {
                copies.push((local.display().to_string(), ids_in(&fs_err::read(&local)?)));
            }
            if let Some(r) = remote_copy(sid)? {
                copies.push((format!("remote {}", r.display()), ids_in(&clean.read(&r)?)));
            }
            Ok(copies)
        };
        let held: Vec<(String, Vec<String>)> = SIDS.iter().map(|sid| copies(sid)).collect::<Result<Vec<_>>>()?.concat();
        let a = machine(&homes[0], &faulty)?;
        match k {
            None => faults.record_boundaries(),
            Some(k) => faults.crash_at(k, CrashKind::Before),
        }
        let first = sync(&a.0, &a.1, &a.2, &mut |_| {});
        let trace = faults.boundaries();
        match (k, &first) {
            (None, Ok(report)) => {
                let did: Vec<&str> = SIDS
                    .iter()
                    .map(|sid| {
                        let name = format!("2026-01-01T00-00-00-000Z_{sid}.jsonl");
                        match report.sessions.iter().find(|s| s.name == name).map(|s| &s.outcome) {
                            Some(SyncOutcome::Merged { .. }) => "merged",
                            Some(SyncOutcome::Pushed { .. }) => "pushed",
                            Some(SyncOutcome::Pulled { .. }) => "pulled",
                            Some(SyncOutcome::Uploaded) => "uploaded",
                            Some(SyncOutcome::Downloaded) => "downloaded",
                            _ => "other",
                        }
                    })
                    .collect();
                assert_eq!(did, ["merged", "pushed", "pulled", "uploaded", "downloaded"], "{report:?}");
            }
            (None, Err(e)) => return Err(format!("the sync without a death failed: {e}").into()),
            (Some(_), _) => {
                if faults.crashed().is_none() {
                    return Err("the death was not reached".into());
                }
            }
        }
        // Every copy holds what it held.
        for sid in SIDS {
            let copies = copies(sid)?;
            for (place, before) in held.iter().filter(|(p, _)| p.contains(sid)) {
                let now = copies.iter().find(|(p, _)| p == place).ok_or_else(|| format!("{place} is gone"))?;
                if let Some(id) = before.iter().find(|id| !now.1.contains(id)) {
                    return Err(format!("{place} lost {id}").into());
                }
            }
        }
        // A later sync completes, and a sync after both has nothing to do.
        sync_clean(&homes[0])?;
        sync_clean(&homes[1])?;
        let last = sync_clean(&homes[0])?;
        if let Some(s) = last.sessions.iter().find(|s| !matches!(s.outcome, SyncOutcome::Unchanged)) {
            return Err(format!("after both synced: {} {:?}", s.name, s.outcome).into());
        }
        for sid in SIDS {
            let remote = remote_copy(sid)?.ok_or_else(|| format!("{sid} is not on the remote"))?;
            let copies = [
                ("a", fs_err::read(homes[0].pi_file(sid))?),
                ("b", fs_err::read(homes[1].pi_file(sid))?),
                ("remote", clean.read(&remote)?),
            ];
            for (place, bytes) in &copies {
                let mut got = ids_in(bytes);
                let n = got.len();
                got.sort();
                got.dedup();
                let mut want = written[sid].clone();
                want.sort();
                if got != want || n != want.len() {
                    return Err(format!("{sid} on {place}: {got:?} ({n} entries), want {want:?} once each").into());
                }
            }
        }
        Ok(trace)
    };
    let trace = one_run(None)?;
    assert!(!trace.is_empty(), "the sync wrote nothing to the remote");
    for k in 1..=trace.len() {
        one_run(Some(k)).map_err(|e| format!("{tag}: died at {} of {} ({}): {e}", k, trace.len(), trace[k - 1]))?;
    }
    eprintln!("{tag}: a sync killed at each of {} remote writes", trace.len());
    Ok(())
}

/// Machine `h`'s side of a sync through `remote` (named `test://TAG`) below `prefix`, with
/// its project mapped: what `sync` takes.
#[cfg(any(feature = "postgres", feature = "s3"))]
fn sync_sides(
    h: &crate::sync::Home,
    remote: std::sync::Arc<dyn session::store::Storage>,
    tag: &str,
    prefix: &Path,
) -> Result<(session::sync::SyncLocal, session::sync::SyncRemote, session::sync::SyncOptions)> {
    use session::discovery::{AgentDirs, ProcessEnv};
    use session::sync::{ProjectMap, SyncLocal, SyncOptions, SyncRemote};
    let tmpdir = h.home.join("tmp");
    fs_err::create_dir_all(&tmpdir)?;
    let env = ProcessEnv::new(&h.home, &h.project, &tmpdir);
    let files = std::sync::Arc::new(session::store::FileStorage::new());
    let local = SyncLocal::new(files, vec![AgentDirs::pi(&env)], h.home.join(".state"));
    let remote = SyncRemote::new(remote, &format!("test://{tag}"), prefix);
    let mut map = ProjectMap::new();
    map.insert("example.org/me/app", &h.project);
    Ok((local, remote, SyncOptions::default().map(map)))
}

/// Two machines (their clones of one project at different paths) each run an agent loop
/// that appends turns to the sessions it has, and sync with the remote `open` gives at
/// random moments, both at once. After a last round of syncs both hold the same sessions
/// (but for each machine's own `cwd`), with every turn either wrote exactly once.
#[cfg(any(feature = "postgres", feature = "s3"))]
fn machines_at_once(open: &dyn Fn() -> Result<std::sync::Arc<dyn session::store::Storage>>, tag: &str) -> Result<()> {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use session::store::{FileStorage, Storage};
    use session::sync::{SyncLocal, SyncOptions, SyncRemote, sync};

    use crate::sync::{Home, line, two_homes, with_cwd};

    const TURNS: usize = 60;
    let tmp = TempDir::try_new(tag)?;
    let homes = two_homes(tmp.path())?;
    homes[0].put_pi("s1", &[line("i0000001", None)])?;
    homes[0].put_pi("s2", &[line("i0000002", None)])?;
    homes[1].put_pi("s3", &[line("i0000003", None)])?;
    let written: Mutex<BTreeMap<String, Vec<String>>> = Mutex::new(BTreeMap::from([
        ("s1".to_owned(), vec!["i0000001".to_owned()]),
        ("s2".to_owned(), vec!["i0000002".to_owned()]),
        ("s3".to_owned(), vec!["i0000003".to_owned()]),
    ]));
    let machine = |h: &Home| sync_sides(h, open()?, tag, Path::new("/session-sync"));
    let sync_once = |m: &(SyncLocal, SyncRemote, SyncOptions)| -> Result<session::sync::SyncReport> {
        Ok(sync(&m.0, &m.1, &m.2, &mut |_| {})?)
    };
    let sids = ["s1", "s2", "s3"];
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let tally = Mutex::new([0usize; 3]);
    std::thread::scope(|scope| -> Result<()> {
        let mut joins = Vec::new();
        for (k, h) in homes.iter().enumerate() {
            let (written, failures, sids, tally) = (&written, &failures, &sids, &tally);
            let m = machine(h)?;
            joins.push(scope.spawn(move || -> std::result::Result<(), String> {
                use rand::RngExt as _;
                let mut rng = rand::rng();
                let storage = FileStorage::new();
                for turn in 0..TURNS {
                    // A turn on one of the sessions this machine has.
                    let sid = sids[rng.random_range(0..sids.len())];
                    let file = h.pi_file(sid);
                    if let Ok(bytes) = fs_err::read(&file) {
                        let text = String::from_utf8_lossy(&bytes).into_owned();
                        let last = text.lines().last().unwrap_or_default();
                        let parent = serde_json::from_str::<serde_json::Value>(last)
                            .ok()
                            .and_then(|v| v["id"].as_str().map(str::to_owned));
                        let id = format!("{}{turn:07}", ["a", "b"][k]);
                        storage.append(&file, line(&id, parent.as_deref()).as_bytes()).map_err(|e| e.to_string())?;
                        written.lock().map_err(|e| e.to_string())?.entry(sid.to_owned()).or_default().push(id);
                    }
                    if rng.random_range(0..3) == 0 {
                        match sync_once(&m) {
                            Ok(r) => {
                                let c = r.counts();
                                let mut t = tally.lock().map_err(|e| e.to_string())?;
                                (t[0], t[1], t[2]) = (t[0] + c.pushed, t[1] + c.pulled, t[2] + c.merged);
                                drop(t);
                                for s in &r.sessions {
                                    if let session::sync::SyncOutcome::Failed(e) = &s.outcome {
                                        failures.lock().map_err(|e| e.to_string())?.push(e.to_string());
                                    }
                                }
                            }
                            Err(e) => failures.lock().map_err(|e| e.to_string())?.push(e.to_string()),
                        }
                    }
                }
                Ok(())
            }));
        }
        for j in joins {
            j.join().map_err(|_| "a machine's thread panicked")??;
        }
        Ok(())
    })?;
    // The last round: each machine syncs until a sync changes nothing on either.
    let (ma, mb) = (machine(&homes[0])?, machine(&homes[1])?);
    for _ in 0..4 {
        let (ra, rb) = (sync_once(&ma)?, sync_once(&mb)?);
        let settled = |r: &session::sync::SyncReport| r.counts().unchanged == r.sessions.len();
        if settled(&ra) && settled(&rb) {
            break;
        }
    }
    let written = written.into_inner().map_err(|e| e.to_string())?;
    for sid in sids {
        let (fa, fb) = (fs_err::read(homes[0].pi_file(sid))?, fs_err::read(homes[1].pi_file(sid))?);
        let (fa_there, fb) =
            (String::from_utf8(with_cwd(&fa, &homes[0].project, &homes[1].project))?, String::from_utf8(fb)?);
        assert_eq!(fa_there, fb, "{sid}: both machines hold one file");
        let text = String::from_utf8(fa)?;
        for id in &written[sid] {
            assert_eq!(text.matches(&format!("\"id\":\"{id}\"")).count(), 1, "{sid}: turn {id} once\n{text}");
        }
        // And nothing else: the header and the turns written.
        assert_eq!(text.lines().count(), 1 + written[sid].len(), "{sid}\n{text}");
    }
    let [pushed, pulled, merged] = tally.into_inner().map_err(|e| e.to_string())?;
    eprintln!("{tag}: while both ran: {pushed} pushed, {pulled} pulled, {merged} merged");
    let failures = failures.into_inner().map_err(|e| e.to_string())?;
    assert!(failures.iter().all(|f| f.contains("locked") || f.contains("busy")), "{failures:?}");
    Ok(())
}

/// Runs, on the storage `url`, every command that only reads and every dry run, then a
/// `sync --dry-run` to it, and checks with `tables` (the server's catalog, or whether
/// the database file exists) that none created anything; then a `sync` to it creates
/// what `made` names.
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
fn reading_creates_nothing(
    url: &str,
    tables: &dyn Fn() -> Result<Vec<String>>,
    made: &[&str],
    tag: &str,
) -> Result<()> {
    use crate::sync::{Home, line};
    let tmp = TempDir::try_new(&format!("{tag}-homes"))?;
    let a = Home::new(tmp.path(), "a", "git@example.org:me/app.git")?;
    a.put_pi("s1", &[line("aaaaaaaa", None)])?;
    let sessions = a.home.join(".pi/agent/sessions");
    let (dir, remote) = (sessions.to_str().ok_or("utf-8 path")?, tmp.path().join("remote"));
    let (old, new) = (a.project.to_str().ok_or("utf-8 path")?, tmp.path().join("moved"));
    let new = new.to_str().ok_or("utf-8 path")?;
    let commands: [&[&str]; 12] = [
        &["ls", "--all"],
        &["ls", "--dialect", "omp"],
        &["resume", "aaaa"],
        &["continue", "--dialect", "pi"],
        &["stats", dir],
        &["du", "--all"],
        &["fsck", dir],
        &["gc"],
        &["prune", "--older-than", "1d"],
        &["relocate", old, new],
        &["trash", "empty"],
        &["sync", "--to", remote.to_str().ok_or("utf-8 path")?, "--dry-run"],
    ];
    for args in commands {
        let out = crate::in_home(&a.home, &a.home).args(args).args(["--json", "--store", url]).output()?;
        let resume = matches!(args[0], "resume" | "continue");
        assert!(out.status.success() || resume, "session {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(tables()?, Vec::<String>::new(), "session {args:?} --store {url} created something");
    }
    let dry = a.sync(&["--to", url, "--dry-run"])?;
    assert_eq!((&dry["dryRun"], &dry["summary"]["pushed"]), (&serde_json::json!(true), &serde_json::json!(1)), "{dry}");
    assert_eq!(tables()?, Vec::<String>::new(), "sync --dry-run --to {url} created something");
    // A command that writes still creates the table.
    assert_eq!(a.sync(&["--to", url])?["summary"]["pushed"], 1);
    assert_eq!(tables()?, made);
    let listed: serde_json::Value = serde_json::from_slice(
        &crate::in_home(&a.home, &a.home).args(["ls", "--all", "--json", "--store", url]).output()?.stdout,
    )?;
    assert!(listed.as_array().is_some_and(Vec::is_empty), "sync files its copy under its prefix: {listed}");
    Ok(())
}

/// Returns the tables of the PostgreSQL database `db` (its public schema).
#[cfg(feature = "postgres")]
fn pg_tables(db: &str) -> Result<Vec<String>> {
    let mut c = postgres::Client::connect(&format!("host=/var/run/postgresql dbname={db}"), postgres::NoTls)?;
    let rows = c.query(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1",
        &[],
    )?;
    Ok(rows.iter().map(|r| r.try_get(0)).collect::<std::result::Result<_, _>>()?)
}

/// Commands that only read, and dry runs, create neither omp's table nor the native
/// ones on PostgreSQL (`--store`, and `sync --dry-run --to`); a sync creates them.
#[cfg(feature = "postgres")]
#[test]
fn reading_creates_no_table_on_postgres() -> Result<()> {
    let test = "reading_creates_no_table_on_postgres";
    for (scheme, param, made) in
        [("postgres", "table=ro_files", &["ro_files"][..]), ("postgresql+native", "stem=ro", &["ro_lines", "ro_meta"])]
    {
        let Some(db) = TestDb::create(test)? else { return Ok(()) };
        let url = format!("{scheme}:///{}?host=/var/run/postgresql&{param}", db.name());
        reading_creates_nothing(&url, &|| pg_tables(db.name()), made, &format!("pg-ro-{}", scheme.len()))?;
    }
    Ok(())
}

/// The same on MariaDB (or MySQL), whose catalog is `information_schema.tables`.
#[cfg(feature = "mysql")]
#[test]
fn reading_creates_no_table_on_mariadb() -> Result<()> {
    use mysql::prelude::Queryable;
    let Some(db) = MysqlDb::create("reading_creates_no_table_on_mariadb")? else { return Ok(()) };
    let tables = || -> Result<Vec<String>> {
        let opts = mysql::Opts::from_url(&format!("mysql://root@127.0.0.1:3306/{}", db.name()))?;
        let rows: Vec<String> = mysql::Conn::new(opts)?
            .exec("SELECT table_name FROM information_schema.tables WHERE table_schema = ? ORDER BY 1", (db.name(),))?;
        Ok(rows)
    };
    let url = format!("mariadb://root@127.0.0.1:3306/{}?table=ro_files", db.name());
    reading_creates_nothing(&url, &tables, &["ro_files"], "mariadb-ro")
}

/// The same on SQLite, where the catalog is the folder: no database file (nor lock
/// directory) appears until a command writes. No server: never skipped.
#[cfg(feature = "sqlite")]
#[test]
fn reading_creates_no_database_file_on_sqlite() -> Result<()> {
    let tmp = TempDir::try_new("sqlite-ro")?;
    let db = tmp.path().join("sessions.db");
    let url = format!("sqlite://{}", db.display());
    let tables = || -> Result<Vec<String>> {
        let mut names: Vec<String> = fs_err::read_dir(tmp.path())?
            .map(|e| Ok(e?.file_name().to_string_lossy().into_owned()))
            .collect::<Result<_>>()?;
        names.sort();
        Ok(names)
    };
    reading_creates_nothing(&url, &tables, &["sessions.db", "sessions.db.locks"], "sqlite-ro")
}
