//! Integration tests of `session-history`: real `history.db` files in temporary
//! directories, in both directions against omp 18.3.4's schema, plus properties,
//! corruption recovery and concurrency.

mod catalog;
mod concurrency;
mod omp_compat;
mod props;
mod recover;
mod store;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A unique directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates a fresh directory whose name includes `tag`.
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let nonce: u64 = rand::random();
        let dir = std::env::temp_dir().join(format!(
            "session-history-it-{tag}-{}-{}-{nonce:016x}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        fs_err::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    /// Returns the directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Returns `<dir>/history.db`.
    pub fn db(&self) -> PathBuf {
        self.0.join("history.db")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs_err::remove_dir_all(&self.0);
    }
}

/// Options with a fixed clock.
pub fn fixed(now: i64) -> session_history::HistoryOptions {
    session_history::HistoryOptions::default().with_clock(move || now)
}

/// The result type of tests that use `?`.
pub type TestResult = Result<(), Box<dyn std::error::Error>>;
