//! Builders for new records, with each reference's exact key order.
//!
//! Every builder returns a [`Record`] whose text is what the reference's
//! `JSON.stringify` writes for the same call: keys in the writer's insertion order,
//! optional fields omitted when absent (`None`), `null` written where the reference
//! writes `null`. Payloads (`message`, `data`, `details`, …) are taken as given.
//!
//! ```
//! use session_model::entries::{Base, pi};
//! let base = Base::new("3c075b4d", Some("50b1c889"), "2026-11-29T19:11:36.574Z");
//! let r = pi::custom(&base, "ct2", Some(serde_json::json!({"x": 1})));
//! assert_eq!(r.text(), r#"{"type":"custom","customType":"ct2","data":{"x":1},"id":"3c075b4d","parentId":"50b1c889","timestamp":"2026-11-29T19:11:36.574Z"}"#);
//! ```

use std::borrow::Cow;

use serde_json::Value;

use crate::record::Record;

/// The fields every entry has: `id`, `parentId` (`None` is `null`) and `timestamp`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Base {
    /// The new entry's id.
    pub id: String,
    /// The parent (the leaf before the append), `None` for a root.
    pub parent_id: Option<String>,
    /// ISO timestamp of the append.
    pub timestamp: String,
}

impl Base {
    /// Creates a base.
    pub fn new(id: impl Into<String>, parent_id: Option<&str>, timestamp: impl Into<String>) -> Base {
        Base { id: id.into(), parent_id: parent_id.map(str::to_owned), timestamp: timestamp.into() }
    }
}

/// An object under construction, keys kept in insertion order (a key set again keeps
/// its place, as in a JavaScript object). A few pairs in a vector: no hashing and no
/// map to build for the handful of keys an entry has.
#[derive(Default)]
struct Obj(Vec<(Cow<'static, str>, Value)>);

impl Obj {
    fn ty(ty: &str) -> Obj {
        let mut o = Obj(Vec::with_capacity(8));
        o.0.push(("type".into(), ty.into()));
        o
    }
    /// A version 3 header with its id.
    fn header(id: &str) -> Obj {
        Obj::ty("session").set("version", 3).set("id", id)
    }
    fn put(&mut self, k: Cow<'static, str>, v: Value) {
        match self.0.iter_mut().find(|(key, _)| *key == k) {
            Some(slot) => slot.1 = v,
            None => self.0.push((k, v)),
        }
    }
    fn set(mut self, k: &'static str, v: impl Into<Value>) -> Obj {
        self.put(Cow::Borrowed(k), v.into());
        self
    }
    fn opt(self, k: &'static str, v: Option<Value>) -> Obj {
        match v {
            Some(v) => self.set(k, v),
            None => self,
        }
    }
    fn base(self, b: &Base) -> Obj {
        let parent = b.parent_id.clone().map_or(Value::Null, Value::String);
        self.set("id", b.id.clone()).set("parentId", parent).set("timestamp", b.timestamp.clone())
    }
    /// Appends every field of `fields` (an object) in its order; other values are ignored.
    fn extend(mut self, fields: Value) -> Obj {
        if let Value::Object(m) = fields {
            for (k, v) in m {
                self.put(Cow::Owned(k), v);
            }
        }
        self
    }
    fn done(self) -> Record {
        Record::from_pairs(self.0.iter().map(|(k, v)| (k.as_ref(), v)))
    }
}

/// Writes `chars` with each run of characters `in_run` picks as one space, trimmed of
/// JavaScript whitespace (the agents' name and title cleaning).
fn collapse_runs(chars: impl Iterator<Item = char>, in_run: impl Fn(char) -> bool) -> String {
    let mut out = String::new();
    let mut prev = false;
    for c in chars {
        let run = in_run(c);
        if !(run && prev) {
            out.push(if run { ' ' } else { c });
        }
        prev = run;
    }
    out.trim_matches(crate::js_whitespace).to_owned()
}

/// Header and entry builders with pi 1.6's key orders (pi spec §1.3, §1.4).
pub mod pi {
    use super::*;

    /// `{type, version:3, id, timestamp, cwd, parentSession?}`.
    pub fn header(id: &str, timestamp: &str, cwd: &str, parent_session: Option<&str>) -> Record {
        Obj::header(id)
            .set("timestamp", timestamp)
            .set("cwd", cwd)
            .opt("parentSession", parent_session.map(Value::from))
            .done()
    }

    /// `message`: `type, id, parentId, timestamp, message`.
    pub fn message(b: &Base, message: Value) -> Record {
        Obj::ty("message").base(b).set("message", message).done()
    }

    /// `thinking_level_change`: `…, thinkingLevel`.
    pub fn thinking_level_change(b: &Base, level: &str) -> Record {
        Obj::ty("thinking_level_change").base(b).set("thinkingLevel", level).done()
    }

    /// `model_change`: `…, provider, modelId`.
    pub fn model_change(b: &Base, provider: &str, model_id: &str) -> Record {
        Obj::ty("model_change").base(b).set("provider", provider).set("modelId", model_id).done()
    }

    /// `usage`: `…, kind, provider, model, usage, note?` (`note` only when non-empty).
    pub fn usage(b: &Base, kind: &str, provider: &str, model: &str, usage: Value, note: Option<&str>) -> Record {
        Obj::ty("usage")
            .base(b)
            .set("kind", kind)
            .set("provider", provider)
            .set("model", model)
            .set("usage", usage)
            .opt("note", note.filter(|n| !n.is_empty()).map(Value::from))
            .done()
    }

    /// The optional fields of a pi compaction.
    #[derive(Clone, Debug, Default)]
    pub struct CompactionExtra {
        /// `details`.
        pub details: Option<Value>,
        /// `usage`.
        pub usage: Option<Value>,
        /// `fromHook`.
        pub from_hook: Option<bool>,
        /// `systemMessage` snapshot.
        pub system_message: Option<Value>,
    }

    /// `compaction`: `…, summary, firstKeptEntryId, tokensBefore, details?, usage?, fromHook?, systemMessage?`.
    pub fn compaction(b: &Base, summary: &str, first_kept: &str, tokens_before: Value, x: CompactionExtra) -> Record {
        Obj::ty("compaction")
            .base(b)
            .set("summary", summary)
            .set("firstKeptEntryId", first_kept)
            .set("tokensBefore", tokens_before)
            .opt("details", x.details)
            .opt("usage", x.usage)
            .opt("fromHook", x.from_hook.map(Value::from))
            .opt("systemMessage", x.system_message)
            .done()
    }

    /// `custom`: **`type, customType, data?, id, parentId, timestamp`**.
    pub fn custom(b: &Base, custom_type: &str, data: Option<Value>) -> Record {
        Obj::ty("custom").set("customType", custom_type).opt("data", data).base(b).done()
    }

    /// `session_info`: `…, name` (the caller sanitises, see [`sanitize_session_name`]).
    pub fn session_info(b: &Base, name: &str) -> Record {
        Obj::ty("session_info").base(b).set("name", name).done()
    }

    /// `custom_message`: **`type, customType, content, display, details?, id, parentId, timestamp`**.
    pub fn custom_message(
        b: &Base,
        custom_type: &str,
        content: Value,
        display: bool,
        details: Option<Value>,
    ) -> Record {
        Obj::ty("custom_message")
            .set("customType", custom_type)
            .set("content", content)
            .set("display", display)
            .opt("details", details)
            .base(b)
            .done()
    }

    /// `context_edit`: `…, targetId, replacement` (`null` or `{content}`).
    pub fn context_edit(b: &Base, target_id: &str, replacement: Value) -> Record {
        Obj::ty("context_edit").base(b).set("targetId", target_id).set("replacement", replacement).done()
    }

    /// `label`: `…, targetId, label?` (`None` clears and omits the key).
    pub fn label(b: &Base, target_id: &str, label: Option<&str>) -> Record {
        Obj::ty("label").base(b).set("targetId", target_id).opt("label", label.map(Value::from)).done()
    }

    /// `branch_summary`: `…, fromId, summary, details?, usage?, fromHook?`.
    pub fn branch_summary(
        b: &Base,
        from_id: &str,
        summary: &str,
        details: Option<Value>,
        usage: Option<Value>,
        from_hook: Option<bool>,
    ) -> Record {
        Obj::ty("branch_summary")
            .base(b)
            .set("fromId", from_id)
            .set("summary", summary)
            .opt("details", details)
            .opt("usage", usage)
            .opt("fromHook", from_hook.map(Value::from))
            .done()
    }

    /// Sanitises a session name as pi does: each run of `\r`/`\n` becomes one space,
    /// then the result is trimmed.
    ///
    /// ```
    /// assert_eq!(session_model::entries::pi::sanitize_session_name("  My\nname\r\n x "), "My name  x");
    /// ```
    pub fn sanitize_session_name(name: &str) -> String {
        super::collapse_runs(name.chars(), |c| c == '\r' || c == '\n')
    }
}

/// Header and entry builders with omp 18.3.4's key orders (omp spec §1.8, §1.9).
pub mod omp {
    use super::*;

    /// The optional header fields of a new omp session.
    #[derive(Clone, Debug, Default)]
    pub struct HeaderExtra {
        /// `parentSession`.
        pub parent_session: Option<String>,
        /// `providerPromptCacheKey`.
        pub provider_prompt_cache_key: Option<String>,
        /// `additionalDirectories` (omitted when empty).
        pub additional_directories: Vec<String>,
    }

    /// A new session's header: `type, version, id, timestamp, cwd, parentSession?,
    /// providerPromptCacheKey?, additionalDirectories?`.
    pub fn header(id: &str, timestamp: &str, cwd: &str, x: HeaderExtra) -> Record {
        let dirs = (!x.additional_directories.is_empty()).then(|| Value::from(x.additional_directories));
        Obj::header(id)
            .set("timestamp", timestamp)
            .set("cwd", cwd)
            .opt("parentSession", x.parent_session.map(Value::from))
            .opt("providerPromptCacheKey", x.provider_prompt_cache_key.map(Value::from))
            .opt("additionalDirectories", dirs)
            .done()
    }

    /// The header of a session branched off `from` (`createBranchedSession`): `type,
    /// version, id, timestamp, cwd, title?, titleSource?, parentSession?,
    /// additionalDirectories?`, the title and the extra directories carried from
    /// `from` as they are; `parent_session` is the old file when it was persisted.
    pub fn branch_header(id: &str, timestamp: &str, cwd: &str, from: &Record, parent_session: Option<&str>) -> Record {
        Obj::header(id)
            .set("timestamp", timestamp)
            .set("cwd", cwd)
            .opt("title", from.get("title").cloned())
            .opt("titleSource", from.get("titleSource").cloned())
            .opt("parentSession", parent_session.map(Value::from))
            .opt("additionalDirectories", from.get("additionalDirectories").cloned())
            .done()
    }

    /// The header of `fork()`, the session continued in place under a new id: `type,
    /// version, id, title?, titleSource?, timestamp, cwd, additionalDirectories?,
    /// parentSession, providerPromptCacheKey`. `parentSession` is `from`'s id, and the
    /// prompt cache key is `from`'s own or else its id.
    pub fn fork_header(id: &str, timestamp: &str, cwd: &str, from: &Record) -> Record {
        let old_id = from.id().unwrap_or_default();
        let key = from.get_str("providerPromptCacheKey").unwrap_or(old_id);
        Obj::header(id)
            .opt("title", from.get("title").cloned())
            .opt("titleSource", from.get("titleSource").cloned())
            .set("timestamp", timestamp)
            .set("cwd", cwd)
            .opt("additionalDirectories", from.get("additionalDirectories").cloned())
            .set("parentSession", old_id)
            .set("providerPromptCacheKey", key)
            .done()
    }

    /// The header of `forkFrom(source, cwd)`, a copy of another session for `cwd`:
    /// `type, version, id, timestamp, cwd, parentSession?, providerPromptCacheKey?,
    /// title?, titleSource?, additionalDirectories?`. Without a source header (omp
    /// forks an invalid source as an empty one) nothing is carried; otherwise
    /// `parentSession` is its id, the cache key its own or else its id, and the extra
    /// directories its array without `cwd` (left out when nothing remains).
    pub fn fork_from_header(id: &str, timestamp: &str, cwd: &str, from: Option<&Record>) -> Record {
        let get = |k: &str| from.and_then(|f| f.get(k)).cloned();
        let parent = from.map(|f| f.id().unwrap_or_default());
        let key = from.map(|f| f.get_str("providerPromptCacheKey").unwrap_or(f.id().unwrap_or_default()));
        let dirs = match get("additionalDirectories") {
            Some(Value::Array(dirs)) => {
                let dirs: Vec<Value> = dirs.into_iter().filter(|d| d.as_str() != Some(cwd)).collect();
                (!dirs.is_empty()).then_some(Value::Array(dirs))
            }
            _ => None,
        };
        Obj::header(id)
            .set("timestamp", timestamp)
            .set("cwd", cwd)
            .opt("parentSession", parent.map(Value::from))
            .opt("providerPromptCacheKey", key.map(Value::from))
            .opt("title", get("title"))
            .opt("titleSource", get("titleSource"))
            .opt("additionalDirectories", dirs)
            .done()
    }

    /// `message`: `type, id, parentId, timestamp, message`.
    pub fn message(b: &Base, message: Value) -> Record {
        super::pi::message(b, message)
    }

    /// `thinking_level_change`: `…, thinkingLevel, configured` (`null` when not given).
    pub fn thinking_level_change(b: &Base, level: Option<&str>, configured: Option<&str>) -> Record {
        Obj::ty("thinking_level_change")
            .base(b)
            .set("thinkingLevel", level.map_or(Value::Null, Value::from))
            .set("configured", configured.map_or(Value::Null, Value::from))
            .done()
    }

    /// `model_change`: `…, model, role?, resolvedModelIsFallback`.
    pub fn model_change(b: &Base, model: &str, role: Option<&str>, is_fallback: bool) -> Record {
        Obj::ty("model_change")
            .base(b)
            .set("model", model)
            .opt("role", role.map(Value::from))
            .set("resolvedModelIsFallback", is_fallback)
            .done()
    }

    /// `service_tier_change`: `…, serviceTier` (a per-family map or `null`).
    pub fn service_tier_change(b: &Base, tier: Value) -> Record {
        Obj::ty("service_tier_change").base(b).set("serviceTier", tier).done()
    }

    /// The optional fields of an omp compaction.
    #[derive(Clone, Debug, Default)]
    pub struct CompactionExtra {
        /// `shortSummary`.
        pub short_summary: Option<String>,
        /// `tokensAfter`.
        pub tokens_after: Option<Value>,
        /// `method` (`snapcompact`, `handoff`, …).
        pub method: Option<String>,
        /// `providerReplayThroughEntryId`.
        pub provider_replay_through_entry_id: Option<String>,
        /// `details`.
        pub details: Option<Value>,
        /// `fromExtension`.
        pub from_extension: Option<bool>,
        /// `preserveData`.
        pub preserve_data: Option<Value>,
    }

    /// `compaction`: `…, summary, shortSummary?, firstKeptEntryId, tokensBefore, tokensAfter?,
    /// method?, providerReplayThroughEntryId?, details?, fromExtension?, preserveData?`.
    pub fn compaction(b: &Base, summary: &str, first_kept: &str, tokens_before: Value, x: CompactionExtra) -> Record {
        Obj::ty("compaction")
            .base(b)
            .set("summary", summary)
            .opt("shortSummary", x.short_summary.map(Value::from))
            .set("firstKeptEntryId", first_kept)
            .set("tokensBefore", tokens_before)
            .opt("tokensAfter", x.tokens_after)
            .opt("method", x.method.map(Value::from))
            .opt("providerReplayThroughEntryId", x.provider_replay_through_entry_id.map(Value::from))
            .opt("details", x.details)
            .opt("fromExtension", x.from_extension.map(Value::from))
            .opt("preserveData", x.preserve_data)
            .done()
    }

    /// `branch_summary`: `…, fromId, summary, details?, fromExtension?`.
    pub fn branch_summary(
        b: &Base,
        from_id: &str,
        summary: &str,
        details: Option<Value>,
        from_extension: Option<bool>,
    ) -> Record {
        Obj::ty("branch_summary")
            .base(b)
            .set("fromId", from_id)
            .set("summary", summary)
            .opt("details", details)
            .opt("fromExtension", from_extension.map(Value::from))
            .done()
    }

    /// `reset_boundary`: the base fields only.
    pub fn reset_boundary(b: &Base) -> Record {
        Obj::ty("reset_boundary").base(b).done()
    }

    /// `custom`: **`type, customType, data?, id, parentId, timestamp`**.
    pub fn custom(b: &Base, custom_type: &str, data: Option<Value>) -> Record {
        super::pi::custom(b, custom_type, data)
    }

    /// `custom_message`: **`type, customType, content, display, details?, attribution,
    /// id, parentId, timestamp`**, normalised as omp's `appendCustomMessageEntry` does
    /// (empty type → `custom-message`, non-string/array content → `""`, attribution
    /// `user` or `agent`, `details.__queueChipText` removed). `timestamp` in `b` may be
    /// the initiating message's time.
    pub fn custom_message(
        b: &Base,
        custom_type: &str,
        content: Value,
        display: bool,
        details: Option<Value>,
        attribution: Option<&str>,
    ) -> Record {
        let custom_type = if custom_type.is_empty() { "custom-message" } else { custom_type };
        let content = match content {
            c @ (Value::String(_) | Value::Array(_)) => c,
            _ => Value::from(""),
        };
        let details = details.map(|d| match d {
            Value::Object(mut m) => {
                m.shift_remove("__queueChipText");
                Value::Object(m)
            }
            other => other,
        });
        let attribution = if attribution == Some("user") { "user" } else { "agent" };
        Obj::ty("custom_message")
            .set("customType", custom_type)
            .set("content", content)
            .set("display", display)
            .opt("details", details)
            .set("attribution", attribution)
            .base(b)
            .done()
    }

    /// `label`: `…, targetId, label?`.
    pub fn label(b: &Base, target_id: &str, label: Option<&str>) -> Record {
        super::pi::label(b, target_id, label)
    }

    /// `title_change`: `…, title, source, previousTitle?, trigger?`.
    pub fn title_change(b: &Base, title: &str, source: &str, previous: Option<&str>, trigger: Option<&str>) -> Record {
        Obj::ty("title_change")
            .base(b)
            .set("title", title)
            .set("source", source)
            .opt("previousTitle", previous.map(Value::from))
            .opt("trigger", trigger.map(Value::from))
            .done()
    }

    /// `ttsr_injection`: `…, injectedRules`.
    pub fn ttsr_injection(b: &Base, rules: &[String]) -> Record {
        Obj::ty("ttsr_injection").base(b).set("injectedRules", rules.to_vec()).done()
    }

    /// `credential_pin`: `…, provider, hash`.
    pub fn credential_pin(b: &Base, provider: &str, hash: &str) -> Record {
        Obj::ty("credential_pin").base(b).set("provider", provider).set("hash", hash).done()
    }

    /// `session_init`: the base fields, then the caller's fields in their order.
    pub fn session_init(b: &Base, init: Value) -> Record {
        Obj::ty("session_init").base(b).extend(init).done()
    }

    /// `model_usage`: the base fields, then the caller's fields in their order.
    pub fn model_usage(b: &Base, usage: Value) -> Record {
        Obj::ty("model_usage").base(b).extend(usage).done()
    }

    /// `mode_change`: `…, mode, data?`.
    pub fn mode_change(b: &Base, mode: &str, data: Option<Value>) -> Record {
        Obj::ty("mode_change").base(b).set("mode", mode).opt("data", data).done()
    }

    /// Cleans a title as omp's `setSessionName` does: C0/C1 controls become spaces,
    /// runs of spaces collapse, and the result is trimmed.
    pub fn sanitize_title(name: &str) -> String {
        super::collapse_runs(name.chars().map(|c| if c.is_control() { ' ' } else { c }), |c| c == ' ')
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b() -> Base {
        Base::new("5312256e", Some("69246c9d"), "2026-11-29T19:11:36.576Z")
    }

    #[test]
    fn pi_examples_from_the_spec() {
        let r = pi::compaction(
            &b(),
            "sum2",
            "5312256e",
            json!(100),
            pi::CompactionExtra {
                details: Some(json!({"readFiles": []})),
                usage: Some(json!({"input": 1})),
                from_hook: Some(true),
                system_message: None,
            },
        );
        assert_eq!(
            r.text(),
            r#"{"type":"compaction","id":"5312256e","parentId":"69246c9d","timestamp":"2026-11-29T19:11:36.576Z","summary":"sum2","firstKeptEntryId":"5312256e","tokensBefore":100,"details":{"readFiles":[]},"usage":{"input":1},"fromHook":true}"#
        );
        let r = pi::branch_summary(
            &Base::new("442920bd", None, "2026-11-29T19:11:36.576Z"),
            "b9a67189",
            "bs2",
            None,
            None,
            Some(false),
        );
        assert_eq!(
            r.text(),
            r#"{"type":"branch_summary","id":"442920bd","parentId":null,"timestamp":"2026-11-29T19:11:36.576Z","fromId":"b9a67189","summary":"bs2","fromHook":false}"#
        );
        let r = pi::usage(&b(), "cache_warm", "p", "m", json!({"input": 0}), Some(""));
        assert!(!r.text().contains("note"));
        let r = pi::header("01a228b8-4c7c-76cb-a832-5e080bf33da5", "2026-11-29T19:11:36.572Z", "/home/user/proj", None);
        assert_eq!(
            r.text(),
            r#"{"type":"session","version":3,"id":"01a228b8-4c7c-76cb-a832-5e080bf33da5","timestamp":"2026-11-29T19:11:36.572Z","cwd":"/home/user/proj"}"#
        );
    }

    #[test]
    fn omp_orders() {
        let r = omp::thinking_level_change(&b(), None, None);
        assert!(r.text().ends_with(r#""thinkingLevel":null,"configured":null}"#));
        let r = omp::custom_message(&b(), "", json!(5), true, Some(json!({"__queueChipText": "x", "k": 1})), None);
        assert_eq!(
            r.text(),
            r#"{"type":"custom_message","customType":"custom-message","content":"","display":true,"details":{"k":1},"attribution":"agent","id":"5312256e","parentId":"69246c9d","timestamp":"2026-11-29T19:11:36.576Z"}"#
        );
        assert_eq!(omp::sanitize_title("  a\u{1}\u{85}  b  "), "a b");
    }
}
