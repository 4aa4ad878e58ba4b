//! The time-series store's precisions: pure functions over the engine's
//! [`Precision`] and plain values, shared by every backend.
//!
//! A precision of `seconds` keeping `keep` slices (Sentry's rollup of
//! `seconds` and `samples`; `--rollups 10:360` on the command line) cuts
//! time into buckets `[k·s, (k+1)·s)` on the epoch's multiples: bucket `b`
//! expires at `b + seconds·keep`, so the store sets that expiry on write
//! and nothing has to clean. Range reads list every bucket from `start`'s to
//! `end`'s; without an explicit precision, the finest one whose retention,
//! counted back from *now*, reaches `start` is used (the coarsest when none
//! does). Keys are spread over [`VSHARDS`] virtual shards by a stable hash of
//! the key (FNV-1a), independent of how many nodes serve them.

pub use crate::engine::precision::Precision;
use crate::error::{Error, Result};

/// Virtual shards per model. Fixed: changing it would orphan data.
pub const VSHARDS: u32 = 64;
/// How far into the future a write may be dated (clock skew), in seconds.
pub const MAX_FUTURE_SECS: u64 = 60;
/// The most buckets one range read may cover.
pub const MAX_POINTS: u64 = 10_000;

/// Sentry's defaults: 10 s × 360 (an hour), 1 h × 168 (a week), 1 d × 90.
pub const DEFAULT_PRECISIONS: [Precision; 3] = [
    Precision::new(10, 360),
    Precision::new(3600, 168),
    Precision::new(86_400, 90),
];

/// How far back `p` keeps data: `seconds × keep`.
pub fn retention(p: Precision) -> u64 {
    p.seconds * p.keep
}

/// When bucket `bucket` of `p` expires: `bucket + seconds × keep`.
pub fn expires(p: Precision, bucket: u64) -> u64 {
    bucket + retention(p)
}

/// Buckets of `p` from `start`'s to `end`'s, inclusive, oldest first.
pub fn buckets(p: Precision, start: u64, end: u64) -> Vec<u64> {
    (p.slice_of_second(start)..=p.slice_of_second(end))
        .step_by(p.seconds as usize)
        .collect()
}

/// Every bucket of `p` that may hold data at `now`: not expired, and not
/// after the latest bucket a write may be dated in.
pub fn live_buckets(p: Precision, now: u64) -> Vec<u64> {
    let first = p.slice_of_second(now.saturating_sub(retention(p)));
    let first = if expires(p, first) <= now {
        first + p.seconds
    } else {
        first
    };
    (first..=p.slice_of_second(now + MAX_FUTURE_SECS))
        .step_by(p.seconds as usize)
        .collect()
}

/// Checks precisions and sorts them finest first: 1 to 8, distinct lengths
/// of 1 s to a year on the epoch's multiples, 1 to 100,000 slices kept,
/// retention under 100 years. Messages say `rollup`, the word of the
/// `--rollups` flag they answer.
pub fn validate(mut precisions: Vec<Precision>) -> Result<Vec<Precision>> {
    if precisions.is_empty() || precisions.len() > 8 {
        return Err(Error::Config(format!(
            "configure 1 to 8 rollups, got {}",
            precisions.len()
        )));
    }
    precisions.sort_unstable_by_key(|p| p.seconds);
    crate::engine::precision::check_lengths("rollup", precisions.iter().map(|p| p.seconds))?;
    for p in &precisions {
        if p.keep == 0 || p.keep > 100_000 || retention(*p) > 100 * 366 * 86_400 {
            return Err(Error::Config(format!(
                "rollup {} s keeps {} samples: keep 1 to 100000, under 100 years",
                p.seconds, p.keep
            )));
        }
        if p.offset_secs != 0 {
            return Err(Error::Config(format!(
                "rollup {} s must start on the epoch's multiples (offset 0, got {})",
                p.seconds, p.offset_secs
            )));
        }
    }
    Ok(precisions)
}

/// Parses `--rollups` text, `10:360,3600:168` (seconds:samples pairs).
pub fn parse(text: &str) -> Result<Vec<Precision>> {
    let precisions = text
        .split(',')
        .map(|pair| {
            let (s, n) = pair.trim().split_once(':').ok_or_else(|| {
                Error::Config(format!(
                    "rollup {pair:?} must be SECONDS:SAMPLES, e.g. 3600:168"
                ))
            })?;
            let bad = || Error::Config(format!("rollup {pair:?} must be two whole numbers"));
            Ok(Precision::new(
                s.trim().parse().map_err(|_| bad())?,
                n.trim().parse().map_err(|_| bad())?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    validate(precisions)
}

/// The finest precision (of `precisions`, finest first) whose retention,
/// counted back from `now`, reaches `start`; the coarsest when none does.
pub fn optimal(precisions: &[Precision], start: u64, now: u64) -> Precision {
    precisions
        .iter()
        .copied()
        .find(|&p| now.saturating_sub(retention(p)) <= start)
        .unwrap_or(
            *precisions
                .last()
                .expect("validated precisions are not empty"),
        )
}

/// The virtual shard of a key: FNV-1a of its bytes, modulo [`VSHARDS`].
pub fn vshard_of(key: &str) -> u32 {
    (crate::name::fnv1a(key) % u64::from(VSHARDS)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const R10: Precision = Precision::new(10, 360);

    #[test]
    fn buckets_and_expiry() {
        assert_eq!(R10.slice_of_second(1_000_009), 1_000_000);
        assert_eq!(expires(R10, 1_000_000), 1_003_600);
        assert_eq!(buckets(R10, 95, 121), vec![90, 100, 110, 120]);
        assert_eq!(buckets(R10, 100, 100), vec![100]);
    }

    #[test]
    fn live_buckets_are_the_kept_ones_plus_the_near_future() {
        let r = Precision::new(10, 3);
        // At 1005: 980 expires at 1010 (live), 970 at 1000 (gone); writes may
        // be dated up to 1065.
        assert_eq!(
            live_buckets(r, 1005),
            vec![980, 990, 1000, 1010, 1020, 1030, 1040, 1050, 1060]
        );
        assert_eq!(live_buckets(r, 1000)[0], 980);
    }

    #[test]
    fn optimal_precision_is_measured_back_from_now() {
        let precisions = validate(DEFAULT_PRECISIONS.to_vec()).unwrap();
        let now = 10_000_000;
        assert_eq!(optimal(&precisions, now - 3600, now).seconds, 10);
        assert_eq!(optimal(&precisions, now - 3601, now).seconds, 3600);
        assert_eq!(optimal(&precisions, now - 168 * 3600, now).seconds, 3600);
        assert_eq!(optimal(&precisions, now - 30 * 86_400, now).seconds, 86_400);
        // Beyond every retention: the coarsest.
        assert_eq!(optimal(&precisions, 0, now).seconds, 86_400);
    }

    #[test]
    fn precisions_are_checked_and_parsed() {
        assert_eq!(parse("3600:168, 10:360").unwrap()[0], R10);
        assert!(
            parse("10")
                .unwrap_err()
                .to_string()
                .contains("SECONDS:SAMPLES")
        );
        assert!(
            parse("10:1,10:2")
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
        assert!(parse("0:5").is_err());
        assert!(parse("10:0").is_err());
        assert!(validate(vec![]).is_err());
        let shifted = Precision {
            offset_secs: 3600,
            ..R10
        };
        assert!(validate(vec![shifted]).is_err());
    }

    #[test]
    fn vshards_are_stable_and_spread() {
        assert_eq!(vshard_of("42"), vshard_of("42"));
        let mut seen = [0u32; VSHARDS as usize];
        for i in 0..6400 {
            seen[vshard_of(&i.to_string()) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 40 && n < 160), "{seen:?}");
    }

    proptest! {
        #[test]
        fn a_bucket_contains_its_instant(t in 0u64..1u64 << 40, s in 1u64..1_000_000) {
            let r = Precision::new(s, 10);
            let b = r.slice_of_second(t);
            prop_assert!(b <= t && t < b + s && b.is_multiple_of(s));
        }

        #[test]
        fn live_buckets_cover_exactly_what_is_kept(now in 1_000_000u64..1u64 << 40, s in 1u64..5000, n in 1u64..400) {
            let r = Precision::new(s, n);
            let live = live_buckets(r, now);
            prop_assert!(live.iter().all(|&b| expires(r, b) > now));
            if live[0] >= s {
                prop_assert!(expires(r, live[0] - s) <= now);
            }
            prop_assert_eq!(*live.last().unwrap(), r.slice_of_second(now + MAX_FUTURE_SECS));
        }
    }
}
