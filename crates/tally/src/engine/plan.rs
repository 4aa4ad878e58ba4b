//! The write path's pure half: validation of a write's times and size, and
//! its precision into one merged delta per (series, precision, slice).
//!
//! Every service hands its validated items (a name, an instant, a delta of
//! its space's kind) to [`plan`], which puts each item into its slice at
//! every precision of the space and merges the deltas that land in the
//! same slice with the kind's merge. A merge that leaves the kind's range
//! fails the whole plan, so nothing of the write reaches a store: writes
//! are all or nothing from here on. Series come out in name order, each
//! once, with their cells ordered by precision then slice: the order
//! stores write in (and lock in, for SQLite).
//!
//! Names are validated by [`crate::name::Name`] before they get here; each
//! kind validates its own deltas where they are made (a sum refuses
//! `i64::MIN`, a statistic a value that is not finite).

use crate::clock::Timestamp;
use crate::engine::aggregate::Value;
use std::sync::Arc;

use crate::engine::store::{Batch, CellDelta, SeriesWrite, Space};
use crate::error::{Error, Result};
use crate::name::Name;

/// One validated write item: a delta of the space's kind for a series at
/// an instant.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    /// The series.
    pub name: Name,
    /// When it happened.
    pub at: Timestamp,
    /// What to merge (already checked with [`Value::check`]).
    pub delta: Value,
}

/// The count of a write that states none (serde's default for the
/// `count` of an increment or a view): 1.
pub(crate) fn one() -> i64 {
    1
}

/// The instant of a write: `at` (Unix seconds with a fraction) validated,
/// or `now` when it is not given.
pub fn time(at: Option<f64>, now: Timestamp) -> Result<Timestamp> {
    match at {
        Some(at) => Timestamp::from_secs_f64(at),
        None => Ok(now),
    }
}

/// Checks that a batch of `len` items is not empty and holds at most `max`.
pub fn check_batch(len: usize, max: usize, what: &str) -> Result<()> {
    if len == 0 {
        return Err(Error::InvalidInput(format!(
            "a batch needs at least one {what}"
        )));
    }
    if len > max {
        return Err(Error::InvalidInput(format!(
            "a batch holds at most {max} {what}s, got {len}"
        )));
    }
    Ok(())
}

/// Checks that a batch of `len` writes holds 1 to `max`, in the words of
/// the services whose batches are bounded both ways at once (time series,
/// daily statistics): "a batch holds 1 to `max` `what`, got `len`".
pub fn check_batch_len(len: usize, max: usize, what: &str) -> Result<()> {
    if len == 0 || len > max {
        return Err(Error::InvalidInput(format!(
            "a batch holds 1 to {max} {what}, got {len}"
        )));
    }
    Ok(())
}

/// Names the series (of `space`), precision and slice in an error of a
/// kind's merge (which knows none of them); other errors pass unchanged.
pub fn locate(e: Error, space: &Space, name: &str, precision: u64, slice: u64) -> Error {
    match e {
        Error::Overflow { delta, .. } => Error::Overflow {
            kind: space.noun(),
            name: name.to_owned(),
            precision,
            slice,
            delta,
        },
        other => other,
    }
}

/// A service's batch: 1 to `max` items (else an error naming `what`),
/// each validated by `validate` (`now` standing in for a missing time)
/// before anything is planned, then [`plan`]ned into one batch of `space`
/// without a sequence number. Nothing is written.
pub fn prepare<T>(
    space: &Arc<Space>,
    items: &[T],
    max: usize,
    what: &str,
    now: Timestamp,
    validate: impl Fn(&T, Timestamp) -> Result<(Name, Timestamp, Value)>,
) -> Result<Batch> {
    check_batch(items.len(), max, what)?;
    let valid = items
        .iter()
        .map(|item| validate(item, now))
        .collect::<Result<Vec<_>>>()?;
    Ok(Batch {
        writes: plan(space, valid.iter().map(|(n, at, v)| (n, *at, v.clone())))?,
        space: space.clone(),
        seq: None,
    })
}

/// Resolves `items` (series, instant, delta) into one merged delta per
/// (series, precision, slice) at every precision of `space`.
///
/// Fails when a merged delta leaves its kind's range (for sums,
/// [`Error::Overflow`] naming the series, precision and slice, and the
/// item's delta that did not fit); then nothing may be written.
pub fn plan<'a>(
    space: &Space,
    items: impl IntoIterator<Item = (&'a Name, Timestamp, Value)>,
) -> Result<Vec<SeriesWrite>> {
    let precisions = &space.precisions;
    let mut items = items.into_iter();
    let Some(first) = items.next() else {
        return Ok(Vec::new());
    };
    let Some(second) = items.next() else {
        // One item (an exact increment): one cell per precision, already in
        // order, nothing to merge.
        let (name, at, delta) = first;
        let mut cells = Vec::with_capacity(precisions.len());
        for r in precisions {
            cells.push(CellDelta {
                precision: r.seconds,
                slice: r.slice_start(at),
                delta: delta.clone(),
            });
        }
        return Ok(vec![SeriesWrite {
            name: name.clone(),
            cells,
        }]);
    };
    // Every (series, precision, slice) cell of every item, sorted stably
    // (items of the same cell keep their order: a gauge's meaning is its
    // order), then merged run by run.
    let (low, _) = items.size_hint();
    let mut all: Vec<(&Name, u64, u64, Value)> = Vec::with_capacity((low + 2) * precisions.len());
    for (name, at, delta) in [first, second].into_iter().chain(items) {
        for r in precisions {
            all.push((name, r.seconds, r.slice_start(at), delta.clone()));
        }
    }
    all.sort_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)));
    let mut writes: Vec<SeriesWrite> = Vec::new();
    let mut cells = all.into_iter();
    let Some((mut name, precision, slice, delta)) = cells.next() else {
        return Ok(writes);
    };
    let mut current = vec![CellDelta {
        precision,
        slice,
        delta,
    }];
    for (n, precision, slice, delta) in cells {
        if n != name {
            writes.push(SeriesWrite {
                name: name.clone(),
                cells: std::mem::take(&mut current),
            });
            name = n;
        }
        match current.last_mut() {
            Some(c) if c.precision == precision && c.slice == slice => c
                .delta
                .merge(&delta)
                .map_err(|e| locate(e, space, name.as_str(), precision, slice))?,
            _ => current.push(CellDelta {
                precision,
                slice,
                delta,
            }),
        }
    }
    writes.push(SeriesWrite {
        name: name.clone(),
        cells: current,
    });
    Ok(writes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ts;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn name(n: &str) -> Name {
        Name::new(n).unwrap()
    }

    /// The plan of sums, each `(series, at, sum)`.
    fn plan_sums(space: &Space, sums: &[(&Name, f64, i64)]) -> Result<Vec<SeriesWrite>> {
        plan(
            space,
            sums.iter().map(|&(n, at, d)| (n, ts(at), Value::Sum(d))),
        )
    }

    fn cell(precision: u64, slice: u64, sum: i64) -> CellDelta {
        CellDelta {
            precision,
            slice,
            delta: Value::Sum(sum),
        }
    }

    #[test]
    fn merges_per_slice_and_orders_by_name() {
        let space = Space::counters(&[1, 60], 10);
        let (a, b) = (name("a"), name("b"));
        let writes = plan_sums(&space, &[(&b, 100.0, 1), (&a, 100.0, 2), (&b, 101.5, 3)]).unwrap();
        assert_eq!(writes.len(), 2);
        assert_eq!(writes[0].name, a);
        assert_eq!(writes[0].cells, vec![cell(1, 100, 2), cell(60, 60, 2)]);
        assert_eq!(
            writes[1].cells,
            vec![cell(1, 100, 1), cell(1, 101, 3), cell(60, 60, 4)]
        );
    }

    #[test]
    fn an_overflowing_merge_fails_the_whole_plan_and_names_the_slice() {
        let space = Space::counters(&[1, 5], 10);
        let (x, y) = (name("x"), name("y"));
        // y's slice at 1 s does not overflow (6 and 7 differ); its 5 s one does.
        let err =
            plan_sums(&space, &[(&x, 5.0, 1), (&y, 6.0, i64::MAX), (&y, 7.0, 1)]).unwrap_err();
        assert_eq!(
            err.overflow().unwrap_or_else(|| panic!("{err}")),
            ("counter", "y", 5, 5, 1)
        );
        // i64::MIN is out of range too.
        let err = plan_sums(&space, &[(&x, 5.0, -i64::MAX), (&x, 5.0, -1)]).unwrap_err();
        assert!(matches!(err, Error::Overflow { precision: 1, .. }), "{err}");
    }

    #[test]
    fn batches_and_times_are_checked_with_a_reason() {
        assert!(
            check_batch(0, 5, "increment")
                .unwrap_err()
                .to_string()
                .contains("at least one increment")
        );
        assert!(
            check_batch(6, 5, "increment")
                .unwrap_err()
                .to_string()
                .contains("at most 5 increments, got 6")
        );
        check_batch(5, 5, "increment").unwrap();
        for bad in [0, 6] {
            let err = check_batch_len(bad, 5, "views").unwrap_err().to_string();
            assert!(err.contains(&format!("1 to 5 views, got {bad}")), "{err}");
        }
        check_batch_len(5, 5, "views").unwrap();
        assert_eq!(time(None, ts(7.0)).unwrap(), ts(7.0));
        assert_eq!(time(Some(3.5), ts(7.0)).unwrap(), ts(3.5));
        assert!(matches!(
            time(Some(f64::NAN), ts(7.0)),
            Err(Error::InvalidTime(_))
        ));
        assert!(matches!(
            time(Some(-1.0), ts(7.0)),
            Err(Error::InvalidTime(_))
        ));
    }

    proptest! {
        /// Whatever the order and grouping of the items, the plan holds per
        /// (series, precision, slice) the sum of the items that fall in it.
        #[test]
        fn plan_holds_the_sum_of_each_slice(items in prop::collection::vec((0usize..4, 0u64..400, -1000i64..1000), 1..60)) {
            let names: Vec<Name> = ["a", "b", "c", "d"].iter().map(|n| name(n)).collect();
            let space = Space::counters(&[1, 7, 60], 10);
            let writes = plan(&space, items.iter().map(|&(n, t, d)| (&names[n], ts(t as f64 + 0.5), Value::Sum(d)))).unwrap();
            let mut want: HashMap<(usize, u64, u64), i64> = HashMap::new();
            for &(n, t, d) in &items {
                for p in [1u64, 7, 60] {
                    *want.entry((n, p, t / p * p)).or_default() += d;
                }
            }
            let mut got: HashMap<(usize, u64, u64), i64> = HashMap::new();
            let mut last_name = None;
            for w in &writes {
                prop_assert!(last_name < Some(&w.name), "series in name order, each once");
                last_name = Some(&w.name);
                let n = names.iter().position(|x| x == &w.name).unwrap();
                for pair in w.cells.windows(2) {
                    prop_assert!((pair[0].precision, pair[0].slice) < (pair[1].precision, pair[1].slice));
                }
                for c in &w.cells {
                    got.insert((n, c.precision, c.slice), c.delta.as_sum().unwrap());
                }
            }
            prop_assert_eq!(got, want);
        }

        /// A plan either holds every item or fails: an overflow anywhere
        /// leaves no partial result to write.
        #[test]
        fn overflow_is_all_or_nothing(big in (i64::MAX / 2)..=i64::MAX, n in 1usize..5) {
            let x = name("x");
            let space = Space::counters(&[1], 10);
            let items: Vec<_> = (0..=n).map(|_| (&x, ts(9.0), Value::Sum(big))).collect();
            let fits = (big as i128) * (n as i128 + 1) <= i64::MAX as i128;
            match plan(&space, items) {
                Ok(writes) => {
                    prop_assert!(fits);
                    prop_assert_eq!(writes[0].cells[0].delta.as_sum(), Some(big * (n as i64 + 1)));
                }
                Err(e) => {
                    prop_assert!(!fits);
                    let is_overflow = matches!(e, Error::Overflow { .. });
                    prop_assert!(is_overflow);
                }
            }
        }
    }
}
