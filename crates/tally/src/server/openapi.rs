//! `GET /openapi.json`: the API's OpenAPI 3.1 description, the contract.
//!
//! The document is `openapi.json` next to this file, embedded at compile
//! time; [`render`] writes this server's configuration into it once, at
//! start: the configured precisions, rollups and policy names (as enums),
//! the largest batch, and which operations need a token. So the document a
//! client reads states every constraint this very server enforces, and a
//! schema-driven fuzzer (`tests/tally-cli/api_fuzz.rs`) can check that the
//! server accepts what it allows and refuses what it refuses. A test also walks
//! every operation's `x-example` against the router and validates the
//! answers against the declared schemas.
//!
//! Statuses follow one rule: 400 when the document refuses the request (the
//! handlers check each field, see `check.rs`), 422 when a rule the document
//! states only in words does (an operation's 422 description lists them),
//! 409 for an overflow; every other status an operation can answer is
//! declared on it.

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::{AppState, ServerSettings, Services};

/// The document's text, as written (the defaults' configuration).
pub const DOCUMENT: &str = include_str!("openapi.json");

pub(crate) async fn document(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        state.document().to_owned(),
    )
}

/// The document with the configuration of `services` and `settings`
/// written in.
pub fn render(services: &Services, settings: &ServerSettings) -> String {
    let mut doc: Value = serde_json::from_str(DOCUMENT).expect("openapi.json is valid JSON");
    let schemas = &mut doc["components"]["schemas"];
    schemas["Precision"]["enum"] = json!(services.counters.settings().precisions);
    if let Some(tsdb) = &services.tsdb {
        let rollups: Vec<u64> = tsdb
            .settings()
            .precisions
            .iter()
            .map(|p| p.seconds)
            .collect();
        schemas["Rollup"]["enum"] = json!(rollups);
    }
    let policies: Vec<&String> = services
        .limiter
        .as_ref()
        .map(|(_, p)| p.keys().collect())
        .unwrap_or_default();
    if policies.is_empty() {
        // No name can be valid: the check takes only stated limits.
        let schemas = schemas.as_object_mut().expect("schemas");
        schemas.remove("Policy");
        schemas.remove("PolicyCheck");
        schemas["CheckBody"]["oneOf"]
            .as_array_mut()
            .expect("CheckBody is a oneOf")
            .retain(|s| s["$ref"] != "#/components/schemas/PolicyCheck");
    } else {
        schemas["Policy"]["enum"] = json!(policies);
    }
    for (batch, field, library_max) in [
        ("IncrBatch", "increments", crate::counters::MAX_BATCH),
        ("TsBatch", "increments", crate::tsdb::MAX_BATCH),
        ("DailyBatch", "views", crate::daily::MAX_BATCH),
        ("StatRecordBody", "values", crate::stats::MAX_BATCH),
        ("StatBatch", "observations", crate::stats::MAX_BATCH),
    ] {
        schemas[batch]["properties"][field]["maxItems"] = json!(max_batch(settings, library_max));
    }
    secure(&mut doc, settings);
    serde_json::to_string_pretty(&doc).expect("a JSON value serializes")
}

/// The most items the server takes in one batch whose library limit is
/// `library_max`.
pub(crate) fn max_batch(settings: &ServerSettings, library_max: usize) -> usize {
    settings.max_batch.min(library_max)
}

/// States which operations need a token: with tokens, those under `/v1`
/// that write, and reads there, `/metrics` and the Graphite API's (GET or
/// POST) too with `protect_reads`.
fn secure(doc: &mut Value, settings: &ServerSettings) {
    let bearer = json!([{ "bearer": [] }]);
    doc["security"] = json!([]);
    let paths = doc["paths"].as_object_mut().expect("paths");
    for (path, item) in paths.iter_mut() {
        let graphite = path.starts_with("/graphite/");
        let guarded = path.starts_with("/v1/") || path == "/metrics" || graphite;
        for (method, op) in item.as_object_mut().expect("a path item") {
            // The Graphite API only reads, whatever its method.
            let read = method == "get" || graphite;
            let needs_token =
                !settings.tokens.is_empty() && guarded && (!read || settings.protect_reads);
            op["security"] = if needs_token {
                bearer.clone()
            } else {
                json!([])
            };
        }
    }
}
