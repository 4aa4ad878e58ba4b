//! The sets behaviour suite: every test runs on SQLite (memory and file),
//! on a real redis-server in both key layouts (sets use the tagged keys
//! under the default prefix on a `ria` server) and on a real Redis Cluster;
//! the expiring layout at the end. On Redis, counts are checked against the
//! server's own PFCOUNT of the same members.

use crate::common;

use common::{Fixture, Kind};
use tally::engine::kinds::Hll;
use tally::engine::{Applied, BatchSink, WriteSeq};
use tally::sets::{SetAdd, SetSlice, SetsWriter};
use tally::{Clock, Error, Sets};

/// A minute's start, two minutes before the fixture's now (T0).
const BASE: f64 = 1_336_376_280.0;
/// The hour holding BASE.
const HOUR: u64 = 1_336_374_000;

fn slice(start: f64, count: u64) -> SetSlice {
    SetSlice {
        start: start as u64,
        count,
    }
}

per_backend!(layouts: fixture =>
    small_sets_count_exactly,
    unions_over_ranges_and_sets,
    large_sets_estimate_as_pfcount,
    a_bad_addition_writes_nothing,
    sequenced_and_aggregated_writes_apply_once,
    list_and_delete,
    the_cleaner_trims_sets,
);

async fn small_sets_count_exactly(f: Fixture) {
    let sets = f.sets(&[60, 3600], 10).await;
    sets.add_many(&[
        SetAdd::new("users", ["ann", "bob", "ann"]).at(BASE + 1.0),
        SetAdd::new("users", ["bob", "cy"]).at(BASE + 2.0),
        SetAdd::new("users", ["dan"]).at(BASE + 61.0),
        SetAdd::new("other", ["ann"]).at(BASE + 1.0),
    ])
    .await
    .unwrap();
    assert_eq!(
        sets.get("users", 60).await.unwrap(),
        vec![slice(BASE, 3), slice(BASE + 60.0, 1)]
    );
    assert_eq!(
        sets.get("users", 3600).await.unwrap(),
        vec![slice(HOUR as f64, 4)]
    );
    // A member added again changes nothing; a new one counts once.
    sets.add_at("users", &["ann", "eve", "eve"], BASE + 3.0)
        .await
        .unwrap();
    let all = sets.get_all("users").await.unwrap();
    assert_eq!(
        all.iter().map(|s| s.precision).collect::<Vec<_>>(),
        vec![60, 3600]
    );
    assert_eq!(all[0].slices, vec![slice(BASE, 4), slice(BASE + 60.0, 1)]);
    assert_eq!(all[1].slices, vec![slice(HOUR as f64, 5)]);
    assert_eq!(sets.get("other", 60).await.unwrap(), vec![slice(BASE, 1)]);
    assert!(sets.get("nobody", 60).await.unwrap().is_empty());
    assert!(sets.get("users", 7).await.unwrap_err().is_bad_input());
}

async fn unions_over_ranges_and_sets(f: Fixture) {
    let sets = f.sets(&[60, 3600], 10).await;
    let members = |r: std::ops::RangeInclusive<u32>| r.map(|i| format!("m{i}")).collect::<Vec<_>>();
    sets.add_many(&[
        SetAdd::new("a", members(1..=5)).at(BASE),
        SetAdd::new("a", members(3..=9)).at(BASE + 60.0),
        SetAdd::new("b", members(8..=12)).at(BASE + 60.0),
    ])
    .await
    .unwrap();
    let (from, to) = (BASE as u64, BASE as u64 + 119);
    let a = sets.count(&["a"], from, to).await.unwrap();
    assert_eq!((a.precision, a.count), (60, 9));
    assert_eq!((a.from, a.to), (from, to));
    // The range is widened to whole slices: from the slice of `from`.
    assert_eq!(sets.count(&["a"], from + 30, to).await.unwrap().count, 9);
    assert_eq!(sets.count(&["a"], from + 60, to).await.unwrap().count, 7);
    assert_eq!(sets.count(&["a"], from, from + 59).await.unwrap().count, 5);
    assert_eq!(sets.count(&["a", "b"], from, to).await.unwrap().count, 12);
    assert_eq!(sets.count(&["b", "none"], from, to).await.unwrap().count, 5);
    // Three hours back is beyond 10 minutes: read at the hour.
    let old = sets.count(&["a", "b"], HOUR - 3 * 3600, to).await.unwrap();
    assert_eq!((old.precision, old.count), (3600, 12));
    assert!(matches!(
        sets.count(&["a"], to, from).await,
        Err(Error::InvalidTime(_))
    ));
    assert!(sets.count(&[], from, to).await.unwrap_err().is_bad_input());
    assert!(
        sets.count(&["bad\nname"], from, to)
            .await
            .unwrap_err()
            .is_bad_input()
    );
}

/// 100,000 members: the count is within 2 % of the truth, the same as an
/// in-process HyperLogLog of the members, and on Redis the same as PFCOUNT
/// of the same members and of the stored slice itself (Redis's own
/// HyperLogLog string).
async fn large_sets_estimate_as_pfcount(f: Fixture) {
    let sets = f.sets(&[60, 3600], 10).await;
    let members: Vec<String> = (0..100_000).map(|i| format!("member:{i}")).collect();
    let adds: Vec<SetAdd> = members
        .chunks(10_000)
        .enumerate()
        .map(|(i, c)| SetAdd::new("big", c.iter().cloned()).at(BASE + i as f64))
        .collect();
    sets.add_many(&adds).await.unwrap();
    // Again, in small additions: nothing changes.
    sets.add_many(&[SetAdd::new("big", members[..200].iter().cloned()).at(BASE + 30.0)])
        .await
        .unwrap();
    let mut hll = Hll::default();
    for m in &members {
        hll.add(m.as_bytes());
    }
    let want = hll.count();
    let got = sets.get("big", 60).await.unwrap();
    assert_eq!(got, vec![slice(BASE, want)]);
    let error = (want as f64 - 100_000.0).abs() / 100_000.0;
    assert!(error < 0.02, "{want} is {:.2} % off", error * 100.0);
    // A small set merged with the big one in a range read.
    sets.add_at("small", &["member:1", "new:1", "new:2"], BASE + 61.0)
        .await
        .unwrap();
    hll.add(b"new:1");
    hll.add(b"new:2");
    let union = sets
        .count(&["big", "small"], BASE as u64, BASE as u64 + 119)
        .await
        .unwrap();
    assert_eq!(union.count, hll.count());
    if f.kind.is_redis() {
        let mut raw = f.raw_any().await;
        for c in members.chunks(10_000) {
            raw.query::<i64>(redis::cmd("PFADD").arg("{pf}:big").arg(c))
                .await;
        }
        let pfcount: u64 = raw.query(redis::cmd("PFCOUNT").arg("{pf}:big")).await;
        assert_eq!(pfcount, want);
        // The stored slice is Redis's own HyperLogLog.
        let keys = f.kind.layout();
        let keys = keys.space_keys(sets.space());
        let (key, field) = (keys.hash(60, "big"), keys.field(60, BASE as u64).unwrap());
        let stored: Vec<u8> = raw.query(redis::cmd("HGET").arg(&key).arg(field)).await;
        assert!(stored.starts_with(b"HYLL"), "{key}");
        raw.query::<()>(redis::cmd("SET").arg("{pf}:stored").arg(stored))
            .await;
        let stored_count: u64 = raw.query(redis::cmd("PFCOUNT").arg("{pf}:stored")).await;
        assert_eq!(stored_count, want);
    }
}

async fn a_bad_addition_writes_nothing(f: Fixture) {
    let sets = f.sets(&[60], 10).await;
    let long = "x".repeat(256);
    let none: [&str; 0] = [];
    let many: Vec<String> = (0..10_001).map(|i| i.to_string()).collect();
    let bad = [
        (SetAdd::new("b", [""]), "must not be empty"),
        (
            SetAdd::new("b", [long.as_str()]),
            "at most 255 bytes, not 256",
        ),
        (SetAdd::new("b", none), "1 to 10000 members, not 0"),
        (SetAdd::new("b", many.iter().cloned()), "not 10001"),
        (SetAdd::new("bad\nname", ["m"]), "control characters"),
        (SetAdd::new("b", ["m"]).at(f64::NAN), ""),
    ];
    for (add, why) in bad {
        let e = sets
            .add_many(&[SetAdd::new("a", ["ok"]).at(BASE), add])
            .await
            .unwrap_err();
        assert!(e.is_bad_input(), "{e}");
        assert!(e.to_string().contains(why), "{e}");
    }
    assert!(sets.add_many(&[]).await.unwrap_err().is_bad_input());
    assert!(sets.get("a", 60).await.unwrap().is_empty());
    assert!(sets.search("", None, 10).await.unwrap().names.is_empty());
    // A slice that is not a HyperLogLog refuses the whole batch (standalone
    // Redis: one call, all or nothing), and the merge's scratch keys go.
    if f.kind.is_redis() && !f.kind.is_cluster() {
        sets.add_at("a", &["ok"], BASE).await.unwrap();
        let mut raw = f.raw().await;
        let keys = f.kind.layout();
        let keys = keys.space_keys(sets.space());
        let (key, field) = (keys.hash(60, "a"), keys.field(60, BASE as u64).unwrap());
        redis::cmd("HSET")
            .arg(&key)
            .arg(field)
            .arg("not a set")
            .query_async::<()>(&mut raw)
            .await
            .unwrap();
        let e = sets
            .add_many(&[
                SetAdd::new("c", ["m"]).at(BASE),
                SetAdd::new("a", ["m"]).at(BASE),
            ])
            .await
            .unwrap_err();
        assert!(e.to_string().contains("not a HyperLogLog"), "{e}");
        assert!(sets.get("c", 60).await.unwrap().is_empty());
        let scratch: Vec<String> = redis::cmd("KEYS")
            .arg("*scratch*")
            .query_async(&mut raw)
            .await
            .unwrap();
        assert!(scratch.is_empty(), "{scratch:?}");
        let e = sets.get("a", 60).await.unwrap_err();
        assert!(matches!(e, Error::Corrupt(_)), "{e:?}");
    }
}

/// A retried batch (the same writer, lane and number) is applied once, and
/// the aggregating writer merges in process and writes once.
async fn sequenced_and_aggregated_writes_apply_once(f: Fixture) {
    let sets = f.sets(&[60], 10).await;
    let mut batch = sets
        .prepare(&[
            SetAdd::new("s", ["a", "b"]).at(BASE),
            SetAdd::new("t", ["a"]).at(BASE),
        ])
        .unwrap();
    let seq = WriteSeq {
        writer: 0xbeef,
        lane: 0,
        seq: 1,
    };
    batch.seq = Some(seq);
    let store = sets.store().clone();
    assert_eq!(store.apply_batch(&batch).await.unwrap(), Applied::Written);
    let mut replay = sets.prepare(&[SetAdd::new("s", ["c"]).at(BASE)]).unwrap();
    replay.seq = Some(seq);
    assert_eq!(
        store.apply_batch(&replay).await.unwrap(),
        Applied::Duplicate
    );
    assert_eq!(sets.get("s", 60).await.unwrap(), vec![slice(BASE, 2)]);
    replay.seq = Some(WriteSeq { seq: 2, ..seq });
    assert_eq!(store.apply_batch(&replay).await.unwrap(), Applied::Written);
    assert_eq!(sets.get("s", 60).await.unwrap(), vec![slice(BASE, 3)]);
    // Keyed writes: the same idempotency key is applied once.
    let add = [SetAdd::new("k", ["x"]).at(BASE)];
    assert_eq!(
        sets.add_many_once("key-1", &add).await.unwrap(),
        Applied::Written
    );
    let again = [SetAdd::new("k", ["y"]).at(BASE)];
    assert_eq!(
        sets.add_many_once("key-1", &again).await.unwrap(),
        Applied::Duplicate
    );
    assert_eq!(sets.get("k", 60).await.unwrap(), vec![slice(BASE, 1)]);

    let writer = SetsWriter::start(sets.clone(), common::hourly_flush()).unwrap();
    for i in 0..600u32 {
        writer
            .try_add(&SetAdd::new("w", [format!("u{}", i % 300)]).at(BASE + 1.0))
            .unwrap();
    }
    let e = writer.try_add(&SetAdd::new("w", [""])).unwrap_err();
    assert!(e.is_bad_input(), "{e}");
    writer.flush().await.unwrap();
    writer
        .try_add(&SetAdd::new("w", ["u0", "late"]).at(BASE + 2.0))
        .unwrap();
    writer.flush().await.unwrap();
    let mut hll = Hll::default();
    for i in 0..300 {
        hll.add(format!("u{i}").as_bytes());
    }
    hll.add(b"late");
    assert_eq!(
        sets.get("w", 60).await.unwrap(),
        vec![slice(BASE, hll.count())]
    );
    assert_eq!(writer.stats().written, 601);
    writer.shutdown().await;
}

async fn list_and_delete(f: Fixture) {
    let sets = f.sets(&[60, 3600], 10).await;
    sets.add_many(&common::LISTED.map(|n| SetAdd::new(n, ["m"]).at(BASE)))
        .await
        .unwrap();
    common::pages_then_deletes(&sets).await;
    assert_eq!(
        sets.search("", None, 10).await.unwrap().names,
        vec!["q:a", "q:c", "r"]
    );
    assert!(sets.delete("").await.unwrap_err().is_bad_input());
}

async fn the_cleaner_trims_sets(f: Fixture) {
    let sets = f.sets(&[1, 60], 10).await;
    sets.add("s", &["a", "b"]).await.unwrap();
    let mut cleaner = f.cleaner_of(&sets);
    f.clock.advance(700.0);
    let report = cleaner.pass().await.unwrap();
    assert_eq!(report.samples_removed, 2, "{report:?}");
    assert_eq!(report.counters_removed, 1, "{report:?}");
    assert!(sets.search("", None, 10).await.unwrap().names.is_empty());
}

per_backend!(expiring: the_expiring_layout_keeps_sets);

/// The expiring layout: slices in chunks with an expiry, merged by the
/// same Lua, read and deleted.
async fn the_expiring_layout_keeps_sets(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let sets: Sets = f.sets(&[1, 60], 120).await;
    let now = f.clock.now().as_secs_f64();
    let many: Vec<String> = (0..1000).map(|i| format!("u{i}")).collect();
    sets.add_many(&[
        SetAdd::new("e", ["a", "b"]).at(now),
        SetAdd::new("e", ["b", "c"]).at(now + 1.0),
    ])
    .await
    .unwrap();
    f.clock.advance(60.0);
    sets.add("e", &many).await.unwrap();
    let mut hll = Hll::default();
    for m in &many {
        hll.add(m.as_bytes());
    }
    assert_eq!(
        sets.get("e", 60).await.unwrap(),
        vec![slice(now, 3), slice(now + 60.0, hll.count())]
    );
    assert_eq!(sets.get("e", 1).await.unwrap().len(), 3);
    let end = now as u64 + 119;
    assert_eq!(sets.count(&["e"], now as u64, end).await.unwrap().count, {
        for m in ["a", "b", "c"] {
            hll.add(m.as_bytes());
        }
        hll.count()
    });
    assert_eq!(sets.search("", None, 10).await.unwrap().names, vec!["e"]);
    assert!(sets.delete("e").await.unwrap());
    assert!(sets.get("e", 60).await.unwrap().is_empty());
}
