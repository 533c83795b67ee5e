//! Merging two copies of one session (the same header id): two continuations of a session
//! are two branches of one tree, so the merge is the union of their entries by id, each
//! written once, parents before children, with the leaf the user chooses last.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use session_model::{Dialect, ParsedFile, Record};
use session_store::{EntryKind, ExpectedSize, LockWait, Storage, StoreError, artifacts_dir};

use super::proof::is_real_dir;
use super::{JobError, prove_session};
use crate::error::unless_missing;

/// How long a merge waits for a writer that holds the session's lock.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Which entry is the merged session's leaf (its last line, where both agents resume).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum MergeLeaf {
    /// The leaf of the copy that went further: the other copy's leaf when it continues
    /// from this one's, else this copy's own (or the other's, when an entry of the
    /// other copy continues from this one's).
    #[default]
    Auto,
    /// The leaf of the copy merged into.
    Ours,
    /// The leaf of the copy merged from.
    Theirs,
    /// This entry.
    Id(String),
}

/// What [`merge`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MergeReport {
    /// The file merged into.
    pub path: PathBuf,
    /// Entries it gained.
    pub added: Vec<String>,
    /// Entries both copies hold with other bytes (a repair, a migration or a rewrite on
    /// one side, the same type and parent): this copy's bytes were kept.
    pub differing: Vec<String>,
    /// The merged session's leaf.
    pub leaf: String,
    /// Whether the file was written (a merge that adds nothing and keeps the leaf
    /// writes nothing).
    pub written: bool,
    /// Artifact files copied from the other copy (those whose names were free).
    pub artifacts_copied: usize,
    /// Artifact files (relative to the artifacts directory) both copies hold with other
    /// bytes: this copy's were kept.
    pub artifacts_differing: Vec<PathBuf>,
}

/// Merges the session at `theirs` into the copy at `ours` (see the module docs).
///
/// Both must be sessions of `dialect` (or of what their first bytes say) with the same
/// header id, every entry with an id, and no line their loader skips (repair first:
/// [`super::repair`]). Entries both hold must agree on their type and parent; if their
/// bytes differ otherwise, ours are kept ([`MergeReport::differing`]). The leaf goes
/// last; a leaf that another entry continues from cannot ([`JobError::BadLeaf`]).
///
/// `ours` is rewritten under its lock, only if it is still the file read (a line an
/// agent appended meanwhile makes the merge refuse with nothing written: run it again);
/// `theirs` is only read. Artifact files of `theirs` whose names are free in `ours`'
/// artifacts directory are copied (links and special files are not). Merging a copy
/// into itself, or merging twice, writes nothing.
///
/// # Errors
///
/// [`JobError::NotTheSameSession`], [`JobError::MergeConflict`], [`JobError::BadLeaf`],
/// [`JobError::Unsupported`] (an entry without an id, or a damaged line), store errors.
pub fn merge(
    storage: &dyn Storage,
    ours: &Path,
    theirs: &Path,
    dialect: Option<Dialect>,
    leaf: &MergeLeaf,
) -> Result<MergeReport, JobError> {
    let a = prove_session(storage, ours, dialect)?;
    let b = prove_session(storage, theirs, Some(a.dialect))?;
    if a.id != b.id {
        return Err(JobError::NotTheSameSession { ours: a.path, ours_id: a.id, theirs: b.path, theirs_id: b.id });
    }
    // Artifacts: only real directories, as proved (a link in either place is left alone).
    let their_artifacts = b.artifacts.clone();
    let our_artifacts = match (&a.artifacts, &a.not_artifacts) {
        (Some(dir), _) => Some(dir.clone()),
        (None, None) => artifacts_dir(&a.path),
        (None, Some(_)) => None,
    };
    let (ours, theirs, dialect) = (a.path, b.path, a.dialect);
    let lock = storage.lock(&ours, LockWait::Timeout(LOCK_WAIT))?;
    let mut bytes = Vec::new();
    let (stat, n) = storage.read_into(&ours, &mut bytes)?;
    bytes.truncate(n);
    let other = storage.read(&theirs)?;
    let merged = merge_bytes(
        MergeInput { path: &ours, bytes: &bytes },
        MergeInput { path: &theirs, bytes: &other },
        dialect,
        leaf,
    )
    .map_err(|e| match e {
        // Proved before the read: a header that no longer agrees changed meanwhile.
        JobError::NotTheSameSession { ours, .. } => {
            JobError::Unsupported { path: ours, what: "it changed while the merge read it; run it again".to_owned() }
        }
        e => e,
    })?;
    let mut report = MergeReport {
        path: ours.clone(),
        added: merged.added,
        differing: merged.differing,
        leaf: merged.leaf,
        ..MergeReport::default()
    };
    // The artifacts first: an error there leaves the session as it was (with some
    // artifact files more, which nothing names yet).
    if let (Some(from), Some(to)) = (&their_artifacts, &our_artifacts) {
        unite_artifacts(storage, from, to, &mut report)?;
    }
    if merged.bytes != bytes {
        storage.write_atomic(&ours, &merged.bytes, ExpectedSize::unchanged(Some(&stat)))?;
        report.written = true;
    }
    drop(lock);
    Ok(report)
}

/// One copy handed to [`merge_bytes`]: its bytes and the path its errors name.
#[derive(Clone, Copy, Debug)]
pub struct MergeInput<'a> {
    /// Where the bytes come from (named by errors only; never read).
    pub path: &'a Path,
    /// The whole file.
    pub bytes: &'a [u8],
}

/// What [`merge_bytes`] made of two copies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MergedBytes {
    /// The merged file: ours' bytes before and of its header, then every entry once.
    pub bytes: Vec<u8>,
    /// Entries of theirs that ours lacked, in their order.
    pub added: Vec<String>,
    /// Entries both copies hold with other bytes (the same type and parent): ours' bytes
    /// were kept.
    pub differing: Vec<String>,
    /// The merged session's leaf (its last entry; empty for a session without entries).
    pub leaf: String,
}

/// Returns the union of two copies of one session: ours' entries in their order, then
/// theirs' that ours lacks (each once, by id), parents before children, with the leaf
/// `leaf` chooses moved last. Bytes before ours' header (omp's title slot) and the header
/// are ours', and every entry keeps its own bytes (ours' where both hold it), unknown
/// fields and entry types included. Pure: no IO.
///
/// # Errors
///
/// [`JobError::NotTheSameSession`] (the headers' ids differ), [`JobError::MergeConflict`]
/// (an entry both hold with another type or parent), [`JobError::BadLeaf`],
/// [`JobError::Unsupported`] (no valid header, a line its loader skips, an entry without
/// an id), each naming the path of the copy at fault.
pub fn merge_bytes(
    ours: MergeInput<'_>,
    theirs: MergeInput<'_>,
    dialect: Dialect,
    leaf: &MergeLeaf,
) -> Result<MergedBytes, JobError> {
    let (pa, pb) = (
        session_model::parse_session_bytes(ours.bytes, dialect),
        session_model::parse_session_bytes(theirs.bytes, dialect),
    );
    let mut ids = Vec::with_capacity(2);
    for (input, parsed) in [(&ours, &pa), (&theirs, &pb)] {
        let path = input.path.to_path_buf();
        let id = parsed.records.first().and_then(|h| h.get_str("id"));
        let Some(id) = id.filter(|_| matches!(parsed.header_check(dialect), session_model::HeaderCheck::Valid { .. }))
        else {
            return Err(JobError::Unsupported { path, what: format!("no valid {} session header", dialect.name()) });
        };
        if let Some(d) = parsed.diagnostics.first() {
            return Err(JobError::Unsupported {
                path,
                what: format!("it holds lines its loader skips (line {}); repair it first (session repair)", d.line),
            });
        }
        if let Some(r) = parsed.records.iter().skip(1).find(|r| r.id().is_none()) {
            return Err(JobError::Unsupported {
                path,
                what: format!(
                    "an entry without an id ({}); migrate it first (session migrate)",
                    r.type_str().unwrap_or("?")
                ),
            });
        }
        ids.push(id.to_owned());
    }
    if ids[0] != ids[1] {
        return Err(JobError::NotTheSameSession {
            ours: ours.path.to_path_buf(),
            ours_id: ids[0].clone(),
            theirs: theirs.path.to_path_buf(),
            theirs_id: ids[1].clone(),
        });
    }
    let entries_a = pa.records.get(1..).unwrap_or_default();
    let entries_b = pb.records.get(1..).unwrap_or_default();
    let by_id: HashMap<&str, &Record> = entries_a.iter().filter_map(|r| Some((r.id()?, r))).collect();
    let mut report = MergedBytes::default();
    let mut merged: Vec<&Record> = entries_a.iter().collect();
    let mut seen_b = HashSet::new();
    for r in entries_b {
        let id = r.id().unwrap_or_default();
        if !seen_b.insert(id) {
            continue;
        }
        match by_id.get(id) {
            None => {
                merged.push(r);
                report.added.push(id.to_owned());
            }
            Some(mine) if mine.text() == r.text() => {}
            Some(mine) => {
                if mine.type_str() != r.type_str() || mine.parent_id() != r.parent_id() {
                    return Err(JobError::MergeConflict {
                        theirs: theirs.path.to_path_buf(),
                        id: id.to_owned(),
                        reason: "the copies give it another type or another parent".to_owned(),
                    });
                }
                report.differing.push(id.to_owned());
            }
        }
    }
    let leaf_a = entries_a.last().and_then(|r| r.id()).map(str::to_owned);
    let leaf_b = entries_b.last().and_then(|r| r.id()).map(str::to_owned);
    let parents: HashMap<&str, Option<&str>> = merged.iter().filter_map(|r| Some((r.id()?, r.parent_id()))).collect();
    let descends = |from: &str, to: &str| {
        let mut at = Some(from);
        let mut seen = HashSet::new();
        while let Some(id) = at {
            if id == to {
                return true;
            }
            if !seen.insert(id) {
                return false;
            }
            at = parents.get(id).copied().flatten();
        }
        false
    };
    let chosen = match leaf {
        MergeLeaf::Ours => leaf_a.clone(),
        MergeLeaf::Theirs => leaf_b.clone(),
        MergeLeaf::Id(id) => Some(id.clone()),
        // The other copy's leaf when it went on from ours, else ours, else theirs: the
        // first that no entry continues from.
        MergeLeaf::Auto => {
            let ahead = match (&leaf_a, &leaf_b) {
                (Some(a), Some(b)) if descends(b, a) => Some(b.clone()),
                _ => None,
            };
            let childless = |id: &String| !merged.iter().any(|r| r.parent_id() == Some(id.as_str()));
            [ahead, leaf_a.clone(), leaf_b.clone()].into_iter().flatten().find(childless).or(leaf_a.clone())
        }
    };
    if let Some(id) = &chosen {
        let Some(at) = merged.iter().position(|r| r.id() == Some(id)) else {
            return Err(JobError::BadLeaf { id: id.clone(), reason: "no entry of either copy has this id".to_owned() });
        };
        if merged.iter().any(|r| r.parent_id() == Some(id)) {
            return Err(JobError::BadLeaf {
                id: id.clone(),
                reason: "another entry continues from it (choose that branch's last entry)".to_owned(),
            });
        }
        let r = merged.remove(at);
        merged.push(r);
        report.leaf = id.clone();
    }
    report.bytes = render(ours.bytes, &pa, &merged);
    Ok(report)
}

/// The merged file: `ours`' bytes before its header (omp's title slot, as it is), its
/// header as it is, then `entries`, one a line.
fn render(ours: &[u8], parsed: &ParsedFile, entries: &[&Record]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ours.len());
    let head = parsed.record_offsets.first().copied().unwrap_or(0).min(ours.len());
    out.extend_from_slice(&ours[..head]);
    for r in parsed.records.first().into_iter().chain(entries.iter().copied()) {
        out.extend_from_slice(r.text().as_bytes());
        out.push(b'\n');
    }
    out
}

/// Copies the regular files below the real directory `from` into `to` where their names
/// are free (folders made as needed; a link on the way, in either tree, is not followed:
/// what is below it is left out); counts them in `report`, and names those whose place
/// holds other bytes.
fn unite_artifacts(storage: &dyn Storage, from: &Path, to: &Path, report: &mut MergeReport) -> Result<(), JobError> {
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        // The folder at `to` must be a real one (or not yet there).
        if !rel.as_os_str().is_empty() || storage.stat(to)?.is_some() {
            let here = to.join(&rel);
            if storage.stat(&here)?.is_some() && !is_real_dir(storage, &here)? {
                continue;
            }
        }
        let Some(entries) = unless_missing(storage.read_dir(&from.join(&rel)))? else { continue };
        for e in entries {
            let rel = rel.join(&e.name);
            match e.kind {
                EntryKind::Dir => stack.push(rel),
                EntryKind::File => {
                    let (src, dst) = (from.join(&rel), to.join(&rel));
                    let bytes = storage.read(&src)?;
                    if storage.stat(&dst)?.is_some() {
                        if storage.read(&dst).ok().as_deref() != Some(&bytes[..]) {
                            report.artifacts_differing.push(rel);
                        }
                        continue;
                    }
                    if let Some(dir) = dst.parent() {
                        storage.ensure_dir(dir)?;
                    }
                    match storage.write_new(&dst, &bytes) {
                        Ok(()) => report.artifacts_copied += 1,
                        Err(StoreError::AlreadyExists { .. }) => report.artifacts_differing.push(rel),
                        Err(e) => return Err(e.into()),
                    }
                }
                _ => {}
            }
        }
    }
    Ok(())
}
