//! Tokens, health, `/metrics`, and a real socket with graceful shutdown.

use super::*;

per_backend!(server:
    tokens_guard_writes_and_optionally_reads,
    health_and_readiness,
    metrics_are_valid_exposition_text,
);

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
    p.get_errors(
        StatusCode::UNAUTHORIZED,
        &[
            ("/v1/counters", "unauthorized"),
            ("/metrics", "unauthorized"),
        ],
    )
    .await;
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

async fn metrics_are_valid_exposition_text(kind: Kind) {
    let s = server(kind, ServerSettings::default(), false).await;
    s.post("/v1/counters/m/incr", json!({ "count": 2 })).await;
    s.get("/v1/nope").await;
    tally::server::statsd::handle(b"m:1|c\nm:1|zz\nbad line", &s.statsd, s.state.metrics());
    s.flush().await;
    let a = s.get("/metrics").await;
    a.ok_with_type("text/plain; version=0.0.4");
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

/// One HTTP/1.1 exchange over a real socket; the whole answer as text.
async fn raw_http(addr: std::net::SocketAddr, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}
