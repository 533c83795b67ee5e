//! The storage contract: one list of cases that every [`Storage`] backend must pass.
//!
//! Compiled with the `testing` feature. A backend's test calls [`run_contract`] with a
//! function that makes a fresh storage and one that names a fresh root for each case: a
//! real temporary directory for [`FileStorage`](crate::FileStorage), any unused key prefix
//! for a backend whose directories are key prefixes. Backends that store arbitrary bytes
//! (files, memory, Redis) also run [`run_byte_contract`]; a backend whose content column
//! is text (PostgreSQL's `text` refuses NUL bytes and invalid UTF-8) cannot, and reports
//! such content as an error instead.
//!
//! ```
//! use session_store::{MemoryStorage, contract};
//!
//! contract::run_contract(&|| Box::new(MemoryStorage::new()), &|case| format!("/contract/{case}"))
//!     .expect("the memory storage meets the contract");
//! ```

use std::path::Path;
use std::time::{Duration, Instant};

use session_model::{Dialect, parse_session_bytes};

use crate::clock::{Clock, SystemClock};
use crate::{Change, DirEntry, Durability, EntryKind, ExpectedSize, FileStat, LockWait, Storage, StoreError, Watch};

/// The outcome of one contract case, or of a whole run (every failure, one per line).
pub type CaseResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

type Case = fn(&dyn Storage, &Path) -> CaseResult;

/// The cases every backend passes.
const CASES: &[(&str, Case)] = &[
    ("missing_paths", missing_paths),
    ("write_and_read", write_and_read),
    ("write_new_is_exclusive", write_new_is_exclusive),
    ("write_atomic_checks_size", write_atomic_checks_size),
    ("write_atomic_stream_pieces", write_atomic_stream_pieces),
    ("write_atomic_stream_copies", write_atomic_stream_copies),
    ("append_creates_and_extends", append_creates_and_extends),
    ("append_expected_is_conditional", append_expected_is_conditional),
    ("writer_appends_lines", writer_appends_lines),
    ("writer_follows_replaced_file", writer_follows_replaced_file),
    ("list_is_sorted_files_only", list_is_sorted_files_only),
    ("read_slices_windows", read_slices_windows),
    ("truncate_cuts", truncate_cuts),
    ("rename_replaces", rename_replaces),
    ("delete_with_artifacts", delete_with_artifacts),
    ("locks_exclude", locks_exclude),
    ("ensure_dir_and_stat", ensure_dir_and_stat),
    ("overwrite_prefix_in_place", overwrite_prefix_in_place),
    ("reads_by_position", reads_by_position),
    ("read_dir_reports_kinds", read_dir_reports_kinds),
    ("reads_into_reused_buffers", reads_into_reused_buffers),
    ("remove_empty_dir_keeps_contents", remove_empty_dir_keeps_contents),
    ("directories_move_and_copy", directories_move_and_copy),
    ("watch_reports_writes", watch_reports_writes),
    ("renew_link_and_leftovers", renew_link_and_leftovers),
];

/// The cases of backends that hold any byte sequence (NUL bytes, invalid UTF-8).
const BYTE_CASES: &[(&str, Case)] = &[
    ("truncate_extends_with_zeros", truncate_extends_with_zeros),
    ("arbitrary_bytes_round_trip", arbitrary_bytes_round_trip),
];

/// Returns the names of the cases [`run_contract`] runs, in order.
pub fn case_names() -> impl Iterator<Item = &'static str> {
    CASES.iter().map(|(name, _)| *name)
}

/// Returns the names of the cases [`run_byte_contract`] runs, in order.
pub fn byte_case_names() -> impl Iterator<Item = &'static str> {
    BYTE_CASES.iter().map(|(name, _)| *name)
}

/// Runs every case against a storage made by `make`, under the root `root_for_case` gives for
/// the case's name; reports all failures at once, one `name: error` per line.
///
/// `root_for_case` returns anything that names a path and stays alive for the case (a
/// temporary directory that deletes itself on drop works). Each case gets a new storage from
/// `make` and must get a root no other case uses.
pub fn run_contract<R: AsRef<Path>>(
    make: &dyn Fn() -> Box<dyn Storage>,
    root_for_case: &dyn Fn(&str) -> R,
) -> CaseResult {
    run_cases(CASES, make, root_for_case)
}

/// Runs the cases for backends that store arbitrary bytes, as [`run_contract`] does.
pub fn run_byte_contract<R: AsRef<Path>>(
    make: &dyn Fn() -> Box<dyn Storage>,
    root_for_case: &dyn Fn(&str) -> R,
) -> CaseResult {
    run_cases(BYTE_CASES, make, root_for_case)
}

/// Two writers on two storages made by `make` (two connections, for a server) append 40
/// lines each to two sessions under `root`: blind appends ([`Storage::append`]) never
/// interleave inside a line, and checked appends ([`Storage::append_expected`], reloading
/// the size after a conflict) lose no line and duplicate none.
pub fn racing_writers(
    make: &dyn Fn() -> Result<Box<dyn Storage>, Box<dyn std::error::Error + Send + Sync>>,
    root: &Path,
) -> CaseResult {
    let (blind, checked) = (root.join("blind.jsonl"), root.join("checked.jsonl"));
    let writers = [make()?, make()?];
    std::thread::scope(|scope| -> CaseResult {
        let handles: Vec<_> = writers
            .iter()
            .enumerate()
            .map(|(w, s)| {
                let (blind, checked) = (&blind, &checked);
                scope.spawn(move || -> Result<(), StoreError> {
                    for i in 0..40 {
                        let line = format!("{{\"w\":{w},\"i\":{i},\"pad\":\"{}\"}}\n", "x".repeat(100 + i));
                        s.append(blind, line.as_bytes())?;
                        loop {
                            let size = s.stat(checked)?.map(|st| st.size);
                            let expected = size.map_or(ExpectedSize::Missing, ExpectedSize::Bytes);
                            match s.append_expected(checked, line.as_bytes(), expected) {
                                Ok(()) => break,
                                Err(StoreError::Conflict { .. }) => continue,
                                Err(e) => return Err(e),
                            }
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| "writer panicked")??;
        }
        Ok(())
    })?;
    let want: Vec<(u64, u64)> = (0..2).flat_map(|w| (0..40).map(move |i| (w, i))).collect();
    for p in [&blind, &checked] {
        let text = String::from_utf8(writers[0].read(p)?)?;
        let mut seen = Vec::new();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line)?;
            seen.push((v["w"].as_u64().ok_or("w")?, v["i"].as_u64().ok_or("i")?));
        }
        seen.sort_unstable();
        check(seen == want, &format!("{}: every line once, whole: {seen:?}", p.display()))?;
    }
    Ok(())
}

fn run_cases<R: AsRef<Path>>(
    cases: &[(&str, Case)],
    make: &dyn Fn() -> Box<dyn Storage>,
    root_for_case: &dyn Fn(&str) -> R,
) -> CaseResult {
    let mut failures = Vec::new();
    for (name, case) in cases {
        let root = root_for_case(name);
        let storage = make();
        if let Err(e) = case(storage.as_ref(), root.as_ref()) {
            failures.push(format!("{name}: {e}"));
        }
    }
    if failures.is_empty() { Ok(()) } else { Err(failures.join("\n").into()) }
}

fn check(cond: bool, what: &str) -> CaseResult {
    if cond { Ok(()) } else { Err(what.to_owned().into()) }
}

/// What a blob store asks of its storage: a file renewed keeps its bytes, a second name
/// holds the same bytes and is never made over a file, a whole write without the publish
/// lock replaces a file, and a sweep of a folder with no dead writer's file removes
/// nothing (nor leaves a lock file of its own).
fn renew_link_and_leftovers(s: &dyn Storage, root: &Path) -> CaseResult {
    let (a, b) = (root.join("a.jsonl"), root.join("a.jsonl.png"));
    s.ensure_dir(root)?;
    s.write(&a, b"{\"blob\":1}\n")?;
    let before = s.stat(&a)?.ok_or("a written file has a stat")?;
    s.renew(&a)?;
    let after = s.stat(&a)?.ok_or("a renewed file has a stat")?;
    check(s.read(&a)? == b"{\"blob\":1}\n", "renew changed the bytes")?;
    // The file storage sets whole milliseconds: a renewal may land within the one written.
    check(after.mtime_ms + 1 >= before.mtime_ms, "renew moved the time back")?;
    check(matches!(s.renew(&root.join("none.jsonl")), Err(StoreError::NotFound { .. })), "renew of no file")?;
    s.link_or_copy(&a, &b)?;
    check(s.read(&b)? == b"{\"blob\":1}\n", "the second name holds other bytes")?;
    s.write(&root.join("other.jsonl"), b"x\n")?;
    let again = s.link_or_copy(&root.join("other.jsonl"), &b);
    check(matches!(again, Err(StoreError::AlreadyExists { .. })), "link_or_copy over a file")?;
    check(s.read(&b)? == b"{\"blob\":1}\n", "a refused link_or_copy changed the file")?;
    s.write_immutable(&root.join("other.jsonl"), b"y\n")?;
    check(s.read(&root.join("other.jsonl"))? == b"y\n", "write_immutable replaces the file whole")?;
    check(s.remove_leftovers(root)? == 0, "a sweep removed a live file")?;
    let mut names = s.list(root)?;
    names.sort();
    check(names == ["a.jsonl", "a.jsonl.png", "other.jsonl"], "the folder after the sweep")
}

fn missing_paths(s: &dyn Storage, root: &Path) -> CaseResult {
    let p = root.join("nope.jsonl");
    check(!s.exists(&p)?, "exists on a missing file")?;
    check(s.stat(&p)?.is_none(), "stat on a missing file")?;
    check(matches!(s.read(&p), Err(StoreError::NotFound { .. })), "read of a missing file is NotFound")?;
    check(matches!(s.read_slices(&p, 1, 1), Err(StoreError::NotFound { .. })), "read_slices NotFound")?;
    check(matches!(s.unlink(&p), Err(StoreError::NotFound { .. })), "unlink NotFound")?;
    check(matches!(s.rename(&p, &root.join("x")), Err(StoreError::NotFound { .. })), "rename NotFound")?;
    check(matches!(s.truncate(&p, 0), Err(StoreError::NotFound { .. })), "truncate NotFound")?;
    check(s.list(&root.join("no-dir"))?.is_empty(), "list of a missing dir")?;
    Ok(())
}

fn write_and_read(s: &dyn Storage, root: &Path) -> CaseResult {
    let p = root.join("a/b/s.jsonl");
    s.write(&p, b"hello\nworld\n")?;
    check(s.read(&p)? == b"hello\nworld\n", "read back")?;
    check(s.exists(&p)? && s.exists(&root.join("a/b"))?, "file and created parents exist")?;
    let st = s.stat(&p)?.ok_or("stat after write")?;
    check(st.size == 12 && st.is_file, "stat size and kind")?;
    s.write(&p, b"x")?;
    check(s.read(&p)? == b"x", "shorter write truncates")?;
    s.write(&p, b"")?;
    check(s.read(&p)?.is_empty(), "empty write")?;
    Ok(())
}

fn write_new_is_exclusive(s: &dyn Storage, root: &Path) -> CaseResult {
    let p = root.join("d/new.jsonl");
    s.write_new(&p, b"first\n")?;
    let again = s.write_new(&p, b"second\n");
    check(matches!(again, Err(StoreError::AlreadyExists { .. })), "second exclusive create fails")?;
    check(s.read(&p)? == b"first\n", "content kept")?;
    Ok(())
}

fn write_atomic_checks_size(s: &dyn Storage, root: &Path) -> CaseResult {
    let p = root.join("x/s.jsonl");
    match s.write_atomic(&p, b"a", ExpectedSize::Bytes(1)) {
        Err(StoreError::Conflict { expected: Some(1), found: None, .. }) => {}
        other => return Err(format!("expected conflict on a missing file, got {other:?}").into()),
    }
    check(!s.exists(&p)?, "failed CAS creates nothing")?;
    s.write_atomic(&p, b"one\n", ExpectedSize::Missing)?;
    check(s.read(&p)? == b"one\n", "created")?;
    match s.write_atomic(&p, b"two\n", ExpectedSize::Missing) {
        Err(e @ StoreError::Conflict { expected: None, found: Some(4), .. }) => {
            let msg = e.to_string();
            check(msg.starts_with("session file changed before rewrite: "), "conflict message")?;
            check(msg.contains("(expected missing, found 4 bytes)"), "conflict sizes in message")?;
        }
        other => return Err(format!("expected conflict on an existing file, got {other:?}").into()),
    }
    let wrong = s.write_atomic(&p, b"two\n", ExpectedSize::Bytes(3));
    check(matches!(wrong, Err(StoreError::Conflict { expected: Some(3), found: Some(4), .. })), "size mismatch")?;
    check(s.read(&p)? == b"one\n", "conflict leaves the file")?;
    s.write_atomic(&p, b"two two\n", ExpectedSize::Bytes(4))?;
    check(s.read(&p)? == b"two two\n", "replaced")?;
    s.write_atomic(&p, b"3\n", ExpectedSize::Any)?;
    check(s.read(&p)? == b"3\n", "replaced without check")?;
    check(s.list(&root.join("x"))? == ["s.jsonl"], "no visible temp files")?;
    Ok(())
}

fn write_atomic_stream_pieces(s: &dyn Storage, root: &Path) -> CaseResult {
    let p = root.join("x").join("s.jsonl");
    let n = s.write_atomic_stream(&p, ExpectedSize::Missing, Durability::None, &mut |w| {
        for i in 0..1000 {
            writeln!(w, "{{\"n\":{i}}}")?;
        }
        Ok(())
    })?;
    let expected: String = (0..1000).map(|i| format!("{{\"n\":{i}}}\n")).collect();
    check(s.read(&p)? == expected.as_bytes() && n == expected.len() as u64, "pieces written in order, size returned")?;
    let failed = s.write_atomic_stream(&p, ExpectedSize::Any, Durability::Fsync, &mut |w| {
        w.write_all(b"partial")?;
        Err(std::io::Error::other("producer failed"))
    });
    let producer = failed.as_ref().err().and_then(|e| std::error::Error::source(e)).map(ToString::to_string);
    check(producer.as_deref() == Some("producer failed"), &format!("a failing producer fails the write: {failed:?}"))?;
    check(s.read(&p)? == expected.as_bytes(), "and leaves the old file")?;
    let conflict = s.write_atomic_stream(&p, ExpectedSize::Bytes(1), Durability::Fsync, &mut |w| w.write_all(b"new\n"));
    check(matches!(conflict, Err(StoreError::Conflict { .. })), "the size check applies")?;
    check(s.list(&root.join("x"))? == ["s.jsonl"], "no visible temp files")?;
    // Vectored pieces, small and larger than any buffer, arrive whole and in order.
    let big = vec![b'b'; 3 << 20];
    let pieces: Vec<&[u8]> = vec![b"a\n", &big, b"\n", b"c\n"];
    let v = root.join("x").join("v.jsonl");
    let n = s.write_atomic_stream(&v, ExpectedSize::Missing, Durability::Fsync, &mut |w| {
        let mut slices: Vec<std::io::IoSlice<'_>> = pieces.iter().map(|p| std::io::IoSlice::new(p)).collect();
        let mut bufs = &mut slices[..];
        while !bufs.is_empty() {
            let k = w.write_vectored(bufs)?;
            std::io::IoSlice::advance_slices(&mut bufs, k);
        }
        Ok(())
    })?;
    let want = pieces.concat();
    check(s.read(&v)? == want && n == want.len() as u64, "vectored pieces written in order, size returned")?;
    Ok(())
}

/// Runs of another file's bytes, copied into a streamed write between written pieces
/// ([`crate::Sink::copy_from`]): from a file of the same storage (which the file storage
/// copies in the kernel) and from bytes in memory; a run past the source's end fails
/// the write and leaves nothing.
fn write_atomic_stream_copies(s: &dyn Storage, root: &Path) -> CaseResult {
    let source = root.join("x").join("source.jsonl");
    let lines: String = (0..3000).map(|i| format!("{{\"line\":{i},\"pad\":\"{}\"}}\n", "p".repeat(i % 97))).collect();
    s.write_atomic(&source, lines.as_bytes(), ExpectedSize::Missing)?;
    let (_, reader) = s.open_reader(&source)?;
    let (at, len) = (lines.len() as u64 / 3, lines.len() as u64 / 2);
    let memory = lines.as_bytes().to_vec();
    let p = root.join("x").join("copy.jsonl");
    let n = s.write_atomic_stream(&p, ExpectedSize::Missing, Durability::Fsync, &mut |w| {
        w.write_all(b"head\n")?;
        w.copy_from(&*reader, at, len)?;
        w.write_all(b"\nmiddle\n")?;
        w.copy_from(&memory, 0, 5)?;
        w.copy_from(&*reader, 0, lines.len() as u64)
    })?;
    let range = |a: u64, l: u64| &lines.as_bytes()[a as usize..(a + l) as usize];
    let want = [b"head\n", range(at, len), b"\nmiddle\n", range(0, 5), lines.as_bytes()].concat();
    check(s.read(&p)? == want && n == want.len() as u64, "copied runs land between the written pieces, size returned")?;
    let past_end = s.write_atomic_stream(&p, ExpectedSize::Any, Durability::Fsync, &mut |w| {
        w.write_all(b"new\n")?;
        w.copy_from(&*reader, lines.len() as u64 - 10, 11)
    });
    check(
        past_end.as_ref().err().and_then(StoreError::io_kind) == Some(std::io::ErrorKind::UnexpectedEof),
        &format!("a run past the source's end fails the write: {past_end:?}"),
    )?;
    check(s.read(&p)? == want, "and leaves the old file")?;
    let mut names = s.list(&root.join("x"))?;
    names.sort();
    check(names == ["copy.jsonl", "source.jsonl"], &format!("no visible temp files: {names:?}"))?;
    Ok(())
}

fn append_creates_and_extends(s: &dyn Storage, root: &Path) -> CaseResult {
    let p = root.join("ap/s.jsonl");
    s.append(&p, b"1\n")?;
    s.append(&p, b"2\n")?;
    s.append(&p, b"")?;
    check(s.read(&p)? == b"1\n2\n", "appended")?;
    Ok(())
}

fn append_expected_is_conditional(s: &dyn Storage, root: &Path) -> CaseResult {
    let p = root.join("ape/s.jsonl");
    let stale = s.append_expected(&p, b"x\n", ExpectedSize::Bytes(0));
    check(
        matches!(stale, Err(StoreError::Conflict { expected: Some(0), found: None, .. })),
        "a missing file is no 0-byte file",
    )?;
    check(!s.exists(&p)?, "a failed conditional append creates nothing")?;
    s.append_expected(&p, b"1\n", ExpectedSize::Missing)?;
    check(s.read(&p)? == b"1\n", "created")?;
    s.append_expected(&p, b"2\n", ExpectedSize::Bytes(2))?;
    check(s.read(&p)? == b"1\n2\n", "appended at the expected size")?;
    let seen = s.stat(&p)?;
    let wrong = s.append_expected(&p, b"3\n", ExpectedSize::Bytes(2));
    check(
        matches!(wrong, Err(StoreError::Conflict { expected: Some(2), found: Some(4), .. })),
        "a grown file refuses",
    )?;
    let again = s.append_expected(&p, b"3\n", ExpectedSize::Missing);
    check(
        matches!(again, Err(StoreError::Conflict { expected: None, found: Some(4), .. })),
        "an existing file is not missing",
    )?;
    check(s.read(&p)? == b"1\n2\n", "a refused append changes nothing")?;
    s.append_expected(&p, b"3\n", ExpectedSize::unchanged(seen.as_ref()))?;
    check(s.read(&p)? == b"1\n2\n3\n", "appended to the file seen")?;
    Ok(())
}

fn writer_appends_lines(s: &dyn Storage, root: &Path) -> CaseResult {
    for (i, d) in [Durability::None, Durability::Flush, Durability::Fsync].into_iter().enumerate() {
        let p = root.join(format!("w{i}/s.jsonl"));
        let mut w = s.open_writer(&p, d)?;
        check(s.exists(&p)? && s.read(&p)?.is_empty(), "open creates an empty file")?;
        w.append(b"{\"a\":1}\n")?;
        check(s.read(&p)? == b"{\"a\":1}\n", "readers see an append at once")?;
        w.append(b"{\"b\":2}\n")?;
        w.flush()?;
        check(w.error().is_none(), "no latched error")?;
        w.close()?;
        check(s.read(&p)? == b"{\"a\":1}\n{\"b\":2}\n", "both lines")?;
        let mut w = s.open_writer(&p, d)?;
        w.append(b"3\n")?;
        w.close()?;
        check(s.read(&p)?.ends_with(b"}\n3\n"), "reopening appends")?;
    }
    Ok(())
}

fn overwrite_prefix_in_place(s: &dyn Storage, root: &Path) -> CaseResult {
    let p = root.join("x/s.jsonl");
    let none = Durability::None;
    let missing = s.overwrite_prefix(&p, b"ab", ExpectedSize::Bytes(4), none);
    check(matches!(missing, Err(StoreError::Conflict { expected: Some(4), found: None, .. })), "missing, expected")?;
    let missing = s.overwrite_prefix(&p, b"ab", ExpectedSize::Any, none);
    check(matches!(missing, Err(StoreError::NotFound { .. })), "missing")?;
    check(!s.exists(&p)?, "nothing created")?;
    s.write_atomic(&p, b"0123456789\n", ExpectedSize::Missing)?;
    s.overwrite_prefix(&p, b"abc", ExpectedSize::Bytes(11), Durability::Fsync)?;
    check(s.read(&p)? == b"abc3456789\n", "the start replaced, the rest kept")?;
    s.overwrite_prefix(&p, b"XY", ExpectedSize::Any, none)?;
    check(s.read(&p)? == b"XYc3456789\n", "replaced again")?;
    let wrong = s.overwrite_prefix(&p, b"zz", ExpectedSize::Bytes(10), none);
    check(matches!(wrong, Err(StoreError::Conflict { expected: Some(10), found: Some(11), .. })), "size mismatch")?;
    let long = s.overwrite_prefix(&p, &[b'q'; 12], ExpectedSize::Any, none);
    check(
        matches!(long, Err(StoreError::Conflict { expected: Some(12), found: Some(11), .. })),
        "longer than the file",
    )?;
    check(s.read(&p)? == b"XYc3456789\n", "refusals change nothing")?;
    // An open append writer still appends at the end.
    let mut w = s.open_writer(&p, none)?;
    w.append(b"line\n")?;
    s.overwrite_prefix(&p, b"__", ExpectedSize::Bytes(16), none)?;
    w.append(b"more\n")?;
    w.close()?;
    check(s.read(&p)? == b"__c3456789\nline\nmore\n", "appends around an overwrite")?;
    Ok(())
}

/// Parses the session at `p` by position, as the session manager does.
fn parsed(s: &dyn Storage, p: &Path, dialect: Dialect) -> Result<session_model::ParsedFile, StoreError> {
    let (st, reader) = s.open_reader(p)?;
    let size = st.size;
    session_model::parse_session_at(&*reader, size, dialect).map_err(|e| StoreError::io(crate::Op::Read, p, e))
}

fn reads_by_position(s: &dyn Storage, root: &Path) -> CaseResult {
    let p = root.join("x/s.jsonl");
    check(matches!(s.open_reader(&p).err(), Some(StoreError::NotFound { .. })), "missing")?;
    check(matches!(parsed(s, &p, Dialect::Pi).err(), Some(StoreError::NotFound { .. })), "missing, parsed")?;
    // Large enough to be parsed in pieces, with a torn last line.
    let mut text =
        String::from("{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n");
    let mut i = 0;
    while text.len() < 5 << 20 {
        let pad = "é\\n".repeat(i % 500);
        text.push_str(&format!("{{\"type\":\"custom\",\"id\":\"e{i}\",\"parentId\":null,\"data\":\"{pad}\"}}\n"));
        i += 1;
    }
    text.push_str("{\"type\":");
    s.write_atomic(&p, text.as_bytes(), ExpectedSize::Missing)?;
    let (st, reader) = s.open_reader(&p)?;
    let size = st.size;
    check(size == text.len() as u64, "the size")?;
    for (at, len) in [(0, 10), (4 << 20, 100), (size - 5, 100), (size, 10)] {
        let mut buf = vec![0u8; len];
        let got = reader.read_full_at(&mut buf, at)?;
        let start = (at as usize).min(text.len());
        check(buf[..got] == text.as_bytes()[start..(start + len).min(text.len())], "bytes at an offset")?;
    }
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let parsed = parsed(s, &p, dialect)?;
        let whole = parse_session_bytes(text.as_bytes(), dialect);
        check(parsed.records == whole.records, "the records")?;
        check(parsed.diagnostics == whole.diagnostics, "the diagnostics")?;
        check(parsed.records.len() == i + 1, "every entry")?;
    }
    Ok(())
}

fn writer_follows_replaced_file(s: &dyn Storage, root: &Path) -> CaseResult {
    let p = root.join("s.jsonl");
    let mut w = s.open_writer(&p, Durability::None)?;
    w.append(b"a\n")?;
    s.write_atomic(&p, b"X\n", ExpectedSize::Bytes(2))?;
    w.append(b"b\n")?;
    w.close()?;
    check(s.read(&p)? == b"X\nb\n", "append after a rewrite lands in the new file")?;
    Ok(())
}

fn list_is_sorted_files_only(s: &dyn Storage, root: &Path) -> CaseResult {
    let d = root.join("l");
    for name in ["b.jsonl", "a.jsonl", "c.txt", ".hidden.jsonl", "sub/x.jsonl"] {
        s.write(&d.join(name), b"x")?;
    }
    s.write(&d.join("b.jsonl"), b"xyz")?;
    let names = s.list(&d)?;
    check(names == ["a.jsonl", "b.jsonl", "c.txt"], &format!("list gave {names:?}"))?;
    let stats: Vec<(String, u64, bool)> =
        s.list_stats(&d)?.into_iter().map(|(name, st)| (name, st.size, st.is_file)).collect();
    let want = [("a.jsonl", 1, true), ("b.jsonl", 3, true), ("c.txt", 1, true)].map(|(n, z, f)| (n.to_owned(), z, f));
    check(stats == want, &format!("list_stats gave {stats:?}"))?;
    check(s.list_stats(&root.join("missing"))?.is_empty(), "list_stats of a missing folder")?;
    // Versions: the same files; a rewrite of the same size changes its file's only.
    let before = s.list_versions(&d)?;
    let names: Vec<&str> = before.iter().map(|(n, _)| n.as_str()).collect();
    check(names == ["a.jsonl", "b.jsonl", "c.txt"], &format!("list_versions gave {before:?}"))?;
    // Versions made of millisecond times tell apart writes in different milliseconds
    // (within one, `FileIdentity::RACY_NS` warns): the rewrite comes in a later one.
    std::thread::sleep(Duration::from_millis(3));
    s.write_atomic(&d.join("b.jsonl"), b"xyw", ExpectedSize::Bytes(3))?;
    let after = s.list_versions(&d)?;
    check(after[0] == before[0] && after[2] == before[2], "an untouched file keeps its version")?;
    check(after[1].0 == "b.jsonl" && after[1].1 != before[1].1, "a rewritten file gets a new version")?;
    check(s.list_versions(&root.join("missing"))?.is_empty(), "list_versions of a missing folder")?;
    let (st, version) = s.stat_version(&d.join("b.jsonl"))?.ok_or("stat_version of a file")?;
    check(
        st.size == 3 && version == after[1].1,
        &format!("stat_version gave {version:?}, the listing {:?}", after[1].1),
    )?;
    check(s.stat_version(&d.join("none.jsonl"))?.is_none(), "stat_version of a missing file")?;
    check(s.stat_version(&d.join("sub"))?.is_none(), "stat_version of a folder")?;
    // A write that names the version it made names the one a listing then gives.
    std::thread::sleep(Duration::from_millis(3));
    let made = s.write_atomic_versioned(&d.join("b.jsonl"), b"xyv", ExpectedSize::Bytes(3))?;
    check(made.as_ref().is_none_or(|(_, v)| *v != after[1].1), "a write returned the version before it")?;
    versioned_as_listed(s, &d, "b.jsonl", made, 3)?;
    std::thread::sleep(Duration::from_millis(3));
    let made = s.append_expected_versioned(&d.join("b.jsonl"), b"+", ExpectedSize::Bytes(3))?;
    versioned_as_listed(s, &d, "b.jsonl", made, 4)?;
    check(s.read(&d.join("b.jsonl"))? == b"xyv+", "the versioned writes landed")?;
    Ok(())
}

/// Checks that the stat and version a write returned (if any) are the file's now.
fn versioned_as_listed(
    s: &dyn Storage,
    d: &Path,
    name: &str,
    made: Option<(FileStat, String)>,
    size: u64,
) -> CaseResult {
    let Some((st, version)) = made else { return Ok(()) };
    let listed = s.list_versions(d)?.into_iter().find(|(n, _)| n == name).map(|(_, v)| v);
    check(
        st.size == size && listed.as_deref() == Some(version.as_str()),
        &format!("a write returned {st:?} {version:?}; the listing gives {listed:?}"),
    )?;
    let now = s.stat_version(&d.join(name))?.map(|(st, _)| st.mtime_ms);
    check(now == Some(st.mtime_ms), &format!("a write returned mtime {}; a stat gives {now:?}", st.mtime_ms))
}

fn read_slices_windows(s: &dyn Storage, root: &Path) -> CaseResult {
    let p = root.join("r.jsonl");
    s.write(&p, b"0123456789")?;
    let cases: [(u64, u64, &[u8], &[u8]); 6] = [
        (4, 3, b"0123", b"789"),
        (20, 3, b"0123456789", b"789"),
        (10, 30, b"0123456789", b"0123456789"),
        (4, 0, b"0123", b""),
        (0, 2, b"", b"89"),
        (8, 5, b"01234567", b"56789"),
    ];
    for (prefix, suffix, head, tail) in cases {
        let (h, t) = s.read_slices(&p, prefix, suffix)?;
        check(h == head && t == tail, &format!("slices {prefix},{suffix}: {h:?} {t:?}"))?;
    }
    Ok(())
}

fn read_dir_reports_kinds(s: &dyn Storage, root: &Path) -> CaseResult {
    check(s.read_dir(&root.join("missing"))?.is_empty(), "a missing directory has no entries")?;
    let dir = root.join("d");
    s.write(&dir.join("b.jsonl"), b"x")?;
    s.write(&dir.join("a.jsonl"), b"y")?;
    s.write(&dir.join(".hidden.jsonl"), b"h")?;
    s.write(&dir.join("bucket/c.jsonl"), b"z")?;
    s.write(&dir.join("bucket/deep/e.jsonl"), b"e")?;
    s.write(&dir.join("bucket2/f.jsonl"), b"f")?;
    s.write(&root.join("dd/g.jsonl"), b"g")?;
    s.ensure_dir(&dir.join("empty"))?;
    let sorted = |mut v: Vec<DirEntry>| {
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v.into_iter().map(|e| (e.name, e.kind)).collect::<Vec<_>>()
    };
    let entries = sorted(s.read_dir(&dir)?);
    let names: Vec<&str> = entries.iter().map(|(n, _)| n.as_str()).collect();
    check(names.len() == 6, &format!("entries {names:?}"))?;
    let (f, d) = (EntryKind::File, EntryKind::Dir);
    let want: Vec<(String, EntryKind)> =
        [(".hidden.jsonl", f), ("a.jsonl", f), ("b.jsonl", f), ("bucket", d), ("bucket2", d), ("empty", d)]
            .into_iter()
            .map(|(n, k)| (n.to_owned(), k))
            .collect();
    check(entries == want, &format!("entries of d: {entries:?}"))?;
    let below = sorted(s.read_dir(&dir.join("bucket"))?);
    check(below == [("c.jsonl".to_owned(), f), ("deep".to_owned(), d)], &format!("entries of the bucket: {below:?}"))?;
    let deeper = sorted(s.read_dir(&dir.join("bucket/deep"))?);
    check(deeper == [("e.jsonl".to_owned(), f)], &format!("entries of bucket/deep: {deeper:?}"))?;
    check(s.read_dir(&dir.join("empty"))?.is_empty(), "an empty directory has no entries")?;
    for (name, kind) in &entries {
        let stat = s.stat(&dir.join(name))?;
        check(stat.is_some_and(|st| st.is_file == (*kind == EntryKind::File)), &format!("stat of {name} agrees"))?;
    }
    let top = sorted(s.read_dir(root)?);
    check(top == [("d".to_owned(), d), ("dd".to_owned(), d)], &format!("entries of the root: {top:?}"))?;
    Ok(())
}

fn reads_into_reused_buffers(s: &dyn Storage, root: &Path) -> CaseResult {
    let p = root.join("r.jsonl");
    check(matches!(s.read_into(&p, &mut Vec::new()), Err(StoreError::NotFound { .. })), "missing file")?;
    s.write(&p, b"0123456789")?;
    // A buffer holding more than the file: only the first bytes are the file.
    let mut buf = vec![7u8; 64];
    let (stat, n) = s.read_into(&p, &mut buf)?;
    check(stat.size == 10 && stat.is_file && &buf[..n] == b"0123456789", "whole read")?;
    let cases: [(u64, u64, &[u8], &[u8]); 6] = [
        (4, 3, b"0123", b"789"),
        (20, 3, b"0123456789", b"789"),
        (10, 30, b"0123456789", b"0123456789"),
        (4, 0, b"0123", b""),
        (0, 2, b"", b"89"),
        (4, 30, b"0123", b"0123456789"),
    ];
    let (mut head, mut tail) = (vec![9u8; 3], vec![9u8; 50]);
    for (prefix, suffix, want_head, want_tail) in cases {
        let (stat, h, t) = s.read_slices_into(&p, prefix, suffix, &mut head, &mut tail)?;
        check(stat.size == 10, "stat of the windows")?;
        check(
            &head[..h] == want_head && &tail[..t] == want_tail,
            &format!("windows {prefix},{suffix}: {:?} {:?}", &head[..h], &tail[..t]),
        )?;
        check(s.read_slices(&p, prefix, suffix)? == (head[..h].to_vec(), tail[..t].to_vec()), "same as read_slices")?;
    }
    Ok(())
}

fn remove_empty_dir_keeps_contents(s: &dyn Storage, root: &Path) -> CaseResult {
    let full = root.join("full");
    s.write(&full.join("a.jsonl"), b"x")?;
    s.remove_empty_dir(&full)?;
    check(s.read(&full.join("a.jsonl"))? == b"x", "a directory with a file stays")?;
    s.remove_empty_dir(&root.join("never-made"))?;
    let empty = root.join("empty");
    s.ensure_dir(&empty)?;
    s.remove_empty_dir(&empty)?;
    check(s.read_dir(root)?.iter().all(|e| e.name != "empty"), "the empty directory is gone")?;
    Ok(())
}

/// `move_dir` and `copy_dir` (the artifacts directory of a session): a missing source is
/// nothing to do, a free target takes the directory whole, an existing one gets the
/// entries whose names are free, and the returned renames undo the move.
fn directories_move_and_copy(s: &dyn Storage, root: &Path) -> CaseResult {
    let (a, b, c) = (root.join("a"), root.join("b"), root.join("c"));
    check(s.move_dir(&a, &b)?.is_empty(), "a missing source moves nothing")?;
    s.copy_dir(&a, &b)?;
    check(!s.exists(&b)?, "a missing source copies nothing")?;
    s.write(&a.join("x.log"), b"x")?;
    s.write(&a.join("sub/y.md"), b"y")?;
    s.copy_dir(&a, &c)?;
    check(s.read(&c.join("sub/y.md"))? == b"y" && s.read(&a.join("x.log"))? == b"x", "copied")?;
    let moves = s.move_dir(&a, &b)?;
    check(s.read(&b.join("x.log"))? == b"x" && s.read(&b.join("sub/y.md"))? == b"y", "moved")?;
    check(!s.exists(&a.join("x.log"))? && !s.exists(&a.join("sub/y.md"))?, "the source is gone")?;
    for (from, to) in moves.iter().rev() {
        s.rename(to, from)?;
    }
    check(s.read(&a.join("sub/y.md"))? == b"y" && !s.exists(&b.join("x.log"))?, "undone")?;
    // Merging: a taken name stays at the source.
    s.write(&b.join("x.log"), b"theirs")?;
    s.move_dir(&a, &b)?;
    check(s.read(&b.join("x.log"))? == b"theirs", "nothing overwritten")?;
    check(s.read(&a.join("x.log"))? == b"x", "the clash stays behind")?;
    check(s.read(&b.join("sub/y.md"))? == b"y", "the rest moved")?;
    Ok(())
}

fn truncate_cuts(s: &dyn Storage, root: &Path) -> CaseResult {
    let p = root.join("t");
    s.write(&p, b"abcdef")?;
    s.truncate(&p, 2)?;
    check(s.read(&p)? == b"ab", "cut")?;
    s.truncate(&p, 0)?;
    check(s.read(&p)?.is_empty() && s.exists(&p)?, "cut to nothing, the file stays")?;
    Ok(())
}

fn truncate_extends_with_zeros(s: &dyn Storage, root: &Path) -> CaseResult {
    let p = root.join("t");
    s.write(&p, b"abcdef")?;
    s.truncate(&p, 2)?;
    s.truncate(&p, 4)?;
    check(s.read(&p)? == b"ab\0\0", "extended with zeros")?;
    Ok(())
}

fn arbitrary_bytes_round_trip(s: &dyn Storage, root: &Path) -> CaseResult {
    let p = root.join("bin/s.jsonl");
    let bytes: Vec<u8> = (0..=255u8).chain([0xff, 0xfe, 0, 0xc3]).collect();
    s.write_atomic(&p, &bytes, ExpectedSize::Missing)?;
    check(s.read(&p)? == bytes, "every byte value kept")?;
    s.append(&p, b"\0\xe9\n")?;
    check(s.read(&p)?.ends_with(b"\xc3\0\xe9\n"), "appended bytes kept")?;
    check(s.stat(&p)?.map(|st| st.size) == Some(bytes.len() as u64 + 3), "size in bytes")?;
    Ok(())
}

fn rename_replaces(s: &dyn Storage, root: &Path) -> CaseResult {
    let a = root.join("a.jsonl");
    let b = root.join("sub/b.jsonl");
    s.write(&a, b"A")?;
    s.write(&b, b"B")?;
    s.rename(&a, &b)?;
    check(!s.exists(&a)?, "source gone")?;
    check(s.read(&b)? == b"A", "target replaced")?;
    Ok(())
}

fn delete_with_artifacts(s: &dyn Storage, root: &Path) -> CaseResult {
    let p = root.join("s.jsonl");
    s.write(&p, b"x")?;
    s.write(&root.join("s/artifact.txt"), b"a")?;
    s.write(&root.join("s/deep/more.txt"), b"a")?;
    s.write(&root.join("s.jsonl.123.bak"), b"old")?;
    s.write(&root.join("s.jsonl.bak"), b"not a backup name")?;
    s.write(&root.join("other.jsonl"), b"keep")?;
    s.delete_with_artifacts(&p)?;
    check(!s.exists(&p)?, "journal gone")?;
    check(!s.exists(&root.join("s/artifact.txt"))? && !s.exists(&root.join("s/deep/more.txt"))?, "artifacts gone")?;
    check(!s.exists(&root.join("s.jsonl.123.bak"))?, "backup gone")?;
    check(s.exists(&root.join("s.jsonl.bak"))? && s.exists(&root.join("other.jsonl"))?, "others kept")?;
    s.delete_with_artifacts(&p)?;
    Ok(())
}

fn locks_exclude(s: &dyn Storage, root: &Path) -> CaseResult {
    let p = root.join("lk/s.jsonl");
    let first = s.lock(&p, LockWait::NoWait)?;
    check(first.path() == p, "lock names its file")?;
    check(matches!(s.lock(&p, LockWait::NoWait), Err(StoreError::Locked { .. })), "second lock refused")?;
    let t0 = Instant::now();
    let waited = s.lock(&p, LockWait::Timeout(Duration::from_millis(60)));
    check(matches!(waited, Err(StoreError::Locked { .. })), "timed lock refused")?;
    check(t0.elapsed() >= Duration::from_millis(50), "timed lock waited")?;
    let other = s.lock(&root.join("lk/t.jsonl"), LockWait::NoWait)?;
    first.release()?;
    let again = s.lock(&p, LockWait::NoWait)?;
    drop(again);
    drop(s.lock(&p, LockWait::NoWait)?);
    drop(other);
    // A waiter gets the lock once the holder lets go.
    let held = s.lock(&p, LockWait::NoWait)?;
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| s.lock(&p, LockWait::Timeout(Duration::from_secs(5))).map(drop));
        std::thread::sleep(Duration::from_millis(20));
        drop(held);
        waiter.join().map_err(|_| "waiter panicked")?.map_err(|e| e.to_string())
    })?;
    Ok(())
}

fn ensure_dir_and_stat(s: &dyn Storage, root: &Path) -> CaseResult {
    let d = root.join("e/f/g");
    s.ensure_dir(&d)?;
    s.ensure_dir(&d)?;
    check(s.exists(&d)?, "dir exists")?;
    let st = s.stat(&d)?.ok_or("dir stat")?;
    check(!st.is_file, "dir is not a file")?;
    check(s.list(&d)?.is_empty(), "empty dir lists nothing")?;
    let before = SystemClock.now_ms();
    let p = d.join("s.jsonl");
    s.write(&p, b"x")?;
    let m = s.stat(&p)?.ok_or("file stat")?.mtime_ms;
    let after = SystemClock.now_ms();
    check(m >= before - 2_000 && m <= after + 2_000, &format!("mtime {m} not within [{before}, {after}]"))?;
    Ok(())
}

/// Waits (up to ten seconds) for a change that satisfies `want`, skipping earlier ones.
fn wait_for(w: &mut dyn Watch, want: impl Fn(&Change) -> bool, what: &str) -> CaseResult {
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        if let Some(c) = w.next(left)?
            && want(&c)
        {
            return Ok(());
        }
    }
    Err(format!("{what}: not reported within ten seconds").into())
}

/// Every backend of ours watches a file: appends (plain and through a writer), atomic
/// rewrites, deletion and a rename onto the path are reported with the size left.
fn watch_reports_writes(s: &dyn Storage, root: &Path) -> CaseResult {
    s.ensure_dir(root)?;
    let p = root.join("watched.jsonl");
    let other = root.join("other.jsonl");
    s.write(&p, b"a\n")?;
    let mut w = s.watch(&p)?.ok_or("the storage cannot watch a file")?;
    check(w.next(Duration::from_millis(150))?.is_none(), "nothing is reported before a write")?;
    s.write(&other, b"elsewhere\n")?;
    s.append(&p, b"bc\n")?;
    wait_for(&mut *w, |c| c.size == Some(5), "an append")?;
    let mut writer = s.open_writer(&p, Durability::None)?;
    writer.append(b"d\n")?;
    writer.close()?;
    wait_for(&mut *w, |c| c.size == Some(7), "an append through a writer")?;
    s.write_atomic(&p, b"x\n", ExpectedSize::Bytes(7))?;
    wait_for(&mut *w, |c| c.size == Some(2), "an atomic rewrite")?;
    s.unlink(&p)?;
    wait_for(&mut *w, |c| c.size.is_none(), "a deletion")?;
    s.rename(&other, &p)?;
    wait_for(&mut *w, |c| c.size == Some(10), "a rename onto the path")?;
    Ok(())
}
