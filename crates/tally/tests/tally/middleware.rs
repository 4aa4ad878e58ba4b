//! The rate-limit tower layer on a small axum app: `oneshot` requests, and
//! one over a real socket keyed by the client's address.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::{HeaderName, Request, StatusCode};
use tally::limits::middleware::RateLimitLayer;
use tally::{Algorithm, Backend, BackendConfig, Limit, Limiter, ManualClock};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;

/// A manual clock at `secs`, and a limiter on SQLite in memory that reads it.
async fn limiter_at(secs: f64) -> (ManualClock, Limiter) {
    let clock = ManualClock::at(secs);
    let backend = Backend::open(&BackendConfig::SqliteMemory).await.unwrap();
    let limiter = Limiter::new(
        backend.limiter_store().await.unwrap(),
        Arc::new(clock.clone()),
    );
    (clock, limiter)
}

fn app(layer: RateLimitLayer) -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

fn req(key: Option<&str>) -> Request<Body> {
    let mut b = Request::builder().uri("/");
    if let Some(k) = key {
        b = b.header("x-api-key", k);
    }
    b.body(Body::empty()).unwrap()
}

fn header(resp: &http::Response<Body>, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
}

#[tokio::test]
async fn answers_429_with_retry_after_and_ratelimit_headers() {
    let (clock, limiter) = limiter_at(1_000_000.5).await;
    let layer = RateLimitLayer::per_header(
        limiter,
        Limit::new(Algorithm::Fixed, 2, 60_000),
        HeaderName::from_static("x-api-key"),
    )
    .unwrap();
    let app = app(layer);
    for remaining in ["1", "0"] {
        let resp = app.clone().oneshot(req(Some("alice"))).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(header(&resp, "ratelimit-limit").as_deref(), Some("2"));
        assert_eq!(
            header(&resp, "ratelimit-remaining").as_deref(),
            Some(remaining)
        );
        // The window ends at 1_020_000 s: 19.5 s away, rounded up.
        assert_eq!(header(&resp, "ratelimit-reset").as_deref(), Some("20"));
    }
    let resp = app.clone().oneshot(req(Some("alice"))).await.unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&resp, "retry-after").as_deref(), Some("20"));
    assert_eq!(header(&resp, "ratelimit-remaining").as_deref(), Some("0"));
    let body = axum::body::to_bytes(resp.into_body(), 1 << 16)
        .await
        .unwrap();
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"], "rate_limited");
    assert_eq!(body["decision"]["retry_after_ms"], 19_500);
    // Another key has its own budget; a request without the header is exempt.
    assert_eq!(
        app.clone()
            .oneshot(req(Some("bob")))
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    let resp = app.clone().oneshot(req(None)).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(header(&resp, "ratelimit-limit").is_none());
    // A key that is not a valid name is a 400, not a crash or a pass.
    let resp = app
        .clone()
        .oneshot(req(Some(&"k".repeat(300))))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    // The next window admits alice again.
    clock.advance(20.0);
    assert_eq!(
        app.oneshot(req(Some("alice"))).await.unwrap().status(),
        StatusCode::OK
    );
}

#[test]
fn a_bad_limit_fails_when_the_layer_is_built() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (_, limiter) = rt.block_on(limiter_at(1.0));
    let e =
        RateLimitLayer::per_client_ip(limiter, Limit::new(Algorithm::Gcra, 0, 1_000)).unwrap_err();
    assert!(e.to_string().contains("a limit must be 1"), "{e}");
}

async fn get_status(addr: SocketAddr) -> (String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    let status = text.lines().next().unwrap_or_default().to_owned();
    (status, text.to_ascii_lowercase())
}

#[tokio::test]
async fn limits_by_client_address_over_a_real_socket() {
    let (_, limiter) = limiter_at(5_000.0).await;
    let layer =
        RateLimitLayer::per_client_ip(limiter, Limit::new(Algorithm::Gcra, 1, 10_000)).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        axum::serve(
            listener,
            app(layer).into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    let (status, _) = get_status(addr).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let (status, text) = get_status(addr).await;
    assert_eq!(status, "HTTP/1.1 429 Too Many Requests");
    assert!(text.contains("retry-after: 10\r\n"), "{text}");
    assert!(text.contains("ratelimit-limit: 1\r\n"), "{text}");
    server.abort();
}
