//! omp's title slot: a fixed 256-byte first line that holds the session title, so a
//! rename can overwrite it in place without rewriting the file.
//!
//! `{"type":"title","v":1,"title":"…","source":"user","updatedAt":"…","pad":"   "}`,
//! padded with spaces so that the line and its `\n` are exactly [`SLOT_BYTES`] bytes.

use serde_json::{Map, Value};

use crate::engine::ws::skip_ws;
use crate::json;

/// Size of the slot line, newline included.
pub const SLOT_BYTES: usize = 256;

/// The bytes every title slot line starts with.
pub const SLOT_START: &[u8] = b"{\"type\":\"title\"";

/// Returns the dialect a session file's first bytes say it is: omp when it starts with a
/// title slot ([`SLOT_START`]), else pi (whose files never do). At least the first 15
/// bytes are needed; fewer (an empty file) say pi.
///
/// ```
/// use session_model::{Dialect, dialect_of};
/// assert_eq!(dialect_of(b"{\"type\":\"title\",\"v\":1"), Dialect::Omp);
/// assert_eq!(dialect_of(b"{\"type\":\"session\""), Dialect::Pi);
/// ```
pub fn dialect_of(head: &[u8]) -> crate::Dialect {
    if head.starts_with(SLOT_START) { crate::Dialect::Omp } else { crate::Dialect::Pi }
}

/// The parsed title slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TitleSlot {
    /// The title (`""` when none).
    pub title: String,
    /// `"auto"` or `"user"`, when known.
    pub source: Option<String>,
    /// ISO timestamp of the last change.
    pub updated_at: String,
}

/// Why a slot could not be written.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("title slot cannot fit in {SLOT_BYTES} bytes even with an empty title")]
pub struct SlotTooLong;

impl TitleSlot {
    /// Parses a slot line (without its newline); `None` when the line is not a slot
    /// (it is then an ordinary record).
    pub fn parse(line: &str) -> Option<TitleSlot> {
        let line = line.trim_end_matches('\r');
        if !line.as_bytes().starts_with(SLOT_START) && line.as_bytes().get(skip_ws(line.as_bytes(), 0)) != Some(&b'{') {
            return None;
        }
        // The model's JSON reader: a lone surrogate in the title is kept.
        let v: Value = json::parse(line)?;
        let m = v.as_object()?;
        if m.get("type")?.as_str()? != "title" || m.get("v")?.as_f64()? != 1.0 {
            return None;
        }
        let title = m.get("title")?.as_str()?.to_owned();
        let updated_at = m.get("updatedAt")?.as_str()?.to_owned();
        m.get("pad")?.as_str()?;
        let source = match m.get("source") {
            None => None,
            Some(Value::String(s)) if s == "auto" || s == "user" => Some(s.clone()),
            Some(_) => return None,
        };
        Some(TitleSlot { title, source, updated_at })
    }

    fn json_without_pad(&self, title: &str) -> String {
        let mut m = Map::new();
        m.insert("type".into(), "title".into());
        m.insert("v".into(), 1.into());
        m.insert("title".into(), title.into());
        if let Some(s) = &self.source {
            m.insert("source".into(), s.clone().into());
        }
        m.insert("updatedAt".into(), self.updated_at.clone().into());
        m.insert("pad".into(), "".into());
        json::to_js_string(&Value::Object(m))
    }

    /// Returns the slot line, newline included, exactly [`SLOT_BYTES`] bytes long.
    /// A title too long to fit is shortened by code points.
    ///
    /// ```
    /// use session_model::TitleSlot;
    /// let slot = TitleSlot { title: String::new(), source: None, updated_at: "2026-01-01T00:00:00.000Z".into() };
    /// let line = slot.to_line().unwrap();
    /// assert_eq!(line.len(), 256);
    /// assert_eq!(TitleSlot::parse(line.trim_end()), Some(slot));
    /// ```
    pub fn to_line(&self) -> Result<String, SlotTooLong> {
        let fits = |t: &str| self.json_without_pad(t).len() < SLOT_BYTES;
        let mut title: &str = &self.title;
        if !fits(title) {
            let bounds: Vec<usize> = title.char_indices().map(|(i, _)| i).chain([title.len()]).collect();
            // Longest prefix (by code points) that fits: binary search over boundaries.
            let (mut lo, mut hi) = (0usize, bounds.len() - 1);
            while lo < hi {
                let mid = (lo + hi).div_ceil(2);
                if fits(&title[..bounds[mid]]) {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            title = &title[..bounds[lo]];
            if !fits(title) {
                return Err(SlotTooLong);
            }
        }
        let base = self.json_without_pad(title);
        let pad = SLOT_BYTES - 1 - base.len();
        let mut line = String::with_capacity(SLOT_BYTES);
        line.push_str(&base[..base.len() - 2]);
        line.extend(std::iter::repeat_n(' ', pad));
        line.push_str("\"}\n");
        Ok(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_the_spec() {
        let mut s = TitleSlot { title: String::new(), source: None, updated_at: "2026-11-29T19:43:45.170Z".into() };
        assert_eq!(s.json_without_pad("").len() + 1, 82);
        s.source = Some("user".into());
        assert_eq!(s.json_without_pad("").len() + 1, 98);
        s.title = "日本".repeat(200);
        let line = s.to_line().unwrap();
        assert_eq!(line.len(), SLOT_BYTES);
        let back = TitleSlot::parse(line.trim_end()).unwrap();
        assert!(s.title.starts_with(&back.title) && !back.title.is_empty());
    }

    #[test]
    fn rejects_non_slots() {
        assert_eq!(TitleSlot::parse(r#"{"type":"session","id":"x"}"#), None);
        assert_eq!(TitleSlot::parse(r#"{"type":"title","v":2,"title":"","updatedAt":"","pad":""}"#), None);
        assert_eq!(TitleSlot::parse(r#"{"type":"title","v":1,"title":"","source":"x","updatedAt":"","pad":""}"#), None);
    }
}
