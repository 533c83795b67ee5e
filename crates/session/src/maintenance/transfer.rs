//! Copying a session and its artifacts between two storages, byte for byte.

use std::path::{Component, Path, PathBuf};

use session_store::{EntryKind, ExpectedSize, Storage, artifacts_dir, is_plain_name};

use super::homes::lexical;
use super::{JobError, prove_session};

/// How deep an artifacts directory is copied.
const MAX_DEPTH: usize = 64;

/// What [`push`] and [`pull`] do.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct TransferOptions {
    /// Replaces different files already at the target.
    pub force: bool,
}

setters! { impl TransferOptions;
    /// Returns these options replacing (`true`) or refusing different files at the target.
    #[must_use]
    force(force: bool) => force = force;
}

/// What one copy did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Copied {
    /// The session's path in the target.
    pub path: PathBuf,
    /// Its bytes.
    pub bytes: u64,
    /// How many artifact files came with it.
    pub artifacts: usize,
    /// The target already held these exact bytes (nothing written).
    pub unchanged: bool,
}

/// Copies the session at `file` in `from` (the local files) to the same path in `to`
/// (absolute, `.` and `..` resolved as text), with its artifacts directory. The source
/// must be a session ([`prove_session`]). A different file at the target is replaced
/// only with [`TransferOptions::force`]; every refusal comes before the first write.
/// Artifacts are written first and the session last, each read back after.
pub fn push(from: &dyn Storage, file: &Path, to: &dyn Storage, options: &TransferOptions) -> Result<Copied, JobError> {
    let path = lexical(file);
    prove_session(from, &path, None)?;
    copy(from, &path, to, &path, options)
}

/// Copies the session at `source` in `from` (an absolute path without `.` or `..`
/// segments, [`JobError::BadPath`]) into the local directory `dir` of `to`, with its
/// artifacts directory. The source must be a session; nothing below `dir` may be a
/// symbolic link where the copy writes ([`JobError::LinkInTheWay`]); artifacts named
/// `.` or `..`, or nested too deep, are refused. Every refusal comes before the first
/// write.
pub fn pull(
    from: &dyn Storage,
    source: &Path,
    to: &dyn Storage,
    dir: &Path,
    options: &TransferOptions,
) -> Result<Copied, JobError> {
    // By its text: `Path::components` would quietly drop a `.` segment.
    let text = source.to_string_lossy();
    let plain = source.is_absolute()
        && text.split('/').skip(1).all(|seg| !seg.is_empty() && seg != "." && seg != "..")
        && source.components().all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if !plain {
        return Err(JobError::BadPath { path: source.to_path_buf() });
    }
    prove_session(from, source, None)?;
    let name = source.file_name().ok_or_else(|| JobError::BadPath { path: source.to_path_buf() })?;
    let target = lexical(dir).join(name);
    copy(from, source, to, &target, options)
}

/// Copies the session `from` in `src` to `to` in `dst` with its artifacts directory.
fn copy(
    src: &dyn Storage,
    from: &Path,
    dst: &dyn Storage,
    to: &Path,
    options: &TransferOptions,
) -> Result<Copied, JobError> {
    let bytes = src.read(from)?;
    let mut artifacts = Vec::new();
    if let Some(dir) = artifacts_dir(from) {
        walk(src, &dir, Path::new(""), 0, &mut artifacts)?;
    }
    let to_artifacts = artifacts_dir(to);
    if to_artifacts.is_none() && !artifacts.is_empty() {
        return Err(JobError::BadPath { path: to.to_path_buf() });
    }
    // Every refusal comes before the first write.
    let base = to.parent().unwrap_or(Path::new("/"));
    no_link_below(dst, base, to)?;
    let session_state = check_target(dst, to, &bytes, options.force)?;
    let mut planned = Vec::new();
    for rel in &artifacts {
        let (Some(from_dir), Some(to_dir)) = (artifacts_dir(from), &to_artifacts) else { break };
        let data = src.read(&from_dir.join(rel))?;
        let target = to_dir.join(rel);
        no_link_below(dst, base, &target)?;
        let state = check_target(dst, &target, &data, options.force)?;
        planned.push((target, data, state));
    }
    // Artifacts first, the session last: a session that is there is there whole. A
    // failure says how far the copy got, so that running it again finishes it.
    for (done, (target, data, state)) in planned.iter().enumerate() {
        write_checked(dst, target, data, *state).map_err(|e| JobError::Partial {
            done: format!(
                "{done} of {} artifacts of {} were copied before the failure and the session file was not; run the command again to finish",
                planned.len(),
                to.display()
            ),
            source: Box::new(e),
        })?;
    }
    write_checked(dst, to, &bytes, session_state).map_err(|e| JobError::Partial {
        done: format!(
            "its {} artifacts were copied, the session file was not; run the command again to finish",
            planned.len()
        ),
        source: Box::new(e),
    })?;
    Ok(Copied {
        path: to.to_path_buf(),
        bytes: bytes.len() as u64,
        artifacts: artifacts.len(),
        unchanged: session_state == Target::Same,
    })
}

/// Refuses a symbolic link at `path` or at any folder between `base` and it.
fn no_link_below(dst: &dyn Storage, base: &Path, path: &Path) -> Result<(), JobError> {
    let Ok(rest) = path.strip_prefix(base) else { return Ok(()) };
    let mut at = base.to_path_buf();
    for part in rest.components() {
        let name = part.as_os_str().to_string_lossy().into_owned();
        let entries = dst.read_dir(&at)?;
        match entries.iter().find(|e| e.name == name).map(|e| e.kind) {
            Some(EntryKind::Symlink) => return Err(JobError::LinkInTheWay { path: at.join(&name) }),
            Some(_) => at.push(&name),
            // Nothing there yet: nothing below it either.
            None => return Ok(()),
        }
    }
    Ok(())
}

/// What the target holds at a path before the copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// Nothing.
    Missing,
    /// The same bytes: nothing to write.
    Same,
    /// Other bytes, this many (only with `force`).
    Other(u64),
}

fn check_target(dst: &dyn Storage, path: &Path, bytes: &[u8], force: bool) -> Result<Target, JobError> {
    let Some(stat) = dst.stat(path)? else { return Ok(Target::Missing) };
    if !stat.is_file {
        return Err(JobError::DirectoryInTheWay { path: path.to_path_buf() });
    }
    if stat.size == bytes.len() as u64 && dst.read(path)? == bytes {
        return Ok(Target::Same);
    }
    if !force {
        return Err(JobError::TargetDiffers { path: path.to_path_buf(), found: stat.size, size: bytes.len() as u64 });
    }
    Ok(Target::Other(stat.size))
}

/// Writes `bytes` at `path` unless they are already there, with the size check of what
/// was found, then reads them back.
fn write_checked(dst: &dyn Storage, path: &Path, bytes: &[u8], state: Target) -> Result<(), JobError> {
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
        return Err(JobError::ReadBackDiffers {
            path: path.to_path_buf(),
            written: bytes.len() as u64,
            read: back.len() as u64,
        });
    }
    Ok(())
}

/// Collects the files below `dir` (paths relative to it), following directories; a name
/// that is not plain (`.`, `..`), a link, a special file or too deep a tree is refused.
fn walk(s: &dyn Storage, dir: &Path, rel: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<(), JobError> {
    let here = dir.join(rel);
    if depth > MAX_DEPTH {
        return Err(JobError::Unsupported {
            path: here,
            what: format!("artifacts nested deeper than {MAX_DEPTH} folders"),
        });
    }
    let mut entries = s.read_dir(&here)?;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for e in entries {
        if !is_plain_name(&e.name) {
            return Err(JobError::BadPath { path: here.join(&e.name) });
        }
        let child = rel.join(&e.name);
        match e.kind {
            EntryKind::File => out.push(child),
            EntryKind::Dir => walk(s, dir, &child, depth + 1, out)?,
            EntryKind::Symlink | EntryKind::Other => {
                return Err(JobError::Unsupported {
                    path: dir.join(&child),
                    what: "not a regular file or directory; push and pull copy only those".into(),
                });
            }
        }
    }
    Ok(())
}
