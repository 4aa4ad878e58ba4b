//! `/v1/ts`: the time-series store over HTTP.
//!
//! Writes: `POST /v1/ts/incr` `{"increments": [{"model", "key", "count",
//! "at"}]}`; `POST /v1/ts/{model}/incr` `{"key", "count", "at"}`;
//! `POST /v1/ts/{model}/distinct` `{"key", "values": [...], "at"}`;
//! `POST /v1/ts/{model}/frequent` `{"key", "items": [["item", n], ...],
//! "at"}`; `POST /v1/ts/{model}/merge` `{"into", "from"}`;
//! `POST /v1/ts/{model}/delete` `{"keys": [...]}`.
//!
//! Reads take `keys` (comma-separated), `start` and `end` (Unix seconds;
//! default the last hour) and an optional `rollup` (seconds; default the
//! finest whose retention covers the range): `GET /v1/ts/{model}/range`,
//! `/sums`, `/distinct?view=series|totals|union`, and `/top?key=&n=`.

use axum::Router;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde::Deserialize;

use super::error::{JsonBody, PathParam, QueryParams};
use super::{ApiError, AppState};
use crate::tsdb::{TsIncrement, Tsdb};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/ts/incr", post(incr_many))
        .route("/ts/{model}/incr", post(incr_one))
        .route("/ts/{model}/distinct", post(record_distinct).get(distinct))
        .route("/ts/{model}/frequent", post(record_frequent))
        .route("/ts/{model}/merge", post(merge))
        .route("/ts/{model}/delete", post(delete))
        .route("/ts/{model}/range", get(range))
        .route("/ts/{model}/sums", get(sums))
        .route("/ts/{model}/top", get(top))
}

fn tsdb(state: &AppState) -> Result<&Tsdb, ApiError> {
    state
        .services()
        .tsdb
        .as_ref()
        .ok_or_else(|| ApiError::not_found("the time-series store is not enabled on this server"))
}

fn record(state: &AppState) -> impl Fn(&crate::Error) + '_ {
    |e| state.metrics().backend_error_if(e)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody {
    increments: Vec<TsIncrement>,
}

async fn incr_many(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<BatchBody>,
) -> Result<impl IntoResponse, ApiError> {
    let n = body.increments.len();
    tsdb(&state)?
        .incr_multi(&body.increments)
        .await
        .inspect_err(record(&state))?;
    Ok(axum::Json(serde_json::json!({ "written": n })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IncrBody {
    key: String,
    #[serde(default)]
    count: Option<i64>,
    #[serde(default)]
    at: Option<f64>,
}

async fn incr_one(
    State(state): State<AppState>,
    PathParam(model): PathParam<String>,
    JsonBody(body): JsonBody<IncrBody>,
) -> Result<impl IntoResponse, ApiError> {
    let inc = TsIncrement {
        model,
        key: body.key,
        count: body.count.unwrap_or(1),
        at: body.at,
    };
    tsdb(&state)?
        .incr_multi(std::slice::from_ref(&inc))
        .await
        .inspect_err(record(&state))?;
    Ok(axum::Json(serde_json::json!({ "written": 1 })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DistinctBody {
    key: String,
    values: Vec<String>,
    #[serde(default)]
    at: Option<f64>,
}

async fn record_distinct(
    State(state): State<AppState>,
    PathParam(model): PathParam<String>,
    JsonBody(body): JsonBody<DistinctBody>,
) -> Result<impl IntoResponse, ApiError> {
    tsdb(&state)?
        .record(&model, &body.key, &body.values, body.at)
        .await
        .inspect_err(record(&state))?;
    Ok(axum::Json(
        serde_json::json!({ "recorded": body.values.len() }),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FrequentBody {
    key: String,
    items: Vec<(String, i64)>,
    #[serde(default)]
    at: Option<f64>,
}

async fn record_frequent(
    State(state): State<AppState>,
    PathParam(model): PathParam<String>,
    JsonBody(body): JsonBody<FrequentBody>,
) -> Result<impl IntoResponse, ApiError> {
    tsdb(&state)?
        .record_frequency(&model, &body.key, &body.items, body.at)
        .await
        .inspect_err(record(&state))?;
    Ok(axum::Json(
        serde_json::json!({ "recorded": body.items.len() }),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MergeBody {
    into: String,
    from: String,
}

async fn merge(
    State(state): State<AppState>,
    PathParam(model): PathParam<String>,
    JsonBody(body): JsonBody<MergeBody>,
) -> Result<impl IntoResponse, ApiError> {
    tsdb(&state)?
        .merge(&model, &body.into, &body.from)
        .await
        .inspect_err(record(&state))?;
    Ok(axum::Json(serde_json::json!({ "merged": true })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteBody {
    keys: Vec<String>,
}

async fn delete(
    State(state): State<AppState>,
    PathParam(model): PathParam<String>,
    JsonBody(body): JsonBody<DeleteBody>,
) -> Result<impl IntoResponse, ApiError> {
    tsdb(&state)?
        .delete(&model, &body.keys)
        .await
        .inspect_err(record(&state))?;
    Ok(axum::Json(
        serde_json::json!({ "deleted": body.keys.len() }),
    ))
}

/// The shared query of range reads.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RangeQuery {
    keys: Option<String>,
    key: Option<String>,
    start: Option<f64>,
    end: Option<f64>,
    rollup: Option<u64>,
    view: Option<String>,
    n: Option<usize>,
}

impl RangeQuery {
    fn keys(&self) -> Result<Vec<String>, ApiError> {
        let keys: Vec<String> = self
            .keys
            .as_deref()
            .or(self.key.as_deref())
            .unwrap_or("")
            .split(',')
            .filter(|k| !k.is_empty())
            .map(str::to_owned)
            .collect();
        if keys.is_empty() {
            return Err(ApiError::bad_request("give `keys` (comma-separated)"));
        }
        Ok(keys)
    }

    /// `(start, end)`, defaulting to the last hour before now.
    fn span(&self, state: &AppState) -> (f64, f64) {
        let now = state.services().counters.clock().now().as_secs_f64();
        let end = self.end.unwrap_or(now);
        (self.start.unwrap_or(end - 3600.0), end)
    }
}

async fn range(
    State(state): State<AppState>,
    PathParam(model): PathParam<String>,
    QueryParams(q): QueryParams<RangeQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let (start, end) = q.span(&state);
    let series = tsdb(&state)?
        .get_range(&model, &q.keys()?, start, end, q.rollup)
        .await
        .inspect_err(record(&state))?;
    Ok(axum::Json(series))
}

async fn sums(
    State(state): State<AppState>,
    PathParam(model): PathParam<String>,
    QueryParams(q): QueryParams<RangeQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let (start, end) = q.span(&state);
    let totals = tsdb(&state)?
        .get_sums(&model, &q.keys()?, start, end, q.rollup)
        .await
        .inspect_err(record(&state))?;
    Ok(axum::Json(totals))
}

async fn distinct(
    State(state): State<AppState>,
    PathParam(model): PathParam<String>,
    QueryParams(q): QueryParams<RangeQuery>,
) -> Result<axum::response::Response, ApiError> {
    let (start, end) = q.span(&state);
    let keys = q.keys()?;
    let ts = tsdb(&state)?;
    Ok(match q.view.as_deref().unwrap_or("series") {
        "series" => axum::Json(
            ts.get_distinct_series(&model, &keys, start, end, q.rollup)
                .await
                .inspect_err(record(&state))?,
        )
        .into_response(),
        "totals" => axum::Json(
            ts.get_distinct_totals(&model, &keys, start, end, q.rollup)
                .await
                .inspect_err(record(&state))?,
        )
        .into_response(),
        "union" => axum::Json(
            ts.get_distinct_union(&model, &keys, start, end, q.rollup)
                .await
                .inspect_err(record(&state))?,
        )
        .into_response(),
        other => {
            return Err(ApiError::bad_request(format!(
                "view must be series, totals or union, got {other:?}"
            )));
        }
    })
}

async fn top(
    State(state): State<AppState>,
    PathParam(model): PathParam<String>,
    QueryParams(q): QueryParams<RangeQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let (start, end) = q.span(&state);
    let key = q
        .key
        .clone()
        .ok_or_else(|| ApiError::bad_request("give `key`"))?;
    let items = tsdb(&state)?
        .get_top(&model, &key, start, end, q.n.unwrap_or(10), q.rollup)
        .await
        .inspect_err(record(&state))?;
    Ok(axum::Json(items))
}
