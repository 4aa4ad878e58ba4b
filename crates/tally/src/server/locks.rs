//! `/v1/locks/{name}/acquire|extend|release`: locks over HTTP.
//!
//! - `acquire` `{"ttl_ms": 10000, "wait_ms": 0}`: 200 with the lease
//!   (`token`, `fence`, `ttl_ms`) or 409 `{"status": "held",
//!   "retry_after_ms"}` when someone else holds it (after waiting up to
//!   `wait_ms`, with jittered backoff; the wait is bounded by the library's
//!   limit, and stops at three quarters of the server's request timeout so
//!   that a long wait is answered 409, never cut off as a 503);
//! - `extend` `{"token", "ttl_ms"}` and `release` `{"token"}`: 200 when the
//!   token holds the lock, 409 when it does not (nothing changes then).
//!
//! With an `Idempotency-Key`, `acquire`'s token is derived from the key and
//! the lock's name ([`crate::locks::keyed_token`]): a copy run again after a
//! server died before recording its answer finds the lock held by its own
//! token and answers 200 with the same token and fence (its `ttl_ms` the
//! time left: the lease is not renewed). `extend` and `release` check the
//! token, so a copy run again changes nothing more: an `extend` extends to
//! the same end again (200), a `release` finds the lock free and answers
//! 409 `{"released": false}`.

use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use serde::Deserialize;

use super::check::{self, integer, optional_integer};
use super::extract::{NamedWrite, Write};
use super::idempotency::KeyedWrite;
use super::{ApiError, AppState};
use crate::locks::{Acquisition, Locks, MAX_TTL, MAX_WAIT, MIN_TTL};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/locks/{name}/acquire", post(acquire))
        .route("/locks/{name}/extend", post(extend))
        .route("/locks/{name}/release", post(release))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AcquireBody {
    #[serde(deserialize_with = "integer")]
    ttl_ms: u64,
    #[serde(default, deserialize_with = "optional_integer")]
    wait_ms: Option<u64>,
}

/// A lock's name and time to live.
fn check_lock(name: &str, ttl_ms: u64) -> Result<(), ApiError> {
    check::name("name", name)?;
    let (min, max) = (MIN_TTL.as_millis() as u64, MAX_TTL.as_millis() as u64);
    check::within("ttl_ms", "invalid_input", ttl_ms, min, max)
}

async fn acquire(
    NamedWrite(name, Write(state, keyed, body)): NamedWrite<AcquireBody>,
) -> Result<Response, ApiError> {
    let locks = state.service::<Locks>()?;
    check_lock(&name, body.ttl_ms)?;
    let wait_ms = body.wait_ms.unwrap_or(0);
    check::within(
        "wait_ms",
        "invalid_input",
        wait_ms,
        0,
        MAX_WAIT.as_millis() as u64,
    )?;
    let wait = Duration::from_millis(wait_ms).min(state.settings().request_timeout * 3 / 4);
    let ttl = Duration::from_millis(body.ttl_ms);
    let answer = match keyed {
        Some(Extension(KeyedWrite(key))) => locks.acquire_keyed(&key, &name, ttl, wait).await,
        None => locks.acquire_waiting(&name, ttl, wait).await,
    }?;
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
    #[serde(deserialize_with = "integer")]
    ttl_ms: u64,
}

async fn extend(
    NamedWrite(name, Write(state, _, body)): NamedWrite<ExtendBody>,
) -> Result<Response, ApiError> {
    let locks = state.service::<Locks>()?;
    check_lock(&name, body.ttl_ms)?;
    let extended = locks
        .extend(&name, &body.token, Duration::from_millis(body.ttl_ms))
        .await?;
    Ok(done("extended", extended))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReleaseBody {
    token: String,
}

async fn release(
    NamedWrite(name, Write(state, _, body)): NamedWrite<ReleaseBody>,
) -> Result<Response, ApiError> {
    let locks = state.service::<Locks>()?;
    check::name("name", &name)?;
    let released = locks.release(&name, &body.token).await?;
    Ok(done("released", released))
}

/// `{"<field>": done}`: 200 when done, 409 when the token no longer holds
/// the lock.
fn done(field: &str, done: bool) -> Response {
    let status = if done {
        StatusCode::OK
    } else {
        StatusCode::CONFLICT
    };
    (status, axum::Json(serde_json::json!({ field: done }))).into_response()
}
