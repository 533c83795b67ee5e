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

mod dialect;
mod engine;
pub mod entries;
pub mod idhash;
pub mod ids;
pub mod json;
mod parallelism;
mod parse;
pub mod pool;
mod read_at;
mod record;
pub mod scan;
pub mod span;
pub mod stored;
mod text;
pub mod timestamp;
mod title;
pub mod typed;

pub use dialect::{CURRENT_VERSION, Dialect, UnknownDialect};
pub use parallelism::Parallelism;
#[cfg(feature = "fuzzing")]
pub use parse::parse_session_at_in_pieces;
pub use parse::{
    Diagnostic, DiagnosticKind, HeaderCheck, ParsedFile, SpanPolicy, parse_session_at, parse_session_at_with,
    parse_session_bytes, parse_session_spans, parse_session_tail,
};
pub use read_at::ReadAt;
pub use record::{
    EntryType, MessageInfo, ParentRef, Record, RecordParseError, Scalar, id_key_is_falsy, is_scalar_id_key,
    number_id_key,
};
pub use span::Bodies;
pub use text::{decode_utf8_lossy, js_trim, js_whitespace};
pub use title::{SLOT_BYTES, SLOT_START, SlotTooLong, TitleSlot, dialect_of};

// The README's example runs as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
