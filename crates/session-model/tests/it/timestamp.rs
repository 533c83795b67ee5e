//! `timestamp::format_iso_millis` and `parse_iso_millis` are inverse on the whole
//! range of JavaScript dates.

use proptest::prelude::*;
use session_model::timestamp::{format_iso_millis, parse_iso_millis};

/// JavaScript's date range: ±8.64e15 ms around the epoch.
const MAX_MS: i64 = 8_640_000_000_000_000;

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn iso_parts() -> impl Strategy<Value = String> {
    (0i64..=9999, 1i64..=12, 1i64..=31, 0i64..24, 0i64..60, 0i64..60, 0i64..1000).prop_map(|(y, m, d, h, mi, s, ms)| {
        let d = d.min(days_in_month(y, m));
        format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn format_then_parse_is_identity(ms in -MAX_MS..=MAX_MS) {
        let s = format_iso_millis(ms);
        prop_assert_eq!(parse_iso_millis(&s), Some(ms), "{}", s);
    }

    #[test]
    fn recent_dates_have_the_24_character_form(ms in 0i64..253_402_300_800_000) {
        let s = format_iso_millis(ms);
        prop_assert_eq!(s.len(), 24);
        prop_assert!(s.ends_with('Z') && s.as_bytes()[10] == b'T', "{}", s);
    }

    #[test]
    fn parse_then_format_is_identity(s in iso_parts()) {
        let ms = parse_iso_millis(&s).ok_or_else(|| TestCaseError::fail(format!("{s} did not parse")))?;
        prop_assert_eq!(format_iso_millis(ms), s);
    }
}
