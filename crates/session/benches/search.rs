//! The search catalog (`session::search`) over 2,000 generated sessions (about 1,200
//! entries' worth of text each 40), beside its floor in the same run:
//!
//! * `floor-stat`: the stat of every session file, the least an update does;
//! * `update-unchanged`: bringing the catalog up to date when nothing changed;
//! * `update-10-appended`: the same after one entry was appended to 10 sessions (the
//!   setup appends; only those tails are read);
//! * `query`: a two-word query answered from the catalog, snippets included;
//! * `first-index`: indexing every session into an empty catalog.
//!
//! Run with `cargo bench -p agent-session-store --bench search` (or `cargo xtask bench`).

use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use session::Dialect;
use session::history::Catalog;
use session::search::{SearchIndex, SessionFile};
use session::store::{FileStorage, Storage};

use session_testkit::TempDir;
use session_testkit::generate;

const SESSIONS: usize = 2_000;

fn search(c: &mut Criterion) {
    let dir = TempDir::new("session-bench-search");
    let root = dir.path().join("sessions");
    let bucket = root.join("--tmp--");
    fs_err::create_dir_all(&bucket).expect("bench dir");
    let mut files = Vec::new();
    for k in 0..SESSIONS {
        let path = bucket.join(format!("2026-01-01T00-00-00-000Z_s{k:05}.jsonl"));
        let opts = generate::Options { avg_bytes: 1200, ..generate::Options::bench(Dialect::Pi, 40, k as u64) };
        fs_err::write(&path, generate::session(&opts)).expect("write session");
        files.push(SessionFile::session(path, Dialect::Pi));
    }
    let scopes = [root.clone()];
    let storage: Arc<dyn Storage> = Arc::new(FileStorage::new());
    let catalog = dir.path().join("search.db");
    let open = || SearchIndex::new(Catalog::open(&catalog).expect("catalog"), storage.clone());
    let mut group = c.benchmark_group("search/2000");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(6));
    group.bench_function("first-index", |b| {
        b.iter_batched(
            || {
                let mut index = open();
                index.clear().expect("clear");
                index
            },
            |mut index| index.update(&files, &scopes, &mut |_, _| {}).expect("update"),
            BatchSize::PerIteration,
        );
    });
    let mut index = open();
    index.update(&files, &scopes, &mut |_, _| {}).expect("index");
    group.bench_function("floor-stat", |b| {
        b.iter(|| files.iter().filter(|f| storage.stat(&f.path).ok().flatten().is_some()).count());
    });
    group.bench_function("update-unchanged", |b| {
        b.iter(|| black_box(index.update(&files, &scopes, &mut |_, _| {}).expect("update")));
    });
    let mut n = 0u64;
    group.bench_function("update-10-appended", |b| {
        b.iter_batched(
            || {
                for f in files.iter().step_by(SESSIONS / 10) {
                    n += 1;
                    append(&f.path, n);
                }
            },
            |()| index.update(&files, &scopes, &mut |_, _| {}).expect("update"),
            BatchSize::PerIteration,
        );
    });
    group.bench_function("query", |b| {
        b.iter(|| black_box(index.search("parser newline", 20, &scopes).expect("search").len()));
    });
    group.finish();
}

/// Appends one user message to `path`.
fn append(path: &Path, n: u64) {
    let line = format!(
        r#"{{"type":"message","id":"x{n:07x}","parentId":null,"timestamp":"2026-12-02T00:00:00.000Z","message":{{"role":"user","content":"appended parser words {n}","timestamp":1}}}}"#
    );
    let mut f = fs_err::OpenOptions::new().append(true).open(path).expect("open for append");
    f.write_all(format!("{line}\n").as_bytes()).expect("append");
}

criterion_group!(benches, search);
criterion_main!(benches);
