//! Rate limiters: fixed window, sliding window counter and GCRA.
//!
//! [`Limiter::check`] asks whether `cost` units for a key fit a [`Limit`],
//! and counts them if so, in one atomic step of the backend. Every answer is
//! a [`Decision`]: allowed, limit, remaining, reset-at and retry-after (a
//! denial is a value, not an error). The algorithms are pure functions over
//! plain values ([`fixed`], [`sliding`], [`gcra`]), unit- and
//! property-tested; stores ([`LimiterStore`]) keep the state.
//!
//! When the backend fails, a limit answers as configured: fail open (admit)
//! or fail closed (deny), marked `degraded` and counted in [`LimiterMetrics`].
//! Bad input (a bad key, limit or cost) is always an error and counts nothing.
//!
//! [`Limiter::check_keyed`] takes an idempotency key: an admitted check
//! keeps the key's mark with its count (the store's same atomic step, the
//! mark kept for [`crate::idempotency::MAX_RETENTION`]), so a repeat counts
//! nothing and answers admitted with the current `remaining` and reset
//! ([`repeated`]); a denied check keeps no mark and its repeat is checked
//! again.
//!
//! Bounds keep every intermediate value below 2^53, so the Redis Lua
//! versions (Lua numbers are doubles) compute exactly what Rust does.

pub mod fixed;
pub mod gcra;
#[cfg(feature = "middleware")]
pub mod middleware;
pub mod sliding;
pub mod store;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

pub use store::{Check, LimiterStore};

use crate::clock::{Clock, SharedClock};
use crate::error::{Error, Result};
use crate::idempotency::Mark;
use crate::name::Name;

/// The largest accepted limit (and burst).
pub const MAX_LIMIT: u64 = 1_000_000;
/// The longest accepted window: 7 days.
pub const MAX_WINDOW_MS: u64 = 7 * 24 * 3600 * 1000;
/// The largest accepted cost of one check.
pub const MAX_COST: u64 = 1_000_000_000;
/// GCRA's capacity in µs (`burst · interval`) must stay below this.
pub const MAX_GCRA_SPAN_US: u64 = 4_000_000_000_000_000;
/// GCRA works in µs below 2^52: checks after this instant (ms) are refused.
pub const MAX_GCRA_NOW_MS: u64 = 4_000_000_000_000;

/// The algorithm of a limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// At most `limit` per aligned window ([`fixed`]).
    Fixed,
    /// Previous window weighted by overlap plus the current one ([`sliding`]).
    Sliding,
    /// Steady rate with bursts ([`gcra`]).
    Gcra,
}

impl std::str::FromStr for Algorithm {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "fixed" => Ok(Algorithm::Fixed),
            "sliding" => Ok(Algorithm::Sliding),
            "gcra" => Ok(Algorithm::Gcra),
            other => Err(Error::InvalidInput(format!(
                "unknown rate-limit algorithm {other:?}: expected fixed, sliding or gcra"
            ))),
        }
    }
}

/// What to answer when the backend cannot be reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailMode {
    /// Admit (availability first). The default.
    #[default]
    Open,
    /// Deny (protection first).
    Closed,
}

/// A limit: `limit` units per `window_ms`, by an algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Units per window (1 to [`MAX_LIMIT`]).
    pub limit: u64,
    /// The window, ms (1 to [`MAX_WINDOW_MS`]).
    pub window_ms: u64,
    /// GCRA only: the largest burst [default: `limit`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    /// What to answer when the backend fails [default: open].
    #[serde(default)]
    pub on_error: FailMode,
}

impl Limit {
    /// `limit` units per `window_ms` by `algorithm`, failing open.
    pub fn new(algorithm: Algorithm, limit: u64, window_ms: u64) -> Self {
        Limit {
            algorithm,
            limit,
            window_ms,
            burst: None,
            on_error: FailMode::Open,
        }
    }

    /// The same limit with a GCRA burst.
    pub fn with_burst(mut self, burst: u64) -> Self {
        self.burst = Some(burst);
        self
    }

    /// The same limit with another fail mode.
    pub fn failing(mut self, mode: FailMode) -> Self {
        self.on_error = mode;
        self
    }

    /// GCRA's burst (its capacity), `limit` when not set.
    pub fn burst(&self) -> u64 {
        self.burst.unwrap_or(self.limit)
    }

    /// Checks the bounds, naming the first value out of range.
    pub fn validate(&self) -> Result<()> {
        if self.limit == 0 || self.limit > MAX_LIMIT {
            return Err(Error::InvalidInput(format!(
                "a limit must be 1 to {MAX_LIMIT}, got {}",
                self.limit
            )));
        }
        if self.window_ms == 0 || self.window_ms > MAX_WINDOW_MS {
            return Err(Error::InvalidInput(format!(
                "a window must be 1 ms to 7 days, got {} ms",
                self.window_ms
            )));
        }
        match (self.algorithm, self.burst) {
            (Algorithm::Gcra, Some(b)) if b == 0 || b > MAX_LIMIT => {
                return Err(Error::InvalidInput(format!(
                    "a burst must be 1 to {MAX_LIMIT}, got {b}"
                )));
            }
            (Algorithm::Gcra, _) => {
                let span = self.burst() * gcra::interval_us(self.window_ms, self.limit);
                if span > MAX_GCRA_SPAN_US {
                    return Err(Error::InvalidInput(format!(
                        "burst × (window / limit) is {} s, too long a span for GCRA",
                        span / 1_000_000
                    )));
                }
            }
            (_, Some(_)) => {
                return Err(Error::InvalidInput(
                    "a burst applies only to the gcra algorithm".into(),
                ));
            }
            _ => {}
        }
        Ok(())
    }
}

/// The answer to a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// Whether the units were admitted (and counted).
    pub allowed: bool,
    /// The limit (GCRA: the burst, its capacity).
    pub limit: u64,
    /// Units that would still be admitted right now.
    pub remaining: u64,
    /// When the limit is back to full with no more traffic, Unix ms.
    pub reset_at_ms: u64,
    /// When the same request would be admitted with no other traffic, ms
    /// from now: 0 when allowed, `None` when never (its cost exceeds the
    /// limit or burst).
    pub retry_after_ms: Option<u64>,
    /// True when the backend failed and the limit's fail mode answered.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub degraded: bool,
}

impl Decision {
    /// Admitted.
    pub fn allowed(limit: u64, remaining: u64, reset_at_ms: u64) -> Self {
        Decision {
            allowed: true,
            limit,
            remaining,
            reset_at_ms,
            retry_after_ms: Some(0),
            degraded: false,
        }
    }

    /// Denied; the same request passes in `retry_after_ms`.
    pub fn denied(limit: u64, remaining: u64, reset_at_ms: u64, retry_after_ms: u64) -> Self {
        Decision {
            allowed: false,
            limit,
            remaining,
            reset_at_ms,
            retry_after_ms: Some(retry_after_ms),
            degraded: false,
        }
    }

    /// Denied for good: the cost exceeds what the limit can ever admit.
    pub fn never(limit: u64, remaining: u64, reset_at_ms: u64) -> Self {
        Decision {
            allowed: false,
            limit,
            remaining,
            reset_at_ms,
            retry_after_ms: None,
            degraded: false,
        }
    }
}

/// Counts of a limiter's checks, for metrics. Shared, lock-free.
#[derive(Debug, Default)]
pub struct LimiterMetrics {
    allowed: AtomicU64,
    denied: AtomicU64,
    failed_open: AtomicU64,
    failed_closed: AtomicU64,
}

/// A snapshot of [`LimiterMetrics`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LimiterMetricsSnapshot {
    /// Checks admitted by the backend.
    pub allowed: u64,
    /// Checks denied by the backend.
    pub denied: u64,
    /// Checks admitted because the backend failed (fail open).
    pub failed_open: u64,
    /// Checks denied because the backend failed (fail closed).
    pub failed_closed: u64,
}

/// Rate limiting over a [`LimiterStore`]. Cheap to clone.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tally::Result<()> {
/// use tally::{Algorithm, Limit};
///
/// let tally = tally::Tally::open("sqlite::memory:").await?;
/// let limiter = tally.limiter();
/// let per_minute = Limit::new(Algorithm::Fixed, 2, 60_000); // 2 a minute
///
/// assert!(limiter.check("user:42", &per_minute, 1).await?.allowed);
/// assert!(limiter.check("user:42", &per_minute, 1).await?.allowed);
/// let third = limiter.check("user:42", &per_minute, 1).await?; // a value, not an error
/// assert!(!third.allowed);
/// assert!(third.retry_after_ms.unwrap() <= 60_000);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Limiter {
    store: Arc<dyn LimiterStore>,
    clock: SharedClock,
    metrics: Arc<LimiterMetrics>,
}

impl Limiter {
    /// A limiter on `store`, reading time from `clock`.
    pub fn new(store: Arc<dyn LimiterStore>, clock: Arc<dyn Clock>) -> Self {
        Limiter {
            store,
            clock,
            metrics: Arc::default(),
        }
    }

    /// The clock in use.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// Checks `cost` (≥ 1) units for `key` under `limit`, counting them if
    /// admitted. A backend failure answers per `limit.on_error`.
    pub async fn check(&self, key: &str, limit: &Limit, cost: u64) -> Result<Decision> {
        self.check_marked(key, limit, cost, None).await
    }

    /// [`Limiter::check`] with an idempotency key `idem`: an admitted check
    /// keeps the key's mark with its count, so the same check sent again (a
    /// retry after a server died before recording its answer) counts
    /// nothing and is answered admitted, with `remaining` and `reset_at_ms`
    /// of the limit's current state (what a check of cost 0 would see). A
    /// denied check keeps no mark: its repeat is checked afresh.
    pub async fn check_keyed(
        &self,
        idem: &str,
        key: &str,
        limit: &Limit,
        cost: u64,
    ) -> Result<Decision> {
        let mark = Mark::of(idem, self.clock.now())?;
        self.check_marked(key, limit, cost, Some(&mark)).await
    }

    async fn check_marked(
        &self,
        key: &str,
        limit: &Limit,
        cost: u64,
        mark: Option<&Mark>,
    ) -> Result<Decision> {
        let key = Name::new(key)?;
        limit.validate()?;
        if cost == 0 || cost > MAX_COST {
            return Err(Error::InvalidCount(format!(
                "a check's cost must be 1 to {MAX_COST}, got {cost}"
            )));
        }
        let now = self.clock.now().as_millis();
        if limit.algorithm == Algorithm::Gcra && now > MAX_GCRA_NOW_MS {
            return Err(Error::InvalidTime(format!(
                "GCRA works with instants before {MAX_GCRA_NOW_MS} ms (year 2096), got {now}"
            )));
        }
        let m = &self.metrics;
        let check = Check {
            key: &key,
            limit,
            cost,
            now_ms: now,
            mark,
        };
        match self.store.check(check).await {
            Ok(d) => {
                let counter = if d.allowed { &m.allowed } else { &m.denied };
                counter.fetch_add(1, Ordering::Relaxed);
                Ok(d)
            }
            Err(e) if e.is_bad_input() => Err(e),
            Err(e) => {
                tracing::warn!(key = %key, error = %e, mode = ?limit.on_error, "rate-limit backend failed");
                let allowed = limit.on_error == FailMode::Open;
                let counter = if allowed {
                    &m.failed_open
                } else {
                    &m.failed_closed
                };
                counter.fetch_add(1, Ordering::Relaxed);
                Ok(Decision {
                    allowed,
                    limit: if limit.algorithm == Algorithm::Gcra {
                        limit.burst()
                    } else {
                        limit.limit
                    },
                    remaining: 0,
                    reset_at_ms: now + limit.window_ms,
                    retry_after_ms: Some(if allowed { 0 } else { limit.window_ms }),
                    degraded: true,
                })
            }
        }
    }

    /// Counts so far.
    pub fn metrics(&self) -> LimiterMetricsSnapshot {
        let m = &self.metrics;
        LimiterMetricsSnapshot {
            allowed: m.allowed.load(Ordering::Relaxed),
            denied: m.denied.load(Ordering::Relaxed),
            failed_open: m.failed_open.load(Ordering::Relaxed),
            failed_closed: m.failed_closed.load(Ordering::Relaxed),
        }
    }
}

/// Decides a check with the pure algorithms on state read from a store:
/// `(prev, cur)` counts for windows, `tat` for GCRA (stores call this).
pub fn decide(limit: &Limit, state: State, now_ms: u64, cost: u64) -> (Decision, State) {
    match (limit.algorithm, state) {
        (Algorithm::Fixed, State::Counts { cur, .. }) => {
            let (d, cur) = fixed::check(cur, now_ms, limit.window_ms, limit.limit, cost);
            (d, State::Counts { prev: 0, cur })
        }
        (Algorithm::Sliding, State::Counts { prev, cur }) => {
            let (d, cur) = sliding::check(prev, cur, now_ms, limit.window_ms, limit.limit, cost);
            (d, State::Counts { prev, cur })
        }
        (Algorithm::Gcra, State::Tat(tat)) => {
            let (d, tat) = gcra::check(
                tat,
                now_ms,
                limit.window_ms,
                limit.limit,
                limit.burst(),
                cost,
            );
            (d, State::Tat(tat))
        }
        (_, state) => panic!("state {state:?} does not fit {:?}", limit.algorithm),
    }
}

/// The answer to a keyed check whose cost was counted already: admitted,
/// counting nothing, with the remaining units and reset of the current
/// `state` (the algorithm's view of a check of cost 0).
pub fn repeated(limit: &Limit, state: State, now_ms: u64) -> Decision {
    let (d, _) = decide(limit, state, now_ms, 0);
    Decision::allowed(d.limit, d.remaining, d.reset_at_ms)
}

/// A limiter's stored state, as the algorithms see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Window counts: the previous window's and the current one's.
    Counts {
        /// Previous window (sliding only).
        prev: u64,
        /// Current window.
        cur: u64,
    },
    /// GCRA's theoretical arrival time, µs (`None`: no state).
    Tat(Option<u64>),
}
