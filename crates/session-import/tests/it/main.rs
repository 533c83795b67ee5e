//! Integration tests of the import: the hand-written fixtures of
//! `testdata/import/{claude,codex}` against snapshots, and properties of generated
//! Claude Code trees.

mod codex_props;
mod fixtures;
mod props;
mod robustness;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;
