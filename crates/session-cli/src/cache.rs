//! The command's cache folder, `$XDG_CACHE_HOME/session-store` (else
//! `~/.cache/session-store`): opened once per run as a private folder
//! (`session::store::PrivateDir`), or not at all. It holds the listing cache, the
//! session indexes (`index/`) and the search catalogs; a folder that is not this user's
//! alone is never used, and the command then runs without them, after one warning.

use std::sync::OnceLock;

use session::discovery::{Discovery, ProcessEnv};
use session::history::Catalog;
use session::store::PrivateDir;

/// Says on stderr that the command runs without `what`, and why.
fn warn(what: &str, error: &dyn std::fmt::Display) {
    eprintln!("warning: running without {what}: {error} (or point XDG_CACHE_HOME at a folder of yours)");
}

/// Returns the cache folder, opened once; `None` (after a warning) when it cannot be
/// opened as a private folder.
pub(crate) fn dir() -> Option<&'static PrivateDir> {
    static DIR: OnceLock<Option<PrivateDir>> = OnceLock::new();
    DIR.get_or_init(|| {
        let env = ProcessEnv::from_process_env().ok()?;
        PrivateDir::open(Discovery::default_cache_dir(&env)).map_err(|e| warn("the cache", &e)).ok()
    })
    .as_ref()
}

/// Returns the private folder of the session indexes, `index/` in the cache folder,
/// opened once; `None` (after a warning) when it cannot be.
pub(crate) fn index_dir() -> Option<&'static PrivateDir> {
    static DIR: OnceLock<Option<PrivateDir>> = OnceLock::new();
    DIR.get_or_init(|| dir()?.subdir("index").map_err(|e| warn("session indexes", &e)).ok()).as_ref()
}

/// Opens the search catalog `name` in the cache folder; one in memory (after a
/// warning saying what to do) when there is no cache folder or the file there cannot
/// be used as a catalog (another program's database, a link), so that the search
/// still answers, reading every session.
pub(crate) fn catalog(name: &str) -> Result<Catalog, session::history::HistoryError> {
    let Some(dir) = dir() else { return Catalog::open_in_memory() };
    let opened = match dir.file_path(name) {
        Ok(path) => Catalog::open(path).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    opened.or_else(|e| {
        warn("a kept search catalog (every session is read)", &e);
        Catalog::open_in_memory()
    })
}
