//! Idempotency records in SQLite: `tally_idempotency(key, fingerprint,
//! token, lease_ms, expires_ms, status, headers, body)`, a row per key.
//!
//! Each step is one immediate transaction, so processes sharing the file
//! see one record. A row whose `expires_ms` has passed counts as absent;
//! every claim first deletes up to [`PRUNE`] such rows (by the
//! `expires_ms` index), so old records go without a task of their own and
//! a claim's cost stays bounded.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use super::Sqlite;
use crate::error::Result;
use crate::idempotency::{Answer, Claim, ClaimRequest, IdempotencyStore, Ticket};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tally_idempotency (
    key TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    token TEXT NOT NULL,
    lease_ms INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL,
    status INTEGER,
    headers TEXT,
    body BLOB
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tally_idempotency_expiry ON tally_idempotency (expires_ms);
";

/// Expired records removed by each claim, at most.
pub const PRUNE: usize = 64;

/// Idempotency records stored in a [`Sqlite`] database.
#[derive(Clone, Debug)]
pub struct SqliteIdempotencyStore {
    db: Sqlite,
}

impl SqliteIdempotencyStore {
    /// Creates the table if needed.
    pub async fn new(db: Sqlite) -> Result<Self> {
        db.create_tables(SCHEMA.to_owned()).await?;
        Ok(SqliteIdempotencyStore { db })
    }
}

/// A stored row: fingerprint, lease end, and the answer's parts if any.
type Row = (String, i64, Option<i64>, Option<String>, Option<Vec<u8>>);

#[async_trait]
impl IdempotencyStore for SqliteIdempotencyStore {
    async fn claim(&self, c: &ClaimRequest<'_>) -> Result<Claim> {
        let key = c.key.to_owned();
        let fingerprint = c.fingerprint.to_owned();
        let token = c.token.to_owned();
        let now = c.now_ms as i64;
        let lease_until = now + c.lease_ms as i64;
        let expires = now + c.retention_ms as i64;
        let answer = c.answer.cloned();
        self.db
            .write(move |tx| {
                tx.prepare_cached(&format!(
                    "DELETE FROM tally_idempotency WHERE key IN (SELECT key FROM tally_idempotency
                     WHERE expires_ms <= ?1 ORDER BY expires_ms LIMIT {PRUNE})"
                ))?
                .execute([now])?;
                let row: Option<(Row, String)> = tx
                    .prepare_cached(
                        "SELECT fingerprint, lease_ms, status, headers, body, token
                         FROM tally_idempotency WHERE key = ?1 AND expires_ms > ?2",
                    )?
                    .query_row(params![key, now], |r| {
                        Ok((
                            (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?),
                            r.get(5)?,
                        ))
                    })
                    .optional()?;
                let row = match row {
                    // This very claim, sent again: it holds the key.
                    Some((row, held)) if held == token && row.0 == fingerprint => {
                        return Ok(Claim::Claimed(Ticket { key, token }));
                    }
                    other => other.map(|(row, _)| row),
                };
                let (status, headers, body) = match &answer {
                    Some(a) => (
                        Some(i64::from(a.status)),
                        Some(a.headers_json()),
                        Some(a.body.clone()),
                    ),
                    None => (None, None, None),
                };
                match row {
                    Some((fp, _, _, _, _)) if fp != fingerprint => return Ok(Claim::Mismatch),
                    Some((_, _, Some(status), headers, body)) => {
                        return Answer::from_parts(
                            status,
                            headers.as_deref().unwrap_or("[]"),
                            body.unwrap_or_default(),
                        )
                        .map(Claim::Done);
                    }
                    Some((_, lease, None, _, _)) if lease > now => {
                        return Ok(Claim::InProgress {
                            retry_after_ms: (lease - now) as u64,
                        });
                    }
                    Some(_) => {
                        // The claim holding it died: this one takes it over.
                        tx.prepare_cached(
                            "UPDATE tally_idempotency SET token = ?2, lease_ms = ?3,
                                 status = ?4, headers = ?5, body = ?6
                             WHERE key = ?1",
                        )?
                        .execute(params![key, token, lease_until, status, headers, body])?;
                    }
                    None => {
                        tx.prepare_cached(
                            "INSERT OR REPLACE INTO tally_idempotency
                                 (key, fingerprint, token, lease_ms, expires_ms, status, headers, body)
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                        )?
                        .execute(params![
                            key,
                            fingerprint,
                            token,
                            lease_until,
                            expires,
                            status,
                            headers,
                            body
                        ])?;
                    }
                }
                Ok(Claim::Claimed(Ticket { key, token }))
            })
            .await
    }

    async fn complete(&self, key: &str, token: &str, answer: &Answer) -> Result<bool> {
        let (key, token) = (key.to_owned(), token.to_owned());
        let (status, headers, body) = (
            i64::from(answer.status),
            answer.headers_json(),
            answer.body.clone(),
        );
        self.db
            .write(move |tx| {
                let n = tx
                    .prepare_cached(
                        "UPDATE tally_idempotency SET status = ?3, headers = ?4, body = ?5
                         WHERE key = ?1 AND token = ?2",
                    )?
                    .execute(params![key, token, status, headers, body])?;
                Ok(n == 1)
            })
            .await
    }

    async fn release(&self, key: &str, token: &str) -> Result<bool> {
        let (key, token) = (key.to_owned(), token.to_owned());
        self.db
            .write(move |tx| {
                let n = tx
                    .prepare_cached("DELETE FROM tally_idempotency WHERE key = ?1 AND token = ?2")?
                    .execute(params![key, token])?;
                Ok(n == 1)
            })
            .await
    }
}
