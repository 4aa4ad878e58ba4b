//! Sets over HTTP.

use super::*;

per_backend!(server: sets_over_http);

/// Issue 9: sets under routes of their own: add members, read the slices'
/// distinct counts and the range's union (every precision or one), list,
/// delete; a keyed write is applied once; bad bodies are 400 (422 for the
/// byte rule the document states in words) and write nothing.
async fn sets_over_http(kind: Kind) {
    let s = server(kind, ServerSettings::default(), false).await;
    let at = s.f.clock.now().whole_secs() / 60 * 60;
    for (body, n) in [
        (json!({ "members": ["ann", "bob", "ann"], "at": at }), 3),
        (
            json!({ "members": ["bob", "cy"], "at": at as f64 + 1.5 }),
            2,
        ),
    ] {
        let a = s.post("/v1/sets/users", body).await;
        assert_eq!(
            (a.status, a.json()),
            (StatusCode::OK, json!({ "written": n }))
        );
    }
    let range = format!("from={at}&to={}", at + 59);
    let mut a = s
        .get(&format!("/v1/sets/users?precision=60&{range}"))
        .await
        .json();
    // The union's precision is the finest that still reaches `at` at now.
    let precision = a["union"]["precision"].take();
    assert!(
        [1, 5, 60].contains(&precision.as_u64().unwrap()),
        "{precision}"
    );
    assert_eq!(
        a,
        json!({ "name": "users",
                "precisions": { "60": [{ "start": at, "count": 3 }] },
                "union": { "from": at, "to": at + 59, "precision": null, "count": 3 } })
    );
    let all = s.get("/v1/sets/users").await.json();
    assert_eq!(all["precisions"].as_object().unwrap().len(), 7, "{all}");
    assert_eq!(all["precisions"]["1"].as_array().unwrap().len(), 2, "{all}");
    assert_eq!(all["union"]["count"], 3, "{all}");
    // A keyed write is applied once; the key's other use is refused.
    let body = json!({ "members": ["dan"], "at": at }).to_string();
    for _ in 0..2 {
        let a = keyed(&s, "/v1/sets/users", &body, "set-key-1").await;
        assert_eq!(a.status, StatusCode::OK);
    }
    let other = json!({ "members": ["eve"], "at": at }).to_string();
    keyed(&s, "/v1/sets/users", &other, "set-key-1")
        .await
        .error(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused");
    let a = s.get(&format!("/v1/sets/users?precision=60&{range}")).await;
    assert_eq!(a.json()["union"]["count"], 4);
    for (bad, code) in [
        (json!({}), "invalid_json"),
        (json!({ "members": [] }), "invalid_input"),
        (json!({ "members": [""] }), "invalid_input"),
        (json!({ "members": ["x".repeat(256)] }), "invalid_input"),
        (json!({ "members": [1] }), "invalid_json"),
        (json!({ "members": ["a"], "extra": 1 }), "invalid_json"),
        (json!({ "members": ["a"], "at": -5 }), "invalid_time"),
    ] {
        s.post("/v1/sets/other", bad.clone())
            .await
            .error(StatusCode::BAD_REQUEST, code);
    }
    // 255 characters but 510 bytes: the rule the document states in words.
    s.post("/v1/sets/other", json!({ "members": ["é".repeat(255)] }))
        .await
        .error(StatusCode::UNPROCESSABLE_ENTITY, "unprocessable");
    let backwards = format!("/v1/sets/users?from={}&to={at}", at + 1);
    for (uri, status, code) in [
        ("/v1/sets/other", StatusCode::NOT_FOUND, "not_found"),
        (
            "/v1/sets/users?precision=7",
            StatusCode::BAD_REQUEST,
            "unknown_precision",
        ),
        (&backwards, StatusCode::UNPROCESSABLE_ENTITY, "invalid_time"),
        (
            "/v1/sets/users?from=x",
            StatusCode::BAD_REQUEST,
            "invalid_input",
        ),
    ] {
        s.get(uri).await.error(status, code);
    }
    assert_eq!(
        s.get("/v1/sets?prefix=us").await.json(),
        json!({ "sets": ["users"], "next": null })
    );
    s.delete_once("/v1/sets/users").await;
    s.get("/v1/sets/users")
        .await
        .error(StatusCode::NOT_FOUND, "not_found");
}
