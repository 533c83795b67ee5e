//! Fuzzes the listing cache's decoder (`session_discovery::fuzzing::decode`: the
//! functions a listing reads a `list-*.bin` file with) on any bytes, and its encoder on
//! infos made of the input.
//!
//! Asserts:
//! * no panic on any bytes, with the hashes checked or not (unchecked, every other
//!   check of the decoder meets the input);
//! * whatever decodes from any bytes, hashes checked or not, lists as JSON (pi's shape,
//!   which copies each message text as it is) that the workspace's validating scanner
//!   reads as one array of one object per info, whose `path` is that info's path and
//!   whose `allMessagesText` is its text between quotes: no cached text or raw id can
//!   end a string, add a key or break the JSON;
//! * a cache encoded from infos built of the input decodes, hashes checked, to exactly
//!   those infos; with one of its bytes changed (where and how from the input's hash)
//!   it decodes to nothing else: the file is refused, or the damaged record is, and
//!   every other record reads as written.

#![no_main]

use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;
use session_discovery::fuzzing::{Key, decode, encode};
use session_discovery::{Dialect, MessagesText, SessionInfo, SessionStatus, sessions_to_json};
use session_model::json::write_js_str;
use session_model::scan;

const SCOPE: &str = "fuzz";

fuzz_target!(|data: &[u8]| {
    for verify in [true, false] {
        if let Some(records) = decode(data, Dialect::Pi, SCOPE, verify) {
            let infos: Vec<SessionInfo> = records.into_iter().filter_map(|(_, info)| info.flatten()).collect();
            check_json(&infos);
        }
    }
    let entries = entries(data);
    let bytes = encode(Dialect::Pi, SCOPE, 1, &entries);
    let decoded = decode(&bytes, Dialect::Pi, SCOPE, true).expect("an encoded cache decodes");
    let written: Vec<(Vec<u8>, Option<Option<SessionInfo>>)> =
        entries.iter().map(|(path, _, info)| (path.as_bytes().to_vec(), Some(info.clone()))).collect();
    assert_eq!(decoded, written, "a cache decodes to what was encoded");
    let infos: Vec<SessionInfo> = entries.iter().filter_map(|(_, _, info)| info.clone()).collect();
    check_json(&infos);
    // One byte changed: nothing decodes to anything but what was written.
    let h = session_fuzz::hash(data);
    let mut damaged = bytes.clone();
    let at = (h % bytes.len() as u64) as usize;
    damaged[at] ^= 1 | (h >> 32) as u8;
    if let Some(records) = decode(&damaged, Dialect::Pi, SCOPE, true) {
        for (path, info) in records {
            let Some(info) = info else { continue };
            let original = written.iter().find(|(p, _)| *p == path);
            assert_eq!(original.map(|(_, i)| i), Some(&Some(info)), "byte {at} changed, yet a record decoded");
        }
    }
});

/// Asserts that `infos` list as JSON in which each stays what it is.
fn check_json(infos: &[SessionInfo]) {
    let json = sessions_to_json(Dialect::Pi, infos);
    assert!(scan::parse_whole(&json).is_ok(), "a listing of cached infos is not JSON: {json}");
    let elements = scan::array_elements(&json);
    assert_eq!(elements.len(), infos.len(), "{json}");
    for (element, info) in elements.iter().zip(infos) {
        let ([path, text], _) = scan::object_fields(element, 0, ["path", "allMessagesText"]).expect("an object");
        let mut want = String::new();
        write_js_str(&mut want, &info.path.to_string_lossy());
        assert_eq!(path, Some(want.as_str()), "{element}");
        let want = format!("\"{}\"", info.all_messages_text.as_json());
        assert_eq!(text, Some(want.as_str()), "{element}");
    }
}

/// Builds up to three cache entries from the input: strings cut from it at `0xFF`
/// bytes, numbers and choices from its hash.
fn entries(data: &[u8]) -> Vec<(String, Key, Option<SessionInfo>)> {
    let h = session_fuzz::hash(data);
    let mut parts = data.split(|&b| b == 0xFF).map(|p| String::from_utf8_lossy(p).into_owned());
    let mut next = || parts.next().unwrap_or_default();
    let statuses = [
        None,
        Some(SessionStatus::Complete),
        Some(SessionStatus::Interrupted),
        Some(SessionStatus::Aborted),
        Some(SessionStatus::Error),
        Some(SessionStatus::Pending),
        Some(SessionStatus::Unknown),
    ];
    let mut out = Vec::new();
    for k in 0..1 + (h % 3) as usize {
        let bits = h.rotate_left(7 * k as u32);
        let path = format!("/s/{k}/{}.jsonl", next());
        let key: Key = [bits, bits >> 3, bits >> 5, k as u64, bits >> 7];
        let opt = |s: String, bit: u32| (bits >> bit & 1 == 1).then_some(s);
        let info = (bits & 7 != 0).then(|| SessionInfo {
            path: PathBuf::from(&path),
            id: next(),
            // A raw id is printed as it is: the scanner keeps only whole JSON values.
            id_raw: opt(next(), 3).filter(|raw| scan::parse_whole(raw) == Ok(raw.as_str())),
            has_id: bits >> 4 & 1 == 1,
            cwd: next(),
            name: opt(next(), 5),
            title: opt(next(), 6),
            parent_session_path: opt(next(), 7),
            created: (bits >> 8 & 1 == 1).then_some(bits as i64 >> 20),
            modified: (bits >> 9 & 1 == 1).then_some(-(bits as i64 >> 21)),
            message_count: bits >> 10,
            assistant_turns: (bits >> 11 & 1 == 1).then_some(bits >> 12),
            size: (bits >> 13 & 1 == 1).then_some(bits >> 14),
            first_message: next(),
            all_messages_text: MessagesText::from(next()),
            status: statuses[(bits >> 15) as usize % statuses.len()],
        });
        out.push((path, key, info));
    }
    out
}
