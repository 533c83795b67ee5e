//! The one parallelism setting (`Env::parallelism`, `Discovery::with_parallelism`):
//! results never depend on it.

use std::path::Path;
use std::sync::Arc;

use session::discovery::{AgentDirs, Discovery, OmpHome, ProcessEnv, sessions_to_json};
use session::store::FileStorage;
use session::{Dialect, Env, Parallelism, SessionManager};

use session_testkit::TempDir;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// A session of about 6 MiB (parsed in pieces), with a torn last line.
fn large_session(dialect: Dialect) -> String {
    let mut text = String::new();
    if dialect == Dialect::Omp {
        let slot = session::model::TitleSlot {
            title: "large".into(),
            source: Some("user".into()),
            updated_at: "2026-01-01T00:00:00.000Z".into(),
        };
        text.push_str(&slot.to_line().unwrap_or_default());
    }
    text.push_str(r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#);
    text.push('\n');
    let mut parent = "null".to_owned();
    let mut i = 0;
    while text.len() < 6 << 20 {
        let body = "words é\\n ".repeat(i % 400);
        text.push_str(&format!(
            r#"{{"type":"message","id":"e{i:07}","parentId":{parent},"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"{body}","timestamp":{i}}}}}"#
        ));
        text.push('\n');
        parent = format!(r#""e{i:07}""#);
        i += 1;
    }
    text.push_str(r#"{"type":"message","id":"torn"#);
    text
}

#[test]
fn opens_forks_and_branches_read_the_same_whatever_the_threads() -> Result<()> {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let tmp = TempDir::new("parallelism");
        let file = tmp.path().join("large.jsonl");
        fs_err::write(&file, large_session(dialect))?;
        let env =
            |p: Parallelism| Env::bare(Arc::new(FileStorage::new())).with_process_cwd(tmp.path()).with_parallelism(p);
        let open = |p: Parallelism| SessionManager::open_read_only(dialect, &file, env(p));
        let (serial, threaded) = (open(Parallelism::SERIAL)?, open(Parallelism::new(4))?);
        assert!(serial.tree().entries().len() > 1000, "{dialect:?}: a large session");
        assert_eq!(serial.tree().entries(), threaded.tree().entries(), "{dialect:?}: entries");
        assert_eq!(serial.diagnostics(), threaded.diagnostics(), "{dialect:?}: diagnostics");
        assert_eq!(serial.load_report(), threaded.load_report(), "{dialect:?}: load report");
        // Forks and branches written with and without a second thread hold the same entries.
        let mut written = Vec::new();
        for (name, p) in [("serial", Parallelism::SERIAL), ("threaded", Parallelism::new(4))] {
            let dir = tmp.path().join(name);
            let fork = SessionManager::fork_from(dialect, &file, "/q", &dir, env(p))?;
            let mut branch = SessionManager::open(dialect, fork.session_file().ok_or("a file")?, env(p))?;
            let mid = branch.tree().entries()[branch.tree().entries().len() / 2].id().ok_or("id")?.to_owned();
            let out = branch.create_branched_session(&mid)?.ok_or("a branch file")?;
            let reread = SessionManager::open_read_only(dialect, &out, env(Parallelism::SERIAL))?;
            let texts: Vec<String> = reread.tree().entries().iter().map(|r| r.text().to_owned()).collect();
            written.push(texts);
        }
        assert_eq!(written[0], written[1], "{dialect:?}: branches of forks");
    }
    Ok(())
}

#[test]
fn listings_are_the_same_whatever_the_threads() -> Result<()> {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let tmp = TempDir::new("parallelism-list");
        let dir = tmp.path().join("sessions");
        fs_err::create_dir_all(&dir)?;
        for i in 0..40 {
            let text = format!(
                "{}\n{}\n",
                format_args!(
                    r#"{{"type":"session","version":3,"id":"s{i}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}}"#
                ),
                format_args!(
                    r#"{{"type":"message","id":"m{i}","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"hello {i}","timestamp":{i}}}}}"#
                ),
            );
            fs_err::write(dir.join(format!("2026-01-01T00-00-00-000Z_s{i}.jsonl")), text)?;
        }
        let process = ProcessEnv::new(tmp.path().join("home"), "/p", "/tmp");
        let list = |p: Parallelism| -> Result<String> {
            let d = Discovery::new(AgentDirs::for_dialect(dialect, &process, OmpHome::MusePi)).with_parallelism(p);
            Ok(sessions_to_json(dialect, &d.list("/p", Some(Path::new(&dir)), &mut |_| {})?))
        };
        let serial = list(Parallelism::SERIAL)?;
        assert!(serial.contains("hello 39"), "{dialect:?}: {serial}");
        assert_eq!(serial, list(Parallelism::new(8))?, "{dialect:?}");
    }
    Ok(())
}
