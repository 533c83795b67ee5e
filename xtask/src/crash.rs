//! `cargo xtask crash`: the crash campaign, longer than CI runs it.
//!
//! Runs the three crash test binaries one after another: the crash-point explorer
//! (`session`'s `crash_points`: a death at every storage boundary of every writing
//! operation and job) and the SIGKILL tests of the store and of the facade (`crash` in
//! `session-store` and `session`); then the race tests of the jobs (each rewriting job
//! against an appender that writes as pi does, in the library and through the command).
//! The sizes reach the tests through environment variables; without an option each test
//! keeps its CI default:
//!
//! * `--points N` sets `SESSION_CRASH_POINTS`, the number of crash points to explore
//!   (the operations are explored at growing sizes until it is reached; CI: 1,000);
//! * `--kills N` sets `SESSION_CRASH_KILLS`, the number of SIGKILLs per operation
//!   (CI: 200);
//! * `--races N` sets `SESSION_JOB_RACE_TRIALS`, the trials of each rewriting job and
//!   dialect against the appender (CI: 15 in the library, 12 through the command);
//! * `--allow-temp-leftovers` sets `SESSION_CRASH_REQUIRE_TEMP_CLEANUP=0`: a dead
//!   writer's temporary files that the next writer did not remove are only counted (by
//!   default they fail the run);
//!
//! Every binary runs even when an earlier one fails; the task fails if any did.

use std::process::Command;

/// The crash test binaries: `(package, test target)`.
const BINARIES: [(&str, &str); 3] =
    [("agent-session-store", "crash_points"), ("session-store", "crash"), ("agent-session-store", "crash")];

/// The race tests of the jobs: `(package, test target, test name filter)`.
const RACES: [(&str, &str, &str); 2] = [
    ("agent-session-store", "it", "maintenance::rewriting_jobs_keep_every_line_appended_meanwhile"),
    ("session-cli", "it", "jobs::rewrites_keep_lines_appended_meanwhile"),
];

/// Runs the crash campaign with the sizes `args` ask for.
pub(crate) fn run(args: &[String], usage: &str) -> Result<(), String> {
    let mut vars: Vec<(&str, String)> = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut count = |name: &str| -> Result<String, String> {
            let value = it.next().ok_or(format!("{name} needs a value\n{usage}"))?;
            value.parse::<usize>().map_err(|e| format!("{name} {value}: {e}"))?;
            Ok(value.clone())
        };
        match arg.as_str() {
            "--points" => vars.push(("SESSION_CRASH_POINTS", count("--points")?)),
            "--kills" => vars.push(("SESSION_CRASH_KILLS", count("--kills")?)),
            "--races" => vars.push(("SESSION_JOB_RACE_TRIALS", count("--races")?)),
            "--allow-temp-leftovers" => vars.push(("SESSION_CRASH_REQUIRE_TEMP_CLEANUP", "0".into())),
            other => return Err(format!("unknown option {other}\n{usage}")),
        }
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = crate::repo_root();
    let mut failed = Vec::new();
    for (package, test) in BINARIES {
        println!("xtask crash: cargo test -p {package} --test {test}");
        let status = Command::new(&cargo)
            .current_dir(&root)
            .args(["test", "-p", package, "--test", test])
            .envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
            .status()
            .map_err(|e| format!("cannot run cargo test: {e}"))?;
        if !status.success() {
            failed.push(format!("{package} --test {test} ({status})"));
        }
    }
    for (package, test, filter) in RACES {
        println!("xtask crash: cargo test -p {package} --test {test} {filter}");
        let status = Command::new(&cargo)
            .current_dir(&root)
            .args(["test", "-p", package, "--test", test, filter])
            .envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
            .status()
            .map_err(|e| format!("cannot run cargo test: {e}"))?;
        if !status.success() {
            failed.push(format!("{package} --test {test} {filter} ({status})"));
        }
    }
    if failed.is_empty() { Ok(()) } else { Err(format!("crash tests failed: {}", failed.join(", "))) }
}
