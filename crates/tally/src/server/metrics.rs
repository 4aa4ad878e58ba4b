//! `GET /metrics`: the service's own figures in Prometheus's text format.
//!
//! [`Metrics`] is shared by the server, the statsd listener and the cleaner;
//! the writer's and the limiter's figures are read from them at scrape
//! time. Each family is one row of `FAMILIES` (its name, help and how a
//! scrape reads it), in the order shown. Families (all prefixed `tally_`):
//! HTTP requests by method, route and status, and their latency;
//! increments accepted and written; write batches
//! and flush latency; cleaner passes, their duration, samples and counters
//! removed; statsd datagrams received, lines accepted (and those whose tags
//! were dropped) and rejected by reason, the statsd socket's receive buffer
//! and the datagrams the kernel dropped for it (read from the kernel at
//! scrape time); carbon lines accepted and rejected by reason, its TCP
//! connections (open, and accepted in all) and UDP datagrams; backend
//! errors; rate-limit checks.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::BackendFault;
use super::udp::{self, SocketInfo};
use crate::buffers::flusher::FlushMetricsSnapshot;
use crate::engine::{CleanReport, WriterStats};
use crate::error::{Error, Result};
use crate::limits::LimiterMetricsSnapshot;
use crate::metrics::{Exposition, Histogram, HistogramSnapshot};

/// The server's counters. Cheap to clone (clones share the figures).
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    request_latency: Histogram,
    increments_accepted: AtomicU64,
    backend_errors: AtomicU64,
    statsd_datagrams: AtomicU64,
    statsd_socket: Mutex<Option<SocketInfo>>,
    statsd_accepted: AtomicU64,
    statsd_tags_dropped: AtomicU64,
    statsd_rejected: ByReason,
    carbon_accepted: AtomicU64,
    carbon_rejected: ByReason,
    carbon_connections_open: AtomicU64,
    carbon_connections: AtomicU64,
    carbon_datagrams: AtomicU64,
    cleaner_passes: AtomicU64,
    cleaner_failures: AtomicU64,
    cleaner_samples_removed: AtomicU64,
    cleaner_counters_removed: AtomicU64,
    cleaner_latency: Histogram,
}

impl Metrics {
    /// Increments accepted through the API (or statsd).
    pub fn increments_accepted(&self, n: u64) {
        self.inner
            .increments_accepted
            .fetch_add(n, Ordering::Relaxed);
    }

    /// Counts `e` if it is the backend's fault (not the caller's input).
    pub fn backend_error_if(&self, e: &Error) {
        if !e.is_bad_input() && !matches!(e, Error::Overloaded(_)) {
            self.inner.backend_errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Statsd datagrams received.
    pub fn statsd_datagrams(&self, n: u64) {
        self.inner.statsd_datagrams.fetch_add(n, Ordering::Relaxed);
    }

    /// Statsd datagrams received so far.
    pub fn statsd_datagrams_total(&self) -> u64 {
        self.inner.statsd_datagrams.load(Ordering::Relaxed)
    }

    /// The statsd socket, whose buffer and kernel drops `/metrics` shows.
    pub fn statsd_socket(&self, info: SocketInfo) {
        *self
            .inner
            .statsd_socket
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(info);
    }

    /// Datagrams the kernel dropped for the statsd socket (a full receive
    /// buffer), when there is one and the system counts them (Linux).
    pub async fn statsd_kernel_drops(&self) -> Option<u64> {
        let info = *self
            .inner
            .statsd_socket
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        udp::kernel_drops(info?).await
    }

    /// One statsd line accepted.
    pub fn statsd_accepted(&self, n: u64) {
        self.inner.statsd_accepted.fetch_add(n, Ordering::Relaxed);
    }

    /// Statsd lines accepted whose tags were dropped (written under their
    /// bare name).
    pub fn statsd_tags_dropped(&self, n: u64) {
        self.inner
            .statsd_tags_dropped
            .fetch_add(n, Ordering::Relaxed);
    }

    /// Statsd lines accepted so far whose tags were dropped.
    pub fn statsd_tags_dropped_total(&self) -> u64 {
        self.inner.statsd_tags_dropped.load(Ordering::Relaxed)
    }

    /// One statsd line rejected, for `reason` (a short fixed code).
    pub fn statsd_rejected(&self, reason: &'static str) {
        self.inner.statsd_rejected.add(reason);
    }

    /// Statsd lines accepted so far.
    pub fn statsd_accepted_total(&self) -> u64 {
        self.inner.statsd_accepted.load(Ordering::Relaxed)
    }

    /// Statsd lines rejected so far, all reasons.
    pub fn statsd_rejected_total(&self) -> u64 {
        self.inner.statsd_rejected.total()
    }

    /// Carbon lines accepted (taken by the gauges' writer).
    pub fn carbon_accepted(&self, n: u64) {
        self.inner.carbon_accepted.fetch_add(n, Ordering::Relaxed);
    }

    /// One carbon line rejected, for `reason` (a short fixed code).
    pub fn carbon_rejected(&self, reason: &'static str) {
        self.inner.carbon_rejected.add(reason);
    }

    /// Carbon lines accepted so far.
    pub fn carbon_accepted_total(&self) -> u64 {
        self.inner.carbon_accepted.load(Ordering::Relaxed)
    }

    /// Carbon lines rejected so far for `reason`.
    pub fn carbon_rejected_for(&self, reason: &str) -> u64 {
        self.inner.carbon_rejected.get(reason)
    }

    /// A carbon TCP connection opened.
    pub fn carbon_connection_opened(&self) {
        self.inner
            .carbon_connections
            .fetch_add(1, Ordering::Relaxed);
        self.inner
            .carbon_connections_open
            .fetch_add(1, Ordering::Relaxed);
    }

    /// A carbon TCP connection closed.
    pub fn carbon_connection_closed(&self) {
        self.inner
            .carbon_connections_open
            .fetch_sub(1, Ordering::Relaxed);
    }

    /// Carbon TCP connections open now.
    pub fn carbon_connections_open(&self) -> u64 {
        self.inner.carbon_connections_open.load(Ordering::Relaxed)
    }

    /// Carbon UDP datagrams received.
    pub fn carbon_datagrams(&self, n: u64) {
        self.inner.carbon_datagrams.fetch_add(n, Ordering::Relaxed);
    }

    /// A cleaner observer recording pass durations and what they removed.
    pub fn cleaner_observer(&self) -> crate::engine::PassObserver {
        let metrics = self.clone();
        Arc::new(move |result: &Result<CleanReport>, took: Duration| {
            let m = &metrics.inner;
            match result {
                Ok(report) => {
                    m.cleaner_passes.fetch_add(1, Ordering::Relaxed);
                    m.cleaner_samples_removed
                        .fetch_add(report.samples_removed, Ordering::Relaxed);
                    m.cleaner_counters_removed
                        .fetch_add(report.counters_removed, Ordering::Relaxed);
                    m.cleaner_latency.observe(took);
                }
                Err(e) => {
                    m.cleaner_failures.fetch_add(1, Ordering::Relaxed);
                    metrics.backend_error_if(e);
                }
            }
        })
    }

    fn request(&self, method: &str, route: &str, status: u16, took: Duration) {
        *self
            .inner
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry((method.to_owned(), route.to_owned(), status))
            .or_default() += 1;
        self.inner.request_latency.observe(took);
    }
}

impl Inner {
    /// HTTP requests answered, one sample per method, route and status.
    fn requests(&self) -> Vec<(Vec<(&'static str, String)>, u64)> {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|((method, route, status), n)| {
                (
                    vec![
                        ("method", method.clone()),
                        ("route", route.clone()),
                        ("status", status.to_string()),
                    ],
                    *n,
                )
            })
            .collect()
    }
}

/// Lines rejected, counted by reason (a short fixed code).
#[derive(Debug, Default)]
struct ByReason(Mutex<BTreeMap<&'static str, u64>>);

impl ByReason {
    fn counts(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, u64>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn add(&self, reason: &'static str) {
        *self.counts().entry(reason).or_default() += 1;
    }

    fn get(&self, reason: &str) -> u64 {
        self.counts().get(reason).copied().unwrap_or(0)
    }

    fn total(&self) -> u64 {
        self.counts().values().sum()
    }

    /// One sample per reason, labelled `reason`.
    fn samples(&self) -> Vec<(Vec<(&'static str, String)>, u64)> {
        self.counts()
            .iter()
            .map(|(reason, n)| (vec![("reason", (*reason).to_owned())], *n))
            .collect()
    }
}

/// Middleware: counts every request by method, matched route and status,
/// and every answer to a fault of the backend ([`super::error::BackendFault`]:
/// library errors become answers in one place, which marks them).
pub(crate) async fn observe(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".to_owned());
    let response = next.run(req).await;
    if response.extensions().get::<BackendFault>().is_some() {
        state
            .metrics()
            .inner
            .backend_errors
            .fetch_add(1, Ordering::Relaxed);
    }
    state.metrics().request(
        &method,
        &route,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// `GET /metrics`.
pub(crate) async fn render(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        exposition(&state).await,
    )
}

/// The whole exposition text: every family of `FAMILIES` that has
/// figures at this scrape, in order.
pub async fn exposition(state: &AppState) -> String {
    let services = state.services();
    let socket = *state
        .metrics()
        .inner
        .statsd_socket
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let flusher = match &services.buffers {
        Some((_, Some(flusher))) => Some(flusher.metrics().await),
        _ => None,
    };
    let scrape = Scrape {
        m: &state.metrics().inner,
        writer: services.counter_writer.as_ref().map(|w| w.stats()),
        flush_latency: services.counter_writer.as_ref().map(|w| w.flush_latency()),
        socket,
        kernel_drops: state.metrics().statsd_kernel_drops().await,
        limiter: services.limiter.as_ref().map(|(l, _)| l.metrics()),
        flusher,
    };
    let mut e = Exposition::new();
    for (name, help, read) in FAMILIES {
        match read(&scrape) {
            Some(Figure::Count(n)) => e.counter1(name, help, n),
            Some(Figure::Counts(samples)) => e.counter(name, help, &samples),
            Some(Figure::Gauge(v)) => e.gauge(name, help, v),
            Some(Figure::Latency(h)) => e.histogram(name, help, &h),
            None => {}
        }
    }
    e.finish()
}

/// What one scrape reads: the server's own figures and those of the
/// services it carries (none when it does not carry them).
struct Scrape<'a> {
    m: &'a Inner,
    writer: Option<WriterStats>,
    flush_latency: Option<HistogramSnapshot>,
    socket: Option<SocketInfo>,
    kernel_drops: Option<u64>,
    limiter: Option<LimiterMetricsSnapshot>,
    flusher: Option<FlushMetricsSnapshot>,
}

/// One family's figures at a scrape.
enum Figure {
    Count(u64),
    Counts(Vec<(Vec<(&'static str, String)>, u64)>),
    Gauge(f64),
    Latency(HistogramSnapshot),
}

/// The figure of a plain counter.
fn count(a: &AtomicU64) -> Option<Figure> {
    Some(Figure::Count(a.load(Ordering::Relaxed)))
}

/// The figure of a gauge kept as a count.
fn gauge(a: &AtomicU64) -> Option<Figure> {
    Some(Figure::Gauge(a.load(Ordering::Relaxed) as f64))
}

/// The figures of a histogram.
fn latency(h: &Histogram) -> Option<Figure> {
    Some(Figure::Latency(h.snapshot()))
}

/// The figures of lines rejected, one sample per reason.
fn by_reason(r: &ByReason) -> Option<Figure> {
    Some(Figure::Counts(r.samples()))
}

/// A family: its name, its help, and its figures at a scrape (none: the
/// family is left out).
type Family = (
    &'static str,
    &'static str,
    fn(&Scrape<'_>) -> Option<Figure>,
);

/// Every family `/metrics` shows, in the order it shows them.
const FAMILIES: &[Family] = &[
    (
        "tally_http_requests_total",
        "HTTP requests answered, by method, matched route and status.",
        |s| Some(Figure::Counts(s.m.requests())),
    ),
    (
        "tally_http_request_duration_seconds",
        "Time to answer an HTTP request.",
        |s| latency(&s.m.request_latency),
    ),
    (
        "tally_increments_accepted_total",
        "Increments accepted through the HTTP API and statsd.",
        |s| count(&s.m.increments_accepted),
    ),
    (
        "tally_aggregator_increments_accepted_total",
        "Increments the aggregating writer accepted.",
        |s| s.writer.map(|w| Figure::Count(w.accepted)),
    ),
    (
        "tally_increments_written_total",
        "Increments written to the backend by the aggregating writer.",
        |s| s.writer.map(|w| Figure::Count(w.written)),
    ),
    (
        "tally_increments_rejected_total",
        "Increments the backend refused for good (a slice would overflow).",
        |s| s.writer.map(|w| Figure::Count(w.rejected)),
    ),
    (
        "tally_write_batches_total",
        "Write batches (one Lua call or transaction each) the aggregating writer sent.",
        |s| s.writer.map(|w| Figure::Count(w.chunks)),
    ),
    (
        "tally_write_retries_total",
        "Write batches retried after a failure.",
        |s| s.writer.map(|w| Figure::Count(w.retries)),
    ),
    (
        "tally_write_duplicates_total",
        "Retried write batches the backend had already applied (skipped).",
        |s| s.writer.map(|w| Figure::Count(w.duplicates)),
    ),
    (
        "tally_flushes_total",
        "Flushes of the aggregating writer that wrote something.",
        |s| s.writer.map(|w| Figure::Count(w.flushes)),
    ),
    (
        "tally_pending_entries",
        "(counter, second) entries waiting in the aggregating writer.",
        |s| s.writer.map(|w| Figure::Gauge(w.pending_entries as f64)),
    ),
    (
        "tally_flush_duration_seconds",
        "Time one flush took to write everything it took.",
        |s| s.flush_latency.clone().map(Figure::Latency),
    ),
    (
        "tally_cleaner_passes_total",
        "Cleaner passes completed.",
        |s| count(&s.m.cleaner_passes),
    ),
    (
        "tally_cleaner_failures_total",
        "Cleaner passes that failed (retried next interval).",
        |s| count(&s.m.cleaner_failures),
    ),
    (
        "tally_cleaner_samples_removed_total",
        "Samples the cleaner removed.",
        |s| count(&s.m.cleaner_samples_removed),
    ),
    (
        "tally_cleaner_counters_removed_total",
        "Emptied counters the cleaner removed from the registry.",
        |s| count(&s.m.cleaner_counters_removed),
    ),
    (
        "tally_cleaner_pass_duration_seconds",
        "Time one cleaner pass took.",
        |s| latency(&s.m.cleaner_latency),
    ),
    (
        "tally_statsd_datagrams_received_total",
        "statsd datagrams received.",
        |s| count(&s.m.statsd_datagrams),
    ),
    (
        "tally_statsd_receive_buffer_bytes",
        "The statsd socket's receive buffer as the kernel reports it (SO_RCVBUF; Linux \
         reports twice what it was given).",
        |s| s.socket.map(|info| Figure::Gauge(info.recv_buffer as f64)),
    ),
    (
        "tally_statsd_kernel_drops_total",
        "statsd datagrams the kernel dropped before Tally read them (a full receive buffer).",
        |s| s.kernel_drops.map(Figure::Count),
    ),
    (
        "tally_statsd_lines_accepted_total",
        "statsd lines accepted (every sample of each handed to its writer).",
        |s| count(&s.m.statsd_accepted),
    ),
    (
        "tally_statsd_tags_dropped_total",
        "statsd lines accepted whose DogStatsD tags were dropped: written under their bare name.",
        |s| count(&s.m.statsd_tags_dropped),
    ),
    (
        "tally_statsd_lines_rejected_total",
        "statsd lines rejected, by reason; they wrote nothing.",
        |s| by_reason(&s.m.statsd_rejected),
    ),
    (
        "tally_carbon_lines_accepted_total",
        "carbon lines accepted (gauge sets taken by the gauges' aggregating writer).",
        |s| count(&s.m.carbon_accepted),
    ),
    (
        "tally_carbon_lines_rejected_total",
        "carbon lines rejected, by reason; they wrote nothing.",
        |s| by_reason(&s.m.carbon_rejected),
    ),
    (
        "tally_carbon_connections",
        "carbon TCP connections open now.",
        |s| gauge(&s.m.carbon_connections_open),
    ),
    (
        "tally_carbon_connections_accepted_total",
        "carbon TCP connections accepted.",
        |s| count(&s.m.carbon_connections),
    ),
    (
        "tally_carbon_datagrams_received_total",
        "carbon UDP datagrams received.",
        |s| count(&s.m.carbon_datagrams),
    ),
    (
        "tally_backend_errors_total",
        "Operations that failed because of the backend.",
        |s| count(&s.m.backend_errors),
    ),
    (
        "tally_rate_limit_checks_total",
        "Rate-limit checks, by outcome.",
        |s| {
            s.limiter.map(|l| {
                Figure::Counts(vec![
                    (vec![("outcome", "allowed".into())], l.allowed),
                    (vec![("outcome", "denied".into())], l.denied),
                    (vec![("outcome", "failed_open".into())], l.failed_open),
                    (vec![("outcome", "failed_closed".into())], l.failed_closed),
                ])
            })
        },
    ),
    (
        "tally_buffer_batches_total",
        "Buffered rows flushed to SQL: transactions.",
        |s| s.flusher.map(|f| Figure::Count(f.batches)),
    ),
    (
        "tally_buffer_rows_written_total",
        "Rows written to SQL by the flusher.",
        |s| s.flusher.map(|f| Figure::Count(f.rows_written)),
    ),
    (
        "tally_buffer_statements_total",
        "SQL statements the flusher ran.",
        |s| s.flusher.map(|f| Figure::Count(f.statements)),
    ),
    (
        "tally_buffer_failures_total",
        "Flusher ticks or batches that failed (retried).",
        |s| s.flusher.map(|f| Figure::Count(f.failures)),
    ),
    (
        "tally_buffer_taken_over_total",
        "Claims of dead flushers taken over.",
        |s| s.flusher.map(|f| Figure::Count(f.taken_over)),
    ),
    (
        "tally_buffer_pending_rows",
        "Rows with changes waiting to be flushed.",
        |s| {
            let backlog = s.flusher?.backlog?;
            Some(Figure::Gauge(backlog.pending_rows as f64))
        },
    ),
    (
        "tally_buffer_claims",
        "Claims being flushed (or left by a dead flusher).",
        |s| {
            let backlog = s.flusher?.backlog?;
            Some(Figure::Gauge(backlog.claims as f64))
        },
    ),
    (
        "tally_buffer_oldest_pending_age_seconds",
        "Age of the oldest change waiting to be flushed (0 when none).",
        |s| {
            let age_ms = s.flusher?.oldest_pending_age_ms.unwrap_or(0);
            Some(Figure::Gauge(age_ms as f64 / 1000.0))
        },
    ),
];
