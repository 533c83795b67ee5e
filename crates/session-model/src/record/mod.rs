//! One record of a session file, kept losslessly.
//!
//! A [`Record`] is the exact JSON text of one value of the file plus a small typed
//! skeleton read from it in the same pass: `type`, `id`, `parentId`, `timestamp` and
//! the byte range of the `message` payload. Everything else stays text until a layer
//! above asks for it ([`Record::value`] parses lazily and caches). A record that was
//! loaded and not changed is written back as its original text; a changed or new
//! record is serialised by [`crate::json`], byte-compatible with the references.
//!
//! A record read by position ([`crate::span`]) is a row of a span table (`table.rs`)
//! whose text stays in the file until asked for; the table keeps the records it
//! reads, so the two are one type's two halves and live in this one module.

pub(crate) mod table;

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

#[allow(unused_imports)] // named by the docs of the accessors that read through it
use self::table::Bodies;
use self::table::SpanTable;
use crate::engine::scan::record_fields_with;
use crate::engine::strings::Checked;
use crate::engine::write::write_js_members_spans;
use crate::engine::ws::is_ws;
use crate::{json, scan};

/// A JSON value as the skeleton parser saw it, without keeping nested structure.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Scalar<'a> {
    /// The key was not present.
    #[default]
    Absent,
    /// `null`.
    Null,
    /// A string.
    Str(Cow<'a, str>),
    /// A number.
    Num(f64),
    /// A boolean.
    Bool(bool),
    /// An array (contents not kept).
    Array,
    /// An object (contents not kept).
    Object,
}

impl<'a> Scalar<'a> {
    /// Returns the string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }

    fn to_static(&self) -> Scalar<'static> {
        match self {
            Scalar::Absent => Scalar::Absent,
            Scalar::Null => Scalar::Null,
            Scalar::Str(s) => Scalar::Str(Cow::Owned(s.to_string())),
            Scalar::Num(n) => Scalar::Num(*n),
            Scalar::Bool(b) => Scalar::Bool(*b),
            Scalar::Array => Scalar::Array,
            Scalar::Object => Scalar::Object,
        }
    }

    fn from_value(v: Option<&'a Value>) -> Scalar<'a> {
        match v {
            None => Scalar::Absent,
            Some(Value::Null) => Scalar::Null,
            Some(Value::String(s)) => Scalar::Str(Cow::Borrowed(s)),
            Some(Value::Number(n)) => Scalar::Num(n.as_f64().unwrap_or(f64::NAN)),
            Some(Value::Bool(b)) => Scalar::Bool(*b),
            Some(Value::Array(_)) => Scalar::Array,
            Some(Value::Object(_)) => Scalar::Object,
        }
    }
}

/// The `parentId` of an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParentRef<'a> {
    /// No `parentId` key (v1 entries, non-objects).
    Absent,
    /// `"parentId": null`: a root.
    Null,
    /// A parent id.
    Id(&'a str),
    /// A value that is neither `null` nor a string.
    Invalid,
}

impl<'a> ParentRef<'a> {
    /// Returns the parent id, if there is one.
    pub fn id(self) -> Option<&'a str> {
        match self {
            ParentRef::Id(s) => Some(s),
            _ => None,
        }
    }
}

/// A string field of a record: a span of its text when the JSON string had no
/// escapes (no allocation), else the decoded string.
#[derive(Debug)]
enum Field {
    None,
    Span(u32, u32),
    Owned(Box<str>),
}

impl Field {
    fn new(s: Option<Cow<'_, str>>, text: &str) -> Field {
        match s {
            None => Field::None,
            Some(Cow::Borrowed(b)) => {
                let start = (b.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
                if start <= text.len() && start + b.len() <= text.len() {
                    Field::Span(start as u32, (start + b.len()) as u32)
                } else {
                    Field::Owned(b.into())
                }
            }
            Some(Cow::Owned(o)) => Field::Owned(o.into_boxed_str()),
        }
    }

    #[inline]
    fn get<'a>(&'a self, text: &'a str) -> Option<&'a str> {
        match self {
            Field::None => None,
            Field::Span(a, b) => Some(&text[*a as usize..*b as usize]),
            Field::Owned(s) => Some(s),
        }
    }
}

#[derive(Debug)]
enum Parent {
    Absent,
    Null,
    Id(Field),
    Invalid,
}

/// The entry types of pi and omp (and the header). Unknown types are kept as
/// [`EntryType::Unknown`] and survive every rewrite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EntryType {
    /// `session`: the header.
    Session,
    /// `message`: one agent message.
    Message,
    /// `custom_message`: an extension message that takes part in the model context.
    CustomMessage,
    /// `custom`: extension state, never in the model context.
    Custom,
    /// `compaction`: a summary of older history.
    Compaction,
    /// `branch_summary`: a summary of an abandoned branch.
    BranchSummary,
    /// `model_change`: pi's `provider`/`modelId` or omp's `model`/`role`.
    ModelChange,
    /// `thinking_level_change`.
    ThinkingLevelChange,
    /// `service_tier_change` (omp).
    ServiceTierChange,
    /// `context_edit` (pi): replaces or omits an earlier entry's content.
    ContextEdit,
    /// `label`: a bookmark on another entry.
    Label,
    /// `session_info` (pi): the display name.
    SessionInfo,
    /// `usage` (pi): billing record.
    Usage,
    /// `ttsr_injection` (omp).
    TtsrInjection,
    /// `session_init` (omp): subagent replay contract.
    SessionInit,
    /// `mode_change` (omp).
    ModeChange,
    /// `reset_boundary` (omp): `/clear`.
    ResetBoundary,
    /// `title_change` (omp): rename audit entry.
    TitleChange,
    /// `credential_pin` (omp).
    CredentialPin,
    /// `model_usage` (omp): usage of side calls.
    ModelUsage,
    /// Any other `type` (or none): kept, indexed, never in the context.
    Unknown,
}

impl EntryType {
    /// Returns the type for a `type` string.
    pub fn from_type_str(s: &str) -> EntryType {
        match s {
            "session" => EntryType::Session,
            "message" => EntryType::Message,
            "custom_message" => EntryType::CustomMessage,
            "custom" => EntryType::Custom,
            "compaction" => EntryType::Compaction,
            "branch_summary" => EntryType::BranchSummary,
            "model_change" => EntryType::ModelChange,
            "thinking_level_change" => EntryType::ThinkingLevelChange,
            "service_tier_change" => EntryType::ServiceTierChange,
            "context_edit" => EntryType::ContextEdit,
            "label" => EntryType::Label,
            "session_info" => EntryType::SessionInfo,
            "usage" => EntryType::Usage,
            "ttsr_injection" => EntryType::TtsrInjection,
            "session_init" => EntryType::SessionInit,
            "mode_change" => EntryType::ModeChange,
            "reset_boundary" => EntryType::ResetBoundary,
            "title_change" => EntryType::TitleChange,
            "credential_pin" => EntryType::CredentialPin,
            "model_usage" => EntryType::ModelUsage,
            _ => EntryType::Unknown,
        }
    }

    /// Returns the wire name of a known type (`None` for [`EntryType::Unknown`]).
    pub fn as_str(self) -> Option<&'static str> {
        Some(match self {
            EntryType::Session => "session",
            EntryType::Message => "message",
            EntryType::CustomMessage => "custom_message",
            EntryType::Custom => "custom",
            EntryType::Compaction => "compaction",
            EntryType::BranchSummary => "branch_summary",
            EntryType::ModelChange => "model_change",
            EntryType::ThinkingLevelChange => "thinking_level_change",
            EntryType::ServiceTierChange => "service_tier_change",
            EntryType::ContextEdit => "context_edit",
            EntryType::Label => "label",
            EntryType::SessionInfo => "session_info",
            EntryType::Usage => "usage",
            EntryType::TtsrInjection => "ttsr_injection",
            EntryType::SessionInit => "session_init",
            EntryType::ModeChange => "mode_change",
            EntryType::ResetBoundary => "reset_boundary",
            EntryType::TitleChange => "title_change",
            EntryType::CredentialPin => "credential_pin",
            EntryType::ModelUsage => "model_usage",
            EntryType::Unknown => return None,
        })
    }
}

/// The fields of a `message` payload that the layers above read, parsed on demand.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MessageInfo {
    /// `role` (`user`, `assistant`, `toolResult`, `system`, `custom`, ...).
    pub role: Scalar<'static>,
    /// Shape of `content` (absent, null, string, array, ...).
    pub content: Scalar<'static>,
    /// Assistant `provider`.
    pub provider: Scalar<'static>,
    /// Assistant `model`.
    pub model: Scalar<'static>,
    /// Assistant `api`.
    pub api: Scalar<'static>,
    /// Assistant `stopReason`.
    pub stop_reason: Scalar<'static>,
    /// Message `timestamp` (epoch ms).
    pub timestamp: Scalar<'static>,
    /// Tool result `toolCallId`.
    pub tool_call_id: Scalar<'static>,
}

impl MessageInfo {
    /// Returns `role` if it is a string.
    pub fn role(&self) -> Option<&str> {
        self.role.as_str()
    }
}

/// Why a text could not become a [`Record`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", if *.incomplete { "invalid JSON: the text ends inside a value" } else { "invalid JSON: unexpected text" })]
pub struct RecordParseError {
    /// The text ended inside a value (a torn write) rather than breaking the grammar.
    pub incomplete: bool,
}

impl From<scan::ScanError> for RecordParseError {
    fn from(e: scan::ScanError) -> RecordParseError {
        RecordParseError { incomplete: e == scan::ScanError::Incomplete }
    }
}

/// Returns the [`Scalar`] view of a raw (validated) JSON value.
fn scalar(raw: Option<&str>) -> Scalar<'_> {
    let Some(raw) = raw else { return Scalar::Absent };
    match scan::kind(raw) {
        scan::Kind::Null => Scalar::Null,
        scan::Kind::False => Scalar::Bool(false),
        scan::Kind::True => Scalar::Bool(true),
        scan::Kind::Number => Scalar::Num(scan::number(raw).unwrap_or(f64::NAN)),
        scan::Kind::String => scan::decode_string(raw).map_or(Scalar::Null, Scalar::Str),
        scan::Kind::Array => Scalar::Array,
        scan::Kind::Object => Scalar::Object,
    }
}

/// Returns valid JSON `text` without the whitespace between its tokens (string
/// contents are kept: they hold no raw line break in valid JSON).
fn without_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
        } else if u8::try_from(c).is_ok_and(is_ws) {
            continue;
        } else if c == '"' {
            in_string = true;
        }
        out.push(c);
    }
    out
}

/// The top-level keys of a record that its skeleton holds, in the order
/// [`Record::scan_object`] returns them; `message` is the one it also looks into.
const SKELETON_KEYS: [&str; 5] = ["type", "id", "parentId", "timestamp", "message"];

/// Whether a record's numbers are exact ([`json::numbers_exact`]): not looked at yet.
const EXACT_UNKNOWN: u8 = 0;
/// They are.
const EXACT_YES: u8 = 1;
/// They are not.
const EXACT_NO: u8 = 2;

/// What [`Record::scan_object`] finds.
pub(crate) struct ObjectScan<'a> {
    /// The raw skeleton fields, in the order of `SKELETON_KEYS`.
    pub(crate) fields: [Option<&'a str>; 5],
    /// The message's raw `role`.
    pub(crate) role: Option<&'a str>,
    /// Where the object ends.
    pub(crate) end: usize,
    /// Whether every number of the object is plain (`number_plain`), so that
    /// its numbers are exact ([`json::numbers_exact`]) without a second look.
    pub(crate) numbers_plain: bool,
}

/// What starts the id-map key of an id that is not a string: a noncharacter, which
/// no id an agent writes holds.
const SCALAR_KEY_MARK: char = '\u{fdd0}';

/// The id-map key of a number id: a mark (U+FDD0) and the number as JavaScript
/// prints it, so `7` and `"7"` are two keys (and `1.0` and `1` one).
pub fn number_id_key(n: f64) -> String {
    format!("{SCALAR_KEY_MARK}{}", json::js_number(n))
}

/// Returns whether an id-map key stands for an id that is not a string (a number,
/// `true`, `false`), which no string field can name.
pub fn is_scalar_id_key(key: &str) -> bool {
    key.starts_with(SCALAR_KEY_MARK)
}

/// Returns whether an id-map key is falsy as the id it stands for: `""`, the number
/// 0 or `false` (a `parentId` that is falsy ends the references' path walk).
pub fn id_key_is_falsy(key: &str) -> bool {
    key.is_empty() || key.strip_prefix(SCALAR_KEY_MARK).is_some_and(|k| k == "0" || k == "false")
}

/// One JSON value of a session file: the header, an entry of any type (known or
/// not), or a non-object value that a reference keeps (`42`, `"str"`).
///
/// Cloning is cheap (shared). Equality compares the JSON text.
#[derive(Clone)]
pub struct Record {
    repr: Repr,
}

/// How a record holds its text.
#[derive(Clone)]
enum Repr {
    /// The text is in memory.
    Text(Arc<Inner>),
    /// Row `.1` of a span table: the skeleton in memory, the text in the file, read
    /// when first asked for (see [`crate::span`]).
    Span(Arc<SpanTable>, u32),
    /// Row `.0` of the span table a piece's parse is still filling; bound to the
    /// table before the parse hands the record out ([`Record::bind`]).
    Unbound(u32),
}

struct Inner {
    text: Box<str>,
    compact: bool,
    is_object: bool,
    ty: Field,
    kind: EntryType,
    id: Field,
    parent: Parent,
    timestamp: Field,
    message: Option<Range<u32>>,
    value: OnceLock<Option<Value>>,
    message_info: OnceLock<MessageInfo>,
    /// Whether the text's numbers are exact as JavaScript reads them
    /// ([`json::numbers_exact`]): [`EXACT_UNKNOWN`], [`EXACT_YES`] or [`EXACT_NO`].
    exact: AtomicU8,
}

impl fmt::Debug for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Span(table, row) if table.loaded(*row).is_none() => {
                let (at, len) = table.span(*row);
                f.debug_struct("Record").field("at", &at).field("len", &len).finish_non_exhaustive()
            }
            _ => f.debug_tuple("Record").field(&self.text()).finish(),
        }
    }
}

impl PartialEq for Record {
    fn eq(&self, other: &Self) -> bool {
        self.text() == other.text()
    }
}

impl Eq for Record {}

impl Record {
    /// Parses one JSON value (surrounding whitespace allowed) into a record.
    ///
    /// ```
    /// use session_model::{EntryType, Record};
    /// let r = Record::parse(r#"{"type":"label","id":"a1b2c3d4","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","targetId":"x"}"#).unwrap();
    /// assert_eq!(r.entry_type(), EntryType::Label);
    /// assert_eq!(r.id(), Some("a1b2c3d4"));
    /// assert_eq!(r.get_str("targetId"), Some("x"));
    /// ```
    pub fn parse(text: &str) -> Result<Record, RecordParseError> {
        let bytes = text.as_bytes();
        let start = scan::skip_ws(bytes, 0);
        if bytes.get(start) != Some(&b'{') {
            return Record::parse_non_object(text);
        }
        let scan = Record::scan_object(text, start)?;
        Ok(Record::from_fields(&text[start..scan.end], &scan))
    }

    /// Parses a value that is not an object (`42`, `"s"`, `[]`): small, parsed whole.
    pub(crate) fn parse_non_object(text: &str) -> Result<Record, RecordParseError> {
        let raw = scan::parse_whole(text)?;
        let value = crate::json::parse(raw).unwrap_or(Value::Null);
        Ok(Record::build(
            raw,
            false,
            Scalar::Absent,
            Scalar::Absent,
            Scalar::Absent,
            Scalar::Absent,
            None,
            Some(value),
            None,
        ))
    }

    /// Validates the object at `start` of `text` (nothing but whitespace may follow
    /// it) and returns its skeleton fields (`type`, `id`, `parentId`, `timestamp`,
    /// `message`), the message's raw `role`, the object's end and whether its numbers
    /// are all plain.
    pub(crate) fn scan_object(text: &str, start: usize) -> Result<ObjectScan<'_>, RecordParseError> {
        let mut strings = Checked::new(start);
        let (fields, role, end) = record_fields_with(text, start, SKELETON_KEYS, 4, "role", &mut strings)?;
        if scan::skip_ws(text.as_bytes(), end) != text.len() {
            return Err(scan::ScanError::Syntax.into());
        }
        Ok(ObjectScan { fields, role, end, numbers_plain: strings.numbers_plain() })
    }

    /// Builds a record held in memory from an object's raw text and what
    /// [`Record::scan_object`] found in it.
    pub(crate) fn from_fields(raw: &str, scan: &ObjectScan<'_>) -> Record {
        let [ty, id, parent, ts, message] = scan.fields;
        let message = message.filter(|m| scan::kind(m) != scan::Kind::Null).map(|m| {
            let at = m.as_ptr() as usize - raw.as_ptr() as usize;
            at as u32..(at + m.len()) as u32
        });
        let record = Record::build(raw, true, scalar(ty), scalar(id), scalar(parent), scalar(ts), message, None, None);
        if scan.numbers_plain {
            record.text_inner().exact.store(EXACT_YES, Ordering::Relaxed);
        }
        record
    }

    fn from_parsed(text: &str, value: Value) -> Record {
        let (ty, id, parent, ts) = match &value {
            Value::Object(m) => (
                Scalar::from_value(m.get("type")).to_static(),
                Scalar::from_value(m.get("id")).to_static(),
                Scalar::from_value(m.get("parentId")).to_static(),
                Scalar::from_value(m.get("timestamp")).to_static(),
            ),
            _ => (Scalar::Absent, Scalar::Absent, Scalar::Absent, Scalar::Absent),
        };
        let is_object = value.is_object();
        // The message payload is re-serialised on demand for records parsed this way.
        Record::build(text, is_object, ty, id, parent, ts, None, Some(value), None)
    }

    /// The one private constructor: `compact` says whether the text is known to be one
    /// line (`None`: look).
    #[allow(clippy::too_many_arguments)] // one private constructor fed by three parsers
    fn build(
        text: &str,
        is_object: bool,
        ty: Scalar<'_>,
        id: Scalar<'_>,
        parent: Scalar<'_>,
        ts: Scalar<'_>,
        message: Option<Range<u32>>,
        value: Option<Value>,
        compact: Option<bool>,
    ) -> Record {
        fn str_of(s: Scalar<'_>) -> Option<Cow<'_, str>> {
            match s {
                Scalar::Str(c) => Some(c),
                _ => None,
            }
        }
        let parent = match parent {
            Scalar::Absent => Parent::Absent,
            Scalar::Null => Parent::Null,
            Scalar::Str(s) => Parent::Id(Field::new(Some(s), text)),
            _ => Parent::Invalid,
        };
        let compact = compact.unwrap_or_else(|| memchr::memchr2(b'\n', b'\r', text.as_bytes()).is_none());
        let cell = OnceLock::new();
        if let Some(v) = value {
            let _ = cell.set(Some(v));
        }
        let kind = match &ty {
            Scalar::Str(t) if is_object => EntryType::from_type_str(t),
            _ => EntryType::Unknown,
        };
        Record {
            repr: Repr::Text(Arc::new(Inner {
                kind,
                ty: Field::new(str_of(ty), text),
                id: Field::new(str_of(id), text),
                timestamp: Field::new(str_of(ts), text),
                parent,
                text: text.into(),
                compact,
                is_object,
                message,
                value: cell,
                message_info: OnceLock::new(),
                exact: AtomicU8::new(EXACT_UNKNOWN),
            })),
        }
    }

    /// Creates a record from a JSON value, serialised as `JSON.stringify` would.
    ///
    /// The value itself is not kept: the record reads its fields from the text it
    /// was serialised to, like a loaded one (half the memory for appended records).
    pub fn from_value(value: Value) -> Record {
        match &value {
            Value::Object(map) => Record::from_pairs(map.iter().map(|(k, v)| (k.as_str(), v))),
            _ => {
                let text = json::to_js_string(&value);
                Record::from_parsed(&text, value)
            }
        }
    }

    /// Creates a record for the object made of `members` (keys distinct, in insertion
    /// order), serialised as `JSON.stringify` would.
    pub(crate) fn from_pairs<'a, I>(members: I) -> Record
    where
        I: Iterator<Item = (&'a str, &'a Value)> + Clone,
    {
        thread_local! {
            /// Serialisation scratch space, so that building a record costs one exact
            /// allocation for its text instead of a growing buffer.
            static SCRATCH: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
        }
        SCRATCH.with(|scratch| {
            let mut text = scratch.borrow_mut();
            text.clear();
            // The serializer says where the skeleton's fields landed: no second pass.
            let [ty, id, parent, ts, message] =
                write_js_members_spans(&mut text, members, ["type", "id", "parentId", "timestamp", "message"]);
            let raw = |span: &Option<Range<usize>>| span.clone().map(|r| &text[r]);
            let message = message.filter(|r| &text[r.clone()] != "null").map(|r| r.start as u32..r.end as u32);
            let record = Record::build(
                &text,
                true,
                scalar(raw(&ty)),
                scalar(raw(&id)),
                scalar(raw(&parent)),
                scalar(raw(&ts)),
                message,
                None,
                Some(true),
            );
            // Keep the buffer for the next record unless one huge record inflated it.
            if text.capacity() > 1 << 20 {
                *text = String::new();
            }
            record
        })
    }

    /// Returns a copy of this record with `f` applied to its JSON value. The new
    /// record is re-serialised (key order kept, added keys at the end).
    pub fn map_value(&self, f: impl FnOnce(&mut Value)) -> Record {
        let Some(v) = self.try_value() else {
            // Unreadable as a tree (absurd nesting): never replace it by something lossy.
            return self.clone();
        };
        let mut v = v.clone();
        f(&mut v);
        Record::from_value(v)
    }

    /// The record whose text is in memory: this one, or for a record read by position
    /// its text, read now if it was not yet. A text that cannot be read (the file
    /// failed or changed) reads as `null` here and its error is kept by the
    /// record's [`Bodies`] ([`Bodies::take_failure`]); call [`Record::load`] first to
    /// get the error instead.
    fn full(&self) -> &Inner {
        match &self.repr {
            Repr::Text(inner) => inner,
            Repr::Span(table, row) => match table.loaded_or_read(*row) {
                Some(r) => r.text_inner(),
                None => null_inner(),
            },
            Repr::Unbound(_) => null_inner(),
        }
    }

    /// The in-memory text of a record built from text (a loaded span is one).
    fn text_inner(&self) -> &Inner {
        match &self.repr {
            Repr::Text(inner) => inner,
            _ => null_inner(),
        }
    }

    /// Returns the JSON text as it was read (or as it was serialised for a new record).
    ///
    /// A record read by position ([`Record::is_loaded`] is false) reads its text from
    /// the file first; see [`Record::load`] for the error when that fails.
    #[inline]
    pub fn text(&self) -> &str {
        &self.full().text
    }

    /// Returns the text to write for this record on one line (without the newline):
    /// the original text when it is one line, else the compact serialisation (for a
    /// record that cannot be read into a tree, see [`Record::value`], the text without
    /// the whitespace between its tokens).
    ///
    /// A text whose numbers JavaScript reads as other values (`1e400`, 30 digits, see
    /// [`json::numbers_exact`]) is written as the references write it back, by
    /// [`Record::canonical_line`]: what they hold in memory is `null` or the rounded
    /// double, and so is what they write.
    ///
    /// A record that is not an object (`1e400`, `[1e400]` on a line of its own) keeps
    /// its text: written as `null` it would become a record that crashes omp.
    pub fn line(&self) -> Cow<'_, str> {
        self.full().line()
    }

    /// Returns whether every number of the text is read by JavaScript as the value it
    /// spells ([`json::numbers_exact`]; looked up once, then cached).
    pub fn numbers_exact(&self) -> bool {
        self.full().numbers_exact()
    }

    /// Returns the text as `JSON.stringify(JSON.parse(text))` would write it: what a
    /// reference writes when it re-serialises a loaded record. A record that cannot
    /// be read into a tree is written as its text without the whitespace between
    /// tokens, never as `null`.
    pub fn canonical_line(&self) -> String {
        self.full().canonical_line()
    }

    /// Returns whether this record is a JSON object.
    #[inline]
    pub fn is_object(&self) -> bool {
        match &self.repr {
            Repr::Text(inner) => inner.is_object,
            // Only objects are read by position.
            Repr::Span(..) | Repr::Unbound(_) => true,
        }
    }

    /// Returns the `type` string, if any.
    #[inline]
    pub fn type_str(&self) -> Option<&str> {
        match &self.repr {
            Repr::Text(inner) => inner.ty.get(&inner.text),
            Repr::Span(table, row) => table.type_str(*row),
            Repr::Unbound(_) => None,
        }
    }

    /// Returns the entry type (the header is [`EntryType::Session`]).
    #[inline]
    pub fn entry_type(&self) -> EntryType {
        match &self.repr {
            Repr::Text(inner) => inner.kind,
            Repr::Span(table, row) => table.kind(*row),
            Repr::Unbound(_) => EntryType::Unknown,
        }
    }

    /// Returns the key the references' id map (`Map<id, entry>`) files this record
    /// under: the `id` string, or for a number id (`"id": 7`, which a JavaScript `Map`
    /// keeps apart from the string `"7"`) [`number_id_key`] of it, and likewise for
    /// `true` and `false`. `None` for no id or an id of another type.
    pub fn id_key(&self) -> Option<Cow<'_, str>> {
        match &self.repr {
            Repr::Text(inner) => inner.id_key(),
            // A record read by position has a string id or none.
            _ => self.id().map(Cow::Borrowed),
        }
    }

    /// Returns the key of the `parentId` in the references' id map, as
    /// [`Record::id_key`] gives it for ids: the string, or a number's key.
    pub fn parent_key(&self) -> Option<Cow<'_, str>> {
        match &self.repr {
            Repr::Text(inner) => inner.parent_key(),
            _ => self.parent_id().map(Cow::Borrowed),
        }
    }

    /// Returns whether this is a session header: an object with `type: "session"`.
    #[inline]
    pub fn is_header(&self) -> bool {
        self.entry_type() == EntryType::Session
    }

    /// Returns whether this is a *valid* header: `type: "session"` and a string `id`.
    pub fn is_valid_header(&self) -> bool {
        self.is_header() && self.id().is_some()
    }

    /// Returns the `id` if it is a string.
    #[inline]
    pub fn id(&self) -> Option<&str> {
        match &self.repr {
            Repr::Text(inner) => inner.id.get(&inner.text),
            Repr::Span(table, row) => table.id(*row),
            Repr::Unbound(_) => None,
        }
    }

    /// Returns the `parentId`.
    pub fn parent(&self) -> ParentRef<'_> {
        match &self.repr {
            Repr::Text(inner) => inner.parent(),
            Repr::Span(table, row) => table.parent(*row),
            Repr::Unbound(_) => ParentRef::Absent,
        }
    }

    /// Returns the `parentId` if it is a string.
    #[inline]
    pub fn parent_id(&self) -> Option<&str> {
        self.parent().id()
    }

    /// Returns the `timestamp` if it is a string.
    #[inline]
    pub fn timestamp(&self) -> Option<&str> {
        match &self.repr {
            Repr::Text(inner) => inner.timestamp.get(&inner.text),
            Repr::Span(table, row) => table.timestamp(*row),
            Repr::Unbound(_) => None,
        }
    }

    /// Returns the raw JSON text of the `message` payload, if any, as JavaScript holds
    /// it (re-serialised when its numbers are not exact, see [`Record::line`]).
    pub fn message_raw(&self) -> Option<Cow<'_, str>> {
        self.full().message_raw()
    }

    /// Returns the fields of the `message` payload that the layers above read.
    #[inline]
    pub fn message_info(&self) -> &MessageInfo {
        self.full().message_info()
    }

    /// Returns the message role when this is a `message` entry.
    #[inline]
    pub fn message_role(&self) -> Option<&str> {
        if self.entry_type() != EntryType::Message {
            return None;
        }
        match &self.repr {
            Repr::Span(table, row) => table.role(*row),
            _ => self.message_info().role(),
        }
    }

    /// Returns the whole record as a JSON value (parsed on first use, then cached).
    ///
    /// Text that JavaScript accepts but the JSON reader does not is read as
    /// JavaScript would write it back (lone surrogates become U+FFFD, numbers beyond
    /// `f64` `null`); a record nested too deeply to read gives `null` here, and
    /// [`Record::map_value`] leaves it unchanged.
    pub fn value(&self) -> &Value {
        static NULL: Value = Value::Null;
        self.try_value().unwrap_or(&NULL)
    }

    /// Returns the whole record as a JSON value, or `None` when it cannot be read into
    /// one (see [`Record::value`]).
    pub fn try_value(&self) -> Option<&Value> {
        self.full().try_value()
    }

    /// Returns the top-level field `key`, if this record is an object that has it.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.value().as_object().and_then(|m| m.get(key))
    }

    /// Returns the top-level field `key` if it is a string.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    // ------------------------------------------------------------ read by position

    /// Returns whether the record's text is in memory: always, but for a record read
    /// by position ([`crate::parse_session_spans`]) whose text was not asked for yet.
    pub fn is_loaded(&self) -> bool {
        match &self.repr {
            Repr::Span(table, row) => table.loaded(*row).is_some(),
            _ => true,
        }
    }

    /// Returns where in its file a record read by position is (byte offset and
    /// length); `None` for a record held in memory since it was read or built.
    pub fn span(&self) -> Option<(u64, u32)> {
        match &self.repr {
            Repr::Span(table, row) => Some(table.span(*row)),
            _ => None,
        }
    }

    /// Reads the text of a record read by position into memory, where it then stays
    /// (nothing for any other record).
    ///
    /// # Errors
    /// The read failed, or the file no longer holds this record where it was read
    /// (it was changed in place since): [`std::io::ErrorKind::InvalidData`].
    pub fn load(&self) -> std::io::Result<()> {
        match &self.repr {
            Repr::Span(table, row) => table.load(*row).map(|_| ()),
            _ => Ok(()),
        }
    }

    /// Returns a record that stands for row `row` of the span table a parse is still
    /// filling (see [`Record::bind`]).
    pub(crate) fn unbound(row: u32) -> Record {
        Record { repr: Repr::Unbound(row) }
    }

    /// Returns the record of row `row` of `table`.
    pub(crate) fn span_of(table: &Arc<SpanTable>, row: u32) -> Record {
        Record { repr: Repr::Span(Arc::clone(table), row) }
    }

    /// Points an unbound record at its (now complete) span table.
    pub(crate) fn bind(&mut self, table: &Arc<SpanTable>) {
        if let Repr::Unbound(row) = self.repr {
            self.repr = Repr::Span(Arc::clone(table), row);
        }
    }

    /// Returns the span table and row of a record read by position.
    pub(crate) fn span_row(&self) -> Option<(&Arc<SpanTable>, u32)> {
        match &self.repr {
            Repr::Span(table, row) => Some((table, *row)),
            _ => None,
        }
    }
}

/// The text record every failed read stands in for: `null`.
fn null_inner() -> &'static Inner {
    static NULL: OnceLock<Record> = OnceLock::new();
    NULL.get_or_init(|| Record::parse("null").expect("`null` is JSON")).text_inner()
}

impl Inner {
    fn line(&self) -> Cow<'_, str> {
        if self.compact && (!self.is_object || self.numbers_exact()) {
            Cow::Borrowed(&self.text)
        } else {
            Cow::Owned(self.canonical_line())
        }
    }

    fn numbers_exact(&self) -> bool {
        match self.exact.load(Ordering::Relaxed) {
            EXACT_YES => true,
            EXACT_NO => false,
            _ => {
                let exact = json::numbers_exact(&self.text);
                self.exact.store(if exact { EXACT_YES } else { EXACT_NO }, Ordering::Relaxed);
                exact
            }
        }
    }

    fn canonical_line(&self) -> String {
        self.try_value().map_or_else(|| without_whitespace(&self.text), json::to_js_string)
    }

    fn id(&self) -> Option<&str> {
        self.id.get(&self.text)
    }

    fn id_key(&self) -> Option<Cow<'_, str>> {
        match self.id() {
            Some(id) => Some(Cow::Borrowed(id)),
            None if self.is_object => self.number_field_key("id"),
            None => None,
        }
    }

    fn parent(&self) -> ParentRef<'_> {
        match &self.parent {
            Parent::Absent => ParentRef::Absent,
            Parent::Null => ParentRef::Null,
            Parent::Id(f) => f.get(&self.text).map_or(ParentRef::Invalid, ParentRef::Id),
            Parent::Invalid => ParentRef::Invalid,
        }
    }

    fn parent_key(&self) -> Option<Cow<'_, str>> {
        match self.parent {
            Parent::Id(_) => self.parent().id().map(Cow::Borrowed),
            Parent::Invalid => self.number_field_key("parentId"),
            _ => None,
        }
    }

    fn number_field_key(&self, key: &str) -> Option<Cow<'_, str>> {
        let raw = scan::Obj::parse(&self.text)?.get(key)?;
        match scan::kind(raw) {
            scan::Kind::True | scan::Kind::False => Some(Cow::Owned(format!("{SCALAR_KEY_MARK}{raw}"))),
            _ => scan::number(raw).map(|n| Cow::Owned(number_id_key(n))),
        }
    }

    fn message_raw(&self) -> Option<Cow<'_, str>> {
        if let Some(r) = &self.message {
            let raw = &self.text[r.start as usize..r.end as usize];
            return Some(if self.numbers_exact() { Cow::Borrowed(raw) } else { json::js_exact(raw) });
        }
        match self.value.get().and_then(|v| v.as_ref()).and_then(|v| v.get("message")) {
            Some(Value::Null) | None => None,
            Some(m) => Some(Cow::Owned(json::to_js_string(m))),
        }
    }

    fn message_info(&self) -> &MessageInfo {
        self.message_info.get_or_init(|| {
            let Some(raw) = self.message_raw() else { return MessageInfo::default() };
            let Some(m) = scan::Obj::parse(&raw) else {
                return MessageInfo::default();
            };
            let owned = |k: &str| scalar(m.get(k)).to_static();
            MessageInfo {
                role: owned("role"),
                content: owned("content"),
                provider: owned("provider"),
                model: owned("model"),
                api: owned("api"),
                stop_reason: owned("stopReason"),
                timestamp: owned("timestamp"),
                tool_call_id: owned("toolCallId"),
            }
        })
    }

    fn try_value(&self) -> Option<&Value> {
        self.value.get_or_init(|| crate::json::parse(&self.text)).as_ref()
    }
}

impl Serialize for Record {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let line = self.line();
        let raw: &RawValue = serde_json::from_str(&line).map_err(serde::ser::Error::custom)?;
        raw.serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A record is written back as it was read unless JavaScript reads one of its
        /// numbers as another value; the scan's shortcut for plain numbers changes
        /// nothing of that.
        #[test]
        fn a_record_is_written_back_by_the_number_rule(
            numbers in proptest::collection::vec("-?(0|[1-9][0-9]{0,20})(\\.[0-9]{1,4})?([eE][-+]?[0-9]{1,3})?", 0..4),
            quoted in "[0-9e.-]{0,8}",
        ) {
            let text = format!(
                r#"{{"type":"custom","id":"a","n":[{}],"s":"{quoted}","m":{{"k":{}}}}}"#,
                numbers.join(","),
                numbers.first().map_or("0", String::as_str),
            );
            let expected = if json::numbers_exact(&text) {
                text.clone()
            } else {
                json::to_js_string(&json::parse(&text).expect("JSON"))
            };
            let record = Record::parse(&text).expect("an object");
            proptest::prop_assert_eq!(record.numbers_exact(), json::numbers_exact(&text));
            proptest::prop_assert_eq!(record.line(), expected);
        }
    }

    /// Numbers beyond a double are `Infinity` in JavaScript and `null` once
    /// `JSON.stringify` writes them back; the text itself is kept.
    #[test]
    fn numbers_beyond_a_double_read_as_json_stringify_writes_them() -> Result<(), RecordParseError> {
        let text = r#"{"a":1e400,"b":"1e400 \"2e999\"","c":[-1e400,2,1e-400],"d":{"e":1E309}}"#;
        let r = Record::parse(text)?;
        assert_eq!(r.text(), text);
        assert_eq!(r.canonical_line(), r#"{"a":null,"b":"1e400 \"2e999\"","c":[null,2,0],"d":{"e":null}}"#);
        assert_eq!(r.get("a"), Some(&Value::Null));
        Ok(())
    }

    #[test]
    fn skeleton_and_message_range() {
        let t = r#"{"type":"message","id":"ab","parentId":null,"timestamp":"t","message":{"role":"assistant","content":null,"provider":"p","model":"m","x":[1,{"y":2}]}}"#;
        let r = Record::parse(t).unwrap();
        assert_eq!(r.entry_type(), EntryType::Message);
        assert_eq!(r.parent(), ParentRef::Null);
        assert!(r.message_raw().unwrap().starts_with(r#"{"role":"assistant""#));
        let mi = r.message_info();
        assert_eq!(mi.role(), Some("assistant"));
        assert_eq!(mi.content, Scalar::Null);
        assert_eq!(mi.provider.as_str(), Some("p"));
        assert_eq!(r.line(), t);
    }

    #[test]
    fn from_value_reads_the_same_skeleton_as_parse() {
        let v: Value = serde_json::from_str(
            r#"{"2":1,"type":"message","id":"a\"b","parentId":null,"timestamp":"t","message":{"role":"user","content":"é"},"x":[1]}"#,
        )
        .unwrap();
        let built = Record::from_value(v);
        let parsed = Record::parse(built.text()).unwrap();
        assert_eq!(
            built.text(),
            r#"{"2":1,"type":"message","id":"a\"b","parentId":null,"timestamp":"t","message":{"role":"user","content":"é"},"x":[1]}"#
        );
        assert_eq!(
            (built.entry_type(), built.id(), built.parent(), built.timestamp()),
            (parsed.entry_type(), parsed.id(), parsed.parent(), parsed.timestamp())
        );
        assert_eq!(built.message_raw(), parsed.message_raw());
        assert_eq!(built.id(), Some("a\"b"));
    }

    #[test]
    fn duplicate_keys_last_wins_like_javascript() {
        let r = Record::parse(r#"{"type":"label","id":"a","id":"b"}"#).unwrap();
        assert_eq!(r.id(), Some("b"));
    }

    #[test]
    fn non_objects_and_arrays() {
        let r = Record::parse("42").unwrap();
        assert!(!r.is_object());
        assert_eq!(r.id(), None);
        let r = Record::parse(r#"["message","x"]"#).unwrap();
        assert!(!r.is_object());
        assert_eq!(r.type_str(), None);
    }

    #[test]
    fn multi_line_values_are_written_compactly() {
        let r = Record::parse("{\"type\":\n \"custom\", \"id\": \"q\"}").unwrap();
        assert_eq!(r.line(), r#"{"type":"custom","id":"q"}"#);
        let r = Record::parse(r#"{"a": 1}"#).unwrap();
        assert_eq!(r.line(), r#"{"a": 1}"#);
        assert_eq!(r.canonical_line(), r#"{"a":1}"#);
    }
}
