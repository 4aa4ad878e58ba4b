//! Tally on a Redis Cluster that changes under load: a slot migration
//! (MOVED, ASK and TRYAGAIN) with counters, daily statistics and the time
//! series writing into the moving slot, and master failovers, on a real
//! cluster of 3 masters and 3 replicas started by the harness.
//!
//! Writers count what was acknowledged; afterwards the stored totals are
//! compared with it. Counter writes carry write ids and are retried with the
//! same id until acknowledged, so a retry is never applied twice.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tally::TsQuery;
use tally::backend::redis::{Layout, layout};
use tally::counters::{Applied, WriteSeq};
use tally::engine::Batch;
use tally::tsdb::precision::vshard_of;
use tally::{
    Backend, BackendConfig, Clock, CounterSettings, Counters, DailySettings, DailyStats, Increment,
    ManualClock, ReplicationWait, SystemClock, Tsdb, TsdbSettings,
};
use tally_testkit::{RedisCluster, key_slot};

fn settings() -> CounterSettings {
    CounterSettings {
        precisions: vec![1, 60],
        samples: 1000,
    }
}

async fn open(
    cluster: &RedisCluster,
    wait: Option<ReplicationWait>,
    layout: Layout,
) -> (Backend, ManualClock) {
    let backend = Backend::open(&BackendConfig::RedisCluster {
        urls: cluster.urls(),
        layout,
    })
    .await
    .unwrap()
    .with_replication_wait(wait)
    .unwrap();
    let clock = ManualClock::at(SystemClock.now().whole_secs() as f64);
    (backend, clock)
}

async fn counters(backend: &Backend, clock: &ManualClock) -> Counters {
    let store = backend
        .counter_store(Arc::new(clock.clone()))
        .await
        .unwrap();
    Counters::with_clock(store, settings(), Arc::new(clock.clone())).unwrap()
}

/// The slot of a counter's keys in the default and the expiring layout.
fn counter_slot(name: &str) -> u16 {
    key_slot(layout::tag("tally", layout::shard_of(name)).as_bytes())
}

/// The total a counter holds (its 60 s precision, summed).
async fn stored(c: &Counters, name: &str) -> i64 {
    crate::common::held(c, name, 60).await
}

/// Writes `+1` to each of `names` in one batch per loop with the writer's
/// next sequence number, retrying that batch (same number) until it is acknowledged; counts the
/// acknowledged batches and the errors seen on the way in `group`.
fn spawn_counter_writer(
    c: Counters,
    names: Vec<String>,
    writer: u64,
    stop: Arc<AtomicBool>,
    group: Group,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let incs: Vec<Increment> = names.iter().map(|n| Increment::new(n, 1)).collect();
        let mut seq = 0u64;
        while !stop.load(Ordering::SeqCst) {
            seq += 1;
            let mut batch: Batch = c.prepare(&incs).unwrap();
            batch.seq = Some(WriteSeq {
                writer,
                lane: 0,
                seq,
            });
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                match c.store().apply(&batch).await {
                    Ok(Applied::Written) => break,
                    Ok(Applied::Duplicate) => break, // an earlier attempt landed
                    Err(e) => {
                        assert!(Instant::now() < deadline, "writes never resumed: {e}");
                        group.errors.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
            group.acked.fetch_add(1, Ordering::SeqCst);
        }
    })
}

/// Daily views in plain calls (no write ids): redirections are retried by the
/// client only when the script did not run, so every success counts once.
fn spawn_daily_writer(
    d: DailyStats,
    entity: String,
    stop: Arc<AtomicBool>,
    group: Group,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !stop.load(Ordering::SeqCst) {
            match d.incr(&entity).await {
                Ok(_) => {
                    group.acked.fetch_add(1, Ordering::SeqCst);
                }
                Err(_) => {
                    group.errors.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    })
}

/// A group of writer tasks: how many, what they had acknowledged and how
/// many of their attempts failed.
#[derive(Clone)]
struct Group {
    tasks: u64,
    acked: Arc<AtomicI64>,
    errors: Arc<AtomicU64>,
}

impl Group {
    /// A group of `tasks` writer tasks that have acknowledged and failed
    /// nothing yet.
    fn new(tasks: u64) -> Self {
        Group {
            tasks,
            acked: Arc::new(AtomicI64::new(0)),
            errors: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Attempts finished so far, acknowledged or failed.
    fn attempts(&self) -> u64 {
        self.acked.load(Ordering::SeqCst) as u64 + self.errors.load(Ordering::SeqCst)
    }
}

/// Waits up to `patience` until the writers have acknowledged `at_least`
/// writes in all (`acked`); fails with `what` otherwise.
async fn wait_for_acks(acked: &AtomicI64, at_least: i64, patience: Duration, what: &str) {
    let deadline = Instant::now() + patience;
    while acked.load(Ordering::SeqCst) < at_least {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Tells the writers to stop and waits until they have.
async fn stop_writers(stop: &AtomicBool, tasks: Vec<tokio::task::JoinHandle<()>>) {
    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        t.await.unwrap();
    }
}

/// Blocks until each group has finished more attempts since `since` (its
/// [`Group::attempts`] then) than it has tasks: each task has at most one
/// attempt under way, so at least one of them started after `since` was
/// taken. Panics after 60 s.
fn wait_for_attempts(groups: &[Group], since: &[u64]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while groups
        .iter()
        .zip(since)
        .any(|(g, &s)| g.attempts() <= s + g.tasks)
    {
        assert!(Instant::now() < deadline, "the writers made no progress");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Two tests of `body`: `$default` in the default layout, `$expiring` in
/// the expiring one.
macro_rules! in_both_layouts {
    ($body:ident: $default:ident, $expiring:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $default() {
            $body(Layout::default()).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $expiring() {
            $body(Layout::parse("expiring", "tally").unwrap()).await;
        }
    };
}

in_both_layouts!(
    slot_migration:
    slot_migration_under_write_load_loses_and_doubles_nothing,
    slot_migration_in_the_expiring_layout_loses_and_doubles_nothing
);

async fn slot_migration(layout: Layout) {
    let cluster = Arc::new(RedisCluster::start());
    let (backend, clock) = open(&cluster, None, layout).await;
    // The listpack check reads every master: 1000 samples (1061 at peak) do
    // not fit the default 512 entries.
    let check = backend
        .check_counter_encoding(&settings(), Duration::from_secs(60))
        .await
        .expect("every master's limits are readable");
    assert_eq!(check.nodes.len(), 3, "{check:?}");
    assert_eq!(check.problems().len(), 3, "{check:?}");
    let c = counters(&backend, &clock).await;
    let store = backend
        .daily_store("advert", tally::DailyTotal::Hash)
        .await
        .unwrap();
    let d =
        DailyStats::with_clock(store, DailySettings::default(), Arc::new(clock.clone())).unwrap();

    // "hot" lives in the slot we move; an entity in the same slot too.
    let slot = counter_slot("hot");
    let entity = (0..2_000_000u32)
        .map(|i| i.to_string())
        .find(|id| key_slot(format!("advert:{id}").as_bytes()) == slot)
        .expect("an entity id in the slot");
    // A time-series model whose key "k" lives in that slot too.
    let model = (0..200_000u32)
        .map(|i| format!("m{i}"))
        .find(|m| key_slot(format!("tally:ts:{m}:{}", vshard_of("k")).as_bytes()) == slot)
        .expect("a model in the slot");
    let ts = Tsdb::with_clock(
        backend.tsdb_store(Arc::new(clock.clone())).await.unwrap(),
        TsdbSettings::default(),
        Arc::new(clock.clone()),
    )
    .unwrap();
    let cold = (0..1000)
        .map(|i| format!("cold{i}"))
        .find(|n| counter_slot(n) != slot)
        .unwrap();
    let from = cluster.master_of_slot(slot);
    let to = *cluster.masters().iter().find(|&&m| m != from).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let (counts, views, series) = (Group::new(3), Group::new(2), Group::new(1));
    let mut tasks = Vec::new();
    for w in 0..3 {
        tasks.push(spawn_counter_writer(
            c.clone(),
            vec!["hot".into(), cold.clone()],
            w,
            stop.clone(),
            counts.clone(),
        ));
    }
    for _ in 0..2 {
        tasks.push(spawn_daily_writer(
            d.clone(),
            entity.clone(),
            stop.clone(),
            views.clone(),
        ));
    }
    {
        let (ts, model, stop, series) = (ts.clone(), model.clone(), stop.clone(), series.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                match ts.incr(&model, "k", 1).await {
                    Ok(()) => series.acked.fetch_add(1, Ordering::SeqCst),
                    Err(_) => series.errors.fetch_add(1, Ordering::SeqCst) as i64,
                };
            }
        }));
    }
    let groups = [counts.clone(), views.clone(), series.clone()];
    // Every kind of writer has written into the slot before it moves.
    let deadline = Instant::now() + Duration::from_secs(60);
    while groups.iter().any(|g| g.acked.load(Ordering::SeqCst) == 0) {
        assert!(Instant::now() < deadline, "no write was acknowledged");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let before = counts.acked.load(Ordering::SeqCst);

    // Move the slot one key at a time while the writers go on, then back.
    let moved = {
        let (cluster, groups) = (cluster.clone(), groups.clone());
        tokio::task::spawn_blocking(move || {
            let mut moved = 0;
            // Every group of writers sends into the slot as it is now.
            let writers_meet_the_slot = || {
                let since: Vec<u64> = groups.iter().map(Group::attempts).collect();
                wait_for_attempts(&groups, &since);
            };
            for (a, b) in [(from, to), (to, from)] {
                cluster.begin_slot_migration(slot, b);
                loop {
                    let n = cluster.migrate_keys(slot, a, b, 1);
                    moved += n;
                    if n == 0 {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(30));
                }
                // Every key is on `b` and the slot still migrating: `a`
                // answers ASK to whatever the writers send it now.
                writers_meet_the_slot();
                cluster.finish_slot_migration(slot, a, b);
                // And MOVED, before the slot moves back.
                writers_meet_the_slot();
            }
            moved
        })
        .await
        .unwrap()
    };
    // Writes go on once the slot is back.
    let stalled = "no write was acknowledged during the migration";
    wait_for_acks(&counts.acked, before + 1, Duration::from_secs(60), stalled).await;
    stop_writers(&stop, tasks).await;
    let acked = counts.acked.load(Ordering::SeqCst);
    let d_acked = views.acked.load(Ordering::SeqCst);
    assert!(moved > 0, "the slot held no keys to move");
    assert!(acked > before, "{stalled}");
    assert_eq!(cluster.master_of_slot(slot), from);
    // Exact: nothing lost, nothing doubled, on either side of the slot.
    assert_eq!(stored(&c, "hot").await, acked, "hot counter");
    assert_eq!(stored(&c, &cold).await, acked, "cold counter");
    assert_eq!(d.total(&entity).await.unwrap(), d_acked, "daily total");
    assert_eq!(d.today_count(&entity).await.unwrap().count, d_acked);
    let t_acked = series.acked.load(Ordering::SeqCst);
    let now = clock.now().as_secs_f64();
    for rollup in [3600, 86_400] {
        let sums = ts
            .get_sums(&TsQuery::new(&model, &["k".to_owned()], now, now).precision(Some(rollup)))
            .await
            .unwrap();
        assert_eq!(
            sums.totals[0].total, t_acked,
            "time series, rollup {rollup}"
        );
    }
    // The writers really met the half-moved slot: the servers answered
    // ASK and/or TRYAGAIN (the client followed them).
    let redirects: Vec<String> = [from, to]
        .iter()
        .flat_map(|&m| {
            let info = cluster
                .admin(m, &["INFO", "errorstats"])
                .text()
                .unwrap_or_default();
            info.lines()
                .filter(|l| l.starts_with("errorstat_ASK") || l.starts_with("errorstat_TRYAGAIN"))
                .map(|l| format!("node {m}: {l}"))
                .collect::<Vec<_>>()
        })
        .collect();
    eprintln!(
        "migration: {moved} key moves; counters {acked} batches acknowledged, {} errors retried; \
         daily {d_acked} views acknowledged, {} failed; time series {t_acked} acknowledged, \
         {} failed; redirections: {redirects:?}",
        counts.errors.load(Ordering::SeqCst),
        views.errors.load(Ordering::SeqCst),
        series.errors.load(Ordering::SeqCst)
    );
    assert!(!redirects.is_empty(), "no ASK or TRYAGAIN was answered");
}

/// Kills the master serving "hot" mid-load and restarts it (it rejoins as a
/// replica), so writes that wait for a replica can be confirmed again.
async fn failover_under_load(
    wait: Option<ReplicationWait>,
    layout: Layout,
) -> (i64, i64, u64, i64) {
    let cluster = RedisCluster::start();
    let (backend, clock) = open(&cluster, wait, layout).await;
    let c = counters(&backend, &clock).await;
    let slot = counter_slot("hot");
    let master = cluster.master_of_slot(slot);
    let cluster = Arc::new(std::sync::Mutex::new(cluster));

    let stop = Arc::new(AtomicBool::new(false));
    let counts = Group::new(3);
    let tasks: Vec<_> = (0..3)
        .map(|w| {
            spawn_counter_writer(
                c.clone(),
                vec!["hot".into()],
                w,
                stop.clone(),
                counts.clone(),
            )
        })
        .collect();
    // Kill it mid-load: once the writers have written a hundred batches.
    wait_for_acks(
        &counts.acked,
        100,
        Duration::from_secs(60),
        "no load before the failover",
    )
    .await;
    let promoted = {
        let cluster = cluster.clone();
        tokio::task::spawn_blocking(move || {
            let mut cluster = cluster.lock().unwrap();
            let promoted = cluster.kill_master_and_wait_failover(master);
            cluster.restart_node(master);
            promoted
        })
        .await
        .unwrap()
    };
    let at_failover = counts.acked.load(Ordering::SeqCst);
    // Writes resume: wait for a hundred more acknowledgements (with WAIT,
    // those need the restarted node to have synced as the new replica).
    let stalled = "writes did not resume after the failover";
    wait_for_acks(
        &counts.acked,
        at_failover + 100,
        Duration::from_secs(30),
        stalled,
    )
    .await;
    stop_writers(&stop, tasks).await;
    assert_eq!(cluster.lock().unwrap().master_of_slot(slot), promoted);
    let acked = counts.acked.load(Ordering::SeqCst);
    assert!(acked > at_failover, "{stalled}");
    (
        acked,
        stored(&c, "hot").await,
        counts.errors.load(Ordering::SeqCst),
        at_failover,
    )
}

in_both_layouts!(
    failover_with_wait:
    failover_with_wait_keeps_every_acknowledged_write,
    failover_with_wait_in_the_expiring_layout_keeps_every_acknowledged_write
);

async fn failover_with_wait(layout: Layout) {
    // Each write waits for the one replica: what was acknowledged is on the
    // replica that takes over, so nothing acknowledged is lost.
    let (acked, stored, errors, at_failover) = failover_under_load(
        Some(ReplicationWait {
            replicas: 1,
            timeout: Duration::from_millis(500),
        }),
        layout,
    )
    .await;
    eprintln!(
        "failover (WAIT 1): {acked} acknowledged ({at_failover} when the cluster was whole again), {stored} stored, \
         {errors} errors retried"
    );
    assert_eq!(stored, acked);
}

in_both_layouts!(
    failover_without_wait:
    failover_without_wait_never_doubles,
    failover_without_wait_in_the_expiring_layout_never_doubles
);

async fn failover_without_wait(layout: Layout) {
    // Without WAIT, Redis replicates asynchronously: writes acknowledged just
    // before the crash may be lost (Redis's documented guarantee), but write
    // ids keep retries from ever counting twice.
    let (acked, stored, errors, at_failover) = failover_under_load(None, layout).await;
    eprintln!(
        "failover (no WAIT): {acked} acknowledged ({at_failover} when the cluster was whole again), {stored} stored, \
         {errors} errors retried, {} lost",
        acked - stored
    );
    assert!(stored <= acked, "{stored} stored > {acked} acknowledged");
    assert!(stored > 0);
}
