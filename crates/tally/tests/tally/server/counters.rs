//! Counters over HTTP: increments and reads, exact mode, batches, listing.

use super::*;

per_backend!(server:
    increments_show_up_in_reads,
    exact_mode_writes_before_answering,
    batches_are_all_or_nothing,
    listing_searches_and_pages,
);

pub(super) async fn increments_show_up_in_reads(kind: Kind) {
    let s = server(kind, ServerSettings::default(), false).await;
    let now = s.f.clock.now().whole_secs();
    // No body at all, an empty JSON object, and a full one.
    let a = s
        .call(Method::POST, "/v1/counters/hits/incr", None, &[])
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text);
    assert_eq!(a.json(), json!({ "accepted": 1 }));
    assert_eq!(
        s.post("/v1/counters/hits/incr", json!({})).await.status,
        StatusCode::ACCEPTED
    );
    let at = now as f64 - 30.5;
    assert_eq!(
        s.post("/v1/counters/hits/incr", json!({ "count": 5, "at": at }))
            .await
            .status,
        StatusCode::ACCEPTED
    );
    s.flush().await;
    let body = s.get("/v1/counters/hits").await.json();
    assert_eq!(body["name"], "hits");
    assert_eq!(body["samples_kept"], 120);
    let day = body["precisions"]["86400"].as_array().unwrap();
    let total: i64 = day.iter().map(|p| p[1].as_i64().unwrap()).sum();
    assert_eq!(total, 7, "{body}");
    let keys: Vec<&String> = body["precisions"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["1", "5", "60", "300", "3600", "18000", "86400"]);
    // One precision, filtered by time.
    let one = s
        .get(&format!("/v1/counters/hits?precision=1&from={}", now - 10))
        .await
        .json();
    assert_eq!(one["precisions"]["1"], json!([[now, 2]]), "{one}");
    // Names with reserved characters travel percent-encoded.
    assert_eq!(
        s.post("/v1/counters/page%2Fviews%3Fx/incr", json!({}))
            .await
            .status,
        StatusCode::ACCEPTED
    );
    s.flush().await;
    let odd = s
        .get("/v1/counters/page%2Fviews%3Fx?precision=60")
        .await
        .json();
    assert_eq!(odd["name"], "page/views?x");
    assert_eq!(odd["precisions"]["60"][0][1], 1);
    // Delete, then 404.
    s.delete_once("/v1/counters/hits").await;
}

async fn exact_mode_writes_before_answering(kind: Kind) {
    let s = server(kind, ServerSettings::default(), true).await;
    let a = s.post("/v1/counters/now/incr", json!({ "count": 3 })).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(a.json(), json!({ "written": 1 }));
    // No flush: the write was done before the answer.
    let body = s.get("/v1/counters/now?precision=60").await.json();
    assert_eq!(body["precisions"]["60"][0][1], 3, "{body}");
    let a = s
        .post(
            "/v1/incr",
            json!({ "increments": [{ "name": "a" }, { "name": "b", "count": 2 }] }),
        )
        .await;
    assert_eq!(
        (a.status, a.json()),
        (StatusCode::OK, json!({ "written": 2 }))
    );
}

pub(super) async fn batches_are_all_or_nothing(kind: Kind) {
    for exact in [false, true] {
        let s = server(kind, ServerSettings::default(), exact).await;
        let bad = json!({ "increments": [
            { "name": "ok1", "count": 1 },
            { "name": "bad\u{7}", "count": 1 },
            { "name": "ok2" },
        ]});
        s.post("/v1/incr", bad)
            .await
            .error(StatusCode::BAD_REQUEST, "invalid_name");
        let nan_like = json!({ "increments": [{ "name": "ok1" }, { "name": "ok2", "at": -5 }] });
        s.post("/v1/incr", nan_like)
            .await
            .error(StatusCode::BAD_REQUEST, "invalid_time");
        let extra = json!({ "increments": [{ "name": "ok1", "cuont": 2 }] });
        s.post("/v1/incr", extra)
            .await
            .error(StatusCode::BAD_REQUEST, "invalid_json");
        s.post("/v1/incr", json!({ "increments": [] }))
            .await
            .error(StatusCode::BAD_REQUEST, "invalid_input");
        s.flush().await;
        assert_eq!(
            s.get("/v1/counters?prefix=ok").await.json()["counters"],
            json!([])
        );
        let good = json!({ "increments": [{ "name": "ok1", "count": 4 }, { "name": "ok2" }, { "name": "ok1" }] });
        let a = s.post("/v1/incr", good).await;
        assert!(a.status.is_success(), "{}", a.text);
        s.flush().await;
        let ok1 = s.get("/v1/counters/ok1?precision=86400").await.json();
        assert_eq!(ok1["precisions"]["86400"][0][1], 5, "{ok1}");
    }
}

pub(super) async fn listing_searches_and_pages(kind: Kind) {
    let s = server(kind, ServerSettings::default(), true).await;
    let names: Vec<String> = (0..12)
        .map(|i| format!("api:{i:02}"))
        .chain(["web:home".to_owned()])
        .collect();
    let incs: Vec<Value> = names.iter().map(|n| json!({ "name": n })).collect();
    assert_eq!(
        s.post("/v1/incr", json!({ "increments": incs }))
            .await
            .status,
        StatusCode::OK
    );
    let first = s.get("/v1/counters?prefix=api:&limit=5").await.json();
    assert_eq!(
        first["counters"],
        json!(["api:00", "api:01", "api:02", "api:03", "api:04"])
    );
    assert_eq!(first["next"], "api:04");
    let rest = s
        .get("/v1/counters?prefix=api:&limit=100&cursor=api:04")
        .await
        .json();
    assert_eq!(rest["counters"].as_array().unwrap().len(), 7);
    assert_eq!(rest["next"], Value::Null);
    assert_eq!(
        s.get("/v1/counters?prefix=web").await.json()["counters"],
        json!(["web:home"])
    );
    s.get_errors(
        StatusCode::BAD_REQUEST,
        &[
            ("/v1/counters?limit=0", "invalid_input"),
            ("/v1/counters?limit=abc", "invalid_input"),
            ("/v1/counters?colour=red", "invalid_input"),
        ],
    )
    .await;
}
