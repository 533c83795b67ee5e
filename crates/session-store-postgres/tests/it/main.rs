//! Integration tests of session-store-postgres against a real server: the storage contract,
//! omp's schema byte for byte, and reads and writes as omp makes them with plain SQL.
//!
//! Each test makes its own database (`sess_test_<random>`) and drops it at the end. Without a
//! reachable server a test prints `skipped: <test>: <reason>` and passes, unless
//! `SESSION_REQUIRE_SERVERS=1` (CI), where it fails.

mod contract;
mod discovery;
mod native;
mod omp;
mod support;
