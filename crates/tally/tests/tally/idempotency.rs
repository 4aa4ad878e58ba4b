//! Idempotency records and keyed writes in the library, on every store:
//! the claim / answer protocol (in progress, mismatch, release, a lease
//! taken over, retention), keyed exact counter writes, and keyed adds to
//! two aggregating writers sharing one store (two processes), before and
//! after a flush; keyed gauge, time-series and daily writes applied once,
//! through a second client too, and each part of a batch cut short.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{Fixture, Kind, ONCE, tries};
use tally::TsQuery;
use tally::counters::{Applied, CounterWriter, WhenFull, WriterSettings};
use tally::idempotency::{Answer, Claim, fingerprint};
use tally::tsdb::TsIncrement;
use tally::tsdb::precision::vshard_of;
use tally::{Clock, GaugeOp, Idempotency, Increment, View};

per_backend!(features:keyed_writes_apply_once, keyed_kinds_apply_once);
// Keyed writes carry their write ids into the compact layout as into the
// default one.
per_backend!(
    redis_compact_layout(Kind::RedisCompact),
    redis_cluster_compact(Kind::RedisClusterCompact):
    keyed_writes_apply_once,
    keyed_kinds_apply_once
);

/// Asserts that `first` is written and `again` (the same key, from this
/// client or another) is answered as a duplicate, awaited in that order.
async fn written_then_duplicate(
    first: impl Future<Output = tally::Result<Applied>>,
    again: impl Future<Output = tally::Result<Applied>>,
) {
    assert_eq!(first.await.unwrap(), Applied::Written);
    assert_eq!(again.await.unwrap(), Applied::Duplicate);
}

async fn keyed_writes_apply_once(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let clock = Arc::new(f.clock.clone());
    let store = f.backend.idempotency_store().await.unwrap();
    let idem = Idempotency::new(store.clone(), clock.clone(), Duration::from_secs(60))
        .unwrap()
        .with_lease(Duration::from_secs(5))
        .unwrap();
    let (fp, other) = (fingerprint(&[b"one"]), fingerprint(&[b"two"]));

    // A new key is claimed; a copy meanwhile is in progress, another
    // request with the key is refused.
    let Claim::Claimed(first) = idem.claim("k1", &fp).await.unwrap() else {
        panic!("a new key is claimed")
    };
    match idem.claim("k1", &fp).await.unwrap() {
        Claim::InProgress { retry_after_ms } => {
            assert!((1..=5000).contains(&retry_after_ms), "{retry_after_ms}")
        }
        other => panic!("expected in progress, got {other:?}"),
    }
    assert_eq!(idem.claim("k1", &other).await.unwrap(), Claim::Mismatch);
    // The answer, binary body included, comes back byte for byte.
    let answer = Answer {
        status: 201,
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("ratelimit-limit".into(), "10".into()),
        ],
        body: b"{\"ok\":1}\xff\x00".to_vec(),
    };
    assert!(idem.complete(&first, &answer).await.unwrap());
    assert_eq!(
        idem.claim("k1", &fp).await.unwrap(),
        Claim::Done(answer.clone())
    );
    assert_eq!(idem.claim("k1", &other).await.unwrap(), Claim::Mismatch);

    // A released claim lets a retry run again.
    let Claim::Claimed(t) = idem.claim("k2", &fp).await.unwrap() else {
        panic!("claimed")
    };
    assert!(idem.release(&t).await.unwrap());
    let Claim::Claimed(stale) = idem.claim("k2", &fp).await.unwrap() else {
        panic!("claimed again after release")
    };
    // A claim whose lease ended (its process died) is taken over; the stale
    // holder can neither complete nor release it any more.
    f.clock.advance(6.0);
    let Claim::Claimed(fresh) = idem.claim("k2", &fp).await.unwrap() else {
        panic!("taken over after the lease")
    };
    assert!(!idem.complete(&stale, &answer).await.unwrap());
    assert!(!idem.release(&stale).await.unwrap());
    assert!(idem.complete(&fresh, &answer).await.unwrap());
    assert_eq!(
        idem.claim("k2", &fp).await.unwrap(),
        Claim::Done(answer.clone())
    );

    // A claim made with its answer is done at once.
    let accepted = Answer::json(202, &serde_json::json!({ "accepted": 1 }));
    assert!(matches!(
        idem.claim_answered("k3", &fp, &accepted).await.unwrap(),
        Claim::Claimed(_)
    ));
    assert_eq!(
        idem.claim("k3", &fp).await.unwrap(),
        Claim::Done(accepted.clone())
    );

    // Bad keys are refused before the store is asked.
    for bad in ["", "a b", "é", &"k".repeat(256)] {
        assert!(
            idem.claim(bad, &fp).await.unwrap_err().is_bad_input(),
            "{bad:?}"
        );
    }

    // Records go after the retention: on SQLite by the injected clock, on
    // Redis by the server's (PX).
    let short = Idempotency::new(store.clone(), clock.clone(), Duration::from_secs(1)).unwrap();
    // Kept while the retention runs: checked within 900 ms of the record,
    // since Redis ends it by its own clock.
    let (k4, claimed, kept) = tally_testkit::in_time(Duration::from_millis(900), |run| {
        let (short, fp, other, accepted) = (&short, &fp, &other, &accepted);
        async move {
            let k4 = format!("k4-{run}");
            let claimed = short.claim_answered(&k4, fp, accepted).await.unwrap();
            let kept = short.claim(&k4, other).await.unwrap();
            (k4, claimed, kept)
        }
    })
    .await;
    assert!(matches!(claimed, Claim::Claimed(_)));
    assert_eq!(kept, Claim::Mismatch);
    if kind.is_redis() {
        tokio::time::sleep(Duration::from_millis(1100)).await;
    } else {
        f.clock.advance(1.5);
    }
    assert!(matches!(
        short.claim(&k4, &other).await.unwrap(),
        Claim::Claimed(_)
    ));

    // Exact counter writes with a key: applied once, whatever comes again.
    let counters = &f.counters;
    let order = [Increment::new("orders", 3), Increment::new("items", 2)];
    tries(&ONCE, || counters.incr_many_once("order-1", &order)).await;
    let one = [Increment::new("orders", 1)];
    written_then_duplicate(
        counters.incr_many_once("order-2", &one),
        counters.incr_once("order-2", "orders", 1),
    )
    .await;
    assert!(
        counters
            .incr_once("bad key", "orders", 1)
            .await
            .unwrap_err()
            .is_bad_input()
    );
    assert_eq!(common::held(counters, "orders", 86_400).await, 4);
    assert_eq!(common::held(counters, "items", 86_400).await, 2);

    // Two aggregating writers on one store, as two processes: a keyed batch
    // is added once, before and after the flush, whichever gets it.
    let settings = common::hourly_flush();
    let a = CounterWriter::start(counters.clone(), settings.clone()).unwrap();
    let b = CounterWriter::start(f.second_client().await, settings.clone()).unwrap();
    let backend_b = f.second_backend().await;
    let idem_b = Idempotency::new(
        backend_b.idempotency_store().await.unwrap(),
        clock.clone(),
        Duration::from_secs(60),
    )
    .unwrap();
    let visit = [Increment::new("visits", 1)];
    written_then_duplicate(
        a.add_many_once(&idem, "visit-1", &visit),
        b.add_many_once(&idem_b, "visit-1", &visit),
    )
    .await;
    a.flush().await.unwrap();
    assert_eq!(
        a.add_many_once(&idem, "visit-1", &visit).await.unwrap(),
        Applied::Duplicate
    );
    assert_eq!(
        b.add_many_once(&idem_b, "visit-1", &visit).await.unwrap(),
        Applied::Duplicate
    );
    // Another batch under the key is refused and adds nothing.
    let two = [Increment::new("visits", 2)];
    assert!(
        b.add_many_once(&idem_b, "visit-1", &two)
            .await
            .unwrap_err()
            .is_bad_input()
    );
    // A batch refused as bad input uses no key; one the writer refuses
    // after the claim (full) gives its key up: both can be sent again.
    let bad = [Increment::new("visits", 1), Increment::new("", 1)];
    assert!(
        a.add_many_once(&idem, "visit-2", &bad)
            .await
            .unwrap_err()
            .is_bad_input()
    );
    let full = CounterWriter::start(
        counters.clone(),
        WriterSettings {
            max_entries: 1,
            flush_entries: 1,
            when_full: WhenFull::Error,
            ..settings
        },
    )
    .unwrap();
    let two_entries = [
        Increment::new("visits", 1).at(1.0e9),
        Increment::new("visits", 1).at(1.1e9),
    ];
    assert!(matches!(
        full.add_many_once(&idem, "visit-3", &two_entries).await,
        Err(tally::Error::Overloaded(_))
    ));
    assert_eq!(
        b.add_many_once(&idem_b, "visit-2", &two).await.unwrap(),
        Applied::Written
    );
    assert!(matches!(
        idem.claim("visit-3", &fp).await.unwrap(),
        Claim::Claimed(_)
    ));
    full.shutdown().await;
    a.shutdown().await;
    b.shutdown().await;
    assert_eq!(common::held(counters, "visits", 86_400).await, 3);
}

/// Issue 11: the writes outside the counters' path (gauges, time series,
/// daily statistics) carry their key's mark: applied once whatever comes
/// again, from this client or another; a batch whose first try was cut
/// short (some parts written, as a crash between a Redis node's calls
/// leaves it) is completed by its repeat, each part counted once.
async fn keyed_kinds_apply_once(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let now = f.clock.now().whole_secs() as f64;

    // Gauges: an adjustment applied twice would show.
    let gauges = f.gauges(&[60], 10, false).await;
    let other = f.gauges(&[60], 10, true).await;
    let ops = [GaugeOp::set("queue", 5.0), GaugeOp::adjust("queue", 2.0)];
    tries(&ONCE, || gauges.apply_many_once("g-1", &ops)).await;
    let adjust = [GaugeOp::adjust("queue", 1.0)];
    written_then_duplicate(
        other.apply_many_once("g-2", &adjust),
        gauges.apply_many_once("g-2", &adjust),
    )
    .await;
    assert_eq!(gauges.current("queue").await.unwrap(), Some(8.0));
    assert!(
        gauges
            .apply_many_once("bad key", &adjust)
            .await
            .unwrap_err()
            .is_bad_input()
    );

    // Time series: 20 keys over several virtual shards (cluster nodes).
    let ts = f.tsdb(tally::TsdbSettings::default()).await;
    let keys: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    let incs: Vec<TsIncrement> = keys
        .iter()
        .map(|k| TsIncrement::new("m", k.as_str()).count(3))
        .collect();
    tries(&ONCE, || ts.incr_multi_once("t-1", &incs)).await;
    let items = [("a".to_owned(), 2), ("b".to_owned(), 1)];
    tries(&ONCE, || {
        ts.record_frequency_once("t-2", "m", "k0", &items, None)
    })
    .await;
    let top = ts
        .get_top(&TsQuery::new("m", ["k0"], now - 60.0, now), 5)
        .await
        .unwrap();
    let top: Vec<(String, i64)> = top.items.into_iter().map(|i| (i.item, i.count)).collect();
    assert_eq!(top, [("a".to_owned(), 2), ("b".to_owned(), 1)]);
    if kind.is_redis() {
        // The first try wrote one virtual shard's call only (a Lua call per
        // (model, virtual shard)): the repeat writes the others, each once.
        let more = |k: &String| TsIncrement::new("m", k.as_str()).count(10);
        let all: Vec<TsIncrement> = keys.iter().map(more).collect();
        let shard = vshard_of("k0");
        let part: Vec<TsIncrement> = keys
            .iter()
            .filter(|k| vshard_of(k) == shard)
            .map(more)
            .collect();
        assert!(part.len() < all.len());
        assert_eq!(
            ts.incr_multi_once("t-3", &part).await.unwrap(),
            Applied::Written
        );
        tries(&ONCE, || ts.incr_multi_once("t-3", &all)).await;
    }
    let want = if kind.is_redis() { 13 } else { 3 };
    let sums = ts
        .get_sums(&TsQuery::new("m", &keys, now - 60.0, now))
        .await
        .unwrap();
    for t in &sums.totals {
        assert_eq!(t.total, want, "{t:?}");
    }

    // Daily statistics: the repeat answers the counts as they are.
    let daily = f.daily(tally::DailySettings::default()).await;
    let views: Vec<View> = (0..12)
        .map(|i| View {
            entity: format!("ad-{i}"),
            count: 2,
            at: None,
        })
        .collect();
    let (applied, first) = daily.incr_many_once("d-1", &views).await.unwrap();
    assert_eq!(applied, Applied::Written);
    assert!(
        first.iter().all(|c| (c.day_count, c.total) == (2, 2)),
        "{first:?}"
    );
    let (applied, again) = daily.incr_many_once("d-1", &views).await.unwrap();
    assert_eq!((applied, &again), (Applied::Duplicate, &first));
    if kind.is_redis() {
        // Each entity's call carries the mark: a cut-short batch completes.
        let (applied, _) = daily.incr_many_once("d-2", &views[..5]).await.unwrap();
        assert_eq!(applied, Applied::Written);
        let (applied, counted) = daily.incr_many_once("d-2", &views).await.unwrap();
        assert_eq!(applied, Applied::Written);
        assert!(counted.iter().all(|c| c.total == 4), "{counted:?}");
    }
    assert!(
        daily
            .incr_many_once("bad key", &views)
            .await
            .unwrap_err()
            .is_bad_input()
    );
    let want = if kind.is_redis() { 4 } else { 2 };
    for i in 0..12 {
        assert_eq!(daily.total(&format!("ad-{i}")).await.unwrap(), want);
    }
}
