//! The write calls' protocol against the Lua side, on a real redis-server.

use std::sync::Arc;

use super::super::super::layout::Layout;
use super::super::kinds;
use super::super::testing::write;
use super::*;
use crate::engine::store::WriteSeq;
use crate::engine::{Precision, Retention, SliceRead, Value};

/// After the apply script's protocol part: a walk of the call as the
/// apply script walks it, answering what it read, one line per item,
/// keys by name.
const ECHO: &str = r#"
local out = {}
local marker, expiring, pending, seq, kind, h, at, check = apply_header()
out[#out + 1] = 'header ' .. marker .. ' ' .. tostring(expiring) .. ' ' .. tostring(pending)
  .. ' ' .. seq .. ' ' .. kind .. ' ' .. tostring(check)
local np, pat = 0, 0
if pending then
  np, pat = apply_precisions()
  local line = 'precisions'
  for j = 0, np - 1 do line = line .. ' ' .. ARGV[pat + j] end
  out[#out + 1] = line
end
if marker == 1 then out[#out + 1] = 'lane ' .. KEYS[1] end
local gauge = kind == '5'
local k = 1
while k <= h do
  local ck, run, life, m, first, pend, n, mask, delta
  if pending then
    pend, n, mask, m, delta, first = apply_pending_entry(at, np)
  else
    ck, run, life, m, first = apply_hash(at, gauge)
    n = 1
  end
  if pend and pend > 0 then
    out[#out + 1] = 'entry pending ' .. KEYS[pend] .. ' hashes ' .. n .. ' delta ' .. delta
    for j = 0, m - 1 do
out[#out + 1] = 'cell ' .. KEYS[marker + k + (n == 1 and 0 or j)] .. ' at ' .. ARGV[pat + j]
  .. ' ' .. ARGV[first + j]
    end
    at = first + m
  elseif pend then
    at = first
    for i = 0, n - 1 do
      m, first = apply_direct_hash(at)
      out[#out + 1] = 'hash ' .. KEYS[marker + k + i] .. ' pending none'
        .. (delta > 0 and ' checks ' .. KEYS[delta] or '') .. ' at '
        .. apply_direct_precision(mask, i, pat)
      for j = 0, m - 1 do
out[#out + 1] = 'cell ' .. ARGV[first + 2 * j] .. ' ' .. ARGV[first + 2 * j + 1]
      end
      at = first + 2 * m
    end
  else
    local line = 'hash ' .. KEYS[marker + k]
    if ck then line = line .. ' current ' .. KEYS[ck] .. ' run ' .. run .. ' life ' .. life end
    out[#out + 1] = line
    for j = 0, m - 1 do
out[#out + 1] = 'cell ' .. ARGV[first + 2 * j] .. ' ' .. ARGV[first + 2 * j + 1]
    end
    at = first + 2 * m
  end
  k = k + n
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
for j = 0, m - 1 do
  local member, vouch = apply_member(members, j)
  out[#out + 1] = 'member ' .. member .. ' by ' .. KEYS[vouch]
end
at = after
  end
end
out[#out + 1] = 'keys ' .. #KEYS
return out
"#;

/// What the echo reads of `call`: the call sent as EVAL of the echo,
/// with the same KEYS and ARGV.
async fn echo(conn: &mut redis::aio::MultiplexedConnection, call: &ApplyCall<'_>) -> Vec<String> {
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
    let route = Route::of(keys, &batch.space);
    let pending = route.pending();
    let mut out = vec![format!(
        "header {} {ends} {pending} {} {} {}",
        u8::from(batch.seq.is_some()),
        batch.seq.map_or(0, |s| s.seq),
        batch.space.kind.code(),
        route == Route::Checked
    )];
    if pending {
        let list: Vec<String> = batch
            .space
            .precisions
            .iter()
            .map(|p| p.seconds.to_string())
            .collect();
        out.push(format!("precisions {}", list.join(" ")));
    }
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
        let res = g.cells[0].precision;
        if ends {
            keys.chunk(res, g.chunk, name)
        } else if let SpaceKeys::Compact { prefix, space } = keys {
            // One hash per series, spelled out here.
            let shard = keys.shard(name);
            match space {
                Some(space) => format!("{{{prefix}:{shard}}}:{space}:@:{name}"),
                None => format!("{{{prefix}:{shard}}}:@:{name}"),
            }
        } else {
            keys.hash(res, name)
        }
    };
    // A cell's field: its slice start, or the compact layout's precision
    // and slice index in one integer.
    let field = |c: &CellDelta| {
        if keys.is_compact() {
            (c.precision << 32) | (c.slice / c.precision)
        } else {
            c.slice
        }
    };
    // The compact layout's fields name their precision: 0 is sent.
    let at = |c: &CellDelta| if keys.is_compact() { 0 } else { c.precision };
    let mut entered = None;
    for g in &groups.list {
        let name = writes[g.series].name.as_str();
        nkeys += 1;
        if pending && folds(&batch.space, writes[g.series]) {
            // A series of one cell per precision with one delta is one
            // entry through its pending slice: its hashes, the delta once,
            // each cell's precision and field.
            if entered != Some(g.series) {
                entered = Some(g.series);
                let n = groups.list.iter().filter(|o| o.series == g.series).count();
                out.push(format!(
                    "entry pending {} hashes {n} delta {}",
                    keys.pending(name),
                    delta(&g.cells[0].delta)
                ));
            }
            for c in g.cells {
                out.push(format!("cell {} at {} {}", hash(g), c.precision, field(c)));
            }
            continue;
        }
        let mut line = format!("hash {}", hash(g));
        if kind.current {
            let current = keys.current(name);
            line += &format!(" current {current} run ");
            // The run names the current key by its index: resolved
            // here as the Lua side reads it, by position after the
            // registries.
            line += &format!("@ {} life {}", g.cells[0].precision, g.ttl);
        }
        if pending {
            // Written to every precision at once (sums checked against the
            // series' pending slice); the hash's precision.
            line += " pending none";
            if batch.space.kind == Kind::Sum {
                line += &format!(" checks {}", keys.pending(name));
            }
            line += &format!(" at {}", at(&g.cells[0]));
        }
        out.push(line);
        for c in g.cells {
            out.push(format!("cell {} {}", field(c), delta(&c.delta)));
        }
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
                // Each hash vouches for its own member.
                for (_, g) in groups.of_series(i) {
                    out.push(format!(
                        "member {}:{} by {}",
                        g.cells[0].precision,
                        w.name,
                        hash(g)
                    ));
                }
            } else {
                // The series' coarsest hash vouches for it.
                let (_, last) = groups.of_series(i).last().unwrap();
                out.push(format!("member {} by {}", w.name, hash(last)));
            }
        }
    }
    if kind.current || pending {
        nkeys += writes.len();
    }
    out.push(format!("keys {}", nkeys + kind.scratch));
    out
}

/// What Rust builds for `engine_apply.lua` is what its prelude reads,
/// in every layout, with and without a writer lane, for sums, blobs,
/// gauges' current-value keys, statistics' pending slices (series "e",
/// one cell per precision) and sets' scratch keys.
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
    // Enough precisions for counters to fold (SUM_FOLD_MIN).
    let folding = Arc::new(Space::counters(&super::super::testing::FOLDING, 10));
    assert_eq!(folding.precisions.len(), SUM_FOLD_MIN);
    let space = |id: &'static str, kind: Kind| {
        Arc::new(
            Space::new(
                id,
                kind,
                vec![Precision::new(1, 10), Precision::new(60, 10)],
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
        (Layout::default(), folding.clone(), Value::Sum(-2), Some(seq)),
        (Layout::default(), folding.clone(), Value::Sum(6), None),
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
        (
            Layout::parse("compact", "app").unwrap(),
            counters.clone(),
            Value::Sum(4),
            Some(seq),
        ),
        (
            Layout::parse("compact", "app").unwrap(),
            counters.clone(),
            Value::Sum(-1),
            None,
        ),
        (
            Layout::parse("compact", "app").unwrap(),
            space("gauges", Kind::Gauge),
            Kind::Gauge.identity(),
            Some(seq),
        ),
        (
            Layout::parse("compact", "app").unwrap(),
            space("stats", Kind::Stats),
            Kind::Stats.identity(),
            None,
        ),
        (
            Layout::parse("compact", "app").unwrap(),
            space("sets", Kind::Distinct),
            Kind::Distinct.identity(),
            Some(seq),
        ),
    ];
    for (layout, space, delta, seq) in cases {
        let every: Vec<(u64, u64)> = space
            .precisions
            .iter()
            .map(|p| (p.seconds, 1_000_000 / p.seconds * p.seconds))
            .collect();
        let batch = Batch {
            space: space.clone(),
            writes: vec![
                write("a", &[(1, 999_998), (1, 999_999), (60, 999_960)], &delta),
                write("b.c", &[(60, 999_960)], &delta),
                write("d", &[(1, 1_000_000)], &delta),
                // One cell per precision of the space: through its
                // pending slice where the space folds.
                write("e", &every, &delta),
            ],
            seq,
        };
        let keys = layout.space_keys(&space);
        let kind = kinds::of(space.kind).unwrap();
        let writes: Vec<&SeriesWrite> = batch.writes.iter().collect();
        let script = Script::new("return 0");
        let route = Route::of(keys, &batch.space);
        let call = apply_call(&script, keys, kind, &writes, &batch, now, route).unwrap();
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
                assert_eq!(
                    index,
                    usize::from(call.marker) + k + 1,
                    "{} layout, {}, hash {k}",
                    layout.name(),
                    space.kind
                );
            }
        }
        assert!(ops.next().is_none());
    }
}

/// A call taken back through the revert call built from it leaves what
/// the call found, in the layouts that split batches: fields back to
/// their values, a series that was new gone from its registry (and from
/// `ends@e`), a series that stays with its end score's mark reset. (On a
/// cluster, where reverts happen, each call holds one shard's series.)
#[tokio::test]
async fn a_reverted_call_leaves_what_it_found() {
    use crate::clock::{ManualClock, SharedClock};
    let server = tally_testkit::RedisServer::start();
    let redis = super::super::super::Redis::connect(&server.url())
        .await
        .unwrap();
    let now = 1_000_000u64;
    let clock: SharedClock = Arc::new(ManualClock::at(now as f64));
    let space = Arc::new(Space::counters(&[1, 60], 10));
    // A revert takes back one shard's call: both series in a's shard.
    let shard = super::super::super::layout::shard_of("a");
    let b: &'static str = (0..)
        .map(|i| format!("b{i}"))
        .find(|n| super::super::super::layout::shard_of(n) == shard)
        .map(|n| &*Box::leak(n.into_boxed_str()))
        .unwrap();
    for layout in [
        Layout::default(),
        Layout::parse("expiring", "app").unwrap(),
        Layout::parse("compact", "app").unwrap(),
    ] {
        let store =
            super::super::RedisSliceStore::new(redis.clone(), layout.clone(), clock.clone())
                .unwrap();
        let keys = layout.space_keys(&space);
        let cells = [(1, now - 1), (60, now / 60 * 60)];
        let kept = Batch {
            space: space.clone(),
            writes: vec![write("a", &cells, &Value::Sum(5))],
            seq: None,
        };
        store.apply_batch(&kept).await.unwrap();
        let mut conn = redis.handle();
        let ends = |name: &'static str| {
            ask::<Option<u64>>(&redis, "ZSCORE", keys.ends(keys.shard(name)), name)
        };
        let a_score = ends("a").await;
        let batch = Batch {
            space: space.clone(),
            writes: vec![
                write("a", &cells, &Value::Sum(3)),
                write(b, &cells, &Value::Sum(2)),
            ],
            seq: Some(WriteSeq {
                writer: 1,
                lane: 0,
                seq: 7,
            }),
        };
        let calls = store.apply_calls(keys, &batch, Route::of(keys, &space)).unwrap();
        assert_eq!(calls.len(), 1);
        store.run_apply(&calls[0]).await.unwrap();
        store.run_revert(keys, &space, &calls[0]).await.unwrap();
        // Read through the store: in the default layout the counts are in
        // the series' pending slices.
        let names = [Name::new("a").unwrap(), Name::new(b).unwrap()];
        let read = store
            .read_sum_slices(SliceRead::new(&space, &names, &[1, 60]))
            .await
            .unwrap();
        let want: Vec<Vec<(u64, i64)>> = cells.iter().map(|&(_, slice)| vec![(slice, 5)]).collect();
        assert_eq!(read[0], want, "{}", layout.name());
        assert_eq!(read[1], vec![vec![], vec![]], "{}", layout.name());
        if keys.folds(Kind::Sum) {
            let gone: bool = ask(&redis, "HEXISTS", keys.pending(b), "s").await;
            assert!(!gone, "{b}'s pending slice is gone with its count");
        }
        let registered = |name: &'static str| {
            ask::<Option<f64>>(&redis, "ZSCORE", keys.registry(keys.shard(name)), name)
        };
        assert!(registered("a").await.is_some(), "{}", layout.name());
        assert!(registered(b).await.is_none(), "{}", layout.name());
        if keys.keeps_ends() {
            let scale = super::super::super::layout::ENDS_SCALE;
            let reset = a_score.map(|s| s / scale * scale + scale - 1);
            assert_eq!(ends("a").await, reset);
            assert_eq!(ends(b).await, None);
        }
        let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    }
}

/// `command key arg` on `redis`: its reply.
async fn ask<T: redis::FromRedisValue>(
    redis: &super::super::super::Redis,
    command: &str,
    key: String,
    arg: impl redis::ToRedisArgs,
) -> T {
    let mut conn = redis.handle();
    redis::cmd(command)
        .arg(key)
        .arg(arg)
        .query_async(&mut conn)
        .await
        .unwrap()
}

/// A counter's write through its pending slice, folded by a later write
/// before the revert comes (the default layout), is taken back from every
/// precision's slice: the later write stays whole.
#[tokio::test]
async fn a_revert_after_a_fold_takes_back_from_the_precisions() {
    let now = 1_000_020u64;
    let (_server, redis, store, space) = super::super::testing::counters_at(now).await;
    let keys = store.layout.space_keys(&space);
    let at = super::super::testing::cells_at;
    let batch = |n: i64, second: u64, seq: u64| {
        let writes = vec![write("a", &at(second), &Value::Sum(n))];
        super::super::testing::batch_of(&space, writes, Some(seq))
    };
    let pending = || async {
        let got: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(keys.pending("a"))
            .arg("s")
            .arg("b")
            .query_async(&mut redis.handle())
            .await
            .unwrap();
        got
    };
    // The second write into a slice opens the pending slice, the third
    // goes into it.
    store.apply_batch(&batch(1, now - 1, 1)).await.unwrap();
    assert_eq!(pending().await, vec![None, None]);
    store.apply_batch(&batch(1, now - 1, 2)).await.unwrap();
    assert_eq!(
        pending().await,
        vec![Some((now - 1).to_string()), Some("0".into())]
    );
    let third = batch(3, now - 1, 3);
    let calls = store.apply_calls(keys, &third, Route::of(keys, &space)).unwrap();
    assert_eq!(calls[0].pending.len(), 1, "a's write is one pending entry");
    store.run_apply(&calls[0]).await.unwrap();
    assert_eq!(
        pending().await,
        vec![Some((now - 1).to_string()), Some("3".into())]
    );
    // The next second's write folds the 3 into both precisions.
    store.apply_batch(&batch(4, now, 4)).await.unwrap();
    store.run_revert(keys, &space, &calls[0]).await.unwrap();
    assert_eq!(
        super::super::testing::sums_of(&store, &space, "a").await,
        vec![
            vec![(now - 1, 2), (now, 4)],
            vec![((now - 1) / 60 * 60, 2), (now, 4)]
        ]
    );
    assert_eq!(pending().await, vec![Some(now.to_string()), Some("0".into())]);
}
