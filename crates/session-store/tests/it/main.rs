//! Integration tests of session-store: the shared storage contract, backend specifics, locks, hostile
//! file systems (links, FIFOs, full disks),
//! persistence transforms against the conformance corpus, and property tests.

mod blob;
mod contract;
mod file;
mod hostile;
mod memory;
mod support;
