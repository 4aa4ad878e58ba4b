//! The rate-limit behaviour suite: every test runs on SQLite (memory and
//! file), on a real redis-server and on a real three-node Redis Cluster, on
//! a manual clock.

use std::collections::HashMap;
use std::sync::Arc;

use tally::limits::{State, decide};
use tally::{Algorithm, Backend, BackendConfig, Decision, FailMode, Limit, Limiter, ManualClock};
use tempfile::TempDir;

use crate::backends;
use backends::{Kind, Servers};

struct Fixture {
    clock: ManualClock,
    config: BackendConfig,
    limiter: Limiter,
    servers: Servers,
    _dir: TempDir,
}

/// 2012-05-07T07:40:00Z: a minute boundary.
const MINUTE: u64 = 1_336_376_400_000;

/// A limiter on `backend`'s store, reading `clock`.
async fn limiter(backend: &Backend, clock: &ManualClock) -> Limiter {
    Limiter::new(
        backend.limiter_store().await.unwrap(),
        Arc::new(clock.clone()),
    )
}

impl Fixture {
    async fn new(kind: Kind) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (config, servers) = backends::start(kind, dir.path());
        let clock = ManualClock::at(MINUTE as f64 / 1000.0);
        let limiter = limiter(&Backend::open(&config).await.unwrap(), &clock).await;
        Fixture {
            clock,
            config,
            limiter,
            servers,
            _dir: dir,
        }
    }

    fn at_ms(&self, ms: u64) {
        self.clock.set(ms as f64 / 1000.0);
    }

    async fn other(&self) -> Limiter {
        match backends::other_client(&self.config).await {
            Some(backend) => limiter(&backend, &self.clock).await,
            None => self.limiter.clone(),
        }
    }

    async fn check(&self, key: &str, limit: &Limit, cost: u64) -> Decision {
        self.limiter.check(key, limit, cost).await.unwrap()
    }

    /// How many of `n` single checks at the current time are admitted.
    async fn admitted(&self, key: &str, limit: &Limit, n: u64) -> u64 {
        let mut admitted = 0;
        for _ in 0..n {
            admitted += u64::from(self.check(key, limit, 1).await.allowed);
        }
        admitted
    }
}

per_backend!(stores:
    fixed_window_exact_boundaries_and_its_2x_edge_burst,
    sliding_window_has_no_edge_burst,
    gcra_bursts_then_holds_the_rate,
    cost_counts_n_and_too_costly_is_never,
    decisions_match_the_pure_algorithms,
    fifty_concurrent_clients_never_exceed_the_limit,
    bad_input_counts_nothing,
    keyed_check_counts_its_cost_once,
);

const W: u64 = 60_000;

async fn fixed_window_exact_boundaries_and_its_2x_edge_burst(kind: Kind) {
    let f = Fixture::new(kind).await;
    let limit = Limit::new(Algorithm::Fixed, 10, W);
    // The last millisecond of a window: 10 pass, the 11th waits exactly 1 ms.
    f.at_ms(MINUTE + W - 1);
    assert_eq!(f.admitted("u", &limit, 10).await, 10);
    let d = f.check("u", &limit, 1).await;
    assert_eq!(
        d,
        Decision {
            allowed: false,
            limit: 10,
            remaining: 0,
            reset_at_ms: MINUTE + W,
            retry_after_ms: Some(1),
            degraded: false
        }
    );
    // One millisecond later a new window: 10 more. 20 within 2 ms: the
    // fixed window's known weakness.
    f.at_ms(MINUTE + W);
    let first = f.check("u", &limit, 1).await;
    assert!(first.allowed && first.remaining == 9 && first.reset_at_ms == MINUTE + 2 * W);
    assert_eq!(f.admitted("u", &limit, 20).await, 9);
}

async fn sliding_window_has_no_edge_burst(kind: Kind) {
    let f = Fixture::new(kind).await;
    let limit = Limit::new(Algorithm::Sliding, 10, W);
    f.at_ms(MINUTE + W - 1);
    assert_eq!(f.admitted("u", &limit, 10).await, 10);
    // Across the boundary the previous window still counts (almost fully).
    f.at_ms(MINUTE + W);
    let d = f.check("u", &limit, 1).await;
    assert!(!d.allowed, "{d:?}");
    // 10·(W − e)/W + 1 ≤ 10 needs e ≥ W/10: exactly 6 s.
    assert_eq!(d.retry_after_ms, Some(6_000));
    f.at_ms(MINUTE + W + 5_999);
    assert!(!f.check("u", &limit, 1).await.allowed);
    f.at_ms(MINUTE + W + 6_000);
    let d = f.check("u", &limit, 1).await;
    assert!(d.allowed && d.remaining == 0, "{d:?}");
    // Half-way through, half of the previous window still counts.
    f.at_ms(MINUTE + W + W / 2);
    assert_eq!(f.admitted("u", &limit, 10).await, 4);
}

async fn gcra_bursts_then_holds_the_rate(kind: Kind) {
    let f = Fixture::new(kind).await;
    // 10 per second with bursts of 3: one every 100 ms after the burst.
    let limit = Limit::new(Algorithm::Gcra, 10, 1_000).with_burst(3);
    f.at_ms(MINUTE);
    assert_eq!(f.admitted("u", &limit, 5).await, 3);
    let d = f.check("u", &limit, 1).await;
    assert_eq!(
        (d.allowed, d.limit, d.remaining, d.retry_after_ms),
        (false, 3, 0, Some(100))
    );
    assert_eq!(d.reset_at_ms, MINUTE + 300);
    f.at_ms(MINUTE + 99);
    assert!(!f.check("u", &limit, 1).await.allowed);
    f.at_ms(MINUTE + 100);
    assert!(f.check("u", &limit, 1).await.allowed);
    // Over 2 s, at most burst + 20 pass, however they are spread.
    let mut admitted = 0;
    for step in 0..200 {
        f.at_ms(MINUTE + 100 + step * 10);
        admitted += f.admitted("u", &limit, 2).await;
    }
    assert!(admitted <= 3 + 20, "{admitted}");
    assert!(admitted >= 19, "{admitted}");
}

async fn cost_counts_n_and_too_costly_is_never(kind: Kind) {
    let f = Fixture::new(kind).await;
    for limit in [
        Limit::new(Algorithm::Fixed, 10, W),
        Limit::new(Algorithm::Sliding, 10, W),
        Limit::new(Algorithm::Gcra, 10, W),
    ] {
        let key = format!("{:?}", limit.algorithm);
        f.at_ms(MINUTE + 1_000);
        let d = f.check(&key, &limit, 4).await;
        assert!(d.allowed && d.remaining == 6, "{limit:?}: {d:?}");
        let d = f.check(&key, &limit, 11).await;
        assert_eq!(
            (d.allowed, d.retry_after_ms, d.remaining),
            (false, None, 6),
            "{limit:?}"
        );
        let d = f.check(&key, &limit, 7).await;
        assert!(
            !d.allowed && d.retry_after_ms.unwrap() > 0,
            "{limit:?}: {d:?}"
        );
        assert!(f.check(&key, &limit, 6).await.allowed, "{limit:?}");
        assert_eq!(f.check(&key, &limit, 1).await.remaining, 0, "{limit:?}");
    }
}

/// A model of the stored state: what a store should hold after each check.
#[derive(Default)]
struct Model {
    counts: HashMap<u64, u64>,
    tat: Option<u64>,
}

async fn decisions_match_the_pure_algorithms(kind: Kind) {
    let f = Fixture::new(kind).await;
    let mut seed = 0x1234_5678_9abc_def1u64;
    let mut rng = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    // Windows of a minute, not a second: Redis expires a limiter's keys by
    // its own clock, about a window after the test's clock is done with
    // them, so only a stall of a minute between two checks could expire
    // one early (at a second, a busy machine's stall did).
    const S: u64 = 60;
    for limit in [
        Limit::new(Algorithm::Fixed, 7, 1_000 * S),
        Limit::new(Algorithm::Sliding, 7, 1_000 * S),
        Limit::new(Algorithm::Sliding, 1_000, 3_000 * S),
        Limit::new(Algorithm::Gcra, 7, 1_000 * S).with_burst(4),
        Limit::new(Algorithm::Gcra, 3, 1_000 * S),
    ] {
        let key = format!("{limit:?}");
        let mut model = Model::default();
        let mut now = MINUTE + 17;
        for _ in 0..300 {
            now += rng() % 400 * S;
            let cost = 1 + rng() % 4;
            f.at_ms(now);
            let index = now / limit.window_ms;
            let state = match limit.algorithm {
                Algorithm::Gcra => State::Tat(model.tat),
                _ => State::Counts {
                    prev: model.counts.get(&(index - 1)).copied().unwrap_or(0),
                    cur: model.counts.get(&index).copied().unwrap_or(0),
                },
            };
            let (want, after) = decide(&limit, state, now, cost);
            let got = f.check(&key, &limit, cost).await;
            assert_eq!(got, want, "{limit:?} at {now} cost {cost}");
            match after {
                State::Tat(t) => model.tat = t,
                State::Counts { cur, .. } => {
                    model.counts.insert(index, cur);
                }
            }
        }
    }
}

async fn fifty_concurrent_clients_never_exceed_the_limit(kind: Kind) {
    let f = Fixture::new(kind).await;
    f.at_ms(MINUTE + 5_000);
    for limit in [
        Limit::new(Algorithm::Fixed, 100, W),
        Limit::new(Algorithm::Sliding, 100, W),
        Limit::new(Algorithm::Gcra, 100, W),
    ] {
        let mut clients = Vec::new();
        for _ in 0..50 {
            let limiter = f.other().await;
            clients.push(tokio::spawn(async move {
                let mut admitted = 0u64;
                for _ in 0..6 {
                    admitted +=
                        u64::from(limiter.check("shared", &limit, 1).await.unwrap().allowed);
                }
                admitted
            }));
        }
        let mut admitted = 0;
        for c in clients {
            admitted += c.await.unwrap();
        }
        // 300 attempts at one instant: exactly the limit passes.
        assert_eq!(admitted, 100, "{limit:?}");
    }
}

async fn bad_input_counts_nothing(kind: Kind) {
    let f = Fixture::new(kind).await;
    let ok = Limit::new(Algorithm::Fixed, 1, W);
    let cases = [
        ("", ok, 1, "must not be empty"),
        (
            "k",
            Limit::new(Algorithm::Fixed, 0, W),
            1,
            "a limit must be 1",
        ),
        (
            "k",
            Limit::new(Algorithm::Sliding, 1, 0),
            1,
            "a window must be",
        ),
        (
            "k",
            Limit::new(Algorithm::Fixed, 1, W).with_burst(2),
            1,
            "only to the gcra",
        ),
        (
            "k",
            Limit::new(Algorithm::Gcra, 1, W).with_burst(0),
            1,
            "a burst must be",
        ),
        ("k", ok, 0, "cost must be 1"),
    ];
    for (key, limit, cost, message) in cases {
        let e = f.limiter.check(key, &limit, cost).await.unwrap_err();
        assert!(e.is_bad_input() && e.to_string().contains(message), "{e}");
    }
    // The one unit of "k" is still there.
    assert!(f.check("k", &ok, 1).await.allowed);
    assert_eq!(f.limiter.metrics().allowed, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_fails_open_or_closed_as_configured() {
    let mut f = Fixture::new(Kind::Redis).await;
    let open = Limit::new(Algorithm::Sliding, 1, W);
    let closed = open.failing(FailMode::Closed);
    assert!(f.check("k", &open, 1).await.allowed);
    assert!(!f.check("k", &open, 1).await.allowed);
    f.servers.redis.as_mut().unwrap().kill();
    let d = f.check("k", &open, 1).await;
    assert!(d.allowed && d.degraded, "{d:?}");
    let d = f.check("k", &closed, 1).await;
    assert!(
        !d.allowed && d.degraded && d.retry_after_ms == Some(W),
        "{d:?}"
    );
    // Bad input is still an error, not a fail-open admission.
    assert!(f.limiter.check("k", &open, 0).await.is_err());
    let m = f.limiter.metrics();
    assert_eq!(
        (m.allowed, m.denied, m.failed_open, m.failed_closed),
        (1, 1, 1, 1)
    );
    let json = serde_json::to_value(d).unwrap();
    assert_eq!(json["degraded"], true);
}

/// Issue 11: a keyed check sent again (a retry after a server died before
/// recording its answer), from another process too, counts nothing and is
/// admitted with the current state's remaining; a denied keyed check keeps
/// no mark, so its repeat is checked afresh.
async fn keyed_check_counts_its_cost_once(kind: Kind) {
    let f = Fixture::new(kind).await;
    let other = f.other().await;
    for (i, algorithm) in [Algorithm::Fixed, Algorithm::Sliding, Algorithm::Gcra]
        .into_iter()
        .enumerate()
    {
        f.at_ms(MINUTE + i as u64 * 10 * W);
        let limit = Limit::new(algorithm, 5, W);
        let key = format!("api-{i}");
        let (r1, r2) = (format!("r1-{i}"), format!("r2-{i}"));
        let first = f.limiter.check_keyed(&r1, &key, &limit, 2).await.unwrap();
        assert_eq!((first.allowed, first.remaining), (true, 3), "{algorithm:?}");
        let again = other.check_keyed(&r1, &key, &limit, 2).await.unwrap();
        assert_eq!(again, first, "{algorithm:?}: the repeat counted");
        // Only the first counted: 3 more fit, then nothing.
        let d = f.check(&key, &limit, 2).await;
        assert_eq!((d.allowed, d.remaining), (true, 1), "{algorithm:?}");
        // The repeat answers admitted from the current state.
        let again = f.limiter.check_keyed(&r1, &key, &limit, 2).await.unwrap();
        assert_eq!(
            (again.allowed, again.remaining, again.retry_after_ms),
            (true, 1, Some(0))
        );
        // Denied: no mark, so once there is room its repeat counts.
        let denied = f.limiter.check_keyed(&r2, &key, &limit, 2).await.unwrap();
        assert!(!denied.allowed, "{algorithm:?}");
        f.at_ms(MINUTE + i as u64 * 10 * W + 3 * W);
        let later = f.limiter.check_keyed(&r2, &key, &limit, 2).await.unwrap();
        assert_eq!((later.allowed, later.remaining), (true, 3), "{algorithm:?}");
        let again = other.check_keyed(&r2, &key, &limit, 2).await.unwrap();
        assert_eq!(again, later, "{algorithm:?}");
        assert_eq!(f.admitted(&key, &limit, 5).await, 3, "{algorithm:?}");
    }
    let limit = Limit::new(Algorithm::Fixed, 5, W);
    assert!(
        f.limiter
            .check_keyed("bad key", "api", &limit, 1)
            .await
            .unwrap_err()
            .is_bad_input()
    );
}
