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
use crate::error::{Error, Result};
use crate::locks::store::{AcquireOutcome, LockCall, LockStore};
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
    /// A store on `redis`, keys under the default layout's prefix.
    pub fn new(redis: Redis, layout: &Layout) -> Self {
        let prefix = layout.prefix().to_owned();
        RedisLockStore {
            redis,
            prefix,
            acquire: lua!("lock_acquire"),
            release: lua!("lock_release"),
            extend: lua!("lock_extend"),
        }
    }

    fn key(&self, name: &Name, part: &str) -> String {
        format!("{{{}:lock:{name}}}:{part}", self.prefix)
    }
}

#[async_trait]
impl LockStore for RedisLockStore {
    async fn acquire(&self, call: LockCall<'_>, ttl_ms: u64) -> Result<AcquireOutcome> {
        let LockCall { name, token, .. } = call;
        let reply: Vec<i64> = self
            .acquire
            .key(self.key(name, "owner"))
            .key(self.key(name, "fence"))
            .arg(token)
            .arg(ttl_ms)
            .invoke_async(&mut self.redis.handle())
            .await?;
        Ok(match reply[..] {
            [1, fence] => AcquireOutcome::Acquired {
                fence: fence as u64,
            },
            [0, left] => AcquireOutcome::Held {
                expires_in_ms: left.max(0) as u64,
            },
            [2, fence, left] => AcquireOutcome::Ours {
                fence: fence as u64,
                expires_in_ms: left.max(0) as u64,
            },
            _ => {
                return Err(Error::Corrupt(format!(
                    "lock_acquire.lua answered {reply:?}"
                )));
            }
        })
    }

    async fn release(&self, call: LockCall<'_>) -> Result<bool> {
        let LockCall { name, token, .. } = call;
        let n: i64 = self
            .release
            .key(self.key(name, "owner"))
            .arg(token)
            .invoke_async(&mut self.redis.handle())
            .await?;
        Ok(n == 1)
    }

    async fn extend(&self, call: LockCall<'_>, ttl_ms: u64) -> Result<bool> {
        let LockCall { name, token, .. } = call;
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
