//! Integration tests of `session-history`: real `history.db` files in temporary
//! directories, in both directions against omp 18.3.4's schema, plus properties,
//! corruption recovery and concurrency.

mod catalog;
mod concurrency;
mod omp_compat;
mod props;
mod recover;
mod store;

pub(crate) use session_testkit::TempDir;

/// Options with a fixed clock.
pub fn fixed(now: i64) -> session_history::HistoryOptions {
    session_history::HistoryOptions::default().with_clock(move || now)
}

/// The result type of tests that use `?`.
pub type TestResult = Result<(), Box<dyn std::error::Error>>;
