//! Idempotency records and keyed writes in the library, on every store:
//! the claim / answer protocol (in progress, mismatch, release, a lease
//! taken over, retention), keyed exact counter writes, and keyed adds to
//! two aggregating writers sharing one store (two processes), before and
//! after a flush.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Fixture, Kind};
use tally::counters::{Aggregator, AggregatorSettings, Applied, WhenFull};
use tally::idempotency::{Answer, Claim, fingerprint};
use tally::{Backend, Idempotency, Increment};

feature_suite!(keyed_writes_apply_once);

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
    assert!(matches!(
        short.claim_answered("k4", &fp, &accepted).await.unwrap(),
        Claim::Claimed(_)
    ));
    assert_eq!(short.claim("k4", &other).await.unwrap(), Claim::Mismatch);
    if kind.is_redis() {
        tokio::time::sleep(Duration::from_millis(1100)).await;
    } else {
        f.clock.advance(1.5);
    }
    assert!(matches!(
        short.claim("k4", &other).await.unwrap(),
        Claim::Claimed(_)
    ));

    // Exact counter writes with a key: applied once, whatever comes again.
    let counters = &f.counters;
    let order = [Increment::new("orders", 3), Increment::new("items", 2)];
    assert_eq!(
        counters.incr_many_once("order-1", &order).await.unwrap(),
        Applied::Written
    );
    assert_eq!(
        counters.incr_many_once("order-1", &order).await.unwrap(),
        Applied::Duplicate
    );
    let one = [Increment::new("orders", 1)];
    assert_eq!(
        counters.incr_many_once("order-2", &one).await.unwrap(),
        Applied::Written
    );
    assert_eq!(
        counters.incr_once("order-2", "orders", 1).await.unwrap(),
        Applied::Duplicate
    );
    assert!(
        counters
            .incr_once("bad key", "orders", 1)
            .await
            .unwrap_err()
            .is_bad_input()
    );
    let total = |name: &'static str| async move {
        counters
            .get(name, 86_400)
            .await
            .unwrap()
            .iter()
            .map(|s| s.count)
            .sum::<i64>()
    };
    assert_eq!(total("orders").await, 4);
    assert_eq!(total("items").await, 2);

    // Two aggregating writers on one store, as two processes: a keyed batch
    // is added once, before and after the flush, whichever gets it.
    let settings = AggregatorSettings {
        flush_interval: Duration::from_secs(3600),
        ..AggregatorSettings::default()
    };
    let a = Aggregator::start(counters.clone(), settings.clone()).unwrap();
    let b = Aggregator::start(f.second_client().await, settings.clone()).unwrap();
    let backend_b = if kind == Kind::SqliteMemory {
        f.backend.clone()
    } else {
        Backend::open(&f.config).await.unwrap()
    };
    let idem_b = Idempotency::new(
        backend_b.idempotency_store().await.unwrap(),
        clock.clone(),
        Duration::from_secs(60),
    )
    .unwrap();
    let visit = [Increment::new("visits", 1)];
    assert_eq!(
        a.add_many_once(&idem, "visit-1", &visit).await.unwrap(),
        Applied::Written
    );
    assert_eq!(
        b.add_many_once(&idem_b, "visit-1", &visit).await.unwrap(),
        Applied::Duplicate
    );
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
    let full = Aggregator::start(
        counters.clone(),
        AggregatorSettings {
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
    assert_eq!(total("visits").await, 3);
}
