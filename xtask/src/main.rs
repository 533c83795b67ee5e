//! Development tasks for the session workspace, run as `cargo xtask <task>`.
//!
//! * `fixtures [--check]` regenerates the generated part of `testdata/`
//!   (`testdata/sample/`, `testdata/generated/`) from fixed seeds; `--check` compares
//!   instead of writing and fails naming every file that differs.
//! * `gen-session --entries N --seed S [--dialect pi|omp] OUT` writes one large,
//!   realistic session file (about 2.4 KB per entry).
//! * `bench` runs the criterion benchmarks of the workspace.
//! * `crash [--points N] [--kills N] [--races N] [--allow-temp-leftovers]` runs the crash campaign
//!   (the crash-point explorer and the SIGKILL tests) at the sizes given (see `crash.rs`).
//! * `public-api [--check] [CRATE...]` lists the public API of every library crate in
//!   `docs/public-api/` from rustdoc's JSON; `--check` fails on any difference (see
//!   `public_api.rs`).
//! * `fuzz [--time SECS] [--sanitizer address|none] [TARGET...]` seeds the corpora of
//!   the cargo-fuzz targets in `fuzz/` from `testdata/` and runs each for a set time,
//!   failing on any crash (see `fuzz.rs`).
//!
//! The frozen fixtures (`testdata/v1`, `v2`, `v3`), the corrupt files and the copy of
//! the conformance corpus are written by hand or copied, never by this tool.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use session_model::Dialect;

mod crash;
mod fuzz;
mod public_api;

use session_testkit::generate::{self, Options, Profile};

const USAGE: &str = "usage:
  cargo xtask fixtures [--check]
  cargo xtask gen-session --entries N --seed S [--dialect pi|omp] OUT
  cargo xtask bench
  cargo xtask crash [--points N] [--kills N] [--races N] [--allow-temp-leftovers]
  cargo xtask fuzz [--time SECS] [--sanitizer address|none] [TARGET...]
  cargo xtask public-api [--check] [CRATE...]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("fixtures") => fixtures(&args[1..]),
        Some("gen-session") => gen_session(&args[1..]),
        Some("bench") => bench(&args[1..]),
        Some("crash") => crash::run(&args[1..], USAGE),
        Some("fuzz") => fuzz::fuzz(&args[1..]),
        Some("public-api") => public_api::run(&args[1..], USAGE),
        _ => Err(format!("unknown or missing task\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Returns the workspace root (the parent of this crate's directory).
fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().expect("xtask lives one level below the workspace root").to_path_buf()
}

/// One generated fixture: its path below `testdata/` and how it is made.
fn fixture_set() -> Vec<(&'static str, Options)> {
    let rich = |dialect, entries, seed, avg_bytes| Options {
        dialect,
        entries,
        seed,
        profile: Profile::Rich,
        avg_bytes,
        cwd: "/home/user/project".into(),
    };
    let bench_shape =
        |dialect, entries, seed| Options { cwd: "/home/user/project".into(), ..Options::bench(dialect, entries, seed) };
    vec![
        ("sample/pi.jsonl", rich(Dialect::Pi, 40, 1, 600)),
        ("sample/omp.jsonl", rich(Dialect::Omp, 40, 2, 600)),
        ("generated/pi-small.jsonl", rich(Dialect::Pi, 12, 11, 200)),
        ("generated/pi-branchy.jsonl", rich(Dialect::Pi, 150, 12, 300)),
        ("generated/pi-bench-shape.jsonl", bench_shape(Dialect::Pi, 50, 13)),
        ("generated/omp-small.jsonl", rich(Dialect::Omp, 12, 21, 200)),
        ("generated/omp-branchy.jsonl", rich(Dialect::Omp, 150, 22, 300)),
        ("generated/omp-bench-shape.jsonl", bench_shape(Dialect::Omp, 50, 23)),
    ]
}

fn fixtures(args: &[String]) -> Result<(), String> {
    let check = match args {
        [] => false,
        [flag] if flag == "--check" => true,
        _ => return Err(format!("fixtures takes only --check\n{USAGE}")),
    };
    let testdata = repo_root().join("testdata");
    let mut differing = Vec::new();
    let set = fixture_set();
    for (rel, opts) in &set {
        let path = testdata.join(rel);
        let want = generate::session(opts);
        if check {
            match fs_err::read(&path) {
                Ok(have) if have == want.as_bytes() => {}
                Ok(_) => differing.push(format!("{} (content differs)", path.display())),
                Err(_) => differing.push(format!("{} (missing)", path.display())),
            }
        } else {
            if let Some(dir) = path.parent() {
                fs_err::create_dir_all(dir).map_err(|e| e.to_string())?;
            }
            fs_err::write(&path, want).map_err(|e| e.to_string())?;
            println!("wrote {}", path.display());
        }
    }
    // Everything in generated/ comes from this tool: anything else is stale.
    let generated = testdata.join("generated");
    if let Ok(dir) = fs_err::read_dir(&generated) {
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !set.iter().any(|(rel, _)| *rel == format!("generated/{name}")) {
                differing.push(format!("{} (not generated by xtask: delete it)", entry.path().display()));
            }
        }
    }
    if differing.is_empty() {
        if check {
            println!("fixtures up to date ({} files)", set.len());
        }
        Ok(())
    } else {
        Err(format!(
            "generated fixtures differ from the committed files:\n  {}\nrun `cargo xtask fixtures` and commit the result",
            differing.join("\n  ")
        ))
    }
}

fn gen_session(args: &[String]) -> Result<(), String> {
    let (mut entries, mut seed, mut dialect, mut out) = (None, None, Dialect::Pi, None);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().cloned().ok_or(format!("{name} needs a value\n{USAGE}"));
        match arg.as_str() {
            "--entries" => entries = Some(value("--entries")?.parse::<usize>().map_err(|e| format!("--entries: {e}"))?),
            "--seed" => seed = Some(value("--seed")?.parse::<u64>().map_err(|e| format!("--seed: {e}"))?),
            "--dialect" => dialect = value("--dialect")?.parse().map_err(|e| format!("{e}"))?,
            flag if flag.starts_with("--") => return Err(format!("unknown option {flag}\n{USAGE}")),
            path if out.is_none() => out = Some(PathBuf::from(path)),
            extra => return Err(format!("unexpected argument {extra}\n{USAGE}")),
        }
    }
    let (Some(entries), Some(out)) = (entries, out) else {
        return Err(format!("gen-session needs --entries and an output file\n{USAGE}"));
    };
    let opts = Options::bench(dialect, entries, seed.unwrap_or(1));
    let text = generate::session(&opts);
    fs_err::write(&out, &text).map_err(|e| e.to_string())?;
    println!(
        "{{\"file\":{:?},\"dialect\":\"{}\",\"entries\":{entries},\"bytes\":{}}}",
        out.display().to_string(),
        dialect.name(),
        text.len()
    );
    Ok(())
}

fn bench(args: &[String]) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = repo_root();
    let status = Command::new(cargo)
        .current_dir(&root)
        .args(["bench", "--workspace"])
        .args(args)
        .status()
        .map_err(|e| format!("cannot run cargo bench: {e}"))?;
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    println!("criterion results: {} (<group>/<bench>/new/estimates.json)", target.join("criterion").display());
    if status.success() { Ok(()) } else { Err(format!("cargo bench failed ({status})")) }
}
