//! What a job shows about a path before it acts on it.

use std::path::{Path, PathBuf};

use session_model::{Dialect, HeaderCheck, SLOT_START, dialect_of, parse_session_bytes};
use session_store::{EntryKind, FileStat, Storage, StoreError, artifacts_dir, is_backup_of};

use super::JobError;
use super::homes::lexical;
use crate::error::unless_missing;

/// How much of a file is read to find its header (more only when no record starts in it).
const HEAD_BYTES: u64 = 1 << 20;

/// What [`prove_session`] showed about a session file.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionProof {
    /// The file, absolute (`.` and `..` resolved as text).
    pub path: PathBuf,
    /// Whose session it is.
    pub dialect: Dialect,
    /// The header's id.
    pub id: String,
    /// The file's stat when proved.
    pub stat: FileStat,
    /// Its artifacts directory: the file name without `.jsonl` when that is a plain name
    /// and a real directory is there (`None` otherwise).
    pub artifacts: Option<PathBuf>,
    /// What is named like its artifacts directory but is not one (a link, a file): left
    /// alone by every job.
    pub not_artifacts: Option<PathBuf>,
    /// Its backups (`<name>.<anything>.bak` beside it, regular files).
    pub backups: Vec<PathBuf>,
}

/// Returns the dialect a session file's first bytes say it is (omp when it starts with
/// a title slot, else pi); pi for a file that cannot be read.
pub fn detect_dialect(storage: &dyn Storage, path: &Path) -> Dialect {
    match storage.read_slices(path, SLOT_START.len() as u64, 0) {
        Ok((head, _)) => dialect_of(&head),
        Err(_) => Dialect::Pi,
    }
}

/// Proves that `path` holds a session of `dialect` (`None`: the dialect its first bytes
/// say, [`detect_dialect`]) before a job acts on it: a regular file, not a symbolic link
/// ([`JobError::Link`]), whose first record is a valid header of the dialect
/// ([`JobError::NotASession`]). Reads the file's start only (the whole file only when no
/// record starts in its first MiB). Writes nothing.
pub fn prove_session(storage: &dyn Storage, path: &Path, dialect: Option<Dialect>) -> Result<SessionProof, JobError> {
    let path = lexical(path);
    let (parent, name) = match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
        (Some(p), Some(n)) => (p.to_path_buf(), n.to_owned()),
        _ => return Err(JobError::BadPath { path }),
    };
    let entries = storage.read_dir(&parent)?;
    let kind_of = |n: &str| entries.iter().find(|e| e.name == n).map(|e| e.kind);
    match kind_of(&name) {
        None => return Err(StoreError::NotFound { path }.into()),
        Some(EntryKind::Symlink) => {
            let target = super::homes::real_path(&path);
            return Err(JobError::Link {
                path,
                target,
                hint: "name the session itself (the link's target), or remove the link on its own",
            });
        }
        Some(_) => {}
    }
    let stat = storage.stat(&path)?.ok_or_else(|| StoreError::NotFound { path: path.clone() })?;
    if !stat.is_file {
        return Err(JobError::NotASession {
            path,
            dialect: dialect.unwrap_or(Dialect::Pi),
            reason: "not a regular file".into(),
        });
    }
    let dialect = dialect.unwrap_or_else(|| detect_dialect(storage, &path));
    let (mut head, _) = storage.read_slices(&path, HEAD_BYTES, 0)?;
    if (head.len() as u64) < stat.size
        && let Some(end) = memchr::memrchr(b'\n', &head)
    {
        head.truncate(end + 1);
    }
    let mut parsed = parse_session_bytes(&head, dialect);
    if parsed.records.is_empty() && (head.len() as u64) < stat.size {
        parsed = parse_session_bytes(&storage.read(&path)?, dialect);
    }
    let id = match parsed.header_check(dialect) {
        HeaderCheck::Valid { index } => parsed.records[index].id().unwrap_or_default().to_owned(),
        HeaderCheck::Empty => {
            return Err(JobError::NotASession { path, dialect, reason: "it holds no record".into() });
        }
        HeaderCheck::Invalid { reason } => return Err(JobError::NotASession { path, dialect, reason }),
    };
    let (mut artifacts, mut not_artifacts) = (None, None);
    if let Some(dir) = artifacts_dir(&path) {
        let dir_name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        match kind_of(dir_name) {
            Some(EntryKind::Dir) => artifacts = Some(dir),
            Some(_) => not_artifacts = Some(dir),
            None => {}
        }
    }
    let mut backups: Vec<PathBuf> = entries
        .iter()
        .filter(|e| e.kind == EntryKind::File && is_backup_of(&name, &e.name))
        .map(|e| parent.join(&e.name))
        .collect();
    backups.sort();
    Ok(SessionProof { path, dialect, id, stat, artifacts, not_artifacts, backups })
}

/// Returns whether `dir` is a real folder (not a link to one), as its parent lists it
/// (a missing folder is not).
pub(super) fn is_real_dir(storage: &dyn Storage, dir: &Path) -> Result<bool, JobError> {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name().and_then(|n| n.to_str())) else { return Ok(false) };
    let entries = unless_missing(storage.read_dir(parent))?.unwrap_or_default();
    Ok(entries.iter().any(|e| e.name == name && e.kind == EntryKind::Dir))
}
