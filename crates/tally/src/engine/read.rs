//! The read path: one series' slices at every precision, or a range
//! `[from, to]` merged into one value per series, or several series merged
//! into one.
//!
//! A range is read at the finest precision whose kept slices, measured
//! back from now, still reach `from` ([`precision::choose`]); the slices
//! overlapping the range (those starting in `[slice_start(from), to]`) are
//! merged with the kind's merge. The store is asked once, in one round trip
//! for every series. What a service shows of a value (a count, a
//! statistic's quantiles) is the service's business: this module returns
//! values.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::clock::Timestamp;
use crate::engine::aggregate::{Kind, Value};
use crate::engine::precision::{self, Precision};
use crate::engine::store::{SliceRead, SliceSel, SliceStore, Slices, Space};
use crate::error::{Error, Result};
use crate::name::Name;

/// Where a range read looks: one precision and the slices it selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeRead {
    /// The precision read.
    pub precision: Precision,
    /// The slices merged.
    pub slices: SliceSel,
}

/// Where the range `[from, to]` (Unix seconds) is read in `space` at
/// `now`; `None` when `to` is before `from`.
pub fn range(space: &Space, now: Timestamp, from: u64, to: u64) -> Option<RangeRead> {
    if to < from {
        return None;
    }
    let r = *precision::choose(&space.precisions, now, from)?;
    Some(RangeRead {
        precision: r,
        slices: SliceSel::Range {
            from: r.slice_of_second(from),
            to,
        },
    })
}

/// Merges slices into one value of `space`'s kind (its identity when there
/// are none).
pub fn merge_slices(space: &Space, slices: &[(u64, Value)]) -> Result<Value> {
    merge_values(space.kind, slices.iter().map(|(_, v)| v))
}

/// Merges values of `kind` into one (the kind's identity when there are
/// none).
pub fn merge_values<'a>(kind: Kind, values: impl IntoIterator<Item = &'a Value>) -> Result<Value> {
    let mut total = kind.identity();
    for v in values {
        total.merge(v)?;
    }
    Ok(total)
}

/// The range `[from, to]` of each series in `names`, each merged into one
/// value; one round trip. Fails with [`Error::InvalidTime`] when `to` is
/// before `from`.
pub async fn read_range(
    store: &dyn SliceStore,
    space: &Space,
    names: &[Name],
    now: Timestamp,
    from: u64,
    to: u64,
) -> Result<Vec<Value>> {
    let plan = range(space, now, from, to).ok_or_else(|| {
        Error::InvalidTime(format!("a range's end ({to}) is before its start ({from})"))
    })?;
    let per = store
        .read(SliceRead::new(space, names, &[plan.precision.seconds]).slices(plan.slices))
        .await?;
    per.into_iter()
        .map(|mut rs| merge_slices(space, &rs.pop().unwrap_or_default()))
        .collect()
}

/// Every stored slice of each series at each of `precisions`, oldest
/// first (`result[i][j]`: `names[i]` at `precisions[j]`); one round trip.
pub async fn read_all(
    store: &dyn SliceStore,
    space: &Space,
    names: &[Name],
    precisions: &[u64],
) -> Result<Vec<Vec<Slices>>> {
    store.read(SliceRead::new(space, names, precisions)).await
}

/// One stored sample: the slice start and its count.
///
/// Serialized as a two-element array `[start, count]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sample {
    /// Slice start, Unix seconds.
    pub start: u64,
    /// The count in that slice.
    pub count: i64,
}

impl Serialize for Sample {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        (self.start, self.count).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Sample {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let (start, count) = <(u64, i64)>::deserialize(d)?;
        Ok(Sample { start, count })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ts;

    #[test]
    fn a_range_reads_the_finest_covering_resolution_from_the_slice_of_its_start() {
        let space = Space::counters(&[1, 60, 3600], 120);
        let now = ts(1_000_000.0);
        let r = range(&space, now, 999_990, 1_000_000).unwrap();
        assert_eq!(r.precision.seconds, 1);
        assert_eq!(
            r.slices,
            SliceSel::Range {
                from: 999_990,
                to: 1_000_000
            }
        );
        // Two hours back: beyond 1 s x 120, within 60 s x 120.
        let r = range(&space, now, 1_000_000 - 7_000, 1_000_000).unwrap();
        assert_eq!(r.precision.seconds, 60);
        assert_eq!(
            r.slices,
            SliceSel::Range {
                from: (1_000_000 - 7_000) / 60 * 60,
                to: 1_000_000
            }
        );
        assert!(range(&space, now, 10, 9).is_none());
    }

    #[test]
    fn slices_merge_with_the_kind() {
        let space = Space::counters(&[1], 10);
        let slices = vec![(1, Value::Sum(2)), (2, Value::Sum(-5)), (3, Value::Sum(10))];
        assert_eq!(merge_slices(&space, &slices).unwrap(), Value::Sum(7));
        assert_eq!(merge_slices(&space, &[]).unwrap(), Value::Sum(0));
        let over = vec![(1, Value::Sum(i64::MAX)), (2, Value::Sum(1))];
        assert!(matches!(
            merge_slices(&space, &over),
            Err(Error::Overflow { .. })
        ));
    }
}
