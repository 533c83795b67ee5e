//! Crash test: writer processes killed with SIGKILL at random points never lose an
//! acknowledged write, in three operations:
//!
//! * `append`: a pi header, then ~1 KB message lines through a `Durability::Fsync` append
//!   writer. After each kill the file parses, every acknowledged line is present in order,
//!   and at most the last line is torn.
//! * `rewrite`: versions of a file replaced alternately with `write_atomic` and
//!   `write_atomic_stream` (size-checked). After each kill the file is the last
//!   acknowledged version or the next one, whole.
//! * `blob`: blobs stored in a `BlobStore` (every other one an image with a typed sidecar).
//!   After each kill every acknowledged blob is there, and every blob file is whole.
//!
//! The test binary re-executes itself as the writer (selected by an environment variable),
//! which prints what it wrote once the call returned; the parent kills it after a random
//! number of acknowledgements and a random delay. After each check a fresh writer writes
//! the file again: a lock file the dead writer left must name the dead pid, be stolen, and
//! be gone after that write. Temporary files of dead writers are counted and reported;
//! The next writer must have removed them (`SESSION_CRASH_REQUIRE_TEMP_CLEANUP=0` only counts them).
//!
//! `SESSION_CRASH_KILLS` sets the number of kills per operation (default 200).

use std::io::Write;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::Instant;

use rand::Rng;
use session_model::{DiagnosticKind, Dialect, HeaderCheck, parse_session_bytes};
use session_store::{BlobRef, BlobStore, Durability, ExpectedSize, FileStorage, Storage};
use session_testkit::{TempDir, crash};

const CHILD_ENV: &str = "SESSION_STORE_CRASH_CHILD";
const MODE_ENV: &str = "SESSION_STORE_CRASH_MODE";

type Error = session_testkit::BoxError;

/// The operations a writer runs until it is killed.
const MODES: [&str; 3] = ["append", "rewrite", "blob"];

fn main() -> ExitCode {
    if let Some(path) = std::env::var_os(CHILD_ENV) {
        let mode = std::env::var(MODE_ENV).unwrap_or_default();
        return match child(&mode, Path::new(&path)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("crash writer failed: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let started = Instant::now();
    let mut failed = false;
    for mode in MODES {
        let at = Instant::now();
        match parent(mode) {
            Ok(s) => println!(
                "crash: {mode}: {} kills, {} acknowledged writes, none lost; dead writers left a lock file {} times \
                 (each stolen and gone after the next write) and {} temporary files ({} still there after the next write); {:.1} s",
                s.kills,
                s.acked,
                s.locks,
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

fn id_of(n: u64) -> String {
    format!("{n:08x}")
}

fn line_for(n: u64) -> String {
    let parent = if n == 1 { "null".to_owned() } else { format!("\"{}\"", id_of(n - 1)) };
    let pad = "x".repeat(900);
    format!(
        "{{\"type\":\"message\",\"id\":\"{}\",\"parentId\":{parent},\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"{n} {pad}\",\"timestamp\":1}}}}\n",
        id_of(n)
    )
}

const HEADER: &str = "{\"type\":\"session\",\"version\":3,\"id\":\"crash\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/tmp\"}\n";

/// Version `v` of the rewritten file: the header and `v + 1` lines (about 1 KB each).
fn version(v: u64) -> Vec<u8> {
    let mut text = HEADER.to_owned();
    for n in 1..=v + 1 {
        text.push_str(&line_for(n));
    }
    text.into_bytes()
}

/// Blob `j`: 4-12 KB of bytes that differ for each `j`.
fn blob(j: u64) -> Vec<u8> {
    let len = 4096 + (j % 9) as usize * 1024;
    (0..len).map(|i| (i as u64).wrapping_mul(2654435761).wrapping_add(j * 97) as u8).collect()
}

fn blob_mime(j: u64) -> Option<&'static str> {
    j.is_multiple_of(2).then_some("image/png")
}

fn child(mode: &str, path: &Path) -> Result<(), Error> {
    let storage = FileStorage::new();
    let stdout = std::io::stdout();
    match mode {
        "append" => {
            let mut writer = storage.open_writer(path, Durability::Fsync)?;
            writer.append(HEADER.as_bytes())?;
            writeln!(stdout.lock(), "0")?;
            for n in 1.. {
                writer.append(line_for(n).as_bytes())?;
                writeln!(stdout.lock(), "{n}")?;
            }
        }
        "rewrite" => {
            storage.write_atomic(path, &version(0), ExpectedSize::Missing)?;
            writeln!(stdout.lock(), "0")?;
            for v in 1.. {
                let (old, new) = (version(v - 1), version(v));
                let expected = ExpectedSize::Bytes(old.len() as u64);
                if v % 2 == 1 {
                    storage.write_atomic(path, &new, expected)?;
                } else {
                    storage.write_atomic_stream(path, expected, Durability::Fsync, &mut |w| {
                        for piece in new.chunks(700) {
                            w.write_all(piece)?;
                        }
                        Ok(())
                    })?;
                }
                writeln!(stdout.lock(), "{v}")?;
            }
        }
        "blob" => {
            let store = BlobStore::open(path);
            for j in 0.. {
                store.put(&blob(j), blob_mime(j))?;
                writeln!(stdout.lock(), "{j}")?;
            }
        }
        other => return Err(format!("unknown mode {other:?}").into()),
    }
    Ok(())
}

/// What one operation's kills found.
#[derive(Default)]
struct Summary {
    kills: usize,
    acked: usize,
    /// Kills after which a lock file of the dead writer was there.
    locks: usize,
    /// Temporary files the dead writers left, and how many were still there after the next write.
    temps: usize,
    temps_after: usize,
}

/// One killed writer: what it acknowledged and its (now dead) pid.
struct Killed {
    acked: Vec<u64>,
    pid: u32,
}

/// Starts a writer in `mode` on `path`, waits for a random number of acknowledgements
/// (sometimes none) and a random delay, kills it and returns everything it acknowledged.
fn kill_one(exe: &Path, mode: &str, path: &Path, rng: &mut impl Rng) -> Result<Killed, Error> {
    let wait_for = (rng.next_u32() % 12) as usize;
    let killed = crash::kill_writer(Command::new(exe).env(CHILD_ENV, path).env(MODE_ENV, mode), wait_for, rng)?;
    let acked = killed.acks.iter().map(|l| l.trim().parse()).collect::<Result<Vec<u64>, _>>()?;
    for (i, n) in acked.iter().enumerate() {
        if *n != i as u64 {
            return Err(format!("acknowledgements out of order: {acked:?}").into());
        }
    }
    Ok(Killed { acked, pid: killed.pid })
}

fn parent(mode: &str) -> Result<Summary, Error> {
    let dir = TempDir::new("session-store-crash");
    fs_err::create_dir_all(dir.path())?;
    let path = dir.path().join(if mode == "blob" { "blobs" } else { "s.jsonl" });
    let exe = std::env::current_exe()?;
    let mut rng = rand::rng();
    let mut summary = Summary::default();
    let wanted = crash::kills()?;
    while summary.kills < wanted {
        // Each writer starts afresh (the same name: the next writer steals what the last left).
        match mode {
            "blob" => remove_dir(&path)?,
            _ => remove_file(&path)?,
        }
        let killed = kill_one(&exe, mode, &path, &mut rng)?;
        let n = summary.kills;
        check_kill(mode, &path, &killed, &mut summary).map_err(|e| format!("after kill {n}: {e}"))?;
        summary.acked += killed.acked.len();
        summary.kills += 1;
    }
    if summary.acked < wanted {
        return Err(format!(
            "writers acknowledged only {} writes in {} runs; the test did not exercise {mode}",
            summary.acked, summary.kills
        )
        .into());
    }
    Ok(summary)
}

/// Checks what a killed writer left and has the next writer write.
fn check_kill(mode: &str, path: &Path, killed: &Killed, summary: &mut Summary) -> Result<(), Error> {
    match mode {
        "append" => verify_append(path, &killed.acked)?,
        "rewrite" => verify_rewrite(path, &killed.acked)?,
        _ => verify_blobs(path, &killed.acked)?,
    }
    next_writer(mode, path, killed, summary)
}

fn remove_file(path: &Path) -> Result<(), Error> {
    match fs_err::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn remove_dir(path: &Path) -> Result<(), Error> {
    match fs_err::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Returns the names of the temporary files in `dir`.
fn temps_in(dir: &Path) -> Result<Vec<String>, Error> {
    let mut out = Vec::new();
    if !dir.exists() {
        return Ok(out);
    }
    for entry in fs_err::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && name.ends_with(".tmp") {
            out.push(name);
        }
    }
    Ok(out)
}

/// Checks what the dead writer left beside the file, has a fresh writer write it, and
/// checks that the lock is gone afterwards.
fn next_writer(mode: &str, path: &Path, killed: &Killed, summary: &mut Summary) -> Result<(), Error> {
    let dir = match mode {
        "blob" => path.to_path_buf(),
        _ => path.parent().ok_or("no parent")?.to_path_buf(),
    };
    let lock = path.with_file_name(format!(".{}.lock", path.file_name().and_then(|n| n.to_str()).unwrap_or("")));
    if mode != "blob" && lock.exists() {
        summary.locks += 1;
        let record = fs_err::read_to_string(&lock)?;
        let pid = record.split(':').next().and_then(|p| p.parse::<u32>().ok());
        if pid != Some(killed.pid) && !record.is_empty() {
            return Err(format!("the lock file names {record:?}, not the dead writer {}", killed.pid).into());
        }
    }
    summary.temps += temps_in(&dir)?.len();
    let storage = FileStorage::new();
    match mode {
        "append" => {
            let mut w = storage.open_writer(path, Durability::Fsync)?;
            w.append(line_for(999_999).as_bytes())?;
            w.close()?;
        }
        "rewrite" => {
            let size = storage.stat(path)?.map_or(ExpectedSize::Missing, |s| ExpectedSize::Bytes(s.size));
            storage.write_atomic(path, &version(0), size)?;
        }
        _ => {
            BlobStore::open(path).put(&blob(0), blob_mime(0))?;
        }
    }
    if lock.exists() {
        return Err(format!("{} is left after the next write", lock.display()).into());
    }
    let left = temps_in(&dir)?;
    summary.temps_after += left.len();
    if crash::require_temp_cleanup() && !left.is_empty() {
        return Err(format!("temporary files of the dead writer survive the next write: {left:?}").into());
    }
    // Counted: out of the way, so that each kill's are counted once.
    for name in left {
        fs_err::remove_file(dir.join(name))?;
    }
    Ok(())
}

fn verify_append(path: &Path, acked: &[u64]) -> Result<(), Error> {
    let bytes = match fs_err::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let parsed = parse_session_bytes(&bytes, Dialect::Pi);
    let torn = parsed.diagnostics.iter().filter(|d| d.kind == DiagnosticKind::TornLastLine).count();
    let other: Vec<_> = parsed.diagnostics.iter().filter(|d| d.kind != DiagnosticKind::TornLastLine).collect();
    if torn > 1 || !other.is_empty() || parsed.malformed > torn {
        return Err(format!("unexpected damage: {:?}", parsed.diagnostics).into());
    }
    if acked.is_empty() {
        return Ok(());
    }
    if !matches!(parsed.header_check(Dialect::Pi), HeaderCheck::Valid { .. }) {
        return Err("acknowledged header missing".into());
    }
    let ids: Vec<&str> = parsed.records.iter().skip(1).filter_map(|r| r.id()).collect();
    let last_acked = acked.len() - 1;
    if ids.len() < last_acked || ids.len() > last_acked + 1 {
        return Err(format!("{} entries on disk for {last_acked} acknowledged", ids.len()).into());
    }
    for (i, id) in ids.iter().enumerate() {
        if *id != id_of(i as u64 + 1) {
            return Err(format!("entry {i} has id {id}").into());
        }
    }
    Ok(())
}

fn verify_rewrite(path: &Path, acked: &[u64]) -> Result<(), Error> {
    let bytes = match fs_err::read(path) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e.into()),
    };
    // The last acknowledged version or the one being written, whole.
    let candidates: Vec<u64> = match acked.last() {
        Some(&v) => vec![v, v + 1],
        None => vec![0],
    };
    let Some(bytes) = bytes else {
        if acked.is_empty() {
            return Ok(());
        }
        return Err(format!("the file is missing after version {acked:?} was acknowledged").into());
    };
    let Some(v) = candidates.iter().find(|&&v| version(v) == bytes) else {
        return Err(format!("the file ({} bytes) is no whole version of {candidates:?}", bytes.len()).into());
    };
    let parsed = parse_session_bytes(&bytes, Dialect::Pi);
    if !parsed.diagnostics.is_empty() || parsed.records.len() as u64 != v + 2 {
        return Err(format!("version {v} does not parse whole: {:?}", parsed.diagnostics).into());
    }
    Ok(())
}

fn verify_blobs(dir: &Path, acked: &[u64]) -> Result<(), Error> {
    let store = BlobStore::open(dir);
    for &j in acked {
        let bytes = blob(j);
        if store.get(&BlobRef::for_bytes(&bytes))?.as_deref() != Some(bytes.as_slice()) {
            return Err(format!("acknowledged blob {j} is missing or not whole").into());
        }
    }
    if !dir.exists() {
        return Ok(());
    }
    for entry in fs_err::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let hash = name.split('.').next().unwrap_or_default();
        let bytes = fs_err::read(entry.path())?;
        if BlobRef::for_bytes(&bytes).hash() != hash {
            return Err(format!("blob file {name} is not whole ({} bytes)", bytes.len()).into());
        }
    }
    Ok(())
}
