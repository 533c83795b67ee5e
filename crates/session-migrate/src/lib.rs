//! Pure version upgrades of session records (v1 → v2 → v3) and legacy value
//! normalisation, exactly as pi 1.6 and omp 18.3.4 perform them.
//!
//! [`migrate`] takes the records of a file (header included, in file order) and
//! upgrades them in place, returning a [`Migration`] that says whether anything ran,
//! so the caller can rewrite the file on its next write (omp) or at once (pi). It
//! never reads or writes files and takes entry ids from the caller.
//!
//! * **v1 → v2** (header `version` missing or below 2): every non-header record gets
//!   a fresh `id` and a `parentId` chaining it to the previous record (a linear chain
//!   in file order, existing ids overwritten as the references do); a compaction's
//!   `firstKeptEntryIndex` (counted over the whole record list, the header at index 0)
//!   becomes `firstKeptEntryId`. New keys are appended at the end of the object.
//! * **v2 → v3**: the header gets `version: 3`; `message` records with role
//!   `hookMessage` get role `custom`.
//!
//! The version is read with JavaScript's comparison rules (`"3"` counts as 3, `null`
//! as 1, a non-numeric string runs no step but still counts as migrated).
//!
//! ```
//! use session_model::{parse_session_bytes, Dialect};
//! let file = "{\"type\":\"session\",\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n\
//!             {\"type\":\"message\",\"timestamp\":\"t\",\"message\":{\"role\":\"hookMessage\",\"content\":\"x\"}}\n";
//! let mut records = parse_session_bytes(file.as_bytes(), Dialect::Pi).records;
//! let mut n = 0;
//! let m = session_migrate::migrate(&mut records, &mut || { n += 1; format!("{n:08x}") });
//! assert!(m.ran());
//! assert_eq!(records[0].text(), r#"{"type":"session","id":"s","timestamp":"t","cwd":"/","version":3}"#);
//! assert_eq!(records[1].id(), Some("00000001"));
//! assert_eq!(records[1].message_role(), Some("custom"));
//! ```

use serde_json::{Map, Value};
use session_model::{EntryType, Record};

/// What [`migrate`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Migration {
    /// The header's `version` as found (`None` when absent or not a number).
    pub found_version: Option<String>,
    /// Whether the v1 → v2 step ran (ids and parents were assigned).
    pub v1_to_v2: bool,
    /// Whether the v2 → v3 step ran.
    pub v2_to_v3: bool,
    /// Whether the version was below current but matched no step (a non-numeric
    /// version string); the references still report this as migrated.
    pub unrecognised_version: bool,
    /// Number of `hookMessage` roles renamed to `custom`.
    pub hook_messages: usize,
}

impl Migration {
    /// Returns whether the reference counts the file as migrated (a step ran, or the
    /// version matched no step); the references rewrite the file then.
    pub fn ran(&self) -> bool {
        self.v1_to_v2 || self.v2_to_v3 || self.unrecognised_version
    }

    /// Returns whether a step changed the records, so that writing them back changes
    /// the file (an unrecognised version alone changes nothing).
    pub fn changed(&self) -> bool {
        self.v1_to_v2 || self.v2_to_v3
    }
}

/// JavaScript's `ToNumber` for the header `version` value (`None` is `NaN`).
fn js_to_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::String(s) => {
            let t = session_model::js_trim(s);
            if t.is_empty() {
                Some(0.0)
            } else if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                u64::from_str_radix(hex, 16).ok().map(|n| n as f64)
            } else if t.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-')) {
                t.parse::<f64>().ok()
            } else {
                match t {
                    "Infinity" | "+Infinity" => Some(f64::INFINITY),
                    "-Infinity" => Some(f64::NEG_INFINITY),
                    _ => None,
                }
            }
        }
        Value::Null => Some(0.0),
        Value::Array(a) if a.is_empty() => Some(0.0),
        Value::Array(a) if a.len() == 1 => js_to_number(&a[0]),
        _ => None,
    }
}

/// Upgrades `records` (the header first, then entries, in file order) to version 3
/// in place. `new_id` mints entry ids for the v1 → v2 step.
pub fn migrate(records: &mut [Record], new_id: &mut dyn FnMut() -> String) -> Migration {
    let mut m = Migration::default();
    let Some(header) = records.iter().find(|r| r.is_header()) else {
        return m;
    };
    // `header.version ?? 1`
    let version = match header.get("version") {
        None | Some(Value::Null) => Value::from(1),
        Some(v) => v.clone(),
    };
    m.found_version = header.get("version").map(session_model::json::to_js_string);
    // A number is read from its text, as `JSON.parse` reads it: `1e400` is `Infinity`
    // (no step runs) and `-1e400` is `-Infinity` (both run), where the value view holds
    // the `null` that `JSON.stringify` would write.
    let raw = session_model::scan::Obj::parse(header.text()).and_then(|o| o.get("version"));
    let num = match raw.and_then(session_model::scan::number) {
        Some(n) => {
            // As written: the value view holds `null` for a number beyond a double.
            m.found_version = raw.map(str::to_owned);
            Some(n)
        }
        None => js_to_number(&version),
    };
    if num.is_some_and(|v| v >= 3.0) {
        return m;
    }
    if num.is_some_and(|v| v < 2.0) {
        m.v1_to_v2 = true;
        v1_to_v2(records, new_id);
    }
    if num.is_some_and(|v| v < 3.0) {
        m.v2_to_v3 = true;
        m.hook_messages = v2_to_v3(records);
    }
    if num.is_none() {
        m.unrecognised_version = true;
    }
    m
}

fn set_key(map: &mut Map<String, Value>, key: &str, value: Value) {
    // Assignment keeps an existing key's position and appends a new one.
    map.insert(key.to_owned(), value);
}

fn v1_to_v2(records: &mut [Record], new_id: &mut dyn FnMut() -> String) {
    let mut prev: Option<String> = None;
    for i in 0..records.len() {
        if !records[i].is_object() {
            // The references would throw assigning to a primitive; leave it alone.
            continue;
        }
        if records[i].is_header() {
            records[i] = records[i].map_value(|v| {
                if let Value::Object(map) = v {
                    set_key(map, "version", Value::from(2));
                }
            });
            continue;
        }
        let id = new_id();
        let parent = prev.clone();
        // `if (typeof c.firstKeptEntryIndex === "number") { const t = entries[idx];
        //   if (t && t.type !== "session") c.firstKeptEntryId = t.id; delete c.firstKeptEntryIndex; }`
        // resolved against the records as they are at this moment (earlier ones renumbered).
        let is_compaction = records[i].entry_type() == EntryType::Compaction;
        let index = match records[i].get("firstKeptEntryIndex") {
            Some(Value::Number(n)) if is_compaction => Some(n.as_f64().unwrap_or(f64::NAN)),
            _ => None,
        };
        // Some(None): assign `undefined` (the key disappears); None: leave the key alone.
        let first_kept: Option<Option<String>> = index.and_then(|f| {
            if f.fract() != 0.0 || f < 0.0 {
                return None;
            }
            let idx = f as usize;
            let target = records.get(idx).filter(|t| !t.is_header())?;
            Some(if idx == i { Some(id.clone()) } else { target.id().map(str::to_owned) })
        });
        records[i] = records[i].map_value(|v| {
            if let Value::Object(map) = v {
                set_key(map, "id", Value::from(id.clone()));
                set_key(map, "parentId", parent.clone().map_or(Value::Null, Value::from));
                match first_kept {
                    Some(Some(fk)) => set_key(map, "firstKeptEntryId", Value::from(fk)),
                    Some(None) => {
                        map.shift_remove("firstKeptEntryId");
                    }
                    None => {}
                }
                if index.is_some() {
                    map.shift_remove("firstKeptEntryIndex");
                }
            }
        });
        prev = Some(id);
    }
}

fn v2_to_v3(records: &mut [Record]) -> usize {
    let mut hooks = 0;
    for r in records.iter_mut() {
        if r.is_header() {
            *r = r.map_value(|v| {
                if let Value::Object(map) = v {
                    set_key(map, "version", Value::from(3));
                }
            });
        } else if r.message_role() == Some("hookMessage") {
            hooks += 1;
            *r = r.map_value(|v| {
                if let Some(Value::Object(msg)) = v.get_mut("message") {
                    set_key(msg, "role", Value::from("custom"));
                }
            });
        }
    }
    hooks
}

/// The service tiers omp accepts per provider family.
pub const SERVICE_TIERS: [&str; 5] = ["auto", "default", "flex", "scale", "priority"];

/// Normalises a stored `serviceTier` value as omp's `coerceServiceTierByFamily`
/// does: a per-family map (`openai`, `anthropic`, `google`) with valid tiers only,
/// or `None` (no tier). Legacy strings map as the spec's table says.
///
/// ```
/// use serde_json::json;
/// use session_migrate::normalize_service_tier as n;
/// assert_eq!(n(&json!("openai-only")), Some(json!({"openai": "priority"}).as_object().unwrap().clone()));
/// assert_eq!(n(&json!({"google": "flex", "x": "priority", "openai": "bogus"})), Some(json!({"google": "flex"}).as_object().unwrap().clone()));
/// assert_eq!(n(&json!(null)), None);
/// assert_eq!(n(&json!("bogus-tier")), None);
/// ```
pub fn normalize_service_tier(v: &Value) -> Option<Map<String, Value>> {
    let mut out = Map::new();
    match v {
        Value::Object(m) => {
            for fam in ["openai", "anthropic", "google"] {
                if let Some(t) = m.get(fam).and_then(Value::as_str).filter(|t| SERVICE_TIERS.contains(t)) {
                    out.insert(fam.into(), t.into());
                }
            }
        }
        Value::String(s) => match s.as_str() {
            "priority" => {
                for fam in ["openai", "anthropic", "google"] {
                    out.insert(fam.into(), "priority".into());
                }
            }
            "openai-only" => {
                out.insert("openai".into(), "priority".into());
            }
            "claude-only" => {
                out.insert("anthropic".into(), "priority".into());
            }
            t @ ("auto" | "default" | "flex" | "scale") => {
                out.insert("openai".into(), t.into());
            }
            _ => {}
        },
        _ => {}
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use session_model::{Dialect, parse_session_bytes};

    fn run(file: &str) -> (Vec<String>, Migration) {
        let mut records = parse_session_bytes(file.as_bytes(), Dialect::Pi).records;
        let mut n = 0;
        let m = migrate(&mut records, &mut || {
            n += 1;
            format!("id{n:06}")
        });
        (records.iter().map(|r| r.text().to_owned()).collect(), m)
    }

    /// `JSON.parse` reads `1e400` as `Infinity` (at least 3: nothing runs, so nothing is
    /// rewritten and no id changes) and `-1e400` as `-Infinity` (both steps run once;
    /// the result records version 3 and migrates no further).
    #[test]
    fn versions_beyond_a_double_migrate_as_javascript_compares_them() {
        let body = concat!(
            "\n",
            r#"{"type":"message","id":"a1","parentId":null,"timestamp":"t","message":{"role":"user","content":"hi","timestamp":1}}"#,
            "\n",
            r#"{"type":"label","id":"l1","parentId":"a1","timestamp":"t","targetId":"a1","label":"x"}"#,
            "\n",
        );
        for big in ["1e400", "1e309", "1E+400", "\"Infinity\""] {
            let file = format!(r#"{{"type":"session","version":{big},"id":"s","timestamp":"t","cwd":"/"}}"#) + body;
            let (out, m) = run(&file);
            assert!(!m.ran(), "{big}: {m:?}");
            assert_eq!(m.found_version.as_deref(), Some(big), "{big}");
            assert_eq!(out.join("\n") + "\n", file, "{big}: untouched");
        }
        for small in ["-1e400", "-1e309"] {
            let file = format!(r#"{{"type":"session","version":{small},"id":"s","timestamp":"t","cwd":"/"}}"#) + body;
            let (out, m) = run(&file);
            assert!(m.v1_to_v2 && m.v2_to_v3, "{small}: {m:?}");
            assert_eq!(m.found_version.as_deref(), Some(small));
            assert_eq!(out[0], r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#);
            let (again, m2) = run(&(out.join("\n") + "\n"));
            assert!(!m2.ran(), "a migrated file migrates no further");
            assert_eq!(again, out);
        }
    }

    #[test]
    fn v1_example_from_the_pi_spec() {
        let (out, m) = run(concat!(
            r#"{"type":"session","id":"sess-v1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/home/user/proj","provider":"a","modelId":"b"}"#,
            "\n",
            r#"{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#,
            "\n",
            r#"{"type":"message","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"hookMessage","customType":"x","content":"hm","display":true,"timestamp":2}}"#,
            "\n",
            r#"{"type":"compaction","timestamp":"2025-01-01T00:00:03.000Z","summary":"s","firstKeptEntryIndex":2,"tokensBefore":5}"#,
            "\n",
            r#"{"type":"compaction","timestamp":"2025-01-01T00:00:04.000Z","summary":"s2","firstKeptEntryIndex":0,"tokensBefore":5}"#,
            "\n",
        ));
        assert!(m.v1_to_v2 && m.v2_to_v3);
        assert_eq!(m.hook_messages, 1);
        assert_eq!(
            out,
            [
                r#"{"type":"session","id":"sess-v1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/home/user/proj","provider":"a","modelId":"b","version":3}"#,
                r#"{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1},"id":"id000001","parentId":null}"#,
                r#"{"type":"message","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"custom","customType":"x","content":"hm","display":true,"timestamp":2},"id":"id000002","parentId":"id000001"}"#,
                r#"{"type":"compaction","timestamp":"2025-01-01T00:00:03.000Z","summary":"s","tokensBefore":5,"id":"id000003","parentId":"id000002","firstKeptEntryId":"id000002"}"#,
                r#"{"type":"compaction","timestamp":"2025-01-01T00:00:04.000Z","summary":"s2","tokensBefore":5,"id":"id000004","parentId":"id000003"}"#,
            ]
        );
    }

    #[test]
    fn versions_compare_like_javascript() {
        let h = |v: &str| {
            format!(
                "{{\"type\":\"session\",\"id\":\"s\",\"version\":{v}}}\n{{\"type\":\"custom\",\"id\":\"keep\",\"parentId\":null}}\n"
            )
        };
        let (_, m) = run(&h("3"));
        assert!(!m.ran());
        let (_, m) = run(&h("\"3\""));
        assert!(!m.ran());
        let (out, m) = run(&h("2.5"));
        assert!(m.v2_to_v3 && !m.v1_to_v2);
        assert!(out[1].contains("\"keep\""));
        let (out, m) = run(&h("null"));
        assert!(m.v1_to_v2);
        assert!(out[1].contains("id000001"));
        let (out, m) = run(&h("\"abc\""));
        assert!(m.ran() && m.unrecognised_version && !m.v2_to_v3);
        assert!(out[0].contains("\"abc\""));
        let (_, m) = run(&h("0"));
        assert!(m.v1_to_v2);
    }

    /// Found by the `migrate` fuzz target: an entry holding a number beyond f64 had no
    /// JSON tree, so v1 → v2 gave it no id and broke the parent chain.
    #[test]
    fn entries_with_numbers_beyond_f64_are_migrated() {
        let (out, m) = run(concat!(
            "{\"type\":\"session\",\"id\":\"s\"}\n",
            "{\"type\":\"message\",\"message\":{\"role\":\"user\",\"timestamp\":1E+21740819604001}}\n",
            "{\"type\":\"custom\"}\n",
        ));
        assert!(m.v1_to_v2);
        assert_eq!(
            out[1],
            r#"{"type":"message","message":{"role":"user","timestamp":null},"id":"id000001","parentId":null}"#
        );
        assert_eq!(out[2], r#"{"type":"custom","id":"id000002","parentId":"id000001"}"#);
    }

    #[test]
    fn forward_index_and_non_objects() {
        let (out, _) = run(concat!(
            "{\"type\":\"session\",\"id\":\"s\"}\n",
            "{\"type\":\"compaction\",\"firstKeptEntryIndex\":3,\"summary\":\"f\"}\n",
            "42\n",
            "{\"type\":\"custom\"}\n",
        ));
        assert_eq!(out[1], r#"{"type":"compaction","summary":"f","id":"id000001","parentId":null}"#);
        assert_eq!(out[2], "42");
        assert_eq!(out[3], r#"{"type":"custom","id":"id000002","parentId":"id000001"}"#);
    }
}

// The README's example runs as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
