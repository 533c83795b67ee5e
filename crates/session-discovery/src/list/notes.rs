//! The notes a storage keeps beside its session files ([`session_store::Storage::read_notes`]): what a
//! listing learned about each file, so that a listing through a backend that keeps
//! notes reads only the files without one. A note holds the listing cache's record of
//! the file's info ([`crate::cache::encode_info`]) and its all-messages text.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use session_store::Note;

use super::files::Listed;
use super::{Discovery, Progress, collect};
use crate::info::SessionInfo;

/// The kinds of note ([`session_store::Storage::read_notes`]) a listing keeps beside each session: what
/// pi's scan, omp's scan and omp's prefix-only scan say about it, in the listing cache's
/// encoding (its version in the name).
pub(super) const NOTE_PI: &str = "session-discovery/1/pi";
/// See [`NOTE_PI`].
pub(super) const NOTE_OMP: &str = "session-discovery/1/omp";
/// The notes of other agents' sessions (no storage keeps them; the homes are local).
pub(super) const NOTE_OTHERS: &str = "session-discovery/1/others";
/// See [`NOTE_PI`].
pub(super) const NOTE_OMP_PREFIX: &str = "session-discovery/1/omp-prefix";

/// A note of a session: the length of the listing cache's record (4 bytes, little
/// endian), the record, then the all-messages text.
fn encode_note(info: Option<&SessionInfo>) -> Vec<u8> {
    let mut out = vec![0; 4];
    crate::cache::encode_info(&mut out, info);
    let len = u32::try_from(out.len() - 4).unwrap_or(u32::MAX);
    out[..4].copy_from_slice(&len.to_le_bytes());
    if let Some(i) = info {
        out.extend_from_slice(i.all_messages_text.as_bytes());
    }
    out
}

/// Decodes what [`encode_note`] wrote; `None` when the bytes are damaged.
fn decode_note(bytes: &[u8], path: &Path) -> Option<Option<SessionInfo>> {
    let len = usize::try_from(u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?)).ok()?;
    let record = bytes.get(4..4usize.checked_add(len)?)?;
    let mut info = crate::cache::decode_info(record, path)?;
    let text = &bytes[4 + len..];
    match info.as_mut() {
        Some(i) => i.all_messages_text = std::str::from_utf8(text).ok()?.into(),
        None if !text.is_empty() => return None,
        None => {}
    }
    Some(info)
}

impl Discovery {
    /// [`collect`] answered from the notes a storage keeps beside its files
    /// ([`session_store::Storage::read_notes`]): a file with a note is not read; the others are read as
    /// usual and their notes stored for the next listing. Notes that cannot be stored
    /// are only a slower next listing.
    #[allow(clippy::too_many_arguments, reason = "collect's arguments and the notes read for them")]
    pub(super) fn collect_with_notes(
        &self,
        files: &Listed,
        notes: Vec<Option<Note>>,
        note_kind: &str,
        build: impl Fn(&Path) -> Option<SessionInfo> + Sync,
        keep: &(dyn Fn(&SessionInfo) -> bool + Sync),
        publish_every: usize,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Vec<SessionInfo> {
        let notes: HashMap<&Path, Note> =
            files.files.iter().zip(notes).filter_map(|(p, n)| Some((p.as_path(), n?))).collect();
        let fresh = Mutex::new(Vec::new());
        let from_note = |p: &Path| {
            let Some(note) = notes.get(p) else { return build(p) };
            if let Some(info) = note.bytes.as_deref().and_then(|b| decode_note(b, p)) {
                return info;
            }
            let info = build(p);
            let bytes = encode_note(info.as_ref());
            fresh.lock().unwrap_or_else(PoisonError::into_inner).push((p.to_path_buf(), note.version, bytes));
            info
        };
        let out = collect(files, from_note, keep, publish_every, self.parallelism, progress);
        let fresh = fresh.into_inner().unwrap_or_else(PoisonError::into_inner);
        if !fresh.is_empty() {
            let _ = self.storage().write_notes(note_kind, &fresh);
        }
        out
    }
}
