//! The `session` binary, run as a person runs it.

use std::path::{Path, PathBuf};
use std::process::Command;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// A directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Result<TempDir> {
        let dir = std::env::temp_dir().join(format!("session-cli-{tag}-{}", std::process::id()));
        let _ = fs_err::remove_dir_all(&dir);
        fs_err::create_dir_all(&dir)?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs_err::remove_dir_all(&self.0);
    }
}

/// Runs `session ARGS` and returns its standard output as JSON.
fn session(args: &[&str], cwd: &Path) -> Result<serde_json::Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_session"))
        .args(args)
        .current_dir(cwd)
        .env("SESSION_NO_CACHE", "1")
        .output()?;
    if !out.status.success() {
        return Err(format!("session {args:?}: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

const HEADER: &str = r#"{"type":"session","version":3,"id":"01a228d5-0000-7000-8000-000000000001","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#;
const USER: &str = r#"{"type":"message","id":"aaaaaaaa","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"q","timestamp":1}}"#;

/// A title slot line as omp writes it (256 bytes with its newline).
fn slot(title: &str) -> String {
    let base = format!(r#"{{"type":"title","v":1,"title":"{title}","updatedAt":"2026-01-01T00:00:00.000Z","pad":""}}"#);
    let pad = " ".repeat(255 - base.len());
    base.replace(r#""pad":"""#, &format!(r#""pad":"{pad}""#)) + "\n"
}

#[test]
fn rename_names_a_pi_session_with_a_session_info_entry() -> Result<()> {
    let tmp = TempDir::new("rename-pi")?;
    let file = tmp.0.join("s.jsonl");
    fs_err::write(&file, format!("{HEADER}\n{USER}\n"))?;
    let f = file.to_str().ok_or("utf-8 path")?;
    let out = session(&["rename", f, "My  session\n"], &tmp.0)?;
    let id = out["id"].as_str().ok_or("an entry id")?;
    let info = session(&["info", f], &tmp.0)?;
    assert_eq!(info["name"], "My  session");
    assert_eq!(info["leafId"], id);
    let text = fs_err::read_to_string(&file)?;
    assert!(text.starts_with(&format!("{HEADER}\n{USER}\n")), "appended, nothing rewritten");
    assert!(text.lines().nth(2).is_some_and(|l| l.contains(r#""type":"session_info""#)));
    Ok(())
}

#[test]
fn rename_writes_an_omp_title_slot_in_place() -> Result<()> {
    let tmp = TempDir::new("rename-omp")?;
    let file = tmp.0.join("s.jsonl");
    let before = format!("{}{HEADER}\n{USER}\n", slot("old"));
    fs_err::write(&file, &before)?;
    let f = file.to_str().ok_or("utf-8 path")?;
    session(&["--dialect", "omp", "rename", f, "New title"], &tmp.0)?;
    let info = session(&["--dialect", "omp", "info", f], &tmp.0)?;
    assert_eq!(info["name"], "New title");
    let after = fs_err::read_to_string(&file)?;
    assert!(after.starts_with(r#"{"type":"title","v":1,"title":"New title","source":"user""#), "{after}");
    assert_eq!(after.find('\n'), Some(255), "the slot keeps its 256 bytes");
    assert_eq!(after[256..before.len()], before[256..], "the rest of the file is untouched");
    assert!(after[before.len()..].starts_with(r#"{"type":"title_change""#));
    // Refused: a name that is empty after cleaning.
    assert_eq!(session(&["--dialect", "omp", "rename", f, " \n "], &tmp.0)?["id"], serde_json::Value::Null);
    Ok(())
}
