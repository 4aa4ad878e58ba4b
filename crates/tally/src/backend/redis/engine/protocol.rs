//! The `KEYS`/`ARGV` protocol of the store's write calls, built in one
//! place: `engine_apply.lua`'s (read in one place too: the protocol part
//! at the top of that script, which documents it) and
//! `engine_revert.lua`'s, which refers to an applied call's hashes by the
//! same indices. The tests run that protocol part, cut from the script, on
//! a real server against what is built here.

use std::collections::BTreeMap;

use redis::Script;

use super::super::expiring;
use super::super::layout::SpaceKeys;
use super::kinds::KindStore;
use crate::clock::Timestamp;
use crate::engine::{Batch, CellDelta, Kind, SeriesWrite, Space, Value};
use crate::error::{Error, Result};
use crate::name::Name;

/// `engine_apply.lua`: its protocol part, then the merge.
pub(super) const APPLY_LUA: &str = include_str!("../lua/engine_apply.lua");

/// `sum_short.lua` after `sum_pending.lua`: the short call's script.
pub(super) const SHORT_LUA: &str = concat!(
    include_str!("../lua/sum_pending.lua"),
    include_str!("../lua/sum_short.lua")
);

/// The line that ends the protocol part of [`APPLY_LUA`].
#[cfg(test)]
const END_OF_PROTOCOL: &str = "-- End of the protocol.\n";

/// Sums go through pending slices only in a space of at least this many
/// precisions. A busy counter's write into its pending slice is one
/// `HINCRBY` where a write of every precision is one per precision, but
/// costs an `HMGET` and the fold's script; counted by callgrind on calls
/// of two busy counters (`docs/bench-log/before-after-20.md`), the
/// pending slice costs Redis more than it saves up to four precisions and
/// less from five.
pub(super) const SUM_FOLD_MIN: usize = 5;

/// How an apply call writes its series, and so which of its kind's
/// scripts it is sent to (the fold's for [`Route::Pending`], else the one
/// without it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Route {
    /// Every hash as it is (ARGV[1] '0' to '3'): a layout or kind that
    /// keeps no pending slices.
    Plain,
    /// As [`Route::Plain`] ('6', '7'), for sums of a space of fewer than
    /// [`SUM_FOLD_MIN`] precisions in a layout that keeps pending slices
    /// (one may be left by a setting of more): a count past 9 × 10^17 in
    /// magnitude makes the call take itself back and answer
    /// `TALLY_CHECK`, and it is sent again as
    /// `Route::Pending { fold: false }`.
    Checked,
    /// Through pending slices ('4', '5'): with `fold`, a series of one
    /// cell per precision with one delta through its own; without, every
    /// series' hashes written directly, sums checked against their
    /// series' pending count.
    Pending { fold: bool },
}

impl Route {
    /// The route of a write of `space`'s series in `keys`' layout.
    pub fn of(keys: SpaceKeys<'_>, space: &Space) -> Route {
        if !keys.folds(space.kind) {
            Route::Plain
        } else if space.kind == Kind::Sum && space.precisions.len() < SUM_FOLD_MIN {
            Route::Checked
        } else {
            Route::Pending { fold: true }
        }
    }

    /// True for a call through pending slices.
    pub fn pending(self) -> bool {
        matches!(self, Route::Pending { .. })
    }
}

/// One `engine_apply.lua` call, ready to send, and the op each merge
/// stands for (to name the series in an overflow error, and to take the
/// call back on a cluster).
pub(super) struct ApplyCall<'a> {
    pub cmd: redis::Cmd,
    pub kind: Kind,
    /// How it writes, which says the script it is sent to.
    pub route: Route,
    /// The series it writes, kept by a [`Route::Checked`] call only (to be
    /// built again checked); empty otherwise.
    pub writes: Vec<&'a SeriesWrite>,
    /// What a series of the space is called in messages
    /// ([`crate::engine::store::Space::noun`]).
    pub noun: &'static str,
    /// Whether KEYS[1] is the writer lane's record.
    pub marker: bool,
    /// The KEYS index of each op's hash.
    pub op_keys: Vec<usize>,
    pub ops: Vec<(&'a Name, &'a CellDelta)>,
    /// The ops written through a series' pending slice, each series' as
    /// one range of `ops` (finest first).
    pub pending: Vec<std::ops::Range<usize>>,
    /// A call of one counter through its pending slice: that slice's key
    /// and its finest cell's field, which the call's answer (2) says the
    /// pending slice is at afterwards ([`short_call`]).
    pub only: Option<(String, u64)>,
}

/// The short call (`sum_short.lua`) of `batch`, a write of one counter
/// through its pending slice, for a client that saw that slice last at
/// this write's finest slice: KEYS the lane's record (if any) and the
/// pending slice, ARGV whether there is a record, the sequence number, the
/// finest precision, the finest cell's field and the delta. `None` for any
/// other batch, or when `seen` (given the pending slice's key and the
/// field) says the client did not see the pending slice there: the call
/// is built only when it will be sent. Answers also the key.
pub(super) fn short_call(
    script: &Script,
    keys: SpaceKeys<'_>,
    batch: &Batch,
    seen: impl FnOnce(&str, u64) -> bool,
) -> Result<Option<(redis::Cmd, String)>> {
    let [write] = batch.writes.as_slice() else {
        return Ok(None);
    };
    if batch.space.kind != Kind::Sum
        || Route::of(keys, &batch.space) != (Route::Pending { fold: true })
        || !folds(&batch.space, write)
    {
        return Ok(None);
    }
    let (Some(finest), Some(delta)) = (write.cells.first(), write.cells[0].delta.as_sum()) else {
        return Ok(None);
    };
    let name = write.name.as_str();
    let shard = keys.shard(name);
    let pending = keys.pending(name);
    let field = keys.field(finest.precision, finest.slice)?;
    if !seen(&pending, field) {
        return Ok(None);
    }
    let mut cmd = super::super::evalsha(script, 1 + usize::from(batch.seq.is_some()));
    if let Some(seq) = &batch.seq {
        cmd.arg(keys.writer(seq, shard));
    }
    cmd.arg(pending.as_str())
        .arg(if batch.seq.is_some() { "1" } else { "0" })
        .arg(batch.seq.map_or(0, |s| s.seq))
        .arg(finest.precision)
        .arg(field)
        .arg(delta);
    Ok(Some((cmd, pending)))
}

/// Builds the EVALSHA of `script` (`engine_apply.lua` for `kind`) for
/// `writes` directly into one command buffer (no string per argument):
/// KEYS are the writer lane's record (if any), the hashes the layout
/// groups the writes into, then the registries (each with its `ends@e`
/// where the layout keeps one), then the kind's extra keys; ARGV refers to
/// them by index (the protocol part of `lua/engine_apply.lua`), as
/// `route` says.
pub(super) fn apply_call<'a>(
    script: &Script,
    keys: SpaceKeys<'_>,
    kind: &KindStore,
    writes: &[&'a SeriesWrite],
    batch: &Batch,
    now: Timestamp,
    route: Route,
) -> Result<ApplyCall<'a>> {
    let shards: Vec<u32> = writes.iter().map(|w| keys.shard(w.name.as_str())).collect();
    let groups = keys.groups(&batch.space, writes, now)?;
    // Registries and the series each lists, in key order, and how many
    // members each registry gets.
    let mut registries: BTreeMap<u32, (Vec<usize>, usize)> = BTreeMap::new();
    for (i, &shard) in shards.iter().enumerate() {
        let hashes = groups.of_series(i).count();
        if hashes > 0 {
            let (series, members) = registries.entry(shard).or_default();
            series.push(i);
            *members += keys.members_of(hashes);
        }
    }
    let hashes = groups.list.len();
    let marker = batch.seq.is_some();
    let ends = keys.keeps_ends();
    let per_registry = 1 + usize::from(ends);
    // Through pending slices (`stats_fold.lua`), a series' pending key
    // takes the place a gauge's current-value key has.
    let pending = route.pending();
    let folds: Vec<bool> = match route {
        Route::Pending { fold: true } => writes.iter().map(|w| folds(&batch.space, w)).collect(),
        Route::Pending { fold: false } => vec![false; writes.len()],
        // Read only through pending slices.
        Route::Plain | Route::Checked => Vec::new(),
    };
    let currents = if kind.current || pending {
        writes.len()
    } else {
        0
    };
    let first_current = usize::from(marker) + hashes + per_registry * registries.len() + 1;
    let nkeys = first_current - 1 + currents + kind.scratch;
    let mut cmd = super::super::evalsha(script, nkeys);
    let mut buf = String::new();
    // KEYS.
    if let Some(seq) = batch.seq {
        cmd.arg(keys.writer(&seq, shards[0]));
    }
    for g in &groups.list {
        let name = writes[g.series].name.as_str();
        keys.write_group(
            &mut buf,
            g.cells[0].precision,
            g.chunk,
            name,
            shards[g.series],
        );
        cmd.arg(buf.as_str());
    }
    for &shard in registries.keys() {
        let (registry, ends) = keys.registry_keys(shard);
        cmd.arg(registry);
        if let Some(ends) = ends {
            cmd.arg(ends);
        }
    }
    for (w, &shard) in writes.iter().zip(&shards).take(currents) {
        if pending {
            keys.write_pending(&mut buf, w.name.as_str(), shard);
        } else {
            keys.write_current(&mut buf, w.name.as_str(), shard);
        }
        cmd.arg(buf.as_str());
    }
    for n in 1..=kind.scratch {
        cmd.arg(keys.scratch(shards[0], n));
    }
    // ARGV: the header, then per hash its (slice, delta) pairs.
    cmd.arg(match (ends, route, marker) {
        (true, _, false) => "2",
        (true, _, true) => "3",
        (false, Route::Plain, false) => "0",
        (false, Route::Plain, true) => "1",
        (false, Route::Pending { .. }, false) => "4",
        (false, Route::Pending { .. }, true) => "5",
        (false, Route::Checked, false) => "6",
        (false, Route::Checked, true) => "7",
    })
    .arg(batch.seq.map_or(0, |s| s.seq))
    .arg(kind.kind.code())
    .arg(hashes);
    if pending {
        // The space's precisions, which a pending slice's entry names
        // once here rather than per cell.
        cmd.arg(batch.space.precisions.len());
        for p in &batch.space.precisions {
            cmd.arg(p.seconds);
        }
    }
    let mut ops = Vec::with_capacity(groups.list.iter().map(|g| g.cells.len()).sum());
    let mut op_keys = Vec::with_capacity(ops.capacity());
    let mut through_pending = Vec::new();
    let mut blob = Vec::new();
    // How many hashes of the series of the k-th hash follow from it (its
    // hashes are next to each other in the groups).
    let run = |k: usize| {
        groups.list[k..]
            .iter()
            .take_while(|o| o.series == groups.list[k].series)
            .count()
    };
    let mut k = 0;
    while k < groups.list.len() {
        let g = &groups.list[k];
        if pending && folds[g.series] {
            // One entry for the series' hashes: its pending slice, how
            // many hashes, the delta once, then its cells' fields (one per
            // precision, in the space's order).
            let n = run(k);
            let series = &groups.list[k..k + n];
            cmd.arg(first_current + g.series).arg(n);
            arg_delta(&mut cmd, kind, &g.cells[0].delta, &mut blob);
            through_pending.push(ops.len()..ops.len() + series.iter().map(|o| o.cells.len()).sum::<usize>());
            for (j, o) in series.iter().enumerate() {
                for c in o.cells {
                    cmd.arg(keys.field(c.precision, c.slice)?);
                    op_keys.push(usize::from(marker) + k + j + 1);
                    ops.push((&writes[g.series].name, c));
                }
            }
            k += n;
            continue;
        }
        // A series' hashes written directly (every precision at once) are
        // one entry through pending slices: '0', for sums the series'
        // pending slice, which their counts are checked against (else 0),
        // how many hashes, and their precisions as a mask (bit b for the
        // space's b-th precision; 0 in the compact layout, whose fields
        // name theirs) before their cells.
        let n = if pending { run(k) } else { 1 };
        if pending {
            let series = &groups.list[k..k + n];
            cmd.arg(0)
                .arg(if kind.kind == Kind::Sum {
                    first_current + g.series
                } else {
                    0
                })
                .arg(n)
                .arg(if keys.is_compact() {
                    0
                } else {
                    precision_mask(&batch.space, series)?
                });
        }
        for (j, o) in groups.list[k..k + n].iter().enumerate() {
            if kind.current {
                cmd.arg(first_current + o.series)
                    .arg(o.cells[0].precision)
                    .arg(o.ttl);
            }
            cmd.arg(o.cells.len());
            for c in o.cells {
                // The field: the slice start, or in the compact layout the
                // precision and slice index in one integer.
                cmd.arg(keys.field(c.precision, c.slice)?);
                arg_delta(&mut cmd, kind, &c.delta, &mut blob);
                op_keys.push(usize::from(marker) + k + j + 1);
                ops.push((&writes[o.series].name, c));
            }
        }
        k += n;
    }
    if ends {
        // Then the `ends@e` score below which a series' data has all
        // expired; per registry its series, each with its end score,
        // whether it must set its chunks' expiry, and its hashes (KEYS
        // index, seconds to live, the finest chunks' marks it holds).
        cmd.arg(expiring::prune_below(now));
        for (series, _) in registries.values() {
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
        // Then per registry its members, each with the KEYS index of the
        // hash that vouches for it: its own in the book's layout, else the
        // series' last (its coarsest precision, whose slice most often
        // exists already).
        for (series, members) in registries.values() {
            cmd.arg(*members);
            for &i in series {
                let name = writes[i].name.as_str();
                let hashes = groups.of_series(i).count();
                let last = groups.of_series(i).last().map_or(0, |(k, _)| k);
                for (k, g) in groups.of_series(i).take(keys.members_of(hashes)) {
                    keys.write_member(&mut buf, g.cells[0].precision, name);
                    let vouch = if keys.is_book() { k } else { last };
                    cmd.arg(buf.as_str()).arg(usize::from(marker) + vouch + 1);
                }
            }
        }
    }
    let only = match (writes, through_pending.first()) {
        ([w], Some(_)) if kind.kind == Kind::Sum => Some((
            keys.pending(w.name.as_str()),
            keys.field(w.cells[0].precision, w.cells[0].slice)?,
        )),
        _ => None,
    };
    Ok(ApplyCall {
        cmd,
        kind: kind.kind,
        route,
        writes: if route == Route::Checked {
            writes.to_vec()
        } else {
            Vec::new()
        },
        noun: batch.space.noun(),
        marker,
        op_keys,
        ops,
        pending: through_pending,
        only,
    })
}

/// Adds `delta` to `cmd`: a sum as its number, else the kind's encoding
/// (made in `blob`).
fn arg_delta(cmd: &mut redis::Cmd, kind: &KindStore, delta: &Value, blob: &mut Vec<u8>) {
    match delta.as_sum() {
        Some(d) => cmd.arg(d),
        None => {
            blob.clear();
            (kind.encode)(delta, blob);
            cmd.arg(blob.as_slice())
        }
    };
}

/// True when `write` goes through its series' pending slice: one cell per
/// precision of `space`, in its order (finest first), all with the same
/// delta, as one observation (or several in one finest slice) gives.
fn folds(space: &Space, write: &SeriesWrite) -> bool {
    write.cells.len() == space.precisions.len()
        && write
            .cells
            .iter()
            .zip(&space.precisions)
            .all(|(c, p)| c.precision == p.seconds && c.delta == write.cells[0].delta)
}

/// The precisions of a series' hashes written directly, `series`, as the
/// apply script reads them (`apply_direct_precision`): bit b for the b-th
/// of `space`'s precisions (at most 32), one per hash.
fn precision_mask(space: &Space, series: &[expiring::Group<'_>]) -> Result<u64> {
    series.iter().try_fold(0, |mask, g| {
        let p = g.cells[0].precision;
        let b = space
            .precisions
            .iter()
            .position(|q| q.seconds == p)
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "a cell of a {p} s slice is written to a space without that precision"
                ))
            })?;
        Ok(mask | 1 << b)
    })
}

/// The `engine_revert.lua` call that takes back `call` (see that script):
/// KEYS are the shard's registry (and `ends@e`), then the call's hashes,
/// its lane record (if any) standing in at the first so that the ops'
/// indices still match, shifted for the registry keys placed first, then
/// the pending slices of the series written through one. `None` when the
/// call merged nothing.
pub(super) fn revert_call<'s>(
    script: &'s Script,
    keys: SpaceKeys<'_>,
    space: &Space,
    call: &ApplyCall<'_>,
) -> Result<Option<redis::ScriptInvocation<'s>>> {
    let Some((first, _)) = call.ops.first() else {
        return Ok(None);
    };
    let shard = keys.shard(first.as_str());
    let (registry, ends) = keys.registry_keys(shard);
    let mut invocation = script.prepare_invoke();
    invocation.key(&registry);
    let shift = 1 + usize::from(ends.is_some());
    if let Some(ends) = ends {
        invocation.key(ends);
    }
    let mut hash_keys: Vec<String> = Vec::new();
    if call.marker {
        hash_keys.push(registry.clone());
    }
    for (i, (name, c)) in call.ops.iter().enumerate() {
        if hash_keys.len() < call.op_keys[i] {
            hash_keys.push(keys.cell_hash(space, c.precision, c.slice, name.as_str())?);
        }
    }
    for key in &hash_keys {
        invocation.key(key);
    }
    let first_pending = shift + hash_keys.len() + 1;
    for range in &call.pending {
        invocation.key(keys.pending(call.ops[range.start].0.as_str()));
    }
    // The writer lane's record keeps the reverted number: the writer's
    // next numbers are above it, so they still apply.
    let direct = call.ops.len() - call.pending.iter().map(ExactSizeIterator::len).sum::<usize>();
    invocation.arg(keys.ends_scale()).arg(direct);
    let mut series: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut in_pending = vec![false; call.ops.len()];
    for range in &call.pending {
        in_pending[range.clone()].fill(true);
    }
    for (i, (name, c)) in call.ops.iter().enumerate() {
        let key_index = call.op_keys[i] + shift;
        if !in_pending[i] {
            invocation
                .arg(key_index)
                .arg(keys.field(c.precision, c.slice)?)
                .arg(c.delta.as_sum().unwrap_or_default());
        }
        let list = series.entry(name.as_str()).or_default();
        if !list.contains(&key_index) {
            list.push(key_index);
        }
    }
    // Then the series written through their pending slices: each its
    // pending slice, delta, finest cell (`<precision>:<field>`, as its
    // `t` starts) and cells (KEYS index and field).
    invocation.arg(call.pending.len());
    for (j, range) in call.pending.iter().enumerate() {
        let (name, finest) = call.ops[range.start];
        series.entry(name.as_str()).or_default().push(first_pending + j);
        invocation
            .arg(first_pending + j)
            .arg(finest.delta.as_sum().unwrap_or_default())
            .arg(format!(
                "{}:{}",
                finest.precision,
                keys.field(finest.precision, finest.slice)?
            ))
            .arg(range.len());
        for i in range.clone() {
            let (_, c) = call.ops[i];
            invocation
                .arg(call.op_keys[i] + shift)
                .arg(keys.field(c.precision, c.slice)?);
        }
    }
    for (name, list) in series {
        invocation.arg(name).arg(list.len());
        for i in list {
            invocation.arg(i);
        }
    }
    Ok(Some(invocation))
}

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod tests;
