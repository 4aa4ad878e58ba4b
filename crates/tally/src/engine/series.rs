//! The service every kind of named series over one engine space shares:
//! [`SeriesService`] (validated batches written all or nothing or once per
//! idempotency key, one series read at several precisions, names listed by
//! prefix a page at a time, delete) and [`SeriesWriter`] (the engine's
//! aggregating writer over the same space).
//!
//! A kind brings only what makes it different, its [`Rules`]: the
//! operation a caller states (an observation, a gauge operation, a set
//! addition) and how one becomes the kind's delta. Statistics, gauges and
//! sets are `SeriesService<their rules>` under their own names
//! ([`crate::Stats`], [`crate::Gauges`], [`crate::Sets`]), with their own
//! reads (summaries, current values, unions) added in their modules; a new
//! kind is its rules and its reads. A kind whose slice reads as one plain
//! value (gauges, sets) says how in its [`PlainRules`] and reads its
//! slices with the service's `get`, `get_all` and `read`.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::clock::{Clock, SharedClock, SystemClock, Timestamp};
use crate::engine::plan::{self, Item};
use crate::engine::precision::check_precision_in;
use crate::engine::store::{
    Applied, Batch, BatchSink, SeriesList, SliceRead, SliceStore, Slices, Space,
};
use crate::engine::writer::{WriterSettings, WriterStats};
use crate::engine::{Kind, Value, Writer};
use crate::error::Result;
use crate::name::Name;

/// The most operations accepted in one batch, for every kind.
pub const MAX_BATCH: usize = 10_000;

/// The most names listed in one page, for every kind.
pub const MAX_PAGE: usize = 10_000;

/// A page of series names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    /// Names in name order.
    pub names: Vec<String>,
    /// Pass this to get the next page; `None` on the last page.
    pub next: Option<String>,
}

impl Page {
    /// The page of `limit` names out of `names`, listed with one more than
    /// `limit` asked for: when that one came, there is a next page.
    pub fn of(mut names: Vec<String>, limit: usize) -> Self {
        let next = if names.len() > limit {
            names.truncate(limit);
            names.last().cloned()
        } else {
            None
        };
        Page { names, next }
    }
}

/// One operation on a named series as a caller states it: the series, the
/// instant if it states one, and what such an operation is called in errors.
pub trait Operation: Sync {
    /// What an operation is called in errors ("observation").
    const WHAT: &'static str;
    /// The operation's series.
    fn name(&self) -> &str;
    /// Its instant, Unix seconds, if it states one (else now).
    fn at(&self) -> Option<f64>;
}

/// [`Operation`] for a type that states its series and instant as its
/// fields `name: String` and `at: Option<f64>`, as every kind's does:
/// `operation!(Observation, "observation");`.
macro_rules! operation {
    ($op:ty, $what:literal) => {
        impl $crate::engine::series::Operation for $op {
            const WHAT: &'static str = $what;

            fn name(&self) -> &str {
                &self.name
            }

            fn at(&self) -> Option<f64> {
                self.at
            }
        }
    };
}
pub(crate) use operation;

/// What a kind of series adds to [`SeriesService`]: the operation callers
/// state and how one becomes the kind's delta.
pub trait Rules: Send + Sync + fmt::Debug + 'static {
    /// One operation as a caller states it.
    type Op: Operation;
    /// The aggregating writer's name in `Debug` output.
    const WRITER: &'static str;
    /// Its delta, checked; errors name the series.
    fn delta(&self, op: &Self::Op) -> Result<Value>;
}

/// [`Rules`] of a kind whose space is made of precisions and samples
/// alone (gauges, sets): its service has the constructors
/// [`SeriesService::new`] and [`SeriesService::with_clock`], and the reads
/// [`SeriesService::get`], [`SeriesService::get_all`] and
/// [`SeriesService::read`], which show each stored slice as the kind's
/// [`PlainRules::Slice`].
pub trait PlainRules: Rules + Default {
    /// The space's id (Redis keys `{<prefix>:<shard>}:<id>:...`, SQLite
    /// tables `tally_<id>_*`).
    const SPACE: &'static str;
    /// The kind its slices hold.
    const KIND: Kind;
    /// One slice as the kind's reads show it.
    type Slice;
    /// The slice starting at `start` that holds the stored `value`; an
    /// error when the value is not one the kind can show.
    fn slice(start: u64, value: &Value) -> Result<Self::Slice>;
}

/// Every slice of one series at one precision, oldest first, each as its
/// kind shows it ([`PlainRules::Slice`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceSeries<S> {
    /// The precision, seconds.
    pub precision: u64,
    /// The slices, oldest first.
    pub slices: Vec<S>,
}

/// Named series of one kind at several precisions, over one engine space.
/// Cheap to clone.
pub struct SeriesService<R> {
    inner: Arc<Inner<R>>,
}

struct Inner<R> {
    store: Arc<dyn SliceStore>,
    /// A kind's own way into the store, if it has one (else batches go
    /// straight to the store).
    sink: Option<Arc<dyn BatchSink>>,
    space: Arc<Space>,
    precisions: Vec<u64>,
    clock: SharedClock,
    rules: R,
}

impl<R> Clone for SeriesService<R> {
    fn clone(&self) -> Self {
        SeriesService {
            inner: self.inner.clone(),
        }
    }
}

impl<R: fmt::Debug> fmt::Debug for SeriesService<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeriesService")
            .field("space", &self.inner.space)
            .field("rules", &self.inner.rules)
            .finish()
    }
}

impl<R: PlainRules> SeriesService<R> {
    /// The series on `store` at `precisions` (seconds), each keeping
    /// `samples` slices, on the system clock.
    pub fn new(store: Arc<dyn SliceStore>, precisions: &[u64], samples: u64) -> Result<Self> {
        Self::with_clock(store, precisions, samples, Arc::new(SystemClock))
    }

    /// The series on `store`, reading time from `clock`. The precisions
    /// and samples follow the space's rules ([`Space::new`]); the counters'
    /// cleaner trims them.
    pub fn with_clock(
        store: Arc<dyn SliceStore>,
        precisions: &[u64],
        samples: u64,
        clock: Arc<dyn Clock>,
    ) -> Result<Self> {
        let space = Space::cleaned(R::SPACE, R::KIND, precisions, samples)?;
        Ok(Self::from_parts(store, None, space, clock, R::default()))
    }
}

impl<R: PlainRules> SeriesService<R> {
    /// Every slice of `name` at one precision, oldest first.
    pub async fn get(&self, name: &str, precision: u64) -> Result<Vec<R::Slice>> {
        let mut all = self.read(name, Some(precision)).await?;
        Ok(all.pop().map(|s| s.slices).unwrap_or_default())
    }

    /// Every precision of a series, finest first, in one round trip.
    pub async fn get_all(&self, name: &str) -> Result<Vec<SliceSeries<R::Slice>>> {
        self.read(name, None).await
    }

    /// Every slice of one precision (or of every one when `None`, finest
    /// first), in one round trip.
    pub async fn read(
        &self,
        name: &str,
        precision: Option<u64>,
    ) -> Result<Vec<SliceSeries<R::Slice>>> {
        let one;
        let precisions = match precision {
            Some(p) => {
                check_precision_in(self.precisions(), p)?;
                one = [p];
                &one[..]
            }
            None => self.precisions(),
        };
        self.read_series(name, precisions)
            .await?
            .into_iter()
            .map(|(precision, kept)| {
                let slices = kept
                    .iter()
                    .map(|(start, v)| R::slice(*start, v))
                    .collect::<Result<_>>()?;
                Ok(SliceSeries { precision, slices })
            })
            .collect()
    }
}

impl<R: Rules> SeriesService<R> {
    /// The service over `space` on `store`, batches going through `sink`
    /// (the store itself when `None`).
    pub fn from_parts(
        store: Arc<dyn SliceStore>,
        sink: Option<Arc<dyn BatchSink>>,
        space: Space,
        clock: SharedClock,
        rules: R,
    ) -> Self {
        SeriesService {
            inner: Arc::new(Inner {
                sink,
                store,
                precisions: space.seconds(),
                space: Arc::new(space),
                clock,
                rules,
            }),
        }
    }

    /// The engine's space these series are.
    pub fn space(&self) -> &Arc<Space> {
        &self.inner.space
    }

    /// The store underneath.
    pub fn store(&self) -> &Arc<dyn SliceStore> {
        &self.inner.store
    }

    /// The clock in use.
    pub fn clock(&self) -> &SharedClock {
        &self.inner.clock
    }

    /// The precisions, finest first.
    pub fn precisions(&self) -> &[u64] {
        &self.inner.precisions
    }

    /// The kind's rules.
    pub fn rules(&self) -> &R {
        &self.inner.rules
    }

    /// Validates one operation, `now` standing in for a missing time: its
    /// series name, instant and delta.
    pub fn validate(&self, op: &R::Op, now: Timestamp) -> Result<(Name, Timestamp, Value)> {
        let name = Name::new(op.name())?;
        let at = plan::time(op.at(), now)?;
        Ok((name, at, self.inner.rules.delta(op)?))
    }

    /// Validates and composes operations into the engine's batch without
    /// writing it: one delta per (series, precision, slice), in the order
    /// given.
    pub fn prepare(&self, ops: &[R::Op]) -> Result<Batch> {
        plan::prepare(
            &self.inner.space,
            ops,
            MAX_BATCH,
            <R::Op as Operation>::WHAT,
            self.inner.clock.now(),
            |op, now| self.validate(op, now),
        )
    }

    /// Writes operations over any series in one round trip (per node on a
    /// cluster), all or nothing: if any is invalid, nothing is written.
    pub async fn write(&self, ops: &[R::Op]) -> Result<()> {
        let batch = self.prepare(ops)?;
        self.apply(&batch).await.map(|_| ())
    }

    /// [`SeriesService::write`] with an idempotency key: the batch is
    /// written with the key's write id, so the same key sent again is
    /// applied once ([`Applied::Duplicate`], nothing written), as
    /// [`crate::Counters::incr_many_once`]; on a Redis Cluster each node's
    /// part carries the id, so each part is applied once.
    pub async fn write_once(&self, key: &str, ops: &[R::Op]) -> Result<Applied> {
        crate::engine::keyed::check_key(key)?;
        let mut batch = self.prepare(ops)?;
        batch.seq = Some(crate::engine::keyed::write_seq(key));
        self.apply(&batch).await
    }

    /// Every slice of the series `name` at each of `precisions`, in that
    /// order, oldest first: one round trip.
    pub async fn read_series(&self, name: &str, precisions: &[u64]) -> Result<Vec<(u64, Slices)>> {
        let name = Name::new(name)?;
        let mut all = self
            .inner
            .store
            .read(SliceRead::new(&self.inner.space, &[name], precisions))
            .await?;
        let per = all.pop().unwrap_or_default();
        Ok(precisions.iter().copied().zip(per).collect())
    }

    /// Up to `limit` (1 to [`MAX_PAGE`]) series whose names start with
    /// `prefix` (empty: all), after the cursor `after`, in name order.
    pub async fn search(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Page> {
        crate::name::check_search(prefix, limit, MAX_PAGE)?;
        let names = self
            .inner
            .store
            .list(
                SeriesList::new(&self.inner.space, limit + 1)
                    .prefix(prefix)
                    .after(after),
            )
            .await?;
        Ok(Page::of(names, limit))
    }

    /// Deletes every precision of the series `name`; true if it held
    /// anything.
    pub async fn delete(&self, name: &str) -> Result<bool> {
        let name = Name::new(name)?;
        self.inner.store.delete(&self.inner.space, &name).await
    }

    /// Checks that the backend answers.
    pub async fn ping(&self) -> Result<()> {
        self.inner.store.ping().await
    }

    /// Applies `batch`: through the kind's own way in, else straight to
    /// the store.
    async fn apply(&self, batch: &Batch) -> Result<Applied> {
        match &self.inner.sink {
            Some(sink) => sink.apply_batch(batch).await,
            None => self.inner.store.apply(batch).await,
        }
    }

    /// The way batches go into the store (for the aggregating writer).
    fn sink(&self) -> Arc<dyn BatchSink> {
        match &self.inner.sink {
            Some(sink) => sink.clone(),
            None => Arc::new(self.inner.store.clone()),
        }
    }
}

/// The aggregating writer over a [`SeriesService`]'s space: operations
/// merged in process (in the order they came), written in batches, each
/// exactly once (the engine's [`Writer`]: its guarantees, bounds and
/// settings). Cheap to clone; the flusher stops (after a final flush) at
/// [`SeriesWriter::shutdown`] or when the last handle is dropped.
pub struct SeriesWriter<R> {
    service: SeriesService<R>,
    writer: Writer,
}

impl<R> Clone for SeriesWriter<R> {
    fn clone(&self) -> Self {
        SeriesWriter {
            service: self.service.clone(),
            writer: self.writer.clone(),
        }
    }
}

impl<R: Rules> fmt::Debug for SeriesWriter<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(R::WRITER)
            .field("settings", self.writer.settings())
            .field("stats", &self.writer.stats())
            .finish()
    }
}

impl<R: Rules> SeriesWriter<R> {
    /// Starts a writer into `service`'s store; spawns its flusher on the
    /// current tokio runtime.
    pub fn start(service: SeriesService<R>, settings: WriterSettings) -> Result<Self> {
        let writer = Writer::start(
            service.sink(),
            service.space().clone(),
            service.clock().clone(),
            settings,
        )?;
        Ok(SeriesWriter { service, writer })
    }

    /// The service written to.
    pub fn service(&self) -> &SeriesService<R> {
        &self.service
    }

    /// Takes one operation, waiting for room when full and so configured;
    /// an invalid one is refused with the rule it breaks (nothing taken).
    pub async fn take(&self, op: &R::Op) -> Result<()> {
        let (_, _, delta) = self.service.validate(op, self.service.clock().now())?;
        self.writer.add(op.name(), delta, op.at()).await
    }

    /// Takes one operation without ever waiting: fails with
    /// [`crate::Error::Overloaded`] when full.
    pub fn try_take(&self, op: &R::Op) -> Result<()> {
        let (_, _, delta) = self.service.validate(op, self.service.clock().now())?;
        self.writer.try_add(op.name(), delta, op.at())
    }

    /// Takes a batch, all or nothing: every operation is validated, and
    /// room for the whole batch is taken, before any is merged.
    pub async fn take_many(&self, ops: &[R::Op]) -> Result<()> {
        let items = self.items(ops)?;
        self.writer.add_many(&items).await
    }

    /// The engine's writer underneath (see [`crate::engine::writer::try_add_all`]).
    pub(crate) fn engine(&self) -> &Writer {
        &self.writer
    }

    /// Validates operations into the writer's items.
    pub(crate) fn items(&self, ops: &[R::Op]) -> Result<Vec<Item>> {
        let now = self.service.clock().now();
        ops.iter()
            .map(|op| {
                let (name, at, delta) = self.service.validate(op, now)?;
                Ok(Item { name, at, delta })
            })
            .collect()
    }

    /// Flushes now and waits until everything taken before this call is
    /// written (or dropped as refused).
    pub async fn flush(&self) -> Result<()> {
        self.writer.flush().await
    }

    /// Stops taking operations, flushes what is pending (retrying an
    /// unavailable backend for a while) and stops the flusher.
    pub async fn shutdown(&self) {
        self.writer.shutdown().await
    }

    /// Running figures (`accepted` and `written` count operations).
    pub fn stats(&self) -> WriterStats {
        self.writer.stats()
    }
}
