//! `POST /v1/limits/{key}/check`: one rate-limit check.
//!
//! The body names a configured policy (`{"policy": "api"}`) or states the
//! limit (`{"algorithm": "gcra", "limit": 10, "window": 60, "burst": 20}`,
//! window in seconds), with an optional `cost` (default 1). The answer is
//! always 200 with the decision (`allowed`, `limit`, `remaining`,
//! `reset_at_ms`, `retry_after_ms`) and the `RateLimit-Limit`,
//! `RateLimit-Remaining`, `RateLimit-Reset` headers (plus `Retry-After` when
//! denied): being limited is an answer, not an error.
//!
//! A body that names a policy may add only `cost`; a stated limit needs all
//! three of `algorithm`, `limit` and `window`, and takes `burst` only for
//! GCRA (each a 400 otherwise, as the document's `oneOf` says). What the
//! limiter still refuses afterwards (a GCRA span too long) is 422.
//!
//! With an `Idempotency-Key`, an admitted check counts its cost once: the
//! same check run again after a server died before recording its answer
//! counts nothing and answers admitted, with `remaining` and the reset of
//! the limit's current state ([`crate::Limiter::check_keyed`]).

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use serde::Deserialize;

use super::check::{self, not_null, optional_integer};
use super::error::enabled;
use super::extract::{NamedWrite, Write};
use super::idempotency::KeyedWrite;
use super::{ApiError, AppState};
use crate::limits::{Algorithm, FailMode, Limit, Limiter, MAX_COST, MAX_LIMIT, MAX_WINDOW_MS};

pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/limits/{key}/check", post(check))
}

/// The body of a check: every field optional, none `null`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckBody {
    #[serde(default, deserialize_with = "not_null")]
    policy: Option<String>,
    #[serde(default, deserialize_with = "not_null")]
    algorithm: Option<Algorithm>,
    #[serde(default, deserialize_with = "optional_integer")]
    limit: Option<u64>,
    /// Seconds.
    #[serde(default, deserialize_with = "not_null")]
    window: Option<f64>,
    #[serde(default, deserialize_with = "optional_integer")]
    burst: Option<u64>,
    #[serde(default, deserialize_with = "not_null")]
    on_error: Option<FailMode>,
    #[serde(default, deserialize_with = "optional_integer")]
    cost: Option<u64>,
}

impl CheckBody {
    /// The limit the body names or states, checked against the document.
    fn limit<'a>(&self, state: &'a AppState) -> Result<(&'a Limiter, Limit), ApiError> {
        let (limiter, policies) = enabled(state.services().limiter.as_ref(), "rate limiting is")?;
        if let Some(name) = &self.policy {
            let stated = [
                ("algorithm", self.algorithm.is_some()),
                ("limit", self.limit.is_some()),
                ("window", self.window.is_some()),
                ("burst", self.burst.is_some()),
                ("on_error", self.on_error.is_some()),
            ];
            if let Some((field, _)) = stated.iter().find(|(_, given)| *given) {
                return Err(ApiError::field(
                    field,
                    "invalid_input",
                    "a policy sets the limit: give `policy` (and `cost`) alone, or state the limit without `policy`",
                ));
            }
            let limit = policies.get(name).copied().ok_or_else(|| {
                let known: Vec<&str> = policies.keys().map(String::as_str).collect();
                ApiError::field(
                    "policy",
                    "invalid_input",
                    format!(
                        "no policy named {name:?} (configured: {})",
                        if known.is_empty() {
                            "none".to_owned()
                        } else {
                            known.join(", ")
                        }
                    ),
                )
            })?;
            return Ok((limiter, limit));
        }
        let (Some(algorithm), Some(limit), Some(window)) =
            (self.algorithm, self.limit, self.window)
        else {
            let missing = [
                ("algorithm", self.algorithm.is_none()),
                ("limit", self.limit.is_none()),
                ("window", self.window.is_none()),
            ];
            let field = missing
                .iter()
                .find(|(_, m)| *m)
                .map_or("policy", |(f, _)| *f);
            return Err(ApiError::field(
                field,
                "invalid_input",
                "a limit needs `algorithm` (fixed, sliding or gcra), `limit` and `window` (seconds), \
                 or a `policy` name",
            ));
        };
        check::within("limit", "invalid_input", limit, 1, MAX_LIMIT)?;
        let max_window = MAX_WINDOW_MS as f64 / 1000.0;
        if !(0.001..=max_window).contains(&window) {
            return Err(ApiError::field(
                "window",
                "invalid_input",
                format!("{window} s is out of range (0.001 s to {max_window} s)"),
            ));
        }
        let mut l = Limit::new(algorithm, limit, (window * 1000.0).round() as u64)
            .failing(self.on_error.unwrap_or_default());
        if let Some(burst) = self.burst {
            if algorithm != Algorithm::Gcra {
                return Err(ApiError::field(
                    "burst",
                    "invalid_input",
                    "a burst applies only to the gcra algorithm",
                ));
            }
            check::within("burst", "invalid_input", burst, 1, MAX_LIMIT)?;
            l = l.with_burst(burst);
        }
        Ok((limiter, l))
    }
}

async fn check(
    NamedWrite(key, Write(state, keyed, body)): NamedWrite<CheckBody>,
) -> Result<Response, ApiError> {
    let (limiter, limit) = body.limit(&state)?;
    check::name("key", &key)?;
    let cost = body.cost.unwrap_or(1);
    check::within("cost", "invalid_count", cost, 1, MAX_COST)?;
    let decision = match keyed {
        Some(Extension(KeyedWrite(idem))) => limiter.check_keyed(&idem, &key, &limit, cost).await,
        None => limiter.check(&key, &limit, cost).await,
    }?;
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
