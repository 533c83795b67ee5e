//! [`NativePostgresStorage`]: one row per appended line, and one metadata row per session.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use postgres::{Config, IsolationLevel, Transaction};
use session_store::keyed::{
    self, At, Body, Cas, Cause, Doomed, Keeps, KeyedBackend, KeyedState, Put, Row, TitleMeta, Windows, read_relation,
};
use session_store::{LockWait, Note, Op, SessionLock, StoreError, Watch};

use crate::base::{Base, FileQueries, columns_of};
use crate::error::{ConnectError, ServerError, db};
use crate::pool::{Pool, Pooled};
use crate::storage::meta_at;

/// The table names' stem unless told otherwise: `session_meta` and `session_lines`.
pub const DEFAULT_STEM: &str = "session";

/// Returns whether `stem` makes valid table names `<stem>_lines` and `<stem>_meta`:
/// `[A-Za-z_][A-Za-z0-9_]{0,56}`.
pub fn valid_stem(stem: &str) -> bool {
    session_store::keyed::valid_table_name(stem) && stem.len() <= 57
}

#[derive(Debug)]
struct Queries {
    meta_t: String,
    lines_t: String,
    stat: String,
    size_for_update: String,
    with_prefix: String,
    newest_with_prefix: String,
    stats_with_prefix: String,
    read_meta: String,
    read_lines: String,
    slices: String,
    append: String,
    append_if_size: String,
    create_meta: String,
    create_meta_if_missing: String,
    set_meta: String,
    delete_lines: String,
    insert_lines: String,
    delete_meta: String,
    cut_after: String,
    cut_line: String,
    resize: String,
    rename_meta: String,
    rename_lines: String,
    delete_meta_prefix: String,
    delete_lines_prefix: String,
    title: String,
    read_notes: String,
    write_notes: String,
}

/// The metadata table's columns that reads name, and their `NULL`s.
const META_COLUMNS: [(&str, &str); 6] = [
    ("path", "NULL::text"),
    ("size", "NULL::bigint"),
    ("mtime_ms", "NULL::bigint"),
    ("title", "NULL::text"),
    ("title_source", "NULL::text"),
    ("title_updated_at", "NULL::text"),
];

/// The lines table's columns and their `NULL`s.
const LINES_COLUMNS: [(&str, &str); 3] = [("path", "NULL::text"), ("seq", "NULL::bigint"), ("line", "NULL::bytea")];

impl Queries {
    /// The statements on the tables of `stem`, whose reads name `from_m` and `from_l`
    /// (the tables, or what stands in for them in a read-only storage:
    /// [`read_relation`]).
    fn new(stem: &str, from_m: &str, from_l: &str) -> Queries {
        let m = format!("{stem}_meta");
        let l = format!("{stem}_lines");
        let title_cols = "title, title_source, title_updated_at";
        Queries {
            stat: format!("SELECT size, mtime_ms FROM {from_m} WHERE path = $1"),
            size_for_update: format!("SELECT size FROM {m} WHERE path = $1 FOR UPDATE"),
            with_prefix: format!("SELECT path FROM {from_m} WHERE starts_with(path, $1)"),
            newest_with_prefix: format!("SELECT max(mtime_ms) FROM {from_m} WHERE starts_with(path, $1)"),
            stats_with_prefix: format!("SELECT path, size, mtime_ms FROM {from_m} WHERE starts_with(path, $1)"),
            read_meta: format!("SELECT size, {title_cols}, mtime_ms FROM {from_m} WHERE path = $1"),
            read_lines: format!("SELECT line FROM {from_l} WHERE path = $1 ORDER BY seq"),
            // The metadata relation is named by the table's name (what stands in for it
            // carries that alias too).
            slices: format!(
                "SELECT {m}.size, {m}.title, {m}.title_source, {m}.title_updated_at, {m}.mtime_ms, \
                 (SELECT string_agg(line, ''::bytea ORDER BY seq) FROM {from_l} WHERE path = $1 AND seq < $2::bigint), \
                 t.start, \
                 CASE WHEN $3::bigint > 0 THEN \
                 (SELECT string_agg(line, ''::bytea ORDER BY seq) FROM {from_l} WHERE path = $1 AND seq >= t.start) END \
                 FROM {from_m} CROSS JOIN LATERAL (SELECT coalesce((SELECT max(seq) FROM {from_l} \
                 WHERE path = $1 AND seq <= greatest({m}.size - $3::bigint, 0)), 0) AS start) t \
                 WHERE {m}.path = $1"
            ),
            append: format!(
                "WITH m AS (INSERT INTO {m} (path, size, mtime_ms) VALUES ($1, $3, $4) \
                 ON CONFLICT (path) DO UPDATE SET size = {m}.size + excluded.size, mtime_ms = excluded.mtime_ms \
                 RETURNING size - $3 AS at) \
                 INSERT INTO {l} (path, seq, line) SELECT $1, m.at, $2 FROM m WHERE $3 > 0"
            ),
            append_if_size: format!(
                "WITH m AS (UPDATE {m} SET size = size + $3, mtime_ms = $4 WHERE path = $1 AND size = $5 \
                 RETURNING size - $3 AS at), \
                 l AS (INSERT INTO {l} (path, seq, line) SELECT $1, m.at, $2 FROM m WHERE $3 > 0) \
                 SELECT count(*) FROM m"
            ),
            create_meta: format!(
                "INSERT INTO {m} (path, size, mtime_ms) VALUES ($1, 0, $2) ON CONFLICT (path) DO NOTHING"
            ),
            create_meta_if_missing: format!(
                "INSERT INTO {m} (path, size, mtime_ms, {title_cols}) VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (path) DO NOTHING"
            ),
            set_meta: format!(
                "INSERT INTO {m} (path, size, mtime_ms, {title_cols}) VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (path) DO UPDATE SET size = excluded.size, mtime_ms = excluded.mtime_ms, \
                 title = excluded.title, title_source = excluded.title_source, title_updated_at = excluded.title_updated_at"
            ),
            delete_lines: format!("DELETE FROM {l} WHERE path = $1"),
            insert_lines: format!(
                "INSERT INTO {l} (path, seq, line) SELECT $1, s.at, s.line FROM unnest($2::bigint[], $3::bytea[]) AS s(at, line)"
            ),
            delete_meta: format!("DELETE FROM {m} WHERE path = $1"),
            cut_after: format!("DELETE FROM {l} WHERE path = $1 AND seq >= $2"),
            cut_line: format!(
                "UPDATE {l} SET line = substring(line from 1 for ($2::bigint - seq)::int) \
                 WHERE path = $1 AND seq = (SELECT max(seq) FROM {l} WHERE path = $1 AND seq < $2::bigint) \
                 AND seq + octet_length(line) > $2::bigint"
            ),
            resize: format!(
                "UPDATE {m} SET size = $2::bigint, mtime_ms = $3, \
                 title = CASE WHEN $2::bigint < 256 THEN NULL ELSE title END, \
                 title_source = CASE WHEN $2::bigint < 256 THEN NULL ELSE title_source END, \
                 title_updated_at = CASE WHEN $2::bigint < 256 THEN NULL ELSE title_updated_at END WHERE path = $1"
            ),
            rename_meta: format!("UPDATE {m} SET path = $1, mtime_ms = $2 WHERE path = $3"),
            rename_lines: format!("UPDATE {l} SET path = $1 WHERE path = $2"),
            delete_meta_prefix: format!("DELETE FROM {m} WHERE starts_with(path, $1)"),
            delete_lines_prefix: format!("DELETE FROM {l} WHERE starts_with(path, $1)"),
            title: format!(
                "UPDATE {m} SET title = $2, title_source = $3, title_updated_at = $4, mtime_ms = $5 WHERE path = $1"
            ),
            // `xmin` changes with every update of the row: the version a note is stored against.
            read_notes: format!(
                "SELECT s.i, m.xmin::text, CASE WHEN m.note_kind = $2 THEN m.note END \
                 FROM unnest($1::text[]) WITH ORDINALITY AS s(path, i) JOIN {m} m ON m.path = s.path"
            ),
            write_notes: format!(
                "UPDATE {m} m SET note_kind = $1, note = s.note \
                 FROM unnest($2::text[], $3::text[], $4::bytea[]) AS s(path, version, note) \
                 WHERE m.path = s.path AND m.xmin = s.version::xid"
            ),
            meta_t: m,
            lines_t: l,
        }
    }
}

#[derive(Debug)]
struct Inner {
    base: Base,
    stem: String,
    q: Queries,
}

/// Settings of [`NativePostgresStorage::connect_with`].
#[derive(Clone, Debug)]
pub struct NativePostgresOptions {
    stem: String,
    read_only: bool,
}

impl Default for NativePostgresOptions {
    fn default() -> NativePostgresOptions {
        NativePostgresOptions { stem: DEFAULT_STEM.to_owned(), read_only: false }
    }
}

impl NativePostgresOptions {
    /// Uses the tables `<stem>_meta` and `<stem>_lines` instead of `session_meta` and
    /// `session_lines`; `stem` must pass [`valid_stem`] (checked by
    /// [`NativePostgresStorage::connect_with`]).
    pub fn stem(mut self, stem: &str) -> NativePostgresOptions {
        stem.clone_into(&mut self.stem);
        self
    }

    /// Whether to open the tables read-only (off by default): nothing is created or
    /// altered, every write is refused with [`ServerError::ReadOnly`] (a
    /// `StoreError::Io` of kind `ReadOnlyFilesystem`), and notes are neither read nor
    /// kept. Missing tables read as an empty store (no files, every read `NotFound`).
    pub fn read_only(mut self, read_only: bool) -> NativePostgresOptions {
        self.read_only = read_only;
        self
    }
}

/// Session files in PostgreSQL, one row per appended line: an append is one short
/// transaction whatever the session's size.
///
/// Tables `<stem>_meta` (one row per file: `path`, `size`, `mtime_ms`, title columns) and
/// `<stem>_lines` (`path`, `seq` = the byte offset where the row's bytes start, `line`
/// as `bytea`). Rows of a file tile its bytes from 0 to `size` in `seq` order. Not
/// readable by omp; see the crate docs.
#[derive(Clone, Debug)]
pub struct NativePostgresStorage {
    inner: Arc<Inner>,
}

impl NativePostgresStorage {
    /// Connects (a libpq-style string or a `postgres://` URL) and creates
    /// `session_meta` and `session_lines` when missing.
    pub fn connect(conn: &str) -> Result<NativePostgresStorage, ConnectError> {
        NativePostgresStorage::connect_with_stem(conn, DEFAULT_STEM)
    }

    /// [`NativePostgresStorage::connect`] with the tables `<stem>_meta` and `<stem>_lines`.
    pub fn connect_with_stem(conn: &str, stem: &str) -> Result<NativePostgresStorage, ConnectError> {
        NativePostgresStorage::connect_with(conn, NativePostgresOptions::default().stem(stem))
    }

    /// [`NativePostgresStorage::connect`] with other [`NativePostgresOptions`].
    pub fn connect_with(conn: &str, options: NativePostgresOptions) -> Result<NativePostgresStorage, ConnectError> {
        let stem = options.stem.as_str();
        if !valid_stem(stem) {
            return Err(ConnectError::BadTableName(stem.to_owned()));
        }
        let config = Config::from_str(conn).map_err(ConnectError::BadConfig)?;
        let pool = Pool::new(config, 8);
        let mut c = pool.get().map_err(ConnectError::Connect)?;
        let (m, l) = (format!("{stem}_meta"), format!("{stem}_lines"));
        if options.read_only {
            let schema = |source| ConnectError::Schema { table: m.clone(), source };
            let meta = columns_of(&mut c, &m).map_err(schema)?;
            let lines = columns_of(&mut c, &l).map_err(schema)?;
            drop(c);
            let q = Queries::new(
                stem,
                &read_relation(&m, &META_COLUMNS, meta.as_deref(), "WHERE false"),
                &read_relation(&l, &LINES_COLUMNS, lines.as_deref(), "WHERE false"),
            );
            return Ok(NativePostgresStorage::with(pool, q, stem, Some(m)));
        }
        let q = Queries::new(stem, &m, &l);
        // One connect at a time per stem changes the schema (the advisory lock), so that two
        // processes starting together do not race on the function and trigger.
        let ddl = format!(
            "BEGIN; SELECT pg_advisory_xact_lock(hashtext('{m}')); \
             CREATE TABLE IF NOT EXISTS {m} (path TEXT PRIMARY KEY, size BIGINT NOT NULL, mtime_ms BIGINT NOT NULL, \
             title TEXT, title_source TEXT, title_updated_at TEXT); \
             CREATE TABLE IF NOT EXISTS {l} (path TEXT NOT NULL, seq BIGINT NOT NULL, line BYTEA NOT NULL, \
             PRIMARY KEY (path, seq)); \
             ALTER TABLE {m} ADD COLUMN IF NOT EXISTS note_kind TEXT, ADD COLUMN IF NOT EXISTS note BYTEA; \
             CREATE OR REPLACE FUNCTION {m}_drop_note() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
             IF NEW.note IS NOT DISTINCT FROM OLD.note AND NEW.note_kind IS NOT DISTINCT FROM OLD.note_kind THEN \
             NEW.note := NULL; NEW.note_kind := NULL; END IF; RETURN NEW; END $$; \
             {drop_note} \
             {notify} \
             COMMIT",
            m = q.meta_t,
            l = q.lines_t,
            notify = crate::watch::trigger_ddl(&q.meta_t, "NEW.size"),
            drop_note = crate::watch::create_trigger_if_missing(
                &q.meta_t,
                &format!("{}_drop_note", q.meta_t),
                "BEFORE UPDATE",
                &format!("{}_drop_note", q.meta_t)
            ),
        );
        c.client().batch_execute(&ddl).map_err(|source| ConnectError::Schema { table: q.meta_t.clone(), source })?;
        drop(c);
        Ok(NativePostgresStorage::with(pool, q, stem, None))
    }

    /// The storage on `pool` with the statements `q`: any bytes (lines are `bytea`), sizes
    /// that are `bigint`s; `read_only` names the metadata table when it was opened
    /// read-only.
    fn with(pool: Arc<Pool>, q: Queries, stem: &str, read_only: Option<String>) -> NativePostgresStorage {
        let files = FileQueries {
            stat: q.stat.clone(),
            newest_with_prefix: q.newest_with_prefix.clone(),
            with_prefix: q.with_prefix.clone(),
            stats_with_prefix: q.stats_with_prefix.clone(),
            title: q.title.clone(),
        };
        let state = KeyedState::new(Keeps::Bytes, i64::MAX as u64, BIGINT).read_only(read_only);
        let inner = Inner { base: Base::new(pool, files, state), stem: stem.to_owned(), q };
        NativePostgresStorage { inner: Arc::new(inner) }
    }

    /// Returns the tables' stem.
    pub fn stem(&self) -> &str {
        &self.inner.stem
    }

    /// Sets the title metadata and mtime of `path`, leaving its bytes alone; readers see the
    /// title laid over the title slot, as with [`PostgresStorage::update_title`](crate::PostgresStorage::update_title).
    pub fn update_title(
        &self,
        path: &Path,
        title: Option<&str>,
        source: Option<&str>,
        updated_at: &str,
    ) -> Result<(), StoreError> {
        keyed::update_title(self, path, title, source, updated_at)
    }

    fn client(&self, at: At<'_>) -> Result<Pooled, StoreError> {
        self.inner.base.client(at)
    }
}

/// The limit a length past the tables' `bigint` names.
const BIGINT: &str = "a bigint size";

/// A length as the tables' `bigint`.
fn len_i64(at: At<'_>, n: u64) -> Result<i64, StoreError> {
    i64::try_from(n).map_err(|_| at.wrap(ServerError::TooLarge { size: n, limit: i64::MAX as u64, what: BIGINT }))
}

/// Splits `bytes` into lines (each with its `\n`) and inserts them from offset `from`.
fn insert_lines(
    tx: &mut Transaction<'_>,
    q: &Queries,
    at: At<'_>,
    k: &str,
    from: i64,
    bytes: &[u8],
) -> Result<(), StoreError> {
    let mut offsets = Vec::new();
    let mut lines: Vec<&[u8]> = Vec::new();
    let mut pos = from;
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        offsets.push(pos);
        lines.push(line);
        pos += line.len() as i64;
    }
    // Bounded batches keep each statement's message well under the protocol's 1 GB.
    let mut start = 0;
    while start < lines.len() {
        let mut end = start;
        let mut batch = 0usize;
        while end < lines.len() && (end == start || batch + lines[end].len() < 64 << 20) {
            batch += lines[end].len();
            end += 1;
        }
        let o = &offsets[start..end];
        let l = &lines[start..end];
        tx.execute(&q.insert_lines, &[&k, &o, &l]).map_err(db(at))?;
        start = end;
    }
    Ok(())
}

impl KeyedBackend for NativePostgresStorage {
    type Driver = postgres::Error;

    fn state(&self) -> &KeyedState {
        &self.inner.base.state
    }

    fn stat_key(&self, at: At<'_>, k: &str) -> Result<Option<(u64, i64)>, StoreError> {
        self.inner.base.stat_key(at, k)
    }

    fn newest_under(&self, at: At<'_>, prefix: &str) -> Result<Option<i64>, StoreError> {
        self.inner.base.newest_under(at, prefix)
    }

    fn keys_under(&self, at: At<'_>, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.inner.base.keys_under(at, prefix)
    }

    fn stats_under(&self, at: At<'_>, prefix: &str) -> Result<Vec<(String, u64, i64)>, StoreError> {
        self.inner.base.stats_under(at, prefix)
    }

    /// Reads, in one snapshot, the title metadata and every byte of the file, row by row
    /// (a large file never passes through one value).
    fn read_row(&self, at: At<'_>, k: &str) -> Result<Option<Row>, StoreError> {
        let mut c = self.client(at)?;
        let mut tx = c
            .client()
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(db(at))?;
        let Some(row) = tx.query_opt(&self.inner.q.read_meta, &[&k]).map_err(db(at))? else { return Ok(None) };
        let meta = meta_at(&row, 1).map_err(db(at))?;
        let mtime_ms: i64 = row.try_get(4).map_err(db(at))?;
        let rows = tx.query(&self.inner.q.read_lines, &[&k]).map_err(db(at))?;
        let mut content = Vec::new();
        for r in rows {
            let line: &[u8] = r.try_get(0).map_err(db(at))?;
            content.extend_from_slice(line);
        }
        tx.commit().map_err(db(at))?;
        Ok(Some(Row { content, meta, mtime_ms }))
    }

    /// One statement: one round trip, and one snapshot for the size and both windows. The
    /// head is read with at least the title slot's 256 bytes, which are the overlay's.
    fn read_windows(&self, at: At<'_>, k: &str, prefix: u64, suffix: u64) -> Result<Option<Windows>, StoreError> {
        let want_head = i64::try_from(prefix.max(256)).unwrap_or(i64::MAX);
        let want_tail = i64::try_from(suffix).unwrap_or(i64::MAX);
        let mut c = self.client(at)?;
        let row = c.client().query_opt(&self.inner.q.slices, &[&k, &want_head, &want_tail]).map_err(db(at))?;
        let Some(row) = row else { return Ok(None) };
        let get = |row: &postgres::Row| -> Result<_, postgres::Error> {
            let size: i64 = row.try_get(0)?;
            let meta = meta_at(row, 1)?;
            let mtime_ms: i64 = row.try_get(4)?;
            let head: Option<Vec<u8>> = row.try_get(5)?;
            let start: i64 = row.try_get(6)?;
            let tail: Option<Vec<u8>> = row.try_get(7)?;
            Ok((size.max(0) as u64, meta, mtime_ms, head.unwrap_or_default(), start.max(0) as u64, tail))
        };
        let (size, meta, mtime_ms, first, start, tail) = get(&row).map_err(db(at))?;
        let mut head = first.clone();
        head.truncate(usize::try_from(prefix.min(size)).unwrap_or(usize::MAX));
        // The rows from the one holding byte `size - suffix`: cut to the last `suffix` bytes.
        let mut tail = tail.unwrap_or_default();
        if suffix > 0 && size > 0 {
            let skip = usize::try_from(size.saturating_sub(suffix).saturating_sub(start)).unwrap_or(usize::MAX);
            tail.drain(..skip.min(tail.len()));
            tail.truncate(usize::try_from(suffix.min(size)).unwrap_or(usize::MAX));
        } else {
            tail.clear();
        }
        Ok(Some(Windows { head, tail, size, meta, first: Some(first), mtime_ms }))
    }

    /// One transaction that locks the metadata row, checks the size, and writes the
    /// metadata and the lines.
    fn put(
        &self,
        at: At<'_>,
        k: &str,
        body: Body<'_>,
        meta: &TitleMeta,
        now: i64,
        how: Put,
    ) -> Result<Cas, StoreError> {
        let n = len_i64(at, body.len())?;
        let q = &self.inner.q;
        let mut c = self.client(at)?;
        let mut tx = c.client().transaction().map_err(db(at))?;
        let found = match tx.query_opt(&q.size_for_update, &[&k]).map_err(db(at))? {
            Some(row) => Some(row.try_get::<_, i64>(0).map_err(db(at))?.max(0) as u64),
            None => None,
        };
        let refused = match (how, found) {
            (Put::Upsert, _) => false,
            (Put::Create, found) => found.is_some(),
            (Put::IfSize(n), found) => found != Some(n),
        };
        if refused {
            return Ok(Cas::RefusedAt(found));
        }
        let args: [&(dyn postgres::types::ToSql + Sync); 6] =
            [&k, &n, &now, &meta.title, &meta.source, &meta.updated_at];
        if found.is_some() {
            tx.execute(&q.set_meta, &args).map_err(db(at))?;
            tx.execute(&q.delete_lines, &[&k]).map_err(db(at))?;
        } else if tx.execute(&q.create_meta_if_missing, &args).map_err(db(at))? == 0 {
            // A concurrent creator inserted first.
            return Ok(Cas::Refused);
        }
        insert_lines(&mut tx, q, at, k, 0, body.as_bytes())?;
        tx.commit().map_err(db(at))?;
        Ok(Cas::Done)
    }

    /// One statement that grows the metadata row's size and inserts the line at the old
    /// size: an append costs the same whatever the session's size.
    fn append_key(&self, at: At<'_>, k: &str, body: Body<'_>, now: i64) -> Result<(), StoreError> {
        let n = len_i64(at, body.len())?;
        let mut c = self.client(at)?;
        c.client().execute(&self.inner.q.append, &[&k, &body.as_bytes(), &n, &now]).map_err(db(at))?;
        Ok(())
    }

    /// [`KeyedBackend::append_key`]'s statement with `WHERE size = expected`.
    fn append_at(&self, at: At<'_>, k: &str, body: Body<'_>, now: i64, size: u64) -> Result<Cas, StoreError> {
        let n = len_i64(at, body.len())?;
        let size = i64::try_from(size).unwrap_or(-1);
        let mut c = self.client(at)?;
        let row = c
            .client()
            .query_one(&self.inner.q.append_if_size, &[&k, &body.as_bytes(), &n, &now, &size])
            .map_err(db(at))?;
        Ok(if row.try_get::<_, i64>(0).map_err(db(at))? == 1 { Cas::Done } else { Cas::Refused })
    }

    /// Drops the rows past `len` and cuts the one it falls in; a longer length adds zeros.
    fn truncate_key(&self, at: At<'_>, k: &str, len: u64, now: i64) -> Result<bool, StoreError> {
        let n = len_i64(at, len)?;
        let q = &self.inner.q;
        let mut c = self.client(at)?;
        let mut tx = c.client().transaction().map_err(db(at))?;
        let Some(row) = tx.query_opt(&q.size_for_update, &[&k]).map_err(db(at))? else { return Ok(false) };
        let size: i64 = row.try_get(0).map_err(db(at))?;
        if n < size {
            tx.execute(&q.cut_after, &[&k, &n]).map_err(db(at))?;
            tx.execute(&q.cut_line, &[&k, &n]).map_err(db(at))?;
        } else if n > size {
            let zeros = vec![0u8; usize::try_from(n - size).unwrap_or(0)];
            insert_lines(&mut tx, q, at, k, size, &zeros)?;
        }
        tx.execute(&q.resize, &[&k, &n, &now]).map_err(db(at))?;
        tx.commit().map_err(db(at))?;
        Ok(true)
    }

    fn rename_key(&self, at: At<'_>, from: &str, to: &str, now: i64) -> Result<bool, StoreError> {
        let q = &self.inner.q;
        let mut c = self.client(at)?;
        let mut tx = c.client().transaction().map_err(db(at))?;
        tx.execute(&q.delete_meta, &[&to]).map_err(db(at))?;
        tx.execute(&q.delete_lines, &[&to]).map_err(db(at))?;
        if tx.execute(&q.rename_meta, &[&to, &now, &from]).map_err(db(at))? == 0 {
            return Ok(false);
        }
        tx.execute(&q.rename_lines, &[&to, &from]).map_err(db(at))?;
        tx.commit().map_err(db(at))?;
        Ok(true)
    }

    fn delete_key(&self, at: At<'_>, k: &str) -> Result<bool, StoreError> {
        let mut c = self.client(at)?;
        let mut tx = c.client().transaction().map_err(db(at))?;
        if tx.execute(&self.inner.q.delete_meta, &[&k]).map_err(db(at))? == 0 {
            return Ok(false);
        }
        tx.execute(&self.inner.q.delete_lines, &[&k]).map_err(db(at))?;
        tx.commit().map_err(db(at))?;
        Ok(true)
    }

    fn delete_doomed(&self, at: At<'_>, doomed: Doomed<'_>) -> Result<(), StoreError> {
        let q = &self.inner.q;
        let mut c = self.client(at)?;
        let mut tx = c.client().transaction().map_err(db(at))?;
        for k in std::iter::once(doomed.key).chain(doomed.backups.iter().map(String::as_str)) {
            tx.execute(&q.delete_meta, &[&k]).map_err(db(at))?;
            tx.execute(&q.delete_lines, &[&k]).map_err(db(at))?;
        }
        if let Some(prefix) = doomed.artifacts {
            let gone = At::new(Op::RemoveDir, at.path);
            tx.execute(&q.delete_meta_prefix, &[&prefix]).map_err(db(gone))?;
            tx.execute(&q.delete_lines_prefix, &[&prefix]).map_err(db(gone))?;
        }
        tx.commit().map_err(db(at))
    }

    fn touch_empty(&self, at: At<'_>, k: &str, now: i64) -> Result<(), StoreError> {
        let mut c = self.client(at)?;
        c.client().execute(&self.inner.q.create_meta, &[&k, &now]).map_err(db(at))?;
        Ok(())
    }

    fn set_title(&self, at: At<'_>, k: &str, meta: &TitleMeta, now: i64) -> Result<bool, StoreError> {
        self.inner.base.set_title(at, k, meta, now)
    }

    fn lock_key(&self, at: At<'_>, k: &str, wait: LockWait) -> Result<SessionLock, StoreError> {
        self.inner.base.lock(at, wait, format!("{}:{k}", self.inner.q.meta_t))
    }

    /// `LISTEN`s for the metadata table's notifications (see the crate docs).
    fn watch_key(&self, at: At<'_>, k: &str) -> Result<Option<Box<dyn Watch>>, StoreError> {
        self.inner.base.watch(at, k, &self.inner.q.meta_t).map(Some)
    }

    /// Notes kept in the metadata row, against its `xmin`.
    fn read_notes(&self, paths: &[PathBuf], kind: &str) -> Result<Option<Vec<Option<Note>>>, StoreError> {
        if self.inner.base.state.is_read_only() {
            // The note columns may be missing, and no note could be kept: none are read.
            return Ok(None);
        }
        let Some(first) = paths.first() else { return Ok(Some(Vec::new())) };
        let at = At::new(Op::Read, first);
        let keys = paths.iter().map(|p| ServerError::file_key(at.op, p)).collect::<Result<Vec<_>, _>>()?;
        let mut c = self.client(at)?;
        let rows = c.client().query(&self.inner.q.read_notes, &[&keys, &kind]).map_err(db(at))?;
        let mut out: Vec<Option<Note>> = vec![None; paths.len()];
        for row in rows {
            let i: i64 = row.try_get(0).map_err(db(at))?;
            let version: String = row.try_get(1).map_err(db(at))?;
            let bytes: Option<Vec<u8>> = row.try_get(2).map_err(db(at))?;
            let (Some(slot), Ok(version)) = (usize::try_from(i - 1).ok().and_then(|i| out.get_mut(i)), version.parse())
            else {
                continue;
            };
            *slot = Some(Note { version, bytes });
        }
        Ok(Some(out))
    }

    fn write_notes(&self, kind: &str, notes: &[(PathBuf, u64, Vec<u8>)]) -> Result<(), StoreError> {
        if self.inner.base.state.is_read_only() {
            // Notes are derived data, and a read-only storage keeps none (as a storage
            // without notes, it ignores the call).
            return Ok(());
        }
        let Some((first, _, _)) = notes.first() else { return Ok(()) };
        let at = At::new(Op::Write, first);
        let keys = notes.iter().map(|(p, _, _)| ServerError::file_key(at.op, p)).collect::<Result<Vec<_>, _>>()?;
        let versions: Vec<String> = notes.iter().map(|(_, v, _)| v.to_string()).collect();
        let bytes: Vec<&[u8]> = notes.iter().map(|(_, _, b)| b.as_slice()).collect();
        let mut c = self.client(at)?;
        c.client().execute(&self.inner.q.write_notes, &[&kind, &keys, &versions, &bytes]).map_err(db(at))?;
        Ok(())
    }
}
