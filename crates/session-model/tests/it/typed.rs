//! The typed model against real files: every record of every `testdata/` file reads
//! as a typed [`Entry`] and writes back as the same JSON value; records the agents
//! wrote are written back byte for byte; and each entry type of both dialects reads
//! into its own variant from a line the agents wrote.

use std::collections::BTreeMap;

use serde_json::Value;
use session_model::typed::{Content, ContentBlock, Entry, Message, TypedError};
use session_model::{Dialect, EntryType, Record, json, parse_session_bytes};

use session_testkit::testdata_files;

use crate::support::{DIALECTS, testdata};

/// The JSON value JavaScript sees (numbers as `JSON.stringify` writes them; maps
/// compare without their key order).
pub(crate) fn js_value(v: &Value) -> Value {
    json::parse(&json::to_js_string(v)).expect("the serializer writes JSON")
}

/// Reads `record` as an entry, writes it back and checks that the JSON value is the
/// same; returns the entry.
pub(crate) fn round_trip(record: &Record) -> Result<Entry, TypedError> {
    let entry = record.entry()?;
    let written = Record::from_entry(&entry);
    assert_eq!(js_value(written.value()), js_value(record.value()), "{}", record.text());
    // Reading the written record gives the same entry again.
    assert_eq!(js_value(&written.entry()?.to_value()), js_value(&entry.to_value()));
    Ok(entry)
}

#[test]
fn every_testdata_record_reads_as_an_entry_and_writes_back_the_same_value() -> Result<(), TypedError> {
    let files = testdata_files();
    assert!(files.len() > 100, "{} files", files.len());
    let mut records = 0usize;
    let mut other_text: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut failures: Vec<String> = Vec::new();
    let mut variants: BTreeMap<String, usize> = BTreeMap::new();
    for path in &files {
        let bytes = std::fs::read(path).expect("a testdata file");
        for dialect in DIALECTS {
            let parsed = parse_session_bytes(&bytes, dialect);
            for record in &parsed.records {
                records += 1;
                match round_trip(record) {
                    Ok(entry) => {
                        let name = entry.tag().unwrap_or("unknown").to_owned();
                        *variants.entry(name).or_default() += 1;
                        // The typed kind agrees with the skeleton's.
                        match &entry {
                            Entry::Unknown(_) => assert!(
                                record.entry_type() == EntryType::Unknown || !record.is_object(),
                                "{}",
                                record.text()
                            ),
                            known => assert_eq!(known.tag(), record.entry_type().as_str()),
                        }
                        // The hand-written corners hold texts `JSON.stringify` writes
                        // otherwise (`1e400` as `null`, `1E+2` as `100`): only their values
                        // must come back.
                        let odd = path.to_string_lossy().contains("conformance-odd");
                        if !odd && Record::from_entry(&entry).text() != record.line() {
                            *other_text.entry(entry.tag().unwrap_or("unknown")).or_default() += 1;
                        }
                    }
                    Err(e) => {
                        failures.push(format!("{}: {e}", path.strip_prefix(testdata()).unwrap_or(path).display()))
                    }
                }
            }
        }
    }
    failures.sort();
    failures.dedup();
    // The hand-written JavaScript corners (numbers as ids, names and timestamps, ...)
    // hold records of other types than the model's: each is refused with the path of
    // the field that is wrong, never read as something else.
    let (odd, failures): (Vec<String>, Vec<String>) =
        failures.into_iter().partition(|f| f.starts_with("conformance-odd/"));
    assert!(!odd.is_empty());
    for f in &odd {
        assert!(f.contains(": field `") && f.contains("invalid type"), "{f}");
    }
    // Elsewhere, the only records the typed model refuses: damaged ones, a `message` entry
    // without its message and a header whose id is a number.
    assert_eq!(
        failures,
        [
            "conformance/omp/s0027-damaged-garbage_objects/2026-11-29T19-43-46-429Z_01a228d5-befd-7000-82ba-2ac24c8956e9.jsonl: field `message`: missing",
            "corrupt/bad-header-numeric-id.jsonl: field `id`: invalid type: integer `5`, expected a string"
        ]
    );
    assert!(records > 9000, "{records} records");
    // Every entry comes back in the key order the agent wrote it; only headers of
    // forks and branches (whose orders differ from a new session's) and v1 headers
    // (`version` added last by the migration) are written in the new-session order.
    assert_eq!(other_text.keys().copied().collect::<Vec<_>>(), ["session"], "{other_text:?}");
    assert!(other_text["session"] <= 12, "{other_text:?}");
    for ty in ["session", "message", "compaction", "custom_message", "unknown", "ttsr_injection", "mode_change"] {
        assert!(variants.contains_key(ty), "no {ty} in {variants:?}");
    }
    Ok(())
}

/// Returns the first line of the first testdata file under `dir` whose record has
/// `type`, read in `dialect`.
fn fixture_line(dialect: Dialect, ty: &str) -> Option<Record> {
    testdata_files().iter().find_map(|path| {
        let bytes = std::fs::read(path).ok()?;
        parse_session_bytes(&bytes, dialect).records.into_iter().find(|r| r.type_str() == Some(ty))
    })
}

/// Lines from the specs for the types no testdata file holds.
const SPEC_LINES: &[&str] = &[
    r#"{"type":"credential_pin","id":"a1b2c3d4","parentId":"50b1c889","timestamp":"2026-11-29T19:11:36.574Z","provider":"anthropic","hash":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}"#,
];

#[test]
fn each_entry_type_reads_into_its_variant() -> Result<(), TypedError> {
    let types = [
        "session",
        "message",
        "thinking_level_change",
        "model_change",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
        "context_edit",
        "usage",
        "service_tier_change",
        "title_change",
        "model_usage",
        "mode_change",
        "session_init",
        "reset_boundary",
        "ttsr_injection",
        "credential_pin",
    ];
    for ty in types {
        let dialect = if ["session_info", "context_edit", "usage"].contains(&ty) { Dialect::Pi } else { Dialect::Omp };
        let record = match fixture_line(dialect, ty).or_else(|| fixture_line(Dialect::Pi, ty)) {
            Some(r) => r,
            None => {
                let line = SPEC_LINES.iter().find(|l| l.contains(&format!(r#""type":"{ty}""#))).expect("a spec line");
                Record::parse(line)?
            }
        };
        let entry = round_trip(&record)?;
        assert_eq!(entry.tag(), Some(ty), "{}", record.text());
        // A line the agent wrote comes back byte for byte.
        assert_eq!(Record::from_entry(&entry).text(), record.line(), "{ty}");
        match &entry {
            Entry::Session(h) => assert!(h.id.is_some() && h.cwd.is_some()),
            Entry::Message(m) => assert!(m.id.is_some() && m.message.role().is_some()),
            Entry::ThinkingLevelChange(t) => assert!(t.thinking_level.is_some()),
            Entry::ModelChange(m) => assert!(m.model.is_some() || m.provider.is_some()),
            Entry::Compaction(c) => assert!(c.tokens_before >= 0.0),
            Entry::BranchSummary(b) => assert!(!b.from_id.is_empty()),
            Entry::Custom(c) => assert!(!c.custom_type.is_empty()),
            Entry::CustomMessage(c) => assert!(!c.custom_type.is_empty()),
            Entry::Label(l) => assert!(!l.target_id.is_empty()),
            Entry::SessionInfo(_) | Entry::ResetBoundary(_) | Entry::SessionInit(_) | Entry::ModeChange(_) => {}
            Entry::ContextEdit(c) => assert!(c.replacement.is_some()),
            Entry::Usage(u) => assert!(!u.kind.is_empty()),
            Entry::ServiceTierChange(s) => assert!(s.service_tier.is_some()),
            Entry::TitleChange(t) => assert!(!t.source.is_empty()),
            Entry::ModelUsage(m) => assert!(m.usage.is_some()),
            Entry::TtsrInjection(t) => assert!(!t.injected_rules.is_empty()),
            Entry::CredentialPin(c) => assert_eq!(c.provider, "anthropic"),
            other => panic!("unexpected {other:?}"),
        }
    }
    Ok(())
}

#[test]
fn each_message_role_and_block_type_reads_into_its_variant() -> Result<(), TypedError> {
    let mut roles: BTreeMap<String, usize> = BTreeMap::new();
    let mut blocks: BTreeMap<String, usize> = BTreeMap::new();
    for path in testdata_files() {
        let bytes = std::fs::read(&path).expect("a testdata file");
        for record in parse_session_bytes(&bytes, Dialect::Pi).records {
            let Ok(Entry::Message(m)) = record.entry() else { continue };
            let role = match &m.message {
                Message::Unknown(_) => "unknown",
                known => known.role().unwrap_or_default(),
            };
            *roles.entry(role.to_owned()).or_default() += 1;
            let content = match &m.message {
                Message::User(u) => Some(u.content.clone()),
                Message::Assistant(a) => Some(Content::Blocks(a.content.clone())),
                Message::ToolResult(t) => Some(t.content.clone()),
                _ => None,
            };
            if let Some(Content::Blocks(items)) = content {
                for b in items {
                    let name = match &b {
                        ContentBlock::Unknown(_) => "unknown",
                        known => known.tag().unwrap_or_default(),
                    };
                    *blocks.entry(name.to_owned()).or_default() += 1;
                }
            }
        }
    }
    for role in ["user", "assistant", "toolResult", "system", "bashExecution", "hookMessage"] {
        assert!(roles.contains_key(role), "no {role} in {roles:?}");
    }
    assert!(!roles.contains_key("unknown"), "{roles:?}");
    for block in ["text", "image", "thinking", "toolCall"] {
        assert!(blocks.contains_key(block), "no {block} in {blocks:?}");
    }
    assert!(!blocks.contains_key("unknown"), "{blocks:?}");
    Ok(())
}

/// Property tests: records made by the builders, records made from the typed
/// schema with unknown keys, and arbitrary JSON.
mod props {
    use proptest::prelude::*;
    use serde_json::{Map, Value};
    use session_model::typed::{Entry, TypedError};
    use session_model::{Dialect, Record, parse_session_bytes};

    use super::js_value;
    use crate::roundtrip::{build, spec};
    use crate::support::arb;

    /// The JSON type a key holds in the typed model.
    #[derive(Clone, Copy, Debug)]
    enum K {
        Str,
        Num,
        Bool,
        Any,
        NullStr,
        NullNum,
        Ms,
        Strs,
        Usage,
        Cost,
        Msg,
        Content,
        Blocks,
        Tier,
        NullRepl,
    }
    use K::*;

    /// Keys as `name[:kind][!]`, blank-separated: a key is a string unless its kind is
    /// named (`K`'s variant in lower case), and `!` marks a required key.
    type Fields = &'static str;

    /// The keys of `fields`, each with its kind and whether it is required.
    fn keys(fields: Fields) -> Vec<(&'static str, K, bool)> {
        let kinds =
            [Str, Num, Bool, Any, NullStr, NullNum, Ms, Strs, Usage, Cost, Msg, Content, Blocks, Tier, NullRepl];
        let kind = |name: &str| kinds.into_iter().find(|k| format!("{k:?}").eq_ignore_ascii_case(name));
        let key = |spec: &'static str| {
            let (spec, required) = spec.strip_suffix('!').map_or((spec, false), |s| (s, true));
            let (name, k) = spec.split_once(':').unwrap_or((spec, "str"));
            (name, kind(k).expect("a kind `K` names"), required)
        };
        fields.split_whitespace().map(key).collect()
    }

    const BASE: Fields = "id parentId:nullstr timestamp";

    /// Every entry type with its keys (besides the base keys).
    const ENTRIES: &[(&str, Fields)] = &[
        ("message", "message:msg!"),
        ("thinking_level_change", "thinkingLevel:nullstr configured:nullstr"),
        ("model_change", "provider modelId model role resolvedModelIsFallback:bool"),
        (
            "compaction",
            "summary! shortSummary firstKeptEntryId firstKeptEntryIndex:num tokensBefore:num! tokensAfter:num \
            method providerReplayThroughEntryId details:any usage:usage fromHook:bool systemMessage:msg \
            fromExtension:bool preserveData:any",
        ),
        ("branch_summary", "fromId! summary! details:any usage:usage fromHook:bool fromExtension:bool"),
        ("custom", "customType! data:any"),
        ("custom_message", "customType! content:content! display:bool! details:any attribution"),
        ("label", "targetId! label"),
        ("session_info", "name!"),
        ("context_edit", "targetId! replacement:nullrepl"),
        ("usage", "kind! provider! model! usage:usage! note"),
        ("service_tier_change", "serviceTier:tier"),
        ("title_change", "title! source! previousTitle trigger"),
        ("model_usage", "purpose role api provider model usage:usage stopReason errorMessage"),
        ("mode_change", "mode! data:any"),
        ("session_init", "systemPrompt task tools:any"),
        ("reset_boundary", ""),
        ("ttsr_injection", "injectedRules:strs!"),
        ("credential_pin", "provider! hash!"),
    ];

    const HEADER: Fields = "version:num id timestamp cwd parentSession providerPromptCacheKey additionalDirectories:strs \
        previousSessionFiles:strs title titleSource";

    /// Every message role with its keys.
    const MESSAGES: &[(&str, Fields)] = &[
        ("user", "content:content! attribution timestamp:ms"),
        ("assistant", "content:blocks! api provider model usage:usage stopReason errorMessage timestamp:ms"),
        ("toolResult", "toolCallId! toolName! content:content! details:any isError:bool! timestamp:ms"),
        ("system", "content:content! sections:any toolsAdded:any toolsRemoved:any timestamp:ms"),
        ("developer", "content:content! timestamp:ms"),
        (
            "bashExecution",
            "command! output! exitCode:nullnum cancelled:bool! truncated:bool! fullOutputPath \
            excludeFromContext:bool timestamp:ms",
        ),
        ("custom", "customType! content:content! display:bool! details:any attribution timestamp:ms"),
        ("branchSummary", "summary! fromId! timestamp:ms"),
        (
            "compactionSummary",
            "summary! shortSummary tokensBefore:num! tokensAfter:num method providerPayload:any blocks:any \
            images:any warning historyRewriteAt:num timestamp:ms",
        ),
    ];

    /// Every content block type with its keys.
    const BLOCKS: &[(&str, Fields)] = &[
        ("text", "text!"),
        ("image", "data! mimeType!"),
        ("thinking", "thinking! thinkingSignature redacted:bool"),
        ("redactedThinking", "data!"),
        ("toolCall", "id! name! arguments:any!"),
    ];

    const USAGE: Fields = "input:num output:num cacheRead:num cacheWrite:num cacheWrite1h:num reasoning:num totalTokens:num \
        cost:cost";

    const COST: Fields = "input:num output:num cacheRead:num cacheWrite:num total:num";

    fn num() -> BoxedStrategy<Value> {
        arb::number().prop_map(Value::Number).boxed()
    }

    fn string() -> BoxedStrategy<Value> {
        arb::string().prop_map(Value::String).boxed()
    }

    /// A value of kind `k`.
    fn of(k: K, depth: u32) -> BoxedStrategy<Value> {
        match k {
            Str => string(),
            Num => num(),
            Bool => any::<bool>().prop_map(Value::Bool).boxed(),
            Any => arb::json().boxed(),
            NullStr => prop_oneof![Just(Value::Null), string()].boxed(),
            NullNum | Ms => prop_oneof![Just(Value::Null), num()].boxed(),
            Strs => prop::collection::vec(arb::string().prop_map(Value::String), 0..3).prop_map(Value::Array).boxed(),
            Usage => object(USAGE, None, depth),
            Cost => object(COST, None, depth),
            Msg => tagged("role", MESSAGES, depth),
            Content => prop_oneof![string(), of(Blocks, depth)].boxed(),
            Blocks if depth == 0 => Just(Value::Array(Vec::new())).boxed(),
            Blocks => prop::collection::vec(tagged("type", BLOCKS, depth - 1), 0..3).prop_map(Value::Array).boxed(),
            Tier => prop_oneof![
                Just(Value::Null),
                string(),
                prop::collection::vec((prop_oneof![Just("openai".to_owned()), arb::key()], arb::json()), 0..3)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
            .boxed(),
            NullRepl => prop_oneof![Just(Value::Null), object("content:content", None, depth),].boxed(),
        }
    }

    /// Whether `key` is a key the model knows somewhere (unknown keys avoid them).
    fn known(key: &str) -> bool {
        let tables = ENTRIES.iter().chain(MESSAGES).chain(BLOCKS).map(|(_, f)| *f);
        ["type", "role"].contains(&key)
            || [BASE, HEADER, USAGE, COST]
                .into_iter()
                .chain(tables)
                .any(|fields| keys(fields).iter().any(|(k, _, _)| *k == key))
    }

    /// An object with `fields` (each optional one present or not), the tag first when
    /// given, and up to two unknown keys.
    fn object(fields: Fields, tag: Option<(&'static str, &'static str)>, depth: u32) -> BoxedStrategy<Value> {
        let members: Vec<BoxedStrategy<Option<(String, Value)>>> = keys(fields)
            .into_iter()
            .map(|(key, kind, required)| {
                let value = of(kind, depth.saturating_sub(1)).prop_map(move |v| Some((key.to_owned(), v)));
                if required { value.boxed() } else { prop_oneof![Just(None), value].boxed() }
            })
            .collect();
        let extra = prop::collection::vec(
            (arb::key().prop_map(|k| if known(&k) { format!("{k}~") } else { k }), arb::json()),
            0..3,
        );
        (members, extra)
            .prop_map(move |(members, extra)| {
                let mut map = Map::new();
                if let Some((k, v)) = tag {
                    map.insert(k.to_owned(), Value::from(v));
                }
                map.extend(members.into_iter().flatten());
                map.extend(extra);
                Value::Object(map)
            })
            .boxed()
    }

    /// One of `variants` tagged by `tag`, or an object of an unknown tag, or any JSON.
    fn tagged(tag: &'static str, variants: &'static [(&'static str, Fields)], depth: u32) -> BoxedStrategy<Value> {
        let known: Vec<BoxedStrategy<Value>> =
            variants.iter().map(|&(name, fields)| object(fields, Some((tag, name)), depth)).collect();
        let unknown = (arb::string(), arb::json()).prop_map(move |(name, v)| {
            let mut map = Map::new();
            map.insert(tag.to_owned(), Value::String(format!("{name}~")));
            if let Value::Object(m) = v {
                map.extend(m);
            }
            Value::Object(map)
        });
        if known.is_empty() {
            return prop_oneof![3 => unknown, 1 => arb::json()].boxed();
        }
        prop_oneof![8 => prop::strategy::Union::new(known), 1 => unknown, 1 => arb::json()].boxed()
    }

    /// Any entry of the schema, the header, or an entry of an unknown type.
    fn entry() -> BoxedStrategy<Value> {
        let mut all: Vec<BoxedStrategy<Value>> = ENTRIES
            .iter()
            .map(|&(name, fields)| {
                let base_first = !matches!(name, "custom" | "custom_message");
                let fields: Fields = if fields.is_empty() { BASE } else { fields };
                (object(BASE, Some(("type", name)), 2), object(fields, None, 2))
                    .prop_map(move |(base, payload)| {
                        let (Value::Object(mut first), Value::Object(mut second)) = (base, payload) else {
                            unreachable!("objects")
                        };
                        if !base_first {
                            // `type` stays first: custom entries put the base keys last.
                            let ty = first.shift_remove("type").unwrap_or(Value::Null);
                            std::mem::swap(&mut first, &mut second);
                            first.shift_insert(0, "type".to_owned(), ty);
                        }
                        first.extend(second);
                        Value::Object(first)
                    })
                    .boxed()
            })
            .collect();
        all.push(object(HEADER, Some(("type", "session")), 2));
        all.push(tagged("type", &[], 2));
        prop::strategy::Union::new(all).boxed()
    }

    /// Checks that a record read as a typed entry writes back as the same JSON value.
    fn same_value(record: &Record) -> Result<Entry, TestCaseError> {
        let entry = record.entry().map_err(|e| TestCaseError::fail(format!("{e}: {}", record.text())))?;
        let written = Record::from_entry(&entry);
        prop_assert_eq!(js_value(written.value()), js_value(record.value()), "{}", record.text());
        Ok(entry)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Every record of the schema, unknown keys and unknown tags included, reads as
        /// an entry that writes back the same JSON value.
        #[test]
        fn typed_entries_write_back_the_same_value(value in entry()) {
            same_value(&Record::from_value(value))?;
        }

        /// Any JSON value either reads as an entry that writes back the same JSON
        /// value, or is refused with an error that names a key: never a panic.
        #[test]
        fn any_json_reads_or_is_refused_by_name(value in arb::json(), ty in prop::sample::select(ENTRIES.iter().map(|e| e.0).collect::<Vec<_>>())) {
            let value = match value {
                Value::Object(mut m) => {
                    m.shift_insert(0, "type".to_owned(), Value::from(ty));
                    Value::Object(m)
                }
                other => other,
            };
            let record = Record::from_value(value);
            match record.entry() {
                Ok(_) => { same_value(&record)?; }
                Err(TypedError::Field { path, .. }) => prop_assert!(!path.is_empty()),
                Err(e) => prop_assert!(false, "{e}"),
            }
        }

        /// Records the builders make (each reference's key order) read as entries and,
        /// when their payloads fit the typed model, write back byte for byte.
        #[test]
        fn built_records_write_back_byte_for_byte(specs in prop::collection::vec(spec(), 1..8), omp in any::<bool>()) {
            let dialect = if omp { Dialect::Omp } else { Dialect::Pi };
            for s in &specs {
                let record = build(dialect, s);
                if let Ok(entry) = record.entry() {
                    let written = Record::from_entry(&entry);
                    prop_assert_eq!(written.text(), record.text());
                }
            }
        }

        /// In a file whose records are partly replaced through the typed model, the
        /// records left alone are written back byte for byte.
        #[test]
        fn untouched_records_keep_every_byte(values in prop::collection::vec(entry(), 1..10), touch in prop::collection::vec(any::<bool>(), 10)) {
            // Objects only: the parser drops `null` and `false` lines.
            let lines: Vec<String> =
                values.into_iter().filter(Value::is_object).map(|v| Record::from_value(v).text().to_owned()).collect();
            let file: String = lines.iter().map(|l| format!("{l}\n")).collect();
            let parsed = parse_session_bytes(file.as_bytes(), Dialect::Pi);
            prop_assert_eq!(parsed.records.len(), lines.len());
            let mut out = String::new();
            for (i, record) in parsed.records.iter().enumerate() {
                let line = if touch[i] {
                    let entry = same_value(record)?;
                    Record::from_entry(&entry).text().to_owned()
                } else {
                    // Read typed but not changed: the record is still its text.
                    let _ = record.entry();
                    prop_assert_eq!(record.line(), lines[i].as_str());
                    record.line().into_owned()
                };
                out.push_str(&line);
                out.push('\n');
            }
            for (i, (a, b)) in out.lines().zip(&lines).enumerate() {
                if !touch[i] {
                    prop_assert_eq!(a, b.as_str());
                }
            }
        }
    }
}
