//! Inputs the fuzz targets of `fuzz/` found, each a regression test of the bug it
//! showed (the target's name and the property it broke are in each test's doc).

use session_model::{DiagnosticKind, Dialect, parse_session_bytes};

const HEADER: &str = r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#;

/// `parse_pi` (a truthy value was skipped) and `parse_omp` (a value that is not null
/// was skipped): `1e400` is Infinity in JavaScript, truthy and not null, so both
/// references keep it; the parser judged it by a JSON tree it cannot have.
#[test]
fn numbers_beyond_f64_are_kept_as_javascript_keeps_them() -> Result<(), String> {
    for (dialect, value) in [(Dialect::Pi, "1e400"), (Dialect::Omp, "-1e400"), (Dialect::Pi, "[-1e999]")] {
        let file = format!("{HEADER}\n{value}\n");
        let parsed = parse_session_bytes(file.as_bytes(), dialect);
        let texts: Vec<&str> = parsed.records.iter().map(|r| r.text()).collect();
        if texts != [HEADER, value] {
            return Err(format!("{}: {value} gave records {texts:?}", dialect.name()));
        }
        if parsed.diagnostics.iter().any(|d| matches!(d.kind, DiagnosticKind::SkippedValue { .. })) {
            return Err(format!("{}: {value} reported as skipped: {:?}", dialect.name(), parsed.diagnostics));
        }
    }
    // Values that are falsy in JavaScript are still skipped (pi) and `null` (omp).
    for (dialect, value) in
        [(Dialect::Pi, "1e-400"), (Dialect::Pi, "-0"), (Dialect::Pi, "\"\""), (Dialect::Omp, "null")]
    {
        let parsed = parse_session_bytes(format!("{HEADER}\n{value}\n").as_bytes(), dialect);
        if parsed.records.len() != 1 {
            return Err(format!("{}: {value} was kept", dialect.name()));
        }
    }
    Ok(())
}

/// `parse_pi` and `parse_omp` (the line of a kept record reads as another value): a
/// record on several lines (omp) or with a `\r` between its tokens (pi) is written back
/// compacted from its JSON tree, and one without a tree was written back as `null`,
/// losing it. A number beyond f64 is now read as JavaScript writes it back (`null`),
/// and a record nested deeper than the JSON reader allows, which still has no tree,
/// is written as its text without the whitespace between tokens.
#[test]
fn records_without_a_tree_are_written_back_whole() -> Result<(), String> {
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let cases = [
        (
            Dialect::Omp,
            "{\"type\":\"custom\",\"id\":\"a\",\n\"x\":1e400, \"s\":\" \\\" \\\\\"}".to_owned(),
            "{\"type\":\"custom\",\"id\":\"a\",\"x\":null,\"s\":\" \\\" \\\\\"}".to_owned(),
        ),
        (
            Dialect::Pi,
            "{\"type\":\"custom\",\r\"id\":\"a\",\"cost\":0.9E84032}".to_owned(),
            "{\"type\":\"custom\",\"id\":\"a\",\"cost\":null}".to_owned(),
        ),
        (
            Dialect::Omp,
            format!("{{\"type\":\"custom\",\"id\":\"a\",\n\"deep\": {deep}}}"),
            format!("{{\"type\":\"custom\",\"id\":\"a\",\"deep\":{deep}}}"),
        ),
    ];
    for (dialect, record, want) in cases {
        let file = format!("{HEADER}\n{record}\n");
        let parsed = parse_session_bytes(file.as_bytes(), dialect);
        let [_, r] = &parsed.records[..] else { return Err(format!("{record:?} was not kept: {parsed:?}")) };
        let line = r.line();
        if line != want {
            return Err(format!("{}: {record:?} written back as {line:?}", dialect.name()));
        }
        let again = parse_session_bytes(format!("{HEADER}\n{line}\n").as_bytes(), dialect);
        if again.records.get(1).map(|r| r.text()) != Some(&*line) || again.records[1].id() != Some("a") {
            return Err(format!("{}: {line:?} does not read back", dialect.name()));
        }
    }
    Ok(())
}

/// `migrate` (an entry has no id after v1 → v2): a record with a number beyond f64
/// had no JSON tree, so `map_value` (and with it every migration step) left it as it
/// was. JavaScript reads the number as Infinity and writes it back as `null`; so does
/// the record's value now, and `map_value` changes the record.
#[test]
fn records_with_numbers_beyond_f64_have_a_value() -> Result<(), String> {
    let r =
        session_model::Record::parse(r#"{"type":"message","message":{"timestamp":1E+21740819604001,"n":[-1e400,1]}}"#)
            .map_err(|e| e.to_string())?;
    let value = r.try_value().ok_or("no value")?;
    if value["message"] != serde_json::json!({"timestamp": null, "n": [null, 1]}) {
        return Err(format!("read as {value}"));
    }
    let mapped = r.map_value(|v| v["id"] = "x".into());
    if mapped.id() != Some("x")
        || mapped.text() != r#"{"type":"message","message":{"timestamp":null,"n":[null,1]},"id":"x"}"#
    {
        return Err(format!("map_value gave {:?}", mapped.text()));
    }
    // A string that looks like such a number is a string.
    let s = session_model::Record::parse(r#"{"a":"1e400","b":1e400}"#).map_err(|e| e.to_string())?;
    if s.canonical_line() != r#"{"a":"1e400","b":null}"# {
        return Err(format!("canonical line {:?}", s.canonical_line()));
    }
    Ok(())
}
