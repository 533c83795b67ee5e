//! `push` and `pull`: a session file and its artifacts directory copied between two
//! storages byte for byte, never over a different session unless forced, and read back
//! after the copy to prove it.

use std::path::{Path, PathBuf};

use session::store::{EntryKind, ExpectedSize, Storage, artifacts_dir};

use crate::commands::Result;
use crate::store::{SourcePath, StoreUrl};

/// What one copy did.
struct Copied {
    /// The session's path in the target.
    path: PathBuf,
    /// Its bytes.
    bytes: u64,
    /// How many artifact files came with it.
    artifacts: usize,
    /// Whether the target already held these exact bytes (nothing written).
    unchanged: bool,
}

impl Copied {
    fn json(&self) -> String {
        serde_json::json!({
            "path": self.path.to_string_lossy(),
            "bytes": self.bytes,
            "artifacts": self.artifacts,
            "unchanged": self.unchanged,
        })
        .to_string()
    }
}

/// `push FILE --to URL`: copies a session from the file system to the storage `to`
/// names, at the same (absolute) path.
pub(crate) fn push(file: &Path, to: &str, force: bool) -> Result<String> {
    let url = StoreUrl::parse(to)?;
    if url.is_files() {
        return Err(format!(
            "--to {to}: not a storage URL; push copies to postgres://, postgres+native:// or redis://"
        )
        .into());
    }
    let target = url.open()?;
    let files = session::store::FileStorage::new();
    let path = crate::store::absolute(file)?;
    Ok(copy(&files, &path, target.as_ref(), &path, force)?.json())
}

/// `pull SOURCE --to DIR`: copies a session from a storage (`URL/DATABASE/PATH`, or a
/// path in the `--store` storage) into the directory `dir` on the file system.
pub(crate) fn pull(source: &str, dir: &Path, force: bool) -> Result<String> {
    let src = SourcePath::parse(source)?;
    let storage = match &src.store {
        Some(url) => url.open()?,
        None if crate::store::on_files() => {
            return Err(format!("{source}: pull needs a storage: write URL/DATABASE/PATH or pass --store URL").into());
        }
        None => crate::store::current(),
    };
    let name = src.path.file_name().ok_or_else(|| format!("{}: not a session file path", src.path.display()))?;
    let target_path = crate::store::absolute(&dir.join(name))?;
    let files = session::store::FileStorage::new();
    Ok(copy(storage.as_ref(), &src.path, &files, &target_path, force)?.json())
}

/// Copies the session `from` in `src` to `to` in `dst` with its artifacts directory.
fn copy(src: &dyn Storage, from: &Path, dst: &dyn Storage, to: &Path, force: bool) -> Result<Copied> {
    let bytes = src.read(from).map_err(|e| format!("{e}; nothing was copied"))?;
    let mut artifacts = Vec::new();
    if let Some(dir) = artifacts_dir(from) {
        walk(src, &dir, Path::new(""), &mut artifacts)?;
    }
    let to_artifacts = artifacts_dir(to);
    // Every refusal comes before the first write.
    let session_state = check_target(dst, to, &bytes, force)?;
    let mut planned = Vec::new();
    for rel in &artifacts {
        let (Some(from_dir), Some(to_dir)) = (artifacts_dir(from), &to_artifacts) else { break };
        let data = src.read(&from_dir.join(rel))?;
        let target = to_dir.join(rel);
        let state = check_target(dst, &target, &data, force)?;
        planned.push((target, data, state));
    }
    // Artifacts first, the session last: a session that is there is there whole. A
    // failure says how far the copy got, so that running it again finishes it.
    for (done, (target, data, state)) in planned.iter().enumerate() {
        write_checked(dst, target, data, *state).map_err(|e| {
            format!(
                "{e}; {done} of {} artifacts of {} were copied before it and the session file was not; run the command again to finish",
                planned.len(),
                to.display()
            )
        })?;
    }
    write_checked(dst, to, &bytes, session_state).map_err(|e| {
        format!(
            "{e}; its {} artifacts were copied, the session file was not; run the command again to finish",
            planned.len()
        )
    })?;
    Ok(Copied {
        path: to.to_path_buf(),
        bytes: bytes.len() as u64,
        artifacts: artifacts.len(),
        unchanged: session_state == Target::Same,
    })
}

/// What the target holds at a path before the copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// Nothing.
    Missing,
    /// The same bytes: nothing to write.
    Same,
    /// Other bytes, this many (only with `--force`).
    Other(u64),
}

fn check_target(dst: &dyn Storage, path: &Path, bytes: &[u8], force: bool) -> Result<Target> {
    let Some(stat) = dst.stat(path)? else { return Ok(Target::Missing) };
    if !stat.is_file {
        return Err(format!("{}: a directory is in the way", path.display()).into());
    }
    if stat.size == bytes.len() as u64 && dst.read(path)? == bytes {
        return Ok(Target::Same);
    }
    if !force {
        return Err(format!(
            "{}: a different file is already there ({} bytes, copying {}); pass --force to replace it",
            path.display(),
            stat.size,
            bytes.len()
        )
        .into());
    }
    Ok(Target::Other(stat.size))
}

/// Writes `bytes` at `path` unless they are already there, with the size check of what
/// was found, then reads them back.
fn write_checked(dst: &dyn Storage, path: &Path, bytes: &[u8], state: Target) -> Result<()> {
    let expected = match state {
        Target::Same => return Ok(()),
        Target::Missing => ExpectedSize::Missing,
        Target::Other(n) => ExpectedSize::Bytes(n),
    };
    if let Some(parent) = path.parent() {
        dst.ensure_dir(parent)?;
    }
    dst.write_atomic(path, bytes, expected)?;
    let back = dst.read(path)?;
    if back != bytes {
        return Err(format!(
            "{}: the copy reads back as {} bytes that differ from the {} written; the target changed them",
            path.display(),
            back.len(),
            bytes.len()
        )
        .into());
    }
    Ok(())
}

/// Collects the files below `dir` (paths relative to it), following directories.
fn walk(s: &dyn Storage, dir: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries = s.read_dir(&dir.join(rel))?;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for e in entries {
        let child = rel.join(&e.name);
        match e.kind {
            EntryKind::File => out.push(child),
            EntryKind::Dir => walk(s, dir, &child, out)?,
            EntryKind::Symlink | EntryKind::Other => {
                return Err(format!(
                    "{}: not a regular file or directory; push and pull copy only those",
                    dir.join(&child).display()
                )
                .into());
            }
        }
    }
    Ok(())
}
