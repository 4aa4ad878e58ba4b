//! `GET /openapi.json`: the API's OpenAPI 3.1 description.
//!
//! The document is `openapi.json` next to this file, embedded at compile
//! time. A test walks every operation it declares against the real router
//! and checks the answers against the declared schemas, so the document and
//! the API cannot drift apart unnoticed.

use axum::http::header;
use axum::response::IntoResponse;

/// The document's text.
pub const DOCUMENT: &str = include_str!("openapi.json");

pub(crate) async fn document() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], DOCUMENT)
}
