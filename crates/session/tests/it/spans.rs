//! Records read by position (`Env::spans`, `session_model::span`): a session whose
//! texts stay in its file until asked for reads, projects and writes exactly as one
//! that holds every text, for every session file of `testdata/` in both dialects and
//! whatever the pieces it is read in; opening and the tree read no text of a large
//! session, and its context reads only the path after the last compaction.

use std::path::Path;
use std::sync::Arc;

use session::model::SpanPolicy;
use session::store::FileStorage;
use session::tree::tree_to_json;
use session::{Dialect, Env, Leaf, OpenMode, SessionManager};

use session_testkit::TempDir;
use session_testkit::testdata_files;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

pub(crate) fn env(dir: &Path, spans: Option<SpanPolicy>) -> Env {
    Env::bare(Arc::new(FileStorage::new())).with_process_cwd(dir).with_spans(spans)
}

/// What a session answers, queried the way the `session` command queries it.
pub(crate) fn answers(m: &SessionManager) -> Result<Vec<String>> {
    let t = m.tree();
    // An empty file gets a fresh header (a new id each time).
    let header = if m.load_report().reinitialised { String::new() } else { m.header().line().into_owned() };
    let mut out = vec![
        header,
        format!("{:?}", t.leaf_id()),
        format!("{:?}", m.session_name()),
        // How the index was used is not what the session says.
        format!("{:?}", session::LoadReport { index: session::IndexUse::None, ..m.load_report().clone() }),
        format!("{:?}", m.diagnostics()),
        format!("{:?}", t.diagnostics()),
        tree_to_json(&t.tree(), m.dialect() == Dialect::Pi),
    ];
    let ids: Vec<String> = t.entries().iter().filter_map(|r| r.id().map(str::to_owned)).collect();
    let mut leaves = vec![Leaf::Current, Leaf::Null];
    leaves.extend(ids.iter().step_by(ids.len() / 6 + 1).map(|id| Leaf::Id(id)));
    for leaf in leaves {
        out.push(m.context_json(leaf, false)?);
        if m.dialect() == Dialect::Omp {
            out.push(m.context_json(leaf, true)?);
        } else {
            out.push(m.projection_json(leaf)?);
        }
        let branch: Vec<_> = t.path(leaf).iter().map(|r| r.id().map(str::to_owned)).collect();
        out.push(format!("{branch:?}"));
    }
    out.extend(t.entries().iter().map(|r| r.line().into_owned()));
    m.check_reads()?;
    if m.load_report().migrated {
        // Migration gives entries of an old file new random ids at each open (as pi and
        // omp do): every id is named by its entry's place instead.
        for (i, id) in ids.iter().enumerate() {
            let (from, to) = (format!("\"{id}\""), format!("\"#{i}\""));
            for s in &mut out {
                *s = s.replace(&from, &to);
            }
        }
    }
    Ok(out)
}

/// Whether opening migrated a version 1 file, which mints a fresh id for every entry
/// (two opens never agree on them).
fn mints_ids(m: &SessionManager) -> bool {
    let r = m.load_report();
    r.migrated && r.migrated_from.as_deref().is_none_or(|v| v.parse::<f64>().is_ok_and(|n| n < 2.0))
}

#[test]
fn sessions_read_by_position_answer_as_sessions_held_in_memory() -> Result<()> {
    let tmp = TempDir::new("spans");
    let (mut compared, mut read_later) = (0, 0);
    for path in testdata_files() {
        for dialect in [Dialect::Pi, Dialect::Omp] {
            let open = |spans| SessionManager::open_read_only(dialect, &path, env(tmp.path(), spans));
            let Ok(held) = open(None) else {
                assert!(open(Some(SpanPolicy::everything(64))).is_err());
                continue;
            };
            if mints_ids(held.as_manager()) {
                continue;
            }
            let want = answers(held.as_manager())?;
            for piece in [1, 97, 4096] {
                let what = format!("{dialect:?} {} in pieces of {piece}", path.display());
                let m = open(Some(SpanPolicy::everything(piece)))?;
                let spans = m.tree().entries().iter().filter(|r| r.span().is_some()).count();
                read_later += spans;
                assert_eq!(answers(m.as_manager())?, want, "{what}");
                compared += 1;
            }
        }
    }
    assert!(compared > 300, "{compared} sessions compared");
    assert!(read_later > 10_000, "{read_later} records were read by position");
    Ok(())
}

/// A whole-file write of a session whose texts are in its file writes the same bytes as
/// one of a session holding them (the texts are read for the write, not kept).
#[test]
fn rewrites_write_the_same_bytes_from_the_file() -> Result<()> {
    let tmp = TempDir::new("spans-rewrite");
    let mut rewritten = 0;
    for (i, path) in testdata_files().into_iter().enumerate() {
        for dialect in [Dialect::Pi, Dialect::Omp] {
            let mut written = Vec::new();
            for (k, spans) in [None, Some(SpanPolicy::everything(53))].into_iter().enumerate() {
                let copy = tmp.path().join(format!("{i}-{dialect:?}-{k}.jsonl"));
                fs_err::copy(&path, &copy)?;
                let Ok(mut m) = SessionManager::open_with(dialect, &copy, env(tmp.path(), spans), OpenMode::MustExist)
                else {
                    continue;
                };
                if mints_ids(&m) || m.load_report().reinitialised {
                    continue;
                }
                let loaded_before = m.tree().entries().iter().filter(|r| r.is_loaded()).count();
                m.rewrite_entries()?;
                let loaded_after = m.tree().entries().iter().filter(|r| r.is_loaded()).count();
                assert_eq!(loaded_before, loaded_after, "a write keeps no text it read");
                m.close()?;
                written.push(fs_err::read(&copy)?);
            }
            if let [a, b] = &written[..] {
                assert!(a == b, "{dialect:?} {}", path.display());
                rewritten += 1;
            }
        }
    }
    assert!(rewritten > 100, "{rewritten} rewrites compared");
    Ok(())
}

/// A session of about 6 MiB with a compaction two thirds of the way in.
fn large_session(dialect: Dialect) -> (String, String) {
    let mut text = String::new();
    if dialect == Dialect::Omp {
        let slot = session::model::TitleSlot { title: "t".into(), source: None, updated_at: "u".into() };
        text.push_str(&slot.to_line().unwrap_or_default());
    }
    text.push_str(r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#);
    text.push('\n');
    let mut parent = "null".to_owned();
    let body = "words ".repeat(150);
    let total = 7000;
    let mut kept = String::new();
    for i in 0..total {
        let id = format!("e{i:07}");
        if i == total * 2 / 3 {
            text.push_str(&format!(
                r#"{{"type":"compaction","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","summary":"{body}","firstKeptEntryId":"{kept}","tokensBefore":1}}"#
            ));
        } else {
            let message = if i % 2 == 0 {
                format!(r#"{{"role":"user","content":"{body}","timestamp":{i}}}"#)
            } else {
                format!(
                    r#"{{"role":"assistant","content":[{{"type":"text","text":"{body}"}}],"provider":"p","model":"m","stopReason":"stop","timestamp":{i}}}"#
                )
            };
            text.push_str(&format!(
                r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:00.000Z","message":{message}}}"#
            ));
        }
        text.push('\n');
        if i == total * 2 / 3 - 10 {
            kept = id.clone();
        }
        parent = format!(r#""{id}""#);
    }
    (text, kept)
}

#[test]
fn opening_reads_no_text_and_the_context_only_what_it_shows() -> Result<()> {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let tmp = TempDir::new("spans-lazy");
        let file = tmp.path().join("large.jsonl");
        let (text, _) = large_session(dialect);
        fs_err::write(&file, &text)?;
        let m = SessionManager::open_read_only(dialect, &file, env(tmp.path(), Some(SpanPolicy::default())))?;
        let entries = m.tree().entries();
        assert!(entries.len() == 7000 && entries.iter().all(|r| !r.is_loaded()), "{dialect:?}");
        let _ = (m.tree().tree(), m.tree().leaf_id(), m.session_name(), m.tree().get_branch(None));
        assert_eq!(m.texts_read(), 0, "{dialect:?}: the tree, the leaf and the path read no text");
        let ctx = m.context()?;
        // The compaction's summary, the ten kept entries and the rest of the path after it.
        assert_eq!(ctx.messages.len(), 1 + 10 + (7000 - 7000 * 2 / 3 - 1), "{dialect:?}");
        let read = m.texts_read();
        assert!(read <= ctx.messages.len() as u64 + 1, "{dialect:?}: {read} texts read for the context");
        let held = SessionManager::open_read_only(dialect, &file, env(tmp.path(), None))?;
        assert_eq!(held.context()?, ctx);
    }
    Ok(())
}

/// A pi session of `sizes.len()` entries, each a message of about that many bytes (a
/// size under 256 makes a record kept in memory), with the `noise` lines after the
/// entries they name: 0 a blank line, 1 a line ending in `\r\n`, 2 a damaged line, 3 a
/// message whose number JavaScript reads as another value, 4 spaces after the line.
fn noisy_session(sizes: &[usize], noise: &[(usize, u8)]) -> String {
    let mut text =
        String::from(r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#);
    text.push('\n');
    let mut parent = "null".to_owned();
    for (i, size) in sizes.iter().enumerate() {
        let id = format!("e{i:07}");
        let body = "w".repeat(*size);
        let line = format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"{body}","timestamp":{i}}}}}"#
        );
        let mut end = "\n".to_owned();
        let mut after = String::new();
        for (_, kind) in noise.iter().filter(|(at, _)| *at == i) {
            match kind {
                0 => after.push('\n'),
                1 => end = "\r\n".to_owned(),
                2 => after.push_str("{\"type\":\"message\",\"id\":\n"),
                3 => after.push_str(&format!(
                    r#"{{"type":"custom","customType":"n","id":"x{i:06}","parentId":"{id}","timestamp":"2026-01-01T00:00:00.000Z","data":{{"n":1e400,"pad":"{}"}}}}"#,
                    "p".repeat(300)
                )),
                _ => end = format!("  {end}"),
            }
            if *kind == 3 {
                after.push('\n');
            }
        }
        text.push_str(&line);
        text.push_str(&end);
        text.push_str(&after);
        parent = format!(r#""{id}""#);
    }
    text
}

/// The lines of a session file after its header.
fn entry_lines(path: &Path) -> Result<Vec<String>> {
    Ok(fs_err::read_to_string(path)?.lines().skip(1).map(str::to_owned).collect())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

    /// A fork and a branch of a session read by position copy the stretches of lines they
    /// do not change from the file (`session_store::Sink::copy_from`) and write the same
    /// entries as a session held in memory, whatever breaks the stretches: blank, damaged
    /// and `\r\n` lines, records kept in memory, numbers JavaScript rewrites, spaces.
    #[test]
    fn forks_and_branches_copy_what_they_do_not_change(
        sizes in proptest::collection::vec(proptest::prop_oneof![3 => 300usize..2000, 1 => 1usize..150], 60..400),
        noise in proptest::collection::vec((0usize..400, 0u8..5), 0..12),
        at in 0.0f64..1.0,
    ) {
        let tmp = TempDir::new("spans-copy");
        let source = tmp.path().join("source.jsonl");
        fs_err::write(&source, noisy_session(&sizes, &noise)).expect("source");
        let leaf = format!("e{:07}", ((sizes.len() - 1) as f64 * at) as usize);
        let mut outputs = Vec::new();
        // Records under 256 bytes stay in memory and break the stretches.
        for spans in [None, Some(SpanPolicy { from_file_size: 0, piece: 16 << 10, ..SpanPolicy::default() })] {
            let dir = tmp.path().join(format!("out-{}", spans.is_some()));
            let fork = SessionManager::fork_from(Dialect::Pi, &source, "/q", &dir, env(tmp.path(), spans)).expect("fork");
            let forked = fork.session_file().expect("fork file").to_path_buf();
            let mut m = SessionManager::open(Dialect::Pi, &source, env(tmp.path(), spans)).expect("open");
            let branched = m.create_branched_session(&leaf).expect("branch").expect("branch file");
            outputs.push((entry_lines(&forked).expect("fork"), entry_lines(&branched).expect("branch")));
        }
        proptest::prop_assert!(outputs[0] == outputs[1]);
        let source_lines: Vec<String> = noisy_session(&sizes, &[]).lines().skip(1).map(str::to_owned).collect();
        if noise.is_empty() {
            proptest::prop_assert!(outputs[1].0 == source_lines, "a fork of a clean file is its entries");
        }
    }
}

/// A fork and a branch of a large session read by position read none of its texts:
/// every line they keep as it is is copied from the file, not read and written.
#[test]
fn a_fork_copies_its_unchanged_lines_without_reading_them() -> Result<()> {
    let tmp = TempDir::new("spans-copy-read");
    let source = tmp.path().join("source.jsonl");
    let sizes: Vec<usize> = (0..600).map(|i| 300 + i % 700).collect();
    fs_err::write(&source, noisy_session(&sizes, &[]))?;
    let spans = Some(SpanPolicy { from_file_size: 0, piece: 64 << 10, ..SpanPolicy::default() });
    let fork = SessionManager::fork_from(Dialect::Pi, &source, "/q", &tmp.path().join("f"), env(tmp.path(), spans))?;
    assert_eq!(fork.texts_read(), 0, "the fork read no text: it copied them");
    let fork_file = fork.session_file().ok_or("fork file")?.to_path_buf();
    assert!(entry_lines(&fork_file)? == entry_lines(&source)?, "the fork holds the source's entries");
    let mut m = SessionManager::open(Dialect::Pi, &source, env(tmp.path(), spans))?;
    let branched = m.create_branched_session("e0000299")?.ok_or("branch file")?;
    assert_eq!(m.texts_read(), 0, "the branch read no text: it copied them");
    assert!(entry_lines(&branched)? == entry_lines(&source)?[..300], "the branch holds the path's entries");
    Ok(())
}

/// A fork's records read their texts from its source until the fork is opened again:
/// when such a read fails (here the source is cut short while the fork is written), the
/// error names the source, the file that failed, and no fork file is left.
#[test]
fn a_failed_read_of_a_forks_source_names_the_source() -> Result<()> {
    let tmp = TempDir::new("spans-fork-read-error");
    let source = tmp.path().join("source.jsonl");
    let sizes: Vec<usize> = (0..300).map(|i| 300 + i % 500).collect();
    fs_err::write(&source, noisy_session(&sizes, &[]))?;
    let spans = Some(SpanPolicy { from_file_size: 0, piece: 64 << 10, ..SpanPolicy::default() });
    let cut = source.clone();
    let hook: crate::common::CopyHook = Box::new(move || {
        fs_err::OpenOptions::new().write(true).open(&cut)?.set_len(100)?;
        Err(std::io::Error::other("no copy today"))
    });
    let storage = Arc::new(crate::common::Racing { on_copy: Some(hook), ..Default::default() });
    let env = Env::bare(storage).with_process_cwd(tmp.path()).with_spans(spans);
    let dir = tmp.path().join("f");
    let err = SessionManager::fork_from(Dialect::Pi, &source, "/q", &dir, env).err().ok_or("the fork failed")?;
    match &err {
        session::SessionError::Store(session::store::StoreError::Io { path, .. }) => {
            assert_eq!(path, &source, "{err}");
        }
        other => return Err(format!("not a read error: {other}").into()),
    }
    assert_eq!(fs_err::read_dir(&dir)?.count(), 0, "no fork file and no temporary file is left");
    Ok(())
}

/// A move renames the session's file: texts still read by position are read from it
/// under its new name, so a read that fails while the move writes it names that; a
/// move undone names the old one again.
#[test]
fn a_failed_read_of_a_moved_file_names_it_where_it_is() -> Result<()> {
    use std::sync::atomic::Ordering;
    let tmp = TempDir::new("spans-move-read-error");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    fs_err::create_dir_all(&a)?;
    let source = a.join("source.jsonl");
    let moved = b.join("source.jsonl");
    let sizes: Vec<usize> = (0..300).map(|i| 300 + i % 500).collect();
    fs_err::write(&source, noisy_session(&sizes, &[]))?;
    let spans = Some(SpanPolicy { from_file_size: 0, piece: 64 << 10, ..SpanPolicy::default() });
    let storage = Arc::new(crate::common::Racing::default());
    let env = Env::bare(storage.clone()).with_process_cwd(tmp.path()).with_spans(spans);
    let mut m = SessionManager::open(Dialect::Pi, &source, env)?;
    assert!(m.texts_read() == 0, "the texts are left in the file");
    let named = |e: &session::SessionError| match e {
        session::SessionError::Store(session::store::StoreError::Io { path, .. }) => Some(path.clone()),
        _ => None,
    };
    storage.fail_reads.store(true, Ordering::SeqCst);
    let err = m.move_to("/elsewhere", Some(&b)).err().ok_or("the move failed")?;
    assert_eq!(named(&err), Some(moved.clone()), "the read failed in the renamed file: {err}");
    assert_eq!(m.session_file(), Some(source.as_path()), "the move was undone");
    assert!(source.exists() && !moved.exists(), "the file is back where it was");
    let again = m.load_texts(m.tree().entries()).err().ok_or("reads still fail")?;
    assert_eq!(named(&again), Some(source.clone()), "the texts are read from the file at its old name: {again}");
    storage.fail_reads.store(false, Ordering::SeqCst);
    m.load_texts(m.tree().entries())?;
    assert!(m.move_to("/elsewhere", Some(&b))?.is_some_and(|f| f == moved), "the move goes through");
    Ok(())
}

/// A copy whose source changed while it was copied, or that failed, is thrown away, and
/// the write is made again reading and checking every text: the fork holds the entries
/// that were read, never bytes copied from a file that was changing, and never fails
/// for the copy's sake.
#[test]
fn a_copy_that_fails_or_races_a_writer_is_written_again() -> Result<()> {
    use std::sync::atomic::Ordering;
    let tmp = TempDir::new("spans-copy-race");
    let source = tmp.path().join("source.jsonl");
    let sizes: Vec<usize> = (0..300).map(|i| 300 + i % 500).collect();
    let want: Vec<String> = noisy_session(&sizes, &[]).lines().skip(1).map(str::to_owned).collect();
    let spans = Some(SpanPolicy { from_file_size: 0, piece: 64 << 10, ..SpanPolicy::default() });
    let appended = source.clone();
    let hooks: [(&str, crate::common::CopyHook); 2] = [
        ("a writer appends", Box::new(move || crate::common::append(&appended, "{\"type\":\"custom\"}\n"))),
        ("the copy fails", Box::new(|| Err(std::io::Error::other("no copy today")))),
    ];
    for (k, (what, hook)) in hooks.into_iter().enumerate() {
        fs_err::write(&source, noisy_session(&sizes, &[]))?;
        let storage = Arc::new(crate::common::Racing { on_copy: Some(hook), ..Default::default() });
        let env = Env::bare(storage.clone()).with_process_cwd(tmp.path()).with_spans(spans);
        let fork = SessionManager::fork_from(Dialect::Pi, &source, "/q", &tmp.path().join(format!("f{k}")), env)?;
        assert!(storage.copies.load(Ordering::SeqCst) >= 1, "{what}: a copy was tried");
        assert!(fork.texts_read() > 0, "{what}: the texts were read for the second write");
        assert!(
            entry_lines(fork.session_file().ok_or("fork file")?)? == want,
            "{what}: the fork holds the entries read"
        );
        assert_eq!(fs_err::read_dir(tmp.path().join(format!("f{k}")))?.count(), 1, "{what}: no temporary file is left");
    }
    Ok(())
}
