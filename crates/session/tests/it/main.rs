//! Integration tests of the facade.

mod layering;
