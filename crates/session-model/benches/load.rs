//! Load throughput: `parse_session_bytes` on a generated session of about 50 MB per
//! dialect, alone and followed by building the id index (`HashMap` id -> position)
//! that every layer above needs; and `parse_session_at`, which reads the same bytes
//! in pieces (from memory here, as from the page cache) and parses each as it is
//! read. Criterion reports bytes per second.
//!
//! Run with `cargo bench -p session-model --bench load` (or `cargo xtask bench`).

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use session_model::{Dialect, parse_session_at, parse_session_bytes};

use session_testkit::generate;

/// Size of the generated session.
const TARGET_BYTES: usize = 50 * 1000 * 1000;

/// Returns a generated session of about [`TARGET_BYTES`].
fn session(dialect: Dialect) -> String {
    // Calibrate on a small file, then generate the full size from the same seed.
    let probe = generate::session(&generate::Options::bench(dialect, 2000, 7));
    let per_entry = probe.len() / 2000;
    generate::session(&generate::Options::bench(dialect, TARGET_BYTES / per_entry, 7))
}

fn load(c: &mut Criterion) {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let text = session(dialect);
        let bytes = text.as_bytes();
        let mut group = c.benchmark_group(format!("load/{}", dialect.name()));
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.sample_size(10);
        group.measurement_time(Duration::from_secs(15));
        group.bench_function("parse", |b| b.iter(|| parse_session_bytes(black_box(bytes), dialect)));
        group.bench_function("parse-in-pieces", |b| {
            b.iter(|| parse_session_at(black_box(bytes), bytes.len() as u64, dialect).expect("reads from memory"))
        });
        group.bench_function("parse+index", |b| {
            b.iter(|| {
                let parsed = parse_session_bytes(black_box(bytes), dialect);
                let index: HashMap<&str, usize> =
                    parsed.records.iter().enumerate().filter_map(|(i, r)| r.id().map(|id| (id, i))).collect();
                black_box(index.len())
            })
        });
        group.finish();
    }
}

criterion_group!(benches, load);
criterion_main!(benches);
