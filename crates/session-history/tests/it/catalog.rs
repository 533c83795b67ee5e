//! The search catalog's file (`Catalog::open`): created private, never anything but a
//! catalog taken for one, never written through a link.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use rusqlite::Connection;
use session_history::{CATALOG_APPLICATION_ID, Catalog, CatalogDoc, CatalogFile, HistoryError, NotACatalog};

use crate::TempDir;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn mode(path: &Path) -> Result<u32> {
    Ok(fs_err::symlink_metadata(path)?.permissions().mode() & 0o777)
}

fn pragma(path: &Path, name: &str) -> Result<i64> {
    Ok(Connection::open(path)?.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))?)
}

/// Indexes one entry and finds it again.
fn use_it(catalog: &mut Catalog) -> Result<()> {
    let file = CatalogFile {
        path: "/s/a.jsonl".into(),
        agent: "pi".into(),
        size: 1,
        mtime_ns: 1,
        ino: None,
        dev: None,
        indexed_len: 1,
        head_hash: 1,
        tail_hash: 1,
        session_id: None,
        cwd: None,
        name: None,
    };
    let doc = CatalogDoc {
        entry_id: Some("e1".into()),
        offset: 0,
        len: 1,
        timestamp: None,
        kind: "user".into(),
        text: "parser".into(),
    };
    let w = catalog.writer()?;
    w.replace(&file, &[doc])?;
    w.commit()?;
    assert_eq!(catalog.search("parser", 10, &[])?.len(), 1);
    Ok(())
}

/// Returns what `Catalog::open` refused `path` as.
fn refused(path: &Path) -> Result<NotACatalog> {
    match Catalog::open(path) {
        Err(HistoryError::NotACatalog { found, .. }) => Ok(found),
        Err(e) => Err(format!("another error: {e}").into()),
        Ok(_) => Err(format!("{} was taken for a catalog", path.display()).into()),
    }
}

#[test]
fn a_new_catalog_is_private_and_says_it_is_one() -> Result<()> {
    let tmp = TempDir::new("catalog-new");
    let path = tmp.path().join("cache/deeper/search.db");
    let mut catalog = Catalog::open(&path)?;
    use_it(&mut catalog)?;
    assert_eq!(mode(&tmp.path().join("cache"))?, 0o700);
    assert_eq!(mode(&tmp.path().join("cache/deeper"))?, 0o700);
    for file in ["search.db", "search.db-wal", "search.db-shm"] {
        let p = tmp.path().join("cache/deeper").join(file);
        if p.exists() {
            assert_eq!(mode(&p)?, 0o600, "{file}");
        }
    }
    drop(catalog);
    assert_eq!(pragma(&path, "application_id")?, i64::from(CATALOG_APPLICATION_ID));
    // Opened again, it is the same catalog.
    assert_eq!(Catalog::open(&path)?.search("parser", 10, &[])?.len(), 1);
    Ok(())
}

/// A link planted at the catalog's path is refused, never followed: the file it names
/// is neither created nor changed.
#[test]
fn a_link_at_the_catalog_path_is_not_followed() -> Result<()> {
    let tmp = TempDir::new("catalog-link");
    let dangling = tmp.path().join("chosen.db");
    let link = tmp.path().join("search.db");
    std::os::unix::fs::symlink(&dangling, &link)?;
    assert_eq!(refused(&link)?, NotACatalog::Link);
    assert!(!dangling.exists(), "no database made where the link points");
    let theirs = tmp.path().join("theirs.db");
    Connection::open(&theirs)?.execute_batch("CREATE TABLE notes(x); PRAGMA user_version = 7;")?;
    let before = fs_err::read(&theirs)?;
    fs_err::remove_file(&link)?;
    std::os::unix::fs::symlink(&theirs, &link)?;
    assert_eq!(refused(&link)?, NotACatalog::Link);
    assert_eq!(fs_err::read(&theirs)?, before, "the linked database is unchanged");
    Ok(())
}

/// Another program's database at the catalog's path is refused and left byte for byte
/// as it was: no table added, its `user_version` kept.
#[test]
fn another_programs_database_is_refused_and_unchanged() -> Result<()> {
    let tmp = TempDir::new("catalog-foreign");
    let cases: [(&str, &str); 4] = [
        ("tables.db", "CREATE TABLE notes(x); PRAGMA user_version = 7;"),
        ("files.db", "CREATE TABLE files(id INTEGER PRIMARY KEY, path TEXT); PRAGMA user_version = 0;"),
        ("appid.db", "PRAGMA application_id = 1234; PRAGMA user_version = 3;"),
        ("version.db", "PRAGMA user_version = 9;"),
    ];
    for (name, sql) in cases {
        let path = tmp.path().join(name);
        Connection::open(&path)?.execute_batch(sql)?;
        let before = fs_err::read(&path)?;
        let found = refused(&path)?;
        match name {
            "tables.db" => assert_eq!(found, NotACatalog::ForeignTables(vec!["notes".into()])),
            "files.db" => assert_eq!(found, NotACatalog::UserVersion(0)),
            "appid.db" => assert_eq!(found, NotACatalog::ApplicationId(1234)),
            _ => assert_eq!(found, NotACatalog::UserVersion(9)),
        }
        assert_eq!(fs_err::read(&path)?, before, "{name} unchanged");
        for companion in ["-wal", "-shm", "-journal"] {
            assert!(!tmp.path().join(format!("{name}{companion}")).exists(), "{name}{companion}");
        }
    }
    let version_of = |name: &str| pragma(&tmp.path().join(name), "user_version");
    assert_eq!(version_of("tables.db")?, 7);
    // Text that is no database at all, and a directory.
    let text = tmp.path().join("text.db");
    fs_err::write(&text, "not a database, but someone's file\n".repeat(20))?;
    assert_eq!(refused(&text)?, NotACatalog::NotADatabase);
    assert_eq!(fs_err::read_to_string(&text)?, "not a database, but someone's file\n".repeat(20));
    fs_err::create_dir(tmp.path().join("dir.db"))?;
    assert_eq!(refused(&tmp.path().join("dir.db"))?, NotACatalog::NotAFile);
    Ok(())
}

/// A catalog of an older version (no `application_id`, readable by others) is taken,
/// made private and marked as a catalog; a damaged catalog is rebuilt.
#[test]
fn older_and_damaged_catalogs_are_taken_and_repaired() -> Result<()> {
    let tmp = TempDir::new("catalog-old");
    let path = tmp.path().join("search.db");
    let mut catalog = Catalog::open(&path)?;
    use_it(&mut catalog)?;
    drop(catalog);
    Connection::open(&path)?.execute_batch("PRAGMA application_id = 0;")?;
    fs_err::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
    let catalog = Catalog::open(&path)?;
    assert_eq!(catalog.search("parser", 10, &[])?.len(), 1, "its content is kept");
    drop(catalog);
    assert_eq!(mode(&path)?, 0o600);
    assert_eq!(pragma(&path, "application_id")?, i64::from(CATALOG_APPLICATION_ID));
    // Damaged past its header: removed and started afresh.
    let mut bytes = fs_err::read(&path)?;
    for b in &mut bytes[100..] {
        *b = 0xA5;
    }
    fs_err::write(&path, &bytes)?;
    let mut catalog = Catalog::open(&path)?;
    assert!(catalog.search("parser", 10, &[])?.is_empty());
    use_it(&mut catalog)?;
    Ok(())
}

/// The full-text index gathers 8 MiB of new data in memory before it writes a segment:
/// a catalog made before that was its option keeps its content and takes the option
/// when opened, one row of it however often it is opened.
#[test]
fn a_catalog_takes_the_index_option_of_its_version() -> Result<()> {
    let tmp = TempDir::new("catalog-hashsize");
    let path = tmp.path().join("search.db");
    let hashsize = |path: &Path| -> Result<Vec<(String, i64)>> {
        let conn = Connection::open(path)?;
        let mut stmt = conn.prepare("SELECT k, v FROM docs_fts_config WHERE k = 'hashsize'")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    };
    let mut catalog = Catalog::open(&path)?;
    use_it(&mut catalog)?;
    drop(catalog);
    let expected = vec![("hashsize".to_owned(), 8 * 1024 * 1024)];
    assert_eq!(hashsize(&path)?, expected);
    Connection::open(&path)?.execute_batch("DELETE FROM docs_fts_config WHERE k = 'hashsize'")?;
    for _ in 0..2 {
        let catalog = Catalog::open(&path)?;
        assert_eq!(catalog.search("parser", 10, &[])?.len(), 1, "its content is kept");
        drop(catalog);
        assert_eq!(hashsize(&path)?, expected);
    }
    Ok(())
}
