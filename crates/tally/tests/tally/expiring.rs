//! The expiring layout's behaviour (issue 10): retention by Redis's expiry,
//! on a real redis-server and a real Redis Cluster. Times are near the wall
//! clock, since Redis expires keys by its own clock; the fixture's manual
//! clock starts there and only moves forward.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{Fixture, Kind, RawConn, apply_numbered};
use redis::AsyncCommands;
use tally::counters::{Applied, CounterWriter, WriteSeq, WriterSettings};
use tally::engine::plan::plan;
use tally::engine::{
    Batch, Kind as ValueKind, Retention, SeriesList, SliceRead, SliceStore, Space, Value,
};
use tally::{CleanerSettings, Clock, CounterSettings, Error, Increment, Name, SystemClock};
use tally_testkit::RedisOptions;

per_backend!(expiring:
    reads_return_only_the_window,
    overflow_anywhere_writes_nothing_and_keys_still_expire,
    sequenced_writes_apply_once,
    aggregated_writes_are_exact,
    the_cleaner_has_nothing_to_do,
    delete_and_listing,
    another_space_expires_too,
    data_expires_and_the_series_is_forgotten,
    registering_a_series_prunes_the_expired,
);
per_backend!(
    redis_expiring_keys(Kind::RedisExpiring):
    every_key_but_the_registries_expires,
    entering_a_chunk_expires_only_the_new_chunks
);

/// A fixture at the wall clock's current second.
async fn fixture(kind: Kind, precisions: &[u64], samples: u64) -> (Fixture, u64) {
    let now = SystemClock.now().whole_secs();
    let settings = CounterSettings {
        precisions: precisions.to_vec(),
        samples,
    };
    let f = Fixture::build_at(kind, settings, RedisOptions::default(), now as f64).await;
    (f, now)
}

fn total(samples: &[tally::Sample]) -> i64 {
    samples.iter().map(|s| s.count).sum()
}

async fn every_key_but_the_registries_expires(kind: Kind) {
    let (f, now) = fixture(kind, &[1, 5, 60], 10).await;
    for name in ["a", "b", "c:d"] {
        f.counters.incr(name, 2).await.unwrap();
    }
    // A sequenced write leaves its writer lane's record, which expires too.
    let mut batch = f.counters.prepare(&[Increment::new("a", 1)]).unwrap();
    batch.seq = Some(WriteSeq {
        writer: 7,
        lane: 0,
        seq: 1,
    });
    f.counters.store().apply(&batch).await.unwrap();
    let mut raw = f.raw().await;
    let keys: Vec<String> = raw.keys("*").await.unwrap();
    let (mut chunks, mut registries, mut lanes) = (0, 0, 0);
    for key in &keys {
        let ttl: i64 = raw.ttl(key).await.unwrap();
        if key.ends_with(":names@e") || key.ends_with(":ends@e") {
            registries += 1;
            assert_eq!(ttl, -1, "{key}");
        } else {
            assert!(ttl > 0, "{key} has TTL {ttl}");
            if key.contains(":writer:") {
                lanes += 1;
            } else {
                chunks += 1;
                // A 60 s chunk of 10 slices expires when its last slice
                // leaves the window: at most 2 × 600 s from now.
                assert!(ttl <= 1200, "{key} has TTL {ttl}");
            }
        }
    }
    assert_eq!(chunks, 3 * 3, "{keys:?}");
    assert_eq!(lanes, 1, "{keys:?}");
    assert!(registries >= 2, "{keys:?}");
    assert_eq!(total(&f.counters.get("a", 60).await.unwrap()), 3);
    let _ = now;
}

/// Every member of the sorted set `key`.
async fn members(raw: &mut RawConn, key: &str) -> Vec<String> {
    raw.query(redis::cmd("ZRANGE").arg(key).arg(0).arg(-1))
        .await
}

/// EXPIRE calls the server ran (scripts' included) since the last reset.
async fn expire_calls(raw: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(raw)
        .await
        .unwrap();
    tally_testkit::command_calls(&info, "expire")
}

/// A write entering a new chunk of the finest precision sets the expiry
/// of the chunks it creates and no other: the coarser chunks it writes into
/// got theirs from the write its series' stored score comes from. Every
/// key still expires, and a write inside existing chunks sets none.
async fn entering_a_chunk_expires_only_the_new_chunks(kind: Kind) {
    // Chunks of 10 slices: 10 s, 50 s and 600 s long.
    let (f, now) = fixture(kind, &[1, 5, 60], 10).await;
    let mut raw = f.raw().await;
    f.counters.incr("a", 1).await.unwrap();
    // The next 10 s chunk, and which coarser chunks change with it.
    let next = (now / 10 + 1) * 10;
    let new_chunks = 1 + u64::from(next % 50 == 0) + u64::from(next % 600 == 0);
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut raw)
        .await
        .unwrap();
    f.clock.set(next as f64 + 0.5);
    f.counters.incr("a", 1).await.unwrap();
    assert_eq!(expire_calls(&mut raw).await, new_chunks);
    // Inside the same chunks: nothing to expire.
    f.clock.set(next as f64 + 1.5);
    f.counters.incr("a", 1).await.unwrap();
    assert_eq!(expire_calls(&mut raw).await, new_chunks);
    // A new series sets every chunk's expiry.
    f.counters.incr("b", 1).await.unwrap();
    assert_eq!(expire_calls(&mut raw).await, new_chunks + 3);
    let keys: Vec<String> = raw.keys("*@*").await.unwrap();
    // The chunks (the registries `names@e` and `ends@e` keep no TTL).
    let keys: Vec<String> = keys.into_iter().filter(|k| !k.ends_with("@e")).collect();
    assert!(keys.len() >= 3 + new_chunks as usize, "{keys:?}");
    for key in &keys {
        let ttl: i64 = raw.ttl(key).await.unwrap();
        assert!(ttl > 0, "{key} has TTL {ttl}");
    }
    assert_eq!(total(&f.counters.get("a", 60).await.unwrap()), 3);
}

async fn reads_return_only_the_window(kind: Kind) {
    // 1 s slices, 3 kept: chunks of 3 s.
    let (f, _) = fixture(kind, &[1, 10], 3).await;
    let starts = |v: Vec<tally::Sample>| v.iter().map(|s| s.start).collect::<Vec<_>>();
    // Redis ends a chunk by its own clock, the oldest slice's as soon as 1 s
    // after its write: the writes and both reads run within 900 ms, each run
    // on a name of its own at the (forward-only) clock's second.
    let (w, now, first, later) = tally_testkit::in_time(Duration::from_millis(900), |run| {
        let (f, w) = (&f, format!("w{run}"));
        async move {
            let now = f.clock.now().whole_secs();
            let at = |d: i64| (now as i64 + d) as f64;
            for d in [-8, -5, -2, -1, 0] {
                f.counters.incr_at(&w, 1, at(d)).await.unwrap();
            }
            let first = starts(f.counters.get(&w, 1).await.unwrap());
            f.clock.advance(1.0);
            let later = starts(f.counters.get(&w, 1).await.unwrap());
            (w, now, first, later)
        }
    })
    .await;
    let at = |d: i64| (now as i64 + d) as f64;
    assert_eq!(first, vec![now - 2, now - 1, now]);
    // One second later the oldest slice left the window: never returned,
    // even while its chunk still holds it.
    assert_eq!(later, vec![now - 1, now]);
    // A write a little ahead (the next chunk) reads back; further is refused.
    f.counters.incr_at(&w, 5, at(4)).await.unwrap();
    assert_eq!(
        f.counters.get(&w, 1).await.unwrap().last().unwrap().count,
        5
    );
    let err = f.counters.incr_at(&w, 1, at(60)).await.unwrap_err();
    assert!(err.is_bad_input(), "{err}");
    assert!(err.to_string().contains("ahead of now"), "{err}");
}

async fn overflow_anywhere_writes_nothing_and_keys_still_expire(kind: Kind) {
    let (f, now) = fixture(kind, &[1, 60], 100).await;
    f.counters.incr("full", i64::MAX).await.unwrap();
    // Names spread over shards, so a cluster splits the batch and takes
    // back the shards that were written.
    let mut incs: Vec<Increment> = (0..40)
        .map(|i| Increment::new(format!("s{i}"), 1))
        .collect();
    incs.push(Increment::new("full", 1));
    let err = f.counters.incr_many(&incs).await.unwrap_err();
    assert!(matches!(err, Error::Overflow { .. }), "{err}");
    for i in 0..40 {
        assert!(
            f.counters
                .get(&format!("s{i}"), 1)
                .await
                .unwrap()
                .is_empty()
        );
    }
    assert_eq!(f.all_names().await, vec!["full"]);
    // The same names written again read back and their chunks expire.
    incs.pop();
    f.counters.incr_many(&incs).await.unwrap();
    assert_eq!(f.all_names().await.len(), 41);
    let mut raw = f.raw_any().await;
    for i in [0, 17, 39] {
        let name = format!("s{i}");
        let shard = tally::backend::redis::layout::shard_of(&name);
        let key = format!("{{tally:{shard}}}:1@{}:{name}", now / 100 * 100);
        let ttl: i64 = raw.query(redis::cmd("TTL").arg(&key)).await;
        assert!(ttl > 0, "{key} has TTL {ttl}");
    }
}

async fn sequenced_writes_apply_once(kind: Kind) {
    let (f, _) = fixture(kind, &[1, 60], 100).await;
    let store = f.counters.store().clone();
    let incs: Vec<Increment> = (0..20)
        .map(|i| Increment::new(format!("n{i}"), 5))
        .collect();
    let mut batch = f.counters.prepare(&incs).unwrap();
    let steps = [(1, 1, Applied::Written), (1, 1, Applied::Duplicate)];
    apply_numbered(store.as_ref(), &mut batch, 0xfeed, &steps).await;
    for i in 0..20 {
        assert_eq!(
            total(&f.counters.get(&format!("n{i}"), 60).await.unwrap()),
            5
        );
    }
}

async fn aggregated_writes_are_exact(kind: Kind) {
    let (f, now) = fixture(kind, &[1, 5, 60], 120).await;
    let agg = CounterWriter::start(f.counters.clone(), WriterSettings::default()).unwrap();
    for second in 0..5u64 {
        for i in 0..200u64 {
            agg.add(&format!("c{}", i % 25), 1, Some((now - second) as f64))
                .await
                .unwrap();
        }
    }
    agg.shutdown().await;
    for i in 0..25 {
        let name = format!("c{i}");
        assert_eq!(
            total(&f.counters.get(&name, 60).await.unwrap()),
            40,
            "{name}"
        );
        assert_eq!(
            total(&f.counters.get(&name, 1).await.unwrap()),
            40,
            "{name}"
        );
    }
    assert_eq!(f.all_names().await.len(), 25);
}

async fn the_cleaner_has_nothing_to_do(kind: Kind) {
    let (f, _) = fixture(kind, &[1, 60], 10).await;
    f.counters.incr("kept", 1).await.unwrap();
    let mut cleaner = f.counters.cleaner(CleanerSettings::default()).unwrap();
    let report = cleaner.pass().await.unwrap();
    assert_eq!(report.samples_removed, 0);
    assert_eq!(report.round_trips, 0);
    assert_eq!(total(&f.counters.get("kept", 60).await.unwrap()), 1);
}

async fn delete_and_listing(kind: Kind) {
    let (f, _) = fixture(kind, &[1, 60], 10).await;
    for name in ["b", "a", "c", "ab"] {
        f.counters.incr(name, 1).await.unwrap();
    }
    let page = f.counters.list(None, 2).await.unwrap();
    assert_eq!(page.names, vec!["a", "ab"]);
    let page = f.counters.list(page.next.as_deref(), 2).await.unwrap();
    assert_eq!(page.names, vec!["b", "c"]);
    assert_eq!(page.next, None);
    assert_eq!(
        f.counters.search("a", None, 10).await.unwrap().names,
        vec!["a", "ab"]
    );
    assert!(f.counters.delete("ab").await.unwrap());
    assert!(!f.counters.delete("ab").await.unwrap());
    assert!(f.counters.get("ab", 1).await.unwrap().is_empty());
    assert_eq!(f.all_names().await, vec!["a", "b", "c"]);
    // Written again after a delete: listed, and its chunks expire.
    f.counters.incr("ab", 1).await.unwrap();
    assert_eq!(f.all_names().await, vec!["a", "ab", "b", "c"]);
}

async fn another_space_expires_too(kind: Kind) {
    let (f, now) = fixture(kind, &[1], 10).await;
    let store = f
        .backend
        .slice_store(Arc::new(f.clock.clone()))
        .await
        .unwrap();
    let space = common::space(
        "visits",
        ValueKind::Sum,
        &[(1, 5), (10, 5)],
        Retention::Expire,
    );
    let name = Name::new("home").unwrap();
    let at = tally::Timestamp::from_secs(now).unwrap();
    let writes = plan(&space, [(&name, at, Value::Sum(4))]).unwrap();
    let batch = Batch {
        space: space.clone(),
        writes,
        seq: None,
    };
    // Redis ends the 1 s precision's chunk by its own clock, as soon as 5 s
    // after the write: written and read back within 4 s (a late run's series
    // is deleted before the next run writes it again).
    let (got, listed) = tally_testkit::in_time(Duration::from_secs(4), |run| {
        let (store, space, name, batch) = (&store, &space, &name, &batch);
        async move {
            if run > 0 {
                store.delete(space, name).await.unwrap();
            }
            store.apply(batch).await.unwrap();
            let got = store
                .read(SliceRead::new(space, std::slice::from_ref(name), &[1, 10]))
                .await
                .unwrap();
            (got, names_in(store, space).await)
        }
    })
    .await;
    assert_eq!(got[0][0], vec![(now, Value::Sum(4))]);
    assert_eq!(got[0][1], vec![(now / 10 * 10, Value::Sum(4))]);
    assert_eq!(listed, vec!["home"]);
    // Not a counter.
    assert!(f.counters.get("home", 1).await.unwrap().is_empty());
    let mut raw = f.raw_any().await;
    let shard = tally::backend::redis::layout::shard_of("home");
    let key = format!("{{tally:{shard}}}:visits:10@{}:home", now / 50 * 50);
    let ttl: i64 = raw.query(redis::cmd("TTL").arg(&key)).await;
    assert!(ttl > 0 && ttl <= 100, "{key} has TTL {ttl}");
    assert!(store.delete(&space, &name).await.unwrap());
    assert!(names_in(&store, &space).await.is_empty());
}

/// The first ten names `store` lists in `space`.
async fn names_in(store: &Arc<dyn SliceStore>, space: &Space) -> Vec<String> {
    store.list(SeriesList::new(space, 10)).await.unwrap()
}

/// Writes keep the registries bounded with nobody listing: a write that
/// registers a series (new, or back after its data expired) forgets the
/// series of its shard whose data all expired.
async fn registering_a_series_prunes_the_expired(kind: Kind) {
    let (f, now) = fixture(kind, &[1], 2).await;
    let shard = tally::backend::redis::layout::shard_of("gone");
    let other = (0..)
        .map(|i| format!("new{i}"))
        .find(|n| tally::backend::redis::layout::shard_of(n) == shard)
        .unwrap();
    let ends = format!("{{tally:{shard}}}:ends@e");
    let mut raw: RawConn = f.raw_any().await;
    f.counters.incr("gone", 1).await.unwrap();
    f.counters.incr("kept", 1).await.unwrap();
    // Much later by the store's clock: the data of both has expired.
    f.clock.set(now as f64 + 100.5);
    // "kept" comes back: registered again, which prunes "gone" if they
    // share a shard; then a series new to "gone"'s shard prunes it.
    f.counters.incr("kept", 1).await.unwrap();
    f.counters.incr(&other, 1).await.unwrap();
    let score: Option<String> = raw.query(redis::cmd("ZSCORE").arg(&ends).arg("gone")).await;
    assert_eq!(score, None, "{ends} still holds gone");
    let names = members(&mut raw, &format!("{{tally:{shard}}}:names@e")).await;
    assert!(!names.contains(&"gone".to_string()), "{names:?}");
    assert!(names.contains(&other), "{names:?}");
    // Later still: a new series of the shard forgets every expired one, and
    // its next chunk's write changes nothing in the registries.
    f.clock.set(now as f64 + 200.5);
    let again = (0..)
        .map(|i| format!("again{i}"))
        .find(|n| tally::backend::redis::layout::shard_of(n) == shard)
        .unwrap();
    f.counters.incr(&again, 1).await.unwrap();
    f.clock.set(now as f64 + 202.5);
    f.counters.incr(&again, 1).await.unwrap();
    let left = members(&mut raw, &ends).await;
    assert_eq!(left, vec![again.clone()], "{ends}");
    assert_eq!(f.counters.list(None, 10).await.unwrap().names, vec![again]);
}

async fn data_expires_and_the_series_is_forgotten(kind: Kind) {
    // The system clock: Redis expires keys by the wall clock.
    let (f, _) = fixture(kind, &[1], 2).await;
    let store = f
        .backend
        .counter_store(Arc::new(SystemClock))
        .await
        .unwrap();
    let counters =
        tally::Counters::with_clock(store, f.counters.settings().clone(), Arc::new(SystemClock))
            .unwrap();
    // Listed until Redis ends its chunk (by its own clock, as soon as 1 s
    // after the write): listed within 900 ms of it. A late run's series is
    // deleted before the next run writes it again.
    let listed = tally_testkit::in_time(Duration::from_millis(900), |run| {
        let counters = &counters;
        async move {
            if run > 0 {
                counters.delete("brief").await.unwrap();
            }
            counters.incr("brief", 1).await.unwrap();
            counters.list(None, 10).await.unwrap().names
        }
    })
    .await;
    assert_eq!(listed, vec!["brief"]);
    let mut raw: RawConn = f.raw_any().await;
    let shard = tally::backend::redis::layout::shard_of("brief");
    let pattern = format!("{{tally:{shard}}}:1@*:brief");
    let deadline = std::time::Instant::now() + tally_testkit::PATIENCE;
    loop {
        let keys: Vec<String> = raw.query(redis::cmd("KEYS").arg(&pattern)).await;
        if keys.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{keys:?} did not expire"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(counters.get("brief", 1).await.unwrap().is_empty());
    assert!(counters.list(None, 10).await.unwrap().names.is_empty());
    let ends = members(&mut raw, &format!("{{tally:{shard}}}:ends@e")).await;
    assert!(ends.is_empty(), "{ends:?}");
}
