//! Pins and the archive (`session::maintenance::MarkStore`): concurrent writers keep
//! each other's marks, a damaged file is refused and left as it is, a random sequence of
//! marks reads back as a simple model says, and an omp pin is omp's own.

use std::collections::HashSet;
use std::path::Path;

use session::Dialect;
use session::discovery::{AgentDirs, Discovery, OmpHome, ProcessEnv};
use session::maintenance::{JobError, Mark, MarkStore};
use session_testkit::TempDir;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn store(dir: &Path) -> MarkStore {
    MarkStore::new(dir.join("state/session-store"), dir.join("omp-agent"))
}

/// Eight threads, each marking sessions of its own in both files at once: every mark is
/// there afterwards (no read-modify-write lost another's).
#[test]
fn concurrent_writers_keep_every_mark() -> Result<()> {
    let dir = TempDir::new("marks-concurrent");
    let marks = store(&dir);
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let marks = &marks;
                s.spawn(move || -> std::result::Result<(), JobError> {
                    for i in 0..5 {
                        marks.pin(Dialect::Pi, &format!("pi-{t}-{i}"))?;
                        marks.archive(Dialect::Omp, &format!("omp-{t}-{i}"))?;
                        marks.pin(Dialect::Omp, &format!("omp-{t}-{i}"))?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| "a marking thread panicked")??;
        }
        Ok(())
    })?;
    let read = marks.read()?;
    for t in 0..8 {
        for i in 0..5 {
            assert!(read.of(Dialect::Pi, &format!("pi-{t}-{i}")).pinned, "pi-{t}-{i}");
            let omp = read.of(Dialect::Omp, &format!("omp-{t}-{i}"));
            assert!(omp.pinned && omp.archived, "omp-{t}-{i}");
        }
    }
    Ok(())
}

/// A marks file that is not one, and an omp pins file that is no array, are refused
/// with an error naming them, and stay as they were; reading refuses them too.
#[test]
fn a_damaged_file_is_refused_and_kept() -> Result<()> {
    let dir = TempDir::new("marks-damaged");
    let marks = store(&dir);
    marks.archive(Dialect::Pi, "a")?;
    let file = marks.marks_file();
    fs_err::write(&file, b"{\"version\": 1, \"pinned\": [\"x\"")?;
    for result in [marks.pin(Dialect::Pi, "b").map(drop), marks.read().map(drop)] {
        match result {
            Err(JobError::MarksDamaged { path, .. }) => assert_eq!(path, file),
            other => return Err(format!("expected MarksDamaged, got {other:?}").into()),
        }
    }
    assert_eq!(fs_err::read(&file)?, b"{\"version\": 1, \"pinned\": [\"x\"");
    let pins = marks.omp_pins_file();
    fs_err::create_dir_all(dir.join("omp-agent"))?;
    fs_err::write(&pins, b"{\"not\": \"a list\"}")?;
    let err = marks.pin(Dialect::Omp, "c");
    assert!(matches!(&err, Err(JobError::MarksDamaged { path, .. }) if path == &pins), "{err:?}");
    assert!(err.as_ref().err().is_some_and(|e| e.to_string().contains("session-pins.json")), "{err:?}");
    assert_eq!(fs_err::read(&pins)?, b"{\"not\": \"a list\"}");
    Ok(())
}

/// Reading creates nothing: no state folder, no agent folder.
#[test]
fn reading_never_writes() -> Result<()> {
    let dir = TempDir::new("marks-read");
    let marks = store(&dir);
    assert_eq!(marks.read()?.of(Dialect::Pi, "a"), Default::default());
    assert!(!dir.join("state").exists() && !dir.join("omp-agent").exists());
    Ok(())
}

/// An omp pin made here is omp's: written as omp writes its list (tab-indented JSON,
/// mode 0600), read by our discovery as omp's pins (pinned first), and a second pin is
/// no change.
#[test]
fn an_omp_pin_is_omps_own() -> Result<()> {
    let dir = TempDir::new("marks-omp");
    let agent = dir.join("omp-agent");
    let marks = MarkStore::new(dir.join("state"), &agent);
    assert!(marks.pin(Dialect::Omp, "019a-one")?);
    assert!(marks.pin(Dialect::Omp, "019a-two")?);
    assert!(!marks.pin(Dialect::Omp, "019a-two")?, "already pinned: nothing written");
    assert_eq!(fs_err::read_to_string(agent.join("session-pins.json"))?, "[\n\t\"019a-one\",\n\t\"019a-two\"\n]");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(fs_err::metadata(agent.join("session-pins.json"))?.permissions().mode() & 0o777, 0o600);
    }
    let env = ProcessEnv::new(dir.path(), dir.path(), std::env::temp_dir())
        .with_var("PI_CODING_AGENT_DIR", &agent.to_string_lossy());
    let discovery = Discovery::new(AgentDirs::omp(&env, OmpHome::Omp));
    assert_eq!(discovery.pinned_ids(), ["019a-one", "019a-two"]);
    assert!(marks.unpin(Dialect::Omp, "019a-one")?);
    assert_eq!(fs_err::read_to_string(agent.join("session-pins.json"))?, "[\n\t\"019a-two\"\n]");
    assert!(!dir.join("state").exists(), "an omp pin writes nothing of ours");
    Ok(())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Random marks put on and taken off read back as a set per (file, mark) says.
    #[test]
    fn marks_read_back_as_a_model_says(ops in proptest::collection::vec((0..2u8, 0..2u8, 0..4u8, proptest::bool::ANY), 0..24)) {
        let dir = TempDir::new("marks-model");
        let marks = store(&dir);
        let mut model: HashSet<(Dialect, bool, String)> = HashSet::new();
        for (d, m, id, on) in ops {
            let dialect = if d == 0 { Dialect::Pi } else { Dialect::Omp };
            let mark = if m == 0 { Mark::Pinned } else { Mark::Archived };
            let id = format!("id-{id}");
            // Each agent's marks are its own, even for one id.
            let key = (dialect, mark == Mark::Pinned, id.clone());
            let changed = marks.set(dialect, &id, mark, on).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
            let expected = if on { model.insert(key) } else { model.remove(&key) };
            proptest::prop_assert_eq!(changed, expected);
        }
        let read = marks.read().map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
        for dialect in [Dialect::Pi, Dialect::Omp] {
            for id in (0..4).map(|i| format!("id-{i}")) {
                let got = read.of(dialect, &id);
                proptest::prop_assert_eq!(got.pinned, model.contains(&(dialect, true, id.clone())));
                proptest::prop_assert_eq!(got.archived, model.contains(&(dialect, false, id.clone())));
            }
        }
    }
}
