//! The parser never panics, whatever the bytes, and what it keeps can always be
//! written back and read again without loss.

use proptest::prelude::*;
use session_model::{HeaderCheck, Record, parse_session_bytes};

use crate::support::{DIALECTS, is_structural, write_back};

const VALID: &[&str] = &[
    r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#,
    r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#,
    r#"{"type":"message","id":"a2","parentId":"a1","timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"yo"}],"provider":"p","model":"m","stopReason":"stop"}}"#,
    r#"{"type":"label","id":"a3","parentId":"a2","timestamp":"t","targetId":"a1","label":"x"}"#,
    r#"{"type":"message","id":"a4","message":null}"#,
    r#"{"type":"message","id":"a5","message":{"role":5,"role":"user"}}"#,
    r#"{"type":"title","v":1,"title":"t","updatedAt":"u","pad":"  "}"#,
    r#"{"type":"session","id":7}"#,
    "42",
    "null",
    "[]",
    "\"str\"",
    "false",
    "{}",
];

fn piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => prop::sample::select(VALID).prop_map(|s| format!("{s}\n").into_bytes()),
        1 => prop::sample::select(VALID).prop_flat_map(|s| (0..s.len()).prop_map(move |n| s.as_bytes()[..n].to_vec())),
        1 => "[ \t\r\n]{1,4}".prop_map(String::into_bytes),
        1 => "[a-z{}\\[\\]\":,0-9 ]{1,12}\n?".prop_map(String::into_bytes),
        1 => Just("\u{feff}".as_bytes().to_vec()),
        1 => Just(b"{\"type\":\n\"custom\",\n\"id\":\"m\"}\n".to_vec()),
        1 => Just(b"\r\n".to_vec()),
        1 => prop::collection::vec(any::<u8>(), 1..4),
    ]
}

fn exercise(bytes: &[u8]) -> Result<(), TestCaseError> {
    for dialect in DIALECTS {
        let parsed = parse_session_bytes(bytes, dialect);
        prop_assert_eq!(parsed.byte_len, bytes.len());
        for d in &parsed.diagnostics {
            prop_assert!(d.offset <= bytes.len(), "offset past the end of the file: {}", d);
            prop_assert!(is_structural(&d.kind) || d.line >= 1, "{}", d);
        }
        for r in &parsed.records {
            let line = r.line();
            prop_assert!(!line.contains('\n'), "{}", line);
            let again = Record::parse(&line).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(again.value(), r.value());
            let _ = (r.message_info(), r.message_role(), r.entry_type(), r.parent(), r.canonical_line());
        }
        // A file with a valid header (the only kind a writer rewrites), written back from
        // what was kept, loads to the same records with nothing skipped.
        if !matches!(parsed.header_check(dialect), HeaderCheck::Valid { .. }) {
            continue;
        }
        let written = write_back(&parsed);
        let again = parse_session_bytes(written.as_bytes(), dialect);
        let lines = |p: &session_model::ParsedFile| p.records.iter().map(|r| r.line().into_owned()).collect::<Vec<_>>();
        prop_assert_eq!(lines(&again), lines(&parsed), "{}: {:?}", dialect.name(), written);
        let unclean: Vec<_> = again.diagnostics.iter().filter(|d| !is_structural(&d.kind)).collect();
        prop_assert!(unclean.is_empty(), "{}: {:?} in {:?}", dialect.name(), unclean, written);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        exercise(&bytes)?;
    }

    #[test]
    fn mixes_of_valid_lines_garbage_and_whitespace(pieces in prop::collection::vec(piece(), 0..16)) {
        exercise(&pieces.concat())?;
    }
}
