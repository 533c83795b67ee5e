//! `push` and `pull`: a session file and its artifacts directory copied between two
//! storages byte for byte (`session::maintenance::push` and `pull`), never over a
//! different session unless forced, and read back after the copy to prove it.

use std::path::Path;

use session::maintenance::{self, Copied, TransferOptions};

use crate::commands::Result;
use crate::store::{SourcePath, StoreUrl};

fn json(c: &Copied) -> String {
    serde_json::json!({
        "path": c.path.to_string_lossy(),
        "bytes": c.bytes,
        "artifacts": c.artifacts,
        "unchanged": c.unchanged,
    })
    .to_string()
}

/// `push FILE --to URL`: copies a session from the file system to the storage `to`
/// names, at the same (absolute) path.
pub(crate) fn push(file: &Path, to: &str, force: bool) -> Result<String> {
    let url = StoreUrl::parse(to)?;
    if url.is_files() {
        return Err(format!(
            "--to {to}: not a storage URL; push copies to postgres://, postgres+native://, redis://, mysql:// or sqlite://"
        )
        .into());
    }
    let target = url.open(crate::store::named_access())?;
    let files = session::store::FileStorage::new();
    Ok(json(&maintenance::push(&files, file, target.as_ref(), &TransferOptions::default().force(force))?))
}

/// `pull SOURCE --to DIR`: copies a session from a storage (`URL/DATABASE/PATH`, or a
/// path in the `--store` storage) into the directory `dir` on the file system.
pub(crate) fn pull(source: &str, dir: &Path, force: bool) -> Result<String> {
    let src = SourcePath::parse(source)?;
    let storage = match &src.store {
        Some(url) => url.open(crate::store::named_access())?,
        None if crate::store::on_files() => {
            return Err(format!("{source}: pull needs a storage: write URL/DATABASE/PATH or pass --store URL").into());
        }
        None => crate::store::current(),
    };
    let files = session::store::FileStorage::new();
    let options = TransferOptions::default().force(force);
    Ok(json(&maintenance::pull(storage.as_ref(), &src.path, &files, dir, &options)?))
}
