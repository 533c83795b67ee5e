//! Claude Code transcripts: `~/.claude/projects/<encoded cwd>/<session uuid>.jsonl`.
//!
//! Each line is one record. Conversation records (`user`, `assistant`, `system`,
//! `progress`, `attachment`, …) carry a `uuid` and a `parentUuid` and form a tree;
//! the others (`summary`, `custom-title`, `ai-title`, `file-history-snapshot`,
//! `queue-operation`, …) do not. The format is internal to Claude Code and changes by
//! release, so every record the mapping does not use is kept whole in a custom entry.
//!
//! How each record maps (see also the crate docs):
//!
//! | record | entry |
//! |---|---|
//! | `user`, text or images | `message` role `user` |
//! | `user`, `tool_result` blocks | one `message` role `toolResult` per block (`toolName` from its `tool_use`, `isError`, `details` = `toolUseResult`); result lines that name the same response as parent (parallel calls) are chained |
//! | `assistant` lines of one `message.id` | one `message` role `assistant`, blocks in order, usage of the last line |
//! | a model other than the previous assistant's | `model_change` before the assistant |
//! | `system` `compact_boundary` (+ the `isCompactSummary` user line) | `compaction`, parent the `logicalParentUuid`, summary the user line's text |
//! | `custom-title` > `ai-title` > `summary` | `session_info` (the winner; the others custom) |
//! | `isSidechain`, `isMeta`, other `system`, `progress`, snapshots, unknown kinds | `custom` `import:claude:<kind>` (`sidechain`, `meta`, `compact-summary`, the record's `type`), data = the record |
//!
//! Records without a uuid hang off the conversation record before them in the file,
//! so the source's last line is the import's leaf. A file whose every conversation line
//! is a sidechain (a subagent's own transcript, `<session>/subagents/agent-*.jsonl`)
//! is imported as a main chain.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::out::{Ids, Kind, Node, count, iso, ordered, usage};
use crate::{Diagnostic, DiagnosticKind, ImportError, Imported, SourceKind, Title, line_count, objects};

/// Claude Code's record kinds that carry no uuid and need no diagnostic.
const KNOWN_META: &[&str] = &[
    "summary",
    "custom-title",
    "ai-title",
    "agent-name",
    "last-prompt",
    "file-history-snapshot",
    "file-history-delta",
    "queue-operation",
    "mode",
    "pr-link",
    "tag",
];

/// Claude Code's conversation kinds that map to custom entries without a diagnostic.
const KNOWN_NODES: &[&str] = &["system", "progress", "attachment"];

/// An assistant response being assembled from its lines.
struct Response {
    /// Index of its node in `nodes`.
    node: usize,
}

struct State {
    ids: Ids,
    nodes: Vec<Node>,
    /// Node index by id.
    at: HashMap<String, usize>,
    /// Source uuid → the id of the entry its children attach to.
    uuids: HashMap<String, String>,
    /// `message.id` → the response made of its lines.
    responses: HashMap<String, Response>,
    /// Response (assistant entry id) → the last tool result made under it: results of
    /// parallel calls that Claude Code writes as siblings are chained instead.
    result_tail: HashMap<String, String>,
    /// Model in effect at each node (by index), as the previous assistant set it.
    model: Vec<Option<String>>,
    diagnostics: Vec<Diagnostic>,
    session: String,
}

impl State {
    fn push(&mut self, key: &str, parent: Option<String>, timestamp: &str, kind: Kind) -> String {
        let id = self.ids.mint(key);
        let inherited = parent.as_ref().and_then(|p| self.at.get(p)).and_then(|&i| self.model[i].clone());
        let model = match &kind {
            Kind::ModelChange { model, .. } => Some(model.clone()),
            Kind::Message(m) if m.get("role").and_then(Value::as_str) == Some("assistant") => {
                m.get("model").and_then(Value::as_str).map(str::to_owned).or(inherited)
            }
            _ => inherited,
        };
        self.at.insert(id.clone(), self.nodes.len());
        self.nodes.push(Node { id: id.clone(), parent, timestamp: timestamp.to_owned(), kind });
        self.model.push(model);
        id
    }

    /// A custom entry holding the whole source `record`.
    fn custom(
        &mut self,
        key: &str,
        parent: Option<String>,
        ts: &str,
        kind: &str,
        record: &Map<String, Value>,
    ) -> String {
        let data = Value::Object(record.clone());
        self.push(key, parent, ts, Kind::Custom { custom_type: format!("import:claude:{kind}"), data })
    }

    fn diag(&mut self, line: usize, kind: DiagnosticKind, message: String) {
        self.diagnostics.push(Diagnostic { line, kind, message });
    }

    /// Whether node `ancestor` is `from` or above it (a bounded walk).
    fn is_ancestor(&self, ancestor: usize, from: Option<&str>) -> bool {
        let mut at = from.and_then(|p| self.at.get(p)).copied();
        for _ in 0..4096 {
            let Some(i) = at else { return false };
            if i == ancestor {
                return true;
            }
            at = self.nodes[i].parent.as_deref().and_then(|p| self.at.get(p)).copied();
        }
        false
    }
}

/// Imports a Claude Code transcript.
pub fn import(bytes: &[u8]) -> Result<Imported, ImportError> {
    let (records, diagnostics) = objects(bytes);
    let session_id = records.iter().find_map(|(_, r)| r.get("sessionId").and_then(Value::as_str).map(str::to_owned));
    let Some(session_id) = session_id else {
        return Err(ImportError::Empty { kind: "Claude Code", lines: line_count(bytes) });
    };
    let cwd = records.iter().find_map(|(_, r)| r.get("cwd").and_then(Value::as_str).map(str::to_owned));
    // `--fork-session` copies the history with `forkedFrom: {sessionId, messageUuid}`.
    let forked_from = records
        .iter()
        .find_map(|(_, r)| r.get("forkedFrom")?.get("sessionId")?.as_str().map(str::to_owned))
        .filter(|f| *f != session_id);
    let start = records
        .iter()
        .find_map(|(_, r)| r.get("timestamp").and_then(Value::as_str).and_then(iso))
        .map(|(s, _)| s)
        .unwrap_or_else(|| session_model::timestamp::format_iso_millis(0));

    // Tool names by `tool_use` id, over the whole file (a result may precede a retry).
    let mut tool_names: HashMap<String, String> = HashMap::new();
    for (_, r) in &records {
        for block in blocks(r) {
            if block.get("type").and_then(Value::as_str) == Some("tool_use")
                && let (Some(id), Some(name)) =
                    (block.get("id").and_then(Value::as_str), block.get("name").and_then(Value::as_str))
            {
                tool_names.insert(id.to_owned(), name.to_owned());
            }
        }
    }

    // A subagent's own transcript (`<session>/subagents/agent-*.jsonl`) is sidechain
    // through and through: then its sidechain is its main chain.
    let has_main = records.iter().any(|(_, r)| {
        r.get("uuid").is_some_and(Value::is_string) && r.get("isSidechain").and_then(Value::as_bool) != Some(true)
    });
    let mut st = State {
        ids: Ids::default(),
        nodes: Vec::new(),
        at: HashMap::new(),
        uuids: HashMap::new(),
        responses: HashMap::new(),
        result_tail: HashMap::new(),
        model: Vec::new(),
        diagnostics,
        session: session_id.clone(),
    };
    // The entry the next record without a uuid hangs off, and the leaf.
    let mut anchor: Option<String> = None;
    let mut timestamp = start.clone();
    // Title candidates: (rank, node index, title); the highest rank, then the latest, wins.
    let mut titles: Vec<(u8, usize, Title)> = Vec::new();

    for (no, r) in &records {
        if let Some(raw) = r.get("timestamp") {
            match raw.as_str().and_then(iso) {
                Some((s, _)) => timestamp = s,
                None => st.diag(
                    *no,
                    DiagnosticKind::Drift,
                    format!("timestamp {raw} is not an ISO date: kept the previous one"),
                ),
            }
        }
        let ty = match r.get("type").and_then(Value::as_str) {
            Some(t) => t.to_owned(),
            None => {
                st.diag(*no, DiagnosticKind::UnknownKind, "a record without a type: kept as custom".to_owned());
                "unknown".to_owned()
            }
        };
        let line_key = format!("{}:{no}", st.session);
        let Some(uuid) = r.get("uuid").and_then(Value::as_str) else {
            // A record outside the tree.
            let rank = match ty.as_str() {
                "custom-title" => Some((3, "customTitle", true)),
                "ai-title" => Some((2, "aiTitle", false)),
                "summary" => Some((1, "summary", false)),
                _ => None,
            };
            if !KNOWN_META.contains(&ty.as_str()) {
                st.diag(*no, DiagnosticKind::UnknownKind, format!("record kind {ty:?}: kept as custom"));
            }
            let id = st.custom(&line_key, anchor.clone(), &timestamp, &ty, r);
            if let Some((rank, field, by_user)) = rank
                && let Some(name) = r.get(field).and_then(Value::as_str).map(str::trim).filter(|t| !t.is_empty())
            {
                titles.push((rank, st.nodes.len() - 1, Title { name: name.to_owned(), by_user }));
            }
            anchor = Some(id);
            continue;
        };
        if st.uuids.contains_key(uuid) {
            st.diag(*no, DiagnosticKind::Drift, format!("uuid {uuid} seen before: kept as custom"));
            let id = st.custom(&line_key, anchor.clone(), &timestamp, "duplicate", r);
            anchor = Some(id);
            continue;
        }
        let sidechain = has_main && r.get("isSidechain").and_then(Value::as_bool) == Some(true);
        let compact = ty == "system" && r.get("subtype").and_then(Value::as_str) == Some("compact_boundary");
        let parent_key = if compact { "logicalParentUuid" } else { "parentUuid" };
        let parent_uuid = r.get(parent_key).and_then(Value::as_str);
        let mut parent = parent_uuid.and_then(|p| st.uuids.get(p)).cloned();
        if let (Some(p), None) = (parent_uuid, &parent) {
            st.diag(*no, DiagnosticKind::Orphan, format!("parent {p} is not in the file: starts a new root"));
        }
        if sidechain {
            // Sidechains stay out of the main tree: their own roots.
            if parent.as_ref().and_then(|p| st.at.get(p)).is_some_and(|&i| !is_sidechain_node(&st.nodes[i])) {
                parent = None;
            }
            let id = st.custom(uuid, parent, &timestamp, "sidechain", r);
            st.uuids.insert(uuid.to_owned(), id);
            continue;
        }
        let last = match ty.as_str() {
            "assistant" => assistant(&mut st, uuid, parent, &timestamp, r),
            "user" => user(&mut st, *no, uuid, parent, &timestamp, r, &tool_names),
            "system" if compact => {
                let meta = r.get("compactMetadata");
                let tokens = meta.and_then(|m| m.get("preTokens")).cloned().unwrap_or(json!(0));
                let details = json!({"source": r});
                st.push(
                    uuid,
                    parent,
                    &timestamp,
                    Kind::Compaction { summary: String::new(), tokens_before: tokens, details: Some(details) },
                )
            }
            other => {
                if !KNOWN_NODES.contains(&other) {
                    st.diag(*no, DiagnosticKind::UnknownKind, format!("record kind {other:?}: kept as custom"));
                }
                st.custom(uuid, parent, &timestamp, other, r)
            }
        };
        st.uuids.insert(uuid.to_owned(), last.clone());
        anchor = Some(last);
    }

    // The title: the best kind, the latest of it.
    let title = titles.iter().max_by_key(|(rank, at, _)| (*rank, *at)).cloned();
    if let Some((_, at, t)) = &title {
        st.nodes[*at].kind = Kind::SessionInfo(t.name.clone());
    }
    let entries = ordered(std::mem::take(&mut st.nodes), anchor.as_deref());
    Ok(Imported {
        kind: SourceKind::ClaudeCode,
        session_id,
        cwd,
        timestamp: start,
        forked_from,
        title: title.map(|(_, _, t)| t),
        entries,
        diagnostics: st.diagnostics,
    })
}

fn is_sidechain_node(n: &Node) -> bool {
    matches!(&n.kind, Kind::Custom { custom_type, .. } if custom_type == "import:claude:sidechain")
}

/// The content blocks of a record's message (none when the content is a string).
fn blocks(r: &Map<String, Value>) -> &[Value] {
    r.get("message").and_then(|m| m.get("content")).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

fn ms(ts: &str) -> i64 {
    iso(ts).map_or(0, |(_, ms)| ms)
}

/// Maps an assistant line: a new response, or its blocks added to the response of its
/// `message.id` above it. Returns the id its children attach to.
fn assistant(st: &mut State, uuid: &str, parent: Option<String>, ts: &str, r: &Map<String, Value>) -> String {
    let msg = r.get("message");
    let msg_id = msg.and_then(|m| m.get("id")).and_then(Value::as_str);
    let new_blocks: Vec<Value> = blocks(r).iter().map(assistant_block).collect();
    let new_blocks = match msg.and_then(|m| m.get("content")) {
        Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
        _ => new_blocks,
    };
    let model = msg.and_then(|m| m.get("model")).and_then(Value::as_str).unwrap_or_default().to_owned();
    let usage_v = msg.and_then(|m| m.get("usage")).filter(|u| u.is_object()).map(|u| {
        usage(
            count(Some(u), "input_tokens"),
            count(Some(u), "output_tokens"),
            count(Some(u), "cache_read_input_tokens"),
            count(Some(u), "cache_creation_input_tokens"),
        )
    });
    let stop = msg.and_then(|m| m.get("stop_reason")).and_then(Value::as_str).map(stop_reason);
    let error = r.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true);

    if let Some(mid) = msg_id
        && let Some(resp) = st.responses.get(mid)
        && st.is_ancestor(resp.node, parent.as_deref())
    {
        // Another block of a response already started: add it in order, usage once.
        let node = resp.node;
        if let Kind::Message(Value::Object(m)) = &mut st.nodes[node].kind {
            if let Some(Value::Array(content)) = m.get_mut("content") {
                content.extend(new_blocks);
            }
            if let Some(u) = usage_v {
                m.insert("usage".to_owned(), u);
            }
            let has_tool = m
                .get("content")
                .and_then(Value::as_array)
                .is_some_and(|c| c.iter().any(|b| b.get("type").and_then(Value::as_str) == Some("toolCall")));
            let stop = stop.unwrap_or(if has_tool { "toolUse" } else { "stop" });
            if !(error || m.get("stopReason").and_then(Value::as_str) == Some("error")) {
                m.insert("stopReason".to_owned(), json!(stop));
            }
        }
        // This line's children attach where its parent's did: the chain stays linear.
        return parent.unwrap_or_else(|| st.nodes[node].id.clone());
    }

    let mut parent = parent;
    let previous = parent.as_ref().and_then(|p| st.at.get(p)).and_then(|&i| st.model[i].clone());
    if !model.is_empty() && model != "<synthetic>" && previous.as_ref().is_some_and(|p| *p != model) {
        let key = format!("{uuid}#model");
        let id =
            st.push(&key, parent, ts, Kind::ModelChange { provider: "anthropic".to_owned(), model: model.clone() });
        parent = Some(id);
    }
    let has_tool = new_blocks.iter().any(|b| b.get("type").and_then(Value::as_str) == Some("toolCall"));
    let stop = if error { "error" } else { stop.unwrap_or(if has_tool { "toolUse" } else { "stop" }) };
    let mut m = Map::new();
    m.insert("role".to_owned(), json!("assistant"));
    m.insert("content".to_owned(), Value::Array(new_blocks));
    m.insert("api".to_owned(), json!("anthropic-messages"));
    m.insert("provider".to_owned(), json!("anthropic"));
    m.insert("model".to_owned(), json!(model));
    m.insert("usage".to_owned(), usage_v.unwrap_or_else(|| usage(0, 0, 0, 0)));
    m.insert("stopReason".to_owned(), json!(stop));
    if error {
        let text: Vec<&str> = blocks(r).iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect();
        m.insert("errorMessage".to_owned(), json!(text.join("\n")));
    }
    m.insert("timestamp".to_owned(), json!(ms(ts)));
    let id = st.push(uuid, parent, ts, Kind::Message(Value::Object(m)));
    if let Some(mid) = msg_id {
        let node = st.at[&id];
        st.responses.insert(mid.to_owned(), Response { node });
    }
    id
}

/// Claude Code's `stop_reason` as pi's `stopReason`.
fn stop_reason(s: &str) -> &'static str {
    match s {
        "tool_use" => "toolUse",
        "max_tokens" | "model_context_window_exceeded" => "length",
        "refusal" => "error",
        _ => "stop",
    }
}

/// An assistant content block as pi's: text, thinking, toolCall; others as they are.
fn assistant_block(b: &Value) -> Value {
    match b.get("type").and_then(Value::as_str) {
        Some("text") => json!({"type": "text", "text": b.get("text").cloned().unwrap_or(json!(""))}),
        Some("thinking") => {
            let mut o = json!({"type": "thinking", "thinking": b.get("thinking").cloned().unwrap_or(json!(""))});
            if let Some(sig) = b.get("signature").and_then(Value::as_str).filter(|s| !s.is_empty()) {
                o["thinkingSignature"] = json!(sig);
            }
            o
        }
        Some("redacted_thinking") => json!({
            "type": "thinking", "thinking": "", "thinkingSignature": b.get("data").cloned().unwrap_or(json!("")), "redacted": true,
        }),
        Some("tool_use") => json!({
            "type": "toolCall",
            "id": b.get("id").cloned().unwrap_or(json!("")),
            "name": b.get("name").cloned().unwrap_or(json!("")),
            "arguments": b.get("input").cloned().filter(Value::is_object).unwrap_or_else(|| json!({})),
        }),
        _ => b.clone(),
    }
}

/// A user content block as pi's: text and images; others as they are.
fn user_block(b: &Value) -> Value {
    match b.get("type").and_then(Value::as_str) {
        Some("text") => json!({"type": "text", "text": b.get("text").cloned().unwrap_or(json!(""))}),
        Some("image") => {
            let src = b.get("source");
            match (src.and_then(|s| s.get("data")), src.and_then(|s| s.get("media_type"))) {
                (Some(data), Some(mime)) => json!({"type": "image", "data": data, "mimeType": mime}),
                _ => b.clone(),
            }
        }
        _ => b.clone(),
    }
}

/// Maps a user line: tool results, then what the person wrote; `isMeta` and compact
/// summaries as custom entries. Returns the id its children attach to.
#[allow(clippy::too_many_arguments)] // one call site; a struct would only rename them
fn user(
    st: &mut State,
    no: usize,
    uuid: &str,
    parent: Option<String>,
    ts: &str,
    r: &Map<String, Value>,
    tool_names: &HashMap<String, String>,
) -> String {
    if r.get("isCompactSummary").and_then(Value::as_bool) == Some(true) {
        let text = text_of(r.get("message").and_then(|m| m.get("content")));
        if let Some(&i) = parent.as_ref().and_then(|p| st.at.get(p))
            && let Kind::Compaction { summary, .. } = &mut st.nodes[i].kind
            && summary.is_empty()
        {
            *summary = text;
        }
        return st.custom(uuid, parent, ts, "compact-summary", r);
    }
    if r.get("isMeta").and_then(Value::as_bool) == Some(true) {
        return st.custom(uuid, parent, ts, "meta", r);
    }
    let at_ms = ms(ts);
    let content = r.get("message").and_then(|m| m.get("content"));
    let mut made: Vec<(String, Value)> = Vec::new();
    match content {
        Some(Value::String(s)) => {
            made.push((uuid.to_owned(), json!({"role": "user", "content": s, "timestamp": at_ms})));
        }
        Some(Value::Array(list)) => {
            let mut rest = Vec::new();
            for (k, b) in list.iter().enumerate() {
                if b.get("type").and_then(Value::as_str) != Some("tool_result") {
                    rest.push(user_block(b));
                    continue;
                }
                let call = b.get("tool_use_id").and_then(Value::as_str).unwrap_or_default();
                let name = tool_names.get(call).cloned().unwrap_or_else(|| {
                    st.diag(
                        no,
                        DiagnosticKind::Drift,
                        format!("tool result for {call:?}, whose call is not in the file"),
                    );
                    String::new()
                });
                let result_content: Vec<Value> = match b.get("content") {
                    Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
                    Some(Value::Array(items)) => items.iter().map(user_block).collect(),
                    _ => Vec::new(),
                };
                let mut m = Map::new();
                m.insert("role".to_owned(), json!("toolResult"));
                m.insert("toolCallId".to_owned(), json!(call));
                m.insert("toolName".to_owned(), json!(name));
                m.insert("content".to_owned(), Value::Array(result_content));
                if let Some(d) = r.get("toolUseResult") {
                    m.insert("details".to_owned(), d.clone());
                }
                m.insert("isError".to_owned(), json!(b.get("is_error").and_then(Value::as_bool) == Some(true)));
                m.insert("timestamp".to_owned(), json!(at_ms));
                made.push((format!("{uuid}#{k}"), Value::Object(m)));
            }
            if !rest.is_empty() {
                let key = if made.is_empty() { uuid.to_owned() } else { format!("{uuid}#user") };
                made.push((key, json!({"role": "user", "content": rest, "timestamp": at_ms})));
            }
        }
        _ => {}
    }
    if made.is_empty() {
        st.diag(no, DiagnosticKind::Drift, "a user record without content: kept as custom".to_owned());
        return st.custom(uuid, parent, ts, "user", r);
    }
    // Results of one response's parallel calls may each name the response as parent:
    // chain them, so the branch holds every result and not only the last.
    let only_results = made.iter().all(|(_, m)| m.get("role").and_then(Value::as_str) == Some("toolResult"));
    let response = parent.clone().filter(|p| {
        st.at.get(p).is_some_and(|&i| {
            matches!(&st.nodes[i].kind, Kind::Message(m) if m.get("role").and_then(Value::as_str) == Some("assistant"))
        })
    });
    let mut parent = match (&response, only_results) {
        (Some(r), true) => st.result_tail.get(r).cloned().or(parent),
        _ => parent,
    };
    for (key, m) in made {
        parent = Some(st.push(&key, parent, ts, Kind::Message(m)));
    }
    if let (Some(r), true, Some(last)) = (response, only_results, &parent) {
        st.result_tail.insert(r, last.clone());
    }
    parent.unwrap_or_default()
}

/// The text of a message content (a string, or its text blocks joined by blank lines).
fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => {
            items.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n\n")
        }
        _ => String::new(),
    }
}
