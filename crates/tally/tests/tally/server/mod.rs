//! The HTTP server: every route and error path on the router without a
//! socket (`oneshot`), on SQLite and a real redis-server; plus a real-socket
//! run with graceful shutdown, statsd over real UDP, and `/metrics` checked
//! by an independent parser of the exposition format.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use common::{Fixture, Kind};
use serde_json::{Value, json};
use tally::counters::{CounterWriter, WriterSettings};
use tally::gauges::GaugesWriter;
use tally::limits::{Algorithm, Limit, Limiter};
use tally::server::statsd::Targets;
use tally::server::{AppState, Metrics, ServerSettings, Services, app};
use tally::sets::SetsWriter;
use tally::stats::StatsWriter;
use tally::statsd::Target;
use tally::tsdb::TsIncrement;
use tally::{Clock, DailySettings, GaugeOp, Locks, StatsSettings, TsdbSettings};
use tower::ServiceExt;

const TOKEN: &str = "s3cret-token";

struct TestServer {
    f: Fixture,
    state: AppState,
    router: Router,
    counter_writer: CounterWriter,
    /// The statsd listener's other writers (the counters' is
    /// `counter_writer`).
    writers: Writers,
    /// The statsd listener's targets: every writer.
    statsd: Targets,
}

/// The writers of statistics, gauges and sets.
struct Writers {
    stats: StatsWriter,
    gauges: GaugesWriter,
    sets: SetsWriter,
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

/// The server's writers' settings: a flush every 20 ms.
fn flushing_every_20ms() -> WriterSettings {
    WriterSettings {
        flush_interval: Duration::from_millis(20),
        ..WriterSettings::default()
    }
}

async fn server(kind: Kind, settings: ServerSettings, exact: bool) -> TestServer {
    let f = Fixture::near_now(kind).await;
    let clock = std::sync::Arc::new(f.clock.clone());
    let counter_writer = CounterWriter::start(f.counters.clone(), flushing_every_20ms()).unwrap();
    let stats = f.stats(StatsSettings::default()).await;
    let stats_writer = StatsWriter::start(stats.clone(), flushing_every_20ms()).unwrap();
    let writers = Writers {
        stats: stats_writer.clone(),
        gauges: GaugesWriter::start(
            f.gauges(&f.counters.settings().precisions, 10, false).await,
            flushing_every_20ms(),
        )
        .unwrap(),
        sets: SetsWriter::start(
            f.sets(&f.counters.settings().precisions, 10).await,
            flushing_every_20ms(),
        )
        .unwrap(),
    };
    let statsd = Targets::new([
        Target::of(counter_writer.clone()),
        Target::of(writers.stats.clone()),
        Target::of(writers.gauges.clone()),
        Target::of(writers.sets.clone()),
    ]);
    let mut policies = BTreeMap::new();
    policies.insert("api".to_owned(), Limit::new(Algorithm::Fixed, 2, 60_000));
    let services = Services {
        counters: f.counters.clone(),
        counter_writer: Some(counter_writer.clone()),
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
        gauges: Some(writers.gauges.service().clone()),
        sets: Some(writers.sets.service().clone()),
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
        counter_writer,
        writers,
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

    /// Asserts a 200 answer whose content type starts with `prefix`.
    fn ok_with_type(&self, prefix: &str) {
        assert_eq!(self.status, StatusCode::OK, "{}", self.text);
        let content_type = self.headers["content-type"].to_str().unwrap();
        assert!(content_type.starts_with(prefix), "{content_type}");
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

    /// Asserts that DELETE `uri` deletes, and that a second one answers
    /// `not_found`.
    async fn delete_once(&self, uri: &str) {
        let a = self.call(Method::DELETE, uri, None, &[]).await;
        assert_eq!(a.json(), json!({ "deleted": true }));
        self.call(Method::DELETE, uri, None, &[])
            .await
            .error(StatusCode::NOT_FOUND, "not_found");
    }

    /// A POST of `body` as this exact text, with this content type if any.
    async fn post_text(&self, uri: &str, content_type: Option<&str>, body: &str) -> Answer {
        let mut req = Request::post(uri);
        if let Some(t) = content_type {
            req = req.header("content-type", t);
        }
        self.send(req.body(Body::from(body.to_owned())).unwrap())
            .await
    }

    /// Asserts that each GET of `(uri, code)` answers an error with
    /// `status` and that code.
    async fn get_errors(&self, status: StatusCode, cases: &[(&str, &str)]) {
        for (uri, code) in cases {
            self.get(uri).await.error(status, code);
        }
    }

    /// Stops the fixture's writers (what [`Drop`] does on a runtime of
    /// several threads).
    async fn shutdown(&self) {
        self.writers.stats.shutdown().await;
        self.writers.gauges.shutdown().await;
        self.writers.sets.shutdown().await;
        self.counter_writer.shutdown().await;
    }

    async fn flush(&self) {
        self.counter_writer.flush().await.unwrap();
        self.writers.stats.flush().await.unwrap();
        self.writers.gauges.flush().await.unwrap();
        self.writers.sets.flush().await.unwrap();
    }
}

mod buffers;
mod counters;
mod gauges;
mod idempotency;
mod limits_locks;
mod openapi_and_errors;
mod serving;
mod sets;
mod stats;
mod statsd;
mod ts_daily;

// What `redis_cluster` runs, from the modules that hold them.
use counters::{
    batches_are_all_or_nothing, increments_show_up_in_reads, listing_searches_and_pages,
};
use idempotency::{idempotent_writes_over_http, keyed_writes_close_the_crash_window};
use limits_locks::{locks_over_http, rate_limit_checks};
use openapi_and_errors::openapi_describes_every_route;
use stats::stats_over_http;
use ts_daily::time_series_and_daily_over_http;

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

/// The sum of a counter read's day samples (`precisions.86400`).
fn day_total(read: &Value) -> i64 {
    read["precisions"]["86400"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[1].as_i64().unwrap())
        .sum()
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
