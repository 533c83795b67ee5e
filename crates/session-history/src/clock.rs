//! The time source of the store: `created_at` and `updated_at` are unix seconds
//! taken from a [`Clock`], so tests can fix time.

use std::time::{Duration, UNIX_EPOCH};

/// Supplies the current time in unix seconds.
///
/// Any `Fn() -> i64 + Send + Sync` closure is a clock, so a test can write
/// `HistoryOptions::default().with_clock(|| 1_700_000_000)`.
pub trait Clock: Send + Sync {
    /// Returns the current time in whole seconds since the unix epoch.
    fn now_unix_seconds(&self) -> i64;
}

impl<F> Clock for F
where
    F: Fn() -> i64 + Send + Sync,
{
    fn now_unix_seconds(&self) -> i64 {
        self()
    }
}

/// The real wall clock; the default of [`HistoryOptions`](crate::HistoryOptions).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_unix_seconds(&self) -> i64 {
        unix_seconds_now()
    }
}

/// Reads the wall clock, truncated to whole seconds like SQLite's
/// `CAST(strftime('%s','now') AS INTEGER)` that omp writes.
fn unix_seconds_now() -> i64 {
    i64::try_from(since_epoch_now().as_secs()).unwrap_or(i64::MAX)
}

/// Returns the wall clock in milliseconds since the epoch (omp's `Date.now()`), for
/// quarantine file names, which need more than seconds to be told apart.
pub(crate) fn unix_millis_now() -> u128 {
    since_epoch_now().as_millis()
}

/// Reads the wall clock. Everything else in this crate takes time from a [`Clock`]
/// or from these two helpers, so this is the only place that touches real time.
#[allow(clippy::disallowed_methods)] // the one clock read of this crate
fn since_epoch_now() -> Duration {
    // A clock set before 1970 reads as the epoch rather than failing.
    std::time::SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_reads_real_time_and_closures_are_clocks() {
        // 2020-09-13: any machine running this is later.
        assert!(SystemClock.now_unix_seconds() > 1_600_000_000);
        assert!(unix_millis_now() > 1_600_000_000_000);
        let fixed = || 42_i64;
        assert_eq!(fixed.now_unix_seconds(), 42);
    }
}
