//! The storage contract of counters, at the level of the domain operations.
//!
//! A [`CounterStore`] adds merged slice deltas (all or nothing), reads samples,
//! lists and deletes counters, and runs one cleaning pass. Tally's one
//! implementation is [`SliceCounterStore`]: the counters' space of the slice
//! engine's store ([`crate::engine::SliceStore`], implemented once per
//! backend and key layout), which keeps the layouts counters always had. The
//! write id, outcome and cleaning types are the engine's, re-exported here.
//! Validation happened before a store is called: names are valid,
//! precisions configured, deltas never `i64::MIN`.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use crate::counters::slice::CounterWrite;
use crate::engine::read::Sample;
use crate::engine::store::map_reads;
use crate::engine::{Batch, BatchSink, SliceSel, SliceStore, Space};
use crate::error::Result;
use crate::name::Name;

pub use crate::engine::store::{Applied, CleanJob, CleanReport, WriteSeq};

/// A write handed to a store: merged deltas for one or more counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    /// Per counter, its deltas; counters in name order, each at most once.
    pub counters: Vec<CounterWrite>,
    /// When set, the store records this sequence number atomically with the
    /// writes, and applies a batch whose number is not above the last one
    /// recorded for its lane as a no-op: a retried write is applied once.
    pub seq: Option<WriteSeq>,
}

/// Storage for counters. See the module docs for the contract.
#[async_trait]
pub trait CounterStore: Send + Sync + fmt::Debug + 'static {
    /// Adds every delta of `batch`, all or nothing, and registers each counter.
    ///
    /// Fails with [`crate::Error::Overflow`] (writing nothing) when a stored
    /// count would leave the 64-bit range.
    async fn apply(&self, batch: &WriteBatch) -> Result<Applied>;

    /// The samples of each named counter at each precision, oldest first:
    /// `result[i][j]` belongs to `names[i]` at `precisions[j]`. One round trip.
    async fn samples(&self, names: &[Name], precisions: &[u64]) -> Result<Vec<Vec<Vec<Sample>>>>;

    /// Up to `limit` counter names starting with `prefix` (empty: all),
    /// after `after` (exclusive), in name (byte) order.
    async fn list(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Vec<String>>;

    /// Deletes every precision of the counter; true if it held anything.
    async fn delete(&self, name: &Name, precisions: &[u64]) -> Result<bool>;

    /// Runs one cleaning pass over every registered counter.
    ///
    /// Removes due slices at or before their cutoff; drops a counter from the
    /// registry only when, atomically with that check, it holds no data.
    async fn clean(&self, job: &CleanJob, precisions: &[u64]) -> Result<CleanReport>;

    /// Checks that the backend answers.
    async fn ping(&self) -> Result<()>;

    /// This store for counters that keep `samples` slices per precision
    /// ([`crate::Counters`] binds its store so): a store whose retention is
    /// Redis's expiry (the `expiring` layout) needs it to write, read and
    /// delete; the others ignore it.
    fn keeping(&self, samples: u64) -> Arc<dyn CounterStore>;

    /// The engine's store this store writes through (the Graphite API reads
    /// counters from it as it reads every other space).
    fn slice_store(&self) -> Arc<dyn SliceStore>;

    /// Applies a batch in the engine's form, as [`CounterStore::apply`]
    /// does (the service's own writes and its aggregating writer's come
    /// this way). The default converts it to a [`WriteBatch`]; a store over
    /// the engine passes it straight on.
    async fn apply_batch(&self, batch: &Batch) -> Result<Applied> {
        let counters = batch
            .writes
            .iter()
            .map(|w| CounterWrite::from_series(w.clone()))
            .collect::<Result<Vec<_>>>()?;
        self.apply(&WriteBatch {
            counters,
            seq: batch.seq,
        })
        .await
    }
}

/// Counters as the counters' space of a slice engine store.
#[derive(Clone, Debug)]
pub struct SliceCounterStore {
    slices: Arc<dyn SliceStore>,
    /// Slices kept per precision, once bound ([`CounterStore::keeping`]);
    /// 0 before.
    samples: u64,
}

impl SliceCounterStore {
    /// Counters on `slices`.
    pub fn new(slices: Arc<dyn SliceStore>) -> Self {
        SliceCounterStore { slices, samples: 0 }
    }

    /// The counters' space over `precisions`, keeping the bound number of
    /// slices each.
    fn space(&self, precisions: &[u64]) -> Space {
        Space::counters(precisions, self.samples)
    }

    /// The engine's store underneath.
    pub fn slices(&self) -> &Arc<dyn SliceStore> {
        &self.slices
    }
}

#[async_trait]
impl CounterStore for SliceCounterStore {
    async fn apply(&self, batch: &WriteBatch) -> Result<Applied> {
        let mut precisions: Vec<u64> = batch
            .counters
            .iter()
            .flat_map(|c| c.deltas.iter().map(|d| d.precision))
            .collect();
        precisions.sort_unstable();
        precisions.dedup();
        let batch = Batch {
            space: Arc::new(self.space(&precisions)),
            writes: batch.counters.iter().map(CounterWrite::to_series).collect(),
            seq: batch.seq,
        };
        self.slices.apply(&batch).await
    }

    async fn apply_batch(&self, batch: &Batch) -> Result<Applied> {
        self.slices.apply(batch).await
    }

    async fn samples(&self, names: &[Name], precisions: &[u64]) -> Result<Vec<Vec<Vec<Sample>>>> {
        let all = self
            .slices
            .read_sums(&self.space(precisions), names, precisions, SliceSel::All)
            .await?;
        Ok(map_reads(all, |start, count| Some(Sample { start, count })))
    }

    async fn list(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Vec<String>> {
        self.slices
            .list(&self.space(&[]), prefix, after, limit)
            .await
    }

    async fn delete(&self, name: &Name, precisions: &[u64]) -> Result<bool> {
        self.slices.delete(&self.space(precisions), name).await
    }

    async fn clean(&self, job: &CleanJob, precisions: &[u64]) -> Result<CleanReport> {
        self.slices
            .clean(&Space::counters(precisions, job.samples), job)
            .await
    }

    async fn ping(&self) -> Result<()> {
        self.slices.ping().await
    }

    fn slice_store(&self) -> Arc<dyn SliceStore> {
        self.slices.clone()
    }

    fn keeping(&self, samples: u64) -> Arc<dyn CounterStore> {
        Arc::new(SliceCounterStore {
            slices: self.slices.clone(),
            samples,
        })
    }
}

/// The aggregating writer's way into a [`CounterStore`].
pub(crate) struct CounterSink(pub(crate) Arc<dyn CounterStore>);

#[async_trait]
impl BatchSink for CounterSink {
    async fn apply_batch(&self, batch: &Batch) -> Result<Applied> {
        self.0.apply_batch(batch).await
    }
}
