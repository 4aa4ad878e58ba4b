//! The engine's store in SQLite: every space, one template of tables.
//!
//! Each space has a registry table (series id and name, names in binary
//! order, the same order as Redis's lexicographic ranges) and a cell table
//! keyed by (series, precision, slice), made from one template. Counters
//! keep the tables they always had, so existing files keep working:
//! `tally_counter(id, name)` and `tally_sample(counter_id, precision, slice,
//! count)`; any other space gets `tally_<space>_series(id, name)` and
//! `tally_<space>_cell(series_id, precision, slice, value)`. Sums are
//! stored as INTEGER, every other kind as a BLOB of its encoding.
//!
//! A write is one `BEGIN IMMEDIATE` transaction: each cell's old value is
//! read, merged with the delta in Rust by the kind's rule, and written back;
//! a merge that leaves the kind's range fails the transaction, which rolls
//! back, so nothing is written (SQLite would silently turn an overflowing
//! integer sum into a float). A space of gauges also has
//! `tally_<space>_current(series_id, value)`: each gauge's current value
//! (the value after its latest operation), from which a write's adjustments
//! start in a slice that holds nothing yet. `tally_writer` records each
//! writer lane's last sequence number for exactly-once retries, shared by
//! every space.
//!
//! Retention holds without a cleaner: a write that opens a new slice of a
//! (series, precision) first removes that pair's slices older than the
//! `keep` slices ending with the new one (for a write at the current time,
//! exactly what the cleaner's cutoff removes), one range delete on the
//! primary key, costing what it removes; a write to a slice that exists
//! (the hot path) does not trim. So a (series, precision) never holds
//! more than `keep` slices below its newest, and a store that only ever
//! sees `tally incr` from cron stays bounded. The cleaner (a range delete
//! per series too) still removes what writes leave: the last slices of a
//! series nobody writes any more, emptied series, idle writer lanes.

mod apply;
mod tables;
pub(super) use tables::WRITERS;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, params};

use super::Sqlite;
use crate::clock::SharedClock;
use crate::engine::store::{HeldReads, Reads, branch_of, check_sums};
use crate::engine::{
    Applied, Batch, CleanJob, CleanReport, SeriesList, SliceRead, SliceSel, SliceStore, Slices,
    Space,
};
use crate::error::{Error, Result};
use crate::name::Name;
use crate::sqlite::{SMALL_READ_ROWS, in_snapshot};

use apply::apply_in;
use tables::{Tables, kind_table, stored};

/// How long a writer lane's last sequence number is remembered after its
/// last write.
pub const WRITER_TTL_SECS: u64 = 7 * 24 * 3600;

/// At most how many slices `read` can find: the names times the slices
/// each read precision keeps (a write trims each to its `keep`; a
/// precision the space does not have finds none, counted as one lookup).
fn most_slices(read: &SliceRead<'_>) -> u64 {
    let per_name: u64 = read
        .precisions
        .iter()
        .map(|&r| {
            read.space
                .precisions
                .iter()
                .find(|p| p.seconds == r)
                .map_or(1, |p| p.keep.max(1))
        })
        .fold(0, u64::saturating_add);
    per_name.saturating_mul(read.names.len() as u64)
}

/// Every space's values in a [`Sqlite`] database.
#[derive(Clone, Debug)]
pub struct SqliteSliceStore {
    db: Sqlite,
    clock: SharedClock,
    /// The SQL of each space whose tables exist.
    tables: Arc<Mutex<HashMap<&'static str, Arc<Tables>>>>,
}

impl SqliteSliceStore {
    /// Creates the counters' tables (and the writers') if needed; other
    /// spaces' tables are created on first use. `clock` dates write ids
    /// (for expiry).
    pub async fn new(db: Sqlite, clock: SharedClock) -> Result<Self> {
        let store = SqliteSliceStore {
            db,
            clock,
            tables: Arc::default(),
        };
        store.tables(&Space::counters(&[], 0)).await?;
        Ok(store)
    }

    /// The database underneath.
    pub fn db(&self) -> &Sqlite {
        &self.db
    }

    /// The SQL of `space`, creating its tables on first use.
    async fn tables(&self, space: &Space) -> Result<Arc<Tables>> {
        let kind = kind_table(space.kind)?;
        if let Some(t) = self.lock().get(space.id) {
            return Ok(t.clone());
        }
        let tables = Arc::new(Tables::of(space, kind));
        self.db.create_tables(tables.schema.clone()).await?;
        self.lock().insert(space.id, tables.clone());
        Ok(tables)
    }

    /// [`read_in`] on a reader connection, in one snapshot.
    async fn read_with<T: Send + 'static>(
        &self,
        read: SliceRead<'_>,
        value: impl Fn(ValueRef<'_>) -> Result<T> + Send + 'static,
    ) -> Result<HeldReads<T>> {
        let sql = self.tables(read.space).await?;
        let names = read.names.to_vec();
        let precisions = read.precisions.to_vec();
        let slices = read.slices;
        let job = move |conn: &Connection| {
            in_snapshot(conn, || {
                read_in(conn, &sql, &names, &precisions, slices, value)
            })
        };
        self.db.read_sized(most_slices(&read), job).await
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<&'static str, Arc<Tables>>> {
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Every selected slice of each (series, precision), each value read by
/// `value`, in one snapshot; `None` for a name that is no series of the
/// space.
fn read_in<T>(
    conn: &Connection,
    sql: &Tables,
    names: &[Name],
    precisions: &[u64],
    sel: SliceSel,
    value: impl Fn(ValueRef<'_>) -> Result<T>,
) -> Result<HeldReads<T>> {
    let mut id_of = conn.prepare_cached(&sql.series_id)?;
    let mut rows = conn.prepare_cached(match sel {
        SliceSel::All => &sql.read_all,
        SliceSel::Range { .. } => &sql.read_range,
    })?;
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let id: Option<i64> = id_of.query_row([name.as_str()], |r| r.get(0)).optional()?;
        let Some(id) = id else {
            out.push(None);
            continue;
        };
        let mut per = Vec::with_capacity(precisions.len());
        for &r in precisions {
            let mut found = match sel {
                SliceSel::All => rows.query(params![id, r as i64])?,
                SliceSel::Range { from, to } => rows.query(params![
                    id,
                    r as i64,
                    from.min(i64::MAX as u64) as i64,
                    to.min(i64::MAX as u64) as i64
                ])?,
            };
            // One pass over the rows, straight into the result: reads of
            // every precision are on the latency path.
            let mut slices = Vec::new();
            while let Some(row) = found.next()? {
                slices.push((row.get::<_, i64>(0)? as u64, value(row.get_ref(1)?)?));
            }
            per.push(slices);
        }
        out.push(Some(per));
    }
    Ok(out)
}

/// The reads of names that are no series as reads of nothing, at each
/// precision.
fn held_or_empty<T>(reads: HeldReads<T>, precisions: usize) -> Reads<T> {
    reads
        .into_iter()
        .map(|r| r.unwrap_or_else(|| (0..precisions).map(|_| Vec::new()).collect()))
        .collect()
}

#[async_trait]
impl SliceStore for SqliteSliceStore {
    async fn apply(&self, batch: &Batch) -> Result<Applied> {
        let sql = self.tables(&batch.space).await?;
        let batch = batch.clone();
        let now = self.clock.now().whole_secs() as i64;
        self.db
            .write(move |tx| apply_in(tx, &sql, &batch, now))
            .await
    }

    async fn read(&self, read: SliceRead<'_>) -> Result<Vec<Vec<Slices>>> {
        let kind = kind_table(read.space.kind)?;
        let precisions = read.precisions.len();
        let reads = self.read_with(read, move |v| stored(kind, v)).await?;
        Ok(held_or_empty(reads, precisions))
    }

    async fn read_sums(&self, read: SliceRead<'_>) -> Result<Reads<i64>> {
        check_sums(read.space)?;
        let precisions = read.precisions.len();
        let reads = self
            .read_with(read, |v| match v {
                ValueRef::Integer(i) => Ok(i),
                other => Err(Error::Corrupt(format!(
                    "a sum cell holds {:?}",
                    other.data_type()
                ))),
            })
            .await?;
        Ok(held_or_empty(reads, precisions))
    }

    async fn read_many(&self, reads: &[(SliceRead<'_>, bool)]) -> Result<Vec<HeldReads>> {
        // read_in answers None for a name that is no series; a read that
        // did not ask gets it as `read` answers it, empty.
        let most = reads
            .iter()
            .map(|(r, _)| most_slices(r))
            .fold(0, u64::saturating_add);
        let mut owned = Vec::with_capacity(reads.len());
        for (r, held) in reads {
            let kind = kind_table(r.space.kind)?;
            let sql = self.tables(r.space).await?;
            let read = (r.names.to_vec(), r.precisions.to_vec(), r.slices, *held);
            owned.push((sql, kind, read));
        }
        let job = move |conn: &Connection| {
            in_snapshot(conn, || {
                owned
                    .iter()
                    .map(|(sql, kind, (names, precisions, slices, held))| {
                        let read =
                            read_in(conn, sql, names, precisions, *slices, |v| stored(kind, v))?;
                        Ok(if *held {
                            read
                        } else {
                            let all = held_or_empty(read, precisions.len());
                            all.into_iter().map(Some).collect()
                        })
                    })
                    .collect()
            })
        };
        self.db.read_sized(most, job).await
    }

    async fn list(&self, list: SeriesList<'_>) -> Result<Vec<String>> {
        let SeriesList {
            space,
            prefix,
            after,
            limit,
            collapse,
        } = list;
        let sql = self.tables(space).await?;
        let prefix = prefix.to_owned();
        let page = move |after: Option<String>, limit: usize| {
            let (sql, prefix) = (sql.clone(), prefix.clone());
            move |conn: &Connection| match collapse {
                // Many statements: one read transaction, not one each.
                Some(nodes) => in_snapshot(conn, || {
                    list_collapsed(conn, &sql, &prefix, after.as_deref(), nodes, limit)
                }),
                None => list_plain(conn, &sql, &prefix, after.as_deref(), limit),
            }
        };
        // A long page (a Graphite walk's 10,000) that turns out short (one
        // host's metrics) is a small read: its first part is read on the
        // calling thread, the rest, if any, on the pool after it. A
        // collapsed part of n names may touch (BRANCH_STEPS + 1) × n rows.
        let rows_a_name = if collapse.is_some() {
            BRANCH_STEPS + 1
        } else {
            1
        };
        let small = (SMALL_READ_ROWS as usize / rows_a_name).min(limit);
        let mut names = self
            .db
            .read_small(page(after.map(str::to_owned), small))
            .await?;
        if names.len() == small && limit > small {
            let last = names.last().cloned();
            let rest = self.db.read(page(last, limit - small)).await?;
            names.extend(rest);
        }
        Ok(names)
    }

    async fn contains(&self, space: &Space, names: &[Name]) -> Result<Vec<bool>> {
        let sql = self.tables(space).await?;
        let names = names.to_vec();
        self.db
            .read_sized(names.len() as u64, move |conn| {
                let mut stmt = conn.prepare_cached(&sql.series_id)?;
                names
                    .iter()
                    .map(|name| Ok(stmt.exists([name.as_str()])?))
                    .collect()
            })
            .await
    }

    async fn delete(&self, space: &Space, name: &Name) -> Result<bool> {
        let sql = self.tables(space).await?;
        let name = name.clone();
        self.db
            .write(move |tx| {
                let id: Option<i64> = tx
                    .prepare_cached(&sql.series_id)?
                    .query_row([name.as_str()], |r| r.get(0))
                    .optional()?;
                let Some(id) = id else { return Ok(false) };
                let cells = tx.prepare_cached(&sql.delete_cells)?.execute([id])?;
                tx.prepare_cached(&sql.delete_series)?.execute([id])?;
                if sql.kind.current {
                    tx.prepare_cached(&sql.delete_current)?.execute([id])?;
                }
                Ok(cells > 0)
            })
            .await
    }

    async fn clean(&self, space: &Space, job: &CleanJob) -> Result<CleanReport> {
        let sql = self.tables(space).await?;
        let due: Vec<(i64, i64)> = space
            .precisions
            .iter()
            .filter_map(|r| job.cutoff_of(r).map(|c| (r.seconds as i64, c)))
            .collect();
        let batch = job.batch as i64;
        let forget_before = job.now.whole_secs() as i64 - WRITER_TTL_SECS as i64;
        let mut report = CleanReport::default();
        let mut after = 0i64;
        loop {
            let due = due.clone();
            let sql = sql.clone();
            let step = self
                .db
                .write(move |tx| {
                    let ids = tx
                        .prepare_cached(&sql.series_after)?
                        .query_map(params![after, batch], |r| r.get::<_, i64>(0))?
                        .collect::<rusqlite::Result<Vec<i64>>>()?;
                    let mut trim = tx.prepare_cached(&sql.trim)?;
                    let mut drop_empty = tx.prepare_cached(&sql.drop_empty)?;
                    let mut step = CleanReport {
                        scanned: ids.len() as u64,
                        round_trips: 1,
                        ..CleanReport::default()
                    };
                    for &id in &ids {
                        for &(r, cutoff) in &due {
                            step.samples_removed += trim.execute(params![id, r, cutoff])? as u64;
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
        self.db.ping().await
    }
}

/// A page of names in [prefix, upper), after the cursor: one index range
/// scan bounded at both ends (a bound SQLite cannot seek to, such as `?3
/// IS NULL OR name < ?3`, makes it scan to the end of the table).
fn list_plain(
    conn: &Connection,
    sql: &Tables,
    prefix: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<String>> {
    let (lower, exclusive) = match after {
        Some(a) if a >= prefix => (a, true),
        _ => (prefix, false),
    };
    let upper = crate::name::prefix_upper(prefix);
    let query = &sql.list[usize::from(exclusive)][usize::from(upper.is_some())];
    let mut stmt = conn.prepare_cached(query)?;
    let names = match &upper {
        Some(upper) => stmt
            .query_map(params![lower, upper], |r| r.get(0))?
            .take(limit)
            .collect::<rusqlite::Result<Vec<String>>>()?,
        None => stmt
            .query_map(params![lower], |r| r.get(0))?
            .take(limit)
            .collect::<rusqlite::Result<Vec<String>>>()?,
    };
    Ok(names)
}

/// Names of a branch stepped over before seeking past the rest: a seek
/// costs about as much as a few steps, and a branch may hold one name.
const BRANCH_STEPS: usize = 4;

/// A collapsed listing ([`SeriesList::collapse`]): the names in order, a
/// branch's first one listed and the rest of it passed over by seeking
/// the name index past it (after a few steps), so that a level of 1,000
/// nodes over 100,000 names costs about 1,000 seeks, not 100,000 steps.
fn list_collapsed(
    conn: &Connection,
    sql: &Tables,
    prefix: &str,
    after: Option<&str>,
    nodes: usize,
    limit: usize,
) -> Result<Vec<String>> {
    // The least name past `branch`: every name in it starts with its
    // text and dot, and `/` follows `.`.
    let past = |branch: &str| format!("{}/", &branch[..branch.len() - 1]);
    // Names hold no control characters, so the least name after `a` is
    // at or past `a` and U+0001.
    let mut lower = match after {
        Some(a) => branch_of(a, nodes).map_or_else(|| format!("{a}\u{1}"), past),
        None => String::new(),
    }
    .max(prefix.to_owned());
    let upper = crate::name::prefix_upper(prefix);
    let mut stmt = conn.prepare_cached(&sql.list[0][usize::from(upper.is_some())])?;
    let mut out = Vec::new();
    'seek: loop {
        let mut rows = match &upper {
            Some(upper) => stmt.query(params![lower, upper])?,
            None => stmt.query(params![lower])?,
        };
        let mut branch: Option<String> = None;
        let mut stepped = 0;
        while let Some(row) = rows.next()? {
            let name = row.get_ref(0)?.as_str().map_err(rusqlite::Error::from)?;
            if let Some(b) = branch.as_deref().filter(|b| name.starts_with(b)) {
                stepped += 1;
                if stepped >= BRANCH_STEPS {
                    lower = past(b);
                    continue 'seek;
                }
                continue;
            }
            out.push(name.to_owned());
            if out.len() == limit {
                break;
            }
            branch = branch_of(name, nodes).map(str::to_owned);
            stepped = 0;
        }
        return Ok(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{CellDelta, Kind, SeriesWrite, Value};

    fn space() -> Arc<Space> {
        Space::visits(&[60, 1], 10)
    }

    async fn store() -> SqliteSliceStore {
        let clock: SharedClock = Arc::new(crate::clock::ManualClock::at(1000.0));
        SqliteSliceStore::new(Sqlite::open_in_memory().unwrap(), clock)
            .await
            .unwrap()
    }

    fn write(name: &str, cells: &[(u64, u64, i64)]) -> SeriesWrite {
        SeriesWrite {
            name: Name::new(name).unwrap(),
            cells: cells
                .iter()
                .map(|&(precision, slice, d)| CellDelta {
                    precision,
                    slice,
                    delta: Value::Sum(d),
                })
                .collect(),
        }
    }

    /// Every precision of one counter (7 × 120 slices) and one series of a
    /// render are small reads; 100 counters, or a precision keeping a day
    /// of seconds, are not.
    #[test]
    fn what_makes_a_read_small() {
        let precisions = [1, 5, 60, 300, 3600, 18000, 86400];
        let counters = Space::counters(&precisions, 120);
        let names: Vec<Name> = (0..100)
            .map(|i| Name::new(format!("c{i}")).unwrap())
            .collect();
        let one = SliceRead::new(&counters, &names[..1], &precisions);
        assert_eq!(most_slices(&one), 840);
        assert!(most_slices(&one) <= SMALL_READ_ROWS);
        let hundred = SliceRead::new(&counters, &names, &[60]);
        assert_eq!(most_slices(&hundred), 12_000);
        let day = Space::counters(&[1], 86_400);
        assert_eq!(
            most_slices(&SliceRead::new(&day, &names[..1], &[1])),
            86_400
        );
        // A precision the space does not keep finds nothing: one lookup.
        assert_eq!(
            most_slices(&SliceRead::new(&counters, &names[..2], &[7])),
            2
        );
    }

    /// A page longer than a small read is read in two parts (the first
    /// on the calling thread): every name once, in order, whichever part
    /// the page's end or a prefix's falls in.
    #[tokio::test]
    async fn a_long_page_reads_whole_across_its_two_parts() {
        let store = store().await;
        let space = space();
        let names: Vec<String> = (0..1500).map(|i| format!("n.{i:04}")).collect();
        let batch = Batch {
            space: space.clone(),
            writes: names.iter().map(|n| write(n, &[(1, 100, 1)])).collect(),
            seq: None,
        };
        store.apply(&batch).await.unwrap();
        let small = SMALL_READ_ROWS as usize;
        for limit in [10, small - 1, small, small + 1, 1200, 1500, 10_000] {
            let page = store.list(SeriesList::new(&space, limit)).await.unwrap();
            assert_eq!(page, names[..limit.min(1500)], "limit {limit}");
        }
        let after = store
            .list(SeriesList::new(&space, 10_000).after(Some("n.0099")))
            .await
            .unwrap();
        assert_eq!(after, names[100..]);
        let under = store
            .list(SeriesList::new(&space, 10_000).prefix("n.1"))
            .await
            .unwrap();
        assert_eq!(under, names[1000..]);
    }

    /// A space other than counters gets its own tables from the template,
    /// and its series do not mix with the counters'.
    #[tokio::test]
    async fn a_new_space_gets_its_own_tables() {
        let store = store().await;
        let space = space();
        let batch = Batch {
            space: space.clone(),
            writes: vec![write("a", &[(1, 100, 2), (1, 101, 3), (60, 60, 5)])],
            seq: None,
        };
        store.apply(&batch).await.unwrap();
        store.apply(&batch).await.unwrap();
        let a = [Name::new("a").unwrap()];
        let got = store
            .read(SliceRead::new(&space, &a, &[1, 60]))
            .await
            .unwrap();
        assert_eq!(
            got,
            vec![vec![
                vec![(100, Value::Sum(4)), (101, Value::Sum(6))],
                vec![(60, Value::Sum(10))]
            ]]
        );
        let range = store
            .read(SliceRead::new(&space, &a, &[1]).slices(SliceSel::Range { from: 101, to: 200 }))
            .await
            .unwrap();
        assert_eq!(range, vec![vec![vec![(101, Value::Sum(6))]]]);
        let counters = Space::counters(&[1], 10);
        assert!(
            store
                .list(SeriesList::new(&counters, 10))
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            store.list(SeriesList::new(&space, 10)).await.unwrap(),
            vec!["a"]
        );
        let tables: i64 = store
            .db()
            .read(|c| {
                Ok(c.query_row(
                    "SELECT count(*) FROM sqlite_master WHERE name IN ('tally_visits_series', 'tally_visits_cell')",
                    [],
                    |r| r.get(0),
                )?)
            })
            .await
            .unwrap();
        assert_eq!(tables, 2);
        // An overflow anywhere in the batch writes nothing.
        let over = Batch {
            space: space.clone(),
            writes: vec![
                write("a", &[(1, 100, 1)]),
                write("b", &[(1, 100, i64::MAX)]),
            ],
            seq: None,
        };
        store.apply(&over).await.unwrap();
        let err = store.apply(&over).await.unwrap_err();
        assert!(
            matches!(&err, Error::Overflow { name, precision: 1, slice: 100, .. } if name == "b"),
            "{err}"
        );
        let got = store.read(SliceRead::new(&space, &a, &[1])).await.unwrap();
        assert_eq!(got[0][0][0], (100, Value::Sum(5)));
        assert!(store.delete(&space, &a[0]).await.unwrap());
        assert!(!store.delete(&space, &a[0]).await.unwrap());
    }

    /// A listing by prefix seeks the name index at both ends: with an upper
    /// bound SQLite could not use, finding 100 names under `app.host123.`
    /// among 100,000 read every name after them (7 ms instead of 30 µs).
    #[test]
    fn listings_seek_the_name_index_at_both_ends() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let tables = Tables::of(&space(), kind_table(Kind::Sum).unwrap());
        conn.execute_batch(&tables.schema).unwrap();
        for (i, by_lower) in tables.list.iter().enumerate() {
            for (j, sql) in by_lower.iter().enumerate() {
                let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
                let values: Vec<rusqlite::types::Value> =
                    vec!["a".to_owned().into(), "b".to_owned().into()];
                let values = &values[..stmt.parameter_count()];
                let plan: String = stmt
                    .query_row(rusqlite::params_from_iter(values), |r| r.get(3))
                    .unwrap();
                let wanted = if j == 1 {
                    "(name>? AND name<?)"
                } else {
                    "(name>?)"
                };
                assert!(plan.contains(wanted), "list[{i}][{j}]: {plan}");
            }
        }
    }

    /// Listings page by prefix and cursor at every kind of bounds.
    #[tokio::test]
    async fn listings_page_by_prefix_and_cursor() {
        let store = store().await;
        let space = space();
        let names = ["a", "a.b", "a.c", "ab", "b", "\u{10FFFF}", "\u{10FFFF}x"];
        store
            .apply(&Batch {
                space: space.clone(),
                writes: names.iter().map(|n| write(n, &[(1, 100, 1)])).collect(),
                seq: None,
            })
            .await
            .unwrap();
        let list = |prefix: &'static str, after: Option<&'static str>, limit| {
            let (store, space) = (&store, &space);
            async move {
                store
                    .list(SeriesList::new(space, limit).prefix(prefix).after(after))
                    .await
                    .unwrap()
            }
        };
        assert_eq!(list("", None, 10).await, names);
        assert_eq!(list("", Some("ab"), 2).await, ["b", "\u{10FFFF}"]);
        assert_eq!(list("a", None, 10).await, ["a", "a.b", "a.c", "ab"]);
        assert_eq!(list("a.", None, 10).await, ["a.b", "a.c"]);
        assert_eq!(list("a.", Some("a.b"), 10).await, ["a.c"]);
        assert_eq!(list("a.", Some("0"), 1).await, ["a.b"]);
        assert_eq!(list("a.", Some("z"), 10).await, Vec::<String>::new());
        assert_eq!(
            list("\u{10FFFF}", None, 10).await,
            ["\u{10FFFF}", "\u{10FFFF}x"]
        );
        assert_eq!(
            list("\u{10FFFF}", Some("\u{10FFFF}"), 10).await,
            ["\u{10FFFF}x"]
        );
    }
}
