//! What the workspace's tests and benches share, in one place (not published):
//!
//! - [`TempDir`]: a fresh private folder per test, removed on drop;
//! - [`Tree`]: a snapshot of a folder tree, to show that a job changed nothing it may not;
//! - [`servers`]: the rule for tests that need a server (skipped with a line on stderr
//!   when it is absent, a failure under `SESSION_REQUIRE_SERVERS=1`) and fresh names for
//!   the database or key prefix each such test makes;
//! - `postgres`, `mysql` and `redis` (features of the same names): a database or
//!   key prefix of the test's own on the machine's server, removed on drop;
//! - [`crash`]: the number of kills, the temporary-file rule and the killing of one
//!   writer, for the kill campaigns;
//! - [`generate`]: the deterministic generator of realistic pi and omp session files that
//!   `cargo xtask` and the benches use;
//! - [`testdata_files`]: every session file of the workspace's `testdata/`;
//! - [`assert_read_only_and_empty!`], [`assert_read_only_reads_what_was_written!`] and
//!   [`assert_reads_the_older_table!`]: what the SQL storages' tests check of a read-only
//!   storage.

pub mod crash;
pub mod generate;
#[cfg(feature = "mysql")]
pub mod mysql;
#[cfg(feature = "postgres")]
pub mod postgres;
mod read_only;
#[cfg(feature = "redis")]
pub mod redis;
pub mod servers;
mod temp;
mod testdata;
mod tree;

pub use temp::TempDir;
pub use testdata::{testdata, testdata_files};
pub use tree::Tree;

/// The error type of the tests that use the kit: any error, across threads.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
