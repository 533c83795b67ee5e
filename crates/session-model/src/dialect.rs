//! Which reference's rules apply, and the format version both write.

/// The current session format version written by both references.
pub const CURRENT_VERSION: u32 = 3;

/// Which reference's rules apply: file layout, leniency, entry types, context shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// pi (`@earendil-works/pi-coding-agent` 1.6).
    Pi,
    /// omp (oh-my-pi 18.3.4, "musepi").
    Omp,
}

impl Dialect {
    /// Returns the dialect's name as used on the command line (`pi`, `omp`).
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Pi => "pi",
            Dialect::Omp => "omp",
        }
    }
}

impl std::str::FromStr for Dialect {
    type Err = UnknownDialect;
    fn from_str(s: &str) -> Result<Dialect, UnknownDialect> {
        match s {
            "pi" => Ok(Dialect::Pi),
            "omp" | "musepi" => Ok(Dialect::Omp),
            other => Err(UnknownDialect(other.to_owned())),
        }
    }
}

/// A dialect name that is neither `pi` nor `omp`.
#[derive(Debug, thiserror::Error)]
#[error("unknown dialect {0:?}: use pi or omp")]
pub struct UnknownDialect(pub String);
