//! The rule for tests that need a server.
//!
//! A test that needs PostgreSQL, MySQL, Redis or an S3-compatible server talks to the real
//! one. When it is not reachable the test prints `skipped: <test>: <reason>` to the
//! process's standard error and passes, except under `SESSION_REQUIRE_SERVERS=1` (CI),
//! where it fails: a server test never passes because its server was absent.

use std::io::Write;

use crate::BoxError;

/// The variable that makes an absent server a failure.
pub const REQUIRE_VAR: &str = "SESSION_REQUIRE_SERVERS";

/// Returns whether the servers are required (`SESSION_REQUIRE_SERVERS=1`).
pub fn required() -> bool {
    std::env::var(REQUIRE_VAR).is_ok_and(|v| v == "1")
}

/// Reports that `test` cannot run because of `reason`: `Ok(None)` after a `skipped:` line
/// on stderr, or an error naming both when the servers are required.
///
/// # Errors
///
/// When `SESSION_REQUIRE_SERVERS=1`.
pub fn skip<T>(test: &str, reason: &str) -> Result<Option<T>, BoxError> {
    // Straight to the process's stderr: the harness captures `eprintln!` of passing tests.
    let _ = writeln!(std::io::stderr(), "skipped: {test}: {reason}");
    if required() {
        return Err(format!("{test}: the server is required ({REQUIRE_VAR}=1): {reason}").into());
    }
    Ok(None)
}

/// A fresh name for a database or key prefix of one test: `prefix` and 64 random bits in
/// hex, a valid SQL identifier when `prefix` is one.
pub fn unique_name(prefix: &str) -> String {
    format!("{prefix}_{:016x}", rand::random::<u64>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_fresh_identifiers() {
        let (a, b) = (unique_name("sess_test"), unique_name("sess_test"));
        assert_ne!(a, b);
        assert!(a.starts_with("sess_test_") && a.len() == "sess_test_".len() + 16, "{a}");
        assert!(a.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_'), "{a}");
    }
}
