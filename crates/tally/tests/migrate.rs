//! `tally::migrate`: SQLite → a real redis-server → a real Redis Cluster,
//! every slice of every counter, statistic and gauge checked against the
//! source; a rerun counts nothing twice; a migration stopped halfway is
//! finished by running it again.

use std::collections::BTreeMap;
use std::sync::Arc;

use tally::engine::{SliceSel, Space, Value};
use tally::migrate::{MigrateSettings, migrate};
use tally::stats::Observation;
use tally::{GaugeOp, Increment, ManualClock, Name, Tally};
use tally_testkit::{ClusterOptions, RedisCluster, RedisServer};
use tempfile::TempDir;

const NOW: f64 = 1_700_000_000.0;

async fn open(target: &str) -> Tally {
    Tally::builder()
        .clock(Arc::new(ManualClock::at(NOW)))
        .open(target)
        .await
        .unwrap()
}

/// Every slice of every series of every engine space, by (space, name,
/// resolution).
type Snapshot = BTreeMap<(String, String, u64), Vec<(u64, Value)>>;

async fn snapshot(tally: &Tally) -> Snapshot {
    let store = tally
        .backend()
        .slice_store(tally.clock().clone())
        .await
        .unwrap();
    let spaces: [Arc<Space>; 4] = [
        tally.counters().space().clone(),
        tally.stats().space().clone(),
        tally.gauges().space().clone(),
        tally.sets().space().clone(),
    ];
    let mut all = Snapshot::new();
    for space in spaces {
        let names = store.list(&space, "", None, 100_000).await.unwrap();
        let resolutions: Vec<u64> = space.resolutions.iter().map(|r| r.seconds).collect();
        let parsed: Vec<Name> = names.iter().map(|n| Name::new(n).unwrap()).collect();
        let read = store
            .read(&space, &parsed, &resolutions, SliceSel::All)
            .await
            .unwrap();
        for (name, per) in names.iter().zip(read) {
            for (&r, slices) in resolutions.iter().zip(per) {
                all.insert(
                    (space.id.to_owned(), name.clone(), r),
                    slices
                        .into_iter()
                        .map(|(s, v)| (s, comparable(v)))
                        .collect(),
                );
            }
        }
    }
    all
}

/// A value as stores are compared: a set by its distinct count (SQLite
/// keeps a small set's values, Redis a HyperLogLog of them; both count
/// through the same registers), every other kind as it is.
fn comparable(v: Value) -> Value {
    match v {
        Value::Distinct(d) => Value::Sum(d.estimate() as i64),
        other => other,
    }
}

/// Where two snapshots differ, for a readable failure.
fn differences(got: &Snapshot, want: &Snapshot) -> Vec<String> {
    let keys: std::collections::BTreeSet<_> = got.keys().chain(want.keys()).collect();
    keys.into_iter()
        .filter(|k| got.get(*k) != want.get(*k))
        .take(5)
        .map(|k| format!("{k:?}: {:?} != {:?}", got.get(k), want.get(k)))
        .collect()
}

/// Counters, statistics, gauges and sets over the last two hours.
async fn fill(tally: &Tally) {
    let mut increments = Vec::new();
    for n in 0..60u32 {
        for k in 0..25u32 {
            let at = NOW - f64::from((n * 97 + k * 251) % 7200);
            increments.push(Increment::new(format!("hits:{n:02}"), i64::from(k + 1)).at(at));
        }
    }
    tally.counters().incr_many(&increments).await.unwrap();
    let mut observations = Vec::new();
    for n in 0..12u32 {
        for k in 0..200u32 {
            let at = NOW - f64::from((k * 37) % 7200);
            let value = f64::from((k * 13 + n) % 500) / 10.0 - 5.0;
            observations.push(Observation::new(format!("lat:{n}"), value).at(at));
        }
    }
    tally.stats().record_many(&observations).await.unwrap();
    let mut ops = Vec::new();
    for n in 0..5u32 {
        for k in 0..40u32 {
            let at = NOW - 7200.0 + f64::from(k * 180);
            ops.push(
                if k % 3 == 0 {
                    GaugeOp::set(format!("temp:{n}"), f64::from(k + n))
                } else {
                    GaugeOp::adjust(format!("temp:{n}"), 1.5)
                }
                .at(at),
            );
        }
    }
    tally.gauges().apply_many(&ops).await.unwrap();
    // Sets: small ones (values) and one past 256 members (registers).
    let mut adds = Vec::new();
    for n in 0..3u32 {
        for k in 0..10u32 {
            let members: Vec<String> = (0..(40 * (n + 1))).map(|m| format!("u{}", m + k)).collect();
            adds.push(
                tally::sets::SetAdd::new(format!("users:{n}"), members)
                    .at(NOW - f64::from(k * 600)),
            );
        }
    }
    tally.sets().add_many(&adds).await.unwrap();
}

fn settings(id: &str) -> MigrateSettings {
    MigrateSettings {
        names_per_batch: 7,
        ..MigrateSettings::new(id)
    }
}

#[tokio::test]
async fn sqlite_to_redis_to_cluster_keeps_every_slice() {
    let dir = TempDir::new().unwrap();
    let sqlite = open(dir.path().join("data").to_str().unwrap()).await;
    fill(&sqlite).await;
    let source = snapshot(&sqlite).await;
    let series = |space: &str| {
        source
            .keys()
            .filter(|(s, _, _)| s == space)
            .map(|(_, n, _)| n)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    assert_eq!(
        (
            series("counters"),
            series("stats"),
            series("gauges"),
            series("sets")
        ),
        (60, 12, 5, 3)
    );

    // SQLite → Redis, with progress after each batch.
    let server = RedisServer::start();
    let redis = open(&server.url()).await;
    let mut calls = 0;
    let report = migrate(&sqlite, &redis, &settings("to-redis"), |_| calls += 1)
        .await
        .unwrap();
    let counters = &report.spaces[0];
    assert_eq!(
        (
            counters.space.as_str(),
            counters.series,
            counters.batches_written
        ),
        ("counters", 60, 9),
        "{report:?}"
    );
    assert_eq!(report.spaces[1].series, 12, "{report:?}");
    assert_eq!(report.spaces[2].series, 5, "{report:?}");
    assert_eq!(report.spaces[3].series, 3, "{report:?}");
    assert_eq!(calls, 9 + 2 + 1 + 1, "one progress call per batch");
    let copied: u64 = report.spaces.iter().map(|s| s.slices).sum();
    let held: usize = source.values().map(Vec::len).sum();
    assert_eq!(copied, held as u64);
    let got = snapshot(&redis).await;
    assert!(got == source, "{:#?}", differences(&got, &source));
    // The services read the copies as they read the originals.
    assert_eq!(
        redis.counters().get("hits:07", 60).await.unwrap(),
        sqlite.counters().get("hits:07", 60).await.unwrap()
    );
    assert_eq!(
        redis.gauges().get("temp:3", 3600).await.unwrap(),
        sqlite.gauges().get("temp:3", 3600).await.unwrap()
    );

    // Running it again counts nothing twice.
    let again = migrate(&sqlite, &redis, &settings("to-redis"), |_| {})
        .await
        .unwrap();
    assert!(
        again
            .spaces
            .iter()
            .all(|s| s.batches_written == 0 && s.batches_skipped > 0),
        "{again:?}"
    );
    let got = snapshot(&redis).await;
    assert!(got == source, "{:#?}", differences(&got, &source));

    // Redis → Cluster, stopped after its first batch, then run again.
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
    let clustered = open(&format!("redis+cluster://{}", nodes.join(","))).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut stop = Some(stop);
    let to_cluster = settings("to-cluster");
    let first = migrate(&redis, &clustered, &to_cluster, |_| {
        if let Some(stop) = stop.take() {
            let _ = stop.send(());
        }
    });
    tokio::select! {
        r = first => panic!("the migration should have been stopped: {r:?}"),
        _ = stopped => {}
    }
    let partial = snapshot(&clustered).await;
    assert!(
        !partial.is_empty() && partial != source,
        "the first run stopped halfway"
    );
    let resumed = migrate(&redis, &clustered, &to_cluster, |_| {})
        .await
        .unwrap();
    let counters = &resumed.spaces[0];
    assert!(counters.batches_skipped >= 1, "{resumed:?}");
    assert_eq!(
        counters.batches_skipped + counters.batches_written,
        9,
        "{resumed:?}"
    );
    let got = snapshot(&clustered).await;
    assert!(got == source, "{:#?}", differences(&got, &source));
}

#[tokio::test]
async fn bad_settings_are_refused_before_anything_is_read() {
    let dir = TempDir::new().unwrap();
    let a = open(dir.path().join("a").to_str().unwrap()).await;
    let b = open(dir.path().join("b").to_str().unwrap()).await;
    for bad in [
        MigrateSettings::new(""),
        MigrateSettings {
            names_per_batch: 0,
            ..MigrateSettings::new("x")
        },
        MigrateSettings {
            names_per_batch: 10_001,
            ..MigrateSettings::new("x")
        },
    ] {
        let err = migrate(&a, &b, &bad, |_| {}).await.unwrap_err();
        assert!(err.is_bad_input(), "{err}");
    }
}
