//! Several connections to one file: writers wait for each other within the busy
//! timeout and never lose a write.

use std::time::Duration;

use rusqlite::Connection;
use session_history::{HistoryOptions, HistoryScope, HistoryStore};

use crate::{TempDir, TestResult, fixed};

#[test]
fn two_threads_insert_through_two_connections() -> TestResult {
    let dir = TempDir::new("threads");
    drop(HistoryStore::open(dir.join("history.db"), fixed(1))?);
    let handles: Vec<_> = (0..2)
        .map(|t| {
            let path = dir.join("history.db");
            std::thread::spawn(move || -> Result<(), session_history::HistoryError> {
                let opened = HistoryStore::open(&path, HistoryOptions::default())?;
                for i in 0..200 {
                    // Half the prompts are shared by both threads.
                    let prompt = if i % 2 == 0 { format!("shared {i}") } else { format!("thread {t} prompt {i}") };
                    opened.store.add(&prompt, Some("/repo"), Some(&format!("s{t}")))?;
                }
                Ok(())
            })
        })
        .collect();
    for handle in handles {
        handle.join().map_err(|_| "writer thread panicked")??;
    }
    let store = HistoryStore::open(dir.join("history.db"), fixed(1))?.store;
    assert_eq!(store.len()?, 100 + 2 * 100);
    let shared = store.search("shared", 1000, &HistoryScope::Global)?;
    assert_eq!(shared.len(), 100);
    assert!(shared.iter().all(|e| e.use_count == 2));
    Ok(())
}

#[test]
fn a_held_write_lock_makes_add_fail_busy_after_the_timeout() -> TestResult {
    let dir = TempDir::new("busy");
    let opts = fixed(1).with_busy_timeout(Duration::from_millis(50));
    let store = HistoryStore::open(dir.join("history.db"), opts)?.store;
    let other = Connection::open(dir.join("history.db"))?;
    other.execute_batch("BEGIN IMMEDIATE")?;
    let err = store.add("blocked", None, None).err().ok_or("add succeeded under a held lock")?;
    assert!(err.is_busy(), "{err}");
    // Readers are not blocked by the writer.
    assert!(store.recent(5, &HistoryScope::Global)?.is_empty());
    other.execute_batch("COMMIT")?;
    store.add("unblocked", None, None)?;
    assert_eq!(store.len()?, 1);
    Ok(())
}
