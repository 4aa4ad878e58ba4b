//! Error answers (400, 404/405/415, 413, 422) and the OpenAPI document.

use super::*;

per_backend!(server:
    bad_input_is_400_and_writes_nothing,
    not_found_method_and_media_type,
    oversized_bodies_are_413,
    openapi_describes_every_route,
    the_document_decides_400_and_rules_decide_422,
    a_range_ending_before_its_start_is_invalid_time_everywhere,
);

async fn bad_input_is_400_and_writes_nothing(kind: Kind) {
    let s = server(kind, ServerSettings::default(), true).await;
    let long = format!("/v1/counters/{}/incr", "n".repeat(300));
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "/v1/counters/x/incr",
            json!({ "count": "five" }),
            "invalid_json",
        ),
        ("/v1/counters/x/incr", json!({ "at": -1 }), "invalid_time"),
        ("/v1/counters/x/incr", json!({ "at": 1e14 }), "invalid_time"),
        (
            "/v1/counters/x/incr",
            json!({ "count": i64::MIN }),
            "invalid_count",
        ),
        (
            "/v1/counters/x/incr",
            json!({ "count": 1, "extra": true }),
            "invalid_json",
        ),
        (
            "/v1/counters/x/incr",
            json!({ "count": 18446744073709551615u64 }),
            "invalid_json",
        ),
        ("/v1/counters/a%0Ab/incr", json!({}), "invalid_name"),
        (&long, json!({}), "invalid_name"),
    ];
    for (uri, body, code) in cases {
        s.post(uri, body.clone())
            .await
            .error(StatusCode::BAD_REQUEST, code);
    }
    // Broken JSON, and a precision that is not configured.
    s.post_text(
        "/v1/counters/x/incr",
        Some("application/json"),
        "{\"count\": 1",
    )
    .await
    .error(StatusCode::BAD_REQUEST, "invalid_json");
    let p = s.get("/v1/counters/x?precision=7").await;
    p.error(StatusCode::BAD_REQUEST, "unknown_precision");
    assert!(
        p.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("configured: 1, 5, 60")
    );
    s.get("/v1/counters/x?from=-3")
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_time");
    // Overflow: a conflict with the stored count, nothing written.
    assert_eq!(
        s.post(
            "/v1/counters/big/incr",
            json!({ "count": i64::MAX, "at": 100 })
        )
        .await
        .status,
        StatusCode::OK
    );
    s.post("/v1/counters/big/incr", json!({ "count": 1, "at": 200 }))
        .await
        .error(StatusCode::CONFLICT, "overflow");
    assert_eq!(
        s.get("/v1/counters/big?precision=1").await.json()["precisions"]["1"],
        json!([[100, i64::MAX]])
    );
    assert_eq!(
        s.get("/v1/counters?prefix=x").await.json()["counters"],
        json!([])
    );
}

async fn not_found_method_and_media_type(kind: Kind) {
    let s = server(kind, ServerSettings::default(), false).await;
    s.get_errors(
        StatusCode::NOT_FOUND,
        &[
            ("/v2/counters", "not_found"),
            ("/v1/counters/x/nope", "not_found"),
        ],
    )
    .await;
    s.call(Method::PUT, "/v1/counters/x", None, &[])
        .await
        .error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    s.call(Method::GET, "/v1/incr", None, &[])
        .await
        .error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    s.post_text("/v1/counters/x/incr", Some("text/plain"), "count=1")
        .await
        .error(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");
    s.post_text("/v1/incr", None, "{\"increments\": []}")
        .await
        .error(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");
    s.get("/assets/nope.js")
        .await
        .error(StatusCode::NOT_FOUND, "not_found");
    let page = s.get("/").await;
    page.ok_with_type("text/html");
}

async fn oversized_bodies_are_413(kind: Kind) {
    let settings = ServerSettings {
        max_body_bytes: 4096,
        max_batch: 50,
        ..ServerSettings::default()
    };
    let s = server(kind, settings, false).await;
    let big: Vec<Value> = (0..200)
        .map(|i| json!({ "name": format!("counter-with-a-long-name-{i}") }))
        .collect();
    s.post("/v1/incr", json!({ "increments": big }))
        .await
        .error(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large");
    let padded = format!("{{\"count\": 1, \"at\": null{}}}", " ".repeat(5000));
    s.post_text("/v1/counters/x/incr", Some("application/json"), &padded)
        .await
        .error(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large");
    let many: Vec<Value> = (0..51)
        .map(|i| json!({ "name": format!("c{i}") }))
        .collect();
    let a = s.post("/v1/incr", json!({ "increments": many })).await;
    a.error(StatusCode::BAD_REQUEST, "invalid_input");
    assert!(a.text.contains("at most 50"), "{}", a.text);
    s.flush().await;
    assert_eq!(
        s.get("/v1/counters?prefix=c").await.json()["counters"],
        json!([])
    );
}

/// The OpenAPI document: every operation it declares exists on the router
/// (no 404/405), the example requests it gives are answered with the status
/// it declares, and the answers validate against its schemas.
pub(super) async fn openapi_describes_every_route(kind: Kind) {
    let mut s = server(kind, ServerSettings::default(), true).await;
    let (_dir, _flusher) = with_buffers(&mut s).await;
    let served = s.get("/openapi.json").await.json();
    assert_eq!(served["openapi"], "3.1.0");
    let components = served["components"].clone();
    let mut checked = 0;
    for (path, item) in served["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().unwrap() {
            let method: Method = method.to_uppercase().parse().unwrap();
            let example = &op["x-example"];
            let uri = example["uri"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path}: no x-example.uri"));
            let body = example.get("body").cloned();
            let answer = s.call(method.clone(), uri, body, &[]).await;
            assert!(
                answer.status != StatusCode::NOT_FOUND || path.contains('{'),
                "{method} {path}: the router does not know {uri}: {}",
                answer.text
            );
            assert_ne!(
                answer.status,
                StatusCode::METHOD_NOT_ALLOWED,
                "{method} {path}"
            );
            let mut declared = &op["responses"][answer.status.as_str()];
            if let Some(name) = declared["$ref"].as_str() {
                let name = name
                    .strip_prefix("#/components/responses/")
                    .unwrap_or_else(|| panic!("{method} {path}: a response $ref to {name}"));
                declared = &components["responses"][name];
            }
            assert!(
                declared["description"].is_string(),
                "{method} {path}: status {} is not declared: {}",
                answer.status,
                answer.text
            );
            let json_answer = answer
                .headers
                .get("content-type")
                .is_some_and(|t| t.to_str().unwrap().starts_with("application/json"));
            assert!(
                !json_answer || declared["content"]["application/json"]["schema"].is_object(),
                "{method} {path}: a JSON answer to {uri} without a declared schema"
            );
            if let Some(schema) = declared["content"]["application/json"]["schema"].as_object() {
                let mut schema = Value::Object(schema.clone());
                schema["components"] = components.clone();
                let validator = jsonschema::validator_for(&schema).expect("a valid schema");
                let body = answer.json();
                let errors: Vec<String> = validator
                    .iter_errors(&body)
                    .map(|e| e.to_string())
                    .collect();
                assert!(
                    errors.is_empty(),
                    "{method} {path} answered {body}, against its schema: {errors:?}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} operations documented");
}

/// Issue 19: every `/v1` route that takes a range answers one ending
/// before its start alike, 422 with code `invalid_time` naming the end's
/// parameter, whether or not anything is stored under the name.
async fn a_range_ending_before_its_start_is_invalid_time_everywhere(kind: Kind) {
    let s = server(kind, ServerSettings::default(), true).await;
    let at = s.f.clock.now().whole_secs();
    s.post("/v1/counters/c/incr", json!({})).await;
    s.post("/v1/stats/st/record", json!({ "value": 1.0 })).await;
    s.post("/v1/sets/u", json!({ "members": ["a"] })).await;
    s.post("/v1/ts/m/incr", json!({ "key": "k" })).await;
    let (from, to) = (at, at - 10);
    let span = format!("start={from}&end={to}");
    let range = format!("from={from}&to={to}");
    for (uri, end) in [
        (format!("/v1/counters/c?{range}"), "to"),
        (format!("/v1/counters/none?{range}"), "to"),
        (format!("/v1/stats/st?{range}"), "to"),
        (format!("/v1/stats/none?{range}"), "to"),
        (format!("/v1/stats/top?{range}"), "to"),
        (format!("/v1/sets/u?{range}"), "to"),
        (format!("/v1/sets/none?{range}"), "to"),
        (format!("/v1/ts/m/range?keys=k&{span}"), "end"),
        (format!("/v1/ts/m/sums?keys=k&{span}"), "end"),
        (format!("/v1/ts/m/distinct?keys=k&{span}"), "end"),
        (format!("/v1/ts/m/top?key=k&{span}"), "end"),
        // A start after the end's default (now) is reversed too.
        (format!("/v1/stats/top?from={}", at + 10), "to"),
        (format!("/v1/ts/m/sums?keys=k&start={}", at + 10), "end"),
    ] {
        let a = s.get(&uri).await;
        a.error(StatusCode::UNPROCESSABLE_ENTITY, "invalid_time");
        let message = a.json()["error"]["message"].to_string();
        assert!(
            message.contains(&format!("{end}: a range's end")),
            "{uri}: {message}"
        );
    }
    // An end in the start's second is a range of that second.
    let same = s
        .get(&format!("/v1/counters/c?from={at}.5&to={at}.2"))
        .await;
    assert_eq!(same.status, StatusCode::OK, "{}", same.text);
}

/// Regression for the fuzzer's findings: 400 exactly when the document
/// refuses a request (naming the field), 2xx for what it allows, 422 for a
/// rule it states only in words, and nothing written either way.
async fn the_document_decides_400_and_rules_decide_422(kind: Kind) {
    let s = server(kind, ServerSettings::default(), true).await;
    let now = s.f.clock.now().whole_secs() as f64;
    // A null where the document says integer: 400 naming the field.
    let a = s
        .post("/v1/counters/n/incr", json!({ "count": null }))
        .await;
    a.error(StatusCode::BAD_REQUEST, "invalid_json");
    assert!(a.text.contains("count"), "{}", a.text);
    let a = s
        .post(
            "/v1/incr",
            json!({ "increments": [{ "name": "n", "count": null }] }),
        )
        .await;
    a.error(StatusCode::BAD_REQUEST, "invalid_json");
    assert!(a.text.contains("increments[0].count"), "{}", a.text);
    // `at` may be null (now); an integer may be written 3.0, not 3.5 or "3".
    for ok in [
        json!({ "count": 3.0 }),
        json!({ "count": 0 }),
        json!({ "at": null }),
    ] {
        let a = s.post("/v1/counters/n/incr", ok.clone()).await;
        assert_eq!(a.status, StatusCode::OK, "{ok}: {}", a.text);
    }
    for bad in [json!({ "count": 3.5 }), json!({ "count": "3" })] {
        s.post("/v1/counters/n/incr", bad)
            .await
            .error(StatusCode::BAD_REQUEST, "invalid_json");
    }
    assert_eq!(s.get("/v1/counters?limit=5.0").await.status, StatusCode::OK);
    // Names: 256 characters pass whatever their bytes; 257 do not.
    let long = "%F0%9F%98%80".repeat(256);
    let a = s
        .post(&format!("/v1/counters/{long}/incr"), json!({}))
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let a = s
        .post(&format!("/v1/counters/{long}x/incr"), json!({}))
        .await;
    a.error(StatusCode::BAD_REQUEST, "invalid_name");
    // Time series: the document's bounds are 400 naming the field...
    let zero = s
        .post("/v1/ts/m/incr", json!({ "key": "k", "count": 0 }))
        .await;
    zero.error(StatusCode::BAD_REQUEST, "invalid_count");
    assert!(zero.text.contains("count"), "{}", zero.text);
    s.post("/v1/ts/m/delete", json!({ "keys": [] }))
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_input");
    s.get_errors(
        StatusCode::BAD_REQUEST,
        &[
            ("/v1/ts/m/range?keys=a,,b", "invalid_name"),
            ("/v1/ts/m/range?keys=a&rollup=7", "unknown_precision"),
            ("/v1/ts/m/top", "invalid_input"),
        ],
    )
    .await;
    // ...and the rules in words are 422.
    let ahead = json!({ "key": "k", "at": now + 3600.0 });
    s.post("/v1/ts/m/incr", ahead)
        .await
        .error(StatusCode::UNPROCESSABLE_ENTITY, "unprocessable");
    s.get("/v1/ts/m/range?keys=k&start=200&end=100")
        .await
        .error(StatusCode::UNPROCESSABLE_ENTITY, "invalid_time");
    s.post("/v1/ts/m/merge", json!({ "into": "k", "from": "k" }))
        .await
        .error(StatusCode::UNPROCESSABLE_ENTITY, "unprocessable");
    // An end before 3600 s defaults the start to 0, not before the epoch.
    let early = s.get("/v1/ts/m/sums?keys=k&end=100").await;
    assert_eq!(early.status, StatusCode::OK, "{}", early.text);
    // Daily: a count of 0 is 400; a total past 2^63-1 is 422.
    s.post("/v1/daily/e/incr", json!({ "count": 0 }))
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_count");
    let max = json!({ "count": i64::MAX });
    assert_eq!(
        s.post("/v1/daily/e/incr", max.clone()).await.status,
        StatusCode::OK
    );
    s.post("/v1/daily/e/incr", max)
        .await
        .error(StatusCode::UNPROCESSABLE_ENTITY, "unprocessable");
    let leap = s.get("/v1/daily/e/days/2028-02-29").await;
    assert_eq!(leap.status, StatusCode::OK, "{}", leap.text);
    s.get("/v1/daily/e/days/2027-02-29")
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_input");
    // Limits: a policy stands alone; a burst is GCRA's; a GCRA span too long
    // is 422.
    s.post("/v1/limits/k/check", json!({ "policy": "api", "limit": 5 }))
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_input");
    let burst = json!({ "algorithm": "fixed", "limit": 5, "window": 1, "burst": 9 });
    s.post("/v1/limits/k/check", burst)
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_input");
    let span = json!({ "algorithm": "gcra", "limit": 1, "window": 604800, "burst": 1000000 });
    s.post("/v1/limits/k/check", span)
        .await
        .error(StatusCode::UNPROCESSABLE_ENTITY, "unprocessable");
    // Locks: a TTL of 0 is out of the document's range.
    s.post("/v1/locks/l/acquire", json!({ "ttl_ms": 0 }))
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_input");
}

/// The served document states this server's configuration: its policies,
/// precisions and rollups as enums, its batch limit, which operations need
/// a token; and without policies, a check can only state its limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_states_the_servers_configuration() {
    let settings = ServerSettings {
        tokens: vec![TOKEN.to_owned()],
        max_batch: 50,
        ..ServerSettings::default()
    };
    let s = server(Kind::SqliteMemory, settings, true).await;
    let doc = s.get("/openapi.json").await.json();
    let schemas = &doc["components"]["schemas"];
    assert_eq!(schemas["Policy"]["enum"], json!(["api"]));
    assert_eq!(
        schemas["Precision"]["enum"],
        json!(s.f.counters.settings().precisions)
    );
    assert_eq!(schemas["Rollup"]["enum"], json!([10, 3600, 86400]));
    assert_eq!(
        schemas["IncrBatch"]["properties"]["increments"]["maxItems"],
        50
    );
    let bearer = json!([{ "bearer": [] }]);
    assert_eq!(doc["paths"]["/v1/incr"]["post"]["security"], bearer);
    assert_eq!(doc["paths"]["/v1/counters"]["get"]["security"], json!([]));
    assert_eq!(doc["paths"]["/healthz"]["get"]["security"], json!([]));

    let mut services = s.state.services().clone();
    services.limiter.as_mut().unwrap().1.clear();
    let open = tally::server::openapi::render(&services, &ServerSettings::default());
    let open: Value = serde_json::from_str(&open).unwrap();
    assert!(open["components"]["schemas"]["Policy"].is_null());
    assert_eq!(
        open["components"]["schemas"]["CheckBody"]["oneOf"],
        json!([
            { "$ref": "#/components/schemas/WindowCheck" },
            { "$ref": "#/components/schemas/GcraCheck" }
        ])
    );
    assert_eq!(open["paths"]["/v1/incr"]["post"]["security"], json!([]));
}
