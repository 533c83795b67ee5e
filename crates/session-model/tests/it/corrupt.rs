//! Each file of `testdata/corrupt` loads with exactly the diagnostics that
//! `testdata/corrupt/README.md` promises, for both dialects, and never panics.

use session_model::{Dialect, HeaderCheck, parse_session_bytes};

use crate::support::{DIALECTS, is_structural, kind_names, read, write_back};

/// What a corrupt file must give for each of some dialects.
struct Case {
    file: &'static str,
    dialects: &'static [Dialect],
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
    dialects: &'static [Dialect],
    kinds: &'static [&'static str],
    records: usize,
    header: Option<bool>,
) -> Case {
    Case { file, dialects, kinds, records, header }
}

use Dialect::{Omp, Pi};

const PI: &[Dialect] = &[Pi];
const OMP: &[Dialect] = &[Omp];
const BOTH: &[Dialect] = &[Pi, Omp];

/// Every case with each of its dialects.
fn cases() -> impl Iterator<Item = (&'static Case, Dialect)> {
    CASES.iter().flat_map(|c| c.dialects.iter().map(move |&d| (c, d)))
}

const CASES: &[Case] = &[
    case("torn-last-line.jsonl", BOTH, &["TornLastLine"], 3, Some(true)),
    case("garbage-lines.jsonl", PI, &["Malformed", "Malformed"], 4, Some(true)),
    // omp: the half record before the last line runs into it and reaches the end of the
    // file incomplete, so omp stops there and the last record is lost with it.
    case("garbage-lines.jsonl", OMP, &["Malformed", "Malformed"], 3, Some(true)),
    case(
        "crlf-blank.jsonl",
        BOTH,
        &["CrLf", "BlankLine", "CrLf", "BlankLine", "CrLf", "BlankLine", "CrLf"],
        4,
        Some(true),
    ),
    // pi does not strip the BOM: the header line fails and the file is invalid.
    case("bom.jsonl", PI, &["Bom", "Malformed"], 1, Some(false)),
    case("bom.jsonl", OMP, &["Bom"], 2, Some(true)),
    // pi skips falsy values, omp only `null`; every other value is kept.
    case(
        "non-object-values.jsonl",
        PI,
        &["SkippedValue", "SkippedValue", "SkippedValue", "SkippedValue", "NonObject", "NonObject", "NonObject"],
        7,
        Some(true),
    ),
    case(
        "non-object-values.jsonl",
        OMP,
        &["SkippedValue", "NonObject", "NonObject", "NonObject", "NonObject", "NonObject", "NonObject"],
        10,
        Some(true),
    ),
    case("duplicate-header.jsonl", BOTH, &["DuplicateHeader"], 4, Some(true)),
    case("duplicate-ids.jsonl", BOTH, &["DuplicateId"], 4, Some(true)),
    // pi reads lines, so each piece of the spread value is garbage; omp reads values.
    case("value-spans-lines.jsonl", PI, &["Malformed", "Malformed", "Malformed"], 3, Some(true)),
    case("value-spans-lines.jsonl", OMP, &["SpansLines"], 4, Some(true)),
    // `<value> trailing`: pi loses the line; omp keeps the value and skips the word.
    case("trailing-garbage.jsonl", PI, &["Malformed"], 2, Some(true)),
    case("trailing-garbage.jsonl", OMP, &["TrailingGarbage"], 3, Some(true)),
    // `<value><value>`: pi loses the line; omp keeps the first value only.
    case("two-values-one-line.jsonl", PI, &["Malformed"], 2, Some(true)),
    case("two-values-one-line.jsonl", OMP, &["TrailingGarbage"], 3, Some(true)),
    case("bad-header-wrong-type.jsonl", BOTH, &[], 2, Some(false)),
    case("bad-header-numeric-id.jsonl", BOTH, &[], 2, Some(false)),
    case("bad-header-missing.jsonl", BOTH, &[], 2, Some(false)),
    case("bad-header-truncated.jsonl", BOTH, &["Malformed"], 1, Some(false)),
    case("whitespace-only.jsonl", BOTH, &["BlankLine", "BlankLine", "BlankLine"], 0, None),
    case("empty.jsonl", BOTH, &[], 0, None),
    case("invalid-utf8.jsonl", BOTH, &["InvalidUtf8"], 3, Some(true)),
    case("missing-final-newline.jsonl", BOTH, &["MissingFinalNewline"], 3, Some(true)),
];

#[test]
fn corrupt_files_give_the_documented_diagnostics() {
    let mut failures = Vec::new();
    for (c, dialect) in cases() {
        let parsed = parse_session_bytes(&read(&format!("corrupt/{}", c.file)), dialect);
        let kinds = kind_names(&parsed);
        let header = match parsed.header_check(dialect) {
            HeaderCheck::Valid { .. } => Some(true),
            HeaderCheck::Invalid { .. } => Some(false),
            HeaderCheck::Empty => None,
        };
        if kinds != c.kinds || parsed.records.len() != c.records || header != c.header {
            failures.push(format!(
                "{} ({}): kinds {kinds:?}, {} records, header {header:?}; expected {:?}, {}, {:?}",
                c.file,
                dialect.name(),
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
            assert!(cases().any(|(c, dialect)| c.file == name && dialect == d), "{name}: no case for {}", d.name());
        }
        assert!(readme.contains(&format!("`{name}`")), "{name} is not described in testdata/corrupt/README.md");
    }
}

#[test]
fn diagnostics_name_real_lines() {
    for (c, dialect) in cases() {
        let bytes = read(&format!("corrupt/{}", c.file));
        let parsed = parse_session_bytes(&bytes, dialect);
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
    for (c, dialect) in cases() {
        let parsed = parse_session_bytes(&read(&format!("corrupt/{}", c.file)), dialect);
        let written = write_back(&parsed);
        let again = parse_session_bytes(written.as_bytes(), dialect);
        let lines = |p: &session_model::ParsedFile| p.records.iter().map(|r| r.line().into_owned()).collect::<Vec<_>>();
        assert_eq!(lines(&again), lines(&parsed), "{}", c.file);
        let unclean: Vec<_> = again.diagnostics.iter().filter(|d| !is_structural(&d.kind)).collect();
        assert!(unclean.is_empty(), "{} ({}): {unclean:?}", c.file, dialect.name());
    }
}
