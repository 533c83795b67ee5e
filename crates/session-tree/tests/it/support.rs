//! A tiny textual session format for tests, and readable renderings.
//!
//! One entry per line: `ID PARENT KIND ARGS...`, where `PARENT` is `-` for a root
//! and `^` for "the previous line". Timestamps advance one second per line unless a
//! line ends with `@SECONDS`. Kinds:
//!
//! ```text
//! user TEXT | assistant TEXT | system TEXT | tool CALLID TEXT | call CALLID TEXT (assistant with a tool call)
//! thinking LEVEL | model PROVIDER/MODEL | compaction FIRSTKEPT SUMMARY | branch_summary FROMID SUMMARY
//! label TARGET [TEXT] | edit TARGET (null | TEXT) | custom TYPE | custom_message TYPE TEXT | info NAME
//! reset | tier VALUE | json {...}   (json: the rest of the line is the entry itself)
//! ```

use serde_json::{Value, json};
use session_model::{Dialect, Record};
use session_tree::{SessionTree, TreeNode};

/// Returns the ISO timestamp `seconds` after a fixed epoch.
pub(crate) fn ts(seconds: i64) -> String {
    session_model::timestamp::format_iso_millis(1_767_225_600_000 + seconds * 1000)
}

/// Builds one entry value for `kind` and its arguments.
pub(crate) fn entry(
    id: &str,
    parent: Option<&str>,
    seconds: i64,
    kind: &str,
    args: &[&str],
    dialect: Dialect,
) -> Value {
    let rest = args.join(" ");
    let base = |ty: &str| json!({"type": ty, "id": id, "parentId": parent, "timestamp": ts(seconds)});
    let with = |ty: &str, extra: Value| {
        let mut v = base(ty);
        if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
            m.extend(e);
        }
        v
    };
    let ms = 1_767_225_600_000 + seconds * 1000;
    match kind {
        "user" => with("message", json!({"message": {"role": "user", "content": rest, "timestamp": ms}})),
        "system" => with("message", json!({"message": {"role": "system", "content": rest, "timestamp": ms}})),
        "assistant" => with(
            "message",
            json!({"message": {"role": "assistant", "content": [{"type": "text", "text": rest}], "api": "anthropic-messages", "provider": "anthropic", "model": "claude-test", "stopReason": "stop", "timestamp": ms}}),
        ),
        "call" => with(
            "message",
            json!({"message": {"role": "assistant", "content": [{"type": "text", "text": args[1..].join(" ")}, {"type": "toolCall", "id": args[0], "name": "read", "arguments": {}}], "api": "anthropic-messages", "provider": "anthropic", "model": "claude-test", "stopReason": "toolUse", "timestamp": ms}}),
        ),
        "tool" => with(
            "message",
            json!({"message": {"role": "toolResult", "toolCallId": args[0], "toolName": "read", "content": [{"type": "text", "text": args[1..].join(" ")}], "isError": false, "timestamp": ms}}),
        ),
        "thinking" => match dialect {
            Dialect::Pi => with("thinking_level_change", json!({"thinkingLevel": rest})),
            Dialect::Omp => with("thinking_level_change", json!({"thinkingLevel": rest, "configured": null})),
        },
        "model" => {
            let (p, m) = rest.split_once('/').unwrap_or((&rest, ""));
            match dialect {
                Dialect::Pi => with("model_change", json!({"provider": p, "modelId": m})),
                Dialect::Omp => with("model_change", json!({"model": rest, "resolvedModelIsFallback": false})),
            }
        }
        "compaction" => with(
            "compaction",
            json!({"summary": args[1..].join(" "), "firstKeptEntryId": args[0], "tokensBefore": 100}),
        ),
        "branch_summary" => with("branch_summary", json!({"fromId": args[0], "summary": args[1..].join(" ")})),
        "label" if args.len() > 1 => with("label", json!({"targetId": args[0], "label": args[1..].join(" ")})),
        "label" => with("label", json!({"targetId": args[0]})),
        "edit" if args.get(1) == Some(&"null") => {
            with("context_edit", json!({"targetId": args[0], "replacement": null}))
        }
        "edit" => with("context_edit", json!({"targetId": args[0], "replacement": {"content": args[1..].join(" ")}})),
        "custom" => {
            json!({"type": "custom", "customType": rest, "id": id, "parentId": parent, "timestamp": ts(seconds)})
        }
        "custom_message" => {
            json!({"type": "custom_message", "customType": args[0], "content": args[1..].join(" "), "display": true, "id": id, "parentId": parent, "timestamp": ts(seconds)})
        }
        "info" => with("session_info", json!({"name": rest})),
        "reset" => base("reset_boundary"),
        "tier" => with(
            "service_tier_change",
            json!({"serviceTier": serde_json::from_str::<Value>(&rest).unwrap_or(Value::String(rest.clone()))}),
        ),
        "json" => serde_json::from_str(&rest).unwrap_or(Value::Null),
        other => panic!("unknown kind {other} in test session"),
    }
}

/// Parses the textual session format into records.
pub(crate) fn parse_session(text: &str, dialect: Dialect) -> Vec<Record> {
    let mut out = Vec::new();
    let mut prev: Option<String> = None;
    for (n, line) in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).enumerate() {
        let mut words: Vec<&str> = line.split(' ').collect();
        let mut seconds = n as i64 + 1;
        if let Some(last) = words.last()
            && let Some(s) = last.strip_prefix('@')
        {
            seconds = s.parse().expect("@SECONDS is a number");
            words.pop();
        }
        let (id, parent, kind) = (words[0], words[1], words[2]);
        let parent = match parent {
            "-" => None,
            "^" => prev.clone(),
            p => Some(p.to_owned()),
        };
        let value = entry(id, parent.as_deref(), seconds, kind, &words[3..], dialect);
        out.push(Record::from_value(value));
        prev = Some(id.to_owned());
    }
    out
}

/// Renders a forest with two spaces of indentation per level, labels in brackets.
pub(crate) fn render_tree(nodes: &[TreeNode]) -> String {
    fn walk(out: &mut String, nodes: &[TreeNode], depth: usize) {
        for n in nodes {
            out.push_str(&"  ".repeat(depth));
            out.push_str(n.entry.id().unwrap_or("(no id)"));
            if let Some(l) = &n.label {
                out.push_str(&format!(" [{l}]"));
            }
            out.push('\n');
            walk(out, &n.children, depth + 1);
        }
    }
    let mut out = String::new();
    walk(&mut out, nodes, 0);
    out
}

/// Renders one context message as `role: text`.
pub(crate) fn render_message(m: &Value) -> String {
    let role = m["role"].as_str().unwrap_or("?");
    let text = match (&m["content"], &m["summary"]) {
        (_, Value::String(s)) => s.clone(),
        (Value::String(s), _) => s.clone(),
        (Value::Array(blocks), _) => blocks
            .iter()
            .map(|b| match b["type"].as_str() {
                Some("text") => b["text"].as_str().unwrap_or("").to_owned(),
                Some(t) => format!("<{t} {}>", b["id"].as_str().unwrap_or("")),
                None => "?".to_owned(),
            })
            .collect::<Vec<_>>()
            .join(" | "),
        _ => String::new(),
    };
    format!("{role}: {text}")
}

/// Renders the messages of a context value, each as `role: text`.
pub(crate) fn texts(v: &Value) -> Vec<String> {
    v["messages"].as_array().into_iter().flatten().map(render_message).collect()
}

/// Renders a context JSON (pi or omp) as one line per message plus the settings.
pub(crate) fn render_context(json: &str) -> String {
    let v: Value = serde_json::from_str(json).expect("context output is JSON");
    let mut out = String::new();
    for m in v["messages"].as_array().into_iter().flatten() {
        out.push_str(&render_message(m));
        out.push('\n');
    }
    let mut settings = v.as_object().cloned().unwrap_or_default();
    settings.shift_remove("messages");
    out.push_str(&format!("= {}\n", Value::Object(settings)));
    out
}

/// Builds a tree from the textual format.
pub(crate) fn tree_of(text: &str, dialect: Dialect) -> SessionTree {
    SessionTree::new(dialect, parse_session(text, dialect))
}

/// Returns the ids of records.
pub(crate) fn ids<'a>(records: impl IntoIterator<Item = &'a Record>) -> Vec<&'a str> {
    records.into_iter().map(|r| r.id().unwrap_or("")).collect()
}

/// Parses JSON output into a value.
pub(crate) fn value(json: &str) -> Value {
    serde_json::from_str(json).expect("output is JSON")
}
