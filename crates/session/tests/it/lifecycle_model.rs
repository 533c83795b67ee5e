//! A proptest state machine over omp's lifecycle operations (appends, renames, leaf
//! moves, branch extraction, forks, moves, rewrites, `ensure_on_disk`, `flush_sync`,
//! atomic batches) against a naive model: the list of entries with their parents, the
//! leaf, the title and which file is current. After every step the current file,
//! reopened read-only, must hold exactly what the manager and the model hold.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::json;
use session::model::Dialect;
use session::store::{FileStorage, MemoryStorage};
use session::{Env, SessionManager};

use session_testkit::TempDir;

use crate::common::texts;

#[derive(Clone, Debug)]
enum Op {
    /// An entry of one of four kinds.
    Append(u8),
    /// A user rename.
    Rename(u8),
    /// Moves the leaf to the entry at this index (modulo the count).
    Branch(usize),
    /// Extracts the active branch into a new file.
    Extract,
    Fork,
    /// Moves to the cwd / session directory numbered so.
    MoveTo(u8),
    RewriteEntries,
    EnsureOnDisk,
    FlushSync,
    /// Appends this many entries in one atomic batch.
    Batch(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => any::<u8>().prop_map(Op::Append),
        1 => any::<u8>().prop_map(Op::Rename),
        2 => any::<usize>().prop_map(Op::Branch),
        1 => Just(Op::Extract),
        1 => Just(Op::Fork),
        1 => (0u8..3).prop_map(Op::MoveTo),
        1 => Just(Op::RewriteEntries),
        1 => Just(Op::EnsureOnDisk),
        1 => Just(Op::FlushSync),
        1 => (1u8..4).prop_map(Op::Batch),
    ]
}

/// The naive model: entries as `(id, parent)` in file order, the leaf, the title.
#[derive(Debug, Default)]
struct Model {
    entries: Vec<(String, Option<String>)>,
    leaf: Option<String>,
    title: Option<String>,
    file: PathBuf,
}

impl Model {
    fn push(&mut self, id: String) {
        self.entries.push((id.clone(), self.leaf.clone()));
        self.leaf = Some(id);
    }

    /// The path from the root to the leaf, following the model's parents.
    fn branch(&self) -> Vec<(String, Option<String>)> {
        let mut path = Vec::new();
        let mut at = self.leaf.clone();
        while let Some(id) = at {
            let Some(entry) = self.entries.iter().find(|(e, _)| *e == id) else { break };
            path.push(entry.clone());
            at = entry.1.clone();
        }
        path.reverse();
        path
    }
}

fn append(m: &mut SessionManager, kind: u8, i: usize) -> Result<session::EntryId, session::SessionError> {
    match kind % 4 {
        0 => m.append_message_json(json!({"role": "user", "content": format!("q{i}"), "timestamp": i})),
        1 => m.append_message_json(json!({"role": "assistant", "content": [{"type": "text", "text": format!("a{i}")}],
                                      "provider": "p", "model": "m", "timestamp": i})),
        2 => m.append_custom_entry("tick", Some(json!({"i": i}))),
        _ => m.omp()?.append_model_change(&format!("p/m{i}"), None, false),
    }
}

fn cwd_of(root: &Path, k: u8) -> String {
    root.join(format!("cwd{k}")).to_string_lossy().into_owned()
}

fn dir_of(root: &Path, k: u8) -> PathBuf {
    root.join(format!("dir{k}"))
}

/// Runs `ops` on a fresh omp session in `env` (rooted at `root`) and checks every step.
fn run(env: Env, root: &Path, ops: &[Op]) -> Result<(), TestCaseError> {
    let storage = env.storage().clone();
    let mut m = SessionManager::create(Dialect::Omp, &cwd_of(root, 0), &dir_of(root, 0), env.clone())
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    m.omp()?.ensure_on_disk().map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut model = Model { file: m.session_file().map(Path::to_path_buf).unwrap_or_default(), ..Model::default() };
    for (i, op) in ops.iter().enumerate() {
        let fail = |e: session::SessionError| TestCaseError::fail(format!("step {i} {op:?}: {e}"));
        match op {
            Op::Append(kind) => {
                let id = append(&mut m, *kind, i).map_err(fail)?;
                model.push(id.into());
            }
            Op::Rename(n) => {
                let title = format!("title {n}");
                if let Some(id) = m.set_session_name(&title, Some("user")).map_err(fail)? {
                    model.push(id.into());
                    model.title = Some(title);
                }
            }
            Op::Branch(k) => {
                if !model.entries.is_empty() {
                    let id = model.entries[k % model.entries.len()].0.clone();
                    m.branch(&id).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    model.leaf = Some(id);
                }
            }
            Op::Extract => {
                let Some(leaf) = model.leaf.clone() else { continue };
                let old = model.file.clone();
                let new =
                    m.create_branched_session(&leaf).map_err(fail)?.ok_or_else(|| TestCaseError::fail("no file"))?;
                prop_assert_ne!(&new, &old);
                prop_assert!(storage.exists(&old).unwrap_or(false), "extracting keeps the old file");
                model.entries = model.branch();
                model.leaf = model.entries.last().map(|(id, _)| id.clone());
                model.file = new;
            }
            Op::Fork => {
                let old = model.file.clone();
                let old_bytes = storage.read(&old).ok();
                let new = m.omp()?.fork().map_err(fail)?.ok_or_else(|| TestCaseError::fail("no file"))?;
                prop_assert_ne!(&new, &old);
                prop_assert_eq!(storage.read(&old).ok(), old_bytes, "forking leaves the old file as it was");
                model.file = new;
            }
            Op::MoveTo(k) => {
                let old = model.file.clone();
                let new = m
                    .move_to(&cwd_of(root, *k), Some(&dir_of(root, *k)))
                    .map_err(fail)?
                    .ok_or_else(|| TestCaseError::fail("no file"))?;
                prop_assert_eq!(new.parent().map(Path::to_path_buf), Some(dir_of(root, *k)));
                if new != old {
                    prop_assert!(!storage.exists(&old).unwrap_or(true), "the old journal is gone");
                }
                prop_assert_eq!(m.cwd(), cwd_of(root, *k));
                model.file = new;
            }
            Op::RewriteEntries => m.rewrite_entries().map_err(fail)?,
            Op::EnsureOnDisk => m.omp()?.ensure_on_disk().map_err(fail)?,
            Op::FlushSync => m.flush_sync().map_err(fail)?,
            Op::Batch(n) => {
                let ids = m
                    .omp()?
                    .append_entries_atomically(|m| {
                        (0..*n).map(|j| append(m, j, i * 10 + usize::from(j))).collect::<Result<Vec<_>, _>>()
                    })
                    .map_err(fail)?;
                for id in ids {
                    model.push(id.into());
                }
            }
        }
        prop_assert!(m.persistence_error().is_none(), "step {} {:?}: {:?}", i, op, m.persistence_error());
        // The manager holds what the model says...
        let ids: Vec<String> = m.tree().entries().iter().filter_map(|r| r.id().map(str::to_owned)).collect();
        let expected: Vec<String> = model.entries.iter().map(|(id, _)| id.clone()).collect();
        prop_assert_eq!(&ids, &expected, "step {} {:?}: entries", i, op);
        prop_assert_eq!(m.tree().leaf_id().map(str::to_owned), model.leaf.clone());
        prop_assert_eq!(m.session_file(), Some(model.file.as_path()));
        prop_assert_eq!(m.session_name(), model.title.clone());
        // ...and so does its file, reopened.
        let again = SessionManager::open_read_only(Dialect::Omp, &model.file, env.clone())
            .map_err(|e| TestCaseError::fail(format!("step {i} {op:?}: reopen: {e}")))?;
        prop_assert_eq!(texts(again.as_manager()), texts(&m), "step {} {:?}: the file", i, op);
        prop_assert_eq!(again.session_id(), m.session_id());
        prop_assert_eq!(again.session_name(), model.title.clone());
        prop_assert_eq!(again.header().get_str("cwd"), Some(m.cwd()));
        prop_assert!(again.diagnostics().is_empty(), "{:?}", again.diagnostics());
        // The leaf is not stored: after a reload it is the last entry.
        prop_assert_eq!(again.tree().leaf_id().map(str::to_owned), expected.last().cloned());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn omp_lifecycle_on_memory_matches_the_model(ops in proptest::collection::vec(op(), 1..30)) {
        let root = PathBuf::from("/model");
        let env = Env::memory().with_storage(Arc::new(MemoryStorage::new())).with_process_cwd(&root);
        run(env, &root, &ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    #[test]
    fn omp_lifecycle_on_files_matches_the_model(ops in proptest::collection::vec(op(), 1..20)) {
        let tmp = TempDir::new("lifecycle-model");
        let env = Env::bare(Arc::new(FileStorage::new())).with_process_cwd(tmp.path());
        run(env, tmp.path(), &ops)?;
    }
}
