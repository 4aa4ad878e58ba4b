//! Multi-precision counters with retention ("Redis in Action" 5.2).
//!
//! Counters are the engine's sum kind: [`Counters`] is the engine's
//! series service ([`crate::engine::series::SeriesService`]) over the
//! counters' space (sums at each precision) with the counters' rules
//! ([`CounterRules`]: an [`Increment`] is a checked sum), and
//! [`CounterWriter`] is the engine's aggregating writer over the same space.
//! What counters add are their fast paths, as methods of those types: the
//! exact increment ([`Counters::incr`], one plan and one store call),
//! reads of plain sums ([`Counters::get_many`] over
//! [`crate::engine::SliceStore::read_sums`]) and the writer's
//! `add(name, count, at)`. The cleaner ([`crate::engine::Cleaner`]) trims
//! them with the book's cadence. The service never talks to a backend
//! directly; stores never validate.

pub mod aggregate;
mod graphite;
pub mod settings;

use serde::{Deserialize, Serialize};

pub use crate::engine::cleaner::{Cleaner, PassObserver};
pub use crate::engine::read::Sample;
pub use crate::engine::series::Page;
pub use crate::engine::store::{Applied, CleanJob, CleanReport, WriteSeq};
pub use crate::engine::writer::{WhenFull, WriterSettings, WriterStats};
pub use aggregate::CounterWriter;
pub use settings::{CleanerSettings, CounterSettings};

use crate::clock::constructors;
use crate::engine::kinds::sum;
use crate::engine::series::{Rules, SeriesService, operation};
use crate::engine::store::map_reads;
use crate::engine::{SliceRead, SliceSel, SliceStore, Space, Value};
use crate::error::{Error, Result};
use crate::name::Name;

/// The most increments accepted in one batch.
pub const MAX_BATCH: usize = crate::engine::series::MAX_BATCH;
/// The most names listed in one page.
pub const MAX_PAGE: usize = crate::engine::series::MAX_PAGE;
/// The most counters read in one call.
pub const MAX_READ: usize = 1_000;

/// One increment as a caller states it: `at` defaults to now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Increment {
    /// The counter.
    pub name: String,
    /// The amount (may be negative); defaults to 1.
    #[serde(default = "crate::engine::plan::one")]
    pub count: i64,
    /// Unix seconds with a fraction; defaults to now.
    #[serde(default)]
    pub at: Option<f64>,
}

operation!(Increment, "increment");

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

/// What counters add to the engine's series service: an [`Increment`]
/// is a sum (never `i64::MIN`), and the settings in force.
#[derive(Clone, Debug)]
pub struct CounterRules {
    settings: CounterSettings,
}

impl Rules for CounterRules {
    type Op = Increment;
    const WRITER: &'static str = "CounterWriter";

    fn delta(&self, op: &Increment) -> Result<Value> {
        sum::check(op.count).map(Value::Sum)
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
pub type Counters = SeriesService<CounterRules>;

impl SeriesService<CounterRules> {
    constructors! {
        "Counters", |store: dyn SliceStore, settings: CounterSettings, clock| {
            let space = Space::counters(&settings.precisions, settings.samples);
            Ok(Self::from_parts(
                store,
                None,
                space,
                clock,
                CounterRules { settings },
            ))
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> &CounterSettings {
        &self.rules().settings
    }

    /// Adds `count` to `name` now, at every precision, all or nothing.
    pub async fn incr(&self, name: &str, count: i64) -> Result<()> {
        self.write(&[Increment::new(name, count)]).await
    }

    /// Adds `count` to `name` at `at` Unix seconds.
    pub async fn incr_at(&self, name: &str, count: i64, at: f64) -> Result<()> {
        self.write(&[Increment::new(name, count).at(at)]).await
    }

    /// Adds a batch of increments over any counters in one round trip, all or
    /// nothing: if any is invalid or would overflow, nothing is written.
    pub async fn incr_many(&self, increments: &[Increment]) -> Result<()> {
        self.write(increments).await
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
        self.write_once(key, increments).await
    }

    /// [`Counters::incr`] with an idempotency key (see
    /// [`Counters::incr_many_once`]).
    pub async fn incr_once(&self, key: &str, name: &str, count: i64) -> Result<Applied> {
        self.incr_many_once(key, &[Increment::new(name, count)])
            .await
    }

    /// The samples of one precision, oldest first.
    pub async fn get(&self, name: &str, precision: u64) -> Result<Vec<Sample>> {
        let name = Name::new(name)?;
        self.settings().check_precision(precision)?;
        let mut all = self.samples(&[name], &[precision], SliceSel::All).await?;
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
        let mut all = self
            .read_many(&[name.to_owned()], precision, slices)
            .await?;
        Ok(all.pop().unwrap_or_default())
    }

    /// Several counters at one precision (or all when `None`), in one round
    /// trip; `result[i]` belongs to `names[i]`.
    pub async fn get_many(
        &self,
        names: &[String],
        precision: Option<u64>,
    ) -> Result<Vec<Vec<Series>>> {
        self.read_many(names, precision, SliceSel::All).await
    }

    /// [`Counters::get_many`] keeping the slices `slices` selects, selected
    /// by the store.
    async fn read_many(
        &self,
        names: &[String],
        precision: Option<u64>,
        slices: SliceSel,
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
                self.settings().check_precision(p)?;
                vec![p]
            }
            None => self.settings().precisions.clone(),
        };
        let all = self.samples(&names, &precisions, slices).await?;
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

    /// The samples of each named counter at each precision, oldest first:
    /// `result[i][j]` belongs to `names[i]` at `precisions[j]`. One round
    /// trip, reading plain sums.
    async fn samples(
        &self,
        names: &[Name],
        precisions: &[u64],
        slices: SliceSel,
    ) -> Result<Vec<Vec<Vec<Sample>>>> {
        let all = self
            .store()
            .read_sums(SliceRead::new(self.space(), names, precisions).slices(slices))
            .await?;
        Ok(map_reads(all, |start, count| Some(Sample { start, count })))
    }

    /// Up to `limit` counters after the cursor `after`, in name order.
    pub async fn list(&self, after: Option<&str>, limit: usize) -> Result<Page> {
        self.search("", after, limit).await
    }

    /// A cleaner of these counters (and of the spaces added to it with
    /// [`Cleaner::with_space`]).
    pub fn cleaner(&self, settings: CleanerSettings) -> Result<Cleaner> {
        Cleaner::new(self.clock().clone(), settings)?
            .with_space(self.store().clone(), self.space().clone())
    }
}
