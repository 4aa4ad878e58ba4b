//! The aggregating writer: deltas of any kind merged in process, written in
//! batches, each exactly once.
//!
//! [`Writer::try_add`] validates a delta and merges it into an in-memory
//! table keyed by (series, whole second): every precision is a whole number
//! of seconds, so merging by second loses nothing, and one hash update per
//! delta is all the hot path does. A background flusher takes the table
//! every `flush_interval` (or as soon as it holds `flush_entries` entries),
//! folds each series' seconds into one delta per (precision, slice),
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
//! are dropped, logged and counted in [`WriterStats::rejected`].
//!
//! Speed: sums (counters) merge at over ten million deltas a second through
//! this table. [`Value::merge`] of two sums is one match and one checked
//! add, inlined, so sums need no path of their own here; the kinds whose
//! values are large (sketches) merge in place, without a copy.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Instant;

use rustc_hash::FxBuildHasher;
use tokio::sync::mpsc;

use crate::clock::{SharedClock, Timestamp};
use crate::engine::aggregate::Value;
use crate::engine::kinds::sum;
use crate::engine::plan::{Item, locate};
use crate::engine::store::{Applied, Batch, BatchSink, CellDelta, SeriesWrite, Space, WriteSeq};
use crate::error::{Error, Result};
use crate::name::Name;

mod base;
mod flush;
mod settings;
#[cfg(test)]
mod tests;

pub use settings::{MAX_CHUNK_CELLS, SHUTDOWN_GRACE, WhenFull, WriterSettings, WriterStats};

pub(crate) use base::{
    Backoff, Base, Control, Handle, Shards, WriterState, retryable, run_flusher,
};
use flush::flusher;

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

#[derive(Default)]
struct Shard {
    table: HashMap<Box<str>, Pending, FxBuildHasher>,
}

struct Inner {
    base: Base,
    sink: Arc<dyn BatchSink>,
    space: Arc<Space>,
    clock: SharedClock,
    shards: Shards<Shard>,
    flush_latency: crate::metrics::Histogram,
}

impl WriterState for Inner {
    fn base(&self) -> &Base {
        &self.base
    }
}

/// A handle on an aggregating writer. Cheap to clone; the flusher stops
/// (after a final flush) when [`Writer::shutdown`] is called or the last
/// handle is dropped.
#[derive(Clone)]
pub struct Writer {
    inner: Handle<Inner>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner
            .debug(f, "Writer", &[("space", &self.inner.space.id)])
    }
}

impl Writer {
    /// Starts a writer of `space` into `sink`, reading "now" from `clock`;
    /// spawns its flusher on the current tokio runtime.
    pub fn start(
        sink: Arc<dyn BatchSink>,
        space: Arc<Space>,
        clock: SharedClock,
        settings: WriterSettings,
    ) -> Result<Self> {
        let settings = settings.validate()?;
        let inner = Inner {
            base: Base::new("writer", "(series, second)", settings),
            sink,
            space,
            clock,
            shards: Shards::new(),
            flush_latency: crate::metrics::Histogram::default(),
        };
        Ok(Writer {
            inner: Handle::start(inner, flusher),
        })
    }

    /// The space written.
    pub fn space(&self) -> &Arc<Space> {
        &self.inner.space
    }

    /// The settings in force.
    pub fn settings(&self) -> &WriterSettings {
        self.inner.settings()
    }

    /// Merges `delta` into `name` at `at` (default now), waiting for room
    /// when full and so configured.
    pub async fn add(&self, name: &str, delta: Value, at: Option<f64>) -> Result<()> {
        let mut delta = delta;
        loop {
            let room = self.inner.base.room.notified();
            match self.offer(name, delta, at, || self.inner.clock.now()) {
                Err((Error::Overloaded(_), Some(back)))
                    if self.inner.base.settings.when_full == WhenFull::Wait
                        && !self.inner.base.closed.load(Ordering::Relaxed) =>
                {
                    delta = back;
                    self.inner.base.flush_soon.notify_one();
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
        self.offer(name, delta, at, || self.inner.clock.now())
            .map_err(|(e, _)| e)
    }

    /// [`Writer::try_add`] with the caller's `now` for a delta without a
    /// time: a caller adding many deltas of one instant (the statsd
    /// listener, a datagram's lines) reads its clock once for all of them.
    #[inline]
    pub fn try_add_at(
        &self,
        name: &str,
        delta: Value,
        at: Option<f64>,
        now: Timestamp,
    ) -> Result<()> {
        self.offer(name, delta, at, || now).map_err(|(e, _)| e)
    }

    /// [`Writer::try_add`], giving the delta back when there is no room for
    /// it (so a waiting `add` does not copy it for each attempt).
    #[inline]
    fn offer(
        &self,
        name: &str,
        delta: Value,
        at: Option<f64>,
        now: impl FnOnce() -> Timestamp,
    ) -> std::result::Result<(), (Error, Option<Value>)> {
        let inner = &self.inner;
        if inner.base.closed.load(Ordering::Relaxed) {
            return Err((shut_down(), None));
        }
        let checked = Name::check(name)
            .and_then(|()| delta.check())
            .and_then(|()| match at {
                Some(at) => Timestamp::from_secs_f64(at),
                None => Ok(now()),
            });
        let at = checked.map_err(|e| (e, None))?;
        let created = self.merge(name, at.whole_secs(), delta)?;
        inner.base.accepted.fetch_add(1, Ordering::Relaxed);
        if created
            && inner.base.entries.load(Ordering::Relaxed) >= inner.base.settings.flush_entries
        {
            inner.base.flush_soon.notify_one();
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
        let mut shard = self.inner.shards.lock(shard_of(name));
        // Checked again under the lock: the final flush takes each shard's
        // table under its lock after `closed` is set, so an add either is
        // in the table it takes or sees `closed` and is refused, never
        // accepted after the last flush.
        if self.inner.base.closed.load(Ordering::Relaxed) {
            return Err((shut_down(), None));
        }
        if let Some(pending) = shard.table.get_mut(name)
            && let Some(slot) = pending.seconds.iter_mut().rfind(|s| s.second == second)
        {
            slot.delta
                .merge(&delta)
                .map_err(|e| (locate(e, &self.inner.space, name, 1, second), None))?;
            slot.adds += 1;
            return Ok(false);
        }
        if let Err(e) = self.inner.base.reserve_n(1) {
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

    /// Merges a batch of validated items, all or nothing: room for the whole
    /// batch is taken first; then, with the shards it touches locked, each
    /// item is merged, and if one would leave its kind's range those
    /// already merged are put back as they were (which works for every
    /// kind, with or without [`crate::engine::Undo`]).
    pub async fn add_many(&self, items: &[Item]) -> Result<()> {
        let inner = &self.inner;
        let needed = items.len();
        loop {
            let room = inner.base.room.notified();
            match self.inner.base.reserve_n(needed) {
                Ok(()) => break,
                Err(Error::Overloaded(_))
                    if inner.base.settings.when_full == WhenFull::Wait
                        && needed <= inner.base.settings.max_entries
                        && !inner.base.closed.load(Ordering::Relaxed) =>
                {
                    inner.base.flush_soon.notify_one();
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
        inner
            .base
            .entries
            .fetch_sub(needed - created, Ordering::AcqRel);
        if created < needed {
            inner.base.room.notify_waiters();
        }
        if taken {
            inner
                .base
                .accepted
                .fetch_add(needed as u64, Ordering::Relaxed);
            if inner.base.entries.load(Ordering::Relaxed) >= inner.base.settings.flush_entries {
                inner.base.flush_soon.notify_one();
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
        let shard_of_item: Vec<usize> = items.iter().map(|i| shard_of(i.name.as_str())).collect();
        let mut guards = self.inner.shards.lock_all(&shard_of_item);
        // As in `merge`: refused, not taken after the final flush.
        if self.inner.base.closed.load(Ordering::Relaxed) {
            return Err(shut_down());
        }
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

    /// Flushes now and waits until everything added before this call is
    /// written (or dropped as refused).
    pub async fn flush(&self) -> Result<()> {
        self.inner.flush(shut_down).await
    }

    /// Stops taking deltas, flushes what is pending (retrying an
    /// unavailable backend for up to [`SHUTDOWN_GRACE`]) and stops the
    /// flusher.
    pub async fn shutdown(&self) {
        self.inner.shutdown().await
    }

    /// How long the flushes that wrote something took.
    pub fn flush_latency(&self) -> crate::metrics::HistogramSnapshot {
        self.inner.flush_latency.snapshot()
    }

    /// Running figures.
    pub fn stats(&self) -> WriterStats {
        self.inner.stats()
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
        .any(|(w, _)| w.inner.base.closed.load(Ordering::Relaxed))
    {
        return Err(shut_down());
    }
    for (i, (w, items)) in parts.iter().enumerate() {
        if let Err(e) = w.inner.base.reserve_n(items.len()) {
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

/// The error of an add to a writer that was shut down.
fn shut_down() -> Error {
    Error::Overloaded("the writer is shut down".into())
}

fn shard_of(name: &str) -> usize {
    Shards::<Shard>::of(name)
}
