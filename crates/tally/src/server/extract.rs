//! Extractors that gather, in one argument, what a write or a read of one
//! named thing (`/{name}` in the path: a model, a lock, a key) takes: the
//! state, the name, the idempotency key, the JSON body or the query.
//!
//! They take the parts in the order the separate extractors did (the path,
//! then the body or the query), so a request with several faults is answered
//! for the same one. A name is not checked here: each route says which field
//! it is and how it is checked.

use axum::Extension;
use axum::extract::{FromRequest, FromRequestParts, Request};
use serde::de::DeserializeOwned;

use super::error::{JsonBody, PathParam, QueryParams};
use super::idempotency::KeyedWrite;
use super::{ApiError, AppState};

/// A write: the state, the request's idempotency key if it carries one, and
/// the JSON body.
pub(crate) struct Write<B>(
    pub(crate) AppState,
    pub(crate) Option<Extension<KeyedWrite>>,
    pub(crate) B,
);

impl<B: DeserializeOwned> FromRequest<AppState> for Write<B> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let keyed = req.extensions().get::<KeyedWrite>().cloned().map(Extension);
        let JsonBody(body) = JsonBody::from_request(req, state).await?;
        Ok(Write(state.clone(), keyed, body))
    }
}

/// A write to one named thing: the name, then the write.
pub(crate) struct NamedWrite<B>(pub(crate) String, pub(crate) Write<B>);

impl<B: DeserializeOwned> FromRequest<AppState> for NamedWrite<B> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let (mut parts, body) = req.into_parts();
        let PathParam(name) = PathParam::from_request_parts(&mut parts, state).await?;
        let write = Write::from_request(Request::from_parts(parts, body), state).await?;
        Ok(NamedWrite(name, write))
    }
}

/// A read of one named thing: the state, the name and the query.
pub(crate) struct NamedRead<Q>(pub(crate) AppState, pub(crate) String, pub(crate) Q);

impl<Q: DeserializeOwned> FromRequestParts<AppState> for NamedRead<Q> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &AppState,
    ) -> Result<Self, ApiError> {
        let PathParam(name) = PathParam::from_request_parts(parts, state).await?;
        let QueryParams(query) = QueryParams::from_request_parts(parts, state).await?;
        Ok(NamedRead(state.clone(), name, query))
    }
}
