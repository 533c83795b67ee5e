//! The `session` binary, run as a person runs it.

pub(crate) use session_testkit::TempDir;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use session_testkit::testdata;

#[cfg(unix)]
mod cache;
mod human;
mod import;
mod jobs;
mod mcp;
#[cfg(any(feature = "postgres", feature = "redis", feature = "sqlite", feature = "mysql"))]
mod store;
mod sync;

type Result<T> = std::result::Result<T, session_testkit::BoxError>;

/// `session` to run in `cwd`, the caches off.
fn bin(cwd: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_session"));
    c.current_dir(cwd).env("SESSION_NO_CACHE", "1");
    c
}

/// Runs `c` and returns (exit code, stdout, stderr).
fn outcome(c: &mut Command) -> Result<(i32, String, String)> {
    let out = c.output()?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// Runs `c`, which must succeed, and returns its standard output.
fn stdout(c: &mut Command) -> Result<String> {
    let out = c.output()?;
    if !out.status.success() {
        let args: Vec<_> = c.get_args().collect();
        return Err(format!("session {args:?}: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// Runs `session ARGS` and returns its standard output as JSON.
fn session(args: &[&str], cwd: &Path) -> Result<serde_json::Value> {
    Ok(serde_json::from_str(&stdout(bin(cwd).args(args))?)?)
}

/// Runs `session ARGS` and returns (exit code, stdout, stderr).
fn run(args: &[&str], cwd: &Path) -> Result<(i32, String, String)> {
    outcome(bin(cwd).args(args))
}

/// Returns `session` to run in `work` with `home` as the home directory and neither
/// agent's directory moved by the environment.
fn in_home(home: &Path, work: &Path) -> Command {
    let mut c = bin(work);
    c.env("HOME", home)
        .env_remove("PI_CODING_AGENT_DIR")
        .env_remove("PI_CONFIG_DIR")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_STATE_HOME");
    c
}

/// Starts `c` with its stdout piped: the child, and the lines it prints as they come
/// (read on a thread of their own, so a test can wait for one with a deadline).
fn spawn_lines(c: &mut Command) -> Result<(Child, Receiver<std::io::Result<String>>)> {
    use std::io::BufRead;
    let mut child = c.stdout(Stdio::piped()).spawn()?;
    let stdout = child.stdout.take().ok_or("piped stdout")?;
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Ok((child, lines))
}

/// The next line of `lines`, within 20 s; `what` names it in the error.
fn next_line(lines: &Receiver<std::io::Result<String>>, what: &str) -> Result<String> {
    Ok(lines.recv_timeout(Duration::from_secs(20)).map_err(|_| format!("no line for {what}"))??)
}

const HEADER: &str = r#"{"type":"session","version":3,"id":"01a228d5-0000-7000-8000-000000000001","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#;
const USER: &str = r#"{"type":"message","id":"aaaaaaaa","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"q","timestamp":1}}"#;

/// A title slot line as omp writes it (256 bytes with its newline).
fn slot(title: &str) -> String {
    let base = format!(r#"{{"type":"title","v":1,"title":"{title}","updatedAt":"2026-01-01T00:00:00.000Z","pad":""}}"#);
    let pad = " ".repeat(255 - base.len());
    base.replace(r#""pad":"""#, &format!(r#""pad":"{pad}""#)) + "\n"
}

#[test]
fn rename_names_a_pi_session_with_a_session_info_entry() -> Result<()> {
    let tmp = TempDir::try_new("rename-pi")?;
    let file = tmp.path().join("s.jsonl");
    fs_err::write(&file, format!("{HEADER}\n{USER}\n"))?;
    let f = file.to_str().ok_or("utf-8 path")?;
    let out = session(&["rename", f, "My  session\n"], tmp.path())?;
    let id = out["id"].as_str().ok_or("an entry id")?;
    let info = session(&["info", f], tmp.path())?;
    assert_eq!(info["name"], "My  session");
    assert_eq!(info["leafId"], id);
    let text = fs_err::read_to_string(&file)?;
    assert!(text.starts_with(&format!("{HEADER}\n{USER}\n")), "appended, nothing rewritten");
    assert!(text.lines().nth(2).is_some_and(|l| l.contains(r#""type":"session_info""#)));
    Ok(())
}

#[test]
fn rename_writes_an_omp_title_slot_in_place() -> Result<()> {
    let tmp = TempDir::try_new("rename-omp")?;
    let file = tmp.path().join("s.jsonl");
    let before = format!("{}{HEADER}\n{USER}\n", slot("old"));
    fs_err::write(&file, &before)?;
    let f = file.to_str().ok_or("utf-8 path")?;
    session(&["--dialect", "omp", "rename", f, "New title"], tmp.path())?;
    let info = session(&["--dialect", "omp", "info", f], tmp.path())?;
    assert_eq!(info["name"], "New title");
    let after = fs_err::read_to_string(&file)?;
    assert!(after.starts_with(r#"{"type":"title","v":1,"title":"New title","source":"user""#), "{after}");
    assert_eq!(after.find('\n'), Some(255), "the slot keeps its 256 bytes");
    assert_eq!(after[256..before.len()], before[256..], "the rest of the file is untouched");
    assert!(after[before.len()..].starts_with(r#"{"type":"title_change""#));
    // Refused: a name that is empty after cleaning.
    assert_eq!(session(&["--dialect", "omp", "rename", f, " \n "], tmp.path())?["id"], serde_json::Value::Null);
    Ok(())
}

/// `p` as UTF-8 text.
fn s(p: &Path) -> Result<&str> {
    p.to_str().ok_or_else(|| "utf-8 path".into())
}

/// Makes the folder `work` and puts pi's and omp's sample sessions into its buckets in
/// their agents' homes below `home`: those two files.
fn samples_in_homes(home: &Path, work: &Path) -> Result<[PathBuf; 2]> {
    fs_err::create_dir_all(work)?;
    let bucket = work.to_string_lossy().trim_start_matches('/').replace('/', "-");
    let pi = home.join(".pi/agent/sessions").join(format!("--{bucket}--")).join("2026-01-01T00-00-00-000Z_a.jsonl");
    let omp = home.join(".omp/agent/sessions").join(format!("-{bucket}")).join("2026-01-02T00-00-00-000Z_b.jsonl");
    for (file, agent) in [(&pi, "pi"), (&omp, "omp")] {
        fs_err::create_dir_all(file.parent().ok_or("a bucket")?)?;
        fs_err::copy(testdata().join(format!("sample/{agent}.jsonl")), file)?;
    }
    Ok([pi, omp])
}

/// One file as a read must leave it: name, bytes, mode, mtime (seconds, nanoseconds).
type FileState = (String, Vec<u8>, u32, i64, i64);

/// Every file of the folder: name, bytes, mode, mtime.
fn state(dir: &Path) -> Result<Vec<FileState>> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    for e in fs_err::read_dir(dir)? {
        let e = e?;
        let m = fs_err::symlink_metadata(e.path())?;
        let bytes = if m.is_file() { fs_err::read(e.path())? } else { Vec::new() };
        out.push((e.file_name().to_string_lossy().into_owned(), bytes, m.mode(), m.mtime(), m.mtime_nsec()));
    }
    out.sort();
    Ok(out)
}

/// Every inspecting command, over every file of `testdata/` and a missing one, in both
/// dialects, leaves every file as it found it (bytes, mode, mtime) and creates nothing.
#[cfg(unix)]
#[test]
fn inspecting_commands_never_write() -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let tmp = TempDir::try_new("read-only")?;
    let mut files = Vec::new();
    for sub in ["v1", "v2", "v3", "corrupt", "sample", "generated"] {
        for e in fs_err::read_dir(testdata().join(sub))? {
            let p = e?.path();
            if p.extension().is_some_and(|x| x == "jsonl") {
                let copy = tmp.path().join(format!("{sub}-{}", p.file_name().and_then(|n| n.to_str()).unwrap_or("x")));
                fs_err::copy(&p, &copy)?;
                fs_err::set_permissions(&copy, std::fs::Permissions::from_mode(0o600))?;
                files.push(copy);
            }
        }
    }
    assert!(files.len() > 20);
    let missing = tmp.path().join("missing.jsonl");
    let before = state(tmp.path())?;
    let mut answered = 0;
    for file in files.iter().chain([&missing]) {
        let f = file.to_str().ok_or("utf-8 path")?;
        for dialect in ["pi", "omp"] {
            let queries: [&[&str]; 10] = [
                &["info", f],
                &["tail", f, "-n", "3"],
                &["entries", f],
                &["entries", f, "--full"],
                &["tree", f],
                &["context", f],
                &["context", f, "--leaf-null"],
                &["branch", f],
                &["check", f],
                &["projection", f],
            ];
            for q in queries {
                let mut args = vec!["--dialect", dialect];
                args.extend_from_slice(q);
                let (code, _, err) = run(&args, tmp.path())?;
                if file == &missing {
                    assert_eq!(code, 1, "{args:?}");
                    assert!(err.contains("missing.jsonl"), "{args:?}: {err}");
                } else if code == 0 {
                    answered += 1;
                }
            }
        }
    }
    assert!(answered > 200, "most queries answer ({answered})");
    assert_eq!(state(tmp.path())?, before, "an inspecting command wrote");
    Ok(())
}

/// The command line is checked: typos get a suggestion, unknown options and extra
/// arguments are refused with exit 2, `--version` and per-command help work, and
/// `check` exits 1 when it found damage.
#[test]
fn usage_errors_exit_2_and_check_reports_damage() -> Result<()> {
    let tmp = TempDir::try_new("usage")?;
    let (code, _, err) = run(&["infoo", "x"], tmp.path())?;
    assert_eq!(code, 2);
    assert!(err.contains("info"), "a suggestion: {err}");
    assert_eq!(run(&["info", "a", "b"], tmp.path())?.0, 2);
    assert_eq!(run(&["info", "a", "--bogus"], tmp.path())?.0, 2);
    let (code, out, _) = run(&["--version"], tmp.path())?;
    assert!(code == 0 && out.starts_with("session "), "{out}");
    let (code, out, _) = run(&["context", "--help"], tmp.path())?;
    assert!(code == 0 && out.contains("--leaf") && out.contains("Example"), "{out}");
    let (code, out, _) = run(&["completions", "bash"], tmp.path())?;
    assert!(code == 0 && out.contains("session"), "completions");

    let clean = testdata().join("sample/pi.jsonl");
    let torn = testdata().join("corrupt/torn-last-line.jsonl");
    let (code, out, _) = run(&["--json", "check", clean.to_str().ok_or("path")?], tmp.path())?;
    assert_eq!(code, 0, "{out}");
    let (code, out, _) = run(&["--json", "check", torn.to_str().ok_or("path")?], tmp.path())?;
    assert_eq!(code, 1, "damage found: {out}");
    let v: serde_json::Value = serde_json::from_str(&out)?;
    assert!(v["diagnostics"].as_array().is_some_and(|d| !d.is_empty()));
    Ok(())
}

/// `migrate` upgrades a v1 file in place, keeps the original as a backup and the mode;
/// a second run writes nothing. `label` labels an entry.
#[cfg(unix)]
#[test]
fn migrate_keeps_a_backup_and_label_labels() -> Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    for dialect in ["pi", "omp"] {
        let tmp = TempDir::try_new(&format!("migrate-{dialect}"))?;
        let file = tmp.path().join("s.jsonl");
        fs_err::copy(testdata().join(format!("v1/{dialect}.jsonl")), &file)?;
        fs_err::set_permissions(&file, std::fs::Permissions::from_mode(0o600))?;
        let original = fs_err::read(&file)?;
        let f = file.to_str().ok_or("path")?;
        let out = session(&["--dialect", dialect, "migrate", f], tmp.path())?;
        assert_eq!(out["migrated"], true, "{dialect}: {out}");
        let backup = PathBuf::from(out["backup"].as_str().ok_or("a backup")?);
        assert_eq!(fs_err::read(&backup)?, original);
        assert_eq!(fs_err::metadata(&file)?.mode() & 0o777, 0o600, "{dialect}: mode kept");
        let info = session(&["--dialect", dialect, "info", f], tmp.path())?;
        assert_eq!(info["header"]["version"], 3, "{dialect}: {info}");
        let after = fs_err::read(&file)?;
        let again = session(&["--dialect", dialect, "migrate", f], tmp.path())?;
        assert_eq!(again["migrated"], false);
        assert_eq!(fs_err::read(&file)?, after, "{dialect}: the second migrate wrote");

        let ids = session(&["--dialect", dialect, "entries", f], tmp.path())?;
        let first = ids[0].as_str().ok_or("an id")?.to_owned();
        session(&["--dialect", dialect, "label", f, &first, "start"], tmp.path())?;
        let tree = session(&["--dialect", dialect, "tree", f], tmp.path())?;
        assert_eq!(tree[0]["label"], "start", "{dialect}: {tree}");
        assert_eq!(run(&["--dialect", dialect, "label", f, "nope", "x"], tmp.path())?.0, 1);
    }
    Ok(())
}

/// `ls`, `resume` and `continue` find both agents' sessions under their real homes
/// (`~/.pi/agent`, `~/.omp/agent`), create nothing there, and `resume` by name either
/// finds one session or lists the candidates.
#[cfg(unix)]
#[test]
fn sessions_are_found_in_both_agents_homes() -> Result<()> {
    let tmp = TempDir::try_new("homes")?;
    let (home, work) = (tmp.path().join("home"), tmp.path().join("work"));
    let [pi, _] = samples_in_homes(&home, &work)?;
    let pi_dir = pi.parent().ok_or("a bucket")?;
    let before = state(pi_dir)?;
    let run_home = |args: &[&str]| outcome(in_home(&home, &work).args(args));
    let (code, out, err) = run_home(&["ls", "--json"])?;
    assert_eq!(code, 0, "{err}");
    let listed: serde_json::Value = serde_json::from_str(&out)?;
    let agents: Vec<&str> = listed.as_array().ok_or("an array")?.iter().filter_map(|s| s["agent"].as_str()).collect();
    assert_eq!(agents.len(), 2, "{out}");
    assert!(agents.contains(&"pi") && agents.contains(&"omp"), "{out}");
    let (code, out, _) = run_home(&["ls", "--jsonl"])?;
    assert_eq!((code, out.lines().count()), (0, 2));

    let (code, out, err) = run_home(&["resume", "--json", "value write"])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("_a.jsonl") && out.contains("\"agent\":\"pi\""), "{out}");
    let (code, _, err) = run_home(&["resume", "a"])?;
    assert_eq!(code, 1);
    assert!(err.contains("2 sessions match") && err.contains("pi") && err.contains("omp"), "{err}");
    let (code, out, err) = run_home(&["continue", "--json", "--dialect", "pi"])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("_a.jsonl"), "{out}");
    assert_eq!(state(pi_dir)?, before, "finding wrote to the sessions folder");
    // A directory with no sessions: nothing is created for it.
    let other = tmp.path().join("elsewhere");
    fs_err::create_dir_all(&other)?;
    let (code, out, _) = run_home(&["ls", "--json", "--dialect", "pi", "--cwd", other.to_str().ok_or("path")?])?;
    assert_eq!((code, out.trim()), (0, "[]"));
    assert_eq!(fs_err::read_dir(home.join(".pi/agent/sessions"))?.count(), 1, "no bucket created");
    Ok(())
}

/// `fsck` finds damage, unloadable files and unreferenced blobs (exit 1), `--repair`
/// rewrites what loads with a backup and leaves what does not load alone, `gc` deletes
/// only with `--yes` (and past its grace period); `export` writes a self-contained
/// document; `rm` asks for `--yes` when nobody can answer.
#[test]
fn fsck_repair_gc_export_and_rm() -> Result<()> {
    let tmp = TempDir::try_new("fsck")?;
    let home = tmp.path().join("home");
    let s = home.join(".pi/agent/sessions/--work--");
    let blobs = home.join(".omp/agent/blobs");
    fs_err::create_dir_all(&s)?;
    fs_err::create_dir_all(&blobs)?;
    for f in ["corrupt/garbage-lines.jsonl", "corrupt/bad-header-missing.jsonl", "sample/pi.jsonl"] {
        fs_err::copy(testdata().join(f), s.join(Path::new(f).file_name().ok_or("name")?))?;
    }
    let blob = blobs.join("a".repeat(64));
    fs_err::write(&blob, b"x")?;
    let unloadable = fs_err::read(s.join("bad-header-missing.jsonl"))?;
    let sd = s.to_str().ok_or("path")?;
    let run = |args: &[&str]| outcome(in_home(&home, tmp.path()).args(args));
    let (code, out, _) = run(&["--json", "fsck", sd])?;
    assert_eq!(code, 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out)?;
    assert_eq!((v["sessions"].as_u64(), v["unreferencedBlobs"].as_u64()), (Some(3), Some(1)), "{v}");
    let (code, out, _) = run(&["--json", "fsck", sd, "--repair"])?;
    assert_eq!(code, 1);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&out)?["repaired"], 1);
    assert_eq!(
        fs_err::read(s.join("bad-header-missing.jsonl"))?,
        unloadable,
        "a file that does not load is never written"
    );
    let (_, out, _) = run(&["--json", "check", s.join("garbage-lines.jsonl").to_str().ok_or("path")?])?;
    assert_eq!(serde_json::from_str::<serde_json::Value>(&out)?["diagnostics"], serde_json::json!([]));
    assert!(fs_err::read_dir(&s)?.filter_map(|e| e.ok()).any(|e| e.file_name().to_string_lossy().ends_with(".bak")));

    assert_eq!(run(&["gc"])?.0, 0);
    assert!(blob.exists(), "a dry run deletes nothing");
    assert_eq!(run(&["gc", "--yes"])?.0, 0);
    assert!(blob.exists(), "a blob within the grace period is kept");
    let (code, out, err) = run(&["--json", "gc", "--yes", "--grace", "0"])?;
    assert_eq!(code, 0, "{err}");
    assert!(!blob.exists(), "{out}");

    let sample = s.join("pi.jsonl");
    let sp = sample.to_str().ok_or("path")?;
    let (code, html, _) = run(&["export", sp, "--format", "html"])?;
    assert!(
        code == 0 && html.starts_with("<!doctype html>") && html.contains("<section class=\"user\">"),
        "{html:.200}"
    );
    assert!(!html.contains("<script"), "nothing to run in an export");
    let (code, md, _) = run(&["export", sp])?;
    assert!(code == 0 && md.starts_with("# ") && md.contains("## User"), "{md:.200}");

    let (code, _, err) = run(&["rm", sp])?;
    assert!(code == 1 && err.contains("--yes") && sample.exists(), "{err}");
    assert_eq!(run(&["rm", sp, "--yes"])?.0, 0);
    assert!(!sample.exists());
    Ok(())
}

/// `move FILE --cwd DIR` puts the session into the bucket of DIR under the agent's
/// sessions root (never a bucket name typed by hand), with its artifacts, and the
/// header takes the new cwd; the entries keep their bytes. Both agents.
#[test]
fn move_puts_a_session_into_the_bucket_of_its_new_project() -> Result<()> {
    let tmp = TempDir::try_new("move")?;
    let home = tmp.path().join("home");
    let work = tmp.path().join("work");
    fs_err::create_dir_all(&work)?;
    for (dialect, agent) in [("pi", ".pi/agent"), ("omp", ".omp/agent")] {
        let from = home.join(agent).join("sessions").join("old-bucket");
        fs_err::create_dir_all(&from)?;
        let file = from.join("2026-01-01T00-00-00-000Z_s.jsonl");
        let prefix = if dialect == "omp" { slot("") } else { String::new() };
        fs_err::write(&file, format!("{prefix}{HEADER}\n{USER}\n"))?;
        fs_err::create_dir_all(file.with_extension(""))?;
        fs_err::write(file.with_extension("").join("0.log"), "artifact")?;
        let target_cwd = tmp.path().join("projects").join("renamed");
        let mut mv = in_home(&home, &work);
        mv.args(["--dialect", dialect, "--json", "move"]).arg(&file).arg("--cwd").arg(&target_cwd);
        let moved: serde_json::Value = serde_json::from_str(&stdout(&mut mv)?)?;
        let new = PathBuf::from(moved["path"].as_str().ok_or("a path")?);
        assert!(!file.exists(), "{dialect}: the old file is gone");
        let bucket = new.parent().ok_or("a bucket")?;
        assert_eq!(bucket.parent(), Some(home.join(agent).join("sessions").as_path()), "{dialect}: {}", new.display());
        assert!(
            bucket.file_name().is_some_and(|b| b.to_string_lossy().contains("renamed")),
            "{dialect}: {}",
            new.display()
        );
        assert_eq!(fs_err::read_to_string(new.with_extension("").join("0.log"))?, "artifact", "{dialect}: artifacts");
        let text = fs_err::read_to_string(&new)?;
        assert!(text.ends_with(&format!("{USER}\n")), "{dialect}: the entries keep their bytes");
        let info = stdout(in_home(&home, &work).args(["--dialect", dialect, "--json", "info"]).arg(&new))?;
        let info: serde_json::Value = serde_json::from_str(&info)?;
        assert_eq!(info["header"]["cwd"], target_cwd.to_string_lossy().as_ref(), "{dialect}");
    }
    Ok(())
}

/// A version 1 file has no ids: each read-only open gives its entries new ones. What
/// it appends is still printed once, and nothing before it again.
fn follow_a_version_1_file(dir: &Path) -> Result<()> {
    let file = dir.join("v1.jsonl");
    fs_err::copy(testdata().join("v1/pi.jsonl"), &file)?;
    let f = file.to_str().ok_or("utf-8 path")?;
    let (mut child, lines) = spawn_lines(
        bin(dir).args(["--dialect", "pi", "--json", "tail", f, "-n", "1", "--follow"]).stderr(Stdio::null()),
    )?;
    next_line(&lines, "the last entry")?;
    let added = r#"{"type":"message","timestamp":"2025-06-01T10:00:11.000Z","message":{"role":"user","content":"one more","timestamp":1}}"#;
    sync::append(&file, &format!("{added}\n"))?;
    let line = next_line(&lines, "the appended entry")?;
    assert!(line.contains("one more"), "{line}");
    assert!(lines.recv_timeout(Duration::from_millis(1500)).is_err(), "nothing else is printed");
    child.kill()?;
    child.wait()?;
    Ok(())
}

/// `tail` prints the last entries; `tail --follow` then prints each entry another writer
/// appends, as it lands, until the file is removed (exit 1, naming it).
#[test]
fn tail_follows_a_session_as_it_grows() -> Result<()> {
    let tmp = TempDir::try_new("tail")?;
    let file = tmp.path().join("s.jsonl");
    let second = USER.replace("aaaaaaaa", "bbbbbbbb").replace(r#""parentId":null"#, r#""parentId":"aaaaaaaa""#);
    fs_err::write(&file, format!("{HEADER}\n{USER}\n{second}\n"))?;
    let f = file.to_str().ok_or("utf-8 path")?;
    let (code, out, _) = run(&["--json", "tail", f, "-n", "1"], tmp.path())?;
    assert_eq!((code, out.as_str()), (0, format!("{second}\n").as_str()), "the last entry, as its line");

    let (mut child, lines) =
        spawn_lines(bin(tmp.path()).args(["--json", "tail", f, "-n", "1", "--follow"]).stderr(Stdio::piped()))?;
    let next = |what: &str| next_line(&lines, what);
    assert_eq!(next("the last entry")?, second);
    let third = second.replace("bbbbbbbb", "cccccccc").replace(r#""parentId":"aaaaaaaa""#, r#""parentId":"bbbbbbbb""#);
    let fourth = third.replace("cccccccc", "dddddddd").replace(r#""parentId":"bbbbbbbb""#, r#""parentId":"cccccccc""#);
    let mut f2 = fs_err::OpenOptions::new().append(true).open(&file)?;
    std::io::Write::write_all(&mut f2, format!("{third}\n").as_bytes())?;
    assert_eq!(next("an appended entry")?, third);
    std::io::Write::write_all(&mut f2, format!("{fourth}\n").as_bytes())?;
    assert_eq!(next("a second appended entry")?, fourth);
    drop(f2);
    fs_err::remove_file(&file)?;
    let status = child.wait()?;
    follow_a_version_1_file(tmp.path())?;
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().ok_or("piped stderr")?, &mut err)?;
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("s.jsonl") && err.contains("removed"), "{err}");
    Ok(())
}

/// Gives `c` `GLIBC_TUNABLES` as `tunables` says (absent for `None`) and no marker of
/// an earlier huge-page start.
fn huge_pages_env<'a>(c: &'a mut Command, tunables: Option<&str>) -> &'a mut Command {
    match tunables {
        Some(t) => c.env("GLIBC_TUNABLES", t),
        None => c.env_remove("GLIBC_TUNABLES"),
    }
    .env_remove("SESSION_HUGE_PAGES_STARTED")
}

/// A command about to open a session file of at least `SESSION_HUGE_PAGES_FROM` bytes
/// (128 MiB unless set) runs with glibc's huge-page tunable (see `huge_pages`); a
/// smaller file, or a `GLIBC_TUNABLES` already set, leaves the environment as it is.
/// Seen in the environment of a running `tail --follow`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn a_large_session_is_opened_with_huge_pages() -> Result<()> {
    let tmp = TempDir::try_new("huge-pages")?;
    let file = tmp.path().join("s.jsonl");
    fs_err::write(&file, format!("{HEADER}\n{USER}\n"))?;
    let f = file.to_str().ok_or("utf-8 path")?;
    let environment = |from: &str, tunables: Option<&str>| -> Result<Vec<String>> {
        let mut c = bin(tmp.path());
        huge_pages_env(&mut c, tunables)
            .args(["--json", "tail", f, "-n", "1", "--follow"])
            .env("SESSION_HUGE_PAGES_FROM", from)
            .stderr(Stdio::null());
        let (mut child, lines) = spawn_lines(&mut c)?;
        // The entry is printed: the command (started again or not) is running.
        let line = lines.recv_timeout(Duration::from_secs(20)).map_err(|_| "no entry printed")?;
        let environ = fs_err::read(format!("/proc/{}/environ", child.id()));
        child.kill()?;
        child.wait()?;
        assert_eq!(line?, USER);
        Ok(String::from_utf8_lossy(&environ?).split('\0').map(str::to_owned).collect())
    };
    let tunable = |env: &[String]| env.iter().find(|v| v.starts_with("GLIBC_TUNABLES=")).cloned();
    let large = environment("0", None)?;
    assert_eq!(tunable(&large).as_deref(), Some("GLIBC_TUNABLES=glibc.malloc.hugetlb=1"));
    assert!(large.iter().any(|v| v == "SESSION_HUGE_PAGES_STARTED=1"));
    let small = environment("1000000", None)?;
    assert_eq!(tunable(&small), None);
    let chosen = environment("0", Some(""))?;
    assert_eq!(tunable(&chosen).as_deref(), Some("GLIBC_TUNABLES="));
    assert!(!chosen.iter().any(|v| v.starts_with("SESSION_HUGE_PAGES_STARTED")));
    Ok(())
}

/// Arguments, standard streams and the exit status come through the second start as
/// they are without it.
#[test]
fn a_second_start_for_huge_pages_changes_nothing_seen() -> Result<()> {
    let dir = TempDir::try_new("huge-pages-same")?;
    let big = dir.path().join("big.jsonl");
    // Sparse: no disk is spent. The store URL is refused after the second start.
    fs_err::File::create(&big)?.set_len(128 << 20)?;
    let big = big.to_string_lossy().into_owned();
    let args = ["--dialect", "pi", "push", big.as_str(), "--to", "nope://x"];
    let outcome = |tunables: Option<&str>| -> Result<(Option<i32>, Vec<u8>, Vec<u8>)> {
        let mut c = Command::new(env!("CARGO_BIN_EXE_session"));
        huge_pages_env(&mut c, tunables).args(args).current_dir(dir.path()).env_remove("SESSION_HUGE_PAGES_FROM");
        let out = c.output()?;
        Ok((out.status.code(), out.stdout, out.stderr))
    };
    let started_again = outcome(None)?;
    let opted_out = outcome(Some(""))?;
    assert_eq!(started_again, opted_out);
    assert_eq!(started_again.0, Some(1));
    assert!(String::from_utf8_lossy(&started_again.2).contains("unknown store nope://"), "{started_again:?}");
    Ok(())
}

/// The picker needs a terminal: `session pick`, and plain `session`, without one say so
/// on stderr and exit 2, printing nothing on stdout; `pick --help` has its example.
#[test]
fn pick_without_a_terminal_exits_2() -> Result<()> {
    let tmp = TempDir::try_new("pick")?;
    for args in [&["pick"][..], &["pick", "--all"], &[]] {
        let out = Command::new(env!("CARGO_BIN_EXE_session"))
            .args(args)
            .current_dir(tmp.path())
            .env("HOME", tmp.path())
            .stdin(Stdio::null())
            .output()?;
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        expect_test::expect![[r#"
            error: the picker needs a terminal on stdin and stdout; `session ls` lists sessions and `session search` finds them in scripts
        "#]]
        .assert_eq(&String::from_utf8_lossy(&out.stderr));
    }
    let (code, out, _) = run(&["pick", "--help"], tmp.path())?;
    assert!(code == 0 && out.contains("Example: session pick --all") && out.contains("--all"), "{out}");
    Ok(())
}
