//! omp's best-effort migration of legacy bucket names into the current one.
//!
//! Three older spellings of a project's bucket are merged into the current name
//! whenever the default directory is computed: the old home spelling
//! (`--<home>--`, `--<home>-<rest>--`), the legacy absolute name (`--<cwd>--`) and
//! the hashed name of omp 17.2.5–17.2.8. Failures are ignored (omp only logs them):
//! a collision leaves the old file where it was, nothing is deleted that holds data.

use std::path::Path;

use session_store::{EntryKind, Storage};

use crate::env::AgentDirs;
use crate::io;
use crate::paths;

/// Merges `old` into `new`: moves each child unless a same-named child exists,
/// then removes `old` if it became empty. If `new` is not a directory it is
/// replaced; if it does not exist `old` is moved there whole. Directories (artifacts,
/// whole buckets) move with [`Storage::move_dir`], files with [`Storage::rename`], so
/// the server storages, whose directories are key prefixes, move them too.
pub(crate) fn merge_dir(storage: &dyn Storage, old: &Path, new: &Path) {
    if old == new || io::stat(storage, old).is_none_or(|s| s.is_file) {
        return;
    }
    match storage.stat(new) {
        Ok(Some(st)) if !st.is_file => {
            if let Ok(children) = io::read_dir(storage, old) {
                for c in children {
                    let target = new.join(&c.name);
                    if !io::exists(storage, &target) {
                        // An artifacts directory is a tree (a key prefix on the server
                        // storages), which a rename does not move.
                        let _ = match c.kind {
                            EntryKind::Dir => storage.move_dir(&c.path, &target).map(drop),
                            _ => storage.rename(&c.path, &target),
                        };
                    }
                }
            }
            let _ = storage.remove_empty_dir(old);
        }
        Ok(Some(_)) => {
            // A file where the bucket belongs (omp removes whatever is there).
            if storage.unlink(new).is_ok() {
                let _ = storage.move_dir(old, new);
            }
        }
        Ok(None) => {
            if let Some(parent) = new.parent() {
                let _ = storage.ensure_dir(parent);
            }
            let _ = storage.move_dir(old, new);
        }
        Err(_) => {}
    }
}

/// Runs the three migrations for `cwd` whose current bucket is `target`.
pub(crate) fn migrate_buckets(storage: &dyn Storage, dirs: &AgentDirs, cwd: &str, target: &Path) {
    let root = &dirs.sessions_root;
    let home = dirs.env.home.to_string_lossy().into_owned();
    // 1. Old home spelling.
    let home_enc = paths::resolve("/", &home);
    let home_enc = home_enc.strip_prefix(['/', '\\']).unwrap_or(&home_enc).replace(['/', '\\', ':'], "-");
    if !home_enc.is_empty()
        && let Ok(entries) = io::read_dir(storage, root)
    {
        let exact = format!("--{home_enc}--");
        let prefix = format!("--{home_enc}-");
        for e in entries {
            let new_name = if e.name == exact {
                Some("-".to_string())
            } else if let Some(rest) = e.name.strip_prefix(&prefix).and_then(|r| r.strip_suffix("--")) {
                (!rest.is_empty()).then(|| format!("-{rest}"))
            } else {
                None
            };
            if let Some(n) = new_name {
                merge_dir(storage, &e.path, &root.join(n));
            }
        }
    }
    // 2. Legacy absolute bucket.
    let resolved = dirs.env.resolve(cwd);
    let legacy = root.join(paths::legacy_absolute_bucket(&resolved));
    if legacy != target {
        merge_dir(storage, &legacy, target);
    }
    // 3. Hashed bucket of 17.2.5–17.2.8.
    let c = paths::canonicalize_best_effort(&resolved);
    let h = paths::canonicalize_best_effort(&paths::resolve("/", &home));
    let t = paths::canonicalize_best_effort(&paths::resolve("/", &dirs.env.tmp.to_string_lossy()));
    let hashed = root.join(paths::hashed_bucket_name(&c, &h, &t));
    if hashed != target {
        merge_dir(storage, &hashed, target);
    }
}
