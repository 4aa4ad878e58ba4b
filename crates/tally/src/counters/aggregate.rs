//! The aggregating writer: increments merged in process, written in batches.
//!
//! [`Aggregator::add`] validates an increment and adds it to an in-memory
//! table keyed by (counter, second): every configured precision is a whole
//! number of seconds, so merging by second loses nothing, and one hash update
//! per increment is all the hot path does. A background flusher takes the
//! table every `flush_interval` (or as soon as it holds `flush_entries`
//! entries), expands it to one delta per (counter, precision, slice), and
//! writes it in chunks of `chunk_counters` counters; chunks go out on
//! `lanes` concurrent lanes, so a flush costs one round trip per lane (per
//! node on a cluster).
//!
//! Exactly once: each chunk carries a [`WriteSeq`] (a random writer id, its
//! lane, and the lane's next number). A chunk that fails because the backend
//! is unavailable (timeout, dropped connection, restart) is retried with the
//! same number until it is acknowledged; the store applies a number at most
//! once. So while the process lives, an increment that `add` accepted is
//! written exactly once. A process that dies loses what it had not flushed:
//! that is what "aggregated" means, and why the exact path
//! ([`super::Counters::incr_many`]) stays available.
//!
//! Bounded memory: at most `max_entries` (counter, second) entries wait in
//! memory. When full, [`Aggregator::add`] waits for the next flush
//! ([`WhenFull::Wait`]) or fails with [`Error::Overloaded`]
//! ([`WhenFull::Error`]); [`Aggregator::try_add`] never waits.
//!
//! A chunk the store refuses for good (a slice would overflow) is split and
//! retried counter by counter; only the refusing counter's deltas are dropped,
//! logged and counted in [`AggregatorStats::rejected`].

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustc_hash::FxBuildHasher;
use serde::Serialize;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::clock::Timestamp;
use crate::counters::slice::{CounterWrite, SliceDelta, check_count};
use crate::counters::store::{Applied, WriteBatch, WriteSeq};
use crate::counters::{Counters, Increment};
use crate::error::{Error, Result};
use crate::name::Name;

/// What [`Aggregator::add`] does when the table is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WhenFull {
    /// Wait until a flush makes room.
    Wait,
    /// Fail at once with [`Error::Overloaded`].
    Error,
}

/// How the aggregator buffers and flushes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggregatorSettings {
    /// Time between flushes.
    pub flush_interval: Duration,
    /// Flush early when this many (counter, second) entries wait.
    pub flush_entries: usize,
    /// At most this many entries wait in memory.
    pub max_entries: usize,
    /// What `add` does when `max_entries` are waiting.
    pub when_full: WhenFull,
    /// Counters per write (one Lua call or transaction).
    pub chunk_counters: usize,
    /// Chunks written at the same time.
    pub lanes: usize,
}

impl Default for AggregatorSettings {
    fn default() -> Self {
        AggregatorSettings {
            flush_interval: Duration::from_millis(200),
            flush_entries: 100_000,
            max_entries: 1_000_000,
            when_full: WhenFull::Wait,
            chunk_counters: 500,
            lanes: 4,
        }
    }
}

impl AggregatorSettings {
    /// Checks the settings.
    pub fn validate(self) -> Result<Self> {
        if self.flush_interval < Duration::from_millis(1)
            || self.flush_interval > Duration::from_secs(3600)
        {
            return Err(Error::Config(
                "the flush interval must be between 1 ms and 1 h".into(),
            ));
        }
        if self.max_entries == 0 || self.flush_entries == 0 || self.flush_entries > self.max_entries
        {
            return Err(Error::Config(format!(
                "need 0 < flush_entries ({}) <= max_entries ({})",
                self.flush_entries, self.max_entries
            )));
        }
        if self.chunk_counters == 0 || self.chunk_counters > 10_000 {
            return Err(Error::Config(
                "chunk_counters must be between 1 and 10000".into(),
            ));
        }
        if self.lanes == 0 || self.lanes > 64 {
            return Err(Error::Config("lanes must be between 1 and 64".into()));
        }
        Ok(self)
    }
}

/// Running figures of an aggregator (monotonic unless noted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AggregatorStats {
    /// Increments accepted by `add`.
    pub accepted: u64,
    /// Increments written (acknowledged by the store).
    pub written: u64,
    /// Increments dropped because the store refused them for good.
    pub rejected: u64,
    /// Flushes that wrote something.
    pub flushes: u64,
    /// Chunks written (store calls that succeeded, duplicates included).
    pub chunks: u64,
    /// Chunk attempts that failed and were retried.
    pub retries: u64,
    /// Chunks the store found already applied (retries of written chunks).
    pub duplicates: u64,
    /// (counter, second) entries waiting now (a gauge).
    pub pending_entries: u64,
    /// Total microseconds spent in flushes that wrote something.
    pub flush_micros: u64,
}

const SHARDS: usize = 16;
const RETRY_MIN: Duration = Duration::from_millis(20);
const RETRY_MAX: Duration = Duration::from_secs(2);
/// How long a final flush keeps retrying an unavailable backend at shutdown.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// What waits for one counter: per whole second, the merged count and how
/// many increments it stands for.
#[derive(Default)]
struct Pending {
    seconds: Vec<Slot>,
}

struct Slot {
    second: u64,
    total: i64,
    increments: u64,
}

impl Pending {
    fn increments(&self) -> u64 {
        self.seconds.iter().map(|s| s.increments).sum()
    }
}

/// What merging one increment did to the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    /// Added to a waiting entry.
    Merged,
    /// Made a new (counter, second) entry.
    Created,
    /// Undid the last increment of an entry, which is gone.
    Removed,
}

struct Shard {
    table: HashMap<Box<str>, Pending, FxBuildHasher>,
}

struct Inner {
    counters: Counters,
    settings: AggregatorSettings,
    shards: Box<[Mutex<Shard>]>,
    entries: AtomicUsize,
    flush_soon: Notify,
    room: Notify,
    closed: AtomicBool,
    writer: u64,
    accepted: AtomicU64,
    written: AtomicU64,
    rejected: AtomicU64,
    flushes: AtomicU64,
    chunks: AtomicU64,
    retries: AtomicU64,
    duplicates: AtomicU64,
    flush_micros: AtomicU64,
    flush_latency: crate::metrics::Histogram,
}

enum Control {
    Flush(oneshot::Sender<()>),
    Close(oneshot::Sender<()>),
}

/// A handle on an aggregating writer. Cheap to clone; the flusher stops (after
/// a final flush) when [`Aggregator::shutdown`] is called or the last handle
/// is dropped.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tally::Result<()> {
/// let tally = tally::Tally::open("sqlite::memory:").await?;
/// let writer = tally.writer(); // started on first use
///
/// for _ in 0..1000 {
///     writer.add("page:home", 1, None).await?; // merged in memory, no round trip
/// }
/// writer.flush().await?; // written now (else within the flush interval)
/// let per_day = tally.counters().get("page:home", 86_400).await?;
/// assert_eq!(per_day.iter().map(|s| s.count).sum::<i64>(), 1000);
///
/// tally.shutdown().await; // flushes what is left and stops the writer
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Aggregator {
    inner: Arc<Inner>,
    control: Arc<ControlHandle>,
}

struct ControlHandle {
    tx: mpsc::UnboundedSender<Control>,
}

impl Drop for ControlHandle {
    fn drop(&mut self) {
        let (done, _) = oneshot::channel();
        let _ = self.tx.send(Control::Close(done));
    }
}

impl std::fmt::Debug for Aggregator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aggregator")
            .field("settings", &self.inner.settings)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Aggregator {
    /// Starts an aggregator writing into `counters`' store; spawns its flusher
    /// on the current tokio runtime.
    pub fn start(counters: Counters, settings: AggregatorSettings) -> Result<Self> {
        let settings = settings.validate()?;
        let inner = Arc::new(Inner {
            counters,
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        table: HashMap::default(),
                    })
                })
                .collect(),
            entries: AtomicUsize::new(0),
            flush_soon: Notify::new(),
            room: Notify::new(),
            closed: AtomicBool::new(false),
            writer: rand::random::<u64>(),
            accepted: AtomicU64::new(0),
            written: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            chunks: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            flush_micros: AtomicU64::new(0),
            flush_latency: crate::metrics::Histogram::default(),
            settings,
        });
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(flusher(inner.clone(), rx));
        Ok(Aggregator {
            inner,
            control: Arc::new(ControlHandle { tx }),
        })
    }

    /// The counters written to.
    pub fn counters(&self) -> &Counters {
        &self.inner.counters
    }

    /// Adds `count` to `name` at `at` (default now), waiting for room when
    /// full and so configured.
    pub async fn add(&self, name: &str, count: i64, at: Option<f64>) -> Result<()> {
        loop {
            let room = self.inner.room.notified();
            match self.try_add(name, count, at) {
                Err(Error::Overloaded(_))
                    if self.inner.settings.when_full == WhenFull::Wait
                        && !self.inner.closed.load(Ordering::Relaxed) =>
                {
                    self.inner.flush_soon.notify_one();
                    room.await;
                }
                other => return other,
            }
        }
    }

    /// Adds a batch, all or nothing: every increment is validated, and room
    /// for the whole batch is taken, before any is added; if one would
    /// overflow its pending total, those already added are taken back.
    pub async fn add_many(&self, increments: &[Increment]) -> Result<()> {
        let inner = &self.inner;
        let now = inner.counters.clock().now();
        let valid = increments
            .iter()
            .map(|inc| inner.counters.validate(inc, now))
            .collect::<Result<Vec<_>>>()?;
        let needed = valid.len();
        loop {
            let room = inner.room.notified();
            match self.reserve_n(needed) {
                Ok(()) => break,
                Err(Error::Overloaded(_))
                    if inner.settings.when_full == WhenFull::Wait
                        && needed <= inner.settings.max_entries
                        && !inner.closed.load(Ordering::Relaxed) =>
                {
                    inner.flush_soon.notify_one();
                    room.await;
                }
                Err(e) => return Err(e),
            }
        }
        // Room was taken for `needed` new entries; settle it against the
        // entries really made (fewer when increments merged into waiting
        // entries; an undo may remove one, or re-create one a flush took).
        let settle = |net: isize| {
            let extra = net - needed as isize;
            if extra >= 0 {
                inner.entries.fetch_add(extra as usize, Ordering::AcqRel);
            } else {
                inner.entries.fetch_sub((-extra) as usize, Ordering::AcqRel);
            }
        };
        let net_of = |change: Change| match change {
            Change::Merged => 0,
            Change::Created => 1,
            Change::Removed => -1,
        };
        let mut net = 0isize;
        for (i, inc) in valid.iter().enumerate() {
            let second = inc.at.whole_secs();
            match self.merge(inc.name.as_str(), second, inc.count, true, false) {
                Ok(change) => net += net_of(change),
                Err(e) => {
                    // Take back what this batch added (never refused: the
                    // entries exist, or are made anew if a flush took them).
                    for done in valid[..i].iter().rev() {
                        if let Ok(change) = self.merge(
                            done.name.as_str(),
                            done.at.whole_secs(),
                            -done.count,
                            true,
                            true,
                        ) {
                            net += net_of(change);
                        }
                    }
                    settle(net);
                    return Err(e);
                }
            }
        }
        settle(net);
        inner
            .accepted
            .fetch_add(valid.len() as u64, Ordering::Relaxed);
        if inner.entries.load(Ordering::Relaxed) >= inner.settings.flush_entries {
            inner.flush_soon.notify_one();
        }
        Ok(())
    }

    /// Adds without ever waiting: fails with [`Error::Overloaded`] when full.
    pub fn try_add(&self, name: &str, count: i64, at: Option<f64>) -> Result<()> {
        let inner = &self.inner;
        if inner.closed.load(Ordering::Relaxed) {
            return Err(Error::Overloaded("the aggregator is shut down".into()));
        }
        Name::check(name)?;
        check_count(count)?;
        let at = match at {
            Some(at) => Timestamp::from_secs_f64(at)?,
            None => inner.counters.clock().now(),
        };
        let change = self.merge(name, at.whole_secs(), count, false, false)?;
        inner.accepted.fetch_add(1, Ordering::Relaxed);
        if change == Change::Created
            && inner.entries.load(Ordering::Relaxed) >= inner.settings.flush_entries
        {
            inner.flush_soon.notify_one();
        }
        Ok(())
    }

    /// Adds `count` to the pending (name, second) total. A new entry takes
    /// room (`reserved`: the caller already took it) or fails with
    /// [`Error::Overloaded`] when there is none. `undo` takes back an earlier
    /// add of the same batch: the entry stands for one increment fewer, and
    /// goes when it stands for none.
    fn merge(
        &self,
        name: &str,
        second: u64,
        count: i64,
        reserved: bool,
        undo: bool,
    ) -> Result<Change> {
        let shard = &self.inner.shards[shard_of(name)];
        let mut shard = shard.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pending) = shard.table.get_mut(name)
            && let Some(i) = pending.seconds.iter().rposition(|s| s.second == second)
        {
            let slot = &mut pending.seconds[i];
            slot.total = slot
                .total
                .checked_add(count)
                .filter(|&t| t != i64::MIN)
                .ok_or_else(|| Error::Overflow {
                    name: name.to_owned(),
                    precision: 1,
                    slice: second,
                    delta: count,
                })?;
            if !undo {
                slot.increments += 1;
                return Ok(Change::Merged);
            }
            slot.increments = slot.increments.saturating_sub(1);
            if slot.increments > 0 {
                return Ok(Change::Merged);
            }
            pending.seconds.swap_remove(i);
            if pending.seconds.is_empty() {
                shard.table.remove(name);
            }
            return Ok(Change::Removed);
        }
        if !reserved {
            self.reserve_n(1)?;
        }
        // An undo whose entry a flush already took: the negated count is a
        // new entry standing for no increment.
        let slot = Slot {
            second,
            total: count,
            increments: u64::from(!undo),
        };
        shard
            .table
            .entry(name.into())
            .or_default()
            .seconds
            .push(slot);
        Ok(Change::Created)
    }

    /// Takes room for `n` new entries at once, or fails when there is not
    /// that much.
    fn reserve_n(&self, n: usize) -> Result<()> {
        let inner = &self.inner;
        let max = inner.settings.max_entries;
        inner
            .entries
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |have| {
                (have + n <= max).then_some(have + n)
            })
            .map(|_| ())
            .map_err(|_| {
                Error::Overloaded(format!(
                    "the aggregator holds its maximum of {max} pending (counter, second) entries"
                ))
            })
    }

    /// Flushes now and waits until everything added before this call is
    /// written (or dropped as refused).
    pub async fn flush(&self) -> Result<()> {
        let (done, wait) = oneshot::channel();
        self.control
            .tx
            .send(Control::Flush(done))
            .map_err(|_| Error::Overloaded("the aggregator is shut down".into()))?;
        wait.await
            .map_err(|_| Error::Overloaded("the aggregator stopped".into()))
    }

    /// Stops taking increments, flushes what is pending (retrying an
    /// unavailable backend for up to [`SHUTDOWN_GRACE`]) and stops the flusher.
    pub async fn shutdown(&self) {
        self.inner.closed.store(true, Ordering::Relaxed);
        let (done, wait) = oneshot::channel();
        if self.control.tx.send(Control::Close(done)).is_ok() {
            let _ = wait.await;
        }
    }

    /// How long the flushes that wrote something took.
    pub fn flush_latency(&self) -> crate::metrics::HistogramSnapshot {
        self.inner.flush_latency.snapshot()
    }

    /// Running figures.
    pub fn stats(&self) -> AggregatorStats {
        let i = &self.inner;
        AggregatorStats {
            accepted: i.accepted.load(Ordering::Relaxed),
            written: i.written.load(Ordering::Relaxed),
            rejected: i.rejected.load(Ordering::Relaxed),
            flushes: i.flushes.load(Ordering::Relaxed),
            chunks: i.chunks.load(Ordering::Relaxed),
            retries: i.retries.load(Ordering::Relaxed),
            duplicates: i.duplicates.load(Ordering::Relaxed),
            pending_entries: i.entries.load(Ordering::Relaxed) as u64,
            flush_micros: i.flush_micros.load(Ordering::Relaxed),
        }
    }
}

fn shard_of(name: &str) -> usize {
    (FxBuildHasher.hash_one(name) as usize) % SHARDS
}

/// The flusher task: flushes on its interval, when asked, when the table
/// fills, and once more when closed.
async fn flusher(inner: Arc<Inner>, mut control: mpsc::UnboundedReceiver<Control>) {
    let mut lanes = Lanes::new(inner.writer, inner.settings.lanes);
    let mut ticker = tokio::time::interval(inner.settings.flush_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let mut waiter = None;
        let mut closing = None;
        tokio::select! {
            _ = ticker.tick() => {}
            _ = inner.flush_soon.notified() => {}
            msg = control.recv() => match msg {
                Some(Control::Flush(done)) => waiter = Some(done),
                Some(Control::Close(done)) => closing = Some(done),
                None => closing = Some(oneshot::channel().0),
            },
        }
        let deadline = closing.as_ref().map(|_| Instant::now() + SHUTDOWN_GRACE);
        if closing.is_some() {
            inner.closed.store(true, Ordering::Relaxed);
        }
        flush_once(&inner, &mut lanes, deadline).await;
        if let Some(done) = waiter {
            let _ = done.send(());
        }
        if let Some(done) = closing {
            let _ = done.send(());
            // Answer anyone else waiting, then stop.
            control.close();
            while let Ok(msg) = control.try_recv() {
                match msg {
                    Control::Flush(done) | Control::Close(done) => {
                        let _ = done.send(());
                    }
                }
            }
            tracing::debug!("aggregator flusher stopped");
            return;
        }
    }
}

/// The next sequence number of each lane of this writer.
struct Lanes {
    writer: u64,
    next: Vec<u64>,
}

impl Lanes {
    fn new(writer: u64, lanes: usize) -> Self {
        Lanes {
            writer,
            next: vec![1; lanes],
        }
    }
}

/// One lane's numbering during a flush: numbers are taken in the order the
/// lane sends its writes, so a lane never sends n + 1 before n succeeded.
struct Lane {
    writer: u64,
    lane: u32,
    next: u64,
}

impl Lane {
    fn take(&mut self) -> WriteSeq {
        let seq = WriteSeq {
            writer: self.writer,
            lane: self.lane,
            seq: self.next,
        };
        self.next += 1;
        seq
    }
}

/// A counter's deltas and the number of increments they stand for.
type Write = (CounterWrite, u64);

/// Takes everything waiting and writes it.
async fn flush_once(inner: &Arc<Inner>, lanes: &mut Lanes, deadline: Option<Instant>) {
    let started = Instant::now();
    let mut taken: Vec<(Box<str>, Pending)> = Vec::new();
    for shard in inner.shards.iter() {
        let mut shard = shard.lock().unwrap_or_else(|p| p.into_inner());
        taken.extend(std::mem::take(&mut shard.table));
    }
    if taken.is_empty() {
        return;
    }
    let entries: usize = taken.iter().map(|(_, p)| p.seconds.len()).sum();
    let increments: u64 = taken.iter().map(|(_, p)| p.increments()).sum();
    let precisions = inner.counters.settings().precisions.clone();
    let mut writes: Vec<Write> = taken
        .into_iter()
        .map(|(name, pending)| expand(name, &pending, &precisions))
        .collect();
    writes.sort_unstable_by(|a, b| a.0.name.cmp(&b.0.name));
    // Deal chunks to lanes round-robin; each lane writes its chunks in order.
    let chunks: Vec<Vec<Write>> = {
        let mut chunks = Vec::new();
        let mut rest = writes.into_iter().peekable();
        while rest.peek().is_some() {
            chunks.push(rest.by_ref().take(inner.settings.chunk_counters).collect());
        }
        chunks
    };
    let n_lanes = inner.settings.lanes.min(chunks.len());
    let mut per_lane: Vec<Vec<Vec<Write>>> = (0..n_lanes).map(|_| Vec::new()).collect();
    for (i, chunk) in chunks.into_iter().enumerate() {
        per_lane[i % n_lanes].push(chunk);
    }
    let results = futures::future::join_all(per_lane.into_iter().enumerate().map(|(i, chunks)| {
        let inner = inner.clone();
        let mut lane = Lane {
            writer: lanes.writer,
            lane: i as u32,
            next: lanes.next[i],
        };
        async move {
            let mut lost = 0u64;
            for chunk in chunks {
                lost += write_chunk(&inner, &mut lane, chunk, deadline).await;
            }
            (lane.next, lost)
        }
    }))
    .await;
    let mut lost = 0;
    for (i, (next, l)) in results.into_iter().enumerate() {
        lanes.next[i] = next;
        lost += l;
    }
    // Room is given back only now, so memory stays bounded while a flush
    // retries.
    inner.entries.fetch_sub(entries, Ordering::AcqRel);
    inner.room.notify_waiters();
    inner
        .written
        .fetch_add(increments - lost, Ordering::Relaxed);
    inner.flushes.fetch_add(1, Ordering::Relaxed);
    let took = started.elapsed();
    inner
        .flush_micros
        .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    inner.flush_latency.observe(took);
}

/// One counter's waiting seconds as one delta per (precision, slice).
fn expand(name: Box<str>, pending: &Pending, precisions: &[u64]) -> Write {
    let mut deltas: Vec<SliceDelta> = Vec::with_capacity(pending.seconds.len() * precisions.len());
    for &p in precisions {
        let start = deltas.len();
        for &Slot {
            second,
            total: count,
            ..
        } in &pending.seconds
        {
            let slice = second / p * p;
            match deltas[start..].iter_mut().find(|d| d.slice == slice) {
                // A slice's sum can only leave the range if the stored count
                // would too: saturate, and let the store refuse it.
                Some(d) => d.delta = d.delta.saturating_add(count).max(-i64::MAX),
                None => deltas.push(SliceDelta {
                    precision: p,
                    slice,
                    delta: count,
                }),
            }
        }
        deltas[start..].sort_unstable_by_key(|d| d.slice);
    }
    let name = Name::from_checked(name.into_string());
    (CounterWrite { name, deltas }, pending.increments())
}

/// Whether a failed write may succeed if sent again.
fn retryable(e: &Error) -> bool {
    e.is_unavailable() || matches!(e, Error::Backend(_))
}

/// Writes `batch`, retrying a retryable failure with the same sequence
/// number until it is acknowledged or `deadline` passes.
async fn write_retrying(
    inner: &Inner,
    batch: &WriteBatch,
    deadline: Option<Instant>,
) -> Result<Applied> {
    let mut backoff = RETRY_MIN;
    loop {
        match inner.counters.store().apply(batch).await {
            Ok(applied) => {
                inner.chunks.fetch_add(1, Ordering::Relaxed);
                if applied == Applied::Duplicate {
                    inner.duplicates.fetch_add(1, Ordering::Relaxed);
                }
                return Ok(applied);
            }
            Err(e) if retryable(&e) => {
                inner.retries.fetch_add(1, Ordering::Relaxed);
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(e);
                }
                tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64, "flush failed; retrying");
                tokio::time::sleep(jitter(backoff)).await;
                backoff = (backoff * 2).min(RETRY_MAX);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Writes one chunk on `lane`; returns the increments lost (refused for
/// good, or given up at shutdown).
async fn write_chunk(
    inner: &Inner,
    lane: &mut Lane,
    chunk: Vec<Write>,
    deadline: Option<Instant>,
) -> u64 {
    let batch = WriteBatch {
        counters: chunk.iter().map(|(w, _)| w.clone()).collect(),
        seq: Some(lane.take()),
    };
    match write_retrying(inner, &batch, deadline).await {
        Ok(_) => 0,
        Err(e) if retryable(&e) => {
            let lost: u64 = chunk.iter().map(|(_, n)| n).sum();
            tracing::error!(error = %e, increments = lost,
                "stopping with the backend unavailable: these unflushed increments are lost");
            lost
        }
        Err(e) => {
            // Refused for good (a slice would overflow): nothing of the chunk
            // was written, so write each counter alone, with the lane's next
            // numbers, and drop only those the store refuses.
            tracing::warn!(error = %e, counters = chunk.len(), "flush refused; writing counter by counter");
            let mut lost = 0;
            for (write, increments) in chunk {
                let name = write.name.clone();
                let batch = WriteBatch {
                    counters: vec![write],
                    seq: Some(lane.take()),
                };
                match write_retrying(inner, &batch, deadline).await {
                    Ok(_) => {}
                    Err(e) => {
                        if !retryable(&e) {
                            inner.rejected.fetch_add(increments, Ordering::Relaxed);
                        }
                        tracing::error!(error = %e, counter = %name, increments,
                            "these increments could not be written and are dropped");
                        lost += increments;
                    }
                }
            }
            lost
        }
    }
}

fn jitter(d: Duration) -> Duration {
    let factor = 0.5 + rand::random::<f64>() * 0.5;
    d.mul_f64(factor)
}
