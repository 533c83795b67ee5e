//! Integration tests of the facade.

mod context;
mod layering;
pub(crate) mod manager;
mod races;
mod readonly;
mod roundtrip;
