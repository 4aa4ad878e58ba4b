//! Gauges over HTTP.

use super::*;

per_backend!(server: gauges_over_http);

/// Issue 9: gauges under routes of their own: set, adjust, read (every
/// precision or one), list, delete; bad bodies are 400 and write nothing.
async fn gauges_over_http(kind: Kind) {
    let s = server(kind, ServerSettings::default(), false).await;
    let at = s.f.clock.now().whole_secs() / 60 * 60;
    for body in [
        json!({ "value": 3.5, "at": at }),
        json!({ "delta": -1, "at": at + 1 }),
        json!({ "delta": 4.5, "at": at + 2 }),
    ] {
        let a = s.post("/v1/gauges/q:depth", body).await;
        assert_eq!(
            (a.status, a.json()),
            (StatusCode::OK, json!({ "written": 1 }))
        );
    }
    let a = s.get("/v1/gauges/q:depth?precision=60").await;
    assert_eq!(
        a.json(),
        json!({ "name": "q:depth", "current": 7.0, "precisions": {
            "60": [{ "start": at, "last": 7.0, "min": 2.5, "max": 7.0 }] } })
    );
    let all = s.get("/v1/gauges/q:depth").await.json();
    assert_eq!(all["precisions"].as_object().unwrap().len(), 7, "{all}");
    assert_eq!(all["precisions"]["1"].as_array().unwrap().len(), 3, "{all}");
    for bad in [
        json!({}),
        json!({ "value": 1, "delta": 1 }),
        json!({ "value": null }),
        json!({ "value": "1" }),
        json!({ "value": 1, "extra": 1 }),
        json!({ "delta": 1, "at": -5 }),
    ] {
        s.post("/v1/gauges/q:other", bad.clone()).await.error(
            StatusCode::BAD_REQUEST,
            if bad.get("at").is_some() {
                "invalid_time"
            } else if bad == json!({}) || bad.get("delta").is_some() {
                "invalid_input"
            } else {
                "invalid_json"
            },
        );
    }
    s.post("/v1/gauges/big", json!({ "value": 1.7e308 })).await;
    s.post("/v1/gauges/big", json!({ "delta": 1.7e308 }))
        .await
        .error(StatusCode::UNPROCESSABLE_ENTITY, "unprocessable");
    s.get("/v1/gauges/q:depth?precision=7")
        .await
        .error(StatusCode::BAD_REQUEST, "unknown_precision");
    assert_eq!(
        s.get("/v1/gauges?prefix=q:").await.json(),
        json!({ "gauges": ["q:depth"], "next": null })
    );
    s.delete_once("/v1/gauges/q:depth").await;
    assert_eq!(
        s.get("/v1/gauges/q:depth?precision=60").await.json()["current"],
        Value::Null
    );
}
