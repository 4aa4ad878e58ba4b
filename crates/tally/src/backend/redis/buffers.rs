//! The buffer in Redis: pending rows and claims, cluster-ready.
//!
//! Rows are spread over [`SHARDS`] shards by a stable hash of their row id;
//! every key of a shard shares the hash tag `{<prefix>:buf:<shard>}`, so each
//! script call touches one slot:
//!
//! - `{..}:row:<row id>`: hash of a row's pending changes (`c:<col>` deltas
//!   via HINCRBY, `l:<col>` last-write values via HSET);
//! - `{..}:pending`: sorted set of pending row ids, scored by the ms of their
//!   oldest unflushed change (oldest first when claiming);
//! - `{..}:claims`: sorted set of live claims' batch ids, scored by lease
//!   deadline (ms);
//! - `{..}:claim:<batch>`: hash row id → the row's changes (flat JSON),
//!   everything needed to redo the SQL;
//! - `{..}:inflight`: hash row id → the batch id of its live claim.
//!
//! `incr` is one Lua call; a keyed change's call also checks and sets its
//! mark, `{..}:applied:<writer hex>` ([`super::once`]). Claiming reads each shard's oldest candidates in
//! one pipelined round trip, then moves them in one Lua call that re-checks
//! each (another flusher may have taken it). Times are passed in as
//! arguments; lease deadlines are compared with the caller's clock.

use std::collections::BTreeMap;

use async_trait::async_trait;
use redis::{Pipeline, Script, Value};

use super::layout::{self, Layout};
use super::{Redis, once};
use crate::buffers::row::{BatchId, Claim, RowDelta, RowKey, RowUpdate};
use crate::buffers::store::{BufferStats, BufferStore, NewClaim};
use crate::engine::Applied;
use crate::error::{Error, Result};
use crate::idempotency::Mark;

/// Shards of the buffer. Fixed: changing it would strand pending rows.
pub const SHARDS: u32 = 16;

/// The buffer's store in Redis.
#[derive(Clone, Debug)]
pub struct RedisBufferStore {
    redis: Redis,
    prefix: String,
    incr: Script,
    claim: Script,
    take_over: Script,
    release: Script,
}

impl RedisBufferStore {
    /// A store on `redis`; keys use the default layout's prefix (`tally` for
    /// the book's layout, which has no buffer keys of its own).
    pub fn new(redis: Redis, layout: &Layout) -> Self {
        let prefix = layout.prefix().to_owned();
        RedisBufferStore {
            redis,
            prefix,
            incr: lua!("once", "buffer_incr"),
            claim: lua!("buffer_claim"),
            take_over: lua!("buffer_take_over"),
            release: lua!("buffer_release"),
        }
    }

    /// One pipeline a shard, each filled by `fill`, run together: the
    /// replies, in shard order.
    async fn per_shard(&self, fill: impl Fn(&mut Pipeline, u32)) -> Result<Vec<Vec<Value>>> {
        let groups = (0..SHARDS)
            .map(|s| {
                let mut pipe = redis::pipe();
                fill(&mut pipe, s);
                pipe
            })
            .collect();
        self.redis.run_pipelines(groups).await
    }

    fn tag(&self, shard: u32) -> String {
        format!("{{{}:buf:{shard}}}", self.prefix)
    }

    fn row_key(&self, shard: u32, id: &str) -> String {
        format!("{}:row:{id}", self.tag(shard))
    }

    fn pending_key(&self, shard: u32) -> String {
        format!("{}:pending", self.tag(shard))
    }

    fn inflight_key(&self, shard: u32) -> String {
        format!("{}:inflight", self.tag(shard))
    }

    fn claims_key(&self, shard: u32) -> String {
        format!("{}:claims", self.tag(shard))
    }

    fn claim_key(&self, shard: u32, batch: BatchId) -> String {
        format!("{}:claim:{batch}", self.tag(shard))
    }
}

/// The shard of a row id.
pub fn shard_of(row_id: &str) -> u32 {
    layout::shard_of(row_id) % SHARDS
}

/// Parses a flat array of (row id, flat JSON changes) pairs into rows.
fn parse_rows(flat: Vec<String>) -> Result<Vec<RowUpdate>> {
    if !flat.len().is_multiple_of(2) {
        return Err(Error::Corrupt("a claim reply has an odd length".into()));
    }
    flat.chunks(2)
        .map(|pair| {
            Ok(RowUpdate {
                row: RowKey::parse(&pair[0])?,
                delta: RowDelta::from_flat_json(&pair[1])?,
            })
        })
        .collect()
}

/// Parses `ZRANGE .. WITHSCORES` replies: (member, score) pairs.
fn parse_scored(value: Value) -> Result<Vec<(String, f64)>> {
    let flat: Vec<Value> = redis::FromRedisValue::from_redis_value(value)?;
    let mut out = Vec::new();
    let mut items = flat.into_iter();
    while let Some(item) = items.next() {
        // RESP3 nests pairs; RESP2 alternates member and score.
        if let Value::Array(pair) = item {
            let mut pair = pair.into_iter();
            let (Some(m), Some(s)) = (pair.next(), pair.next()) else {
                return Err(Error::Corrupt("a scored reply pair is short".into()));
            };
            out.push((
                redis::FromRedisValue::from_redis_value(m)?,
                redis::FromRedisValue::from_redis_value(s)?,
            ));
        } else {
            let member: String = redis::FromRedisValue::from_redis_value(item)?;
            let score = items
                .next()
                .ok_or_else(|| Error::Corrupt("a scored reply has no score".into()))?;
            out.push((member, redis::FromRedisValue::from_redis_value(score)?));
        }
    }
    Ok(out)
}

#[async_trait]
impl BufferStore for RedisBufferStore {
    async fn incr(&self, update: &RowUpdate, now_ms: u64, mark: Option<&Mark>) -> Result<Applied> {
        let id = update.row.id();
        let shard = shard_of(&id);
        let mut call = self.incr.prepare_invoke();
        call.key(self.row_key(shard, &id))
            .key(self.pending_key(shard));
        if let Some(mark) = mark {
            call.key(once::key(&self.tag(shard), mark));
        }
        call.arg(now_ms).arg(&id).arg(update.delta.counters.len());
        for (col, d) in &update.delta.counters {
            call.arg(format!("c:{col}")).arg(d);
        }
        for (col, v) in &update.delta.last_write {
            call.arg(format!("l:{col}")).arg(v);
        }
        match call.invoke_async::<i64>(&mut self.redis.handle()).await {
            Ok(1) => Ok(Applied::Written),
            Ok(_) => Ok(Applied::Duplicate),
            Err(e) if e.code() == Some("TALLY_OVERFLOW") => Err(Error::InvalidCount(format!(
                "adding to {} of row {id} would overflow its pending 64-bit delta; nothing \
                 was written",
                e.detail().unwrap_or_default().trim_start_matches("c:")
            ))),
            Err(e) => Err(e.into()),
        }
    }

    async fn claim(&self, new: NewClaim) -> Result<Option<Claim>> {
        let (batch, max_rows) = (new.batch, new.max_rows);
        if max_rows == 0 {
            return Ok(None);
        }
        let replies = self
            .per_shard(|pipe, s| {
                pipe.cmd("ZRANGE")
                    .arg(self.pending_key(s))
                    .arg(0)
                    .arg(max_rows as i64 - 1)
                    .arg("WITHSCORES");
            })
            .await?;
        let mut candidates: Vec<(f64, u32, Vec<String>)> = Vec::new();
        for (shard, mut reply) in (0..SHARDS).zip(replies) {
            let scored = parse_scored(reply.remove(0))?;
            if let Some(&(_, oldest)) = scored.first() {
                candidates.push((oldest, shard, scored.into_iter().map(|(m, _)| m).collect()));
            }
        }
        candidates.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for (_, shard, members) in candidates {
            let mut call = self.claim.prepare_invoke();
            call.key(self.pending_key(shard))
                .key(self.inflight_key(shard))
                .key(self.claims_key(shard))
                .key(self.claim_key(shard, batch))
                .arg(new.lease_end_ms)
                .arg(batch.to_string());
            for m in &members {
                call.key(self.row_key(shard, m));
                call.arg(m);
            }
            let flat: Vec<String> = call.invoke_async(&mut self.redis.handle()).await?;
            let rows = parse_rows(flat)?;
            if !rows.is_empty() {
                return Ok(Some(Claim { batch, shard, rows }));
            }
        }
        Ok(None)
    }

    async fn take_over(&self, now_ms: u64, lease_ms: u64, max: usize) -> Result<Vec<Claim>> {
        let replies = self
            .per_shard(|pipe, s| {
                pipe.cmd("ZRANGEBYSCORE")
                    .arg(self.claims_key(s))
                    .arg("-inf")
                    .arg(now_ms)
                    .arg("LIMIT")
                    .arg(0)
                    .arg(max);
            })
            .await?;
        let mut out = Vec::new();
        for (shard, mut reply) in (0..SHARDS).zip(replies) {
            let batches: Vec<String> = redis::FromRedisValue::from_redis_value(reply.remove(0))?;
            for b in batches {
                if out.len() >= max {
                    return Ok(out);
                }
                let batch = BatchId::parse(&b)?;
                let got: Option<Vec<String>> = self
                    .take_over
                    .key(self.claims_key(shard))
                    .key(self.claim_key(shard, batch))
                    .arg(now_ms)
                    .arg(now_ms + lease_ms)
                    .arg(&b)
                    .invoke_async(&mut self.redis.handle())
                    .await?;
                if let Some(flat) = got {
                    out.push(Claim {
                        batch,
                        shard,
                        rows: parse_rows(flat)?,
                    });
                }
            }
        }
        Ok(out)
    }

    async fn release(&self, claim: &Claim) -> Result<()> {
        let _: i64 = self
            .release
            .key(self.claims_key(claim.shard))
            .key(self.claim_key(claim.shard, claim.batch))
            .key(self.inflight_key(claim.shard))
            .arg(claim.batch.to_string())
            .invoke_async(&mut self.redis.handle())
            .await?;
        Ok(())
    }

    async fn pending(&self, row: &RowKey) -> Result<Vec<(Option<BatchId>, RowDelta)>> {
        let id = row.id();
        let shard = shard_of(&id);
        let mut pipe = redis::pipe();
        pipe.cmd("HGETALL")
            .arg(self.row_key(shard, &id))
            .cmd("HGET")
            .arg(self.inflight_key(shard))
            .arg(&id);
        let (flat, inflight): (BTreeMap<String, String>, Option<String>) =
            pipe.query_async(&mut self.redis.handle()).await?;
        let mut out = Vec::new();
        if let Some(batch) = inflight {
            let batch = BatchId::parse(&batch)?;
            let data: Option<String> = redis::cmd("HGET")
                .arg(self.claim_key(shard, batch))
                .arg(&id)
                .query_async(&mut self.redis.handle())
                .await?;
            if let Some(data) = data {
                out.push((Some(batch), RowDelta::from_flat_json(&data)?));
            }
        }
        let flat: Vec<String> = flat.into_iter().flat_map(|(k, v)| [k, v]).collect();
        let unclaimed = RowDelta::from_flat(&flat)?;
        if !unclaimed.is_empty() {
            out.push((None, unclaimed));
        }
        Ok(out)
    }

    async fn stats(&self, now_ms: u64) -> Result<BufferStats> {
        let replies = self
            .per_shard(|pipe, s| {
                pipe.cmd("ZCARD")
                    .arg(self.pending_key(s))
                    .cmd("ZRANGE")
                    .arg(self.pending_key(s))
                    .arg(0)
                    .arg(0)
                    .arg("WITHSCORES")
                    .cmd("ZCARD")
                    .arg(self.claims_key(s))
                    .cmd("ZCOUNT")
                    .arg(self.claims_key(s))
                    .arg("-inf")
                    .arg(now_ms);
            })
            .await?;
        let mut stats = BufferStats::default();
        for reply in replies {
            let mut it = reply.into_iter();
            let mut next = || it.next().unwrap_or(Value::Nil);
            let pending: u64 = redis::FromRedisValue::from_redis_value(next())?;
            let oldest = parse_scored(next())?;
            let claims: u64 = redis::FromRedisValue::from_redis_value(next())?;
            let expired: u64 = redis::FromRedisValue::from_redis_value(next())?;
            stats.pending_rows += pending;
            stats.claims += claims;
            stats.expired_claims += expired;
            if let Some((_, score)) = oldest.first() {
                let ms = *score as u64;
                stats.oldest_pending_ms = Some(stats.oldest_pending_ms.map_or(ms, |o| o.min(ms)));
            }
        }
        Ok(stats)
    }
}
