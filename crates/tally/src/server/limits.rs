//! `POST /v1/limits/{key}/check`: one rate-limit check.
//!
//! The body names a configured policy (`{"policy": "api"}`) or states the
//! limit (`{"algorithm": "gcra", "limit": 10, "window": 60, "burst": 20}`,
//! window in seconds), with an optional `cost` (default 1). The answer is
//! always 200 with the decision (`allowed`, `limit`, `remaining`,
//! `reset_at_ms`, `retry_after_ms`) and the `RateLimit-Limit`,
//! `RateLimit-Remaining`, `RateLimit-Reset` headers (plus `Retry-After` when
//! denied): being limited is an answer, not an error.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Deserialize;

use super::error::{JsonBody, PathParam};
use super::{ApiError, AppState};
use crate::limits::{Algorithm, FailMode, Limit};

pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/limits/{key}/check", post(check))
}

/// The body of a check.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckBody {
    policy: Option<String>,
    algorithm: Option<Algorithm>,
    limit: Option<u64>,
    /// Seconds.
    window: Option<f64>,
    burst: Option<u64>,
    on_error: Option<FailMode>,
    cost: Option<u64>,
}

impl CheckBody {
    /// The limit the body names or states.
    fn limit(&self, state: &AppState) -> Result<Limit, ApiError> {
        let (_, policies) =
            state.services().limiter.as_ref().ok_or_else(|| {
                ApiError::not_found("rate limiting is not enabled on this server")
            })?;
        let stated = self.algorithm.is_some() || self.limit.is_some() || self.window.is_some();
        match (&self.policy, stated) {
            (Some(_), true) => Err(ApiError::bad_request(
                "give either a policy or a limit (algorithm, limit, window), not both",
            )),
            (Some(name), false) => policies.get(name).copied().ok_or_else(|| {
                let known: Vec<&str> = policies.keys().map(String::as_str).collect();
                ApiError::bad_request(format!(
                    "no policy named {name:?} (configured: {})",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ))
            }),
            (None, _) => {
                let (Some(algorithm), Some(limit), Some(window)) =
                    (self.algorithm, self.limit, self.window)
                else {
                    return Err(ApiError::bad_request(
                        "a limit needs `algorithm` (fixed, sliding or gcra), `limit` and `window` (seconds), \
                         or a `policy` name",
                    ));
                };
                let ms = window * 1000.0;
                if !ms.is_finite() || !(1.0..=1e15).contains(&ms) {
                    return Err(ApiError::bad_request(format!(
                        "window must be at least 0.001 s, got {window}"
                    )));
                }
                let mut l = Limit::new(algorithm, limit, ms.round() as u64)
                    .failing(self.on_error.unwrap_or_default());
                if let Some(burst) = self.burst {
                    l = l.with_burst(burst);
                }
                Ok(l)
            }
        }
    }
}

async fn check(
    State(state): State<AppState>,
    PathParam(key): PathParam<String>,
    JsonBody(body): JsonBody<CheckBody>,
) -> Result<Response, ApiError> {
    let limit = body.limit(&state)?;
    let (limiter, _) = state
        .services()
        .limiter
        .as_ref()
        .expect("checked by limit()");
    let decision = limiter
        .check(&key, &limit, body.cost.unwrap_or(1))
        .await
        .inspect_err(|e| state.metrics().backend_error_if(e))?;
    let now_ms = limiter.clock().now().as_millis();
    let mut response = axum::Json(&decision).into_response();
    crate::limits::middleware::add_headers(response.headers_mut(), &decision, now_ms);
    // Denied: when to come back (nothing when never: the cost is above the
    // limit).
    if let (false, Some(ms)) = (decision.allowed, decision.retry_after_ms) {
        response.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(ms.div_ceil(1000).max(1)),
        );
    }
    Ok(response)
}
