//! [`Catalog`]: a derived SQLite FTS5 index of what was said in session files, kept
//! beside the listing cache and never the source of truth.
//!
//! The catalog knows nothing of the session format: callers give it, per file, the
//! state they indexed ([`CatalogFile`]: size, mtime, identity, the length indexed
//! and hashes of its head and tail) and the text of each entry ([`CatalogDoc`]), and
//! ask it back which files it knows and which entries match a query. The FTS5 table
//! is contentless (`content=''`): it holds the index, not a second copy of the text,
//! so a caller that wants a snippet reads the entry again at its offset.
//!
//! Deleting the file loses nothing but time; a damaged file is removed and rebuilt.

use std::path::{Path, PathBuf};

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};

use crate::error::HistoryError;
use crate::text::{query_words, segment, segmented_query};

/// The schema; `user_version` says which, and another version is rebuilt.
const CATALOG_DDL: &str = "
CREATE TABLE IF NOT EXISTS files (
\tid INTEGER PRIMARY KEY,
\tpath TEXT NOT NULL UNIQUE,
\tagent TEXT NOT NULL,
\tsize INTEGER NOT NULL,
\tmtime_ns INTEGER NOT NULL,
\tino INTEGER,
\tdev INTEGER,
\tindexed_len INTEGER NOT NULL,
\thead_hash INTEGER NOT NULL,
\ttail_hash INTEGER NOT NULL,
\tsession_id TEXT,
\tcwd TEXT,
\tname TEXT
);
CREATE TABLE IF NOT EXISTS docs (
\tid INTEGER PRIMARY KEY,
\tfile_id INTEGER NOT NULL,
\tentry_id TEXT,
\toffset INTEGER NOT NULL,
\tlen INTEGER NOT NULL,
\ttimestamp TEXT,
\tkind TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS docs_file ON docs(file_id);
CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(text, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2');
";

/// 2: text of scripts written without spaces indexed character by character.
const CATALOG_VERSION: i64 = 2;

/// What the catalog remembers of one indexed file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogFile {
    /// The session file.
    pub path: PathBuf,
    /// Whose session (`pi`, `omp`).
    pub agent: String,
    /// Its size when indexed.
    pub size: u64,
    /// Its modification time when indexed, in nanoseconds.
    pub mtime_ns: i64,
    /// Its inode, where the storage has one.
    pub ino: Option<u64>,
    /// Its device, where the storage has one.
    pub dev: Option<u64>,
    /// The bytes indexed: the file up to the end of its last complete line.
    pub indexed_len: u64,
    /// A hash of the file's head, to tell an append from a rewrite.
    pub head_hash: u64,
    /// A hash of the last bytes before `indexed_len`.
    pub tail_hash: u64,
    /// The session id from the header.
    pub session_id: Option<String>,
    /// The session's working directory from the header.
    pub cwd: Option<String>,
    /// The session's latest name or title.
    pub name: Option<String>,
}

/// The text of one entry, and where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogDoc {
    /// The entry id.
    pub entry_id: Option<String>,
    /// The byte offset of the entry's line in the file.
    pub offset: u64,
    /// The line's length, without its newline.
    pub len: u64,
    /// The entry's timestamp, ISO.
    pub timestamp: Option<String>,
    /// What it is (`user`, `assistant`, `toolResult`, `compaction`, `label`, …).
    pub kind: String,
    /// The words to index.
    pub text: String,
}

/// One entry that matched a query.
#[derive(Clone, Debug, PartialEq)]
pub struct CatalogHit {
    /// The session file.
    pub path: PathBuf,
    /// Whose session.
    pub agent: String,
    /// The session id.
    pub session_id: Option<String>,
    /// The session's working directory.
    pub cwd: Option<String>,
    /// The session's name or title.
    pub name: Option<String>,
    /// The entry id.
    pub entry_id: Option<String>,
    /// The byte offset of the entry's line.
    pub offset: u64,
    /// The line's length.
    pub len: u64,
    /// The entry's timestamp.
    pub timestamp: Option<String>,
    /// What the entry is.
    pub kind: String,
    /// FTS5's bm25 score: lower is a better match.
    pub score: f64,
}

/// A derived full-text catalog of session text in one SQLite file.
#[derive(Debug)]
pub struct Catalog {
    conn: Connection,
    path: PathBuf,
}

fn err<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(rusqlite::Error) -> HistoryError + 'a {
    move |source| HistoryError::Catalog { path: path.to_path_buf(), op, source }
}

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn uint(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// `path >= 'p/' AND path < 'p0'`: every path below `p` (`'0'` follows `'/'`).
fn prefix_clause(prefixes: &[PathBuf], params: &mut Vec<Value>) -> String {
    if prefixes.is_empty() {
        return "1".into();
    }
    let mut parts = Vec::new();
    for p in prefixes {
        let p = p.to_string_lossy();
        let p = p.trim_end_matches('/');
        parts.push("(f.path >= ? AND f.path < ?)".to_owned());
        params.push(Value::Text(format!("{p}/")));
        params.push(Value::Text(format!("{p}0")));
    }
    format!("({})", parts.join(" OR "))
}

impl Catalog {
    /// Opens (creating it and its directory if needed) the catalog at `path`. A file
    /// that is damaged or of another schema version is removed and started afresh:
    /// it holds nothing that cannot be rebuilt.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Io`] when the directory cannot be created or a damaged file
    /// removed; [`HistoryError::Catalog`] when SQLite fails.
    pub fn open(path: impl AsRef<Path>) -> Result<Catalog, HistoryError> {
        let path = path.as_ref().to_path_buf();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| HistoryError::Io {
                path: path.clone(),
                op: "create directory",
                target: parent.to_path_buf(),
                source,
            })?;
        }
        match Catalog::try_open(&path) {
            Ok(c) => Ok(c),
            Err(HistoryError::Catalog { source, .. })
                if crate::error::is_corrupt(&source) || source.to_string().contains("version") =>
            {
                for suffix in ["", "-wal", "-shm", "-journal"] {
                    let mut p = path.clone().into_os_string();
                    p.push(suffix);
                    let p = PathBuf::from(p);
                    match std::fs::remove_file(&p) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(source) => {
                            return Err(HistoryError::Io { path: path.clone(), op: "remove", target: p, source });
                        }
                    }
                }
                Catalog::try_open(&path)
            }
            Err(e) => Err(e),
        }
    }

    /// Opens an empty catalog in memory.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Catalog`] when SQLite fails.
    pub fn open_in_memory() -> Result<Catalog, HistoryError> {
        let path = PathBuf::from(":memory:");
        let conn = Connection::open_in_memory().map_err(err(&path, "open"))?;
        Catalog::init(conn, path)
    }

    fn try_open(path: &Path) -> Result<Catalog, HistoryError> {
        let conn = Connection::open(path).map_err(err(path, "open"))?;
        crate::schema::configure(&conn, crate::DEFAULT_BUSY_TIMEOUT).map_err(|(op, source)| HistoryError::Catalog {
            path: path.to_path_buf(),
            op,
            source,
        })?;
        Catalog::init(conn, path.to_path_buf())
    }

    fn init(conn: Connection, path: PathBuf) -> Result<Catalog, HistoryError> {
        let version: i64 =
            conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(err(&path, "read version"))?;
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master WHERE name = 'files'", [], |r| r.get(0))
            .map_err(err(&path, "read schema"))?;
        if tables > 0 && version != CATALOG_VERSION {
            return Err(HistoryError::Catalog {
                path,
                op: "check version",
                source: rusqlite::Error::InvalidParameterName(format!("catalog version {version}")),
            });
        }
        conn.execute_batch(CATALOG_DDL).map_err(err(&path, "create tables"))?;
        conn.execute_batch(&format!("PRAGMA user_version = {CATALOG_VERSION}")).map_err(err(&path, "set version"))?;
        Ok(Catalog { conn, path })
    }

    /// Returns the database file (`:memory:` for one in memory).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Returns the files the catalog knows below any of `prefixes` (every file when
    /// empty).
    ///
    /// # Errors
    ///
    /// [`HistoryError::Catalog`] when the read fails.
    pub fn files(&self, prefixes: &[PathBuf]) -> Result<Vec<CatalogFile>, HistoryError> {
        let mut params = Vec::new();
        let clause = prefix_clause(prefixes, &mut params);
        let sql = format!(
            "SELECT path, agent, size, mtime_ns, ino, dev, indexed_len, head_hash, tail_hash, session_id, cwd, name \
             FROM files f WHERE {clause}"
        );
        let run = || -> rusqlite::Result<Vec<CatalogFile>> {
            let mut stmt = self.conn.prepare(&sql)?;
            let rows = stmt.query_map(params_from_iter(params), |r| {
                Ok(CatalogFile {
                    path: PathBuf::from(r.get::<_, String>(0)?),
                    agent: r.get(1)?,
                    size: uint(r.get(2)?),
                    mtime_ns: r.get(3)?,
                    ino: r.get::<_, Option<i64>>(4)?.map(uint),
                    dev: r.get::<_, Option<i64>>(5)?.map(uint),
                    indexed_len: uint(r.get(6)?),
                    head_hash: r.get::<_, i64>(7)?.cast_unsigned(),
                    tail_hash: r.get::<_, i64>(8)?.cast_unsigned(),
                    session_id: r.get(9)?,
                    cwd: r.get(10)?,
                    name: r.get(11)?,
                })
            })?;
            rows.collect()
        };
        run().map_err(err(&self.path, "read files"))
    }

    /// Starts a batch of changes, committed together by [`CatalogWriter::commit`]
    /// (dropped without it, nothing changes).
    ///
    /// # Errors
    ///
    /// [`HistoryError::Catalog`] when the write lock cannot be taken.
    pub fn writer(&mut self) -> Result<CatalogWriter<'_>, HistoryError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(err(&self.path, "begin"))?;
        Ok(CatalogWriter { tx, path: &self.path })
    }

    /// Removes everything (for a rebuild).
    ///
    /// # Errors
    ///
    /// [`HistoryError::Catalog`] when the write fails.
    pub fn clear(&mut self) -> Result<(), HistoryError> {
        self.conn
            .execute_batch("BEGIN IMMEDIATE; DELETE FROM docs_fts; DELETE FROM docs; DELETE FROM files; COMMIT;")
            .map_err(err(&self.path, "clear"))
    }

    /// Returns the entries of files below `prefixes` (all when empty) that contain
    /// every word of `query` (each as a word prefix, case- and accent-insensitively;
    /// the first [`crate::MAX_QUERY_WORDS`] distinct words, [`crate::query_words`]),
    /// best match first (bm25). The query's punctuation, quotes and FTS5 operators are
    /// words' separators, never syntax; a query without a letter or digit finds nothing.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Catalog`] when the query fails.
    pub fn search(&self, query: &str, limit: usize, prefixes: &[PathBuf]) -> Result<Vec<CatalogHit>, HistoryError> {
        let tokens = query_words(query).words;
        if tokens.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let mut params = vec![Value::Text(segmented_query(&tokens))];
        let clause = prefix_clause(prefixes, &mut params);
        params.push(Value::Integer(int(limit as u64)));
        let sql = format!(
            "SELECT f.path, f.agent, f.session_id, f.cwd, f.name, d.entry_id, d.offset, d.len, d.timestamp, d.kind, m.score \
             FROM (SELECT rowid, bm25(docs_fts) AS score FROM docs_fts WHERE docs_fts MATCH ?) m \
             JOIN docs d ON d.id = m.rowid JOIN files f ON f.id = d.file_id \
             WHERE {clause} ORDER BY m.score, d.id LIMIT ?"
        );
        let run = || -> rusqlite::Result<Vec<CatalogHit>> {
            let mut stmt = self.conn.prepare(&sql)?;
            let rows = stmt.query_map(params_from_iter(params), |r| {
                Ok(CatalogHit {
                    path: PathBuf::from(r.get::<_, String>(0)?),
                    agent: r.get(1)?,
                    session_id: r.get(2)?,
                    cwd: r.get(3)?,
                    name: r.get(4)?,
                    entry_id: r.get(5)?,
                    offset: uint(r.get(6)?),
                    len: uint(r.get(7)?),
                    timestamp: r.get(8)?,
                    kind: r.get(9)?,
                    score: r.get(10)?,
                })
            })?;
            rows.collect()
        };
        run().map_err(err(&self.path, "search"))
    }
}

/// A batch of catalog changes in one transaction.
#[derive(Debug)]
pub struct CatalogWriter<'a> {
    tx: rusqlite::Transaction<'a>,
    path: &'a Path,
}

impl CatalogWriter<'_> {
    fn file_id(&self, path: &str) -> rusqlite::Result<Option<i64>> {
        self.tx.query_row("SELECT id FROM files WHERE path = ?", [path], |r| r.get(0)).optional()
    }

    fn drop_docs(&self, file_id: i64) -> rusqlite::Result<()> {
        self.tx.execute("DELETE FROM docs_fts WHERE rowid IN (SELECT id FROM docs WHERE file_id = ?)", [file_id])?;
        self.tx.execute("DELETE FROM docs WHERE file_id = ?", [file_id])?;
        Ok(())
    }

    fn upsert(&self, f: &CatalogFile) -> rusqlite::Result<i64> {
        let path = f.path.to_string_lossy();
        let values = params![
            path,
            f.agent,
            int(f.size),
            f.mtime_ns,
            f.ino.map(int),
            f.dev.map(int),
            int(f.indexed_len),
            f.head_hash.cast_signed(),
            f.tail_hash.cast_signed(),
            f.session_id,
            f.cwd,
            f.name
        ];
        self.tx.execute(
            "INSERT INTO files(path, agent, size, mtime_ns, ino, dev, indexed_len, head_hash, tail_hash, session_id, cwd, name) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) ON CONFLICT(path) DO UPDATE SET \
             agent = ?2, size = ?3, mtime_ns = ?4, ino = ?5, dev = ?6, indexed_len = ?7, head_hash = ?8, \
             tail_hash = ?9, session_id = ?10, cwd = ?11, name = ?12",
            values,
        )?;
        self.file_id(&path).map(|id| id.unwrap_or(0))
    }

    fn insert_docs(&self, file_id: i64, docs: &[CatalogDoc]) -> rusqlite::Result<()> {
        let mut doc = self.tx.prepare_cached(
            "INSERT INTO docs(file_id, entry_id, offset, len, timestamp, kind) VALUES (?, ?, ?, ?, ?, ?)",
        )?;
        let mut fts = self.tx.prepare_cached("INSERT INTO docs_fts(rowid, text) VALUES (?, ?)")?;
        for d in docs {
            doc.execute(params![file_id, d.entry_id, int(d.offset), int(d.len), d.timestamp, d.kind])?;
            fts.execute(params![self.tx.last_insert_rowid(), segment(&d.text)])?;
        }
        Ok(())
    }

    /// Replaces everything known of `file.path` with `file` and `docs`.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Catalog`] when the write fails.
    pub fn replace(&self, file: &CatalogFile, docs: &[CatalogDoc]) -> Result<(), HistoryError> {
        let run = || -> rusqlite::Result<()> {
            if let Some(id) = self.file_id(&file.path.to_string_lossy())? {
                self.drop_docs(id)?;
            }
            let id = self.upsert(file)?;
            self.insert_docs(id, docs)
        };
        run().map_err(err(self.path, "replace file"))
    }

    /// Records `file`'s new state and adds `docs`, the entries of its new tail.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Catalog`] when the write fails.
    pub fn extend(&self, file: &CatalogFile, docs: &[CatalogDoc]) -> Result<(), HistoryError> {
        let run = || -> rusqlite::Result<()> {
            let id = self.upsert(file)?;
            self.insert_docs(id, docs)
        };
        run().map_err(err(self.path, "extend file"))
    }

    /// Forgets `path`.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Catalog`] when the write fails.
    pub fn remove(&self, path: &Path) -> Result<(), HistoryError> {
        let run = || -> rusqlite::Result<()> {
            if let Some(id) = self.file_id(&path.to_string_lossy())? {
                self.drop_docs(id)?;
                self.tx.execute("DELETE FROM files WHERE id = ?", [id])?;
            }
            Ok(())
        };
        run().map_err(err(self.path, "remove file"))
    }

    /// Commits the batch.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Catalog`] when the commit fails (nothing of the batch landed).
    pub fn commit(self) -> Result<(), HistoryError> {
        let path = self.path.to_path_buf();
        self.tx.commit().map_err(|source| HistoryError::Catalog { path, op: "commit", source })
    }
}
