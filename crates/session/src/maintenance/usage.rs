//! Tokens and cost from the usage records of both agents: assistant messages (and tool
//! results that carry usage), pi's `usage` entries, omp's `model_usage` entries, and the
//! usage of compactions and branch summaries; each entry counted once, however many
//! sessions hold it (a fork or an extract repeats its parent's entries). A Claude Code
//! transcript or a Codex rollout counts as the pi session its import writes (one
//! record per API response, its usage once).

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use serde_json::Value;
use session_model::{Dialect, Record};
use session_store::{PrivateDir, Storage};

use crate::search::SessionFile;

mod cache;

pub use cache::USAGE_CACHE;

/// What [`usage`] groups by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum UsageBy {
    /// The UTC day of the entry (`2026-12-04`).
    #[default]
    Day,
    /// The ISO week of the entry (`2026-W49`).
    Week,
    /// The UTC month of the entry (`2026-12`).
    Month,
    /// The session's project (its header's `cwd`).
    Project,
    /// `provider/model` of the call.
    Model,
    /// The session file (the first one seen holding the entry).
    Session,
}

impl std::str::FromStr for UsageBy {
    type Err = String;

    /// Parses `day`, `week`, `month`, `project`, `model` or `session`.
    fn from_str(s: &str) -> Result<UsageBy, String> {
        Ok(match s {
            "day" => UsageBy::Day,
            "week" => UsageBy::Week,
            "month" => UsageBy::Month,
            "project" => UsageBy::Project,
            "model" => UsageBy::Model,
            "session" => UsageBy::Session,
            other => return Err(format!("{other:?} is none of day, week, month, project, model, session")),
        })
    }
}

/// What [`usage`] counts.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct UsageOptions {
    /// The grouping.
    pub by: UsageBy,
    /// Only entries at or after this UTC date (`YYYY-MM-DD`).
    pub since: Option<String>,
    /// The private folder of the usage cache ([`USAGE_CACHE`]); `None`: every session
    /// is read.
    pub cache: Option<PrivateDir>,
}

impl UsageOptions {
    /// Returns options grouping by `by`.
    pub fn by(by: UsageBy) -> UsageOptions {
        UsageOptions { by, since: None, cache: None }
    }

    setters! { UsageOptions;
        /// Returns these options keeping the usage cache in `dir`.
        #[must_use]
        cache(dir: Option<PrivateDir>) => cache = dir;

        /// Returns these options counting entries from the date `since` on.
        #[must_use]
        since(since: Option<String>) => since = since;
    }
}

/// Tokens and cost of one group (or of all).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct UsageRow {
    /// The group (a day, week, month, project, model or session path).
    pub key: String,
    /// Input tokens.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Tokens read from the provider's cache.
    pub cache_read: f64,
    /// Tokens written to the provider's cache.
    pub cache_write: f64,
    /// Cost (`usage.cost.total`), in the provider's currency.
    pub cost: f64,
    /// Usage records counted.
    pub records: u64,
}

impl UsageRow {
    pub(crate) fn add(&mut self, usage: &Value) {
        self.add_tokens(&Tokens::of(usage));
    }

    fn add_tokens(&mut self, t: &Tokens) {
        self.input += t.input;
        self.output += t.output;
        self.cache_read += t.cache_read;
        self.cache_write += t.cache_write;
        self.cost += t.cost;
        self.records += 1;
    }
}

/// The numbers of one usage record (a missing or non-finite one is 0).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Tokens {
    input: f64,
    output: f64,
    cache_read: f64,
    cache_write: f64,
    cost: f64,
}

impl Tokens {
    fn of(usage: &Value) -> Tokens {
        let n = |k: &str| usage.get(k).and_then(Value::as_f64).filter(|v| v.is_finite()).unwrap_or(0.0);
        Tokens {
            input: n("input"),
            output: n("output"),
            cache_read: n("cacheRead"),
            cache_write: n("cacheWrite"),
            cost: usage
                .get("cost")
                .and_then(|c| c.get("total"))
                .and_then(Value::as_f64)
                .filter(|v| v.is_finite())
                .unwrap_or(0.0),
        }
    }
}

/// What [`usage`] found.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct UsageReport {
    /// The groups, in key order.
    pub rows: Vec<UsageRow>,
    /// All of them.
    pub total: UsageRow,
    /// Usage records seen again in another session (a fork's copy), not counted again.
    pub repeated: u64,
    /// Sessions that could not be read.
    pub unreadable: u64,
    /// Sessions answered from the usage cache, not read.
    pub cached: u64,
}

/// Sums the usage records of `sessions` (each with whose it is; another agent's as its
/// import reads), grouped as `options` say. An entry is one record however many files
/// hold it: it is known by its id and timestamp (a fork copies both). Reads only the
/// sessions; with
/// [`UsageOptions::cache`], what each file holds is kept in the usage cache
/// ([`USAGE_CACHE`]) and a file whose size, times, inode and device are those noted
/// (and which had settled when read) is not read again.
pub fn usage(storage: &dyn Storage, sessions: &[SessionFile], options: &UsageOptions) -> UsageReport {
    let mut report =
        UsageReport { total: UsageRow { key: "total".to_owned(), ..UsageRow::default() }, ..Default::default() };
    let mut groups: BTreeMap<String, UsageRow> = BTreeMap::new();
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let cached = options.cache.as_ref().map(cache::load).unwrap_or_default();
    let now_ns = session_store::clock::Clock::now_ms(&session_store::clock::SystemClock).saturating_mul(1_000_000);
    let mut keep: Vec<(PathBuf, std::sync::Arc<FileUsage>)> = Vec::new();
    let mut parsed_any = false;
    for session in sessions {
        let path = &session.path;
        let st = storage.stat(path).ok().flatten();
        let hit = match (&st, cached.get(path)) {
            (Some(st), Some(c)) if c.whose() == (session.dialect, session.other) && c.same_stat(st) => Some(c.clone()),
            _ => None,
        };
        let (file, keepable) = match hit {
            Some(f) => {
                report.cached += 1;
                (f, true)
            }
            None => {
                let Some(file) =
                    storage.read(path).ok().and_then(|bytes| FileUsage::parse(&bytes, session, st.as_ref()))
                else {
                    report.unreadable += 1;
                    continue;
                };
                parsed_any = true;
                // Kept only for a file whose identity says it cannot change unseen.
                let settled = st.as_ref().and_then(|s| s.identity).is_some_and(|i| i.settled_at(now_ns));
                (std::sync::Arc::new(file), settled)
            }
        };
        count(&file, path, options, &mut seen, &mut groups, &mut report);
        if keepable {
            keep.push((path.clone(), file));
        }
    }
    // Files of the cache this run did not count (another `--dialect`, another home)
    // stay while they are unchanged; those gone or changed leave it.
    let counted: HashSet<&PathBuf> = sessions.iter().map(|s| &s.path).collect();
    for (path, file) in &cached {
        if !counted.contains(path) && storage.stat(path).ok().flatten().is_some_and(|st| file.same_stat(&st)) {
            keep.push((path.clone(), file.clone()));
        }
    }
    if let Some(dir) = &options.cache
        && (parsed_any || keep.len() != cached.len())
    {
        cache::store(dir, &keep);
    }
    report.rows = groups.into_values().collect();
    report
}

/// Counts the records of `file` (at `path`) not counted yet.
fn count(
    file: &FileUsage,
    path: &std::path::Path,
    options: &UsageOptions,
    seen: &mut HashSet<(String, String)>,
    groups: &mut BTreeMap<String, UsageRow>,
    report: &mut UsageReport,
) {
    for r in &file.records {
        if options.since.as_deref().is_some_and(|since| r.at.get(..10).unwrap_or_default() < since) {
            continue;
        }
        let key = match &r.id {
            Some(id) => (id.clone(), r.at.clone()),
            // An entry of an old file without ids: its place is its identity.
            None => (format!("{}#{}", path.display(), r.index), r.at.clone()),
        };
        if !seen.insert(key) {
            report.repeated += 1;
            continue;
        }
        let group = match options.by {
            UsageBy::Day => r.at.get(..10).unwrap_or("unknown").to_owned(),
            UsageBy::Month => r.at.get(..7).unwrap_or("unknown").to_owned(),
            UsageBy::Week => session_model::timestamp::iso_week(&r.at).unwrap_or_else(|| "unknown".to_owned()),
            UsageBy::Project => file.cwd.clone(),
            UsageBy::Model => r.model.clone(),
            UsageBy::Session => path.display().to_string(),
        };
        groups
            .entry(group.clone())
            .or_insert_with(|| UsageRow { key: group, ..UsageRow::default() })
            .add_tokens(&r.tokens);
        report.total.add_tokens(&r.tokens);
    }
}

/// The usage records of one session file, and the stat it had when read: what the
/// usage cache keeps of it.
#[derive(Clone, Debug, PartialEq)]
struct FileUsage {
    /// Whose rules read it (pi's for another agent's).
    dialect: Dialect,
    /// Whether it is another agent's, read as its import.
    other: bool,
    /// Size, mtime ns, ctime ns, inode, device (zeros where the storage has none).
    stat: [u64; 5],
    /// The header's `cwd`.
    cwd: String,
    records: Vec<UsageRecord>,
}

/// One usage record.
#[derive(Clone, Debug, PartialEq)]
struct UsageRecord {
    /// The entry's id (`None` in an old file without ids: then its place counts).
    id: Option<String>,
    /// Its index among the file's records.
    index: u64,
    /// Its timestamp.
    at: String,
    /// `provider/model`.
    model: String,
    tokens: Tokens,
}

impl FileUsage {
    /// Returns the usage records of `bytes`, the contents of `file`; `None` for another
    /// agent's file that does not import.
    fn parse(bytes: &[u8], file: &SessionFile, st: Option<&session_store::FileStat>) -> Option<FileUsage> {
        let records = if file.other {
            session_import::import(bytes).ok()?.into_records(None)
        } else {
            session_model::parse_session_bytes(bytes, file.dialect).records
        };
        let cwd = records.first().and_then(|h| h.get_str("cwd")).unwrap_or_default().to_owned();
        Some(FileUsage {
            dialect: file.dialect,
            other: file.other,
            stat: st.map(stat_key).unwrap_or_default(),
            cwd,
            records: records.iter().enumerate().skip(1).filter_map(|(i, r)| UsageRecord::of(i, r)).collect(),
        })
    }

    /// Whose rules read it, and whether it is another agent's.
    fn whose(&self) -> (Dialect, bool) {
        (self.dialect, self.other)
    }

    /// Returns whether `st` is the stat noted, with an identity (a storage without
    /// inodes is never trusted).
    fn same_stat(&self, st: &session_store::FileStat) -> bool {
        st.identity.is_some() && stat_key(st) == self.stat
    }
}

impl UsageRecord {
    /// The usage record of `r`, the `index`th record of its file, if it is one.
    fn of(index: usize, r: &Record) -> Option<UsageRecord> {
        let (usage, model) = usage_of(r.try_value())?;
        Some(UsageRecord {
            id: r.id().map(str::to_owned),
            index: index as u64,
            at: r.timestamp().unwrap_or_default().to_owned(),
            model,
            tokens: Tokens::of(usage),
        })
    }
}

fn stat_key(st: &session_store::FileStat) -> [u64; 5] {
    let (ctime, ino, dev) = st.identity.map_or((0, 0, 0), |i| (i.ctime_ns as u64, i.ino, i.dev));
    [st.size, st.mtime_ns() as u64, ctime, ino, dev]
}

/// Returns the usage object of a record and the model it was spent on (`-` when the
/// record does not say).
pub(crate) fn usage_of(v: Option<&Value>) -> Option<(&Value, String)> {
    let v = v?;
    let model = |o: &Value| match (o.get("provider").and_then(Value::as_str), o.get("model").and_then(Value::as_str)) {
        (Some(p), Some(m)) => format!("{p}/{m}"),
        (None, Some(m)) => m.to_owned(),
        _ => "-".to_owned(),
    };
    let usage = match v.get("type").and_then(Value::as_str)? {
        "message" => {
            let msg = v.get("message")?;
            match msg.get("role").and_then(Value::as_str)? {
                "assistant" | "toolResult" => {
                    return msg.get("usage").filter(|u| u.is_object()).map(|u| (u, model(msg)));
                }
                _ => return None,
            }
        }
        "usage" | "model_usage" | "compaction" | "branch_summary" => v.get("usage")?,
        _ => return None,
    };
    usage.is_object().then(|| (usage, model(v)))
}
