//! GCRA (generic cell rate algorithm): a token bucket without a refill task.
//!
//! `limit` units per `window` at a steady rate, with bursts of up to `burst`
//! units. Time is in microseconds; the emission interval `T` is
//! `ceil(window / limit)` µs (rounded up, so never more than `limit` per
//! window). State is one number, the theoretical arrival time `tat`. A check
//! of `cost` is admitted when `max(tat, now) + cost·T − burst·T ≤ now`; then
//! `tat` becomes `max(tat, now) + cost·T`. Retry-after is exact: the moment
//! the same request is admitted, to the millisecond.

use super::Decision;

/// The emission interval in µs.
pub fn interval_us(window_ms: u64, limit: u64) -> u64 {
    (window_ms * 1000).div_ceil(limit)
}

/// Decides a check of `cost` given the stored `tat` (µs; `None` when
/// absent); returns the decision and the new `tat`.
pub fn check(
    tat: Option<u64>,
    now_ms: u64,
    window_ms: u64,
    limit: u64,
    burst: u64,
    cost: u64,
) -> (Decision, Option<u64>) {
    let t = interval_us(window_ms, limit);
    let now = now_ms * 1000;
    let tau = burst * t;
    let base = tat.map_or(now, |tat| tat.max(now));
    let used = base - now;
    let remaining_before = tau.saturating_sub(used) / t;
    let reset_ms = |tat: u64| tat.div_ceil(1000);
    if cost > burst {
        return (
            Decision::never(burst, remaining_before, reset_ms(base)),
            tat,
        );
    }
    let new_tat = base + cost * t;
    let allow_at = new_tat - tau.min(new_tat);
    if allow_at <= now {
        let remaining = (tau - (new_tat - now)) / t;
        (
            Decision::allowed(burst, remaining, reset_ms(new_tat)),
            Some(new_tat),
        )
    } else {
        let retry_ms = (allow_at - now).div_ceil(1000);
        (
            Decision::denied(burst, remaining_before, reset_ms(base), retry_ms),
            tat,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn burst_then_steady_rate() {
        // 10 per second, bursts of 3: T = 100 ms.
        let mut tat = None;
        for i in 0..3 {
            let (d, t) = check(tat, 1_000, 1_000, 10, 3, 1);
            assert!(d.allowed, "{i}");
            assert_eq!(d.remaining, 2 - i);
            tat = t;
        }
        let (d, _) = check(tat, 1_000, 1_000, 10, 3, 1);
        assert_eq!((d.allowed, d.retry_after_ms), (false, Some(100)));
        assert!(!check(tat, 1_099, 1_000, 10, 3, 1).0.allowed);
        assert!(check(tat, 1_100, 1_000, 10, 3, 1).0.allowed);
        // Cost 2 needs two intervals.
        assert_eq!(
            check(tat, 1_000, 1_000, 10, 3, 2).0.retry_after_ms,
            Some(200)
        );
        assert_eq!(check(tat, 1_000, 1_000, 10, 3, 4).0.retry_after_ms, None);
    }

    proptest! {
        #[test]
        fn admits_at_most_burst_plus_rate(
            steps in proptest::collection::vec((0u64..300, 1u64..4), 1..300),
            limit in 1u64..50, burst in 1u64..10,
        ) {
            let w = 1_000;
            let t = interval_us(w, limit);
            let (mut tat, mut now, mut admitted) = (None, 10_000u64, 0u64);
            let start = now;
            for (gap, cost) in steps {
                now += gap;
                let (d, new_tat) = check(tat, now, w, limit, burst, cost);
                if d.allowed {
                    admitted += cost;
                    // Whatever was admitted since `start` fits burst + rate.
                    prop_assert!(admitted * t <= burst * t + (now - start) * 1000);
                } else if let Some(r) = d.retry_after_ms {
                    prop_assert!(check(tat, now + r, w, limit, burst, cost).0.allowed);
                    prop_assert!(!check(tat, now + r - 1, w, limit, burst, cost).0.allowed);
                }
                tat = new_tat;
            }
        }
    }
}
