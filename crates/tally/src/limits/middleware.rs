//! A tower layer that rate-limits an axum app (feature `middleware`).
//!
//! [`RateLimitLayer`] keys each request by a function of it (client address,
//! a header, a token...), checks the key against one [`Limit`] through a
//! [`Limiter`], and either passes the request on, adding `RateLimit-Limit`,
//! `RateLimit-Remaining` and `RateLimit-Reset` (seconds) to the response, or
//! answers `429 Too Many Requests` with the same headers and `Retry-After`
//! (seconds, rounded up), and a JSON body. A request whose key function
//! returns `None` is not limited. A key that is not a valid name (e.g. an
//! over-long header) is answered with 400. Backend failures answer as the
//! limit's fail mode says (see [`super::FailMode`]).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::ConnectInfo;
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode};
use tower::{Layer, Service};

use super::{Decision, Limit, Limiter};
use crate::error::Result;

/// How a request is keyed: `None` exempts it.
pub type KeyFn = Arc<dyn Fn(&Request<Body>) -> Option<String> + Send + Sync>;

/// The client's IP address, from axum's `ConnectInfo<SocketAddr>` (serve the
/// app with `into_make_service_with_connect_info::<SocketAddr>()`).
pub fn client_ip(req: &Request<Body>) -> Option<String> {
    req.extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip().to_string())
}

/// A key function reading one header (requests without it are exempt).
pub fn header(name: HeaderName) -> impl Fn(&Request<Body>) -> Option<String> + Send + Sync {
    move |req| {
        req.headers()
            .get(&name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }
}

#[derive(Clone)]
struct Config {
    limiter: Limiter,
    limit: Limit,
    key: KeyFn,
    prefix: String,
    cost: u64,
}

/// Rate-limits the wrapped service. Cheap to clone.
#[derive(Clone)]
pub struct RateLimitLayer {
    config: Arc<Config>,
}

impl std::fmt::Debug for RateLimitLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("limit", &self.config.limit)
            .field("prefix", &self.config.prefix)
            .finish_non_exhaustive()
    }
}

impl RateLimitLayer {
    /// Limits requests keyed by `key` to `limit` (checked now, so a bad limit
    /// fails at start). Keys are stored as `http:<key>`.
    pub fn new(
        limiter: Limiter,
        limit: Limit,
        key: impl Fn(&Request<Body>) -> Option<String> + Send + Sync + 'static,
    ) -> Result<Self> {
        limit.validate()?;
        Ok(RateLimitLayer {
            config: Arc::new(Config {
                limiter,
                limit,
                key: Arc::new(key),
                prefix: "http".to_owned(),
                cost: 1,
            }),
        })
    }

    /// Limits requests per client IP address.
    pub fn per_client_ip(limiter: Limiter, limit: Limit) -> Result<Self> {
        Self::new(limiter, limit, client_ip)
    }

    /// Limits requests per value of a header (e.g. an API key).
    pub fn per_header(limiter: Limiter, limit: Limit, name: HeaderName) -> Result<Self> {
        Self::new(limiter, limit, header(name))
    }

    /// Stores keys as `<prefix>:<key>`, so two layers do not share state.
    pub fn with_prefix(mut self, prefix: &str) -> Self {
        Arc::make_mut(&mut self.config).prefix = prefix.to_owned();
        self
    }

    /// Counts each request as `cost` units (default 1).
    pub fn with_cost(mut self, cost: u64) -> Self {
        Arc::make_mut(&mut self.config).cost = cost;
        self
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            config: self.config.clone(),
        }
    }
}

/// The service made by [`RateLimitLayer`].
#[derive(Clone)]
pub struct RateLimit<S> {
    inner: S,
    config: Arc<Config>,
}

/// Adds the `RateLimit-*` headers of `d` (reset in whole seconds from now).
pub(crate) fn add_headers(headers: &mut HeaderMap, d: &Decision, now_ms: u64) {
    let reset = d.reset_at_ms.saturating_sub(now_ms).div_ceil(1000);
    for (name, value) in [
        ("ratelimit-limit", d.limit),
        ("ratelimit-remaining", d.remaining),
        ("ratelimit-reset", reset),
    ] {
        headers.insert(HeaderName::from_static(name), HeaderValue::from(value));
    }
}

fn json(status: StatusCode, body: serde_json::Value) -> Response<Body> {
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

impl<S> Service<Request<Body>> for RateLimit<S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        // The ready clone serves this request; a fresh clone waits for the next.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let config = self.config.clone();
        Box::pin(async move {
            let Some(key) = (config.key)(&req) else {
                return inner.call(req).await;
            };
            let key = format!("{}:{key}", config.prefix);
            let now = config.limiter.clock().now().as_millis();
            let d = match config.limiter.check(&key, &config.limit, config.cost).await {
                Ok(d) => d,
                Err(e) if e.is_bad_input() => {
                    return Ok(json(
                        StatusCode::BAD_REQUEST,
                        serde_json::json!({ "error": e.code(), "message": e.to_string() }),
                    ));
                }
                Err(e) => {
                    tracing::error!(error = %e, "rate limit check failed");
                    return Ok(json(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        serde_json::json!({ "error": "internal" }),
                    ));
                }
            };
            if d.allowed {
                let mut resp = inner.call(req).await?;
                add_headers(resp.headers_mut(), &d, now);
                return Ok(resp);
            }
            let mut resp = json(
                StatusCode::TOO_MANY_REQUESTS,
                serde_json::json!({ "error": "rate_limited", "decision": d }),
            );
            add_headers(resp.headers_mut(), &d, now);
            if let Some(ms) = d.retry_after_ms {
                resp.headers_mut().insert(
                    http::header::RETRY_AFTER,
                    HeaderValue::from(ms.div_ceil(1000).max(1)),
                );
            }
            Ok(resp)
        })
    }
}
