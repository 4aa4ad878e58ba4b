//! Locks in Redis.
//!
//! A lock `<name>` has two keys sharing the hash tag `{<prefix>:lock:<name>}`:
//! `:owner` (the holder's token, with the lease as its PX expiry) and
//! `:fence` (a counter incremented with every acquisition, never expiring).
//! Acquire, release and extend are one Lua call each. The lease runs on the
//! Redis server's clock (PX), which all clients share.

use async_trait::async_trait;
use redis::Script;

use super::Redis;
use super::layout::Layout;
use crate::error::Result;
use crate::locks::store::{AcquireOutcome, LockStore};
use crate::name::Name;

/// Locks stored in Redis.
#[derive(Clone, Debug)]
pub struct RedisLockStore {
    redis: Redis,
    prefix: String,
    acquire: Script,
    release: Script,
    extend: Script,
}

impl RedisLockStore {
    /// A store on `redis`, keys under the tagged layout's prefix.
    pub fn new(redis: Redis, layout: &Layout) -> Self {
        let prefix = layout.key_prefix().to_owned();
        RedisLockStore {
            redis,
            prefix,
            acquire: Script::new(include_str!("lua/lock_acquire.lua")),
            release: Script::new(include_str!("lua/lock_release.lua")),
            extend: Script::new(include_str!("lua/lock_extend.lua")),
        }
    }

    fn key(&self, name: &Name, part: &str) -> String {
        format!("{{{}:lock:{name}}}:{part}", self.prefix)
    }
}

#[async_trait]
impl LockStore for RedisLockStore {
    async fn acquire(
        &self,
        name: &Name,
        token: &str,
        ttl_ms: u64,
        _now_ms: u64,
    ) -> Result<AcquireOutcome> {
        let (taken, value): (i64, i64) = self
            .acquire
            .key(self.key(name, "owner"))
            .key(self.key(name, "fence"))
            .arg(token)
            .arg(ttl_ms)
            .invoke_async(&mut self.redis.handle())
            .await?;
        Ok(if taken == 1 {
            AcquireOutcome::Acquired {
                fence: value as u64,
            }
        } else {
            AcquireOutcome::Held {
                expires_in_ms: value.max(0) as u64,
            }
        })
    }

    async fn release(&self, name: &Name, token: &str, _now_ms: u64) -> Result<bool> {
        let n: i64 = self
            .release
            .key(self.key(name, "owner"))
            .arg(token)
            .invoke_async(&mut self.redis.handle())
            .await?;
        Ok(n == 1)
    }

    async fn extend(&self, name: &Name, token: &str, ttl_ms: u64, _now_ms: u64) -> Result<bool> {
        let n: i64 = self
            .extend
            .key(self.key(name, "owner"))
            .arg(token)
            .arg(ttl_ms)
            .invoke_async(&mut self.redis.handle())
            .await?;
        Ok(n == 1)
    }
}
