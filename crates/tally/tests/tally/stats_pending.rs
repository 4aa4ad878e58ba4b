//! Statistics through their pending slice on Redis (issue 20 §3,
//! `lua/stats_fold.lua`): an exact write of one observation waits in its
//! statistic's pending slice, which the next second's write folds into
//! every precision; what the store keeps is checked key by key, reads see
//! the pending slice at every precision, a failed call leaves nothing, and
//! deleting a statistic takes its pending slice with it. Observations of
//! the pending second wait in its queue (`q`) and the value (`b`) is of
//! format 2; a pending slice of format 1 without a queue, as the commit
//! before the queue wrote it, reads and takes writes the same.

use crate::common;

use common::{Fixture, Kind, T0};
use redis::AsyncCommands;
use tally::engine::Codec;
use tally::engine::kinds::StatsValue;
use tally::stats::{Observation, SliceSummary};
use tally::{Error, Stats, StatsSettings};

per_backend!(
    stats_pending: an_observation_waits_in_its_pending_slice,
    a_failed_call_leaves_the_pending_slices_as_they_were,
    a_pending_slice_outlives_a_change_of_precisions,
    a_pending_slice_written_before_its_queue_reads_and_takes_writes,
    a_failed_call_takes_back_what_it_queued,
    the_cleaner_folds_the_queue,
);

fn settings() -> StatsSettings {
    StatsSettings {
        precisions: vec![1, 60],
        samples: 100,
        ..StatsSettings::default()
    }
}

/// (start, count, sum) of each slice of `name` at `precision`.
async fn slices(stats: &Stats, name: &str, precision: u64) -> Vec<(u64, u64, f64)> {
    let read: Vec<SliceSummary> = stats.get(name, precision, &[]).await.unwrap();
    read.into_iter()
        .map(|s| (s.start, s.summary.count, s.summary.sum))
        .collect()
}

/// The fields of hash `key`, sorted.
async fn fields(raw: &mut redis::aio::MultiplexedConnection, key: &str) -> Vec<String> {
    let mut f: Vec<String> = raw.hkeys(key).await.unwrap();
    f.sort();
    f
}

/// What each of `keys` holds: a hash's fields and values, a sorted set's
/// members and scores, sorted.
async fn snapshot(
    raw: &mut redis::aio::MultiplexedConnection,
    keys: &[String],
) -> Vec<(String, Vec<(Vec<u8>, Vec<u8>)>)> {
    let mut all = Vec::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE").arg(key).query_async(raw).await.unwrap();
        let mut held: Vec<(Vec<u8>, Vec<u8>)> = match kind.as_str() {
            "hash" => raw.hgetall(key).await.unwrap(),
            "zset" => raw.zrange_withscores(key, 0, -1).await.unwrap(),
            other => panic!("{key} is a {other}"),
        };
        held.sort();
        all.push((key.clone(), held));
    }
    all.sort();
    all
}

async fn an_observation_waits_in_its_pending_slice(kind: Kind) {
    let f = Fixture::new(kind).await;
    let stats = f.stats(settings()).await;
    let mut raw = f.raw().await;
    let second = T0.floor() as u64;
    stats.record_at("lat", 10.0, T0).await.unwrap();
    stats.record_at("lat", 20.0, T0 + 0.2).await.unwrap();
    // Both wait in one pending slice; no precision's hash holds them yet.
    let pending: Vec<String> = raw.keys("*:pend:lat").await.unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    let pend = pending[0].clone();
    assert_eq!(fields(&mut raw, &pend).await, vec!["b", "q", "s", "t"]);
    let stored: Vec<String> = raw.keys("*lat").await.unwrap();
    assert_eq!(stored, vec![pend.clone()], "only the pending slice is kept");
    // Reads add it at every precision.
    let minute = second - second % 60;
    assert_eq!(slices(&stats, "lat", 1).await, vec![(second, 2, 30.0)]);
    assert_eq!(slices(&stats, "lat", 60).await, vec![(minute, 2, 30.0)]);
    // The next second folds the first into both precisions.
    stats.record_at("lat", 5.0, T0 + 1.0).await.unwrap();
    // An observation older than the pending slice goes to both at once.
    stats.record_at("lat", 1.0, T0 - 3.0).await.unwrap();
    let hashes: Vec<String> = raw.keys("*lat").await.unwrap();
    assert!(
        hashes.len() > 1,
        "the fold wrote the precisions' hashes: {hashes:?}"
    );
    let held: Vec<(String, Vec<u8>)> = raw.hgetall(&pend).await.unwrap();
    let s = held.iter().find(|(k, _)| k == "s").map(|(_, v)| v.clone());
    assert!(s.is_some(), "a pending slice is kept: {held:?}");
    assert_eq!(
        slices(&stats, "lat", 1).await,
        vec![
            (second - 3, 1, 1.0),
            (second, 2, 30.0),
            (second + 1, 1, 5.0)
        ]
    );
    assert_eq!(slices(&stats, "lat", 60).await, vec![(minute, 4, 36.0)]);
    // Ranges see the pending slice too.
    let range = stats
        .summary(&["lat"], second, second + 1, &[])
        .await
        .unwrap();
    assert_eq!((range.summary.count, range.summary.sum), (3, 35.0));
    // Deleting the statistic takes every key of it.
    assert!(stats.delete("lat").await.unwrap());
    let left: Vec<String> = raw.keys("*lat").await.unwrap();
    assert!(left.is_empty(), "{left:?}");
}

async fn a_failed_call_leaves_the_pending_slices_as_they_were(kind: Kind) {
    let f = Fixture::new(kind).await;
    let stats = f.stats(settings()).await;
    let mut raw = f.raw().await;
    big_and_small(&stats).await;
    // A call that folds a-small's pending slice, starts a new one, and then
    // overflows z-big's count is refused whole.
    refused_whole(&stats, &mut raw, T0 + 1.0).await;
    assert_eq!(
        slices(&stats, "a-small", 1).await,
        vec![(T0.floor() as u64, 1, 1.0)]
    );
}

/// "z-big" holds the most observations a slice may count, in its pending
/// slice; "a-small" one observation in its own.
async fn big_and_small(stats: &Stats) {
    stats
        .record_many(&[
            Observation::new("z-big", 1.0).at(T0).weight(1 << 53),
            Observation::new("a-small", 1.0).at(T0),
        ])
        .await
        .unwrap();
}

/// Sends a call of an observation of "a-small" at `at` and one that
/// overflows "z-big"'s count (which holds the most a slice may count), and
/// checks that it is refused whole: no key made or removed, every key as it
/// was.
async fn refused_whole(stats: &Stats, raw: &mut redis::aio::MultiplexedConnection, at: f64) {
    let before: Vec<String> = raw.keys("*").await.unwrap();
    let held = snapshot(raw, &before).await;
    let e = stats
        .record_many(&[
            Observation::new("a-small", 2.0).at(at),
            Observation::new("z-big", 1.0).at(T0),
        ])
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidCount(_)), "{e}");
    let mut after: Vec<String> = raw.keys("*").await.unwrap();
    let mut keys = before.clone();
    keys.sort();
    after.sort();
    assert_eq!(after, keys, "no key made or removed");
    assert_eq!(snapshot(raw, &before).await, held, "every key as it was");
}

/// A pending slice written before the statistics' precisions changed is
/// read, and folded, at the precisions it was written for that are still
/// kept: the 1 s precision gone, 5 s new, 60 s kept. As before pending
/// slices, what was written before a precision existed is not in it.
async fn a_pending_slice_outlives_a_change_of_precisions(kind: Kind) {
    let f = Fixture::new(kind).await;
    let second = T0.floor() as u64;
    let (five, minute) = (second - second % 5, second - second % 60);
    f.stats(settings())
        .await
        .record_at("lat", 10.0, T0)
        .await
        .unwrap();
    let now = f
        .stats(StatsSettings {
            precisions: vec![5, 60],
            samples: 100,
            ..StatsSettings::default()
        })
        .await;
    assert!(now.get("lat", 5, &[]).await.unwrap().is_empty());
    assert_eq!(slices(&now, "lat", 60).await, vec![(minute, 1, 10.0)]);
    // The next second folds it into 60 s (1 s is gone) and starts a new one.
    now.record_at("lat", 20.0, T0 + 1.0).await.unwrap();
    assert_eq!(slices(&now, "lat", 5).await, vec![(five, 1, 20.0)]);
    assert_eq!(slices(&now, "lat", 60).await, vec![(minute, 2, 30.0)]);
}

/// The one pending slice's key.
async fn pending_key(raw: &mut redis::aio::MultiplexedConnection, name: &str) -> String {
    let pending: Vec<String> = raw.keys(format!("*:pend:{name}")).await.unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    pending[0].clone()
}

/// Statistics written by the commit before the queue (issue 20 §3) keep a
/// pending value of format 1 and no queue: they read the same, and writes
/// into that slice merge it (now of format 2, with a queue), queue, and fold
/// as for any other.
async fn a_pending_slice_written_before_its_queue_reads_and_takes_writes(kind: Kind) {
    let f = Fixture::new(kind).await;
    let stats = f.stats(settings()).await;
    let mut raw = f.raw().await;
    let second = T0.floor() as u64;
    let minute = second - second % 60;
    stats.record_at("lat", 5.0, T0 - 1.0).await.unwrap();
    stats.record_at("lat", 10.0, T0).await.unwrap();
    stats.record_at("lat", 20.0, T0 + 0.2).await.unwrap();
    // The pending slice as the commit before wrote it: its value merged, of
    // format 1 (the stored slices' bytes), no queue.
    let pend = pending_key(&mut raw, "lat").await;
    let (value, queue): (Vec<u8>, Option<Vec<u8>>) = redis::cmd("HMGET")
        .arg(&pend)
        .arg("b")
        .arg("q")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(&value[..2], &[0x9d, 2], "a pending value of format 2");
    assert!(queue.is_some(), "the second observation waits in the queue");
    let merged = StatsValue::decode_pending(&value, queue.as_deref()).unwrap();
    let old = merged.to_bytes();
    assert_eq!(&old[..2], &[0x9d, 1]);
    let _: () = raw.hset(&pend, "b", &old).await.unwrap();
    let _: () = raw.hdel(&pend, "q").await.unwrap();
    assert_eq!(fields(&mut raw, &pend).await, vec!["b", "s", "t"]);
    assert_eq!(
        slices(&stats, "lat", 1).await,
        vec![(second - 1, 1, 5.0), (second, 2, 30.0)]
    );
    assert_eq!(slices(&stats, "lat", 60).await, vec![(minute, 3, 35.0)]);
    // A write into it merges it, of format 2 with a queue; the next waits.
    stats.record_at("lat", 7.0, T0 + 0.3).await.unwrap();
    let value: Vec<u8> = raw.hget(&pend, "b").await.unwrap();
    assert_eq!(&value[..2], &[0x9d, 2]);
    assert_eq!(fields(&mut raw, &pend).await, vec!["b", "q", "s", "t"]);
    stats.record_at("lat", 1.0, T0 + 0.4).await.unwrap();
    assert_eq!(
        slices(&stats, "lat", 1).await,
        vec![(second - 1, 1, 5.0), (second, 4, 38.0)]
    );
    // The next second folds it, queue and all.
    stats.record_at("lat", 2.0, T0 + 1.0).await.unwrap();
    assert_eq!(
        slices(&stats, "lat", 1).await,
        vec![
            (second - 1, 1, 5.0),
            (second, 4, 38.0),
            (second + 1, 1, 2.0)
        ]
    );
    assert_eq!(slices(&stats, "lat", 60).await, vec![(minute, 6, 45.0)]);
}

/// A failed call takes back the observations it put in a queue.
async fn a_failed_call_takes_back_what_it_queued(kind: Kind) {
    let f = Fixture::new(kind).await;
    let stats = f.stats(settings()).await;
    let mut raw = f.raw().await;
    big_and_small(&stats).await;
    stats.record_at("a-small", 3.0, T0 + 0.1).await.unwrap();
    let pend = pending_key(&mut raw, "a-small").await;
    let queue: Vec<u8> = raw.hget(&pend, "q").await.unwrap();
    // a-small's observation waits in its queue, then z-big's count
    // overflows: the call is refused whole.
    refused_whole(&stats, &mut raw, T0 + 0.2).await;
    assert_eq!(raw.hget::<_, _, Vec<u8>>(&pend, "q").await.unwrap(), queue);
    assert_eq!(
        slices(&stats, "a-small", 1).await,
        vec![(T0.floor() as u64, 2, 4.0)]
    );
}

/// The cleaner folds a pending slice's queue with its value.
async fn the_cleaner_folds_the_queue(kind: Kind) {
    let f = Fixture::new(kind).await;
    let stats = f.stats(settings()).await;
    let mut raw = f.raw().await;
    let second = T0.floor() as u64;
    let minute = second - second % 60;
    for (i, x) in [10.0, 20.0, 30.0].into_iter().enumerate() {
        stats
            .record_at("lat", x, T0 + 0.1 * i as f64)
            .await
            .unwrap();
    }
    let pend = pending_key(&mut raw, "lat").await;
    let queue: Vec<u8> = raw.hget(&pend, "q").await.unwrap();
    let value: Vec<u8> = raw.hget(&pend, "b").await.unwrap();
    let waiting = StatsValue::decode_pending(&value, Some(&queue)).unwrap();
    assert_eq!(waiting.count(), 3);
    assert_eq!(StatsValue::decode_pending(&value, None).unwrap().count(), 1);
    let mut cleaner = f.cleaner_of(&stats);
    f.clock.advance(30.0);
    cleaner.pass().await.unwrap();
    let left: Vec<String> = raw.keys("*:pend:*").await.unwrap();
    assert!(left.is_empty(), "the cleaner folded it: {left:?}");
    assert_eq!(slices(&stats, "lat", 1).await, vec![(second, 3, 60.0)]);
    assert_eq!(slices(&stats, "lat", 60).await, vec![(minute, 3, 60.0)]);
}
