//! Integration tests of the facade.

mod layering;
pub(crate) mod manager;
mod races;
mod readonly;
mod roundtrip;
