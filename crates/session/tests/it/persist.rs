//! Persistence transforms: the conformance corpus round-trips through resolve and prepare, and
//! property tests for idempotence, untouched records and base64.

use std::path::PathBuf;

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use session::persist::{MAX_STRING_UNITS, TRUNCATION_NOTICE, may_change, prepare_entry, resolve_blob_refs};
use session_model::json::to_js_string;
use session_model::{Dialect, parse_session_bytes};

use session::store::base64;
use session::store::blob::BlobStore;
use session_testkit::testdata;

/// Returns the names of every entry in `dir` (dot-files included), sorted.
fn raw_names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = fs_err::read_dir(dir)
        .map(|r| r.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn omp_scenarios_with_blobs() -> Vec<PathBuf> {
    let root = testdata().join("conformance/omp");
    raw_names(&root).into_iter().map(|n| root.join(n)).filter(|p| p.join("blobs").is_dir()).collect()
}

/// omp wrote these files through `prepareEntryForPersistence`: resolving their blob refs and
/// preparing again must give back every line byte for byte, with the same blob hashes.
#[test]
fn corpus_entries_round_trip_through_resolve_and_prepare() -> TestResult {
    let mut images = 0;
    let mut truncated = 0;
    for scenario in omp_scenarios_with_blobs() {
        let store = BlobStore::open(scenario.join("blobs"));
        for name in raw_names(&scenario).into_iter().filter(|n| n.ends_with(".jsonl")) {
            let bytes = fs_err::read(scenario.join(&name))?;
            let parsed = parse_session_bytes(&bytes, Dialect::Omp);
            for record in parsed.records.iter().filter(|r| r.is_object() && !r.is_header()) {
                let original = record.value();
                let (resolved, warnings) = resolve_blob_refs(original, &store);
                assert!(warnings.is_empty(), "{name}: {warnings:?}");
                if resolved != *original {
                    images += 1;
                }
                if record.text().contains(TRUNCATION_NOTICE.trim_start()) {
                    truncated += 1;
                }
                let prepared = prepare_entry(&resolved);
                let again = prepared.value.unwrap_or(resolved);
                assert_eq!(to_js_string(&again), record.canonical_line(), "{name}: {}", record.id().unwrap_or("?"));
            }
        }
    }
    assert!(images > 0 && truncated > 0, "corpus exercises images ({images}) and truncation ({truncated})");
    Ok(())
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("type"),
        Just("content"),
        Just("data"),
        Just("images"),
        Just("frames"),
        Just("text"),
        Just("mimeType"),
        Just("lineCount"),
        Just("result"),
        Just("x"),
    ]
    .prop_map(str::to_owned)
}

/// JSON with short strings only: nothing for persistence to change.
fn small_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        "[a-z\\n😀é ]{0,20}".prop_map(Value::from),
        Just(json!("image")),
        Just(json!("image/png")),
        Just(json!("image_generation_call")),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::vec((key(), inner), 0..5).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// JSON that may also hold image payloads, data URLs, `jsonlEvents` and one huge string.
fn rich_json(huge: &'static str) -> impl Strategy<Value = Value> {
    let image_data = proptest::collection::vec(any::<u8>(), 700..1200).prop_map(|b| base64::encode(&b));
    let leaf = prop_oneof![
        4 => small_json(),
        1 => image_data.clone().prop_map(|d| json!({"type":"image","data":d,"mimeType":"image/png"})),
        1 => image_data.clone().prop_map(|d| json!({"data":d,"mimeType":"image/webp"})),
        1 => image_data.clone().prop_map(|d| json!({"type":"image_generation_call","result":d})),
        1 => "[A-Za-z0-9]{0,40}".prop_map(|d| json!({"image_url": format!("data:image/png;base64,{d}")})),
        1 => Just(json!({"content": huge, "lineCount": 1, "jsonlEvents": [1, 2]})),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((key(), inner), 0..4).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn huge_string() -> &'static str {
    static HUGE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HUGE.get_or_init(|| format!("{}\n{}", "é".repeat(MAX_STRING_UNITS / 2), "😀".repeat(1000)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn records_without_large_content_are_untouched(v in small_json()) {
        let p = prepare_entry(&v);
        prop_assert_eq!(p.value, None);
        prop_assert!(p.blobs.is_empty());
    }

    #[test]
    fn may_change_never_misses_a_change(v in rich_json(huge_string())) {
        if !may_change(&to_js_string(&v)) {
            prop_assert_eq!(prepare_entry(&v).value, None);
        }
    }

    #[test]
    fn prepare_is_idempotent(v in rich_json(huge_string())) {
        let first = prepare_entry(&v);
        let once = first.value.unwrap_or(v);
        let second = prepare_entry(&once);
        prop_assert_eq!(second.value, None);
        prop_assert!(second.blobs.is_empty());
    }

    #[test]
    fn prepare_then_resolve_restores_images(v in rich_json(huge_string())) {
        let prepared = prepare_entry(&v);
        let store = BlobStore::in_memory();
        for b in &prepared.blobs {
            store.put(&b.bytes, b.mime.as_deref()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        let once = prepared.value.unwrap_or_else(|| v.clone());
        let (resolved, warnings) = resolve_blob_refs(&once, &store);
        prop_assert!(warnings.is_empty());
        // Resolving then preparing again lands on the same bytes.
        let again = prepare_entry(&resolved).value.unwrap_or(resolved);
        prop_assert_eq!(to_js_string(&again), to_js_string(&once));
    }

    #[test]
    fn base64_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..300), cut in 0usize..4) {
        let enc = base64::encode(&bytes);
        prop_assert_eq!(base64::decode_lenient(&enc), bytes.clone());
        let url_safe: String = enc.trim_end_matches('=').chars().map(|c| match c { '+' => '-', '/' => '_', c => c }).collect();
        prop_assert_eq!(base64::decode_lenient(&url_safe), bytes.clone());
        let spaced: String = enc.chars().enumerate().flat_map(|(i, c)| {
            let sep = if i % 7 == cut { Some('\n') } else { None };
            sep.into_iter().chain(std::iter::once(c))
        }).collect();
        prop_assert_eq!(base64::decode_lenient(&spaced), bytes.clone());
        prop_assert_eq!(base64::encode(&base64::decode_lenient(&enc)), enc);
    }

    #[test]
    fn base64_decode_never_fails(s in "\\PC{0,80}") {
        let d = base64::decode_lenient(&s);
        prop_assert!(d.len() <= s.len());
    }
}

#[test]
fn unchanged_objects_keep_key_order_and_share_nothing_new() {
    let mut m = Map::new();
    m.insert("z".into(), json!(1));
    m.insert("a".into(), json!({"jsonlEvents": []}));
    let v = prepare_entry(&Value::Object(m)).value.unwrap_or_default();
    assert_eq!(to_js_string(&v), r#"{"z":1,"a":{}}"#);
}

#[test]
fn may_change_looks_at_keys_values_and_escapes() {
    let long = "y".repeat(1100);
    // Markers as keys or whole string values.
    assert!(may_change(r#"{"jsonlEvents":[]}"#));
    assert!(may_change(r#"{"a":{"image_url":"data:image/png;base64,AA"}}"#));
    assert!(may_change(r#"{"type":"openaiResponsesHistory"}"#));
    assert!(may_change(r#"{"details":{"structuredContent":{}}}"#));
    assert!(may_change(&format!(r#"{{"data":"{long}"}}"#)));
    assert!(may_change(&format!(r#"{{"result":"{long}"}}"#)));
    // A `\u` escape could spell any of them; an escaped backslash before a `u` cannot.
    assert!(may_change(r#"{"json\u006cEvents":[]}"#));
    assert!(!may_change(r#"{"text":"C:\\users"}"#));
    // Short lines cannot hold an image; words inside text and escaped quotes are not keys.
    assert!(!may_change(r#"{"data":"short"}"#));
    assert!(!may_change(r#"{"text":"the jsonlEvents and image_url words"}"#));
    assert!(!may_change(&format!(r#"{{"text":"\"data\" {long}"}}"#)));
}
