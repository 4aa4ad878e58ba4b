//! Daily statistics in Redis, in seed 004's layout.
//!
//! Per entity, under the hash tag `{<prefix>:<id>}` (so an entity's keys
//! stay in one cluster slot): `{<prefix>:<id>}:views`, a hash from
//! `YYYYMMDD` to views (exactly the seed's key), and `{<prefix>:<id>}:stats`,
//! a hash holding the running `total` and `first` (the oldest day that may be
//! stored). A write is one `daily_incr.lua` call; a batch sends one call per
//! entity concurrently (pipelined on the connection, spread over the nodes
//! on a cluster). Reads are single commands (HMGET, HGET).

use async_trait::async_trait;
use futures::future::try_join_all;
use redis::Script;

use super::{Redis, WriteFailure};
use crate::daily::{DailyStore, DailyWrite, DailyWritten, Day};
use crate::error::{Error, Result};
use crate::name::Name;

/// Daily statistics stored in Redis.
#[derive(Clone, Debug)]
pub struct RedisDailyStore {
    redis: Redis,
    prefix: String,
    incr: Script,
}

impl RedisDailyStore {
    /// A store on `redis` with entity keys under `prefix` (e.g. `advert`).
    pub fn new(redis: Redis, prefix: &str) -> Result<Self> {
        super::layout::check_prefix("entity prefix", prefix)?;
        Ok(RedisDailyStore {
            redis,
            prefix: prefix.to_owned(),
            incr: Script::new(include_str!("lua/daily_incr.lua")),
        })
    }

    /// `{<prefix>:<id>}:views`, the seed's key.
    pub fn views_key(&self, entity: &Name) -> String {
        format!("{{{}:{entity}}}:views", self.prefix)
    }

    /// `{<prefix>:<id>}:stats`.
    pub fn stats_key(&self, entity: &Name) -> String {
        format!("{{{}:{entity}}}:stats", self.prefix)
    }

    async fn incr_one(&self, w: &DailyWrite) -> Result<DailyWritten> {
        let keys = [self.views_key(&w.entity), self.stats_key(&w.entity)];
        let args = [
            w.day.yyyymmdd().to_string(),
            w.count.to_string(),
            w.floor.yyyymmdd().to_string(),
            w.expire_at.to_string(),
        ];
        match self.redis.eval_write(&self.incr, &keys, &args).await {
            Ok(value) => {
                let (day_count, total): (i64, i64) =
                    redis::FromRedisValue::from_redis_value(value)?;
                Ok(DailyWritten { day_count, total })
            }
            Err(WriteFailure::Redis(e)) if e.code() == Some("TALLY_OVERFLOW") => {
                Err(Error::InvalidCount(format!(
                    "adding {} views to entity {:?} would overflow its {}; nothing was written",
                    w.count,
                    w.entity.as_str(),
                    e.detail().unwrap_or("total")
                )))
            }
            Err(e) => Err(e.into()),
        }
    }
}

#[async_trait]
impl DailyStore for RedisDailyStore {
    async fn incr(&self, writes: &[DailyWrite]) -> Result<Vec<DailyWritten>> {
        try_join_all(writes.iter().map(|w| self.incr_one(w))).await
    }

    async fn days(&self, entity: &Name, days: &[Day]) -> Result<Vec<i64>> {
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(self.views_key(entity));
        for d in days {
            cmd.arg(d.yyyymmdd());
        }
        let values: Vec<Option<i64>> = cmd.query_async(&mut self.redis.handle()).await?;
        Ok(values.into_iter().map(|v| v.unwrap_or(0)).collect())
    }

    async fn total(&self, entity: &Name) -> Result<i64> {
        let total: Option<i64> = redis::cmd("HGET")
            .arg(self.stats_key(entity))
            .arg("total")
            .query_async(&mut self.redis.handle())
            .await?;
        Ok(total.unwrap_or(0))
    }

    async fn ping(&self) -> Result<()> {
        self.redis.ping().await
    }
}
