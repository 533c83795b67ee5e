//! Transparent huge pages for the command's large allocations.
//!
//! Opening a large session builds its index in tens of megabytes of fresh memory (a
//! 1 GB session reopened through its session index: about 70 MB), and on Linux a
//! quarter of that open's time went to faulting those pages in one 4 KiB page at a
//! time. Most systems grant huge pages only to memory that asks for them
//! (`/sys/kernel/mm/transparent_hugepage/enabled` is `madvise`), and glibc's allocator
//! asks only when its `glibc.malloc.hugetlb=1` tunable is set, which it reads from the
//! environment when the process starts. So on Linux with glibc a command about to open
//! a session file of at least [`FROM_BYTES`], started without `GLIBC_TUNABLES`, runs
//! itself again (the same executable through `/proc/self/exe`, the same arguments,
//! standard streams and process id) with that tunable set; smaller files do not pay
//! for the second start (about 1.5 ms). `docs/cli.md` ("Huge pages") says how to turn
//! it off.
//!
//! A `GLIBC_TUNABLES` already in the environment is the user's choice and is left as
//! it is: set it to anything (even empty) to run without huge pages and without the
//! second start. If the new start fails, the command simply goes on without them.

/// The variable glibc reads its tunables from.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TUNABLES: &str = "GLIBC_TUNABLES";

/// Set on the second start, so that a system that drops `GLIBC_TUNABLES` (a secure
/// mode) cannot make the command start itself forever.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const STARTED: &str = "SESSION_HUGE_PAGES_STARTED";

/// The size of session file from which an open's memory is worth huge pages, unless
/// [`FROM_VAR`] says another.
pub(crate) const FROM_BYTES: u64 = 128 << 20;

/// The variable that sets another size than [`FROM_BYTES`] (in bytes; `0`: every file).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const FROM_VAR: &str = "SESSION_HUGE_PAGES_FROM";

/// Starts the command again with glibc's huge-page tunable when it is about to open
/// `file` and that is a file of at least [`FROM_BYTES`] (or `SESSION_HUGE_PAGES_FROM`
/// bytes), unless the environment already
/// speaks of the tunable; returns (doing nothing) otherwise, on other systems and when
/// that start fails.
pub(crate) fn ensure_for(file: &std::path::Path) {
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = file;
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::unix::process::CommandExt;
        if std::env::var_os(TUNABLES).is_some() || std::env::var_os(STARTED).is_some() {
            return;
        }
        use session::store::{FileStorage, Storage};
        let from = std::env::var(FROM_VAR).ok().and_then(|v| v.parse().ok()).unwrap_or(FROM_BYTES);
        if FileStorage::new().stat(file).ok().flatten().is_none_or(|st| st.size < from) {
            return;
        }
        let mut args = std::env::args_os();
        let Some(arg0) = args.next() else { return };
        // `exec` returns only when the new start failed: go on as we are.
        let _failed = std::process::Command::new("/proc/self/exe")
            .arg0(arg0)
            .args(args)
            .env(TUNABLES, "glibc.malloc.hugetlb=1")
            .env(STARTED, "1")
            .exec();
    }
}
