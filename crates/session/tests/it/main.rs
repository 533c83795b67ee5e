//! Integration tests of the facade.

mod layering;
mod manager;
mod roundtrip;
