//! The wire model of pi and omp session files: records, the lenient JSONL parser,
//! the byte-compatible serializer and ids. Pure: no IO, no clock.
//!
//! A session file is JSON Lines. omp may start it with a 256-byte [`TitleSlot`]; then
//! comes the header (`type: "session"`), then one entry per line. Entries form a tree
//! through `id`/`parentId`; this crate does not interpret the tree (see
//! `session-tree`), it only reads and writes records without losing a byte:
//!
//! * [`parse_session_bytes`] turns bytes into a [`ParsedFile`]: every kept
//!   [`Record`] in order and a [`Diagnostic`] for everything skipped (blank lines,
//!   garbage, a torn last line, values `null`/`false`, …), following the
//!   reference's rules for the [`Dialect`]. [`parse_session_at`] gives the same
//!   result for a file read by position ([`ReadAt`]), parsing a large one in
//!   pieces as they are read instead of holding it whole.
//! * A [`Record`] keeps its original text, so writing it back is byte-for-byte; the
//!   fields the layers above read (`type`, `id`, `parentId`, `timestamp`, the
//!   message's role, provider, model, …) are parsed in the same pass, the rest on
//!   demand. Message payloads are never parsed into a tree unless asked.
//! * [`entries`] builds new records with the exact key order of each reference, and
//!   [`json`] writes JSON exactly as JavaScript's `JSON.stringify` does.
//! * [`typed`] gives serde types for the header, every entry type of both
//!   dialects, messages and content blocks: [`Record::entry`] reads a record as a
//!   [`typed::Entry`], [`Record::from_entry`] builds one back, keeping unknown keys
//!   and unknown types. The record itself stays the lossless carrier.
//! * [`ids`] mints entry ids and UUIDv7 session ids; [`timestamp`] converts ISO
//!   strings.
//!
//! What it does not do: file IO (`session-store`), migrations (`session-migrate`),
//! tree and context (`session-tree`).
//!
//! ```
//! use session_model::{parse_session_bytes, Dialect, EntryType};
//!
//! let file = concat!(
//!     r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#, "\n",
//!     r#"{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#, "\n",
//!     r#"{"type":"future_kind","id":"e5f6a7b8","parentId":"a1b2c3d4","timestamp":"2026-01-01T00:00:02.000Z","x":[1]}"#, "\n",
//! );
//! let parsed = parse_session_bytes(file.as_bytes(), Dialect::Pi);
//! let entries = &parsed.records[1..];
//! assert_eq!(entries[0].message_role(), Some("user"));
//! assert_eq!(entries[1].entry_type(), EntryType::Unknown);
//! // Unchanged records are written back byte for byte.
//! let written: String = parsed.records.iter().map(|r| format!("{}\n", r.line())).collect();
//! assert_eq!(written, file);
//! ```

pub mod entries;
pub mod idhash;
pub mod ids;
mod js;
pub mod json;
mod lenient;
mod parse;
pub mod pool;
mod record;
pub mod scan;
pub mod span;
pub mod stored;
mod strings;
pub mod timestamp;
mod title;
pub mod typed;

#[cfg(feature = "fuzzing")]
pub use parse::parse_session_at_in_pieces;
pub use parse::{
    Diagnostic, DiagnosticKind, HeaderCheck, ParsedFile, ReadAt, SpanPolicy, parse_session_at, parse_session_at_with,
    parse_session_bytes, parse_session_spans, parse_session_tail,
};
pub use record::{
    EntryType, MessageInfo, ParentRef, Record, RecordParseError, Scalar, id_key_is_falsy, is_scalar_id_key,
    number_id_key,
};
pub use span::Bodies;
pub use title::{SLOT_BYTES, SLOT_START, SlotTooLong, TitleSlot, dialect_of};

/// How many threads one operation on a large input may use: the one parallelism
/// setting of the workspace. The facade's `Env` carries it and passes it down to the
/// piecewise parse ([`parse_session_at_with`]), the write of a branched or forked
/// session, and listings; each layer still works alone below its own size threshold.
///
/// ```
/// use session_model::Parallelism;
/// assert_eq!(Parallelism::new(0).threads(), 1);
/// assert_eq!(Parallelism::SERIAL.threads(), 1);
/// assert!(Parallelism::default().threads() >= 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Parallelism(std::num::NonZeroUsize);

impl Parallelism {
    /// One thread: everything runs on the calling thread.
    pub const SERIAL: Parallelism = Parallelism(std::num::NonZeroUsize::MIN);

    /// Up to `threads` threads (0 counts as 1).
    pub fn new(threads: usize) -> Parallelism {
        Parallelism(std::num::NonZeroUsize::new(threads).unwrap_or(std::num::NonZeroUsize::MIN))
    }

    /// As many threads as the machine offers this process.
    pub fn available() -> Parallelism {
        Parallelism(std::thread::available_parallelism().unwrap_or(std::num::NonZeroUsize::MIN))
    }

    /// Returns the number of threads.
    pub fn threads(self) -> usize {
        self.0.get()
    }
}

impl Default for Parallelism {
    /// [`Parallelism::available`].
    fn default() -> Parallelism {
        Parallelism::available()
    }
}

/// The current session format version written by both references.
pub const CURRENT_VERSION: u32 = 3;

/// Which reference's rules apply: file layout, leniency, entry types, context shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// pi (`@earendil-works/pi-coding-agent` 1.6).
    Pi,
    /// omp (oh-my-pi 18.3.4, "musepi").
    Omp,
}

impl Dialect {
    /// Returns the dialect's name as used on the command line (`pi`, `omp`).
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Pi => "pi",
            Dialect::Omp => "omp",
        }
    }
}

impl std::str::FromStr for Dialect {
    type Err = UnknownDialect;
    fn from_str(s: &str) -> Result<Dialect, UnknownDialect> {
        match s {
            "pi" => Ok(Dialect::Pi),
            "omp" | "musepi" => Ok(Dialect::Omp),
            other => Err(UnknownDialect(other.to_owned())),
        }
    }
}

/// A dialect name that is neither `pi` nor `omp`.
#[derive(Debug, thiserror::Error)]
#[error("unknown dialect {0:?}: use pi or omp")]
pub struct UnknownDialect(pub String);

/// Returns whether `c` is whitespace for JavaScript's `String.prototype.trim`.
pub fn js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}' | '\u{feff}'
    )
}

/// Decodes bytes as the references' UTF-8 decoders do: invalid sequences become
/// U+FFFD. Valid input (the common case) is borrowed after one fast check, and a
/// window cut in the middle of a character (a read prefix) costs no slow pass.
///
/// ```
/// assert_eq!(session_model::decode_utf8_lossy(b"caf\xc3\xa9"), "café");
/// assert_eq!(session_model::decode_utf8_lossy(b"caf\xc3"), "caf\u{fffd}");
/// assert_eq!(session_model::decode_utf8_lossy(b"a\xffb"), "a\u{fffd}b");
/// ```
pub fn decode_utf8_lossy(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    if let Ok(s) = simdutf8::basic::from_utf8(bytes) {
        return std::borrow::Cow::Borrowed(s);
    }
    match std::str::from_utf8(bytes) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(e) if e.error_len().is_none() => {
            // Only the tail is an incomplete character: keep the valid part as is.
            let valid = &bytes[..e.valid_up_to()];
            let mut s = String::with_capacity(valid.len() + 3);
            s.push_str(std::str::from_utf8(valid).unwrap_or_default());
            s.push('\u{fffd}');
            std::borrow::Cow::Owned(s)
        }
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// Returns `s` trimmed as JavaScript's `String.prototype.trim` does.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(js_whitespace)
}

// The README's example runs as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
