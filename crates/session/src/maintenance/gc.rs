//! Deleting the blobs no session refers to, and nothing else.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use session_store::blob::{BlobStore, StoredBlob, find_refs};
use session_store::{FileStorage, Storage};

use super::walk::Walker;
use super::{Homes, JobError};

/// What [`gc`] does.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct GcOptions {
    /// Blobs changed less than this long ago are never deleted: a writer stores a blob
    /// before it writes the line that refers to it (default: one day).
    pub grace: Duration,
    /// Deletes the unused blobs; without it, only reports them.
    pub delete: bool,
}

impl Default for GcOptions {
    fn default() -> GcOptions {
        GcOptions { grace: Duration::from_secs(24 * 60 * 60), delete: false }
    }
}

setters! { impl GcOptions;
    /// Returns these options with the grace period `grace`.
    #[must_use]
    grace(grace: Duration) => grace = grace;

    /// Returns these options deleting (`true`) or only reporting.
    #[must_use]
    delete(delete: bool) => delete = delete;
}

/// What [`gc`] found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GcReport {
    /// The folders scanned for references.
    pub roots: Vec<PathBuf>,
    /// Files read for references (sessions, backups, artifacts, registered sessions).
    pub files_scanned: usize,
    /// Session files among them (`*.jsonl`).
    pub sessions: usize,
    /// Blobs in the store.
    pub blobs: usize,
    /// Blobs some file refers to.
    pub referenced: usize,
    /// Blobs no file refers to, older than the grace period: deleted with
    /// [`GcOptions::delete`], else what would be.
    pub unused: Vec<StoredBlob>,
    /// Blobs no file refers to yet, younger than the grace period: kept.
    pub recent: Vec<StoredBlob>,
    /// Whether the unused blobs were deleted.
    pub deleted: bool,
}

/// Finds (and with [`GcOptions::delete`] deletes) the blobs of `blobs` (omp's store on
/// this machine's files, or a store on a server) that no file in any of `homes`' roots
/// refers to.
///
/// What it reads: the blob list first, then every file below every root of `homes`
/// (sessions, backups, artifacts, subagent sessions; links to folders followed, each
/// file once) and below each root's trash (a trashed session keeps its blobs), on each storage of `storages` (the local files, and a server the
/// sessions are kept on), and each session omp registered as kept elsewhere
/// (`custom-session-files`). A reference is `blob:sha256:<64 hex>` anywhere in a file.
///
/// What it refuses (deleting nothing): a folder or file it cannot read
/// ([`JobError::Unreadable`]), a compressed archive ([`JobError::CompressedArchive`]),
/// and no session at all while blobs exist ([`JobError::NoSessions`]).
///
/// What it may delete: a blob no file referred to when the scan ran and whose files
/// changed longer than [`GcOptions::grace`] ago, looked at again just before it goes.
/// A writer stores a blob (a put of a blob already there renews its time) before it
/// writes the line that refers to it, so a blob being referenced right now is younger
/// than the grace period. A crash part-way leaves some of the unused blobs.
pub fn gc(
    storages: &[&dyn Storage],
    homes: &Homes,
    blobs: &BlobStore,
    options: &GcOptions,
    now_ms: i64,
) -> Result<GcReport, JobError> {
    // The blobs first: one stored after this is not a candidate.
    let stored = blobs.list().map_err(|e| JobError::Unreadable { path: blobs.dir().to_path_buf(), source: e })?;
    let mut report = GcReport { blobs: stored.len(), ..GcReport::default() };
    let referenced = scan_references(storages, homes, &mut report)?;
    if !stored.is_empty() && report.sessions == 0 {
        return Err(JobError::NoSessions { roots: report.roots.clone(), blobs: stored.len() });
    }
    let grace_ms = i64::try_from(options.grace.as_millis()).unwrap_or(i64::MAX);
    let cutoff = now_ms.saturating_sub(grace_ms);
    for blob in stored {
        if referenced.contains(blob.blob.hash()) {
            report.referenced += 1;
        } else if blob.modified_ms < cutoff {
            report.unused.push(blob);
        } else {
            report.recent.push(blob);
        }
    }
    if options.delete {
        let mut kept = Vec::new();
        for blob in std::mem::take(&mut report.unused) {
            // Looked at again: a blob stored again since the list is new again.
            if blobs.modified_ms(&blob)? > cutoff {
                kept.push(blob);
                continue;
            }
            // Sidecars first: a crash leaves the canonical file, found by the next gc.
            blobs.remove(&blob)?;
            report.unused.push(blob);
        }
        report.recent.extend(kept);
        report.deleted = true;
    }
    Ok(report)
}

/// Reads every file below the roots of `homes` on each storage, and the sessions omp
/// registered as kept elsewhere, and returns the hashes they refer to.
fn scan_references(
    storages: &[&dyn Storage],
    homes: &Homes,
    report: &mut GcReport,
) -> Result<BTreeSet<String>, JobError> {
    let mut referenced = BTreeSet::new();
    let local = FileStorage::new();
    report.roots = homes.roots().iter().map(|r| r.path.clone()).collect();
    for &storage in storages {
        let mut walker = Walker::new(storage);
        for root in homes.roots() {
            walker.walk(&root.path);
        }
        // Trashed sessions keep their blobs: restoring one brings back what it names.
        for trash in homes.trashes() {
            walker.walk(&trash);
        }
        // omp's registry of sessions kept outside its roots: local files naming paths.
        for registry in homes.registries() {
            let entries = local
                .read_dir(registry)
                .map_err(|e| JobError::Unreadable { path: registry.to_path_buf(), source: e })?;
            for e in entries {
                let entry = registry.join(&e.name);
                let named = local.read(&entry).map_err(|e| JobError::Unreadable { path: entry.clone(), source: e })?;
                let named = String::from_utf8_lossy(&named);
                let named = named.trim();
                if !named.is_empty() {
                    walker.visit_file(Path::new(named));
                }
            }
        }
        let found = walker.found;
        if let Some((path, source)) = found.unreadable.into_iter().next() {
            return Err(JobError::Unreadable { path, source });
        }
        for (path, _) in &found.files {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name.ends_with(".jsonl.gz") {
                return Err(JobError::CompressedArchive { path: path.clone() });
            }
            let text = storage.read(path).map_err(|e| JobError::Unreadable { path: path.clone(), source: e })?;
            report.files_scanned += 1;
            if name.ends_with(".jsonl") {
                report.sessions += 1;
            }
            referenced.extend(find_refs(&text).map(|r| r.hash().to_owned()));
        }
    }
    Ok(referenced)
}
