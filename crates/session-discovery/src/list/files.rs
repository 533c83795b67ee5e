//! Which files a listing reads: each reference's session files of a directory, and of
//! every bucket below the sessions root, in the order it reads them.

use std::path::{Path, PathBuf};

use session_store::{EntryKind, Storage};

use crate::error::DiscoveryError;
use crate::io;
use crate::sort::collation_key;

/// The session files a listing reads, and the entries it skips.
#[derive(Debug, Default)]
pub(super) struct Listed {
    pub(super) files: Vec<PathBuf>,
    pub(super) skipped: Vec<PathBuf>,
}

impl Listed {
    fn extend(&mut self, other: Listed) {
        self.files.extend(other.files);
        self.skipped.extend(other.skipped);
    }
}

/// pi's session files of a flat directory: `*.jsonl` names, descending by
/// `localeCompare`. A missing directory has none.
pub(super) fn pi_dir_files(storage: &dyn Storage, dir: &Path) -> Result<Listed, DiscoveryError> {
    let entries = list_dir(storage, dir)?;
    let (mut names, skipped) = split_special(entries.into_iter().filter(|e| e.name.ends_with(".jsonl")));
    names.sort_by_cached_key(|e| std::cmp::Reverse(collation_key(&e.name)));
    Ok(Listed { files: names.into_iter().map(|e| e.path).collect(), skipped })
}

/// Lists a directory of sessions: a missing one has none, one that cannot be read is
/// an error.
fn list_dir(storage: &dyn Storage, dir: &Path) -> Result<Vec<io::DirEntry>, DiscoveryError> {
    io::read_dir(storage, dir).map_err(|e| DiscoveryError::ReadDir { path: dir.to_path_buf(), source: io::to_io(e) })
}

/// Separates the entries that are neither files, directories nor links (FIFOs, sockets,
/// devices, as the directory itself reports them) from the rest. A link to such a
/// thing is kept: its open refuses it without waiting.
fn split_special(entries: impl Iterator<Item = io::DirEntry>) -> (Vec<io::DirEntry>, Vec<PathBuf>) {
    let mut skipped = Vec::new();
    let kept = entries
        .filter_map(|e| {
            if e.kind != EntryKind::Other {
                Some(e)
            } else {
                skipped.push(e.path);
                None
            }
        })
        .collect();
    (kept, skipped)
}

/// omp's session files of a directory (`*.jsonl` glob: regular files, no dot files).
pub(super) fn omp_dir_files(storage: &dyn Storage, dir: &Path) -> Result<Listed, DiscoveryError> {
    let entries = list_dir(storage, dir)?;
    let (kept, skipped) =
        split_special(entries.into_iter().filter(|e| e.name.ends_with(".jsonl") && !e.name.starts_with('.')));
    let files = kept
        .into_iter()
        .filter(|e| match e.kind {
            EntryKind::File => true,
            EntryKind::Symlink => io::stat(storage, &e.path).is_some_and(|s| s.is_file),
            EntryKind::Dir | EntryKind::Other => false,
        })
        .map(|e| e.path)
        .collect();
    Ok(Listed { files, skipped })
}

/// Session files one level below the sessions root. pi: subdirectories and
/// symlinks, every `*.jsonl` name; omp: the `*/*.jsonl` glob.
pub(super) fn bucket_files(storage: &dyn Storage, root: &Path, omp: bool) -> Result<Listed, DiscoveryError> {
    let buckets = list_dir(storage, root)?;
    let mut out = Listed::default();
    for b in buckets.into_iter().filter(io::DirEntry::is_dir_or_symlink) {
        if omp && b.name.starts_with('.') {
            continue;
        }
        let files = if omp { omp_dir_files(storage, &b.path) } else { pi_dir_files(storage, &b.path) };
        if let Ok(f) = files {
            out.extend(f);
        }
    }
    Ok(out)
}
