//! Fixed window: at most `limit` units per aligned window of `window_ms`.
//!
//! The published `INCR` + `EXPIRE` limiter (docs/reference.md, "Rate
//! limits"), made exact: a check counts its cost only when admitted (a denied
//! request does not eat the window), and its answer carries remaining, reset
//! and retry-after. Known weakness kept on purpose (it is the algorithm): up
//! to 2× `limit` can pass around a window boundary.

use super::Decision;

/// The window index and its end (ms) for `now_ms`.
pub fn window(now_ms: u64, window_ms: u64) -> (u64, u64) {
    let index = now_ms / window_ms;
    (index, (index + 1) * window_ms)
}

/// Decides a check of `cost` when the window holds `count`; returns the
/// decision and the new count.
pub fn check(count: u64, now_ms: u64, window_ms: u64, limit: u64, cost: u64) -> (Decision, u64) {
    let (_, end) = window(now_ms, window_ms);
    let remaining = limit.saturating_sub(count);
    if cost > limit {
        return (Decision::never(limit, remaining, end), count);
    }
    if count + cost <= limit {
        let count = count + cost;
        (Decision::allowed(limit, limit - count, end), count)
    } else {
        // The next window starts empty and the cost fits in it.
        (Decision::denied(limit, remaining, end, end - now_ms), count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn exact_boundaries() {
        let (d, c) = check(0, 59_999, 60_000, 3, 3);
        assert!(d.allowed && d.remaining == 0 && c == 3 && d.reset_at_ms == 60_000);
        let (d, c) = check(3, 59_999, 60_000, 3, 1);
        assert!(!d.allowed && c == 3);
        assert_eq!(d.retry_after_ms, Some(1));
        let (d, _) = check(0, 0, 60_000, 3, 4);
        assert_eq!((d.allowed, d.retry_after_ms), (false, None));
    }

    proptest! {
        #[test]
        fn never_more_than_limit_per_window(
            steps in proptest::collection::vec((0u64..5_000, 1u64..5), 1..200),
            limit in 1u64..20,
        ) {
            let w = 10_000;
            let (mut now, mut count, mut index) = (0u64, 0u64, 0u64);
            for (gap, cost) in steps {
                now += gap;
                let (i, _) = window(now, w);
                if i != index { index = i; count = 0; }
                let (d, c) = check(count, now, w, limit, cost);
                prop_assert!(c <= limit);
                if d.allowed { prop_assert_eq!(c, count + cost); } else { prop_assert_eq!(c, count); }
                // Retry-after is exact: at that moment the same request passes.
                if let Some(r) = d.retry_after_ms.filter(|_| !d.allowed) {
                    let (j, _) = window(now + r, w);
                    let later = if j == i { count } else { 0 };
                    prop_assert!(check(later, now + r, w, limit, cost).0.allowed);
                    prop_assert!(!check(count, now + r - 1, w, limit, cost).0.allowed);
                }
                count = c;
            }
        }
    }
}
