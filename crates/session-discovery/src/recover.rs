//! omp's recovery of orphaned backups, part of its listing: before it lists a
//! directory, omp renames the newest `<primary>.jsonl.<x>.bak` of each missing
//! primary to the primary's name. A read-only [`crate::Discovery`] skips it.

use std::path::{Path, PathBuf};

use session_store::Storage;

use crate::io;

/// Promotes orphaned `<primary>.jsonl.<x>.bak` backups (newest per primary) to
/// their missing primary, as omp does before listing a directory.
pub(crate) fn recover_orphaned_backups(storage: &dyn Storage, dir: &Path) {
    let Ok(entries) = io::read_dir(storage, dir) else { return };
    let mut best: Vec<(PathBuf, PathBuf, i64)> = Vec::new();
    for e in entries {
        if e.name.starts_with('.') {
            continue;
        }
        let Some(trimmed) = e.name.strip_suffix(".bak") else { continue };
        let Some(dot) = trimmed.rfind('.') else { continue };
        if dot == 0 {
            continue;
        }
        let primary = &trimmed[..dot];
        if !primary.ends_with(".jsonl") {
            continue;
        }
        let Some(st) = io::stat(storage, &e.path) else { continue };
        let primary_path = dir.join(primary);
        match best.iter_mut().find(|b| b.0 == primary_path) {
            Some(b) if st.mtime_ns() > b.2 => {
                b.1 = e.path;
                b.2 = st.mtime_ns();
            }
            Some(_) => {}
            None => best.push((primary_path, e.path, st.mtime_ns())),
        }
    }
    for (primary, backup, _) in best {
        if !io::exists(storage, &primary) {
            let _ = storage.rename(&backup, &primary);
        }
    }
}
