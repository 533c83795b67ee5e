//! Writers racing on one session in Redis from separate connections.

#[allow(dead_code, reason = "the support module is shared with the it binary")]
#[path = "../it/support.rs"]
mod support;

use std::path::Path;

use session_store::{ExpectedSize, Storage, StoreError};

use support::{TestPrefix, TestResult};

/// Two writers on two storages append to one session: blind appends never interleave
/// inside a line; checked appends lose no line and duplicate none.
#[test]
fn racing_writers() -> TestResult {
    let Some(t) = TestPrefix::create("racing_writers")? else { return Ok(()) };
    let blind = Path::new("/race/blind.jsonl");
    let checked = Path::new("/race/checked.jsonl");
    let writers = [t.storage()?, t.storage()?];
    std::thread::scope(|scope| -> TestResult {
        let handles: Vec<_> = writers
            .iter()
            .enumerate()
            .map(|(w, s)| {
                scope.spawn(move || -> Result<(), StoreError> {
                    for i in 0..40 {
                        let line = format!("{{\"w\":{w},\"i\":{i},\"pad\":\"{}\"}}\n", "x".repeat(100 + i));
                        s.append(blind, line.as_bytes())?;
                        loop {
                            let size = s.stat(checked)?.map(|st| st.size);
                            let expected = size.map_or(ExpectedSize::Missing, ExpectedSize::Bytes);
                            match s.append_if_size(checked, line.as_bytes(), expected) {
                                Ok(()) => break,
                                Err(StoreError::Conflict { .. }) => continue,
                                Err(e) => return Err(e),
                            }
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| "writer panicked")??;
        }
        Ok(())
    })?;
    for p in [blind, checked] {
        let text = String::from_utf8(writers[0].read(p)?)?;
        let mut seen: Vec<(u64, u64)> = Vec::new();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line)?;
            seen.push((v["w"].as_u64().ok_or("w")?, v["i"].as_u64().ok_or("i")?));
        }
        seen.sort_unstable();
        let want: Vec<(u64, u64)> = (0..2).flat_map(|w| (0..40).map(move |i| (w, i))).collect();
        assert_eq!(seen, want, "{}: every line once, whole", p.display());
    }
    Ok(())
}
