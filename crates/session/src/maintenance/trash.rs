//! The trash: a deleted session (its file, artifacts directory and backups) moved to a
//! folder of ours beside the agents' sessions folder, on the same file system, where
//! neither agent lists it, until it is restored or the trash is emptied.
//!
//! Each sessions root `<dir>/sessions` has its trash `<dir>/session-trash`. A trashed
//! session is one folder there, `<deleted at, epoch ms>-<file name>`, holding
//! [`TRASH_META`] (where the session was, whose it is, when it was deleted) and the
//! session's own names: the file, its artifacts directory and its backups. Nothing in a
//! trash is touched unless its [`TRASH_META`] reads as ours.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use session_model::Dialect;
use session_store::{
    EntryKind, ExpectedSize, LockWait, Storage, StoreError, artifacts_dir, is_backup_of, is_plain_name,
};

use super::proof::is_real_dir;
use super::{Homes, JobError, RmPlan, prove_session};
use crate::error::unless_missing;

/// The name of a root's trash folder, beside the root (`<dir>/sessions` →
/// `<dir>/session-trash`).
pub const TRASH_DIR: &str = "session-trash";

/// The file in each trashed session's folder that says what it is.
pub const TRASH_META: &str = "trash.json";

/// How long a move to the trash waits for a writer that holds the session's lock.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// A session in the trash.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TrashItem {
    /// Its folder in the trash.
    pub dir: PathBuf,
    /// Where the session was, and where [`restore`] puts it back.
    pub original: PathBuf,
    /// Whose session it is.
    pub dialect: Dialect,
    /// The header's id.
    pub session_id: String,
    /// When it was moved to the trash (epoch ms).
    pub deleted_at_ms: i64,
    /// Whether the session file itself is in the folder (a move to the trash that was
    /// cut off moves the file last; running `rm` again finishes it).
    pub complete: bool,
    /// A restore began (and was cut off): [`restore`] again finishes it; neither `rm`
    /// nor [`trash_empty`] touches the folder.
    pub restoring: bool,
    /// The bytes of every file in the folder.
    pub bytes: u64,
}

impl TrashItem {
    /// Returns the session file's path inside the trash.
    pub fn file(&self) -> PathBuf {
        self.dir.join(self.original.file_name().unwrap_or_default())
    }
}

/// What a move to the trash did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TrashReport {
    /// The session as it is in the trash now.
    pub item: TrashItem,
    /// Its artifacts directory as it was, if it had one.
    pub artifacts: Option<PathBuf>,
    /// Its backups as they were.
    pub backups: Vec<PathBuf>,
    /// What is named like its artifacts directory but is not one (a link, a file): left
    /// in place.
    pub left: Option<PathBuf>,
}

/// Returns the trash folder of the root `path` is in, if it is in one.
pub fn trash_of(homes: &Homes, path: &Path) -> Option<PathBuf> {
    homes.root_of(path).and_then(super::Root::trash)
}

impl RmPlan {
    /// Moves the session, its artifacts directory (a real directory only) and its
    /// backups into the trash of its root ([`trash_of`]), under the session's lock,
    /// proving it again under the lock first. Nothing is copied: every move is a rename
    /// on one file system (a trash on another one is refused before anything moves).
    ///
    /// [`TRASH_META`] is written first, then the backups and the artifacts move, the
    /// session file last: a crash part-way leaves the session where it was (maybe without
    /// some backups or artifacts, which are in the trash), and running the move again
    /// finishes it in the same folder of the trash.
    ///
    /// # Errors
    ///
    /// [`JobError::Unsupported`] for a session outside the agents' folders (there is no
    /// trash for it: delete it with [`RmPlan::execute`]), a path that is not UTF-8, or a
    /// trash on another file system; store errors as they come.
    pub fn trash(self, storage: &dyn Storage, homes: &Homes, now_ms: i64) -> Result<TrashReport, JobError> {
        let path = self.proof().path.clone();
        let unsupported = |what: &str| JobError::Unsupported { path: path.clone(), what: what.to_owned() };
        let Some(trash) = trash_of(homes, &path) else {
            return Err(unsupported("outside the agents' sessions folders there is no trash; delete it for good"));
        };
        let Some(original) = path.to_str() else {
            return Err(unsupported("the trash keeps UTF-8 paths only; delete it for good"));
        };
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        let lock = storage.lock(&path, LockWait::Timeout(LOCK_WAIT))?;
        let proof = prove_session(storage, &path, Some(self.proof().dialect))?;
        storage.ensure_dir(&trash)?;
        if !is_real_dir(storage, &trash)? {
            return Err(unsupported(&format!(
                "{} is not a real folder (a link?); the trash goes only there",
                trash.display()
            )));
        }
        let here = storage.stat(path.parent().unwrap_or(Path::new("/")))?.and_then(|s| s.identity);
        let there = storage.stat(&trash)?.and_then(|s| s.identity);
        if let (Some(a), Some(b)) = (here, there)
            && a.dev != b.dev
        {
            return Err(unsupported(&format!("its trash {} is on another file system", trash.display())));
        }
        // A folder an earlier, interrupted move of this very session began, else a new one.
        let dir = match unfinished(storage, &trash, &path, &proof.id)? {
            Some(dir) => dir,
            None => {
                let meta = json!({
                    "version": 1,
                    "path": original,
                    "dialect": proof.dialect.name(),
                    "sessionId": proof.id,
                    "deletedAt": now_ms,
                });
                new_item(storage, &trash, &name, now_ms, format!("{meta}\n").as_bytes())?
            }
        };
        for b in &proof.backups {
            if let Some(n) = b.file_name() {
                storage.rename(b, &dir.join(n))?;
            }
        }
        if let Some(a) = &proof.artifacts
            && let Some(n) = a.file_name()
        {
            storage.move_dir(a, &dir.join(n))?;
        }
        storage.rename(&path, &dir.join(&name))?;
        drop(lock);
        let item = read_item(storage, &dir, true).ok_or_else(|| unsupported("its trash folder cannot be read back"))?;
        Ok(TrashReport { item, artifacts: proof.artifacts, backups: proof.backups, left: proof.not_artifacts })
    }
}

/// Creates `<trash>/<now_ms>-<name>` (or the first free `…-<n>` after it) holding `meta`
/// as [`TRASH_META`], and returns it.
fn new_item(storage: &dyn Storage, trash: &Path, name: &str, now_ms: i64, meta: &[u8]) -> Result<PathBuf, JobError> {
    for n in 0..1000 {
        let dir = match n {
            0 => trash.join(format!("{now_ms}-{name}")),
            n => trash.join(format!("{now_ms}-{name}-{n}")),
        };
        if storage.stat(&dir)?.is_some() {
            continue;
        }
        storage.ensure_dir(&dir)?;
        match storage.write_new(&dir.join(TRASH_META), meta) {
            Ok(()) => return Ok(dir),
            Err(StoreError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(StoreError::AlreadyExists { path: trash.join(format!("{now_ms}-{name}")) }.into())
}

/// Returns the trash folder of an interrupted move of the session `id` at `original`:
/// one whose [`TRASH_META`] names that id and the same bucket and file name (the home
/// may have been moved since), and that holds no session file yet.
fn unfinished(storage: &dyn Storage, trash: &Path, original: &Path, id: &str) -> Result<Option<PathBuf>, JobError> {
    let tail =
        |p: &Path| (p.parent().and_then(Path::file_name).map(ToOwned::to_owned), p.file_name().map(ToOwned::to_owned));
    Ok(list_dir(storage, trash, false)?
        .into_iter()
        .find(|item| {
            !item.complete && !item.restoring && item.session_id == id && tail(&item.original) == tail(original)
        })
        .map(|item| item.dir))
}

/// Reads the trashed session in `dir`: `None` when its [`TRASH_META`] is missing,
/// unreadable or not ours (such a folder is never touched). Its bytes are counted only
/// with `count` (0 otherwise): a folder's whole tree is walked for them.
fn read_item(storage: &dyn Storage, dir: &Path, count: bool) -> Option<TrashItem> {
    let meta = storage.read(&dir.join(TRASH_META)).ok()?;
    let v = serde_json::from_slice::<serde_json::Value>(&meta).ok()?;
    let (Some(1), Some(original), Some(dialect), Some(id), Some(at)) = (
        v["version"].as_u64(),
        v["path"].as_str(),
        v["dialect"].as_str().and_then(|d| d.parse::<Dialect>().ok()),
        v["sessionId"].as_str(),
        v["deletedAt"].as_i64(),
    ) else {
        return None;
    };
    let original = PathBuf::from(original);
    let name = original.file_name()?;
    if !original.is_absolute() {
        return None;
    }
    let complete = storage.stat(&dir.join(name)).ok()?.is_some_and(|s| s.is_file);
    let mut bytes = 0;
    let mut stack = if count { vec![dir.to_path_buf()] } else { Vec::new() };
    while let Some(d) = stack.pop() {
        for e in storage.read_dir(&d).unwrap_or_default() {
            let p = d.join(&e.name);
            match e.kind {
                EntryKind::Dir => stack.push(p),
                EntryKind::File => bytes += storage.stat(&p).ok().flatten().map_or(0, |s| s.size),
                _ => {}
            }
        }
    }
    Some(TrashItem {
        dir: dir.to_path_buf(),
        original,
        dialect,
        session_id: id.to_owned(),
        deleted_at_ms: at,
        complete,
        restoring: v["restoring"].as_bool().unwrap_or(false),
        bytes,
    })
}

/// Returns the trashed sessions of one trash folder, oldest first (none when it does
/// not exist).
fn list_dir(storage: &dyn Storage, trash: &Path, count: bool) -> Result<Vec<TrashItem>, JobError> {
    let entries = unless_missing(storage.read_dir(trash))?.unwrap_or_default();
    let mut items = Vec::new();
    for e in entries {
        if e.kind == EntryKind::Dir
            && let Some(item) = read_item(storage, &trash.join(&e.name), count)
        {
            items.push(item);
        }
    }
    items.sort_by(|a, b| (a.deleted_at_ms, &a.dir).cmp(&(b.deleted_at_ms, &b.dir)));
    Ok(items)
}

/// Returns every trashed session in the trashes of `homes`' roots, oldest first. Reads
/// only.
///
/// # Errors
///
/// A trash folder or a [`TRASH_META`] that cannot be read.
pub fn trash_list(storage: &dyn Storage, homes: &Homes) -> Result<Vec<TrashItem>, JobError> {
    let mut items = Vec::new();
    for t in &homes.trashes() {
        items.extend(list_dir(storage, t, true)?);
    }
    items.sort_by(|a, b| (a.deleted_at_ms, &a.dir).cmp(&(b.deleted_at_ms, &b.dir)));
    Ok(items)
}

/// Puts a trashed session back where it was: the session file first, then its
/// artifacts directory and backups, then removes its folder from the trash. The place
/// must be inside the sessions root whose trash holds it (a `trash.json` naming any other
/// place is refused), and free: anything at the session's place, its artifacts
/// directory's or a backup's refuses the restore before anything moves
/// ([`StoreError::AlreadyExists`]).
///
/// The folder is marked as being restored first ([`TrashItem::restoring`]): a crash
/// part-way leaves the session in the trash, or back in place with the rest of its names
/// still in the trash, and restoring again finishes it; until then neither `rm` nor
/// [`trash_empty`] touches the folder.
///
/// # Errors
///
/// [`StoreError::AlreadyExists`] as above, [`JobError::NotASession`] when what the trash
/// holds is no session of its dialect, [`JobError::Unsupported`] for a folder that is not
/// a trashed session of `homes`, store errors as they come.
pub fn restore(storage: &dyn Storage, homes: &Homes, item: &TrashItem) -> Result<PathBuf, JobError> {
    let unsupported = |what: &str| JobError::Unsupported { path: item.dir.clone(), what: what.to_owned() };
    let item = read_item(storage, &item.dir, false)
        .ok_or_else(|| unsupported("not a folder of the trash (no trash.json of ours)"))?;
    let original = item.original.clone();
    // Only back into the root this trash belongs to, by plain names.
    let root = homes.root_of(&original).ok_or_else(|| unsupported("its former place is in no sessions folder"))?;
    let inside = original.strip_prefix(&root.path).or_else(|_| original.strip_prefix(&root.real));
    let plain = inside.is_ok_and(|rel| {
        rel.components().all(|c| matches!(c, std::path::Component::Normal(n) if n.to_str().is_some_and(is_plain_name)))
    });
    if !plain || trash_of(homes, &original).as_deref() != item.dir.parent() {
        return Err(unsupported("its trash.json names a place outside the sessions folder of this trash"));
    }
    let name = original.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
    let taken = |p: &Path| -> Result<(), JobError> {
        match storage.stat(p)? {
            Some(_) => Err(StoreError::AlreadyExists { path: p.to_path_buf() }.into()),
            None => Ok(()),
        }
    };
    if item.complete {
        prove_session(storage, &item.file(), Some(item.dialect))?;
        taken(&original)?;
    } else if storage.stat(&original)?.is_none() {
        return Err(unsupported("the session file is neither in the trash nor at its place"));
    }
    if let Some(parent) = original.parent() {
        storage.ensure_dir(parent)?;
    }
    let lock = storage.lock(&original, LockWait::Timeout(LOCK_WAIT))?;
    // What goes back with it, each to a free place, all checked before anything moves.
    let mut moves = Vec::new();
    for e in storage.read_dir(&item.dir)? {
        let from = item.dir.join(&e.name);
        let to = original.with_file_name(&e.name);
        let artifacts = artifacts_dir(&original).is_some_and(|a| a == to);
        if (e.kind == EntryKind::Dir && artifacts) || (e.kind == EntryKind::File && is_backup_of(&name, &e.name)) {
            taken(&to)?;
            moves.push((from, to, e.kind == EntryKind::Dir));
        }
    }
    if !item.restoring {
        let meta = storage.read(&item.dir.join(TRASH_META))?;
        let mut v: serde_json::Value = serde_json::from_slice(&meta).map_err(|_| unsupported("trash.json changed"))?;
        v["restoring"] = serde_json::Value::Bool(true);
        storage.write_atomic(
            &item.dir.join(TRASH_META),
            format!("{v}\n").as_bytes(),
            ExpectedSize::Bytes(meta.len() as u64),
        )?;
    }
    if item.complete {
        // Checked again just before: a session written there meanwhile is never replaced.
        taken(&original)?;
        storage.rename(&item.file(), &original)?;
    }
    for (from, to, dir) in &moves {
        if *dir {
            storage.move_dir(from, to)?;
        } else {
            storage.rename(from, to)?;
        }
    }
    drop(lock);
    // The folder goes when nothing but its TRASH_META is left (anything else stays, in a
    // folder no longer taken for a trashed session).
    unless_missing(storage.unlink(&item.dir.join(TRASH_META)))?;
    storage.remove_empty_dir(&item.dir)?;
    Ok(original)
}

/// Deletes trashed sessions for good: each of `items` whose [`TRASH_META`] still reads
/// as ours (read again first) and that is whole in the trash, with everything in its
/// folder. A folder whose session file is not in it (an `rm` or a restore cut off: the
/// session is live at its place) or that is being restored is skipped. Returns those
/// deleted.
///
/// # Errors
///
/// Store errors as they come; the items before the failing one are gone.
pub fn trash_empty(storage: &dyn Storage, items: &[TrashItem]) -> Result<Vec<TrashItem>, JobError> {
    let mut gone = Vec::new();
    for item in items {
        let Some(now) = read_item(storage, &item.dir, true) else { continue };
        if !now.complete || now.restoring {
            continue;
        }
        // The session's own names first (backups, artifacts, the file), as `rm` deletes.
        storage.delete_with_artifacts(&now.file())?;
        remove_item(storage, &now.dir)?;
        gone.push(now);
    }
    Ok(gone)
}

/// Removes a trash folder whose session is gone from it: whatever else it holds (files
/// only, links not followed), then [`TRASH_META`] last, then the folder.
fn remove_item(storage: &dyn Storage, dir: &Path) -> Result<(), JobError> {
    for e in storage.read_dir(dir)? {
        let p = dir.join(&e.name);
        match e.kind {
            EntryKind::Dir => storage.delete_with_artifacts(&dir.join(format!("{}.jsonl", e.name)))?,
            _ if e.name == TRASH_META => {}
            _ => {
                unless_missing(storage.unlink(&p))?;
            }
        }
    }
    unless_missing(storage.unlink(&dir.join(TRASH_META)))?;
    storage.remove_empty_dir(dir)?;
    Ok(())
}
