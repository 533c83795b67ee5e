//! The kit's key prefix per test (emptied at the end even when the test fails) and the
//! server rule, with this crate's storage under the prefix.

use session_store_redis::RedisStorage;
pub(crate) use session_testkit::redis::{TestPrefix, url};

pub(crate) type TestResult = Result<(), session_testkit::BoxError>;

/// Returns a storage under the test's prefix.
pub(crate) fn storage(t: &TestPrefix) -> Result<RedisStorage, session_store_redis::ConnectError> {
    RedisStorage::connect_with_prefix(&url(), t.prefix())
}
