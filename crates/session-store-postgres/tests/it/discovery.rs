//! Discovery on PostgreSQL: listing, resuming and continuing through either layout
//! answer as through a memory storage holding the same bytes.

use std::sync::Arc;

use session_discovery::parity::check_parity;
use session_store_postgres::{NativePostgresStorage, PostgresStorage};

use crate::support::{TestDb, TestResult};

#[test]
fn discovery_on_the_omp_table_answers_as_in_memory() -> TestResult {
    let Some(db) = TestDb::create("discovery_on_the_omp_table_answers_as_in_memory")? else { return Ok(()) };
    check_parity(Arc::new(PostgresStorage::connect(&db.conn())?), "/parity".as_ref())
}

#[test]
fn discovery_on_the_native_tables_answers_as_in_memory() -> TestResult {
    let Some(db) = TestDb::create("discovery_on_the_native_tables_answers_as_in_memory")? else { return Ok(()) };
    check_parity(Arc::new(NativePostgresStorage::connect(&db.conn())?), "/parity".as_ref())
}
