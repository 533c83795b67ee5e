//! Counting sessions, bytes, entries, tokens and cost.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::JobError;
use super::usage::{UsageRow, usage_of};
use crate::search::SessionFile;
use crate::{Env, Session};

/// What [`stats`] counted.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Sessions counted.
    pub sessions: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Sessions that did not load (`session check` says why).
    pub unreadable: u64,
    /// The five largest sessions, largest first.
    pub largest: Vec<(PathBuf, u64)>,
    /// Entries by their `type`.
    pub entries_by_type: BTreeMap<String, u64>,
    /// Input tokens of assistant messages.
    pub input_tokens: f64,
    /// Output tokens.
    pub output_tokens: f64,
    /// Tokens read from the provider's cache.
    pub cache_read_tokens: f64,
    /// Cost (`usage.cost.total`), in the provider's currency.
    pub cost: f64,
}

/// Counts the sessions `sessions` (each with whose it is): bytes, entries by type, and
/// tokens and cost summed from every usage record on each session's tree (as
/// [`super::usage`] reads them, but an entry a fork repeats counts in each). Another
/// agent's file counts as the pi session its import writes
/// ([`crate::import::open_foreign`]), and its bytes as the source's. Reads only.
pub fn stats(env: &Env, sessions: &[SessionFile]) -> Result<Stats, JobError> {
    let mut out = Stats::default();
    let mut largest: Vec<(PathBuf, u64)> = Vec::new();
    let mut tokens = UsageRow::default();
    for session in sessions {
        let path = &session.path;
        let size = env.storage.stat(path)?.map_or(0, |s| s.size);
        out.sessions += 1;
        out.bytes += size;
        largest.push((path.clone(), size));
        let opened = if session.other {
            crate::import::open_foreign(path, env).ok().flatten().map(|(m, _)| m)
        } else {
            Session::open(session.dialect, path, env.clone()).ok()
        };
        let Some(m) = opened else {
            out.unreadable += 1;
            continue;
        };
        for r in m.tree().entries() {
            *out.entries_by_type.entry(r.type_str().unwrap_or("?").to_owned()).or_default() += 1;
            if let Some((u, _)) = usage_of(r.try_value()) {
                tokens.add(u);
            }
        }
        m.check_reads()?;
    }
    out.input_tokens = tokens.input;
    out.output_tokens = tokens.output;
    out.cache_read_tokens = tokens.cache_read;
    out.cost = tokens.cost;
    largest.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    largest.truncate(5);
    out.largest = largest;
    Ok(out)
}
