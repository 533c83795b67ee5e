//! A fresh folder per test.

use std::ops::Deref;
use std::path::{Path, PathBuf};

/// A folder of the test's own, made fresh (never one that existed) and private to the
/// user, removed with everything in it on drop.
///
/// It dereferences to its [`Path`], so `dir.join("x")` names a path inside it.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Makes a folder in the system's temporary folder whose name holds `tag`.
    ///
    /// # Panics
    ///
    /// When the folder cannot be made: a test cannot go on without it.
    #[track_caller]
    pub fn new(tag: &str) -> TempDir {
        match TempDir::try_new(tag) {
            Ok(dir) => dir,
            Err(e) => panic!("cannot make a temporary folder for {tag}: {e}"),
        }
    }

    /// Makes a folder in the system's temporary folder whose name holds `tag`.
    ///
    /// # Errors
    ///
    /// When the folder cannot be made.
    pub fn try_new(tag: &str) -> std::io::Result<TempDir> {
        TempDir::new_in(&std::env::temp_dir(), tag)
    }

    /// Makes a folder inside `base` (made first when missing) whose name holds `tag`.
    ///
    /// # Errors
    ///
    /// When `base` or the folder cannot be made.
    pub fn new_in(base: &Path, tag: &str) -> std::io::Result<TempDir> {
        fs_err::create_dir_all(base)?;
        // Short: the tests put these paths into keys of servers with limits of their own
        // (s3s-fs names a file after the whole key, in 255 bytes). 48 random bits, and a
        // name that exists already is refused below, not reused.
        let path = base.join(format!("{tag}-{:012x}", rand::random::<u64>() >> 16));
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        // Not `create_dir_all`: a folder that is already there (another run's, or a link
        // someone planted) is refused, not reused.
        builder.create(&path).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        Ok(TempDir { path })
    }

    /// Returns the folder.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Err(e) = fs_err::remove_dir_all(&self.path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            eprintln!("cannot remove {}: {e}", self.path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_folder_is_new_private_and_removed_on_drop() -> std::io::Result<()> {
        let a = TempDir::try_new("kit")?;
        let b = TempDir::try_new("kit")?;
        assert_ne!(a.path(), b.path());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(fs_err::metadata(a.path())?.permissions().mode() & 0o777, 0o700);
        }
        fs_err::write(a.join("f"), b"x")?;
        let kept = a.path().to_path_buf();
        drop(a);
        assert!(!kept.exists(), "{} was removed", kept.display());
        assert!(b.exists());
        Ok(())
    }
}
