//! Integration tests of the facade.

mod checklist;
mod common;
mod context;
mod import;
mod index;
mod layering;
mod lifecycle;
mod lifecycle_model;
mod maintenance;
pub(crate) mod manager;
mod marks;
mod parallelism;
mod persist;
mod races;
mod readonly;
mod roundtrip;
mod search;
pub(crate) mod spans;
mod sync;
mod typed_writes;
