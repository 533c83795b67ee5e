//! The jobs of `session::maintenance` against racing writers, failing folders and random
//! homes: no line an agent appended is lost, no referenced blob is deleted, nothing
//! outside the agents' folders changes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use proptest::prelude::*;
use session::discovery::{AgentDirs, OmpHome, ProcessEnv};
use session::maintenance::{
    self, GcOptions, Homes, JobError, MergeLeaf, RewriteOptions, TransferOptions, plan_rm, prove_session,
};
use session::model::Dialect;
use session::store::blob::BlobStore;
use session::store::{FaultStorage, Faults, FileStorage, MemoryStorage, Op, Storage};
use session::{Env, SessionManager};
use session_testkit::Tree;

use session_testkit::TempDir;

use crate::common::{Result, put};

/// How many times each racing job runs (`SESSION_JOB_RACE_TRIALS`; `cargo xtask crash`
/// runs thousands).
fn trials(default: usize) -> usize {
    std::env::var("SESSION_JOB_RACE_TRIALS").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn env_in(dir: &Path, home: &Path) -> Env {
    let process = ProcessEnv::new(home, dir, std::env::temp_dir());
    Env::bare(Arc::new(FileStorage::new()))
        .with_process_cwd(dir)
        .with_agent_dirs(AgentDirs::omp(&process, OmpHome::Omp))
}

/// omp's empty title slot: 256 bytes with its newline.
fn slot() -> String {
    let base = r#"{"type":"title","v":1,"title":"","updatedAt":"2025-01-01T00:00:00.000Z","pad":""}"#;
    let pad = " ".repeat(255 - base.len());
    base.replace(r#""pad":"""#, &format!(r#""pad":"{pad}""#)) + "\n"
}

/// A version 1 file (no ids) of `n` messages, with a title slot for omp.
fn v1(dialect: Dialect, n: usize, garbage: bool) -> String {
    let mut text = if dialect == Dialect::Omp { slot() } else { String::new() };
    text.push_str(r#"{"type":"session","id":"legacy","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/work"}"#);
    text.push('\n');
    for i in 0..n {
        text.push_str(&format!(
            r#"{{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{{"role":"user","content":"old {i}","timestamp":1}}}}"#
        ));
        text.push('\n');
    }
    if garbage {
        text.push_str("not json at all\n");
    }
    text
}

/// Appends lines as pi does (open, append, close) at random moments until told to stop
/// or `limit` lines are written; returns the marks it wrote.
fn pi_appender(path: &Path, stop: &AtomicBool, tag: &str, limit: u32) -> std::io::Result<Vec<String>> {
    let mut marks = Vec::new();
    let mut i = 0u32;
    while !stop.load(Ordering::SeqCst) && i < limit {
        let mark = format!("{tag}-{i}");
        let line = format!(
            r#"{{"type":"custom","customType":"{mark}","id":"{i:08x}","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z"}}"#
        );
        fs_err::OpenOptions::new().append(true).create(true).open(path)?.write_all(format!("{line}\n").as_bytes())?;
        marks.push(mark);
        i += 1;
        std::thread::sleep(std::time::Duration::from_micros(u64::from(rand::random::<u16>() % 8_000)));
    }
    Ok(marks)
}

/// Each rewriting job (repair, migrate, move; both dialects) against a pi-like appender:
/// every line appended before, during or after the rewrite is in the session (or, for a
/// move, in the session or in the file the appender recreated at the old path). Most
/// trials append a few lines (fewer than the job's tries, so the job must finish, and
/// leave a clean version 3 file); every fourth appends without pause until the job
/// returns (the job may then refuse, and still loses nothing).
#[test]
fn rewriting_jobs_keep_every_line_appended_meanwhile() -> Result<()> {
    let tmp = TempDir::new("jobs-race");
    let home = tmp.path().join("home");
    let n = trials(15);
    for dialect in [Dialect::Pi, Dialect::Omp] {
        for job in ["repair", "migrate", "move"] {
            let mut overlapped = 0;
            for trial in 0..n {
                let dir = tmp.path().join(format!("{}-{job}-{trial}", dialect.name()));
                fs_err::create_dir_all(&dir)?;
                let file = dir.join("s.jsonl");
                fs_err::write(&file, v1(dialect, 50, job != "migrate"))?;
                let env = env_in(&dir, &home);
                let stop = AtomicBool::new(false);
                let target = dir.join("moved");
                let relentless = trial % 4 == 3;
                let limit = if relentless { 2_000 } else { 1 + u32::from(rand::random::<u8>()) % 3 };
                let (marks, outcome, during) = std::thread::scope(|scope| -> Result<_> {
                    let appender = scope.spawn(|| pi_appender(&file, &stop, "late", limit));
                    std::thread::sleep(std::time::Duration::from_micros(u64::from(rand::random::<u8>()) * 4));
                    let before = marks_in(&file, &target)?;
                    let options = RewriteOptions::default().dialect(Some(dialect)).no_backup(true);
                    let outcome = match job {
                        "repair" => maintenance::repair(&env, &file, &options).map(|r| r.rewritten),
                        "migrate" => maintenance::migrate(&env, &file, &options).map(|r| r.rewritten),
                        _ => maintenance::relocate(&env, &file, Some(dialect), "/elsewhere", Some(&target))
                            .map(|r| r.moved),
                    };
                    let appended = marks_in(&file, &target)?;
                    stop.store(true, Ordering::SeqCst);
                    let marks = appender.join().map_err(|_| "the appender panicked")??;
                    // Lines landed while the job ran.
                    let during = appended > before;
                    Ok((marks, outcome, during))
                })?;
                overlapped += usize::from(during);
                let name = format!("{} {job} {trial}", dialect.name());
                match outcome {
                    Ok(done) => assert!(done, "{name}: the job did nothing"),
                    Err(JobError::KeptChanging { .. }) if relentless => {}
                    Err(e) => return Err(format!("{name}: {e}").into()),
                }
                let text = texts_at(&file, &target)?;
                for mark in &marks {
                    assert!(text.contains(&format!("\"{mark}\"")), "{name}: {mark} was lost");
                }
                for i in 0..50 {
                    assert!(text.contains(&format!("old {i}\"")), "{name}: old {i} was lost");
                }
                if !relentless {
                    // Finished: the session reads clean at version 3 wherever it is.
                    let at = if job == "move" { target.join("s.jsonl") } else { file.clone() };
                    let bytes = fs_err::read(&at)?;
                    let parsed = session::model::parse_session_bytes(&bytes, dialect);
                    assert!(text.contains(r#""version":3"#), "{name}: not migrated");
                    assert!(parsed.diagnostics.is_empty(), "{name}: {:?}", parsed.diagnostics);
                }
            }
            // Not a test of nothing: lines landed while some of the jobs ran.
            assert!(overlapped > 0, "{} {job}: no trial raced", dialect.name());
        }
    }
    Ok(())
}

/// A pi session of an older version with a garbage line: pi's open migrates it whole,
/// leaving the garbage out, so the bytes a move or a repair backs up are read before that
/// open; the backup holds the file as it was.
#[test]
fn backups_hold_the_bytes_from_before_pis_migration_at_open() -> Result<()> {
    let tmp = TempDir::new("jobs-backup-v1");
    let home = tmp.path().join("home");
    for job in ["move", "repair"] {
        let dir = tmp.path().join(job);
        fs_err::create_dir_all(&dir)?;
        let file = dir.join("s.jsonl");
        let original = v1(Dialect::Pi, 3, true);
        fs_err::write(&file, &original)?;
        let env = env_in(&dir, &home);
        let target = dir.join("moved");
        let (backup, now) = match job {
            "move" => {
                let r = maintenance::relocate(&env, &file, Some(Dialect::Pi), "/elsewhere", Some(&target))?;
                assert!(r.moved && r.dropped == 1, "{r:?}");
                (r.backup, r.to)
            }
            _ => {
                let r = maintenance::repair(&env, &file, &RewriteOptions::default().dialect(Some(Dialect::Pi)))?;
                assert!(r.rewritten && r.findings == 1, "{r:?}");
                (r.backup, r.path)
            }
        };
        let backup = backup.ok_or_else(|| format!("{job}: no backup"))?;
        assert_eq!(fs_err::read_to_string(&backup)?, original, "{job}");
        assert!(!fs_err::read_to_string(&now)?.contains("not json"), "{job}");
    }
    Ok(())
}

/// The text of the session and of the move's target (each where it exists).
fn texts_at(file: &Path, target: &Path) -> std::io::Result<String> {
    let mut text = String::new();
    for f in [file.to_path_buf(), target.join("s.jsonl")] {
        if f.exists() {
            text.push_str(&fs_err::read_to_string(&f)?);
        }
    }
    Ok(text)
}

/// Counts the appender's lines in the session and at the move's target.
fn marks_in(file: &Path, target: &Path) -> std::io::Result<usize> {
    Ok(texts_at(file, target)?.matches("\"late-").count())
}

/// A folder gc cannot list makes it refuse, deleting nothing.
#[test]
fn gc_deletes_nothing_when_a_folder_cannot_be_listed() -> Result<()> {
    let tmp = TempDir::new("jobs-gc-fault");
    let home = tmp.path().join("home");
    put(&home.join(".pi/agent/sessions/--p--/s.jsonl"), v1(Dialect::Pi, 1, false))?;
    let blobs = home.join(".omp/agent/blobs");
    let blob = blobs.join("ab".repeat(32));
    put(&blob, b"x")?;
    let homes = Homes::from_env(&ProcessEnv::new(&home, tmp.path(), std::env::temp_dir()));
    let faults = Faults::new();
    faults.fail_next(Op::List, 1);
    let storage = FaultStorage::new(FileStorage::new(), faults);
    let options = GcOptions::default().grace(std::time::Duration::ZERO).delete(true);
    let got = maintenance::gc(&[&storage], &homes, &BlobStore::open(&blobs), &options, i64::MAX);
    assert!(matches!(got, Err(JobError::Unreadable { .. })), "{got:?}");
    assert!(blob.exists());
    // Without the fault the same run deletes the unused blob.
    let report = maintenance::gc(&[&FileStorage::new()], &homes, &BlobStore::open(&blobs), &options, i64::MAX)?;
    assert_eq!(report.unused.len(), 1);
    assert!(!blob.exists());
    Ok(())
}

/// A compressed session archive (which omp's gc reads) makes gc refuse: the blobs it
/// names are unknown here.
#[test]
fn gc_refuses_a_compressed_archive() -> Result<()> {
    let tmp = TempDir::new("jobs-gc-gz");
    let home = tmp.path().join("home");
    let bucket = home.join(".omp/agent/sessions/-p");
    put(&bucket.join("s.jsonl"), v1(Dialect::Omp, 1, false))?;
    fs_err::write(bucket.join("old.jsonl.gz"), b"\x1f\x8b compressed")?;
    let blobs = home.join(".omp/agent/blobs");
    let blob = blobs.join("cd".repeat(32));
    put(&blob, b"x")?;
    let homes = Homes::from_env(&ProcessEnv::new(&home, tmp.path(), std::env::temp_dir()));
    let options = GcOptions::default().grace(std::time::Duration::ZERO).delete(true);
    let files = FileStorage::new();
    let got = maintenance::gc(&[&files], &homes, &BlobStore::open(&blobs), &options, i64::MAX);
    assert!(matches!(got, Err(JobError::CompressedArchive { .. })), "{got:?}");
    assert!(blob.exists());
    Ok(())
}

/// A storage key with a `.` segment below a session's artifacts is refused by `pull`
/// (it recursed into itself before), and so is a source path with one.
#[test]
fn pull_refuses_dot_segments_in_keys_and_paths() -> Result<()> {
    let server = MemoryStorage::new();
    let file = Path::new("/srv/p/s.jsonl");
    server.write(file, v1(Dialect::Pi, 1, false).as_bytes())?;
    server.write(Path::new("/srv/p/s/./loop.txt"), b"x")?;
    let tmp = TempDir::new("jobs-pull-dots");
    let files = FileStorage::new();
    let options = TransferOptions::default();
    let got = maintenance::pull(&server, file, &files, tmp.path(), &options);
    let keyed_dot = server.read_dir(Path::new("/srv/p/s"))?.iter().any(|e| e.name == ".");
    if keyed_dot {
        assert!(matches!(got, Err(JobError::BadPath { .. })), "{got:?}");
    } else {
        got?;
    }
    let got = maintenance::pull(&server, Path::new("/srv/p/./s.jsonl"), &files, tmp.path(), &options);
    assert!(matches!(got, Err(JobError::BadPath { .. })), "{got:?}");
    let got = maintenance::pull(&server, Path::new("/srv/q/../p/s.jsonl"), &files, tmp.path(), &options);
    assert!(matches!(got, Err(JobError::BadPath { .. })), "{got:?}");
    Ok(())
}

/// Storing a blob that is already there makes it new again, so that gc's grace period
/// protects it until the line naming it is written.
#[test]
fn a_blob_stored_again_is_new_again() -> Result<()> {
    let tmp = TempDir::new("jobs-blob-touch");
    let store = session::store::BlobStore::open(tmp.path());
    let blob = store.put(b"image", None)?;
    let path = store.path(&blob);
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    fs_err::File::options().write(true).open(&path)?.file().set_modified(old)?;
    store.put(b"image", None)?;
    let now = fs_err::metadata(&path)?.modified()?;
    assert!(now > old + std::time::Duration::from_secs(86_400 * 365), "{now:?}");
    Ok(())
}

// ------------------------------------------------------------------ random homes

/// A session of a generated home.
#[derive(Clone, Debug)]
struct Spec {
    dialect: Dialect,
    /// Which bucket (0, 1) or, 2, a bucket that is a link to a folder outside the home.
    bucket: usize,
    /// 0: a plain name; 1: `...jsonl`; 2: `..jsonl`; 3: a dot-file.
    name: usize,
    /// Blobs its lines refer to.
    refs: Vec<usize>,
    /// Blobs its artifacts refer to (a subagent session).
    artifact_refs: Vec<usize>,
    /// A backup referring to these.
    backup_refs: Vec<usize>,
    /// A garbage line (repair drops it).
    garbage: bool,
    /// Version 1 (migrate rewrites it).
    old: bool,
}

#[derive(Clone, Debug)]
enum Job {
    Rm { session: usize, force: bool },
    RmOutside { which: usize },
    Repair { session: usize },
    Migrate { session: usize },
    Move { session: usize, to: usize },
    Gc,
    Fsck { repair: bool },
    Trash { session: usize },
    Restore { which: usize },
    EmptyTrash,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop_oneof![Just(Dialect::Pi), Just(Dialect::Omp)],
        0..3usize,
        prop_oneof![6 => Just(0usize), 1 => Just(1usize), 1 => Just(2usize), 1 => Just(3usize)],
        proptest::collection::vec(0..6usize, 0..3),
        proptest::collection::vec(0..6usize, 0..2),
        proptest::collection::vec(0..6usize, 0..2),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(dialect, bucket, name, refs, artifact_refs, backup_refs, garbage, old)| Spec {
            dialect,
            bucket,
            name,
            refs,
            artifact_refs,
            backup_refs,
            garbage,
            old,
        })
}

fn job() -> impl Strategy<Value = Job> {
    prop_oneof![
        (0..6usize, any::<bool>()).prop_map(|(session, force)| Job::Rm { session, force }),
        (0..3usize).prop_map(|which| Job::RmOutside { which }),
        (0..6usize).prop_map(|session| Job::Repair { session }),
        (0..6usize).prop_map(|session| Job::Migrate { session }),
        (0..6usize, 0..3usize).prop_map(|(session, to)| Job::Move { session, to }),
        Just(Job::Gc),
        any::<bool>().prop_map(|repair| Job::Fsck { repair }),
        (0..6usize).prop_map(|session| Job::Trash { session }),
        (0..3usize).prop_map(|which| Job::Restore { which }),
        Just(Job::EmptyTrash),
    ]
}

fn blob_hex(i: usize) -> String {
    format!("{:02x}", i + 0xa0).repeat(32)
}

/// A session's text, its lines naming `refs`.
fn session_text(s: &Spec, marker: usize) -> String {
    let body: String = s.refs.iter().map(|r| format!(" blob:sha256:{}", blob_hex(*r))).collect();
    let mut text = if s.old {
        v1(s.dialect, 1, false).replace("old 0", &format!("s{marker}{body}"))
    } else {
        let header = format!(
            r#"{{"type":"session","version":3,"id":"01a2{marker:04}-0000-7000-8000-000000000001","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}}"#
        );
        let user = format!(
            r#"{{"type":"message","id":"aaaa{marker:04}","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"s{marker}{body}","timestamp":1}}}}"#
        );
        let slot = if s.dialect == Dialect::Omp { slot() } else { String::new() };
        format!("{slot}{header}\n{user}\n")
    };
    if s.garbage {
        text.push_str("garbage\n");
    }
    text
}

/// Every blob a file below `dir` names (links to folders followed).
fn referenced(dir: &Path, into: &mut std::collections::BTreeSet<String>) -> Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    for e in fs_err::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            referenced(&p, into)?;
        } else if p.is_file() {
            into.extend(session::store::blob::find_refs(&fs_err::read(&p)?).map(|r| r.hash().to_owned()));
        }
    }
    Ok(())
}

/// Builds a home from `specs`: sessions in buckets of both agents (one bucket a link to a
/// folder outside), artifacts with subagent sessions, backups, blobs, and next to the
/// home files that look like sessions and must never change. Returns the session files.
fn build(root: &Path, specs: &[Spec]) -> Result<Vec<PathBuf>> {
    let home = root.join("home");
    let outside = root.join("outside");
    let linked = root.join("linked");
    fs_err::create_dir_all(&linked)?;
    put(&outside.join("export.jsonl"), "{\"a\":1}\n")?;
    put(&outside.join("export/keep.txt"), "keep")?;
    fs_err::write(outside.join("session.jsonl"), session_text(&specs[0], 999))?;
    for i in 0..6 {
        put(&home.join(".omp/agent/blobs").join(blob_hex(i)), format!("blob {i}"))?;
    }
    let mut files = Vec::new();
    for (k, s) in specs.iter().enumerate() {
        let agent = if s.dialect == Dialect::Omp { ".omp/agent" } else { ".pi/agent" };
        let sessions = home.join(agent).join("sessions");
        let bucket = match s.bucket {
            2 => {
                let link = sessions.join("--linked--");
                if !link.exists() {
                    fs_err::create_dir_all(&sessions)?;
                    std::os::unix::fs::symlink(&linked, &link)?;
                }
                link
            }
            b => sessions.join(format!("--b{b}--")),
        };
        fs_err::create_dir_all(&bucket)?;
        let name = match s.name {
            1 if !bucket.join("...jsonl").exists() => "...jsonl".to_owned(),
            2 if !bucket.join("..jsonl").exists() => "..jsonl".to_owned(),
            3 => format!(".hidden{k}.jsonl"),
            _ => format!("2026-01-01T00-00-00-00{k}Z_s{k}.jsonl"),
        };
        let file = bucket.join(&name);
        fs_err::write(&file, session_text(s, k))?;
        if let Some(art) = session::store::artifacts_dir(&file) {
            let child = Spec { refs: s.artifact_refs.clone(), garbage: false, old: false, ..s.clone() };
            put(&art.join("sub/child.jsonl"), session_text(&child, 500 + k))?;
        }
        if !s.backup_refs.is_empty() {
            let mut backup = file.as_os_str().to_owned();
            backup.push(".1700000000000.bak");
            let b = Spec { refs: s.backup_refs.clone(), ..s.clone() };
            fs_err::write(PathBuf::from(backup), session_text(&b, 700 + k))?;
        }
        files.push(file);
    }
    Ok(files)
}

fn run_job(root: &Path, files: &[PathBuf], job: &Job) {
    let home = root.join("home");
    let process = ProcessEnv::new(&home, root, std::env::temp_dir());
    let homes = Homes::from_env(&process);
    let storage = FileStorage::new();
    let env = env_in(root, &home);
    let pick = |i: usize| files[i % files.len()].clone();
    let outcome: std::result::Result<(), JobError> = match job {
        Job::Rm { session, force } => {
            plan_rm(&storage, &homes, &pick(*session), None, *force).and_then(|p| p.execute(&storage)).map(drop)
        }
        Job::RmOutside { which } => {
            let target = ["export.jsonl", "session.jsonl", "export"][*which];
            plan_rm(&storage, &homes, &root.join("outside").join(target), None, false)
                .and_then(|p| p.execute(&storage))
                .map(drop)
        }
        Job::Repair { session } => maintenance::repair(&env, &pick(*session), &RewriteOptions::default()).map(drop),
        Job::Migrate { session } => maintenance::migrate(&env, &pick(*session), &RewriteOptions::default()).map(drop),
        Job::Move { session, to } => {
            let file = pick(*session);
            let dialect = maintenance::detect_dialect(&storage, &file);
            let mut env = env.clone();
            if dialect == Dialect::Pi {
                env = env.with_dirs(Some(AgentDirs::pi(&process)));
            }
            maintenance::relocate(&env, &file, Some(dialect), &format!("/project{to}"), None).map(drop)
        }
        Job::Gc => {
            let options = GcOptions::default().grace(std::time::Duration::ZERO).delete(true);
            maintenance::gc(&[&storage], &homes, &BlobStore::open(home.join(".omp/agent/blobs")), &options, i64::MAX)
                .map(drop)
        }
        Job::Fsck { repair } => {
            let options = maintenance::FsckOptions::default().repair(*repair);
            maintenance::fsck(&env, &homes, &options).map(drop)
        }
        Job::Trash { session } => plan_rm(&storage, &homes, &pick(*session), None, false)
            .and_then(|p| p.trash(&storage, &homes, 1_800_000_000_000))
            .map(drop),
        Job::Restore { which } => maintenance::trash_list(&storage, &homes).and_then(|items| match items.get(*which) {
            Some(item) => maintenance::restore(&storage, &homes, item).map(drop),
            None => Ok(()),
        }),
        Job::EmptyTrash => maintenance::trash_list(&storage, &homes)
            .and_then(|items| maintenance::trash_empty(&storage, &items))
            .map(drop),
    };
    // Refusals are expected (outside the homes, not a session, a link): they change nothing.
    let _ = outcome;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, failure_persistence: None, ..ProptestConfig::default() })]

    /// After any sequence of jobs on a generated home, every blob a file of the home
    /// (or of the folder a bucket links to) names is still in the store, and nothing
    /// outside the home and that folder changed.
    #[test]
    fn jobs_never_lose_a_referenced_blob_nor_touch_what_is_not_theirs(
        specs in proptest::collection::vec(spec(), 1..6),
        jobs in proptest::collection::vec(job(), 1..7),
    ) {
        let tmp = TempDir::new("jobs-homes");
        let root = tmp.path().to_path_buf();
        let files = build(&root, &specs).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let outside = Tree::read(&root.join("outside")).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for job in &jobs {
            run_job(&root, &files, job);
            let mut named = std::collections::BTreeSet::new();
            referenced(&root.join("home"), &mut named).map_err(|e| TestCaseError::fail(e.to_string()))?;
            for hex in &named {
                let blobs = root.join("home/.omp/agent/blobs");
                prop_assert!(blobs.join(hex).exists(), "after {:?}: blob {} is named but gone", job, hex);
            }
            let now = Tree::read(&root.join("outside")).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&now, &outside, "after {:?}: outside the home changed", job);
        }
        // What is proved a session is always a valid header.
        for f in &files {
            if let Ok(proof) = prove_session(&FileStorage::new(), f, None) {
                prop_assert!(!proof.id.is_empty());
            }
        }
    }
}

/// A session with artifacts and two backups, in a pi bucket of `home`; returns the file
/// and the tree of its bucket as written.
fn trashable(home: &Path, name: &str) -> Result<(PathBuf, Tree)> {
    let bucket = home.join(".pi/agent/sessions/--p--");
    let file = bucket.join(format!("{name}.jsonl"));
    put(&file, v1(Dialect::Pi, 3, false).replace("\"legacy\"", "\"trash-me\""))?;
    put(&bucket.join(name).join("deep/out.txt"), b"artifact")?;
    for ms in [1_700_000_000_000u64, 1_700_000_000_001] {
        fs_err::write(bucket.join(format!("{name}.jsonl.{ms}.bak")), b"old bytes")?;
    }
    Ok((file, Tree::read(&bucket)?))
}

/// A home in a new folder (its name holding `tag`) with a session to trash (see
/// [`trashable`]): the folder, the home, its agents' folders, the session file and the
/// tree of its bucket.
fn trash_home(tag: &str) -> Result<(TempDir, PathBuf, Homes, PathBuf, Tree)> {
    let tmp = TempDir::new(tag);
    let home = tmp.path().join("home");
    let homes = Homes::from_env(&ProcessEnv::new(&home, tmp.path(), std::env::temp_dir()));
    let (file, before) = trashable(&home, "s")?;
    Ok((tmp, home, homes, file, before))
}

/// `rm` to the trash and back: the session, its artifacts and backups leave the bucket
/// (the agent no longer lists them), are listed in the trash, and come back byte for
/// byte; a restore onto a taken place is refused with nothing moved; emptying deletes
/// only what is in the trash, and gc keeps the blobs a trashed session names.
#[test]
fn the_trash_keeps_a_session_until_it_is_restored_or_emptied() -> Result<()> {
    let (_tmp, home, homes, file, before) = trash_home("jobs-trash")?;
    let files = FileStorage::new();
    let bucket = file.parent().ok_or("a bucket")?.to_path_buf();
    let plan = plan_rm(&files, &homes, &file, None, false)?;
    let report = plan.trash(&files, &homes, 1_800_000_000_000)?;
    assert_eq!(Tree::read(&bucket)?, Tree::default(), "the bucket is empty");
    assert_eq!(report.backups.len(), 2);
    let item = report.item;
    assert!(item.complete && item.original == file && item.session_id == "trash-me", "{item:?}");
    assert!(item.dir.starts_with(home.join(".pi/agent").join(maintenance::TRASH_DIR)));
    assert_eq!(maintenance::trash_list(&files, &homes)?, std::slice::from_ref(&item));

    // A session written at its place meanwhile is never replaced.
    fs_err::write(&file, b"new")?;
    let taken = maintenance::restore(&files, &homes, &item);
    assert!(matches!(taken, Err(JobError::Store(session::store::StoreError::AlreadyExists { .. }))), "{taken:?}");
    assert!(maintenance::trash_list(&files, &homes)?[0].complete);
    fs_err::remove_file(&file)?;
    assert_eq!(maintenance::restore(&files, &homes, &item)?, file);
    assert_eq!(Tree::read(&bucket)?, before, "back byte for byte");
    assert!(maintenance::trash_list(&files, &homes)?.is_empty());
    assert!(!item.dir.exists());

    // An omp session in the trash keeps its blob through gc; emptying lets it go.
    let blobs = home.join(".omp/agent/blobs");
    let hash = "ef".repeat(32);
    put(&blobs.join(&hash), b"image")?;
    let omp = home.join(".omp/agent/sessions/-p/o.jsonl");
    put(&omp, v1(Dialect::Omp, 1, false).replace("old 0", &format!("blob:sha256:{hash}")))?;
    let trashed = plan_rm(&files, &homes, &omp, None, false)?.trash(&files, &homes, 1_800_000_000_001)?.item;
    let options = GcOptions::default().grace(std::time::Duration::ZERO).delete(true);
    // gc refuses with no session at all; the session in place keeps it going.
    fs_err::write(home.join(".pi/agent/sessions/--p--/s.jsonl.keep"), b"")?;
    let report = maintenance::gc(&[&files], &homes, &BlobStore::open(&blobs), &options, i64::MAX)?;
    assert_eq!((report.referenced, report.unused.len()), (1, 0), "{report:?}");
    assert!(blobs.join(&hash).exists());
    let gone = maintenance::trash_empty(&files, std::slice::from_ref(&trashed))?;
    assert_eq!(gone, std::slice::from_ref(&trashed));
    assert!(!trashed.dir.exists() && !omp.exists());
    let report = maintenance::gc(&[&files], &homes, &BlobStore::open(&blobs), &options, i64::MAX)?;
    assert_eq!(report.unused.len(), 1);
    Ok(())
}

/// A move to the trash that fails at any step of the storage leaves the session whole at
/// its place, or whole in the trash; `rm` again finishes it in the same folder, and the
/// restore brings back every byte.
#[test]
fn a_move_to_the_trash_cut_off_anywhere_is_finished_by_the_next() -> Result<()> {
    // Boundaries count from 1.
    let mut k = 1;
    loop {
        let (_tmp, home, homes, file, before) = trash_home("jobs-trash-fault")?;
        let bucket = file.parent().ok_or("a bucket")?.to_path_buf();
        let original = fs_err::read(&file)?;
        let faults = Faults::new();
        faults.fail_at(k);
        let storage = FaultStorage::new(FileStorage::new(), faults.clone());
        let first =
            plan_rm(&storage, &homes, &file, None, false).and_then(|p| p.trash(&storage, &homes, 1_800_000_000_000));
        let Some(at) = faults.failed() else {
            first?;
            break;
        };
        assert!(first.is_err(), "step {k} ({at:?}) failed but the move said it was done");
        let files = FileStorage::new();
        let listed = maintenance::trash_list(&files, &homes)?;
        match fs_err::read(&file) {
            Ok(bytes) => assert_eq!(bytes, original, "step {k}: the session in place is whole"),
            Err(_) => {
                assert!(listed.len() == 1 && listed[0].complete, "step {k}: not in place, not in the trash");
                assert_eq!(fs_err::read(listed[0].file())?, original);
            }
        }
        if file.exists() {
            // Emptying the trash now deletes nothing of the live session.
            let home_before = Tree::read(&home)?;
            assert!(maintenance::trash_empty(&files, &listed)?.is_empty(), "step {k}");
            assert_eq!(Tree::read(&home)?, home_before, "step {k}: emptying touched a live session's files");
            let again = plan_rm(&files, &homes, &file, None, false)?.trash(&files, &homes, 1_800_000_000_500)?;
            if let Some(first) = listed.first() {
                assert_eq!(again.item.dir, first.dir, "step {k}: finished in the folder it began");
            }
        }
        let listed = maintenance::trash_list(&files, &homes)?;
        assert_eq!(listed.len(), 1, "step {k}: {listed:?}");
        maintenance::restore(&files, &homes, &listed[0])?;
        assert_eq!(Tree::read(&bucket)?, before, "step {k}: back byte for byte");
        k += 1;
    }
    assert!(k > 6, "the move crossed {} storage steps", k - 1);
    Ok(())
}

/// Every session file below `root` with its header's cwd, as a listing gives them.
fn listed(root: &Path, dialect: Dialect) -> Result<Vec<(Dialect, session::discovery::SessionInfo)>> {
    let mut out = Vec::new();
    if !root.exists() {
        return Ok(out);
    }
    for bucket in fs_err::read_dir(root)? {
        let bucket = bucket?.path();
        if !bucket.is_dir() {
            continue;
        }
        for f in fs_err::read_dir(&bucket)? {
            let path = f?.path();
            if path.extension().is_none_or(|e| e != "jsonl") {
                continue;
            }
            let parsed = session::model::parse_session_bytes(&fs_err::read(&path)?, dialect);
            let cwd = parsed.records.first().and_then(|h| h.get_str("cwd")).unwrap_or_default().to_owned();
            out.push((
                dialect,
                session::discovery::SessionInfo {
                    path,
                    id: String::new(),
                    id_raw: None,
                    has_id: true,
                    cwd,
                    name: None,
                    title: None,
                    parent_session_path: None,
                    created: None,
                    modified: None,
                    message_count: 0,
                    assistant_turns: None,
                    size: None,
                    first_message: String::new(),
                    all_messages_text: session::discovery::MessagesText::from(""),
                    status: None,
                },
            ));
        }
    }
    Ok(out)
}

/// A project move cut off at any step of the storage (each session's move fails at its
/// k-th step) is finished by running it again: every session is once, whole, in the
/// bucket of its new folder.
#[test]
fn a_project_move_cut_off_anywhere_is_finished_by_the_next() -> Result<()> {
    let mut k = 1;
    loop {
        let tmp = TempDir::new("jobs-project");
        let home = tmp.path().join("home");
        let process = ProcessEnv::new(&home, tmp.path(), std::env::temp_dir());
        let pi_root = AgentDirs::pi(&process).sessions_root;
        let omp_root = AgentDirs::omp(&process, OmpHome::Omp).sessions_root;
        let pi_dirs = AgentDirs::pi(&process);
        let omp_dirs = AgentDirs::omp(&process, OmpHome::Omp);
        let mut marks = Vec::new();
        for (dialect, dirs, cwd) in [
            (Dialect::Pi, &pi_dirs, "/w/old"),
            (Dialect::Pi, &pi_dirs, "/w/old/sub"),
            (Dialect::Omp, &omp_dirs, "/w/old"),
        ] {
            let mark = format!("{}-{}", dialect.name(), cwd.len());
            let file = dirs.default_session_dir(cwd).join(format!("{mark}.jsonl"));
            let text = v1(dialect, 2, false).replace("\"/work\"", &format!("\"{cwd}\""));
            put(&file, text.replace("old 0", &mark))?;
            marks.push((dialect, mark, cwd.replace("/w/old", "/w/new")));
        }
        let faults = Faults::new();
        faults.fail_at(k);
        let storage: Arc<dyn Storage> = Arc::new(FaultStorage::new(FileStorage::new(), faults.clone()));
        let cwd = tmp.path().to_path_buf();
        let env_for = |storage: Arc<dyn Storage>| {
            let (pi_dirs, omp_dirs, cwd) = (pi_dirs.clone(), omp_dirs.clone(), cwd.clone());
            move |d: Dialect| {
                Env::bare(storage.clone()).with_process_cwd(&cwd).with_agent_dirs(match d {
                    Dialect::Pi => pi_dirs.clone(),
                    Dialect::Omp => omp_dirs.clone(),
                })
            }
        };
        let all = |r: &Path, d: Dialect| listed(r, d);
        let mut now = all(&pi_root, Dialect::Pi)?;
        now.extend(all(&omp_root, Dialect::Omp)?);
        let moves = maintenance::project_moves(&now, Path::new("/w/old"), Path::new("/w/new"));
        assert_eq!(moves.len(), 3);
        let first = maintenance::relocate_project(&env_for(storage), &moves);
        let fired = faults.failed().is_some();
        // Again, without faults, with what a listing finds now.
        let mut now = all(&pi_root, Dialect::Pi)?;
        now.extend(all(&omp_root, Dialect::Omp)?);
        let again = maintenance::project_moves(&now, Path::new("/w/old"), Path::new("/w/new"));
        if !fired {
            assert!(first.iter().all(|(_, r)| r.is_ok()) && again.is_empty(), "{again:?}");
            break;
        }
        for (m, r) in maintenance::relocate_project(&env_for(Arc::new(FileStorage::new())), &again) {
            r.map_err(|e| format!("step {k}: {} again: {e}", m.path.display()))?;
        }
        for (dialect, mark, cwd) in &marks {
            let dirs = if *dialect == Dialect::Pi { &pi_dirs } else { &omp_dirs };
            let root = if *dialect == Dialect::Pi { &pi_root } else { &omp_root };
            let holding: Vec<_> = all(root, *dialect)?
                .into_iter()
                .filter(|(_, s)| fs_err::read_to_string(&s.path).is_ok_and(|t| t.contains(&format!("\"{mark}\""))))
                .collect();
            assert_eq!(holding.len(), 1, "step {k}: {mark} is in {} files", holding.len());
            let (_, s) = &holding[0];
            assert_eq!(&s.cwd, cwd, "step {k}: {mark}");
            assert_eq!(s.path.parent(), Some(dirs.default_session_dir(cwd).as_path()), "step {k}: {mark}");
        }
        k += 1;
    }
    assert!(k > 10, "the move crossed {} storage steps", k - 1);
    Ok(())
}

/// A v3 entry line of `dialect` continuing from `parent`.
fn entry(id: &str, parent: Option<&str>, text: &str) -> String {
    let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
    format!(
        r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"{text}","timestamp":1}}}}"#
    ) + "\n"
}

/// A v3 session file of `dialect` (id `merge-me`) holding `lines`.
fn v3(dialect: Dialect, lines: &[String]) -> String {
    let mut text = if dialect == Dialect::Omp { slot() } else { String::new() };
    text.push_str(
        r#"{"type":"session","version":3,"id":"merge-me","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/work"}"#,
    );
    text.push('\n');
    text.push_str(&lines.concat());
    text
}

/// Two continuations of one session merge into one tree: every entry once, parents
/// before children, the chosen leaf last (where the agent resumes); a fast-forward takes
/// the other copy's leaf; merging again writes nothing; copies of different sessions,
/// entries the copies disagree on and a leaf with children are refused with nothing
/// written.
#[test]
fn merging_two_continuations_keeps_both_branches() -> Result<()> {
    let tmp = TempDir::new("jobs-merge");
    let files = FileStorage::new();
    let env = Env::bare(Arc::new(FileStorage::new()));
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let dir = tmp.path().join(dialect.name());
        let (ours, theirs) = (dir.join("ours/s.jsonl"), dir.join("theirs/s.jsonl"));
        let base = [entry("aaaaaaaa", None, "one"), entry("bbbbbbbb", Some("aaaaaaaa"), "two")];
        let on_base = |next: String| v3(dialect, &[base[0].clone(), base[1].clone(), next]);
        put(&ours, on_base(entry("cccccccc", Some("bbbbbbbb"), "laptop")))?;
        put(&theirs, on_base(entry("dddddddd", Some("bbbbbbbb"), "server")))?;
        put(&dir.join("ours/s/mine.txt"), "mine")?;
        put(&dir.join("theirs/s/mine.txt"), "not copied over mine")?;
        fs_err::write(dir.join("theirs/s/theirs.txt"), "theirs")?;
        let r = maintenance::merge(&files, &ours, &theirs, Some(dialect), &MergeLeaf::Auto)?;
        assert!(r.written && r.added == ["dddddddd"] && r.leaf == "cccccccc", "{r:?}");
        assert_eq!(r.artifacts_copied, 1);
        assert_eq!(r.artifacts_differing, [PathBuf::from("mine.txt")], "a name both hold keeps ours, and is said");
        assert_eq!(fs_err::read_to_string(dir.join("ours/s/mine.txt"))?, "mine");
        let m = SessionManager::open_read_only(dialect, &ours, env.clone())?;
        assert_eq!(m.tree().entries().len(), 4);
        assert_eq!(m.tree().leaf_id(), Some("cccccccc"), "the leaf is where the agent resumes");
        let again = maintenance::merge(&files, &ours, &theirs, Some(dialect), &MergeLeaf::Auto)?;
        assert!(!again.written && again.added.is_empty(), "{again:?}");
        assert!(!maintenance::merge(&files, &ours, &ours, Some(dialect), &MergeLeaf::Auto)?.written);
        // The other leaf on request.
        let r = maintenance::merge(&files, &ours, &theirs, Some(dialect), &MergeLeaf::Theirs)?;
        assert!(r.written && r.leaf == "dddddddd");
        assert_eq!(SessionManager::open_read_only(dialect, &ours, env.clone())?.tree().leaf_id(), Some("dddddddd"));

        // A fast-forward: theirs went on from ours' leaf.
        let ff = dir.join("ff.jsonl");
        fs_err::write(&ff, v3(dialect, &[base[0].clone(), base[1].clone()]))?;
        let r = maintenance::merge(&files, &ff, &ours, Some(dialect), &MergeLeaf::Auto)?;
        assert_eq!(r.leaf, "dddddddd", "{r:?}");
        assert_eq!(fs_err::read(&ff)?, fs_err::read(&ours)?, "a fast-forward is the other copy");

        // Refusals change nothing.
        let before = fs_err::read(&ours)?;
        let other = dir.join("other.jsonl");
        fs_err::write(&other, v3(dialect, &[base[0].clone()]).replace("merge-me", "someone-else"))?;
        let got = maintenance::merge(&files, &ours, &other, Some(dialect), &MergeLeaf::Auto);
        assert!(matches!(got, Err(JobError::NotTheSameSession { .. })), "{got:?}");
        fs_err::write(&other, v3(dialect, &[base[0].clone(), entry("bbbbbbbb", None, "two")]))?;
        let got = maintenance::merge(&files, &ours, &other, Some(dialect), &MergeLeaf::Auto);
        assert!(matches!(got, Err(JobError::MergeConflict { ref id, .. }) if id == "bbbbbbbb"), "{got:?}");
        let got = maintenance::merge(&files, &ours, &theirs, Some(dialect), &MergeLeaf::Id("bbbbbbbb".into()));
        assert!(matches!(got, Err(JobError::BadLeaf { .. })), "{got:?}");
        assert_eq!(fs_err::read(&ours)?, before);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Any two copies of a tree grown from a common prefix merge into the union of their
    /// entries, each once, parents before children; merging again writes nothing.
    #[test]
    fn a_merge_is_the_union_of_two_copies(
        shared in 1usize..5,
        a_parents in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
        b_parents in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let tmp = TempDir::new("jobs-merge-prop");
        let files = FileStorage::new();
        let mut base = Vec::new();
        let mut ids = Vec::new();
        for i in 0..shared {
            let id = format!("{i:08x}");
            base.push(entry(&id, ids.last().map(String::as_str), "shared"));
            ids.push(id);
        }
        let grow = |tag: u32, picks: &[prop::sample::Index]| {
            let (mut lines, mut known) = (base.clone(), ids.clone());
            for (i, p) in picks.iter().enumerate() {
                let id = format!("{tag:01x}{i:07x}");
                let parent = p.get(&known).clone();
                lines.push(entry(&id, Some(&parent), "grown"));
                known.push(id);
            }
            (lines, known)
        };
        let (a, a_ids) = grow(0xa, &a_parents);
        let (b, b_ids) = grow(0xb, &b_parents);
        let (ours, theirs) = (tmp.path().join("a.jsonl"), tmp.path().join("b.jsonl"));
        fs_err::write(&ours, v3(Dialect::Pi, &a)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        fs_err::write(&theirs, v3(Dialect::Pi, &b)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        // Auto finds a leaf no entry continues from, unless neither copy's leaf is one.
        let merged = match maintenance::merge(&files, &ours, &theirs, Some(Dialect::Pi), &MergeLeaf::Auto) {
            Ok(_) => true,
            Err(JobError::BadLeaf { .. }) => false,
            Err(e) => return Err(TestCaseError::fail(e.to_string())),
        };
        let text = fs_err::read_to_string(&ours).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let parsed = session::model::parse_session_bytes(text.as_bytes(), Dialect::Pi);
        let got: Vec<String> = parsed.records[1..].iter().filter_map(|r| r.id().map(str::to_owned)).collect();
        let unique: std::collections::BTreeSet<&String> = got.iter().collect();
        prop_assert_eq!(unique.len(), got.len(), "an entry twice");
        let want: std::collections::BTreeSet<&String> =
            if merged { a_ids.iter().chain(&b_ids).collect() } else { a_ids.iter().collect() };
        prop_assert_eq!(unique, want);
        let mut seen = std::collections::HashSet::new();
        for r in &parsed.records[1..] {
            if let Some(p) = r.parent_id() {
                prop_assert!(seen.contains(p), "a child before its parent");
            }
            seen.insert(r.id().unwrap_or_default());
        }
        let again = maintenance::merge(&files, &ours, &theirs, Some(Dialect::Pi), &MergeLeaf::Ours);
        prop_assert!(again.as_ref().map_or(true, |r| !r.written), "{:?}", again);
    }
}

/// A restore cut off at any step of the storage leaves the session in the trash or back
/// in place, never a backup alone where omp would promote it; the next restore finishes
/// it, and meanwhile neither `rm` nor emptying the trash touches the folder.
#[test]
fn a_restore_cut_off_anywhere_is_finished_by_the_next() -> Result<()> {
    let mut k = 1;
    loop {
        let (_tmp, _, homes, file, before) = trash_home("jobs-restore-fault")?;
        let bucket = file.parent().ok_or("a bucket")?.to_path_buf();
        let files = FileStorage::new();
        let item = plan_rm(&files, &homes, &file, None, false)?.trash(&files, &homes, 1_800_000_000_000)?.item;
        let faults = Faults::new();
        faults.fail_at(k);
        let storage = FaultStorage::new(FileStorage::new(), faults.clone());
        let first = maintenance::restore(&storage, &homes, &item);
        if faults.failed().is_none() {
            first?;
            assert_eq!(Tree::read(&bucket)?, before);
            break;
        }
        assert!(first.is_err(), "step {k}");
        // A backup alone in the bucket is what omp's listing promotes: never.
        let backups_alone = !file.exists() && fs_err::read_dir(&bucket)?.count() > 0;
        assert!(!backups_alone, "step {k}: backups without their session in the bucket");
        // A folder whose restore began is left alone by emptying.
        let begun: Vec<_> =
            maintenance::trash_list(&files, &homes)?.into_iter().filter(|i| i.restoring || !i.complete).collect();
        assert!(maintenance::trash_empty(&files, &begun)?.is_empty(), "step {k}");
        let listed = maintenance::trash_list(&files, &homes)?;
        if let Some(left) = listed.first() {
            maintenance::restore(&files, &homes, left)?;
        }
        assert_eq!(Tree::read(&bucket)?, before, "step {k}: back byte for byte");
        k += 1;
    }
    assert!(k > 4, "the restore crossed {} storage steps", k - 1);
    Ok(())
}

/// A trash.json naming a place outside its sessions folder is refused with nothing
/// moved, and a link planted where the trash folder goes makes rm refuse.
#[test]
fn the_trash_goes_nowhere_else() -> Result<()> {
    let (tmp, home, homes, file, _) = trash_home("jobs-trash-planted")?;
    let files = FileStorage::new();
    let item = plan_rm(&files, &homes, &file, None, false)?.trash(&files, &homes, 1_800_000_000_000)?.item;
    let elsewhere = tmp.path().join("outside/evil.jsonl");
    let meta = item.dir.join(maintenance::TRASH_META);
    let text = fs_err::read_to_string(&meta)?;
    fs_err::write(&meta, text.replace(&*file.to_string_lossy(), &elsewhere.to_string_lossy()))?;
    let planted = maintenance::trash_list(&files, &homes)?;
    let got = maintenance::restore(&files, &homes, &planted[0]);
    assert!(matches!(got, Err(JobError::Unsupported { .. })), "{got:?}");
    assert!(!tmp.path().join("outside").exists());

    // A link where the trash folder goes.
    let (other, _) = trashable(&home, "t")?;
    fs_err::remove_dir_all(home.join(".pi/agent").join(maintenance::TRASH_DIR))?;
    let target = tmp.path().join("target");
    fs_err::create_dir_all(&target)?;
    std::os::unix::fs::symlink(&target, home.join(".pi/agent").join(maintenance::TRASH_DIR))?;
    let got = plan_rm(&files, &homes, &other, None, false)?.trash(&files, &homes, 1_800_000_000_001);
    assert!(matches!(got, Err(JobError::Unsupported { .. })), "{got:?}");
    assert!(other.exists() && fs_err::read_dir(&target)?.count() == 0);
    Ok(())
}
