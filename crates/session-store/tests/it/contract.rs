//! The storage contract (`session_store::contract`) run against the file and memory
//! backends, their fault wrapper, and a backend with only the trait's required methods.

use std::path::Path;

use session_store::contract::{CaseResult, run_byte_contract, run_contract};
use session_store::{
    Durability, ExpectedSize, FaultStorage, Faults, FileStorage, LockWait, MemoryStorage, Storage, StoreError,
};

use crate::support::TempDir;

fn temp_root(_case: &str) -> TempDir {
    TempDir::new("session-store-it")
}

fn memory_root(case: &str) -> String {
    format!("/contract/{case}")
}

/// Runs both case lists.
fn run_all<R: AsRef<Path>>(make: &dyn Fn() -> Box<dyn Storage>, root: &dyn Fn(&str) -> R) -> CaseResult {
    run_contract(make, root)?;
    run_byte_contract(make, root)
}

#[test]
fn file_storage_meets_the_contract() -> CaseResult {
    run_all(&|| Box::new(FileStorage::new()), &temp_root)
}

#[test]
fn memory_storage_meets_the_contract() -> CaseResult {
    run_all(&|| Box::new(MemoryStorage::new()), &memory_root)?;
    // A real directory as root changes nothing for memory.
    run_all(&|| Box::new(MemoryStorage::new()), &temp_root)
}

#[test]
fn fault_storage_without_faults_meets_the_contract() -> CaseResult {
    run_all(&|| Box::new(FaultStorage::new(FileStorage::new(), Faults::new())), &temp_root)?;
    run_all(&|| Box::new(FaultStorage::new(MemoryStorage::new(), Faults::new())), &memory_root)
}

/// A backend that implements only the required methods: the trait's defaults
/// (streamed atomic writes, prefix overwrites, directory moves and copies) must meet the
/// contract too. `fail_rename` makes the rename with that number (from 1) fail.
struct RequiredOnly(MemoryStorage, Option<(usize, std::sync::atomic::AtomicUsize)>);

impl Storage for RequiredOnly {
    fn ensure_dir(&self, dir: &Path) -> Result<(), StoreError> {
        self.0.ensure_dir(dir)
    }
    fn exists(&self, path: &Path) -> Result<bool, StoreError> {
        self.0.exists(path)
    }
    fn stat(&self, path: &Path) -> Result<Option<session_store::FileStat>, StoreError> {
        self.0.stat(path)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>, StoreError> {
        self.0.list(dir)
    }
    fn read_dir(&self, dir: &Path) -> Result<Vec<session_store::DirEntry>, StoreError> {
        self.0.read_dir(dir)
    }
    fn remove_empty_dir(&self, dir: &Path) -> Result<(), StoreError> {
        self.0.remove_empty_dir(dir)
    }
    fn read(&self, path: &Path) -> Result<Vec<u8>, StoreError> {
        self.0.read(path)
    }
    fn read_slices(&self, path: &Path, prefix: u64, suffix: u64) -> Result<(Vec<u8>, Vec<u8>), StoreError> {
        self.0.read_slices(path, prefix, suffix)
    }
    fn write(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        self.0.write(path, bytes)
    }
    fn write_new(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        self.0.write_new(path, bytes)
    }
    fn write_atomic(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        self.0.write_atomic(path, bytes, expected)
    }
    fn append(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        self.0.append(path, bytes)
    }
    fn truncate(&self, path: &Path, len: u64) -> Result<(), StoreError> {
        self.0.truncate(path, len)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        if let Some((at, count)) = &self.1
            && count.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1 == *at
        {
            return Err(StoreError::Injected { op: session_store::Op::Rename, path: from.to_path_buf() });
        }
        self.0.rename(from, to)
    }
    fn unlink(&self, path: &Path) -> Result<(), StoreError> {
        self.0.unlink(path)
    }
    fn delete_with_artifacts(&self, path: &Path) -> Result<(), StoreError> {
        self.0.delete_with_artifacts(path)
    }
    fn open_writer(
        &self,
        path: &Path,
        durability: Durability,
    ) -> Result<Box<dyn session_store::AppendWriter>, StoreError> {
        self.0.open_writer(path, durability)
    }
    fn lock(&self, path: &Path, wait: LockWait) -> Result<session_store::SessionLock, StoreError> {
        self.0.lock(path, wait)
    }
    // The default `watch` has no feed (`None`, which the contract refuses): the wrapper
    // polls its storage's stat, as the file and memory storages do.
    fn watch(&self, path: &Path) -> Result<Option<Box<dyn session_store::Watch>>, StoreError> {
        Ok(Some(Box::new(session_store::PollWatch::new(self.0.clone(), path)?)))
    }
}

#[test]
fn default_methods_meet_the_contract() -> CaseResult {
    run_all(&|| Box::new(RequiredOnly(MemoryStorage::new(), None)), &memory_root)
}

/// The default `move_dir` undoes the renames it did when a later one fails: the
/// directory is back where it was, whole, and the error is returned.
#[test]
fn a_failed_default_move_is_undone() -> CaseResult {
    for fail_at in 1..=4 {
        let s = RequiredOnly(MemoryStorage::new(), Some((fail_at, std::sync::atomic::AtomicUsize::new(0))));
        let (a, b) = (Path::new("/m/a"), Path::new("/m/b"));
        for (name, bytes) in [("x.log", b"x"), ("y.log", b"y"), ("sub/z.md", b"z")] {
            s.write(&a.join(name), bytes)?;
        }
        let moved = s.move_dir(a, b);
        if fail_at > 3 {
            // Three files, three renames: the fourth never comes.
            assert_eq!(moved?.len(), 3);
            continue;
        }
        assert!(moved.is_err(), "rename {fail_at} failed");
        for (name, bytes) in [("x.log", b"x"), ("y.log", b"y"), ("sub/z.md", b"z")] {
            assert_eq!(s.read(&a.join(name))?, bytes, "rename {fail_at}: {name} is back");
            assert!(!s.exists(&b.join(name))?, "rename {fail_at}: {name} is not at the target");
        }
    }
    Ok(())
}
