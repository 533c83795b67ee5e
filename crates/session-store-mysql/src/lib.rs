//! MySQL and MariaDB storage for session files, in the table omp 18.3.4's
//! `SqlSessionStorage` uses on MySQL (`bun:sql`'s MySQL adapter), so a session written
//! here loads in omp and the other way round.
//!
//! [`MysqlStorage`] implements [`session_store::Storage`] and passes the storage contract
//! (`session_store::contract::run_contract`; not the byte cases: the column is `utf8mb4`
//! text). Each session file is one row; its path, as a `/`-separated string, is the key; a
//! directory is a key prefix, and [`Storage::list`] returns the direct children of one;
//! [`Storage::read_dir`] returns them with dot-files and the sub-prefixes that hold keys,
//! as directories. The key helpers are `session_store::keyed`'s, shared with the other
//! server storages. Connections come from the [`mysql`] crate's pool of synchronous
//! connections: nothing async is visible here.
//!
//! # Schema
//!
//! Created on connect unless [`MysqlOptions::create_table`] is off, exactly as omp 18.3.4
//! creates it on MySQL (a name other than `omp_session_files` must match
//! `[A-Za-z_][A-Za-z0-9_]{0,62}`):
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS omp_session_files (path VARCHAR(512) NOT NULL PRIMARY KEY,
//!     content LONGTEXT NOT NULL, mtime_ms BIGINT NOT NULL, title TEXT NULL,
//!     title_source VARCHAR(16) NULL, title_updated_at VARCHAR(64) NULL)
//!     ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
//! ALTER TABLE omp_session_files ADD COLUMN title TEXT NULL;                   -- "duplicate column" ignored
//! ALTER TABLE omp_session_files ADD COLUMN title_source VARCHAR(16) NULL;     -- "duplicate column" ignored
//! ALTER TABLE omp_session_files ADD COLUMN title_updated_at VARCHAR(64) NULL; -- "duplicate column" ignored
//! ```
//!
//! Opened with [`MysqlOptions::read_only`](session_store::keyed::TableOptions::read_only),
//! the storage creates, alters and writes nothing, which is what a command that only
//! reads or a dry run needs: it looks the table up in `information_schema`, reads a
//! missing table as an empty store and missing title columns as unset, and refuses every
//! write with [`MysqlError::ReadOnly`].
//!
//! # Operations
//!
//! * The pool opens one connection at first and at most sixteen. A lock
//!   ([`Storage::lock`]) keeps its connection until released; the server drops the lock
//!   with a connection it closes (`wait_timeout`, a restart), and the holder learns of it
//!   only at release.
//! * Every connection runs with `sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'`
//!   (a value that does not fit is an error, never a truncated row) and the
//!   `CLIENT_FOUND_ROWS` capability (an `UPDATE` counts the rows it matched, so a
//!   size-checked write of the same bytes succeeds).
//! * Sizes are byte lengths, `LENGTH(content)`, which reads the value: a stat costs
//!   O(size of the session) on the server, as omp's index load does.
//! * [`Storage::append`] is omp's upsert that concatenates:
//!   `INSERT … ON DUPLICATE KEY UPDATE content = CONCAT(content, …), mtime_ms = …`, which
//!   rewrites the row: **an append costs O(size of the session)**.
//!   [`Storage::append_expected`] appends only at an expected size, in one
//!   `UPDATE … SET content = CONCAT(content, …) WHERE path = … AND LENGTH(content) = …`.
//! * Whole-file writes map [`ExpectedSize`](session_store::ExpectedSize) onto omp's
//!   compare-and-set: `Any` is an upsert that replaces, `Missing` a plain `INSERT` whose
//!   duplicate-key error means the file exists (omp's `INSERT IGNORE` would also hide other
//!   errors), `Bytes(n)` an `UPDATE … WHERE LENGTH(content) = n`; a refused
//!   write is [`StoreError::Conflict`](session_store::StoreError::Conflict) with the size
//!   found. Writes fill the title columns from the body's title slot, as omp's `writeFull`
//!   does; reads lay the title columns over the slot.
//! * [`Storage::rename`], [`Storage::truncate`] and [`Storage::delete_with_artifacts`]
//!   each run in one transaction. Prefixes are `LIKE … ESCAPE '!'` ranges of the
//!   binary-collated primary key.
//! * [`Storage::lock`] takes `GET_LOCK` on a name made from the database, the table and the path, on a
//!   connection of its own (released with the lock, or by the server when the connection
//!   dies). omp takes no lock on SQL storage.
//! * [`Storage::watch`] polls the row's size and mtime every 50 ms while a caller waits.
//! * [`Storage::ensure_dir`] remembers an empty directory in this storage only (omp's is
//!   a no-op); a directory with files exists for everyone.
//! * Every append and write is one committed statement or transaction (InnoDB).
//!
//! # Limits and errors
//!
//! | limit | error |
//! |---|---|
//! | a session, or a statement writing it, past the server's `max_allowed_packet` (16 MiB by default on MariaDB 10.11; [`MysqlStorage::max_content_bytes`]) | `StoreError::Io`, kind `FileTooLarge` ([`MysqlError::TooLarge`]: a whole write is checked before sending, an append by its own statement); nothing written |
//! | content with a NUL byte or invalid UTF-8; a truncate that would add NUL bytes or cut a character | kind `InvalidData` ([`MysqlError::InvalidContent`]); nothing written |
//! | a path over omp's 512 characters, ending in a space (the collation ignores it), not UTF-8, with NUL or `..` | kind `InvalidInput` ([`MysqlError::BadPath`]) |
//! | a lock wait timeout or a deadlock | kind `ResourceBusy`; the statement's transaction rolled back |
//! | no connection, or a lost one | kind `ConnectionRefused` / `ConnectionAborted`; the pool reconnects on the next call |
//!
//! ```no_run
//! use session_store::Storage;
//! use session_store_mysql::MysqlStorage;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let storage = MysqlStorage::connect("mysql://root@127.0.0.1:3306/sessions")?;
//! storage.append(std::path::Path::new("/sessions/--p--/s.jsonl"), b"{\"type\":\"session\"}\n")?;
//! # Ok(())
//! # }
//! ```

mod error;
mod storage;

pub use error::{ConnectError, MAX_KEY_CHARS, MysqlError};
pub use session_store::keyed::OMP_TABLE as DEFAULT_TABLE;
pub use session_store::keyed::valid_table_name;
pub use storage::{MysqlOptions, MysqlStorage};

#[cfg(doc)]
use session_store::Storage;

// The README's example runs as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
