//! The storage contract of the buffer, at the level of the domain operations.
//!
//! A [`BufferStore`] keeps pending row changes and flush claims. Its
//! invariant, on every backend: each acknowledged change is, at any moment,
//! in exactly one place: pending, or inside exactly one claim (until that
//! claim is released after its batch is in SQL). Every method is one atomic
//! step of the backend (one Lua call or one SQLite transaction), so a crash
//! between two calls leaves a consistent state. A row is in at most one
//! live claim at a time, so batches of one row reach SQL in order and its
//! last-write values are never overwritten by older ones.

use std::fmt;

use async_trait::async_trait;
use serde::Serialize;

use super::row::{BatchId, Claim, RowDelta, RowKey, RowUpdate};
use crate::engine::Applied;
use crate::error::Result;
use crate::idempotency::Mark;

/// The backlog of a buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BufferStats {
    /// Rows with pending changes not yet claimed.
    pub pending_rows: u64,
    /// When the oldest pending change arrived (Unix ms), if any.
    pub oldest_pending_ms: Option<u64>,
    /// Claims not yet released (being flushed, or left by a dead flusher).
    pub claims: u64,
    /// Claims whose lease has expired (left by a dead or stuck flusher).
    pub expired_claims: u64,
}

/// A claim to make ([`BufferStore::claim`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewClaim {
    /// The new claim's batch id.
    pub batch: BatchId,
    /// The most rows it takes.
    pub max_rows: usize,
    /// When its lease ends, Unix ms.
    pub lease_end_ms: u64,
}

/// Storage of pending changes and claims. See the module docs.
#[async_trait]
pub trait BufferStore: Send + Sync + fmt::Debug + 'static {
    /// Merges `update` into the row's pending changes (all or nothing: an
    /// overflowing delta writes nothing) and marks the row pending since
    /// `now_ms` if it was not. With a `mark` (a keyed write) the mark is
    /// kept with the change, and a change whose mark is kept already merges
    /// nothing ([`Applied::Duplicate`]).
    async fn incr(&self, update: &RowUpdate, now_ms: u64, mark: Option<&Mark>) -> Result<Applied>;

    /// Atomically moves up to `new.max_rows` pending rows (oldest first,
    /// skipping rows in a live claim) into a new claim `new.batch` whose
    /// lease ends at `new.lease_end_ms`. `None` when nothing is pending.
    async fn claim(&self, new: NewClaim) -> Result<Option<Claim>>;

    /// Takes over up to `max` claims whose lease ended at or before `now_ms`,
    /// renewing each lease to `now_ms + lease_ms` atomically (so each goes to
    /// one caller), and returns them.
    async fn take_over(&self, now_ms: u64, lease_ms: u64, max: usize) -> Result<Vec<Claim>>;

    /// Deletes a claim (its batch is in SQL). Idempotent.
    async fn release(&self, claim: &Claim) -> Result<()>;

    /// The row's changes not yet released: pending ones (`None`) and those
    /// inside a claim (`Some(batch)`).
    async fn pending(&self, row: &RowKey) -> Result<Vec<(Option<BatchId>, RowDelta)>>;

    /// The backlog, with claims expired at `now_ms` counted apart.
    async fn stats(&self, now_ms: u64) -> Result<BufferStats>;
}
