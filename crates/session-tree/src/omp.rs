//! omp's model context and display transcript: `buildSessionContext`.
//!
//! One pass over the root..leaf path derives the settings (thinking level, service
//! tier, model roles, injected rules, mode). Messages are emitted by the first
//! matching rule: the full transcript (every entry, compactions inline), a reset
//! boundary after the latest compaction (only what follows it), the latest
//! compaction (summary, kept range, tail), or the whole path. Then tool calls
//! without a result on the path are stripped, and in the model context failed or
//! aborted assistant turns are dropped with their tool results.
//!
//! Not reproduced (no such data in files these versions write by default): the
//! snapcompact history blocks and the Anthropic native compaction payload of a
//! compaction's `preserveData`, the `experimental_context_notes` prelude and the
//! context-rollover re-emission.

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::{Map, Value};
use session_model::{EntryType, Record, Scalar};

use crate::raw::{self, ObjWriter, RawFields};
use crate::tree::{Leaf, SessionTree};

const SUPERSEDED_SUMMARY: &str = "[Superseded compaction summary elided after a newer compaction]";
const SUPERSEDED_SHORT_SUMMARY: &str = "Superseded compaction elided";
const INTERRUPTED_THINKING: &str = "interrupted-thinking";
const DEFAULT_CUSTOM_MESSAGE_TYPE: &str = "custom-message";

/// How to build the context.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContextOptions {
    /// Build the display transcript (every path entry, compactions inline,
    /// `cacheMissExplainedAt`) instead of the model context.
    pub transcript: bool,
}

/// One emitted message with what post-processing needs to know about it.
#[derive(Clone, Debug)]
struct Msg<'a> {
    json: Cow<'a, str>,
    kind: Kind,
    /// The `message` entry it came from (for tool calls and stop reason).
    source: Option<&'a Record>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Assistant,
    ToolResult,
    Custom,
    Other,
}

/// The result of `buildSessionContext`.
#[derive(Clone, Debug)]
pub struct OmpContext<'a> {
    messages: Vec<Cow<'a, str>>,
    cache_miss: Option<Vec<bool>>,
    thinking_level: Option<String>,
    configured_thinking_level: Option<String>,
    service_tier: Option<String>,
    models: String,
    injected_ttsr_rules: String,
    mode: Option<String>,
    mode_data: Option<String>,
}

impl OmpContext<'_> {
    /// Returns the messages, each as its JSON text.
    pub fn messages(&self) -> impl Iterator<Item = &str> {
        self.messages.iter().map(|m| &**m)
    }

    /// Returns `cacheMissExplainedAt` (transcript only).
    pub fn cache_miss_explained_at(&self) -> Option<&[bool]> {
        self.cache_miss.as_deref()
    }

    /// Returns `thinkingLevel` as JSON text (`"off"` when no change set it).
    pub fn thinking_level_json(&self) -> Option<&str> {
        self.thinking_level.as_deref()
    }

    /// Returns `configuredThinkingLevel` as JSON text, when the latest change had one.
    pub fn configured_thinking_level_json(&self) -> Option<&str> {
        self.configured_thinking_level.as_deref()
    }

    /// Returns the normalised `serviceTier` as JSON text, when one is set.
    pub fn service_tier_json(&self) -> Option<&str> {
        self.service_tier.as_deref()
    }

    /// Returns `models` (role to `provider/model`) as JSON text.
    pub fn models_json(&self) -> &str {
        &self.models
    }

    /// Returns `injectedTtsrRules` as JSON text.
    pub fn injected_ttsr_rules_json(&self) -> &str {
        &self.injected_ttsr_rules
    }

    /// Returns `mode` as JSON text (`"none"` when no change set it).
    pub fn mode_json(&self) -> Option<&str> {
        self.mode.as_deref()
    }

    /// Returns `modeData` as JSON text, when the latest mode change had data.
    pub fn mode_data_json(&self) -> Option<&str> {
        self.mode_data.as_deref()
    }

    /// Returns the context as the reference serialises it: `{messages,
    /// cacheMissExplainedAt?, thinkingLevel, configuredThinkingLevel?, serviceTier?,
    /// models, injectedTtsrRules, mode, modeData?}`.
    pub fn to_json_string(&self) -> String {
        let mut out = String::with_capacity(self.messages.iter().map(|m| m.len() + 1).sum::<usize>() + 128);
        out.push_str("{\"messages\":");
        raw::write_array(&mut out, self.messages.iter().map(|m| &**m));
        if let Some(flags) = &self.cache_miss {
            out.push_str(",\"cacheMissExplainedAt\":");
            raw::write_array(&mut out, flags.iter().map(|&b| if b { "true" } else { "false" }));
        }
        for (key, value) in [
            ("thinkingLevel", self.thinking_level.as_deref()),
            ("configuredThinkingLevel", self.configured_thinking_level.as_deref()),
            ("serviceTier", self.service_tier.as_deref()),
            ("models", Some(&self.models)),
            ("injectedTtsrRules", Some(&self.injected_ttsr_rules)),
            ("mode", self.mode.as_deref()),
            ("modeData", self.mode_data.as_deref()),
        ] {
            if let Some(v) = value {
                out.push_str(",\"");
                out.push_str(key);
                out.push_str("\":");
                out.push_str(&session_model::json::js_exact(v));
            }
        }
        out.push('}');
        out
    }
}

fn empty_context<'a>() -> OmpContext<'a> {
    OmpContext {
        messages: Vec::new(),
        cache_miss: None,
        thinking_level: Some("\"off\"".to_owned()),
        configured_thinking_level: None,
        service_tier: None,
        models: "{}".to_owned(),
        injected_ttsr_rules: "[]".to_owned(),
        mode: Some("\"none\"".to_owned()),
        mode_data: None,
    }
}

/// Builds the context at `leaf` (`buildSessionContext(entries, leafId, byId, options)`).
pub fn build_context<'a>(tree: &'a SessionTree, leaf: Leaf<'_>, opts: ContextOptions) -> OmpContext<'a> {
    let Some(leaf_pos) = tree.resolve_leaf(leaf) else {
        return empty_context();
    };
    let path: Vec<&'a Record> = tree.walk(leaf_pos).into_iter().map(|p| tree.at(p)).collect();
    let mut ctx = empty_context();
    let state = derive_state(&path, &mut ctx);
    let mut b = Builder {
        transcript: opts.transcript,
        messages: Vec::new(),
        cache_miss: Vec::new(),
        pending_reset: false,
        current_mode: None,
        last_assistant_model: None,
    };

    let compaction_idx = state
        .compaction
        .and_then(|c| path.iter().position(|e| e.entry_type() == EntryType::Compaction && e.id() == path[c].id()));
    if opts.transcript {
        for entry in &path {
            b.track_reset(entry);
            if entry.entry_type() == EntryType::Compaction {
                let active = state.compaction.is_some_and(|c| path[c].id() == entry.id());
                let msg = compaction_message(entry, !active, None);
                b.push(msg);
            } else {
                b.append_entry(entry);
            }
        }
    } else if let Some(reset) = state.reset_boundary.filter(|&r| compaction_idx.is_none_or(|c| r as isize > c as isize))
    {
        for entry in &path[reset + 1..] {
            b.append_entry(entry);
        }
    } else if let (Some(c_pos), Some(c_idx)) = (state.compaction, compaction_idx) {
        let compaction = path[c_pos];
        let fields = RawFields::parse(compaction.text());
        let payload = openai_remote_payload(&fields);
        b.push(compaction_message(compaction, false, payload.as_deref()));
        if payload.is_none() {
            for entry in fields.kept(&path[..c_idx]) {
                b.append_entry(entry);
            }
        } else if let Some(through) = fields.string("providerReplayThroughEntryId")
            && let Some(t_idx) = path.iter().position(|e| e.id() == Some(through.as_str()))
            && t_idx < c_idx
        {
            for entry in &path[t_idx + 1..c_idx] {
                b.append_entry(entry);
            }
        }
        for entry in &path[c_idx + 1..] {
            b.append_entry(entry);
        }
    } else {
        for entry in &path {
            b.append_entry(entry);
        }
    }

    strip_dangling_tool_calls(&mut b.messages, opts.transcript);
    if !opts.transcript {
        drop_failed_turns(&mut b.messages);
    }
    ctx.messages = b.messages.into_iter().map(|m| m.json).collect();
    ctx.cache_miss = opts.transcript.then_some(b.cache_miss);
    ctx
}

struct PathState {
    compaction: Option<usize>,
    reset_boundary: Option<usize>,
}

/// The one pass over the path that derives the settings.
fn derive_state(path: &[&Record], ctx: &mut OmpContext<'_>) -> PathState {
    let mut models = Map::new();
    let mut explicit_default = false;
    let mut rules: Vec<Value> = Vec::new();
    let mut seen_rules: HashSet<String> = HashSet::new();
    let mut state = PathState { compaction: None, reset_boundary: None };
    let mut default_from_assistant: Option<&Record> = None;
    for (i, entry) in path.iter().enumerate() {
        match entry.entry_type() {
            EntryType::ThinkingLevelChange => {
                let f = RawFields::parse(entry.text());
                let level = f.non_nullish("thinkingLevel");
                ctx.thinking_level = Some(level.unwrap_or("\"off\"").to_owned());
                ctx.configured_thinking_level = f.non_nullish("configured").or(level).map(str::to_owned);
            }
            EntryType::ModelChange => {
                let f = RawFields::parse(entry.text());
                if let Some(model) = f.raw("model").filter(|r| raw::is_truthy(r)) {
                    let role = match f.non_nullish("role") {
                        None => "default".to_owned(),
                        Some(r) => raw::as_string(r).unwrap_or_else(|| js_string(&raw::to_value(r))),
                    };
                    if role == "default" {
                        explicit_default = true;
                        default_from_assistant = None;
                    }
                    models.insert(role, raw::to_value(model));
                }
            }
            EntryType::ServiceTierChange => {
                let f = RawFields::parse(entry.text());
                ctx.service_tier = coerce_service_tier(f.raw("serviceTier"));
            }
            EntryType::Message if !explicit_default && entry.message_role() == Some("assistant") => {
                // Only the last such assistant before an explicit default counts; its
                // model string is made once, after the pass.
                if !models.contains_key("default") {
                    models.insert("default".to_owned(), Value::Null);
                }
                default_from_assistant = Some(*entry);
            }
            EntryType::Compaction => state.compaction = Some(i),
            EntryType::TtsrInjection => {
                let f = RawFields::parse(entry.text());
                if let Some(Value::Array(items)) = f.raw("injectedRules").map(raw::to_value) {
                    for item in items {
                        let key = match &item {
                            Value::Object(_) | Value::Array(_) => None,
                            other => Some(session_model::json::to_js_string(other)),
                        };
                        if key.as_ref().is_none_or(|k| seen_rules.insert(k.clone())) {
                            rules.push(item);
                        }
                    }
                }
            }
            EntryType::ModeChange => {
                let f = RawFields::parse(entry.text());
                ctx.mode = f.raw("mode").map(str::to_owned);
                ctx.mode_data = f.raw("data").map(str::to_owned);
            }
            EntryType::ResetBoundary => state.reset_boundary = Some(i),
            _ => {}
        }
    }
    if let Some(entry) = default_from_assistant {
        models.insert("default".to_owned(), Value::String(assistant_model(entry)));
    }
    ctx.models = session_model::json::to_js_string(&Value::Object(models));
    ctx.injected_ttsr_rules = session_model::json::to_js_string(&Value::Array(rules));
    state
}

/// `${provider}/${model}` of an assistant message, with JavaScript string conversion.
fn assistant_model(entry: &Record) -> String {
    let info = entry.message_info();
    let part = |s: &Scalar<'_>, key: &str| match s {
        Scalar::Absent => "undefined".to_owned(),
        Scalar::Null => "null".to_owned(),
        Scalar::Str(v) => v.to_string(),
        Scalar::Num(n) => {
            let s = session_model::json::js_number(*n);
            if n.is_nan() { "NaN".to_owned() } else { s }
        }
        Scalar::Bool(b) => b.to_string(),
        Scalar::Array | Scalar::Object => {
            let v = entry.message_raw().map(|r| raw::to_value(&r)).unwrap_or(Value::Null);
            js_string(v.get(key).unwrap_or(&Value::Null))
        }
    };
    format!("{}/{}", part(&info.provider, "provider"), part(&info.model, "model"))
}

/// `String(value)` for a JSON value.
fn js_string(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(_) => session_model::json::to_js_string(v),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            items.iter().map(|i| if i.is_null() { String::new() } else { js_string(i) }).collect::<Vec<_>>().join(",")
        }
        Value::Object(_) => "[object Object]".to_owned(),
    }
}

/// `coerceServiceTierByFamily`: a per-family tier map, or `None` (undefined).
fn coerce_service_tier(raw_tier: Option<&str>) -> Option<String> {
    const TIERS: [&str; 5] = ["auto", "default", "flex", "scale", "priority"];
    let value = raw::to_value(raw_tier?);
    let mut map = Map::new();
    match &value {
        Value::Object(obj) => {
            for family in ["openai", "anthropic", "google"] {
                if let Some(Value::String(t)) = obj.get(family)
                    && TIERS.contains(&t.as_str())
                {
                    map.insert(family.to_owned(), Value::String(t.clone()));
                }
            }
        }
        Value::String(s) => match s.as_str() {
            "priority" => {
                for family in ["openai", "anthropic", "google"] {
                    map.insert(family.to_owned(), Value::from("priority"));
                }
            }
            "openai-only" => {
                map.insert("openai".to_owned(), Value::from("priority"));
            }
            "claude-only" => {
                map.insert("anthropic".to_owned(), Value::from("priority"));
            }
            t if TIERS.contains(&t) => {
                map.insert("openai".to_owned(), Value::from(t));
            }
            _ => {}
        },
        _ => {}
    }
    (!map.is_empty()).then(|| session_model::json::to_js_string(&Value::Object(map)))
}

/// `getOpenAiRemoteCompactionPayload`: the provider payload JSON, if valid.
fn openai_remote_payload(fields: &RawFields<'_>) -> Option<String> {
    let preserve = raw::to_value(fields.raw("preserveData")?);
    let remote = preserve.get("openaiRemoteCompaction")?.as_object()?;
    let provider = remote.get("provider")?.as_str().filter(|p| !p.is_empty())?;
    let items = remote.get("replacementHistory").filter(|h| h.is_array())?;
    let mut out = String::new();
    let mut w = ObjWriter::new(&mut out);
    w.str("type", "openaiResponsesHistory");
    w.str("provider", provider);
    w.value("items", items);
    w.end();
    Some(out)
}

/// `createCompactionSummaryMessage` for a compaction entry.
fn compaction_message<'a>(entry: &Record, superseded: bool, provider_payload: Option<&str>) -> Msg<'a> {
    let f = RawFields::parse(entry.text());
    let mut out = String::new();
    let mut w = ObjWriter::new(&mut out);
    w.str("role", "compactionSummary");
    if superseded {
        w.str("summary", SUPERSEDED_SUMMARY);
        w.str("shortSummary", SUPERSEDED_SHORT_SUMMARY);
    } else {
        w.raw("summary", f.raw("summary"));
        w.raw("shortSummary", f.raw("shortSummary"));
    }
    w.raw("tokensBefore", f.raw("tokensBefore"));
    w.raw("tokensAfter", f.raw("tokensAfter"));
    w.raw("method", f.raw("method"));
    w.raw("providerPayload", provider_payload);
    w.raw("warning", f.raw("warning"));
    w.ms("timestamp", raw::entry_time(&f));
    w.end();
    Msg { json: Cow::Owned(out), kind: Kind::Other, source: None }
}

struct Builder<'a> {
    transcript: bool,
    messages: Vec<Msg<'a>>,
    cache_miss: Vec<bool>,
    pending_reset: bool,
    current_mode: Option<String>,
    last_assistant_model: Option<String>,
}

impl<'a> Builder<'a> {
    fn track_reset(&mut self, entry: &Record) {
        match entry.entry_type() {
            EntryType::Compaction | EntryType::ModelChange => self.pending_reset = true,
            EntryType::ModeChange => {
                let mode = RawFields::parse(entry.text()).string("mode");
                let was_plan = self.current_mode.as_deref() == Some("plan");
                if (mode.as_deref() == Some("plan")) != was_plan {
                    self.pending_reset = true;
                }
                self.current_mode = mode;
            }
            _ => {}
        }
    }

    fn push(&mut self, msg: Msg<'a>) {
        if self.transcript {
            if msg.kind == Kind::Assistant {
                let model = msg.source.map(assistant_model).unwrap_or_default();
                let changed = self.last_assistant_model.as_ref().is_some_and(|m| *m != model);
                self.cache_miss.push(self.pending_reset || changed);
                self.last_assistant_model = Some(model);
                self.pending_reset = false;
            } else {
                self.cache_miss.push(false);
            }
        }
        self.messages.push(msg);
    }

    /// The reference's `appendMessage(entry)`.
    fn append_entry(&mut self, entry: &'a Record) {
        self.track_reset(entry);
        match entry.entry_type() {
            EntryType::Message => {
                let Some(json) = entry.message_raw() else {
                    return;
                };
                let kind = match entry.message_info().role() {
                    Some("assistant") => Kind::Assistant,
                    Some("toolResult") => Kind::ToolResult,
                    Some("custom") => Kind::Custom,
                    _ => Kind::Other,
                };
                if !self.transcript
                    && kind == Kind::Assistant
                    && json.contains("\"retryRecovery\"")
                    && RawFields::parse(as_read(entry, &json)).truthy("retryRecovery")
                {
                    return;
                }
                self.push(Msg { json, kind, source: Some(entry) });
            }
            EntryType::CustomMessage => {
                let f = RawFields::parse(entry.text());
                let custom_type = f.string("customType");
                if !self.transcript && matches!(custom_type.as_deref(), Some("prewalk-plan" | "vibe-mode-context")) {
                    return;
                }
                let Some(content) = f.raw("content").filter(|c| raw::is_string_or_array(c)) else {
                    return;
                };
                let mut out = String::new();
                let mut w = ObjWriter::new(&mut out);
                w.str("role", "custom");
                match custom_type.as_deref().filter(|t| !t.is_empty()) {
                    Some(t) => w.str("customType", t),
                    None => w.str("customType", DEFAULT_CUSTOM_MESSAGE_TYPE),
                }
                w.raw("content", Some(content));
                w.raw("display", Some(if f.raw("display") == Some("true") { "true" } else { "false" }));
                w.raw("details", f.raw("details"));
                if let Some(a) = f.raw("attribution") {
                    w.raw("attribution", Some(if a == "\"user\"" { "\"user\"" } else { "\"agent\"" }));
                }
                w.ms("timestamp", raw::entry_time(&f));
                w.end();
                self.push(Msg { json: Cow::Owned(out), kind: Kind::Custom, source: None });
            }
            EntryType::BranchSummary => {
                if let Some(out) = raw::branch_summary_message(entry.text()) {
                    self.push(Msg { json: Cow::Owned(out), kind: Kind::Other, source: None });
                }
            }
            _ => {}
        }
    }
}

/// A content block's `type` and `id`, read without parsing the block's payload.
struct Block {
    ty: Option<String>,
    id: Option<String>,
    /// `thinkingSignature` is truthy (read from its raw text: `1e400` is `Infinity`).
    signed: bool,
}

/// The raw text of `entry`'s message as it is in the file, where `json` (the message
/// as JavaScript writes it back) has lost what only `JSON.parse` holds: a truth test
/// must see `1e400` as `Infinity`, not as the `null` it is written as.
fn as_read<'e>(entry: &'e Record, json: &'e str) -> &'e str {
    RawFields::parse(entry.text()).raw("message").unwrap_or(json)
}

/// The content blocks of an assistant message, or `None` when `content` is not an array.
fn blocks_of(json: &str) -> Option<Vec<Block>> {
    let content = RawFields::parse(json).raw("content")?;
    if !content.starts_with('[') {
        return None;
    }
    Some(
        session_model::scan::array_elements(content)
            .into_iter()
            .map(|item| {
                let f = RawFields::parse(item);
                Block { ty: f.string("type"), id: f.raw("id").map(id_key), signed: f.truthy("thinkingSignature") }
            })
            .collect(),
    )
}

/// A comparable key for an id value (strings by content, others by JSON text).
fn id_key(raw_id: &str) -> String {
    raw::as_string(raw_id).unwrap_or_else(|| format!("\u{0}{raw_id}"))
}

fn tool_call_id(msg: &Msg<'_>) -> Option<String> {
    // The skeleton already read it when the message came straight from an entry.
    if let Some(source) = msg.source
        && let Scalar::Str(id) = &source.message_info().tool_call_id
    {
        return Some(id.to_string());
    }
    RawFields::parse(&msg.json).raw("toolCallId").map(id_key)
}

/// Removes `toolCall` blocks that have no `toolResult` among the messages.
fn strip_dangling_tool_calls(messages: &mut Vec<Msg<'_>>, transcript: bool) {
    // Cheap filter first: only assistant messages that mention a tool call can change.
    let candidates: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.kind == Kind::Assistant && m.json.contains("\"toolCall\""))
        .map(|(i, _)| i)
        .collect();
    if candidates.is_empty() {
        return;
    }
    let paired: HashSet<String> =
        messages.iter().filter(|m| m.kind == Kind::ToolResult).filter_map(tool_call_id).collect();
    for &i in candidates.iter().rev() {
        let Some(blocks) = blocks_of(messages[i].source.map_or(&*messages[i].json, |e| as_read(e, &messages[i].json)))
        else {
            continue;
        };
        let dangling =
            |b: &Block| b.ty.as_deref() == Some("toolCall") && !b.id.as_ref().is_some_and(|id| paired.contains(id));
        let stripped = blocks.iter().filter(|b| dangling(b)).count();
        if stripped == 0 {
            continue;
        }
        let mut value = raw::to_value(&messages[i].json);
        let kept: Vec<Value> = match value.get("content") {
            Some(Value::Array(items)) => items
                .iter()
                .zip(&blocks)
                .filter(|(_, b)| !dangling(b) && b.ty.as_deref() != Some("redactedThinking"))
                .map(|(item, b)| {
                    let mut item = item.clone();
                    if b.ty.as_deref() == Some("thinking")
                        && b.signed
                        && let Value::Object(map) = &mut item
                    {
                        map.shift_remove("thinkingSignature");
                    }
                    item
                })
                .collect(),
            _ => continue,
        };
        if kept.is_empty() && !transcript {
            messages.remove(i);
            continue;
        }
        if let Value::Object(map) = &mut value {
            map.insert("content".to_owned(), Value::Array(kept));
            if transcript {
                map.insert("strippedToolCalls".to_owned(), Value::from(stripped));
            }
        }
        messages[i].json = Cow::Owned(session_model::json::to_js_string(&value));
    }
}

/// Drops assistant turns that ended in `aborted` or `error`, and their tool results.
fn drop_failed_turns(messages: &mut Vec<Msg<'_>>) {
    let mut i = messages.len();
    while i > 0 {
        i -= 1;
        let m = &messages[i];
        if m.kind != Kind::Assistant {
            continue;
        }
        let failed =
            m.source.is_some_and(|r| matches!(r.message_info().stop_reason.as_str(), Some("aborted" | "error")));
        if !failed {
            continue;
        }
        if let Some(next) = messages.get(i + 1)
            && next.kind == Kind::Custom
            && RawFields::parse(&next.json).string("customType").as_deref() == Some(INTERRUPTED_THINKING)
        {
            continue;
        }
        let dropped: HashSet<String> = blocks_of(&m.json)
            .unwrap_or_default()
            .into_iter()
            .filter(|b| b.ty.as_deref() == Some("toolCall"))
            .filter_map(|b| b.id)
            .collect();
        messages.remove(i);
        if !dropped.is_empty() {
            let mut j = messages.len();
            while j > i {
                j -= 1;
                if messages[j].kind == Kind::ToolResult
                    && tool_call_id(&messages[j]).is_some_and(|id| dropped.contains(&id))
                {
                    messages.remove(j);
                }
            }
        }
    }
}
