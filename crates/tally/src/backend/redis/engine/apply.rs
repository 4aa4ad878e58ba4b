//! Applying a batch: one `engine_apply.lua` call per registry shard (one
//! for everything on a standalone server), sent concurrently; when one
//! shard refuses its part, the others are taken back ([`super::revert`]).

use std::collections::BTreeMap;

use futures::future::join_all;
use redis::{RedisError, Value as Reply};

use super::super::layout::SpaceKeys;
use super::super::{WriteFailure, expiring};
use super::RedisSliceStore;
use crate::clock::Timestamp;
use crate::engine::store::check_stored;
use crate::engine::{Applied, Batch, CellDelta, Kind, SeriesWrite, Value};
use crate::error::{Error, Result};
use crate::name::Name;

impl RedisSliceStore {
    pub(super) async fn apply_batch(&self, batch: &Batch) -> Result<Applied> {
        check_stored(batch.space.kind)?;
        if batch.writes.is_empty() {
            return Ok(Applied::Written);
        }
        let keys = self.layout.space_keys(&batch.space);
        let calls = self.apply_calls(keys, batch)?;
        let results = join_all(calls.iter().map(|call| self.run_apply(call))).await;
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
                .map(|(call, _)| self.run_revert(keys, &batch.space, call));
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

    /// Groups a batch's series into calls: one for everything on a
    /// standalone server, one per registry shard on a cluster.
    pub(super) fn apply_calls<'a>(
        &self,
        keys: SpaceKeys<'_>,
        batch: &'a Batch,
    ) -> Result<Vec<ApplyCall<'a>>> {
        let now = self.clock.now();
        if !self.redis.is_cluster() || keys.is_book() {
            let all: Vec<&SeriesWrite> = batch.writes.iter().collect();
            return Ok(vec![self.apply_call(keys, &all, batch, now)?]);
        }
        let mut groups: BTreeMap<u32, Vec<&'a SeriesWrite>> = BTreeMap::new();
        for write in &batch.writes {
            groups
                .entry(keys.shard(write.name.as_str()))
                .or_default()
                .push(write);
        }
        groups
            .into_values()
            .map(|writes| self.apply_call(keys, &writes, batch, now))
            .collect()
    }

    /// Builds the EVALSHA of `engine_apply.lua` for `writes` directly into
    /// one command buffer (no string per argument): KEYS are the writer
    /// lane's record (if any), one hash per (series, resolution) in batch
    /// order (per (series, resolution, chunk) in the expiring layout), then
    /// the registries (each with its `ends@e` in the expiring layout); ARGV
    /// refers to them by index.
    fn apply_call<'a>(
        &self,
        keys: SpaceKeys<'_>,
        writes: &[&'a SeriesWrite],
        batch: &Batch,
        now: Timestamp,
    ) -> Result<ApplyCall<'a>> {
        let book = keys.is_book();
        let expiring = keys.is_expiring();
        let shards: Vec<u32> = writes.iter().map(|w| keys.shard(w.name.as_str())).collect();
        let groups = if expiring {
            expiring::groups(&batch.space, writes, now)?
        } else {
            expiring::Groups::by_resolution(writes)
        };
        // Registries and the series each lists, in key order.
        let mut registries: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, &shard) in shards.iter().enumerate() {
            if book {
                // The book's known: lists `<p>:<name>` per precision.
                let n = groups.of_series(i).count();
                registries
                    .entry(0)
                    .or_default()
                    .extend(std::iter::repeat_n(i, n));
            } else if groups.of_series(i).next().is_some() {
                registries.entry(shard).or_default().push(i);
            }
        }
        let hashes = groups.list.len();
        let marker = batch.seq.is_some();
        let per_registry = if expiring { 2 } else { 1 };
        // Gauges: each series' current-value key, after the registries.
        let gauge = batch.space.kind == Kind::Gauge;
        let currents = if gauge { writes.len() } else { 0 };
        let first_current = usize::from(marker) + hashes + per_registry * registries.len() + 1;
        // Distinct values: the merge's two scratch keys, last.
        let scratch = if batch.space.kind == Kind::Distinct {
            2
        } else {
            0
        };
        let nkeys = first_current - 1 + currents + scratch;
        let mut cmd = super::super::evalsha(self.apply_script(batch.space.kind), nkeys);
        let mut buf = String::new();
        // KEYS.
        if let Some(seq) = batch.seq {
            cmd.arg(keys.writer(&seq, shards[0]));
        }
        for g in &groups.list {
            let name = writes[g.series].name.as_str();
            let res = g.cells[0].resolution;
            if expiring {
                keys.write_chunk(&mut buf, res, g.chunk, name, shards[g.series]);
            } else {
                keys.write_hash(&mut buf, res, name, shards[g.series]);
            }
            cmd.arg(buf.as_str());
        }
        for &shard in registries.keys() {
            cmd.arg(keys.registry(shard));
            if expiring {
                cmd.arg(keys.ends(shard));
            }
        }
        for (w, &shard) in writes.iter().zip(&shards).take(currents) {
            keys.write_current(&mut buf, w.name.as_str(), shard);
            cmd.arg(buf.as_str());
        }
        for n in 1..=scratch {
            cmd.arg(keys.scratch(shards[0], n));
        }
        // ARGV: whether KEYS[1] is the lane's record ('2' and '3' say the
        // same in the expiring layout), the sequence number, the kind, the
        // number of hashes; per hash its (slice, delta) pairs.
        cmd.arg(match (expiring, marker) {
            (false, false) => "0",
            (false, true) => "1",
            (true, false) => "2",
            (true, true) => "3",
        })
        .arg(batch.seq.map_or(0, |s| s.seq))
        .arg(batch.space.kind.code())
        .arg(hashes);
        let mut ops = Vec::with_capacity(groups.list.iter().map(|g| g.cells.len()).sum());
        let mut op_keys = Vec::with_capacity(ops.capacity());
        let mut blob = Vec::new();
        for (k, g) in groups.list.iter().enumerate() {
            if gauge {
                cmd.arg(first_current + g.series)
                    .arg(g.cells[0].resolution)
                    .arg(g.ttl);
            }
            cmd.arg(g.cells.len());
            for c in g.cells {
                cmd.arg(c.slice);
                match c.delta.as_sum() {
                    Some(d) => cmd.arg(d),
                    None => {
                        blob.clear();
                        match &c.delta {
                            // Registers go as Redis's own HyperLogLog, for PFMERGE.
                            Value::Distinct(d) => d.encode_for_redis(&mut blob),
                            other => other.encode(&mut blob),
                        }
                        cmd.arg(blob.as_slice())
                    }
                };
                op_keys.push(usize::from(marker) + k + 1);
                ops.push((&writes[g.series].name, c));
            }
        }
        if expiring {
            // Then the `ends@e` score below which a series' data has all
            // expired; per registry its series, each with its end score,
            // whether it must set its chunks' expiry, and its hashes (KEYS
            // index, seconds to live, the finest chunks' marks it holds).
            cmd.arg(expiring::prune_below(now));
            for series in registries.values() {
                cmd.arg(series.len());
                for &i in series {
                    let end = &groups.ends[i];
                    cmd.arg(writes[i].name.as_str())
                        .arg(end.score)
                        .arg(if end.must { "1" } else { "0" })
                        .arg(groups.of_series(i).count());
                    for (k, g) in groups.of_series(i) {
                        cmd.arg(usize::from(marker) + k + 1)
                            .arg(g.ttl)
                            .arg(g.marks.0)
                            .arg(g.marks.1);
                    }
                }
            }
        } else {
            // Then per registry its members.
            for series in registries.values() {
                cmd.arg(series.len());
                if !book {
                    for &i in series {
                        cmd.arg(writes[i].name.as_str());
                    }
                } else {
                    // The book's members, one per (counter, precision).
                    for g in &groups.list {
                        use std::fmt::Write;
                        buf.clear();
                        let _ = write!(buf, "{}:{}", g.cells[0].resolution, writes[g.series].name);
                        cmd.arg(buf.as_str());
                    }
                }
            }
        }
        Ok(ApplyCall {
            cmd,
            kind: batch.space.kind,
            noun: batch.space.noun(),
            marker,
            op_keys,
            ops,
        })
    }

    async fn run_apply(&self, call: &ApplyCall<'_>) -> Result<Applied> {
        match self
            .redis
            .eval_cmd(self.apply_script(call.kind), &call.cmd)
            .await
        {
            Ok(Reply::Int(1)) => Ok(Applied::Written),
            Ok(Reply::Int(_)) => Ok(Applied::Duplicate),
            Ok(other) => Err(Error::Backend(format!(
                "engine_apply.lua answered {other:?}"
            ))),
            Err(WriteFailure::Redis(e)) => Err(call.error(e)),
            Err(WriteFailure::Tally(e)) => Err(e),
        }
    }
}

/// One `engine_apply.lua` call, ready to send, and the op each merge
/// stands for (to name the series in an overflow error, and to take the
/// call back on a cluster).
pub(super) struct ApplyCall<'a> {
    pub(super) cmd: redis::Cmd,
    pub(super) kind: Kind,
    /// What a series of the space is called in messages
    /// ([`crate::engine::store::Space::noun`]).
    pub(super) noun: &'static str,
    /// Whether KEYS[1] is the writer lane's record.
    pub(super) marker: bool,
    /// The KEYS index of each op's hash.
    pub(super) op_keys: Vec<usize>,
    pub(super) ops: Vec<(&'a Name, &'a CellDelta)>,
}

impl ApplyCall<'_> {
    fn error(&self, e: RedisError) -> Error {
        let op = e
            .detail()
            .and_then(|d| d.split_whitespace().next())
            .and_then(|i| i.parse::<usize>().ok())
            .and_then(|i| self.ops.get(i));
        match (e.code(), op) {
            (Some("TALLY_OVERFLOW"), Some((name, c))) => match c.delta.as_sum() {
                Some(delta) => Error::Overflow {
                    kind: self.noun,
                    name: name.to_string(),
                    precision: c.resolution,
                    slice: c.slice,
                    delta,
                },
                None => Error::InvalidCount(format!(
                    "merging into {} {name:?} at its {} s slice starting at {} would leave \
                     the range of its values; nothing was written",
                    self.noun, c.resolution, c.slice
                )),
            },
            (Some("TALLY_FAILED"), Some((name, c))) => Error::Backend(format!(
                "redis refused to merge into {} {name:?} at resolution {} s: {}",
                self.noun,
                c.resolution,
                e.detail().unwrap_or_default()
            )),
            _ => Error::from(e),
        }
    }
}
