//! A snapshot of a folder tree, to show that a job changed nothing it may not.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every path below a folder (links not followed) with what it is: a file's bytes, a
/// link's target, `dir`, or `special` (a FIFO, socket or device, never opened).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tree(pub BTreeMap<PathBuf, String>);

impl Tree {
    /// Reads the tree below `dir` (empty when `dir` does not exist).
    ///
    /// # Errors
    ///
    /// Any error listing a folder or reading a file or link.
    pub fn read(dir: &Path) -> std::io::Result<Tree> {
        let mut out = BTreeMap::new();
        if fs_err::symlink_metadata(dir).is_err() {
            return Ok(Tree(out));
        }
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in fs_err::read_dir(&d)? {
                let p = e?.path();
                let m = fs_err::symlink_metadata(&p)?;
                let what = if m.file_type().is_symlink() {
                    format!("link {}", fs_err::read_link(&p)?.display())
                } else if m.is_dir() {
                    stack.push(p.clone());
                    "dir".to_owned()
                } else if m.is_file() {
                    format!("file {:?}", fs_err::read(&p)?)
                } else {
                    "special".to_owned()
                };
                out.insert(p, what);
            }
        }
        Ok(Tree(out))
    }

    /// Returns the paths that differ between `self` (before) and `after`: changed or
    /// gone, then new.
    pub fn changed(&self, after: &Tree) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> =
            self.0.iter().filter(|(p, w)| after.0.get(*p) != Some(w)).map(|(p, _)| p.clone()).collect();
        out.extend(after.0.keys().filter(|p| !self.0.contains_key(*p)).cloned());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_sees_bytes_links_and_new_paths() -> std::io::Result<()> {
        let tmp = crate::TempDir::try_new("tree")?;
        let dir = tmp.path();
        fs_err::create_dir_all(dir.join("sub"))?;
        fs_err::write(dir.join("sub/a"), b"1")?;
        let before = Tree::read(dir)?;
        fs_err::write(dir.join("sub/a"), b"2")?;
        #[cfg(unix)]
        std::os::unix::fs::symlink("a", dir.join("sub/l"))?;
        let after = Tree::read(dir)?;
        let mut changed = before.changed(&after);
        changed.sort();
        #[cfg(unix)]
        assert_eq!(changed, [dir.join("sub/a"), dir.join("sub/l")]);
        assert_eq!(Tree::read(&dir.join("missing"))?, Tree::default());
        Ok(())
    }
}
