//! A time-series store (Sentry's tsdb, docs/reference.md): counts,
//! distinct counts and most frequent items per (model, key), at several
//! precisions at once (Sentry's rollups), expiring by themselves.
//!
//! [`Tsdb`] is the service over the slice engine: a bucket's count is the
//! engine's sum kind, its distinct values the distinct kind (HyperLogLog),
//! its most frequent items the top kind (Space-Saving), each a [`Value`].
//! The service validates models, keys, values and times, resolves each
//! write into one bucket per precision with its expiry (so the store sets the
//! expiry in the same atomic step and nothing needs a cleaner), merges
//! duplicate increments with the engine's write path ([`plan::plan`]), and
//! picks the precision of a read (Sentry's rule: [`precision::optimal`]). The
//! store ([`TsdbStore`]) only stores, one write path and one read for every
//! kind, in Sentry's layout. Keys may be integers or strings: an integer
//! key is its decimal text (42 and "42" are the same key).

pub mod precision;
pub mod store;

/// HyperLogLog, register-compatible with Redis: the engine's distinct kind.
pub use crate::engine::kinds::hll;
/// Most frequent items (Space-Saving): the engine's top kind.
pub use crate::engine::kinds::top as topn;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use precision::{DEFAULT_PRECISIONS, VSHARDS};
pub use store::{Cell, CellAdd, Held, Merge, Span, TsdbStore, Window};
pub use topn::ItemCount;

use crate::clock::{SharedClock, Timestamp, constructors};
use crate::engine::Sample;
use crate::engine::kinds::distinct::SET_CAP;
use crate::engine::kinds::{DistinctValue, TopValue};
use crate::engine::{Applied, Kind, Precision, Retention, Space, Value, plan, read};
use crate::error::{Error, Result};
use crate::idempotency::Mark;
use crate::name::Name;

/// The most writes (increments, records) in one call.
pub const MAX_BATCH: usize = 10_000;
/// The most keys read in one call.
pub const MAX_KEYS: usize = 1_000;
/// The most values recorded in one call.
pub const MAX_VALUES: usize = 10_000;
/// The largest count one increment may add.
pub const MAX_COUNT: i64 = 1 << 53;

/// What the time-series store keeps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TsdbSettings {
    /// Precisions (`--rollups`), finest first after validation.
    pub precisions: Vec<Precision>,
    /// Items kept per key and bucket by the most-frequent summaries.
    pub top_capacity: usize,
}

impl Default for TsdbSettings {
    fn default() -> Self {
        TsdbSettings {
            precisions: DEFAULT_PRECISIONS.to_vec(),
            top_capacity: topn::DEFAULT_CAPACITY,
        }
    }
}

impl TsdbSettings {
    /// Checks the settings and sorts the precisions finest first.
    pub fn validate(mut self) -> Result<Self> {
        self.precisions = precision::validate(self.precisions)?;
        if self.top_capacity == 0 || self.top_capacity > 10_000 {
            return Err(Error::Config(format!(
                "top capacity must be 1 to 10000 items, got {}",
                self.top_capacity
            )));
        }
        Ok(self)
    }
}

/// One increment: `count` (default 1) to `key` of `model` at `at` (default
/// now).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TsIncrement {
    /// The model (e.g. `group`).
    pub model: String,
    /// The key (an id).
    pub key: String,
    /// The amount, 1 to 2^53; defaults to 1.
    #[serde(default = "crate::engine::plan::one")]
    pub count: i64,
    /// Unix seconds; defaults to now.
    #[serde(default)]
    pub at: Option<f64>,
}

impl TsIncrement {
    /// An increment of 1, now.
    pub fn new(model: impl Into<String>, key: impl ToString) -> Self {
        TsIncrement {
            model: model.into(),
            key: key.to_string(),
            count: 1,
            at: None,
        }
    }

    /// The same with another count.
    pub fn count(mut self, count: i64) -> Self {
        self.count = count;
        self
    }

    /// The same at `at` Unix seconds.
    pub fn at(mut self, at: f64) -> Self {
        self.at = Some(at);
        self
    }
}

/// What a time-series read asks for: keys of a model over the range
/// `[start, end]` (Unix seconds, inclusive), at a precision (by default
/// the finest whose retention, counted back from now, reaches `start`:
/// [`precision::optimal`]).
///
/// ```
/// use tally::tsdb::TsQuery;
///
/// let q = TsQuery::new("project", [42, 43], 1_700_000_000.0, 1_700_003_600.0).precision(Some(10));
/// assert_eq!((q.keys[1].as_str(), q.precision), ("43", Some(10)));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TsQuery {
    /// The model (e.g. `group`).
    pub model: String,
    /// The keys, 1 to [`MAX_KEYS`] (an integer key is its decimal text).
    pub keys: Vec<String>,
    /// The range's start, Unix seconds.
    pub start: f64,
    /// The range's end, Unix seconds (inclusive).
    pub end: f64,
    /// The precision to read, seconds; `None`: the default. Serialized as
    /// `rollup`, the query parameter's name.
    #[serde(default, rename = "rollup")]
    pub precision: Option<u64>,
}

impl TsQuery {
    /// `keys` of `model` over `[start, end]`, at the default precision.
    pub fn new(
        model: impl Into<String>,
        keys: impl IntoIterator<Item = impl ToString>,
        start: f64,
        end: f64,
    ) -> Self {
        TsQuery {
            model: model.into(),
            keys: keys.into_iter().map(|k| k.to_string()).collect(),
            start,
            end,
            precision: None,
        }
    }

    /// The same at the precision of `seconds` (`None`: the default).
    pub fn precision(mut self, seconds: Option<u64>) -> Self {
        self.precision = seconds;
        self
    }
}

/// One key's series over a range.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeySeries {
    /// The key.
    pub key: String,
    /// (bucket start, value) for every bucket of the range, oldest first.
    pub points: Vec<Sample>,
}

/// Series of several keys over a range.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeSeries {
    /// The precision used, seconds (the JSON field `rollup`).
    pub rollup: u64,
    /// One per key, in the order asked.
    pub series: Vec<KeySeries>,
}

/// One key's total over a range.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyTotal {
    /// The key.
    pub key: String,
    /// The total.
    pub total: i64,
}

/// Totals of several keys over a range.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeTotals {
    /// The precision used, seconds (the JSON field `rollup`).
    pub rollup: u64,
    /// One per key, in the order asked.
    pub totals: Vec<KeyTotal>,
}

/// The most frequent items of a key over a range.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopItems {
    /// The precision used, seconds (the JSON field `rollup`).
    pub rollup: u64,
    /// The key.
    pub key: String,
    /// Count descending, ties by item ascending.
    pub items: Vec<ItemCount>,
}

/// Validates a model or key: a [`Name`] without braces (they would change
/// the Redis hash tag).
fn plain(kind: &str, text: &str) -> Result<Name> {
    Name::untagged(&format!("a {kind}"), text)
}

/// The time-series store. Cheap to clone.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tally::Result<()> {
/// use tally::tsdb::TsQuery;
///
/// let tally = tally::Tally::open("sqlite::memory:").await?;
/// let ts = tally.tsdb();
/// let now = tally.clock().now().as_secs_f64();
///
/// ts.incr("project", 42, 5).await?; // events of project 42, in every precision
/// let users = ["alice", "bob", "alice"].map(String::from);
/// ts.record("project.users", 42, &users, None).await?; // distinct values
///
/// let hour = |model| TsQuery::new(model, [42], now - 3600.0, now + 60.0);
/// let events = ts.get_sums(&hour("project")).await?;
/// assert_eq!(events.totals[0].total, 5);
/// let distinct = ts.get_distinct_totals(&hour("project.users")).await?;
/// assert_eq!(distinct.totals[0].total, 2);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Tsdb {
    store: Arc<dyn TsdbStore>,
    settings: TsdbSettings,
    clock: SharedClock,
    /// The counts' space (sums at every precision, expiring), for the engine's
    /// write path.
    counts: Arc<Space>,
}

impl Tsdb {
    constructors! {
        "A time-series store", |store: dyn TsdbStore, settings: TsdbSettings, clock| {
            let counts = Space::new(
                "ts_count",
                Kind::Sum,
                settings.precisions.clone(),
                Retention::Expire,
            )?;
            Ok(Tsdb {
                store,
                settings,
                clock,
                counts: Arc::new(counts),
            })
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> &TsdbSettings {
        &self.settings
    }

    /// The store (for `tally migrate`, which copies what it holds).
    pub(crate) fn store(&self) -> &Arc<dyn TsdbStore> {
        &self.store
    }

    /// Adds `count` to `key` of `model` now.
    pub async fn incr(&self, model: &str, key: impl ToString, count: i64) -> Result<()> {
        self.incr_multi(&[TsIncrement::new(model, key).count(count)])
            .await
    }

    /// Adds a batch of increments: duplicates merged, every precision written,
    /// one atomic call per (model, virtual shard), all sent at once. Every
    /// increment is validated before anything is written.
    pub async fn incr_multi(&self, increments: &[TsIncrement]) -> Result<()> {
        let adds = self.increments(increments, self.clock.now())?;
        self.add(adds, None).await.map(|_| ())
    }

    /// [`Tsdb::incr_multi`] with an idempotency key: the write carries the
    /// key's mark, so the same key sent again adds nothing
    /// ([`Applied::Duplicate`]). On Redis each (model, virtual shard) call
    /// carries its own mark, so each part is added once (a batch cut short
    /// by a crash is completed by its repeat); [`Applied::Written`] when
    /// any part was added this time.
    pub async fn incr_multi_once(&self, idem: &str, increments: &[TsIncrement]) -> Result<Applied> {
        let now = self.clock.now();
        let mark = Mark::of(idem, now)?;
        let adds = self.increments(increments, now)?;
        self.add(adds, Some(&mark)).await
    }

    /// The validated cell deltas of `increments`.
    fn increments(&self, increments: &[TsIncrement], now: Timestamp) -> Result<Vec<CellAdd>> {
        plan::check_batch_len(increments.len(), MAX_BATCH, "writes")?;
        let mut by_model: BTreeMap<Name, Vec<(Name, Timestamp, Value)>> = BTreeMap::new();
        for inc in increments {
            if inc.count < 1 || inc.count > MAX_COUNT {
                return Err(Error::InvalidCount(format!(
                    "{} is out of range (1 to 2^53) for {}:{}",
                    inc.count, inc.model, inc.key
                )));
            }
            let (model, key, at) = self.point(&inc.model, &inc.key, inc.at, now)?;
            by_model
                .entry(model)
                .or_default()
                .push((key, at, Value::Sum(inc.count)));
        }
        let mut adds = Vec::new();
        for (model, items) in &by_model {
            let writes = plan::plan(
                &self.counts,
                items.iter().map(|(key, at, v)| (key, *at, v.clone())),
            )
            .map_err(|e| match e {
                Error::Overflow { name, .. } => Error::InvalidCount(format!(
                    "the increments of {model}:{name} add up past 2^63"
                )),
                other => other,
            })?;
            for w in writes {
                for c in w.cells {
                    if let Some(cell) = self.cell(model, &w.name, c.precision, c.slice, now) {
                        adds.push(CellAdd {
                            cell,
                            delta: c.delta,
                        });
                    }
                }
            }
        }
        Ok(adds)
    }

    /// Records `values` as seen by `key` of `model` at `at` (default now),
    /// for distinct counts.
    pub async fn record(
        &self,
        model: &str,
        key: impl ToString,
        values: &[String],
        at: Option<f64>,
    ) -> Result<()> {
        if values.is_empty() || values.len() > MAX_VALUES {
            return Err(Error::InvalidInput(format!(
                "record 1 to {MAX_VALUES} values at once, got {}",
                values.len()
            )));
        }
        for v in values {
            Name::new(v.as_str())?;
        }
        // A distinct delta holds raw values (Redis PFADDs them, keeping its
        // HyperLogLogs sparse while small): more than fit in one are several
        // deltas to the same cell.
        let deltas: Vec<Value> = values
            .chunks(SET_CAP)
            .map(|chunk| Value::Distinct(Box::new(DistinctValue::of(chunk))))
            .collect();
        let adds = self
            .cells(model, &key.to_string(), at)?
            .into_iter()
            .flat_map(|cell| {
                deltas.iter().map(move |delta| CellAdd {
                    cell: cell.clone(),
                    delta: delta.clone(),
                })
            })
            .collect();
        self.add(adds, None).await.map(|_| ())
    }

    /// Counts occurrences of items for `key` of `model` at `at` (default
    /// now), for most-frequent queries. Each count is 1 to 2^32.
    pub async fn record_frequency(
        &self,
        model: &str,
        key: impl ToString,
        items: &[(String, i64)],
        at: Option<f64>,
    ) -> Result<()> {
        let adds = self.frequencies(model, key, items, at)?;
        self.add(adds, None).await.map(|_| ())
    }

    /// [`Tsdb::record_frequency`] with an idempotency key: counted once, as
    /// [`Tsdb::incr_multi_once`] ([`Applied::Duplicate`] for a repeat).
    pub async fn record_frequency_once(
        &self,
        idem: &str,
        model: &str,
        key: impl ToString,
        items: &[(String, i64)],
        at: Option<f64>,
    ) -> Result<Applied> {
        let mark = Mark::of(idem, self.clock.now())?;
        let adds = self.frequencies(model, key, items, at)?;
        self.add(adds, Some(&mark)).await
    }

    /// The validated cell deltas of counting `items` for `key`.
    fn frequencies(
        &self,
        model: &str,
        key: impl ToString,
        items: &[(String, i64)],
        at: Option<f64>,
    ) -> Result<Vec<CellAdd>> {
        if items.is_empty() || items.len() > MAX_VALUES {
            return Err(Error::InvalidInput(format!(
                "record 1 to {MAX_VALUES} items at once, got {}",
                items.len()
            )));
        }
        let mut delta = TopValue::default();
        for (item, count) in items {
            Name::new(item.as_str())?;
            if *count < 1 || *count > topn::MAX_ITEM_COUNT {
                return Err(Error::InvalidCount(format!(
                    "item {item:?}: {count} is out of range (1 to 2^32)"
                )));
            }
            delta.add(item, *count)?;
        }
        let delta = Value::Top(Box::new(delta));
        let adds = self
            .cells(model, &key.to_string(), at)?
            .into_iter()
            .map(|cell| CellAdd {
                cell,
                delta: delta.clone(),
            })
            .collect();
        Ok(adds)
    }

    /// Per key, (bucket start, count) for every bucket of the query's range,
    /// missing buckets as 0.
    pub async fn get_range(&self, q: &TsQuery) -> Result<RangeSeries> {
        let w = self.window(q)?;
        let counts = self.store.read(Kind::Sum, &w).await?;
        let counts = counts
            .into_iter()
            .map(|per| per.iter().map(|v| v.as_sum().unwrap_or(0)).collect())
            .collect();
        Ok(series(&w, counts))
    }

    /// Per key, the sum of [`Tsdb::get_range`]'s series.
    pub async fn get_sums(&self, q: &TsQuery) -> Result<RangeTotals> {
        let range = self.get_range(q).await?;
        Ok(RangeTotals {
            rollup: range.rollup,
            totals: range
                .series
                .into_iter()
                .map(|s| KeyTotal {
                    key: s.key,
                    total: s.points.iter().fold(0i64, |a, p| a.saturating_add(p.count)),
                })
                .collect(),
        })
    }

    /// Per key, the estimated distinct values in each bucket of the range.
    pub async fn get_distinct_series(&self, q: &TsQuery) -> Result<RangeSeries> {
        let w = self.window(q)?;
        let counts = self.store.distinct_counts(&w).await?;
        let counts = counts
            .into_iter()
            .map(|per| per.into_iter().map(|c| c as i64).collect())
            .collect();
        Ok(series(&w, counts))
    }

    /// Per key, the estimated distinct values over the whole range.
    pub async fn get_distinct_totals(&self, q: &TsQuery) -> Result<RangeTotals> {
        let w = self.window(q)?;
        let totals = self.store.distinct_totals(&w).await?;
        Ok(RangeTotals {
            rollup: w.rollup,
            totals: w
                .keys
                .iter()
                .zip(totals)
                .map(|(k, t)| KeyTotal {
                    key: k.to_string(),
                    total: t as i64,
                })
                .collect(),
        })
    }

    /// The estimated distinct values over the range across all `keys`.
    pub async fn get_distinct_union(&self, q: &TsQuery) -> Result<KeyTotal> {
        let w = self.window(q)?;
        let total = self.store.distinct_union(&w).await?;
        Ok(KeyTotal {
            key: q.keys.join(","),
            total: total as i64,
        })
    }

    /// The `n` (1 to 10,000) most frequent items over the query's range,
    /// of its key (or of its keys together, named `a,b` in the answer).
    pub async fn get_top(&self, q: &TsQuery, n: usize) -> Result<TopItems> {
        if n == 0 || n > 10_000 {
            return Err(Error::InvalidInput(format!(
                "ask for 1 to 10000 items, got {n}"
            )));
        }
        let w = self.window(q)?;
        let read = self.store.read(Kind::Top, &w).await?;
        let merged = read::merge_values(Kind::Top, read.iter().flatten())?;
        let items = match merged {
            Value::Top(t) => t.top(n),
            _ => Vec::new(),
        };
        Ok(TopItems {
            rollup: w.rollup,
            key: q.keys.join(","),
            items,
        })
    }

    /// Moves all data of `from` into `into` (every precision, counts, distinct
    /// sets and summaries); `from` is left empty. No crash at any point
    /// loses data: on Redis a half-done merge is finished by the next merge
    /// of the same keys.
    pub async fn merge(&self, model: &str, into: impl ToString, from: impl ToString) -> Result<()> {
        let model = plain("model", model)?;
        let (into, from) = (into.to_string(), from.to_string());
        let (into, from) = (plain("key", &into)?, plain("key", &from)?);
        if into == from {
            return Err(Error::InvalidInput(format!(
                "cannot merge key {into:?} into itself"
            )));
        }
        let now = self.clock.now().whole_secs();
        self.store
            .merge(&Merge {
                model,
                into,
                from,
                spans: self.spans(now),
                capacity: self.settings.top_capacity,
            })
            .await
    }

    /// Deletes every precision's data of `keys`.
    pub async fn delete(&self, model: &str, keys: &[String]) -> Result<()> {
        let model = plain("model", model)?;
        let keys = self.keys(keys)?;
        let now = self.clock.now().whole_secs();
        self.store.delete(&model, &keys, &self.spans(now)).await
    }

    /// Checks that the backend answers.
    pub async fn ping(&self) -> Result<()> {
        self.store.ping().await
    }

    fn spans(&self, now: u64) -> Vec<Span> {
        self.settings
            .precisions
            .iter()
            .map(|&precision| Span {
                precision,
                buckets: precision::live_buckets(precision, now),
            })
            .collect()
    }

    fn keys(&self, keys: &[String]) -> Result<Vec<Name>> {
        if keys.is_empty() || keys.len() > MAX_KEYS {
            return Err(Error::InvalidInput(format!(
                "ask for 1 to {MAX_KEYS} keys, got {}",
                keys.len()
            )));
        }
        keys.iter().map(|k| plain("key", k)).collect()
    }

    /// Merges `adds` through the store, with a keyed write's `mark`
    /// (nothing when every bucket written has expired already).
    async fn add(&self, adds: Vec<CellAdd>, mark: Option<&Mark>) -> Result<Applied> {
        if adds.is_empty() {
            return Ok(Applied::Written);
        }
        self.store
            .add(&adds, self.settings.top_capacity, mark)
            .await
    }

    /// A write's model, key and instant, validated: names without braces,
    /// a valid time at most [`precision::MAX_FUTURE_SECS`] after now.
    fn point(
        &self,
        model: &str,
        key: &str,
        at: Option<f64>,
        now: Timestamp,
    ) -> Result<(Name, Name, Timestamp)> {
        let model = plain("model", model)?;
        let key = plain("key", key)?;
        let at = plan::time(at, now)?;
        let (t, now) = (at.whole_secs(), now.whole_secs());
        if t > now + precision::MAX_FUTURE_SECS {
            return Err(Error::InvalidTime(format!(
                "{t} is more than {} s after now ({now})",
                precision::MAX_FUTURE_SECS
            )));
        }
        Ok((model, key, at))
    }

    /// The cell of `key`'s bucket `bucket` of the precision of `seconds`, with
    /// its expiry; `None` when that bucket has expired already.
    fn cell(
        &self,
        model: &Name,
        key: &Name,
        seconds: u64,
        bucket: u64,
        now: Timestamp,
    ) -> Option<Cell> {
        let p = self
            .settings
            .precisions
            .iter()
            .find(|p| p.seconds == seconds)?;
        let expires = precision::expires(*p, bucket);
        (expires > now.whole_secs()).then(|| Cell {
            model: model.clone(),
            key: key.clone(),
            rollup: seconds,
            bucket,
            expires,
        })
    }

    /// One cell per precision for a write at `at` (default now), skipping
    /// buckets already expired; errors for bad names and times.
    fn cells(&self, model: &str, key: &str, at: Option<f64>) -> Result<Vec<Cell>> {
        let now = self.clock.now();
        let (model, key, at) = self.point(model, key, at, now)?;
        let t = at.whole_secs();
        Ok(self
            .settings
            .precisions
            .iter()
            .filter_map(|p| self.cell(&model, &key, p.seconds, p.slice_of_second(t), now))
            .collect())
    }

    fn window(&self, q: &TsQuery) -> Result<Window> {
        let model = plain("model", &q.model)?;
        let keys = self.keys(&q.keys)?;
        let (start, end) = (
            Timestamp::from_secs_f64(q.start)?.whole_secs(),
            Timestamp::from_secs_f64(q.end)?.whole_secs(),
        );
        if end < start {
            return Err(Error::InvalidInput(format!(
                "the range ends ({end}) before it starts ({start})"
            )));
        }
        let now = self.clock.now().whole_secs();
        let p = match q.precision {
            Some(seconds) => *self
                .settings
                .precisions
                .iter()
                .find(|p| p.seconds == seconds)
                .ok_or_else(|| Error::UnknownPrecision {
                    precision: seconds,
                    configured: self
                        .settings
                        .precisions
                        .iter()
                        .map(|p| p.seconds.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                })?,
            None => precision::optimal(&self.settings.precisions, start, now),
        };
        let points = (p.slice_of_second(end) - p.slice_of_second(start)) / p.seconds + 1;
        if points > precision::MAX_POINTS {
            return Err(Error::InvalidInput(format!(
                "the range covers {points} buckets of {} s; at most {} per read",
                p.seconds,
                precision::MAX_POINTS
            )));
        }
        Ok(Window {
            model,
            keys,
            rollup: p.seconds,
            buckets: precision::buckets(p, start, end),
            now,
        })
    }
}

fn series(r: &Window, values: Vec<Vec<i64>>) -> RangeSeries {
    RangeSeries {
        rollup: r.rollup,
        series: r
            .keys
            .iter()
            .zip(values)
            .map(|(key, per)| KeySeries {
                key: key.to_string(),
                points: r
                    .buckets
                    .iter()
                    .zip(per)
                    .map(|(&start, count)| Sample { start, count })
                    .collect(),
            })
            .collect(),
    }
}
