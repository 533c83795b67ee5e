//! Crash test of the facade: a child process appends through `SessionManager` in a
//! loop and prints the id of each acknowledged entry; the parent kills it with SIGKILL
//! at random points (at least 200 times, in both durability modes) and checks that the
//! file still opens, holds every acknowledged entry, and has at most one torn last line.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::json;
use session::model::DiagnosticKind;
use session::store::Durability;
use session::{Dialect, Env, SessionManager};

const CHILD_ENV: &str = "SESSION_FACADE_CRASH_CHILD";
const KILLS: usize = 200;
const BUDGET: Duration = Duration::from_secs(90);

type Error = Box<dyn std::error::Error>;

fn main() -> ExitCode {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        let fsync = std::env::var_os("SESSION_FACADE_CRASH_FSYNC").is_some();
        return match child(Path::new(&dir), fsync) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("crash writer failed: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match parent() {
        Ok((kills, acked)) => {
            println!("crash: {kills} kills, {acked} acknowledged entries, none lost");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("crash test failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Appends forever, printing `<file>` once and then each acknowledged id.
fn child(dir: &Path, fsync: bool) -> Result<(), Error> {
    let env = Env { process_cwd: dir.to_path_buf(), ..Env::files() }.with_durability(if fsync {
        Durability::Fsync
    } else {
        Durability::None
    });
    let mut m = SessionManager::create(Dialect::Pi, "/tmp", dir, env)?;
    let file = m.session_file().ok_or("no file")?.to_path_buf();
    println!("{}", file.display());
    let first = m.append_message(json!({"role": "user", "content": "start", "timestamp": 1}))?;
    println!("{first}");
    for i in 0u64.. {
        let id = if i % 3 == 0 {
            m.append_message(json!({"role": "assistant", "content": [{"type": "text", "text": "x".repeat(700)}],
                                    "provider": "p", "model": "m", "timestamp": i}))?
        } else {
            m.append_custom_entry("tick", Some(json!({ "i": i, "pad": "y".repeat(300) })))?
        };
        println!("{id}");
    }
    Ok(())
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs_err::remove_dir_all(&self.0);
    }
}

fn parent() -> Result<(usize, usize), Error> {
    let dir = TempDir(std::env::temp_dir().join(format!("session-facade-crash-{:016x}", rand::rng().next_u64())));
    fs_err::create_dir_all(&dir.0)?;
    let exe = std::env::current_exe()?;
    let mut rng = rand::rng();
    let started = Instant::now();
    let (mut kills, mut total) = (0, 0);
    while kills < KILLS {
        if started.elapsed() > BUDGET {
            return Err(format!("only {kills} kills within {BUDGET:?}").into());
        }
        let mut cmd = Command::new(&exe);
        cmd.env(CHILD_ENV, &dir.0).stdout(Stdio::piped()).stderr(Stdio::piped());
        if kills % 2 == 1 {
            cmd.env("SESSION_FACADE_CRASH_FSYNC", "1");
        }
        let mut child = cmd.spawn()?;
        let mut reader = BufReader::new(child.stdout.take().ok_or("child stdout")?);
        let mut file = String::new();
        reader.read_line(&mut file)?;
        let file = PathBuf::from(file.trim());
        let wait_for = rng.next_u32() % 10;
        let mut acked: Vec<String> = Vec::new();
        let mut line = String::new();
        while acked.len() < wait_for as usize {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                break;
            }
            acked.push(line.trim().to_owned());
        }
        std::thread::sleep(Duration::from_micros(u64::from(rng.next_u32() % 2000)));
        child.kill()?;
        let status = child.wait()?;
        let mut rest = String::new();
        reader.read_to_string(&mut rest)?;
        acked.extend(rest.split_inclusive('\n').filter(|l| l.ends_with('\n')).map(|l| l.trim().to_owned()));
        if status.success() {
            let mut err = String::new();
            child.stderr.take().map(|mut e| e.read_to_string(&mut err));
            return Err(format!("writer exited on its own: {err}").into());
        }
        verify(&dir.0, &file, &acked).map_err(|e| format!("after kill {kills}: {e}"))?;
        total += acked.len();
        kills += 1;
    }
    if total < KILLS {
        return Err(format!("only {total} acknowledged entries in {kills} runs: appends were not exercised").into());
    }
    Ok((kills, total))
}

fn verify(dir: &Path, file: &Path, acked: &[String]) -> Result<(), Error> {
    if acked.is_empty() {
        return Ok(()); // killed before the first write: nothing was promised
    }
    let env = Env { process_cwd: dir.to_path_buf(), ..Env::files() };
    let m = SessionManager::open(Dialect::Pi, file, env.clone())?;
    let torn = m.diagnostics().iter().filter(|d| d.kind == DiagnosticKind::TornLastLine).count();
    let other: Vec<_> = m.diagnostics().iter().filter(|d| d.kind != DiagnosticKind::TornLastLine).collect();
    if torn > 1 || !other.is_empty() {
        return Err(format!("unexpected damage: {:?}", m.diagnostics()).into());
    }
    for id in acked {
        if m.tree().get(id).is_none() {
            return Err(format!("acknowledged entry {id} is missing").into());
        }
    }
    // The branch is one unbroken chain from the first entry to the last acknowledged one.
    let last = acked.last().ok_or("no acknowledged entry")?;
    if m.tree().get_branch(Some(last)).len() != acked.len() {
        return Err("the acknowledged entries do not form one chain".into());
    }
    drop(m);
    // pi repaired a torn tail at open by ending its line: the fragment stays (as pi
    // leaves it) and is skipped as one malformed line; nothing else is wrong.
    let again = SessionManager::open(Dialect::Pi, file, env)?;
    let malformed = again.diagnostics().iter().filter(|d| matches!(d.kind, DiagnosticKind::Malformed { .. })).count();
    if malformed > torn || again.diagnostics().len() > malformed {
        return Err(format!("damage after the repair: {:?}", again.diagnostics()).into());
    }
    if acked.iter().any(|id| again.tree().get(id).is_none()) {
        return Err("an acknowledged entry is missing after the repair".into());
    }
    Ok(())
}
