//! Integration tests of session-store-s3 against a real S3-compatible server (`s3s-fs` in
//! CI, `.ci/run`): the storage contract, the layout, conditional writes, locks and the
//! segment collection.
//!
//! The server is `SESSION_TEST_S3` (`http://127.0.0.1:9100`), with credentials from the
//! AWS environment variables, and the bucket `SESSION_TEST_S3_BUCKET` (`session-test`).
//! Each test works under a key prefix of its own (`sess_test_<random>`) and deletes every
//! object under it at the end. Without `SESSION_TEST_S3` a test
//! prints `skipped: <test>: <reason>` and passes, unless `SESSION_REQUIRE_SERVERS=1`
//! (CI), where it fails.
//!
//! `s3s-fs` keeps each object's metadata in a file named after the base64 of its bucket
//! and key, so a key past about 150 bytes fails there (after the object is written);
//! the tests keep their paths short.
//!
//! `s3s-fs` checks a conditional put and then renames its file without a lock: two
//! conditional puts at the same moment may both succeed there. The tests that make
//! writers race (`layout::a_lost_race_is_a_conflict_and_changes_nothing`) therefore
//! sequence the race (a stale head version against a newer one) instead of relying on
//! timing; the contract's lock case (`locks_exclude`, a waiter taking a released lock)
//! and `locks::an_expired_lock_is_broken` depend on single conditional puts being
//! honoured, which `s3s-fs` does.

mod contract;
mod layout;
mod locks;
mod support;
