//! `/v1/daily`: per-entity daily statistics over HTTP.
//!
//! - `POST /v1/daily/{entity}/incr` `{"count": 1, "at": ...}` (optional);
//! - `POST /v1/daily/incr` `{"views": [{"entity", "count", "at"}, ...]}`;
//! - `GET /v1/daily/{entity}?days=30`: the last N days (oldest first,
//!   missing days as 0), today and the all-time total;
//! - `GET /v1/daily/{entity}/days/{YYYY-MM-DD}`: one day.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde::Deserialize;

use super::check::{self, query_integer};
use super::counters::one_incr;
use super::error::{PathParam, RawBody};
use super::extract::{NamedRead, Write};
use super::idempotency::KeyedWrite;
use super::{ApiError, AppState, batch_item};
use crate::daily::{Counted, DailyStats, Day, MAX_BATCH, MAX_RETENTION_DAYS, View};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/daily/incr", post(incr_many))
        .route("/daily/{entity}", get(summary))
        .route("/daily/{entity}/incr", post(incr_one))
        .route("/daily/{entity}/days/{day}", get(one_day))
}

batch_item! {
    /// One view of `POST /v1/daily/incr`, as the document states it.
    ViewBody => View { entity }
}

/// A view's fields; `prefix` leads the field names in messages.
fn check_view(prefix: &str, view: &View) -> Result<(), ApiError> {
    let field = |member: &str| format!("{prefix}{member}");
    check::plain_name(&field("entity"), &view.entity)?;
    check::within(&field("count"), "invalid_count", view.count, 1, i64::MAX)?;
    check::time(&field("at"), view.at)
}

async fn incr_one(
    State(state): State<AppState>,
    PathParam(entity): PathParam<String>,
    keyed: Option<Extension<KeyedWrite>>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<impl IntoResponse, ApiError> {
    let daily = state.service::<DailyStats>()?;
    let make = |count, at| View { entity, count, at };
    let view = one_incr(&headers, &body, make, check_view)?;
    let mut counted = count(daily, keyed, std::slice::from_ref(&view)).await?;
    Ok(axum::Json(counted.pop().expect("one answer per view")))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody {
    views: Vec<ViewBody>,
}

async fn incr_many(
    Write(state, keyed, body): Write<BatchBody>,
) -> Result<impl IntoResponse, ApiError> {
    let daily = state.service::<DailyStats>()?;
    let views: Vec<View> =
        check::batch(state.settings(), "views", body.views, MAX_BATCH, check_view)?;
    let counted = count(daily, keyed, &views).await?;
    Ok(axum::Json(serde_json::json!({ "counted": counted })))
}

/// Counts `views`; with a key, at most once (a repeat after a crash
/// answers the counts as they are).
async fn count(
    daily: &DailyStats,
    keyed: Option<Extension<KeyedWrite>>,
    views: &[View],
) -> Result<Vec<Counted>, ApiError> {
    match keyed {
        Some(Extension(KeyedWrite(key))) => daily.incr_many_once(&key, views).await.map(|r| r.1),
        None => daily.incr_many(views).await,
    }
    .map_err(ApiError::from)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SummaryQuery {
    #[serde(default, deserialize_with = "query_integer")]
    days: Option<u32>,
}

async fn summary(
    NamedRead(state, entity, q): NamedRead<SummaryQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let daily = state.service::<DailyStats>()?;
    check::plain_name("entity", &entity)?;
    let n = q.days.unwrap_or(30);
    check::within("days", "invalid_input", n, 1, MAX_RETENTION_DAYS)?;
    let days = daily.last(&entity, n).await?;
    let total = daily.total(&entity).await?;
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
    let daily = state.service::<DailyStats>()?;
    check::plain_name("entity", &entity)?;
    let day = Day::parse(&day).map_err(|e| ApiError::field("day", "invalid_input", e))?;
    let count = daily.day(&entity, day).await?;
    Ok(axum::Json(
        serde_json::json!({ "day": day, "count": count }),
    ))
}
