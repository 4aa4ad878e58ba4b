//! The routes every series kind shares (counters, statistics, gauges,
//! sets), written once over [`SeriesRoutes`]:
//!
//! - `GET /v1/{kind}?prefix=&cursor=&limit=`: names in order, paginated,
//!   answered `{"<kind>": [...], "next": ...}`;
//! - `GET /v1/{kind}/{name}`: the kind's read (its query and answer are the
//!   kind's own, [`SeriesRoutes::read`]);
//! - `DELETE /v1/{kind}/{name}`: `{"deleted": true}`, 404 when it held
//!   nothing;
//! - the write modes ([`write`]): a kind with an aggregating writer answers
//!   `202 {"accepted": n}` once the writer holds the write (with an
//!   `Idempotency-Key`, claimed together with it); otherwise, or with
//!   `exact_writes`, `200 {"written": n}` once stored (with a key, applied
//!   once).
//!
//! A kind's own file holds its write bodies and its read; a service that is
//! not enabled answers 404 on every route.

use std::future::Future;

use axum::Json;
use axum::Router;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::check;
use super::error::{JsonBody, PathParam, QueryParams};
use super::idempotency::{AggregatedKey, KeyedWrite, replay, unclaimed};
use super::{ApiError, AppState, Metrics, Services};
use crate::engine::Page;
use crate::engine::SliceSel;
use crate::engine::series::{Rules, SeriesService, SeriesWriter};
use crate::error::Result;
use crate::idempotency::{Answer, Claim};

/// What a write brings from the idempotency layer: its key when it is
/// written exactly, or its claim to make when it is aggregated.
pub(crate) type Keys = (
    Option<Extension<KeyedWrite>>,
    Option<Extension<AggregatedKey>>,
);

/// A series kind as the HTTP API serves it.
pub(crate) trait SeriesRoutes: Send + Sync + Sized + 'static {
    /// The routes' segment and the listing's field (`counters`).
    const PLURAL: &'static str;
    /// What the kind is called when it is not enabled (`statistics`).
    const FAMILY: &'static str;
    /// One series in messages (`statistic`).
    const NOUN: &'static str;
    /// One write, as the library takes it.
    type Op: Send + Sync + 'static;
    /// The aggregating writer of HTTP writes ([`Exact`]: none).
    type Writer: Aggregating<Self::Op> + 'static;
    /// The query of a read.
    type Query: DeserializeOwned + Send + 'static;

    /// The service, when this server has it.
    fn of(services: &Services) -> Option<&Self>;

    /// The aggregating writer HTTP writes go through, when they do.
    fn writer(services: &Services) -> Option<&Self::Writer>;

    /// A page of names ([`crate::Counters::search`]).
    fn search(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> impl Future<Output = Result<Page>> + Send;

    /// Deletes a series; true if it held anything.
    fn delete(&self, name: &str) -> impl Future<Output = Result<bool>> + Send;

    /// Writes `ops` before answering.
    fn write(&self, ops: &[Self::Op]) -> impl Future<Output = Result<()>> + Send;

    /// Writes `ops` at most once for the idempotency key `key`.
    fn write_once(&self, key: &str, ops: &[Self::Op]) -> impl Future<Output = Result<()>> + Send;

    /// The answer to `GET /v1/{PLURAL}/{name}`, `name` checked.
    fn read(
        &self,
        state: &AppState,
        name: String,
        query: Self::Query,
    ) -> impl Future<Output = std::result::Result<Response, ApiError>> + Send;

    /// Counts `n` writes taken (the counters count their increments).
    fn taken(_metrics: &Metrics, _n: usize) {}
}

/// A kind the engine's series service carries (counters, statistics, gauges, sets):
/// what its routes add to the service's own listing, delete and writes.
pub(crate) trait ServedKind: Rules + Sized {
    /// [`SeriesRoutes::PLURAL`].
    const PLURAL: &'static str;
    /// [`SeriesRoutes::FAMILY`].
    const FAMILY: &'static str;
    /// [`SeriesRoutes::NOUN`].
    const NOUN: &'static str;
    /// [`SeriesRoutes::Writer`].
    type Writer: Aggregating<Self::Op> + 'static;
    /// [`SeriesRoutes::Query`].
    type Query: DeserializeOwned + Send + 'static;

    /// [`SeriesRoutes::of`].
    fn of(services: &Services) -> Option<&SeriesService<Self>>;

    /// The kind's aggregating writer, when the server has one; HTTP writes
    /// go through it unless the server writes exactly
    /// ([`SeriesRoutes::writer`]).
    fn writer(services: &Services) -> Option<&Self::Writer>;

    /// [`SeriesRoutes::read`].
    fn read(
        service: &SeriesService<Self>,
        state: &AppState,
        name: String,
        query: Self::Query,
    ) -> impl Future<Output = std::result::Result<Response, ApiError>> + Send;

    /// [`SeriesRoutes::taken`].
    fn taken(_metrics: &Metrics, _n: usize) {}
}

impl<R: ServedKind> SeriesRoutes for SeriesService<R>
where
    R::Op: Send + Sync,
{
    const PLURAL: &'static str = R::PLURAL;
    const FAMILY: &'static str = R::FAMILY;
    const NOUN: &'static str = R::NOUN;
    type Op = R::Op;
    type Writer = R::Writer;
    type Query = R::Query;

    fn of(services: &Services) -> Option<&Self> {
        R::of(services)
    }

    fn writer(services: &Services) -> Option<&R::Writer> {
        R::writer(services).filter(|_| !services.exact_writes)
    }

    async fn search(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Page> {
        SeriesService::search(self, prefix, after, limit).await
    }

    async fn delete(&self, name: &str) -> Result<bool> {
        SeriesService::delete(self, name).await
    }

    async fn write(&self, ops: &[R::Op]) -> Result<()> {
        SeriesService::write(self, ops).await
    }

    async fn write_once(&self, key: &str, ops: &[R::Op]) -> Result<()> {
        SeriesService::write_once(self, key, ops).await.map(|_| ())
    }

    fn read(
        &self,
        state: &AppState,
        name: String,
        query: R::Query,
    ) -> impl Future<Output = std::result::Result<Response, ApiError>> + Send {
        R::read(self, state, name, query)
    }

    fn taken(metrics: &Metrics, n: usize) {
        R::taken(metrics, n)
    }
}

/// An aggregating writer that HTTP writes go through.
pub(crate) trait Aggregating<Op>: Send + Sync {
    /// Hands `ops` to the writer.
    fn take(&self, ops: &[Op]) -> impl Future<Output = Result<()>> + Send;

    /// Hands `ops` to the writer and claims the request's key with
    /// `answer`, together.
    fn take_claimed(
        &self,
        key: &AggregatedKey,
        ops: &[Op],
        answer: &Answer,
    ) -> impl Future<Output = Result<Claim>> + Send;
}

impl<R: Rules> Aggregating<R::Op> for SeriesWriter<R>
where
    R::Op: Send + Sync,
{
    fn take(&self, ops: &[R::Op]) -> impl Future<Output = Result<()>> + Send {
        self.take_many(ops)
    }

    fn take_claimed(
        &self,
        k: &AggregatedKey,
        ops: &[R::Op],
        answer: &Answer,
    ) -> impl Future<Output = Result<Claim>> + Send {
        self.take_many_claimed(&k.idempotency, &k.key, &k.fingerprint, ops, answer)
    }
}

/// No aggregating writer: the kind's HTTP writes are exact.
#[derive(Debug)]
pub(crate) enum Exact {}

impl<Op: Sync> Aggregating<Op> for Exact {
    async fn take(&self, _: &[Op]) -> Result<()> {
        match *self {}
    }

    async fn take_claimed(&self, _: &AggregatedKey, _: &[Op], _: &Answer) -> Result<Claim> {
        match *self {}
    }
}

/// The list, read and delete routes of the kind `S`.
pub(crate) fn routes<S: SeriesRoutes>() -> Router<AppState> {
    Router::new()
        .route(&format!("/{}", S::PLURAL), get(list::<S>))
        .route(
            &format!("/{}/{{name}}", S::PLURAL),
            get(read::<S>).delete(delete::<S>),
        )
}

/// The kind's service, or 404 when this server does not have it.
pub(crate) fn service<S: SeriesRoutes>(state: &AppState) -> std::result::Result<&S, ApiError> {
    super::error::enabled(S::of(state.services()), format_args!("{} are", S::FAMILY))
}

async fn list<S: SeriesRoutes>(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<check::ListQuery>,
) -> std::result::Result<Response, ApiError> {
    let service = service::<S>(&state)?;
    let (prefix, cursor, limit) = q.checked(check::MAX_LIST)?;
    let page = service.search(prefix, cursor, limit).await?;
    Ok(Json(Listing(S::PLURAL, page)).into_response())
}

/// One page of names: `{"<kind>": [...], "next": ...}`, in that order.
struct Listing(&'static str, Page);

impl Serialize for Listing {
    fn serialize<Ser: serde::Serializer>(
        &self,
        s: Ser,
    ) -> std::result::Result<Ser::Ok, Ser::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry(self.0, &self.1.names)?;
        map.serialize_entry("next", &self.1.next)?;
        map.end()
    }
}

async fn read<S: SeriesRoutes>(
    State(state): State<AppState>,
    PathParam(name): PathParam<String>,
    QueryParams(q): QueryParams<S::Query>,
) -> std::result::Result<Response, ApiError> {
    let service = service::<S>(&state)?;
    check::name("name", &name)?;
    service.read(&state, name, q).await
}

async fn delete<S: SeriesRoutes>(
    State(state): State<AppState>,
    PathParam(name): PathParam<String>,
) -> std::result::Result<Response, ApiError> {
    let service = service::<S>(&state)?;
    check::name("name", &name)?;
    if !service.delete(&name).await? {
        return Err(ApiError::not_found(format!(
            "no {} named {name:?}",
            S::NOUN
        )));
    }
    Ok(Json(serde_json::json!({ "deleted": true })).into_response())
}

/// Writes `ops` (`n` in the answer: increments, values, members) all or
/// none, in the kind's mode on this server (see the module's doc).
pub(crate) async fn write<S: SeriesRoutes>(
    state: &AppState,
    (keyed, aggregated): Keys,
    ops: &[S::Op],
    n: usize,
) -> std::result::Result<Response, ApiError> {
    let service = service::<S>(state)?;
    let response = match (S::writer(state.services()), aggregated) {
        (Some(writer), Some(Extension(k))) => {
            let answer = Answer::json(202, &serde_json::json!({ "accepted": n }));
            match writer.take_claimed(&k, ops, &answer).await? {
                Claim::Claimed(_) => replay(&answer, false),
                other => return Ok(unclaimed(other)),
            }
        }
        (Some(writer), None) => {
            writer.take(ops).await?;
            let accepted = serde_json::json!({ "accepted": n });
            (StatusCode::ACCEPTED, Json(accepted)).into_response()
        }
        (None, _) => {
            match keyed {
                // Applied once, even when a server died before recording
                // the answer.
                Some(Extension(KeyedWrite(key))) => service.write_once(&key, ops).await?,
                None => service.write(ops).await?,
            }
            Json(serde_json::json!({ "written": n })).into_response()
        }
    };
    S::taken(state.metrics(), n);
    Ok(response)
}

/// The route of a batch request (`POST /v1/incr`, `/v1/record`): of its
/// `Body`, `items` gives the field, its items and the most it may hold;
/// the field must hold 1 to the server's batch limit (at most that most),
/// each item converted into the kind's write and checked with `each`
/// (given the prefix of its fields in messages, `field[3].`).
pub(crate) fn batch<S, Body, B>(
    items: fn(Body) -> (&'static str, Vec<B>, usize),
    each: fn(&str, &S::Op) -> std::result::Result<(), ApiError>,
) -> MethodRouter<AppState>
where
    S: SeriesRoutes,
    S::Op: From<B> + Send,
    Body: DeserializeOwned + Send + 'static,
    B: Send + 'static,
{
    post(
        move |State(state): State<AppState>, keys: Keys, JsonBody(body): JsonBody<Body>| async move {
            let (field, items, max) = items(body);
            service::<S>(&state)?;
            let ops: Vec<S::Op> = check::batch(state.settings(), field, items, max, each)?;
            write::<S>(&state, keys, &ops, ops.len()).await
        },
    )
}

/// Declares a kind's read query: `?precision=&from=&to=` (a slice length,
/// and the range's ends in Unix seconds, as [`slices`] takes them), then
/// the kind's own parameters, if any. Unknown parameters are refused.
macro_rules! range_query {
    ($(#[$doc:meta])* $name:ident { $($own:tt)* }) => {
        $(#[$doc])*
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(crate) struct $name {
            #[serde(default, deserialize_with = "crate::server::check::query_integer")]
            precision: Option<u64>,
            from: Option<f64>,
            to: Option<f64>,
            $($own)*
        }
    };
}
pub(crate) use range_query;

/// The slices starting in `[from, to]` (Unix seconds, either end open).
pub(crate) fn slices(from: Option<f64>, to: Option<f64>) -> SliceSel {
    if from.is_none() && to.is_none() {
        return SliceSel::All;
    }
    SliceSel::Range {
        from: from.map_or(0, |f| f.ceil() as u64),
        to: to.map_or(u64::MAX, |t| t.floor() as u64),
    }
}

/// A read's series keyed by precision, in the order given.
pub(crate) fn by_precision<T: Serialize>(
    series: impl IntoIterator<Item = (u64, T)>,
) -> serde_json::Map<String, serde_json::Value> {
    series
        .into_iter()
        .map(|(precision, slices)| {
            let slices = serde_json::to_value(slices).unwrap_or_default();
            (precision.to_string(), slices)
        })
        .collect()
}
