//! Integration tests of session-store-redis against a real server: the storage contract and
//! the keys as omp reads and writes them.
//!
//! Each test works under its own key prefix (`sess_test_<random>:`) and deletes every key
//! under it at the end. Without a reachable server a test prints `skipped: <test>: <reason>`
//! and passes, unless `SESSION_REQUIRE_SERVERS=1` (CI), where it fails.

mod contract;
mod discovery;
mod omp;
mod support;
