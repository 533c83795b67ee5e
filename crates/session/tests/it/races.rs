//! Writers racing on one session: whatever a losing write reports, what it reports is
//! what landed, so a caller who retries after an error never writes twice.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;
use session::model::{Dialect, parse_session_bytes};
use session::{SessionError, SessionManager};

use session_testkit::TempDir;

use crate::common::{Result, env_in};

/// A closed session of `dialect` in `dir` holding a question and its answer; returns its file.
fn answered(dialect: Dialect, dir: &Path) -> Result<PathBuf> {
    let mut first = SessionManager::create(dialect, "/w", dir, env_in(dir))?;
    first.append_message_json(json!({"role": "user", "content": "hi", "timestamp": 1}))?;
    first.append_message_json(
        json!({"role": "assistant", "content": [{"type": "text", "text": "yo"}], "timestamp": 2}),
    )?;
    let path = first.session_file().ok_or("a file")?.to_path_buf();
    first.close()?;
    Ok(path)
}

/// How many `title_change` entries of the file carry `title`.
fn title_changes(path: &Path, title: &str) -> Result<usize> {
    let parsed = parse_session_bytes(&fs_err::read(path)?, Dialect::Omp);
    Ok(parsed
        .records
        .iter()
        .filter(|r| r.type_str() == Some("title_change") && r.get_str("title") == Some(title))
        .count())
}

/// omp renames while another writer appends: a rename that returns `Ok` has its entry
/// once in the file and the title in the slot; one that fails with
/// `TitleNotPersisted` has its entry once (so it must not be retried); any other
/// failure left no entry at all.
#[test]
fn omp_renames_racing_appends_report_what_landed() -> Result<()> {
    let tmp = TempDir::new("race-rename");
    let path = answered(Dialect::Omp, tmp.path())?;

    let stop = Arc::new(AtomicBool::new(false));
    let appender = {
        let (path, stop, dir) = (path.clone(), stop.clone(), tmp.path().to_path_buf());
        std::thread::spawn(move || -> std::result::Result<usize, String> {
            let mut done = 0;
            while !stop.load(Ordering::SeqCst) {
                let mut m = SessionManager::open(Dialect::Omp, &path, env_in(&dir)).map_err(|e| e.to_string())?;
                if m.append_custom_entry("tick", Some(json!({"n": done}))).is_ok() {
                    done += 1;
                }
                m.close().map_err(|e| e.to_string())?;
            }
            Ok(done)
        })
    };
    let (mut ok, mut partial, mut refused) = (0, 0, 0);
    for i in 0..60 {
        let title = format!("title {i}");
        let mut m = SessionManager::open(Dialect::Omp, &path, env_in(tmp.path()))?;
        match m.set_session_name(&title, Some("user")) {
            Ok(Some(_)) => {
                ok += 1;
                assert_eq!(title_changes(&path, &title)?, 1, "{title}: an acknowledged rename is in the file once");
            }
            Ok(None) => return Err(format!("{title} was refused as a name").into()),
            Err(SessionError::TitleNotPersisted { entry_id, .. }) => {
                partial += 1;
                assert_eq!(title_changes(&path, &title)?, 1, "{title}: the entry {entry_id} is reported as landed");
            }
            Err(e) => {
                refused += 1;
                assert_eq!(title_changes(&path, &title)?, 0, "{title}: failed with {e} but its entry landed");
            }
        }
        drop(m);
    }
    stop.store(true, Ordering::SeqCst);
    let appended = appender.join().map_err(|_| "the appender panicked")??;
    assert!(appended > 0, "the appender ran");
    assert!(ok > 0, "some renames went through ({ok} ok, {partial} partial, {refused} refused)");
    let parsed = parse_session_bytes(&fs_err::read(&path)?, Dialect::Omp);
    assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
    eprintln!("renames: {ok} ok, {partial} partial, {refused} refused; {appended} appends");
    Ok(())
}

/// Two writers appending to one session: every append that returned `Ok` is in the file
/// exactly once, every one that failed is absent, and the file loads clean.
#[test]
fn appends_racing_appends_land_once_or_not_at_all() -> Result<()> {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let tmp = TempDir::new("race-append");
        let path = answered(dialect, tmp.path())?;
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let (path, dir) = (path.clone(), tmp.path().to_path_buf());
                std::thread::spawn(move || -> std::result::Result<Vec<(String, bool)>, String> {
                    let mut results = Vec::new();
                    for i in 0..40 {
                        let tag = format!("w{w}-{i}");
                        let mut m = SessionManager::open(dialect, &path, env_in(&dir)).map_err(|e| e.to_string())?;
                        let ok = m.append_custom_entry("race", Some(json!({"tag": tag}))).is_ok();
                        let closed = m.close().is_ok();
                        results.push((tag, ok && closed));
                    }
                    Ok(results)
                })
            })
            .collect();
        let mut results = Vec::new();
        for w in writers {
            results.extend(w.join().map_err(|_| "a writer panicked")??);
        }
        let parsed = parse_session_bytes(&fs_err::read(&path)?, dialect);
        assert!(parsed.diagnostics.is_empty(), "{dialect:?}: {:?}", parsed.diagnostics);
        let count = |tag: &str| {
            parsed
                .records
                .iter()
                .filter(|r| r.get("data").and_then(|d| d.get("tag")).and_then(|t| t.as_str()) == Some(tag))
                .count()
        };
        let mut landed = 0;
        for (tag, ok) in &results {
            assert_eq!(count(tag), usize::from(*ok), "{dialect:?} {tag}: acknowledged {ok}");
            landed += usize::from(*ok);
        }
        assert!(landed > 0, "{dialect:?}: some appends went through");
    }
    Ok(())
}
