//! Migration cost: `migrate` of a v1 session (ids minted, parents chained,
//! compaction indexes resolved, then the v2 → v3 step) and of a v2 session (the
//! header's version and `hookMessage` roles only), each of 20,000 entries, beside the
//! floor of the same run: parsing the bytes, which every open does before migrating.
//!
//! Run with `cargo bench -p session-migrate --bench migrate` (or `cargo xtask bench`).

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use session_model::{Dialect, parse_session_bytes};

/// Entries per generated session.
const ENTRIES: usize = 20_000;

/// Returns a session of [`ENTRIES`] entries at `version` (1: no ids; 2: ids and
/// parents, with a `hookMessage` every 50 entries). A compaction every 1,000 entries
/// keeps from 10 entries back (`firstKeptEntryIndex` in v1).
fn session(version: u32) -> String {
    let mut out = String::new();
    let v = if version == 1 { String::new() } else { format!(r#","version":{version}"#) };
    writeln!(out, r#"{{"type":"session","id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"{v}}}"#)
        .expect("writing to a string");
    for i in 1..=ENTRIES {
        let ids = if version == 1 {
            String::new()
        } else {
            let parent = if i == 1 { "null".to_owned() } else { format!(r#""e{:07}""#, i - 1) };
            format!(r#","id":"e{i:07}","parentId":{parent}"#)
        };
        let ts = format!(r#""timestamp":"2026-01-01T00:{:02}:{:02}.000Z""#, (i / 60) % 60, i % 60);
        let line = if i % 1000 == 0 {
            let kept = if version == 1 {
                format!(r#""firstKeptEntryIndex":{}"#, i - 10)
            } else {
                format!(r#""firstKeptEntryId":"e{:07}""#, i - 10)
            };
            format!(
                r#"{{"type":"compaction"{ids},{ts},"summary":"what happened so far",{kept},"tokensBefore":123456}}"#
            )
        } else {
            let role = match i % 50 {
                0 if version == 2 => "hookMessage",
                n if n % 2 == 0 => "assistant",
                _ => "user",
            };
            format!(
                r#"{{"type":"message"{ids},{ts},"message":{{"role":"{role}","content":[{{"type":"text","text":"entry {i} with some words of text in it"}}],"timestamp":{i}}}}}"#
            )
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn migrate(c: &mut Criterion) {
    let mut group = c.benchmark_group("migrate");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    for version in [1, 2] {
        let text = session(version);
        let parsed = parse_session_bytes(text.as_bytes(), Dialect::Pi).records;
        group.bench_function(format!("v{version}/floor: parse"), |b| {
            b.iter(|| parse_session_bytes(black_box(text.as_bytes()), Dialect::Pi))
        });
        group.bench_function(format!("v{version}/migrate"), |b| {
            b.iter_batched(
                || parsed.clone(),
                |mut records| {
                    let mut n = 0u64;
                    let m = session_migrate::migrate(&mut records, &mut || {
                        n += 1;
                        format!("{n:08x}")
                    });
                    black_box((m, records))
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, migrate);
criterion_main!(benches);
