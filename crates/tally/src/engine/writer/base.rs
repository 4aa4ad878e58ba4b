//! What every aggregating writer has, whatever it merges: the room it may
//! fill, its running figures, the channel that asks its flusher to flush
//! or stop, the handle that holds them, the flusher's loop and the retry
//! policy of a chunk. The engine's [`Writer`](super::Writer) and the daily
//! statistics' [`DailyWriter`](crate::daily::DailyWriter) each keep one
//! [`Base`] behind a [`Handle`] and add their own table and flush.

use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustc_hash::FxBuildHasher;
use tokio::sync::{Notify, mpsc, oneshot};

use super::{SHUTDOWN_GRACE, WriterSettings, WriterStats};
use crate::error::{Error, Result};

const RETRY_MIN: Duration = Duration::from_millis(20);
const RETRY_MAX: Duration = Duration::from_secs(2);

/// A writer's settings, its room, its flags and its running figures.
pub(crate) struct Base {
    /// Says which writer this is in errors and logs ("writer", "daily
    /// writer").
    who: &'static str,
    /// What one pending entry is ("(series, second)"), for the error of a
    /// full table.
    entry: &'static str,
    pub(crate) settings: WriterSettings,
    /// Pending entries, at most `settings.max_entries`.
    pub(crate) entries: AtomicUsize,
    pub(crate) flush_soon: Notify,
    pub(crate) room: Notify,
    pub(crate) closed: AtomicBool,
    /// The random id its writes carry ([`crate::engine::WriteSeq`]).
    pub(crate) writer: u64,
    /// Counted by every add, from every thread: on a cache line of its
    /// own, so that its writes do not evict what every add reads
    /// (`closed`, `settings`).
    pub(crate) accepted: OwnLine<AtomicU64>,
    pub(crate) written: AtomicU64,
    pub(crate) rejected: AtomicU64,
    pub(crate) flushes: AtomicU64,
    pub(crate) chunks: AtomicU64,
    pub(crate) retries: AtomicU64,
    pub(crate) duplicates: AtomicU64,
    pub(crate) flush_micros: AtomicU64,
}

/// A value alone on its cache line (128 bytes: two 64-byte lines, as the
/// adjacent-line prefetcher pairs them).
#[repr(align(128))]
pub(crate) struct OwnLine<T>(pub(crate) T);

impl<T> std::ops::Deref for OwnLine<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl Base {
    /// A writer named `who` whose entries are `entry`, with `settings`
    /// checked already and a new random id.
    pub(crate) fn new(who: &'static str, entry: &'static str, settings: WriterSettings) -> Self {
        Base {
            who,
            entry,
            settings,
            entries: AtomicUsize::new(0),
            flush_soon: Notify::new(),
            room: Notify::new(),
            closed: AtomicBool::new(false),
            writer: rand::random::<u64>(),
            accepted: OwnLine(AtomicU64::new(0)),
            written: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            chunks: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            flush_micros: AtomicU64::new(0),
        }
    }

    /// Takes room for `n` new entries at once, or fails
    /// ([`Error::Overloaded`]) when there is not that much.
    pub(crate) fn reserve_n(&self, n: usize) -> Result<()> {
        let max = self.settings.max_entries;
        self.entries
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |have| {
                (have + n <= max).then_some(have + n)
            })
            .map(|_| ())
            .map_err(|_| {
                Error::Overloaded(format!(
                    "the {} holds its maximum of {max} pending {} entries",
                    self.who, self.entry
                ))
            })
    }

    /// Counts a flush that took `entries` from the table, wrote `written`
    /// adds and took `took`, and gives the room back (only now, so memory
    /// stays bounded while a flush retries).
    pub(crate) fn flushed(&self, entries: usize, written: u64, took: Duration) {
        self.entries.fetch_sub(entries, Ordering::AcqRel);
        self.room.notify_waiters();
        self.written.fetch_add(written, Ordering::Relaxed);
        self.flushes.fetch_add(1, Ordering::Relaxed);
        self.flush_micros
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }

    /// Running figures: `accepted` and `written` count adds, `chunks` store
    /// calls that answered, `duplicates` writes the store found applied
    /// already (a retry after a lost reply), and `pending_entries` the
    /// entries waiting.
    pub(crate) fn stats(&self) -> WriterStats {
        WriterStats {
            accepted: self.accepted.load(Ordering::Relaxed),
            written: self.written.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            flushes: self.flushes.load(Ordering::Relaxed),
            chunks: self.chunks.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            duplicates: self.duplicates.load(Ordering::Relaxed),
            pending_entries: self.entries.load(Ordering::Relaxed) as u64,
            flush_micros: self.flush_micros.load(Ordering::Relaxed),
        }
    }
}

/// What a handle asks of the flusher.
pub(crate) enum Control {
    Flush(oneshot::Sender<()>),
    Close(oneshot::Sender<()>),
}

/// The sending end of a flusher's control channel, shared by a writer's
/// handles: when the last is dropped, the flusher flushes once more and
/// stops.
pub(crate) struct ControlHandle {
    tx: mpsc::UnboundedSender<Control>,
}

impl Drop for ControlHandle {
    fn drop(&mut self) {
        let (done, _) = oneshot::channel();
        let _ = self.tx.send(Control::Close(done));
    }
}

impl ControlHandle {
    /// A control channel: the handle and the flusher's receiving end.
    pub(crate) fn channel() -> (Self, mpsc::UnboundedReceiver<Control>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (ControlHandle { tx }, rx)
    }

    /// Asks for a flush now and waits until everything added before the
    /// call is written (or dropped as refused); `shut_down` is the error
    /// when the flusher has stopped taking requests.
    pub(crate) async fn flush(&self, base: &Base, shut_down: fn() -> Error) -> Result<()> {
        let (done, wait) = oneshot::channel();
        self.tx
            .send(Control::Flush(done))
            .map_err(|_| shut_down())?;
        wait.await
            .map_err(|_| Error::Overloaded(format!("the {} stopped", base.who)))
    }

    /// Stops taking adds, flushes what is pending (retrying an unavailable
    /// backend for up to [`SHUTDOWN_GRACE`]) and waits for the flusher to
    /// stop.
    pub(crate) async fn shutdown(&self, base: &Base) {
        base.closed.store(true, Ordering::Relaxed);
        let (done, wait) = oneshot::channel();
        if self.tx.send(Control::Close(done)).is_ok() {
            let _ = wait.await;
        }
    }
}

/// A writer's state as its [`Handle`] sees it: the [`Base`] in it.
pub(crate) trait WriterState: Send + Sync + 'static {
    fn base(&self) -> &Base;
}

/// A writer's handle: its state `I` (its [`Base`], its table, where it
/// writes), shared with its flusher, and the control channel, whose last
/// clone dropped makes the flusher flush once more and stop. Cheap to
/// clone; it derefs to the state.
pub(crate) struct Handle<I> {
    inner: Arc<I>,
    control: Arc<ControlHandle>,
}

impl<I> Clone for Handle<I> {
    fn clone(&self) -> Self {
        Handle {
            inner: self.inner.clone(),
            control: self.control.clone(),
        }
    }
}

impl<I> std::ops::Deref for Handle<I> {
    type Target = Arc<I>;

    fn deref(&self) -> &Arc<I> {
        &self.inner
    }
}

impl<I: WriterState> Handle<I> {
    /// Shares `inner` with the flusher `flusher` makes of it and of the
    /// control channel's receiving end, spawned on the current tokio
    /// runtime.
    pub(crate) fn start<F>(
        inner: I,
        flusher: impl FnOnce(Arc<I>, mpsc::UnboundedReceiver<Control>) -> F,
    ) -> Self
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let inner = Arc::new(inner);
        let (control, rx) = ControlHandle::channel();
        tokio::spawn(flusher(inner.clone(), rx));
        Handle {
            inner,
            control: Arc::new(control),
        }
    }

    /// The settings in force.
    pub(crate) fn settings(&self) -> &WriterSettings {
        &self.inner.base().settings
    }

    /// [`ControlHandle::flush`].
    pub(crate) async fn flush(&self, shut_down: fn() -> Error) -> Result<()> {
        self.control.flush(self.inner.base(), shut_down).await
    }

    /// [`ControlHandle::shutdown`].
    pub(crate) async fn shutdown(&self) {
        self.control.shutdown(self.inner.base()).await
    }

    /// Running figures ([`Base::stats`]).
    pub(crate) fn stats(&self) -> WriterStats {
        self.inner.base().stats()
    }

    /// The writer's `Debug`: a struct `name` with `fields` of its own, then
    /// its settings and running figures.
    pub(crate) fn debug(
        &self,
        f: &mut fmt::Formatter<'_>,
        name: &str,
        fields: &[(&str, &dyn fmt::Debug)],
    ) -> fmt::Result {
        let mut d = f.debug_struct(name);
        for (field, value) in fields {
            d.field(field, value);
        }
        d.field("settings", self.settings())
            .field("stats", &self.stats())
            .finish()
    }
}

/// A flusher's loop: calls `flush_once(state, deadline)`, which gives the
/// state back for the next flush, on the writer's interval, when a handle
/// asks, when the table fills, and once more when closed (with a deadline
/// [`SHUTDOWN_GRACE`] away, after which a flush stops retrying), then
/// answers everyone waiting and returns.
pub(crate) async fn run_flusher<S: Send, F: Future<Output = S>>(
    base: &Base,
    mut control: mpsc::UnboundedReceiver<Control>,
    mut state: S,
    mut flush_once: impl FnMut(S, Option<Instant>) -> F,
) {
    // The first tick one interval from now, not at once: a flush at start
    // has nothing to write, and one that ran late (a busy machine) would
    // take whatever the first adds left, before the interval a caller set.
    let every = base.settings.flush_interval;
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let mut waiter = None;
        let mut closing = None;
        tokio::select! {
            _ = ticker.tick() => {}
            _ = base.flush_soon.notified() => {}
            msg = control.recv() => match msg {
                Some(Control::Flush(done)) => waiter = Some(done),
                Some(Control::Close(done)) => closing = Some(done),
                None => closing = Some(oneshot::channel().0),
            },
        }
        let deadline = closing.as_ref().map(|_| Instant::now() + SHUTDOWN_GRACE);
        if closing.is_some() {
            base.closed.store(true, Ordering::Relaxed);
        }
        state = flush_once(state, deadline).await;
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
            tracing::debug!(writer = base.who, "flusher stopped");
            return;
        }
    }
}

/// Whether a failed write may succeed if sent again.
pub(crate) fn retryable(e: &Error) -> bool {
    e.is_unavailable() || matches!(e, Error::Backend(_))
}

/// The wait before each retry of a chunk: doubling from 20 ms to at most
/// 2 s, each wait drawn between half and all of it.
pub(crate) struct Backoff(Duration);

impl Backoff {
    pub(crate) fn new() -> Self {
        Backoff(RETRY_MIN)
    }

    /// How long the next wait is meant to be (for the log).
    pub(crate) fn next_ms(&self) -> u64 {
        self.0.as_millis() as u64
    }

    /// Waits, then doubles the next wait.
    pub(crate) async fn wait(&mut self) {
        let factor = 0.5 + rand::random::<f64>() * 0.5;
        tokio::time::sleep(self.0.mul_f64(factor)).await;
        self.0 = (self.0 * 2).min(RETRY_MAX);
    }
}

/// How many locks a writer's table is cut into.
const SHARDS: usize = 16;

/// A writer's table cut into [`SHARDS`] parts, each behind its own lock,
/// so that adds to different parts do not wait for each other.
pub(crate) struct Shards<T>(Box<[Mutex<T>]>);

impl<T: Default> Shards<T> {
    pub(crate) fn new() -> Self {
        Shards((0..SHARDS).map(|_| Mutex::new(T::default())).collect())
    }
}

impl<T> Shards<T> {
    /// The part a key hashes to.
    pub(crate) fn of<K: Hash + ?Sized>(key: &K) -> usize {
        (FxBuildHasher.hash_one(key) as usize) % SHARDS
    }

    /// Locks part `shard` (a poisoned lock is taken as it is: a panic
    /// elsewhere leaves each entry whole).
    pub(crate) fn lock(&self, shard: usize) -> MutexGuard<'_, T> {
        self.0[shard].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Locks every part in `parts` (a part per key, in any order, repeats
    /// allowed) in ascending order, as every caller does, so no two
    /// callers deadlock; returns each part's number with its guard, in
    /// that order (for a binary search by part).
    pub(crate) fn lock_all(&self, parts: &[usize]) -> Vec<(usize, MutexGuard<'_, T>)> {
        let mut wanted = parts.to_vec();
        wanted.sort_unstable();
        wanted.dedup();
        wanted.into_iter().map(|s| (s, self.lock(s))).collect()
    }

    /// Locks each part in turn, one at a time.
    pub(crate) fn each(&self) -> impl Iterator<Item = MutexGuard<'_, T>> {
        (0..self.0.len()).map(|s| self.lock(s))
    }

    /// Takes the entries of every part (its `table`), one part at a time,
    /// leaving each empty: what a flush writes.
    pub(crate) fn take_all<C>(&self, table: impl Fn(&mut T) -> &mut C) -> Vec<C::Item>
    where
        C: Default + IntoIterator,
    {
        let mut taken = Vec::new();
        for mut part in self.each() {
            taken.extend(std::mem::take(table(&mut part)));
        }
        taken
    }
}
