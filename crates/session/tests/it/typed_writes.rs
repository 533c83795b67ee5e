//! Typed writes: `append_message` takes the typed model and writes what the raw JSON of
//! the same message writes; a message that cannot be one is refused before a byte lands.

use proptest::prelude::*;
use serde_json::json;
use session::model::typed::{AssistantMessage, ContentBlock, Entry, Message, ToolResultMessage, Usage, UserMessage};
use session::store::{MemoryStorage, Storage};
use session::{Dialect, Env, SessionError, SessionManager};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// A new session on a memory storage (its file written as the dialect writes a new
/// one), the storage, and the file's path.
fn session(dialect: Dialect) -> Result<(SessionManager, std::sync::Arc<MemoryStorage>, std::path::PathBuf)> {
    let storage = std::sync::Arc::new(MemoryStorage::new());
    let env = Env::bare(storage.clone());
    let m = SessionManager::create(dialect, "/work", std::path::Path::new("/s"), env)?;
    let path = m.session_file().ok_or("a file")?.to_path_buf();
    Ok((m, storage, path))
}

/// The file's lines after the header, with the ids and parents each entry got.
fn lines_after_header(storage: &MemoryStorage, path: &std::path::Path) -> Result<Vec<String>> {
    let bytes = storage.read(path)?;
    let text = String::from_utf8(bytes)?;
    Ok(text.lines().skip_while(|l| !l.contains("\"type\":\"session\"")).skip(1).map(str::to_owned).collect())
}

/// A user turn, an assistant turn calling a tool, its result and the answer, written
/// typed in one session and as JSON in another: the files are the same, byte for byte.
#[test]
fn typed_and_raw_messages_write_the_same_bytes() -> Result<()> {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let (mut typed, typed_store, typed_path) = session(dialect)?;
        let (mut raw, raw_store, raw_path) = session(dialect)?;
        let call = ContentBlock::tool_call("call_1", "bash", json!({"command": "ls"}));
        let mut turn = AssistantMessage::new(vec![ContentBlock::text("Listing."), call], 2.0);
        turn.provider = Some("anthropic".into());
        turn.model = Some("claude-x".into());
        turn.usage = Some(Usage { input: Some(10.0), output: Some(5.0), total_tokens: Some(15.0), ..Usage::default() });
        turn.stop_reason = Some("toolUse".into());
        let typed_ids = [
            typed.append_message(UserMessage::new("list the files", 1.0))?,
            typed.append_message(turn.clone())?,
            typed.append_message(ToolResultMessage::new("call_1", "bash", "a\nb", false, 3.0))?,
            typed.append_message(AssistantMessage::new(vec![ContentBlock::text("Two.")], 4.0))?,
        ];
        let raw_ids = [
            raw.append_message_json(json!({"role": "user", "content": "list the files", "timestamp": 1}))?,
            raw.append_message_json(Message::from(turn).to_value())?,
            raw.append_message_json(json!({
                "role": "toolResult", "toolCallId": "call_1", "toolName": "bash", "content": "a\nb",
                "isError": false, "timestamp": 3,
            }))?,
            raw.append_message_json(
                json!({"role": "assistant", "content": [{"type": "text", "text": "Two."}], "timestamp": 4}),
            )?,
        ];
        typed.flush()?;
        raw.flush()?;
        let (t, r) = (lines_after_header(&typed_store, &typed_path)?, lines_after_header(&raw_store, &raw_path)?);
        assert_eq!(t.len(), 4, "{dialect:?}: {t:?}");
        // The ids are random: put each file's own in place of the other's.
        let mut r_as_t = r.join("\n");
        for (a, b) in raw_ids.iter().zip(&typed_ids) {
            r_as_t = r_as_t.replace(a.as_str(), b.as_str());
        }
        // Timestamps of the entries differ by when they were written: compare messages.
        let messages = |text: &str| -> Result<Vec<serde_json::Value>> {
            text.lines().map(|l| Ok(serde_json::from_str::<serde_json::Value>(l)?["message"].clone())).collect()
        };
        assert_eq!(messages(&t.join("\n"))?, messages(&r_as_t)?, "{dialect:?}");
        // And each message line's `message` text is the raw one's, key for key.
        for (tl, rl) in t.iter().zip(r_as_t.lines()) {
            let cut = |l: &str| l[l.find("\"message\":").unwrap_or(0)..].to_owned();
            assert_eq!(cut(tl), cut(rl), "{dialect:?}");
        }
        let context = typed.context()?;
        assert_eq!(context.messages.len(), 4);
    }
    Ok(())
}

/// An unknown message without a string role is refused, and nothing is written.
#[test]
fn a_message_without_a_role_is_refused_before_writing() -> Result<()> {
    let (mut m, storage, path) = session(Dialect::Omp)?;
    // A turn on the file first, so that the bytes compared below exist.
    m.append_message(UserMessage::new("q", 1.0))?;
    m.append_message(AssistantMessage::new(vec![ContentBlock::text("a")], 2.0))?;
    m.flush()?;
    let before = storage.read(&path)?;
    assert!(before.ends_with(b"\n") && before.len() > 100, "the turn is on the file");
    for bad in [json!(null), json!("hi"), json!({"content": "no role"}), json!({"role": 7})] {
        let err = m.append_message(Message::Unknown(bad.clone())).err().ok_or("refused")?;
        assert!(
            matches!(&err, SessionError::Typed(session::model::typed::TypedError::Field { path, .. }) if path == "role"),
            "{bad}: {err}"
        );
    }
    m.flush()?;
    assert_eq!(storage.read(&path)?, before);
    assert_eq!(m.tree().entries().len(), 2);
    // An unknown role is a message like any other.
    m.append_message(Message::Unknown(json!({"role": "x-future", "content": "kept"})))?;
    assert_eq!(m.tree().entries().len(), 3);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever the text and time, a typed user or assistant message reads back from
    /// the session as the message written.
    #[test]
    fn a_typed_message_reads_back_as_written(text in "\\PC{0,40}", ts in 0u32..2_000_000_000, assistant in any::<bool>()) {
        let message: Message = if assistant {
            AssistantMessage::new(vec![ContentBlock::text(text.clone())], f64::from(ts)).into()
        } else {
            UserMessage::new(text.clone(), f64::from(ts)).into()
        };
        let mut m = SessionManager::in_memory(Dialect::Pi, "/work", Env::memory());
        let id = m.append_message(message.clone()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let record = m.tree().get(&id).ok_or_else(|| TestCaseError::fail("the entry"))?;
        let Ok(Entry::Message(entry)) = record.entry() else { return Err(TestCaseError::fail("a message entry")) };
        prop_assert_eq!(entry.message, message);
    }
}
