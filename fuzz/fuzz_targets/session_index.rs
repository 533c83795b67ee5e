//! Fuzzes the session index's decoder (`session::fuzzing::decode`: the functions an
//! open reads an index file with) on any bytes, and its encoder on sessions made of
//! the input.
//!
//! Asserts:
//! * no panic on any bytes read as an index, with the checksum checked or not
//!   (unchecked, every other check meets the input), its records' texts read through a
//!   session of the same bytes;
//! * the index of the input read as a session (pi, then omp) decodes, checksum
//!   checked, to the parse it was made of, in every field;
//! * with one of its bytes changed (where and how from the input's hash), that index
//!   is refused.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use session::Dialect;
use session::fuzzing::{decode, encode};

fuzz_target!(|data: &[u8]| {
    let path = Path::new("/s/fuzz.jsonl");
    for dialect in [Dialect::Pi, Dialect::Omp] {
        for verify in [true, false] {
            if let Some(parsed) = decode(data, path, dialect, data, verify) {
                // What decodes unchecked is still a parse whose texts can be asked for.
                for r in &parsed.records {
                    let _ = r.text();
                }
            }
        }
        let Some((parsed, index)) = encode(path, dialect, data) else { continue };
        let again = decode(&index, path, dialect, data, true).expect("an encoded index decodes");
        session_fuzz::session::assert_same_parse(&again, &parsed, "index read back");
        assert_eq!(again.record_offsets, parsed.record_offsets, "index read back: record offsets differ");
        assert_eq!(again.open_end, parsed.open_end, "index read back: open_end differs");
        let h = session_fuzz::hash(data);
        let mut damaged = index.clone();
        let at = (h % index.len() as u64) as usize;
        damaged[at] ^= 1 | (h >> 32) as u8;
        assert!(
            decode(&damaged, path, dialect, data, true).is_none(),
            "byte {at} of the index changed, yet it decoded"
        );
    }
});
