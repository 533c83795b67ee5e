//! What several modules of these tests share.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use session::store::FileStorage;
use session::{Env, SessionManager};

/// What a test returns: any error fails it.
pub(crate) type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The tests' user message (`userMsg`).
pub(crate) fn user(text: &str) -> Value {
    json!({"role": "user", "content": text, "timestamp": 1})
}

/// The texts of the entries `m` holds, in order.
pub(crate) fn texts(m: &SessionManager) -> Vec<String> {
    m.tree().entries().iter().map(|r| r.text().to_owned()).collect()
}

/// Real files, with `dir` as the process's working folder.
pub(crate) fn env_in(dir: &Path) -> Env {
    Env::bare(Arc::new(FileStorage::new())).with_process_cwd(dir)
}

/// Writes the file `path`, its folder made first.
pub(crate) fn put(path: &Path, bytes: impl AsRef<[u8]>) -> std::io::Result<()> {
    fs_err::create_dir_all(path.parent().ok_or_else(|| std::io::Error::other("no folder"))?)?;
    fs_err::write(path, bytes)
}

/// Appends `text` to the existing file `path`.
pub(crate) fn append(path: &Path, text: &str) -> std::io::Result<()> {
    fs_err::OpenOptions::new().append(true).open(path)?.write_all(text.as_bytes())
}
