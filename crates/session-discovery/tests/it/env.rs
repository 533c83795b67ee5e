//! Agent directories from the environment (`src/env.rs`).

use std::path::PathBuf;

use session_discovery::{AgentDirs, OmpHome, ProcessEnv};

use crate::support::TempDir;

#[test]
fn pi_default_and_override() {
    let env = ProcessEnv::new("/home/u", "/w", "/tmp");
    let d = AgentDirs::pi(&env);
    assert_eq!(d.agent_dir, PathBuf::from("/home/u/.pi/agent"));
    assert_eq!(d.sessions_root, PathBuf::from("/home/u/.pi/agent/sessions"));
    assert_eq!(d.default_session_dir("/x/y"), PathBuf::from("/home/u/.pi/agent/sessions/--x-y--"));
    let d = AgentDirs::pi(&env.clone().with_var("PI_CODING_AGENT_DIR", "~/agent"));
    assert_eq!(d.agent_dir, PathBuf::from("/home/u/agent"));
    let d = AgentDirs::pi(&env.with_var("PI_CODING_AGENT_DIR", ""));
    assert_eq!(d.agent_dir, PathBuf::from("/home/u/.pi/agent"));
}

#[test]
fn omp_homes_and_overrides() {
    let env = ProcessEnv::new("/home/u", "/w", "/tmp");
    assert_eq!(AgentDirs::omp(&env, OmpHome::MusePi).agent_dir, PathBuf::from("/home/u/.musepi/agent"));
    assert_eq!(AgentDirs::omp(&env, OmpHome::Omp).agent_dir, PathBuf::from("/home/u/.omp/agent"));
    let d = AgentDirs::omp(&env.clone().with_var("PI_CONFIG_DIR", ".cfg"), OmpHome::Omp);
    assert_eq!(d.agent_dir, PathBuf::from("/home/u/.cfg/agent"));
    let d = AgentDirs::omp(&env.with_var("PI_CODING_AGENT_DIR", "/a"), OmpHome::Omp);
    assert_eq!(d.sessions_root, PathBuf::from("/a/sessions"));
    assert_eq!(d.terminal_sessions_dir(), PathBuf::from("/a/terminal-sessions"));
}

#[test]
fn omp_xdg_dirs_only_when_they_exist() {
    let td = TempDir::new("xdg");
    let data = td.path().join("data");
    let state = td.path().join("state");
    let env = ProcessEnv::new("/home/u", "/w", "/tmp")
        .with_var("XDG_DATA_HOME", &data.to_string_lossy())
        .with_var("XDG_STATE_HOME", &state.to_string_lossy());
    let d = AgentDirs::omp(&env, OmpHome::Omp);
    assert_eq!(d.sessions_root, PathBuf::from("/home/u/.omp/agent/sessions"));
    fs_err::create_dir_all(data.join("omp")).unwrap();
    fs_err::create_dir_all(state.join("omp")).unwrap();
    let d = AgentDirs::omp(&env, OmpHome::Omp);
    assert_eq!(d.sessions_root, data.join("omp/sessions"));
    assert_eq!(d.terminal_sessions_dir(), state.join("omp/terminal-sessions"));
    // musepi looks for its own XDG name.
    assert_eq!(AgentDirs::omp(&env, OmpHome::MusePi).sessions_root, PathBuf::from("/home/u/.musepi/agent/sessions"));
}

#[test]
fn terminal_ids() {
    let env = ProcessEnv::new("/h", "/w", "/tmp");
    assert_eq!(env.terminal_id(), None);
    let mut tty = env.clone();
    tty.tty = Some("/dev/pts/3".into());
    assert_eq!(tty.clone().with_var("TMUX_PANE", "%1").terminal_id().as_deref(), Some("pts-3"));
    assert_eq!(env.clone().with_var("ZELLIJ_PANE_ID", "2").terminal_id().as_deref(), Some("zellij-2"));
    assert_eq!(
        env.clone().with_var("ZELLIJ_PANE_ID", "2").with_var("ZELLIJ_SESSION_NAME", "a/b").terminal_id().as_deref(),
        Some("zellij-a-b-2")
    );
    assert_eq!(env.clone().with_var("TMUX_PANE", "%1").terminal_id().as_deref(), Some("tmux-%1"));
    assert_eq!(env.clone().with_var("WT_SESSION", "g").terminal_id().as_deref(), Some("wt-g"));
    assert_eq!(env.with_var("TERM_SESSION_ID", "s").terminal_id().as_deref(), Some("apple-s"));
}

#[test]
fn omp_migrates_legacy_buckets() {
    let td = TempDir::new("migrate");
    let home = td.path().join("home");
    let tmp = td.path().join("tmp");
    fs_err::create_dir_all(&home).unwrap();
    fs_err::create_dir_all(tmp.join("proj")).unwrap();
    let env =
        ProcessEnv::new(&home, "/", &tmp).with_var("PI_CODING_AGENT_DIR", &td.path().join("agent").to_string_lossy());
    let d = AgentDirs::omp(&env, OmpHome::Omp);
    let cwd = tmp.join("proj").to_string_lossy().into_owned();
    // A legacy absolute bucket and a hashed bucket, one collision.
    let legacy = d.sessions_root.join(session_discovery::legacy_absolute_bucket(&cwd));
    fs_err::create_dir_all(&legacy).unwrap();
    fs_err::write(legacy.join("a.jsonl"), "a").unwrap();
    let canon = session_discovery::canonicalize_best_effort(&cwd);
    let hashed = d.sessions_root.join(session_discovery::hashed_bucket_name(
        &canon,
        &session_discovery::canonicalize_best_effort(&home.to_string_lossy()),
        &session_discovery::canonicalize_best_effort(&tmp.to_string_lossy()),
    ));
    fs_err::create_dir_all(&hashed).unwrap();
    fs_err::write(hashed.join("a.jsonl"), "dup").unwrap();
    fs_err::write(hashed.join("b.jsonl"), "b").unwrap();
    let target = d.ensure_default_session_dir(&session_store::FileStorage::new(), &cwd).unwrap();
    assert_eq!(target.file_name().unwrap(), "-tmp-proj");
    assert_eq!(fs_err::read_to_string(target.join("a.jsonl")).unwrap(), "a");
    assert_eq!(fs_err::read_to_string(target.join("b.jsonl")).unwrap(), "b");
    assert!(!legacy.exists());
    // The colliding file is left behind, not lost.
    assert_eq!(fs_err::read_to_string(hashed.join("a.jsonl")).unwrap(), "dup");
}

#[test]
fn omp_migrates_old_home_spelling() {
    let td = TempDir::new("homespell");
    let home = td.path().join("home");
    fs_err::create_dir_all(home.join("p")).unwrap();
    let env = ProcessEnv::new(&home, "/", "/nonexistent-tmp")
        .with_var("PI_CODING_AGENT_DIR", &td.path().join("agent").to_string_lossy());
    let d = AgentDirs::omp(&env, OmpHome::Omp);
    let enc = home.to_string_lossy().trim_start_matches('/').replace('/', "-");
    let old = d.sessions_root.join(format!("--{enc}-p--"));
    fs_err::create_dir_all(&old).unwrap();
    fs_err::write(old.join("s.jsonl"), "x").unwrap();
    let target =
        d.ensure_default_session_dir(&session_store::FileStorage::new(), &home.join("p").to_string_lossy()).unwrap();
    assert_eq!(target.file_name().unwrap(), "-p");
    assert!(target.join("s.jsonl").exists());
    assert!(!old.exists());
}
