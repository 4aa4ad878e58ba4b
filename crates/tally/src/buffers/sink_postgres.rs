//! The PostgreSQL sink (sqlx).
//!
//! At start, it reads each mapped table's column types from the catalog
//! (`format_type`), failing with a message naming any missing table or
//! column. A flush batch is one transaction: insert its claims' batch ids
//! into `tally_flushed_batches` in one statement (`ON CONFLICT DO NOTHING
//! RETURNING`: an id not returned was applied before, and its rows are
//! skipped), then per table ONE statement over all the remaining rows:
//!
//! ```sql
//! INSERT INTO "t" AS t ("id", "times_seen", "last_seen")
//! SELECT CAST(u.k0 AS bigint), CAST(u.c0 AS integer), CAST(u.l0 AS timestamptz)
//! FROM unnest($1::text[], $2::int8[], $3::text[]) AS u(k0, c0, l0)
//! ON CONFLICT ("id") DO UPDATE SET
//!   "times_seen" = t."times_seen" + EXCLUDED."times_seen",
//!   "last_seen" = COALESCE(EXCLUDED."last_seen", t."last_seen")
//! ```
//!
//! Values travel as text and are cast to the column's own type, so any type
//! with a text form works. A row that has no value for a last-write column
//! keeps the stored one (NULL cannot be written through the buffer). The
//! mapped key columns need a unique index. Identifiers are validated
//! ([`super::ident`]) and quoted.

use std::collections::BTreeMap;

use async_trait::async_trait;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, Row};

use super::ident::Ident;
use super::row::{BatchId, Claim, RowKey};
use super::sink::{self, FLUSHED_BATCHES, Sink, SinkOutcome, StoredRow, by_table, key_value};
use super::table::{TableSpec, Tables};
use crate::error::{Error, Result};

/// Connections kept by the sink's pool.
pub const POOL_SIZE: u32 = 4;

/// A PostgreSQL database receiving flushed batches.
#[derive(Clone, Debug)]
pub struct PostgresSink {
    pool: PgPool,
    tables: BTreeMap<String, PgTable>,
}

/// A table's mapping with its column types and its prepared SQL.
#[derive(Clone, Debug)]
struct PgTable {
    spec: TableSpec,
    upsert: String,
    select: String,
}

impl PostgresSink {
    /// Connects, creates `tally_flushed_batches` if needed and checks the
    /// mapped tables.
    pub async fn connect(url: &str, tables: Tables) -> Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(POOL_SIZE)
            .acquire_timeout(std::time::Duration::from_secs(10))
            .connect(url)
            .await
            .map_err(|e| Error::Unavailable(format!("cannot connect to PostgreSQL: {e}")))?;
        sqlx::query(AssertSqlSafe(format!(
            "CREATE TABLE IF NOT EXISTS {FLUSHED_BATCHES} (
                 batch_id text PRIMARY KEY,
                 applied_ms bigint NOT NULL
             )"
        )))
        .execute(&pool)
        .await?;
        let mut prepared = BTreeMap::new();
        for spec in tables.iter() {
            let types = column_types(&pool, &spec.name).await?;
            let type_of = |c: &Ident| {
                types.get(c.as_str()).cloned().ok_or_else(|| {
                    Error::Config(format!(
                        "column {c} of table {} does not exist in PostgreSQL",
                        spec.name
                    ))
                })
            };
            let mut col_types = BTreeMap::new();
            for c in spec.columns() {
                col_types.insert(c.as_str().to_owned(), type_of(c)?);
            }
            prepared.insert(
                spec.name.as_str().to_owned(),
                PgTable {
                    upsert: upsert_sql(spec, &col_types),
                    select: select_sql(spec, &col_types),
                    spec: spec.clone(),
                },
            );
        }
        Ok(PostgresSink {
            pool,
            tables: prepared,
        })
    }

    /// The connection pool (for tests and benchmarks).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    fn table(&self, name: &str) -> Result<&PgTable> {
        self.tables.get(name).ok_or_else(|| {
            Error::Corrupt(format!(
                "a buffered row names table {name:?}, which is not mapped"
            ))
        })
    }
}

/// Column name → `format_type` of a table, or an error if it is missing.
async fn column_types(pool: &PgPool, table: &Ident) -> Result<BTreeMap<String, String>> {
    let rows = sqlx::query(
        "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod)
         FROM pg_attribute a
         WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped",
    )
    .bind(table.quoted())
    .fetch_all(pool)
    .await?;
    if rows.is_empty() {
        return Err(Error::Config(format!(
            "table {table} does not exist in PostgreSQL (create it, with a unique index on \
             its key columns)"
        )));
    }
    rows.iter()
        .map(|r| Ok((r.try_get::<String, _>(0)?, r.try_get::<String, _>(1)?)))
        .collect()
}

/// The one-statement upsert of a table (see the module docs).
fn upsert_sql(spec: &TableSpec, types: &BTreeMap<String, String>) -> String {
    let mut cols = Vec::new();
    let mut casts = Vec::new();
    let mut arrays = Vec::new();
    let mut aliases = Vec::new();
    let mut n = 0;
    let mut add = |c: &Ident, alias: String, array_type: &str| {
        n += 1;
        cols.push(c.quoted());
        casts.push(format!("CAST(u.{alias} AS {})", types[c.as_str()]));
        arrays.push(format!("${n}::{array_type}[]"));
        aliases.push(alias);
    };
    for (i, c) in spec.key.iter().enumerate() {
        add(c, format!("k{i}"), "text");
    }
    for (i, c) in spec.counters.iter().enumerate() {
        add(c, format!("c{i}"), "int8");
    }
    for (i, c) in spec.last_write.iter().enumerate() {
        add(c, format!("l{i}"), "text");
    }
    let keys: Vec<String> = spec.key.iter().map(Ident::quoted).collect();
    format!(
        "INSERT INTO {table} AS t ({cols}) SELECT {casts} FROM unnest({arrays}) AS u({aliases}) \
         ON CONFLICT ({keys}) DO UPDATE SET {sets}",
        table = spec.name.quoted(),
        cols = cols.join(", "),
        casts = casts.join(", "),
        arrays = arrays.join(", "),
        aliases = aliases.join(", "),
        keys = keys.join(", "),
        sets = sink::update_sets(spec, "t.", "EXCLUDED."),
    )
}

/// Reads one row: counters as bigint, last-write values as text.
fn select_sql(spec: &TableSpec, types: &BTreeMap<String, String>) -> String {
    sink::select_sql(
        spec,
        |c| format!("CAST({} AS bigint)", c.quoted()),
        |c| format!("CAST({} AS text)", c.quoted()),
        |i, c| format!("{} = CAST(${} AS {})", c.quoted(), i + 1, types[c.as_str()]),
    )
}

#[async_trait]
impl Sink for PostgresSink {
    async fn apply(&self, claims: &[Claim], now_ms: u64) -> Result<SinkOutcome> {
        if claims.is_empty() {
            return Ok(SinkOutcome::default());
        }
        let ids: Vec<String> = claims.iter().map(|c| c.batch.to_string()).collect();
        let mut tx = self.pool.begin().await?;
        let fresh: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!(
            "INSERT INTO {FLUSHED_BATCHES} (batch_id, applied_ms) \
             SELECT unnest($1::text[]), $2 ON CONFLICT DO NOTHING RETURNING batch_id"
        )))
        .bind(&ids)
        .bind(now_ms as i64)
        .fetch_all(&mut *tx)
        .await?;
        let mut outcome = SinkOutcome {
            applied: fresh.len() as u64,
            already_applied: (ids.len() - fresh.len()) as u64,
            statements: 1,
            rows: 0,
        };
        let todo = claims
            .iter()
            .filter(|c| fresh.contains(&c.batch.to_string()));
        for (table, updates) in by_table(todo) {
            let table = self.table(table)?;
            let mut query = sqlx::query(AssertSqlSafe(table.upsert.clone()));
            for i in 0..table.spec.key.len() {
                let col: Vec<String> = updates
                    .iter()
                    .map(|u| key_value(u, i))
                    .collect::<Result<_>>()?;
                query = query.bind(col);
            }
            for c in &table.spec.counters {
                let col: Vec<i64> = updates
                    .iter()
                    .map(|u| u.delta.counters.get(c.as_str()).copied().unwrap_or(0))
                    .collect();
                query = query.bind(col);
            }
            for c in &table.spec.last_write {
                let col: Vec<Option<String>> = updates
                    .iter()
                    .map(|u| u.delta.last_write.get(c.as_str()).cloned())
                    .collect();
                query = query.bind(col);
            }
            outcome.rows += query.execute(&mut *tx).await?.rows_affected();
            outcome.statements += 1;
        }
        tx.commit().await?;
        Ok(outcome)
    }

    async fn read(&self, row: &RowKey) -> Result<Option<StoredRow>> {
        let table = self.table(&row.table)?;
        let mut query = sqlx::query(AssertSqlSafe(table.select.clone()));
        for v in &row.key {
            query = query.bind(v.clone());
        }
        let Some(found) = query.fetch_optional(&self.pool).await? else {
            return Ok(None);
        };
        let stored =
            StoredRow::from_columns(&table.spec, |i| found.try_get(i), |i| found.try_get(i))?;
        Ok(Some(stored))
    }

    async fn applied(&self, batches: &[BatchId]) -> Result<Vec<bool>> {
        let ids: Vec<String> = batches.iter().map(BatchId::to_string).collect();
        let found: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT batch_id FROM {FLUSHED_BATCHES} WHERE batch_id = ANY($1)"
        )))
        .bind(&ids)
        .fetch_all(&self.pool)
        .await?;
        Ok(ids.iter().map(|id| found.contains(id)).collect())
    }

    async fn prune(&self, before_ms: u64) -> Result<u64> {
        Ok(sqlx::query(AssertSqlSafe(format!(
            "DELETE FROM {FLUSHED_BATCHES} WHERE applied_ms < $1"
        )))
        .bind(before_ms as i64)
        .execute(&self.pool)
        .await?
        .rows_affected())
    }

    fn describe(&self) -> String {
        "postgres".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffers::table::TableConfig;

    #[test]
    fn one_statement_per_table_with_casts() {
        let spec = TableSpec::new(&TableConfig::of(
            "groups",
            &["id"],
            &["times_seen"],
            &["last_seen"],
        ))
        .unwrap();
        let types: BTreeMap<String, String> = [
            ("id", "bigint"),
            ("times_seen", "integer"),
            ("last_seen", "timestamp with time zone"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(
            upsert_sql(&spec, &types),
            "INSERT INTO \"groups\" AS t (\"id\", \"times_seen\", \"last_seen\") \
             SELECT CAST(u.k0 AS bigint), CAST(u.c0 AS integer), \
             CAST(u.l0 AS timestamp with time zone) \
             FROM unnest($1::text[], $2::int8[], $3::text[]) AS u(k0, c0, l0) \
             ON CONFLICT (\"id\") DO UPDATE SET \"times_seen\" = t.\"times_seen\" + \
             EXCLUDED.\"times_seen\", \"last_seen\" = COALESCE(EXCLUDED.\"last_seen\", t.\"last_seen\")"
        );
        assert_eq!(
            select_sql(&spec, &types),
            "SELECT CAST(\"times_seen\" AS bigint), CAST(\"last_seen\" AS text) FROM \"groups\" \
             WHERE \"id\" = CAST($1 AS bigint)"
        );
    }
}
