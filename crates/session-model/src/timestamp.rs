//! ISO-8601 timestamps as JavaScript's `Date` writes and reads them.
//!
//! Entry timestamps are `new Date().toISOString()` strings (UTC, millisecond
//! precision); message timestamps are epoch milliseconds. Context messages that the
//! references synthesise take their number from `Date.parse(entry.timestamp)`, which
//! this module reproduces for the ISO forms (anything else is `None`, JavaScript's
//! `NaN`). This module only converts; it never reads a clock.

/// Formats epoch milliseconds as `Date.prototype.toISOString` does
/// (`2026-11-29T19:11:36.572Z`; years outside 0..=9999 use the six-digit form).
///
/// ```
/// assert_eq!(session_model::timestamp::format_iso_millis(0), "1970-01-01T00:00:00.000Z");
/// assert_eq!(session_model::timestamp::format_iso_millis(1_795_981_423_043), "2026-11-29T19:43:43.043Z");
/// ```
pub fn format_iso_millis(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    let (h, mi, s, milli) = (rem / 3_600_000, rem / 60_000 % 60, rem / 1000 % 60, rem % 1000);
    // Written digit by digit: this runs on every append.
    fn digits(out: &mut String, n: i64, width: u32) {
        for p in (0..width).rev() {
            out.push(char::from(b'0' + (n / 10_i64.pow(p) % 10) as u8));
        }
    }
    let mut out = String::with_capacity(27);
    if (0..=9999).contains(&y) {
        digits(&mut out, y, 4);
    } else {
        out.push(if y < 0 { '-' } else { '+' });
        digits(&mut out, y.abs(), 6);
    }
    for (sep, n, width) in [('-', m, 2), ('-', d, 2), ('T', h, 2), (':', mi, 2), (':', s, 2), ('.', milli, 3)] {
        out.push(sep);
        digits(&mut out, n, width);
    }
    out.push('Z');
    out
}

/// Returns the file-name form of an ISO timestamp: every `:` and `.` replaced by `-`
/// (`2026-11-29T19-11-36-572Z`).
pub fn file_safe(iso: &str) -> String {
    iso.replace([':', '.'], "-")
}

/// Parses an ISO-8601 date or date-time as `Date.parse` does and returns epoch
/// milliseconds, or `None` where JavaScript would give `NaN`.
///
/// Date-only forms are UTC; date-times without an offset are treated as UTC as well
/// (JavaScript would use the local zone; the references always write `Z`).
///
/// ```
/// use session_model::timestamp::parse_iso_millis;
/// assert_eq!(parse_iso_millis("1970-01-01T00:00:01.500Z"), Some(1500));
/// assert_eq!(parse_iso_millis("2025-01-01T00:00:00Z"), Some(1_735_689_600_000));
/// assert_eq!(parse_iso_millis("2025-01-01"), Some(1_735_689_600_000));
/// assert_eq!(parse_iso_millis("not a date"), None);
/// // A day past the month's end rolls over, as in V8 and JavaScriptCore; 32 does not.
/// assert_eq!(parse_iso_millis("2026-02-30T10:00:00.000Z"), parse_iso_millis("2026-03-02T10:00:00.000Z"));
/// assert_eq!(parse_iso_millis("2026-02-32"), None);
/// ```
pub fn parse_iso_millis(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let mut p = Cursor { b, i: 0 };
    let year: i64 = match b.first()? {
        b'+' | b'-' => {
            let neg = b[0] == b'-';
            p.i = 1;
            let y = p.digits(6)?;
            if neg && y == 0 {
                return None;
            }
            if neg { -y } else { y }
        }
        _ => p.digits(4)?,
    };
    let (mut month, mut day) = (1, 1);
    if p.eat(b'-') {
        month = p.digits(2)?;
        if p.eat(b'-') {
            day = p.digits(2)?;
        }
    }
    let (mut h, mut mi, mut sec, mut ms) = (0, 0, 0, 0);
    let mut offset_min = 0i64;
    if p.eat(b'T') || p.eat(b't') {
        h = p.digits(2)?;
        if !p.eat(b':') {
            return None;
        }
        mi = p.digits(2)?;
        if p.eat(b':') {
            sec = p.digits(2)?;
            if p.eat(b'.') || p.eat(b',') {
                let start = p.i;
                let mut frac = 0i64;
                let mut n = 0;
                while let Some(d) = p.peek_digit() {
                    if n < 3 {
                        frac = frac * 10 + d;
                    }
                    n += 1;
                    p.i += 1;
                }
                if p.i == start {
                    return None;
                }
                while n < 3 {
                    frac *= 10;
                    n += 1;
                }
                ms = frac;
            }
        }
        if p.eat(b'Z') || p.eat(b'z') {
        } else if matches!(p.b.get(p.i), Some(b'+' | b'-')) {
            let neg = p.b[p.i] == b'-';
            p.i += 1;
            let oh = p.digits(2)?;
            if !p.eat(b':') {
                return None;
            }
            let om = p.digits(2)?;
            if oh > 23 || om > 59 {
                return None;
            }
            offset_min = (oh * 60 + om) * if neg { -1 } else { 1 };
        }
    }
    if p.i != b.len() {
        return None;
    }
    // V8 and JavaScriptCore take any day up to 31 and roll past the month's end
    // (`2026-02-30` is March 2).
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    if h > 24 || mi > 59 || sec > 59 || (h == 24 && (mi > 0 || sec > 0 || ms > 0)) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let t = days * 86_400_000 + ((h * 60 + mi) * 60 + sec) * 1000 + ms - offset_min * 60_000;
    (t.abs() <= 8_640_000_000_000_000).then_some(t)
}

/// Returns `new Date(value).getTime()` for a raw JSON value (`None` for `NaN`): a
/// string as [`parse_js_date`] reads it, a number through `TimeClip`, `null` and
/// `false` as 0, `true` as 1, an array or object as `NaN`.
///
/// ```
/// use session_model::timestamp::js_date_raw;
/// assert_eq!(js_date_raw("\"1970-01-01T00:00:01Z\""), Some(1000));
/// assert_eq!(js_date_raw("null"), Some(0));
/// assert_eq!(js_date_raw("5.9"), Some(5));
/// assert_eq!(js_date_raw("1e400"), None);
/// assert_eq!(js_date_raw("\"Thu, 01 Jan 1970 00:00:02 GMT\""), Some(2000));
/// ```
pub fn js_date_raw(raw: &str) -> Option<i64> {
    use crate::scan::{self, Kind};
    match scan::kind(raw) {
        Kind::String => parse_js_date(&scan::decode_string(raw)?),
        Kind::Number => time_clip(scan::number(raw)?),
        Kind::Null | Kind::False => Some(0),
        Kind::True => Some(1),
        Kind::Array | Kind::Object => None,
    }
}

/// ECMAScript `TimeClip`: a time value within ±8.64e15 ms, truncated; else `NaN`.
pub fn time_clip(t: f64) -> Option<i64> {
    if !t.is_finite() || t.abs() > 8.64e15 {
        return None;
    }
    Some(t.trunc() as i64)
}

/// Returns `Date.parse(s)` (`None` for `NaN`): the ISO format ([`parse_iso_millis`]),
/// else the forms `Date.prototype.toUTCString` and `toString` write, which both
/// engines the references run on read (`Thu, 01 Jan 2026 00:00:00 GMT`,
/// `Thu Jan 01 2026 00:00:00 GMT+0100 (…)`). A time without a zone is read as UTC
/// (the engines read it in the machine's zone).
pub fn parse_js_date(s: &str) -> Option<i64> {
    parse_iso_millis(s).or_else(|| parse_legacy(s))
}

/// The legacy `Date.parse` forms: month names, `day year` in either order after the
/// month, `HH:MM[:SS]`, `GMT`/`UTC`/`Z` with an optional `+hhmm`, a weekday and a
/// parenthesised comment ignored.
fn parse_legacy(s: &str) -> Option<i64> {
    const MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
    const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
    let s = s.split('(').next().unwrap_or(s);
    let (mut month, mut numbers, mut time, mut offset) = (None, Vec::new(), None, 0i64);
    for token in s.split(|c: char| c.is_ascii_whitespace() || c == ',').filter(|t| !t.is_empty()) {
        let lower = token.to_ascii_lowercase();
        let alpha_end = lower.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(lower.len());
        let (word, rest) = lower.split_at(alpha_end);
        if !word.is_empty() {
            if let Some(m) = MONTHS.iter().position(|m| word.len() >= 3 && m.starts_with(&word[..3]) && word.len() <= 9)
            {
                month = Some(m as i64 + 1);
            } else if !(DAYS.iter().any(|d| word.starts_with(d)) || matches!(word, "gmt" | "utc" | "ut" | "z")) {
                return None;
            }
            if rest.is_empty() {
                continue;
            }
        }
        if let Some(sign) = rest.strip_prefix(['+', '-']) {
            let neg = rest.starts_with('-');
            let digits: String = sign.chars().filter(char::is_ascii_digit).collect();
            if digits.len() != 4 || sign.chars().any(|c| !c.is_ascii_digit() && c != ':') {
                return None;
            }
            let (h, m): (i64, i64) = (digits[..2].parse().ok()?, digits[2..].parse().ok()?);
            offset = (h * 60 + m) * if neg { -1 } else { 1 };
        } else if rest.contains(':') {
            let mut parts = rest.split(':');
            let mut next = || -> Option<i64> { parts.next().map(|p| p.parse().ok()).unwrap_or(Some(0)) };
            let (h, m, sec) = (next()?, next()?, next()?);
            if h > 24 || m > 59 || sec > 59 {
                return None;
            }
            time = Some(((h * 60 + m) * 60 + sec) * 1000);
        } else if rest.chars().all(|c| c.is_ascii_digit()) {
            numbers.push(rest.parse::<i64>().ok()?);
        } else {
            return None;
        }
    }
    let month = month?;
    let (day, year) = match numbers.as_slice() {
        [a, b] if *a <= 31 => (*a, *b),
        [a, b] if *b <= 31 => (*b, *a),
        _ => return None,
    };
    let year = if year < 50 {
        2000 + year
    } else if year < 100 {
        1900 + year
    } else {
        year
    };
    // A day past the month's end rolls over, as in the ISO form.
    if !(1..=31).contains(&day) {
        return None;
    }
    let t = days_from_civil(year, month, day) * 86_400_000 + time.unwrap_or(0) - offset * 60_000;
    (t.abs() <= 8_640_000_000_000_000).then_some(t)
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn digits(&mut self, n: usize) -> Option<i64> {
        let s = self.b.get(self.i..self.i + n)?;
        if !s.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.i += n;
        Some(s.iter().fold(0i64, |a, d| a * 10 + i64::from(d - b'0')))
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn peek_digit(&self) -> Option<i64> {
        self.b.get(self.i).filter(|c| c.is_ascii_digit()).map(|c| i64::from(c - b'0'))
    }
}

/// Returns the ISO 8601 week (`2026-W49`) of the date an ISO timestamp starts with
/// (`YYYY-MM-DD…`); `None` when it does not start with one.
///
/// ```
/// assert_eq!(session_model::timestamp::iso_week("2021-01-03T10:00:00.000Z").as_deref(), Some("2020-W53"));
/// ```
pub fn iso_week(iso: &str) -> Option<String> {
    let num =
        |r: std::ops::Range<usize>| iso.get(r).filter(|t| t.bytes().all(|b| b.is_ascii_digit()))?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return None;
    }
    let days = days_from_civil(y, m, d);
    // 1970-01-01 was a Thursday; ISO weekdays run Monday = 1 to Sunday = 7.
    let weekday = (days + 3).rem_euclid(7) + 1;
    // The week's Thursday decides its year.
    let thursday = days - weekday + 4;
    let (year, _, _) = civil_from_days(thursday);
    let week = (thursday - days_from_civil(year, 1, 1)) / 7 + 1;
    Some(format!("{year}-W{week:02}"))
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Howard Hinnant's algorithms.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_weeks_follow_their_thursday() {
        for (date, week) in [
            ("2026-12-04", "2026-W49"),
            ("2021-01-03", "2020-W53"),
            ("2021-01-04", "2021-W01"),
            ("2024-12-30", "2025-W01"),
            ("2020-02-29", "2020-W09"),
        ] {
            assert_eq!(iso_week(&format!("{date}T00:00:00.000Z")).as_deref(), Some(week), "{date}");
        }
        assert_eq!(iso_week("garbage"), None);
        assert_eq!(iso_week("2026-13-01"), None);
    }

    #[test]
    fn round_trips() {
        for ms in [0, 1, 999, 1_795_981_423_043, -1, -86_400_001, 253_402_300_799_999] {
            let s = format_iso_millis(ms);
            assert_eq!(parse_iso_millis(&s), Some(ms), "{s}");
        }
    }

    #[test]
    fn rejects_invalid() {
        for s in ["", "2025-13-01", "2025-02-32", "2025-04-00", "2025-01-01T25:00Z", "2025-01-01T00:00:00.Z", "x2025"] {
            assert_eq!(parse_iso_millis(s), None, "{s}");
        }
        assert_eq!(parse_iso_millis("2025-01-01T01:00+01:00"), Some(1_735_689_600_000));
        assert_eq!(file_safe("2026-11-29T19:11:36.572Z"), "2026-11-29T19-11-36-572Z");
    }

    /// `Date.parse` in V8 (node 22) and JavaScriptCore (bun 1.3) alike: a day up to 31
    /// rolls past the month's end, in the ISO form and the legacy ones.
    #[test]
    fn days_past_the_months_end_roll_over_as_in_javascript() {
        for (s, ms) in [
            ("2026-02-30T10:00:00.000Z", Some(1_772_445_600_000)),
            ("2026-02-31", Some(1_772_496_000_000)),
            ("2024-02-30", Some(1_709_251_200_000)),
            ("2026-04-31T00:00:00Z", Some(1_777_593_600_000)),
            ("2026-02-30T24:00:00Z", Some(1_772_496_000_000)),
            ("2026-02-32T00:00:00Z", None),
            ("2026-02-00T00:00:00Z", None),
            ("Mon, 30 Feb 2026 00:00:00 GMT", Some(1_772_409_600_000)),
            ("Tue Feb 31 2026 00:00:00 GMT+0000", Some(1_772_496_000_000)),
            ("Feb 32 2026", None),
        ] {
            assert_eq!(parse_js_date(s), ms, "{s}");
        }
    }
}
