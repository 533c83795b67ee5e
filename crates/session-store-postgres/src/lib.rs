//! PostgreSQL storage for session files, in the table omp 18.3.4's `SqlSessionStorage` uses,
//! so a session written here loads in omp and the other way round.
//!
//! [`PostgresStorage`] implements [`session_store::Storage`] and passes the storage contract
//! (`session_store::contract::run_contract`; not the byte cases, since `text` refuses NUL
//! bytes and invalid UTF-8). Each session file is one row; its path, as a
//! `/`-separated string, is the key; a directory is a key prefix, and [`Storage::list`]
//! returns the direct children of one; [`Storage::read_dir`] returns them with dot-files
//! and the sub-prefixes that hold keys, as directories, so a listing can walk buckets.
//! Whole reads and head-and-tail reads return the stat with the bytes in one statement
//! ([`Storage::read_into`]). The key helpers are `session_store::keyed`'s, shared with the
//! Redis storage. Connections come from a small pool of synchronous
//! [`postgres`] clients: nothing async is visible here.
//!
//! # Schema
//!
//! Created on connect unless [`PostgresOptions::create_table`] is off, exactly as omp 18.3.4
//! creates it (a name other than `omp_session_files` must match `[A-Za-z_][A-Za-z0-9_]{0,62}`):
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS omp_session_files (path TEXT PRIMARY KEY, content TEXT NOT NULL, mtime_ms BIGINT NOT NULL);
//! ALTER TABLE omp_session_files ADD COLUMN title TEXT;             -- "already exists" ignored
//! ALTER TABLE omp_session_files ADD COLUMN title_source TEXT;      -- "already exists" ignored
//! ALTER TABLE omp_session_files ADD COLUMN title_updated_at TEXT;  -- "already exists" ignored
//! ```
//!
//! and then, ours, a row trigger `omp_session_files_notify` (`AFTER INSERT OR UPDATE OR
//! DELETE`, created only when the table lacks it, so a connect takes no lock on a table
//! that has it) that sends `pg_notify('omp_session_files_changes', '<path>:<size>')`, so
//! that [`Storage::watch`] hears every write of the table, omp's included. omp's
//! statements neither see nor need it; each of their commits now also queues a
//! notification (PostgreSQL serialises `NOTIFY` at commit). PostgreSQL 11 or later
//! (`starts_with`, `EXECUTE FUNCTION`).
//!
//! Opened with [`PostgresOptions::read_only`] (or [`NativePostgresOptions::read_only`]),
//! a storage creates, alters and writes nothing, which is what a command that only reads
//! or a dry run needs: it looks the table up in the catalog, reads a missing table as an
//! empty store and missing title columns as unset, and refuses every write with
//! [`ServerError::ReadOnly`].
//!
//! # Operations
//!
//! * Sizes are byte lengths, `octet_length(content)` (constant time).
//! * [`Storage::append`] is omp's upsert that concatenates:
//!   `INSERT … ON CONFLICT (path) DO UPDATE SET content = t.content || excluded.content, mtime_ms = …`.
//!   PostgreSQL writes a new version of the whole row, so **an append costs O(size of the
//!   session)** in time and WAL (measured on PostgreSQL 15: 0.55 to 1.6 s and about 92 MB of
//!   WAL for 1 KB onto a 69 MB row); the native layout below appends in O(line).
//!   [`Storage::append_expected`] appends only at an expected size, in one
//!   `UPDATE … SET content = content || $2 … WHERE octet_length(content) = $4`.
//! * Whole-file writes map [`ExpectedSize`] onto omp's compare-and-set: `Any` is an upsert
//!   that replaces, `Missing` an insert that does nothing on conflict, `Bytes(n)` an
//!   `UPDATE … WHERE octet_length(content) = n`; a refused write is
//!   [`StoreError::Conflict`] with the size found. Unlike omp, an equal size after a refused
//!   write is not taken as success. Writes fill the title columns from the body's title slot
//!   when it is one omp would write (else they are cleared), as omp's `writeFull` does.
//! * Reads lay the title columns, when set, over the body's 256-byte title slot, as omp's
//!   indexed storage does: omp's `updateSessionTitle` ([`PostgresStorage::update_title`]
//!   here) changes only the columns.
//! * [`Storage::rename`] deletes the destination and re-keys the source in one transaction.
//! * [`Storage::lock`] takes a session-level `pg_advisory_lock` keyed by
//!   `hashtextextended('<table>:<path>', 0)` on a connection of its own, held until the
//!   [`SessionLock`](session_store::SessionLock) is released (or the connection dies).
//!   Locks exclude other holders on any connection; omp takes no lock on SQL storage.
//! * [`Storage::watch`] `LISTEN`s on `<table>_changes` (the first 55 bytes of the table
//!   name, in lower case) on a connection of its own; the trigger's notifications arrive
//!   when the writing transaction commits. A path over 7,000 bytes is notified as `:`
//!   (a payload holds 8,000 bytes), which a watcher reports as a change of unknown size.
//! * [`Storage::ensure_dir`] remembers an empty directory in this storage only (omp's is a
//!   no-op); a directory with files exists for everyone.
//! * Every append and write is one committed statement or transaction: each level of
//!   [`Durability`](session_store::Durability) is as durable as the server's commit.
//!
//! # The native layout
//!
//! [`NativePostgresStorage`] is the same [`Storage`] on two tables of its own, for sessions
//! that grow (omp does not read them):
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS session_meta (path TEXT PRIMARY KEY, size BIGINT NOT NULL, mtime_ms BIGINT NOT NULL,
//!     title TEXT, title_source TEXT, title_updated_at TEXT);
//! CREATE TABLE IF NOT EXISTS session_lines (path TEXT NOT NULL, seq BIGINT NOT NULL, line BYTEA NOT NULL,
//!     PRIMARY KEY (path, seq));
//! ```
//!
//! `seq` is the byte offset where the row's bytes start: the rows of a file tile its bytes
//! from 0 to `size`, in `seq` order, so a byte window is an index range. An append is one
//! statement: it grows `size` in the metadata row (taking its row lock, which orders
//! concurrent appends) and inserts one row at the old size: O(line), whatever the session's
//! size. [`Storage::append_expected`] adds `WHERE size = expected` to the same
//! statement. Whole writes store one row per line in one transaction; stat and listing read
//! only `session_meta`. `bytea` holds any byte, so this layout passes the byte cases of the
//! contract too, and a file is limited only by the table (each row by 1 GiB).
//!
//! # Limits and errors
//!
//! Every error is a [`StoreError`] naming the path. A write that fails with a lost
//! connection may or may not have landed: stat before repeating it, or repeat it with a
//! size check ([`Storage::append_expected`]), which refuses a duplicate. Causes of this crate are
//! [`StoreError::Io`] with a [`ServerError`] inside ([`ServerError::find`]) and an
//! [`std::io::ErrorKind`] that tells them apart:
//!
//! | limit | returned |
//! |---|---|
//! | a row past [`MAX_CONTENT_BYTES`] (1 GiB − 1, PostgreSQL's limit for one value; the server may refuse earlier) | `FileTooLarge`, [`ServerError::TooLarge`] before sending, or the server's error (SQLSTATE 54000, "invalid memory alloc request size") |
//! | content with a NUL byte or invalid UTF-8 (a `text` column refuses them), or a `truncate` that would extend with NUL bytes or cut a character | `InvalidData`, [`ServerError::InvalidContent`]; nothing written |
//! | a path that is not UTF-8, holds NUL or `..`, or is longer than [`MAX_KEY_BYTES`] | `InvalidInput`, [`ServerError::BadPath`] |
//! | disk full (SQLSTATE 53100) | `StorageFull` |
//! | connection lost or server shutting down | `ConnectionAborted`; the next call reconnects |
//!
//! ```no_run
//! use std::path::Path;
//! use session_store::{ExpectedSize, Storage};
//! use session_store_postgres::PostgresStorage;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let storage = PostgresStorage::connect("host=/var/run/postgresql dbname=sessions")?;
//! let path = Path::new("/sessions/--work--/s.jsonl");
//! storage.write_atomic(path, b"{\"type\":\"session\"}\n", ExpectedSize::Missing)?;
//! storage.append(path, b"{\"type\":\"message\"}\n")?;
//! assert_eq!(storage.list(Path::new("/sessions/--work--"))?, ["s.jsonl"]);
//! # Ok(())
//! # }
//! ```

mod base;
mod error;
mod native;
mod pool;
mod storage;
mod watch;

pub use error::{ConnectError, MAX_CONTENT_BYTES, MAX_KEY_BYTES, ServerError};
pub use native::{DEFAULT_STEM, NativePostgresOptions, NativePostgresStorage, valid_stem};
pub use session_store::keyed::valid_table_name;
pub use storage::{DEFAULT_TABLE, PostgresOptions, PostgresStorage};

#[cfg(doc)]
use session_store::{ExpectedSize, Storage, StoreError};

// The README's example runs as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
