//! The session index (`Env::index_dir`): a reopened session reads exactly as a fresh
//! parse whatever happened to its file since it was indexed; an unchanged file is read
//! from the index alone, a grown one only for its new bytes, anything else (an edit in
//! place with its time put back, a write within the timestamps' granularity, a shorter
//! file, a replaced one, a damaged or foreign index) is parsed again.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use session::model::SpanPolicy;
use session::store::PrivateDir;
use session::store::clock::ManualClock;
use session::{Dialect, Env, IndexUse, SessionManager};

use crate::common::{Result, append};
use crate::spans::{answers, env as plain_env};
use session_testkit::TempDir;

/// Files are read in pieces this small, so that small sessions go through the file.
const POLICY: SpanPolicy = SpanPolicy { from_file_size: 0, from_record_size: 64, piece: 2048 };

/// An environment that indexes into `dir/index`; `settled` sets the clock an hour
/// ahead, so that every file looks settled (else the system clock decides).
fn env(dir: &Path, settled: bool) -> Env {
    let index = PrivateDir::open(dir.join("index")).expect("a private index folder");
    let mut env = plain_env(dir, Some(POLICY)).with_index_dir(index);
    if settled {
        let now = session::store::clock::Clock::now_ms(&session::store::clock::SystemClock);
        env = env.with_clock(Arc::new(ManualClock::new(now + 3_600_000)));
    }
    env
}

fn line(i: usize, parent: Option<usize>) -> String {
    let parent = parent.map_or("null".to_owned(), |p| format!("\"e{p:07}\""));
    let text = "words and more words ".repeat(1 + i % 7);
    format!(
        r#"{{"type":"message","id":"e{i:07}","parentId":{parent},"timestamp":"2026-01-01T00:00:{:02}.000Z","message":{{"role":"user","content":"{text}","timestamp":{i}}}}}"#,
        i % 60
    ) + "\n"
}

fn session_text(dialect: Dialect, entries: std::ops::Range<usize>) -> String {
    let mut text = String::new();
    if dialect == Dialect::Omp {
        let slot = session::model::TitleSlot { title: "t".into(), source: None, updated_at: "u".into() };
        text.push_str(&slot.to_line().unwrap_or_default());
        text.push('\n');
    }
    text.push_str(r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#);
    text.push('\n');
    for i in entries {
        text.push_str(&line(i, i.checked_sub(1)));
    }
    text
}

/// A new folder (its name holding `tag`) with a session of 300 entries in `s.jsonl`: the
/// folder, the file and its text.
fn session_in(tag: &str, dialect: Dialect) -> Result<(TempDir, PathBuf, String)> {
    let tmp = TempDir::new(tag);
    let file = tmp.path().join("s.jsonl");
    let text = session_text(dialect, 0..300);
    fs_err::write(&file, &text)?;
    Ok((tmp, file, text))
}

/// Opens `file` read-only through the index and checks it answers as a fresh parse;
/// returns how the index was used.
fn reopen(dialect: Dialect, file: &Path, dir: &Path, settled: bool) -> Result<IndexUse> {
    let m = SessionManager::open_read_only(dialect, file, env(dir, settled))?;
    let fresh = SessionManager::open_read_only(dialect, file, plain_env(dir, None))?;
    assert_eq!(answers(m.as_manager())?, answers(fresh.as_manager())?, "{dialect:?} {}", file.display());
    Ok(m.load_report().index)
}

fn index_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = fs_err::read_dir(dir.join("index"))?.flatten().map(|e| e.path()).collect();
    out.sort();
    Ok(out)
}

#[test]
fn an_unchanged_session_is_read_from_its_index_alone() -> Result<()> {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let (tmp, file, _) = session_in("index-same", dialect)?;
        assert_eq!(reopen(dialect, &file, tmp.path(), true)?, IndexUse::Rebuilt);
        assert_eq!(index_files(tmp.path())?.len(), 1);
        let m = SessionManager::open_read_only(dialect, &file, env(tmp.path(), true))?;
        assert_eq!(m.load_report().index, IndexUse::Unchanged);
        assert!(m.tree().entries().iter().all(|r| !r.is_loaded()));
        let _ = (m.tree().tree(), m.tree().leaf_id(), m.tree().get_branch(None));
        assert_eq!(m.texts_read(), 0, "{dialect:?}: reopening and the tree read no text");
        assert_eq!(reopen(dialect, &file, tmp.path(), true)?, IndexUse::Unchanged);
        // Without the index nothing changes but the work done.
        fs_err::remove_dir_all(tmp.path().join("index"))?;
        assert_eq!(reopen(dialect, &file, tmp.path(), true)?, IndexUse::Rebuilt);
    }
    Ok(())
}

#[test]
fn a_grown_session_is_parsed_only_for_its_new_lines() -> Result<()> {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let (tmp, file, _) = session_in("index-grown", dialect)?;
        reopen(dialect, &file, tmp.path(), true)?;
        for round in 0..3 {
            for i in 300 + round * 5..305 + round * 5 {
                append(&file, &line(i, Some(i - 1)))?;
            }
            assert_eq!(reopen(dialect, &file, tmp.path(), true)?, IndexUse::Grown, "{dialect:?} round {round}");
        }
        // A torn line appended, then its end: each open answers as a fresh parse.
        let next = line(315, Some(314));
        let (head, rest) = next.split_at(40);
        append(&file, head)?;
        reopen(dialect, &file, tmp.path(), true)?;
        append(&file, rest)?;
        reopen(dialect, &file, tmp.path(), true)?;
    }
    Ok(())
}

/// Rewrites `file` in place with `bytes` (same length) and gives it modification time
/// `mtime`.
fn rewrite_in_place(file: &Path, bytes: &[u8], mtime: std::time::SystemTime) -> std::io::Result<()> {
    let f = fs_err::OpenOptions::new().write(true).truncate(false).open(file)?;
    std::os::unix::fs::FileExt::write_all_at(f.file(), bytes, 0)?;
    f.file().set_modified(mtime)
}

#[test]
fn any_other_change_is_parsed_again() -> Result<()> {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let (tmp, file, text) = session_in("index-changed", dialect)?;
        reopen(dialect, &file, tmp.path(), true)?;
        let mtime = fs_err::metadata(&file)?.modified()?;
        // An edit in place, same length, the old modification time put back: the change
        // time still moves.
        let edited = text.replacen("e0000150", "x0000150", 2);
        rewrite_in_place(&file, edited.as_bytes(), mtime)?;
        assert_eq!(reopen(dialect, &file, tmp.path(), true)?, IndexUse::Rebuilt, "{dialect:?} in place");
        assert_eq!(reopen(dialect, &file, tmp.path(), true)?, IndexUse::Unchanged);
        // Shorter.
        let f = fs_err::OpenOptions::new().write(true).open(&file)?;
        f.set_len(edited.len() as u64 - 500)?;
        drop(f);
        assert_eq!(reopen(dialect, &file, tmp.path(), true)?, IndexUse::Rebuilt, "{dialect:?} shorter");
        // Replaced by a rename: another file at the path.
        let other = tmp.path().join("other.jsonl");
        fs_err::write(&other, session_text(dialect, 1000..1300))?;
        fs_err::rename(&other, &file)?;
        assert_eq!(reopen(dialect, &file, tmp.path(), true)?, IndexUse::Rebuilt, "{dialect:?} replaced");
        // Grown, with a change in its first bytes or in the last bytes the index covered.
        for at in [20usize, fs_err::metadata(&file)?.len() as usize - 100] {
            reopen(dialect, &file, tmp.path(), true)?;
            let mut bytes = fs_err::read(&file)?;
            bytes[at] = if bytes[at] == b'w' { b'W' } else { bytes[at] };
            bytes[at + 1] = if bytes[at + 1] == b'o' { b'O' } else { bytes[at + 1] };
            bytes.extend_from_slice(line(2000, None).as_bytes());
            fs_err::write(&file, &bytes)?;
            assert_ne!(reopen(dialect, &file, tmp.path(), true)?, IndexUse::Unchanged, "{dialect:?} at {at}");
        }
    }
    Ok(())
}

/// A file written moments before it was indexed may be written again without its
/// times moving (they are coarser than writes): its index is never taken for an
/// unchanged file, whatever the times say afterwards.
#[test]
fn a_write_right_after_indexing_is_never_missed() -> Result<()> {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let (tmp, file, text) = session_in("index-racy", dialect)?;
        let mtime = fs_err::metadata(&file)?.modified()?;
        // The system clock: the file was written just now.
        assert_eq!(reopen(dialect, &file, tmp.path(), false)?, IndexUse::Rebuilt);
        let written = std::time::Instant::now();
        rewrite_in_place(&file, text.replacen("e0000010", "y0000010", 2).as_bytes(), mtime)?;
        assert_eq!(reopen(dialect, &file, tmp.path(), false)?, IndexUse::Rebuilt, "{dialect:?}");
        // Even unchanged, an index written so soon is not trusted (unless the machine
        // stalled long enough for the file to settle meanwhile).
        let again = reopen(dialect, &file, tmp.path(), false)?;
        if written.elapsed() < std::time::Duration::from_secs(1) {
            assert_eq!(again, IndexUse::Rebuilt, "{dialect:?}");
        }
    }
    Ok(())
}

#[test]
fn a_damaged_or_foreign_index_is_ignored() -> Result<()> {
    let dialect = Dialect::Pi;
    let (tmp, file, _) = session_in("index-damaged", dialect)?;
    reopen(dialect, &file, tmp.path(), true)?;
    let [index] = &index_files(tmp.path())?[..] else { return Err("one index file".into()) };
    let good = fs_err::read(index)?;
    let damaged: Vec<Vec<u8>> = vec![
        {
            let mut b = good.clone();
            let at = b.len() / 2;
            b[at] ^= 1;
            b
        },
        good[..good.len() - 33].to_vec(),
        good[..good.len() / 3].to_vec(),
        b"not an index".to_vec(),
        Vec::new(),
    ];
    for bytes in damaged {
        fs_err::write(index, &bytes)?;
        assert_eq!(reopen(dialect, &file, tmp.path(), true)?, IndexUse::Rebuilt);
    }
    // Another session's index under this one's name.
    let other = tmp.path().join("o.jsonl");
    fs_err::write(&other, session_text(dialect, 0..300))?;
    reopen(dialect, &other, tmp.path(), true)?;
    let files = index_files(tmp.path())?;
    let theirs = files.iter().find(|p| *p != index).ok_or("the other index")?;
    fs_err::copy(theirs, index)?;
    assert_eq!(reopen(dialect, &file, tmp.path(), true)?, IndexUse::Rebuilt);
    Ok(())
}

/// What happens to a file between two opens.
#[derive(Clone, Debug)]
enum Change {
    None,
    Append(Vec<usize>),
    Truncate(usize),
    Edit(usize, u8),
    Replace(Vec<usize>),
}

use proptest::prelude::*;

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Whatever the file holds (damage included) and whatever happens to it, a reopen
    /// through the index reads as a fresh parse.
    #[test]
    fn a_reopen_through_the_index_reads_as_a_fresh_parse(
        lines in proptest::collection::vec(0usize..12, 1..60),
        changes in proptest::collection::vec(proptest::prop_oneof![
            proptest::strategy::Just(Change::None),
            proptest::collection::vec(0usize..12, 1..6).prop_map(Change::Append),
            (0usize..4000).prop_map(Change::Truncate),
            ((0usize..4000), proptest::num::u8::ANY).prop_map(|(a, b)| Change::Edit(a, b)),
            proptest::collection::vec(0usize..12, 1..40).prop_map(Change::Replace),
        ], 1..4),
        dialect in proptest::sample::select(vec![Dialect::Pi, Dialect::Omp]),
    ) {
        let tmp = TempDir::new("index-prop");
        let file = tmp.path().join("s.jsonl");
        let piece = |k: usize, i: usize| -> String {
            match k {
                0 => "not json\n".into(),
                1 => "\n".into(),
                2 => "{\"type\":\"label\",\"id\":\"l1\",\"parentId\":null,\"timestamp\":\"t\",\"targetId\":\"e0000001\",\"label\":\"x\"}\n".into(),
                3 => line(1, None),
                4 => "{\"type\":\"custom\",\"id\":\"c\"".into(),
                _ => line(i, i.checked_sub(1)),
            }
        };
        let build = |ks: &Vec<usize>, base: usize| -> String {
            ks.iter().enumerate().map(|(i, k)| piece(*k, base + i)).collect()
        };
        let mut text = session_text(dialect, 0..0) + &build(&lines, 0);
        fs_err::write(&file, &text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let check = |text: &str| -> std::result::Result<(), TestCaseError> {
            let m = SessionManager::open_read_only(dialect, &file, env(tmp.path(), true));
            let fresh = SessionManager::open_read_only(dialect, &file, plain_env(tmp.path(), None));
            match (m, fresh) {
                (Ok(m), Ok(fresh)) => {
                    let (a, b) = (answers(m.as_manager()), answers(fresh.as_manager()));
                    prop_assert_eq!(a.map_err(|e| e.to_string()), b.map_err(|e| e.to_string()), "{:?}", text);
                }
                (m, fresh) => prop_assert_eq!(m.err().map(|e| e.to_string()), fresh.err().map(|e| e.to_string())),
            }
            Ok(())
        };
        check(&text)?;
        let io = |e: std::io::Error| TestCaseError::fail(e.to_string());
        for (round, change) in changes.iter().enumerate() {
            match change {
                Change::None => {}
                Change::Append(ks) => {
                    let more = build(ks, 100 * (round + 1));
                    append(&file, &more).map_err(io)?;
                    text.push_str(&more);
                }
                Change::Truncate(n) => {
                    let keep = text.len().saturating_sub(*n % (text.len() + 1));
                    let keep = (0..=keep).rev().find(|&k| text.is_char_boundary(k)).unwrap_or(0);
                    text.truncate(keep);
                    let f = fs_err::OpenOptions::new().write(true).open(&file).map_err(io)?;
                    f.set_len(keep as u64).map_err(io)?;
                }
                Change::Edit(at, b) => {
                    let mut bytes = fs_err::read(&file).map_err(io)?;
                    if !bytes.is_empty() {
                        let at = at % bytes.len();
                        bytes[at] = b'a' + b % 26;
                    }
                    let mtime = fs_err::metadata(&file).map_err(io)?.modified().map_err(io)?;
                    rewrite_in_place(&file, &bytes, mtime + std::time::Duration::from_secs(1)).map_err(io)?;
                    text = String::from_utf8_lossy(&bytes).into_owned();
                }
                Change::Replace(ks) => {
                    text = session_text(dialect, 0..0) + &build(ks, 1000 * (round + 1));
                    let other = tmp.path().join("next.jsonl");
                    fs_err::write(&other, &text).map_err(io)?;
                    fs_err::rename(&other, &file).map_err(io)?;
                }
            }
            check(&text)?;
        }
    }
}

/// The index folder is made 0700 and its files 0600; a link planted where an index
/// goes is neither read nor written through (the file it names keeps its bytes).
#[test]
fn the_index_is_private_and_never_follows_a_link() -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dialect = Dialect::Pi;
    let (tmp, file, _) = session_in("index-private", dialect)?;
    assert_eq!(reopen(dialect, &file, tmp.path(), true)?, IndexUse::Rebuilt);
    let mode = |p: &Path| -> Result<u32> { Ok(fs_err::symlink_metadata(p)?.permissions().mode() & 0o777) };
    assert_eq!(mode(&tmp.path().join("index"))?, 0o700);
    let [index] = &index_files(tmp.path())?[..] else { return Err("one index file".into()) };
    assert_eq!(mode(index)?, 0o600);
    // A valid index, but someone else's file: not read through a link.
    let elsewhere = tmp.path().join("elsewhere.idx");
    fs_err::copy(index, &elsewhere)?;
    let before = fs_err::read(&elsewhere)?;
    fs_err::remove_file(index)?;
    std::os::unix::fs::symlink(&elsewhere, index)?;
    assert_eq!(reopen(dialect, &file, tmp.path(), true)?, IndexUse::Rebuilt, "the link is not read");
    assert_eq!(fs_err::read(&elsewhere)?, before, "nor written through");
    assert!(!fs_err::symlink_metadata(index)?.file_type().is_symlink(), "an index replaced it");
    assert_eq!(mode(index)?, 0o600);
    assert_eq!(reopen(dialect, &file, tmp.path(), true)?, IndexUse::Unchanged);
    // An index others may read (as older versions wrote them) is not trusted.
    fs_err::set_permissions(index, std::fs::Permissions::from_mode(0o644))?;
    assert_eq!(reopen(dialect, &file, tmp.path(), true)?, IndexUse::Rebuilt);
    assert_eq!(mode(index)?, 0o600);
    Ok(())
}
