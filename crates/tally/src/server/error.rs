//! Errors as HTTP answers: JSON `{"error": {"code", "message"}}`.
//!
//! [`ApiError`] maps Tally's errors and axum's rejections to a status, as
//! the API document (`openapi.json`) states them: 400 for a request the
//! document refuses (malformed JSON, a missing, unknown or null field, a
//! value out of range, an invalid name or time...; the handlers check these
//! field by field, see [`super::check`]), 401 for a missing or wrong token,
//! 404, 405, 409 for a count that would overflow, 413 for a body too large,
//! 415 for a missing JSON content type, 422 for a well-formed request that a
//! rule the document states only in words refuses, 503 when the backend is
//! unreachable or the server overloaded. Server faults (500) are logged
//! with their detail and answered without it.
//!
//! A library error becomes an answer in one place, `From<Error>`: a handler
//! checks a request's fields first, so a plain `?` on a library call answers
//! what the library still refuses (422, 409 for an overflow) or its fault
//! (503, 500). An answer for a fault of the backend carries [`BackendFault`]
//! in its extensions, and [`super::metrics::observe`] counts it.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::error::Error;

/// A service of the server, or 404 when it does not have it: `what`
/// names it with its verb ("locks are", "the time-series store is").
pub(crate) fn enabled<T: ?Sized>(
    service: Option<&T>,
    what: impl std::fmt::Display,
) -> Result<&T, ApiError> {
    service.ok_or_else(|| ApiError::not_found(format!("{what} not enabled on this server")))
}

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    /// The backend's fault (counted by the metrics), not the request's.
    fault: bool,
}

/// In a response's extensions: the answer to a fault of the backend.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BackendFault;

impl ApiError {
    /// An answer with this status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            fault: false,
        }
    }

    /// 400 with code `invalid_input`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_input", message)
    }

    /// 400 for the request field `field` (a JSON path such as
    /// `increments[2].name`, or a parameter's name), with `code`.
    pub fn field(field: &str, code: &'static str, problem: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, format!("{field}: {problem}"))
    }

    /// 400 for bad input a library validator found while the handler
    /// checked the request against the document (a precision that is not
    /// configured...), with the error's own code and message.
    pub fn invalid(e: Error) -> Self {
        if !e.is_bad_input() {
            return e.into();
        }
        Self::new(StatusCode::BAD_REQUEST, e.code(), e.to_string())
    }

    /// 404 with code `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 503 with code `overloaded` (and `Retry-After: 1`).
    pub fn overloaded(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "overloaded", message)
    }

    /// 500 without detail.
    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal server error",
        )
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }
}

impl From<Error> for ApiError {
    /// The answer to a library error of a request whose fields the handler
    /// already checked against the document: what the library still
    /// refuses breaks a rule the document states only in words (422, code
    /// `unprocessable`), except an overflow (409, code `overflow`: the
    /// request is well formed, the stored count cannot take it); an
    /// unreachable backend is 503, a full queue 503 `overloaded`, any
    /// other fault 500 without detail.
    fn from(e: Error) -> Self {
        if let Error::Overflow { .. } = e {
            return Self::new(StatusCode::CONFLICT, e.code(), e.to_string());
        }
        if e.is_bad_input() {
            return Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "unprocessable",
                e.to_string(),
            );
        }
        let answer = match e {
            Error::Overloaded(_) => return Self::overloaded(e.to_string()),
            Error::Unavailable(_) | Error::NotReplicated { .. } => {
                tracing::warn!(error = %e, "backend unavailable");
                Self::new(StatusCode::SERVICE_UNAVAILABLE, e.code(), e.to_string())
            }
            other => {
                tracing::error!(error = %other, "request failed");
                Self::internal()
            }
        };
        ApiError {
            fault: true,
            ..answer
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        match r.status() {
            StatusCode::PAYLOAD_TOO_LARGE => Self::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                "the request body is larger than the server accepts",
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => Self::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as JSON with `Content-Type: application/json`",
            ),
            _ => Self::new(StatusCode::BAD_REQUEST, "invalid_json", r.body_text()),
        }
    }
}

impl From<BytesRejection> for ApiError {
    fn from(r: BytesRejection) -> Self {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Self::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                "the request body is larger than the server accepts",
            )
        } else {
            Self::bad_request(r.body_text())
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        Self::bad_request(r.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        Self::bad_request(r.body_text())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "error": { "code": self.code, "message": self.message }
        });
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if self.fault {
            response.extensions_mut().insert(BackendFault);
        }
        response
    }
}

/// The answer to a request whose handler panicked.
pub(crate) fn panic_response(panic: Box<dyn std::any::Any + Send>) -> Response {
    let detail = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("unknown");
    tracing::error!(panic = detail, "a request handler panicked");
    ApiError::internal().into_response()
}

/// JSON extraction that answers with [`ApiError`] on every rejection.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<T, S> FromRequest<S> for JsonBody<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(value)) => Ok(JsonBody(value)),
            Err(rejection) => Err(rejection.into()),
        }
    }
}

/// An extractor of the request's parts that answers with [`ApiError`]:
/// `$name<T>` wraps axum's `$axum<T>`.
macro_rules! parts_extractor {
    ($(#[$doc:meta])* $name:ident, $axum:ident, $($bound:tt)+) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name<T>(pub T);

        impl<T, S> FromRequestParts<S> for $name<T>
        where
            T: $($bound)+,
            S: Send + Sync,
        {
            type Rejection = ApiError;

            async fn from_request_parts(
                parts: &mut axum::http::request::Parts,
                state: &S,
            ) -> Result<Self, Self::Rejection> {
                axum::extract::$axum::<T>::from_request_parts(parts, state)
                    .await
                    .map(|axum::extract::$axum(v)| $name(v))
                    .map_err(ApiError::from)
            }
        }
    };
}

parts_extractor!(
    /// Path extraction that answers with [`ApiError`].
    PathParam, Path, serde::de::DeserializeOwned + Send
);
parts_extractor!(
    /// Query extraction that answers with [`ApiError`].
    QueryParams, Query, serde::de::DeserializeOwned
);

/// The raw body (within the size limit), answering with [`ApiError`].
#[derive(Debug)]
pub struct RawBody(pub Bytes);

impl<S> FromRequest<S> for RawBody
where
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        Bytes::from_request(req, state)
            .await
            .map(RawBody)
            .map_err(ApiError::from)
    }
}
