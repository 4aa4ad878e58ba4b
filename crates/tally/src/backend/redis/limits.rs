//! Rate-limit state in Redis: one Lua call per check.
//!
//! Keys share the hash tag `{<prefix>:limit:<key>}` (one limit key, one
//! slot): fixed windows keep `..:f:<window>:<index>`, sliding windows
//! `..:s:<window>:<index>` (this window's and the previous one's), GCRA
//! `..:g:<window>:<limit>:<burst>` holding the theoretical arrival time.
//! Each key expires by itself (PEXPIRE, relative, so the Redis clock and the
//! caller's need not agree) one window after its last use. A keyed check
//! (an idempotency key) also takes its mark, `{..}:applied:<writer hex>`
//! ([`super::once`]), set with an admitted check's count.

use async_trait::async_trait;
use redis::Script;

use super::layout::Layout;
use super::{Redis, once};
use crate::error::{Error, Result};
use crate::limits::store::{Check, LimiterStore, state_id};
use crate::limits::{Algorithm, Decision, Limit};
use crate::name::Name;

/// Rate-limit state stored in Redis.
#[derive(Clone, Debug)]
pub struct RedisLimiterStore {
    redis: Redis,
    prefix: String,
    fixed: Script,
    sliding: Script,
    gcra: Script,
}

impl RedisLimiterStore {
    /// A store on `redis`, keys under the default layout's prefix.
    pub fn new(redis: Redis, layout: &Layout) -> Self {
        let prefix = layout.prefix().to_owned();
        RedisLimiterStore {
            redis,
            prefix,
            fixed: lua!("once", "int", "limit_fixed"),
            sliding: lua!("once", "int", "limit_sliding"),
            gcra: lua!("once", "int", "limit_gcra"),
        }
    }

    /// `{<prefix>:limit:<key>}`, the hash tag of a key's state.
    fn tag(&self, key: &Name) -> String {
        format!("{{{}:limit:{key}}}", self.prefix)
    }

    fn key(&self, key: &Name, limit: &Limit, index: Option<u64>) -> String {
        let base = format!("{}:{}", self.tag(key), state_id(limit));
        match index {
            Some(i) => format!("{base}:{i}"),
            None => base,
        }
    }
}

#[async_trait]
impl LimiterStore for RedisLimiterStore {
    async fn check(&self, check: Check<'_>) -> Result<Decision> {
        let (key, limit, now_ms) = (check.key, check.limit, check.now_ms);
        let index = now_ms / limit.window_ms;
        let margin = limit.window_ms;
        let mut call = match limit.algorithm {
            Algorithm::Fixed => {
                let mut c = self.fixed.prepare_invoke();
                c.key(self.key(key, limit, Some(index)));
                c
            }
            Algorithm::Sliding => {
                let mut c = self.sliding.prepare_invoke();
                c.key(self.key(key, limit, index.checked_sub(1)))
                    .key(self.key(key, limit, Some(index)));
                c
            }
            Algorithm::Gcra => {
                let mut c = self.gcra.prepare_invoke();
                c.key(self.key(key, limit, None));
                c
            }
        };
        if let Some(mark) = check.mark {
            call.key(once::key(&self.tag(key), mark));
        }
        call.arg(now_ms).arg(limit.window_ms).arg(limit.limit);
        if limit.algorithm == Algorithm::Gcra {
            call.arg(limit.burst());
        }
        call.arg(check.cost).arg(margin);
        let (allowed, remaining, reset_at, retry): (i64, i64, i64, i64) =
            call.invoke_async(&mut self.redis.handle()).await?;
        if remaining < 0 || reset_at < 0 || retry < -1 {
            return Err(Error::Corrupt(format!(
                "rate-limit script answered {allowed} {remaining} {reset_at} {retry}"
            )));
        }
        Ok(Decision {
            allowed: allowed == 1,
            limit: if limit.algorithm == Algorithm::Gcra {
                limit.burst()
            } else {
                limit.limit
            },
            remaining: remaining as u64,
            reset_at_ms: reset_at as u64,
            retry_after_ms: (retry >= 0).then_some(retry as u64),
            degraded: false,
        })
    }
}
