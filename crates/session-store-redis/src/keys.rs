//! Paths as keys: `/`-separated strings, directories as key prefixes, and omp's title
//! metadata laid over a body's title slot.

use std::path::{Component, Path};

use session_model::{SLOT_BYTES, TitleSlot};
use session_store::{Op, StoreError};

use crate::error::{MAX_KEY_BYTES, ServerError};

/// Returns the key of `path`: its components joined by `/` (a leading `/` when absolute).
pub(crate) fn key(op: Op, path: &Path) -> Result<String, StoreError> {
    let bad = |reason: &str| ServerError::BadPath { reason: reason.to_owned() }.at(op, path);
    let mut key = String::new();
    for c in path.components() {
        match c {
            Component::RootDir => key.push('/'),
            Component::CurDir => {}
            Component::Normal(part) => {
                let part = part.to_str().ok_or_else(|| bad("not valid UTF-8"))?;
                if !key.is_empty() && !key.ends_with('/') {
                    key.push('/');
                }
                key.push_str(part);
            }
            Component::ParentDir => return Err(bad("`..` components are not allowed")),
            Component::Prefix(_) => return Err(bad("path prefixes are not allowed")),
        }
    }
    if key.contains('\0') {
        return Err(bad("NUL byte"));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(bad(&format!("{} bytes, more than {MAX_KEY_BYTES}", key.len())));
    }
    Ok(key)
}

/// Returns the key of a file: as [`key`], and it must name something below the root.
pub(crate) fn file_key(op: Op, path: &Path) -> Result<String, StoreError> {
    let k = key(op, path)?;
    if k.is_empty() || k == "/" {
        return Err(StoreError::NotAFile { path: path.to_path_buf() });
    }
    Ok(k)
}

/// Returns the prefix every key inside the directory `dir` starts with (`a/b` → `a/b/`).
pub(crate) fn dir_prefix(op: Op, dir: &Path) -> Result<String, StoreError> {
    let mut k = key(op, dir)?;
    if !k.is_empty() && !k.ends_with('/') {
        k.push('/');
    }
    Ok(k)
}

/// Returns the names of the direct children among `keys` under `prefix`, dot-files
/// skipped, sorted by bytes.
pub(crate) fn children(prefix: &str, keys: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut names: Vec<String> = keys
        .into_iter()
        .filter_map(|k| {
            let rest = k.strip_prefix(prefix)?;
            (!rest.is_empty() && !rest.contains('/') && !rest.starts_with('.')).then(|| rest.to_owned())
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Returns the entries directly under `prefix` (a directory's key prefix, ending in
/// `/`) among `keys`: a key with nothing below the prefix but its name is a file, the
/// first component of a longer one a directory. Dot-files included.
pub(crate) fn entries(prefix: &str, keys: impl IntoIterator<Item = String>) -> Vec<session_store::DirEntry> {
    use session_store::{DirEntry, EntryKind};
    let mut found: std::collections::BTreeMap<String, EntryKind> = std::collections::BTreeMap::new();
    for k in keys {
        let Some(rest) = k.strip_prefix(prefix) else { continue };
        match rest.split_once('/') {
            None if !rest.is_empty() => {
                found.insert(rest.to_owned(), EntryKind::File);
            }
            Some((first, _)) if !first.is_empty() => {
                found.entry(first.to_owned()).or_insert(EntryKind::Dir);
            }
            _ => {}
        }
    }
    found.into_iter().map(|(name, kind)| DirEntry { name, kind }).collect()
}

/// omp's title metadata: the JSON value `{title?, source?, updatedAt}` of the `<prefix>title` hash.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TitleMeta {
    pub(crate) title: Option<String>,
    pub(crate) source: Option<String>,
    pub(crate) updated_at: Option<String>,
}

impl TitleMeta {
    /// Returns the metadata omp stores for a body: the title slot it starts with, when the
    /// slot is exactly what [`TitleSlot::to_line`] writes (so laying it back over the body on
    /// read changes no byte); none otherwise.
    pub(crate) fn of_body(body: &[u8]) -> TitleMeta {
        let Some(line) = body.get(..SLOT_BYTES) else { return TitleMeta::default() };
        let Ok(text) = std::str::from_utf8(line) else { return TitleMeta::default() };
        let Some(slot) = text.strip_suffix('\n').and_then(TitleSlot::parse) else { return TitleMeta::default() };
        if slot.to_line().ok().as_deref() != Some(text) {
            return TitleMeta::default();
        }
        TitleMeta { title: Some(slot.title), source: slot.source, updated_at: Some(slot.updated_at) }
    }

    /// Returns the hash value omp writes: `{"title":…,"source":…,"updatedAt":…}`, absent
    /// fields left out; `None` when there is no metadata.
    pub(crate) fn to_json(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let mut m = serde_json::Map::new();
        if let Some(t) = &self.title {
            m.insert("title".into(), t.clone().into());
        }
        if let Some(s) = &self.source {
            m.insert("source".into(), s.clone().into());
        }
        m.insert("updatedAt".into(), self.updated_at.clone().unwrap_or_default().into());
        Some(serde_json::Value::Object(m).to_string())
    }

    /// Parses a hash value; anything but an object gives no metadata.
    pub(crate) fn from_json(text: &str) -> TitleMeta {
        let Ok(serde_json::Value::Object(m)) = serde_json::from_str::<serde_json::Value>(text) else {
            return TitleMeta::default();
        };
        let field = |k: &str| m.get(k).and_then(|v| v.as_str()).map(str::to_owned);
        TitleMeta { title: field("title"), source: field("source"), updated_at: field("updatedAt") }
    }

    fn is_empty(&self) -> bool {
        self.title.is_none() && self.source.is_none() && self.updated_at.is_none()
    }

    /// Returns the slot line omp's indexed storage shows in place of a body's first 256
    /// bytes, when there is metadata and `first` (the body's first bytes) is a slot.
    pub(crate) fn overlay_for(&self, first: &[u8]) -> Option<Vec<u8>> {
        if self.is_empty() || first.len() < SLOT_BYTES {
            return None;
        }
        let text = std::str::from_utf8(&first[..SLOT_BYTES]).ok()?;
        TitleSlot::parse(text.strip_suffix('\n')?)?;
        let slot = TitleSlot {
            title: self.title.clone().unwrap_or_default(),
            source: self.source.clone(),
            updated_at: self.updated_at.clone().unwrap_or_default(),
        };
        let line = slot.to_line().ok()?;
        (line.len() == SLOT_BYTES).then(|| line.into_bytes())
    }
}

/// Lays `slot` (the first [`SLOT_BYTES`] bytes of the body) over `window`, the bytes of the
/// body that start at `offset`.
pub(crate) fn lay_over(slot: &[u8], window: &mut [u8], offset: u64) {
    let Ok(offset) = usize::try_from(offset) else { return };
    if offset >= slot.len() {
        return;
    }
    let n = (slot.len() - offset).min(window.len());
    window[..n].copy_from_slice(&slot[offset..offset + n]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_normalized_paths() {
        assert_eq!(key(Op::Read, Path::new("/a//b/./c.jsonl")).ok(), Some("/a/b/c.jsonl".to_owned()));
        assert_eq!(key(Op::Read, Path::new("a/b")).ok(), Some("a/b".to_owned()));
        assert!(key(Op::Read, Path::new("/a/../b")).is_err());
        assert!(file_key(Op::Read, Path::new("/")).is_err());
        assert_eq!(dir_prefix(Op::List, Path::new("/")).ok(), Some("/".to_owned()));
        assert_eq!(dir_prefix(Op::List, Path::new("/a/b")).ok(), Some("/a/b/".to_owned()));
    }

    #[test]
    fn children_are_direct_visible_and_sorted() {
        let keys = ["/d/b", "/d/a", "/d/.h", "/d/sub/x", "/dd/y"].map(str::to_owned);
        assert_eq!(children("/d/", keys), ["a", "b"]);
    }

    #[test]
    fn slots_round_trip_through_metadata() {
        let slot = TitleSlot {
            title: "hi".into(),
            source: Some("user".into()),
            updated_at: "2026-01-01T00:00:00.000Z".into(),
        };
        let line = slot.to_line().map_err(|e| e.to_string()).unwrap_or_default();
        let body = format!("{line}{{\"type\":\"session\"}}\n");
        let meta = TitleMeta::of_body(body.as_bytes());
        assert_eq!(meta.title.as_deref(), Some("hi"));
        assert_eq!(meta.overlay_for(body.as_bytes()).as_deref(), Some(line.as_bytes()));
        assert_eq!(TitleMeta::of_body(b"{\"type\":\"session\"}\n"), TitleMeta::default());
        let json = meta.to_json().unwrap_or_default();
        assert_eq!(json, r#"{"title":"hi","source":"user","updatedAt":"2026-01-01T00:00:00.000Z"}"#);
        assert_eq!(TitleMeta::from_json(&json), meta);
    }
}
