//! The storage contract of counters, at the level of the domain operations.
//!
//! A [`CounterStore`] adds merged slice deltas (all or nothing), reads samples,
//! lists and deletes counters, and runs one cleaning pass. It is implemented
//! by the SQLite store and by the Redis store (both key layouts); the same
//! behaviour suite runs against each. Validation happened before a store is
//! called: names are valid, precisions configured, deltas never `i64::MIN`.

use std::fmt;

use async_trait::async_trait;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::clock::Timestamp;
use crate::counters::slice::{CounterWrite, cutoff, is_due};
use crate::error::Result;
use crate::name::Name;

/// One stored sample: the slice start and its count.
///
/// Serialized as a two-element array `[start, count]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sample {
    /// Slice start, Unix seconds.
    pub start: u64,
    /// The count in that slice.
    pub count: i64,
}

impl Serialize for Sample {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        (self.start, self.count).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Sample {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let (start, count) = <(u64, i64)>::deserialize(d)?;
        Ok(Sample { start, count })
    }
}

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

/// The place of a write in one writer's ordered stream, for exactly-once
/// retries.
///
/// A writer (e.g. one aggregator in one process) draws a random `writer` id
/// and numbers the writes of each `lane` 1, 2, 3...; a lane never sends write
/// n + 1 before write n was acknowledged. The store keeps, per (writer, lane),
/// the last number applied (per registry shard on a cluster), so its memory
/// is bounded by the number of writers, not of writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WriteSeq {
    /// The writer's random id.
    pub writer: u64,
    /// The lane within the writer.
    pub lane: u32,
    /// The write's number in its lane, from 1.
    pub seq: u64,
}

impl WriteSeq {
    /// `<writer hex>:<lane>`, the key of the lane's record.
    pub fn lane_id(&self) -> String {
        format!("{:016x}:{}", self.writer, self.lane)
    }
}

impl fmt::Display for WriteSeq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.lane_id(), self.seq)
    }
}

/// What applying a [`WriteBatch`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The deltas were added.
    Written,
    /// The batch's sequence number was already applied: nothing was added
    /// this time.
    Duplicate,
}

/// One cleaning pass's parameters: which precisions are due and their cutoffs.
#[derive(Clone, Debug)]
pub struct CleanJob {
    /// Pass number, counted from 0 (the first pass visits every precision).
    pub pass: u64,
    /// The instant the cutoffs are measured from.
    pub now: Timestamp,
    /// Samples kept per precision.
    pub samples: u64,
    /// Seconds between passes (for the visiting cadence).
    pub interval_secs: u64,
    /// Counters per round trip.
    pub batch: usize,
}

impl CleanJob {
    /// The cutoff for `precision` if it is due in this pass, else `None`.
    pub fn cutoff_for(&self, precision: u64) -> Option<i64> {
        is_due(self.pass, precision, self.interval_secs)
            .then(|| cutoff(self.now, self.samples, precision))
    }
}

/// What a cleaning pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CleanReport {
    /// Registry entries visited.
    pub scanned: u64,
    /// Samples removed.
    pub samples_removed: u64,
    /// Registry entries removed because their counter became empty.
    pub counters_removed: u64,
    /// Round trips to the backend (transactions, for SQLite).
    pub round_trips: u64,
}

impl CleanReport {
    /// Adds another report's figures to this one.
    pub fn add(&mut self, other: &CleanReport) {
        self.scanned += other.scanned;
        self.samples_removed += other.samples_removed;
        self.counters_removed += other.counters_removed;
        self.round_trips += other.round_trips;
    }
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
}
