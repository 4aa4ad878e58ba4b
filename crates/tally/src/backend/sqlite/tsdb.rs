//! The time-series store in SQLite.
//!
//! One row per (model, key, rollup, bucket) in `tally_ts_count` (count),
//! `tally_ts_distinct` (a HyperLogLog as a blob, register-compatible with
//! Redis) and `tally_ts_freq` (one row per item of a Space-Saving summary).
//! Every row carries its bucket's expiry: reads skip expired rows, and each
//! write transaction deletes up to [`SWEEP`] expired rows per table (an index
//! range), so expired data goes without a cleaner. A write, a merge and a
//! delete are each one transaction.

use std::collections::HashMap;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Transaction, params};

use super::Sqlite;
use crate::clock::SharedClock;
use crate::error::{Error, Result};
use crate::name::Name;
use crate::tsdb::hll::Hll;
use crate::tsdb::store::{Cell, CountAdd, DistinctAdd, FrequencyAdd, Span, TsdbStore};
use crate::tsdb::topn::{self, Summary};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tally_ts_count (
    model TEXT NOT NULL, key TEXT NOT NULL, rollup INTEGER NOT NULL, bucket INTEGER NOT NULL,
    count INTEGER NOT NULL, expires INTEGER NOT NULL,
    PRIMARY KEY (model, key, rollup, bucket)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tally_ts_count_expires ON tally_ts_count (expires);
CREATE TABLE IF NOT EXISTS tally_ts_distinct (
    model TEXT NOT NULL, key TEXT NOT NULL, rollup INTEGER NOT NULL, bucket INTEGER NOT NULL,
    registers BLOB NOT NULL, expires INTEGER NOT NULL,
    PRIMARY KEY (model, key, rollup, bucket)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tally_ts_distinct_expires ON tally_ts_distinct (expires);
CREATE TABLE IF NOT EXISTS tally_ts_freq (
    model TEXT NOT NULL, key TEXT NOT NULL, rollup INTEGER NOT NULL, bucket INTEGER NOT NULL,
    item TEXT NOT NULL, count INTEGER NOT NULL, expires INTEGER NOT NULL,
    PRIMARY KEY (model, key, rollup, bucket, item)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tally_ts_freq_expires ON tally_ts_freq (expires);
";

/// Expired rows deleted per table per write transaction, at most.
pub const SWEEP: i64 = 500;

const TABLES: [&str; 3] = ["tally_ts_count", "tally_ts_distinct", "tally_ts_freq"];
const PRIMARY_KEYS: [&str; 3] = [
    "model, key, rollup, bucket",
    "model, key, rollup, bucket",
    "model, key, rollup, bucket, item",
];

/// The time-series store in a [`Sqlite`] database.
#[derive(Clone, Debug)]
pub struct SqliteTsdbStore {
    db: Sqlite,
    clock: SharedClock,
}

impl SqliteTsdbStore {
    /// Creates the tables if needed; `clock` decides what has expired.
    pub async fn new(db: Sqlite, clock: SharedClock) -> Result<Self> {
        db.with_writer(|conn| Ok(conn.execute_batch(SCHEMA)?))
            .await?;
        Ok(SqliteTsdbStore { db, clock })
    }

    async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>, i64) -> Result<T> + Send + 'static,
    {
        let now = self.clock.now().whole_secs() as i64;
        self.db
            .write(move |tx| {
                let value = f(tx, now)?;
                for (table, pk) in TABLES.iter().zip(PRIMARY_KEYS) {
                    tx.prepare_cached(&format!(
                        "DELETE FROM {table} WHERE ({pk}) IN
                         (SELECT {pk} FROM {table} WHERE expires <= ?1 LIMIT ?2)"
                    ))?
                    .execute(params![now, SWEEP])?;
                }
                Ok(value)
            })
            .await
    }
}

fn cell_params(c: &Cell) -> (String, String, i64, i64, i64) {
    (
        c.model.to_string(),
        c.key.to_string(),
        c.rollup as i64,
        c.bucket as i64,
        c.expires as i64,
    )
}

fn load_summary(conn: &Connection, c: &Cell, now: i64) -> Result<Summary> {
    let mut stmt = conn.prepare_cached(
        "SELECT item, count FROM tally_ts_freq
         WHERE model = ?1 AND key = ?2 AND rollup = ?3 AND bucket = ?4 AND expires > ?5",
    )?;
    let items = stmt
        .query_map(
            params![
                c.model.as_str(),
                c.key.as_str(),
                c.rollup as i64,
                c.bucket as i64,
                now
            ],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)),
        )?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(Summary::from_items(items))
}

fn store_summary(tx: &Transaction<'_>, c: &Cell, summary: &Summary) -> Result<()> {
    let (model, key, rollup, bucket, expires) = cell_params(c);
    tx.prepare_cached(
        "DELETE FROM tally_ts_freq WHERE model = ?1 AND key = ?2 AND rollup = ?3 AND bucket = ?4",
    )?
    .execute(params![model, key, rollup, bucket])?;
    let mut insert = tx.prepare_cached(
        "INSERT INTO tally_ts_freq (model, key, rollup, bucket, item, count, expires)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for (item, count) in summary.items() {
        insert.execute(params![model, key, rollup, bucket, item, count, expires])?;
    }
    Ok(())
}

fn load_hll(conn: &Connection, c: &Cell, now: i64) -> Result<Option<Hll>> {
    let blob: Option<Vec<u8>> = conn
        .prepare_cached(
            "SELECT registers FROM tally_ts_distinct
             WHERE model = ?1 AND key = ?2 AND rollup = ?3 AND bucket = ?4 AND expires > ?5",
        )?
        .query_row(
            params![
                c.model.as_str(),
                c.key.as_str(),
                c.rollup as i64,
                c.bucket as i64,
                now
            ],
            |r| r.get(0),
        )
        .optional()?;
    blob.map(|b| Hll::from_bytes(&b)).transpose()
}

fn store_hll(tx: &Transaction<'_>, c: &Cell, hll: &Hll) -> Result<()> {
    let (model, key, rollup, bucket, expires) = cell_params(c);
    tx.prepare_cached(
        "INSERT INTO tally_ts_distinct (model, key, rollup, bucket, registers, expires)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (model, key, rollup, bucket)
         DO UPDATE SET registers = excluded.registers, expires = excluded.expires",
    )?
    .execute(params![model, key, rollup, bucket, hll.to_bytes(), expires])?;
    Ok(())
}

fn add_count(tx: &Transaction<'_>, c: &Cell, delta: i64, now: i64) -> Result<()> {
    let (model, key, rollup, bucket, expires) = cell_params(c);
    let old: i64 = tx
        .prepare_cached(
            "SELECT count FROM tally_ts_count
             WHERE model = ?1 AND key = ?2 AND rollup = ?3 AND bucket = ?4 AND expires > ?5",
        )?
        .query_row(params![model, key, rollup, bucket, now], |r| r.get(0))
        .optional()?
        .unwrap_or(0);
    let new = old.checked_add(delta).ok_or_else(|| {
        Error::InvalidCount(format!(
            "adding {delta} to {model}:{key} in the {rollup} s bucket at {bucket} would overflow; \
             nothing was written"
        ))
    })?;
    tx.prepare_cached(
        "INSERT INTO tally_ts_count (model, key, rollup, bucket, count, expires)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (model, key, rollup, bucket)
         DO UPDATE SET count = excluded.count, expires = excluded.expires",
    )?
    .execute(params![model, key, rollup, bucket, new, expires])?;
    Ok(())
}

fn cell(model: &Name, key: &Name, rollup: u64, bucket: u64) -> Cell {
    Cell {
        model: model.clone(),
        key: key.clone(),
        rollup,
        bucket,
        expires: 0,
    }
}

#[async_trait]
impl TsdbStore for SqliteTsdbStore {
    async fn add_counts(&self, adds: &[CountAdd]) -> Result<()> {
        let adds = adds.to_vec();
        self.write(move |tx, now| {
            for a in &adds {
                add_count(tx, &a.cell, a.delta, now)?;
            }
            Ok(())
        })
        .await
    }

    async fn counts(
        &self,
        model: &Name,
        keys: &[Name],
        rollup: u64,
        buckets: &[u64],
        now: u64,
    ) -> Result<Vec<Vec<i64>>> {
        let (model, keys, buckets) = (model.clone(), keys.to_vec(), buckets.to_vec());
        let (first, last) = (buckets[0] as i64, *buckets.last().expect("buckets") as i64);
        self.db
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT bucket, count FROM tally_ts_count
                     WHERE model = ?1 AND key = ?2 AND rollup = ?3
                       AND bucket BETWEEN ?4 AND ?5 AND expires > ?6",
                )?;
                keys.iter()
                    .map(|key| {
                        let found: HashMap<u64, i64> = stmt
                            .query_map(
                                params![
                                    model.as_str(),
                                    key.as_str(),
                                    rollup as i64,
                                    first,
                                    last,
                                    now as i64
                                ],
                                |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)?)),
                            )?
                            .collect::<rusqlite::Result<_>>()?;
                        Ok(buckets
                            .iter()
                            .map(|b| found.get(b).copied().unwrap_or(0))
                            .collect())
                    })
                    .collect()
            })
            .await
    }

    async fn add_distinct(&self, adds: &[DistinctAdd]) -> Result<()> {
        let adds = adds.to_vec();
        self.write(move |tx, now| {
            for a in &adds {
                let mut hll = load_hll(tx, &a.cell, now)?.unwrap_or_default();
                for v in &a.values {
                    hll.add(v.as_bytes());
                }
                store_hll(tx, &a.cell, &hll)?;
            }
            Ok(())
        })
        .await
    }

    async fn distinct_counts(
        &self,
        model: &Name,
        keys: &[Name],
        rollup: u64,
        buckets: &[u64],
        now: u64,
    ) -> Result<Vec<Vec<u64>>> {
        let (model, keys, buckets) = (model.clone(), keys.to_vec(), buckets.to_vec());
        self.db
            .read(move |conn| {
                keys.iter()
                    .map(|key| {
                        buckets
                            .iter()
                            .map(|&b| {
                                Ok(load_hll(conn, &cell(&model, key, rollup, b), now as i64)?
                                    .map_or(0, |h| h.count()))
                            })
                            .collect()
                    })
                    .collect()
            })
            .await
    }

    async fn distinct_totals(
        &self,
        model: &Name,
        keys: &[Name],
        rollup: u64,
        buckets: &[u64],
        now: u64,
    ) -> Result<Vec<u64>> {
        let (model, keys, buckets) = (model.clone(), keys.to_vec(), buckets.to_vec());
        self.db
            .read(move |conn| {
                keys.iter()
                    .map(|key| {
                        let mut union = Hll::default();
                        for &b in &buckets {
                            if let Some(h) =
                                load_hll(conn, &cell(&model, key, rollup, b), now as i64)?
                            {
                                union.merge(&h);
                            }
                        }
                        Ok(union.count())
                    })
                    .collect()
            })
            .await
    }

    async fn distinct_union(
        &self,
        model: &Name,
        keys: &[Name],
        rollup: u64,
        buckets: &[u64],
        now: u64,
    ) -> Result<u64> {
        let (model, keys, buckets) = (model.clone(), keys.to_vec(), buckets.to_vec());
        self.db
            .read(move |conn| {
                let mut union = Hll::default();
                for key in &keys {
                    for &b in &buckets {
                        if let Some(h) = load_hll(conn, &cell(&model, key, rollup, b), now as i64)?
                        {
                            union.merge(&h);
                        }
                    }
                }
                Ok(union.count())
            })
            .await
    }

    async fn add_frequencies(&self, adds: &[FrequencyAdd], capacity: usize) -> Result<()> {
        let adds = adds.to_vec();
        self.write(move |tx, now| {
            for a in &adds {
                let mut summary = load_summary(tx, &a.cell, now)?;
                for (item, count) in &a.items {
                    summary.add(item, *count, capacity);
                }
                store_summary(tx, &a.cell, &summary)?;
            }
            Ok(())
        })
        .await
    }

    async fn frequencies(
        &self,
        model: &Name,
        key: &Name,
        rollup: u64,
        buckets: &[u64],
        now: u64,
    ) -> Result<Vec<(String, i64)>> {
        let (model, key) = (model.clone(), key.clone());
        let (first, last) = (buckets[0] as i64, *buckets.last().expect("buckets") as i64);
        self.db
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT item, count FROM tally_ts_freq
                     WHERE model = ?1 AND key = ?2 AND rollup = ?3
                       AND bucket BETWEEN ?4 AND ?5 AND expires > ?6",
                )?;
                let items = stmt
                    .query_map(
                        params![
                            model.as_str(),
                            key.as_str(),
                            rollup as i64,
                            first,
                            last,
                            now as i64
                        ],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                Ok(items)
            })
            .await
    }

    async fn merge(
        &self,
        model: &Name,
        into: &Name,
        from: &Name,
        spans: &[Span],
        capacity: usize,
        _now: u64,
    ) -> Result<()> {
        let (model, into, from, spans) =
            (model.clone(), into.clone(), from.clone(), spans.to_vec());
        self.write(move |tx, now| {
            for span in &spans {
                let r = span.rollup;
                for &b in &span.buckets {
                    let src = cell(&model, &from, r.seconds, b);
                    let dst = Cell {
                        expires: r.expires(b),
                        ..cell(&model, &into, r.seconds, b)
                    };
                    let count: Option<i64> = tx
                        .prepare_cached(
                            "SELECT count FROM tally_ts_count
                             WHERE model = ?1 AND key = ?2 AND rollup = ?3 AND bucket = ?4 AND expires > ?5",
                        )?
                        .query_row(
                            params![model.as_str(), from.as_str(), r.seconds as i64, b as i64, now],
                            |row| row.get(0),
                        )
                        .optional()?;
                    if let Some(count) = count {
                        add_count(tx, &dst, count, now)?;
                    }
                    if let Some(h) = load_hll(tx, &src, now)? {
                        let mut target = load_hll(tx, &dst, now)?.unwrap_or_default();
                        target.merge(&h);
                        store_hll(tx, &dst, &target)?;
                    }
                    let moved = load_summary(tx, &src, now)?;
                    if !moved.is_empty() {
                        let mut target = load_summary(tx, &dst, now)?;
                        let items = topn::ascending(moved.items().map(|(k, v)| (k.to_owned(), v)));
                        for (item, count) in items {
                            target.add(&item, count, capacity);
                        }
                        store_summary(tx, &dst, &target)?;
                    }
                }
            }
            delete_keys(tx, &model, std::slice::from_ref(&from))
        })
        .await
    }

    async fn delete(&self, model: &Name, keys: &[Name], _spans: &[Span]) -> Result<()> {
        let (model, keys) = (model.clone(), keys.to_vec());
        self.write(move |tx, _| delete_keys(tx, &model, &keys))
            .await
    }

    async fn ping(&self) -> Result<()> {
        self.db
            .read(|conn| Ok(conn.execute_batch("SELECT 1")?))
            .await
    }
}

fn delete_keys(tx: &Transaction<'_>, model: &Name, keys: &[Name]) -> Result<()> {
    for table in TABLES {
        let mut stmt = tx.prepare_cached(&format!(
            "DELETE FROM {table} WHERE model = ?1 AND key = ?2"
        ))?;
        for key in keys {
            stmt.execute(params![model.as_str(), key.as_str()])?;
        }
    }
    Ok(())
}
