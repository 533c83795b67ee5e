//! Data-driven snapshots: each file under `tests/it/snapshots/` holds a session in
//! the textual format of [`crate::support`], query lines (`? tree`, `? branch ID`,
//! `? context leaf=ID`, `? transcript`, `? projection`, `? diagnostics`), a `====`
//! line, and the expected renderings. Set `UPDATE_SNAPSHOTS=1` to rewrite them.

use std::fmt::Write as _;
use std::path::Path;

use session_model::Dialect;
use session_tree::{Leaf, SessionTree, omp, pi};

use crate::support::{ids, parse_session, render_context, render_message, render_tree, value};

fn leaf_arg(arg: Option<&str>) -> Leaf<'_> {
    match arg.and_then(|a| a.strip_prefix("leaf=")) {
        None => Leaf::Current,
        Some("null") => Leaf::Null,
        Some(id) => Leaf::Id(id),
    }
}

fn run_query(tree: &SessionTree, query: &str) -> String {
    let mut words = query.split_whitespace();
    let cmd = words.next().unwrap_or("");
    let arg = words.next();
    match cmd {
        "tree" => render_tree(&tree.tree()),
        "branch" => format!("{}\n", ids(tree.get_branch(arg)).join(" ")),
        "context" => match tree.dialect() {
            Dialect::Pi => render_context(&pi::build_context(tree, leaf_arg(arg)).to_json_string()),
            Dialect::Omp => render_context(
                &omp::build_context(tree, leaf_arg(arg), omp::ContextOptions::default()).to_json_string(),
            ),
        },
        "transcript" => {
            let ctx = omp::build_context(tree, leaf_arg(arg), omp::ContextOptions { transcript: true });
            render_context(&ctx.to_json_string())
        }
        "projection" => {
            let p = pi::build_projection(tree, leaf_arg(arg));
            let mut out = String::new();
            for (entry, messages) in p.entries() {
                let rendered: Vec<String> = messages.iter().map(|m| render_message(&value(m))).collect();
                let _ = writeln!(out, "{} -> [{}]", entry.id().unwrap_or("(no id)"), rendered.join("; "));
            }
            out
        }
        "diagnostics" => tree.diagnostics().iter().map(|d| format!("{d}\n")).collect(),
        other => format!("unknown query {other}\n"),
    }
}

fn check_file(path: &Path) -> Result<(), String> {
    let text = fs_err::read_to_string(path).map_err(|e| e.to_string())?;
    let (input, expected) = text.split_once("\n====\n").unwrap_or((&text, ""));
    let dialect = if input.lines().next() == Some("dialect omp") { Dialect::Omp } else { Dialect::Pi };
    let session: String = input
        .lines()
        .filter(|l| !l.starts_with("? ") && !l.starts_with("dialect "))
        .map(|l| format!("{l}\n"))
        .collect();
    let tree = SessionTree::new(dialect, parse_session(&session, dialect));
    let mut actual = String::new();
    for q in input.lines().filter_map(|l| l.strip_prefix("? ")) {
        let _ = write!(actual, "## {q}\n{}", run_query(&tree, q));
    }
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        fs_err::write(path, format!("{input}\n====\n{actual}")).map_err(|e| e.to_string())?;
        return Ok(());
    }
    if actual != expected {
        return Err(format!("{}: snapshot differs\n--- expected\n{expected}\n--- actual\n{actual}", path.display()));
    }
    Ok(())
}

#[test]
fn snapshots_match() -> Result<(), String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/snapshots");
    let mut files: Vec<_> =
        fs_err::read_dir(&dir).map_err(|e| e.to_string())?.filter_map(Result::ok).map(|e| e.path()).collect();
    files.sort();
    assert!(files.len() >= 5, "snapshot files are missing");
    let failures: Vec<String> = files.iter().filter_map(|f| check_file(f).err()).collect();
    if failures.is_empty() { Ok(()) } else { Err(failures.join("\n\n")) }
}
