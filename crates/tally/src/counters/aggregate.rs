//! Counters' aggregating writer: increments merged in process, written in
//! batches, each exactly once.
//!
//! [`CounterWriter`] is the slice engine's aggregating writer
//! ([`crate::engine::series::SeriesWriter`]) over the counters' space;
//! counters add their own entry points to it: `add(name, count, at)` merges a sum into the pending
//! (counter, second) entry, and flushes write one delta per (counter,
//! precision, slice), `chunk_counters` counters per call, on `lanes`
//! concurrent lanes, each chunk with its own write id so a retried chunk is
//! applied once. Its guarantees, bounds and figures are the engine
//! writer's (see its docs): while the process lives, an increment `add`
//! accepted is written exactly once; a process that dies loses what it had
//! not flushed, which is why the exact path
//! ([`super::Counters::incr_many`]) stays available.
//!
//! Sums need no path of their own in the writer: merging two sums there is
//! one inlined match and checked add, as fast as the counters-only table it
//! replaced (see docs/bench-log/ingest.md, the slice engine's before and
//! after).

use crate::counters::{Applied, CounterRules, Counters, Increment};
use crate::engine::Value;
use crate::engine::series::SeriesWriter;
use crate::error::{Error, Result};
use crate::idempotency::{self, Answer, Claim, Idempotency};

pub use crate::engine::writer::{SHUTDOWN_GRACE, WhenFull, WriterSettings, WriterStats};

/// A handle on an aggregating writer of counters. Cheap to clone; the
/// flusher stops (after a final flush) when [`CounterWriter::shutdown`] is
/// called or the last handle is dropped.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tally::Result<()> {
/// let tally = tally::Tally::open("sqlite::memory:").await?;
/// let writer = tally.writer(); // started on first use
///
/// for _ in 0..1000 {
///     writer.add("page:home", 1, None).await?; // merged in memory, no round trip
/// }
/// writer.flush().await?; // written now (else within the flush interval)
/// let per_day = tally.counters().get("page:home", 86_400).await?;
/// assert_eq!(per_day.iter().map(|s| s.count).sum::<i64>(), 1000);
///
/// tally.shutdown().await; // flushes what is left and stops the writer
/// # Ok(())
/// # }
/// ```
pub type CounterWriter = SeriesWriter<CounterRules>;

impl SeriesWriter<CounterRules> {
    /// The counters written to.
    pub fn counters(&self) -> &Counters {
        self.service()
    }

    /// Adds `count` to `name` at `at` (default now), waiting for room when
    /// full and so configured.
    pub async fn add(&self, name: &str, count: i64, at: Option<f64>) -> Result<()> {
        self.engine().add(name, Value::Sum(count), at).await
    }

    /// Adds a batch, all or nothing: every increment is validated, and room
    /// for the whole batch is taken, before any is added; if one would
    /// overflow its pending total, none is added.
    pub async fn add_many(&self, increments: &[Increment]) -> Result<()> {
        self.take_many(increments).await
    }

    /// [`CounterWriter::add_many`] with an idempotency key: the batch is added
    /// at most once per key within `idempotency`'s retention, in this
    /// process or any other sharing the store, before or after a flush.
    /// The key is claimed in the store with its answer first (one round
    /// trip), then the batch is added; a batch the writer refuses gives the
    /// key up again. Sent again with the same increments, it adds nothing
    /// and answers [`Applied::Duplicate`]; with other increments it is
    /// refused ([`crate::Error::InvalidInput`]) and adds nothing. If the
    /// process dies before a flush, the batch is lost as any unflushed
    /// increment is, and the key stays used.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> tally::Result<()> {
    /// use tally::counters::Applied;
    ///
    /// let tally = tally::Tally::open("sqlite::memory:").await?;
    /// let (writer, idem) = (tally.writer(), tally.idempotency());
    /// let visit = [tally::Increment::new("visits", 1)];
    /// assert_eq!(writer.add_many_once(&idem, "visit-42", &visit).await?, Applied::Written);
    /// writer.flush().await?;
    /// assert_eq!(writer.add_many_once(&idem, "visit-42", &visit).await?, Applied::Duplicate);
    /// let other = [tally::Increment::new("visits", 2)];
    /// assert!(writer.add_many_once(&idem, "visit-42", &other).await.unwrap_err().is_bad_input());
    /// tally.shutdown().await;
    /// assert_eq!(tally.counters().get("visits", 86_400).await?[0].count, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn add_many_once(
        &self,
        idempotency: &Idempotency,
        key: &str,
        increments: &[Increment],
    ) -> Result<Applied> {
        let body = serde_json::to_vec(increments)
            .map_err(|e| Error::InvalidInput(format!("increments: {e}")))?;
        // The type's old name: stored fingerprints must not change.
        let fingerprint = idempotency::fingerprint(&[b"Aggregator::add_many_once", &body]);
        let answer = Answer::json(202, &serde_json::json!({ "accepted": increments.len() }));
        match self
            .add_many_claimed(idempotency, key, &fingerprint, increments, &answer)
            .await?
        {
            Claim::Claimed(_) => Ok(Applied::Written),
            Claim::Done(_) => Ok(Applied::Duplicate),
            Claim::Mismatch => Err(idempotency::reused(key)),
            Claim::InProgress { retry_after_ms } => Err(Error::Overloaded(format!(
                "a request with the idempotency key {key:?} is in progress; retry in {retry_after_ms} ms"
            ))),
        }
    }

    /// The steps of [`CounterWriter::add_many_once`] for a request of any
    /// `fingerprint` whose answer, once added, is `answer` (the HTTP
    /// server's): validates every increment, claims the key with the
    /// answer, adds the batch if the claim is this call's (giving the key
    /// up if the writer refuses it), and says what the claim found.
    pub async fn add_many_claimed(
        &self,
        idempotency: &Idempotency,
        key: &str,
        fingerprint: &str,
        increments: &[Increment],
        answer: &Answer,
    ) -> Result<Claim> {
        self.take_many_claimed(idempotency, key, fingerprint, increments, answer)
            .await
    }

    /// Adds without ever waiting: fails with [`crate::Error::Overloaded`]
    /// when full.
    #[inline]
    pub fn try_add(&self, name: &str, count: i64, at: Option<f64>) -> Result<()> {
        self.engine().try_add(name, Value::Sum(count), at)
    }

    /// How long the flushes that wrote something took.
    pub fn flush_latency(&self) -> crate::metrics::HistogramSnapshot {
        self.engine().flush_latency()
    }
}
