//! Test helpers: self-deleting temporary directories and the repository's test data.

use std::path::{Path, PathBuf};

/// A fresh directory under the system temp dir, removed on drop.
pub(crate) struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub(crate) fn new() -> TempDir {
        use rand::Rng;
        let path = std::env::temp_dir().join(format!(
            "session-store-it-{}-{:016x}",
            std::process::id(),
            rand::rng().next_u64()
        ));
        fs_err::create_dir_all(&path).expect("temp dir is creatable");
        TempDir { path }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs_err::remove_dir_all(&self.path);
    }
}

/// Returns the workspace's `testdata` directory.
pub(crate) fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// Returns the names of every entry in `dir` (dot-files included), sorted.
pub(crate) fn raw_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs_err::read_dir(dir)
        .map(|r| r.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    v.sort();
    v
}
