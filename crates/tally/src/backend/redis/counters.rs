//! Counters in Redis, in either key layout (see [`super::layout`]).
//!
//! Writes are one Lua call (`counters_incr.lua`) that adds every delta and
//! registers every counter, all or nothing: an overflowing HINCRBY makes the
//! script take back what it already added. On a cluster, a batch is split
//! into one call per registry shard (one slot each), sent concurrently; each
//! call is atomic and carries the batch's sequence number, recorded per
//! writer lane in a key of the same slot, so a retried call is applied once.
//! When one shard refuses its part (an overflow: it wrote
//! nothing), the shards that succeeded are taken back (`counters_revert.lua`)
//! before the error is returned, so the batch as a whole writes nothing;
//! between the two steps a reader may briefly see the reverted part. When a
//! shard's outcome is unknown (unreachable, not confirmed by replicas), the
//! others are kept and the error returned: retrying with the same sequence
//! number completes the batch exactly once.
//!
//! Reads are pipelines of HGETALL; listing is a ZRANGEBYLEX per registry
//! (merged); cleaning walks each registry in batches, one ZRANGEBYLEX and one
//! `counters_clean.lua` call per batch.

use std::collections::BTreeMap;

use async_trait::async_trait;
use futures::StreamExt;
use futures::future::join_all;
use redis::{RedisError, Script, Value};

use super::layout::{self, Layout, SHARDS};
use super::{Redis, WriteFailure};
use crate::counters::slice::{CounterWrite, SliceDelta};
use crate::counters::store::{Applied, CleanJob, CleanReport, CounterStore, Sample, WriteBatch};
use crate::error::{Error, Result};
use crate::name::Name;

/// Registry shards cleaned at the same time.
const CLEAN_CONCURRENCY: usize = 4;

/// Counters stored in Redis.
#[derive(Clone, Debug)]
pub struct RedisCounterStore {
    redis: Redis,
    layout: Layout,
    incr: Script,
    revert: Script,
    clean: Script,
    delete: Script,
}

impl RedisCounterStore {
    /// A store on `redis` in `layout`. The book's layout needs a standalone
    /// server (its `known:` key is shared by every counter).
    pub fn new(redis: Redis, layout: Layout) -> Result<Self> {
        if layout == Layout::Ria && redis.is_cluster() {
            return Err(Error::Config(
                "the `ria` layout keeps every counter in one `known:` key, so it needs a \
                 standalone server; use the default layout on a cluster"
                    .into(),
            ));
        }
        Ok(RedisCounterStore {
            redis,
            layout,
            incr: Script::new(concat!(
                include_str!("lua/counters_undo.lua"),
                include_str!("lua/counters_incr.lua")
            )),
            revert: Script::new(concat!(
                include_str!("lua/counters_undo.lua"),
                include_str!("lua/counters_revert.lua")
            )),
            clean: Script::new(include_str!("lua/counters_clean.lua")),
            delete: Script::new(include_str!("lua/counters_delete.lua")),
        })
    }

    /// The key layout in use.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    fn hash_key(&self, precision: u64, name: &Name) -> String {
        match &self.layout {
            Layout::Ria => layout::ria_hash(precision, name.as_str()),
            Layout::Tagged { prefix } => layout::tagged_hash(prefix, precision, name),
        }
    }

    /// Groups a batch's counters into calls: one for everything on a
    /// standalone server, one per registry shard on a cluster.
    fn incr_calls<'a>(&self, batch: &'a WriteBatch) -> Vec<IncrCall<'a>> {
        if !(self.redis.is_cluster() && matches!(self.layout, Layout::Tagged { .. })) {
            let all: Vec<&CounterWrite> = batch.counters.iter().collect();
            return vec![self.incr_call(&all, batch)];
        }
        let mut groups: BTreeMap<u32, Vec<&'a CounterWrite>> = BTreeMap::new();
        for counter in &batch.counters {
            groups
                .entry(layout::shard_of(counter.name.as_str()))
                .or_default()
                .push(counter);
        }
        groups
            .into_values()
            .map(|counters| self.incr_call(&counters, batch))
            .collect()
    }

    /// Writes the key of one precision of a counter into `buf`.
    fn write_hash_key(&self, buf: &mut String, precision: u64, name: &str, shard: u32) {
        use std::fmt::Write;
        buf.clear();
        let _ = match &self.layout {
            Layout::Ria => write!(buf, "count:{precision}:{name}"),
            Layout::Tagged { prefix } => write!(buf, "{{{prefix}:{shard}}}:{precision}:{name}"),
        };
    }

    /// Builds the EVALSHA of `counters_incr.lua` for `counters` directly into
    /// one command buffer (no string per argument): KEYS are the writer
    /// lane's record (if any), one hash per (counter, precision) in batch
    /// order, then the registries; ARGV refers to them by index.
    fn incr_call<'a>(&self, counters: &[&'a CounterWrite], batch: &WriteBatch) -> IncrCall<'a> {
        let tagged = matches!(self.layout, Layout::Tagged { .. });
        let shards: Vec<u32> = counters
            .iter()
            .map(|c| {
                if tagged {
                    layout::shard_of(c.name.as_str())
                } else {
                    0
                }
            })
            .collect();
        // Registries and the counters each lists, in key order.
        let mut registries: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
        let mut hashes = 0usize;
        let mut ops = Vec::with_capacity(counters.iter().map(|c| c.deltas.len()).sum());
        for (counter, &shard) in counters.iter().zip(&shards) {
            let mut last = None;
            for d in &counter.deltas {
                if last != Some(d.precision) {
                    hashes += 1;
                    last = Some(d.precision);
                    if !tagged {
                        // The book's known: lists `<p>:<name>` per precision.
                        registries.entry(0).or_default().push(counter.name.as_str());
                    }
                }
                ops.push((&counter.name, *d));
            }
            if tagged {
                registries
                    .entry(shard)
                    .or_default()
                    .push(counter.name.as_str());
            }
        }
        let marker = batch.seq.is_some();
        let nkeys = usize::from(marker) + hashes + registries.len();
        let mut cmd = super::evalsha(&self.incr, nkeys);
        let mut buf = String::new();
        // KEYS.
        if let Some(seq) = batch.seq {
            match &self.layout {
                Layout::Ria => cmd.arg(format!("tally-writer:{}", seq.lane_id())),
                Layout::Tagged { prefix } => cmd.arg(format!(
                    "{}:writer:{}",
                    layout::tag(prefix, shards[0]),
                    seq.lane_id()
                )),
            };
        }
        for (counter, &shard) in counters.iter().zip(&shards) {
            let mut last = None;
            for d in &counter.deltas {
                if last != Some(d.precision) {
                    last = Some(d.precision);
                    self.write_hash_key(&mut buf, d.precision, counter.name.as_str(), shard);
                    cmd.arg(buf.as_str());
                }
            }
        }
        for &shard in registries.keys() {
            match &self.layout {
                Layout::Ria => cmd.arg(layout::RIA_KNOWN),
                Layout::Tagged { prefix } => cmd.arg(layout::tagged_registry(prefix, shard)),
            };
        }
        // ARGV: whether KEYS[1] is the lane's record, the sequence number,
        // the number of hashes; per hash its (slice, delta) pairs.
        cmd.arg(if marker { "1" } else { "0" })
            .arg(batch.seq.map_or(0, |s| s.seq))
            .arg(hashes);
        let mut op_keys = Vec::with_capacity(ops.len());
        let mut key = usize::from(marker);
        for counter in counters {
            for group in counter.deltas.chunk_by(|a, b| a.precision == b.precision) {
                key += 1;
                cmd.arg(group.len());
                for d in group {
                    cmd.arg(d.slice).arg(d.delta);
                    op_keys.push(key);
                }
            }
        }
        // Then per registry its members.
        for members in registries.values() {
            cmd.arg(members.len());
            if tagged {
                for m in members {
                    cmd.arg(*m);
                }
            } else {
                // The book's members, one per (counter, precision).
                for counter in counters {
                    for group in counter.deltas.chunk_by(|a, b| a.precision == b.precision) {
                        use std::fmt::Write;
                        buf.clear();
                        let _ = write!(buf, "{}:{}", group[0].precision, counter.name);
                        cmd.arg(buf.as_str());
                    }
                }
            }
        }
        IncrCall {
            cmd,
            marker,
            op_keys,
            ops,
        }
    }

    async fn run_incr(&self, call: &IncrCall<'_>) -> Result<Applied> {
        match self.redis.eval_cmd(&self.incr, &call.cmd).await {
            Ok(Value::Int(1)) => Ok(Applied::Written),
            Ok(Value::Int(_)) => Ok(Applied::Duplicate),
            Ok(other) => Err(Error::Backend(format!(
                "counters_incr.lua answered {other:?}"
            ))),
            Err(WriteFailure::Redis(e)) => Err(call.error(e)),
            Err(WriteFailure::Tally(e)) => Err(e),
        }
    }

    /// Takes back a call that was applied (tagged layout, cluster only).
    async fn run_revert(&self, call: &IncrCall<'_>) -> Result<()> {
        let Layout::Tagged { prefix } = &self.layout else {
            return Ok(());
        };
        let Some((first, _)) = call.ops.first() else {
            return Ok(());
        };
        let shard = layout::shard_of(first.as_str());
        let mut invocation = self.revert.prepare_invoke();
        invocation.key(layout::tagged_registry(prefix, shard));
        // The call's KEYS, rebuilt: its lane record (if any) stands in
        // at index 1 so that the ops' indices still match, shifted by one
        // for the registry placed first.
        let mut keys: Vec<String> = Vec::new();
        if call.marker {
            keys.push(layout::tagged_registry(prefix, shard));
        }
        for (i, (name, d)) in call.ops.iter().enumerate() {
            if keys.len() < call.op_keys[i] {
                keys.push(layout::tagged_hash(prefix, d.precision, name));
            }
        }
        for key in &keys {
            invocation.key(key);
        }
        // The writer lane's record keeps the reverted number: the writer's
        // next numbers are above it, so they still apply.
        invocation.arg(call.ops.len());
        let mut hashes: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, (name, d)) in call.ops.iter().enumerate() {
            let key_index = call.op_keys[i] + 1;
            invocation.arg(key_index).arg(d.slice).arg(d.delta);
            let list = hashes.entry(name.as_str()).or_default();
            if !list.contains(&key_index) {
                list.push(key_index);
            }
        }
        for (name, list) in hashes {
            invocation.arg(name).arg(list.len());
            for i in list {
                invocation.arg(i);
            }
        }
        let _: i64 = invocation.invoke_async(&mut self.redis.handle()).await?;
        Ok(())
    }

    /// One `counters_clean.lua` call over `entries`; `shared` holds the
    /// cutoff of each hash position when every entry has the same ones (the
    /// tagged layout), sent once instead of once per entry.
    async fn clean_entries(
        &self,
        registry: &str,
        entries: &[CleanEntry],
        book_rule: bool,
        shared: Option<&[Option<i64>]>,
    ) -> Result<(u64, u64)> {
        let np = entries.first().map_or(0, |e| e.hashes.len());
        let nkeys = 1 + entries.iter().map(|e| e.hashes.len()).sum::<usize>();
        let mut cmd = super::evalsha(&self.clean, nkeys);
        cmd.arg(registry);
        for entry in entries {
            for (key, _) in &entry.hashes {
                cmd.arg(key.as_str());
            }
        }
        cmd.arg(np)
            .arg(if book_rule { "1" } else { "0" })
            .arg(if shared.is_some() { "1" } else { "0" });
        let cutoff = |cmd: &mut redis::Cmd, c: &Option<i64>| {
            match c {
                Some(c) => cmd.arg(*c),
                None => cmd.arg(""),
            };
        };
        if let Some(cutoffs) = shared {
            for c in cutoffs {
                cutoff(&mut cmd, c);
            }
        }
        for entry in entries {
            cmd.arg(entry.member.as_str());
            if shared.is_none() {
                for (_, c) in &entry.hashes {
                    cutoff(&mut cmd, c);
                }
            }
        }
        let value = self
            .redis
            .eval_cmd(&self.clean, &cmd)
            .await
            .map_err(Error::from)?;
        let (removed, dropped): (u64, u64) = redis::FromRedisValue::from_redis_value(value)?;
        Ok((removed, dropped))
    }

    /// Walks one registry in batches of `job.batch` members: one ZRANGEBYLEX
    /// and (when `entries` finds work) one clean call per batch.
    async fn clean_registry(
        &self,
        registry: &str,
        job: &CleanJob,
        book_rule: bool,
        shared: Option<&[Option<i64>]>,
        entries: impl Fn(&[String]) -> Vec<CleanEntry>,
    ) -> Result<CleanReport> {
        let mut report = CleanReport::default();
        let mut after: Option<String> = None;
        loop {
            let members =
                range_after(&self.redis, registry, after.as_deref(), "", job.batch).await?;
            report.round_trips += 1;
            if members.is_empty() {
                break;
            }
            report.scanned += members.len() as u64;
            let work = entries(&members);
            if !work.is_empty() {
                let (removed, dropped) = self
                    .clean_entries(registry, &work, book_rule, shared)
                    .await?;
                report.round_trips += 1;
                report.samples_removed += removed;
                report.counters_removed += dropped;
            }
            if members.len() < job.batch {
                break;
            }
            after = members.last().cloned();
        }
        Ok(report)
    }

    /// Cleans one registry shard of the tagged layout.
    async fn clean_shard(
        &self,
        prefix: &str,
        shard: u32,
        job: &CleanJob,
        precisions: &[u64],
    ) -> Result<CleanReport> {
        let cutoffs: Vec<Option<i64>> = precisions.iter().map(|&p| job.cutoff_for(p)).collect();
        let registry = layout::tagged_registry(prefix, shard);
        self.clean_registry(&registry, job, false, Some(&cutoffs), |names| {
            names
                .iter()
                .filter_map(|n| Name::new(n.as_str()).ok())
                .map(|name| CleanEntry {
                    hashes: precisions
                        .iter()
                        .zip(&cutoffs)
                        .map(|(&p, &c)| (layout::tagged_hash(prefix, p, &name), c))
                        .collect(),
                    member: name.into_string(),
                })
                .collect()
        })
        .await
    }

    /// Cleans the book's `known:`, with the book's rules: each member's
    /// precision comes from the member itself.
    async fn clean_ria(&self, job: &CleanJob) -> Result<CleanReport> {
        self.clean_registry(layout::RIA_KNOWN, job, true, None, |members| {
            members
                .iter()
                .filter_map(|member| {
                    let (p, _) = layout::ria_parse_member(member)?;
                    let cutoff = job.cutoff_for(p)?;
                    Some(CleanEntry {
                        member: member.clone(),
                        hashes: vec![(format!("count:{member}"), Some(cutoff))],
                    })
                })
                .collect()
        })
        .await
    }
}

/// One registry member to clean and its hashes, each with its cutoff (`None`
/// when not due in this pass).
struct CleanEntry {
    member: String,
    hashes: Vec<(String, Option<i64>)>,
}

/// One `counters_incr.lua` call, ready to send, and the op each HINCRBY
/// stands for (to name the counter in an overflow error, and to take the
/// call back on a cluster).
struct IncrCall<'a> {
    cmd: redis::Cmd,
    /// Whether KEYS[1] is the writer lane's record.
    marker: bool,
    /// The KEYS index of each op's hash.
    op_keys: Vec<usize>,
    ops: Vec<(&'a Name, SliceDelta)>,
}

impl IncrCall<'_> {
    fn error(&self, e: RedisError) -> Error {
        let op = e
            .detail()
            .and_then(|d| d.split_whitespace().next())
            .and_then(|i| i.parse::<usize>().ok())
            .and_then(|i| self.ops.get(i));
        match (e.code(), op) {
            (Some("TALLY_OVERFLOW"), Some((name, d))) => Error::Overflow {
                name: name.to_string(),
                precision: d.precision,
                slice: d.slice,
                delta: d.delta,
            },
            (Some("TALLY_FAILED"), Some((name, d))) => Error::Backend(format!(
                "redis refused to add to counter {name:?} at precision {} s: {}",
                d.precision,
                e.detail().unwrap_or_default()
            )),
            _ => Error::from(e),
        }
    }
}

/// Up to `limit` members of a sorted set (all scores 0) after `after`, among
/// those starting with `prefix`, in lexicographic order, prefix stripped.
async fn range_after(
    redis: &Redis,
    key: &str,
    after: Option<&str>,
    prefix: &str,
    limit: usize,
) -> Result<Vec<String>> {
    let (min, max) = lex_bounds(prefix, prefix, after);
    let members: Vec<String> = redis::cmd("ZRANGEBYLEX")
        .arg(key)
        .arg(min)
        .arg(max)
        .arg("LIMIT")
        .arg(0)
        .arg(limit)
        .query_async(&mut redis.handle())
        .await?;
    Ok(members
        .into_iter()
        .map(|m| m[prefix.len()..].to_owned())
        .collect())
}

/// ZRANGEBYLEX bounds for the members starting with `wanted`, strictly after
/// the member `member_prefix + after` when given (`member_prefix` is what
/// every member of the range starts with before the name: `<p>:` in the
/// book's `known:`, nothing in a shard's registry).
fn lex_bounds(wanted: &str, member_prefix: &str, after: Option<&str>) -> (String, String) {
    let after = after.map(|a| format!("{member_prefix}{a}"));
    let min = match after {
        Some(a) if a.as_str() >= wanted => format!("({a}"),
        _ if wanted.is_empty() => "-".to_owned(),
        _ => format!("[{wanted}"),
    };
    let max = match crate::name::prefix_upper(wanted) {
        Some(upper) => format!("({upper}"),
        None => "+".to_owned(),
    };
    (min, max)
}

fn zrangebylex(key: &str, min: &str, max: &str, limit: usize) -> redis::Cmd {
    let mut cmd = redis::cmd("ZRANGEBYLEX");
    cmd.arg(key)
        .arg(min)
        .arg(max)
        .arg("LIMIT")
        .arg(0)
        .arg(limit);
    cmd
}

/// A counter hash's HGETALL reply as samples, oldest first, or what is
/// wrong with it. Parses the reply's bytes in place (RESP2 flat array or
/// RESP3 map), with no string or map per field: reads of every precision
/// are on the latency path.
fn parse_hash(value: &Value) -> std::result::Result<Vec<Sample>, String> {
    fn number<T: std::str::FromStr>(v: &Value, what: &str) -> std::result::Result<T, String> {
        let bytes: &[u8] = match v {
            Value::BulkString(b) => b,
            Value::SimpleString(s) => s.as_bytes(),
            other => return Err(format!("it holds {other:?} as {what}")),
        };
        std::str::from_utf8(bytes)
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| format!("it holds {:?}, not {what}", String::from_utf8_lossy(bytes)))
    }
    let sample = |f: &Value, c: &Value| {
        Ok(Sample {
            start: number(f, "a slice start")?,
            count: number(c, "an integer count")?,
        })
    };
    let mut samples = match value {
        Value::Map(pairs) => pairs
            .iter()
            .map(|(f, c)| sample(f, c))
            .collect::<std::result::Result<Vec<_>, String>>()?,
        Value::Array(flat) if flat.len() % 2 == 0 => flat
            .chunks_exact(2)
            .map(|pair| sample(&pair[0], &pair[1]))
            .collect::<std::result::Result<Vec<_>, String>>()?,
        Value::Nil => Vec::new(),
        other => return Err(format!("it is not a hash of counts: {other:?}")),
    };
    samples.sort_unstable();
    Ok(samples)
}

#[async_trait]
impl CounterStore for RedisCounterStore {
    async fn apply(&self, batch: &WriteBatch) -> Result<Applied> {
        if batch.counters.is_empty() {
            return Ok(Applied::Written);
        }
        let calls = self.incr_calls(batch);
        let results = join_all(calls.iter().map(|call| self.run_incr(call))).await;
        if let Some(failed) = results.iter().position(Result::is_err) {
            let refused = results
                .iter()
                .any(|r| matches!(r, Err(e) if e.is_bad_input()));
            if !refused {
                // Outcome unknown (unreachable, not replicated): keep what
                // was written; a retry with the same write id completes
                // the batch exactly once.
                return Err(results
                    .into_iter()
                    .nth(failed)
                    .and_then(Result::err)
                    .expect("an error"));
            }
            // A shard refused its part and wrote nothing: take back the
            // shards that were written, so nothing of the batch remains.
            let undo = calls
                .iter()
                .zip(&results)
                .filter(|(_, r)| matches!(r, Ok(Applied::Written)))
                .map(|(call, _)| self.run_revert(call));
            for undone in join_all(undo).await {
                if let Err(e) = undone {
                    tracing::error!(error = %e, "could not take back part of a failed batch");
                }
            }
            let refusal = results
                .into_iter()
                .find(|r| matches!(r, Err(e) if e.is_bad_input()))
                .and_then(Result::err);
            return Err(refusal.expect("a refusal"));
        }
        Ok(
            if results.iter().any(|r| matches!(r, Ok(Applied::Written))) {
                Applied::Written
            } else {
                Applied::Duplicate
            },
        )
    }

    async fn samples(&self, names: &[Name], precisions: &[u64]) -> Result<Vec<Vec<Vec<Sample>>>> {
        let groups = names
            .iter()
            .map(|name| {
                let mut pipe = redis::pipe();
                for &p in precisions {
                    pipe.cmd("HGETALL").arg(self.hash_key(p, name));
                }
                pipe
            })
            .collect();
        let values = self.redis.run_pipelines(groups).await?;
        names
            .iter()
            .zip(values)
            .map(|(name, per)| {
                precisions
                    .iter()
                    .zip(per)
                    .map(|(&p, v)| {
                        parse_hash(&v).map_err(|why| {
                            Error::Corrupt(format!("{}: {why}", self.hash_key(p, name)))
                        })
                    })
                    .collect()
            })
            .collect()
    }

    async fn list(&self, search: &str, after: Option<&str>, limit: usize) -> Result<Vec<String>> {
        let queries: Vec<(String, String)> = match &self.layout {
            Layout::Ria => Vec::new(),
            Layout::Tagged { prefix } => (0..SHARDS)
                .map(|s| (layout::tagged_registry(prefix, s), String::new()))
                .collect(),
        };
        let queries = if queries.is_empty() {
            // The book's known: holds `<p>:<name>`: one range per precision
            // that may hold counters, merged.
            self.ria_prefixes()
                .await?
                .into_iter()
                .map(|p| (layout::RIA_KNOWN.to_owned(), p))
                .collect()
        } else {
            queries
        };
        let groups = queries
            .iter()
            .map(|(key, prefix)| {
                let (min, max) = lex_bounds(&format!("{prefix}{search}"), prefix, after);
                let mut pipe = redis::pipe();
                pipe.add_command(zrangebylex(key, &min, &max, limit));
                pipe
            })
            .collect();
        let values = self.redis.run_pipelines(groups).await?;
        let mut names = Vec::new();
        for ((_, prefix), mut group) in queries.iter().zip(values) {
            let members: Vec<String> = redis::FromRedisValue::from_redis_value(group.remove(0))?;
            names.extend(members.into_iter().map(|m| m[prefix.len()..].to_owned()));
        }
        names.sort_unstable();
        names.dedup();
        names.truncate(limit);
        Ok(names)
    }

    async fn delete(&self, name: &Name, precisions: &[u64]) -> Result<bool> {
        let mut invocation = self.delete.prepare_invoke();
        match &self.layout {
            Layout::Ria => {
                invocation.key(layout::RIA_KNOWN);
                for &p in precisions {
                    invocation.arg(layout::ria_member(p, name.as_str()));
                }
            }
            Layout::Tagged { prefix } => {
                invocation.key(layout::tagged_registry(
                    prefix,
                    layout::shard_of(name.as_str()),
                ));
                invocation.arg(name.as_str());
            }
        }
        for &p in precisions {
            invocation.key(self.hash_key(p, name));
        }
        let deleted: u64 = invocation.invoke_async(&mut self.redis.handle()).await?;
        Ok(deleted > 0)
    }

    async fn clean(&self, job: &CleanJob, precisions: &[u64]) -> Result<CleanReport> {
        match &self.layout {
            Layout::Ria => self.clean_ria(job).await,
            Layout::Tagged { prefix } => {
                let reports: Vec<Result<CleanReport>> = futures::stream::iter(0..SHARDS)
                    .map(|shard| self.clean_shard(prefix, shard, job, precisions))
                    .buffer_unordered(CLEAN_CONCURRENCY)
                    .collect()
                    .await;
                let mut total = CleanReport::default();
                for report in reports {
                    total.add(&report?);
                }
                Ok(total)
            }
        }
    }

    async fn ping(&self) -> Result<()> {
        self.redis.ping().await
    }
}

impl RedisCounterStore {
    /// The `<p>:` prefixes present in the book's `known:`: one ZRANGEBYLEX
    /// hop per distinct precision, so counters written with precisions Tally
    /// was not configured with are listed too.
    async fn ria_prefixes(&self) -> Result<Vec<String>> {
        let mut prefixes = Vec::new();
        let mut min = "-".to_owned();
        loop {
            let first: Vec<String> = redis::cmd("ZRANGEBYLEX")
                .arg(layout::RIA_KNOWN)
                .arg(&min)
                .arg("+")
                .arg("LIMIT")
                .arg(0)
                .arg(1)
                .query_async(&mut self.redis.handle())
                .await?;
            let Some(member) = first.into_iter().next() else {
                break;
            };
            let Some((p, _)) = member.split_once(':') else {
                // Not a book member; step over it.
                min = format!("({member}");
                continue;
            };
            prefixes.push(format!("{p}:"));
            min = format!("[{p};");
            if prefixes.len() > 64 {
                break;
            }
        }
        Ok(prefixes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_replies_parse_in_either_protocol_and_name_what_is_wrong() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let resp2 = Value::Array(vec![b("20"), b("-3"), b("10"), b("7")]);
        let resp3 = Value::Map(vec![(b("20"), b("-3")), (b("10"), b("7"))]);
        let want = vec![
            Sample {
                start: 10,
                count: 7,
            },
            Sample {
                start: 20,
                count: -3,
            },
        ];
        assert_eq!(parse_hash(&resp2).unwrap(), want);
        assert_eq!(parse_hash(&resp3).unwrap(), want);
        assert_eq!(parse_hash(&Value::Array(vec![])).unwrap(), vec![]);
        let bad_field = Value::Array(vec![b("10.0"), b("1")]);
        assert!(
            parse_hash(&bad_field)
                .unwrap_err()
                .contains("\"10.0\", not a slice start")
        );
        let bad_count = Value::Map(vec![(b("10"), b("x"))]);
        assert!(
            parse_hash(&bad_count)
                .unwrap_err()
                .contains("not an integer count")
        );
        assert!(
            parse_hash(&Value::Int(3))
                .unwrap_err()
                .contains("not a hash")
        );
    }

    #[test]
    fn lex_bounds_select_one_prefix() {
        assert_eq!(lex_bounds("", "", None), ("-".into(), "+".into()));
        assert_eq!(lex_bounds("", "", Some("b")), ("(b".into(), "+".into()));
        assert_eq!(lex_bounds("5:", "5:", None), ("[5:".into(), "(5;".into()));
        assert_eq!(
            lex_bounds("5:", "5:", Some("hits")),
            ("(5:hits".into(), "(5;".into())
        );
        // A search within the book's 5 s members, before and after its range.
        assert_eq!(
            lex_bounds("5:ap", "5:", Some("a")),
            ("[5:ap".into(), "(5:aq".into())
        );
        assert_eq!(
            lex_bounds("5:ap", "5:", Some("apz")),
            ("(5:apz".into(), "(5:aq".into())
        );
        assert_eq!(lex_bounds("ap", "", None), ("[ap".into(), "(aq".into()));
    }
}
