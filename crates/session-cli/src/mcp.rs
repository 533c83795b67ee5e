//! `session mcp`: a Model Context Protocol server on stdio, so that an agent can list,
//! search and read its own and other agents' sessions (pi, omp, Claude Code, Codex).
//!
//! The protocol (version negotiation, JSON-RPC framing, the stdio transport) is the
//! official SDK's (`rmcp`) on a current-thread runtime; the four tools are declared here
//! by hand and do their work through the same functions as `ls`, `search` and `context`.
//! Read-only: no session is written (the listing cache and the search catalog, derived
//! data in the cache folder, are brought up to date as `ls` and `search` do). Every
//! answer is bounded (a page size and a byte budget), so one call never floods the
//! model's context. Arguments that do not fit a tool's schema are MCP errors
//! (`-32602`); a tool that ran and failed says why in an error result.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};
use session::Dialect;
use session::discovery;

use crate::args::{AgentArg, Global};
use crate::commands::Result;
use crate::find::agents;

/// The most sessions one `list_sessions` call returns.
const MAX_LIST: usize = 200;
/// The most hits one `search_sessions` call returns.
const MAX_HITS: usize = 50;
/// The most messages one `read_session` page holds.
const MAX_PAGE: usize = 100;
/// The byte budget of an answer when the call names none, and the most it may name.
const DEFAULT_BYTES: usize = 16 * 1024;
const MAX_BYTES: usize = 64 * 1024;
/// How much of a session's first message a listing shows.
const FIRST_MESSAGE_CHARS: usize = 200;

/// Runs the server on stdin and stdout until the client closes stdin.
pub(crate) fn serve(g: &Global) -> Result<()> {
    if g.as_agent {
        return Err("session mcp only reads: leave out --as-agent".into());
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let server = Server { g: Arc::new(g.clone()) };
        let running = server.serve(rmcp::transport::stdio()).await?;
        running.waiting().await?;
        Ok(())
    })
}

/// The server: the command's global options (`--dialect`, `--omp-home`, `--blob-dir`).
#[derive(Clone)]
struct Server {
    g: Arc<Global>,
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("session", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Past coding-agent sessions (pi, omp, Claude Code, Codex) on this machine, read-only. \
                 list_sessions finds sessions, search_sessions finds what was said, read_session reads a \
                 session's conversation page by page, read_entry one entry whole.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let answer = match &*request.name {
            "list_sessions" => list_sessions(&self.g, &Args::new(&args, LIST_KEYS)?),
            "search_sessions" => search_sessions(&self.g, &Args::new(&args, SEARCH_KEYS)?),
            "read_session" => read_session(&self.g, &Args::new(&args, READ_KEYS)?),
            "read_entry" => read_entry(&self.g, &Args::new(&args, ENTRY_KEYS)?),
            other => return Err(ErrorData::invalid_params(format!("no tool named {other:?}"), None)),
        };
        Ok(match answer {
            Ok(value) => {
                let text = value.to_string();
                let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
                result.structured_content = Some(value);
                result
            }
            Err(Failure::Arguments(message)) => return Err(ErrorData::invalid_params(message, None)),
            Err(Failure::Failed(e)) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
        }
        .into())
    }
}

/// Why a tool gave no answer.
enum Failure {
    /// Its arguments do not fit its schema: an MCP error.
    Arguments(String),
    /// It ran and failed: an error result the model reads.
    Failed(Box<dyn std::error::Error>),
}

impl<E: Into<Box<dyn std::error::Error>>> From<E> for Failure {
    fn from(e: E) -> Failure {
        Failure::Failed(e.into())
    }
}

type Answer = std::result::Result<Value, Failure>;

const LIST_KEYS: &[&str] = &["agent", "cwd", "since", "limit", "offset"];
const SEARCH_KEYS: &[&str] = &["query", "agent", "cwd", "limit"];
const READ_KEYS: &[&str] = &["session", "leaf", "offset", "limit", "maxBytes"];
const ENTRY_KEYS: &[&str] = &["session", "entryId", "maxBytes"];

/// The tools and their input schemas.
fn tools() -> Vec<Tool> {
    let schema = |v: Value| -> Arc<JsonObject> {
        match v {
            Value::Object(m) => Arc::new(m),
            _ => Arc::new(JsonObject::new()),
        }
    };
    let agent = json!({
        "type": "array",
        "items": {"type": "string", "enum": ["pi", "omp", "claude", "codex"]},
        "description": "Only these agents' sessions (default: all four)."
    });
    let cwd = json!({"type": "string", "description": "Only the sessions of this project folder (default: every project's)."});
    let session = json!({"type": "string", "description": "The session: its path as list_sessions or search_sessions gave it, or the beginning of its id."});
    let max_bytes = json!({"type": "integer", "minimum": 1024, "maximum": MAX_BYTES, "description": format!("The answer's budget in bytes (default {DEFAULT_BYTES}); longer texts are cut.")});
    vec![
        Tool::new(
            "list_sessions",
            "List coding-agent sessions, most recently active first: each with its agent, id, path, project folder, name, first message and message count.",
            schema(json!({
                "type": "object",
                "properties": {
                    "agent": agent,
                    "cwd": cwd,
                    "since": {"type": "string", "description": "Only sessions active since then: a duration back from now (30m, 12h, 7d) or an ISO date."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIST, "description": "At most this many (default 20)."},
                    "offset": {"type": "integer", "minimum": 0, "description": "Skip this many (the last answer's nextOffset)."}
                },
                "additionalProperties": false
            })),
        ),
        Tool::new(
            "search_sessions",
            "Search what was said in coding-agent sessions (every word, as a word prefix), best match first: each hit with its session's path and id, the entry's id, kind and time, and a snippet.",
            schema(json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "The words to find."},
                    "agent": agent,
                    "cwd": cwd,
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_HITS, "description": "At most this many hits (default 10)."}
                },
                "required": ["query"],
                "additionalProperties": false
            })),
        ),
        Tool::new(
            "read_session",
            "Read a session's conversation as the model saw it at a leaf (default: where the session ends), a page of messages at a time, each cut to fit the byte budget.",
            schema(json!({
                "type": "object",
                "properties": {
                    "session": session,
                    "leaf": {"type": "string", "description": "The entry id to read up to (default: the session's leaf)."},
                    "offset": {"type": "integer", "minimum": 0, "description": "The first message (the last page's nextOffset)."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "description": "At most this many messages (default 20)."},
                    "maxBytes": max_bytes
                },
                "required": ["session"],
                "additionalProperties": false
            })),
        ),
        Tool::new(
            "read_entry",
            "Read one entry of a session whole (its JSON record), by the id a search hit gave.",
            schema(json!({
                "type": "object",
                "properties": {
                    "session": session,
                    "entryId": {"type": "string", "description": "The entry's id."},
                    "maxBytes": max_bytes
                },
                "required": ["session", "entryId"],
                "additionalProperties": false
            })),
        ),
    ]
}

/// A call's arguments, checked against the tool's keys.
struct Args<'a>(&'a JsonObject);

impl<'a> Args<'a> {
    fn new(args: &'a JsonObject, keys: &[&str]) -> std::result::Result<Args<'a>, ErrorData> {
        if let Some(k) = args.keys().find(|k| !keys.contains(&k.as_str())) {
            return Err(ErrorData::invalid_params(format!("unknown argument {k:?}; the tool takes {keys:?}"), None));
        }
        Ok(Args(args))
    }

    fn str(&self, key: &str) -> std::result::Result<Option<&'a str>, Failure> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(Failure::Arguments(format!("{key} must be a string"))),
        }
    }

    fn required(&self, key: &str) -> std::result::Result<&'a str, Failure> {
        self.str(key)?.ok_or_else(|| Failure::Arguments(format!("{key} is required")))
    }

    /// A whole number in `min..=max`, `default` when absent.
    fn int(&self, key: &str, default: usize, min: usize, max: usize) -> std::result::Result<usize, Failure> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| (min..=max).contains(n))
                .ok_or_else(|| Failure::Arguments(format!("{key} must be a whole number from {min} to {max}"))),
        }
    }

    fn agents(&self) -> std::result::Result<Vec<AgentArg>, Failure> {
        let names: Vec<&str> = match self.0.get("agent") {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::String(s)) => vec![s.as_str()],
            Some(Value::Array(a)) => a.iter().map(|v| v.as_str().unwrap_or("?")).collect(),
            Some(_) => return Err(Failure::Arguments("agent must be a list of agent names".into())),
        };
        names
            .into_iter()
            .map(|n| match n {
                "pi" => Ok(AgentArg::Pi),
                "omp" => Ok(AgentArg::Omp),
                "claude" => Ok(AgentArg::Claude),
                "codex" => Ok(AgentArg::Codex),
                other => Err(Failure::Arguments(format!("no agent {other:?}: pi, omp, claude or codex"))),
            })
            .collect()
    }
}

/// `s` cut to `max` characters, with `…` when cut.
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

/// `s` cut to at most `max` bytes (on a character boundary), with `…` when cut.
fn cut_bytes(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut at = max.saturating_sub(3);
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    format!("{}…", &s[..at])
}

fn list_sessions(g: &Global, a: &Args<'_>) -> Answer {
    let chosen = agents(g, &a.agents()?, false)?;
    let limit = a.int("limit", 20, 1, MAX_LIST)?;
    let offset = a.int("offset", 0, 0, usize::MAX)?;
    let since = match a.str("since")? {
        None => None,
        Some(s) => Some(since_ms(s).ok_or_else(|| {
            Failure::Arguments(format!("since {s:?} is neither a duration (30m, 12h, 7d) nor an ISO date"))
        })?),
    };
    let cwd = a.str("cwd")?;
    // The rows show no message text: none is read.
    let found = crate::find::gather(g, chosen, (None, cwd), false, false, &mut |_| {})?;
    let mut rows: Vec<(Option<i64>, Value)> = Vec::new();
    for (agent, _, sessions) in found {
        for s in sessions {
            if since.is_some_and(|t| s.modified.is_none_or(|m| m < t)) {
                continue;
            }
            let row = json!({
                "agent": agent,
                "id": s.id,
                "path": s.path.to_string_lossy(),
                "cwd": s.cwd,
                "name": s.name.as_deref().or(s.title.as_deref()),
                "firstMessage": cut(&s.first_message, FIRST_MESSAGE_CHARS),
                "messageCount": s.message_count,
                "modified": s.modified.map(session::model::timestamp::format_iso_millis),
            });
            rows.push((s.modified, row));
        }
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    let total = rows.len();
    let page: Vec<Value> = rows.into_iter().skip(offset).take(limit).map(|r| r.1).collect();
    let next = offset + page.len();
    Ok(json!({"sessions": page, "total": total, "nextOffset": (next < total).then_some(next)}))
}

/// The time a `since` argument names, in epoch milliseconds.
fn since_ms(s: &str) -> Option<i64> {
    if let Ok(d) = crate::jobs::parse_duration(s) {
        let now = session::store::clock::Clock::now_ms(&session::store::clock::SystemClock);
        return Some(now - i64::try_from(d.as_millis()).ok()?);
    }
    session::model::timestamp::parse_js_date(s)
}

fn search_sessions(g: &Global, a: &Args<'_>) -> Answer {
    let query = a.required("query")?;
    let limit = a.int("limit", 10, 1, MAX_HITS)?;
    let asked = a.agents()?;
    let catalog = crate::find::open_catalog(g, &asked, a.str("cwd")?, false, true, &mut |_, _| {})?;
    let hits = catalog.index.search(query, limit, &catalog.scopes)?;
    let hits: Vec<Value> = hits
        .iter()
        .map(|h| {
            json!({
                "agent": h.hit.agent,
                "path": h.hit.path.to_string_lossy(),
                "sessionId": h.hit.session_id,
                "name": h.hit.name,
                "cwd": h.hit.cwd,
                "entryId": h.hit.entry_id,
                "timestamp": h.hit.timestamp,
                "kind": h.hit.kind,
                "snippet": h.snippet,
            })
        })
        .collect();
    Ok(json!({ "hits": hits }))
}

/// The session file `arg` names: a path inside one of the agents' session folders, or
/// the beginning of an id (pi's and omp's first, then Claude Code's and Codex's).
fn session_path(g: &Global, arg: &str) -> std::result::Result<PathBuf, Failure> {
    if arg.contains('/') {
        let path = PathBuf::from(arg);
        let real = std::fs::canonicalize(&path).map_err(|e| format!("{arg}: {e}"))?;
        if !real.is_file() {
            return Err(format!("{arg}: not a session file").into());
        }
        let inside = roots(g)?.iter().filter_map(|r| std::fs::canonicalize(r).ok()).any(|r| real.starts_with(r));
        if !inside {
            return Err(format!(
                "{arg}: not in the agents' session folders (pi's, omp's, Claude Code's projects, Codex's home)"
            )
            .into());
        }
        return Ok(real);
    }
    if arg.len() < 4 || !arg.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(Failure::Arguments(format!("session {arg:?}: give a path, or at least 4 characters of an id")));
    }
    // By id only: `resume`'s lookup by name or first message is not what an id means.
    if let Ok((_, path, how)) = crate::find::find_session(g, arg, None, None, false)
        && how != "name"
    {
        return Ok(path);
    }
    let env = discovery::ProcessEnv::from_process_env()?;
    let found = discovery::find_other_sessions(&*crate::store::current(), &env, None, arg)?;
    match &found[..] {
        [one] => Ok(one.path.clone()),
        [] => Err(format!("no session's id begins with {arg:?}").into()),
        many => Err(format!(
            "{} sessions' ids begin with {arg:?}: {}",
            many.len(),
            many.iter().map(|s| s.path.display().to_string()).collect::<Vec<_>>().join(", ")
        )
        .into()),
    }
}

/// The folders a session read by path must be in.
fn roots(g: &Global) -> Result<Vec<PathBuf>> {
    let env = discovery::ProcessEnv::from_process_env()?;
    let mut out = Vec::new();
    for dialect in [Dialect::Pi, Dialect::Omp] {
        out.push(discovery::AgentDirs::for_dialect(dialect, &env, g.omp_home.into()).sessions_root);
    }
    out.push(discovery::claude_projects_dir(&env));
    out.push(discovery::codex_home(&env));
    Ok(out)
}

fn read_session(g: &Global, a: &Args<'_>) -> Answer {
    let path = session_path(g, a.required("session")?)?;
    let offset = a.int("offset", 0, 0, usize::MAX)?;
    let limit = a.int("limit", 20, 1, MAX_PAGE)?;
    let budget = a.int("maxBytes", DEFAULT_BYTES, 1024, MAX_BYTES)?;
    let mut m = crate::commands::open(g, &path)?;
    if let Some(leaf) = a.str("leaf")? {
        m.branch(leaf)?;
    }
    let context: Value = serde_json::from_str(&m.context_json(session::Leaf::Current, false)?)?;
    let messages = context.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
    let total = messages.len();
    let page: Vec<&Value> = messages.iter().skip(offset).take(limit).collect();
    // Each message gets an equal share of the budget; what a short one leaves passes on.
    let mut left = budget;
    let mut out = Vec::new();
    for (i, msg) in page.iter().enumerate() {
        let share = left / (page.len() - i);
        let text = crate::human::message_text(msg);
        let text = cut_bytes(text.trim_end(), share.max(64));
        left = left.saturating_sub(text.len());
        out.push(json!({
            "index": offset + i,
            "role": msg.get("role").and_then(Value::as_str).unwrap_or("?"),
            "text": text,
        }));
    }
    let next = offset + out.len();
    Ok(json!({
        "path": path.to_string_lossy(),
        "leafId": m.tree().leaf_id(),
        "messages": out,
        "total": total,
        "nextOffset": (next < total).then_some(next),
    }))
}

fn read_entry(g: &Global, a: &Args<'_>) -> Answer {
    let path = session_path(g, a.required("session")?)?;
    let id = a.required("entryId")?;
    let budget = a.int("maxBytes", DEFAULT_BYTES, 1024, MAX_BYTES)?;
    let m = crate::commands::open(g, &path)?;
    let Some(record) = m.tree().get(id) else {
        return Err(format!("{}: no entry {id:?}", path.display()).into());
    };
    let line = record.line();
    if line.len() <= budget {
        let entry: Value = serde_json::from_str(&line)?;
        return Ok(json!({"path": path.to_string_lossy(), "entry": entry, "truncated": false}));
    }
    Ok(json!({"path": path.to_string_lossy(), "text": cut_bytes(&line, budget), "truncated": true}))
}
