//! Faults on Redis: writers racing on one session from separate connections (on the shared
//! server), and, on a private server of the test's own, a full `maxmemory`, a string past
//! the server's limit and restarts with and without an append-only file.

#[allow(dead_code, reason = "the support module is shared with the it binary")]
#[path = "../it/support.rs"]
mod support;

mod own_server;

use std::io::ErrorKind;
use std::path::Path;

use session_store::contract::racing_writers;
use session_store::{ExpectedSize, Storage, StoreError};

use own_server::OwnRedis;
use session_store_redis::{RedisStorage, ServerError};
use support::{TestPrefix, TestResult, storage};

/// Starts a private server, or reports the test skipped (failed when servers are required).
fn own_server(test: &str, args: &[&str]) -> Result<Option<OwnRedis>, Box<dyn std::error::Error + Send + Sync>> {
    match OwnRedis::start(args) {
        Ok(s) => Ok(Some(s)),
        Err(reason) => session_testkit::servers::skip(test, &reason.to_string()),
    }
}

#[test]
fn a_full_maxmemory_is_out_of_memory_and_writes_nothing() -> TestResult {
    let test = "a_full_maxmemory_is_out_of_memory_and_writes_nothing";
    let Some(server) = own_server(test, &["--maxmemory", "4mb", "--maxmemory-policy", "noeviction"])? else {
        return Ok(());
    };
    let s = RedisStorage::connect(&server.url())?;
    let chunk = vec![b'x'; 256 << 10];
    let mut written = 0;
    let err = loop {
        let p = format!("/m/s{written}.jsonl");
        match s.write_atomic(Path::new(&p), &chunk, ExpectedSize::Missing) {
            Ok(()) => written += 1,
            Err(e) => break e,
        }
        if written > 64 {
            return Err("maxmemory never refused a write".into());
        }
    };
    assert_eq!(err.io_kind(), Some(ErrorKind::OutOfMemory), "{err}");
    assert!(err.to_string().contains(&format!("/m/s{written}.jsonl")), "{err}");
    assert!(!s.exists(Path::new(&format!("/m/s{written}.jsonl")))?, "nothing of the refused write");
    let appended = s.append(Path::new("/m/s0.jsonl"), &chunk).err().ok_or("append refused")?;
    assert_eq!(appended.io_kind(), Some(ErrorKind::OutOfMemory), "{appended}");
    assert_eq!(s.read(Path::new("/m/s0.jsonl"))?.len(), chunk.len(), "the file is unchanged");
    Ok(())
}

#[test]
fn a_string_past_the_server_limit_is_too_large_and_writes_nothing() -> TestResult {
    let test = "a_string_past_the_server_limit_is_too_large_and_writes_nothing";
    let Some(server) = own_server(test, &["--proto-max-bulk-len", "1mb"])? else { return Ok(()) };
    let s = RedisStorage::connect(&server.url())?;
    let p = Path::new("/big/s.jsonl");
    let part = vec![b'y'; 700 << 10];
    s.append(p, &part)?;
    let err = s.append(p, &part).err().ok_or("the second append passes the limit")?;
    assert_eq!(err.io_kind(), Some(ErrorKind::FileTooLarge), "{err}");
    assert!(matches!(ServerError::find(&err), Some(ServerError::TooLarge { .. })), "{err}");
    assert_eq!(s.read(p)?.len(), part.len(), "nothing appended");
    Ok(())
}

#[test]
fn restarts_lose_everything_without_aof_and_nothing_with_appendfsync_always() -> TestResult {
    let test = "restarts_lose_everything_without_aof_and_nothing_with_appendfsync_always";
    for (args, kept) in
        [(&["--appendonly", "no"][..], false), (&["--appendonly", "yes", "--appendfsync", "always"][..], true)]
    {
        let Some(mut server) = own_server(test, args)? else { return Ok(()) };
        let s = RedisStorage::connect(&server.url())?;
        let p = Path::new("/r/s.jsonl");
        s.write_atomic(
            p,
            b"one
",
            ExpectedSize::Missing,
        )?;
        s.append(
            p, b"two
",
        )?;
        server.kill();
        let down = s
            .append(
                p, b"three
",
            )
            .err()
            .ok_or("no server, no append")?;
        let kind = down.io_kind();
        assert!(matches!(kind, Some(ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted)), "{down} ({kind:?})");
        server.restart()?;
        // The same storage reconnects by itself.
        let got = s.read(p);
        if kept {
            assert_eq!(
                got?,
                b"one
two
",
                "every acknowledged write survived"
            );
        } else {
            assert!(matches!(got, Err(StoreError::NotFound { .. })), "{got:?}");
        }
        s.append(
            p, b"after
",
        )?;
    }
    Ok(())
}

/// Two writers on two storages append to one session ([`racing_writers`]).
#[test]
fn racing_writers_on_two_connections() -> TestResult {
    let Some(t) = TestPrefix::create("racing_writers")? else { return Ok(()) };
    racing_writers(&|| Ok(Box::new(storage(&t)?)), Path::new("/race"))
}
