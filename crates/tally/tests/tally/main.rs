//! The library's integration tests, one test binary (`cargo nextest run -p
//! tally --all-features --test tally -E 'test(/^counters::/)'` runs one
//! module): the behaviour suites on every backend (`common`, `backends` and
//! the [`per_backend!`] macro), the HTTP server (`server`), and the Redis
//! store's own checks. The modules behind the `server` or `middleware`
//! feature are built with it.

#[macro_use]
mod common;
mod backends;

mod buffers;
#[cfg(feature = "server")]
mod carbon;
mod carbon_reference;
mod cluster;
mod counters;
mod counters_pending;
mod daily;
mod engine;
mod expiring;
mod faults;
mod gauges;
#[cfg(feature = "server")]
mod graphite;
#[cfg(feature = "server")]
mod idempotency;
mod kinds_lua;
mod limits;
mod locks;
#[cfg(feature = "middleware")]
mod middleware;
mod migrate;
mod open;
mod redis_counters;
#[cfg(feature = "server")]
mod server;
mod sets;
mod stats;
mod stats_pending;
mod stats_timeline;
mod statsd_reference;
mod tsdb;
mod tsdb_redis;
