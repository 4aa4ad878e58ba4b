//! Keyed (`Idempotency-Key`) writes over HTTP.

use super::*;

per_backend!(server:
    idempotent_writes_over_http,
    keyed_writes_close_the_crash_window,
);

/// Sends a keyed write twice and then with another body under the same
/// key: the repeat gets the first answer byte for byte (marked replayed),
/// the other body 422. Returns the first answer.
async fn twice_then_other(s: &TestServer, uri: &str, body: Value, other: Value) -> Answer {
    let key = format!("key:{uri}");
    let first = keyed(s, uri, &body.to_string(), &key).await;
    assert!(
        first.status.is_success(),
        "{uri}: {} {}",
        first.status,
        first.text
    );
    assert!(!first.headers.contains_key("idempotent-replayed"));
    let again = keyed(s, uri, &body.to_string(), &key).await;
    assert_eq!(
        (again.status, &again.text),
        (first.status, &first.text),
        "{uri}"
    );
    assert_eq!(again.headers["content-type"], first.headers["content-type"]);
    assert_eq!(again.headers["idempotent-replayed"], "true", "{uri}");
    keyed(s, uri, &other.to_string(), &key)
        .await
        .error(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused");
    first
}

/// Every write route takes an `Idempotency-Key` (issue 11): a repeat is
/// applied once and answered with the first answer; another request under
/// the key is 422 and changes nothing; in both write modes.
pub(super) async fn idempotent_writes_over_http(kind: Kind) {
    for exact in [false, true] {
        let s = server(kind, ServerSettings::default(), exact).await;
        let now = s.f.clock.now().whole_secs() as f64;
        let total = |body: Value, precision: &str| -> i64 {
            body["precisions"][precision]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p[1].as_i64().unwrap())
                .sum()
        };

        // Counters, one and a batch: counted once, before and after a flush.
        let one = twice_then_other(
            &s,
            "/v1/counters/c/incr",
            json!({ "count": 5, "at": now }),
            json!({ "count": 6, "at": now }),
        )
        .await;
        let (status, answer) = if exact {
            (StatusCode::OK, json!({ "written": 1 }))
        } else {
            (StatusCode::ACCEPTED, json!({ "accepted": 1 }))
        };
        assert_eq!((one.status, one.json()), (status, answer));
        let batch =
            json!({ "increments": [{ "name": "c", "count": 2, "at": now }, { "name": "d" }] });
        twice_then_other(
            &s,
            "/v1/incr",
            batch.clone(),
            json!({ "increments": [{ "name": "d" }] }),
        )
        .await;
        s.flush().await;
        let again = keyed(&s, "/v1/incr", &batch.to_string(), "key:/v1/incr").await;
        assert_eq!(
            again.headers["idempotent-replayed"], "true",
            "after the flush"
        );
        s.flush().await;
        assert_eq!(total(s.get("/v1/counters/c").await.json(), "86400"), 7);
        assert_eq!(total(s.get("/v1/counters/d").await.json(), "86400"), 1);

        // Statistics, one and a batch: recorded once, before and after a
        // flush (aggregated: claimed with the 202, never handed over twice).
        twice_then_other(
            &s,
            "/v1/stats/lat/record",
            json!({ "value": 5.0, "at": now }),
            json!({ "value": 6.0, "at": now }),
        )
        .await;
        let obs = json!({ "observations": [{ "name": "lat", "value": 7.0, "at": now }] });
        twice_then_other(
            &s,
            "/v1/record",
            obs.clone(),
            json!({ "observations": [{ "name": "lat", "value": 1.0 }] }),
        )
        .await;
        s.flush().await;
        let again = keyed(&s, "/v1/record", &obs.to_string(), "key:/v1/record").await;
        assert_eq!(again.headers["idempotent-replayed"], "true");
        s.flush().await;
        let lat = s.get("/v1/stats/lat?precision=86400").await.json();
        let slices = lat["precisions"]["86400"].as_array().unwrap();
        let count: u64 = slices.iter().map(|x| x["count"].as_u64().unwrap()).sum();
        let sum: f64 = slices.iter().map(|x| x["sum"].as_f64().unwrap()).sum();
        assert_eq!((count, sum), (2, 12.0), "{lat}");

        // Time series and daily statistics.
        twice_then_other(
            &s,
            "/v1/ts/incr",
            json!({ "increments": [{ "model": "m", "key": "k", "count": 3 }] }),
            json!({ "increments": [{ "model": "m", "key": "k", "count": 4 }] }),
        )
        .await;
        let ts_total =
            || async { s.get("/v1/ts/m/sums?keys=k").await.json()["totals"][0]["total"].clone() };
        assert_eq!(ts_total().await, 3);
        twice_then_other(
            &s,
            "/v1/daily/e/incr",
            json!({ "count": 2 }),
            json!({ "count": 9 }),
        )
        .await;
        let daily = s.get("/v1/daily/e?days=1").await.json();
        assert_eq!(daily["total"], 2, "{daily}");

        // A rate-limit check is taken once: the repeat gives the same
        // decision and headers without spending the limit again.
        let check = twice_then_other(
            &s,
            "/v1/limits/u/check",
            json!({ "policy": "api" }),
            json!({ "policy": "api", "cost": 2 }),
        )
        .await;
        assert_eq!(check.headers["ratelimit-remaining"], "1");
        let plain = s
            .post("/v1/limits/u/check", json!({ "policy": "api" }))
            .await;
        assert_eq!(plain.headers["ratelimit-remaining"], "0", "{}", plain.text);

        // A lock acquired once: the repeat hands back the same lease.
        let lease = twice_then_other(
            &s,
            "/v1/locks/l/acquire",
            json!({ "ttl_ms": 10000 }),
            json!({ "ttl_ms": 20000 }),
        )
        .await
        .json();
        let token = lease["token"].as_str().unwrap();
        twice_then_other(
            &s,
            "/v1/locks/l/release",
            json!({ "token": token }),
            json!({ "token": "another" }),
        )
        .await;

        // A keyed DELETE: the repeat is the first answer, not a 404.
        let del = |key: &'static str| {
            let req = Request::builder()
                .method(Method::DELETE)
                .uri("/v1/counters/d")
                .header("idempotency-key", key)
                .body(Body::empty())
                .unwrap();
            s.send(req)
        };
        assert_eq!(del("del-1").await.json(), json!({ "deleted": true }));
        let replayed = del("del-1").await;
        assert_eq!(
            (replayed.status, replayed.json()),
            (StatusCode::OK, json!({ "deleted": true }))
        );
        del("del-2").await.error(StatusCode::NOT_FOUND, "not_found");

        // A copy of a running request: 409 with Retry-After, nothing done.
        let idem = s.state.services().idempotency.clone().unwrap();
        let body = json!({ "increments": [{ "model": "m", "key": "k" }] }).to_string();
        let fp = tally::idempotency::fingerprint(&[b"POST", b"/v1/ts/incr", body.as_bytes()]);
        assert!(matches!(
            idem.claim("running", &fp).await.unwrap(),
            tally::idempotency::Claim::Claimed(_)
        ));
        let busy = keyed(&s, "/v1/ts/incr", &body, "running").await;
        busy.error(StatusCode::CONFLICT, "idempotency_key_in_progress");
        let retry: u64 = busy.headers["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(retry >= 1, "{retry}");
        assert_eq!(ts_total().await, 3);

        // Bad keys are 400 naming the header, and write nothing; reads
        // ignore the header.
        for bad in ["a b", "", &"k".repeat(256)] {
            keyed(&s, "/v1/counters/c/incr", "{}", bad)
                .await
                .error(StatusCode::BAD_REQUEST, "invalid_idempotency_key");
        }
        let msg = keyed(&s, "/v1/counters/c/incr", "{}", "a b").await.json();
        assert!(
            msg["error"]["message"]
                .as_str()
                .unwrap()
                .contains("Idempotency-Key")
        );
        let read = s
            .call(
                Method::GET,
                "/v1/counters/c",
                None,
                &[("idempotency-key", "a b")],
            )
            .await;
        assert_eq!(read.status, StatusCode::OK);
        s.flush().await;
        assert_eq!(total(s.get("/v1/counters/c").await.json(), "86400"), 7);
    }
}

/// Sends the retry of a write that a crashed server applied under `key`
/// and asserts that it succeeds; returns the answer.
async fn retry(s: &TestServer, uri: &str, body: Value, key: &str) -> Answer {
    let a = keyed(s, uri, &body.to_string(), key).await;
    assert_eq!(a.status, StatusCode::OK, "{uri}: {}", a.text);
    a
}

/// Issue 11 part 2: a server that applied a keyed write and died before
/// recording its answer leaves no record; the retry runs the request again
/// and must not apply it twice. Each write is first made through the
/// library with the key (what the crashed server did), then sent keyed
/// over HTTP: every total counts it once.
pub(super) async fn keyed_writes_close_the_crash_window(kind: Kind) {
    let mut s = server(kind, ServerSettings::default(), true).await;
    let (_dir, flusher) = with_buffers(&mut s).await;
    let sv = s.state.services().clone();
    let now = s.f.clock.now().whole_secs() as f64;

    // Counters and statistics (exact mode).
    sv.counters
        .incr_many_once("c-1", &[tally::Increment::new("crash:c", 5).at(now)])
        .await
        .unwrap();
    let a = retry(
        &s,
        "/v1/counters/crash:c/incr",
        json!({ "count": 5, "at": now }),
        "c-1",
    )
    .await;
    assert_eq!(a.json(), json!({ "written": 1 }));
    let c = s.get("/v1/counters/crash:c").await.json();
    assert_eq!(day_total(&c), 5, "{c}");

    // Gauges: an adjustment applied twice would read 4.
    let gauges = sv.gauges.as_ref().unwrap();
    gauges
        .apply_many_once("g-1", &[GaugeOp::adjust("crash:g", 2.0).at(now)])
        .await
        .unwrap();
    retry(
        &s,
        "/v1/gauges/crash:g",
        json!({ "delta": 2, "at": now }),
        "g-1",
    )
    .await;
    assert_eq!(s.get("/v1/gauges/crash:g").await.json()["current"], 2.0);

    // Time series: a count and item counts.
    let ts = sv.tsdb.as_ref().unwrap();
    let inc = TsIncrement::new("crash", "k").count(3);
    ts.incr_multi_once("t-1", std::slice::from_ref(&inc))
        .await
        .unwrap();
    let body = json!({ "increments": [{ "model": "crash", "key": "k", "count": 3 }] });
    retry(&s, "/v1/ts/incr", body, "t-1").await;
    let sums = s.get("/v1/ts/crash/sums?keys=k").await.json();
    assert_eq!(sums["totals"][0]["total"], 3, "{sums}");
    let items = [("x".to_owned(), 2)];
    ts.record_frequency_once("t-2", "crash", "k", &items, None)
        .await
        .unwrap();
    let body = json!({ "key": "k", "items": [["x", 2]] });
    retry(&s, "/v1/ts/crash/frequent", body, "t-2").await;
    let top = s.get("/v1/ts/crash/top?key=k&n=5").await.json();
    assert_eq!(top["items"][0]["count"], 2, "{top}");

    // Daily statistics: the retry answers the counts as they are.
    let daily = sv.daily.as_ref().unwrap();
    let view = tally::View {
        entity: "crash-e".into(),
        count: 2,
        at: None,
    };
    daily
        .incr_many_once("d-1", std::slice::from_ref(&view))
        .await
        .unwrap();
    let a = retry(&s, "/v1/daily/crash-e/incr", json!({ "count": 2 }), "d-1").await;
    assert_eq!(
        (a.json()["day_count"].clone(), a.json()["total"].clone()),
        (json!(2), json!(2))
    );
    assert_eq!(s.get("/v1/daily/crash-e?days=1").await.json()["total"], 2);

    // Buffers: pending or flushed, the change is buffered once.
    let (buffers, _) = sv.buffers.as_ref().unwrap();
    let change = tally::buffers::Update::new("groups")
        .key("id", 7)
        .add("times_seen", 4);
    buffers.incr_once("b-1", &change).await.unwrap();
    flusher.drain().await.unwrap();
    let body = json!({ "table": "groups", "key": { "id": "7" }, "add": { "times_seen": 4 } });
    retry(&s, "/v1/buffers/incr", body, "b-1").await;
    flusher.drain().await.unwrap();
    let row = s.get("/v1/buffers/groups/row?id=7").await.json();
    assert_eq!(row["counters"]["times_seen"], 4, "{row}");

    // A rate-limit check: counted once, the retry admitted from the state.
    let (limiter, policies) = sv.limiter.as_ref().unwrap();
    let d = limiter
        .check_keyed("l-1", "crash-u", &policies["api"], 1)
        .await
        .unwrap();
    assert_eq!((d.allowed, d.remaining), (true, 1));
    let a = retry(
        &s,
        "/v1/limits/crash-u/check",
        json!({ "policy": "api" }),
        "l-1",
    )
    .await;
    assert_eq!(
        (a.json()["allowed"].clone(), a.json()["remaining"].clone()),
        (json!(true), json!(1))
    );
    let plain = s
        .post("/v1/limits/crash-u/check", json!({ "policy": "api" }))
        .await;
    assert_eq!(
        (
            plain.json()["allowed"].clone(),
            plain.json()["remaining"].clone()
        ),
        (json!(true), json!(0))
    );

    // A lock: the retry finds its own lease, same token and fence.
    let locks = sv.locks.as_ref().unwrap();
    let first = match locks
        .acquire_keyed("k-1", "crash-l", Duration::from_secs(10), Duration::ZERO)
        .await
        .unwrap()
    {
        tally::Acquisition::Acquired(lease) => lease,
        held => panic!("{held:?}"),
    };
    let a = retry(
        &s,
        "/v1/locks/crash-l/acquire",
        json!({ "ttl_ms": 10000 }),
        "k-1",
    )
    .await;
    let lease = a.json();
    assert_eq!(
        (
            lease["token"].as_str().unwrap(),
            lease["fence"].as_u64().unwrap()
        ),
        (first.token.as_str(), first.fence)
    );
    let other = s
        .post("/v1/locks/crash-l/acquire", json!({ "ttl_ms": 10000 }))
        .await;
    assert_eq!(
        (other.status, other.json()["status"].clone()),
        (StatusCode::CONFLICT, json!("held"))
    );
}
