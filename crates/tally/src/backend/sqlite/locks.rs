//! Locks in SQLite: `tally_lock(name, token, expires_ms, fence)`.
//!
//! A row per lock that was ever taken; `token` is NULL when free. Each
//! operation is one immediate transaction, comparing `expires_ms` with the
//! caller's clock, so processes sharing the file see one lock. `fence` only
//! ever grows: release clears the token and keeps the row.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use super::Sqlite;
use crate::error::Result;
use crate::locks::store::{AcquireOutcome, LockCall, LockStore};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tally_lock (
    name TEXT PRIMARY KEY,
    token TEXT,
    expires_ms INTEGER NOT NULL,
    fence INTEGER NOT NULL
) WITHOUT ROWID;
";

/// Locks stored in a [`Sqlite`] database.
#[derive(Clone, Debug)]
pub struct SqliteLockStore {
    db: Sqlite,
}

impl SqliteLockStore {
    /// Creates the table if needed.
    pub async fn new(db: Sqlite) -> Result<Self> {
        db.create_tables(SCHEMA.to_owned()).await?;
        Ok(SqliteLockStore { db })
    }
}

/// The call's lock name and token, owned (for the writer's thread), and its
/// instant.
fn owned(call: LockCall<'_>) -> (String, String, u64) {
    (call.name.to_string(), call.token.to_owned(), call.now_ms)
}

#[async_trait]
impl LockStore for SqliteLockStore {
    async fn acquire(&self, call: LockCall<'_>, ttl_ms: u64) -> Result<AcquireOutcome> {
        let (name, token, now_ms) = owned(call);
        self.db
            .write(move |tx| {
                let row: Option<(Option<String>, i64, i64)> = tx
                    .prepare_cached(
                        "SELECT token, expires_ms, fence FROM tally_lock WHERE name = ?1",
                    )?
                    .query_row([&name], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                    .optional()?;
                let now = now_ms as i64;
                if let Some((Some(holder), expires, fence)) = &row
                    && *expires > now
                {
                    let expires_in_ms = (expires - now) as u64;
                    return Ok(if *holder == token {
                        AcquireOutcome::Ours {
                            fence: *fence as u64,
                            expires_in_ms,
                        }
                    } else {
                        AcquireOutcome::Held { expires_in_ms }
                    });
                }
                let fence = row.map_or(0, |(_, _, f)| f) + 1;
                tx.prepare_cached(
                    "INSERT INTO tally_lock (name, token, expires_ms, fence) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (name) DO UPDATE SET token = excluded.token,
                         expires_ms = excluded.expires_ms, fence = excluded.fence",
                )?
                .execute(params![name, token, now + ttl_ms as i64, fence])?;
                Ok(AcquireOutcome::Acquired {
                    fence: fence as u64,
                })
            })
            .await
    }

    async fn release(&self, call: LockCall<'_>) -> Result<bool> {
        let (name, token, now_ms) = owned(call);
        self.db
            .write(move |tx| {
                let n = tx
                    .prepare_cached(
                        "UPDATE tally_lock SET token = NULL, expires_ms = 0
                         WHERE name = ?1 AND token = ?2 AND expires_ms > ?3",
                    )?
                    .execute(params![name, token, now_ms as i64])?;
                Ok(n == 1)
            })
            .await
    }

    async fn extend(&self, call: LockCall<'_>, ttl_ms: u64) -> Result<bool> {
        let (name, token, now_ms) = owned(call);
        self.db
            .write(move |tx| {
                let n = tx
                    .prepare_cached(
                        "UPDATE tally_lock SET expires_ms = ?4
                         WHERE name = ?1 AND token = ?2 AND expires_ms > ?3",
                    )?
                    .execute(params![
                        name,
                        token,
                        now_ms as i64,
                        (now_ms + ttl_ms) as i64
                    ])?;
                Ok(n == 1)
            })
            .await
    }
}
