//! The write state of a session: how its file stands against what is in memory, by its
//! dialect's persistence rules, the append writer, the latched failure and the stat of
//! the file as it was read. [`SessionManager`](super::SessionManager) decides what to
//! write; the journal says what the next write must be and records what each write did,
//! through the methods below and nowhere else.

use std::path::Path;

use session_model::Dialect;
use session_store::{AppendWriter, Durability, ExpectedSize, FileStat, Storage, StoreError};

use super::copy_error;
use crate::SessionError;

/// The write state of one session (see the module docs).
pub(crate) struct Journal {
    mode: Mode,
    writer: Option<Box<dyn AppendWriter>>,
    /// Reused buffer for one line and its newline.
    line_buf: Vec<u8>,
    /// The first write error, latched (pi: the append writer's, for good; omp: until a
    /// full rewrite succeeds).
    failure: Option<SessionError>,
    /// The file's stat when it was read, while nothing has written it since: a full
    /// rewrite then requires the very file read ([`ExpectedSize::Unchanged`]), not only
    /// one of its size.
    seen: Option<FileStat>,
}

/// The dialect's persistence rules and what they track.
#[derive(Debug, Clone)]
enum Mode {
    Pi(PiState),
    Omp(OmpState),
}

/// What pi's persistence tracks.
#[derive(Debug, Default, Clone)]
struct PiState {
    /// The file exists and holds everything in memory (later entries are appended).
    flushed: bool,
    /// The file's size as this manager last read or wrote it (`None`: not known, after
    /// an append whose partial write could not be removed). pi checks nothing before it
    /// rewrites a file; a rewrite here is guarded by this size, so a line another
    /// process appended since is never written over.
    size: Option<u64>,
}

/// What omp's persistence tracks.
#[derive(Debug, Default, Clone)]
struct OmpState {
    /// The file on disk equals the in-memory journal (modulo appends).
    file_is_current: bool,
    /// Every entry persists even before an assistant message.
    force_file_creation: bool,
    /// The next write must be a full rewrite.
    rewrite_required: bool,
    /// The file size last written or read (the rewrite's compare-and-set token).
    expected_size: Option<u64>,
    /// Inside an atomic batch: appends are staged.
    in_batch: bool,
    /// The file was written only to carry a draft (or such a file's draft was
    /// consumed): closing removes it if nothing was added.
    draft_cleanup_armed: bool,
}

/// What the journal's rules make of one appended line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NextWrite {
    /// Nothing reaches the file yet (the first-write gate is closed, or a batch stages).
    Nothing,
    /// pi's first write: the whole file, created.
    Create,
    /// The line is appended (pi: as it is; omp: as omp persists it).
    Append,
    /// The whole session is rewritten over the file.
    Rewrite,
    /// omp, with the draft cleanup armed: under the session's lock
    /// (`persist_beside_draft_cleanup`).
    BesideDraftCleanup,
}

/// The journal's state put aside while an operation may still be undone
/// ([`Journal::set_aside`], [`Journal::put_back`]).
pub(crate) struct SetAside {
    mode: Mode,
    failure: Option<SessionError>,
}

impl Journal {
    /// The state of a session of `dialect` that has no file yet.
    pub(crate) fn new(dialect: Dialect) -> Journal {
        Journal { mode: Mode::new(dialect), writer: None, line_buf: Vec::new(), failure: None, seen: None }
    }

    /// Returns the dialect whose rules apply.
    pub(crate) fn dialect(&self) -> Dialect {
        match self.mode {
            Mode::Pi(_) => Dialect::Pi,
            Mode::Omp(_) => Dialect::Omp,
        }
    }

    // ------------------------------------------------------------------ transitions

    /// A new session: no file, nothing latched, nothing read.
    pub(crate) fn reset(&mut self) {
        self.mode = Mode::new(self.dialect());
        self.failure = None;
        self.seen = None;
    }

    /// The whole session was just published (or read) as a file of `size` bytes that
    /// holds everything in memory; omp persists every later entry.
    pub(crate) fn on_disk(&mut self, size: u64) {
        self.mode = match self.mode {
            Mode::Pi(_) => Mode::Pi(PiState { flushed: true, size: Some(size) }),
            Mode::Omp(_) => Mode::Omp(OmpState {
                file_is_current: true,
                force_file_creation: true,
                expected_size: Some(size),
                ..OmpState::default()
            }),
        };
    }

    /// A full rewrite landed as a file of `size` bytes (synced or not): the next write
    /// builds on it. omp's latched failure is cleared by the caller
    /// ([`Journal::clear_failure`]); pi's is the writer's, for good.
    pub(crate) fn rewritten(&mut self, size: u64) {
        match &mut self.mode {
            Mode::Pi(pi) => *pi = PiState { flushed: true, size: Some(size) },
            Mode::Omp(omp) => {
                omp.expected_size = Some(size);
                omp.file_is_current = true;
                omp.rewrite_required = false;
            }
        }
    }

    /// omp: the file no longer holds what memory holds; the next write is a full
    /// rewrite.
    pub(crate) fn stale(&mut self) {
        if let Mode::Omp(omp) = &mut self.mode {
            omp.file_is_current = false;
            omp.rewrite_required = true;
        }
    }

    /// The session moved to a new file a branch wrote: `landed` is the size of the whole
    /// file on disk (synced or not), or `None` when nothing whole is there (pi waits
    /// for a conversation, or the write failed), in which case the next write publishes
    /// the session whole, never an append to a file without its header. Nothing is
    /// latched any more, and the file was not read.
    pub(crate) fn branched(&mut self, landed: Option<u64>) {
        self.failure = None;
        self.seen = None;
        self.mode = match self.mode {
            Mode::Pi(_) => Mode::Pi(PiState { flushed: landed.is_some(), size: landed }),
            Mode::Omp(_) => Mode::Omp(OmpState {
                force_file_creation: true,
                file_is_current: landed.is_some(),
                rewrite_required: landed.is_none(),
                expected_size: landed,
                ..OmpState::default()
            }),
        };
    }

    /// omp: the next write is a full rewrite.
    pub(crate) fn require_rewrite(&mut self) {
        if let Mode::Omp(omp) = &mut self.mode {
            omp.rewrite_required = true;
        }
    }

    /// omp: every later entry persists, even before an assistant message
    /// (`ensureOnDisk`). Fails for pi.
    pub(crate) fn force_file_creation(&mut self) -> Result<(), SessionError> {
        match &mut self.mode {
            Mode::Omp(omp) => {
                omp.force_file_creation = true;
                Ok(())
            }
            Mode::Pi(_) => Err(super::wrong_dialect("ensure_on_disk", Dialect::Pi)),
        }
    }

    /// The session's file went away (deleted by this manager): the writer is closed and
    /// the next write writes the whole session again.
    pub(crate) fn file_gone(&mut self) {
        self.close_writer();
        match &mut self.mode {
            Mode::Pi(pi) => pi.flushed = false,
            Mode::Omp(omp) => {
                omp.file_is_current = false;
                omp.expected_size = None;
            }
        }
    }

    /// omp: the draft-only file was deleted by the close-time cleanup: nothing is armed
    /// and nothing forces a new file.
    pub(crate) fn draft_file_deleted(&mut self) {
        if let Mode::Omp(omp) = &mut self.mode {
            *omp = OmpState { in_batch: omp.in_batch, rewrite_required: omp.rewrite_required, ..OmpState::default() };
        }
    }

    /// The session's file moved (renamed when `renamed`, else to be written anew at the
    /// new path, or never written): omp rewrites it whole, guarded by the old size when
    /// renamed; pi keeps appending to a renamed file and otherwise waits for its
    /// first-write rule. `from` is the state set aside before the move.
    pub(crate) fn moved(&mut self, from: &SetAside, renamed: bool) {
        self.mode = match &from.mode {
            Mode::Omp(old) => Mode::Omp(OmpState {
                file_is_current: old.file_is_current && renamed,
                force_file_creation: true,
                rewrite_required: true,
                expected_size: if renamed { old.expected_size } else { None },
                ..OmpState::default()
            }),
            Mode::Pi(old) => Mode::Pi(PiState { flushed: renamed, size: if renamed { old.size } else { None } }),
        };
    }

    /// Takes the state and the latched failure out, leaving a blank state (no
    /// failure), for [`Journal::put_back`] should the operation be undone.
    pub(crate) fn set_aside(&mut self) -> SetAside {
        let blank = Mode::new(self.dialect());
        SetAside { mode: std::mem::replace(&mut self.mode, blank), failure: self.failure.take() }
    }

    /// Restores the state and failure set aside.
    pub(crate) fn put_back(&mut self, saved: SetAside) {
        self.mode = saved.mode;
        self.failure = saved.failure;
    }

    /// Restores only the failure set aside (the operation stands, and wrote nothing that
    /// could clear it).
    pub(crate) fn put_back_failure(&mut self, saved: SetAside) {
        self.failure = saved.failure;
    }

    // ------------------------------------------------------------------ batches and drafts

    /// Whether an omp atomic batch is staging appends.
    pub(crate) fn in_batch(&self) -> bool {
        matches!(&self.mode, Mode::Omp(omp) if omp.in_batch)
    }

    /// Starts an omp atomic batch ([`SessionError::InBatch`] inside one already, and
    /// [`SessionError::WrongDialect`] for pi).
    pub(crate) fn begin_batch(&mut self) -> Result<(), SessionError> {
        match &mut self.mode {
            Mode::Pi(_) => Err(super::wrong_dialect("append_entries_atomically", Dialect::Pi)),
            Mode::Omp(omp) if omp.in_batch => Err(SessionError::InBatch),
            Mode::Omp(omp) => {
                omp.in_batch = true;
                Ok(())
            }
        }
    }

    /// Ends the batch; returns whether the file may be written (the first-write gate,
    /// given whether the session `has_conversation`) and whether the staged entries
    /// call for a rewrite.
    pub(crate) fn end_batch(&mut self, has_conversation: bool) -> (bool, bool) {
        match &mut self.mode {
            Mode::Omp(omp) => {
                omp.in_batch = false;
                (omp.gate_open(has_conversation), omp.rewrite_required)
            }
            Mode::Pi(_) => (false, false),
        }
    }

    /// Arms (or disarms) omp's close-time cleanup of a file written only for a draft.
    pub(crate) fn arm_draft_cleanup(&mut self, armed: bool) {
        if let Mode::Omp(omp) = &mut self.mode {
            omp.draft_cleanup_armed = armed;
        }
    }

    /// Whether omp's draft cleanup is armed.
    pub(crate) fn draft_cleanup_armed(&self) -> bool {
        matches!(&self.mode, Mode::Omp(omp) if omp.draft_cleanup_armed)
    }

    // ------------------------------------------------------------------ questions

    /// What an appended line calls for, given whether the session `has_conversation`
    /// (after the append). omp's bookkeeping moves with the answer: a staged line or a
    /// latched failure requires the next write to be a rewrite, a closed gate leaves the
    /// file behind memory.
    pub(crate) fn next_write(&mut self, has_conversation: bool) -> NextWrite {
        let latched = self.failure.is_some();
        match &mut self.mode {
            Mode::Pi(pi) if pi.flushed => NextWrite::Append,
            Mode::Pi(_) if has_conversation => NextWrite::Create,
            Mode::Pi(_) => NextWrite::Nothing,
            Mode::Omp(omp) => {
                if omp.in_batch {
                    // Staged: the batch's one atomic rewrite writes it.
                    omp.rewrite_required = true;
                    return NextWrite::Nothing;
                }
                if latched {
                    // A latched failure: the full rewrite is the writability probe.
                    omp.rewrite_required = true;
                }
                if !omp.gate_open(has_conversation) {
                    omp.file_is_current = false;
                    return NextWrite::Nothing;
                }
                if omp.draft_cleanup_armed {
                    NextWrite::BesideDraftCleanup
                } else if omp.needs_rewrite() {
                    NextWrite::Rewrite
                } else {
                    NextWrite::Append
                }
            }
        }
    }

    /// omp: whether the next write must be a full rewrite (the file is behind memory, a
    /// rewrite is pending, or a failure is latched).
    pub(crate) fn needs_rewrite(&self) -> bool {
        match &self.mode {
            Mode::Omp(omp) => omp.needs_rewrite() || self.failure.is_some(),
            Mode::Pi(_) => false,
        }
    }

    /// omp: whether the first-write gate is open (a file is forced, current, or the
    /// session `has_conversation`).
    pub(crate) fn gate_open(&self, has_conversation: bool) -> bool {
        match &self.mode {
            Mode::Omp(omp) => omp.gate_open(has_conversation),
            Mode::Pi(_) => false,
        }
    }

    /// Whether the next omp append goes to the end of the current file (no rewrite
    /// pending, no batch, nothing latched).
    pub(crate) fn appends_in_place(&self) -> bool {
        matches!(&self.mode, Mode::Omp(omp) if !omp.needs_rewrite() && !omp.in_batch) && self.failure.is_none()
    }

    /// omp: the file size last written or read (`None`: no file yet, or pi).
    pub(crate) fn omp_expected_size(&self) -> Option<u64> {
        match &self.mode {
            Mode::Omp(omp) => omp.expected_size,
            Mode::Pi(_) => None,
        }
    }

    /// Returns the size of the session's file as last read or written (`None`: no file
    /// yet, or not known).
    pub(crate) fn known_size(&self) -> Option<u64> {
        match &self.mode {
            Mode::Pi(pi) => pi.size.filter(|_| pi.flushed),
            Mode::Omp(omp) => omp.expected_size,
        }
    }

    /// The precondition of a full rewrite of the session's file at `path`: the very file
    /// read when nothing was written since ([`ExpectedSize::Unchanged`]), else the size
    /// last known, else no file. pi's file whose size was lost to a partial append that
    /// could not be removed is stated: only it knows its size now.
    pub(crate) fn rewrite_precondition(&self, storage: &dyn Storage, path: &Path) -> Result<ExpectedSize, StoreError> {
        let size = match &self.mode {
            Mode::Pi(PiState { flushed: true, size: None }) => match storage.stat(path)? {
                Some(st) => return Ok(ExpectedSize::Bytes(st.size)),
                None => return Ok(ExpectedSize::Missing),
            },
            Mode::Pi(pi) => pi.size,
            Mode::Omp(omp) => omp.expected_size,
        };
        Ok(match (size, &self.seen) {
            (Some(n), Some(seen)) if seen.size == n => ExpectedSize::unchanged(Some(seen)),
            (Some(n), _) => ExpectedSize::Bytes(n),
            (None, _) => ExpectedSize::Missing,
        })
    }

    // ------------------------------------------------------------------ the file as read

    /// Records the stat of the file as read (`None`: what was read is not known to be
    /// the file that stat describes).
    pub(crate) fn read_as(&mut self, stat: Option<FileStat>) {
        self.seen = stat;
    }

    /// Forgets the stat of the file as read: this manager wrote it since.
    pub(crate) fn written_since_read(&mut self) {
        self.seen = None;
    }

    // ------------------------------------------------------------------ the latched failure

    /// Returns the latched failure.
    pub(crate) fn failure(&self) -> Option<&SessionError> {
        self.failure.as_ref()
    }

    /// Latches `e` (a failure of the file at `path`) unless one is latched already.
    pub(crate) fn note_failure(&mut self, e: &SessionError, path: Option<&Path>) {
        if self.failure.is_none() {
            self.failure = Some(copy_error(e, path));
        }
    }

    /// Clears the latched failure (a full omp rewrite landed).
    pub(crate) fn clear_failure(&mut self) {
        self.failure = None;
    }

    /// Takes the latched failure out.
    pub(crate) fn take_failure(&mut self) -> Option<SessionError> {
        self.failure.take()
    }

    /// Latches `failure` again unless another was latched since.
    pub(crate) fn keep_failure(&mut self, failure: Option<SessionError>) {
        if self.failure.is_none() {
            self.failure = failure;
        }
    }

    // ------------------------------------------------------------------ the writer

    /// Appends `line` and a newline to the file at `path` through the append writer
    /// (opened on first use). On success the size last known moves past it; a failure
    /// is latched, and forgets pi's size when the partial line could not be removed;
    /// omp's writer is opened afresh after a failure, pi's stays failed.
    pub(crate) fn append_line(
        &mut self,
        storage: &dyn Storage,
        durability: Durability,
        path: &Path,
        line: &str,
    ) -> Result<(), SessionError> {
        if self.writer.is_none() {
            self.writer = Some(storage.open_writer(path, durability)?);
        }
        let writer = self.writer.as_mut().expect("writer was just opened");
        self.line_buf.clear();
        self.line_buf.extend_from_slice(line.as_bytes());
        self.line_buf.push(b'\n');
        self.seen = None;
        let written = self.line_buf.len() as u64;
        match writer.append(&self.line_buf) {
            Ok(()) => {
                match &mut self.mode {
                    Mode::Pi(pi) => pi.size = pi.size.map(|n| n + written),
                    Mode::Omp(omp) => omp.expected_size = omp.expected_size.map(|n| n + written),
                }
                Ok(())
            }
            Err(e) => {
                match (&mut self.mode, &e) {
                    // The file may end in part of the line: its size is no longer known.
                    (Mode::Pi(pi), StoreError::RollbackFailed { .. }) => pi.size = None,
                    (Mode::Pi(_), _) => {}
                    (Mode::Omp(_), _) => self.close_writer(),
                }
                let e = SessionError::Store(e);
                self.note_failure(&e, Some(path));
                Err(e)
            }
        }
    }

    /// Writes what the writer buffers; a failure is latched and returned. Then returns
    /// the latched failure, if any.
    pub(crate) fn flush(&mut self, path: Option<&Path>) -> Result<(), SessionError> {
        if let Some(w) = self.writer.as_mut()
            && let Err(e) = w.flush()
        {
            let e = SessionError::Store(e);
            self.note_failure(&e, path);
            return Err(e);
        }
        match &self.failure {
            Some(e) => Err(copy_error(e, path)),
            None => Ok(()),
        }
    }

    /// Closes the writer, if one is open, and returns its error.
    pub(crate) fn close(&mut self) -> Result<(), SessionError> {
        match self.writer.take() {
            Some(w) => w.close().map_err(SessionError::from),
            None => Ok(()),
        }
    }

    /// Closes the writer, if one is open, ignoring its error (a flush reported it, or
    /// the file is about to be rewritten whole).
    pub(crate) fn close_writer(&mut self) {
        if let Some(w) = self.writer.take() {
            let _ = w.close();
        }
    }
}

impl Mode {
    fn new(dialect: Dialect) -> Mode {
        match dialect {
            Dialect::Pi => Mode::Pi(PiState::default()),
            Dialect::Omp => Mode::Omp(OmpState::default()),
        }
    }
}

impl OmpState {
    fn gate_open(&self, has_conversation: bool) -> bool {
        self.force_file_creation || self.file_is_current || has_conversation
    }

    fn needs_rewrite(&self) -> bool {
        !self.file_is_current || self.rewrite_required
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// One step of a session's life as the journal sees it.
    #[derive(Clone, Debug)]
    enum Step {
        OnDisk(u64),
        Rewritten(u64),
        Stale,
        RequireRewrite,
        Force,
        FileGone,
        DraftDeleted,
        Branched(Option<u64>),
        Batch,
        Arm(bool),
        Fail,
        Clear,
        Next(bool),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0u64..1000).prop_map(Step::OnDisk),
            (0u64..1000).prop_map(Step::Rewritten),
            Just(Step::Stale),
            Just(Step::RequireRewrite),
            Just(Step::Force),
            Just(Step::FileGone),
            Just(Step::DraftDeleted),
            proptest::option::of(0u64..1000).prop_map(Step::Branched),
            Just(Step::Batch),
            any::<bool>().prop_map(Step::Arm),
            Just(Step::Fail),
            Just(Step::Clear),
            any::<bool>().prop_map(Step::Next),
        ]
    }

    fn apply(j: &mut Journal, s: &Step) {
        match *s {
            Step::OnDisk(n) => j.on_disk(n),
            Step::Rewritten(n) => j.rewritten(n),
            Step::Stale => j.stale(),
            Step::RequireRewrite => j.require_rewrite(),
            Step::Force => {
                let _ = j.force_file_creation();
            }
            Step::FileGone => j.file_gone(),
            Step::DraftDeleted => j.draft_file_deleted(),
            Step::Branched(n) => j.branched(n),
            Step::Batch => {
                if j.in_batch() {
                    j.end_batch(false);
                } else {
                    let _ = j.begin_batch();
                }
            }
            Step::Arm(on) => j.arm_draft_cleanup(on),
            Step::Fail => j.note_failure(&SessionError::InBatch, None),
            Step::Clear => j.clear_failure(),
            Step::Next(conversation) => {
                j.next_write(conversation);
            }
        }
    }

    proptest! {
        /// What the journal promises whatever happened before: an omp append in place
        /// is what the next write is; a file that is behind memory, or a latched
        /// failure, is never appended to; a landed rewrite is built on (its size known,
        /// nothing pending); pi appends exactly when its file was created.
        #[test]
        fn the_next_write_follows_the_state(
            omp in any::<bool>(),
            steps in proptest::collection::vec(step(), 0..24),
            conversation in any::<bool>(),
        ) {
            let dialect = if omp { Dialect::Omp } else { Dialect::Pi };
            let mut j = Journal::new(dialect);
            for s in &steps {
                apply(&mut j, s);
            }
            prop_assert_eq!(j.dialect(), dialect);
            let in_place = j.appends_in_place();
            let needs_rewrite = j.needs_rewrite();
            let gate = j.gate_open(conversation);
            let (armed, in_batch, known) = (j.draft_cleanup_armed(), j.in_batch(), j.known_size());
            let next = j.clone_state().next_write(conversation);
            match dialect {
                Dialect::Omp => {
                    prop_assert!(!(in_place && needs_rewrite));
                    if in_batch || !gate {
                        prop_assert_eq!(next, NextWrite::Nothing);
                    } else if armed {
                        prop_assert_eq!(next, NextWrite::BesideDraftCleanup);
                    } else if needs_rewrite {
                        prop_assert_eq!(next, NextWrite::Rewrite);
                    } else {
                        prop_assert!(in_place);
                        prop_assert_eq!(next, NextWrite::Append);
                    }
                    let mut landed = j.clone_state();
                    landed.rewritten(7);
                    landed.clear_failure();
                    prop_assert_eq!(landed.known_size(), Some(7));
                    prop_assert!(!landed.needs_rewrite());
                    let mut failed = j.clone_state();
                    failed.stale();
                    prop_assert!(failed.needs_rewrite());
                    prop_assert!(!failed.appends_in_place());
                }
                Dialect::Pi => {
                    prop_assert!(!in_place && !needs_rewrite && !in_batch && !armed);
                    match next {
                        // Created (its size may be lost to a partial append).
                        NextWrite::Append => {}
                        NextWrite::Create => prop_assert!(conversation && known.is_none()),
                        NextWrite::Nothing => prop_assert!(!conversation && known.is_none()),
                        other => prop_assert!(false, "pi never asks for {:?}", other),
                    }
                }
            }
        }
    }

    /// The stat of the file read guards a rewrite of that file only: a new session
    /// (`reset`, as `new_session` and omp's `fork` do) or a branch forgets it, so a new
    /// file that happens to have the old one's size is guarded by its size, not by the
    /// identity of a file it is not.
    #[test]
    fn a_new_session_forgets_the_file_read_before() -> Result<(), StoreError> {
        let storage = session_store::MemoryStorage::new();
        let path = Path::new("/s/a.jsonl");
        for dialect in [Dialect::Pi, Dialect::Omp] {
            let read = FileStat::new(40, 1, true);
            let mut j = Journal::new(dialect);
            j.on_disk(40);
            j.read_as(Some(read));
            assert!(matches!(j.rewrite_precondition(&storage, path)?, ExpectedSize::Unchanged { size: 40, .. }));
            j.reset();
            j.on_disk(40);
            assert_eq!(j.rewrite_precondition(&storage, path)?, ExpectedSize::Bytes(40), "{dialect:?}");
            j.read_as(Some(read));
            j.branched(Some(40));
            assert_eq!(j.rewrite_precondition(&storage, path)?, ExpectedSize::Bytes(40), "{dialect:?}");
        }
        Ok(())
    }

    impl Journal {
        /// A copy of the state and the failure (no writer), to ask it without changing it.
        fn clone_state(&self) -> Journal {
            Journal {
                mode: self.mode.clone(),
                writer: None,
                line_buf: Vec::new(),
                failure: self.failure.as_ref().map(|e| copy_error(e, None)),
                seen: self.seen,
            }
        }
    }
}
