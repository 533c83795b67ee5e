//! The jobs that rewrite a session whole: repair, migrate and move. Each works under the
//! session's lock, from what it read, guarded by what it read, and starts over when the
//! file changed meanwhile; a backup of the bytes it replaces is written first.

use std::path::{Path, PathBuf};
use std::time::Duration;

use session_model::Dialect;
use session_store::{FileStat, LockWait, Storage, StoreError};

use super::{JobError, prove_session};
use crate::{Env, SessionError, SessionManager};

/// How many times a rewrite reads the session again after finding it changed before it
/// gives up ([`JobError::KeptChanging`]).
pub const REWRITE_TRIES: usize = 5;

/// How long a rewrite waits for a writer that holds the session's lock.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// What [`repair`] and [`migrate`] do.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct RewriteOptions {
    /// Whose rules (`None`: the file's own first bytes say).
    pub dialect: Option<Dialect>,
    /// Writes no backup of the replaced bytes.
    pub no_backup: bool,
}

setters! { impl RewriteOptions;
    /// Returns these options with the dialect `dialect`.
    #[must_use]
    dialect(dialect: Option<Dialect>) => dialect = dialect;

    /// Returns these options without (`true`) or with a backup.
    #[must_use]
    no_backup(no_backup: bool) => no_backup = no_backup;
}

/// What [`repair`] or [`migrate`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RewriteReport {
    /// The session file.
    pub path: PathBuf,
    /// Whose rules applied.
    pub dialect: Dialect,
    /// What the loader skipped or repaired (the lines the rewrite leaves out).
    pub findings: usize,
    /// The file was of an older version.
    pub migrated: bool,
    /// The version it had, as written.
    pub migrated_from: Option<String>,
    /// The file was rewritten.
    pub rewritten: bool,
    /// The backup of the bytes replaced.
    pub backup: Option<PathBuf>,
    /// How many times the session was read (more than once when it changed meanwhile).
    pub tries: usize,
    /// Bytes another writer appended while the rewrite ran, kept after it.
    pub carried: u64,
}

/// Rewrites the session at `path` as the loader reads it (garbage lines, a torn last
/// line and blank lines left out, an older version migrated), keeping the bytes it
/// replaces as `<file>.<epoch ms>.bak` unless [`RewriteOptions::no_backup`]. A clean
/// file is not written. See [`super`] for the guarantees every rewrite keeps.
pub fn repair(env: &Env, path: &Path, options: &RewriteOptions) -> Result<RewriteReport, JobError> {
    rewrite(env, path, options, Job::Repair)
}

/// Rewrites the session at `path` in format version 3, keeping the bytes it replaces as
/// `<file>.<epoch ms>.bak` unless [`RewriteOptions::no_backup`]. A file already at
/// version 3 is not written.
pub fn migrate(env: &Env, path: &Path, options: &RewriteOptions) -> Result<RewriteReport, JobError> {
    rewrite(env, path, options, Job::Migrate)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Job {
    Repair,
    Migrate,
}

fn rewrite(env: &Env, path: &Path, options: &RewriteOptions, job: Job) -> Result<RewriteReport, JobError> {
    let storage = env.storage.clone();
    let proof = prove_session(&*storage, path, options.dialect)?;
    let (path, dialect) = (proof.path, proof.dialect);
    let lock = storage.lock(&path, LockWait::Timeout(LOCK_WAIT))?;
    let mut report = RewriteReport {
        path: path.clone(),
        dialect,
        findings: 0,
        migrated: false,
        migrated_from: None,
        rewritten: false,
        backup: None,
        tries: 0,
        carried: 0,
    };
    let mut settled = false;
    while !settled && report.tries < REWRITE_TRIES {
        report.tries += 1;
        // The bytes the rewrite replaces, the stat of the file they are read from, and
        // what the loader would skip or migrate in them.
        let mut bytes = Vec::new();
        let (stat, n) = storage.read_into(&path, &mut bytes)?;
        bytes.truncate(n);
        let parsed = session_model::parse_session_bytes(&bytes, dialect);
        report.findings = parsed.diagnostics.len();
        let mut records = parsed.records;
        let migration = session_migrate::migrate(&mut records, &mut || String::new());
        report.migrated = migration.ran();
        report.migrated_from = if report.migrated { migration.found_version.clone() } else { None };
        let needed = match job {
            Job::Repair => report.findings > 0 || report.migrated,
            Job::Migrate => report.migrated,
        };
        if !needed {
            settled = true;
            break;
        }
        let backup = match options.no_backup {
            true => None,
            false => Some(write_backup(&*storage, &path, &bytes, env.now_ms())?),
        };
        match rewrite_once(env, &path, dialect, &stat) {
            Ok(Some(carried)) => {
                report.rewritten = true;
                report.backup = backup;
                report.carried = carried;
                settled = true;
            }
            // Changed since it was read: read again.
            Ok(None) | Err(JobError::Session(SessionError::Store(StoreError::Conflict { .. }))) => {
                if let Some(b) = backup {
                    storage.unlink(&b)?;
                }
            }
            Err(e) => {
                if let Some(b) = &backup
                    && e.store().is_none_or(|s| s.landed().is_none())
                {
                    let _ = storage.unlink(b);
                }
                return Err(e);
            }
        }
    }
    drop(lock);
    if !settled {
        return Err(JobError::KeptChanging { path, tries: report.tries });
    }
    Ok(report)
}

/// Opens the session as its agent does and rewrites it whole, when the file is still the
/// one of `stat`; returns the bytes appended by another writer meanwhile (`None`: the
/// file had changed, nothing was written by the rewrite).
fn rewrite_once(env: &Env, path: &Path, dialect: Dialect, stat: &FileStat) -> Result<Option<u64>, JobError> {
    let mut m = match SessionManager::open_guarded(dialect, path, env.clone(), stat) {
        Ok(m) => m,
        // Changed between the read and the open, before the open wrote anything: start over.
        Err(SessionError::Store(StoreError::Conflict { .. })) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    // pi writes a migration whole when it opens the file (garbage left out): that was
    // the rewrite. Anything else (omp, or pi's repaired last line alone) is written now.
    let report = m.load_report();
    if !(report.wrote && report.migrated) {
        m.rewrite_entries()?;
    }
    let written = m.known_size();
    m.close()?;
    let now = env.storage.stat(path)?.map(|s| s.size);
    Ok(Some(match (now, written) {
        (Some(now), Some(written)) => now.saturating_sub(written),
        _ => 0,
    }))
}

/// Writes `bytes` as a new backup of `file`, `<file>.<epoch ms>.bak` (omp's backup
/// naming), and returns its path. The backup is not synced: after a power loss it may be
/// missing or short (the session itself is whole either way).
fn write_backup(storage: &dyn Storage, file: &Path, bytes: &[u8], now_ms: i64) -> Result<PathBuf, JobError> {
    for ms in now_ms.. {
        let mut name = file.as_os_str().to_owned();
        name.push(format!(".{ms}.bak"));
        let backup = PathBuf::from(name);
        match storage.write_new(&backup, bytes) {
            Ok(()) => return Ok(backup),
            Err(StoreError::AlreadyExists { .. }) if ms < now_ms + 1000 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(StoreError::AlreadyExists { path: file.to_path_buf() }.into())
}

/// What [`relocate`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelocateReport {
    /// Where the session was.
    pub from: PathBuf,
    /// Where it is now.
    pub to: PathBuf,
    /// Whether it moved (a move to where it is changes nothing).
    pub moved: bool,
    /// Lines the move's rewrite left out (garbage, a torn last line), kept in `backup`.
    pub dropped: usize,
    /// The backup of the session's bytes as they were, beside its new place, when the
    /// rewrite left lines out.
    pub backup: Option<PathBuf>,
}

/// Moves the session at `path` to the project `new_cwd` (into its bucket, or into
/// `session_dir`) as [`SessionManager::move_to`] does, after proving it is a session,
/// under its lock. When the move's rewrite leaves lines out (garbage, a torn last line),
/// a backup of the session's bytes is written beside its new place first
/// (`<new file>.<epoch ms>.bak`) and removed again if the move fails. Artifacts move
/// with it; across file systems, links in them are made again and a FIFO, socket or
/// device refuses the move before anything changes.
pub fn relocate(
    env: &Env,
    path: &Path,
    dialect: Option<Dialect>,
    new_cwd: &str,
    session_dir: Option<&Path>,
) -> Result<RelocateReport, JobError> {
    let storage = env.storage.clone();
    let proof = prove_session(&*storage, path, dialect)?;
    let (path, dialect) = (proof.path, proof.dialect);
    let lock = storage.lock(&path, LockWait::Timeout(LOCK_WAIT))?;
    // A backup an earlier try kept (its open wrote before the move met a change).
    let mut kept = None;
    for _ in 0..REWRITE_TRIES {
        match relocate_once(env, &path, dialect, new_cwd, session_dir, &mut kept) {
            // Changed while it was read or rewritten: nothing moved, read it again.
            Err(JobError::Session(SessionError::Store(StoreError::Conflict { .. }))) => {}
            done => {
                drop(lock);
                return done;
            }
        }
    }
    drop(lock);
    Err(JobError::KeptChanging { path, tries: REWRITE_TRIES })
}

/// One attempt of [`relocate`]: a conflict means nothing moved, and no backup is left
/// unless the open had written (pi's migration at open, which leaves garbage out): that
/// backup is kept in `kept` with the number of lines it holds that the file lost, and
/// reported by the try that moves the session.
fn relocate_once(
    env: &Env,
    path: &Path,
    dialect: Dialect,
    new_cwd: &str,
    session_dir: Option<&Path>,
    kept: &mut Option<(PathBuf, usize)>,
) -> Result<RelocateReport, JobError> {
    let storage = env.storage.clone();
    // The bytes a backup keeps are read before the open, which may write (pi migrates
    // as it opens, leaving garbage out), and the open goes on only while the file is
    // still those bytes.
    let mut bytes = Vec::new();
    let (stat, n) = storage.read_into(path, &mut bytes)?;
    bytes.truncate(n);
    let mut m = SessionManager::open_guarded(dialect, path, env.clone(), &stat)?;
    let dropped = m.diagnostics().len();
    let target = m.planned_move(new_cwd, session_dir)?.unwrap_or_else(|| path.to_path_buf());
    let cwd_before = m.cwd().to_owned();
    let mut backup = None;
    if dropped > 0 {
        if let Some(dir) = target.parent() {
            storage.ensure_dir(dir)?;
        }
        backup = Some(write_backup(&*storage, &target, &bytes, env.now_ms())?);
    }
    let moved = match m.move_to(new_cwd, session_dir) {
        Ok(moved) => moved,
        Err(e) => {
            // The backup stays when anything was written: the move's or the open's.
            if let Some(b) = backup {
                if e.landed() || m.load_report().wrote {
                    kept.get_or_insert((b, dropped));
                } else {
                    let _ = storage.unlink(&b);
                }
            }
            return Err(e.into());
        }
    };
    let to = moved.unwrap_or_else(|| path.to_path_buf());
    if to == path
        && m.cwd() == cwd_before
        && !m.load_report().wrote
        && let Some(b) = backup.take()
    {
        // Nothing moved and nothing was rewritten: nothing was left out.
        storage.unlink(&b)?;
    }
    m.close()?;
    let (backup, dropped) = match (backup, kept.take()) {
        (None, Some((kept, lines))) => (Some(kept), lines),
        (backup, _) => (backup, dropped),
    };
    Ok(RelocateReport { moved: to != path, from: path.to_path_buf(), to, dropped, backup })
}
