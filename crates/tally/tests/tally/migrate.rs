//! `tally::migrate`: SQLite → a real redis-server → a real Redis Cluster,
//! every slice of every counter, statistic, gauge and set, every kept day
//! and total of the daily statistics, and every bucket of every kind of
//! time series checked against the source; a rerun counts nothing twice; a
//! migration stopped halfway (in the engine's spaces, the daily statistics
//! or the time series) is finished by running it again.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use tally::TsQuery;
use tally::engine::{Kind, SeriesList, SliceRead, Space, Value};
use tally::migrate::{MigrateReport, MigrateSettings, Progress, migrate};
use tally::stats::Observation;
use tally::tsdb::{TsIncrement, Window};
use tally::{Clock, GaugeOp, Increment, ManualClock, Name, SystemClock, Tally, View};
use tally_testkit::RedisServer;
use tempfile::TempDir;

/// The tests' now: the system's (whole seconds), held for the whole test,
/// since Redis expires time series by its own clock.
fn now() -> f64 {
    static NOW: OnceLock<f64> = OnceLock::new();
    *NOW.get_or_init(|| SystemClock.now().whole_secs() as f64)
}

async fn open(target: &str) -> Tally {
    Tally::builder()
        .clock(Arc::new(ManualClock::at(now())))
        .open(target)
        .await
        .unwrap()
}

/// Every slice of every series of every engine space, by (space, name,
/// precision).
type Snapshot = BTreeMap<(String, String, u64), Vec<(u64, Value)>>;

async fn snapshot(tally: &Tally) -> Snapshot {
    // The slice store Tally's statistics, gauges and sets write through
    // reads every space.
    let store = tally.stats().store().clone();
    let spaces: [Arc<Space>; 4] = [
        tally.counters().space().clone(),
        tally.stats().space().clone(),
        tally.gauges().space().clone(),
        tally.sets().space().clone(),
    ];
    let mut all = Snapshot::new();
    for space in spaces {
        let names = store.list(SeriesList::new(&space, 100_000)).await.unwrap();
        let precisions: Vec<u64> = space.precisions.iter().map(|r| r.seconds).collect();
        let parsed: Vec<Name> = names.iter().map(|n| Name::new(n).unwrap()).collect();
        let read = store
            .read(SliceRead::new(&space, &parsed, &precisions))
            .await
            .unwrap();
        for (name, per) in names.iter().zip(read) {
            for (&r, slices) in precisions.iter().zip(per) {
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

/// Counters, statistics, gauges and sets over the last two hours.
async fn fill(tally: &Tally) {
    let mut increments = Vec::new();
    for n in 0..60u32 {
        for k in 0..25u32 {
            let at = now() - f64::from((n * 97 + k * 251) % 7200);
            increments.push(Increment::new(format!("hits:{n:02}"), i64::from(k + 1)).at(at));
        }
    }
    tally.counters().incr_many(&increments).await.unwrap();
    let mut observations = Vec::new();
    for n in 0..12u32 {
        for k in 0..200u32 {
            let at = now() - f64::from((k * 37) % 7200);
            let value = f64::from((k * 13 + n) % 500) / 10.0 - 5.0;
            observations.push(Observation::new(format!("lat:{n}"), value).at(at));
        }
    }
    tally.stats().record_many(&observations).await.unwrap();
    let mut ops = Vec::new();
    for n in 0..5u32 {
        for k in 0..40u32 {
            let at = now() - 7200.0 + f64::from(k * 180);
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
                    .at(now() - f64::from(k * 600)),
            );
        }
    }
    tally.sets().add_many(&adds).await.unwrap();
}

/// Daily statistics (views dated in and before the 90-day window) and time
/// series of every kind: counts, distinct values (sets small and past 256
/// values, stored as registers) and most frequent items.
async fn fill_more(tally: &Tally) {
    let mut views = Vec::new();
    for n in 0..17u32 {
        for k in 0..20u32 {
            views.push(View {
                entity: format!("ad-{n:02}"),
                count: i64::from(n + k + 1),
                at: Some(now() - f64::from(k * 7 * 86_400 + n * 3_600)),
            });
        }
    }
    tally.daily().incr_many(&views).await.unwrap();
    let ts = tally.tsdb();
    let mut increments = Vec::new();
    for n in 0..8u32 {
        for k in 0..30u32 {
            let mut ago = (n * 397 + k * 1_201) % 200_000;
            // Nothing in the 10 s rollup's last minutes: Redis expires by
            // its own clock, which runs on while the test does.
            if (3_000..4_000).contains(&ago) {
                ago += 1_000;
            }
            let at = now() - f64::from(ago);
            increments.push(
                TsIncrement::new("project", n)
                    .count(i64::from(k + 1))
                    .at(at),
            );
        }
    }
    ts.incr_multi(&increments).await.unwrap();
    for n in 0..6u32 {
        for k in 0..4u32 {
            let size = if n == 0 && k == 0 { 700 } else { 10 * (n + 1) };
            let values: Vec<String> = (0..size).map(|v| format!("u{}", v + k * 5)).collect();
            let at = now() - f64::from(k * 5_000 + n * 13);
            ts.record("project.users", n, &values, Some(at))
                .await
                .unwrap();
        }
    }
    for n in 0..5u32 {
        for k in 0..6u32 {
            let items: Vec<(String, i64)> = (0..(3 + k))
                .map(|i| (format!("item{}", (i * 7 + n) % 11), i64::from(i + k + 1)))
                .collect();
            let at = now() - f64::from(k * 2_000 + n);
            ts.record_frequency("project.top", n, &items, Some(at))
                .await
                .unwrap();
        }
    }
}

/// Every entity's last 90 days and total.
type DailySnapshot = BTreeMap<String, (Vec<(String, i64)>, i64)>;

async fn daily_snapshot(tally: &Tally) -> DailySnapshot {
    let store = tally
        .backend()
        .daily_store(tally::daily::DEFAULT_ENTITY_PREFIX, tally::DailyTotal::Hash)
        .await
        .unwrap();
    let mut all = DailySnapshot::new();
    for held in store.list().await.unwrap() {
        let entity = held.entity.as_str();
        let days = tally.daily().last(entity, 90).await.unwrap();
        let total = tally.daily().total(entity).await.unwrap();
        let days = days
            .into_iter()
            .filter(|d| d.count != 0)
            .map(|d| (d.day.to_string(), d.count))
            .collect();
        all.insert(entity.to_owned(), (days, total));
    }
    all
}

/// A stored time-series value as stores are compared: a count, a
/// HyperLogLog's registers (Redis's dense bytes), a summary's items.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Stored {
    Count(i64),
    Registers(Vec<u8>),
    Items(Vec<(String, i64)>),
}

/// Every non-empty bucket of every (model, key, rollup, kind) a store holds.
type TsSnapshot = BTreeMap<(String, String, u64, u8), Vec<(u64, Stored)>>;

async fn ts_snapshot(tally: &Tally) -> TsSnapshot {
    let store = tally
        .backend()
        .tsdb_store(tally.clock().clone())
        .await
        .unwrap();
    let now = now() as u64;
    let precisions = tally.tsdb().settings().precisions.clone();
    let mut all = TsSnapshot::new();
    for held in store.list(now).await.unwrap() {
        let p = precisions
            .iter()
            .find(|p| p.seconds == held.rollup)
            .unwrap();
        let window = Window {
            model: held.model.clone(),
            keys: vec![held.key.clone()],
            rollup: held.rollup,
            buckets: tally::tsdb::precision::live_buckets(*p, now),
            now,
        };
        let read = store.read(held.kind, &window).await.unwrap();
        let values: Vec<(u64, Stored)> = window
            .buckets
            .iter()
            .zip(&read[0])
            .filter(|(_, v)| !v.is_identity())
            .map(|(&b, v)| {
                let stored = match v {
                    Value::Sum(n) => Stored::Count(*n),
                    Value::Distinct(d) => Stored::Registers(d.redis_bytes()),
                    Value::Top(t) => {
                        let mut items: Vec<(String, i64)> =
                            t.items().map(|(i, c)| (i.to_owned(), c)).collect();
                        items.sort();
                        Stored::Items(items)
                    }
                    other => panic!("a time series holds {other:?}"),
                };
                (b, stored)
            })
            .collect();
        assert!(!values.is_empty(), "{held:?} is listed and holds nothing");
        let id = (
            held.model.to_string(),
            held.key.to_string(),
            held.rollup,
            held.kind.code(),
        );
        all.insert(id, values);
    }
    all
}

/// Everything a store holds, for comparing two.
#[derive(Debug, PartialEq)]
struct Everything {
    slices: Snapshot,
    daily: DailySnapshot,
    ts: TsSnapshot,
}

async fn everything(tally: &Tally) -> Everything {
    Everything {
        slices: snapshot(tally).await,
        daily: daily_snapshot(tally).await,
        ts: ts_snapshot(tally).await,
    }
}

/// Where two stores differ, for a readable failure.
/// Asserts that `tally` holds exactly `all`, listing the differences if not.
async fn assert_holds(tally: &Tally, all: &Everything) {
    let got = everything(tally).await;
    assert!(got == *all, "{:#?}", all_differences(&got, all));
}

fn all_differences(got: &Everything, want: &Everything) -> Vec<String> {
    let mut out = map_differences(&got.slices, &want.slices);
    out.extend(map_differences(&got.daily, &want.daily));
    out.extend(map_differences(&got.ts, &want.ts));
    out
}

/// Where two snapshots differ (the first five keys), for a readable failure.
fn map_differences<K: Ord + std::fmt::Debug, V: PartialEq + std::fmt::Debug>(
    got: &BTreeMap<K, V>,
    want: &BTreeMap<K, V>,
) -> Vec<String> {
    let keys: std::collections::BTreeSet<_> = got.keys().chain(want.keys()).collect();
    keys.into_iter()
        .filter(|k| got.get(*k) != want.get(*k))
        .take(5)
        .map(|k| format!("{k:?}: {:?} != {:?}", got.get(k), want.get(k)))
        .collect()
}

/// `query` asked of both stores answers the same.
macro_rules! same {
    ($a:expr, $b:expr, |$t:ident| $query:expr) => {{
        let $t = $a;
        let left = $query.await.unwrap();
        let $t = $b;
        let right = $query.await.unwrap();
        assert_eq!(left, right);
    }};
}

/// What the services answer over the copied data, compared side by side.
async fn same_answers(a: &Tally, b: &Tally) {
    let t = now();
    let keys: Vec<String> = (0..6).map(|n| n.to_string()).collect();
    for rollup in [10, 3_600, 86_400] {
        let span = if rollup == 10 { 3_000.0 } else { 80_000.0 };
        let (start, end, r) = (t - span, t + 10.0, Some(rollup));
        same!(a, b, |x| x.tsdb().get_sums(
            &TsQuery::new("project", &keys, start, end).precision(r)
        ));
        let users = "project.users";
        same!(a, b, |x| x.tsdb().get_distinct_series(
            &TsQuery::new(users, &keys, start, end).precision(r)
        ));
        same!(a, b, |x| x.tsdb().get_distinct_union(
            &TsQuery::new(users, &keys, start, end).precision(r)
        ));
        for key in 0..5 {
            same!(a, b, |x| x.tsdb().get_top(
                &TsQuery::new("project.top", [key], start, end).precision(r),
                20
            ));
        }
    }
    for n in [0, 7, 16] {
        let entity = format!("ad-{n:02}");
        same!(a, b, |x| x.daily().last(&entity, 90));
        same!(a, b, |x| x.daily().total(&entity));
    }
}

/// Runs a migration until its first progress report for `space`, then
/// drops it there (as a crash would stop it).
async fn stop_at(from: &Tally, to: &Tally, settings: &MigrateSettings, space: &str) {
    use futures::FutureExt;
    /// The payload the progress callback unwinds with.
    struct Stopped;
    let run = migrate(from, to, settings, |p: &Progress<'_>| {
        if p.space == space {
            // Progress is reported once a page is written and before the
            // next is read: unwinding here stops the run exactly after the
            // first page, as a crash there would. `resume_unwind` skips the
            // panic hook, so nothing is printed.
            std::panic::resume_unwind(Box::new(Stopped));
        }
    });
    match std::panic::AssertUnwindSafe(run).catch_unwind().await {
        Err(payload) if payload.is::<Stopped>() => {}
        Err(payload) => std::panic::resume_unwind(payload),
        Ok(r) => panic!("the migration should have been stopped in {space}: {r:?}"),
    }
}

/// Every store and space of a report.
fn parts(report: &MigrateReport) -> impl Iterator<Item = &tally::migrate::SpaceReport> {
    report
        .spaces
        .iter()
        .chain([&report.daily, &report.time_series])
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
    fill_more(&sqlite).await;
    let source = snapshot(&sqlite).await;
    let all = everything(&sqlite).await;
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
    // Every entity kept days and views from before the window; every kind
    // of time series is there, distinct values past 256 among them.
    assert_eq!(all.daily.len(), 17);
    assert!(all.daily.values().all(|(days, total)| {
        !days.is_empty() && *total > days.iter().map(|d| d.1).sum::<i64>()
    }));
    let kinds: std::collections::BTreeSet<u8> = all.ts.keys().map(|k| k.3).collect();
    assert_eq!(
        kinds,
        [Kind::Sum, Kind::Distinct, Kind::Top]
            .map(Kind::code)
            .into()
    );
    let big = sqlite
        .tsdb()
        .get_distinct_totals(
            &TsQuery::new("project.users", &["0".to_owned()], now() - 3_600.0, now())
                .precision(Some(3_600)),
        )
        .await
        .unwrap();
    assert!(big.totals[0].total > 600, "{big:?}");

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
    let daily = &report.daily;
    assert_eq!(
        (daily.space.as_str(), daily.series, daily.batches_written),
        ("daily", 17, 3),
        "{report:?}"
    );
    let ts = &report.time_series;
    assert_eq!(
        (ts.space.as_str(), ts.series, ts.batches_written),
        ("time_series", 8 + 6 + 5, 3),
        "{report:?}"
    );
    assert!(ts.resolutions_not_copied.is_empty(), "{report:?}");
    assert_eq!(calls, 9 + 2 + 1 + 1 + 3 + 3, "one progress call per batch");
    let copied: u64 = report.spaces.iter().map(|s| s.slices).sum();
    let held: usize = source.values().map(Vec::len).sum();
    assert_eq!(copied, held as u64);
    let days: usize = all.daily.values().map(|(d, _)| d.len()).sum();
    assert_eq!(daily.slices, days as u64);
    let buckets: usize = all.ts.values().map(Vec::len).sum();
    assert_eq!(ts.slices, buckets as u64);
    assert_holds(&redis, &all).await;
    // The services read the copies as they read the originals.
    assert_eq!(
        redis.counters().get("hits:07", 60).await.unwrap(),
        sqlite.counters().get("hits:07", 60).await.unwrap()
    );
    assert_eq!(
        redis.gauges().get("temp:3", 3600).await.unwrap(),
        sqlite.gauges().get("temp:3", 3600).await.unwrap()
    );
    same_answers(&sqlite, &redis).await;

    // Running it again counts nothing twice.
    let again = migrate(&sqlite, &redis, &settings("to-redis"), |_| {})
        .await
        .unwrap();
    assert!(
        parts(&again).all(|s| s.batches_written == 0 && s.batches_skipped > 0),
        "{again:?}"
    );
    assert_holds(&redis, &all).await;

    // Redis → Cluster, stopped in the counters, in the daily statistics and
    // in the time series (each after its first batch), then run again.
    let (_cluster, target) = crate::common::three_masters();
    let clustered = open(&target).await;
    let to_cluster = settings("to-cluster");
    stop_at(&redis, &clustered, &to_cluster, "counters").await;
    let partial = snapshot(&clustered).await;
    assert!(
        !partial.is_empty() && partial != source,
        "the first run stopped halfway"
    );
    stop_at(&redis, &clustered, &to_cluster, "daily").await;
    let partial = daily_snapshot(&clustered).await;
    assert!(
        !partial.is_empty() && partial != all.daily,
        "the second run stopped in the daily statistics"
    );
    stop_at(&redis, &clustered, &to_cluster, "time_series").await;
    let partial = ts_snapshot(&clustered).await;
    assert!(
        !partial.is_empty() && partial != all.ts,
        "the third run stopped in the time series"
    );
    let resumed = migrate(&redis, &clustered, &to_cluster, |_| {})
        .await
        .unwrap();
    let counters = &resumed.spaces[0];
    assert_eq!(
        (counters.batches_skipped, counters.batches_written),
        (9, 0),
        "{resumed:?}"
    );
    for (part, pages) in [(&resumed.daily, 3), (&resumed.time_series, 3)] {
        assert!(part.batches_skipped >= 1, "{resumed:?}");
        assert_eq!(
            part.batches_skipped + part.batches_written,
            pages,
            "{resumed:?}"
        );
    }
    assert_eq!(resumed.daily.batches_written, 0, "{resumed:?}");
    assert!(resumed.time_series.batches_written >= 1, "{resumed:?}");
    assert_holds(&clustered, &all).await;
    same_answers(&sqlite, &clustered).await;
}

/// Regression: marks numbered by page let a series that expired between a
/// run and its rerun shift the rerun's pages, so a page written by the first
/// run was skipped with a series it had not held (lost), or one it had was
/// written again (counted twice). Each series' copy is marked by its name.
#[tokio::test]
async fn a_series_expiring_between_runs_shifts_nothing() {
    let dir = TempDir::new().unwrap();
    let clock = Arc::new(ManualClock::at(now()));
    let open_at = |name: &str| {
        let settings = tally::TsdbSettings {
            precisions: vec![tally::tsdb::precision::Precision::new(10, 360)],
            ..tally::TsdbSettings::default()
        };
        let path = dir.path().join(name).to_str().unwrap().to_owned();
        let builder = Tally::builder()
            .clock(clock.clone())
            .tsdb_settings(settings);
        async move { builder.open(&path).await.unwrap() }
    };
    let (source, target) = (open_at("source").await, open_at("target").await);
    // k00, first in name order, only has data that expires in 100 s.
    let mut increments = vec![TsIncrement::new("m", "k00").count(5).at(now() - 3_500.0)];
    for n in 1..9 {
        increments.push(
            TsIncrement::new("m", format!("k{n:02}"))
                .count(n)
                .at(now() - 10.0),
        );
    }
    source.tsdb().incr_multi(&increments).await.unwrap();
    let settings = MigrateSettings {
        names_per_batch: 3,
        ..MigrateSettings::new("expiring")
    };
    stop_at(&source, &target, &settings, "time_series").await;
    let copied = ["k01".to_owned(), "k03".to_owned()];
    let first = target.tsdb();
    let first = first
        .get_sums(&TsQuery::new("m", &copied, now() - 600.0, now()))
        .await
        .unwrap();
    let first: Vec<i64> = first.totals.iter().map(|k| k.total).collect();
    assert_eq!(first, [1, 0], "the first run copied its first page only");
    clock.advance(200.0);
    let rerun = migrate(&source, &target, &settings, |_| {}).await.unwrap();
    assert_eq!(rerun.time_series.series, 8, "k00 expired: {rerun:?}");
    let keys: Vec<String> = (1..9).map(|n| format!("k{n:02}")).collect();
    let t = clock.now().as_secs_f64();
    let sums = |tally: &Tally| {
        let tsdb = tally.tsdb();
        let keys = keys.clone();
        async move {
            tsdb.get_sums(&TsQuery::new("m", &keys, t - 600.0, t))
                .await
                .unwrap()
        }
    };
    let want = sums(&source).await;
    assert_eq!(
        want.totals.iter().map(|k| k.total).collect::<Vec<_>>(),
        (1..9).collect::<Vec<i64>>()
    );
    assert_eq!(sums(&target).await, want);
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

/// Migrates `from` into `to` under job `job`; `to` then holds every slice
/// of `slices` and everything of `all`.
async fn migrate_and_check(
    from: &Tally,
    to: &Tally,
    job: &str,
    slices: &Snapshot,
    all: &Everything,
) {
    migrate(from, to, &settings(job), |_| {}).await.unwrap();
    assert!(snapshot(to).await == *slices, "{job}");
    assert_holds(to, all).await;
}

/// The compact layout (one hash per series) takes a migration in and gives
/// it back: default → compact → default keeps every slice, day and bucket,
/// and the compact store holds one hash per series, none per precision.
#[tokio::test]
async fn default_to_compact_to_default_keeps_every_slice() {
    let open_in = |url: String, layout: &str| {
        let builder = Tally::builder()
            .clock(Arc::new(ManualClock::at(now())))
            .layout(tally::backend::redis::Layout::parse(layout, "tally").unwrap());
        async move { builder.open(&url).await.unwrap() }
    };
    let (a, b, c) = (
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    );
    let source = open_in(a.url(), "default").await;
    fill(&source).await;
    fill_more(&source).await;
    let slices = snapshot(&source).await;
    let all = everything(&source).await;
    let compact = open_in(b.url(), "compact").await;
    migrate_and_check(&source, &compact, "to-compact", &slices, &all).await;
    same_answers(&source, &compact).await;
    let raw = redis::Client::open(b.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let keys = |pattern: &'static str| {
        let mut raw = raw.clone();
        async move {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(pattern)
                .query_async(&mut raw)
                .await
                .unwrap();
            keys
        }
    };
    assert_eq!(keys("*}:@:*").await.len(), 60, "one hash per counter");
    assert!(keys("*}:60:*").await.is_empty(), "no hash per precision");
    let back = open_in(c.url(), "default").await;
    migrate_and_check(&compact, &back, "from-compact", &slices, &all).await;
}
