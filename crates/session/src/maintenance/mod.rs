//! The jobs beyond opening and writing one session: deleting, collecting unused blobs,
//! checking and repairing, migrating, moving, copying between storages, exporting and
//! counting. The `session` command parses its arguments, calls these and prints what they
//! return; each is a library function so that any program gets the same guarantees.
//!
//! Every job here follows the rules of the engine under it, and three of its own:
//!
//! * **It acts only on what it proved is a session** ([`prove_session`]): a regular file
//!   (not a link: [`JobError::Link`]) whose first record is a valid header of the
//!   dialect. Its artifacts directory is the file name without `.jsonl` only when that is
//!   a plain name ([`crate::store::artifacts_dir`]) and a real directory, never followed
//!   through a link. Deleting jobs ([`plan_rm`], [`gc`]) touch nothing outside the
//!   agents' session folders and blob stores ([`Homes`]) unless told to (`force`).
//! * **A rewrite never drops a line an agent appended meanwhile**: [`repair`],
//!   [`migrate`] and [`relocate`] rewrite a session under its lock, guarded by the size
//!   and identity of the file they read ([`crate::store::ExpectedSize::Unchanged`]); a
//!   file that changed is read again and the job done again, up to [`REWRITE_TRIES`]
//!   times, then refused ([`JobError::KeptChanging`]) with nothing written; a line pi
//!   appends (pi takes no lock) between the check and the rename is carried over to the
//!   new file by the file storage.
//! * **An error means nothing durable changed, or says what did**: each job names in its
//!   docs what it may delete or rewrite and what a crash at any moment leaves behind.
//!
//! | job | may delete | may rewrite | after a crash |
//! |---|---|---|---|
//! | [`plan_rm`] / [`RmPlan::execute`] | the session, its artifacts directory, its backups | nothing | backups go first and the session last: the session is there (maybe without some backups or artifacts) or gone; never a backup that omp would promote in its place |
//! | [`RmPlan::trash`] | nothing (the session, its artifacts directory and backups are moved into the trash of its root) | nothing | backups and artifacts move first and the session last: the session is in place or in the trash; `rm` again finishes the move |
//! | [`restore`] / [`trash_empty`] | `trash_empty`: trashed sessions | nothing | `restore`: the session is in the trash or back in place, whole; `trash_empty`: as `rm` |
//! | [`merge`] | nothing | the session merged into (only if unchanged since read) | the old file or the merged one, whole |
//! | [`gc`] | blobs no session in any home refers to, older than the grace period | nothing | some of the unused blobs are gone |
//! | [`fsck`] | nothing | with `repair`, damaged sessions, as [`repair`] | as [`repair`] |
//! | [`repair`] / [`migrate`] | nothing | the session (a backup of the bytes replaced is written first, unless asked not to) | the old file or the new one, whole; possibly a backup beside it |
//! | [`relocate`] | the source after a copy across file systems | the session at its new place | the session at one of its two places, whole (both after a copy across file systems); a backup of dropped lines beside the new place |
//! | [`push`] / [`pull`] | nothing (a replaced file only with `force`) | nothing | artifacts copied before the session: a session that is there is there whole |
//! | [`MarkStore::set`] (pin, archive) | nothing | our `marks.json` or omp's `session-pins.json`, atomically under its lock | the old list or the new one, whole |
//! | [`export`] / [`stats`] | nothing | nothing | nothing |

mod du;
mod error;
mod export;
mod fsck;
mod gc;
mod homes;
mod marks;
mod merge;
mod project;
mod proof;
mod prune;
mod rewrite;
mod rm;
mod stats;
mod transfer;
mod trash;
mod usage;
mod walk;

pub use du::{ProjectSpace, SessionSpace, by_project, session_space};
pub use error::JobError;
pub use export::{ExportFormat, export};
pub use fsck::{Finding, FsckOptions, FsckReport, fsck};
pub use gc::{GcOptions, GcReport, gc};
pub use homes::{Homes, Root};
pub use marks::{MARKS_FILE, Mark, MarkStore, Marks, SessionMarks};
pub use merge::{MergeInput, MergeLeaf, MergeReport, MergedBytes, merge, merge_bytes};
pub use project::{ProjectMove, project_moves, relocate_project};
pub use proof::{SessionProof, detect_dialect, prove_session};
pub use prune::{PruneOptions, prune_candidates};
pub use rewrite::{REWRITE_TRIES, RelocateReport, RewriteOptions, RewriteReport, migrate, relocate, repair};
pub use rm::{RmPlan, RmReport, plan_rm};
pub use stats::{Stats, stats};
pub use transfer::{Copied, TransferOptions, pull, push};
pub use trash::{TRASH_DIR, TRASH_META, TrashItem, TrashReport, restore, trash_empty, trash_list, trash_of};
pub use usage::{USAGE_CACHE, UsageBy, UsageOptions, UsageReport, UsageRow, usage};
