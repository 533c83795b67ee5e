//! A corrupt `history.db` is preserved next to itself and replaced, and the caller
//! is told.

use session_history::{HistoryScope, HistoryStore, OpenNotice};

use crate::{TempDir, TestResult, fixed};

fn quarantined(notices: &[OpenNotice]) -> Option<(&std::path::Path, &[std::path::PathBuf])> {
    notices.iter().find_map(|n| match n {
        OpenNotice::Quarantined { backup, files, .. } => Some((backup.as_path(), files.as_slice())),
        _ => None,
    })
}

#[test]
fn a_file_that_is_not_a_database_is_moved_aside() -> TestResult {
    let dir = TempDir::new("notadb");
    let garbage = b"this is not an SQLite database, it is a shopping list\n".repeat(200);
    fs_err::write(dir.join("history.db"), &garbage)?;
    fs_err::write(dir.path().join("history.db-wal"), b"stale wal")?;

    let opened = HistoryStore::open(dir.join("history.db"), fixed(1))?;
    let (backup, files) = quarantined(&opened.notices).ok_or("no quarantine notice")?;
    let name = backup.file_name().and_then(|n| n.to_str()).ok_or("bad name")?;
    assert!(name.starts_with("history.db.corrupt-"), "{name}");
    // <ms>-<uuid>: 13 digits (until 2286), then 36 characters.
    let rest = &name["history.db.corrupt-".len()..];
    let (ms, uuid) = rest.split_once('-').ok_or("no uuid")?;
    assert!(ms.chars().all(|c| c.is_ascii_digit()) && uuid.len() == 36, "{rest}");
    assert_eq!(fs_err::read(backup)?, garbage);
    assert_eq!(files[0], backup);
    let wal_backup = std::path::PathBuf::from(format!("{}-wal", backup.display()));
    assert!(files.contains(&wal_backup), "{files:?}");
    assert_eq!(fs_err::read(&wal_backup)?, b"stale wal");

    // The fresh database works.
    opened.store.add("after recovery", None, None)?;
    assert_eq!(opened.store.search("recovery", 5, &HistoryScope::Global)?.len(), 1);
    Ok(())
}

#[test]
fn a_damaged_schema_page_is_moved_aside() -> TestResult {
    let dir = TempDir::new("corrupt");
    {
        let opened = HistoryStore::open(dir.join("history.db"), fixed(1))?;
        for i in 0..50 {
            opened.store.add(&format!("prompt number {i}"), None, None)?;
        }
        opened.store.close()?;
    }
    // Overwrite the schema b-tree on page 1 after the 100-byte file header.
    let mut bytes = fs_err::read(dir.join("history.db"))?;
    let end = bytes.len().min(4096);
    for b in &mut bytes[100..end] {
        *b = 0xA5;
    }
    fs_err::write(dir.join("history.db"), &bytes)?;

    let opened = HistoryStore::open(dir.join("history.db"), fixed(2))?;
    let (backup, _) = quarantined(&opened.notices).ok_or("no quarantine notice")?;
    assert_eq!(fs_err::read(backup)?, bytes);
    assert!(opened.store.is_empty()?);
    Ok(())
}

#[test]
fn an_unopenable_path_is_an_error_not_a_quarantine() -> TestResult {
    let dir = TempDir::new("isdir");
    // The database path is a directory: SQLite cannot open it, nothing is corrupt.
    fs_err::create_dir_all(dir.join("history.db"))?;
    let err = HistoryStore::open(dir.join("history.db"), fixed(1)).err().ok_or("open succeeded")?;
    assert!(!err.is_corrupt(), "{err}");
    assert!(err.to_string().contains("history.db"), "{err}");
    assert!(fs_err::read_dir(dir.path())?.count() == 1);
    Ok(())
}
