//! What a listing says about one session, and its JSON form.

use std::path::PathBuf;

use session_model::Dialect;
use session_model::json::{write_js_number, write_js_str};
use session_model::timestamp::format_iso_millis;

/// omp's coarse lifecycle status, from the last message in the file's tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionStatus {
    /// The last assistant turn ended without pending tool calls.
    Complete,
    /// Work was cut off (pending tool calls, a trailing tool result, `length`).
    Interrupted,
    /// The last assistant turn was aborted.
    Aborted,
    /// The last assistant turn ended in an error.
    Error,
    /// A user message has no reply yet.
    Pending,
    /// No message in the tail window.
    Unknown,
}

impl SessionStatus {
    /// Returns the wire name (`complete`, `interrupted`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Complete => "complete",
            SessionStatus::Interrupted => "interrupted",
            SessionStatus::Aborted => "aborted",
            SessionStatus::Error => "error",
            SessionStatus::Pending => "pending",
            SessionStatus::Unknown => "unknown",
        }
    }
}

/// One session as a listing reports it: the fields of the reference's `SessionInfo`
/// for either dialect (fields of the other dialect stay `None`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionInfo {
    /// The session file.
    pub path: PathBuf,
    /// The header id (`""` when it is not a string; see `id_raw`).
    pub id: String,
    /// pi only: the header's `id` as raw JSON when it is not a string (`None` for a
    /// string id or a missing one). pi still lists such a file; its `id` then shows
    /// as that value, or not at all when missing.
    pub id_raw: Option<String>,
    /// Whether the header has an `id` key at all.
    pub has_id: bool,
    /// The header cwd (`""` when absent).
    pub cwd: String,
    /// pi: the latest `session_info` name (trimmed, non-empty).
    pub name: Option<String>,
    /// omp: the title (title slot, header title, or the last compaction's short summary).
    pub title: Option<String>,
    /// The header's `parentSession` (a path, or for omp forks an id).
    pub parent_session_path: Option<String>,
    /// The header timestamp in epoch ms (`None`: an invalid date, written as `null`).
    pub created: Option<i64>,
    /// pi: the last user/assistant activity (else header time, else mtime); omp: the
    /// file's mtime. Epoch ms; `None` for pi's Invalid Date (an activity time beyond
    /// JavaScript's dates, such as a message timestamp of `1e400`), written as `null`.
    pub modified: Option<i64>,
    /// Number of `message` entries (omp: approximate, from the 4 KiB prefix).
    pub message_count: u64,
    /// omp: the number of assistant turns seen (prefix and tail).
    pub assistant_turns: Option<u64>,
    /// omp: the file size in bytes.
    pub size: Option<u64>,
    /// The first user text, or `(no messages)`.
    pub first_message: String,
    /// All user/assistant texts joined with a space.
    pub all_messages_text: MessagesText,
    /// omp: the lifecycle status.
    pub status: Option<SessionStatus>,
}

/// The text of a session's messages ([`SessionInfo::all_messages_text`]), kept as
/// JSON string content when it comes from the listing cache: a listing printed as JSON
/// copies it as it is, and it is decoded only if read as text (the first deref).
///
/// ```
/// use session_discovery::MessagesText;
/// let t = MessagesText::from("line one\nline \"two\"");
/// assert_eq!(t.as_json(), r#"line one\nline \"two\""#);
/// let back = MessagesText::from_json(t.as_json().into_owned());
/// assert_eq!(back, t);
/// assert_eq!(&*back, "line one\nline \"two\"");
/// ```
#[derive(Clone, Default)]
pub struct MessagesText {
    /// The text (decoded from `json` on first use when that is all there was).
    plain: std::sync::OnceLock<String>,
    /// The text as the content of a JSON string (no quotes), when known.
    json: Option<Box<str>>,
}

impl MessagesText {
    /// Returns the text held as the content of a JSON string (its quotes left out), as
    /// `JSON.stringify` and [`write_js_str`] write it.
    pub fn from_json(json: String) -> MessagesText {
        MessagesText { plain: std::sync::OnceLock::new(), json: Some(json.into_boxed_str()) }
    }

    /// Returns the text.
    pub fn as_str(&self) -> &str {
        self.plain.get_or_init(|| self.json.as_deref().map(session_model::scan::unescape).unwrap_or_default())
    }

    /// Returns the text as the content of a JSON string (no quotes).
    pub fn as_json(&self) -> std::borrow::Cow<'_, str> {
        match &self.json {
            Some(j) => std::borrow::Cow::Borrowed(j),
            None => {
                let mut out = String::new();
                write_js_str(&mut out, self.as_str());
                out.pop();
                out.remove(0);
                std::borrow::Cow::Owned(out)
            }
        }
    }

    /// Returns about how long the text is as JSON (exactly, when it came as JSON).
    fn json_len(&self) -> usize {
        self.json.as_ref().map_or_else(|| self.as_str().len() + self.as_str().len() / 8, |j| j.len())
    }

    /// Appends the text as a JSON string.
    pub fn write_json(&self, out: &mut String) {
        match &self.json {
            Some(j) => {
                out.reserve(j.len() + 2);
                out.push('"');
                out.push_str(j);
                out.push('"');
            }
            None => write_js_str(out, self.as_str()),
        }
    }
}

impl From<String> for MessagesText {
    fn from(text: String) -> MessagesText {
        MessagesText { plain: std::sync::OnceLock::from(text), json: None }
    }
}

impl From<&str> for MessagesText {
    fn from(text: &str) -> MessagesText {
        MessagesText::from(text.to_owned())
    }
}

impl std::ops::Deref for MessagesText {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for MessagesText {
    fn eq(&self, other: &MessagesText) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for MessagesText {}

impl PartialEq<&str> for MessagesText {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Debug for MessagesText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl SessionInfo {
    /// Returns the file name without `.jsonl`.
    pub fn file_stem(&self) -> String {
        let name = self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        name.strip_suffix(".jsonl").map(str::to_string).unwrap_or(name)
    }

    /// Returns whether omp would call this session empty (`isEmptySession`): no
    /// settled status, no assistant turn, no title and no real first message.
    pub fn is_empty(&self) -> bool {
        let unsettled = matches!(self.status, None | Some(SessionStatus::Pending | SessionStatus::Unknown));
        let no_turns = self.assistant_turns.unwrap_or(1) == 0;
        let no_title = self.title.as_deref().and_then(sanitize_name).is_none();
        let no_first = self.first_message == "(no messages)" || sanitize_name(&self.first_message).is_none();
        unsettled && no_turns && no_title && no_first
    }

    /// Returns the display name omp's pickers use: the sanitised title (or pi name),
    /// else the sanitised first message, else `Untitled · HH:MM` (UTC).
    pub fn display_name(&self) -> String {
        if let Some(t) = self.title.as_deref().or(self.name.as_deref()).and_then(sanitize_name) {
            return t;
        }
        if self.first_message != "(no messages)"
            && let Some(f) = sanitize_name(&self.first_message)
        {
            return f;
        }
        let ms = self.created.or(self.modified).unwrap_or(0);
        let iso = format_iso_millis(ms);
        format!("Untitled · {}", iso.get(11..16).unwrap_or("00:00"))
    }
}

/// Sanitises a name as omp does: first line, control characters removed, trimmed;
/// `None` if nothing is left.
pub fn sanitize_name(value: &str) -> Option<String> {
    let first = value.split('\n').next().unwrap_or("");
    let first = first.strip_suffix('\r').unwrap_or(first);
    let stripped: String = first.chars().filter(|c| !matches!(*c as u32, 0..=0x1f | 0x7f)).collect();
    let t = session_model::js_trim(&stripped);
    (!t.is_empty()).then(|| t.to_string())
}

/// Renders sessions as `JSON.stringify` renders the reference's
/// `SessionManager.list(...)` result: an array of objects in the reference's key
/// order, dates as ISO strings (`null` when invalid), absent fields omitted.
pub fn sessions_to_json(dialect: Dialect, sessions: &[SessionInfo]) -> String {
    // One allocation for the whole text: the messages' texts and room for the rest.
    let texts: usize = sessions.iter().map(|s| s.all_messages_text.json_len() + s.first_message.len()).sum();
    let mut out = String::with_capacity(texts + sessions.len() * 640);
    out.push('[');
    for (i, s) in sessions.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_session(&mut out, dialect, s);
    }
    out.push(']');
    out
}

/// Renders one session as [`sessions_to_json`] renders each element of its array,
/// with `extra` members after the reference's (names and raw JSON values, written as
/// they are): the text is JavaScript's own, so a text cut inside a surrogate pair
/// stays the lone `\ud83d` escape `JSON.stringify` writes, which a strict JSON parser
/// would refuse to read back.
///
/// ```
/// use session_discovery::{SessionInfo, session_to_json};
/// let s = SessionInfo { id: "a".into(), ..SessionInfo::default() };
/// let json = session_to_json(session_model::Dialect::Pi, &s, &[("agent", "\"pi\"")]);
/// assert!(json.starts_with('{') && json.ends_with(r#","agent":"pi"}"#));
/// ```
pub fn session_to_json(dialect: Dialect, s: &SessionInfo, extra: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(s.all_messages_text.json_len() + s.first_message.len() + 640);
    write_session(&mut out, dialect, s);
    out.pop();
    for (name, value) in extra {
        key(&mut out, name);
        out.push_str(value);
    }
    out.push('}');
    out
}

/// [`sessions_to_json`] written to `w` session by session, through one reused buffer:
/// a listing of many sessions is never held whole in memory as text.
pub fn write_sessions_json(
    dialect: Dialect,
    sessions: &[SessionInfo],
    w: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let mut buf = String::with_capacity(64 * 1024);
    buf.push('[');
    for (i, s) in sessions.iter().enumerate() {
        if i > 0 {
            buf.push(',');
        }
        write_session(&mut buf, dialect, s);
        if buf.len() >= 48 * 1024 {
            w.write_all(buf.as_bytes())?;
            buf.clear();
        }
    }
    buf.push(']');
    w.write_all(buf.as_bytes())
}

fn key(out: &mut String, k: &str) {
    if !out.ends_with('{') {
        out.push(',');
    }
    write_js_str(out, k);
    out.push(':');
}

fn write_session(out: &mut String, dialect: Dialect, s: &SessionInfo) {
    out.push('{');
    key(out, "path");
    write_js_str(out, &s.path.to_string_lossy());
    match (&s.id_raw, s.has_id) {
        (Some(raw), _) => {
            key(out, "id");
            out.push_str(raw);
        }
        (None, true) => {
            key(out, "id");
            write_js_str(out, &s.id);
        }
        (None, false) => {}
    }
    key(out, "cwd");
    write_js_str(out, &s.cwd);
    match dialect {
        Dialect::Pi => {
            if let Some(n) = &s.name {
                key(out, "name");
                write_js_str(out, n);
            }
        }
        Dialect::Omp => {
            if let Some(t) = &s.title {
                key(out, "title");
                write_js_str(out, t);
            }
        }
    }
    if let Some(p) = &s.parent_session_path {
        key(out, "parentSessionPath");
        write_js_str(out, p);
    }
    for (name, ms) in [("created", s.created), ("modified", s.modified)] {
        key(out, name);
        match ms {
            Some(ms) => write_js_str(out, &format_iso_millis(ms)),
            None => out.push_str("null"),
        }
    }
    key(out, "messageCount");
    write_js_number(out, s.message_count as f64);
    if dialect == Dialect::Omp {
        key(out, "assistantTurns");
        write_js_number(out, s.assistant_turns.unwrap_or(0) as f64);
        key(out, "size");
        write_js_number(out, s.size.unwrap_or(0) as f64);
    }
    key(out, "firstMessage");
    write_js_str(out, &s.first_message);
    key(out, "allMessagesText");
    s.all_messages_text.write_json(out);
    if dialect == Dialect::Omp
        && let Some(st) = s.status
    {
        key(out, "status");
        write_js_str(out, st.as_str());
    }
    out.push('}');
}
