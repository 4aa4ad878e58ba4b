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
//! ([`WriterSettings`]); a process that dies loses what it had not
//! flushed, which is why [`super::Stats::record_many`] stays available.

use crate::engine::series::SeriesWriter;
use crate::error::Result;
use crate::idempotency::{Answer, Claim, Idempotency};
use crate::stats::{Observation, StatRules};

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
pub type StatsWriter = SeriesWriter<StatRules>;

impl SeriesWriter<StatRules> {
    /// Records `value` for `name` at `at` (default now), waiting for room
    /// when full and so configured. A value standing for several
    /// observations (a statsd sample rate `|@0.1` is weight 10) is
    /// `take(&Observation::new(name, value).weight(10))`.
    pub async fn record(&self, name: &str, value: f64, at: Option<f64>) -> Result<()> {
        self.take(&observation(name, value, at)).await
    }

    /// Records without ever waiting: fails with
    /// [`crate::Error::Overloaded`] when full (with a weight:
    /// [`SeriesWriter::try_take`]).
    pub fn try_record(&self, name: &str, value: f64, at: Option<f64>) -> Result<()> {
        self.try_take(&observation(name, value, at))
    }

    /// Records a batch, all or nothing: every observation is validated,
    /// and room for the whole batch is taken, before any is merged.
    pub async fn record_many(&self, observations: &[Observation]) -> Result<()> {
        self.take_many(observations).await
    }

    /// [`StatsWriter::record_many`] for a keyed request
    /// ([`SeriesWriter::take_many_claimed`]).
    pub async fn record_many_claimed(
        &self,
        idempotency: &Idempotency,
        key: &str,
        fingerprint: &str,
        observations: &[Observation],
        answer: &Answer,
    ) -> Result<Claim> {
        self.take_many_claimed(idempotency, key, fingerprint, observations, answer)
            .await
    }
}

/// One observation of `value` at `at`.
fn observation(name: &str, value: f64, at: Option<f64>) -> Observation {
    Observation {
        at,
        ..Observation::new(name, value)
    }
}
