//! `/v1/daily`: per-entity daily statistics over HTTP.
//!
//! - `POST /v1/daily/{entity}/incr` `{"count": 1, "at": ...}` (optional);
//! - `POST /v1/daily/incr` `{"views": [{"entity", "count", "at"}, ...]}`;
//! - `GET /v1/daily/{entity}?days=30`: the last N days (oldest first,
//!   missing days as 0), today and the all-time total;
//! - `GET /v1/daily/{entity}/days/{YYYY-MM-DD}`: one day.

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde::Deserialize;

use super::counters::optional_json;
use super::error::{JsonBody, PathParam, QueryParams, RawBody};
use super::{ApiError, AppState};
use crate::daily::{DailyStats, Day, View};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/daily/incr", post(incr_many))
        .route("/daily/{entity}", get(summary))
        .route("/daily/{entity}/incr", post(incr_one))
        .route("/daily/{entity}/days/{day}", get(one_day))
}

fn daily(state: &AppState) -> Result<&DailyStats, ApiError> {
    state
        .services()
        .daily
        .as_ref()
        .ok_or_else(|| ApiError::not_found("daily statistics are not enabled on this server"))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct IncrBody {
    count: Option<i64>,
    at: Option<f64>,
}

async fn incr_one(
    State(state): State<AppState>,
    PathParam(entity): PathParam<String>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<impl IntoResponse, ApiError> {
    let body: IncrBody = optional_json(&headers, &body)?;
    let counted = daily(&state)?
        .incr_by(&entity, body.count.unwrap_or(1), body.at)
        .await
        .inspect_err(|e| state.metrics().backend_error_if(e))?;
    Ok(axum::Json(counted))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody {
    views: Vec<View>,
}

async fn incr_many(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<BatchBody>,
) -> Result<impl IntoResponse, ApiError> {
    let counted = daily(&state)?
        .incr_many(&body.views)
        .await
        .inspect_err(|e| state.metrics().backend_error_if(e))?;
    Ok(axum::Json(serde_json::json!({ "counted": counted })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SummaryQuery {
    days: Option<u32>,
}

async fn summary(
    State(state): State<AppState>,
    PathParam(entity): PathParam<String>,
    QueryParams(q): QueryParams<SummaryQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let daily = daily(&state)?;
    let n = q.days.unwrap_or(30);
    let record = |e: &crate::Error| state.metrics().backend_error_if(e);
    let days = daily.last(&entity, n).await.inspect_err(record)?;
    let total = daily.total(&entity).await.inspect_err(record)?;
    let today = days.last().copied();
    Ok(axum::Json(serde_json::json!({
        "entity": entity,
        "days": days,
        "today": today,
        "total": total,
    })))
}

async fn one_day(
    State(state): State<AppState>,
    PathParam((entity, day)): PathParam<(String, String)>,
) -> Result<impl IntoResponse, ApiError> {
    let day = Day::parse(&day)?;
    let count = daily(&state)?
        .day(&entity, day)
        .await
        .inspect_err(|e| state.metrics().backend_error_if(e))?;
    Ok(axum::Json(
        serde_json::json!({ "day": day, "count": count }),
    ))
}
