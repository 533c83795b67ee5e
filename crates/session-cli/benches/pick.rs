//! The picker on 10,000 sessions, without a terminal: the state machine and the
//! drawing into ratatui's `TestBackend` (the crossterm backend writes only the cells
//! that changed, so this is the work of a frame before the terminal's).
//!
//! * `pick/first_paint_10k`: 10,000 listed sessions added at once, then a frame at
//!   80x24 (what the first paint does with a full listing cache);
//! * `pick/keystroke_10k`: one more character typed into a filter over 10,000 sessions
//!   (a fuzzy match of every row the shorter filter kept), then a frame;
//! * `pick/backspace_10k`: one character taken off (every row matched again), then a
//!   frame;
//! * `pick/scroll_10k`: a page down, then a frame.
//!
//! Goals: first paint under 100 ms, a keystroke under 16 ms. Run with
//! `cargo bench -p session-cli --bench pick` (or `cargo xtask bench`).

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use session::Dialect;

#[allow(dead_code, unreachable_pub, unused_imports)]
#[path = "../src/table.rs"]
mod table;

// The picker's modules as the command has them (`draw` reaches `state` as its
// sibling, `super::state`).
#[allow(dead_code, unreachable_pub, unused_imports)]
#[path = "../src/pick/draw.rs"]
mod draw;
#[allow(dead_code, unreachable_pub, unused_imports)]
#[path = "../src/pick/state.rs"]
mod state;

use draw::{Look, draw};
use state::{Picker, Row};

const NOW: i64 = 1_767_225_600_000;

const WORDS: &[&str] = &[
    "fix",
    "the",
    "config",
    "loader",
    "parser",
    "tests",
    "fail",
    "on",
    "ci",
    "refactor",
    "session",
    "store",
    "why",
    "does",
    "build",
    "error",
    "in",
    "module",
    "add",
    "support",
    "for",
    "日本語",
    "files",
    "and",
    "docs",
];

fn rows(n: usize) -> Vec<Row> {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    (0..n)
        .map(|k| {
            let len = 6 + (next() % 30) as usize;
            let text: Vec<&str> = (0..len).map(|_| WORDS[(next() % WORDS.len() as u64) as usize]).collect();
            let named = next().is_multiple_of(4);
            Row {
                dialect: if k % 3 == 0 { Dialect::Omp } else { Dialect::Pi },
                path: PathBuf::from(format!("/home/me/.pi/agent/sessions/--home-me-p{}--/s{k:05}.jsonl", k % 40)),
                name: named.then(|| text[..3].join(" ")),
                first_message: text.join(" "),
                cwd: format!("/home/me/p{}", k % 40),
                modified: Some(NOW - (next() % 10_000_000_000) as i64),
                messages: next() % 400,
                here: k % 40 == 0,
                pinned: k % 500 == 0,
            }
        })
        .collect()
}

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

fn bench(c: &mut Criterion) {
    let all = rows(10_000);
    let look = Look { colour: true, now_ms: NOW, home: Some("/home/me".into()) };
    let mut term = Terminal::new(TestBackend::new(80, 24)).expect("a test terminal");
    let mut g = c.benchmark_group("pick");

    g.bench_function("first_paint_10k", |b| {
        b.iter(|| {
            let mut p = Picker::new();
            p.add(black_box(all.clone()));
            term.draw(|f| draw(f, &mut p, &look)).expect("a frame");
        });
    });

    let mut p = Picker::new();
    p.add(all.clone());
    for ch in "/co".chars() {
        p.key(key(KeyCode::Char(ch)));
    }
    g.bench_function("keystroke_10k", |b| {
        b.iter_batched(
            || p.clone(),
            |mut p| {
                p.key(key(KeyCode::Char('n')));
                term.draw(|f| draw(f, &mut p, &look)).expect("a frame");
                p
            },
            BatchSize::LargeInput,
        );
    });
    g.bench_function("backspace_10k", |b| {
        b.iter_batched(
            || p.clone(),
            |mut p| {
                p.key(key(KeyCode::Backspace));
                term.draw(|f| draw(f, &mut p, &look)).expect("a frame");
                p
            },
            BatchSize::LargeInput,
        );
    });

    let mut p = Picker::new();
    p.add(all.clone());
    g.bench_function("scroll_10k", |b| {
        b.iter(|| {
            p.key(key(KeyCode::PageDown));
            term.draw(|f| draw(f, &mut p, &look)).expect("a frame");
        });
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
