//! The time-series behaviour suite: every test runs on SQLite (memory and
//! file), a real redis-server and a real Redis Cluster.

use crate::common;

use common::{Fixture, Kind, Total, range_totals};
use tally::TsQuery;
use tally::counters::Sample;
use tally::tsdb::precision::Precision;
use tally::tsdb::precision::vshard_of;
use tally::tsdb::topn::{self, Summary};
use tally::tsdb::{ItemCount, TsIncrement, TsdbSettings};
use tally::{Clock, Error, SystemClock};

per_backend!(features:
    incr_writes_every_rollup_and_ranges_fill_missing_buckets,
    the_rollup_is_chosen_back_from_now,
    integer_and_string_keys_are_the_same_key,
    batches_merge_duplicates_and_span_shards,
    distinct_counts_per_bucket_per_key_and_across_keys,
    most_frequent_items_are_exact_then_bounded,
    merge_moves_everything_and_leaves_from_empty,
    delete_removes_every_rollup,
    data_expires_with_its_bucket,
    bad_input_writes_nothing,
    every_redis_key_has_a_ttl,
    overflowing_counts_are_refused_and_change_nothing,
);

fn s(start: u64, count: i64) -> Sample {
    Sample { start, count }
}

fn keys(list: &[&str]) -> Vec<String> {
    list.iter().map(|k| k.to_string()).collect()
}

/// Two keys in different virtual shards (so on a cluster, different slots).
fn two_shards() -> (String, String) {
    let a = "1".to_owned();
    let b = (2..100)
        .map(|i| i.to_string())
        .find(|k| vshard_of(k) != vshard_of(&a))
        .unwrap();
    (a, b)
}

async fn incr_writes_every_rollup_and_ranges_fill_missing_buckets(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let ts = f.tsdb(TsdbSettings::default()).await;
    let now = f.clock.now().whole_secs();
    ts.incr("group", "a", 2).await.unwrap();
    ts.incr_multi(&[
        TsIncrement::new("group", "a").at((now - 20) as f64),
        TsIncrement::new("group", "a")
            .count(5)
            .at((now - 7200) as f64),
    ])
    .await
    .unwrap();
    let b10 = now / 10 * 10;
    let range = ts
        .get_range(
            &TsQuery::new("group", keys(&["a", "b"]), (now - 30) as f64, now as f64)
                .precision(Some(10)),
        )
        .await
        .unwrap();
    assert_eq!(range.rollup, 10);
    assert_eq!(
        range.series[0].points,
        vec![s(b10 - 30, 0), s(b10 - 20, 1), s(b10 - 10, 0), s(b10, 2)]
    );
    assert_eq!(range.series[1].key, "b");
    assert!(range.series[1].points.iter().all(|p| p.count == 0));
    // The hourly rollup has all three increments; the 10 s one never saw the
    // write dated two hours ago (its bucket had expired).
    let hourly = ts
        .get_range(
            &TsQuery::new("group", keys(&["a"]), (now - 7200) as f64, now as f64)
                .precision(Some(3600)),
        )
        .await
        .unwrap();
    let h = now / 3600 * 3600;
    let total: i64 = hourly.series[0].points.iter().map(|p| p.count).sum();
    assert_eq!(total, 8);
    assert_eq!(hourly.series[0].points.last().unwrap().start, h);
    let sums = ts
        .get_sums(
            &TsQuery::new("group", keys(&["a"]), (now - 3 * 86_400) as f64, now as f64)
                .precision(Some(86_400)),
        )
        .await
        .unwrap();
    assert_eq!(sums.totals[0].total, 8);
    let sums = ts
        .get_sums(&TsQuery::new(
            "group",
            keys(&["a"]),
            (now - 600) as f64,
            now as f64,
        ))
        .await
        .unwrap();
    assert_eq!((sums.rollup, sums.totals[0].total), (10, 3));
}

async fn the_rollup_is_chosen_back_from_now(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let ts = f.tsdb(TsdbSettings::default()).await;
    let now = f.clock.now().whole_secs() as f64;
    let k = keys(&["x"]);
    let pick = |start: f64, end: f64| {
        let ts = ts.clone();
        let k = k.clone();
        async move {
            ts.get_range(&TsQuery::new("m", &k, start, end))
                .await
                .unwrap()
                .rollup
        }
    };
    assert_eq!(pick(now - 3000.0, now).await, 10);
    // Measured from now, not from the end of the range.
    assert_eq!(pick(now - 7200.0, now - 7000.0).await, 3600);
    assert_eq!(pick(now - 30.0 * 86_400.0, now).await, 86_400);
    assert_eq!(
        pick(now - 400.0 * 86_400.0, now - 399.0 * 86_400.0).await,
        86_400
    );
}

async fn integer_and_string_keys_are_the_same_key(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let ts = f.tsdb(TsdbSettings::default()).await;
    ts.incr("project", 42, 3).await.unwrap();
    ts.incr("project", "42", 1).await.unwrap();
    let now = f.clock.now().as_secs_f64();
    let sums = ts
        .get_sums(&TsQuery::new("project", keys(&["42"]), now - 60.0, now).precision(Some(10)))
        .await
        .unwrap();
    assert_eq!(sums.totals[0].total, 4);
}

async fn batches_merge_duplicates_and_span_shards(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let ts = f.tsdb(TsdbSettings::default()).await;
    let batch: Vec<TsIncrement> = (0..300)
        .map(|i| TsIncrement::new("group", i % 60).count(1 + i % 2))
        .collect();
    ts.incr_multi(&batch).await.unwrap();
    let all: Vec<String> = (0..60).map(|i| i.to_string()).collect();
    let now = f.clock.now().as_secs_f64();
    let sums = ts
        .get_sums(&TsQuery::new("group", &all, now, now).precision(Some(10)))
        .await
        .unwrap();
    for (i, t) in sums.totals.iter().enumerate() {
        let want: i64 = (0..300)
            .filter(|j| j % 60 == i as i64)
            .map(|j| 1 + j % 2)
            .sum();
        assert_eq!((t.key.as_str(), t.total), (all[i].as_str(), want));
    }
    // Every rollup got the same counts.
    for rollup in [3600, 86_400] {
        let sums = ts
            .get_sums(&TsQuery::new("group", &all, now, now).precision(Some(rollup)))
            .await
            .unwrap();
        assert_eq!(sums.totals.iter().map(|t| t.total).sum::<i64>(), 450);
    }
}

async fn distinct_counts_per_bucket_per_key_and_across_keys(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    // Ten seconds into the minute, so that `now - 10` stays in the same hour
    // as `now` (the hourly check below failed when the fixture's minute was :00).
    f.clock.advance(10.0);
    let ts = f.tsdb(TsdbSettings::default()).await;
    let now = f.clock.now().as_secs_f64();
    let (a, b) = two_shards();
    let users = |from: usize, to: usize| -> Vec<String> {
        (from..to).map(|i| format!("user:{i}")).collect()
    };
    ts.record("group", &a, &users(0, 100), Some(now))
        .await
        .unwrap();
    ts.record("group", &a, &users(50, 150), Some(now - 10.0))
        .await
        .unwrap();
    ts.record("group", &b, &users(100, 300), Some(now))
        .await
        .unwrap();
    ts.record("group", &b, &users(0, 10), Some(now))
        .await
        .unwrap();
    let pair = vec![a.clone(), b.clone()];
    let series = ts
        .get_distinct_series(&TsQuery::new("group", &pair, now - 10.0, now).precision(Some(10)))
        .await
        .unwrap();
    let b10 = (now as u64) / 10 * 10;
    assert_eq!(series.series[0].points, vec![s(b10 - 10, 100), s(b10, 100)]);
    // Estimates: exact for small sets, within 2% (HyperLogLog's error is
    // 0.81%) beyond. Both backends compute the very same estimate.
    let near = |got: i64, want: i64| (got - want).abs() * 50 <= want;
    let b_points = &series.series[1].points;
    assert_eq!(b_points[0], s(b10 - 10, 0));
    assert!(near(b_points[1].count, 210), "{b_points:?}");
    let totals = ts
        .get_distinct_totals(&TsQuery::new("group", &pair, now - 10.0, now).precision(Some(10)))
        .await
        .unwrap();
    assert!(near(totals.totals[0].total, 150), "{totals:?}");
    assert!(near(totals.totals[1].total, 210), "{totals:?}");
    // Across keys (different shards, so different slots on a cluster).
    let union = ts
        .get_distinct_union(&TsQuery::new("group", &pair, now - 10.0, now).precision(Some(10)))
        .await
        .unwrap();
    assert!(near(union.total, 300), "{union:?}");
    // The hourly rollup saw every record in one bucket.
    let hourly = ts
        .get_distinct_totals(&TsQuery::new("group", &pair, now, now).precision(Some(3600)))
        .await
        .unwrap();
    assert!(near(hourly.totals[0].total, 150), "{hourly:?}");
    // Large sets are estimates within HyperLogLog's error.
    ts.record("group", "big", &users(0, 10_000), None)
        .await
        .unwrap();
    let big = ts
        .get_distinct_totals(&TsQuery::new("group", keys(&["big"]), now, now).precision(Some(10)))
        .await
        .unwrap()
        .totals[0]
        .total;
    assert!((big - 10_000).abs() < 300, "{big}");
}

/// The `n` most frequent items of release `key` in the 10 s bucket of `now`.
async fn top_items(ts: &tally::Tsdb, key: u32, now: f64, n: usize) -> tally::tsdb::TopItems {
    let query = TsQuery::new("release", [key], now, now).precision(Some(10));
    ts.get_top(&query, n).await.unwrap()
}

async fn most_frequent_items_are_exact_then_bounded(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let ts = f
        .tsdb(TsdbSettings {
            top_capacity: 3,
            ..TsdbSettings::default()
        })
        .await;
    let now = f.clock.now().as_secs_f64();
    let item = |s: &str, n| (s.to_owned(), n);
    ts.record_frequency(
        "release",
        7,
        &[item("a", 5), item("b", 5), item("c", 2)],
        Some(now),
    )
    .await
    .unwrap();
    let top = top_items(&ts, 7, now, 10).await;
    let want = |v: &[(&str, i64)]| -> Vec<ItemCount> {
        v.iter()
            .map(|(i, c)| ItemCount {
                item: i.to_string(),
                count: *c,
            })
            .collect()
    };
    // Exact while small; ties ordered by item.
    assert_eq!(top.items, want(&[("a", 5), ("b", 5), ("c", 2)]));
    // Full: "d" replaces the lowest ("c", 2) and starts at 2 + 4.
    ts.record_frequency("release", 7, &[item("d", 4)], Some(now))
        .await
        .unwrap();
    let top = top_items(&ts, 7, now, 2).await;
    assert_eq!(top.items, want(&[("d", 6), ("a", 5)]));
    // The same writes give the same summary as the pure model, on every
    // backend, including evictions with ties.
    let mut model = Summary::default();
    let mut writes = Vec::new();
    for i in 0..40u32 {
        let it = format!("i{}", (i * 7) % 11);
        writes.push((it, i64::from(1 + i % 3)));
    }
    for (it, n) in &writes {
        model.add(it, *n, 3);
        ts.record_frequency("release", 8, &[(it.clone(), *n)], Some(now))
            .await
            .unwrap();
    }
    let expected = topn::top(model.items().map(|(k, v)| (k.to_owned(), v)), 10);
    let top = top_items(&ts, 8, now, 10).await;
    assert_eq!(top.items, expected);
    assert_eq!(top.items.len(), 3, "bounded by the capacity");
}

async fn merge_moves_everything_and_leaves_from_empty(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let ts = f.tsdb(TsdbSettings::default()).await;
    let now = f.clock.now().as_secs_f64();
    let (into, from) = two_shards();
    ts.incr_multi(&[
        TsIncrement::new("group", &into).count(3),
        TsIncrement::new("group", &from).count(4),
        TsIncrement::new("group", &from).count(1).at(now - 10.0),
    ])
    .await
    .unwrap();
    let vals = |r: std::ops::Range<i32>| -> Vec<String> { r.map(|i| format!("v{i}")).collect() };
    ts.record("group", &into, &vals(0..20), None).await.unwrap();
    ts.record("group", &from, &vals(10..40), None)
        .await
        .unwrap();
    ts.record_frequency("group", &into, &[("x".into(), 2)], None)
        .await
        .unwrap();
    ts.record_frequency("group", &from, &[("x".into(), 3), ("y".into(), 1)], None)
        .await
        .unwrap();
    ts.merge("group", &into, &from).await.unwrap();
    let pair = vec![into.clone(), from.clone()];
    for rollup in [10, 3600, 86_400] {
        let sums = range_totals(&ts, Total::Sum, "group", &pair, (now - 10.0, now), rollup).await;
        assert_eq!(sums[0], 8, "rollup {rollup}");
        assert_eq!(sums[1], 0, "rollup {rollup}");
        let distinct = range_totals(&ts, Total::Distinct, "group", &pair, (now, now), rollup).await;
        assert_eq!(distinct[0], 40, "rollup {rollup}");
        assert_eq!(distinct[1], 0, "rollup {rollup}");
    }
    let top = ts
        .get_top(
            &TsQuery::new("group", [&into], now, now).precision(Some(10)),
            5,
        )
        .await
        .unwrap();
    assert_eq!(
        top.items,
        vec![
            ItemCount {
                item: "x".into(),
                count: 5
            },
            ItemCount {
                item: "y".into(),
                count: 1
            }
        ]
    );
    assert!(
        ts.get_top(
            &TsQuery::new("group", [&from], now, now).precision(Some(10)),
            5
        )
        .await
        .unwrap()
        .items
        .is_empty()
    );
    // Merging again finds nothing to move; merging a key into itself is refused.
    ts.merge("group", &into, &from).await.unwrap();
    let sums = range_totals(&ts, Total::Sum, "group", &pair, (now, now), 10).await;
    assert_eq!(sums[0], 7);
    assert!(
        ts.merge("group", &into, &into)
            .await
            .unwrap_err()
            .is_bad_input()
    );
}

async fn delete_removes_every_rollup(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let ts = f.tsdb(TsdbSettings::default()).await;
    let now = f.clock.now().as_secs_f64();
    for k in ["a", "b"] {
        ts.incr("group", k, 2).await.unwrap();
        ts.record("group", k, &keys(&["u1", "u2"]), None)
            .await
            .unwrap();
        ts.record_frequency("group", k, &[("i".into(), 1)], None)
            .await
            .unwrap();
    }
    ts.delete("group", &keys(&["a"])).await.unwrap();
    let ab = keys(&["a", "b"]);
    for rollup in [10, 3600, 86_400] {
        let sums = range_totals(&ts, Total::Sum, "group", &ab, (now, now), rollup).await;
        assert_eq!(sums, vec![0, 2]);
        let d = range_totals(&ts, Total::Distinct, "group", &ab, (now, now), rollup).await;
        assert_eq!(d, vec![0, 2]);
    }
    assert!(
        ts.get_top(&TsQuery::new("group", ["a"], now, now), 5)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(
        ts.get_top(&TsQuery::new("group", ["b"], now, now), 5)
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}

async fn data_expires_with_its_bucket(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let ts = f
        .tsdb(TsdbSettings {
            precisions: vec![Precision::new(1, 2)],
            top_capacity: 10,
        })
        .await;
    let k = keys(&["k"]);
    // Redis expires by its own clock: run this one on the wall clock. The
    // bucket expires more than 1 s after the clock is set: read back within
    // 900 ms of it.
    let (m, now, total) = tally_testkit::in_time(std::time::Duration::from_millis(900), |run| {
        let (f, ts, k) = (&f, &ts, &k);
        async move {
            f.clock.set(SystemClock.now().as_secs_f64());
            let m = format!("m{run}");
            let now = f.clock.now().whole_secs() as f64;
            ts.incr(&m, "k", 1).await.unwrap();
            let total = ts
                .get_sums(&TsQuery::new(&m, k, now, now))
                .await
                .unwrap()
                .totals[0]
                .total;
            (m, now, total)
        }
    })
    .await;
    assert_eq!(total, 1);
    tokio::time::sleep(std::time::Duration::from_millis(2600)).await;
    f.clock.advance(2.6);
    assert_eq!(
        ts.get_sums(&TsQuery::new(&m, &k, now, now))
            .await
            .unwrap()
            .totals[0]
            .total,
        0
    );
    // A write dated in an expired bucket is dropped, not stored.
    ts.incr_multi(&[TsIncrement::new(&m, "k").at(now - 10.0)])
        .await
        .unwrap();
    assert_eq!(
        ts.get_sums(&TsQuery::new(&m, &k, now - 10.0, now - 10.0))
            .await
            .unwrap()
            .totals[0]
            .total,
        0
    );
}

async fn bad_input_writes_nothing(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let ts = f.tsdb(TsdbSettings::default()).await;
    let now = f.clock.now().as_secs_f64();
    let bad: Vec<(Vec<TsIncrement>, &str)> = vec![
        (vec![TsIncrement::new("gr{oup", "a")], "must not contain"),
        (vec![TsIncrement::new("group", "")], "must not be empty"),
        (
            vec![TsIncrement::new("group", "a").count(0)],
            "out of range",
        ),
        (
            vec![TsIncrement::new("group", "a").at(now + 3600.0)],
            "after now",
        ),
        (vec![TsIncrement::new("group", "a").at(f64::NAN)], "finite"),
        (
            vec![
                TsIncrement::new("group", "ok"),
                TsIncrement::new("group", "a").count(-1),
            ],
            "out of range",
        ),
        (vec![], "1 to 10000"),
    ];
    for (batch, message) in bad {
        let err = ts.incr_multi(&batch).await.unwrap_err();
        assert!(err.is_bad_input(), "{batch:?}: {err}");
        assert!(err.to_string().contains(message), "{batch:?}: {err}");
    }
    let k = keys(&["ok", "a"]);
    let sums = ts
        .get_sums(&TsQuery::new("group", &k, now, now).precision(Some(10)))
        .await
        .unwrap();
    assert!(sums.totals.iter().all(|t| t.total == 0));
    let err = ts
        .get_range(&TsQuery::new("group", &k, now, now - 1.0))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("ends"), "{err}");
    let err = ts
        .get_range(&TsQuery::new("group", &k, now, now).precision(Some(7)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnknownPrecision { .. }), "{err}");
    let err = ts
        .get_range(&TsQuery::new("group", &k, 0.0, now).precision(Some(10)))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("at most 10000"), "{err}");
    assert!(
        ts.record("group", "a", &[], None)
            .await
            .unwrap_err()
            .is_bad_input()
    );
    assert!(
        ts.record_frequency("group", "a", &[("x".into(), 0)], None)
            .await
            .unwrap_err()
            .is_bad_input()
    );
}

async fn every_redis_key_has_a_ttl(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    if !kind.is_redis() {
        return; // only Redis has keys
    }
    let ts = f.tsdb(TsdbSettings::default()).await;
    let (a, b) = two_shards();
    ts.incr("group", &a, 1).await.unwrap();
    ts.record("group", &a, &keys(&["u"]), None).await.unwrap();
    ts.record_frequency("group", &b, &[("i".into(), 1)], None)
        .await
        .unwrap();
    ts.merge("group", &a, &b).await.unwrap();
    let now = f.clock.now().as_secs_f64();
    ts.get_distinct_union(
        &TsQuery::new("group", &[a.clone(), b.clone()], now - 86_400.0, now)
            .precision(Some(86_400)),
    )
    .await
    .unwrap();
    let urls = match (&f.server, &f.cluster) {
        (Some(server), _) => vec![server.url()],
        (_, Some(cluster)) => cluster.urls(),
        _ => unreachable!(),
    };
    let mut seen = 0;
    for url in urls {
        let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
        let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut conn).unwrap();
        if !matches!(&role[0], redis::Value::BulkString(r) if r == b"master") {
            continue;
        }
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
        for key in keys {
            let ttl: i64 = redis::cmd("TTL").arg(&key).query(&mut conn).unwrap();
            assert!(ttl > 0, "{key} has no TTL ({ttl})");
            seen += 1;
        }
    }
    // 3 rollups × (count hash + HLL) for `a`, 3 summaries now under `a`.
    assert!(seen >= 9, "{seen} keys");
}

/// Guards the one write path of every kind (`TsdbStore::add`, Redis's
/// `ts_ops.lua`): a count that would pass 2^63, in a write or in a merge's
/// step that adds into the target, is refused and leaves every rollup and
/// every other kind of the target as it was.
async fn overflowing_counts_are_refused_and_change_nothing(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let ts = f.tsdb(TsdbSettings::default()).await;
    let now = f.clock.now().as_secs_f64();
    let (into, from) = two_shards();
    let big = tally::tsdb::MAX_COUNT;
    let near_full: Vec<TsIncrement> = (0..1023)
        .map(|_| TsIncrement::new("group", &into).count(big))
        .collect();
    ts.incr_multi(&near_full).await.unwrap();
    ts.record_frequency("group", &into, &[("x".into(), 2)], None)
        .await
        .unwrap();
    let state = |ts: tally::Tsdb, key: String| async move {
        let k = vec![key.clone()];
        let mut sums = Vec::new();
        for rollup in [10, 3600, 86_400] {
            let s = ts
                .get_sums(&TsQuery::new("group", &k, now, now).precision(Some(rollup)))
                .await
                .unwrap();
            sums.push(s.totals[0].total);
        }
        let top = ts
            .get_top(
                &TsQuery::new("group", [key], now, now).precision(Some(10)),
                10,
            )
            .await
            .unwrap();
        (sums, top.items)
    };
    let before = state(ts.clone(), into.clone()).await;
    assert_eq!(before.0, vec![1023 * big; 3]);
    // A write that passes 2^63 in the bucket it adds to.
    let err = ts
        .incr_multi(&[
            TsIncrement::new("group", &into).count(big),
            TsIncrement::new("group", &from).count(1),
        ])
        .await
        .unwrap_err();
    assert!(err.is_bad_input(), "{err}");
    assert!(err.to_string().contains("overflow"), "{err}");
    assert_eq!(state(ts.clone(), into.clone()).await, before);
    // A merge whose counts would pass 2^63 in the target.
    ts.incr_multi(&[TsIncrement::new("group", &from).count(big).at(now)])
        .await
        .unwrap();
    ts.record_frequency("group", &from, &[("y".into(), 5)], None)
        .await
        .unwrap();
    let err = ts.merge("group", &into, &from).await.unwrap_err();
    assert!(err.is_bad_input(), "{err}");
    assert_eq!(state(ts.clone(), into.clone()).await, before);
}
