//! Claude Code's and Codex's sessions listed and searched beside pi's: 10,000 sessions of
//! each, holding the same conversations (each generated pi session written again as a
//! Claude Code transcript and as a Codex rollout), so the three differ only in format.
//!
//! * `list/<agent>`: a listing of every session without the listing cache (pi's by
//!   `Discovery::list_all`, the others' by `Discovery::list_others`, which reads each
//!   file through its import);
//! * `list/<agent>/cached`: the same through a warm listing cache (`session ls`);
//! * `first-index/<agent>`: the search catalog built from nothing, then one query;
//! * `read-floor`: reading every pi file whole on every core, the least any listing
//!   that reads whole files costs.
//!
//! Run with `cargo bench -p agent-session-store --bench others` (or `cargo xtask bench`);
//! `SESSION_BENCH_OTHERS=N` lists N sessions of each instead.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use session::Dialect;
use session::discovery::{AgentDirs, Discovery, ProcessEnv};
use session::history::Catalog;
use session::search::{SearchIndex, SessionFile};
use session::store::{FileStorage, PrivateDir, Storage};

use session_testkit::TempDir;
use session_testkit::generate;

/// The same session as `generate` writes it for pi, as Claude Code and as Codex would.
struct Three {
    pi: String,
    claude: String,
    codex: String,
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => {
            blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
        }
        _ => String::new(),
    }
}

fn three(i: usize) -> Three {
    let opts = generate::Options {
        avg_bytes: 1584,
        cwd: "/tmp/proj".into(),
        ..generate::Options::bench(Dialect::Pi, 12, 44 * 100_003 + i as u64)
    };
    let pi = generate::session(&opts);
    let id = format!("0195f3a2-7c1e-7d40-9a4b-{i:012x}");
    let mut claude = String::new();
    let mut codex = String::new();
    let line = |out: &mut String, v: Value| {
        out.push_str(&v.to_string());
        out.push('\n');
    };
    line(
        &mut codex,
        json!({"timestamp": "2026-01-01T00:00:00.000Z", "type": "session_meta", "payload": {"id": id, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/tmp/proj", "originator": "codex_cli_rs", "cli_version": "0.128.0"}}),
    );
    let mut parent: Option<String> = None;
    for (n, raw) in pi.lines().enumerate().skip(1) {
        let Ok(r) = serde_json::from_str::<Value>(raw) else { continue };
        let ts = r["timestamp"].as_str().unwrap_or("2026-01-01T00:00:01.000Z").to_owned();
        let m = &r["message"];
        let base = |uuid: &str, parent: &Option<String>| json!({"parentUuid": parent, "isSidechain": false, "userType": "external", "cwd": "/tmp/proj", "sessionId": id, "version": "2.1.37", "uuid": uuid, "timestamp": ts});
        let mut claude_line = |kind: &str, message: Value, parent: &mut Option<String>, k: usize| {
            let uuid = format!("{:08x}-0000-4000-8000-{n:06x}{k:06x}", i);
            let mut v = base(&uuid, parent);
            v["type"] = kind.into();
            v["message"] = message;
            line(&mut claude, v);
            *parent = Some(uuid);
        };
        let item = |payload: Value| json!({"timestamp": ts, "type": "response_item", "payload": payload});
        match m["role"].as_str() {
            Some("user") => {
                let text = text_of(&m["content"]);
                claude_line("user", json!({"role": "user", "content": text}), &mut parent, 0);
                line(
                    &mut codex,
                    item(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})),
                );
            }
            Some("assistant") => {
                let usage = json!({"input_tokens": 100, "output_tokens": 50});
                for (k, b) in m["content"].as_array().into_iter().flatten().enumerate() {
                    let (block, payload) = match b["type"].as_str() {
                        Some("text") => (
                            json!({"type": "text", "text": b["text"]}),
                            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": b["text"]}]}),
                        ),
                        Some("thinking") => (
                            json!({"type": "thinking", "thinking": b["thinking"], "signature": ""}),
                            json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": b["thinking"]}]}),
                        ),
                        Some("toolCall") => (
                            json!({"type": "tool_use", "id": b["id"], "name": b["name"], "input": b["arguments"]}),
                            json!({"type": "function_call", "name": b["name"], "arguments": b["arguments"].to_string(), "call_id": b["id"]}),
                        ),
                        _ => continue,
                    };
                    let message = json!({"id": format!("msg_{n}"), "role": "assistant", "model": "claude-x", "content": [block], "usage": usage});
                    claude_line("assistant", message, &mut parent, k);
                    line(&mut codex, item(payload));
                }
            }
            Some("toolResult") => {
                let text = text_of(&m["content"]);
                let block =
                    json!({"type": "tool_result", "tool_use_id": m["toolCallId"], "content": text, "is_error": false});
                claude_line("user", json!({"role": "user", "content": [block]}), &mut parent, 0);
                line(
                    &mut codex,
                    item(json!({"type": "function_call_output", "call_id": m["toolCallId"], "output": text})),
                );
            }
            _ => {}
        }
    }
    Three { pi, claude, codex }
}

/// Writes `n` sessions of each agent into `home` as each agent keeps them; returns the
/// files of each (pi, Claude Code, Codex).
fn generate_home(home: &Path, n: usize) -> [Vec<PathBuf>; 3] {
    let pi_dir = home.join(".pi/agent/sessions/--tmp-proj--");
    let claude_dir = home.join(".claude/projects/-tmp-proj");
    let codex_dir = home.join(".codex/sessions/2026/01/01");
    let mut files: [Vec<PathBuf>; 3] = Default::default();
    for dir in [&pi_dir, &claude_dir, &codex_dir] {
        fs_err::create_dir_all(dir).expect("bench dir");
    }
    // Sessions being listed are mostly old (the listing cache rescans files
    // modified in the last seconds).
    let now_ms = session::store::clock::Clock::now_ms(&session::store::clock::SystemClock);
    let hour_ago = std::time::UNIX_EPOCH + Duration::from_millis(now_ms.max(3_600_000) as u64 - 3_600_000);
    for i in 0..n {
        let t = three(i);
        let id = format!("0195f3a2-7c1e-7d40-9a4b-{i:012x}");
        let paths = [
            pi_dir.join(format!("2026-01-01T00-00-00-000Z_{id}.jsonl")),
            claude_dir.join(format!("{id}.jsonl")),
            codex_dir.join(format!("rollout-2026-01-01T00-00-00-{id}.jsonl")),
        ];
        for (k, (path, bytes)) in paths.into_iter().zip([t.pi, t.claude, t.codex]).enumerate() {
            fs_err::write(&path, bytes).expect("bench file");
            // Old sessions: the listing cache rescans files modified in the last seconds.
            fs_err::File::options().write(true).open(&path).and_then(|f| f.set_modified(hour_ago)).expect("mtime");
            files[k].push(path);
        }
    }
    files
}

fn others(c: &mut Criterion) {
    let n: usize = std::env::var("SESSION_BENCH_OTHERS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let dir = TempDir::new("session-bench-others");
    let home = dir.path().join("home");
    let files = generate_home(&home, n);
    let env = ProcessEnv::new(&home, "/tmp/proj", "/tmp");
    let pi = Discovery::new(AgentDirs::pi(&env));
    let mut g = c.benchmark_group(format!("others/{n}"));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(10));
    g.bench_function("read-floor", |b| {
        b.iter(|| {
            let total: usize = std::thread::scope(|s| {
                let half = files[0].len() / 2;
                let (a, rest) = files[0].split_at(half);
                let other = s.spawn(|| a.iter().map(|f| fs_err::read(f).map_or(0, |b| b.len())).sum::<usize>());
                rest.iter().map(|f| fs_err::read(f).map_or(0, |b| b.len())).sum::<usize>() + other.join().unwrap_or(0)
            });
            black_box(total)
        });
    });
    let cache = PrivateDir::open(dir.path().join("cache")).expect("cache folder");
    for cached in [false, true] {
        let d = if cached { pi.clone().with_list_cache(cache.clone(), 0) } else { pi.clone() };
        let tag = if cached { "/cached" } else { "" };
        g.bench_function(format!("list/pi{tag}"), |b| {
            b.iter(|| {
                let got = d.list_all(None, &mut |_| {}).expect("list");
                assert_eq!(got.len(), n);
                black_box(got)
            });
        });
        for agent in [session::discovery::OtherAgent::Claude, session::discovery::OtherAgent::Codex] {
            g.bench_function(format!("list/{}{tag}", agent.name()), |b| {
                b.iter(|| {
                    let got = d.list_others(Some(agent), None, &mut |_| {}).expect("list");
                    assert_eq!(got.len(), n);
                    black_box(got)
                });
            });
        }
    }
    let storage: Arc<dyn Storage> = Arc::new(FileStorage::new());
    let catalog = dir.path().join("search.db");
    for (k, agent) in ["pi", "claude", "codex"].into_iter().enumerate() {
        let listed: Vec<SessionFile> = files[k]
            .iter()
            .map(|p| if k == 0 { SessionFile::session(p.clone(), Dialect::Pi) } else { SessionFile::other(p.clone()) })
            .collect();
        let scopes = [home.clone()];
        g.bench_function(format!("first-index/{agent}"), |b| {
            b.iter_batched(
                || {
                    let _ = fs_err::remove_file(&catalog);
                    SearchIndex::new(Catalog::open(&catalog).expect("catalog"), storage.clone())
                },
                |mut index| {
                    let report = index.update(&listed, &scopes, &mut |_, _| {}).expect("update");
                    assert_eq!(report.files_whole, n);
                    let hits = index.search("the", 10, &scopes).expect("search");
                    black_box((report, hits))
                },
                BatchSize::PerIteration,
            );
        });
    }
    g.finish();
}

criterion_group!(benches, others);
criterion_main!(benches);
