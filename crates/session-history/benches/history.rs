//! Prompt history throughput: adding prompts to a real WAL file, and searching a
//! store of 10,000 prompts (full-text hit, substring-only hit, miss).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use session_history::{HistoryOptions, HistoryScope, HistoryStore};

const PROMPTS: usize = 10_000;

/// A varied, deterministic prompt: distinct words so the FTS index has real postings.
fn prompt(i: usize) -> String {
    const WORDS: [&str; 12] = [
        "refactor", "parser", "commit", "explain", "borrow", "checker", "tests", "failing", "add", "docs", "fix",
        "bench",
    ];
    let a = WORDS[i % WORDS.len()];
    let b = WORDS[(i / WORDS.len()) % WORDS.len()];
    format!("{a} the {b} module number {i} in crates/session-{}\nand keep the style", i % 97)
}

fn temp_db() -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "session-history-bench-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    dir.join("history.db")
}

fn remove_db(path: &Path) {
    if let Some(dir) = path.parent() {
        let _ = fs_err::remove_dir_all(dir);
    }
}

fn open(path: &Path) -> HistoryStore {
    let opened = HistoryStore::open(path, HistoryOptions::default().with_clock(|| 1_700_000_000)).expect("open");
    opened.store
}

fn bench_add(c: &mut Criterion) {
    let mut group = c.benchmark_group("add");
    group.sample_size(10);
    group.bench_function("10k prompts into a new file", |b| {
        b.iter_batched(
            || {
                let path = temp_db();
                (open(&path), path)
            },
            |(store, path)| {
                for i in 0..PROMPTS {
                    store.add(&prompt(i), Some("/repo"), Some("session")).expect("add");
                }
                drop(store);
                remove_db(&path);
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

fn bench_search(c: &mut Criterion) {
    let path = temp_db();
    let store = open(&path);
    for i in 0..PROMPTS {
        store.add(&prompt(i), Some(if i % 2 == 0 { "/a" } else { "/b" }), Some("session")).expect("add");
    }
    let mut group = c.benchmark_group("search 10k");
    group.bench_function("fts prefix hit", |b| {
        b.iter(|| black_box(store.search(black_box("refac pars"), 50, &HistoryScope::Global).expect("search")));
    });
    group.bench_function("substring only", |b| {
        b.iter(|| black_box(store.search(black_box("actor arser"), 50, &HistoryScope::Global).expect("search")));
    });
    group.bench_function("miss", |b| {
        b.iter(|| black_box(store.search(black_box("zzzz"), 50, &HistoryScope::Global).expect("search")));
    });
    group.bench_function("cwd scope", |b| {
        let scope = HistoryScope::Cwd("/a".to_owned());
        b.iter(|| black_box(store.search(black_box("commit"), 50, &scope).expect("search")));
    });
    group.bench_function("recent 100", |b| {
        b.iter(|| black_box(store.recent(100, &HistoryScope::Global).expect("recent")));
    });
    group.finish();
    drop(store);
    remove_db(&path);
}

criterion_group!(benches, bench_add, bench_search);
criterion_main!(benches);
