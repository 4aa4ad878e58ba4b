//! Rate-limit state in SQLite: `tally_limit(key, value, expires_ms)`.
//!
//! The same state as in Redis (window counts by window index, GCRA's
//! theoretical arrival time) under the same key names, read, decided on by
//! the pure algorithms and written back in one immediate transaction.
//! Expired rows read as absent; each check also deletes up to
//! [`CLEAN_PER_CHECK`] expired rows, so the table stays bounded.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use super::{Sqlite, once};
use crate::error::Result;
use crate::limits::store::{Check, LimiterStore, state_id};
use crate::limits::{Algorithm, Decision, State, decide, repeated};

/// Expired rows removed by each check, at most.
pub const CLEAN_PER_CHECK: i64 = 16;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tally_limit (
    key TEXT NOT NULL UNIQUE,
    value INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS tally_limit_expiry ON tally_limit (expires_ms);
";

/// Rate-limit state in a [`Sqlite`] database.
#[derive(Clone, Debug)]
pub struct SqliteLimiterStore {
    db: Sqlite,
}

impl SqliteLimiterStore {
    /// Creates the table if needed.
    pub async fn new(db: Sqlite) -> Result<Self> {
        db.create_tables([SCHEMA, once::SCHEMA].concat()).await?;
        Ok(SqliteLimiterStore { db })
    }
}

#[async_trait]
impl LimiterStore for SqliteLimiterStore {
    async fn check(&self, check: Check<'_>) -> Result<Decision> {
        let (limit, cost, now_ms) = (*check.limit, check.cost, check.now_ms);
        let mark = check.mark.copied();
        let base = format!("{}:{}", check.key, state_id(&limit));
        self.db
            .write(move |tx| {
                let now = now_ms as i64;
                tx.prepare_cached(
                    "DELETE FROM tally_limit WHERE rowid IN
                     (SELECT rowid FROM tally_limit WHERE expires_ms <= ?1 LIMIT ?2)",
                )?
                .execute(params![now, CLEAN_PER_CHECK])?;
                let mut get = tx.prepare_cached(
                    "SELECT value FROM tally_limit WHERE key = ?1 AND expires_ms > ?2",
                )?;
                let mut read = |k: &str| -> Result<Option<u64>> {
                    Ok(get
                        .query_row(params![k, now], |r| r.get::<_, i64>(0))
                        .optional()?
                        .map(|v| v as u64))
                };
                let w = limit.window_ms;
                let index = now_ms / w;
                let cur_key = format!("{base}:{index}");
                let state = match limit.algorithm {
                    Algorithm::Fixed => State::Counts {
                        prev: 0,
                        cur: read(&cur_key)?.unwrap_or(0),
                    },
                    Algorithm::Sliding => State::Counts {
                        prev: match index.checked_sub(1) {
                            Some(p) => read(&format!("{base}:{p}"))?.unwrap_or(0),
                            None => 0,
                        },
                        cur: read(&cur_key)?.unwrap_or(0),
                    },
                    Algorithm::Gcra => State::Tat(read(&base)?),
                };
                if once::seen(tx, "limits", mark.as_ref())? {
                    return Ok(repeated(&limit, state, now_ms));
                }
                let (decision, after) = decide(&limit, state, now_ms, cost);
                if decision.allowed {
                    once::record(tx, "limits", mark.as_ref())?;
                    let (k, value, expires) = match after {
                        State::Counts { cur, .. } => {
                            let span = if limit.algorithm == Algorithm::Fixed {
                                w
                            } else {
                                2 * w
                            };
                            (cur_key, cur, index * w + span + w)
                        }
                        State::Tat(tat) => {
                            let tat = tat.unwrap_or(now_ms * 1000);
                            (base, tat, tat.div_ceil(1000) + w)
                        }
                    };
                    tx.prepare_cached(
                        "INSERT INTO tally_limit (key, value, expires_ms) VALUES (?1, ?2, ?3)
                         ON CONFLICT (key) DO UPDATE SET value = excluded.value,
                             expires_ms = excluded.expires_ms",
                    )?
                    .execute(params![k, value as i64, expires as i64])?;
                }
                Ok(decision)
            })
            .await
    }
}
