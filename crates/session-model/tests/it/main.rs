//! Integration tests of session-model: the conformance corpus and the frozen and
//! corrupt fixtures of `testdata/` load and write back as the spec says, and the
//! serializer, parser and timestamp functions keep their invariants under proptest.

mod conformance;
mod corrupt;
mod frozen;
mod fuzzed;
mod generated;
mod json;
mod module_graph;
mod robustness;
pub(crate) mod roundtrip;
mod support;
mod timestamp;
mod typed;
