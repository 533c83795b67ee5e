//! Where pi and omp keep sessions, and how they find them again.
//!
//! Both coding agents store one JSONL file per session, named
//! `<fileSafe(timestamp)>_<id>.jsonl`, in a per-project directory (a *bucket*)
//! under `<agentDir>/sessions/`. This crate reproduces, byte for byte where the
//! output is observable:
//!
//! * the layout: [`ProcessEnv`] (an explicit snapshot of variables, home, cwd, temp root
//!   and terminal) → [`AgentDirs`] for a dialect (pi: `~/.pi/agent` or
//!   `$PI_CODING_AGENT_DIR`; omp: `~/.musepi/agent` or `~/.omp/agent` by
//!   [`OmpHome`], `$PI_CONFIG_DIR`, `$PI_CODING_AGENT_DIR`, XDG dirs);
//! * the cwd → bucket encodings: [`encode_cwd_pi`] (`--home-user-proj--`) and
//!   [`encode_cwd_omp`] (`-proj` under home, `-tmp-x` under the temp root,
//!   `--srv-x--` elsewhere, symlinks resolved), with omp's best-effort migration
//!   of legacy bucket names when the default directory is computed;
//! * listing through [`Discovery`]: [`Discovery::list`], [`Discovery::list_all`],
//!   [`Discovery::recent`], [`Discovery::find_most_recent`],
//!   [`Discovery::find_by_id`], [`Discovery::resolve_resumable`] and
//!   [`Discovery::continue_recent`], returning [`SessionInfo`]s that
//!   [`sessions_to_json`] renders exactly as the reference's `JSON.stringify`;
//! * omp's terminal breadcrumbs ([`write_breadcrumb`], [`read_breadcrumb`]).
//!
//! The dialects differ in what a listing reads. pi reads every file whole
//! (`modified` is the last user/assistant message time, `messageCount` is exact)
//! and, for an explicit directory that is not the cwd's own, keeps only sessions
//! whose header cwd is the cwd. omp reads a 4 KiB prefix and a 32 KiB tail of each
//! file (`modified` is the mtime, `status` comes from the last message in the
//! tail) and recovers orphaned `.bak` backups first. Files are scanned in
//! parallel; unreadable or invalid files are skipped, as the references do.
//!
//! Behind the `testing` feature, `parity` checks that discovery through a storage
//! backend answers as through a memory storage holding the same bytes.
//!
//! Not done here: opening or writing sessions (`session-store`), omp's
//! `history.db` title index and custom-session-file registry (wyhash), named
//! profiles.
//!
//! ```
//! use session_discovery::{AgentDirs, Discovery, ProcessEnv, sessions_to_json};
//! use session_model::Dialect;
//!
//! let root = std::env::temp_dir().join(format!("sd-doc-{}", std::process::id()));
//! let dir = root.join("s");
//! fs_err::create_dir_all(&dir).unwrap();
//! fs_err::write(
//!     dir.join("2026-01-01T00-00-00-000Z_abc.jsonl"),
//!     concat!(
//!         r#"{"type":"session","version":3,"id":"abc","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#, "\n",
//!         r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hello","timestamp":1767225601000}}"#, "\n",
//!     ),
//! ).unwrap();
//! let env = ProcessEnv::new(&root, "/tmp", "/tmp");
//! let d = Discovery::new(AgentDirs::pi(&env));
//! let sessions = d.list("/tmp", Some(&dir), &mut |_| {}).unwrap();
//! assert_eq!(sessions[0].first_message, "hello");
//! assert!(sessions_to_json(Dialect::Pi, &sessions).contains(r#""modified":"2026-01-01T00:00:01.000Z""#));
//! fs_err::remove_dir_all(&root).unwrap();
//! ```

mod breadcrumb;
mod cache;
mod env;
mod error;
mod info;
mod io;
use session_model::scan as jsonscan;
mod list;
mod migrate;
mod omp_scan;
mod others;
#[cfg(feature = "testing")]
pub mod parity;
mod paths;
mod pi_scan;
mod recover;
mod sort;

pub use breadcrumb::{Breadcrumb, ContinueDecision, cwd_identity, read_breadcrumb, write_breadcrumb};
pub use cache::MAX_CACHE_FILES;
/// The listing cache's decoder and encoder on bytes, for the fuzz targets of `fuzz/`;
/// not part of the API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub use cache::fuzzing;
pub use env::{AgentDirs, OmpHome, ProcessEnv};
pub use error::DiscoveryError;
pub use info::{
    MessagesText, SessionInfo, SessionStatus, sanitize_name, session_to_json, sessions_to_json, write_sessions_json,
};
pub use list::{Discovery, PINS_FILE, Progress, RecentSession, ResumeTarget, Scope, parse_pins, time_ago};
pub use omp_scan::{PREFIX_BYTES, SUFFIX_BYTES};
pub use others::{
    OtherAgent, OtherSession, OtherSessionInfo, claude_folder_may_be, claude_projects_dir, codex_home,
    find_other_sessions, list_other_sessions, other_session_info,
};
pub use paths::{
    OmpScope, canonicalize_best_effort, encode_cwd_omp, encode_cwd_omp_canonical, encode_cwd_pi, expand_user_path,
    hashed_bucket_name, legacy_absolute_bucket, omp_scope, resolve, resolve_path, session_file_name,
    session_id_from_file_name,
};
pub use session_model::Dialect;

// The README's example runs as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
