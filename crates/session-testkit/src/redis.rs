//! A key prefix of the test's own on the machine's Redis.

use crate::BoxError;
use crate::servers::{skip, unique_name};

/// The server the tests use: `SESSION_TEST_REDIS`, else 127.0.0.1:6379.
pub fn url() -> String {
    std::env::var("SESSION_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_owned())
}

/// A fresh key prefix (ending in `:`) with a raw connection; every key under it is
/// deleted on drop.
pub struct TestPrefix {
    prefix: String,
    conn: redis::Connection,
}

impl TestPrefix {
    /// Makes a prefix, or returns `Ok(None)` after printing why `test` is skipped (see
    /// [`crate::servers`]).
    ///
    /// # Errors
    ///
    /// When the server is absent and required.
    pub fn create(test: &str) -> Result<Option<TestPrefix>, BoxError> {
        let conn = redis::Client::open(url()).and_then(|c| c.get_connection());
        let mut conn = match conn {
            Ok(c) => c,
            Err(e) => return skip(test, &format!("Redis not reachable at {}: {e}", url())),
        };
        if let Err(e) = redis::cmd("PING").query::<String>(&mut conn) {
            return skip(test, &format!("Redis at {} does not answer PING: {e}", url()));
        }
        Ok(Some(TestPrefix { prefix: format!("{}:", unique_name("sess_test")), conn }))
    }

    /// Returns the prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Returns the raw connection, for commands as another program sends them.
    pub fn raw(&mut self) -> &mut redis::Connection {
        &mut self.conn
    }

    /// Returns every key under the prefix, sorted.
    ///
    /// # Errors
    ///
    /// When the scan fails.
    pub fn keys(&mut self) -> Result<Vec<String>, redis::RedisError> {
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
