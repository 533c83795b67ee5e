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
    let env = Env::memory().with_storage(storage.clone());
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

/// Two re-imports that would lose or garble turns are refused with nothing written: a
/// session the user went on with in the agent, and a source imported mid-response (one
/// response's lines split by the cut).
#[test]
fn a_reimport_that_would_garble_the_session_is_refused() -> Result<(), Box<dyn std::error::Error>> {
    let line = |v: serde_json::Value| format!("{v}\n");
    let user = |u: &str, p: Option<&str>| {
        line(json!({"type": "user", "uuid": u, "parentUuid": p, "sessionId": "s-1", "cwd": "/w",
        "timestamp": "2026-01-01T00:00:00.000Z", "message": {"role": "user", "content": format!("q {u}")}}))
    };
    let part = |u: &str, p: &str, block: serde_json::Value| {
        line(json!({"type": "assistant", "uuid": u, "parentUuid": p, "sessionId": "s-1",
        "cwd": "/w", "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"id": "msg-1", "role": "assistant", "model": "m", "content": [block]}}))
    };
    let first = user("u1", None) + &part("a1", "u1", json!({"type": "text", "text": "thinking it over"}));
    let whole = first.clone()
        + &part("a2", "a1", json!({"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}));
    for dialect in [Dialect::Pi, Dialect::Omp] {
        // Cut inside a response, then the whole source.
        let env = Env::memory();
        let options = ImportOptions { session_dir: Some("/s".into()), ..ImportOptions::to(dialect) };
        let r = import_bytes(Path::new("src.jsonl"), first.as_bytes(), &options, &env)?;
        let before = env.storage().read(&r.path)?;
        let got = import_bytes(Path::new("src.jsonl"), whole.as_bytes(), &options, &env);
        assert!(matches!(got, Err(session::import::ImportError::SourceRewritten { .. })), "{dialect:?}: {got:?}");
        assert_eq!(env.storage().read(&r.path)?, before, "nothing written");

        // The user went on in the agent; then the source grew.
        let env = Env::memory();
        let r = import_bytes(Path::new("src.jsonl"), whole.as_bytes(), &options, &env)?;
        let mut m = SessionManager::open(dialect, &r.path, env.clone())?;
        m.append_message_json(json!({"role": "user", "content": "my own turn", "timestamp": 5}))?;
        m.close()?;
        let before = env.storage().read(&r.path)?;
        let grown = whole.clone() + &user("u2", Some("a2"));
        let got = import_bytes(Path::new("src.jsonl"), grown.as_bytes(), &options, &env);
        assert!(matches!(got, Err(session::import::ImportError::ContinuedSince { .. })), "{dialect:?}: {got:?}");
        assert_eq!(env.storage().read(&r.path)?, before, "nothing written");
    }
    Ok(())
}
