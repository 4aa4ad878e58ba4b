//! Rollup math: pure functions over plain values, shared by every backend.
//!
//! A rollup `(seconds, samples)` cuts time into buckets `[k·s, (k+1)·s)` and
//! keeps `samples` of them: bucket `b` expires at `b + seconds·samples`, so
//! the store can set that expiry on write and nothing has to clean. Range
//! reads list every bucket from `start`'s to `end`'s; without an explicit
//! rollup, the finest one whose retention, counted back from *now*, reaches
//! `start` is used (the coarsest when none does). Keys are spread over
//! [`VSHARDS`] virtual shards by a stable hash of the key (FNV-1a),
//! independent of how many nodes serve them.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Virtual shards per model. Fixed: changing it would orphan data.
pub const VSHARDS: u32 = 64;
/// How far into the future a write may be dated (clock skew), in seconds.
pub const MAX_FUTURE_SECS: u64 = 60;
/// The most buckets one range read may cover.
pub const MAX_POINTS: u64 = 10_000;

/// A rollup: bucket length and buckets kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Rollup {
    /// Bucket length in seconds.
    pub seconds: u64,
    /// Buckets kept.
    pub samples: u64,
}

/// Sentry's defaults: 10 s × 360 (an hour), 1 h × 168 (a week), 1 d × 90.
pub const DEFAULT_ROLLUPS: [Rollup; 3] = [
    Rollup {
        seconds: 10,
        samples: 360,
    },
    Rollup {
        seconds: 3600,
        samples: 168,
    },
    Rollup {
        seconds: 86_400,
        samples: 90,
    },
];

impl Rollup {
    /// How far back data is kept: `seconds × samples`.
    pub fn retention(self) -> u64 {
        self.seconds * self.samples
    }

    /// The start of the bucket `t` falls in.
    pub fn bucket(self, t: u64) -> u64 {
        t / self.seconds * self.seconds
    }

    /// When bucket `b` expires: `b + seconds × samples`.
    pub fn expires(self, bucket: u64) -> u64 {
        bucket + self.retention()
    }

    /// Buckets from `start`'s to `end`'s, inclusive, oldest first.
    pub fn buckets(self, start: u64, end: u64) -> Vec<u64> {
        (self.bucket(start)..=self.bucket(end))
            .step_by(self.seconds as usize)
            .collect()
    }

    /// Every bucket that may hold data at `now`: not expired, and not after
    /// the latest bucket a write may be dated in.
    pub fn live_buckets(self, now: u64) -> Vec<u64> {
        let first = self.bucket(now.saturating_sub(self.retention()));
        let first = if self.expires(first) <= now {
            first + self.seconds
        } else {
            first
        };
        (first..=self.bucket(now + MAX_FUTURE_SECS))
            .step_by(self.seconds as usize)
            .collect()
    }
}

/// Checks rollups and sorts them finest first: 1 to 8, distinct lengths of
/// 1 s to a year, 1 to 100,000 samples, retention under 100 years.
pub fn validate(mut rollups: Vec<Rollup>) -> Result<Vec<Rollup>> {
    if rollups.is_empty() || rollups.len() > 8 {
        return Err(Error::Config(format!(
            "configure 1 to 8 rollups, got {}",
            rollups.len()
        )));
    }
    rollups.sort_unstable();
    crate::engine::precision::check_lengths("rollup", rollups.iter().map(|r| r.seconds))?;
    for r in &rollups {
        if r.samples == 0 || r.samples > 100_000 || r.retention() > 100 * 366 * 86_400 {
            return Err(Error::Config(format!(
                "rollup {} s keeps {} samples: keep 1 to 100000, under 100 years",
                r.seconds, r.samples
            )));
        }
    }
    Ok(rollups)
}

/// Parses `10:360,3600:168` (seconds:samples pairs).
pub fn parse(text: &str) -> Result<Vec<Rollup>> {
    let rollups = text
        .split(',')
        .map(|pair| {
            let (s, n) = pair.trim().split_once(':').ok_or_else(|| {
                Error::Config(format!(
                    "rollup {pair:?} must be SECONDS:SAMPLES, e.g. 3600:168"
                ))
            })?;
            let bad = || Error::Config(format!("rollup {pair:?} must be two whole numbers"));
            Ok(Rollup {
                seconds: s.trim().parse().map_err(|_| bad())?,
                samples: n.trim().parse().map_err(|_| bad())?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    validate(rollups)
}

/// The finest rollup (of `rollups`, finest first) whose retention, counted
/// back from `now`, reaches `start`; the coarsest when none does.
pub fn optimal(rollups: &[Rollup], start: u64, now: u64) -> Rollup {
    rollups
        .iter()
        .copied()
        .find(|r| now.saturating_sub(r.retention()) <= start)
        .unwrap_or(*rollups.last().expect("validated rollups are not empty"))
}

/// The virtual shard of a key: FNV-1a of its bytes, modulo [`VSHARDS`].
pub fn vshard_of(key: &str) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash % u64::from(VSHARDS)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const R10: Rollup = Rollup {
        seconds: 10,
        samples: 360,
    };

    #[test]
    fn buckets_and_expiry() {
        assert_eq!(R10.bucket(1_000_009), 1_000_000);
        assert_eq!(R10.expires(1_000_000), 1_003_600);
        assert_eq!(R10.buckets(95, 121), vec![90, 100, 110, 120]);
        assert_eq!(R10.buckets(100, 100), vec![100]);
    }

    #[test]
    fn live_buckets_are_the_kept_ones_plus_the_near_future() {
        let r = Rollup {
            seconds: 10,
            samples: 3,
        };
        // At 1005: 980 expires at 1010 (live), 970 at 1000 (gone); writes may
        // be dated up to 1065.
        assert_eq!(
            r.live_buckets(1005),
            vec![980, 990, 1000, 1010, 1020, 1030, 1040, 1050, 1060]
        );
        assert_eq!(r.live_buckets(1000)[0], 980);
    }

    #[test]
    fn optimal_rollup_is_measured_back_from_now() {
        let rollups = validate(DEFAULT_ROLLUPS.to_vec()).unwrap();
        let now = 10_000_000;
        assert_eq!(optimal(&rollups, now - 3600, now).seconds, 10);
        assert_eq!(optimal(&rollups, now - 3601, now).seconds, 3600);
        assert_eq!(optimal(&rollups, now - 168 * 3600, now).seconds, 3600);
        assert_eq!(optimal(&rollups, now - 30 * 86_400, now).seconds, 86_400);
        // Beyond every retention: the coarsest.
        assert_eq!(optimal(&rollups, 0, now).seconds, 86_400);
    }

    #[test]
    fn rollups_are_checked_and_parsed() {
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
            let r = Rollup { seconds: s, samples: 10 };
            let b = r.bucket(t);
            prop_assert!(b <= t && t < b + s && b.is_multiple_of(s));
        }

        #[test]
        fn live_buckets_cover_exactly_what_is_kept(now in 1_000_000u64..1u64 << 40, s in 1u64..5000, n in 1u64..400) {
            let r = Rollup { seconds: s, samples: n };
            let live = r.live_buckets(now);
            prop_assert!(live.iter().all(|&b| r.expires(b) > now));
            if live[0] >= s {
                prop_assert!(r.expires(live[0] - s) <= now);
            }
            prop_assert_eq!(*live.last().unwrap(), r.bucket(now + MAX_FUTURE_SECS));
        }
    }
}
