//! SessionInfo rendering (`src/info.rs`).

use std::path::PathBuf;

use proptest::prelude::*;
use session_discovery::{
    Dialect, SessionInfo, SessionStatus, sanitize_name, sessions_to_json, time_ago, write_sessions_json,
};

fn sample() -> SessionInfo {
    SessionInfo {
        path: PathBuf::from("/d/x.jsonl"),
        id: "id".into(),
        id_raw: None,
        has_id: true,
        cwd: "/tmp".into(),
        name: Some("N".into()),
        title: Some("T".into()),
        parent_session_path: None,
        created: None,
        modified: Some(0),
        message_count: 2,
        assistant_turns: Some(1),
        size: Some(10),
        first_message: "a\"b".into(),
        all_messages_text: "\u{1f680}\n".into(),
        status: Some(SessionStatus::Complete),
    }
}

#[test]
fn json_per_dialect() {
    let s = sample();
    assert_eq!(
        sessions_to_json(Dialect::Pi, std::slice::from_ref(&s)),
        r#"[{"path":"/d/x.jsonl","id":"id","cwd":"/tmp","name":"N","created":null,"modified":"1970-01-01T00:00:00.000Z","messageCount":2,"firstMessage":"a\"b","allMessagesText":"🚀\n"}]"#
    );
    assert_eq!(
        sessions_to_json(Dialect::Omp, &[s]),
        r#"[{"path":"/d/x.jsonl","id":"id","cwd":"/tmp","title":"T","created":null,"modified":"1970-01-01T00:00:00.000Z","messageCount":2,"assistantTurns":1,"size":10,"firstMessage":"a\"b","allMessagesText":"🚀\n","status":"complete"}]"#
    );
    assert_eq!(sessions_to_json(Dialect::Pi, &[]), "[]");
}

/// The streamed listing writes the same bytes as the whole one, at any count (a buffer
/// flushed part way through included).
#[test]
fn streamed_json_equals_the_whole() -> Result<(), Box<dyn std::error::Error>> {
    for n in [0, 1, 2, 700] {
        let sessions: Vec<SessionInfo> =
            (0..n).map(|i| SessionInfo { path: PathBuf::from(format!("/d/{i}.jsonl")), ..sample() }).collect();
        for dialect in [Dialect::Pi, Dialect::Omp] {
            let mut out = Vec::new();
            write_sessions_json(dialect, &sessions, &mut out)?;
            assert_eq!(String::from_utf8(out)?, sessions_to_json(dialect, &sessions), "{n} sessions");
        }
    }
    Ok(())
}

#[test]
fn names_and_ages() {
    assert_eq!(sanitize_name("  a\u{7}b \nsecond").as_deref(), Some("ab"));
    assert_eq!(sanitize_name(" \n x"), None);
    assert_eq!(time_ago(0, 59_999), "just now");
    assert_eq!(time_ago(0, 3_600_000), "1h ago");
    assert_eq!(time_ago(0, 86_400_000 * 2), "2d ago");
    assert_eq!(time_ago(0, 86_400_000 * 8), "1970-01-01");
    let mut s = sample();
    s.title = None;
    s.name = None;
    s.first_message = "(no messages)".into();
    s.created = Some(45_000_000);
    assert_eq!(s.display_name(), "Untitled · 12:30");
}

proptest! {
    #[test]
    fn json_is_valid_for_any_text(t in any::<String>(), id in any::<String>()) {
        let mut s = sample();
        s.first_message = t.clone();
        s.id = id;
        let v: serde_json::Value = serde_json::from_str(&sessions_to_json(Dialect::Omp, &[s])).unwrap();
        prop_assert_eq!(v[0]["firstMessage"].as_str(), Some(t.as_str()));
    }
}
