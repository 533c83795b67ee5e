//! Loading a session file: the read (indexed, or in pieces), the header check, pi's
//! repair of a torn last line, migrations, omp's title slot folded into the header and
//! its blob references resolved, and the write state the load leaves.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use session_model::{Bodies, Dialect, HeaderCheck, Record, TitleSlot, ids};
use session_store::{ExpectedSize, FileStat, StoreError};

use super::{Access, LoadReport, SessionManager};
use crate::index::IndexUse;
use crate::{Env, SessionError};

type Result<T> = std::result::Result<T, SessionError>;

impl SessionManager {
    pub(super) fn load_file(&mut self, path: &Path, must_exist: bool, guard: Option<&FileStat>) -> Result<LoadReport> {
        let mut report = LoadReport::default();
        let storage = self.env.storage.clone();
        let write = self.access == Access::ReadWrite;
        let stat = storage.stat(path)?;
        if let Some(expected) = guard
            && !stat.as_ref().is_some_and(|s| s.same_bytes_as(expected))
        {
            return Err(StoreError::Conflict {
                path: path.to_path_buf(),
                expected: Some(expected.size),
                found: stat.map(|s| s.size),
            }
            .into());
        }
        let Some(stat) = stat else {
            if must_exist {
                return Err(SessionError::NotFound { path: path.to_path_buf() });
            }
            // Missing: a new session at this exact path (omp writes it at once).
            let now = self.dialect() == Dialect::Omp;
            self.fresh_at(path, now, None)?;
            report.wrote = now;
            return Ok(report);
        };
        let (parsed, bodies, index) = read_indexed(&self.env, path, self.dialect())?;
        report.index = index;
        report.stat = Some(stat);
        match parsed.header_check(self.dialect()) {
            HeaderCheck::Valid { .. } => {}
            HeaderCheck::Empty if self.dialect() == Dialect::Omp || stat.size == 0 => {
                report.reinitialised = true;
                report.wrote = write;
                self.fresh_at(path, write, Some(stat.size))?;
                return Ok(report);
            }
            _ => {
                return Err(match self.dialect() {
                    Dialect::Pi => SessionError::InvalidPiSession { path: path.to_path_buf() },
                    Dialect::Omp => SessionError::CannotResume { path: path.to_path_buf() },
                });
            }
        }
        self.file = Some(path.to_path_buf());
        self.bodies = bodies.map(|bodies| super::FileTexts { bodies, path: path.to_path_buf() });
        self.diagnostics = parsed.diagnostics;
        let mut records = parsed.records;
        if self.dialect() == Dialect::Pi && !parsed.ends_with_newline {
            if write && repair_final_newline(&*storage, path, stat.size)? {
                report.wrote = true;
            }
            report.repaired_final_newline = true;
        }
        let migration = session_migrate::migrate(&mut records, &mut || {
            ids::new_entry_id(self.dialect(), &mut rand::rng(), |_| false)
        });
        report.migrated = migration.ran();
        if report.migrated {
            report.migrated_from = migration.found_version.clone();
        }
        let header = records.remove(0);
        if let Some(cwd) = header.get_str("cwd")
            && !(self.dialect() == Dialect::Pi && cwd.is_empty())
        {
            self.cwd = cwd.to_owned();
        }
        match self.dialect() {
            Dialect::Pi => {
                self.header = header;
                self.replace_entries(records, None);
                let mut size = parsed.byte_len as u64;
                if report.wrote {
                    // The final newline this open appended.
                    size += 1;
                }
                // An unrecognised version counts as migrated but changes no byte: pi
                // would rewrite the same file on every open; we write nothing.
                if migration.changed() && write {
                    let expected = stat.size + u64::from(report.repaired_final_newline);
                    size = self.publish(path, ExpectedSize::Bytes(expected))?;
                    report.wrote = true;
                }
                self.journal.on_disk(size);
            }
            Dialect::Omp => {
                self.slot = Some(parsed.title_slot.clone().unwrap_or_else(|| TitleSlot {
                    title: String::new(),
                    source: None,
                    updated_at: header.get_str("timestamp").unwrap_or_default().to_owned(),
                }));
                self.header = fold_slot(&header, parsed.title_slot.as_ref());
                let records = self.resolve_blobs(records);
                self.replace_entries(records, None);
                self.journal.on_disk(parsed.byte_len as u64);
                if report.migrated || parsed.malformed > 0 {
                    self.journal.require_rewrite();
                }
            }
        }
        // The stat taken before the read describes what was read only when the read
        // found exactly its bytes and nothing was written since.
        self.journal.read_as((!report.wrote && parsed.byte_len as u64 == stat.size).then_some(stat));
        Ok(report)
    }

    pub(super) fn resolve_blobs(&mut self, records: Vec<Record>) -> Vec<Record> {
        let Some(blobs) = self.env.blobs.clone() else {
            return records;
        };
        // A record whose text is still in the file is resolved when it is read (the
        // bodies' hook, see `read_indexed`).
        records.into_iter().map(|r| if r.is_loaded() { resolve_blob_refs(r, &blobs) } else { r }).collect()
    }
}

/// pi's repair of a file without a final newline: appends one, but only onto the
/// `read` bytes: a file that grew since was read in the middle of another writer's line
/// (a torn read), which ends with its own newline. Returns whether it wrote.
pub(crate) fn repair_final_newline(storage: &dyn session_store::Storage, path: &Path, read: u64) -> Result<bool> {
    if storage.stat(path)?.is_some_and(|now| now.size == read) {
        storage.append(path, b"\n")?;
        return Ok(true);
    }
    Ok(false)
}

/// Folds omp's title slot into the header: a non-empty slot title replaces the
/// header's, an empty one removes it; likewise the source.
pub(crate) fn fold_slot(header: &Record, slot: Option<&TitleSlot>) -> Record {
    let Some(slot) = slot else {
        return header.clone();
    };
    let has_title = header.get("title").is_some();
    let has_source = header.get("titleSource").is_some();
    let same_title = header.get_str("title") == Some(slot.title.as_str()) && !slot.title.is_empty();
    let same_source = header.get_str("titleSource") == slot.source.as_deref() && slot.source.is_some();
    if (same_title || (slot.title.is_empty() && !has_title)) && (same_source || (slot.source.is_none() && !has_source))
    {
        return header.clone();
    }
    header.map_value(|v| {
        if let Value::Object(m) = v {
            if slot.title.is_empty() {
                m.shift_remove("title");
            } else {
                m.insert("title".into(), slot.title.clone().into());
            }
            match &slot.source {
                Some(s) => {
                    m.insert("titleSource".into(), s.clone().into());
                }
                None => {
                    m.shift_remove("titleSource");
                }
            }
        }
    })
}

/// Reads and parses the session file at `path` as `dialect`'s reference reads it,
/// through [`Storage::open_reader`](session_store::Storage::open_reader): a large file
/// is parsed in pieces as it is read, never held whole, and every text of it is kept.
/// The result is what [`session_model::parse_session_bytes`] gives for the file's
/// bytes.
fn read_parsed(
    storage: &dyn session_store::Storage,
    path: &Path,
    dialect: Dialect,
    parallelism: session_model::Parallelism,
) -> Result<session_model::ParsedFile> {
    let (st, reader) = storage.open_reader(path)?;
    session_model::parse_session_at_with(&*reader, st.size, dialect, parallelism)
        .map_err(|e| SessionError::Store(StoreError::io(session_store::Op::Read, path, e)))
}

/// [`read_parsed`] leaving the text of large records in the file
/// ([`session_model::parse_session_spans`]): they are read through the returned
/// [`Bodies`] when first asked for. The bodies are `None` when every text is in memory
/// (a small file). omp's records read later get their blob references resolved as
/// [`SessionManager::open`] resolves the others.
pub(crate) fn read_indexed(
    env: &Env,
    path: &Path,
    dialect: Dialect,
) -> Result<(session_model::ParsedFile, Option<Arc<Bodies>>, IndexUse)> {
    let Some(policy) = env.spans else {
        return Ok((read_parsed(&*env.storage, path, dialect, env.parallelism)?, None, IndexUse::None));
    };
    let read_error = |e| SessionError::Store(StoreError::io(session_store::Op::Read, path, e));
    // The time the file is read at, for the index's racy-write rule.
    let now_ns = env.clock.now_ms().saturating_mul(1_000_000);
    let (st, reader) = env.storage.open_reader(path)?;
    let mut bodies = Bodies::new(reader);
    if dialect == Dialect::Omp
        && let Some(blobs) = env.blobs.clone()
    {
        bodies = bodies.with_hook(Box::new(move |r| resolve_blob_refs(r, &blobs)));
    }
    let bodies = Arc::new(bodies);
    let index = env
        .index_dir
        .as_ref()
        .filter(|_| st.identity.is_some() && st.size >= policy.from_file_size)
        .map(crate::index::IndexDir::new);
    let keep = |parsed: session_model::ParsedFile, how| {
        let spans = parsed.records.iter().any(|r| r.span().is_some());
        (parsed, spans.then(|| Arc::clone(&bodies)), how)
    };
    if let Some(index) = &index
        && let Some((parsed, how, tail)) = index.lookup(path, dialect, &st, &bodies, policy, env.parallelism)
    {
        // A few appended entries are parsed again next time rather than rewriting the
        // whole index for them; past a file-sized tail the index is brought up to date.
        if how == IndexUse::Grown && tail >= policy.from_file_size {
            index.store(path, dialect, &st, &bodies, &parsed, now_ns);
        }
        return Ok(keep(parsed, how));
    }
    let parsed =
        session_model::parse_session_spans(&bodies, st.size, dialect, env.parallelism, policy).map_err(read_error)?;
    let Some(index) = index else { return Ok(keep(parsed, IndexUse::None)) };
    // Only a file that did not change while it was read is indexed.
    if env.storage.stat(path).ok().flatten().is_some_and(|now| crate::freshness::Seen::of_stat(&st).same_stat(&now)) {
        index.store(path, dialect, &st, &bodies, &parsed, now_ns);
    }
    Ok(keep(parsed, IndexUse::Rebuilt))
}

/// Returns `r` with omp's blob references resolved to the images they stand for
/// (unchanged when it holds none, or none resolves).
fn resolve_blob_refs(r: Record, blobs: &session_store::blob::BlobStore) -> Record {
    if !r.text().contains("blob:sha256:") {
        return r;
    }
    match crate::persist::resolve_blob_refs_shared(r.value(), blobs).0 {
        Some(v) => Record::from_value(v),
        None => r,
    }
}
