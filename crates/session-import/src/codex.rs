//! Codex rollouts: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`.
//!
//! Each line is `{timestamp, type, payload}` (codex-rs `RolloutLine`, `RolloutItem`
//! tagged by `type` with its `payload`). A rollout is linear, so the import is one
//! chain, in file order:
//!
//! | record | entry |
//! |---|---|
//! | `session_meta` | the header's id, cwd and start; kept as a custom entry too |
//! | `response_item` `message` role `user` | `message` role `user` (images from their data URLs) |
//! | … whose text is scaffolding (`<environment_context>`, `<user_instructions>`, …) | `custom` `import:codex:scaffolding` |
//! | `message` role `assistant`, `reasoning`, `function_call`, `custom_tool_call`, `local_shell_call` | added, in order, to the assistant message of the current response: text, thinking (the summary; `thinkingSignature` the item as JSON), toolCall (`arguments` parsed from the JSON string) |
//! | `function_call_output`, `custom_tool_call_output` | `message` role `toolResult` (`output` a string or a list of items; `toolName` from its call) |
//! | `event_msg` `token_count` | the usage (`info.last_token_usage`) of the response before it |
//! | `turn_context` with another model | `model_change`, then the record as custom |
//! | `compacted` | `compaction` (summary `message`, `details` the rest: the replacement history) |
//! | everything else | `custom` `import:codex:<type>` (for a `response_item`, its item's type), data = the record |

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::out::{Ids, Kind, Node, count, image_from_data_url, iso, ordered, usage};
use crate::{Diagnostic, DiagnosticKind, ImportError, Imported, SourceKind, line_count, objects};

/// Top-level kinds of codex-rs' `RolloutItem` kept as custom entries without a
/// diagnostic.
const KNOWN_KINDS: &[&str] = &[
    "inter_agent_communication",
    "inter_agent_communication_metadata",
    "token_usage_record",
    "world_state",
    "retained_context",
    "security_risk_score",
    "realtime_item",
];

/// `ResponseItem` types kept as custom entries without a diagnostic.
const KNOWN_ITEMS: &[&str] = &[
    "web_search_call",
    "tool_search_call",
    "tool_search_output",
    "image_generation_call",
    "compaction",
    "compaction_summary",
    "ghost_snapshot",
    "other",
];

/// How scaffolding user messages (context Codex adds, not a person's turn) begin.
const SCAFFOLDING: &[&str] = &[
    "<environment_context>",
    "<user_instructions>",
    "<permissions instructions>",
    "<developer_instructions>",
    "<INSTRUCTIONS>",
    "# AGENTS.md instructions",
    "<turn_aborted>",
];

struct State {
    ids: Ids,
    nodes: Vec<Node>,
    session: String,
    /// The assistant message of the response being read (node index).
    open: Option<usize>,
    /// The last assistant message whose usage is still unknown.
    needs_usage: Option<usize>,
    provider: String,
    model: Option<String>,
    tools: HashMap<String, String>,
    /// The input tokens of the last `token_count` (the compaction's `tokensBefore`).
    last_input: u64,
    diagnostics: Vec<Diagnostic>,
}

impl State {
    fn push(&mut self, no: usize, sub: &str, ts: &str, kind: Kind) -> String {
        let id = self.ids.mint(&format!("{}:{no}{sub}", self.session));
        let parent = self.nodes.last().map(|n| n.id.clone());
        self.nodes.push(Node { id: id.clone(), parent, timestamp: ts.to_owned(), kind });
        id
    }

    /// A custom entry holding the whole source `record`.
    fn custom(&mut self, no: usize, ts: &str, kind: &str, record: &Map<String, Value>) {
        let data = Value::Object(record.clone());
        self.push(no, "", ts, Kind::Custom { custom_type: format!("import:codex:{kind}"), data });
    }

    fn diag(&mut self, line: usize, kind: DiagnosticKind, message: String) {
        self.diagnostics.push(Diagnostic { line, kind, message });
    }

    /// Adds `block` to the open assistant message, opening one when none is.
    fn assistant_block(&mut self, no: usize, ts: &str, block: Value) {
        let i = match self.open {
            Some(i) => i,
            None => {
                let m = json!({
                    "role": "assistant",
                    "content": [],
                    "api": "openai-responses",
                    "provider": self.provider,
                    "model": self.model.clone().unwrap_or_default(),
                    "usage": usage(0, 0, 0, 0),
                    "stopReason": "stop",
                    "timestamp": iso(ts).map_or(0, |(_, ms)| ms),
                });
                self.push(no, "", ts, Kind::Message(m));
                let i = self.nodes.len() - 1;
                self.open = Some(i);
                self.needs_usage = Some(i);
                i
            }
        };
        if let Kind::Message(m) = &mut self.nodes[i].kind {
            let is_call = block.get("type").and_then(Value::as_str) == Some("toolCall");
            if let Some(Value::Array(c)) = m.get_mut("content") {
                c.push(block);
            }
            if is_call {
                m["stopReason"] = json!("toolUse");
            }
        }
    }
}

/// Imports a Codex rollout.
pub fn import(bytes: &[u8]) -> Result<Imported, ImportError> {
    let (records, diagnostics) = objects(bytes);
    let meta = records
        .iter()
        .find(|(_, r)| r.get("type").and_then(Value::as_str) == Some("session_meta"))
        .and_then(|(_, r)| r.get("payload"))
        .and_then(Value::as_object);
    let Some(session_id) = meta.and_then(|m| m.get("id")).and_then(Value::as_str).map(str::to_owned) else {
        return Err(ImportError::Empty { kind: "Codex", lines: line_count(bytes) });
    };
    let text = |k: &str| meta.and_then(|m| m.get(k)).and_then(Value::as_str).map(str::to_owned);
    let cwd = text("cwd");
    let forked_from = text("forked_from_id");
    let provider = text("model_provider").filter(|p| !p.is_empty()).unwrap_or_else(|| "openai".to_owned());
    let first_ts = records.iter().find_map(|(_, r)| r.get("timestamp").and_then(Value::as_str).and_then(iso));
    let start = text("timestamp")
        .and_then(|t| iso(&t))
        .or(first_ts)
        .map(|(s, _)| s)
        .unwrap_or_else(|| session_model::timestamp::format_iso_millis(0));

    let mut st = State {
        ids: Ids::default(),
        nodes: Vec::new(),
        session: session_id.clone(),
        open: None,
        needs_usage: None,
        provider,
        model: None,
        tools: HashMap::new(),
        last_input: 0,
        diagnostics,
    };
    let mut title = None;
    let mut timestamp = start.clone();
    for (no, r) in &records {
        let no = *no;
        if let Some(raw) = r.get("timestamp") {
            match raw.as_str().and_then(iso) {
                Some((s, _)) => timestamp = s,
                None => st.diag(
                    no,
                    DiagnosticKind::Drift,
                    format!("timestamp {raw} is not an ISO date: kept the previous one"),
                ),
            }
        }
        let ts = timestamp.clone();
        let ty = r.get("type").and_then(Value::as_str).unwrap_or_default();
        let Some(payload) = r.get("payload").and_then(Value::as_object) else {
            st.diag(no, DiagnosticKind::Drift, format!("record {ty:?} without an object payload: kept as custom"));
            st.open = None;
            st.custom(no, &ts, if ty.is_empty() { "unknown" } else { ty }, r);
            continue;
        };
        match ty {
            "response_item" => response_item(&mut st, no, &ts, payload, r),
            "event_msg" => {
                let kind = payload.get("type").and_then(Value::as_str).unwrap_or_default();
                if kind == "token_count" {
                    let last = payload.get("info").and_then(|i| i.get("last_token_usage"));
                    if let (Some(u), Some(i)) = (last, st.needs_usage) {
                        let input = count(Some(u), "input_tokens");
                        let cached = count(Some(u), "cached_input_tokens").min(input);
                        st.last_input = input;
                        if let Kind::Message(m) = &mut st.nodes[i].kind {
                            m["usage"] = usage(input - cached, count(Some(u), "output_tokens"), cached, 0);
                        }
                        st.needs_usage = None;
                        continue;
                    }
                }
                if kind == "thread_name_updated"
                    && let Some(name) =
                        payload.get("thread_name").and_then(Value::as_str).filter(|n| !n.trim().is_empty())
                {
                    title = Some(crate::Title { name: name.trim().to_owned(), by_user: true });
                    st.push(no, "", &ts, Kind::SessionInfo(name.to_owned()));
                    continue;
                }
                st.custom(no, &ts, "event_msg", r);
            }
            "turn_context" => {
                st.open = None;
                if let Some(model) = payload.get("model").and_then(Value::as_str).filter(|m| !m.is_empty()) {
                    if st.model.as_deref().is_some_and(|m| m != model) {
                        let provider = st.provider.clone();
                        st.push(no, "#model", &ts, Kind::ModelChange { provider, model: model.to_owned() });
                    }
                    st.model = Some(model.to_owned());
                }
                st.custom(no, &ts, "turn_context", r);
            }
            "compacted" => {
                st.open = None;
                let summary = payload.get("message").and_then(Value::as_str).unwrap_or_default().to_owned();
                let mut details = payload.clone();
                details.shift_remove("message");
                let details = (!details.is_empty()).then_some(Value::Object(details));
                let tokens = json!(st.last_input);
                st.push(no, "", &ts, Kind::Compaction { summary, tokens_before: tokens, details });
            }
            "session_meta" => {
                st.open = None;
                st.custom(no, &ts, "session_meta", r);
            }
            other => {
                if !KNOWN_KINDS.contains(&other) {
                    st.diag(no, DiagnosticKind::UnknownKind, format!("record kind {other:?}: kept as custom"));
                }
                st.custom(no, &ts, if other.is_empty() { "unknown" } else { other }, r);
            }
        }
    }
    let leaf = st.nodes.last().map(|n| n.id.clone());
    let entries = ordered(std::mem::take(&mut st.nodes), leaf.as_deref());
    Ok(Imported {
        kind: SourceKind::Codex,
        session_id,
        cwd,
        timestamp: start,
        forked_from,
        title,
        entries,
        diagnostics: st.diagnostics,
    })
}

fn response_item(st: &mut State, no: usize, ts: &str, item: &Map<String, Value>, record: &Map<String, Value>) {
    let ty = item.get("type").and_then(Value::as_str).unwrap_or_default();
    let at_ms = iso(ts).map_or(0, |(_, ms)| ms);
    match ty {
        "message" => {
            let role = item.get("role").and_then(Value::as_str).unwrap_or_default();
            let content = item.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            match role {
                "assistant" => {
                    for c in content {
                        let block = match c.get("type").and_then(Value::as_str) {
                            Some("output_text" | "input_text") => {
                                json!({"type": "text", "text": c.get("text").cloned().unwrap_or(json!(""))})
                            }
                            _ => c.clone(),
                        };
                        st.assistant_block(no, ts, block);
                    }
                    if content.is_empty() {
                        st.assistant_block(no, ts, json!({"type": "text", "text": ""}));
                    }
                }
                "user" => {
                    st.open = None;
                    let texts: Vec<&str> =
                        content.iter().filter_map(|c| c.get("text").and_then(Value::as_str)).collect();
                    let scaffolding = !texts.is_empty()
                        && texts.iter().all(|t| SCAFFOLDING.iter().any(|s| t.trim_start().starts_with(s)));
                    if scaffolding {
                        st.custom(no, ts, "scaffolding", record);
                        return;
                    }
                    let blocks: Vec<Value> = content.iter().map(input_block).collect();
                    st.push(no, "", ts, Kind::Message(json!({"role": "user", "content": blocks, "timestamp": at_ms})));
                }
                other => {
                    st.open = None;
                    st.custom(no, ts, if other.is_empty() { "message" } else { other }, record);
                }
            }
        }
        "reasoning" => {
            let mut parts: Vec<&str> = Vec::new();
            for key in ["summary", "content"] {
                if let Some(list) = item.get(key).and_then(Value::as_array) {
                    parts.extend(list.iter().filter_map(|s| s.get("text").and_then(Value::as_str)));
                }
            }
            let signature = Value::Object(item.clone()).to_string();
            st.assistant_block(
                no,
                ts,
                json!({"type": "thinking", "thinking": parts.join("\n\n"), "thinkingSignature": signature}),
            );
        }
        "function_call" | "custom_tool_call" | "local_shell_call" => {
            let call = item.get("call_id").or_else(|| item.get("id")).and_then(Value::as_str).unwrap_or_default();
            let name = match ty {
                "local_shell_call" => "local_shell",
                _ => item.get("name").and_then(Value::as_str).unwrap_or_default(),
            };
            let arguments = match ty {
                "function_call" => {
                    match item.get("arguments") {
                        Some(Value::String(s)) => match session_model::json::parse(s) {
                            Some(v @ Value::Object(_)) => v,
                            _ => {
                                st.diag(no, DiagnosticKind::Drift, format!("arguments of call {call:?} are not a JSON object: kept as {{\"arguments\": text}}"));
                                json!({"arguments": s})
                            }
                        },
                        Some(v @ Value::Object(_)) => v.clone(),
                        _ => json!({}),
                    }
                }
                "custom_tool_call" => json!({"input": item.get("input").cloned().unwrap_or(json!(""))}),
                _ => item.get("action").cloned().unwrap_or_else(|| json!({})),
            };
            st.tools.insert(call.to_owned(), name.to_owned());
            st.assistant_block(no, ts, json!({"type": "toolCall", "id": call, "name": name, "arguments": arguments}));
        }
        "function_call_output" | "custom_tool_call_output" => {
            st.open = None;
            let call = item.get("call_id").and_then(Value::as_str).unwrap_or_default();
            let name = st.tools.get(call).cloned().unwrap_or_else(|| {
                st.diag(no, DiagnosticKind::Drift, format!("output for {call:?}, whose call is not in the file"));
                String::new()
            });
            let (content, is_error) = output(item.get("output"));
            let m = json!({
                "role": "toolResult", "toolCallId": call, "toolName": name, "content": content,
                "isError": is_error, "timestamp": at_ms,
            });
            st.push(no, "", ts, Kind::Message(m));
        }
        other => {
            if !KNOWN_ITEMS.contains(&other) {
                st.diag(no, DiagnosticKind::UnknownKind, format!("response item {other:?}: kept as custom"));
            }
            st.custom(no, ts, if other.is_empty() { "response_item" } else { other }, record);
        }
    }
}

/// An input content item as a pi block: `input_text` text, `input_image` an image.
fn input_block(c: &Value) -> Value {
    match c.get("type").and_then(Value::as_str) {
        Some("input_text" | "output_text") => {
            json!({"type": "text", "text": c.get("text").cloned().unwrap_or(json!(""))})
        }
        Some("input_image") => {
            c.get("image_url").and_then(Value::as_str).and_then(image_from_data_url).unwrap_or_else(|| c.clone())
        }
        _ => c.clone(),
    }
}

/// A tool output as pi content and error flag: a string, a list of content items,
/// or the older `{content, success}` object.
fn output(v: Option<&Value>) -> (Value, bool) {
    match v {
        Some(Value::String(s)) => (json!([{"type": "text", "text": s}]), false),
        Some(Value::Array(items)) => (Value::Array(items.iter().map(input_block).collect()), false),
        Some(Value::Object(o)) => {
            let (content, _) = output(o.get("content"));
            (content, o.get("success").and_then(Value::as_bool) == Some(false))
        }
        _ => (json!([]), false),
    }
}
