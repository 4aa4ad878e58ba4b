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
mod process;
mod redis;
pub mod resp;
pub mod statsd;

pub use cluster::{ClusterOptions, RedisCluster, key_slot};
pub use graphite_web::{
    CarbonOutcome, GraphiteWeb, GraphiteWebOptions, WhisperData, WhisperSeries,
    carbon_reference_datagrams, carbon_reference_parse, graphite_venv, install_graphite_venv,
};
pub use postgres::PostgresServer;
pub use process::{
    PATIENCE, free_port, in_time, in_time_blocking, on_one_day, require_binary, wait_until,
};
pub use redis::{RedisOptions, RedisServer, command_calls};
pub use statsd::{Flush, Flushed, GraphiteCapture, STATSD_VERSION, StatsdDaemon, StatsdOptions};

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
