//! The storage contract of the time-series store, at the level of the
//! domain: add counts, distinct values and item frequencies to buckets;
//! read them back per key and bucket; merge one key into another; delete
//! keys. Implemented by SQLite and Redis (standalone or cluster); the same
//! behaviour suite runs against each.
//!
//! The service has validated everything and resolved times into buckets
//! with their expiry: writes never target an expired bucket, and reads ask
//! only for buckets of one configured rollup. Data whose bucket expired is
//! never returned (Redis expires it; SQLite filters on `now` and drops
//! expired rows a bounded batch at a time during writes).

use std::fmt;

use async_trait::async_trait;

use crate::error::Result;
use crate::name::Name;
use crate::tsdb::rollup::Rollup;

/// Where one write lands: a key's bucket of one rollup.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cell {
    /// The model.
    pub model: Name,
    /// The key.
    pub key: Name,
    /// The rollup's bucket length, seconds.
    pub rollup: u64,
    /// The bucket start.
    pub bucket: u64,
    /// When the bucket expires (Unix seconds).
    pub expires: u64,
}

/// Add `delta` to a cell's count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountAdd {
    /// The cell.
    pub cell: Cell,
    /// What to add (merged per cell, positive).
    pub delta: i64,
}

/// Add distinct values to a cell's HyperLogLog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistinctAdd {
    /// The cell.
    pub cell: Cell,
    /// The values.
    pub values: Vec<String>,
}

/// Add item counts to a cell's most-frequent summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrequencyAdd {
    /// The cell.
    pub cell: Cell,
    /// Items and counts, each item once, in the order they are applied.
    pub items: Vec<(String, i64)>,
}

/// Buckets of one rollup, for a merge or a delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    /// The rollup.
    pub rollup: Rollup,
    /// Every bucket that may hold data.
    pub buckets: Vec<u64>,
}

/// Storage for the time-series store. See the module docs for the contract.
#[async_trait]
pub trait TsdbStore: Send + Sync + fmt::Debug + 'static {
    /// Adds counts, each (model, virtual shard) group atomically, in one
    /// round trip (per node). Fails with a bad-input error, writing nothing
    /// of a group, when a count would overflow.
    async fn add_counts(&self, adds: &[CountAdd]) -> Result<()>;

    /// Counts of `keys` in `buckets` of `rollup`: `result[k][b]`, 0 when
    /// absent. One round trip (per node).
    async fn counts(
        &self,
        model: &Name,
        keys: &[Name],
        rollup: u64,
        buckets: &[u64],
        now: u64,
    ) -> Result<Vec<Vec<i64>>>;

    /// Records distinct values.
    async fn add_distinct(&self, adds: &[DistinctAdd]) -> Result<()>;

    /// Estimated distinct values of each key in each bucket: `result[k][b]`.
    async fn distinct_counts(
        &self,
        model: &Name,
        keys: &[Name],
        rollup: u64,
        buckets: &[u64],
        now: u64,
    ) -> Result<Vec<Vec<u64>>>;

    /// Estimated distinct values of each key over all `buckets` (the union
    /// of its buckets): `result[k]`.
    async fn distinct_totals(
        &self,
        model: &Name,
        keys: &[Name],
        rollup: u64,
        buckets: &[u64],
        now: u64,
    ) -> Result<Vec<u64>>;

    /// Estimated distinct values over every key and bucket (the union).
    async fn distinct_union(
        &self,
        model: &Name,
        keys: &[Name],
        rollup: u64,
        buckets: &[u64],
        now: u64,
    ) -> Result<u64>;

    /// Adds item counts, keeping at most `capacity` items per cell.
    async fn add_frequencies(&self, adds: &[FrequencyAdd], capacity: usize) -> Result<()>;

    /// Every stored (item, count) of `key` in each of `buckets`, unsorted,
    /// not summed (an item appears once per bucket holding it).
    async fn frequencies(
        &self,
        model: &Name,
        key: &Name,
        rollup: u64,
        buckets: &[u64],
        now: u64,
    ) -> Result<Vec<(String, i64)>>;

    /// Moves everything of `from` into `into` (counts added, distinct sets
    /// unioned, summaries folded with `capacity`), with no moment at which a
    /// crash loses data, and leaves `from` empty.
    async fn merge(
        &self,
        model: &Name,
        into: &Name,
        from: &Name,
        spans: &[Span],
        capacity: usize,
        now: u64,
    ) -> Result<()>;

    /// Deletes every count, distinct set and summary of `keys`.
    async fn delete(&self, model: &Name, keys: &[Name], spans: &[Span]) -> Result<()>;

    /// Checks that the backend answers.
    async fn ping(&self) -> Result<()>;
}
