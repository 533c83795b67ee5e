//! `session sync` between two homes through a folder: what it prints, what it writes,
//! and that a dry run writes nothing.

use std::path::{Path, PathBuf};

use session_testkit::Tree;

use crate::{Result, TempDir, in_home, next_line, spawn_lines, stdout};

/// One machine: a home and a clone of the project.
pub(crate) struct Home {
    pub(crate) home: PathBuf,
    pub(crate) project: PathBuf,
}

impl Home {
    pub(crate) fn new(root: &Path, tag: &str, origin: &str) -> Result<Home> {
        let home = root.join(tag).join("home");
        let project = root.join(tag).join("src").join(format!("app-{tag}"));
        fs_err::create_dir_all(project.join(".git"))?;
        fs_err::write(project.join(".git/config"), format!("[remote \"origin\"]\n\turl = {origin}\n"))?;
        fs_err::create_dir_all(&home)?;
        Ok(Home { home, project })
    }

    /// The file of pi's session `sid` in this machine's bucket of the project.
    pub(crate) fn pi_file(&self, sid: &str) -> PathBuf {
        let bucket = format!("--{}--", self.project.to_string_lossy().trim_start_matches('/').replace('/', "-"));
        self.home.join(".pi/agent/sessions").join(bucket).join(format!("2026-01-01T00-00-00-000Z_{sid}.jsonl"))
    }

    /// Writes pi's session `sid` holding `lines`.
    pub(crate) fn put_pi(&self, sid: &str, lines: &[String]) -> Result<PathBuf> {
        let file = self.pi_file(sid);
        fs_err::create_dir_all(file.parent().ok_or("a bucket")?)?;
        let header = format!(
            r#"{{"type":"session","version":3,"id":"{sid}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"{}"}}"#,
            self.project.display()
        );
        fs_err::write(&file, format!("{header}\n{}", lines.concat()))?;
        Ok(file)
    }

    /// Runs `session sync ARGS --json` here and returns its output.
    pub(crate) fn sync(&self, args: &[&str]) -> Result<serde_json::Value> {
        Ok(serde_json::from_str(&stdout(self.command().arg("sync").args(args).arg("--json"))?)?)
    }

    /// `session` to run here, with this home's config folder.
    pub(crate) fn command(&self) -> std::process::Command {
        let mut c = in_home(&self.home, &self.home);
        c.env("XDG_CONFIG_HOME", self.home.join(".config"));
        c
    }
}

/// Two machines of the project `example.org/me/app`, its origin over SSH on `a` and over
/// HTTPS on `b`.
pub(crate) fn two_homes(root: &Path) -> Result<[Home; 2]> {
    Ok([Home::new(root, "a", "git@example.org:me/app.git")?, Home::new(root, "b", "https://example.org/me/app")?])
}

/// An entry line.
pub(crate) fn line(id: &str, parent: Option<&str>) -> String {
    let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
    format!(
        r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"q {id}","timestamp":1}}}}"#
    ) + "\n"
}

pub(crate) fn append(file: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    fs_err::OpenOptions::new().append(true).open(file)?.write_all(text.as_bytes())?;
    Ok(())
}

/// `bytes` with the header's `cwd` `from` written as `to`.
pub(crate) fn with_cwd(bytes: &[u8], from: &Path, to: &Path) -> Vec<u8> {
    String::from_utf8_lossy(bytes)
        .replacen(&format!("\"cwd\":\"{}\"", from.display()), &format!("\"cwd\":\"{}\"", to.display()), 1)
        .into_bytes()
}

#[test]
fn sync_goes_both_ways_through_a_folder() -> Result<()> {
    let tmp = TempDir::try_new("sync-folder")?;
    let a = Home::new(tmp.path(), "a", "git@example.org:me/app.git")?;
    let b = Home::new(tmp.path(), "b", "https://example.org/me/app.git")?;
    let remote = tmp.path().join("remote");
    let remote_arg = remote.to_str().ok_or("a UTF-8 path")?;
    let file_a = a.put_pi("s1", &[line("aaaaaaaa", None)])?;
    let out = a.sync(&["--to", remote_arg])?;
    assert_eq!(out["summary"]["pushed"], 1, "{out}");
    assert_eq!(out["sessions"][0]["outcome"], "uploaded", "{out}");
    assert_eq!(out["sessions"][0]["project"], "example.org/me/app", "{out}");

    // A dry run on the other machine says it would download and writes nothing.
    let map = format!("example.org/me/app={}", b.project.display());
    let before = Tree::read(tmp.path())?;
    let out = b.sync(&["--to", remote_arg, "--map", &map, "--dry-run"])?;
    assert_eq!(out["dryRun"], true, "{out}");
    assert_eq!(out["sessions"][0]["outcome"], "downloaded", "{out}");
    assert!(out["stateFile"].is_null(), "{out}");
    assert_eq!(before, Tree::read(tmp.path())?, "a dry run wrote");

    let out = b.sync(&["--to", remote_arg, "--map", &map])?;
    assert_eq!(out["summary"]["pulled"], 1, "{out}");
    let file_b = b.pi_file("s1");
    assert_eq!(fs_err::read(&file_b)?, with_cwd(&fs_err::read(&file_a)?, &a.project, &b.project));

    // Two continuations, merged; then both are up to date.
    append(&file_a, &line("bbbbbbbb", Some("aaaaaaaa")))?;
    append(&file_b, &line("cccccccc", Some("aaaaaaaa")))?;
    assert_eq!(a.sync(&["--to", remote_arg])?["summary"]["pushed"], 1);
    let out = b.sync(&["--to", remote_arg, "--map", &map])?;
    assert_eq!(out["summary"]["merged"], 1, "{out}");
    assert_eq!(a.sync(&["--to", remote_arg])?["summary"]["pulled"], 1);
    assert_eq!(fs_err::read(&file_b)?, with_cwd(&fs_err::read(&file_a)?, &a.project, &b.project));
    let text = String::from_utf8(fs_err::read(&file_a)?)?;
    for id in ["aaaaaaaa", "bbbbbbbb", "cccccccc"] {
        assert_eq!(text.matches(&format!("\"id\":\"{id}\"")).count(), 1, "{text}");
    }

    // The text summary, and a second sync that finds everything up to date.
    let text = stdout(in_home(&a.home, &a.home).args(["sync", "--to", remote_arg, "--text"]))?;
    assert!(text.contains("1 up to date, 0 pushed, 0 pulled, 0 merged, 0 conflict(s)"), "{text}");

    // --project leaves other projects alone.
    let out = a.sync(&["--to", remote_arg, "--project", "/elsewhere"])?;
    assert_eq!(out["sessions"], serde_json::json!([]), "{out}");
    let out = a.sync(&["--to", remote_arg, "--project", a.project.to_str().ok_or("a UTF-8 path")?])?;
    assert_eq!(out["summary"]["upToDate"], 1, "{out}");
    Ok(())
}

/// The project map of `$XDG_CONFIG_HOME/session/sync.json` places a download as `--map`
/// does; a download without one names the `--map` to pass.
#[test]
fn sync_reads_the_map_from_its_config_file() -> Result<()> {
    let tmp = TempDir::try_new("sync-config")?;
    let [a, b] = two_homes(tmp.path())?;
    let remote = tmp.path().join("remote");
    let remote_arg = remote.to_str().ok_or("a UTF-8 path")?;
    a.put_pi("s1", &[line("aaaaaaaa", None)])?;
    a.sync(&["--to", remote_arg])?;
    let out = b.sync(&["--to", remote_arg])?;
    assert_eq!(out["sessions"][0]["outcome"], "skipped", "{out}");
    assert!(
        out["sessions"][0]["detail"].as_str().is_some_and(|d| d.contains("--map example.org/me/app=PATH")),
        "{out}"
    );
    let config = b.home.join(".config/session");
    fs_err::create_dir_all(&config)?;
    fs_err::write(
        config.join("sync.json"),
        serde_json::json!({"map": {"git@example.org:me/app.git": b.project.to_string_lossy()}}).to_string(),
    )?;
    let out = b.sync(&["--to", remote_arg])?;
    assert_eq!(out["sessions"][0]["outcome"], "downloaded", "{out}");
    assert!(b.pi_file("s1").is_file());
    fs_err::write(config.join("sync.json"), r#"{"map": {"x": "relative"}}"#)?;
    let out = b.command().args(["sync", "--to", remote_arg]).output()?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("sync.json"), "{}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}

#[test]
fn sync_help_has_an_example() -> Result<()> {
    let tmp = TempDir::try_new("sync-help")?;
    let text = stdout(in_home(tmp.path(), tmp.path()).args(["sync", "--help"]))?;
    assert!(text.contains("Example: session sync --to"), "{text}");
    assert!(text.contains("--watch --interval 60"), "{text}");
    Ok(())
}

/// The remote copy of pi's session `sid` of the project `example.org/me/app`.
pub(crate) fn on_remote(remote: &Path, sid: &str) -> PathBuf {
    remote
        .join("pi/sessions")
        .join(session::sync::project_slug("example.org/me/app"))
        .join(format!("2026-01-01T00-00-00-000Z_{sid}.jsonl"))
}

/// `sync --watch` uploads what is here, then pushes a line appended here while it runs,
/// printing the JSON object of each sync that moved something on a line of its own, and
/// ends on SIGTERM with exit status 0.
#[test]
fn sync_watch_pushes_a_line_as_it_lands() -> Result<()> {
    let tmp = TempDir::try_new("sync-watch")?;
    let a = Home::new(tmp.path(), "a", "git@example.org:me/app.git")?;
    let remote = tmp.path().join("remote");
    let remote_arg = remote.to_str().ok_or("a UTF-8 path")?;
    watch_pushes(&a, remote_arg, &|| Ok(fs_err::read(on_remote(&remote, "s1")).ok()))
}

/// Runs `session sync --to TO --watch` in `a`, where pi's session `s1` is the only one,
/// appends a line while it runs and waits until `remote` (the remote copy's bytes)
/// holds it; then ends it with SIGTERM.
pub(crate) fn watch_pushes(a: &Home, to: &str, remote: &dyn Fn() -> Result<Option<Vec<u8>>>) -> Result<()> {
    let file = a.put_pi("s1", &[line("aaaaaaaa", None)])?;
    let (mut child, lines) =
        spawn_lines(a.command().args(["sync", "--to", to, "--watch", "--json"]).stderr(std::process::Stdio::piped()))?;
    let next = |what: &str| -> Result<serde_json::Value> { Ok(serde_json::from_str(&next_line(&lines, what)?)?) };
    let steps = || -> Result<()> {
        let first = next("the first sync")?;
        assert_eq!(first["sessions"][0]["outcome"], "uploaded", "{first}");
        append(&file, &line("bbbbbbbb", Some("aaaaaaaa")))?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while remote()? != Some(fs_err::read(&file)?) {
            if std::time::Instant::now() > deadline {
                return Err("the appended line did not reach the remote within 10 s".into());
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let pushed = next("the push")?;
        assert_eq!(pushed["sessions"][0]["outcome"], "pushed", "{pushed}");
        assert_eq!(pushed["summary"]["pushed"], 1, "{pushed}");
        Ok(())
    };
    let checked = steps();
    let term = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    if !term.as_ref().is_ok_and(std::process::ExitStatus::success) {
        child.kill()?;
    }
    let status = child.wait()?;
    checked?;
    assert!(term?.success(), "kill -TERM");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().ok_or("piped stderr")?, &mut err)?;
    assert_eq!(status.code(), Some(0), "{err}");
    Ok(())
}

/// `--watch` with `--dry-run`, and `--interval` without `--watch`, are usage errors.
#[test]
fn sync_watch_refuses_a_dry_run() -> Result<()> {
    let tmp = TempDir::try_new("sync-watch-dry")?;
    let remote = tmp.path().join("remote");
    let remote_arg = remote.to_str().ok_or("a UTF-8 path")?;
    for args in [&["--watch", "--dry-run"][..], &["--interval", "5"][..]] {
        let out = in_home(tmp.path(), tmp.path()).args(["sync", "--to", remote_arg]).args(args).output()?;
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(args[0]) && err.contains("--"), "{args:?}: {err}");
    }
    assert!(!remote.exists());
    Ok(())
}
