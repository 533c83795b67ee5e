//! The typed `append_*` methods of [`SessionManager`], one per entry type of both
//! dialects. Each builds its record with the dialect's exact key order, attaches it to
//! the leaf, persists it by the dialect's rules and returns the new entry's id.

use std::path::Path;

use serde_json::Value;
use session_model::entries::{self, Base};
use session_model::ids::EntryId;
use session_model::typed::Content;
use session_model::{Dialect, Record};

use crate::{SessionError, SessionManager};

type Result<T> = std::result::Result<T, SessionError>;

/// Optional fields of a compaction, covering both dialects (fields a dialect does not
/// write are ignored).
#[derive(Clone, Debug, Default)]
pub struct CompactionOptions {
    /// `details` (pi's own: `{readFiles, modifiedFiles}`).
    pub details: Option<Value>,
    /// pi: `usage` of the summarising call.
    pub usage: Option<Value>,
    /// pi: `fromHook` (`true` for extension compactions).
    pub from_hook: Option<bool>,
    /// omp: `shortSummary`.
    pub short_summary: Option<String>,
    /// omp: `tokensAfter`.
    pub tokens_after: Option<Value>,
    /// omp: `method`.
    pub method: Option<String>,
    /// omp: `providerReplayThroughEntryId`.
    pub provider_replay_through_entry_id: Option<String>,
    /// omp: `fromExtension`.
    pub from_extension: Option<bool>,
    /// omp: `preserveData`.
    pub preserve_data: Option<Value>,
}

impl SessionManager {
    /// Appends a `thinking_level_change` (omp also records the user's `configured`
    /// selector; both are written as `null` when absent).
    pub fn append_thinking_level_change(&mut self, level: Option<&str>, configured: Option<&str>) -> Result<EntryId> {
        match self.dialect() {
            Dialect::Pi => {
                let level = level.unwrap_or("off").to_owned();
                self.append_with(|b| entries::pi::thinking_level_change(b, &level))
            }
            Dialect::Omp => self.append_with(|b| entries::omp::thinking_level_change(b, level, configured)),
        }
    }

    /// Appends a `compaction`. pi: a `None` `first_kept_entry_id` stores the entry's
    /// own id ("retain none"), and the current system-message snapshot is recorded.
    pub fn append_compaction(
        &mut self,
        summary: &str,
        first_kept_entry_id: Option<&str>,
        tokens_before: Value,
        opts: CompactionOptions,
    ) -> Result<EntryId> {
        match self.dialect() {
            Dialect::Pi => {
                let snapshot = self.system_snapshot();
                self.append_with(|b| {
                    let system_message = snapshot.map(|mut s| {
                        let ms = session_model::timestamp::parse_iso_millis(&b.timestamp);
                        if let Value::Object(m) = &mut s {
                            m.insert("timestamp".into(), ms.map_or(Value::Null, Value::from));
                        }
                        s
                    });
                    let first_kept = first_kept_entry_id.unwrap_or(&b.id).to_owned();
                    entries::pi::compaction(
                        b,
                        summary,
                        &first_kept,
                        tokens_before,
                        entries::pi::CompactionExtra {
                            details: opts.details,
                            usage: opts.usage,
                            from_hook: opts.from_hook,
                            system_message,
                        },
                    )
                })
            }
            Dialect::Omp => {
                let first_kept = first_kept_entry_id.unwrap_or_default().to_owned();
                self.append_with(|b| {
                    entries::omp::compaction(
                        b,
                        summary,
                        &first_kept,
                        tokens_before,
                        entries::omp::CompactionExtra {
                            short_summary: opts.short_summary,
                            tokens_after: opts.tokens_after,
                            method: opts.method,
                            provider_replay_through_entry_id: opts.provider_replay_through_entry_id,
                            details: opts.details,
                            from_extension: opts.from_extension,
                            preserve_data: opts.preserve_data,
                        },
                    )
                })
            }
        }
    }

    /// Appends a `custom_message` (an extension message that the model sees). omp
    /// normalises the payload and records `attribution` (default `agent`).
    pub fn append_custom_message_entry(
        &mut self,
        custom_type: &str,
        content: impl Into<Content>,
        display: bool,
        details: Option<Value>,
        attribution: Option<&str>,
    ) -> Result<EntryId> {
        let content = content.into().to_value()?;
        match self.dialect() {
            Dialect::Pi => self.append_with(|b| entries::pi::custom_message(b, custom_type, content, display, details)),
            Dialect::Omp => self
                .append_with(|b| entries::omp::custom_message(b, custom_type, content, display, details, attribution)),
        }
    }

    /// Sets the session name. pi appends a `session_info` (newline runs become spaces,
    /// trimmed; `""` clears). omp appends a `title_change`, updates the header title and
    /// the title slot, and returns `None` when the name is refused (empty after
    /// cleaning, or an automatic name over a user's).
    pub fn set_session_name(&mut self, name: &str, source: Option<&str>) -> Result<Option<EntryId>> {
        self.writable()?;
        match self.dialect() {
            Dialect::Pi => {
                let name = entries::pi::sanitize_session_name(name);
                self.append_with(|b| entries::pi::session_info(b, &name)).map(Some)
            }
            Dialect::Omp => {
                let source = source.unwrap_or("auto");
                let title = entries::omp::sanitize_title(name);
                if title.is_empty() || (source == "auto" && self.header().get_str("titleSource") == Some("user")) {
                    return Ok(None);
                }
                let previous = self.header().get_str("title").map(str::to_owned);
                // As omp does: the title changes first, then the `title_change` entry is
                // persisted. A full rewrite (or the first write) carries the new title; an
                // append in place is followed by the slot written over the first line.
                let in_place = self.appends_in_place();
                let before = self.title_state();
                self.retitle(&title, source);
                let appended = self
                    .append_with_strict(|b| entries::omp::title_change(b, &title, source, previous.as_deref(), None));
                let id = match appended {
                    Ok(id) => id,
                    Err(e) => {
                        // A rewrite that landed (only not synced) carries the new title:
                        // the memory keeps it too.
                        if !e.landed() {
                            self.restore_title(before);
                        }
                        return Err(e);
                    }
                };
                if in_place && let Err(e) = self.persist_title() {
                    // The entry is in the file: say so, or a retry would append it twice.
                    let path = self.session_file().map(Path::to_path_buf).unwrap_or_default();
                    return Err(SessionError::TitleNotPersisted {
                        path,
                        entry_id: id.into_string(),
                        source: Box::new(e),
                    });
                }
                Ok(Some(id))
            }
        }
    }

    /// Appends a `label` on `target_id` (any entry, any branch; `None` or `""` clears).
    pub fn set_label(&mut self, target_id: &str, label: Option<&str>) -> Result<EntryId> {
        self.append_label_change(target_id, label)
    }

    /// Moves the leaf to `from` (or before the first entry when `None`) and appends a
    /// `branch_summary` there. pi records the previous leaf as `fromId`, omp the target
    /// (`"root"` when `None`).
    pub fn branch_with_summary(
        &mut self,
        from: Option<&str>,
        summary: &str,
        details: Option<Value>,
        from_hook: Option<bool>,
        usage: Option<Value>,
    ) -> Result<EntryId> {
        if let Some(id) = from
            && self.tree().get(id).is_none()
        {
            return Err(SessionError::EntryNotFound { id: id.into() });
        }
        let from_id = match self.dialect() {
            Dialect::Pi => self.tree().leaf_id().unwrap_or("root").to_owned(),
            Dialect::Omp => from.unwrap_or("root").to_owned(),
        };
        match from {
            Some(id) => self.branch(id)?,
            None => self.reset_leaf(),
        }
        match self.dialect() {
            Dialect::Pi => {
                self.append_with(|b| entries::pi::branch_summary(b, &from_id, summary, details, usage, from_hook))
            }
            Dialect::Omp => {
                self.append_with(|b| entries::omp::branch_summary(b, &from_id, summary, details, from_hook))
            }
        }
    }

    /// Appends a record the caller built (e.g. replicated from another process); it
    /// keeps its own id and parent.
    pub fn append_raw(&mut self, record: Record) -> Result<()> {
        self.append_prebuilt(record)
    }

    /// Returns the base (id, parent, timestamp) the next append would use.
    pub fn peek_base(&self) -> Base {
        self.next_base_public()
    }
}
