//! `session::sync` through S3-compatible object storage, beside the floor of the same
//! server in one run:
//!
//! * `sync/unchanged_1000`: a sync of 1,000 pi sessions (10 projects) that are already on
//!   the remote, unchanged on both sides; `sync/floor_list_10` lists the ten project
//!   folders of the remote once each (the least an unchanged sync can ask of the server).
//! * `sync/append_1k_to_100mb`: a 1 KB line appended to a 100 MB session, then a sync;
//!   the bytes uploaded are printed (the remote's newest segment: the append only).
//!   `sync/floor_read_100mb` reads the local 100 MB file once.
//! * `merge/20k_diverged_100`: `maintenance::merge_bytes` of two copies of a
//!   20,000-entry session that went on by 100 entries each.
//!
//! Needs the S3 server of `SESSION_TEST_S3` (default `http://127.0.0.1:9100`, bucket
//! `SESSION_TEST_S3_BUCKET`, default `session-test`; credentials from `AWS_ACCESS_KEY_ID`
//! and `AWS_SECRET_ACCESS_KEY`, as `.ci/run` sets them for its s3s-fs), under a key prefix
//! of its own, emptied after. Run with
//! `cargo bench -p session-cli --bench sync -- --warm-up-time 1 --measurement-time 5 --sample-size 10`
//! (or `cargo xtask bench`).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use session::Dialect;
use session::discovery::{AgentDirs, ProcessEnv};
use session::maintenance::{MergeInput, MergeLeaf, merge_bytes};
use session::store::{EntryKind, FileStorage, Storage};
use session::sync::{SyncLocal, SyncOptions, SyncRemote, sync};
use session_store_s3::S3Storage;

/// A machine's home below a temporary folder, and a remote under a key prefix of its own.
struct Bench {
    root: PathBuf,
    local: SyncLocal,
    remote: SyncRemote,
    s3: S3Storage,
}

impl Bench {
    fn new(tag: &str) -> Bench {
        let endpoint = std::env::var("SESSION_TEST_S3").unwrap_or_else(|_| "http://127.0.0.1:9100".to_owned());
        let bucket = std::env::var("SESSION_TEST_S3_BUCKET").unwrap_or_else(|_| "session-test".to_owned());
        let prefix = format!("bench-{tag}-{}", std::process::id());
        let s3 = S3Storage::builder(&bucket)
            .endpoint(&endpoint)
            .region("us-east-1")
            .allow_http(true)
            .prefix(&prefix)
            .build()
            .expect("the S3 storage of the benches");
        s3.list(Path::new("/")).expect("the S3 server of SESSION_TEST_S3 (see this file's docs)");
        let root = std::env::temp_dir().join(format!("session-bench-sync-{tag}-{}", std::process::id()));
        let _ = fs_err::remove_dir_all(&root);
        let home = root.join("home");
        let tmp = root.join("tmp");
        fs_err::create_dir_all(&tmp).expect("bench dir");
        let env = ProcessEnv::new(&home, &root, &tmp);
        let local = SyncLocal::new(Arc::new(FileStorage::new()), vec![AgentDirs::pi(&env)], home.join(".state"));
        let remote = SyncRemote::new(Arc::new(s3.clone()), &format!("s3://{bucket}/{prefix}"), "/");
        Bench { root, local, remote, s3 }
    }

    /// The folder of the pi sessions of `cwd`.
    fn bucket(&self, cwd: &str) -> PathBuf {
        self.local.homes[0].default_session_dir(cwd)
    }

    fn sync(&self) -> session::sync::SyncReport {
        sync(&self.local, &self.remote, &SyncOptions::default(), &mut |_| {}).expect("sync")
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        fn empty(s: &S3Storage, dir: &Path) {
            for e in s.read_dir(dir).unwrap_or_default() {
                match e.kind {
                    EntryKind::Dir => empty(s, &dir.join(&e.name)),
                    _ => drop(s.unlink(&dir.join(&e.name))),
                }
            }
        }
        empty(&self.s3, Path::new("/"));
        if let Err(e) = self.s3.gc_segments_older_than(false, Duration::ZERO) {
            eprintln!("cannot delete the bench's segments: {e}");
        }
        let _ = fs_err::remove_dir_all(&self.root);
    }
}

/// A pi v3 session `id` of `cwd` with `entries` message lines in one chain, the first
/// continuing from `parent` (the header's own chain when `None`), ids `<tag><n>`.
fn lines(tag: &str, parent: Option<&str>, entries: usize, text_len: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut prev = parent.map(str::to_owned);
    let text = "w".repeat(text_len);
    for n in 0..entries {
        let id = format!("{tag}{n:07x}");
        let parent = prev.as_deref().map_or("null".to_owned(), |p| format!("\"{p}\""));
        out.extend_from_slice(
            format!(
                r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"{text}","timestamp":1}}}}"#
            )
            .as_bytes(),
        );
        out.push(b'\n');
        prev = Some(id);
    }
    out
}

fn header(id: &str, cwd: &str) -> Vec<u8> {
    format!(r#"{{"type":"session","version":3,"id":"{id}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"{cwd}"}}"#)
        .into_bytes()
        .into_iter()
        .chain([b'\n'])
        .collect()
}

fn file_name(id: &str) -> String {
    format!("2026-01-01T00-00-00-000Z_{id}.jsonl")
}

fn unchanged_1000(c: &mut Criterion) {
    let b = Bench::new("unchanged");
    for n in 0..1000 {
        let cwd = format!("/bench/p{}", n % 10);
        let id = format!("00000000-0000-4000-8000-{n:012x}");
        let mut bytes = header(&id, &cwd);
        bytes.extend(lines("a", None, 6, 200));
        let dir = b.bucket(&cwd);
        fs_err::create_dir_all(&dir).expect("bucket");
        fs_err::write(dir.join(file_name(&id)), bytes).expect("session");
    }
    let first = b.sync();
    assert_eq!(first.counts().pushed + first.counts().unchanged, 1000, "{:?}", first.counts());
    b.sync(); // the state file now notes every session
    let folders: Vec<PathBuf> = {
        let root = b.remote.sessions_dir(Dialect::Pi);
        b.s3.read_dir(&root).expect("remote folders").into_iter().map(|e| root.join(e.name)).collect()
    };
    assert_eq!(folders.len(), 10);
    let mut g = c.benchmark_group("sync");
    g.bench_function("unchanged_1000", |bench| {
        bench.iter(|| {
            let r = b.sync();
            assert_eq!(r.counts().unchanged, 1000);
            black_box(r)
        })
    });
    g.bench_function("floor_list_10", |bench| {
        bench.iter(|| {
            for f in &folders {
                black_box(b.s3.list(f).expect("listing"));
            }
        })
    });
    g.finish();
}

fn append_to_100mb(c: &mut Criterion) {
    let b = Bench::new("append");
    let cwd = "/bench/big";
    let id = "00000000-0000-4000-8000-00000000b16b";
    let mut bytes = header(id, cwd);
    // About 100 MB: 40,000 entries of some 2.5 KB.
    bytes.extend(lines("b", None, 40_000, 2400));
    let dir = b.bucket(cwd);
    fs_err::create_dir_all(&dir).expect("bucket");
    let path = dir.join(file_name(id));
    fs_err::write(&path, &bytes).expect("session");
    b.sync();
    let remote = b.remote.sessions_dir(Dialect::Pi);
    let remote_file = {
        let folder = b.s3.read_dir(&remote).expect("remote folder").pop().expect("one project");
        remote.join(folder.name).join(file_name(id))
    };
    let mut last = format!("b{:07x}", 40_000 - 1);
    let mut n = 0usize;
    let mut g = c.benchmark_group("sync");
    g.sample_size(10);
    g.bench_function("append_1k_to_100mb", |bench| {
        bench.iter(|| {
            let tag = format!("c{n:03x}");
            n += 1;
            let line = lines(&tag, Some(&last), 1, 860);
            last = format!("{tag}{:07x}", 0);
            let storage = FileStorage::new();
            storage.append(&path, &line).expect("append");
            let r = b.sync();
            assert_eq!(r.counts().pushed, 1, "{:?}", r.counts());
            black_box(r)
        })
    });
    let segments = b.s3.segments(&remote_file).expect("segments").expect("the remote file");
    let newest = segments.last().map_or(0, |s| s.len);
    println!(
        "sync/append_1k_to_100mb: the last sync uploaded a segment of {newest} bytes onto a file of {} bytes",
        segments.iter().map(|s| s.len).sum::<u64>()
    );
    g.bench_function("floor_read_100mb", |bench| bench.iter(|| black_box(fs_err::read(&path).expect("read").len())));
    g.finish();
}

fn merge_20k(c: &mut Criterion) {
    let id = "00000000-0000-4000-8000-000000000020";
    let mut base = header(id, "/bench/m");
    base.extend(lines("m", None, 20_000, 400));
    let fork = format!("m{:07x}", 20_000 - 1);
    let mut ours = base.clone();
    ours.extend(lines("o", Some(&fork), 100, 400));
    let mut theirs = base;
    theirs.extend(lines("t", Some(&fork), 100, 400));
    let mut g = c.benchmark_group("merge");
    g.sample_size(10);
    g.bench_function("20k_diverged_100", |bench| {
        bench.iter(|| {
            let m = merge_bytes(
                MergeInput { path: Path::new("ours.jsonl"), bytes: &ours },
                MergeInput { path: Path::new("theirs.jsonl"), bytes: &theirs },
                Dialect::Pi,
                &MergeLeaf::Auto,
            )
            .expect("merge");
            assert_eq!(m.added.len(), 100);
            black_box(m)
        })
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5)).sample_size(10)
}

criterion_group! { name = benches; config = config(); targets = unchanged_1000, append_to_100mb, merge_20k }
criterion_main!(benches);
