//! Sessions on the servers beside the file system, in one run: append latency (median
//! and 99th percentile of single appends of a 1 KB line onto sessions of 1, 10 and
//! 100 MB), opening a 20,000-entry session, and listing 10,000 sessions, each on the
//! file storage, the native PostgreSQL layout (also with `synchronous_commit = off`),
//! omp's PostgreSQL table and Redis.
//!
//! Needs the machine's PostgreSQL (`SESSION_TEST_POSTGRES`, default
//! `host=/var/run/postgresql dbname=postgres`: a database of its own is created and
//! dropped) and Redis (`SESSION_TEST_REDIS`, default `redis://127.0.0.1:6379/0`: a key
//! prefix of its own, deleted after). Run with
//! `cargo bench -p session-cli --bench servers -- --warm-up-time 1 --measurement-time 3 --sample-size 10`
//! (or `cargo xtask bench`).

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use session::discovery::{AgentDirs, Discovery, OmpHome, ProcessEnv};
use session::store::{FileStorage, Storage};
use session::{Dialect, Env, SessionManager};
use session_store_postgres::{NativePostgresStorage, PostgresStorage};
use session_store_redis::RedisStorage;

use session_testkit::postgres::TestDb;
use session_testkit::redis::TestPrefix;
use session_testkit::{TempDir, generate};

/// The backends of one run; the database, key prefix and folder go with it.
struct Backends {
    list: Vec<(&'static str, Arc<dyn Storage>, PathBuf)>,
    _db: TestDb,
    _prefix: TestPrefix,
    _dir: TempDir,
}

impl Backends {
    fn connect() -> Backends {
        let db = TestDb::create("servers bench").expect("PostgreSQL").expect("PostgreSQL for the benches");
        let conn = db.conn();
        let prefix = TestPrefix::create("servers bench").expect("Redis").expect("Redis for the benches");
        let dir = TempDir::new("session-bench-servers");
        let list: Vec<(&'static str, Arc<dyn Storage>, PathBuf)> = vec![
            ("file", Arc::new(FileStorage::new()), dir.to_path_buf()),
            ("pg-native", Arc::new(NativePostgresStorage::connect(&conn).expect("native")), "/bench".into()),
            // The same tables, each commit acknowledged before its WAL reaches the disk
            // (`synchronous_commit = off`): what a commit costs without this machine's fsync.
            (
                "pg-native-async",
                Arc::new(
                    NativePostgresStorage::connect_with_stem(
                        &format!("{conn} options='-c synchronous_commit=off'"),
                        "async",
                    )
                    .expect("native, asynchronous commit"),
                ),
                "/bench".into(),
            ),
            ("pg-omp", Arc::new(PostgresStorage::connect(&conn).expect("omp table")), "/bench".into()),
            (
                "redis",
                Arc::new(
                    RedisStorage::connect_with_prefix(&session_testkit::redis::url(), prefix.prefix()).expect("redis"),
                ),
                "/bench".into(),
            ),
        ];
        Backends { list, _db: db, _prefix: prefix, _dir: dir }
    }
}

impl Drop for Backends {
    fn drop(&mut self) {
        // The storages' connections close before the database is dropped.
        self.list.clear();
    }
}

/// A session of about `bytes` bytes: a header and 2.4 KB message lines.
fn session_of(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 4096);
    out.extend_from_slice(
        br#"{"type":"session","version":3,"id":"bench","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
    );
    out.push(b'\n');
    let mut i = 0u64;
    while out.len() < bytes {
        out.extend_from_slice(
            format!(
                r#"{{"type":"message","id":"{i:08x}","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"{}","timestamp":1}}}}"#,
                "x".repeat(2300)
            )
            .as_bytes(),
        );
        out.push(b'\n');
        i += 1;
    }
    out
}

/// Each append timed on its own; median and 99th percentile printed per backend and size.
fn append_latency(_: &mut Criterion) {
    let b = Backends::connect();
    let line = format!(
        "{}\n",
        format_args!(
            r#"{{"type":"custom","customType":"bench","id":"feedbeef","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","data":"{}"}}"#,
            "y".repeat(900)
        )
    );
    for mb in [1usize, 10, 100] {
        let base = session_of(mb << 20);
        for (name, storage, root) in &b.list {
            let path = root.join(format!("append-{mb}mb.jsonl"));
            storage.write(&path, &base).expect("base session");
            // omp's table rewrites the whole row per append: fewer samples where each costs seconds.
            let n = match (*name, mb) {
                ("pg-omp", 100) => 5,
                ("pg-omp", 10) => 20,
                ("pg-omp", _) => 50,
                _ => 300,
            };
            let mut times = Vec::with_capacity(n);
            for _ in 0..n {
                let start = Instant::now();
                storage.append(&path, line.as_bytes()).expect("append");
                times.push(start.elapsed());
            }
            times.sort();
            let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
            println!(
                "append-latency/{name}/{mb}MB: median {:.3} ms, p99 {:.3} ms ({n} appends)",
                at(0.5).as_secs_f64() * 1e3,
                at(0.99).as_secs_f64() * 1e3,
            );
            storage.unlink(&path).expect("remove");
        }
    }
}

/// `SessionManager::open` of a 20,000-entry omp session (about 48 MB).
fn open_20k(c: &mut Criterion) {
    let b = Backends::connect();
    let text = generate::session(&generate::Options::bench(Dialect::Omp, 20_000, 5));
    let mut group = c.benchmark_group("servers/open-20k");
    group.sample_size(10);
    for (name, storage, root) in &b.list {
        let path = root.join("open-20k.jsonl");
        storage.write(&path, text.as_bytes()).expect("session");
        let env = Env::bare(storage.clone());
        group.bench_function(*name, |bench| {
            bench.iter(|| black_box(SessionManager::open(Dialect::Omp, &path, env.clone()).expect("open")))
        });
    }
    group.finish();
}

/// omp's `list(cwd, dir)` of a directory of 10,000 sessions.
fn list_10k(c: &mut Criterion) {
    let b = Backends::connect();
    let mut group = c.benchmark_group("servers/list-10k");
    group.sample_size(10);
    for (name, storage, root) in &b.list {
        let dir = root.join("list");
        storage.ensure_dir(&dir).expect("dir");
        for i in 0..10_000 {
            let body = format!(
                "{{\"type\":\"session\",\"version\":3,\"id\":\"s{i:05}\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/w\"}}\n\
                 {{\"type\":\"message\",\"id\":\"u{i:05}\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"question {i}\",\"timestamp\":1}}}}\n\
                 {{\"type\":\"message\",\"id\":\"a{i:05}\",\"parentId\":\"u{i:05}\",\"timestamp\":\"2026-01-01T00:00:02.000Z\",\"message\":{{\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"an answer\"}}],\"stopReason\":\"stop\",\"timestamp\":2}}}}\n"
            );
            storage
                .write(&dir.join(format!("2026-01-01T00-00-00-000Z_s{i:05}.jsonl")), body.as_bytes())
                .expect("session");
        }
        let env = ProcessEnv::new("/home/bench", "/w", "/tmp");
        let d = Discovery::new(AgentDirs::for_dialect(Dialect::Omp, &env, OmpHome::MusePi))
            .with_storage(storage.clone())
            .read_only();
        assert_eq!(d.list("/w", Some(&dir), &mut |_| {}).expect("list").len(), 10_000, "{name} lists every session");
        group.bench_function(*name, |bench| {
            bench.iter(|| black_box(d.list("/w", Some(&dir), &mut |_| {}).expect("list")))
        });
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).sample_size(10)
}

criterion_group! { name = benches; config = config(); targets = append_latency, open_20k, list_10k }
criterion_main!(benches);
