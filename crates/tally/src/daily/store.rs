//! The storage contract of daily statistics, at the level of the domain.
//!
//! A [`DailyStore`] adds views to an entity's day and all-time total in one
//! atomic step, dropping the entity's days that fell out of the retention
//! window in that same step (so no cleaner ever scans) while their views
//! stay in the total, reads days and totals, and lists the entities it
//! holds (for `tally migrate`). Implemented by SQLite and Redis (standalone
//! or cluster: an entity's keys share one hash tag). Input is validated
//! before a store is called.

use std::fmt;

use async_trait::async_trait;

use crate::clock::Timestamp;
use crate::daily::Day;
use crate::engine::{Applied, WriteSeq};
use crate::error::Result;
use crate::idempotency::Mark;
use crate::name::Name;

/// Views to add to one entity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DailyWrite {
    /// The entity (validated: no braces).
    pub entity: Name,
    /// The day the views happened.
    pub day: Day,
    /// How many (at least 1).
    pub count: i64,
    /// The oldest day kept: older stored days are dropped (their views
    /// still count toward the total), and views dated before it only count
    /// toward the total.
    pub floor: Day,
}

/// What a write left behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DailyWritten {
    /// The day's count after the write (0 when the day is outside the window).
    pub day_count: i64,
    /// The entity's all-time total after the write.
    pub total: i64,
    /// [`Applied::Duplicate`] when the write's mark was there already:
    /// nothing was added, and the counts are the stored ones.
    pub applied: Applied,
}

/// An entity a store holds, as [`DailyStore::list`] finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DailyHeld {
    /// The entity.
    pub entity: Name,
    /// The days it keeps a count of, oldest first (perhaps some older than
    /// the window that no write has dropped yet; none when only its total
    /// is left).
    pub days: Vec<Day>,
}

/// Storage for daily statistics. See the module docs for the contract.
#[async_trait]
pub trait DailyStore: Send + Sync + fmt::Debug + 'static {
    /// Applies each write atomically (per entity); `result[i]` is what
    /// `writes[i]` left. Fails with a bad-input error, writing nothing for
    /// that entity, when its total or day would overflow. With a `mark`
    /// (a keyed write), the mark is kept with the write and a write whose
    /// mark is kept already adds nothing: per entity on Redis (each
    /// entity's part of the call has its own mark key), for the whole batch
    /// on SQLite (one transaction).
    async fn incr(&self, writes: &[DailyWrite], mark: Option<&Mark>) -> Result<Vec<DailyWritten>>;

    /// Applies `writes` exactly once by the writer lane's sequence number
    /// (the aggregating writer's path, [`crate::daily::DailyWriter`]), as
    /// the engine's writes are ([`WriteSeq`]): the store keeps one record
    /// per (writer, lane), the last number applied, and a call whose
    /// number is not above it adds nothing and answers
    /// [`Applied::Duplicate`] with the stored counts. So the same writes
    /// sent again with the same number (after a lost reply) apply once.
    /// `result[i]` is what `writes[i]` did: an entity the store refuses
    /// (its total or a day would overflow) is answered with its bad-input
    /// error in its writes' places, writes nothing, and the others are
    /// applied all the same. `Err` (the backend unavailable, say) when
    /// nothing is known: send the same writes again with the same number.
    ///
    /// Redis sends one `daily_incr.lua` call (one per cluster slot of the
    /// entities, the lane's record in that slot); SQLite runs one
    /// transaction with the lane's record in `tally_writer`, stamped
    /// `now` (an idle lane's record is forgotten after 7 days, as on
    /// Redis).
    async fn incr_lane(
        &self,
        writes: &[DailyWrite],
        seq: WriteSeq,
        now: Timestamp,
    ) -> Result<Vec<Result<DailyWritten>>>;

    /// The stored counts of `days` (0 when absent), in the order asked.
    async fn days(&self, entity: &Name, days: &[Day]) -> Result<Vec<i64>>;

    /// The all-time total (0 for an unknown entity).
    async fn total(&self, entity: &Name) -> Result<i64>;

    /// Every entity the store holds (a kept day or a total), sorted by
    /// entity, with its stored days. The whole store in one answer (for
    /// `tally migrate`): SQLite reads its tables; Redis, which keeps no
    /// registry of entities, walks the keyspace with SCAN in pages (every
    /// master of a cluster), never KEYS.
    async fn list(&self) -> Result<Vec<DailyHeld>>;

    /// Checks that the backend answers.
    async fn ping(&self) -> Result<()>;
}
