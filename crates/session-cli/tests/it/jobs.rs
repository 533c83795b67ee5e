//! The jobs (`rm`, `move`, `fork`, `gc`, `fsck`, `repair`, `migrate`, `pull`, `push`,
//! `export`, `ls`) run as an attacker and as an unlucky user run them: each test
//! reproduces a loss seen before and shows that nothing is lost now.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use session_testkit::Tree;

use super::sync::append;
use super::{HEADER, Result, TempDir, in_home, outcome, s, slot, stdout};

/// A home of its own for one test: `home` is `$HOME`, `work` the working directory.
struct Home {
    tmp: TempDir,
    home: PathBuf,
    work: PathBuf,
}

impl Home {
    fn new(tag: &str) -> Result<Home> {
        let tmp = TempDir::try_new(tag)?;
        let (home, work) = (tmp.path().join("home"), tmp.path().join("work"));
        fs_err::create_dir_all(&home)?;
        fs_err::create_dir_all(&work)?;
        Ok(Home { tmp, home, work })
    }

    /// A bucket of pi's (`pi`) or omp's sessions root, created.
    fn bucket(&self, dialect: &str, name: &str) -> Result<PathBuf> {
        let agent = if dialect == "omp" { ".omp/agent" } else { ".pi/agent" };
        let dir = self.home.join(agent).join("sessions").join(name);
        fs_err::create_dir_all(&dir)?;
        Ok(dir)
    }

    fn blobs(&self) -> Result<PathBuf> {
        let dir = self.home.join(".omp/agent/blobs");
        fs_err::create_dir_all(&dir)?;
        Ok(dir)
    }

    fn run(&self, args: &[&str]) -> Result<(i32, String, String)> {
        outcome(in_home(&self.home, &self.work).args(args))
    }

    /// Runs a command that must exit 0; returns its stdout.
    fn ok(&self, args: &[&str]) -> Result<String> {
        let (code, out, err) = self.run(args)?;
        assert_eq!(code, 0, "{args:?}: {err}");
        Ok(out)
    }

    /// Runs a command that must exit 0; returns its stdout as JSON.
    fn json(&self, args: &[&str]) -> Result<serde_json::Value> {
        Ok(serde_json::from_str(&self.ok(args)?)?)
    }
}

/// A session of `dialect` whose one user message says `text`.
fn session_text(dialect: &str, text: &str) -> String {
    let user = format!(
        r#"{{"type":"message","id":"aaaaaaaa","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":{},"timestamp":1}}}}"#,
        serde_json::Value::from(text)
    );
    let prefix = if dialect == "omp" { slot("") } else { String::new() };
    format!("{prefix}{HEADER}\n{user}\n")
}

fn write_session(path: &Path, dialect: &str, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        fs_err::create_dir_all(dir)?;
    }
    fs_err::write(path, session_text(dialect, text))?;
    Ok(())
}

/// `rm`, `move` and `fork` of sessions named `...jsonl` and `..jsonl` act on that file
/// only: the artifacts directory of such a name would be the folder above or the
/// session's own folder, so it has none.
#[test]
fn dot_named_sessions_never_take_their_folder_with_them() -> Result<()> {
    let h = Home::new("jobs-dots")?;
    let bucket = h.bucket("pi", "--p--")?;
    let other = h.bucket("pi", "--q--")?;
    write_session(&bucket.join("keep.jsonl"), "pi", "keep")?;
    fs_err::create_dir_all(bucket.join("keep"))?;
    fs_err::write(bucket.join("keep/artifact.txt"), "artifact")?;
    write_session(&other.join("other.jsonl"), "pi", "other project")?;
    let sessions = h.home.join(".pi/agent/sessions");
    for name in ["...jsonl", "..jsonl"] {
        let file = bucket.join(name);
        write_session(&file, "pi", "dots")?;
        let before = Tree::read(&sessions)?;
        let (code, _, err) = h.run(&["rm", s(&file)?, "--yes"])?;
        assert_eq!(code, 0, "{name}: {err}");
        assert_eq!(before.changed(&Tree::read(&sessions)?), vec![file.clone()], "{name}: only the file goes");
    }
    // A move takes the file alone into its new bucket.
    let file = bucket.join("...jsonl");
    write_session(&file, "pi", "dots")?;
    let target = h.work.join("elsewhere");
    let moved =
        PathBuf::from(h.json(&["--json", "move", s(&file)?, "--cwd", s(&target)?])?["path"].as_str().ok_or("path")?);
    let new_bucket = moved.parent().ok_or("bucket")?;
    assert_eq!(fs_err::read_dir(new_bucket)?.count(), 1, "only the session moved");
    assert!(bucket.join("keep.jsonl").exists() && bucket.join("keep/artifact.txt").exists());
    assert!(other.join("other.jsonl").exists());
    // An omp fork of `...jsonl` copies no folder into itself.
    let obucket = h.bucket("omp", "--p--")?;
    let ofile = obucket.join("...jsonl");
    write_session(&ofile, "omp", "omp dots")?;
    write_session(&obucket.join("sibling.jsonl"), "omp", "sibling")?;
    let forks = h.tmp.path().join("forks");
    let out = h.ok(&["--json", "--dialect", "omp", "fork", s(&ofile)?, "--cwd", "/w", "--session-dir", s(&forks)?])?;
    assert!(out.contains(".jsonl"), "{out}");
    let copies: Vec<_> = fs_err::read_dir(&forks)?.collect();
    assert_eq!(copies.len(), 1, "one new session file and nothing else");
    Ok(())
}

/// `rm` deletes only what it proved is a session: a JSONL file that is not one, and a
/// link to a session, are refused with nothing deleted; outside the agents' folders it
/// needs `--force`.
#[test]
fn rm_deletes_only_proven_sessions() -> Result<()> {
    let h = Home::new("jobs-rm")?;
    let data = h.work.join("data");
    fs_err::create_dir_all(data.join("export"))?;
    fs_err::write(data.join("export/keep.txt"), "keep")?;
    fs_err::write(data.join("export.jsonl"), "{\"a\":1}\n")?;
    let before = Tree::read(h.tmp.path())?;
    let (code, _, err) = h.run(&["rm", s(&data.join("export.jsonl"))?, "--yes", "--force"])?;
    assert_eq!(code, 1);
    assert!(err.contains("not a pi session"), "{err}");
    assert_eq!(before.changed(&Tree::read(h.tmp.path())?), Vec::<PathBuf>::new());

    let bucket = h.bucket("pi", "--p--")?;
    let real = bucket.join("real.jsonl");
    write_session(&real, "pi", "real")?;
    fs_err::create_dir_all(bucket.join("real"))?;
    let link = bucket.join("link.jsonl");
    std::os::unix::fs::symlink(&real, &link)?;
    fs_err::create_dir_all(bucket.join("link"))?;
    fs_err::write(bucket.join("link/beside-the-link.txt"), "x")?;
    let before = Tree::read(h.tmp.path())?;
    let (code, _, err) = h.run(&["rm", s(&link)?, "--yes"])?;
    assert_eq!(code, 1);
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(before.changed(&Tree::read(h.tmp.path())?), Vec::<PathBuf>::new(), "nothing deleted");

    let outside = h.work.join("kept/s.jsonl");
    write_session(&outside, "pi", "outside")?;
    let (code, _, err) = h.run(&["rm", s(&outside)?, "--yes"])?;
    assert!(code == 1 && err.contains("--force") && outside.exists(), "{err}");
    let (code, _, err) = h.run(&["rm", s(&outside)?, "--yes", "--force"])?;
    assert!(code == 0 && !outside.exists(), "{err}");
    Ok(())
}

/// A blob `blob:sha256:<hex>` for a byte.
fn hex(i: u8) -> String {
    format!("{i:02x}").repeat(32)
}

/// Writes the blob `hex` into `dir`, changed `age_secs` ago.
fn put_blob(dir: &Path, hex: &str, age_secs: u64) -> Result<PathBuf> {
    let path = dir.join(hex);
    fs_err::write(&path, hex)?;
    let when = std::time::SystemTime::UNIX_EPOCH
        + std::time::Duration::from_secs(std::time::UNIX_EPOCH.elapsed()?.as_secs().saturating_sub(age_secs));
    fs_err::File::options().write(true).open(&path)?.file().set_modified(when)?;
    Ok(path)
}

/// `gc` reads references from every place either agent keeps sessions: both projects
/// whatever folder is named, omp's XDG layout with the variable unset, a bucket that is a
/// link, a session that only a backup holds, a subagent below the artifacts, a session
/// omp registered as kept elsewhere. Only the blob nothing refers to goes.
#[test]
fn gc_keeps_every_referenced_blob() -> Result<()> {
    let h = Home::new("jobs-gc")?;
    let blobs = h.blobs()?;
    const DAY: u64 = 86_400;
    let referenced: Vec<String> = (1..=7).map(hex).collect();
    for r in &referenced {
        put_blob(&blobs, r, 3 * DAY)?;
    }
    let unused = put_blob(&blobs, &hex(9), 3 * DAY)?;
    let young = put_blob(&blobs, &hex(10), 0)?;
    let refer = |i: usize| format!("see blob:sha256:{}", referenced[i]);
    write_session(&h.bucket("pi", "--a--")?.join("a.jsonl"), "pi", &refer(0))?;
    write_session(&h.bucket("omp", "-b")?.join("b.jsonl"), "omp", &refer(1))?;
    write_session(&h.home.join(".local/share/omp/sessions/-x/x.jsonl"), "omp", &refer(2))?;
    let elsewhere = h.tmp.path().join("linked-bucket");
    write_session(&elsewhere.join("l.jsonl"), "pi", &refer(3))?;
    std::os::unix::fs::symlink(&elsewhere, h.home.join(".pi/agent/sessions/--linked--"))?;
    let bak_bucket = h.bucket("omp", "-c")?;
    fs_err::write(bak_bucket.join("gone.jsonl.1700000000000.bak"), session_text("omp", &refer(4)))?;
    write_session(&h.bucket("omp", "-d")?.join("d/subagent/child.jsonl"), "omp", &refer(5))?;
    let custom = h.tmp.path().join("custom/kept.jsonl");
    write_session(&custom, "omp", &refer(6))?;
    let registry = h.home.join(".omp/agent/custom-session-files");
    fs_err::create_dir_all(&registry)?;
    fs_err::write(registry.join("abc1234"), format!("{}\n", custom.display()))?;
    // One project named, a folder that does not exist: neither narrows what is read.
    for dir in [s(&h.bucket("pi", "--a--")?)?, "/nonexistent/folder"] {
        let v = h.json(&["--json", "gc", dir])?;
        assert_eq!(v["unused"].as_array().map(Vec::len), Some(1), "{dir}: {v}");
        assert_eq!(v["referenced"], 7, "{dir}: {v}");
    }
    h.ok(&["gc", "/nonexistent/folder", "--yes"])?;
    for r in &referenced {
        assert!(blobs.join(r).exists(), "referenced blob {r} kept");
    }
    assert!(!unused.exists(), "the unused blob went");
    assert!(young.exists(), "a blob within the grace period stays");
    Ok(())
}

/// With blobs and no session found, or a folder it cannot read, `gc` deletes nothing and
/// says why; `fsck` reports the folder.
#[test]
fn gc_refuses_when_it_cannot_see_every_session() -> Result<()> {
    let h = Home::new("jobs-gc-refuse")?;
    let blobs = h.blobs()?;
    let blob = put_blob(&blobs, &hex(1), 3 * 86_400)?;
    let (code, _, err) = h.run(&["gc", "--yes", "--grace", "0"])?;
    assert!(code == 1 && err.contains("no session found") && blob.exists(), "{err}");

    // A folder only its owner may read, and gc run as someone else.
    let bucket = h.bucket("pi", "--p--")?;
    write_session(&bucket.join("s.jsonl"), "pi", "no blobs here")?;
    let hidden = h.bucket("pi", "--hidden--")?;
    write_session(&hidden.join("h.jsonl"), "pi", &format!("blob:sha256:{}", hex(1)))?;
    let root = std::process::Command::new("id").arg("-u").output()?.stdout == b"0\n";
    let setpriv = Path::new("/usr/bin/setpriv").exists();
    if root && !setpriv {
        return Err("running as root needs setpriv to run the command as another user".into());
    }
    let run_unprivileged = |args: &[&str]| -> Result<(i32, String)> {
        let mut c = if root {
            let mut c = std::process::Command::new("/usr/bin/setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_session")]);
            c
        } else {
            std::process::Command::new(env!("CARGO_BIN_EXE_session"))
        };
        c.args(args)
            .current_dir("/")
            .env("HOME", &h.home)
            .env_remove("PI_CODING_AGENT_DIR")
            .env_remove("PI_CONFIG_DIR")
            .env_remove("XDG_DATA_HOME")
            .env("SESSION_NO_CACHE", "1");
        let out = c.output()?;
        Ok((out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned()))
    };
    if root {
        let status = std::process::Command::new("chown").args(["-R", "65534:65534"]).arg(h.tmp.path()).status()?;
        assert!(status.success());
        let status = std::process::Command::new("chown").arg("0:0").arg(&hidden).status()?;
        assert!(status.success());
    }
    let mut perms = fs_err::metadata(&hidden)?.permissions();
    perms.set_mode(0o700);
    fs_err::set_permissions(&hidden, perms.clone())?;
    if !root {
        perms.set_mode(0o000);
        fs_err::set_permissions(&hidden, perms.clone())?;
    }
    let (code, err) = run_unprivileged(&["gc", "--yes", "--grace", "0"])?;
    let (fsck_code, fsck_err) = run_unprivileged(&["--text", "fsck"])?;
    perms.set_mode(0o755);
    fs_err::set_permissions(&hidden, perms)?;
    assert!(code == 1 && err.contains("cannot read") && err.contains("--hidden--"), "{err}");
    assert!(blob.exists(), "nothing deleted");
    assert_eq!(fsck_code, 1, "{fsck_err}");
    Ok(())
}

/// A writer stores blobs and then writes the lines naming them while `gc --yes` runs
/// again and again: no blob a line names is ever deleted, and old unused ones are.
#[test]
fn gc_racing_a_writer_deletes_no_referenced_blob() -> Result<()> {
    let h = Home::new("jobs-gc-race")?;
    let blobs = h.blobs()?;
    let bucket = h.bucket("omp", "-p")?;
    let file = bucket.join("s.jsonl");
    write_session(&file, "omp", "start")?;
    let old: Vec<PathBuf> =
        (0..20u8).map(|i| put_blob(&blobs, &hex(200 + i % 50), 3 * 86_400)).collect::<Result<_>>()?;
    let done = std::sync::atomic::AtomicBool::new(false);
    let written = std::thread::scope(|scope| -> Result<Vec<String>> {
        let writer = scope.spawn(|| -> std::io::Result<Vec<String>> {
            let mut names = Vec::new();
            for i in 0..400u32 {
                let h = format!("{i:08x}").repeat(8);
                fs_err::write(blobs.join(&h), b"image")?;
                if i % 3 == 0 {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
                let line = format!(
                    r#"{{"type":"custom","customType":"img","id":"{i:08x}","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","data":"blob:sha256:{h}"}}"#
                );
                fs_err::OpenOptions::new().append(true).open(&file)?.write_all(format!("{line}\n").as_bytes())?;
                names.push(h);
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(names)
        });
        let mut runs = 0;
        while !done.load(std::sync::atomic::Ordering::SeqCst) || runs < 3 {
            h.ok(&["gc", "--yes"])?;
            runs += 1;
        }
        Ok(writer.join().map_err(|_| "the writer panicked")??)
    })?;
    for name in &written {
        assert!(blobs.join(name).exists(), "blob {name} a line names was deleted");
    }
    assert!(old.iter().all(|b| !b.exists()), "old unused blobs are deleted");
    Ok(())
}

/// An appender that writes as pi does (open, append one line, close) at random moments
/// while `migrate` or `repair` rewrites the session: every line it wrote is in the file
/// after, in both dialects.
#[test]
fn rewrites_keep_lines_appended_meanwhile() -> Result<()> {
    let h = Home::new("jobs-rewrite-race")?;
    let bucket = h.bucket("pi", "--p--")?;
    let trials: usize = std::env::var("SESSION_JOB_RACE_TRIALS").ok().and_then(|v| v.parse().ok()).unwrap_or(12);
    for dialect in ["pi", "omp"] {
        for job in ["migrate", "repair"] {
            for trial in 0..trials {
                let file = bucket.join(format!("{dialect}-{job}-{trial}.jsonl"));
                let prefix = if dialect == "omp" { slot("") } else { String::new() };
                let mut text = format!(
                    "{prefix}{}\n",
                    r#"{"type":"session","id":"legacy","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/work"}"#
                );
                for i in 0..200 {
                    text.push_str(&format!(
                        r#"{{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{{"role":"user","content":"old {i}","timestamp":1}}}}"#
                    ));
                    text.push('\n');
                }
                if job == "repair" {
                    text.push_str("not json at all\n");
                }
                fs_err::write(&file, &text)?;
                let stop = std::sync::atomic::AtomicBool::new(false);
                let appended = std::thread::scope(|scope| -> Result<Vec<String>> {
                    let appender = scope.spawn(|| -> Result<Vec<String>> {
                        let mut marks = Vec::new();
                        let mut i = 0;
                        while !stop.load(std::sync::atomic::Ordering::SeqCst) && i < 400 {
                            let mark = format!("late-{trial}-{i}");
                            let line = format!(
                                r#"{{"type":"custom","customType":"{mark}","id":"c{i:07x}","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z"}}"#
                            );
                            append(&file, &format!("{line}\n"))?;
                            marks.push(mark);
                            i += 1;
                            std::thread::sleep(std::time::Duration::from_micros(u64::from(rand::random::<u8>()) * 4));
                        }
                        Ok(marks)
                    });
                    let out = h.run(&["--dialect", dialect, job, s(&file)?, "--no-backup"]);
                    stop.store(true, std::sync::atomic::Ordering::SeqCst);
                    let marks = appender.join().map_err(|_| "the appender panicked")??;
                    let (code, _, err) = out?;
                    // Refused after the session kept changing is allowed: nothing was lost.
                    assert!(code == 0 || err.contains("kept changing"), "{dialect} {job} {trial}: {err}");
                    Ok(marks)
                })?;
                let after = fs_err::read_to_string(&file)?;
                for mark in &appended {
                    assert!(after.contains(&format!("\"{mark}\"")), "{dialect} {job} {trial}: {mark} was lost");
                }
                for i in 0..200 {
                    assert!(after.contains(&format!("old {i}\"")), "{dialect} {job} {trial}: old {i} was lost");
                }
            }
        }
    }
    Ok(())
}

/// `move` to another file system refuses a FIFO in the artifacts before anything
/// changes (a copy would leave it out, and the source is deleted after the copy).
#[test]
fn a_move_across_file_systems_refuses_special_files_first() -> Result<()> {
    let h = Home::new("jobs-move")?;
    let bucket = h.bucket("omp", "-old")?;
    let file = bucket.join("s.jsonl");
    write_session(&file, "omp", "moving")?;
    let art = bucket.join("s");
    fs_err::create_dir_all(&art)?;
    fs_err::write(art.join("out.txt"), "output")?;
    assert!(std::process::Command::new("mkfifo").arg(art.join("pipe")).status()?.success());
    let across = Path::new("/dev/shm").join(format!("session-cli-move-fifo-{}", std::process::id()));
    let _ = fs_err::remove_dir_all(&across);
    let before = Tree::read(h.tmp.path())?;
    let (code, _, err) =
        h.run(&["--dialect", "omp", "move", s(&file)?, "--cwd", "/w", "--session-dir", s(&across)?])?;
    let left = across.exists() && fs_err::read_dir(&across)?.count() > 0;
    let _ = fs_err::remove_dir_all(&across);
    assert_eq!(code, 1);
    assert!(err.contains("pipe") && err.contains("fifo"), "{err}");
    assert_eq!(before.changed(&Tree::read(h.tmp.path())?), Vec::<PathBuf>::new(), "nothing changed");
    assert!(!left, "nothing copied");
    Ok(())
}

/// `move` to another file system makes a link in the artifacts again as a link, and keeps
/// a backup of the line its rewrite leaves out beside the new file.
#[test]
fn a_link_in_the_artifacts_crosses_file_systems_as_a_link() -> Result<()> {
    let shm = Path::new("/dev/shm");
    let h = Home::new("jobs-move-link")?;
    let bucket = h.bucket("omp", "-old")?;
    let file = bucket.join("s.jsonl");
    fs_err::write(&file, format!("{}not json\n", session_text("omp", "moving")))?;
    let original = fs_err::read(&file)?;
    let art = bucket.join("s");
    fs_err::create_dir_all(&art)?;
    fs_err::write(art.join("out.txt"), "output")?;
    std::os::unix::fs::symlink("out.txt", art.join("latest"))?;
    let across = shm.join(format!("session-cli-move-link-{}", std::process::id()));
    let _ = fs_err::remove_dir_all(&across);
    let (code, out, err) =
        h.run(&["--json", "--dialect", "omp", "move", s(&file)?, "--cwd", "/w", "--session-dir", s(&across)?])?;
    let checked = (|| -> Result<()> {
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out)?;
        let new = PathBuf::from(v["path"].as_str().ok_or("path")?);
        let new_art = new.with_extension("");
        assert_eq!(fs_err::read_link(new_art.join("latest"))?, PathBuf::from("out.txt"));
        assert_eq!(fs_err::read_to_string(new_art.join("latest"))?, "output");
        let backup = PathBuf::from(v["backup"].as_str().ok_or("a backup of the dropped line")?);
        assert_eq!(fs_err::read(&backup)?, original, "the backup holds the bytes as they were");
        assert!(!fs_err::read_to_string(&new)?.contains("not json"));
        Ok(())
    })();
    let _ = fs_err::remove_dir_all(&across);
    checked
}

/// `repair` of a link to a damaged session is refused with nothing written: the link
/// stays a link and the session is untouched.
#[test]
fn repair_of_a_link_writes_nothing() -> Result<()> {
    let h = Home::new("jobs-repair-link")?;
    let bucket = h.bucket("pi", "--p--")?;
    let real = bucket.join("real.jsonl");
    fs_err::write(&real, format!("{}garbage\n", session_text("pi", "damaged")))?;
    let link = bucket.join("link.jsonl");
    std::os::unix::fs::symlink(&real, &link)?;
    let before = Tree::read(h.tmp.path())?;
    let (code, _, err) = h.run(&["repair", s(&link)?])?;
    assert!(code == 1 && err.contains("symbolic link"), "{err}");
    assert_eq!(before.changed(&Tree::read(h.tmp.path())?), Vec::<PathBuf>::new());
    h.ok(&["repair", s(&real)?])?;
    assert!(fs_err::symlink_metadata(&link)?.file_type().is_symlink());
    assert!(!fs_err::read_to_string(&link)?.contains("garbage"));
    Ok(())
}

/// Runs `session ARGS`, which must succeed, where a pi and an omp session share the folder
/// `PI_CODING_AGENT_DIR` names: its JSON, and the two files' bytes together.
fn in_a_shared_agent_dir(tag: &str, args: &[&str]) -> Result<(serde_json::Value, u64)> {
    let h = Home::new(tag)?;
    let agent = h.tmp.path().join("agent");
    let (pi, omp) = (agent.join("sessions/--p--/pi.jsonl"), agent.join("sessions/-p/omp.jsonl"));
    write_session(&pi, "pi", "pi's")?;
    write_session(&omp, "omp", "omp's")?;
    let out = stdout(in_home(&h.home, &h.work).env("PI_CODING_AGENT_DIR", &agent).args(args))?;
    Ok((serde_json::from_str(&out)?, fs_err::metadata(&pi)?.len() + fs_err::metadata(&omp)?.len()))
}

/// pi and omp sharing `PI_CODING_AGENT_DIR`: `fsck` checks each file once, each by its
/// own first line, and finds nothing wrong.
#[test]
fn fsck_with_a_shared_agent_dir_checks_each_file_once() -> Result<()> {
    let (v, _) = in_a_shared_agent_dir("jobs-fsck-shared", &["--json", "fsck"])?;
    assert_eq!(v["sessions"], 2, "{v}");
    Ok(())
}

/// `export` shows what a command run printed (omp's and pi's `bashExecution`) and writes
/// no HTML a Markdown renderer would run.
#[test]
fn export_shows_command_runs_and_carries_no_html() -> Result<()> {
    let h = Home::new("jobs-export")?;
    let file = h.work.join("s.jsonl");
    let bash = r#"{"type":"message","id":"bbbbbbbb","parentId":"aaaaaaaa","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"bashExecution","command":"ls -la /srv","output":"total 42","exitCode":0,"cancelled":false,"truncated":false,"timestamp":2}}"#;
    for dialect in ["omp", "pi"] {
        fs_err::write(&file, format!("{}{bash}\n", session_text(dialect, "<script>alert(1)</script>")))?;
        let md = h.ok(&["--dialect", dialect, "export", s(&file)?])?;
        assert!(md.contains("ls -la /srv") && md.contains("total 42"), "{dialect}: {md}");
        assert!(!md.contains("<script>") && md.contains("&lt;script&gt;"), "{dialect}: {md}");
    }
    Ok(())
}

/// `ls` into a reader that goes away (`session ls | head -c 100`) ends quietly.
#[test]
fn ls_into_a_closed_pipe_is_quiet() -> Result<()> {
    let h = Home::new("jobs-pipe")?;
    let bucket = h.bucket("pi", "--p--")?;
    let long = "x".repeat(2_000);
    for i in 0..150 {
        write_session(&bucket.join(format!("2026-01-01T00-00-00-{i:03}Z_s{i}.jsonl")), "pi", &format!("{i} {long}"))?;
    }
    let mut child = in_home(&h.home, &h.work)
        .args(["--json", "--dialect", "pi", "ls", "--all"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut head = [0u8; 100];
    child.stdout.take().ok_or("stdout")?.read_exact(&mut head)?;
    let mut err = String::new();
    child.stderr.take().ok_or("stderr")?.read_to_string(&mut err)?;
    let status = child.wait()?;
    assert_eq!(err, "", "nothing on stderr");
    assert!(status.success(), "{status}");
    Ok(())
}

/// A message that holds a lone surrogate escape (`\ud83d`, what JavaScript writes for
/// half an emoji): every shape of `ls` lists it, with the escape as pi writes it.
#[test]
fn ls_lists_a_lone_surrogate_in_every_shape() -> Result<()> {
    let h = Home::new("jobs-surrogate")?;
    let bucket = h.bucket("pi", "--p--")?;
    let user = r#"{"type":"message","id":"aaaaaaaa","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"half \ud83d an emoji","timestamp":1}}"#;
    fs_err::write(bucket.join("2026-01-01T00-00-00-000Z_s.jsonl"), format!("{HEADER}\n{user}\n"))?;
    for args in [
        &["--json", "--dialect", "pi", "ls", "--all"][..],
        &["--json", "ls", "--all"],
        &["ls", "--all", "--jsonl"],
        &["--text", "ls", "--all"],
    ] {
        let out = h.ok(args)?;
        let want = if args.contains(&"--text") { "half" } else { r#""firstMessage":"half \ud83d an emoji""# };
        assert!(out.contains(want), "{args:?}: {out}");
    }
    Ok(())
}

/// `push ../s.jsonl` stores the session under its path with `..` resolved; `pull` of a
/// path with a `.` segment is refused (no crash); `pull` writes nothing through a link
/// below its target folder.
#[cfg(feature = "sqlite")]
#[test]
fn push_and_pull_take_plain_paths_only() -> Result<()> {
    let h = Home::new("jobs-transfer")?;
    let sub = h.work.join("sub");
    fs_err::create_dir_all(&sub)?;
    let file = h.work.join("s.jsonl");
    write_session(&file, "pi", "pushed")?;
    fs_err::create_dir_all(h.work.join("s"))?;
    fs_err::write(h.work.join("s/a.txt"), "artifact")?;
    let db = format!("sqlite://{}", h.tmp.path().join("db.sqlite").display());
    let out = in_home(&h.home, &sub).args(["--json", "push", "../s.jsonl", "--to", &db]).output()?;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(v["path"], s(&file)?, "{v}");
    let dotted = format!("{}/./s.jsonl", h.work.display());
    let (code, _, err) = h.run(&["--store", &db, "pull", &dotted, "--to", s(h.tmp.path())?])?;
    assert!(code == 1 && err.contains("not a plain session path"), "{code} {err}");
    let target = h.tmp.path().join("target");
    let outside = h.tmp.path().join("outside");
    fs_err::create_dir_all(&target)?;
    fs_err::create_dir_all(&outside)?;
    std::os::unix::fs::symlink(&outside, target.join("s"))?;
    let (code, _, err) = h.run(&["--store", &db, "pull", s(&file)?, "--to", s(&target)?])?;
    assert!(code == 1 && err.contains("symbolic link"), "{err}");
    assert_eq!(fs_err::read_dir(&outside)?.count(), 0, "nothing written through the link");
    assert!(!target.join("s.jsonl").exists());
    Ok(())
}

/// `rm` moves a session to the trash, where `ls` no longer finds it; `trash list` shows
/// it, `trash restore` puts it back byte for byte (refusing while its place is taken),
/// `trash empty` is a dry run without `--yes`, and `rm --purge` deletes for good.
#[test]
fn rm_goes_to_the_trash_and_comes_back() -> Result<()> {
    let h = Home::new("jobs-trash")?;
    let bucket = h.bucket("pi", "--p--")?;
    let file = bucket.join("s.jsonl");
    write_session(&file, "pi", "kept in the trash")?;
    fs_err::create_dir_all(bucket.join("s"))?;
    fs_err::write(bucket.join("s/out.txt"), "artifact")?;
    let before = Tree::read(&bucket)?;
    let v = h.json(&["--json", "rm", s(&file)?, "--yes"])?;
    let dir = PathBuf::from(v["trash"].as_str().ok_or("the trash folder")?);
    assert!(dir.starts_with(h.home.join(".pi/agent/session-trash")), "{v}");
    assert_eq!(Tree::read(&bucket)?, Tree::default());
    let (_, ls, _) = h.run(&["--json", "ls", "--all"])?;
    assert!(!ls.contains("s.jsonl"), "{ls}");

    let list = h.json(&["--json", "trash", "list"])?;
    assert_eq!(list["sessions"][0]["path"], s(&file)?, "{list}");

    write_session(&file, "pi", "a new session at the same place")?;
    let name = dir.file_name().ok_or("a name")?.to_string_lossy().into_owned();
    let (code, _, err) = h.run(&["trash", "restore", &name])?;
    assert!(code == 1 && err.contains("already exists"), "{err}");
    fs_err::remove_file(&file)?;
    let out = h.ok(&["trash", "restore", &name])?;
    assert!(out.contains("\"restored\""), "{out}");
    assert_eq!(Tree::read(&bucket)?, before, "back byte for byte");

    // Emptying: a dry run first, then for good.
    h.run(&["rm", s(&file)?, "--yes"])?;
    let empty = |args: &[&str]| h.json(&[&["--json", "trash", "empty"], args].concat());
    let dry = empty(&[])?;
    assert!(dry["deleted"] == false && dry["sessions"].as_array().map(Vec::len) == Some(1), "{dry}");
    assert_eq!(h.run(&["--json", "trash", "list"])?.1.matches("\"path\"").count(), 1);
    let young = empty(&["--older-than", "1d", "--yes"])?;
    assert_eq!(young["sessions"].as_array().map(Vec::len), Some(0), "{young}");
    let all = empty(&["--yes"])?;
    assert!(all["deleted"] == true && all["sessions"].as_array().map(Vec::len) == Some(1), "{all}");
    assert_eq!(Tree::read(&h.home.join(".pi/agent/session-trash"))?, Tree::default());

    // --purge deletes for good.
    write_session(&file, "pi", "gone for good")?;
    let (code, out, err) = h.run(&["rm", s(&file)?, "--yes", "--purge"])?;
    assert!(code == 0 && out.contains("\"deleted\""), "{out}{err}");
    assert!(!file.exists());
    assert!(h.run(&["--json", "trash", "list"])?.1.contains("\"sessions\":[]"));
    Ok(())
}

/// `prune` chooses the same sessions in its dry run and its real run: old ones, not the
/// named ones with `--keep-named`, only the project's with `--project`; the real run
/// moves them to the trash.
#[test]
fn prune_moves_what_its_dry_run_listed() -> Result<()> {
    let h = Home::new("jobs-prune")?;
    let now = u128::try_from(session_store::clock::Clock::now_ms(&session_store::clock::SystemClock))?;
    let session = |cwd: &str, id: &str, at: u128, name: Option<&str>| {
        let mut text = format!(
            "{{\"type\":\"session\",\"version\":3,\"id\":\"{id}\",\"timestamp\":\"2020-01-01T00:00:00.000Z\",\"cwd\":\"{cwd}\"}}\n\
             {{\"type\":\"message\",\"id\":\"aaaaaaaa\",\"parentId\":null,\"timestamp\":\"2020-01-01T00:00:01.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"hi\",\"timestamp\":{at}}}}}\n"
        );
        if let Some(n) = name {
            text.push_str(&format!(
                "{{\"type\":\"session_info\",\"id\":\"bbbbbbbb\",\"parentId\":\"aaaaaaaa\",\"timestamp\":\"2020-01-01T00:00:02.000Z\",\"name\":\"{n}\"}}\n"
            ));
        }
        text
    };
    let day = 86_400_000u128;
    let p = h.bucket("pi", "--p--")?;
    let q = h.bucket("pi", "--q--")?;
    fs_err::write(p.join("old.jsonl"), session("/p", "s-old", now - 100 * day, None))?;
    fs_err::write(p.join("named.jsonl"), session("/p", "s-named", now - 100 * day, Some("keep")))?;
    fs_err::write(p.join("new.jsonl"), session("/p", "s-new", now - day, None))?;
    fs_err::write(q.join("other.jsonl"), session("/q", "s-other", now - 100 * day, None))?;
    // Files last written long ago, but the new one (which its messages date too).
    let long_ago = std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(now - 100 * day)?);
    for f in [p.join("old.jsonl"), p.join("named.jsonl"), q.join("other.jsonl")] {
        fs_err::File::options().write(true).open(&f)?.file().set_modified(long_ago)?;
    }
    // A session written to just now though its messages are old: kept.
    fs_err::write(p.join("touched.jsonl"), session("/p", "s-touched", now - 100 * day, None))?;
    let run = |yes: bool| -> Result<Vec<String>> {
        let mut args =
            vec!["--json", "--dialect", "pi", "prune", "--older-than", "30d", "--keep-named", "--project", "/p"];
        if yes {
            args.push("--yes");
        }
        Ok(h.json(&args)?["sessions"]
            .as_array()
            .ok_or("sessions")?
            .iter()
            .filter_map(|s| s["path"].as_str().map(str::to_owned))
            .collect())
    };
    let dry = run(false)?;
    assert_eq!(dry, [s(&p.join("old.jsonl"))?], "the dry run changes nothing");
    assert!(p.join("old.jsonl").exists());
    assert_eq!(run(true)?, dry, "the real run moves what the dry run listed");
    assert!(!p.join("old.jsonl").exists() && p.join("named.jsonl").exists() && p.join("new.jsonl").exists());
    assert!(q.join("other.jsonl").exists());
    assert!(p.join("touched.jsonl").exists());
    let (_, list, _) = h.run(&["--json", "trash", "list"])?;
    assert!(list.contains("s-old"), "{list}");
    let (code, _, err) = h.run(&["prune", "--older-than", "0"])?;
    assert!(code == 1 && err.contains("every session"), "{err}");
    Ok(())
}

/// `du --all` counts every session of both agents once; each session's parts add up to
/// its file's size, and the total to the bytes on disk.
#[test]
fn du_adds_up_to_the_bytes_on_disk() -> Result<()> {
    let h = Home::new("jobs-du")?;
    let pi = h.bucket("pi", "--p--")?.join("a.jsonl");
    let omp = h.bucket("omp", "-q")?.join("b.jsonl");
    write_session(&pi, "pi", "hello")?;
    let tool = r#"{"type":"message","id":"bbbbbbbb","parentId":"aaaaaaaa","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"toolResult","toolCallId":"c","toolName":"ls","content":[{"type":"text","text":"out"},{"type":"image","data":"QUJDRA==","mimeType":"image/png"}],"isError":false,"timestamp":2}}"#;
    fs_err::write(&omp, format!("{}{tool}\ngarbage\n", session_text("omp", "look")))?;
    fs_err::create_dir_all(omp.with_extension(""))?;
    fs_err::write(omp.with_extension("").join("art.txt"), "12345")?;
    let v = h.json(&["--json", "du", "--all"])?;
    let on_disk = fs_err::metadata(&pi)?.len() + fs_err::metadata(&omp)?.len();
    assert_eq!(v["bytes"], on_disk, "{v}");
    assert_eq!(v["sessions"], 2, "{v}");
    for s in v["largest"].as_array().ok_or("largest")? {
        let part = |k: &str| s[k].as_u64().unwrap_or(u64::MAX / 8);
        assert_eq!(part("text") + part("toolOutput") + part("images") + part("other"), part("bytes"), "{s}");
        if s["agent"] == "omp" {
            assert_eq!(
                (part("images"), part("artifacts"), part("other") > "garbage".len() as u64),
                (8, 5, true),
                "{s}"
            );
        }
    }
    Ok(())
}

/// `usage` sums every usage record of both agents once: a fork's copy of an entry is
/// not counted again; groups by model and by day add up to the total, and the table
/// shows the JSON's numbers.
#[test]
fn usage_counts_each_entry_once() -> Result<()> {
    let h = Home::new("jobs-usage")?;
    let usage = |input: u32, output: u32, cost: f64| {
        format!(
            r#"{{"input":{input},"output":{output},"cacheRead":1,"cacheWrite":2,"totalTokens":0,"cost":{{"total":{cost}}}}}"#
        )
    };
    let assistant = |id: &str, parent: &str, day: &str, model: &str, u: &str| {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"{day}T10:00:00.000Z","message":{{"role":"assistant","content":[],"provider":"p","model":"{model}","usage":{u},"stopReason":"stop","timestamp":1}}}}"#
        )
    };
    let header = |id: &str| {
        format!(r#"{{"type":"session","version":3,"id":"{id}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}}"#)
    };
    let user = r#"{"type":"message","id":"aaaaaaaa","parentId":null,"timestamp":"2026-03-01T09:00:00.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#;
    let a1 = assistant("a1a1a1a1", "aaaaaaaa", "2026-03-01", "m1", &usage(100, 10, 0.5));
    let a2 = assistant("a2a2a2a2", "a1a1a1a1", "2026-03-02", "m2", &usage(200, 20, 1.0));
    let pi_usage = format!(
        r#"{{"type":"usage","id":"u1u1u1u1","parentId":"a2a2a2a2","timestamp":"2026-03-02T11:00:00.000Z","kind":"cache_warm","provider":"p","model":"m1","usage":{}}}"#,
        usage(1, 0, 0.25)
    );
    let bucket = h.bucket("pi", "--p--")?;
    fs_err::write(bucket.join("a.jsonl"), format!("{}\n{user}\n{a1}\n{a2}\n{pi_usage}\n", header("s-a")))?;
    // A fork: the same entries, then one of its own.
    let a3 = assistant("a3a3a3a3", "a1a1a1a1", "2026-03-03", "m1", &usage(1000, 100, 2.0));
    fs_err::write(bucket.join("b.jsonl"), format!("{}\n{user}\n{a1}\n{a3}\n", header("s-b")))?;
    let by_model = h.json(&["--json", "--dialect", "pi", "usage", "--by", "model"])?;
    let total = &by_model["total"];
    assert_eq!((total["input"].as_f64(), total["output"].as_f64()), (Some(1301.0), Some(130.0)), "{by_model}");
    assert_eq!((total["cost"].as_f64(), total["records"].as_u64()), (Some(3.75), Some(4)), "{by_model}");
    assert_eq!(by_model["repeated"], 1, "{by_model}");
    let rows = by_model["rows"].as_array().ok_or("rows")?;
    let keys: Vec<&str> = rows.iter().filter_map(|r| r["key"].as_str()).collect();
    assert_eq!(keys, ["p/m1", "p/m2"]);
    assert_eq!(rows[0]["input"].as_f64(), Some(1101.0));
    let by_day = h.json(&["--json", "--dialect", "pi", "usage", "--since", "2026-03-02"])?;
    assert_eq!(by_day["total"]["input"].as_f64(), Some(1201.0), "{by_day}");
    assert_eq!(by_day["rows"].as_array().map(Vec::len), Some(2));
    let (code, _, err) = h.run(&["usage", "--since", "March"])?;
    assert!(code == 2 && err.contains("YYYY-MM-DD"), "{err}");
    Ok(())
}

/// `relocate OLD NEW` lists, then moves, every session of both agents whose cwd is OLD
/// or below it (not a sibling that shares its prefix) into the buckets of NEW, where
/// `ls` finds them; run again it has nothing left to do.
#[test]
fn relocate_takes_a_project_to_its_new_folder() -> Result<()> {
    let h = Home::new("jobs-relocate")?;
    let with_cwd = |dialect: &str, cwd: &str, id: &str| {
        session_text(dialect, id).replace(r#""cwd":"/p""#, &format!(r#""cwd":"{cwd}""#))
    };
    let pi_old = h.bucket("pi", "--w-old--")?.join("a.jsonl");
    let pi_sub = h.bucket("pi", "--w-old-sub--")?.join("b.jsonl");
    let pi_sibling = h.bucket("pi", "--w-old2--")?.join("c.jsonl");
    let omp_old = h.bucket("omp", "-w-old")?.join("d.jsonl");
    fs_err::write(&pi_old, with_cwd("pi", "/w/old", "pi old"))?;
    fs_err::write(&pi_sub, with_cwd("pi", "/w/old/sub", "pi sub"))?;
    fs_err::write(&pi_sibling, with_cwd("pi", "/w/old2", "pi sibling"))?;
    fs_err::write(&omp_old, with_cwd("omp", "/w/old", "omp old"))?;
    let sibling = fs_err::read(&pi_sibling)?;
    let run = |yes: bool| -> Result<serde_json::Value> {
        let mut args = vec!["--json", "relocate", "/w/old", "/w/new"];
        if yes {
            args.push("--yes");
        }
        h.json(&args)
    };
    let dry = run(false)?;
    let planned: Vec<(String, String)> = dry["sessions"]
        .as_array()
        .ok_or("sessions")?
        .iter()
        .map(|s| (s["from"].as_str().unwrap_or_default().to_owned(), s["to"].as_str().unwrap_or_default().to_owned()))
        .collect();
    assert_eq!(planned.len(), 3, "{dry}");
    assert!(planned.contains(&("/w/old/sub".to_owned(), "/w/new/sub".to_owned())), "{dry}");
    assert!(pi_old.exists() && omp_old.exists(), "a dry run moves nothing");
    let done = run(true)?;
    assert_eq!(done["sessions"].as_array().map(Vec::len), Some(3), "{done}");
    assert!(!pi_old.exists() && !pi_sub.exists() && !omp_old.exists(), "{done}");
    assert_eq!(fs_err::read(&pi_sibling)?, sibling, "a sibling folder's session stays");
    for (dialect, cwd, text) in
        [("pi", "/w/new", "pi old"), ("pi", "/w/new/sub", "pi sub"), ("omp", "/w/new", "omp old")]
    {
        let out = h.ok(&["--json", "--dialect", dialect, "ls", "--cwd", cwd])?;
        assert!(out.contains(text), "{dialect} {cwd}: {out}");
    }
    assert_eq!(run(true)?["sessions"].as_array().map(Vec::len), Some(0), "nothing left to move");
    Ok(())
}

/// `merge` unites two copies of a session that went on on two machines (a file-sync
/// tool's conflict copy): both branches are in the file, the leaf is the file's last
/// line, and a second merge writes nothing; a copy of another session is refused.
#[test]
fn merge_unites_a_conflict_copy() -> Result<()> {
    let h = Home::new("jobs-merge")?;
    let bucket = h.bucket("pi", "--p--")?;
    let file = bucket.join("s.jsonl");
    let conflict = bucket.join("s.sync-conflict-20261204-120000.jsonl");
    let next = |id: &str, text: &str| {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":"aaaaaaaa","timestamp":"2026-01-01T00:00:02.000Z","message":{{"role":"user","content":"{text}","timestamp":2}}}}"#
        ) + "\n"
    };
    let base = session_text("pi", "start");
    fs_err::write(&file, format!("{base}{}", next("cccccccc", "on the laptop")))?;
    fs_err::write(&conflict, format!("{base}{}", next("dddddddd", "on the server")))?;
    let v = h.json(&["--json", "merge", s(&file)?, s(&conflict)?])?;
    assert_eq!((v["written"].as_bool(), v["leaf"].as_str()), (Some(true), Some("cccccccc")), "{v}");
    let text = fs_err::read_to_string(&file)?;
    assert!(
        text.contains("on the server") && text.trim_end().ends_with(next("cccccccc", "on the laptop").trim_end()),
        "{text}"
    );
    let (code, out, _) = h.run(&["--json", "merge", s(&file)?, s(&conflict)?])?;
    assert!(code == 0 && out.contains("\"written\":false"), "{out}");
    // fsck points at the copy and says how to unite them.
    let (code, out, _) = h.run(&["fsck"])?;
    assert!(code == 1 && out.contains("another copy of the session") && out.contains("session merge"), "{out}");
    let other = bucket.join("other.jsonl");
    fs_err::write(&other, session_text("pi", "x").replace("01a228d5-0000-7000-8000-000000000001", "another-session"))?;
    let (code, _, err) = h.run(&["merge", s(&file)?, s(&other)?])?;
    assert!(code == 1 && err.contains("different sessions"), "{err}");
    Ok(())
}

/// pi and omp sharing `PI_CODING_AGENT_DIR` both list its sessions: `du` and `usage`
/// still count each file once, as whose its first bytes say.
#[test]
fn a_shared_agent_dir_counts_each_session_once() -> Result<()> {
    let (v, bytes) = in_a_shared_agent_dir("jobs-shared-count", &["--json", "du", "--all"])?;
    assert_eq!((v["sessions"].as_u64(), v["bytes"].as_u64()), (Some(2), Some(bytes)), "{v}");
    let agents: Vec<&str> =
        v["largest"].as_array().ok_or("largest")?.iter().filter_map(|s| s["agent"].as_str()).collect();
    assert!(agents.contains(&"pi") && agents.contains(&"omp"), "{v}");
    Ok(())
}

/// Pins and archive marks follow a session through `move` and `relocate` (they are kept
/// by the session's id, never in the file); `ls --json` carries them, pinned first;
/// `prune --keep-pinned` keeps a pinned session; an omp pin is omp's own list.
#[test]
fn marks_follow_moved_sessions_and_steer_ls_and_prune() -> Result<()> {
    let h = Home::new("jobs-marks")?;
    let with = |dialect: &str, cwd: &str, id: &str, text: &str| {
        session_text(dialect, text)
            .replace(r#""cwd":"/p""#, &format!(r#""cwd":"{cwd}""#))
            .replace("01a228d5-0000-7000-8000-000000000001", id)
    };
    let pi_a = h.bucket("pi", "--w-old--")?.join("a.jsonl");
    let pi_b = h.bucket("pi", "--w-old--")?.join("b.jsonl");
    let omp_c = h.bucket("omp", "--w-old--")?.join("c.jsonl");
    fs_err::write(&pi_a, with("pi", "/w/old", "0000000a-0000-7000-8000-000000000000", "pi a"))?;
    fs_err::write(&pi_b, with("pi", "/w/old", "0000000b-0000-7000-8000-000000000000", "pi b"))?;
    fs_err::write(&omp_c, with("omp", "/w/old", "0000000c-0000-7000-8000-000000000000", "omp c"))?;
    let pi_d = h.bucket("pi", "--w-old--")?.join("d.jsonl");
    fs_err::write(&pi_d, with("pi", "/w/old", "0000000d-0000-7000-8000-000000000000", "pi d"))?;
    let read = || [&pi_a, &pi_b, &omp_c].iter().map(fs_err::read).collect::<std::io::Result<Vec<_>>>();
    let files = read()?;
    h.ok(&["pin", s(&pi_a)?])?;
    h.ok(&["archive", "0000000b"])?;
    let pinned = h.json(&["--json", "pin", s(&omp_c)?])?;
    assert_eq!((pinned["agent"].as_str(), pinned["pinned"].as_bool()), (Some("omp"), Some(true)), "{pinned}");
    assert_eq!(read()?, files, "marks never write a session file");
    assert_eq!(
        fs_err::read_to_string(h.home.join(".omp/agent/session-pins.json"))?,
        "[\n\t\"0000000c-0000-7000-8000-000000000000\"\n]",
        "omp's pin is in omp's own list, as omp writes it"
    );
    let listed = |cwd: &str, extra: &[&str]| -> Result<Vec<(String, bool, bool)>> {
        let mut args = vec!["--json", "ls", "--cwd", cwd];
        args.extend_from_slice(extra);
        let v = h.json(&args)?;
        Ok(v.as_array()
            .ok_or("an array")?
            .iter()
            .map(|s| {
                let text = s["firstMessage"].as_str().unwrap_or_default().to_owned();
                (text, s["pinned"] == true, s["archived"] == true)
            })
            .collect())
    };
    let before = listed("/w/old", &[])?;
    assert_eq!(before.len(), 3, "{before:?}");
    assert!(before[..2].iter().all(|(_, pinned, archived)| *pinned && !archived), "pinned first: {before:?}");
    assert_eq!(before[2], ("pi d".to_owned(), false, false));
    assert_eq!(listed("/w/old", &["--pinned"])?.len(), 2);
    assert_eq!(listed("/w/old", &["--archived"])?, [("pi b".to_owned(), false, true)]);
    // Moved one by one and as a project: the marks go along.
    h.ok(&["move", s(&pi_a)?, "--cwd", "/w/elsewhere"])?;
    assert_eq!(listed("/w/elsewhere", &[])?, [("pi a".to_owned(), true, false)]);
    h.ok(&["relocate", "/w/old", "/w/new", "--yes"])?;
    let moved = listed("/w/new", &[])?;
    assert_eq!(moved, [("omp c".to_owned(), true, false), ("pi d".to_owned(), false, false)], "omp's pin went along");
    assert_eq!(listed("/w/new", &["--pinned"])?, [("omp c".to_owned(), true, false)]);
    assert_eq!(listed("/w/new", &["--archived"])?, [("pi b".to_owned(), false, true)]);
    // prune --keep-pinned keeps the pinned sessions (every one is old: its messages
    // and, set here, its file's time).
    let now = u64::try_from(session_store::clock::Clock::now_ms(&session_store::clock::SystemClock))?;
    let long_ago = std::time::UNIX_EPOCH + std::time::Duration::from_millis(now - 100 * 86_400_000);
    for agent in [".pi/agent/sessions", ".omp/agent/sessions"] {
        for bucket in fs_err::read_dir(h.home.join(agent))? {
            for f in fs_err::read_dir(bucket?.path())? {
                let f = f?.path();
                if f.extension().is_some_and(|e| e == "jsonl") {
                    fs_err::File::options().write(true).open(&f)?.file().set_modified(long_ago)?;
                }
            }
        }
    }
    let chosen = h.json(&["--json", "prune", "--older-than", "1d", "--keep-pinned"])?;
    let names: Vec<&str> =
        chosen["sessions"].as_array().ok_or("sessions")?.iter().filter_map(|s| s["path"].as_str()).collect();
    assert_eq!(names.len(), 2, "only the unpinned ones: {chosen}");
    assert!(names.iter().all(|n| n.ends_with("b.jsonl") || n.ends_with("d.jsonl")), "{chosen}");
    let (_, out, _) = h.run(&["--json", "prune", "--older-than", "1d"])?;
    let all: serde_json::Value = serde_json::from_str(&out)?;
    assert_eq!(all["sessions"].as_array().map(Vec::len), Some(4), "without --keep-pinned: {all}");
    Ok(())
}

/// A damaged marks file is named and left as it is: marking refuses, `prune
/// --keep-pinned` refuses (it cannot tell which sessions are pinned), and `ls` lists
/// without marks after a warning naming it.
#[test]
fn a_damaged_marks_file_is_refused_and_kept() -> Result<()> {
    let h = Home::new("jobs-marks-damaged")?;
    let pi = h.bucket("pi", "--p--")?.join("a.jsonl");
    write_session(&pi, "pi", "hello")?;
    let state = h.home.join(".local/state/session-store");
    fs_err::create_dir_all(&state)?;
    fs_err::set_permissions(&state, std::fs::Permissions::from_mode(0o700))?;
    let marks = state.join("marks.json");
    fs_err::write(&marks, "{\"version\": 1, \"pinned\": 7}")?;
    fs_err::set_permissions(&marks, std::fs::Permissions::from_mode(0o600))?;
    let (code, _, err) = h.run(&["pin", s(&pi)?])?;
    assert!(code == 1 && err.contains("marks.json") && err.contains("not a list of session marks"), "{err}");
    let (code, _, err) = h.run(&["prune", "--older-than", "1d", "--keep-pinned"])?;
    assert!(code == 1 && err.contains("marks.json"), "{err}");
    let (code, out, err) = h.run(&["--json", "ls", "--cwd", "/p"])?;
    assert!(code == 0 && err.contains("marks.json") && out.contains("hello"), "{err}{out}");
    assert_eq!(fs_err::read_to_string(&marks)?, "{\"version\": 1, \"pinned\": 7}");
    Ok(())
}

/// `usage` keeps what each file holds in the usage cache: a second run on unchanged
/// files reads none of them and answers the same; a file appended to is read again; a
/// damaged cache is ignored; a fork's repeated entries still count once.
#[test]
fn usage_reads_only_changed_files_the_second_time() -> Result<()> {
    let h = Home::new("jobs-usage-cache")?;
    let cache = h.tmp.path().join("cache");
    let assistant = |id: &str, parent: &str, input: u32| {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"2026-03-01T10:00:00.000Z","message":{{"role":"assistant","content":[],"provider":"p","model":"m","usage":{{"input":{input},"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{{"total":0.5}}}},"stopReason":"stop","timestamp":1}}}}"#
        )
    };
    let bucket = h.bucket("pi", "--p--")?;
    let (a, b) = (bucket.join("a.jsonl"), bucket.join("b.jsonl"));
    fs_err::write(&a, format!("{HEADER}\n{}\n", assistant("a1a1a1a1", "aaaaaaaa", 100)))?;
    // A fork: the same entry, then one of its own.
    fs_err::write(
        &b,
        format!("{HEADER}\n{}\n{}\n", assistant("a1a1a1a1", "aaaaaaaa", 100), assistant("b2b2b2b2", "a1a1a1a1", 10)),
    )?;
    let now = u64::try_from(session_store::clock::Clock::now_ms(&session_store::clock::SystemClock))?;
    let settle = |f: &Path| -> Result<()> {
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_millis(now - 60_000);
        fs_err::File::options().write(true).open(f)?.file().set_modified(old)?;
        Ok(())
    };
    settle(&a)?;
    settle(&b)?;
    // A file is trusted by its stat only once it last changed (ctime too) over 2 s ago.
    let racy = std::time::Duration::from_millis(2_100);
    std::thread::sleep(racy);
    let run = || -> Result<serde_json::Value> {
        let out = in_home(&h.home, &h.work)
            .env_remove("SESSION_NO_CACHE")
            .env("XDG_CACHE_HOME", &cache)
            .args(["--json", "--dialect", "pi", "usage", "--by", "model"])
            .output()?;
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        Ok(serde_json::from_slice(&out.stdout)?)
    };
    let first = run()?;
    assert_eq!((first["total"]["input"].as_f64(), first["cached"].as_u64()), (Some(110.0), Some(0)), "{first}");
    assert_eq!(first["repeated"], 1, "{first}");
    assert!(cache.join("session-store/usage.bin").is_file());
    let second = run()?;
    assert_eq!(second["cached"], 2, "nothing read again: {second}");
    assert_eq!(
        (&second["total"], &second["rows"], &second["repeated"]),
        (&first["total"], &first["rows"], &first["repeated"])
    );
    // Appended to: read again, the new entry counted.
    append(&b, &format!("{}\n", assistant("c3c3c3c3", "b2b2b2b2", 1000)))?;
    settle(&b)?;
    std::thread::sleep(racy);
    let third = run()?;
    assert_eq!((third["total"]["input"].as_f64(), third["cached"].as_u64()), (Some(1110.0), Some(1)), "{third}");
    // A damaged cache is ignored, and the answer is the same.
    let damaged = fs_err::read(cache.join("session-store/usage.bin"))?;
    let mut bytes = damaged.clone();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs_err::write(cache.join("session-store/usage.bin"), &bytes)?;
    let fourth = run()?;
    assert_eq!((fourth["total"]["input"].as_f64(), fourth["cached"].as_u64()), (Some(1110.0), Some(0)), "{fourth}");
    assert_eq!(fourth["repeated"], 1, "{fourth}");
    // A run over the other agent's sessions (none here) leaves the cached files be.
    let out = in_home(&h.home, &h.work)
        .env_remove("SESSION_NO_CACHE")
        .env("XDG_CACHE_HOME", &cache)
        .args(["--json", "--dialect", "omp", "usage"])
        .output()?;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(run()?["cached"], 2, "still cached after another agent's run");
    Ok(())
}
