//! Systematic crash-point exploration of every writing operation.
//!
//! For each operation (appends in both dialects at each durability, the store's atomic
//! replaces, the facade's migration rewrites, fork, extract, rename in pi and in omp with
//! the slot overwrite and the full-rewrite fallback, blob put, and the jobs of
//! `session::maintenance`: repair, migrate, move on one file system and across two, rm,
//! gc and pull) the explorer first runs it
//! once counting the storage boundaries it passes (every write, sync, rename, truncate,
//! lock, open...; see `session_store::Faults`), then, for every boundary `k`, runs it again
//! with the process dying at `k`: that call and every later one fail, and nothing is
//! cleaned up. After each death it checks that every session file parses (through
//! `parse_session_bytes`) and opens (through `SessionManager::open`), holds every entry
//! acknowledged before the death, has at most one torn last line, and that a file replaced
//! atomically holds one whole version; for a job also that its session is whole wherever it
//! is (a deleted one leaves no backup omp would promote), that every other file of the run
//! keeps its bytes and no file appears outside what the job may touch; in memory also after
//! a power loss that drops every
//! unsynced byte (`Durability::Fsync`: nothing acknowledged may be lost; `Flush`: nothing
//! acknowledged before the last flush).
//!
//! Two levels: in memory (`FaultStorage` over `MemoryStorage`) every trait call is a
//! boundary and a data write can also be torn in half; on real files
//! (`FileStorage::with_faults`) the boundaries are those inside the real write paths. There
//! each point is checked twice: the files as the death left them (copied at the moment of
//! death, lock records made to name a dead process), where a fresh writer must then write
//! and leave no lock file behind; and the files after the injected error returned and
//! everything was dropped, where no temporary or lock file may remain.
//!
//! Sizes: the operations are explored at growing sizes (more appends, more renames) until
//! `SESSION_CRASH_POINTS` crash points (default 1,000) have been explored, on
//! `SESSION_CRASH_THREADS` worker threads (default 2).
//! the next writer must also remove (unless `SESSION_CRASH_REQUIRE_TEMP_CLEANUP=0`) the
//! temporary files of a dead one; `SESSION_CRASH_FILTER=<text>` explores only the cases
//! whose name contains the text.

mod promise;
mod rig;
mod scenarios;

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use session::SessionManager;
use session::store::{Boundary, CrashKind, ExpectedSize, Faults};

use promise::{Leftovers, Phase, Promises};
use rig::{Level, Rig, TempDir, View, bury_own_locks, is_lock, is_session_in, is_temp, lock_of};
use scenarios::Case;

pub(crate) type Error = Box<dyn std::error::Error>;
pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

/// The number of crash points of the CI run (sizes grow until it is reached).
const CI_POINTS: usize = 1_000;
/// Sizes beyond this are not explored, whatever the target.
const MAX_SIZE: usize = 200;
/// The explorer re-executes itself with this variable set to get the pid of a dead process.
const EXIT_ENV: &str = "SESSION_CRASH_POINTS_EXIT";

struct Config {
    points: usize,
    require_temp_cleanup: bool,
    filter: Option<String>,
}

impl Config {
    fn from_env() -> Result<Config> {
        let points = match std::env::var("SESSION_CRASH_POINTS") {
            Ok(v) => v.parse().map_err(|e| format!("SESSION_CRASH_POINTS={v}: {e}"))?,
            Err(_) => CI_POINTS,
        };
        Ok(Config {
            points,
            // On unless `SESSION_CRASH_REQUIRE_TEMP_CLEANUP=0`.
            require_temp_cleanup: std::env::var_os("SESSION_CRASH_REQUIRE_TEMP_CLEANUP").is_none_or(|v| v != "0"),
            filter: std::env::var("SESSION_CRASH_FILTER").ok().filter(|f| !f.is_empty()),
        })
    }
}

fn main() -> ExitCode {
    if std::env::var_os(EXIT_ENV).is_some() {
        return ExitCode::SUCCESS;
    }
    match Config::from_env().and_then(|c| explore(&c)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("crash points: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What the exploration of one case found.
#[derive(Default)]
struct Tally {
    sizes: usize,
    boundaries: usize,
    points: usize,
    torn: usize,
    /// Transient faults explored (not counted as crash points).
    transient: usize,
    failures: Vec<String>,
    leftovers: LeftoverTotals,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.sizes += other.sizes;
        self.boundaries += other.boundaries;
        self.points += other.points;
        self.torn += other.torn;
        self.transient += other.transient;
        self.failures.extend(other.failures);
        let (a, b) = (&mut self.leftovers, other.leftovers);
        a.died_with_temps += b.died_with_temps;
        a.died_with_locks += b.died_with_locks;
        a.temps_after_next += b.temps_after_next;
        a.orphan_locks += b.orphan_locks;
    }
}

/// Returns the number of worker threads: `SESSION_CRASH_THREADS`, else 2.
fn threads() -> usize {
    std::env::var("SESSION_CRASH_THREADS").ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(2)
}

/// Leftover files, summed over the files-level points of a case.
#[derive(Clone, Copy, Default)]
struct LeftoverTotals {
    /// Points whose files at the moment of death held a temporary file / a lock file.
    died_with_temps: usize,
    died_with_locks: usize,
    /// Temporary files still there after the next writers wrote.
    temps_after_next: usize,
    /// Lock files of files nobody wrote again (a new file that was never published).
    orphan_locks: usize,
}

fn explore(config: &Config) -> Result<bool> {
    let started = Instant::now();
    let base = TempDir::try_new("session-crash-points")?;
    let dead_pid = dead_pid()?;
    let cases: Vec<Case> = scenarios::cases()
        .into_iter()
        .filter(|c| config.filter.as_ref().is_none_or(|f| c.name().contains(f.as_str())))
        .collect();
    if cases.is_empty() {
        return Err("no case matches SESSION_CRASH_FILTER".into());
    }
    canary(base.path(), dead_pid, config)?;
    let mut tallies: Vec<Tally> = cases.iter().map(|_| Tally::default()).collect();
    let mut total = 0;
    for size in 0..=MAX_SIZE {
        // The cases of one size on worker threads (the files level waits on fsync).
        let next = AtomicUsize::new(0);
        let results: Vec<Result<Vec<(usize, Tally)>, String>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads())
                .map(|_| {
                    s.spawn(|| {
                        let mut done = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::SeqCst);
                            let Some(case) = cases.get(i) else { return Ok(done) };
                            let mut tally = Tally::default();
                            explore_case(case, size, base.path(), dead_pid, config, &mut tally)
                                .map_err(|e| e.to_string())?;
                            done.push((i, tally));
                        }
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
        });
        let before = total;
        for result in results {
            for (i, tally) in result? {
                total += tally.points;
                tallies[i].merge(tally);
            }
        }
        // A round without a single point: every case fails already without a crash.
        if total >= config.points || total == before {
            break;
        }
    }
    report(&cases, &tallies, total, config, started);
    Ok(tallies.iter().all(|t| t.failures.is_empty()) && total >= config.points)
}

fn report(cases: &[Case], tallies: &[Tally], total: usize, config: &Config, started: Instant) {
    let mut by_op: BTreeMap<&str, usize> = BTreeMap::new();
    let mut by_level: BTreeMap<&str, usize> = BTreeMap::new();
    for (case, t) in cases.iter().zip(tallies) {
        println!(
            "crash points: {:<34} {:>4} points ({} boundaries over {} sizes, {} torn){}",
            case.name(),
            t.points,
            t.boundaries,
            t.sizes,
            t.torn,
            if t.transient > 0 { format!("; {} transient faults", t.transient) } else { String::new() }
        );
        *by_op.entry(case.op).or_default() += t.points;
        *by_level.entry(case.level.name()).or_default() += t.points;
    }
    for (op, n) in &by_op {
        println!("crash points: operation {op}: {n}");
    }
    let levels: Vec<String> = by_level.iter().map(|(l, n)| format!("{l} {n}")).collect();
    let failures: usize = tallies.iter().map(|t| t.failures.len()).sum();
    let transient: usize = tallies.iter().map(|t| t.transient).sum();
    println!(
        "crash points: {total} explored in {} cases ({}), and {transient} transient faults; {failures} failing; in {:.1} s",
        cases.len(),
        levels.join(", "),
        started.elapsed().as_secs_f64()
    );
    let mut sum = LeftoverTotals::default();
    for (case, t) in cases.iter().zip(tallies).filter(|(c, _)| c.level == Level::Files) {
        let l = t.leftovers;
        println!(
            "crash points: leftovers of {:<34} at death: temps at {:>3} points, locks at {:>3}; \
             after the next writer: {:>3} temps, {:>3} locks of never-published files",
            case.name(),
            l.died_with_temps,
            l.died_with_locks,
            l.temps_after_next,
            l.orphan_locks
        );
        sum.died_with_temps += l.died_with_temps;
        sum.died_with_locks += l.died_with_locks;
        sum.temps_after_next += l.temps_after_next;
        sum.orphan_locks += l.orphan_locks;
    }
    println!(
        "crash points: leftovers at the moment of death: temporary files at {} points, lock files at {}; \
         after the next writer: {} temporary files ({}), {} lock files of never-published files, \
         no lock file of a file written again",
        sum.died_with_temps,
        sum.died_with_locks,
        sum.temps_after_next,
        if config.require_temp_cleanup { "required to be 0" } else { "not required to be 0" },
        sum.orphan_locks,
    );
    for (case, t) in cases.iter().zip(tallies) {
        for f in t.failures.iter().take(8) {
            eprintln!("FAIL {}: {f}", case.name());
        }
        if t.failures.len() > 8 {
            eprintln!("FAIL {}: ... and {} more", case.name(), t.failures.len() - 8);
        }
    }
    if total < config.points {
        eprintln!("FAIL: only {total} crash points explored, {} wanted", config.points);
    }
}

/// Explores the canary (a rewrite that is not atomic, promised as if it were) and fails
/// unless the checks catch it; its points are not counted.
fn canary(base: &Path, dead_pid: u32, config: &Config) -> Result<()> {
    let case = Case {
        op: "canary",
        variant: "non-atomic rewrite".into(),
        level: Level::Memory,
        durability: session::store::Durability::Fsync,
        run: Box::new(scenarios::canary),
        transient: false,
    };
    let mut tally = Tally::default();
    explore_case(&case, 0, base, dead_pid, config, &mut tally)?;
    if tally.points == 0 || tally.failures.len() != tally.torn {
        return Err(format!(
            "the checks are blind: a non-atomic rewrite failed at {} of {} crash points, not at its {} torn writes: {:?}",
            tally.failures.len(),
            tally.points,
            tally.torn,
            tally.failures
        )
        .into());
    }
    println!(
        "crash points: canary (non-atomic rewrite promised as atomic) caught at {} of {} crash points",
        tally.failures.len(),
        tally.points
    );
    Ok(())
}

/// Returns the pid of a process that has exited and been reaped.
fn dead_pid() -> Result<u32> {
    let mut child = std::process::Command::new(std::env::current_exe()?).env(EXIT_ENV, "1").spawn()?;
    let pid = child.id();
    child.wait()?;
    Ok(pid)
}

/// Explores every crash point of `case` at `size`, counting them in `tally`.
fn explore_case(
    case: &Case,
    size: usize,
    base: &Path,
    dead_pid: u32,
    config: &Config,
    tally: &mut Tally,
) -> Result<()> {
    let trace = match count_boundaries(case, size, base) {
        Ok(t) => t,
        Err(e) => {
            tally.failures.push(format!("size {size}, without a crash: {e}"));
            return Ok(());
        }
    };
    tally.sizes += 1;
    tally.boundaries += trace.len();
    for (i, boundary) in trace.iter().enumerate() {
        let k = i + 1;
        let mut modes: Vec<Mode> = vec![Mode::Death(CrashKind::Before)];
        if case.level == Level::Memory && boundary.can_tear() {
            modes.push(Mode::Death(CrashKind::Torn));
        }
        if case.transient {
            modes.push(Mode::Transient);
        }
        for mode in modes {
            let result = match mode {
                Mode::Death(kind) => {
                    tally.points += 1;
                    tally.torn += usize::from(kind == CrashKind::Torn);
                    explore_point(case, size, k, kind, boundary, base, dead_pid, config, &mut tally.leftovers)
                }
                Mode::Transient => {
                    tally.transient += 1;
                    explore_transient(case, size, k, boundary, base)
                }
            };
            let Err(e) = result else { continue };
            let what = match mode {
                Mode::Death(kind) => format!("death ({kind:?})"),
                Mode::Transient => "transient fault".to_owned(),
            };
            let failure = format!("size {size}, {what} at boundary {k} of {} ({}): {e}", trace.len(), boundary.op);
            tally.failures.push(failure);
        }
    }
    Ok(())
}

/// How a point stops the operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// The process dies there.
    Death(CrashKind),
    /// The call fails once; the process lives on.
    Transient,
}

/// Runs the case on a new rig, `arm` setting its fault plan where the operation begins;
/// returns the rig and what the run promised. A panic is an error.
fn run(case: &Case, size: usize, base: &Path, arm: impl Fn(&Faults)) -> Result<(Rig, Promises)> {
    let rig = Rig::new(case.level, case.durability, base)?;
    let mut promises = Promises::default();
    let mut armed = || arm(&rig.faults);
    match std::panic::catch_unwind(AssertUnwindSafe(|| (case.run)(&rig, &mut promises, size, &mut armed))) {
        Ok(result) => result?,
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            return Err(format!("panicked: {message}").into());
        }
    }
    Ok((rig, promises))
}

/// Runs the case once without a crash and returns the boundaries it passes; checks that
/// what it acknowledged is there and nothing is left behind.
fn count_boundaries(case: &Case, size: usize, base: &Path) -> Result<Vec<Boundary>> {
    let (rig, promises) = run(case, size, base, Faults::record_boundaries)?;
    let trace = rig.faults.boundaries();
    if trace.is_empty() {
        return Err("the operation passed no boundary".into());
    }
    let phase = match case.level {
        Level::Memory => Phase::Crash,
        Level::Files => Phase::ErrorPath,
    };
    promise::check(&rig.live(), &promises, phase)?;
    if case.level == Level::Memory {
        rig.power_loss();
        promise::check(&rig.live(), &promises, Phase::PowerLoss)?;
    }
    Ok(trace)
}

/// Runs the case with a death at boundary `k` and checks what it leaves.
#[allow(clippy::too_many_arguments)] // one call site; a struct would only rename them
fn explore_point(
    case: &Case,
    size: usize,
    k: usize,
    kind: CrashKind,
    counted: &Boundary,
    base: &Path,
    dead_pid: u32,
    config: &Config,
    leftovers: &mut LeftoverTotals,
) -> Result<()> {
    let (rig, promises) = run(case, size, base, |faults| faults.crash_at(k, kind))?;
    let fired = rig.faults.crashed().ok_or("not reached: the operation passed fewer boundaries than when counted")?;
    if fired.op != counted.op {
        return Err(format!("boundary {k} was {counted} when counted, now {fired}").into());
    }
    let at = |e: Error| -> Error { format!("{e} (died at {fired})").into() };
    check_live(&rig, &promises, &at)?;
    if case.level == Level::Memory {
        return Ok(());
    }
    let died = rig.died()?.ok_or("no copy of the files at the moment of death")?;
    // Before anything reads the copy: its lock records name the dead writer.
    let files = died.files()?;
    leftovers.died_with_temps += usize::from(files.iter().any(|p| is_temp(p)));
    leftovers.died_with_locks += usize::from(files.iter().any(|p| is_lock(p)));
    bury_own_locks(&died, dead_pid)?;
    checked(&died, &promises, Phase::Died).map_err(at)?;
    let after = next_writers(&died, &promises).map_err(|e| at(format!("{}: {e}", Phase::Died.name()).into()))?;
    leftovers.temps_after_next += after.temps;
    leftovers.orphan_locks += after.locks;
    if after.locks > 0 {
        let locks: Vec<_> = died.files()?.into_iter().filter(|p| is_lock(p)).collect();
        return Err(format!("lock files of the dead writer survive the next write: {locks:?}").into());
    }
    if config.require_temp_cleanup && after.temps > 0 {
        let temps: Vec<_> = died.files()?.into_iter().filter(|p| is_temp(p)).collect();
        return Err(format!("temporary files of the dead writer survive the next write: {temps:?}").into());
    }
    Ok(())
}

/// Runs the case with a transient fault at boundary `k` (the process lives on) and checks
/// that nothing acknowledged is lost, nothing is left behind, and the session heals.
fn explore_transient(case: &Case, size: usize, k: usize, counted: &Boundary, base: &Path) -> Result<()> {
    let (rig, promises) = run(case, size, base, |faults| faults.fail_at(k))?;
    let failed = rig.faults.failed().ok_or("not reached: the operation passed fewer boundaries than when counted")?;
    if failed.op != counted.op {
        return Err(format!("boundary {k} was {counted} when counted, now {failed}").into());
    }
    let at = |e: Error| -> Error { format!("{e} (failed once at {failed})").into() };
    if let Some(stuck) = &promises.stuck {
        return Err(at(stuck.clone().into()));
    }
    check_live(&rig, &promises, &at)
}

/// Checks the state a run left: in memory after the crash and after a power loss; on
/// files on the error path, where a fresh writer then writes.
fn check_live(rig: &Rig, promises: &Promises, at: &dyn Fn(Error) -> Error) -> Result<()> {
    if rig.level == Level::Memory {
        checked(&rig.live(), promises, Phase::Crash).map_err(at)?;
        rig.power_loss();
        checked(&rig.live_in_place(), promises, Phase::PowerLoss).map_err(at)?;
    } else {
        checked(&rig.live(), promises, Phase::ErrorPath).map_err(at)?;
        next_writers(&rig.live(), promises).map_err(|e| at(format!("{}: {e}", Phase::ErrorPath.name()).into()))?;
    }
    Ok(())
}

fn checked(view: &View, promises: &Promises, phase: Phase) -> Result<()> {
    promise::check(view, promises, phase).map_err(|e| format!("{}: {e}", phase.name()).into())
}

/// Has a fresh writer write every file of the view once (a session gets an entry, a raw
/// file a new version, a blob is stored again) and checks that it succeeds and leaves no
/// lock file beside what it wrote; returns the temporary and lock files still there.
fn next_writers(view: &View, promises: &Promises) -> Result<Leftovers> {
    let mut sessions: Vec<(session::Dialect, std::path::PathBuf)> =
        promises.sessions.iter().map(|s| (s.dialect, view.path(&s.path))).collect();
    // A job's session, wherever it is now; where it is not (moved away, deleted), the
    // next writer of that folder is the next session written there.
    for j in &promises.jobs {
        for p in &j.paths {
            sessions.push((j.dialect, view.path(p)));
        }
    }
    let files = view.files()?;
    for n in &promises.new_files {
        let dir = view.path(&n.dir);
        for f in &files {
            if is_session_in(f, &dir) && !sessions.iter().any(|(_, p)| p == f) {
                sessions.push((n.dialect, f.clone()));
            }
        }
    }
    // Where a file was never published, the next writer is the next session written in
    // its directory (nobody writes that file again).
    let mut fresh_dirs: Vec<(session::Dialect, std::path::PathBuf)> = Vec::new();
    for (dialect, path) in &sessions {
        if !view.storage.exists(path)?
            && let Some(dir) = path.parent()
        {
            fresh_dirs.push((*dialect, dir.to_path_buf()));
        }
    }
    for n in &promises.new_files {
        let dir = view.path(&n.dir);
        if !sessions.iter().any(|(_, p)| p.parent() == Some(dir.as_path())) {
            fresh_dirs.push((n.dialect, dir));
        }
    }
    // The blob store's directory: its next write is the next image a session stores.
    if files.iter().any(|f| f.parent().and_then(|p| p.file_name()).is_some_and(|n| n == "blobs")) {
        view.blobs.put(b"the next writer's image", Some("image/png"))?;
    }
    for (dialect, dir) in &fresh_dirs {
        let mut m = SessionManager::create(*dialect, "/next-writer", dir, view.env())?;
        m.append_message_json(serde_json::json!({"role": "user", "content": "next", "timestamp": 1}))?;
        m.append_message_json(
            serde_json::json!({"role": "assistant", "content": [{"type": "text", "text": "ok"}], "timestamp": 2}),
        )?;
        m.close()?;
    }
    for (dialect, path) in &sessions {
        if !view.storage.exists(path)? {
            continue;
        }
        let mut m = SessionManager::open(*dialect, path, view.env())
            .map_err(|e| format!("the next writer cannot open {}: {e}", path.display()))?;
        let id = m
            .append_custom_entry("next-writer", None)
            .map_err(|e| format!("the next writer cannot append to {}: {e}", path.display()))?;
        m.close()?;
        let again = SessionManager::open(*dialect, path, view.env())?;
        if again.tree().get(&id).is_none() {
            return Err(format!("the next writer's entry is not in {}", path.display()).into());
        }
        if view.storage.exists(&lock_of(path))? {
            return Err(format!("{} is still locked after the next write", path.display()).into());
        }
    }
    // A job whose next writer is the same job run again.
    for again in &promises.reruns {
        (again.0)(view).map_err(|e| format!("the job run again fails: {e}"))?;
    }
    for r in &promises.raws {
        let path = view.path(&r.path);
        if view.storage.exists(&path)? {
            view.storage
                .write_atomic(&path, b"{\"next\":true}\n", ExpectedSize::Any)
                .map_err(|e| format!("the next writer cannot replace {}: {e}", path.display()))?;
            if view.storage.exists(&lock_of(&path))? {
                return Err(format!("{} is still locked after the next write", path.display()).into());
            }
        }
    }
    for b in &promises.blobs {
        if let Some((bytes, mime)) = b.attempted.first() {
            view.blobs.put(bytes, mime.as_deref()).map_err(|e| format!("the next blob put fails: {e}"))?;
        }
    }
    let files = view.files()?;
    Ok(Leftovers {
        temps: files.iter().filter(|p| is_temp(p)).count(),
        locks: files.iter().filter(|p| is_lock(p)).count(),
    })
}
