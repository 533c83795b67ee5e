//! Fuzzes pi's lenient parser (`parse_session_bytes` with `Dialect::Pi`) on any bytes.
//!
//! Asserts what `session_fuzz::session::check_parse` states: no panic; the file-level
//! fields and every diagnostic's line and offset describe the bytes; every kept
//! record writes back as one line that reads as the same value and skeleton, and
//! its scanned skeleton agrees with serde_json's reading; a file with a valid header
//! written back reads back the same and cleanly; and the piecewise parse
//! (`parse_session_at`, with piece, stated and read sizes from the input's hash), the
//! parse that leaves texts in the file (`parse_session_spans`; the same skeletons
//! before any text is read), that parse stored and read back, and a parse continued
//! over the bytes after a prefix (`parse_session_tail`) equal the one-pass parse in
//! every field.

#![no_main]

use libfuzzer_sys::fuzz_target;
use session_model::Dialect;

fuzz_target!(|data: &[u8]| {
    session_fuzz::session::check_parse(data, Dialect::Pi);
});
