//! The locks behaviour suite: every test runs on SQLite (memory and file),
//! on a real redis-server and on a real three-node Redis Cluster.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tally::{Acquisition, Backend, BackendConfig, Locks, ManualClock};
use tempfile::TempDir;

use crate::backends;
use backends::{Kind, Servers};

struct Fixture {
    clock: ManualClock,
    config: BackendConfig,
    locks: Locks,
    _servers: Servers,
    _dir: TempDir,
}

/// Locks on `backend`'s store, reading `clock`.
async fn locks(backend: &Backend, clock: &ManualClock) -> Locks {
    Locks::new(backend.lock_store().await.unwrap(), Arc::new(clock.clone()))
}

impl Fixture {
    async fn new(kind: Kind) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (config, servers) = backends::start(kind, dir.path());
        let clock = ManualClock::at(1_700_000_000.0);
        let locks = locks(&Backend::open(&config).await.unwrap(), &clock).await;
        Fixture {
            clock,
            config,
            locks,
            _servers: servers,
            _dir: dir,
        }
    }

    /// Another client (own connections) on the same locks, unless in memory.
    async fn other(&self) -> Locks {
        match backends::other_client(&self.config).await {
            Some(backend) => locks(&backend, &self.clock).await,
            None => self.locks.clone(),
        }
    }

    /// Lets `d` pass for both kinds of lease: the manual clock (SQLite) and
    /// the Redis server's clock.
    async fn pass(&self, d: Duration) {
        self.clock.advance(d.as_secs_f64());
        tokio::time::sleep(d).await;
    }
}

per_backend!(stores:
    only_the_holder_releases_or_extends,
    expiry_hands_the_lock_on,
    fencing_tokens_strictly_increase,
    mutual_exclusion_under_50_contenders,
    dropped_guard_releases,
    blocking_acquire_gives_up_at_the_deadline,
    bad_input_is_refused,
    keyed_acquire_release_and_extend_repeat_safely,
);

const TTL: Duration = Duration::from_secs(10);

async fn only_the_holder_releases_or_extends(kind: Kind) {
    let f = Fixture::new(kind).await;
    let other = f.other().await;
    let guard = f.locks.try_acquire("job", TTL).await.unwrap().unwrap();
    assert_eq!(guard.fence(), 1);
    // Held: another attempt is told how long, and gets nothing.
    match other.acquire_once("job", TTL).await.unwrap() {
        Acquisition::Held { retry_after_ms } => {
            assert!(
                retry_after_ms > 0 && retry_after_ms <= 10_000,
                "{retry_after_ms}"
            )
        }
        a => panic!("acquired a held lock: {a:?}"),
    }
    // A wrong token can neither release nor extend, and changes nothing.
    assert!(!other.release("job", "not-the-token").await.unwrap());
    assert!(!other.extend("job", "not-the-token", TTL).await.unwrap());
    assert!(other.try_acquire("job", TTL).await.unwrap().is_none());
    // The holder can.
    assert!(f.locks.extend("job", guard.token(), TTL * 2).await.unwrap());
    assert!(guard.release().await.unwrap());
    let again = other.try_acquire("job", TTL).await.unwrap().unwrap();
    assert_eq!(again.fence(), 2);
    // Locks are independent by name.
    assert!(
        f.locks
            .try_acquire("other-job", TTL)
            .await
            .unwrap()
            .is_some()
    );
}

async fn expiry_hands_the_lock_on(kind: Kind) {
    let f = Fixture::new(kind).await;
    let other = f.other().await;
    let ttl = Duration::from_millis(300);
    // The other client is refused while the lease runs: checked within
    // 250 ms of taking it, since Redis ends the lease by its own clock.
    let (name, mut first, taken) = tally_testkit::in_time(Duration::from_millis(250), |run| {
        let (locks, other) = (&f.locks, &other);
        async move {
            let name = format!("job-{run}");
            let first = locks.try_acquire(&name, ttl).await.unwrap().unwrap();
            let taken = other.try_acquire(&name, ttl).await.unwrap();
            (name, first, taken)
        }
    })
    .await;
    assert!(taken.is_none());
    f.pass(Duration::from_millis(450)).await;
    let second = other.try_acquire(&name, TTL).await.unwrap().unwrap();
    assert!(second.fence() > first.fence());
    // The former holder can no longer extend or release, and the new
    // holder keeps the lock.
    assert!(!first.extend(TTL).await.unwrap());
    assert!(!f.locks.release(&name, first.token()).await.unwrap());
    assert!(f.locks.try_acquire(&name, TTL).await.unwrap().is_none());
    assert!(!first.release().await.unwrap());
    assert!(second.release().await.unwrap());
}

async fn fencing_tokens_strictly_increase(kind: Kind) {
    let f = Fixture::new(kind).await;
    let mut last = 0;
    for i in 0..20 {
        // A lease released by its holder is taken for long: a 50 ms one
        // could end (by Redis's clock) before a loaded machine releases it.
        let ttl = if i % 2 == 0 {
            TTL
        } else {
            Duration::from_millis(50)
        };
        let g = f.locks.try_acquire("fenced", ttl).await.unwrap().unwrap();
        assert!(g.fence() > last, "{} after {last}", g.fence());
        last = g.fence();
        if i % 2 == 0 {
            assert!(g.release().await.unwrap());
        } else {
            // Let it expire instead: the fence still grows.
            std::mem::forget(g);
            f.pass(Duration::from_millis(80)).await;
        }
    }
    assert_eq!(last, 20);
}

async fn mutual_exclusion_under_50_contenders(kind: Kind) {
    let f = Fixture::new(kind).await;
    let busy = Arc::new(AtomicBool::new(false));
    let fences = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let (locks, busy, fences) = (f.other().await, busy.clone(), fences.clone());
        tasks.push(tokio::spawn(async move {
            let guard = locks
                .acquire("shared", Duration::from_secs(30), Duration::from_secs(60))
                .await
                .unwrap()
                .expect("acquired before the deadline");
            // The shared resource: nobody else may be inside.
            assert!(!busy.swap(true, Ordering::SeqCst), "two holders at once");
            fences.lock().unwrap().push(guard.fence());
            tokio::time::sleep(Duration::from_millis(2)).await;
            busy.store(false, Ordering::SeqCst);
            assert!(guard.release().await.unwrap());
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let fences = fences.lock().unwrap().clone();
    assert_eq!(fences.len(), 50);
    // In the order holders entered, fences strictly increase: 1..=50.
    assert_eq!(fences, (1..=50).collect::<Vec<u64>>());
}

async fn dropped_guard_releases(kind: Kind) {
    let f = Fixture::new(kind).await;
    // A lease of an hour: only the release can free it while the test runs
    // (Redis ends a lease by its own clock).
    {
        let hour = Duration::from_secs(3600);
        let _guard = f.locks.try_acquire("job", hour).await.unwrap().unwrap();
    }
    // The drop releases in the background: wait for it, however slowly a
    // loaded machine runs the release.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut got = None;
    while got.is_none() && std::time::Instant::now() < deadline {
        got = f.locks.try_acquire("job", TTL).await.unwrap();
        if got.is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    assert_eq!(got.expect("released after drop").fence(), 2);
}

async fn blocking_acquire_gives_up_at_the_deadline(kind: Kind) {
    let f = Fixture::new(kind).await;
    // Held for an hour: a wait that ends before that gave up at its
    // deadline (how soon after it is checked on a paused clock below,
    // where no stall of the machine counts).
    let hour = Duration::from_secs(3600);
    let _held = f.locks.try_acquire("job", hour).await.unwrap().unwrap();
    gives_up_after_150_ms(&f, Duration::from_secs(60)).await;
}

/// A blocking acquire of the held lock "job" with a 150 ms deadline gets
/// nothing, having waited at least 150 ms and less than `under` (on the
/// runtime's clock: the real one, or the paused one where it is paused).
async fn gives_up_after_150_ms(f: &Fixture, under: Duration) {
    let started = tokio::time::Instant::now();
    let got = f
        .locks
        .acquire("job", TTL, Duration::from_millis(150))
        .await
        .unwrap();
    assert!(got.is_none());
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(150) && waited < under,
        "{waited:?}"
    );
}

/// [`blocking_acquire_gives_up_at_the_deadline`] on the runtime's paused
/// clock (SQLite's work holds it still): the wait ends at its deadline, not
/// a backoff step or a lease later, however slow the machine is.
#[tokio::test(start_paused = true)]
async fn blocking_acquire_gives_up_at_the_deadline_on_a_paused_clock() {
    let f = Fixture::new(Kind::SqliteMemory).await;
    let _held = f.locks.try_acquire("job", TTL).await.unwrap().unwrap();
    gives_up_after_150_ms(&f, Duration::from_secs(2)).await;
}

async fn bad_input_is_refused(kind: Kind) {
    let f = Fixture::new(kind).await;
    for (name, ttl, message) in [
        ("", TTL, "must not be empty"),
        ("job", Duration::from_millis(1), "time to live"),
        ("job", Duration::from_secs(90_000), "time to live"),
    ] {
        let e = f.locks.acquire_once(name, ttl).await.unwrap_err();
        assert!(e.is_bad_input() && e.to_string().contains(message), "{e}");
    }
    let e = f
        .locks
        .acquire("job", TTL, Duration::from_secs(4000))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("wait is at most"), "{e}");
    // Nothing was taken by the refused calls.
    assert_eq!(
        f.locks
            .try_acquire("job", TTL)
            .await
            .unwrap()
            .unwrap()
            .fence(),
        1
    );
}

/// Issue 11: a keyed acquisition sent again (a retry after a server died
/// before recording its answer), from another process too, finds the lock
/// held by its own token: acquired, same token and fence, the lease not
/// renewed; a repeated extend or release changes nothing more.
async fn keyed_acquire_release_and_extend_repeat_safely(kind: Kind) {
    let f = Fixture::new(kind).await;
    let other = f.other().await;
    let first = match f
        .locks
        .acquire_keyed("req-1", "job", TTL, Duration::ZERO)
        .await
        .unwrap()
    {
        Acquisition::Acquired(lease) => lease,
        held => panic!("a free lock was held: {held:?}"),
    };
    assert_eq!(first.token, tally::locks::keyed_token("req-1", "job"));
    assert_eq!((first.fence, first.ttl_ms), (1, 10_000));
    f.pass(Duration::from_millis(200)).await;
    let again = match other
        .acquire_keyed("req-1", "job", TTL, Duration::ZERO)
        .await
        .unwrap()
    {
        Acquisition::Acquired(lease) => lease,
        held => panic!("the repeat did not find its own lease: {held:?}"),
    };
    assert_eq!(
        (&again.name, &again.token, again.fence),
        (&first.name, &first.token, 1)
    );
    assert!(
        again.ttl_ms <= 9_800 && again.ttl_ms > 5_000,
        "not renewed: {again:?}"
    );
    // Another key (another request) does not get it.
    assert!(matches!(
        other
            .acquire_keyed("req-2", "job", TTL, Duration::ZERO)
            .await
            .unwrap(),
        Acquisition::Held { .. }
    ));
    assert!(
        f.locks
            .acquire_keyed("bad key", "job", TTL, Duration::ZERO)
            .await
            .unwrap_err()
            .is_bad_input()
    );
    // Extend and release check the token: a repeat changes nothing more.
    assert!(f.locks.extend("job", &first.token, TTL).await.unwrap());
    assert!(other.extend("job", &first.token, TTL).await.unwrap());
    assert!(f.locks.release("job", &first.token).await.unwrap());
    assert!(!other.release("job", &first.token).await.unwrap());
    assert!(!f.locks.extend("job", &first.token, TTL).await.unwrap());
    // Free now: the next acquisition is a new one.
    let next = f.locks.try_acquire("job", TTL).await.unwrap().unwrap();
    assert_eq!(next.fence(), 2);
}
