//! The one error type of the crate; every variant names the database file.

use std::path::PathBuf;

/// A failure of the prompt history store.
///
/// Every variant carries the path of the database (`:memory:` for an in-memory
/// store). Callers that must never fail a user's turn because of history (omp logs
/// and carries on) can log the error and continue: nothing else is affected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HistoryError {
    /// A directory or file operation around the database failed.
    #[error("prompt history {}: cannot {op} {}; check permissions and free space", path.display(), target.display())]
    Io {
        /// The database file.
        path: PathBuf,
        /// What was being done (`create directory`, `copy`, `remove`, …).
        op: &'static str,
        /// The file or directory the operation was applied to.
        target: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Another connection held the write lock for longer than the busy timeout.
    #[error(
        "prompt history {} is busy: another process kept it locked for more than {timeout_ms} ms during {op}; retry later",
        path.display()
    )]
    Busy {
        /// The database file.
        path: PathBuf,
        /// The operation that gave up waiting.
        op: &'static str,
        /// The configured busy timeout in milliseconds.
        timeout_ms: u64,
        /// The SQLite error (`SQLITE_BUSY` or `SQLITE_LOCKED`).
        source: rusqlite::Error,
    },
    /// SQLite reported an error.
    #[error("prompt history {}: {op} failed", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The operation that failed (`open`, `add`, `search`, …).
        op: &'static str,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// The search catalog (a derived index, safe to delete) failed.
    #[error("search catalog {}: {op} failed; deleting the file rebuilds it", path.display())]
    Catalog {
        /// The catalog file.
        path: PathBuf,
        /// The operation that failed.
        op: &'static str,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// The file at the search catalog's path is not a catalog (another program's
    /// database, a link, a file that is no database): it was left as it is and nothing
    /// was written to it.
    #[error("{} is not a search catalog: {found}; it was left as it is: remove it, or keep the catalog elsewhere", path.display())]
    NotACatalog {
        /// The path.
        path: PathBuf,
        /// What was found there.
        found: crate::NotACatalog,
    },
    /// The database is corrupt and could not be moved aside for a fresh one.
    #[error(
        "prompt history {} is corrupt ({cause}) and could not be preserved; move the file aside by hand and retry",
        path.display()
    )]
    Quarantine {
        /// The database file.
        path: PathBuf,
        /// The SQLite error that revealed the corruption.
        cause: String,
        /// Why preserving the file failed.
        source: std::io::Error,
    },
}

impl HistoryError {
    /// Returns whether SQLite reported the database file as corrupt or not a database.
    pub fn is_corrupt(&self) -> bool {
        match self {
            HistoryError::Sqlite { source, .. } | HistoryError::Catalog { source, .. } => is_corrupt(source),
            HistoryError::Quarantine { .. } => true,
            HistoryError::Io { .. } | HistoryError::Busy { .. } | HistoryError::NotACatalog { .. } => false,
        }
    }

    /// Returns whether the operation gave up waiting for a lock and may be retried.
    pub fn is_busy(&self) -> bool {
        matches!(self, HistoryError::Busy { .. })
    }
}

/// Returns whether `error` is `SQLITE_CORRUPT*` or `SQLITE_NOTADB`.
pub(crate) fn is_corrupt(error: &rusqlite::Error) -> bool {
    matches!(error.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase))
}

/// Returns whether `error` is `SQLITE_BUSY*` or `SQLITE_LOCKED*`.
pub(crate) fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(error.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
}

#[cfg(test)]
mod tests {
    #[test]
    fn error_is_small_enough_for_result() {
        // Clippy's `result_large_err` threshold is 128 bytes; callers return it often.
        assert!(std::mem::size_of::<super::HistoryError>() < 128, "{}", std::mem::size_of::<super::HistoryError>());
    }
}
