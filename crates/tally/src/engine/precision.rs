//! Slice math: pure functions over plain values, shared by every space and
//! every store.
//!
//! A [`Precision`] of `s` seconds divides time into slices
//! `[k·s − offset, (k+1)·s − offset)`; an instant `t` falls in the slice
//! starting at `floor((t + offset) / s) · s − offset` (offset 0 for every
//! space but local days). A precision keeps its newest `keep` slices: the
//! cleaner removes every slice starting at or before `floor(now) − keep·s`,
//! and visits precision `s` once every `max(1, s / interval)` passes (the
//! book's cadence, so daily slices are not trimmed every minute). A range
//! read picks the finest precision whose retention still covers the
//! range's start ([`choose`]).
//!
//! Nothing here reads a clock or a store.

use serde::{Deserialize, Serialize};

use crate::clock::Timestamp;
use crate::error::{Error, Result};

/// One precision of a space: slice length, slices kept, and the offset of
/// its slice boundaries from the Unix epoch's multiples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Precision {
    /// Slice length in seconds (at least 1).
    pub seconds: u64,
    /// Slices kept.
    pub keep: u64,
    /// Seconds added to an instant before it is cut into slices (a local
    /// day east of UTC starts `offset_secs` before the UTC midnight).
    pub offset_secs: i64,
}

impl Precision {
    /// `seconds`-long slices, `keep` of them kept, on the epoch's multiples.
    pub const fn new(seconds: u64, keep: u64) -> Self {
        Precision {
            seconds,
            keep,
            offset_secs: 0,
        }
    }

    /// The start of the slice that `at` falls in.
    #[inline]
    pub fn slice_start(&self, at: Timestamp) -> u64 {
        self.slice_of_second(at.whole_secs())
    }

    /// The start of the slice that whole second `second` falls in.
    #[inline]
    pub fn slice_of_second(&self, second: u64) -> u64 {
        if self.offset_secs == 0 {
            return second / self.seconds * self.seconds;
        }
        let s = i128::from(self.seconds);
        let off = i128::from(self.offset_secs);
        let start = (i128::from(second) + off).div_euclid(s) * s - off;
        start.clamp(0, i128::from(u64::MAX)) as u64
    }

    /// The cleaner's cutoff at `now` (see [`cutoff`]).
    pub fn cutoff(&self, now: Timestamp) -> i64 {
        cutoff(now, self.keep, self.seconds)
    }

    /// The start of the oldest slice still kept at `now`.
    pub fn oldest_kept(&self, now: Timestamp) -> u64 {
        let current = self.slice_start(now);
        current.saturating_sub(self.keep.saturating_sub(1).saturating_mul(self.seconds))
    }
}

/// The start of the `seconds`-long slice that `at` falls in (offset 0).
#[inline]
pub fn slice_start(at: Timestamp, seconds: u64) -> u64 {
    at.whole_secs() / seconds * seconds
}

/// The cleaner's cutoff: slices starting at or before it are removed.
///
/// Negative when `now` is earlier than the retention span (nothing to remove).
pub fn cutoff(now: Timestamp, keep: u64, seconds: u64) -> i64 {
    now.whole_secs() as i64 - (keep * seconds) as i64
}

/// Whether precision `seconds` is visited by pass number `pass` (counted
/// from 0) when passes run every `interval_secs`: once every
/// `max(1, seconds / interval)` passes, so daily slices are not trimmed
/// every minute.
pub fn is_due(pass: u64, seconds: u64, interval_secs: u64) -> bool {
    let every = (seconds / interval_secs.max(1)).max(1);
    pass.is_multiple_of(every)
}

/// The most slices one precision holds just before the cleaner trims it:
/// the `keep` kept after a pass, plus the slices written until the
/// precision's next visit (`max(1, s / interval)` passes later), plus one
/// for a pass that starts late within its second. A 1 s precision keeping
/// 120 slices, cleaned every 60 s, peaks at 181.
pub fn peak_slices(keep: u64, seconds: u64, interval_secs: u64) -> u64 {
    let interval = interval_secs.max(1);
    let between_visits = (seconds / interval).max(1) * interval;
    keep + between_visits.div_ceil(seconds) + 1
}

/// Checks slice lengths given finest first: distinct, each of 1 s to a
/// year; `what` names one in messages (`rollup`, `space stats: precision`).
pub fn check_lengths(what: &str, seconds: impl IntoIterator<Item = u64>) -> Result<()> {
    let mut last = None;
    for s in seconds {
        if last == Some(s) {
            return Err(Error::Config(format!("{what} {s} s is listed twice")));
        }
        if s == 0 || s > 366 * 86_400 {
            return Err(Error::Config(format!(
                "{what} {s} s is out of range (1 s to a year)"
            )));
        }
        last = Some(s);
    }
    Ok(())
}

/// Checks that `precision` is one of `precisions`; the error lists them.
pub fn check_precision_in(precisions: &[u64], precision: u64) -> Result<()> {
    if precisions.contains(&precision) {
        Ok(())
    } else {
        Err(Error::UnknownPrecision {
            precision,
            configured: list(precisions),
        })
    }
}

/// Precisions as `1, 5, 60`.
pub(crate) fn list(precisions: &[u64]) -> String {
    precisions
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether a write at whole second `second` lands in a slice that some
/// precision (of `precisions`) still keeps at `now`: false when it is
/// older than even the longest-kept precision keeps, so that a read would
/// never see it and the cleaner would only remove it.
pub fn kept(precisions: &[Precision], now: Timestamp, second: u64) -> bool {
    precisions
        .iter()
        .any(|r| r.oldest_kept(now) <= r.slice_of_second(second))
}

/// The precision a range starting at `from` is read at: the finest (of
/// `precisions`, finest first) whose kept slices at `now` still reach back
/// to `from`'s slice; the coarsest when none does (it holds the most).
pub fn choose(precisions: &[Precision], now: Timestamp, from: u64) -> Option<&Precision> {
    precisions
        .iter()
        .find(|r| r.oldest_kept(now) <= r.slice_of_second(from))
        .or_else(|| precisions.iter().max_by_key(|r| r.seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ts;
    use proptest::prelude::*;

    #[test]
    fn slices_match_the_books_example() {
        // The book's count:5:hits example: 7:39:55 falls in the slice at 1336376395.
        assert_eq!(slice_start(ts(1336376415.5), 5), 1336376415);
        assert_eq!(slice_start(ts(1336376399.999), 5), 1336376395);
        assert_eq!(slice_start(ts(1336376400.0), 5), 1336376400);
        assert_eq!(slice_start(ts(1336376415.5), 86400), 1336348800);
        assert_eq!(slice_start(ts(0.2), 1), 0);
        assert_eq!(
            Precision::new(5, 3).slice_start(ts(1336376399.9)),
            1336376395
        );
    }

    #[test]
    fn offsets_move_slice_boundaries() {
        // A local day at UTC+5:30 starts at 18:30 UTC the day before.
        let ist = Precision {
            seconds: 86_400,
            keep: 30,
            offset_secs: 19_800,
        };
        let noon_utc = 86_400 * 10 + 43_200;
        assert_eq!(ist.slice_of_second(noon_utc), 86_400 * 10 - 19_800);
        assert_eq!(
            ist.slice_of_second(86_400 * 11 - 19_800),
            86_400 * 11 - 19_800
        );
        assert_eq!(
            ist.slice_of_second(86_400 * 11 - 19_801),
            86_400 * 10 - 19_800
        );
        // West of UTC (UTC-8): the day starts at 08:00 UTC.
        let pst = Precision {
            seconds: 86_400,
            keep: 30,
            offset_secs: -28_800,
        };
        assert_eq!(
            pst.slice_of_second(86_400 * 10 + 3_600),
            86_400 * 9 + 28_800
        );
        // Near the epoch a slice would start before it: clamped to 0.
        assert_eq!(ist.slice_of_second(0), 0);
    }

    #[test]
    fn cutoff_keeps_exactly_keep_slices() {
        // now = 1000, s = 5, keep = 3: slices 990, 995, 1000 survive; 985 goes.
        let c = cutoff(ts(1000.7), 3, 5);
        assert_eq!(c, 985);
        let kept: Vec<u64> = (0..=1000).step_by(5).filter(|&s| s as i64 > c).collect();
        assert_eq!(kept, vec![990, 995, 1000]);
        assert!(cutoff(ts(10.0), 120, 60) < 0);
        assert_eq!(Precision::new(5, 3).oldest_kept(ts(1000.7)), 990);
        assert_eq!(Precision::new(5, 3).cutoff(ts(1000.7)), 985);
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
        assert_eq!(peak_slices(120, 1, 60), 181);
        assert_eq!(peak_slices(120, 5, 60), 133);
        assert_eq!(peak_slices(120, 60, 60), 122);
        // 300 s is visited every 5th pass: one new slice in between.
        assert_eq!(peak_slices(120, 300, 60), 122);
        assert_eq!(peak_slices(120, 86_400, 60), 122);
        assert_eq!(peak_slices(10, 7, 60), 10 + 9 + 1);
    }

    #[test]
    fn lengths_are_checked_with_a_reason() {
        check_lengths("rollup", [1, 60, 3600]).unwrap();
        let twice = check_lengths("rollup", [1, 60, 60])
            .unwrap_err()
            .to_string();
        assert!(twice.contains("rollup 60 s is listed twice"), "{twice}");
        let zero = check_lengths("rollup", [0]).unwrap_err().to_string();
        assert!(
            zero.contains("rollup 0 s is out of range (1 s to a year)"),
            "{zero}"
        );
        assert!(check_lengths("rollup", [400 * 86_400]).is_err());
    }

    #[test]
    fn ranges_read_the_finest_resolution_that_covers_them() {
        // 1 s x 120 (2 min), 60 s x 120 (2 h), 1 h x 48 (2 days).
        let rs = [
            Precision::new(1, 120),
            Precision::new(60, 120),
            Precision::new(3600, 48),
        ];
        let now = ts(1_000_000.5);
        assert_eq!(choose(&rs, now, 1_000_000 - 119).unwrap().seconds, 1);
        assert_eq!(choose(&rs, now, 1_000_000 - 120).unwrap().seconds, 60);
        assert_eq!(
            choose(&rs, now, 1_000_000 - 3 * 3600).unwrap().seconds,
            3600
        );
        // Older than anything kept: the coarsest.
        assert_eq!(choose(&rs, now, 0).unwrap().seconds, 3600);
        assert!(choose(&[], now, 0).is_none());
    }

    #[test]
    fn a_write_is_kept_while_its_slice_is_kept_at_some_resolution() {
        let rs = [Precision::new(1, 120), Precision::new(3600, 48)];
        let now = ts(1_000_000.5);
        // The hourly slices kept start at 828_000 (47 hours before the
        // current one at 997_200).
        let oldest = 997_200 - 47 * 3600;
        assert!(kept(&rs, now, oldest));
        assert!(kept(&rs, now, 1_000_000 - 120));
        assert!(kept(&rs, now, 2_000_000));
        assert!(!kept(&rs, now, oldest - 1));
        assert!(!kept(&rs, now, 0));
        assert!(!kept(&[], now, 1_000_000));
    }

    proptest! {
        #[test]
        fn slice_contains_its_instant(secs in 0u64..Timestamp::MAX_SECS as u64, frac in 0.0f64..1.0, p in 1u64..200_000) {
            let at = ts(secs as f64 + frac);
            let s = slice_start(at, p);
            prop_assert_eq!(s % p, 0);
            prop_assert!(s <= at.whole_secs() && at.whole_secs() < s + p);
            prop_assert_eq!(Precision::new(p, 1).slice_start(at), s);
        }

        #[test]
        fn offset_slices_contain_their_second(second in 200_000u64..4_000_000_000, p in 1u64..100_000, off in -50_000i64..50_000) {
            let r = Precision { seconds: p, keep: 1, offset_secs: off };
            let s = r.slice_of_second(second);
            prop_assert!(s <= second && second < s + p);
            prop_assert_eq!((s as i64 + off).rem_euclid(p as i64), 0);
        }

        #[test]
        fn peak_bounds_what_a_writer_adds_between_visits(keep in 1u64..1000, p in 1u64..100_000, interval in 1u64..3600) {
            // Slices a real-time writer starts between two visits of p.
            let every = (p / interval).max(1) * interval;
            let written = every / p + 1;
            prop_assert!(peak_slices(keep, p, interval) >= keep + written);
        }

        #[test]
        fn newest_slices_survive(now in 0u64..4_000_000_000, keep in 1u64..500, p in 1u64..100_000) {
            let c = cutoff(ts(now as f64), keep, p);
            let current = now / p * p;
            // The current slice and the keep-1 before it survive, the one before goes.
            let oldest_kept = current as i64 - (keep as i64 - 1) * p as i64;
            prop_assert!(oldest_kept > c);
            prop_assert!(oldest_kept - p as i64 <= c);
            if oldest_kept >= 0 {
                prop_assert_eq!(Precision::new(p, keep).oldest_kept(ts(now as f64)), oldest_kept as u64);
            }
        }

        #[test]
        fn the_chosen_resolution_covers_the_range_when_one_can(from_back in 0u64..1_000_000, now in 2_000_000u64..3_000_000) {
            let rs = [Precision::new(1, 120), Precision::new(60, 120), Precision::new(3600, 48)];
            let at = ts(now as f64);
            let from = now - from_back;
            let r = choose(&rs, at, from).unwrap();
            let covering: Vec<u64> = rs.iter().filter(|r| r.oldest_kept(at) <= r.slice_of_second(from)).map(|r| r.seconds).collect();
            match covering.first() {
                Some(&finest) => prop_assert_eq!(r.seconds, finest),
                None => prop_assert_eq!(r.seconds, 3600),
            }
        }
    }
}
