//! `sync`: every session of this machine synced both ways with a remote copy in a folder
//! or a storage (`session::sync::sync`); the command parses, reports progress and prints.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use session::discovery::{AgentDirs, ProcessEnv};
use session::maintenance::MarkStore;
use session::store::{BlobStore, FileStorage, Storage};
use session::sync::{ProjectMap, SessionSync, SyncLocal, SyncOptions, SyncOutcome, SyncRemote};

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
}

/// `sync --to URL|DIR`: syncs, then prints each session that moved and a summary.
pub(crate) fn sync(g: &Global, a: &SyncArgs<'_>) -> Result<Output> {
    let process = ProcessEnv::from_process_env()?;
    let here = std::env::current_dir()?;
    let url = StoreUrl::parse(a.to)?;
    let (storage, prefix, name): (Arc<dyn Storage>, PathBuf, String) = if url.is_files() {
        let dir = here.join(a.to.strip_prefix("file://").unwrap_or(a.to));
        let prefix = match a.prefix {
            Some(p) => dir.join(p.trim_start_matches('/')),
            None => dir.clone(),
        };
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
    let mut bar = crate::find::ProgressLine::labeled("syncing");
    let report = session::sync::sync(&local, &remote, &options, &mut |p| bar.tick(p.done, p.total))?;
    bar.finish();
    let c = report.counts();
    let failed = c.conflicts > 0 || c.failed > 0;
    if wants_json(g) {
        let sessions: Vec<Value> = report.sessions.iter().map(session_json).collect();
        let text = json!({
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
        .to_string();
        return Ok(Output { text, failed });
    }
    let mut text = String::new();
    for s in &report.sessions {
        if matches!(s.outcome, SyncOutcome::Unchanged) {
            continue;
        }
        let (what, detail) = outcome_text(&s.outcome);
        let path = s.local.as_ref().or(s.remote.as_ref()).map_or(s.name.clone(), |p| p.display().to_string());
        let _ = writeln!(
            text,
            "{what:<10} {path}{}",
            if detail.is_empty() { String::new() } else { format!(": {detail}") }
        );
    }
    let _ = write!(
        text,
        "{}{} up to date, {} pushed, {} pulled, {} merged, {} conflict(s)",
        if report.dry_run { "dry run (nothing written): " } else { "" },
        c.unchanged,
        c.pushed,
        c.pulled,
        c.merged,
        c.conflicts
    );
    if c.skipped > 0 {
        let _ = write!(text, ", {} skipped", c.skipped);
    }
    if c.failed > 0 {
        let _ = write!(text, ", {} failed", c.failed);
    }
    if report.blobs_uploaded + report.blobs_downloaded > 0 {
        let _ = write!(text, "; blobs: {} up, {} down", report.blobs_uploaded, report.blobs_downloaded);
    }
    Ok(Output { text, failed })
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
