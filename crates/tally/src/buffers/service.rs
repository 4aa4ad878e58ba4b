//! The buffers' service: [`Buffers`] validates a change against its table's
//! mapping and hands it to the [`BufferStore`] in one round trip, and reads
//! a row through the buffer (SQL's values plus what is pending).
//!
//! It owns validation (key columns, counter and last-write columns, value
//! bounds) and the read that adds pending changes to a [`Sink`]'s row. It
//! does not flush (see [`super::flusher`]) nor open sinks (see
//! [`super::open_sink`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::ident::Ident;
use super::row::{BatchId, RowDelta, RowKey, RowUpdate};
use super::sink::{Sink, StoredRow};
use super::store::{BufferStats, BufferStore};
use super::table::Tables;
use crate::clock::{Clock, SharedClock};
use crate::engine::Applied;
use crate::error::{Error, Result};
use crate::idempotency::Mark;

/// The longest accepted key or last-write value, in bytes.
pub const MAX_VALUE_BYTES: usize = 4096;

/// A change to one row, as a caller states it.
///
/// ```
/// let u = tally::buffers::Update::new("groups")
///     .key("id", 42)
///     .add("times_seen", 1)
///     .set("last_seen", "2024-05-01T12:00:00Z");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Update {
    /// The table.
    pub table: String,
    /// Key column → value (every key column of the table, as text).
    pub key: BTreeMap<String, String>,
    /// Counter column → delta.
    #[serde(default)]
    pub add: BTreeMap<String, i64>,
    /// Last-write-wins column → value (as text; the database converts it).
    #[serde(default)]
    pub set: BTreeMap<String, String>,
}

impl Update {
    /// A change to a row of `table`.
    pub fn new(table: impl Into<String>) -> Self {
        Update {
            table: table.into(),
            ..Update::default()
        }
    }

    /// Sets a key column's value.
    pub fn key(mut self, column: &str, value: impl ToString) -> Self {
        self.key.insert(column.to_owned(), value.to_string());
        self
    }

    /// Adds `delta` to a counter column (twice the same column: summed).
    pub fn add(mut self, column: &str, delta: i64) -> Self {
        let d = self.add.entry(column.to_owned()).or_insert(0);
        *d = d.saturating_add(delta);
        self
    }

    /// Sets a last-write-wins column.
    pub fn set(mut self, column: &str, value: impl ToString) -> Self {
        self.set.insert(column.to_owned(), value.to_string());
        self
    }
}

/// A row read through the buffer: what SQL holds plus what is pending.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BufferedRow {
    /// The row as SQL holds it (`None`: not there yet).
    pub stored: Option<StoredRow>,
    /// Changes not yet in SQL, merged in order.
    pub pending: RowDelta,
    /// Per counter column: stored value (NULL as 0) plus pending delta.
    pub counters: BTreeMap<String, i64>,
    /// Per last-write column: the pending value, else the stored one.
    pub last_write: BTreeMap<String, Option<String>>,
}

/// Buffered counters over a [`BufferStore`]. Cheap to clone.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tally::Result<()> {
/// use tally::buffers::{TableConfig, Tables, Update};
///
/// // The SQL table `groups (id PRIMARY KEY, times_seen)`, as mapped.
/// let tables = Tables::new(&[TableConfig {
///     name: "groups".into(),
///     key: vec!["id".into()],
///     counters: vec!["times_seen".into()],
///     last_write: vec![],
/// }])?;
/// let tally = tally::Tally::open("sqlite::memory:").await?;
/// let buffers = tally.buffers(tables);
///
/// let seen = Update::new("groups").key("id", 42).add("times_seen", 1);
/// buffers.incr(&seen).await?; // merged into the row's pending changes
/// buffers.incr(&seen).await?;
/// assert_eq!(buffers.stats().await?.pending_rows, 1); // one row for the flusher to write
/// # Ok(())
/// # }
/// ```
///
/// A [`super::Flusher`] writes the pending rows to SQL; its page shows it.
#[derive(Clone, Debug)]
pub struct Buffers {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn BufferStore>,
    tables: Tables,
    clock: SharedClock,
}

impl Buffers {
    /// Buffers for the mapped `tables` on `store`, reading time from `clock`.
    pub fn new(store: Arc<dyn BufferStore>, tables: Tables, clock: Arc<dyn Clock>) -> Self {
        Buffers {
            inner: Arc::new(Inner {
                store,
                tables,
                clock,
            }),
        }
    }

    /// The mapped tables.
    pub fn tables(&self) -> &Tables {
        &self.inner.tables
    }

    /// The store underneath.
    pub fn store(&self) -> &Arc<dyn BufferStore> {
        &self.inner.store
    }

    /// The clock in use.
    pub fn clock(&self) -> &SharedClock {
        &self.inner.clock
    }

    /// Buffers one change to a row: one round trip, all or nothing.
    pub async fn incr(&self, update: &Update) -> Result<()> {
        let valid = self.validate(update)?;
        let now = self.inner.clock.now().as_millis();
        self.inner.store.incr(&valid, now, None).await.map(|_| ())
    }

    /// [`Buffers::incr`] with an idempotency key: the change carries the
    /// key's mark, so the same key sent again buffers nothing
    /// ([`Applied::Duplicate`]), whether or not the first change was
    /// flushed to SQL meanwhile.
    pub async fn incr_once(&self, key: &str, update: &Update) -> Result<Applied> {
        let now = self.inner.clock.now();
        let mark = Mark::of(key, now)?;
        let valid = self.validate(update)?;
        self.inner
            .store
            .incr(&valid, now.as_millis(), Some(&mark))
            .await
    }

    /// Checks a change against the table's mapping: every key column given
    /// (and nothing else as key), deltas only to counter columns, values
    /// only to last-write columns, at least one change, bounded values.
    pub fn validate(&self, update: &Update) -> Result<RowUpdate> {
        let row = self.row_key(&update.table, &update.key)?;
        let spec = self.inner.tables.get(&update.table)?;
        let mut delta = RowDelta::default();
        for (col, d) in &update.add {
            if !spec.counters.iter().any(|c| c.as_str() == col) {
                return Err(Error::InvalidInput(format!(
                    "{col:?} is not a counter column of table {} (counters: {})",
                    spec.name,
                    join(&spec.counters)
                )));
            }
            if *d == i64::MIN || *d == i64::MAX {
                return Err(Error::InvalidCount(format!(
                    "delta {d} of column {col} is out of range"
                )));
            }
            delta.counters.insert(col.clone(), *d);
        }
        for (col, v) in &update.set {
            let Some(c) = spec.last_write.iter().find(|c| c.as_str() == col) else {
                return Err(Error::InvalidInput(format!(
                    "{col:?} is not a last-write column of table {} (last-write: {})",
                    spec.name,
                    join(&spec.last_write)
                )));
            };
            check_value(v, c, &spec.name)?;
            delta.last_write.insert(col.clone(), v.clone());
        }
        if delta.is_empty() {
            return Err(Error::InvalidInput(format!(
                "a change to table {} needs at least one delta or value",
                spec.name
            )));
        }
        Ok(RowUpdate { row, delta })
    }

    /// Checks a row's key against its table's mapping: every key column
    /// given, nothing else, values bounded.
    pub fn row_key(&self, table: &str, key: &BTreeMap<String, String>) -> Result<RowKey> {
        let spec = self.inner.tables.get(table)?;
        let mut values = Vec::with_capacity(spec.key.len());
        for c in &spec.key {
            let v = key.get(c.as_str()).ok_or_else(|| {
                Error::InvalidInput(format!("key column {c} of table {} is missing", spec.name))
            })?;
            check_value(v, c, &spec.name)?;
            values.push(v.clone());
        }
        if let Some(extra) = key
            .keys()
            .find(|k| !spec.key.iter().any(|c| c.as_str() == k.as_str()))
        {
            return Err(Error::InvalidInput(format!(
                "{extra:?} is not a key column of table {} (keys: {})",
                spec.name,
                join(&spec.key)
            )));
        }
        Ok(RowKey {
            table: spec.name.as_str().to_owned(),
            key: values,
        })
    }

    /// A row as SQL holds it plus its changes not yet flushed.
    ///
    /// Changes inside a claim whose batch the sink has already recorded are
    /// not added again. The store and the sink are read one after the other,
    /// not in one snapshot: a flush of this very row finishing between the
    /// two reads can make the sum off by that batch for that instant. SQL
    /// totals themselves are always exact.
    pub async fn read(
        &self,
        sink: &dyn Sink,
        table: &str,
        key: &[(&str, &str)],
    ) -> Result<BufferedRow> {
        let key: BTreeMap<String, String> = key
            .iter()
            .map(|(c, v)| (c.to_string(), v.to_string()))
            .collect();
        let row = self.row_key(table, &key)?;
        let spec = self.inner.tables.get(table)?.clone();
        let parts = self.inner.store.pending(&row).await?;
        let batches: Vec<BatchId> = parts.iter().filter_map(|(b, _)| *b).collect();
        let applied = sink.applied(&batches).await?;
        let stored = sink.read(&row).await?;
        let mut pending = RowDelta::default();
        let mut applied = applied.into_iter();
        for (batch, delta) in &parts {
            if batch.is_some() && applied.next() == Some(true) {
                continue;
            }
            pending.merge(delta)?;
        }
        let mut counters = BTreeMap::new();
        for c in &spec.counters {
            let base = stored
                .as_ref()
                .and_then(|s| s.counters.get(c.as_str()).copied().flatten())
                .unwrap_or(0);
            let add = pending.counters.get(c.as_str()).copied().unwrap_or(0);
            counters.insert(
                c.as_str().to_owned(),
                base.checked_add(add).ok_or_else(|| {
                    Error::Corrupt(format!(
                        "column {c}: stored {base} + pending {add} overflows"
                    ))
                })?,
            );
        }
        let mut last_write = BTreeMap::new();
        for c in &spec.last_write {
            let v = pending.last_write.get(c.as_str()).cloned().or_else(|| {
                stored
                    .as_ref()
                    .and_then(|s| s.last_write.get(c.as_str()).cloned().flatten())
            });
            last_write.insert(c.as_str().to_owned(), v);
        }
        Ok(BufferedRow {
            stored,
            pending,
            counters,
            last_write,
        })
    }

    /// The backlog now.
    pub async fn stats(&self) -> Result<BufferStats> {
        let now = self.inner.clock.now().as_millis();
        self.inner.store.stats(now).await
    }
}

fn check_value(v: &str, column: &Ident, table: &Ident) -> Result<()> {
    if v.len() > MAX_VALUE_BYTES {
        return Err(Error::InvalidInput(format!(
            "the value of column {column} of table {table} has {} bytes, at most {MAX_VALUE_BYTES}",
            v.len()
        )));
    }
    if v.contains('\0') {
        return Err(Error::InvalidInput(format!(
            "the value of column {column} of table {table} contains a NUL character"
        )));
    }
    Ok(())
}

fn join(cols: &[Ident]) -> String {
    cols.iter()
        .map(Ident::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}
