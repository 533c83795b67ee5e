//! A database of the test's own on the machine's MySQL or MariaDB.

use mysql::prelude::Queryable;

use crate::BoxError;
use crate::servers::{skip, unique_name};

/// The server as the tests reach it: `SESSION_TEST_MYSQL`, else root on 127.0.0.1:3306.
pub fn server_url() -> String {
    std::env::var("SESSION_TEST_MYSQL").unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".to_owned())
}

/// A fresh database, dropped on drop.
pub struct TestDb {
    name: String,
    admin: mysql::Conn,
}

impl TestDb {
    /// Creates the database, or returns `Ok(None)` after printing why `test` is skipped
    /// (see [`crate::servers`]).
    ///
    /// # Errors
    ///
    /// When the server is absent and required, or the database cannot be created.
    pub fn create(test: &str) -> Result<Option<TestDb>, BoxError> {
        let opts = mysql::Opts::from_url(&format!("{}/", server_url()))?;
        let mut admin = match mysql::Conn::new(opts) {
            Ok(c) => c,
            Err(e) => return skip(test, &format!("MySQL/MariaDB not reachable at {}: {e}", server_url())),
        };
        let name = unique_name("sess");
        admin.query_drop(format!("CREATE DATABASE {name}"))?;
        Ok(Some(TestDb { name, admin }))
    }

    /// Returns the database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Returns the database's URL.
    pub fn url(&self) -> String {
        format!("{}/{}", server_url(), self.name)
    }

    /// Returns a plain connection to the database, for SQL as another program sends it.
    ///
    /// # Errors
    ///
    /// When the connection fails.
    pub fn conn(&self) -> Result<mysql::Conn, mysql::Error> {
        mysql::Conn::new(mysql::Opts::from_url(&self.url()).map_err(mysql::Error::UrlError)?)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Err(e) = self.admin.query_drop(format!("DROP DATABASE IF EXISTS {}", self.name)) {
            eprintln!("cannot drop test database {}: {e}", self.name);
        }
    }
}
