//! Listing benchmarks: `list` over 1,000 and 10,000 generated sessions per dialect.
//!
//! Files are generated once per size in a temp directory (outside the measured
//! loop): a header, then a mix of user, assistant (thinking, text, tool call),
//! tool-result and bookkeeping entries, about 8 KB per session, as the references
//! write them. pi reads every file whole; omp reads 4 KiB + 32 KiB. The `cached`
//! variants list through a warm listing cache (`Discovery::with_list_cache`).

use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{Criterion, criterion_group, criterion_main};
use session_discovery::{AgentDirs, Dialect, Discovery, Env, OmpHome};

const WORDS: &[&str] = &["tree", "find", "user", "grep", "root", "write", "naïve", "日本語", "cache", "token", "edit"];

fn text(seed: usize, n: usize) -> String {
    (0..n).map(|i| WORDS[(seed * 7 + i * 3) % WORDS.len()]).collect::<Vec<_>>().join(" ")
}

fn session(dialect: Dialect, i: usize) -> String {
    let id = format!("01a228d5-{:04x}-7000-8000-{:012x}", i % 0xffff, i);
    let mut out = String::new();
    if dialect == Dialect::Omp {
        let slot = r#"{"type":"title","v":1,"title":"","updatedAt":"2026-01-01T00:00:00.000Z","pad":""}"#;
        out.push_str(slot);
        out.push_str(&" ".repeat(255 - slot.len()));
        out.push('\n');
    }
    out.push_str(&format!(
        r#"{{"type":"session","version":3,"id":"{id}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}}"#
    ));
    out.push('\n');
    let mut parent = "null".to_string();
    for turn in 0..3 {
        let ts = 1_767_225_600_000u64 + (i * 100 + turn * 10) as u64;
        let uid = format!("{:08x}", i * 16 + turn * 4);
        out.push_str(&format!(
            r#"{{"type":"message","id":"{uid}","parentId":{parent},"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"{}","timestamp":{ts}}}}}"#,
            text(i + turn, 40)
        ));
        out.push('\n');
        let aid = format!("{:08x}", i * 16 + turn * 4 + 1);
        out.push_str(&format!(
            r#"{{"type":"message","id":"{aid}","parentId":"{uid}","timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"assistant","content":[{{"type":"thinking","thinking":"{}","thinkingSignature":"sig"}},{{"type":"text","text":"{}"}},{{"type":"toolCall","id":"call_{aid}","name":"read","arguments":{{"path":"/tmp/src/a.ts"}}}}],"api":"anthropic-messages","provider":"anthropic","model":"claude","usage":{{"input":100,"output":50,"cacheRead":0,"cacheWrite":0,"totalTokens":150,"cost":{{"input":0.1,"output":0.2,"cacheRead":0,"cacheWrite":0,"total":0.3}}}},"stopReason":"toolUse","timestamp":{}}}}}"#,
            text(i * 3 + turn, 80),
            text(i * 5 + turn, 60),
            ts + 1
        ));
        out.push('\n');
        let rid = format!("{:08x}", i * 16 + turn * 4 + 2);
        out.push_str(&format!(
            r#"{{"type":"message","id":"{rid}","parentId":"{aid}","timestamp":"2026-01-01T00:00:02.000Z","message":{{"role":"toolResult","toolCallId":"call_{aid}","toolName":"read","content":[{{"type":"text","text":"{}"}}],"isError":false,"timestamp":{}}}}}"#,
            text(i * 11 + turn, 120),
            ts + 2
        ));
        out.push('\n');
        parent = format!("\"{rid}\"");
    }
    out.push_str(r#"{"type":"label","id":"ffffffff","parentId":null,"timestamp":"2026-01-01T00:00:03.000Z","targetId":"x","label":"l"}"#);
    out.push('\n');
    out
}

fn generate(root: &Path, dialect: Dialect, n: usize) -> PathBuf {
    let dir = root.join(format!("{}-{n}", dialect.name()));
    if dir.join(".complete").exists() {
        return dir;
    }
    let _ = fs_err::remove_dir_all(&dir);
    fs_err::create_dir_all(&dir).expect("bench dir");
    for i in 0..n {
        let name = format!("2026-01-01T00-00-00-{:03}Z_{i:08}.jsonl", i % 1000);
        let path = dir.join(name);
        fs_err::write(&path, session(dialect, i)).expect("bench file");
        // Sessions being listed are mostly old (the listing cache rescans files
        // modified in the last seconds).
        let now_ms = session_store::clock::Clock::now_ms(&session_store::clock::SystemClock);
        let hour_ago =
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(now_ms.max(3_600_000) as u64 - 3_600_000);
        fs_err::File::options().write(true).open(&path).and_then(|f| f.set_modified(hour_ago)).expect("set mtime");
    }
    fs_err::write(dir.join(".complete"), "").expect("marker");
    dir
}

fn bench_list(c: &mut Criterion) {
    let root = std::env::temp_dir().join(format!("session-discovery-bench-{}", std::process::id()));
    let env = Env::new(root.join("home"), "/tmp", "/tmp");
    let mut g = c.benchmark_group("list");
    g.sample_size(10);
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let disc = Discovery::new(AgentDirs::for_dialect(dialect, &env, OmpHome::MusePi));
        for n in [1_000usize, 10_000] {
            let dir = generate(&root, dialect, n);
            g.bench_function(format!("{}/{n}", dialect.name()), |b| {
                b.iter(|| {
                    let got = disc.list("/tmp", Some(&dir), &mut |_| {}).expect("list");
                    assert_eq!(got.len(), n);
                    black_box(got)
                });
            });
            // With the listing cache, warmed by the first iteration: what `session ls`
            // does on every later run.
            let cached = disc.clone().with_list_cache(root.join("cache"), 0);
            g.bench_function(format!("{}/{n}/cached", dialect.name()), |b| {
                b.iter(|| {
                    let got = cached.list("/tmp", Some(&dir), &mut |_| {}).expect("list");
                    assert_eq!(got.len(), n);
                    black_box(got)
                });
            });
        }
    }
    g.finish();
    let _ = fs_err::remove_dir_all(&root);
}

criterion_group!(benches, bench_list);
criterion_main!(benches);
