//! What the engine's tests share: a strategy for JSON values with every kind of
//! string content the scanner must get right.

/// JSON values with strings of quotes, backslashes, brackets, control characters and
/// multi-byte characters, nested a few levels.
pub(crate) fn json_value() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i32>().prop_map(serde_json::Value::from),
        (-1e6f64..1e6).prop_map(serde_json::Value::from),
        "([a-z\"\\\\/\n\t{}\\[\\],:é😀 ]|\u{1}){0,30}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(serde_json::Value::Array),
            proptest::collection::vec(("[a-z\"{}]{0,6}", inner), 0..5)
                .prop_map(|kv| serde_json::Value::Object(kv.into_iter().collect())),
        ]
    })
}
