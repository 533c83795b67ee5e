//! Fuzzes the lenient loader: any bytes, read as pi and as omp, must load without a
//! panic, and every kept record must serialise to one line and parse on demand.

#![no_main]

use libfuzzer_sys::fuzz_target;
use session_model::{Dialect, Record, parse_session_bytes};

fuzz_target!(|data: &[u8]| {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let parsed = parse_session_bytes(data, dialect);
        let _ = parsed.header_check(dialect);
        for record in &parsed.records {
            let line = record.line();
            assert!(!line.contains('\n'), "a record line holds a newline: {line}");
            let value = record.value();
            let _ = record.message_info();
            let again = Record::parse(&line).expect("a kept record's line is valid JSON");
            assert_eq!(again.value(), value);
        }
    }
});
