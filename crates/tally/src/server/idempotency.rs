//! The `Idempotency-Key` header on every write route (docs/reference.md,
//! "Idempotent HTTP writes").
//!
//! A write (any method but GET, HEAD and OPTIONS) that carries the header
//! names one logical request: sent again with the same key within the
//! retention (default 24 h, `--idempotency-retention`), it is applied once
//! and answered with the first answer, status, headers and body byte for
//! byte (plus `Idempotent-Replayed: true`), whichever server process
//! sharing the store gets it, before or after a restart. The key is 1 to
//! 255 visible ASCII characters (else 400 `invalid_idempotency_key`). The
//! same key with another request (method, path and query, or body) is
//! refused, 422 `idempotency_key_reused`, and changes nothing; while the
//! first copy still runs, a copy is answered 409
//! `idempotency_key_in_progress` with `Retry-After`.
//!
//! How (see [`crate::idempotency`] for the protocol): this layer reads the
//! body, fingerprints the request and claims the key in the store; it runs
//! the handler in a task of its own, so a dropped connection or a request
//! timeout does not stop it halfway, and records the answer, or gives the
//! claim up when the answer is a server fault (5xx: the backend was
//! unreachable, the server overloaded) so that a retry runs it again.
//! The crash window (a server that dies between a write and the record of
//! its answer leaves a claim; once its lease, three request timeouts, ends,
//! a retry runs the request again) is closed for every write: the handler
//! of a keyed request gets `KeyedWrite` and makes its write with the key,
//! so the store applies it once.
//!
//! - Counters, statistics, gauges: the batch carries the key's engine write
//!   id ([`crate::Counters::incr_many_once`],
//!   [`crate::Stats::record_many_once`], [`crate::Gauges::apply_many_once`]).
//! - Time series, daily statistics, buffers: the write carries the key's
//!   mark ([`crate::idempotency::Mark`]) into its own Lua call or SQLite
//!   transaction ([`crate::Tsdb::incr_multi_once`],
//!   [`crate::Tsdb::record_frequency_once`],
//!   [`crate::DailyStats::incr_many_once`], [`crate::Buffers::incr_once`]):
//!   one mark per Lua call, so on Redis each part of a batch (each virtual
//!   shard, each entity) is applied once. The retry answers as the first
//!   did, except daily statistics, whose answer holds the counts as they
//!   are at the retry.
//! - Rate-limit checks: an admitted check keeps the mark with its count
//!   ([`crate::Limiter::check_keyed`]); the retry counts nothing and answers
//!   admitted, with `remaining` and the reset of the state at the retry. A
//!   denied check keeps no mark (it changed nothing): its retry is checked
//!   afresh.
//! - Locks: an acquire's token is derived from the key
//!   ([`crate::Locks::acquire_keyed`]); the retry finds the lock held by its
//!   own token and answers acquired, same token and fence, `ttl_ms` the
//!   time left (the lease is not renewed). Extend and release check the
//!   token: a retried extend extends again (200), a retried release finds
//!   the lock free and answers 409 `{"released": false}`.
//! - Merging and deleting time series, distinct values (a HyperLogLog
//!   records a value once) and deleting counters, gauges or statistics
//!   change nothing more when run again (a repeated delete answers 404).
//!
//! An increment or an observation for an aggregating writer is claimed
//! with its answer `202` already recorded, by the handler
//! (`AggregatedKey`, [`crate::CounterWriter::add_many_claimed`],
//! [`crate::StatsWriter::record_many_claimed`]): one extra round trip; a
//! retry is answered from the record and never handed over again. Its
//! handler runs in a task of its own as well, which a stopping server
//! waits for before the writers' final flush; a writer refuses adds once
//! that flush has begun, and a refused add gives its claim up.
//!
//! What it does not close: marks are kept for
//! [`crate::idempotency::MAX_RETENTION`] (7 days); a write repeated after
//! both its record and its mark are gone is applied again. A lock whose
//! keyed lease ended before the retry is taken anew (a new fence) if free.

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, MatchedPath, OriginalUri, Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{ApiError, AppState};
use crate::idempotency::{Answer, Claim, Idempotency, check_key, fingerprint};

/// The request header.
pub const HEADER: &str = "idempotency-key";
/// The header on a replayed answer.
pub const REPLAYED: &str = "idempotent-replayed";

/// The routes whose increments go to the aggregating writer (when the
/// server runs one and is not in exact mode): their handler claims the key
/// itself, with its answer.
const AGGREGATED_ROUTES: [&str; 2] = ["/v1/incr", "/v1/counters/{name}/incr"];

/// The same for observations and the statistics' aggregating writer.
const AGGREGATED_STATS_ROUTES: [&str; 2] = ["/v1/record", "/v1/stats/{name}/record"];

/// The key of a request the layer claimed: the handler makes its write
/// with the key (`..._once`, `check_keyed`, `acquire_keyed`), so the store
/// applies it once even when a retry runs it again.
#[derive(Clone, Debug)]
pub(crate) struct KeyedWrite(pub String);

/// A keyed batch for an aggregating writer (increments or observations),
/// not claimed yet: the handler claims it with its answer.
#[derive(Clone, Debug)]
pub(crate) struct AggregatedKey {
    pub idempotency: Idempotency,
    pub key: String,
    pub fingerprint: String,
}

/// Middleware: the protocol for requests that carry the header.
pub(crate) async fn layer(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(req).await;
    }
    let Some(value) = req.headers().get(HEADER) else {
        return next.run(req).await;
    };
    let Some(key) = value
        .to_str()
        .ok()
        .filter(|k| check_key(k).is_ok())
        .map(str::to_owned)
    else {
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_idempotency_key",
            "Idempotency-Key: 1 to 255 visible ASCII characters (`!` to `~`, no spaces)",
        )
        .into_response();
    };
    let Some(idempotency) = state.services().idempotency.clone() else {
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_idempotency_key",
            "Idempotency-Key: idempotency keys are not enabled on this server",
        )
        .into_response();
    };
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    let services = state.services();
    let aggregated = route.is_some_and(|r| {
        (services.aggregates_increments() && AGGREGATED_ROUTES.contains(&r))
            || (services.aggregates_observations() && AGGREGATED_STATS_ROUTES.contains(&r))
    });
    let (parts, body) = req.into_parts();
    // The path as the client sent it (a nested router sees it without
    // `/v1`).
    let uri = parts
        .extensions
        .get::<OriginalUri>()
        .map_or(&parts.uri, |o| &o.0);
    let target = uri
        .path_and_query()
        .map_or(uri.path(), |p| p.as_str())
        .to_owned();
    let method = parts.method.clone();
    let bytes = match Bytes::from_request(Request::from_parts(parts.clone(), body), &()).await {
        Ok(bytes) => bytes,
        Err(rejection) => return ApiError::from(rejection).into_response(),
    };
    let fingerprint = fingerprint(&[method.as_str().as_bytes(), target.as_bytes(), &bytes]);
    let mut req = Request::from_parts(parts, Body::from(bytes));
    if aggregated {
        req.extensions_mut().insert(AggregatedKey {
            idempotency,
            key,
            fingerprint,
        });
        // In a tracked task too: a server stopping waits for it before its
        // writers' final flush, client gone or not (the claim records the
        // answer, so the add must not come after that flush).
        return run_tracked(&state, next.run(req)).await;
    }
    let ticket = match idempotency.claim(&key, &fingerprint).await {
        Ok(Claim::Claimed(ticket)) => ticket,
        Ok(other) => return unclaimed(other),
        Err(e) => return ApiError::from(e).into_response(),
    };
    req.extensions_mut().insert(KeyedWrite(key));
    // The handler runs to its end even if the client goes or the request
    // times out, and its answer is recorded (or the claim given up).
    run_tracked(&state, async move {
        let response = next.run(req).await;
        let (response, answer) = recorded(response).await;
        let done = if response.status().is_server_error() {
            idempotency.release(&ticket).await
        } else {
            idempotency.complete(&ticket, &answer).await
        };
        match done {
            Ok(true) => {}
            Ok(false) => tracing::warn!(
                key = ticket.key,
                "an idempotency claim outlived its lease and was taken over"
            ),
            Err(e) => tracing::warn!(error = %e, key = ticket.key,
                "could not record an idempotent request's answer; a retry after the claim's lease runs it again"),
        }
        response
    })
    .await
}

/// Runs a keyed request's handler in a task of the server's
/// ([`AppState::tasks`]), so that it runs to its end even if the client
/// goes or the request times out, and a stopping server waits for it.
async fn run_tracked(
    state: &AppState,
    handler: impl std::future::Future<Output = Response> + Send + 'static,
) -> Response {
    match state.tasks().spawn(handler).await {
        Ok(response) => response,
        Err(e) => {
            tracing::error!(error = %e, "an idempotent request's task failed");
            ApiError::internal().into_response()
        }
    }
}

/// The answer to a claim this request did not get.
pub(crate) fn unclaimed(claim: Claim) -> Response {
    match claim {
        Claim::Done(answer) => replay(&answer, true),
        Claim::Mismatch => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency_key_reused",
            "Idempotency-Key: this key was used for another request (method, path or body); \
             nothing was changed. Use a new key for a new request",
        )
        .into_response(),
        Claim::InProgress { retry_after_ms } => {
            let mut response = ApiError::new(
                StatusCode::CONFLICT,
                "idempotency_key_in_progress",
                "Idempotency-Key: a request with this key is still running; retry later",
            )
            .into_response();
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(retry_after_ms.div_ceil(1000).max(1)),
            );
            response
        }
        Claim::Claimed(_) => ApiError::internal().into_response(),
    }
}

/// The response of a recorded answer; `replayed` adds
/// `Idempotent-Replayed: true`.
pub(crate) fn replay(answer: &Answer, replayed: bool) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, Body::from(answer.body.clone())).into_response();
    let headers = response.headers_mut();
    for (name, value) in &answer.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::try_from(name.as_str()),
            HeaderValue::try_from(value.as_str()),
        ) {
            headers.append(name, value);
        }
    }
    if replayed {
        headers.insert(REPLAYED, HeaderValue::from_static("true"));
    }
    response
}

/// Reads a handler's response whole: the response again, and the answer to
/// record (its status, its headers but those of the connection, its body).
async fn recorded(response: Response) -> (Response, Answer) {
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let headers = parts
        .headers
        .iter()
        .filter(|(name, _)| {
            ![
                header::DATE,
                header::CONTENT_LENGTH,
                header::TRANSFER_ENCODING,
                header::CONNECTION,
            ]
            .contains(name)
        })
        .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_owned())))
        .collect();
    let answer = Answer {
        status: parts.status.as_u16(),
        headers,
        body: bytes.to_vec(),
    };
    (Response::from_parts(parts, Body::from(bytes)), answer)
}
