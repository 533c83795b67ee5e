//! Integration tests of `session-tree`, one module per source module plus the
//! data-driven snapshots and the model-based property test.

mod model;
mod omp;
mod pi;
mod snapshots;
mod support;
mod tree;
