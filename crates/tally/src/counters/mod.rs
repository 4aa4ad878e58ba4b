//! Multi-precision counters with retention ("Redis in Action" 5.2).
//!
//! [`Counters`] is the service over the slice engine's counters space (sums
//! at each precision): it validates input (names, counts, times,
//! precisions), merges a call's increments into one delta per slice with
//! the engine's plan ([`crate::engine::plan`]) and hands them to a
//! [`CounterStore`] in one round trip. [`Aggregator`] is the engine's
//! aggregating writer over the same space; [`Cleaner`] trims old slices
//! with the book's cadence. The service never talks to a backend directly;
//! stores never validate.

pub mod aggregate;
mod cleaner;
mod graphite;
pub mod settings;
pub mod slice;
pub mod store;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use aggregate::{Aggregator, AggregatorSettings, AggregatorStats, WhenFull};
pub use cleaner::{Cleaner, PassObserver};
pub use settings::{CleanerSettings, CounterSettings};
pub use slice::{CounterWrite, SliceDelta, ValidIncrement};
pub use store::{
    Applied, CleanJob, CleanReport, CounterStore, Sample, SliceCounterStore, WriteBatch, WriteSeq,
};

use crate::clock::{Clock, SharedClock, SystemClock, Timestamp};
use crate::engine::plan::{check_batch, plan, time};
use crate::engine::{Batch, SliceSel, Space, Value};
use crate::error::{Error, Result};
use crate::name::Name;

/// The most increments accepted in one batch.
pub const MAX_BATCH: usize = 10_000;
/// The most names listed in one page.
pub const MAX_PAGE: usize = 10_000;
/// The most counters read in one call.
pub const MAX_READ: usize = 1_000;

/// One increment as a caller states it: `at` defaults to now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Increment {
    /// The counter.
    pub name: String,
    /// The amount (may be negative); defaults to 1.
    #[serde(default = "one")]
    pub count: i64,
    /// Unix seconds with a fraction; defaults to now.
    #[serde(default)]
    pub at: Option<f64>,
}

fn one() -> i64 {
    1
}

impl Increment {
    /// An increment of `count` to `name`, now.
    pub fn new(name: impl Into<String>, count: i64) -> Self {
        Increment {
            name: name.into(),
            count,
            at: None,
        }
    }

    /// The same increment at `at` Unix seconds.
    pub fn at(mut self, at: f64) -> Self {
        self.at = Some(at);
        self
    }
}

/// One precision's samples of a counter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Series {
    /// Slice length in seconds.
    pub precision: u64,
    /// Samples, oldest first.
    pub samples: Vec<Sample>,
}

/// A page of counter names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    /// Names in name order.
    pub names: Vec<String>,
    /// Pass this to get the next page; `None` on the last page.
    pub next: Option<String>,
}

impl Page {
    /// The page of `limit` names out of `names`, listed with one more than
    /// `limit` asked for: when that one came, there is a next page.
    pub fn of(mut names: Vec<String>, limit: usize) -> Self {
        let next = if names.len() > limit {
            names.truncate(limit);
            names.last().cloned()
        } else {
            None
        };
        Page { names, next }
    }
}

/// Named counters at several precisions. Cheap to clone.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tally::Result<()> {
/// let tally = tally::Tally::open("sqlite::memory:").await?;
/// let counters = tally.counters();
///
/// counters.incr("hits", 1).await?; // at every precision, written before it returns
/// counters
///     .incr_many(&[tally::Increment::new("hits", 2), tally::Increment::new("misses", 1)])
///     .await?; // one round trip, all or nothing
///
/// let per_minute = counters.get("hits", 60).await?; // (slice start, count), oldest first
/// assert_eq!(per_minute.iter().map(|s| s.count).sum::<i64>(), 3);
/// assert!(counters.incr("", 1).await.unwrap_err().is_bad_input());
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Counters {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn CounterStore>,
    settings: CounterSettings,
    space: Arc<Space>,
    clock: SharedClock,
}

impl Counters {
    /// Counters on `store` with validated `settings`, on the system clock.
    pub fn new(store: Arc<dyn CounterStore>, settings: CounterSettings) -> Result<Self> {
        Self::with_clock(store, settings, Arc::new(SystemClock))
    }

    /// Counters on `store`, reading time from `clock`.
    pub fn with_clock(
        store: Arc<dyn CounterStore>,
        settings: CounterSettings,
        clock: Arc<dyn Clock>,
    ) -> Result<Self> {
        let settings = settings.validate()?;
        Ok(Counters {
            inner: Arc::new(Inner {
                store: store.keeping(settings.samples),
                space: Arc::new(Space::counters(&settings.precisions, settings.samples)),
                settings,
                clock,
            }),
        })
    }

    /// The settings in force.
    pub fn settings(&self) -> &CounterSettings {
        &self.inner.settings
    }

    /// The engine's space these counters are: sums at each precision.
    pub fn space(&self) -> &Arc<Space> {
        &self.inner.space
    }

    /// The clock in use.
    pub fn clock(&self) -> &SharedClock {
        &self.inner.clock
    }

    /// The store underneath.
    pub fn store(&self) -> &Arc<dyn CounterStore> {
        &self.inner.store
    }

    /// Adds `count` to `name` now, at every precision, all or nothing.
    pub async fn incr(&self, name: &str, count: i64) -> Result<()> {
        self.incr_many(&[Increment::new(name, count)]).await
    }

    /// Adds `count` to `name` at `at` Unix seconds.
    pub async fn incr_at(&self, name: &str, count: i64, at: f64) -> Result<()> {
        self.incr_many(&[Increment::new(name, count).at(at)]).await
    }

    /// Adds a batch of increments over any counters in one round trip, all or
    /// nothing: if any is invalid or would overflow, nothing is written.
    pub async fn incr_many(&self, increments: &[Increment]) -> Result<()> {
        let batch = self.plan(increments)?;
        self.inner.store.apply_batch(&batch).await.map(|_| ())
    }

    /// [`Counters::incr_many`] with an idempotency key: the batch is written
    /// at most once per key, however often it is sent (a retry after a
    /// timeout, a crash, a dropped connection). The key stands for a write
    /// id ([`crate::idempotency::write_seq`]) that the store records
    /// atomically with the increments and remembers for 7 days: the same
    /// increments sent again with the key within them write nothing and
    /// answer [`Applied::Duplicate`]. A key names one batch: other
    /// increments under a used key are not reliably refused here (the
    /// write id is recorded beside the batch's first counters, so on Redis
    /// a batch of other counters is not recognised); the HTTP server, and
    /// [`crate::Idempotency`] for callers of their own, compare requests.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> tally::Result<()> {
    /// use tally::counters::Applied;
    ///
    /// let tally = tally::Tally::open("sqlite::memory:").await?;
    /// let counters = tally.counters();
    /// let order = [tally::Increment::new("orders", 1)];
    /// assert_eq!(counters.incr_many_once("order-7", &order).await?, Applied::Written);
    /// // The client timed out and sends it again: counted once.
    /// assert_eq!(counters.incr_many_once("order-7", &order).await?, Applied::Duplicate);
    /// assert_eq!(counters.get("orders", 86_400).await?[0].count, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn incr_many_once(&self, key: &str, increments: &[Increment]) -> Result<Applied> {
        crate::idempotency::check_key(key)?;
        let mut batch = self.plan(increments)?;
        batch.seq = Some(crate::idempotency::write_seq(key));
        self.inner.store.apply_batch(&batch).await
    }

    /// [`Counters::incr`] with an idempotency key (see
    /// [`Counters::incr_many_once`]).
    pub async fn incr_once(&self, key: &str, name: &str, count: i64) -> Result<Applied> {
        self.incr_many_once(key, &[Increment::new(name, count)])
            .await
    }

    /// Validates and merges increments into a store batch without writing it.
    pub fn prepare(&self, increments: &[Increment]) -> Result<WriteBatch> {
        Ok(WriteBatch {
            counters: self
                .plan(increments)?
                .writes
                .into_iter()
                .map(CounterWrite::from_series)
                .collect::<Result<_>>()?,
            seq: None,
        })
    }

    /// Validates increments and plans them into the engine's batch.
    fn plan(&self, increments: &[Increment]) -> Result<Batch> {
        check_batch(increments.len(), MAX_BATCH, "increment")?;
        let now = self.inner.clock.now();
        let valid = increments
            .iter()
            .map(|inc| self.validate(inc, now))
            .collect::<Result<Vec<_>>>()?;
        Ok(Batch {
            writes: plan(
                &self.inner.space,
                valid.iter().map(|v| (&v.name, v.at, Value::Sum(v.count))),
            )?,
            space: self.inner.space.clone(),
            seq: None,
        })
    }

    /// Validates one increment (name, count, time), `now` standing in for a
    /// missing time.
    pub fn validate(&self, inc: &Increment, now: Timestamp) -> Result<ValidIncrement> {
        Ok(ValidIncrement {
            name: Name::new(inc.name.as_str())?,
            count: slice::check_count(inc.count)?,
            at: time(inc.at, now)?,
        })
    }

    /// The samples of one precision, oldest first.
    pub async fn get(&self, name: &str, precision: u64) -> Result<Vec<Sample>> {
        let name = Name::new(name)?;
        self.inner.settings.check_precision(precision)?;
        let mut all = self.inner.store.samples(&[name], &[precision]).await?;
        Ok(all.pop().and_then(|mut per| per.pop()).unwrap_or_default())
    }

    /// Every configured precision of a counter, finest first, in one round trip.
    pub async fn get_all(&self, name: &str) -> Result<Vec<Series>> {
        let name = Name::new(name)?;
        let mut all = self.get_many(&[name.into_string()], None).await?;
        Ok(all.pop().unwrap_or_default())
    }

    /// One counter's samples starting in `slices` at one precision (or
    /// every one when `None`, finest first), in one round trip.
    pub async fn read(
        &self,
        name: &str,
        precision: Option<u64>,
        slices: SliceSel,
    ) -> Result<Vec<Series>> {
        let mut all = self.get_many(&[name.to_owned()], precision).await?;
        let mut series = all.pop().unwrap_or_default();
        for s in &mut series {
            s.samples.retain(|sample| slices.contains(sample.start));
        }
        Ok(series)
    }

    /// Several counters at one precision (or all when `None`), in one round
    /// trip; `result[i]` belongs to `names[i]`.
    pub async fn get_many(
        &self,
        names: &[String],
        precision: Option<u64>,
    ) -> Result<Vec<Vec<Series>>> {
        if names.len() > MAX_READ {
            return Err(Error::InvalidInput(format!(
                "at most {MAX_READ} counters can be read at once, got {}",
                names.len()
            )));
        }
        let names = names
            .iter()
            .map(|n| Name::new(n.as_str()))
            .collect::<Result<Vec<_>>>()?;
        let precisions = match precision {
            Some(p) => {
                self.inner.settings.check_precision(p)?;
                vec![p]
            }
            None => self.inner.settings.precisions.clone(),
        };
        let all = self.inner.store.samples(&names, &precisions).await?;
        Ok(all
            .into_iter()
            .map(|per| {
                precisions
                    .iter()
                    .zip(per)
                    .map(|(&precision, samples)| Series { precision, samples })
                    .collect()
            })
            .collect())
    }

    /// Up to `limit` counters after the cursor `after`, in name order.
    pub async fn list(&self, after: Option<&str>, limit: usize) -> Result<Page> {
        self.search("", after, limit).await
    }

    /// Up to `limit` counters whose names start with `prefix`, after the
    /// cursor `after`, in name order.
    pub async fn search(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Page> {
        crate::name::check_search(prefix, limit, MAX_PAGE)?;
        let names = self.inner.store.list(prefix, after, limit + 1).await?;
        Ok(Page::of(names, limit))
    }

    /// Deletes every precision of a counter; true if it held anything.
    pub async fn delete(&self, name: &str) -> Result<bool> {
        let name = Name::new(name)?;
        self.inner
            .store
            .delete(&name, &self.inner.settings.precisions)
            .await
    }

    /// Checks that the backend answers.
    pub async fn ping(&self) -> Result<()> {
        self.inner.store.ping().await
    }

    /// A cleaner for these counters.
    pub fn cleaner(&self, settings: CleanerSettings) -> Result<Cleaner> {
        Cleaner::new(self.clone(), settings)
    }
}
