//! `/v1/counters` and `/v1/incr`: the counter API.
//!
//! - `POST /v1/counters/{name}/incr` `{"count": 1, "at": 1700000000.5}`
//!   (both optional, the body too);
//! - `POST /v1/incr` `{"increments": [{"name", "count", "at"}, ...]}`, all or
//!   nothing;
//! - `GET /v1/counters?prefix=&cursor=&limit=`: names in order, paginated;
//! - `GET /v1/counters/{name}?precision=&from=&to=`: samples per precision;
//! - `DELETE /v1/counters/{name}`.
//!
//! With an aggregating writer, an increment is answered `202 {"accepted": n}`
//! once the aggregator holds it (written within a flush interval); without,
//! `200 {"written": n}` once stored.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use super::error::{PathParam, QueryParams, RawBody};
use super::{ApiError, AppState};
use crate::counters::{Increment, Sample};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/incr", post(incr_batch))
        .route("/counters", get(list))
        .route("/counters/{name}", get(read).delete(delete))
        .route("/counters/{name}/incr", post(incr_one))
}

/// The body of `POST /v1/counters/{name}/incr`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct IncrBody {
    count: Option<i64>,
    at: Option<f64>,
}

/// The body of `POST /v1/incr`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BatchBody {
    increments: Vec<Increment>,
}

/// Parses an optional JSON body: empty means the default; otherwise it must
/// be JSON, declared as such.
pub(crate) fn optional_json<T: Default + serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: &[u8],
) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !json {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the body as JSON with `Content-Type: application/json`",
        ));
    }
    serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_json",
            format!("invalid JSON body: {e}"),
        )
    })
}

async fn incr_one(
    State(state): State<AppState>,
    PathParam(name): PathParam<String>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let body: IncrBody = optional_json(&headers, &body)?;
    let inc = Increment {
        name,
        count: body.count.unwrap_or(1),
        at: body.at,
    };
    write(&state, std::slice::from_ref(&inc)).await
}

async fn incr_batch(
    State(state): State<AppState>,
    super::error::JsonBody(body): super::error::JsonBody<BatchBody>,
) -> Result<Response, ApiError> {
    let max = state.settings().max_batch;
    if body.increments.len() > max {
        return Err(ApiError::bad_request(format!(
            "a batch holds at most {max} increments, got {}",
            body.increments.len()
        )));
    }
    if body.increments.is_empty() {
        return Err(ApiError::bad_request(
            "a batch needs at least one increment",
        ));
    }
    write(&state, &body.increments).await
}

/// Writes (or hands to the aggregator) all of `increments`, or none.
async fn write(state: &AppState, increments: &[Increment]) -> Result<Response, ApiError> {
    let n = increments.len();
    let metrics = state.metrics();
    let services = state.services();
    let aggregator = services
        .aggregator
        .as_ref()
        .filter(|_| !services.exact_writes);
    let result = match aggregator {
        Some(aggregator) => aggregator.add_many(increments).await.map(|()| {
            (
                StatusCode::ACCEPTED,
                axum::Json(serde_json::json!({ "accepted": n })),
            )
        }),
        None => state
            .services()
            .counters
            .incr_many(increments)
            .await
            .map(|()| {
                (
                    StatusCode::OK,
                    axum::Json(serde_json::json!({ "written": n })),
                )
            }),
    };
    match result {
        Ok(answer) => {
            metrics.increments_accepted(n as u64);
            Ok(answer.into_response())
        }
        Err(e) => {
            metrics.backend_error_if(&e);
            Err(e.into())
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    prefix: Option<String>,
    cursor: Option<String>,
    limit: Option<usize>,
}

/// One page of counter names.
#[derive(Debug, Serialize)]
struct ListAnswer {
    counters: Vec<String>,
    next: Option<String>,
}

async fn list(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<ListQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let limit = q.limit.unwrap_or(100);
    if limit == 0 || limit > 1000 {
        return Err(ApiError::bad_request(format!(
            "limit must be between 1 and 1000, got {limit}"
        )));
    }
    let page = state
        .services()
        .counters
        .search(
            q.prefix.as_deref().unwrap_or(""),
            q.cursor.as_deref(),
            limit,
        )
        .await
        .inspect_err(|e| state.metrics().backend_error_if(e))?;
    Ok(axum::Json(ListAnswer {
        counters: page.names,
        next: page.next,
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadQuery {
    precision: Option<u64>,
    from: Option<f64>,
    to: Option<f64>,
}

async fn read(
    State(state): State<AppState>,
    PathParam(name): PathParam<String>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Result<impl IntoResponse, ApiError> {
    for (what, t) in [("from", q.from), ("to", q.to)] {
        if let Some(t) = t {
            crate::clock::Timestamp::from_secs_f64(t)
                .map_err(|e| ApiError::bad_request(format!("{what}: {e}")))?;
        }
    }
    let keep = |s: &Sample| {
        q.from.is_none_or(|from| s.start as f64 >= from)
            && q.to.is_none_or(|to| s.start as f64 <= to)
    };
    let counters = &state.services().counters;
    let mut all = counters
        .get_many(std::slice::from_ref(&name), q.precision)
        .await
        .inspect_err(|e| state.metrics().backend_error_if(e))?;
    let series = all.pop().unwrap_or_default();
    let mut precisions = serde_json::Map::new();
    for s in series {
        let samples: Vec<Sample> = s.samples.into_iter().filter(keep).collect();
        precisions.insert(
            s.precision.to_string(),
            serde_json::to_value(samples).unwrap_or_default(),
        );
    }
    Ok(axum::Json(serde_json::json!({
        "name": name,
        "samples_kept": counters.settings().samples,
        "precisions": precisions,
    })))
}

async fn delete(
    State(state): State<AppState>,
    PathParam(name): PathParam<String>,
) -> Result<impl IntoResponse, ApiError> {
    let deleted = state
        .services()
        .counters
        .delete(&name)
        .await
        .inspect_err(|e| state.metrics().backend_error_if(e))?;
    if !deleted {
        return Err(ApiError::not_found(format!("no counter named {name:?}")));
    }
    Ok(axum::Json(serde_json::json!({ "deleted": true })))
}
