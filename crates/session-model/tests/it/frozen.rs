//! The frozen fixtures of each format version (`testdata/v1`, `v2`, `v3`) load
//! without diagnostics, show their version's shape, and write back byte for byte.

use session_model::{Dialect, EntryType, HeaderCheck, ParentRef, ParsedFile, parse_session_bytes};

use crate::support::{read, write_back};

fn load(rel: &str, dialect: Dialect) -> (Vec<u8>, ParsedFile) {
    let bytes = read(rel);
    let parsed = parse_session_bytes(&bytes, dialect);
    assert_eq!(parsed.diagnostics, [], "{rel}");
    assert_eq!(parsed.header_check(dialect), HeaderCheck::Valid { index: 0 }, "{rel}");
    assert_eq!(write_back(&parsed).as_bytes(), &bytes[..], "{rel} does not write back byte for byte");
    (bytes, parsed)
}

fn has_hook_message(parsed: &ParsedFile) -> bool {
    parsed.records.iter().any(|r| r.message_role() == Some("hookMessage"))
}

#[test]
fn v1_files_have_no_version_no_ids_and_legacy_fields() {
    for (rel, dialect) in
        [("v1/pi.jsonl", Dialect::Pi), ("v1/pi-spec-example.jsonl", Dialect::Pi), ("v1/omp.jsonl", Dialect::Omp)]
    {
        let (_, parsed) = load(rel, dialect);
        let header = parsed.header().expect("valid header");
        assert_eq!(header.get("version"), None, "{rel}");
        let entries = &parsed.records[1..];
        assert!(entries.len() >= 4, "{rel}");
        for e in entries {
            assert_eq!(e.id(), None, "{rel}: {}", e.text());
            assert_eq!(e.parent(), ParentRef::Absent, "{rel}");
        }
        assert!(
            entries.iter().any(|e| e.entry_type() == EntryType::Compaction && e.get("firstKeptEntryIndex").is_some()),
            "{rel}: no firstKeptEntryIndex"
        );
        assert!(has_hook_message(&parsed), "{rel}: no hookMessage");
        assert!(parsed.title_slot.is_none(), "{rel}");
    }
}

#[test]
fn v2_files_have_version_2_ids_and_hook_messages() {
    for (rel, dialect) in [("v2/pi.jsonl", Dialect::Pi), ("v2/omp.jsonl", Dialect::Omp)] {
        let (_, parsed) = load(rel, dialect);
        assert_eq!(parsed.header().and_then(|h| h.get("version")), Some(&2.into()), "{rel}");
        let entries = &parsed.records[1..];
        for e in entries {
            assert!(e.id().is_some(), "{rel}: {}", e.text());
            assert!(matches!(e.parent(), ParentRef::Null | ParentRef::Id(_)), "{rel}");
        }
        assert_eq!(entries[0].parent(), ParentRef::Null, "{rel}");
        assert!(has_hook_message(&parsed), "{rel}: no hookMessage");
        assert!(!entries.iter().any(|e| e.get("firstKeptEntryIndex").is_some()), "{rel}");
    }
}

#[test]
fn v3_files_are_current_and_omp_starts_with_the_title_slot() {
    for (rel, dialect) in [("v3/pi.jsonl", Dialect::Pi), ("v3/omp.jsonl", Dialect::Omp)] {
        let (bytes, parsed) = load(rel, dialect);
        let header = parsed.header().expect("valid header");
        assert_eq!(header.get("version"), Some(&3.into()), "{rel}");
        assert!(parsed.records[1..].iter().all(|e| e.id().is_some()), "{rel}");
        assert!(!has_hook_message(&parsed), "{rel}");
        match dialect {
            Dialect::Pi => assert!(parsed.title_slot.is_none()),
            Dialect::Omp => {
                let slot = parsed.title_slot.as_ref().expect("omp v3 file has a title slot");
                assert_eq!(slot.title, "padded name");
                assert_eq!(slot.source.as_deref(), Some("user"));
                assert_eq!(
                    bytes.iter().position(|&b| b == b'\n'),
                    Some(255),
                    "slot line is 256 bytes with its newline"
                );
            }
        }
    }
}
