//! The blob store on disk: content addressing, write-once, sidecars, and the conformance blobs.

use session_store::blob::{BlobRef, BlobStore};

use crate::support::{TempDir, raw_names, testdata};

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[test]
fn put_is_idempotent_and_adds_a_sidecar() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let store = BlobStore::open(dir.path().join("blobs"));
    let r = store.put(b"png bytes", Some("image/png"))?;
    let again = store.put(b"png bytes", Some("image/png"))?;
    assert_eq!(r, again);
    assert_eq!(r.to_string(), format!("blob:sha256:{}", r.hash()));
    assert_eq!(raw_names(&dir.path().join("blobs")), [r.hash().to_owned(), format!("{}.png", r.hash())]);
    assert_eq!(store.get(&r)?, Some(b"png bytes".to_vec()));
    assert_eq!(fs_err::read(dir.path().join("blobs").join(format!("{}.png", r.hash())))?, b"png bytes");
    assert_eq!(store.size(&r)?, Some(9));
    assert!(store.has(&r)?);
    let missing = BlobRef::for_bytes(b"other");
    assert_eq!(store.get(&missing)?, None);
    assert!(!store.has(&missing)?);
    Ok(())
}

#[test]
fn damaged_blob_is_repaired() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let store = BlobStore::open(dir.path());
    let r = BlobRef::for_bytes(b"right");
    fs_err::write(dir.path().join(r.hash()), b"wrong")?;
    store.put(b"right", None)?;
    assert_eq!(store.get(&r)?, Some(b"right".to_vec()));
    Ok(())
}

#[test]
fn conformance_blobs_are_named_by_their_hash() -> TestResult {
    let root = testdata().join("conformance/omp");
    let mut seen = 0;
    for scenario in fs_err::read_dir(&root)? {
        let blobs = scenario?.path().join("blobs");
        if !blobs.is_dir() {
            continue;
        }
        for name in raw_names(&blobs) {
            let (hash, ext) = name.split_once('.').map_or((name.as_str(), None), |(h, e)| (h, Some(e)));
            let bytes = fs_err::read(blobs.join(&name))?;
            assert_eq!(BlobRef::for_bytes(&bytes).hash(), hash, "{name}");
            if let Some(ext) = ext {
                assert!(["png", "jpg", "gif", "webp", "svg"].contains(&ext), "{name}");
            }
            seen += 1;
        }
    }
    assert!(seen > 0, "the corpus has blobs");
    Ok(())
}

/// A link planted in a blob's place is neither followed nor renewed: the put replaces it
/// by the blob itself, and the file it pointed to is left as it was.
#[cfg(unix)]
#[test]
fn a_link_in_a_blobs_place_is_replaced_not_followed() -> TestResult {
    let dir = TempDir::new("session-store-it");
    let outside = dir.path().join("outside");
    fs_err::write(&outside, b"right")?;
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    fs_err::File::open(&outside)?.file().set_modified(old)?;
    let blobs = dir.path().join("blobs");
    fs_err::create_dir_all(&blobs)?;
    let r = BlobRef::for_bytes(b"right");
    std::os::unix::fs::symlink(&outside, blobs.join(r.hash()))?;
    let store = BlobStore::open(&blobs);
    assert_eq!(store.put(b"right", None)?, r);
    let meta = fs_err::symlink_metadata(blobs.join(r.hash()))?;
    assert!(meta.file_type().is_file(), "the blob is a file of its own now");
    assert_eq!(fs_err::metadata(&outside)?.modified()?, old, "the link's target was not touched");
    assert_eq!(fs_err::read(&outside)?, b"right");
    Ok(())
}
