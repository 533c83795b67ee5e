//! Redis storage for session files, with the keys and script semantics of omp 18.3.4's
//! `RedisSessionStorage`, so a session written here loads in omp and the other way round.
//!
//! [`RedisStorage`] implements [`session_store::Storage`] and passes the whole storage
//! contract (`session_store::contract::run_contract` and `run_byte_contract`: Redis strings
//! hold any bytes). A path, as a `/`-separated string, is the key; a directory is a key
//! prefix, and [`Storage::list`] returns the direct children of one (a `SCAN` over the
//! prefix, as omp's index load); [`Storage::read_dir`] returns them with dot-files and
//! the sub-prefixes that hold keys, as directories, so a listing can walk buckets. Whole
//! reads and head-and-tail reads return the stat with the bytes in one round trip
//! ([`Storage::read_into`]). The key helpers are `session_store::keyed`'s, shared with the
//! PostgreSQL storage. The client is the synchronous [`redis`] crate.
//!
//! # Keys
//!
//! With the prefix `<p>` (default `omp:sessions:`, [`DEFAULT_PREFIX`]):
//!
//! | key | type | holds |
//! |---|---|---|
//! | `<p>file:<path>` | string | the file's bytes |
//! | `<p>meta` | hash | field `<path>` → mtime in ms since the epoch, decimal |
//! | `<p>title` | hash | field `<path>` → JSON `{"title"?,"source"?,"updatedAt"}` |
//! | `<p>lock:<path>` | string | ours only: the holder's token while [`Storage::lock`] is held |
//! | `<p>changes` | channel | ours only: `<path>:<size>` published by each write (`<path>:` for a deletion) |
//!
//! # Operations
//!
//! Each write is one Lua `EVAL`, atomic on the server (`src/scripts.rs`):
//!
//! * whole-file writes are omp's `writeFull`: an optional compare-and-set on `STRLEN` (`-1`
//!   for a missing key; [`ExpectedSize::Missing`] sends `-1`, [`ExpectedSize::Bytes`] the
//!   size), then `SET` the body, `HSET` the mtime and `HSET` the title parsed from the
//!   body's title slot (or `HDEL` it). A refused write is [`StoreError::Conflict`] with the
//!   size found.
//! * [`Storage::append`] is omp's `APPEND` + `HSET` mtime. [`Storage::append_expected`]
//!   checks the expected `STRLEN` first in the same script (omp appends blindly); omp reads
//!   the result the same either way.
//! * [`RedisStorage::update_title`] is omp's title update: two `HSET`s, the body untouched.
//!   Reads lay the title, when set, over the body's 256-byte title slot as omp's indexed
//!   storage does.
//! * [`Storage::rename`] renames the body and moves both hash fields in one script (omp
//!   moves the fields afterwards, not atomically). [`Storage::delete_with_artifacts`] deletes
//!   the body, then the keys under the artifacts prefix, then the backups: three steps.
//! * [`Storage::lock`] sets `<p>lock:<path>` with `NX PX 30000` and a random token; a thread
//!   renews it every 10 s while held, so a holder that dies frees it within 30 s. omp takes no
//!   lock on Redis.
//! * [`Storage::ensure_dir`] remembers an empty directory in this storage only (omp's is a
//!   no-op); a directory with files exists for everyone.
//! * Every write script also `PUBLISH`es on `<p>changes`, and [`Storage::watch`] subscribes
//!   there on a connection and a thread of its own. omp's scripts publish nothing, so a
//!   watch does not hear omp's own writes (keyspace notifications would, but they are a
//!   server-wide setting this crate leaves alone); a reader that must see them polls
//!   [`Storage::stat`] as well.
//!
//! # Persistence
//!
//! An acknowledged write is in the server's memory. What survives a server restart is the
//! server's choice: with `appendonly yes` and `appendfsync always` every acknowledged write
//! survives; with `appendfsync everysec` (Redis's default when AOF is on) up to about a
//! second may be lost; without AOF (the project's machines run `--save "" --appendonly no`)
//! a restart loses everything. Every [`Durability`](session_store::Durability) level is the
//! same here.
//!
//! # Limits and errors
//!
//! Every error is a [`StoreError`] naming the path. A write that fails with a lost
//! connection may or may not have landed: stat before repeating it, or repeat it with a
//! size check ([`Storage::append_expected`]), which refuses a duplicate. Causes of this crate are
//! [`StoreError::Io`] with a [`ServerError`] inside ([`ServerError::find`]) and an
//! [`std::io::ErrorKind`]:
//!
//! | limit | returned |
//! |---|---|
//! | a value past 512 MiB ([`MAX_CONTENT_BYTES`], Redis's default `proto-max-bulk-len`), or an `APPEND` past the server's limit | `FileTooLarge`, [`ServerError::TooLarge`]; nothing written |
//! | `maxmemory` reached (Redis answers `OOM`) | `OutOfMemory`; nothing written (each script refuses before its first write) |
//! | a path that is not UTF-8, holds NUL or `..`, or is longer than [`MAX_KEY_BYTES`] | `InvalidInput`, [`ServerError::BadPath`] |
//! | server not reachable / connection lost | `ConnectionRefused` / `ConnectionAborted`; the next call reconnects |
//!
//! ```no_run
//! use std::path::Path;
//! use session_store::{ExpectedSize, Storage};
//! use session_store_redis::RedisStorage;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let storage = RedisStorage::connect("redis://127.0.0.1:6379/")?;
//! let path = Path::new("/sessions/--work--/s.jsonl");
//! storage.write_atomic(path, b"{\"type\":\"session\"}\n", ExpectedSize::Missing)?;
//! storage.append_expected(path, b"{\"type\":\"message\"}\n", ExpectedSize::Bytes(19))?;
//! assert_eq!(storage.list(Path::new("/sessions/--work--"))?, ["s.jsonl"]);
//! # Ok(())
//! # }
//! ```

mod error;
mod scripts;
mod storage;
mod watch;

pub use error::{ConnectError, MAX_CONTENT_BYTES, MAX_KEY_BYTES, ServerError};
pub use storage::{DEFAULT_PREFIX, RedisStorage};

#[cfg(doc)]
use session_store::{ExpectedSize, Storage, StoreError};

// The README's example runs as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
