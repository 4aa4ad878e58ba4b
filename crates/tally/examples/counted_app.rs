//! An axum app whose every request is counted into Tally, as a servlet filter
//! counts requests with the book's counters (docs/reference.md): `cargo run
//! -p tally --example counted_app --features middleware` and browse
//! http://127.0.0.1:3000/, then `tally get http:requests` (same data
//! directory) or `tally counters`.
//!
//! Three counters per request, written in batches by the writer (no
//! round trip to the backend on the request path): `http:requests`,
//! `http:route:GET /users/{id}` and `http:status:2xx`; and each request's
//! duration in milliseconds into two statistics, `http:latency` and
//! `http:latency:GET /users/{id}` (`tally stats get "http:latency"`).

use axum::Router;
use axum::extract::Path;
use axum::routing::get;
use tally::Tally;
use tally::counters::CounterWriter;
use tally::requests::CountRequestsLayer;
use tally::stats::StatsWriter;

/// The app: two routes, counted.
fn app(writer: CounterWriter, durations: StatsWriter) -> Router {
    Router::new()
        .route("/", get(|| async { "hello" }))
        .route(
            "/users/{id}",
            get(|Path(id): Path<u32>| async move { format!("user {id}") }),
        )
        .layer(CountRequestsLayer::new(writer).record_durations(durations))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let target = std::env::var("TALLY_DATA_DIR").unwrap_or_else(|_| "tally-data".into());
    let tally = Tally::open(&target).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("counting requests on http://{}/", listener.local_addr()?);
    axum::serve(listener, app(tally.writer(), tally.stats_writer()))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    tally.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    use super::*;

    #[tokio::test]
    async fn every_request_is_counted_by_route_and_status() {
        let tally = Tally::open("sqlite::memory:").await.unwrap();
        let (counters, writer) = (tally.counters(), tally.writer());
        let durations = tally.stats_writer();
        let app = app(writer.clone(), durations.clone());
        for uri in ["/", "/users/1", "/users/2", "/users/x", "/missing"] {
            let res = app
                .clone()
                .oneshot(Request::get(uri).body(Body::empty()).unwrap())
                .await
                .unwrap();
            assert_ne!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
        }
        writer.flush().await.unwrap();
        let total = |name: &str| {
            let counters = counters.clone();
            let name = name.to_owned();
            async move {
                counters
                    .get(&name, 86400)
                    .await
                    .unwrap()
                    .iter()
                    .map(|s| s.count)
                    .sum::<i64>()
            }
        };
        assert_eq!(total("http:requests").await, 5);
        assert_eq!(total("http:route:GET /").await, 1);
        assert_eq!(total("http:route:GET /users/{id}").await, 3);
        assert_eq!(total("http:route:GET unmatched").await, 1);
        assert_eq!(total("http:status:2xx").await, 3);
        // /users/x fails to parse (400) and /missing is 404.
        assert_eq!(total("http:status:4xx").await, 2);
        // Every request's duration, overall and per matched route.
        durations.flush().await.unwrap();
        let stats = tally.stats();
        let all = stats.get("http:latency", 86400, &[]).await.unwrap();
        assert_eq!(all.iter().map(|s| s.summary.count).sum::<u64>(), 5);
        let users = stats
            .get("http:latency:GET /users/{id}", 86400, &[0.5])
            .await
            .unwrap();
        let s = &users[0].summary;
        assert_eq!(s.count, 3);
        // A plausible duration: positive, and well under a second in-process.
        let (min, max) = (s.min.unwrap(), s.max.unwrap());
        assert!(min > 0.0 && max < 1000.0, "{min} ms to {max} ms");
    }
}
