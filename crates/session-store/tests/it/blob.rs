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
