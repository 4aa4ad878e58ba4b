//! What starting, waiting for and stopping a server process needs: a free
//! port, a binary found on `PATH`, the patience a test has, polling until a
//! condition holds, runs retried until one is in time, and a stop that
//! escalates to SIGKILL. The crate root re-exports the public ones.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
}
