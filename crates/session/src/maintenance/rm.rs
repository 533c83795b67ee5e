//! Deleting a session: proved first, inside the agents' folders, under its lock.

use std::path::{Path, PathBuf};
use std::time::Duration;

use session_model::Dialect;
use session_store::{LockWait, Storage};

use super::{Homes, JobError, SessionProof, prove_session};

/// How long a deletion waits for a writer that holds the session's lock.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// A deletion that [`plan_rm`] found allowed: what it proved and what
/// [`RmPlan::execute`] will delete. Nothing is deleted until then.
#[derive(Clone, Debug)]
pub struct RmPlan {
    proof: SessionProof,
}

/// What a deletion removed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RmReport {
    /// The session file.
    pub session: PathBuf,
    /// Its artifacts directory, if it had one.
    pub artifacts: Option<PathBuf>,
    /// Its backups.
    pub backups: Vec<PathBuf>,
    /// What is named like its artifacts directory but is not one (a link, a file): left
    /// in place.
    pub left: Option<PathBuf>,
}

/// Plans the deletion of the session at `path`: proves it is a session of `dialect`
/// (`None`: the root's, else its own first bytes say; see [`prove_session`]) and, unless
/// `force`, that it is inside one of the agents' session folders
/// ([`JobError::OutsideHomes`]). Writes nothing.
pub fn plan_rm(
    storage: &dyn Storage,
    homes: &Homes,
    path: &Path,
    dialect: Option<Dialect>,
    force: bool,
) -> Result<RmPlan, JobError> {
    let root = homes.root_of(path);
    let proof = prove_session(storage, path, dialect.or(root.and_then(|r| r.dialect)))?;
    if !force && !homes.contains(&proof.path) {
        return Err(JobError::OutsideHomes {
            path: proof.path,
            roots: homes.roots().iter().map(|r| r.path.clone()).collect(),
        });
    }
    Ok(RmPlan { proof })
}

impl RmPlan {
    /// Returns what was proved: the session, its artifacts directory and its backups.
    pub fn proof(&self) -> &SessionProof {
        &self.proof
    }

    /// Deletes the session, its artifacts directory (a real directory only) and its
    /// backups, under the session's lock (a writer of ours or of omp's is never cut off
    /// mid-append; [`session_store::StoreError::Locked`] after a short wait), proving it
    /// again under the lock first.
    ///
    /// The backups go first, then the artifacts, the session file last
    /// ([`Storage::delete_with_artifacts`]): an error or a crash part-way leaves the
    /// session in place for the next deletion to finish, never a backup that omp's
    /// listing would promote into the deleted session.
    pub fn execute(self, storage: &dyn Storage) -> Result<RmReport, JobError> {
        let path = self.proof.path.clone();
        let lock = storage.lock(&path, LockWait::Timeout(LOCK_WAIT))?;
        // Proved again under the lock: what is deleted is what is there now.
        let proof = prove_session(storage, &path, Some(self.proof.dialect))?;
        storage.delete_with_artifacts(&path)?;
        // The session is gone: a lock file left behind by a failed release names this
        // process and goes with the next writer in the folder.
        drop(lock);
        Ok(RmReport { session: path, artifacts: proof.artifacts, backups: proof.backups, left: proof.not_artifacts })
    }
}
