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
//!
//! With an `Idempotency-Key` ([`super::idempotency`]), an exact increment
//! is written with its key's write id (applied at most once, even if the
//! server dies before the answer is recorded); an aggregated one claims
//! the key with its `202` answer before the aggregating writer takes it.

use axum::Extension;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use super::check::{self, optional_integer, query_integer};
use super::error::{PathParam, QueryParams, RawBody};
use super::idempotency::{AggregatedKey, KeyedWrite, replay, unclaimed};
use super::{ApiError, AppState};
use crate::counters::{Increment, MAX_BATCH, Sample};
use crate::idempotency::{Answer, Claim};

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
    #[serde(default, deserialize_with = "optional_integer")]
    count: Option<i64>,
    at: Option<f64>,
}

/// One increment of `POST /v1/incr`, as the document states it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IncrementBody {
    name: String,
    #[serde(default, deserialize_with = "optional_integer")]
    count: Option<i64>,
    at: Option<f64>,
}

impl From<IncrementBody> for Increment {
    fn from(b: IncrementBody) -> Self {
        Increment {
            name: b.name,
            count: b.count.unwrap_or(1),
            at: b.at,
        }
    }
}

/// A counter increment's fields: a name, a count of ±(2^63−1), a time.
fn check_increment(prefix: &str, inc: &Increment) -> Result<(), ApiError> {
    let field = |member: &str| format!("{prefix}{member}");
    check::name(&field("name"), &inc.name)?;
    check::within(
        &field("count"),
        "invalid_count",
        inc.count,
        -i64::MAX,
        i64::MAX,
    )?;
    check::time(&field("at"), inc.at)
}

/// The body of `POST /v1/incr`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BatchBody {
    increments: Vec<IncrementBody>,
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
    axum::Json::<T>::from_bytes(body)
        .map(|axum::Json(value)| value)
        .map_err(ApiError::from)
}

/// What a keyed request brings to [`write`]: its key, claimed or not.
type Keys = (
    Option<Extension<KeyedWrite>>,
    Option<Extension<AggregatedKey>>,
);

async fn incr_one(
    State(state): State<AppState>,
    keyed: Option<Extension<KeyedWrite>>,
    aggregated: Option<Extension<AggregatedKey>>,
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
    check_increment("", &inc)?;
    write(&state, (keyed, aggregated), std::slice::from_ref(&inc)).await
}

async fn incr_batch(
    State(state): State<AppState>,
    keyed: Option<Extension<KeyedWrite>>,
    aggregated: Option<Extension<AggregatedKey>>,
    super::error::JsonBody(body): super::error::JsonBody<BatchBody>,
) -> Result<Response, ApiError> {
    let max = super::openapi::max_batch(state.settings(), MAX_BATCH);
    let increments: Vec<Increment> =
        check::batch("increments", body.increments, max, check_increment)?;
    write(&state, (keyed, aggregated), &increments).await
}

/// Writes (or hands to the aggregator) all of `increments`, or none; with
/// a key, at most once per key.
async fn write(
    state: &AppState,
    (keyed, aggregated): Keys,
    increments: &[Increment],
) -> Result<Response, ApiError> {
    let n = increments.len();
    let services = state.services();
    let aggregator = services
        .aggregator
        .as_ref()
        .filter(|_| services.aggregates_increments());
    let response = match (aggregator, aggregated) {
        (Some(aggregator), Some(Extension(k))) => {
            let answer = Answer::json(202, &serde_json::json!({ "accepted": n }));
            let claim = aggregator
                .add_many_claimed(&k.idempotency, &k.key, &k.fingerprint, increments, &answer)
                .await
                .map_err(state.refused())?;
            match claim {
                Claim::Claimed(_) => replay(&answer, false),
                other => return Ok(unclaimed(other)),
            }
        }
        (Some(aggregator), None) => {
            aggregator
                .add_many(increments)
                .await
                .map_err(state.refused())?;
            (
                StatusCode::ACCEPTED,
                axum::Json(serde_json::json!({ "accepted": n })),
            )
                .into_response()
        }
        (None, _) => {
            let counters = &services.counters;
            match keyed {
                Some(Extension(KeyedWrite(key))) => {
                    counters.write_once(&key, increments).await.map(|_| ())
                }
                None => counters.write(increments).await,
            }
            .map_err(state.refused())?;
            (
                StatusCode::OK,
                axum::Json(serde_json::json!({ "written": n })),
            )
                .into_response()
        }
    };
    state.metrics().increments_accepted(n as u64);
    Ok(response)
}

/// One page of counter names.
#[derive(Debug, Serialize)]
struct ListAnswer {
    counters: Vec<String>,
    next: Option<String>,
}

async fn list(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<check::ListQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let (prefix, cursor, limit) = q.checked(check::MAX_LIST)?;
    let page = state
        .services()
        .counters
        .search(prefix, cursor, limit)
        .await
        .map_err(state.refused())?;
    Ok(axum::Json(ListAnswer {
        counters: page.names,
        next: page.next,
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadQuery {
    #[serde(default, deserialize_with = "query_integer")]
    precision: Option<u64>,
    from: Option<f64>,
    to: Option<f64>,
}

async fn read(
    State(state): State<AppState>,
    PathParam(name): PathParam<String>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Result<impl IntoResponse, ApiError> {
    check::name("name", &name)?;
    check::time("from", q.from)?;
    check::time("to", q.to)?;
    let counters = &state.services().counters;
    if let Some(p) = q.precision {
        counters.settings().check_precision(p)?;
    }
    if let (Some(from), Some(to)) = (q.from, q.to) {
        check::range_order("to", from, to)?;
    }
    let keep = |s: &Sample| {
        q.from.is_none_or(|from| s.start as f64 >= from)
            && q.to.is_none_or(|to| s.start as f64 <= to)
    };
    let mut all = counters
        .get_many(std::slice::from_ref(&name), q.precision)
        .await
        .map_err(state.refused())?;
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
    check::name("name", &name)?;
    let deleted = state
        .services()
        .counters
        .delete(&name)
        .await
        .map_err(state.refused())?;
    if !deleted {
        return Err(ApiError::not_found(format!("no counter named {name:?}")));
    }
    Ok(axum::Json(serde_json::json!({ "deleted": true })))
}
