//! The session as a tree: the id index, the movable leaf, branching, labels, the
//! tree view, and the model-context projections of pi and omp. Pure: no IO.
//!
//! Entries form a tree through `id`/`parentId`; the file is an append-only log in
//! which a parent can be any earlier line. [`SessionTree`] indexes the entries of
//! one file (every record after the header, in file order) and keeps the *leaf*,
//! the entry the next append hangs under. After loading, the leaf is the last
//! entry; [`SessionTree::branch`] and [`SessionTree::reset_leaf`] move it without
//! writing anything.
//!
//! * [`SessionTree::get_branch`] walks from an entry up to its root (`getBranch`).
//! * [`SessionTree::tree`] builds the whole forest (`getTree`): roots in file
//!   order, children sorted by timestamp, labels attached; [`tree_to_json`] writes
//!   it in the conformance shape.
//! * [`pi::build_context`] / [`pi::build_projection`] and [`omp::build_context`]
//!   turn the path to a leaf into the messages a model sees, exactly as each
//!   reference does (compaction, branch summaries, context edits, tool-call
//!   stripping). Message payloads are copied as raw JSON text; only messages the
//!   reference changes are parsed.
//!
//! Damaged trees never hang or panic: a walk stops at the first revisited entry,
//! self-parented and orphaned entries become roots, and duplicate ids behave as in
//! the references (lookups see the later entry, the tree repeats its node). What
//! indexing found is in [`SessionTree::diagnostics`].
//!
//! Not here: reading files and migrations (`session-store`, `session-migrate`),
//! building new records (`session_model::entries`).
//!
//! ```
//! use session_model::{Dialect, Record};
//! use session_tree::{pi, Leaf, SessionTree};
//!
//! let lines = [
//!     r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#,
//!     r#"{"type":"message","id":"b2","parentId":"a1","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"one","timestamp":2}}"#,
//!     r#"{"type":"message","id":"c3","parentId":"a1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"user","content":"two","timestamp":3}}"#,
//! ];
//! let records = lines.iter().map(|l| Record::parse(l)).collect::<Result<Vec<_>, _>>()?;
//! let mut tree = SessionTree::new(Dialect::Pi, records);
//! assert_eq!(tree.leaf_id(), Some("c3"));
//! tree.branch("b2")?;
//! let ids: Vec<_> = tree.get_branch(None).iter().filter_map(|r| r.id()).collect();
//! assert_eq!(ids, ["a1", "b2"]);
//! let ctx = pi::build_context(&tree, Leaf::Current);
//! assert_eq!(ctx.messages().count(), 2);
//! assert_eq!(session_tree::tree_to_json(&tree.tree(), true),
//!     r#"[{"id":"a1","children":[{"id":"b2","children":[]},{"id":"c3","children":[]}]}]"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod idindex;
pub mod omp;
pub mod pi;
mod raw;
mod tree;

pub use session_model::{Dialect, Record};
pub use tree::{Leaf, SessionTree, TreeDiagnostic, TreeError, TreeNode, tree_to_json};

// The README's example runs as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
