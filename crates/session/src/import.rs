//! Importing a Claude Code transcript or a Codex rollout as a new pi or omp session.
//!
//! [`import_file`] reads the source (never writing it or anything beside it), maps it
//! with [`source`] (the `session-import` crate) and writes the session into the
//! target agent's bucket for the source's cwd, as `<start>_<source id>.jsonl`: the id
//! and start are the source's, so the same source always lands at the same path.
//!
//! * **A new import** is published whole and atomically through the environment's
//!   storage (omp: with its title slot, images moved to the blob store as omp does).
//! * **Importing again** finds that file and appends only the entries it lacks (a
//!   source that grew); entries already there are left as they are, and those whose
//!   bytes differ (a response still being written when the first import ran) are
//!   reported, not rewritten. An unchanged source writes nothing.
//!
//! A fork (Codex's `forked_from_id`, Claude Code's `forkedFrom`) whose parent was
//! imported into the same folder before gets its path as the header's `parentSession`.
//!
//! For omp the pi records are shaped as omp writes them: `model_change` carries
//! `provider/model`, the title goes to the title slot and a `title_change` entry.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use session_model::entries::{Base, omp};
use session_model::{Dialect, Record, TitleSlot};
use session_store::{ExpectedSize, FileStorage, MemoryStorage, Storage, StoreError};

use crate::body::Body;
use crate::{Env, OpenMode, Session, SessionError, SessionManager};

/// The mapping itself, re-exported: [`source::import`], [`source::Imported`],
/// [`source::SourceKind`], [`source::Diagnostic`].
pub use session_import as source;

/// What to import into.
#[derive(Clone, Debug)]
pub struct ImportOptions {
    /// The agent whose session is written.
    pub to: Dialect,
    /// The session's working directory (default: the source's; relative to the
    /// environment's process directory).
    pub cwd: Option<String>,
    /// The folder to write into instead of the agent's bucket for the cwd.
    pub session_dir: Option<PathBuf>,
}

impl ImportOptions {
    /// Options importing into `to`'s bucket of the source's cwd.
    pub fn to(to: Dialect) -> ImportOptions {
        ImportOptions { to, cwd: None, session_dir: None }
    }
}

/// What an import did.
#[derive(Clone, Debug)]
pub struct ImportReport {
    /// The session file written or found.
    pub path: PathBuf,
    /// The agent whose session it is.
    pub dialect: Dialect,
    /// Which agent wrote the source.
    pub source: source::SourceKind,
    /// The session id (the source's).
    pub session_id: String,
    /// The session's working directory.
    pub cwd: String,
    /// Whether the file was created by this import.
    pub created: bool,
    /// Ids of the entries written by this import, in order.
    pub appended: Vec<String>,
    /// Ids of entries already in the session whose bytes differ from this import's.
    pub differing: Vec<String>,
    /// The session's leaf after the import.
    pub leaf: Option<String>,
    /// The session the source was forked from (Codex's `forked_from_id`, Claude Code's
    /// `forkedFrom.sessionId`).
    pub forked_from: Option<String>,
    /// The header's `parentSession`: the import of `forked_from` found in the same folder.
    pub parent_session: Option<String>,
    /// What the mapping skipped or kept as custom entries, by source line.
    pub diagnostics: Vec<source::Diagnostic>,
}

/// Why an import failed; nothing was written unless the error says so.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The source could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The source.
        path: PathBuf,
        /// Why.
        #[source]
        source: StoreError,
    },
    /// The source is not a session of either agent.
    #[error("cannot import {}", path.display())]
    Source {
        /// The source.
        path: PathBuf,
        /// Why.
        #[source]
        source: source::ImportError,
    },
    /// The source's session id cannot name a session file (it would reach outside the
    /// agent's folder, or no agent would take it): pi's rule for a chosen id.
    #[error("{} has the session id {id:?}, which cannot name a session file (letters, digits, '-', '_' and '.' only)", path.display())]
    BadSessionId {
        /// The source.
        path: PathBuf,
        /// The id it gives.
        id: String,
    },
    /// The imported session went on in the agent since it was imported (its leaf,
    /// `leaf`, is none of the source's entries): importing more into it would take the
    /// leaf from the agent's turns. Nothing was written.
    #[error("{} went on in its agent since it was imported (leaf {leaf}): import the source into a new session (--session-dir DIR)", path.display())]
    ContinuedSince {
        /// The imported session.
        path: PathBuf,
        /// Its leaf.
        leaf: String,
    },
    /// Turns the last import wrote have other content in the source now (it was imported
    /// while the agent was still writing a response): appending would leave its parts
    /// apart. Nothing was written.
    #[error("{}: the source changed turns it had already imported ({}): import it into a new session (--session-dir DIR), or remove this one and import again", path.display(), ids.join(", "))]
    SourceRewritten {
        /// The imported session.
        path: PathBuf,
        /// The entries whose content changed.
        ids: Vec<String>,
    },
    /// Neither the options nor the source name a working directory.
    #[error("{} names no working directory: pass the project's folder (--cwd DIR)", path.display())]
    NoCwd {
        /// The source.
        path: PathBuf,
    },
    /// No session directory: no agent directory in the environment and none given.
    #[error("no {dialect} agent directory to import into: set HOME or pass a session directory")]
    NoAgentDir {
        /// The target agent.
        dialect: &'static str,
    },
    /// Writing the session failed.
    #[error("cannot write the imported session {}", path.display())]
    Write {
        /// The session file.
        path: PathBuf,
        /// Why.
        #[source]
        source: SessionError,
    },
    /// The session built in memory from a source does not open ([`open_foreign`]).
    #[error("cannot open {} as a session", path.display())]
    Open {
        /// The source.
        path: PathBuf,
        /// Why.
        #[source]
        source: SessionError,
    },
}

/// Imports the Claude Code transcript or Codex rollout at `path` (read from the local
/// file system) as `options` say, writing through `env`'s storage into the agent
/// directories of `env.dirs()` (they must be the target agent's).
pub fn import_file(path: &Path, options: &ImportOptions, env: &Env) -> Result<ImportReport, ImportError> {
    let bytes = FileStorage::new().read(path).map_err(|source| ImportError::Read { path: path.to_owned(), source })?;
    import_bytes(path, &bytes, options, env)
}

/// Opens a Claude Code transcript or a Codex rollout read-only as the pi session an
/// import of it writes, built in memory: nothing is written anywhere (the environment's
/// storage is not used), and whatever reads a session (its info, tree, context, export)
/// reads the source so. `Ok(None)` when `path` is not such a source (a pi or omp
/// session, say).
///
/// # Errors
///
/// Reading `path` failed, or it is a source that does not import (see [`import_file`]).
pub fn open_foreign(path: &Path, env: &Env) -> Result<Option<(Session, ImportReport)>, ImportError> {
    let read_err = |source| ImportError::Read { path: path.to_owned(), source };
    // The start tells: a pi or omp session is read no further.
    let (head, _) = FileStorage::new().read_slices(path, 64 * 1024, 0).map_err(read_err)?;
    let first = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let ours = std::str::from_utf8(first)
        .ok()
        .and_then(session_model::json::parse)
        .is_some_and(|v| matches!(v.get("type").and_then(serde_json::Value::as_str), Some("session" | "title")));
    if ours || (!source::zst::is_zstd(&head) && source::SourceKind::detect(&head).is_none()) {
        return Ok(None);
    }
    let bytes = FileStorage::new().read(path).map_err(read_err)?;
    let memory = Env { storage: Arc::new(MemoryStorage::new()), blobs: None, index_dir: None, ..env.clone() };
    // Beside the source, as Node's `path.resolve` names that folder.
    let base = env.process_cwd.to_string_lossy();
    let source = session_discovery::resolve(&base, &path.to_string_lossy());
    let dir = Path::new(&source).parent().map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
    let options = ImportOptions { to: Dialect::Pi, cwd: None, session_dir: Some(dir) };
    let report = match import_bytes(path, &bytes, &options, &memory) {
        Err(ImportError::Source { source: source::ImportError::Unrecognised, .. }) => return Ok(None),
        r => r?,
    };
    let m = Session::open(Dialect::Pi, &report.path, memory)
        .map_err(|source| ImportError::Open { path: path.to_owned(), source })?;
    Ok(Some((m, report)))
}

/// [`import_file`] on the source's bytes; `path` names the source in errors.
pub fn import_bytes(
    path: &Path,
    bytes: &[u8],
    options: &ImportOptions,
    env: &Env,
) -> Result<ImportReport, ImportError> {
    let imported = source::import(bytes).map_err(|source| ImportError::Source { path: path.to_owned(), source })?;
    // The id becomes the file's name: one that could climb out of the folder is refused.
    if session_model::ids::validate_custom_session_id(&imported.session_id).is_err() {
        return Err(ImportError::BadSessionId { path: path.to_owned(), id: imported.session_id });
    }
    let cwd = options
        .cwd
        .clone()
        .or_else(|| imported.cwd.clone())
        .ok_or_else(|| ImportError::NoCwd { path: path.to_owned() })?;
    let cwd = std::path::absolute(env.process_cwd.join(&cwd)).unwrap_or_else(|_| PathBuf::from(&cwd));
    let cwd = cwd.to_string_lossy().into_owned();
    let dialect = options.to;
    let dir = match &options.session_dir {
        Some(d) => env.process_cwd.join(d),
        None => {
            let dirs = env.dirs.as_ref().filter(|d| d.dialect == dialect);
            let dirs = dirs.ok_or(ImportError::NoAgentDir { dialect: dialect.name() })?;
            dirs.default_session_dir(&cwd)
        }
    };
    let file = dir.join(session_discovery::session_file_name(&imported.timestamp, &imported.session_id));
    let write_err = |source: SessionError| ImportError::Write { path: file.clone(), source };
    // A fork's parent, when it was imported into the same folder: pi's and omp's
    // `parentSession` is its path.
    let parent = imported.forked_from.as_deref().and_then(|id| {
        let suffix = format!("_{id}.jsonl");
        let listed = env.storage.read_dir(&dir).ok()?;
        let mut names: Vec<String> = listed.into_iter().map(|e| e.name).filter(|n| n.ends_with(&suffix)).collect();
        names.sort();
        names.first().map(|n| dir.join(n).to_string_lossy().into_owned())
    });
    let (header, slot, entries) = shape(&imported, dialect, &cwd, parent.as_deref());
    let mut report = ImportReport {
        path: file.clone(),
        dialect,
        source: imported.kind,
        session_id: imported.session_id.clone(),
        cwd: cwd.clone(),
        created: false,
        appended: Vec::new(),
        differing: Vec::new(),
        leaf: imported.leaf().map(str::to_owned),
        forked_from: imported.forked_from.clone(),
        parent_session: parent.clone(),
        diagnostics: imported.diagnostics.clone(),
    };
    if env.storage.exists(&file).map_err(|e| write_err(e.into()))? {
        let mut m = SessionManager::open_with(dialect, &file, env.clone(), OpenMode::MustExist).map_err(write_err)?;
        // Before anything is appended, two cases where an append would lose or garble:
        // the session went on in the agent since its import (its leaf is none of the
        // source's entries, nor the back link an import leaves), and a turn the last
        // import wrote whole has other content now (a source imported mid-response:
        // appending its tool results would leave them without their call).
        let ours: std::collections::HashSet<&str> = entries.iter().filter_map(Record::id).collect();
        if let Some(leaf) = m.tree().leaf_id()
            && !ours.contains(leaf)
            && m.tree().get(leaf).and_then(|r| r.get_str("customType")) != Some("import:leaf")
        {
            return Err(ImportError::ContinuedSince { path: file.clone(), leaf: leaf.to_owned() });
        }
        let mut changed = Vec::new();
        for r in &entries {
            let Some(id) = r.id() else { continue };
            let Some(old) = m.tree().get(id) else { continue };
            let line = r.line();
            let line = crate::body::persist_line(dialect, env, &line).map_err(write_err)?;
            if old.line() != line && matches!(r.get_str("type"), Some("message" | "compaction" | "branch_summary")) {
                changed.push(id.to_owned());
            }
        }
        if !changed.is_empty() {
            return Err(ImportError::SourceRewritten { path: file.clone(), ids: changed });
        }
        for r in &entries {
            let Some(id) = r.id() else { continue };
            match m.tree().get(id) {
                Some(old) if old.line() == crate::body::persist_line(dialect, env, &r.line()).map_err(write_err)? => {}
                Some(_) => report.differing.push(id.to_owned()),
                None if dialect == Dialect::Omp && r.get_str("type") == Some("title_change") => {
                    // As omp renames: the title slot follows the entry (dated as a whole
                    // import dates it, so both write the same bytes).
                    let in_place = m.appends_in_place();
                    let title = r.get_str("title").unwrap_or_default().to_owned();
                    m.retitle_at(&title, r.get_str("source").unwrap_or("auto"), imported.timestamp.clone());
                    m.append_raw(r.clone()).map_err(write_err)?;
                    if in_place {
                        m.persist_title().map_err(write_err)?;
                    }
                    report.appended.push(id.to_owned());
                }
                None => {
                    m.append_raw(r.clone()).map_err(write_err)?;
                    report.appended.push(id.to_owned());
                }
            }
        }
        // Appended side branches must not take the leaf from the source's last line:
        // a custom entry under it moves the leaf back (pi and omp take the last line).
        if let Some(leaf) = imported.leaf()
            && !report.appended.is_empty()
            && m.tree().leaf_id() != Some(leaf)
        {
            let id = source::entry_id(&format!("import-leaf:{}", report.appended.join(",")));
            let ts = m.tree().get(leaf).and_then(|r| r.get_str("timestamp")).unwrap_or_default().to_owned();
            let back = omp::custom(&Base::new(id.clone(), Some(leaf), ts), "import:leaf", None);
            m.append_raw(back).map_err(write_err)?;
            report.appended.push(id);
        }
        report.leaf = m.tree().leaf_id().map(str::to_owned);
        m.close().map_err(write_err)?;
        return Ok(report);
    }
    env.storage.ensure_dir(&dir).map_err(|e| write_err(e.into()))?;
    let body = Body { dialect, env, header: &header, slot: slot.as_ref(), entries: &entries, source: None };
    match body.publish(&file, ExpectedSize::Missing) {
        Ok(_) => {}
        Err(e) if e.landed() => {}
        Err(e) => return Err(write_err(e)),
    }
    report.created = true;
    report.appended = entries.iter().filter_map(Record::id).map(str::to_owned).collect();
    Ok(report)
}

/// The header, omp's title slot and the entries of `imported` as `dialect` writes them.
fn shape(
    imported: &source::Imported,
    dialect: Dialect,
    cwd: &str,
    parent: Option<&str>,
) -> (Record, Option<TitleSlot>, Vec<Record>) {
    match dialect {
        Dialect::Pi => {
            let header = session_model::entries::pi::header(&imported.session_id, &imported.timestamp, cwd, parent);
            (header, None, imported.entries.clone())
        }
        Dialect::Omp => {
            let extra = omp::HeaderExtra { parent_session: parent.map(str::to_owned), ..Default::default() };
            let header = omp::header(&imported.session_id, &imported.timestamp, cwd, extra);
            let title = imported.title.as_ref();
            let source = title.map(|t| if t.by_user { "user" } else { "auto" });
            let slot = TitleSlot {
                title: title.map(|t| omp::sanitize_title(&t.name)).unwrap_or_default(),
                source: source.map(str::to_owned),
                updated_at: imported.timestamp.clone(),
            };
            let entries = imported
                .entries
                .iter()
                .map(|r| {
                    let base = || {
                        Base::new(r.id().unwrap_or_default(), r.parent_id(), r.get_str("timestamp").unwrap_or_default())
                    };
                    match r.get_str("type") {
                        Some("model_change") => {
                            let model = format!(
                                "{}/{}",
                                r.get_str("provider").unwrap_or_default(),
                                r.get_str("modelId").unwrap_or_default()
                            );
                            omp::model_change(&base(), &model, None, false)
                        }
                        Some("session_info") => {
                            let name = omp::sanitize_title(r.get_str("name").unwrap_or_default());
                            omp::title_change(&base(), &name, source.unwrap_or("auto"), None, None)
                        }
                        _ => r.clone(),
                    }
                })
                .collect();
            (header, Some(slot), entries)
        }
    }
}
