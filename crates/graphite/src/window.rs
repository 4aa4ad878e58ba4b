//! whisper 1.1.10's choice of archive and of the slots read for one fetch (`file_fetch` and
//! `__archive_fetch`), as a pure function over a file's archives.
//!
//! Owns the window arithmetic only: which archive, the first slot (exclusive `from`), the end
//! (inclusive `until`) and the step. It does not read values; a store reads one value per
//! step of the window from the archive it names.

/// One archive of a whisper file: `points` slots of `step` seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Archive {
    /// Seconds per point.
    pub step: i64,
    /// Number of points kept.
    pub points: i64,
}

impl Archive {
    /// Seconds covered (whisper's `retention`).
    pub fn retention(&self) -> i64 {
        self.step.saturating_mul(self.points)
    }
}

/// The slots whisper reads: `start` (its `fromInterval`) up to `end` (its `untilInterval`,
/// exclusive) by `step`, from archive number `archive` (finest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Seconds per point of the chosen archive.
    pub step: i64,
    /// The first slot's timestamp.
    pub start: i64,
    /// One step past the last slot.
    pub end: i64,
    /// The index of the chosen archive in the slice given to [`window`].
    pub archive: usize,
}

impl Window {
    /// The number of slots (values) in the window.
    pub fn points(&self) -> usize {
        if self.step <= 0 || self.end <= self.start {
            return 0;
        }
        ((self.end - self.start) / self.step) as usize
    }

    /// The slots' timestamps, in order.
    pub fn timestamps(&self) -> impl Iterator<Item = i64> + '_ {
        (0..self.points() as i64).map(move |i| self.start + i * self.step)
    }
}

/// The window whisper 1.1.10 reads over `archives` (finest first, as whisper requires) for
/// `(from, until]` at `now`; `None` where whisper returns nothing: the range is in the future,
/// entirely beyond retention, or empty (`from > until`, which whisper refuses).
pub fn window(archives: &[Archive], from: i64, until: i64, now: i64) -> Option<Window> {
    if archives.is_empty() || archives.iter().any(|a| a.step <= 0 || a.points <= 0) {
        return None;
    }
    if from > until {
        return None;
    }
    let max_retention = archives.iter().map(Archive::retention).max()?;
    let oldest = now.saturating_sub(max_retention);
    if from > now || until < oldest {
        return None;
    }
    let from = from.max(oldest);
    let until = until.min(now);
    let diff = now.checked_sub(from)?;
    let archive = archives
        .iter()
        .position(|a| a.retention() >= diff)
        .unwrap_or(archives.len() - 1);
    let step = archives[archive].step;
    let start = (from - from.rem_euclid(step)).checked_add(step)?;
    let mut end = (until - until.rem_euclid(step)).checked_add(step)?;
    if start == end {
        end = end.checked_add(step)?;
    }
    Some(Window {
        step,
        start,
        end,
        archive,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: [Archive; 2] = [
        Archive {
            step: 10,
            points: 60,
        }, // 10 minutes
        Archive {
            step: 60,
            points: 1440,
        }, // a day
    ];

    #[test]
    fn from_is_exclusive_and_until_inclusive_on_boundaries() {
        // from 1000 (a boundary) excludes slot 1000; until 1100 includes slot 1100.
        let w = window(&TWO, 1000, 1100, 1200).unwrap();
        assert_eq!((w.step, w.start, w.end, w.archive), (10, 1010, 1110, 0));
        assert_eq!(w.points(), 10);
        // Off boundaries: from 1005 -> first slot 1010; until 1105 -> last slot 1100.
        let w = window(&TWO, 1005, 1105, 1200).unwrap();
        assert_eq!((w.start, w.end), (1010, 1110));
    }

    #[test]
    fn the_finest_archive_covering_now_minus_from_is_read() {
        // now - from = 600 is exactly the first archive's retention.
        assert_eq!(window(&TWO, 9400, 9500, 10_000).unwrap().archive, 0);
        // 601 needs the second; until plays no part.
        let w = window(&TWO, 9399, 9400, 10_000).unwrap();
        // 9399 -> slot 9360 + 60; until 9400 lands on the same slot: the next point is read.
        assert_eq!((w.archive, w.step, w.start, w.end), (1, 60, 9420, 9480));
    }

    #[test]
    fn beyond_retention_clips_from_and_uses_the_coarsest() {
        let now = 100_000;
        let w = window(&TWO, 0, now, now).unwrap();
        // from clipped to now - 86400 = 13600 -> first slot 13620; until = now -> end 100020.
        assert_eq!((w.archive, w.start, w.end), (1, 13_620, 100_020));
        assert_eq!(w.points(), 1440);
    }

    #[test]
    fn future_and_too_old_ranges_read_nothing() {
        assert_eq!(window(&TWO, 10_001, 20_000, 10_000), None);
        assert_eq!(window(&TWO, 0, 10_000 - 86_401, 10_000), None);
        // until after now is cut to now.
        let w = window(&TWO, 9_900, 20_000, 10_000).unwrap();
        assert_eq!((w.start, w.end), (9_910, 10_010));
    }

    #[test]
    fn a_zero_length_range_reads_the_next_point() {
        let w = window(&TWO, 1001, 1009, 1100).unwrap();
        assert_eq!((w.start, w.end), (1010, 1020));
    }

    #[test]
    fn no_archives_or_a_reversed_range_read_nothing() {
        assert_eq!(window(&[], 0, 10, 10), None);
        assert_eq!(window(&TWO, 20, 10, 30), None);
        assert_eq!(window(&[Archive { step: 0, points: 5 }], 0, 10, 10), None);
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_stays_in_range(
            steps in proptest::collection::vec((1i64..100_000, 1i64..100_000), 1..4),
            from in proptest::num::i64::ANY,
            until in proptest::num::i64::ANY,
            now in proptest::num::i64::ANY,
        ) {
            let archives: Vec<Archive> = steps.iter().map(|&(step, points)| Archive { step, points }).collect();
            if let Some(w) = window(&archives, from, until, now) {
                proptest::prop_assert!(w.end > w.start);
                proptest::prop_assert_eq!((w.end - w.start) % w.step, 0);
                proptest::prop_assert_eq!(w.step, archives[w.archive].step);
            }
        }
    }
}
