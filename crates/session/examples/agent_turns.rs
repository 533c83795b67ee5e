//! What an agent does with its sessions: start a pi session and write typed turns (a
//! question, a tool call, its result, the answer), open it again and print the context
//! the model sees, go back and branch with a summary, then list the folder and resume
//! the newest session. It runs twice with the same calls: on real files in a temporary
//! folder, and in memory.
//!
//! ```text
//! cargo run -p agent-session-store --example agent_turns
//! cargo run -p agent-session-store --example agent_turns -- --keep DIR   # files kept in DIR, their paths printed last
//! ```

use std::path::Path;

use serde_json::json;
use session::discovery::{AgentDirs, Discovery, ProcessEnv};
use session::model::typed::{AssistantMessage, Content, ContentBlock, Message, ToolResultMessage, UserMessage};
use session::{Dialect, Env, SessionManager};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> Result<()> {
    let keep = match std::env::args().nth(1).as_deref() {
        Some("--keep") => Some(std::env::args().nth(2).ok_or("--keep needs a folder")?),
        Some(other) => return Err(format!("unknown argument {other}; usage: agent_turns [--keep DIR]").into()),
        None => None,
    };
    let root = match &keep {
        Some(dir) => std::path::PathBuf::from(dir),
        None => {
            // A folder of our own: one that exists already (another's, or a link someone
            // planted) is refused, so the cleanup below removes only what we made.
            let root = std::env::temp_dir().join(format!("agent-turns-{}", std::process::id()));
            std::fs::create_dir(&root)?;
            root
        }
    };
    println!("== on files");
    let outcome = run(&root, &root.join("sessions"), &Env::files());
    if keep.is_none() {
        // The folder goes whatever happened.
        let _ = std::fs::remove_dir_all(&root);
    }
    let written = outcome?;
    println!("== in memory");
    run(Path::new("/memory"), Path::new("/memory/sessions"), &Env::memory())?;
    if keep.is_some() {
        for file in written {
            println!("{}", file.display());
        }
    }
    Ok(())
}

/// Runs the agent's turns in `sessions` on `env`; returns the files the sessions are in.
fn run(root: &Path, sessions: &Path, env: &Env) -> Result<Vec<std::path::PathBuf>> {
    let cwd = "/home/me/project";

    // 1. A new session, and one turn with a tool call.
    let mut m = SessionManager::create(Dialect::Pi, cwd, sessions, env.clone())?;
    let question = m.append_message(UserMessage::new("How many Rust files are there?", 1.0))?;
    let call = ContentBlock::tool_call("call_1", "bash", json!({"command": "ls src/*.rs | wc -l"}));
    let mut turn = AssistantMessage::new(vec![ContentBlock::text("Counting them."), call], 2.0);
    turn.provider = Some("anthropic".into());
    turn.model = Some("claude-sonnet-4-5".into());
    turn.stop_reason = Some("toolUse".into());
    m.append_message(turn)?;
    m.append_message(ToolResultMessage::new("call_1", "bash", "12", false, 3.0))?;
    m.append_message(AssistantMessage::new(vec![ContentBlock::text("There are 12.")], 4.0))?;
    let file = m.session_file().ok_or("a file session")?.to_path_buf();
    m.close()?;
    println!("wrote {}", file.display());

    // 2. Opened again: the context the model would see.
    let mut m = SessionManager::open(Dialect::Pi, &file, env.clone())?;
    println!("context at the leaf:");
    for message in &m.context()?.messages {
        println!("  {}", one_line(message));
    }

    // 3. Back to the question, with a summary of the abandoned path, and a new answer.
    m.branch_with_summary(Some(&question), "Counted the files with ls: 12.", None, None, None)?;
    m.append_message(AssistantMessage::new(vec![ContentBlock::text("12, by the summary.")], 5.0))?;
    let leaves = m.tree().entries().iter().filter(|r| r.id().is_some_and(|id| m.tree().children(id).is_empty()));
    println!("branches: {}", leaves.count());
    println!("context on the new branch:");
    for message in &m.context()?.messages {
        println!("  {}", one_line(message));
    }
    m.close()?;

    // 4. The folder listed as pi lists it, and the newest session resumed.
    let process = ProcessEnv::new(root, cwd, root);
    let discovery = Discovery::new(AgentDirs::pi(&process)).with_storage(env.storage().clone());
    for info in discovery.list(cwd, Some(sessions), &mut |_| {})? {
        println!("listed {} ({} messages): {}", info.id, info.message_count, info.first_message);
    }
    let resumed = SessionManager::continue_recent(&discovery, cwd, Some(sessions), env.clone())?;
    println!("resumed {}", resumed.session_file().map(|p| p.display().to_string()).unwrap_or_default());
    Ok(vec![file])
}

/// A message as one line: its role and its text (tool calls by name).
fn one_line(message: &Message) -> String {
    let text = |c: &Content| match c {
        Content::Text(t) => t.clone(),
        Content::Blocks(blocks) => blocks.iter().map(block).collect::<Vec<_>>().join(" "),
    };
    match message {
        Message::User(u) => format!("user: {}", text(&u.content)),
        Message::Assistant(a) => format!("assistant: {}", a.content.iter().map(block).collect::<Vec<_>>().join(" ")),
        Message::ToolResult(r) => format!("{} result: {}", r.tool_name, text(&r.content)),
        Message::BranchSummary(b) => format!("summary of another branch: {}", b.summary),
        other => format!("{}: …", other.role().unwrap_or("?")),
    }
}

fn block(b: &ContentBlock) -> String {
    match b {
        ContentBlock::Text(t) => t.text.clone(),
        ContentBlock::ToolCall(c) => format!("[calls {} {}]", c.name, c.arguments),
        _ => "[…]".to_owned(),
    }
}
