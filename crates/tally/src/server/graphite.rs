//! `/graphite/...`: the Graphite render and find API Grafana's built-in
//! Graphite data source reads (its URL is `http://HOST:7070/graphite`).
//!
//! The routes hand the request's parameters (query string, then a form
//! body: urlencoded as Grafana posts renders, or raw as it posts
//! `metrics/find`) to `tally_graphite`, which answers as graphite-web
//! 1.1.10 does, over the [`Source`] of this server's stores. Every route is
//! a read for the token rules, POST included. Errors are graphite-web's
//! (400, `text/html`, `Invalid parameters (...)`), not the JSON API's.
//!
//! What it does not do: tags (names carry none yet: the tag routes answer
//! empty lists), images (any format but `json` and `csv` is refused),
//! events, or writes (carbon's line protocol has its own listener).

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tally_graphite::{Answer, Browse, Graphite, Limits};

use super::AppState;
use crate::clock::SharedClock;
use crate::graphite::merged::MergedQuantile;
use crate::graphite::{DEFAULT_QUANTILES, Family, Namespace, Source};
use crate::stats::Stats;

/// The most series one render may match, by default.
pub const DEFAULT_MAX_SERIES: usize = 10_000;
/// The most points one render may answer, by default.
pub const DEFAULT_MAX_POINTS: usize = 2_000_000;
/// The most nodes one find may answer, by default.
pub const DEFAULT_MAX_FIND: usize = 10_000;

/// The Graphite API's settings: namespace, quantile leaves, limits.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphiteSettings {
    /// Where series sit in the namespace.
    pub namespace: Namespace,
    /// The quantile leaves of statistics.
    pub quantiles: Vec<f64>,
    /// Series per render.
    pub max_series: usize,
    /// Points per render answer.
    pub max_points: usize,
    /// Nodes per find answer.
    pub max_find: usize,
}

impl Default for GraphiteSettings {
    fn default() -> Self {
        GraphiteSettings {
            namespace: Namespace::Tally,
            quantiles: DEFAULT_QUANTILES.to_vec(),
            max_series: DEFAULT_MAX_SERIES,
            max_points: DEFAULT_MAX_POINTS,
            max_find: DEFAULT_MAX_FIND,
        }
    }
}

impl GraphiteSettings {
    /// Checks the settings: quantiles within (0, 1], distinct, at most
    /// [`crate::stats::MAX_QUANTILES`]; every limit at least 1.
    pub fn validate(self) -> crate::Result<Self> {
        crate::stats::check_quantiles(&self.quantiles)?;
        for (i, q) in self.quantiles.iter().enumerate() {
            if !(*q > 0.0 && *q <= 1.0) {
                return Err(crate::Error::Config(format!(
                    "a Graphite quantile must be above 0 and at most 1, got {q}"
                )));
            }
            if self.quantiles[..i].contains(q) {
                return Err(crate::Error::Config(format!(
                    "the Graphite quantile {q} is named twice"
                )));
            }
        }
        for (what, n) in [
            ("graphite-max-series", self.max_series),
            ("graphite-max-points", self.max_points),
            ("graphite-max-find", self.max_find),
        ] {
            if n == 0 {
                return Err(crate::Error::Config(format!("{what} must be at least 1")));
            }
        }
        Ok(self)
    }
}

/// The Graphite API of one server: the source, the function library and
/// the limits. Cheap to clone.
#[derive(Clone)]
pub struct GraphiteApi {
    source: Arc<Source>,
    graphite: Arc<Graphite>,
    limits: Arc<Limits>,
    clock: SharedClock,
}

impl std::fmt::Debug for GraphiteApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphiteApi")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl GraphiteApi {
    /// The API over `tally`'s stores with `settings`.
    pub fn new(tally: &crate::Tally, settings: &GraphiteSettings) -> Self {
        let source = tally.graphite_source(settings.namespace, &settings.quantiles);
        Self::over(source, &tally.stats(), settings, tally.clock().clone())
    }

    /// The API over the series `services` serve (counters, and gauges, sets
    /// and statistics where present), on the counters' clock.
    pub fn of_services(services: &super::Services, settings: &GraphiteSettings) -> Self {
        let counters = &services.counters;
        let store = match (&services.stats, &services.gauges, &services.sets) {
            (Some(s), _, _) => s.store().clone(),
            (None, Some(g), _) => g.store().clone(),
            (None, None, Some(s)) => s.store().clone(),
            (None, None, None) => counters.store().clone(),
        };
        let ns = settings.namespace;
        let mut families = Vec::new();
        for shape in counters.graphite_shapes(ns) {
            families.push(Family::new(counters.space().clone(), store.clone(), shape));
        }
        if let Some(g) = &services.gauges {
            for shape in g.graphite_shapes(ns) {
                families.push(Family::new(g.space().clone(), store.clone(), shape));
            }
        }
        if let Some(s) = &services.sets {
            for shape in s.graphite_shapes(ns) {
                families.push(Family::new(s.space().clone(), store.clone(), shape));
            }
        }
        let mut sketched = Vec::new();
        if let Some(s) = &services.stats {
            for shape in s.graphite_shapes(ns, &settings.quantiles) {
                families.push(Family::new(s.space().clone(), store.clone(), shape));
            }
            sketched = sketched_precisions(s);
        }
        let source = Source::new(families);
        let merged = MergedQuantile::new(&source, &sketched);
        Self::with(source, merged, settings, counters.clock().clone())
    }

    fn over(
        source: Source,
        stats: &Stats,
        settings: &GraphiteSettings,
        clock: SharedClock,
    ) -> Self {
        let merged = MergedQuantile::new(&source, &sketched_precisions(stats));
        Self::with(source, merged, settings, clock)
    }

    fn with(
        source: Source,
        merged: MergedQuantile,
        settings: &GraphiteSettings,
        clock: SharedClock,
    ) -> Self {
        GraphiteApi {
            source: Arc::new(source),
            graphite: Arc::new(Graphite::new().with_function(Arc::new(merged))),
            limits: Arc::new(Limits {
                max_series: settings.max_series,
                max_points: settings.max_points,
                max_find: settings.max_find,
            }),
            clock,
        }
    }

    fn now(&self) -> i64 {
        self.clock.now().as_secs_f64().floor() as i64
    }
}

/// The statistics' precisions that keep a quantile sketch.
fn sketched_precisions(stats: &Stats) -> Vec<u64> {
    let settings = stats.settings();
    settings
        .precisions
        .iter()
        .copied()
        .filter(|&p| settings.keeps_sketch(p))
        .collect()
}

pub(crate) fn routes() -> Router<AppState> {
    // graphite-web answers each of these with and without a trailing `/`.
    let either = [
        ("/render", get(render).post(render)),
        ("/metrics/find", get(browse::<FIND>).post(browse::<FIND>)),
        ("/metrics/expand", get(browse::<EXPAND>)),
        ("/functions", get(functions)),
        ("/version", get(version)),
    ];
    either
        .into_iter()
        .fold(Router::new(), |router, (path, route)| {
            router
                .route(path, route.clone())
                .route(&format!("{path}/"), route)
        })
        .route("/functions/{name}", get(function))
        .route("/tags/autoComplete/tags", get(no_tags))
        .route("/tags/autoComplete/values", get(no_tags))
}

/// The request's parameters: the query string's, then the body's.
fn params(query: Option<String>, body: &Bytes) -> Vec<(String, String)> {
    let mut pairs = tally_graphite::parse_form(query.as_deref().unwrap_or("").as_bytes());
    pairs.extend(tally_graphite::parse_form(body));
    pairs
}

fn respond(answer: Answer) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (
        status,
        [(header::CONTENT_TYPE, answer.content_type)],
        answer.body,
    )
        .into_response();
    for (name, value) in answer.headers {
        if let Ok(value) = http::HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// The 404 of a server without the Graphite API.
fn not_enabled() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/html")],
        "the Graphite API is not enabled on this server",
    )
        .into_response()
}

fn accept(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok())
}

async fn render(State(state): State<AppState>, RawQuery(q): RawQuery, body: Bytes) -> Response {
    let Some(api) = &state.services().graphite else {
        return not_enabled();
    };
    let now = api.now();
    respond(
        api.graphite
            .render(api.source.as_ref(), &params(q, &body), now, &api.limits)
            .await,
    )
}

/// [`browse`]'s `/metrics/find`.
const FIND: bool = false;
/// [`browse`]'s `/metrics/expand`.
const EXPAND: bool = true;

/// `/metrics/find` and `/metrics/expand` (`EXPANDING`): the same request,
/// answered with the nodes or the paths a pattern matches.
async fn browse<const EXPANDING: bool>(
    State(state): State<AppState>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(api) = &state.services().graphite else {
        return not_enabled();
    };
    let endpoint = if EXPANDING {
        Browse::Expand
    } else {
        Browse::Find
    };
    let (source, params, accept) = (api.source.as_ref(), &params(q, &body), accept(&headers));
    respond(
        api.graphite
            .browse(endpoint, source, params, accept, &api.limits)
            .await,
    )
}

async fn functions(State(state): State<AppState>, RawQuery(q): RawQuery) -> Response {
    let Some(api) = &state.services().graphite else {
        return not_enabled();
    };
    respond(api.graphite.functions(&params(q, &Bytes::new())))
}

async fn function(
    State(state): State<AppState>,
    Path(name): Path<String>,
    RawQuery(q): RawQuery,
) -> Response {
    let Some(api) = &state.services().graphite else {
        return not_enabled();
    };
    respond(api.graphite.function(&name, &params(q, &Bytes::new())))
}

async fn version() -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        "1.1.10\n",
    )
        .into_response()
}

async fn no_tags() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], "[]").into_response()
}
