//! `/v1/locks/{name}/acquire|extend|release`: locks over HTTP.
//!
//! - `acquire` `{"ttl_ms": 10000, "wait_ms": 0}`: 200 with the lease
//!   (`token`, `fence`, `ttl_ms`) or 409 `{"status": "held",
//!   "retry_after_ms"}` when someone else holds it (after waiting up to
//!   `wait_ms`, with jittered backoff; the wait is bounded by the library's
//!   limit, and by the server's request timeout);
//! - `extend` `{"token", "ttl_ms"}` and `release` `{"token"}`: 200 when the
//!   token holds the lock, 409 when it does not (nothing changes then).

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Deserialize;

use super::error::{JsonBody, PathParam};
use super::{ApiError, AppState};
use crate::locks::{Acquisition, Locks};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/locks/{name}/acquire", post(acquire))
        .route("/locks/{name}/extend", post(extend))
        .route("/locks/{name}/release", post(release))
}

fn locks(state: &AppState) -> Result<&Locks, ApiError> {
    state
        .services()
        .locks
        .as_ref()
        .ok_or_else(|| ApiError::not_found("locks are not enabled on this server"))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AcquireBody {
    ttl_ms: u64,
    #[serde(default)]
    wait_ms: u64,
}

async fn acquire(
    State(state): State<AppState>,
    PathParam(name): PathParam<String>,
    JsonBody(body): JsonBody<AcquireBody>,
) -> Result<Response, ApiError> {
    let answer = locks(&state)?
        .acquire_waiting(
            &name,
            Duration::from_millis(body.ttl_ms),
            Duration::from_millis(body.wait_ms),
        )
        .await
        .inspect_err(|e| state.metrics().backend_error_if(e))?;
    let status = match answer {
        Acquisition::Acquired(_) => StatusCode::OK,
        Acquisition::Held { .. } => StatusCode::CONFLICT,
    };
    Ok((status, axum::Json(answer)).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExtendBody {
    token: String,
    ttl_ms: u64,
}

async fn extend(
    State(state): State<AppState>,
    PathParam(name): PathParam<String>,
    JsonBody(body): JsonBody<ExtendBody>,
) -> Result<Response, ApiError> {
    let extended = locks(&state)?
        .extend(&name, &body.token, Duration::from_millis(body.ttl_ms))
        .await
        .inspect_err(|e| state.metrics().backend_error_if(e))?;
    let status = if extended {
        StatusCode::OK
    } else {
        StatusCode::CONFLICT
    };
    Ok((
        status,
        axum::Json(serde_json::json!({ "extended": extended })),
    )
        .into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReleaseBody {
    token: String,
}

async fn release(
    State(state): State<AppState>,
    PathParam(name): PathParam<String>,
    JsonBody(body): JsonBody<ReleaseBody>,
) -> Result<Response, ApiError> {
    let released = locks(&state)?
        .release(&name, &body.token)
        .await
        .inspect_err(|e| state.metrics().backend_error_if(e))?;
    let status = if released {
        StatusCode::OK
    } else {
        StatusCode::CONFLICT
    };
    Ok((
        status,
        axum::Json(serde_json::json!({ "released": released })),
    )
        .into_response())
}
