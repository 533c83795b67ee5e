//! How many threads one operation may use: the one parallelism setting of the
//! workspace.

/// How many threads one operation on a large input may use: the one parallelism
/// setting of the workspace. The facade's `Env` carries it and passes it down to the
/// piecewise parse ([`parse_session_at_with`](crate::parse_session_at_with)), the write of a branched or forked
/// session, and listings; each layer still works alone below its own size threshold.
///
/// ```
/// use session_model::Parallelism;
/// assert_eq!(Parallelism::new(0).threads(), 1);
/// assert_eq!(Parallelism::SERIAL.threads(), 1);
/// assert!(Parallelism::default().threads() >= 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Parallelism(std::num::NonZeroUsize);

impl Parallelism {
    /// One thread: everything runs on the calling thread.
    pub const SERIAL: Parallelism = Parallelism(std::num::NonZeroUsize::MIN);

    /// Up to `threads` threads (0 counts as 1).
    pub fn new(threads: usize) -> Parallelism {
        Parallelism(std::num::NonZeroUsize::new(threads).unwrap_or(std::num::NonZeroUsize::MIN))
    }

    /// As many threads as the machine offers this process.
    pub fn available() -> Parallelism {
        Parallelism(std::thread::available_parallelism().unwrap_or(std::num::NonZeroUsize::MIN))
    }

    /// Returns the number of threads.
    pub fn threads(self) -> usize {
        self.0.get()
    }
}

impl Default for Parallelism {
    /// [`Parallelism::available`].
    fn default() -> Parallelism {
        Parallelism::available()
    }
}
