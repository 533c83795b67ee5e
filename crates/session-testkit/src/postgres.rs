//! A database of the test's own on the machine's PostgreSQL.

use postgres::{Client, NoTls};

use crate::BoxError;
use crate::servers::{skip, unique_name};

/// Where the admin connection goes: `SESSION_TEST_POSTGRES`, else the local socket's
/// `postgres` database.
pub fn admin_conn() -> String {
    std::env::var("SESSION_TEST_POSTGRES").unwrap_or_else(|_| "host=/var/run/postgresql dbname=postgres".to_owned())
}

/// A fresh database, dropped (with its connections) on drop.
pub struct TestDb {
    name: String,
    admin: Client,
}

impl TestDb {
    /// Creates the database, or returns `Ok(None)` after printing why `test` is skipped
    /// (see [`crate::servers`]).
    ///
    /// # Errors
    ///
    /// When the server is absent and required, or the database cannot be created.
    pub fn create(test: &str) -> Result<Option<TestDb>, BoxError> {
        let mut admin = match Client::connect(&admin_conn(), NoTls) {
            Ok(c) => c,
            Err(e) => return skip(test, &format!("PostgreSQL not reachable at `{}`: {e}", admin_conn())),
        };
        let name = unique_name("sess_test");
        admin.batch_execute(&format!("CREATE DATABASE {name}"))?;
        Ok(Some(TestDb { name, admin }))
    }

    /// Returns the database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Returns the key-value connection string of the database.
    pub fn conn(&self) -> String {
        let base = admin_conn();
        let kept: Vec<&str> = base.split_whitespace().filter(|kv| !kv.starts_with("dbname=")).collect();
        format!("{} dbname={}", kept.join(" "), self.name)
    }

    /// Returns the database as a `postgres://` URL over the local socket (what `--store`
    /// takes).
    pub fn url(&self) -> String {
        format!("postgres:///{}?host=/var/run/postgresql", self.name)
    }

    /// Returns a plain client on the database, for SQL as another program sends it.
    ///
    /// # Errors
    ///
    /// When the connection fails.
    pub fn client(&self) -> Result<Client, postgres::Error> {
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
