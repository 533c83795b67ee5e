//! The typed model context: what the agent's `buildSessionContext` returns at a
//! leaf, as plain Rust values.
//!
//! `session-tree` projects the context as JSON text ([`session_tree::pi::build_context`],
//! [`session_tree::omp::build_context`]), byte-compatible with the references. This
//! module reads that projection into [`Context`]: the messages as
//! [`session_model::typed::Message`] values and the settings of the session's dialect.
//! [`Context::to_json`] writes it back in the reference's shape.

use serde_json::{Map, Value};
use session_model::typed::{Message, ServiceTier, TypedError, parse_json};
use session_model::{Dialect, EntryType, json};
use session_tree::{Leaf, omp, pi};

use crate::{SessionError, SessionManager};

/// The model context at a leaf: the messages the model sees and the settings the
/// projection replays over the path.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Context {
    /// The messages, in order.
    pub messages: Vec<Message>,
    /// The settings of the session's dialect.
    pub settings: ContextSettings,
}

/// The settings a context carries besides its messages, by dialect.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ContextSettings {
    /// pi's `thinkingLevel` and `model`.
    Pi(PiSettings),
    /// omp's thinking levels, service tier, model roles, rules and mode.
    Omp(OmpSettings),
}

/// pi's context settings (`getSessionContextSettings`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct PiSettings {
    /// `thinkingLevel`: `"off"` without a change on the path; `None` when the latest
    /// change has no `thinkingLevel` key, `Some(None)` when it is `null`.
    pub thinking_level: Option<Option<String>>,
    /// `model`: from the latest `model_change` or assistant message (`None`: `null`).
    pub model: Option<ModelRef>,
}

/// pi's `{provider, modelId}` (each `None` when the source had no such key).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelRef {
    /// The provider.
    pub provider: Option<String>,
    /// The model id.
    pub model_id: Option<String>,
}

/// omp's context settings (the derived state of `buildSessionContext`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct OmpSettings {
    /// `thinkingLevel` (`"off"` without a change on the path).
    pub thinking_level: String,
    /// `configuredThinkingLevel`: the latest change's selector, else its level.
    pub configured_thinking_level: Option<String>,
    /// `serviceTier`, normalised per family.
    pub service_tier: Option<ServiceTier>,
    /// `models`: model role to `provider/modelId`, in the order roles were first set.
    pub models: Vec<(String, String)>,
    /// `injectedTtsrRules`: every injected rule, first-seen order.
    pub injected_ttsr_rules: Vec<String>,
    /// `mode` (`"none"` without a change; `None` when the latest change had no `mode`).
    pub mode: Option<String>,
    /// `modeData`: the latest mode change's `data`.
    pub mode_data: Option<Value>,
}

impl Context {
    /// Returns the dialect whose projection this context is.
    pub fn dialect(&self) -> Dialect {
        match self.settings {
            ContextSettings::Pi(_) => Dialect::Pi,
            ContextSettings::Omp(_) => Dialect::Omp,
        }
    }

    /// Returns the thinking level, when it is a string.
    pub fn thinking_level(&self) -> Option<&str> {
        match &self.settings {
            ContextSettings::Pi(s) => s.thinking_level.as_ref().and_then(Option::as_deref),
            ContextSettings::Omp(s) => Some(&s.thinking_level),
        }
    }

    /// Returns the context as the reference serialises it: pi's `{messages,
    /// thinkingLevel, model}` or omp's `{messages, thinkingLevel,
    /// configuredThinkingLevel?, serviceTier?, models, injectedTtsrRules, mode,
    /// modeData?}`.
    pub fn to_json(&self) -> String {
        let mut out = Map::new();
        out.insert("messages".into(), Value::Array(self.messages.iter().map(Message::to_value).collect()));
        let string = |s: &str| Value::String(s.to_owned());
        match &self.settings {
            ContextSettings::Pi(s) => {
                if let Some(level) = &s.thinking_level {
                    out.insert("thinkingLevel".into(), level.as_deref().map_or(Value::Null, string));
                }
                let model = s.model.as_ref().map_or(Value::Null, |m| {
                    let mut o = Map::new();
                    if let Some(p) = &m.provider {
                        o.insert("provider".into(), string(p));
                    }
                    if let Some(id) = &m.model_id {
                        o.insert("modelId".into(), string(id));
                    }
                    Value::Object(o)
                });
                out.insert("model".into(), model);
            }
            ContextSettings::Omp(s) => {
                out.insert("thinkingLevel".into(), string(&s.thinking_level));
                if let Some(c) = &s.configured_thinking_level {
                    out.insert("configuredThinkingLevel".into(), string(c));
                }
                if let Some(tier) = &s.service_tier {
                    let tier = match tier {
                        ServiceTier::Legacy(t) => string(t),
                        ServiceTier::ByFamily(m) => Value::Object(m.clone()),
                    };
                    out.insert("serviceTier".into(), tier);
                }
                let models = s.models.iter().map(|(role, model)| (role.clone(), string(model))).collect();
                out.insert("models".into(), Value::Object(models));
                out.insert(
                    "injectedTtsrRules".into(),
                    Value::Array(s.injected_ttsr_rules.iter().map(|r| string(r)).collect()),
                );
                if let Some(mode) = &s.mode {
                    out.insert("mode".into(), string(mode));
                }
                if let Some(data) = &s.mode_data {
                    out.insert("modeData".into(), data.clone());
                }
            }
        }
        json::to_js_string(&Value::Object(out))
    }
}

/// Reads the setting `$name` of type `$ty` from its JSON text (`Option<&str>` with
/// `optional`), naming it on error.
macro_rules! setting {
    (optional $text:expr, $name:literal, $ty:ty) => {
        $text.map(|t| setting!(t, $name, $ty)).transpose()
    };
    ($text:expr, $name:literal, $ty:ty) => {
        parse_json::<$ty>($text).map_err(|e| e.within($name))
    };
}

impl SessionManager {
    /// Returns the model context at the current leaf, typed (see [`Context`]).
    ///
    /// Fails when a message or setting holds a value of an unexpected JSON type; the
    /// error names it (`messages[2].content`). The JSON projection of `session-tree`
    /// reads such files as the agent does.
    ///
    /// ```
    /// use serde_json::json;
    /// use session::model::typed::{Content, Message};
    /// use session::{ContextSettings, Dialect, Env, SessionManager};
    ///
    /// let mut m = SessionManager::in_memory(Dialect::Pi, "/p", Env::memory());
    /// m.append_message_json(json!({"role": "user", "content": "hi", "timestamp": 1}))?;
    /// m.append_thinking_level_change(Some("high"), None)?;
    /// let ctx = m.context()?;
    /// assert!(matches!(&ctx.messages[0], Message::User(u) if u.content == Content::Text("hi".into())));
    /// assert_eq!(ctx.thinking_level(), Some("high"));
    /// assert!(matches!(ctx.settings, ContextSettings::Pi(ref s) if s.model.is_none()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn context(&self) -> Result<Context, SessionError> {
        self.context_at(Leaf::Current)
    }

    /// Returns the model context at `leaf`, typed (an unknown id falls back to the
    /// last entry, [`Leaf::Null`] gives the empty context, as the references do).
    ///
    /// ```
    /// use serde_json::json;
    /// use session::{Dialect, Env, Leaf, SessionManager};
    ///
    /// let mut m = SessionManager::in_memory(Dialect::Omp, "/p", Env::memory());
    /// let first = m.append_message_json(json!({"role": "user", "content": "one", "timestamp": 1}))?;
    /// m.append_message_json(json!({"role": "user", "content": "two", "timestamp": 2}))?;
    /// assert_eq!(m.context_at(Leaf::Id(&first))?.messages.len(), 1);
    /// assert_eq!(m.context_at(Leaf::Null)?.messages.len(), 0);
    /// assert_eq!(m.context()?.messages.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn context_at(&self, leaf: Leaf<'_>) -> Result<Context, SessionError> {
        self.read_for_context(leaf, false)?;
        let context = self.typed_context(leaf);
        self.check_reads()?;
        Ok(context?)
    }

    /// Returns the model context at `leaf` as the reference's JSON text, byte for byte
    /// (pi: `{messages, thinkingLevel, model}`; omp: `{messages, thinkingLevel, …}`,
    /// and with `transcript` omp's display transcript with `cacheMissExplainedAt`).
    ///
    /// ```
    /// use serde_json::json;
    /// use session::{Dialect, Env, Leaf, SessionManager};
    ///
    /// let mut m = SessionManager::in_memory(Dialect::Pi, "/p", Env::memory());
    /// m.append_message_json(json!({"role": "user", "content": "hi", "timestamp": 1}))?;
    /// assert_eq!(
    ///     m.context_json(Leaf::Current, false)?,
    ///     r#"{"messages":[{"role":"user","content":"hi","timestamp":1}],"thinkingLevel":"off","model":null}"#
    /// );
    /// # Ok::<(), session::SessionError>(())
    /// ```
    pub fn context_json(&self, leaf: Leaf<'_>, transcript: bool) -> Result<String, SessionError> {
        self.read_for_context(leaf, transcript)?;
        let json = match self.dialect() {
            Dialect::Pi => pi::build_context(self.tree(), leaf).to_json_string(),
            Dialect::Omp => omp::build_context(self.tree(), leaf, omp::ContextOptions { transcript }).to_json_string(),
        };
        self.check_reads()?;
        Ok(json)
    }

    /// Returns pi's projection at `leaf` (`buildSessionProjection`: each context entry
    /// with the messages it contributes) as the reference's JSON text; omp has none
    /// ([`SessionError::WrongDialect`]).
    pub fn projection_json(&self, leaf: Leaf<'_>) -> Result<String, SessionError> {
        if self.dialect() != Dialect::Pi {
            return Err(crate::manager::wrong_dialect("buildSessionProjection", self.dialect()));
        }
        self.read_for_context(leaf, false)?;
        let json = pi::build_projection(self.tree(), leaf).to_json_string();
        self.check_reads()?;
        Ok(json)
    }

    /// Reads into memory, in few reads, the texts a context at `leaf` reads for sure:
    /// the path after its last compaction or reset (the whole path for a transcript).
    /// What else the projection reads (a compaction's kept range) is read as it goes.
    fn read_for_context(&self, leaf: Leaf<'_>, whole: bool) -> Result<(), SessionError> {
        let path = self.tree().path(leaf);
        let from = if whole {
            0
        } else {
            path.iter()
                .rposition(|r| matches!(r.entry_type(), EntryType::Compaction | EntryType::ResetBoundary))
                .unwrap_or(0)
        };
        self.load_texts(path[from..].iter().copied())
    }

    /// The typed context at `leaf`, from the projection (texts read as it goes).
    fn typed_context(&self, leaf: Leaf<'_>) -> Result<Context, TypedError> {
        match self.dialect() {
            Dialect::Pi => {
                let ctx = pi::build_context(self.tree(), leaf);
                let settings = PiSettings {
                    thinking_level: setting!(optional ctx.thinking_level_json(), "thinkingLevel", Option<String>)?,
                    model: model_ref(ctx.model_json())?,
                };
                Ok(Context { messages: messages(ctx.messages())?, settings: ContextSettings::Pi(settings) })
            }
            Dialect::Omp => {
                let ctx = omp::build_context(self.tree(), leaf, omp::ContextOptions::default());
                let settings = OmpSettings {
                    thinking_level: setting!(ctx.thinking_level_json().unwrap_or("\"off\""), "thinkingLevel", String)?,
                    configured_thinking_level: setting!(
                        optional ctx.configured_thinking_level_json(),
                        "configuredThinkingLevel",
                        String
                    )?,
                    service_tier: setting!(optional ctx.service_tier_json(), "serviceTier", ServiceTier)?,
                    models: setting!(ctx.models_json(), "models", Map<String, Value>)?
                        .into_iter()
                        .map(|(role, model)| match model {
                            Value::String(m) => Ok((role, m)),
                            other => Err(TypedError::Field {
                                path: format!("models.{role}"),
                                message: format!("invalid type: {other}, expected a string"),
                            }),
                        })
                        .collect::<Result<_, _>>()?,
                    injected_ttsr_rules: setting!(ctx.injected_ttsr_rules_json(), "injectedTtsrRules", Vec<String>)?,
                    mode: setting!(optional ctx.mode_json(), "mode", String)?,
                    mode_data: setting!(optional ctx.mode_data_json(), "modeData", Value)?,
                };
                Ok(Context { messages: messages(ctx.messages())?, settings: ContextSettings::Omp(settings) })
            }
        }
    }
}

/// Reads the messages' JSON texts.
fn messages<'a>(texts: impl Iterator<Item = &'a str>) -> Result<Vec<Message>, TypedError> {
    texts.enumerate().map(|(i, text)| parse_json(text).map_err(|e| e.within(&format!("messages[{i}]")))).collect()
}

/// Reads pi's `model`: `null` or `{provider?, modelId?}`.
fn model_ref(text: &str) -> Result<Option<ModelRef>, TypedError> {
    let Some(map) = setting!(text, "model", Option<Map<String, Value>>)? else {
        return Ok(None);
    };
    let string = |key: &str| match map.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(TypedError::Field {
            path: format!("model.{key}"),
            message: format!("invalid type: {other}, expected a string"),
        }),
    };
    Ok(Some(ModelRef { provider: string("provider")?, model_id: string("modelId")? }))
}
