//! Idempotency records in Redis: one hash per key,
//! `{<prefix>:idem:<hash of the key>}`, its own hash tag (so records spread
//! over a cluster's slots), kept for the retention with PX. Claiming is one
//! Lua call (`idem_claim.lua`), completing or releasing another
//! (`idem_finish.lua`). A record's lease is compared with the caller's
//! clock; its retention runs on the server's clock (PX).

use async_trait::async_trait;
use redis::Script;
use sha2::{Digest, Sha256};

use super::Redis;
use super::layout::Layout;
use crate::error::{Error, Result};
use crate::idempotency::{Answer, Claim, ClaimRequest, IdempotencyStore, Ticket, hex};

/// Idempotency records stored in Redis.
#[derive(Clone, Debug)]
pub struct RedisIdempotencyStore {
    redis: Redis,
    prefix: String,
    claim: Script,
    finish: Script,
}

impl RedisIdempotencyStore {
    /// A store on `redis`, keys under the default layout's prefix.
    pub fn new(redis: Redis, layout: &Layout) -> Self {
        let prefix = layout.prefix().to_owned();
        RedisIdempotencyStore {
            redis,
            prefix,
            claim: lua!("idem_claim"),
            finish: lua!("idem_finish"),
        }
    }

    /// The record's key: the key itself may hold braces or be long, so it is
    /// hashed (128 bits).
    fn key(&self, key: &str) -> String {
        let digest = Sha256::digest(key.as_bytes());
        format!("{{{}:idem:{}}}", self.prefix, hex(&digest[..16]))
    }

    async fn finish(&self, key: &str, token: &str, answer: Option<&Answer>) -> Result<bool> {
        let mut cmd = super::evalsha(&self.finish, 1);
        cmd.arg(self.key(key)).arg(token);
        match answer {
            Some(a) => answer_args(cmd.arg("complete"), a),
            None => cmd.arg("release"),
        };
        let done: i64 = redis::FromRedisValue::from_redis_value(
            self.redis.eval_cmd(&self.finish, &cmd).await?,
        )?;
        Ok(done == 1)
    }
}

/// An answer as the scripts take it: status, headers (JSON), body.
fn answer_args<'c>(cmd: &'c mut redis::Cmd, a: &Answer) -> &'c mut redis::Cmd {
    cmd.arg(a.status).arg(a.headers_json()).arg(a.body.as_slice())
}

#[async_trait]
impl IdempotencyStore for RedisIdempotencyStore {
    async fn claim(&self, c: &ClaimRequest<'_>) -> Result<Claim> {
        let mut cmd = super::evalsha(&self.claim, 1);
        cmd.arg(self.key(c.key))
            .arg(c.fingerprint)
            .arg(c.token)
            .arg(c.now_ms)
            .arg(c.lease_ms)
            .arg(c.retention_ms);
        match c.answer {
            Some(a) => answer_args(cmd.arg("1"), a),
            None => cmd.arg("0"),
        };
        let reply: Vec<Vec<u8>> =
            redis::FromRedisValue::from_redis_value(self.redis.eval_cmd(&self.claim, &cmd).await?)?;
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        match reply.as_slice() {
            [tag] if tag == b"claimed" => Ok(Claim::Claimed(Ticket {
                key: c.key.to_owned(),
                token: c.token.to_owned(),
            })),
            [tag] if tag == b"mismatch" => Ok(Claim::Mismatch),
            [tag, ms] if tag == b"busy" => Ok(Claim::InProgress {
                retry_after_ms: text(ms).parse().unwrap_or(0),
            }),
            [tag, status, headers, body] if tag == b"done" => {
                let status: i64 = text(status)
                    .parse()
                    .map_err(|_| Error::Corrupt("idempotency record status".into()))?;
                Answer::from_parts(status, &text(headers), body.clone()).map(Claim::Done)
            }
            _ => Err(Error::Backend(format!(
                "idem_claim.lua answered {} items",
                reply.len()
            ))),
        }
    }

    async fn complete(&self, key: &str, token: &str, answer: &Answer) -> Result<bool> {
        self.finish(key, token, Some(answer)).await
    }

    async fn release(&self, key: &str, token: &str) -> Result<bool> {
        self.finish(key, token, None).await
    }
}
