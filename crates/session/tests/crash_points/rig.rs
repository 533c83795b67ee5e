//! The environment of one explored run (memory or real files, one fault plan) and the
//! views its state is checked through.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use session::Env;
use session::store::{BlobStore, Durability, FaultStorage, Faults, FileStorage, MemoryStorage, Storage};

use crate::Result;
pub(crate) use session_testkit::TempDir;

/// Where a run's files live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    /// [`FaultStorage`] over [`MemoryStorage`]: deaths at trait-level boundaries, torn
    /// writes, power loss.
    Memory,
    /// [`FileStorage::with_faults`] on a temporary directory: deaths at the boundaries
    /// inside the real write paths, a copy of the directory taken at the moment of death,
    /// and the clean-up of the error path.
    Files,
}

impl Level {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Level::Memory => "memory",
            Level::Files => "files",
        }
    }
}

/// One run: a fault plan, the storage and blob store that obey it, and where they write.
pub(crate) struct Rig {
    pub(crate) level: Level,
    pub(crate) faults: Faults,
    pub(crate) durability: Durability,
    /// Everything the run writes is below this directory.
    pub(crate) root: PathBuf,
    memory: MemoryStorage,
    storage: Arc<dyn Storage>,
    blobs: BlobStore,
    /// Files: where the hook copies `root` when the process dies.
    died: Option<PathBuf>,
    /// Files: an error of that copy (the hook cannot return one).
    copy_error: Arc<Mutex<Option<String>>>,
    _temp: Option<TempDir>,
}

impl Rig {
    /// Returns a fresh rig; a files rig lives in a new directory below `base`.
    pub(crate) fn new(level: Level, durability: Durability, base: &Path) -> Result<Rig> {
        let faults = Faults::new();
        let memory = MemoryStorage::new();
        let copy_error = Arc::new(Mutex::new(None));
        let (storage, blobs, root, died, temp): (Arc<dyn Storage>, _, _, _, _) = match level {
            Level::Memory => {
                let storage = Arc::new(FaultStorage::new(memory.clone(), faults.clone()));
                (storage, BlobStore::in_memory(), PathBuf::from("/crash"), None, None)
            }
            Level::Files => {
                let temp = TempDir::new_in(base, "run")?;
                let root = temp.path().join("live");
                let died = temp.path().join("died");
                fs_err::create_dir_all(&root)?;
                let (from, to, error) = (root.clone(), died.clone(), copy_error.clone());
                // A process death at this boundary leaves exactly what is on disk now.
                faults.on_crash(move |_| {
                    if let Err(e) = copy_tree(&from, &to) {
                        *error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                    }
                });
                let blobs = BlobStore::on(Arc::new(FileStorage::new().with_faults(faults.clone())), root.join("blobs"));
                (Arc::new(FileStorage::new().with_faults(faults.clone())), blobs, root, Some(died), Some(temp))
            }
        };
        Ok(Rig { level, faults, durability, root, memory, storage, blobs, died, copy_error, _temp: temp })
    }

    /// Returns the environment the explored operation runs in (faults apply).
    pub(crate) fn env(&self) -> Env {
        Env::bare(self.storage.clone())
            .with_blobs(self.blobs.clone())
            .with_durability(self.durability)
            .with_process_cwd(&self.root)
            // One thread: the explored boundaries come in one order.
            .with_parallelism(session::Parallelism::SERIAL)
            // Sessions keep their texts in the file wherever they can, so whole-file
            // writes read them back while the crash points are explored.
            .with_spans(Some(session::model::SpanPolicy::everything(64)))
    }

    /// Returns the storage the explored operation writes through (faults apply).
    pub(crate) fn storage(&self) -> &dyn Storage {
        self.storage.as_ref()
    }

    /// Returns the storage the explored operation writes through (faults apply), shared.
    pub(crate) fn storage_arc(&self) -> Arc<dyn Storage> {
        self.storage.clone()
    }

    /// Returns the blob store the explored operation writes through (faults apply).
    pub(crate) fn blobs(&self) -> &BlobStore {
        &self.blobs
    }

    /// Returns the directory of the run's sessions.
    pub(crate) fn sessions(&self) -> PathBuf {
        self.root.join("sessions")
    }

    /// Returns the directory forks are written to.
    pub(crate) fn forks(&self) -> PathBuf {
        self.root.join("forks")
    }

    /// Drops every byte that was not synced (memory only).
    pub(crate) fn power_loss(&self) {
        self.memory.power_loss();
    }

    /// Returns the state the run left, read without faults (memory: a copy of it, so that
    /// what a check writes does not change what a power loss finds).
    pub(crate) fn live(&self) -> View {
        self.view(self.memory.snapshot())
    }

    /// Returns the state the run left, read and written without faults (memory: the
    /// storage itself).
    pub(crate) fn live_in_place(&self) -> View {
        self.view(self.memory.clone())
    }

    /// Returns the view of the run's state in `memory` (memory), or of its files.
    fn view(&self, memory: MemoryStorage) -> View {
        match self.level {
            Level::Memory => View {
                storage: Arc::new(memory.clone()),
                blobs: self.blobs.clone(),
                from: self.root.clone(),
                to: self.root.clone(),
                memory: Some(memory),
            },
            Level::Files => self.files_at(&self.root),
        }
    }

    /// Returns the view of the files below `to` (the run's files, or a copy of them).
    fn files_at(&self, to: &Path) -> View {
        View {
            storage: Arc::new(FileStorage::new()),
            blobs: BlobStore::open(to.join("blobs")),
            from: self.root.clone(),
            to: to.to_path_buf(),
            memory: None,
        }
    }

    /// Returns the copy of the files taken when the process died (files only).
    pub(crate) fn died(&self) -> Result<Option<View>> {
        if let Some(e) = self.copy_error.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Err(format!("copying the files at the crash point failed: {e}").into());
        }
        let Some(died) = &self.died else { return Ok(None) };
        if !died.exists() {
            return Err("the crash hook did not run".into());
        }
        Ok(Some(self.files_at(died)))
    }
}

/// A state to check: the files a run left (or a copy of them), read without faults.
pub(crate) struct View {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) blobs: BlobStore,
    /// Paths below `from` (as the run named them) are found below `to`.
    from: PathBuf,
    to: PathBuf,
    memory: Option<MemoryStorage>,
}

impl View {
    /// Returns where the run's `path` is in this view.
    pub(crate) fn path(&self, path: &Path) -> PathBuf {
        match path.strip_prefix(&self.from) {
            Ok(rel) => self.to.join(rel),
            Err(_) => path.to_path_buf(),
        }
    }

    /// Returns an environment that reads and writes this view (no faults, no fsync).
    pub(crate) fn env(&self) -> Env {
        Env::bare(self.storage.clone())
            .with_blobs(self.blobs.clone())
            .with_process_cwd(&self.to)
            // One thread: the explored boundaries come in one order.
            .with_parallelism(session::Parallelism::SERIAL)
            .with_spans(Some(session::model::SpanPolicy::everything(64)))
    }

    /// Returns every file of the view, dot-files included, sorted.
    pub(crate) fn files(&self) -> Result<Vec<PathBuf>> {
        match &self.memory {
            Some(m) => Ok(m.paths().into_iter().filter(|p| p.starts_with(&self.to)).collect()),
            None => {
                let mut out = Vec::new();
                walk(&self.to, &mut out)?;
                out.sort();
                Ok(out)
            }
        }
    }
}

/// Returns whether `path` names a temporary file of an atomic write (`.<name>.<hex>.tmp`).
pub(crate) fn is_temp(path: &Path) -> bool {
    file_name(path).is_some_and(|n| n.starts_with('.') && n.ends_with(".tmp"))
}

/// Returns whether `path` names a session lock file (`.<name>.lock`).
pub(crate) fn is_lock(path: &Path) -> bool {
    file_name(path).is_some_and(|n| n.starts_with('.') && n.ends_with(".lock"))
}

/// Returns whether `path` names a session file (`*.jsonl`, not hidden) directly in `dir`.
pub(crate) fn is_session_in(path: &Path, dir: &Path) -> bool {
    path.parent() == Some(dir) && file_name(path).is_some_and(|n| n.ends_with(".jsonl") && !n.starts_with('.'))
}

/// Returns the lock file of the session file `path`.
pub(crate) fn lock_of(path: &Path) -> PathBuf {
    let name = file_name(path).unwrap_or_default();
    path.with_file_name(format!(".{name}.lock"))
}

pub(crate) fn file_name(path: &Path) -> Option<&str> {
    path.file_name().and_then(|n| n.to_str())
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = match fs_err::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            walk(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

/// Copies the tree `from` to `to` (which must not exist yet).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    fs_err::create_dir_all(to)?;
    for entry in fs_err::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            fs_err::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Rewrites every lock record of this process in the view's files, and the names of its
/// temporary files, to name `dead_pid`: the copy then shows what a writer that died at
/// the crash point leaves (its lock files and temporary files name its pid, and that
/// process is gone).
pub(crate) fn bury_own_locks(view: &View, dead_pid: u32) -> Result<()> {
    let own = format!("{}:", std::process::id());
    let own_temp = format!(".{}.", std::process::id());
    for path in view.files()? {
        if is_lock(&path) {
            let record = fs_err::read_to_string(&path)?;
            if let Some(ms) = record.strip_prefix(&own) {
                fs_err::write(&path, format!("{dead_pid}:{ms}"))?;
            }
        } else if is_temp(&path) {
            // `.<name>.<pid>.<hex>.tmp`: the temporary file names its writer too.
            let name = file_name(&path).unwrap_or_default().to_owned();
            if let Some(at) = name.rfind(&own_temp) {
                let renamed = format!("{}.{dead_pid}.{}", &name[..at], &name[at + own_temp.len()..]);
                fs_err::rename(&path, path.with_file_name(renamed))?;
            }
        }
    }
    Ok(())
}
