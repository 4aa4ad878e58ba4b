//! Fixtures shared by the behaviour suites: one per backend, each on a real
//! server or file, with a manual clock.

#![allow(dead_code)]

use std::sync::Arc;

use std::time::Duration;

use tally::backend::redis::Layout;
use tally::engine::writer::{WhenFull, WriterSettings};
use tally::engine::{Applied, Batch, SliceStore, WriteSeq};
use tally::{Backend, BackendConfig, Clock, CounterSettings, Counters, ManualClock};
use tally_testkit::{ClusterOptions, RedisCluster, RedisOptions, RedisServer};
use tempfile::TempDir;

/// The backends every behaviour test runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    SqliteMemory,
    SqliteFile,
    RedisDefault,
    RedisRia,
    /// The default layout on a real Redis Cluster: 3 masters, 3 replicas.
    RedisCluster,
    /// The expiring layout (retention by Redis's expiry) on a standalone
    /// redis-server.
    RedisExpiring,
    /// The expiring layout on a real Redis Cluster.
    RedisClusterExpiring,
    /// The compact layout (one hash per series) on a standalone
    /// redis-server.
    RedisCompact,
    /// The compact layout on a real Redis Cluster.
    RedisClusterCompact,
    /// The default layout on a standalone redis-server, daily statistics
    /// with the running total (`DailyTotal::Running`).
    RedisRunning,
    /// The same on a real Redis Cluster.
    RedisClusterRunning,
}

impl Kind {
    pub fn is_redis(self) -> bool {
        matches!(
            self,
            Kind::RedisDefault
                | Kind::RedisRia
                | Kind::RedisCluster
                | Kind::RedisExpiring
                | Kind::RedisClusterExpiring
                | Kind::RedisCompact
                | Kind::RedisClusterCompact
                | Kind::RedisRunning
                | Kind::RedisClusterRunning
        )
    }

    /// Where daily statistics keep their all-time total on this backend.
    pub fn daily_total(self) -> tally::DailyTotal {
        match self {
            Kind::RedisRunning | Kind::RedisClusterRunning => tally::DailyTotal::Running,
            _ => tally::DailyTotal::Hash,
        }
    }

    /// True for the expiring layout (no cleaner: Redis's expiry trims).
    pub fn is_expiring(self) -> bool {
        matches!(self, Kind::RedisExpiring | Kind::RedisClusterExpiring)
    }

    /// True for SQLite, whose writes trim each (series, precision) to the
    /// `keep` slices ending with its newest, so a cleaner finds less.
    pub fn trims_on_write(self) -> bool {
        !self.is_redis()
    }

    /// True on a Redis Cluster.
    pub fn is_cluster(self) -> bool {
        matches!(
            self,
            Kind::RedisCluster
                | Kind::RedisClusterExpiring
                | Kind::RedisClusterCompact
                | Kind::RedisClusterRunning
        )
    }

    /// The Redis key layout of this backend (the default one for SQLite).
    pub fn layout(self) -> Layout {
        match self {
            Kind::RedisRia => Layout::Ria,
            Kind::RedisExpiring | Kind::RedisClusterExpiring => {
                Layout::parse("expiring", "tally").unwrap()
            }
            Kind::RedisCompact | Kind::RedisClusterCompact => {
                Layout::parse("compact", "tally").unwrap()
            }
            _ => Layout::default(),
        }
    }
}

/// A backend opened for one test, with its server or directory kept alive.
pub struct Fixture {
    pub kind: Kind,
    pub clock: ManualClock,
    pub config: BackendConfig,
    pub backend: Backend,
    pub counters: Counters,
    pub server: Option<RedisServer>,
    pub cluster: Option<RedisCluster>,
    pub dir: Option<TempDir>,
}

pub const T0: f64 = 1_336_376_415.5;

/// Whether counter `name` holds no sample at any precision.
pub async fn counter_empty(counters: &Counters, name: &str) -> bool {
    let all = counters.get_all(name).await.unwrap();
    all.iter().all(|x| x.samples.is_empty())
}

/// Whether series `name` (a gauge, a set) holds no slice at any precision.
pub async fn series_empty<R: tally::engine::series::PlainRules>(
    series: &tally::engine::series::SeriesService<R>,
    name: &str,
) -> bool {
    let all = series.get_all(name).await.unwrap();
    all.iter().all(|s| s.slices.is_empty())
}

/// The names [`pages_then_deletes`] finds: the caller writes a series under
/// each.
pub const LISTED: [&str; 4] = ["q:a", "q:b", "q:c", "r"];

/// Pages through the series under [`LISTED`]'s names by the prefix `q:`,
/// two at a time, then deletes `q:b`: found the first time, not the second,
/// and it holds no slice after.
pub async fn pages_then_deletes<R: tally::engine::series::PlainRules>(
    series: &tally::engine::series::SeriesService<R>,
) {
    let first = series.search("q:", None, 2).await.unwrap();
    assert_eq!(first.names, vec!["q:a", "q:b"]);
    let rest = series.search("q:", first.next.as_deref(), 2).await.unwrap();
    assert_eq!((rest.names, rest.next), (vec!["q:c".to_owned()], None));
    assert!(series.delete("q:b").await.unwrap());
    assert!(!series.delete("q:b").await.unwrap());
    assert!(series_empty(series, "q:b").await);
}

/// The total counter `name` holds at `precision` (its samples' counts summed).
pub async fn held(counters: &Counters, name: &str, precision: u64) -> i64 {
    let samples = counters.get(name, precision).await.unwrap();
    samples.iter().map(|s| s.count).sum()
}

impl Fixture {
    pub async fn new(kind: Kind) -> Self {
        Self::with_settings(kind, CounterSettings::default()).await
    }

    pub async fn with_settings(kind: Kind, settings: CounterSettings) -> Self {
        Self::build(kind, settings, RedisOptions::default()).await
    }

    pub async fn build(kind: Kind, settings: CounterSettings, options: RedisOptions) -> Self {
        Self::build_at(kind, settings, options, T0).await
    }

    /// A fixture whose clock starts at the wall clock's minute, for features
    /// whose Redis keys expire by the server's own clock.
    pub async fn near_now(kind: Kind) -> Self {
        let minute = tally::SystemClock.now().whole_secs() / 60 * 60;
        Self::build_at(
            kind,
            CounterSettings::default(),
            RedisOptions::default(),
            minute as f64,
        )
        .await
    }

    /// The counters' cleaner (default settings) that trims `series` too.
    pub fn cleaner_of<R: tally::engine::series::Rules>(
        &self,
        series: &tally::engine::series::SeriesService<R>,
    ) -> tally::engine::Cleaner {
        self.counters
            .cleaner(tally::CleanerSettings::default())
            .unwrap()
            .with_space(series.store().clone(), series.space().clone())
            .unwrap()
    }

    /// The fixture's clock, as the services take it.
    fn shared_clock(&self) -> Arc<dyn Clock> {
        Arc::new(self.clock.clone())
    }

    /// A second, independent client's backend on the same data (as
    /// another process would have; this one for a private in-memory
    /// database, which cannot be opened twice).
    pub async fn second_backend(&self) -> Backend {
        if self.kind == Kind::SqliteMemory {
            self.backend.clone()
        } else {
            Backend::open(&self.config).await.unwrap()
        }
    }

    /// A slice store on this fixture's data and clock, through a second
    /// client when `second` ([`Fixture::second_backend`]).
    async fn slice_store(&self, second: bool) -> Arc<dyn SliceStore> {
        let backend = if second {
            self.second_backend().await
        } else {
            self.backend.clone()
        };
        backend.slice_store(self.shared_clock()).await.unwrap()
    }

    /// The time-series store on this fixture's backend and clock.
    pub async fn tsdb(&self, settings: tally::TsdbSettings) -> tally::Tsdb {
        let store = self.backend.tsdb_store(self.shared_clock()).await.unwrap();
        tally::Tsdb::with_clock(store, settings, self.shared_clock()).unwrap()
    }

    /// Statistics on this fixture's backend and clock.
    pub async fn stats(&self, settings: tally::StatsSettings) -> tally::Stats {
        let store = self.slice_store(false).await;
        tally::Stats::with_clock(store, settings, self.shared_clock()).unwrap()
    }

    /// Gauges on this fixture's backend and clock, through a new client
    /// when `second` (as another process would have; the same one for a
    /// private in-memory database).
    pub async fn gauges(&self, precisions: &[u64], samples: u64, second: bool) -> tally::Gauges {
        let store = self.slice_store(second).await;
        tally::Gauges::with_clock(store, precisions, samples, self.shared_clock()).unwrap()
    }

    /// Sets on this fixture's backend and clock.
    pub async fn sets(&self, precisions: &[u64], samples: u64) -> tally::Sets {
        let store = self.slice_store(false).await;
        tally::Sets::with_clock(store, precisions, samples, self.shared_clock()).unwrap()
    }

    /// Statistics through a second, independent client (as another
    /// process would have; the same one for a private in-memory database).
    pub async fn stats_second_client(&self, settings: tally::StatsSettings) -> tally::Stats {
        let store = self.slice_store(true).await;
        tally::Stats::with_clock(store, settings, self.shared_clock()).unwrap()
    }

    /// Daily statistics on this fixture's backend and clock.
    pub async fn daily(&self, settings: tally::DailySettings) -> tally::DailyStats {
        self.daily_with(settings, self.kind.daily_total()).await
    }

    /// Daily statistics on this fixture's store keeping their totals as
    /// `total` says, as a process configured so would.
    pub async fn daily_with(
        &self,
        settings: tally::DailySettings,
        total: tally::DailyTotal,
    ) -> tally::DailyStats {
        let store = self.backend.daily_store("advert", total).await.unwrap();
        tally::DailyStats::with_clock(store, settings, self.shared_clock()).unwrap()
    }

    pub async fn build_at(
        kind: Kind,
        settings: CounterSettings,
        options: RedisOptions,
        now: f64,
    ) -> Self {
        let clock = ManualClock::at(now);
        let mut cluster = None;
        let (config, server, dir) = match kind {
            Kind::SqliteMemory => (BackendConfig::SqliteMemory, None, None),
            Kind::RedisCluster
            | Kind::RedisClusterExpiring
            | Kind::RedisClusterCompact
            | Kind::RedisClusterRunning => {
                let c = RedisCluster::start();
                let config = BackendConfig::RedisCluster {
                    urls: c.urls(),
                    layout: kind.layout(),
                };
                cluster = Some(c);
                (config, None, None)
            }
            Kind::SqliteFile => {
                let dir = tempfile::tempdir().unwrap();
                (
                    BackendConfig::SqliteDir(dir.path().to_owned()),
                    None,
                    Some(dir),
                )
            }
            Kind::RedisDefault
            | Kind::RedisRia
            | Kind::RedisExpiring
            | Kind::RedisCompact
            | Kind::RedisRunning => {
                let server = RedisServer::start_with(options);
                (
                    BackendConfig::Redis {
                        url: server.url(),
                        layout: kind.layout(),
                    },
                    Some(server),
                    None,
                )
            }
        };
        let backend = Backend::open(&config).await.expect("open backend");
        let store = backend
            .counter_store(Arc::new(clock.clone()))
            .await
            .unwrap();
        let counters = Counters::with_clock(store, settings, Arc::new(clock.clone())).unwrap();
        Fixture {
            kind,
            clock,
            config,
            backend,
            counters,
            server,
            cluster,
            dir,
        }
    }

    /// A second, independent client on the same data (another connection or
    /// SQLite connection set), as another process would have.
    pub async fn second_client(&self) -> Counters {
        if self.kind == Kind::SqliteMemory {
            // A private in-memory database cannot be opened twice.
            return self.counters.clone();
        }
        let store = self.slice_store(true).await;
        Counters::with_clock(store, self.counters.settings().clone(), self.shared_clock()).unwrap()
    }

    /// Counters with `settings` on this fixture's store and clock, as a
    /// restart with other settings would have.
    pub async fn counters_with(&self, settings: CounterSettings) -> Counters {
        let store = self.slice_store(false).await;
        Counters::with_clock(store, settings, self.shared_clock()).unwrap()
    }

    /// A raw redis-rs connection to the fixture's server or cluster.
    pub async fn raw_any(&self) -> RawConn {
        if let Some(cluster) = &self.cluster {
            let client = redis::cluster::ClusterClient::new(cluster.urls()).unwrap();
            return RawConn::Cluster(client.get_async_connection().await.unwrap());
        }
        RawConn::Single(self.raw().await)
    }

    /// A raw redis-rs connection to the fixture's standalone server.
    pub async fn raw(&self) -> redis::aio::MultiplexedConnection {
        let server = self.server.as_ref().expect("a standalone Redis fixture");
        redis::Client::open(server.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }

    /// Every counter name, walking all pages.
    pub async fn all_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self.counters.list(cursor.as_deref(), 1000).await.unwrap();
            names.extend(page.names);
            match page.next {
                Some(next) => cursor = Some(next),
                None => return names,
            }
        }
    }
}

/// Applies `batch` once per step `(lane, seq, outcome)`, numbered as write
/// `seq` of `lane` of the writer `writer`, and asserts each outcome.
pub async fn apply_numbered(
    store: &dyn SliceStore,
    batch: &mut Batch,
    writer: u64,
    steps: &[(u32, u64, Applied)],
) {
    for &(lane, seq, outcome) in steps {
        batch.seq = Some(WriteSeq { writer, lane, seq });
        assert_eq!(
            store.apply(batch).await.unwrap(),
            outcome,
            "lane {lane}, write {seq}"
        );
    }
}

/// Which total of a time-series range [`range_totals`] reads.
#[derive(Clone, Copy, Debug)]
pub enum Total {
    /// The sum of the counts.
    Sum,
    /// The count of distinct values.
    Distinct,
}

/// Each key's `total` of time series `model` from `from` to `to` at
/// `rollup`, in the keys' order.
pub async fn range_totals(
    ts: &tally::Tsdb,
    total: Total,
    model: &str,
    keys: &[String],
    (from, to): (f64, f64),
    rollup: u64,
) -> Vec<i64> {
    let q = tally::TsQuery::new(model, keys, from, to).precision(Some(rollup));
    let range = match total {
        Total::Sum => ts.get_sums(&q).await,
        Total::Distinct => ts.get_distinct_totals(&q).await,
    };
    range.unwrap().totals.iter().map(|t| t.total).collect()
}

/// A keyed write applied, then its repeat found a duplicate: the outcomes
/// [`tries`] expects of a write applied once.
pub const ONCE: [Applied; 2] = [Applied::Written, Applied::Duplicate];

/// Runs the keyed write `write` once per outcome in `expected`, asserting
/// each in turn: a first try, then its repeats.
pub async fn tries<F, Fut>(expected: &[Applied], mut write: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = tally::Result<Applied>>,
{
    for (i, &outcome) in expected.iter().enumerate() {
        assert_eq!(write().await.unwrap(), outcome, "try {i}");
    }
}

/// `base` with a table of 3 entries, flushed every `flush_interval` or at
/// 3 entries, that does `when_full` when full.
pub fn table_of_3(
    base: WriterSettings,
    flush_interval: Duration,
    when_full: WhenFull,
) -> WriterSettings {
    WriterSettings {
        flush_interval,
        flush_entries: 3,
        max_entries: 3,
        when_full,
        ..base
    }
}

/// A space `id` of `kind` keeping `keep` slices of each `(seconds, keep)`.
pub fn space(
    id: &'static str,
    kind: tally::engine::Kind,
    precisions: &[(u64, u64)],
    retention: tally::engine::Retention,
) -> Arc<tally::engine::Space> {
    let precisions = precisions
        .iter()
        .map(|&(seconds, keep)| tally::engine::Precision::new(seconds, keep))
        .collect();
    Arc::new(tally::engine::Space::new(id, kind, precisions, retention).unwrap())
}

/// A writer's settings that never flush on their own within a test (every
/// hour): the test flushes when it means to.
pub fn hourly_flush() -> WriterSettings {
    WriterSettings {
        flush_interval: Duration::from_secs(3600),
        ..WriterSettings::default()
    }
}

/// A writer's settings that make it flush every `flush_interval` in chunks
/// of 3 counters over 2 lanes: many small writes, numbered in two lanes.
pub fn small_chunks(flush_interval: Duration) -> WriterSettings {
    WriterSettings {
        flush_interval,
        chunk_counters: 3,
        lanes: 2,
        ..WriterSettings::default()
    }
}

/// Spawns `task(shared.clone(), i)` for each `i` below `n` and waits until
/// all have ended.
pub async fn concurrently<S: Clone, Fut>(n: u32, shared: &S, task: impl Fn(S, u32) -> Fut)
where
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let tasks: Vec<_> = (0..n)
        .map(|i| tokio::spawn(task(shared.clone(), i)))
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

/// A Redis Cluster of three masters without replicas, and the
/// `redis+cluster://` target naming its nodes.
pub fn three_masters() -> (RedisCluster, String) {
    let cluster = RedisCluster::start_with(ClusterOptions {
        masters: 3,
        replicas_per_master: 0,
        ..ClusterOptions::default()
    });
    let nodes: Vec<String> = cluster
        .nodes()
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port()))
        .collect();
    let target = format!("redis+cluster://{}", nodes.join(","));
    (cluster, target)
}

/// A raw connection to either kind of Redis fixture (clones share it).
#[derive(Clone)]
pub enum RawConn {
    Single(redis::aio::MultiplexedConnection),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl RawConn {
    pub async fn query<T: redis::FromRedisValue>(&mut self, cmd: &redis::Cmd) -> T {
        match self {
            RawConn::Single(c) => cmd.query_async(c).await.unwrap(),
            RawConn::Cluster(c) => cmd.query_async(c).await.unwrap(),
        }
    }
}

/// Runs a suite of tests once per backend: the one way the tests here
/// instantiate `async fn <test>(<backend>)` functions.
///
/// `per_backend!(<module>(<args>), ...: <test>, ...)` declares, for each
/// `<module>(<args>)`, a `mod <module>` holding one
/// `#[tokio::test] async fn <test>()` per test that calls
/// `super::<test>(<args>)`; the arguments are read in the including module
/// (`Kind::SqliteFile`, `SinkKind::Sqlite`). With `fixture =>` before the
/// tests, each takes instead a [`Fixture`] opened with [`Fixture::new`] on
/// its [`Kind`]. The backends most suites run on are named sets:
///
/// - `layouts`: SQLite (memory and file), a standalone redis-server in the
///   three cleaned key layouts, and a Redis Cluster in the default and the
///   compact layout ([`Kind`]). The expiring
///   layout keeps only the window at the clock's now, so tests at fixed
///   historic times run on it where that holds: see `expiring`.
/// - `expiring`: the expiring layout, standalone and on a cluster.
/// - `features`: for features that have no book layout: SQLite (memory and
///   file), a standalone redis-server and a Redis Cluster.
/// - `stores`: the same four for the suites on
///   [`backends::Kind`](crate::backends::Kind) (buffers, limits, locks).
/// - `server`: the HTTP server's suites, on SQLite in memory and a
///   redis-server.
/// - `daily_running`: daily statistics with the running total, on a
///   redis-server and a Redis Cluster.
#[macro_export]
macro_rules! per_backend {
    (layouts: $($tests:tt)*) => {
        $crate::per_backend!(
            sqlite_memory($crate::common::Kind::SqliteMemory),
            sqlite_file($crate::common::Kind::SqliteFile),
            redis_default_layout($crate::common::Kind::RedisDefault),
            redis_ria_layout($crate::common::Kind::RedisRia),
            redis_cluster($crate::common::Kind::RedisCluster),
            redis_compact_layout($crate::common::Kind::RedisCompact),
            redis_cluster_compact($crate::common::Kind::RedisClusterCompact):
            $($tests)*
        );
    };
    (expiring: $($tests:tt)*) => {
        $crate::per_backend!(
            redis_expiring_layout($crate::common::Kind::RedisExpiring),
            redis_cluster_expiring($crate::common::Kind::RedisClusterExpiring):
            $($tests)*
        );
    };
    (features: $($tests:tt)*) => {
        $crate::per_backend!(
            sqlite_memory($crate::common::Kind::SqliteMemory),
            sqlite_file($crate::common::Kind::SqliteFile),
            redis_standalone($crate::common::Kind::RedisDefault),
            redis_cluster($crate::common::Kind::RedisCluster):
            $($tests)*
        );
    };
    (stores: $($tests:tt)*) => {
        $crate::per_backend!(
            sqlite_memory($crate::backends::Kind::SqliteMemory),
            sqlite_file($crate::backends::Kind::SqliteFile),
            redis($crate::backends::Kind::Redis),
            redis_cluster($crate::backends::Kind::RedisCluster):
            $($tests)*
        );
    };
    // Daily statistics with the running total, on Redis and the cluster.
    (daily_running: $($tests:tt)*) => {
        $crate::per_backend!(
            redis_running_total($crate::common::Kind::RedisRunning),
            redis_cluster_running_total($crate::common::Kind::RedisClusterRunning):
            $($tests)*
        );
    };
    // The layouts whose statistics wait in a pending slice.
    (stats_pending: $($tests:tt)*) => {
        $crate::per_backend!(
            redis_default_layout($crate::common::Kind::RedisDefault),
            redis_compact_layout($crate::common::Kind::RedisCompact):
            $($tests)*
        );
    };
    (server: $($tests:tt)*) => {
        $crate::per_backend!(
            sqlite($crate::common::Kind::SqliteMemory),
            redis($crate::common::Kind::RedisDefault):
            $($tests)*
        );
    };
    ($($module:ident $args:tt),+ : fixture => $($test:ident),* $(,)?) => {
        $crate::per_backend!(@each fixture [$($test),*] $($module $args),+);
    };
    ($($module:ident $args:tt),+ : $($test:ident),* $(,)?) => {
        $crate::per_backend!(@each args [$($test),*] $($module $args),+);
    };
    // One module at a time, so the tests repeat inside each.
    (@each $takes:ident $tests:tt $module:ident $args:tt $(, $($rest:tt)*)?) => {
        $crate::per_backend!(@module $takes $module $args $tests);
        $( $crate::per_backend!(@each $takes $tests $($rest)*); )?
    };
    (@module $takes:ident $module:ident $args:tt [$($test:ident),*]) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $test() { $crate::per_backend!(@call $takes $test $args) } )*
        }
    };
    (@call args $test:ident $args:tt) => {
        super::$test $args .await
    };
    (@call fixture $test:ident ($kind:expr)) => {
        super::$test($crate::common::Fixture::new($kind).await).await
    };
}
