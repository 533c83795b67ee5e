//! Benchmarks on a generated 100,000-entry session with branches: appending,
//! building the pi and omp contexts at the last leaf, and building the tree.
//!
//! Run with `cargo bench -p session-tree --bench tree`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use session_model::{Dialect, Record};
use session_tree::{Leaf, SessionTree, omp, pi};

const ENTRIES: usize = 100_000;

/// A long session: mostly a user/assistant chain, a branch back every 50 entries,
/// a label every 97 and a compaction every 5,000.
fn session() -> Vec<Record> {
    let mut out = Vec::with_capacity(ENTRIES);
    let mut parent: Option<String> = None;
    for i in 0..ENTRIES {
        let id = format!("{i:08x}");
        let ts = session_model::timestamp::format_iso_millis(1_767_225_600_000 + i as i64 * 1000);
        let p = match &parent {
            Some(p) => format!("\"{p}\""),
            None => "null".to_owned(),
        };
        let line = if i % 5_000 == 4_999 {
            format!(
                r#"{{"type":"compaction","id":"{id}","parentId":{p},"timestamp":"{ts}","summary":"summary {i}","firstKeptEntryId":"{:08x}","tokensBefore":1000}}"#,
                i - 40
            )
        } else if i % 97 == 96 {
            format!(
                r#"{{"type":"label","id":"{id}","parentId":{p},"timestamp":"{ts}","targetId":"{:08x}","label":"l{i}"}}"#,
                i - 3
            )
        } else if i % 2 == 0 {
            format!(
                r#"{{"type":"message","id":"{id}","parentId":{p},"timestamp":"{ts}","message":{{"role":"user","content":"question number {i} with some words in it","timestamp":{i}}}}}"#
            )
        } else {
            format!(
                r#"{{"type":"message","id":"{id}","parentId":{p},"timestamp":"{ts}","message":{{"role":"assistant","content":[{{"type":"text","text":"answer {i}"}}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{{"input":10,"output":20}},"stopReason":"stop","timestamp":{i}}}}}"#
            )
        };
        out.push(Record::parse(&line).expect("generated line is JSON"));
        // Every 50 entries the next one branches off five entries back.
        parent = Some(if i % 50 == 49 { format!("{:08x}", i - 5) } else { id });
    }
    out
}

fn benches(c: &mut Criterion) {
    let records = session();
    c.bench_function("append 100k", |b| {
        b.iter(|| {
            let mut tree = SessionTree::new(Dialect::Pi, Vec::new());
            for r in &records {
                tree.append(r.clone()).expect("fresh ids");
            }
            black_box(tree.leaf_id().map(str::len))
        })
    });
    c.bench_function("load 100k", |b| {
        b.iter(|| black_box(SessionTree::new(Dialect::Pi, records.clone()).entries().len()))
    });
    let pi_tree = SessionTree::new(Dialect::Pi, records.clone());
    c.bench_function("pi context 100k", |b| {
        b.iter(|| black_box(pi::build_context(&pi_tree, Leaf::Current).to_json_string().len()))
    });
    c.bench_function("pi projection 100k", |b| {
        b.iter(|| black_box(pi::build_projection(&pi_tree, Leaf::Current).to_json_string().len()))
    });
    let omp_tree = SessionTree::new(Dialect::Omp, records.clone());
    c.bench_function("omp context 100k", |b| {
        b.iter(|| {
            black_box(
                omp::build_context(&omp_tree, Leaf::Current, omp::ContextOptions::default()).to_json_string().len(),
            )
        })
    });
    c.bench_function("omp transcript 100k", |b| {
        b.iter(|| {
            black_box(
                omp::build_context(&omp_tree, Leaf::Current, omp::ContextOptions { transcript: true })
                    .to_json_string()
                    .len(),
            )
        })
    });
    c.bench_function("tree 100k", |b| b.iter(|| black_box(session_tree::tree_to_json(&pi_tree.tree(), true).len())));
}

criterion_group! {
    name = tree;
    config = Criterion::default().sample_size(10);
    targets = benches
}
criterion_main!(tree);
