//! `Tally::open`: one line opens each kind of target (a real redis-server,
//! a real Redis Cluster, a data directory, memory) and every service it
//! hands out works there; the builder's settings take effect; bad targets
//! and settings are refused before anything is opened.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tally::TsQuery;
use tally::backend::redis::Layout;
use tally::backend::redis::ReplicationWait;
use tally::buffers::{Flusher, FlusherSettings, TableConfig, Tables, Update, open_sink};
use tally::open::target::FORMS;
use tally::{Algorithm, BackendConfig, Clock, Error, Limit, ManualClock, SystemClock, Tally};
use tally_testkit::RedisServer;
use tempfile::TempDir;

/// Uses every service of `tally` once and checks what each wrote; flushes
/// buffers into a SQLite sink under `sink_dir`.
async fn use_every_service(tally: &Tally, sink_dir: &Path) {
    let day = 86_400;
    let total = |samples: Vec<tally::Sample>| samples.iter().map(|s| s.count).sum::<i64>();

    let counters = tally.counters();
    counters.incr("open:hits", 2).await.unwrap();
    assert_eq!(total(counters.get("open:hits", day).await.unwrap()), 2);

    let stats = tally.stats();
    stats.record("open:lat", 10.0).await.unwrap();
    let stats_writer = tally.stats_writer();
    stats_writer.record("open:lat", 30.0, None).await.unwrap();

    let writer = tally.writer();
    writer.add("open:hits", 3, None).await.unwrap();
    tally.shutdown().await;
    assert_eq!(total(counters.get("open:hits", day).await.unwrap()), 5);
    assert!(
        tally.writer().add("open:hits", 1, None).await.is_err(),
        "the writer is shut down"
    );
    let lat = &stats.get("open:lat", day, &[]).await.unwrap()[0].summary;
    assert_eq!(
        (lat.count, lat.mean),
        (2, Some(20.0)),
        "both writes of the stat"
    );
    assert!(
        tally
            .stats_writer()
            .record("open:lat", 1.0, None)
            .await
            .is_err(),
        "the stats writer is shut down"
    );

    let report = tally.cleaner().pass().await.unwrap();
    assert!(report.scanned >= 1, "{report:?}");
    assert_eq!(total(counters.get("open:hits", day).await.unwrap()), 5);

    let now = tally.clock().now().as_secs_f64();
    tally.tsdb().incr("page", 7, 4).await.unwrap();
    let sums = tally
        .tsdb()
        .get_sums(&TsQuery::new(
            "page",
            &["7".to_owned()],
            now - 60.0,
            now + 60.0,
        ))
        .await
        .unwrap();
    assert_eq!(sums.totals[0].total, 4);

    let daily = tally.daily();
    daily.incr_by("ad-1", 3, None).await.unwrap();
    assert_eq!(daily.total("ad-1").await.unwrap(), 3);
    assert_eq!(daily.today_count("ad-1").await.unwrap().count, 3);

    let sink_path = sink_dir.join("sink.sqlite3");
    rusqlite::Connection::open(&sink_path)
        .unwrap()
        .execute_batch(
            "CREATE TABLE groups (id INTEGER PRIMARY KEY, times_seen INTEGER NOT NULL DEFAULT 0)",
        )
        .unwrap();
    let tables = Tables::new(&[TableConfig {
        name: "groups".into(),
        key: vec!["id".into()],
        counters: vec!["times_seen".into()],
        last_write: vec![],
    }])
    .unwrap();
    let buffers = tally.buffers(tables.clone());
    buffers
        .incr(&Update::new("groups").key("id", 1).add("times_seen", 6))
        .await
        .unwrap();
    assert_eq!(buffers.stats().await.unwrap().pending_rows, 1);
    let sink = open_sink(&format!("sqlite:{}", sink_path.display()), &tables)
        .await
        .unwrap();
    let flusher = Flusher::new(buffers.clone(), sink.clone(), FlusherSettings::default()).unwrap();
    assert_eq!(flusher.drain().await.unwrap().rows, 1);
    let row = buffers
        .read(sink.as_ref(), "groups", &[("id", "1")])
        .await
        .unwrap();
    assert_eq!(row.counters["times_seen"], 6);
    assert!(row.pending.is_empty(), "{row:?}");

    let limit = Limit::new(Algorithm::Fixed, 1, 60_000);
    let limiter = tally.limiter();
    assert!(limiter.check("open:user", &limit, 1).await.unwrap().allowed);
    assert!(!limiter.check("open:user", &limit, 1).await.unwrap().allowed);
    assert_eq!(tally.limiter().metrics().denied, 1, "one limiter per Tally");

    let locks = tally.locks();
    let guard = locks
        .try_acquire("open:job", Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the lock is free");
    assert!(
        locks
            .try_acquire("open:job", Duration::from_secs(10))
            .await
            .unwrap()
            .is_none(),
        "the lock is held"
    );
    assert!(guard.release().await.unwrap());
}

/// A plain client connection to `server`, to look at the keys.
async fn connect(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_redis_url_opens_every_service() {
    let server = RedisServer::start();
    let sink = TempDir::new().unwrap();
    let tally = Tally::open(&server.url()).await.unwrap();
    assert_eq!(tally.backend().describe(), "redis");
    use_every_service(&tally, sink.path()).await;
}

#[tokio::test]
async fn a_cluster_target_opens_every_service() {
    let (_cluster, target) = crate::common::three_masters();
    let sink = TempDir::new().unwrap();
    let tally = Tally::open(&target).await.unwrap();
    assert_eq!(tally.backend().describe(), "redis-cluster");
    use_every_service(&tally, sink.path()).await;
}

#[tokio::test]
async fn a_data_directory_opens_every_service_and_keeps_its_data() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let target = data.to_str().unwrap();
    let tally = Tally::open(target).await.unwrap();
    assert!(data.join("tally.sqlite3").is_file());
    use_every_service(&tally, dir.path()).await;
    drop(tally);

    let again = Tally::open(&format!("sqlite://{target}")).await.unwrap();
    let samples = again.counters().get("open:hits", 86_400).await.unwrap();
    assert_eq!(samples.iter().map(|s| s.count).sum::<i64>(), 5);
}

#[tokio::test]
async fn memory_opens_every_service() {
    let sink = TempDir::new().unwrap();
    let tally = Tally::open("sqlite::memory:").await.unwrap();
    assert_eq!(tally.backend().describe(), "sqlite::memory:");
    use_every_service(&tally, sink.path()).await;
}

/// The builder's settings reach the services: the clock, the precisions
/// and samples (the cleaner trims by them), the Redis key prefix.
#[tokio::test]
async fn the_builders_settings_take_effect() {
    let server = RedisServer::start();
    let start = (SystemClock.now().whole_secs() / 60 * 60) as f64;
    for target in ["sqlite::memory:".to_owned(), server.url()] {
        let clock = ManualClock::at(start);
        let tally = Tally::builder()
            .prefix("shop")
            .precisions([1, 60])
            .samples(2)
            .clock(Arc::new(clock.clone()))
            .open(&target)
            .await
            .unwrap();
        assert_eq!(tally.clock().now().as_secs_f64(), start);
        let counters = tally.counters();
        assert_eq!(counters.settings().precisions, vec![1, 60]);
        counters.incr("orders", 1).await.unwrap();
        assert!(matches!(
            counters.get("orders", 5).await,
            Err(Error::UnknownPrecision { .. })
        ));
        clock.advance(10.0);
        let report = tally.cleaner().pass().await.unwrap();
        assert_eq!(report.samples_removed, 1, "{target}: {report:?}");
        assert!(counters.get("orders", 1).await.unwrap().is_empty());
        assert_eq!(counters.get("orders", 60).await.unwrap()[0].count, 1);
    }
    let mut conn = connect(&server).await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!keys.is_empty());
    assert!(
        keys.iter().all(|k| k.starts_with("{shop:")),
        "every counter key is under the prefix: {keys:?}"
    );
}

#[tokio::test]
async fn a_bad_target_is_a_config_error_listing_the_accepted_forms() {
    for target in [
        "postgres://db/app",
        "localhost:6379",
        "redis+cluster://a:1,b",
        "",
    ] {
        let Err(err) = Tally::open(target).await else {
            panic!("{target:?} opened");
        };
        assert!(matches!(err, Error::Config(_)), "{target:?}: {err:?}");
        assert!(err.to_string().contains(FORMS), "{target:?}: {err}");
    }
}

/// Bad input opens nothing: a data directory is not even created.
#[tokio::test]
async fn bad_settings_are_refused_before_anything_is_opened() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("never");
    let target = data.to_str().unwrap();
    let wait = ReplicationWait {
        replicas: 1,
        timeout: Duration::from_secs(1),
    };
    let refused = [
        ("samples 0", Tally::builder().samples(0).open(target).await),
        (
            "no precision",
            Tally::builder().precisions([]).open(target).await,
        ),
        (
            "prefix with braces",
            Tally::builder().prefix("{x}").open(target).await,
        ),
        (
            "entity prefix",
            Tally::builder().entity_prefix("").open(target).await,
        ),
        (
            "retention 0",
            Tally::builder().daily_retention(0).open(target).await,
        ),
        (
            "replicas on SQLite",
            Tally::builder().replication_wait(wait).open(target).await,
        ),
        (
            "ria on SQLite",
            Tally::builder().layout(Layout::Ria).open(target).await,
        ),
    ];
    for (what, result) in refused {
        let Err(err) = result else {
            panic!("{what}: opened");
        };
        assert!(matches!(err, Error::Config(_)), "{what}: {err:?}");
    }
    assert!(!data.exists(), "nothing was created");

    // Checked before connecting: nothing listens on these ports, so an
    // attempt to connect would fail as unavailable instead.
    let port = tally_testkit::free_port();
    let nowhere = format!("redis+cluster://127.0.0.1:{port}");
    let ria = Tally::builder().layout(Layout::Ria).open(&nowhere).await;
    assert!(
        matches!(ria, Err(Error::Config(ref m)) if m.contains("ria")),
        "{ria:?}"
    );
    let redis = format!("redis://127.0.0.1:{port}/");
    for bad in [
        ReplicationWait {
            replicas: 0,
            ..wait
        },
        // WAIT takes whole milliseconds, and 0 would wait forever.
        ReplicationWait {
            timeout: Duration::from_micros(500),
            ..wait
        },
        ReplicationWait {
            timeout: Duration::from_secs(61),
            ..wait
        },
    ] {
        let result = Tally::builder().replication_wait(bad).open(&redis).await;
        assert!(
            matches!(result, Err(Error::Config(_))),
            "{bad:?}: {result:?}"
        );
    }
}

#[tokio::test]
async fn an_unreachable_server_is_unavailable() {
    let port = tally_testkit::free_port();
    let err = Tally::open(&format!("redis://127.0.0.1:{port}/"))
        .await
        .unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
}

/// A caller holding a `BackendConfig` (the `tally` command) opens it with
/// its own layout; a different layout set on the builder is refused.
#[tokio::test]
async fn open_backend_keeps_the_configs_layout() {
    let server = RedisServer::start();
    let config = BackendConfig::Redis {
        url: server.url(),
        layout: Layout::Ria,
    };
    let tally = Tally::builder().open_backend(config.clone()).await.unwrap();
    tally.counters().incr("hits", 1).await.unwrap();
    let mut conn = connect(&server).await;
    let known: Vec<String> = redis::cmd("ZRANGE")
        .arg("known:")
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        known.contains(&"1:hits".to_owned()),
        "the book's keys: {known:?}"
    );

    let err = Tally::builder()
        .prefix("shop")
        .open_backend(config)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Config(ref m) if m.contains("layout")),
        "{err:?}"
    );
}

/// Statistics follow the counters' precisions and samples unless set; the
/// cleaner Tally hands out trims them too; bad statistics settings open
/// nothing.
#[tokio::test]
async fn stats_settings_follow_the_counters_and_the_cleaner_trims_stats() {
    let clock = ManualClock::at(1_700_000_000.0);
    let tally = Tally::builder()
        .precisions([1, 60])
        .samples(10)
        .clock(Arc::new(clock.clone()))
        .open("sqlite::memory:")
        .await
        .unwrap();
    assert_eq!(tally.stats().settings().precisions, vec![1, 60]);
    assert_eq!(tally.stats().settings().samples, 10);
    tally.stats().record("lat", 5.0).await.unwrap();
    clock.advance(30.0);
    let report = tally.cleaner().pass().await.unwrap();
    assert_eq!(
        report.samples_removed, 1,
        "the stat's 1 s slice: {report:?}"
    );
    assert!(tally.stats().get("lat", 1, &[]).await.unwrap().is_empty());
    assert_eq!(tally.stats().get("lat", 60, &[]).await.unwrap().len(), 1);

    let own = Tally::builder()
        .stats_settings(tally::StatsSettings {
            precisions: vec![5],
            samples: 3,
            accuracy: 0.02,
            ..tally::StatsSettings::default()
        })
        .open("sqlite::memory:")
        .await
        .unwrap();
    assert_eq!(own.stats().settings().precisions, vec![5]);
    assert_eq!(own.stats().settings().accuracy, 0.02);

    let bad = Tally::builder()
        .stats_settings(tally::StatsSettings {
            accuracy: 0.5,
            ..tally::StatsSettings::default()
        })
        .open("sqlite::memory:")
        .await;
    assert!(
        matches!(&bad, Err(Error::Config(why)) if why.contains("statistics:")),
        "{bad:?}"
    );
}
