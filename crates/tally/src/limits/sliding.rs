//! Sliding window counter: the previous window's count, weighted by how
//! much of it still overlaps the sliding window, plus the current count.
//!
//! Admits `cost` when `prev·(W − e) + (cur + cost)·W ≤ limit·W`, where `e`
//! is the time elapsed in the current window: exact integer arithmetic, no
//! floats. Unlike the fixed window, it does not let 2× `limit` through
//! around a window boundary. Retry-after is the exact earliest time the same
//! request would be admitted with no other traffic (never optimistic).

use super::Decision;

/// The current window's index, start and elapsed time for `now_ms`.
pub fn window(now_ms: u64, window_ms: u64) -> (u64, u64, u64) {
    let index = now_ms / window_ms;
    let start = index * window_ms;
    (index, start, now_ms - start)
}

fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

/// Decides a check of `cost` given the previous and current windows' counts;
/// returns the decision and the new current count.
pub fn check(
    prev: u64,
    cur: u64,
    now_ms: u64,
    window_ms: u64,
    limit: u64,
    cost: u64,
) -> (Decision, u64) {
    let w = window_ms;
    let (_, start, e) = window(now_ms, w);
    let capacity = limit * w;
    let weighted = prev * (w - e) + cur * w;
    let remaining_before = capacity.saturating_sub(weighted) / w;
    let reset_of = |cur: u64| {
        if cur > 0 {
            start + 2 * w
        } else if prev > 0 {
            start + w
        } else {
            now_ms
        }
    };
    if cost > limit {
        return (Decision::never(limit, remaining_before, reset_of(cur)), cur);
    }
    if weighted + cost * w <= capacity {
        let cur = cur + cost;
        let remaining = (capacity - (prev * (w - e) + cur * w)) / w;
        return (Decision::allowed(limit, remaining, reset_of(cur)), cur);
    }
    // Earliest admission with no other traffic.
    let retry_at = 'found: {
        // Later in this window, as the previous window's weight fades.
        if cur + cost <= limit && prev > 0 {
            let x = prev * (w - e) + (cur + cost) * w - capacity;
            let d = ceil_div(x, prev);
            if e + d < w {
                break 'found now_ms + d;
            }
        }
        // In the next window, where this window's count is the previous one.
        let need = cur * w + cost * w;
        if need <= capacity {
            break 'found start + w;
        }
        let e2 = ceil_div(need - capacity, cur);
        if e2 < w {
            break 'found start + w + e2;
        }
        // Two windows on, nothing is counted any more.
        start + 2 * w
    };
    (
        Decision::denied(limit, remaining_before, reset_of(cur), retry_at - now_ms),
        cur,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The counts as seen at `at` if nothing else happens after `now`.
    fn counts_at(prev: u64, cur: u64, now: u64, at: u64, w: u64) -> (u64, u64) {
        let (i, _, _) = window(now, w);
        let (j, _, _) = window(at, w);
        match j - i {
            0 => (prev, cur),
            1 => (cur, 0),
            _ => (0, 0),
        }
    }

    #[test]
    fn weight_fades_exactly() {
        // 10 in the previous window, at the middle of this one: 5 count.
        let (d, c) = check(10, 0, 90_000, 60_000, 10, 5);
        assert!(d.allowed && c == 5 && d.remaining == 0);
        let (d, _) = check(10, 5, 90_000, 60_000, 10, 1);
        assert!(!d.allowed);
        // Needs the previous weight to drop by 1/10 of a window: 6 s.
        assert_eq!(d.retry_after_ms, Some(6_000));
        assert!(check(10, 5, 96_000, 60_000, 10, 1).0.allowed);
        assert!(!check(10, 5, 95_999, 60_000, 10, 1).0.allowed);
    }

    proptest! {
        #[test]
        fn retry_after_is_exact_and_windows_stay_bounded(
            prev in 0u64..30, cur in 0u64..30, e in 0u64..10_000, limit in 1u64..30, cost in 1u64..10,
        ) {
            let w = 10_000;
            let prev = prev.min(limit);
            let cur = cur.min(limit);
            let now = 50 * w + e;
            let (d, c) = check(prev, cur, now, w, limit, cost);
            prop_assert!(c <= limit.max(cur));
            if !d.allowed {
                if let Some(r) = d.retry_after_ms {
                    prop_assert!(r > 0);
                    let (p2, c2) = counts_at(prev, cur, now, now + r, w);
                    prop_assert!(check(p2, c2, now + r, w, limit, cost).0.allowed, "not admitted at retry time");
                    let (p1, c1) = counts_at(prev, cur, now, now + r - 1, w);
                    prop_assert!(!check(p1, c1, now + r - 1, w, limit, cost).0.allowed, "admitted before retry time");
                } else {
                    prop_assert!(cost > limit);
                }
            }
        }
    }
}
