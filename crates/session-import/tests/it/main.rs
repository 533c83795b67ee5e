//! Integration tests of the import: the hand-written fixtures of
//! `testdata/import/{claude,codex}` against snapshots, and properties of generated
//! Claude Code trees.

mod fixtures;
mod props;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;
