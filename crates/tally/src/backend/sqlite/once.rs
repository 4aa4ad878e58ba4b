//! The mark of a keyed write in SQLite, shared by the stores outside the
//! slice engine (time series, daily statistics, buffers).
//!
//! `tally_applied(mark, at)` holds one row per keyed write applied,
//! `<scope>:<writer hex>` (the scope names the feature, so one key used
//! for two features' writes marks each), inserted in the write's own
//! transaction ([`first_time`]): a write whose mark is there is not
//! applied again. Rows older than [`MAX_RETENTION`] are dropped, a bounded
//! batch at a time, by later keyed writes.
//!
//! What it does not do: decide what a repeat answers (each store does).

use rusqlite::{OptionalExtension, Transaction, params};

use crate::error::Result;
use crate::idempotency::{MAX_RETENTION, Mark};

/// The table, created by each store that takes marks (with its own tables).
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tally_applied (
    mark TEXT PRIMARY KEY,
    at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tally_applied_by_at ON tally_applied (at);
";

/// Expired marks dropped per keyed write, at most.
const SWEEP: i64 = 100;

/// In a write transaction: `true` when `mark` is new in `scope` (it is
/// recorded now: apply the write in the same transaction), `false` when
/// that write was applied already (write nothing). `None` (no key) is
/// always new and records nothing.
pub(crate) fn first_time(tx: &Transaction<'_>, scope: &str, mark: Option<&Mark>) -> Result<bool> {
    if seen(tx, scope, mark)? {
        return Ok(false);
    }
    record(tx, scope, mark)?;
    Ok(true)
}

/// True when `mark` is kept in `scope` (and not older than
/// [`MAX_RETENTION`]); false for `None`.
pub(crate) fn seen(tx: &Transaction<'_>, scope: &str, mark: Option<&Mark>) -> Result<bool> {
    let Some(mark) = mark else {
        return Ok(false);
    };
    let found: Option<i64> = tx
        .prepare_cached("SELECT at FROM tally_applied WHERE mark = ?1")?
        .query_row([id(scope, mark)], |r| r.get(0))
        .optional()?;
    Ok(found.is_some_and(|at| at >= cutoff(mark)))
}

/// Keeps `mark` in `scope` (nothing for `None`), dropping up to [`SWEEP`]
/// expired marks.
pub(crate) fn record(tx: &Transaction<'_>, scope: &str, mark: Option<&Mark>) -> Result<()> {
    let Some(mark) = mark else {
        return Ok(());
    };
    tx.prepare_cached(
        "DELETE FROM tally_applied WHERE mark IN
         (SELECT mark FROM tally_applied WHERE at < ?1 LIMIT ?2)",
    )?
    .execute(params![cutoff(mark), SWEEP])?;
    tx.prepare_cached(
        "INSERT INTO tally_applied (mark, at) VALUES (?1, ?2)
         ON CONFLICT (mark) DO UPDATE SET at = excluded.at",
    )?
    .execute(params![id(scope, mark), mark.at as i64])?;
    Ok(())
}

fn id(scope: &str, mark: &Mark) -> String {
    format!("{scope}:{}", mark.id())
}

/// Marks made before this (Unix seconds) are forgotten.
fn cutoff(mark: &Mark) -> i64 {
    mark.at as i64 - MAX_RETENTION.as_secs() as i64
}
