//! A tower layer that counts an app's requests into Tally (feature
//! `middleware`), as a servlet filter calling the book's `update_counter`
//! does (docs/reference.md, "Counters at several precisions").
//!
//! [`CountRequestsLayer`] counts every request into three counters, under a
//! prefix (default `http:`): `<prefix>requests` (all), `<prefix>route:<METHOD>
//! <matched route>` (axum's [`MatchedPath`], e.g. `GET /users/{id}`, or
//! `unmatched`), and `<prefix>status:<class>` (`2xx`, `4xx`...). It adds no
//! backend round trip to a request: the increments are handed to an
//! [`CounterWriter`] (in memory; written in batches by its flusher). When the
//! writer is full the increments are dropped and counted in
//! [`CountRequestsLayer::dropped`], never delaying the request.
//!
//! With [`CountRequestsLayer::record_durations`] it also records each
//! request's duration in milliseconds (from the call to the response's
//! head, the body's streaming not included) into two statistics, through
//! a [`StatsWriter`] in the same way (in memory, dropped and counted when
//! full): `<prefix>latency` (all) and `<prefix>latency:<METHOD> <matched
//! route>`, so `Stats::top(Figure::Quantile(0.99), "http:latency:", ...)`
//! ranks the slowest routes.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::extract::MatchedPath;
use http::{Request, Response};
use tower::{Layer, Service};

use crate::counters::CounterWriter;
use crate::stats::StatsWriter;

/// Counts requests into a writer. Cheap to clone.
#[derive(Clone, Debug)]
pub struct CountRequestsLayer {
    counter_writer: CounterWriter,
    durations: Option<StatsWriter>,
    prefix: Arc<str>,
    dropped: Arc<AtomicU64>,
}

impl CountRequestsLayer {
    /// Counts into `counter_writer` under the prefix `http:`.
    pub fn new(counter_writer: CounterWriter) -> Self {
        CountRequestsLayer {
            counter_writer,
            durations: None,
            prefix: Arc::from("http:"),
            dropped: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The same, with counter names starting with `prefix`.
    pub fn prefix(mut self, prefix: &str) -> Self {
        self.prefix = Arc::from(prefix);
        self
    }

    /// Also records every request's duration (milliseconds) into `writer`:
    /// `<prefix>latency` and `<prefix>latency:<METHOD> <route>`.
    pub fn record_durations(mut self, writer: StatsWriter) -> Self {
        self.durations = Some(writer);
        self
    }

    /// Increments (and durations) dropped because the writer was full or refused them.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl<S> Layer<S> for CountRequestsLayer {
    type Service = CountRequests<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CountRequests {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`CountRequestsLayer`] wraps around an app.
#[derive(Clone, Debug)]
pub struct CountRequests<S> {
    inner: S,
    layer: CountRequestsLayer,
}

impl<S, B, R> Service<Request<B>> for CountRequests<S>
where
    S: Service<Request<B>, Response = Response<R>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let matched = format!(
            "{} {}",
            req.method(),
            req.extensions()
                .get::<MatchedPath>()
                .map_or("unmatched", MatchedPath::as_str)
        );
        let route = format!("{}route:{matched}", self.layer.prefix);
        let started = Instant::now();
        // The ready service is the one to call; keep a fresh clone for next time.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let layer = self.layer.clone();
        Box::pin(async move {
            let response = inner.call(req).await?;
            let class = format!(
                "{}status:{}xx",
                layer.prefix,
                response.status().as_u16() / 100
            );
            let total = format!("{}requests", layer.prefix);
            for name in [total.as_str(), route.as_str(), class.as_str()] {
                if let Err(e) = layer.counter_writer.try_add(name, 1, None) {
                    layer.dropped.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(error = %e, counter = name, "request not counted");
                }
            }
            if let Some(writer) = &layer.durations {
                let ms = started.elapsed().as_secs_f64() * 1000.0;
                let all = format!("{}latency", layer.prefix);
                let one = format!("{}latency:{matched}", layer.prefix);
                for name in [all.as_str(), one.as_str()] {
                    if let Err(e) = writer.try_record(name, ms, None) {
                        layer.dropped.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(error = %e, stat = name, "request duration not recorded");
                    }
                }
            }
            Ok(response)
        })
    }
}
