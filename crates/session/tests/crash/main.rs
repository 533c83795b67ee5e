//! Crash test of the facade: a child process runs one operation through `SessionManager`
//! in a loop and prints what each call acknowledged; the parent kills it with SIGKILL at
//! random points and checks what it left:
//!
//! * `append` (pi and omp, `Durability::None` and `Fsync`; omp's images go to the blob
//!   store): the file opens, holds every acknowledged entry (an image with its blob), has
//!   at most one torn last line, and the acknowledged entries form one chain;
//! * `fork` (`fork_from`) and `extract` (`create_branched_session`): the source is intact,
//!   every acknowledged new file opens and holds the whole session or branch, and a new file
//!   being written when the writer died is whole or absent;
//! * `rename` (pi's `session_info`; omp's title slot written in place, and the full rewrite
//!   of a file without a slot): the session opens with the last acknowledged name or the
//!   one being set, and holds every acknowledged entry.
//!
//! After each check a fresh writer appends to every file: a lock file the dead writer left
//! must name the dead pid, be stolen, and be gone after that write. Temporary files of dead
//! writers are counted; the next writer must (unless `SESSION_CRASH_REQUIRE_TEMP_CLEANUP=0`)
//! have removed them. `SESSION_CRASH_KILLS` sets the number of kills per operation
//! (default 200).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use rand::Rng;
use serde_json::{Value, json};
use session::model::{DiagnosticKind, HeaderCheck, parse_session_bytes};
use session::store::{BlobStore, Durability, ExpectedSize};
use session::{Dialect, Env, SessionManager};
use session_testkit::{TempDir, crash};

const CHILD_ENV: &str = "SESSION_FACADE_CRASH_CHILD";
const MODE_ENV: &str = "SESSION_FACADE_CRASH_MODE";
const VARIANT_ENV: &str = "SESSION_FACADE_CRASH_VARIANT";

type Error = session_testkit::BoxError;
type Result<T, E = Error> = std::result::Result<T, E>;

/// The operations and the variants each kill cycles through.
const MODES: [(&str, &[&str]); 4] = [
    ("append", &["pi none", "pi fsync", "omp none", "omp fsync"]),
    ("fork", &["pi", "omp"]),
    ("extract", &["pi", "omp"]),
    ("rename", &["pi", "omp slot", "omp rewrite"]),
];

fn main() -> ExitCode {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        let mode = std::env::var(MODE_ENV).unwrap_or_default();
        let variant = std::env::var(VARIANT_ENV).unwrap_or_default();
        return match child(&mode, &variant, Path::new(&dir)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("crash writer failed: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let started = Instant::now();
    let mut failed = false;
    for (mode, variants) in MODES {
        let at = Instant::now();
        match parent(mode, variants) {
            Ok(s) => println!(
                "crash: {mode}: {} kills, {} acknowledged calls, none lost; dead writers left a lock file {} times \
                 (each stolen and gone after the next write; {} lock files of never-published files stay) \
                 and {} temporary files ({} still there after the next write); {:.1} s",
                s.kills,
                s.acked,
                s.locks,
                s.orphan_locks,
                s.temps,
                s.temps_after,
                at.elapsed().as_secs_f64()
            ),
            Err(e) => {
                eprintln!("crash test failed: {mode}: {e}");
                failed = true;
            }
        }
    }
    println!("crash: done in {:.1} s", started.elapsed().as_secs_f64());
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

fn dialect_of(variant: &str) -> Dialect {
    if variant.starts_with("omp") { Dialect::Omp } else { Dialect::Pi }
}

/// The environment of the writers (`durability`) and of the checks (none).
fn env(dir: &Path, durability: Durability) -> Env {
    Env::bare(std::sync::Arc::new(session::store::FileStorage::new()))
        .with_process_cwd(dir)
        .with_blobs(BlobStore::open(dir.join("blobs")))
        .with_durability(durability)
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text, "timestamp": 1})
}

fn assistant(text: &str) -> Value {
    json!({"role": "assistant", "content": [{"type": "text", "text": text}], "provider": "p", "model": "m", "timestamp": 2})
}

/// Base64 text of an image large enough for omp's blob store, different for each `i`.
fn image_data(i: u64) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let c = char::from(ALPHABET[(i % 64) as usize]);
    format!("{c}{c}{c}{c}").repeat(400)
}

/// Prints one acknowledgement line (tab-separated fields).
fn ack(fields: &[&str]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", fields.join("\t"))?;
    out.flush()?;
    Ok(())
}

/// A session with a label and a side branch; returns the manager and its main leaf.
fn branchy(dialect: Dialect, dir: &Path, env: Env) -> Result<(SessionManager, String)> {
    let mut m = SessionManager::create(dialect, "/work", dir, env)?;
    let u1 = m.append_message_json(user("first question"))?;
    let a1 = m.append_message_json(assistant("first answer"))?;
    m.append_label_change(&u1, Some("start"))?;
    m.append_message_json(user("second question"))?;
    let a2 = m.append_message_json(assistant("second answer"))?;
    m.branch(&a1)?;
    m.append_message_json(user("side question"))?;
    m.append_message_json(assistant("side answer"))?;
    Ok((m, a2.into()))
}

fn file_of(m: &SessionManager) -> Result<String> {
    Ok(m.session_file().ok_or("no file")?.to_string_lossy().into_owned())
}

/// Runs `mode` until killed, printing each acknowledgement.
fn child(mode: &str, variant: &str, dir: &Path) -> Result<()> {
    let dialect = dialect_of(variant);
    let durability = if variant.ends_with("fsync") { Durability::Fsync } else { Durability::None };
    let env = env(dir, durability);
    let sessions = dir.join("sessions");
    match mode {
        "append" => {
            let mut m = SessionManager::create(dialect, "/work", &sessions, env)?;
            ack(&["file", &file_of(&m)?])?;
            let first = m.append_message_json(user("start"))?;
            // omp writes nothing before the first assistant message.
            if dialect == Dialect::Pi {
                ack(&["entry", &first])?;
            }
            let answer = m.append_message_json(assistant("hello"))?;
            if dialect == Dialect::Omp {
                ack(&["entry", &first])?;
            }
            ack(&["entry", &answer])?;
            for i in 0u64.. {
                let (id, image) = match i % 4 {
                    0 if dialect == Dialect::Omp => {
                        let data = image_data(i);
                        let content = json!([{"type": "text", "text": "look"}, {"type": "image", "data": data, "mimeType": "image/png"}]);
                        (
                            m.append_message_json(json!({"role": "user", "content": content, "timestamp": 3}))?,
                            Some(data),
                        )
                    }
                    1 => (m.append_message_json(assistant(&"x".repeat(700)))?, None),
                    _ => (m.append_custom_entry("tick", Some(json!({ "i": i, "pad": "y".repeat(300) })))?, None),
                };
                match image {
                    Some(data) => ack(&["image", &id, &data])?,
                    None => ack(&["entry", &id])?,
                }
            }
        }
        "fork" => {
            let (m, _) = branchy(dialect, &sessions, env.clone())?;
            let source = file_of(&m)?;
            m.close()?;
            ack(&["source", &source])?;
            let forks = dir.join("forks");
            for _ in 0.. {
                let f = SessionManager::fork_from(dialect, Path::new(&source), "/work/fork", &forks, env.clone())?;
                ack(&["new", &file_of(&f)?])?;
            }
        }
        "extract" => {
            let (m, leaf) = branchy(dialect, &sessions, env.clone())?;
            let source = file_of(&m)?;
            m.close()?;
            ack(&["source", &source, &leaf])?;
            for _ in 0.. {
                let mut m = SessionManager::open(dialect, Path::new(&source), env.clone())?;
                let new = m.create_branched_session(&leaf)?.ok_or("no branch file")?;
                ack(&["new", &new.to_string_lossy()])?;
            }
        }
        "rename" if variant == "omp rewrite" => {
            // Each rename is the first of a file without a title slot: the full rewrite.
            let (m, _) = branchy(dialect, &sessions, env.clone())?;
            let template = fs_err::read(m.session_file().ok_or("no file")?)?;
            m.close()?;
            let cut = template.iter().position(|&b| b == b'\n').ok_or("no slot line")? + 1;
            for j in 0u64.. {
                let path = sessions.join(format!("rewrite-{j}.jsonl"));
                env.storage().write_atomic(&path, &template[cut..], ExpectedSize::Missing)?;
                ack(&["file", &path.to_string_lossy(), &j.to_string()])?;
                let mut m = SessionManager::open(dialect, &path, env.clone())?;
                let id = m.set_session_name(&name(j), Some("user"))?.ok_or("title refused")?;
                ack(&["name", &j.to_string(), &id])?;
            }
        }
        "rename" => {
            let (mut m, _) = branchy(dialect, &sessions, env)?;
            ack(&["file", &file_of(&m)?])?;
            for j in 0u64.. {
                let id = m.set_session_name(&name(j), Some("user"))?.ok_or("name refused")?;
                ack(&["name", &j.to_string(), &id])?;
            }
        }
        other => return Err(format!("unknown mode {other:?}").into()),
    }
    Ok(())
}

fn name(j: u64) -> String {
    format!("name {j}-{}", "n".repeat((j % 50) as usize))
}

/// What one operation's kills found.
#[derive(Default)]
struct Summary {
    kills: usize,
    acked: usize,
    locks: usize,
    temps: usize,
    temps_after: usize,
    orphan_locks: usize,
}

/// One killed writer: its acknowledgements (tab-separated fields) and its pid.
struct Killed {
    acks: Vec<Vec<String>>,
    pid: u32,
}

impl Killed {
    fn lines<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a [String]> + 'a {
        self.acks.iter().filter(move |a| a.first().is_some_and(|k| k == kind)).map(|a| &a[1..])
    }
}

fn kill_one(exe: &Path, mode: &str, variant: &str, dir: &Path, rng: &mut impl Rng) -> Result<Killed> {
    let wait_for = 1 + (rng.next_u32() % 10) as usize;
    let cmd = &mut Command::new(exe);
    let killed =
        crash::kill_writer(cmd.env(CHILD_ENV, dir).env(MODE_ENV, mode).env(VARIANT_ENV, variant), wait_for, rng)?;
    let acks = killed.acks.iter().map(|l| l.split('\t').map(str::to_owned).collect()).collect();
    Ok(Killed { acks, pid: killed.pid })
}

fn parent(mode: &str, variants: &[&str]) -> Result<Summary> {
    let base = TempDir::new("session-facade-crash");
    fs_err::create_dir_all(base.path())?;
    let exe = std::env::current_exe()?;
    let mut rng = rand::rng();
    let mut summary = Summary::default();
    let wanted = crash::kills()?;
    while summary.kills < wanted {
        let variant = variants[summary.kills % variants.len()];
        let dir = base.path().join(format!("k{}", summary.kills));
        fs_err::create_dir_all(&dir)?;
        let killed = kill_one(&exe, mode, variant, &dir, &mut rng)?;
        let n = summary.kills;
        check_kill(mode, variant, &dir, &killed, &mut summary)
            .map_err(|e| format!("after kill {n} ({variant}): {e}"))?;
        fs_err::remove_dir_all(&dir)?;
        summary.kills += 1;
    }
    if summary.acked < wanted {
        return Err(format!(
            "only {} acknowledged calls in {} runs: {mode} was not exercised",
            summary.acked, summary.kills
        )
        .into());
    }
    Ok(summary)
}

fn check_kill(mode: &str, variant: &str, dir: &Path, killed: &Killed, summary: &mut Summary) -> Result<()> {
    let dialect = dialect_of(variant);
    let env = env(dir, Durability::None);
    let acked = match mode {
        "append" => verify_append(dialect, killed, &env)?,
        "fork" | "extract" => verify_copies(mode, dialect, dir, killed, &env)?,
        _ => verify_rename(variant, dialect, killed, &env)?,
    };
    summary.acked += acked;
    next_writers(dialect, dir, killed, summary)
}

/// Parses and opens `path`: at most one torn last line, a valid header.
fn open_checked(dialect: Dialect, path: &Path, env: &Env) -> Result<SessionManager> {
    let bytes = fs_err::read(path)?;
    let parsed = parse_session_bytes(&bytes, dialect);
    let torn = parsed.diagnostics.iter().filter(|d| d.kind == DiagnosticKind::TornLastLine).count();
    let other: Vec<_> = parsed.diagnostics.iter().filter(|d| d.kind != DiagnosticKind::TornLastLine).collect();
    if torn > 1 || !other.is_empty() {
        return Err(format!("{}: unexpected damage: {:?}", path.display(), parsed.diagnostics).into());
    }
    if !matches!(parsed.header_check(dialect), HeaderCheck::Valid { .. }) {
        return Err(format!("{}: no valid header ({} bytes)", path.display(), bytes.len()).into());
    }
    let m = SessionManager::open(dialect, path, env.clone())
        .map_err(|e| format!("{}: does not open: {e}", path.display()))?;
    let diags = m.diagnostics().iter().filter(|d| d.kind != DiagnosticKind::TornLastLine).count();
    if diags > 0 {
        return Err(format!("{}: damage after open: {:?}", path.display(), m.diagnostics()).into());
    }
    Ok(m)
}

fn verify_append(dialect: Dialect, killed: &Killed, env: &Env) -> Result<usize> {
    let file = killed.lines("file").next().and_then(|f| f.first()).ok_or("the writer printed no file")?;
    let file = Path::new(file);
    let entries: Vec<&String> = killed.lines("entry").chain(killed.lines("image")).filter_map(|a| a.first()).collect();
    if entries.is_empty() {
        return Ok(0); // killed before the first write: nothing was promised
    }
    let m = open_checked(dialect, file, env)?;
    for id in &entries {
        if m.tree().get(id).is_none() {
            return Err(format!("acknowledged entry {id} is missing").into());
        }
    }
    for image in killed.lines("image") {
        let (Some(id), Some(data)) = (image.first(), image.get(1)) else { continue };
        let entry = m.tree().get(id).ok_or("image entry missing")?;
        if !entry.text().contains(data.as_str()) {
            return Err(format!("image entry {id} lost its blob").into());
        }
    }
    // The acknowledged entries form one chain from the root to the last of them.
    let last = killed.acks.iter().rev().find(|a| a[0] == "entry" || a[0] == "image").and_then(|a| a.get(1));
    let last = last.ok_or("no acknowledged entry")?;
    if m.tree().get_branch(Some(last)).len() != entries.len() {
        return Err("the acknowledged entries do not form one chain".into());
    }
    drop(m);
    if dialect == Dialect::Pi {
        // pi repaired a torn tail at open by ending its line: the fragment stays (as pi
        // leaves it) and is skipped as one malformed line; nothing else is wrong.
        let again = SessionManager::open(dialect, file, env.clone())?;
        let malformed =
            again.diagnostics().iter().filter(|d| matches!(d.kind, DiagnosticKind::Malformed { .. })).count();
        if malformed > 1 || again.diagnostics().len() > malformed {
            return Err(format!("damage after the repair: {:?}", again.diagnostics()).into());
        }
        if entries.iter().any(|id| again.tree().get(id).is_none()) {
            return Err("an acknowledged entry is missing after the repair".into());
        }
    }
    Ok(entries.len())
}

/// Returns the files directly in `dir` whose names `keep` accepts, sorted.
fn files_in(dir: &Path, keep: impl Fn(&str) -> bool) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    if !dir.exists() {
        return Ok(out);
    }
    for entry in fs_err::read_dir(dir)? {
        let path = entry?.path();
        if keep(path.file_name().and_then(|n| n.to_str()).unwrap_or_default()) {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Returns the session files (`*.jsonl`, not hidden) directly in `dir`.
fn sessions_in(dir: &Path) -> Result<Vec<PathBuf>> {
    files_in(dir, |name| name.ends_with(".jsonl") && !name.starts_with('.'))
}

fn verify_copies(mode: &str, dialect: Dialect, dir: &Path, killed: &Killed, env: &Env) -> Result<usize> {
    let Some(source) = killed.lines("source").next() else {
        return Ok(0); // killed while setting up
    };
    let src = Path::new(source.first().ok_or("no source path")?);
    let m = open_checked(dialect, src, env)?;
    // A fork copies every entry; a branch the main path (labels are re-created).
    let expected: Vec<String> = match mode {
        "fork" => m.tree().entries().iter().filter_map(|r| r.id().map(str::to_owned)).collect(),
        _ => {
            let leaf = source.get(1).ok_or("no leaf")?;
            m.tree()
                .get_branch(Some(leaf))
                .iter()
                .filter(|r| r.entry_type() != session::model::EntryType::Label)
                .filter_map(|r| r.id().map(str::to_owned))
                .collect()
        }
    };
    if expected.len() < 4 {
        return Err(format!("the source holds only {} entries", expected.len()).into());
    }
    drop(m);
    let acked: Vec<PathBuf> = killed.lines("new").filter_map(|a| a.first()).map(PathBuf::from).collect();
    let new_dir = if mode == "fork" { dir.join("forks") } else { dir.join("sessions") };
    for file in &acked {
        if !file.exists() {
            return Err(format!("acknowledged new file {} is missing", file.display()).into());
        }
    }
    // Every new file, acknowledged or being written at death, is whole.
    for file in sessions_in(&new_dir)?.into_iter().filter(|f| f != src) {
        let m = open_checked(dialect, &file, env)?;
        if let Some(missing) = expected.iter().find(|id| m.tree().get(id).is_none()) {
            return Err(format!("{}: entry {missing} is missing: the new file is not whole", file.display()).into());
        }
    }
    Ok(acked.len())
}

fn verify_rename(variant: &str, dialect: Dialect, killed: &Killed, env: &Env) -> Result<usize> {
    let names: Vec<(u64, String)> =
        killed.lines("name").filter_map(|a| Some((a.first()?.parse().ok()?, a.get(1)?.clone()))).collect();
    let files: Vec<(PathBuf, Option<u64>)> = killed
        .lines("file")
        .filter_map(|a| Some((PathBuf::from(a.first()?), a.get(1).and_then(|j| j.parse().ok()))))
        .collect();
    for (file, j) in &files {
        if !file.exists() {
            continue; // killed before the file was published: nothing was promised
        }
        // pi and the omp slot: one file renamed again and again; the omp rewrite: file `j` renamed once.
        let mine: Vec<&(u64, String)> = names.iter().filter(|(n, _)| j.is_none_or(|j| *n == j)).collect();
        let m = open_checked(dialect, file, env)?;
        for (_, id) in &mine {
            if m.tree().get(id).is_none() {
                return Err(format!("{}: acknowledged rename entry {id} is missing", file.display()).into());
            }
        }
        // The last acknowledged name, or the one being set when the writer died.
        let allowed: Vec<Option<String>> = match (mine.last(), j) {
            (Some((n, _)), None) => vec![Some(name(*n)), Some(name(n + 1))],
            (None, None) => vec![None, Some(name(0))],
            (Some((n, _)), Some(_)) => vec![Some(name(*n))],
            (None, Some(j)) => vec![None, Some(name(*j))],
        };
        if !allowed.contains(&m.session_name()) {
            return Err(format!(
                "{} ({variant}): name {:?}, expected one of {allowed:?}",
                file.display(),
                m.session_name()
            )
            .into());
        }
    }
    Ok(names.len())
}

/// Checks the dead writer's lock files, has a fresh writer append to every session file,
/// and checks that no lock file is left beside any of them.
fn next_writers(dialect: Dialect, dir: &Path, killed: &Killed, summary: &mut Summary) -> Result<()> {
    let env = env(dir, Durability::None);
    let mut files = Vec::new();
    for sub in ["sessions", "forks"] {
        files.extend(sessions_in(&dir.join(sub))?);
    }
    let dirs = [dir.join("sessions"), dir.join("forks"), dir.join("blobs")];
    let mut locked = false;
    for d in &dirs {
        for lock in hidden(d, ".lock")? {
            locked = true;
            let record = fs_err::read_to_string(&lock)?;
            let pid = record.split(':').next().and_then(|p| p.parse::<u32>().ok());
            if pid != Some(killed.pid) && !record.is_empty() {
                return Err(format!("{} names {record:?}, not the dead writer {}", lock.display(), killed.pid).into());
            }
        }
    }
    summary.locks += usize::from(locked);
    summary.temps += dirs.iter().map(|d| hidden(d, ".tmp").map(|t| t.len())).sum::<Result<usize>>()?;
    // A folder whose new session never appeared: its next writer is the next session
    // written there (nobody writes the lost file again).
    for sub in ["sessions", "forks"] {
        let folder = dir.join(sub);
        let has_session = files.iter().any(|f| f.parent() == Some(folder.as_path()));
        if folder.exists() && !has_session {
            let mut m = SessionManager::create(dialect, "/next-writer", &folder, env.clone())?;
            m.append_message_json(json!({"role": "user", "content": "next", "timestamp": 1}))?;
            m.append_message_json(
                json!({"role": "assistant", "content": [{"type": "text", "text": "ok"}], "timestamp": 2}),
            )?;
            m.close()?;
        }
    }
    // The blob store's folder: its next write is the next image a session stores.
    if dir.join("blobs").exists() {
        session::store::blob::BlobStore::open(dir.join("blobs")).put(b"the next writer's image", Some("image/png"))?;
    }
    for file in &files {
        let mut m = SessionManager::open(dialect, file, env.clone())
            .map_err(|e| format!("the next writer cannot open {}: {e}", file.display()))?;
        m.append_custom_entry("next-writer", None)
            .map_err(|e| format!("the next writer cannot append to {}: {e}", file.display()))?;
        m.close()?;
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if file.with_file_name(format!(".{name}.lock")).exists() {
            return Err(format!("{} is still locked after the next write", file.display()).into());
        }
    }
    let left: Vec<PathBuf> = dirs.iter().map(|d| hidden(d, ".tmp")).collect::<Result<Vec<_>>>()?.concat();
    summary.temps_after += left.len();
    // A lock file still there would belong to a file never published: the next write in
    // its folder must have removed it.
    let orphans: Vec<PathBuf> = dirs.iter().map(|d| hidden(d, ".lock")).collect::<Result<Vec<_>>>()?.concat();
    summary.orphan_locks += orphans.len();
    if !orphans.is_empty() {
        return Err(format!("lock files of the dead writer survive the next write: {orphans:?}").into());
    }
    if crash::require_temp_cleanup() && !left.is_empty() {
        return Err(format!("temporary files of the dead writer survive the next write: {left:?}").into());
    }
    Ok(())
}

/// Returns the hidden files in `dir` whose names end with `suffix`.
fn hidden(dir: &Path, suffix: &str) -> Result<Vec<PathBuf>> {
    files_in(dir, |name| name.starts_with('.') && name.ends_with(suffix))
}
