//! Sessions on PostgreSQL, in omp's `omp_session_files` table: the same calls as on
//! files, with the storage swapped. Write a turn, read it back as a [`Session`], list the
//! folder as pi does, then remove the session.
//!
//! ```text
//! cargo run -p agent-session-store --features postgres --example postgres -- "host=/var/run/postgresql dbname=mine"
//! ```
//!
//! The table is created in that database if it is missing; the session is written under
//! `/examples/<pid>/` and removed at the end.

use std::path::PathBuf;
use std::sync::Arc;

use session::Storage;
use session::store_postgres::PostgresStorage;
use session::{
    AgentDirs, AssistantMessage, ContentBlock, Dialect, Discovery, Env, ProcessEnv, Session, SessionManager,
    UserMessage,
};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> Result<()> {
    let conn = std::env::args()
        .nth(1)
        .ok_or("usage: postgres <connection string>, e.g. \"host=/var/run/postgresql dbname=mine\"")?;
    let storage = Arc::new(PostgresStorage::connect(&conn)?);
    let env = Env::bare(storage.clone());
    let sessions = PathBuf::from(format!("/examples/{}", std::process::id()));
    let outcome = run(&env, &sessions);
    // The example's sessions go whatever happened.
    for name in storage.list(&sessions).unwrap_or_default() {
        let _ = storage.unlink(&sessions.join(name));
    }
    outcome
}

fn run(env: &Env, sessions: &std::path::Path) -> Result<()> {
    let cwd = "/home/me/project";
    let mut m = SessionManager::create(Dialect::Pi, cwd, sessions, env.clone())?;
    m.append_message(UserMessage::new("What is in the table?", 1.0))?;
    m.append_message(AssistantMessage::new(vec![ContentBlock::text("One session: this one.")], 2.0))?;
    let file = m.session_file().ok_or("a persisted session")?.to_path_buf();
    m.close()?;
    println!("wrote {} on PostgreSQL", file.display());

    let read = Session::open(Dialect::Pi, &file, env.clone())?;
    println!("{} messages in the context", read.context()?.messages.len());

    let process = ProcessEnv::new("/home/me", cwd, "/tmp");
    let discovery = Discovery::new(AgentDirs::pi(&process)).with_storage(env.storage().clone());
    for info in discovery.list(cwd, Some(sessions), &mut |_| {})? {
        println!("listed {}: {}", info.id, info.first_message);
    }
    Ok(())
}
