//! The one-row-per-line layout: the whole storage contract, and its rows.

use std::path::Path;

use session_store::contract::{run_byte_contract, run_contract};
use session_store::{ExpectedSize, Storage, StoreError};
use session_store_postgres::{NativePostgresOptions, NativePostgresStorage};

use crate::support::{TestDb, TestResult};

#[test]
fn native_storage_meets_the_contract() -> TestResult {
    let Some(db) = TestDb::create("native_storage_meets_the_contract")? else { return Ok(()) };
    let storage = NativePostgresStorage::connect(&db.conn())?;
    run_contract(&|| Box::new(storage.clone()), &|case| format!("/contract/{case}"))?;
    run_byte_contract(&|| Box::new(storage.clone()), &|case| format!("/bytes/{case}"))
}

#[test]
fn an_append_is_one_row_and_the_rows_tile_the_file() -> TestResult {
    let Some(db) = TestDb::create("an_append_is_one_row_and_the_rows_tile_the_file")? else { return Ok(()) };
    let s = NativePostgresStorage::connect_with_stem(&db.conn(), "t_sess")?;
    let p = Path::new("/n/s.jsonl");
    s.write_atomic(p, b"{\"type\":\"session\"}\n{\"a\":1}\n", ExpectedSize::Missing)?;
    let mut c = db.client()?;
    let count = |c: &mut postgres::Client| -> Result<i64, postgres::Error> {
        c.query_one("SELECT count(*) FROM t_sess_lines WHERE path = '/n/s.jsonl'", &[])?.try_get(0)
    };
    assert_eq!(count(&mut c)?, 2, "a whole write stores one row per line");
    let mut w = s.open_writer(p, session_store::Durability::None)?;
    w.append(b"{\"b\":2}\n")?;
    w.close()?;
    s.append_expected(p, b"{\"c\":3}\n", ExpectedSize::Bytes(35))?;
    assert_eq!(count(&mut c)?, 4, "an append adds one row");
    let stale = s.append_expected(p, b"x\n", ExpectedSize::Bytes(35));
    assert!(matches!(stale, Err(StoreError::Conflict { expected: Some(35), found: Some(43), .. })), "{stale:?}");
    let rows = c.query(
        "SELECT seq, octet_length(line)::bigint FROM t_sess_lines WHERE path = '/n/s.jsonl' ORDER BY seq",
        &[],
    )?;
    let mut at = 0i64;
    for r in rows {
        let (seq, len): (i64, i64) = (r.try_get(0)?, r.try_get(1)?);
        assert_eq!(seq, at, "rows start where the previous one ends");
        at += len;
    }
    let size: i64 = c.query_one("SELECT size FROM t_sess_meta WHERE path = '/n/s.jsonl'", &[])?.try_get(0)?;
    assert_eq!((at, size), (43, 43));
    assert_eq!(s.read(p)?, b"{\"type\":\"session\"}\n{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n");
    // Cutting inside a row shortens it; the tail window crosses rows.
    s.truncate(p, 30)?;
    assert_eq!(s.read(p)?, b"{\"type\":\"session\"}\n{\"a\":1}\n{\"b");
    assert_eq!(s.read_slices(p, 5, 7)?, (b"{\"typ".to_vec(), b":1}\n{\"b".to_vec()));
    assert_eq!(s.list(Path::new("/n"))?, ["s.jsonl"]);
    Ok(())
}

#[test]
fn titles_lay_over_the_slot_as_in_omps_layout() -> TestResult {
    let Some(db) = TestDb::create("titles_lay_over_the_slot_as_in_omps_layout")? else { return Ok(()) };
    let s = NativePostgresStorage::connect(&db.conn())?;
    let slot =
        session_model::TitleSlot { title: String::new(), source: None, updated_at: "2026-01-01T00:00:00.000Z".into() };
    let body = format!("{}{{\"type\":\"session\"}}\n", slot.to_line()?);
    let p = Path::new("/t/s.jsonl");
    s.write_atomic(p, body.as_bytes(), ExpectedSize::Missing)?;
    assert_eq!(s.read(p)?, body.as_bytes());
    s.update_title(p, Some("New"), Some("user"), "2026-02-02T00:00:00.000Z")?;
    let renamed = session_model::TitleSlot {
        title: "New".into(),
        source: Some("user".into()),
        updated_at: "2026-02-02T00:00:00.000Z".into(),
    };
    let got = s.read(p)?;
    assert_eq!(&got[..256], renamed.to_line()?.as_bytes());
    assert_eq!(s.read_slices(p, 10, 300)?.1, got);
    Ok(())
}

#[test]
fn windows_of_many_rows_match_the_bytes() -> TestResult {
    let Some(db) = TestDb::create("windows_of_many_rows_match_the_bytes")? else { return Ok(()) };
    let s = NativePostgresStorage::connect(&db.conn())?;
    let p = Path::new("/w/s.jsonl");
    let mut all = Vec::new();
    for i in 0..40 {
        let line = format!("{{\"i\":{i},\"pad\":\"{}\"}}\n", "x".repeat(i * 7 % 50));
        s.append(p, line.as_bytes())?;
        all.extend_from_slice(line.as_bytes());
    }
    let size = all.len() as u64;
    let (mut head, mut tail) = (Vec::new(), Vec::new());
    for prefix in [0, 1, 37, 255, 256, 900, size - 1, size, size + 10] {
        for suffix in [0, 1, 41, 300, size - 1, size, size + 5] {
            let want = session_store::slice_windows(&all, prefix, suffix);
            assert_eq!(s.read_slices(p, prefix, suffix)?, want, "prefix {prefix}, suffix {suffix}");
            let (stat, h, t) = s.read_slices_into(p, prefix, suffix, &mut head, &mut tail)?;
            assert_eq!((stat.size, &head[..h], &tail[..t]), (size, &want.0[..], &want.1[..]));
        }
    }
    Ok(())
}

#[test]
fn a_note_is_kept_until_its_file_is_written() -> TestResult {
    let Some(db) = TestDb::create("a_note_is_kept_until_its_file_is_written")? else { return Ok(()) };
    let s = NativePostgresStorage::connect(&db.conn())?;
    let (a, b) = (std::path::PathBuf::from("/n/a.jsonl"), std::path::PathBuf::from("/n/b.jsonl"));
    s.write(&a, b"{\"a\":1}\n")?;
    s.write(&b, b"{\"b\":1}\n")?;
    let paths = [a.clone(), b.clone(), "/n/missing.jsonl".into()];
    let notes = s.read_notes(&paths, "k")?.ok_or("the native layout keeps notes")?;
    assert!(notes[2].is_none(), "no note slot for a missing file");
    let (va, vb) = match (&notes[0], &notes[1]) {
        (Some(x), Some(y)) if x.bytes.is_none() && y.bytes.is_none() => (x.version, y.version),
        other => return Err(format!("fresh files have no note: {other:?}").into()),
    };
    s.write_notes("k", &[(a.clone(), va, b"note a".to_vec()), (b.clone(), vb, b"note b".to_vec())])?;
    let notes = s.read_notes(&paths, "k")?.ok_or("notes")?;
    assert_eq!(notes[0].as_ref().and_then(|n| n.bytes.as_deref()), Some(&b"note a"[..]));
    assert_eq!(s.read_notes(&paths, "other")?.ok_or("notes")?[0].as_ref().and_then(|n| n.bytes.clone()), None);
    // Each kind of write drops the note in its own statement.
    s.append(&a, b"{\"a\":2}\n")?;
    s.write(&b, b"{\"B\":1}\n")?;
    let notes = s.read_notes(&paths, "k")?.ok_or("notes")?;
    assert_eq!(notes[0].as_ref().map(|n| n.bytes.clone()), Some(None), "an append drops the note");
    assert_eq!(notes[1].as_ref().map(|n| n.bytes.clone()), Some(None), "a same-size rewrite drops the note");
    // A note derived before a write is not stored after it.
    s.append(&a, b"{\"a\":3}\n")?;
    s.write_notes("k", &[(a.clone(), notes[0].as_ref().map_or(0, |n| n.version), b"stale".to_vec())])?;
    let notes = s.read_notes(&paths, "k")?.ok_or("notes")?;
    assert_eq!(notes[0].as_ref().map(|n| n.bytes.clone()), Some(None), "a stale note is refused");
    let version = notes[1].as_ref().map_or(0, |n| n.version);
    s.write_notes("k", &[(b.clone(), version, b"note b".to_vec())])?;
    s.update_title(&b, Some("t"), None, "2026-01-01T00:00:00.000Z")?;
    let notes = s.read_notes(&paths, "k")?.ok_or("notes")?;
    assert_eq!(notes[1].as_ref().map(|n| n.bytes.clone()), Some(None), "a title change drops the note");
    Ok(())
}

#[test]
fn a_listing_stores_a_note_for_every_session_and_uses_them() -> TestResult {
    let Some(db) = TestDb::create("a_listing_stores_a_note_for_every_session_and_uses_them")? else { return Ok(()) };
    let s = std::sync::Arc::new(NativePostgresStorage::connect(&db.conn())?);
    let dir = Path::new("/home/u/.musepi/agent/sessions/--w--");
    let mut paths = Vec::new();
    for i in 0..20 {
        let p = dir.join(format!("2026-01-01T00-00-{i:02}-000Z_s{i}.jsonl"));
        let body = format!(
            "{{\"type\":\"session\",\"version\":3,\"id\":\"s{i}\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/w\"}}\n\
             {{\"type\":\"message\",\"id\":\"u{i}\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"question {i}\",\"timestamp\":1}}}}\n"
        );
        s.write(&p, body.as_bytes())?;
        paths.push(p);
    }
    let env = session_discovery::ProcessEnv::new("/home/u", "/w", "/tmp");
    let dirs = session_discovery::AgentDirs::for_dialect(
        session_model::Dialect::Omp,
        &env,
        session_discovery::OmpHome::MusePi,
    );
    let d = session_discovery::Discovery::new(dirs).with_storage(s.clone()).read_only();
    let first =
        session_discovery::sessions_to_json(session_model::Dialect::Omp, &d.list("/w", Some(dir), &mut |_| {})?);
    let notes = s.read_notes(&paths, "session-discovery/1/omp")?.ok_or("notes")?;
    assert!(notes.iter().all(|n| n.as_ref().is_some_and(|n| n.bytes.is_some())), "every session has its note");
    // The bodies are replaced behind the storage's back; the listing still answers from the notes.
    let mut c = db.client()?;
    c.execute(
        "UPDATE session_lines SET line = replace(convert_from(line, 'UTF8'), 'question', 'QUESTION')::bytea",
        &[],
    )?;
    let again =
        session_discovery::sessions_to_json(session_model::Dialect::Omp, &d.list("/w", Some(dir), &mut |_| {})?);
    assert_eq!(again, first, "the second listing reads no body");
    assert!(first.contains("question 7"), "{first}");
    Ok(())
}

#[test]
fn a_read_only_native_storage_creates_nothing_and_reads_what_is_there() -> TestResult {
    let Some(db) = TestDb::create("a_read_only_native_storage_creates_nothing_and_reads_what_is_there")? else {
        return Ok(());
    };
    let options = NativePostgresOptions::default().stem("ro").read_only(true);
    let r = NativePostgresStorage::connect_with(&db.conn(), options.clone())?;
    let p = Path::new("/n/s.jsonl");
    assert!(r.list(Path::new("/n"))?.is_empty());
    assert_eq!(r.stat(p)?, None);
    assert!(matches!(r.read(p), Err(StoreError::NotFound { .. })));
    assert!(matches!(r.read_slices(p, 4, 4), Err(StoreError::NotFound { .. })));
    assert_eq!(r.read_notes(&[p.to_path_buf()], "k")?, None);
    r.write_notes("k", &[(p.to_path_buf(), 1, b"n".to_vec())])?;
    assert!(crate::omp::refused(&r.append(p, b"{}\n").err().ok_or("refused")?));
    assert!(crate::omp::tables(&mut db.client()?)?.is_empty(), "nothing was created");
    let w = NativePostgresStorage::connect_with_stem(&db.conn(), "ro")?;
    w.write_atomic(p, b"{\"type\":\"session\"}\n{\"a\":1}\n", ExpectedSize::Missing)?;
    let r = NativePostgresStorage::connect_with(&db.conn(), options)?;
    assert_eq!(r.read(p)?, b"{\"type\":\"session\"}\n{\"a\":1}\n");
    assert_eq!(r.read_slices(p, 5, 7)?, (b"{\"typ".to_vec(), b"\"a\":1}\n".to_vec()));
    assert_eq!(r.list_stats(Path::new("/n"))?.len(), 1);
    assert!(crate::omp::refused(&r.truncate(p, 0).err().ok_or("refused")?));
    assert_eq!(w.stat(p)?.map(|s| s.size), Some(27));
    Ok(())
}
