//! What a [`crate::SessionManager`] runs on: storage, clock, blob store, durability.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use session_model::ids::SessionIdGenerator;
use session_store::blob::BlobStore;
use session_store::clock::{Clock, SystemClock};
use session_store::{Durability, FileStorage, MemoryStorage, Storage};

/// The environment of a session: where bytes go and where time comes from.
///
/// [`Env::files`] is the real thing (files, fsync where asked, the system clock);
/// [`Env::memory`] keeps everything in memory (tests, `in_memory` sessions).
#[derive(Clone)]
pub struct Env {
    /// Where session files are read and written.
    pub storage: Arc<dyn Storage>,
    /// Where timestamps come from.
    pub clock: Arc<dyn Clock>,
    /// The blob store for externalised images (omp); `None` keeps images inline and
    /// leaves `blob:` references unresolved.
    pub blobs: Option<BlobStore>,
    /// How hard each append tries to reach the disk.
    pub durability: Durability,
    /// The process working directory, used where a reference uses `process.cwd()`.
    pub process_cwd: PathBuf,
}

impl Env {
    /// Real files, the system clock, no fsync per append (what the references do).
    pub fn files() -> Env {
        Env {
            storage: Arc::new(FileStorage::new()),
            clock: Arc::new(SystemClock),
            blobs: None,
            durability: Durability::None,
            process_cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        }
    }

    /// Everything in memory, with the system clock.
    pub fn memory() -> Env {
        Env { storage: Arc::new(MemoryStorage::new()), ..Env::files() }
    }

    /// Returns this environment with a blob store.
    pub fn with_blobs(mut self, blobs: BlobStore) -> Env {
        self.blobs = Some(blobs);
        self
    }

    /// Returns this environment with another durability setting.
    pub fn with_durability(mut self, durability: Durability) -> Env {
        self.durability = durability;
        self
    }

    /// Returns the current time in epoch milliseconds.
    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Returns the current time as an ISO string.
    pub(crate) fn now_iso(&self) -> String {
        session_model::timestamp::format_iso_millis(self.now_ms())
    }

    /// Returns a fresh UUIDv7 session id (monotonic within the process).
    pub(crate) fn new_session_id(&self) -> String {
        static IDS: Mutex<Option<SessionIdGenerator>> = Mutex::new(None);
        let mut guard = IDS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let generator = guard.get_or_insert_with(SessionIdGenerator::new);
        generator.next(self.now_ms().max(0) as u64, &mut rand::rng())
    }
}
