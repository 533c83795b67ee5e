//! Following this machine's sessions and syncing each change as it lands ([`watch`]):
//! a listing with stats of the agents' folders every poll, a sync of the sessions it
//! shows changed, and every pull interval a sync of every session, which brings the
//! remote's changes here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use session_store::{FileStat, StoreError};

use super::{SyncError, SyncLocal, SyncOptions, SyncRemote, SyncReport, dialects, local_sessions, sync};

/// How [`watch`] paces itself.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WatchOptions {
    /// How often the agents' session folders here are listed (with stats) for changes;
    /// a session that changed is synced right after the listing that shows it. Default
    /// 250 ms.
    pub poll: Duration,
    /// How often every session is synced, which brings the remote's changes here.
    /// Default 30 s.
    pub pull_interval: Duration,
    /// How many syncs in a row may fail as a whole (a side that cannot be listed, a
    /// state file that cannot be written) before [`watch`] gives up and returns the last
    /// error; 0 never gives up. After each failure the next try waits twice as long as
    /// after the one before, from one poll up to the pull interval: with the defaults
    /// (20) about seven minutes of a remote out of reach.
    pub give_up_after: usize,
}

impl Default for WatchOptions {
    fn default() -> WatchOptions {
        WatchOptions { poll: Duration::from_millis(250), pull_interval: Duration::from_secs(30), give_up_after: 20 }
    }
}

impl WatchOptions {
    setters! { WatchOptions;
        /// Returns these options listing the local sessions every `poll`.
        #[must_use]
        poll(poll: Duration) => poll = poll;

        /// Returns these options syncing every session every `interval`.
        #[must_use]
        pull_interval(interval: Duration) => pull_interval = interval;

        /// Returns these options giving up after `failures` failed syncs in a row (0: never).
        #[must_use]
        give_up_after(failures: usize) => give_up_after = failures;
    }

    /// Returns how long to wait after `failures` failed syncs in a row.
    fn backoff(&self, failures: usize) -> Duration {
        let doubled = self.poll.saturating_mul(1 << failures.saturating_sub(1).min(16));
        doubled.min(self.pull_interval.max(self.poll))
    }
}

/// What [`watch`] tells its caller as it goes.
#[derive(Debug)]
#[non_exhaustive]
pub enum WatchEvent<'a> {
    /// A sync ran: of every session (the first, and one each pull interval), or of the
    /// sessions that changed here.
    Synced {
        /// What it did.
        report: &'a SyncReport,
        /// Whether it was of every session.
        full: bool,
    },
    /// A sync failed as a whole (one session's failure is its outcome in a report): it
    /// is tried again after `retry_in`, the sessions that changed here still pending.
    Failed {
        /// Why.
        error: &'a SyncError,
        /// Whether it was of every session.
        full: bool,
        /// Syncs failed in a row, this one included.
        in_a_row: usize,
        /// How long until the next try.
        retry_in: Duration,
    },
}

/// Syncs every session of `local` with `remote` (as [`sync`] does), then follows this
/// machine's sessions until `stop` returns true, telling `on_event` of each sync.
///
/// Every [`WatchOptions::poll`] the agents' session folders here are listed with their
/// stats; a session file that appeared or whose size or modification time changed since
/// the listing before is synced at once, alone ([`SyncOptions::only`]: its remote copy
/// is stated, not the remote's folders listed), so that a line an agent appends reaches
/// the remote within a poll and a sync. Every [`WatchOptions::pull_interval`] every
/// session is synced, which brings down what other machines pushed. A session that ends
/// in a conflict or a failure is looked at again when it changes or at the next sync of
/// every session, not at each poll. `options` apply to every sync (a dry run writes
/// nothing, and so reports the same sessions again and again).
///
/// `stop` is asked before each step and after each poll's wait: the step under way (a
/// sync) is finished first.
///
/// # Errors
///
/// The last sync's error when `stop` ends the watch after a failed sync, or the error of
/// the [`WatchOptions::give_up_after`]th failed sync in a row; `Ok` when stopped after a
/// sync that went through.
pub fn watch(
    local: &SyncLocal,
    remote: &SyncRemote,
    options: &SyncOptions,
    pace: &WatchOptions,
    stop: &dyn Fn() -> bool,
    on_event: &mut dyn FnMut(&WatchEvent<'_>),
) -> Result<(), SyncError> {
    let mut follow =
        Follow { local, remote, options, pace, seen: None, pending: BTreeSet::new(), next_full: Instant::now() };
    let mut retry_at = Instant::now();
    let mut failures = 0usize;
    let mut last = Ok(());
    loop {
        if stop() {
            return last;
        }
        if Instant::now() >= retry_at
            && let Some((result, full)) = follow.step()
        {
            match result {
                Ok(report) => {
                    failures = 0;
                    last = Ok(());
                    on_event(&WatchEvent::Synced { report: &report, full });
                }
                Err(error) => {
                    failures += 1;
                    let retry_in = pace.backoff(failures);
                    retry_at = Instant::now() + retry_in;
                    on_event(&WatchEvent::Failed { error: &error, full, in_a_row: failures, retry_in });
                    if pace.give_up_after > 0 && failures >= pace.give_up_after {
                        return Err(error);
                    }
                    last = Err(error);
                }
            }
        }
        if stop() {
            return last;
        }
        std::thread::sleep(pace.poll);
    }
}

/// Where a [`watch`] is.
struct Follow<'a> {
    local: &'a SyncLocal,
    remote: &'a SyncRemote,
    options: &'a SyncOptions,
    pace: &'a WatchOptions,
    /// The stats of the last listing here (none before the first).
    seen: Option<BTreeMap<PathBuf, FileStat>>,
    /// Sessions that changed here since the last sync that went through.
    pending: BTreeSet<PathBuf>,
    /// When every session is synced next.
    next_full: Instant,
}

impl Follow<'_> {
    /// Lists the sessions here and syncs what is due: every session, or those that
    /// changed; `None` when nothing is. Returns the sync's result and whether it was of
    /// every session.
    fn step(&mut self) -> Option<(Result<SyncReport, SyncError>, bool)> {
        // The listing comes before the sync: a change during the sync is one the next
        // listing shows.
        let now = match listing(self.local) {
            Ok(now) => now,
            Err(e) => return Some((Err(e.into()), false)),
        };
        if let Some(before) = &self.seen {
            let changed = now.iter().filter(|(path, stat)| before.get(*path) != Some(*stat));
            self.pending.extend(changed.map(|(path, _)| path.clone()));
        }
        self.seen = Some(now);
        let at = Instant::now();
        let full = at >= self.next_full;
        if !full && self.pending.is_empty() {
            return None;
        }
        let result = if full {
            sync(self.local, self.remote, self.options, &mut |_| {})
        } else {
            // Within the caller's own `only`, if any.
            let wanted = |p: &&PathBuf| self.options.only.as_ref().is_none_or(|o| o.contains(*p));
            let only = self.options.clone().only(self.pending.iter().filter(wanted).cloned());
            sync(self.local, self.remote, &only, &mut |_| {})
        };
        if result.is_ok() {
            if full {
                self.next_full = at + self.pace.pull_interval;
            }
            self.pending.clear();
        }
        Some((result, full))
    }
}

/// Returns every session file here with its stat.
fn listing(local: &SyncLocal) -> Result<BTreeMap<PathBuf, FileStat>, StoreError> {
    let mut out = BTreeMap::new();
    for home in dialects(local) {
        for (_, side) in local_sessions(local.storage.as_ref(), &home.sessions_root)? {
            if let Some(stat) = side.stat {
                out.insert(side.path, stat);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_wait_longer_up_to_the_pull_interval() {
        let pace = WatchOptions::default();
        let waits: Vec<u128> = [1, 2, 3, 8, 9, 100].iter().map(|&n| pace.backoff(n).as_millis()).collect();
        assert_eq!(waits, [250, 500, 1000, 30_000, 30_000, 30_000]);
    }
}
