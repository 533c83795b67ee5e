//! Listing benchmarks: `list` over 1,000 and 10,000 generated sessions per dialect.
//!
//! Files are generated once per size in a temp directory (outside the measured
//! loop) in the shape of the references' own listing benchmark: a header and 12
//! entries (user prompts, assistant turns with thinking, text and tool calls, tool
//! results), about 15 KB per session, written by the shared generator. pi reads every
//! file whole; omp reads 4 KiB + 32 KiB. The `cached` variants list through a warm
//! listing cache (`Discovery::with_list_cache`). `read-floor` only opens and reads
//! every file, in parallel: the least a listing that reads whole files can cost.

use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{Criterion, criterion_group, criterion_main};
use session_discovery::{AgentDirs, Dialect, Discovery, OmpHome, ProcessEnv};
use session_store::PrivateDir;

use session_testkit::generate;

/// One session as the references' listing benchmark makes them (`bench-ref/mkbig.mjs
/// --many`): 12 entries with a nominal 1,200 bytes each, scaled by mkbig's 1.32 (about
/// 15 KB per file, as in the reference's set).
fn session(dialect: Dialect, i: usize) -> String {
    generate::session(&generate::Options {
        dialect,
        entries: 12,
        seed: 44 * 100_003 + i as u64,
        profile: generate::Profile::Bench,
        avg_bytes: 1584,
        cwd: "/tmp".into(),
    })
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

/// Reads every file of `dir` whole, on one thread per core; returns the bytes read.
fn read_all(dir: &Path) -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let files: Vec<PathBuf> = fs_err::read_dir(dir).expect("dir").map(|e| e.expect("entry").path()).collect();
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(16);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut total = 0;
                    while let Some(f) = files.get(next.fetch_add(1, Ordering::Relaxed)) {
                        total += fs_err::read(f).map_or(0, |b| b.len());
                    }
                    total
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("reader")).sum()
    })
}

fn bench_list(c: &mut Criterion) {
    let root = std::env::temp_dir().join(format!("session-discovery-bench-{}", std::process::id()));
    let env = ProcessEnv::new(root.join("home"), "/tmp", "/tmp");
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
            // What any listing that reads whole files costs before parsing: opening and
            // reading every file, on as many threads as the listing uses. pi's listing
            // cannot beat this without its cache.
            if dialect == Dialect::Pi {
                g.bench_function(format!("{}/{n}/read-floor", dialect.name()), |b| {
                    b.iter(|| black_box(read_all(&dir)));
                });
            }
            // With the listing cache, warmed by the first iteration: what `session ls`
            // does on every later run.
            let cached = disc.clone().with_list_cache(PrivateDir::open(root.join("cache")).expect("cache folder"), 0);
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
