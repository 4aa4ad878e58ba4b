//! `/v1/gauges`: gauges over HTTP (exact writes: each request is written
//! before it is answered).
//!
//! - `POST /v1/gauges/{name}` `{"value": 3.5}` (set) or `{"delta": -1}`
//!   (adjust), with an optional `"at"`;
//! - `GET /v1/gauges/{name}?precision=`: every slice (last, min, max) of
//!   every precision (or one), and the current value;
//! - `GET /v1/gauges?prefix=&cursor=&limit=`: names, in order;
//! - `DELETE /v1/gauges/{name}`.

use axum::Extension;
use axum::Router;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::get;
use serde::{Deserialize, Serialize};

use super::check::{self, not_null, query_integer};
use super::error::{JsonBody, PathParam, QueryParams};
use super::idempotency::KeyedWrite;
use super::{ApiError, AppState};
use crate::gauges::{GaugeOp, Gauges};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/gauges", get(list))
        .route("/gauges/{name}", get(read).post(write).delete(delete))
}

fn gauges(state: &AppState) -> Result<&Gauges, ApiError> {
    state
        .services()
        .gauges
        .as_ref()
        .ok_or_else(|| ApiError::not_found("gauges are not enabled on this server"))
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
    keyed: Option<Extension<KeyedWrite>>,
    JsonBody(body): JsonBody<WriteBody>,
) -> Result<impl IntoResponse, ApiError> {
    let gauges = gauges(&state)?;
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
    let ops = std::slice::from_ref(&op);
    match keyed {
        // Applied once, even when a server died before recording the answer.
        Some(Extension(KeyedWrite(key))) => gauges.apply_many_once(&key, ops).await.map(|_| ()),
        None => gauges.apply_many(ops).await,
    }
    .map_err(state.refused())?;
    Ok(axum::Json(serde_json::json!({ "written": 1 })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadQuery {
    #[serde(default, deserialize_with = "query_integer")]
    precision: Option<u64>,
}

async fn read(
    State(state): State<AppState>,
    PathParam(name): PathParam<String>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let gauges = gauges(&state)?;
    check::name("name", &name)?;
    let all = match q.precision {
        Some(p) => {
            crate::counters::settings::check_precision_in(gauges.precisions(), p)?;
            let slices = gauges.get(&name, p).await.map_err(state.refused())?;
            vec![crate::gauges::GaugeSeries {
                precision: p,
                slices,
            }]
        }
        None => gauges.get_all(&name).await.map_err(state.refused())?,
    };
    // The newest slice of the finest precision read that has one.
    let current = all.iter().find_map(|s| s.slices.last()).map(|s| s.last);
    let mut precisions = serde_json::Map::new();
    for s in all {
        precisions.insert(
            s.precision.to_string(),
            serde_json::to_value(s.slices).unwrap_or_default(),
        );
    }
    Ok(axum::Json(serde_json::json!({
        "name": name,
        "current": current,
        "precisions": precisions,
    })))
}

#[derive(Debug, Serialize)]
struct ListAnswer {
    gauges: Vec<String>,
    next: Option<String>,
}

async fn list(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<check::ListQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let gauges = gauges(&state)?;
    let (prefix, cursor, limit) = q.checked(check::MAX_LIST)?;
    let page = gauges
        .search(prefix, cursor, limit)
        .await
        .map_err(state.refused())?;
    Ok(axum::Json(ListAnswer {
        gauges: page.names,
        next: page.next,
    }))
}

async fn delete(
    State(state): State<AppState>,
    PathParam(name): PathParam<String>,
) -> Result<impl IntoResponse, ApiError> {
    let gauges = gauges(&state)?;
    check::name("name", &name)?;
    if !gauges.delete(&name).await.map_err(state.refused())? {
        return Err(ApiError::not_found(format!("no gauge named {name:?}")));
    }
    Ok(axum::Json(serde_json::json!({ "deleted": true })))
}
