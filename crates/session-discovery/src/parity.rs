//! A check for storage backends (behind the `testing` feature): discovery through a
//! storage answers as it does through a [`MemoryStorage`] holding the same bytes.
//!
//! [`check_parity`] writes the sessions of two projects, in pi's and in omp's layout, into
//! the storage under a root of the caller's, copies each file into a memory storage whose
//! clock shows the mtime the storage reports for it (servers choose their own mtimes),
//! and compares [`Discovery::list`], [`Discovery::list_all`] (which walks bucket
//! directories with [`Storage::read_dir`]), [`Discovery::resolve_resumable`],
//! [`Discovery::recent`], [`Discovery::find_most_recent`] and [`Discovery::find_by_id`].
//! The listings are compared three times: first, again (where the storage keeps notes
//! beside its files, [`Storage::read_notes`], answered from them), and after an append
//! and a same-size rewrite (whose notes must no longer be used).
//! It then checks omp's migration of a legacy bucket name on the storage: a journal and
//! its artifacts directory both reach the current bucket.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use session_model::{Dialect, TitleSlot};
use session_store::clock::ManualClock;
use session_store::{MemoryStorage, Storage};

use crate::{AgentDirs, Discovery, OmpHome, ProcessEnv, ResumeTarget, sessions_to_json};

/// The outcome of [`check_parity`]: `Err` says which answer differed and how.
pub type ParityResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// One listing call of the check.
type ListQuery<'a> = dyn Fn(&Discovery) -> Result<Vec<crate::SessionInfo>, crate::DiscoveryError> + 'a;

/// The sessions of the check: `(path below the root, text)`, in the order they are written.
fn specs(dialect: Dialect) -> Vec<(String, String)> {
    let (a, b) = match dialect {
        Dialect::Pi => ("agent/sessions/--w-a--", "agent/sessions/--w-b--"),
        Dialect::Omp => ("home/.musepi/agent/sessions/--w-a--", "home/.musepi/agent/sessions/--w-b--"),
    };
    let body = |id: &str, cwd: &str, first: &str, at: u64| {
        let mut ls = Vec::new();
        if dialect == Dialect::Omp {
            let slot = TitleSlot {
                title: format!("title of {id}"),
                source: Some("auto".into()),
                updated_at: "2026-01-01T00:00:00.000Z".into(),
            };
            ls.push(slot.to_line().unwrap_or_default().trim_end_matches('\n').to_owned());
        }
        ls.push(format!(
            r#"{{"type":"session","version":3,"id":"{id}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"{cwd}"}}"#
        ));
        ls.push(format!(
            r#"{{"type":"message","id":"{id}u","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"{first}","timestamp":{at}}}}}"#
        ));
        ls.push(format!(
            r#"{{"type":"message","id":"{id}a","parentId":"{id}u","timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"an answer"}}],"stopReason":"stop","timestamp":{}}}}}"#,
            at + 1
        ));
        ls.iter().map(|l| format!("{l}\n")).collect::<String>()
    };
    vec![
        (format!("{a}/2026-01-02T00-00-00-000Z_aab222.jsonl"), body("aab222", "/w/a", "second in a", 3_000)),
        (format!("{a}/2026-01-01T00-00-00-000Z_aaa111.jsonl"), body("aaa111", "/w/a", "first in a", 1_000)),
        (format!("{a}/2026-01-03T00-00-00-000Z_ccc333.jsonl"), body("ccc333", "/elsewhere", "other cwd", 2_000)),
        (format!("{a}/notes.txt"), "not a session\n".into()),
        (format!("{a}/.hidden.jsonl"), body("hid000", "/w/a", "hidden", 100)),
        (format!("{b}/2026-01-05T00-00-00-000Z_bbb555.jsonl"), body("bbb555", "/w/b", "only in b", 9_000)),
    ]
}

fn discovery(dialect: Dialect, root: &Path, storage: Arc<dyn Storage>) -> Discovery {
    let mut env = ProcessEnv::new(root.join("home"), "/w/a", "/nonexistent-tmp");
    if dialect == Dialect::Pi {
        env = env.with_var("PI_CODING_AGENT_DIR", &root.join("agent").to_string_lossy());
    }
    Discovery::new(AgentDirs::for_dialect(dialect, &env, OmpHome::MusePi)).with_storage(storage).read_only()
}

fn same<T: PartialEq + std::fmt::Debug>(what: &str, dialect: Dialect, got: T, want: T) -> ParityResult {
    if got == want {
        return Ok(());
    }
    Err(format!("{dialect:?} {what}: the storage answered {got:?}, the memory storage {want:?}").into())
}

/// Writes the sessions of both dialects below `root` in `storage` and checks that
/// discovery through it answers as through a memory storage with the same bytes and
/// mtimes. `root` must hold nothing else; the caller removes what was written.
pub fn check_parity(storage: Arc<dyn Storage>, root: &Path) -> ParityResult {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let root = root.join(format!("{dialect:?}").to_lowercase());
        let clock = Arc::new(ManualClock::new(0));
        let memory = MemoryStorage::with_clock(clock.clone());
        let mut newest = 0;
        for (rel, text) in specs(dialect) {
            // Distinct milliseconds: the memory storage's mtimes have no finer grain, and
            // ties would order sessions by chance.
            std::thread::sleep(std::time::Duration::from_millis(2));
            let path = root.join(&rel);
            storage.write(&path, text.as_bytes())?;
            let stat = storage.stat(&path)?.ok_or_else(|| format!("{}: written but not there", path.display()))?;
            clock.set(stat.mtime_ms);
            newest = newest.max(stat.mtime_ms);
            memory.write(&path, text.as_bytes())?;
        }
        let server = discovery(dialect, &root, storage.clone());
        let memory = discovery(dialect, &root, Arc::new(memory));
        let a = memory.dirs().default_session_dir("/w/a");
        let lists: [(&str, &ListQuery<'_>); 4] = [
            ("list", &|d: &Discovery| d.list("/w/a", None, &mut |_| {})),
            ("list of a directory", &|d: &Discovery| d.list("/w/a", Some(&a), &mut |_| {})),
            ("list_all", &|d: &Discovery| d.list_all(None, &mut |_| {})),
            ("list_all of a directory", &|d: &Discovery| d.list_all(Some(&a), &mut |_| {})),
        ];
        // Three rounds: the first listing (a storage that keeps notes stores them), the
        // second (answered from the notes), and one after an append to one session and a
        // rewrite of another with bytes of the same size (their notes no longer hold).
        for round in ["", " again", " after writes"] {
            if round == " after writes" {
                let appended = root.join(&specs(dialect)[1].0);
                let line = format!(
                    r#"{{"type":"message","id":"late1","parentId":"aaa111a","timestamp":"2026-01-01T00:00:09.000Z","message":{{"role":"user","content":"a later question","timestamp":{}}}}}"#,
                    9_000
                );
                let rewritten = root.join(&specs(dialect)[0].0);
                let same_size = specs(dialect)[0].1.replace("second in a", "SECOND in a");
                for (path, write) in [(&appended, 0), (&rewritten, 1)] {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    match write {
                        0 => storage.append(path, format!("{line}\n").as_bytes())?,
                        _ => storage.write(path, same_size.as_bytes())?,
                    }
                    let stat =
                        storage.stat(path)?.ok_or_else(|| format!("{}: written but not there", path.display()))?;
                    clock.set(stat.mtime_ms);
                    newest = newest.max(stat.mtime_ms);
                    match write {
                        0 => memory.storage().append(path, format!("{line}\n").as_bytes())?,
                        _ => memory.storage().write(path, same_size.as_bytes())?,
                    }
                }
            }
            for (what, list) in &lists {
                let want = sessions_to_json(dialect, &list(&memory)?);
                if !want.contains("aaa111") || (*what == "list_all" && !want.contains("bbb555")) {
                    return Err(format!("{dialect:?} {what}: the memory storage lists too little: {want}").into());
                }
                if round == " after writes"
                    && (!want.contains("SECOND in a")
                        || !(want.contains("a later question") || dialect == Dialect::Omp))
                {
                    return Err(format!("{dialect:?} {what}: the writes are not listed: {want}").into());
                }
                same(&format!("{what}{round}"), dialect, sessions_to_json(dialect, &list(&server)?), want)?;
            }
        }
        for arg in ["aab", "bbb", "ccc", "zzz"] {
            let resolve = |d: &Discovery| -> Result<String, crate::DiscoveryError> {
                Ok(match d.resolve_resumable(arg, "/w/a", None)? {
                    ResumeTarget::Session { session, scope } => format!("{} {scope:?}", session.path.display()),
                    other => format!("{other:?}"),
                })
            };
            same(&format!("resume {arg}"), dialect, resolve(&server)?, resolve(&memory)?)?;
        }
        let recent =
            |d: &Discovery| -> Vec<PathBuf> { d.recent(&a, 3, newest + 10_000).into_iter().map(|r| r.path).collect() };
        if recent(&memory).is_empty() {
            return Err(format!("{dialect:?}: recent finds nothing in the memory storage").into());
        }
        same("recent", dialect, recent(&server), recent(&memory))?;
        same(
            "find_most_recent",
            dialect,
            server.find_most_recent(&a, Some("/w/a")),
            memory.find_most_recent(&a, Some("/w/a")),
        )?;
        same(
            "find_by_id",
            dialect,
            server.find_by_id("/w/a", "aab222", None).ok().flatten(),
            memory.find_by_id("/w/a", "aab222", None).ok().flatten(),
        )?;
    }
    check_bucket_migration(storage.as_ref(), &root.join("migrate"))
}

/// Checks omp's migration of a legacy bucket name on `storage`: a journal and its
/// artifacts directory (a tree) reach the current bucket, whether that bucket is new
/// (the legacy one moves whole) or already there (its children move one by one).
fn check_bucket_migration(storage: &dyn Storage, root: &Path) -> ParityResult {
    let env = ProcessEnv::new(root.join("home"), "/w/a", "/nonexistent-tmp");
    let dirs = AgentDirs::for_dialect(Dialect::Omp, &env, OmpHome::MusePi);
    // Projects below the home: their current bucket (`-<rest>`) differs from the legacy one.
    let home = root.join("home").to_string_lossy().into_owned();
    for (cwd, existing) in [(format!("{home}/new-bucket"), false), (format!("{home}/old-bucket"), true)] {
        let cwd = cwd.as_str();
        let legacy = dirs.sessions_root.join(crate::legacy_absolute_bucket(cwd));
        let target = dirs.default_session_dir(cwd);
        if legacy == target {
            return Err(format!("{cwd}: the legacy bucket name is the current one").into());
        }
        let journal = "2026-01-01T00-00-00-000Z_mig000.jsonl";
        let artifact = "2026-01-01T00-00-00-000Z_mig000/sub/agent.md";
        storage.write(&legacy.join(journal), b"journal\n")?;
        storage.write(&legacy.join(artifact), b"notes")?;
        if existing {
            storage.write(&target.join("other.jsonl"), b"other\n")?;
        }
        let dir = dirs.ensure_default_session_dir(storage, cwd)?;
        let moved = |rel: &str, want: &[u8]| -> ParityResult {
            match storage.read(&dir.join(rel)) {
                Ok(got) if got == want => Ok(()),
                got => Err(format!("{cwd}: {rel} was not migrated into {}: {got:?}", dir.display()).into()),
            }
        };
        moved(journal, b"journal\n")?;
        moved(artifact, b"notes")?;
        for rel in [journal, artifact] {
            if storage.exists(&legacy.join(rel))? {
                return Err(format!("{cwd}: {rel} is still in the legacy bucket").into());
            }
        }
    }
    Ok(())
}
