//! Tally: exact, fast counters and statistics on Redis or an embedded store.
//!
//! The foundation is [`counters`]: named counters counted at several
//! precisions (1 s, 5 s, 1 min, ... 1 day) with a bounded number of samples
//! each, as in "Redis in Action" 5.2, cleaned by a background [`Cleaner`].
//! They run on Redis (standalone or Cluster, in the book's key layout or a
//! cluster-ready one) or on an embedded SQLite database, behind one API.
//!
//! ```no_run
//! # async fn demo() -> tally::Result<()> {
//! let tally = tally::Tally::open("redis://127.0.0.1/").await?;
//!
//! tally.counters().incr("hits", 1).await?;                // exact: written before it returns
//! let per_minute = tally.counters().get("hits", 60).await?; // [(slice start, count)], oldest first
//! tally.writer().add("hits", 1, None).await?;              // merged in memory, flushed every 200 ms
//! tally.shutdown().await;                                  // flushes what is left
//! # Ok(())
//! # }
//! ```
//!
//! The same line opens a cluster (`redis+cluster://h1:7000,h2:7001`), a data
//! directory (`/var/lib/app/tally`) or memory (`sqlite::memory:`): see
//! [`open::target`]. [`Tally`] hands out every service with defaults:
//! [`Tally::counters`], [`Tally::writer`] (the [`CounterWriter`]),
//! [`Tally::cleaner`], [`Tally::stats`], [`Tally::stats_writer`],
//! [`Tally::gauges`], [`Tally::gauges_writer`],
//! [`Tally::sets`], [`Tally::sets_writer`],
//! [`Tally::tsdb`], [`Tally::daily`],
//! [`Tally::buffers`], [`Tally::limiter`], [`Tally::locks`];
//! [`Tally::builder`] changes the settings (key prefix, precisions, rollups,
//! retention, clock...). Each service's page has an example.
//!
//! # Layout
//!
//! `ARCHITECTURE.md` at the repository root draws the same map with one
//! write and one read traced through every surface (library, CLI, HTTP,
//! statsd, dashboard), service, the engine and the stores.
//!
//! - [`open`]: [`Tally`], every service opened on one target in one line,
//!   and its builder; [`open::target`] reads the target.
//! - [`clock`]: time; the only module that reads the system clock.
//! - [`error`]: the crate's one error type.
//! - [`name`]: validated names.
//! - [`engine`]: the slice engine every value kept per (series, precision,
//!   slice) runs on: the kinds of value ([`engine::kinds`]: sums, distinct
//!   values with the one HyperLogLog, most frequent items with the one
//!   Space-Saving summary, statistics with a quantile sketch, gauges) and
//!   the [`engine::Value`] enum over them, slice math
//!   ([`engine::precision`]), the write path ([`engine::plan`]: validation,
//!   one merged delta per slice, all or nothing), the aggregating writer
//!   ([`engine::writer`]: in-process merging, exactly-once flushes), range
//!   reads ([`engine::read`]), the [`engine::SliceStore`] trait that each
//!   store implements once per key layout, and the one service of named
//!   series every kind is ([`engine::series`]: counters, statistics,
//!   gauges and sets are `SeriesService<their rules>` with their own reads),
//!   the cleaner ([`engine::cleaner`]) and keyed write ids
//!   ([`engine::keyed`]).
//! - [`counters`]: counters, the engine's sum kind: their rules, settings,
//!   fast paths (the exact increment, plain sum reads) and the writer
//!   (the engine's writer over the counters' space).
//! - [`stats`]: statistics over the engine's `stats` space: count, sum,
//!   min, max, mean, standard deviation and quantiles per slice, ranges,
//!   merged stats, rankings; settings, the pure read views
//!   ([`stats::summary`]) and the aggregating writer ([`StatsWriter`]).
//! - [`tsdb`]: the time-series store with rollups over the engine's kinds
//!   (counts are sums, distinct counts the distinct kind, most frequent
//!   items the top kind), validated and planned with the engine's write
//!   path; its pure rollup math (Sentry's rollup choice) and its store
//!   trait (one write and one read for every kind, in Sentry's layout).
//! - [`gauges`]: gauges over the engine's `gauges` space: set and adjust
//!   (in order), last/min/max per slice, the current value kept by the
//!   store; the aggregating writer ([`GaugesWriter`]).
//! - [`sets`]: distinct counts per slice over the engine's `sets` space
//!   (members added, counted with Redis's HyperLogLog estimator, unions
//!   over ranges and sets); the aggregating writer ([`SetsWriter`]).
//! - [`graphite`]: Tally's series as the Graphite API sees them: the
//!   namespace (Tally's own or statsd's names), each kind's leaves, and the
//!   store the render and find API (the `tally_graphite` crate) reads.
//! - [`daily`]: per-entity daily statistics (views per day, last N days,
//!   running all-time total), its pure date math and store trait (the
//!   article's hashes on Redis), sharing the engine's validation.
//! - [`buffers`]: buffered counters flushed to SQL exactly once (Sentry's
//!   buffers): the service, row encodings, store trait, flusher, and the
//!   PostgreSQL (feature `postgres`) and SQLite (feature `sqlite`) sinks.
//! - [`limits`]: rate limiters (fixed window, sliding window counter, GCRA):
//!   pure algorithms, the limiter service, its store trait, and (feature
//!   `middleware`) a tower layer for axum apps.
//! - [`locks`]: locks with a lease, holder-only release and extend, a
//!   guard, blocking acquire with backoff, and fencing tokens.
//! - [`idempotency`]: idempotent writes: the `Idempotency-Key` rules,
//!   request fingerprints, the claim / answer protocol over its store
//!   trait, and the write id a key stands for (keyed counter writes).
//! - [`migrate`]: moving every engine space's series, the daily statistics
//!   and the time series from one opened store into another, resumable and
//!   exactly once (`tally migrate`).
//! - [`random`]: unique ids and jitter from the OS generator.
//! - [`statsd`]: the statsd line protocol with DogStatsD's additions
//!   (counters, timers, histograms, distributions, gauges, sets; several
//!   samples per line, packed values, times, tags), a pure parser.
//! - [`carbon`]: carbon's plaintext protocol (`path value timestamp`
//!   lines, gauge sets at that time), a pure parser and the framing of its
//!   TCP lines and UDP datagrams.
//! - [`metrics`]: a latency histogram and the Prometheus text format.
//! - `requests` (feature `middleware`): a tower layer counting an axum
//!   app's requests into counters.
//! - `server` (feature `server`): the HTTP API, dashboard, `/metrics`, and
//!   the statsd and carbon listeners behind `tally serve`.
//! - [`backend`]: SQLite ([`backend::sqlite`], feature `sqlite`) and Redis
//!   ([`backend::redis`], feature `redis`, with the key layouts and the Lua
//!   scripts; both features are default): the engine's store
//!   (`SqliteSliceStore`, `RedisSliceStore`: every space, counters included)
//!   and a store per other feature (tsdb and daily keep their own layouts).
//! - `sqlite` (feature `sqlite`): the SQLite database handle (connections
//!   and transactions) under the SQLite backend's stores and the buffers'
//!   SQLite sink.
//!
//! Outside this crate: the `tally` binary (`src/`: the CLI, a thin shim over
//! this library; `tally serve` runs the `server` module's HTTP API and statsd
//! and carbon listeners) and the dashboard (`dashboard/`, over the HTTP
//! API).

#![deny(missing_docs)]

/// Logs that one round of a background job is done (a flusher tick, a
/// cleaner pass): the `lead` values as they are, then the named fields of
/// its report, then the milliseconds since `started`.
macro_rules! log_round_done {
    ($message:literal, $started:expr, [$($lead:ident),*], $report:expr => $($field:ident),+) => {
        tracing::info!(
            $($lead,)*
            $($field = $report.$field,)+
            elapsed_ms = $started.elapsed().as_millis() as u64,
            $message
        )
    };
}

pub mod backend;
pub mod buffers;
pub mod carbon;
pub mod clock;
pub mod counters;
pub mod daily;
pub mod engine;
pub mod error;
pub mod gauges;
pub mod graphite;
pub mod idempotency;
pub mod limits;
pub mod locks;
pub mod metrics;
pub mod migrate;
pub mod name;
pub mod open;
pub mod random;
#[cfg(feature = "middleware")]
pub mod requests;
#[cfg(feature = "server")]
pub mod server;
pub mod sets;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod stats;
pub mod statsd;
pub mod tsdb;

pub use backend::{Backend, BackendConfig, ReplicationWait};
pub use buffers::{Buffers, Flusher, FlusherSettings, Update};
pub use clock::{Clock, ManualClock, SystemClock, Timestamp};
pub use counters::{CounterSettings, CounterWriter, Counters, Increment, Series};
pub use daily::{DailySettings, DailyStats, DailyStore, DailyTotal, Day, DayCount, View};
pub use engine::{Cleaner, CleanerSettings, Page, Sample, WriterSettings};
pub use error::{Error, Result};
pub use gauges::{GaugeOp, Gauges, GaugesWriter};
pub use idempotency::Idempotency;
pub use limits::{Algorithm, Decision, FailMode, Limit, Limiter};
pub use locks::{Acquisition, Lease, LockGuard, Locks};
pub use name::Name;
pub use open::{Tally, TallyBuilder};
pub use sets::{SetAdd, Sets, SetsWriter};
pub use stats::{Observation, Stats, StatsSettings, StatsWriter};
pub use tsdb::{TsIncrement, TsQuery, Tsdb, TsdbSettings, TsdbStore};
