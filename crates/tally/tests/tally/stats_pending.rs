//! Statistics through their pending slice on Redis (issue 20 §3,
//! `lua/stats_fold.lua`): an exact write of one observation waits in its
//! statistic's pending slice, which the next second's write folds into
//! the finest precision and the accumulator of the coarser ones (merged
//! into them when they change); what the store keeps is checked key by
//! key, reads see the pending slice and the accumulator at every
//! precision, a failed call leaves nothing, and deleting a statistic takes
//! its pending slice with it. Observations of
//! the pending second wait in its queue (a header `q0`, then one field per
//! delta, `q1`, `q2`, ...) and the value (`b`) is of
//! format 3; a pending slice of format 1 without a queue, as the commit
//! before the queue wrote it, and one of format 2 with its queue in one
//! string `q`, as the commit before the field per delta wrote it, read and
//! take writes the same.

use crate::common;

use common::{Fixture, Kind, T0};
use redis::AsyncCommands;
use tally::engine::Codec;
use tally::engine::kinds::StatsValue;
use tally::stats::{Figure, Observation, SliceSummary};
use tally::{Error, Stats, StatsSettings};

per_backend!(
    stats_pending: an_observation_waits_in_its_pending_slice,
    a_failed_call_leaves_the_pending_slices_as_they_were,
    a_pending_slice_outlives_a_change_of_precisions,
    a_pending_slice_written_before_its_queue_reads_and_takes_writes,
    a_pending_slice_with_its_queue_in_one_string_reads_and_takes_writes,
    a_failed_call_takes_back_what_it_queued,
    the_cleaner_folds_the_queue,
    the_accumulator_holds_the_coarser_slices_until_they_change,
    a_full_accumulator_is_merged,
    a_failed_call_takes_back_the_accumulators_merge,
);

/// On every layout and store (the module keeps its backends' names apart
/// from the ones above).
mod many {
    use super::*;
    per_backend!(layouts: a_ranking_of_many_stats_sees_every_pending_slice);
}

fn settings() -> StatsSettings {
    settings_at(vec![1, 60])
}

/// 100 samples at each of `precisions`.
fn settings_at(precisions: Vec<u64>) -> StatsSettings {
    StatsSettings {
        precisions,
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
    assert_eq!(
        fields(&mut raw, &pend).await,
        vec!["b", "q0", "q1", "s", "t"]
    );
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
    let (_f, stats, mut raw) = lat_fixture(kind).await;
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
    let now = f.stats(settings_at(vec![5, 60])).await;
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
/// into that slice merge it (now of format 3, with a queue), queue, and fold
/// as for any other.
async fn a_pending_slice_written_before_its_queue_reads_and_takes_writes(kind: Kind) {
    let (_f, stats, mut raw) = lat_fixture(kind).await;
    stats.record_at("lat", 10.0, T0).await.unwrap();
    a_second_before_t0(&stats).await;
    stats.record_at("lat", 20.0, T0 + 0.2).await.unwrap();
    // The pending slice as the commit before wrote it: its value merged, of
    // format 1 (the stored slices' bytes), no queue.
    let pend = pending_key(&mut raw, "lat").await;
    let (value, deltas) = value_and_deltas(&mut raw, &pend).await;
    assert_eq!(&value[..4], &FORMAT_3, "a pending value of format 3");
    assert_eq!(deltas.len(), 1, "the second observation waits in the queue");
    let merged = StatsValue::decode_pending(&value, None, &slices_of(&deltas)).unwrap();
    let old = merged.to_bytes();
    assert_eq!(&old[..2], &[0x9d, 1]);
    let _: () = raw.hset(&pend, "b", &old).await.unwrap();
    let _: () = raw.hdel(&pend, &["q0", "q1"]).await.unwrap();
    assert_eq!(fields(&mut raw, &pend).await, vec!["b", "s", "t"]);
    merges_queues_and_folds(&stats, &mut raw, &pend, (2, 30.0)).await;
}

/// A fixture, its statistics and a raw connection.
async fn lat_fixture(kind: Kind) -> (Fixture, Stats, redis::aio::MultiplexedConnection) {
    let f = Fixture::new(kind).await;
    let stats = f.stats(settings()).await;
    let raw = f.raw().await;
    (f, stats, raw)
}

/// "lat" gets 5.0 at T0 - 1, after its pending slice opened in the second
/// of T0: older than it, so written to every precision at once (no fold,
/// so no accumulator: the store as the commits before the accumulator left
/// it).
async fn a_second_before_t0(stats: &Stats) {
    stats.record_at("lat", 5.0, T0 - 1.0).await.unwrap();
}

/// After "lat" got 5.0 at T0 - 1 and `(count, sum)` in the second of
/// T0, which its pending slice `pend` holds in an older format: it reads
/// so; a write into that second merges it all, of format 3 with an empty
/// queue, the next waits in a field of its own, and the next second folds
/// it, queue and all.
async fn merges_queues_and_folds(
    stats: &Stats,
    raw: &mut redis::aio::MultiplexedConnection,
    pend: &str,
    (count, sum): (u64, f64),
) {
    let second = T0.floor() as u64;
    let minute = second - second % 60;
    assert_eq!(
        slices(stats, "lat", 1).await,
        vec![(second - 1, 1, 5.0), (second, count, sum)]
    );
    assert_eq!(
        slices(stats, "lat", 60).await,
        vec![(minute, count + 1, sum + 5.0)]
    );
    stats.record_at("lat", 7.0, T0 + 0.3).await.unwrap();
    let value: Vec<u8> = raw.hget(pend, "b").await.unwrap();
    assert_eq!(&value[..4], &FORMAT_3);
    assert_eq!(fields(raw, pend).await, vec!["b", "q0", "s", "t"]);
    assert_eq!(
        StatsValue::decode_pending(&value, None, &[])
            .unwrap()
            .count(),
        count + 1
    );
    stats.record_at("lat", 1.0, T0 + 0.4).await.unwrap();
    assert_eq!(fields(raw, pend).await, vec!["b", "q0", "q1", "s", "t"]);
    let now = (second, count + 2, sum + 8.0);
    assert_eq!(
        slices(stats, "lat", 1).await,
        vec![(second - 1, 1, 5.0), now]
    );
    stats.record_at("lat", 2.0, T0 + 1.0).await.unwrap();
    assert_eq!(
        slices(stats, "lat", 1).await,
        vec![(second - 1, 1, 5.0), now, (second + 1, 1, 2.0)]
    );
    assert_eq!(
        slices(stats, "lat", 60).await,
        vec![(minute, count + 4, sum + 15.0)]
    );
}

/// The first bytes of a pending value of format 3: the 16-bit header of an
/// array of 13, then the format.
const FORMAT_3: [u8; 4] = [0xdc, 0x00, 0x0d, 0x03];

/// The pending slice `pend`'s value (`b`) and its queue's deltas (`q1` to
/// `q<n>`; the slice has a queue).
async fn value_and_deltas(
    raw: &mut redis::aio::MultiplexedConnection,
    pend: &str,
) -> (Vec<u8>, Vec<Vec<u8>>) {
    let value: Vec<u8> = raw.hget(pend, "b").await.unwrap();
    // Past s, b, t and q0.
    let n = fields(raw, pend).await.len() - 4;
    let mut deltas = Vec::new();
    for i in 1..=n {
        deltas.push(raw.hget(pend, format!("q{i}")).await.unwrap());
    }
    (value, deltas)
}

fn slices_of(deltas: &[Vec<u8>]) -> Vec<&[u8]> {
    deltas.iter().map(Vec::as_slice).collect()
}

/// Statistics written by the commit before the queue had a field per delta
/// keep a pending value of format 2 and its queue in one string `q` (the
/// header, then the deltas): they read the same, and a write into that
/// slice merges it (now of format 3, with a queue of a field per delta),
/// the next queues, and the next second folds it all.
async fn a_pending_slice_with_its_queue_in_one_string_reads_and_takes_writes(kind: Kind) {
    let (_f, stats, mut raw) = lat_fixture(kind).await;
    three_in_one_second(&stats).await;
    a_second_before_t0(&stats).await;
    // The pending slice as that commit wrote it, by hand: the value of
    // format 2, and the queue's header and deltas in one string.
    let pend = pending_key(&mut raw, "lat").await;
    let (value, deltas) = value_and_deltas(&mut raw, &pend).await;
    assert_eq!(deltas.len(), 2);
    let header: Vec<u8> = raw.hget(&pend, "q0").await.unwrap();
    let opened = StatsValue::decode_pending(&value, None, &[]).unwrap();
    let (two, two_header) = opened.encode_pending();
    // (The header is signed now; that commit's was the number alone.)
    assert_eq!(header[0], b'+');
    let header = header[1..].to_vec();
    assert_eq!(two_header, header);
    assert_eq!(&two[..2], &[0x9d, 2]);
    let queue = [header, deltas.concat()].concat();
    let _: () = raw.hdel(&pend, &["q0", "q1", "q2"]).await.unwrap();
    let _: () = raw
        .hset_multiple(&pend, &[("b", &two), ("q", &queue)])
        .await
        .unwrap();
    assert_eq!(fields(&mut raw, &pend).await, vec!["b", "q", "s", "t"]);
    merges_queues_and_folds(&stats, &mut raw, &pend, (3, 60.0)).await;
}

/// A failed call takes back the observations it put in a queue.
async fn a_failed_call_takes_back_what_it_queued(kind: Kind) {
    let (_f, stats, mut raw) = lat_fixture(kind).await;
    big_and_small(&stats).await;
    stats.record_at("a-small", 3.0, T0 + 0.1).await.unwrap();
    let pend = pending_key(&mut raw, "a-small").await;
    let queue = snapshot(&mut raw, std::slice::from_ref(&pend)).await;
    assert_eq!(
        fields(&mut raw, &pend).await,
        vec!["b", "q0", "q1", "s", "t"]
    );
    // a-small's observation waits in its queue, then z-big's count
    // overflows: the call is refused whole.
    refused_whole(&stats, &mut raw, T0 + 0.2).await;
    assert_eq!(snapshot(&mut raw, std::slice::from_ref(&pend)).await, queue);
    assert_eq!(
        slices(&stats, "a-small", 1).await,
        vec![(T0.floor() as u64, 2, 4.0)]
    );
}

/// "lat" gets 10, 20 and 30 in the second of T0: the first opens its
/// pending slice, the others wait in its queue.
async fn three_in_one_second(stats: &Stats) {
    for (i, x) in [10.0, 20.0, 30.0].into_iter().enumerate() {
        stats
            .record_at("lat", x, T0 + 0.1 * i as f64)
            .await
            .unwrap();
    }
}

/// The cleaner folds a pending slice's queue with its value.
async fn the_cleaner_folds_the_queue(kind: Kind) {
    let f = Fixture::new(kind).await;
    let stats = f.stats(settings()).await;
    let mut raw = f.raw().await;
    let second = T0.floor() as u64;
    let minute = second - second % 60;
    three_in_one_second(&stats).await;
    let pend = pending_key(&mut raw, "lat").await;
    let (value, deltas) = value_and_deltas(&mut raw, &pend).await;
    let waiting = StatsValue::decode_pending(&value, None, &slices_of(&deltas)).unwrap();
    assert_eq!(waiting.count(), 3);
    assert_eq!(
        StatsValue::decode_pending(&value, None, &[])
            .unwrap()
            .count(),
        1
    );
    let mut cleaner = f.cleaner_of(&stats);
    f.clock.advance(30.0);
    cleaner.pass().await.unwrap();
    let left: Vec<String> = raw.keys("*:pend:*").await.unwrap();
    assert!(left.is_empty(), "the cleaner folded it: {left:?}");
    assert_eq!(slices(&stats, "lat", 1).await, vec![(second, 3, 60.0)]);
    assert_eq!(slices(&stats, "lat", 60).await, vec![(minute, 3, 60.0)]);
}

/// A second's fold writes its finest slice and keeps its value in the
/// pending slice's accumulator (`ak` values `a1`, `a2`, ... for the coarser
/// slices `at`), which reads add where they fold; the first fold for other
/// coarser slices merges the accumulator into its slices, and the cleaner
/// merges it with the pending value. Each observation is counted once at
/// every step.
async fn the_accumulator_holds_the_coarser_slices_until_they_change(kind: Kind) {
    let (f, stats, mut raw) = lat_fixture(kind).await;
    let second = T0.floor() as u64;
    let minute = second - second % 60;
    let next = minute + 60;
    assert!(second + 3 < next, "the first three seconds share a minute");
    let write = |x: f64, at: u64| {
        let stats = stats.clone();
        async move { stats.record_at("lat", x, at as f64 + 0.5).await.unwrap() }
    };
    let accumulator = |raw: &mut redis::aio::MultiplexedConnection, pend: String| {
        let mut raw = raw.clone();
        async move {
            let held: Vec<(String, Vec<u8>)> = raw.hgetall(&pend).await.unwrap();
            let field = |name: &str| held.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
            let at = field("at").map(|at| String::from_utf8(at).unwrap());
            let k: usize =
                field("ak").map_or(0, |k| String::from_utf8(k).unwrap().parse().unwrap());
            let counts: Vec<u64> = (1..=k)
                .map(|i| {
                    StatsValue::decode(&field(&format!("a{i}")).unwrap())
                        .unwrap()
                        .count()
                })
                .collect();
            (at, counts)
        }
    };
    write(1.0, second + 1).await;
    write(2.0, second + 2).await;
    write(3.0, second + 3).await;
    let pend = pending_key(&mut raw, "lat").await;
    assert_eq!(
        fields(&mut raw, &pend).await,
        vec!["a1", "a2", "ak", "at", "b", "q0", "s", "t"]
    );
    let (at, counts) = accumulator(&mut raw, pend.clone()).await;
    let at = at.unwrap();
    assert!(at.starts_with("60:") && !at.contains(' '), "{at}");
    assert_eq!(counts, vec![1, 1]);
    let ones = |from: u64, xs: &[f64]| -> Vec<(u64, u64, f64)> {
        xs.iter().zip(from..).map(|(&x, s)| (s, 1, x)).collect()
    };
    assert_eq!(
        slices(&stats, "lat", 1).await,
        ones(second + 1, &[1.0, 2.0, 3.0])
    );
    assert_eq!(slices(&stats, "lat", 60).await, vec![(minute, 3, 6.0)]);
    // The next minute: the fold of second + 3 still goes to the
    // accumulator (its minute is the accumulator's)...
    write(4.0, next + 1).await;
    let (same, counts) = accumulator(&mut raw, pend.clone()).await;
    assert_eq!(same.as_deref(), Some(at.as_str()));
    assert_eq!(counts, vec![1, 1, 1]);
    assert_eq!(
        slices(&stats, "lat", 60).await,
        vec![(minute, 3, 6.0), (next, 1, 4.0)]
    );
    // ... and the fold of next + 1 merges it into its minute first. (Two
    // observations of next + 2: the cleaner below folds a queue too.)
    write(2.0, next + 2).await;
    write(3.0, next + 2).await;
    let (moved, counts) = accumulator(&mut raw, pend.clone()).await;
    assert_ne!(moved.as_deref(), Some(at.as_str()));
    assert_eq!(counts, vec![1]);
    let all = vec![(minute, 3, 6.0), (next, 3, 9.0)];
    assert_eq!(slices(&stats, "lat", 60).await, all);
    let mut fine = ones(second + 1, &[1.0, 2.0, 3.0]);
    fine.extend([(next + 1, 1, 4.0), (next + 2, 2, 5.0)]);
    assert_eq!(
        fields(&mut raw, &pend).await,
        vec!["a1", "ak", "at", "b", "q0", "q1", "s", "t"]
    );
    assert_eq!(slices(&stats, "lat", 1).await, fine);
    // The cleaner merges the accumulator and the pending value.
    let mut cleaner = f.cleaner_of(&stats);
    // (Within the 1 s precision's 100 samples of every slice written.)
    f.clock.advance(30.0);
    cleaner.pass().await.unwrap();
    let left: Vec<String> = raw.keys("*:pend:*").await.unwrap();
    assert!(left.is_empty(), "the cleaner folded it: {left:?}");
    assert_eq!(slices(&stats, "lat", 60).await, all);
    assert_eq!(slices(&stats, "lat", 1).await, fine);
}

/// The accumulator holds at most 64 values (`stats_fold.lua`'s
/// ACC_VALUES): the fold of the 65th second of one hour merges them into
/// the hour's slice and starts again; reads count each observation once.
async fn a_full_accumulator_is_merged(kind: Kind) {
    let f = Fixture::new(kind).await;
    let stats = f.stats(settings_at(vec![1, 3600])).await;
    let mut raw = f.raw().await;
    let second = T0.floor() as u64;
    let hour = second - second % 3600;
    let first = hour + 1;
    assert!(first + 70 < hour + 3600);
    let held = |raw: &mut redis::aio::MultiplexedConnection, pend: String| {
        let mut raw = raw.clone();
        async move {
            let k: Option<u64> = raw.hget(&pend, "ak").await.unwrap();
            k
        }
    };
    let mut pend = None;
    for i in 0..67u64 {
        stats
            .record_at("lat", i as f64, (first + i) as f64 + 0.5)
            .await
            .unwrap();
        let key = match &pend {
            Some(key) => key,
            None => pend.insert(pending_key(&mut raw, "lat").await),
        };
        // Folded so far: i seconds; the accumulator holds those past the
        // last full one.
        let want = match i {
            0 => None,
            1..=64 => Some(i),
            _ => Some(i - 64),
        };
        assert_eq!(
            held(&mut raw, key.clone()).await,
            want,
            "after {} seconds",
            i + 1
        );
    }
    let sum = (0..67).sum::<u64>() as f64;
    assert_eq!(slices(&stats, "lat", 3600).await, vec![(hour, 67, sum)]);
    assert_eq!(slices(&stats, "lat", 1).await.len(), 67);
}

/// A call whose fold merges the accumulator into the coarser slices (a
/// later minute) and then fails is refused whole: the slices, the
/// accumulator and the pending slice as they were.
async fn a_failed_call_takes_back_the_accumulators_merge(kind: Kind) {
    let (_f, stats, mut raw) = lat_fixture(kind).await;
    big_and_small(&stats).await;
    // a-small's seconds of T0 and T0 + 1 fold into its accumulator (the
    // minute of T0); T0 + 60 pends, in the next minute, whose fold the
    // refused call makes.
    stats.record_at("a-small", 2.0, T0 + 1.0).await.unwrap();
    stats.record_at("a-small", 4.0, T0 + 60.0).await.unwrap();
    let pend = pending_key(&mut raw, "a-small").await;
    let ak: Option<u64> = raw.hget(&pend, "ak").await.unwrap();
    assert_eq!(ak, Some(2));
    refused_whole(&stats, &mut raw, T0 + 61.0).await;
    let second = T0.floor() as u64;
    let minute = second - second % 60;
    assert_eq!(
        slices(&stats, "a-small", 60).await,
        vec![(minute, 2, 3.0), (minute + 60, 1, 4.0)]
    );
    // The same call, without the overflow, merges the accumulator.
    stats.record_at("a-small", 8.0, T0 + 61.0).await.unwrap();
    let ak: Option<u64> = raw.hget(&pend, "ak").await.unwrap();
    assert_eq!(ak, Some(1));
    assert_eq!(
        slices(&stats, "a-small", 60).await,
        vec![(minute, 2, 3.0), (minute + 60, 2, 12.0)]
    );
}

/// A ranking reads many statistics at once (on Redis, one
/// `pending_read.lua` call per slot holding 8 of them or more, which looks
/// their pending slices up a run at a time); each one's summary is what a summary of it alone (one
/// command per pending slice) answers, with observations waiting in
/// pending slices, in queues and in accumulators.
async fn a_ranking_of_many_stats_sees_every_pending_slice(kind: Kind) {
    let f = Fixture::new(kind).await;
    let stats = f.stats(settings()).await;
    let second = T0.floor() as u64;
    // 600 names: on a cluster about 9 a shard (64 shards, a slot each),
    // some shards past the script's 8 and some below.
    let names: Vec<String> = (0..600).map(|i| format!("s{i:03}")).collect();
    let mut observations = Vec::new();
    for (i, name) in names.iter().enumerate() {
        // Each statistic one observation; every 20th three more in the
        // same second (a queue) and one a second later (a fold into the
        // accumulator).
        let mut at = vec![(T0, i as f64)];
        if i % 20 == 0 {
            at.extend([
                (T0 + 0.1, 1.0),
                (T0 + 0.2, 2.0),
                (T0 + 0.3, 3.0),
                (T0 + 1.0, 4.0),
            ]);
        }
        for (t, v) in at {
            observations.push(Observation::new(name.as_str(), v).at(t));
        }
    }
    // One write per observation, in order: each statistic's are exact
    // writes through its pending slice.
    for o in &observations {
        stats.record_many(std::slice::from_ref(o)).await.unwrap();
    }
    let ranked = stats
        .top(Figure::Count, "s", second, second + 59, names.len())
        .await
        .unwrap();
    assert_eq!(ranked.len(), names.len());
    for r in &ranked {
        let alone = stats
            .summary(&[r.name.as_str()], second, second + 59, &[])
            .await
            .unwrap();
        assert_eq!(r.summary, alone.summary, "{}", r.name);
    }
    let count = |name: &str| {
        ranked
            .iter()
            .find(|r| r.name == name)
            .unwrap()
            .summary
            .count
    };
    assert_eq!((count("s000"), count("s001"), count("s040")), (5, 1, 5));
}
