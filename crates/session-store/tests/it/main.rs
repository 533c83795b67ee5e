//! Integration tests of session-store: the shared storage contract, backend specifics, locks,
//! persistence transforms against the conformance corpus, and property tests.

mod blob;
mod contract;
mod file;
mod memory;
mod persist;
mod support;
