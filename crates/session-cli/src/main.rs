//! `session`: list, inspect, search, repair and move the sessions of pi and omp.
//!
//! Every query command prints one JSON value on stdout, shaped exactly as the
//! reference's own API returns it (see `docs/cli.md`); errors go to stderr with a
//! non-zero exit status.

mod args;
mod commands;
mod find;

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let parsed = match args::Args::parse(&argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}\n\n{}", args::USAGE);
            return ExitCode::from(2);
        }
    };
    if parsed.help {
        println!("{}", args::USAGE);
        return ExitCode::SUCCESS;
    }
    match commands::run(&parsed) {
        Ok(out) => {
            let mut stdout = std::io::stdout().lock();
            if writeln!(stdout, "{out}").and_then(|()| stdout.flush()).is_err() {
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
