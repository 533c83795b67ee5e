//! Writes session files with omp's lifecycle operations (`persist_copy`, `fork`,
//! `move_to`, an atomic batch, `create_empty_session_file`, `new_session`) next to an
//! omp session, and prints their paths, one per line: `scripts/ref-roundtrip.py` asks
//! the real omp about them.
//!
//! ```text
//! cargo run --release -p session --example lifecycle_files -- SESSION.jsonl BLOB_DIR
//! ```

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use session::store::{BlobStore, FileStorage};
use session::{Dialect, Env, NewSessionOptions, SessionManager};

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [source, blobs] = args.as_slice() else {
        return Err("usage: lifecycle_files SESSION.jsonl BLOB_DIR".into());
    };
    let source = PathBuf::from(source);
    let dir = source.parent().ok_or("the session has a directory")?.to_path_buf();
    let env = Env::bare(Arc::new(FileStorage::new())).with_blobs(BlobStore::open(blobs)).with_process_cwd(&dir);
    let mut written: Vec<PathBuf> = Vec::new();

    let mut m = SessionManager::open(Dialect::Omp, &source, env.clone())?;
    written.push(m.omp()?.persist_copy(None)?);
    written.extend(m.omp()?.fork()?);
    m.append_custom_entry("after-fork", Some(json!({"n": 1})))?;
    // The fork stays where it is: a second one moves.
    m.omp()?.fork()?;
    let moved = m.move_to("/var/tmp/moved-cwd", Some(&dir.join("moved")))?;
    m.append_custom_entry("after-move", None)?;
    m.omp()?.append_entries_atomically(|m| {
        m.append_message_json(json!({"role": "user", "content": "batched question", "timestamp": 1}))?;
        m.append_message_json(json!({"role": "assistant", "content": [{"type": "text", "text": "batched answer"}],
                                "provider": "p", "model": "m", "stopReason": "stop", "timestamp": 2}))
    })?;
    m.flush_sync()?;
    written.extend(moved);

    written.push(SessionManager::create_empty_session_file("/var/tmp/empty", Some(&dir), &env)?);

    let mut n = SessionManager::create(Dialect::Omp, "/var/tmp/new", &dir, env.clone())?;
    n.new_session(NewSessionOptions::default().parent_session("parent"))?;
    n.append_message_json(json!({"role": "user", "content": "hi", "timestamp": 3}))?;
    n.flush()?;
    written.extend(n.session_file().map(Path::to_path_buf));

    for path in written {
        println!("{}", path.display());
    }
    Ok(())
}
