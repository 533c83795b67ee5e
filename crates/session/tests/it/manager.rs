//! `SessionManager` against real files and the memory storage: first-write rules,
//! repairs, migrations, branched sessions and forks of both dialects.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use session::store::{MemoryStorage, Storage};
use session::{Dialect, Env, SessionError, SessionManager};
pub(crate) use session_testkit::TempDir;

use crate::common::{Result, env_in, texts, user};

fn assistant(text: &str) -> serde_json::Value {
    json!({"role": "assistant", "content": [{"type": "text", "text": text}], "provider": "anthropic",
           "model": "claude-test", "usage": {"input": 1}, "stopReason": "stop", "timestamp": 2})
}

fn lines(path: &Path) -> Vec<String> {
    fs_err::read_to_string(path).expect("file is readable").lines().map(str::to_owned).collect()
}

#[test]
fn pi_writes_nothing_until_the_first_user_message() -> Result<()> {
    let tmp = TempDir::new("pi-lazy");
    let mut m = SessionManager::create(Dialect::Pi, "/home/u/proj", tmp.path(), env_in(tmp.path()))?;
    m.pi()?.append_model_change("anthropic", "claude-sonnet-4-5")?;
    m.append_thinking_level_change(Some("high"), None)?;
    m.append_message_json(json!({"role": "system", "content": "you are x", "timestamp": 0}))?;
    let file = m.session_file().map(Path::to_path_buf).ok_or("a persisted session has a file path")?;
    assert!(!file.exists(), "no file before a conversation message");
    let u = m.append_message_json(user("hi"))?;
    assert_eq!(lines(&file).len(), 5, "header and four entries written at once");
    let a = m.append_message_json(assistant("hello"))?;
    m.flush()?;
    let written = lines(&file);
    assert_eq!(written.len(), 6);
    assert!(written[0].starts_with(r#"{"type":"session","version":3,"id":""#));
    drop(m);
    let again = SessionManager::open(Dialect::Pi, &file, env_in(tmp.path()))?;
    assert_eq!(again.tree().leaf_id(), Some(a.as_str()));
    assert_eq!(again.tree().get_branch(None).len(), 5);
    assert!(again.tree().get(&u).is_some());
    assert_eq!(again.cwd(), "/home/u/proj");
    Ok(())
}

#[test]
fn omp_writes_nothing_until_the_first_assistant_message() -> Result<()> {
    let tmp = TempDir::new("omp-lazy");
    let mut m = SessionManager::create(Dialect::Omp, "/home/u/proj", tmp.path(), env_in(tmp.path()))?;
    m.append_message_json(user("hi"))?;
    let file = m.session_file().map(Path::to_path_buf).ok_or("file path")?;
    assert!(!file.exists());
    m.append_message_json(assistant("hello"))?;
    m.append_custom_entry("ext", Some(json!({"k": 1})))?;
    m.flush()?;
    let written = fs_err::read(&file)?;
    assert_eq!(written.iter().position(|&b| b == b'\n'), Some(255), "a 256-byte title slot comes first");
    assert_eq!(lines(&file).len(), 5);
    drop(m);
    let again = SessionManager::open(Dialect::Omp, &file, env_in(tmp.path()))?;
    assert_eq!(again.tree().entries().len(), 3);
    Ok(())
}

#[test]
fn pi_repairs_a_torn_last_line_and_keeps_the_fragment() -> Result<()> {
    let tmp = TempDir::new("pi-torn");
    let file = tmp.path().join("s.jsonl");
    let header = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#;
    let good = r#"{"type":"message","id":"aaaa0001","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"x","timestamp":1}}"#;
    fs_err::write(&file, format!("{header}\n{good}\n{{\"type\":\"mess"))?;
    let mut m = SessionManager::open(Dialect::Pi, &file, env_in(tmp.path()))?;
    assert_eq!(m.tree().entries().len(), 1);
    assert_eq!(fs_err::read_to_string(&file)?, format!("{header}\n{good}\n{{\"type\":\"mess\n"));
    let id = m.append_custom_entry("after", None)?;
    m.flush()?;
    let text = fs_err::read_to_string(&file)?;
    assert!(text.ends_with("}\n") && text.contains(id.as_str()), "the append lands on its own line");
    Ok(())
}

#[test]
fn invalid_files_are_refused_and_left_untouched() -> Result<()> {
    let tmp = TempDir::new("invalid");
    for (dialect, content) in [
        (Dialect::Pi, "garbage\n"),
        (Dialect::Pi, "\n\n"),
        (Dialect::Pi, "\u{feff}{\"type\":\"session\",\"id\":\"s\"}\n"),
        (Dialect::Omp, "{\"type\":\"message\",\"id\":\"a\"}\n"),
        (Dialect::Omp, "{\"type\":\"session\",\"id\":5}\n"),
    ] {
        let file = tmp.path().join("bad.jsonl");
        fs_err::write(&file, content)?;
        let err = match SessionManager::open(dialect, &file, env_in(tmp.path())) {
            Ok(_) => return Err(format!("{content:?} opened").into()),
            Err(e) => e,
        };
        assert!(matches!(err, SessionError::InvalidPiSession { .. } | SessionError::CannotResume { .. }), "{err}");
        assert!(err.to_string().contains("bad.jsonl"));
        assert_eq!(fs_err::read_to_string(&file)?, content, "the file is never modified");
    }
    Ok(())
}

#[test]
fn empty_files_get_a_fresh_header() -> Result<()> {
    let tmp = TempDir::new("empty");
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let file = tmp.path().join(format!("{}.jsonl", dialect.name()));
        fs_err::write(&file, "")?;
        let m = SessionManager::open(dialect, &file, env_in(tmp.path()))?;
        let text = fs_err::read_to_string(&file)?;
        assert!(text.contains(m.session_id()));
        assert!(text.contains(&format!("\"cwd\":\"{}\"", tmp.path().display())));
        assert_eq!(m.tree().leaf_id(), None);
    }
    Ok(())
}

const V1: &str = concat!(
    r#"{"type":"session","id":"legacy","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/tmp"}"#,
    "\n",
    r#"{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#,
    "\n",
    r#"{"type":"message","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"hookMessage","customType":"h","content":"x","display":true,"timestamp":2}}"#,
    "\n",
);

#[test]
fn pi_rewrites_a_migrated_file_at_open_omp_on_the_next_write() -> Result<()> {
    let tmp = TempDir::new("migrate");
    let pi_file = tmp.path().join("pi.jsonl");
    fs_err::write(&pi_file, V1)?;
    let m = SessionManager::open(Dialect::Pi, &pi_file, env_in(tmp.path()))?;
    let text = fs_err::read_to_string(&pi_file)?;
    assert!(text.lines().next().is_some_and(|h| h.ends_with(r#""version":3}"#)));
    assert!(text.contains(r#""role":"custom""#));
    assert_eq!(m.tree().entries().len(), 2);

    let omp_file = tmp.path().join("omp.jsonl");
    fs_err::write(&omp_file, V1)?;
    let mut m = SessionManager::open(Dialect::Omp, &omp_file, env_in(tmp.path()))?;
    assert_eq!(fs_err::read_to_string(&omp_file)?, V1, "omp leaves the file alone at open");
    m.append_custom_entry("x", None)?;
    m.flush()?;
    let text = fs_err::read_to_string(&omp_file)?;
    assert!(text.starts_with(r#"{"type":"title","v":1,"title":"""#));
    assert!(text.contains(r#""version":3}"#) && text.contains(r#""role":"custom""#));
    assert_eq!(text.lines().count(), 5);
    Ok(())
}

#[test]
fn pi_branched_session_rechains_around_labels() -> Result<()> {
    let tmp = TempDir::new("branched");
    let mut m = SessionManager::create(Dialect::Pi, "/tmp", tmp.path(), env_in(tmp.path()))?;
    let u1 = m.append_message_json(user("one"))?;
    m.append_label_change(&u1, Some("L1"))?;
    let a1 = m.append_message_json(assistant("two"))?;
    let u2 = m.append_message_json(user("three"))?;
    let old = m.session_file().map(Path::to_path_buf).ok_or("file")?;
    let new = m.create_branched_session(&u2)?.ok_or("a persisted session returns the new path")?;
    assert_ne!(new, old);
    let written = lines(&new);
    assert_eq!(written.len(), 5, "header, three entries, one re-created label");
    assert!(written[0].contains(&format!("\"parentSession\":\"{}\"", old.display())));
    let again = SessionManager::open(Dialect::Pi, &new, env_in(tmp.path()))?;
    let a1_entry = again.tree().get(&a1).ok_or("a1 kept")?;
    assert_eq!(a1_entry.parent_id(), Some(u1.as_str()), "re-chained around the dropped label");
    assert_eq!(again.tree().label(&u1), Some("L1"));
    Ok(())
}

#[test]
fn fork_migrates_the_copy_and_leaves_the_source() -> Result<()> {
    let tmp = TempDir::new("fork");
    let src = tmp.path().join("src.jsonl");
    fs_err::write(&src, V1)?;
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let out = tmp.path().join(format!("out-{}", dialect.name()));
        let m = SessionManager::fork_from(dialect, &src, "/var/tmp", &out, env_in(tmp.path()))?;
        assert_eq!(fs_err::read_to_string(&src)?, V1);
        assert_eq!(m.tree().entries().len(), 2);
        assert!(m.tree().entries().iter().all(|r| r.id().is_some()), "v1 entries got ids");
        let file = m.session_file().map(Path::to_path_buf).ok_or("file")?;
        let reopened = SessionManager::open(dialect, &file, env_in(tmp.path()))?;
        assert_eq!(reopened.tree().get_branch(None).len(), 2);
        assert_eq!(reopened.cwd(), "/var/tmp");
    }
    Ok(())
}

/// A source without a valid header (empty, garbage, blank lines, entries without a
/// header): pi refuses to fork it; omp 18.3.4 loads it as no entries and forks a new,
/// empty session whose header has no lineage (`type, version, id, timestamp, cwd`) and
/// whose title slot is empty. The source is left as it was.
#[test]
fn omp_forks_a_source_without_a_header_as_an_empty_session() -> Result<()> {
    let tmp = TempDir::new("fork-invalid");
    let sources: [&[u8]; 4] = [b"", b"garbage\n", b"\n\n", b"{\"type\":\"message\",\"id\":\"a\"}\n"];
    for (k, bytes) in sources.iter().enumerate() {
        let src = tmp.path().join(format!("src-{k}.jsonl"));
        fs_err::write(&src, bytes)?;
        let pi = SessionManager::fork_from(Dialect::Pi, &src, "/var/tmp", &tmp.path().join("pi"), env_in(tmp.path()));
        assert!(
            matches!(pi, Err(SessionError::ForkSourceInvalid { ref path }) if *path == src),
            "pi refuses {k}: {:?}",
            pi.map(|m| m.session_file().map(Path::to_path_buf))
        );
        let out = tmp.path().join(format!("omp-{k}"));
        let m = SessionManager::fork_from(Dialect::Omp, &src, "/var/tmp", &out, env_in(tmp.path()))?;
        assert_eq!(fs_err::read(&src)?, *bytes, "the source is untouched");
        assert!(m.tree().entries().is_empty());
        let file = m.session_file().map(Path::to_path_buf).ok_or("file")?;
        let text = fs_err::read_to_string(&file)?;
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "a title slot and a header: {text}");
        assert!(lines[0].starts_with(r#"{"type":"title","v":1,"title":"","updatedAt":"#), "{}", lines[0]);
        let header: serde_json::Value = serde_json::from_str(lines[1])?;
        let keys: Vec<&str> = header.as_object().ok_or("object")?.keys().map(String::as_str).collect();
        assert_eq!(keys, ["type", "version", "id", "timestamp", "cwd"], "{}", lines[1]);
        assert_eq!(header["cwd"], "/var/tmp");
        let reopened = SessionManager::open(Dialect::Omp, &file, env_in(tmp.path()))?;
        assert_eq!(reopened.cwd(), "/var/tmp");
    }
    Ok(())
}

#[test]
fn every_entry_type_round_trips_through_a_file() -> Result<()> {
    let storage = Arc::new(MemoryStorage::new());
    let env = Env::memory().with_storage(storage.clone());
    let dir = Path::new("/mem/sessions");
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let mut m = SessionManager::create(dialect, "/p", dir, env.clone())?;
        let u = m.append_message_json(user("q"))?;
        m.append_message_json(assistant("a"))?;
        m.append_thinking_level_change(Some("high"), Some("auto"))?;
        m.append_custom_entry("c", Some(json!([1, "x", {"2": 0, "b": 1e21}])))?;
        m.append_custom_message_entry("cm", "text", true, Some(json!({"d": 1})), Some("user"))?;
        m.append_label_change(&u, Some("mark"))?;
        m.append_compaction("sum", Some(&u), json!(123), Default::default())?;
        m.branch_with_summary(Some(&u), "left", None, Some(false), None)?;
        match dialect {
            Dialect::Pi => {
                m.pi()?.append_model_change("openai", "gpt-5")?;
                let usage = session::model::typed::Usage { input: Some(1.0), ..Default::default() };
                m.pi()?.append_usage("cache_warm", "p", "m", &usage, Some("n"))?;
                m.pi()?.append_context_edit(&u, json!({"content": "edited"}))?;
                m.set_session_name("  a\nname ", None)?;
            }
            Dialect::Omp => {
                m.omp()?.append_model_change("openai/gpt-5", Some("smol"), false)?;
                m.omp()?.append_service_tier_change(json!({"openai": "flex"}))?;
                m.omp()?.append_mode_change("plan", Some(json!({"planFile": "/tmp/p.md"})))?;
                m.omp()?.append_session_init(json!({"systemPrompt": "s", "task": "t", "tools": ["read"]}))?;
                m.omp()?.append_ttsr_injection(&["ruleA".to_owned()])?;
                m.omp()?.append_credential_pin("openai", "abc")?;
                m.omp()?.append_reset_boundary()?;
                m.set_session_name("Title", Some("user"))?;
            }
        }
        m.flush()?;
        let file = m.session_file().map(Path::to_path_buf).ok_or("file")?;
        let expected = texts(&m);
        let name = m.session_name();
        drop(m);
        let again = SessionManager::open(dialect, &file, env.clone())?;
        assert_eq!(texts(&again), expected, "{dialect:?}: entries read back byte for byte");
        assert_eq!(again.session_name(), name);
        assert!(storage.exists(&file)?);
    }
    Ok(())
}

fn discovery(dialect: Dialect, root: &Path) -> session::discovery::Discovery {
    use session::discovery::{AgentDirs, Discovery, OmpHome, ProcessEnv};
    let env = ProcessEnv::new(root.join("home"), root, "/nonexistent-tmp")
        .with_var("PI_CODING_AGENT_DIR", &root.join("agent").to_string_lossy());
    Discovery::new(AgentDirs::for_dialect(dialect, &env, OmpHome::MusePi))
}

#[test]
fn continue_recent_reopens_the_newest_session_or_starts_one() -> Result<()> {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let tmp = TempDir::new("continue");
        let d = discovery(dialect, tmp.path());
        let cwd = tmp.path().join("proj");
        fs_err::create_dir_all(&cwd)?;
        let cwd = cwd.to_string_lossy().into_owned();
        // Nothing yet: a new session in the cwd's default directory.
        let first = SessionManager::continue_recent(&d, &cwd, None, env_in(tmp.path()))?;
        assert!(first.tree().entries().is_empty());
        let dir = first.session_file().and_then(Path::parent).ok_or("dir")?.to_path_buf();
        drop(first);
        let mut older = SessionManager::create(dialect, &cwd, &dir, env_in(tmp.path()))?;
        older.append_message_json(user("old"))?;
        older.append_message_json(assistant("old answer"))?;
        older.flush()?;
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut newer = SessionManager::create(dialect, &cwd, &dir, env_in(tmp.path()))?;
        newer.append_message_json(user("new"))?;
        let newest = newer.append_message_json(assistant("new answer"))?;
        newer.flush()?;
        let newest_file = newer.session_file().ok_or("file")?.to_path_buf();
        drop((older, newer));
        let again = SessionManager::continue_recent(&d, &cwd, None, env_in(tmp.path()))?;
        assert_eq!(again.session_file(), Some(newest_file.as_path()), "{dialect:?}");
        assert_eq!(again.tree().leaf_id(), Some(newest.as_str()));
        assert_eq!(again.cwd(), cwd);
    }
    Ok(())
}

/// omp renames a session by appending a `title_change` and writing the 256-byte title
/// slot over the first line in place; everything else in the file stays as it was
/// (the header line keeps its old title, as in omp: the slot is authoritative).
#[test]
fn omp_rename_writes_the_title_slot_in_place() -> Result<()> {
    let tmp = TempDir::new("omp-retitle");
    let env = env_in(tmp.path());
    let mut m = SessionManager::create(Dialect::Omp, "/p", tmp.path(), env.clone())?;
    m.append_message_json(user("q"))?;
    m.append_message_json(assistant("a"))?;
    m.set_session_name("First", Some("user"))?;
    m.flush()?;
    let file = m.session_file().ok_or("file")?.to_path_buf();
    let before = fs_err::read(&file)?;
    m.set_session_name("Second title", Some("user"))?;
    m.flush()?;
    let after = fs_err::read(&file)?;
    let slot = session::model::SLOT_BYTES;
    assert_eq!(after[slot..before.len()], before[slot..], "the lines after the slot are untouched");
    let first_line = std::str::from_utf8(&after[..slot - 1])?;
    let parsed = session::model::TitleSlot::parse(first_line).ok_or("a title slot")?;
    assert_eq!((parsed.title.as_str(), parsed.source.as_deref()), ("Second title", Some("user")));
    assert_eq!(after[slot - 1], b'\n');
    let appended = std::str::from_utf8(&after[before.len()..])?;
    assert!(appended.starts_with(r#"{"type":"title_change""#) && appended.ends_with('\n'), "{appended}");
    assert_eq!(appended.matches('\n').count(), 1, "one line appended");
    drop(m);
    let again = SessionManager::open(Dialect::Omp, &file, env)?;
    assert_eq!(again.session_name().as_deref(), Some("Second title"));
    assert_eq!(again.header().get_str("titleSource"), Some("user"));
    Ok(())
}

/// A file without a title slot (written before omp had one) is rewritten whole, with
/// a slot, when renamed.
#[test]
fn omp_rename_of_a_file_without_slot_rewrites_it_with_one() -> Result<()> {
    let tmp = TempDir::new("omp-retitle-legacy");
    let env = env_in(tmp.path());
    let file = tmp.path().join("legacy.jsonl");
    let lines = [
        r#"{"type":"session","version":3,"id":"01a228d5-0000-7000-8000-000000000001","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#,
        r#"{"type":"message","id":"aaaaaaaa","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"q","timestamp":1}}"#,
    ];
    fs_err::write(&file, lines.join("\n") + "\n")?;
    let mut m = SessionManager::open(Dialect::Omp, &file, env.clone())?;
    m.set_session_name("Named", Some("user"))?;
    m.flush()?;
    let text = fs_err::read_to_string(&file)?;
    assert!(text.starts_with(r#"{"type":"title","v":1,"title":"Named""#), "{text}");
    assert!(text.lines().nth(1).is_some_and(|h| h.contains(r#""title":"Named""#)), "the header carries it");
    assert!(text.contains(lines[1]), "the entry is kept byte for byte");
    drop(m);
    let again = SessionManager::open(Dialect::Omp, &file, env)?;
    assert_eq!(again.session_name().as_deref(), Some("Named"));
    assert_eq!(again.tree().entries().len(), 2);
    Ok(())
}
