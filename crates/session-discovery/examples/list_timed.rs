//! Lists one session directory in a fresh process and prints how long the listing
//! took (the process start and the output are not counted), as the reference
//! benchmark measures `SessionManager.list`.
//!
//! ```text
//! cargo run --release -p session-discovery --example list_timed -- DIR [pi|omp] [--no-cache]
//! ```
//!
//! The listing cache lives in `$XDG_CACHE_HOME/session-store` (as for `session ls`);
//! the first run fills it.

use std::path::PathBuf;
use std::time::Instant;

use session_discovery::{AgentDirs, Dialect, Discovery, OmpHome, ProcessEnv};
use session_store::PrivateDir;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(dir) = args.first().map(PathBuf::from) else {
        return Err("usage: list_timed DIR [pi|omp] [--no-cache]".into());
    };
    let dialect = if args.iter().any(|a| a == "omp") { Dialect::Omp } else { Dialect::Pi };
    let env = ProcessEnv::from_process_env()?;
    let mut discovery = Discovery::new(AgentDirs::for_dialect(dialect, &env, OmpHome::MusePi));
    if !args.iter().any(|a| a == "--no-cache") {
        discovery = discovery.with_list_cache(PrivateDir::open(Discovery::default_cache_dir(&env))?, 64);
    }
    let start = Instant::now();
    let sessions = discovery.list("/tmp", Some(&dir), &mut |_| {})?;
    let elapsed = start.elapsed();
    let text: usize = sessions.iter().map(|s| s.all_messages_text.len()).sum();
    println!(
        "{} sessions ({} MB of message text) listed in {:.1} ms",
        sessions.len(),
        text / 1_000_000,
        elapsed.as_secs_f64() * 1e3
    );
    Ok(())
}
