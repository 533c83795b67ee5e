//! What the kill campaigns share: how many writers to kill, whether a dead writer's
//! temporary files must be gone after the next write, and the killing of one writer
//! process once it has acknowledged some writes.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

use rand::Rng;

use crate::BoxError;

/// Kills per operation unless `SESSION_CRASH_KILLS` says otherwise.
pub const CI_KILLS: usize = 200;

/// Returns the number of kills per operation: `SESSION_CRASH_KILLS`, else [`CI_KILLS`].
pub fn kills() -> Result<usize, BoxError> {
    match std::env::var("SESSION_CRASH_KILLS") {
        Ok(v) => Ok(v.parse().map_err(|e| format!("SESSION_CRASH_KILLS={v}: {e}"))?),
        Err(_) => Ok(CI_KILLS),
    }
}

/// Returns whether the next writer must have removed a dead writer's temporary files
/// (`SESSION_CRASH_REQUIRE_TEMP_CLEANUP=0` only counts them).
pub fn require_temp_cleanup() -> bool {
    std::env::var_os("SESSION_CRASH_REQUIRE_TEMP_CLEANUP").is_none_or(|v| v != "0")
}

/// A writer killed by [`kill_writer`].
#[derive(Debug)]
pub struct Killed {
    /// Every whole line it printed before it died, without the newline: what it
    /// acknowledged.
    pub acks: Vec<String>,
    /// Its process id.
    pub pid: u32,
}

/// Starts the writer `cmd` (its output piped), waits for `wait_for` acknowledgement lines
/// (fewer if it stops printing) and a random delay of up to 3 ms, kills it, and returns
/// every whole line it printed; an error when it exited on its own.
pub fn kill_writer(cmd: &mut Command, wait_for: usize, rng: &mut impl Rng) -> Result<Killed, BoxError> {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let pid = child.id();
    let mut reader = BufReader::new(child.stdout.take().ok_or("child stdout")?);
    let mut acks = Vec::new();
    let mut line = String::new();
    while acks.len() < wait_for {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        acks.push(line.trim_end_matches('\n').to_owned());
    }
    std::thread::sleep(Duration::from_micros(u64::from(rng.next_u32() % 3000)));
    child.kill()?;
    let status = child.wait()?;
    // Everything printed before death was acknowledged.
    let mut rest = String::new();
    reader.read_to_string(&mut rest)?;
    acks.extend(rest.split_inclusive('\n').filter_map(|l| l.strip_suffix('\n')).map(str::to_owned));
    if status.code().is_some() {
        let mut err = String::new();
        child.stderr.take().map(|mut e| e.read_to_string(&mut err));
        return Err(format!("writer exited on its own ({status}): {err}").into());
    }
    Ok(Killed { acks, pid })
}
