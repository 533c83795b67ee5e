//! An omp session on real files in a temporary folder, with omp's agent folder there too
//! (its blob store and breadcrumbs, so nothing reaches your own `~/.omp`): write a model
//! choice, a title and a turn through the omp handle, read it back as a read-only
//! [`Session`] and print its context, then fork it.
//!
//! ```text
//! cargo run -p agent-session-store --example omp_session
//! cargo run -p agent-session-store --example omp_session -- --keep DIR   # files kept in DIR, their paths printed last
//! ```

use std::path::Path;

use session::model::typed::Content;
use session::{
    AgentDirs, AssistantMessage, ContentBlock, Dialect, Env, Message, OmpHome, ProcessEnv, Session, SessionManager,
    UserMessage,
};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> Result<()> {
    let keep = match std::env::args().nth(1).as_deref() {
        Some("--keep") => Some(std::env::args().nth(2).ok_or("--keep needs a folder")?),
        Some(other) => return Err(format!("unknown argument {other}; usage: omp_session [--keep DIR]").into()),
        None => None,
    };
    let root = match &keep {
        Some(dir) => std::path::PathBuf::from(dir),
        None => {
            // A folder of our own: one that exists already (another's, or a link someone
            // planted) is refused, so the cleanup below removes only what we made.
            let root = std::env::temp_dir().join(format!("omp-session-{}", std::process::id()));
            std::fs::create_dir(&root)?;
            root
        }
    };
    let outcome = run(&root);
    if keep.is_none() {
        // The folder goes whatever happened.
        let _ = std::fs::remove_dir_all(&root);
    }
    if keep.is_some() {
        for file in outcome? {
            println!("{}", file.display());
        }
        return Ok(());
    }
    outcome.map(drop)
}

/// Writes the session and its fork below `root`; returns their files.
fn run(root: &Path) -> Result<Vec<std::path::PathBuf>> {
    let cwd = "/home/me/project";
    // omp's agent folder inside the temporary one: the blob store and the breadcrumbs.
    let process = ProcessEnv::new(root, cwd, root);
    let env = Env::files().with_agent_dirs(AgentDirs::omp(&process, OmpHome::Omp)).with_terminal(None);
    let sessions = root.join("sessions");

    // 1. A new session. omp writes nothing until the first assistant message.
    let mut m = SessionManager::create(Dialect::Omp, cwd, &sessions, env.clone())?;
    m.omp()?.append_model_change("anthropic/claude-sonnet-4-5", Some("default"), false)?;
    m.append_message(UserMessage::new("Rename the crate to session-store.", 1.0))?;
    println!("before the answer, on disk: {}", on_disk(&m));
    let mut answer = AssistantMessage::new(vec![ContentBlock::text("Renamed it in Cargo.toml.")], 2.0);
    answer.provider = Some("anthropic".into());
    answer.model = Some("claude-sonnet-4-5".into());
    m.append_message(answer)?;
    m.set_session_name("Rename the crate", Some("user"))?;
    println!("after the answer, on disk: {}", on_disk(&m));
    let file = m.session_file().ok_or("a file session")?.to_path_buf();

    // 2. Read back without any chance of writing: a `Session`.
    let read = Session::open(Dialect::Omp, &file, env.clone())?;
    println!("title: {}", read.session_name().unwrap_or_default());
    for message in &read.context()?.messages {
        match message {
            Message::User(u) => match &u.content {
                Content::Text(text) => println!("  user: {text}"),
                Content::Blocks(blocks) => println!("  user: {} block(s)", blocks.len()),
            },
            Message::Assistant(a) => {
                println!("  assistant ({}): {} block(s)", a.model.as_deref().unwrap_or("?"), a.content.len())
            }
            other => println!("  {}", other.role().unwrap_or("?")),
        }
    }

    // 3. A fork: a new session file with the whole transcript, the manager moves to it.
    let fork = m.omp()?.fork()?.ok_or("a forked file")?;
    println!("forked into {}", fork.file_name().map(|n| n.to_string_lossy()).unwrap_or_default());
    m.close()?;
    let forked = Session::open(Dialect::Omp, &fork, env)?;
    println!("the fork holds {} entries", forked.tree().entries().len());
    Ok(vec![file, fork])
}

/// Whether the manager's session file exists yet.
fn on_disk(m: &SessionManager) -> bool {
    m.session_file().is_some_and(|f| m.env().storage().exists(f).unwrap_or(false))
}
