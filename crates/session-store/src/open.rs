//! How the workspace opens files it did not create: the one place that decides which flags an
//! open carries and which kinds of file it accepts.
//!
//! * Every open of a session file (or of any file read on behalf of one: a cache, a breadcrumb)
//!   goes through [`open_regular`] or [`open_regular_with`]: the open does not block (`O_NONBLOCK`
//!   on Unix, so a FIFO planted where a session should be cannot stop the caller), and what it
//!   opened must be a regular file, checked on the open descriptor (`fstat`), so a swap between a
//!   check and the open changes nothing. Anything else fails with [`NotRegularFile`] inside an
//!   [`std::io::Error`] of kind [`std::io::ErrorKind::InvalidInput`], which
//!   [`StoreError::io`](crate::StoreError::io) turns into
//!   [`StoreError::NotRegular`](crate::StoreError::NotRegular).
//! * Lock files are opened with [`open_no_follow`] as well (`O_NOFOLLOW`): a symbolic link planted
//!   in their place is refused instead of followed, so no other user can make a writer create or
//!   truncate a file elsewhere.
//!
//! Symbolic links to session files are followed, as the references follow them.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// What a path named where a regular file was needed turned out to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotRegularFile {
    /// The path that was opened.
    pub path: PathBuf,
    /// What it is: `"directory"`, `"fifo"`, `"socket"`, `"character device"`, `"block device"`,
    /// `"symbolic link"` or `"special file"`.
    pub kind: &'static str,
}

impl fmt::Display for NotRegularFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is a {}, not a regular file", self.path.display(), self.kind)
    }
}

impl std::error::Error for NotRegularFile {}

impl NotRegularFile {
    /// Finds a [`NotRegularFile`] carried by `err` (directly or inside `fs_err`'s wrapper).
    pub fn find(err: &io::Error) -> Option<&NotRegularFile> {
        let inner = err.get_ref()?;
        if let Some(found) = inner.downcast_ref::<NotRegularFile>() {
            return Some(found);
        }
        inner.source()?.downcast_ref::<io::Error>().and_then(NotRegularFile::find)
    }
}

/// Returns the name [`NotRegularFile::kind`] gives to a file type.
pub fn kind_name(ft: std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        return "directory";
    }
    if ft.is_symlink() {
        return "symbolic link";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "fifo";
        }
        if ft.is_socket() {
            return "socket";
        }
        if ft.is_char_device() {
            return "character device";
        }
        if ft.is_block_device() {
            return "block device";
        }
    }
    "special file"
}

/// Returns an error of kind `InvalidInput` carrying [`NotRegularFile`] unless `meta` is a
/// regular file.
pub fn require_regular(path: &Path, meta: &std::fs::Metadata) -> io::Result<()> {
    if meta.is_file() {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        NotRegularFile { path: path.to_path_buf(), kind: kind_name(meta.file_type()) },
    ))
}

/// Opens an existing regular file for reading, without blocking, and refuses anything else.
pub fn open_regular(path: &Path) -> io::Result<fs_err::File> {
    let mut options = fs_err::OpenOptions::new();
    options.read(true);
    open_regular_with(&mut options, path)
}

/// Opens `path` with `options` plus a non-blocking open, then refuses it unless it is a
/// regular file (checked on the open descriptor). A regular file opened with `truncate` is
/// truncated by the open itself, as any open would.
pub fn open_regular_with(options: &mut fs_err::OpenOptions, path: &Path) -> io::Result<fs_err::File> {
    #[cfg(unix)]
    {
        use fs_err::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC);
    }
    let file = options.open(path)?;
    require_regular(path, &file.metadata()?)?;
    Ok(file)
}

/// Opens `path` with `options` without following a symbolic link in its last component and
/// without blocking, and refuses anything but a regular file. A link is reported as
/// [`NotRegularFile`] with kind `"symbolic link"`.
pub fn open_no_follow(options: &mut fs_err::OpenOptions, path: &Path) -> io::Result<fs_err::File> {
    #[cfg(unix)]
    {
        use fs_err::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    }
    #[cfg(not(unix))]
    if fs_err::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            NotRegularFile { path: path.to_path_buf(), kind: "symbolic link" },
        ));
    }
    match options.open(path) {
        Ok(file) => {
            require_regular(path, &file.metadata()?)?;
            Ok(file)
        }
        Err(e) if is_loop(&e, path) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            NotRegularFile { path: path.to_path_buf(), kind: "symbolic link" },
        )),
        Err(e) => Err(e),
    }
}

/// Returns whether a failed no-follow open met a symbolic link (`ELOOP`): told by looking at
/// the path itself, since `fs_err` keeps the OS error code to itself. The open already refused
/// the link; the look only names the reason.
fn is_loop(err: &io::Error, path: &Path) -> bool {
    !matches!(err.kind(), io::ErrorKind::NotFound | io::ErrorKind::AlreadyExists)
        && fs_err::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn tempdir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("session-store-open-{tag}-{}", std::process::id()));
        let _ = fs_err::remove_dir_all(&dir);
        fs_err::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() -> io::Result<()> {
        let dir = tempdir("fifo");
        let fifo = dir.join("s.jsonl");
        let status = std::process::Command::new("mkfifo").arg(&fifo).status()?;
        assert!(status.success());
        let err = open_regular(&fifo).err().ok_or_else(|| io::Error::other("a fifo opened"))?;
        assert_eq!(NotRegularFile::find(&err).map(|n| n.kind), Some("fifo"));
        let dir_err = open_regular(&dir).err().ok_or_else(|| io::Error::other("a directory opened"))?;
        assert_eq!(NotRegularFile::find(&dir_err).map(|n| n.kind), Some("directory"));
        fs_err::remove_dir_all(&dir)
    }

    #[test]
    fn no_follow_refuses_links_and_follow_opens_them() -> io::Result<()> {
        let dir = tempdir("link");
        let target = dir.join("target");
        fs_err::write(&target, b"x")?;
        let link = dir.join("link");
        std::os::unix::fs::symlink(&target, &link)?;
        let mut options = fs_err::OpenOptions::new();
        options.read(true);
        let err = open_no_follow(&mut options, &link).err().ok_or_else(|| io::Error::other("a link was followed"))?;
        assert_eq!(NotRegularFile::find(&err).map(|n| n.kind), Some("symbolic link"));
        assert!(open_regular(&link).is_ok());
        fs_err::remove_dir_all(&dir)
    }
}
