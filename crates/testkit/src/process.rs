//! What starting, waiting for and stopping a server process needs: a free
//! port, a binary found on `PATH`, the patience a test has, polling until a
//! condition holds, runs retried until one is in time or on one UTC day,
//! and a stop that escalates to SIGKILL. The crate root re-exports the
//! public ones.

use std::net::TcpListener;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A port that was free on 127.0.0.1 a moment ago.
///
/// The listener is closed before the port is returned, so another process may
/// take it in between; servers are started with a retry for that reason.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

/// Finds `name` on `PATH` (and in `extra_dirs`), or panics with `install_hint`.
pub fn require_binary(name: &str, extra_dirs: &[&str], install_hint: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path).chain(extra_dirs.iter().map(PathBuf::from));
    for dir in dirs {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "`{name}` was not found on PATH. {install_hint} \
         (scripts/test installs everything the suite needs on Debian)."
    );
}

/// How long a test waits for something that must happen (a flush, a
/// process's start or exit, a datagram handled) before it fails. Long: CI
/// shares two cores with Redis, PostgreSQL and Chromium, and a stall of
/// seconds is no failure. A condition met ends the wait at once, so only a
/// failing run waits this out.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Polls `ready` every 10 ms until it returns true or `timeout` passes.
pub fn wait_until(timeout: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if ready() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    ready()
}

/// How many runs [`in_time`] and [`in_time_blocking`] try before they fail.
const IN_TIME_RUNS: u32 = 20;

/// Runs `attempt` (given its run's number, from 0) until a run takes less
/// than `window` of wall-clock time, and returns that run's result.
///
/// For a check of what a store holds before the store's own clock expires
/// it (Redis expires keys and leases by the wall clock): on a machine that
/// stalls past the expiry in the middle of the check, the data is gone and
/// the check proves nothing. A late run's result is thrown away and the
/// next run starts afresh, so each run writes under names of its own (made
/// from its number). Panics when none of twenty runs is in time.
pub async fn in_time<T, F: Future<Output = T>>(
    window: Duration,
    mut attempt: impl FnMut(u32) -> F,
) -> T {
    for run in 0..IN_TIME_RUNS {
        let started = Instant::now();
        let out = attempt(run).await;
        if started.elapsed() < window {
            return out;
        }
    }
    panic!("no run of {IN_TIME_RUNS} took less than {window:?}");
}

/// [`in_time`] for a blocking `attempt` (one running other processes).
pub fn in_time_blocking<T>(window: Duration, mut attempt: impl FnMut(u32) -> T) -> T {
    for run in 0..IN_TIME_RUNS {
        let started = Instant::now();
        let out = attempt(run);
        if started.elapsed() < window {
            return out;
        }
    }
    panic!("no run of {IN_TIME_RUNS} took less than {window:?}");
}

/// Runs `attempt` until a run starts and ends on one UTC day, and returns
/// that run's result (or goes on with that run's panic).
///
/// For a test whose expectations name "today" by the wall clock of a
/// process it does not own (`tally serve`'s or the CLI's today): a run
/// that midnight fell in is thrown away, whatever it found (a panic too),
/// and the next run starts afresh, so `attempt` makes its own servers and
/// data. Nothing waits for midnight to pass, and a run takes far less than
/// a day, so the second run is on one day.
pub fn on_one_day<T>(attempt: impl FnMut() -> T) -> T {
    on_one_day_of(utc_day, attempt)
}

/// How many runs [`on_one_day`] tries before it fails.
const ONE_DAY_RUNS: u32 = 3;

/// [`on_one_day`], with `day` telling the day.
fn on_one_day_of<T>(mut day: impl FnMut() -> u64, mut attempt: impl FnMut() -> T) -> T {
    for _ in 0..ONE_DAY_RUNS {
        let started = day();
        let out = catch_unwind(AssertUnwindSafe(&mut attempt));
        if day() == started {
            return out.unwrap_or_else(|panic| resume_unwind(panic));
        }
        eprintln!("the UTC day turned during the run: it runs again");
    }
    panic!("the UTC day turned during each of {ONE_DAY_RUNS} runs");
}

/// The UTC day of the system's clock, in days since 1970-01-01.
fn utc_day() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
        / 86_400
}

/// Stops a server: `signal` (through `kill`, e.g. `"-QUIT"`, a server's
/// quick shutdown) and, if it has not exited within `grace`, SIGKILL.
pub(crate) fn stop_child(child: &mut Child, signal: &str, grace: Duration) {
    let _ = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .stderr(Stdio::null())
        .status();
    if !wait_until(grace, || matches!(child.try_wait(), Ok(Some(_)))) {
        let _ = child.kill();
    }
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A late run's result is thrown away and the next run's is returned.
    #[test]
    fn in_time_runs_again_after_a_late_run() {
        let out = in_time_blocking(Duration::from_millis(500), |run| {
            if run == 0 {
                std::thread::sleep(Duration::from_millis(600));
            }
            run
        });
        assert_eq!(out, 1);
    }

    /// A run the day turned in is run again, even one that panicked; a run
    /// on one day keeps its outcome, its panic too.
    #[test]
    fn on_one_day_runs_again_only_across_midnight() {
        // Days read at each run's start and end: 7 → 8, then 8 → 8.
        let mut days = [7, 8, 8, 8].into_iter();
        let mut runs = 0;
        let out = on_one_day_of(
            || days.next().unwrap(),
            || {
                runs += 1;
                assert!(runs > 1, "the first run fails, across midnight");
                runs
            },
        );
        assert_eq!(out, 2);
        let kept =
            catch_unwind(|| on_one_day_of(|| 8, || -> u32 { panic!("a failure on one day") }));
        assert!(kept.is_err(), "a failing run on one day fails");
    }
}
