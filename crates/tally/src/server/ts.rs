//! `/v1/ts`: the time-series store over HTTP.
//!
//! Writes: `POST /v1/ts/incr` `{"increments": [{"model", "key", "count",
//! "at"}]}`; `POST /v1/ts/{model}/incr` `{"key", "count", "at"}`;
//! `POST /v1/ts/{model}/distinct` `{"key", "values": [...], "at"}`;
//! `POST /v1/ts/{model}/frequent` `{"key", "items": [["item", n], ...],
//! "at"}`; `POST /v1/ts/{model}/merge` `{"into", "from"}`;
//! `POST /v1/ts/{model}/delete` `{"keys": [...]}`.
//!
//! Reads take `keys` (comma-separated), `start` and `end` (Unix seconds;
//! default the last hour) and an optional `rollup` (seconds; default the
//! finest whose retention covers the range): `GET /v1/ts/{model}/range`,
//! `/sums`, `/distinct?view=series|totals|union`, and `/top?key=&n=`.
//!
//! Every field is checked against the document first (400); what the store
//! refuses after that (a time too far ahead, a range ending before it
//! starts or too long) is 422.

use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde::Deserialize;

use super::check::{self, optional_integer, query_integer};
use super::extract::{NamedRead, NamedWrite, Write};
use super::idempotency::KeyedWrite;
use super::{ApiError, AppState, batch_item};
use crate::tsdb::{MAX_BATCH, MAX_COUNT, MAX_KEYS, MAX_VALUES, TsIncrement, TsQuery, Tsdb, topn};

/// The most items a `top` read answers.
const MAX_TOP: usize = 10_000;

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/ts/incr", post(incr_many))
        .route("/ts/{model}/incr", post(incr_one))
        .route("/ts/{model}/distinct", post(record_distinct).get(distinct))
        .route("/ts/{model}/frequent", post(record_frequent))
        .route("/ts/{model}/merge", post(merge))
        .route("/ts/{model}/delete", post(delete))
        .route("/ts/{model}/range", get(range))
        .route("/ts/{model}/sums", get(sums))
        .route("/ts/{model}/top", get(top))
}

/// The store, once the route's `model` is checked.
fn model_tsdb<'a>(state: &'a AppState, model: &str) -> Result<&'a Tsdb, ApiError> {
    let ts = state.service::<Tsdb>()?;
    check::plain_name("model", model)?;
    Ok(ts)
}

/// An increment's fields; `prefix` leads the field names in messages.
fn check_increment(prefix: &str, inc: &TsIncrement) -> Result<(), ApiError> {
    let field = |member: &str| format!("{prefix}{member}");
    check::plain_name(&field("model"), &inc.model)?;
    check::plain_name(&field("key"), &inc.key)?;
    check::within(&field("count"), "invalid_count", inc.count, 1, MAX_COUNT)?;
    check::time(&field("at"), inc.at)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody {
    increments: Vec<IncrementBody>,
}

batch_item! {
    /// One increment of `POST /v1/ts/incr`, as the document states it.
    IncrementBody => TsIncrement { model, key }
}

async fn incr_many(
    Write(state, keyed, body): Write<BatchBody>,
) -> Result<impl IntoResponse, ApiError> {
    let ts = state.service::<Tsdb>()?;
    let increments: Vec<TsIncrement> = check::batch(
        state.settings(),
        "increments",
        body.increments,
        MAX_BATCH,
        check_increment,
    )?;
    incr(ts, keyed, &increments).await?;
    Ok(axum::Json(
        serde_json::json!({ "written": increments.len() }),
    ))
}

/// Declares the body of a write to one key of a model: `key`, the write's
/// own fields, then `at` (Unix seconds; default now). Unknown fields are
/// refused.
macro_rules! key_body {
    ($name:ident { $($own:tt)* }) => {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct $name {
            key: String,
            $($own)*
            #[serde(default)]
            at: Option<f64>,
        }
    };
}

key_body!(IncrBody {
    #[serde(default, deserialize_with = "optional_integer")]
    count: Option<i64>,
});

async fn incr_one(
    NamedWrite(model, Write(state, keyed, body)): NamedWrite<IncrBody>,
) -> Result<impl IntoResponse, ApiError> {
    let ts = state.service::<Tsdb>()?;
    let inc = TsIncrement {
        model,
        key: body.key,
        count: body.count.unwrap_or(1),
        at: body.at,
    };
    check_increment("", &inc)?;
    incr(ts, keyed, std::slice::from_ref(&inc)).await?;
    Ok(axum::Json(serde_json::json!({ "written": 1 })))
}

/// Adds `increments`; with a key, at most once (even when a server died
/// before recording the answer).
async fn incr(
    ts: &Tsdb,
    keyed: Option<Extension<KeyedWrite>>,
    increments: &[TsIncrement],
) -> Result<(), ApiError> {
    match keyed {
        Some(Extension(KeyedWrite(key))) => ts.incr_multi_once(&key, increments).await.map(|_| ()),
        None => ts.incr_multi(increments).await,
    }?;
    Ok(())
}

key_body!(DistinctBody {
    values: Vec<String>,
});

async fn record_distinct(
    NamedWrite(model, Write(state, _, body)): NamedWrite<DistinctBody>,
) -> Result<impl IntoResponse, ApiError> {
    let ts = model_tsdb(&state, &model)?;
    check::plain_name("key", &body.key)?;
    check::each("values", &body.values, MAX_VALUES, |f, v| check::name(f, v))?;
    check::time("at", body.at)?;
    ts.record(&model, &body.key, &body.values, body.at).await?;
    Ok(axum::Json(
        serde_json::json!({ "recorded": body.values.len() }),
    ))
}

key_body!(FrequentBody {
    items: Vec<(String, check::Int)>,
});

async fn record_frequent(
    NamedWrite(model, Write(state, keyed, body)): NamedWrite<FrequentBody>,
) -> Result<impl IntoResponse, ApiError> {
    let ts = model_tsdb(&state, &model)?;
    check::plain_name("key", &body.key)?;
    check::items("items", body.items.len(), 1, MAX_VALUES)?;
    let items: Vec<(String, i64)> = body
        .items
        .into_iter()
        .map(|(item, n)| (item, n.0))
        .collect();
    for (i, (item, count)) in items.iter().enumerate() {
        check::name(&format!("items[{i}][0]"), item)?;
        let field = format!("items[{i}][1]");
        check::within(&field, "invalid_count", *count, 1, topn::MAX_ITEM_COUNT)?;
    }
    check::time("at", body.at)?;
    match keyed {
        Some(Extension(KeyedWrite(idem))) => ts
            .record_frequency_once(&idem, &model, &body.key, &items, body.at)
            .await
            .map(|_| ()),
        None => {
            ts.record_frequency(&model, &body.key, &items, body.at)
                .await
        }
    }?;
    Ok(axum::Json(serde_json::json!({ "recorded": items.len() })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MergeBody {
    into: String,
    from: String,
}

async fn merge(
    NamedWrite(model, Write(state, _, body)): NamedWrite<MergeBody>,
) -> Result<impl IntoResponse, ApiError> {
    let ts = model_tsdb(&state, &model)?;
    check::plain_name("into", &body.into)?;
    check::plain_name("from", &body.from)?;
    ts.merge(&model, &body.into, &body.from).await?;
    Ok(axum::Json(serde_json::json!({ "merged": true })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteBody {
    keys: Vec<String>,
}

async fn delete(
    NamedWrite(model, Write(state, _, body)): NamedWrite<DeleteBody>,
) -> Result<impl IntoResponse, ApiError> {
    let ts = model_tsdb(&state, &model)?;
    check_keys(&body.keys)?;
    ts.delete(&model, &body.keys).await?;
    Ok(axum::Json(
        serde_json::json!({ "deleted": body.keys.len() }),
    ))
}

/// The range of a read: `start` and `end` (Unix seconds; default the hour
/// before now), `rollup` (a configured one; default the library's choice).
/// Each query declares these fields itself (`span_query!`):
/// `serde(flatten)` would read the numbers of a query string as strings.
#[derive(Debug)]
struct Span {
    start: Option<f64>,
    end: Option<f64>,
    rollup: Option<u64>,
}

/// Declares a read query: its own parameters, then the span's (`start`,
/// `end`, `rollup`), which [`Span`] gathers. Unknown parameters are refused.
macro_rules! span_query {
    ($(#[$doc:meta])* $name:ident { $($own:tt)* }) => {
        $(#[$doc])*
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct $name {
            $($own)*
            start: Option<f64>,
            end: Option<f64>,
            #[serde(default, deserialize_with = "query_integer")]
            rollup: Option<u64>,
        }

        impl $name {
            /// The span the query reads.
            fn span(&self) -> Span {
                Span {
                    start: self.start,
                    end: self.end,
                    rollup: self.rollup,
                }
            }
        }
    };
}

impl Span {
    /// Checks the model, `keys` and the span; `(start, end)` defaults to the
    /// hour before now (never before the epoch).
    fn query<'a>(
        &self,
        state: &'a AppState,
        model: String,
        keys: Vec<String>,
    ) -> Result<(&'a Tsdb, TsQuery), ApiError> {
        let ts = model_tsdb(state, &model)?;
        check::time("start", self.start)?;
        check::time("end", self.end)?;
        if let Some(r) = self.rollup
            && !ts.settings().precisions.iter().any(|c| c.seconds == r)
        {
            let configured: Vec<String> = ts
                .settings()
                .precisions
                .iter()
                .map(|c| c.seconds.to_string())
                .collect();
            return Err(ApiError::field(
                "rollup",
                "unknown_precision",
                format!(
                    "rollup {r} s is not configured (configured: {})",
                    configured.join(", ")
                ),
            ));
        }
        let now = state.services().counters.clock().now().as_secs_f64();
        let end = self.end.unwrap_or(now);
        let start = self.start.unwrap_or((end - 3600.0).max(0.0));
        check::range_order("end", start, end)?;
        Ok((
            ts,
            TsQuery::new(model, keys, start, end).precision(self.rollup),
        ))
    }
}

/// `keys`: 1 to [`MAX_KEYS`] keys, comma-separated, none empty.
fn listed_keys(keys: &str) -> Result<Vec<String>, ApiError> {
    let keys: Vec<String> = keys.split(',').map(str::to_owned).collect();
    check_keys(&keys)?;
    Ok(keys)
}

/// 1 to [`MAX_KEYS`] keys, each a plain name.
fn check_keys(keys: &[String]) -> Result<(), ApiError> {
    check::each("keys", keys, MAX_KEYS, |f, k| check::plain_name(f, k))
}

span_query!(
    /// `GET /v1/ts/{model}/range` and `/sums`.
    RangeQuery { keys: String, }
);

impl RangeQuery {
    /// The checked read of `model`.
    fn query(self, state: &AppState, model: String) -> Result<(&Tsdb, TsQuery), ApiError> {
        self.span().query(state, model, listed_keys(&self.keys)?)
    }
}

async fn range(
    NamedRead(state, model, q): NamedRead<RangeQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let (ts, query) = q.query(&state, model)?;
    Ok(axum::Json(ts.get_range(&query).await?))
}

async fn sums(
    NamedRead(state, model, q): NamedRead<RangeQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let (ts, query) = q.query(&state, model)?;
    Ok(axum::Json(ts.get_sums(&query).await?))
}

/// What a distinct read answers.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
enum View {
    /// Per key, per bucket.
    #[default]
    Series,
    /// Per key, over the range.
    Totals,
    /// Across the keys, over the range.
    Union,
}

span_query!(
    /// `GET /v1/ts/{model}/distinct`.
    DistinctQuery {
        keys: String,
        #[serde(default)]
        view: View,
    }
);

async fn distinct(
    NamedRead(state, model, q): NamedRead<DistinctQuery>,
) -> Result<axum::response::Response, ApiError> {
    let (ts, query) = q.span().query(&state, model, listed_keys(&q.keys)?)?;
    Ok(match q.view {
        View::Series => axum::Json(ts.get_distinct_series(&query).await?).into_response(),
        View::Totals => axum::Json(ts.get_distinct_totals(&query).await?).into_response(),
        View::Union => axum::Json(ts.get_distinct_union(&query).await?).into_response(),
    })
}

span_query!(
    /// `GET /v1/ts/{model}/top`.
    TopQuery {
        key: String,
        #[serde(default, deserialize_with = "query_integer")]
        n: Option<usize>,
    }
);

async fn top(
    NamedRead(state, model, q): NamedRead<TopQuery>,
) -> Result<impl IntoResponse, ApiError> {
    check::plain_name("key", &q.key)?;
    let n = q.n.unwrap_or(10);
    check::within("n", "invalid_input", n, 1, MAX_TOP)?;
    let (ts, query) = q.span().query(&state, model, vec![q.key])?;
    Ok(axum::Json(ts.get_top(&query, n).await?))
}
