//! Where session bytes go: the [`Storage`] trait, its file and memory backends, the append
//! writer, atomic size-checked rewrites and the blob store.
//!
//! This is the only crate of the workspace that writes session files. It knows bytes, not
//! sessions: the session manager above decides *what* to write and *when* (pi's exclusive
//! first flush, per-entry appends, omp's lazy gate and full rewrites); this crate makes each
//! write behave as the references' writes do, and documents what a reader sees after a crash.
//!
//! * [`Storage`] is the interface a session manager codes against (omp's `SessionStorage`):
//!   stat/list/read, `read_slices` for head-and-tail scans, three kinds of whole-file writes
//!   ([`Storage::write`] truncate-and-write like pi's `w`, [`Storage::write_new`] exclusive like
//!   pi's `wx`, [`Storage::write_atomic`] temp-file-and-rename with omp's size check),
//!   open-append-close [`Storage::append`], long-lived [`AppendWriter`]s with a chosen
//!   [`Durability`], and an advisory per-session [`Storage::lock`].
//! * [`FileStorage`] is the real file system. Atomic replaces go through the one audited module
//!   [`atomic`] (temp file, `sync_data`, rename, directory sync); appends and size-checked renames
//!   take omp's two publish locks (`.<name>.lock.os` via `flock`, `.<name>.lock` with
//!   `<pid>:<ms>`), so Rust and omp writers never interleave inside a line.
//! * [`MemoryStorage`] keeps files in a map with mtimes from a [`clock::Clock`], tracks synced
//!   bytes and can simulate a power loss. With the `testing` feature, `FaultStorage` and
//!   `Faults` inject full disks, failing renames and syncs, and short writes for tests, and
//!   count the storage calls of an operation so that a test can kill it at each one
//!   (`Faults::crash_at`). Without the feature they do not exist, and the fault hooks of
//!   the write paths compile to nothing (`Faults` is then an enum without variants).
//! * [`blob`] is the content-addressed store omp's images go to (the facade's persistence
//!   transforms decide what goes there); [`base64`] decodes as leniently as Node does.
//!
//! [`keyed`] holds what backends whose directories are key prefixes share (the server
//! storages of `session-store-postgres` and `session-store-redis`): path keys, listings
//! from keys, omp's title metadata.
//!
//! [`FileLock`] is omp's cross-process lock of a small shared file (its pins, our marks):
//! the same lock omp 18 takes, so read-modify-writes of such a file never lose an update.
//!
//! [`PrivateDir`] ([`private`]) is where derived files live (the listing cache, session
//! indexes, the search catalog, the lock gates): a folder created 0700 and owned by this
//! user, files written 0600 without following links.
//!
//! All three backends pass one shared contract test suite, `contract` (behind the `testing`
//! feature, so server backends in other crates run the same cases).
//!
//! What it does not do: parse session files (`session-model`), decide when to rewrite, retry,
//! migrate, shape entries for disk (the facade's `persist`), or talk to SQL/Redis backends
//! (`session-store-postgres`, `session-store-redis`). It never deletes blobs. Windows' EPERM move-aside
//! fallback of omp is not implemented (renames replace the target directly on Unix).
//!
//! ```
//! use std::path::Path;
//! use session_store::{Durability, ExpectedSize, MemoryStorage, Storage, StoreError};
//!
//! # fn main() -> Result<(), StoreError> {
//! let storage = MemoryStorage::new();
//! let path = Path::new("/sessions/s.jsonl");
//! storage.write_new(path, b"{\"type\":\"session\"}\n")?;
//! let mut writer = storage.open_writer(path, Durability::Flush)?;
//! writer.append(b"{\"type\":\"message\"}\n")?;
//! writer.close()?;
//!
//! // A rewrite succeeds only while the file is as large as we last saw it.
//! let size = storage.stat(path)?.map(|s| s.size).unwrap_or(0);
//! storage.write_atomic(path, b"{\"type\":\"session\"}\n", ExpectedSize::Bytes(size))?;
//! let stale = storage.write_atomic(path, b"", ExpectedSize::Bytes(size));
//! assert!(matches!(stale, Err(StoreError::Conflict { .. })));
//! assert_eq!(storage.list(Path::new("/sessions"))?, ["s.jsonl"]);
//! # Ok(())
//! # }
//! ```

pub mod atomic;
pub mod base64;
pub mod blob;
pub mod clock;
#[cfg(feature = "testing")]
pub mod contract;
mod error;
#[cfg(feature = "testing")]
mod fault;
// Without the `testing` feature a `Faults` cannot exist (an enum without variants), so
// each fault hook of the write paths is a `None` by its type and compiles to nothing.
#[cfg(not(feature = "testing"))]
#[path = "fault_off.rs"]
mod fault;
mod file;
mod file_lock;
pub mod keyed;
mod lock;
mod memory;
pub mod open;
pub mod private;
mod storage;

pub use blob::{BlobHasher, BlobRef, BlobStore};
pub use error::{Op, StoreError};
#[cfg(feature = "testing")]
pub use fault::{Boundary, CrashKind, FaultStorage, Faults};
pub use file::FileStorage;
pub use file_lock::{FileLock, lock_name};
pub use lock::lock_paths;
pub use memory::MemoryStorage;
pub use private::PrivateDir;
pub use storage::{
    AppendWriter, Change, DirEntry, Durability, EntryKind, ExpectedSize, FileIdentity, FileStat, LockWait, Note,
    PollWatch, SessionLock, Sink, Storage, Watch, artifacts_dir, grow, is_backup_of, is_plain_name, slice_windows,
};

// The README's example runs as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
