//! Storage benchmarks: append latency per durability level (1 KB lines) and an atomic rewrite
//! of a 20,000-line session file.

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use session_store::{Durability, ExpectedSize, FileStorage, MemoryStorage, Storage};
use session_testkit::TempDir;

fn line(n: usize) -> Vec<u8> {
    let pad = "x".repeat(900);
    format!(
        "{{\"type\":\"message\",\"id\":\"{n:08x}\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"{pad}\"}}}}\n"
    )
    .into_bytes()
}

/// Appends `iters` lines, cutting the file back now and then so long runs do not fill the disk.
fn timed_appends(storage: &dyn Storage, path: &Path, durability: Durability, iters: u64) -> Duration {
    let mut writer = storage.open_writer(path, durability).expect("writer opens");
    let l = line(1);
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        storage.truncate(path, 0).expect("file can be cut back");
        let batch = (iters - done).min(10_000);
        let start = Instant::now();
        for _ in 0..batch {
            writer.append(&l).expect("append succeeds");
        }
        total += start.elapsed();
        done += batch;
    }
    writer.close().expect("writer closes");
    total
}

fn appends(c: &mut Criterion) {
    let dir = TempDir::new("session-store-it");
    let file = FileStorage::new();
    let memory = MemoryStorage::new();
    let mut group = c.benchmark_group("append_1k");
    group.sample_size(20).measurement_time(Duration::from_secs(3));
    for (name, durability) in [("none", Durability::None), ("fsync", Durability::Fsync)] {
        let path = dir.path().join(format!("{name}.jsonl"));
        group.bench_function(format!("file_{name}"), |b| {
            b.iter_custom(|iters| timed_appends(&file, &path, durability, iters))
        });
    }
    let path = Path::new("/bench/s.jsonl");
    group.bench_function("memory_none", |b| {
        b.iter_custom(|iters| timed_appends(&memory, path, Durability::None, iters))
    });
    group.finish();
}

fn rewrite(c: &mut Criterion) {
    let dir = TempDir::new("session-store-it");
    let storage = FileStorage::new();
    let path = dir.path().join("big.jsonl");
    let body: Vec<u8> = (0..20_000).flat_map(line).collect();
    let mut group = c.benchmark_group("write_atomic");
    group.sample_size(10).measurement_time(Duration::from_secs(5));
    group.bench_function("20000_lines", |b| {
        b.iter(|| storage.write_atomic(&path, &body, ExpectedSize::Any).expect("rewrite succeeds"))
    });
    group.finish();
}

criterion_group!(benches, appends, rewrite);
criterion_main!(benches);
