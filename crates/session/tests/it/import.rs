//! `session::import`: an import of a source that grew, made in two steps, is the import
//! of the whole source (the same entries, leaf and context), in both dialects; a
//! second import of the same source writes nothing.

use std::path::Path;

use proptest::prelude::*;
use serde_json::json;
use session::import::{ImportOptions, import_bytes};
use session::{Dialect, Env, SessionManager};

/// A generated Claude Code transcript: turns whose parents are earlier turns (so it
/// branches), assistant turns split over one to three lines of one `message.id`.
fn transcript(turns: &[(bool, Option<usize>, usize)]) -> String {
    let mut out = String::new();
    let mut tail: Vec<String> = Vec::new();
    for (i, &(assistant, parent, lines)) in turns.iter().enumerate() {
        let mut parent = parent.filter(|&p| p < i).map(|p| tail[p].clone());
        for k in 0..if assistant { lines } else { 1 } {
            let uuid = format!("u{i}-{k}");
            let ts = format!("2026-01-01T00:{:02}:{:02}.000Z", i / 60, i % 60);
            let line = if assistant {
                json!({"type": "assistant", "uuid": uuid, "parentUuid": parent, "sessionId": "s-gen", "cwd": "/w", "timestamp": ts,
                    "message": {"id": format!("m{i}"), "role": "assistant", "model": "x", "content": [{"type": "text", "text": format!("a{i}.{k}")}]}})
            } else {
                json!({"type": "user", "uuid": uuid, "parentUuid": parent, "sessionId": "s-gen", "cwd": "/w", "timestamp": ts,
                    "message": {"role": "user", "content": format!("q{i}")}})
            };
            out.push_str(&line.to_string());
            out.push('\n');
            parent = Some(uuid);
        }
        tail.push(parent.unwrap_or_default());
    }
    out
}

/// The session written at `dir` after importing `sources` in turn: its sorted entry
/// lines, leaf and context.
fn import_all(dialect: Dialect, sources: &[&str]) -> Result<(Vec<String>, Option<String>, String), TestCaseError> {
    let env = Env::memory();
    let options = ImportOptions { session_dir: Some("/s".into()), ..ImportOptions::to(dialect) };
    let mut path = None;
    for src in sources {
        let r = import_bytes(Path::new("src.jsonl"), src.as_bytes(), &options, &env)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(r.differing.is_empty(), "{:?}", r.differing);
        path = Some(r.path);
    }
    let path = path.ok_or_else(|| TestCaseError::fail("no source"))?;
    let again = import_bytes(Path::new("src.jsonl"), sources[sources.len() - 1].as_bytes(), &options, &env)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert!(!again.created && again.appended.is_empty(), "a second import wrote {:?}", again.appended);
    let m = SessionManager::open_read_only(dialect, &path, env).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut lines: Vec<String> = m.tree().entries().iter().map(|r| r.line().into_owned()).collect();
    lines.sort();
    let context = format!("{:?}", m.context().map_err(|e| TestCaseError::fail(e.to_string()))?.messages);
    Ok((lines, m.tree().leaf_id().map(str::to_owned), context))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn a_two_step_import_is_the_whole_import(
        turns in prop::collection::vec((any::<bool>(), prop::option::of(0usize..40), 1usize..4), 1..30),
        cut in any::<prop::sample::Index>(),
        omp in any::<bool>(),
    ) {
        let dialect = if omp { Dialect::Omp } else { Dialect::Pi };
        let keep = 1 + cut.index(turns.len());
        let whole = transcript(&turns);
        let prefix = transcript(&turns[..keep]);
        let stepped = import_all(dialect, &[&prefix, &whole])?;
        let at_once = import_all(dialect, &[&whole])?;
        prop_assert_eq!(stepped, at_once);
    }
}

/// A source whose session id could name a file outside the agent's folder (`../`, a
/// slash, an empty id) is refused before anything is written.
#[test]
fn a_session_id_that_is_no_file_name_is_refused() -> Result<(), Box<dyn std::error::Error>> {
    let storage = std::sync::Arc::new(session::store::MemoryStorage::new());
    let env = Env { storage: storage.clone(), ..Env::memory() };
    for id in ["../../../tmp/evil", "a/b", "", ".hidden", "x y"] {
        let line = json!({"type": "user", "uuid": "u1", "parentUuid": null, "sessionId": id, "cwd": "/w",
            "timestamp": "2026-01-01T00:00:00.000Z", "message": {"role": "user", "content": "hi"}});
        for dialect in [Dialect::Pi, Dialect::Omp] {
            let options = ImportOptions { session_dir: Some("/s/bucket".into()), ..ImportOptions::to(dialect) };
            let got = import_bytes(Path::new("evil.jsonl"), format!("{line}\n").as_bytes(), &options, &env);
            assert!(
                matches!(&got, Err(session::import::ImportError::BadSessionId { id: i, .. }) if i == id),
                "{id:?}: {:?}",
                got.map(|r| r.path)
            );
        }
    }
    use session::store::Storage;
    assert!(storage.list(Path::new("/s"))?.is_empty(), "nothing written anywhere");
    assert!(storage.list(Path::new("/tmp"))?.is_empty());
    Ok(())
}
