//! Where Claude Code and Codex keep their sessions, found as each agent finds them, so
//! that `session import` can take a session by its id.
//!
//! * Claude Code: `$CLAUDE_CONFIG_DIR/projects` (default `~/.claude/projects`), one
//!   folder per project holding `<session uuid>.jsonl`; the subagents' transcripts
//!   (`agent-<id>.jsonl` beside them in older versions, `<session uuid>/subagents/` in
//!   newer ones) are not sessions of their own and are left out.
//! * Codex: `$CODEX_HOME` (default `~/.codex`), `sessions/YYYY/MM/DD/` and the flat
//!   `archived_sessions/`, holding `rollout-<time>-<uuid>.jsonl` or its zstd sibling
//!   `….jsonl.zst` (the plain file wins when both exist, as Codex reads them).
//!
//! [`list_other_sessions`] only lists folders (through [`Storage`]); [`other_session_info`]
//! reads one file, and [`crate::Discovery::list_others`] lists and reads them all.
//! Nothing is ever written into those homes, and a link is not followed.
//!
//! A listing shows another agent's session as pi lists the session an import of it
//! writes (`session_import`): the same rule for its id, name, first message, message
//! count and times, so that both listings sort and print alike.

use std::path::{Path, PathBuf};

use session_store::{EntryKind, FileStat, Storage, StoreError};

use crate::{ProcessEnv, SessionInfo};

/// Another agent whose sessions are read (never written).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OtherAgent {
    /// Claude Code.
    Claude,
    /// Codex CLI.
    Codex,
}

impl OtherAgent {
    /// Returns the agent's name as the command spells it (`claude`, `codex`).
    pub fn name(self) -> &'static str {
        match self {
            OtherAgent::Claude => "claude",
            OtherAgent::Codex => "codex",
        }
    }
}

/// One session file of another agent.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct OtherSession {
    /// Whose it is.
    pub agent: OtherAgent,
    /// Its id: the file's session uuid.
    pub id: String,
    /// The file.
    pub path: PathBuf,
    /// Its stat as listed.
    pub stat: FileStat,
}

/// A session of another agent as a listing shows it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct OtherSessionInfo {
    /// Whose it is.
    pub agent: OtherAgent,
    /// What pi's listing shows for the session its import writes, with the source's
    /// path and modification time.
    pub info: SessionInfo,
}

/// Returns what pi's listing shows of the session an import of the Claude Code
/// transcript or Codex rollout at `path` writes (its path the source's), or `None`
/// when the file cannot be read or holds no session. Reads the file, writes nothing.
pub fn other_session_info(storage: &dyn Storage, path: &Path) -> Option<SessionInfo> {
    let mut bytes = Vec::new();
    let (st, n) = storage.read_into(path, &mut bytes).ok()?;
    let imported = session_import::import(&bytes[..n]).ok()?;
    let mut pi = String::new();
    for r in imported.into_records(None) {
        pi.push_str(&r.line());
        pi.push('\n');
    }
    crate::pi_scan::info_of_bytes(path, st.mtime_ms, pi.as_bytes(), &mut String::new())
}

/// The working directory a Codex rollout's first line (`session_meta`) names, read from
/// the file's first 64 KiB; `None` when that does not tell (a compressed rollout, a
/// first line longer than that, or one of another shape).
pub(crate) fn codex_cwd(storage: &dyn Storage, path: &Path) -> Option<String> {
    let (head, _) = storage.read_slices(path, 64 * 1024, 0).ok()?;
    let line = &head[..memchr::memchr(b'\n', &head)?];
    let v = session_model::json::parse(std::str::from_utf8(line).ok()?)?;
    if v.get("type")?.as_str()? != "session_meta" {
        return None;
    }
    Some(v.get("payload")?.get("cwd")?.as_str()?.to_owned())
}

/// Whether Claude Code's project folder `folder` may be that of `cwd`: the folder's
/// name is the path with what is not an ASCII letter or digit written `-` (a path's
/// `/`, `.`, `_` or space; versions have differed on which), and a name of more than
/// 200 characters is cut and given a hash, so only its start is compared then.
pub fn claude_folder_may_be(folder: &str, cwd: &str) -> bool {
    const CUT: usize = 200;
    let (f, c): (Vec<char>, Vec<char>) = (folder.chars().collect(), cwd.chars().collect());
    let same = |n: usize| f.iter().zip(&c).take(n).all(|(a, b)| a == b || (*a == '-' && !b.is_ascii_alphanumeric()));
    if c.len() > CUT { f.len() > CUT && same(CUT) } else { f.len() == c.len() && same(c.len()) }
}

/// Returns Claude Code's folder of project folders: `$CLAUDE_CONFIG_DIR/projects`, else
/// `~/.claude/projects`.
pub fn claude_projects_dir(env: &ProcessEnv) -> PathBuf {
    let config = env.var("CLAUDE_CONFIG_DIR").filter(|v| !v.is_empty());
    config.map_or_else(|| env.home.join(".claude"), |dir| PathBuf::from(env.resolve(dir))).join("projects")
}

/// Returns Codex's home: `$CODEX_HOME`, else `~/.codex`.
pub fn codex_home(env: &ProcessEnv) -> PathBuf {
    let home = env.var("CODEX_HOME").filter(|v| !v.is_empty());
    home.map_or_else(|| env.home.join(".codex"), |dir| PathBuf::from(env.resolve(dir)))
}

/// Returns every session file of `agent` (both agents when `None`), the most recently
/// modified first. A missing home has none.
///
/// # Errors
///
/// Listing a folder failed (its error names it).
pub fn list_other_sessions(
    storage: &dyn Storage,
    env: &ProcessEnv,
    agent: Option<OtherAgent>,
) -> Result<Vec<OtherSession>, StoreError> {
    let mut out = Vec::new();
    if agent.is_none_or(|a| a == OtherAgent::Claude) {
        let projects = claude_projects_dir(env);
        for project in dirs(storage, &projects)? {
            let dir = projects.join(project);
            for (name, stat) in storage.list_stats(&dir)? {
                let Some(id) = name.strip_suffix(".jsonl").filter(|id| is_uuid(id)) else { continue };
                if stat.is_file {
                    out.push(OtherSession {
                        agent: OtherAgent::Claude,
                        id: id.to_owned(),
                        path: dir.join(&name),
                        stat,
                    });
                }
            }
        }
    }
    if agent.is_none_or(|a| a == OtherAgent::Codex) {
        let home = codex_home(env);
        let mut folders = vec![home.join("archived_sessions")];
        let sessions = home.join("sessions");
        for year in dirs(storage, &sessions)? {
            for month in dirs(storage, &sessions.join(&year))? {
                for day in dirs(storage, &sessions.join(&year).join(&month))? {
                    folders.push(sessions.join(&year).join(&month).join(day));
                }
            }
        }
        for dir in folders {
            let files = storage.list_stats(&dir)?;
            for (name, stat) in &files {
                let plain = name.strip_suffix(".jsonl");
                let packed = name.strip_suffix(".jsonl.zst");
                let Some(stem) = plain.or(packed) else { continue };
                // The plain file wins over its zstd sibling.
                if packed.is_some() && files.iter().any(|(n, _)| n.strip_suffix(".jsonl") == Some(stem)) {
                    continue;
                }
                let Some(id) = rollout_id(stem) else { continue };
                if stat.is_file {
                    let path = dir.join(name);
                    out.push(OtherSession { agent: OtherAgent::Codex, id: id.to_owned(), path, stat: *stat });
                }
            }
        }
    }
    out.sort_by(|a, b| b.stat.mtime_ms.cmp(&a.stat.mtime_ms).then_with(|| a.path.cmp(&b.path)));
    Ok(out)
}

/// Returns the sessions of `agent` (both when `None`) whose id begins with `prefix`
/// (case-insensitive), the most recently modified first.
///
/// # Errors
///
/// As [`list_other_sessions`].
pub fn find_other_sessions(
    storage: &dyn Storage,
    env: &ProcessEnv,
    agent: Option<OtherAgent>,
    prefix: &str,
) -> Result<Vec<OtherSession>, StoreError> {
    let prefix = prefix.to_ascii_lowercase();
    let mut found = list_other_sessions(storage, env, agent)?;
    found.retain(|s| !prefix.is_empty() && s.id.to_ascii_lowercase().starts_with(&prefix));
    Ok(found)
}

/// The names of the real folders (not links) directly in `dir`, sorted.
fn dirs(storage: &dyn Storage, dir: &Path) -> Result<Vec<String>, StoreError> {
    let mut out: Vec<String> =
        storage.read_dir(dir)?.into_iter().filter(|e| e.kind == EntryKind::Dir).map(|e| e.name).collect();
    out.sort();
    Ok(out)
}

/// Whether `s` is a UUID (`8-4-4-4-12` hex digits).
fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// The session uuid of a rollout file's stem (`rollout-2026-01-02T03-04-05-<uuid>`).
fn rollout_id(stem: &str) -> Option<&str> {
    let rest = stem.strip_prefix("rollout-")?;
    let id = rest.get(rest.len().checked_sub(36)?..)?;
    is_uuid(id).then_some(id)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use session_store::MemoryStorage;
    use session_store::clock::ManualClock;

    use super::*;

    const U1: &str = "0195f3a2-7c1e-7d40-9a4b-3c2d1e0f9a8b";
    const U2: &str = "5b2f7a10-1111-4222-8333-944445555666";

    /// Writes a file at the time `at_ms`.
    fn put(s: &MemoryStorage, clock: &ManualClock, path: &str, at_ms: i64) {
        clock.set(at_ms);
        s.write(Path::new(path), b"{}\n").expect("write");
    }

    #[test]
    fn both_homes_are_found_as_their_agents_find_them() {
        let clock = Arc::new(ManualClock::new(0));
        let s = MemoryStorage::with_clock(clock.clone());
        let put = |path: &str, at_ms: i64| put(&s, &clock, path, at_ms);
        put(&format!("/h/.claude/projects/-w-app/{U1}.jsonl"), 3_000);
        put("/h/.claude/projects/-w-app/agent-1a2b3c4d.jsonl", 4_000);
        put(&format!("/h/.claude/projects/-w-app/{U1}/subagents/agent-9.jsonl"), 4_000);
        put("/h/.claude/projects/-w-app/notes.txt", 4_000);
        put(&format!("/h/.codex/sessions/2026/01/02/rollout-2026-01-02T03-04-05-{U2}.jsonl"), 2_000);
        put(&format!("/h/.codex/sessions/2026/01/02/rollout-2026-01-02T03-04-05-{U2}.jsonl.zst"), 5_000);
        put(&format!("/h/.codex/archived_sessions/rollout-2025-12-31T00-00-00-{U1}.jsonl.zst"), 1_000);
        let env = ProcessEnv::new("/h", "/w", "/tmp");
        let found = list_other_sessions(&s, &env, None).expect("listing");
        let got: Vec<(&str, &str, &str)> =
            found.iter().map(|f| (f.agent.name(), f.id.as_str(), f.path.to_str().unwrap_or_default())).collect();
        let claude = format!("/h/.claude/projects/-w-app/{U1}.jsonl");
        let codex = format!("/h/.codex/sessions/2026/01/02/rollout-2026-01-02T03-04-05-{U2}.jsonl");
        let archived = format!("/h/.codex/archived_sessions/rollout-2025-12-31T00-00-00-{U1}.jsonl.zst");
        assert_eq!(
            got,
            [("claude", U1, claude.as_str()), ("codex", U2, codex.as_str()), ("codex", U1, archived.as_str())]
        );
        let only = list_other_sessions(&s, &env, Some(OtherAgent::Codex)).expect("listing");
        assert_eq!(only.len(), 2);
        let by_id = find_other_sessions(&s, &env, None, &U2[..6].to_uppercase()).expect("lookup");
        assert_eq!(by_id.iter().map(|f| f.path.as_path()).collect::<Vec<_>>(), [Path::new(&codex)]);
        assert!(find_other_sessions(&s, &env, None, "").expect("lookup").is_empty());
        // The variables move the homes; a missing home has no sessions.
        let moved = env.clone().with_var("CLAUDE_CONFIG_DIR", "/elsewhere").with_var("CODEX_HOME", "/nowhere");
        assert!(list_other_sessions(&s, &moved, None).expect("listing").is_empty());
        assert_eq!(claude_projects_dir(&moved), Path::new("/elsewhere/projects"));
        assert_eq!(codex_home(&moved), Path::new("/nowhere"));
    }

    /// A fixture of `testdata/import`.
    fn fixture(name: &str) -> Vec<u8> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/import").join(name);
        fs_err::read(path).expect("fixture")
    }

    #[test]
    fn listed_as_pi_lists_their_imports() {
        let clock = Arc::new(ManualClock::new(0));
        let s = Arc::new(MemoryStorage::with_clock(clock.clone()));
        let claude = "7f3c2a10-5b6e-4d8f-9a21-0c4e8b7d6f51";
        let codex = "rollout-2026-03-03T08-00-00-019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b.jsonl";
        let put = |path: String, bytes: &[u8]| {
            s.write(Path::new(&path), bytes).expect("write");
        };
        put(format!("/h/.claude/projects/-home-me-proj/{claude}.jsonl"), &fixture("claude/branched.jsonl"));
        // Another project's folder: not read for /home/me/proj.
        put(format!("/h/.claude/projects/-home-me-other/{U1}.jsonl"), &fixture("claude/compacted.jsonl"));
        put(format!("/h/.codex/sessions/2026/03/03/{codex}"), &fixture(&format!("codex/{codex}")));
        // Another project's rollout: read no further than its first line for /home/me/proj.
        let theirs = String::from_utf8(fixture(&format!("codex/{codex}")))
            .expect("utf-8")
            .replace("/home/me/proj", "/home/me/theirs")
            .replace("019a1b2c-3d4e", "029a1b2c-3d4e");
        put(format!("/h/.codex/sessions/2026/03/04/rollout-2026-03-04T08-00-00-{U1}.jsonl"), theirs.as_bytes());
        // Damaged beyond a session: not listed, and no error.
        put(format!("/h/.codex/sessions/2026/03/03/rollout-2026-03-03T09-00-00-{U2}.jsonl"), b"not json\n");
        let env = ProcessEnv::new("/h", "/w", "/tmp");
        let d = crate::Discovery::new(crate::AgentDirs::pi(&env)).with_storage(s.clone());
        let all = d.list_others(None, None, &mut |_| {}).expect("listing");
        let got: Vec<(&str, &str, &str)> =
            all.iter().map(|o| (o.agent.name(), o.info.id.as_str(), o.info.cwd.as_str())).collect();
        // Newest activity first: the Codex rollouts are of March 3, the transcripts of March 1 and 2.
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(&got[..2].iter().map(|g| g.0).collect::<Vec<_>>(), &["codex", "codex"], "{got:?}");
        assert!(got.contains(&("codex", "019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b", "/home/me/proj")), "{got:?}");
        assert!(got.contains(&("codex", "029a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b", "/home/me/theirs")), "{got:?}");
        let mine = all.iter().find(|o| o.info.id == claude).expect("the transcript");
        // pi's rule read the import: its first message, its count, its path the source's.
        let pi = other_session_info(&*s, &mine.info.path).expect("info");
        assert_eq!(pi.first_message, mine.info.first_message);
        assert_ne!(mine.info.first_message, "(no messages)");
        assert!(mine.info.message_count > 2);
        assert_eq!(mine.info.path, Path::new(&format!("/h/.claude/projects/-home-me-proj/{claude}.jsonl")));
        // By cwd: the other project's folder is not even read.
        let here = d.list_others(None, Some("/home/me/proj"), &mut |_| {}).expect("listing");
        assert_eq!(here.len(), 2);
        let claude_only = d.list_others(Some(OtherAgent::Claude), Some("/home/me/proj"), &mut |_| {}).expect("listing");
        assert_eq!(claude_only.iter().map(|o| o.info.id.as_str()).collect::<Vec<_>>(), [claude]);
        let theirs = d.list_others(Some(OtherAgent::Codex), Some("/home/me/theirs"), &mut |_| {}).expect("listing");
        assert_eq!(
            theirs.iter().map(|o| o.info.id.as_str()).collect::<Vec<_>>(),
            ["029a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b"]
        );
        // Nothing was written.
        assert!(!s.exists(Path::new("/h/.pi")).expect("exists"));
    }

    #[test]
    fn claude_folders_are_matched_loosely() {
        assert!(claude_folder_may_be("-home-me-proj", "/home/me/proj"));
        assert!(claude_folder_may_be("-home-me-my-app", "/home/me/my.app"));
        assert!(claude_folder_may_be("-home-me-my_app", "/home/me/my_app"));
        assert!(!claude_folder_may_be("-home-me-proj", "/home/me/prof"));
        assert!(!claude_folder_may_be("-home-me-pro", "/home/me/proj"));
        let long = format!("/{}", "a".repeat(250));
        let cut = format!("-{}-1a2b3c", "a".repeat(199));
        assert!(claude_folder_may_be(&cut, &long));
        assert!(!claude_folder_may_be(&format!("-{}", "b".repeat(250)), &long));
    }

    #[test]
    fn ids_are_uuids() {
        assert!(is_uuid(U1) && !is_uuid(&U1[1..]) && !is_uuid(&U1.replace('-', "x")));
        assert_eq!(rollout_id(&format!("rollout-2026-01-02T03-04-05-{U2}")), Some(U2));
        assert_eq!(rollout_id("rollout-short"), None);
        assert_eq!(rollout_id(&format!("other-{U2}")), None);
    }
}
