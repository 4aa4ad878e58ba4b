//! Daily statistics in SQLite.
//!
//! `tally_daily(entity, day, count)` holds one row per stored day (`day` as
//! the article's YYYYMMDD integer); `tally_daily_total(entity, total, first)`
//! the running total and the oldest day that may be stored. A write is one
//! transaction that adds to both and, when `first` fell behind the window,
//! deletes that entity's old rows (an index range). Each write transaction
//! also drops up to [`SWEEP`] rows of any entity that left the window, so
//! abandoned entities do not keep old days forever; no cleaner runs. A
//! keyed batch's transaction also checks and records its mark
//! ([`super::once`]): a repeat adds nothing and reads the counts.

use std::collections::HashMap;

use async_trait::async_trait;
use rusqlite::{OptionalExtension, Transaction, params};

use super::{Sqlite, once};
use crate::clock::Timestamp;
use crate::daily::{DailyHeld, DailyStore, DailyWrite, DailyWritten, Day};
use crate::engine::kinds::sum::add_stored;
use crate::engine::{Applied, WriteSeq};
use crate::error::{Error, Result};
use crate::idempotency::Mark;
use crate::name::Name;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tally_daily (
    entity TEXT NOT NULL,
    day INTEGER NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (entity, day)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tally_daily_by_day ON tally_daily (day);
CREATE TABLE IF NOT EXISTS tally_daily_total (
    entity TEXT PRIMARY KEY,
    total INTEGER NOT NULL,
    first INTEGER
) WITHOUT ROWID;
";

/// Rows of other entities dropped per write transaction, at most.
pub const SWEEP: i64 = 100;

/// Daily statistics stored in a [`Sqlite`] database.
#[derive(Clone, Debug)]
pub struct SqliteDailyStore {
    db: Sqlite,
}

impl SqliteDailyStore {
    /// Creates the tables if needed.
    pub async fn new(db: Sqlite) -> Result<Self> {
        db.create_tables([SCHEMA, super::engine::WRITERS, once::SCHEMA].concat())
            .await?;
        Ok(SqliteDailyStore { db })
    }
}

fn incr_in(tx: &Transaction<'_>, w: &DailyWrite) -> Result<DailyWritten> {
    let entity = w.entity.as_str();
    let (day, floor) = (i64::from(w.day.yyyymmdd()), i64::from(w.floor.yyyymmdd()));
    let row: Option<(i64, Option<i64>)> = tx
        .prepare_cached("SELECT total, first FROM tally_daily_total WHERE entity = ?1")?
        .query_row([entity], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let (total, mut first) = row.unwrap_or((0, None));
    let overflow = |what: &str| {
        Error::InvalidCount(format!(
            "adding {} views to entity {entity:?} would overflow its {what}; nothing was written",
            w.count
        ))
    };
    let total = add_stored(total, w.count).ok_or_else(|| overflow("total"))?;
    let mut day_count = 0;
    if day >= floor {
        let old = stored_day(tx, entity, day)?;
        day_count = add_stored(old, w.count).ok_or_else(|| overflow("day"))?;
        tx.prepare_cached(
            "INSERT INTO tally_daily (entity, day, count) VALUES (?1, ?2, ?3)
             ON CONFLICT (entity, day) DO UPDATE SET count = excluded.count",
        )?
        .execute(params![entity, day, day_count])?;
    }
    if first.is_some_and(|f| f < floor) {
        tx.prepare_cached("DELETE FROM tally_daily WHERE entity = ?1 AND day < ?2")?
            .execute(params![entity, floor])?;
        first = tx
            .prepare_cached("SELECT MIN(day) FROM tally_daily WHERE entity = ?1")?
            .query_row([entity], |r| r.get(0))?;
    }
    if day >= floor && first.is_none_or(|f| day < f) {
        first = Some(day);
    }
    tx.prepare_cached(
        "INSERT INTO tally_daily_total (entity, total, first) VALUES (?1, ?2, ?3)
         ON CONFLICT (entity) DO UPDATE SET total = excluded.total, first = excluded.first",
    )?
    .execute(params![entity, total, first])?;
    Ok(DailyWritten {
        day_count,
        total,
        applied: Applied::Written,
    })
}

/// Drops up to [`SWEEP`] rows of any entity older than `floor`.
fn sweep(tx: &Transaction<'_>, floor: Day) -> Result<()> {
    tx.prepare_cached(
        "DELETE FROM tally_daily WHERE (entity, day) IN
         (SELECT entity, day FROM tally_daily WHERE day < ?1 LIMIT ?2)",
    )?
    .execute(params![i64::from(floor.yyyymmdd()), SWEEP])?;
    Ok(())
}

/// The stored count of `entity`'s `day` (0 when absent).
fn stored_day(tx: &Transaction<'_>, entity: &str, day: i64) -> Result<i64> {
    Ok(tx
        .prepare_cached("SELECT count FROM tally_daily WHERE entity = ?1 AND day = ?2")?
        .query_row(params![entity, day], |r| r.get(0))
        .optional()?
        .unwrap_or(0))
}

/// What `w` would answer without adding: the stored counts (a repeated
/// keyed write).
fn current_in(tx: &Transaction<'_>, w: &DailyWrite) -> Result<DailyWritten> {
    let entity = w.entity.as_str();
    let (day, floor) = (i64::from(w.day.yyyymmdd()), i64::from(w.floor.yyyymmdd()));
    let total = tx
        .prepare_cached("SELECT total FROM tally_daily_total WHERE entity = ?1")?
        .query_row([entity], |r| r.get(0))
        .optional()?
        .unwrap_or(0);
    let day_count = if day >= floor {
        stored_day(tx, entity, day)?
    } else {
        0
    };
    Ok(DailyWritten {
        day_count,
        total,
        applied: Applied::Duplicate,
    })
}

#[async_trait]
impl DailyStore for SqliteDailyStore {
    async fn incr(&self, writes: &[DailyWrite], mark: Option<&Mark>) -> Result<Vec<DailyWritten>> {
        let writes = writes.to_vec();
        let mark = mark.copied();
        self.db
            .write(move |tx| {
                if !once::first_time(tx, "daily", mark.as_ref())? {
                    return writes.iter().map(|w| current_in(tx, w)).collect();
                }
                let out = writes
                    .iter()
                    .map(|w| incr_in(tx, w))
                    .collect::<Result<Vec<_>>>()?;
                if let Some(floor) = writes.iter().map(|w| w.floor).max() {
                    sweep(tx, floor)?;
                }
                Ok(out)
            })
            .await
    }

    /// One transaction: the lane's record in `tally_writer` (the
    /// engine's table, under a `daily:` lane id) checked and advanced, and
    /// each entity's writes in a savepoint of their own, so a refused
    /// entity is rolled back alone.
    async fn incr_lane(
        &self,
        writes: &[DailyWrite],
        seq: WriteSeq,
        now: Timestamp,
    ) -> Result<Vec<Result<DailyWritten>>> {
        let writes = writes.to_vec();
        let now = now.whole_secs() as i64;
        self.db
            .write(move |tx| {
                let lane = format!("daily:{}", seq.lane_id());
                let last: Option<i64> = tx
                    .prepare_cached("SELECT seq FROM tally_writer WHERE lane = ?1")?
                    .query_row([&lane], |r| r.get(0))
                    .optional()?;
                if last.is_some_and(|last| seq.seq as i64 <= last) {
                    return writes.iter().map(|w| current_in(tx, w).map(Ok)).collect();
                }
                tx.prepare_cached(
                    "INSERT INTO tally_writer (lane, seq, at) VALUES (?1, ?2, ?3)
                     ON CONFLICT (lane) DO UPDATE SET seq = excluded.seq, at = excluded.at",
                )?
                .execute(params![lane, seq.seq as i64, now])?;
                // Each entity's writes together, in first-seen order.
                let mut groups: Vec<Vec<usize>> = Vec::new();
                let mut index: HashMap<&Name, usize> = HashMap::new();
                for (i, w) in writes.iter().enumerate() {
                    let g = *index.entry(&w.entity).or_insert_with(|| {
                        groups.push(Vec::new());
                        groups.len() - 1
                    });
                    groups[g].push(i);
                }
                let mut out: Vec<Option<Result<DailyWritten>>> =
                    (0..writes.len()).map(|_| None).collect();
                for mine in groups {
                    tx.execute_batch("SAVEPOINT tally_daily_entity")?;
                    let done = mine
                        .iter()
                        .map(|&i| incr_in(tx, &writes[i]))
                        .collect::<Result<Vec<_>>>();
                    match done {
                        Ok(done) => {
                            tx.execute_batch("RELEASE tally_daily_entity")?;
                            for (&i, w) in mine.iter().zip(done) {
                                out[i] = Some(Ok(w));
                            }
                        }
                        // Refused (an overflow): rolled back alone,
                        // answered in its writes' places.
                        Err(e) if e.is_bad_input() => {
                            tx.execute_batch(
                                "ROLLBACK TO tally_daily_entity; RELEASE tally_daily_entity",
                            )?;
                            let message = match &e {
                                Error::InvalidCount(m) => m.clone(),
                                other => other.to_string(),
                            };
                            for &i in &mine {
                                out[i] = Some(Err(Error::InvalidCount(message.clone())));
                            }
                        }
                        Err(e) => return Err(e),
                    }
                }
                if let Some(floor) = writes.iter().map(|w| w.floor).max() {
                    sweep(tx, floor)?;
                }
                Ok(out
                    .into_iter()
                    .map(|o| o.expect("every write answered"))
                    .collect())
            })
            .await
    }

    async fn days(&self, entity: &Name, days: &[Day]) -> Result<Vec<i64>> {
        let entity = entity.clone();
        let days = days.to_vec();
        self.db
            .read_sized(days.len() as u64, move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT count FROM tally_daily WHERE entity = ?1 AND day = ?2",
                )?;
                days.iter()
                    .map(|d| {
                        Ok(stmt
                            .query_row(params![entity.as_str(), i64::from(d.yyyymmdd())], |r| {
                                r.get(0)
                            })
                            .optional()?
                            .unwrap_or(0))
                    })
                    .collect()
            })
            .await
    }

    async fn total(&self, entity: &Name) -> Result<i64> {
        let entity = entity.clone();
        self.db
            .read_small(move |conn| {
                Ok(conn
                    .prepare_cached("SELECT total FROM tally_daily_total WHERE entity = ?1")?
                    .query_row([entity.as_str()], |r| r.get(0))
                    .optional()?
                    .unwrap_or(0))
            })
            .await
    }

    async fn list(&self) -> Result<Vec<DailyHeld>> {
        self.db
            .read(|conn| {
                let mut held: Vec<DailyHeld> = Vec::new();
                let mut stmt = conn.prepare_cached(
                    "SELECT entity, NULL FROM tally_daily_total
                     UNION ALL SELECT entity, day FROM tally_daily
                     ORDER BY 1, 2",
                )?;
                let mut rows = stmt.query([])?;
                while let Some(row) = rows.next()? {
                    let entity: String = row.get(0)?;
                    if held.last().is_none_or(|h| h.entity.as_str() != entity) {
                        held.push(DailyHeld {
                            entity: Name::new(entity)?,
                            days: Vec::new(),
                        });
                    }
                    if let Some(day) = row.get::<_, Option<i64>>(1)? {
                        let day = u32::try_from(day).map_err(|_| {
                            Error::Corrupt(format!("tally_daily holds the day {day}"))
                        })?;
                        let last = held.last_mut().expect("pushed above");
                        last.days.push(Day::from_yyyymmdd(day)?);
                    }
                }
                Ok(held)
            })
            .await
    }

    async fn ping(&self) -> Result<()> {
        self.db.ping().await
    }
}
