//! Records read by position: the skeleton in memory, the text left in the file.
//!
//! A large session is mostly message text that opening it never needs: the tree needs
//! ids, parents, types and timestamps, the context only the texts on one path. So
//! [`crate::parse_session_spans`] keeps, for each large record, a row of a
//! span table: where its text is in the file (offset and length), its entry type,
//! `id`, `parentId`, `timestamp`, `type` and message `role`. The text is read through
//! the file's [`Bodies`] when a layer above first asks for it ([`Record::text`] and
//! everything built on it), then kept.
//!
//! Reading a text again checks that it is still the record that was indexed: it must
//! parse, and its skeleton must be the row's. A file changed in place since it was read
//! (another program rewrote it) fails that check instead of handing out another
//! record's text. A file replaced by a rename is no problem: the reader keeps the
//! file that was opened.
//!
//! A read that fails inside an accessor that cannot return an error ([`Record::text`])
//! gives the record `null` for that call and keeps the error in the [`Bodies`]
//! ([`Bodies::take_failure`]); [`Record::load`] and [`load_all`] return it instead,
//! and callers load what they will read before reading it.
//!
//! Which records are read by position: objects on one line of at least
//! [`SPAN_FROM`] bytes, of any type but the header and labels (the tree reads every
//! label), whose `id` and `parentId` are strings (or absent, or a `null` parent) and
//! whose `timestamp` is a string, each under 256 bytes. Everything else (small
//! records, odd ones) keeps its text in memory as before.
//!
//! The code is the record's (`record/table.rs`: a [`crate::Record`] may be a row of a
//! table that keeps the records it reads); this module is its public face.
//!
//! [`Record::text`]: crate::Record::text
//! [`Record::load`]: crate::Record::load

pub use crate::record::table::{Bodies, CopyRun, LoadHook, SPAN_FROM, copy_runs, lines, load_all};
pub(crate) use crate::record::table::{SpanBuilder, SpanRow, SpanTable};
