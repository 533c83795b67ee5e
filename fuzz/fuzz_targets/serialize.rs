//! Fuzzes the JavaScript-exact serializer (`session_model::json`) round trip through
//! the scanner. The value is the input itself when it is JSON (serde_json's reading
//! of it), else one built from the bytes (`session_fuzz::values`).
//!
//! Asserts, for the value's text `to_js_string(v)`:
//! * it is one line without raw control characters, and the scanner validates it
//!   whole (`parse_whole` gives the whole text; `Tape::parse` accepts it);
//! * it parses back (serde_json) to the same value: numbers equal as `f64`, objects
//!   with JavaScript's key order (array indexes first, ascending), and writing that
//!   value again gives the same text (a fixed point);
//! * every string in the value decodes back from `write_js_str` through the
//!   scanner's `decode_string`, and every number's `js_number` text reads back as the
//!   same `f64`;
//! * `Record::from_value` gives that text, and a record built that way has the same
//!   skeleton (type, id, parent, timestamp, message) as `Record::parse` of the text.

#![no_main]

use libfuzzer_sys::arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};
use session_model::Record;
use session_model::json::{array_index, js_number, to_js_string, write_js_str};
use session_model::scan::{self, Tape};

fuzz_target!(|data: &[u8]| {
    let value = match std::str::from_utf8(data).ok().and_then(|t| serde_json::from_str::<Value>(t).ok()) {
        Some(v) => v,
        None => {
            let mut u = Unstructured::new(data);
            let Ok(v) = session_fuzz::values::value(&mut u, 5) else { return };
            v
        }
    };
    check(&value);
});

fn check(v: &Value) {
    let text = to_js_string(v);
    assert!(!text.bytes().any(|b| b < 0x20), "a raw control character in {text:?}");
    assert_eq!(scan::parse_whole(&text), Ok(text.as_str()), "the scanner rejects {text:?}");
    let tape = Tape::parse(&text, 2).unwrap_or_else(|e| panic!("Tape::parse rejects {text:?}: {e:?}"));
    assert_eq!(tape.raw(0), text);

    let back: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?} does not parse: {e}"));
    if let Err(e) = same(v, &back) {
        panic!("{text:?} reads back as another value: {e}");
    }
    assert_eq!(to_js_string(&back), text, "writing what was read changes the text");

    each_scalar(v, &mut |s| match s {
        Value::String(s) => {
            let mut raw = String::new();
            write_js_str(&mut raw, s);
            assert_eq!(scan::decode_string(&raw).as_deref(), Some(s.as_str()), "{raw:?} decodes wrongly");
        }
        Value::Number(n) => {
            if let Some(f) = n.as_f64() {
                let js = js_number(f);
                assert_eq!(js.parse::<f64>().ok(), Some(if f == 0.0 { 0.0 } else { f }), "js_number({f:e}) is {js}");
            }
        }
        _ => {}
    });

    let built = Record::from_value(v.clone());
    assert_eq!(built.text(), text, "Record::from_value writes another text");
    let parsed = Record::parse(&text).unwrap_or_else(|e| panic!("Record::parse rejects {text:?}: {e}"));
    assert_eq!(built, parsed);
    assert_eq!(built.is_object(), parsed.is_object());
    assert_eq!(built.entry_type(), parsed.entry_type(), "entry type of {text:?}");
    assert_eq!(built.type_str(), parsed.type_str(), "type of {text:?}");
    assert_eq!(built.id(), parsed.id(), "id of {text:?}");
    assert_eq!(built.parent(), parsed.parent(), "parentId of {text:?}");
    assert_eq!(built.timestamp(), parsed.timestamp(), "timestamp of {text:?}");
    assert_eq!(built.message_raw(), parsed.message_raw(), "message of {text:?}");
    assert_eq!(built.message_info(), parsed.message_info(), "message fields of {text:?}");
    assert_eq!(built.line(), text);
}

/// Calls `f` on every string and number in `v`, keys included.
fn each_scalar(v: &Value, f: &mut impl FnMut(&Value)) {
    match v {
        Value::Array(items) => items.iter().for_each(|i| each_scalar(i, f)),
        Value::Object(map) => {
            for (k, item) in map {
                f(&Value::String(k.clone()));
                each_scalar(item, f);
            }
        }
        other => f(other),
    }
}

/// Returns the key order JavaScript gives an object built in `map`'s order.
fn js_key_order(map: &Map<String, Value>) -> Vec<&str> {
    let mut index: Vec<(u32, &str)> = map.keys().filter_map(|k| array_index(k).map(|i| (i, k.as_str()))).collect();
    index.sort_by_key(|(i, _)| *i);
    let rest = map.keys().filter(|k| array_index(k).is_none()).map(String::as_str);
    index.into_iter().map(|(_, k)| k).chain(rest).collect()
}

/// Compares `written` (read from the output) with `original`: numbers as `f64`,
/// objects in JavaScript's key order.
fn same(original: &Value, written: &Value) -> Result<(), String> {
    match (original, written) {
        (Value::Number(a), Value::Number(b)) => {
            if a.as_f64() == b.as_f64() {
                Ok(())
            } else {
                Err(format!("number {a} came back as {b}"))
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a.iter().zip(b).try_for_each(|(x, y)| same(x, y)),
        (Value::Object(a), Value::Object(b)) => {
            let order: Vec<&str> = b.keys().map(String::as_str).collect();
            if order != js_key_order(a) {
                return Err(format!("key order {order:?}, expected {:?}", js_key_order(a)));
            }
            a.iter().try_for_each(|(k, v)| same(v, &b[k]))
        }
        (a, b) if a == b => Ok(()),
        (a, b) => Err(format!("{a} came back as {b}")),
    }
}
