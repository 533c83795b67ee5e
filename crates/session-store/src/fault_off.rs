//! The fault hooks without the `testing` feature.
//!
//! [`Faults`] has no values here, so every `Option<Faults>` the write paths hold is `None`
//! by its type: each hook folds to nothing, and no build without the feature can inject a
//! fault. The plans themselves (`fault.rs`) exist only with the feature.

use std::path::Path;

use crate::{Op, StoreError};

/// A fault plan, which this build cannot make.
#[derive(Clone, Debug)]
pub(crate) enum Faults {}

impl Faults {
    /// Never called: there is no `Faults` to call it on.
    pub(crate) fn check(&self, _op: Op, _path: &Path) -> Result<(), StoreError> {
        match *self {}
    }
}

/// Applies no plan: the whole write goes through.
pub(crate) fn plan_write(_faults: Option<&Faults>, _op: Op, _path: &Path, len: usize) -> (usize, Option<StoreError>) {
    (len, None)
}
