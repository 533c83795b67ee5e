//! Pins and the archive: marks a person puts on a session, kept outside the session
//! file, keyed by the session's id.
//!
//! * **omp's pins** are omp's own list, `<omp agent dir>/session-pins.json` (a
//!   tab-indented JSON array of session ids, written 0600 through a temporary file and a
//!   rename under omp's cross-process lock, [`crate::store::FileLock`]): pinning an omp
//!   session here is pinning it in omp, whose `/resume` then lists it first too, and a
//!   pin made in omp shows here.
//! * **pi's pins and every archive mark** (pi has neither, omp no archive) are ours:
//!   [`MARKS_FILE`] in the state folder `${XDG_STATE_HOME:-~/.local/state}/session-store`
//!   ([`MarkStore::default_state_dir`]), a private folder ([`crate::store::PrivateDir`]),
//!   the file written 0600 and atomically under the same kind of lock.
//!
//! Neither is a cache (deleting the caches leaves them), neither touches a session file
//! (so nothing either agent shows or sends to the model changes, and a session's mtime,
//! leaf and message count stay), and both are keyed by the id in the session's header,
//! which a move or a relocation keeps: the marks follow the session. A session copied to
//! another machine finds its marks there once the file is copied along.
//!
//! Writes are read-modify-writes under the file's lock, so two processes (two of ours,
//! or ours and omp) marking at once keep both marks. A file that is not what it should
//! be is refused with [`JobError::MarksDamaged`] naming it, and never overwritten (a
//! damaged list is not taken for an empty one). Reading never writes, and never creates
//! the state folder.

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use session_discovery::{AgentDirs, OmpHome, PINS_FILE, ProcessEnv, parse_pins};
use session_model::Dialect;
use session_store::{FileLock, FileStorage, PrivateDir, Storage, StoreError};

use super::JobError;
use crate::error::unless_missing;

/// The name of our marks file in the state folder.
pub const MARKS_FILE: &str = "marks.json";

/// How long a mark waits for another writer of the same file (omp: 50 tries 100 ms
/// apart).
const LOCK_WAIT: Duration = Duration::from_secs(5);

/// A mark a person puts on a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mark {
    /// Listed first.
    Pinned,
    /// Left out of listings unless asked for.
    Archived,
}

impl Mark {
    /// Returns the mark's name as the marks file and the command say it.
    pub fn name(self) -> &'static str {
        match self {
            Mark::Pinned => "pinned",
            Mark::Archived => "archived",
        }
    }
}

/// The marks of one session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionMarks {
    /// Pinned (omp: in omp's own list).
    pub pinned: bool,
    /// Archived.
    pub archived: bool,
}

/// Every mark, as read once ([`MarkStore::read`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Marks {
    pinned: HashSet<String>,
    archived: HashSet<String>,
    omp_pinned: HashSet<String>,
    omp_archived: HashSet<String>,
}

impl Marks {
    /// Returns the marks of the `dialect` session `id`.
    pub fn of(&self, dialect: Dialect, id: &str) -> SessionMarks {
        // A pi session and an omp session may share an id (an import into both): each
        // agent's marks are its own.
        let (pinned, archived) = match dialect {
            Dialect::Omp => (&self.omp_pinned, &self.omp_archived),
            Dialect::Pi => (&self.pinned, &self.archived),
        };
        SessionMarks { pinned: pinned.contains(id), archived: archived.contains(id) }
    }
}

/// Where the marks are kept: our state folder and omp's agent directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkStore {
    state_dir: PathBuf,
    omp_agent_dir: PathBuf,
}

/// One list of ids in one file, as read.
struct List {
    /// The ids, each once, in the file's order.
    ids: Vec<String>,
}

impl MarkStore {
    /// Returns the marks kept in `state_dir` (ours) and `omp_agent_dir` (omp's pins).
    pub fn new(state_dir: impl Into<PathBuf>, omp_agent_dir: impl Into<PathBuf>) -> MarkStore {
        MarkStore { state_dir: state_dir.into(), omp_agent_dir: omp_agent_dir.into() }
    }

    /// Returns the marks of the environment `env`: our state folder
    /// ([`MarkStore::default_state_dir`]) and the agent directory of omp's home `home`
    /// (the one omp run in this environment reads its pins from).
    pub fn from_env(env: &ProcessEnv, home: OmpHome) -> MarkStore {
        MarkStore::new(MarkStore::default_state_dir(env), AgentDirs::omp(env, home).agent_dir)
    }

    /// Returns our state folder: `$XDG_STATE_HOME/session-store`, else
    /// `~/.local/state/session-store`.
    pub fn default_state_dir(env: &ProcessEnv) -> PathBuf {
        // The XDG rule: a relative value is ignored (it would put the marks in whatever
        // folder the command runs in).
        let base = env
            .var("XDG_STATE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| env.home.join(".local").join("state"));
        base.join("session-store")
    }

    /// Returns our marks file.
    pub fn marks_file(&self) -> PathBuf {
        self.state_dir.join(MARKS_FILE)
    }

    /// Returns omp's list of pinned sessions.
    pub fn omp_pins_file(&self) -> PathBuf {
        self.omp_agent_dir.join(PINS_FILE)
    }

    /// Reads every mark. Writes nothing and creates nothing: a missing file or state
    /// folder holds no marks.
    ///
    /// # Errors
    ///
    /// [`JobError::MarksDamaged`] naming a file that is not a list of marks;
    /// [`JobError::Store`] when one cannot be read (or the state folder is not private).
    pub fn read(&self) -> Result<Marks, JobError> {
        let [pinned, archived, omp_archived] = self.read_ours()?;
        let omp = self.read_omp()?;
        Ok(Marks {
            pinned: pinned.ids.into_iter().collect(),
            archived: archived.ids.into_iter().collect(),
            omp_archived: omp_archived.ids.into_iter().collect(),
            omp_pinned: omp.ids.into_iter().collect(),
        })
    }

    /// Puts (`on`) or takes off the mark `mark` of the `dialect` session `id`; returns
    /// whether anything changed (nothing is written when the mark already was as asked).
    ///
    /// # Errors
    ///
    /// [`JobError::MarksDamaged`] when the file is damaged (it is left as it is);
    /// [`JobError::MarksBusy`] when another writer holds its lock for five seconds;
    /// [`JobError::Store`] when it cannot be read or written.
    pub fn set(&self, dialect: Dialect, id: &str, mark: Mark, on: bool) -> Result<bool, JobError> {
        if dialect == Dialect::Omp && mark == Mark::Pinned {
            let path = self.omp_pins_file();
            FileStorage::new().ensure_dir(&self.omp_agent_dir)?;
            let _lock = lock(&path)?;
            let mut list = self.read_omp()?;
            if !change(&mut list.ids, id, on) {
                return Ok(false);
            }
            let text = omp_pins_text(&list.ids);
            session_store::atomic::write_atomic_private(&path, &mut |w| w.write_all(text.as_bytes()))?;
            return Ok(true);
        }
        let dir = PrivateDir::open(&self.state_dir)?;
        let path = self.marks_file();
        let _lock = lock(&path)?;
        let [mut pinned, mut archived, mut omp_archived] = self.read_ours()?;
        let ids = match (mark, dialect) {
            (Mark::Pinned, _) => &mut pinned.ids,
            (Mark::Archived, Dialect::Pi) => &mut archived.ids,
            (Mark::Archived, Dialect::Omp) => &mut omp_archived.ids,
        };
        if !change(ids, id, on) {
            return Ok(false);
        }
        let text = marks_text(&pinned.ids, &archived.ids, &omp_archived.ids);
        // Marks are a person's own data, not a cache: synced before and after the rename.
        dir.write_file_durable(MARKS_FILE, &mut |w| w.write_all(text.as_bytes()))?;
        Ok(true)
    }

    /// Pins the `dialect` session `id` ([`MarkStore::set`]).
    ///
    /// # Errors
    ///
    /// As [`MarkStore::set`].
    pub fn pin(&self, dialect: Dialect, id: &str) -> Result<bool, JobError> {
        self.set(dialect, id, Mark::Pinned, true)
    }

    /// Unpins the `dialect` session `id` ([`MarkStore::set`]).
    ///
    /// # Errors
    ///
    /// As [`MarkStore::set`].
    pub fn unpin(&self, dialect: Dialect, id: &str) -> Result<bool, JobError> {
        self.set(dialect, id, Mark::Pinned, false)
    }

    /// Archives the `dialect` session `id` ([`MarkStore::set`]).
    ///
    /// # Errors
    ///
    /// As [`MarkStore::set`].
    pub fn archive(&self, dialect: Dialect, id: &str) -> Result<bool, JobError> {
        self.set(dialect, id, Mark::Archived, true)
    }

    /// Takes the `dialect` session `id` out of the archive ([`MarkStore::set`]).
    ///
    /// # Errors
    ///
    /// As [`MarkStore::set`].
    pub fn unarchive(&self, dialect: Dialect, id: &str) -> Result<bool, JobError> {
        self.set(dialect, id, Mark::Archived, false)
    }

    /// Reads our marks file: pi's pins, pi's archive, omp's archive.
    fn read_ours(&self) -> Result<[List; 3], JobError> {
        let empty = || [List { ids: Vec::new() }, List { ids: Vec::new() }, List { ids: Vec::new() }];
        if !FileStorage::new().exists(&self.state_dir)? {
            return Ok(empty());
        }
        let dir = PrivateDir::open(&self.state_dir)?;
        let Some(mut file) = dir.open_file(MARKS_FILE)? else { return Ok(empty()) };
        let path = self.marks_file();
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|e| StoreError::io_raw(session_store::Op::Read, &path, e))?;
        parse_marks(&bytes).map_err(|why| JobError::MarksDamaged { path, why })
    }

    /// Reads omp's pins.
    fn read_omp(&self) -> Result<List, JobError> {
        let path = self.omp_pins_file();
        let Some(bytes) = unless_missing(FileStorage::new().read(&path))? else { return Ok(List { ids: Vec::new() }) };
        match parse_pins(&bytes) {
            Some(ids) => Ok(List { ids: once_each(ids) }),
            None => Err(JobError::MarksDamaged { path, why: "not a JSON array of session ids".to_owned() }),
        }
    }
}

fn lock(path: &Path) -> Result<FileLock, JobError> {
    // omp names the lock after Node's `path.resolve` of the path (`..`, `.` and `//`
    // taken out as text): the same text here, or omp and we would hold two locks.
    let cwd = std::env::current_dir().unwrap_or_default();
    let resolved = session_discovery::resolve(&cwd.to_string_lossy(), &path.to_string_lossy());
    FileLock::acquire(Path::new(&resolved), LOCK_WAIT).map_err(|e| match e {
        StoreError::Locked { path } => JobError::MarksBusy { path },
        e => JobError::Store(e),
    })
}

/// Adds `id` at the end (`on`) or removes it; returns whether `ids` changed.
fn change(ids: &mut Vec<String>, id: &str, on: bool) -> bool {
    let at = ids.iter().position(|i| i == id);
    match (on, at) {
        (true, None) => ids.push(id.to_owned()),
        (false, Some(i)) => {
            ids.remove(i);
        }
        _ => return false,
    }
    true
}

/// `ids` with each id once, in first-seen order (omp reads the list into a `Set`).
fn once_each(ids: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    ids.into_iter().filter(|i| seen.insert(i.clone())).collect()
}

/// Writes `ids` as omp does: `JSON.stringify(ids, null, "\t")`, no newline at the end.
pub(crate) fn omp_pins_text(ids: &[String]) -> String {
    let mut out = String::from("[");
    list_text(&mut out, ids, "\t");
    out.push(']');
    out
}

/// Writes the elements of a tab-indented JSON array at `indent` (`[]` when empty:
/// nothing between the brackets).
fn list_text(out: &mut String, ids: &[String], indent: &str) {
    for (i, id) in ids.iter().enumerate() {
        out.push_str(if i == 0 { "\n" } else { ",\n" });
        out.push_str(indent);
        session_model::json::write_js_str(out, id);
    }
    if !ids.is_empty() {
        out.push('\n');
        out.push_str(&indent[1..]);
    }
}

/// Writes our marks file (see `docs/format.md`, "pins and archive").
fn marks_text(pinned: &[String], archived: &[String], omp_archived: &[String]) -> String {
    let mut out = String::from("{\n\t\"version\": 1,\n\t\"pinned\": [");
    list_text(&mut out, pinned, "\t\t");
    out.push_str("],\n\t\"archived\": [");
    list_text(&mut out, archived, "\t\t");
    out.push_str("],\n\t\"ompArchived\": [");
    list_text(&mut out, omp_archived, "\t\t");
    out.push_str("]\n}\n");
    out
}

/// Reads our marks file: pi's pins, pi's archive, omp's archive; or why it is not one.
fn parse_marks(bytes: &[u8]) -> Result<[List; 3], String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON ({e})"))?;
    let obj = v.as_object().ok_or("not a JSON object")?;
    match obj.get("version").and_then(Value::as_u64) {
        Some(1) => {}
        Some(n) => return Err(format!("version {n}, which this program does not know; update it")),
        None => return Err("no version".to_owned()),
    }
    let list = |key: &str| -> Result<List, String> {
        let Some(v) = obj.get(key) else { return Ok(List { ids: Vec::new() }) };
        let items = v.as_array().ok_or_else(|| format!("{key:?} is not an array"))?;
        let ids = items
            .iter()
            .map(|i| i.as_str().map(str::to_owned).ok_or_else(|| format!("{key:?} holds something else than ids")))
            .collect::<Result<Vec<String>, String>>()?;
        Ok(List { ids: once_each(ids) })
    };
    Ok([list("pinned")?, list("archived")?, list("ompArchived")?])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn omp_pins_are_written_as_omp_writes_them() {
        // `JSON.stringify(["a","b\"c"], null, "\t")` and `JSON.stringify([], null, "\t")`.
        assert_eq!(omp_pins_text(&["a".to_owned(), "b\"c".to_owned()]), "[\n\t\"a\",\n\t\"b\\\"c\"\n]");
        assert_eq!(omp_pins_text(&[]), "[]");
        assert_eq!(parse_pins(omp_pins_text(&["x".to_owned()]).as_bytes()), Some(vec!["x".to_owned()]));
    }

    #[test]
    fn marks_round_trip_and_damage_is_named() -> Result<(), String> {
        let text = marks_text(&["p1".to_owned()], &["a1".to_owned(), "a2".to_owned()], &["o1".to_owned()]);
        let [p, a, o] = parse_marks(text.as_bytes())?;
        assert_eq!(o.ids, vec!["o1".to_owned()]);
        assert_eq!((p.ids, a.ids), (vec!["p1".to_owned()], vec!["a1".to_owned(), "a2".to_owned()]));
        assert_eq!(
            marks_text(&[], &[], &[]),
            "{\n\t\"version\": 1,\n\t\"pinned\": [],\n\t\"archived\": [],\n\t\"ompArchived\": []\n}\n"
        );
        for bad in ["", "[]", "{\"pinned\":[]}", "{\"version\":2}", "{\"version\":1,\"pinned\":[1]}", "{\"version\":1"]
        {
            assert!(parse_marks(bad.as_bytes()).is_err(), "{bad:?}");
        }
        Ok(())
    }
}
