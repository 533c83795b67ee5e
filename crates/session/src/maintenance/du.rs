//! Where the bytes go: each session's file split by what its lines hold, its artifacts
//! directory, and the blobs it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;
use session_model::Dialect;
use session_store::{EntryKind, Storage, artifacts_dir, blob::find_refs};

use super::JobError;
use super::proof::is_real_dir;
use crate::error::unless_missing;

/// The space one session takes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionSpace {
    /// The session file.
    pub path: PathBuf,
    /// Whose session it is.
    pub dialect: Option<Dialect>,
    /// The header's `cwd` (empty when it has none).
    pub cwd: String,
    /// The file's bytes: `text + tool_output + images + other`.
    pub bytes: u64,
    /// Bytes of the lines that are neither tool output nor image data: messages,
    /// summaries, headers and every other entry.
    pub text: u64,
    /// Bytes of the lines of tool results and command runs (`toolResult`,
    /// `bashExecution`, `pythonExecution`), less their image data.
    pub tool_output: u64,
    /// Bytes of image data written inline (base64 `data` of image blocks).
    pub images: u64,
    /// Bytes of no entry: omp's title slot, lines that are not records.
    pub other: u64,
    /// Entries (records after the header).
    pub entries: u64,
    /// Bytes of the files of its artifacts directory (links not followed).
    pub artifacts: u64,
    /// Bytes of the blobs it names that are in a blob store (each blob once).
    pub blobs: u64,
}

/// The space of one project's sessions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProjectSpace {
    /// The project (the sessions' header `cwd`).
    pub cwd: String,
    /// How many sessions.
    pub sessions: u64,
    /// Their files' bytes.
    pub bytes: u64,
    /// Their artifacts directories' bytes.
    pub artifacts: u64,
    /// The bytes of the blobs they name (a blob named by two sessions counts in each).
    pub blobs: u64,
}

/// Measures the session at `path`: reads its file (and the sizes of its artifacts and of
/// the blobs it names in `blob_dirs`). Reads only.
///
/// # Errors
///
/// Store errors reading the file or listing its artifacts.
pub fn session_space(
    storage: &dyn Storage,
    dialect: Dialect,
    path: &Path,
    blob_dirs: &[PathBuf],
) -> Result<SessionSpace, JobError> {
    let bytes = storage.read(path)?;
    let parsed = session_model::parse_session_bytes(&bytes, dialect);
    let mut s = SessionSpace {
        path: path.to_path_buf(),
        dialect: Some(dialect),
        bytes: bytes.len() as u64,
        ..Default::default()
    };
    s.cwd = parsed.records.first().and_then(|h| h.get_str("cwd")).unwrap_or_default().to_owned();
    s.entries = parsed.records.len().saturating_sub(1) as u64;
    let mut counted = 0;
    for (i, r) in parsed.records.iter().enumerate() {
        // The record's text and its newline, where the file has one after it.
        let at = parsed.record_offsets.get(i).map_or(s.bytes, |&o| o as u64);
        let line = (r.text().len() as u64 + 1).min(s.bytes.saturating_sub(at));
        counted += line;
        let images = r.try_value().map_or(0, image_bytes).min(line);
        s.images += images;
        match r.message_role() {
            Some("toolResult" | "bashExecution" | "pythonExecution") => s.tool_output += line - images,
            _ => s.text += line - images,
        }
    }
    s.other = s.bytes.saturating_sub(counted);
    s.artifacts = match artifacts_dir(path) {
        Some(dir) if is_real_dir(storage, &dir)? => tree_bytes(storage, &dir)?,
        _ => 0,
    };
    let named: BTreeSet<String> = find_refs(&bytes).map(|b| b.hash().to_owned()).collect();
    for hash in &named {
        for dir in blob_dirs {
            if let Some(st) = storage.stat(&dir.join(hash))? {
                s.blobs += st.size;
                break;
            }
        }
    }
    Ok(s)
}

/// Returns the bytes of the image data in `v`: the `data` string of every object whose
/// `type` is `image`.
fn image_bytes(v: &Value) -> u64 {
    match v {
        Value::Object(map) => {
            let own = match (map.get("type").and_then(Value::as_str), map.get("data").and_then(Value::as_str)) {
                (Some("image"), Some(data)) => data.len() as u64,
                _ => 0,
            };
            own + map.iter().filter(|(k, _)| k.as_str() != "data").map(|(_, v)| image_bytes(v)).sum::<u64>()
        }
        Value::Array(items) => items.iter().map(image_bytes).sum(),
        _ => 0,
    }
}

/// Returns the bytes of the files below `dir` (a real directory; links neither followed
/// nor counted; none when it is missing).
fn tree_bytes(storage: &dyn Storage, dir: &Path) -> Result<u64, JobError> {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Some(entries) = unless_missing(storage.read_dir(&d))? else { continue };
        for e in entries {
            let p = d.join(&e.name);
            match e.kind {
                EntryKind::Dir => stack.push(p),
                EntryKind::File => total += storage.stat(&p)?.map_or(0, |st| st.size),
                _ => {}
            }
        }
    }
    Ok(total)
}

/// Sums `sessions` by project, largest first.
pub fn by_project(sessions: &[SessionSpace]) -> Vec<ProjectSpace> {
    let mut map: BTreeMap<&str, ProjectSpace> = BTreeMap::new();
    for s in sessions {
        let p = map.entry(&s.cwd).or_insert_with(|| ProjectSpace { cwd: s.cwd.clone(), ..Default::default() });
        p.sessions += 1;
        p.bytes += s.bytes;
        p.artifacts += s.artifacts;
        p.blobs += s.blobs;
    }
    let mut out: Vec<ProjectSpace> = map.into_values().collect();
    out.sort_by(|a, b| {
        (b.bytes + b.artifacts + b.blobs).cmp(&(a.bytes + a.artifacts + a.blobs)).then_with(|| a.cwd.cmp(&b.cwd))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use session_store::MemoryStorage;

    #[test]
    fn the_parts_add_up_to_the_file() -> Result<(), JobError> {
        let storage = MemoryStorage::new();
        let header = r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#;
        let user = r#"{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","data":"QUJDRA==","mimeType":"image/png"}],"timestamp":1}}"#;
        let tool = r#"{"type":"message","id":"b","parentId":"a","timestamp":"t","message":{"role":"toolResult","toolCallId":"c","toolName":"ls","content":[{"type":"text","text":"out"}],"isError":false,"timestamp":2}}"#;
        let text = format!(
            "{header}\n{user}\n{tool}\nnot json\n{{\"type\":\"custom\",\"id\":\"d\",\"parentId\":\"b\",\"timestamp\":\"t\"}}"
        );
        let path = Path::new("/s/--p--/x.jsonl");
        storage.write(path, text.as_bytes())?;
        storage.write(Path::new("/s/--p--/x/out.txt"), b"12345")?;
        let s = session_space(&storage, Dialect::Pi, path, &[])?;
        assert_eq!(s.text + s.tool_output + s.images + s.other, s.bytes);
        assert_eq!(s.images, 8);
        assert_eq!(s.tool_output, tool.len() as u64 + 1);
        assert_eq!(s.other, "not json\n".len() as u64);
        assert_eq!((s.entries, s.artifacts, s.cwd.as_str()), (3, 5, "/p"));
        Ok(())
    }
}
