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
//! once the writer holds it (written within a flush interval); without,
//! `200 {"written": n}` once stored. Listing, reading, deleting and the
//! write modes are the shared routes of [`super::series`].
//!
//! With an `Idempotency-Key` ([`super::idempotency`]), an exact increment
//! is written with its key's write id (applied at most once, even if the
//! server dies before the answer is recorded); an aggregated one claims
//! the key with its `202` answer before the aggregating writer takes it.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Deserialize;

use super::check::{self, optional_integer};
use super::error::{PathParam, RawBody};
use super::series::{self, Keys, ServedKind};
use super::{ApiError, AppState, Metrics, Services};
use crate::counters::{CounterRules, CounterWriter, Counters, Increment, MAX_BATCH};

pub(crate) fn routes() -> Router<AppState> {
    series::routes::<Counters>()
        .route(
            "/incr",
            series::batch::<Counters, BatchBody, _>(
                |b| ("increments", b.increments, MAX_BATCH),
                check_increment,
            ),
        )
        .route("/counters/{name}/incr", post(incr_one))
}

/// The body of `POST /v1/counters/{name}/incr` (and of
/// `POST /v1/daily/{entity}/incr`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct IncrBody {
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

/// The one write of `POST .../{name}/incr`: its optional body (`count`,
/// default 1, and `at`) made into a write by `make`, then checked by `check`
/// as an item of a batch is.
pub(crate) fn one_incr<T>(
    headers: &HeaderMap,
    body: &[u8],
    make: impl FnOnce(i64, Option<f64>) -> T,
    check: impl FnOnce(&str, &T) -> Result<(), ApiError>,
) -> Result<T, ApiError> {
    let body: IncrBody = optional_json(headers, body)?;
    let one = make(body.count.unwrap_or(1), body.at);
    check("", &one)?;
    Ok(one)
}

/// Parses an optional JSON body: empty means the default; otherwise it must
/// be JSON, declared as such.
fn optional_json<T: Default + serde::de::DeserializeOwned>(
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

async fn incr_one(
    State(state): State<AppState>,
    keys: Keys,
    PathParam(name): PathParam<String>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let make = |count, at| Increment { name, count, at };
    let inc = one_incr(&headers, &body, make, check_increment)?;
    series::write::<Counters>(&state, keys, std::slice::from_ref(&inc), 1).await
}

impl ServedKind for CounterRules {
    const PLURAL: &'static str = "counters";
    const FAMILY: &'static str = "counters";
    const NOUN: &'static str = "counter";
    type Writer = CounterWriter;
    type Query = ReadQuery;

    fn of(services: &Services) -> Option<&Counters> {
        Some(&services.counters)
    }

    fn writer(services: &Services) -> Option<&CounterWriter> {
        services.counter_writer.as_ref()
    }

    async fn read(
        counters: &Counters,
        _: &AppState,
        name: String,
        q: ReadQuery,
    ) -> Result<Response, ApiError> {
        check::time("from", q.from)?;
        check::time("to", q.to)?;
        check::precision(&counters.settings().precisions, q.precision)?;
        if let (Some(from), Some(to)) = (q.from, q.to) {
            check::range_order("to", from, to)?;
        }
        let slices = series::slices(q.from, q.to);
        let series = counters.read(&name, q.precision, slices).await?;
        let precisions = series::by_precision(series.into_iter().map(|s| (s.precision, s.samples)));
        Ok(axum::Json(serde_json::json!({
            "name": name,
            "samples_kept": counters.settings().samples,
            "precisions": precisions,
        }))
        .into_response())
    }

    fn taken(metrics: &Metrics, n: usize) {
        metrics.increments_accepted(n as u64);
    }
}

series::range_query!(
    /// `GET /v1/counters/{name}?precision=&from=&to=`.
    ReadQuery {}
);
