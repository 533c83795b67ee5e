//! Walking the folders a job must see whole, through the storage.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use session_store::{EntryKind, FileStat, Storage, StoreError};

/// How deep a walk goes below a root (links that loop are caught before this).
const MAX_DEPTH: usize = 64;

/// What a walk found below its roots.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// Regular files (links to files followed), each once, with their stats.
    pub(crate) files: Vec<(PathBuf, FileStat)>,
    /// What could not be listed or stated, and why.
    pub(crate) unreadable: Vec<(PathBuf, StoreError)>,
    /// FIFOs, sockets and devices (never opened).
    pub(crate) special: Vec<PathBuf>,
}

/// A walk over one or more roots: each file and each folder is visited once, however
/// many roots or links lead to it (by identity where the storage has one, else by path).
pub(crate) struct Walker<'a> {
    storage: &'a dyn Storage,
    dirs: HashSet<Key>,
    files: HashSet<Key>,
    pub(crate) found: Found,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Id(u64, u64),
    Path(PathBuf),
}

fn key(path: &Path, stat: &FileStat) -> Key {
    match stat.identity {
        Some(id) if id.ino != 0 => Key::Id(id.dev, id.ino),
        _ => Key::Path(path.to_path_buf()),
    }
}

impl<'a> Walker<'a> {
    pub(crate) fn new(storage: &'a dyn Storage) -> Walker<'a> {
        Walker { storage, dirs: HashSet::new(), files: HashSet::new(), found: Found::default() }
    }

    /// Walks `root` (a missing root has nothing), following links to folders.
    pub(crate) fn walk(&mut self, root: &Path) {
        match self.storage.stat(root) {
            Ok(Some(st)) if !st.is_file => {
                if self.dirs.insert(key(root, &st)) {
                    self.dir(root, 0);
                }
            }
            Ok(Some(st)) => self.file(root, st),
            Ok(None) => {}
            Err(e) => self.found.unreadable.push((root.to_path_buf(), e)),
        }
    }

    /// Visits one file given by name (a registered session), if it exists.
    pub(crate) fn visit_file(&mut self, path: &Path) {
        match self.storage.stat(path) {
            Ok(Some(st)) if st.is_file => self.file(path, st),
            Ok(_) => {}
            Err(e) => self.found.unreadable.push((path.to_path_buf(), e)),
        }
    }

    fn file(&mut self, path: &Path, st: FileStat) {
        if self.files.insert(key(path, &st)) {
            self.found.files.push((path.to_path_buf(), st));
        }
    }

    fn dir(&mut self, dir: &Path, depth: usize) {
        let entries = match self.storage.read_dir(dir) {
            Ok(entries) => entries,
            // A link to something that is neither a file nor a folder.
            Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotADirectory) => {
                self.found.special.push(dir.to_path_buf());
                return;
            }
            Err(e) => {
                self.found.unreadable.push((dir.to_path_buf(), e));
                return;
            }
        };
        let mut entries = entries;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for e in entries {
            if !session_store::is_plain_name(&e.name) {
                continue;
            }
            let path = dir.join(&e.name);
            match e.kind {
                EntryKind::Other => self.found.special.push(path),
                EntryKind::File | EntryKind::Dir | EntryKind::Symlink => match self.storage.stat(&path) {
                    Ok(Some(st)) if st.is_file => self.file(&path, st),
                    Ok(Some(st)) => {
                        if depth >= MAX_DEPTH {
                            let e = StoreError::NotAFile { path: path.clone() };
                            self.found.unreadable.push((path, e));
                        } else if self.dirs.insert(key(&path, &st)) {
                            self.dir(&path, depth + 1);
                        }
                    }
                    // A link to nothing.
                    Ok(None) => {}
                    Err(e) => self.found.unreadable.push((path, e)),
                },
            }
        }
    }
}
