//! Whether a session file is still what a cache derived from it saw: unchanged, grown
//! by appends, or changed in some other way. The one rule of the caches kept beside
//! sessions (the search catalog, [`crate::search`]; the session index,
//! [`crate::index`]).
//!
//! * **Unchanged**: same size, modification time and file (inode, device), and where
//!   the cache noted it the same change time. A cache that wants more (the session
//!   index) also requires the file to have been settled when it was read
//!   ([`FileIdentity::settled_at`]) and checks the hashes below.
//! * **Grown**: the same file, larger, whose first bytes and the last bytes the cache
//!   covered hash as they did: appends only. A rewrite that kept those bytes and grew
//!   is taken for appends; that is the price of not reading the rest.
//! * Anything else is a change: the cache reads the file whole again.

use session_model::{ReadAt, SLOT_BYTES};
use session_store::{FileIdentity, FileStat};

/// How many bytes of a file's head, and of the bytes before the covered end, are
/// hashed to tell an append from a rewrite.
pub(crate) const CHECK_BYTES: u64 = 4096;

/// Where the hashed head starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Head {
    /// At the file's first byte.
    Whole,
    /// After omp's title slot, which a rename rewrites in place (for caches that do
    /// not keep the title).
    AfterTitleSlot,
}

/// What a cache noted about a file when it read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    /// The size then.
    pub(crate) size: u64,
    /// Modification time, nanoseconds.
    pub(crate) mtime_ns: i64,
    /// Change time, nanoseconds (`None`: not noted).
    pub(crate) ctime_ns: Option<i64>,
    /// Inode and device (`None`: the storage has none).
    pub(crate) file: Option<(u64, u64)>,
    /// How many of the file's bytes the cache covers; the hashes are of those.
    pub(crate) covered: u64,
    /// Hash of the head ([`CHECK_BYTES`] from where [`Head`] says).
    pub(crate) head_hash: u64,
    /// Hash of the [`CHECK_BYTES`] before `covered`.
    pub(crate) tail_hash: u64,
}

/// How a file relates to what a cache saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// The same bytes, as far as the rule can tell.
    Unchanged,
    /// The covered bytes are the same and more follow them.
    Grown,
    /// Anything else.
    Changed,
}

impl Seen {
    /// Notes a file of stat `st`, read through `reader`, of which the cache covers the
    /// first `covered` bytes.
    pub(crate) fn of(st: &FileStat, reader: &dyn ReadAt, covered: u64, head: Head) -> std::io::Result<Seen> {
        let (head_hash, tail_hash) = hashes(reader, covered, head)?;
        Ok(Seen {
            size: st.size,
            mtime_ns: st.mtime_ns(),
            ctime_ns: st.identity.map(|i| i.ctime_ns),
            file: file_of(st),
            covered,
            head_hash,
            tail_hash,
        })
    }

    /// Notes the stat `st` alone (no bytes covered, no hashes): for comparing stats.
    pub(crate) fn of_stat(st: &FileStat) -> Seen {
        Seen {
            size: st.size,
            mtime_ns: st.mtime_ns(),
            ctime_ns: st.identity.map(|i| i.ctime_ns),
            file: file_of(st),
            covered: 0,
            head_hash: 0,
            tail_hash: 0,
        }
    }

    /// Returns whether the stat alone says the file is unchanged: same size, times and
    /// file.
    pub(crate) fn same_stat(&self, st: &FileStat) -> bool {
        self.size == st.size
            && self.mtime_ns == st.mtime_ns()
            && self.file == file_of(st)
            && self.ctime_ns.is_none_or(|c| st.identity.is_some_and(|i| i.ctime_ns == c))
    }

    /// Returns how the file of stat `st`, read through `reader`, relates to what was
    /// seen. `settled` says whether the file had settled when it was seen (see
    /// [`FileIdentity::settled_at`]); an unsettled file is never taken as unchanged.
    pub(crate) fn change(
        &self,
        st: &FileStat,
        reader: &dyn ReadAt,
        head: Head,
        settled: bool,
    ) -> std::io::Result<Change> {
        let same_file = self.file == file_of(st);
        if self.same_stat(st) && self.covered == self.size {
            if settled && hashes(reader, self.covered, head)? == (self.head_hash, self.tail_hash) {
                return Ok(Change::Unchanged);
            }
            return Ok(Change::Changed);
        }
        if same_file
            && st.size > self.covered
            && hashes(reader, self.covered, head)? == (self.head_hash, self.tail_hash)
        {
            return Ok(Change::Grown);
        }
        Ok(Change::Changed)
    }
}

/// Returns a file's inode and device, where the storage has them.
pub(crate) fn file_of(st: &FileStat) -> Option<(u64, u64)> {
    st.identity.map(|i: FileIdentity| (i.ino, i.dev))
}

/// Returns the FNV-1a hash of `bytes`: stable across builds and platforms, so what a
/// cache records stays valid from one version to the next.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Returns where the hashed head starts.
fn head_start(first: &[u8], head: Head) -> u64 {
    match head {
        Head::AfterTitleSlot if first.starts_with(session_model::SLOT_START) => SLOT_BYTES as u64,
        _ => 0,
    }
}

/// Returns the bytes `[from, to)` of the file (fewer at its end).
pub(crate) fn read_at(reader: &dyn ReadAt, from: u64, to: u64) -> std::io::Result<Vec<u8>> {
    let len = usize::try_from(to.saturating_sub(from)).unwrap_or(usize::MAX);
    let mut buf = vec![0; len];
    let n = reader.read_full_at(&mut buf, from)?;
    buf.truncate(n);
    Ok(buf)
}

/// Returns the hashes of the head and of the bytes before `end`.
pub(crate) fn hashes(reader: &dyn ReadAt, end: u64, head: Head) -> std::io::Result<(u64, u64)> {
    let first = read_at(reader, 0, end.min(16))?;
    let start = head_start(&first, head).min(end);
    let head = read_at(reader, start, end.min(start + CHECK_BYTES))?;
    let tail = read_at(reader, end.saturating_sub(CHECK_BYTES).max(start), end)?;
    Ok((stable_hash(&head), stable_hash(&tail)))
}
