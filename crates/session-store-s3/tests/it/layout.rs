//! The objects the storage writes: heads over content-addressed segments, uploads of the
//! tail only, compaction, conditional head updates, the probe and the segment collection.

use std::path::Path;
use std::time::Duration;

use session_store::{Durability, ExpectedSize, Storage, StoreError};
use session_store_s3::{MAX_SEGMENTS, S3Error};

use crate::support::{TestPrefix, TestResult};

/// Returns the total bytes of the segment objects.
fn segment_bytes(t: &TestPrefix) -> Result<u64, object_store::Error> {
    Ok(t.objects("segments")?.iter().map(|(_, n)| n).sum())
}

#[test]
fn an_append_uploads_only_the_tail() -> TestResult {
    let Some(t) = TestPrefix::create("an_append_uploads_only_the_tail")? else { return Ok(()) };
    let s = t.storage()?;
    let p = Path::new("/a/s.jsonl");
    let first = vec![b'x'; 100_000];
    s.write_atomic(p, &first, ExpectedSize::Missing)?;
    assert_eq!(segment_bytes(&t)?, 100_000);
    s.append(p, b"{\"n\":1}\n")?;
    s.append_expected(p, b"{\"n\":2}\n", ExpectedSize::Bytes(100_008))?;
    assert_eq!(segment_bytes(&t)?, 100_016, "two appends add their own bytes only");
    assert_eq!(t.objects("segments")?.len(), 3);
    let segs = s.segments(p)?.ok_or("segments")?;
    assert_eq!(segs.iter().map(|s| s.len).collect::<Vec<_>>(), [100_000, 8, 8]);
    // The head is the documented JSON.
    let head: serde_json::Value = serde_json::from_slice(&t.get("heads/a/s.jsonl!")?)?;
    assert_eq!(head["v"], 1);
    assert_eq!(head["size"], 100_016);
    assert_eq!(head["segments"][1]["len"], 8);
    assert_eq!(head["segments"][1]["sha256"].as_str(), Some(segs[1].sha256.as_str()));
    let mut want = first.clone();
    want.extend_from_slice(b"{\"n\":1}\n{\"n\":2}\n");
    assert_eq!(s.read(p)?, want);
    // A segment is stored under its hash; the same bytes are stored once.
    s.write_atomic(Path::new("/a/t.jsonl"), &first, ExpectedSize::Missing)?;
    assert_eq!(t.objects("segments")?.len(), 3, "identical content reuses its segment");
    assert_eq!(t.get(&format!("segments/{}", segs[1].sha256))?, b"{\"n\":1}\n");
    Ok(())
}

#[test]
fn a_prefix_overwrite_uploads_only_the_start() -> TestResult {
    let Some(t) = TestPrefix::create("a_prefix_overwrite_uploads_only_the_start")? else { return Ok(()) };
    let s = t.storage()?;
    let p = Path::new("/o/s.jsonl");
    s.write_atomic(p, b"0123456789\n", ExpectedSize::Missing)?;
    s.append(p, b"ab\n")?;
    let body = vec![b'x'; 50_000];
    s.append(p, &body)?;
    let before = segment_bytes(&t)?;
    s.overwrite_prefix(p, b"ABCDEFGHIJKLM", ExpectedSize::Bytes(50_014), Durability::None)?;
    assert_eq!(segment_bytes(&t)? - before, 14, "the two first segments became one; the large one stays");
    assert_eq!(s.segments(p)?.map(|v| v.iter().map(|s| s.len).collect::<Vec<_>>()), Some(vec![14, 50_000]));
    let mut want = b"ABCDEFGHIJKLM\n".to_vec();
    want.extend_from_slice(&body);
    assert_eq!(s.read(p)?, want);
    Ok(())
}

#[test]
fn heads_compact_past_the_segment_limit() -> TestResult {
    let Some(t) = TestPrefix::create("heads_compact_past_the_segment_limit")? else { return Ok(()) };
    let s = t.storage()?;
    let p = Path::new("/c/s.jsonl");
    let mut want = Vec::new();
    for i in 0..MAX_SEGMENTS {
        let line = format!("{{\"i\":{i}}}\n");
        s.append(p, line.as_bytes())?;
        want.extend_from_slice(line.as_bytes());
    }
    assert_eq!(s.segments(p)?.map(|v| v.len()), Some(MAX_SEGMENTS));
    s.append(p, b"{\"i\":\"last\"}\n")?;
    want.extend_from_slice(b"{\"i\":\"last\"}\n");
    let segs = s.segments(p)?.ok_or("segments")?;
    assert_eq!(segs.len(), 1, "the write past the limit makes one segment");
    assert_eq!(segs[0].len, want.len() as u64);
    assert_eq!(s.read(p)?, want);
    s.append(p, b"more\n")?;
    assert_eq!(s.segments(p)?.map(|v| v.len()), Some(2));
    want.extend_from_slice(b"more\n");
    assert_eq!(s.read(p)?, want);
    let (head, tail) = s.read_slices(p, 10, 20)?;
    assert_eq!((head.as_slice(), tail.as_slice()), (&want[..10], &want[want.len() - 20..]));
    Ok(())
}

/// A writer whose head is replaced between its read and its conditional put loses: the
/// server refuses its `If-Match`, the write returns `Conflict`, and the file is the
/// winner's. The race is made by the `testing` fail point, so it does not rely on timing,
/// nor on `s3s-fs` being atomic under truly simultaneous puts, which it is not.
#[test]
fn a_lost_race_is_a_conflict_and_changes_nothing() -> TestResult {
    let Some(t) = TestPrefix::create("a_lost_race_is_a_conflict_and_changes_nothing")? else { return Ok(()) };
    let (loser, winner) = (t.storage()?, t.storage()?);
    let p = Path::new("/r/s.jsonl");
    loser.write_atomic(p, b"base\n", ExpectedSize::Missing)?;
    for (i, race) in ["append_expected", "write_atomic", "write_new"].into_iter().enumerate() {
        let w = winner.clone();
        let line = format!("winner {i}\n");
        let won = line.clone();
        loser.before_head_put(move || {
            if let Err(e) = w.append(Path::new("/r/s.jsonl"), won.as_bytes()) {
                panic!("the winner's append failed: {e}");
            }
        });
        let before = loser.read(p)?;
        let size = before.len() as u64;
        let got = match race {
            "append_expected" => loser.append_expected(p, b"loser\n", ExpectedSize::Bytes(size)),
            "write_atomic" => loser.write_atomic(p, b"loser\n", ExpectedSize::Bytes(size)),
            _ => {
                let q = Path::new("/r/new.jsonl");
                let w = winner.clone();
                loser.before_head_put(move || {
                    if let Err(e) = w.write_new(Path::new("/r/new.jsonl"), b"first\n") {
                        panic!("the winner's create failed: {e}");
                    }
                });
                let got = loser.write_new(q, b"second\n");
                assert!(matches!(got, Err(StoreError::AlreadyExists { .. })), "{race}: {got:?}");
                assert_eq!(loser.read(q)?, b"first\n");
                continue;
            }
        };
        let grown = size + line.len() as u64;
        assert!(
            matches!(got, Err(StoreError::Conflict { expected: Some(e), found: Some(f), .. }) if e == size && f == grown),
            "{race}: {got:?}"
        );
        let mut want = before.clone();
        want.extend_from_slice(line.as_bytes());
        assert_eq!(loser.read(p)?, want, "{race}: the winner's file, untouched by the loser");
    }
    // A write without a precondition that loses starts over and lands after the winner's.
    let w = winner.clone();
    loser.before_head_put(move || {
        if let Err(e) = w.append(Path::new("/r/s.jsonl"), b"w\n") {
            panic!("the winner's append failed: {e}");
        }
    });
    loser.append(p, b"l\n")?;
    assert!(loser.read(p)?.ends_with(b"winner 1\nw\nl\n"));
    Ok(())
}

#[test]
fn the_probe_finds_conditional_writes() -> TestResult {
    let Some(t) = TestPrefix::create("the_probe_finds_conditional_writes")? else { return Ok(()) };
    let s = t.storage()?;
    assert!(s.probe_conditional_writes()?, "the test server honours If-None-Match");
    assert!(t.objects("probe")?.is_empty(), "the probe object is deleted");
    // A client that sends no conditions: every write is refused with the typed error ...
    let off = t.builder().option("conditional_put", "disabled")?.build()?;
    assert!(!off.probe_conditional_writes()?);
    let p = Path::new("/u/s.jsonl");
    let err = off.write(p, b"x\n").err().ok_or("refused")?;
    assert!(matches!(S3Error::find(&err), Some(S3Error::Unconditional)), "{err:?}");
    assert_eq!(err.io_kind(), Some(std::io::ErrorKind::Unsupported));
    assert!(format!("{}", S3Error::Unconditional).contains("--allow-unconditional"));
    assert!(!off.exists(p)?, "nothing written");
    // ... unless allowed, when each head update holds the lock object.
    let allowed = t.builder().option("conditional_put", "disabled")?.allow_unconditional(true).build()?;
    allowed.write_atomic(p, b"1\n", ExpectedSize::Missing)?;
    allowed.append(p, b"2\n")?;
    let held = allowed.lock(p, session_store::LockWait::NoWait)?;
    allowed.append_expected(p, b"3\n", ExpectedSize::Bytes(4))?;
    held.release()?;
    assert_eq!(allowed.read(p)?, b"1\n2\n3\n");
    let lock: serde_json::Value = serde_json::from_slice(&t.get("locks/u/s.jsonl!")?)?;
    assert_eq!(lock["expires"], 0, "the lock object is released");
    let wrong = allowed.write_atomic(p, b"x", ExpectedSize::Bytes(1));
    assert!(matches!(wrong, Err(StoreError::Conflict { .. })), "{wrong:?}");
    Ok(())
}

#[test]
fn gc_keeps_referenced_segments() -> TestResult {
    let Some(t) = TestPrefix::create("gc_keeps_referenced_segments")? else { return Ok(()) };
    let s = t.storage()?;
    let (p, q) = (Path::new("/g/s.jsonl"), Path::new("/g/sub/t.jsonl"));
    s.write_atomic(p, b"old\n", ExpectedSize::Missing)?;
    s.append(p, b"tail\n")?;
    s.write_atomic(q, b"other\n", ExpectedSize::Missing)?;
    s.write_atomic(p, b"new\n", ExpectedSize::Bytes(9))?;
    assert_eq!(t.objects("segments")?.len(), 4);
    // Young segments stay, referenced or not.
    let report = s.gc_segments(false)?;
    assert_eq!((report.heads, report.segments, report.referenced, report.young), (2, 4, 2, 2));
    assert!(report.deleted.is_empty());
    // With no minimum age the two unreferenced ones go; a dry run only says so.
    let dry = s.gc_segments_older_than(true, Duration::ZERO)?;
    assert_eq!((dry.deleted.len(), dry.deleted_bytes), (2, 9));
    assert_eq!(t.objects("segments")?.len(), 4, "a dry run deletes nothing");
    let done = s.gc_segments_older_than(false, Duration::ZERO)?;
    assert_eq!(done.deleted, dry.deleted);
    assert_eq!(t.objects("segments")?.len(), 2);
    assert_eq!(s.read(p)?, b"new\n");
    assert_eq!(s.read(q)?, b"other\n");
    Ok(())
}

#[test]
fn damaged_objects_are_invalid_content() -> TestResult {
    let Some(t) = TestPrefix::create("damaged_objects_are_invalid_content")? else { return Ok(()) };
    let s = t.storage()?;
    let p = Path::new("/d/s.jsonl");
    s.write_atomic(p, b"hello\n", ExpectedSize::Missing)?;
    let sha = s.segments(p)?.ok_or("segments")?[0].sha256.clone();
    t.put(&format!("segments/{sha}"), b"jello\n".to_vec())?;
    let err = s.read(p).err().ok_or("a changed segment is refused")?;
    assert!(matches!(S3Error::find(&err), Some(S3Error::InvalidContent { .. })), "{err:?}");
    assert_eq!(err.io_kind(), Some(std::io::ErrorKind::InvalidData));
    t.delete(&format!("segments/{sha}"))?;
    let err = s.read(p).err().ok_or("a missing segment is refused")?;
    assert!(matches!(S3Error::find(&err), Some(S3Error::InvalidContent { .. })), "{err:?}");
    t.put("heads/d/s.jsonl!", b"{\"v\":9}".to_vec())?;
    let err = s.stat(p).err().ok_or("a head of another version is refused")?;
    assert!(err.to_string().contains("stat") && format!("{:?}", S3Error::find(&err)).contains("version 9"), "{err:?}");
    // A head object larger than any head is refused before its body is fetched, by a
    // read and by a listing with sizes.
    t.put("heads/d/s.jsonl!", vec![b' '; (1 << 20) + 1])?;
    let err = s.stat(p).err().ok_or("an oversized head is refused")?;
    assert!(format!("{err:?}").contains("at most"), "{err:?}");
    let err = s.list_stats(Path::new("/d")).err().ok_or("an oversized head is refused in a listing")?;
    assert!(format!("{err:?}").contains("at most"), "{err:?}");
    Ok(())
}

#[test]
fn a_rename_leaves_a_tombstone_and_loses_no_append() -> TestResult {
    let Some(t) = TestPrefix::create("a_rename_leaves_a_tombstone_and_loses_no_append")? else { return Ok(()) };
    let s = t.storage()?;
    let other = t.storage()?;
    let (from, to) = (Path::new("/r/s.jsonl"), Path::new("/r/trash/s.jsonl"));
    s.write_atomic(from, b"1\n", ExpectedSize::Missing)?;
    // Another writer appends to the source between the rename's read and its end.
    let appender = other.clone();
    s.before_head_put(move || appender.append(Path::new("/r/s.jsonl"), b"2\n").expect("the append lands"));
    s.rename(from, to)?;
    assert_eq!(s.read(to)?, b"1\n2\n", "the rename copied the source again after the append");
    assert!(!s.exists(from)?);
    // The old name holds an empty head object, which reads as no file and is not listed.
    assert_eq!(t.get("heads/r/s.jsonl!")?, b"");
    assert!(matches!(s.read(from), Err(StoreError::NotFound { .. })));
    assert_eq!(s.list(Path::new("/r"))?, Vec::<String>::new());
    assert!(s.list_stats(Path::new("/r"))?.is_empty());
    assert!(matches!(s.unlink(from), Err(StoreError::NotFound { .. })));
    // A new file takes the name again, conditionally on the tombstone.
    s.write_atomic(from, b"new\n", ExpectedSize::Missing)?;
    assert_eq!(s.read(from)?, b"new\n");
    assert_eq!(s.list(Path::new("/r"))?, ["s.jsonl"]);
    // A rename of a missing file is NotFound and writes nothing.
    let missing = s.rename(Path::new("/r/none.jsonl"), Path::new("/r/x.jsonl"));
    assert!(matches!(missing, Err(StoreError::NotFound { .. })), "{missing:?}");
    assert!(!s.exists(Path::new("/r/x.jsonl"))?);
    Ok(())
}

#[test]
fn writes_return_the_version_they_made() -> TestResult {
    let Some(t) = TestPrefix::create("writes_return_the_version_they_made")? else { return Ok(()) };
    let s = t.storage()?;
    let p = Path::new("/v/s.jsonl");
    // Before a listing the storage does not know which form its store's listings give.
    assert_eq!(s.write_atomic_versioned(Path::new("/v/first.jsonl"), b"0\n", ExpectedSize::Missing)?, None);
    let listed = s.list_versions(Path::new("/v"))?;
    let made = s.write_atomic_versioned(p, b"1\n", ExpectedSize::Missing)?;
    let appended = s.append_expected_versioned(p, b"2\n", ExpectedSize::Bytes(2))?;
    if !listed[0].1.starts_with("etag:") {
        // A store listing sizes and times (s3s-fs): no version is named, the caller asks.
        assert_eq!((made, appended), (None, None));
        return Ok(());
    }
    // A store listing ETags: each write names the version the listing then gives.
    let (st, made) = made.ok_or("a version")?;
    let (st2, appended) = appended.ok_or("a version")?;
    assert_eq!((st.size, st2.size), (2, 4));
    assert_ne!(appended, made);
    assert_eq!(s.list_versions(Path::new("/v"))?[1], ("s.jsonl".to_owned(), appended.clone()));
    Ok(())
}

#[test]
fn a_rename_copies_again_only_over_its_own_copy() -> TestResult {
    let Some(t) = TestPrefix::create("a_rename_copies_again_only_over_its_own_copy")? else { return Ok(()) };
    let s = t.storage()?;
    let other = t.storage()?;
    let (from, to) = (Path::new("/r2/s.jsonl"), Path::new("/r2/t.jsonl"));
    s.write_atomic(from, b"1\n", ExpectedSize::Missing)?;
    // Before the first copy lands, another writer appends to the source, so the rename
    // must copy again; after the first copy, before the source's tombstone, another
    // writer replaces the target.
    let (appender, replacer, again) = (other.clone(), other.clone(), s.clone());
    s.before_head_put(move || {
        appender.append(Path::new("/r2/s.jsonl"), b"2\n").expect("the append lands");
        let replacer = replacer.clone();
        again.before_head_put(move || {
            replacer.write_atomic(Path::new("/r2/t.jsonl"), b"theirs\n", ExpectedSize::Any).expect("the write lands");
        });
    });
    let renamed = s.rename(from, to);
    // The second copy would replace a write that is not this rename's: refused, and
    // both files keep every byte.
    assert!(matches!(renamed, Err(StoreError::Conflict { .. })), "{renamed:?}");
    assert_eq!(s.read(to)?, b"theirs\n");
    assert_eq!(s.read(from)?, b"1\n2\n");
    Ok(())
}

#[test]
fn gc_racing_a_rename_keeps_the_moved_segments() -> TestResult {
    let Some(t) = TestPrefix::create("gc_racing_a_rename_keeps_the_moved_segments")? else { return Ok(()) };
    let s = t.storage()?;
    let other = t.storage()?;
    let (from, to) = (Path::new("/g/a.jsonl"), Path::new("/g/b.jsonl"));
    s.write_atomic(from, b"moved\n", ExpectedSize::Missing)?;
    s.write_atomic(Path::new("/g/c.jsonl"), b"dropped\n", ExpectedSize::Missing)?;
    s.write_atomic(Path::new("/g/c.jsonl"), b"kept\n", ExpectedSize::Any)?;
    // The collection lists the heads; the file is renamed before it reads them, so the
    // old name reads as a tombstone and the new one is in no listing read so far.
    let renamer = other.clone();
    s.after_gc_lists_heads(move || {
        renamer.rename(Path::new("/g/a.jsonl"), Path::new("/g/b.jsonl")).expect("the rename lands");
    });
    let gc = s.gc_segments_older_than(false, Duration::ZERO)?;
    assert_eq!(s.read(to)?, b"moved\n", "{gc:?}");
    assert!(!s.exists(from)?);
    // Only the segment no head names went.
    assert_eq!(gc.deleted.len(), 1, "{gc:?}");
    assert_eq!(s.read(Path::new("/g/c.jsonl"))?, b"kept\n");
    Ok(())
}

#[test]
fn an_old_segment_is_copied_not_reused() -> TestResult {
    let Some(t) = TestPrefix::create("an_old_segment_is_copied_not_reused")? else { return Ok(()) };
    let s = t.storage()?;
    let (p, q) = (Path::new("/c/p.jsonl"), Path::new("/c/q.jsonl"));
    s.write_atomic(p, b"same\n", ExpectedSize::Missing)?;
    // A young segment of the same bytes is reused ...
    s.write_atomic(q, b"same\n", ExpectedSize::Missing)?;
    let (sp, sq) = (s.segments(p)?.ok_or("p")?, s.segments(q)?.ok_or("q")?);
    assert_eq!((sp[0].copy.as_deref(), sq[0].copy.as_deref()), (None, None));
    assert_eq!(t.objects("segments")?.len(), 1);
    // ... an old one is not: the bytes go to a copy under a fresh name, which no
    // collection's earlier listing holds.
    s.reuse_segments_younger_than(Duration::ZERO);
    s.write_atomic(q, b"same\n", ExpectedSize::Bytes(5))?;
    let sq = s.segments(q)?.ok_or("q")?;
    let copy = sq[0].copy.clone().ok_or("a copy")?;
    assert_eq!(sq[0].sha256, sp[0].sha256);
    assert_eq!(t.get(&format!("segments/{}", sq[0].object_name()))?, b"same\n");
    let head: serde_json::Value = serde_json::from_slice(&t.get("heads/c/q.jsonl!")?)?;
    assert_eq!(head["segments"][0]["copy"].as_str(), Some(copy.as_str()));
    assert_eq!(s.read(q)?, b"same\n");
    // The collection keeps both (each is named) and deletes the copy once unnamed.
    assert!(s.gc_segments_older_than(false, Duration::ZERO)?.deleted.is_empty());
    s.write_atomic(q, b"other\n", ExpectedSize::Bytes(5))?;
    let gc = s.gc_segments_older_than(false, Duration::ZERO)?;
    assert_eq!(gc.deleted, [sq[0].object_name()]);
    assert_eq!((s.read(p)?, s.read(q)?), (b"same\n".to_vec(), b"other\n".to_vec()));
    Ok(())
}

#[test]
fn a_part_of_a_small_segment_is_checked_against_its_hash() -> TestResult {
    let Some(t) = TestPrefix::create("a_part_of_a_small_segment_is_checked_against_its_hash")? else {
        return Ok(());
    };
    let s = t.storage()?;
    let p = Path::new("/h/s.jsonl");
    s.write_atomic(p, b"{\"type\":\"session\"}\n", ExpectedSize::Missing)?;
    s.append(p, b"{\"n\":1}\n")?;
    let segs = s.segments(p)?.ok_or("segments")?;
    // The same length, other bytes: only a hash tells them apart.
    t.put(&format!("segments/{}", segs[1].sha256), b"{\"n\":2}\n".to_vec())?;
    let err = s.read_slices(p, 4, 3).err().ok_or("a read of the tail's part is refused")?;
    assert!(matches!(S3Error::find(&err), Some(S3Error::InvalidContent { .. })), "{err:?}");
    assert_eq!(s.read_slices(p, 4, 0)?.0, b"{\"ty", "a part of an intact segment reads");
    Ok(())
}
