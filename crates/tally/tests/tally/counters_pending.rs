//! Counters through their pending slice on Redis's default layout (issue
//! 20, `lua/stats_fold.lua` with sums), in a space of five precisions or
//! more: a counter written once a slice keeps its hashes as before; the
//! second write into a slice opens a pending slice, later writes into that
//! slice go there alone, and the next slice's write folds it into every
//! precision. What the store keeps is checked key by key; reads, the
//! cleaner, deleting and overflow see the pending count. A space of fewer
//! precisions writes every precision each time, and still reads, folds
//! and checks a pending slice left by a setting of more.

use crate::common;

use common::{Fixture, Kind, held};
use redis::AsyncCommands;
use tally::{CleanerSettings, CounterSettings, Increment};

per_backend!(
    redis_default_layout(Kind::RedisDefault):
    a_busy_counter_counts_in_its_pending_slice,
    a_sparse_counter_keeps_no_pending_slice,
    the_cleaner_folds_and_keeps_a_pending_count,
    a_direct_write_that_would_overflow_with_the_pending_count_writes_nothing,
    an_overflow_takes_back_every_hash_written_directly,
    a_hash_made_and_added_to_in_one_failed_call_is_gone,
    deleting_a_counter_takes_its_pending_slice,
    a_counter_of_few_precisions_keeps_no_pending_slice,
    a_pending_slice_left_by_more_precisions_is_read_folded_and_checked,
);

per_backend!(features: a_read_of_many_counters_sees_every_pending_slice);

/// The second most writes here fall in, at the start of a minute.
const T: f64 = 1_000_020.0;

fn ts(secs: f64) -> tally::Timestamp {
    tally::Timestamp::from_secs_f64(secs).unwrap()
}

/// Five precisions: as few as counters fold with.
fn settings() -> CounterSettings {
    CounterSettings {
        precisions: vec![1, 5, 10, 30, 60],
        samples: 100,
    }
}

/// Two precisions: too few for counters to fold.
fn few() -> CounterSettings {
    CounterSettings {
        precisions: vec![1, 60],
        samples: 100,
    }
}

/// The pending slice of counter `name`: its key and its `s` and `b`, or
/// `None` when it has none.
async fn pending(
    raw: &mut redis::aio::MultiplexedConnection,
    name: &str,
) -> Option<(String, String, String)> {
    let keys: Vec<String> = raw.keys(format!("*:pend:{name}")).await.unwrap();
    assert!(keys.len() <= 1, "{keys:?}");
    let key = keys.into_iter().next()?;
    let (s, b): (String, String) = redis::cmd("HMGET")
        .arg(&key)
        .arg("s")
        .arg("b")
        .query_async(raw)
        .await
        .unwrap();
    Some((key, s, b))
}

/// The count stored in the hash of `name` at `precision`, field `slice`,
/// not counting a pending slice.
async fn stored(
    raw: &mut redis::aio::MultiplexedConnection,
    name: &str,
    precision: u64,
    slice: u64,
) -> Option<i64> {
    let keys: Vec<String> = raw.keys(format!("*:{precision}:{name}")).await.unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    raw.hget(&keys[0], slice).await.unwrap()
}

/// A fixture, a raw connection to its server, and counter `name` written
/// 1, 1 and 5 within the second at `T`: 2 stored at every precision, 5 in
/// its pending slice.
async fn with_a_pending_count(
    kind: Kind,
    name: &str,
) -> (Fixture, redis::aio::MultiplexedConnection) {
    let f = Fixture::with_settings(kind, settings()).await;
    let raw = f.raw().await;
    for n in [1, 1, 5] {
        f.counters.incr_at(name, n, T).await.unwrap();
    }
    (f, raw)
}

async fn a_busy_counter_counts_in_its_pending_slice(kind: Kind) {
    let f = Fixture::with_settings(kind, settings()).await;
    let mut raw = f.raw().await;
    f.counters.incr_at("hits", 1, T).await.unwrap();
    assert_eq!(
        pending(&mut raw, "hits").await,
        None,
        "one write: no pending slice"
    );
    // The second write into the slice opens it (at 0), the third goes there.
    f.counters.incr_at("hits", 2, T + 0.5).await.unwrap();
    let (_, s, b) = pending(&mut raw, "hits").await.expect("opened");
    assert_eq!((s.as_str(), b.as_str()), ("1000020", "0"));
    f.counters.incr_at("hits", 4, T + 0.7).await.unwrap();
    let (_, _, b) = pending(&mut raw, "hits").await.unwrap();
    assert_eq!(b, "4");
    assert_eq!(stored(&mut raw, "hits", 1, 1_000_020).await, Some(3));
    assert_eq!(stored(&mut raw, "hits", 60, 1_000_020).await, Some(3));
    // Reads add it, at every precision.
    assert_eq!(held(&f.counters, "hits", 1).await, 7);
    assert_eq!(held(&f.counters, "hits", 60).await, 7);
    // The next second's write folds it and opens the next (the counter is
    // busy).
    f.counters.incr_at("hits", 8, T + 1.0).await.unwrap();
    assert_eq!(stored(&mut raw, "hits", 1, 1_000_020).await, Some(7));
    assert_eq!(stored(&mut raw, "hits", 1, 1_000_021).await, Some(8));
    assert_eq!(stored(&mut raw, "hits", 60, 1_000_020).await, Some(15));
    let (_, s, b) = pending(&mut raw, "hits").await.unwrap();
    assert_eq!((s.as_str(), b.as_str()), ("1000021", "0"));
    let samples = f.counters.get("hits", 1).await.unwrap();
    let got: Vec<(u64, i64)> = samples.iter().map(|s| (s.start, s.count)).collect();
    assert_eq!(got, vec![(1_000_020, 7), (1_000_021, 8)]);
    assert_eq!(held(&f.counters, "hits", 60).await, 15);
    assert_eq!(f.all_names().await, vec!["hits"]);
}

async fn a_sparse_counter_keeps_no_pending_slice(kind: Kind) {
    let f = Fixture::with_settings(kind, settings()).await;
    let mut raw = f.raw().await;
    for (i, t) in [1_000_020.0, 1_000_021.5, 1_000_090.0]
        .into_iter()
        .enumerate()
    {
        f.counters.incr_at("rare", 1, t).await.unwrap();
        assert_eq!(pending(&mut raw, "rare").await, None, "write {i}");
    }
    assert_eq!(held(&f.counters, "rare", 1).await, 3);
    assert_eq!(stored(&mut raw, "rare", 60, 1_000_020).await, Some(2));
}

async fn the_cleaner_folds_and_keeps_a_pending_count(kind: Kind) {
    let (f, mut raw) = with_a_pending_count(kind, "hits").await;
    assert_eq!(pending(&mut raw, "hits").await.unwrap().2, "5");
    let mut cleaner = f.counters.cleaner(CleanerSettings::default()).unwrap();
    cleaner.pass_at(ts(T + 5.0)).await.unwrap();
    // Folded before the trim (nothing was due): every count in the hashes.
    assert_eq!(pending(&mut raw, "hits").await, None);
    assert_eq!(stored(&mut raw, "hits", 1, 1_000_020).await, Some(7));
    assert_eq!(stored(&mut raw, "hits", 60, 1_000_020).await, Some(7));
    assert_eq!(f.all_names().await, vec!["hits"]);
    // A pass long after trims every slice, a pending count folded first:
    // the counters leave their registry with nothing left behind.
    for n in [1, 1, 2] {
        f.counters.incr_at("late", n, T + 1000.0).await.unwrap();
    }
    assert_eq!(pending(&mut raw, "late").await.unwrap().2, "2");
    cleaner.pass_at(ts(T + 100_000.0)).await.unwrap();
    assert!(f.all_names().await.is_empty());
    assert_eq!(pending(&mut raw, "late").await, None);
    for name in ["hits", "late"] {
        assert_eq!(held(&f.counters, name, 60).await, 0, "{name}");
    }
}

async fn a_direct_write_that_would_overflow_with_the_pending_count_writes_nothing(kind: Kind) {
    let (f, mut raw) = with_a_pending_count(kind, "big").await;
    // 60 s slice: 2 stored, 5 pending. A batch of two seconds (written to
    // every precision at once) bringing it to i64::MAX - 1 stored would
    // overflow once the 5 fold in.
    let d = (i64::MAX - 3) / 2;
    let err = f
        .counters
        .incr_many(&[
            Increment::new("big", d).at(T),
            Increment::new("big", d).at(T + 1.0),
        ])
        .await
        .unwrap_err();
    assert!(err.overflow().is_some(), "{err}");
    assert_eq!(stored(&mut raw, "big", 1, 1_000_020).await, Some(2));
    assert_eq!(stored(&mut raw, "big", 1, 1_000_021).await, None);
    assert_eq!(stored(&mut raw, "big", 60, 1_000_020).await, Some(2));
    assert_eq!(pending(&mut raw, "big").await.unwrap().2, "5");
    assert_eq!(held(&f.counters, "big", 60).await, 7);
    // Up to the limit is fine.
    f.counters
        .incr_many(&[
            Increment::new("big", d - 3).at(T),
            Increment::new("big", d - 2).at(T + 1.0),
        ])
        .await
        .unwrap();
    assert_eq!(held(&f.counters, "big", 60).await, i64::MAX - 1);
}

/// Counters each written at two seconds in one batch have their hashes
/// written directly, one after another (`engine_apply.lua` notes such a run
/// as one record to take back); when a later counter of the batch
/// overflows, every one of them holds what it held before and the
/// counters the batch made are gone.
async fn an_overflow_takes_back_every_hash_written_directly(kind: Kind) {
    let f = Fixture::with_settings(kind, settings()).await;
    let mut raw = f.raw().await;
    let old: Vec<String> = (0..10).map(|i| format!("a{i}")).collect();
    for name in &old {
        f.counters.incr_at(name, 3, T).await.unwrap();
    }
    f.counters.incr_at("zz", i64::MAX, T).await.unwrap();
    let mut batch = Vec::new();
    for name in old.iter().cloned().chain((0..5).map(|i| format!("n{i}"))) {
        batch.push(Increment::new(name.as_str(), 1).at(T));
        batch.push(Increment::new(name, 1).at(T + 1.0));
    }
    batch.push(Increment::new("zz", 1).at(T));
    batch.push(Increment::new("zz", 1).at(T + 1.0));
    let err = f.counters.incr_many(&batch).await.unwrap_err();
    assert!(err.overflow().is_some(), "{err}");
    for name in &old {
        assert_eq!(
            stored(&mut raw, name, 1, 1_000_020).await,
            Some(3),
            "{name}"
        );
        assert_eq!(stored(&mut raw, name, 1, 1_000_021).await, None, "{name}");
        assert_eq!(
            stored(&mut raw, name, 60, 1_000_020).await,
            Some(3),
            "{name}"
        );
        assert_eq!(pending(&mut raw, name).await, None, "{name}");
    }
    let made: Vec<String> = raw.keys("*:n[0-4]").await.unwrap();
    assert!(made.is_empty(), "{made:?}");
    let mut names = old.clone();
    names.push("zz".into());
    assert_eq!(f.all_names().await, names);
}

/// A call that writes a counter twice, first making its finest hash (one
/// `HSET` of three fields), then adding to it, and then fails, leaves no
/// key of that counter: the additions are taken back before the hash is
/// deleted, not after (which would make it again with negative counts).
async fn a_hash_made_and_added_to_in_one_failed_call_is_gone(kind: Kind) {
    let f = Fixture::with_settings(kind, settings()).await;
    let mut raw = f.raw().await;
    f.counters.incr_at("zz", i64::MAX, T).await.unwrap();
    let at = |name: &str, seconds: &[f64]| {
        let incs: Vec<Increment> = seconds
            .iter()
            .map(|&s| Increment::new(name, 1).at(T + s))
            .collect();
        f.counters.prepare(&incs).unwrap()
    };
    let mut batch = at("n", &[0.0, 1.0, 2.0]);
    for more in [at("n", &[0.0, 1.0]), at("zz", &[0.0, 1.0])] {
        batch.writes.extend(more.writes);
    }
    let err = f.counters.store().apply(&batch).await.unwrap_err();
    assert!(err.overflow().is_some(), "{err}");
    let left: Vec<String> = raw.keys("*:n").await.unwrap();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(stored(&mut raw, "zz", 1, 1_000_020).await, Some(i64::MAX));
    assert_eq!(stored(&mut raw, "zz", 1, 1_000_021).await, None);
    assert_eq!(f.all_names().await, vec!["zz".to_string()]);
}

async fn deleting_a_counter_takes_its_pending_slice(kind: Kind) {
    let (f, mut raw) = with_a_pending_count(kind, "gone").await;
    assert!(pending(&mut raw, "gone").await.is_some());
    assert!(f.counters.delete("gone").await.unwrap());
    assert_eq!(pending(&mut raw, "gone").await, None);
    assert_eq!(held(&f.counters, "gone", 1).await, 0);
}

/// A read of many counters at once (on Redis, one `pending_read.lua` call
/// per slot holding 8 of them or more, which looks their pending slices up
/// a run at a time; one command each in the other slots) answers for each
/// what a read of it alone does (one command per pending slice): busy
/// counters' pending counts included, in runs with and without one.
async fn a_read_of_many_counters_sees_every_pending_slice(kind: Kind) {
    let f = Fixture::with_settings(kind, settings()).await;
    // 600 names: on a cluster about 9 a shard (64 shards, a slot each),
    // some shards past 8 and some below.
    let names: Vec<String> = (0..600).map(|i| format!("c{i:03}")).collect();
    let all = |count: i64, at: f64, every: usize| -> Vec<Increment> {
        names
            .iter()
            .step_by(every)
            .map(|n| Increment::new(n.as_str(), count).at(at))
            .collect()
    };
    f.counters.incr_many(&all(1, T, 1)).await.unwrap();
    // Every 40th counter busy: on a standalone server a pending slice in
    // 15 of the 19 runs of 32. Every 80th folds its pending slice and
    // opens the next second's.
    for at in [T, T + 0.5] {
        f.counters.incr_many(&all(2, at, 40)).await.unwrap();
    }
    f.counters.incr_many(&all(4, T + 1.0, 80)).await.unwrap();
    f.counters.incr_many(&all(8, T + 1.2, 80)).await.unwrap();
    let many = f.counters.get_many(&names, None).await.unwrap();
    for (name, series) in names.iter().zip(&many) {
        let alone = f.counters.get_all(name).await.unwrap();
        assert_eq!(series, &alone, "{name}");
    }
    let finest = |i: usize| -> Vec<(u64, i64)> {
        many[i][0]
            .samples
            .iter()
            .map(|s| (s.start, s.count))
            .collect()
    };
    assert_eq!(finest(1), vec![(1_000_020, 1)]);
    assert_eq!(finest(40), vec![(1_000_020, 5)]);
    assert_eq!(finest(0), vec![(1_000_020, 5), (1_000_021, 12)]);
    assert_eq!(finest(560), vec![(1_000_020, 5), (1_000_021, 12)]);
    assert_eq!(many[0][1].samples[0].count, 17);
}

/// With too few precisions for a pending slice to pay, a busy counter's
/// every write goes to every precision: no pending slice.
async fn a_counter_of_few_precisions_keeps_no_pending_slice(kind: Kind) {
    let f = Fixture::with_settings(kind, few()).await;
    let mut raw = f.raw().await;
    for n in [1, 2, 4] {
        f.counters.incr_at("hits", n, T).await.unwrap();
    }
    assert_eq!(pending(&mut raw, "hits").await, None);
    assert_eq!(stored(&mut raw, "hits", 1, 1_000_020).await, Some(7));
    assert_eq!(stored(&mut raw, "hits", 60, 1_000_020).await, Some(7));
    assert_eq!(f.all_names().await, vec!["hits"]);
}

/// A pending slice written with five precisions, then read and written
/// with two: reads add it at the precisions still kept; a write that would
/// overflow once it folds in writes nothing (a count that large is sent
/// again, checked against it); one within the range lands once; the
/// cleaner folds it.
async fn a_pending_slice_left_by_more_precisions_is_read_folded_and_checked(kind: Kind) {
    let (f, mut raw) = with_a_pending_count(kind, "big").await;
    let few = f.counters_with(few()).await;
    assert_eq!(held(&few, "big", 1).await, 7);
    assert_eq!(held(&few, "big", 60).await, 7);
    // The 60 s slice: 2 stored, 5 pending.
    let err = few.incr_at("big", i64::MAX - 3, T + 1.0).await.unwrap_err();
    assert!(err.overflow().is_some(), "{err}");
    assert_eq!(stored(&mut raw, "big", 1, 1_000_021).await, None);
    assert_eq!(stored(&mut raw, "big", 60, 1_000_020).await, Some(2));
    assert_eq!(pending(&mut raw, "big").await.unwrap().2, "5");
    few.incr_at("big", i64::MAX - 8, T + 1.0).await.unwrap();
    assert_eq!(
        stored(&mut raw, "big", 1, 1_000_021).await,
        Some(i64::MAX - 8)
    );
    assert_eq!(
        stored(&mut raw, "big", 60, 1_000_020).await,
        Some(i64::MAX - 6)
    );
    assert_eq!(held(&few, "big", 60).await, i64::MAX - 1);
    let mut cleaner = few.cleaner(CleanerSettings::default()).unwrap();
    cleaner.pass_at(ts(T + 5.0)).await.unwrap();
    assert_eq!(pending(&mut raw, "big").await, None);
    assert_eq!(stored(&mut raw, "big", 1, 1_000_020).await, Some(7));
    assert_eq!(
        stored(&mut raw, "big", 60, 1_000_020).await,
        Some(i64::MAX - 1)
    );
    assert_eq!(held(&few, "big", 60).await, i64::MAX - 1);
}
