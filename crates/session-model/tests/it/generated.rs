//! The generated fixtures (`testdata/sample`, `testdata/generated`) are clean,
//! well-formed sessions: no diagnostics, a valid header, unique ids, parents that
//! exist earlier in the file, and a byte-for-byte write-back.

use std::collections::HashSet;

use session_model::{Dialect, HeaderCheck, parse_session_bytes};

use crate::support::{read, testdata, write_back};

#[test]
fn generated_sessions_are_clean_and_well_formed() {
    let mut files = vec!["sample/pi.jsonl".to_owned(), "sample/omp.jsonl".to_owned()];
    for entry in std::fs::read_dir(testdata().join("generated")).expect("testdata/generated") {
        files.push(format!("generated/{}", entry.expect("entry").file_name().to_string_lossy()));
    }
    assert!(files.len() >= 8, "{files:?}");
    for rel in files {
        let dialect = if rel.contains("omp") { Dialect::Omp } else { Dialect::Pi };
        let bytes = read(&rel);
        let parsed = parse_session_bytes(&bytes, dialect);
        assert_eq!(parsed.diagnostics, [], "{rel}");
        assert_eq!(parsed.header_check(dialect), HeaderCheck::Valid { index: 0 }, "{rel}");
        assert_eq!(parsed.title_slot.is_some(), dialect == Dialect::Omp, "{rel}");
        assert_eq!(write_back(&parsed).as_bytes(), &bytes[..], "{rel}");
        let mut seen = HashSet::new();
        for r in &parsed.records[1..] {
            if let Some(parent) = r.parent_id() {
                assert!(seen.contains(parent), "{rel}: {} points at a later or missing parent", r.text());
            }
            assert!(seen.insert(r.id().expect("every entry has an id")), "{rel}");
        }
    }
}
