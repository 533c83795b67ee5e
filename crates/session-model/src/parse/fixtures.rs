//! What the parse's tests (and the stored parse's) share: lines that exercise both
//! grammars, a reader with short reads, and comparisons of two parses.

use crate::parse::ParsedFile;
use crate::read_at::ReadAt;
use crate::record::Record;

/// Lines (and parts of lines) that exercise the parsers: a header, entries, a
/// value across lines, glued and torn values, garbage, blank and CRLF lines.
pub(crate) const LINES: &[&str] = &[
    "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n",
    "{\"type\":\"custom\",\"id\":\"a\",\"parentId\":null}\n",
    "{\"type\":\"custom\",\n\"id\":\"b\"}\n",
    "{\"type\":\"custom\",\"id\":\"c\"}garbage\n",
    "not json\n",
    "\n",
    "  \r\n",
    "null\n",
    "[1,\n",
    "{\"type\":\"custom\"",
    "\"str\"\n",
];

/// A file of the parse tests: an omp title slot first when `slot`, then `body`, with
/// the byte at `invalid_at` (modulo the length) replaced by an invalid UTF-8 byte.
pub(crate) fn file_bytes(slot: bool, body: &str, invalid_at: Option<usize>) -> Vec<u8> {
    let mut bytes = Vec::new();
    if slot {
        let slot = crate::TitleSlot { title: "t".into(), source: None, updated_at: "u".into() };
        bytes.extend_from_slice(slot.to_line().expect("slot").as_bytes());
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(body.as_bytes());
    if let Some(at) = invalid_at.filter(|_| !bytes.is_empty()) {
        let at = at % bytes.len();
        bytes[at] = 0xff;
    }
    bytes
}

/// A file read with short reads, as a real file may give.
pub(crate) struct ShortReads<'a> {
    pub(crate) bytes: &'a [u8],
}

impl ReadAt for ShortReads<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let n = buf.len().min(7);
        self.bytes.read_at(&mut buf[..n], offset)
    }
}

/// Checks that two parses agree in every field a reader sees.
pub(crate) fn same_parse(a: &ParsedFile, b: &ParsedFile) -> Result<(), proptest::test_runner::TestCaseError> {
    proptest::prop_assert_eq!(&a.records, &b.records);
    proptest::prop_assert_eq!(&a.diagnostics, &b.diagnostics);
    proptest::prop_assert_eq!(a.malformed, b.malformed);
    proptest::prop_assert_eq!(&a.title_slot, &b.title_slot);
    proptest::prop_assert_eq!(a.ends_with_newline, b.ends_with_newline);
    proptest::prop_assert_eq!(a.byte_len, b.byte_len);
    proptest::prop_assert_eq!(a.has_content, b.has_content);
    Ok(())
}

/// Lines that may be read by position, and odd ones that must not be.
pub(crate) const SPAN_LINES: &[&str] = &[
    "{\"type\":\"message\",\"id\":\"m1\",\"parentId\":\"a\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"message\":{\"role\":\"user\",\"content\":\"hi \\u00e9\"}}\n",
    "{\"type\":\"message\",\"id\":\"m2\",\"parentId\":null,\"timestamp\":\"t\",\"message\":{\"content\":[],\"role\":\"assistant\",\"role\":\"toolResult\"}}\n",
    "{\"type\":\"message\",\"id\":\"m3\",\"timestamp\":\"t\",\"message\":{\"role\":7}}\n",
    "{\"type\":\"message\",\"id\":\"m4\",\"timestamp\":\"t\",\"message\":{\"role\":\"user\"},\"message\":null}\n",
    "{\"type\":\"message\",\"id\":\"m5\",\"timestamp\":\"t\",\"message\":\"text\"}\n",
    "{\"type\":\"mess\\u0061ge\",\"id\":\"a\\u0062\",\"parentId\":\"\\ud800\",\"timestamp\":\"t\\n\",\"message\":{\"r\\u006fle\":\"us\\u0065r\"}}\n",
    "{\"type\":\"future_kind\",\"id\":\"f1\",\"parentId\":\"m1\",\"timestamp\":\"t\",\"x\":[1,{\"y\":1e400}]}\n",
    "{\"type\":\"custom\",\"id\":\"f2\",\"parentId\":\"f1\",\"timestamp\":\"t\",\"x\":[1.50,-0,12345678901234567890,\"1e400\"]}\n",
    "{\"type\":\"custom\",\"id\":\"f3\",\"parentId\":\"f2\",\"timestamp\":\"t\",\"x\":[1E3,0.1,-2.5e-7]}\n",
    "{\"type\":\"label\",\"id\":\"l1\",\"parentId\":\"m1\",\"timestamp\":\"t\",\"targetId\":\"m1\",\"label\":\"x\"}\n",
    "{\"type\":\"custom\",\"id\":7,\"parentId\":\"a\",\"timestamp\":\"t\"}\n",
    "{\"type\":\"custom\",\"id\":\"n1\",\"parentId\":7,\"timestamp\":\"t\"}\n",
    "{\"type\":\"custom\",\"id\":\"n2\",\"parentId\":\"a\",\"timestamp\":5}\n",
    "{\"type\":\"custom\",\"id\":\"n3\",\"parentId\":\"a\"}\n",
    "{\"type\":5,\"id\":\"n4\",\"timestamp\":\"t\"}\n",
    "{\"id\":\"n5\",\"timestamp\":\"t\"}\n",
    "{\"type\":\"custom\", \"id\":\"n6\" ,\"timestamp\":\"t\"\r}\n",
    " {\"type\":\"compaction\",\"id\":\"c1\",\"parentId\":\"m1\",\"timestamp\":\"t\",\"summary\":\"s\",\"firstKeptEntryId\":\"m1\"}  \n",
    "{\"type\":\"custom\",\"id\":\"x\",\"id\":\"y\",\"timestamp\":\"t\",\"timestamp\":\"u\",\"parentId\":null,\"parentId\":\"p\"}\n",
];

/// Skeleton fields of a record, read without its text.
pub(crate) fn skeleton(
    r: &Record,
) -> (EntryTypeView, Option<String>, Option<String>, String, Option<String>, Option<String>) {
    (
        EntryTypeView(r.entry_type(), r.type_str().map(str::to_owned), r.is_object(), r.is_header()),
        r.id().map(str::to_owned),
        r.id_key().map(|k| k.into_owned()),
        format!("{:?}", r.parent()),
        r.timestamp().map(str::to_owned),
        r.message_role().map(str::to_owned),
    )
}

#[derive(Debug, PartialEq)]
pub(crate) struct EntryTypeView(crate::EntryType, Option<String>, bool, bool);
