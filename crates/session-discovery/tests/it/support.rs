//! Temp directories and session-file builders shared by the tests.

pub(crate) use session_testkit::TempDir;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

/// Writes a file and sets its mtime (epoch ms).
pub(crate) fn write(path: &Path, text: &str, mtime_ms: u64) {
    if let Some(p) = path.parent() {
        fs_err::create_dir_all(p).expect("parent");
    }
    fs_err::write(path, text).expect("write");
    set_mtime(path, mtime_ms);
}

pub(crate) fn set_mtime(path: &Path, mtime_ms: u64) {
    let f = fs_err::OpenOptions::new().write(true).open(path).expect("open");
    f.file().set_modified(UNIX_EPOCH + Duration::from_millis(mtime_ms)).expect("mtime");
}

pub(crate) fn header(id: &str, ts: &str, cwd: &str) -> String {
    format!(r#"{{"type":"session","version":3,"id":"{id}","timestamp":"{ts}","cwd":"{cwd}"}}"#)
}

pub(crate) fn user(id: &str, text: &str, ms: u64) -> String {
    format!(
        r#"{{"type":"message","id":"{id}","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"{text}","timestamp":{ms}}}}}"#
    )
}

pub(crate) fn assistant(id: &str, text: &str, ms: u64, stop: &str) -> String {
    format!(
        r#"{{"type":"message","id":"{id}","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"{text}"}}],"stopReason":"{stop}","timestamp":{ms}}}}}"#
    )
}

pub(crate) fn lines(ls: &[String]) -> String {
    ls.iter().map(|l| format!("{l}\n")).collect()
}

/// Copies a fixture directory's `.jsonl` files into `to` and applies the mtimes of
/// its `ls.json`; returns the expected `result`.
pub(crate) fn load_fixture(name: &str, to: &Path) -> serde_json::Value {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures").join(name);
    for e in fs_err::read_dir(&src).expect("fixture") {
        let e = e.expect("entry");
        let n = e.file_name().to_string_lossy().into_owned();
        if n.ends_with(".jsonl") {
            fs_err::copy(e.path(), to.join(&n)).expect("copy");
        }
    }
    let exp: serde_json::Value =
        serde_json::from_slice(&fs_err::read(src.join("ls.json")).expect("ls.json")).expect("json");
    for (f, ms) in exp["mtimes"].as_object().expect("mtimes") {
        set_mtime(&to.join(f), ms.as_f64().expect("ms") as u64);
    }
    exp["result"].clone()
}
