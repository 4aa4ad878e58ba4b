//! The HTTP server: every route and error path on the router without a
//! socket (`oneshot`), on SQLite and a real redis-server; plus a real-socket
//! run with graceful shutdown, statsd over real UDP, and `/metrics` checked
//! by an independent parser of the exposition format.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use common::{Fixture, Kind};
use serde_json::{Value, json};
use tally::counters::{Aggregator, AggregatorSettings};
use tally::gauges::GaugesWriter;
use tally::limits::{Algorithm, Limit, Limiter};
use tally::server::statsd::Targets;
use tally::server::{AppState, Metrics, ServerSettings, Services, app};
use tally::sets::SetsWriter;
use tally::stats::StatsWriter;
use tally::tsdb::TsIncrement;
use tally::{Clock, DailySettings, GaugeOp, Locks, StatsSettings, TsdbSettings};
use tower::ServiceExt;

const TOKEN: &str = "s3cret-token";

struct TestServer {
    f: Fixture,
    state: AppState,
    router: Router,
    aggregator: Aggregator,
    /// The statsd listener's writers (the counters' is `aggregator`).
    statsd: Targets,
}

impl Drop for TestServer {
    /// Stops the fixture's writers while its store still runs. A writer
    /// left behind retries its last flush (the request durations the
    /// server records) until it is acknowledged; once its store is gone
    /// and another test's server takes the same ports, it would land there.
    ///
    /// A test on one thread (a paused clock) cannot block here: it calls
    /// [`TestServer::shutdown`] itself.
    fn drop(&mut self) {
        let runtime = tokio::runtime::Handle::current();
        if runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread {
            return;
        }
        tokio::task::block_in_place(|| runtime.block_on(self.shutdown()));
    }
}

async fn server(kind: Kind, settings: ServerSettings, exact: bool) -> TestServer {
    let f = Fixture::near_now(kind).await;
    let clock = std::sync::Arc::new(f.clock.clone());
    let aggregator = Aggregator::start(
        f.counters.clone(),
        AggregatorSettings {
            flush_interval: Duration::from_millis(20),
            ..AggregatorSettings::default()
        },
    )
    .unwrap();
    let stats = f.stats(StatsSettings::default()).await;
    let stats_writer = StatsWriter::start(
        stats.clone(),
        AggregatorSettings {
            flush_interval: Duration::from_millis(20),
            ..AggregatorSettings::default()
        },
    )
    .unwrap();
    let statsd = Targets {
        counters: aggregator.clone(),
        stats: stats_writer.clone(),
        gauges: GaugesWriter::start(
            f.gauges(&f.counters.settings().precisions, 10, false).await,
            AggregatorSettings {
                flush_interval: Duration::from_millis(20),
                ..AggregatorSettings::default()
            },
        )
        .unwrap(),
        sets: SetsWriter::start(
            f.sets(&f.counters.settings().precisions, 10).await,
            AggregatorSettings {
                flush_interval: Duration::from_millis(20),
                ..AggregatorSettings::default()
            },
        )
        .unwrap(),
    };
    let mut policies = BTreeMap::new();
    policies.insert("api".to_owned(), Limit::new(Algorithm::Fixed, 2, 60_000));
    let services = Services {
        counters: f.counters.clone(),
        aggregator: Some(aggregator.clone()),
        exact_writes: exact,
        limiter: Some((
            Limiter::new(f.backend.limiter_store().await.unwrap(), clock.clone()),
            policies,
        )),
        locks: Some(Locks::new(
            f.backend.lock_store().await.unwrap(),
            clock.clone(),
        )),
        tsdb: Some(f.tsdb(TsdbSettings::default()).await),
        daily: Some(f.daily(DailySettings::default()).await),
        gauges: Some(statsd.gauges.service().clone()),
        sets: Some(statsd.sets.service().clone()),
        buffers: None,
        stats: Some(stats.clone()),
        stats_writer: Some(stats_writer.clone()),
        idempotency: Some(
            tally::Idempotency::new(
                f.backend.idempotency_store().await.unwrap(),
                clock.clone(),
                tally::idempotency::DEFAULT_RETENTION,
            )
            .unwrap(),
        ),
        graphite: None,
    };
    let services = Services {
        graphite: Some(tally::server::graphite::GraphiteApi::of_services(
            &services,
            &Default::default(),
        )),
        ..services
    };
    let state = AppState::new(services, settings, Metrics::default());
    let router = app(state.clone());
    TestServer {
        f,
        state,
        router,
        aggregator,
        statsd,
    }
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    text: String,
}

impl Answer {
    fn json(&self) -> Value {
        // graphite-web writes an infinite default (keepLastValue's limit) as
        // `1e9999`, which JSON's grammar allows and serde_json cannot hold:
        // read it as the largest double for the schema checks.
        let text = self.text.replace(": 1e9999", ": 1.7976931348623157e308");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }

    /// Asserts an error answer with this status and code.
    fn error(&self, status: StatusCode, code: &str) {
        assert_eq!(self.status, status, "{}", self.text);
        let body = self.json();
        assert_eq!(body["error"]["code"], code, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{body}"
        );
    }
}

impl TestServer {
    async fn call(
        &self,
        method: Method,
        uri: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let mut req = Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = match body {
            Some(b) => req
                .header("content-type", "application/json")
                .body(Body::from(b.to_string())),
            None => req.body(Body::empty()),
        }
        .unwrap();
        self.send(req).await
    }

    async fn send(&self, req: Request<Body>) -> Answer {
        let res = self.router.clone().oneshot(req).await.unwrap();
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = axum::body::to_bytes(res.into_body(), 1 << 24)
            .await
            .unwrap();
        Answer {
            status,
            headers,
            text: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    async fn get(&self, uri: &str) -> Answer {
        self.call(Method::GET, uri, None, &[]).await
    }

    async fn post(&self, uri: &str, body: Value) -> Answer {
        self.call(Method::POST, uri, Some(body), &[]).await
    }

    /// Stops the fixture's writers (what [`Drop`] does on a runtime of
    /// several threads).
    async fn shutdown(&self) {
        self.statsd.stats.shutdown().await;
        self.statsd.gauges.shutdown().await;
        self.statsd.sets.shutdown().await;
        self.aggregator.shutdown().await;
    }

    async fn flush(&self) {
        self.aggregator.flush().await.unwrap();
        self.statsd.stats.flush().await.unwrap();
        self.statsd.gauges.flush().await.unwrap();
        self.statsd.sets.flush().await.unwrap();
    }
}

macro_rules! on_backends {
    ($($test:ident),* $(,)?) => {
        mod sqlite {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $test() { super::$test(super::Kind::SqliteMemory).await } )*
        }
        mod redis {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $test() { super::$test(super::Kind::RedisTagged).await } )*
        }
    };
}

/// The server on a real Redis Cluster (3 masters, 3 replicas): every
/// service's routes, and the OpenAPI walk.
mod redis_cluster {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_service_over_http() {
        super::increments_show_up_in_reads(super::Kind::RedisCluster).await;
        super::batches_are_all_or_nothing(super::Kind::RedisCluster).await;
        super::listing_searches_and_pages(super::Kind::RedisCluster).await;
        super::rate_limit_checks(super::Kind::RedisCluster).await;
        super::locks_over_http(super::Kind::RedisCluster).await;
        super::time_series_and_daily_over_http(super::Kind::RedisCluster).await;
        super::idempotent_writes_over_http(super::Kind::RedisCluster).await;
        super::keyed_writes_close_the_crash_window(super::Kind::RedisCluster).await;
        super::stats_over_http(super::Kind::RedisCluster).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn openapi_walk() {
        super::openapi_describes_every_route(super::Kind::RedisCluster).await;
    }
}

on_backends!(
    buffered_rows_over_http,
    increments_show_up_in_reads,
    exact_mode_writes_before_answering,
    batches_are_all_or_nothing,
    listing_searches_and_pages,
    bad_input_is_400_and_writes_nothing,
    not_found_method_and_media_type,
    oversized_bodies_are_413,
    tokens_guard_writes_and_optionally_reads,
    health_and_readiness,
    rate_limit_checks,
    locks_over_http,
    time_series_and_daily_over_http,
    metrics_are_valid_exposition_text,
    openapi_describes_every_route,
    the_document_decides_400_and_rules_decide_422,
    a_range_ending_before_its_start_is_invalid_time_everywhere,
    idempotent_writes_over_http,
    keyed_writes_close_the_crash_window,
    gauges_over_http,
    sets_over_http,
    stats_over_http,
);

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
    let a = s
        .call(Method::DELETE, "/v1/gauges/q:depth", None, &[])
        .await;
    assert_eq!(a.json(), json!({ "deleted": true }));
    s.call(Method::DELETE, "/v1/gauges/q:depth", None, &[])
        .await
        .error(StatusCode::NOT_FOUND, "not_found");
    assert_eq!(
        s.get("/v1/gauges/q:depth?precision=60").await.json()["current"],
        Value::Null
    );
}

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
    s.get("/v1/sets/other")
        .await
        .error(StatusCode::NOT_FOUND, "not_found");
    s.get("/v1/sets/users?precision=7")
        .await
        .error(StatusCode::BAD_REQUEST, "unknown_precision");
    s.get(&format!("/v1/sets/users?from={}&to={at}", at + 1))
        .await
        .error(StatusCode::UNPROCESSABLE_ENTITY, "invalid_time");
    s.get("/v1/sets/users?from=x")
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_input");
    assert_eq!(
        s.get("/v1/sets?prefix=us").await.json(),
        json!({ "sets": ["users"], "next": null })
    );
    let a = s.call(Method::DELETE, "/v1/sets/users", None, &[]).await;
    assert_eq!(a.json(), json!({ "deleted": true }));
    s.call(Method::DELETE, "/v1/sets/users", None, &[])
        .await
        .error(StatusCode::NOT_FOUND, "not_found");
    s.get("/v1/sets/users")
        .await
        .error(StatusCode::NOT_FOUND, "not_found");
}

async fn increments_show_up_in_reads(kind: Kind) {
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
    assert_eq!(
        s.call(Method::DELETE, "/v1/counters/hits", None, &[])
            .await
            .json(),
        json!({ "deleted": true })
    );
    s.call(Method::DELETE, "/v1/counters/hits", None, &[])
        .await
        .error(StatusCode::NOT_FOUND, "not_found");
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

async fn batches_are_all_or_nothing(kind: Kind) {
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

async fn listing_searches_and_pages(kind: Kind) {
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
    s.get("/v1/counters?limit=0")
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_input");
    s.get("/v1/counters?limit=abc")
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_input");
    s.get("/v1/counters?colour=red")
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_input");
}

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
    let broken = Request::post("/v1/counters/x/incr")
        .header("content-type", "application/json")
        .body(Body::from("{\"count\": 1"))
        .unwrap();
    s.send(broken)
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
    s.get("/v2/counters")
        .await
        .error(StatusCode::NOT_FOUND, "not_found");
    s.get("/v1/counters/x/nope")
        .await
        .error(StatusCode::NOT_FOUND, "not_found");
    s.call(Method::PUT, "/v1/counters/x", None, &[])
        .await
        .error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    s.call(Method::GET, "/v1/incr", None, &[])
        .await
        .error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    let text = Request::post("/v1/counters/x/incr")
        .header("content-type", "text/plain")
        .body(Body::from("count=1"))
        .unwrap();
    s.send(text)
        .await
        .error(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");
    let no_type = Request::post("/v1/incr")
        .body(Body::from("{\"increments\": []}"))
        .unwrap();
    s.send(no_type)
        .await
        .error(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");
    s.get("/assets/nope.js")
        .await
        .error(StatusCode::NOT_FOUND, "not_found");
    let page = s.get("/").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
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
    let req = Request::post("/v1/counters/x/incr")
        .header("content-type", "application/json")
        .body(Body::from(padded))
        .unwrap();
    s.send(req)
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

async fn tokens_guard_writes_and_optionally_reads(kind: Kind) {
    let settings = ServerSettings {
        tokens: vec![TOKEN.into(), "another-token".into()],
        ..ServerSettings::default()
    };
    let s = server(kind, settings.clone(), true).await;
    let bearer = format!("Bearer {TOKEN}");
    let missing = s
        .call(Method::POST, "/v1/counters/x/incr", Some(json!({})), &[])
        .await;
    missing.error(StatusCode::UNAUTHORIZED, "unauthorized");
    assert_eq!(missing.headers["www-authenticate"], "Bearer");
    s.call(
        Method::POST,
        "/v1/counters/x/incr",
        Some(json!({})),
        &[("authorization", "Bearer wrong-token")],
    )
    .await
    .error(StatusCode::UNAUTHORIZED, "unauthorized");
    s.call(
        Method::POST,
        "/v1/counters/x/incr",
        Some(json!({})),
        &[("authorization", TOKEN)],
    )
    .await
    .error(StatusCode::UNAUTHORIZED, "unauthorized");
    s.call(Method::DELETE, "/v1/counters/x", None, &[])
        .await
        .error(StatusCode::UNAUTHORIZED, "unauthorized");
    // Nothing was written by the refused requests.
    assert_eq!(
        s.get("/v1/counters?prefix=x").await.json()["counters"],
        json!([])
    );
    let ok = s
        .call(
            Method::POST,
            "/v1/counters/x/incr",
            Some(json!({})),
            &[("authorization", &bearer)],
        )
        .await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);
    let other = s
        .call(
            Method::POST,
            "/v1/counters/x/incr",
            Some(json!({})),
            &[("authorization", "Bearer another-token")],
        )
        .await;
    assert_eq!(other.status, StatusCode::OK);
    // Reads are open unless protected.
    assert_eq!(
        s.get("/v1/counters/x?precision=60").await.json()["precisions"]["60"][0][1],
        2
    );
    let p = server(
        kind,
        ServerSettings {
            protect_reads: true,
            ..settings
        },
        true,
    )
    .await;
    p.get("/v1/counters")
        .await
        .error(StatusCode::UNAUTHORIZED, "unauthorized");
    p.get("/metrics")
        .await
        .error(StatusCode::UNAUTHORIZED, "unauthorized");
    assert_eq!(
        p.call(
            Method::GET,
            "/v1/counters",
            None,
            &[("authorization", &bearer)]
        )
        .await
        .status,
        StatusCode::OK
    );
    // Health and the dashboard's files stay open (the page asks for a token).
    assert_eq!(p.get("/healthz").await.status, StatusCode::OK);
    assert_eq!(p.get("/").await.status, StatusCode::OK);
}

async fn health_and_readiness(kind: Kind) {
    let mut s = server(kind, ServerSettings::default(), true).await;
    assert_eq!(s.get("/healthz").await.json(), json!({ "status": "ok" }));
    assert_eq!(s.get("/readyz").await.json(), json!({ "status": "ready" }));
    if let Some(mut redis) = s.f.server.take() {
        redis.kill();
        s.get("/readyz")
            .await
            .error(StatusCode::SERVICE_UNAVAILABLE, "backend_unavailable");
        let down = s.post("/v1/counters/x/incr", json!({})).await;
        down.error(StatusCode::SERVICE_UNAVAILABLE, "backend_unavailable");
        assert_eq!(down.headers["retry-after"], "1");
        assert_eq!(s.get("/healthz").await.status, StatusCode::OK);
        redis.start_again();
        s.f.server = Some(redis);
    }
}

async fn rate_limit_checks(kind: Kind) {
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

async fn locks_over_http(kind: Kind) {
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

async fn time_series_and_daily_over_http(kind: Kind) {
    let s = server(kind, ServerSettings::default(), true).await;
    let now = s.f.clock.now().whole_secs() as f64;
    let a = s
        .post(
            "/v1/ts/group/incr",
            json!({ "key": "42", "count": 3, "at": now }),
        )
        .await;
    assert_eq!(
        (a.status, a.json()),
        (StatusCode::OK, json!({ "written": 1 })),
        "{}",
        a.text
    );
    let batch = json!({ "increments": [{ "model": "group", "key": "42", "at": now - 20.0 }, { "model": "group", "key": "7", "count": 2, "at": now }] });
    assert_eq!(
        s.post("/v1/ts/incr", batch).await.json(),
        json!({ "written": 2 })
    );
    let range = s
        .get(&format!(
            "/v1/ts/group/range?keys=42,7&start={}&end={now}&rollup=10",
            now - 30.0
        ))
        .await
        .json();
    assert_eq!(range["rollup"], 10);
    let k42: i64 = range["series"][0]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[1].as_i64().unwrap())
        .sum();
    assert_eq!(
        (range["series"][0]["key"].clone(), k42),
        (json!("42"), 4),
        "{range}"
    );
    let sums = s
        .get(&format!(
            "/v1/ts/group/sums?keys=7&start={}&end={now}",
            now - 30.0
        ))
        .await
        .json();
    assert_eq!(sums["totals"][0]["total"], 2, "{sums}");
    s.post(
        "/v1/ts/group/distinct",
        json!({ "key": "42", "values": ["a", "b", "a", "c"], "at": now }),
    )
    .await;
    let d = s
        .get(&format!(
            "/v1/ts/group/distinct?keys=42&view=totals&start={}&end={now}",
            now - 30.0
        ))
        .await
        .json();
    assert_eq!(d["totals"][0]["total"], 3, "{d}");
    s.post(
        "/v1/ts/group/frequent",
        json!({ "key": "42", "items": [["x", 5], ["y", 9]], "at": now }),
    )
    .await;
    let top = s
        .get(&format!(
            "/v1/ts/group/top?key=42&n=1&start={}&end={now}",
            now - 30.0
        ))
        .await
        .json();
    assert_eq!(top["items"], json!([{ "item": "y", "count": 9 }]), "{top}");
    s.get("/v1/ts/group/range")
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_input");
    s.get("/v1/ts/group/distinct?keys=42&view=pie")
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_input");
    assert_eq!(
        s.post("/v1/ts/group/merge", json!({ "into": "42", "from": "7" }))
            .await
            .json(),
        json!({ "merged": true })
    );
    assert_eq!(
        s.post("/v1/ts/group/delete", json!({ "keys": ["42"] }))
            .await
            .json(),
        json!({ "deleted": 1 })
    );

    let v = s.post("/v1/daily/314/incr", json!({ "count": 2 })).await;
    assert_eq!(v.status, StatusCode::OK, "{}", v.text);
    assert_eq!(v.json()["total"], 2);
    let views = json!({ "views": [{ "entity": "314", "at": now - 86_400.0 }, { "entity": "99" }] });
    assert_eq!(
        s.post("/v1/daily/incr", views).await.json()["counted"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let summary = s.get("/v1/daily/314?days=3").await.json();
    let counts: Vec<i64> = summary["days"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["count"].as_i64().unwrap())
        .collect();
    assert_eq!(counts, vec![0, 1, 2], "{summary}");
    assert_eq!(
        (summary["today"]["count"].clone(), summary["total"].clone()),
        (json!(2), json!(3))
    );
    let today = summary["today"]["day"].as_str().unwrap().to_owned();
    assert_eq!(
        s.get(&format!("/v1/daily/314/days/{today}")).await.json()["count"],
        2
    );
    s.get("/v1/daily/314/days/2026-13-01")
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_input");
    s.get("/v1/daily/314/days/2026é1-22")
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_input");
}

async fn metrics_are_valid_exposition_text(kind: Kind) {
    let s = server(kind, ServerSettings::default(), false).await;
    s.post("/v1/counters/m/incr", json!({ "count": 2 })).await;
    s.get("/v1/nope").await;
    tally::server::statsd::handle(b"m:1|c\nm:1|zz\nbad line", &s.statsd, s.state.metrics());
    s.flush().await;
    let a = s.get("/metrics").await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(
        a.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let parsed = openmetrics_parser::prometheus::parse_prometheus(&a.text)
        .unwrap_or_else(|e| panic!("invalid exposition text ({e:?}):\n{}", a.text));
    let families: Vec<&String> = parsed.families.keys().collect();
    for family in [
        "tally_http_requests_total",
        "tally_http_request_duration_seconds",
        "tally_increments_accepted_total",
        "tally_increments_written_total",
        "tally_write_batches_total",
        "tally_flush_duration_seconds",
        "tally_cleaner_pass_duration_seconds",
        "tally_cleaner_samples_removed_total",
        "tally_statsd_lines_accepted_total",
        "tally_statsd_lines_rejected_total",
        "tally_statsd_tags_dropped_total",
        "tally_backend_errors_total",
        "tally_rate_limit_checks_total",
    ] {
        assert!(
            families.iter().any(|f| f.as_str() == family),
            "{family} missing from {families:?}"
        );
    }
    assert!(a.text.contains(r#"tally_http_requests_total{method="POST",route="/v1/counters/{name}/incr",status="202"} 1"#), "{}", a.text);
    assert!(
        a.text.contains(
            r#"tally_http_requests_total{method="GET",route="unmatched",status="404"} 1"#
        ),
        "{}",
        a.text
    );
    assert!(
        a.text.contains("tally_statsd_lines_accepted_total 1\n"),
        "{}",
        a.text
    );
    assert!(
        a.text
            .contains(r#"tally_statsd_lines_rejected_total{reason="malformed"} 1"#),
        "{}",
        a.text
    );
    assert!(
        a.text
            .contains(r#"tally_statsd_lines_rejected_total{reason="unknown_type"} 1"#),
        "{}",
        a.text
    );
    assert!(
        a.text.contains("tally_increments_accepted_total 2\n"),
        "{}",
        a.text
    );
}

/// The OpenAPI document: every operation it declares exists on the router
/// (no 404/405), the example requests it gives are answered with the status
/// it declares, and the answers validate against its schemas.
async fn openapi_describes_every_route(kind: Kind) {
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

/// Regression for the fuzzer's findings: 400 exactly when the document
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
    s.get("/v1/ts/m/range?keys=a,,b")
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_name");
    s.get("/v1/ts/m/range?keys=a&rollup=7")
        .await
        .error(StatusCode::BAD_REQUEST, "unknown_precision");
    s.get("/v1/ts/m/top")
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_input");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_socket_round_trip_and_graceful_shutdown() {
    let s = server(Kind::SqliteFile, ServerSettings::default(), false).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(tally::server::serve(listener, s.state.clone(), async {
        let _ = stopped.await;
    }));
    let post = raw_http(addr, "POST /v1/counters/socket/incr HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 13\r\nConnection: close\r\n\r\n{\"count\": 41}").await;
    assert!(post.starts_with("HTTP/1.1 202"), "{post}");
    s.flush().await;
    let get = raw_http(
        addr,
        "GET /v1/counters/socket?precision=60 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(get.starts_with("HTTP/1.1 200"), "{get}");
    assert!(get.contains("41]]"), "{get}");
    stop.send(()).unwrap();
    tokio::time::timeout(tally_testkit::PATIENCE, serving)
        .await
        .expect("serve stops after shutdown")
        .unwrap()
        .unwrap();
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "still accepting after shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statsd_packets_over_udp() {
    let s = server(Kind::RedisTagged, ServerSettings::default(), false).await;
    let listener = Listener::start(&s).await;
    let addr = listener.addr;
    let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    client
        .send_to(
            b"udp:1|c\nudp:2|c|@0.5\ntemp:21|g\nrt:3|ms\nnot a line\nudp:x|c\n",
            addr,
        )
        .await
        .unwrap();
    client.send_to(b"udp:10|c|#env:prod", addr).await.unwrap();
    client
        .send_to(&[0xff, 0xfe, b':', b'1', b'|', b'c'], addr)
        .await
        .unwrap();
    let metrics = s.state.metrics().clone();
    let seen = tally_testkit::wait_until(tally_testkit::PATIENCE, || {
        metrics.statsd_accepted_total() + metrics.statsd_rejected_total() == 8
    });
    assert!(
        seen,
        "accepted {} rejected {}",
        metrics.statsd_accepted_total(),
        metrics.statsd_rejected_total()
    );
    assert_eq!(metrics.statsd_accepted_total(), 5);
    s.flush().await;
    let temp = s.statsd.gauges.service().current("temp").await.unwrap();
    assert_eq!(temp, Some(21.0));
    let rt = s
        .statsd
        .stats
        .service()
        .get("rt", 86_400, &[])
        .await
        .unwrap();
    assert_eq!((rt[0].summary.count, rt[0].summary.sum), (1, 3.0));
    let body = s.get("/v1/counters/udp?precision=86400").await.json();
    assert_eq!(body["precisions"]["86400"][0][1], 1 + 4 + 10, "{body}");
    assert_eq!(
        s.get("/v1/counters?prefix=temp").await.json()["counters"],
        json!([])
    );
    listener.stop().await;
}

/// A statsd listener on a free UDP port feeding `s`' writers.
struct Listener {
    addr: std::net::SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    async fn start(s: &TestServer) -> Self {
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(tally::server::statsd::listen(
            socket,
            s.statsd.clone(),
            s.state.metrics().clone(),
            async {
                let _ = stopped.await;
            },
        ));
        Listener { addr, stop, task }
    }

    /// Stops it and waits until it has.
    async fn stop(self) {
        self.stop.send(()).unwrap();
        tokio::time::timeout(tally_testkit::PATIENCE, self.task)
            .await
            .expect("listener stops")
            .unwrap();
    }
}

/// Issue 9: timers, histograms and distributions sent over UDP become
/// statistics, a sample rate weighing each value as round(1/rate)
/// observations; malformed lines are counted by reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statsd_timers_become_weighted_statistics() {
    let s = server(Kind::SqliteFile, ServerSettings::default(), false).await;
    let listener = Listener::start(&s).await;
    let addr = listener.addr;
    let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    // 10 + 1 + 4 + 1 observations of the timer; the rest is malformed.
    client
        .send_to(
            b"api.rt:20|ms|@0.1\napi.rt:5|ms\napi.rt:40|h|@0.25\napi.rt:-1.5|d|#env:prod\n\
              api.rt:x|ms\napi.rt:1|ms|@2\napi.rt:1|timer\n:1|ms\n",
            addr,
        )
        .await
        .unwrap();
    let metrics = s.state.metrics().clone();
    let seen = tally_testkit::wait_until(tally_testkit::PATIENCE, || {
        metrics.statsd_accepted_total() + metrics.statsd_rejected_total() == 8
    });
    assert!(seen, "accepted {}", metrics.statsd_accepted_total());
    assert_eq!(metrics.statsd_accepted_total(), 4);
    s.flush().await;
    let day = s
        .statsd
        .stats
        .service()
        .get("api.rt", 86_400, &[0.0, 1.0])
        .await
        .unwrap();
    assert_eq!(day.len(), 1);
    let d = &day[0].summary;
    assert_eq!(d.count, 16);
    assert_eq!(d.sum, 20.0 * 10.0 + 5.0 + 40.0 * 4.0 - 1.5);
    assert_eq!((d.min, d.max), (Some(-1.5), Some(40.0)));
    let text = s.get("/metrics").await.text;
    for reason in ["bad_value", "bad_rate", "unknown_type", "bad_name"] {
        assert!(
            text.contains(&format!(
                "tally_statsd_lines_rejected_total{{reason=\"{reason}\"}} 1\n"
            )),
            "{reason}: {text}"
        );
    }
    listener.stop().await;
}

/// The names a list route answers (`/v1/counters`, `/v1/stats`, ...).
async fn listed(s: &TestServer, what: &str) -> Vec<String> {
    let page = s.get(&format!("/v1/{what}")).await.json();
    serde_json::from_value(page[what].clone()).unwrap_or_else(|e| panic!("{e}: {page}"))
}

/// Issue 21: a line's name ends at its first `:`, every sample after it is
/// written under that name (statsd's `hits:1|c:2|c`, DogStatsD's packed
/// `pk:1:2|h`), DogStatsD's container id and time fields are taken, tags
/// are dropped and counted, and a line is all or nothing: nothing lands
/// under any other name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_21_statsd_lines_write_only_under_their_name() {
    let s = server(Kind::SqliteFile, ServerSettings::default(), false).await;
    let now = s.f.clock.now().whole_secs();
    let metrics = s.state.metrics();
    let packet = format!(
        "pk:1:2|h\nhits:1|c:2|c\nct:1|c|c:abc123\nts:1|c|T{}\ntg:1|c|#env:prod\n\
         mix:4|c|@0.5:2|ms:3|g:ann|s|#k:v\n\
         part:1|c:2|ms:x|g\nold:1|c|T1000\nahead:1|c|T{}\nu:a:b|s\n\
         _sc|Redis connection|2|#env:dev|m:timed out\n_e{{5,4}}:title|text\n",
        now - 60,
        now + 3600,
    );
    tally::server::statsd::handle(packet.as_bytes(), &s.statsd, metrics);
    assert_eq!(metrics.statsd_accepted_total(), 6);
    assert_eq!(metrics.statsd_tags_dropped_total(), 2);
    s.flush().await;
    // Nothing was written under any other name.
    assert_eq!(
        listed(&s, "counters").await,
        ["ct", "hits", "mix", "tg", "ts"]
    );
    assert_eq!(listed(&s, "stats").await, ["mix", "pk"]);
    assert_eq!(listed(&s, "gauges").await, ["mix"]);
    assert_eq!(listed(&s, "sets").await, ["mix"]);
    for (name, total) in [("hits", 3), ("ct", 1), ("ts", 1), ("tg", 1), ("mix", 8)] {
        let days = s
            .get(&format!("/v1/counters/{name}?precision=86400"))
            .await
            .json();
        let sum: i64 = days["precisions"]["86400"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[1].as_i64().unwrap())
            .sum();
        assert_eq!(sum, total, "{name}: {days}");
    }
    // `ts` went into the minute of its `T` time, a minute before now.
    let minutes = s.get("/v1/counters/ts?precision=60").await.json();
    assert_eq!(
        minutes["precisions"]["60"],
        json!([[now - 60, 1]]),
        "{minutes}"
    );
    let pk = s
        .statsd
        .stats
        .service()
        .get("pk", 86_400, &[])
        .await
        .unwrap();
    assert_eq!((pk[0].summary.count, pk[0].summary.sum), (2, 3.0));
    assert_eq!(
        (pk[0].summary.min, pk[0].summary.max),
        (Some(1.0), Some(2.0))
    );
    let mix = s
        .statsd
        .stats
        .service()
        .get("mix", 86_400, &[])
        .await
        .unwrap();
    assert_eq!((mix[0].summary.count, mix[0].summary.sum), (1, 2.0));
    assert_eq!(
        s.statsd.gauges.service().current("mix").await.unwrap(),
        Some(3.0)
    );
    let members = s.get("/v1/sets/mix?precision=86400").await.json();
    assert_eq!(members["union"]["count"], 1, "{members}");
    let text = s.get("/metrics").await.text;
    for (reason, n) in [
        ("bad_value", 2),
        ("time_not_kept", 2),
        ("event_or_service_check", 2),
    ] {
        assert!(
            text.contains(&format!(
                "tally_statsd_lines_rejected_total{{reason=\"{reason}\"}} {n}\n"
            )),
            "{reason}: {text}"
        );
    }
    assert!(
        text.contains("tally_statsd_tags_dropped_total 2\n"),
        "{text}"
    );
    // 2 (hits) + 1 + 1 + 1 + 1 (mix): counter samples, not lines.
    assert!(
        text.contains("tally_increments_accepted_total 6\n"),
        "{text}"
    );
}

/// Issue 9: gauge lines over UDP set (`5|g`) and adjust (`+3|g`, `-6|g`)
/// in the order sent; a negative value is set with `0|g` then `-5|g`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statsd_gauges_set_and_adjust_in_order() {
    let s = server(Kind::RedisTagged, ServerSettings::default(), false).await;
    let listener = Listener::start(&s).await;
    let addr = listener.addr;
    let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    client
        .send_to(b"q:5|g\nq:+3|g\nq:-6|g|#env:prod\nq:x|g\n", addr)
        .await
        .unwrap();
    let metrics = s.state.metrics().clone();
    assert!(tally_testkit::wait_until(tally_testkit::PATIENCE, || {
        metrics.statsd_accepted_total() == 3
    }));
    s.flush().await;
    let gauges = s.statsd.gauges.service();
    let day = gauges.get("q", 86_400).await.unwrap();
    assert_eq!((day[0].last, day[0].min, day[0].max), (2.0, 2.0, 8.0));
    client.send_to(b"q:0|g\nq:-5|g", addr).await.unwrap();
    assert!(tally_testkit::wait_until(tally_testkit::PATIENCE, || {
        metrics.statsd_accepted_total() == 5
    }));
    s.flush().await;
    let day = gauges.get("q", 86_400).await.unwrap();
    assert_eq!((day[0].last, day[0].min, day[0].max), (-5.0, -5.0, 8.0));
    assert_eq!(gauges.current("q").await.unwrap(), Some(-5.0));
    assert_eq!(metrics.statsd_rejected_total(), 1);
    listener.stop().await;
}

/// Issue 9: set lines over UDP (`users:ann|s`) count each member once per
/// slice and show up in `GET /v1/sets/{name}`; a member too long is
/// rejected as invalid and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statsd_sets_count_distinct_members() {
    let s = server(Kind::RedisTagged, ServerSettings::default(), false).await;
    let listener = Listener::start(&s).await;
    let addr = listener.addr;
    let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let long = format!("users:{}|s", "x".repeat(256));
    let packet = format!("users:ann|s\nusers:bob|s|#env:prod\nusers:ann|s\n{long}\nusers:|s\n");
    client.send_to(packet.as_bytes(), addr).await.unwrap();
    let metrics = s.state.metrics().clone();
    assert!(tally_testkit::wait_until(tally_testkit::PATIENCE, || {
        metrics.statsd_accepted_total() + metrics.statsd_rejected_total() == 5
    }));
    assert_eq!(metrics.statsd_accepted_total(), 3);
    s.flush().await;
    let read = s.get("/v1/sets/users?precision=86400").await.json();
    assert_eq!(read["precisions"]["86400"][0]["count"], 2, "{read}");
    assert_eq!(read["union"]["count"], 2, "{read}");
    let text = s.get("/metrics").await.text;
    for reason in ["invalid", "bad_value"] {
        assert!(
            text.contains(&format!(
                "tally_statsd_lines_rejected_total{{reason=\"{reason}\"}} 1\n"
            )),
            "{reason}: {text}"
        );
    }
    assert!(!text.contains("unsupported"), "{text}");
    listener.stop().await;
}

/// The issue's loss: a burst larger than the socket's receive buffer is
/// dropped by the kernel, and `/metrics` must show it. Datagrams sent before
/// the listener runs queue in a tiny buffer; the rest are dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statsd_kernel_drops_show_in_metrics() {
    let s = server(Kind::SqliteFile, ServerSettings::default(), false).await;
    let (socket, buffer) = tally::server::udp::bind("127.0.0.1:0".parse().unwrap(), 4096).unwrap();
    assert_eq!(buffer.requested, 4096);
    let addr = socket.local_addr().unwrap();
    let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let sent = 500u64;
    for _ in 0..sent {
        client.send_to(b"flood:1|c", addr).unwrap();
    }
    let metrics = s.state.metrics().clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let listening = tokio::spawn(tally::server::statsd::listen(
        socket,
        s.statsd.clone(),
        metrics.clone(),
        async {
            let _ = stopped.await;
        },
    ));
    // Each datagram was queued or dropped by the kernel: wait until the
    // listener has drained and handled what was queued (not until the count
    // merely stood still for a while, which a stalled listener also does).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let (received, drops) = loop {
        let received = metrics.statsd_datagrams_total();
        let drops = metrics.statsd_kernel_drops().await;
        let drained = drops.is_some_and(|d| received + d == sent)
            && metrics.statsd_accepted_total() == received;
        if drained || std::time::Instant::now() > deadline {
            break (received, drops.expect("a drop counter"));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(
        received > 0 && drops > 0,
        "received {received}, dropped {drops}"
    );
    assert_eq!(drops, sent - received, "received {received} of {sent}");
    assert_eq!(metrics.statsd_accepted_total(), received);
    let a = s.get("/metrics").await;
    openmetrics_parser::prometheus::parse_prometheus(&a.text)
        .unwrap_or_else(|e| panic!("invalid exposition text ({e:?}):\n{}", a.text));
    assert!(
        a.text
            .contains(&format!("tally_statsd_kernel_drops_total {drops}\n")),
        "{}",
        a.text
    );
    assert!(
        a.text.contains(&format!(
            "tally_statsd_datagrams_received_total {received}\n"
        )),
        "{}",
        a.text
    );
    assert!(
        a.text.contains(&format!(
            "tally_statsd_receive_buffer_bytes {}\n",
            buffer.effective
        )),
        "{}",
        a.text
    );
    stop.send(()).unwrap();
    tokio::time::timeout(tally_testkit::PATIENCE, listening)
        .await
        .expect("listener stops")
        .unwrap();
}

/// One HTTP/1.1 exchange over a real socket; the whole answer as text.
async fn raw_http(addr: std::net::SocketAddr, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

async fn buffered_rows_over_http(kind: Kind) {
    let mut s = server(kind, ServerSettings::default(), true).await;
    // No buffers configured: the routes say so.
    s.get("/v1/buffers/stats")
        .await
        .error(StatusCode::NOT_FOUND, "not_found");
    let (_dir, flusher) = with_buffers(&mut s).await;

    let change = json!({ "table": "groups", "key": { "id": "42" }, "add": { "times_seen": 2 }, "set": { "last_seen": "today" } });
    assert_eq!(
        s.post("/v1/buffers/incr", change.clone()).await.json(),
        json!({ "buffered": true })
    );
    assert_eq!(
        s.post("/v1/buffers/incr", change).await.json(),
        json!({ "buffered": true })
    );
    // Pending, not yet in SQL: the read adds them.
    let row = s.get("/v1/buffers/groups/row?id=42").await.json();
    assert_eq!(row["counters"]["times_seen"], 4, "{row}");
    assert_eq!(row["stored"], Value::Null, "{row}");
    assert_eq!(
        s.get("/v1/buffers/stats").await.json()["backlog"]["pending_rows"],
        1
    );
    flusher.drain().await.unwrap();
    let row = s.get("/v1/buffers/groups/row?id=42").await.json();
    assert_eq!(
        (
            row["counters"]["times_seen"].clone(),
            row["last_write"]["last_seen"].clone()
        ),
        (json!(4), json!("today")),
        "{row}"
    );
    assert!(row["stored"].is_object(), "{row}");
    let metrics = s.get("/metrics").await.text;
    assert!(
        metrics.contains("tally_buffer_rows_written_total 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("tally_buffer_pending_rows 0\n"),
        "{metrics}"
    );
    // What the table mapping refuses (an unknown table or column, a missing
    // key column) is 422: the document leaves the mapping to the
    // configuration. What the document refuses is 400.
    let bad = json!({ "table": "nope", "key": { "id": "1" }, "add": { "times_seen": 1 } });
    s.post("/v1/buffers/incr", bad)
        .await
        .error(StatusCode::UNPROCESSABLE_ENTITY, "unprocessable");
    let bad = json!({ "table": "groups", "key": { "id": "1" }, "add": { "drop table": 1 } });
    s.post("/v1/buffers/incr", bad)
        .await
        .error(StatusCode::UNPROCESSABLE_ENTITY, "unprocessable");
    s.get("/v1/buffers/groups/row")
        .await
        .error(StatusCode::UNPROCESSABLE_ENTITY, "unprocessable");
    let bad = json!({ "table": "groups", "key": { "id": "1" }, "add": { "times_seen": 1.5 } });
    s.post("/v1/buffers/incr", bad)
        .await
        .error(StatusCode::BAD_REQUEST, "invalid_json");
}

/// Gives `s` buffered counters over a fresh SQLite sink holding the user's
/// `groups` table (id, times_seen, last_seen).
async fn with_buffers(s: &mut TestServer) -> (tempfile::TempDir, tally::buffers::Flusher) {
    use tally::buffers::{Buffers, Flusher, FlusherSettings, TableConfig, Tables, open_sink};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sink.sqlite3");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE groups (id INTEGER PRIMARY KEY, times_seen INTEGER NOT NULL DEFAULT 0, last_seen TEXT)")
        .unwrap();
    let tables = Tables::new(&[TableConfig {
        name: "groups".into(),
        key: vec!["id".into()],
        counters: vec!["times_seen".into()],
        last_write: vec!["last_seen".into()],
    }])
    .unwrap();
    let buffers = Buffers::new(
        s.f.backend.buffer_store().await.unwrap(),
        tables.clone(),
        std::sync::Arc::new(s.f.clock.clone()),
    );
    let sink = open_sink(&format!("sqlite:{}", db.display()), &tables)
        .await
        .unwrap();
    let flusher = Flusher::new(buffers.clone(), sink, FlusherSettings::default()).unwrap();
    let services = tally::server::Services {
        buffers: Some((buffers, Some(flusher.clone()))),
        ..s.state.services().clone()
    };
    s.state = AppState::new(services, s.state.settings().clone(), Metrics::default());
    s.router = app(s.state.clone());
    (dir, flusher)
}

/// A keyed POST with `body` (sent as this exact text).
async fn keyed(s: &TestServer, uri: &str, body: &str, key: &str) -> Answer {
    let req = Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .body(Body::from(body.to_owned()))
        .unwrap();
    s.send(req).await
}

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
async fn idempotent_writes_over_http(kind: Kind) {
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

/// Issue 11 part 2: a server that applied a keyed write and died before
/// recording its answer leaves no record; the retry runs the request again
/// and must not apply it twice. Each write is first made through the
/// library with the key (what the crashed server did), then sent keyed
/// over HTTP: every total counts it once.
async fn keyed_writes_close_the_crash_window(kind: Kind) {
    let mut s = server(kind, ServerSettings::default(), true).await;
    let (_dir, flusher) = with_buffers(&mut s).await;
    let sv = s.state.services().clone();
    let now = s.f.clock.now().whole_secs() as f64;

    // Counters and statistics (exact mode).
    sv.counters
        .incr_many_once("c-1", &[tally::Increment::new("crash:c", 5).at(now)])
        .await
        .unwrap();
    let a = keyed(
        &s,
        "/v1/counters/crash:c/incr",
        &json!({ "count": 5, "at": now }).to_string(),
        "c-1",
    )
    .await;
    assert_eq!(
        (a.status, a.json()),
        (StatusCode::OK, json!({ "written": 1 }))
    );
    let c = s.get("/v1/counters/crash:c").await.json();
    let total: i64 = c["precisions"]["86400"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[1].as_i64().unwrap())
        .sum();
    assert_eq!(total, 5, "{c}");

    // Gauges: an adjustment applied twice would read 4.
    let gauges = sv.gauges.as_ref().unwrap();
    gauges
        .apply_many_once("g-1", &[GaugeOp::adjust("crash:g", 2.0).at(now)])
        .await
        .unwrap();
    let a = keyed(
        &s,
        "/v1/gauges/crash:g",
        &json!({ "delta": 2, "at": now }).to_string(),
        "g-1",
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(s.get("/v1/gauges/crash:g").await.json()["current"], 2.0);

    // Time series: a count and item counts.
    let ts = sv.tsdb.as_ref().unwrap();
    let inc = TsIncrement::new("crash", "k").count(3);
    ts.incr_multi_once("t-1", std::slice::from_ref(&inc))
        .await
        .unwrap();
    let body = json!({ "increments": [{ "model": "crash", "key": "k", "count": 3 }] });
    let a = keyed(&s, "/v1/ts/incr", &body.to_string(), "t-1").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let sums = s.get("/v1/ts/crash/sums?keys=k").await.json();
    assert_eq!(sums["totals"][0]["total"], 3, "{sums}");
    let items = [("x".to_owned(), 2)];
    ts.record_frequency_once("t-2", "crash", "k", &items, None)
        .await
        .unwrap();
    let body = json!({ "key": "k", "items": [["x", 2]] });
    let a = keyed(&s, "/v1/ts/crash/frequent", &body.to_string(), "t-2").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
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
    let a = keyed(
        &s,
        "/v1/daily/crash-e/incr",
        &json!({ "count": 2 }).to_string(),
        "d-1",
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
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
    let a = keyed(&s, "/v1/buffers/incr", &body.to_string(), "b-1").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
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
    let a = keyed(
        &s,
        "/v1/limits/crash-u/check",
        &json!({ "policy": "api" }).to_string(),
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
    let a = keyed(
        &s,
        "/v1/locks/crash-l/acquire",
        &json!({ "ttl_ms": 10000 }).to_string(),
        "k-1",
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
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

/// Statistics over HTTP (issue 9 part 3): one value and several, a batch
/// all or nothing, reads per precision with a range summary, listing,
/// ranking, bad input (400, nothing written) and delete; in both modes.
async fn stats_over_http(kind: Kind) {
    for exact in [false, true] {
        let s = server(kind, ServerSettings::default(), exact).await;
        let at = (s.f.clock.now().whole_secs() / 60 * 60 + 15) as f64;
        let ok = if exact {
            StatusCode::OK
        } else {
            StatusCode::ACCEPTED
        };
        let a = s
            .post(
                "/v1/stats/lat/record",
                json!({ "values": [10.0, 20.0], "at": at }),
            )
            .await;
        assert_eq!(a.status, ok, "{}", a.text);
        let a = s
            .post("/v1/stats/lat/record", json!({ "value": 30, "at": at }))
            .await;
        assert_eq!(a.status, ok, "{}", a.text);
        // Bad input: 400 naming the problem, nothing written.
        for bad in [
            json!({ "values": [] }),
            json!({ "value": 1.0, "values": [2.0] }),
            json!({ "value": "12" }),
            json!({}),
        ] {
            s.post("/v1/stats/bad/record", bad.clone()).await.error(
                StatusCode::BAD_REQUEST,
                if bad.get("value").is_some_and(|v| v.is_string()) {
                    "invalid_json"
                } else {
                    "invalid_input"
                },
            );
        }
        let batch = json!({ "observations": [{ "name": "ok", "value": 1.0 }, { "name": "bad\u{7}", "value": 2.0 }] });
        s.post("/v1/record", batch)
            .await
            .error(StatusCode::BAD_REQUEST, "invalid_name");
        s.get("/v1/stats/lat?quantiles=0,0.5")
            .await
            .error(StatusCode::BAD_REQUEST, "invalid_input");
        s.get("/v1/stats/top?by=median")
            .await
            .error(StatusCode::BAD_REQUEST, "invalid_input");
        s.get("/v1/stats/lat?precision=7")
            .await
            .error(StatusCode::BAD_REQUEST, "unknown_precision");
        let batch = json!({ "observations": [{ "name": "api:/a", "value": 5.0, "at": at }, { "name": "api:/b", "value": 7.0, "at": at }] });
        assert_eq!(s.post("/v1/record", batch).await.status, ok);
        s.flush().await;
        let body = s
            .get("/v1/stats/lat?precision=60&quantiles=0.5,0.99")
            .await
            .json();
        let slice = &body["precisions"]["60"][0];
        assert_eq!(slice["start"], at as u64 - 15, "{body}");
        assert_eq!(
            (&slice["count"], &slice["sum"], &slice["min"], &slice["max"]),
            (&json!(3), &json!(60.0), &json!(10.0), &json!(30.0))
        );
        assert_eq!(
            (&slice["mean"], &slice["stddev"]),
            (&json!(20.0), &json!(10.0))
        );
        assert_eq!(slice["quantiles"]["0.99"], 30.0, "{body}");
        let all = s
            .get(&format!(
                "/v1/stats/lat?from={}&to={}",
                at - 15.0,
                at + 44.0
            ))
            .await
            .json();
        assert_eq!(all["precisions"].as_object().unwrap().len(), 7, "{all}");
        assert_eq!(all["summary"]["count"], 3, "{all}");
        let list = s.get("/v1/stats?prefix=api:").await.json();
        assert_eq!(list, json!({ "stats": ["api:/a", "api:/b"], "next": null }));
        assert_eq!(
            s.get("/v1/stats?prefix=bad").await.json()["stats"],
            json!([])
        );
        let top = s
            .get(&format!(
                "/v1/stats/top?by=max&prefix=api:&from={}&to={}&limit=1",
                at - 15.0,
                at
            ))
            .await
            .json();
        assert_eq!(top["stats"][0]["name"], "api:/b", "{top}");
        assert_eq!(top["stats"].as_array().unwrap().len(), 1);
        assert_eq!(
            s.call(Method::DELETE, "/v1/stats/lat", None, &[])
                .await
                .json(),
            json!({ "deleted": true })
        );
        s.call(Method::DELETE, "/v1/stats/lat", None, &[])
            .await
            .error(StatusCode::NOT_FOUND, "not_found");
        // A deleted (or never recorded) statistic is not found.
        s.get("/v1/stats/lat")
            .await
            .error(StatusCode::NOT_FOUND, "not_found");
        // The server records its own requests' durations, per route.
        s.flush().await;
        let own = s.get("/v1/stats?prefix=tally:http:latency").await.json();
        let names = own["stats"].as_array().unwrap();
        assert!(names.contains(&json!("tally:http:latency")), "{own}");
        assert!(
            names.contains(&json!("tally:http:latency:POST /v1/stats/{name}/record")),
            "{own}"
        );
    }
}
