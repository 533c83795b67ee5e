//! A key prefix per test, emptied at the end even when the test fails, and the skip rule.

use std::io::Write;

use rand::Rng;
use session_store_redis::RedisStorage;

pub(crate) type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// The server the tests use; `SESSION_TEST_REDIS` overrides it.
pub(crate) fn url() -> String {
    std::env::var("SESSION_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_owned())
}

/// A fresh key prefix; every key under it is deleted on drop.
pub(crate) struct TestPrefix {
    pub(crate) prefix: String,
    conn: redis::Connection,
}

impl TestPrefix {
    /// Returns a prefix and a raw connection, or `Ok(None)` after printing why the test is
    /// skipped (an error instead when `SESSION_REQUIRE_SERVERS=1`).
    pub(crate) fn create(test: &str) -> Result<Option<TestPrefix>, Box<dyn std::error::Error + Send + Sync>> {
        let conn = redis::Client::open(url()).and_then(|c| c.get_connection());
        let mut conn = match conn {
            Ok(c) => c,
            Err(e) => return skip(test, &format!("Redis not reachable at {}: {e}", url())),
        };
        if let Err(e) = redis::cmd("PING").query::<String>(&mut conn) {
            return skip(test, &format!("Redis at {} does not answer PING: {e}", url()));
        }
        let prefix = format!("sess_test_{:016x}:", rand::rng().next_u64());
        Ok(Some(TestPrefix { prefix, conn }))
    }

    /// Returns a storage under the prefix.
    pub(crate) fn storage(&self) -> Result<RedisStorage, session_store_redis::ConnectError> {
        RedisStorage::connect_with_prefix(&url(), &self.prefix)
    }

    /// Returns the raw connection, for commands as omp sends them.
    pub(crate) fn raw(&mut self) -> &mut redis::Connection {
        &mut self.conn
    }

    /// Returns every key under the prefix.
    pub(crate) fn keys(&mut self) -> Result<Vec<String>, redis::RedisError> {
        let mut keys: Vec<String> =
            redis::Commands::scan_match::<_, String>(&mut self.conn, format!("{}*", self.prefix))?
                .collect::<Result<_, _>>()?;
        keys.sort();
        Ok(keys)
    }
}

impl Drop for TestPrefix {
    fn drop(&mut self) {
        match self.keys() {
            Ok(keys) if keys.is_empty() => {}
            Ok(keys) => {
                if let Err(e) = redis::cmd("DEL").arg(&keys).query::<i64>(&mut self.conn) {
                    eprintln!("cannot delete the keys under {}: {e}", self.prefix);
                }
            }
            Err(e) => eprintln!("cannot list the keys under {}: {e}", self.prefix),
        }
    }
}

/// Reports a skipped test; an error when the servers are required.
fn skip<T>(test: &str, reason: &str) -> Result<Option<T>, Box<dyn std::error::Error + Send + Sync>> {
    // Straight to the process's stderr: the harness captures `eprintln!` of passing tests.
    let _ = writeln!(std::io::stderr(), "skipped: {test}: {reason}");
    if std::env::var("SESSION_REQUIRE_SERVERS").is_ok_and(|v| v == "1") {
        return Err(format!("{test}: the server is required (SESSION_REQUIRE_SERVERS=1): {reason}").into());
    }
    Ok(None)
}
