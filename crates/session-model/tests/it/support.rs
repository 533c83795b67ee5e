//! Helpers shared by the test modules: fixture paths, writing a parsed file back,
//! naming diagnostic kinds.

use session_model::{DiagnosticKind, Dialect, ParsedFile};

pub(crate) use session_testkit::testdata;

/// Reads a file below `testdata/`.
pub(crate) fn read(rel: &str) -> Vec<u8> {
    let path = testdata().join(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Writes a parsed file back without changes: the title slot (omp) then every
/// record's line, each followed by `\n`.
pub(crate) fn write_back(parsed: &ParsedFile) -> String {
    let mut out = String::new();
    if let Some(slot) = &parsed.title_slot {
        out.push_str(&slot.to_line().expect("a slot that was read fits when written back"));
    }
    for r in &parsed.records {
        out.push_str(&r.line());
        out.push('\n');
    }
    out
}

/// Returns the name of a diagnostic kind without its fields (`"Malformed"`).
pub(crate) fn kind_name(kind: &DiagnosticKind) -> String {
    let debug = format!("{kind:?}");
    debug.split([' ', '{', '(']).next().unwrap_or_default().to_owned()
}

/// Returns the names of all diagnostics of a parsed file, in order.
pub(crate) fn kind_names(parsed: &ParsedFile) -> Vec<String> {
    parsed.diagnostics.iter().map(|d| kind_name(&d.kind)).collect()
}

/// Returns whether a diagnostic kind is about the structure of the kept records
/// (reported at line 0) rather than about skipped text.
pub(crate) fn is_structural(kind: &DiagnosticKind) -> bool {
    matches!(
        kind,
        DiagnosticKind::NonObject { .. } | DiagnosticKind::DuplicateHeader | DiagnosticKind::DuplicateId { .. }
    )
}

/// Both dialects.
pub(crate) const DIALECTS: [Dialect; 2] = [Dialect::Pi, Dialect::Omp];

/// Strategies shared by the property tests.
pub(crate) mod arb {
    use proptest::prelude::*;
    use serde_json::{Map, Number, Value};

    /// Strings with unicode, controls, quotes, backslashes and line separators.
    pub(crate) fn string() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => "[a-z0-9 \"\\\\/\n\r\t\u{0}-\u{1f}\u{7f}\u{85}\u{a0}\u{2028}\u{2029}\u{feff}é日本語🚀]{0,24}",
            1 => any::<String>(),
            1 => Just(String::new()),
        ]
    }

    /// Numbers where JavaScript formatting is tricky, and arbitrary ones.
    pub(crate) fn number() -> impl Strategy<Value = Number> {
        let special = prop_oneof![
            Just(1e21),
            Just(-0.0),
            Just(1e-7),
            Just(1e-6),
            Just(0.1 + 0.2),
            Just(1e20),
            Just(123_456_789_012_345_680_000.0),
            Just(5e-324),
            Just(f64::MAX),
            Just(-1.5e300),
            Just(9_007_199_254_740_993.0),
        ];
        prop_oneof![
            special.prop_map(|f| Number::from_f64(f).expect("finite")),
            any::<f64>().prop_filter_map("finite", Number::from_f64),
            any::<i64>().prop_map(Number::from),
            any::<u64>().prop_map(Number::from),
            (0u64..1000).prop_map(Number::from),
        ]
    }

    /// Object keys, array-index-like ones included (they enumerate first in JavaScript).
    pub(crate) fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => string(),
            1 => (0u64..5_000_000_000).prop_map(|n| n.to_string()),
            1 => prop_oneof![Just("01".to_owned()), Just("4294967295".to_owned()), Just("4294967294".to_owned()), Just("-1".to_owned())],
        ]
    }

    /// Arbitrary JSON values (objects keep their generated key order).
    pub(crate) fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            number().prop_map(Value::Number),
            string().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((key(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
            ]
        })
    }
}
