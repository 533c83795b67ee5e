//! The crate layering of ARCHITECTURE.md, checked against `cargo metadata`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Reads the table between the layering markers of ARCHITECTURE.md.
fn allowed_edges() -> Result<BTreeMap<String, BTreeSet<String>>> {
    let text = fs_err::read_to_string(root().join("ARCHITECTURE.md"))?;
    let start = text.find("<!-- layering:begin -->").ok_or("no layering:begin marker")?;
    let end = text.find("<!-- layering:end -->").ok_or("no layering:end marker")?;
    let mut table = BTreeMap::new();
    for line in text[start..end].lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() != 2 || cells[0] == "crate" || cells[0].starts_with("---") {
            continue;
        }
        let deps = cells[1].split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect();
        table.insert(cells[0].to_owned(), deps);
    }
    Ok(table)
}

/// Returns each workspace member's dependencies on other workspace members.
fn actual_edges() -> Result<BTreeMap<String, BTreeSet<String>>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root())
        .output()?;
    if !out.status.success() {
        return Err(format!("cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let packages = meta["packages"].as_array().ok_or("no packages")?;
    let members: BTreeSet<String> = packages.iter().filter_map(|p| p["name"].as_str().map(str::to_owned)).collect();
    let mut edges = BTreeMap::new();
    for p in packages {
        let name = p["name"].as_str().ok_or("package without name")?.to_owned();
        let deps: BTreeSet<String> = p["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|d| d["kind"].is_null()) // normal dependencies; dev-dependencies may reach anywhere below
            .filter_map(|d| d["name"].as_str())
            .filter(|d| members.contains(*d))
            .map(str::to_owned)
            .collect();
        edges.insert(name, deps);
    }
    Ok(edges)
}

#[test]
fn workspace_edges_follow_architecture_md() -> Result<()> {
    let allowed = allowed_edges()?;
    let actual = actual_edges()?;
    for (krate, deps) in &actual {
        let ok = allowed.get(krate).ok_or_else(|| format!("{krate} is missing from ARCHITECTURE.md's table"))?;
        let extra: Vec<_> = deps.difference(ok).collect();
        assert!(extra.is_empty(), "{krate} depends on {extra:?}, which ARCHITECTURE.md does not allow");
    }
    Ok(())
}

#[test]
fn pure_crates_do_not_touch_the_file_system() -> Result<()> {
    for krate in ["session-model", "session-migrate", "session-tree"] {
        let mut files = Vec::new();
        rust_files(&root().join("crates").join(krate).join("src"), &mut files)?;
        for path in files {
            let text = fs_err::read_to_string(&path)?;
            for needle in ["std::fs", "fs_err", "File::open", "SystemTime"] {
                assert!(!text.contains(needle), "{} mentions {needle}", path.display());
            }
        }
    }
    Ok(())
}

/// Every `.rs` file below the folders `subs` of each crate but those named in `skip`.
fn crate_files(skip: &[&str], subs: &[&str]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for krate in fs_err::read_dir(root().join("crates"))? {
        let krate = krate?.path();
        if krate.file_name().is_some_and(|n| skip.iter().any(|s| n == *s)) {
            continue;
        }
        for sub in subs {
            if krate.join(sub).is_dir() {
                rust_files(&krate.join(sub), &mut files)?;
            }
        }
    }
    Ok(files)
}

/// Every `.rs` file below `dir`.
fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) -> Result<()> {
    for entry in fs_err::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// Error messages do not repeat their cause: printers walk `source()` (the command's
/// does, a line per cause), so a message that also writes its `#[from]` or `#[source]`
/// field (`{0}` of a tuple variant, `{source}`) would print it twice. And the command
/// prints no error by `format!("{e}")` alone, which drops its causes.
#[test]
fn error_messages_do_not_repeat_their_source() -> Result<()> {
    let files = crate_files(&[], &["src"])?;
    assert!(files.len() > 50, "the crates' sources are found ({} files)", files.len());
    let mut repeated = Vec::new();
    let mut checked = 0;
    for path in &files {
        let text = fs_err::read_to_string(path)?;
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !line.trim_start().starts_with("#[error(") {
                continue;
            }
            checked += 1;
            // The attribute to its end, then the variant's first line after it.
            let end = (i..lines.len()).find(|&j| lines[j].trim_end().ends_with(")]")).unwrap_or(i);
            let attr = lines[i..=end].join(" ");
            let variant = lines[end + 1..].iter().find(|l| !l.trim_start().starts_with("#[")).copied().unwrap_or("");
            let tuple_source = variant.contains("(#[from]") || variant.contains("(#[source]");
            if (attr.contains("{0}") && tuple_source) || attr.contains("{source}") {
                repeated.push(format!("{}:{}", path.display(), i + 1));
            }
        }
        if path.components().any(|c| c.as_os_str() == "session-cli") && text.contains("format!(\"{e}\")") {
            repeated.push(format!("{}: format!(\"{{e}}\")", path.display()));
        }
    }
    assert!(checked > 100, "the error attributes are found ({checked})");
    assert!(repeated.is_empty(), "messages that repeat their source: {repeated:#?}");
    Ok(())
}

/// Everything the library reads or writes crosses one audited layer, session-store (its
/// `Storage` implementations, `PrivateDir`, the atomic writes and locks): no other crate's
/// sources name `std::fs`, `fs_err` or `FileExt`, but for the files listed here, each
/// with why it may. A new one fails until it goes through the storage layer or is listed
/// with its reason.
#[test]
fn file_system_access_crosses_the_storage_layer() -> Result<()> {
    let allowed: BTreeMap<&str, &str> = [
        ("session-discovery/src/env.rs", "reads the link /proc/self/fd/0, the process's own standard input"),
        ("session-discovery/src/io.rs", "canonicalizes and stats the working folder, as Node's path resolution does"),
        ("session-discovery/src/lib.rs", "the crate docs' example makes a folder of sessions"),
        ("session-discovery/src/others.rs", "its unit tests read fixtures"),
        (
            "session-history/src/catalog.rs",
            "the search catalog is a SQLite database file: a path, opened without following links",
        ),
        (
            "session-history/src/recover.rs",
            "copies a corrupt history.db aside before a new one replaces it, as omp does",
        ),
        (
            "session-history/src/store.rs",
            "history.db is a SQLite database file; its folder is made before SQLite opens it",
        ),
        ("session-store-sqlite/src/storage.rs", "the session locks' folder beside the database file"),
        ("session/src/nonblocking.rs", "the module docs' example removes its folder"),
        ("session-cli/src/jobs.rs", "export writes the command's own output file where the user asked"),
        ("session-cli/src/mcp.rs", "the MCP server resolves its client's roots to check a path lies inside one"),
        ("session-cli/src/pick/mod.rs", "its unit tests copy a sample session"),
    ]
    .into_iter()
    .collect();
    // Not the storage layer itself, nor the test support (temporary folders, fixtures).
    let files = crate_files(&["session-store", "session-testkit"], &["src"])?;
    assert!(files.len() > 50, "the crates' sources are found ({} files)", files.len());
    let crates = root().join("crates");
    let mut found = Vec::new();
    let mut listed_and_used = BTreeSet::new();
    for path in &files {
        let text = fs_err::read_to_string(path)?;
        if !["std::fs", "fs_err", "FileExt"].iter().any(|needle| text.contains(needle)) {
            continue;
        }
        let rel = path.strip_prefix(&crates)?.to_string_lossy().replace('\\', "/");
        if allowed.contains_key(rel.as_str()) {
            listed_and_used.insert(rel);
        } else {
            found.push(rel);
        }
    }
    assert!(found.is_empty(), "file system access outside the storage layer: {found:#?}");
    let stale: Vec<&&str> = allowed.keys().filter(|k| !listed_and_used.contains(**k)).collect();
    assert!(stale.is_empty(), "listed but no longer touching the file system (remove them): {stale:#?}");
    Ok(())
}

/// What the tests and benches share has one home, session-testkit: no other crate defines
/// a temporary folder type, reads `SESSION_REQUIRE_SERVERS` itself, creates a test
/// database by hand or includes the generator's source with `#[path]`.
#[test]
fn test_support_lives_in_the_testkit() -> Result<()> {
    let mut files = crate_files(&["session-testkit"], &["src", "tests", "benches", "examples"])?;
    rust_files(&root().join("xtask/src"), &mut files)?;
    assert!(files.len() > 100, "the sources are found ({} files)", files.len());
    // Spelled in pieces, so this file does not match itself.
    let needles = [
        ["struct ", "TempDir"].concat(),
        ["\"SESSION_REQUIRE", "_SERVERS\""].concat(),
        ["CREATE ", "DATABASE"].concat(),
        ["xtask/src/", "generate.rs"].concat(),
    ];
    let mut found = Vec::new();
    for path in &files {
        let text = fs_err::read_to_string(path)?;
        for needle in &needles {
            if text.contains(needle.as_str()) {
                found.push(format!("{}: {needle}", path.display()));
            }
        }
    }
    assert!(found.is_empty(), "test support outside session-testkit: {found:#?}");
    Ok(())
}
