//! The kinds of value kept per slice, one module each: its math, its merge
//! rule and its pure encoding, nothing else. This file is the list of
//! kinds: their modules, the [`Kind`] tag and the [`Value`] enum that
//! dispatches to each (a new kind is its module and one arm in each).

use std::fmt;

use crate::engine::aggregate::{Aggregate, Codec, Undo};
use crate::error::{Error, Result};

pub mod distinct;
pub mod gauge;
pub mod hll;
#[cfg(test)]
mod laws;
pub(crate) mod msgpack;
pub mod sketch;
pub mod stats;
pub mod sum;
pub mod top;

pub use distinct::DistinctValue;
pub use gauge::GaugeValue;
pub use hll::Hll;
pub use sketch::{Sketch, SketchSettings};
pub use stats::StatsValue;
pub use top::TopValue;

/// Which kind of value a space keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// A signed 64-bit sum ([`super::kinds::sum`]).
    Sum,
    /// A set of distinct values, a HyperLogLog when large
    /// ([`super::kinds::distinct`]).
    Distinct,
    /// Item counts, kept as a bounded summary ([`super::kinds::top`]).
    Top,
    /// Moments and a quantile sketch ([`super::kinds::stats`]).
    Stats,
    /// Last, lowest and highest value ([`super::kinds::gauge`]).
    Gauge,
}

impl Kind {
    /// The kind's code in stores: the Lua scripts' dispatch key
    /// (`KIND_MERGE` in `engine_kinds.lua`).
    pub const fn code(self) -> u8 {
        match self {
            Kind::Sum => 1,
            Kind::Distinct => 2,
            Kind::Top => 3,
            Kind::Stats => 4,
            Kind::Gauge => 5,
        }
    }

    /// The kind's name, for messages.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Sum => "sum",
            Kind::Distinct => "distinct",
            Kind::Top => "top",
            Kind::Stats => "stats",
            Kind::Gauge => "gauge",
        }
    }

    /// What a series of the kind is called in the words of its service, for
    /// error messages: a sum is a counter, a stats value a statistic, a
    /// distinct value a set (a time series' spaces say "time series"
    /// instead: [`super::Space::noun`]).
    pub const fn noun(self) -> &'static str {
        match self {
            Kind::Sum => "counter",
            Kind::Distinct => "set",
            Kind::Top => "top-N series",
            Kind::Stats => "statistic",
            Kind::Gauge => "gauge",
        }
    }

    /// The value an empty slice reads as.
    pub fn identity(self) -> Value {
        match self {
            Kind::Sum => Value::Sum(0),
            Kind::Distinct => Value::Distinct(Box::default()),
            Kind::Top => Value::Top(Box::default()),
            Kind::Stats => Value::Stats(Box::default()),
            Kind::Gauge => Value::Gauge(Box::default()),
        }
    }

    /// True when the kind's merge can be taken back ([`Undo`]).
    pub const fn has_undo(self) -> bool {
        matches!(self, Kind::Sum | Kind::Top)
    }

    /// Reads a stored value of this kind from its encoding ([`Codec`]).
    pub fn decode(self, bytes: &[u8]) -> Result<Value> {
        Ok(match self {
            Kind::Sum => Value::Sum(i64::decode(bytes)?),
            Kind::Distinct => Value::Distinct(Box::new(DistinctValue::decode(bytes)?)),
            Kind::Top => Value::Top(Box::new(TopValue::decode(bytes)?)),
            Kind::Stats => Value::Stats(Box::new(StatsValue::decode(bytes)?)),
            Kind::Gauge => Value::Gauge(Box::new(GaugeValue::decode(bytes)?)),
        })
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One value of any kind: a delta a write carries, or what a slice holds.
///
/// Every kind but sums is boxed, so a value is two words: the aggregating
/// writer's table holds millions of sums, and their size is its memory.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// A sum ([`Kind::Sum`]).
    Sum(i64),
    /// Distinct values ([`Kind::Distinct`]).
    Distinct(Box<DistinctValue>),
    /// Item counts ([`Kind::Top`]).
    Top(Box<TopValue>),
    /// Statistics ([`Kind::Stats`]).
    Stats(Box<StatsValue>),
    /// A gauge's operations ([`Kind::Gauge`]).
    Gauge(Box<GaugeValue>),
}

impl Value {
    /// The value's kind.
    pub const fn kind(&self) -> Kind {
        match self {
            Value::Sum(_) => Kind::Sum,
            Value::Distinct(_) => Kind::Distinct,
            Value::Top(_) => Kind::Top,
            Value::Stats(_) => Kind::Stats,
            Value::Gauge(_) => Kind::Gauge,
        }
    }

    /// Folds `other` into `self` with the kind's merge; fails, changing
    /// nothing, where the kind's range would be left, and (an internal
    /// error) when the kinds differ.
    #[inline]
    pub fn merge(&mut self, other: &Value) -> Result<()> {
        match (self, other) {
            (Value::Sum(a), Value::Sum(b)) => a.merge(b),
            (Value::Distinct(a), Value::Distinct(b)) => Aggregate::merge(a.as_mut(), b),
            (Value::Top(a), Value::Top(b)) => Aggregate::merge(a.as_mut(), b),
            (Value::Stats(a), Value::Stats(b)) => Aggregate::merge(a.as_mut(), b),
            (Value::Gauge(a), Value::Gauge(b)) => Aggregate::merge(a.as_mut(), b),
            (a, b) => Err(mismatch(a.kind(), b.kind())),
        }
    }

    /// Takes back an earlier `merge(other)`, for kinds with [`Undo`]; fails
    /// for the others (and where the range would be left).
    pub fn subtract(&mut self, other: &Value) -> Result<()> {
        match (self, other) {
            (Value::Sum(a), Value::Sum(b)) => a.subtract(b),
            (Value::Top(a), Value::Top(b)) => a.subtract(b),
            (a, b) if a.kind() == b.kind() => Err(Error::Backend(format!(
                "internal error: {} values cannot be taken back",
                a.kind()
            ))),
            (a, b) => Err(mismatch(a.kind(), b.kind())),
        }
    }

    /// Checks that a delta is one its kind accepts from a caller (a sum is
    /// anything but `i64::MIN`, so it can be negated). The other kinds'
    /// deltas are checked as they are made (a statistic refuses a value
    /// that is not finite), so any value of them is accepted here.
    pub fn check(&self) -> Result<()> {
        match self {
            Value::Sum(a) => super::kinds::sum::check(*a).map(|_| ()),
            _ => Ok(()),
        }
    }

    /// True when merging `self` changes nothing.
    pub fn is_identity(&self) -> bool {
        match self {
            Value::Sum(a) => a.is_identity(),
            Value::Distinct(a) => a.is_identity(),
            Value::Top(a) => a.is_identity(),
            Value::Stats(a) => a.is_identity(),
            Value::Gauge(a) => a.is_identity(),
        }
    }

    /// Appends the kind's encoding of `self` to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Value::Sum(a) => a.encode(out),
            Value::Distinct(a) => a.encode(out),
            Value::Top(a) => a.encode(out),
            Value::Stats(a) => a.encode(out),
            Value::Gauge(a) => a.encode(out),
        }
    }

    /// The internal error of `self` read from the space `space`, which
    /// keeps values of another kind (a space keeps one kind, so this is a
    /// bug).
    pub(crate) fn misplaced(&self, space: &str) -> Error {
        Error::Backend(format!(
            "internal error: the {space} space holds a {} value",
            self.kind()
        ))
    }

    /// The sum, for a value of [`Kind::Sum`].
    pub const fn as_sum(&self) -> Option<i64> {
        match self {
            Value::Sum(a) => Some(*a),
            _ => None,
        }
    }
}

/// The internal error of merging values of different kinds (a space keeps
/// one kind, so this is a bug, not bad input).
fn mismatch(a: Kind, b: Kind) -> Error {
    Error::Backend(format!(
        "internal error: cannot merge a {b} value into a {a} value"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_dispatch_to_their_kind() {
        let mut v = Kind::Sum.identity();
        assert!(v.is_identity());
        v.merge(&Value::Sum(5)).unwrap();
        v.merge(&Value::Sum(-2)).unwrap();
        assert_eq!(v, Value::Sum(3));
        assert_eq!(v.as_sum(), Some(3));
        v.subtract(&Value::Sum(3)).unwrap();
        assert!(v.is_identity());
        let mut out = Vec::new();
        Value::Sum(-12).encode(&mut out);
        assert_eq!(Kind::Sum.decode(&out).unwrap(), Value::Sum(-12));
        assert_eq!(Kind::Sum.code(), 1);
        assert!(Kind::Sum.has_undo());
        assert!(Value::Sum(i64::MIN).check().is_err());
        Value::Sum(-3).check().unwrap();
        // A refused merge changes nothing.
        let mut full = Value::Sum(i64::MAX);
        assert!(full.merge(&Value::Sum(1)).is_err());
        assert_eq!(full, Value::Sum(i64::MAX));
    }

    #[test]
    fn every_kind_dispatches_and_kinds_do_not_mix() {
        let mut stats = StatsValue::default();
        stats.record(2.0).unwrap();
        stats.record(4.0).unwrap();
        let values = [
            Value::Sum(3),
            Value::Distinct(Box::new(DistinctValue::of(["a", "b"]))),
            Value::Top(Box::new(TopValue::from_counts([("x", 2)]).unwrap())),
            Value::Stats(Box::new(stats)),
            Value::Gauge(Box::new(GaugeValue::set(1.5).unwrap())),
        ];
        let mut codes: Vec<u8> = values.iter().map(|v| v.kind().code()).collect();
        codes.dedup();
        assert_eq!(codes.len(), 5);
        for v in &values {
            let kind = v.kind();
            // Identity on either side changes nothing.
            let mut x = kind.identity();
            assert!(x.is_identity(), "{kind}");
            x.merge(v).unwrap();
            assert_eq!(&x, v, "{kind}");
            let mut y = v.clone();
            y.merge(&kind.identity()).unwrap();
            assert_eq!(&y, v, "{kind}");
            // The encoding reads back as the same value.
            let mut bytes = Vec::new();
            v.encode(&mut bytes);
            assert_eq!(&kind.decode(&bytes).unwrap(), v, "{kind}");
            v.check().unwrap();
        }
        // Merging across kinds is an internal error that changes nothing.
        let mut sum = Value::Sum(1);
        let err = sum.merge(&values[3]).unwrap_err();
        assert!(
            err.to_string()
                .contains("cannot merge a stats value into a sum value"),
            "{err}"
        );
        assert_eq!(sum, Value::Sum(1));
        // Kinds with Undo take a merge back; the others say they cannot.
        let mut top = values[2].clone();
        top.merge(&values[2]).unwrap();
        top.subtract(&values[2]).unwrap();
        assert_eq!(top, values[2]);
        assert!(Kind::Top.has_undo() && !Kind::Stats.has_undo());
        let mut st = values[3].clone();
        assert!(
            st.subtract(&values[3])
                .unwrap_err()
                .to_string()
                .contains("cannot be taken back")
        );
        assert_eq!(std::mem::size_of::<Value>(), 16);
    }
}
