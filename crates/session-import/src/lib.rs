//! Claude Code transcripts and Codex rollouts, read leniently and mapped onto pi
//! session records.
//!
//! [`import`] takes the bytes of one source file, finds which agent wrote it
//! ([`SourceKind::detect`]) and returns an [`Imported`]: the source's session id, cwd
//! and start time, a title if it has one, the pi entries ([`session_model::Record`]s
//! built by `session_model::entries`, so their key order is pi's) and a
//! [`Diagnostic`] for every line that was damaged, of an unknown kind or not shaped as
//! expected. [`claude::import`] and [`codex::import`] do the same for a known source.
//!
//! The mapping (`docs/format.md`, "Importing other agents' sessions"):
//!
//! * **Claude Code** (`~/.claude/projects/<cwd>/<uuid>.jsonl`): the `uuid`/`parentUuid`
//!   tree stays a tree, each uuid mapped to an 8-hex id ([`entry_id`]); the lines
//!   of one API response (one `message.id`) become one assistant message with its
//!   usage counted once; each `tool_result` block a `toolResult` message named after
//!   its `tool_use`; `compact_boundary` with its summary a `compaction`; titles a
//!   `session_info`; model switches `model_change`. Sidechain lines, system lines,
//!   progress, snapshots and every kind we do not know become `custom` entries of type
//!   `import:claude:<kind>` holding the original record. The active branch (the
//!   source's last line) is written last, so pi and omp take its leaf.
//! * **Codex** (`~/.codex/sessions/YYYY/MM/DD/rollout-….jsonl`): linear; the model's
//!   items of one response become one assistant message (text, reasoning as
//!   thinking, function calls with their JSON arguments parsed), tool outputs
//!   `toolResult` messages, `compacted` a `compaction`, a `turn_context` model switch
//!   a `model_change`, `token_count` usage the usage of its response; scaffolding user
//!   messages and everything else `custom` entries of type `import:codex:<kind>`.
//!
//! Deterministic: ids and timestamps come from the source, never from a clock or a
//! random generator, so the same bytes give the same records, and a source that grew
//! gives the same records for its old lines plus new ones.
//!
//! A Codex `.jsonl.zst` is decoded first ([`zst`]: pure Rust, bounded).
//!
//! What it does not do: file IO, or writing a session (the facade's `session::import`
//! writes through `SessionManager`'s storage).
//!
//! ```
//! let claude = concat!(
//!     r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s-1","cwd":"/w","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"hi"}}"#, "\n",
//!     r#"{"type":"assistant","uuid":"a1","parentUuid":"u1","sessionId":"s-1","timestamp":"2026-01-01T00:00:01.000Z","message":{"id":"msg_1","role":"assistant","model":"claude-x","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}}"#, "\n",
//! );
//! let imported = session_import::import(claude.as_bytes())?;
//! assert_eq!(imported.kind, session_import::SourceKind::ClaudeCode);
//! assert_eq!(imported.session_id, "s-1");
//! assert_eq!(imported.entries.len(), 2);
//! assert_eq!(imported.entries[1].message_role(), Some("assistant"));
//! assert_eq!(imported.entries[1].parent_id(), imported.entries[0].id());
//! # Ok::<(), session_import::ImportError>(())
//! ```

pub mod claude;
pub mod codex;
mod out;
pub mod zst;

use serde_json::Value;
use session_model::Record;
use session_model::entries::pi;

pub use out::entry_id;

/// Which agent wrote a source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SourceKind {
    /// Claude Code's transcript (`~/.claude/projects/<cwd>/<uuid>.jsonl`).
    ClaudeCode,
    /// A Codex rollout (`~/.codex/sessions/YYYY/MM/DD/rollout-….jsonl`).
    Codex,
}

impl SourceKind {
    /// Returns the kind's short name (`claude`, `codex`), used in custom entry types.
    pub fn name(self) -> &'static str {
        match self {
            SourceKind::ClaudeCode => "claude",
            SourceKind::Codex => "codex",
        }
    }

    /// Finds the agent from the first records that say: a Codex line is
    /// `{timestamp, type, payload}` with a Codex kind; a Claude Code line has a
    /// `sessionId`, a `uuid` or a Claude Code kind. `None` when no line says.
    ///
    /// ```
    /// use session_import::SourceKind;
    /// let codex = br#"{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"x"}}"#;
    /// assert_eq!(SourceKind::detect(codex), Some(SourceKind::Codex));
    /// assert_eq!(SourceKind::detect(b"not json\n"), None);
    /// ```
    pub fn detect(bytes: &[u8]) -> Option<SourceKind> {
        for line in lines(bytes).take(64) {
            let Some(Value::Object(v)) = session_model::json::parse(&line.text) else {
                continue;
            };
            let ty = v.get("type").and_then(Value::as_str).unwrap_or_default();
            if v.contains_key("payload")
                && matches!(ty, "session_meta" | "response_item" | "event_msg" | "turn_context" | "compacted")
            {
                return Some(SourceKind::Codex);
            }
            if v.contains_key("sessionId")
                || v.contains_key("uuid")
                || matches!(ty, "summary" | "custom-title" | "ai-title" | "file-history-snapshot")
            {
                return Some(SourceKind::ClaudeCode);
            }
        }
        None
    }
}

/// A source session mapped onto pi records.
#[derive(Clone, Debug)]
pub struct Imported {
    /// Which agent wrote the source.
    pub kind: SourceKind,
    /// The source's session id (Claude Code's `sessionId`, Codex's `session_meta.id`):
    /// the imported session's id.
    pub session_id: String,
    /// The source's working directory, when it names one.
    pub cwd: Option<String>,
    /// The source's start, as an ISO timestamp with milliseconds: the header's.
    pub timestamp: String,
    /// The session the source was forked from (Codex's `forked_from_id`, Claude Code's
    /// `forkedFrom.sessionId`).
    pub forked_from: Option<String>,
    /// The source's title, when it has one.
    pub title: Option<Title>,
    /// The entries, parents before children, the active branch's leaf last.
    pub entries: Vec<Record>,
    /// What was skipped, repaired or kept as a custom entry, by line.
    pub diagnostics: Vec<Diagnostic>,
}

impl Imported {
    /// Returns pi's v3 header for the import: the source's id and start, `cwd` (else
    /// the source's own, else `""`).
    pub fn header(&self, cwd: Option<&str>) -> Record {
        let cwd = cwd.or(self.cwd.as_deref()).unwrap_or_default();
        pi::header(&self.session_id, &self.timestamp, cwd, None)
    }

    /// Returns the whole pi session: the header, then every entry.
    pub fn records(&self, cwd: Option<&str>) -> Vec<Record> {
        let mut out = Vec::with_capacity(self.entries.len() + 1);
        out.push(self.header(cwd));
        out.extend(self.entries.iter().cloned());
        out
    }

    /// [`Imported::records`], taking the entries instead of copying them.
    pub fn into_records(self, cwd: Option<&str>) -> Vec<Record> {
        let mut out = Vec::with_capacity(self.entries.len() + 1);
        out.push(self.header(cwd));
        out.extend(self.entries);
        out
    }

    /// Returns the id of the entry pi and omp take as the leaf (the last one).
    pub fn leaf(&self) -> Option<&str> {
        self.entries.last().and_then(Record::id)
    }
}

/// A session's title and who gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Title {
    /// The title, as the source has it.
    pub name: String,
    /// Whether a person gave it (Claude Code's `custom-title`), rather than the agent.
    pub by_user: bool,
}

/// Something the import skipped, repaired or kept as it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The 1-based line of the source.
    pub line: usize,
    /// What happened.
    pub kind: DiagnosticKind,
    /// Details for a person.
    pub message: String,
}

/// The kinds of [`Diagnostic`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DiagnosticKind {
    /// The line is not a JSON object; it was skipped.
    Damaged,
    /// A record kind the mapping does not know; kept as a custom entry.
    UnknownKind,
    /// A field of an unexpected type or a value the mapping could not use (format
    /// drift); what could be read was kept.
    Drift,
    /// A record whose parent is not in the file; it starts a new root.
    Orphan,
}

impl DiagnosticKind {
    /// Returns the kind's name as printed (`damaged`, `unknown-kind`, `drift`, `orphan`).
    pub fn name(self) -> &'static str {
        match self {
            DiagnosticKind::Damaged => "damaged",
            DiagnosticKind::UnknownKind => "unknown-kind",
            DiagnosticKind::Drift => "drift",
            DiagnosticKind::Orphan => "orphan",
        }
    }
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}: {}", self.line, self.kind.name(), self.message)
    }
}

/// Why a source cannot be imported at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// No line says which agent wrote the file.
    #[error("not a Claude Code transcript or a Codex rollout: no line has either's shape")]
    Unrecognised,
    /// A zstd-compressed source that does not decode.
    #[error("the zstd data at byte {offset} does not decode: {reason}")]
    Compressed {
        /// Where the frame that failed starts.
        offset: u64,
        /// The decoder's message.
        reason: String,
    },
    /// A compressed source that decodes to more than the limit.
    #[error("the compressed source decodes to more than {limit} bytes: decompress it yourself if it is meant to")]
    TooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
    /// The source has no conversation and no session id to name one by.
    #[error("the {kind} source holds no session: no line names a session id (line {lines} is the last)")]
    Empty {
        /// The source's agent.
        kind: &'static str,
        /// How many lines the source has.
        lines: usize,
    },
}

/// Imports `bytes`, whichever agent wrote them ([`SourceKind::detect`]); zstd-compressed
/// bytes (a Codex `.jsonl.zst`) are decoded first, up to [`zst::MAX_DECOMPRESSED`].
pub fn import(bytes: &[u8]) -> Result<Imported, ImportError> {
    // One layer of zstd (what Codex writes); a frame inside a frame is no rollout, and
    // decoding layer after layer would recurse as deep as the file is crafted.
    let plain;
    let bytes = if zst::is_zstd(bytes) {
        plain = zst::decompress(bytes, zst::MAX_DECOMPRESSED)?;
        if zst::is_zstd(&plain) {
            return Err(ImportError::Unrecognised);
        }
        &plain[..]
    } else {
        bytes
    };
    match SourceKind::detect(bytes) {
        Some(SourceKind::ClaudeCode) => claude::import(bytes),
        Some(SourceKind::Codex) => codex::import(bytes),
        None => Err(ImportError::Unrecognised),
    }
}

/// One line of a source: its 1-based number and text (a `\r` before the `\n` dropped,
/// invalid UTF-8 replaced).
pub(crate) struct Line<'a> {
    pub(crate) no: usize,
    pub(crate) text: std::borrow::Cow<'a, str>,
}

/// Returns the non-blank lines of `bytes`.
pub(crate) fn lines(bytes: &[u8]) -> impl Iterator<Item = Line<'_>> {
    bytes.split(|&b| b == b'\n').enumerate().filter_map(|(i, raw)| {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        Some(Line { no: i + 1, text: session_model::decode_utf8_lossy(raw) })
    })
}

/// A JSON object of a source with its 1-based line number.
pub(crate) type Numbered = (usize, serde_json::Map<String, Value>);

/// Returns the JSON objects of the lines of `bytes` with their line numbers, and a
/// diagnostic for each line that is not one (skipped).
pub(crate) fn objects(bytes: &[u8]) -> (Vec<Numbered>, Vec<Diagnostic>) {
    let mut records = Vec::new();
    let mut diagnostics = Vec::new();
    for line in lines(bytes) {
        match session_model::json::parse(&line.text) {
            Some(Value::Object(m)) => records.push((line.no, m)),
            _ => diagnostics.push(Diagnostic {
                line: line.no,
                kind: DiagnosticKind::Damaged,
                message: "not a JSON object: skipped".to_owned(),
            }),
        }
    }
    (records, diagnostics)
}

/// Returns the line count of `bytes` (for messages).
pub(crate) fn line_count(bytes: &[u8]) -> usize {
    bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count()
}

// The README's example runs as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
