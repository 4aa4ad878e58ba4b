//! `/v1/stats` and `/v1/record`: the statistics API.
//!
//! - `POST /v1/stats/{name}/record` `{"value": 12.5, "at": 1700000000.5}`
//!   or `{"values": [12.5, 3.0], "at": ...}` (`at` optional: now);
//! - `POST /v1/record` `{"observations": [{"name", "value", "at"}, ...]}`,
//!   all or nothing;
//! - `GET /v1/stats/{name}?precision=&from=&to=&quantiles=0.5,0.99`: slices
//!   per precision (each `{"start", "count", "sum", "min", "max", "mean",
//!   "stddev", "quantiles"}`), and with `from` or `to` the range's merged
//!   summary too;
//! - `GET /v1/stats?prefix=&cursor=&limit=`: names in order, paginated;
//! - `GET /v1/stats/top?by=mean|p50|p90|p99|max&prefix=&from=&to=&limit=`:
//!   the stats ranking highest over a range (the book's "slowest pages");
//! - `DELETE /v1/stats/{name}`.
//!
//! Writes follow the counters' modes: with an aggregating writer (and not
//! `exact_writes`) an observation is answered `202 {"accepted": n}` once the
//! writer holds it; without, `200 {"written": n}` once stored. With an
//! `Idempotency-Key`, an exact write carries its key's write id (applied at
//! most once, as a counter's); an aggregated one is claimed by the
//! idempotency layer around the handler (see [`super::idempotency`] for
//! the window that leaves).
//!
//! What it does not do: weights (the library's and statsd's), or merged
//! summaries of several stats (the library's [`crate::Stats::summary`]).

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use super::check::{self, not_null, query_integer};
use super::error::{JsonBody, PathParam, QueryParams};
use super::series::{self, Keys, ServedKind};
use super::{ApiError, AppState, Services};
use crate::error::Result;
use crate::stats::{
    DEFAULT_QUANTILES, Figure, MAX_BATCH, MAX_QUANTILES, Observation, RangeSummary, Ranked,
    StatRules, Stats, StatsWriter,
};

/// The most stats one `GET /v1/stats/top` returns.
const MAX_TOP: usize = 1000;

pub(crate) fn routes() -> Router<AppState> {
    series::routes::<Stats>()
        .route(
            "/record",
            series::batch::<Stats, BatchBody, _>(
                |b| ("observations", b.observations, MAX_BATCH),
                check_observation,
            ),
        )
        .route("/stats/top", get(top))
        .route("/stats/{name}/record", post(record_one))
}

/// The body of `POST /v1/stats/{name}/record`: one value or several.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordBody {
    #[serde(default, deserialize_with = "not_null")]
    value: Option<f64>,
    #[serde(default, deserialize_with = "not_null")]
    values: Option<Vec<f64>>,
    at: Option<f64>,
}

/// One observation of `POST /v1/record`, as the document states it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ObservationBody {
    name: String,
    value: f64,
    at: Option<f64>,
}

impl From<ObservationBody> for Observation {
    fn from(b: ObservationBody) -> Self {
        Observation {
            name: b.name,
            value: b.value,
            at: b.at,
            weight: None,
        }
    }
}

/// The body of `POST /v1/record`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody {
    observations: Vec<ObservationBody>,
}

/// An observation's fields: a name, a finite value, a time.
fn check_observation(prefix: &str, o: &Observation) -> Result<(), ApiError> {
    let field = |member: &str| format!("{prefix}{member}");
    check::name(&field("name"), &o.name)?;
    if !o.value.is_finite() {
        return Err(ApiError::field(
            &field("value"),
            "invalid_input",
            format!("{} is not a finite number", o.value),
        ));
    }
    check::time(&field("at"), o.at)
}

async fn record_one(
    State(state): State<AppState>,
    keys: Keys,
    PathParam(name): PathParam<String>,
    JsonBody(body): JsonBody<RecordBody>,
) -> Result<Response, ApiError> {
    series::service::<Stats>(&state)?;
    let max = super::openapi::max_batch(state.settings(), MAX_BATCH);
    let values = match (body.value, body.values) {
        (Some(v), None) => vec![v],
        (None, Some(vs)) => {
            check::items("values", vs.len(), 1, max)?;
            vs
        }
        _ => {
            return Err(ApiError::bad_request(
                "give exactly one of `value` (a number) or `values` (1 or more numbers)",
            ));
        }
    };
    let observations: Vec<Observation> = values
        .into_iter()
        .map(|value| Observation {
            name: name.clone(),
            value,
            at: body.at,
            weight: None,
        })
        .collect();
    for (i, o) in observations.iter().enumerate() {
        let prefix = if observations.len() == 1 {
            String::new()
        } else {
            format!("values[{i}].")
        };
        check_observation(&prefix, o)?;
    }
    let n = observations.len();
    series::write::<Stats>(&state, keys, &observations, n).await
}

impl ServedKind for StatRules {
    const PLURAL: &'static str = "stats";
    const FAMILY: &'static str = "statistics";
    const NOUN: &'static str = "statistic";
    type Writer = StatsWriter;
    type Query = ReadQuery;

    fn of(services: &Services) -> Option<&Stats> {
        services.stats.as_ref()
    }

    fn writer(services: &Services) -> Option<&StatsWriter> {
        services.stats_writer.as_ref()
    }

    async fn read(
        stats: &Stats,
        state: &AppState,
        name: String,
        q: ReadQuery,
    ) -> Result<Response, ApiError> {
        check::time("from", q.from)?;
        check::time("to", q.to)?;
        let qs = quantiles(q.quantiles.as_deref())?;
        check::precision(&stats.settings().precisions, q.precision)?;
        // The range is checked before the read: a reversed one is refused
        // whether or not the statistic exists.
        let range = if q.from.is_some() || q.to.is_some() {
            Some(range(state, q.from, q.to)?)
        } else {
            None
        };
        let slices = series::slices(q.from, q.to);
        let Some(read) = stats.read(&name, q.precision, slices, &qs).await? else {
            // Nothing kept at any precision: never recorded, deleted, or
            // all of it past retention.
            return Err(ApiError::not_found(format!("no statistic named {name:?}")));
        };
        let summary = match range {
            Some((from, to)) => Some(stats.summary(&[name.as_str()], from, to, &qs).await?),
            None => None,
        };
        Ok(axum::Json(ReadAnswer {
            samples_kept: stats.settings().samples,
            precisions: series::by_precision(read.into_iter().map(|s| (s.precision, s.slices))),
            name,
            summary,
        })
        .into_response())
    }
}

/// `quantiles=0.5,0.99`: 1 to [`MAX_QUANTILES`] numbers in `(0, 1]`;
/// absent: [`DEFAULT_QUANTILES`].
fn quantiles(list: Option<&str>) -> Result<Vec<f64>, ApiError> {
    let Some(list) = list else {
        return Ok(DEFAULT_QUANTILES.to_vec());
    };
    let parts: Vec<&str> = list.split(',').collect();
    check::items("quantiles", parts.len(), 1, MAX_QUANTILES)?;
    parts
        .iter()
        .enumerate()
        .map(|(i, part)| match part.parse::<f64>() {
            Ok(q) if q > 0.0 && q <= 1.0 => Ok(q),
            _ => Err(ApiError::field(
                &format!("quantiles[{i}]"),
                "invalid_input",
                format!("{part:?} is not a quantile: a number above 0, at most 1"),
            )),
        })
        .collect()
}

series::range_query!(
    /// `GET /v1/stats/{name}?precision=&from=&to=&quantiles=`.
    ReadQuery {
        quantiles: Option<String>,
    }
);

/// `GET /v1/stats/{name}`.
#[derive(Debug, Serialize)]
struct ReadAnswer {
    name: String,
    samples_kept: u64,
    /// Slices keyed by precision, ascending, oldest first.
    precisions: serde_json::Map<String, serde_json::Value>,
    /// The range `[from, to]` merged, when either was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<RangeSummary>,
}

/// A range's ends, Unix seconds: `to` defaults to now, `from` to an hour
/// before `to` (or 0).
fn range(state: &AppState, from: Option<f64>, to: Option<f64>) -> Result<(u64, u64), ApiError> {
    check::time("from", from)?;
    check::time("to", to)?;
    let now = series::service::<Stats>(state)?.clock().now().as_secs_f64();
    let to = to.unwrap_or(now);
    let from = from.unwrap_or((to - 3600.0).max(0.0));
    check::range_order("to", from, to)?;
    Ok((from.floor() as u64, to.floor() as u64))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopQuery {
    by: Option<String>,
    prefix: Option<String>,
    from: Option<f64>,
    to: Option<f64>,
    #[serde(default, deserialize_with = "query_integer")]
    limit: Option<usize>,
}

/// `GET /v1/stats/top`.
#[derive(Debug, Serialize)]
struct TopAnswer {
    by: String,
    from: u64,
    to: u64,
    stats: Vec<Ranked>,
}

/// The figures a ranking may be `by`, as the document lists them.
const BY: [&str; 5] = ["mean", "p50", "p90", "p99", "max"];

async fn top(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<TopQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let stats = series::service::<Stats>(&state)?;
    let by = q.by.as_deref().unwrap_or("mean");
    if !BY.contains(&by) {
        return Err(ApiError::field(
            "by",
            "invalid_input",
            format!(
                "{by:?} is not a figure to rank by: one of {}",
                BY.join(", ")
            ),
        ));
    }
    let figure: Figure = by.parse().map_err(ApiError::invalid)?;
    let limit = q.limit.unwrap_or(10);
    check::within("limit", "invalid_input", limit, 1, MAX_TOP)?;
    let prefix = q.prefix.as_deref().unwrap_or("");
    check::prefix("prefix", prefix)?;
    let (from, to) = range(&state, q.from, q.to)?;
    let ranked = stats.top(figure, prefix, from, to, limit).await?;
    Ok(axum::Json(TopAnswer {
        by: by.to_owned(),
        from,
        to,
        stats: ranked,
    }))
}
