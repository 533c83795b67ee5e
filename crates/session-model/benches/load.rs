//! Placeholder replaced by the load benchmark.
fn main() {}
