//! The kit's database per test (dropped at the end even when the test fails) and the
//! server rule, as the tests of this crate name them.

pub(crate) use session_testkit::postgres::TestDb;

pub(crate) type TestResult = Result<(), session_testkit::BoxError>;
