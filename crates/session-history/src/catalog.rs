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
//! Deleting the file loses nothing but time; a damaged catalog is removed and rebuilt.
//!
//! The file is as private as the sessions it is derived from, and nothing else is ever
//! taken for it: [`Catalog::open`] creates it 0600 (its folder 0700), exclusively and
//! without following a link, and SQLite is told to follow none either (its journal
//! files copy the database's mode). A database is written only once it is shown to be
//! a catalog: its `application_id` is [`CATALOG_APPLICATION_ID`], set when it is
//! created (or, for a catalog from before that, it holds the catalog's tables and
//! nothing else). Another program's database, a link or anything that is not a SQLite
//! database at that path is refused ([`HistoryError::NotACatalog`]) and left as it is;
//! only a damaged file that says it is a catalog is removed. The caller should keep
//! the file in a folder that is the user's alone (the command's cache folder is a
//! `session_store::PrivateDir`).

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

/// The full-text index's `hashsize`: how many bytes of new index data FTS5 gathers in
/// memory before it writes them out as a segment (SQLite's default is 1 MiB). Fewer,
/// larger segments cost fewer merges: a first index of 10,000 sessions takes about a
/// tenth less time, for about 10 MB more memory while it runs. An option of the
/// index, not of its schema, kept in its `docs_fts_config` table: set when a catalog
/// is opened, and written only when it differs.
const FTS_HASHSIZE: i64 = 8 * 1024 * 1024;

/// The SQLite `application_id` of a search catalog (`SSCa`), set when one is created:
/// a database with another is never written.
pub const CATALOG_APPLICATION_ID: i32 = 0x5353_4361;

/// Why a file was not taken for a search catalog ([`HistoryError::NotACatalog`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotACatalog {
    /// A symbolic link stands at the catalog's path (or in its folder's path).
    Link,
    /// Something other than a regular file stands there.
    NotAFile,
    /// The file is not a SQLite database.
    NotADatabase,
    /// A SQLite database of another application: its `application_id`.
    ApplicationId(i32),
    /// A SQLite database without an `application_id` that holds tables (or indexes,
    /// views, triggers) a catalog does not have: their names.
    ForeignTables(Vec<String>),
    /// A SQLite database without an `application_id` whose `user_version` no catalog
    /// ever had.
    UserVersion(i64),
}

impl std::fmt::Display for NotACatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotACatalog::Link => f.write_str("a symbolic link stands there"),
            NotACatalog::NotAFile => f.write_str("it is not a regular file"),
            NotACatalog::NotADatabase => f.write_str("it is not a SQLite database"),
            NotACatalog::ApplicationId(id) => {
                write!(f, "it is a SQLite database of another program (application_id {id:#x})")
            }
            NotACatalog::ForeignTables(names) => {
                write!(f, "it is a SQLite database with tables a catalog does not have ({})", names.join(", "))
            }
            NotACatalog::UserVersion(v) => write!(f, "it is a SQLite database of another program (user_version {v})"),
        }
    }
}

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

/// `path = 'p' OR (path >= 'p/' AND path < 'p0')`: the file `p` or every path below
/// the folder `p` (`'0'` follows `'/'`).
fn prefix_clause(prefixes: &[PathBuf], params: &mut Vec<Value>) -> String {
    if prefixes.is_empty() {
        return "1".into();
    }
    let mut parts = Vec::new();
    for p in prefixes {
        let p = p.to_string_lossy();
        let p = p.trim_end_matches('/');
        parts.push("(f.path = ? OR (f.path >= ? AND f.path < ?))".to_owned());
        params.push(Value::Text(p.to_owned()));
        params.push(Value::Text(format!("{p}/")));
        params.push(Value::Text(format!("{p}0")));
    }
    format!("({})", parts.join(" OR "))
}

impl Catalog {
    /// Opens the catalog at `path`, creating it (mode 0600, exclusively, never through a
    /// link) and its missing folders (mode 0700) if needed. A catalog that is damaged
    /// or of another schema version is removed and started afresh: it holds nothing
    /// that cannot be rebuilt. Anything else at `path` is refused and left as it is
    /// (see the module docs); a catalog of an older version of this crate, 0644, is made
    /// 0600.
    ///
    /// # Errors
    ///
    /// [`HistoryError::NotACatalog`] when `path` holds something that is not a catalog
    /// (another program's database, a link, a file that is no database);
    /// [`HistoryError::Io`] when the folder or the file cannot be created or a damaged
    /// catalog removed; [`HistoryError::Catalog`] when SQLite fails.
    pub fn open(path: impl AsRef<Path>) -> Result<Catalog, HistoryError> {
        let path = real_path(path.as_ref())?;
        prepare_file(&path)?;
        match Catalog::try_open(&path) {
            Ok(c) => Ok(c),
            // Only a file shown to be a catalog is removed (`try_open` says which).
            Err(Opening::Damaged(_)) => {
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
                prepare_file(&path)?;
                Catalog::try_open(&path).map_err(Opening::into_error)
            }
            Err(Opening::Failed(e)) => Err(e),
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

    /// Opens the catalog file at `path` (a real path, the file there) once it is shown
    /// to be a catalog, reading only ([`identify_file`]), and brings its schema up to
    /// date.
    fn try_open(path: &Path) -> Result<Catalog, Opening> {
        use rusqlite::OpenFlags;
        if let Some(found) = identify_file(path).map_err(Opening::Failed)? {
            return Err(Opening::Failed(HistoryError::NotACatalog { path: path.to_path_buf(), found }));
        }
        make_private(path).map_err(Opening::Failed)?;
        // A catalog from here on: what fails because it is damaged or of another version
        // is removed by the caller.
        let ours = |e: HistoryError| match &e {
            HistoryError::Catalog { source, .. }
                if crate::error::is_corrupt(source) || source.to_string().contains("version") =>
            {
                Opening::Damaged(e)
            }
            _ => Opening::Failed(e),
        };
        // No CREATE (the file is there) and no URI; NOFOLLOW: no link anywhere in the path.
        let flags =
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| Opening::Failed(open_error(path, e)))?;
        crate::schema::configure(&conn, crate::DEFAULT_BUSY_TIMEOUT)
            .map_err(|(op, source)| ours(HistoryError::Catalog { path: path.to_path_buf(), op, source }))?;
        Catalog::init(conn, path.to_path_buf()).map_err(ours)
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
        // One transaction: a catalog cut off while it was made is empty, not a database
        // of tables without the marks that say it is ours.
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; PRAGMA application_id = {CATALOG_APPLICATION_ID}; {CATALOG_DDL}; \
             INSERT INTO docs_fts(docs_fts, rank) SELECT 'hashsize', {FTS_HASHSIZE} WHERE NOT EXISTS \
             (SELECT 1 FROM docs_fts_config WHERE k = 'hashsize' AND v = {FTS_HASHSIZE}); \
             PRAGMA user_version = {CATALOG_VERSION}; COMMIT;"
        ))
        .map_err(err(&path, "create tables"))?;
        Ok(Catalog { conn, path })
    }

    /// Returns the database file (`:memory:` for one in memory).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Returns the files the catalog knows at or below any of `prefixes` (files or
    /// folders; every file when empty).
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

    /// Returns the entries of files at or below `prefixes` (all when empty) that contain
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

/// `SQLITE_CANTOPEN_SYMLINK`: SQLite refused a link in the path (`SQLITE_OPEN_NOFOLLOW`).
const SQLITE_CANTOPEN_SYMLINK: std::ffi::c_int = 1550;

/// How opening a catalog file failed.
enum Opening {
    /// The file is a catalog, but damaged or of another version: it may be removed.
    Damaged(HistoryError),
    /// Anything else: the file is left as it is.
    Failed(HistoryError),
}

impl Opening {
    fn into_error(self) -> HistoryError {
        match self {
            Opening::Damaged(e) | Opening::Failed(e) => e,
        }
    }
}

/// The error of a failed open of `path`: a link SQLite refused says so.
fn open_error(path: &Path, source: rusqlite::Error) -> HistoryError {
    match source.sqlite_extended_error_code() {
        Some(SQLITE_CANTOPEN_SYMLINK) => {
            HistoryError::NotACatalog { path: path.to_path_buf(), found: NotACatalog::Link }
        }
        _ => HistoryError::Catalog { path: path.to_path_buf(), op: "open", source },
    }
}

/// Returns `None` when the file at `path` is a catalog (or empty: a new one), else why
/// it is not one, without writing anything: its header is read first (is it SQLite,
/// whose `application_id`?), and only a database without an `application_id` is opened
/// to read its schema, read-only (and, when no write-ahead log is beside it, as an
/// immutable file, so that SQLite makes no file beside it either).
fn identify_file(path: &Path) -> Result<Option<NotACatalog>, HistoryError> {
    use std::io::Read;
    let io = |op| {
        let path = path.to_path_buf();
        move |source| HistoryError::Io { path: path.clone(), op, target: path, source }
    };
    let mut header = Vec::with_capacity(100);
    open_no_follow(path).map_err(io("open"))?.take(100).read_to_end(&mut header).map_err(io("read"))?;
    if header.is_empty() {
        return Ok(None);
    }
    if header.len() < 100 || &header[..16] != b"SQLite format 3\0" {
        return Ok(Some(NotACatalog::NotADatabase));
    }
    match i32::from_be_bytes([header[68], header[69], header[70], header[71]]) {
        CATALOG_APPLICATION_ID => return Ok(None),
        0 => {}
        other => return Ok(Some(NotACatalog::ApplicationId(other))),
    }
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let immutable = std::fs::symlink_metadata(PathBuf::from(wal)).is_err();
    let conn = open_read_only(path, immutable).map_err(|e| open_error(path, e))?;
    identify(&conn).map_err(|source| HistoryError::Catalog { path: path.to_path_buf(), op: "read schema", source })
}

/// Opens the database at `path` read-only, without following a link; as an immutable
/// file (no locks, no files made beside it) when `immutable`.
fn open_read_only(path: &Path, immutable: bool) -> rusqlite::Result<Connection> {
    use rusqlite::OpenFlags;
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    if !immutable {
        return Connection::open_with_flags(path, flags);
    }
    // A URI names the file: every byte but the unreserved ones escaped.
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_encoded_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'.' | b'_' | b'-' | b'~' => uri.push(char::from(b)),
            _ => uri.push_str(&format!("%{b:02X}")),
        }
    }
    uri.push_str("?immutable=1");
    Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)
}

/// Returns `None` when the database `conn` opened is a catalog (or empty, a new one),
/// else why it is not one; reads only.
fn identify(conn: &Connection) -> rusqlite::Result<Option<NotACatalog>> {
    let application_id: i32 = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    if application_id == CATALOG_APPLICATION_ID {
        return Ok(None);
    }
    if application_id != 0 {
        return Ok(Some(NotACatalog::ApplicationId(application_id)));
    }
    // No application id: an empty database, or a catalog from before they were set.
    let names = object_names(conn)?;
    let ours = catalog_object_names();
    let foreign: Vec<String> = names.iter().filter(|n| !ours.contains(n)).cloned().collect();
    if !foreign.is_empty() {
        return Ok(Some(NotACatalog::ForeignTables(foreign)));
    }
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let known = if names.is_empty() { version == 0 } else { (1..=CATALOG_VERSION).contains(&version) };
    Ok((!known).then_some(NotACatalog::UserVersion(version)))
}

/// Returns the names of the tables, indexes, views and triggers of `conn`'s database
/// (SQLite's own `sqlite_*` left out).
fn object_names(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")?;
    let names = stmt.query_map([], |r| r.get(0))?;
    names.collect()
}

/// Returns the names of everything the catalog's schema creates (FTS5's own tables
/// included), learnt once from a catalog made in memory.
fn catalog_object_names() -> &'static [String] {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        Connection::open_in_memory()
            .and_then(|conn| {
                conn.execute_batch(CATALOG_DDL)?;
                object_names(&conn)
            })
            .unwrap_or_default()
    })
}

/// Returns `path` with its folder's real path (links resolved): SQLite, told to follow
/// no link, refuses a path with any. The folder and its missing parents are created
/// 0700 first.
fn real_path(path: &Path) -> Result<PathBuf, HistoryError> {
    let io = |op, target: &Path| {
        let (path, target) = (path.to_path_buf(), target.to_path_buf());
        move |source| HistoryError::Io { path, op, target, source }
    };
    let name = path
        .file_name()
        .ok_or_else(|| HistoryError::NotACatalog { path: path.to_path_buf(), found: NotACatalog::NotAFile })?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(parent).map_err(io("create directory", parent))?;
    Ok(std::fs::canonicalize(parent).map_err(io("resolve", parent))?.join(name))
}

/// Opens `path` for reading without following a link.
fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW | libc::O_CLOEXEC);
    options.open(path)
}

/// Makes `path` a file that may be opened as the catalog: created empty (an empty
/// database), 0600 and exclusively when missing, so a link planted there makes the
/// create fail instead of being followed; an existing link or anything but a regular
/// file is refused.
fn prepare_file(path: &Path) -> Result<(), HistoryError> {
    let refuse = |found| HistoryError::NotACatalog { path: path.to_path_buf(), found };
    loop {
        let meta = match std::fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                match options.open(path) {
                    Ok(_) => return Ok(()),
                    // Made meanwhile (or a link planted): look again.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                    Err(source) => {
                        return Err(HistoryError::Io {
                            path: path.to_path_buf(),
                            op: "create",
                            target: path.to_path_buf(),
                            source,
                        });
                    }
                }
            }
            Err(source) => {
                return Err(HistoryError::Io {
                    path: path.to_path_buf(),
                    op: "stat",
                    target: path.to_path_buf(),
                    source,
                });
            }
        };
        if meta.file_type().is_symlink() {
            return Err(refuse(NotACatalog::Link));
        }
        if !meta.is_file() {
            return Err(refuse(NotACatalog::NotAFile));
        }
        return Ok(());
    }
}

/// Takes the group and other permission bits from the catalog file at `path` (one of
/// an older version is 0644), through a descriptor opened without following a link, so
/// that SQLite's journal files, which copy its mode, are private too.
fn make_private(path: &Path) -> Result<(), HistoryError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let io = |op| {
            let path = path.to_path_buf();
            move |source| HistoryError::Io { path: path.clone(), op, target: path, source }
        };
        let file = open_no_follow(path).map_err(io("open"))?;
        let mode = file.metadata().map_err(io("stat"))?.permissions().mode();
        if mode & 0o077 != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(mode & 0o700)).map_err(io("change the mode of"))?;
        }
    }
    Ok(())
}

/// A batch of catalog changes in one transaction.
#[derive(Debug)]
pub struct CatalogWriter<'a> {
    tx: rusqlite::Transaction<'a>,
    path: &'a Path,
}

impl CatalogWriter<'_> {
    fn file_id(&self, path: &str) -> rusqlite::Result<Option<i64>> {
        self.tx.prepare_cached("SELECT id FROM files WHERE path = ?")?.query_row([path], |r| r.get(0)).optional()
    }

    fn drop_docs(&self, file_id: i64) -> rusqlite::Result<()> {
        self.tx
            .prepare_cached("DELETE FROM docs_fts WHERE rowid IN (SELECT id FROM docs WHERE file_id = ?)")?
            .execute([file_id])?;
        self.tx.prepare_cached("DELETE FROM docs WHERE file_id = ?")?.execute([file_id])?;
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
        self.tx.prepare_cached(
            "INSERT INTO files(path, agent, size, mtime_ns, ino, dev, indexed_len, head_hash, tail_hash, session_id, cwd, name) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) ON CONFLICT(path) DO UPDATE SET \
             agent = ?2, size = ?3, mtime_ns = ?4, ino = ?5, dev = ?6, indexed_len = ?7, head_hash = ?8, \
             tail_hash = ?9, session_id = ?10, cwd = ?11, name = ?12",
        )?
        .execute(values)?;
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
