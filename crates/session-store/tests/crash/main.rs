//! Crash test: a writer process killed with SIGKILL at random points never loses an
//! acknowledged line.
//!
//! The test binary re-executes itself as the writer (selected by an environment variable). The
//! writer appends a pi header and then ~1 KB message lines through a `Durability::Fsync` append
//! writer, printing each line's number once `append` returned. The parent kills it after a random
//! delay, reaps it, and checks the file: it parses, every acknowledged line is present in order,
//! and at most the last line is torn. The same file name is reused so every run also has to steal
//! the publish lock file the killed writer left behind.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use rand::Rng;
use session_model::{DiagnosticKind, Dialect, HeaderCheck, parse_session_bytes};
use session_store::{Durability, FileStorage, Storage};

const CHILD_ENV: &str = "SESSION_STORE_CRASH_CHILD";
const KILLS: usize = 200;
/// Upper bound for the whole run; the loop stops early only if it is exceeded after the minimum.
const BUDGET: Duration = Duration::from_secs(50);

type Error = Box<dyn std::error::Error>;

fn main() -> ExitCode {
    if let Some(path) = std::env::var_os(CHILD_ENV) {
        return match child(Path::new(&path)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("crash writer failed: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match parent() {
        Ok(kills) => {
            println!("crash: {kills} kills, no acknowledged line lost");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("crash test failed: {e}");
            ExitCode::FAILURE
        }
    }
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

fn child(path: &Path) -> Result<(), Error> {
    let storage = FileStorage::new();
    let mut writer = storage.open_writer(path, Durability::Fsync)?;
    let stdout = std::io::stdout();
    writer.append(HEADER.as_bytes())?;
    writeln!(stdout.lock(), "0")?;
    for n in 1.. {
        writer.append(line_for(n).as_bytes())?;
        writeln!(stdout.lock(), "{n}")?;
    }
    Ok(())
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs_err::remove_dir_all(&self.0);
    }
}

fn parent() -> Result<usize, Error> {
    let dir = TempDir(std::env::temp_dir().join(format!("session-store-crash-{:016x}", rand::rng().next_u64())));
    fs_err::create_dir_all(&dir.0)?;
    let path = dir.0.join("s.jsonl");
    let exe = std::env::current_exe()?;
    let mut rng = rand::rng();
    let started = Instant::now();
    let mut total_acked = 0;
    let mut kills = 0;
    while kills < KILLS {
        if started.elapsed() > BUDGET {
            return Err(format!("only {kills} kills within {BUDGET:?}").into());
        }
        match fs_err::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        let mut child =
            Command::new(&exe).env(CHILD_ENV, &path).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        let stdout = child.stdout.take().ok_or("child stdout")?;
        // Wait for a random number of acknowledgements (sometimes none), then a random extra delay.
        let wait_for = rng.next_u32() % 12;
        let mut reader = BufReader::new(stdout);
        let mut acked: Vec<u64> = Vec::new();
        let mut line = String::new();
        while acked.len() < wait_for as usize {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                break;
            }
            acked.push(line.trim().parse()?);
        }
        std::thread::sleep(Duration::from_micros(u64::from(rng.next_u32() % 3000)));
        child.kill()?;
        let status = child.wait()?;
        // Everything printed before death was acknowledged.
        let mut rest = String::new();
        reader.read_to_string(&mut rest)?;
        for l in rest.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
            acked.push(l.trim().parse()?);
        }
        if status.success() {
            let mut err = String::new();
            child.stderr.take().map(|mut e| e.read_to_string(&mut err));
            return Err(format!("writer exited on its own: {err}").into());
        }
        verify(&path, &acked).map_err(|e| format!("after kill {kills}: {e}"))?;
        total_acked += acked.len();
        kills += 1;
    }
    if total_acked < KILLS {
        return Err(format!(
            "writers acknowledged only {total_acked} lines in {kills} runs; the test did not exercise appends"
        )
        .into());
    }
    Ok(kills)
}

fn verify(path: &Path, acked: &[u64]) -> Result<(), Error> {
    let bytes = match fs_err::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    for (i, n) in acked.iter().enumerate() {
        if *n != i as u64 {
            return Err(format!("acknowledgements out of order: {acked:?}").into());
        }
    }
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
