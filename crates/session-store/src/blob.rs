//! The content-addressed blob store for externalized images (omp `blobs/`).
//!
//! A blob lives at `<dir>/<sha256 lowercase hex>` (no extension) and is referenced from session
//! JSON as `blob:sha256:<hex>` ([`BlobRef`]). The directory is on any [`Storage`]: this
//! machine's files by default ([`BlobStore::open`]), memory, or a server
//! ([`BlobStore::on`]). Writes are write-once and atomic: an existing identical blob is
//! success, anything else is replaced with [`Storage::write_immutable`], so a reader (also
//! after a crash) finds either no blob or the complete one. For images an optional
//! typed sidecar `<hex>.<ext>` ([`Storage::link_or_copy`]: a hard link on files, else a
//! copy) lets image viewers open the file;
//! sidecars are a convenience and their failures are ignored.
//!
//! [`BlobRef::parse`] accepts exactly `blob:sha256:` followed by 64 lowercase hex digits, so a
//! reference can never name a path outside the store. Nothing here deletes blobs: they are shared
//! by every session.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sha2::{Digest, Sha256};

use crate::error::StoreError;
use crate::{FileStorage, MemoryStorage, Storage};

/// The prefix of every blob reference string.
pub const BLOB_REF_PREFIX: &str = "blob:sha256:";

/// A validated reference to a blob: the SHA-256 of its bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlobRef {
    hex: String,
}

/// A string that starts like a blob reference but is not a canonical one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid blob reference {value:?}: expected `blob:sha256:` followed by 64 lowercase hex digits")]
pub struct InvalidBlobRef {
    /// The rejected string.
    pub value: String,
}

/// The [`BlobRef`] of bytes given in parts: the SHA-256 of their concatenation. A clone
/// gives the reference of the parts so far and goes on apart.
#[derive(Clone, Debug, Default)]
pub struct BlobHasher(Sha256);

impl BlobHasher {
    /// Returns a hasher of no bytes yet.
    pub fn new() -> BlobHasher {
        BlobHasher(Sha256::new())
    }

    /// Adds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// Returns the reference of every byte added.
    pub fn finish(self) -> BlobRef {
        let digest = self.0.finalize();
        let mut hex = String::with_capacity(64);
        for b in digest.iter() {
            hex.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
            hex.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
        }
        BlobRef { hex }
    }
}

impl BlobRef {
    /// Parses `blob:sha256:<64 lowercase hex>`; anything else is rejected.
    pub fn parse(s: &str) -> Result<BlobRef, InvalidBlobRef> {
        let invalid = || InvalidBlobRef { value: s.to_owned() };
        let hex = s.strip_prefix(BLOB_REF_PREFIX).ok_or_else(invalid)?;
        BlobRef::from_hex(hex).ok_or_else(invalid)
    }

    /// Accepts a bare hash of 64 lowercase hex digits.
    pub fn from_hex(hex: &str) -> Option<BlobRef> {
        let ok = hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        ok.then(|| BlobRef { hex: hex.to_owned() })
    }

    /// Returns the reference of `bytes` (their SHA-256).
    pub fn for_bytes(bytes: &[u8]) -> BlobRef {
        let mut h = BlobHasher::new();
        h.update(bytes);
        h.finish()
    }

    /// Returns the 64-digit hash.
    pub fn hash(&self) -> &str {
        &self.hex
    }
}

impl fmt::Display for BlobRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{BLOB_REF_PREFIX}{}", self.hex)
    }
}

/// Returns every blob reference in `text`: each `blob:sha256:` followed by 64 lowercase
/// hex digits (what [`BlobRef::parse`] accepts), wherever it is (a session line, a
/// backup, an artifact), in order, repeats included.
///
/// ```
/// use session_store::blob::find_refs;
/// let hex = "ab".repeat(32);
/// let text = format!("{{\"data\":\"blob:sha256:{hex}\"}} blob:sha256:short");
/// assert_eq!(find_refs(text.as_bytes()).map(|r| r.hash().to_owned()).collect::<Vec<_>>(), [hex]);
/// ```
pub fn find_refs(text: &[u8]) -> impl Iterator<Item = BlobRef> + '_ {
    let prefix = BLOB_REF_PREFIX.as_bytes();
    memchr::memmem::find_iter(text, prefix).filter_map(move |i| {
        let start = i + prefix.len();
        let hex = std::str::from_utf8(text.get(start..start + 64)?).ok()?;
        BlobRef::from_hex(hex)
    })
}

/// Returns the sidecar extension for an image MIME type (omp's rule), or `None` for no sidecar.
///
/// `image/png` -> `png`, `image/jpeg`/`image/jpg` -> `jpg`, `image/gif`, `image/webp`,
/// `image/svg+xml` -> `svg`; any other `image/<sub>` -> `<sub>` cut at `;` and `+`, if it is 1-32
/// characters of `[a-z0-9][a-z0-9._-]*` after lowercasing.
pub fn extension_for_mime(mime: &str) -> Option<String> {
    let lower = mime.trim().to_ascii_lowercase();
    let sub = lower.strip_prefix("image/")?;
    let fixed = match sub {
        "png" => Some("png"),
        "jpeg" | "jpg" => Some("jpg"),
        "gif" => Some("gif"),
        "webp" => Some("webp"),
        "svg+xml" => Some("svg"),
        _ => None,
    };
    if let Some(ext) = fixed {
        return Some(ext.to_owned());
    }
    let cut = sub.split([';', '+']).next().unwrap_or_default().trim();
    let valid = (1..=32).contains(&cut.len())
        && cut.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && cut.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    valid.then(|| cut.to_owned())
}

/// One blob as it is stored: its reference and its files.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredBlob {
    /// The blob.
    pub blob: BlobRef,
    /// Its files on the store's storage: the canonical `<hash>` first (when present),
    /// then its typed sidecars `<hash>.<ext>`.
    pub files: Vec<PathBuf>,
    /// Their bytes (a sidecar that is a hard link of the canonical file counted again).
    pub bytes: u64,
    /// When it last changed (the newest of its files), in ms since the epoch.
    pub modified_ms: i64,
}

/// A content-addressed store of blobs in a directory of any [`Storage`]: this machine's
/// files (omp's `blobs/`), memory, or a server beside the sessions. Cheap to clone.
#[derive(Clone)]
pub struct BlobStore {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    /// Whether a put already removed what killed writers left in the directory.
    swept: Arc<AtomicBool>,
}

impl fmt::Debug for BlobStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlobStore").field("dir", &self.dir).finish_non_exhaustive()
    }
}

impl BlobStore {
    /// Returns the store in the directory `dir` of this machine's files (created on the
    /// first write).
    pub fn open(dir: impl Into<PathBuf>) -> BlobStore {
        BlobStore::on(Arc::new(FileStorage::new()), dir)
    }

    /// Returns an empty store kept in memory.
    pub fn in_memory() -> BlobStore {
        BlobStore::on(Arc::new(MemoryStorage::new()), "/blobs")
    }

    /// Returns the store in the directory `dir` of `storage` (a server storage keeps the
    /// blobs beside the sessions; a [`FileStorage`] with faults injects them into puts).
    pub fn on(storage: Arc<dyn Storage>, dir: impl Into<PathBuf>) -> BlobStore {
        BlobStore { storage, dir: dir.into(), swept: Arc::default() }
    }

    /// Returns the storage the blobs are on.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// Returns the store's directory on its storage.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Returns the canonical file of a blob on the store's storage.
    pub fn path(&self, blob: &BlobRef) -> PathBuf {
        self.dir.join(blob.hash())
    }

    /// Stores `bytes` and returns their reference; with an image `mime`, also the typed sidecar.
    ///
    /// Idempotent: storing the same bytes again is success and changes nothing but the
    /// blob's modification time.
    pub fn put(&self, bytes: &[u8], mime: Option<&str>) -> Result<BlobRef, StoreError> {
        let blob = BlobRef::for_bytes(bytes);
        let path = self.path(&blob);
        let s = self.storage.as_ref();
        if !self.swept.load(Ordering::Relaxed) {
            s.ensure_dir(&self.dir)?;
            // The first put of a store removes a killed writer's temporary files (a put of
            // a blob already stored writes nothing that would). They are not blobs, and a
            // failure to remove them leaves them for the next store.
            let _ = s.remove_leftovers(&self.dir);
            self.swept.store(true, Ordering::Relaxed);
        }
        let identical = match s.read(&path) {
            Ok(existing) => existing == bytes,
            Err(StoreError::NotFound { .. }) => false,
            Err(e) => return Err(e),
        };
        // A blob stored again is new again: its time says so, so that a gc, which spares
        // blobs younger than its grace period, never deletes it between this put and the
        // line that refers to it (omp rewrites it).
        if !identical || s.renew(&path).is_err() {
            s.write_immutable(&path, bytes)?;
        }
        if let Some(ext) = mime.and_then(extension_for_mime) {
            // A sidecar is a convenience for image viewers: a failure to make one is
            // ignored, and one that exists is kept.
            let sidecar = self.dir.join(format!("{}.{ext}", blob.hex));
            if !matches!(s.exists(&sidecar), Ok(true)) {
                let _ = s.link_or_copy(&path, &sidecar);
            }
        }
        Ok(blob)
    }

    /// Returns the blob's bytes, or `None` when it is not stored.
    pub fn get(&self, blob: &BlobRef) -> Result<Option<Vec<u8>>, StoreError> {
        match self.storage.read(&self.path(blob)) {
            Ok(b) => Ok(Some(b)),
            Err(StoreError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Returns whether the blob is stored.
    pub fn has(&self, blob: &BlobRef) -> Result<bool, StoreError> {
        Ok(self.size(blob)?.is_some())
    }

    /// Returns every blob of the store, by hash, with its files (a missing directory
    /// holds none). Names that are not a blob's, and folders, are left out.
    pub fn list(&self) -> Result<Vec<StoredBlob>, StoreError> {
        let s = self.storage.as_ref();
        let mut blobs: std::collections::BTreeMap<String, StoredBlob> = std::collections::BTreeMap::new();
        for e in s.read_dir(&self.dir)? {
            let hex = e.name.split('.').next().unwrap_or_default();
            let (Some(blob), true) = (BlobRef::from_hex(hex), e.kind == crate::EntryKind::File) else {
                continue;
            };
            let path = self.dir.join(&e.name);
            let Some(st) = s.stat(&path)? else { continue };
            let entry = blobs.entry(blob.hex.clone()).or_insert_with(|| StoredBlob {
                blob,
                files: Vec::new(),
                bytes: 0,
                modified_ms: 0,
            });
            entry.bytes += st.size;
            entry.modified_ms = entry.modified_ms.max(st.mtime_ms);
            entry.files.push(path);
        }
        let mut blobs: Vec<StoredBlob> = blobs.into_values().collect();
        for blob in &mut blobs {
            // The canonical file (the shortest name) first.
            blob.files.sort_by_key(|p| p.as_os_str().len());
        }
        Ok(blobs)
    }

    /// Returns when `stored`'s files last changed, looked at now (0 when none is left):
    /// a put of the same bytes since [`BlobStore::list`] renewed it.
    pub fn modified_ms(&self, stored: &StoredBlob) -> Result<i64, StoreError> {
        let mut newest = 0;
        for f in &stored.files {
            if let Some(st) = self.storage.stat(f)? {
                newest = newest.max(st.mtime_ms);
            }
        }
        Ok(newest)
    }

    /// Deletes `stored`'s files, its sidecars first, so that a crash part-way leaves
    /// the canonical file for the next look; files already gone are fine.
    pub fn remove(&self, stored: &StoredBlob) -> Result<(), StoreError> {
        for file in stored.files.iter().rev() {
            match self.storage.unlink(file) {
                Ok(()) | Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Returns the blob's size in bytes, or `None` when it is not stored.
    pub fn size(&self, blob: &BlobRef) -> Result<Option<u64>, StoreError> {
        Ok(self.storage.stat(&self.path(blob))?.filter(|st| st.is_file).map(|st| st.size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_in_parts_is_the_hash_of_the_whole() {
        assert_eq!(BlobRef::for_bytes(b"").hash(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        let mut h = BlobHasher::new();
        h.update(b"hello ");
        let so_far = h.clone();
        h.update(b"world");
        assert_eq!(so_far.finish(), BlobRef::for_bytes(b"hello "));
        assert_eq!(h.finish(), BlobRef::for_bytes(b"hello world"));
    }

    #[test]
    fn refs_must_be_canonical() {
        let good = format!("blob:sha256:{}", "a".repeat(64));
        assert!(BlobRef::parse(&good).is_ok());
        for bad in [
            format!("blob:sha256:{}", "A".repeat(64)),
            format!("blob:sha256:{}", "a".repeat(63)),
            format!("blob:sha256:{}/", "a".repeat(64)),
            "blob:sha256:../../etc/passwd".to_owned(),
            "sha256:abc".to_owned(),
        ] {
            assert!(BlobRef::parse(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hash_of_empty_input() {
        assert_eq!(BlobRef::for_bytes(b"").hash(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn mime_extensions() {
        let ext = |m| extension_for_mime(m);
        assert_eq!(ext("image/png").as_deref(), Some("png"));
        assert_eq!(ext("IMAGE/JPEG").as_deref(), Some("jpg"));
        assert_eq!(ext("image/jpg").as_deref(), Some("jpg"));
        assert_eq!(ext("image/svg+xml").as_deref(), Some("svg"));
        assert_eq!(ext("image/avif; q=1").as_deref(), Some("avif"));
        assert_eq!(ext("image/x-icon").as_deref(), Some("x-icon"));
        assert_eq!(ext("image/vnd.foo+zip").as_deref(), Some("vnd.foo"));
        assert_eq!(ext("image/"), None);
        assert_eq!(ext("image/../x"), None);
        assert_eq!(ext("text/plain"), None);
        assert_eq!(ext(&format!("image/{}", "a".repeat(33))), None);
    }

    #[test]
    fn memory_store_round_trip() -> Result<(), StoreError> {
        let s = BlobStore::in_memory();
        let r = s.put(b"abc", Some("image/png"))?;
        assert_eq!(s.get(&r)?, Some(b"abc".to_vec()));
        assert!(s.has(&r)?);
        assert_eq!(s.get(&BlobRef::for_bytes(b"x"))?, None);
        Ok(())
    }
}
