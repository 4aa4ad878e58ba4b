//! Rate-limit checks and locks over HTTP.

use super::*;

per_backend!(server: rate_limit_checks, locks_over_http);

pub(super) async fn rate_limit_checks(kind: Kind) {
    let s = server(kind, ServerSettings::default(), true).await;
    for (i, allowed) in [true, true, false].into_iter().enumerate() {
        let a = s
            .post("/v1/limits/user:7/check", json!({ "policy": "api" }))
            .await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.text);
        let d = a.json();
        assert_eq!(d["allowed"], allowed, "check {i}: {d}");
        assert_eq!(d["limit"], 2);
        assert_eq!(a.headers["ratelimit-limit"], "2");
        assert_eq!(
            a.headers["ratelimit-remaining"],
            (2 - (i as u64 + 1).min(2)).to_string()
        );
        assert_eq!(a.headers.contains_key("retry-after"), !allowed);
    }
    let stated = s
        .post(
            "/v1/limits/k/check",
            json!({ "algorithm": "gcra", "limit": 10, "window": 1, "burst": 3, "cost": 3 }),
        )
        .await
        .json();
    assert_eq!(
        (stated["allowed"].clone(), stated["remaining"].clone()),
        (json!(true), json!(0))
    );
    let never = s
        .post(
            "/v1/limits/k2/check",
            json!({ "algorithm": "fixed", "limit": 2, "window": 60, "cost": 3 }),
        )
        .await;
    assert_eq!(never.json()["allowed"], false);
    assert_eq!(never.json()["retry_after_ms"], Value::Null);
    s.post("/v1/limits/k/check", json!({ "policy": "nope" }))
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_input");
    s.post("/v1/limits/k/check", json!({ "policy": "api", "limit": 3 }))
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_input");
    s.post(
        "/v1/limits/k/check",
        json!({ "algorithm": "leaky", "limit": 1, "window": 1 }),
    )
    .await
    .error(StatusCode::BAD_REQUEST, "invalid_json");
    s.post(
        "/v1/limits/k/check",
        json!({ "algorithm": "fixed", "limit": 1, "window": 0 }),
    )
    .await
    .error(StatusCode::BAD_REQUEST, "invalid_input");
    s.post("/v1/limits/k/check", json!({ "policy": "api", "cost": 0 }))
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_count");
}

pub(super) async fn locks_over_http(kind: Kind) {
    let s = server(kind, ServerSettings::default(), true).await;
    let first = s
        .post("/v1/locks/job/acquire", json!({ "ttl_ms": 60_000 }))
        .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    let lease = first.json();
    assert_eq!(lease["status"], "acquired");
    let token = lease["token"].as_str().unwrap().to_owned();
    let held = s
        .post(
            "/v1/locks/job/acquire",
            json!({ "ttl_ms": 1000, "wait_ms": 30 }),
        )
        .await;
    assert_eq!(held.status, StatusCode::CONFLICT);
    assert_eq!(held.json()["status"], "held");
    assert!(held.json()["retry_after_ms"].as_u64().unwrap() > 50_000);
    let wrong = s
        .post(
            "/v1/locks/job/extend",
            json!({ "token": "not-mine", "ttl_ms": 1000 }),
        )
        .await;
    assert_eq!(
        (wrong.status, wrong.json()),
        (StatusCode::CONFLICT, json!({ "extended": false }))
    );
    let wrong = s
        .post("/v1/locks/job/release", json!({ "token": "not-mine" }))
        .await;
    assert_eq!(
        (wrong.status, wrong.json()),
        (StatusCode::CONFLICT, json!({ "released": false }))
    );
    assert_eq!(
        s.post(
            "/v1/locks/job/extend",
            json!({ "token": token, "ttl_ms": 5000 })
        )
        .await
        .json(),
        json!({ "extended": true })
    );
    assert_eq!(
        s.post("/v1/locks/job/release", json!({ "token": token }))
            .await
            .json(),
        json!({ "released": true })
    );
    let again = s
        .post("/v1/locks/job/acquire", json!({ "ttl_ms": 1000 }))
        .await
        .json();
    assert!(again["fence"].as_u64().unwrap() > lease["fence"].as_u64().unwrap());
    s.post("/v1/locks/job/acquire", json!({ "ttl_ms": 0 }))
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_input");
    s.post("/v1/locks/job/acquire", json!({}))
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_json");
}

/// A lock wait stops before the request timeout: a held lock is answered
/// 409 with the time left, never cut off as a 503. On a paused clock (the
/// runtime's timers fire only when it has nothing else to do, and never
/// while SQLite works), so the wait's end and the timeout come in their
/// order however slow the machine is.
#[tokio::test(start_paused = true)]
async fn a_lock_wait_ends_before_the_request_timeout() {
    let settings = ServerSettings {
        request_timeout: Duration::from_millis(400),
        ..ServerSettings::default()
    };
    let s = server(Kind::SqliteMemory, settings, true).await;
    let take = json!({ "ttl_ms": 60_000 });
    assert_eq!(
        s.post("/v1/locks/w/acquire", take).await.status,
        StatusCode::OK
    );
    let started = tokio::time::Instant::now();
    let wait = json!({ "ttl_ms": 1000, "wait_ms": 3_600_000 });
    let held = s.post("/v1/locks/w/acquire", wait).await;
    assert_eq!(held.status, StatusCode::CONFLICT, "{}", held.text);
    assert_eq!(held.json()["status"], "held");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    s.shutdown().await;
}
