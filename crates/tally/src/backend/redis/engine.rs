//! The engine's store in Redis: every space, in either key layout (see
//! [`super::layout`]), standalone or on a cluster.
//!
//! A write is one Lua call (`engine_apply.lua`) that merges every delta of
//! the batch and registers every series, all or nothing: sums with
//! HINCRBY, taken back by subtraction when one overflows; blob kinds with
//! their kind's Lua merge (`kind_*.lua`, dispatched by kind code through
//! `engine_kinds.lua`), taken back by restoring the values they held.
//! Distinct values are kept as Redis's own HyperLogLog strings, merged by
//! PFADD and PFMERGE in two scratch keys of the call's slot
//! (`kind_distinct.lua`) and read back into [`Hll`] in Rust. On a
//! cluster, a batch is split into one call per registry shard (one slot
//! each), sent concurrently; each call is atomic and carries the batch's
//! sequence number, recorded per writer lane in a key of the same slot, so
//! a retried call is applied once. When one shard refuses its part (an
//! overflow: it wrote nothing), the shards that succeeded are taken back
//! (`engine_revert.lua`, by subtraction: sums only for now) before the
//! error is returned, so the batch as a whole writes nothing; between the
//! two steps a reader may briefly see the reverted part. When a shard's
//! outcome is unknown (unreachable, not confirmed by replicas), the others
//! are kept and the error returned: retrying with the same sequence number
//! completes the batch exactly once.
//!
//! In the expiring layout a write also sets each new chunk's expiry and
//! keeps `ends@e` (see `expiring.rs` and `engine_apply.lua`); reads look at
//! the window's chunks only; listing forgets expired series first
//! (`expiring_list.lua`); cleaning does nothing.
//!
//! Reads are pipelines of one command per series and resolution (one
//! pipeline per slot): DUMP for hashes of sums (a listpack, parsed in
//! `dump.rs`; HGETALL again for a hash in another encoding), HGETALL for
//! other kinds; listing is ZRANGEBYLEX per registry, merged a page at a
//! time (`ListPage`);
//! cleaning walks each registry in batches, one ZRANGEBYLEX and one
//! `engine_clean.lua` call per batch, which removes fields by name and
//! drops emptied entries atomically. A pass that knows no earlier visit
//! first reads the batch's fields (one pipeline of DUMP, parsed in
//! `dump.rs`), picks the old ones in Rust, and removes those of entries
//! that keep a field with one pipeline of HDEL, the rest through the
//! script. Deleting is one `engine_delete.lua` call.

use std::collections::BTreeMap;

use async_trait::async_trait;
use futures::StreamExt;
use futures::future::join_all;
use redis::{RedisError, Script, Value as Reply};

use super::layout::{self, Layout, SpaceKeys};
use super::{Redis, WriteFailure, dump, expiring};
use crate::clock::{SharedClock, Timestamp};
use crate::engine::kinds::{DistinctValue, Hll};
use crate::engine::store::{Reads, check_stored, not_sums};
use crate::engine::{
    Applied, Batch, CellDelta, CleanJob, CleanReport, Due, Kind, SeriesWrite, SliceSel, SliceStore,
    Slices, Space, Value,
};
use crate::error::{Error, Result};
use crate::name::Name;

/// Registry shards cleaned at the same time.
const CLEAN_CONCURRENCY: usize = 4;

/// Every space's values in Redis.
#[derive(Clone, Debug)]
pub struct RedisSliceStore {
    redis: Redis,
    layout: Layout,
    /// `engine_apply.lua` for sums: no kind's merge prepended, so an exact
    /// increment runs no more Lua than counters always did.
    apply: Script,
    /// `engine_apply.lua` with the statistics' merge (`kind_stats.lua`).
    apply_stats: Script,
    /// `engine_apply.lua` with the gauges' merge (`kind_gauge.lua`).
    apply_gauge: Script,
    /// `engine_apply.lua` with the sets' merge (`kind_distinct.lua`).
    apply_distinct: Script,
    revert: Script,
    clean: Script,
    delete: Script,
    /// `expiring_list.lua` (the expiring layout's listing).
    list: Script,
    /// What the expiring layout measures expiry and windows from.
    clock: SharedClock,
}

impl RedisSliceStore {
    /// A store on `redis` in `layout`. The book's layout needs a standalone
    /// server (its `known:` key is shared by every counter). The expiring
    /// layout measures each chunk's time to live and the window reads
    /// return from `clock`'s now, so `clock` must follow the server's (as
    /// the system clock does): Redis expires keys by its own clock.
    pub fn new(redis: Redis, layout: Layout, clock: SharedClock) -> Result<Self> {
        if layout == Layout::Ria && redis.is_cluster() {
            return Err(Error::Config(
                "the `ria` layout keeps every counter in one `known:` key, so it needs a \
                 standalone server; use the default layout on a cluster"
                    .into(),
            ));
        }
        Ok(RedisSliceStore {
            redis,
            layout,
            apply: Script::new(concat!(
                include_str!("lua/engine_undo.lua"),
                include_str!("lua/engine_kinds.lua"),
                include_str!("lua/engine_apply.lua")
            )),
            apply_stats: Script::new(concat!(
                include_str!("lua/engine_undo.lua"),
                include_str!("lua/kind_stats.lua"),
                include_str!("lua/engine_kinds.lua"),
                "KIND_MERGE[4] = merge_stats\n",
                include_str!("lua/engine_apply.lua")
            )),
            apply_gauge: Script::new(concat!(
                include_str!("lua/engine_undo.lua"),
                include_str!("lua/kind_gauge.lua"),
                include_str!("lua/engine_kinds.lua"),
                "KIND_MERGE[5] = merge_gauge\n",
                include_str!("lua/engine_apply.lua")
            )),
            apply_distinct: Script::new(concat!(
                include_str!("lua/engine_undo.lua"),
                include_str!("lua/kind_distinct.lua"),
                include_str!("lua/engine_kinds.lua"),
                "KIND_MERGE[2] = merge_distinct\n",
                include_str!("lua/engine_apply.lua")
            )),
            revert: Script::new(concat!(
                include_str!("lua/engine_undo.lua"),
                include_str!("lua/engine_revert.lua")
            )),
            clean: Script::new(include_str!("lua/engine_clean.lua")),
            delete: Script::new(include_str!("lua/engine_delete.lua")),
            list: Script::new(include_str!("lua/expiring_list.lua")),
            clock,
        })
    }

    /// The key layout in use.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The apply script of `kind`: `engine_apply.lua` with the kind's merge
    /// prepended (none for sums).
    fn apply_script(&self, kind: Kind) -> &Script {
        match kind {
            Kind::Stats => &self.apply_stats,
            Kind::Gauge => &self.apply_gauge,
            Kind::Distinct => &self.apply_distinct,
            _ => &self.apply,
        }
    }

    /// Groups a batch's series into calls: one for everything on a
    /// standalone server, one per registry shard on a cluster.
    fn apply_calls<'a>(&self, keys: SpaceKeys<'_>, batch: &'a Batch) -> Result<Vec<ApplyCall<'a>>> {
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
        let mut cmd = super::evalsha(self.apply_script(batch.space.kind), nkeys);
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

    /// Takes back a call that was applied (tagged layouts, cluster only).
    async fn run_revert(
        &self,
        keys: SpaceKeys<'_>,
        space: &Space,
        call: &ApplyCall<'_>,
    ) -> Result<()> {
        if keys.is_book() {
            return Ok(());
        }
        if !call.kind.has_undo() {
            return Err(Error::Backend(format!(
                "{} values cannot be taken back on a cluster yet",
                call.kind
            )));
        }
        let Some((first, _)) = call.ops.first() else {
            return Ok(());
        };
        let shard = keys.shard(first.as_str());
        let registry = keys.registry(shard);
        let mut invocation = self.revert.prepare_invoke();
        invocation.key(&registry);
        let expiring = keys.is_expiring();
        if expiring {
            invocation.key(keys.ends(shard));
        }
        // The call's KEYS, rebuilt: its lane record (if any) stands in
        // at index 1 so that the ops' indices still match, shifted for the
        // registry keys placed first.
        let shift = 1 + usize::from(expiring);
        let mut hash_keys: Vec<String> = Vec::new();
        if call.marker {
            hash_keys.push(registry.clone());
        }
        for (i, (name, c)) in call.ops.iter().enumerate() {
            if hash_keys.len() < call.op_keys[i] {
                hash_keys.push(if expiring {
                    let chunk = expiring::math(space, c.resolution)?.chunk_of(c.slice);
                    keys.chunk(c.resolution, chunk, name.as_str())
                } else {
                    keys.hash(c.resolution, name.as_str())
                });
            }
        }
        for key in &hash_keys {
            invocation.key(key);
        }
        // The writer lane's record keeps the reverted number: the writer's
        // next numbers are above it, so they still apply.
        invocation
            .arg(if expiring { layout::ENDS_SCALE } else { 0 })
            .arg(call.ops.len());
        let mut series: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, (name, c)) in call.ops.iter().enumerate() {
            let key_index = call.op_keys[i] + shift;
            invocation
                .arg(key_index)
                .arg(c.slice)
                .arg(c.delta.as_sum().unwrap_or_default());
            let list = series.entry(name.as_str()).or_default();
            if !list.contains(&key_index) {
                list.push(key_index);
            }
        }
        for (name, list) in series {
            invocation.arg(name).arg(list.len());
            for i in list {
                invocation.arg(i);
            }
        }
        let _: i64 = invocation.invoke_async(&mut self.redis.handle()).await?;
        Ok(())
    }

    /// One `engine_clean.lua` call over `entries`; `shared` holds what is
    /// due at each hash position when every entry has the same (the tagged
    /// layout's windows), sent once instead of once per entry. Every hash
    /// due here names its slices or fields ([`Trim::Upto`] was read first,
    /// by [`RedisSliceStore::read_old`]).
    async fn clean_entries(
        &self,
        registry: &str,
        entries: &[CleanEntry],
        book_rule: bool,
        shared: Option<&[Option<Trim>]>,
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
        // The windows, a window of slices sent once however many hashes
        // name it; each hash's window number (1-based), in the order the
        // cutoffs are sent below.
        let mut windows: Vec<&Trim> = Vec::new();
        let mut refs: Vec<Option<usize>> = Vec::new();
        let all = match shared {
            Some(cutoffs) => cutoffs.iter().collect::<Vec<_>>(),
            None => entries
                .iter()
                .flat_map(|e| e.hashes.iter().map(|(_, t)| t))
                .collect(),
        };
        for trim in all {
            refs.push(match trim {
                None | Some(Trim::Upto(_)) => None,
                Some(t @ Trim::Slices(_)) => Some(match windows.iter().position(|w| *w == t) {
                    Some(k) => k + 1,
                    None => {
                        windows.push(t);
                        windows.len()
                    }
                }),
                Some(t @ Trim::Fields(_)) => {
                    windows.push(t);
                    Some(windows.len())
                }
            });
        }
        cmd.arg(windows.len());
        for w in &windows {
            match w {
                Trim::Slices(slices) => {
                    cmd.arg(slices.len());
                    for slice in slices {
                        cmd.arg(*slice);
                    }
                }
                Trim::Fields(fields) => {
                    cmd.arg(fields.len());
                    for field in fields {
                        cmd.arg(field.as_slice());
                    }
                }
                Trim::Upto(_) => unreachable!("not a window"),
            }
        }
        let cutoff = |cmd: &mut redis::Cmd, k: Option<usize>| {
            match k {
                Some(k) => cmd.arg(format!("w{k}")),
                None => cmd.arg(""),
            };
        };
        let mut refs = refs.into_iter();
        if shared.is_some() {
            for k in refs.by_ref() {
                cutoff(&mut cmd, k);
            }
        }
        for entry in entries {
            cmd.arg(entry.member.as_str());
            if shared.is_none() {
                for k in refs.by_ref().take(entry.hashes.len()) {
                    cutoff(&mut cmd, k);
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

    /// A pass that knows no earlier visit: reads the fields of every hash
    /// of `entries` due up to a cutoff and names those at or before it.
    /// Reading is one pipeline of DUMP (every hash of a batch is in its
    /// registry's slot), each payload parsed here ([`super::dump`]); a hash
    /// whose payload is not a listpack is read again with HKEYS (a second
    /// round trip, only then). Comparing in Rust spares the server a string
    /// per field kept.
    ///
    /// Returns what to remove: entries whose hashes keep a field (read
    /// here) cannot be dropped, so their old fields go by plain HDEL
    /// ([`OldFields::direct`]); the others go through the clean call, which
    /// drops an entry only if its hashes are all empty inside it
    /// ([`OldFields::scripted`]). Entries with nothing to remove that
    /// cannot be dropped are left out.
    async fn read_old(&self, entries: Vec<CleanEntry>, book_rule: bool) -> Result<OldFields> {
        let read: Vec<&str> = entries
            .iter()
            .flat_map(|e| &e.hashes)
            .filter(|(_, t)| matches!(t, Some(Trim::Upto(cut)) if *cut >= 0))
            .map(|(key, _)| key.as_str())
            .collect();
        let mut fields = self.hash_fields(&read).await?.into_iter();
        let mut old = OldFields::default();
        for mut entry in entries {
            let (mut removes, mut kept) = (false, false);
            for (_, trim) in &mut entry.hashes {
                let Some(Trim::Upto(cut)) = *trim else {
                    continue;
                };
                if cut < 0 {
                    *trim = None;
                    continue;
                }
                let all = fields.next().ok_or_else(|| {
                    Error::Backend("redis answered fewer replies than asked".into())
                })?;
                let cut = cut.to_string();
                let total = all.len();
                let gone: Vec<Vec<u8>> = all
                    .into_iter()
                    .filter(|f| at_or_before(f, cut.as_bytes()))
                    .collect();
                kept |= gone.len() < total;
                removes |= !gone.is_empty();
                *trim = (!gone.is_empty()).then_some(Trim::Fields(gone));
            }
            let windows = entry
                .hashes
                .iter()
                .any(|(_, t)| matches!(t, Some(Trim::Slices(_))));
            if kept && !windows {
                // A field stays: the entry stays registered whatever else
                // happens, so its removals need no script.
                for (key, trim) in entry.hashes {
                    if let Some(Trim::Fields(gone)) = trim {
                        old.direct.push((key, gone));
                    }
                }
            } else if removes || windows || (!book_rule && !kept) {
                old.scripted.push(entry);
            }
        }
        Ok(old)
    }

    /// The field names of each hash of `keys` (none for a missing key), in
    /// order: one pipeline of DUMP, then HKEYS for those whose payload is
    /// not a listpack (every key, when the server refuses DUMP).
    async fn hash_fields(&self, keys: &[&str]) -> Result<Vec<Vec<Vec<u8>>>> {
        let pipeline = |command: &str, keys: &mut dyn Iterator<Item = &str>| {
            let mut pipe = redis::pipe();
            for key in keys {
                pipe.cmd(command).arg(key);
            }
            pipe
        };
        // A server that refuses DUMP (an ACL without it) is read with
        // HKEYS; a fault shows again there.
        let replies = match self
            .redis
            .run_pipelines(vec![pipeline("DUMP", &mut keys.iter().copied())])
            .await
        {
            Ok(mut replies) => replies.pop().unwrap_or_default(),
            Err(e) => {
                tracing::debug!(error = %e, "DUMP refused; reading fields with HKEYS");
                vec![Reply::Okay; keys.len()]
            }
        };
        if replies.len() != keys.len() {
            return Err(Error::Backend(
                "redis answered fewer replies than asked".into(),
            ));
        }
        let mut out: Vec<Option<Vec<Vec<u8>>>> = replies
            .iter()
            .map(|reply| match reply {
                Reply::Nil => Some(Vec::new()),
                Reply::BulkString(payload) => dump::hash_fields(payload),
                _ => None,
            })
            .collect();
        let again: Vec<usize> = (0..keys.len()).filter(|&i| out[i].is_none()).collect();
        if !again.is_empty() {
            let replies = self
                .redis
                .run_pipelines(vec![pipeline("HKEYS", &mut again.iter().map(|&i| keys[i]))])
                .await?
                .pop()
                .unwrap_or_default();
            for (&i, reply) in again.iter().zip(replies) {
                let fields = match reply {
                    Reply::Array(f) | Reply::Set(f) => f,
                    other => {
                        return Err(Error::Corrupt(format!(
                            "{}: HKEYS answered {other:?}, not its fields",
                            keys[i]
                        )));
                    }
                };
                out[i] = Some(
                    fields
                        .into_iter()
                        .filter_map(|f| match f {
                            Reply::BulkString(b) => Some(b),
                            _ => None,
                        })
                        .collect(),
                );
            }
        }
        out.into_iter()
            .map(|f| {
                f.ok_or_else(|| Error::Backend("redis answered fewer replies than asked".into()))
            })
            .collect()
    }

    /// Removes each hash's fields by name: one pipeline of HDEL. Returns
    /// the fields removed.
    async fn remove_fields(&self, hashes: &[(String, Vec<Vec<u8>>)]) -> Result<u64> {
        let mut pipe = redis::pipe();
        for (key, fields) in hashes {
            for chunk in fields.chunks(1000) {
                pipe.cmd("HDEL").arg(key.as_str()).arg(chunk);
            }
        }
        let replies = self
            .redis
            .run_pipelines(vec![pipe])
            .await?
            .pop()
            .unwrap_or_default();
        replies
            .into_iter()
            .map(|r| <u64 as redis::FromRedisValue>::from_redis_value(r).map_err(Error::from))
            .sum()
    }

    /// Walks one registry in batches of `job.batch` members: one ZRANGEBYLEX
    /// and (when `entries` finds work) one clean call per batch. When a hash
    /// is due up to a cutoff, the batch's fields are read first
    /// ([`RedisSliceStore::read_old`]), and the old fields of entries that
    /// keep one go by one pipeline of HDEL instead of through the script.
    async fn clean_registry(
        &self,
        registry: &str,
        job: &CleanJob,
        book_rule: bool,
        shared: Option<&[Option<Trim>]>,
        entries: impl Fn(&[String]) -> Vec<CleanEntry>,
    ) -> Result<CleanReport> {
        let reading = |t: &Option<Trim>| matches!(t, Some(Trim::Upto(_)));
        // Shared cutoffs only while every entry removes the same slices.
        let shared = shared.filter(|cutoffs| !cutoffs.iter().any(reading));
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
            let mut work = entries(&members);
            if work
                .iter()
                .any(|e| e.hashes.iter().any(|(_, t)| reading(t)))
            {
                let old = self.read_old(work, book_rule).await?;
                report.round_trips += 1;
                if !old.direct.is_empty() {
                    report.samples_removed += self.remove_fields(&old.direct).await?;
                    report.round_trips += 1;
                }
                work = old.scripted;
            }
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

    /// Cleans one registry shard of a tagged layout.
    async fn clean_shard(
        &self,
        keys: SpaceKeys<'_>,
        shard: u32,
        space: &Space,
        job: &CleanJob,
    ) -> Result<CleanReport> {
        let cutoffs: Vec<Option<Trim>> = space
            .resolutions
            .iter()
            .map(|r| job.due_of(r).map(Trim::from))
            .collect();
        let registry = keys.registry(shard);
        self.clean_registry(&registry, job, false, Some(&cutoffs), |names| {
            names
                .iter()
                .filter_map(|n| Name::new(n.as_str()).ok())
                .map(|name| CleanEntry {
                    hashes: space
                        .resolutions
                        .iter()
                        .zip(&cutoffs)
                        .map(|(r, c)| (keys.hash(r.seconds, name.as_str()), c.clone()))
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
                    let due = job.due_for(p)?;
                    Some(CleanEntry {
                        member: member.clone(),
                        hashes: vec![(format!("count:{member}"), Some(due.into()))],
                    })
                })
                .collect()
        })
        .await
    }

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

/// One registry member to clean and its hashes, each with what is due
/// (`None` when nothing is due in this pass).
struct CleanEntry {
    member: String,
    hashes: Vec<(String, Option<Trim>)>,
}

/// The old fields a first pass read ([`RedisSliceStore::read_old`]).
#[derive(Default)]
struct OldFields {
    /// Entries for the clean call (which may drop them).
    scripted: Vec<CleanEntry>,
    /// Hashes and their old fields, of entries that keep a field.
    direct: Vec<(String, Vec<Vec<u8>>)>,
}

/// What a clean call removes from one hash.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Trim {
    /// Every field at or before this cutoff: the client reads the fields
    /// first ([`RedisSliceStore::read_old`]) and sends [`Trim::Fields`].
    Upto(i64),
    /// Exactly these slices, by name (each may be absent).
    Slices(Vec<u64>),
    /// Exactly these fields, as read from the hash.
    Fields(Vec<Vec<u8>>),
}

impl From<Due> for Trim {
    fn from(due: Due) -> Self {
        match due {
            Due::Upto(cut) => Trim::Upto(cut),
            Due::Slices(slices) => Trim::Slices(slices),
        }
    }
}

/// Whether a hash field is a slice starting at or before `cut` (a
/// non-negative cutoff's decimal text): a plain decimal integer, compared as
/// text (a shorter number is smaller, as the writer writes no leading
/// zeros). Any other field is never removed.
fn at_or_before(field: &[u8], cut: &[u8]) -> bool {
    !field.is_empty()
        && field.iter().all(u8::is_ascii_digit)
        && (field.len() < cut.len() || (field.len() == cut.len() && field <= cut))
}

/// One `engine_apply.lua` call, ready to send, and the op each merge
/// stands for (to name the series in an overflow error, and to take the
/// call back on a cluster).
struct ApplyCall<'a> {
    cmd: redis::Cmd,
    kind: Kind,
    /// What a series of the space is called in messages
    /// ([`crate::engine::store::Space::noun`]).
    noun: &'static str,
    /// Whether KEYS[1] is the writer lane's record.
    marker: bool,
    /// The KEYS index of each op's hash.
    op_keys: Vec<usize>,
    ops: Vec<(&'a Name, &'a CellDelta)>,
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
    let members: Vec<String> = zrangebylex(key, &min, &max, limit)
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

/// One page of a listing merged from several sorted ranges (the registry's
/// shards, or the book's per-precision ranges): what to ask each range for
/// next, and which names are known to come first. Pure: the store asks.
///
/// Each range is asked for its share of the page (a quarter more, and 8,
/// over `limit / ranges`) after its own cursor. A range answering fewer
/// than asked is exhausted; the least last name of the ranges that filled
/// their share is the watermark: every name up to it is known. Until
/// `limit` names are known, the ranges that filled their share are asked
/// again after their last name.
#[derive(Debug)]
struct ListPage {
    cursors: Vec<Option<String>>,
    done: Vec<bool>,
    per: usize,
    limit: usize,
    names: Vec<String>,
    known: Option<usize>,
}

impl ListPage {
    fn new(ranges: usize, after: Option<&str>, limit: usize) -> Self {
        let per = if ranges <= 1 {
            limit
        } else {
            ((limit + limit / 4) / ranges + 8).min(limit)
        };
        ListPage {
            cursors: vec![after.map(str::to_owned); ranges],
            done: vec![limit == 0; ranges],
            per: per.max(1),
            limit,
            names: Vec::new(),
            known: (limit == 0 || ranges == 0).then_some(0),
        }
    }

    /// The next asks: (range, cursor, count) for every range not exhausted;
    /// `None` once the page is known.
    fn asks(&self) -> Option<Vec<(usize, Option<String>, usize)>> {
        if self.known.is_some() {
            return None;
        }
        Some(
            (0..self.cursors.len())
                .filter(|&i| !self.done[i])
                .map(|i| (i, self.cursors[i].clone(), self.per))
                .collect(),
        )
    }

    /// The answers to the last asks, in their order, each sorted.
    fn answer(&mut self, answers: Vec<Vec<String>>) {
        let asked: Vec<usize> = (0..self.cursors.len()).filter(|&i| !self.done[i]).collect();
        let mut watermark: Option<String> = None;
        for (i, names) in asked.into_iter().zip(answers) {
            if names.len() < self.per {
                self.done[i] = true;
            } else if let Some(last) = names.last() {
                if watermark.as_ref().is_none_or(|w| last < w) {
                    watermark = Some(last.clone());
                }
                self.cursors[i] = Some(last.clone());
            }
            self.names.extend(names);
        }
        self.names.sort_unstable();
        self.names.dedup();
        let known = match &watermark {
            None => self.names.len(),
            Some(w) => self.names.partition_point(|n| n <= w),
        };
        if watermark.is_none() || known >= self.limit {
            self.known = Some(known.min(self.limit));
        }
    }

    /// The page, once known.
    fn names(mut self) -> Vec<String> {
        self.names.truncate(self.known.unwrap_or(0));
        self.names
    }
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

fn reply_bytes<'v>(v: &'v Reply, what: &str) -> std::result::Result<&'v [u8], String> {
    match v {
        Reply::BulkString(b) => Ok(b),
        Reply::SimpleString(s) => Ok(s.as_bytes()),
        other => Err(format!("it holds {other:?} as {what}")),
    }
}

fn reply_number<T: std::str::FromStr + TryFrom<i64>>(
    v: &Reply,
    what: &str,
) -> std::result::Result<T, String> {
    if let Reply::Int(i) = v {
        // A listpack's integer, read from a DUMP.
        return T::try_from(*i).map_err(|_| format!("it holds {i}, not {what}"));
    }
    let b = reply_bytes(v, what)?;
    std::str::from_utf8(b)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| format!("it holds {:?}, not {what}", String::from_utf8_lossy(b)))
}

/// A sum field's value.
fn sum_of(v: &Reply) -> std::result::Result<i64, String> {
    reply_number(v, "an integer count")
}

/// A series hash's HGETALL reply as its slices selected by `sel`, each
/// value read by `value`, oldest first, or what is wrong with it. Parses
/// the reply's bytes in place (RESP2 flat array or RESP3 map), with no
/// string or map per field: reads of every resolution are on the latency
/// path.
fn parse_hash<T>(
    reply: &Reply,
    sel: SliceSel,
    value: impl Fn(&Reply) -> std::result::Result<T, String>,
) -> std::result::Result<Vec<(u64, T)>, String> {
    let slice = |f: &Reply, v: &Reply| -> std::result::Result<Option<(u64, T)>, String> {
        let start: u64 = reply_number(f, "a slice start")?;
        if !sel.contains(start) {
            return Ok(None);
        }
        Ok(Some((start, value(v)?)))
    };
    let mut slices = match reply {
        Reply::Map(pairs) => pairs
            .iter()
            .filter_map(|(f, v)| slice(f, v).transpose())
            .collect::<std::result::Result<Vec<_>, String>>()?,
        Reply::Array(flat) if flat.len() % 2 == 0 => flat
            .chunks_exact(2)
            .filter_map(|pair| slice(&pair[0], &pair[1]).transpose())
            .collect::<std::result::Result<Vec<_>, String>>()?,
        Reply::Nil => Vec::new(),
        other => return Err(format!("it is not a hash of slices: {other:?}")),
    };
    slices.sort_unstable_by_key(|s| s.0);
    Ok(slices)
}

/// A sums hash's `DUMP` payload as the `HGETALL` reply it stands for: a
/// flat array of fields and values, integers as `Int`, or `None` when the
/// payload is not a listpack-encoded hash.
fn dump_as_hgetall(payload: &[u8]) -> Option<Reply> {
    let listpack = dump::hash_listpack(payload)?;
    let entries = dump::listpack_entries(&listpack)?;
    Some(Reply::Array(
        entries
            .iter()
            .map(|e| match *e {
                dump::Entry::Int(v) => Reply::Int(v),
                dump::Entry::Bytes(b) => Reply::BulkString(b.to_vec()),
            })
            .collect(),
    ))
}

/// A hash of `kind`'s slices.
fn parse_slices(reply: &Reply, kind: Kind, sel: SliceSel) -> std::result::Result<Slices, String> {
    match kind {
        Kind::Sum => parse_hash(reply, sel, |v| sum_of(v).map(Value::Sum)),
        // Redis's own HyperLogLog strings (kind_distinct.lua).
        Kind::Distinct => parse_hash(reply, sel, |v| {
            Hll::from_redis(reply_bytes(v, "a value")?)
                .map(|h| Value::Distinct(Box::new(DistinctValue::Registers(Box::new(h)))))
                .map_err(|e| e.to_string())
        }),
        kind => parse_hash(reply, sel, |v| {
            kind.decode(reply_bytes(v, "a value")?)
                .map_err(|e| e.to_string())
        }),
    }
}

impl RedisSliceStore {
    /// Every (series, resolution)'s hash, one pipeline per slot (its DUMP
    /// or its HGETALL), each parsed by `parse` with the slices to keep;
    /// `result[i][j]`: `names[i]` at `resolutions[j]`. In the expiring
    /// layout, one hash per chunk that may hold a slice of the window at
    /// the clock's now,
    /// and only the window's slices kept (a chunk lingers until its last
    /// slice leaves the window).
    async fn read_with<T>(
        &self,
        space: &Space,
        names: &[Name],
        resolutions: &[u64],
        sel: SliceSel,
        parse: impl Fn(&Reply, SliceSel) -> std::result::Result<Vec<(u64, T)>, String>,
    ) -> Result<Reads<T>> {
        check_stored(space.kind)?;
        let keys = self.layout.space_keys(space);
        let expiring = keys.is_expiring();
        // Per resolution: its chunks (one stand-in for a single hash) and
        // the slices kept.
        let plan: Vec<(Vec<u64>, SliceSel)> = if expiring {
            let now = self.clock.now();
            let (from, to) = match sel {
                SliceSel::All => (0, u64::MAX),
                SliceSel::Range { from, to } => (from, to),
            };
            resolutions
                .iter()
                .map(|&r| {
                    let m = expiring::math(space, r)?;
                    let from = from.max(m.resolution.oldest_kept(now));
                    Ok((m.chunks(now, from, to), SliceSel::Range { from, to }))
                })
                .collect::<Result<_>>()?
        } else {
            resolutions.iter().map(|_| (vec![0], sel)).collect()
        };
        let key = |r: u64, chunk: u64, name: &str| {
            if expiring {
                keys.chunk(r, chunk, name)
            } else {
                keys.hash(r, name)
            }
        };
        // A hash of sums is asked for its DUMP: it is one listpack (the
        // server's limits are checked against the peak at start), one string
        // to send and parse instead of a reply per field and value (a read
        // of 100 counters' 120 slices spent most of its time parsing the
        // 24,000 replies). A hash in another encoding is read with HGETALL
        // in a second round trip, and so is every hash when the server
        // refuses DUMP. Hashes of other kinds (sketches, HyperLogLogs: long
        // values, hashtables) are read with HGETALL.
        let hash_keys: Vec<Vec<String>> = names
            .iter()
            .map(|name| {
                resolutions
                    .iter()
                    .zip(&plan)
                    .flat_map(|(&r, (chunks, _))| {
                        chunks.iter().map(move |&c| key(r, c, name.as_str()))
                    })
                    .collect()
            })
            .collect();
        let pipes = |command: &str, pick: &dyn Fn(usize, usize) -> bool| -> Vec<redis::Pipeline> {
            hash_keys
                .iter()
                .enumerate()
                .map(|(i, per)| {
                    let mut pipe = redis::pipe();
                    for (k, key) in per.iter().enumerate() {
                        if pick(i, k) {
                            pipe.cmd(command).arg(key);
                        }
                    }
                    pipe
                })
                .collect()
        };
        let dumped = if space.kind == Kind::Sum {
            match self.redis.run_pipelines(pipes("DUMP", &|_, _| true)).await {
                Ok(dumped) => Some(dumped),
                Err(e) => {
                    tracing::debug!(error = %e, "DUMP refused; reading hashes with HGETALL");
                    None
                }
            }
        } else {
            None
        };
        let mut replies: Vec<Vec<Option<Reply>>> = match dumped {
            Some(dumped) => dumped
                .into_iter()
                .map(|per| {
                    per.into_iter()
                        .map(|reply| match reply {
                            Reply::Nil => Some(Reply::Nil),
                            Reply::BulkString(payload) => dump_as_hgetall(&payload),
                            _ => None,
                        })
                        .collect()
                })
                .collect(),
            None => hash_keys.iter().map(|per| vec![None; per.len()]).collect(),
        };
        if replies.iter().any(|per| per.iter().any(Option::is_none)) {
            let again = pipes("HGETALL", &|i, k| {
                replies[i].get(k).is_none_or(Option::is_none)
            });
            let again = self.redis.run_pipelines(again).await?;
            for ((per, keys), answers) in replies.iter_mut().zip(&hash_keys).zip(again) {
                per.resize(keys.len(), None);
                let mut answers = answers.into_iter();
                for slot in per.iter_mut().filter(|s| s.is_none()) {
                    *slot = answers.next();
                }
            }
        }
        let values = replies
            .into_iter()
            .map(|per| {
                per.into_iter()
                    .map(|r| {
                        r.ok_or_else(|| {
                            Error::Backend("redis answered fewer replies than asked".into())
                        })
                    })
                    .collect::<Result<Vec<Reply>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        names
            .iter()
            .zip(values)
            .map(|(name, per)| {
                let mut replies = per.iter();
                resolutions
                    .iter()
                    .zip(&plan)
                    .map(|(&r, (chunks, sel))| {
                        // Chunks come oldest first and hold disjoint slices:
                        // their slices, each sorted, concatenate in order.
                        let mut slices = Vec::new();
                        for &c in chunks {
                            let reply = replies.next().ok_or_else(|| {
                                Error::Backend("redis answered fewer replies than asked".into())
                            })?;
                            let mut part = parse(reply, *sel).map_err(|why| {
                                Error::Corrupt(format!("{}: {why}", key(r, c, name.as_str())))
                            })?;
                            if slices.is_empty() {
                                slices = part;
                            } else {
                                slices.append(&mut part);
                            }
                        }
                        Ok(slices)
                    })
                    .collect()
            })
            .collect()
    }

    /// Lists the expiring layout's series: one `expiring_list.lua` call
    /// per shard (concurrent), which first forgets the series that expired.
    async fn list_expiring(
        &self,
        keys: SpaceKeys<'_>,
        search: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>> {
        let (min, max) = lex_bounds(search, "", after);
        let below = expiring::prune_below(self.clock.now());
        let calls = (0..layout::SHARDS).map(|shard| {
            let mut invocation = self.list.prepare_invoke();
            invocation
                .key(keys.registry(shard))
                .key(keys.ends(shard))
                .arg(&min)
                .arg(&max)
                .arg(limit)
                .arg(below);
            let mut handle = self.redis.handle();
            async move { invocation.invoke_async::<Vec<String>>(&mut handle).await }
        });
        let mut names = Vec::new();
        for found in futures::future::try_join_all(calls).await? {
            names.extend(found);
        }
        names.sort_unstable();
        names.truncate(limit);
        Ok(names)
    }
}

#[async_trait]
impl SliceStore for RedisSliceStore {
    async fn apply(&self, batch: &Batch) -> Result<Applied> {
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

    async fn read(
        &self,
        space: &Space,
        names: &[Name],
        resolutions: &[u64],
        slices: SliceSel,
    ) -> Result<Vec<Vec<Slices>>> {
        self.read_with(space, names, resolutions, slices, |reply, sel| {
            parse_slices(reply, space.kind, sel)
        })
        .await
    }

    async fn read_sums(
        &self,
        space: &Space,
        names: &[Name],
        resolutions: &[u64],
        slices: SliceSel,
    ) -> Result<Reads<i64>> {
        if space.kind != Kind::Sum {
            return Err(not_sums(space));
        }
        self.read_with(space, names, resolutions, slices, |reply, sel| {
            parse_hash(reply, sel, sum_of)
        })
        .await
    }

    async fn list(
        &self,
        space: &Space,
        search: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>> {
        let keys = self.layout.space_keys(space);
        if keys.is_expiring() {
            return self.list_expiring(keys, search, after, limit).await;
        }
        let queries: Vec<(String, String)> = if keys.is_book() {
            // The book's known: holds `<p>:<name>`: one range per precision
            // that may hold counters, merged.
            self.ria_prefixes()
                .await?
                .into_iter()
                .map(|p| (layout::RIA_KNOWN.to_owned(), p))
                .collect()
        } else {
            keys.registries()
                .into_iter()
                .map(|r| (r, String::new()))
                .collect()
        };
        // One page of the merged ranges: a few more than `limit / ranges`
        // names from each range per round trip, then more only from the
        // ranges that filled their share, until `limit` names are known to
        // come first (names hash to shards, so one round trip is the rule).
        // Asking every range for `limit` names would read up to 64 times
        // the page.
        let mut page = ListPage::new(queries.len(), after, limit);
        while let Some(asks) = page.asks() {
            let groups = asks
                .iter()
                .map(|(i, cursor, count)| {
                    let (key, prefix) = &queries[*i];
                    let (min, max) =
                        lex_bounds(&format!("{prefix}{search}"), prefix, cursor.as_deref());
                    let mut pipe = redis::pipe();
                    pipe.add_command(zrangebylex(key, &min, &max, *count));
                    pipe
                })
                .collect();
            let values = self.redis.run_pipelines(groups).await?;
            let mut answers = Vec::with_capacity(asks.len());
            for ((i, _, _), mut group) in asks.iter().zip(values) {
                let prefix = &queries[*i].1;
                let members: Vec<String> =
                    redis::FromRedisValue::from_redis_value(group.remove(0))?;
                answers.push(
                    members
                        .into_iter()
                        .map(|m| m[prefix.len()..].to_owned())
                        .collect(),
                );
            }
            page.answer(answers);
        }
        Ok(page.names())
    }

    async fn contains(&self, space: &Space, names: &[Name]) -> Result<Vec<bool>> {
        let keys = self.layout.space_keys(space);
        if keys.is_book() || keys.is_expiring() {
            // The book's registry holds a member per precision; the expiring
            // one is pruned by its listing.
            return crate::engine::contains_by_listing(self, space, names).await;
        }
        let groups = names
            .iter()
            .map(|name| {
                let mut pipe = redis::pipe();
                pipe.cmd("ZSCORE")
                    .arg(keys.registry(keys.shard(name.as_str())))
                    .arg(name.as_str());
                pipe
            })
            .collect();
        let values = self.redis.run_pipelines(groups).await?;
        Ok(values
            .iter()
            .map(|v| !matches!(v.first(), None | Some(Reply::Nil)))
            .collect())
    }

    async fn delete(&self, space: &Space, name: &Name) -> Result<bool> {
        let keys = self.layout.space_keys(space);
        let shard = keys.shard(name.as_str());
        let mut invocation = self.delete.prepare_invoke();
        invocation.key(keys.registry(shard));
        if keys.is_expiring() {
            invocation.key(keys.ends(shard)).arg(2).arg(name.as_str());
            // Every chunk that can still exist: older ones have expired.
            let now = self.clock.now();
            for r in &space.resolutions {
                let m = expiring::math(space, r.seconds)?;
                for chunk in m.chunks(now, 0, u64::MAX) {
                    invocation.key(keys.chunk(r.seconds, chunk, name.as_str()));
                }
            }
        } else {
            invocation.arg(1);
            if keys.is_book() {
                for r in &space.resolutions {
                    invocation.arg(layout::ria_member(r.seconds, name.as_str()));
                }
            } else {
                invocation.arg(name.as_str());
            }
            for r in &space.resolutions {
                invocation.key(keys.hash(r.seconds, name.as_str()));
            }
        }
        if space.kind == Kind::Gauge {
            invocation.key(keys.current(name.as_str()));
        }
        let deleted: u64 = invocation.invoke_async(&mut self.redis.handle()).await?;
        Ok(deleted > 0)
    }

    async fn clean(&self, space: &Space, job: &CleanJob) -> Result<CleanReport> {
        let keys = self.layout.space_keys(space);
        if keys.is_expiring() {
            // Redis's expiry does the cleaning: a pass has nothing to do.
            return Ok(CleanReport::default());
        }
        if keys.is_book() {
            return self.clean_ria(job).await;
        }
        let reports: Vec<Result<CleanReport>> = futures::stream::iter(0..layout::SHARDS)
            .map(|shard| self.clean_shard(keys, shard, space, job))
            .buffer_unordered(CLEAN_CONCURRENCY)
            .collect()
            .await;
        let mut total = CleanReport::default();
        for report in reports {
            total.add(&report?);
        }
        Ok(total)
    }

    async fn ping(&self) -> Result<()> {
        self.redis.ping().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_replies_parse_in_either_protocol_and_name_what_is_wrong() {
        let b = |s: &str| Reply::BulkString(s.as_bytes().to_vec());
        let resp2 = Reply::Array(vec![b("20"), b("-3"), b("10"), b("7")]);
        let resp3 = Reply::Map(vec![(b("20"), b("-3")), (b("10"), b("7"))]);
        let want = vec![(10, Value::Sum(7)), (20, Value::Sum(-3))];
        let all = SliceSel::All;
        assert_eq!(parse_slices(&resp2, Kind::Sum, all).unwrap(), want);
        assert_eq!(parse_slices(&resp3, Kind::Sum, all).unwrap(), want);
        let range = SliceSel::Range { from: 11, to: 20 };
        assert_eq!(parse_hash(&resp2, range, sum_of).unwrap(), vec![(20, -3)]);
        assert_eq!(
            parse_slices(&Reply::Array(vec![]), Kind::Sum, all).unwrap(),
            vec![]
        );
        let bad_field = Reply::Array(vec![b("10.0"), b("1")]);
        assert!(
            parse_slices(&bad_field, Kind::Sum, all)
                .unwrap_err()
                .contains("\"10.0\", not a slice start")
        );
        let bad_count = Reply::Map(vec![(b("10"), b("x"))]);
        assert!(
            parse_slices(&bad_count, Kind::Sum, all)
                .unwrap_err()
                .contains("not an integer count")
        );
        assert!(
            parse_slices(&Reply::Int(3), Kind::Sum, all)
                .unwrap_err()
                .contains("not a hash")
        );
    }

    #[test]
    fn only_plain_decimal_fields_at_or_before_the_cutoff_are_old() {
        let old = |f: &str| at_or_before(f.as_bytes(), b"1000");
        assert!(old("999") && old("1000") && old("0") && old("7"));
        assert!(!old("1001") && !old("10000") && !old("9999"));
        // Not slices: never removed, whatever their text compares to.
        for field in ["", "-5", "+5", "1e3", "99.5", " 99", "abc", "10x"] {
            assert!(!old(field), "{field:?}");
        }
    }

    /// A connection to `url` and a store on it in the default layout.
    async fn default_store(url: &str) -> (Redis, RedisSliceStore) {
        let redis = Redis::connect(url).await.unwrap();
        let clock: SharedClock = std::sync::Arc::new(crate::clock::ManualClock::at(0.0));
        let store = RedisSliceStore::new(redis.clone(), Layout::default(), clock).unwrap();
        (redis, store)
    }

    /// A pass that knows no earlier visit reads a batch's fields, then
    /// removes the old ones by name in a second call: a write landing in
    /// between is kept, and so is the entry's registration, in either
    /// layout's rule.
    #[tokio::test]
    async fn a_first_pass_that_meets_a_concurrent_write_loses_nothing() {
        let server = tally_testkit::RedisServer::start();
        let (redis, store) = default_store(&server.url()).await;
        let space = Space::counters(&[1], 2);
        let keys = store.layout.space_keys(&space);
        let tagged = (keys.registry(keys.shard("c")), keys.hash(1, "c"), "c");
        let book = (layout::RIA_KNOWN.to_owned(), "count:1:c".to_owned(), "1:c");
        for (book_rule, (registry, hash, member)) in [(false, tagged), (true, book)] {
            let mut conn = redis.handle();
            let _: () = redis::cmd("HSET")
                .arg(&hash)
                .arg(&[10, 1, 20, 1])
                .query_async(&mut conn)
                .await
                .unwrap();
            let _: () = redis::cmd("ZADD")
                .arg(&registry)
                .arg(0)
                .arg(member)
                .query_async(&mut conn)
                .await
                .unwrap();
            // Only stale data: read alone, the pass would drop the entry.
            let entries = vec![CleanEntry {
                member: member.to_owned(),
                hashes: vec![(hash.clone(), Some(Trim::Upto(100)))],
            }];
            let old = store.read_old(entries, book_rule).await.unwrap();
            assert!(old.direct.is_empty(), "no field stays: the script removes");
            let work = old.scripted;
            let fields = |f: &[&str]| f.iter().map(|f| f.as_bytes().to_vec()).collect();
            let mut read = work[0].hashes[0].1.clone();
            if let Some(Trim::Fields(f)) = &mut read {
                f.sort();
            }
            assert_eq!(read, Some(Trim::Fields(fields(&["10", "20"]))));
            // A writer adds a fresh slice before the removal.
            let _: () = redis::cmd("HINCRBY")
                .arg(&hash)
                .arg(500)
                .arg(1)
                .query_async(&mut conn)
                .await
                .unwrap();
            let removed = store
                .clean_entries(&registry, &work, book_rule, None)
                .await
                .unwrap();
            assert_eq!(removed, (2, 0), "book rule: {book_rule}");
            let left: Vec<(String, i64)> = redis::cmd("HGETALL")
                .arg(&hash)
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(left, vec![("500".to_owned(), 1)]);
            let score: Option<f64> = redis::cmd("ZSCORE")
                .arg(&registry)
                .arg(member)
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(score, Some(0.0), "book rule: {book_rule}");
            // Without a writer in between, the same steps drop the entry.
            let entries = vec![CleanEntry {
                member: member.to_owned(),
                hashes: vec![(hash.clone(), Some(Trim::Upto(1000)))],
            }];
            let work = store.read_old(entries, book_rule).await.unwrap().scripted;
            let removed = store
                .clean_entries(&registry, &work, book_rule, None)
                .await
                .unwrap();
            assert_eq!(removed, (1, 1), "book rule: {book_rule}");
        }
    }

    /// Texts that take every listpack entry encoding (integers of each
    /// width and their edges, numbers a listpack keeps as strings, short,
    /// 12-bit and 32-bit string lengths): the DUMP parser's cases.
    fn listpack_edge_texts() -> Vec<String> {
        [
            "0",
            "7",
            "127",
            "128",
            "-1",
            "-4096",
            "4095",
            "4096",
            "-32768",
            "32767",
            "40000",
            "-8388608",
            "8388607",
            "9000000",
            "2147483647",
            "-2147483648",
            "2147483648",
            "1700000000",
            "9223372036854775807",
            "-9223372036854775808",
            "18446744073709551616",
            "007",
            "",
            "abc",
            "12x",
            "1e3",
        ]
        .iter()
        .map(|t| t.to_string())
        .chain(["x".repeat(100), "y".repeat(5000)])
        .collect()
    }

    /// Up to 512 entries of up to 10,000 bytes stay in a hash's listpack.
    async fn keep_long_values_in_listpacks(conn: &mut impl redis::aio::ConnectionLike) {
        for (setting, value) in [
            ("hash-max-listpack-entries", "512"),
            ("hash-max-listpack-value", "10000"),
        ] {
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg(setting)
                .arg(value)
                .query_async(conn)
                .await
                .unwrap();
        }
    }

    /// Reads of sums take fields and values from DUMP payloads: the same
    /// text HGETALL answers, for every listpack entry encoding, as values
    /// and as fields, compressed or not; another encoding is `None`.
    #[tokio::test]
    async fn entries_read_from_dump_are_those_hgetall_answers() {
        let server = tally_testkit::RedisServer::start();
        let (redis, _store) = default_store(&server.url()).await;
        let mut conn = redis.handle();
        let texts = listpack_edge_texts();
        keep_long_values_in_listpacks(&mut conn).await;
        let text = |r: &Reply| match r {
            Reply::Int(i) => i.to_string().into_bytes(),
            Reply::BulkString(b) => b.clone(),
            other => panic!("{other:?}"),
        };
        for compression in ["yes", "no"] {
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("rdbcompression")
                .arg(compression)
                .query_async(&mut conn)
                .await
                .unwrap();
            for (i, t) in texts.iter().enumerate() {
                // As a value of a slice, and as a field.
                let _: () = redis::cmd("HSET")
                    .arg("values")
                    .arg(1_700_000_000 + i)
                    .arg(t)
                    .arg(t)
                    .arg(i)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
            }
            let payload: Vec<u8> = redis::cmd("DUMP")
                .arg("values")
                .query_async(&mut conn)
                .await
                .unwrap();
            let Some(Reply::Array(got)) = dump_as_hgetall(&payload) else {
                panic!("not read from the DUMP");
            };
            let want: Vec<Vec<u8>> = redis::cmd("HGETALL")
                .arg("values")
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(
                got.iter().map(text).collect::<Vec<_>>(),
                want,
                "{compression}"
            );
        }
        let big: Vec<String> = (0..600).map(|k| k.to_string()).collect();
        for k in &big {
            let _: () = redis::cmd("HSET")
                .arg("big")
                .arg(k)
                .arg(k)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
        let payload: Vec<u8> = redis::cmd("DUMP")
            .arg("big")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(dump_as_hgetall(&payload), None);
        // A listpack's integers read as numbers where they fit.
        assert_eq!(reply_number::<i64>(&Reply::Int(-1), "n"), Ok(-1));
        assert!(reply_number::<u64>(&Reply::Int(-1), "a slice start").is_err());
    }

    /// The first pass reads fields from DUMP payloads: they name exactly
    /// what HKEYS answers, for every listpack entry encoding, compressed
    /// or not; a hash in another encoding is read with HKEYS instead.
    #[tokio::test]
    async fn fields_read_from_dump_are_those_hkeys_answers() {
        let server = tally_testkit::RedisServer::start();
        let (redis, store) = default_store(&server.url()).await;
        let mut conn = redis.handle();
        let fields = listpack_edge_texts();
        // A hash of the shape the cleaner meets: 181 slices in a row.
        let slices: Vec<String> = (0..181).map(|k| (1_700_000_000 + k).to_string()).collect();
        let big: Vec<String> = (0..600).map(|k| k.to_string()).collect();
        let hashes = [("odd", &fields), ("slices", &slices), ("big", &big)];
        // Long values stay in the listpack (12- and 32-bit string lengths);
        // 600 entries do not.
        keep_long_values_in_listpacks(&mut conn).await;
        for compression in ["yes", "no"] {
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("rdbcompression")
                .arg(compression)
                .query_async(&mut conn)
                .await
                .unwrap();
            let mut keys = vec!["missing"];
            for (key, fields) in hashes {
                for f in fields.iter() {
                    let _: () = redis::cmd("HSET")
                        .arg(key)
                        .arg(f)
                        .arg(1)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                }
                keys.push(key);
            }
            let read = store.hash_fields(&keys).await.unwrap();
            assert_eq!(read[0], Vec::<Vec<u8>>::new());
            for (i, key) in keys.iter().enumerate().skip(1) {
                let want: Vec<Vec<u8>> = redis::cmd("HKEYS")
                    .arg(*key)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                assert_eq!(read[i], want, "{key}, compression {compression}");
                let payload: Vec<u8> = redis::cmd("DUMP")
                    .arg(*key)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                let parsed = dump::hash_fields(&payload);
                if *key == "big" {
                    assert_eq!(parsed, None, "a hashtable is read with HKEYS");
                } else {
                    assert_eq!(parsed, Some(want), "{key}, compression {compression}");
                }
            }
        }
        // A user whose ACL refuses DUMP reads the same fields with HKEYS.
        let _: () = redis::cmd("ACL")
            .arg(&[
                "SETUSER", "nodump", "on", "nopass", "~*", "&*", "+@all", "-dump",
            ])
            .query_async(&mut conn)
            .await
            .unwrap();
        let url = server.url().replace("redis://", "redis://nodump:x@");
        let (_, limited) = default_store(&url).await;
        let keys = ["odd", "slices", "big", "missing"];
        assert_eq!(
            limited.hash_fields(&keys).await.unwrap(),
            store.hash_fields(&keys).await.unwrap()
        );
    }

    #[test]
    fn list_pages_merge_ranges_exactly() {
        // Ranges as the store holds them; a page must be the first `limit`
        // names after the cursor of their sorted union, whatever the split.
        let page = |ranges: &[Vec<&str>], after: Option<&str>, limit: usize| {
            let mut page = ListPage::new(ranges.len(), after, limit);
            let mut rounds = 0;
            while let Some(asks) = page.asks() {
                rounds += 1;
                let answers = asks
                    .iter()
                    .map(|(i, cursor, count)| {
                        ranges[*i]
                            .iter()
                            .filter(|n| cursor.as_deref().is_none_or(|c| **n > c))
                            .take(*count)
                            .map(|n| n.to_string())
                            .collect()
                    })
                    .collect();
                page.answer(answers);
            }
            (page.names(), rounds)
        };
        let ranges = vec![
            vec!["a", "d", "g"],
            vec!["b", "e"],
            vec!["c", "f", "h", "i"],
        ];
        assert_eq!(page(&ranges, None, 3).0, ["a", "b", "c"]);
        assert_eq!(page(&ranges, Some("c"), 4).0, ["d", "e", "f", "g"]);
        assert_eq!(page(&ranges, None, 100).0.len(), 9);
        assert_eq!(page(&ranges, Some("i"), 5).0, Vec::<String>::new());
        assert_eq!(page(&ranges, None, 0).0, Vec::<String>::new());
        // Duplicates across ranges (the book's precisions) count once.
        let dup = vec![vec!["a", "b", "c"], vec!["a", "b", "c"]];
        assert_eq!(page(&dup, None, 2).0, ["a", "b"]);
        // Skewed ranges take more rounds, never a wrong page.
        let skewed: Vec<String> = (0..500).map(|i| format!("n{i:04}")).collect();
        let skewed = vec![skewed.iter().map(String::as_str).collect(), vec!["z"]];
        let (names, rounds) = page(&skewed, None, 100);
        assert_eq!(names.len(), 100);
        assert_eq!(names[99], "n0099");
        assert!(rounds > 1);
        // Names spread over 64 ranges: one round trip, and much less read
        // than 64 pages.
        let spread: Vec<Vec<String>> = (0..64)
            .map(|s| {
                (0..1000)
                    .filter(|i| i % 64 == s)
                    .map(|i| format!("n{i:04}"))
                    .collect()
            })
            .collect();
        let spread: Vec<Vec<&str>> = spread
            .iter()
            .map(|r| r.iter().map(String::as_str).collect())
            .collect();
        let (names, rounds) = page(&spread, Some("n0100"), 500);
        assert_eq!(names.first().map(String::as_str), Some("n0101"));
        assert_eq!(names.len(), 500);
        assert_eq!(rounds, 1);
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
