//! Counters in SQLite: a registry table and one row per stored sample.
//!
//! `tally_counter(id, name)` is the registry (names in binary order, the same
//! order as Redis's lexicographic ranges); `tally_sample(counter_id,
//! precision, slice, count)` holds samples, keyed for per-counter range scans.
//! Overflow is checked in Rust inside the write transaction, before anything
//! is stored, because SQLite would silently turn an overflowing sum into a
//! float. `tally_writer` records each writer lane's last sequence number for
//! exactly-once retries.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, Transaction, params};

use super::Sqlite;
use crate::clock::SharedClock;
use crate::counters::store::{Applied, CleanJob, CleanReport, CounterStore, Sample, WriteBatch};
use crate::error::{Error, Result};
use crate::name::Name;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tally_counter (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS tally_sample (
    counter_id INTEGER NOT NULL,
    precision INTEGER NOT NULL,
    slice INTEGER NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (counter_id, precision, slice)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tally_writer (
    lane TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    at INTEGER NOT NULL
) WITHOUT ROWID;
";

/// How long a writer lane's last sequence number is remembered after its
/// last write.
pub const WRITER_TTL_SECS: u64 = 7 * 24 * 3600;

/// Counters stored in a [`Sqlite`] database.
#[derive(Clone, Debug)]
pub struct SqliteCounterStore {
    db: Sqlite,
    clock: SharedClock,
}

impl SqliteCounterStore {
    /// Creates the tables if needed. `clock` dates write ids (for expiry).
    pub async fn new(db: Sqlite, clock: SharedClock) -> Result<Self> {
        db.with_writer(|conn| Ok(conn.execute_batch(SCHEMA)?))
            .await?;
        Ok(SqliteCounterStore { db, clock })
    }

    /// The database underneath.
    pub fn db(&self) -> &Sqlite {
        &self.db
    }
}

fn counter_id(tx: &Transaction<'_>, name: &str) -> Result<i64> {
    let mut select = tx.prepare_cached("SELECT id FROM tally_counter WHERE name = ?1")?;
    if let Some(id) = select.query_row([name], |r| r.get(0)).optional()? {
        return Ok(id);
    }
    let mut insert = tx.prepare_cached("INSERT INTO tally_counter (name) VALUES (?1)")?;
    insert.execute([name])?;
    Ok(tx.last_insert_rowid())
}

fn apply_in(tx: &Transaction<'_>, batch: &WriteBatch, now_secs: i64) -> Result<Applied> {
    if let Some(seq) = batch.seq {
        let last: Option<i64> = tx
            .prepare_cached("SELECT seq FROM tally_writer WHERE lane = ?1")?
            .query_row([seq.lane_id()], |r| r.get(0))
            .optional()?;
        if last.is_some_and(|last| seq.seq as i64 <= last) {
            return Ok(Applied::Duplicate);
        }
        tx.prepare_cached(
            "INSERT INTO tally_writer (lane, seq, at) VALUES (?1, ?2, ?3)
             ON CONFLICT (lane) DO UPDATE SET seq = excluded.seq, at = excluded.at",
        )?
        .execute(params![seq.lane_id(), seq.seq as i64, now_secs])?;
    }
    let mut read = tx.prepare_cached(
        "SELECT count FROM tally_sample WHERE counter_id = ?1 AND precision = ?2 AND slice = ?3",
    )?;
    let mut upsert = tx.prepare_cached(
        "INSERT INTO tally_sample (counter_id, precision, slice, count) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (counter_id, precision, slice) DO UPDATE SET count = excluded.count",
    )?;
    for counter in &batch.counters {
        let id = counter_id(tx, counter.name.as_str())?;
        for d in &counter.deltas {
            let (precision, slice) = (d.precision as i64, d.slice as i64);
            let old: i64 = read
                .query_row(params![id, precision, slice], |r| r.get(0))
                .optional()?
                .unwrap_or(0);
            let new = old.checked_add(d.delta).ok_or_else(|| Error::Overflow {
                name: counter.name.to_string(),
                precision: d.precision,
                slice: d.slice,
                delta: d.delta,
            })?;
            upsert.execute(params![id, precision, slice, new])?;
        }
    }
    Ok(Applied::Written)
}

#[async_trait]
impl CounterStore for SqliteCounterStore {
    async fn apply(&self, batch: &WriteBatch) -> Result<Applied> {
        let batch = batch.clone();
        let now = self.clock.now().whole_secs() as i64;
        self.db.write(move |tx| apply_in(tx, &batch, now)).await
    }

    async fn samples(&self, names: &[Name], precisions: &[u64]) -> Result<Vec<Vec<Vec<Sample>>>> {
        let names = names.to_vec();
        let precisions = precisions.to_vec();
        self.db
            .read(move |conn| {
                // One snapshot for the whole read.
                conn.execute_batch("BEGIN")?;
                let result = (|| {
                    let mut id_of =
                        conn.prepare_cached("SELECT id FROM tally_counter WHERE name = ?1")?;
                    let mut rows = conn.prepare_cached(
                        "SELECT slice, count FROM tally_sample
                         WHERE counter_id = ?1 AND precision = ?2 ORDER BY slice",
                    )?;
                    let mut out = Vec::with_capacity(names.len());
                    for name in &names {
                        let id: Option<i64> =
                            id_of.query_row([name.as_str()], |r| r.get(0)).optional()?;
                        let mut per = Vec::with_capacity(precisions.len());
                        for &p in &precisions {
                            let samples = match id {
                                None => Vec::new(),
                                Some(id) => rows
                                    .query_map(params![id, p as i64], |r| {
                                        Ok(Sample {
                                            start: r.get::<_, i64>(0)? as u64,
                                            count: r.get(1)?,
                                        })
                                    })?
                                    .collect::<rusqlite::Result<Vec<_>>>()?,
                            };
                            per.push(samples);
                        }
                        out.push(per);
                    }
                    Ok(out)
                })();
                conn.execute_batch("COMMIT")?;
                result
            })
            .await
    }

    async fn list(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Vec<String>> {
        // Names in [prefix, upper), after the cursor: one index range scan.
        let lower = match after {
            Some(a) if a >= prefix => a.to_owned(),
            _ => String::new(),
        };
        let from = prefix.to_owned();
        let upper = crate::name::prefix_upper(prefix);
        self.db
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT name FROM tally_counter
                     WHERE name > ?1 AND name >= ?2 AND (?3 IS NULL OR name < ?3)
                     ORDER BY name LIMIT ?4",
                )?;
                let names = stmt
                    .query_map(params![lower, from, upper, limit as i64], |r| r.get(0))?
                    .collect::<rusqlite::Result<Vec<String>>>()?;
                Ok(names)
            })
            .await
    }

    async fn delete(&self, name: &Name, _precisions: &[u64]) -> Result<bool> {
        let name = name.clone();
        self.db
            .write(move |tx| {
                let id: Option<i64> = tx
                    .prepare_cached("SELECT id FROM tally_counter WHERE name = ?1")?
                    .query_row([name.as_str()], |r| r.get(0))
                    .optional()?;
                let Some(id) = id else { return Ok(false) };
                let samples = tx
                    .prepare_cached("DELETE FROM tally_sample WHERE counter_id = ?1")?
                    .execute([id])?;
                tx.prepare_cached("DELETE FROM tally_counter WHERE id = ?1")?
                    .execute([id])?;
                Ok(samples > 0)
            })
            .await
    }

    async fn clean(&self, job: &CleanJob, precisions: &[u64]) -> Result<CleanReport> {
        let due: Vec<(i64, i64)> = precisions
            .iter()
            .filter_map(|&p| job.cutoff_for(p).map(|c| (p as i64, c)))
            .collect();
        let batch = job.batch as i64;
        let forget_before = job.now.whole_secs() as i64 - WRITER_TTL_SECS as i64;
        let mut report = CleanReport::default();
        let mut after = 0i64;
        loop {
            let due = due.clone();
            let step = self
                .db
                .write(move |tx| {
                    let ids = tx
                        .prepare_cached(
                            "SELECT id FROM tally_counter WHERE id > ?1 ORDER BY id LIMIT ?2",
                        )?
                        .query_map(params![after, batch], |r| r.get::<_, i64>(0))?
                        .collect::<rusqlite::Result<Vec<i64>>>()?;
                    let mut trim = tx.prepare_cached(
                        "DELETE FROM tally_sample
                         WHERE counter_id = ?1 AND precision = ?2 AND slice <= ?3",
                    )?;
                    let mut drop_empty = tx.prepare_cached(
                        "DELETE FROM tally_counter WHERE id = ?1
                         AND NOT EXISTS (SELECT 1 FROM tally_sample WHERE counter_id = ?1)",
                    )?;
                    let mut step = CleanReport {
                        scanned: ids.len() as u64,
                        round_trips: 1,
                        ..CleanReport::default()
                    };
                    for &id in &ids {
                        for &(p, cutoff) in &due {
                            step.samples_removed += trim.execute(params![id, p, cutoff])? as u64;
                        }
                        step.counters_removed += drop_empty.execute([id])? as u64;
                    }
                    if ids.len() < batch as usize {
                        tx.prepare_cached("DELETE FROM tally_writer WHERE at < ?1")?
                            .execute([forget_before])?;
                    }
                    Ok((step, ids.last().copied(), ids.len()))
                })
                .await?;
            let (step, last, n) = step;
            report.add(&step);
            match last {
                Some(last) if n == job.batch => after = last,
                _ => break,
            }
        }
        Ok(report)
    }

    async fn ping(&self) -> Result<()> {
        self.db
            .read(|conn| Ok(conn.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))?))
            .await
            .map(|_| ())
    }
}
