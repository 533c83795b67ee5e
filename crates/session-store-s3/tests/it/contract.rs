//! The shared storage contract on object storage, discovery through it, and use from
//! inside a tokio runtime.

use std::path::Path;
use std::sync::Arc;

use session_discovery::parity::check_parity;
use session_store::contract::{run_byte_contract, run_contract};
use session_store::{ExpectedSize, Storage, StoreError};
use session_store_s3::{OpenError, S3Error, S3Storage};

use crate::support::{TestPrefix, TestResult, bucket};

#[test]
fn s3_storage_meets_the_contract() -> TestResult {
    let Some(t) = TestPrefix::create("s3_storage_meets_the_contract")? else { return Ok(()) };
    let storage = t.storage()?;
    run_contract(&|| Box::new(storage.clone()), &|case| format!("/contract/{case}"))?;
    run_byte_contract(&|| Box::new(storage.clone()), &|case| format!("/bytes/{case}"))
}

#[test]
fn discovery_on_s3_answers_as_in_memory() -> TestResult {
    let Some(t) = TestPrefix::create("discovery_on_s3_answers_as_in_memory")? else { return Ok(()) };
    check_parity(Arc::new(t.storage()?), "/parity".as_ref())
}

/// The storage's blocking calls work from a task of a tokio runtime (where blocking on
/// another runtime would panic), and the storage can be dropped there.
#[tokio::test]
async fn calls_from_inside_a_tokio_runtime() -> TestResult {
    let Some(t) = TestPrefix::create("calls_from_inside_a_tokio_runtime")? else { return Ok(()) };
    let s = t.storage()?;
    let p = Path::new("/rt/s.jsonl");
    s.write_atomic(p, b"1\n", ExpectedSize::Missing)?;
    s.append(p, b"2\n")?;
    assert_eq!(s.read(p)?, b"1\n2\n");
    let other = s.clone();
    let got = tokio::task::spawn_blocking(move || other.read(Path::new("/rt/s.jsonl"))).await??;
    assert_eq!(got, b"1\n2\n");
    drop(s);
    Ok(())
}

#[test]
fn keys_hold_any_file_name() -> TestResult {
    let Some(t) = TestPrefix::create("keys_hold_any_file_name")? else { return Ok(()) };
    let s = t.storage()?;
    s.write(Path::new("/a*/[x] %41/s?.jsonl"), b"1")?;
    s.write(Path::new("/a*/[x] %41/é~#.jsonl"), b"2")?;
    s.write(Path::new("/ab/[x] %41/t.jsonl"), b"3")?;
    assert_eq!(s.list(Path::new("/a*/[x] %41"))?, ["s?.jsonl", "é~#.jsonl"]);
    assert!(s.list(Path::new("/a?/[x] %41"))?.is_empty());
    assert_eq!(s.read(Path::new("/a*/[x] %41/é~#.jsonl"))?, b"2");
    let keys: Vec<String> = t.objects("heads")?.into_iter().map(|(k, _)| k).collect();
    assert!(keys.contains(&"heads/a%2A/%5Bx%5D %2541/s%3F.jsonl!".to_owned()), "{keys:?}");
    Ok(())
}

#[test]
fn bad_keys_are_refused() -> TestResult {
    let Some(t) = TestPrefix::create("bad_keys_are_refused")? else { return Ok(()) };
    let s = t.storage()?;
    let long = format!("/{}", "a".repeat(3000));
    // Within the key limit, but past S3's 1,024 bytes once encoded (`*` takes three).
    let encoded = format!("/{}", "*".repeat(400));
    for p in ["/a/../b.jsonl", "/a/\0.jsonl", long.as_str(), encoded.as_str()] {
        let err = s.write(Path::new(p), b"x").err().ok_or("bad key refused")?;
        assert_eq!(err.io_kind(), Some(std::io::ErrorKind::InvalidInput), "{err}");
        assert!(matches!(S3Error::find(&err), Some(S3Error::BadPath { .. })), "{err:?}");
    }
    assert!(matches!(s.write(Path::new("/"), b"x"), Err(StoreError::NotAFile { .. })));
    assert!(t.objects("heads")?.is_empty());
    Ok(())
}

#[test]
fn urls_configure_the_storage() -> TestResult {
    let Some(t) = TestPrefix::create("urls_configure_the_storage")? else { return Ok(()) };
    let url = format!("s3://{}/{}/sub?endpoint={}&region=us-east-1&allow_http=true", bucket(), t.prefix, t.endpoint);
    let s = S3Storage::from_url(&url)?;
    assert_eq!(s.prefix(), format!("{}/sub", t.prefix));
    s.write(Path::new("/u/s.jsonl"), b"x\n")?;
    assert_eq!(t.objects("sub/heads")?.len(), 1);
    Ok(())
}

/// Needs no server: nothing is sent before the first call.
#[test]
fn bad_urls_are_refused() -> TestResult {
    for bad in [
        "http://b/p",
        "s3:///p",
        "s3://b/p?no_such_option=1",
        "s3://b?allow_unconditional=maybe",
        "s3://b?lock_ttl_ms=soon",
        "not a url",
        "",
    ] {
        assert!(matches!(S3Storage::from_url(bad), Err(OpenError::BadUrl { .. })), "{bad}");
    }
    let s = S3Storage::from_url("s3://b/a%20b/../c/?region=eu-west-1&lock_ttl_ms=500&allow_unconditional=true")?;
    assert_eq!(s.prefix(), "c");
    let s = S3Storage::from_url("s3://b/x%2Ay/?region=eu-west-1")?;
    assert_eq!(s.prefix(), "x%2Ay", "the prefix's components are encoded as keys are");
    Ok(())
}

#[test]
fn an_unreachable_server_is_an_error() -> TestResult {
    let s = S3Storage::builder("b")
        .endpoint("http://127.0.0.1:1")
        .allow_http(true)
        .region("us-east-1")
        .credentials("k", "s")
        .option("timeout", "2s")?
        .option("connect_timeout", "1s")?
        .retries(0, std::time::Duration::from_secs(1))
        .build()?;
    let err = s.stat(Path::new("/x.jsonl")).err().ok_or("an unreachable server fails")?;
    assert!(matches!(S3Error::find(&err), Some(S3Error::Backend(_))), "{err:?}");
    Ok(())
}
