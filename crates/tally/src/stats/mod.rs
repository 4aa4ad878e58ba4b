//! Statistics: count, sum, min, max, mean, standard deviation and
//! quantiles of observed values, per slice at several precisions, with
//! retention ("Redis in Action" 5.2.3's `update_stats` / `get_stats`, plus
//! quantiles, ranges and merged stats).
//!
//! [`Stats`] is the service over the slice engine's `stats` space (the
//! statistics kind: moments and a DDSketch per slice, see
//! [`crate::engine::kinds::stats`]): it validates observations (names,
//! finite values, weights, times), merges a call's observations into one
//! delta per (stat, precision, slice) with the engine's plan and hands
//! them to the engine's store in one round trip (per node on a cluster),
//! all or nothing. Reads go through the same store: every slice of a
//! precision, the summary of a range merged from the finest precision
//! covering it, several stats merged into one, a ranking ([`Stats::top`]).
//! [`StatsWriter`] is the engine's aggregating writer over the same space
//! (observations merged in process, each flush written exactly once); the
//! counters' [`crate::Cleaner`] trims the space (see
//! [`crate::Tally::cleaner`]). [`summary`] holds the pure read views and
//! [`settings`] the configuration and its defaults.
//!
//! What it does not do: hold observations of its own (the aggregating
//! writer does, until its next flush), or talk to a backend directly.

mod graphite;
pub mod settings;
pub mod summary;
mod writer;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use settings::{DEFAULT_QUANTILES, MAX_QUANTILES, StatsSettings, check_quantiles};
pub use summary::{Figure, RangeSummary, Ranked, SliceSummary, StatSeries, Summary, TopN};
pub use writer::StatsWriter;

use crate::clock::constructors;
use crate::engine::Page;
use crate::engine::kinds::{SketchSettings, StatsValue};
use crate::engine::precision;
use crate::engine::series::{Rules, SeriesService, operation};
use crate::engine::{
    Applied, Batch, BatchSink, Kind, SliceRead, SliceSel, SliceStore, Space, Value,
};
use crate::error::{Error, Result};
use crate::name::Name;

/// The statistics' space id (Redis keys `{<prefix>:<shard>}:stats:...`,
/// SQLite tables `tally_stats_*`).
pub const SPACE: &str = "stats";

pub use crate::engine::series::{MAX_BATCH, MAX_PAGE};

/// The most stats read (or merged) in one call.
pub const MAX_READ: usize = 1_000;

/// The most stats one ranking ([`Stats::top`]) reads; a prefix matching
/// more is refused (narrow it).
pub const MAX_TOP_SCAN: usize = 100_000;

/// The most stats one ranking returns.
pub const MAX_TOP: usize = 1_000;

/// One observation as a caller states it: `at` defaults to now, `weight`
/// to 1.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    /// The statistic.
    pub name: String,
    /// The value observed: finite (zero and negative values are fine).
    pub value: f64,
    /// Unix seconds with a fraction; defaults to now.
    #[serde(default)]
    pub at: Option<f64>,
    /// How many observations this value stands for (a statsd sample rate
    /// `|@0.1` is weight 10); at least 1, defaults to 1.
    #[serde(default)]
    pub weight: Option<u64>,
}

operation!(Observation, "observation");

impl Observation {
    /// An observation of `value` for `name`, now.
    pub fn new(name: impl Into<String>, value: f64) -> Self {
        Observation {
            name: name.into(),
            value,
            at: None,
            weight: None,
        }
    }

    /// The same observation at `at` Unix seconds.
    pub fn at(mut self, at: f64) -> Self {
        self.at = Some(at);
        self
    }

    /// The same observation standing for `weight` observations.
    pub fn weight(mut self, weight: u64) -> Self {
        self.weight = Some(weight);
        self
    }
}

/// The statistics kind's rules for [`SeriesService`]: observations, and
/// what the settings make of them.
#[derive(Debug)]
pub struct StatRules {
    settings: StatsSettings,
    sketch: SketchSettings,
    /// The space restricted to the precisions that keep a sketch: where a
    /// range asked for quantiles is read.
    sketch_space: Space,
}

impl Rules for StatRules {
    type Op = Observation;
    const WRITER: &'static str = "StatsWriter";

    fn delta(&self, o: &Observation) -> Result<Value> {
        let mut delta = StatsValue::new(self.sketch);
        delta
            .record_weighted(o.value, o.weight.unwrap_or(1))
            .map_err(|e| match e {
                Error::InvalidInput(why) | Error::InvalidCount(why) => {
                    Error::InvalidInput(format!("stat {:?}: {why}", o.name))
                }
                other => other,
            })?;
        Ok(Value::Stats(Box::new(delta)))
    }
}

/// Named statistics at several precisions. Cheap to clone.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tally::Result<()> {
/// use tally::stats::{Figure, Observation};
///
/// let tally = tally::Tally::open("sqlite::memory:").await?;
/// let stats = tally.stats();
///
/// for ms in [10.0, 20.0, 30.0] {
///     stats.record_at("lat", ms, 1336376415.0).await?; // written before it returns
/// }
/// let minute = stats.get("lat", 60, &[0.5]).await?; // every slice, oldest first
/// let s = &minute[0].summary;
/// assert_eq!((s.count, s.sum, s.mean, s.stddev), (3, 60.0, Some(20.0), Some(10.0)));
///
/// stats
///     .record_many(&[Observation::new("api:/a", 5.0).at(1336376415.0),
///                    Observation::new("api:/b", 7.0).at(1336376415.0)])
///     .await?; // one round trip, all or nothing
/// let both = stats.summary(&["api:/a", "api:/b"], 1336376400, 1336376459, &[0.99]).await?;
/// assert_eq!(both.summary.count, 2);
/// let slowest = stats.top(Figure::Mean, "api:", 1336376400, 1336376459, 1).await?;
/// assert_eq!(slowest[0].name, "api:/b");
/// assert!(stats.record("lat", f64::NAN).await.unwrap_err().is_bad_input());
/// # Ok(())
/// # }
/// ```
pub type Stats = SeriesService<StatRules>;

impl SeriesService<StatRules> {
    constructors! {
        "Statistics", |store: dyn SliceStore, settings: StatsSettings, clock| {
            let sketch = settings.sketch()?;
            let (with, without): (Vec<u64>, Vec<u64>) = settings
                .precisions
                .iter()
                .copied()
                .partition(|&p| settings.keeps_sketch(p));
            let space = Space::cleaned(SPACE, Kind::Stats, &settings.precisions, settings.samples)?;
            let sketch_space = Space::cleaned(SPACE, Kind::Stats, &with, settings.samples)?;
            let sink = Arc::new(StatsSink {
                store: store.clone(),
                without_sketch: without,
            });
            let rules = StatRules {
                settings,
                sketch,
                sketch_space,
            };
            Ok(Self::from_parts(store, Some(sink), space, clock, rules))
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> &StatsSettings {
        &self.rules().settings
    }

    /// Records `value` for `name` now, at every precision.
    pub async fn record(&self, name: &str, value: f64) -> Result<()> {
        self.record_many(&[Observation::new(name, value)]).await
    }

    /// Records `value` for `name` at `at` Unix seconds.
    pub async fn record_at(&self, name: &str, value: f64, at: f64) -> Result<()> {
        self.record_many(&[Observation::new(name, value).at(at)])
            .await
    }

    /// Records a batch of observations over any stats in one round trip
    /// (per node on a cluster), all or nothing: if any is invalid (a name,
    /// a value that is not finite, a weight of 0, a time) or would take a
    /// slice out of range, nothing is written.
    pub async fn record_many(&self, observations: &[Observation]) -> Result<()> {
        self.write(observations).await
    }

    /// [`Stats::record_many`] with an idempotency key, applied once
    /// ([`SeriesService::write_once`]).
    pub async fn record_many_once(
        &self,
        key: &str,
        observations: &[Observation],
    ) -> Result<Applied> {
        self.write_once(key, observations).await
    }

    /// Every slice of one precision, oldest first, each with the quantiles
    /// `qs` (none when the precision keeps no sketch).
    pub async fn get(&self, name: &str, precision: u64, qs: &[f64]) -> Result<Vec<SliceSummary>> {
        self.rules().settings.check_precision(precision)?;
        let mut all = self.read_all(name, &[precision], qs).await?;
        Ok(all.pop().map(|s| s.slices).unwrap_or_default())
    }

    /// Every precision of a statistic, finest first, in one round trip.
    pub async fn get_all(&self, name: &str, qs: &[f64]) -> Result<Vec<StatSeries>> {
        let precisions = self.rules().settings.precisions.clone();
        self.read_all(name, &precisions, qs).await
    }

    /// One statistic's slices starting in `slices` at one precision (or
    /// every one when `None`, finest first), each with the quantiles `qs`
    /// (none where the precision keeps no sketch), in one round trip;
    /// `None` when it keeps nothing at all at the precisions read (never
    /// recorded, deleted, or all of it past retention), whatever `slices`.
    pub async fn read(
        &self,
        name: &str,
        precision: Option<u64>,
        slices: SliceSel,
        qs: &[f64],
    ) -> Result<Option<Vec<StatSeries>>> {
        let precisions = match precision {
            Some(p) => {
                self.rules().settings.check_precision(p)?;
                vec![p]
            }
            None => self.rules().settings.precisions.clone(),
        };
        check_quantiles(qs)?;
        let read = self.read_series(name, &precisions).await?;
        if read.iter().all(|(_, kept)| kept.is_empty()) {
            return Ok(None);
        }
        read.into_iter()
            .map(|(precision, kept)| self.series(precision, &kept, slices, qs))
            .collect::<Result<_>>()
            .map(Some)
    }

    async fn read_all(
        &self,
        name: &str,
        precisions: &[u64],
        qs: &[f64],
    ) -> Result<Vec<StatSeries>> {
        check_quantiles(qs)?;
        self.read_series(name, precisions)
            .await?
            .into_iter()
            .map(|(precision, kept)| self.series(precision, &kept, SliceSel::All, qs))
            .collect()
    }

    /// The summaries of the slices of `kept` starting in `slices`.
    fn series(
        &self,
        precision: u64,
        kept: &[(u64, Value)],
        slices: SliceSel,
        qs: &[f64],
    ) -> Result<StatSeries> {
        let sketch = self.rules().settings.keeps_sketch(precision);
        let qs = if sketch { qs } else { &[] };
        let keys: Vec<String> = qs.iter().map(|&q| summary::quantile_key(q)).collect();
        let slices = kept
            .iter()
            .filter(|(start, _)| slices.contains(*start))
            .map(|(start, v)| {
                Ok(SliceSummary {
                    start: *start,
                    summary: Summary::keyed(stats_of(v)?, qs, &keys)?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(StatSeries {
            precision,
            sketch,
            slices,
        })
    }

    /// The summary of the range `[from, to]` (Unix seconds) of one stat or
    /// of several merged into one (e.g. every route of an app), with the
    /// quantiles `qs`; one round trip. Read at the finest precision whose
    /// kept slices reach back to `from` (among those keeping a sketch when
    /// quantiles are asked for): slices starting in `[slice_start(from),
    /// to]` are merged, so the range is widened to whole slices.
    pub async fn summary(
        &self,
        names: &[&str],
        from: u64,
        to: u64,
        qs: &[f64],
    ) -> Result<RangeSummary> {
        check_quantiles(qs)?;
        let names = self.names(names)?;
        let (values, precision) = self.ranges(&names, from, to, !qs.is_empty()).await?;
        let mut total = StatsValue::new(self.rules().sketch);
        for v in &values {
            total.merge(v)?;
        }
        Ok(RangeSummary {
            from,
            to,
            precision,
            summary: Summary::of(&total, qs)?,
        })
    }

    /// The range `[from, to]` of each stat of `names`, one value each, and
    /// the precision read.
    async fn ranges(
        &self,
        names: &[Name],
        from: u64,
        to: u64,
        quantiles: bool,
    ) -> Result<(Vec<StatsValue>, u64)> {
        if to < from {
            return Err(Error::InvalidTime(format!(
                "a range's end ({to}) is before its start ({from})"
            )));
        }
        let space = if quantiles {
            &self.rules().sketch_space
        } else {
            self.space()
        };
        let now = self.clock().now();
        let r = *precision::choose(&space.precisions, now, from)
            .expect("a space has at least one precision");
        let sel = SliceSel::Range {
            from: r.slice_of_second(from),
            to,
        };
        let per = self
            .store()
            .read(SliceRead::new(space, names, &[r.seconds]).slices(sel))
            .await?;
        let values = per
            .into_iter()
            .map(|mut rs| {
                let mut total = StatsValue::new(self.rules().sketch);
                for (_, v) in rs.pop().unwrap_or_default() {
                    total.merge(stats_of(&v)?)?;
                }
                Ok(total)
            })
            .collect::<Result<_>>()?;
        Ok((values, r.seconds))
    }

    /// The book's "slowest pages": the `n` stats named with `prefix`
    /// (empty: all) that rank highest by `by` over `[from, to]`, highest
    /// first (ties by name); stats with nothing in the range are left out.
    ///
    /// Cost: it reads every matching stat's range summary, [`MAX_READ`]
    /// stats per round trip (a listing page, then one read), so a ranking
    /// of N stats costs about 2·N/1000 round trips and holds `n` summaries
    /// in memory. It is bounded: at most [`MAX_TOP_SCAN`] stats are read;
    /// a prefix matching more is refused, asking for a narrower one.
    pub async fn top(
        &self,
        by: Figure,
        prefix: &str,
        from: u64,
        to: u64,
        n: usize,
    ) -> Result<Vec<Ranked>> {
        by.check()?;
        if n == 0 || n > MAX_TOP {
            return Err(Error::InvalidInput(format!(
                "a ranking holds 1 to {MAX_TOP} stats, got {n}"
            )));
        }
        let qs = by.quantiles();
        let mut top = TopN::new(n);
        let mut after: Option<String> = None;
        let mut scanned = 0usize;
        loop {
            let page = self.search(prefix, after.as_deref(), MAX_READ).await?;
            scanned += page.names.len();
            if scanned > MAX_TOP_SCAN {
                return Err(Error::InvalidInput(format!(
                    "more than {MAX_TOP_SCAN} stats start with {prefix:?}; rank a narrower prefix"
                )));
            }
            let names = page
                .names
                .iter()
                .map(|n| Name::new(n.as_str()))
                .collect::<Result<Vec<_>>>()?;
            let (values, _) = self.ranges(&names, from, to, !qs.is_empty()).await?;
            for (name, value) in page.names.into_iter().zip(values) {
                let summary = Summary::of(&value, &qs)?;
                if let Some(v) = by.of(&summary) {
                    top.offer(Ranked {
                        name,
                        value: v,
                        summary,
                    });
                }
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        Ok(top.into_vec())
    }

    /// Up to `limit` stats after the cursor `after`, in name order.
    pub async fn list(&self, after: Option<&str>, limit: usize) -> Result<Page> {
        self.search("", after, limit).await
    }

    /// Names checked: 1 to [`MAX_READ`] valid names.
    fn names(&self, names: &[&str]) -> Result<Vec<Name>> {
        if names.is_empty() || names.len() > MAX_READ {
            return Err(Error::InvalidInput(format!(
                "a summary merges 1 to {MAX_READ} stats, got {}",
                names.len()
            )));
        }
        names.iter().map(|n| Name::new(*n)).collect()
    }
}

/// The statistic a stored value of the stats space holds.
fn stats_of(v: &Value) -> Result<&StatsValue> {
    match v {
        Value::Stats(s) => Ok(s),
        other => Err(other.misplaced(SPACE)),
    }
}

/// The statistics' way into the store: every batch (exact or from the
/// aggregating writer) passes here, so the slices of precisions that keep
/// no sketch get the moments only ([`StatsValue::without_sketch`]).
#[derive(Debug)]
struct StatsSink {
    store: Arc<dyn SliceStore>,
    /// The precisions whose slices keep no sketch (empty by default).
    without_sketch: Vec<u64>,
}

#[async_trait]
impl BatchSink for StatsSink {
    async fn apply_batch(&self, batch: &Batch) -> Result<Applied> {
        if self.without_sketch.is_empty() {
            return self.store.apply(batch).await;
        }
        let mut batch = batch.clone();
        for write in &mut batch.writes {
            for cell in &mut write.cells {
                if let Value::Stats(s) = &mut cell.delta
                    && self.without_sketch.contains(&cell.precision)
                {
                    **s = s.without_sketch();
                }
            }
        }
        self.store.apply(&batch).await
    }
}
