//! Full-text search over what was said in sessions: a derived catalog
//! ([`session_history::Catalog`], SQLite FTS5) kept up to date incrementally from
//! session files read through a [`Storage`].
//!
//! [`SearchIndex::update`] compares each file's stat with what the catalog last
//! indexed: an unchanged file is not read; a file that only grew (same identity, its
//! head and the last bytes indexed unchanged) has only its new tail read; any other
//! change re-indexes it whole; a file that is gone is dropped. [`UpdateReport`]
//! counts what was read. [`SearchIndex::search`] answers from the catalog alone and
//! reads each hit's line again for its snippet. Sessions are only read, never written.
//!
//! Indexed per entry: user, assistant (text and tool calls, not thinking), tool
//! result, bash execution, custom and summary messages; compaction and branch
//! summaries; custom messages; labels; session names (`session_info`) and omp titles
//! (`title_change`). Lines are indexed once they end in a newline.
//!
//! A Claude Code transcript or a Codex rollout ([`SessionFile::other`]) is indexed as
//! the pi session its import writes (`session_import`), whole whenever its stat
//! changed; its hits name the source file and the imported entry's id, and their
//! snippets are read by importing it again.
//!
//! ```
//! use std::path::{Path, PathBuf};
//! use std::sync::Arc;
//! use session::search::{SearchIndex, SessionFile};
//! use session::store::{MemoryStorage, Storage};
//! use session::{Dialect, history::Catalog};
//!
//! let storage = Arc::new(MemoryStorage::new());
//! let path = PathBuf::from("/s/p/a.jsonl");
//! storage.write(&path, concat!(
//!     r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#, "\n",
//!     r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"fix the parser","timestamp":1}}"#, "\n",
//! ).as_bytes())?;
//! let mut index = SearchIndex::new(Catalog::open_in_memory()?, storage);
//! let files = [SessionFile::session(path.clone(), Dialect::Pi)];
//! let report = index.update(&files, &[PathBuf::from("/s")], &mut |_, _| {})?;
//! assert_eq!(report.files_whole, 1);
//! let hits = index.search("parser", 10, &[])?;
//! assert_eq!(hits[0].hit.entry_id.as_deref(), Some("a1"));
//! assert!(hits[0].snippet.contains("parser"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use session_history::{Catalog, CatalogDoc, CatalogFile, CatalogHit, HistoryError};
use session_model::typed::{Content, ContentBlock, Entry, Message};
use session_model::{Dialect, Parallelism, Record};
use session_store::{FileStat, Storage, StoreError};

use crate::freshness::{Change, Head, Seen, hashes, read_at};

/// A session file to keep in the catalog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionFile {
    /// The file.
    pub path: PathBuf,
    /// Whose session it is (pi's rules for another agent's).
    pub dialect: Dialect,
    /// Whether it is another agent's (a Claude Code transcript or a Codex rollout),
    /// read as the pi session its import writes.
    pub other: bool,
}

impl SessionFile {
    /// A pi or omp session file.
    pub fn session(path: PathBuf, dialect: Dialect) -> SessionFile {
        SessionFile { path, dialect, other: false }
    }

    /// A Claude Code transcript or a Codex rollout (a `.jsonl.zst` too).
    pub fn other(path: PathBuf) -> SessionFile {
        SessionFile { path, dialect: Dialect::Pi, other: true }
    }
}

/// What an update read and changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpdateReport {
    /// Files looked at.
    pub files_seen: usize,
    /// Files whose size and mtime were unchanged: not read.
    pub files_unchanged: usize,
    /// Files that only grew: only their new tail was read.
    pub files_tail: usize,
    /// Files indexed whole (new, rewritten, or `--rebuild`).
    pub files_whole: usize,
    /// Files the catalog knew that are gone: dropped.
    pub files_removed: usize,
    /// Files that could not be read (left as the catalog had them).
    pub files_unreadable: usize,
    /// Bytes of session files read.
    pub bytes_read: u64,
    /// Entries added to the catalog.
    pub entries_indexed: usize,
}

/// A hit with its snippet.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchHit {
    /// Where it is.
    pub hit: CatalogHit,
    /// Up to about 160 characters of the entry's text around the first word found;
    /// empty when the line changed since it was indexed.
    pub snippet: String,
}

/// Why an update or a search failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// The catalog failed.
    #[error(transparent)]
    Catalog(#[from] HistoryError),
}

/// The catalog and the storage its sessions are read through.
pub struct SearchIndex {
    catalog: Catalog,
    storage: Arc<dyn Storage>,
    parallelism: Parallelism,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex").field("catalog", &self.catalog.path()).finish_non_exhaustive()
    }
}

/// What a worker found for one file.
enum Scanned {
    Unchanged,
    Gone,
    Unreadable,
    Whole(CatalogFile, Vec<CatalogDoc>, u64),
    Tail(CatalogFile, Vec<CatalogDoc>, u64),
}

impl SearchIndex {
    /// Searches `catalog`, reading sessions through `storage`.
    pub fn new(catalog: Catalog, storage: Arc<dyn Storage>) -> SearchIndex {
        SearchIndex { catalog, storage, parallelism: Parallelism::default() }
    }

    setters! { SearchIndex;
        /// Reads files on at most `parallelism` threads.
        with_parallelism(parallelism: Parallelism) => parallelism = parallelism;
    }

    /// Forgets everything, so the next update indexes every file whole.
    ///
    /// # Errors
    ///
    /// [`SearchError::Catalog`] when the catalog cannot be written.
    pub fn clear(&mut self) -> Result<(), SearchError> {
        Ok(self.catalog.clear()?)
    }

    /// Brings the catalog up to date with `files`; files it knows below `scopes` that
    /// are not in `files` are dropped. `progress(done, total)` is called as files are
    /// read. Reads the files, never writes them; one transaction commits it all. The
    /// catalog is written while the files are read (its write lock held from the start),
    /// each file's entries as soon as those of the files before it in `files` are, so
    /// only the files read ahead of the writing are held in memory, and the catalog is
    /// the same whatever thread read what.
    ///
    /// # Errors
    ///
    /// [`SearchError::Catalog`] when the catalog cannot be read or written (then it
    /// is as before the call).
    pub fn update(
        &mut self,
        files: &[SessionFile],
        scopes: &[PathBuf],
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<UpdateReport, SearchError> {
        // Keyed by the paths' bytes: hashing a `Path` walks its components.
        let known: session_model::idhash::IdMap<Vec<u8>, CatalogFile> = self
            .catalog
            .files(scopes)?
            .into_iter()
            .map(|f| (f.path.as_os_str().as_encoded_bytes().to_vec(), f))
            .collect();
        let known_of = |p: &Path| known.get(p.as_os_str().as_encoded_bytes());
        let mut report = UpdateReport { files_seen: files.len(), ..UpdateReport::default() };
        let storage = &*self.storage;
        let listed: session_model::idhash::IdSet<&[u8]> =
            files.iter().map(|f| f.path.as_os_str().as_encoded_bytes()).collect();
        let w = self.catalog.writer()?;
        // The pool's threads read files while this one writes what they found, in the
        // order of `files` (the catalog is the same whatever thread finished first):
        // a result that arrives early waits in `early` until those before it are
        // written, and each is dropped once written. After a failed write the rest is
        // neither read nor written.
        let mut early: Vec<Option<Scanned>> = std::iter::repeat_with(|| None).take(files.len()).collect();
        let mut next = 0;
        let mut done = 0;
        let mut failed: Option<HistoryError> = None;
        let stop = std::sync::atomic::AtomicBool::new(false);
        session_model::pool::Pool::new(self.parallelism).run(
            files,
            || (),
            |_, _, f| {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return Scanned::Unreadable;
                }
                scan(storage, f, known_of(&f.path))
            },
            &mut |i, scanned| {
                early[i] = Some(scanned);
                while let Some(scanned) = early.get_mut(next).and_then(Option::take) {
                    let f = &files[next];
                    next += 1;
                    if failed.is_none()
                        && let Err(e) = write(&w, &mut report, f, known_of(&f.path).is_some(), scanned)
                    {
                        failed = Some(e);
                        stop.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                }
                done += 1;
                progress(done, files.len());
            },
        );
        if let Some(e) = failed {
            return Err(e.into());
        }
        progress(files.len(), files.len());
        for (key, file) in &known {
            if !listed.contains(key.as_slice()) {
                w.remove(&file.path)?;
                report.files_removed += 1;
            }
        }
        w.commit()?;
        Ok(report)
    }

    /// Returns the best `limit` entries below `scopes` (all when empty) that contain
    /// every word of `query` (the first [`session_history::MAX_QUERY_WORDS`] distinct
    /// ones, [`session_history::query_words`]), best first, each with a snippet read
    /// from its file.
    ///
    /// # Errors
    ///
    /// [`SearchError::Catalog`] when the catalog cannot be read.
    pub fn search(&self, query: &str, limit: usize, scopes: &[PathBuf]) -> Result<Vec<SearchHit>, SearchError> {
        let hits = self.catalog.search(query, limit, scopes)?;
        let words = session_history::query_words(query).words;
        // Another agent's file is imported again for its hits' entries, once.
        let mut imported: std::collections::HashMap<PathBuf, Option<Vec<Record>>> = std::collections::HashMap::new();
        Ok(hits
            .into_iter()
            .map(|hit| {
                let record = if is_other(&hit.agent) {
                    let records = imported.entry(hit.path.clone()).or_insert_with(|| {
                        let bytes = self.storage.read(&hit.path).ok()?;
                        Some(session_import::import(&bytes).ok()?.entries)
                    });
                    let found = records.iter().flatten().find(|r| r.id() == hit.entry_id.as_deref());
                    found.cloned()
                } else {
                    read_line(&*self.storage, &hit.path, hit.offset, hit.len)
                        .and_then(|line| Record::parse(&line).ok())
                        .filter(|r| r.id() == hit.entry_id.as_deref())
                };
                let snippet =
                    record.and_then(|r| entry_text(&r)).map(|(_, text)| snippet(&text, &words)).unwrap_or_default();
                SearchHit { hit, snippet }
            })
            .collect())
    }
}

/// Whether a catalog's `agent` is another agent's (its entries imported, not lines).
fn is_other(agent: &str) -> bool {
    [session_import::SourceKind::ClaudeCode, session_import::SourceKind::Codex].iter().any(|k| k.name() == agent)
}

/// Writes what a worker found for `f` (`known` when the catalog had it) and counts it.
fn write(
    w: &session_history::CatalogWriter<'_>,
    report: &mut UpdateReport,
    f: &SessionFile,
    known: bool,
    scanned: Scanned,
) -> Result<(), HistoryError> {
    match scanned {
        Scanned::Unchanged => report.files_unchanged += 1,
        Scanned::Gone => {
            if known {
                w.remove(&f.path)?;
                report.files_removed += 1;
            }
        }
        Scanned::Whole(file, docs, read) => {
            w.replace(&file, &docs)?;
            report.files_whole += 1;
            report.bytes_read += read;
            report.entries_indexed += docs.len();
        }
        Scanned::Tail(file, docs, read) => {
            w.extend(&file, &docs)?;
            report.files_tail += 1;
            report.bytes_read += read;
            report.entries_indexed += docs.len();
        }
        Scanned::Unreadable => report.files_unreadable += 1,
    }
    Ok(())
}

/// Reads `len` bytes at `offset` of `path`.
fn read_line(storage: &dyn Storage, path: &Path, offset: u64, len: u64) -> Option<String> {
    let (st, reader) = storage.open_reader(path).ok()?;
    let size = st.size;
    if offset.checked_add(len)? > size {
        return None;
    }
    let mut buf = vec![0; usize::try_from(len).ok()?];
    let n = reader.read_full_at(&mut buf, offset).ok()?;
    buf.truncate(n);
    String::from_utf8(buf).ok()
}

pub use crate::freshness::stable_hash;

/// What the catalog noted about `old` when it indexed it.
fn seen(old: &CatalogFile) -> Seen {
    Seen {
        size: old.size,
        mtime_ns: old.mtime_ns,
        ctime_ns: None,
        file: old.ino.zip(old.dev),
        covered: old.indexed_len,
        head_hash: old.head_hash,
        tail_hash: old.tail_hash,
    }
}

fn scan(storage: &dyn Storage, f: &SessionFile, old: Option<&CatalogFile>) -> Scanned {
    match scan_file(storage, f, old) {
        Ok(s) => s,
        Err(e) if matches!(e.downcast_ref::<StoreError>(), Some(StoreError::NotFound { .. })) => Scanned::Gone,
        Err(_) => Scanned::Unreadable,
    }
}

fn scan_file(
    storage: &dyn Storage,
    f: &SessionFile,
    old: Option<&CatalogFile>,
) -> Result<Scanned, Box<dyn std::error::Error>> {
    let Some(st) = storage.stat(&f.path)? else { return Ok(Scanned::Gone) };
    if let Some(old) = old
        && seen(old).same_stat(&st)
    {
        return Ok(Scanned::Unchanged);
    }
    let (opened, reader) = storage.open_reader(&f.path)?;
    let size = opened.size;
    if f.other {
        let bytes = read_at(&*reader, 0, size)?;
        let read = bytes.len() as u64;
        let imported = session_import::import(&bytes)?;
        let mut file = CatalogFile {
            indexed_len: read,
            session_id: Some(imported.session_id.clone()),
            cwd: imported.cwd.clone(),
            name: imported.title.as_ref().map(|t| t.name.clone()),
            ..unindexed(&f.path, imported.kind.name())
        };
        // No offsets: the entries are not lines of the file (see `search`).
        let docs = imported.entries.iter().filter_map(|r| doc(r, 0, 0, &mut file)).collect();
        finish(&mut file, &*reader, &st)?;
        return Ok(Scanned::Whole(file, docs, read));
    }
    // Only a file that grew can be an append; the old bytes must be the same.
    if let Some(old) = old
        && size > old.size
        && seen(old).change(&opened, &*reader, Head::AfterTitleSlot, true)? == Change::Grown
    {
        let bytes = read_at(&*reader, old.indexed_len, size)?;
        let read = bytes.len() as u64;
        let mut file = old.clone();
        let docs = index_lines(&bytes, old.indexed_len, &mut file);
        finish(&mut file, &*reader, &st)?;
        return Ok(Scanned::Tail(file, docs, read));
    }
    let bytes = read_at(&*reader, 0, size)?;
    let read = bytes.len() as u64;
    let mut file = unindexed(&f.path, f.dialect.name());
    let docs = index_lines(&bytes, 0, &mut file);
    finish(&mut file, &*reader, &st)?;
    Ok(Scanned::Whole(file, docs, read))
}

/// A catalog's file `path` of `agent` with nothing of it indexed yet.
fn unindexed(path: &Path, agent: &str) -> CatalogFile {
    CatalogFile {
        path: path.to_path_buf(),
        agent: agent.to_owned(),
        size: 0,
        mtime_ns: 0,
        ino: None,
        dev: None,
        indexed_len: 0,
        head_hash: 0,
        tail_hash: 0,
        session_id: None,
        cwd: None,
        name: None,
    }
}

fn finish(file: &mut CatalogFile, reader: &dyn session_model::ReadAt, st: &FileStat) -> std::io::Result<()> {
    file.size = st.size;
    file.mtime_ns = st.mtime_ns();
    file.ino = st.identity.as_ref().map(|i| i.ino);
    file.dev = st.identity.as_ref().map(|i| i.dev);
    (file.head_hash, file.tail_hash) = hashes(reader, file.indexed_len, Head::AfterTitleSlot)?;
    Ok(())
}

/// Indexes the complete lines of `bytes` (which start at `base` in the file), moving
/// `file.indexed_len` to the end of the last one and noting the header and names.
fn index_lines(bytes: &[u8], base: u64, file: &mut CatalogFile) -> Vec<CatalogDoc> {
    let mut docs = Vec::new();
    let mut start = 0;
    while let Some(nl) = memchr::memchr(b'\n', &bytes[start..]) {
        let line = &bytes[start..start + nl];
        let offset = base + start as u64;
        start += nl + 1;
        file.indexed_len = base + start as u64;
        let Ok(text) = std::str::from_utf8(line) else { continue };
        let Ok(record) = Record::parse(text) else { continue };
        if record.is_header() {
            if let Ok(Entry::Session(h)) = record.entry() {
                file.session_id = h.id;
                file.cwd = h.cwd;
            }
            continue;
        }
        docs.extend(doc(&record, offset, line.len() as u64, file));
    }
    docs
}

/// The catalog's entry of `record` (at `offset`, `len` bytes; `None` when it says
/// nothing), noting a session name or title in `file`.
fn doc(record: &Record, offset: u64, len: u64, file: &mut CatalogFile) -> Option<CatalogDoc> {
    let (kind, text) = entry_text(record)?;
    if matches!(kind, "session_info" | "title_change") {
        file.name = Some(text.clone());
    }
    Some(CatalogDoc {
        entry_id: record.id().map(str::to_owned),
        offset,
        len,
        timestamp: record.timestamp().map(str::to_owned),
        kind: kind.to_owned(),
        text,
    })
}

fn push(out: &mut String, s: &str) {
    if s.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(s);
}

/// The non-empty `parts`, one a line.
fn joined<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for s in parts {
        push(&mut out, s);
    }
    out
}

fn content_text(c: &Content) -> String {
    match c {
        Content::Text(t) => t.clone(),
        Content::Blocks(blocks) => blocks_text(blocks),
    }
}

fn blocks_text(blocks: &[ContentBlock]) -> String {
    let mut out = String::new();
    for b in blocks {
        match b {
            ContentBlock::Text(t) => push(&mut out, &t.text),
            ContentBlock::ToolCall(c) => {
                push(&mut out, &c.name);
                push(&mut out, &c.arguments.to_string());
            }
            _ => {}
        }
    }
    out
}

/// The kind and the searchable text of an entry (`None` when it says nothing).
fn entry_text(record: &Record) -> Option<(&'static str, String)> {
    let (kind, out) = match record.entry().ok()? {
        Entry::Message(m) => match &m.message {
            Message::User(u) => ("user", content_text(&u.content)),
            Message::Assistant(a) => ("assistant", blocks_text(&a.content)),
            Message::ToolResult(t) => ("toolResult", joined([t.tool_name.as_str(), &content_text(&t.content)])),
            Message::BashExecution(b) => ("bashExecution", joined([b.command.as_str(), &b.output])),
            Message::Custom(c) | Message::HookMessage(c) => ("custom", content_text(&c.content)),
            Message::BranchSummary(b) => ("branchSummary", b.summary.clone()),
            Message::CompactionSummary(c) => ("compactionSummary", c.summary.clone()),
            _ => return None,
        },
        Entry::Compaction(c) => ("compaction", c.summary.clone()),
        Entry::BranchSummary(b) => ("branch_summary", b.summary.clone()),
        Entry::CustomMessage(c) => ("custom_message", content_text(&c.content)),
        Entry::Label(l) => ("label", l.label.clone().unwrap_or_default()),
        Entry::SessionInfo(s) => ("session_info", s.name.clone()),
        Entry::TitleChange(t) => ("title_change", t.title.clone()),
        _ => return None,
    };
    (!out.is_empty()).then_some((kind, out))
}

/// About 160 characters of `text` on one line around the first of `words` found.
fn snippet(text: &str, words: &[String]) -> String {
    let flat: String = text.chars().map(|c| if c.is_whitespace() { ' ' } else { c }).collect();
    let lower = flat.to_lowercase();
    // Lowercasing can change byte lengths; find the match by characters.
    let at = words.iter().filter_map(|w| lower.find(w.as_str()).map(|b| lower[..b].chars().count())).min().unwrap_or(0);
    let chars: Vec<char> = flat.chars().collect();
    let from = at.saturating_sub(50);
    let to = (from + 160).min(chars.len());
    let mut out = String::new();
    if from > 0 {
        out.push('…');
    }
    out.extend(chars[from..to].iter());
    if to < chars.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippet_centres_on_the_match() {
        let text = format!("{} needle {}", "a ".repeat(100), "b ".repeat(100));
        let s = snippet(&text, &["needle".to_owned()]);
        assert!(s.starts_with('…') && s.ends_with('…') && s.contains("needle"), "{s}");
        assert_eq!(snippet("İx needle", &["needle".to_owned()]), "İx needle");
    }

    #[test]
    fn fnv_is_stable() {
        assert_eq!(stable_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
