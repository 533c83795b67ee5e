//! Test helpers: self-deleting temporary directories and the repository's test data.

pub(crate) use session_testkit::TempDir;
use std::path::{Path, PathBuf};

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
