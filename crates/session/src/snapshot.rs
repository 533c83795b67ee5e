//! pi's system-message snapshot (`getCurrentSystemMessage`), stored on compactions so
//! the prompt and tool set survive the history they summarise.

use serde_json::{Map, Value};

/// Folds the `system` messages of a context into one snapshot, as pi-ai's
/// `getCurrentSystemMessage` does: texts joined with a blank line, `sections` replayed
/// (`null` deletes), tools removed then added by name, the first timestamp. Returns
/// `None` when there was no timestamp and no tool.
pub(crate) fn current_system_message(messages: impl IntoIterator<Item = Value>) -> Option<Value> {
    let mut texts: Vec<String> = Vec::new();
    let mut sections = Map::new();
    let mut tools = Map::new();
    let mut timestamp: Option<Value> = None;
    for m in messages {
        if m.get("role").and_then(Value::as_str) != Some("system") {
            continue;
        }
        let text = match m.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(blocks)) => blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        };
        if !text.is_empty() {
            texts.push(text);
        }
        if let Some(Value::Object(s)) = m.get("sections") {
            for (name, v) in s {
                if v.is_null() {
                    sections.shift_remove(name);
                } else {
                    sections.insert(name.clone(), v.clone());
                }
            }
        }
        if let Some(Value::Array(removed)) = m.get("toolsRemoved") {
            for t in removed {
                if let Some(name) = t.get("name").and_then(Value::as_str) {
                    tools.shift_remove(name);
                }
            }
        }
        if let Some(Value::Array(added)) = m.get("toolsAdded") {
            for t in added {
                if let Some(name) = t.get("name").and_then(Value::as_str) {
                    tools.insert(name.to_owned(), t.clone());
                }
            }
        }
        if timestamp.is_none()
            && let Some(ts) = m.get("timestamp").filter(|t| !t.is_null())
        {
            timestamp = Some(ts.clone());
        }
    }
    if timestamp.is_none() && tools.is_empty() {
        return None;
    }
    let mut out = Map::new();
    out.insert("role".into(), "system".into());
    out.insert("content".into(), texts.join("\n\n").into());
    if !sections.is_empty() {
        out.insert("sections".into(), Value::Object(sections));
    }
    if !tools.is_empty() {
        out.insert("toolsAdded".into(), Value::Array(tools.into_iter().map(|(_, t)| t).collect()));
    }
    out.insert("timestamp".into(), timestamp.unwrap_or_else(|| Value::from(0)));
    Some(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn example_from_the_pi_spec() {
        let msgs = vec![
            json!({"role": "system", "content": "", "sections": {"preamble": "You are X", "cwd": "/x"},
                   "toolsAdded": [{"name": "read"}, {"name": "write"}], "timestamp": 5}),
            json!({"role": "user", "content": "hi"}),
            json!({"role": "system", "content": "", "sections": {"cwd": null, "skills": "<skills/>"},
                   "toolsRemoved": [{"name": "read"}], "toolsAdded": [{"name": "bash"}, {"name": "read", "v": "r2"}], "timestamp": 9}),
        ];
        let snap = current_system_message(msgs).unwrap();
        assert_eq!(
            snap,
            json!({"role": "system", "content": "", "sections": {"preamble": "You are X", "skills": "<skills/>"},
                   "toolsAdded": [{"name": "write"}, {"name": "bash"}, {"name": "read", "v": "r2"}], "timestamp": 5})
        );
        assert_eq!(current_system_message(vec![json!({"role": "user"})]), None);
    }
}
