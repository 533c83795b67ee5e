//! The lenient JSONL parser: bytes in, records and diagnostics out. Pure; never panics.
//!
//! The two references read differently, so the parser takes a [`Dialect`]:
//!
//! * **pi** splits on `\n`; a line that is blank, does not parse, or parses to a
//!   falsy value (`null`, `0`, `false`, `""`) is skipped; every other value is kept,
//!   non-objects included. A UTF-8 BOM is not stripped (the header line then fails).
//! * **omp** strips a leading BOM, splits off the 256-byte title slot, and reads a
//!   stream of JSON values separated by whitespace, so a value may span lines. After
//!   a syntax error it resynchronises at the next `\n` after the failing value's
//!   start. A value directly followed by non-whitespace loses the rest of its line.
//!   `null` records (which crash omp) are skipped and reported.
//!
//! Everything skipped is reported as a [`Diagnostic`] with its 1-based line number
//! and byte offset. Whether the header is valid is decided by [`ParsedFile::header_check`].
//!
//! The files, bottom-up: `parsed.rs` (what a parse gives: [`ParsedFile`], the
//! diagnostics, the record-level notes), `lines.rs` (the one line counter),
//! `grammar.rs` (pi's lines and omp's values, each dialect's start of a file),
//! `bytes.rs` (the one-pass parse of bytes in memory, [`parse_session_bytes`]),
//! `pieces.rs` (a file read by position, parsed in pieces on several threads,
//! [`parse_session_at`], [`parse_session_spans`]) and `tail.rs` (a parse continued
//! over appended bytes, [`parse_session_tail`]).

mod bytes;
#[cfg(test)]
pub(crate) mod fixtures;
mod grammar;
mod lines;
mod parsed;
mod pieces;
mod tail;

pub use bytes::parse_session_bytes;
pub use parsed::{Diagnostic, DiagnosticKind, HeaderCheck, ParsedFile};
#[cfg(feature = "fuzzing")]
pub use pieces::parse_session_at_in_pieces;
pub use pieces::{SpanPolicy, parse_session_at, parse_session_at_with, parse_session_spans};
pub use tail::parse_session_tail;
