//! Every session file of the conformance corpus copy (`testdata/conformance`) loads,
//! and writing it back unchanged reproduces it byte for byte except for the repairs
//! the parser reports: dropped blank, garbage and torn lines, CRLF endings, a BOM
//! (omp) and a missing final newline.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use session_model::{DiagnosticKind, Dialect, ParsedFile, parse_session_bytes};

use crate::support::{is_structural, testdata, write_back};

/// Returns every session file of the corpus copy with its dialect.
fn corpus_files() -> Vec<(Dialect, PathBuf)> {
    let mut files = Vec::new();
    for dialect in crate::support::DIALECTS {
        let root = testdata().join("conformance").join(dialect.name());
        let mut scenarios: Vec<PathBuf> = std::fs::read_dir(&root)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", root.display()))
            .map(|e| e.expect("directory entry").path())
            .filter(|p| p.is_dir())
            .collect();
        scenarios.sort();
        for dir in scenarios {
            let mut in_dir: Vec<PathBuf> = std::fs::read_dir(&dir)
                .expect("scenario directory")
                .map(|e| e.expect("directory entry").path())
                .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != "expected.json"))
                .collect();
            in_dir.sort();
            files.extend(in_dir.into_iter().map(|p| (dialect, p)));
        }
    }
    files
}

/// Returns the start offset of the line holding `offset`.
fn line_start(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].rfind('\n').map_or(0, |i| i + 1)
}

/// Applies to `text` exactly the repairs named by the diagnostics and returns what a
/// lossless writer must produce.
fn expected_output(text: &str, parsed: &ParsedFile, dialect: Dialect) -> Result<String, String> {
    let mut dropped = HashSet::new();
    let mut crlf = HashSet::new();
    let mut bom = false;
    let mut missing_newline = false;
    for d in &parsed.diagnostics {
        match &d.kind {
            DiagnosticKind::BlankLine
            | DiagnosticKind::Malformed { .. }
            | DiagnosticKind::TornLastLine
            | DiagnosticKind::SkippedValue { .. } => {
                dropped.insert(line_start(text, d.offset));
            }
            DiagnosticKind::CrLf => {
                crlf.insert(line_start(text, d.offset));
            }
            DiagnosticKind::Bom => bom = true,
            DiagnosticKind::MissingFinalNewline => missing_newline = true,
            k if is_structural(k) => {}
            other => return Err(format!("the corpus holds no {other:?}; the corrupt-file tests cover it")),
        }
    }
    let mut out = String::new();
    let mut start = 0;
    let mut last_kept_had_newline = true;
    let mut used_drops = 0;
    while start < text.len() {
        let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let mut line = &text[start..end];
        if dropped.contains(&start) {
            used_drops += 1;
        } else if line.trim_matches([' ', '\t', '\r']).is_empty() && end == text.len() {
            // Trailing whitespace without a newline: nothing to keep.
        } else {
            if start == 0 && bom && dialect == Dialect::Omp {
                line = line.strip_prefix('\u{feff}').ok_or("a BOM was reported but the file has none")?;
            }
            if crlf.contains(&start) {
                line = line.strip_suffix('\r').ok_or("a CRLF was reported on a line without one")?;
            }
            out.push_str(line);
            out.push('\n');
            last_kept_had_newline = end < text.len();
        }
        start = end + 1;
    }
    if used_drops != dropped.len() {
        return Err(format!("{} skipped lines reported, {used_drops} found", dropped.len()));
    }
    if missing_newline == last_kept_had_newline {
        return Err(format!(
            "MissingFinalNewline reported: {missing_newline}, last line had a newline: {last_kept_had_newline}"
        ));
    }
    Ok(out)
}

fn check_file(dialect: Dialect, path: &Path) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let parsed = parse_session_bytes(&bytes, dialect);
    let text = String::from_utf8(bytes).map_err(|_| "the corpus is UTF-8".to_owned())?;
    for r in &parsed.records {
        // Every accessor works on every kept record.
        let _ = (r.value(), r.message_info(), r.entry_type(), r.canonical_line());
    }
    let written = write_back(&parsed);
    let want = expected_output(&text, &parsed, dialect)?;
    if written != want {
        let at = written.bytes().zip(want.bytes()).take_while(|(a, b)| a == b).count();
        return Err(format!(
            "written file differs at byte {at}: wrote {:?}, expected {:?}",
            &written[at..(at + 80).min(written.len())],
            &want[at..(at + 80).min(want.len())]
        ));
    }
    // The written file is clean: parsing it again reports nothing but structure notes.
    let again = parse_session_bytes(written.as_bytes(), dialect);
    if let Some(d) = again.diagnostics.iter().find(|d| !is_structural(&d.kind)) {
        return Err(format!("the written file is not clean: {d}"));
    }
    if again.records != parsed.records {
        return Err("the written file loads to different records".into());
    }
    Ok(())
}

#[test]
fn every_corpus_file_writes_back_byte_for_byte_except_reported_repairs() {
    let files = corpus_files();
    assert!(files.len() >= 100, "the corpus copy looks incomplete: {} files", files.len());
    let failures: Vec<String> = files
        .iter()
        .filter_map(|(dialect, path)| check_file(*dialect, path).err().map(|e| format!("{}: {e}", path.display())))
        .collect();
    assert!(failures.is_empty(), "{} of {} files failed:\n{}", failures.len(), files.len(), failures.join("\n"));
}

#[test]
fn damaged_scenarios_report_their_damage() {
    // Each damage kind of the corpus shows up as the diagnostic that names it.
    let cases: &[(&str, &str)] = &[
        ("s0003-damaged-torn", "TornLastLine"),
        ("s0007-damaged-garbage", "Malformed"),
        ("s0039-damaged-garbage_nonobject", "NonObject"),
    ];
    for dialect in crate::support::DIALECTS {
        for (scenario, kind) in cases {
            let found = corpus_files()
                .into_iter()
                .filter(|(d, p)| *d == dialect && p.to_string_lossy().contains(scenario))
                .any(|(d, p)| {
                    let parsed = parse_session_bytes(&std::fs::read(&p).expect("corpus file"), d);
                    crate::support::kind_names(&parsed).iter().any(|k| k == kind)
                });
            assert!(found, "{} {scenario}: no {kind} diagnostic", dialect.name());
        }
    }
}

#[test]
fn omp_files_keep_their_title_slot() {
    let mut with_slot = 0;
    for (dialect, path) in corpus_files().into_iter().filter(|(d, _)| *d == Dialect::Omp) {
        let bytes = std::fs::read(&path).expect("corpus file");
        let parsed = parse_session_bytes(&bytes, dialect);
        if let Some(slot) = &parsed.title_slot {
            with_slot += 1;
            let line = slot.to_line().expect("slot fits");
            assert_eq!(line.as_bytes(), &bytes[..256], "{}", path.display());
        }
    }
    assert!(with_slot > 30, "only {with_slot} omp files with a title slot");
}
