//! The time-series store in SQLite.
//!
//! One row per (model, key, rollup, bucket) in `tally_ts_count` (count),
//! `tally_ts_distinct` (a HyperLogLog as a blob, register-compatible with
//! Redis) and `tally_ts_freq` (one row per item of a Space-Saving summary).
//! Every row carries its bucket's expiry: reads skip expired rows, and each
//! write transaction deletes up to [`SWEEP`] expired rows per table (an index
//! range), so expired data goes without a cleaner. A write, a merge and a
//! delete are each one transaction; a keyed write's transaction also checks
//! and records its mark ([`super::once`]).
//!
//! One path serves every kind: a cell's value is read as the engine's
//! [`Value`] (one range query per key), merged with the kind's rule (item
//! counts folded into the bounded summary) and written back in the kind's
//! row shape.

use std::collections::HashMap;

use async_trait::async_trait;
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, Transaction, params};

use super::{Sqlite, once};
use crate::clock::SharedClock;
use crate::engine::kinds::sum::add_stored;
use crate::engine::kinds::{DistinctValue, Hll};
use crate::engine::{Applied, Kind, Value};
use crate::error::{Error, Result};
use crate::idempotency::Mark;
use crate::name::Name;
use crate::tsdb::precision;
use crate::tsdb::store::{Cell, CellAdd, Held, Merge, Span, TsdbStore, Window, sort_held};

/// One table of the store: its name, the columns of a cell's value, and
/// its primary key. Every table also has the cell's `model`, `key`,
/// `rollup` (the precision, seconds) and `bucket`, and `expires`, indexed.
struct Table {
    name: &'static str,
    values: &'static str,
    primary_key: &'static str,
}

/// Sums, HyperLogLogs and item counts (one row per item), in that order.
const TABLES: [Table; 3] = [
    Table {
        name: "tally_ts_count",
        values: "count INTEGER NOT NULL",
        primary_key: "model, key, rollup, bucket",
    },
    Table {
        name: "tally_ts_distinct",
        values: "registers BLOB NOT NULL",
        primary_key: "model, key, rollup, bucket",
    },
    Table {
        name: "tally_ts_freq",
        values: "item TEXT NOT NULL, count INTEGER NOT NULL",
        primary_key: "model, key, rollup, bucket, item",
    },
];

/// The statements creating every table and its index of expiry.
fn schema() -> String {
    TABLES
        .iter()
        .map(|t| {
            let (name, values, pk) = (t.name, t.values, t.primary_key);
            format!(
                "
CREATE TABLE IF NOT EXISTS {name} (
    model TEXT NOT NULL, key TEXT NOT NULL, rollup INTEGER NOT NULL, bucket INTEGER NOT NULL,
    {values}, expires INTEGER NOT NULL,
    PRIMARY KEY ({pk})
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {name}_expires ON {name} (expires);"
            )
        })
        .collect()
}

/// Expired rows deleted per table per write transaction, at most.
pub const SWEEP: i64 = 500;

/// The time-series store in a [`Sqlite`] database.
#[derive(Clone, Debug)]
pub struct SqliteTsdbStore {
    db: Sqlite,
    clock: SharedClock,
}

impl SqliteTsdbStore {
    /// Creates the tables if needed; `clock` decides what has expired.
    pub async fn new(db: Sqlite, clock: SharedClock) -> Result<Self> {
        db.create_tables(schema() + once::SCHEMA).await?;
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
                for Table {
                    name: table,
                    primary_key: pk,
                    ..
                } in &TABLES
                {
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

/// The table keeping the cells of `kind`.
fn table(kind: Kind) -> Result<&'static str> {
    match kind {
        Kind::Sum => Ok(TABLES[0].name),
        Kind::Distinct => Ok(TABLES[1].name),
        Kind::Top => Ok(TABLES[2].name),
        other => Err(Error::Backend(format!(
            "internal error: the time-series store keeps no {other} values"
        ))),
    }
}

/// The stored values of `kind` of one key in the buckets `first..=last` of
/// `rollup` that have not expired at `now`, by bucket: one range query,
/// whatever the kind (an item-counts cell is one row per item).
fn load_range(
    conn: &Connection,
    kind: Kind,
    (model, key, rollup): (&Name, &Name, u64),
    (first, last): (u64, u64),
    now: i64,
) -> Result<HashMap<u64, Value>> {
    let columns = match kind {
        Kind::Sum => "count",
        Kind::Distinct => "registers",
        _ => "item, count",
    };
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT bucket, {columns} FROM {}
         WHERE model = ?1 AND key = ?2 AND rollup = ?3
           AND bucket BETWEEN ?4 AND ?5 AND expires > ?6",
        table(kind)?
    ))?;
    let mut rows = stmt.query(params![
        model.as_str(),
        key.as_str(),
        rollup as i64,
        first as i64,
        last as i64,
        now
    ])?;
    let mut out: HashMap<u64, Value> = HashMap::new();
    while let Some(row) = rows.next()? {
        let bucket = row.get::<_, i64>(0)? as u64;
        match kind {
            Kind::Sum => {
                out.insert(bucket, Value::Sum(row.get(1)?));
            }
            Kind::Distinct => {
                let hll = Hll::from_bytes(&row.get::<_, Vec<u8>>(1)?)?;
                out.insert(
                    bucket,
                    Value::Distinct(Box::new(DistinctValue::Registers(Box::new(hll)))),
                );
            }
            _ => {
                let (item, count): (String, i64) = (row.get(1)?, row.get(2)?);
                let entry = out
                    .entry(bucket)
                    .or_insert_with(|| Value::Top(Box::default()));
                if let Value::Top(t) = entry {
                    t.add(&item, count)
                        .map_err(|e| Error::Corrupt(format!("a stored summary: {e}")))?;
                }
            }
        }
    }
    Ok(out)
}

/// A cell's stored value of `kind`, if any.
fn load(conn: &Connection, kind: Kind, c: &Cell, now: i64) -> Result<Option<Value>> {
    let mut found = load_range(
        conn,
        kind,
        (&c.model, &c.key, c.rollup),
        (c.bucket, c.bucket),
        now,
    )?;
    Ok(found.remove(&c.bucket))
}

/// Writes a cell's value with its expiry, in its kind's row shape: a count,
/// a HyperLogLog's registers, or one row per item.
fn store(tx: &Transaction<'_>, c: &Cell, value: &Value) -> Result<()> {
    let (model, key, rollup, bucket, expires) = (
        c.model.as_str(),
        c.key.as_str(),
        c.rollup as i64,
        c.bucket as i64,
        c.expires as i64,
    );
    let (column, stored): (&str, SqlValue) = match value {
        Value::Sum(count) => ("count", SqlValue::Integer(*count)),
        Value::Distinct(d) => ("registers", SqlValue::Blob(d.to_hll().to_bytes())),
        Value::Top(t) => {
            tx.prepare_cached(
                "DELETE FROM tally_ts_freq
                 WHERE model = ?1 AND key = ?2 AND rollup = ?3 AND bucket = ?4",
            )?
            .execute(params![model, key, rollup, bucket])?;
            let mut insert = tx.prepare_cached(
                "INSERT INTO tally_ts_freq (model, key, rollup, bucket, item, count, expires)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            for (item, count) in t.items() {
                insert.execute(params![model, key, rollup, bucket, item, count, expires])?;
            }
            return Ok(());
        }
        other => return table(other.kind()).map(|_| ()),
    };
    tx.prepare_cached(&format!(
        "INSERT INTO {} (model, key, rollup, bucket, {column}, expires)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (model, key, rollup, bucket)
         DO UPDATE SET {column} = excluded.{column}, expires = excluded.expires",
        table(value.kind())?
    ))?
    .execute(params![model, key, rollup, bucket, stored, expires])?;
    Ok(())
}

/// Merges `delta` into cell `c`: sums add as every store adds them
/// ([`add_stored`]; an overflow fails, naming the cell), distinct values unite, item counts fold into the cell's summary
/// of at most `capacity` items.
fn add_one(tx: &Transaction<'_>, c: &Cell, delta: &Value, capacity: usize, now: i64) -> Result<()> {
    let kind = delta.kind();
    let mut value = load(tx, kind, c, now)?.unwrap_or_else(|| kind.identity());
    match (&mut value, delta) {
        (Value::Top(stored), Value::Top(d)) => stored.fold(d, capacity)?,
        (Value::Sum(stored), Value::Sum(d)) => {
            *stored = add_stored(*stored, *d).ok_or_else(|| {
                Error::InvalidCount(format!(
                    "adding {d} to {}:{} in the {} s bucket at {} would overflow; nothing was \
                 written",
                    c.model, c.key, c.rollup, c.bucket
                ))
            })?
        }
        _ => value.merge(delta)?,
    }
    store(tx, c, &value)
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
    async fn add(&self, adds: &[CellAdd], capacity: usize, mark: Option<&Mark>) -> Result<Applied> {
        let adds = adds.to_vec();
        let mark = mark.copied();
        self.write(move |tx, now| {
            if !once::first_time(tx, "ts", mark.as_ref())? {
                return Ok(Applied::Duplicate);
            }
            for a in &adds {
                add_one(tx, &a.cell, &a.delta, capacity, now)?;
            }
            Ok(Applied::Written)
        })
        .await
    }

    async fn read(&self, kind: Kind, w: &Window) -> Result<Vec<Vec<Value>>> {
        table(kind)?;
        let w = w.clone();
        let span = (w.buckets[0], *w.buckets.last().expect("buckets"));
        // A read of counts is small when it looks few cells up; sketches
        // (distinct counts, top items) decode a blob each: the pool.
        let cells = match kind {
            Kind::Sum => (w.keys.len() as u64).saturating_mul(w.buckets.len() as u64),
            _ => u64::MAX,
        };
        self.db
            .read_sized(cells, move |conn| {
                w.keys
                    .iter()
                    .map(|key| {
                        let mut found =
                            load_range(conn, kind, (&w.model, key, w.rollup), span, w.now as i64)?;
                        Ok(w.buckets
                            .iter()
                            .map(|b| found.remove(b).unwrap_or_else(|| kind.identity()))
                            .collect())
                    })
                    .collect()
            })
            .await
    }

    async fn merge(&self, job: &Merge) -> Result<()> {
        let Merge {
            model,
            into,
            from,
            spans,
            capacity,
        } = job.clone();
        self.write(move |tx, now| {
            for span in &spans {
                let r = span.precision;
                for &b in &span.buckets {
                    let src = cell(&model, &from, r.seconds, b);
                    let dst = Cell {
                        expires: precision::expires(r, b),
                        ..cell(&model, &into, r.seconds, b)
                    };
                    // Counts first: an overflow is refused before anything
                    // else moved (the transaction rolls back either way).
                    for kind in [Kind::Sum, Kind::Distinct, Kind::Top] {
                        if let Some(v) = load(tx, kind, &src, now)? {
                            add_one(tx, &dst, &v, capacity, now)?;
                        }
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

    async fn list(&self, now: u64) -> Result<Vec<Held>> {
        self.db
            .read(move |conn| {
                let mut held = Vec::new();
                for kind in [Kind::Sum, Kind::Distinct, Kind::Top] {
                    let mut stmt = conn.prepare_cached(&format!(
                        "SELECT DISTINCT model, key, rollup FROM {} WHERE expires > ?1",
                        table(kind)?
                    ))?;
                    let mut rows = stmt.query([now as i64])?;
                    while let Some(row) = rows.next()? {
                        held.push(Held {
                            model: Name::new(row.get::<_, String>(0)?)?,
                            key: Name::new(row.get::<_, String>(1)?)?,
                            rollup: row.get::<_, i64>(2)? as u64,
                            kind,
                        });
                    }
                }
                sort_held(&mut held);
                Ok(held)
            })
            .await
    }

    async fn ping(&self) -> Result<()> {
        self.db.ping().await
    }
}

fn delete_keys(tx: &Transaction<'_>, model: &Name, keys: &[Name]) -> Result<()> {
    for table in &TABLES {
        let mut stmt = tx.prepare_cached(&format!(
            "DELETE FROM {} WHERE model = ?1 AND key = ?2",
            table.name
        ))?;
        for key in keys {
            stmt.execute(params![model.as_str(), key.as_str()])?;
        }
    }
    Ok(())
}
