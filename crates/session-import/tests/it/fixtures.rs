//! Each fixture imported, rendered as its diagnostics, its records and the context pi
//! builds at the leaf, compared with the snapshot beside it (`*.expected`;
//! `UPDATE_EXPECT=1` rewrites them).

use std::fmt::Write;
use std::path::{Path, PathBuf};

use expect_test::{ExpectFile, expect_file};
use serde_json::Value;
use session_import::{Imported, SourceKind};
use session_model::Dialect;
use session_tree::{Leaf, SessionTree};

use super::Result;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/import").join(rel)
}

/// A line for each context message: its role and a short account of its content.
pub(crate) fn context_lines(imported: &Imported) -> Vec<String> {
    let tree = SessionTree::new(Dialect::Pi, imported.entries.clone());
    let ctx = session_tree::pi::build_context(&tree, Leaf::Current);
    ctx.messages()
        .map(|m| {
            let v: Value = serde_json::from_str(m).unwrap_or(Value::Null);
            let role = v.get("role").and_then(Value::as_str).unwrap_or("?").to_owned();
            let what = match v.get("content") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(blocks)) => blocks
                    .iter()
                    .map(|b| match b.get("type").and_then(Value::as_str) {
                        Some("text") => b.get("text").and_then(Value::as_str).unwrap_or_default().to_owned(),
                        Some("toolCall") => {
                            format!("[call {}]", b.get("name").and_then(Value::as_str).unwrap_or_default())
                        }
                        Some(other) => format!("[{other}]"),
                        None => "[?]".to_owned(),
                    })
                    .collect::<Vec<_>>()
                    .join(" | "),
                _ => v.get("summary").and_then(Value::as_str).unwrap_or_default().to_owned(),
            };
            format!("{role}: {what}")
        })
        .collect()
}

fn render(imported: &Imported) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# source: {} session {}", imported.kind.name(), imported.session_id);
    let _ =
        writeln!(out, "# cwd {:?}, start {}, forked from {:?}", imported.cwd, imported.timestamp, imported.forked_from);
    let _ = writeln!(out, "# title {:?}", imported.title);
    out.push_str("# diagnostics\n");
    for d in &imported.diagnostics {
        let _ = writeln!(out, "{d}");
    }
    out.push_str("# records\n");
    for r in imported.records(None) {
        out.push_str(&r.line());
        out.push('\n');
    }
    out.push_str("# context at the leaf (pi)\n");
    for l in context_lines(imported) {
        let _ = writeln!(out, "{l}");
    }
    out
}

fn check(rel: &str, kind: SourceKind, expect: ExpectFile) -> Result {
    let bytes = fs_err::read(fixture(rel))?;
    assert_eq!(SourceKind::detect(&bytes), Some(kind));
    let imported = session_import::import(&bytes)?;
    let again = session_import::import(&bytes)?;
    assert_eq!(render(&imported), render(&again), "the same bytes give the same records");
    expect.assert_eq(&render(&imported));
    Ok(())
}

/// A branched Claude Code session: a response over three lines, tool results (one an
/// error), a rewind, a model switch, a sidechain, titles, a damaged line, unknown kinds.
#[test]
fn claude_branched() -> Result {
    check(
        "claude/branched.jsonl",
        SourceKind::ClaudeCode,
        expect_file!["../../../../testdata/import/claude/branched.expected"],
    )
}

/// A Claude Code compaction (boundary + summary), an image, an `isMeta` line and an orphan.
#[test]
fn claude_compacted() -> Result {
    check(
        "claude/compacted.jsonl",
        SourceKind::ClaudeCode,
        expect_file!["../../../../testdata/import/claude/compacted.expected"],
    )
}

/// A Codex rollout: scaffolding, reasoning, function and custom tool calls with string
/// and list outputs, usage from `token_count`, a model switch, a compaction, a title,
/// a damaged line and unknown kinds.
#[test]
fn codex_rollout() -> Result {
    check(
        "codex/rollout-2026-03-03T08-00-00-019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b.jsonl",
        SourceKind::Codex,
        expect_file!["../../../../testdata/import/codex/rollout.expected"],
    )
}

/// A Codex fork: `forked_from_id` is reported, the copied history imported.
#[test]
fn codex_fork() -> Result {
    check(
        "codex/rollout-2026-03-04T08-00-00-019a1b2c-9999-7f60-8a9b-0c1d2e3f4a5c.jsonl",
        SourceKind::Codex,
        expect_file!["../../../../testdata/import/codex/fork.expected"],
    )
}

/// Bytes that neither agent wrote are refused with a reason; damage alone is not.
#[test]
fn unrecognised_and_damaged_sources() -> Result {
    assert!(matches!(session_import::import(b"hello\n{}\n"), Err(session_import::ImportError::Unrecognised)));
    let torn = br#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s1","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"hi"}}
{"type":"assistant","uuid":"#;
    let imported = session_import::import(torn)?;
    assert_eq!(imported.entries.len(), 1);
    assert_eq!(imported.diagnostics.len(), 1);
    assert_eq!(imported.diagnostics[0].line, 2);
    Ok(())
}

/// A subagent's own transcript (every line `isSidechain`) imports as a conversation,
/// not as custom entries.
#[test]
fn a_subagent_transcript_is_its_own_main_chain() -> Result {
    let text = concat!(
        r#"{"type":"user","uuid":"s1","parentUuid":null,"isSidechain":true,"agentId":"a1","sessionId":"p","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"find callers"}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"s2","parentUuid":"s1","isSidechain":true,"agentId":"a1","sessionId":"p","timestamp":"2026-01-01T00:00:01.000Z","message":{"id":"m","role":"assistant","model":"x","content":[{"type":"text","text":"one"}]}}"#,
        "\n",
    );
    let imported = session_import::import(text.as_bytes())?;
    assert_eq!(context_lines(&imported), ["user: find callers", "assistant: one"]);
    Ok(())
}

/// A Codex `.jsonl.zst` (made with the zstd command from the plain fixture) imports to
/// the plain file's records; several frames decode in order; a damaged or oversized
/// one is refused with a reason.
#[test]
fn compressed_rollouts() -> Result {
    let plain = fs_err::read(fixture("codex/rollout-2026-03-03T08-00-00-019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b.jsonl"))?;
    let zst =
        fs_err::read(fixture("codex/rollout-2026-03-03T08-00-00-019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b.jsonl.zst"))?;
    assert!(session_import::zst::is_zstd(&zst) && !session_import::zst::is_zstd(&plain));
    assert_eq!(render(&session_import::import(&zst)?), render(&session_import::import(&plain)?));
    let twice = [zst.as_slice(), zst.as_slice()].concat();
    assert_eq!(session_import::zst::decompress(&twice, 1 << 20)?, [plain.as_slice(), plain.as_slice()].concat());
    assert!(matches!(
        session_import::zst::decompress(&zst, 100),
        Err(session_import::ImportError::TooLarge { limit: 100 })
    ));
    // A frame inside a frame is decoded once and refused, never layer after layer.
    let once = raw_frame(&plain);
    assert_eq!(render(&session_import::import(&once)?), render(&session_import::import(&plain)?));
    let nested = raw_frame(&once);
    let got = session_import::import(&nested);
    assert!(matches!(got, Err(session_import::ImportError::Unrecognised)), "{got:?}");
    let cut = &zst[..zst.len() / 2];
    let err = session_import::import(cut).err().ok_or("a cut frame is refused")?;
    assert!(matches!(err, session_import::ImportError::Compressed { offset: 0, .. }), "{err}");
    Ok(())
}

/// Parallel tool calls: results written as siblings under one response are chained; a
/// response continued after a result keeps one message with both calls.
#[test]
fn claude_parallel_calls() -> Result {
    check(
        "claude/parallel.jsonl",
        SourceKind::ClaudeCode,
        expect_file!["../../../../testdata/import/claude/parallel.expected"],
    )
}

/// `content` as one zstd frame holding one raw (stored) block: magic, a single-segment
/// frame header with a 2-byte content size, the block header, the bytes.
fn raw_frame(content: &[u8]) -> Vec<u8> {
    let n = content.len();
    assert!((256..65_536 + 256).contains(&n) && n < 1 << 21, "a size this helper writes");
    let mut out = vec![0x28, 0xB5, 0x2F, 0xFD, 0x60];
    out.extend_from_slice(&u16::try_from(n - 256).unwrap_or(u16::MAX).to_le_bytes());
    let block = 1 | (u32::try_from(n).unwrap_or(0) << 3);
    out.extend_from_slice(&block.to_le_bytes()[..3]);
    out.extend_from_slice(content);
    out
}
