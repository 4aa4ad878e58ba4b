//! Bearer tokens: who may write (and, when configured, read).
//!
//! With tokens configured, a request that changes anything (any method but
//! GET and HEAD; the Graphite API's POSTs are reads) needs `Authorization: Bearer <token>` matching one of them;
//! with `protect_reads`, so do reads. Tokens are compared in constant time.
//! Without tokens, everything is open (bind to loopback, or set a token).

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{ApiError, AppState};

/// Middleware: answers 401 unless the request may pass.
pub(crate) async fn require_token(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let read = matches!(*req.method(), Method::GET | Method::HEAD);
    check(&state, req, next, read).await
}

/// Middleware of routes that only read whatever their method (the Graphite
/// API: Grafana posts renders and finds): a token only with
/// `protect_reads`.
pub(crate) async fn require_read_token(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    check(&state, req, next, true).await
}

async fn check(state: &AppState, req: Request, next: Next, read: bool) -> Response {
    let settings = state.settings();
    if settings.tokens.is_empty() {
        return next.run(req).await;
    }
    if read && !settings.protect_reads {
        return next.run(req).await;
    }
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let Some(presented) = presented else {
        return ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this request needs `Authorization: Bearer <token>`",
        )
        .into_response();
    };
    // Check every token, so the time taken does not say which one was close.
    let ok = settings.tokens.iter().fold(false, |ok, t| {
        ok | constant_time_eq(t.as_bytes(), presented.as_bytes())
    });
    if !ok {
        return ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "the token is not valid",
        )
        .into_response();
    }
    next.run(req).await
}

/// Equality whose time depends only on the lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn compares_bytes() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(constant_time_eq(b"", b""));
    }
}
