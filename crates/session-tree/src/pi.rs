//! pi's model context: `buildSessionContext` and `buildSessionProjection`.
//!
//! The path runs from the root to the leaf. Model and thinking level are replayed
//! over the whole path; the messages come from the compaction-aware selection: the
//! latest compaction, the kept range from its `firstKeptEntryId` (without system
//! messages), then everything after it. Context edits on the selection replace a
//! message's `content` or drop it. Message payloads are copied as raw JSON text
//! unless the reference changes them.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;

use serde_json::Value;
use session_model::{EntryType, Record, Scalar};

use crate::raw::{self, ObjWriter, RawFields};
use crate::tree::{Leaf, SessionTree};

/// One context message: its role (when known) and its JSON text.
#[derive(Clone, Debug)]
struct Msg<'a> {
    role: Option<Cow<'a, str>>,
    json: Cow<'a, str>,
}

/// The result of `buildSessionContext`: messages, thinking level and model.
#[derive(Clone, Debug)]
pub struct PiContext<'a> {
    messages: Vec<Cow<'a, str>>,
    thinking_level: Option<Cow<'a, str>>,
    model: String,
}

impl PiContext<'_> {
    /// Returns the messages, each as its JSON text.
    pub fn messages(&self) -> impl Iterator<Item = &str> {
        self.messages.iter().map(|m| &**m)
    }

    /// Returns the thinking level as JSON text (`None` when a change entry had none).
    pub fn thinking_level_json(&self) -> Option<&str> {
        self.thinking_level.as_deref()
    }

    /// Returns the model as JSON text: `null` or `{"provider":..,"modelId":..}`.
    pub fn model_json(&self) -> &str {
        &self.model
    }

    /// Returns `{"messages":[..],"thinkingLevel":..,"model":..}` as the reference
    /// serialises it.
    pub fn to_json_string(&self) -> String {
        let mut out = String::with_capacity(self.messages.iter().map(|m| m.len() + 1).sum::<usize>() + 64);
        out.push_str("{\"messages\":");
        raw::write_array(&mut out, self.messages.iter().map(|m| &**m));
        write_settings(&mut out, self.thinking_level.as_deref(), &self.model);
        out
    }
}

/// The result of `buildSessionProjection`: every selected entry with the messages it
/// contributes, plus the flattened messages and the settings.
#[derive(Clone, Debug)]
pub struct PiProjection<'a> {
    entries: Vec<(&'a Record, Range<usize>)>,
    messages: Vec<Cow<'a, str>>,
    thinking_level: Option<Cow<'a, str>>,
    model: String,
}

impl<'a> PiProjection<'a> {
    /// Returns the selected entries with the JSON texts of their messages.
    pub fn entries(&self) -> impl Iterator<Item = (&'a Record, &[Cow<'a, str>])> {
        self.entries.iter().map(|(r, range)| (*r, &self.messages[range.clone()]))
    }

    /// Returns the context this projection flattens to.
    pub fn into_context(self) -> PiContext<'a> {
        PiContext { messages: self.messages, thinking_level: self.thinking_level, model: self.model }
    }

    /// Returns `{"entries":[{"sourceEntry":..,"messages":[..]}],"messages":[..],
    /// "thinkingLevel":..,"model":..}` as the reference serialises it.
    pub fn to_json_string(&self) -> String {
        let mut out = String::with_capacity(
            self.messages.iter().map(|m| 2 * m.len() + 2).sum::<usize>()
                + self.entries.iter().map(|(r, _)| r.text().len() + 32).sum::<usize>()
                + 64,
        );
        out.push_str("{\"entries\":[");
        for (i, (record, range)) in self.entries.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str("{\"sourceEntry\":");
            out.push_str(&record.line());
            out.push_str(",\"messages\":");
            raw::write_array(&mut out, self.messages[range.clone()].iter().map(|m| &**m));
            out.push('}');
        }
        out.push_str("],\"messages\":");
        raw::write_array(&mut out, self.messages.iter().map(|m| &**m));
        write_settings(&mut out, self.thinking_level.as_deref(), &self.model);
        out
    }
}

fn write_settings(out: &mut String, thinking_level: Option<&str>, model: &str) {
    if let Some(t) = thinking_level {
        out.push_str(",\"thinkingLevel\":");
        out.push_str(&session_model::json::js_exact(t));
    }
    out.push_str(",\"model\":");
    out.push_str(model);
    out.push('}');
}

/// Builds the model context at `leaf` (`buildSessionContext`).
pub fn build_context<'a>(tree: &'a SessionTree, leaf: Leaf<'_>) -> PiContext<'a> {
    build_projection(tree, leaf).into_context()
}

/// Builds the projection at `leaf` (`buildSessionProjection`).
pub fn build_projection<'a>(tree: &'a SessionTree, leaf: Leaf<'_>) -> PiProjection<'a> {
    let path = tree.path(leaf);
    let (thinking_level, model) = settings(&path);
    let selected = context_entries(&path);
    let mut edits: HashMap<String, &'a Record> = HashMap::new();
    for entry in &selected {
        if entry.entry_type() == EntryType::ContextEdit
            && let Some(target) = RawFields::parse(entry.text()).string("targetId")
        {
            edits.insert(target, entry);
        }
    }
    let mut entries = Vec::with_capacity(selected.len());
    let mut messages = Vec::with_capacity(selected.len());
    for (index, entry) in selected.into_iter().enumerate() {
        let start = messages.len();
        // Only the newest compaction (always first) contributes its summary; an
        // older one inside the kept range contributes nothing.
        if !(entry.entry_type() == EntryType::Compaction && index > 0) {
            let edit = if edits.is_empty() { None } else { entry.id().and_then(|id| edits.get(id)).copied() };
            messages.extend(project_entry(entry, edit).into_iter().map(|m| m.json));
        }
        entries.push((entry, start..messages.len()));
    }
    PiProjection { entries, messages, thinking_level, model }
}

/// Replays thinking level and model over the whole path (only the last change of
/// each matters, so only those are read).
fn settings<'a>(path: &[&'a Record]) -> (Option<Cow<'a, str>>, String) {
    let mut thinking_entry: Option<&'a Record> = None;
    let mut model_entry: Option<&'a Record> = None;
    for &entry in path {
        match entry.entry_type() {
            EntryType::ThinkingLevelChange => thinking_entry = Some(entry),
            EntryType::ModelChange => model_entry = Some(entry),
            EntryType::Message if entry.message_role() == Some("assistant") => model_entry = Some(entry),
            _ => {}
        }
    }
    let thinking = match thinking_entry {
        None => Some(Cow::Borrowed("\"off\"")),
        Some(e) => RawFields::parse(e.text()).raw("thinkingLevel").map(Cow::Borrowed),
    };
    let model = match model_entry {
        None => String::from("null"),
        Some(e) if e.entry_type() == EntryType::ModelChange => {
            let f = RawFields::parse(e.text());
            model_json(f.raw("provider").map(Cow::Borrowed), f.raw("modelId").map(Cow::Borrowed))
        }
        Some(e) => {
            let info = e.message_info();
            model_json(scalar_json(e, &info.provider, "provider"), scalar_json(e, &info.model, "model"))
        }
    };
    (thinking, model)
}

fn model_json(provider: Option<Cow<'_, str>>, model_id: Option<Cow<'_, str>>) -> String {
    let mut out = String::new();
    let mut w = ObjWriter::new(&mut out);
    w.raw("provider", provider.as_deref());
    w.raw("modelId", model_id.as_deref());
    w.end();
    out
}

/// Returns a message field as JSON text from the skeleton, parsing the message
/// only for nested values.
pub(crate) fn scalar_json<'r>(entry: &Record, s: &Scalar<'_>, key: &str) -> Option<Cow<'r, str>> {
    Some(Cow::Owned(match s {
        Scalar::Absent => return None,
        Scalar::Null => "null".to_owned(),
        Scalar::Str(v) => {
            let mut o = String::with_capacity(v.len() + 2);
            session_model::json::write_js_str(&mut o, v);
            o
        }
        Scalar::Num(n) => session_model::json::js_number(*n),
        Scalar::Bool(b) => b.to_string(),
        Scalar::Array | Scalar::Object => {
            let raw = entry.message_raw()?;
            let v = raw::to_value(&raw);
            session_model::json::to_js_string(v.get(key)?)
        }
    }))
}

/// `buildContextEntries`: the compaction-aware selection of path entries.
fn context_entries<'a>(path: &[&'a Record]) -> Vec<&'a Record> {
    let Some(compaction_idx) = path.iter().rposition(|e| e.entry_type() == EntryType::Compaction) else {
        return path.to_vec();
    };
    let compaction = path[compaction_idx];
    let kept = RawFields::parse(compaction.text()).kept(&path[..compaction_idx]);
    let mut out = vec![compaction];
    out.extend(kept.iter().filter(|entry| entry.message_role() != Some("system")));
    out.extend_from_slice(&path[compaction_idx + 1..]);
    out
}

/// `projectContextEntry`: the entry's messages with its context edit applied.
fn project_entry<'a>(entry: &'a Record, edit: Option<&Record>) -> Vec<Msg<'a>> {
    let messages = entry_messages(entry);
    let Some(edit) = edit else {
        return messages;
    };
    let fields = RawFields::parse(edit.text());
    let Some(replacement) = fields.raw("replacement") else {
        return messages;
    };
    if replacement == "null" {
        return Vec::new();
    }
    let content = RawFields::parse(replacement).raw("content");
    messages
        .into_iter()
        .map(|m| {
            let role = m.role.as_deref();
            if !matches!(role, Some("user" | "assistant" | "toolResult" | "custom")) {
                return m;
            }
            let wrap = matches!(role, Some("assistant" | "toolResult"));
            let new_content = content.map(|c| match raw::as_string(c) {
                Some(text) if wrap => serde_json::json!([{ "type": "text", "text": text }]),
                _ => raw::to_value(c),
            });
            Msg { json: raw::with_content(&m.json, new_content), role: m.role }
        })
        .collect()
}

/// `sessionEntryToContextMessages`: the messages one entry contributes.
fn entry_messages(entry: &Record) -> Vec<Msg<'_>> {
    match entry.entry_type() {
        EntryType::Message => {
            let Some(raw_msg) = entry.message_raw() else {
                return Vec::new();
            };
            let info = entry.message_info();
            let role = info.role();
            let empty = matches!(info.content, Scalar::Null | Scalar::Absent);
            let json = match role {
                Some("system") if empty => raw::with_content(&raw_msg, Some(Value::from(""))),
                Some("user" | "assistant" | "toolResult") if empty => {
                    raw::with_content(&raw_msg, Some(Value::Array(Vec::new())))
                }
                _ => raw_msg,
            };
            vec![Msg { role: role.map(Cow::Borrowed), json }]
        }
        EntryType::CustomMessage => {
            let f = RawFields::parse(entry.text());
            let mut out = String::new();
            let mut w = ObjWriter::new(&mut out);
            w.str("role", "custom");
            w.raw("customType", f.raw("customType"));
            w.raw("content", Some(f.non_nullish("content").unwrap_or("[]")));
            w.raw("display", f.raw("display"));
            w.raw("details", f.raw("details"));
            w.ms("timestamp", raw::entry_time(&f));
            w.end();
            vec![Msg { role: Some(Cow::Borrowed("custom")), json: Cow::Owned(out) }]
        }
        EntryType::BranchSummary => match raw::branch_summary_message(entry.text()) {
            Some(out) => vec![Msg { role: Some(Cow::Borrowed("branchSummary")), json: Cow::Owned(out) }],
            None => Vec::new(),
        },
        EntryType::Compaction => {
            let f = RawFields::parse(entry.text());
            let mut out = String::new();
            let mut w = ObjWriter::new(&mut out);
            w.str("role", "compactionSummary");
            w.raw("summary", f.raw("summary"));
            w.raw("tokensBefore", f.raw("tokensBefore"));
            w.ms("timestamp", raw::entry_time(&f));
            w.end();
            let summary = Msg { role: Some(Cow::Borrowed("compactionSummary")), json: Cow::Owned(out) };
            match f.raw("systemMessage").filter(|r| raw::is_truthy(r)) {
                Some(system) => {
                    let role = RawFields::parse(system).string("role").map(Cow::Owned);
                    vec![Msg { role, json: Cow::Owned(system.to_owned()) }, summary]
                }
                None => vec![summary],
            }
        }
        _ => Vec::new(),
    }
}
