//! Terminal breadcrumbs and `--continue` (`src/breadcrumb.rs`).

use session_discovery::{
    AgentDirs, ContinueDecision, Discovery, OmpHome, ProcessEnv, cwd_identity, read_breadcrumb, write_breadcrumb,
};

use crate::support::{TempDir, assistant, header, lines, user, write};

fn dirs(root: &std::path::Path) -> AgentDirs {
    let env = ProcessEnv::new(root.join("home"), root, "/nonexistent-tmp")
        .with_var("PI_CODING_AGENT_DIR", &root.join("agent").to_string_lossy());
    AgentDirs::omp(&env, OmpHome::MusePi)
}

#[test]
fn write_and_read_back() {
    let td = TempDir::new("crumb");
    let d = dirs(td.path());
    let file = td.path().join("s.jsonl");
    write_breadcrumb(&d, "pts-3", "/w", &file, true, Some((7, 42))).unwrap();
    let text = fs_err::read_to_string(d.terminal_sessions_dir().join("pts-3")).unwrap();
    assert_eq!(text, format!("/w\n{}\nfresh\ncwdstat 7 42\n", file.display()));
    let bc = read_breadcrumb(&d, "pts-3").unwrap();
    assert!(bc.fresh && !bc.exists);
    assert_eq!(bc.cwd_stat, Some((7, 42)));
    // Not fresh and missing → none.
    write_breadcrumb(&d, "pts-3", "/w", &file, false, None).unwrap();
    assert_eq!(read_breadcrumb(&d, "pts-3"), None);
    fs_err::write(&file, "x").unwrap();
    let bc = read_breadcrumb(&d, "pts-3").unwrap();
    assert!(bc.exists && !bc.fresh && bc.cwd_stat.is_none());
    // Too short, or absent.
    fs_err::write(d.terminal_sessions_dir().join("short"), "/only-cwd\n").unwrap();
    assert_eq!(read_breadcrumb(&d, "short"), None);
    assert_eq!(read_breadcrumb(&d, "absent"), None);
    // Extra unknown lines are tolerated.
    fs_err::write(d.terminal_sessions_dir().join("extra"), format!("/w\n{}\nwhatever\nfresh\n", file.display()))
        .unwrap();
    assert!(read_breadcrumb(&d, "extra").unwrap().fresh);
}

#[test]
fn continue_uses_breadcrumb_then_bucket() {
    let td = TempDir::new("continue");
    let d = dirs(td.path());
    let cwd = td.path().join("proj");
    fs_err::create_dir_all(&cwd).unwrap();
    let cwd_s = cwd.to_string_lossy().into_owned();
    let disc = Discovery::new(d.clone());
    let bucket = d.ensure_default_session_dir(&session_store::FileStorage::new(), &cwd_s).unwrap();
    let older = bucket.join("1_old.jsonl");
    let newer = bucket.join("2_new.jsonl");
    let body = |id: &str, cwd: &str| {
        lines(&[header(id, "2026-01-01T00:00:00.000Z", cwd), user("u", "q", 1), assistant("a", "r", 2, "stop")])
    };
    // The id of the session `--continue` opens in the terminal `tty`.
    let opened = |tty: Option<&str>| match disc.continue_recent(&cwd_s, None, tty).unwrap() {
        ContinueDecision::Open(s) => s.id,
        other => panic!("{other:?}"),
    };
    write(&older, &body("old", &cwd_s), 1_000);
    write(&newer, &body("new", &cwd_s), 2_000);
    // No breadcrumb: newest non-empty.
    assert_eq!(opened(None), "new");
    // Breadcrumb for this cwd: that file.
    write_breadcrumb(&d, "t1", &cwd_s, &older, false, cwd_identity(&cwd)).unwrap();
    assert_eq!(opened(Some("t1")), "old");
    // Fresh breadcrumb whose file does not exist: a new session.
    write_breadcrumb(&d, "t2", &cwd_s, &bucket.join("3_fresh.jsonl"), true, None).unwrap();
    assert_eq!(disc.continue_recent(&cwd_s, None, Some("t2")).unwrap(), ContinueDecision::New);
    // Renamed project: old cwd gone, current dir has the recorded identity.
    let gone = td.path().join("gone").to_string_lossy().into_owned();
    let moved_bucket = d.sessions_root.join("-gone");
    let moved = moved_bucket.join("1_m.jsonl");
    write(&moved, &body("m", &gone), 1);
    write_breadcrumb(&d, "t3", &gone, &moved, false, cwd_identity(&cwd)).unwrap();
    assert_eq!(
        disc.continue_recent(&cwd_s, None, Some("t3")).unwrap(),
        ContinueDecision::Reroot { session_file: moved.clone(), old_cwd: gone.clone() }
    );
    // Without matching identity evidence it is not re-rooted.
    write_breadcrumb(&d, "t4", &gone, &moved, false, Some((1, 1))).unwrap();
    assert_eq!(opened(Some("t4")), "m");
}
