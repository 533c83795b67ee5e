//! Retention: choosing the sessions a prune moves to the trash. The choice is a pure
//! function of a listing, so a dry run and the real run choose the same sessions.

use std::path::Path;
use std::time::Duration;

use session_discovery::SessionInfo;
use session_model::Dialect;

use super::Marks;

/// What [`prune_candidates`] keeps out.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct PruneOptions {
    /// Only sessions whose last activity is older than this.
    pub older_than: Duration,
    /// Keep sessions that have a name (pi's `session_info`) or a title (omp's).
    pub keep_named: bool,
    /// Only sessions of this project: a header `cwd` equal to it or below it.
    pub project: Option<String>,
    /// Keep the sessions these marks pin.
    pub keep_pinned: Option<Marks>,
}

impl PruneOptions {
    /// Returns options choosing sessions older than `older_than`.
    pub fn older_than(older_than: Duration) -> PruneOptions {
        PruneOptions { older_than, ..PruneOptions::default() }
    }

    setters! { PruneOptions;
        /// Returns these options keeping (`true`) or not named sessions.
        #[must_use]
        keep_named(keep: bool) => keep_named = keep;

        /// Returns these options keeping the sessions `marks` pin.
        #[must_use]
        keep_pinned(marks: Marks) => keep_pinned = Some(marks);

        /// Returns these options limited to the project `cwd` (and the folders below it).
        #[must_use]
        project(cwd: Option<String>) => project = cwd;
    }
}

/// Returns the sessions of `listed` a prune moves to the trash at `now_ms`: those whose
/// last activity ([`SessionInfo::modified`]) is older than [`PruneOptions::older_than`],
/// minus named ones with [`PruneOptions::keep_named`] and pinned ones with
/// [`PruneOptions::keep_pinned`], within [`PruneOptions::project`].
/// A session without a known time (an invalid date) is never chosen. Oldest first.
pub fn prune_candidates<'a>(
    listed: &'a [(Dialect, SessionInfo)],
    options: &PruneOptions,
    now_ms: i64,
) -> Vec<&'a (Dialect, SessionInfo)> {
    let cutoff = now_ms.saturating_sub(i64::try_from(options.older_than.as_millis()).unwrap_or(i64::MAX));
    let mut out: Vec<&(Dialect, SessionInfo)> = listed
        .iter()
        .filter(|(_, s)| s.modified.is_some_and(|m| m < cutoff))
        .filter(|(_, s)| !(options.keep_named && (s.name.is_some() || s.title.is_some())))
        .filter(|(d, s)| options.keep_pinned.as_ref().is_none_or(|m| !m.of(*d, &s.id).pinned))
        .filter(|(_, s)| options.project.as_deref().is_none_or(|p| Path::new(&s.cwd).starts_with(p)))
        .collect();
    out.sort_by(|a, b| (a.1.modified, &a.1.path).cmp(&(b.1.modified, &b.1.path)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(path: &str, cwd: &str, modified: Option<i64>, name: Option<&str>) -> (Dialect, SessionInfo) {
        let s = SessionInfo {
            path: path.into(),
            id: String::new(),
            id_raw: None,
            has_id: true,
            cwd: cwd.to_owned(),
            name: name.map(str::to_owned),
            title: None,
            parent_session_path: None,
            created: None,
            modified,
            message_count: 0,
            assistant_turns: None,
            size: None,
            first_message: String::new(),
            all_messages_text: session_discovery::MessagesText::from(""),
            status: None,
        };
        (Dialect::Pi, s)
    }

    #[test]
    fn old_unnamed_sessions_of_the_project_are_chosen_oldest_first() {
        let day = 86_400_000;
        let now = 100 * day;
        let listed = vec![
            info("/a", "/p", Some(now - 40 * day), None),
            info("/b", "/p/sub", Some(now - 50 * day), None),
            info("/c", "/p", Some(now - 10 * day), None),
            info("/d", "/p", Some(now - 60 * day), Some("keep me")),
            info("/e", "/q", Some(now - 60 * day), None),
            info("/f", "/p", None, None),
            info("/g", "/pq", Some(now - 60 * day), None),
        ];
        let opts =
            PruneOptions::older_than(Duration::from_secs(30 * 86_400)).keep_named(true).project(Some("/p".into()));
        let chosen: Vec<&str> =
            prune_candidates(&listed, &opts, now).iter().map(|(_, s)| s.path.to_str().unwrap_or_default()).collect();
        assert_eq!(chosen, ["/b", "/a"]);
        let all = PruneOptions::older_than(Duration::from_secs(30 * 86_400));
        assert_eq!(prune_candidates(&listed, &all, now).len(), 5);
    }
}
