//! Daily statistics in Redis, in seed 004's layout and nothing else.
//!
//! Per entity, one hash `{<prefix>:<id>}:views` (the hash tag keeps an
//! entity in one cluster slot) from `YYYYMMDD` to views, exactly the seed's
//! key, plus one non-date field, `before`: the views of the days that left
//! the retention window. The hash is the entity's whole state, so the
//! seed's own code and Tally agree on every read whichever writes first or
//! both at once: the seed's HMGET of dates never asks for `before`, and its
//! total (a sum of HVALS) includes it, so the sum of the hash is the
//! all-time total for both.
//!
//! A write is one `daily_incr.lua` call: HINCRBY of the day, with the days
//! older than the window folded into `before` in the same step (no cleaner);
//! a keyed write's call also checks and sets its mark,
//! `{<prefix>:<id>}:applied:<writer hex>` ([`super::once`]).
//! A batch sends one call per entity concurrently (pipelined on the
//! connection, spread over the nodes on a cluster). Days are read with one
//! HMGET; the total with one `daily_total.lua` call summing the hash (at
//! most retention + 1 fields once Tally has written), exactly (64-bit,
//! whatever Lua's doubles can hold).
//!
//! Data written by earlier Tally versions, which kept a running `total` in
//! `{<prefix>:<id>}:stats` and dropped old days without keeping their sum,
//! reads right as it is (the total is the larger of that running total and
//! the hash's sum) and is migrated by the entity's next write (the missing
//! part goes to `before`, `:stats` is deleted, the hash loses its TTL).

use async_trait::async_trait;
use futures::future::try_join_all;
use redis::Script;

use super::{Redis, WriteFailure, once};
use crate::daily::{DailyStore, DailyWrite, DailyWritten, Day};
use crate::engine::Applied;
use crate::error::{Error, Result};
use crate::idempotency::Mark;
use crate::name::Name;

/// Daily statistics stored in Redis.
#[derive(Clone, Debug)]
pub struct RedisDailyStore {
    redis: Redis,
    prefix: String,
    incr: Script,
    total: Script,
}

impl RedisDailyStore {
    /// A store on `redis` with entity keys under `prefix` (e.g. `advert`).
    pub fn new(redis: Redis, prefix: &str) -> Result<Self> {
        super::layout::check_prefix("entity prefix", prefix)?;
        Ok(RedisDailyStore {
            redis,
            prefix: prefix.to_owned(),
            incr: Script::new(concat!(
                include_str!("lua/once.lua"),
                include_str!("lua/daily_sum.lua"),
                include_str!("lua/daily_incr.lua")
            )),
            total: Script::new(concat!(
                include_str!("lua/daily_sum.lua"),
                include_str!("lua/daily_total.lua")
            )),
        })
    }

    /// `{<prefix>:<id>}`, the hash tag of an entity's keys.
    fn tag(&self, entity: &Name) -> String {
        format!("{{{}:{entity}}}", self.prefix)
    }

    /// `{<prefix>:<id>}:views`, the seed's key.
    pub fn views_key(&self, entity: &Name) -> String {
        format!("{}:views", self.tag(entity))
    }

    /// `{<prefix>:<id>}:stats`, where earlier Tally versions kept a running
    /// total (read, then migrated by the next write).
    pub fn stats_key(&self, entity: &Name) -> String {
        format!("{}:stats", self.tag(entity))
    }

    async fn incr_one(&self, w: &DailyWrite, mark: Option<&Mark>) -> Result<DailyWritten> {
        let mut keys = vec![self.views_key(&w.entity), self.stats_key(&w.entity)];
        if let Some(mark) = mark {
            keys.push(once::key(&self.tag(&w.entity), mark));
        }
        let args = [
            w.day.yyyymmdd().to_string(),
            w.count.to_string(),
            w.floor.yyyymmdd().to_string(),
        ];
        match self.redis.eval_write(&self.incr, &keys, &args).await {
            Ok(value) => {
                let (day_count, hi, lo, applied): (i64, i64, i64, i64) =
                    redis::FromRedisValue::from_redis_value(value)?;
                Ok(DailyWritten {
                    day_count,
                    total: from_limbs(hi, lo, &keys[0])?,
                    applied: if applied == 1 {
                        Applied::Written
                    } else {
                        Applied::Duplicate
                    },
                })
            }
            Err(WriteFailure::Redis(e)) if e.code() == Some("TALLY_CORRUPT") => Err(corrupt(&e)),
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
    async fn incr(&self, writes: &[DailyWrite], mark: Option<&Mark>) -> Result<Vec<DailyWritten>> {
        try_join_all(writes.iter().map(|w| self.incr_one(w, mark))).await
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
        let views = self.views_key(entity);
        let (hi, lo): (i64, i64) = self
            .total
            .key(&views)
            .key(self.stats_key(entity))
            .invoke_async(&mut self.redis.handle())
            .await
            .map_err(|e| {
                if e.code() == Some("TALLY_CORRUPT") {
                    corrupt(&e)
                } else {
                    e.into()
                }
            })?;
        from_limbs(hi, lo, &views)
    }

    async fn ping(&self) -> Result<()> {
        self.redis.ping().await
    }
}

/// The total `hi * 10^9 + lo` the scripts return (Lua's doubles cannot
/// carry a 64-bit integer whole).
fn from_limbs(hi: i64, lo: i64, key: &str) -> Result<i64> {
    let total = i128::from(hi) * 1_000_000_000 + i128::from(lo);
    i64::try_from(total).map_err(|_| {
        Error::Corrupt(format!(
            "the values of {key} add up to {total}, beyond 64 bits"
        ))
    })
}

/// A value of the views hash (or an earlier Tally's total) that is not an
/// integer: "TALLY_CORRUPT <key> <field>".
fn corrupt(e: &redis::RedisError) -> Error {
    Error::Corrupt(format!(
        "{} is not an integer",
        e.detail().unwrap_or("a daily statistics value")
    ))
}

#[cfg(test)]
mod tests {
    use super::from_limbs;

    #[test]
    fn limbs_make_every_64_bit_total() {
        assert_eq!(from_limbs(0, 0, "k").unwrap(), 0);
        assert_eq!(
            from_limbs(9_223_372_036, 854_775_807, "k").unwrap(),
            i64::MAX
        );
        assert_eq!(
            from_limbs(-9_223_372_037, 145_224_192, "k").unwrap(),
            i64::MIN
        );
        assert!(from_limbs(9_223_372_036, 854_775_808, "k").is_err());
    }
}
