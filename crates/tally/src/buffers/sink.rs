//! Where flushed batches go: a SQL database, behind the [`Sink`] trait.
//!
//! A sink applies a flush batch (one or more claims, e.g. one per Redis
//! shard) in ONE transaction that also records every claim's batch id in
//! `tally_flushed_batches`; a claim whose id is already recorded is not
//! applied again (so a claim re-flushed after a crash is counted once).
//! Inside the transaction each table's rows are written by one statement
//! (insert-if-missing, add the deltas, set the last-write values), not one
//! per row. Sinks: [`super::sink_postgres::PostgresSink`] and
//! [`super::sink_sqlite::SqliteSink`]; [`super::open_sink`] picks one from a
//! URL (in the parent, so that this trait's module imports neither sink).

use std::collections::BTreeMap;
use std::fmt;

use async_trait::async_trait;
use serde::Serialize;

use super::row::{BatchId, Claim, RowKey};
#[cfg(any(feature = "postgres", feature = "sqlite"))]
use super::{ident::Ident, table::TableSpec};
#[cfg(any(feature = "postgres", feature = "sqlite"))]
use crate::error::Error;
use crate::error::Result;

/// What applying a flush batch did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SinkOutcome {
    /// Claims written now.
    pub applied: u64,
    /// Claims whose batch id was already recorded: not written again.
    pub already_applied: u64,
    /// Rows written.
    pub rows: u64,
    /// SQL statements run (the batch-id insert included).
    pub statements: u64,
}

/// A row as stored in SQL: counters as integers, last-write values as text.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StoredRow {
    /// Counter column → value (`None` when SQL NULL).
    pub counters: BTreeMap<String, Option<i64>>,
    /// Last-write column → value as text (`None` when SQL NULL).
    pub last_write: BTreeMap<String, Option<String>>,
}

impl StoredRow {
    /// The row a [`select_sql`] statement read, given how to take its
    /// `i`-th value as an integer (`counter`) and as text (`text`).
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    pub(crate) fn from_columns<E>(
        spec: &TableSpec,
        mut counter: impl FnMut(usize) -> std::result::Result<Option<i64>, E>,
        mut text: impl FnMut(usize) -> std::result::Result<Option<String>, E>,
    ) -> std::result::Result<StoredRow, E> {
        let mut stored = StoredRow::default();
        for (i, c) in spec.counters.iter().enumerate() {
            stored.counters.insert(c.as_str().to_owned(), counter(i)?);
        }
        let first = spec.counters.len();
        for (i, c) in spec.last_write.iter().enumerate() {
            stored
                .last_write
                .insert(c.as_str().to_owned(), text(first + i)?);
        }
        Ok(stored)
    }
}

/// A SQL database that buffered batches are flushed into.
#[async_trait]
pub trait Sink: Send + Sync + fmt::Debug + 'static {
    /// Applies the claims whose batch ids are not yet recorded and records
    /// them, all in one transaction. `now_ms` dates the records (for pruning).
    async fn apply(&self, claims: &[Claim], now_ms: u64) -> Result<SinkOutcome>;

    /// The row as stored, or `None` if it is not there.
    async fn read(&self, row: &RowKey) -> Result<Option<StoredRow>>;

    /// Which of these batch ids are recorded as applied.
    async fn applied(&self, batches: &[BatchId]) -> Result<Vec<bool>>;

    /// Forgets batch ids recorded before `before_ms`; returns how many.
    async fn prune(&self, before_ms: u64) -> Result<u64>;

    /// A short description for logs (`postgres`, `sqlite:/path`).
    fn describe(&self) -> String;
}

/// The batch-id table's name (the same in every sink).
pub const FLUSHED_BATCHES: &str = "tally_flushed_batches";

/// The statement reading one row of `spec`: its counter columns (each as
/// `counter` reads it), then its last-write columns (as `text` reads them),
/// where every key column matches (`key`, given the column's place).
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) fn select_sql(
    spec: &TableSpec,
    counter: impl Fn(&Ident) -> String,
    text: impl Fn(&Ident) -> String,
    key: impl Fn(usize, &Ident) -> String,
) -> String {
    let values: Vec<String> = spec
        .counters
        .iter()
        .map(counter)
        .chain(spec.last_write.iter().map(text))
        .collect();
    let filter: Vec<String> = spec
        .key
        .iter()
        .enumerate()
        .map(|(i, c)| key(i, c))
        .collect();
    format!(
        "SELECT {} FROM {} WHERE {}",
        values.join(", "),
        spec.name.quoted(),
        filter.join(" AND ")
    )
}

/// The `DO UPDATE SET` list of an upsert into `spec`: each counter column
/// adds the new row's value, each last-write column takes it unless it is
/// NULL. `old` and `new` lead the columns of the stored row and of the new
/// one (`t.` and `EXCLUDED.`).
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) fn update_sets(spec: &TableSpec, old: &str, new: &str) -> String {
    let sets: Vec<String> = spec
        .counters
        .iter()
        .map(|c| format!("{q} = {old}{q} + {new}{q}", q = c.quoted()))
        .chain(
            spec.last_write
                .iter()
                .map(|c| format!("{q} = COALESCE({new}{q}, {old}{q})", q = c.quoted())),
        )
        .collect();
    sets.join(", ")
}

/// Rows of the claims grouped by table, in table order.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) fn by_table<'a>(
    claims: impl IntoIterator<Item = &'a Claim>,
) -> BTreeMap<&'a str, Vec<&'a super::row::RowUpdate>> {
    let mut groups: BTreeMap<&str, Vec<&super::row::RowUpdate>> = BTreeMap::new();
    for claim in claims {
        for row in &claim.rows {
            groups.entry(row.row.table.as_str()).or_default().push(row);
        }
    }
    groups
}

/// The `i`-th key value of a row, or an error if the stored row lacks it.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) fn key_value(update: &super::row::RowUpdate, i: usize) -> Result<String> {
    update.row.key.get(i).cloned().ok_or_else(|| {
        Error::Corrupt(format!(
            "buffered row {} has {} key values, its table maps more",
            update.row.id(),
            update.row.key.len()
        ))
    })
}
