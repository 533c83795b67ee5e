//! The prompt history of omp: every prompt a user submitted, searchable, kept in
//! `<agent dir>/history.db`, a SQLite file shared with omp 18.3.4 (and musepi).
//! It is separate from session replay: losing it loses recall, not conversations.
//!
//! * [`HistoryStore`] is one connection to the file. [`HistoryStore::open`] creates
//!   or migrates it to omp 18.3.4's exact schema and returns an [`Opened`], whose
//!   [`OpenNotice`]s report what opening did: a migration of an older file, or a
//!   corrupt file preserved as `history.db.corrupt-<ms>-<uuid>` and replaced.
//! * [`HistoryStore::add`] stores a prompt: normalized ([`normalize_prompt`]), one
//!   row per distinct prompt, which remembers its latest time, working directory and
//!   session and counts its uses ([`AddOutcome`]).
//! * [`HistoryStore::recent`] and [`HistoryStore::search`] return [`HistoryEntry`]s,
//!   newest first, optionally restricted by a [`HistoryScope`]. Search matches every
//!   token of the query ([`tokenize`]) as a word prefix through FTS5, and as a
//!   substring, and merges both.
//! * The same file holds per-session data omp indexes there: titles
//!   ([`HistoryStore::set_session_title`]) and idle recaps.
//!
//! * [`Catalog`] is a second, derived database: the full-text catalog of what was said
//!   in session files, which the facade's `session::search` fills and queries. It
//!   never reads a session file itself: callers hand it the text.
//!
//! # The file
//!
//! ```text
//! history(id INTEGER PRIMARY KEY AUTOINCREMENT, prompt TEXT NOT NULL UNIQUE,
//!         created_at INTEGER NOT NULL DEFAULT (unix seconds), cwd TEXT,
//!         session_id TEXT, use_count INTEGER NOT NULL DEFAULT 1)
//! idx_history_created_at ON history(created_at DESC)
//! history_fts USING fts5(prompt, content='history', content_rowid='id')
//!   + AFTER INSERT trigger history_ai (upserts never change `prompt`)
//! session_titles(session_id PRIMARY KEY, title, updated_at)
//! session_recaps(id, session_id, cwd, recap, created_at)
//! PRAGMA user_version = 1 once the rebuild pass has run
//! ```
//!
//! The statements are omp's, byte for byte, so `sqlite_master` reads the same
//! whichever program created the file. Older shapes (no `session_id`, no
//! `use_count`, duplicate prompts) are converged on open by omp's rebuild pass.
//!
//! # Concurrency and time
//!
//! The file is in WAL mode with `synchronous=NORMAL`: readers never wait for the
//! writer, and a write waits for another writer at most the busy timeout
//! ([`HistoryOptions::busy_timeout`], 5 s by default) before failing with
//! [`HistoryError::Busy`]; nothing is written then. Several processes and threads
//! may open the same file; a store itself is `Send`, not `Sync`. Times are unix
//! seconds from a [`Clock`] ([`SystemClock`] by default), so tests can fix them.
//!
//! # What it does not do
//!
//! It does not resolve the agent directory (pass [`history_db_path`]`(agent_dir)`),
//! does not remember the current session (pass it to `add`), never deletes prompts,
//! and keeps no process-wide singleton: open one store where you need it.
//!
//! # Example
//!
//! ```
//! use session_history::{AddOutcome, HistoryOptions, HistoryScope, HistoryStore};
//!
//! # fn main() -> Result<(), session_history::HistoryError> {
//! let store = HistoryStore::open_in_memory_with(HistoryOptions::default().with_clock(|| 1_700_000_000))?;
//! store.add("git commit -m 'fix parser'  \r\n", Some("/repo"), Some("s1"))?;
//! store.add("Explain the borrow checker", Some("/repo"), Some("s2"))?;
//! // The same prompt again, padded differently: one row, counted twice.
//! let again = store.add("git commit -m 'fix parser'", Some("/repo"), Some("s3"))?;
//! assert!(matches!(again, AddOutcome::Updated { use_count: 2, .. }));
//!
//! // Word prefixes through the full-text index, infixes through the substring stage.
//! let hits = store.search("COMMIT pars", 10, &HistoryScope::Global)?;
//! assert_eq!(hits[0].prompt, "git commit -m 'fix parser'");
//! assert_eq!(hits[0].session_id.as_deref(), Some("s3"));
//! assert_eq!(store.search("orrow", 10, &HistoryScope::Global)?.len(), 1);
//! assert_eq!(store.matching_session_ids("borrow", 500)?, ["s2"]);
//! assert_eq!(store.recent(10, &HistoryScope::Session("s2".into()))?.len(), 1);
//! # Ok(())
//! # }
//! ```

mod catalog;
mod clock;
mod error;
mod recover;
mod schema;
mod store;
mod text;

pub use catalog::{CATALOG_APPLICATION_ID, Catalog, CatalogDoc, CatalogFile, CatalogHit, CatalogWriter, NotACatalog};
pub use clock::{Clock, SystemClock};
pub use error::HistoryError;
pub use schema::OpenNotice;
pub use store::{
    AddOutcome, DEFAULT_BUSY_TIMEOUT, DEFAULT_SESSION_MATCH_LIMIT, HISTORY_DB_FILE_NAME, HistoryEntry, HistoryOptions,
    HistoryScope, HistoryStore, MAX_LIMIT, Opened, SessionRecap, history_db_path,
};
pub use text::{MAX_QUERY_WORDS, QueryWords, normalize_prompt, query_words, tokenize};

// The README's example runs as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
