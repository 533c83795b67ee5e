//! A database per test, dropped at the end even when the test fails, and the skip rule.

use std::io::Write;

use postgres::{Client, NoTls};
use rand::Rng;

pub(crate) type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Where the admin connection goes; `SESSION_TEST_POSTGRES` overrides it.
pub(crate) fn admin_conn() -> String {
    std::env::var("SESSION_TEST_POSTGRES").unwrap_or_else(|_| "host=/var/run/postgresql dbname=postgres".to_owned())
}

/// A fresh database, dropped (with its connections) on drop.
pub(crate) struct TestDb {
    name: String,
    admin: Client,
}

impl TestDb {
    /// Creates the database, or returns `Ok(None)` after printing why the test is skipped
    /// (an error instead when `SESSION_REQUIRE_SERVERS=1`).
    pub(crate) fn create(test: &str) -> Result<Option<TestDb>, Box<dyn std::error::Error + Send + Sync>> {
        let mut admin = match Client::connect(&admin_conn(), NoTls) {
            Ok(c) => c,
            Err(e) => return skip(test, &format!("PostgreSQL not reachable at `{}`: {e}", admin_conn())),
        };
        let name = format!("sess_test_{:016x}", rand::rng().next_u64());
        admin.batch_execute(&format!("CREATE DATABASE {name}"))?;
        Ok(Some(TestDb { name, admin }))
    }

    /// Returns the connection string of the test's database.
    pub(crate) fn conn(&self) -> String {
        let base = admin_conn();
        let kept: Vec<&str> = base.split_whitespace().filter(|kv| !kv.starts_with("dbname=")).collect();
        format!("{} dbname={}", kept.join(" "), self.name)
    }

    /// Returns the database's name.
    #[allow(dead_code, reason = "used by the faults binary only")]
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Returns a plain client on the test's database, for SQL as omp sends it.
    pub(crate) fn client(&self) -> Result<Client, postgres::Error> {
        Client::connect(&self.conn(), NoTls)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Err(e) = self.admin.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name)) {
            eprintln!("cannot drop test database {}: {e}", self.name);
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
