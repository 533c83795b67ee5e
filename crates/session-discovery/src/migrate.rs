//! omp's best-effort migration of legacy bucket names into the current one.
//!
//! Three older spellings of a project's bucket are merged into the current name
//! whenever the default directory is computed: the old home spelling
//! (`--<home>--`, `--<home>-<rest>--`), the legacy absolute name (`--<cwd>--`) and
//! the hashed name of omp 17.2.5–17.2.8. Failures are ignored (omp only logs them):
//! a collision leaves the old file where it was, nothing is deleted that holds data.

use std::path::Path;

use crate::env::AgentDirs;
use crate::io;
use crate::paths;

/// Merges `old` into `new`: moves each child unless a same-named child exists,
/// then removes `old` if it became empty. If `new` is not a directory it is
/// replaced; if it does not exist `old` is renamed.
pub(crate) fn merge_dir(old: &Path, new: &Path) {
    if old == new || !old.is_dir() {
        return;
    }
    match std::fs::symlink_metadata(new) {
        Ok(m) if m.is_dir() => {
            if let Ok(children) = io::read_dir(old) {
                for c in children {
                    let target = new.join(&c.name);
                    if !io::exists(&target) {
                        let _ = io::rename(&c.path, &target);
                    }
                }
            }
            let _ = io::remove_dir(old);
        }
        Ok(_) => {
            if io::remove_any(new).is_ok() {
                let _ = io::rename(old, new);
            }
        }
        Err(_) => {
            if let Some(parent) = new.parent() {
                let _ = io::create_dir_all(parent);
            }
            let _ = io::rename(old, new);
        }
    }
}

/// Runs the three migrations for `cwd` whose current bucket is `target`.
pub(crate) fn migrate_buckets(dirs: &AgentDirs, cwd: &str, target: &Path) {
    let root = &dirs.sessions_root;
    let home = dirs.env.home.to_string_lossy().into_owned();
    // 1. Old home spelling.
    let home_enc = paths::resolve("/", &home);
    let home_enc = home_enc.strip_prefix(['/', '\\']).unwrap_or(&home_enc).replace(['/', '\\', ':'], "-");
    if !home_enc.is_empty()
        && let Ok(entries) = io::read_dir(root)
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
                merge_dir(&e.path, &root.join(n));
            }
        }
    }
    // 2. Legacy absolute bucket.
    let resolved = dirs.env.resolve(cwd);
    let legacy = root.join(paths::legacy_absolute_bucket(&resolved));
    if legacy != target {
        merge_dir(&legacy, target);
    }
    // 3. Hashed bucket of 17.2.5–17.2.8.
    let c = paths::canonicalize_best_effort(&resolved);
    let h = paths::canonicalize_best_effort(&paths::resolve("/", &home));
    let t = paths::canonicalize_best_effort(&paths::resolve("/", &dirs.env.tmp.to_string_lossy()));
    let hashed = root.join(paths::hashed_bucket_name(&c, &h, &t));
    if hashed != target {
        merge_dir(&hashed, target);
    }
}
