//! The workspace's `testdata/` folder and the session files in it.

use std::path::{Path, PathBuf};

/// Returns the workspace's `testdata/` folder.
pub fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// Returns every `.jsonl` file below `testdata/` (frozen, corrupt, generated, sample and
/// the conformance corpus), sorted.
pub fn testdata_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    jsonl_files(&testdata(), &mut out);
    out.sort();
    out
}

/// Every `.jsonl` file below `dir`, into `out`; a folder that cannot be read adds none.
fn jsonl_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs_err::read_dir(dir) else { return };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            jsonl_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "jsonl") {
            out.push(path);
        }
    }
}
