//! The [`Storage`] trait every backend implements, and its small value types.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use session_model::ReadAt;

use crate::error::StoreError;

/// What [`Storage::stat`] reports about a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStat {
    /// Size in bytes (0 for directories in the memory backend).
    pub size: u64,
    /// Last modification time in milliseconds since the Unix epoch.
    pub mtime_ms: i64,
    /// True for regular files, false for directories and other kinds.
    pub is_file: bool,
    /// The finer identity a cache can key on, where the backend has one (the file
    /// storage: nanosecond times, inode and device); `None` elsewhere.
    pub identity: Option<FileIdentity>,
}

impl FileStat {
    /// Returns the stat of a backend that knows size, mtime and kind only.
    pub fn new(size: u64, mtime_ms: i64, is_file: bool) -> FileStat {
        FileStat { size, mtime_ms, is_file, identity: None }
    }

    /// Returns the version [`Storage::list_versions`] gives a file of this stat by
    /// default: `"<size>:<mtime_ns>:<ctime_ns>:<ino>:<dev>"` where the backend has an
    /// identity, else `"<size>:<mtime_ms>"`.
    pub fn version(&self) -> String {
        match self.identity {
            Some(i) => format!("{}:{}:{}:{}:{}", self.size, i.mtime_ns, i.ctime_ns, i.ino, i.dev),
            None => format!("{}:{}", self.size, self.mtime_ms),
        }
    }

    /// Returns the modification time in nanoseconds since the Unix epoch (the
    /// millisecond time scaled where the backend has nothing finer).
    pub fn mtime_ns(&self) -> i64 {
        self.identity.map_or(self.mtime_ms.saturating_mul(1_000_000), |i| i.mtime_ns)
    }

    /// Returns whether `self` and `other` describe the same bytes of the same file: the
    /// same size and identity (where the backend has one), else the same size and mtime.
    pub fn same_bytes_as(&self, other: &FileStat) -> bool {
        self.size == other.size
            && self.identity == other.identity
            && (self.identity.is_some() || self.mtime_ms == other.mtime_ms)
    }
}

/// A file's identity beyond its size: what the file system changes whenever the file's
/// content may have changed. Two stats with equal sizes and identities are taken to
/// describe the same content (git's rule, with its racy window: a change within the
/// time granularity of the file system can keep both).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileIdentity {
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    /// Status change time (unix) or creation time (elsewhere), nanoseconds since the epoch.
    pub ctime_ns: i64,
    /// Inode number (0 where the platform has none).
    pub ino: u64,
    /// Device number (0 where the platform has none).
    pub dev: u64,
}

impl FileIdentity {
    /// A file changed less than this long before it was read may change again without
    /// its times moving (file times are coarser than writes): a cache that trusts a
    /// file's identity to mean "unchanged" does not trust it for such a file (git's
    /// "racy clean" rule).
    pub const RACY_NS: i64 = 2_000_000_000;

    /// Returns whether a file of this identity, read at `now_ns` (nanoseconds since the
    /// epoch), had last changed long enough before to be known unchanged by its
    /// identity alone later on.
    pub fn settled_at(&self, now_ns: i64) -> bool {
        self.mtime_ns.max(self.ctime_ns) < now_ns.saturating_sub(FileIdentity::RACY_NS)
    }
}

/// What kind of thing a directory entry is, as the directory reports it (a link is
/// not followed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory (in key-value backends: a key prefix with keys below it).
    Dir,
    /// A symbolic link; [`Storage::stat`] follows it.
    Symlink,
    /// Anything else (a FIFO, a socket, a device): never to be opened by a listing.
    Other,
}

/// One entry of [`Storage::read_dir`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name (lossy UTF-8 where the file system allows other names).
    pub name: String,
    /// What it is.
    pub kind: EntryKind,
}

/// The precondition of a size-checked replace ([`Storage::write_atomic`]), omp's `expectedSize`.
///
/// [`ExpectedSize::Bytes`] compares byte sizes only: a same-size change by someone else goes
/// unnoticed, exactly as in the reference. [`ExpectedSize::Unchanged`] also compares the file's
/// identity where the storage has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpectedSize {
    /// No precondition.
    Any,
    /// The file must not exist.
    Missing,
    /// The file must exist with exactly this many bytes.
    Bytes(u64),
    /// The file must be the very one a reader saw: exactly `size` bytes and, where the
    /// storage reports identities ([`FileStat::identity`]) and `identity` is known, the same
    /// identity (times, inode, device), so that a same-size rewrite, a touch or a rename
    /// over the path since counts as a change. A storage without identities checks the
    /// size alone. What a job that read a file and rewrites
    /// it whole passes: any write by anyone since the read refuses the replace.
    Unchanged {
        /// The size seen.
        size: u64,
        /// The identity seen, if the storage reported one.
        identity: Option<FileIdentity>,
    },
}

impl ExpectedSize {
    /// Returns the precondition that [`Storage::stat`] of the file seen gives:
    /// [`ExpectedSize::Unchanged`] with its size and identity, or
    /// [`ExpectedSize::Missing`] for no file.
    pub fn unchanged(seen: Option<&FileStat>) -> ExpectedSize {
        match seen {
            Some(st) => ExpectedSize::Unchanged { size: st.size, identity: st.identity },
            None => ExpectedSize::Missing,
        }
    }

    /// Returns the expectation as an optional size (`None` = missing), or `None` for [`ExpectedSize::Any`].
    pub fn as_option(self) -> Option<Option<u64>> {
        match self {
            ExpectedSize::Any => None,
            ExpectedSize::Missing => Some(None),
            ExpectedSize::Bytes(n) | ExpectedSize::Unchanged { size: n, .. } => Some(Some(n)),
        }
    }

    /// Checks the expectation against the current size (`None` = missing).
    pub fn check(self, path: &Path, found: Option<u64>) -> Result<(), StoreError> {
        match self.as_option() {
            Some(expected) if expected != found => {
                Err(StoreError::Conflict { path: path.to_path_buf(), expected, found })
            }
            _ => Ok(()),
        }
    }

    /// Checks the expectation against the current stat (`None` = missing): the size, and
    /// for [`ExpectedSize::Unchanged`] the identity where both are known. A changed
    /// identity of the same size is a [`StoreError::Conflict`] whose sizes are equal.
    pub fn check_stat(self, path: &Path, found: Option<&FileStat>) -> Result<(), StoreError> {
        self.check(path, found.map(|st| st.size))?;
        if let (ExpectedSize::Unchanged { size, identity: Some(seen) }, Some(FileStat { identity: Some(now), .. })) =
            (self, found)
            && seen != *now
        {
            return Err(StoreError::Conflict { path: path.to_path_buf(), expected: Some(size), found: Some(size) });
        }
        Ok(())
    }
}

/// How hard an [`AppendWriter`] works to make each appended line survive a crash.
///
/// Readers in other processes see every acknowledged line immediately at every level: each
/// `append` hands the whole line to the operating system before it returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// Lines are written but never synced (what pi and omp do). After a process crash every
    /// acknowledged line is present and at most the line being written is torn. After a power
    /// loss any suffix of the acknowledged lines may be missing, and the last line may be torn.
    ///
    /// A new file written whole ([`Storage::write_atomic_stream`] of a branch, a fork, pi's
    /// first write) is not synced either: readers see it appear complete, but after a power
    /// loss it may be missing, empty or cut short. A whole-file write that replaces a file is
    /// synced at every level.
    #[default]
    None,
    /// Like [`Durability::None`] per append, but [`AppendWriter::flush`] and
    /// [`AppendWriter::close`] sync the file: after a power loss every line acknowledged before
    /// the last successful flush is present; later lines may be missing or the last one torn.
    Flush,
    /// Every append syncs the file's data before it returns (plus the directory entry when the
    /// writer created the file). After a power loss every acknowledged line is present; at most
    /// the line being written when the power went is torn.
    Fsync,
}

/// How long [`Storage::lock`] waits for a lock held by someone else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockWait {
    /// Fail with [`StoreError::Locked`] at once.
    NoWait,
    /// Poll until the lock is free or the time is up, then fail with [`StoreError::Locked`].
    Timeout(Duration),
}

/// An advisory lock on one session file, released on drop.
///
/// While a process holds it, other processes (and other [`Storage::lock`] calls) cannot take it,
/// and omp's publish lock on the same file is held too. The storage's own short publish locks
/// (around every append and size-checked rename) are skipped for a path whose lock this process
/// already holds.
pub struct SessionLock {
    path: PathBuf,
    release: Option<Box<dyn FnOnce() -> Result<(), StoreError> + Send>>,
}

impl SessionLock {
    /// Wraps a release action for `path`; backends call this.
    pub fn new(path: &Path, release: Box<dyn FnOnce() -> Result<(), StoreError> + Send>) -> SessionLock {
        SessionLock { path: path.to_path_buf(), release: Some(release) }
    }

    /// Returns the locked session file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Releases the lock, reporting a failure to remove the lock file.
    pub fn release(mut self) -> Result<(), StoreError> {
        match self.release.take() {
            Some(f) => f(),
            None => Ok(()),
        }
    }
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        if let Some(f) = self.release.take() {
            // Best effort: a lock file left behind names a dead pid and is stolen by the next writer.
            let _ = f();
        }
    }
}

impl fmt::Debug for SessionLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionLock").field("path", &self.path).finish_non_exhaustive()
    }
}

/// Where session files live: real files, memory, or a test wrapper.
///
/// Paths are used as given. Every operation that creates a file creates missing parent
/// directories. Sizes and offsets are in bytes.
pub trait Storage: Send + Sync {
    /// Creates `dir` and its parents (`mkdir -p`).
    fn ensure_dir(&self, dir: &Path) -> Result<(), StoreError>;

    /// Returns whether a file or directory exists at `path`.
    fn exists(&self, path: &Path) -> Result<bool, StoreError>;

    /// Returns size, mtime and kind of `path`, or `None` when it does not exist.
    fn stat(&self, path: &Path) -> Result<Option<FileStat>, StoreError>;

    /// Returns the names of the regular files directly in `dir`, sorted; dot-files are skipped (as
    /// the reference's glob does) and a missing directory gives an empty list.
    fn list(&self, dir: &Path) -> Result<Vec<String>, StoreError>;

    /// Returns the regular files directly in `dir` (as [`Storage::list`]: sorted,
    /// dot-files skipped, a missing directory empty), each with its stat, so that a sync
    /// learns the sizes of a folder of sessions from one listing.
    ///
    /// The default lists and stats each file (a file gone between the two is left out);
    /// backends whose listing carries sizes (an object store's) answer in one request.
    fn list_stats(&self, dir: &Path) -> Result<Vec<(String, FileStat)>, StoreError> {
        let mut out = Vec::new();
        for name in self.list(dir)? {
            if let Some(stat) = self.stat(&dir.join(&name))?
                && stat.is_file
            {
                out.push((name, stat));
            }
        }
        Ok(out)
    }

    /// Returns the regular files directly in `dir` (as [`Storage::list`]: sorted,
    /// dot-files skipped, a missing directory empty), each with a *version*: an opaque
    /// text that changes whenever the file's bytes change (it may also change when they
    /// do not). Two listings giving a file the same version saw the same bytes, so a sync
    /// that noted a version reads no file whose version is unchanged.
    ///
    /// The default is each file's size, mtime and (where the backend has one) identity
    /// from [`Storage::list_stats`] (`"<size>:<mtime_ns>[:<ctime_ns>:<ino>:<dev>]"`); an
    /// object store answers from one listing (the ETag of each file's head object),
    /// fetching nothing else. A file's times are coarser than its writes: a caller that
    /// trusts a version of a file changed within [`FileIdentity::RACY_NS`] of the listing
    /// can miss a change (git's "racy clean" case).
    fn list_versions(&self, dir: &Path) -> Result<Vec<(String, String)>, StoreError> {
        Ok(self.list_stats(dir)?.into_iter().map(|(name, st)| (name, st.version())).collect())
    }

    /// Returns the stat of the regular file `path` with its version as
    /// [`Storage::list_versions`] gives it, from one look at the file; `None` when there
    /// is no such file. The default is [`Storage::stat`] and [`FileStat::version`].
    fn stat_version(&self, path: &Path) -> Result<Option<(FileStat, String)>, StoreError> {
        Ok(self.stat(path)?.filter(|st| st.is_file).map(|st| (st, st.version())))
    }

    /// Returns the entries directly in `dir`, dot-files included, in no particular
    /// order; a missing directory has none. Unlike [`Storage::list`] it reports
    /// directories (in key-value backends: key prefixes with keys below them), links and
    /// special files too, each with its [`EntryKind`], so that a listing can walk a tree
    /// of buckets and skip what it must not open, and a session's artifacts directory can
    /// be moved or copied on any backend.
    fn read_dir(&self, dir: &Path) -> Result<Vec<DirEntry>, StoreError>;

    /// Returns the whole file.
    fn read(&self, path: &Path) -> Result<Vec<u8>, StoreError>;

    /// Reads the whole file into `buf` (a buffer reused across calls: it is grown,
    /// never shrunk) and returns the file's stat and how many bytes of `buf` hold the
    /// file: the bytes it had when stated (fewer if it shrank meanwhile; bytes appended
    /// since are not read). Listings read thousands of files through one buffer this
    /// way, paying neither an allocation nor page faults per file.
    ///
    /// The default stats the file and copies [`Storage::read`] into `buf`.
    fn read_into(&self, path: &Path, buf: &mut Vec<u8>) -> Result<(FileStat, usize), StoreError> {
        let stat = self.stat(path)?.ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })?;
        let data = self.read(path)?;
        let n = data.len().min(usize::try_from(stat.size).unwrap_or(usize::MAX));
        grow(buf, n).copy_from_slice(&data[..n]);
        Ok((stat, n))
    }

    /// [`Storage::read_slices`] into reused buffers (grown, never shrunk): returns the
    /// file's stat and how many bytes of `head` and of `tail` hold the two windows.
    ///
    /// The default stats the file and copies [`Storage::read_slices`].
    fn read_slices_into(
        &self,
        path: &Path,
        prefix: u64,
        suffix: u64,
        head: &mut Vec<u8>,
        tail: &mut Vec<u8>,
    ) -> Result<(FileStat, usize, usize), StoreError> {
        let stat = self.stat(path)?.ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })?;
        let (h, t) = self.read_slices(path, prefix, suffix)?;
        grow(head, h.len()).copy_from_slice(&h);
        grow(tail, t.len()).copy_from_slice(&t);
        Ok((stat, h.len(), t.len()))
    }

    /// Opens the file for reads by position: returns its stat when opened (its size,
    /// and where the backend has one its identity: for files that of the open
    /// descriptor, the very file the reader reads) and a reader, through which a large
    /// session is parsed in pieces as it is read ([`session_model::parse_session_at`])
    /// rather than held whole. Fails as [`Storage::read`] does.
    ///
    /// The default reads the whole file with [`Storage::read`] and serves it from
    /// memory (the reader never changes); the file storage reads the file itself.
    fn open_reader(&self, path: &Path) -> Result<(FileStat, Box<dyn ReadAt + Send>), StoreError> {
        let bytes = self.read(path)?;
        let size = bytes.len() as u64;
        let stat = self.stat(path)?.map_or(FileStat::new(size, 0, true), |st| FileStat { size, ..st });
        Ok((stat, Box::new(bytes)))
    }

    /// Returns a head and a tail window of the file (omp `readTextSlices`).
    ///
    /// The head is the first `min(prefix, size)` bytes. The tail is empty when `suffix` is 0; when
    /// the file is no larger than `prefix` it is the last `suffix` bytes of the head; otherwise the
    /// last `suffix` bytes of the file, which may overlap the head.
    fn read_slices(&self, path: &Path, prefix: u64, suffix: u64) -> Result<(Vec<u8>, Vec<u8>), StoreError>;

    /// Replaces the file in place (truncate, then write), pi's `w` mode.
    ///
    /// Not atomic: after a crash a reader may find the old content, an empty file or any prefix
    /// of the new content.
    fn write(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError>;

    /// Creates the file, failing with [`StoreError::AlreadyExists`] when it exists (pi's `wx`).
    ///
    /// Not synced: after a crash a reader may find no file, an empty file or a prefix of `bytes`.
    fn write_new(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError>;

    /// Replaces the file atomically, checking `expected` under the session's publish lock first.
    ///
    /// A mismatch fails with [`StoreError::Conflict`] and leaves the file alone. On success the
    /// new content is durable. A reader (or a reader after a crash) sees either the complete old
    /// file or the complete new one, never a mixture; a crash may leave a
    /// `.<name>.<pid>.<random>.tmp` file beside it, which the file storage removes with its next
    /// replace in that directory.
    fn write_atomic(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError>;

    /// [`Storage::write_atomic`] for content that `fill` writes piece by piece, so a
    /// large file never has to exist in memory at once; returns the number of bytes
    /// written. An error returned by `fill` aborts the write (the old file stays).
    /// `fill` may hand over many pieces at once with `write_vectored`, and runs of
    /// another file's bytes with [`Sink::copy_from`].
    ///
    /// `durability` says whether the content and the rename are synced before the call
    /// returns: [`Durability::Flush`] and [`Durability::Fsync`] sync (the guarantees of
    /// [`Storage::write_atomic`]); [`Durability::None`] does not, which is meant for a
    /// *new* file (`expected` = [`ExpectedSize::Missing`]) written where losing it to a
    /// power cut loses nothing else: other processes still see it appear whole, but after a
    /// power loss it may be missing, empty or hold a prefix of its content. Never pass it
    /// for a file that replaces good content. A backend may always sync.
    ///
    /// The default collects the pieces and calls [`Storage::write_atomic`]; backends
    /// that can stream (the file storage) do.
    fn write_atomic_stream(
        &self,
        path: &Path,
        expected: ExpectedSize,
        durability: Durability,
        fill: &mut dyn FnMut(&mut dyn Sink) -> std::io::Result<()>,
    ) -> Result<u64, StoreError> {
        let _ = durability; // always synced here
        let buf = collect(path, fill)?;
        self.write_atomic(path, &buf, expected)?;
        Ok(buf.len() as u64)
    }

    /// Writes `bytes` over the start of the existing file at `path`, in place: nothing
    /// is truncated and no other byte changes (omp's `updateSessionTitle`, which rewrites
    /// the 256-byte title slot of a large session without rewriting the session).
    ///
    /// `expected` is checked under the session's publish lock first. A mismatch fails
    /// with [`StoreError::Conflict`], as does a file shorter than `bytes`
    /// (`expected` = that length); a missing file is [`StoreError::NotFound`] unless
    /// `expected` already rules it out. Any failure before the write changes nothing.
    ///
    /// Not atomic: a reader, or a reader after a crash, may find the old start, the new
    /// one or a mixture of the two. Use it only where a mixture is harmless (a torn title
    /// slot is not a slot, and readers fall back to the header). `durability` says
    /// whether the bytes are synced before the call returns ([`Durability::None`]: not).
    ///
    /// The default reads the file and replaces it whole with [`Storage::write_atomic`],
    /// which is correct for any backend; the file and memory storages write in place.
    fn overwrite_prefix(
        &self,
        path: &Path,
        bytes: &[u8],
        expected: ExpectedSize,
        durability: Durability,
    ) -> Result<(), StoreError> {
        let _ = durability; // a replace is always synced
        let found = self.stat(path)?.map(|s| s.size);
        expected.check(path, found)?;
        let mut data = self.read(path)?;
        check_prefix_fits(path, bytes, data.len() as u64)?;
        data[..bytes.len()].copy_from_slice(bytes);
        let size = data.len() as u64;
        self.write_atomic(path, &data, ExpectedSize::Bytes(size))
    }

    /// Appends `bytes` in one open-append-close (pi's `appendFileSync`), creating the file.
    ///
    /// On a failed or short write the file is cut back to its previous size. Not synced.
    fn append(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError>;

    /// Appends `bytes` only if the file is still as `expected` says (a conditional append:
    /// the fast-forward of a copy whose start is known), durably.
    ///
    /// A mismatch fails with [`StoreError::Conflict`] and changes nothing;
    /// [`ExpectedSize::Missing`] creates the file with `bytes`. On success the file is
    /// the old content followed by `bytes`, and a reader (or a reader after a crash) sees
    /// the old file or the new one whole.
    ///
    /// The default reads the file and replaces it with [`Storage::write_atomic`] under the
    /// same precondition, which is correct for any backend; backends that can add to a
    /// file without sending it whole (the object store's segments) do.
    fn append_expected(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        let found = self.stat(path)?;
        expected.check_stat(path, found.as_ref())?;
        let mut data = if found.is_some() { self.read(path)? } else { Vec::new() };
        let seen = ExpectedSize::unchanged(found.as_ref());
        if let Some(Some(n)) = expected.as_option()
            && data.len() as u64 != n
        {
            // The file changed between the stat and the read.
            return Err(StoreError::Conflict {
                path: path.to_path_buf(),
                expected: Some(n),
                found: Some(data.len() as u64),
            });
        }
        data.extend_from_slice(bytes);
        self.write_atomic(path, &data, seen)
    }

    /// [`Storage::write_atomic`], returning the stat and the version
    /// ([`Storage::list_versions`]) of the file this write made where the storage learns
    /// them from the write itself (an object store's `PUT` answers with the new ETag).
    ///
    /// `None` (the default) where it does not: a caller that needs them then asks
    /// [`Storage::stat_version`], which may already see another writer's later write.
    fn write_atomic_versioned(
        &self,
        path: &Path,
        bytes: &[u8],
        expected: ExpectedSize,
    ) -> Result<Option<(FileStat, String)>, StoreError> {
        self.write_atomic(path, bytes, expected).map(|()| None)
    }

    /// [`Storage::append_expected`], returning the stat and version of the file it made
    /// as [`Storage::write_atomic_versioned`] does.
    fn append_expected_versioned(
        &self,
        path: &Path,
        bytes: &[u8],
        expected: ExpectedSize,
    ) -> Result<Option<(FileStat, String)>, StoreError> {
        self.append_expected(path, bytes, expected).map(|()| None)
    }

    /// Cuts the file back to `len` bytes (or extends it with zero bytes).
    fn truncate(&self, path: &Path, len: u64) -> Result<(), StoreError>;

    /// Renames `from` to `to`, replacing `to`; durable once it returns `Ok`.
    ///
    /// A rename that happened but could not be made durable (its directory sync failed)
    /// returns [`StoreError::NotDurable`]: `to` names the moved file (`written` is its
    /// size) and the rename must not be repeated or treated as failed.
    fn rename(&self, from: &Path, to: &Path) -> Result<(), StoreError>;

    /// Deletes the file; [`StoreError::NotFound`] when it does not exist.
    fn unlink(&self, path: &Path) -> Result<(), StoreError>;

    /// Removes the directory `dir` if it is empty; a directory that is not empty, or
    /// not there, is left alone without an error. (In key-value backends a directory
    /// with keys below it exists by itself; only one made empty by
    /// [`Storage::ensure_dir`] has anything to remove.)
    fn remove_empty_dir(&self, dir: &Path) -> Result<(), StoreError>;

    /// Deletes a session journal and what belongs to it (omp `deleteSessionWithArtifacts`).
    ///
    /// Removes every `<name>.<anything>.bak` sibling (stale backups would otherwise
    /// resurrect the session), then the artifacts directory ([`artifacts_dir`]: none for a
    /// name whose stem is not a plain name) recursively, then the file; a missing file is
    /// fine. omp removes the file first; removing it last means a crash or an error
    /// part-way leaves the session in place (without some backups or artifacts) for the
    /// next delete to finish, never a backup that omp's listing would promote in its
    /// place. The file storage removes an artifacts directory only when it is a real
    /// directory: a symbolic link in its place is neither followed nor removed.
    fn delete_with_artifacts(&self, path: &Path) -> Result<(), StoreError>;

    /// Moves the directory `from` to `to` (omp's move of a session's artifacts directory)
    /// and returns the renames done, in order, so that a caller can undo them with
    /// [`Storage::rename`] in reverse.
    ///
    /// A missing `from` is nothing to do. When `to` does not exist the directory is renamed
    /// whole; when it does, each entry of `from` whose name is free at `to` is moved into
    /// it, an entry whose name is taken stays at `from` (nothing is overwritten), and `from`
    /// is removed if it is then empty. Renames within one file system only.
    ///
    /// The default walks [`Storage::read_dir`] and renames file by file (a directory whose
    /// name is free at `to` moves with everything below it, and one whose name is taken
    /// by a directory merges into it the same way), so it works on any backend whose
    /// `read_dir` reports directories; when a rename fails, the renames it did are undone
    /// (best effort) before the error is returned. The file and memory storages rename
    /// directories whole.
    fn move_dir(&self, from: &Path, to: &Path) -> Result<Vec<(PathBuf, PathBuf)>, StoreError> {
        let mut moves = Vec::new();
        if !self.exists(from)? {
            return Ok(moves);
        }
        match merge_dir_into(self, from, to, &mut moves) {
            Ok(()) => Ok(moves),
            Err(e) => {
                for (src, dst) in moves.iter().rev() {
                    let _ = self.rename(dst, src);
                }
                Err(e)
            }
        }
    }

    /// Writes a file that is only ever written whole and never appended to (a blob, whose
    /// name is the hash of its bytes): atomically, so a reader finds the old file or the
    /// new one, but without the session's publish lock, which guards appends that such a
    /// file never has (and which a writer killed while holding it would leave behind).
    ///
    /// The default is [`Storage::write_atomic`] with [`ExpectedSize::Any`].
    fn write_immutable(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        self.write_atomic(path, bytes, ExpectedSize::Any)
    }

    /// Gives the file `from` a second name `to` where the storage can (a hard link: one
    /// copy of the bytes), else writes a copy with [`Storage::write_new`]. `to` that exists
    /// already is [`StoreError::AlreadyExists`]; nothing else is changed then.
    ///
    /// The default copies; the file storage links (omp's typed blob sidecars).
    fn link_or_copy(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        let bytes = self.read(from)?;
        self.write_new(to, &bytes)
    }

    /// Makes the file's modification time now, leaving its bytes as they are: a blob
    /// stored again is new again, so that a gc sparing young blobs spares it.
    /// [`StoreError::NotFound`] when there is no such file.
    ///
    /// The default writes the same bytes again with [`Storage::write_atomic`], on the
    /// condition that the file still has the size read; the file storage sets the time.
    fn renew(&self, path: &Path) -> Result<(), StoreError> {
        let bytes = self.read(path)?;
        self.write_atomic(path, &bytes, ExpectedSize::Bytes(bytes.len() as u64))
    }

    /// Removes what writers killed part-way left in `dir` (the file storage's temporary
    /// files of processes that are gone); returns how many were removed. Nothing by
    /// default: other storages write in one step.
    fn remove_leftovers(&self, dir: &Path) -> Result<usize, StoreError> {
        let _ = dir;
        Ok(0)
    }

    /// Copies the directory tree at `from` into `to` (created as needed), file by file
    /// (omp's `copySessionArtifacts`); a file already at `to` is replaced. A missing `from`
    /// is nothing to do. Not atomic: after a failure or a crash `to` may hold part of the
    /// copy. A FIFO, socket or device in the tree is refused
    /// ([`StoreError::NotRegular`]), as omp's copy refuses it: nothing is dropped silently.
    ///
    /// The default walks [`Storage::read_dir`] and copies each file with
    /// [`Storage::read`] and [`Storage::write`]; links are followed. The file storage makes
    /// each link again with the same target (never following it) and refuses special
    /// files before it writes anything.
    fn copy_dir(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        if !self.exists(from)? {
            return Ok(());
        }
        self.ensure_dir(to)?;
        for entry in self.read_dir(from)? {
            let (src, dst) = (from.join(&entry.name), to.join(&entry.name));
            let is_dir = match entry.kind {
                EntryKind::File => false,
                EntryKind::Dir => true,
                EntryKind::Symlink => match self.stat(&src)? {
                    Some(st) => !st.is_file,
                    None => continue,
                },
                EntryKind::Other => return Err(StoreError::NotRegular { path: src, kind: "special file" }),
            };
            if is_dir {
                self.copy_dir(&src, &dst)?;
            } else {
                self.write(&dst, &self.read(&src)?)?;
            }
        }
        Ok(())
    }

    /// Opens an append writer on `path`, creating the file if needed.
    fn open_writer(&self, path: &Path, durability: Durability) -> Result<Box<dyn AppendWriter>, StoreError>;

    /// Takes the advisory lock of the session file `path` (omp's two publish locks on disk).
    fn lock(&self, path: &Path, wait: LockWait) -> Result<SessionLock, StoreError>;

    /// Returns the notes kept beside `paths` under `kind`, one per path in order (`None`
    /// for a path that is no file), or `None` when this storage keeps no notes (the
    /// default).
    ///
    /// A note is a few bytes an upper layer derives from a file and keeps beside it, so
    /// that the next caller need not read the file again: what a listing says about a
    /// session. The storage knows nothing of what a note means. Every write of the file
    /// (append, rewrite, truncate, rename, title change) drops its note in the same
    /// statement; so a note that is returned was derived from the bytes the file still
    /// holds, provided it was stored with [`Storage::write_notes`] and the version read
    /// here.
    fn read_notes(&self, paths: &[PathBuf], kind: &str) -> Result<Option<Vec<Option<Note>>>, StoreError> {
        let _ = (paths, kind);
        Ok(None)
    }

    /// Keeps each `(path, version, note)` beside its file under `kind`, where the file is
    /// still at the [`Note::version`] returned by [`Storage::read_notes`] (derived from
    /// bytes read after that call); a file written since keeps no note. A storage that
    /// keeps no notes ignores the call (the default).
    fn write_notes(&self, kind: &str, notes: &[(PathBuf, u64, Vec<u8>)]) -> Result<(), StoreError> {
        let _ = (kind, notes);
        Ok(())
    }

    /// Starts watching the file `path` for writes (appends, rewrites, truncation,
    /// deletion, a rename onto or away from it), by this process or any other: a
    /// reader that follows a session (`session tail --follow`) waits on the returned
    /// [`Watch`] instead of reading the file again and again. `None` when this storage
    /// has no way to watch (the default); a caller then polls [`Storage::stat`].
    ///
    /// The file and memory storages poll the file's stat while a caller waits
    /// ([`PollWatch`]), and so do the SQLite and MySQL storages; PostgreSQL is told by
    /// the server (a trigger's `NOTIFY`, every writer of the table); Redis by the
    /// channel our write scripts publish on, which omp's own scripts do not. A reader
    /// that must see every writer also stats the file now and then.
    fn watch(&self, path: &Path) -> Result<Option<Box<dyn Watch>>, StoreError> {
        let _ = path;
        Ok(None)
    }
}

/// One write to a watched file, as a [`Watch`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change {
    /// The file's size after the write, as the writer left it; `None` when the file is
    /// gone (deleted, or renamed away), or the storage could not say.
    pub size: Option<u64>,
}

/// The writes to one file, as they happen (see [`Storage::watch`]).
///
/// A change by a writer the storage hears (see [`Storage::watch`]) is reported at least
/// once after it happens; several writes may come as one change, and one write may come
/// twice, so a reader reads the file (or stats it) after each change rather than
/// trusting the count. Changes that happened before the watch started are not reported:
/// start watching, then read.
pub trait Watch: Send {
    /// Waits up to `timeout` for the next change; `Ok(None)` when none came in time.
    fn next(&mut self, timeout: Duration) -> Result<Option<Change>, StoreError>;
}

/// A [`Watch`] that compares the file's [`FileStat`] (size, mtime and identity) every
/// [`PollWatch::INTERVAL`] while a caller waits: what the file and memory storages
/// return.
pub struct PollWatch<S> {
    storage: S,
    path: PathBuf,
    last: Option<FileStat>,
}

impl<S: Storage> PollWatch<S> {
    /// How often the file is looked at while a caller waits.
    pub const INTERVAL: Duration = Duration::from_millis(50);

    /// Watches `path` on `storage`, from the file's state now.
    pub fn new(storage: S, path: &Path) -> Result<PollWatch<S>, StoreError> {
        let last = storage.stat(path)?;
        Ok(PollWatch { storage, path: path.to_path_buf(), last })
    }
}

impl<S: Storage + Send> Watch for PollWatch<S> {
    fn next(&mut self, timeout: Duration) -> Result<Option<Change>, StoreError> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let now = self.storage.stat(&self.path)?;
            if now != self.last {
                self.last = now;
                return Ok(Some(Change { size: now.filter(|s| s.is_file).map(|s| s.size) }));
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            std::thread::sleep(left.min(Self::INTERVAL));
        }
    }
}

impl<S> fmt::Debug for PollWatch<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PollWatch").field("path", &self.path).field("last", &self.last).finish_non_exhaustive()
    }
}

/// What [`Storage::read_notes`] returns for one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// The file's version: it changes with every write of the file. Pass it back to
    /// [`Storage::write_notes`] with a note derived from the bytes read after it.
    pub version: u64,
    /// The note kept under the kind asked for, if one is kept and the file was not
    /// written since it was stored.
    pub bytes: Option<Vec<u8>>,
}

/// The walk of [`Storage::move_dir`]'s default: every entry of `from` whose name is free
/// at `to` is moved there, a directory whose name is a directory at `to` merges into it,
/// anything else stays; each rename is recorded in `moves`.
fn merge_dir_into<S: Storage + ?Sized>(
    storage: &S,
    from: &Path,
    to: &Path,
    moves: &mut Vec<(PathBuf, PathBuf)>,
) -> Result<(), StoreError> {
    for entry in storage.read_dir(from)? {
        let (src, dst) = (from.join(&entry.name), to.join(&entry.name));
        match storage.stat(&dst)? {
            None => move_tree(storage, &entry, &src, &dst, moves)?,
            Some(st) if !st.is_file && entry.kind == EntryKind::Dir => merge_dir_into(storage, &src, &dst, moves)?,
            Some(_) => {}
        }
    }
    storage.remove_empty_dir(from)
}

/// Moves the entry `src` of a directory to `dst` for [`Storage::move_dir`]'s default:
/// a file (or link) by one rename, a directory file by file, each rename recorded.
fn move_tree<S: Storage + ?Sized>(
    storage: &S,
    entry: &DirEntry,
    src: &Path,
    dst: &Path,
    moves: &mut Vec<(PathBuf, PathBuf)>,
) -> Result<(), StoreError> {
    match entry.kind {
        EntryKind::Dir => {
            for child in storage.read_dir(src)? {
                move_tree(storage, &child, &src.join(&child.name), &dst.join(&child.name), moves)?;
            }
            storage.remove_empty_dir(src)
        }
        EntryKind::File | EntryKind::Symlink | EntryKind::Other => {
            storage.rename(src, dst)?;
            moves.push((src.to_path_buf(), dst.to_path_buf()));
            Ok(())
        }
    }
}

/// Returns the first `n` bytes of a reused buffer, grown (and zeroed) only when it is
/// shorter.
pub fn grow(buf: &mut Vec<u8>, n: usize) -> &mut [u8] {
    if buf.len() < n {
        buf.resize(n, 0);
    }
    &mut buf[..n]
}

/// Fails with [`StoreError::Conflict`] when a file of `size` bytes is too short for
/// [`Storage::overwrite_prefix`] to write `bytes` over its start.
pub(crate) fn check_prefix_fits(path: &Path, bytes: &[u8], size: u64) -> Result<(), StoreError> {
    let need = bytes.len() as u64;
    if size < need {
        return Err(StoreError::Conflict { path: path.to_path_buf(), expected: Some(need), found: Some(size) });
    }
    Ok(())
}

/// Where a streamed write ([`Storage::write_atomic_stream`]) puts its content: bytes
/// written to it, and runs of another file's bytes copied into it.
pub trait Sink: std::io::Write {
    /// Appends `len` bytes of `source` from offset `at`. The file storage has the kernel
    /// copy them when `source` is an open file ([`ReadAt::fd`]: `copy_file_range` on
    /// Linux, where the file system may share the blocks instead); everywhere else, and
    /// as the default, they are read and written. Fails with
    /// [`std::io::ErrorKind::UnexpectedEof`] when `source` ends before `at + len`.
    ///
    /// The bytes are what `source` holds while they are copied: a caller that must know
    /// they did not change checks its file's stamp ([`ReadAt::stamp`]) before and after.
    fn copy_from(&mut self, source: &dyn ReadAt, at: u64, len: u64) -> std::io::Result<()> {
        copy_by_reading(self, source, at, len)
    }
}

impl Sink for Vec<u8> {}

/// [`Sink::copy_from`] by reading `source` and writing what was read, a piece at a time.
pub(crate) fn copy_by_reading<W: std::io::Write + ?Sized>(
    out: &mut W,
    source: &dyn ReadAt,
    at: u64,
    len: u64,
) -> std::io::Result<()> {
    const PIECE: u64 = 256 << 10;
    let mut buf = vec![0; usize::try_from(len.min(PIECE)).unwrap_or(0)];
    let mut done = 0;
    while done < len {
        let want = usize::try_from((len - done).min(PIECE)).unwrap_or(buf.len());
        let n = source.read_full_at(&mut buf[..want], at + done)?;
        out.write_all(&buf[..n])?;
        if n < want {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        done += n as u64;
    }
    Ok(())
}

/// Runs a [`Storage::write_atomic_stream`] producer into memory.
pub(crate) fn collect(
    path: &Path,
    fill: &mut dyn FnMut(&mut dyn Sink) -> std::io::Result<()>,
) -> Result<Vec<u8>, StoreError> {
    let mut buf = Vec::new();
    fill(&mut buf).map_err(|e| StoreError::io_raw(crate::Op::WriteTemp, path, e))?;
    Ok(buf)
}

/// A long-lived appender for one session file (omp's `SessionStorageWriter`).
///
/// Each append takes the session's publish lock, writes the whole line and, on a failed or short
/// write, cuts the file back to its size before the write. The first error is latched: every
/// later call returns it.
pub trait AppendWriter: Send {
    /// Appends one whole line, including its `\n`.
    fn append(&mut self, line: &[u8]) -> Result<(), StoreError>;

    /// Makes the appended lines as durable as the writer's [`Durability`] promises.
    fn flush(&mut self) -> Result<(), StoreError>;

    /// Returns the latched error, if any.
    fn error(&self) -> Option<&StoreError>;

    /// Flushes and closes the writer, returning the latched error if there is one.
    fn close(self: Box<Self>) -> Result<(), StoreError>;
}

/// Returns the artifacts directory of a session file: the path without its `.jsonl`
/// extension, when that is a plain file name ([`is_plain_name`]).
///
/// `...jsonl` would give `..` (the folder above) and `..jsonl` would give `.` (the
/// session's own folder): such a session has no artifacts directory, so nothing that
/// moves, copies or deletes a session's artifacts can reach beyond them.
pub fn artifacts_dir(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".jsonl")?;
    if !is_plain_name(stem) {
        return None;
    }
    Some(path.with_file_name(stem))
}

/// Returns whether `name` names an entry of a directory and nothing else: not empty, not
/// `.` or `..`, and without a path separator or a NUL (a component of a path never
/// holds either; a name given as text might).
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\0'])
        && !name.contains(std::path::MAIN_SEPARATOR)
}

/// Returns whether `candidate` is a `<name>.<anything>.bak` backup of the file called `name`.
pub fn is_backup_of(name: &str, candidate: &str) -> bool {
    candidate
        .strip_prefix(name)
        .and_then(|rest| rest.strip_prefix('.'))
        .and_then(|rest| rest.strip_suffix(".bak"))
        .is_some_and(|middle| !middle.is_empty())
}

/// Returns the head and tail windows of `data` as [`Storage::read_slices`] defines them.
pub fn slice_windows(data: &[u8], prefix: u64, suffix: u64) -> (Vec<u8>, Vec<u8>) {
    let size = data.len();
    let head_len = usize::try_from(prefix).unwrap_or(usize::MAX).min(size);
    let head = &data[..head_len];
    let suffix = usize::try_from(suffix).unwrap_or(usize::MAX);
    let tail = if suffix == 0 {
        &data[..0]
    } else if size <= head_len {
        &head[head.len().saturating_sub(suffix)..]
    } else {
        &data[size.saturating_sub(suffix)..]
    };
    (head.to_vec(), tail.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifacts_dir_strips_jsonl_only() {
        assert_eq!(artifacts_dir(Path::new("/a/b.jsonl")), Some(PathBuf::from("/a/b")));
        assert_eq!(artifacts_dir(Path::new("/a/b.txt")), None);
        assert_eq!(artifacts_dir(Path::new("/a/.jsonl")), None);
        // Neither the folder above nor the session's own folder is an artifacts directory.
        assert_eq!(artifacts_dir(Path::new("/a/sub/...jsonl")), None);
        assert_eq!(artifacts_dir(Path::new("/a/sub/..jsonl")), None);
        assert_eq!(artifacts_dir(Path::new("...jsonl")), None);
        assert_eq!(artifacts_dir(Path::new("/a/.b.jsonl")), Some(PathBuf::from("/a/.b")));
        assert_eq!(artifacts_dir(Path::new("/a/..b.jsonl")), Some(PathBuf::from("/a/..b")));
    }

    #[test]
    fn backup_names() {
        assert!(is_backup_of("s.jsonl", "s.jsonl.123.bak"));
        assert!(!is_backup_of("s.jsonl", "s.jsonl.bak"));
        assert!(!is_backup_of("s.jsonl", "t.jsonl.1.bak"));
        assert!(!is_backup_of("s.jsonl", "s.jsonlx.1.bak"));
    }

    #[test]
    fn windows_follow_read_text_slices() {
        let d = b"0123456789";
        assert_eq!(slice_windows(d, 4, 3), (b"0123".to_vec(), b"789".to_vec()));
        assert_eq!(slice_windows(d, 20, 3), (d.to_vec(), b"789".to_vec()));
        assert_eq!(slice_windows(d, 10, 30), (d.to_vec(), d.to_vec()));
        assert_eq!(slice_windows(d, 4, 0), (b"0123".to_vec(), Vec::new()));
        assert_eq!(slice_windows(d, 0, 2), (Vec::new(), b"89".to_vec()));
        assert_eq!(slice_windows(b"", 4, 4), (Vec::new(), Vec::new()));
    }
}
