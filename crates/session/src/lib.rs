//! The session store for coding agents: open, continue, branch, fork and write the
//! JSONL sessions of pi and omp without losing a byte.
//!
//! [`SessionManager`] puts the layers together: it reads a file through a
//! [`store::Storage`], parses it with [`model`], migrates it with [`migrate`],
//! indexes it as a [`tree::SessionTree`] and writes new entries with the
//! persistence rules of its [`Dialect`]. Each layer is also usable on its own and is
//! re-exported here as a module. [`SessionManager::context`] returns the model
//! context the agent would build, typed: [`Context`] holds
//! [`model::typed::Message`]s and the dialect's [`ContextSettings`].
//!
//! To read a session without any chance of writing it, open a [`Session`]: the same
//! header, tree and context, and no method that writes.
//!
//! Beyond appends, a manager runs omp's session lifecycle: a new session written at
//! once ([`SessionManager::new_session`]), moves to another cwd
//! ([`SessionManager::move_to`]), forks ([`Omp::fork`],
//! [`SessionManager::fork_from_with`]), copies, drops, atomic batches
//! ([`Omp::append_entries_atomically`]). What only one dialect has is on its handle:
//! [`SessionManager::pi`] gives a [`Pi`], [`SessionManager::omp`] an [`Omp`]. omp's
//! appends never fail the caller:
//! a failed write is latched ([`SessionManager::persistence_error`]) and healed by the
//! next full rewrite. [`Env`] says where everything goes, including omp's blob store and
//! terminal breadcrumbs.
//!
//! ## What is where
//!
//! The root holds what an agent or tool reaches for first: [`SessionManager`] (open,
//! create, append, branch, fork) and [`Session`] (read only), [`Env`], the typed
//! messages it writes ([`UserMessage`], [`AssistantMessage`], [`ToolResultMessage`],
//! [`ContentBlock`]) and the [`Context`] it reads, [`Discovery`] and [`SessionInfo`] to
//! list and resume sessions, the storages of files and memory, and the errors
//! ([`SessionError`], [`StoreError`]). Each layer underneath is a module, for those who
//! need more of it: [`model`] (records, the lenient parser, JavaScript-exact JSON, the
//! whole typed model), [`migrate`], [`tree`], [`store`] (the storage trait, atomic
//! writes, blobs, locks), [`discovery`], [`history`], and the server storages behind
//! their features.
//!
//! The jobs beyond one session (rm, gc, fsck, repair, merge, push, pull, …) are
//! [`maintenance`]; [`sync`] keeps every session of a machine in step with a remote copy
//! on any storage.
//!
//! Messages are written from the typed model ([`SessionManager::append_message`]; raw
//! JSON through [`SessionManager::append_message_json`]):
//!
//! ```
//! use session::{AssistantMessage, ContentBlock, Dialect, Env, SessionManager, UserMessage};
//!
//! let mut m = SessionManager::in_memory(Dialect::Pi, "/home/me/project", Env::memory());
//! let user = m.append_message(UserMessage::new("hi", 1.0)).unwrap();
//! m.append_message(AssistantMessage::new(vec![ContentBlock::text("Hello.")], 2.0)).unwrap();
//! m.append_label_change(&user, Some("start")).unwrap();
//! assert_eq!(m.tree().label(&user), Some("start"));
//! assert_eq!(m.context().unwrap().messages.len(), 2);
//! ```

/// Builder methods that each set one field and return the value: an entry
/// `name(param: Type) => field = value;` is `pub fn name(mut self, param: Type) -> $ty`
/// setting `self.field` to `value`; `setters! { impl Type; … }` makes the impl block too.
macro_rules! setters {
    (impl $ty:ty; $($entries:tt)*) => {
        impl $ty {
            setters! { $ty; $($entries)* }
        }
    };
    ($ty:ty; $($(#[$attr:meta])* $name:ident($param:ident: $t:ty) => $field:ident = $value:expr;)*) => {
        $(
            $(#[$attr])*
            pub fn $name(mut self, $param: $t) -> $ty {
                self.$field = $value;
                self
            }
        )*
    };
}

mod appends;
mod body;
mod context;
mod dialects;
mod env;
mod error;
mod freshness;
pub mod import;
mod index;
/// The session index's decoder and encoder on bytes, for the fuzz targets of `fuzz/`;
/// not part of the API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub use index::fuzzing;
pub mod maintenance;
mod manager;
#[cfg(feature = "tokio")]
pub mod nonblocking;
pub mod persist;
mod resume;
pub mod search;
mod session;
mod snapshot;
pub mod sync;

pub use appends::CompactionOptions;
pub use context::{Context, ContextSettings, ModelRef, OmpSettings, PiSettings};
pub use dialects::{Omp, Pi};
pub use env::Env;
pub use error::SessionError;
pub use manager::{ForkOptions, IndexUse, LoadReport, NewSessionOptions, OpenMode, SessionManager};
pub use session::Session;
pub use session_discovery as discovery;
pub use session_discovery::{AgentDirs, Discovery, OmpHome, ProcessEnv, SessionInfo};
pub use session_history as history;
pub use session_migrate as migrate;
pub use session_model as model;
pub use session_model::ids::EntryId;
pub use session_model::typed::{AssistantMessage, ContentBlock, Message, ToolResultMessage, UserMessage};
pub use session_model::{Dialect, Parallelism, Record};
pub use session_store as store;
pub use session_store::{Durability, FileStorage, MemoryStorage, Storage, StoreError};
/// Sessions on MySQL or MariaDB with omp's table (feature `mysql`).
#[cfg(feature = "mysql")]
pub use session_store_mysql as store_mysql;
/// Sessions on PostgreSQL (feature `postgres`): omp's table and the one-row-per-line layout.
#[cfg(feature = "postgres")]
pub use session_store_postgres as store_postgres;
/// Sessions on Redis with omp's keys (feature `redis`).
#[cfg(feature = "redis")]
pub use session_store_redis as store_redis;
/// Sessions in a SQLite database file with omp's table (feature `sqlite`).
#[cfg(feature = "sqlite")]
pub use session_store_sqlite as store_sqlite;
pub use session_tree as tree;
pub use session_tree::Leaf;
