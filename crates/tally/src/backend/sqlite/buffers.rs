//! The buffer in SQLite: pending rows and claims in Tally's own database.
//!
//! - `tally_buffer_pending(row, since_ms, data)`: a row's merged pending
//!   changes (flat JSON, as in Redis), pending since `since_ms`;
//! - `tally_buffer_claim(batch, lease_ms)`: live claims and their lease
//!   deadlines;
//! - `tally_buffer_claimed(batch, row, data)`: each claim's rows, a row in at
//!   most one claim (a unique index on `row`).
//!
//! Every method is one `BEGIN IMMEDIATE` transaction, so several processes
//! (writers and flushers) can share the file. Merging happens in Rust
//! inside the transaction, with overflow checked before anything is stored;
//! a keyed change's transaction also checks and records its mark
//! ([`super::once`]).

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use super::{Sqlite, once};
use crate::buffers::row::{BatchId, Claim, RowDelta, RowKey, RowUpdate};
use crate::buffers::store::{BufferStats, BufferStore, NewClaim};
use crate::engine::Applied;
use crate::error::Result;
use crate::idempotency::Mark;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tally_buffer_pending (
    row TEXT PRIMARY KEY,
    since_ms INTEGER NOT NULL,
    data TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tally_buffer_pending_since ON tally_buffer_pending (since_ms);
CREATE TABLE IF NOT EXISTS tally_buffer_claim (
    batch TEXT PRIMARY KEY,
    lease_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tally_buffer_claimed (
    batch TEXT NOT NULL,
    row TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (batch, row)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS tally_buffer_claimed_row ON tally_buffer_claimed (row);
";

/// The buffer's store in a [`Sqlite`] database.
#[derive(Clone, Debug)]
pub struct SqliteBufferStore {
    db: Sqlite,
}

impl SqliteBufferStore {
    /// Creates the tables if needed.
    pub async fn new(db: Sqlite) -> Result<Self> {
        db.create_tables([SCHEMA, once::SCHEMA].concat()).await?;
        Ok(SqliteBufferStore { db })
    }
}

fn rows_of(tx: &rusqlite::Connection, batch: &str) -> Result<Vec<RowUpdate>> {
    let mut stmt = tx.prepare_cached(
        "SELECT row, data FROM tally_buffer_claimed WHERE batch = ?1 ORDER BY row",
    )?;
    let pairs = stmt
        .query_map([batch], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    pairs
        .into_iter()
        .map(|(row, data)| {
            Ok(RowUpdate {
                row: RowKey::parse(&row)?,
                delta: RowDelta::from_flat_json(&data)?,
            })
        })
        .collect()
}

#[async_trait]
impl BufferStore for SqliteBufferStore {
    async fn incr(&self, update: &RowUpdate, now_ms: u64, mark: Option<&Mark>) -> Result<Applied> {
        let id = update.row.id();
        let delta = update.delta.clone();
        let mark = mark.copied();
        self.db
            .write(move |tx| {
                if !once::first_time(tx, "buffers", mark.as_ref())? {
                    return Ok(Applied::Duplicate);
                }
                let old: Option<String> = tx
                    .prepare_cached("SELECT data FROM tally_buffer_pending WHERE row = ?1")?
                    .query_row([&id], |r| r.get(0))
                    .optional()?;
                let merged = match old {
                    Some(old) => {
                        let mut merged = RowDelta::from_flat_json(&old)?;
                        merged.merge(&delta)?;
                        merged
                    }
                    None => delta,
                };
                tx.prepare_cached(
                    "INSERT INTO tally_buffer_pending (row, since_ms, data) VALUES (?1, ?2, ?3)
                     ON CONFLICT (row) DO UPDATE SET data = excluded.data",
                )?
                .execute(params![id, now_ms as i64, merged.to_flat_json()])?;
                Ok(Applied::Written)
            })
            .await
    }

    async fn claim(&self, new: NewClaim) -> Result<Option<Claim>> {
        let (batch, max_rows) = (new.batch, new.max_rows);
        if max_rows == 0 {
            return Ok(None);
        }
        let b = batch.to_string();
        let rows = self
            .db
            .write(move |tx| {
                let picked = tx
                    .prepare_cached(
                        "SELECT row, data FROM tally_buffer_pending p
                         WHERE NOT EXISTS (SELECT 1 FROM tally_buffer_claimed c WHERE c.row = p.row)
                         ORDER BY since_ms, row LIMIT ?1",
                    )?
                    .query_map([max_rows as i64], |r| {
                        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                if picked.is_empty() {
                    return Ok(Vec::new());
                }
                tx.prepare_cached(
                    "INSERT INTO tally_buffer_claim (batch, lease_ms) VALUES (?1, ?2)",
                )?
                .execute(params![b, new.lease_end_ms as i64])?;
                let mut insert = tx.prepare_cached(
                    "INSERT INTO tally_buffer_claimed (batch, row, data) VALUES (?1, ?2, ?3)",
                )?;
                let mut delete =
                    tx.prepare_cached("DELETE FROM tally_buffer_pending WHERE row = ?1")?;
                for (row, data) in &picked {
                    insert.execute(params![b, row, data])?;
                    delete.execute([row])?;
                }
                rows_of(tx, &b)
            })
            .await?;
        Ok((!rows.is_empty()).then_some(Claim {
            batch,
            shard: 0,
            rows,
        }))
    }

    async fn take_over(&self, now_ms: u64, lease_ms: u64, max: usize) -> Result<Vec<Claim>> {
        self.db
            .write(move |tx| {
                let batches = tx
                    .prepare_cached(
                        "SELECT batch FROM tally_buffer_claim WHERE lease_ms <= ?1
                         ORDER BY lease_ms LIMIT ?2",
                    )?
                    .query_map(params![now_ms as i64, max as i64], |r| {
                        r.get::<_, String>(0)
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                let mut renew = tx.prepare_cached(
                    "UPDATE tally_buffer_claim SET lease_ms = ?2 WHERE batch = ?1",
                )?;
                let mut out = Vec::new();
                for b in batches {
                    renew.execute(params![b, (now_ms + lease_ms) as i64])?;
                    out.push(Claim {
                        batch: BatchId::parse(&b)?,
                        shard: 0,
                        rows: rows_of(tx, &b)?,
                    });
                }
                Ok(out)
            })
            .await
    }

    async fn release(&self, claim: &Claim) -> Result<()> {
        let b = claim.batch.to_string();
        self.db
            .write(move |tx| {
                tx.prepare_cached("DELETE FROM tally_buffer_claimed WHERE batch = ?1")?
                    .execute([&b])?;
                tx.prepare_cached("DELETE FROM tally_buffer_claim WHERE batch = ?1")?
                    .execute([&b])?;
                Ok(())
            })
            .await
    }

    async fn pending(&self, row: &RowKey) -> Result<Vec<(Option<BatchId>, RowDelta)>> {
        let id = row.id();
        self.db
            .read(move |conn| {
                crate::sqlite::in_snapshot(conn, || {
                    let mut out = Vec::new();
                    let claimed: Option<(String, String)> = conn
                        .prepare_cached(
                            "SELECT batch, data FROM tally_buffer_claimed WHERE row = ?1",
                        )?
                        .query_row([&id], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()?;
                    if let Some((b, data)) = claimed {
                        out.push((Some(BatchId::parse(&b)?), RowDelta::from_flat_json(&data)?));
                    }
                    let pending: Option<String> = conn
                        .prepare_cached("SELECT data FROM tally_buffer_pending WHERE row = ?1")?
                        .query_row([&id], |r| r.get(0))
                        .optional()?;
                    if let Some(data) = pending {
                        out.push((None, RowDelta::from_flat_json(&data)?));
                    }
                    Ok(out)
                })
            })
            .await
    }

    async fn stats(&self, now_ms: u64) -> Result<BufferStats> {
        self.db
            .read(move |conn| {
                let (pending, oldest): (i64, Option<i64>) = conn.query_row(
                    "SELECT COUNT(*), MIN(since_ms) FROM tally_buffer_pending",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )?;
                let (claims, expired): (i64, i64) = conn.query_row(
                    "SELECT COUNT(*), COUNT(*) FILTER (WHERE lease_ms <= ?1) FROM tally_buffer_claim",
                    [now_ms as i64],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )?;
                Ok(BufferStats {
                    pending_rows: pending as u64,
                    oldest_pending_ms: oldest.map(|o| o as u64),
                    claims: claims as u64,
                    expired_claims: expired as u64,
                })
            })
            .await
    }
}
