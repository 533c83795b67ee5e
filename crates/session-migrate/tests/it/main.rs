//! Properties of the migration: it is idempotent, it leaves version 3 alone, and what
//! it produces parses back to the same records.

use proptest::prelude::*;
use session_model::{Dialect, Record, parse_session_bytes};

/// Header versions as files hold them, including JavaScript's odd cases.
const VERSIONS: &[&str] =
    &["", "1", "2", "3", "4", "\"2\"", "\"3\"", "null", "true", "\"x\"", "[]", "[2]", "1e400", "-1e400", "2.5", "-0"];

fn entry(kind: u8, i: usize, with_ids: bool) -> String {
    let ids = if with_ids {
        format!(r#""id":"e{i}","parentId":{},"#, if i == 0 { "null".into() } else { format!("\"e{}\"", i - 1) })
    } else {
        String::new()
    };
    match kind % 4 {
        0 => format!(
            r#"{{"type":"message",{ids}"timestamp":"t","message":{{"role":"user","content":"m{i}","timestamp":{i}}}}}"#
        ),
        1 => format!(
            r#"{{"type":"message",{ids}"timestamp":"t","message":{{"role":"hookMessage","customType":"c","content":"h","display":true,"timestamp":1}}}}"#
        ),
        2 => format!(
            r#"{{"type":"compaction",{ids}"timestamp":"t","summary":"s","firstKeptEntryIndex":{},"tokensBefore":1}}"#,
            i / 2
        ),
        _ => format!(r#"{{"type":"label",{ids}"timestamp":"t","targetId":"e0","label":"l"}}"#),
    }
}

fn file(version: &str, kinds: &[u8], with_ids: bool) -> String {
    let v = if version.is_empty() { String::new() } else { format!(r#","version":{version}"#) };
    let mut out = format!(r#"{{"type":"session"{v},"id":"s","timestamp":"t","cwd":"/"}}"#) + "\n";
    for (i, k) in kinds.iter().enumerate() {
        out.push_str(&entry(*k, i, with_ids));
        out.push('\n');
    }
    out
}

fn migrated(records: &mut [Record]) -> session_migrate::Migration {
    let mut n = 0u32;
    session_migrate::migrate(records, &mut || {
        n += 1;
        format!("{n:08x}")
    })
}

fn texts(records: &[Record]) -> Vec<String> {
    records.iter().map(|r| r.line().into_owned()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Migrating a migrated file changes nothing and reports nothing (so a file is
    /// rewritten at most once), and the written lines read back as the same records.
    #[test]
    fn migration_is_idempotent(
        v in 0..VERSIONS.len(),
        kinds in proptest::collection::vec(any::<u8>(), 0..12),
        with_ids in any::<bool>(),
    ) {
        let text = file(VERSIONS[v], &kinds, with_ids);
        let mut records = parse_session_bytes(text.as_bytes(), Dialect::Pi).records;
        let first = migrated(&mut records);
        // A version JavaScript reads as Infinity (`1e400`) runs no step, so the file is
        // not rewritten; a later rewrite would write it as `null`, which then migrates.
        prop_assume!(first.ran() || VERSIONS[v] != "1e400");
        let once = texts(&records);
        let written: String = once.iter().map(|l| format!("{l}\n")).collect();
        let mut again = parse_session_bytes(written.as_bytes(), Dialect::Pi).records;
        prop_assert_eq!(texts(&again), once.clone());
        let second = migrated(&mut again);
        if !first.unrecognised_version {
            prop_assert!(!second.ran(), "{:?} then {:?} for version {}", first, second, VERSIONS[v]);
        }
        prop_assert_eq!(texts(&again), once);
    }

    /// A version-3 file is never touched, whatever it holds.
    #[test]
    fn version_three_is_left_alone(
        kinds in proptest::collection::vec(any::<u8>(), 0..12),
        with_ids in any::<bool>(),
    ) {
        let text = file("3", &kinds, with_ids);
        let mut records = parse_session_bytes(text.as_bytes(), Dialect::Pi).records;
        let before = texts(&records);
        let m = migrated(&mut records);
        prop_assert!(!m.ran());
        prop_assert_eq!(texts(&records), before);
    }
}
