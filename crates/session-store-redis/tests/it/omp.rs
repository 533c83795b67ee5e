//! omp's side of the keys: what we write read with the commands omp's `RedisSessionStorage`
//! sends, and what those commands write read through our storage.

use std::path::Path;

use redis::Commands;
use session_model::TitleSlot;
use session_store::{ExpectedSize, Storage, StoreError};

use crate::support::{TestPrefix, TestResult, storage};

#[test]
fn omp_reads_what_we_write() -> TestResult {
    let Some(mut t) = TestPrefix::create("omp_reads_what_we_write")? else { return Ok(()) };
    let s = storage(&t)?;
    let pre = t.prefix().to_owned();
    let slot = TitleSlot {
        title: "Ünïcode".into(),
        source: Some("user".into()),
        updated_at: "2026-01-01T00:00:00.000Z".into(),
    };
    let line = slot.to_line()?;
    let p = Path::new("/sessions/--w--/s.jsonl");
    s.write_atomic(p, format!("{line}{{\"type\":\"session\"}}\n").as_bytes(), ExpectedSize::Missing)?;
    s.append(p, "{\"x\":\"é\"}\n".as_bytes())?;
    let want = format!("{line}{{\"type\":\"session\"}}\n{{\"x\":\"é\"}}\n");
    let body = format!("{pre}file:/sessions/--w--/s.jsonl");
    // omp's index load: the keys, STRLEN, both hashes.
    assert_eq!(t.keys()?, [format!("{pre}file:/sessions/--w--/s.jsonl"), format!("{pre}meta"), format!("{pre}title")]);
    let len: usize = t.raw().strlen(&body)?;
    assert_eq!(len, want.len());
    let got: Vec<u8> = t.raw().get(&body)?;
    assert_eq!(got, want.as_bytes());
    let mtime: String = t.raw().hget(format!("{pre}meta"), "/sessions/--w--/s.jsonl")?;
    let mtime: i64 = mtime.parse()?;
    assert_eq!(Some(mtime), s.stat(p)?.map(|st| st.mtime_ms));
    let title: String = t.raw().hget(format!("{pre}title"), "/sessions/--w--/s.jsonl")?;
    assert_eq!(title, r#"{"title":"Ünïcode","source":"user","updatedAt":"2026-01-01T00:00:00.000Z"}"#);
    // omp's readSlices: GETRANGE.
    let head: Vec<u8> = t.raw().getrange(&body, 0, 9)?;
    assert_eq!(head, &want.as_bytes()[..10]);
    // A rename moves the body and both fields.
    s.rename(p, Path::new("/sessions/--w--/t.jsonl"))?;
    let moved: bool = t.raw().hexists(format!("{pre}title"), "/sessions/--w--/t.jsonl")?;
    let old: bool = t.raw().hexists(format!("{pre}meta"), "/sessions/--w--/s.jsonl")?;
    assert!(moved && !old);
    Ok(())
}

#[test]
fn we_read_what_omp_writes() -> TestResult {
    let Some(mut t) = TestPrefix::create("we_read_what_omp_writes")? else { return Ok(()) };
    let s = storage(&t)?;
    let pre = t.prefix().to_owned();
    let path = "/o/s.jsonl";
    let body = format!("{pre}file:{path}");
    let slot = TitleSlot { title: String::new(), source: None, updated_at: "2026-01-01T00:00:00.000Z".into() };
    let line = slot.to_line()?;
    let first = format!("{line}{{\"type\":\"session\"}}\n");
    // omp's writeFull (SET, HSET mtime, HSET title), then two appends (APPEND, HSET mtime).
    redis::pipe()
        .atomic()
        .set(&body, &first)
        .hset(format!("{pre}meta"), path, "1700000000000")
        .hset(format!("{pre}title"), path, r#"{"title":"","updatedAt":"2026-01-01T00:00:00.000Z"}"#)
        .query::<()>(t.raw())?;
    for (i, l) in ["{\"a\":\"ü\"}\n", "{\"b\":2}\n"].iter().enumerate() {
        redis::pipe()
            .atomic()
            .append(&body, l)
            .hset(format!("{pre}meta"), path, (1_700_000_000_001i64 + i as i64).to_string())
            .query::<()>(t.raw())?;
    }
    let p = Path::new(path);
    let want = format!("{first}{{\"a\":\"ü\"}}\n{{\"b\":2}}\n");
    assert_eq!(s.read(p)?, want.as_bytes());
    let st = s.stat(p)?.ok_or("stat")?;
    assert_eq!((st.size, st.mtime_ms, st.is_file), (want.len() as u64, 1_700_000_000_002, true));
    assert_eq!(s.list(Path::new("/o"))?, ["s.jsonl"]);
    // omp's title update: only the hashes change; we see the title in the slot.
    redis::pipe()
        .atomic()
        .hset(
            format!("{pre}title"),
            path,
            r#"{"title":"Renamed","source":"user","updatedAt":"2026-02-02T00:00:00.000Z"}"#,
        )
        .hset(format!("{pre}meta"), path, "1700000000010")
        .query::<()>(t.raw())?;
    let renamed = TitleSlot {
        title: "Renamed".into(),
        source: Some("user".into()),
        updated_at: "2026-02-02T00:00:00.000Z".into(),
    };
    let got = s.read(p)?;
    assert_eq!(&got[..256], renamed.to_line()?.as_bytes());
    assert_eq!(&got[256..], &want.as_bytes()[256..]);
    for (prefix, suffix) in [(100usize, 20usize), (300, 280), (1000, 1000), (10, 0)] {
        let (head, tail) = s.read_slices(p, prefix as u64, suffix as u64)?;
        assert_eq!(head, &got[..got.len().min(prefix)]);
        assert_eq!(tail, &got[got.len() - got.len().min(suffix)..]);
    }
    // omp's CAS sees our writes by STRLEN; ours sees omp's.
    let stale = s.write_atomic(p, b"x\n", ExpectedSize::Bytes(want.len() as u64 + 1));
    assert!(matches!(stale, Err(StoreError::Conflict { .. })), "{stale:?}");
    s.write_atomic(p, &got, ExpectedSize::Bytes(want.len() as u64))?;
    let stored: Vec<u8> = t.raw().get(&body)?;
    assert_eq!(stored, got, "the rewrite stored the renamed slot");
    s.update_title(p, Some("Again"), Some("auto"), "2026-03-03T00:00:00.000Z")?;
    let title: String = t.raw().hget(format!("{pre}title"), path)?;
    assert_eq!(title, r#"{"title":"Again","source":"auto","updatedAt":"2026-03-03T00:00:00.000Z"}"#);
    let stored: Vec<u8> = t.raw().get(&body)?;
    assert_eq!(stored, got, "the body is not touched");
    Ok(())
}
