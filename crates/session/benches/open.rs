//! Opening large sessions, each beside its floors in the same run:
//!
//! * `floor-read`: reading the file's bytes (the least any open that looks at them
//!   costs);
//! * `floor-validate`: reading them and validating every line as JSON (the least an
//!   open that trusts nothing costs);
//! * `open-in-memory`: an open that keeps every text in memory (`Env::spans` off);
//! * `open`: an open that leaves the texts in the file (the default), no index;
//! * `reopen`: an open through the session index of the unchanged file;
//! * `reopen-after-append`: an open through the index after one more entry was
//!   appended (the setup appends it; only the new bytes are parsed);
//! * `context`: a reopen and the context at the leaf (only the path after the last
//!   compaction is read).
//!
//! Sessions of 20,000 and 100,000 entries are generated (about 2.3 KB an entry, with
//! compactions); more files can be given in `SESSION_BENCH_FILES` (`pi:PATH` or
//! `omp:PATH`, separated by commas), such as the 1 GB session that
//! `node ../shared/conformance/bench-ref/mkbig.mjs --format pi --entries 400000
//! --target-bytes 1000000000 --seed 42 --out /tmp/pi-1g.jsonl` makes.
//!
//! Run with `cargo bench -p agent-session-store --bench open` (or `cargo xtask bench`).

use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use session::model::scan;
use session::store::{FileStorage, PrivateDir, Storage};
use session::{Dialect, Env, Leaf, SessionManager};

use session_testkit::TempDir;
use session_testkit::generate;

fn env(dir: &Path) -> Env {
    Env::bare(Arc::new(FileStorage::new()))
        .with_process_cwd(dir)
        .with_index_dir(PrivateDir::open(dir.join("index")).expect("index folder"))
}

/// Validates every line of `bytes` as JSON, as an open that trusts nothing must.
fn validate(bytes: &[u8]) -> usize {
    let Ok(text) = std::str::from_utf8(bytes) else { return 0 };
    text.lines().filter(|l| scan::parse_whole(l).is_ok()).count()
}

/// Appends one message entry (a fresh id, after the last entry) to `file`.
fn append_one(file: &Path, n: u64) {
    let line = format!(
        r#"{{"type":"message","id":"b{n:07x}","parentId":null,"timestamp":"2026-12-02T00:00:00.000Z","message":{{"role":"user","content":"{}","timestamp":1}}}}"#,
        "one more ".repeat(40)
    );
    let mut f = fs_err::OpenOptions::new().append(true).open(file).expect("open for append");
    f.write_all(format!("{line}\n").as_bytes()).expect("append");
}

fn bench_file(c: &mut Criterion, dialect: Dialect, name: &str, file: &Path, dir: &Path) {
    let mut group = c.benchmark_group(format!("open/{}/{name}", dialect.name()));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(6));
    let storage = FileStorage::new();
    group.bench_function("floor-read", |b| b.iter(|| black_box(storage.read(file).expect("read").len())));
    group.bench_function("floor-validate", |b| {
        b.iter(|| black_box(validate(&storage.read(file).expect("read"))));
    });
    let plain = || Env::bare(Arc::new(FileStorage::new())).with_process_cwd(dir);
    group.bench_function("open-in-memory", |b| {
        b.iter(|| SessionManager::open_read_only(dialect, file, plain().with_spans(None)).expect("open"));
    });
    group.bench_function("open", |b| {
        b.iter(|| SessionManager::open_read_only(dialect, file, plain()).expect("open"));
    });
    // Index the file once; the open benchmarks below reuse it.
    let _ = SessionManager::open_read_only(dialect, file, env(dir)).expect("index");
    group.bench_function("reopen", |b| {
        b.iter(|| SessionManager::open_read_only(dialect, file, env(dir)).expect("reopen"));
    });
    group.bench_function("context", |b| {
        b.iter(|| {
            let m = SessionManager::open_read_only(dialect, file, env(dir)).expect("reopen");
            black_box(m.context_json(Leaf::Current, false).expect("context").len())
        });
    });
    // Appends to a copy, so that the other benchmarks of the file keep their bytes.
    let copy = dir.join(format!("{name}-grown.jsonl"));
    fs_err::copy(file, &copy).expect("copy");
    let _ = SessionManager::open_read_only(dialect, &copy, env(dir)).expect("index the copy");
    let mut n = 0u64;
    group.bench_function("reopen-after-append", |b| {
        b.iter_batched(
            || {
                n += 1;
                append_one(&copy, n);
            },
            |()| SessionManager::open_read_only(dialect, &copy, env(dir)).expect("reopen"),
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

fn open(c: &mut Criterion) {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        for (name, entries) in [("20k", 20_000), ("100k", 100_000)] {
            let dir = TempDir::new(&format!("open-{}-{name}", dialect.name()));
            let file = dir.path().join("session.jsonl");
            let opts = generate::Options { avg_bytes: 2350, ..generate::Options::bench(dialect, entries, 7) };
            fs_err::write(&file, generate::session(&opts)).expect("write session");
            bench_file(c, dialect, name, &file, dir.path());
        }
    }
    for spec in std::env::var("SESSION_BENCH_FILES").unwrap_or_default().split(',').filter(|s| !s.is_empty()) {
        let (dialect, path) = match spec.split_once(':') {
            Some(("omp", p)) => (Dialect::Omp, p),
            Some((_, p)) => (Dialect::Pi, p),
            None => (Dialect::Pi, spec),
        };
        let path = Path::new(path);
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let dir = TempDir::new(&format!("open-given-{name}"));
        bench_file(c, dialect, &name, path, dir.path());
    }
}

criterion_group!(benches, open);
criterion_main!(benches);
