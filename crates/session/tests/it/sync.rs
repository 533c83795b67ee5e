//! `session::sync`: two machines whose project folders differ (one git origin) sync
//! their pi and omp sessions through a folder: uploads, downloads with the `cwd`
//! rewritten and nothing else, fast-forwards both ways, divergent continuations merged
//! on both sides, a second sync that changes nothing, a dry run that writes nothing, a
//! private state file without the password, and a writer racing the sync.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use proptest::prelude::*;
use session::discovery::{AgentDirs, OmpHome, ProcessEnv};
use session::model::Dialect;
use session::store::{BlobStore, Durability, ExpectedSize, FileStorage, Storage};
use session::sync::{SyncLocal, SyncOptions, SyncOutcome, SyncRemote, SyncReport, project_slug, sync};

use session_testkit::TempDir;

use crate::common::{Racing, Result, append, put};

const ORIGIN_ID: &str = "github.com/me/proj";

/// One machine: its home, its folder of the project, and its side of a sync.
struct Machine {
    root: PathBuf,
    project: PathBuf,
    local: SyncLocal,
}

impl Machine {
    /// A machine below `root/tag` whose clone of the project (origin `origin`) is at
    /// `project` (relative to its folder).
    fn new(root: &Path, tag: &str, project: &str, origin: &str) -> Result<Machine> {
        let base = root.join(tag);
        let home = base.join("home");
        let project = base.join(project);
        fs_err::create_dir_all(project.join(".git"))?;
        fs_err::write(
            project.join(".git/config"),
            format!("[core]\n\tbare = false\n[remote \"origin\"]\n\turl = {origin}\n\tfetch = +refs/heads/*\n"),
        )?;
        let tmp = base.join("tmp");
        fs_err::create_dir_all(&tmp)?;
        let env = ProcessEnv::new(&home, &project, &tmp);
        let omp = AgentDirs::omp(&env, OmpHome::Omp);
        let blobs = BlobStore::open(omp.agent_dir.join("blobs"));
        let homes = vec![AgentDirs::pi(&env), omp];
        let local = SyncLocal::new(Arc::new(FileStorage::new()), homes, home.join(".local/state/session-store"))
            .with_blobs(blobs);
        Ok(Machine { root: base, project, local })
    }

    fn dirs(&self, dialect: Dialect) -> &AgentDirs {
        self.local.homes.iter().find(|h| h.dialect == dialect).expect("both homes are set up")
    }

    /// The path of the session `name` of `dialect` in this machine's project bucket.
    fn session(&self, dialect: Dialect, name: &str) -> PathBuf {
        self.dirs(dialect).default_session_dir(&self.project.to_string_lossy()).join(name)
    }

    /// Writes this machine's session `sid` of `dialect` holding `lines` (its header's
    /// `cwd` this machine's folder of the project); returns its path.
    fn put(&self, dialect: Dialect, sid: &str, lines: &[String]) -> Result<PathBuf> {
        let path = self.session(dialect, &name_of(sid));
        put(&path, session_file(dialect, sid, &self.project, lines))?;
        Ok(path)
    }

    fn sync(&self, remote: &SyncRemote) -> Result<SyncReport> {
        Ok(sync(&self.local, remote, &SyncOptions::default(), &mut |_| {})?)
    }
}

/// A test's folder with machine A in it (its project at `proj`, cloned from
/// github.com/me/proj), and the folder of a remote there.
fn machine_a(tag: &str) -> Result<(TempDir, Machine, PathBuf)> {
    let tmp = TempDir::new(tag);
    let a = Machine::new(tmp.path(), "a", "proj", "git@github.com:me/proj.git")?;
    let remote_dir = tmp.path().join("remote");
    Ok((tmp, a, remote_dir))
}

/// A v3 entry line continuing from `parent`.
fn entry(id: &str, parent: Option<&str>, text: &str) -> String {
    let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
    format!(
        r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"{text}","timestamp":1}},"x-unknown":[1,2.50,"\u00e9"]}}"#
    ) + "\n"
}

/// A session file of `dialect` (id `sid`) whose header's `cwd` is `cwd`.
fn session_file(dialect: Dialect, sid: &str, cwd: &Path, lines: &[String]) -> String {
    let mut text = String::new();
    if dialect == Dialect::Omp {
        let base = r#"{"type":"title","v":1,"title":"","updatedAt":"2025-01-01T00:00:00.000Z","pad":""}"#;
        let pad = " ".repeat(255 - base.len());
        text.push_str(&base.replace(r#""pad":"""#, &format!(r#""pad":"{pad}""#)));
        text.push('\n');
    }
    let mut cwd_json = String::new();
    session::model::json::write_js_str(&mut cwd_json, &cwd.to_string_lossy());
    text.push_str(&format!(
        r#"{{"type":"session","version":3,"id":"{sid}","timestamp":"2025-01-01T00:00:00.000Z","cwd":{cwd_json},"extra":{{"kept":true}}}}"#
    ));
    text.push('\n');
    text.push_str(&lines.concat());
    text
}

fn name_of(sid: &str) -> String {
    format!("2025-01-01T00-00-00-000Z_{sid}.jsonl")
}

/// Moves the modification time of `path` a minute back, as for a file written a while
/// ago: a sync notes only times that no write in the same moment can repeat.
fn settle(path: &Path) -> Result<()> {
    let f = fs_err::OpenOptions::new().append(true).open(path)?;
    let now = session::store::clock::Clock::now_ms(&session::store::clock::SystemClock);
    let then = u64::try_from(now - 60_000)?;
    f.file().set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_millis(then))?;
    Ok(())
}

/// `bytes` with the `cwd` of machine `from` written as that of machine `to` (the one
/// place the two copies may differ).
fn as_on(bytes: &[u8], from: &Machine, to: &Machine) -> Vec<u8> {
    let text = String::from_utf8_lossy(bytes);
    let (a, b) = (format!("\"cwd\":\"{}\"", from.project.display()), format!("\"cwd\":\"{}\"", to.project.display()));
    text.replacen(&a, &b, 1).into_bytes()
}

/// The entry ids of a file, in order.
fn ids(path: &Path, dialect: Dialect) -> Result<Vec<String>> {
    let bytes = fs_err::read(path)?;
    let parsed = session::model::parse_session_bytes(&bytes, dialect);
    assert!(parsed.diagnostics.is_empty(), "{}: {:?}", path.display(), parsed.diagnostics);
    Ok(parsed.records[1..].iter().filter_map(|r| r.id().map(str::to_owned)).collect())
}

/// Every file below `dir` with its bytes and modification time.
fn snapshot(dir: &Path) -> Result<BTreeMap<PathBuf, (Vec<u8>, std::time::SystemTime)>> {
    let mut out = BTreeMap::new();
    if !dir.exists() {
        return Ok(out);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs_err::read_dir(&d)? {
            let p = e?.path();
            let m = fs_err::symlink_metadata(&p)?;
            if m.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), (fs_err::read(&p)?, m.modified()?));
            }
        }
    }
    Ok(out)
}

fn outcome<'a>(r: &'a SyncReport, name: &str, dialect: Dialect) -> &'a SyncOutcome {
    let found = r.sessions.iter().find(|s| s.name == name && s.dialect == dialect);
    &found.unwrap_or_else(|| panic!("{name} is in the report: {r:?}")).outcome
}

/// Everything the brief of a sync asks for, for both dialects at once.
#[test]
fn two_machines_sync_through_a_folder() -> Result<()> {
    let tmp = TempDir::new("sync-two");
    let a = Machine::new(tmp.path(), "a", "work/proj", "git@github.com:me/proj.git")?;
    let b = Machine::new(tmp.path(), "b", "code/other-name", "https://GitHub.com/me/proj")?;
    let remote_dir = tmp.path().join("remote");
    let remote = SyncRemote::new(Arc::new(FileStorage::new()), &remote_dir.to_string_lossy(), &remote_dir);
    let shared = "shared";
    let own = "b-own";
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let base = [entry("aaaaaaaa", None, "one"), entry("bbbbbbbb", Some("aaaaaaaa"), "two")];
        a.put(dialect, shared, &base)?;
        // B's own session of the project tells B where the project is here.
        b.put(dialect, own, &base[..1])?;
    }

    // Upload from A.
    let r = a.sync(&remote)?;
    let slug = project_slug(ORIGIN_ID);
    for dialect in [Dialect::Pi, Dialect::Omp] {
        assert!(matches!(outcome(&r, &name_of(shared), dialect), SyncOutcome::Uploaded), "{r:?}");
        let sub = if dialect == Dialect::Pi { "pi/sessions" } else { "sessions" };
        let on_remote = remote_dir.join(sub).join(&slug).join(name_of(shared));
        assert_eq!(fs_err::read(&on_remote)?, fs_err::read(a.session(dialect, &name_of(shared)))?);
        assert!(
            remote_dir.join(sub).join(&slug).join(format!("2025-01-01T00-00-00-000Z_{shared}.meta.json")).is_file()
        );
    }

    // B uploads its own and downloads A's into its bucket of its folder, only `cwd` changed.
    let r = b.sync(&remote)?;
    for dialect in [Dialect::Pi, Dialect::Omp] {
        assert!(matches!(outcome(&r, &name_of(shared), dialect), SyncOutcome::Downloaded), "{r:?}");
        assert!(matches!(outcome(&r, &name_of(own), dialect), SyncOutcome::Uploaded), "{r:?}");
        let on_a = fs_err::read(a.session(dialect, &name_of(shared)))?;
        let on_b = fs_err::read(b.session(dialect, &name_of(shared)))?;
        assert_ne!(on_a, on_b);
        assert_eq!(on_b, as_on(&on_a, &a, &b), "every byte but the cwd's is kept");
    }
    let r = a.sync(&remote)?;
    for dialect in [Dialect::Pi, Dialect::Omp] {
        assert!(matches!(outcome(&r, &name_of(own), dialect), SyncOutcome::Downloaded), "{r:?}");
        assert!(matches!(outcome(&r, &name_of(shared), dialect), SyncOutcome::Unchanged), "{r:?}");
    }

    // Fast-forward A → B, then B → A.
    for dialect in [Dialect::Pi, Dialect::Omp] {
        append(&a.session(dialect, &name_of(shared)), &entry("cccccccc", Some("bbbbbbbb"), "from a"))?;
    }
    let r = a.sync(&remote)?;
    assert_eq!(r.counts().pushed, 2, "{r:?}");
    let r = b.sync(&remote)?;
    assert_eq!(r.counts().pulled, 2, "{r:?}");
    for dialect in [Dialect::Pi, Dialect::Omp] {
        assert!(matches!(outcome(&r, &name_of(shared), dialect), SyncOutcome::Pulled { .. }), "{r:?}");
        append(&b.session(dialect, &name_of(shared)), &entry("dddddddd", Some("cccccccc"), "from b"))?;
    }
    let r = b.sync(&remote)?;
    assert_eq!(r.counts().pushed, 2, "{r:?}");
    let r = a.sync(&remote)?;
    assert_eq!(r.counts().pulled, 2, "{r:?}");
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let on_a = fs_err::read(a.session(dialect, &name_of(shared)))?;
        assert_eq!(fs_err::read(b.session(dialect, &name_of(shared)))?, as_on(&on_a, &a, &b));
    }

    // Two continuations: merged on both sides, each entry once, parents first.
    for dialect in [Dialect::Pi, Dialect::Omp] {
        append(&a.session(dialect, &name_of(shared)), &entry("eeeeeeee", Some("dddddddd"), "a goes on"))?;
        append(&b.session(dialect, &name_of(shared)), &entry("ffffffff", Some("dddddddd"), "b goes on"))?;
        append(&b.session(dialect, &name_of(shared)), &entry("99999999", Some("ffffffff"), "and on"))?;
    }
    let r = a.sync(&remote)?;
    assert_eq!(r.counts().pushed, 2, "{r:?}");
    let r = b.sync(&remote)?;
    for dialect in [Dialect::Pi, Dialect::Omp] {
        assert!(
            matches!(outcome(&r, &name_of(shared), dialect), SyncOutcome::Merged { local_added: 1, remote_added: 2 }),
            "{r:?}"
        );
    }
    let r = a.sync(&remote)?;
    assert_eq!(r.counts().pulled, 2, "{r:?}");
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let (pa, pb) = (a.session(dialect, &name_of(shared)), b.session(dialect, &name_of(shared)));
        assert_eq!(fs_err::read(&pb)?, as_on(&fs_err::read(&pa)?, &a, &b));
        let got = ids(&pa, dialect)?;
        let want = ["aaaaaaaa", "bbbbbbbb", "cccccccc", "dddddddd", "eeeeeeee", "ffffffff", "99999999"];
        assert_eq!(got.len(), want.len(), "{got:?}");
        assert_eq!(got.iter().map(String::as_str).collect::<BTreeSet<_>>(), want.into_iter().collect());
        assert_eq!(got.last().map(String::as_str), Some("99999999"), "b's leaf, the longer branch, last");
        let text = String::from_utf8(fs_err::read(&pa)?)?;
        assert!(text.contains(r#""x-unknown":[1,2.50,"\u00e9"]"#) && text.contains(r#""extra":{"kept":true}"#));
    }

    // A second sync changes nothing anywhere.
    let before = (snapshot(&a.root)?, snapshot(&b.root)?, snapshot(&remote_dir)?);
    for m in [&a, &b] {
        let r = m.sync(&remote)?;
        assert_eq!(r.counts().unchanged, r.sessions.len(), "{r:?}");
        assert_eq!(r.sessions.len(), 4);
        assert!(r.state_file.is_none(), "the state did not change: {r:?}");
    }
    assert!(before == (snapshot(&a.root)?, snapshot(&b.root)?, snapshot(&remote_dir)?), "a second sync wrote");
    Ok(())
}

/// A dry run says what it would do and writes nothing: no remote, no state, no bucket.
#[test]
fn a_dry_run_writes_nothing() -> Result<()> {
    let (tmp, a, remote_dir) = machine_a("sync-dry")?;
    let b = Machine::new(tmp.path(), "b", "proj", "git@github.com:me/proj.git")?;
    let remote = SyncRemote::new(Arc::new(FileStorage::new()), &remote_dir.to_string_lossy(), &remote_dir);
    let file = a.put(Dialect::Pi, "s", &[entry("aaaaaaaa", None, "x")])?;
    let before = snapshot(tmp.path())?;
    let r = sync(&a.local, &remote, &SyncOptions::default().dry_run(true), &mut |_| {})?;
    assert!(r.dry_run && matches!(outcome(&r, &name_of("s"), Dialect::Pi), SyncOutcome::Uploaded), "{r:?}");
    assert!(before == snapshot(tmp.path())?, "a dry run wrote");
    assert!(!remote_dir.exists());
    // With something to pull and to merge, too.
    a.sync(&remote)?;
    b.put(Dialect::Pi, "s", &[entry("aaaaaaaa", None, "x"), entry("bbbbbbbb", Some("aaaaaaaa"), "y")])?;
    append(&file, &entry("cccccccc", Some("aaaaaaaa"), "z"))?;
    let before = snapshot(tmp.path())?;
    let r = sync(&b.local, &remote, &SyncOptions::default().dry_run(true), &mut |_| {})?;
    assert!(matches!(outcome(&r, &name_of("s"), Dialect::Pi), SyncOutcome::Pushed { .. }), "{r:?}");
    b.sync(&remote)?;
    let before_a = snapshot(tmp.path())?;
    let r = sync(&a.local, &remote, &SyncOptions::default().dry_run(true), &mut |_| {})?;
    assert!(matches!(outcome(&r, &name_of("s"), Dialect::Pi), SyncOutcome::Merged { .. }), "{r:?}");
    assert!(before_a == snapshot(tmp.path())?, "a dry run wrote");
    assert!(before != before_a, "the real sync did write");
    Ok(())
}

/// The state file is private (0600 in a 0700 folder), names the remote without its
/// password, and a relative `XDG_STATE_HOME` is not where it goes.
#[test]
fn the_state_file_is_private_and_keeps_no_password() -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let (tmp, a, remote_dir) = machine_a("sync-state")?;
    let url = "postgres://me:hunter2@db.example/sessions";
    let remote = SyncRemote::new(Arc::new(FileStorage::new()), url, &remote_dir);
    a.put(Dialect::Omp, "s", &[entry("aaaaaaaa", None, "x")])?;
    let r = a.sync(&remote)?;
    let state = r.state_file.ok_or("a state file")?;
    assert_eq!(state, session::sync::state_file(&a.local.state_dir, url, &remote_dir));
    assert!(state.starts_with(&a.local.state_dir));
    let text = fs_err::read_to_string(&state)?;
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains("postgres://me@db.example/sessions"), "{text}");
    assert_eq!(fs_err::metadata(&state)?.permissions().mode() & 0o777, 0o600);
    assert_eq!(fs_err::metadata(state.parent().ok_or("a folder")?)?.permissions().mode() & 0o777, 0o700);
    let env = ProcessEnv::new(tmp.path(), tmp.path(), tmp.path()).with_var("XDG_STATE_HOME", "relative/state");
    assert_eq!(session::maintenance::MarkStore::default_state_dir(&env), tmp.path().join(".local/state/session-store"));
    Ok(())
}

/// A line another machine appends to the remote between the sync's read and its
/// conditional write is merged, not lost, on both sides: in a fast-forward's append and
/// in a merge's compare-and-set.
#[test]
fn a_writer_racing_the_sync_is_merged_not_lost() -> Result<()> {
    // Without and with a line only the remote has before the sync (a merge's write).
    for remote_first in [None, Some(entry("eeeeeeee", Some("bbbbbbbb"), "theirs, before"))] {
        let (_tmp, a, remote_dir) = machine_a("sync-race")?;
        let base = [entry("aaaaaaaa", None, "x"), entry("bbbbbbbb", Some("aaaaaaaa"), "y")];
        let file = a.put(Dialect::Pi, "s", &base)?;
        let plain = SyncRemote::new(Arc::new(FileStorage::new()), "remote", &remote_dir);
        a.sync(&plain)?;
        let on_remote = remote_dir.join("pi/sessions").join(project_slug(ORIGIN_ID)).join(name_of("s"));
        let mut want = vec!["aaaaaaaa", "bbbbbbbb", "cccccccc", "dddddddd"];
        if let Some(line) = &remote_first {
            append(&on_remote, line)?;
            want.push("eeeeeeee");
        }
        append(&file, &entry("cccccccc", Some("bbbbbbbb"), "ours"))?;
        let racing = Racing { line: entry("dddddddd", Some("bbbbbbbb"), "theirs, meanwhile"), ..Racing::default() };
        let storage = Arc::new(racing);
        let remote = SyncRemote::new(storage.clone(), "remote", &remote_dir);
        let r = a.sync(&remote)?;
        assert!(storage.fired.load(Ordering::SeqCst), "the race happened");
        let local_added = want.len() - 3;
        assert!(
            matches!(outcome(&r, &name_of("s"), Dialect::Pi), SyncOutcome::Merged { local_added: n, remote_added: 1 } if *n == local_added),
            "{r:?}"
        );
        assert_eq!(fs_err::read(&on_remote)?, fs_err::read(&file)?);
        let got = ids(&file, Dialect::Pi)?;
        assert_eq!(got.len(), want.len(), "{got:?}");
        assert_eq!(got.iter().map(String::as_str).collect::<BTreeSet<_>>(), want.into_iter().collect());
    }
    Ok(())
}

/// Appends `picks.len()` entries to `lines`, each continuing from one of the known ids.
fn grow(tag: char, picks: &[prop::sample::Index], known: &mut Vec<String>) -> String {
    let mut out = String::new();
    for (i, p) in picks.iter().enumerate() {
        let id = format!("{tag}{i:07x}");
        let parent = p.get(known).clone();
        out.push_str(&entry(&id, Some(&parent), "grown"));
        known.push(id);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Two copies continued at random on two machines end, after syncs both ways, equal
    /// (but for their `cwd`) and holding the union of their entries, each once.
    #[test]
    fn random_continuations_end_equal(
        shared in 1usize..4,
        a_picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..5),
        b_picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..5),
        omp in any::<bool>(),
    ) {
        let run = || -> Result<()> {
            let dialect = if omp { Dialect::Omp } else { Dialect::Pi };
            let tmp = TempDir::new("sync-prop");
            let a = Machine::new(tmp.path(), "a", "p", "git@h:x/y.git")?;
            let b = Machine::new(tmp.path(), "b", "q/r", "https://h/x/y")?;
            let remote = SyncRemote::new(Arc::new(FileStorage::new()), "r", tmp.path().join("remote"));
            let mut base = Vec::new();
            let mut known = Vec::new();
            for i in 0..shared {
                let id = format!("{i:08x}");
                base.push(entry(&id, known.last().map(String::as_str), "shared"));
                known.push(id);
            }
            let (fa, fb) = (a.put(dialect, "s", &base)?, b.session(dialect, &name_of("s")));
            b.put(dialect, "o", &[])?;
            a.sync(&remote)?;
            b.sync(&remote)?;
            let mut known_b = known.clone();
            append(&fa, &grow('a', &a_picks, &mut known))?;
            append(&fb, &grow('b', &b_picks, &mut known_b))?;
            for m in [&a, &b, &a] {
                let r = m.sync(&remote)?;
                let c = r.counts();
                assert_eq!(c.conflicts + c.failed + c.skipped, 0, "{r:?}");
            }
            assert_eq!(fs_err::read(&fb)?, as_on(&fs_err::read(&fa)?, &a, &b));
            let got = ids(&fa, dialect)?;
            let unique: BTreeSet<&String> = got.iter().collect();
            assert_eq!(unique.len(), got.len(), "an entry twice: {got:?}");
            let want: BTreeSet<&String> = known.iter().chain(&known_b).collect();
            assert_eq!(unique, want);
            let mut seen = std::collections::HashSet::new();
            let bytes = fs_err::read(&fa)?;
            for r in &session::model::parse_session_bytes(&bytes, dialect).records[1..] {
                if let Some(p) = r.parent_id() {
                    assert!(seen.contains(p), "a child before its parent");
                }
                seen.insert(r.id().unwrap_or_default().to_owned());
            }
            let r = b.sync(&remote)?;
            assert_eq!(r.counts().unchanged, r.sessions.len(), "{r:?}");
            Ok(())
        };
        run().map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
}

/// omp's blobs a session names go up with it once, and come down to a machine that
/// lacks them when the session does.
#[test]
fn blobs_follow_their_sessions() -> Result<()> {
    let (tmp, a, remote_dir) = machine_a("sync-blobs")?;
    let b = Machine::new(tmp.path(), "b", "elsewhere", "git@github.com:me/proj.git")?;
    let remote = SyncRemote::new(Arc::new(FileStorage::new()), "r", &remote_dir);
    let blob = a.local.blobs.as_ref().ok_or("a blob store")?.put(b"an image", None)?;
    let line = entry("aaaaaaaa", None, &blob.to_string());
    a.put(Dialect::Omp, "s", &[line])?;
    b.put(Dialect::Omp, "o", &[])?;
    let r = a.sync(&remote)?;
    assert_eq!(r.blobs_uploaded, 1, "{r:?}");
    assert_eq!(fs_err::read(remote_dir.join("blobs").join(blob.hash()))?, b"an image");
    let r = b.sync(&remote)?;
    assert_eq!(r.blobs_downloaded, 1, "{r:?}");
    assert_eq!(b.local.blobs.as_ref().ok_or("a blob store")?.get(&blob)?.as_deref(), Some(&b"an image"[..]));
    let (ra, rb) = (a.sync(&remote)?, b.sync(&remote)?);
    assert_eq!((ra.blobs_uploaded, rb.blobs_downloaded), (0, 0), "{ra:?} {rb:?}");
    Ok(())
}

/// A sync that finds nothing changed reads no session: one listing with sizes of each
/// bucket here and of each project folder on the remote.
#[test]
fn an_unchanged_sync_reads_listings_only() -> Result<()> {
    let (_tmp, a, remote_dir) = machine_a("sync-cost")?;
    for i in 0..20 {
        let sid = format!("s{i}");
        let dialect = if i % 2 == 0 { Dialect::Pi } else { Dialect::Omp };
        settle(&a.put(dialect, &sid, &[entry("aaaaaaaa", None, "x")])?)?;
    }
    let plain = SyncRemote::new(Arc::new(FileStorage::new()), "r", &remote_dir);
    assert_eq!(a.sync(&plain)?.counts().pushed, 20);
    let (here, there) = (Arc::new(Racing::default()), Arc::new(Racing::default()));
    let local = SyncLocal::new(here.clone(), a.local.homes.clone(), a.local.state_dir.clone());
    let remote = SyncRemote::new(there.clone(), "r", &remote_dir);
    let r = sync(&local, &remote, &SyncOptions::default(), &mut |_| {})?;
    assert_eq!(r.counts().unchanged, 20, "{r:?}");
    assert_eq!((here.reads.load(Ordering::SeqCst), there.reads.load(Ordering::SeqCst)), (0, 0), "no session was read");
    assert_eq!(here.listings.load(Ordering::SeqCst), 2, "one bucket of each agent here");
    assert_eq!(there.listings.load(Ordering::SeqCst), 2, "one project folder of each agent there");
    // A session that grew here is read here, and only it; its remote copy, as the last
    // sync left it, gets the new line without the sync reading it (the storage's own
    // conditional append, below this count, may: a folder's rewrites the file).
    let s0 = a.session(Dialect::Pi, &name_of("s0"));
    append(&s0, &entry("bbbbbbbb", Some("aaaaaaaa"), "y"))?;
    let r = sync(&local, &remote, &SyncOptions::default(), &mut |_| {})?;
    assert_eq!((r.counts().unchanged, r.counts().pushed), (19, 1), "{r:?}");
    // Here: the session and its project's `.git/config` (for the project id it reports).
    assert_eq!((here.reads.load(Ordering::SeqCst), there.reads.load(Ordering::SeqCst)), (2, 0));
    let on_remote = remote_dir.join("pi/sessions").join(project_slug(ORIGIN_ID)).join(name_of("s0"));
    assert_eq!(fs_err::read(&on_remote)?, fs_err::read(&s0)?);
    // A session rewritten before its end here (it does not begin with the bytes synced
    // last) is read on both sides.
    let (x, y) = (entry("aaaaaaaa", None, "X"), entry("bbbbbbbb", Some("aaaaaaaa"), "y"));
    a.put(Dialect::Pi, "s0", &[x, y, entry("cccccccc", Some("bbbbbbbb"), "z")])?;
    let r = sync(&local, &remote, &SyncOptions::default(), &mut |_| {})?;
    assert!(matches!(outcome(&r, &name_of("s0"), Dialect::Pi), SyncOutcome::Pushed { .. }), "{r:?}");
    assert_eq!(there.reads.load(Ordering::SeqCst), 1, "the remote copy was read");
    assert_eq!(fs_err::read(&on_remote)?, fs_err::read(&s0)?);
    // A session that grew on both sides is read on both and merged.
    append(&s0, &entry("dddddddd", Some("cccccccc"), "here"))?;
    append(&on_remote, &entry("eeeeeeee", Some("cccccccc"), "there"))?;
    let r = sync(&local, &remote, &SyncOptions::default(), &mut |_| {})?;
    assert!(matches!(outcome(&r, &name_of("s0"), Dialect::Pi), SyncOutcome::Merged { .. }), "{r:?}");
    assert_eq!(fs_err::read(&on_remote)?, fs_err::read(&s0)?);
    Ok(())
}

/// Two copies with the same entries, one with other bytes (a rewrite on one machine),
/// end equal: the rewrite goes up when only its machine changed the session, and the
/// remote's copy wins when both did.
#[test]
fn a_rewrite_of_an_entry_converges() -> Result<()> {
    let tmp = TempDir::new("sync-tie");
    let a = Machine::new(tmp.path(), "a", "p", "git@h:x/y.git")?;
    let b = Machine::new(tmp.path(), "b", "q", "https://h/x/y")?;
    let remote = SyncRemote::new(Arc::new(FileStorage::new()), "r", tmp.path().join("remote"));
    let lines = |text: &str| [entry("aaaaaaaa", None, text), entry("bbbbbbbb", Some("aaaaaaaa"), "two")];
    let (fa, fb) = (a.put(Dialect::Pi, "s", &lines("one"))?, b.session(Dialect::Pi, &name_of("s")));
    b.put(Dialect::Pi, "o", &[])?;
    a.sync(&remote)?;
    b.sync(&remote)?;
    // Only A rewrites: A's bytes go everywhere.
    a.put(Dialect::Pi, "s", &lines("one, rewritten"))?;
    for m in [&a, &b, &a] {
        let r = m.sync(&remote)?;
        assert_eq!(r.counts().conflicts + r.counts().merged, 0, "{r:?}");
    }
    assert!(fs_err::read_to_string(&fb)?.contains("one, rewritten"));
    assert_eq!(fs_err::read(&fb)?, as_on(&fs_err::read(&fa)?, &a, &b));
    // Both rewrite: the first to sync decides.
    a.put(Dialect::Pi, "s", &lines("a's"))?;
    b.put(Dialect::Pi, "s", &lines("b's, longer"))?;
    for m in [&b, &a, &b, &a] {
        m.sync(&remote)?;
    }
    assert!(fs_err::read_to_string(&fa)?.contains("b's, longer"));
    assert_eq!(fs_err::read(&fb)?, as_on(&fs_err::read(&fa)?, &a, &b));
    Ok(())
}

/// Damaged input is an outcome naming the file, never a panic and never a write: a remote
/// copy with a line its loader skips, a sidecar that is not one, a file with no header.
#[test]
fn damaged_copies_are_named_and_left_alone() -> Result<()> {
    let tmp = TempDir::new("sync-damaged");
    let a = Machine::new(tmp.path(), "a", "p", "git@h:x/y.git")?;
    let remote_dir = tmp.path().join("remote");
    let remote = SyncRemote::new(Arc::new(FileStorage::new()), "r", &remote_dir);
    let fa = a.put(Dialect::Pi, "s", &[entry("aaaaaaaa", None, "x")])?;
    a.sync(&remote)?;
    let folder = remote_dir.join("pi/sessions").join(project_slug("h/x/y"));
    // Diverged, and the remote copy holds a damaged line.
    append(&folder.join(name_of("s")), "{\"type\":\"message\",\"id\":\"bbbbbbbb\"\n")?;
    append(&fa, &entry("cccccccc", Some("aaaaaaaa"), "y"))?;
    // A session only on the remote whose sidecar is damaged, and one without a header.
    fs_err::write(folder.join(name_of("t")), session_file(Dialect::Pi, "t", &a.project, &[]))?;
    fs_err::write(folder.join("2025-01-01T00-00-00-000Z_t.meta.json"), "[1]")?;
    fs_err::write(folder.join(name_of("u")), "not a session\n")?;
    fs_err::write(folder.join("2025-01-01T00-00-00-000Z_u.meta.json"), r#"{"project":"h/x/y","path":""}"#)?;
    let before = snapshot(tmp.path())?;
    let r = a.sync(&remote)?;
    match outcome(&r, &name_of("s"), Dialect::Pi) {
        SyncOutcome::Conflict { reason: session::sync::ConflictReason::Unsupported, detail, .. } => {
            assert!(detail.contains(&name_of("s")) && detail.contains("line 3"), "{detail}");
        }
        o => return Err(format!("{o:?}").into()),
    }
    match outcome(&r, &name_of("t"), Dialect::Pi) {
        SyncOutcome::Failed(e) => assert!(e.to_string().contains("_t.meta.json"), "{e}"),
        o => return Err(format!("{o:?}").into()),
    }
    assert!(matches!(outcome(&r, &name_of("u"), Dialect::Pi), SyncOutcome::Skipped { .. }), "{r:?}");
    let after = snapshot(tmp.path())?;
    let changed: Vec<_> = after.keys().filter(|p| before.get(*p) != after.get(*p)).collect();
    assert!(changed.iter().all(|p| p.starts_with(&a.local.state_dir)), "{changed:?}");
    Ok(())
}

/// A last line without its newline (an agent in the middle of an append) never leaves
/// the machine, and a copy holding one is not written to: its whole lines go up, and once
/// the line is finished it follows as a fast-forward.
#[test]
fn a_line_being_written_stays_here() -> Result<()> {
    let tmp = TempDir::new("sync-torn");
    let a = Machine::new(tmp.path(), "a", "work/proj", "git@github.com:me/proj.git")?;
    let remote_dir = tmp.path().join("remote");
    let remote = SyncRemote::new(Arc::new(FileStorage::new()), &remote_dir.to_string_lossy(), &remote_dir);
    let on_remote = remote_dir.join("pi/sessions").join(project_slug(ORIGIN_ID)).join(name_of("s"));
    let file = a.session(Dialect::Pi, &name_of("s"));
    let whole = session_file(Dialect::Pi, "s", &a.project, &[entry("aaaaaaaa", None, "one")]);
    let next = entry("bbbbbbbb", Some("aaaaaaaa"), "two");
    let (half, rest) = next.split_at(20);
    put(&file, format!("{whole}{half}"))?;
    let r = a.sync(&remote)?;
    assert!(matches!(outcome(&r, &name_of("s"), Dialect::Pi), SyncOutcome::Uploaded), "{r:?}");
    assert_eq!(fs_err::read_to_string(&on_remote)?, whole, "only whole lines go up");
    // The remote went on meanwhile (another machine continued it): A's copy is not written.
    append(&on_remote, &entry("cccccccc", Some("aaaaaaaa"), "elsewhere"))?;
    let before = fs_err::read(&file)?;
    let r = a.sync(&remote)?;
    assert!(matches!(outcome(&r, &name_of("s"), Dialect::Pi), SyncOutcome::Skipped { .. }), "{r:?}");
    assert_eq!(fs_err::read(&file)?, before, "a copy with a line being written is left alone");
    // The line finished: the two continuations are merged, each entry once.
    append(&file, rest)?;
    let r = a.sync(&remote)?;
    assert!(matches!(outcome(&r, &name_of("s"), Dialect::Pi), SyncOutcome::Merged { .. }), "{r:?}");
    let text = fs_err::read_to_string(&file)?;
    for id in ["aaaaaaaa", "bbbbbbbb", "cccccccc"] {
        assert_eq!(text.matches(&format!("\"id\":\"{id}\"")).count(), 1, "{text}");
    }
    assert_eq!(fs_err::read_to_string(&on_remote)?, text, "both sides hold the union");
    Ok(())
}

/// A change that keeps a file's size reaches the remote at the next sync: omp's title
/// slot rewritten in place (a rename), and one character of a pi message written as
/// another of the same length. The state notes times as well as sizes.
#[test]
fn a_change_that_keeps_the_size_is_synced() -> Result<()> {
    let (_tmp, a, remote_dir) = machine_a("sync-same-size")?;
    let remote = SyncRemote::new(Arc::new(FileStorage::new()), "r", &remote_dir);
    let storage = FileStorage::new();
    let files = [(Dialect::Pi, name_of("p")), (Dialect::Omp, name_of("o"))];
    for (dialect, sid) in [(Dialect::Pi, "p"), (Dialect::Omp, "o")] {
        a.put(dialect, sid, &[entry("aaaaaaaa", None, "hello")])?;
    }
    assert_eq!(a.sync(&remote)?.counts().pushed, 2);
    // The changes come in a later millisecond than the times the sync noted.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let pi = a.session(Dialect::Pi, &name_of("p"));
    let bytes = storage.read(&pi)?;
    let changed = String::from_utf8(bytes.clone())?.replacen("hello", "hallo", 1);
    storage.write_atomic(&pi, changed.as_bytes(), ExpectedSize::Bytes(bytes.len() as u64))?;
    let omp = a.session(Dialect::Omp, &name_of("o"));
    let slot = session::model::TitleSlot {
        title: "renamed".to_owned(),
        source: Some("user".to_owned()),
        updated_at: "2025-01-02T00:00:00.000Z".to_owned(),
    };
    let size = storage.stat(&omp)?.ok_or("the omp session")?.size;
    storage.overwrite_prefix(&omp, slot.to_line()?.as_bytes(), ExpectedSize::Bytes(size), Durability::None)?;
    assert_eq!(storage.stat(&omp)?.map(|s| s.size), Some(size), "a rename keeps the size");
    assert_eq!(storage.stat(&pi)?.map(|s| s.size), Some(bytes.len() as u64));

    let r = a.sync(&remote)?;
    for (dialect, name) in &files {
        assert!(matches!(outcome(&r, name, *dialect), SyncOutcome::Pushed { bytes: 0 }), "{r:?}");
        let sub = if *dialect == Dialect::Pi { "pi/sessions" } else { "sessions" };
        let on_remote = remote_dir.join(sub).join(project_slug(ORIGIN_ID)).join(name);
        assert_eq!(fs_err::read(&on_remote)?, fs_err::read(a.session(*dialect, name))?);
    }
    let text = |d, n: &str| fs_err::read_to_string(a.session(d, n));
    assert!(
        text(Dialect::Pi, &name_of("p"))?.contains("hallo") && text(Dialect::Omp, &name_of("o"))?.contains("renamed")
    );
    let r = a.sync(&remote)?;
    assert_eq!(r.counts().unchanged, 2, "{r:?}");
    Ok(())
}

/// A state file of version 1 (sizes, no times) loads: its sessions are read once, found
/// unchanged, and the state file written again with their times; the sync after that
/// reads none.
#[test]
fn a_version_1_state_file_is_read_once() -> Result<()> {
    let (_tmp, a, remote_dir) = machine_a("sync-state-v1")?;
    for (dialect, sid) in [(Dialect::Pi, "p"), (Dialect::Omp, "o")] {
        settle(&a.put(dialect, sid, &[entry("aaaaaaaa", None, "x")])?)?;
    }
    let plain = SyncRemote::new(Arc::new(FileStorage::new()), "r", &remote_dir);
    let state = a.sync(&plain)?.state_file.ok_or("a state file")?;
    // The same file as version 1 wrote it.
    let mut v: serde_json::Value = serde_json::from_slice(&fs_err::read(&state)?)?;
    assert_eq!(v["version"], 3, "{v}");
    v["version"] = 1.into();
    for (_, s) in v["sessions"].as_object_mut().ok_or("sessions")? {
        let s = s.as_object_mut().ok_or("a session")?;
        assert!(
            s.remove("localMtime").is_some_and(|t| t.is_i64()) && s.remove("remoteMtime").is_some_and(|t| t.is_i64())
        );
        assert!(s.remove("remoteVersion").is_some_and(|t| t.is_string()));
    }
    fs_err::write(&state, serde_json::to_vec_pretty(&v)?)?;

    let (here, there) = (Arc::new(Racing::default()), Arc::new(Racing::default()));
    let local = SyncLocal::new(here.clone(), a.local.homes.clone(), a.local.state_dir.clone());
    let remote = SyncRemote::new(there.clone(), "r", &remote_dir);
    let r = sync(&local, &remote, &SyncOptions::default(), &mut |_| {})?;
    assert_eq!(r.counts().unchanged, 2, "{r:?}");
    assert_eq!(there.reads.load(Ordering::SeqCst), 2, "each remote copy is read once");
    assert_eq!(r.state_file.as_ref(), Some(&state), "the state is written again");
    let v: serde_json::Value = serde_json::from_slice(&fs_err::read(&state)?)?;
    assert_eq!(v["version"], 3, "{v}");
    for (_, s) in v["sessions"].as_object().ok_or("sessions")? {
        assert!(s["localMtime"].is_i64() && s["remoteMtime"].is_i64(), "{v}");
    }
    let (reads_here, reads_there) = (here.reads.load(Ordering::SeqCst), there.reads.load(Ordering::SeqCst));
    let r = sync(&local, &remote, &SyncOptions::default(), &mut |_| {})?;
    assert_eq!(r.counts().unchanged, 2, "{r:?}");
    assert!(r.state_file.is_none(), "{r:?}");
    assert_eq!(
        (here.reads.load(Ordering::SeqCst), there.reads.load(Ordering::SeqCst)),
        (reads_here, reads_there),
        "no session is read again"
    );
    Ok(())
}

/// Waits up to ten seconds for `check` to hold.
fn eventually(what: &str, mut check: impl FnMut() -> Result<bool>) -> Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !check()? {
        if std::time::Instant::now() > deadline {
            return Err(format!("{what}: not within 10 s").into());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Ok(())
}

/// A sync of some sessions only states the remote copy the state file notes for each,
/// lists no remote folder, and reports no other session.
#[test]
fn a_sync_of_some_sessions_lists_no_remote_folder() -> Result<()> {
    let (_tmp, a, remote_dir) = machine_a("sync-only")?;
    for sid in ["s1", "s2"] {
        a.put(Dialect::Pi, sid, &[entry("aaaaaaaa", None, "x")])?;
    }
    a.sync(&SyncRemote::new(Arc::new(FileStorage::new()), "r", &remote_dir))?;
    let file = a.session(Dialect::Pi, &name_of("s1"));
    append(&file, &entry("bbbbbbbb", Some("aaaaaaaa"), "y"))?;
    append(&a.session(Dialect::Pi, &name_of("s2")), &entry("bbbbbbbb", Some("aaaaaaaa"), "y"))?;
    let there = Arc::new(Racing::default());
    let remote = SyncRemote::new(there.clone(), "r", &remote_dir);
    let r = sync(&a.local, &remote, &SyncOptions::default().only([file.clone()]), &mut |_| {})?;
    assert_eq!(r.sessions.len(), 1, "{r:?}");
    assert!(matches!(outcome(&r, &name_of("s1"), Dialect::Pi), SyncOutcome::Pushed { .. }), "{r:?}");
    assert_eq!(there.listings.load(Ordering::SeqCst), 0);
    let on_remote = remote_dir.join("pi/sessions").join(project_slug(ORIGIN_ID));
    assert_eq!(fs_err::read(on_remote.join(name_of("s1")))?, fs_err::read(&file)?);
    assert!(!fs_err::read_to_string(on_remote.join(name_of("s2")))?.contains("bbbbbbbb"), "s2 was left alone");
    // A session the state notes nothing for: its agent's remote folders are listed.
    let new = a.put(Dialect::Pi, "s3", &[])?;
    let r = sync(&a.local, &remote, &SyncOptions::default().only([new]), &mut |_| {})?;
    assert!(matches!(outcome(&r, &name_of("s3"), Dialect::Pi), SyncOutcome::Uploaded), "{r:?}");
    assert_eq!((r.sessions.len(), there.listings.load(Ordering::SeqCst)), (1, 1), "{r:?}");
    Ok(())
}

/// `watch` uploads what is here, pushes a line appended here (by a sync of that session
/// alone), brings down a line another machine appended to the remote (at the next sync
/// of every session), and returns when told to stop.
#[test]
fn watch_follows_appends_here_and_there() -> Result<()> {
    use session::sync::{WatchEvent, WatchOptions, watch};
    let (_tmp, a, remote_dir) = machine_a("sync-watch")?;
    let remote = SyncRemote::new(Arc::new(FileStorage::new()), "r", &remote_dir);
    let file = a.put(Dialect::Omp, "s", &[entry("aaaaaaaa", None, "x")])?;
    let on_remote = remote_dir.join("sessions").join(project_slug(ORIGIN_ID)).join(name_of("s"));
    let stop = AtomicBool::new(false);
    let pace = WatchOptions::default().pull_interval(std::time::Duration::from_secs(2));
    let (result, events) = std::thread::scope(|scope| -> Result<_> {
        let watcher = scope.spawn(|| {
            let mut events: Vec<(bool, bool)> = Vec::new();
            let r =
                watch(&a.local, &remote, &SyncOptions::default(), &pace, &|| stop.load(Ordering::SeqCst), &mut |e| {
                    match e {
                        WatchEvent::Synced { report, full } => events.push((*full, report.moved())),
                        e => panic!("{e:?}"),
                    }
                });
            (r, events)
        });
        let steps = || -> Result<()> {
            eventually("the upload", || Ok(on_remote.is_file()))?;
            FileStorage::new().append(&file, entry("bbbbbbbb", Some("aaaaaaaa"), "y").as_bytes())?;
            eventually("the appended line on the remote", || Ok(fs_err::read(&on_remote)? == fs_err::read(&file)?))?;
            append(&on_remote, &entry("cccccccc", Some("bbbbbbbb"), "from elsewhere"))?;
            eventually("the remote's line here", || Ok(fs_err::read_to_string(&file)?.contains("cccccccc")))
        };
        let checked = steps();
        stop.store(true, Ordering::SeqCst);
        let (result, events) = watcher.join().map_err(|_| "the watch panicked")?;
        checked?;
        Ok((result, events))
    })?;
    result?;
    assert_eq!(events.first(), Some(&(true, true)), "the first sync is of every session and uploads: {events:?}");
    assert!(events.contains(&(false, true)), "a sync of the changed session alone pushed: {events:?}");
    assert_eq!(ids(&file, Dialect::Omp)?, ["aaaaaaaa", "bbbbbbbb", "cccccccc"]);
    assert_eq!(fs_err::read(&on_remote)?, fs_err::read(&file)?);
    Ok(())
}
