//! SQLite storage for session files, in the table omp 18.3.4's `SqlSessionStorage` uses
//! on SQLite (`bun:sql`'s SQLite adapter), so a session written here loads in omp and the
//! other way round.
//!
//! [`SqliteStorage`] implements [`session_store::Storage`] and passes the storage contract
//! (`session_store::contract::run_contract`; not the byte cases: omp's column is `TEXT`,
//! which holds UTF-8 without NUL bytes here). Each session file is one row; its path, as
//! a `/`-separated string, is the key; a directory is a key prefix, and
//! [`Storage::list`] returns the direct children of one; [`Storage::read_dir`] returns
//! them with dot-files and the sub-prefixes that hold keys, as directories. The key
//! helpers are `session_store::keyed`'s, shared with the PostgreSQL and Redis storages.
//! The connection is [`rusqlite`]'s, to the bundled SQLite.
//!
//! # Schema
//!
//! Created on open unless [`SqliteOptions::create_table`] is off, exactly as omp 18.3.4
//! creates it on SQLite (a name other than `omp_session_files` must match
//! `[A-Za-z_][A-Za-z0-9_]{0,62}`):
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS omp_session_files (path TEXT PRIMARY KEY, content TEXT NOT NULL,
//!     mtime_ms INTEGER NOT NULL, title TEXT, title_source TEXT, title_updated_at TEXT);
//! ALTER TABLE omp_session_files ADD COLUMN title TEXT;             -- "duplicate column" ignored
//! ALTER TABLE omp_session_files ADD COLUMN title_source TEXT;      -- "duplicate column" ignored
//! ALTER TABLE omp_session_files ADD COLUMN title_updated_at TEXT;  -- "duplicate column" ignored
//! ```
//!
//! Opened with [`SqliteOptions::read_only`](session_store::keyed::TableOptions::read_only),
//! the storage creates nothing, which is what a command that only reads or a dry run
//! needs: an existing database is opened with `SQLITE_OPEN_READONLY` and its table looked
//! up in the catalog, a missing database file or table reads as an empty store, missing
//! title columns read as unset, and every write is refused with [`SqliteError::ReadOnly`].
//!
//! # Operations
//!
//! * Sizes are byte lengths, `octet_length(content)` (omp writes
//!   `length(cast(content AS blob))`, the same number).
//! * [`Storage::append`] is omp's upsert that concatenates:
//!   `INSERT … ON CONFLICT (path) DO UPDATE SET content = t.content || excluded.content, mtime_ms = …`,
//!   which rewrites the row: **an append costs O(size of the session)**, as on omp's
//!   PostgreSQL table. [`Storage::append_expected`] appends only at an expected size, in one
//!   `UPDATE … SET content = content || ? WHERE path = ? AND octet_length(content) = ?`.
//! * Whole-file writes map [`ExpectedSize`](session_store::ExpectedSize) onto omp's
//!   compare-and-set: `Any` is an upsert that replaces, `Missing` an insert that does
//!   nothing on conflict, `Bytes(n)` an `UPDATE … WHERE octet_length(content) = n`; a
//!   refused write is [`StoreError::Conflict`](session_store::StoreError::Conflict) with
//!   the size found. Writes fill the title columns from the body's title slot when it is
//!   one omp would write (else they are cleared), as omp's `writeFull` does.
//! * Reads lay the title columns, when set, over the body's 256-byte title slot, as omp's
//!   indexed storage does: omp's `updateSessionTitle` ([`SqliteStorage::update_title`]
//!   here) changes only the columns.
//! * [`Storage::rename`], [`Storage::truncate`] and [`Storage::delete_with_artifacts`]
//!   each run in one `BEGIN IMMEDIATE` transaction.
//! * [`Storage::lock`] takes the file storage's lock of a file of its own in
//!   `<database>.locks/` (mode 0700), named by a hash of the table and the path: it
//!   excludes every holder on the machine and is dropped with its holder. omp takes no
//!   lock on SQL storage.
//! * [`Storage::watch`] polls the row's size and mtime every 50 ms while a caller waits
//!   (SQLite tells other connections nothing).
//! * [`Storage::ensure_dir`] remembers an empty directory in this storage only (omp's is
//!   a no-op); a directory with files exists for everyone.
//! * One connection per storage (clones share it). Another connection or process that
//!   holds the database's write lock is waited for up to five seconds, then the call fails
//!   with `ResourceBusy`. Every append and write is one committed statement or
//!   transaction, as durable as the database's journal mode and `synchronous` setting make
//!   it (SQLite's defaults: durable at commit). The journal mode is left as the database
//!   has it.
//!
//! # Limits and errors
//!
//! | limit | error |
//! |---|---|
//! | a row of [`MAX_CONTENT_BYTES`] (SQLite's `SQLITE_MAX_LENGTH`) | `StoreError::Io`, kind `FileTooLarge` ([`SqliteError::TooLarge`]); nothing written |
//! | content with a NUL byte or invalid UTF-8, a truncate that would add NUL bytes or cut a character | kind `InvalidData` ([`SqliteError::InvalidContent`]); nothing written |
//! | a bad key (not UTF-8, NUL, `..`, longer than [`MAX_KEY_BYTES`]) | kind `InvalidInput` ([`SqliteError::BadPath`]) |
//! | the database held by another writer past the busy timeout | kind `ResourceBusy`; nothing written |
//! | a full disk | kind `StorageFull`; nothing written |
//!
//! ```no_run
//! use session_store::Storage;
//! use session_store_sqlite::SqliteStorage;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let storage = SqliteStorage::open(std::path::Path::new("/var/lib/agents/sessions.db"))?;
//! storage.append(std::path::Path::new("/sessions/--p--/s.jsonl"), b"{\"type\":\"session\"}\n")?;
//! # Ok(())
//! # }
//! ```

mod error;
mod storage;

pub use error::{ConnectError, MAX_CONTENT_BYTES, MAX_KEY_BYTES, SqliteError};
pub use session_store::keyed::OMP_TABLE as DEFAULT_TABLE;
pub use session_store::keyed::valid_table_name;
pub use storage::{SqliteOptions, SqliteStorage};

#[cfg(doc)]
use session_store::Storage;

// The README's example runs as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
