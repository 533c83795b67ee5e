//! `cargo xtask fuzz [--time SECS] [--sanitizer address|none] [TARGET...]`: runs the
//! cargo-fuzz targets of `fuzz/` (all of them by default), each for `SECS` seconds.
//!
//! It installs nothing: without cargo-fuzz it prints the install command and fails.
//! Before the runs it seeds each target's corpus, `fuzz/corpus/<target>/` (ignored
//! by git, and kept between runs so that a campaign builds on the last one), from
//! the session files of `testdata/`: whole files for the parser and migration
//! targets, their distinct lines for the scanner and serializer targets. The targets
//! are built once with the toolchain of `rust-toolchain.toml` (a stable one:
//! `RUSTC_BOOTSTRAP=1` lets cargo-fuzz pass its unstable flags), then run one after
//! the other. Each run's libFuzzer output goes to `target/fuzz-logs/<target>.log`;
//! what is printed per target is its executions (libFuzzer's final
//! `stat::number_of_executed_units`) and, for a crash, the artifact libFuzzer wrote.
//! Any crash, leak, timeout or failed run fails the task after every target ran.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The fuzz targets, in the order they run.
const TARGETS: [&str; 7] = ["scan", "parse_pi", "parse_omp", "serialize", "migrate", "list_cache", "session_index"];

/// The targets whose inputs are whole session files; the others get single lines
/// (`list_cache` builds its caches of the pieces of a line).
const FILE_TARGETS: [&str; 4] = ["parse_pi", "parse_omp", "migrate", "session_index"];

/// The cargo-fuzz release the campaign is run with (`.ci/fuzz.sh` installs it).
const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// The largest input libFuzzer makes, and the largest seed: small inputs run fast
/// (every target reads its input several times over), and 8 KiB holds many records
/// and strings that cross many of the scanner's 64-byte blocks.
const MAX_LEN: usize = 8 << 10;

/// The usage line of the task (also in the usage text of `main.rs`).
const USAGE: &str = "cargo xtask fuzz [--time SECS] [--sanitizer address|none] [TARGET...]";

/// Runs the task with its arguments.
pub(crate) fn fuzz(args: &[String]) -> Result<(), String> {
    let opts = Options::parse(args)?;
    let root = crate::repo_root();
    check_cargo_fuzz()?;
    let mut seeded = Vec::new();
    for target in &opts.targets {
        seeded.push(seed(&root, target)?);
    }
    build(&root, &opts)?;
    let logs = target_dir(&root).join("fuzz-logs");
    fs_err::create_dir_all(&logs).map_err(|e| e.to_string())?;
    let mut failures = Vec::new();
    let mut total = 0u64;
    for (target, seeds) in opts.targets.iter().zip(seeded) {
        let outcome = run_target(&root, &opts, target, &logs.join(format!("{target}.log")))?;
        let executions = outcome.executions.map_or_else(|| "unknown".to_owned(), |n| n.to_string());
        total += outcome.executions.unwrap_or(0);
        println!(
            "fuzz {target}: {executions} executions in {:.0} s ({seeds} seeds, {} corpus inputs) {}",
            outcome.seconds,
            corpus_size(&root, target),
            if outcome.failure.is_none() { "ok" } else { "FAILED" }
        );
        if let Some(failure) = outcome.failure {
            println!("{failure}");
            failures.push(format!("{target}: {}", failure.lines().next().unwrap_or_default()));
        }
    }
    println!("fuzz: {total} executions in total over {} targets", opts.targets.len());
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("fuzzing found {} failure(s):\n  {}", failures.len(), failures.join("\n  ")))
    }
}

/// The task's options.
struct Options {
    seconds: u64,
    sanitizer: String,
    targets: Vec<String>,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        // No sanitizer by default: the workspace forbids unsafe code, and without
        // AddressSanitizer the targets build faster and run two to three times as many
        // inputs. `--sanitizer address` checks the dependencies' unsafe code too.
        let mut opts = Options { seconds: 300, sanitizer: "none".into(), targets: Vec::new() };
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let mut value = |name: &str| it.next().cloned().ok_or(format!("{name} needs a value\nusage: {USAGE}"));
            match arg.as_str() {
                "--time" => {
                    opts.seconds = value("--time")?.parse().map_err(|e| format!("--time: {e}"))?;
                    if opts.seconds == 0 {
                        return Err("--time must be at least 1 second".into());
                    }
                }
                "--sanitizer" => {
                    opts.sanitizer = value("--sanitizer")?;
                    if !matches!(opts.sanitizer.as_str(), "address" | "none") {
                        return Err(format!("--sanitizer is address or none, not {}", opts.sanitizer));
                    }
                }
                flag if flag.starts_with("--") => return Err(format!("unknown option {flag}\nusage: {USAGE}")),
                target if TARGETS.contains(&target) => {
                    if !opts.targets.iter().any(|t| t == target) {
                        opts.targets.push(target.to_owned());
                    }
                }
                other => return Err(format!("unknown fuzz target {other}: the targets are {}", TARGETS.join(", "))),
            }
        }
        if opts.targets.is_empty() {
            opts.targets = TARGETS.iter().map(|t| (*t).to_owned()).collect();
        }
        Ok(opts)
    }
}

/// Returns the cargo to run (the one running this task).
fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// Returns the root workspace's target directory.
fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

/// A `cargo fuzz` command run from the repository root on the pinned stable
/// toolchain, which accepts cargo-fuzz's unstable flags with `RUSTC_BOOTSTRAP=1`.
fn cargo_fuzz(root: &Path) -> Command {
    let mut cmd = Command::new(cargo());
    cmd.current_dir(root).arg("fuzz").env("RUSTC_BOOTSTRAP", "1");
    // The root workspace's target directory is not the fuzz workspace's.
    cmd.env_remove("CARGO_TARGET_DIR");
    cmd
}

/// Fails with the install command when cargo-fuzz is missing.
fn check_cargo_fuzz() -> Result<(), String> {
    let install = format!("cargo install cargo-fuzz --locked --version {CARGO_FUZZ_VERSION}");
    let out =
        Command::new(cargo()).args(["fuzz", "--version"]).output().map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo-fuzz is not installed: install it with `{install}`"));
    }
    let version = String::from_utf8_lossy(&out.stdout);
    if !version.contains(CARGO_FUZZ_VERSION) {
        eprintln!(
            "xtask: warning: found {}, the campaign is run with {CARGO_FUZZ_VERSION} (`{install}`)",
            version.trim()
        );
    }
    Ok(())
}

/// Writes the seeds of `target` from `testdata/` into its corpus directory (and
/// removes seeds of files that are gone); returns how many seeds it has.
fn seed(root: &Path, target: &str) -> Result<usize, String> {
    let dir = root.join("fuzz/corpus").join(target);
    fs_err::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut files = Vec::new();
    session_files(&root.join("testdata"), &mut files)?;
    files.sort();
    let mut seeds = BTreeSet::new();
    for file in &files {
        let bytes = fs_err::read(file).map_err(|e| e.to_string())?;
        if FILE_TARGETS.contains(&target) {
            // The file in chunks of whole lines: its start with the header, then the
            // rest, so that every kind of record is in some seed.
            let mut rest = &bytes[..];
            while !rest.is_empty() {
                let chunk = cut_at_line(rest, MAX_LEN);
                seeds.insert(chunk.to_vec());
                rest = &rest[chunk.len()..];
            }
        } else {
            for line in bytes.split(|&b| b == b'\n') {
                if !line.iter().all(u8::is_ascii_whitespace) {
                    seeds.insert(line[..line.len().min(MAX_LEN)].to_vec());
                }
            }
        }
    }
    let mut names = BTreeSet::new();
    for s in &seeds {
        let name = format!("seed-{:016x}", fnv1a(s));
        let path = dir.join(&name);
        if !path.exists() {
            fs_err::write(&path, s).map_err(|e| e.to_string())?;
        }
        names.insert(name);
    }
    for entry in fs_err::read_dir(&dir).map_err(|e| e.to_string())?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("seed-") && !names.contains(&name) {
            fs_err::remove_file(entry.path()).map_err(|e| e.to_string())?;
        }
    }
    Ok(names.len())
}

/// Collects the session files (`*.jsonl`) below `dir`.
fn session_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    for entry in fs_err::read_dir(dir).map_err(|e| e.to_string())? {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            session_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            out.push(path);
        }
    }
    Ok(())
}

/// Returns `bytes` cut to at most `max` bytes, at the end of a line when there is one.
fn cut_at_line(bytes: &[u8], max: usize) -> &[u8] {
    if bytes.len() <= max {
        return bytes;
    }
    let head = &bytes[..max];
    head.iter().rposition(|&b| b == b'\n').map_or(head, |i| &head[..=i])
}

/// Returns a 64-bit FNV-1a hash of `bytes` (seed file names).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// Returns the number of inputs in the corpus of `target`.
fn corpus_size(root: &Path, target: &str) -> usize {
    fs_err::read_dir(root.join("fuzz/corpus").join(target)).map_or(0, |d| d.count())
}

/// Builds every target once, as the runs will use them.
fn build(root: &Path, opts: &Options) -> Result<(), String> {
    println!("fuzz: building {} (sanitizer {})", opts.targets.join(", "), opts.sanitizer);
    let started = Instant::now();
    let mut cmd = cargo_fuzz(root);
    cmd.args(["build", "--sanitizer", &opts.sanitizer]);
    if opts.targets.len() == 1 {
        cmd.arg(&opts.targets[0]);
    }
    let status = cmd.status().map_err(|e| format!("cannot run cargo fuzz build: {e}"))?;
    if !status.success() {
        return Err(format!("cargo fuzz build failed ({status})"));
    }
    println!("fuzz: built in {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// What one target's run gave.
struct Outcome {
    seconds: f64,
    executions: Option<u64>,
    /// Why the run failed (first line), with the artifact and the log's tail.
    failure: Option<String>,
}

/// Runs one target for the set time, its output going to `log`.
fn run_target(root: &Path, opts: &Options, target: &str, log: &Path) -> Result<Outcome, String> {
    let corpus = root.join("fuzz/corpus").join(target);
    let out = fs_err::File::create(log).map_err(|e| e.to_string())?.into_parts().0;
    let err = out.try_clone().map_err(|e| format!("{}: {e}", log.display()))?;
    let started = Instant::now();
    let status = cargo_fuzz(root)
        .args(["run", "--sanitizer", &opts.sanitizer, target])
        .arg(&corpus)
        .arg("--")
        .arg(format!("-max_total_time={}", opts.seconds))
        .arg(format!("-max_len={MAX_LEN}"))
        .arg(format!("-dict={}", root.join("fuzz/json.dict").display()))
        .args(["-print_final_stats=1", "-timeout=20", "-rss_limit_mb=4096"])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .map_err(|e| format!("cannot run cargo fuzz run: {e}"))?;
    let seconds = started.elapsed().as_secs_f64();
    let text = String::from_utf8_lossy(&fs_err::read(log).map_err(|e| e.to_string())?).into_owned();
    let executions = final_stat(&text, "stat::number_of_executed_units");
    let failure = (!status.success()).then(|| {
        let artifact = text
            .lines()
            .rev()
            .find_map(|l| l.split_once("Test unit written to ").map(|(_, path)| path.trim().to_owned()));
        format!(
            "{} ({status}); log {}\n  {}",
            artifact.map_or_else(|| "no artifact written".to_owned(), |a| format!("crash artifact {a}")),
            log.display(),
            failure_excerpt(&text).join("\n  ")
        )
    });
    Ok(Outcome { seconds, executions, failure })
}

/// The lines of a failed run's log that say what failed, for a CI log that keeps no
/// artifact: the panic message with the lines after it up to the backtrace, libFuzzer's
/// summary and the failing input (its `Base64:` line), or the log's last lines when
/// none of these is there.
fn failure_excerpt(log: &str) -> Vec<&str> {
    let lines: Vec<&str> = log.lines().collect();
    let mut keep = Vec::new();
    if let Some(at) = lines.iter().position(|l| l.contains("panicked at")) {
        keep.extend(lines[at..].iter().take(12).take_while(|l| !l.trim_start().starts_with("stack backtrace")));
    }
    keep.extend(lines.iter().filter(|l| {
        l.starts_with("SUMMARY:") || l.starts_with("Base64:") || l.starts_with("==") && l.contains("ERROR")
    }));
    if keep.is_empty() {
        let from = lines.len().saturating_sub(30);
        keep.extend(&lines[from..]);
    }
    keep
}

/// Returns the value of libFuzzer's final statistic `name` (`-print_final_stats=1`).
fn final_stat(log: &str, name: &str) -> Option<u64> {
    log.lines().rev().find_map(|l| l.trim().strip_prefix(name)?.trim().strip_prefix(':')?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_final_stats_and_cuts_seeds() {
        let log = "#1000\tDONE cov: 1\nDone 1000 runs in 2 second(s)\nstat::number_of_executed_units: 123456\nstat::peak_rss_mb: 40\n";
        assert_eq!(final_stat(log, "stat::number_of_executed_units"), Some(123_456));
        assert_eq!(final_stat(log, "stat::missing"), None);
        assert_eq!(cut_at_line(b"ab\ncd\nef", 7), b"ab\ncd\n");
        assert_eq!(cut_at_line(b"abcdef", 3), b"abc");
        assert_eq!(cut_at_line(b"ab\n", 7), b"ab\n");
    }

    #[test]
    fn excerpts_the_panic_and_the_input() {
        let log = "INFO: seed\n#12 NEW cov: 3\nthread '<unnamed>' panicked at src/session.rs:9:5:\nassertion `left == right` failed\n  left: 1\n right: 2\nstack backtrace:\n   0: frame\n==77== ERROR: libFuzzer: deadly signal\nSUMMARY: libFuzzer: deadly signal\nBase64: e30K\n";
        assert_eq!(
            failure_excerpt(log),
            [
                "thread '<unnamed>' panicked at src/session.rs:9:5:",
                "assertion `left == right` failed",
                "  left: 1",
                " right: 2",
                "==77== ERROR: libFuzzer: deadly signal",
                "SUMMARY: libFuzzer: deadly signal",
                "Base64: e30K",
            ]
        );
        assert_eq!(failure_excerpt("a\nb\n"), ["a", "b"]);
    }

    #[test]
    fn parses_options() {
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let o = Options::parse(&args(&["--time", "20", "scan", "migrate", "scan"])).expect("valid");
        assert_eq!((o.seconds, o.targets), (20, vec!["scan".to_owned(), "migrate".to_owned()]));
        assert_eq!(Options::parse(&[]).expect("valid").targets.len(), TARGETS.len());
        assert!(Options::parse(&args(&["nope"])).is_err());
        assert!(Options::parse(&args(&["--time", "0"])).is_err());
        assert!(Options::parse(&args(&["--sanitizer", "memory"])).is_err());
    }
}
