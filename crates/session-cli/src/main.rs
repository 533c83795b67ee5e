//! `session`: list, inspect, search, repair and move the sessions of pi and omp.
//!
//! Every inspecting command prints, with `--json` or when stdout is not a terminal, one
//! JSON value shaped exactly as the reference's own API returns it (see `docs/cli.md`),
//! and text for a person on a terminal. `--store URL` puts every command on a PostgreSQL
//! or Redis storage instead of the file system (`store`); `push` and `pull` move sessions
//! between the two (`transfer`). Errors go to stderr: exit status 1 for a
//! failure, 2 for a command line that cannot be parsed.

mod args;
mod cache;
mod commands;
mod find;
mod huge_pages;
mod human;
mod import;
mod jobs;
mod mcp;
mod pick;
mod store;
mod sync;
mod table;
mod tail;
mod transfer;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        // Usage errors exit 2; `--help` and `--version` print and exit 0.
        Err(e) => e.exit(),
    };
    // No command: the picker (which says, without a terminal, that it needs one).
    let command = cli.command.unwrap_or(args::Command::Pick { all: false });
    if let Some(file) = command.session_file() {
        huge_pages::ensure_for(file);
    }
    if let Err(e) = store::init(&cli.global, &command) {
        eprintln!("error: --store: {}", commands::chain(&*e));
        return ExitCode::FAILURE;
    }
    if let args::Command::Pick { all } = command {
        // The picker prints what it copied itself: no output of a command follows.
        return match pick::run(&cli.global, all) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.is::<pick::NotATerminal>() => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
            Err(e) => {
                eprintln!("{}", error_report(&*e));
                ExitCode::FAILURE
            }
        };
    }
    match commands::run(&cli.global, &command) {
        Ok(out) if out.streamed => {
            if out.failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Ok(out) => {
            let mut stdout = std::io::stdout().lock();
            // Text for a person shows a lone surrogate (a stand-in character in our
            // strings; JSON writes its escape) as a terminal shows one: U+FFFD.
            let text = if commands::wants_json(&cli.global) {
                std::borrow::Cow::Borrowed(out.text.as_str())
            } else {
                session::model::json::display_str(&out.text)
            };
            let written = stdout.write_all(text.as_bytes()).and_then(|()| stdout.write_all(b"\n"));
            match written.and_then(|()| stdout.flush()) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: cannot write the output: {e}");
                    return ExitCode::FAILURE;
                }
            }
            if out.failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
        }
        // The reader of our output went away (`session ls | head`): nothing to report.
        Err(e) if broken_pipe(&*e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", error_report(&*e));
            ExitCode::FAILURE
        }
    }
}

/// Returns whether `e`, or an error it was caused by, is a write to a closed pipe.
fn broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    commands::causes(e)
        .any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

/// Renders an error and its causes, one per line: each error's message says what
/// failed, its source says why (so no message repeats its cause).
fn error_report(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = format!("error: {e}");
    for c in commands::causes(e).skip(1) {
        out.push_str(&format!("\n  caused by: {c}"));
    }
    out
}
