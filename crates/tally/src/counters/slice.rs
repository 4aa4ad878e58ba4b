//! Slice math: pure functions over plain values, shared by every backend.
//!
//! A precision `p` divides time into slices `[k·p, (k+1)·p)`; an increment at
//! `t` lands in the slice starting at `floor(t / p) · p`. The cleaner keeps the
//! newest `samples` slices: it removes every slice starting at or before
//! `floor(now) − samples·p`, and visits precision `p` once every
//! `max(1, p / interval)` passes. This module also merges a batch of
//! increments into one delta per (counter, precision, slice).

use std::collections::BTreeMap;

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::name::Name;

/// The start of the `precision`-second slice that `at` falls in.
pub fn slice_start(at: Timestamp, precision: u64) -> u64 {
    at.whole_secs() / precision * precision
}

/// The cleaner's cutoff: slices starting at or before it are removed.
///
/// Negative when `now` is earlier than the retention span (nothing to remove).
pub fn cutoff(now: Timestamp, samples: u64, precision: u64) -> i64 {
    now.whole_secs() as i64 - (samples * precision) as i64
}

/// Whether precision `p` is visited by pass number `pass` (counted from 0)
/// when passes run every `interval_secs`: once every `max(1, p / interval)`
/// passes, so daily counters are not trimmed every minute.
pub fn is_due(pass: u64, precision: u64, interval_secs: u64) -> bool {
    let every = (precision / interval_secs.max(1)).max(1);
    pass.is_multiple_of(every)
}

/// The most samples one precision's hash holds just before the cleaner
/// trims it: the `samples` kept after a pass, plus the slices written until
/// the precision's next visit (`max(1, p / interval)` passes later), plus one
/// for a pass that starts late within its second. A 1 s precision keeping
/// 120 samples, cleaned every 60 s, peaks at 181.
pub fn peak_samples(samples: u64, precision: u64, interval_secs: u64) -> u64 {
    let interval = interval_secs.max(1);
    let between_visits = (precision / interval).max(1) * interval;
    samples + between_visits.div_ceil(precision) + 1
}

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
    if count == i64::MIN {
        return Err(Error::InvalidCount(format!(
            "{count} is out of range (-{max} to {max})",
            max = i64::MAX
        )));
    }
    Ok(count)
}

/// Merges increments into one delta per (counter, precision, slice), every
/// precision included, counters in name order.
///
/// Fails with [`Error::Overflow`] when a merged delta does not fit in 64 bits
/// (or is `i64::MIN`); then nothing may be written.
pub fn plan(increments: &[ValidIncrement], precisions: &[u64]) -> Result<Vec<CounterWrite>> {
    let mut merged: BTreeMap<&Name, BTreeMap<(u64, u64), i64>> = BTreeMap::new();
    for inc in increments {
        let slices = merged.entry(&inc.name).or_default();
        for &p in precisions {
            let slice = slice_start(inc.at, p);
            let entry = slices.entry((p, slice)).or_insert(0);
            *entry = entry
                .checked_add(inc.count)
                .filter(|&d| d != i64::MIN)
                .ok_or_else(|| Error::Overflow {
                    name: inc.name.to_string(),
                    precision: p,
                    slice,
                    delta: inc.count,
                })?;
        }
    }
    Ok(merged
        .into_iter()
        .map(|(name, slices)| CounterWrite {
            name: name.clone(),
            deltas: slices
                .into_iter()
                .map(|((precision, slice), delta)| SliceDelta {
                    precision,
                    slice,
                    delta,
                })
                .collect(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ts(secs: f64) -> Timestamp {
        Timestamp::from_secs_f64(secs).unwrap()
    }

    #[test]
    fn slices_match_the_books_example() {
        // The book's count:5:hits example: 7:39:55 falls in the slice at 1336376395.
        assert_eq!(slice_start(ts(1336376415.5), 5), 1336376415);
        assert_eq!(slice_start(ts(1336376399.999), 5), 1336376395);
        assert_eq!(slice_start(ts(1336376400.0), 5), 1336376400);
        assert_eq!(slice_start(ts(1336376415.5), 86400), 1336348800);
        assert_eq!(slice_start(ts(0.2), 1), 0);
    }

    #[test]
    fn cutoff_keeps_exactly_samples_slices() {
        // now = 1000, p = 5, samples = 3: slices 990, 995, 1000 survive; 985 goes.
        let c = cutoff(ts(1000.7), 3, 5);
        assert_eq!(c, 985);
        let kept: Vec<u64> = (0..=1000).step_by(5).filter(|&s| s as i64 > c).collect();
        assert_eq!(kept, vec![990, 995, 1000]);
        assert!(cutoff(ts(10.0), 120, 60) < 0);
    }

    #[test]
    fn cadence_follows_the_book() {
        // 1 s, 5 s and 60 s every pass; 300 s every 5th; a day every 1440th.
        for pass in 0..10 {
            assert!(is_due(pass, 1, 60));
            assert!(is_due(pass, 5, 60));
            assert!(is_due(pass, 60, 60));
            assert_eq!(is_due(pass, 300, 60), pass % 5 == 0);
        }
        assert!(is_due(0, 86400, 60));
        assert!(!is_due(1439, 86400, 60));
        assert!(is_due(1440, 86400, 60));
    }

    #[test]
    fn peaks_follow_the_cadence() {
        // The reference's figure: a 1 s precision cleaned every 60 s peaks near 180.
        assert_eq!(peak_samples(120, 1, 60), 181);
        assert_eq!(peak_samples(120, 5, 60), 133);
        assert_eq!(peak_samples(120, 60, 60), 122);
        // 300 s is visited every 5th pass: one new slice in between.
        assert_eq!(peak_samples(120, 300, 60), 122);
        assert_eq!(peak_samples(120, 86_400, 60), 122);
        assert_eq!(peak_samples(10, 7, 60), 10 + 9 + 1);
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

    proptest! {
        #[test]
        fn slice_contains_its_instant(secs in 0u64..Timestamp::MAX_SECS as u64, frac in 0.0f64..1.0, p in 1u64..200_000) {
            let at = ts(secs as f64 + frac);
            let s = slice_start(at, p);
            prop_assert_eq!(s % p, 0);
            prop_assert!(s <= at.whole_secs() && at.whole_secs() < s + p);
        }

        #[test]
        fn peak_bounds_what_a_writer_adds_between_visits(samples in 1u64..1000, p in 1u64..100_000, interval in 1u64..3600) {
            // Slices a real-time writer starts between two visits of p.
            let every = (p / interval).max(1) * interval;
            let written = every / p + 1;
            prop_assert!(peak_samples(samples, p, interval) >= samples + written);
        }

        #[test]
        fn newest_samples_survive(now in 0u64..4_000_000_000, samples in 1u64..500, p in 1u64..100_000) {
            let c = cutoff(ts(now as f64), samples, p);
            let current = now / p * p;
            // The current slice and the samples-1 before it survive, the one before goes.
            let oldest_kept = current as i64 - (samples as i64 - 1) * p as i64;
            prop_assert!(oldest_kept > c);
            prop_assert!(oldest_kept - p as i64 <= c);
        }
    }
}
