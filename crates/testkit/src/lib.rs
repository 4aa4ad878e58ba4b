//! Test harness for Tally: real server processes on free loopback ports.
//!
//! Owns the lifecycle of the servers Tally's tests talk to: a `redis-server`
//! per test ([`RedisServer`]), a whole Redis Cluster ([`RedisCluster`]:
//! masters and replicas joined by `redis-cli --cluster create`, with helpers
//! to migrate a slot step by step and to fail a master over) and a PostgreSQL
//! server ([`PostgresServer`]), each process in its own temporary directory,
//! started on a free port and stopped when the handle is dropped. The
//! reference Graphite ([`graphite_web`]) is graphite-web 1.1.10 on whisper
//! files of a test's making ([`GraphiteWeb`], [`WhisperData`]) and carbon
//! 1.1.10's own line receiver ([`carbon_reference_parse`]), from a Python
//! virtual environment `scripts/test` installs; [`http`] is a minimal HTTP
//! client that sends a request's exact bytes, to it and to Tally alike. The
//! reference statsd ([`statsd`]) is Etsy's daemon from npm, which the statsd
//! bench races and the statsd parser is compared with: its console backend
//! read back, and a listener capturing what its Graphite backend writes.
//!
//! Nothing here mocks anything. When a server binary is missing, the harness
//! panics with a message saying how to install it (`scripts/test` installs it
//! from Debian packages, and the Python packages from PyPI), so a test never
//! passes or skips silently.

#![deny(missing_docs)]

pub mod cluster;
pub mod graphite_web;
pub mod http;
mod postgres;
mod redis;
pub mod resp;
pub mod statsd;

pub use cluster::{ClusterOptions, RedisCluster, key_slot};
pub use graphite_web::{
    CarbonOutcome, GraphiteWeb, GraphiteWebOptions, WhisperData, WhisperSeries,
    carbon_reference_datagrams, carbon_reference_parse, graphite_venv, install_graphite_venv,
};
pub use postgres::PostgresServer;
pub use redis::{RedisOptions, RedisServer};
pub use statsd::{Flush, Flushed, GraphiteCapture, STATSD_VERSION, StatsdDaemon, StatsdOptions};

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

/// The standard normal distribution function Φ(x) (erfc by Numerical
/// Recipes' Chebyshev fit, relative error < 1.2e-7): what a test or bench
/// needs to lay out lognormal values by their expected bucket counts.
pub fn normal_cdf(x: f64) -> f64 {
    let z = (-x / std::f64::consts::SQRT_2).abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    0.5 * if -x >= 0.0 { erfc } else { 2.0 - erfc }
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
