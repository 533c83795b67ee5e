//! `--store URL`: which storage every command reads and writes, parsed from a URL and
//! opened once per process.
//!
//! | `--store` | storage |
//! |---|---|
//! | absent, or a path (`/`, `.`, `~/x`) | the file system, paths as given |
//! | `postgres://…`, `postgresql://…` | omp's `omp_session_files` table (`?table=NAME` for another) |
//! | `postgres+native://…`, `postgresql+native://…` | the native one-row-per-line tables (`?stem=NAME`, default `session`) |
//! | `redis://…` | omp's Redis keys under `omp:sessions:` (`?prefix=P` for another) |
//! | `sqlite:///path/to/db` | omp's `omp_session_files` table in that SQLite file (`?table=NAME` for another) |
//! | `mysql://…`, `mariadb://…` | omp's `omp_session_files` table on MySQL or MariaDB (`?table=NAME` for another) |
//! | `s3://bucket/prefix?endpoint=…` | heads over segments in an S3-compatible bucket (`docs/format.md`, "Object storage layout"); every parameter is `session_store_s3`'s (`endpoint`, `region`, `allow_http`, …), credentials from the AWS environment variables |
//!
//! `--allow-unconditional` lets the object storage write on a store that ignores
//! conditional writes (Garage), each head update under a lock object.
//!
//! The `table`, `stem` and `prefix` parameters are this command's; every other part of
//! the URL goes to the driver as it is (`postgres:///db?host=/var/run/postgresql` reaches
//! a Unix socket). Sessions keep their paths on a server: a path is the key, so
//! `session ls --store URL` lists the same buckets the agent's directories would hold.
//!
//! A command that only reads, and every dry run, opens the SQL storages read-only: they
//! create no table (nor SQLite database file) and add no column, read a missing table as
//! empty, and refuse any write. [`access`] is the one place that says which commands
//! write to which storage.
//!
//! [`SourcePath`] splits `pull`'s `URL/PATH` argument: after the host, the first segment
//! is the database (PostgreSQL: its name; Redis: its number) and the rest is the path.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use session::store::{FileStorage, Storage};

use crate::args::{Command, Global, TrashCommand};
use crate::commands::Result;

/// What a command does to a storage: read it only, or write it too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Only read: a SQL storage is opened read-only, creates nothing and refuses writes.
    Read,
    /// Read and write: a SQL storage creates its table when it is missing.
    Write,
}

impl Access {
    /// `Write` when `writes`, else `Read`.
    fn when(writes: bool) -> Access {
        if writes { Access::Write } else { Access::Read }
    }
}

/// What `command` does to the `--store` storage and to the storage its own URL names
/// (`push --to`, `pull`'s source, `sync --to`), in that order: the one place that
/// decides which commands write. Inspecting commands, listings and every dry run only
/// read; `--as-agent` writes as the agent would.
pub(crate) fn access(g: &Global, command: &Command) -> (Access, Access) {
    use Command::*;
    let store = match command {
        _ if g.as_agent => true,
        Append { .. } | Extract { .. } | Fork { .. } | Rename { .. } | Move { .. } | Label { .. } => true,
        Migrate { .. } | Repair { .. } | Merge { .. } | Import { .. } | Pick { .. } => true,
        Pin { .. } | Unpin { .. } | Archive { .. } | Unarchive { .. } => true,
        // Without --yes, rm asks on the terminal and then removes.
        Rm { .. } => true,
        Relocate { yes, .. } | Prune { yes, .. } | Gc { yes, .. } => *yes,
        Trash { command: TrashCommand::Restore { .. } } => true,
        Trash { command: TrashCommand::Empty { yes, .. } } => *yes,
        Fsck { repair, .. } => *repair,
        Sync { dry_run, .. } => !dry_run,
        // `push` reads from it, `pull` copies from it to the file system.
        Push { .. } | Pull { .. } => false,
        Info { .. } | Entries { .. } | Tail { .. } | Tree { .. } | Context { .. } | Projection { .. } => false,
        Branch { .. } | Check { .. } | Du { .. } | Usage { .. } | Export { .. } | Stats { .. } | Ls { .. } => false,
        Resume { .. } | Search { .. } | Continue { .. } | History { .. } | Completions { .. } | Mcp => false,
        Trash { command: TrashCommand::List } => false,
    };
    let named = match command {
        Push { .. } => true,
        Sync { dry_run, .. } => !dry_run,
        _ => false,
    };
    (Access::when(store), Access::when(named))
}

/// A parsed `--store` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StoreUrl {
    /// The file system.
    Files,
    /// omp's table on PostgreSQL: the driver's URL and the table.
    Postgres {
        /// The URL without this command's parameters.
        conn: String,
        /// `?table=`, else `omp_session_files`.
        table: Option<String>,
    },
    /// The native tables on PostgreSQL.
    PostgresNative {
        /// The URL without this command's parameters, scheme `postgres://`.
        conn: String,
        /// `?stem=`, else `session`.
        stem: Option<String>,
    },
    /// omp's keys on Redis.
    Redis {
        /// The URL without this command's parameters.
        url: String,
        /// `?prefix=`, else `omp:sessions:`.
        prefix: Option<String>,
    },
    /// omp's table on MySQL or MariaDB.
    Mysql {
        /// The URL without this command's parameters, scheme `mysql://`.
        url: String,
        /// `?table=`, else `omp_session_files`.
        table: Option<String>,
    },
    /// Heads over segments in an S3-compatible bucket.
    S3 {
        /// The whole `s3://bucket/prefix?…` URL, for `S3Storage::from_url`.
        url: String,
    },
    /// omp's table in a SQLite database file.
    Sqlite {
        /// The database file (the URL's path, percent-decoded).
        db: PathBuf,
        /// `?table=`, else `omp_session_files`.
        table: Option<String>,
    },
}

/// Returns the scheme of `s` when it has one (`name://`), lowercased.
fn scheme(s: &str) -> Option<String> {
    let (scheme, _) = s.split_once("://")?;
    let ok = !scheme.is_empty()
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic());
    ok.then(|| scheme.to_ascii_lowercase())
}

/// Removes the query parameter `name` from `url`, returning the URL and its value.
fn take_param(url: &str, name: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else { return (url.to_owned(), None) };
    let mut value = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.split_once('=') {
            Some((k, v)) if k == name => {
                value = Some(percent_decode(v));
                false
            }
            _ => !kv.is_empty(),
        })
        .collect();
    let url = if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) };
    (url, value)
}

/// Decodes `%XX` escapes (invalid ones are kept as they are).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (b.get(i + 1).and_then(|c| hex(*c)), b.get(i + 2).and_then(|c| hex(*c)))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl StoreUrl {
    /// Parses a `--store` value; a value without a scheme is a path on the file system.
    pub(crate) fn parse(s: &str) -> Result<StoreUrl> {
        let Some(scheme) = scheme(s) else { return Ok(StoreUrl::Files) };
        let rest = &s[scheme.len() + 3..];
        match scheme.as_str() {
            "postgres" | "postgresql" => {
                let (conn, table) = take_param(s, "table");
                Ok(StoreUrl::Postgres { conn, table })
            }
            "postgres+native" | "postgresql+native" => {
                let (conn, stem) = take_param(&format!("postgres://{rest}"), "stem");
                Ok(StoreUrl::PostgresNative { conn, stem })
            }
            "redis" => {
                let (url, prefix) = take_param(s, "prefix");
                Ok(StoreUrl::Redis { url, prefix })
            }
            "mysql" | "mariadb" => {
                let (url, table) = take_param(&format!("mysql://{rest}"), "table");
                Ok(StoreUrl::Mysql { url, table })
            }
            "sqlite" => {
                let (url, table) = take_param(rest, "table");
                // `sqlite:///abs/db` and `sqlite://localhost/abs/db` name /abs/db.
                let path = url.strip_prefix("localhost").unwrap_or(&url);
                if path.is_empty() {
                    return Err("sqlite:// needs the database file: sqlite:///path/to/sessions.db".into());
                }
                Ok(StoreUrl::Sqlite { db: PathBuf::from(percent_decode(path)), table })
            }
            "s3" => Ok(StoreUrl::S3 { url: s.to_owned() }),
            "file" => Ok(StoreUrl::Files),
            other => Err(format!(
                "unknown store {other}://; use postgres://, postgres+native://, redis://, mysql://, sqlite://, s3:// or a directory"
            )
            .into()),
        }
    }

    /// Connects to the storage, read-only for [`Access::Read`] (the SQL storages; the
    /// file system, Redis and object storage have no schema to create).
    pub(crate) fn open(&self, access: Access) -> Result<Arc<dyn Storage>> {
        let read_only = access == Access::Read;
        match self {
            StoreUrl::Files => Ok(Arc::new(FileStorage::new())),
            StoreUrl::Postgres { conn, table } => postgres(conn, table.as_deref(), read_only),
            StoreUrl::PostgresNative { conn, stem } => postgres_native(conn, stem.as_deref(), read_only),
            StoreUrl::Redis { url, prefix } => redis(url, prefix.as_deref()),
            StoreUrl::Sqlite { db, table } => sqlite(db, table.as_deref(), read_only),
            StoreUrl::Mysql { url, table } => mysql(url, table.as_deref(), read_only),
            StoreUrl::S3 { url } => s3(url, ALLOW_UNCONDITIONAL.load(Ordering::Relaxed)),
        }
    }

    /// Returns whether this is the file system.
    pub(crate) fn is_files(&self) -> bool {
        *self == StoreUrl::Files
    }
}

#[cfg(feature = "postgres")]
fn postgres(conn: &str, table: Option<&str>, read_only: bool) -> Result<Arc<dyn Storage>> {
    use session_store_postgres::{PostgresOptions, PostgresStorage};
    let options = table.map_or_else(PostgresOptions::default, |t| PostgresOptions::default().table(t));
    Ok(Arc::new(PostgresStorage::connect_with(conn, options.read_only(read_only))?))
}

#[cfg(feature = "postgres")]
fn postgres_native(conn: &str, stem: Option<&str>, read_only: bool) -> Result<Arc<dyn Storage>> {
    use session_store_postgres::{DEFAULT_STEM, NativePostgresOptions, NativePostgresStorage};
    let options = NativePostgresOptions::default().stem(stem.unwrap_or(DEFAULT_STEM)).read_only(read_only);
    Ok(Arc::new(NativePostgresStorage::connect_with(conn, options)?))
}

#[cfg(not(feature = "postgres"))]
fn postgres(_: &str, _: Option<&str>, _: bool) -> Result<Arc<dyn Storage>> {
    Err(without("postgres"))
}

#[cfg(not(feature = "postgres"))]
fn postgres_native(_: &str, _: Option<&str>, _: bool) -> Result<Arc<dyn Storage>> {
    Err(without("postgres"))
}

#[cfg(feature = "redis")]
fn redis(url: &str, prefix: Option<&str>) -> Result<Arc<dyn Storage>> {
    use session_store_redis::{DEFAULT_PREFIX, RedisStorage};
    Ok(Arc::new(RedisStorage::connect_with_prefix(url, prefix.unwrap_or(DEFAULT_PREFIX))?))
}

#[cfg(not(feature = "redis"))]
fn redis(_: &str, _: Option<&str>) -> Result<Arc<dyn Storage>> {
    Err(without("redis"))
}

#[cfg(feature = "sqlite")]
fn sqlite(db: &Path, table: Option<&str>, read_only: bool) -> Result<Arc<dyn Storage>> {
    use session_store_sqlite::{SqliteOptions, SqliteStorage};
    let options = table.map_or_else(SqliteOptions::default, |t| SqliteOptions::default().table(t));
    Ok(Arc::new(SqliteStorage::open_with(db, options.read_only(read_only))?))
}

#[cfg(not(feature = "sqlite"))]
fn sqlite(_: &Path, _: Option<&str>, _: bool) -> Result<Arc<dyn Storage>> {
    Err(without("sqlite"))
}

#[cfg(feature = "mysql")]
fn mysql(url: &str, table: Option<&str>, read_only: bool) -> Result<Arc<dyn Storage>> {
    use session_store_mysql::{MysqlOptions, MysqlStorage};
    let options = table.map_or_else(MysqlOptions::default, |t| MysqlOptions::default().table(t));
    Ok(Arc::new(MysqlStorage::connect_with(url, options.read_only(read_only))?))
}

#[cfg(not(feature = "mysql"))]
fn mysql(_: &str, _: Option<&str>, _: bool) -> Result<Arc<dyn Storage>> {
    Err(without("mysql"))
}

#[cfg(feature = "s3")]
fn s3(url: &str, allow_unconditional: bool) -> Result<Arc<dyn Storage>> {
    use session_store_s3::S3Storage;
    let url = match (allow_unconditional, url.contains('?')) {
        (false, _) => url.to_owned(),
        (true, true) => format!("{url}&allow_unconditional=true"),
        (true, false) => format!("{url}?allow_unconditional=true"),
    };
    Ok(Arc::new(S3Storage::from_url(&url)?))
}

#[cfg(not(feature = "s3"))]
fn s3(_: &str, _: bool) -> Result<Arc<dyn Storage>> {
    Err(without("s3"))
}

#[cfg(not(all(feature = "postgres", feature = "redis", feature = "sqlite", feature = "mysql", feature = "s3")))]
fn without(feature: &str) -> Box<dyn std::error::Error> {
    format!("this session was built without the `{feature}` feature; rebuild with `--features {feature}`").into()
}

/// `--allow-unconditional`: object storage writes on a store without conditional writes.
static ALLOW_UNCONDITIONAL: AtomicBool = AtomicBool::new(false);

/// The storage of this process (`--store`), set once by [`init`].
static STORAGE: OnceLock<(bool, Arc<dyn Storage>)> = OnceLock::new();

/// Whether the command writes to the storage its own URL names ([`access`]), set by
/// [`init`].
static NAMED_WRITES: AtomicBool = AtomicBool::new(false);

/// Opens the storage `--store` names, as [`access`] says `command` uses it; the commands
/// reach it through [`current`]. `--allow-unconditional` applies to it and to every
/// object storage a command opens.
pub(crate) fn init(g: &Global, command: &Command) -> Result<()> {
    ALLOW_UNCONDITIONAL.store(g.allow_unconditional, Ordering::Relaxed);
    let (store, named) = access(g, command);
    NAMED_WRITES.store(named == Access::Write, Ordering::Relaxed);
    let url = g.store.as_deref().map(StoreUrl::parse).transpose()?.unwrap_or(StoreUrl::Files);
    let storage = url.open(store)?;
    // A second call (tests of one process) keeps the first storage.
    let _ = STORAGE.set((url.is_files(), storage));
    Ok(())
}

/// Returns what the command does to the storage its own URL names (`push --to`,
/// `pull`'s source, `sync --to`), as [`access`] decided in [`init`].
pub(crate) fn named_access() -> Access {
    Access::when(NAMED_WRITES.load(Ordering::Relaxed))
}

/// Returns the storage of this process: `--store`'s, else the file system.
pub(crate) fn current() -> Arc<dyn Storage> {
    match STORAGE.get() {
        Some((_, s)) => s.clone(),
        None => Arc::new(FileStorage::new()),
    }
}

/// Returns whether the storage of this process is the file system.
pub(crate) fn on_files() -> bool {
    STORAGE.get().is_none_or(|(files, _)| *files)
}

/// `pull`'s source: a storage URL with the session's path after the database, or a
/// plain path in the `--store` storage.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SourcePath {
    /// Where the session is.
    pub(crate) store: Option<StoreUrl>,
    /// Its path there.
    pub(crate) path: PathBuf,
}

impl SourcePath {
    /// Splits `URL/PATH` (the database is the first path segment after the host) or
    /// takes a plain path.
    pub(crate) fn parse(s: &str) -> Result<SourcePath> {
        match scheme(s).as_deref() {
            None => return Ok(SourcePath { store: None, path: PathBuf::from(s) }),
            Some("sqlite") => {
                return Err(format!(
                    "{s}: a SQLite URL names the database file, not a session in it; \
                     write `session --store sqlite:///DB pull PATH --to DIR`"
                )
                .into());
            }
            Some(_) => {}
        }
        let scheme_end = s.find("://").map_or(0, |i| i + 3);
        let (before_query, query) = match s.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (s, None),
        };
        let after_host = before_query[scheme_end..]
            .find('/')
            .map(|i| scheme_end + i)
            .ok_or_else(|| format!("{s}: no path after the host; write URL/DATABASE/PATH"))?;
        let db_end = before_query[after_host + 1..]
            .find('/')
            .map(|i| after_host + 1 + i)
            .ok_or_else(|| format!("{s}: no session path after the database; write URL/DATABASE/PATH"))?;
        let path = percent_decode(&before_query[db_end..]);
        let url = match query {
            Some(q) => format!("{}?{q}", &before_query[..db_end]),
            None => before_query[..db_end].to_owned(),
        };
        Ok(SourcePath { store: Some(StoreUrl::parse(&url)?), path: PathBuf::from(path) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_backends() -> Result<()> {
        assert_eq!(StoreUrl::parse("/srv/sessions")?, StoreUrl::Files);
        assert_eq!(
            StoreUrl::parse("postgres://u@h/db?table=t&sslmode=disable")?,
            StoreUrl::Postgres { conn: "postgres://u@h/db?sslmode=disable".into(), table: Some("t".into()) }
        );
        assert_eq!(
            StoreUrl::parse("postgresql+native:///db?host=%2Fvar%2Frun%2Fpostgresql&stem=s")?,
            StoreUrl::PostgresNative {
                conn: "postgres:///db?host=%2Fvar%2Frun%2Fpostgresql".into(),
                stem: Some("s".into())
            }
        );
        assert_eq!(
            StoreUrl::parse("redis://127.0.0.1:6379/2?prefix=a%3Ab:")?,
            StoreUrl::Redis { url: "redis://127.0.0.1:6379/2".into(), prefix: Some("a:b:".into()) }
        );
        assert!(StoreUrl::parse("mongodb://h/db").is_err());
        assert_eq!(
            StoreUrl::parse("mariadb://root@127.0.0.1:3306/test?table=t")?,
            StoreUrl::Mysql { url: "mysql://root@127.0.0.1:3306/test".into(), table: Some("t".into()) }
        );
        assert_eq!(
            StoreUrl::parse("sqlite:///var/lib/s%20x.db?table=t")?,
            StoreUrl::Sqlite { db: "/var/lib/s x.db".into(), table: Some("t".into()) }
        );
        assert_eq!(StoreUrl::parse("sqlite://localhost/a.db")?, StoreUrl::Sqlite { db: "/a.db".into(), table: None });
        assert!(StoreUrl::parse("sqlite://").is_err());
        let s3 = "s3://b/team?endpoint=http://127.0.0.1:9100&allow_http=true";
        assert_eq!(StoreUrl::parse(s3)?, StoreUrl::S3 { url: s3.into() });
        assert!(SourcePath::parse("sqlite:///a.db/s.jsonl").is_err());
        Ok(())
    }

    #[test]
    fn reading_commands_and_dry_runs_only_read() -> Result<()> {
        use clap::Parser;
        let (r, w) = (Access::Read, Access::Write);
        for (line, expected) in [
            (&["ls", "--all"][..], (r, r)),
            (&["info", "f.jsonl"], (r, r)),
            (&["--as-agent", "info", "f.jsonl"], (w, r)),
            (&["fsck"], (r, r)),
            (&["fsck", "--repair"], (w, r)),
            (&["gc"], (r, r)),
            (&["gc", "--yes"], (w, r)),
            (&["prune", "--older-than", "1d"], (r, r)),
            (&["relocate", "a", "b", "--yes"], (w, r)),
            (&["trash", "empty"], (r, r)),
            (&["rename", "f.jsonl", "n"], (w, r)),
            (&["push", "f.jsonl", "--to", "postgres:///db"], (r, w)),
            (&["pull", "postgres:///db/f.jsonl", "--to", "."], (r, r)),
            (&["sync", "--to", "postgres:///db", "--dry-run"], (r, r)),
            (&["sync", "--to", "postgres:///db"], (w, w)),
        ] {
            let cli = crate::args::Cli::try_parse_from([&["session"][..], line].concat())?;
            let command = cli.command.ok_or("a command")?;
            assert_eq!(access(&cli.global, &command), expected, "{line:?}");
        }
        Ok(())
    }

    #[test]
    fn sources_split_after_the_database() -> Result<()> {
        let s = SourcePath::parse("redis://127.0.0.1:6379/0/home/me/s.jsonl?prefix=p:")?;
        assert_eq!(s.path, PathBuf::from("/home/me/s.jsonl"));
        assert_eq!(
            s.store,
            Some(StoreUrl::Redis { url: "redis://127.0.0.1:6379/0".into(), prefix: Some("p:".into()) })
        );
        let s = SourcePath::parse("postgres:///test/a/b.jsonl?host=/var/run/postgresql")?;
        assert_eq!(s.path, PathBuf::from("/a/b.jsonl"));
        assert_eq!(
            s.store,
            Some(StoreUrl::Postgres { conn: "postgres:///test?host=/var/run/postgresql".into(), table: None })
        );
        assert_eq!(SourcePath::parse("/x/y.jsonl")?, SourcePath { store: None, path: "/x/y.jsonl".into() });
        assert!(SourcePath::parse("redis://h:1/0").is_err());
        let s = SourcePath::parse("s3://b/team/home/me/s.jsonl?region=us-east-1")?;
        assert_eq!(s.path, PathBuf::from("/home/me/s.jsonl"));
        assert_eq!(s.store, Some(StoreUrl::S3 { url: "s3://b/team?region=us-east-1".into() }));
        Ok(())
    }
}
