//! Daily statistics in Redis, in the layout of the "million ads on Redis
//! Cluster" article (docs/reference.md) and nothing else.
//!
//! Per entity, one hash `{<prefix>:<id>}:views` (the hash tag keeps an entity
//! in one cluster slot) from `YYYYMMDD` to views, exactly the article's key,
//! plus one non-date field, `before`: the views of the days that left the
//! retention window. The hash is the entity's whole state, so the article's
//! own code and Tally agree on every read whichever writes first or both at
//! once: the article's HMGET of dates never asks for `before`, and its total
//! (a sum of HVALS) includes it, so the sum of the hash is the all-time total
//! for both.
//!
//! A write is one `daily_incr.lua` call per entity carrying all that
//! entity's views of the batch: the days' counts, with the days older than
//! the window folded into `before` in the same step (no cleaner); a keyed
//! write's call also checks and sets its mark,
//! `{<prefix>:<id>}:applied:<writer hex>` ([`super::once`]), once for all
//! the entity's views. A batch sends its calls concurrently (pipelined on
//! the connection, spread over the nodes on a cluster). Days are read with one
//! HMGET; the total with one `daily_total.lua` call summing the hash (at
//! most retention + 1 fields once Tally has written), exactly (64-bit,
//! whatever Lua's doubles can hold).
//!
//! The store keeps no registry of entities: [`DailyStore::list`] walks the
//! keyspace with SCAN ([`super::scan`]) for `tally migrate`.
//!
//! Data written by earlier Tally versions, which kept a running `total` in
//! `{<prefix>:<id>}:stats` and dropped old days without keeping their sum,
//! reads right as it is (the total is the larger of that running total and
//! the hash's sum) and is migrated by the entity's next write (the missing
//! part goes to `before`, `:stats` is deleted, the hash loses its TTL).

use std::collections::HashMap;

use async_trait::async_trait;
use futures::future::try_join_all;
use redis::Script;

use super::scan::glob_escape;
use super::{Redis, WriteFailure, once};
use crate::daily::{DailyHeld, DailyStore, DailyWrite, DailyWritten, Day, entity_id};
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

    /// `{<prefix>:<id>}:views`, the article's key.
    pub fn views_key(&self, entity: &Name) -> String {
        format!("{}:views", self.tag(entity))
    }

    /// `{<prefix>:<id>}:stats`, where earlier Tally versions kept a running
    /// total (read, then migrated by the next write).
    pub fn stats_key(&self, entity: &Name) -> String {
        format!("{}:stats", self.tag(entity))
    }

    /// One `daily_incr.lua` call for `writes`, all of one entity: the
    /// newest floor among them holds for all (the service gives a batch one
    /// floor).
    async fn incr_entity(
        &self,
        writes: &[&DailyWrite],
        mark: Option<&Mark>,
    ) -> Result<Vec<DailyWritten>> {
        let first = writes[0];
        let mut keys = vec![self.views_key(&first.entity), self.stats_key(&first.entity)];
        if let Some(mark) = mark {
            keys.push(once::key(&self.tag(&first.entity), mark));
        }
        let floor = writes.iter().map(|w| w.floor).max().unwrap_or(first.floor);
        let mut args = vec![floor.yyyymmdd().to_string()];
        for w in writes {
            args.extend([w.day.yyyymmdd().to_string(), w.count.to_string()]);
        }
        match self.redis.eval_write(&self.incr, &keys, &args).await {
            Ok(value) => {
                let answer: Vec<i64> = redis::FromRedisValue::from_redis_value(value)?;
                let applied = match answer.first() {
                    Some(1) => Applied::Written,
                    _ => Applied::Duplicate,
                };
                let per: Vec<&[i64]> = answer[1..].chunks(3).collect();
                if per.len() != writes.len() || per.iter().any(|p| p.len() != 3) {
                    return Err(Error::Backend(format!(
                        "daily_incr.lua answered {answer:?} for {} writes",
                        writes.len()
                    )));
                }
                per.into_iter()
                    .map(|p| {
                        Ok(DailyWritten {
                            day_count: p[0],
                            total: from_limbs(p[1], p[2], &keys[0])?,
                            applied,
                        })
                    })
                    .collect()
            }
            Err(WriteFailure::Redis(e)) if e.code() == Some("TALLY_CORRUPT") => Err(corrupt(&e)),
            Err(WriteFailure::Redis(e)) if e.code() == Some("TALLY_OVERFLOW") => {
                let count: i64 = writes.iter().map(|w| w.count).fold(0, i64::saturating_add);
                Err(Error::InvalidCount(format!(
                    "adding {count} views to entity {:?} would overflow its {}; nothing was written",
                    first.entity.as_str(),
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
        // One call per entity, carrying all its writes (so a keyed batch's
        // mark covers each entity's writes once), in first-seen order.
        let mut groups: Vec<(&Name, Vec<usize>)> = Vec::new();
        let mut index: HashMap<&Name, usize> = HashMap::new();
        for (i, w) in writes.iter().enumerate() {
            let g = *index.entry(&w.entity).or_insert_with(|| {
                groups.push((&w.entity, Vec::new()));
                groups.len() - 1
            });
            groups[g].1.push(i);
        }
        let answers = try_join_all(groups.iter().map(|(_, members)| {
            let group: Vec<&DailyWrite> = members.iter().map(|&i| &writes[i]).collect();
            async move { self.incr_entity(&group, mark).await }
        }))
        .await?;
        let mut out = vec![None; writes.len()];
        for ((_, members), answer) in groups.iter().zip(answers) {
            for (&i, written) in members.iter().zip(answer) {
                out[i] = Some(written);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// One `daily_incr.lua` call per write, each with its own mark key in
    /// the entity's slot, all sent at once (pipelined on the multiplexed
    /// connection, concurrently per node on a cluster).
    async fn incr_each(&self, writes: &[(DailyWrite, Mark)]) -> Result<Vec<Result<DailyWritten>>> {
        Ok(
            futures::future::join_all(writes.iter().map(|(w, mark)| async move {
                let mut out = self.incr_entity(&[w], Some(mark)).await?;
                out.pop().ok_or_else(|| {
                    Error::Backend("daily_incr.lua answered no result for a write".into())
                })
            }))
            .await,
        )
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

    /// SCAN of `{<prefix>:*}:views` and of an earlier Tally's
    /// `{<prefix>:*}:stats` (every master of a cluster), then the days of
    /// each views hash (HKEYS, pipelined, `LIST_CHUNK` entities a round).
    async fn list(&self) -> Result<Vec<DailyHeld>> {
        let prefix = glob_escape(&self.prefix);
        let mut entities = std::collections::BTreeSet::new();
        for suffix in ["views", "stats"] {
            let keys = self.redis.scan(&format!("{{{prefix}:*}}:{suffix}")).await?;
            entities.extend(keys.iter().filter_map(|k| {
                let id = k
                    .strip_prefix(&format!("{{{}:", self.prefix))?
                    .strip_suffix(&format!("}}:{suffix}"))?;
                entity_id(id).ok()
            }));
        }
        let entities: Vec<Name> = entities.into_iter().collect();
        let mut held = Vec::with_capacity(entities.len());
        for chunk in entities.chunks(LIST_CHUNK) {
            let pipes = chunk
                .iter()
                .map(|e| {
                    let mut pipe = redis::pipe();
                    pipe.cmd("HKEYS").arg(self.views_key(e));
                    pipe
                })
                .collect();
            let answers = self.redis.run_pipelines(pipes).await?;
            for (entity, mut answer) in chunk.iter().zip(answers) {
                let fields: Vec<String> = match answer.pop() {
                    Some(v) => redis::FromRedisValue::from_redis_value(v)?,
                    None => Vec::new(),
                };
                let mut days: Vec<Day> = fields
                    .iter()
                    .filter(|f| f.len() == 8)
                    .filter_map(|f| Day::from_yyyymmdd(f.parse().ok()?).ok())
                    .collect();
                days.sort_unstable();
                held.push(DailyHeld {
                    entity: entity.clone(),
                    days,
                });
            }
        }
        Ok(held)
    }

    async fn ping(&self) -> Result<()> {
        self.redis.ping().await
    }
}

/// Entities whose days one round of a listing reads.
const LIST_CHUNK: usize = 500;

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
