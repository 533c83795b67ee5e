//! The command on real servers: `push` a session with its artifacts, inspect it with
//! `--store`, `pull` it back, and compare every byte.
//!
//! Each test makes its own PostgreSQL database or Redis key prefix and removes it at the
//! end. Without a reachable server a test prints `skipped: <test>: <reason>` and passes,
//! unless `SESSION_REQUIRE_SERVERS=1`, where it fails.
#![cfg_attr(
    not(all(feature = "postgres", feature = "redis")),
    allow(dead_code, reason = "the helpers of a backend built without its feature")
)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rand::Rng;

use crate::{Result, TempDir};

/// Runs `session ARGS` and returns its output, whatever the status.
fn run(args: &[&str], cwd: &Path) -> Result<Output> {
    Ok(Command::new(env!("CARGO_BIN_EXE_session")).args(args).current_dir(cwd).env("SESSION_NO_CACHE", "1").output()?)
}

/// Runs `session ARGS`, which must succeed, and returns its standard output.
fn ok(args: &[&str], cwd: &Path) -> Result<String> {
    let out = run(args, cwd)?;
    if !out.status.success() {
        return Err(format!("session {args:?}: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// Reports a skipped test; an error when the servers are required.
fn skip(test: &str, reason: &str) -> Result<()> {
    let _ = writeln!(std::io::stderr(), "skipped: {test}: {reason}");
    if std::env::var("SESSION_REQUIRE_SERVERS").is_ok_and(|v| v == "1") {
        return Err(format!("{test}: the server is required (SESSION_REQUIRE_SERVERS=1): {reason}").into());
    }
    Ok(())
}

fn random_name() -> String {
    format!("sess_cli_{:016x}", rand::rng().next_u64())
}

/// A database of its own on the local PostgreSQL, dropped on drop.
struct TestDb {
    name: String,
    admin: postgres::Client,
}

impl TestDb {
    fn create() -> std::result::Result<TestDb, postgres::Error> {
        let mut admin = postgres::Client::connect("host=/var/run/postgresql dbname=postgres", postgres::NoTls)?;
        let name = random_name();
        admin.batch_execute(&format!("CREATE DATABASE {name}"))?;
        Ok(TestDb { name, admin })
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Err(e) = self.admin.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name)) {
            eprintln!("cannot drop test database {}: {e}", self.name);
        }
    }
}

/// A key prefix of its own on the local Redis, emptied on drop.
struct TestPrefix {
    prefix: String,
    conn: redis::Connection,
}

impl TestPrefix {
    fn create() -> std::result::Result<TestPrefix, redis::RedisError> {
        let mut conn = redis::Client::open("redis://127.0.0.1:6379/")?.get_connection()?;
        redis::cmd("PING").query::<String>(&mut conn)?;
        Ok(TestPrefix { prefix: format!("{}:", random_name()), conn })
    }
}

impl Drop for TestPrefix {
    fn drop(&mut self) {
        let keys: redis::RedisResult<Vec<String>> =
            redis::cmd("KEYS").arg(format!("{}*", self.prefix)).query(&mut self.conn);
        if let Ok(keys) = keys
            && !keys.is_empty()
        {
            let _ = redis::cmd("DEL").arg(&keys).query::<i64>(&mut self.conn);
        }
    }
}

/// Copies a testdata session and gives it an artifacts directory with a nested file.
fn sample(dir: &Path, name: &str) -> Result<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/sample");
    let file = dir.join(format!("{name}.jsonl"));
    fs_err::copy(root.join(format!("{name}.jsonl")), &file)?;
    let artifacts = dir.join(name);
    fs_err::create_dir_all(artifacts.join("sub"))?;
    fs_err::write(artifacts.join("0.log"), "tool output\n")?;
    fs_err::write(artifacts.join("sub/.1.log"), "nested, hidden\n")?;
    Ok(file)
}

/// Pushes both samples to `url`, inspects them there as on files, pulls them back and
/// compares every byte; then checks the overwrite rules.
fn round_trip(url: &str, pull_url: &dyn Fn(&Path) -> String, tag: &str) -> Result<()> {
    let tmp = TempDir::new(tag)?;
    let (src, back) = (tmp.0.join("src"), tmp.0.join("back"));
    fs_err::create_dir_all(&src)?;
    fs_err::create_dir_all(&back)?;
    for name in ["pi", "omp"] {
        let file = sample(&src, name)?;
        let f = file.to_str().ok_or("utf-8 path")?;
        let pushed: serde_json::Value = serde_json::from_str(&ok(&["push", f, "--to", url], &tmp.0)?)?;
        assert_eq!(pushed["artifacts"], 2, "{name}: {pushed}");
        assert_eq!(pushed["bytes"], fs_err::metadata(&file)?.len(), "{name}: {pushed}");
        for cmd in ["info", "context", "entries", "tree"] {
            let there = ok(&[cmd, f, "--json", "--store", url], &tmp.0)?;
            assert_eq!(there, ok(&[cmd, f, "--json"], &tmp.0)?, "{name}: {cmd} on the server and on files");
        }
        let dir = src.to_str().ok_or("utf-8 path")?;
        for cmd in ["stats", "fsck"] {
            let there = ok(&[cmd, dir, "--json", "--store", url], &tmp.0)?;
            assert_eq!(there, ok(&[cmd, dir, "--json"], &tmp.0)?, "{name}: {cmd} on the server and on files");
        }
        let pulled = ok(&["pull", &pull_url(&file), "--to", back.to_str().ok_or("utf-8 path")?], &tmp.0)?;
        assert!(pulled.contains("\"artifacts\":2"), "{name}: {pulled}");
        assert_eq!(fs_err::read(back.join(format!("{name}.jsonl")))?, fs_err::read(&file)?, "{name}: the session");
        for rel in ["0.log", "sub/.1.log"] {
            assert_eq!(fs_err::read(back.join(name).join(rel))?, fs_err::read(src.join(name).join(rel))?, "{rel}");
        }
        // The same bytes again change nothing; other bytes are refused unless forced.
        let again = ok(&["push", f, "--to", url], &tmp.0)?;
        assert!(again.contains("\"unchanged\":true"), "{name}: {again}");
        let mut other = fs_err::read(&file)?;
        other.extend_from_slice(b"{\"type\":\"custom\",\"customType\":\"x\",\"id\":\"ffffffff\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:00.000Z\"}\n");
        fs_err::write(&file, &other)?;
        let refused = run(&["push", f, "--to", url], &tmp.0)?;
        assert!(!refused.status.success(), "{name}: a different session is not overwritten");
        assert!(String::from_utf8_lossy(&refused.stderr).contains("--force"), "{name}: the error says what to do");
        ok(&["push", f, "--to", url, "--force"], &tmp.0)?;
        ok(&["pull", &pull_url(&file), "--to", back.to_str().ok_or("utf-8 path")?, "--force"], &tmp.0)?;
        assert_eq!(fs_err::read(back.join(format!("{name}.jsonl")))?, other, "{name}: the forced copy");
    }
    Ok(())
}

#[cfg(feature = "postgres")]
#[test]
fn push_inspect_and_pull_on_postgres() -> Result<()> {
    let test = "push_inspect_and_pull_on_postgres";
    let db = match TestDb::create() {
        Ok(db) => db,
        Err(e) => return skip(test, &format!("PostgreSQL not reachable: {e}")),
    };
    for scheme in ["postgres", "postgresql+native"] {
        let url = format!("{scheme}:///{}?host=/var/run/postgresql", db.name);
        let pull = |file: &Path| format!("{scheme}:///{}{}?host=/var/run/postgresql", db.name, file.display());
        round_trip(&url, &pull, &format!("pg-{}", scheme.len()))?;
    }
    Ok(())
}

#[cfg(feature = "redis")]
#[test]
fn push_inspect_and_pull_on_redis() -> Result<()> {
    let test = "push_inspect_and_pull_on_redis";
    let t = match TestPrefix::create() {
        Ok(t) => t,
        Err(e) => return skip(test, &format!("Redis not reachable: {e}")),
    };
    let url = format!("redis://127.0.0.1:6379/0?prefix={}", t.prefix);
    let pull = |file: &Path| format!("redis://127.0.0.1:6379/0{}?prefix={}", file.display(), t.prefix);
    round_trip(&url, &pull, "redis")?;
    // A plain path pulls from the --store storage.
    let tmp = TempDir::new("redis-store-pull")?;
    let missing = run(&["pull", "/nowhere/s.jsonl", "--to", ".", "--store", &url], &tmp.0)?;
    assert!(!missing.status.success(), "a missing session is an error");
    Ok(())
}

#[test]
fn a_storage_url_without_its_backend_or_scheme_is_an_error() -> Result<()> {
    let tmp = TempDir::new("bad-store")?;
    let out = run(&["ls", "--store", "mysql://h/db"], &tmp.0)?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown store mysql://"), "{out:?}");
    let out = run(&["push", "x.jsonl", "--to", "/some/dir"], &tmp.0)?;
    assert!(!out.status.success(), "push needs a storage URL");
    Ok(())
}
