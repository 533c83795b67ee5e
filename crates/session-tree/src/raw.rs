//! Small helpers to read fields of a record as raw JSON text and to write JSON
//! objects field by field, so that context building copies payloads verbatim
//! instead of parsing them into trees.

use std::borrow::Cow;

use serde_json::Value;
use session_model::scan::{self, Obj};
use session_model::{Record, json};

/// The top-level fields of one JSON object, each as its raw JSON text.
///
/// A later duplicate key replaces an earlier one, as `JSON.parse` does. A text that
/// is not an object gives no fields. The text is a record's, already validated.
pub(crate) struct RawFields<'a> {
    obj: Obj<'a>,
}

impl<'a> RawFields<'a> {
    /// Splits `text` into its top-level fields without parsing their values.
    pub(crate) fn parse(text: &'a str) -> RawFields<'a> {
        let start = scan::skip_ws(text.as_bytes(), 0);
        RawFields { obj: Obj::parse_validated(&text[start..]).unwrap_or_default() }
    }

    /// Returns the raw JSON text of `key`, if present.
    pub(crate) fn raw(&self, key: &str) -> Option<&'a str> {
        self.obj.get(key)
    }

    /// Returns `key` when it is a JSON string.
    pub(crate) fn string(&self, key: &str) -> Option<String> {
        self.raw(key).and_then(as_string)
    }

    /// Returns whether `key` is present and truthy in JavaScript terms.
    pub(crate) fn truthy(&self, key: &str) -> bool {
        self.raw(key).is_some_and(is_truthy)
    }

    /// Returns `key` unless it is absent or `null` (the `??` operator).
    pub(crate) fn non_nullish(&self, key: &str) -> Option<&'a str> {
        self.raw(key).filter(|r| *r != "null")
    }

    /// For a compaction's fields, the entries of `before` (the path before it) from the
    /// one its `firstKeptEntryId` names on: without the key, from the first entry
    /// without an id; with a key that is no string, none.
    pub(crate) fn kept<'p, 'r>(&self, before: &'p [&'r Record]) -> &'p [&'r Record] {
        let first_kept = self.raw("firstKeptEntryId").map(as_string);
        let at = before.iter().position(|entry| match &first_kept {
            None => entry.id().is_none(),
            Some(Some(s)) => entry.id() == Some(s.as_str()),
            Some(None) => false,
        });
        at.map_or(&[], |at| &before[at..])
    }
}

/// Decodes a raw JSON text that is a string (escaped lone surrogates as U+FFFD, as
/// every reader of the workspace decodes them).
pub(crate) fn as_string(raw: &str) -> Option<String> {
    scan::decode_string(raw).map(Cow::into_owned)
}

/// Returns whether a raw JSON value is truthy in JavaScript terms.
pub(crate) fn is_truthy(raw: &str) -> bool {
    scan::truthy(raw)
}

/// Returns whether a raw JSON value is a string or an array.
pub(crate) fn is_string_or_array(raw: &str) -> bool {
    matches!(raw.as_bytes().first(), Some(b'"' | b'['))
}

/// Parses a raw JSON text into a value as JavaScript reads it (`null` when it is not
/// valid JSON, which cannot happen for text taken from a record).
pub(crate) fn to_value(raw: &str) -> Value {
    json::parse(raw).unwrap_or(Value::Null)
}

/// Writes `value` as a JSON value: `Date.parse` milliseconds or `null` for `NaN`.
pub(crate) fn write_ms(out: &mut String, ms: Option<i64>) {
    match ms {
        Some(ms) => out.push_str(&ms.to_string()),
        None => out.push_str("null"),
    }
}

/// Returns `new Date(entry.timestamp).getTime()` for an entry's raw fields.
pub(crate) fn entry_time(fields: &RawFields<'_>) -> Option<i64> {
    session_model::timestamp::js_date_raw(fields.raw("timestamp")?)
}

/// Builds one JSON object by appending fields in order.
pub(crate) struct ObjWriter<'o> {
    out: &'o mut String,
    first: bool,
}

impl<'o> ObjWriter<'o> {
    /// Starts an object in `out`.
    pub(crate) fn new(out: &'o mut String) -> ObjWriter<'o> {
        out.push('{');
        ObjWriter { out, first: true }
    }

    fn key(&mut self, key: &str) {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        json::write_js_str(self.out, key);
        self.out.push(':');
    }

    /// Writes `key` with a raw JSON value as JavaScript holds it ([`json::js_exact`]);
    /// an absent value omits the key, as `JSON.stringify` omits `undefined`.
    pub(crate) fn raw(&mut self, key: &str, raw: Option<&str>) {
        if let Some(raw) = raw {
            self.key(key);
            self.out.push_str(&json::js_exact(raw));
        }
    }

    /// Writes `key` with a string value.
    pub(crate) fn str(&mut self, key: &str, s: &str) {
        self.key(key);
        json::write_js_str(self.out, s);
    }

    /// Writes `key` with a millisecond time (`null` for `NaN`).
    pub(crate) fn ms(&mut self, key: &str, ms: Option<i64>) {
        self.key(key);
        write_ms(self.out, ms);
    }

    /// Writes `key` with a JSON value.
    pub(crate) fn value(&mut self, key: &str, v: &Value) {
        self.key(key);
        json::write_js_value(self.out, v);
    }

    /// Closes the object.
    pub(crate) fn end(self) {
        self.out.push('}');
    }
}

/// Writes a JSON array of already serialised values (messages come from
/// [`session_model::Record::message_raw`] or the serializer, so they hold numbers as
/// JavaScript holds them already).
pub(crate) fn write_array<'x>(out: &mut String, items: impl IntoIterator<Item = &'x str>) {
    out.push('[');
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(item);
    }
    out.push(']');
}

/// Returns `message` (raw JSON) with `content` replaced, as `{...message, content}`
/// does: the key keeps its position or is appended; `None` drops it (`undefined`).
pub(crate) fn with_content(message: &str, content: Option<Value>) -> Cow<'static, str> {
    let mut v = to_value(message);
    if let Value::Object(map) = &mut v {
        match content {
            Some(c) => {
                map.insert("content".to_owned(), c);
            }
            None => {
                map.shift_remove("content");
            }
        }
    }
    Cow::Owned(json::to_js_string(&v))
}

/// The `branchSummary` message both references make of a `branch_summary` entry
/// (`createBranchSummaryMessage`), or `None` when its summary is empty.
pub(crate) fn branch_summary_message(entry_text: &str) -> Option<String> {
    let f = RawFields::parse(entry_text);
    if !f.truthy("summary") {
        return None;
    }
    let mut out = String::new();
    let mut w = ObjWriter::new(&mut out);
    w.str("role", "branchSummary");
    w.raw("summary", f.raw("summary"));
    w.raw("fromId", f.raw("fromId"));
    w.ms("timestamp", entry_time(&f));
    w.end();
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truthiness_follows_javascript() {
        for (raw, t) in
            [("0", false), ("-0", false), ("0.0", false), ("\"\"", false), ("null", false), ("false", false)]
        {
            assert_eq!(is_truthy(raw), t, "{raw}");
        }
        for raw in ["1", "\"x\"", "[]", "{}", "true", "-2.5"] {
            assert!(is_truthy(raw), "{raw}");
        }
    }

    #[test]
    fn raw_fields_last_duplicate_wins() {
        let f = RawFields::parse(r#"{"a":1,"b":{"c":[1, 2]},"a":"x"}"#);
        assert_eq!(f.raw("a"), Some("\"x\""));
        assert_eq!(f.raw("b"), Some(r#"{"c":[1, 2]}"#));
        assert_eq!(f.string("a").as_deref(), Some("x"));
        assert!(RawFields::parse("42").raw("a").is_none());
    }

    #[test]
    fn content_replacement_keeps_position() {
        assert_eq!(
            with_content(r#"{"role":"user","content":null,"t":1}"#, Some(Value::from(""))),
            r#"{"role":"user","content":"","t":1}"#
        );
        assert_eq!(with_content(r#"{"role":"user"}"#, Some(Value::Array(vec![]))), r#"{"role":"user","content":[]}"#);
        assert_eq!(with_content(r#"{"role":"user","content":1,"t":1}"#, None), r#"{"role":"user","t":1}"#);
    }
}
