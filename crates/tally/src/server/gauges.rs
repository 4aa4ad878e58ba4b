//! `/v1/gauges`: gauges over HTTP (exact writes: each request is written
//! before it is answered).
//!
//! - `POST /v1/gauges/{name}` `{"value": 3.5}` (set) or `{"delta": -1}`
//!   (adjust), with an optional `"at"`;
//! - `GET /v1/gauges/{name}?precision=`: every slice (last, min, max) of
//!   every precision (or one), and the current value;
//! - `GET /v1/gauges?prefix=&cursor=&limit=`: names, in order;
//! - `DELETE /v1/gauges/{name}`.
//!
//! Listing, deleting and the write modes are the shared routes of
//! [`super::series`].

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Deserialize;

use super::check::{self, not_null, query_integer};
use super::error::{JsonBody, PathParam};
use super::series::{self, Exact, Keys, ServedKind};
use super::{ApiError, AppState, Services};
use crate::error::Result;
use crate::gauges::{GaugeOp, GaugeRules, Gauges};

pub(crate) fn routes() -> Router<AppState> {
    series::routes::<Gauges>().route("/gauges/{name}", post(write))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteBody {
    #[serde(default, deserialize_with = "not_null")]
    value: Option<f64>,
    #[serde(default, deserialize_with = "not_null")]
    delta: Option<f64>,
    at: Option<f64>,
}

async fn write(
    State(state): State<AppState>,
    PathParam(name): PathParam<String>,
    keys: Keys,
    JsonBody(body): JsonBody<WriteBody>,
) -> Result<Response, ApiError> {
    series::service::<Gauges>(&state)?;
    check::name("name", &name)?;
    check::time("at", body.at)?;
    let op = match (body.value, body.delta) {
        (Some(v), None) => GaugeOp::set(name, v),
        (None, Some(d)) => GaugeOp::adjust(name, d),
        _ => {
            return Err(ApiError::field(
                "value",
                "invalid_input",
                "give exactly one of `value` (set the gauge) and `delta` (adjust it)",
            ));
        }
    };
    let op = match body.at {
        Some(at) => op.at(at),
        None => op,
    };
    series::write::<Gauges>(&state, keys, std::slice::from_ref(&op), 1).await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadQuery {
    #[serde(default, deserialize_with = "query_integer")]
    precision: Option<u64>,
}

impl ServedKind for GaugeRules {
    const PLURAL: &'static str = "gauges";
    const FAMILY: &'static str = "gauges";
    const NOUN: &'static str = "gauge";
    type Writer = Exact;
    type Query = ReadQuery;

    fn of(services: &Services) -> Option<&Gauges> {
        services.gauges.as_ref()
    }

    fn writer(_: &Services) -> Option<&Exact> {
        None
    }

    async fn read(
        gauges: &Gauges,
        _: &AppState,
        name: String,
        q: ReadQuery,
    ) -> Result<Response, ApiError> {
        check::precision(gauges.precisions(), q.precision)?;
        let all = gauges.read(&name, q.precision).await?;
        // The newest slice of the finest precision read that has one.
        let current = all.iter().find_map(|s| s.slices.last()).map(|s| s.last);
        Ok(axum::Json(serde_json::json!({
            "name": name,
            "current": current,
            "precisions": series::by_precision(all.into_iter().map(|s| (s.precision, s.slices))),
        }))
        .into_response())
    }
}
