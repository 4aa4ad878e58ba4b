//! The SQLite sink: flushed batches written into a SQLite database file.
//!
//! At start it checks every mapped table and column (`PRAGMA table_info`).
//! A flush batch is one `BEGIN IMMEDIATE` transaction: insert its claims'
//! batch ids into `tally_flushed_batches` in one statement (`ON CONFLICT DO
//! NOTHING RETURNING`: an id not returned was applied before, and its rows
//! are skipped), then per table one multi-row statement (split only past
//! SQLite's bound-parameter limit):
//!
//! ```sql
//! INSERT INTO "t" ("id", "times_seen", "last_seen") VALUES (?, ?, ?), (?, ?, ?)
//! ON CONFLICT ("id") DO UPDATE SET
//!   "times_seen" = "times_seen" + excluded."times_seen",
//!   "last_seen" = COALESCE(excluded."last_seen", "last_seen")
//! RETURNING typeof("times_seen")
//! ```
//!
//! SQLite turns an integer sum that leaves 64 bits into a float without a
//! word; the `RETURNING typeof(...)` catches that and rolls the batch back
//! with an error, so a count is never silently rounded.

use std::collections::BTreeSet;
use std::path::Path;

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params_from_iter};

use super::ident::Ident;
use super::row::{BatchId, Claim, RowKey};
use super::sink::{self, FLUSHED_BATCHES, Sink, SinkOutcome, StoredRow, by_table, key_value};
use super::table::{TableSpec, Tables};
use crate::error::{Error, Result};
use crate::sqlite::Sqlite;

/// Bound parameters per statement (SQLite's default limit is 32766).
const MAX_PARAMS: usize = 30_000;

/// A SQLite database receiving flushed batches.
#[derive(Clone, Debug)]
pub struct SqliteSink {
    db: Sqlite,
    tables: Tables,
}

impl SqliteSink {
    /// Opens (creating if needed) the database file at `path`, creates
    /// `tally_flushed_batches` and checks the mapped tables.
    pub async fn open(path: &Path, tables: Tables) -> Result<Self> {
        Self::on(Sqlite::open(path)?, tables).await
    }

    /// The sink on an already opened database (e.g. Tally's own file).
    pub async fn on(db: Sqlite, tables: Tables) -> Result<Self> {
        let specs: Vec<TableSpec> = tables.iter().cloned().collect();
        db.with_writer(move |conn| {
            conn.execute_batch(&format!(
                "CREATE TABLE IF NOT EXISTS {FLUSHED_BATCHES} (
                     batch_id TEXT PRIMARY KEY,
                     applied_ms INTEGER NOT NULL
                 ) WITHOUT ROWID;
                 CREATE INDEX IF NOT EXISTS {FLUSHED_BATCHES}_applied
                     ON {FLUSHED_BATCHES} (applied_ms);"
            ))?;
            for spec in &specs {
                let mut stmt =
                    conn.prepare(&format!("PRAGMA table_info({})", spec.name.quoted()))?;
                let existing: BTreeSet<String> = stmt
                    .query_map([], |r| r.get::<_, String>(1))?
                    .collect::<rusqlite::Result<_>>()?;
                if existing.is_empty() {
                    return Err(Error::Config(format!(
                        "table {} does not exist in the SQLite sink (create it, with a unique \
                         index on its key columns)",
                        spec.name
                    )));
                }
                if let Some(c) = spec.columns().find(|c| !existing.contains(c.as_str())) {
                    return Err(Error::Config(format!(
                        "column {c} of table {} does not exist in the SQLite sink",
                        spec.name
                    )));
                }
            }
            Ok(())
        })
        .await?;
        Ok(SqliteSink { db, tables })
    }

    /// The database underneath.
    pub fn db(&self) -> &Sqlite {
        &self.db
    }
}

/// The multi-row upsert of `rows` rows of a table (see the module docs).
fn upsert_sql(spec: &TableSpec, rows: usize) -> String {
    let cols: Vec<String> = spec.columns().map(Ident::quoted).collect();
    let one = format!("({})", vec!["?"; cols.len()].join(", "));
    let types: Vec<String> = spec
        .counters
        .iter()
        .map(|c| format!("typeof({})", c.quoted()))
        .collect();
    let keys: Vec<String> = spec.key.iter().map(Ident::quoted).collect();
    format!(
        "INSERT INTO {} ({}) VALUES {} ON CONFLICT ({}) DO UPDATE SET {}{}",
        spec.name.quoted(),
        cols.join(", "),
        vec![one; rows].join(", "),
        keys.join(", "),
        sink::update_sets(spec, "", "excluded."),
        if types.is_empty() {
            String::new()
        } else {
            format!(" RETURNING {}", types.join(", "))
        }
    )
}

#[async_trait]
impl Sink for SqliteSink {
    async fn apply(&self, claims: &[Claim], now_ms: u64) -> Result<SinkOutcome> {
        if claims.is_empty() {
            return Ok(SinkOutcome::default());
        }
        let claims = claims.to_vec();
        let tables = self.tables.clone();
        self.db
            .write(move |tx| {
                let ids: Vec<String> = claims.iter().map(|c| c.batch.to_string()).collect();
                let mut values: Vec<rusqlite::types::Value> = Vec::new();
                for id in &ids {
                    values.push(id.clone().into());
                    values.push((now_ms as i64).into());
                }
                let fresh: Vec<String> = tx
                    .prepare_cached(&format!(
                        "INSERT INTO {FLUSHED_BATCHES} (batch_id, applied_ms) VALUES {} \
                         ON CONFLICT DO NOTHING RETURNING batch_id",
                        vec!["(?, ?)"; ids.len()].join(", ")
                    ))?
                    .query_map(params_from_iter(values), |r| r.get(0))?
                    .collect::<rusqlite::Result<_>>()?;
                let mut statements = 1;
                let mut rows = 0;
                let todo = claims
                    .iter()
                    .filter(|c| fresh.contains(&c.batch.to_string()));
                for (table, updates) in by_table(todo) {
                    let spec = tables.get(table).map_err(|_| {
                        Error::Corrupt(format!(
                            "a buffered row names table {table:?}, which is not mapped"
                        ))
                    })?;
                    let per_row = spec.columns().count();
                    for chunk in updates.chunks((MAX_PARAMS / per_row).max(1)) {
                        let mut values: Vec<rusqlite::types::Value> = Vec::new();
                        for u in chunk {
                            for i in 0..spec.key.len() {
                                values.push(key_value(u, i)?.into());
                            }
                            for c in &spec.counters {
                                values.push(
                                    u.delta
                                        .counters
                                        .get(c.as_str())
                                        .copied()
                                        .unwrap_or(0)
                                        .into(),
                                );
                            }
                            for c in &spec.last_write {
                                values.push(match u.delta.last_write.get(c.as_str()) {
                                    Some(v) => v.clone().into(),
                                    None => rusqlite::types::Value::Null,
                                });
                            }
                        }
                        let mut stmt = tx.prepare_cached(&upsert_sql(spec, chunk.len()))?;
                        let ncounters = spec.counters.len();
                        if ncounters == 0 {
                            rows += stmt.execute(params_from_iter(values))? as u64;
                        } else {
                            let mut out = stmt.query(params_from_iter(values))?;
                            while let Some(r) = out.next()? {
                                rows += 1;
                                for i in 0..ncounters {
                                    let t: String = r.get(i)?;
                                    if t != "integer" && t != "null" {
                                        return Err(Error::Backend(format!(
                                            "adding a batch to column {} of table {} would \
                                             leave the 64-bit range; the batch was not written",
                                            spec.counters[i], spec.name
                                        )));
                                    }
                                }
                            }
                        }
                        statements += 1;
                    }
                }
                Ok(SinkOutcome {
                    applied: fresh.len() as u64,
                    already_applied: (ids.len() - fresh.len()) as u64,
                    rows,
                    statements,
                })
            })
            .await
    }

    async fn read(&self, row: &RowKey) -> Result<Option<StoredRow>> {
        let spec = self.tables.get(&row.table)?.clone();
        let key = row.key.clone();
        self.db
            .read(move |conn| {
                let sql = sink::select_sql(
                    &spec,
                    Ident::quoted,
                    |c| format!("CAST({} AS TEXT)", c.quoted()),
                    |_, c| format!("{} = ?", c.quoted()),
                );
                let mut stmt = conn.prepare_cached(&sql)?;
                let found = stmt
                    .query_row(params_from_iter(key.iter()), |r| {
                        StoredRow::from_columns(&spec, |i| r.get(i), |i| r.get(i))
                    })
                    .optional()?;
                Ok(found)
            })
            .await
    }

    async fn applied(&self, batches: &[BatchId]) -> Result<Vec<bool>> {
        let ids: Vec<String> = batches.iter().map(BatchId::to_string).collect();
        self.db
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(&format!(
                    "SELECT 1 FROM {FLUSHED_BATCHES} WHERE batch_id = ?1"
                ))?;
                ids.iter()
                    .map(|id| Ok(stmt.exists([id])?))
                    .collect::<Result<Vec<bool>>>()
            })
            .await
    }

    async fn prune(&self, before_ms: u64) -> Result<u64> {
        self.db
            .write(move |tx| {
                Ok(tx
                    .prepare_cached(&format!(
                        "DELETE FROM {FLUSHED_BATCHES} WHERE applied_ms < ?1"
                    ))?
                    .execute([before_ms as i64])? as u64)
            })
            .await
    }

    fn describe(&self) -> String {
        self.db.describe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffers::table::TableConfig;

    #[test]
    fn multi_row_upsert_with_overflow_check() {
        let spec = TableSpec::new(&TableConfig::of("groups", &["id"], &["n"], &["seen"])).unwrap();
        assert_eq!(
            upsert_sql(&spec, 2),
            "INSERT INTO \"groups\" (\"id\", \"n\", \"seen\") VALUES (?, ?, ?), (?, ?, ?) \
             ON CONFLICT (\"id\") DO UPDATE SET \"n\" = \"n\" + excluded.\"n\", \
             \"seen\" = COALESCE(excluded.\"seen\", \"seen\") RETURNING typeof(\"n\")"
        );
    }
}
