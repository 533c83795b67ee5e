//! What the SQL storages' tests check of a read-only storage, as macros: the kit depends
//! on session-model only, so the storage's types are named where a macro expands, in a
//! test crate that depends on session-store. Each expands inside a test that returns a
//! `Result` whose error a `&str` converts into.

/// Asserts that `$storage`, read-only where the sessions' table does not exist, reads
/// every path as missing and refuses each write with an error `$refused` accepts and
/// whose message says what it cannot do.
#[macro_export]
macro_rules! assert_read_only_and_empty {
    ($storage:expr, $refused:expr) => {{
        use session_store::Storage as _;
        use session_store::{Durability, ExpectedSize, StoreError};
        let (s, p) = (&$storage, std::path::Path::new("/sessions/--w--/s.jsonl"));
        assert!(s.list(std::path::Path::new("/sessions/--w--"))?.is_empty());
        assert!(s.read_dir(std::path::Path::new("/"))?.is_empty());
        assert!(s.list_stats(std::path::Path::new("/sessions"))?.is_empty());
        assert_eq!(s.stat(p)?, None);
        assert!(!s.exists(p)?);
        assert!(matches!(s.read(p), Err(StoreError::NotFound { .. })));
        assert!(matches!(s.read_slices(p, 16, 16), Err(StoreError::NotFound { .. })));
        let written = [
            s.append(p, b"{}\n"),
            s.write_atomic(p, b"{}\n", ExpectedSize::Missing),
            s.open_writer(p, Durability::None).map(drop),
            s.update_title(p, Some("t"), None, "2026-01-01T00:00:00.000Z"),
            s.append_expected(p, b"{}\n", ExpectedSize::Missing),
        ];
        for w in written {
            let err = w.err().ok_or("a read-only storage refuses writes")?;
            assert!($refused(&err), "{err:?}");
            assert!(err.to_string().contains("cannot"), "{err}");
        }
    }};
}

/// Asserts that a session `$writer` writes reads back through `$reader` (made after the
/// write, read-only), which refuses to remove it with an error `$refused` accepts.
#[macro_export]
macro_rules! assert_read_only_reads_what_was_written {
    ($writer:expr, $reader:expr, $refused:expr) => {{
        use session_store::Storage as _;
        let (w, p) = (&$writer, std::path::Path::new("/s/a.jsonl"));
        w.write_atomic(p, b"{\"type\":\"session\"}\n", session_store::ExpectedSize::Missing)?;
        let r = $reader;
        assert_eq!(r.read(p)?, b"{\"type\":\"session\"}\n");
        assert_eq!(r.list(std::path::Path::new("/s"))?, ["a.jsonl"]);
        assert_eq!(r.stat(p)?.map(|s| s.size), Some(19));
        assert!($refused(&r.unlink(p).err().ok_or("refused")?));
        assert_eq!(w.read(p)?, b"{\"type\":\"session\"}\n", "the refused unlink left the row");
    }};
}

/// Asserts that `$storage`, on a table an omp before the title columns made holding
/// `/s/old.jsonl` (`x` and a newline), reads it as it is.
#[macro_export]
macro_rules! assert_reads_the_older_table {
    ($storage:expr) => {{
        use session_store::Storage as _;
        let (s, p) = (&$storage, std::path::Path::new("/s/old.jsonl"));
        assert_eq!(s.read(p)?, b"x\n");
        assert_eq!(s.read_slices(p, 1, 1)?, (b"x".to_vec(), b"\n".to_vec()));
        assert_eq!(s.list_stats(std::path::Path::new("/s"))?.len(), 1);
    }};
}
