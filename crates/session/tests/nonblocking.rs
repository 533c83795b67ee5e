//! `session::nonblocking` from tokio runtimes: no call holds a worker, and file and
//! PostgreSQL sessions driven by concurrent tasks keep every append.
//!
//! The PostgreSQL part makes its own database and drops it; without a server it is
//! skipped, except under `SESSION_REQUIRE_SERVERS=1` (CI), where it fails.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use session::nonblocking::{AsyncSession, blocking};
use session::store::Storage;
use session::store_postgres::PostgresStorage;
use session::{Dialect, Env, SessionManager};
use session_testkit::TempDir;
use session_testkit::postgres::TestDb;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

fn runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build().expect("a runtime")
}

fn user(text: &str, ts: i64) -> serde_json::Value {
    json!({"role": "user", "content": text, "timestamp": ts})
}

/// An assistant turn (both agents write a session's file once one is there).
fn assistant(text: &str, ts: i64) -> serde_json::Value {
    json!({
        "role": "assistant", "content": [{"type": "text", "text": text}], "api": "anthropic-messages",
        "provider": "anthropic", "model": "m", "stopReason": "stop", "timestamp": ts,
        "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
    })
}

/// With a single worker, a call that held it would keep every other task from running.
/// Each call here waits, on the blocking pool, for a task that can only run on that
/// worker: it returns only because the worker was free while it ran.
#[test]
fn no_call_holds_the_only_worker() -> TestResult {
    let dir = TempDir::new("nonblocking-worker");
    let rt = runtime(1);
    rt.block_on(async {
        let s = AsyncSession::create(Dialect::Pi, "/work", &dir, Env::files()).await?;
        s.append_message_json(user("first", 1)).await?;

        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let ticker = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            tx.send(()).expect("the call is waiting");
        });
        let n = s
            .with(move |m| {
                rx.recv_timeout(Duration::from_secs(30)).expect("another task ran while this call was running");
                m.context().map(|c| c.messages.len())
            })
            .await?;
        assert_eq!(n, 1);
        ticker.await?;

        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let ticker = tokio::spawn(async move { tx.send(()).expect("the call is waiting") });
        let got = blocking(move || rx.recv_timeout(Duration::from_secs(30)).is_ok()).await;
        assert!(got, "another task ran while `blocking` was running");
        ticker.await?;

        // An open of a larger session through the pool reads it whole, with another task
        // running beside it (that the worker stays free is what the two handshakes above
        // show: `open` is `blocking` around the blocking call).
        let file = s.with(|m| m.session_file().map(Path::to_path_buf)).await.ok_or("a file")?;
        s.with(|m| -> Result<(), session::SessionError> {
            for k in 0..2_000 {
                m.append_message_json(user(&"x".repeat(200), 2 + k))?;
            }
            Ok(())
        })
        .await?;
        s.close().await?;
        let ticks = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counting = Arc::clone(&ticks);
        let counter = tokio::spawn(async move {
            loop {
                counting.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
        });
        let opened = AsyncSession::open_read_only(Dialect::Pi, file, Env::files()).await?;
        assert_eq!(opened.with(|m| m.tree().entries().len()).await, 2_001);
        counter.abort();
        assert!(ticks.load(std::sync::atomic::Ordering::Relaxed) > 0, "the task beside the open ran");
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    })?;
    Ok(())
}

/// Concurrent tasks on two workers: sessions on files and on PostgreSQL, created,
/// appended to (two tasks sharing one session among them) and read back.
#[test]
fn concurrent_tasks_drive_file_and_postgres_sessions() -> TestResult {
    // The test's own admin client lives outside the runtime.
    let Some(db) = TestDb::create("concurrent_tasks_drive_file_and_postgres_sessions")? else { return Ok(()) };
    let conn = db.conn();
    let rt = runtime(2);
    let dir = TempDir::new("nonblocking-tasks");
    rt.block_on(async {
        // The blocking client makes a runtime of its own: on the pool, not on a worker.
        let c = conn.clone();
        let pg = blocking(move || PostgresStorage::connect(&c)).await?;
        let envs = [
            ("file", Env::files(), dir.to_path_buf()),
            ("postgres", Env::memory().with_storage(Arc::new(pg)), PathBuf::from("/pg/sessions")),
        ];
        let mut tasks = Vec::new();
        for (name, env, root) in &envs {
            for k in 0..4 {
                let (env, root, name) = (env.clone(), root.clone(), *name);
                let dialect = if k % 2 == 0 { Dialect::Pi } else { Dialect::Omp };
                tasks.push(tokio::spawn(async move {
                    let s = AsyncSession::create(dialect, "/work", &root.join(format!("t{k}")), env.clone()).await?;
                    // Two tasks append to one session through clones.
                    let other = s.clone();
                    let side = tokio::spawn(async move {
                        for i in 0..10 {
                            other.append_message_json(user(&format!("{name} side {i}"), 100 + i)).await?;
                            tokio::task::yield_now().await;
                        }
                        Ok::<_, session::SessionError>(())
                    });
                    for i in 0..10 {
                        s.append_message_json(assistant(&format!("{name} main {i}"), i)).await?;
                        tokio::task::yield_now().await;
                    }
                    side.await.map_err(|e| e.to_string())??;
                    let file = s.with(|m| m.session_file().map(Path::to_path_buf)).await.ok_or("a file")?;
                    s.close().await?;
                    let back = AsyncSession::open_read_only(dialect, file, env).await?;
                    let ctx = back.context().await?;
                    Ok::<_, Box<dyn std::error::Error + Send + Sync>>((name, ctx.messages.len()))
                }));
            }
        }
        for t in tasks {
            let (name, n) = t.await??;
            assert_eq!(n, 20, "{name}: every append of both tasks is in the session");
        }
        drop(envs);
        // A storage with a pooled connection, dropped on the thread driving the runtime
        // (as at the end of an `async` block): closing the connection must not panic.
        let conn2 = conn.clone();
        let pg = blocking(move || PostgresStorage::connect(&conn2)).await?;
        let used = pg.clone();
        assert!(!blocking(move || used.exists(Path::new("/pg/none.jsonl"))).await?);
        drop(pg);
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    })?;
    drop(rt);
    drop(db);
    Ok(())
}

/// The blocking API still works where no runtime is (a drop outside one included).
#[test]
fn a_session_dropped_outside_a_runtime_closes_in_place() -> TestResult {
    let dir = TempDir::new("nonblocking-outside");
    let m = SessionManager::create(Dialect::Pi, "/work", &dir, Env::files())?;
    let s = AsyncSession::new(m);
    let rt = runtime(1);
    let file = rt.block_on(async {
        s.append_message_json(user("kept", 1)).await?;
        s.with(|m| m.session_file().map(Path::to_path_buf)).await.ok_or_else(|| "a file".into())
    });
    let file: PathBuf = file.map_err(|e: Box<dyn std::error::Error + Send + Sync>| e)?;
    drop(rt);
    drop(s);
    let back = SessionManager::open_read_only(Dialect::Pi, &file, Env::files())?;
    assert_eq!(back.tree().entries().len(), 1);
    Ok(())
}
