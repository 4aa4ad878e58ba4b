//! The dashboard: static files built into the binary, served at `/`.
//!
//! The built files live in `dashboard/dist/` (bundled from the sources in
//! the repository's `dashboard/` directory; see its README); the page and
//! its icon, which the build would only copy, are taken from
//! `dashboard/src/` itself. All are embedded at compile time, so the
//! dashboard works offline: no CDN, nothing fetched.
//! `GET /` is `index.html`; `GET /assets/{path}` any other file. The page
//! talks to the JSON API only.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rust_embed::RustEmbed;

use super::{ApiError, AppState};

#[derive(RustEmbed)]
#[folder = "src/server/dashboard/dist/"]
struct Assets;

/// The files served as they are in `dashboard/src/` (no build step).
const SOURCES: &[(&str, &str)] = &[
    (
        "index.html",
        include_str!("../../../../dashboard/src/index.html"),
    ),
    (
        "favicon.svg",
        include_str!("../../../../dashboard/src/favicon.svg"),
    ),
];

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/assets/{*path}", get(asset))
}

async fn index() -> Response {
    file("index.html")
        .unwrap_or_else(|| ApiError::not_found("the dashboard is not built in").into_response())
}

async fn asset(Path(path): Path<String>) -> Response {
    file(&path).unwrap_or_else(|| ApiError::not_found(format!("no asset {path:?}")).into_response())
}

fn file(path: &str) -> Option<Response> {
    let body = match SOURCES.iter().find(|(name, _)| *name == path) {
        Some((_, text)) => text.as_bytes().to_vec(),
        None => Assets::get(path)?.data.into_owned(),
    };
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(path)),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Some(response)
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "json" | "map" => "application/json",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "txt" | "md" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}
