//! Gauges: values that are set or adjusted (statsd `name:42|g`,
//! `name:+3|g`, `name:-3|g`), kept per slice at several precisions as the
//! slice's last, lowest and highest value.
//!
//! [`Gauges`] is the service over the slice engine's `gauges` space (the
//! gauge kind, [`crate::engine::kinds::gauge`]): it validates operations
//! (names, finite values, times), composes a call's operations into one
//! delta per (gauge, precision, slice) with the engine's plan, in the order
//! they were given (the order of a gauge's operations is its meaning), and
//! hands them to the store in one round trip (per node on a cluster), all
//! or nothing. The store keeps each gauge's current value (the value after
//! its latest operation): an adjustment in a slice that holds nothing yet
//! starts from it, so `+1` after a restart continues where the gauge was.
//! Reads: every slice of a precision, the current value, listing, delete.
//! [`GaugesWriter`] is the engine's aggregating writer over the same space
//! (the statsd listener's path). The counters' [`crate::Cleaner`] trims old
//! slices; a gauge's current value outlives them (a gauge keeps its value
//! until it is set again or deleted, as statsd's do).
//!
//! What it does not do: hold values of its own, or talk to a backend
//! directly. On a Redis Cluster, a batch over gauges of several shards that
//! one shard refuses cannot be taken back on the others (as for
//! statistics): keep such batches to valid values.

use serde::{Deserialize, Serialize};

use crate::engine::kinds::GaugeValue;
use crate::engine::kinds::gauge::GaugeReading;
use crate::engine::series::{
    PlainRules, Rules, SeriesService, SeriesWriter, SliceSeries, operation,
};
use crate::engine::{Applied, Kind, Value};
use crate::error::{Error, Result};

/// The gauges' space id (Redis keys `{<prefix>:<shard>}:gauges:...`,
/// SQLite tables `tally_gauges_*`).
pub const SPACE: &str = "gauges";

pub use crate::engine::series::{MAX_BATCH, MAX_PAGE};

/// One operation on a gauge as a caller states it: exactly one of `value`
/// (set) and `delta` (adjust); `at` defaults to now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GaugeOp {
    /// The gauge.
    pub name: String,
    /// Set the gauge to this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Add this to the gauge (negative to subtract).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<f64>,
    /// Unix seconds with a fraction; defaults to now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<f64>,
}

operation!(GaugeOp, "gauge operation");

impl GaugeOp {
    /// "Set `name` to `value`", now.
    pub fn set(name: impl Into<String>, value: f64) -> Self {
        GaugeOp {
            name: name.into(),
            value: Some(value),
            delta: None,
            at: None,
        }
    }

    /// "Add `delta` to `name`", now.
    pub fn adjust(name: impl Into<String>, delta: f64) -> Self {
        GaugeOp {
            name: name.into(),
            value: None,
            delta: Some(delta),
            at: None,
        }
    }

    /// The same operation at `at` Unix seconds.
    pub fn at(mut self, at: f64) -> Self {
        self.at = Some(at);
        self
    }

    /// The operation as the gauge kind's delta.
    fn delta(&self) -> Result<GaugeValue> {
        let named = |e: Error| match e {
            Error::InvalidInput(why) => {
                Error::InvalidInput(format!("gauge {:?}: {why}", self.name))
            }
            other => other,
        };
        match (self.value, self.delta) {
            (Some(v), None) => GaugeValue::set(v).map_err(named),
            (None, Some(d)) => GaugeValue::adjust(d).map_err(named),
            _ => Err(Error::InvalidInput(format!(
                "gauge {:?}: give exactly one of `value` (set) and `delta` (adjust)",
                self.name
            ))),
        }
    }
}

/// One slice of a gauge: when it starts, and its last, lowest and highest
/// values.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct GaugeSlice {
    /// The slice's start, Unix seconds.
    pub start: u64,
    /// The value after the slice's last operation.
    pub last: f64,
    /// The lowest value held after an operation in the slice.
    pub min: f64,
    /// The highest.
    pub max: f64,
}

/// Every slice of a gauge at one precision, oldest first.
pub type GaugeSeries = SliceSeries<GaugeSlice>;

/// The gauge kind's rules for [`SeriesService`]: operations set or adjust.
#[derive(Debug, Default)]
pub struct GaugeRules;

impl PlainRules for GaugeRules {
    const SPACE: &'static str = SPACE;
    const KIND: Kind = Kind::Gauge;
    type Slice = GaugeSlice;

    fn slice(start: u64, v: &Value) -> Result<GaugeSlice> {
        let r = reading_of(v)?;
        Ok(GaugeSlice {
            start,
            last: r.last,
            min: r.min,
            max: r.max,
        })
    }
}

impl Rules for GaugeRules {
    type Op = GaugeOp;
    const WRITER: &'static str = "GaugesWriter";

    fn delta(&self, op: &GaugeOp) -> Result<Value> {
        Ok(Value::Gauge(Box::new(op.delta()?)))
    }
}

/// Named gauges at several precisions. Cheap to clone.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tally::Result<()> {
/// use tally::gauges::GaugeOp;
///
/// let tally = tally::Tally::open("sqlite::memory:").await?;
/// let gauges = tally.gauges();
/// let at = 1336376415.0;
/// gauges
///     .apply_many(&[GaugeOp::set("queue", 5.0).at(at),
///                   GaugeOp::adjust("queue", 3.0).at(at),
///                   GaugeOp::adjust("queue", -6.0).at(at)])
///     .await?; // one round trip, in this order
/// let minute = gauges.get("queue", 60).await?;
/// assert_eq!((minute[0].last, minute[0].min, minute[0].max), (2.0, 2.0, 8.0));
/// assert_eq!(gauges.current("queue").await?, Some(2.0));
/// # Ok(())
/// # }
/// ```
pub type Gauges = SeriesService<GaugeRules>;

/// The gauges' aggregating writer: operations composed in process, in the
/// order they came, written in batches, each exactly once
/// ([`SeriesWriter`]). Cheap to clone.
pub type GaugesWriter = SeriesWriter<GaugeRules>;

impl SeriesService<GaugeRules> {
    /// Sets `name` to `value` now.
    pub async fn set(&self, name: &str, value: f64) -> Result<()> {
        self.apply_many(&[GaugeOp::set(name, value)]).await
    }

    /// Sets `name` to `value` at `at` Unix seconds.
    pub async fn set_at(&self, name: &str, value: f64, at: f64) -> Result<()> {
        self.apply_many(&[GaugeOp::set(name, value).at(at)]).await
    }

    /// Adds `delta` to `name` now (negative to subtract).
    pub async fn adjust(&self, name: &str, delta: f64) -> Result<()> {
        self.apply_many(&[GaugeOp::adjust(name, delta)]).await
    }

    /// Applies operations over any gauges, in order, in one round trip (per
    /// node on a cluster), all or nothing: if any is invalid (a name, a
    /// value that is not finite, neither or both of value and delta, a
    /// time) or would make a value infinite, nothing is written.
    pub async fn apply_many(&self, ops: &[GaugeOp]) -> Result<()> {
        self.write(ops).await
    }

    /// [`Gauges::apply_many`] with an idempotency key, applied once
    /// ([`SeriesService::write_once`]).
    pub async fn apply_many_once(&self, key: &str, ops: &[GaugeOp]) -> Result<Applied> {
        self.write_once(key, ops).await
    }

    /// The gauge's value after its latest operation that a kept slice
    /// holds (the newest slice's last value at the finest precision that
    /// has one); `None` for a gauge with no slice. One round trip.
    pub async fn current(&self, name: &str) -> Result<Option<f64>> {
        let all = self.get_all(name).await?;
        Ok(all
            .iter()
            .find_map(|s| s.slices.last())
            .map(|slice| slice.last))
    }
}

/// The reading of a stored gauge slice.
fn reading_of(v: &Value) -> Result<GaugeReading> {
    match v {
        Value::Gauge(g) => g.reading().ok_or_else(|| {
            Error::Corrupt("a stored gauge slice depends on a value before it".into())
        }),
        other => Err(other.misplaced(SPACE)),
    }
}

/// What Graphite sees of a gauge: one leaf, its last value per slice
/// (`N` in Tally's namespace, `stats.gauges.N` in statsd's).
impl SeriesService<GaugeRules> {
    /// The gauges' place in the Graphite namespace `ns`.
    pub fn graphite_shapes(&self, ns: crate::graphite::Namespace) -> Vec<crate::graphite::Shape> {
        let root = match ns {
            crate::graphite::Namespace::Tally => "",
            crate::graphite::Namespace::Statsd => "stats.gauges",
        };
        vec![crate::graphite::Shape::single(root, graphite_last)]
    }
}

/// A gauge slice's last value.
fn graphite_last(v: &Value, _step: u64) -> Option<f64> {
    match v {
        Value::Gauge(g) => g.reading().map(|r| r.last),
        _ => None,
    }
}

impl SeriesWriter<GaugeRules> {
    /// Takes one operation without ever waiting: fails with
    /// [`Error::Overloaded`] when full.
    pub fn try_apply(&self, op: &GaugeOp) -> Result<()> {
        self.try_take(op)
    }
}
