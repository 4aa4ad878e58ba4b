//! `/v1/buffers`: buffered counters (Sentry's buffers) over HTTP.
//!
//! - `POST /v1/buffers/incr` `{"table", "key": {col: value}, "add": {col: n},
//!   "set": {col: value}}`: buffers one change to a row (one round trip);
//! - `GET /v1/buffers/{table}/row?<key column>=<value>...`: the row as SQL
//!   holds it plus the changes not yet flushed (needs the server's flusher);
//! - `GET /v1/buffers/stats`: the backlog, and the flusher's figures when it
//!   runs in this server.
//!
//! Which tables, key columns and counter or last-write columns exist is the
//! configuration's, not the document's: a change that does not fit the
//! mapping is 422.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Extension, Router};

use super::check;
use super::extract::{NamedRead, Write};
use super::idempotency::KeyedWrite;
use super::{ApiError, AppState};
use crate::buffers::{Buffers, Flusher, Update};

/// The body of `POST /v1/buffers/incr`, as the document states it.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateBody {
    table: String,
    key: BTreeMap<String, String>,
    #[serde(default)]
    add: BTreeMap<String, check::Int>,
    #[serde(default)]
    set: BTreeMap<String, String>,
}

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/buffers/incr", post(incr))
        .route("/buffers/stats", get(stats))
        .route("/buffers/{table}/row", get(row))
}

fn buffers(state: &AppState) -> Result<(&Buffers, Option<&Flusher>), ApiError> {
    state
        .services()
        .buffers
        .as_ref()
        .map(|(b, f)| (b, f.as_ref()))
        .ok_or_else(|| {
            ApiError::not_found(
                "buffered counters are not configured on this server ([buffers] tables)",
            )
        })
}

async fn incr(Write(state, keyed, body): Write<UpdateBody>) -> Result<impl IntoResponse, ApiError> {
    let (buffers, _) = buffers(&state)?;
    for (column, delta) in &body.add {
        let field = format!("add.{column}");
        check::within(&field, "invalid_count", delta.0, -i64::MAX, i64::MAX - 1)?;
    }
    let update = Update {
        table: body.table,
        key: body.key,
        add: body.add.into_iter().map(|(c, d)| (c, d.0)).collect(),
        set: body.set,
    };
    match keyed {
        // Buffered once, even when a server died before recording the answer.
        Some(Extension(KeyedWrite(key))) => buffers.incr_once(&key, &update).await.map(|_| ()),
        None => buffers.incr(&update).await,
    }?;
    Ok(axum::Json(serde_json::json!({ "buffered": true })))
}

async fn row(
    NamedRead(state, table, key): NamedRead<BTreeMap<String, String>>,
) -> Result<impl IntoResponse, ApiError> {
    let (buffers, flusher) = buffers(&state)?;
    let flusher = flusher.ok_or_else(|| {
        ApiError::not_found("no SQL sink is configured on this server ([buffers] sink)")
    })?;
    let key: Vec<(&str, &str)> = key.iter().map(|(c, v)| (c.as_str(), v.as_str())).collect();
    let row = buffers.read(flusher.sink().as_ref(), &table, &key).await?;
    Ok(axum::Json(row))
}

async fn stats(State(state): State<AppState>) -> Result<axum::response::Response, ApiError> {
    let (buffers, flusher) = buffers(&state)?;
    Ok(match flusher {
        Some(f) => axum::Json(f.metrics().await).into_response(),
        None => axum::Json(buffers.stats().await?).into_response(),
    })
}
