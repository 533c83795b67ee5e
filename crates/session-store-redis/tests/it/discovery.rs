//! Discovery on Redis: listing, resuming and continuing answer as through a memory
//! storage holding the same bytes.

use std::sync::Arc;

use session_discovery::parity::check_parity;

use crate::support::{TestPrefix, TestResult, storage};

#[test]
fn discovery_on_redis_answers_as_in_memory() -> TestResult {
    let Some(t) = TestPrefix::create("discovery_on_redis_answers_as_in_memory")? else { return Ok(()) };
    check_parity(Arc::new(storage(&t)?), "/parity".as_ref())
}
