//! `session tail FILE [-n N] [--follow]`: the last entries of a session, then (following)
//! each new entry as it is written.
//!
//! Following waits on the storage's change feed ([`session::store::Storage::watch`]),
//! and also looks at the file's stat at least once a second (a feed that does not hear
//! every writer, Redis with omp's own scripts, is covered that way). After a change the
//! session is opened again, read-only (on files the session index makes that cost the new
//! tail only). A file that grew prints the entries after those it had (by position, so
//! an old file whose entries get their ids only when migrated in memory is not printed
//! again); a file rewritten in place (a repair, a migration) prints the entries whose ids
//! it did not have; a file that is removed ends the command with an error.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use session::Record;

use crate::args::Global;
use crate::commands::{Result, done};

/// How long one wait on the change feed lasts before the stat is looked at anyway.
const WAIT: Duration = Duration::from_secs(1);

/// Runs `tail`; returns what is left to print (following, everything is printed as it
/// comes and the command only ends with an error).
pub(crate) fn tail(g: &Global, file: &Path, lines: usize, follow: bool, json: bool) -> Result<String> {
    let storage = crate::store::current();
    // Watch, stat, then read: a write after the stat is reported and seen as a change;
    // one before it is in what is read.
    let mut watch = if follow { storage.watch(file)? } else { None };
    let mut last = if follow { storage.stat(file)? } else { None };
    let m = crate::commands::inspect(g, file)?;
    let entries = m.tree().entries();
    let shown = &entries[entries.len().saturating_sub(lines)..];
    let width = crate::table::width();
    let text = shown.iter().map(|r| render(r, json, width)).collect::<Vec<_>>().join("\n");
    done(&m, ())?;
    if !follow {
        return Ok(text);
    }
    let mut seen: HashSet<String> = entries.iter().filter_map(|r| r.id().map(str::to_owned)).collect();
    let mut count = entries.len();
    drop(m);
    let mut out = std::io::stdout().lock();
    if !text.is_empty() {
        writeln!(out, "{text}")?;
    }
    out.flush()?;
    loop {
        match &mut watch {
            Some(w) => {
                w.next(WAIT)?;
            }
            None => std::thread::sleep(Duration::from_millis(250)),
        }
        let now = storage.stat(file)?;
        if now == last {
            continue;
        }
        let Some(stat) = now else {
            return Err(format!("{} was removed", file.display()).into());
        };
        if !stat.is_file {
            return Err(format!("{} is no longer a file", file.display()).into());
        }
        let grew = last.is_some_and(|l| stat.size > l.size);
        last = now;
        // Removed after the stat: the same end as a removal the stat saw.
        let m = match crate::commands::inspect(g, file) {
            Err(e) if matches!(e.downcast_ref(), Some(session::SessionError::NotFound { .. })) => {
                return Err(format!("{} was removed", file.display()).into());
            }
            other => other?,
        };
        let entries = m.tree().entries();
        let width = crate::table::width();
        for (i, r) in entries.iter().enumerate() {
            let id = r.id().map(str::to_owned);
            let new = if grew { i >= count } else { id.as_ref().is_some_and(|id| !seen.contains(id)) };
            if new {
                writeln!(out, "{}", render(r, json, width))?;
            }
            seen.extend(id);
        }
        count = entries.len();
        done(&m, ())?;
        out.flush()?;
    }
}

/// One entry as `tail` prints it: its JSON line, or a line for a person (a lone
/// surrogate shown as U+FFFD, as the other commands show it).
fn render(r: &Record, json: bool, width: usize) -> String {
    if json {
        r.line().into_owned()
    } else {
        session::model::json::display_str(&crate::human::entry_line(r, width)).into_owned()
    }
}
