//! Branching into a new file (`createBranchedSession`): the path to a leaf, pi's
//! chain without labels, the labels carried, and the switch to the new file.

use std::path::PathBuf;

use serde_json::Value;
use session_model::entries::{self, Base};
use session_model::{Dialect, EntryType, Record, ids};

use super::SessionManager;
use crate::SessionError;

type Result<T> = std::result::Result<T, SessionError>;

impl SessionManager {
    /// Extracts the path from the root to `leaf_id` into a new session file next to
    /// this one (`createBranchedSession`) and switches this manager to it. Returns
    /// the new file (`None` in memory).
    ///
    /// To branch within the session instead, move the leaf:
    /// [`SessionManager::branch`], and the next append becomes a sibling.
    ///
    /// ```
    /// use session::{Dialect, Env, SessionManager};
    /// # fn main() -> Result<(), session::SessionError> {
    /// let mut m = SessionManager::create(Dialect::Omp, "/work", std::path::Path::new("/s"), Env::memory())?;
    /// let first = m.append_message_json(serde_json::json!({"role": "user", "content": "a", "timestamp": 1}))?;
    /// m.append_message_json(serde_json::json!({"role": "user", "content": "b", "timestamp": 2}))?;
    /// let old = m.session_file().map(std::path::Path::to_path_buf);
    /// let new = m.create_branched_session(&first)?.expect("persisted");
    /// assert_ne!(Some(new), old);
    /// assert_eq!(m.tree().entries().len(), 1, "only the path to `first`");
    /// # Ok(())
    /// # }
    /// ```
    pub fn create_branched_session(&mut self, leaf_id: &str) -> Result<Option<PathBuf>> {
        self.writable()?;
        self.not_in_batch()?;
        let path: Vec<Record> = self.tree.get_branch(Some(leaf_id)).into_iter().cloned().collect();
        if path.is_empty() {
            return Err(SessionError::EntryNotFound { id: leaf_id.to_owned() });
        }
        let old_file = self.file.clone();
        let parent_file = if self.persist { old_file.as_deref() } else { None };
        let id = self.env.new_session_id();
        let ts = self.env.now_iso();
        let mut kept = match self.dialect() {
            Dialect::Pi => {
                self.header =
                    entries::pi::header(&id, &ts, &self.cwd, parent_file.map(|p| p.to_str().unwrap_or_default()));
                pi_branch_entries(&path)
            }
            Dialect::Omp => {
                let parent = parent_file.map(|p| p.to_string_lossy());
                self.header = entries::omp::branch_header(&id, &ts, &self.cwd, &self.header, parent.as_deref());
                path.iter().filter(|r| r.entry_type() != EntryType::Label).cloned().collect()
            }
        };
        let labels = self.carried_labels(&kept, &ts);
        kept.extend(labels);
        self.close_writer();
        self.slot = (self.dialect() == Dialect::Omp).then(|| super::slot_of(&self.header, &ts));
        let has_conversation = kept.iter().any(|r| self.counts_as_conversation(r));
        let new_file = self.persist.then(|| {
            let dir = self.session_dir.clone().unwrap_or_default();
            dir.join(session_discovery::session_file_name(&ts, &id))
        });
        // pi writes the new file only once it holds a conversation; omp always does.
        let write_to = new_file.as_deref().filter(|_| self.dialect() == Dialect::Omp || has_conversation);
        let published = self.replace_entries(kept, write_to);
        let Some(new_file) = new_file else {
            return Ok(None);
        };
        self.switch_to_new_file(new_file.clone(), published)?;
        Ok(Some(new_file))
    }

    /// The labels in effect whose target is among `kept`, re-created as new `label`
    /// entries chained after the last kept entry (pi keeps each label's time, omp
    /// stamps them now).
    fn carried_labels(&self, kept: &[Record], ts: &str) -> Vec<Record> {
        let labels: Vec<(&str, &str, Option<&str>)> =
            self.tree.labels().map(|(t, l)| (t, l, self.tree.label_timestamp(t))).collect();
        if labels.is_empty() {
            return Vec::new();
        }
        let kept_ids: std::collections::HashSet<&str> = kept.iter().filter_map(Record::id).collect();
        let mut new_ids: std::collections::HashSet<String> = std::collections::HashSet::new();
        let mut parent = kept.last().and_then(|r| r.id().map(str::to_owned));
        let mut out = Vec::new();
        for (target, label, label_ts) in labels {
            if !kept_ids.contains(target) {
                continue;
            }
            let new_id =
                ids::new_entry_id(self.dialect(), &mut rand::rng(), |i| kept_ids.contains(i) || new_ids.contains(i));
            new_ids.insert(new_id.clone());
            let stamp = match self.dialect() {
                Dialect::Pi => label_ts.unwrap_or(ts).to_owned(),
                Dialect::Omp => self.env.now_iso(),
            };
            out.push(entries::pi::label(&Base::new(new_id.clone(), parent.as_deref(), stamp), target, Some(label)));
            parent = Some(new_id);
        }
        out
    }

    /// Makes `file` this manager's session file after a branch wrote it (`published`:
    /// what the write gave, `None` when pi waits for a conversation).
    fn switch_to_new_file(&mut self, file: PathBuf, published: Option<Result<u64>>) -> Result<()> {
        self.file = Some(file);
        // What landed: the size of a whole file (synced or not), or nothing.
        let (landed, result) = match published {
            None => (None, Ok(())),
            Some(Ok(size)) => (Some(size), Ok(())),
            Some(Err(e)) => (e.landed_size(), Err(e)),
        };
        self.journal.branched(landed);
        if self.dialect() == Dialect::Omp && landed.is_some() {
            self.breadcrumb(false);
        }
        // omp latches the failure until the full rewrite heals it; pi returns it only.
        if let Err(e) = &result
            && landed.is_none()
            && self.dialect() == Dialect::Omp
        {
            self.note_failure(e);
        }
        result
    }
}

/// pi's branch of `path` (root to leaf): the entries without the labels, each chained
/// to the entry kept before it (a parent that was a dropped label is replaced), and a
/// compaction that kept from a dropped label keeping from the entry after it.
fn pi_branch_entries(path: &[Record]) -> Vec<Record> {
    let mut kept: Vec<Record> = Vec::with_capacity(path.len());
    let mut replaced_by: Vec<(String, Option<String>)> = Vec::new();
    let mut pending: Vec<usize> = Vec::new();
    for r in path {
        if r.entry_type() == EntryType::Label {
            replaced_by.push((r.id().unwrap_or_default().to_owned(), None));
            pending.push(replaced_by.len() - 1);
            continue;
        }
        for i in pending.drain(..) {
            replaced_by[i].1 = r.id().map(str::to_owned);
        }
        let chained = {
            let parent = kept.last().and_then(Record::id);
            r.parent_id() == parent && (parent.is_some() || matches!(r.parent(), session_model::ParentRef::Null))
        };
        let mut rec = r.clone();
        if !chained {
            let parent = kept.last().and_then(|k| k.id().map(str::to_owned));
            rec = rec.map_value(|v| {
                if let Value::Object(m) = v {
                    m.insert("parentId".into(), parent.clone().map_or(Value::Null, Value::from));
                }
            });
        }
        if rec.entry_type() == EntryType::Compaction
            && let Some(fk) = rec.get_str("firstKeptEntryId").map(str::to_owned)
            && Some(fk.as_str()) != rec.id()
            && let Some((_, Some(to))) = replaced_by.iter().find(|(from, _)| *from == fk)
        {
            let to = to.clone();
            rec = rec.map_value(|v| {
                if let Value::Object(m) = v {
                    m.insert("firstKeptEntryId".into(), Value::from(to));
                }
            });
        }
        kept.push(rec);
    }
    kept
}
