//! `/v1/sets`: distinct counts over HTTP (exact writes: each request is
//! written before it is answered).
//!
//! - `POST /v1/sets/{name}` `{"members": ["a", "b"], "at": 1700000000.5}`
//!   (`at` optional): adds the members, all or nothing; with an
//!   `Idempotency-Key`, the write carries the key's write id
//!   ([`crate::Sets::add_many_once`]);
//! - `GET /v1/sets/{name}?precision=&from=&to=`: the slices starting in
//!   `[from, to]` with their counts, per precision (or one), and the count
//!   of the range's union; 404 for a set with nothing kept;
//! - `GET /v1/sets?prefix=&cursor=&limit=`: names, in order;
//! - `DELETE /v1/sets/{name}`.

use axum::Router;
use axum::extract::{Extension, State};
use axum::response::IntoResponse;
use axum::routing::get;
use serde::{Deserialize, Serialize};

use super::check::{self, query_integer};
use super::error::{JsonBody, PathParam, QueryParams};
use super::idempotency::KeyedWrite;
use super::{ApiError, AppState};
use crate::sets::{MAX_MEMBER_BYTES, MAX_MEMBERS, SetAdd, Sets};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/sets", get(list))
        .route("/sets/{name}", get(read).post(write).delete(delete))
}

fn sets(state: &AppState) -> Result<&Sets, ApiError> {
    state
        .services()
        .sets
        .as_ref()
        .ok_or_else(|| ApiError::not_found("sets are not enabled on this server"))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteBody {
    members: Vec<String>,
    at: Option<f64>,
}

async fn write(
    State(state): State<AppState>,
    keyed: Option<Extension<KeyedWrite>>,
    PathParam(name): PathParam<String>,
    JsonBody(body): JsonBody<WriteBody>,
) -> Result<impl IntoResponse, ApiError> {
    let sets = sets(&state)?;
    check::name("name", &name)?;
    check::time("at", body.at)?;
    check::items("members", body.members.len(), 1, MAX_MEMBERS)?;
    // What the document states: 1 to 255 characters. The library's rule
    // (at most 255 bytes) refuses the rest with 422.
    for (i, m) in body.members.iter().enumerate() {
        let chars = m.chars().count();
        if chars == 0 || chars > MAX_MEMBER_BYTES {
            return Err(ApiError::field(
                &format!("members[{i}]"),
                "invalid_input",
                format!("a set member is 1 to {MAX_MEMBER_BYTES} characters, not {chars}"),
            ));
        }
    }
    let n = body.members.len();
    let mut add = SetAdd::new(name, body.members);
    add.at = body.at;
    let adds = std::slice::from_ref(&add);
    match keyed {
        Some(Extension(KeyedWrite(key))) => sets.add_many_once(&key, adds).await.map(|_| ()),
        None => sets.add_many(adds).await,
    }
    .map_err(state.refused())?;
    Ok(axum::Json(serde_json::json!({ "written": n })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadQuery {
    #[serde(default, deserialize_with = "query_integer")]
    precision: Option<u64>,
    #[serde(default, deserialize_with = "query_integer")]
    from: Option<u64>,
    #[serde(default, deserialize_with = "query_integer")]
    to: Option<u64>,
}

async fn read(
    State(state): State<AppState>,
    PathParam(name): PathParam<String>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let sets = sets(&state)?;
    check::name("name", &name)?;
    if let Some(p) = q.precision {
        crate::counters::settings::check_precision_in(sets.precisions(), p)?;
    }
    // By default, everything stored: from 1970 to the latest time a write
    // may carry (read at the coarsest precision).
    let from = q.from.unwrap_or(0);
    let to = q.to.unwrap_or(crate::clock::Timestamp::MAX_SECS as u64);
    for (field, t) in [("from", from), ("to", to)] {
        check::time(field, Some(t as f64))?;
    }
    check::range_order("to", from as f64, to as f64)?;
    let view = sets.view(&name, from, to).await.map_err(state.refused())?;
    if view.series.iter().all(|s| s.slices.is_empty()) && view.union.count == 0 {
        return Err(ApiError::not_found(format!(
            "set {name:?} holds nothing in [{from}, {to}]"
        )));
    }
    let mut precisions = serde_json::Map::new();
    for s in view.series {
        if q.precision.is_none_or(|p| p == s.precision) {
            precisions.insert(
                s.precision.to_string(),
                serde_json::to_value(s.slices).unwrap_or_default(),
            );
        }
    }
    Ok(axum::Json(serde_json::json!({
        "name": name,
        "precisions": precisions,
        "union": view.union,
    })))
}

#[derive(Debug, Serialize)]
struct ListAnswer {
    sets: Vec<String>,
    next: Option<String>,
}

async fn list(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<check::ListQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let sets = sets(&state)?;
    let (prefix, cursor, limit) = q.checked(check::MAX_LIST)?;
    let page = sets
        .search(prefix, cursor, limit)
        .await
        .map_err(state.refused())?;
    Ok(axum::Json(ListAnswer {
        sets: page.names,
        next: page.next,
    }))
}

async fn delete(
    State(state): State<AppState>,
    PathParam(name): PathParam<String>,
) -> Result<impl IntoResponse, ApiError> {
    let sets = sets(&state)?;
    check::name("name", &name)?;
    if !sets.delete(&name).await.map_err(state.refused())? {
        return Err(ApiError::not_found(format!("no set named {name:?}")));
    }
    Ok(axum::Json(serde_json::json!({ "deleted": true })))
}
