//! Each file of `testdata/corrupt` loads with exactly the diagnostics that
//! `testdata/corrupt/README.md` promises, for both dialects, and never panics.

use session_model::{Dialect, HeaderCheck, parse_session_bytes};

use crate::support::{DIALECTS, is_structural, kind_names, read, write_back};

/// What a corrupt file must give for one dialect.
struct Case {
    file: &'static str,
    dialect: Dialect,
    /// Diagnostic kinds in order.
    kinds: &'static [&'static str],
    /// Number of kept records.
    records: usize,
    /// Whether the header is valid (`Some(true)`), invalid (`Some(false)`) or there
    /// is no record at all (`None`).
    header: Option<bool>,
}

const fn case(
    file: &'static str,
    dialect: Dialect,
    kinds: &'static [&'static str],
    records: usize,
    header: Option<bool>,
) -> Case {
    Case { file, dialect, kinds, records, header }
}

use Dialect::{Omp, Pi};

const CASES: &[Case] = &[
    case("torn-last-line.jsonl", Pi, &["TornLastLine"], 3, Some(true)),
    case("torn-last-line.jsonl", Omp, &["TornLastLine"], 3, Some(true)),
    case("garbage-lines.jsonl", Pi, &["Malformed", "Malformed"], 4, Some(true)),
    // omp: the half record before the last line runs into it and reaches the end of the
    // file incomplete, so omp stops there and the last record is lost with it.
    case("garbage-lines.jsonl", Omp, &["Malformed", "Malformed"], 3, Some(true)),
    case(
        "crlf-blank.jsonl",
        Pi,
        &["CrLf", "BlankLine", "CrLf", "BlankLine", "CrLf", "BlankLine", "CrLf"],
        4,
        Some(true),
    ),
    case(
        "crlf-blank.jsonl",
        Omp,
        &["CrLf", "BlankLine", "CrLf", "BlankLine", "CrLf", "BlankLine", "CrLf"],
        4,
        Some(true),
    ),
    // pi does not strip the BOM: the header line fails and the file is invalid.
    case("bom.jsonl", Pi, &["Bom", "Malformed"], 1, Some(false)),
    case("bom.jsonl", Omp, &["Bom"], 2, Some(true)),
    // pi skips falsy values, omp only `null`; every other value is kept.
    case(
        "non-object-values.jsonl",
        Pi,
        &["SkippedValue", "SkippedValue", "SkippedValue", "SkippedValue", "NonObject", "NonObject", "NonObject"],
        7,
        Some(true),
    ),
    case(
        "non-object-values.jsonl",
        Omp,
        &["SkippedValue", "NonObject", "NonObject", "NonObject", "NonObject", "NonObject", "NonObject"],
        10,
        Some(true),
    ),
    case("duplicate-header.jsonl", Pi, &["DuplicateHeader"], 4, Some(true)),
    case("duplicate-header.jsonl", Omp, &["DuplicateHeader"], 4, Some(true)),
    case("duplicate-ids.jsonl", Pi, &["DuplicateId"], 4, Some(true)),
    case("duplicate-ids.jsonl", Omp, &["DuplicateId"], 4, Some(true)),
    // pi reads lines, so each piece of the spread value is garbage; omp reads values.
    case("value-spans-lines.jsonl", Pi, &["Malformed", "Malformed", "Malformed"], 3, Some(true)),
    case("value-spans-lines.jsonl", Omp, &["SpansLines"], 4, Some(true)),
    // `<value> trailing`: pi loses the line; omp keeps the value and skips the word.
    case("trailing-garbage.jsonl", Pi, &["Malformed"], 2, Some(true)),
    case("trailing-garbage.jsonl", Omp, &["TrailingGarbage"], 3, Some(true)),
    // `<value><value>`: pi loses the line; omp keeps the first value only.
    case("two-values-one-line.jsonl", Pi, &["Malformed"], 2, Some(true)),
    case("two-values-one-line.jsonl", Omp, &["TrailingGarbage"], 3, Some(true)),
    case("bad-header-wrong-type.jsonl", Pi, &[], 2, Some(false)),
    case("bad-header-wrong-type.jsonl", Omp, &[], 2, Some(false)),
    case("bad-header-numeric-id.jsonl", Pi, &[], 2, Some(false)),
    case("bad-header-numeric-id.jsonl", Omp, &[], 2, Some(false)),
    case("bad-header-missing.jsonl", Pi, &[], 2, Some(false)),
    case("bad-header-missing.jsonl", Omp, &[], 2, Some(false)),
    case("bad-header-truncated.jsonl", Pi, &["Malformed"], 1, Some(false)),
    case("bad-header-truncated.jsonl", Omp, &["Malformed"], 1, Some(false)),
    case("whitespace-only.jsonl", Pi, &["BlankLine", "BlankLine", "BlankLine"], 0, None),
    case("whitespace-only.jsonl", Omp, &["BlankLine", "BlankLine", "BlankLine"], 0, None),
    case("empty.jsonl", Pi, &[], 0, None),
    case("empty.jsonl", Omp, &[], 0, None),
    case("invalid-utf8.jsonl", Pi, &["InvalidUtf8"], 3, Some(true)),
    case("invalid-utf8.jsonl", Omp, &["InvalidUtf8"], 3, Some(true)),
    case("missing-final-newline.jsonl", Pi, &["MissingFinalNewline"], 3, Some(true)),
    case("missing-final-newline.jsonl", Omp, &["MissingFinalNewline"], 3, Some(true)),
];

#[test]
fn corrupt_files_give_the_documented_diagnostics() {
    let mut failures = Vec::new();
    for c in CASES {
        let parsed = parse_session_bytes(&read(&format!("corrupt/{}", c.file)), c.dialect);
        let kinds = kind_names(&parsed);
        let header = match parsed.header_check(c.dialect) {
            HeaderCheck::Valid { .. } => Some(true),
            HeaderCheck::Invalid { .. } => Some(false),
            HeaderCheck::Empty => None,
        };
        if kinds != c.kinds || parsed.records.len() != c.records || header != c.header {
            failures.push(format!(
                "{} ({}): kinds {kinds:?}, {} records, header {header:?}; expected {:?}, {}, {:?}",
                c.file,
                c.dialect.name(),
                parsed.records.len(),
                c.kinds,
                c.records,
                c.header
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_corrupt_file_has_a_case_for_both_dialects_and_a_readme_line() {
    let readme = String::from_utf8(read("corrupt/README.md")).expect("README is UTF-8");
    let dir = crate::support::testdata().join("corrupt");
    for entry in std::fs::read_dir(dir).expect("testdata/corrupt") {
        let name = entry.expect("entry").file_name().to_string_lossy().into_owned();
        if name == "README.md" {
            continue;
        }
        for d in DIALECTS {
            assert!(CASES.iter().any(|c| c.file == name && c.dialect == d), "{name}: no case for {}", d.name());
        }
        assert!(readme.contains(&format!("`{name}`")), "{name} is not described in testdata/corrupt/README.md");
    }
}

#[test]
fn diagnostics_name_real_lines() {
    for c in CASES {
        let bytes = read(&format!("corrupt/{}", c.file));
        let parsed = parse_session_bytes(&bytes, c.dialect);
        let lines = bytes.iter().filter(|&&b| b == b'\n').count() + 1;
        for d in parsed.diagnostics.iter().filter(|d| !is_structural(&d.kind)) {
            assert!(d.line >= 1 && d.line <= lines, "{}: {d}", c.file);
            assert!(d.offset <= bytes.len(), "{}: {d}", c.file);
        }
    }
}

#[test]
fn repaired_corrupt_files_load_clean() {
    // Writing back what was kept gives a file without skipped text: the repair is final.
    for c in CASES {
        let parsed = parse_session_bytes(&read(&format!("corrupt/{}", c.file)), c.dialect);
        let written = write_back(&parsed);
        let again = parse_session_bytes(written.as_bytes(), c.dialect);
        let lines = |p: &session_model::ParsedFile| p.records.iter().map(|r| r.line().into_owned()).collect::<Vec<_>>();
        assert_eq!(lines(&again), lines(&parsed), "{}", c.file);
        let unclean: Vec<_> = again.diagnostics.iter().filter(|d| !is_structural(&d.kind)).collect();
        assert!(unclean.is_empty(), "{} ({}): {unclean:?}", c.file, c.dialect.name());
    }
}
