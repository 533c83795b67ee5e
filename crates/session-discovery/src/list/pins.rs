//! omp's pinned sessions (`session-pins.json` in its agent directory), listed first.

use session_store::Storage;

use crate::info::SessionInfo;
use crate::io;

use super::Discovery;

impl Discovery {
    /// Reads `<agentDir>/session-pins.json` (omp) and moves pinned sessions first,
    /// keeping the order otherwise.
    pub(super) fn pinned_first(&self, out: &mut [SessionInfo]) {
        let pins = self.pinned_ids();
        if pins.is_empty() {
            return;
        }
        out.sort_by_key(|s| !pins.contains(&s.id));
    }

    /// Returns the pinned session ids (omp's `session-pins.json`), empty if none (or,
    /// as omp reads it, when the file is not a JSON array).
    pub fn pinned_ids(&self) -> Vec<String> {
        // The agent's own configuration, on this machine.
        let path = self.dirs.agent_dir.join(PINS_FILE);
        let Ok(bytes) = io::local().read(&path) else { return Vec::new() };
        parse_pins(&bytes).unwrap_or_default()
    }
}

/// The name of omp's list of pinned sessions in its agent directory.
pub const PINS_FILE: &str = "session-pins.json";

/// Reads omp's `session-pins.json` as omp 18 does (`loadPinnedSessionIds`): the string
/// elements of a JSON array (other elements are no pins), the bytes decoded as UTF-8
/// with replacement. `None` when the content is not a JSON array: omp then reads no
/// pins, and a writer must not take that for an empty list.
pub fn parse_pins(bytes: &[u8]) -> Option<Vec<String>> {
    let text = String::from_utf8_lossy(bytes);
    let raw = crate::jsonscan::parse_whole(&text).ok()?;
    if crate::jsonscan::kind(raw) != crate::jsonscan::Kind::Array {
        return None;
    }
    Some(
        crate::jsonscan::array_elements(raw)
            .into_iter()
            .filter_map(|e| crate::jsonscan::decode_string(e).map(|s| s.into_owned()))
            .collect(),
    )
}
