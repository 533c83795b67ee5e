//! Deleting the blobs no session refers to, and nothing else.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use session_store::blob::{BlobRef, find_refs};
use session_store::{FileStorage, Storage, StoreError};

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

impl GcOptions {
    /// Returns these options with the grace period `grace`.
    #[must_use]
    pub fn grace(mut self, grace: Duration) -> GcOptions {
        self.grace = grace;
        self
    }

    /// Returns these options deleting (`true`) or only reporting.
    #[must_use]
    pub fn delete(mut self, delete: bool) -> GcOptions {
        self.delete = delete;
        self
    }
}

/// One blob of the store: its files (the canonical file and its typed sidecars).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlobUse {
    /// Its SHA-256.
    pub hash: String,
    /// Its files: the canonical `<hash>` (when present) and sidecars `<hash>.<ext>`.
    pub files: Vec<PathBuf>,
    /// Their bytes (a sidecar that is a hard link of the canonical file counted again).
    pub bytes: u64,
    /// When it last changed (the newest of its files), in ms since the epoch.
    pub modified_ms: i64,
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
    pub unused: Vec<BlobUse>,
    /// Blobs no file refers to yet, younger than the grace period: kept.
    pub recent: Vec<BlobUse>,
    /// Whether the unused blobs were deleted.
    pub deleted: bool,
}

/// Finds (and with [`GcOptions::delete`] deletes) the blobs of the store at `blob_dir` on
/// `blob_storage` (this machine's files, where omp keeps them) that no file in any of
/// `homes`' roots refers to.
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
    blob_storage: &dyn Storage,
    blob_dir: &Path,
    options: &GcOptions,
    now_ms: i64,
) -> Result<GcReport, JobError> {
    let local = blob_storage;
    // The blobs first: one stored after this is not a candidate.
    let stored = list_blobs(local, blob_dir)?;
    let mut report = GcReport { blobs: stored.len(), ..GcReport::default() };
    let referenced = scan_references(storages, homes, &mut report)?;
    if !stored.is_empty() && report.sessions == 0 {
        return Err(JobError::NoSessions { roots: report.roots.clone(), blobs: stored.len() });
    }
    let grace_ms = i64::try_from(options.grace.as_millis()).unwrap_or(i64::MAX);
    let cutoff = now_ms.saturating_sub(grace_ms);
    for blob in stored.into_values() {
        if referenced.contains(&blob.hash) {
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
            let now = blob_state(local, &blob.files)?;
            if now > cutoff {
                kept.push(blob);
                continue;
            }
            // Sidecars first: a crash leaves the canonical file, found by the next gc.
            for file in blob.files.iter().rev() {
                match local.unlink(file) {
                    Ok(()) | Err(StoreError::NotFound { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            report.unused.push(blob);
        }
        report.recent.extend(kept);
        report.deleted = true;
    }
    Ok(report)
}

/// Returns the newest modification time of `files` (0 when none is left).
fn blob_state(local: &dyn Storage, files: &[PathBuf]) -> Result<i64, JobError> {
    let mut newest = 0;
    for f in files {
        if let Some(st) = local.stat(f)? {
            newest = newest.max(st.mtime_ms);
        }
    }
    Ok(newest)
}

/// Returns the blobs of the store at `dir` by hash (a missing store has none); a store
/// that cannot be listed is an error.
fn list_blobs(local: &dyn Storage, dir: &Path) -> Result<BTreeMap<String, BlobUse>, JobError> {
    let entries = local.read_dir(dir).map_err(|e| JobError::Unreadable { path: dir.to_path_buf(), source: e })?;
    let mut blobs: BTreeMap<String, BlobUse> = BTreeMap::new();
    for e in entries {
        let hex = e.name.split('.').next().unwrap_or_default();
        let (Some(blob), true) = (BlobRef::from_hex(hex), e.kind == session_store::EntryKind::File) else {
            continue;
        };
        let path = dir.join(&e.name);
        let Some(st) = local.stat(&path)? else { continue };
        let entry = blobs.entry(blob.hash().to_owned()).or_insert_with(|| BlobUse {
            hash: blob.hash().to_owned(),
            files: Vec::new(),
            bytes: 0,
            modified_ms: 0,
        });
        entry.bytes += st.size;
        entry.modified_ms = entry.modified_ms.max(st.mtime_ms);
        entry.files.push(path);
    }
    for blob in blobs.values_mut() {
        // The canonical file (the shortest name) first.
        blob.files.sort_by_key(|p| p.as_os_str().len());
    }
    Ok(blobs)
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
