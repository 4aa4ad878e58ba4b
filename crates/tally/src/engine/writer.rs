//! The aggregating writer: deltas of any kind merged in process, written in
//! batches, each exactly once.
//!
//! [`Writer::try_add`] validates a delta and merges it into an in-memory
//! table keyed by (series, whole second): every resolution is a whole number
//! of seconds, so merging by second loses nothing, and one hash update per
//! delta is all the hot path does. A background flusher takes the table
//! every `flush_interval` (or as soon as it holds `flush_entries` entries),
//! folds each series' seconds into one delta per (resolution, slice),
//! sorts the series by name and writes them in chunks of `chunk_counters`
//! series and at most [`MAX_CHUNK_CELLS`] cells (a series with more is a
//! chunk of its own: a series' cells are never split), so that no single
//! store call grows with the backlog; chunks go out on `lanes` concurrent
//! lanes, so a flush costs one round trip per lane (per node on a
//! cluster) in the common case. One writer writes one
//! [`Space`]; a service with several spaces starts one writer for each.
//!
//! Exactly once: each chunk carries a [`WriteSeq`] (a random writer id, its
//! lane, and the lane's next number). A chunk that fails because the backend
//! is unavailable (timeout, dropped connection, restart) is retried with the
//! same number until it is acknowledged; the store applies a number at most
//! once. So while the process lives, a delta that `try_add` accepted is
//! written exactly once. A process that dies loses what it had not flushed:
//! that is what "aggregated" means, and why each service keeps an exact
//! path that writes before it returns.
//!
//! Bounded memory: at most `max_entries` (series, second) entries wait in
//! memory. When full, [`Writer::add`] waits for the next flush
//! ([`WhenFull::Wait`]) or fails with [`Error::Overloaded`]
//! ([`WhenFull::Error`]); [`Writer::try_add`] never waits.
//!
//! A chunk the store refuses for good (a slice would leave its kind's range)
//! is split and retried series by series; only the refusing series' deltas
//! are dropped, logged and counted in [`AggregatorStats::rejected`].
//!
//! Speed: sums (counters) merge at over ten million deltas a second through
//! this table. [`Value::merge`] of two sums is one match and one checked
//! add, inlined, so sums need no path of their own here; the kinds whose
//! values are large (sketches) merge in place, without a copy.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustc_hash::FxBuildHasher;
use serde::Serialize;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::clock::{SharedClock, Timestamp};
use crate::engine::aggregate::Value;
use crate::engine::kinds::sum;
use crate::engine::plan::{Item, locate};
use crate::engine::store::{Applied, Batch, BatchSink, CellDelta, SeriesWrite, Space, WriteSeq};
use crate::error::{Error, Result};
use crate::name::Name;

/// What [`Writer::add`] does when the table is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WhenFull {
    /// Wait until a flush makes room.
    Wait,
    /// Fail at once with [`Error::Overloaded`].
    Error,
}

/// How the aggregating writer buffers and flushes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggregatorSettings {
    /// Time between flushes.
    pub flush_interval: Duration,
    /// Flush early when this many (series, second) entries wait.
    pub flush_entries: usize,
    /// At most this many entries wait in memory.
    pub max_entries: usize,
    /// What `add` does when `max_entries` are waiting.
    pub when_full: WhenFull,
    /// Series (counters, statistics...) per write (one Lua call or
    /// transaction).
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

/// Running figures of an aggregating writer (monotonic unless noted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AggregatorStats {
    /// Deltas (increments) accepted by `add`.
    pub accepted: u64,
    /// Deltas written (acknowledged by the store).
    pub written: u64,
    /// Deltas dropped because the store refused them for good.
    pub rejected: u64,
    /// Flushes that wrote something.
    pub flushes: u64,
    /// Chunks written (store calls that succeeded, duplicates included).
    pub chunks: u64,
    /// Chunk attempts that failed and were retried.
    pub retries: u64,
    /// Chunks the store found already applied (retries of written chunks).
    pub duplicates: u64,
    /// (series, second) entries waiting now (a gauge).
    pub pending_entries: u64,
    /// Total microseconds spent in flushes that wrote something.
    pub flush_micros: u64,
}

/// The most (series, resolution, slice) cells in one chunk (one store
/// call), unless one series alone has more. A flush that follows a burst
/// of timestamped writes (carbon lines, many seconds per series) would
/// otherwise send chunks of `chunk_counters` series of hundreds of cells
/// each: one Lua call of minutes, past the client's response timeout.
pub const MAX_CHUNK_CELLS: usize = 20_000;

const SHARDS: usize = 16;
const RETRY_MIN: Duration = Duration::from_millis(20);
const RETRY_MAX: Duration = Duration::from_secs(2);
/// How long a final flush keeps retrying an unavailable backend at shutdown.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// What waits for one series: per whole second, the merged delta and how
/// many adds it stands for.
#[derive(Default)]
struct Pending {
    seconds: Vec<Slot>,
}

struct Slot {
    second: u64,
    delta: Value,
    adds: u64,
}

impl Pending {
    fn adds(&self) -> u64 {
        self.seconds.iter().map(|s| s.adds).sum()
    }
}

struct Shard {
    table: HashMap<Box<str>, Pending, FxBuildHasher>,
}

struct Inner {
    sink: Arc<dyn BatchSink>,
    space: Arc<Space>,
    clock: SharedClock,
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

/// A handle on an aggregating writer. Cheap to clone; the flusher stops
/// (after a final flush) when [`Writer::shutdown`] is called or the last
/// handle is dropped.
#[derive(Clone)]
pub struct Writer {
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

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("space", &self.inner.space.id)
            .field("settings", &self.inner.settings)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Writer {
    /// Starts a writer of `space` into `sink`, reading "now" from `clock`;
    /// spawns its flusher on the current tokio runtime.
    pub fn start(
        sink: Arc<dyn BatchSink>,
        space: Arc<Space>,
        clock: SharedClock,
        settings: AggregatorSettings,
    ) -> Result<Self> {
        let settings = settings.validate()?;
        let inner = Arc::new(Inner {
            sink,
            space,
            clock,
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
        Ok(Writer {
            inner,
            control: Arc::new(ControlHandle { tx }),
        })
    }

    /// The space written.
    pub fn space(&self) -> &Arc<Space> {
        &self.inner.space
    }

    /// The settings in force.
    pub fn settings(&self) -> &AggregatorSettings {
        &self.inner.settings
    }

    /// Merges `delta` into `name` at `at` (default now), waiting for room
    /// when full and so configured.
    pub async fn add(&self, name: &str, delta: Value, at: Option<f64>) -> Result<()> {
        let mut delta = delta;
        loop {
            let room = self.inner.room.notified();
            match self.offer(name, delta, at) {
                Err((Error::Overloaded(_), Some(back)))
                    if self.inner.settings.when_full == WhenFull::Wait
                        && !self.inner.closed.load(Ordering::Relaxed) =>
                {
                    delta = back;
                    self.inner.flush_soon.notify_one();
                    room.await;
                }
                other => return other.map_err(|(e, _)| e),
            }
        }
    }

    /// Merges without ever waiting: fails with [`Error::Overloaded`] when
    /// full or shut down. Checks the name, the delta and the time first.
    #[inline]
    pub fn try_add(&self, name: &str, delta: Value, at: Option<f64>) -> Result<()> {
        self.offer(name, delta, at).map_err(|(e, _)| e)
    }

    /// [`Writer::try_add`], giving the delta back when there is no room for
    /// it (so a waiting `add` does not copy it for each attempt).
    #[inline]
    fn offer(
        &self,
        name: &str,
        delta: Value,
        at: Option<f64>,
    ) -> std::result::Result<(), (Error, Option<Value>)> {
        let inner = &self.inner;
        if inner.closed.load(Ordering::Relaxed) {
            return Err((
                Error::Overloaded("the aggregator is shut down".into()),
                None,
            ));
        }
        let checked = Name::check(name)
            .and_then(|()| delta.check())
            .and_then(|()| match at {
                Some(at) => Timestamp::from_secs_f64(at),
                None => Ok(inner.clock.now()),
            });
        let at = checked.map_err(|e| (e, None))?;
        let created = self.merge(name, at.whole_secs(), delta)?;
        inner.accepted.fetch_add(1, Ordering::Relaxed);
        if created && inner.entries.load(Ordering::Relaxed) >= inner.settings.flush_entries {
            inner.flush_soon.notify_one();
        }
        Ok(())
    }

    /// Merges `delta` into the pending (name, second) entry; true when it
    /// made a new entry, which takes room or fails with
    /// [`Error::Overloaded`] (giving the delta back) when there is none.
    #[inline]
    fn merge(
        &self,
        name: &str,
        second: u64,
        delta: Value,
    ) -> std::result::Result<bool, (Error, Option<Value>)> {
        let mut shard = self.lock(shard_of(name));
        if let Some(pending) = shard.table.get_mut(name)
            && let Some(slot) = pending.seconds.iter_mut().rfind(|s| s.second == second)
        {
            slot.delta
                .merge(&delta)
                .map_err(|e| (locate(e, &self.inner.space, name, 1, second), None))?;
            slot.adds += 1;
            return Ok(false);
        }
        if let Err(e) = self.reserve_n(1) {
            return Err((e, Some(delta)));
        }
        let slot = Slot {
            second,
            delta,
            adds: 1,
        };
        shard
            .table
            .entry(name.into())
            .or_default()
            .seconds
            .push(slot);
        Ok(true)
    }

    fn lock(&self, shard: usize) -> MutexGuard<'_, Shard> {
        self.inner.shards[shard]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Merges a batch of validated items, all or nothing: room for the whole
    /// batch is taken first; then, with the shards it touches locked, each
    /// item is merged, and if one would leave its kind's range those
    /// already merged are put back as they were (which works for every
    /// kind, with or without [`crate::engine::Undo`]).
    pub async fn add_many(&self, items: &[Item]) -> Result<()> {
        let inner = &self.inner;
        let needed = items.len();
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
        let result = self.merge_all_then(items, || Ok(()));
        let created = result.as_ref().map_or(0, |(created, ())| *created);
        self.settle(needed, created, result.is_ok());
        result.map(|_| ())
    }

    /// After room for `needed` new entries was taken and `created` were
    /// made: gives back what was not used (entries merged into waiting
    /// ones, or everything when the merge failed), and counts what was
    /// `taken`.
    fn settle(&self, needed: usize, created: usize, taken: bool) {
        let inner = &self.inner;
        inner.entries.fetch_sub(needed - created, Ordering::AcqRel);
        if created < needed {
            inner.room.notify_waiters();
        }
        if taken {
            inner.accepted.fetch_add(needed as u64, Ordering::Relaxed);
            if inner.entries.load(Ordering::Relaxed) >= inner.settings.flush_entries {
                inner.flush_soon.notify_one();
            }
        }
    }

    /// The locked part of [`Writer::add_many`]: merges every item with the
    /// shards they touch locked, then, still holding them, runs `then`; if
    /// an item would leave its kind's range or `then` fails, the items
    /// merged are put back as they were. Returns the entries made and what
    /// `then` gave.
    fn merge_all_then<T>(
        &self,
        items: &[Item],
        then: impl FnOnce() -> Result<T>,
    ) -> Result<(usize, T)> {
        let mut wanted: Vec<usize> = items.iter().map(|i| shard_of(i.name.as_str())).collect();
        let shard_of_item = wanted.clone();
        wanted.sort_unstable();
        wanted.dedup();
        // Locked in ascending order, as every caller does: no deadlock.
        let mut guards: Vec<(usize, MutexGuard<'_, Shard>)> =
            wanted.iter().map(|&s| (s, self.lock(s))).collect();
        // Per item merged: its previous (delta, adds), or None if it made
        // the entry.
        let mut done: Vec<Option<(Value, u64)>> = Vec::with_capacity(items.len());
        let mut created = 0;
        for (i, item) in items.iter().enumerate() {
            let g = guards
                .binary_search_by_key(&shard_of_item[i], |(s, _)| *s)
                .expect("locked");
            let table = &mut guards[g].1.table;
            let second = item.at.whole_secs();
            let name = item.name.as_str();
            let slot = table
                .get_mut(name)
                .and_then(|p| p.seconds.iter_mut().rfind(|s| s.second == second));
            let merged = match slot {
                Some(slot) => {
                    let before = (slot.delta.clone(), slot.adds);
                    slot.delta.merge(&item.delta).map(|()| {
                        slot.adds += 1;
                        Some(before)
                    })
                }
                None => {
                    table.entry(name.into()).or_default().seconds.push(Slot {
                        second,
                        delta: item.delta.clone(),
                        adds: 1,
                    });
                    created += 1;
                    Ok(None)
                }
            };
            match merged {
                Ok(prev) => done.push(prev),
                Err(e) => {
                    undo(&mut guards, &shard_of_item, items, done);
                    return Err(locate(e, &self.inner.space, name, 1, second));
                }
            }
        }
        match then() {
            Ok(t) => Ok((created, t)),
            Err(e) => {
                undo(&mut guards, &shard_of_item, items, done);
                Err(e)
            }
        }
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
                    "the aggregator holds its maximum of {max} pending (series, second) entries"
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

    /// Stops taking deltas, flushes what is pending (retrying an
    /// unavailable backend for up to [`SHUTDOWN_GRACE`]) and stops the
    /// flusher.
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

/// Merges each writer's items into it without ever waiting, all or nothing
/// over every writer (the statsd listener's path for a line whose samples
/// go to several writers): room for every part is taken first, or nothing
/// is merged ([`Error::Overloaded`]); then the parts are merged one inside
/// the other, each with its writer's shards still locked, so that if one
/// would leave its kind's range every part merged before it is put back.
/// Writers are locked in one order whatever the order of `parts` (their
/// address), so callers cannot deadlock one another; a writer may appear
/// only once.
pub fn try_add_all(parts: &mut [(&Writer, &[Item])]) -> Result<()> {
    parts.sort_by_key(|(w, _)| Arc::as_ptr(&w.inner) as usize);
    if parts
        .windows(2)
        .any(|p| Arc::ptr_eq(&p[0].0.inner, &p[1].0.inner))
    {
        return Err(Error::InvalidInput(
            "a writer appears twice in one all-or-nothing add".into(),
        ));
    }
    if parts
        .iter()
        .any(|(w, _)| w.inner.closed.load(Ordering::Relaxed))
    {
        return Err(Error::Overloaded("the aggregator is shut down".into()));
    }
    for (i, (w, items)) in parts.iter().enumerate() {
        if let Err(e) = w.reserve_n(items.len()) {
            for (w, items) in &parts[..i] {
                w.settle(items.len(), 0, false);
            }
            return Err(e);
        }
    }
    let mut created = vec![0; parts.len()];
    let result = merge_nested(parts, &mut created);
    for ((w, items), created) in parts.iter().zip(created) {
        w.settle(items.len(), created, result.is_ok());
    }
    result
}

/// The first part merged around the merge of the others (see
/// [`try_add_all`]); each part's entries made go to `created`.
fn merge_nested(parts: &[(&Writer, &[Item])], created: &mut [usize]) -> Result<()> {
    let (Some(((w, items), rest)), Some((made, others))) =
        (parts.split_first(), created.split_first_mut())
    else {
        return Ok(());
    };
    let (n, ()) = w.merge_all_then(items, || merge_nested(rest, others))?;
    *made = n;
    Ok(())
}

/// Puts back, newest first, the items merged so far (`done`: each one's
/// previous delta and adds, or `None` if it made its entry).
fn undo(
    guards: &mut [(usize, MutexGuard<'_, Shard>)],
    shard_of_item: &[usize],
    items: &[Item],
    done: Vec<Option<(Value, u64)>>,
) {
    for (j, prev) in done.into_iter().enumerate().rev() {
        let g = guards
            .binary_search_by_key(&shard_of_item[j], |(s, _)| *s)
            .expect("locked");
        put_back(&mut guards[g].1, &items[j], prev);
    }
}

/// Puts an entry back as it was before `item` was merged into it: its
/// previous delta and adds, or gone if the item made it.
fn put_back(shard: &mut Shard, item: &Item, prev: Option<(Value, u64)>) {
    let name = item.name.as_str();
    let second = item.at.whole_secs();
    let Some(pending) = shard.table.get_mut(name) else {
        return;
    };
    let Some(i) = pending.seconds.iter().rposition(|s| s.second == second) else {
        return;
    };
    match prev {
        Some((delta, adds)) => {
            let slot = &mut pending.seconds[i];
            slot.delta = delta;
            slot.adds = adds;
        }
        None => {
            pending.seconds.remove(i);
            if pending.seconds.is_empty() {
                shard.table.remove(name);
            }
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
            tracing::debug!(space = inner.space.id, "aggregator flusher stopped");
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

/// A chunk: series writes and, for each, the adds it stands for.
struct Chunk {
    writes: Vec<SeriesWrite>,
    adds: Vec<u64>,
}

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
    let adds: u64 = taken.iter().map(|(_, p)| p.adds()).sum();
    let mut lost = 0;
    let mut writes: Vec<(SeriesWrite, u64)> = Vec::with_capacity(taken.len());
    for (name, pending) in taken {
        let n = pending.adds();
        match expand(name, pending, &inner.space) {
            Ok(write) => writes.push((write, n)),
            Err(e) => {
                tracing::error!(error = %e, adds = n, space = inner.space.id,
                    "these deltas could not be merged into slices and are dropped");
                inner.rejected.fetch_add(n, Ordering::Relaxed);
                lost += n;
            }
        }
    }
    writes.sort_unstable_by(|a, b| a.0.name.cmp(&b.0.name));
    // Deal chunks to lanes round-robin; each lane writes its chunks in order.
    let chunks = chunk(writes, inner.settings.chunk_counters, MAX_CHUNK_CELLS);
    let n_lanes = inner.settings.lanes.min(chunks.len());
    let mut per_lane: Vec<Vec<Chunk>> = (0..n_lanes).map(|_| Vec::new()).collect();
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
    for (i, (next, l)) in results.into_iter().enumerate() {
        lanes.next[i] = next;
        lost += l;
    }
    // Room is given back only now, so memory stays bounded while a flush
    // retries.
    inner.entries.fetch_sub(entries, Ordering::AcqRel);
    inner.room.notify_waiters();
    inner.written.fetch_add(adds - lost, Ordering::Relaxed);
    inner.flushes.fetch_add(1, Ordering::Relaxed);
    let took = started.elapsed();
    inner
        .flush_micros
        .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    inner.flush_latency.observe(took);
}

/// Cuts name-ordered series writes into chunks of at most `series` series
/// and `cells` cells (a series with more cells alone in its chunk).
fn chunk(writes: Vec<(SeriesWrite, u64)>, series: usize, cells: usize) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let mut current = Chunk {
        writes: Vec::new(),
        adds: Vec::new(),
    };
    let mut held = 0;
    for (write, adds) in writes {
        let n = write.cells.len();
        if !current.writes.is_empty() && (current.writes.len() >= series || held + n > cells) {
            chunks.push(std::mem::replace(
                &mut current,
                Chunk {
                    writes: Vec::new(),
                    adds: Vec::new(),
                },
            ));
            held = 0;
        }
        held += n;
        current.writes.push(write);
        current.adds.push(adds);
    }
    if !current.writes.is_empty() {
        chunks.push(current);
    }
    chunks
}

/// Folds `delta` into a slice's delta at flush. Sums are clamped into their
/// range: a slice's total can only leave it if the stored count would too,
/// so the store refuses it either way, and clamping keeps the rest of the
/// series writable. Other kinds merge (and may fail).
#[inline]
fn fold(into: &mut Value, delta: &Value) -> Result<()> {
    match (into, delta) {
        (Value::Sum(a), Value::Sum(b)) => {
            *a = sum::add_clamped(*a, *b);
            Ok(())
        }
        (into, delta) => into.merge(delta),
    }
}

/// One series' waiting seconds as one delta per (resolution, slice).
fn expand(name: Box<str>, pending: Pending, space: &Space) -> Result<SeriesWrite> {
    let mut cells: Vec<CellDelta> =
        Vec::with_capacity(pending.seconds.len() * space.resolutions.len());
    for r in &space.resolutions {
        let start = cells.len();
        for slot in &pending.seconds {
            let slice = r.slice_of_second(slot.second);
            match cells[start..].iter_mut().find(|c| c.slice == slice) {
                Some(c) => fold(&mut c.delta, &slot.delta)
                    .map_err(|e| locate(e, space, &name, r.seconds, slice))?,
                None => cells.push(CellDelta {
                    resolution: r.seconds,
                    slice,
                    delta: slot.delta.clone(),
                }),
            }
        }
        cells[start..].sort_unstable_by_key(|c| c.slice);
    }
    Ok(SeriesWrite {
        name: Name::from_checked(name.into_string()),
        cells,
    })
}

/// Whether a failed write may succeed if sent again.
fn retryable(e: &Error) -> bool {
    e.is_unavailable() || matches!(e, Error::Backend(_))
}

/// Writes `batch`, retrying a retryable failure with the same sequence
/// number until it is acknowledged or `deadline` passes.
async fn write_retrying(
    inner: &Inner,
    batch: &Batch,
    deadline: Option<Instant>,
) -> Result<Applied> {
    let mut backoff = RETRY_MIN;
    loop {
        match inner.sink.apply_batch(batch).await {
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

/// Writes one chunk on `lane`; returns the adds lost (refused for good, or
/// given up at shutdown).
async fn write_chunk(
    inner: &Inner,
    lane: &mut Lane,
    chunk: Chunk,
    deadline: Option<Instant>,
) -> u64 {
    let batch = Batch {
        space: inner.space.clone(),
        writes: chunk.writes,
        seq: Some(lane.take()),
    };
    match write_retrying(inner, &batch, deadline).await {
        Ok(_) => 0,
        Err(e) if retryable(&e) => {
            let lost: u64 = chunk.adds.iter().sum();
            tracing::error!(error = %e, increments = lost,
                "stopping with the backend unavailable: these unflushed increments are lost");
            lost
        }
        Err(e) => {
            // Refused for good (a slice would overflow): nothing of the chunk
            // was written, so write each series alone, with the lane's next
            // numbers, and drop only those the store refuses.
            tracing::warn!(error = %e, counters = batch.writes.len(), "flush refused; writing counter by counter");
            let mut lost = 0;
            for (write, adds) in batch.writes.into_iter().zip(chunk.adds) {
                let name = write.name.clone();
                let single = Batch {
                    space: inner.space.clone(),
                    writes: vec![write],
                    seq: Some(lane.take()),
                };
                if let Err(e) = write_retrying(inner, &single, deadline).await {
                    if !retryable(&e) {
                        inner.rejected.fetch_add(adds, Ordering::Relaxed);
                    }
                    tracing::error!(error = %e, counter = %name, increments = adds,
                        "these increments could not be written and are dropped");
                    lost += adds;
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use async_trait::async_trait;

    use super::*;
    use crate::clock::ManualClock;
    use crate::engine::{Kind, Resolution, Retention};

    /// A sink keeping what it applied (per write id, once), failing as told.
    #[derive(Default)]
    struct Recorder {
        state: Mutex<RecorderState>,
    }

    #[derive(Default)]
    struct RecorderState {
        /// (series, resolution, slice) -> total applied.
        totals: BTreeMap<(String, u64, u64), i64>,
        /// Last sequence number per lane.
        lanes: HashMap<(u64, u32), u64>,
        /// Calls to fail as unavailable before succeeding.
        fail_next: u32,
        /// Series whose writes are refused for good.
        refuse: Option<String>,
        calls: u64,
    }

    #[async_trait]
    impl BatchSink for Recorder {
        async fn apply_batch(&self, batch: &Batch) -> Result<Applied> {
            let mut s = self.state.lock().unwrap();
            s.calls += 1;
            if s.fail_next > 0 {
                s.fail_next -= 1;
                return Err(Error::Unavailable("told to fail".into()));
            }
            if let Some(refused) = &s.refuse
                && batch.writes.iter().any(|w| w.name.as_str() == refused)
            {
                return Err(Error::Overflow {
                    kind: "counter",
                    name: refused.clone(),
                    precision: 1,
                    slice: 0,
                    delta: 1,
                });
            }
            if let Some(seq) = batch.seq {
                let last = s.lanes.entry((seq.writer, seq.lane)).or_default();
                if seq.seq <= *last {
                    return Ok(Applied::Duplicate);
                }
                *last = seq.seq;
            }
            for w in &batch.writes {
                for c in &w.cells {
                    *s.totals
                        .entry((w.name.to_string(), c.resolution, c.slice))
                        .or_default() += c.delta.as_sum().unwrap();
                }
            }
            Ok(Applied::Written)
        }
    }

    /// A space other than counters: the writer serves any.
    fn space() -> Arc<Space> {
        Arc::new(
            Space::new(
                "visits",
                Kind::Sum,
                vec![Resolution::new(1, 100), Resolution::new(10, 100)],
                Retention::Cleaner,
            )
            .unwrap(),
        )
    }

    fn start(sink: Arc<Recorder>, settings: AggregatorSettings) -> Writer {
        Writer::start(sink, space(), Arc::new(ManualClock::at(1000.0)), settings).unwrap()
    }

    fn item(name: &str, at: f64, sum: i64) -> Item {
        Item {
            name: Name::new(name).unwrap(),
            at: Timestamp::from_secs_f64(at).unwrap(),
            delta: Value::Sum(sum),
        }
    }

    #[tokio::test]
    async fn deltas_are_merged_by_second_and_written_at_every_resolution() {
        let sink = Arc::new(Recorder::default());
        let w = start(sink.clone(), AggregatorSettings::default());
        w.try_add("a", Value::Sum(2), Some(1001.5)).unwrap();
        w.try_add("a", Value::Sum(3), Some(1001.0)).unwrap();
        w.try_add("a", Value::Sum(4), Some(1009.0)).unwrap();
        w.try_add("b", Value::Sum(-1), None).unwrap();
        assert_eq!(w.stats().pending_entries, 3);
        w.flush().await.unwrap();
        let totals = sink.state.lock().unwrap().totals.clone();
        let want: BTreeMap<(String, u64, u64), i64> = [
            (("a".to_owned(), 1, 1001), 5),
            (("a".to_owned(), 1, 1009), 4),
            (("a".to_owned(), 10, 1000), 9),
            (("b".to_owned(), 1, 1000), -1),
            (("b".to_owned(), 10, 1000), -1),
        ]
        .into_iter()
        .collect();
        assert_eq!(totals, want);
        let stats = w.stats();
        assert_eq!(
            (stats.accepted, stats.written, stats.pending_entries),
            (4, 4, 0)
        );
        w.shutdown().await;
        assert!(matches!(
            w.try_add("a", Value::Sum(1), None),
            Err(Error::Overloaded(_))
        ));
    }

    /// Regression: a flush after a burst of timestamped writes (carbon
    /// lines) sent chunks of hundreds of thousands of cells, one store call
    /// each, past the client's timeout.
    #[test]
    fn chunks_are_bounded_in_series_and_in_cells() {
        let write = |name: &str, cells: u64| {
            (
                SeriesWrite {
                    name: Name::new(name).unwrap(),
                    cells: (0..cells)
                        .map(|slice| CellDelta {
                            resolution: 1,
                            slice,
                            delta: Value::Sum(1),
                        })
                        .collect(),
                },
                cells,
            )
        };
        let writes = vec![
            write("a", 4),
            write("b", 4),
            write("c", 3),
            write("d", 25),
            write("e", 1),
            write("f", 1),
            write("g", 1),
        ];
        let shape: Vec<Vec<usize>> = chunk(writes, 3, 10)
            .iter()
            .map(|c| c.writes.iter().map(|w| w.cells.len()).collect())
            .collect();
        assert_eq!(shape, vec![vec![4, 4], vec![3], vec![25], vec![1, 1, 1]]);
        let adds: Vec<u64> = chunk(vec![write("x", 2), write("y", 3)], 3, 10)
            .into_iter()
            .flat_map(|c| c.adds)
            .collect();
        assert_eq!(adds, vec![2, 3]);
    }

    #[tokio::test]
    async fn bad_input_is_refused_before_anything_is_merged() {
        let sink = Arc::new(Recorder::default());
        let w = start(sink.clone(), AggregatorSettings::default());
        assert!(matches!(
            w.try_add("", Value::Sum(1), None),
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            w.try_add("a", Value::Sum(i64::MIN), None),
            Err(Error::InvalidCount(_))
        ));
        assert!(matches!(
            w.try_add("a", Value::Sum(1), Some(f64::NAN)),
            Err(Error::InvalidTime(_))
        ));
        assert_eq!(w.stats().pending_entries, 0);
    }

    /// add_many is all or nothing: an item that would overflow its pending
    /// entry puts back every entry the batch touched, made or merged.
    #[tokio::test]
    async fn a_refused_batch_puts_every_entry_back() {
        let sink = Arc::new(Recorder::default());
        let w = start(sink.clone(), AggregatorSettings::default());
        w.try_add("a", Value::Sum(7), Some(1000.0)).unwrap();
        w.try_add("z", Value::Sum(i64::MAX - 1), Some(1000.0))
            .unwrap();
        let err = w
            .add_many(&[
                item("a", 1000.0, 1),   // merged into a waiting entry
                item("new", 1001.0, 5), // a new entry
                item("new", 1001.0, 5), // merged into the entry the batch made
                item("z", 1000.0, 2),   // overflows
            ])
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Overflow { name, slice: 1000, .. } if name == "z"),
            "{err}"
        );
        assert_eq!(w.stats().pending_entries, 2);
        assert_eq!(w.stats().accepted, 2);
        w.add_many(&[item("a", 1000.0, 1), item("b", 1000.0, 1)])
            .await
            .unwrap();
        w.flush().await.unwrap();
        let totals = sink.state.lock().unwrap().totals.clone();
        assert_eq!(totals[&("a".to_owned(), 1, 1000)], 8);
        assert_eq!(totals[&("b".to_owned(), 1, 1000)], 1);
        assert!(!totals.keys().any(|k| k.0 == "new"));
        assert_eq!(w.stats().written, 4);
    }

    /// try_add_all is all or nothing over several writers (a statsd line
    /// whose samples go to several): a merge that fails in one puts back
    /// what the others merged, and a writer without room stops every part.
    #[tokio::test]
    async fn adding_to_several_writers_is_all_or_nothing() {
        let (sink_a, sink_b) = (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
        let a = start(sink_a.clone(), AggregatorSettings::default());
        let b = start(sink_b.clone(), AggregatorSettings::default());
        a.try_add("a", Value::Sum(7), Some(1000.0)).unwrap();
        b.try_add("z", Value::Sum(i64::MAX - 1), Some(1000.0))
            .unwrap();
        let to_a = [item("a", 1000.0, 1), item("new", 1001.0, 5)];
        let overflows = [item("q", 1000.0, 1), item("z", 1000.0, 2)];
        // Whichever order the parts come in, b's overflow undoes a's part.
        for flip in [false, true] {
            let mut parts = [(&a, &to_a[..]), (&b, &overflows[..])];
            if flip {
                parts.reverse();
            }
            let err = try_add_all(&mut parts).unwrap_err();
            assert!(
                matches!(&err, Error::Overflow { name, .. } if name == "z"),
                "{err}"
            );
            assert_eq!((a.stats().pending_entries, a.stats().accepted), (1, 1));
            assert_eq!((b.stats().pending_entries, b.stats().accepted), (1, 1));
        }
        // A writer with no room: nothing is merged anywhere.
        let full = start(
            Arc::new(Recorder::default()),
            AggregatorSettings {
                max_entries: 1,
                flush_entries: 1,
                flush_interval: Duration::from_secs(3600),
                when_full: WhenFull::Error,
                ..AggregatorSettings::default()
            },
        );
        full.try_add("f", Value::Sum(1), Some(1000.0)).unwrap();
        let err =
            try_add_all(&mut [(&a, &to_a[..]), (&full, &[item("g", 1000.0, 1)][..])]).unwrap_err();
        assert!(matches!(err, Error::Overloaded(_)), "{err}");
        assert_eq!((a.stats().pending_entries, a.stats().accepted), (1, 1));
        assert_eq!(full.stats().pending_entries, 1);
        // One writer twice is refused before anything is taken.
        let err = try_add_all(&mut [(&a, &to_a[..]), (&a.clone(), &to_a[..])]).unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{err}");
        // Both parts fit: both are merged, and written.
        try_add_all(&mut [(&b, &[item("q", 1000.0, 1)][..]), (&a, &to_a[..])]).unwrap();
        assert_eq!((a.stats().pending_entries, a.stats().accepted), (2, 3));
        assert_eq!((b.stats().pending_entries, b.stats().accepted), (2, 2));
        a.flush().await.unwrap();
        b.flush().await.unwrap();
        let totals = sink_a.state.lock().unwrap().totals.clone();
        assert_eq!(totals[&("a".to_owned(), 1, 1000)], 8);
        assert_eq!(totals[&("new".to_owned(), 1, 1001)], 5);
        assert_eq!(
            sink_b.state.lock().unwrap().totals[&("q".to_owned(), 1, 1000)],
            1
        );
    }

    /// A chunk that fails as unavailable is retried with the same write id:
    /// written once, however many attempts it took.
    #[tokio::test]
    async fn retried_chunks_are_written_once() {
        let sink = Arc::new(Recorder::default());
        sink.state.lock().unwrap().fail_next = 3;
        let w = start(
            sink.clone(),
            AggregatorSettings {
                chunk_counters: 2,
                lanes: 2,
                ..AggregatorSettings::default()
            },
        );
        for i in 0..10 {
            w.try_add(&format!("s{i}"), Value::Sum(1), Some(1000.0))
                .unwrap();
        }
        w.flush().await.unwrap();
        let s = sink.state.lock().unwrap();
        assert_eq!(s.totals.len(), 20);
        assert!(s.totals.values().all(|&t| t == 1));
        let stats = w.stats();
        assert_eq!(stats.retries, 3);
        assert_eq!(stats.written, 10);
        assert_eq!(stats.chunks, 5);
    }

    /// A chunk refused for good is written series by series; only the
    /// refused series' deltas are dropped and counted.
    #[tokio::test]
    async fn a_refused_chunk_loses_only_the_refused_series() {
        let sink = Arc::new(Recorder::default());
        sink.state.lock().unwrap().refuse = Some("bad".into());
        let w = start(sink.clone(), AggregatorSettings::default());
        for name in ["a", "bad", "c"] {
            w.try_add(name, Value::Sum(1), Some(1000.0)).unwrap();
            w.try_add(name, Value::Sum(1), Some(1000.0)).unwrap();
        }
        w.flush().await.unwrap();
        let s = sink.state.lock().unwrap();
        assert_eq!(s.totals[&("a".to_owned(), 10, 1000)], 2);
        assert_eq!(s.totals[&("c".to_owned(), 10, 1000)], 2);
        assert!(!s.totals.keys().any(|k| k.0 == "bad"));
        let stats = w.stats();
        assert_eq!((stats.written, stats.rejected), (4, 2));
    }

    #[tokio::test]
    async fn a_full_table_refuses_or_waits() {
        let sink = Arc::new(Recorder::default());
        let settings = AggregatorSettings {
            max_entries: 2,
            flush_entries: 2,
            flush_interval: Duration::from_secs(3600),
            when_full: WhenFull::Error,
            ..AggregatorSettings::default()
        };
        let w = start(sink.clone(), settings.clone());
        w.try_add("a", Value::Sum(1), Some(1000.0)).unwrap();
        w.try_add("a", Value::Sum(1), Some(1001.0)).unwrap();
        // Merging into a waiting entry takes no room; a new one has none.
        w.try_add("a", Value::Sum(1), Some(1001.0)).unwrap();
        assert!(matches!(
            w.add("b", Value::Sum(1), Some(1000.0)).await,
            Err(Error::Overloaded(_))
        ));
        assert!(matches!(
            w.add_many(&[item("c", 1000.0, 1)]).await,
            Err(Error::Overloaded(_))
        ));
        // Waiting: the add asks for a flush and goes in once it made room.
        let wait = start(
            sink.clone(),
            AggregatorSettings {
                when_full: WhenFull::Wait,
                ..settings
            },
        );
        wait.try_add("a", Value::Sum(1), Some(1000.0)).unwrap();
        wait.try_add("b", Value::Sum(1), Some(1000.0)).unwrap();
        tokio::time::timeout(
            tally_testkit::PATIENCE,
            wait.add("c", Value::Sum(1), Some(1000.0)),
        )
        .await
        .expect("room made by a flush")
        .unwrap();
        wait.shutdown().await;
        assert_eq!(wait.stats().written, 3);
    }
}
