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
//!
//! Listing, deleting and the write modes are the shared routes of
//! [`super::series`].

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Deserialize;

use super::check::{self, query_integer};
use super::error::{JsonBody, PathParam};
use super::series::{self, Exact, Keys, ServedKind};
use super::{ApiError, AppState, Services};
use crate::error::Result;
use crate::sets::{MAX_MEMBER_BYTES, MAX_MEMBERS, SetAdd, SetRules, Sets};

pub(crate) fn routes() -> Router<AppState> {
    series::routes::<Sets>().route("/sets/{name}", post(write))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteBody {
    members: Vec<String>,
    at: Option<f64>,
}

async fn write(
    State(state): State<AppState>,
    keys: Keys,
    PathParam(name): PathParam<String>,
    JsonBody(body): JsonBody<WriteBody>,
) -> Result<Response, ApiError> {
    series::service::<Sets>(&state)?;
    check::name("name", &name)?;
    check::time("at", body.at)?;
    // What the document states: 1 to 255 characters. The library's rule
    // (at most 255 bytes) refuses the rest with 422.
    check::each("members", &body.members, MAX_MEMBERS, |field, m| {
        let chars = m.chars().count();
        if chars == 0 || chars > MAX_MEMBER_BYTES {
            return Err(ApiError::field(
                field,
                "invalid_input",
                format!("a set member is 1 to {MAX_MEMBER_BYTES} characters, not {chars}"),
            ));
        }
        Ok(())
    })?;
    let n = body.members.len();
    let mut add = SetAdd::new(name, body.members);
    add.at = body.at;
    series::write::<Sets>(&state, keys, std::slice::from_ref(&add), n).await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadQuery {
    #[serde(default, deserialize_with = "query_integer")]
    precision: Option<u64>,
    #[serde(default, deserialize_with = "query_integer")]
    from: Option<u64>,
    #[serde(default, deserialize_with = "query_integer")]
    to: Option<u64>,
}

impl ServedKind for SetRules {
    const PLURAL: &'static str = "sets";
    const FAMILY: &'static str = "sets";
    const NOUN: &'static str = "set";
    type Writer = Exact;
    type Query = ReadQuery;

    fn of(services: &Services) -> Option<&Sets> {
        services.sets.as_ref()
    }

    fn writer(_: &Services) -> Option<&Exact> {
        None
    }

    async fn read(
        sets: &Sets,
        _: &AppState,
        name: String,
        q: ReadQuery,
    ) -> Result<Response, ApiError> {
        check::precision(sets.precisions(), q.precision)?;
        // By default, everything stored: from 1970 to the latest time a
        // write may carry (read at the coarsest precision).
        let from = q.from.unwrap_or(0);
        let to = q.to.unwrap_or(crate::clock::Timestamp::MAX_SECS as u64);
        for (field, t) in [("from", from), ("to", to)] {
            check::time(field, Some(t as f64))?;
        }
        check::range_order("to", from as f64, to as f64)?;
        let view = sets.view(&name, from, to).await?;
        if view.series.iter().all(|s| s.slices.is_empty()) && view.union.count == 0 {
            return Err(ApiError::not_found(format!(
                "set {name:?} holds nothing in [{from}, {to}]"
            )));
        }
        let read = view
            .series
            .into_iter()
            .filter(|s| q.precision.is_none_or(|p| p == s.precision));
        Ok(axum::Json(serde_json::json!({
            "name": name,
            "precisions": series::by_precision(read.map(|s| (s.precision, s.slices))),
            "union": view.union,
        }))
        .into_response())
    }
}
