//! Checking every session of both agents and the blob store.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use session_model::Dialect;
use session_store::blob::{BlobRef, find_refs};
use session_store::{FileStorage, Storage};

use super::homes::real_path;
use super::walk::Walker;
use super::{Homes, JobError, RewriteOptions, detect_dialect, repair};
use crate::{Env, Session};

/// What [`fsck`] checks and does.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct FsckOptions {
    /// Reports only on sessions below these folders (empty: every session); every home
    /// is still read, for the blob store's findings.
    pub dirs: Vec<PathBuf>,
    /// Whose rules for every file (`None`: the root's, else each file's own first bytes).
    pub dialect: Option<Dialect>,
    /// Rewrites damaged sessions that load ([`repair`], with a backup).
    pub repair: bool,
    /// The blob store to check (`None`: none).
    pub blob_dir: Option<PathBuf>,
}

setters! { impl FsckOptions;
    /// Returns these options reporting only on sessions below `dirs`.
    #[must_use]
    dirs(dirs: &[PathBuf]) => dirs = dirs.to_vec();

    /// Returns these options with `dialect`'s rules for every file.
    #[must_use]
    dialect(dialect: Option<Dialect>) => dialect = dialect;

    /// Returns these options rewriting damaged sessions (`true`) or only reporting.
    #[must_use]
    repair(repair: bool) => repair = repair;

    /// Returns these options checking the blob store at `dir`.
    #[must_use]
    blob_dir(dir: &Path) => blob_dir = Some(dir.to_path_buf());
}

/// One thing [`fsck`] found wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Finding {
    /// The file or folder.
    pub path: PathBuf,
    /// What is wrong, for a person.
    pub message: String,
}

/// What [`fsck`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FsckReport {
    /// Sessions checked (each file once, however many roots or links lead to it).
    pub sessions: usize,
    /// What is wrong.
    pub findings: Vec<Finding>,
    /// Blobs a file refers to that the store lacks.
    pub missing_blobs: usize,
    /// Blobs of the store no file refers to (`gc` removes them).
    pub unreferenced_blobs: usize,
    /// Sessions rewritten by `repair`.
    pub repaired: usize,
}

/// Checks every session below `homes`' roots (each file once; pi and omp sharing a root
/// check each file by its own first bytes): torn tails, garbage lines, bad headers,
/// cycles, duplicate ids, unreadable files and folders, session files the agents do not
/// list (a name starting with a dot), special files, two files of one folder holding one
/// session (a file-sync tool's conflict copy, for [`super::merge`]); and the blob store: references to
/// missing blobs, blobs nothing refers to. `env` opens the sessions (read-only, except
/// for [`FsckOptions::repair`]).
pub fn fsck(env: &Env, homes: &Homes, options: &FsckOptions) -> Result<FsckReport, JobError> {
    let storage = env.storage.clone();
    let mut homes = homes.clone();
    for dir in &options.dirs {
        if homes.root_of(&dir.join("x")).is_none() {
            homes = homes.with_root(dir, options.dialect);
        }
    }
    let narrowed: Vec<PathBuf> = options.dirs.iter().map(|d| real_path(d)).collect();
    let reported = |p: &Path| narrowed.is_empty() || narrowed.iter().any(|d| real_path(p).starts_with(d));
    let mut report = FsckReport::default();
    let mut referenced: BTreeSet<String> = BTreeSet::new();
    let mut walker = Walker::new(&*storage);
    let mut files: Vec<(PathBuf, Option<Dialect>)> = Vec::new();
    for root in homes.roots() {
        let before = walker.found.files.len();
        walker.walk(&root.path);
        files.extend(walker.found.files[before..].iter().map(|(p, _)| (p.clone(), root.dialect)));
    }
    let found = std::mem::take(&mut walker.found);
    for (path, e) in found.unreadable {
        if reported(&path) {
            report.findings.push(Finding { path, message: format!("cannot be read: {e}") });
        }
    }
    for path in found.special {
        if reported(&path) {
            report.findings.push(Finding { path, message: "a FIFO, socket or device among sessions".into() });
        }
    }
    let mut copies: std::collections::HashMap<(PathBuf, String), PathBuf> = std::collections::HashMap::new();
    for (path, root_dialect) in files {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        match storage.read(&path) {
            Ok(bytes) => referenced.extend(find_refs(&bytes).map(|r| r.hash().to_owned())),
            Err(e) => {
                if reported(&path) {
                    report.findings.push(Finding { path, message: format!("unreadable: {e}") });
                }
                continue;
            }
        }
        // Sessions (subagents' below the artifacts too); backups and other artifacts
        // are read for their blob references only.
        if !name.ends_with(".jsonl") || !reported(&path) {
            continue;
        }
        if name.starts_with('.') {
            report.findings.push(Finding {
                path,
                message: "a session file whose name starts with a dot: the agents do not list it".into(),
            });
            continue;
        }
        report.sessions += 1;
        let dialect = options.dialect.or(root_dialect).unwrap_or_else(|| detect_dialect(&*storage, &path));
        let m = match Session::open(dialect, &path, env.clone()) {
            Ok(m) => m,
            Err(e) => {
                report
                    .findings
                    .push(Finding { path, message: format!("does not load as a {} session: {e}", dialect.name()) });
                continue;
            }
        };
        // Two files of one folder holding one session: a copy a file-sync tool made when
        // both machines wrote (`name.sync-conflict-….jsonl`, `name (conflicted copy).jsonl`).
        if let (Some(dir), Some(id)) = (path.parent(), m.header().get_str("id")) {
            match copies.entry((dir.to_path_buf(), id.to_owned())) {
                std::collections::hash_map::Entry::Occupied(first) if reported(&path) => {
                    // Into the file with the shorter name (the conflict copy's is longer).
                    let (into, from) = if path.as_os_str().len() < first.get().as_os_str().len() {
                        (&path, first.get())
                    } else {
                        (first.get(), &path)
                    };
                    report.findings.push(Finding {
                        path: path.clone(),
                        message: format!(
                            "another copy of the session in {} (a file-sync conflict copy?): `session merge {} {}` unites them",
                            first.get().display(),
                            shell_quote(into),
                            shell_quote(from)
                        ),
                    });
                }
                std::collections::hash_map::Entry::Occupied(_) => {}
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(path.clone());
                }
            }
        }
        let before = report.findings.len();
        for d in m.diagnostics() {
            report.findings.push(Finding { path: path.clone(), message: d.to_string() });
        }
        for d in m.tree().diagnostics() {
            report.findings.push(Finding { path: path.clone(), message: d.to_string() });
        }
        let damaged = report.findings.len() > before;
        drop(m);
        if damaged && options.repair {
            match repair(env, &path, &RewriteOptions::default().dialect(Some(dialect))) {
                Ok(r) if r.rewritten => report.repaired += 1,
                Ok(_) => {}
                Err(e) => report.findings.push(Finding { path, message: format!("repair failed: {e}") }),
            }
        }
    }
    if let Some(dir) = &options.blob_dir {
        let local = FileStorage::new();
        let mut stored = BTreeSet::new();
        let entries = match local.read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => {
                report.findings.push(Finding { path: dir.clone(), message: format!("cannot be read: {e}") });
                Vec::new()
            }
        };
        for e in entries {
            if let Some(blob) = BlobRef::from_hex(e.name.split('.').next().unwrap_or_default()) {
                stored.insert(blob.hash().to_owned());
            }
        }
        for hex in referenced.difference(&stored) {
            report.missing_blobs += 1;
            report.findings.push(Finding {
                path: dir.join(hex),
                message: "referenced by a session but missing from the blob store".into(),
            });
        }
        for hex in stored.difference(&referenced) {
            report.unreferenced_blobs += 1;
            report.findings.push(Finding {
                path: dir.join(hex),
                message: "no session refers to this blob (`session gc` removes it)".into(),
            });
        }
    }
    Ok(report)
}

/// Returns `path` quoted for a POSIX shell: in single quotes, a quote inside as `'\''`.
fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.to_string_lossy().replace('\'', "'\\''"))
}
