//! The storage contract of the time-series store, at the level of the
//! domain: merge deltas of the engine's kinds (sums, distinct values, item
//! counts: [`Value`]) into buckets, one write path for every kind; read
//! them back per key and bucket; merge one key into another; delete keys;
//! list what is held (for `tally migrate`). Implemented by SQLite and
//! Redis (standalone or cluster); the same behaviour suite runs against
//! each.
//!
//! The service has validated everything and resolved times into buckets
//! with their expiry: writes never target an expired bucket, and reads ask
//! only for buckets of one configured rollup. Data whose bucket expired is
//! never returned (Redis expires it; SQLite filters on `now` and drops
//! expired rows a bounded batch at a time during writes).

use std::fmt;

use async_trait::async_trait;

use crate::engine::Precision;
use crate::engine::{Applied, Kind, Value, read};
use crate::error::Result;
use crate::idempotency::Mark;
use crate::name::Name;

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

/// Merge `delta` into a cell: a sum ([`Value::Sum`], positive), distinct
/// values ([`Value::Distinct`], at most [`SET_CAP`] raw values, which a
/// Redis store PFADDs, or a copy's registers, which it PFMERGEs) or item
/// counts ([`Value::Top`], folded into the cell's bounded summary with
/// [`TopValue::fold`]).
///
/// [`SET_CAP`]: crate::engine::kinds::distinct::SET_CAP
/// [`TopValue::fold`]: crate::engine::kinds::TopValue::fold
#[derive(Clone, Debug, PartialEq)]
pub struct CellAdd {
    /// The cell.
    pub cell: Cell,
    /// What to merge into it.
    pub delta: Value,
}

/// What a read covers: keys of one model, buckets of one rollup, and the
/// instant that decides what has expired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// The model.
    pub model: Name,
    /// The keys, in the order their results come back.
    pub keys: Vec<Name>,
    /// The rollup's bucket length, seconds.
    pub rollup: u64,
    /// The buckets, oldest first (at least one).
    pub buckets: Vec<u64>,
    /// Now, Unix seconds.
    pub now: u64,
}

/// Buckets of one precision, for a merge or a delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    /// The precision.
    pub precision: Precision,
    /// Every bucket that may hold data.
    pub buckets: Vec<u64>,
}

/// One key's data moved into another's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merge {
    /// The model.
    pub model: Name,
    /// The key merged into.
    pub into: Name,
    /// The key merged away (left empty).
    pub from: Name,
    /// Every precision's buckets that may hold data.
    pub spans: Vec<Span>,
    /// Items a merged summary keeps.
    pub capacity: usize,
}

/// What a store holds of one key of a model: values of one kind at one
/// rollup (in some of its buckets), as [`TsdbStore::list`] finds them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Held {
    /// The model.
    pub model: Name,
    /// The key.
    pub key: Name,
    /// The rollup's bucket length, seconds.
    pub rollup: u64,
    /// Counts ([`Kind::Sum`]), distinct values or item counts.
    pub kind: Kind,
}

/// Sorts `held` by model, key, rollup and kind, without repeats (the order
/// every store's listing has).
pub fn sort_held(held: &mut Vec<Held>) {
    held.sort_by(|a, b| {
        (&a.model, &a.key, a.rollup, a.kind.code()).cmp(&(
            &b.model,
            &b.key,
            b.rollup,
            b.kind.code(),
        ))
    });
    held.dedup();
}

/// Storage for the time-series store. See the module docs for the contract.
#[async_trait]
pub trait TsdbStore: Send + Sync + fmt::Debug + 'static {
    /// Merges each delta into its cell, each (model, virtual shard) group
    /// atomically, in one round trip (per node); `capacity` bounds the
    /// items a cell's summary keeps. Fails with a bad-input error, writing
    /// nothing of a group, when a count would overflow. With a `mark` (a
    /// keyed write) each group keeps the mark with its deltas, and a group
    /// whose mark is kept already merges nothing: [`Applied::Duplicate`]
    /// when no group merged anything (on SQLite the whole call is one
    /// transaction and one mark).
    async fn add(&self, adds: &[CellAdd], capacity: usize, mark: Option<&Mark>) -> Result<Applied>;

    /// The stored value of each key in each bucket, `result[k][b]`, the
    /// kind's identity when absent: sums ([`Kind::Sum`]) and item counts
    /// ([`Kind::Top`], a cell's summary as stored) and distinct values (a
    /// HyperLogLog's registers) on every store. One round trip (per node).
    async fn read(&self, kind: Kind, window: &Window) -> Result<Vec<Vec<Value>>>;

    /// Estimated distinct values of each key in each bucket: `result[k][b]`.
    ///
    /// By default estimated from [`TsdbStore::read`]; Redis counts with
    /// PFCOUNT on the server instead (a bucket's HyperLogLog is up to 12 KiB
    /// that PFCOUNT answers as one integer).
    async fn distinct_counts(&self, window: &Window) -> Result<Vec<Vec<u64>>> {
        let read = self.read(Kind::Distinct, window).await?;
        Ok(read
            .iter()
            .map(|per| per.iter().map(estimate).collect())
            .collect())
    }

    /// Estimated distinct values of each key over all the buckets (the
    /// union of its buckets): `result[k]`. By default from
    /// [`TsdbStore::read`]; Redis runs PFCOUNT over the keys.
    async fn distinct_totals(&self, window: &Window) -> Result<Vec<u64>> {
        let read = self.read(Kind::Distinct, window).await?;
        read.iter().map(|per| union(per.iter())).collect()
    }

    /// Estimated distinct values over every key and bucket (the union). By
    /// default from [`TsdbStore::read`]; Redis merges on the server.
    async fn distinct_union(&self, window: &Window) -> Result<u64> {
        let read = self.read(Kind::Distinct, window).await?;
        union(read.iter().flatten())
    }

    /// Moves everything of `job.from` into `job.into` (counts added,
    /// distinct sets unioned, summaries folded with `job.capacity`), with no
    /// moment at which a crash loses data, and leaves `from` empty.
    async fn merge(&self, job: &Merge) -> Result<()>;

    /// Deletes every count, distinct set and summary of `keys`.
    async fn delete(&self, model: &Name, keys: &[Name], spans: &[Span]) -> Result<()>;

    /// Everything the store holds that has not expired at `now` (Unix
    /// seconds): each (model, key, rollup, kind) with data in some bucket,
    /// sorted ([`sort_held`]). The whole store in one answer (for
    /// `tally migrate`): SQLite reads its tables; Redis, which keeps no
    /// registry here, walks the keyspace with SCAN in pages (every master
    /// of a cluster), never KEYS.
    async fn list(&self, now: u64) -> Result<Vec<Held>>;

    /// Checks that the backend answers.
    async fn ping(&self) -> Result<()>;
}

/// The estimate of a distinct value (0 for any other kind).
fn estimate(v: &Value) -> u64 {
    match v {
        Value::Distinct(d) => d.estimate(),
        _ => 0,
    }
}

/// The estimate of the union of distinct values.
fn union<'a>(values: impl Iterator<Item = &'a Value>) -> Result<u64> {
    Ok(estimate(&read::merge_values(Kind::Distinct, values)?))
}
