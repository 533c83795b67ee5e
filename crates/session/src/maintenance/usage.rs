//! Tokens and cost from the usage records of both agents: assistant messages (and tool
//! results that carry usage), pi's `usage` entries, omp's `model_usage` entries, and the
//! usage of compactions and branch summaries; each entry counted once, however many
//! sessions hold it (a fork or an extract repeats its parent's entries).

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use serde_json::Value;
use session_model::Dialect;
use session_store::Storage;

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
}

impl UsageOptions {
    /// Returns options grouping by `by`.
    pub fn by(by: UsageBy) -> UsageOptions {
        UsageOptions { by, since: None }
    }

    /// Returns these options counting entries from the date `since` on.
    #[must_use]
    pub fn since(mut self, since: Option<String>) -> UsageOptions {
        self.since = since;
        self
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
        let n = |k: &str| usage.get(k).and_then(Value::as_f64).filter(|v| v.is_finite()).unwrap_or(0.0);
        self.input += n("input");
        self.output += n("output");
        self.cache_read += n("cacheRead");
        self.cache_write += n("cacheWrite");
        self.cost += usage
            .get("cost")
            .and_then(|c| c.get("total"))
            .and_then(Value::as_f64)
            .filter(|v| v.is_finite())
            .unwrap_or(0.0);
        self.records += 1;
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
}

/// Sums the usage records of `sessions` (each with whose it is), grouped as `options`
/// say. An entry is one record however many files hold it: it is known by its id and
/// timestamp (a fork copies both). Reads only.
pub fn usage(storage: &dyn Storage, sessions: &[(Dialect, PathBuf)], options: &UsageOptions) -> UsageReport {
    let mut report =
        UsageReport { total: UsageRow { key: "total".to_owned(), ..UsageRow::default() }, ..Default::default() };
    let mut groups: BTreeMap<String, UsageRow> = BTreeMap::new();
    let mut seen: HashSet<(String, String)> = HashSet::new();
    for (dialect, path) in sessions {
        let Ok(bytes) = storage.read(path) else {
            report.unreadable += 1;
            continue;
        };
        let parsed = session_model::parse_session_bytes(&bytes, *dialect);
        let cwd = parsed.records.first().and_then(|h| h.get_str("cwd")).unwrap_or_default().to_owned();
        for (i, r) in parsed.records.iter().enumerate().skip(1) {
            let Some((usage, model)) = usage_of(r.try_value()) else { continue };
            let at = r.timestamp().unwrap_or_default().to_owned();
            if options.since.as_deref().is_some_and(|since| at.get(..10).unwrap_or_default() < since) {
                continue;
            }
            let key = match r.id() {
                Some(id) => (id.to_owned(), at.clone()),
                // An entry of an old file without ids: its place is its identity.
                None => (format!("{}#{i}", path.display()), at.clone()),
            };
            if !seen.insert(key) {
                report.repeated += 1;
                continue;
            }
            let group = match options.by {
                UsageBy::Day => at.get(..10).unwrap_or("unknown").to_owned(),
                UsageBy::Month => at.get(..7).unwrap_or("unknown").to_owned(),
                UsageBy::Week => session_model::timestamp::iso_week(&at).unwrap_or_else(|| "unknown".to_owned()),
                UsageBy::Project => cwd.clone(),
                UsageBy::Model => model,
                UsageBy::Session => path.display().to_string(),
            };
            groups.entry(group.clone()).or_insert_with(|| UsageRow { key: group, ..UsageRow::default() }).add(usage);
            report.total.add(usage);
        }
    }
    report.rows = groups.into_values().collect();
    report
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
