//! `session import`: Claude Code and Codex sessions written as pi and omp sessions that
//! our own `check`, `context` and `info` read back, imported again without a write, and
//! grown sources appended to.

use std::path::{Path, PathBuf};

use expect_test::{expect, expect_file};
use serde_json::Value;

use session_testkit::Tree;

use super::{Result, TempDir, in_home, outcome, s};

/// `testdata/import/REL`.
pub(crate) fn fixture(rel: &str) -> PathBuf {
    session_testkit::testdata().join("import").join(rel)
}

const CODEX: &str = "codex/rollout-2026-03-03T08-00-00-019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b.jsonl";

struct Home {
    tmp: TempDir,
    home: PathBuf,
}

impl Home {
    fn new(tag: &str) -> Result<Home> {
        let tmp = TempDir::try_new(tag)?;
        let home = tmp.path().join("home");
        fs_err::create_dir_all(&home)?;
        Ok(Home { tmp, home })
    }

    fn run(&self, args: &[&str]) -> Result<(i32, String, String)> {
        let (code, out, err) = outcome(in_home(&self.home, self.tmp.path()).args(args))?;
        let tmp = self.tmp.path().to_string_lossy();
        Ok((code, out.replace(&*tmp, "{tmp}"), err.replace(&*tmp, "{tmp}")))
    }

    fn json(&self, args: &[&str]) -> Result<Value> {
        let (code, out, err) = self.run(args)?;
        if code != 0 {
            return Err(format!("session {args:?}: {err}").into());
        }
        Ok(serde_json::from_str(&out)?)
    }

    /// Copies the fixture `rel` to `place` below this home; returns the copy.
    fn put(&self, rel: &str, place: &str) -> Result<PathBuf> {
        let to = self.home.join(place);
        fs_err::create_dir_all(to.parent().ok_or("a folder")?)?;
        fs_err::copy(fixture(rel), &to)?;
        Ok(to)
    }

    fn path(&self, p: &Value) -> Result<PathBuf> {
        Ok(PathBuf::from(p.as_str().ok_or("a path")?.replace("{tmp}", &self.tmp.path().to_string_lossy())))
    }
}

/// Where Codex keeps the rollout `rel` below its home.
fn codex_place(rel: &str) -> String {
    format!(".codex/sessions/2026/03/03/{}", rel.rsplit('/').next().unwrap_or(rel))
}

/// A Claude Code transcript becomes a pi session in pi's bucket of its cwd, which our
/// `check` finds sound and whose context is the source's active branch; the source is
/// left as it was, and a second import writes nothing.
#[test]
fn claude_into_pi_reads_back_and_imports_once() -> Result<()> {
    let h = Home::new("import-claude-pi")?;
    let src = fixture("claude/branched.jsonl");
    let before = fs_err::read(&src)?;
    let mtime = fs_err::metadata(&src)?.modified()?;
    let (code, out, _) = h.run(&["import", s(&src)?, "--to", "pi", "--json"])?;
    assert_eq!(code, 0);
    expect![[r#"
        {"path":"{tmp}/home/.pi/agent/sessions/--home-me-proj--/2026-03-01T10-00-00-000Z_7f3c2a10-5b6e-4d8f-9a21-0c4e8b7d6f51.jsonl","agent":"pi","source":"claude","sessionId":"7f3c2a10-5b6e-4d8f-9a21-0c4e8b7d6f51","cwd":"/home/me/proj","created":true,"appended":21,"differing":[],"leaf":"0c11e603","forkedFrom":null,"parentSession":null,"diagnostics":[{"line":21,"kind":"damaged","message":"not a JSON object: skipped"},{"line":23,"kind":"unknown-kind","message":"record kind \"x-future-kind\": kept as custom"}]}
    "#]]
    .assert_eq(&out);
    let report: Value = serde_json::from_str(&out)?;
    let file = h.path(&report["path"])?;
    let f = s(&file)?;
    let (code, _, _) = h.run(&["check", f])?;
    assert_eq!(code, 0, "check finds nothing to report");
    let info = h.json(&["info", f, "--json"])?;
    assert_eq!(info["name"], "Fix add");
    assert_eq!(info["leafId"], report["leaf"]);
    let (_, context, _) = h.run(&["context", f, "--text"])?;
    expect![[r#"
        ── user ──
        Fix the failing test in src/lib.rs
        ── assistant ──
        (thinking) The user wants the test fixed. Read the file first.
        Let me look at the file.
        → Read {"file_path":"/home/me/proj/src/lib.rs"}
        ← Read: pub fn add(a: i32, b: i32) -> i32 { a - b }
        ── assistant ──
        → Bash {"command":"cargo test","description":"Run the tests"}
        ← Bash (error): test tests::adds ... FAILED
        ── assistant ──
        `add` subtracts. Shall I fix it?
        ── user ──
        Just fix the operator.
        ── assistant ──
        Fixed: `a + b`.
        8 message(s)
    "#]]
    .assert_eq(&context);
    let written = fs_err::read(&file)?;
    let again = h.json(&["import", s(&src)?, "--to", "pi", "--json"])?;
    assert_eq!((again["created"].clone(), again["appended"].clone()), (Value::Bool(false), Value::from(0)));
    assert_eq!(fs_err::read(&file)?, written, "importing again writes nothing");
    let (_, text, _) = h.run(&["import", s(&src)?, "--to", "pi", "--text"])?;
    assert!(
        text.starts_with("{tmp}/home/.pi/agent/sessions/--home-me-proj--/") && text.contains("nothing written"),
        "{text}"
    );
    assert_eq!(fs_err::read(&src)?, before, "the source is never written");
    assert_eq!(fs_err::metadata(&src)?.modified()?, mtime);
    assert!(!h.home.join(".claude").exists() && !h.home.join(".codex").exists());
    Ok(())
}

/// `info`, `context` and `tree` read a Claude Code transcript or a Codex rollout (zstd
/// too) as the pi session its import writes, built in memory: the answers are those of
/// the imported session, and nothing is written anywhere.
#[test]
fn other_agents_sessions_read_as_their_import() -> Result<()> {
    let h = Home::new("read-foreign")?;
    let src = fixture("claude/branched.jsonl");
    let imported = h.tmp.path().join("imported");
    let report = h.json(&["import", s(&src)?, "--to", "pi", "--session-dir", s(&imported)?, "--json"])?;
    let file = h.path(&report["path"])?;
    let before = Tree::read(h.tmp.path())?;
    let (src_dir, imported_dir) = (src.parent().ok_or("a folder")?.to_string_lossy().into_owned(), "{tmp}/imported");
    for args in [&["info", "--json"][..], &["context", "--text"], &["tree", "--json"]] {
        let (code, direct, err) = h.run(&[args[0], s(&src)?, args[1]])?;
        assert_eq!(code, 0, "{args:?}: {err}");
        let (code, via_import, err) = h.run(&[args[0], s(&file)?, args[1]])?;
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(!direct.is_empty());
        // `info` of the source names it, with what its import skipped or kept.
        let direct = if args[0] == "info" {
            let mut v: Value = serde_json::from_str(&direct)?;
            let source = v.as_object_mut().and_then(|o| o.remove("source")).ok_or("info names the source")?;
            let want = serde_json::json!({"agent": "claude", "path": s(&src)?, "importNotes": 2});
            assert_eq!(source, want);
            format!("{v}\n")
        } else {
            direct
        };
        // The one difference: the folder of the session read (the source's, built in
        // memory beside it, or the one the import wrote into).
        assert_eq!(direct.replace(&src_dir, "{dir}"), via_import.replace(imported_dir, "{dir}"), "{args:?}");
    }
    let codex = h.json(&["info", s(&fixture(CODEX))?, "--json"])?;
    assert_eq!(codex["name"], "List files and patch add");
    assert!(before.changed(&Tree::read(h.tmp.path())?).is_empty(), "reading wrote nothing");
    // A pi session whose entries carry Claude Code's keys is read as the pi session it is.
    let pi = h.tmp.path().join("pi.jsonl");
    fs_err::write(
        &pi,
        concat!(
            r#"{"type":"session","version":3,"id":"0195f3a2-0000-7000-8000-000000000001","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
            "\n",
            r#"{"type":"custom","customType":"x","id":"a1b2c3d4","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","sessionId":"s","uuid":"u"}"#,
            "\n"
        ),
    )?;
    let before = Tree::read(h.tmp.path())?;
    let info = h.json(&["info", s(&pi)?, "--json"])?;
    assert_eq!(info["header"]["id"], "0195f3a2-0000-7000-8000-000000000001", "{info}");
    assert!(before.changed(&Tree::read(h.tmp.path())?).is_empty(), "reading wrote nothing");
    Ok(())
}

/// `import ID` takes the session of Claude Code or Codex whose id begins so, from each
/// agent's home (`CLAUDE_CONFIG_DIR` moves Claude Code's); an id that names none, or more
/// than one, is an error saying which.
#[test]
fn import_by_id_finds_the_session_in_its_agents_home() -> Result<()> {
    let h = Home::new("import-by-id")?;
    let claude_home = h.tmp.path().join("claude-config");
    let claude_id = "7f3c2a10-5b6e-4d8f-9a21-0c4e8b7d6f51";
    let claude = claude_home.join("projects/-home-me-proj").join(format!("{claude_id}.jsonl"));
    fs_err::create_dir_all(claude.parent().ok_or("a folder")?)?;
    fs_err::copy(fixture("claude/branched.jsonl"), &claude)?;
    h.put(CODEX, &codex_place(CODEX))?;
    let run = |args: &[&str]| outcome(in_home(&h.home, h.tmp.path()).env("CLAUDE_CONFIG_DIR", &claude_home).args(args));
    let (code, out, err) = run(&["import", "7F3C2A", "--to", "pi", "--json"])?;
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&out)?;
    assert_eq!((report["source"].as_str(), report["sessionId"].as_str()), (Some("claude"), Some(claude_id)));
    let (code, out, err) = run(&["import", "019a1b2c", "--to", "omp", "--json"])?;
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&out)?;
    assert_eq!(report["source"].as_str(), Some("codex"));
    // None, and more than one (a prefix both ids share is none here: one of each).
    let (code, _, err) = run(&["import", "deadbeef", "--to", "pi"])?;
    assert_ne!(code, 0);
    assert!(err.contains("deadbeef: no such file") && err.contains("claude-config/projects"), "{err}");
    let twin = claude.with_file_name("7f3c2a10-0000-4000-8000-000000000000.jsonl");
    fs_err::copy(&claude, &twin)?;
    let (code, _, err) = run(&["import", "7f3c2a10", "--to", "pi"])?;
    assert_ne!(code, 0);
    assert!(err.contains("2 sessions have an id beginning so") && err.contains(claude_id), "{err}");
    Ok(())
}

/// A Codex rollout becomes an omp session with its title in the title slot, its model
/// from `turn_context`, and its compaction.
#[test]
fn codex_into_omp_with_title_model_and_compaction() -> Result<()> {
    let h = Home::new("import-codex-omp")?;
    let report = h.json(&["import", s(&fixture(CODEX))?, "--to", "omp", "--json"])?;
    let file = h.path(&report["path"])?;
    assert!(file.starts_with(h.home.join(".omp/agent/sessions")), "{}", file.display());
    let f = s(&file)?;
    assert_eq!(h.run(&["check", f])?.0, 0);
    let info = h.json(&["info", f, "--json"])?;
    assert_eq!(info["name"], "List files and patch add");
    let text = fs_err::read_to_string(&file)?;
    assert!(text.starts_with(r#"{"type":"title","v":1,"title":"List files and patch add","source":"user""#));
    assert!(text.contains(r#""type":"model_change","id":"#) && text.contains(r#""model":"openai/gpt-5-codex""#));
    let ctx = h.json(&["context", f, "--json"])?;
    let roles: Vec<&str> =
        ctx["messages"].as_array().ok_or("messages")?.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["compactionSummary", "user", "assistant"]);
    Ok(())
}

/// A source that grew is imported again: only its new entries are appended, and the
/// session is the one a whole import of the grown source writes.
#[test]
fn a_grown_source_appends_only_what_is_new() -> Result<()> {
    for (rel, cut, dialect) in [(CODEX, 16, "pi"), (CODEX, 16, "omp"), ("claude/branched.jsonl", 13, "pi")] {
        let h = Home::new(&format!("import-grow-{dialect}-{cut}-{}", rel.len()))?;
        let whole_text = fs_err::read_to_string(fixture(rel))?;
        let src = h.tmp.path().join(Path::new(rel).file_name().ok_or("a name")?);
        let prefix: String = whole_text.split_inclusive('\n').take(cut).collect();
        fs_err::write(&src, &prefix)?;
        let first = h.json(&["import", s(&src)?, "--to", dialect, "--json"])?;
        fs_err::write(&src, &whole_text)?;
        let second = h.json(&["import", s(&src)?, "--to", dialect, "--json"])?;
        assert_eq!(second["path"], first["path"]);
        assert_eq!(second["created"], false);
        let grown = h.path(&second["path"])?;

        let w = Home::new(&format!("import-whole-{dialect}-{cut}-{}", rel.len()))?;
        let whole = w.json(&["import", s(&fixture(rel))?, "--to", dialect, "--json"])?;
        let fresh = w.path(&whole["path"])?;
        let differing = second["differing"].as_array().ok_or("a list")?;
        if rel == CODEX {
            assert!(differing.is_empty(), "{differing:?}");
        } else {
            // The prefix's best title was the leading `summary`, a session_info then; the
            // grown source's `custom-title` wins, so the summary is a custom entry now.
            // The first import's bytes are kept; the new title comes later in the file.
            let text = fs_err::read_to_string(&fresh)?;
            let id = differing.first().and_then(Value::as_str).ok_or("one differing entry")?;
            assert_eq!(differing.len(), 1);
            assert!(
                text.lines().any(|l| l.contains(&format!(r#""id":"{id}""#)) && l.contains("import:claude:summary"))
            );
        }
        let appended = first["appended"].as_u64().ok_or("a count")? + second["appended"].as_u64().ok_or("a count")?;
        assert_eq!(appended, whole["appended"].as_u64().ok_or("a count")?, "{rel}: every entry written once");
        for q in ["context", "info"] {
            let a = h.json(&[q, s(&grown)?, "--json"])?;
            let b = w.json(&[q, s(&fresh)?, "--json"])?;
            assert_eq!(a, b, "{rel} {dialect}: {q} of the grown import");
        }
        if rel == CODEX {
            // A rollout is linear: appending gives the very bytes of a whole import.
            assert_eq!(fs_err::read(&grown)?, fs_err::read(&fresh)?);
        }
    }
    Ok(())
}

/// `--cwd` puts the session in another project's bucket; a file neither agent wrote is
/// refused, naming it, and nothing is written.
#[test]
fn cwd_override_and_unrecognised_sources() -> Result<()> {
    let h = Home::new("import-cwd")?;
    let project = h.tmp.path().join("elsewhere");
    let report =
        h.json(&["import", s(&fixture("claude/compacted.jsonl"))?, "--to", "pi", "--cwd", s(&project)?, "--json"])?;
    assert_eq!(report["cwd"], s(&project)?.replace(&*h.tmp.path().to_string_lossy(), "{tmp}"));
    let info = h.json(&["info", s(&h.path(&report["path"])?)?, "--json"])?;
    assert_eq!(info["header"]["cwd"], "{tmp}/elsewhere");
    let bad = h.tmp.path().join("notes.jsonl");
    fs_err::write(&bad, "hello\n{\"a\":1}\n")?;
    let (code, out, err) = h.run(&["import", s(&bad)?, "--to", "omp"])?;
    assert_eq!((code, out.as_str()), (1, ""));
    expect![[r#"
        error: cannot import {tmp}/notes.jsonl
          caused by: not a Claude Code transcript or a Codex rollout: no line has either's shape
    "#]]
    .assert_eq(&err);
    assert!(!h.home.join(".omp").exists());
    let (code, help, _) = h.run(&["import", "--help"])?;
    assert_eq!(code, 0);
    assert!(help.contains("Example: session import"));
    Ok(())
}

/// A Codex fork imported after its parent names the parent's import as
/// `parentSession`; imported alone it only reports the parent.
#[test]
fn a_fork_links_to_its_imported_parent() -> Result<()> {
    let fork = fixture("codex/rollout-2026-03-04T08-00-00-019a1b2c-9999-7f60-8a9b-0c1d2e3f4a5c.jsonl");
    let alone = Home::new("import-fork-alone")?;
    let r = alone.json(&["import", s(&fork)?, "--to", "pi", "--json"])?;
    assert_eq!(
        (r["forkedFrom"].as_str(), r["parentSession"].clone()),
        (Some("019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b"), Value::Null)
    );
    for dialect in ["pi", "omp"] {
        let h = Home::new(&format!("import-fork-{dialect}"))?;
        let parent = h.json(&["import", s(&fixture(CODEX))?, "--to", dialect, "--json"])?;
        let child = h.json(&["import", s(&fork)?, "--to", dialect, "--json"])?;
        assert_eq!(child["parentSession"], parent["path"]);
        let info = h.json(&["info", s(&h.path(&child["path"])?)?, "--json"])?;
        assert_eq!(info["header"]["parentSession"], parent["path"]);
    }
    Ok(())
}

/// A Codex `.jsonl.zst` imports as its plain rollout does: the same session, so the
/// plain file imported after it writes nothing.
#[test]
fn a_compressed_rollout_imports_as_the_plain_one() -> Result<()> {
    let h = Home::new("import-zst")?;
    let zst = fixture(&format!("{CODEX}.zst"));
    let first = h.json(&["import", s(&zst)?, "--to", "pi", "--json"])?;
    assert_eq!(first["created"], true);
    let again = h.json(&["import", s(&fixture(CODEX))?, "--to", "pi", "--json"])?;
    assert_eq!((again["path"].clone(), again["appended"].clone()), (first["path"].clone(), Value::from(0)));
    Ok(())
}

/// `ls` and `search` read Claude Code's and Codex's homes beside pi's and omp's
/// (`--agent` narrows them): each listed as pi lists its import, a cwd's only in its
/// listing, hits naming the source file and the imported entry; their homes keep their
/// bytes and nothing new appears in them.
#[test]
fn listed_and_searched_beside_pi_and_omp() -> Result<()> {
    let h = Home::new("others-ls-search")?;
    let claude_id = "7f3c2a10-5b6e-4d8f-9a21-0c4e8b7d6f51";
    let claude = h.put("claude/branched.jsonl", &format!(".claude/projects/-home-me-proj/{claude_id}.jsonl"))?;
    let other = ".claude/projects/-home-me-other/0b9d7e21-3c4a-4f5b-8e6d-a1b2c3d4e5f6.jsonl";
    let elsewhere = h.put("claude/compacted.jsonl", other)?;
    h.put(CODEX, &codex_place(CODEX))?;
    // A pi session of the same project, written by the import.
    let (code, _, err) = h.run(&["import", s(&elsewhere)?, "--to", "pi", "--cwd", "/home/me/proj"])?;
    assert_eq!(code, 0, "{err}");
    let before = (Tree::read(&h.home.join(".claude"))?, Tree::read(&h.home.join(".codex"))?);
    let rows = |v: &Value| -> Vec<(String, String)> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .map(|r| {
                        (r["agent"].as_str().unwrap_or("?").to_owned(), r["id"].as_str().unwrap_or("?").to_owned())
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let codex_id = "019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b";
    let here = h.json(&["ls", "--cwd", "/home/me/proj", "--json"])?;
    let got = rows(&here);
    assert_eq!(got.len(), 3, "{here}");
    assert!(got.contains(&("claude".into(), claude_id.into())) && got.contains(&("codex".into(), codex_id.into())));
    assert!(got.contains(&("pi".into(), "0b9d7e21-3c4a-4f5b-8e6d-a1b2c3d4e5f6".into())), "{got:?}");
    let entry = here.as_array().and_then(|a| a.iter().find(|r| r["agent"] == "claude")).ok_or("the transcript")?;
    assert_eq!(h.path(&entry["path"])?, claude);
    assert_eq!(entry["name"], "Fix add");
    assert_eq!((entry["pinned"].as_bool(), entry["archived"].as_bool()), (Some(false), Some(false)));
    // Every project's; one agent's; --dialect keeps its reference's own listing.
    assert_eq!(rows(&h.json(&["ls", "--all", "--json"])?).len(), 4);
    let only = rows(&h.json(&["ls", "--all", "--agent", "claude", "--json"])?);
    assert_eq!(only.iter().filter(|r| r.0 == "claude").count(), 2);
    assert_eq!(only.len(), 2);
    let pi = h.json(&["ls", "--all", "--dialect", "pi", "--json"])?;
    assert_eq!(pi.as_array().map(Vec::len), Some(1));
    assert!(pi[0].get("agent").is_none(), "{pi}");
    let (code, _, err) = h.run(&["ls", "--agent", "codex", "--dialect", "pi"])?;
    assert!(code != 0 && err.contains("--agent and --dialect"), "{err}");
    let (code, _, err) = h.run(&["ls", "--agent", "claude", s(&h.home)?])?;
    assert!(code != 0 && err.contains("not from a session DIR"), "{err}");
    // Search: a tool result of the transcript, a patch of the rollout.
    let hits = h.json(&["search", "subtracts", "--all", "--json"])?;
    let hit = &hits["hits"][0];
    assert_eq!((hit["agent"].as_str(), hit["sessionId"].as_str()), (Some("claude"), Some(claude_id)), "{hits}");
    assert!(hit["snippet"].as_str().is_some_and(|s| s.contains("subtracts")), "{hit}");
    // The hit's entry is an imported entry of the source: `entries` lists its id.
    let entries = h.json(&["entries", s(&claude)?, "--json"])?;
    assert!(entries.as_array().ok_or("entries")?.contains(&hit["entryId"]), "{} not in {entries}", hit["entryId"]);
    let hits = h.json(&["search", "apply_patch", "--cwd", "/home/me/proj", "--agent", "codex", "--json"])?;
    let agents: Vec<&str> = hits["hits"].as_array().ok_or("hits")?.iter().filter_map(|h| h["agent"].as_str()).collect();
    assert!(!agents.is_empty() && agents.iter().all(|a| *a == "codex"), "{hits}");
    // A cwd's search leaves other projects' transcripts out.
    let hits = h.json(&["search", "compact", "--cwd", "/home/me/elsewhere", "--agent", "claude", "--json"])?;
    assert_eq!(hits["hits"].as_array().map(Vec::len), Some(0), "{hits}");
    assert_eq!((Tree::read(&h.home.join(".claude"))?, Tree::read(&h.home.join(".codex"))?), before);
    Ok(())
}

/// `usage` and `stats` count Claude Code's and Codex's sessions as their imports read
/// them: one API response written as several lines counts once, a transcript imported
/// into pi is counted once however many homes hold it, and the homes are only read.
#[test]
fn usage_and_stats_over_other_agents() -> Result<()> {
    let h = Home::new("others-usage")?;
    let claude =
        h.put("claude/branched.jsonl", ".claude/projects/-home-me-proj/7f3c2a10-5b6e-4d8f-9a21-0c4e8b7d6f51.jsonl")?;
    let codex = h.put(CODEX, &codex_place(CODEX))?;
    let before = (fs_err::read(&claude)?, fs_err::read(&codex)?);
    let totals = |v: &Value| -> Vec<f64> {
        ["input", "output", "cacheRead", "cacheWrite", "records"]
            .iter()
            .map(|k| v["total"][*k].as_f64().unwrap_or(-1.0))
            .collect()
    };
    // The transcript's five API responses (one of them written as three lines).
    let only = h.json(&["usage", "--agent", "claude", "--json"])?;
    assert_eq!(totals(&only), [890.0, 138.0, 4600.0, 50.0, 5.0], "{only}");
    assert_eq!((only["repeated"].as_u64(), only["unreadable"].as_u64()), (Some(0), Some(0)));
    let by_model = h.json(&["usage", "--agent", "codex", "--by", "model", "--json"])?;
    let rows: Vec<(&str, f64, f64)> = by_model["rows"]
        .as_array()
        .ok_or("rows")?
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap_or("?"),
                r["input"].as_f64().unwrap_or(-1.0),
                r["records"].as_f64().unwrap_or(-1.0),
            )
        })
        .collect();
    assert_eq!(rows, [("openai/gpt-5", 2100.0, 2.0), ("openai/gpt-5-codex", 0.0, 3.0)], "{by_model}");
    // Both, by default with pi's and omp's (none here).
    let all = h.json(&["usage", "--json"])?;
    assert_eq!(totals(&all), [2990.0, 213.0, 12600.0, 50.0, 10.0], "{all}");
    // Imported into pi, the transcript's records are the same records: counted once.
    let (code, _, err) = h.run(&["import", s(&claude)?, "--to", "pi"])?;
    assert_eq!(code, 0, "{err}");
    let both = h.json(&["usage", "--agent", "pi,claude", "--json"])?;
    assert_eq!(totals(&both), [890.0, 138.0, 4600.0, 50.0, 5.0], "{both}");
    assert_eq!(both["repeated"].as_u64(), Some(5), "{both}");
    // stats: sessions, bytes and entries as the imports hold them.
    let stats = h.json(&["stats", "--agent", "claude,codex", "--json"])?;
    assert_eq!(stats["sessions"].as_u64(), Some(2), "{stats}");
    assert_eq!(stats["bytes"].as_u64(), Some((before.0.len() + before.1.len()) as u64));
    assert_eq!(stats["entriesByType"]["compaction"].as_u64(), Some(1), "{stats}");
    assert_eq!(stats["tokens"]["input"].as_f64(), Some(2990.0), "{stats}");
    let codex_only = h.json(&["stats", "--agent", "codex", "--json"])?;
    assert_eq!((codex_only["sessions"].as_u64(), codex_only["bytes"].as_u64()), (Some(1), Some(before.1.len() as u64)));
    assert_eq!((fs_err::read(&claude)?, fs_err::read(&codex)?), before);
    Ok(())
}

/// What `info`, `context`, `export` and `usage` print of each fixture, alone in its
/// agent's home: snapshots beside the fixtures (`testdata/import/cli/`; `UPDATE_EXPECT=1`
/// writes them anew).
#[test]
fn every_reader_on_each_fixture() -> Result<()> {
    let claude = |id: &str| format!(".claude/projects/-home-me-proj/{id}.jsonl");
    let fork = "codex/rollout-2026-03-04T08-00-00-019a1b2c-9999-7f60-8a9b-0c1d2e3f4a5c.jsonl";
    let zst = format!("{CODEX}.zst");
    // The files in the home (fixture, place; the last one is read), the snapshot.
    type Case<'a> = (Vec<(&'a str, String)>, expect_test::ExpectFile);
    let cases: [Case; 6] = [
        (
            vec![("claude/branched.jsonl", claude("7f3c2a10-5b6e-4d8f-9a21-0c4e8b7d6f51"))],
            expect_file!["../../../../testdata/import/cli/claude-branched.txt"],
        ),
        (
            vec![("claude/compacted.jsonl", claude("0b9d7e21-3c4a-4f5b-8e6d-a1b2c3d4e5f6"))],
            expect_file!["../../../../testdata/import/cli/claude-compacted.txt"],
        ),
        (
            vec![("claude/parallel.jsonl", claude("5d1e9c42-7a3b-4e2f-b6c8-90d1e2f3a4b5"))],
            expect_file!["../../../../testdata/import/cli/claude-parallel.txt"],
        ),
        (vec![(CODEX, codex_place(CODEX))], expect_file!["../../../../testdata/import/cli/codex-rollout.txt"]),
        (
            vec![(CODEX, codex_place(CODEX)), (fork, codex_place(fork))],
            expect_file!["../../../../testdata/import/cli/codex-fork.txt"],
        ),
        (vec![(&zst, codex_place(&zst))], expect_file!["../../../../testdata/import/cli/codex-zst.txt"]),
    ];
    for (files, expect) in cases {
        let h = Home::new("others-readers")?;
        let mut target = PathBuf::new();
        for (from, to) in &files {
            target = h.put(from, to)?;
        }
        let (name, _) = files.last().ok_or("a file")?;
        let before = fs_err::read(&target)?;
        let f = s(&target)?;
        let mut out = String::new();
        for args in [
            &["--text", "info", f][..],
            &["--json", "info", f],
            &["--text", "context", f],
            &["export", f],
            &["--text", "usage", "--by", "model", "--no-cache"],
        ] {
            let (code, stdout, stderr) = h.run(args)?;
            out.push_str(&format!("$ session {}\n", args.join(" ").replace(&*h.tmp.path().to_string_lossy(), "{tmp}")));
            out.push_str(&stdout);
            if !stdout.ends_with('\n') {
                out.push('\n');
            }
            if code != 0 || !stderr.is_empty() {
                out.push_str(&format!("[exit {code}] {stderr}\n"));
            }
        }
        expect.assert_eq(&out);
        assert_eq!(fs_err::read(&target)?, before, "{name}: the source is only read");
    }
    Ok(())
}
