//! A session's branch as a document for people: Markdown or one HTML file.

use std::fmt::Write as _;

use serde_json::Value;
use session_model::Dialect;
use session_tree::Leaf;

use super::JobError;
use crate::{SessionError, SessionManager};

/// The document [`export`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExportFormat {
    /// Markdown. Text is written with `&`, `<` and `>` as character references, so no
    /// renderer reads HTML out of a session; code stays in fenced blocks as it is.
    Markdown,
    /// One self-contained HTML file, every text escaped, images inlined.
    Html,
}

/// Returns the branch from the root to `leaf` (default: the current leaf) of the session
/// `m` as a document: what the model saw (omp: its display transcript, where summaries
/// and every entry of the branch show as such), each message under a heading, tool calls
/// and command runs (pi's and omp's `bashExecution`, omp's `pythonExecution`) with their
/// input and output, any other message kind shown as its JSON rather than left out.
/// omp's blob references come resolved from the blob store. Reads only.
pub fn export(m: &SessionManager, leaf: Option<&str>, format: ExportFormat) -> Result<String, JobError> {
    let leaf = match leaf {
        Some(id) if m.tree().get(id).is_none() => {
            return Err(SessionError::EntryNotFound { id: id.to_owned() }.into());
        }
        Some(id) => Leaf::Id(id),
        None => Leaf::Current,
    };
    let context = m.context_json(leaf, m.dialect() == Dialect::Omp)?;
    m.check_reads()?;
    let context: Value = session_model::json::parse(&context).unwrap_or(Value::Null);
    let messages = context.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
    let title = m.session_name().unwrap_or_else(|| format!("Session {}", m.session_id()));
    let timestamp = m.header().get_str("timestamp").unwrap_or("").to_owned();
    let doc = Doc { title, id: m.session_id().to_owned(), cwd: m.cwd().to_owned(), timestamp };
    let out = match format {
        ExportFormat::Markdown => markdown(&doc, &messages),
        ExportFormat::Html => html(&doc, &messages),
    };
    Ok(out.trim_end().to_owned())
}

struct Doc {
    title: String,
    id: String,
    cwd: String,
    timestamp: String,
}

/// One part of a message, rendered for the document.
enum Piece {
    Text(String),
    Thinking(String),
    /// Something run, and what it printed.
    Code {
        label: String,
        lang: &'static str,
        code: String,
    },
    Image {
        mime: String,
        data: String,
    },
    Other(String),
}

fn string(v: &Value, key: &str) -> String {
    match v.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => session_model::json::to_js_string(other),
    }
}

/// Returns the parts of a message of the projected context.
fn pieces(msg: &Value) -> Vec<Piece> {
    let mut out = Vec::new();
    match msg.get("role").and_then(Value::as_str) {
        Some("bashExecution") => {
            out.push(Piece::Code { label: "command".into(), lang: "sh", code: string(msg, "command") });
            let mut status = Vec::new();
            if let Some(code) = msg.get("exitCode").filter(|c| !c.is_null()) {
                status.push(format!("exit code {}", session_model::json::to_js_string(code)));
            }
            for flag in ["cancelled", "truncated"] {
                if msg.get(flag).and_then(Value::as_bool) == Some(true) {
                    status.push(flag.to_owned());
                }
            }
            let label = if status.is_empty() { "output".to_owned() } else { format!("output ({})", status.join(", ")) };
            out.push(Piece::Code { label, lang: "", code: string(msg, "output") });
            return out;
        }
        Some("pythonExecution") => {
            out.push(Piece::Code { label: "code".into(), lang: "python", code: string(msg, "code") });
            out.push(Piece::Code { label: "output".into(), lang: "", code: string(msg, "output") });
            return out;
        }
        _ => {}
    }
    if let Some(summary) = msg.get("summary").and_then(Value::as_str) {
        out.push(Piece::Text(summary.to_owned()));
    }
    match msg.get("content") {
        Some(Value::String(s)) => out.push(Piece::Text(s.clone())),
        Some(Value::Array(blocks)) => {
            for b in blocks {
                let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
                out.push(match b.get("type").and_then(Value::as_str) {
                    Some("text") => Piece::Text(s("text")),
                    Some("thinking") => Piece::Thinking(s("thinking")),
                    Some("toolCall") => Piece::Code {
                        label: format!("→ {}", s("name")),
                        lang: "json",
                        code: b
                            .get("arguments")
                            .map(|a| serde_json::to_string_pretty(a).unwrap_or_default())
                            .unwrap_or_default(),
                    },
                    Some("image") => Piece::Image { mime: s("mimeType"), data: s("data") },
                    Some(other) => Piece::Other(other.to_owned()),
                    None => Piece::Other("block".to_owned()),
                });
            }
        }
        Some(other) if !other.is_null() => {
            out.push(Piece::Code { label: "content".into(), lang: "json", code: pretty(other) });
        }
        _ => {}
    }
    if out.is_empty() {
        // A kind of message this does not know: shown, not dropped.
        let mut rest = msg.clone();
        if let Some(m) = rest.as_object_mut() {
            m.shift_remove("role");
            m.shift_remove("timestamp");
        }
        if rest.as_object().is_some_and(|m| !m.is_empty()) {
            out.push(Piece::Code { label: "message".into(), lang: "json", code: pretty(&rest) });
        }
    }
    out
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// A heading for a message of the projected context.
fn heading(msg: &Value) -> String {
    let role = msg.get("role").and_then(Value::as_str).unwrap_or("?");
    match role {
        "toolResult" => {
            let name = msg.get("toolName").and_then(Value::as_str).unwrap_or("tool");
            let error = msg.get("isError").and_then(Value::as_bool) == Some(true);
            format!("Result of {name}{}", if error { " (error)" } else { "" })
        }
        "compactionSummary" => "Summary of earlier messages".to_owned(),
        "branchSummary" => "Summary of another branch".to_owned(),
        "bashExecution" => "Command run by the user".to_owned(),
        "pythonExecution" => "Python run by the user".to_owned(),
        "user" => "User".to_owned(),
        "assistant" => "Assistant".to_owned(),
        "custom" => match msg.get("customType").and_then(Value::as_str) {
            Some(t) => format!("custom: {t}"),
            None => "custom".to_owned(),
        },
        other => other.to_owned(),
    }
}

/// Escapes the characters HTML gives meaning to (quotes too, for attributes).
fn html_escape(s: &str) -> String {
    escape(s, true)
}

/// Markdown text with no HTML in it: `&`, `<` and `>` become character references,
/// which every CommonMark renderer shows as the characters themselves.
fn md_text(s: &str) -> String {
    escape(s, false)
}

fn escape(s: &str, quotes: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if quotes => out.push_str("&quot;"),
            '\'' if quotes => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// A fenced code block that `code` cannot close: the fence is longer than any run of
/// backticks in it.
fn fenced(lang: &str, code: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in code.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}{lang}\n{code}\n{fence}")
}

fn markdown(doc: &Doc, messages: &[Value]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", md_text(&doc.title));
    let _ = writeln!(out, "{} · {} · {}\n", fenced_inline(&doc.id), md_text(&doc.cwd), md_text(&doc.timestamp));
    for msg in messages {
        let _ = writeln!(out, "## {}\n", md_text(&heading(msg)));
        for p in pieces(msg) {
            let _ = match p {
                Piece::Text(t) => writeln!(out, "{}\n", md_text(&t)),
                Piece::Thinking(t) => {
                    let quoted: Vec<String> = md_text(&t).lines().map(|l| format!("> {l}")).collect();
                    writeln!(out, "> *thinking*\n{}\n", quoted.join("\n"))
                }
                Piece::Code { label, lang, code } => {
                    writeln!(out, "**{}**\n\n{}\n", md_text(&label), fenced(lang, &code))
                }
                Piece::Image { mime, .. } => writeln!(out, "*[image {}]*\n", md_text(&mime)),
                Piece::Other(t) => writeln!(out, "*[{}]*\n", md_text(&t)),
            };
        }
    }
    out
}

/// Inline code that its text cannot close.
fn fenced_inline(s: &str) -> String {
    if s.contains('`') { format!("`` {} ``", s.replace("``", "` `")) } else { format!("`{s}`") }
}

fn html(doc: &Doc, messages: &[Value]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{}</title><style>\
         body{{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;line-height:1.5}}\
         section{{border-left:4px solid #ccc;padding:.2rem 1rem;margin:1rem 0}}\
         section.user{{border-color:#3b82f6}}section.assistant{{border-color:#10b981}}\
         section.toolResult{{border-color:#a3a3a3;font-size:.9em}}pre{{background:#f4f4f5;padding:.6rem;overflow:auto;white-space:pre-wrap}}\
         .thinking{{color:#6b7280;font-style:italic}}img{{max-width:100%}}h2{{font-size:1rem;margin:.2rem 0}}\
         </style></head><body>\n<h1>{}</h1>\n<p><code>{}</code> · {}</p>\n",
        html_escape(&doc.title),
        html_escape(&doc.title),
        html_escape(&doc.id),
        html_escape(&doc.cwd)
    );
    for msg in messages {
        let role = msg.get("role").and_then(Value::as_str).unwrap_or("other");
        let _ = writeln!(out, "<section class=\"{}\"><h2>{}</h2>", html_escape(role), html_escape(&heading(msg)));
        for p in pieces(msg) {
            let _ = match p {
                Piece::Text(t) => writeln!(out, "<pre>{}</pre>", html_escape(&t)),
                Piece::Thinking(t) => writeln!(out, "<pre class=\"thinking\">{}</pre>", html_escape(&t)),
                Piece::Code { label, code, .. } => {
                    writeln!(out, "<p><b>{}</b></p><pre>{}</pre>", html_escape(&label), html_escape(&code))
                }
                Piece::Image { mime, data } => {
                    let safe = data.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
                    if safe && mime.starts_with("image/") && !mime.contains(['"', '<', '>', '&', ';']) {
                        writeln!(out, "<img alt=\"image\" src=\"data:{};base64,{data}\">", html_escape(&mime))
                    } else {
                        writeln!(out, "<p><i>[image]</i></p>")
                    }
                }
                Piece::Other(t) => writeln!(out, "<p><i>[{}]</i></p>", html_escape(&t)),
            };
        }
        out.push_str("</section>\n");
    }
    out.push_str("</body></html>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_carries_no_html_and_fences_cannot_be_closed() {
        assert_eq!(md_text("<script>x&y</script>"), "&lt;script&gt;x&amp;y&lt;/script&gt;");
        assert_eq!(fenced("", "a ``` b"), "````\na ``` b\n````");
        assert_eq!(fenced("sh", "ls"), "```sh\nls\n```");
        assert_eq!(html_escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
    }

    #[test]
    fn command_runs_show_their_command_and_output() {
        let msg = serde_json::json!({"role": "bashExecution", "command": "ls -la", "output": "total 0", "exitCode": 2, "cancelled": false, "truncated": true});
        let md =
            markdown(&Doc { title: "t".into(), id: "i".into(), cwd: "/".into(), timestamp: String::new() }, &[msg]);
        assert!(md.contains("```sh\nls -la\n```"), "{md}");
        assert!(md.contains("output (exit code 2, truncated)"), "{md}");
        assert!(md.contains("```\ntotal 0\n```"), "{md}");
        let unknown = serde_json::json!({"role": "fileMention", "files": [{"path": "/a"}]});
        assert!(!pieces(&unknown).is_empty());
    }
}
