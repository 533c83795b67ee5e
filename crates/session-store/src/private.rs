//! Private folders: where derived files (the listing cache, session indexes, the search
//! catalog, the lock gates) live, as private as the sessions they are derived from.
//!
//! [`PrivateDir::open`] is the one way to such a folder:
//!
//! * a missing folder is created with mode 0700, and so is each missing folder above it
//!   that the open creates;
//! * an existing one is used only when it is a real folder (`lstat`: not a symbolic link
//!   to one) owned by this process's user that nobody else may enter, list or write (no
//!   group or other permission bits). A folder of ours that others may only read and
//!   enter (the 0755 that older versions made) is made 0700 first: nobody else could
//!   have put anything in it. Anything else (a link, another user's folder, a folder
//!   others may write, a file) is refused with [`StoreError::NotPrivate`], and the
//!   caller goes on without what it wanted to keep there: a derived file is only ever
//!   an accelerator.
//!
//! Files in a private folder are named by plain names ([`crate::is_plain_name`]) and:
//!
//! * written whole and atomically ([`PrivateDir::write_file`]): a temporary file created
//!   exclusively (`O_EXCL`), never through a link (`O_NOFOLLOW`), mode 0600, then renamed
//!   over the name in the same folder ([`crate::atomic`]), which replaces a link planted
//!   there instead of writing through it. Not synced: losing a derived file costs time;
//! * read without following a link ([`PrivateDir::open_file`], or by position with
//!   [`PrivateDir::open_reader`]), and only when the open file is a regular file of this
//!   user with no group or other permission bits (a file of an older version, 0644, is
//!   refused and written again).
//!
//! Even if someone who may write the folder above renamed the private folder away and
//! put another in its place between the check and a write, what the write creates is
//! 0600 and this user's, and what a read accepts must be this user's own file.
//!
//! On platforms without Unix owners and modes the folder is created and used as it is.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use session_model::ReadAt;

use crate::error::{Op, StoreError};
use crate::storage::FileStat;

/// Why a folder or file was refused as private ([`StoreError::NotPrivate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Exposure {
    /// A symbolic link stands where the folder or file should be.
    Link,
    /// Something else stands there: what it is (`"regular file"` where a folder should
    /// be, `"directory"`, `"fifo"`, … where a file should be).
    Kind(&'static str),
    /// Another user owns it: that user's id.
    Owner(u32),
    /// Its mode lets other users in: the permission bits.
    Mode(u32),
    /// This process's user id could not be learnt, so nothing can be shown to be its own.
    UnknownUser,
}

impl std::fmt::Display for Exposure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exposure::Link => f.write_str("it is a symbolic link"),
            Exposure::Kind(kind) => write!(f, "it is a {kind}"),
            Exposure::Owner(uid) => write!(f, "it belongs to user {uid}"),
            Exposure::Mode(mode) => write!(f, "its mode {mode:03o} lets other users in"),
            Exposure::UnknownUser => f.write_str("this process's user id could not be learnt"),
        }
    }
}

/// A folder shown to be private to this process's user (see the module docs): the
/// only place derived files are written.
///
/// ```
/// use session_store::PrivateDir;
///
/// # fn main() -> Result<(), session_store::StoreError> {
/// let root = std::env::temp_dir().join(format!("private-doc-{}", std::process::id()));
/// let dir = PrivateDir::open(root.join("cache"))?;
/// dir.write_file("list.bin", &mut |w| w.write_all(b"derived"))?;
/// let mut text = String::new();
/// std::io::Read::read_to_string(&mut dir.open_file("list.bin")?.expect("written"), &mut text)
///     .expect("read");
/// assert_eq!(text, "derived");
/// assert!(dir.open_file("other.bin")?.is_none());
/// # #[cfg(unix)]
/// # {
/// use std::os::unix::fs::PermissionsExt;
/// assert_eq!(std::fs::metadata(dir.path()).expect("folder").permissions().mode() & 0o777, 0o700);
/// assert_eq!(std::fs::metadata(dir.path().join("list.bin")).expect("file").permissions().mode() & 0o777, 0o600);
/// # }
/// # std::fs::remove_dir_all(&root).expect("cleaned up");
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrivateDir {
    path: PathBuf,
    uid: Option<u32>,
}

impl PrivateDir {
    /// Opens the private folder `path`: creates it (and each missing folder above it)
    /// with mode 0700, or checks the one that is there (see the module docs).
    ///
    /// # Errors
    ///
    /// [`StoreError::NotPrivate`] when something that is not a private folder of this
    /// user stands at `path`; [`StoreError::Io`] when it cannot be created or looked at.
    pub fn open(path: impl AsRef<Path>) -> Result<PrivateDir, StoreError> {
        #[cfg(unix)]
        {
            let uid = own_uid().ok_or_else(|| refused(path.as_ref(), Exposure::UnknownUser))?;
            PrivateDir::open_as(path.as_ref(), uid)
        }
        #[cfg(not(unix))]
        {
            let path = path.as_ref();
            fs_err::create_dir_all(path).map_err(|e| StoreError::io_raw(Op::EnsureDir, path, e))?;
            Ok(PrivateDir { path: path.to_path_buf(), uid: None })
        }
    }

    /// [`PrivateDir::open`] for the user `uid`.
    #[cfg(unix)]
    fn open_as(path: &Path, uid: u32) -> Result<PrivateDir, StoreError> {
        create_missing(path)?;
        claim(path, uid)?;
        Ok(PrivateDir { path: path.to_path_buf(), uid: Some(uid) })
    }

    /// Returns the folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the private folder `name` inside this one (see [`PrivateDir::open`]).
    ///
    /// # Errors
    ///
    /// [`StoreError::NotAFile`] when `name` is not a plain name, else as
    /// [`PrivateDir::open`].
    pub fn subdir(&self, name: &str) -> Result<PrivateDir, StoreError> {
        let path = self.file_path(name)?;
        match self.uid {
            #[cfg(unix)]
            Some(uid) => PrivateDir::open_as(&path, uid),
            _ => PrivateDir::open(path),
        }
    }

    /// Returns the path of the file `name` in this folder, for a writer that creates
    /// its files itself (SQLite, which must then create them 0600 without following a
    /// link: `session_history::Catalog::open` does).
    ///
    /// # Errors
    ///
    /// [`StoreError::NotAFile`] when `name` is not a plain name (empty, `.`, `..`, or
    /// with a separator).
    pub fn file_path(&self, name: &str) -> Result<PathBuf, StoreError> {
        if !crate::is_plain_name(name) {
            return Err(StoreError::NotAFile { path: self.path.join(name) });
        }
        Ok(self.path.join(name))
    }

    /// Opens the file `name` for reading, without following a link, when it is a
    /// regular file of this user that nobody else may read or write; `None` when there
    /// is none.
    ///
    /// # Errors
    ///
    /// [`StoreError::NotPrivate`] when something else stands there (a link, a FIFO,
    /// another user's file, a file others may read), [`StoreError::Io`] when it cannot
    /// be opened.
    pub fn open_file(&self, name: &str) -> Result<Option<fs_err::File>, StoreError> {
        Ok(self.open_checked(name)?.map(|(file, _)| file))
    }

    /// Opens the file `name` for reads by position, as [`PrivateDir::open_file`] opens
    /// it (without following a link, only a private regular file of this user): returns
    /// the stat of the open file and a reader of it, as [`Storage::open_reader`] does for
    /// a session, so that a derived file (the listing cache) is read in the pieces its
    /// reader needs, in any order, rather than whole. `None` when there is none.
    ///
    /// # Errors
    ///
    /// As [`PrivateDir::open_file`].
    ///
    /// [`Storage::open_reader`]: crate::Storage::open_reader
    #[allow(clippy::type_complexity, reason = "what Storage::open_reader returns, or nothing")]
    pub fn open_reader(&self, name: &str) -> Result<Option<(FileStat, Box<dyn ReadAt + Send>)>, StoreError> {
        let Some((file, meta)) = self.open_checked(name)? else { return Ok(None) };
        let stat = crate::file::stat_of(&meta);
        #[cfg(any(unix, windows))]
        let reader: Box<dyn ReadAt + Send> = Box::new(crate::file::PositionalFile(file.into_file()));
        #[cfg(not(any(unix, windows)))]
        let reader: Box<dyn ReadAt + Send> = {
            let mut file = file;
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut file, &mut bytes)
                .map_err(|e| StoreError::io_raw(Op::Read, &self.path.join(name), e))?;
            Box::new(bytes)
        };
        Ok(Some((stat, reader)))
    }

    /// Opens the file `name` for reading and checks it (see [`PrivateDir::open_file`]);
    /// returns it with its metadata.
    fn open_checked(&self, name: &str) -> Result<Option<(fs_err::File, std::fs::Metadata)>, StoreError> {
        let path = self.file_path(name)?;
        let mut options = fs_err::OpenOptions::new();
        options.read(true);
        let file = match crate::open::open_no_follow(&mut options, &path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(match crate::open::NotRegularFile::find(&e) {
                    Some(n) if n.kind == "symbolic link" => refused(&path, Exposure::Link),
                    Some(n) => refused(&path, Exposure::Kind(n.kind)),
                    None => StoreError::io_raw(Op::Open, &path, e),
                });
            }
        };
        let meta = file.metadata().map_err(|e| StoreError::io_raw(Op::Stat, &path, e))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            if let Some(uid) = self.uid
                && meta.uid() != uid
            {
                return Err(refused(&path, Exposure::Owner(meta.uid())));
            }
            if meta.mode() & 0o077 != 0 {
                return Err(refused(&path, Exposure::Mode(meta.mode() & 0o777)));
            }
        }
        Ok(Some((file, meta)))
    }

    /// Replaces the file `name` with what `fill` writes: a temporary file created
    /// exclusively, never through a link, mode 0600, renamed over `name` (which replaces
    /// a link there rather than following it). The folder is checked again first (and
    /// made again when it was removed). Not synced: after a power loss the file may be
    /// missing or cut short, never half old and half new. Returns the bytes written.
    ///
    /// # Errors
    ///
    /// [`StoreError::NotPrivate`] when the folder is no longer private, else as
    /// [`crate::atomic::write_atomic_stream`].
    pub fn write_file(
        &self,
        name: &str,
        fill: &mut dyn FnMut(&mut dyn crate::Sink) -> std::io::Result<()>,
    ) -> Result<u64, StoreError> {
        self.replace(name, fill, false)
    }

    /// [`PrivateDir::write_file`] for a person's own data rather than a cache: the new
    /// file is synced before the rename and the folder after it, so a crash leaves the
    /// old file or the new one, whole.
    ///
    /// # Errors
    ///
    /// As [`PrivateDir::write_file`].
    pub fn write_file_durable(
        &self,
        name: &str,
        fill: &mut dyn FnMut(&mut dyn crate::Sink) -> std::io::Result<()>,
    ) -> Result<u64, StoreError> {
        self.replace(name, fill, true)
    }

    /// Replaces `name` with what `fill` writes (0600, never through a link), synced or
    /// not, after checking the folder again.
    fn replace(
        &self,
        name: &str,
        fill: &mut dyn FnMut(&mut dyn crate::Sink) -> std::io::Result<()>,
        sync: bool,
    ) -> Result<u64, StoreError> {
        let path = self.file_path(name)?;
        self.recheck()?;
        crate::atomic::write_atomic_stream_with(&path, fill, sync, crate::atomic::NewFile::Private, || Ok(()))
    }

    /// Removes the files whose names `pick` selects, the least recently modified
    /// first, so that with `keep` (about to be written, never removed) at most `max` of
    /// them remain: how a cache folder stays bounded. Best effort: what cannot be
    /// listed, stated or removed is left; links are removed, never followed.
    pub fn evict_oldest(&self, pick: &dyn Fn(&str) -> bool, keep: &str, max: usize) {
        // Checked again first: a folder swapped for a link since it was opened is not
        // listed, nor anything in it removed.
        if self.recheck().is_err() {
            return;
        }
        let Ok(entries) = fs_err::read_dir(&self.path) else { return };
        let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
            .flatten()
            .filter(|e| e.file_name().to_str().is_some_and(|n| n != keep && pick(n)))
            .filter_map(|e| Some((fs_err::symlink_metadata(e.path()).ok()?.modified().ok()?, e.path())))
            .collect();
        if files.len() < max {
            return;
        }
        files.sort();
        for (_, p) in &files[..files.len() + 1 - max.max(1)] {
            let _ = fs_err::remove_file(p);
        }
    }

    /// Checks the folder again (creating it again when it is gone).
    fn recheck(&self) -> Result<(), StoreError> {
        match self.uid {
            #[cfg(unix)]
            Some(uid) => PrivateDir::open_as(&self.path, uid).map(drop),
            _ => fs_err::create_dir_all(&self.path).map_err(|e| StoreError::io_raw(Op::EnsureDir, &self.path, e)),
        }
    }
}

/// The refusal of `path`.
fn refused(path: &Path, why: Exposure) -> StoreError {
    StoreError::NotPrivate { path: path.to_path_buf(), why }
}

/// Returns the uid this process creates files as, learnt once: the owner of
/// `/proc/self` (Linux: the effective uid), else of a folder it creates and removes at
/// once in the temporary folder (std has no safe `geteuid`); `None` when neither works.
pub(crate) fn own_uid() -> Option<u32> {
    static UID: OnceLock<Option<u32>> = OnceLock::new();
    *UID.get_or_init(|| {
        #[cfg(unix)]
        {
            use rand::Rng;
            use std::os::unix::fs::MetadataExt;
            if let Ok(m) = fs_err::metadata("/proc/self") {
                return Some(m.uid());
            }
            let probe = std::env::temp_dir().join(format!(".session-store-uid-{:016x}", rand::rng().next_u64()));
            fs_err::create_dir(&probe).ok()?;
            let uid = fs_err::symlink_metadata(&probe).ok().map(|m| m.uid());
            let _ = fs_err::remove_dir(&probe);
            uid
        }
        #[cfg(not(unix))]
        {
            None
        }
    })
}

/// Creates `path` and each missing folder above it, mode 0700; a folder someone made
/// meanwhile is left to the check.
#[cfg(unix)]
fn create_missing(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::DirBuilderExt;
    let mut missing = Vec::new();
    let mut at = Some(path);
    while let Some(p) = at.filter(|p| !p.as_os_str().is_empty()) {
        match fs_err::symlink_metadata(p) {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing.push(p),
            Err(e) => return Err(StoreError::io_raw(Op::EnsureDir, p, e)),
        }
        at = p.parent();
    }
    for p in missing.into_iter().rev() {
        match std::fs::DirBuilder::new().mode(0o700).create(p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(StoreError::io_raw(Op::EnsureDir, p, e)),
        }
    }
    Ok(())
}

/// Checks that `path` is a folder private to `uid` ([`check`]); one of its own that
/// others may only read and enter is made 0700 first (through a descriptor opened
/// without following a link, and checked again on it).
#[cfg(unix)]
fn claim(path: &Path, uid: u32) -> Result<(), StoreError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    match check(path, uid) {
        Err(StoreError::NotPrivate { why: Exposure::Mode(mode), .. }) if mode & 0o022 == 0 => {
            use fs_err::os::unix::fs::OpenOptionsExt;
            let mut options = fs_err::OpenOptions::new();
            options.read(true).custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY | libc::O_CLOEXEC);
            let dir = options.open(path).map_err(|e| StoreError::io_raw(Op::Open, path, e))?;
            let meta = dir.metadata().map_err(|e| StoreError::io_raw(Op::Stat, path, e))?;
            if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
                return check(path, uid);
            }
            dir.set_permissions(std::fs::Permissions::from_mode(0o700))
                .map_err(|e| StoreError::io_raw(Op::EnsureDir, path, e))?;
            check(path, uid)
        }
        other => other,
    }
}

/// Returns `Ok` when `path` is a folder (not a link to one) owned by `uid` that nobody
/// else may enter, list or write; else why not ([`StoreError::NotPrivate`]).
#[cfg(unix)]
pub(crate) fn check(path: &Path, uid: u32) -> Result<(), StoreError> {
    use std::os::unix::fs::MetadataExt;
    let meta = fs_err::symlink_metadata(path).map_err(|e| StoreError::io(Op::Stat, path, e))?;
    let why = if meta.file_type().is_symlink() {
        Exposure::Link
    } else if !meta.is_dir() {
        Exposure::Kind(if meta.is_file() { "regular file" } else { crate::open::kind_name(meta.file_type()) })
    } else if meta.uid() != uid {
        Exposure::Owner(meta.uid())
    } else if meta.mode() & 0o077 != 0 {
        Exposure::Mode(meta.mode() & 0o777)
    } else {
        return Ok(());
    };
    Err(refused(path, why))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn base(tag: &str) -> PathBuf {
        let base = std::env::temp_dir().join(format!("session-store-private-{tag}-{}", std::process::id()));
        let _ = fs_err::remove_dir_all(&base);
        fs_err::create_dir_all(&base).expect("base");
        base
    }

    fn mode(path: &Path) -> u32 {
        fs_err::symlink_metadata(path).expect("stat").permissions().mode() & 0o777
    }

    /// A missing folder and its missing parents are made 0700; folders someone else
    /// prepared (too open, a link to a private folder, a file, another user's) are
    /// refused, and one of ours that others may only read is made private.
    #[test]
    fn only_private_folders_are_claimed() -> Result<(), Box<dyn std::error::Error>> {
        let uid = own_uid().ok_or("no uid")?;
        let base = base("claim");
        let fresh = base.join("a/b/fresh");
        let dir = PrivateDir::open_as(&fresh, uid)?;
        assert_eq!(dir.path(), fresh);
        for p in [&base.join("a"), &base.join("a/b"), &fresh] {
            assert_eq!(mode(p), 0o700, "{}", p.display());
        }
        let open = base.join("open");
        fs_err::create_dir(&open)?;
        fs_err::set_permissions(&open, std::fs::Permissions::from_mode(0o777))?;
        let err = PrivateDir::open_as(&open, uid).err().ok_or("a world-writable folder was claimed")?;
        assert!(matches!(err, StoreError::NotPrivate { why: Exposure::Mode(0o777), .. }), "{err}");
        assert_eq!(mode(&open), 0o777, "left as it was");
        let group = base.join("group");
        fs_err::create_dir(&group)?;
        fs_err::set_permissions(&group, std::fs::Permissions::from_mode(0o770))?;
        assert!(PrivateDir::open_as(&group, uid).is_err(), "a group-writable folder");
        let link = base.join("link");
        std::os::unix::fs::symlink(&fresh, &link)?;
        let err = PrivateDir::open_as(&link, uid).err().ok_or("a link was claimed")?;
        assert!(matches!(err, StoreError::NotPrivate { why: Exposure::Link, .. }), "{err}");
        let err = PrivateDir::open_as(&fresh, uid.wrapping_add(1)).err().ok_or("someone else's folder")?;
        assert!(matches!(err, StoreError::NotPrivate { why: Exposure::Owner(o), .. } if o == uid), "{err}");
        let file = base.join("file");
        fs_err::write(&file, b"")?;
        let err = PrivateDir::open_as(&file, uid).err().ok_or("a file was claimed")?;
        assert!(matches!(err, StoreError::NotPrivate { why: Exposure::Kind(_), .. }), "{err}");
        let readable = base.join("readable");
        fs_err::create_dir(&readable)?;
        fs_err::set_permissions(&readable, std::fs::Permissions::from_mode(0o755))?;
        PrivateDir::open_as(&readable, uid)?;
        assert_eq!(mode(&readable), 0o700, "made private");
        fs_err::remove_dir_all(&base)?;
        Ok(())
    }

    /// Files are written 0600 over a planted link (the link's target is unchanged)
    /// and read only when they are private regular files.
    #[test]
    fn files_are_private_and_links_are_never_followed() -> Result<(), Box<dyn std::error::Error>> {
        let base = base("files");
        let dir = PrivateDir::open(base.join("cache"))?;
        let target = base.join("target");
        fs_err::write(&target, b"theirs")?;
        std::os::unix::fs::symlink(&target, dir.path().join("c.bin"))?;
        let err = dir.open_file("c.bin").err().ok_or("a link was read")?;
        assert!(matches!(err, StoreError::NotPrivate { why: Exposure::Link, .. }), "{err}");
        assert_eq!(dir.write_file("c.bin", &mut |w| w.write_all(b"ours"))?, 4);
        assert_eq!(fs_err::read(&target)?, b"theirs", "the link's target is unchanged");
        assert!(!fs_err::symlink_metadata(dir.path().join("c.bin"))?.file_type().is_symlink());
        assert_eq!(mode(&dir.path().join("c.bin")), 0o600);
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut dir.open_file("c.bin")?.ok_or("written")?, &mut text)?;
        assert_eq!(text, b"ours");
        fs_err::set_permissions(dir.path().join("c.bin"), std::fs::Permissions::from_mode(0o644))?;
        let err = dir.open_file("c.bin").err().ok_or("a readable file was trusted")?;
        assert!(matches!(err, StoreError::NotPrivate { why: Exposure::Mode(0o644), .. }), "{err}");
        let fifo = dir.path().join("f.bin");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status()?.success());
        assert!(matches!(dir.open_file("f.bin"), Err(StoreError::NotPrivate { why: Exposure::Kind("fifo"), .. })));
        assert!(dir.open_file("../target").is_err(), "names are plain");
        assert!(dir.file_path("").is_err());
        // A folder removed meanwhile is made again, private.
        fs_err::remove_dir_all(dir.path())?;
        dir.write_file("c.bin", &mut |w| w.write_all(b"again"))?;
        assert_eq!(mode(dir.path()), 0o700);
        fs_err::remove_dir_all(&base)?;
        Ok(())
    }

    /// A private file is read by position after the checks of `open_file`: a link, a
    /// file others may read and a FIFO are refused as they are there.
    #[test]
    fn files_are_read_by_position_only_when_private() -> Result<(), Box<dyn std::error::Error>> {
        let base = base("reader");
        let dir = PrivateDir::open(base.join("cache"))?;
        assert!(dir.open_reader("c.bin")?.is_none());
        dir.write_file("c.bin", &mut |w| w.write_all(b"0123456789"))?;
        let (stat, reader) = dir.open_reader("c.bin")?.ok_or("written")?;
        assert_eq!(stat.size, 10);
        let mut buf = [0; 4];
        assert_eq!(reader.read_full_at(&mut buf, 6)?, 4);
        assert_eq!(&buf, b"6789");
        assert_eq!(reader.read_full_at(&mut buf, 1)?, 4);
        assert_eq!(&buf, b"1234");
        assert_eq!(reader.read_full_at(&mut buf, 8)?, 2, "short at the end");
        // The reader reads the file it opened: one written over the name is not seen.
        dir.write_file("c.bin", &mut |w| w.write_all(b"abcdefghij"))?;
        assert_eq!(reader.read_full_at(&mut buf, 0)?, 4);
        assert_eq!(&buf, b"0123");
        let target = base.join("target");
        fs_err::write(&target, b"theirs")?;
        fs_err::remove_file(dir.path().join("c.bin"))?;
        std::os::unix::fs::symlink(&target, dir.path().join("c.bin"))?;
        let err = dir.open_reader("c.bin").err().ok_or("a link was read")?;
        assert!(matches!(err, StoreError::NotPrivate { why: Exposure::Link, .. }), "{err}");
        dir.write_file("c.bin", &mut |w| w.write_all(b"ours"))?;
        fs_err::set_permissions(dir.path().join("c.bin"), std::fs::Permissions::from_mode(0o644))?;
        let err = dir.open_reader("c.bin").err().ok_or("a readable file was trusted")?;
        assert!(matches!(err, StoreError::NotPrivate { why: Exposure::Mode(0o644), .. }), "{err}");
        let fifo = dir.path().join("f.bin");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status()?.success());
        assert!(matches!(dir.open_reader("f.bin"), Err(StoreError::NotPrivate { why: Exposure::Kind("fifo"), .. })));
        assert!(dir.open_reader("../target").is_err(), "names are plain");
        fs_err::remove_dir_all(&base)?;
        Ok(())
    }

    #[test]
    fn eviction_keeps_the_newest_and_the_one_kept() -> Result<(), Box<dyn std::error::Error>> {
        let base = base("evict");
        let dir = PrivateDir::open(base.join("cache"))?;
        for i in 0..5 {
            dir.write_file(&format!("x-{i}.bin"), &mut |w| w.write_all(b"x"))?;
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        dir.write_file("other", &mut |w| w.write_all(b"o"))?;
        dir.evict_oldest(&|n| n.starts_with("x-"), "x-0.bin", 3);
        let mut names: Vec<String> =
            fs_err::read_dir(dir.path())?.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        assert_eq!(names, ["other", "x-0.bin", "x-3.bin", "x-4.bin"]);
        fs_err::remove_dir_all(&base)?;
        Ok(())
    }
}
