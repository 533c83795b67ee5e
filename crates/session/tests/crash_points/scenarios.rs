//! The explored operations. Each scenario sets its files up (nothing is armed yet), calls
//! `arm` where the explored operation begins, runs it step by step and records in
//! [`Promises`] what each step acknowledged. The first error stops it: after a crash that is
//! the death; before one it is a failure of the test.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use session::discovery::{AgentDirs, OmpHome, ProcessEnv};
use session::maintenance::{self, GcOptions, Homes, RewriteOptions, TransferOptions};
use session::store::blob::BlobStore;
use session::store::{Durability, ExpectedSize, Storage, StoreError};
use session::sync::{self, SyncLocal, SyncOptions, SyncOutcome, SyncRemote, SyncReport};
use session::{Dialect, SessionManager};

use crate::Result;
use crate::promise::{BlobPromise, JobPromise, NewFiles, Promises, RawPromise, Rerun, Snapshot};
use crate::rig::{Level, Rig, View, file_name, is_lock, is_temp};

/// One explored operation in one configuration.
pub(crate) struct Case {
    /// The operation (`append`, `fork`, ...): the unit of the report.
    pub(crate) op: &'static str,
    /// What distinguishes this case (`pi fsync`, `omp slot`).
    pub(crate) variant: String,
    pub(crate) level: Level,
    pub(crate) durability: Durability,
    pub(crate) run: Run,
    /// Whether the case is also explored with a transient fault at every boundary (the
    /// scenario then goes on after a failed step and records whether the session healed).
    pub(crate) transient: bool,
}

impl Case {
    pub(crate) fn name(&self) -> String {
        format!("{} {} [{}]", self.op, self.variant, self.level.name())
    }
}

/// A scenario: `(rig, promises, size, arm)`.
pub(crate) type Run = Box<dyn Fn(&Rig, &mut Promises, usize, &mut dyn FnMut()) -> Result<()> + Send + Sync>;

/// A scenario of either dialect: `(rig, promises, size, arm, dialect)`.
type DialectRun = fn(&Rig, &mut Promises, usize, &mut dyn FnMut(), Dialect) -> Result<()>;

/// Returns every case the explorer runs.
pub(crate) fn cases() -> Vec<Case> {
    const DURABILITIES: [Durability; 3] = [Durability::None, Durability::Flush, Durability::Fsync];
    let mut out = Vec::new();
    let mut add = |op, variant: String, level, durability, run: Run| {
        out.push(Case { op, variant, level, durability, run, transient: op == "append" });
    };
    let on = |run: DialectRun, dialect| -> Run { Box::new(move |r, p, s, a| run(r, p, s, a, dialect)) };
    for level in [Level::Memory, Level::Files] {
        // The files level explores the real write paths; one durability each keeps it short,
        // except for appends, whose sync boundaries differ.
        let durabilities: &[Durability] = match level {
            Level::Memory => &DURABILITIES,
            Level::Files => &[Durability::Fsync],
        };
        for &d in durabilities {
            let dn = durability_name(d);
            for dialect in [Dialect::Pi, Dialect::Omp] {
                let n = dialect.name();
                add("append", format!("{n} {dn}"), level, d, on(append, dialect));
                add("fork", format!("{n} {dn}"), level, d, on(fork, dialect));
                add("extract", format!("{n} {dn}"), level, d, on(extract, dialect));
                add("rewrite", format!("{n} migration {dn}"), level, d, on(migration, dialect));
            }
            add("rename", format!("pi {dn}"), level, d, Box::new(rename_pi));
            add("rename", format!("omp slot {dn}"), level, d, Box::new(|r, p, s, a| rename_omp(r, p, s, a, true)));
            add("rename", format!("omp rewrite {dn}"), level, d, Box::new(|r, p, s, a| rename_omp(r, p, s, a, false)));
            add("rewrite", format!("store {dn}"), level, d, Box::new(atomic_rewrite));
        }
        // The jobs, with the checks of every other case plus: the files no job may touch
        // keep their bytes, and a deleted session leaves no backup.
        let d = Durability::Fsync;
        for dialect in [Dialect::Pi, Dialect::Omp] {
            let n = dialect.name();
            add("job repair", n.into(), level, d, on(|r, p, s, a, dl| job_rewrite(r, p, s, a, dl, false), dialect));
            add("job migrate", n.into(), level, d, on(|r, p, s, a, dl| job_rewrite(r, p, s, a, dl, true), dialect));
            add("job move", n.into(), level, d, on(|r, p, s, a, dl| job_move(r, p, s, a, dl, false), dialect));
            if level == Level::Memory {
                let across = on(|r, p, s, a, dl| job_move(r, p, s, a, dl, true), dialect);
                add("job move", format!("{n} across file systems"), level, d, across);
            }
            add("job rm", n.into(), level, d, on(job_rm, dialect));
            add("job trash", n.into(), level, d, on(job_trash, dialect));
            add("job merge", n.into(), level, d, on(job_merge, dialect));
        }
        for dialect in [Dialect::Pi, Dialect::Omp] {
            add("job sync", dialect.name().into(), level, d, on(job_sync, dialect));
        }
        add("job gc", "omp".into(), level, d, Box::new(job_gc));
        add("job pull", "pi".into(), level, d, Box::new(job_pull));
        if level == Level::Files {
            for d in [Durability::None, Durability::Flush] {
                let dn = durability_name(d);
                for dialect in [Dialect::Pi, Dialect::Omp] {
                    add("append", format!("{} {dn}", dialect.name()), level, d, on(append, dialect));
                }
            }
            add("blob put", "store".into(), level, Durability::Fsync, Box::new(blob_put));
        }
    }
    out
}

pub(crate) fn durability_name(d: Durability) -> &'static str {
    match d {
        Durability::None => "none",
        Durability::Flush => "flush",
        Durability::Fsync => "fsync",
    }
}

/// Stops a scenario at an error: expected once the crash (or a transient fault) fired, a
/// failure before.
fn died(rig: &Rig, e: impl std::fmt::Display) -> Result<()> {
    match rig.faults.crashed().or_else(|| rig.faults.failed()) {
        Some(_) => Ok(()),
        None => Err(format!("error without a fault: {e}").into()),
    }
}

/// What became of one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// It returned success.
    Acked,
    /// It failed after a transient fault: the process lives on and the scenario goes on.
    Failed,
    /// It failed after the crash: the process is dead.
    Stopped,
}

/// Returns what an error of a step means (see [`Outcome`]).
fn outcome_of(rig: &Rig, e: impl std::fmt::Display) -> Result<Outcome> {
    if rig.faults.crashed().is_some() {
        return Ok(Outcome::Stopped);
    }
    if rig.faults.failed().is_some() {
        return Ok(Outcome::Failed);
    }
    Err(format!("error without a fault: {e}").into())
}

/// Runs a step; on an error the scenario stops (see [`died`]).
macro_rules! step {
    ($rig:expr, $e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return died($rig, e),
        }
    };
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text, "timestamp": 1})
}

fn assistant(text: &str) -> Value {
    json!({"role": "assistant", "content": [{"type": "text", "text": text}], "provider": "p", "model": "m", "timestamp": 2})
}

/// Base64 text of an image large enough to go to omp's blob store, different for each `i`.
fn image_data(i: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let c = char::from(ALPHABET[i % ALPHABET.len()]);
    let mut data = format!("{c}{c}{c}{c}");
    data = data.repeat(350 + i / ALPHABET.len());
    data
}

fn image_user(data: &str) -> Value {
    json!({"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image", "data": data, "mimeType": "image/png"}], "timestamp": 3})
}

fn ids_of(m: &SessionManager) -> Vec<String> {
    m.tree().entries().iter().filter_map(|r| r.id().map(str::to_owned)).collect()
}

fn file_of(m: &SessionManager) -> Result<PathBuf> {
    Ok(m.session_file().ok_or("the session has no file")?.to_path_buf())
}

/// Appends entry `i` of a varied sequence and records it. pi persists from its first user
/// message on, omp from its first assistant message.
fn append_one(rig: &Rig, m: &mut SessionManager, p: &mut Promises, s: usize, i: usize) -> Result<Outcome> {
    let dialect = m.dialect();
    let kind = i % 6;
    let result = match kind {
        0 => m.append_message_json(user(&format!("question {i}"))),
        1 => m.append_message_json(assistant(&format!("answer {i}"))),
        2 => m.append_custom_entry("tick", Some(json!({ "i": i, "pad": "y".repeat(200) }))),
        3 if dialect == Dialect::Omp => m.append_message_json(image_user(&image_data(i))),
        3 => m.append_thinking_level_change(Some("high"), None),
        4 => match m.tree().entries().first().and_then(|r| r.id()).map(str::to_owned) {
            Some(target) => m.append_label_change(&target, Some(&format!("label {i}"))),
            None => m.append_custom_entry("tick", None),
        },
        _ if dialect == Dialect::Omp => m.omp()?.append_model_change(&format!("p/m{i}"), None, false),
        _ => m.pi()?.append_model_change("p", &format!("m{i}")),
    };
    let id = match result {
        // omp's appends never throw: a failed write is latched instead.
        Ok(_) if let Some(e) = m.persistence_error() => return outcome_of(rig, e),
        Ok(id) => id,
        Err(e) => return outcome_of(rig, e),
    };
    let promise = &mut p.sessions[s];
    let persisted = match dialect {
        Dialect::Pi => !promise.acked.is_empty() || kind <= 1,
        Dialect::Omp => !promise.acked.is_empty() || kind == 1,
    };
    if persisted {
        promise.written(&id);
    } else {
        promise.held(&id);
    }
    if kind == 3 && dialect == Dialect::Omp {
        promise.texts.push((id.into(), image_data(i)));
    }
    Ok(Outcome::Acked)
}

/// Appends `n` entries (`first` is the index of the first in the sequence), flushing every
/// third one with [`Durability::Flush`], then [`close`]s the session unless the process
/// died. After a transient fault it goes on, and records in `p.stuck` when the session does
/// not heal: omp heals by its next full rewrite, pi only while its first write is not yet
/// done (later the append writer latches its first error, by design).
fn append_many(rig: &Rig, mut m: SessionManager, p: &mut Promises, s: usize, first: usize, n: usize) -> Result<()> {
    // Once a step failed: whether the session must heal, and the steps since.
    let mut must_heal = None;
    for i in first..first + n {
        let written_before = !p.sessions[s].acked.is_empty();
        let mut outcome = append_one(rig, &mut m, p, s, i)?;
        if outcome == Outcome::Acked && rig.durability == Durability::Flush && i % 3 == 2 {
            match m.flush() {
                Ok(()) => p.sessions[s].flushed(),
                Err(e) => outcome = outcome_of(rig, e)?,
            }
        }
        match outcome {
            Outcome::Stopped => return Ok(()),
            Outcome::Failed if must_heal.is_none() => {
                must_heal = Some(m.dialect() == Dialect::Omp || !written_before);
            }
            _ => {}
        }
    }
    if must_heal == Some(true) {
        // Assistant messages are written by both dialects' first-write rules: the session
        // has healed when one is.
        let mut healed = false;
        for probe in 0..2 {
            // omp's appends never throw: a failed write is latched instead.
            let probed = m.append_message_json(assistant(&format!("probe {probe}"))).and_then(|id| {
                match m.persistence_error() {
                    Some(e) => Err(session::SessionError::DiskFailure { path: PathBuf::new(), message: e.to_string() }),
                    None => Ok(id),
                }
            });
            match probed {
                Ok(id) => {
                    p.sessions[s].written(&id);
                    healed = true;
                }
                Err(e) => {
                    if outcome_of(rig, &e)? == Outcome::Stopped {
                        return Ok(());
                    }
                    if probe == 1 && !healed {
                        let failure = rig.faults.failed().map(|b| b.to_string()).unwrap_or_default();
                        p.stuck = Some(format!("the session is stuck: after one failed {failure}, appends fail: {e}"));
                    }
                }
            }
        }
    }
    close(rig, m, p, s)
}

/// Closes the session; with [`Durability::Flush`] that syncs it. After a transient fault the
/// close reports the latched error.
fn close(rig: &Rig, m: SessionManager, p: &mut Promises, s: usize) -> Result<()> {
    step!(rig, m.close());
    p.sessions[s].flushed();
    Ok(())
}

/// A new session from its first write on: `create`, then `size + 4` varied appends.
fn append(rig: &Rig, p: &mut Promises, size: usize, arm: &mut dyn FnMut(), dialect: Dialect) -> Result<()> {
    arm();
    let m = step!(rig, SessionManager::create(dialect, "/work", &rig.sessions(), rig.env()));
    let s = p.session(dialect, &file_of(&m)?, rig.durability);
    append_many(rig, m, p, s, 0, size + 4)
}

/// Writes a session with a label and a side branch, made durable by an atomic rewrite of
/// its own bytes; returns its file, the leaf of its main branch and that branch's entries
/// (labels left out).
fn branchy_session(rig: &Rig, dialect: Dialect) -> Result<(PathBuf, String, Vec<String>)> {
    let mut m = SessionManager::create(dialect, "/work", &rig.sessions(), rig.env())?;
    let u1 = m.append_message_json(user("first question"))?;
    let a1 = m.append_message_json(assistant("first answer"))?;
    m.append_label_change(&u1, Some("start"))?;
    let u2 = m.append_message_json(user("second question"))?;
    let a2 = m.append_message_json(assistant("second answer"))?;
    m.branch(&a1)?;
    m.append_message_json(user("side question"))?;
    m.append_message_json(assistant("side answer"))?;
    let file = file_of(&m)?;
    m.close()?;
    make_durable(rig, &file)?;
    Ok((file, a2.to_string(), vec![u1.into(), a1.into(), u2.into(), a2.into()]))
}

/// Rewrites a file atomically with its own bytes, so that a power loss keeps all of it.
fn make_durable(rig: &Rig, file: &Path) -> Result<()> {
    let bytes = rig.storage().read(file)?;
    rig.storage().write_atomic(file, &bytes, ExpectedSize::Bytes(bytes.len() as u64))?;
    Ok(())
}

/// Promises a set-up session: every entry acknowledged and durable.
fn promise_setup(rig: &Rig, p: &mut Promises, dialect: Dialect, file: &Path) -> Result<usize> {
    let m = SessionManager::open(dialect, file, rig.env())?;
    let s = p.session(dialect, file, rig.durability);
    let ids = ids_of(&m);
    p.sessions[s].all_written(ids.iter().map(String::as_str));
    p.sessions[s].durable = ids;
    Ok(s)
}

/// `fork_from` of a durable session, then `size` appends to the fork.
fn fork(rig: &Rig, p: &mut Promises, size: usize, arm: &mut dyn FnMut(), dialect: Dialect) -> Result<()> {
    let (src, _, _) = branchy_session(rig, dialect)?;
    let source = promise_setup(rig, p, dialect, &src)?;
    let ids = p.sessions[source].acked.clone();
    p.new_files.push(NewFiles { dialect, dir: rig.forks(), known: Vec::new(), ids });
    arm();
    let m = step!(rig, SessionManager::fork_from(dialect, &src, "/work/fork", &rig.forks(), rig.env()));
    let s = p.session(dialect, &file_of(&m)?, rig.durability);
    p.sessions[s].all_written(ids_of(&m).iter().map(String::as_str));
    append_many(rig, m, p, s, 0, size)
}

/// `create_branched_session` of the main branch of a durable session, then `size`
/// appends to the new session.
fn extract(rig: &Rig, p: &mut Promises, size: usize, arm: &mut dyn FnMut(), dialect: Dialect) -> Result<()> {
    let (src, leaf, branch) = branchy_session(rig, dialect)?;
    promise_setup(rig, p, dialect, &src)?;
    p.new_files.push(NewFiles { dialect, dir: rig.sessions(), known: vec![src.clone()], ids: branch });
    let mut m = SessionManager::open(dialect, &src, rig.env())?;
    arm();
    let new = step!(rig, m.create_branched_session(&leaf)).ok_or("no file for the branch")?;
    let s = p.session(dialect, &new, rig.durability);
    p.sessions[s].all_written(ids_of(&m).iter().map(String::as_str));
    append_many(rig, m, p, s, 0, size)
}

/// A version 1 file (no ids), as both references wrote it once.
fn v1_session(marker: &str) -> String {
    format!(
        "{}\n{}\n{}\n",
        r#"{"type":"session","id":"legacy","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/work"}"#,
        format_args!(
            r#"{{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{{"role":"user","content":"{marker} question","timestamp":1}}}}"#
        ),
        format_args!(
            r#"{{"type":"message","timestamp":"2025-01-01T00:00:02.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"{marker} answer"}}],"provider":"p","model":"m","timestamp":2}}}}"#
        ),
    )
}

/// The facade's atomic rewrites of a migrated file: pi rewrites it when it opens it, omp
/// on the next write; then `size` more appends.
fn migration(rig: &Rig, p: &mut Promises, size: usize, arm: &mut dyn FnMut(), dialect: Dialect) -> Result<()> {
    let file = rig.sessions().join("legacy.jsonl");
    rig.storage().write_atomic(&file, v1_session("legacy").as_bytes(), ExpectedSize::Missing)?;
    let s = p.session(dialect, &file, rig.durability);
    p.sessions[s].marks = vec!["legacy question".into(), "legacy answer".into()];
    let m = match dialect {
        Dialect::Pi => {
            arm();
            let m = step!(rig, SessionManager::open(dialect, &file, rig.env()));
            // pi rewrote the migrated file before `open` returned.
            p.sessions[s].all_written(ids_of(&m).iter().map(String::as_str));
            m
        }
        Dialect::Omp => {
            let mut m = SessionManager::open(dialect, &file, rig.env())?;
            arm();
            // omp's first write is the full rewrite: it carries the migrated entries.
            for id in &ids_of(&m) {
                p.sessions[s].held(id);
            }
            let id = step!(rig, m.append_custom_entry("after-migration", None));
            // omp's appends never throw: a failed write is latched instead.
            if let Some(e) = m.persistence_error() {
                return died(rig, e);
            }
            p.sessions[s].written(&id);
            m
        }
    };
    append_many(rig, m, p, s, 2, size + 1)
}

/// pi's rename: `size + 2` `session_info` appends.
fn rename_pi(rig: &Rig, p: &mut Promises, size: usize, arm: &mut dyn FnMut()) -> Result<()> {
    let (file, _, _) = branchy_session(rig, Dialect::Pi)?;
    renames(rig, p, size, arm, Dialect::Pi, &file)
}

/// omp's rename, `size + 2` times: a `title_change` append, then the title slot written
/// over the first line in place (`slot`), or, for a file without a slot, the first rename
/// rewrites the whole file (the later ones find the slot it wrote).
fn rename_omp(rig: &Rig, p: &mut Promises, size: usize, arm: &mut dyn FnMut(), slot: bool) -> Result<()> {
    let (file, _, _) = branchy_session(rig, Dialect::Omp)?;
    if !slot {
        let bytes = rig.storage().read(&file)?;
        let cut = bytes.iter().position(|&b| b == b'\n').ok_or("no slot line")? + 1;
        rig.storage().write_atomic(&file, &bytes[cut..], ExpectedSize::Bytes(bytes.len() as u64))?;
    }
    renames(rig, p, size, arm, Dialect::Omp, &file)
}

/// Renames the set-up session `file` `size + 2` times, promising each name, then closes it.
fn renames(rig: &Rig, p: &mut Promises, size: usize, arm: &mut dyn FnMut(), d: Dialect, file: &Path) -> Result<()> {
    let s = promise_setup(rig, p, d, file)?;
    p.sessions[s].names = vec![None];
    let mut m = SessionManager::open(d, file, rig.env())?;
    arm();
    for j in 0..size + 2 {
        let (name, source, refused) = match d {
            Dialect::Pi => (format!("name {j}"), None, "pi refused a name"),
            // Long enough that half a slot overwrite stops inside the title.
            Dialect::Omp => (format!("title {j} {}", "t".repeat(40 + j)), Some("user"), "omp refused a title"),
        };
        let before = p.sessions[s].names.first().cloned().flatten();
        p.sessions[s].names = vec![before, Some(name.clone())];
        let id = step!(rig, m.set_session_name(&name, source)).ok_or(refused)?;
        p.sessions[s].written(&id);
        p.sessions[s].names = vec![Some(name)];
    }
    close(rig, m, p, s)
}

/// A small session file's bytes, version `v` (one more entry per version).
fn raw_version(v: usize) -> Vec<u8> {
    let mut text = String::from(
        "{\"type\":\"session\",\"version\":3,\"id\":\"raw\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/work\"}\n",
    );
    for i in 0..=v {
        let parent = if i == 0 { "null".to_owned() } else { format!("\"e{}\"", i - 1) };
        text.push_str(&format!(
            "{{\"type\":\"custom\",\"customType\":\"v\",\"data\":{{\"version\":{v},\"pad\":\"{}\"}},\"id\":\"e{i}\",\"parentId\":{parent},\"timestamp\":\"2026-01-01T00:00:00.000Z\"}}\n",
            "z".repeat(64)
        ));
    }
    text.into_bytes()
}

/// The store's atomic replaces: `size + 2` versions over one file, alternately with
/// `write_atomic` and `write_atomic_stream` (in pieces), then a new file streamed with
/// [`Durability::None`].
fn atomic_rewrite(rig: &Rig, p: &mut Promises, size: usize, arm: &mut dyn FnMut()) -> Result<()> {
    let storage = rig.storage();
    let path = rig.sessions().join("raw.jsonl");
    storage.write_atomic(&path, &raw_version(0), ExpectedSize::Missing)?;
    p.raws.push(RawPromise { path: path.clone(), versions: vec![raw_version(0)], acked: Some(0), durable: Some(0) });
    let fresh = rig.sessions().join("fresh.jsonl");
    p.raws.push(RawPromise { path: fresh.clone(), versions: vec![raw_version(99)], acked: None, durable: None });
    arm();
    for v in 1..size + 3 {
        let (old, new) = (raw_version(v - 1), raw_version(v));
        p.raws[0].versions.push(new.clone());
        let expected = ExpectedSize::Bytes(old.len() as u64);
        if v % 2 == 1 {
            step!(rig, storage.write_atomic(&path, &new, expected));
        } else {
            step!(rig, stream(storage, &path, expected, Durability::Fsync, &new));
        }
        p.raws[0].acked = Some(v);
        p.raws[0].durable = Some(v);
    }
    step!(rig, stream(storage, &fresh, ExpectedSize::Missing, Durability::None, &raw_version(99)));
    p.raws[1].acked = Some(0);
    Ok(())
}

/// The canary: the same versions written with the truncate-and-write [`Storage::write`],
/// which is not atomic, yet promised like an atomic replace (durability is not promised).
/// The explorer must find the torn versions, or its checks are blind.
///
/// [`Storage::write`]: session::store::Storage::write
pub(crate) fn canary(rig: &Rig, p: &mut Promises, size: usize, arm: &mut dyn FnMut()) -> Result<()> {
    let storage = rig.storage();
    let path = rig.sessions().join("canary.jsonl");
    storage.write_atomic(&path, &raw_version(0), ExpectedSize::Missing)?;
    p.raws.push(RawPromise { path: path.clone(), versions: vec![raw_version(0)], acked: Some(0), durable: None });
    arm();
    for v in 1..size + 3 {
        p.raws[0].versions.push(raw_version(v));
        step!(rig, storage.write(&path, &raw_version(v)));
        p.raws[0].acked = Some(v);
    }
    Ok(())
}

/// `write_atomic_stream` of `bytes` in three pieces.
fn stream(
    storage: &dyn session::store::Storage,
    path: &Path,
    expected: ExpectedSize,
    durability: Durability,
    bytes: &[u8],
) -> std::result::Result<u64, StoreError> {
    let third = bytes.len() / 3;
    storage.write_atomic_stream(path, expected, durability, &mut |w| {
        w.write_all(&bytes[..third])?;
        w.write_all(&bytes[third..2 * third])?;
        w.write_all(&bytes[2 * third..])
    })
}

/// `size + 3` blob puts (every other one an image with a typed sidecar), then the first
/// again (already stored: no write).
fn blob_put(rig: &Rig, p: &mut Promises, size: usize, arm: &mut dyn FnMut()) -> Result<()> {
    let dir = rig.root.join("blobs");
    p.blobs.push(BlobPromise { dir: Some(dir), ..BlobPromise::default() });
    let blob = |j: usize| -> Vec<u8> { (0..2000 + j).map(|i| (i * 31 + j * 7) as u8).collect() };
    arm();
    for j in 0..size + 3 {
        let bytes = blob(j);
        let mime = (j % 2 == 0).then_some("image/png");
        p.blobs[0].attempted.push((bytes.clone(), mime.map(str::to_owned)));
        step!(rig, rig.blobs().put(&bytes, mime));
        p.blobs[0].acked.push(bytes);
    }
    step!(rig, rig.blobs().put(&blob(0), Some("image/png")));
    Ok(())
}

// ------------------------------------------------------------------ jobs

/// The home of a run's jobs (the agents' folders are below it).
fn home(rig: &Rig) -> PathBuf {
    rig.root.join("home")
}

/// The sessions root of `dialect` in the run's home.
fn sessions_root(rig: &Rig, dialect: Dialect) -> PathBuf {
    let agent = if dialect == Dialect::Omp { ".omp/agent" } else { ".pi/agent" };
    home(rig).join(agent).join("sessions")
}

/// The agents' folders of the run's home.
fn homes(rig: &Rig) -> Homes {
    Homes::from_env(&ProcessEnv::new(home(rig), &rig.root, "/nonexistent-tmp"))
}

/// omp's empty title slot line (nothing for pi): what a session file of `dialect` begins with.
fn title_slot(dialect: Dialect) -> Result<String> {
    if dialect != Dialect::Omp {
        return Ok(String::new());
    }
    let slot =
        session::model::TitleSlot { title: String::new(), source: None, updated_at: "2026-01-01T00:00:00.000Z".into() };
    Ok(slot.to_line()?)
}

/// A version 3 session of `n` exchanges (questions `"<marker> question <i>"`), with omp's
/// title slot, and a garbage line when `garbage`.
fn v3_session(dialect: Dialect, marker: &str, n: usize, garbage: bool) -> Result<(String, Vec<String>)> {
    let mut text = title_slot(dialect)?;
    text.push_str(r#"{"type":"session","version":3,"id":"01a2aaaa-0000-7000-8000-000000000001","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/work"}"#);
    text.push('\n');
    let mut marks = Vec::new();
    let mut parent = "null".to_owned();
    for i in 0..n {
        let mark = format!("{marker} question {i}");
        let id = format!("{i:08x}");
        text.push_str(&format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"{mark}","timestamp":1}}}}"#
        ));
        text.push('\n');
        parent = format!("\"{id}\"");
        marks.push(mark);
    }
    if garbage {
        text.push_str("garbage, not a record\n");
    }
    Ok((text, marks))
}

/// Takes the snapshot of every file of the run before its job begins; the job may change
/// only `allowed` (files, with their backups, and folders).
fn snapshot(rig: &Rig, p: &mut Promises, allowed: Vec<PathBuf>) -> Result<()> {
    let view = rig.live();
    let mut files = Vec::new();
    for f in view.files()? {
        files.push((f.clone(), view.storage.read(&f)?));
    }
    p.snapshot = Some(Snapshot { files, allowed, root: rig.root.clone() });
    Ok(())
}

/// Writes `bytes` at `path`, durably.
fn put(rig: &Rig, path: &Path, bytes: &[u8]) -> Result<()> {
    rig.storage().write_atomic(path, bytes, ExpectedSize::Missing)?;
    Ok(())
}

/// Files no job of the run may touch: a sibling session in the job's bucket, another
/// project's session, and outside the home a JSONL file that is no session with a folder
/// of its stem beside it.
fn bystanders(rig: &Rig, p: &mut Promises, dialect: Dialect) -> Result<()> {
    let (sibling, _) = v3_session(dialect, "sibling", 2, false)?;
    let files: Vec<(PathBuf, Vec<u8>)> = vec![
        (sessions_root(rig, dialect).join("--b--/sibling.jsonl"), sibling.clone().into_bytes()),
        (sessions_root(rig, dialect).join("--other--/o.jsonl"), sibling.into_bytes()),
        (rig.root.join("outside/export.jsonl"), b"{\"a\":1}\n".to_vec()),
        (rig.root.join("outside/export/keep.txt"), b"keep".to_vec()),
    ];
    for (path, bytes) in files {
        put(rig, &path, &bytes)?;
        p.untouched.push((path, bytes));
    }
    Ok(())
}

/// `repair` of a damaged session, or `migrate` of a version 1 one (`size` more lines).
fn job_rewrite(
    rig: &Rig,
    p: &mut Promises,
    size: usize,
    arm: &mut dyn FnMut(),
    dialect: Dialect,
    migrate: bool,
) -> Result<()> {
    let file = sessions_root(rig, dialect).join("--b--/s.jsonl");
    let (text, marks) = if migrate {
        let mut text = v1_session("legacy");
        for i in 0..size {
            text.push_str(&format!(
                r#"{{"type":"message","timestamp":"2025-01-01T00:00:03.000Z","message":{{"role":"user","content":"legacy more {i}","timestamp":3}}}}"#
            ));
            text.push('\n');
        }
        let prefix = match dialect {
            Dialect::Omp => {
                v3_session(Dialect::Omp, "", 0, false)?.0.lines().next().unwrap_or_default().to_owned() + "\n"
            }
            Dialect::Pi => String::new(),
        };
        (prefix + &text, vec!["legacy question".to_owned(), "legacy answer".to_owned()])
    } else {
        v3_session(dialect, "damaged", size + 2, true)?
    };
    put(rig, &file, text.as_bytes())?;
    bystanders(rig, p, dialect)?;
    p.jobs.push(JobPromise { dialect, paths: vec![file.clone()], may_vanish: false, marks, artifacts: Vec::new() });
    let env = rig.env();
    let options = RewriteOptions::default().dialect(Some(dialect));
    snapshot(rig, p, vec![file.clone()])?;
    arm();
    if migrate {
        step!(rig, maintenance::migrate(&env, &file, &options));
    } else {
        step!(rig, maintenance::repair(&env, &file, &options));
    }
    Ok(())
}

/// `move` of a damaged session with artifacts into another bucket (`across`: as onto
/// another file system, memory only).
fn job_move(
    rig: &Rig,
    p: &mut Promises,
    size: usize,
    arm: &mut dyn FnMut(),
    dialect: Dialect,
    across: bool,
) -> Result<()> {
    let root = sessions_root(rig, dialect);
    let file = root.join("--b--/s.jsonl");
    let (text, marks) = v3_session(dialect, "moving", size + 2, true)?;
    put(rig, &file, text.as_bytes())?;
    let mut artifacts = Vec::new();
    for i in 0..=size.min(3) {
        let rel = PathBuf::from(format!("sub{i}/out{i}.txt"));
        let bytes = format!("artifact {i}").into_bytes();
        put(rig, &root.join("--b--/s").join(&rel), &bytes)?;
        artifacts.push((rel, bytes));
    }
    bystanders(rig, p, dialect)?;
    let target = root.join("--new--");
    let paths = vec![file.clone(), target.join("s.jsonl")];
    p.jobs.push(JobPromise { dialect, paths, may_vanish: false, marks, artifacts });
    if across {
        rig.faults.cross_devices(true);
    }
    let env = rig.env();
    let allowed = vec![file.clone(), root.join("--b--/s"), target.join("s.jsonl"), target.join("s")];
    snapshot(rig, p, allowed)?;
    arm();
    step!(rig, maintenance::relocate(&env, &file, Some(dialect), "/new-cwd", Some(&target)));
    Ok(())
}

/// `rm` of a session with artifacts and `size + 1` backups.
fn job_rm(rig: &Rig, p: &mut Promises, size: usize, arm: &mut dyn FnMut(), dialect: Dialect) -> Result<()> {
    let root = sessions_root(rig, dialect);
    let file = root.join("--b--/s.jsonl");
    let (text, marks) = v3_session(dialect, "deleted", 2, false)?;
    put(rig, &file, text.as_bytes())?;
    put(rig, &root.join("--b--/s/out.txt"), b"artifact")?;
    put(rig, &root.join("--b--/s/deep/more.txt"), b"artifact")?;
    for i in 0..=size {
        put(rig, &root.join(format!("--b--/s.jsonl.{}.bak", 1_700_000_000_000u64 + i as u64)), text.as_bytes())?;
    }
    bystanders(rig, p, dialect)?;
    p.jobs.push(JobPromise { dialect, paths: vec![file.clone()], may_vanish: true, marks, artifacts: Vec::new() });
    let homes = homes(rig);
    snapshot(rig, p, vec![file.clone(), root.join("--b--/s")])?;
    arm();
    let plan = step!(rig, maintenance::plan_rm(rig.storage(), &homes, &file, Some(dialect), false));
    step!(rig, plan.execute(rig.storage()));
    Ok(())
}

/// `rm` to the trash of a session with artifacts and `size + 1` backups: the session is
/// whole in its bucket or in the trash, with its artifacts at one of the two; `rm` run
/// again finishes the move, and the trash then holds it whole, once.
fn job_trash(rig: &Rig, p: &mut Promises, size: usize, arm: &mut dyn FnMut(), dialect: Dialect) -> Result<()> {
    const NOW: i64 = 1_800_000_000_000;
    let root = sessions_root(rig, dialect);
    let file = root.join("--b--/s.jsonl");
    let (text, marks) = v3_session(dialect, "trashed", 2, false)?;
    put(rig, &file, text.as_bytes())?;
    let artifacts =
        vec![(PathBuf::from("out.txt"), b"artifact".to_vec()), (PathBuf::from("deep/more.txt"), b"more".to_vec())];
    for (rel, bytes) in &artifacts {
        put(rig, &root.join("--b--/s").join(rel), bytes)?;
    }
    for i in 0..=size {
        put(rig, &root.join(format!("--b--/s.jsonl.{}.bak", 1_700_000_000_000u64 + i as u64)), text.as_bytes())?;
    }
    bystanders(rig, p, dialect)?;
    let trash = root.parent().ok_or("an agent folder")?.join(maintenance::TRASH_DIR);
    let in_trash = trash.join(format!("{NOW}-s.jsonl/s.jsonl"));
    let paths = vec![file.clone(), in_trash.clone()];
    p.jobs.push(JobPromise { dialect, paths, may_vanish: false, marks, artifacts });
    let (home_dir, run_root) = (home(rig), rig.root.clone());
    let again = (file.clone(), in_trash);
    p.reruns.push(Rerun(Box::new(move |view| {
        let homes = Homes::from_env(&ProcessEnv::new(view.path(&home_dir), view.path(&run_root), "/nonexistent-tmp"));
        let (file, in_trash) = (view.path(&again.0), view.path(&again.1));
        if view.storage.exists(&file)? {
            let plan = maintenance::plan_rm(&*view.storage, &homes, &file, Some(dialect), false)?;
            plan.trash(&*view.storage, &homes, NOW + 1)?;
        }
        let items = maintenance::trash_list(&*view.storage, &homes)?;
        // The folder the cut-off move began, else (it died before making one) a new one.
        let began = items.first().is_some_and(|i| i.file() == in_trash || i.deleted_at_ms == NOW + 1);
        if view.storage.exists(&file)? || items.len() != 1 || !items[0].complete || !began {
            return Err(format!("after rm again: {items:?}").into());
        }
        Ok(())
    })));
    let homes = homes(rig);
    snapshot(rig, p, vec![file.clone(), root.join("--b--/s"), trash])?;
    arm();
    let plan = step!(rig, maintenance::plan_rm(rig.storage(), &homes, &file, Some(dialect), false));
    step!(rig, plan.trash(rig.storage(), &homes, NOW));
    Ok(())
}

/// `merge` of a copy that went on elsewhere (`size + 1` entries of its own, and an
/// artifact) into the session: the session is whole, before or after the merge, and the
/// other copy keeps its bytes.
fn job_merge(rig: &Rig, p: &mut Promises, size: usize, arm: &mut dyn FnMut(), dialect: Dialect) -> Result<()> {
    let root = sessions_root(rig, dialect);
    let file = root.join("--b--/s.jsonl");
    let copy = root.join("--b--/s.sync-conflict-1.jsonl");
    let (text, marks) = v3_session(dialect, "merged", 2, false)?;
    put(rig, &file, text.as_bytes())?;
    let mut other = text.clone();
    let mut parent = format!("{:08x}", 1);
    for i in 0..=size {
        let id = format!("c{i:07x}");
        other.push_str(&format!(
            r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"2026-01-01T00:00:02.000Z","message":{{"role":"user","content":"elsewhere {i}","timestamp":2}}}}"#
        ));
        other.push('\n');
        parent = id;
    }
    put(rig, &copy, other.as_bytes())?;
    put(rig, &root.join("--b--/s.sync-conflict-1/a.txt"), b"artifact")?;
    p.untouched.push((copy.clone(), other.into_bytes()));
    bystanders(rig, p, dialect)?;
    p.jobs.push(JobPromise { dialect, paths: vec![file.clone()], may_vanish: false, marks, artifacts: Vec::new() });
    snapshot(rig, p, vec![file.clone(), root.join("--b--/s")])?;
    arm();
    step!(rig, maintenance::merge(rig.storage(), &file, &copy, Some(dialect), &maintenance::MergeLeaf::Auto));
    Ok(())
}

/// `gc` of a store of `size + 2` blobs a session refers to and `size + 2` it does not.
fn job_gc(rig: &Rig, p: &mut Promises, size: usize, arm: &mut dyn FnMut()) -> Result<()> {
    let blobs = home(rig).join(".omp/agent/blobs");
    let mut refs = String::new();
    for i in 0..size + 2 {
        let used = format!("{:02x}", i % 128).repeat(32);
        put(rig, &blobs.join(&used), b"used")?;
        p.untouched.push((blobs.join(&used), b"used".to_vec()));
        refs.push_str(&format!(" blob:sha256:{used}"));
        let unused = format!("{:02x}", 128 + i % 128).repeat(32);
        put(rig, &blobs.join(&unused), b"unused")?;
    }
    let (text, _) = v3_session(Dialect::Omp, &refs, 1, false)?;
    let file = sessions_root(rig, Dialect::Omp).join("--b--/s.jsonl");
    put(rig, &file, text.as_bytes())?;
    p.untouched.push((file, text.into_bytes()));
    bystanders(rig, p, Dialect::Omp)?;
    let (homes, storage) = (homes(rig), rig.storage());
    let options = GcOptions::default().grace(std::time::Duration::ZERO).delete(true);
    snapshot(rig, p, vec![blobs.clone()])?;
    arm();
    let store = BlobStore::on(rig.storage_arc(), &blobs);
    step!(rig, maintenance::gc(&[storage], &homes, &store, &options, i64::MAX));
    Ok(())
}

/// `pull` of a session with `size + 1` artifacts from a server into a folder that
/// already holds another session.
fn job_pull(rig: &Rig, p: &mut Promises, size: usize, arm: &mut dyn FnMut()) -> Result<()> {
    let server = session::store::MemoryStorage::new();
    let (text, _) = v3_session(Dialect::Pi, "pulled", 3, false)?;
    let source = Path::new("/srv/p/s.jsonl");
    server.write_atomic(source, text.as_bytes(), ExpectedSize::Missing)?;
    for i in 0..=size {
        let artifact = Path::new("/srv/p/s").join(format!("d{i}/a{i}.txt"));
        server.write_atomic(&artifact, b"artifact", ExpectedSize::Missing)?;
    }
    let target = rig.root.join("pulled");
    let (other, _) = v3_session(Dialect::Pi, "other", 1, false)?;
    put(rig, &target.join("other.jsonl"), other.as_bytes())?;
    p.untouched.push((target.join("other.jsonl"), other.into_bytes()));
    let ids: Vec<String> = (0..3).map(|i| format!("{i:08x}")).collect();
    let known = vec![target.join("other.jsonl")];
    p.new_files.push(NewFiles { dialect: Dialect::Pi, dir: target.clone(), known, ids });
    let again = (server.clone(), target.clone());
    p.reruns.push(Rerun(Box::new(move |view| {
        let (server, target) = (&again.0, view.path(&again.1));
        let options = TransferOptions::default().force(true);
        maintenance::pull(server, Path::new("/srv/p/s.jsonl"), &*view.storage, &target, &options)?;
        Ok(())
    })));
    snapshot(rig, p, vec![target.join("s.jsonl"), target.join("s")])?;
    arm();
    step!(rig, maintenance::pull(&server, source, rig.storage(), &target, &TransferOptions::default()));
    Ok(())
}

// ------------------------------------------------------------------ sync

/// The machines A and B of a sync run (their homes below the run's root) and their remote.
fn sync_sides(storage: Arc<dyn Storage>, root: &Path) -> (SyncLocal, SyncLocal, SyncRemote) {
    let machine = |tag: &str| {
        let home = root.join(tag);
        let env = ProcessEnv::new(&home, root.join("project"), root.join("tmp"));
        let homes = vec![AgentDirs::pi(&env), AgentDirs::omp(&env, OmpHome::Omp)];
        SyncLocal::new(storage.clone(), homes, home.join(".state"))
    };
    (machine("a"), machine("b"), SyncRemote::new(storage.clone(), "crash-remote", root.join("remote")))
}

/// Syncs `local` with `remote` and fails on a session that failed or was skipped.
fn sync_all(local: &SyncLocal, remote: &SyncRemote) -> Result<SyncReport> {
    let report = sync::sync(local, remote, &SyncOptions::default(), &mut |_| {})?;
    for s in &report.sessions {
        if matches!(s.outcome, SyncOutcome::Failed(_) | SyncOutcome::Skipped { .. }) {
            return Err(format!("sync of {}: {:?}", s.name, s.outcome).into());
        }
    }
    Ok(report)
}

/// The start of a session file of the sync run: omp's title slot and the header (id
/// `sid`, `cwd`).
fn sync_header(dialect: Dialect, sid: &str, cwd: &Path) -> Result<String> {
    let mut text = title_slot(dialect)?;
    let mut cwd_json = String::new();
    session::model::json::write_js_str(&mut cwd_json, &cwd.to_string_lossy());
    text.push_str(&format!(
        r#"{{"type":"session","version":3,"id":"{sid}","timestamp":"2026-01-01T00:00:00.000Z","cwd":{cwd_json}}}"#
    ));
    text.push('\n');
    Ok(text)
}

/// `n` lines of `side` continuing from `parent`; returns them, their marks and the last id.
fn sync_lines(side: &str, session: &str, parent: Option<&str>, n: usize) -> (String, Vec<String>, Option<String>) {
    let (mut text, mut marks, mut parent) = (String::new(), Vec::new(), parent.map(str::to_owned));
    for i in 0..n {
        let id = format!("{side}{session}{i:04x}");
        let mark = format!("{side} {session} {i}");
        let parent_json = parent.as_ref().map_or("null".to_owned(), |p| format!("\"{p}\""));
        text.push_str(&format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent_json},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"{mark}","timestamp":1}}}}"#
        ));
        text.push('\n');
        marks.push(mark);
        parent = Some(id);
    }
    (text, marks, parent)
}

/// The file of the run whose name is `name` below `dir` (one).
fn find_below(view: &View, dir: &Path, name: &str) -> Result<PathBuf> {
    let found: Vec<PathBuf> =
        view.files()?.into_iter().filter(|f| f.starts_with(dir) && file_name(f) == Some(name)).collect();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(format!("{name} below {}: {found:?}", dir.display()).into()),
    }
}

/// The entry ids of a session file, each once, or an error naming a repeated one.
fn entry_ids(storage: &dyn Storage, path: &Path, dialect: Dialect) -> Result<BTreeSet<String>> {
    let bytes = storage.read(path)?;
    let parsed = session::model::parse_session_bytes(&bytes, dialect);
    if !parsed.diagnostics.is_empty() {
        return Err(format!("{}: {:?}", path.display(), parsed.diagnostics).into());
    }
    let mut ids = BTreeSet::new();
    for r in parsed.records.iter().filter(|r| !r.is_header()) {
        if let Some(id) = r.id()
            && !ids.insert(id.to_owned())
        {
            return Err(format!("{}: entry {id} is written twice", path.display()).into());
        }
    }
    Ok(ids)
}

/// The name of what a sync did to a session.
fn outcome_name(o: &SyncOutcome) -> &'static str {
    match o {
        SyncOutcome::Unchanged => "unchanged",
        SyncOutcome::Pushed { .. } => "pushed",
        SyncOutcome::Pulled { .. } => "pulled",
        SyncOutcome::Merged { .. } => "merged",
        SyncOutcome::Uploaded => "uploaded",
        SyncOutcome::Downloaded => "downloaded",
        _ => "other",
    }
}

/// `sync` of machine A with a remote machine B synced to, five sessions of `dialect` in
/// every state a sync meets: one both continued (`size + 1` entries each: a merge on both
/// sides), one each side went on with (a fast-forward each way), one here only (an
/// upload), one there only (a download). After a death every copy still holds every
/// entry it held; on files (where next writers run) A's sync run again, then B's, then
/// A's, leaves all three homes with the union, each entry once, and a last sync has
/// nothing to do. No blobs: their order (before the session that names them) is the
/// sync tests' (`crates/session/tests/it/sync.rs`).
fn job_sync(rig: &Rig, p: &mut Promises, size: usize, arm: &mut dyn FnMut(), dialect: Dialect) -> Result<()> {
    const NAMES: [&str; 5] = ["both", "here", "there", "new-here", "new-there"];
    let root = rig.root.clone();
    let project = root.join("project");
    let (a, b, remote) = sync_sides(rig.storage_arc(), &root);
    let bucket = |m: &SyncLocal| -> Result<PathBuf> {
        let home = m.homes.iter().find(|h| h.dialect == dialect).ok_or("a home of the dialect")?;
        Ok(home.default_session_dir(&project.to_string_lossy()))
    };
    let file_name_of = |i: usize| format!("2026-01-01T00-00-00-000Z_{:08x}-0000-7000-8000-{i:012x}.jsonl", 0x5a);
    // marks[i]: every text session i holds anywhere at the end.
    let mut marks: Vec<Vec<String>> = vec![Vec::new(); NAMES.len()];
    let mut lasts: Vec<Option<String>> = vec![None; NAMES.len()];
    let mut base: Vec<String> = vec![String::new(); NAMES.len()];
    for (i, name) in NAMES.iter().enumerate() {
        let sid = format!("{:08x}-0000-7000-8000-{i:012x}", 0x5a);
        let (lines, m, last) = sync_lines("base", &name.replace('-', ""), None, 2);
        base[i] = sync_header(dialect, &sid, &project)? + &lines;
        marks[i] = m;
        lasts[i] = last;
    }
    // Both machines start with the sessions they share; B also with its own.
    for i in [0, 1, 2] {
        put(rig, &bucket(&a)?.join(file_name_of(i)), base[i].as_bytes())?;
    }
    sync_all(&a, &remote)?;
    sync_all(&b, &remote)?;
    let went_on = |m: &SyncLocal, side: &str, i: usize, marks: &mut Vec<Vec<String>>| -> Result<Vec<String>> {
        let (lines, new, _) = sync_lines(side, &NAMES[i].replace('-', ""), lasts[i].as_deref(), size + 1);
        let path = bucket(m)?.join(file_name_of(i));
        let bytes = [rig.storage().read(&path)?, lines.into_bytes()].concat();
        rig.storage().write_atomic(&path, &bytes, ExpectedSize::Any)?;
        marks[i].extend(new.iter().cloned());
        Ok(new)
    };
    let a_both = went_on(&a, "a", 0, &mut marks)?;
    let b_both = went_on(&b, "b", 0, &mut marks)?;
    let a_here = went_on(&a, "a", 1, &mut marks)?;
    let b_there = went_on(&b, "b", 2, &mut marks)?;
    put(rig, &bucket(&a)?.join(file_name_of(3)), base[3].as_bytes())?;
    put(rig, &bucket(&b)?.join(file_name_of(4)), base[4].as_bytes())?;
    sync_all(&b, &remote)?;
    // Every byte set up is durable before the sync begins.
    for f in rig.live().files()? {
        if !is_temp(&f) && !is_lock(&f) {
            make_durable(rig, &f)?;
        }
    }
    let view = rig.live();
    let remote_dir = remote.sessions_dir(dialect);
    let a_dir = bucket(&a)?;
    let mut remote_files = Vec::new();
    for i in [0, 1, 2, 4] {
        remote_files.push(find_below(&view, &remote_dir, &file_name_of(i))?);
    }
    let remote_folder = remote_files[0].parent().ok_or("a remote project folder")?.to_path_buf();
    // What each copy holds before the sync, and keeps after a death.
    let base_marks = |i: usize| marks[i][..2].to_vec();
    let held = [
        (a_dir.join(file_name_of(0)), [base_marks(0), a_both].concat()),
        (remote_files[0].clone(), [base_marks(0), b_both].concat()),
        (a_dir.join(file_name_of(1)), [base_marks(1), a_here].concat()),
        (remote_files[1].clone(), base_marks(1)),
        (a_dir.join(file_name_of(2)), base_marks(2)),
        (remote_files[2].clone(), [base_marks(2), b_there].concat()),
        (a_dir.join(file_name_of(3)), base_marks(3)),
        (remote_files[3].clone(), base_marks(4)),
    ];
    for (path, m) in held {
        p.jobs.push(JobPromise { dialect, paths: vec![path], may_vanish: false, marks: m, artifacts: Vec::new() });
    }
    // The download and the upload: whole wherever they appear.
    let ids_of_base = |i: usize| (0..2).map(|k| format!("base{}{k:04x}", NAMES[i].replace('-', ""))).collect();
    let known = (0..4).map(|i| a_dir.join(file_name_of(i))).collect();
    p.new_files.push(NewFiles { dialect, dir: a_dir.clone(), known, ids: ids_of_base(4) });
    let (dir, known) = (remote_folder.clone(), remote_files.clone());
    p.new_files.push(NewFiles { dialect, dir, known, ids: ids_of_base(3) });
    // B's home is no part of A's sync.
    for f in view.files()? {
        if f.starts_with(root.join("b")) && !is_lock(&f) {
            p.untouched.push((f.clone(), view.storage.read(&f)?));
        }
    }
    let run_root = root.clone();
    let names: Vec<String> = (0..NAMES.len()).map(file_name_of).collect();
    p.reruns.push(Rerun(Box::new(move |view| {
        let root = view.path(&run_root);
        let (a, b, remote) = sync_sides(view.storage.clone(), &root);
        sync_all(&a, &remote)?;
        sync_all(&b, &remote)?;
        let last = sync_all(&a, &remote)?;
        if let Some(s) = last.sessions.iter().find(|s| !matches!(s.outcome, SyncOutcome::Unchanged)) {
            return Err(format!("a sync after both synced: {} {:?}", s.name, s.outcome).into());
        }
        for (i, name) in names.iter().enumerate() {
            let copies = [&root.join("a"), &root.join("b"), &remote.sessions_dir(dialect)]
                .map(|dir| find_below(view, dir, name));
            let mut sets = Vec::new();
            for copy in copies {
                let copy = copy?;
                let bytes = view.storage.read(&copy)?;
                let text = String::from_utf8_lossy(&bytes);
                if let Some(m) = marks[i].iter().find(|m| !text.contains(m.as_str())) {
                    return Err(format!("{}: {m:?} is lost", copy.display()).into());
                }
                sets.push((copy.clone(), entry_ids(&*view.storage, &copy, dialect)?));
            }
            if sets.iter().any(|(_, s)| *s != sets[0].1) {
                return Err(format!("the copies of {name} hold different entries: {sets:?}").into());
            }
        }
        Ok(())
    })));
    let state = root.join("a/.state");
    let mut allowed = vec![remote.prefix.clone(), state];
    allowed.extend(a.homes.iter().map(|h| h.sessions_root.clone()));
    snapshot(rig, p, allowed)?;
    arm();
    let report = step!(rig, sync::sync(&a, &remote, &SyncOptions::default(), &mut |_| {}));
    // A session's failure is the death's (the sync goes on with the next session), or a
    // failure of the test; a sync the death spared did each of the five things.
    let failed = report.sessions.iter().find(|s| matches!(s.outcome, SyncOutcome::Failed(_)));
    if let Some(s) = failed {
        return died(rig, format!("sync of {}: {:?}", s.name, s.outcome));
    }
    let outcomes: Vec<String> = (0..NAMES.len())
        .map(|i| {
            let name = file_name_of(i);
            let found = report.sessions.iter().find(|s| s.name == name);
            found.map_or_else(|| "missing".to_owned(), |s| outcome_name(&s.outcome).to_owned())
        })
        .collect();
    if outcomes != ["merged", "pushed", "pulled", "uploaded", "downloaded"] {
        return Err(format!("the sync did {outcomes:?}").into());
    }
    Ok(())
}
