//! Listing, lookup and resume (`src/list.rs`, `src/pi_scan.rs`, `src/omp_scan.rs`).

use std::path::Path;

use session_discovery::{
    AgentDirs, Dialect, Discovery, OmpHome, ProcessEnv, ResumeTarget, Scope, SessionStatus, sessions_to_json,
};

use crate::support::{TempDir, assistant, header, lines, load_fixture, user, write};

fn disc(dialect: Dialect, root: &Path) -> Discovery {
    let env = ProcessEnv::new(root.join("home"), root, "/nonexistent-tmp")
        .with_var("PI_CODING_AGENT_DIR", &root.join("agent").to_string_lossy());
    Discovery::new(AgentDirs::for_dialect(dialect, &env, OmpHome::MusePi))
}

fn json_of(d: Dialect, s: &[session_discovery::SessionInfo], dir: &Path) -> serde_json::Value {
    let text = sessions_to_json(d, s).replace(&*dir.to_string_lossy(), "{dir}");
    serde_json::from_str(&text).expect("valid json")
}

#[test]
fn fixtures_match_reference() {
    for (dialect, temp, fixture) in
        [(Dialect::Pi, "pi-fixture", "pi-branchy"), (Dialect::Omp, "omp-fixture", "omp-fork")]
    {
        let td = TempDir::new(temp);
        let expected = load_fixture(fixture, td.path());
        let got = disc(dialect, td.path()).list("/tmp", Some(td.path()), &mut |_| {}).unwrap();
        assert_eq!(json_of(dialect, &got, td.path()), expected, "{fixture}");
    }
}

#[test]
fn pi_fields_order_and_filter() {
    let td = TempDir::new("pi-list");
    let dir = td.path().join("s");
    let a = dir.join("2026-01-01T00-00-00-000Z_a.jsonl");
    write(
        &a,
        &lines(&[
            header("a", "2026-01-01T00:00:00.000Z", "/tmp"),
            user("u1", "hello world", 1000),
            assistant("a1", "resp", 2000, "stop"),
            r#"{"type":"message","id":"t","parentId":null,"timestamp":"x","message":{"role":"toolResult","content":[],"timestamp":999999999999}}"#.into(),
            r#"{"type":"session_info","id":"n","parentId":null,"timestamp":"x","name":"  Named  "}"#.into(),
        ]),
        5,
    );
    // Newer activity, other cwd → filtered out.
    write(
        &dir.join("2026-01-02T00-00-00-000Z_b.jsonl"),
        &lines(&[header("b", "2026-01-02T00:00:00.000Z", "/var/tmp"), user("u", "x", 9000)]),
        5,
    );
    // No messages → modified falls back to the header time.
    write(
        &dir.join("2026-01-03T00-00-00-000Z_c.jsonl"),
        &lines(&[header("c", "1970-01-01T00:00:01.500Z", "/tmp/")]),
        5,
    );
    // Invalid: a message entry without a message makes pi drop the file.
    write(
        &dir.join("2026-01-04T00-00-00-000Z_d.jsonl"),
        &lines(&[header("d", "2026-01-01T00:00:00.000Z", "/tmp"), r#"{"type":"message"}"#.into()]),
        5,
    );
    fs_err::write(dir.join("notes.txt"), "x").unwrap();
    let d = disc(Dialect::Pi, td.path());
    let mut calls = Vec::new();
    let got = d.list("/tmp", Some(&dir), &mut |p| calls.push((p.loaded, p.total, p.partial.map(<[_]>::len)))).unwrap();
    let ids: Vec<&str> = got.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["a", "c"]);
    let a = &got[0];
    assert_eq!(a.message_count, 3);
    assert_eq!(a.modified, Some(2000));
    assert_eq!(a.name.as_deref(), Some("Named"));
    assert_eq!(a.first_message, "hello world");
    assert_eq!(a.all_messages_text, "hello world resp");
    assert_eq!(got[1].modified, Some(1500));
    assert_eq!(got[1].first_message, "(no messages)");
    assert_eq!(calls.len(), 4);
    assert_eq!(calls[3].0, 4);
    assert_eq!(calls[3].1, 4);
    assert_eq!(calls[3].2, Some(2));
    // Without the cwd filter (list_all over the dir) the /var/tmp fork is listed.
    let all = d.list_all(Some(&dir), &mut |_| {}).unwrap();
    assert_eq!(all.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["b", "a", "c"]);
}

#[test]
fn pi_default_dir_is_created_and_not_filtered() {
    let td = TempDir::new("pi-default");
    let d = disc(Dialect::Pi, td.path());
    let dir = d.dirs().default_session_dir("/proj");
    assert!(!dir.exists());
    assert!(d.list("/proj", None, &mut |_| {}).unwrap().is_empty());
    assert!(dir.is_dir());
    // In the default dir, a session with another header cwd is still listed.
    write(&dir.join("x.jsonl"), &lines(&[header("x", "2026-01-01T00:00:00.000Z", "/elsewhere")]), 1);
    assert_eq!(d.list("/proj", Some(&dir), &mut |_| {}).unwrap().len(), 1);
}

#[test]
fn pi_list_all_buckets_and_lookup() {
    let td = TempDir::new("pi-all");
    let d = disc(Dialect::Pi, td.path());
    let root = &d.dirs().sessions_root;
    write(
        &root.join("--p1--/1_abc.jsonl"),
        &lines(&[header("abc-1", "2026-01-01T00:00:00.000Z", "/p1"), user("u", "one", 100)]),
        10,
    );
    write(
        &root.join("--p2--/2_abd.jsonl"),
        &lines(&[header("abd-2", "2026-01-01T00:00:00.000Z", "/p2"), user("u", "two", 200)]),
        20,
    );
    write(&root.join("stray.jsonl"), &lines(&[header("stray", "2026-01-01T00:00:00.000Z", "/")]), 30);
    let all = d.list_all(None, &mut |_| {}).unwrap();
    assert_eq!(all.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["abd-2", "abc-1"]);
    let p1 = root.join("--p1--");
    assert_eq!(d.find_by_id("/p1", "abc-1", None).unwrap(), Some(p1.join("1_abc.jsonl")));
    assert_eq!(d.find_by_id("/p1", "abc", None).unwrap(), None);
    assert_eq!(d.find_most_recent(&p1, Some("/p1")), Some(p1.join("1_abc.jsonl")));
    assert_eq!(d.find_most_recent(&p1, Some("/other")), None);
    assert_eq!(d.find_most_recent(&td.path().join("missing"), None), None);
    // Resume: local prefix, then global; case-sensitive.
    match d.resolve_resumable("abc", "/p1", None).unwrap() {
        ResumeTarget::Session { session, scope } => {
            assert_eq!(session.id, "abc-1");
            assert_eq!(scope, Scope::Local);
        }
        other => panic!("unexpected {other:?}"),
    }
    match d.resolve_resumable("abd", "/p1", None).unwrap() {
        ResumeTarget::Session { session, scope } => {
            assert_eq!(session.id, "abd-2");
            assert_eq!(scope, Scope::Global);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(d.resolve_resumable("ABC", "/p1", None).unwrap(), ResumeTarget::NotFound);
    assert_eq!(d.resolve_resumable("x.jsonl", "/p1", None).unwrap(), ResumeTarget::Path(td.path().join("x.jsonl")));
}

fn omp_file(id: &str, ts: &str, title_slot: Option<&str>, body: &[String]) -> String {
    let mut out = String::new();
    if let Some(t) = title_slot {
        out.push_str(&format!(r#"{{"type":"title","v":1,"title":"{t}","updatedAt":"{ts}","pad":"  "}}"#));
        out.push('\n');
    }
    out.push_str(&header(id, ts, "/tmp"));
    out.push('\n');
    out.push_str(&lines(body));
    out
}

#[test]
fn omp_order_fields_and_status() {
    let td = TempDir::new("omp-list");
    let dir = td.path().join("b");
    write(
        &dir.join("1_s1.jsonl"),
        &omp_file(
            "s1",
            "2026-01-01T00:00:00.000Z",
            Some("My title"),
            &[user("u", "hi", 1), assistant("a", "yo", 2, "stop")],
        ),
        1_000,
    );
    write(
        &dir.join("2_s2.jsonl"),
        &omp_file("s2", "2026-01-02T00:00:00.000Z", Some("   "), &[user("u", "q", 1)]),
        3_000,
    );
    write(
        &dir.join("3_s3.jsonl"),
        &omp_file("s3", "2026-01-03T00:00:00.000Z", None, &[user("u", "q", 1), assistant("a", "", 2, "aborted")]),
        2_000,
    );
    write(&dir.join(".hidden.jsonl"), &omp_file("h", "2026-01-03T00:00:00.000Z", None, &[]), 9_000);
    write(&dir.join("bad.jsonl"), "not json\n", 9_000);
    let d = disc(Dialect::Omp, td.path());
    let got = d.list("/tmp", Some(&dir), &mut |_| {}).unwrap();
    let ids: Vec<&str> = got.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["s2", "s3", "s1"]);
    assert_eq!(got[0].status, Some(SessionStatus::Pending));
    assert_eq!(got[0].title, None); // a blank slot title suppresses the header title
    assert_eq!(got[0].assistant_turns, Some(0));
    assert!(!got[0].is_empty(), "a real first message makes it non-empty");
    assert_eq!(got[1].status, Some(SessionStatus::Aborted));
    assert_eq!(got[2].status, Some(SessionStatus::Complete));
    assert_eq!(got[2].title.as_deref(), Some("My title"));
    assert_eq!(got[2].modified, Some(1_000));
    assert_eq!(got[2].size, Some(fs_err::metadata(dir.join("1_s1.jsonl")).unwrap().len()));
    assert_eq!(got[2].all_messages_text, "hi yo");
    assert_eq!(got[2].message_count, 2);
}

#[test]
fn omp_status_comes_from_the_tail_only() {
    let td = TempDir::new("omp-tail");
    let dir = td.path().join("b");
    // A big file: the user message is beyond the prefix, the tool call in the tail.
    let filler: Vec<String> = (0..200).map(|i| user(&format!("f{i}"), &"x".repeat(300), i)).collect();
    let mut body = filler;
    body.push(r#"{"type":"message","id":"z","parentId":null,"timestamp":"t","message":{"role":"assistant","content":[{"type":"toolCall","id":"c"}],"stopReason":"toolUse"}}"#.into());
    write(&dir.join("1_big.jsonl"), &omp_file("big", "2026-01-01T00:00:00.000Z", None, &body), 1);
    let d = disc(Dialect::Omp, td.path());
    let got = d.list("/tmp", Some(&dir), &mut |_| {}).unwrap();
    assert_eq!(got[0].status, Some(SessionStatus::Interrupted));
    assert!(got[0].message_count < 200, "messageCount only counts the prefix");
    assert_eq!(got[0].assistant_turns, Some(1));
}

#[test]
fn omp_long_header_uses_string_scan() {
    let td = TempDir::new("omp-longheader");
    let dir = td.path().join("b");
    let big = "y".repeat(5000);
    let text = format!(
        "{{\"type\":\"title\",\"v\":1,\"title\":\"T\",\"updatedAt\":\"x\",\"pad\":\"\"}}\n{{\"type\":\"session\",\"version\":3,\"id\":\"long\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/c\",\"extra\":\"{big}\"}}\n"
    );
    write(&dir.join("1_long.jsonl"), &text, 1);
    let d = disc(Dialect::Omp, td.path());
    let got = d.list("/tmp", Some(&dir), &mut |_| {}).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].id, "long");
    assert_eq!(got[0].cwd, "/c");
    // omp's string scan finds `"title"` first as the *value* of `"type"`, so the
    // slot title is lost on this path (faithful to the reference).
    assert_eq!(got[0].title, None);
    assert_eq!(got[0].status, Some(SessionStatus::Unknown));
}

#[test]
fn omp_recovers_orphaned_backups() {
    let td = TempDir::new("omp-bak");
    let dir = td.path().join("b");
    let primary = "1_s.jsonl";
    write(
        &dir.join(format!("{primary}.0000000000000001.bak")),
        &omp_file("old", "2026-01-01T00:00:00.000Z", None, &[]),
        1_000,
    );
    write(
        &dir.join(format!("{primary}.0000000000000002.bak")),
        &omp_file("new", "2026-01-01T00:00:00.000Z", None, &[]),
        2_000,
    );
    // A backup whose primary exists stays.
    write(&dir.join("2_k.jsonl"), &omp_file("k", "2026-01-01T00:00:00.000Z", None, &[]), 1);
    write(&dir.join("2_k.jsonl.0000000000000003.bak"), "x", 1);
    let d = disc(Dialect::Omp, td.path());
    let got = d.list("/tmp", Some(&dir), &mut |_| {}).unwrap();
    assert!(got.iter().any(|s| s.id == "new"));
    assert!(dir.join(primary).exists());
    assert!(dir.join(format!("{primary}.0000000000000001.bak")).exists());
    assert!(dir.join("2_k.jsonl.0000000000000003.bak").exists());
}

#[test]
fn omp_resume_matching() {
    let td = TempDir::new("omp-resume");
    let d = disc(Dialect::Omp, td.path());
    let cwd = td.path().join("proj");
    fs_err::create_dir_all(&cwd).unwrap();
    let cwd = cwd.to_string_lossy().into_owned();
    let local = d.dirs().ensure_default_session_dir(&session_store::FileStorage::new(), &cwd).unwrap();
    write(
        &local.join("2026-01-01T00-00-00-000Z_AbCdEf.jsonl"),
        &omp_file("abcdef", "2026-01-01T00:00:00.000Z", None, &[]),
        1,
    );
    let other = d.dirs().sessions_root.join("-other");
    write(
        &other.join("2026-02-01T00-00-00-000Z_zzz.jsonl"),
        &omp_file("zzz", "2026-02-01T00:00:00.000Z", None, &[]),
        1,
    );
    let hit = |arg: &str, dir: Option<&Path>| match d.resolve_resumable(arg, &cwd, dir).unwrap() {
        ResumeTarget::Session { session, scope } => Some((session.id, scope)),
        _ => None,
    };
    assert_eq!(hit("ABC", None), Some(("abcdef".into(), Scope::Local)));
    assert_eq!(hit("2026-01", None), Some(("abcdef".into(), Scope::Local)));
    assert_eq!(hit("Zz", None), Some(("zzz".into(), Scope::Global)));
    assert_eq!(hit("zz", Some(&local)), None);
    assert_eq!(hit("nomatch", None), None);
    // An empty argument matches the newest local session.
    assert_eq!(hit("", None), Some(("abcdef".into(), Scope::Local)));
    assert_eq!(d.find_by_id(&cwd, "abcdef", None).unwrap(), Some(local.join("2026-01-01T00-00-00-000Z_AbCdEf.jsonl")));
    assert_eq!(d.find_most_recent(&local, None), Some(local.join("2026-01-01T00-00-00-000Z_AbCdEf.jsonl")));
}

#[test]
fn omp_recent_skips_empty_sessions() {
    let td = TempDir::new("omp-recent");
    let dir = td.path().join("b");
    write(
        &dir.join("1_a.jsonl"),
        &omp_file("a", "2026-01-01T00:00:00.000Z", None, &[user("u", "first prompt\nmore", 1)]),
        10_000,
    );
    write(&dir.join("2_e.jsonl"), &omp_file("e", "2026-01-01T00:00:00.000Z", None, &[]), 20_000);
    write(&dir.join("3_t.jsonl"), &omp_file("t", "2026-01-01T12:34:00.000Z", Some("Titled"), &[]), 5_000);
    let d = disc(Dialect::Omp, td.path());
    let r = d.recent(&dir, 4, 10_000 + 3 * 60_000);
    let names: Vec<&str> = r.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["first prompt", "Titled"]);
    assert_eq!(r[0].time_ago, "3m ago");
    assert_eq!(d.recent(&dir, 1, 0).len(), 1);
}

#[test]
fn missing_and_unreadable_dirs() {
    let td = TempDir::new("missing");
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let d = disc(dialect, td.path());
        assert!(d.list("/tmp", Some(&td.path().join("nope")), &mut |_| {}).unwrap().is_empty());
        assert!(d.list_all(None, &mut |_| {}).unwrap().is_empty());
    }
}

#[test]
fn pi_lists_headers_whatever_their_id() {
    let td = TempDir::new("pi-odd-ids");
    let dir = td.path().join("s");
    let body = |h: &str| lines(&[h.to_owned(), user("u1", "hello", 1000)]);
    write(
        &dir.join("a.jsonl"),
        &body(r#"{"type":"session","version":3,"timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#),
        5,
    );
    write(
        &dir.join("b.jsonl"),
        &body(r#"{"type":"session","version":3,"id":7,"timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#),
        5,
    );
    let d = disc(Dialect::Pi, td.path());
    let got = d.list("/tmp", Some(&dir), &mut |_| {}).unwrap();
    let json = json_of(Dialect::Pi, &got, &dir);
    let ids: Vec<_> = json.as_array().unwrap().iter().map(|s| s.get("id").cloned()).collect();
    assert_eq!(got.len(), 2, "pi lists both files");
    assert!(ids.contains(&None), "a missing id is omitted, as JSON.stringify drops undefined");
    assert!(ids.contains(&Some(serde_json::json!(7))), "a numeric id stays a number");
}

/// A FIFO (and a link to one) named like a session in a sessions folder neither stops a
/// listing, a lookup or a resume nor is opened: the FIFO is reported as skipped, the real
/// session is listed, and every call returns.
#[cfg(unix)]
#[test]
fn fifos_in_a_sessions_folder_are_skipped_without_waiting() {
    for dialect in [Dialect::Pi, Dialect::Omp] {
        let td = TempDir::new("fifo-list");
        let dir = td.path().join("s");
        let real = dir.join("2026-01-01T00-00-00-000Z_a.jsonl");
        write(&real, &lines(&[header("a", "2026-01-01T00:00:00.000Z", "/tmp"), user("u1", "hello", 1000)]), 5);
        let fifo = dir.join("2026-01-02T00-00-00-000Z_f.jsonl");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs").success());
        std::os::unix::fs::symlink(&fifo, dir.join("2026-01-03T00-00-00-000Z_l.jsonl")).expect("symlink");
        let d = disc(dialect, td.path());
        let mut skipped = Vec::new();
        let got = d
            .list("/tmp", Some(&dir), &mut |p| {
                if skipped.is_empty() {
                    skipped = p.skipped.to_vec();
                }
            })
            .expect("listing");
        assert_eq!(got.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["a"], "{dialect:?}");
        assert_eq!(skipped, std::slice::from_ref(&fifo), "{dialect:?}");
        assert_eq!(d.list_all(Some(&dir), &mut |_| {}).expect("listing all").len(), 1);
        assert!(d.find_most_recent(&dir, None).is_some());
        let resumed = d.resolve_resumable("a", "/tmp", Some(&dir)).expect("resume");
        assert!(matches!(resumed, ResumeTarget::Session { .. }), "{dialect:?}: {resumed:?}");
        assert_eq!(d.recent(&dir, 10, 0).len(), 1, "{dialect:?}");
    }
}
