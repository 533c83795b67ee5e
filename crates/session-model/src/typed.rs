//! Typed views of records: the header, every entry type of both dialects, agent
//! messages and their content blocks, as serde types.
//!
//! [`Record`] stays the lossless carrier: a record read and not changed is written
//! back from its text. [`Record::entry`] reads a record as an [`Entry`] and
//! [`Record::from_entry`] builds a new record from one (through [`crate::json`], so
//! the text is what `JSON.stringify` writes). Nothing is lost on the way:
//!
//! * every struct keeps the keys it does not know in `extra`, written after the
//!   known ones;
//! * an entry of an unknown `type` is [`Entry::Unknown`], a message of an unknown
//!   `role` is [`Message::Unknown`] and a content block of an unknown `type` is
//!   [`ContentBlock::Unknown`], each kept whole;
//! * `Option<T>` is a key that may be absent (absent stays absent on output);
//!   `Option<Option<T>>` is a key that may also be `null` (`Some(None)`);
//! * JSON numbers are `f64`, the JavaScript number: nothing is kept that the
//!   references do not keep, nothing is lost that they keep. Integers are written
//!   without a fraction (`3`, never `3.0`).
//!
//! Struct fields are in the order the references write their keys (for the two
//! dialects' variants of one type, each dialect's keys keep their relative order;
//! in messages, keys the agents set after creating one, such as `errorMessage`,
//! follow `timestamp`), so [`Record::from_entry`] writes a new entry as the
//! reference would, and an entry the agents wrote comes back byte for byte. A
//! record built from a loaded one always has the same JSON value as the original,
//! though keys the typed model does not know move after the known ones, and a
//! header keeps the new-session order (forks and branched sessions order theirs
//! differently).
//!
//! **Unexpected JSON types.** A key the model knows that holds a value of another
//! JSON type (a string `tokensBefore`, a `null` where only absent is allowed, a
//! numeric header `id`) makes the conversion fail with [`TypedError::Field`], which
//! names the key's path (`message.content[0].text`); nothing is defaulted or dropped
//! silently, and conversions never panic. Open payloads (`details`, `data`,
//! `preserveData`, tool call `arguments`, …) are [`Value`]s and take any JSON. One
//! `null` is read on purpose: a message `timestamp` of `null` is `NaN`, which is
//! what `Date.parse` of a bad ISO time gives and what `JSON.stringify` writes as
//! `null`.
//!
//! The variant structs ([`MessageEntry`], [`Header`], [`UserMessage`], …) hold no
//! `type`/`role` key of their own: the enums add it first on output and take it
//! away on input, so convert records through [`Entry`] and messages through
//! [`Message`].
//!
//! ```
//! use session_model::Record;
//! use session_model::typed::{Content, Entry, Message};
//!
//! let r = Record::parse(r#"{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1,"x":true}}"#)?;
//! let Entry::Message(mut m) = r.entry()? else { unreachable!() };
//! assert_eq!(m.parent_id, Some(None));
//! let Message::User(user) = &mut m.message else { unreachable!() };
//! assert_eq!(user.content, Content::Text("hi".into()));
//! user.content = Content::Text("hello".into());
//! let written = Record::from_entry(&Entry::Message(m));
//! assert_eq!(written.text(), r#"{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hello","timestamp":1,"x":true}}"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::record::{Record, RecordParseError};

/// Unknown keys of an object, in their order.
pub type Extra = Map<String, Value>;

/// Why a record or a JSON text could not be read as a typed value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TypedError {
    /// A key holds a value of an unexpected JSON type, or a required key is missing.
    #[error("field `{path}`: {message}")]
    Field {
        /// The path of the key (`message.content[0].text`; `.` for the value itself).
        path: String,
        /// What was wrong, as serde says it (`invalid type: string "x", expected f64`).
        message: String,
    },
    /// The record cannot be read into a JSON tree (nested too deeply).
    #[error("the record cannot be read as a JSON tree: it is nested too deeply")]
    Unreadable,
    /// The text is not one JSON value.
    #[error(transparent)]
    Syntax(#[from] RecordParseError),
}

impl TypedError {
    /// Returns the error with `prefix` put before its path (`messages[3]` and
    /// `content` give `messages[3].content`), for values read inside a larger one.
    pub fn within(self, prefix: &str) -> TypedError {
        match self {
            TypedError::Field { path, message } => TypedError::Field { path: join_path(prefix, &path), message },
            other => other,
        }
    }
}

/// Marks the inner path (before it and after it) in errors that cross a manual
/// `Deserialize` impl (the tagged enums), so the outer path can be joined to it.
const PATH_SEP: char = '\u{1f}';

fn field_error(e: serde_path_to_error::Error<serde_json::Error>) -> TypedError {
    let outer = e.path().to_string();
    let inner = e.into_inner().to_string();
    // Only a message that starts with the separator comes from `to_de_error`: serde's
    // own messages never do, though they may quote a string holding it.
    let nested = inner.strip_prefix(PATH_SEP).and_then(|rest| rest.split_once(PATH_SEP));
    let (path, message) = match nested {
        Some((path, message)) => (join_path(&outer, path), message.to_owned()),
        None => (outer, inner),
    };
    // A missing key is reported at its object: name the key itself.
    let missing = message.strip_prefix("missing field `").and_then(|m| m.strip_suffix('`'));
    match missing {
        Some(key) => TypedError::Field { path: join_path(&path, key), message: "missing".into() },
        None => TypedError::Field { path, message },
    }
}

fn join_path(outer: &str, inner: &str) -> String {
    match (outer, inner) {
        (".", i) => i.to_owned(),
        (o, ".") => o.to_owned(),
        (o, i) if i.starts_with('[') => format!("{o}{i}"),
        (o, i) => format!("{o}.{i}"),
    }
}

/// Reads `value` as a `T`, naming the failing key on error.
fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, TypedError> {
    // Keys are tracked only on a second read of a value that failed to read: tracking
    // them costs as much as the read, and the read is the same with or without it.
    T::deserialize(value).or_else(|_| serde_path_to_error::deserialize(value).map_err(field_error))
}

/// Turns a [`TypedError`] into a deserializer error that keeps the path.
fn to_de_error<E: serde::de::Error>(e: TypedError) -> E {
    match e {
        TypedError::Field { path, message } => E::custom(format_args!("{PATH_SEP}{path}{PATH_SEP}{message}")),
        other => E::custom(other),
    }
}

/// Reads `text` (one JSON value, as JavaScript's `JSON.parse` reads it) as a `T`.
///
/// ```
/// use session_model::typed::{parse_json, Message};
/// let m: Message = parse_json(r#"{"role":"branchSummary","summary":"s","fromId":"root","timestamp":null}"#)?;
/// let Message::BranchSummary(b) = m else { unreachable!() };
/// assert!(b.timestamp.is_some_and(f64::is_nan));
/// # Ok::<(), session_model::typed::TypedError>(())
/// ```
pub fn parse_json<T: DeserializeOwned>(text: &str) -> Result<T, TypedError> {
    Record::parse(text)?.typed()
}

/// Returns `value` as a JSON value the way `JSON.stringify` sees it (`NaN` is `null`).
fn to_value<T: Serialize + ?Sized>(value: &T) -> Result<Value, TypedError> {
    serde_json::to_value(value).map_err(|e| TypedError::Field { path: ".".into(), message: e.to_string() })
}

impl Record {
    /// Reads this record as a typed [`Entry`] (the header is [`Entry::Session`]).
    ///
    /// ```
    /// use session_model::{Record, typed::Entry};
    /// let r = Record::parse(r#"{"type":"label","id":"a","parentId":"b","timestamp":"t","targetId":"b","label":"x"}"#)?;
    /// let Entry::Label(label) = r.entry()? else { unreachable!() };
    /// assert_eq!(label.label.as_deref(), Some("x"));
    /// let bad = Record::parse(r#"{"type":"label","id":"a","parentId":"b","timestamp":"t","targetId":7}"#)?;
    /// assert_eq!(bad.entry().unwrap_err().to_string(), "field `targetId`: invalid type: integer `7`, expected a string");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn entry(&self) -> Result<Entry, TypedError> {
        Entry::from_value(self.try_value().ok_or(TypedError::Unreadable)?.clone())
    }

    /// Reads this record as any serde type (`T` = [`Entry`] is [`Record::entry`]).
    ///
    /// The variant structs ([`LabelEntry`], …) have no `type` field: read them
    /// through [`Entry`], or their `extra` gets the `type` key.
    pub fn typed<T: DeserializeOwned>(&self) -> Result<T, TypedError> {
        from_value(self.try_value().ok_or(TypedError::Unreadable)?)
    }

    /// Creates a record from an entry, serialised as the reference's `JSON.stringify`.
    ///
    /// ```
    /// use session_model::{Record, typed::{Entry, LabelEntry}};
    /// let label = LabelEntry {
    ///     id: Some("a".into()),
    ///     parent_id: Some(None),
    ///     timestamp: Some("t".into()),
    ///     target_id: "b".into(),
    ///     label: None,
    ///     extra: Default::default(),
    /// };
    /// let r = Record::from_entry(&Entry::Label(label));
    /// assert_eq!(r.text(), r#"{"type":"label","id":"a","parentId":null,"timestamp":"t","targetId":"b"}"#);
    /// ```
    pub fn from_entry(entry: &Entry) -> Record {
        Record::from_value(entry.to_value())
    }

    /// Creates a record from any serde value, serialised as `JSON.stringify` would.
    ///
    /// Fails only when `value` cannot be a JSON value (a map with non-string keys, a
    /// `Serialize` impl that reports an error).
    pub fn from_typed<T: Serialize + ?Sized>(value: &T) -> Result<Record, TypedError> {
        to_value(value).map(Record::from_value)
    }
}

/// Deserializes a key that may be absent but, when present, is never `null`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Deserializes a key that may be absent (`None`) or `null` (`Some(None)`).
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// Deserializes a JavaScript number that may be `null`: `NaN` or a number beyond a
/// double (`1e400`, which JavaScript reads as `Infinity`) once written, both of which
/// `JSON.stringify` writes as `null`. It is read as `NaN`, which writes back as `null`.
fn js_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Option::<f64>::deserialize(d).map(|n| Some(n.unwrap_or(f64::NAN)))
}

/// Declares a struct of the model with camelCase keys, in which every `Option` field
/// is a key that may be absent (`None`, left out on output), read by its type:
/// `Option<f64>` with [`js_number`], `Option<Option<T>>` with [`nullable`], any other
/// with [`present`].
macro_rules! typed_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident { $($body:tt)* }
    ) => {
        typed_struct!(@field [$(#[$meta])* $name] [] $($body)*);
    };
    (@field $head:tt [$($done:tt)*] $(#[$f:meta])* pub $field:ident: Option<f64>, $($rest:tt)*) => {
        typed_struct!(@field $head [$($done)* $(#[$f])* #[serde(default, deserialize_with = "js_number", skip_serializing_if = "Option::is_none")] pub $field: Option<f64>,] $($rest)*);
    };
    (@field $head:tt [$($done:tt)*] $(#[$f:meta])* pub $field:ident: Option<Option<$ty:ty>>, $($rest:tt)*) => {
        typed_struct!(@field $head [$($done)* $(#[$f])* #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Option::is_none")] pub $field: Option<Option<$ty>>,] $($rest)*);
    };
    (@field $head:tt [$($done:tt)*] $(#[$f:meta])* pub $field:ident: Option<$ty:ty>, $($rest:tt)*) => {
        typed_struct!(@field $head [$($done)* $(#[$f])* #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")] pub $field: Option<$ty>,] $($rest)*);
    };
    (@field $head:tt [$($done:tt)*] $(#[$f:meta])* pub $field:ident: $ty:ty, $($rest:tt)*) => {
        typed_struct!(@field $head [$($done)* $(#[$f])* pub $field: $ty,] $($rest)*);
    };
    (@field [$(#[$meta:meta])* $name:ident] [$($done:tt)*]) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $name { $($done)* }
    };
}

// ---------------------------------------------------------------------------------
// Tagged enums

/// Declares a tagged enum with an `Unknown(Value)` variant and its serde impls.
macro_rules! tagged_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident by $tag:literal {
            $( $(#[$vmeta:meta])* $variant:ident($ty:ty) = $wire:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq)]
        #[non_exhaustive]
        pub enum $name {
            $( $(#[$vmeta])* $variant($ty), )*
            /// Any other value (unknown or missing tag, not an object), kept whole.
            Unknown(Value),
        }

        impl $name {
            /// Returns the wire tag (`None` for `Unknown`).
            pub fn tag(&self) -> Option<&'static str> {
                match self {
                    $( $name::$variant(_) => Some($wire), )*
                    $name::Unknown(_) => None,
                }
            }

            /// Reads a JSON value, naming the failing key on error.
            pub fn from_value(value: Value) -> Result<$name, TypedError> {
                let Value::Object(mut map) = value else {
                    return Ok($name::Unknown(value));
                };
                let tag = match map.get($tag) {
                    Some(Value::String(s)) => s.as_str(),
                    _ => return Ok($name::Unknown(Value::Object(map))),
                };
                match tag {
                    $( $wire => {
                        map.shift_remove($tag);
                        from_value(&Value::Object(map)).map($name::$variant)
                    } )*
                    _ => Ok($name::Unknown(Value::Object(map))),
                }
            }

            /// Returns the JSON value `JSON.stringify` would write for it.
            pub fn to_value(&self) -> Value {
                to_value(self).expect("typed values are JSON values with string keys")
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                /// Writes the tag first, then the fields of `inner`.
                #[derive(Serialize)]
                struct Tagged<'a, T> {
                    #[serde(rename = $tag)]
                    tag: &'a str,
                    #[serde(flatten)]
                    inner: &'a T,
                }
                match self {
                    $( $name::$variant(inner) => Tagged { tag: $wire, inner }.serialize(s), )*
                    $name::Unknown(v) => v.serialize(s),
                }
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                $name::from_value(Value::deserialize(d)?).map_err(to_de_error)
            }
        }
    };
}

tagged_enum! {
    /// One record of a session file, by its `type`: the header and every entry type
    /// of pi and omp.
    pub enum Entry by "type" {
        /// `session`: the header.
        Session(Header) = "session",
        /// `message`.
        Message(MessageEntry) = "message",
        /// `thinking_level_change`.
        ThinkingLevelChange(ThinkingLevelChangeEntry) = "thinking_level_change",
        /// `model_change`.
        ModelChange(ModelChangeEntry) = "model_change",
        /// `compaction`.
        Compaction(CompactionEntry) = "compaction",
        /// `branch_summary`.
        BranchSummary(BranchSummaryEntry) = "branch_summary",
        /// `custom`.
        Custom(CustomEntry) = "custom",
        /// `custom_message`.
        CustomMessage(CustomMessageEntry) = "custom_message",
        /// `label`.
        Label(LabelEntry) = "label",
        /// `session_info` (pi).
        SessionInfo(SessionInfoEntry) = "session_info",
        /// `context_edit` (pi).
        ContextEdit(ContextEditEntry) = "context_edit",
        /// `usage` (pi).
        Usage(UsageEntry) = "usage",
        /// `service_tier_change` (omp).
        ServiceTierChange(ServiceTierChangeEntry) = "service_tier_change",
        /// `title_change` (omp).
        TitleChange(TitleChangeEntry) = "title_change",
        /// `model_usage` (omp).
        ModelUsage(ModelUsageEntry) = "model_usage",
        /// `mode_change` (omp).
        ModeChange(ModeChangeEntry) = "mode_change",
        /// `session_init` (omp).
        SessionInit(SessionInitEntry) = "session_init",
        /// `reset_boundary` (omp).
        ResetBoundary(ResetBoundaryEntry) = "reset_boundary",
        /// `ttsr_injection` (omp).
        TtsrInjection(TtsrInjectionEntry) = "ttsr_injection",
        /// `credential_pin` (omp).
        CredentialPin(CredentialPinEntry) = "credential_pin",
    }
}

impl Entry {
    /// Returns the entry's `id`: `None` for the header (its `id` is the session id,
    /// [`Header::id`]) and for an entry without a string `id`.
    pub fn id(&self) -> Option<&str> {
        macro_rules! id_of {
            ($($v:ident),*) => {
                match self {
                    $( Entry::$v(e) => e.id.as_deref(), )*
                    Entry::Session(_) => None,
                    Entry::Unknown(v) => v.get("id").and_then(Value::as_str),
                }
            };
        }
        id_of!(
            Message,
            ThinkingLevelChange,
            ModelChange,
            Compaction,
            BranchSummary,
            Custom,
            CustomMessage,
            Label,
            SessionInfo,
            ContextEdit,
            Usage,
            ServiceTierChange,
            TitleChange,
            ModelUsage,
            ModeChange,
            SessionInit,
            ResetBoundary,
            TtsrInjection,
            CredentialPin
        )
    }
}

tagged_enum! {
    /// An agent message, by its `role`.
    pub enum Message by "role" {
        /// `user`.
        User(UserMessage) = "user",
        /// `assistant`.
        Assistant(AssistantMessage) = "assistant",
        /// `toolResult`.
        ToolResult(ToolResultMessage) = "toolResult",
        /// `system` (pi).
        System(SystemMessage) = "system",
        /// `developer` (omp).
        Developer(DeveloperMessage) = "developer",
        /// `bashExecution`.
        BashExecution(BashExecutionMessage) = "bashExecution",
        /// `custom`: an extension message.
        Custom(CustomRoleMessage) = "custom",
        /// `hookMessage`: the v1/v2 name of `custom` (migrated to `custom` by v3).
        HookMessage(CustomRoleMessage) = "hookMessage",
        /// `branchSummary` (made by the context projection).
        BranchSummary(BranchSummaryMessage) = "branchSummary",
        /// `compactionSummary` (made by the context projection).
        CompactionSummary(CompactionSummaryMessage) = "compactionSummary",
    }
}

impl Default for Message {
    /// Returns an empty object of no role ([`Message::Unknown`]).
    fn default() -> Message {
        Message::Unknown(Value::Object(Map::new()))
    }
}

impl Message {
    /// Returns the message's role (`None` for unknown messages without a string `role`).
    pub fn role(&self) -> Option<&str> {
        match self {
            Message::Unknown(v) => v.get("role").and_then(Value::as_str),
            known => known.tag(),
        }
    }
}

/// A role's message struct into its [`Message`] (a [`CustomRoleMessage`] becomes
/// [`Message::Custom`], the current name of `hookMessage`).
macro_rules! message_from {
    ($($ty:ident => $variant:ident),* $(,)?) => {
        $(
            impl From<$ty> for Message {
                fn from(m: $ty) -> Message {
                    Message::$variant(m)
                }
            }
        )*
    };
}

message_from! {
    UserMessage => User,
    AssistantMessage => Assistant,
    ToolResultMessage => ToolResult,
    SystemMessage => System,
    DeveloperMessage => Developer,
    BashExecutionMessage => BashExecution,
    CustomRoleMessage => Custom,
    BranchSummaryMessage => BranchSummary,
    CompactionSummaryMessage => CompactionSummary,
}

impl Content {
    /// Returns the JSON value `JSON.stringify` would write for it: a string, or an array
    /// of blocks.
    ///
    /// # Errors
    ///
    /// Never for content built from the typed model; [`TypedError::Field`] for a block
    /// whose `Unknown` value cannot be a JSON value.
    pub fn to_value(&self) -> Result<Value, TypedError> {
        to_value(self)
    }
}

impl From<&str> for Content {
    /// A string content.
    fn from(text: &str) -> Content {
        Content::Text(text.to_owned())
    }
}

impl From<String> for Content {
    /// A string content.
    fn from(text: String) -> Content {
        Content::Text(text)
    }
}

impl From<Vec<ContentBlock>> for Content {
    /// An array of blocks.
    fn from(blocks: Vec<ContentBlock>) -> Content {
        Content::Blocks(blocks)
    }
}

impl ContentBlock {
    /// A `text` block.
    pub fn text(text: impl Into<String>) -> ContentBlock {
        ContentBlock::Text(TextBlock { text: text.into(), ..TextBlock::default() })
    }

    /// A `toolCall` block: the call `id` a `toolResult` answers, the tool and its
    /// arguments.
    pub fn tool_call(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> ContentBlock {
        ContentBlock::ToolCall(ToolCallBlock {
            id: id.into(),
            name: name.into(),
            arguments,
            ..ToolCallBlock::default()
        })
    }
}

impl UserMessage {
    /// A user message of `content` (a string or blocks) at `timestamp` (epoch ms).
    ///
    /// ```
    /// use session_model::typed::{Message, UserMessage};
    /// let m = Message::from(UserMessage::new("2+2?", 1.0));
    /// let text = session_model::json::to_js_string(&m.to_value());
    /// assert_eq!(text, r#"{"role":"user","content":"2+2?","timestamp":1}"#);
    /// ```
    pub fn new(content: impl Into<Content>, timestamp: f64) -> UserMessage {
        UserMessage { content: content.into(), timestamp: Some(timestamp), ..UserMessage::default() }
    }
}

impl AssistantMessage {
    /// An assistant message of `content` at `timestamp` (epoch ms); set `provider`,
    /// `model`, `usage` and `stop_reason` on it as the turn has them.
    ///
    /// ```
    /// use session_model::typed::{AssistantMessage, ContentBlock, Message};
    /// let mut a = AssistantMessage::new(vec![ContentBlock::text("4")], 2.0);
    /// a.stop_reason = Some("stop".into());
    /// let v = Message::from(a).to_value();
    /// assert_eq!(v["content"][0]["text"], "4");
    /// assert_eq!(v["stopReason"], "stop");
    /// ```
    pub fn new(content: Vec<ContentBlock>, timestamp: f64) -> AssistantMessage {
        AssistantMessage { content, timestamp: Some(timestamp), ..AssistantMessage::default() }
    }
}

impl ToolResultMessage {
    /// The result of the tool call `tool_call_id` (a [`ContentBlock::tool_call`]'s id)
    /// of `tool_name`, at `timestamp` (epoch ms).
    pub fn new(
        tool_call_id: impl Into<String>,
        tool_name: impl Into<String>,
        content: impl Into<Content>,
        is_error: bool,
        timestamp: f64,
    ) -> ToolResultMessage {
        ToolResultMessage {
            tool_call_id: tool_call_id.into(),
            tool_name: tool_name.into(),
            content: content.into(),
            is_error,
            timestamp: Some(timestamp),
            ..ToolResultMessage::default()
        }
    }
}

tagged_enum! {
    /// One block of a message's `content` array, by its `type`.
    pub enum ContentBlock by "type" {
        /// `text`.
        Text(TextBlock) = "text",
        /// `image`.
        Image(ImageBlock) = "image",
        /// `thinking`.
        Thinking(ThinkingBlock) = "thinking",
        /// `redactedThinking`.
        RedactedThinking(RedactedThinkingBlock) = "redactedThinking",
        /// `toolCall`.
        ToolCall(ToolCallBlock) = "toolCall",
    }
}

/// A message's `content`: a string or an array of blocks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// A string.
    Text(String),
    /// An array of blocks.
    Blocks(Vec<ContentBlock>),
}

impl Default for Content {
    /// Returns an empty block array.
    fn default() -> Content {
        Content::Blocks(Vec::new())
    }
}

// ---------------------------------------------------------------------------------
// Header

typed_struct! {
    /// The `session` header of both dialects (`type` is added by [`Entry::Session`]).
    pub struct Header {
        /// `version` (absent: v1).
        pub version: Option<f64>,
        /// The session id (a header without a string id is not valid).
        pub id: Option<String>,
        /// Creation time, ISO.
        pub timestamp: Option<String>,
        /// Working directory.
        pub cwd: Option<String>,
        /// The session this one was forked or branched from (a path, or an id in omp).
        pub parent_session: Option<String>,
        /// omp: the inherited provider prompt-cache identity.
        pub provider_prompt_cache_key: Option<String>,
        /// omp: extra workspace roots.
        pub additional_directories: Option<Vec<String>>,
        /// omp: the paths this journal lived at before moves.
        pub previous_session_files: Option<Vec<String>>,
        /// omp: the display title (the title slot overrides it).
        pub title: Option<String>,
        /// omp: `auto` or `user`.
        pub title_source: Option<String>,
        /// The MusePi fork's mode id.
        pub mode_id: Option<String>,
        /// Other keys (v1's `provider`, `modelId`, `thinkingLevel`, …).
        #[serde(flatten)]
        pub extra: Extra,
    }
}

// ---------------------------------------------------------------------------------
// Entries

/// Declares an entry struct: the base fields after (`base_last`) or before the
/// payload fields, as the reference writes them.
macro_rules! entry_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident { $($body:tt)* }
    ) => {
        entry_struct!(@base [$(#[$meta])* pub struct $name] [] [$($body)*]);
    };
    (
        $(#[$meta:meta])*
        pub struct $name:ident base_last { $($body:tt)* }
    ) => {
        entry_struct!(@base [$(#[$meta])* pub struct $name] [$($body)*] []);
    };
    (@base [$($head:tt)*] [$($before:tt)*] [$($after:tt)*]) => {
        typed_struct! {
            $($head)* {
                $($before)*
                /// The entry id (absent in v1 files).
                pub id: Option<String>,
                /// The parent: `Some(None)` is `null` (a root), `None` absent (v1).
                pub parent_id: Option<Option<String>>,
                /// When the entry was appended, ISO.
                pub timestamp: Option<String>,
                $($after)*
                /// Keys this model does not know, in their order.
                #[serde(flatten)]
                pub extra: Extra,
            }
        }
    };
}

entry_struct! {
    /// `message`: one agent message.
    pub struct MessageEntry {
        /// The message.
        pub message: Message,
    }
}

entry_struct! {
    /// `thinking_level_change`: pi writes a string level; omp a level or `null`
    /// plus `configured`.
    pub struct ThinkingLevelChangeEntry {
        /// `thinkingLevel` (`off`, `minimal`, `low`, `medium`, `high`, `xhigh`, …).
        pub thinking_level: Option<Option<String>>,
        /// omp: `configured`, the user's selector (`auto` or a level).
        pub configured: Option<Option<String>>,
    }
}

entry_struct! {
    /// `model_change`: pi's `provider`/`modelId`, omp's `model`/`role`/`resolvedModelIsFallback`.
    pub struct ModelChangeEntry {
        /// pi: the provider.
        pub provider: Option<String>,
        /// pi: the model id.
        pub model_id: Option<String>,
        /// omp: `provider/modelId`.
        pub model: Option<String>,
        /// omp: the model role (absent: `default`).
        pub role: Option<String>,
        /// omp: whether the resolved model is a fallback.
        pub resolved_model_is_fallback: Option<bool>,
    }
}

entry_struct! {
    /// `compaction`: a summary of older history (the fields of both dialects).
    pub struct CompactionEntry {
        /// The summary text.
        pub summary: String,
        /// omp: a short summary.
        pub short_summary: Option<String>,
        /// The first entry kept after the summary.
        pub first_kept_entry_id: Option<String>,
        /// v1: the index of the first kept entry (migrated to `firstKeptEntryId`).
        pub first_kept_entry_index: Option<f64>,
        /// Tokens before compacting.
        pub tokens_before: f64,
        /// omp: tokens after compacting.
        pub tokens_after: Option<f64>,
        /// omp: `snapcompact`, `handoff`, ….
        pub method: Option<String>,
        /// omp: the last entry a provider's remote history replays.
        pub provider_replay_through_entry_id: Option<String>,
        /// Opaque details (pi: `{readFiles, modifiedFiles}`).
        pub details: Option<Value>,
        /// pi: the usage of the summarising call.
        pub usage: Option<Usage>,
        /// pi: whether an extension made it.
        pub from_hook: Option<bool>,
        /// pi: the system-message snapshot put before the summary.
        pub system_message: Option<Message>,
        /// omp: whether an extension made it.
        pub from_extension: Option<bool>,
        /// omp: provider payloads (`snapcompact`, `openaiRemoteCompaction`, …).
        pub preserve_data: Option<Value>,
    }
}

entry_struct! {
    /// `branch_summary`: a summary of an abandoned branch.
    pub struct BranchSummaryEntry {
        /// The leaf before the navigation, or `root`.
        pub from_id: String,
        /// The summary text.
        pub summary: String,
        /// Opaque details.
        pub details: Option<Value>,
        /// pi: the usage of the summarising call.
        pub usage: Option<Usage>,
        /// pi: whether an extension made it.
        pub from_hook: Option<bool>,
        /// omp: whether an extension made it.
        pub from_extension: Option<bool>,
    }
}

entry_struct! {
    /// `custom`: extension state, never in the context (payload before the base keys).
    pub struct CustomEntry base_last {
        /// The extension's type name.
        pub custom_type: String,
        /// The extension's data.
        pub data: Option<Value>,
    }
}

entry_struct! {
    /// `custom_message`: an extension message in the context (payload before the base keys).
    pub struct CustomMessageEntry base_last {
        /// The extension's type name.
        pub custom_type: String,
        /// The content.
        pub content: Content,
        /// Whether the UI shows it.
        pub display: bool,
        /// Opaque details.
        pub details: Option<Value>,
        /// omp: `user` or `agent`.
        pub attribution: Option<String>,
    }
}

entry_struct! {
    /// `label`: a bookmark on another entry (no `label`: cleared).
    pub struct LabelEntry {
        /// The labelled entry.
        pub target_id: String,
        /// The label.
        pub label: Option<String>,
    }
}

entry_struct! {
    /// `session_info` (pi): the display name (`""` clears it).
    pub struct SessionInfoEntry {
        /// The name.
        pub name: String,
    }
}

entry_struct! {
    /// `context_edit` (pi): replaces or omits an earlier entry's content.
    pub struct ContextEditEntry {
        /// The edited entry.
        pub target_id: String,
        /// `Some(None)`: `null`, the target is omitted.
        pub replacement: Option<Option<Replacement>>,
    }
}

typed_struct! {
    /// A context edit's replacement: `{content}`.
    pub struct Replacement {
        /// The new content.
        pub content: Option<Content>,
        /// Other keys.
        #[serde(flatten)]
        pub extra: Extra,
    }
}

entry_struct! {
    /// `usage` (pi): a billing record.
    pub struct UsageEntry {
        /// What it was for (`cache_warm`, …).
        pub kind: String,
        /// The provider.
        pub provider: String,
        /// The model.
        pub model: String,
        /// The usage.
        pub usage: Usage,
        /// A note (written only when non-empty).
        pub note: Option<String>,
    }
}

entry_struct! {
    /// `service_tier_change` (omp).
    pub struct ServiceTierChangeEntry {
        /// The tier; `Some(None)` (`null`) clears it.
        pub service_tier: Option<Option<ServiceTier>>,
    }
}

/// omp's service tier: a per-family map, or a legacy string.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ServiceTier {
    /// A legacy single tier (`priority`, …), normalised on read by context building.
    Legacy(String),
    /// `{openai?, anthropic?, google?}` to `auto`/`default`/`flex`/`scale`/`priority`.
    ByFamily(Map<String, Value>),
}

entry_struct! {
    /// `title_change` (omp): a rename audit entry.
    pub struct TitleChangeEntry {
        /// The new title.
        pub title: String,
        /// `auto` or `user`.
        pub source: String,
        /// The title before.
        pub previous_title: Option<String>,
        /// What triggered it.
        pub trigger: Option<String>,
    }
}

entry_struct! {
    /// `model_usage` (omp): the usage of a side call (titles, …).
    pub struct ModelUsageEntry {
        /// What the call was for.
        pub purpose: Option<String>,
        /// The model role.
        pub role: Option<String>,
        /// The API.
        pub api: Option<String>,
        /// The provider.
        pub provider: Option<String>,
        /// The model.
        pub model: Option<String>,
        /// The usage.
        pub usage: Option<Usage>,
        /// The stop reason.
        pub stop_reason: Option<String>,
        /// The error, if any.
        pub error_message: Option<String>,
    }
}

entry_struct! {
    /// `mode_change` (omp).
    pub struct ModeChangeEntry {
        /// The mode (`none` when leaving one).
        pub mode: String,
        /// The mode's data.
        pub data: Option<Value>,
    }
}

entry_struct! {
    /// `session_init` (omp): a subagent's replay contract. The optional keys
    /// (`agent`, `modelRole`, `outputSchema`, `spawns`, `readSummarize`, …) stay in
    /// `extra`.
    pub struct SessionInitEntry {
        /// The system prompt.
        pub system_prompt: Option<String>,
        /// The task.
        pub task: Option<String>,
        /// The tools.
        pub tools: Option<Value>,
    }
}

entry_struct! {
    /// `reset_boundary` (omp): `/clear`; the base keys only.
    pub struct ResetBoundaryEntry {}
}

entry_struct! {
    /// `ttsr_injection` (omp): rules injected into the context.
    pub struct TtsrInjectionEntry {
        /// The rule names.
        pub injected_rules: Vec<String>,
    }
}

entry_struct! {
    /// `credential_pin` (omp).
    pub struct CredentialPinEntry {
        /// The provider.
        pub provider: String,
        /// The sha-256 of the account and scope.
        pub hash: String,
    }
}

// ---------------------------------------------------------------------------------
// Usage

typed_struct! {
    /// Token usage and cost of a model call.
    ///
    /// ```
    /// use session_model::typed::Usage;
    ///
    /// let usage = Usage { input: Some(12.0), output: Some(3.0), ..Usage::default() };
    /// assert_eq!(usage.to_value()?, serde_json::json!({"input": 12.0, "output": 3.0}));
    /// # Ok::<(), session_model::typed::TypedError>(())
    /// ```
    pub struct Usage {
        /// Input tokens.
        pub input: Option<f64>,
        /// Output tokens.
        pub output: Option<f64>,
        /// Cache-read tokens.
        pub cache_read: Option<f64>,
        /// Cache-write tokens.
        pub cache_write: Option<f64>,
        /// One-hour cache-write tokens.
        #[serde(rename = "cacheWrite1h")]
        pub cache_write_1h: Option<f64>,
        /// Reasoning tokens.
        pub reasoning: Option<f64>,
        /// All tokens.
        pub total_tokens: Option<f64>,
        /// Cost.
        pub cost: Option<Cost>,
        /// Other keys.
        #[serde(flatten)]
        pub extra: Extra,
    }
}

impl Usage {
    /// Returns the JSON value `JSON.stringify` would write for it (absent keys left out).
    ///
    /// # Errors
    ///
    /// [`TypedError::Field`] when a kept unknown key cannot be a JSON value.
    pub fn to_value(&self) -> Result<Value, TypedError> {
        to_value(self)
    }
}

typed_struct! {
    /// The cost of a model call, per kind of token.
    pub struct Cost {
        /// Input.
        pub input: Option<f64>,
        /// Output.
        pub output: Option<f64>,
        /// Cache reads.
        pub cache_read: Option<f64>,
        /// Cache writes.
        pub cache_write: Option<f64>,
        /// Total.
        pub total: Option<f64>,
        /// Other keys.
        #[serde(flatten)]
        pub extra: Extra,
    }
}

// ---------------------------------------------------------------------------------
// Messages

/// Declares a message struct: the keys its writer sets first, `timestamp` (epoch ms),
/// then the keys set afterwards (`errorMessage` on a failed turn, …), as the agents'
/// messages have them.
macro_rules! message_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident { $($body:tt)* } $(then { $($after:tt)* })?
    ) => {
        typed_struct! {
            $(#[$meta])*
            pub struct $name {
                $($body)*
                /// Epoch milliseconds (`NaN`, written `null`, when made from a bad ISO time).
                pub timestamp: Option<f64>,
                $($($after)*)?
                /// Keys this model does not know, in their order.
                #[serde(flatten)]
                pub extra: Extra,
            }
        }
    };
}

message_struct! {
    /// A `user` message.
    pub struct UserMessage {
        /// The content.
        pub content: Content,
    } then {
        /// omp: `user` or `agent`.
        pub attribution: Option<String>,
    }
}

message_struct! {
    /// An `assistant` message.
    pub struct AssistantMessage {
        /// The content blocks.
        pub content: Vec<ContentBlock>,
        /// The API.
        pub api: Option<String>,
        /// The provider.
        pub provider: Option<String>,
        /// The model.
        pub model: Option<String>,
        /// The usage.
        pub usage: Option<Usage>,
        /// `stop`, `length`, `toolUse`, `error`, `aborted`.
        pub stop_reason: Option<String>,
    } then {
        /// The error, if any.
        pub error_message: Option<String>,
    }
}

message_struct! {
    /// A `toolResult` message.
    pub struct ToolResultMessage {
        /// The tool call it answers.
        pub tool_call_id: String,
        /// The tool.
        pub tool_name: String,
        /// The content.
        pub content: Content,
        /// Whether the tool failed.
        pub is_error: bool,
    } then {
        /// Opaque details.
        pub details: Option<Value>,
    }
}

message_struct! {
    /// A `system` message (pi).
    pub struct SystemMessage {
        /// The content.
        pub content: Content,
        /// The named sections.
        pub sections: Option<Value>,
        /// Tools added.
        pub tools_added: Option<Value>,
        /// Tools removed.
        pub tools_removed: Option<Value>,
    }
}

message_struct! {
    /// A `developer` message (omp).
    pub struct DeveloperMessage {
        /// The content.
        pub content: Content,
    }
}

message_struct! {
    /// A `bashExecution` message: a command the user ran.
    pub struct BashExecutionMessage {
        /// The command.
        pub command: String,
        /// Its output.
        pub output: String,
        /// The exit code (`Some(None)`: `null`).
        pub exit_code: Option<Option<f64>>,
        /// Whether it was cancelled.
        pub cancelled: bool,
        /// Whether the output was truncated.
        pub truncated: bool,
    } then {
        /// Where the full output is.
        pub full_output_path: Option<String>,
        /// Whether it stays out of the context.
        pub exclude_from_context: Option<bool>,
    }
}

message_struct! {
    /// A `custom` (or legacy `hookMessage`) message from an extension.
    pub struct CustomRoleMessage {
        /// The extension's type name.
        pub custom_type: String,
        /// The content.
        pub content: Content,
        /// Whether the UI shows it.
        pub display: bool,
        /// Opaque details.
        pub details: Option<Value>,
        /// omp: `user` or `agent`.
        pub attribution: Option<String>,
    }
}

message_struct! {
    /// A `branchSummary` message.
    pub struct BranchSummaryMessage {
        /// The summary.
        pub summary: String,
        /// The branch it summarises.
        pub from_id: String,
    }
}

message_struct! {
    /// A `compactionSummary` message.
    pub struct CompactionSummaryMessage {
        /// The summary.
        pub summary: String,
        /// omp: a short summary.
        pub short_summary: Option<String>,
        /// Tokens before compacting.
        pub tokens_before: f64,
        /// omp: tokens after compacting.
        pub tokens_after: Option<f64>,
        /// omp: the compaction method.
        pub method: Option<String>,
        /// omp: a provider's native payload.
        pub provider_payload: Option<Value>,
        /// omp: snapcompact blocks.
        pub blocks: Option<Value>,
        /// omp: images.
        pub images: Option<Value>,
        /// omp: a warning.
        pub warning: Option<String>,
        /// omp: when the history was rewritten (epoch ms).
        pub history_rewrite_at: Option<f64>,
    }
}

// ---------------------------------------------------------------------------------
// Content blocks

/// Declares a content block struct.
macro_rules! block_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident { $($body:tt)* }
    ) => {
        typed_struct! {
            $(#[$meta])*
            pub struct $name {
                $($body)*
                /// Keys this model does not know, in their order.
                #[serde(flatten)]
                pub extra: Extra,
            }
        }
    };
}

block_struct! {
    /// A `text` block.
    pub struct TextBlock {
        /// The text.
        pub text: String,
    }
}

block_struct! {
    /// An `image` block.
    pub struct ImageBlock {
        /// Base64 data (or a blob reference in omp).
        pub data: String,
        /// The MIME type.
        pub mime_type: String,
    }
}

block_struct! {
    /// A `thinking` block.
    pub struct ThinkingBlock {
        /// The reasoning text.
        pub thinking: String,
        /// The provider's signature.
        pub thinking_signature: Option<String>,
        /// Whether the provider redacted it.
        pub redacted: Option<bool>,
    }
}

block_struct! {
    /// A `redactedThinking` block (omp).
    pub struct RedactedThinkingBlock {
        /// The opaque data.
        pub data: String,
    }
}

block_struct! {
    /// A `toolCall` block.
    pub struct ToolCallBlock {
        /// The call id, answered by a `toolResult`'s `toolCallId`.
        pub id: String,
        /// The tool.
        pub name: String,
        /// The arguments.
        pub arguments: Value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str) -> Result<Entry, TypedError> {
        Record::parse(text).map_err(TypedError::from)?.entry()
    }

    #[test]
    fn errors_name_the_nested_field() {
        let e = entry(
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":1}]}}"#,
        );
        let Err(TypedError::Field { path, .. }) = e else { panic!("{e:?}") };
        assert_eq!(path, "message.content[0].text");
        let e = entry(r#"{"type":"session","version":3,"id":5}"#);
        let Err(TypedError::Field { path, .. }) = e else { panic!("{e:?}") };
        assert_eq!(path, "id");
    }

    /// Numbers keep exactly what a JavaScript number keeps: a typed entry writes the
    /// text `JSON.stringify(JSON.parse(line))` gives.
    #[test]
    fn numbers_are_javascript_numbers() -> Result<(), TypedError> {
        let text = r#"{"type":"compaction","id":"a","parentId":null,"timestamp":"t","summary":"s","firstKeptEntryId":"a","tokensBefore":12345678901234567890,"tokensAfter":0.30000000000000004,"details":{"n":9007199254740993,"f":1e21,"z":-0.0,"e":1E-7}}"#;
        let r = Record::parse(text)?;
        let Entry::Compaction(c) = r.entry()? else { panic!("a compaction") };
        assert_eq!((c.tokens_before, c.tokens_after), (12_345_678_901_234_567_890.0, Some(0.1 + 0.2)));
        assert_eq!(Record::from_entry(&Entry::Compaction(c)).text(), r.canonical_line());
        Ok(())
    }

    #[test]
    fn errors_within_a_larger_value_join_their_paths() {
        let e = TypedError::Field { path: "content[0].text".into(), message: "m".into() };
        assert_eq!(e.within("messages[3]").to_string(), "field `messages[3].content[0].text`: m");
        let e = TypedError::Field { path: ".".into(), message: "m".into() };
        assert_eq!(e.within("model").to_string(), "field `model`: m");
        let e = TypedError::Field { path: "[1]".into(), message: "m".into() };
        assert_eq!(e.within("injectedTtsrRules").to_string(), "field `injectedTtsrRules[1]`: m");
    }

    #[test]
    fn a_separator_inside_a_quoted_value_is_not_a_path() {
        let e = entry(r#"{"type":"message","message":{"role":"user","content":"x","timestamp":"\u001f\u001fb"}}"#);
        let Err(TypedError::Field { path, .. }) = e else { panic!("{e:?}") };
        assert_eq!(path, "message.timestamp");
    }

    #[test]
    fn null_only_where_nullable() {
        let e = entry(r#"{"type":"label","id":"a","parentId":null,"timestamp":"t","targetId":"b","label":null}"#);
        assert!(matches!(e, Err(TypedError::Field { ref path, .. }) if path == "label"), "{e:?}");
        let Ok(Entry::ThinkingLevelChange(t)) = entry(
            r#"{"type":"thinking_level_change","id":"a","parentId":"p","timestamp":"t","thinkingLevel":null,"configured":null}"#,
        ) else {
            panic!()
        };
        assert_eq!((t.thinking_level, t.configured), (Some(None), Some(None)));
    }

    #[test]
    fn unknown_kept_whole_and_custom_keeps_its_key_order() -> Result<(), TypedError> {
        let text = r#"{"type":"custom","customType":"ct","data":null,"id":"3c075b4d","parentId":"50b1c889","timestamp":"2026-11-29T19:11:36.574Z"}"#;
        let r = Record::parse(text)?;
        assert_eq!(Record::from_entry(&r.entry()?).text(), text);
        let text = r#"{"type":"future","id":"x","z":[1,2.5]}"#;
        let e = entry(text)?;
        assert!(matches!(e, Entry::Unknown(_)));
        assert_eq!(Record::from_entry(&e).text(), text);
        Ok(())
    }

    /// A JSON value of the shapes a message holds, its keys from a few names.
    fn json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let key = proptest::sample::select(vec!["type", "text", "name", "arguments", "id", "thinking", "role", "x"]);
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-3i64..3).prop_map(Value::from),
            proptest::sample::select(vec!["text", "toolCall", "thinking", "user", "a"]).prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 5, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec((key.clone(), inner), 0..5)
                    .prop_map(|kv| { Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()) }),
            ]
        })
    }

    proptest::proptest! {
        /// A value reads the same whether its keys are tracked or not, and a failure names
        /// the same key.
        #[test]
        fn a_value_reads_as_it_reads_with_its_keys_tracked(value in json()) {
            let tracked = |v: &Value| -> Result<Message, TypedError> {
                serde_path_to_error::deserialize(v).map_err(field_error)
            };
            proptest::prop_assert_eq!(format!("{:?}", from_value::<Message>(&value)), format!("{:?}", tracked(&value)));
            let blocks = Value::Object([("role".to_owned(), Value::from("assistant")), ("content".to_owned(), value)].into_iter().collect());
            proptest::prop_assert_eq!(format!("{:?}", from_value::<Message>(&blocks)), format!("{:?}", tracked(&blocks)));
        }
    }
}
