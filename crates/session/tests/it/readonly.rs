//! Opening without writing: every file of `testdata/` opened read-only in both
//! dialects keeps its bytes, mode and mtime, nothing is created beside it, and the
//! session reads as the agent's own open would leave it. Also the header versions
//! beyond a double, which used to rewrite the file with new ids on every open.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::json;
use session::{Dialect, OpenMode, Session, SessionError, SessionManager};

use session_testkit::TempDir;

use crate::common::{Result, env_in, texts};

fn testdata_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    let mut out = Vec::new();
    for dir in ["v1", "v2", "v3", "corrupt", "sample", "generated"] {
        let Ok(entries) = fs_err::read_dir(root.join(dir)) else { continue };
        for e in entries.flatten() {
            if e.path().extension().is_some_and(|x| x == "jsonl") {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// One file as a read must leave it: name, bytes, mode, mtime (seconds, nanoseconds).
type FileState = (String, Vec<u8>, u32, i64, i64);

/// What a read must not change: the names in the folder and each file's bytes, mode
/// and mtime.
fn snapshot(dir: &Path) -> Result<Vec<FileState>> {
    let mut out = Vec::new();
    for e in fs_err::read_dir(dir)? {
        let e = e?;
        let m = fs_err::symlink_metadata(e.path())?;
        let bytes = if m.is_file() { fs_err::read(e.path())? } else { Vec::new() };
        out.push((e.file_name().to_string_lossy().into_owned(), bytes, m.mode(), m.mtime(), m.mtime_nsec()));
    }
    out.sort();
    Ok(out)
}

#[test]
fn read_only_opens_change_nothing_and_read_as_the_agent_would() -> Result<()> {
    let files = testdata_files();
    assert!(files.len() > 20, "testdata holds the frozen and corrupt fixtures");
    for source in &files {
        for dialect in [Dialect::Pi, Dialect::Omp] {
            let tmp = TempDir::new("ro");
            let name = source.file_name().ok_or("a file name")?;
            let path = tmp.path().join(name);
            fs_err::copy(source, &path)?;
            fs_err::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
            let before = snapshot(tmp.path())?;
            let read_only = SessionManager::open_read_only(dialect, &path, env_in(tmp.path()));
            assert_eq!(snapshot(tmp.path())?, before, "{dialect:?} {}: a read-only open wrote", source.display());

            // The agent's own open of a second copy: same outcome, same session.
            let agent_dir = TempDir::new("agent");
            let agent_path = agent_dir.path().join(name);
            fs_err::copy(source, &agent_path)?;
            let agent = SessionManager::open(dialect, &agent_path, env_in(agent_dir.path()));
            let (ro, agent) = match (read_only, agent) {
                (Ok(ro), Ok(agent)) => (ro, agent),
                (Err(a), Err(b)) => {
                    assert_eq!(
                        a.to_string().replace(&*tmp.path().to_string_lossy(), "D"),
                        b.to_string().replace(&*agent_dir.path().to_string_lossy(), "D")
                    );
                    continue;
                }
                (a, b) => panic!("{dialect:?} {}: read-only {:?}, agent {:?}", source.display(), a.err(), b.err()),
            };
            assert!(ro.as_manager().is_read_only() && !ro.load_report().wrote);
            let mut expected = agent.load_report().clone();
            expected.wrote = false;
            // Two copies: two files, each with its own stat.
            assert_eq!(expected.stat.map(|s| s.size), ro.load_report().stat.map(|s| s.size));
            expected.stat = ro.load_report().stat;
            assert_eq!(ro.load_report(), &expected, "{dialect:?} {}", source.display());
            if ro.load_report().migrated {
                // A v1 migration mints fresh ids: the same entries, other ids.
                let types = |m: &SessionManager| {
                    m.tree().entries().iter().map(|r| r.type_str().map(str::to_owned)).collect::<Vec<_>>()
                };
                assert_eq!(types(ro.as_manager()), types(&agent), "{dialect:?} {}", source.display());
            } else {
                assert_eq!(texts(ro.as_manager()), texts(&agent), "{dialect:?} {}", source.display());
            }
            assert_eq!(ro.diagnostics(), agent.diagnostics());
        }
    }
    Ok(())
}

#[test]
fn read_only_refuses_missing_files_and_every_write() -> Result<()> {
    let tmp = TempDir::new("ro-refuse");
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let missing = tmp.path().join("none.jsonl");
        let err = SessionManager::open_read_only(dialect, &missing, env_in(tmp.path())).err();
        assert!(matches!(err, Some(SessionError::NotFound { .. })), "{err:?}");
        let err = SessionManager::open_with(dialect, &missing, env_in(tmp.path()), OpenMode::MustExist).err();
        assert!(matches!(err, Some(SessionError::NotFound { .. })), "{err:?}");
        assert!(fs_err::read_dir(tmp.path())?.next().is_none(), "nothing created");
    }
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/sample/pi.jsonl");
    let path = tmp.path().join("pi.jsonl");
    fs_err::copy(sample, &path)?;
    let before = snapshot(tmp.path())?;
    // A `Session` has no writing method; reading it, moving its leaf and copying it out
    // of the manager's reads change nothing.
    let mut s = Session::open(Dialect::Pi, &path, env_in(tmp.path()))?;
    let first = s.tree().entries().first().and_then(|r| r.id()).map(str::to_owned).ok_or("an entry")?;
    s.context()?;
    s.branch(&first)?;
    assert_eq!(s.tree().leaf_id(), Some(first.as_str()));
    assert!(matches!(s.branch("no-such-id"), Err(SessionError::EntryNotFound { .. })));
    s.reset_leaf();
    assert!(s.context()?.messages.is_empty());
    s.as_manager().check_reads()?;
    drop(s);
    assert_eq!(snapshot(tmp.path())?, before);
    Ok(())
}

/// `1e400` is `Infinity` to JavaScript: no migration, so opening writes nothing and
/// the label still points at its entry. `-1e400` migrates once; the next open writes
/// nothing.
#[test]
fn versions_beyond_a_double_never_churn() -> Result<()> {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        for version in ["1e400", "-1e400"] {
            let tmp = TempDir::new("churn");
            let path = tmp.path().join("s.jsonl");
            let text = format!(
                "{}\n{}\n{}\n",
                format_args!(
                    r#"{{"type":"session","version":{version},"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}}"#
                ),
                r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#,
                r#"{"type":"label","id":"l1","parentId":"a1","timestamp":"2026-01-01T00:00:02.000Z","targetId":"a1","label":"x"}"#,
            );
            fs_err::write(&path, &text)?;
            let first = SessionManager::open(dialect, &path, env_in(tmp.path()))?;
            let after_first = fs_err::read(&path)?;
            if version == "1e400" {
                assert!(!first.load_report().migrated, "{dialect:?}: Infinity is at least 3");
                assert_eq!(after_first, text.as_bytes(), "{dialect:?}: opening wrote nothing");
                assert_eq!(first.tree().label("a1"), Some("x"));
            } else {
                assert!(first.load_report().migrated, "{dialect:?}: -Infinity is below 2");
            }
            let mut first = first;
            if dialect == Dialect::Omp {
                // omp writes a migration with the next write, not on open.
                assert_eq!(after_first, text.as_bytes());
                first.append_message_json(json!({"role": "user", "content": "more", "timestamp": 2}))?;
            }
            drop(first);
            let after_first = fs_err::read(&path)?;
            let second = SessionManager::open(dialect, &path, env_in(tmp.path()))?;
            assert!(!second.load_report().migrated, "{dialect:?} {version}: migrated twice");
            drop(second);
            assert_eq!(fs_err::read(&path)?, after_first, "{dialect:?} {version}: the second open wrote");
        }
    }
    Ok(())
}

/// A version that matches no step (`"x"`) counts as migrated, as the references say, but
/// changes no byte, so pi's open writes nothing (pi would rewrite the same bytes).
#[test]
fn an_unrecognised_version_is_reported_and_not_rewritten() -> Result<()> {
    let tmp = TempDir::new("odd-version");
    let path = tmp.path().join("s.jsonl");
    let text = concat!(
        r#"{"type":"session","version":"x","id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#,
        "\n",
        r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#,
        "\n"
    );
    fs_err::write(&path, text)?;
    let before = snapshot(tmp.path())?;
    let m = SessionManager::open(Dialect::Pi, &path, env_in(tmp.path()))?;
    assert!(m.load_report().migrated && !m.load_report().wrote, "{:?}", m.load_report());
    assert_eq!(snapshot(tmp.path())?, before);
    Ok(())
}
