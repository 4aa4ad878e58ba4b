//! The HTTP server behind `tally serve` (feature `server`).
//!
//! [`app`] builds the axum [`Router`]: the versioned JSON API (`/v1/...`) over
//! every service Tally has, `/healthz` and `/readyz`, Prometheus `/metrics`,
//! `/openapi.json`, and the dashboard at `/`. [`serve`] runs it on a listener
//! until a shutdown future completes, then stops accepting and waits for the
//! requests in flight. The binary is a thin shim over these two.
//!
//! Every write route takes an `Idempotency-Key` header ([`idempotency`]):
//! a write sent again with the same key is applied once and answered with
//! the first answer, across restarts and processes sharing the store.
//!
//! Invariants: every error is JSON `{"error": {"code", "message"}}` with the
//! right status ([`ApiError`]); no panic escapes a request (a caught panic is
//! a 500); request bodies, batches, request time and concurrency are bounded
//! ([`ServerSettings`]). Writes (and, when configured, reads) need a bearer
//! token when tokens are set.
//!
//! What it does not do: TLS (put it behind a proxy), or sessions.

mod auth;
mod buffers;
pub mod carbon;
mod check;
mod counters;
mod daily;
mod dashboard;
mod error;
mod extract;
mod gauges;
pub mod graphite;
pub mod idempotency;
mod limits;
mod locks;
pub mod metrics;
pub mod openapi;
mod series;
mod sets;
mod stats;
pub mod statsd;
mod ts;
pub mod udp;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tower::ServiceBuilder;

pub use error::ApiError;
pub use metrics::Metrics;

use crate::buffers::{Buffers, Flusher};
use crate::counters::{CounterWriter, Counters, MAX_BATCH};
use crate::daily::DailyStats;
use crate::gauges::Gauges;
use crate::idempotency::Idempotency;
use crate::limits::{Limit, Limiter};
use crate::locks::Locks;
use crate::requests::CountRequestsLayer;
use crate::sets::Sets;
use crate::stats::{Stats, StatsWriter};
use crate::tsdb::Tsdb;

/// Limits and access rules of the server.
#[derive(Clone, Debug)]
pub struct ServerSettings {
    /// Bearer tokens accepted; when empty, no token is needed.
    pub tokens: Vec<String>,
    /// When tokens are set, reads need one too (not only writes).
    pub protect_reads: bool,
    /// Largest request body accepted, bytes.
    pub max_body_bytes: usize,
    /// Most items in one batch request.
    pub max_batch: usize,
    /// Longest a request may take before it is answered 503.
    pub request_timeout: Duration,
    /// Requests handled at once; more are answered 503 at once.
    pub max_concurrency: usize,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            tokens: Vec::new(),
            protect_reads: false,
            max_body_bytes: 1 << 20,
            max_batch: MAX_BATCH,
            request_timeout: Duration::from_secs(10),
            max_concurrency: 1024,
        }
    }
}

/// The services the server exposes. Counters are always there; the rest
/// are optional (their routes answer 404 when absent).
#[derive(Clone, Debug)]
pub struct Services {
    /// Named counters.
    pub counters: Counters,
    /// The aggregating writer: HTTP increments go through it (answered 202
    /// once accepted) unless `exact_writes`; the server counts its own
    /// requests into it.
    pub counter_writer: Option<CounterWriter>,
    /// Write each HTTP increment before answering (200), even with an
    /// writer.
    pub exact_writes: bool,
    /// Rate limiters, with the named policies of the configuration.
    pub limiter: Option<(Limiter, BTreeMap<String, Limit>)>,
    /// Locks.
    pub locks: Option<Locks>,
    /// The time-series store.
    pub tsdb: Option<Tsdb>,
    /// Per-entity daily statistics.
    pub daily: Option<DailyStats>,
    /// Gauges.
    pub gauges: Option<Gauges>,
    /// Sets (distinct counts).
    pub sets: Option<Sets>,
    /// Buffered counters, and the flusher when it runs in this process.
    pub buffers: Option<(Buffers, Option<Flusher>)>,
    /// Statistics (`/v1/stats`, `/v1/record`).
    pub stats: Option<Stats>,
    /// The statistics' aggregating writer: HTTP observations go through it
    /// (answered 202) unless `exact_writes`; the server records its own
    /// request durations into it.
    pub stats_writer: Option<StatsWriter>,
    /// Idempotency records: with them, every write route takes an
    /// `Idempotency-Key` header; without, a request carrying one is
    /// refused (400).
    pub idempotency: Option<Idempotency>,
    /// The Graphite render and find API (`/graphite/...`); its routes
    /// answer 404 without it.
    pub graphite: Option<graphite::GraphiteApi>,
}

impl Services {
    /// True when HTTP increments go to the aggregating writer.
    pub fn aggregates_increments(&self) -> bool {
        self.counter_writer.is_some() && !self.exact_writes
    }

    /// True when HTTP observations go to the statistics' aggregating
    /// writer.
    pub fn aggregates_observations(&self) -> bool {
        self.stats_writer.is_some() && !self.exact_writes
    }
}

/// A service a server may run without (its routes then answer 404):
/// where [`Services`] holds it, and how the 404 names it.
pub(crate) trait Optional: Sized {
    /// The service with its verb, as the 404 names it ("locks are").
    const WHAT: &'static str;
    /// The service, if the server has it.
    fn of(services: &Services) -> Option<&Self>;
}

/// The [`Optional`] services routes take with [`AppState::service`]: each
/// with its field of [`Services`] and its name in a 404.
macro_rules! optional {
    ($($service:ty => $field:ident, $what:literal;)*) => {
        $(
            impl Optional for $service {
                const WHAT: &'static str = $what;

                fn of(services: &Services) -> Option<&Self> {
                    services.$field.as_ref()
                }
            }
        )*
    };
}

optional! {
    Locks => locks, "locks are";
    Tsdb => tsdb, "the time-series store is";
    DailyStats => daily, "daily statistics are";
}

/// Declares one item of a batch write as the document states it, and its
/// conversion into the library's write: the item's names (`String`
/// fields), then `count` (an integer, default 1) and `at` (Unix seconds,
/// default now); unknown fields are refused.
macro_rules! batch_item {
    ($(#[$attr:meta])* $body:ident => $write:ident { $($name:ident),+ }) => {
        $(#[$attr])*
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct $body {
            $($name: String,)+
            #[serde(default, deserialize_with = "crate::server::check::optional_integer")]
            count: Option<i64>,
            at: Option<f64>,
        }

        impl From<$body> for $write {
            fn from(b: $body) -> Self {
                $write {
                    $($name: b.$name,)+
                    count: b.count.unwrap_or(1),
                    at: b.at,
                }
            }
        }
    };
}
pub(crate) use batch_item;

/// What every handler sees. Cheap to clone.
#[derive(Clone, Debug)]
pub struct AppState {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    services: Services,
    settings: ServerSettings,
    metrics: Metrics,
    /// `openapi.json` with this server's configuration written in.
    document: String,
    /// The handlers of idempotent requests, each in a task of its own;
    /// [`serve`] waits for them after the last connection closed.
    tasks: tokio_util::task::TaskTracker,
}

impl AppState {
    /// State for `services` under `settings`, reporting into `metrics`.
    ///
    /// Idempotency claims are held for three request timeouts (at least
    /// one second, at most the retention): a request's handler ends well
    /// within that, and a retry after a crash waits no longer.
    pub fn new(mut services: Services, settings: ServerSettings, metrics: Metrics) -> Self {
        let document = openapi::render(&services, &settings);
        if let Some(idem) = &services.idempotency {
            let lease = (settings.request_timeout * 3)
                .max(Duration::from_secs(1))
                .min(idem.retention());
            services.idempotency = Some(idem.with_lease(lease).unwrap_or_else(|_| idem.clone()));
        }
        AppState {
            inner: Arc::new(Inner {
                services,
                settings,
                metrics,
                document,
                tasks: tokio_util::task::TaskTracker::new(),
            }),
        }
    }

    /// The tasks running idempotent requests' handlers.
    pub(crate) fn tasks(&self) -> &tokio_util::task::TaskTracker {
        &self.inner.tasks
    }

    /// Waits, for up to three request timeouts, for the handlers of keyed
    /// requests still running after their connections closed (a client
    /// that left); takes no new ones. [`serve`] calls it once the last
    /// connection closed; call it again after shutting the aggregating
    /// writers down ([`crate::Tally::shutdown`]), so that a handler that
    /// was late gives its claim up, its add refused, before the process
    /// exits. Returns how many still run.
    pub async fn finish_requests(&self) -> usize {
        let tasks = self.tasks();
        tasks.close();
        let grace = self.settings().request_timeout * 3;
        if tokio::time::timeout(grace, tasks.wait()).await.is_err() {
            tracing::warn!(
                running = tasks.len(),
                "idempotent requests still running at shutdown; their claims end with their lease"
            );
        }
        tasks.len()
    }

    /// The services.
    pub fn services(&self) -> &Services {
        &self.inner.services
    }

    /// The optional service `S`, or 404 when this server does not have it.
    pub(crate) fn service<S: Optional>(&self) -> Result<&S, ApiError> {
        error::enabled(S::of(self.services()), S::WHAT)
    }

    /// The settings.
    pub fn settings(&self) -> &ServerSettings {
        &self.inner.settings
    }

    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The API document this server serves at `/openapi.json`.
    pub fn document(&self) -> &str {
        &self.inner.document
    }
}

/// The whole application: API, health, metrics, OpenAPI and dashboard.
pub fn app(state: AppState) -> Router {
    let api = Router::new()
        .merge(counters::routes())
        .merge(limits::routes())
        .merge(locks::routes())
        .merge(ts::routes())
        .merge(daily::routes())
        .merge(gauges::routes())
        .merge(sets::routes())
        .merge(buffers::routes())
        .merge(stats::routes())
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            idempotency::layer,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ));
    let graphite_routes = graphite::routes().route_layer(axum::middleware::from_fn_with_state(
        state.clone(),
        auth::require_read_token,
    ));
    let metrics_routes = Router::new()
        .route("/metrics", get(metrics::render))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ));
    let settings = state.settings().clone();
    let mut router = Router::new()
        .nest("/v1", api)
        .nest("/graphite", graphite_routes)
        .merge(metrics_routes)
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/openapi.json", get(openapi::document))
        .merge(dashboard::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(settings.max_body_bytes))
        .layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(overloaded_or_slow))
                .load_shed()
                .concurrency_limit(settings.max_concurrency)
                .timeout(settings.request_timeout),
        )
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            error::panic_response,
        ));
    if let Some(counter_writer) = &state.services().counter_writer {
        // Tally counts its own requests, as any app would with the layer.
        let mut layer = CountRequestsLayer::new(counter_writer.clone()).prefix("tally:http:");
        if let Some(writer) = &state.services().stats_writer {
            // ...and the durations of its requests.
            layer = layer.record_durations(writer.clone());
        }
        router = router.layer(layer);
    }
    router
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            metrics::observe,
        ))
        .with_state(state)
}

/// Serves `app` on `listener` until `shutdown` completes; then stops
/// accepting, finishes the requests in flight (idempotent requests whose
/// client left included, for up to three request timeouts), and returns.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let served = axum::serve(
        listener,
        app(state.clone()).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await;
    state.finish_requests().await;
    served
}

async fn healthz() -> impl IntoResponse {
    axum::Json(serde_json::json!({ "status": "ok" }))
}

async fn readyz(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    state.services().counters.ping().await?;
    Ok(axum::Json(serde_json::json!({ "status": "ready" })))
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method",
    )
}

async fn overloaded_or_slow(err: tower::BoxError) -> Response {
    if err.is::<tower::timeout::error::Elapsed>() {
        ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            "the request took too long",
        )
        .into_response()
    } else if err.is::<tower::load_shed::error::Overloaded>() {
        ApiError::overloaded("too many requests in flight").into_response()
    } else {
        tracing::error!(error = %err, "request failed in a layer");
        ApiError::internal().into_response()
    }
}
