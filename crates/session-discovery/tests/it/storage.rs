//! Discovery through a storage other than the file system (`src/io.rs`): the same
//! sessions, kept in a [`MemoryStorage`] at the same paths with the same mtimes,
//! list, resolve and continue exactly as they do on files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use session_discovery::{AgentDirs, Dialect, Discovery, OmpHome, ProcessEnv, ResumeTarget, sessions_to_json};
use session_store::clock::ManualClock;
use session_store::{FileStorage, MemoryStorage, Storage};

use crate::support::{TempDir, assistant, header, lines, user, write};

/// One session file: where it goes (below the root), its text and its mtime.
struct Spec {
    rel: String,
    text: String,
    mtime_ms: u64,
}

fn omp_slot(title: &str) -> String {
    let slot = session_model::TitleSlot {
        title: title.into(),
        source: Some("auto".into()),
        updated_at: "2026-01-01T00:00:00.000Z".into(),
    };
    slot.to_line().expect("a short title fits").trim_end_matches('\n').to_owned()
}

/// Sessions of two projects (`/w/a` and `/w/b`) in each dialect's layout, a stray
/// non-session file, an orphaned omp backup and a session of another cwd.
fn specs(dialect: Dialect) -> Vec<Spec> {
    let (a, b) = match dialect {
        Dialect::Pi => ("agent/sessions/--w-a--", "agent/sessions/--w-b--"),
        Dialect::Omp => ("home/.musepi/agent/sessions/--w-a--", "home/.musepi/agent/sessions/--w-b--"),
    };
    let body = |id: &str, cwd: &str, first: &str, at: u64| {
        let mut ls = Vec::new();
        if dialect == Dialect::Omp {
            ls.push(omp_slot(&format!("title of {id}")));
        }
        ls.push(header(id, "2026-01-01T00:00:00.000Z", cwd));
        ls.push(user(&format!("{id}u"), first, at));
        ls.push(assistant(&format!("{id}a"), "an answer", at + 1, "stop"));
        lines(&ls)
    };
    let spec = |rel: String, text: String, mtime_ms| Spec { rel, text, mtime_ms };
    vec![
        spec(format!("{a}/2026-01-01T00-00-00-000Z_aaa111.jsonl"), body("aaa111", "/w/a", "first in a", 1_000), 5_000),
        spec(format!("{a}/2026-01-02T00-00-00-000Z_aab222.jsonl"), body("aab222", "/w/a", "second in a", 3_000), 4_000),
        spec(
            format!("{a}/2026-01-03T00-00-00-000Z_ccc333.jsonl"),
            body("ccc333", "/elsewhere", "other cwd", 2_000),
            6_000,
        ),
        spec(format!("{a}/notes.txt"), "not a session\n".into(), 7_000),
        spec(
            format!("{a}/2026-01-04T00-00-00-000Z_ddd444.jsonl.123.bak"),
            body("ddd444", "/w/a", "orphan", 500),
            3_000,
        ),
        spec(format!("{b}/2026-01-05T00-00-00-000Z_bbb555.jsonl"), body("bbb555", "/w/b", "only in b", 9_000), 8_000),
    ]
}

fn discovery(dialect: Dialect, root: &Path, storage: Arc<dyn Storage>) -> Discovery {
    let mut env = ProcessEnv::new(root.join("home"), "/w/a", "/nonexistent-tmp");
    if dialect == Dialect::Pi {
        env = env.with_var("PI_CODING_AGENT_DIR", &root.join("agent").to_string_lossy());
    }
    Discovery::new(AgentDirs::for_dialect(dialect, &env, OmpHome::MusePi)).with_storage(storage).read_only()
}

/// The same specs on files below `root` and in memory below `root`.
fn both(dialect: Dialect, root: &Path) -> (Discovery, Discovery) {
    let clock = Arc::new(ManualClock::new(0));
    let memory = MemoryStorage::with_clock(clock.clone());
    for s in specs(dialect) {
        let path = root.join(&s.rel);
        write(&path, &s.text, s.mtime_ms);
        clock.set(s.mtime_ms as i64);
        memory.write(&path, s.text.as_bytes()).expect("memory write");
    }
    (discovery(dialect, root, Arc::new(FileStorage::new())), discovery(dialect, root, Arc::new(memory)))
}

/// One listing call.
type Query<'a> = dyn Fn(&Discovery) -> Vec<session_discovery::SessionInfo> + 'a;

fn listing(d: &Discovery, f: impl Fn(&Discovery) -> Vec<session_discovery::SessionInfo>) -> String {
    sessions_to_json(d.dialect(), &f(d))
}

#[test]
fn memory_storage_lists_as_the_file_system_does() {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let td = TempDir::new("storage-list");
        let root = td.path();
        let (files, memory) = both(dialect, root);
        let a = files.dirs().default_session_dir("/w/a");
        let queries: Vec<(&str, Box<Query<'_>>)> = vec![
            ("list", Box::new(|d: &Discovery| d.list("/w/a", None, &mut |_| {}).expect("list"))),
            ("list dir", Box::new(|d: &Discovery| d.list("/w/a", Some(&a), &mut |_| {}).expect("list dir"))),
            ("list_all", Box::new(|d: &Discovery| d.list_all(None, &mut |_| {}).expect("list_all"))),
            ("list_all dir", Box::new(|d: &Discovery| d.list_all(Some(&a), &mut |_| {}).expect("list_all dir"))),
        ];
        for (name, q) in &queries {
            let on_files = listing(&files, q);
            assert!(on_files.contains("aaa111"), "{dialect:?} {name}: the files list something: {on_files}");
            assert_eq!(listing(&memory, q), on_files, "{dialect:?} {name}");
        }
        for arg in ["aab", "bbb", "zzz"] {
            let resolve = |d: &Discovery| match d.resolve_resumable(arg, "/w/a", None).expect("resolve") {
                ResumeTarget::Session { session, scope } => format!("{} {scope:?}", session.path.display()),
                other => format!("{other:?}"),
            };
            assert_eq!(resolve(&memory), resolve(&files), "{dialect:?} resume {arg}");
        }
        let recent = |d: &Discovery| -> Vec<PathBuf> { d.recent(&a, 3, 10_000).into_iter().map(|r| r.path).collect() };
        assert_eq!(recent(&memory), recent(&files), "{dialect:?} recent");
        assert!(!recent(&files).is_empty(), "{dialect:?}: recent finds sessions");
        assert_eq!(memory.find_most_recent(&a, Some("/w/a")), files.find_most_recent(&a, Some("/w/a")));
        assert_eq!(memory.find_by_id("/w/a", "aab222", None).ok(), files.find_by_id("/w/a", "aab222", None).ok());
    }
}

#[test]
fn omp_orphaned_backups_are_recovered_in_the_storage() {
    let td = TempDir::new("storage-bak");
    let root = td.path();
    let clock = Arc::new(ManualClock::new(0));
    let memory = MemoryStorage::with_clock(clock.clone());
    for s in specs(Dialect::Omp) {
        clock.set(s.mtime_ms as i64);
        memory.write(&root.join(&s.rel), s.text.as_bytes()).expect("memory write");
    }
    let storage: Arc<dyn Storage> = Arc::new(memory.clone());
    let env = ProcessEnv::new(root.join("home"), "/w/a", "/nonexistent-tmp");
    let d = Discovery::new(AgentDirs::for_dialect(Dialect::Omp, &env, OmpHome::MusePi)).with_storage(storage);
    let listed = d.list("/w/a", None, &mut |_| {}).expect("list");
    assert!(listed.iter().any(|s| s.id == "ddd444"), "the orphaned backup was promoted and listed");
    let bucket = d.dirs().default_session_dir("/w/a");
    assert!(memory.exists(&bucket.join("2026-01-04T00-00-00-000Z_ddd444.jsonl")).expect("exists"));
    assert!(!root.join("home").exists(), "nothing was written to the file system");
}

#[test]
fn the_parity_check_passes_on_the_file_system() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let td = TempDir::new("storage-parity");
    session_discovery::parity::check_parity(Arc::new(FileStorage::new()), td.path())
}

#[test]
fn the_parity_check_passes_in_memory() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    session_discovery::parity::check_parity(Arc::new(MemoryStorage::new()), Path::new("/parity"))
}
