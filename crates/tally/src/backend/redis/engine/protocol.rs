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
use crate::engine::{Batch, CellDelta, Kind, SeriesWrite, Space};
use crate::error::Result;
use crate::name::Name;

/// `engine_apply.lua`: its protocol part, then the merge.
pub(super) const APPLY_LUA: &str = include_str!("../lua/engine_apply.lua");

/// The line that ends the protocol part of [`APPLY_LUA`].
#[cfg(test)]
const END_OF_PROTOCOL: &str = "-- End of the protocol.\n";

/// One `engine_apply.lua` call, ready to send, and the op each merge
/// stands for (to name the series in an overflow error, and to take the
/// call back on a cluster).
pub(super) struct ApplyCall<'a> {
    pub cmd: redis::Cmd,
    pub kind: Kind,
    /// What a series of the space is called in messages
    /// ([`crate::engine::store::Space::noun`]).
    pub noun: &'static str,
    /// Whether KEYS[1] is the writer lane's record.
    pub marker: bool,
    /// The KEYS index of each op's hash.
    pub op_keys: Vec<usize>,
    pub ops: Vec<(&'a Name, &'a CellDelta)>,
}

/// Builds the EVALSHA of `script` (`engine_apply.lua` for `kind`) for
/// `writes` directly into one command buffer (no string per argument):
/// KEYS are the writer lane's record (if any), the hashes the layout
/// groups the writes into, then the registries (each with its `ends@e`
/// where the layout keeps one), then the kind's extra keys; ARGV refers to
/// them by index (the protocol part of `lua/engine_apply.lua`).
pub(super) fn apply_call<'a>(
    script: &Script,
    keys: SpaceKeys<'_>,
    kind: &KindStore,
    writes: &[&'a SeriesWrite],
    batch: &Batch,
    now: Timestamp,
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
    let currents = if kind.current { writes.len() } else { 0 };
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
            g.cells[0].resolution,
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
        keys.write_current(&mut buf, w.name.as_str(), shard);
        cmd.arg(buf.as_str());
    }
    for n in 1..=kind.scratch {
        cmd.arg(keys.scratch(shards[0], n));
    }
    // ARGV: the header, then per hash its (slice, delta) pairs.
    cmd.arg(match (ends, marker) {
        (false, false) => "0",
        (false, true) => "1",
        (true, false) => "2",
        (true, true) => "3",
    })
    .arg(batch.seq.map_or(0, |s| s.seq))
    .arg(kind.kind.code())
    .arg(hashes);
    let mut ops = Vec::with_capacity(groups.list.iter().map(|g| g.cells.len()).sum());
    let mut op_keys = Vec::with_capacity(ops.capacity());
    let mut blob = Vec::new();
    for (k, g) in groups.list.iter().enumerate() {
        if kind.current {
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
                    (kind.encode)(&c.delta, &mut blob);
                    cmd.arg(blob.as_slice())
                }
            };
            op_keys.push(usize::from(marker) + k + 1);
            ops.push((&writes[g.series].name, c));
        }
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
        // Then per registry its members.
        for (series, members) in registries.values() {
            cmd.arg(*members);
            for &i in series {
                let name = writes[i].name.as_str();
                let hashes = groups.of_series(i).count();
                for (_, g) in groups.of_series(i).take(keys.members_of(hashes)) {
                    keys.write_member(&mut buf, g.cells[0].resolution, name);
                    cmd.arg(buf.as_str());
                }
            }
        }
    }
    Ok(ApplyCall {
        cmd,
        kind: kind.kind,
        noun: batch.space.noun(),
        marker,
        op_keys,
        ops,
    })
}

/// The `engine_revert.lua` call that takes back `call` (see that script):
/// KEYS are the shard's registry (and `ends@e`), then the call's hashes,
/// its lane record (if any) standing in at the first so that the ops'
/// indices still match, shifted for the registry keys placed first.
/// `None` when the call merged nothing.
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
            hash_keys.push(keys.cell_hash(space, c.resolution, c.slice, name.as_str())?);
        }
    }
    for key in &hash_keys {
        invocation.key(key);
    }
    // The writer lane's record keeps the reverted number: the writer's
    // next numbers are above it, so they still apply.
    invocation.arg(keys.ends_scale()).arg(call.ops.len());
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
    Ok(Some(invocation))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::super::layout::Layout;
    use super::super::kinds;
    use super::*;
    use crate::engine::store::WriteSeq;
    use crate::engine::{Resolution, Retention, Value};

    /// After the apply script's protocol part: a walk of the call as the
    /// apply script walks it, answering what it read, one line per item,
    /// keys by name.
    const ECHO: &str = r#"
local out = {}
local marker, expiring, seq, kind, h, at = apply_header()
out[#out + 1] = 'header ' .. marker .. ' ' .. tostring(expiring) .. ' ' .. seq .. ' ' .. kind
if marker == 1 then out[#out + 1] = 'lane ' .. KEYS[1] end
local gauge = kind == '5'
for k = 1, h do
  local ck, run, life, m, first = apply_hash(at, gauge)
  local line = 'hash ' .. KEYS[marker + k]
  if ck then line = line .. ' current ' .. KEYS[ck] .. ' run ' .. run .. ' life ' .. life end
  out[#out + 1] = line
  for j = 0, m - 1 do
    out[#out + 1] = 'cell ' .. ARGV[first + 2 * j] .. ' ' .. ARGV[first + 2 * j + 1]
  end
  at = first + 2 * m
end
local reg = marker + h
if expiring then
  local below, _
  below, _, at = apply_below(at)
  out[#out + 1] = 'below ' .. below
  while at <= #ARGV do
    out[#out + 1] = 'registry ' .. KEYS[reg + 1] .. ' ' .. KEYS[reg + 2]
    reg = reg + 2
    local n
    n, at = apply_registry(at)
    for _ = 1, n do
      local name, score, _, must, k, quads, after = apply_series(at)
      out[#out + 1] = 'series ' .. name .. ' ' .. score .. ' ' .. tostring(must)
      for j = 0, k - 1 do
        local key, ttl, mark, marks = apply_chunk(quads + 4 * j)
        out[#out + 1] = 'chunk ' .. KEYS[key] .. ' ' .. ttl .. ' ' .. mark .. ' ' .. marks
      end
      at = after
    end
  end
else
  while at <= #ARGV do
    reg = reg + 1
    out[#out + 1] = 'registry ' .. KEYS[reg]
    local m, members, after = apply_members(at)
    for k = 0, m - 1 do out[#out + 1] = 'member ' .. ARGV[members + k] end
    at = after
  end
end
out[#out + 1] = 'keys ' .. #KEYS
return out
"#;

    /// What the echo reads of `call`: the call sent as EVAL of the echo,
    /// with the same KEYS and ARGV.
    async fn echo(
        conn: &mut redis::aio::MultiplexedConnection,
        call: &ApplyCall<'_>,
    ) -> Vec<String> {
        let mut cmd = redis::cmd("EVAL");
        let (protocol, _) = APPLY_LUA
            .split_once(END_OF_PROTOCOL)
            .expect("engine_apply.lua marks the end of its protocol part");
        cmd.arg([protocol, ECHO].concat());
        for arg in call.cmd.args_iter().skip(2) {
            match arg {
                redis::Arg::Simple(bytes) => cmd.arg(bytes),
                _ => unreachable!("only plain arguments"),
            };
        }
        let lines: Vec<Vec<u8>> = cmd.query_async(conn).await.unwrap();
        lines
            .into_iter()
            .map(|l| String::from_utf8_lossy(&l).into_owned())
            .collect()
    }

    /// The lines the echo must read of `batch` in one call, from what the
    /// batch means: its series' keys by name, its cells, its registries.
    fn expected(keys: SpaceKeys<'_>, batch: &Batch, now: Timestamp) -> Vec<String> {
        let kind = kinds::of(batch.space.kind).unwrap();
        let writes: Vec<&SeriesWrite> = batch.writes.iter().collect();
        let groups = keys.groups(&batch.space, &writes, now).unwrap();
        let ends = keys.keeps_ends();
        let mut out = vec![format!(
            "header {} {ends} {} {}",
            u8::from(batch.seq.is_some()),
            batch.seq.map_or(0, |s| s.seq),
            batch.space.kind.code()
        )];
        let mut nkeys = 0;
        if let Some(seq) = batch.seq {
            let shard = keys.shard(writes[0].name.as_str());
            out.push(format!("lane {}", keys.writer(&seq, shard)));
            nkeys += 1;
        }
        let delta = |v: &Value| match v.as_sum() {
            Some(d) => d.to_string(),
            None => {
                let mut blob = Vec::new();
                (kind.encode)(v, &mut blob);
                String::from_utf8_lossy(&blob).into_owned()
            }
        };
        let hash = |g: &expiring::Group<'_>| {
            let name = writes[g.series].name.as_str();
            let res = g.cells[0].resolution;
            if ends {
                keys.chunk(res, g.chunk, name)
            } else {
                keys.hash(res, name)
            }
        };
        for g in &groups.list {
            let name = writes[g.series].name.as_str();
            let mut line = format!("hash {}", hash(g));
            if kind.current {
                let current = keys.current(name);
                line += &format!(" current {current} run ");
                // The run names the current key by its index: resolved
                // here as the Lua side reads it, by position after the
                // registries.
                line += &format!("@ {} life {}", g.cells[0].resolution, g.ttl);
            }
            out.push(line);
            for c in g.cells {
                out.push(format!("cell {} {}", c.slice, delta(&c.delta)));
            }
            nkeys += 1;
        }
        let mut shards: Vec<u32> = writes.iter().map(|w| keys.shard(w.name.as_str())).collect();
        shards.sort_unstable();
        shards.dedup();
        if ends {
            out.push(format!("below {}", expiring::prune_below(now)));
        }
        for shard in shards {
            let (registry, e) = keys.registry_keys(shard);
            nkeys += 1 + usize::from(e.is_some());
            match e {
                Some(e) => out.push(format!("registry {registry} {e}")),
                None => out.push(format!("registry {registry}")),
            }
            for (i, w) in writes.iter().enumerate() {
                if keys.shard(w.name.as_str()) != shard {
                    continue;
                }
                if ends {
                    let end = groups.ends[i];
                    out.push(format!("series {} {} {}", w.name, end.score, end.must));
                    for (_, g) in groups.of_series(i) {
                        out.push(format!(
                            "chunk {} {} {} {}",
                            hash(g),
                            g.ttl,
                            g.marks.0,
                            g.marks.1
                        ));
                    }
                } else if keys.is_book() {
                    for (_, g) in groups.of_series(i) {
                        out.push(format!("member {}:{}", g.cells[0].resolution, w.name));
                    }
                } else {
                    out.push(format!("member {}", w.name));
                }
            }
        }
        if kind.current {
            nkeys += writes.len();
        }
        out.push(format!("keys {}", nkeys + kind.scratch));
        out
    }

    fn write(name: &str, cells: &[(u64, u64)], delta: &Value) -> SeriesWrite {
        SeriesWrite {
            name: Name::new(name).unwrap(),
            cells: cells
                .iter()
                .map(|&(resolution, slice)| CellDelta {
                    resolution,
                    slice,
                    delta: delta.clone(),
                })
                .collect(),
        }
    }

    /// What Rust builds for `engine_apply.lua` is what its prelude reads,
    /// in every layout, with and without a writer lane, for sums, blobs,
    /// gauges' current-value keys and sets' scratch keys.
    #[tokio::test]
    async fn the_apply_prelude_reads_what_rust_builds() {
        let server = tally_testkit::RedisServer::start();
        let client = redis::Client::open(server.url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let now = Timestamp::from_secs(1_000_000).unwrap();
        let seq = WriteSeq {
            writer: 0xab,
            lane: 3,
            seq: 42,
        };
        let counters = Arc::new(Space::counters(&[1, 60], 10));
        let space = |id: &'static str, kind: Kind| {
            Arc::new(
                Space::new(
                    id,
                    kind,
                    vec![Resolution::new(1, 10), Resolution::new(60, 10)],
                    Retention::Cleaner,
                )
                .unwrap(),
            )
        };
        let cases = [
            (
                Layout::default(),
                counters.clone(),
                Value::Sum(-7),
                Some(seq),
            ),
            (Layout::default(), counters.clone(), Value::Sum(1), None),
            (Layout::Ria, counters.clone(), Value::Sum(3), Some(seq)),
            (
                Layout::parse("expiring", "app").unwrap(),
                counters.clone(),
                Value::Sum(2),
                Some(seq),
            ),
            (
                Layout::default(),
                space("gauges", Kind::Gauge),
                Kind::Gauge.identity(),
                Some(seq),
            ),
            (
                Layout::default(),
                space("stats", Kind::Stats),
                Kind::Stats.identity(),
                None,
            ),
            (
                Layout::default(),
                space("sets", Kind::Distinct),
                Kind::Distinct.identity(),
                None,
            ),
        ];
        for (layout, space, delta, seq) in cases {
            let batch = Batch {
                space: space.clone(),
                writes: vec![
                    write("a", &[(1, 999_998), (1, 999_999), (60, 999_960)], &delta),
                    write("b.c", &[(60, 999_960)], &delta),
                    write("d", &[(1, 1_000_000)], &delta),
                ],
                seq,
            };
            let keys = layout.space_keys(&space);
            let kind = kinds::of(space.kind).unwrap();
            let writes: Vec<&SeriesWrite> = batch.writes.iter().collect();
            let script = Script::new("return 0");
            let call = apply_call(&script, keys, kind, &writes, &batch, now).unwrap();
            let mut got = echo(&mut conn, &call).await;
            // A gauge's run names its current-value key by KEYS index:
            // checked as a key above, its index stood in for here.
            for line in &mut got {
                if let Some(at) = line.find(" run ") {
                    let rest: Vec<&str> = line[at + 5..].splitn(2, ' ').collect();
                    *line = format!("{} run @ {}", &line[..at], rest[1]);
                }
            }
            let want = expected(keys, &batch, now);
            assert_eq!(got, want, "{} layout, {}", layout.name(), space.kind);
            // Each op's KEYS index is its hash's.
            let hashes: Vec<String> = got
                .iter()
                .filter_map(|l| l.strip_prefix("hash "))
                .map(|l| l.split(' ').next().unwrap().to_owned())
                .collect();
            let mut ops = call.ops.iter().zip(&call.op_keys);
            for (k, g) in keys
                .groups(&batch.space, &writes, now)
                .unwrap()
                .list
                .iter()
                .enumerate()
            {
                for c in g.cells {
                    let ((name, cell), &index) = ops.next().unwrap();
                    assert_eq!(*cell, c);
                    assert_eq!(name.as_str(), writes[g.series].name.as_str());
                    assert_eq!(index, usize::from(call.marker) + k + 1, "{}", hashes[k]);
                }
            }
            assert!(ops.next().is_none());
        }
    }
}
