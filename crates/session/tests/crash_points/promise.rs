//! What an explored operation acknowledged before it stopped, and the checks of a state
//! against it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use session::model::{DiagnosticKind, HeaderCheck, ParsedFile, parse_session_bytes};
use session::store::{BlobRef, Durability};
use session::{Dialect, SessionManager};

use crate::Result;
use crate::rig::{View, file_name, is_lock, is_session_in, is_temp};

/// Which state a check looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Right after the death (memory: the storage as the death left it).
    Crash,
    /// After a simulated power loss that dropped every unsynced byte (memory).
    PowerLoss,
    /// After the operation returned its error and everything was dropped (files): the
    /// clean-up of the error path ran.
    ErrorPath,
    /// The copy of the files taken at the moment of death (files).
    Died,
}

impl Phase {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Phase::Crash => "after the crash",
            Phase::PowerLoss => "after a power loss",
            Phase::ErrorPath => "on the error path",
            Phase::Died => "in the files at the moment of death",
        }
    }
}

/// Everything one run promised.
#[derive(Debug, Default)]
pub(crate) struct Promises {
    pub(crate) sessions: Vec<SessionPromise>,
    /// Directories where a new session file may appear, whole or not at all.
    pub(crate) new_files: Vec<NewFiles>,
    pub(crate) raws: Vec<RawPromise>,
    pub(crate) blobs: Vec<BlobPromise>,
    /// Sessions a job rewrites, moves or deletes.
    pub(crate) jobs: Vec<JobPromise>,
    /// Files outside what the run's job may touch: each keeps exactly its bytes.
    pub(crate) untouched: Vec<(PathBuf, Vec<u8>)>,
    /// Jobs whose next writer is the job run again (a copy that died part-way).
    pub(crate) reruns: Vec<Rerun>,
    /// Every file of the run when its job began, and what the job may change: any other
    /// file keeps its bytes and no other file appears (temporary and lock files aside,
    /// which the leftover checks judge).
    pub(crate) snapshot: Option<Snapshot>,
    /// Set by a scenario whose session did not heal after a transient fault.
    pub(crate) stuck: Option<String>,
}

impl Promises {
    /// Adds a session promise and returns its index.
    pub(crate) fn session(&mut self, dialect: Dialect, path: &Path, durability: Durability) -> usize {
        self.sessions.push(SessionPromise {
            dialect,
            path: path.to_path_buf(),
            durability,
            acked: Vec::new(),
            pending: Vec::new(),
            durable: Vec::new(),
            marks: Vec::new(),
            texts: Vec::new(),
            names: Vec::new(),
        });
        self.sessions.len() - 1
    }
}

/// One session file and what it must hold.
#[derive(Debug)]
pub(crate) struct SessionPromise {
    pub(crate) dialect: Dialect,
    pub(crate) path: PathBuf,
    pub(crate) durability: Durability,
    /// Entries acknowledged and written: present after any crash.
    pub(crate) acked: Vec<String>,
    /// Entries acknowledged but held in memory by the first-write rule (pi before the first
    /// message, omp before the first assistant message): nothing is promised for them yet.
    pub(crate) pending: Vec<String>,
    /// Entries that must survive a power loss.
    pub(crate) durable: Vec<String>,
    /// Texts some record must contain (records whose ids are not known, e.g. before a migration).
    pub(crate) marks: Vec<String>,
    /// `(id, text)`: the loaded entry `id` must contain `text` (e.g. an image resolved from its blob).
    pub(crate) texts: Vec<(String, String)>,
    /// The names the loaded session may have (empty: not checked).
    pub(crate) names: Vec<Option<String>>,
}

impl SessionPromise {
    /// Records an acknowledged entry that is on disk now, with every pending one.
    pub(crate) fn written(&mut self, id: &str) {
        let pending = std::mem::take(&mut self.pending);
        for id in pending.into_iter().chain(std::iter::once(id.to_owned())) {
            if !self.acked.contains(&id) {
                self.acked.push(id);
            }
        }
        if self.durability == Durability::Fsync {
            self.durable.clone_from(&self.acked);
        }
    }

    /// Records several acknowledged entries that are on disk now.
    pub(crate) fn all_written<'a>(&mut self, ids: impl IntoIterator<Item = &'a str>) {
        for id in ids {
            self.written(id);
        }
    }

    /// Records an acknowledged entry that the first-write rule keeps in memory.
    pub(crate) fn held(&mut self, id: &str) {
        self.pending.push(id.to_owned());
    }

    /// Records a successful flush: with [`Durability::Flush`] every acknowledged line is durable.
    pub(crate) fn flushed(&mut self) {
        if self.durability != Durability::None {
            self.durable.clone_from(&self.acked);
        }
    }
}

/// The files of a run when its job began.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    pub(crate) files: Vec<(PathBuf, Vec<u8>)>,
    /// Files and folders the job may change; a file also allows its `<name>.<…>` siblings
    /// (its backups).
    pub(crate) allowed: Vec<PathBuf>,
    /// Where the run's files are (views put them elsewhere).
    pub(crate) root: PathBuf,
}

impl Snapshot {
    fn allows(&self, path: &Path) -> bool {
        self.allowed.iter().any(|a| {
            path.starts_with(a)
                || (path.parent() == a.parent()
                    && file_name(path).zip(file_name(a)).is_some_and(|(n, a)| n.starts_with(&format!("{a}."))))
        })
    }
}

fn check_snapshot(view: &View, snap: &Snapshot) -> Result<()> {
    let view_root = view.path(&snap.root);
    let mut seen = HashSet::new();
    for (path, bytes) in &snap.files {
        if snap.allows(path) {
            continue;
        }
        seen.insert(path.clone());
        match view.storage.read(&view.path(path)) {
            Ok(now) if now == *bytes => {}
            Ok(_) => return Err(format!("{} changed, outside what the job may touch", path.display()).into()),
            Err(e) => return Err(format!("{} is gone, outside what the job may touch: {e}", path.display()).into()),
        }
    }
    for f in view.files()? {
        if is_temp(&f) || is_lock(&f) {
            continue;
        }
        let Ok(rel) = f.strip_prefix(&view_root) else { continue };
        let original = snap.root.join(rel);
        if !snap.allows(&original) && !snap.files.iter().any(|(p, _)| *p == original) {
            return Err(format!("{} appeared, outside what the job may touch", original.display()).into());
        }
    }
    Ok(())
}

/// What a [`Rerun`] runs.
pub(crate) type RerunFn = Box<dyn Fn(&View) -> Result<()> + Send + Sync>;

/// A job run again on a view of the run's files.
pub(crate) struct Rerun(pub(crate) RerunFn);

impl std::fmt::Debug for Rerun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Rerun")
    }
}

/// A session a job rewrites, moves or deletes: wherever it is, it is whole.
#[derive(Debug)]
pub(crate) struct JobPromise {
    pub(crate) dialect: Dialect,
    /// Where it may be: its file, and for a move its new file.
    pub(crate) paths: Vec<PathBuf>,
    /// It may be gone (a deletion): then no backup of it may be left, which omp's listing
    /// would promote into the deleted session.
    pub(crate) may_vanish: bool,
    /// Texts its records hold, wherever it is.
    pub(crate) marks: Vec<String>,
    /// Artifact files (relative to an artifacts directory) that must be in the artifacts
    /// directory of one of `paths`.
    pub(crate) artifacts: Vec<(PathBuf, Vec<u8>)>,
}

/// New session files in `dir`: each one that exists (and is not in `known`) must be whole.
#[derive(Debug)]
pub(crate) struct NewFiles {
    pub(crate) dialect: Dialect,
    pub(crate) dir: PathBuf,
    pub(crate) known: Vec<PathBuf>,
    /// Entries a whole new file holds.
    pub(crate) ids: Vec<String>,
}

/// A file replaced atomically: it holds one whole version.
#[derive(Debug)]
pub(crate) struct RawPromise {
    pub(crate) path: PathBuf,
    pub(crate) versions: Vec<Vec<u8>>,
    /// The last acknowledged version (`None`: the file may be missing).
    pub(crate) acked: Option<usize>,
    /// The last version that must survive a power loss (`None`: nothing is promised after
    /// one; the file may be missing, empty or cut short).
    pub(crate) durable: Option<usize>,
}

/// Blobs stored through a blob store.
#[derive(Debug, Default)]
pub(crate) struct BlobPromise {
    /// The blob directory (`None`: a store in memory).
    pub(crate) dir: Option<PathBuf>,
    pub(crate) acked: Vec<Vec<u8>>,
    pub(crate) attempted: Vec<(Vec<u8>, Option<String>)>,
}

/// Leftovers found in a state.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Leftovers {
    pub(crate) temps: usize,
    pub(crate) locks: usize,
}

/// Checks `view` against everything `promises` says, as `phase` requires.
pub(crate) fn check(view: &View, promises: &Promises, phase: Phase) -> Result<()> {
    for s in &promises.sessions {
        check_session(view, s, phase).map_err(|e| format!("{}: {e}", s.path.display()))?;
    }
    for n in &promises.new_files {
        check_new_files(view, promises, n, phase)?;
    }
    for r in &promises.raws {
        check_raw(view, r, phase).map_err(|e| format!("{}: {e}", r.path.display()))?;
    }
    for b in &promises.blobs {
        check_blobs(view, b)?;
    }
    for j in &promises.jobs {
        check_job(view, j).map_err(|e| format!("{}: {e}", j.paths[0].display()))?;
    }
    if let Some(snap) = &promises.snapshot {
        check_snapshot(view, snap)?;
    }
    for (path, bytes) in &promises.untouched {
        match view.storage.read(&view.path(path)) {
            Ok(now) if now == *bytes => {}
            Ok(now) => {
                return Err(format!("{} changed ({} bytes, was {})", path.display(), now.len(), bytes.len()).into());
            }
            Err(e) => return Err(format!("{} is gone: {e}", path.display()).into()),
        }
    }
    let left: Vec<_> = view.files()?.into_iter().filter(|p| is_temp(p) || is_lock(p)).collect();
    if matches!(phase, Phase::Crash | Phase::PowerLoss | Phase::ErrorPath) && !left.is_empty() {
        return Err(format!("left behind: {left:?}").into());
    }
    Ok(())
}

/// Fails unless the parse shows at most one damaged line, the last one.
fn damage(parsed: &ParsedFile, bytes: &[u8]) -> Result<()> {
    let last = parsed
        .diagnostics
        .iter()
        .filter(|d| matches!(d.kind, DiagnosticKind::TornLastLine | DiagnosticKind::MissingFinalNewline))
        .count();
    let other: Vec<_> = parsed
        .diagnostics
        .iter()
        // A slot torn by an in-place rename is skipped as damaged (the title falls back
        // to the header): allowed, like a torn last line.
        .filter(|d| {
            !matches!(
                d.kind,
                DiagnosticKind::TornLastLine | DiagnosticKind::MissingFinalNewline | DiagnosticKind::DamagedTitleSlot
            )
        })
        .collect();
    if last > 1 || !other.is_empty() {
        let lines: Vec<String> = parsed
            .diagnostics
            .iter()
            .map(|d| {
                let rest = bytes.get(d.offset..).unwrap_or_default();
                let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
                format!("{:?} at line {}: {:?}", d.kind, d.line, short(&String::from_utf8_lossy(line)))
            })
            .collect();
        return Err(format!("damage beyond one torn last line: {}", lines.join("; ")).into());
    }
    Ok(())
}

/// The bytes of `path` in the view, `None` when there is no such file.
fn read_if_there(view: &View, path: &Path) -> Result<Option<Vec<u8>>> {
    match view.storage.read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn record_ids(parsed: &ParsedFile) -> HashSet<&str> {
    parsed.records.iter().filter_map(|r| r.id()).collect()
}

fn check_session(view: &View, p: &SessionPromise, phase: Phase) -> Result<()> {
    let path = view.path(&p.path);
    let required = if phase == Phase::PowerLoss { &p.durable } else { &p.acked };
    let Some(bytes) = read_if_there(view, &path)? else {
        if required.is_empty() {
            return Ok(());
        }
        return Err(format!("missing, with {} acknowledged entries", required.len()).into());
    };
    // Through the parser, without side effects.
    let parsed = parse_session_bytes(&bytes, p.dialect);
    if let Err(e) = damage(&parsed, &bytes) {
        let opens = match SessionManager::open(p.dialect, &path, view.env()) {
            Ok(_) => "it opens".to_owned(),
            Err(e) => format!("it does not open: {e}"),
        };
        return Err(format!("{e}; {opens}").into());
    }
    let valid = matches!(parsed.header_check(p.dialect), HeaderCheck::Valid { .. });
    if !valid && (!required.is_empty() || !bytes.is_empty()) {
        // An existing file without a header cannot be opened or written again.
        return Err(format!("no valid header ({} bytes): {:?}", bytes.len(), parsed.header_check(p.dialect)).into());
    }
    let ids = record_ids(&parsed);
    if let Some(missing) = required.iter().find(|id| !ids.contains(id.as_str())) {
        return Err(format!("acknowledged entry {missing} is not in the file").into());
    }
    let marks_required = phase != Phase::PowerLoss || p.durability == Durability::Fsync;
    if marks_required && let Some(m) = p.marks.iter().find(|m| !parsed.records.iter().any(|r| r.text().contains(*m))) {
        return Err(format!("no record holds {m:?}").into());
    }
    if bytes.is_empty() {
        return Ok(());
    }
    // Through the facade's open path.
    let m = SessionManager::open(p.dialect, &path, view.env()).map_err(|e| format!("does not open: {e}"))?;
    if let Some(missing) = required.iter().find(|id| m.tree().get(id).is_none()) {
        return Err(format!("acknowledged entry {missing} is not in the opened session").into());
    }
    for (id, text) in &p.texts {
        if !required.contains(id) {
            continue;
        }
        let entry = m.tree().get(id).ok_or_else(|| format!("entry {id} is not in the opened session"))?;
        if !entry.text().contains(text.as_str()) {
            return Err(format!("entry {id} lost its content (a blob?): {}", short(entry.text())).into());
        }
    }
    let names_required = phase != Phase::PowerLoss || p.durability == Durability::Fsync;
    if names_required && !p.names.is_empty() && !p.names.contains(&m.session_name()) {
        return Err(format!("session name {:?}, expected one of {:?}", m.session_name(), p.names).into());
    }
    Ok(())
}

fn check_job(view: &View, j: &JobPromise) -> Result<()> {
    let mut found = Vec::new();
    for p in &j.paths {
        let path = view.path(p);
        let Some(bytes) = read_if_there(view, &path)? else { continue };
        let parsed = parse_session_bytes(&bytes, j.dialect);
        if !matches!(parsed.header_check(j.dialect), HeaderCheck::Valid { .. }) {
            return Err(format!("{}: no valid header ({} bytes)", path.display(), bytes.len()).into());
        }
        if let Some(m) = j.marks.iter().find(|m| !parsed.records.iter().any(|r| r.text().contains(*m))) {
            return Err(format!("{}: no record holds {m:?}", path.display()).into());
        }
        SessionManager::open_read_only(j.dialect, &path, view.env())
            .map_err(|e| format!("{} does not open: {e}", path.display()))?;
        found.push(path);
    }
    if found.is_empty() {
        if !j.may_vanish {
            return Err("the session is at none of its places".into());
        }
        for p in &j.paths {
            let path = view.path(p);
            let (Some(dir), Some(name)) = (path.parent(), file_name(&path)) else { continue };
            for f in view.files()? {
                if f.parent() == Some(dir) && file_name(&f).is_some_and(|c| session::store::is_backup_of(name, c)) {
                    return Err(format!("the session is gone but its backup {} is left", f.display()).into());
                }
            }
        }
        return Ok(());
    }
    for (rel, bytes) in &j.artifacts {
        let held = j.paths.iter().any(|p| {
            session::store::artifacts_dir(&view.path(p))
                .and_then(|dir| view.storage.read(&dir.join(rel)).ok())
                .is_some_and(|b| b == *bytes)
        });
        if !held {
            return Err(format!("artifact {} is at none of the session's places", rel.display()).into());
        }
    }
    Ok(())
}

fn check_new_files(view: &View, promises: &Promises, n: &NewFiles, phase: Phase) -> Result<()> {
    let dir = view.path(&n.dir);
    let known: Vec<PathBuf> =
        n.known.iter().chain(promises.sessions.iter().map(|s| &s.path)).map(|p| view.path(p)).collect();
    for file in view.files()? {
        if !is_session_in(&file, &dir) || known.contains(&file) {
            continue;
        }
        let bytes = view.storage.read(&file)?;
        let parsed = parse_session_bytes(&bytes, n.dialect);
        let whole = || -> Result<()> {
            damage(&parsed, &bytes)?;
            if !matches!(parsed.header_check(n.dialect), HeaderCheck::Valid { .. }) {
                return Err(format!("no valid header ({} bytes)", bytes.len()).into());
            }
            let ids = record_ids(&parsed);
            if let Some(missing) = n.ids.iter().find(|id| !ids.contains(id.as_str())) {
                return Err(format!("entry {missing} is missing: the file is not whole").into());
            }
            SessionManager::open(n.dialect, &file, view.env()).map_err(|e| format!("does not open: {e}"))?;
            Ok(())
        };
        whole().map_err(|e| format!("new file {} {}: {e}", file.display(), phase.name()))?;
    }
    Ok(())
}

fn check_raw(view: &View, r: &RawPromise, phase: Phase) -> Result<()> {
    let path = view.path(&r.path);
    if phase == Phase::PowerLoss && r.durable.is_none() {
        // Not synced: after a power loss it may be missing, empty or cut short.
        return Ok(());
    }
    let floor = if phase == Phase::PowerLoss { r.durable } else { r.acked };
    let bytes = match view.storage.read(&path) {
        Ok(b) => b,
        Err(e) if e.is_not_found() && floor.is_none() => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let version = r.versions.iter().position(|v| *v == bytes);
    match (version, floor) {
        (None, _) => Err(format!("holds no whole version ({} bytes)", bytes.len()).into()),
        (Some(v), Some(f)) if v < f => Err(format!("holds version {v}, but version {f} was acknowledged").into()),
        _ => Ok(()),
    }
}

fn check_blobs(view: &View, b: &BlobPromise) -> Result<()> {
    for bytes in &b.acked {
        let blob = BlobRef::for_bytes(bytes);
        match view.blobs.get(&blob)? {
            Some(got) if got == *bytes => {}
            Some(got) => return Err(format!("blob {blob} holds {} other bytes", got.len()).into()),
            None => return Err(format!("acknowledged blob {blob} is missing").into()),
        }
    }
    let Some(dir) = &b.dir else { return Ok(()) };
    let dir = view.path(dir);
    for file in view.files()? {
        if file.parent() != Some(dir.as_path()) || is_temp(&file) || is_lock(&file) {
            continue;
        }
        let name = file_name(&file).unwrap_or_default();
        let hash = name.split('.').next().unwrap_or_default();
        let bytes = fs_err::read(&file)?;
        if BlobRef::for_bytes(&bytes).hash() != hash {
            return Err(format!("blob file {name} is not whole ({} bytes)", bytes.len()).into());
        }
    }
    Ok(())
}

fn short(text: &str) -> String {
    text.chars().take(300).collect()
}
