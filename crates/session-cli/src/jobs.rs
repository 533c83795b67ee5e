//! The jobs beyond the references' API: `repair`, `rm`, `export` and `stats`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, IsTerminal, Write as _};
use std::path::{Path, PathBuf};

use serde_json::Value;
use session::tree::Leaf;
use session::{Dialect, OpenMode, SessionManager};

use crate::args::{ExportFormat, Global};
use crate::commands::{Result, dialect_for, env, open, wants_json};

/// Returns `<file>.<epoch ms>.bak`, omp's backup naming (its listing promotes such a
/// backup only when the session itself is missing).
fn backup_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(format!(".{}.bak", session::store::clock::Clock::now_ms(&session::store::clock::SystemClock)));
    PathBuf::from(name)
}

/// Copies `file` to a new backup beside it and returns the backup's path.
pub(crate) fn back_up(file: &Path) -> Result<PathBuf> {
    let storage = crate::store::current();
    let bytes = storage.read(file)?;
    let path = backup_path(file);
    storage.write_new(&path, &bytes)?;
    Ok(path)
}

/// `repair FILE`: writes the session as the loader reads it (garbage lines, a torn
/// last line and blank lines dropped, a v1/v2 file migrated), atomically, keeping the
/// original as a backup unless `no_backup`. A file that does not load (no valid
/// header) is never written. A clean file is left alone.
pub(crate) fn repair(g: &Global, file: &Path, no_backup: bool, json: bool) -> Result<String> {
    let probe = open(g, file)?;
    let findings = probe.diagnostics().len();
    let migrated = probe.load_report().migrated;
    drop(probe);
    let damaged = findings > 0 || migrated;
    let mut backup = None;
    if damaged {
        if !no_backup {
            backup = Some(back_up(file)?);
        }
        let dialect = dialect_for(g, file);
        let mut m = SessionManager::open_with(dialect, file, env(g, dialect), OpenMode::MustExist)?;
        m.rewrite_entries()?;
        m.close()?;
    }
    if json {
        let mut out = serde_json::Map::new();
        out.insert("repaired".into(), damaged.into());
        out.insert("findings".into(), findings.into());
        out.insert("migrated".into(), migrated.into());
        out.insert("backup".into(), backup.as_ref().map(|b| Value::from(b.to_string_lossy().into_owned())).into());
        return Ok(Value::Object(out).to_string());
    }
    Ok(match (damaged, backup) {
        (false, _) => format!("{}: nothing to repair", file.display()),
        (true, Some(b)) => format!(
            "{}: repaired ({findings} finding(s){}); original kept as {}",
            file.display(),
            if migrated { ", migrated" } else { "" },
            b.display()
        ),
        (true, None) => format!("{}: repaired ({findings} finding(s))", file.display()),
    })
}

/// `rm FILE`: deletes the session with its artifacts directory and backups, after
/// asking on a terminal (or with `yes`).
pub(crate) fn rm(file: &Path, yes: bool) -> Result<String> {
    let storage = crate::store::current();
    match storage.stat(file)? {
        Some(st) if st.is_file => {}
        Some(_) => return Err(format!("{} is not a session file", file.display()).into()),
        None => return Err(format!("session file not found: {}", file.display()).into()),
    }
    if !yes {
        if !std::io::stdin().is_terminal() {
            return Err(format!("refusing to delete {} without --yes (stdin is not a terminal)", file.display()).into());
        }
        eprint!("delete {} and its artifacts? [y/N] ", file.display());
        std::io::stderr().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            return Err("nothing deleted".into());
        }
    }
    storage.delete_with_artifacts(file)?;
    Ok(format!("deleted {}", file.display()))
}

fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// One block of a message, rendered for the document.
enum Piece {
    Text(String),
    Thinking(String),
    ToolCall { name: String, args: String },
    Image { mime: String, data: String },
    Other(String),
}

fn pieces(content: Option<&Value>) -> Vec<Piece> {
    match content {
        Some(Value::String(s)) => vec![Piece::Text(s.clone())],
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|b| {
                let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => Piece::Text(s("text")),
                    Some("thinking") => Piece::Thinking(s("thinking")),
                    Some("toolCall") => Piece::ToolCall {
                        name: s("name"),
                        args: b
                            .get("arguments")
                            .map(|a| serde_json::to_string_pretty(a).unwrap_or_default())
                            .unwrap_or_default(),
                    },
                    Some("image") => Piece::Image { mime: s("mimeType"), data: s("data") },
                    Some(other) => Piece::Other(other.to_owned()),
                    None => Piece::Other("block".to_owned()),
                }
            })
            .collect(),
        _ => Vec::new(),
    }
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
        "user" => "User".to_owned(),
        "assistant" => "Assistant".to_owned(),
        other => other.to_owned(),
    }
}

/// `export FILE`: the branch to the leaf as a readable document, Markdown or one
/// self-contained HTML file (images inlined; omp's blob references resolved from the
/// blob store).
pub(crate) fn export(g: &Global, file: &Path, leaf: Option<&str>, format: ExportFormat) -> Result<String> {
    let mut m = open(g, file)?;
    if let Some(id) = leaf {
        m.tree_mut().branch(id)?;
    }
    // omp's display transcript (summaries and every branch entry shown as such).
    let context = m.context_json(Leaf::Current, m.dialect() == Dialect::Omp)?;
    let context: Value = serde_json::from_str(&context)?;
    let messages = context.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
    let title = m.session_name().unwrap_or_else(|| format!("Session {}", m.session_id()));
    let mut out = String::new();
    match format {
        ExportFormat::Md => {
            let _ = writeln!(
                out,
                "# {title}\n\n`{}` · {} · {}\n",
                m.session_id(),
                m.cwd(),
                m.header().get_str("timestamp").unwrap_or("")
            );
            for msg in &messages {
                let _ = writeln!(out, "## {}\n", heading(msg));
                if let Some(summary) = msg.get("summary").and_then(Value::as_str) {
                    let _ = writeln!(out, "{summary}\n");
                }
                for p in pieces(msg.get("content")) {
                    match p {
                        Piece::Text(t) => {
                            let _ = writeln!(out, "{t}\n");
                        }
                        Piece::Thinking(t) => {
                            let quoted: Vec<String> = t.lines().map(|l| format!("> {l}")).collect();
                            let _ = writeln!(out, "> *thinking*\n{}\n", quoted.join("\n"));
                        }
                        Piece::ToolCall { name, args } => {
                            let _ = writeln!(out, "**→ {name}**\n\n```json\n{args}\n```\n");
                        }
                        Piece::Image { mime, .. } => {
                            let _ = writeln!(out, "*[image {mime}]*\n");
                        }
                        Piece::Other(t) => {
                            let _ = writeln!(out, "*[{t}]*\n");
                        }
                    }
                }
            }
        }
        ExportFormat::Html => {
            let _ = write!(
                out,
                "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{}</title><style>\
                 body{{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;line-height:1.5}}\
                 section{{border-left:4px solid #ccc;padding:.2rem 1rem;margin:1rem 0}}\
                 section.user{{border-color:#3b82f6}}section.assistant{{border-color:#10b981}}\
                 section.toolResult{{border-color:#a3a3a3;font-size:.9em}}pre{{background:#f4f4f5;padding:.6rem;overflow:auto;white-space:pre-wrap}}\
                 .thinking{{color:#6b7280;font-style:italic}}img{{max-width:100%}}h2{{font-size:1rem;margin:.2rem 0}}\
                 </style></head><body>\n<h1>{}</h1>\n<p><code>{}</code> · {}</p>\n",
                html_escape(&title),
                html_escape(&title),
                html_escape(m.session_id()),
                html_escape(m.cwd())
            );
            for msg in &messages {
                let role = msg.get("role").and_then(Value::as_str).unwrap_or("other");
                let _ =
                    writeln!(out, "<section class=\"{}\"><h2>{}</h2>", html_escape(role), html_escape(&heading(msg)));
                if let Some(summary) = msg.get("summary").and_then(Value::as_str) {
                    let _ = writeln!(out, "<pre>{}</pre>", html_escape(summary));
                }
                for p in pieces(msg.get("content")) {
                    let _ = match p {
                        Piece::Text(t) => writeln!(out, "<pre>{}</pre>", html_escape(&t)),
                        Piece::Thinking(t) => writeln!(out, "<pre class=\"thinking\">{}</pre>", html_escape(&t)),
                        Piece::ToolCall { name, args } => {
                            writeln!(out, "<p>→ <b>{}</b></p><pre>{}</pre>", html_escape(&name), html_escape(&args))
                        }
                        Piece::Image { mime, data } => {
                            let safe =
                                data.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
                            if safe && mime.starts_with("image/") {
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
        }
    }
    Ok(out.trim_end().to_owned())
}

/// `stats`: for every session under the agents' homes (or `dir`): counts, bytes, the
/// largest sessions, entries by type, and tokens and cost summed from assistant usage.
pub(crate) fn stats(g: &Global, dir: Option<&Path>) -> Result<String> {
    let dialects = match g.dialect {
        Some(d) => vec![Dialect::from(d)],
        None => vec![Dialect::Pi, Dialect::Omp],
    };
    let storage = crate::store::current();
    let (mut sessions, mut bytes, mut unreadable) = (0u64, 0u64, 0u64);
    let mut largest: Vec<(u64, PathBuf)> = Vec::new();
    let mut by_type: BTreeMap<String, u64> = BTreeMap::new();
    let (mut input, mut output, mut cache_read, mut cost) = (0f64, 0f64, 0f64, 0f64);
    for dialect in dialects {
        let d = crate::find::discovery_for(g, dialect, false)?;
        for info in d.list_all(dir, &mut |_| {})? {
            let size = storage.stat(&info.path)?.map_or(0, |s| s.size);
            sessions += 1;
            bytes += size;
            largest.push((size, info.path.clone()));
            let Ok(m) = SessionManager::open_with(dialect, &info.path, env(g, dialect), OpenMode::ReadOnly) else {
                unreadable += 1;
                continue;
            };
            for r in m.tree().entries() {
                *by_type.entry(r.type_str().unwrap_or("?").to_owned()).or_default() += 1;
                if r.message_role() == Some("assistant")
                    && let Some(usage) = r.get("message").and_then(|msg| msg.get("usage"))
                {
                    let n = |k: &str| usage.get(k).and_then(Value::as_f64).unwrap_or(0.0);
                    input += n("input");
                    output += n("output");
                    cache_read += n("cacheRead");
                    cost += usage.get("cost").and_then(|c| c.get("total")).and_then(Value::as_f64).unwrap_or(0.0);
                }
            }
            m.check_reads()?;
        }
    }
    largest.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    largest.truncate(5);
    if wants_json(g) {
        let v = serde_json::json!({
            "sessions": sessions,
            "bytes": bytes,
            "unreadable": unreadable,
            "largest": largest.iter().map(|(n, p)| serde_json::json!({"path": p.to_string_lossy(), "bytes": n})).collect::<Vec<_>>(),
            "entriesByType": by_type,
            "tokens": {"input": input, "output": output, "cacheRead": cache_read},
            "cost": cost,
        });
        return Ok(v.to_string());
    }
    let mut out = String::new();
    let _ = writeln!(out, "{sessions} session(s), {}", human_bytes(bytes));
    if unreadable > 0 {
        let _ = writeln!(out, "{unreadable} could not be read (see `session check`)");
    }
    let _ = writeln!(out, "\nlargest:");
    for (n, p) in &largest {
        let _ = writeln!(out, "  {:>9}  {}", human_bytes(*n), p.display());
    }
    let _ = writeln!(out, "\nentries by type:");
    for (t, n) in &by_type {
        let _ = writeln!(out, "  {n:>9}  {t}");
    }
    let _ = write!(out, "\ntokens: {input:.0} input, {output:.0} output, {cache_read:.0} cache read\ncost: ${cost:.4}");
    Ok(out)
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{n} B") } else { format!("{v:.1} {}", UNITS[unit]) }
}

/// Returns every `*.jsonl` file under `root` in the `--store` storage (dot-folders and
/// dot-files skipped), sorted; symbolic links are not followed into folders.
fn session_files(root: &Path) -> Vec<PathBuf> {
    let storage = crate::store::current();
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = storage.read_dir(&dir) else { continue };
        for e in entries {
            if e.name.starts_with('.') {
                continue;
            }
            if e.kind == session::store::EntryKind::Dir {
                stack.push(dir.join(&e.name));
            } else if e.name.ends_with(".jsonl") {
                out.push(dir.join(&e.name));
            }
        }
    }
    out.sort();
    out
}

/// Returns the blob hashes a session's text refers to (`blob:sha256:<64 hex>`).
fn blob_refs(text: &[u8], into: &mut std::collections::BTreeSet<String>) {
    const PREFIX: &[u8] = b"blob:sha256:";
    let mut at = 0;
    while let Some(i) = memchr_find(&text[at..], PREFIX) {
        let start = at + i + PREFIX.len();
        if let Some(hex) = text.get(start..start + 64)
            && hex.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            into.insert(String::from_utf8_lossy(hex).into_owned());
        }
        at = start;
    }
}

fn memchr_find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The blob hashes stored in `dir` (files named by 64 lowercase hex digits; typed
/// sidecars `<hex>.<ext>` belong to them).
fn stored_blobs(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let hex = name.split('.').next()?.to_owned();
            (hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))).then(|| (hex, e.path()))
        })
        .collect();
    out.sort();
    out
}

/// Where `fsck` and `gc` look: the given folders, else both agents' sessions roots, and
/// omp's blob store.
/// The sessions roots to walk (each with whose they are) and the blob store.
type Roots = (Vec<(Dialect, PathBuf)>, Option<PathBuf>);

fn roots(g: &Global, dirs: &[PathBuf]) -> Result<Roots> {
    let env = session::discovery::ProcessEnv::from_process_env()?;
    let omp = session::discovery::AgentDirs::omp(&env, g.omp_home.into());
    let blobs = Some(g.blob_dir.clone().unwrap_or_else(|| omp.agent_dir.join("blobs")));
    if !dirs.is_empty() {
        let dialect = g.dialect.map(Dialect::from);
        return Ok((dirs.iter().map(|d| (dialect.unwrap_or(Dialect::Pi), d.clone())).collect(), blobs));
    }
    let mut out = Vec::new();
    if g.dialect.is_none_or(|d| Dialect::from(d) == Dialect::Pi) {
        out.push((Dialect::Pi, session::discovery::AgentDirs::pi(&env).sessions_root));
    }
    if g.dialect.is_none_or(|d| Dialect::from(d) == Dialect::Omp) {
        out.push((Dialect::Omp, omp.sessions_root));
    }
    Ok((out, blobs))
}

/// `fsck [DIR...]`: checks every session (torn tails, garbage lines, bad headers,
/// cycles, duplicate ids, unreadable files, references to missing blobs) and the blob
/// store (blobs no session refers to); prints a line per finding and a summary, and
/// exits 1 when anything is wrong. With `repair`, damaged sessions that load are
/// rewritten with a backup (never one that does not load).
pub(crate) fn fsck(g: &Global, dirs: &[PathBuf], repair_them: bool) -> Result<crate::commands::Output> {
    let (roots, blob_dir) = roots(g, dirs)?;
    let storage = crate::store::current();
    let mut findings: Vec<(PathBuf, String)> = Vec::new();
    let mut referenced = std::collections::BTreeSet::new();
    let (mut checked, mut repaired) = (0usize, 0usize);
    for (root_dialect, root) in &roots {
        for file in session_files(root) {
            checked += 1;
            // An agent's home says whose the file is; a folder given by hand, the file itself.
            let dialect = if dirs.is_empty() || g.dialect.is_some() {
                *root_dialect
            } else {
                crate::commands::dialect_for(g, &file)
            };
            match storage.read(&file) {
                Ok(bytes) => blob_refs(&bytes, &mut referenced),
                Err(e) => {
                    findings.push((file.clone(), format!("unreadable: {e}")));
                    continue;
                }
            }
            let m = match SessionManager::open_with(dialect, &file, env(g, dialect), OpenMode::ReadOnly) {
                Ok(m) => m,
                Err(e) => {
                    findings.push((file.clone(), format!("does not load: {e}")));
                    continue;
                }
            };
            let before = findings.len();
            for d in m.diagnostics() {
                findings.push((file.clone(), d.to_string()));
            }
            for d in m.tree().diagnostics() {
                findings.push((file.clone(), d.to_string()));
            }
            let damaged = findings.len() > before;
            drop(m);
            if damaged && repair_them {
                let g2 = Global { dialect: Some(dialect_arg(dialect)), ..g.clone() };
                match repair(&g2, &file, false, true) {
                    Ok(_) => repaired += 1,
                    Err(e) => findings.push((file.clone(), format!("repair failed: {e}"))),
                }
            }
        }
    }
    let mut missing = 0;
    let mut unreferenced = 0;
    if let Some(dir) = &blob_dir {
        let stored = stored_blobs(dir);
        let have: std::collections::BTreeSet<&str> = stored.iter().map(|(h, _)| h.as_str()).collect();
        for hex in &referenced {
            if !have.contains(hex.as_str()) {
                missing += 1;
                findings.push((dir.join(hex), "referenced by a session but missing from the blob store".to_owned()));
            }
        }
        for (hex, path) in &stored {
            if !referenced.contains(hex) {
                unreferenced += 1;
                findings.push((path.clone(), "no session refers to this blob (`session gc` removes it)".to_owned()));
            }
        }
    }
    let failed = !findings.is_empty();
    let text = if wants_json(g) {
        serde_json::json!({
            "sessions": checked,
            "findings": findings.iter().map(|(p, m)| serde_json::json!({"path": p.to_string_lossy(), "message": m})).collect::<Vec<_>>(),
            "missingBlobs": missing,
            "unreferencedBlobs": unreferenced,
            "repaired": repaired,
        })
        .to_string()
    } else {
        let mut out = String::new();
        for (p, m) in &findings {
            let _ = writeln!(out, "{}: {m}", p.display());
        }
        let _ = write!(
            out,
            "{checked} session(s) checked: {} finding(s), {missing} missing blob(s), {unreferenced} unreferenced blob(s){}",
            findings.len(),
            if repair_them { format!(", {repaired} repaired") } else { String::new() }
        );
        out
    };
    Ok(crate::commands::Output { text, failed })
}

fn dialect_arg(d: Dialect) -> crate::args::DialectArg {
    match d {
        Dialect::Pi => crate::args::DialectArg::Pi,
        Dialect::Omp => crate::args::DialectArg::Omp,
    }
}

/// `gc`: the blobs no session under the agents' homes (or `dirs`) refers to; deletes
/// them (and their sidecars) only with `yes`, else lists what it would delete.
pub(crate) fn gc(g: &Global, dirs: &[PathBuf], yes: bool) -> Result<String> {
    let (roots, blob_dir) = roots(g, dirs)?;
    let Some(blob_dir) = blob_dir else { return Ok("no blob store".to_owned()) };
    let storage = crate::store::current();
    let mut referenced = std::collections::BTreeSet::new();
    for (_, root) in &roots {
        for file in session_files(root) {
            // A session that cannot be read might refer to anything: delete nothing.
            let bytes =
                storage.read(&file).map_err(|e| format!("{e}; gc deletes nothing while a session is unreadable"))?;
            blob_refs(&bytes, &mut referenced);
        }
    }
    let mut out = String::new();
    let (mut count, mut bytes) = (0usize, 0u64);
    for (hex, path) in stored_blobs(&blob_dir) {
        if referenced.contains(&hex) {
            continue;
        }
        count += 1;
        bytes += storage.stat(&path)?.map_or(0, |s| s.size);
        if yes {
            storage.unlink(&path)?;
            let _ = writeln!(out, "deleted {}", path.display());
        } else {
            let _ = writeln!(out, "would delete {}", path.display());
        }
    }
    let _ = write!(
        out,
        "{count} unreferenced blob file(s), {}{}",
        human_bytes(bytes),
        if yes || count == 0 { String::new() } else { "; run with --yes to delete them".to_owned() }
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_is_escaped_and_sizes_read_well() {
        assert_eq!(html_escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 * 1024 * 1024), "3.0 MiB");
    }
}
