//! Counters' view of the slice engine's write path: the increments a
//! service validates, and the per-counter deltas a [`super::CounterStore`]
//! is handed.
//!
//! A precision `p` divides time into slices `[k·p, (k+1)·p)`; an increment at
//! `t` lands in the slice starting at `floor(t / p) · p`. The slice math
//! itself (slice starts, the cleaner's cutoff and cadence, peak sizes) is the
//! engine's ([`crate::engine::resolution`]), re-exported here under the
//! names counters always used; merging a batch into one delta per (counter,
//! precision, slice) is the engine's [`crate::engine::plan`].

use crate::clock::Timestamp;
use crate::engine::kinds::sum;
use crate::engine::{CellDelta, SeriesWrite, Space, Value};
use crate::error::{Error, Result};
use crate::name::Name;

pub use crate::engine::resolution::{cutoff, is_due, peak_slices as peak_samples, slice_start};

/// One (precision, slice) delta of one counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SliceDelta {
    /// Slice length in seconds.
    pub precision: u64,
    /// Slice start, Unix seconds.
    pub slice: u64,
    /// What to add (never `i64::MIN`, so it can always be negated).
    pub delta: i64,
}

/// Everything one write adds to one counter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterWrite {
    /// The counter.
    pub name: Name,
    /// Deltas ordered by precision, then slice; one per (precision, slice).
    pub deltas: Vec<SliceDelta>,
}

impl CounterWrite {
    /// The same write in the engine's form.
    pub fn to_series(&self) -> SeriesWrite {
        SeriesWrite {
            name: self.name.clone(),
            cells: self
                .deltas
                .iter()
                .map(|d| CellDelta {
                    resolution: d.precision,
                    slice: d.slice,
                    delta: Value::Sum(d.delta),
                })
                .collect(),
        }
    }

    /// A counter's write from the engine's form; fails (an internal error)
    /// if a delta is not a sum.
    pub fn from_series(write: SeriesWrite) -> Result<Self> {
        Ok(CounterWrite {
            deltas: write
                .cells
                .into_iter()
                .map(|c| {
                    Ok(SliceDelta {
                        precision: c.resolution,
                        slice: c.slice,
                        delta: c.delta.as_sum().ok_or_else(|| {
                            Error::Backend(format!(
                                "internal error: counter {} was given a {} delta",
                                write.name,
                                c.delta.kind()
                            ))
                        })?,
                    })
                })
                .collect::<Result<_>>()?,
            name: write.name,
        })
    }
}

/// A validated increment: the unit the service hands to [`plan`].
#[derive(Clone, Debug, PartialEq)]
pub struct ValidIncrement {
    /// The counter.
    pub name: Name,
    /// The amount, never `i64::MIN`.
    pub count: i64,
    /// When it happened.
    pub at: Timestamp,
}

/// Checks that a count can be stored and negated.
pub fn check_count(count: i64) -> Result<i64> {
    sum::check(count)
}

/// Merges increments into one delta per (counter, precision, slice), every
/// precision included, counters in name order: the engine's plan over the
/// counters' space.
///
/// Fails with [`Error::Overflow`] when a merged delta does not fit in 64 bits
/// (or is `i64::MIN`); then nothing may be written.
pub fn plan(increments: &[ValidIncrement], precisions: &[u64]) -> Result<Vec<CounterWrite>> {
    let space = Space::counters(precisions, 1);
    crate::engine::plan::plan(
        &space,
        increments
            .iter()
            .map(|inc| (&inc.name, inc.at, Value::Sum(inc.count))),
    )?
    .into_iter()
    .map(CounterWrite::from_series)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(secs: f64) -> Timestamp {
        Timestamp::from_secs_f64(secs).unwrap()
    }

    #[test]
    fn plan_merges_per_slice_and_orders_by_name() {
        let inc = |name: &str, count, at| ValidIncrement {
            name: Name::new(name).unwrap(),
            count,
            at: ts(at),
        };
        let writes = plan(
            &[inc("b", 1, 100.0), inc("a", 2, 100.0), inc("b", 3, 101.0)],
            &[1, 60],
        )
        .unwrap();
        assert_eq!(writes.len(), 2);
        assert_eq!(writes[0].name.as_str(), "a");
        let b = &writes[1].deltas;
        assert_eq!(
            b,
            &vec![
                SliceDelta {
                    precision: 1,
                    slice: 100,
                    delta: 1
                },
                SliceDelta {
                    precision: 1,
                    slice: 101,
                    delta: 3
                },
                SliceDelta {
                    precision: 60,
                    slice: 60,
                    delta: 4
                },
            ]
        );
        // The engine's form and back.
        assert_eq!(
            CounterWrite::from_series(writes[1].to_series()).unwrap(),
            writes[1]
        );
    }

    #[test]
    fn plan_reports_overflow_of_a_merged_delta() {
        let inc = |count| ValidIncrement {
            name: Name::new("x").unwrap(),
            count,
            at: ts(5.0),
        };
        let err = plan(&[inc(i64::MAX), inc(1)], &[1]).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Overflow {
                    precision: 1,
                    slice: 5,
                    ..
                }
            ),
            "{err}"
        );
        assert!(check_count(i64::MIN).is_err());
        assert_eq!(check_count(-5).unwrap(), -5);
    }
}
