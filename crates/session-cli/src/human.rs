//! Output for a person at a terminal: aligned fields, an indented tree, a readable
//! transcript. Programs get JSON instead (`--json`, or stdout not a terminal).

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;
use session::model::Record;
use session::tree::TreeNode;
use session::{Dialect, SessionManager};
use unicode_width::UnicodeWidthStr;

/// Longest text shown for one entry or one block before it is cut with `…`.
const SNIPPET: usize = 72;

/// Returns `s` on one line (whitespace runs become one space), at most `max` chars.
pub(crate) fn one_line(s: &str, max: usize) -> String {
    let mut out = String::new();
    let mut count = 0;
    for word in s.split_whitespace() {
        if count > 0 {
            out.push(' ');
            count += 1;
        }
        for c in word.chars() {
            if count + 1 >= max {
                out.push('…');
                return out;
            }
            out.push(c);
            count += 1;
        }
    }
    out
}

/// Returns the text of a message's `content` (a string, or the text of its text blocks).
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => b.get("text").and_then(Value::as_str).map(str::to_owned),
                Some("image") => Some("[image]".to_owned()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// A short description of an entry: its type (and role), and a snippet of its text.
fn describe(r: &Record) -> String {
    let ty = r.type_str().unwrap_or("?");
    let v = r.value();
    match ty {
        "message" => {
            let msg = v.get("message");
            let role = msg.and_then(|m| m.get("role")).and_then(Value::as_str).unwrap_or("?");
            let mut text = content_text(msg.and_then(|m| m.get("content")));
            if let Some(Value::Array(blocks)) = msg.and_then(|m| m.get("content")) {
                for b in blocks {
                    if b.get("type").and_then(Value::as_str) == Some("toolCall") {
                        let name = b.get("name").and_then(Value::as_str).unwrap_or("?");
                        text.push_str(&format!(" [{name}(…)]"));
                    }
                }
            }
            format!("{role}: {}", one_line(&text, SNIPPET))
        }
        "compaction" | "branch_summary" => {
            let summary = v.get("summary").and_then(Value::as_str).unwrap_or_default();
            format!("{ty}: {}", one_line(summary, SNIPPET))
        }
        "label" => {
            let target = v.get("targetId").and_then(Value::as_str).unwrap_or("?");
            match v.get("label").and_then(Value::as_str) {
                Some(l) => format!("label {target} = {}", one_line(l, SNIPPET)),
                None => format!("label {target} cleared"),
            }
        }
        "session_info" | "title_change" => {
            let name = v.get("name").or_else(|| v.get("title")).and_then(Value::as_str).unwrap_or_default();
            format!("{ty}: {}", one_line(name, SNIPPET))
        }
        "model_change" => {
            let model = v.get("modelId").or_else(|| v.get("model")).and_then(Value::as_str).unwrap_or("?");
            format!("{ty}: {model}")
        }
        "custom" | "custom_message" => {
            let t = v.get("customType").and_then(Value::as_str).unwrap_or("?");
            format!("{ty} ({t})")
        }
        _ => ty.to_owned(),
    }
}

fn field(out: &mut String, name: &str, value: &str) {
    let _ = writeln!(out, "{name:<14} {value}");
}

/// `info`: the session's fields, aligned.
/// `foreign`: the source file and its import's report when the session is another
/// agent's, read as the pi session its import writes (nothing written).
pub(crate) fn info(m: &SessionManager, foreign: Option<(&Path, &session::import::ImportReport)>) -> String {
    let mut out = String::new();
    let h = m.header();
    match foreign {
        Some((source, report)) => {
            field(&mut out, "file", &source.display().to_string());
            let agent = format!("{} (read as the pi session `session import` writes)", report.source.name());
            field(&mut out, "agent", &agent);
        }
        None => {
            if let Some(f) = m.session_file() {
                field(&mut out, "file", &f.display().to_string());
            }
            field(&mut out, "agent", if m.dialect() == Dialect::Pi { "pi" } else { "omp" });
        }
    }
    field(&mut out, "id", m.session_id());
    field(&mut out, "name", m.session_name().as_deref().unwrap_or("(none)"));
    field(&mut out, "cwd", m.cwd());
    field(&mut out, "created", h.get_str("timestamp").unwrap_or("?"));
    let version = h.get("version").map(session::model::json::to_js_string).unwrap_or_else(|| "1".into());
    field(&mut out, "version", &version);
    if let Some(parent) = h.get_str("parentSession") {
        field(&mut out, "forked from", parent);
    }
    let t = m.tree();
    field(&mut out, "entries", &t.entries().len().to_string());
    field(&mut out, "branch", &format!("{} entries to the leaf", t.get_branch(None).len()));
    field(&mut out, "leaf", t.leaf_id().unwrap_or("(before the first entry)"));
    let r = m.load_report();
    if r.migrated || r.repaired_final_newline || r.reinitialised {
        let mut notes = Vec::new();
        if r.migrated {
            notes.push(format!("migrated from version {}", r.migrated_from.as_deref().unwrap_or("1")));
        }
        if r.repaired_final_newline {
            notes.push("last line repaired".to_owned());
        }
        if r.reinitialised {
            notes.push("empty file: a fresh header".to_owned());
        }
        let done = if r.wrote { "written" } else { "in memory only" };
        field(&mut out, "on open", &format!("{} ({done})", notes.join(", ")));
    }
    if let Some((_, report)) = foreign.filter(|(_, r)| !r.diagnostics.is_empty()) {
        let notes = report.diagnostics.len();
        field(&mut out, "import", &format!("{notes} source line(s) skipped or kept as custom entries"));
    }
    let damage = m.diagnostics().len() + t.diagnostics().len();
    if damage > 0 {
        field(&mut out, "damage", &format!("{damage} finding(s); see `session check`"));
    }
    out.trim_end().to_owned()
}

/// One entry on one line: its id and what it is, fitted to `width` display cells.
pub(crate) fn entry_line(r: &Record, width: usize) -> String {
    let head = format!("{:<10} ", r.id().unwrap_or("-"));
    let room = width.saturating_sub(head.width()).max(16);
    format!("{head}{}", crate::table::fit(&describe(r), room))
}

/// `entries`: one line per entry (`--full`: the entry's JSON line).
pub(crate) fn entries(m: &SessionManager, full: bool) -> String {
    let mut out = String::new();
    let width = crate::table::width();
    for r in m.tree().entries() {
        out.push_str(&if full { r.line() } else { entry_line(r, width).into() });
        out.push('\n');
    }
    let _ = write!(out, "{} entries", m.tree().entries().len());
    out
}

/// `tree`: an indented tree; a chain continues at the same depth, indentation grows
/// only where a branch splits. `*` marks the active branch; labels follow in `[…]`.
pub(crate) fn tree(m: &SessionManager, nodes: &[TreeNode]) -> String {
    let width = crate::table::width();
    let active: std::collections::HashSet<&str> =
        m.tree().get_branch(None).into_iter().filter_map(Record::id).collect();
    let mut out = String::new();
    // (node, prefix for its line, prefix for what follows it, is a branch start)
    let mut stack: Vec<(&TreeNode, String, String)> = Vec::new();
    let n = nodes.len();
    for (i, node) in nodes.iter().enumerate().rev() {
        let last = i + 1 == n;
        let (line, rest) = if n > 1 {
            (if last { "└─ " } else { "├─ " }.to_owned(), if last { "   " } else { "│  " }.to_owned())
        } else {
            (String::new(), String::new())
        };
        stack.push((node, line, rest));
    }
    while let Some((node, line_prefix, rest_prefix)) = stack.pop() {
        let id = node.entry.id().unwrap_or("-");
        let mark = if active.contains(id) { "*" } else { " " };
        let label = node.label.as_deref().map(|l| format!("  [{}]", one_line(l, 40))).unwrap_or_default();
        // The line fits the terminal with its label: the description gives way.
        let head = format!("{line_prefix}{mark} {id:<8} ");
        let room = width.saturating_sub(head.width() + label.width()).max(16);
        let _ = writeln!(out, "{head}{}{label}", crate::table::fit(&describe(&node.entry), room));
        match node.children.len() {
            0 => {}
            1 => stack.push((&node.children[0], rest_prefix.clone(), rest_prefix)),
            k => {
                for (j, child) in node.children.iter().enumerate().rev() {
                    let last = j + 1 == k;
                    let line = format!("{rest_prefix}{}", if last { "└─ " } else { "├─ " });
                    let rest = format!("{rest_prefix}{}", if last { "   " } else { "│  " });
                    stack.push((child, line, rest));
                }
            }
        }
    }
    if out.is_empty() {
        return "(no entries)".to_owned();
    }
    out.trim_end().to_owned()
}

/// `branch`: the path from the root to the leaf, one entry a line.
pub(crate) fn branch(path: &[&Record]) -> String {
    let mut out = String::new();
    let width = crate::table::width();
    for r in path {
        let head = format!("{:<10} ", r.id().unwrap_or("-"));
        let room = width.saturating_sub(head.width()).max(16);
        let _ = writeln!(out, "{head}{}", crate::table::fit(&describe(r), room));
    }
    let _ = write!(out, "{} entries", path.len());
    out
}

/// `context`: the messages the model sees, as a transcript: roles, text, tool calls and
/// their results summarised, summaries shown as such.
/// One message of a context as [`transcript`] prints it: a heading line and its text
/// (thinking, tool calls and results cut to one line), ending in a newline.
pub(crate) fn message_text(msg: &Value) -> String {
    let mut out = String::new();
    let role = msg.get("role").and_then(Value::as_str).unwrap_or("?");
    let content = msg.get("content");
    match role {
        "user" | "assistant" | "custom" | "developer" | "system" => {
            let _ = writeln!(out, "── {role} ──");
            if let Some(Value::Array(blocks)) = content {
                for b in blocks {
                    match b.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            let _ = writeln!(out, "{}", b.get("text").and_then(Value::as_str).unwrap_or_default());
                        }
                        Some("thinking") => {
                            let t = b.get("thinking").and_then(Value::as_str).unwrap_or_default();
                            let _ = writeln!(out, "(thinking) {}", one_line(t, SNIPPET));
                        }
                        Some("toolCall") => {
                            let name = b.get("name").and_then(Value::as_str).unwrap_or("?");
                            let args = b.get("arguments").map(|a| a.to_string()).unwrap_or_default();
                            let _ = writeln!(out, "→ {name} {}", one_line(&args, SNIPPET));
                        }
                        Some("image") => {
                            let _ = writeln!(out, "[image]");
                        }
                        Some(other) => {
                            let _ = writeln!(out, "[{other}]");
                        }
                        None => {}
                    }
                }
            } else {
                let _ = writeln!(out, "{}", content_text(content));
            }
        }
        "toolResult" => {
            let name = msg.get("toolName").and_then(Value::as_str).unwrap_or("tool");
            let error = msg.get("isError").and_then(Value::as_bool) == Some(true);
            let text = content_text(content);
            let _ = writeln!(out, "← {name}{}: {}", if error { " (error)" } else { "" }, one_line(&text, SNIPPET));
        }
        "compactionSummary" | "branchSummary" => {
            let what =
                if role == "compactionSummary" { "summary of earlier messages" } else { "summary of another branch" };
            let summary = msg.get("summary").and_then(Value::as_str).unwrap_or_default();
            let _ = writeln!(out, "── {what} ──\n{summary}");
        }
        other => {
            let _ = writeln!(out, "── {other} ──\n{}", one_line(&content_text(content), SNIPPET));
        }
    }
    out
}

pub(crate) fn transcript(context_json: &str) -> Result<String, Box<dyn std::error::Error>> {
    let context: Value = serde_json::from_str(context_json)?;
    let mut out = String::new();
    let messages = context.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
    for msg in &messages {
        out.push_str(&message_text(msg));
    }
    let _ = write!(out, "{} message(s)", messages.len());
    Ok(out)
}

/// `check`: each finding on a line, then a verdict.
pub(crate) fn check(file: &Path, m: &SessionManager) -> String {
    let mut out = String::new();
    for d in m.diagnostics() {
        let _ = writeln!(out, "{}: {d}", file.display());
    }
    for d in m.tree().diagnostics() {
        let _ = writeln!(out, "{}: {d}", file.display());
    }
    let n = m.diagnostics().len() + m.tree().diagnostics().len();
    if n == 0 {
        let _ = write!(out, "{}: no damage found", file.display());
    } else {
        let _ = write!(out, "{n} finding(s)");
    }
    out
}
