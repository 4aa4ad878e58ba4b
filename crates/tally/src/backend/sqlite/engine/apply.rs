//! A write: one transaction that reads each cell, merges the delta in Rust
//! by the kind's rule and writes it back (see [`super`]).

use rusqlite::{OptionalExtension, Transaction, params};

use super::tables::{Stored, Tables, stored};
use crate::engine::kinds::{GaugeValue, sum};
use crate::engine::plan::locate;
use crate::engine::{Applied, Batch, Space, Value};
use crate::error::{Error, Result};

/// `old` (if any) with `delta` merged by the kind's rule; a stored sum adds
/// as `HINCRBY` does ([`sum::add_stored`]).
fn merged(old: Option<Value>, delta: &Value) -> Result<Value> {
    match (old, delta) {
        (None, delta) => Ok(delta.clone()),
        (Some(Value::Sum(total)), Value::Sum(d)) => sum::add_stored(total, *d)
            .map(Value::Sum)
            .ok_or_else(|| sum::overflow(*d)),
        (Some(mut old), delta) => old.merge(delta).map(|()| old),
    }
}

fn series_id(tx: &Transaction<'_>, sql: &Tables, name: &str) -> Result<i64> {
    let mut select = tx.prepare_cached(&sql.series_id)?;
    if let Some(id) = select.query_row([name], |r| r.get(0)).optional()? {
        return Ok(id);
    }
    tx.prepare_cached(&sql.insert_series)?.execute([name])?;
    Ok(tx.last_insert_rowid())
}

pub(super) fn apply_in(
    tx: &Transaction<'_>,
    sql: &Tables,
    batch: &Batch,
    now_secs: i64,
) -> Result<Applied> {
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
    let kind = sql.kind;
    let mut trim = Trim::new(tx, sql, &batch.space)?;
    if kind.current {
        return apply_gauges(tx, sql, batch, &mut trim);
    }
    let mut read = tx.prepare_cached(&sql.read_cell)?;
    let mut upsert = tx.prepare_cached(&sql.upsert_cell)?;
    for write in &batch.writes {
        let id = series_id(tx, sql, write.name.as_str())?;
        for c in &write.cells {
            let (res, slice) = (c.precision as i64, c.slice as i64);
            let old = read
                .query_row(params![id, res, slice], |r| Ok(stored(kind, r.get_ref(0)?)))
                .optional()?
                .transpose()?;
            if old.is_none() {
                trim.opened(id, c.precision, c.slice)?;
            }
            let new = merged(old, &c.delta)
                .map_err(|e| locate(e, &batch.space, write.name.as_str(), c.precision, c.slice))?;
            upsert.execute(params![id, res, slice, Stored(&new)])?;
        }
    }
    Ok(Applied::Written)
}

/// Trimming on write (see the module docs): each precision's `keep`.
struct Trim<'t> {
    trim: rusqlite::CachedStatement<'t>,
    /// (precision seconds, slices kept) of each precision of the space.
    keep: Vec<(u64, u64)>,
}

impl<'t> Trim<'t> {
    fn new(tx: &'t Transaction<'_>, sql: &Tables, space: &Space) -> Result<Self> {
        Ok(Trim {
            trim: tx.prepare_cached(&sql.trim)?,
            keep: space
                .precisions
                .iter()
                .map(|r| (r.seconds, r.keep))
                .collect(),
        })
    }

    /// A write opens `slice` of (`id`, `precision`): removes that pair's
    /// slices older than the `keep` slices that end with it. A write dated
    /// in the past trims against its own slice, so it never removes a
    /// newer one.
    fn opened(&mut self, id: i64, precision: u64, slice: u64) -> Result<()> {
        if let Some(&(r, keep)) = self.keep.iter().find(|(r, _)| *r == precision) {
            let span = keep.saturating_mul(r);
            if let Some(cutoff) = slice.checked_sub(span) {
                self.trim
                    .execute(params![id, r as i64, cutoff.min(i64::MAX as u64) as i64])?;
            }
        }
        Ok(())
    }
}

/// [`apply_in`] for gauges: each precision's cells, in slice order, run
/// from the gauge's current value as the batch found it (a slice that
/// holds something runs from its own last value); the current value
/// becomes the value after the gauge's last operation.
fn apply_gauges(
    tx: &Transaction<'_>,
    sql: &Tables,
    batch: &Batch,
    trim: &mut Trim<'_>,
) -> Result<Applied> {
    let mut read = tx.prepare_cached(&sql.read_cell)?;
    let mut upsert = tx.prepare_cached(&sql.upsert_cell)?;
    let mut read_current = tx.prepare_cached(&sql.read_current)?;
    let mut write_current = tx.prepare_cached(&sql.write_current)?;
    for write in &batch.writes {
        let id = series_id(tx, sql, write.name.as_str())?;
        let start: f64 = read_current
            .query_row([id], |r| r.get(0))
            .optional()?
            .unwrap_or(0.0);
        let (mut current, mut after, mut precision) = (start, start, None);
        for c in &write.cells {
            if precision != Some(c.precision) {
                precision = Some(c.precision);
                current = start;
            }
            let (res, slice) = (c.precision as i64, c.slice as i64);
            let old = read
                .query_row(params![id, res, slice], |r| {
                    Ok(stored(sql.kind, r.get_ref(0)?))
                })
                .optional()?
                .transpose()?;
            if old.is_none() {
                trim.opened(id, c.precision, c.slice)?;
            }
            let (Value::Gauge(delta), old) = (&c.delta, old) else {
                return Err(Error::Backend(
                    "internal error: a gauge write without a gauge".into(),
                ));
            };
            let old = match old {
                Some(Value::Gauge(g)) => Some(g),
                Some(_) => return Err(Error::Corrupt("a gauge cell holds another kind".into())),
                None => None,
            };
            let new = GaugeValue::fold_into(old.as_deref(), delta, current)
                .map_err(|e| locate(e, &batch.space, write.name.as_str(), c.precision, c.slice))?;
            if let Some((new, last)) = new {
                upsert.execute(params![
                    id,
                    res,
                    slice,
                    Stored(&Value::Gauge(Box::new(new)))
                ])?;
                current = last;
                after = last;
            }
        }
        write_current.execute(params![id, after])?;
    }
    Ok(Applied::Written)
}
