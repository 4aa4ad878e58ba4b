//! The statistics' aggregating writer: observations merged in process,
//! written in batches, each exactly once.
//!
//! [`StatsWriter`] is the slice engine's aggregating writer
//! ([`crate::engine::writer`]) over the stats space: `record(name, value,
//! at)` merges one observation into the pending (stat, second) statistic
//! (counts and sums add, the sketch gains one bucket count: an index and
//! an add), and each flush writes one merged statistic per (stat,
//! precision, slice), one round trip per lane (per node on a cluster), each
//! chunk with its own write id so a retried chunk is applied once. Its
//! guarantees, bounds and settings are the engine writer's
//! ([`AggregatorSettings`]); a process that dies loses what it had not
//! flushed, which is why [`super::Stats::record_many`] stays available.

use crate::counters::{AggregatorSettings, AggregatorStats};
use crate::engine::Writer;
use crate::engine::plan::Item;
use crate::error::Result;
use crate::idempotency::{Answer, Claim, Idempotency};
use crate::stats::{Observation, Stats};

/// A handle on an aggregating writer of statistics. Cheap to clone; the
/// flusher stops (after a final flush) when [`StatsWriter::shutdown`] is
/// called or the last handle is dropped.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tally::Result<()> {
/// let tally = tally::Tally::open("sqlite::memory:").await?;
/// let writer = tally.stats_writer(); // started on first use
///
/// for ms in 1..=1000 {
///     writer.record("latency:/home", ms as f64, None).await?; // merged in memory
/// }
/// writer.flush().await?; // written now (else within the flush interval)
/// let day = tally.stats().get("latency:/home", 86_400, &[0.5]).await?;
/// assert_eq!(day[0].summary.count, 1000);
///
/// tally.shutdown().await; // flushes what is left and stops the writers
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct StatsWriter {
    stats: Stats,
    writer: Writer,
}

impl std::fmt::Debug for StatsWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatsWriter")
            .field("settings", self.writer.settings())
            .field("stats", &self.stats())
            .finish()
    }
}

impl StatsWriter {
    /// Starts a writer into `stats`' store; spawns its flusher on the
    /// current tokio runtime.
    pub fn start(stats: Stats, settings: AggregatorSettings) -> Result<Self> {
        let writer = Writer::start(
            stats.sink(),
            stats.space().clone(),
            stats.clock().clone(),
            settings,
        )?;
        Ok(StatsWriter { stats, writer })
    }

    /// The statistics written to.
    pub fn service(&self) -> &Stats {
        &self.stats
    }

    /// Records `value` for `name` at `at` (default now), waiting for room
    /// when full and so configured.
    pub async fn record(&self, name: &str, value: f64, at: Option<f64>) -> Result<()> {
        self.record_weighted(name, value, 1, at).await
    }

    /// Records `value` standing for `weight` observations (a statsd sample
    /// rate `|@0.1` is weight 10).
    pub async fn record_weighted(
        &self,
        name: &str,
        value: f64,
        weight: u64,
        at: Option<f64>,
    ) -> Result<()> {
        let (_, _, delta) = self.stats.validate(
            &Observation::new(name, value).weight(weight),
            self.stats.clock().now(),
        )?;
        self.writer.add(name, delta, at).await
    }

    /// Records without ever waiting: fails with
    /// [`crate::Error::Overloaded`] when full.
    pub fn try_record(&self, name: &str, value: f64, at: Option<f64>) -> Result<()> {
        self.try_record_weighted(name, value, 1, at)
    }

    /// [`StatsWriter::try_record`] of a value standing for `weight`
    /// observations (the statsd listener's path: it never waits).
    pub fn try_record_weighted(
        &self,
        name: &str,
        value: f64,
        weight: u64,
        at: Option<f64>,
    ) -> Result<()> {
        let (_, _, delta) = self.stats.validate(
            &Observation::new(name, value).weight(weight),
            self.stats.clock().now(),
        )?;
        self.writer.try_add(name, delta, at)
    }

    /// Records a batch, all or nothing: every observation is validated,
    /// and room for the whole batch is taken, before any is merged.
    pub async fn record_many(&self, observations: &[Observation]) -> Result<()> {
        let items = self.items(observations)?;
        self.writer.add_many(&items).await
    }

    /// [`StatsWriter::record_many`] for a keyed request of `fingerprint`
    /// whose answer, once recorded, is `answer` (the HTTP server's): the
    /// key is claimed with the answer before the observations are handed
    /// over ([`Idempotency::add_claimed`]), so a retry is answered from
    /// the record and never recorded twice.
    pub async fn record_many_claimed(
        &self,
        idempotency: &Idempotency,
        key: &str,
        fingerprint: &str,
        observations: &[Observation],
        answer: &Answer,
    ) -> Result<Claim> {
        let items = self.items(observations)?;
        idempotency
            .add_claimed(key, fingerprint, answer, &self.writer, items)
            .await
    }

    /// Validates observations into the writer's items.
    fn items(&self, observations: &[Observation]) -> Result<Vec<Item>> {
        let now = self.stats.clock().now();
        observations
            .iter()
            .map(|o| {
                let (name, at, delta) = self.stats.validate(o, now)?;
                Ok(Item { name, at, delta })
            })
            .collect()
    }

    /// Flushes now and waits until everything recorded before this call is
    /// written (or dropped as refused).
    pub async fn flush(&self) -> Result<()> {
        self.writer.flush().await
    }

    /// Stops taking observations, flushes what is pending (retrying an
    /// unavailable backend for a while) and stops the flusher.
    pub async fn shutdown(&self) {
        self.writer.shutdown().await
    }

    /// Running figures (`accepted` and `written` count observations).
    pub fn stats(&self) -> AggregatorStats {
        self.writer.stats()
    }
}
