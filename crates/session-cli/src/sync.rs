//! `sync`: every session of this machine synced both ways with a remote copy in a folder
//! or a storage (`session::sync::sync`), or followed and synced as it changes
//! (`--watch`, `session::sync::watch`); the command parses, reports progress and prints.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use session::discovery::{AgentDirs, ProcessEnv};
use session::maintenance::MarkStore;
use session::store::{BlobStore, FileStorage, Storage};
use session::sync::{
    ProjectMap, SessionSync, SyncLocal, SyncOptions, SyncOutcome, SyncRemote, SyncReport, WatchEvent, WatchOptions,
};

use crate::args::Global;
use crate::commands::{Output, Result, wants_json};
use crate::store::StoreUrl;

/// The folder of the layout in a storage named by a URL, without `--prefix`.
const URL_PREFIX: &str = "/session-sync";

/// What `session sync` was asked.
pub(crate) struct SyncArgs<'a> {
    pub(crate) to: &'a str,
    pub(crate) prefix: Option<&'a str>,
    pub(crate) map: &'a [String],
    pub(crate) projects: &'a [PathBuf],
    pub(crate) dry_run: bool,
    /// `--watch`, with the seconds between syncs of every session.
    pub(crate) watch: Option<u64>,
}

/// `sync --to URL|DIR`: syncs, then prints each session that moved and a summary.
pub(crate) fn sync(g: &Global, a: &SyncArgs<'_>) -> Result<Output> {
    let process = ProcessEnv::from_process_env()?;
    let here = std::env::current_dir()?;
    let url = StoreUrl::parse(a.to)?;
    let (storage, prefix, name): (Arc<dyn Storage>, PathBuf, String) = if url.is_files() {
        let dir = here.join(a.to.strip_prefix("file://").unwrap_or(a.to));
        let prefix = a.prefix.map_or_else(|| dir.clone(), |p| dir.join(p.trim_start_matches('/')));
        (Arc::new(FileStorage::new()), prefix, dir.to_string_lossy().into_owned())
    } else {
        let prefix = Path::new("/").join(a.prefix.unwrap_or(URL_PREFIX).trim_start_matches('/'));
        (url.open(crate::store::named_access())?, prefix, a.to.to_owned())
    };
    let mut map = ProjectMap::new();
    map.read_config(&FileStorage::new(), &ProjectMap::config_file(&process))?;
    for m in a.map {
        map.insert_arg(m)?;
    }
    let omp = AgentDirs::omp(&process, g.omp_home.into());
    let blobs = g.blob_dir.clone().unwrap_or_else(|| omp.agent_dir.join("blobs"));
    let homes = match g.dialect {
        Some(d) if session::Dialect::from(d) == session::Dialect::Pi => vec![AgentDirs::pi(&process)],
        Some(_) => vec![omp],
        None => vec![AgentDirs::pi(&process), omp],
    };
    let local = SyncLocal::new(crate::store::current(), homes, MarkStore::default_state_dir(&process))
        .with_blobs(BlobStore::open(blobs));
    let remote = SyncRemote::new(storage, &name, prefix);
    let projects: Vec<PathBuf> = a.projects.iter().map(|p| here.join(p)).collect();
    let options = SyncOptions::default().dry_run(a.dry_run).map(map).projects(projects);
    if let Some(interval) = a.watch {
        return watch(g, &local, &remote, &options, interval);
    }
    let mut bar = crate::find::ProgressLine::labeled("syncing");
    let report = session::sync::sync(&local, &remote, &options, &mut |p| bar.tick(p.done, p.total))?;
    bar.finish();
    let c = report.counts();
    let failed = c.conflicts > 0 || c.failed > 0;
    if wants_json(g) {
        return Ok(Output { text: report_json(&report, &remote).to_string(), failed, streamed: false });
    }
    let mut text = String::new();
    for s in &report.sessions {
        if matches!(s.outcome, SyncOutcome::Unchanged) {
            continue;
        }
        let _ = writeln!(text, "{}", session_line(s, 10));
    }
    let _ = write!(
        text,
        "{}{} up to date, {}",
        if report.dry_run { "dry run (nothing written): " } else { "" },
        c.unchanged,
        summary(&report)
    );
    Ok(Output { text, failed, streamed: false })
}

/// `sync --watch`: prints a line for each sync that moved something (or found a conflict
/// or a failure the syncs before it did not), until SIGINT or SIGTERM (the step under
/// way finished first; a second signal ends the process at once, exit status 1), the
/// remote staying out of reach, or the reader of the output going away.
fn watch(g: &Global, local: &SyncLocal, remote: &SyncRemote, options: &SyncOptions, interval: u64) -> Result<Output> {
    let signalled = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // The first signal sets the flag; one that finds it set ends the process.
        signal_hook::flag::register_conditional_shutdown(signal, 1, Arc::clone(&signalled))?;
        signal_hook::flag::register(signal, Arc::clone(&signalled))?;
    }
    let json = wants_json(g);
    let pace = WatchOptions::default().pull_interval(Duration::from_secs(interval));
    let gone = AtomicBool::new(false);
    let mut out = std::io::stdout();
    // The conflicts and failures printed, so that each is printed once until it changes.
    let mut known: BTreeSet<(String, String)> = BTreeSet::new();
    let mut on_event = |e: &WatchEvent<'_>| match e {
        WatchEvent::Synced { report, full } => {
            let trouble: BTreeSet<(String, String)> = report
                .sessions
                .iter()
                .filter(|s| matches!(s.outcome, SyncOutcome::Conflict { .. } | SyncOutcome::Failed(_)))
                .map(|s| (s.name.clone(), outcome_text(&s.outcome).1))
                .collect();
            let news = !trouble.is_subset(&known);
            if *full {
                known = trouble;
            } else {
                known.extend(trouble);
            }
            if !report.moved() && !news {
                return;
            }
            let line = if json { report_json(report, remote).to_string() } else { watch_line(report) };
            if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                // The reader went away (`session sync --watch | head`): nobody to tell.
                gone.store(true, Ordering::SeqCst);
            }
        }
        WatchEvent::Failed { error, in_a_row, retry_in, .. } => {
            eprintln!(
                "error: sync failed ({in_a_row} in a row; trying again in {:.1} s): {error}",
                retry_in.as_secs_f64()
            );
        }
        _ => {}
    };
    let stop = || signalled.load(Ordering::SeqCst) || gone.load(Ordering::SeqCst);
    session::sync::watch(local, remote, options, &pace, &stop, &mut on_event)?;
    Ok(Output { text: String::new(), failed: false, streamed: true })
}

/// The JSON of a sync, as `sync --json` prints it.
fn report_json(report: &SyncReport, remote: &SyncRemote) -> Value {
    let c = report.counts();
    let sessions: Vec<Value> = report.sessions.iter().map(session_json).collect();
    json!({
        "dryRun": report.dry_run,
        "remote": session::sync::redact_url(&remote.url),
        "prefix": remote.prefix.to_string_lossy(),
        "summary": {
            "upToDate": c.unchanged, "pushed": c.pushed, "pulled": c.pulled, "merged": c.merged,
            "conflicts": c.conflicts, "skipped": c.skipped, "failed": c.failed,
        },
        "blobsUploaded": report.blobs_uploaded,
        "blobsDownloaded": report.blobs_downloaded,
        "stateFile": report.state_file.as_ref().map(|p| p.to_string_lossy()),
        "sessions": sessions,
    })
}

/// One session that moved: `pushed     /path/to/file.jsonl: 120 bytes` (the word padded
/// to a column with `pad`).
fn session_line(s: &SessionSync, pad: usize) -> String {
    let (what, detail) = outcome_text(&s.outcome);
    let path = s.local.as_ref().or(s.remote.as_ref()).map_or(s.name.clone(), |p| p.display().to_string());
    format!("{what:<pad$} {path}{}", if detail.is_empty() { String::new() } else { format!(": {detail}") })
}

/// The counts of a sync after the sessions up to date: `N pushed, N pulled, …`.
fn summary(report: &SyncReport) -> String {
    let c = report.counts();
    let mut text =
        format!("{} pushed, {} pulled, {} merged, {} conflict(s)", c.pushed, c.pulled, c.merged, c.conflicts);
    if c.skipped > 0 {
        let _ = write!(text, ", {} skipped", c.skipped);
    }
    if c.failed > 0 {
        let _ = write!(text, ", {} failed", c.failed);
    }
    if report.blobs_uploaded + report.blobs_downloaded > 0 {
        let _ = write!(text, "; blobs: {} up, {} down", report.blobs_uploaded, report.blobs_downloaded);
    }
    text
}

/// One sync of `--watch` on one line: the counts, then each session that moved or is in
/// trouble (`1 pushed, 0 pulled, 0 merged, 0 conflict(s): pushed /path/s.jsonl: 120 bytes`).
fn watch_line(report: &SyncReport) -> String {
    let sessions: Vec<String> = report
        .sessions
        .iter()
        .filter(|s| !matches!(s.outcome, SyncOutcome::Unchanged | SyncOutcome::Skipped { .. }))
        .map(|s| session_line(s, 0).replace('\n', " "))
        .collect();
    if sessions.is_empty() { summary(report) } else { format!("{}: {}", summary(report), sessions.join("; ")) }
}

/// The word and the detail of an outcome.
fn outcome_text(o: &SyncOutcome) -> (&'static str, String) {
    match o {
        SyncOutcome::Unchanged => ("unchanged", String::new()),
        SyncOutcome::Pushed { bytes } => ("pushed", format!("{bytes} bytes")),
        SyncOutcome::Pulled { bytes } => ("pulled", format!("{bytes} bytes")),
        SyncOutcome::Uploaded => ("uploaded", String::new()),
        SyncOutcome::Downloaded => ("downloaded", String::new()),
        SyncOutcome::Merged { local_added, remote_added } => {
            ("merged", format!("{local_added} entr(y/ies) here, {remote_added} on the remote"))
        }
        SyncOutcome::Conflict { detail, .. } => ("conflict", detail.clone()),
        SyncOutcome::Skipped { reason } => ("skipped", reason.clone()),
        SyncOutcome::Failed(e) => ("failed", e.to_string()),
        _ => ("?", String::new()),
    }
}

fn session_json(s: &SessionSync) -> Value {
    let (what, detail) = outcome_text(&s.outcome);
    let mut v = json!({
        "agent": s.dialect.name(),
        "name": s.name,
        "project": s.project,
        "local": s.local.as_ref().map(|p| p.to_string_lossy()),
        "remote": s.remote.as_ref().map(|p| p.to_string_lossy()),
        "outcome": what,
    });
    match &s.outcome {
        SyncOutcome::Pushed { bytes } | SyncOutcome::Pulled { bytes } => v["bytes"] = json!(bytes),
        SyncOutcome::Merged { local_added, remote_added } => {
            v["localAdded"] = json!(local_added);
            v["remoteAdded"] = json!(remote_added);
        }
        SyncOutcome::Conflict { reason, entry, .. } => {
            v["reason"] = json!(format!("{reason:?}"));
            v["entry"] = json!(entry);
            v["detail"] = json!(detail);
        }
        SyncOutcome::Skipped { .. } | SyncOutcome::Failed(_) => v["detail"] = json!(detail),
        _ => {}
    }
    v
}
