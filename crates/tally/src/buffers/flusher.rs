//! The flusher: moves pending rows into SQL, batch by batch, exactly once.
//!
//! One tick: first take over claims whose lease expired (left by a flusher
//! that died or stalled) and finish them, then claim and finish new batches
//! until nothing is pending or `max_batches` were done. A flush batch is up
//! to `batch_rows` rows in one or more claims (one per Redis shard touched);
//! finishing it = apply it to the sink (one transaction, batch ids recorded)
//! and only then release its claims. Every tick also forgets batch ids older
//! than twice `retention`.
//!
//! A flush batch the sink refuses (a constraint violation, an overflow...)
//! is logged and counted as a failure, and the tick goes on with the next
//! one; its claims stay, and are retried when their lease expires. When a
//! backend is unreachable the tick stops at once (nothing more is claimed).
//! A claim older than `retention` is never applied automatically: its batch
//! id may have been forgotten by the sink, so applying it could count it
//! twice. It is left in place, logged and counted as a failure, for an
//! operator. Ticks run every `tick` (default 10 s) until shutdown; on
//! shutdown the flusher finishes the batch in hand and one last drain.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::row::{BatchId, Claim};
use super::service::Buffers;
use super::sink::Sink;
use super::store::{BufferStats, NewClaim};
use crate::error::{Error, Result};

/// How a flusher works.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlusherSettings {
    /// Time between ticks.
    pub tick: Duration,
    /// Rows per flush batch (per SQL transaction), at most.
    pub batch_rows: usize,
    /// How long a claim is ours; must exceed the time to write one batch.
    pub lease: Duration,
    /// Batches per tick, at most.
    pub max_batches: usize,
    /// The oldest a claim may be and still be applied automatically; applied
    /// batch ids are remembered twice as long (a margin for clock skew).
    pub retention: Duration,
}

impl Default for FlusherSettings {
    fn default() -> Self {
        FlusherSettings {
            tick: Duration::from_secs(10),
            batch_rows: 500,
            lease: Duration::from_secs(60),
            max_batches: 1000,
            retention: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

impl FlusherSettings {
    /// Checks the settings, naming the first bad one.
    pub fn validate(self) -> Result<Self> {
        if self.tick.is_zero() {
            return Err(Error::Config("the flush tick must be positive".into()));
        }
        if self.batch_rows == 0 || self.batch_rows > 10_000 {
            return Err(Error::Config(format!(
                "flush batch_rows must be 1 to 10000, got {}",
                self.batch_rows
            )));
        }
        if self.lease < Duration::from_millis(100) {
            return Err(Error::Config(
                "the flush lease must be at least 100 ms".into(),
            ));
        }
        if self.max_batches == 0 {
            return Err(Error::Config("flush max_batches must be at least 1".into()));
        }
        if self.retention < self.lease * 10 {
            return Err(Error::Config(
                "the flush retention must be at least 10 leases".into(),
            ));
        }
        Ok(self)
    }
}

/// What one tick did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FlushReport {
    /// SQL transactions that wrote rows.
    pub batches: u64,
    /// Claims written.
    pub claims: u64,
    /// Rows written to SQL.
    pub rows: u64,
    /// SQL statements run for those batches.
    pub statements: u64,
    /// Claims of dead flushers taken over.
    pub taken_over: u64,
    /// Claims found already applied (released without writing).
    pub already_applied: u64,
    /// Flush batches that failed (left claimed, retried after their lease).
    pub failed: u64,
}

impl FlushReport {
    fn add(&mut self, other: &FlushReport) {
        self.batches += other.batches;
        self.claims += other.claims;
        self.rows += other.rows;
        self.statements += other.statements;
        self.taken_over += other.taken_over;
        self.already_applied += other.already_applied;
        self.failed += other.failed;
    }
}

/// Running totals of a flusher, for metrics. Shared, lock-free.
#[derive(Debug, Default)]
pub struct FlushMetrics {
    batches: AtomicU64,
    rows: AtomicU64,
    statements: AtomicU64,
    taken_over: AtomicU64,
    already_applied: AtomicU64,
    failures: AtomicU64,
}

/// A snapshot of [`FlushMetrics`] with the backlog.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FlushMetricsSnapshot {
    /// Batches written.
    pub batches: u64,
    /// Rows written.
    pub rows_written: u64,
    /// SQL statements run.
    pub statements: u64,
    /// Claims taken over from dead flushers.
    pub taken_over: u64,
    /// Batches found already applied.
    pub already_applied: u64,
    /// Failed ticks or batches.
    pub failures: u64,
    /// The backlog, when it could be read.
    pub backlog: Option<BufferStats>,
    /// Age of the oldest pending change, ms.
    pub oldest_pending_age_ms: Option<u64>,
}

impl FlushMetrics {
    fn record(&self, r: &FlushReport) {
        self.batches.fetch_add(r.batches, Ordering::Relaxed);
        self.rows.fetch_add(r.rows, Ordering::Relaxed);
        self.statements.fetch_add(r.statements, Ordering::Relaxed);
        self.taken_over.fetch_add(r.taken_over, Ordering::Relaxed);
        self.already_applied
            .fetch_add(r.already_applied, Ordering::Relaxed);
    }

    fn fail(&self, n: u64) {
        self.failures.fetch_add(n, Ordering::Relaxed);
    }
}

/// Flushes a [`Buffers`] into a [`Sink`].
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tally::Result<()> {
/// use tally::buffers::{Flusher, FlusherSettings, TableConfig, Tables, Update, open_sink};
/// # let dir = tempfile::tempdir().unwrap();
/// # let file = dir.path().join("app.sqlite3");
/// # rusqlite::Connection::open(&file).unwrap().execute_batch(
/// #     "CREATE TABLE groups (id INTEGER PRIMARY KEY, times_seen INTEGER NOT NULL DEFAULT 0)",
/// # ).unwrap();
/// # let sink_url = format!("sqlite:{}", file.display());
///
/// let tables = Tables::new(&[TableConfig {
///     name: "groups".into(),
///     key: vec!["id".into()],
///     counters: vec!["times_seen".into()],
///     last_write: vec![],
/// }])?;
/// let tally = tally::Tally::open("sqlite::memory:").await?;
/// let buffers = tally.buffers(tables.clone());
/// buffers.incr(&Update::new("groups").key("id", 42).add("times_seen", 3)).await?;
///
/// // The application's database (`postgres://...` or `sqlite:PATH`), holding `groups`.
/// let sink = open_sink(&sink_url, &tables).await?;
/// let flusher = Flusher::new(buffers.clone(), sink.clone(), FlusherSettings::default())?;
/// flusher.drain().await?; // in an application: `flusher.spawn(shutdown)`, a tick a second
///
/// let row = buffers.read(sink.as_ref(), "groups", &[("id", "42")]).await?;
/// assert_eq!(row.stored.unwrap().counters["times_seen"], Some(3));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Flusher {
    buffers: Buffers,
    sink: Arc<dyn Sink>,
    settings: FlusherSettings,
    metrics: Arc<FlushMetrics>,
}

impl Flusher {
    /// A flusher with validated settings.
    pub fn new(buffers: Buffers, sink: Arc<dyn Sink>, settings: FlusherSettings) -> Result<Self> {
        Ok(Flusher {
            buffers,
            sink,
            settings: settings.validate()?,
            metrics: Arc::default(),
        })
    }

    /// The settings in force.
    pub fn settings(&self) -> &FlusherSettings {
        &self.settings
    }

    /// The sink.
    pub fn sink(&self) -> &Arc<dyn Sink> {
        &self.sink
    }

    fn now_ms(&self) -> u64 {
        self.buffers.clock().now().as_millis()
    }

    fn lease_ms(&self) -> u64 {
        self.settings.lease.as_millis() as u64
    }

    /// Metrics so far, with the current backlog (read from the store).
    pub async fn metrics(&self) -> FlushMetricsSnapshot {
        let m = &self.metrics;
        let now = self.now_ms();
        let backlog = self.buffers.store().stats(now).await.ok();
        FlushMetricsSnapshot {
            batches: m.batches.load(Ordering::Relaxed),
            rows_written: m.rows.load(Ordering::Relaxed),
            statements: m.statements.load(Ordering::Relaxed),
            taken_over: m.taken_over.load(Ordering::Relaxed),
            already_applied: m.already_applied.load(Ordering::Relaxed),
            failures: m.failures.load(Ordering::Relaxed),
            backlog,
            oldest_pending_age_ms: backlog
                .and_then(|b| b.oldest_pending_ms)
                .map(|t| now.saturating_sub(t)),
        }
    }

    /// Claims one new flush batch: up to `batch_rows` rows, in one or more
    /// claims; empty when nothing is pending. (Step 1 of a flush; public so
    /// tests can crash between steps.)
    pub async fn claim(&self) -> Result<Vec<Claim>> {
        let mut claims: Vec<Claim> = Vec::new();
        let mut rows = 0;
        while rows < self.settings.batch_rows {
            let now = self.now_ms();
            let Some(claim) = self
                .buffers
                .store()
                .claim(NewClaim {
                    batch: BatchId::new(now),
                    max_rows: self.settings.batch_rows - rows,
                    lease_end_ms: now + self.lease_ms(),
                })
                .await?
            else {
                break;
            };
            rows += claim.rows.len();
            claims.push(claim);
        }
        Ok(claims)
    }

    /// Applies claims to the sink in one transaction, then releases them.
    pub async fn finish(&self, claims: &[Claim]) -> Result<FlushReport> {
        let now = self.now_ms();
        for claim in claims {
            let age = now.saturating_sub(claim.batch.created_ms());
            if age > self.settings.retention.as_millis() as u64 {
                return Err(Error::Backend(format!(
                    "claim {} is {} s old, older than the flush retention: it is left in \
                     place for an operator, since applying it could count it twice",
                    claim.batch,
                    age / 1000
                )));
            }
        }
        let mut report = FlushReport::default();
        if claims.is_empty() {
            return Ok(report);
        }
        let outcome = self.sink.apply(claims, now).await?;
        report.batches = u64::from(outcome.applied > 0);
        report.claims = outcome.applied;
        report.already_applied = outcome.already_applied;
        report.rows = outcome.rows;
        report.statements = outcome.statements;
        for claim in claims {
            self.buffers.store().release(claim).await?;
        }
        Ok(report)
    }

    /// One tick: take over expired claims, then drain up to `max_batches`.
    pub async fn tick(&self) -> Result<FlushReport> {
        let result = self.tick_inner().await;
        match &result {
            Ok(r) => self.metrics.fail(r.failed),
            Err(_) => self.metrics.fail(1),
        }
        result
    }

    /// Finishes one flush batch inside a tick: a refused batch is logged and
    /// reported as failed; an unreachable backend stops the tick.
    async fn finish_in_tick(&self, claims: &[Claim], taken_over: bool) -> Result<FlushReport> {
        match self.finish(claims).await {
            Ok(mut r) => {
                if taken_over {
                    r.taken_over = claims.len() as u64;
                }
                self.metrics.record(&r);
                Ok(r)
            }
            Err(e) if e.is_unavailable() => Err(e),
            Err(e) => {
                let batches: Vec<String> = claims.iter().map(|c| c.batch.to_string()).collect();
                tracing::error!(error = %e, ?batches, "a flush batch failed; its claims stay and are retried after their lease");
                Ok(FlushReport {
                    failed: 1,
                    ..FlushReport::default()
                })
            }
        }
    }

    async fn tick_inner(&self) -> Result<FlushReport> {
        let mut report = FlushReport::default();
        let now = self.now_ms();
        let orphans = self
            .buffers
            .store()
            .take_over(now, self.lease_ms(), self.settings.max_batches)
            .await?;
        let retention = self.settings.retention.as_millis() as u64;
        let (ancient, orphans): (Vec<Claim>, Vec<Claim>) = orphans
            .into_iter()
            .partition(|c| now.saturating_sub(c.batch.created_ms()) > retention);
        for claim in &ancient {
            tracing::error!(batch = %claim.batch, rows = claim.rows.len(), "a claim older than the batch-id retention is left in place for an operator: applying it could count it twice");
            report.failed += 1;
        }
        for claim in &orphans {
            tracing::info!(batch = %claim.batch, rows = claim.rows.len(), "taking over an expired claim");
        }
        let mut start = 0;
        while start < orphans.len() {
            // Group orphans into flush batches of about `batch_rows` rows.
            let mut end = start;
            let mut rows = 0;
            while end < orphans.len()
                && (end == start || rows + orphans[end].rows.len() <= self.settings.batch_rows)
            {
                rows += orphans[end].rows.len();
                end += 1;
            }
            let r = self.finish_in_tick(&orphans[start..end], true).await?;
            report.add(&r);
            start = end;
        }
        for _ in 0..self.settings.max_batches {
            let claims = self.claim().await?;
            if claims.is_empty() {
                break;
            }
            let r = self.finish_in_tick(&claims, false).await?;
            report.add(&r);
        }
        // Ids are kept twice as long as a claim may be applied: a margin for
        // clock skew between the flushers' machines.
        self.sink.prune(now.saturating_sub(2 * retention)).await?;
        Ok(report)
    }

    /// Ticks until nothing is pending (for `--once` and shutdown).
    pub async fn drain(&self) -> Result<FlushReport> {
        let mut total = FlushReport::default();
        loop {
            let r = self.tick().await?;
            total.add(&r);
            if r.failed > 0 {
                return Err(Error::Backend(format!(
                    "{} flush batches failed (see the logs); their rows stay buffered",
                    total.failed
                )));
            }
            if r.batches == 0 && r.already_applied == 0 && r.taken_over == 0 {
                return Ok(total);
            }
        }
    }

    /// Ticks every `tick` until `shutdown` completes, then drains once. A
    /// failed tick is logged and retried at the next one.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        use futures::FutureExt;
        tokio::pin!(shutdown);
        loop {
            // Polled before every tick, so a signal listener starts at once.
            if (&mut shutdown).now_or_never().is_some() {
                break;
            }
            let started = Instant::now();
            match self.tick().await {
                Ok(r) => log_round_done!("flush tick done", started, [], r =>
                    failed, batches, rows, statements, taken_over),
                Err(e) => tracing::warn!(error = %e, "flush tick failed; retrying next tick"),
            }
            let wait = self.settings.tick.saturating_sub(started.elapsed());
            tokio::select! {
                _ = &mut shutdown => break,
                _ = tokio::time::sleep(wait) => {}
            }
        }
        match self.drain().await {
            Ok(r) => tracing::info!(
                batches = r.batches,
                rows = r.rows,
                "flusher drained and stopped"
            ),
            Err(e) => tracing::warn!(error = %e, "final flush failed; pending rows stay buffered"),
        }
    }

    /// Spawns [`Flusher::run`] on the current runtime.
    pub fn spawn(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(self.run(shutdown))
    }
}
