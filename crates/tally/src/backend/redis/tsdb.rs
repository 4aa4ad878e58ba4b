//! The time-series store in Redis, in Sentry's layout, cluster-ready.
//!
//! Every key of a (model, virtual shard) shares the hash tag
//! `{<prefix>:ts:<model>:<vshard>}`, so one write per virtual shard is one
//! single-slot Lua call on a cluster:
//!
//! - `<tag>:c:<rollup>:<bucket>`: hash from key to count (Sentry's layout);
//! - `<tag>:d:<rollup>:<bucket>:<key>`: HyperLogLog of distinct values;
//! - `<tag>:f:<rollup>:<bucket>:<key>`: sorted set, a Space-Saving summary.
//!
//! Each write sets EXPIREAT = bucket start + rollup × samples in the same
//! call, so no key is ever without a TTL and nothing needs a cleaner. A
//! batch sends one call per (model, virtual shard) at once; a keyed batch's
//! calls each check and set their own mark, `<tag>:applied:<writer hex>`
//! ([`super::once`]), so each shard's part is merged once.
//!
//! A write may also carry a HyperLogLog's registers (a copy made by
//! `tally migrate`): Redis's own bytes, PFMERGEd through a scratch key of
//! the call's slot. Reads hand distinct values over as registers (GET) for
//! such a copy; the service's distinct reads count on the server. The
//! store keeps no registry: [`TsdbStore::list`] walks the keyspace with
//! SCAN ([`super::scan`]).
//!
//! A merge moves `from`'s data in three steps that never lose anything even
//! when `from` and `into` live on different nodes: (1) in `from`'s slot,
//! atomically move the data into a journal (`<from tag>:mj:<into>`, with
//! TTLs); (2) in `into`'s slot, add the journal's data once per merge id
//! (a marker key); (3) delete the journal. A crash between steps leaves the
//! journal, and the next merge of the same keys finishes it first. While a
//! merge is in flight, its data is in the journal: reads of either key may
//! miss it for that moment, but it is never lost or counted twice.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use futures::future::try_join_all;
use redis::{Script, Value};

use super::scan::glob_escape;
use super::{Redis, WriteFailure, once};
use crate::engine::kinds::top::{self, TopValue};
use crate::engine::kinds::{DistinctValue, Hll};
use crate::engine::{Applied, Kind, Value as Delta};
use crate::error::{Error, Result};
use crate::idempotency::Mark;
use crate::name::Name;
use crate::tsdb::precision::{self, Precision, vshard_of};
use crate::tsdb::store::{Cell, CellAdd, Held, Merge, Span, TsdbStore, Window, sort_held};

/// Keys deleted per call (each key's deletion stays atomic).
const DELETE_CHUNK: usize = 8;

/// The time-series store in Redis.
#[derive(Clone, Debug)]
pub struct RedisTsdbStore {
    redis: Redis,
    prefix: String,
    add: Script,
    union: Script,
    delete: Script,
    take: Script,
    give: Script,
    done: Script,
}

/// One Lua call's keys (deduplicated, 1-based indices) and arguments.
#[derive(Default)]
struct Call {
    keys: Vec<String>,
    index: HashMap<String, usize>,
    args: Vec<String>,
    /// Binary arguments standing in for `args[i]` (serialized HyperLogLogs).
    blobs_at: Vec<(usize, Vec<u8>)>,
}

impl Call {
    fn key(&mut self, key: String) -> usize {
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        self.keys.push(key.clone());
        self.index.insert(key, self.keys.len());
        self.keys.len()
    }
}

impl RedisTsdbStore {
    /// A store on `redis` with keys under `prefix`.
    pub fn new(redis: Redis, prefix: &str) -> Result<Self> {
        if prefix.is_empty() || prefix.contains(['{', '}']) {
            return Err(Error::Config(format!(
                "key prefix {prefix:?} must be non-empty and without braces"
            )));
        }
        Ok(RedisTsdbStore {
            redis,
            prefix: prefix.to_owned(),
            add: lua!("once", "kind_top", "ts_ops", "ts_add"),
            union: lua!("ts_union"),
            delete: lua!("ts_delete"),
            take: lua!("ts_merge_take"),
            give: lua!("kind_top", "ts_ops", "ts_merge_give"),
            done: lua!("ts_merge_done"),
        })
    }

    /// `{<prefix>:ts:<model>:<vshard>}`.
    pub fn tag(&self, model: &Name, key: &Name) -> String {
        format!("{{{}:ts:{model}:{}}}", self.prefix, vshard_of(key.as_str()))
    }

    fn count_key(tag: &str, rollup: u64, bucket: u64) -> String {
        format!("{tag}:c:{rollup}:{bucket}")
    }

    fn distinct_key(tag: &str, rollup: u64, bucket: u64, key: &Name) -> String {
        format!("{tag}:d:{rollup}:{bucket}:{key}")
    }

    fn freq_key(tag: &str, rollup: u64, bucket: u64, key: &Name) -> String {
        format!("{tag}:f:{rollup}:{bucket}:{key}")
    }

    /// Groups items by the tag of their (model, key).
    fn by_tag<'a, T>(
        &self,
        items: &'a [T],
        cell: impl Fn(&T) -> &Cell,
    ) -> BTreeMap<String, Vec<&'a T>> {
        let mut groups: BTreeMap<String, Vec<&T>> = BTreeMap::new();
        for item in items {
            let c = cell(item);
            groups
                .entry(self.tag(&c.model, &c.key))
                .or_default()
                .push(item);
        }
        groups
    }

    /// Groups key indices by tag.
    fn keys_by_tag(&self, model: &Name, keys: &[Name]) -> BTreeMap<String, Vec<usize>> {
        let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, key) in keys.iter().enumerate() {
            groups.entry(self.tag(model, key)).or_default().push(i);
        }
        groups
    }

    /// One pipeline per virtual shard of `w`'s keys, filled by `build(pipe,
    /// tag, members)` (`members`: indices into `w.keys`), sent at once (one
    /// round trip per node); each shard's members with its answers.
    async fn pipelined(
        &self,
        w: &Window,
        build: impl Fn(&mut redis::Pipeline, &str, &[usize]),
    ) -> Result<Vec<(Vec<usize>, Vec<Value>)>> {
        let groups = self.keys_by_tag(&w.model, &w.keys);
        let pipes = groups
            .iter()
            .map(|(tag, members)| {
                let mut pipe = redis::pipe();
                build(&mut pipe, tag, members);
                pipe
            })
            .collect();
        let values = self.redis.run_pipelines(pipes).await?;
        Ok(groups.into_values().zip(values).collect())
    }

    /// Runs `script` with `call`'s keys and arguments (its blobs standing
    /// in for their arguments, binary-safe).
    async fn run(&self, script: &Script, call: &Call) -> std::result::Result<Value, WriteFailure> {
        if call.blobs_at.is_empty() {
            return self.redis.eval_write(script, &call.keys, &call.args).await;
        }
        let mut args: Vec<Vec<u8>> = call.args.iter().map(|a| a.as_bytes().to_vec()).collect();
        for (i, blob) in &call.blobs_at {
            args[*i] = blob.clone();
        }
        self.redis.eval_write(script, &call.keys, &args).await
    }

    async fn run_give(&self, call: &Call) -> Result<()> {
        match self.run(&self.give, call).await {
            Ok(_) => Ok(()),
            Err(WriteFailure::Redis(e)) if e.code() == Some("TALLY_OVERFLOW") => {
                Err(Error::InvalidCount(
                    "merging would overflow a count of the target key; the merge is kept in its \
                     journal, nothing was lost"
                        .into(),
                ))
            }
            Err(e) => Err(e.into()),
        }
    }
}

fn int(v: &Value) -> Result<i64> {
    match v {
        Value::Nil => Ok(0),
        Value::Int(n) => Ok(*n),
        other => {
            let s: String = redis::FromRedisValue::from_redis_value(other.clone())?;
            s.parse()
                .map_err(|_| Error::Corrupt(format!("expected an integer, found {s:?}")))
        }
    }
}

/// Appends the op of `ts_ops.lua` that merges `a` (its key added to
/// `call`).
fn push_op(call: &mut Call, tag: &str, a: &CellAdd) -> Result<()> {
    let c = &a.cell;
    let expires = c.expires.to_string();
    match &a.delta {
        Delta::Sum(delta) => {
            let k = call.key(RedisTsdbStore::count_key(tag, c.rollup, c.bucket));
            call.args.extend([
                Kind::Sum.code().to_string(),
                k.to_string(),
                expires,
                c.key.to_string(),
                delta.to_string(),
            ]);
        }
        Delta::Distinct(d) => {
            let k = call.key(RedisTsdbStore::distinct_key(
                tag, c.rollup, c.bucket, &c.key,
            ));
            let DistinctValue::Values(values) = &**d else {
                // Registers (a copy from another store): Redis's own
                // HyperLogLog bytes, PFMERGEd through the scratch key.
                call.args.extend(["2h".into(), k.to_string(), expires]);
                call.args.push(String::new());
                call.blobs_at.push((call.args.len() - 1, d.redis_bytes()));
                return Ok(());
            };
            call.args.extend([
                Kind::Distinct.code().to_string(),
                k.to_string(),
                expires,
                values.len().to_string(),
            ]);
            call.args.extend(values.iter().cloned());
        }
        Delta::Top(t) => {
            let k = call.key(RedisTsdbStore::freq_key(tag, c.rollup, c.bucket, &c.key));
            call.args.extend([
                Kind::Top.code().to_string(),
                k.to_string(),
                expires,
                t.len().to_string(),
            ]);
            // Lowest counts first, as `TopValue::fold` replays them.
            for (item, count) in top::ascending(t.items().map(|(k, v)| (k.to_owned(), v))) {
                call.args.push(item);
                call.args.push(count.to_string());
            }
        }
        other => {
            return Err(Error::Backend(format!(
                "internal error: the time-series store keeps no {} values",
                other.kind()
            )));
        }
    }
    Ok(())
}

fn score_pairs(v: Value) -> Result<Vec<(String, i64)>> {
    let pairs: Vec<(String, f64)> = redis::FromRedisValue::from_redis_value(v)?;
    Ok(pairs.into_iter().map(|(k, s)| (k, s as i64)).collect())
}

#[async_trait]
impl TsdbStore for RedisTsdbStore {
    async fn add(&self, adds: &[CellAdd], capacity: usize, mark: Option<&Mark>) -> Result<Applied> {
        let calls: Vec<(Call, Vec<&CellAdd>)> = self
            .by_tag(adds, |a| &a.cell)
            .into_iter()
            .map(|(tag, mut group)| {
                // Sums first: an overflow is refused before anything that
                // cannot be taken back was written.
                group.sort_by_key(|a| a.delta.kind() != Kind::Sum);
                let mut call = Call::default();
                call.args.push(capacity.to_string());
                let marked = mark.map_or(0, |m| call.key(once::key(&tag, m)));
                call.args.push(marked.to_string());
                let registers = group.iter().any(|a| {
                    matches!(&a.delta, Delta::Distinct(d) if matches!(**d, DistinctValue::Registers(_)))
                });
                let scratch = if registers {
                    call.key(format!("{tag}:mtmp"))
                } else {
                    0
                };
                call.args.push(scratch.to_string());
                for a in &group {
                    push_op(&mut call, &tag, a)?;
                }
                Ok((call, group))
            })
            .collect::<Result<_>>()?;
        let applied = try_join_all(calls.iter().map(|(call, group)| async move {
            match self.run(&self.add, call).await {
                Ok(v) => Ok(int(&v)? == 1),
                Err(WriteFailure::Redis(e)) if e.code() == Some("TALLY_OVERFLOW") => {
                    let op = e
                        .detail()
                        .and_then(|d| d.trim().parse::<usize>().ok())
                        .and_then(|i| group.get(i));
                    Err(Error::InvalidCount(match op {
                        Some(a) => format!(
                            "adding {} to {}:{} in the {} s bucket at {} would overflow; nothing \
                             was written for its shard",
                            a.delta.as_sum().unwrap_or(0),
                            a.cell.model,
                            a.cell.key,
                            a.cell.rollup,
                            a.cell.bucket
                        ),
                        None => "a count would overflow; nothing was written for its shard".into(),
                    }))
                }
                Err(e) => Err(e.into()),
            }
        }))
        .await?;
        Ok(if applied.contains(&true) {
            Applied::Written
        } else {
            Applied::Duplicate
        })
    }

    /// Sums: one HMGET per bucket for every key of a virtual shard; item
    /// counts: one ZRANGE per (key, bucket); distinct values: one GET per
    /// (key, bucket), the HyperLogLog's registers (up to 12 KiB each: what
    /// a copy needs; the service's distinct reads count on the server
    /// instead, with [`TsdbStore::distinct_counts`] and the others below).
    async fn read(&self, kind: Kind, w: &Window) -> Result<Vec<Vec<Delta>>> {
        if !matches!(kind, Kind::Sum | Kind::Top | Kind::Distinct) {
            return Err(Error::Backend(format!(
                "internal error: the Redis time-series store does not read {kind} values"
            )));
        }
        let answers = self
            .pipelined(w, |pipe, tag, members| match kind {
                Kind::Sum => {
                    for &b in &w.buckets {
                        let mut cmd = redis::cmd("HMGET");
                        cmd.arg(Self::count_key(tag, w.rollup, b));
                        for &i in members {
                            cmd.arg(w.keys[i].as_str());
                        }
                        pipe.add_command(cmd);
                    }
                }
                Kind::Distinct => {
                    for &i in members {
                        for &b in &w.buckets {
                            pipe.cmd("GET")
                                .arg(Self::distinct_key(tag, w.rollup, b, &w.keys[i]));
                        }
                    }
                }
                _ => {
                    for &i in members {
                        for &b in &w.buckets {
                            pipe.cmd("ZRANGE")
                                .arg(Self::freq_key(tag, w.rollup, b, &w.keys[i]))
                                .arg(0)
                                .arg(-1)
                                .arg("WITHSCORES");
                        }
                    }
                }
            })
            .await?;
        let mut out = vec![vec![kind.identity(); w.buckets.len()]; w.keys.len()];
        for (members, answers) in answers {
            if kind == Kind::Sum {
                for (b, v) in answers.into_iter().enumerate() {
                    let Value::Array(items) = v else {
                        return Err(Error::Corrupt(format!("HMGET answered {v:?}")));
                    };
                    for (&i, item) in members.iter().zip(&items) {
                        out[i][b] = Delta::Sum(int(item)?);
                    }
                }
                continue;
            }
            let mut summaries = answers.into_iter();
            if kind == Kind::Distinct {
                for &i in &members {
                    for slot in out[i].iter_mut() {
                        if let Some(Value::BulkString(bytes)) = summaries.next() {
                            let hll = Hll::from_redis(&bytes)?;
                            *slot =
                                Delta::Distinct(Box::new(DistinctValue::Registers(Box::new(hll))));
                        }
                    }
                }
                continue;
            }
            for &i in &members {
                for slot in out[i].iter_mut() {
                    let pairs = score_pairs(summaries.next().unwrap_or(Value::Nil))?;
                    let top = TopValue::from_counts(pairs.iter().map(|(k, c)| (k.as_str(), *c)))
                        .map_err(|e| Error::Corrupt(format!("a stored summary: {e}")))?;
                    *slot = Delta::Top(Box::new(top));
                }
            }
        }
        Ok(out)
    }

    // Distinct reads keep their own path: PFCOUNT answers a bucket's (or a
    // union's) estimate as one integer, where reading the HyperLogLogs
    // would move up to 12 KiB per bucket.
    async fn distinct_counts(&self, w: &Window) -> Result<Vec<Vec<u64>>> {
        let answers = self
            .pipelined(w, |pipe, tag, members| {
                for &i in members {
                    for &b in &w.buckets {
                        pipe.cmd("PFCOUNT")
                            .arg(Self::distinct_key(tag, w.rollup, b, &w.keys[i]));
                    }
                }
            })
            .await?;
        let mut out = vec![Vec::new(); w.keys.len()];
        for (members, counts) in answers {
            let mut counts = counts.iter();
            for i in members {
                out[i] = w
                    .buckets
                    .iter()
                    .map(|_| counts.next().map_or(Ok(0), int).map(|n| n as u64))
                    .collect::<Result<_>>()?;
            }
        }
        Ok(out)
    }

    async fn distinct_totals(&self, w: &Window) -> Result<Vec<u64>> {
        let answers = self
            .pipelined(w, |pipe, tag, members| {
                for &i in members {
                    let mut cmd = redis::cmd("PFCOUNT");
                    for &b in &w.buckets {
                        cmd.arg(Self::distinct_key(tag, w.rollup, b, &w.keys[i]));
                    }
                    pipe.add_command(cmd);
                }
            })
            .await?;
        let mut out = vec![0u64; w.keys.len()];
        for (members, counts) in answers {
            for (i, v) in members.into_iter().zip(&counts) {
                out[i] = int(v)? as u64;
            }
        }
        Ok(out)
    }

    async fn distinct_union(&self, w: &Window) -> Result<u64> {
        let (model, keys, rollup, buckets) = (&w.model, &w.keys, w.rollup, &w.buckets);
        let groups = self.keys_by_tag(model, keys);
        let union_call = |tag: &str, members: &[usize], mode: &str, blobs: Vec<Vec<u8>>| {
            let mut call = Call::default();
            call.key(format!("{tag}:tmp:acc"));
            call.key(format!("{tag}:tmp:one"));
            for &i in members {
                for &b in buckets {
                    call.key(Self::distinct_key(tag, rollup, b, &keys[i]));
                }
            }
            call.args.push(mode.to_owned());
            (call, blobs)
        };
        if groups.len() == 1 {
            let (tag, members) = groups.iter().next().expect("one group");
            let (call, _) = union_call(tag, members, "count", Vec::new());
            return Ok(int(&self.run(&self.union, &call).await?)? as u64);
        }
        // One partial union per slot, then the union of those in one slot.
        let partials = try_join_all(groups.iter().map(|(tag, members)| {
            let (call, _) = union_call(tag, members, "dump", Vec::new());
            async move { self.run(&self.union, &call).await }
        }))
        .await?;
        let blobs: Vec<Vec<u8>> = partials
            .into_iter()
            .map(|v| redis::FromRedisValue::from_redis_value(v).map_err(Error::from))
            .collect::<Result<_>>()?;
        let tag = format!("{{{}:ts:union}}", self.prefix);
        let mut invocation = self.union.prepare_invoke();
        invocation
            .key(format!("{tag}:acc"))
            .key(format!("{tag}:one"))
            .arg("count");
        for blob in &blobs {
            invocation.arg(blob.as_slice());
        }
        let n: i64 = invocation.invoke_async(&mut self.redis.handle()).await?;
        Ok(n as u64)
    }

    async fn merge(&self, job: &Merge) -> Result<()> {
        let (model, into, from) = (&job.model, &job.into, &job.from);
        let (spans, capacity) = (&job.spans, job.capacity);
        let from_tag = self.tag(model, from);
        let into_tag = self.tag(model, into);
        let journal = format!("{from_tag}:mj:{into}");
        let entries: Vec<(Precision, u64)> = spans
            .iter()
            .flat_map(|s| s.buckets.iter().map(move |&b| (s.precision, b)))
            .collect();
        let expiry: HashMap<String, (Precision, u64)> = entries
            .iter()
            .map(|&(r, b)| (format!("{}:{b}", r.seconds), (r, b)))
            .collect();
        let journal_expire = entries
            .iter()
            .map(|&(r, b)| precision::expires(r, b))
            .max()
            .unwrap_or(0);
        let j_key = |kind: &str, label: &str| format!("{journal}:{kind}:{label}");
        loop {
            // Step 1: move `from`'s data into the journal (or find one).
            let mut take = Call::default();
            take.key(journal.clone());
            let id = format!("{:032x}", rand::random::<u128>());
            take.args
                .extend([from.to_string(), id, journal_expire.to_string()]);
            for &(r, b) in &entries {
                let label = format!("{}:{b}", r.seconds);
                take.keys.extend([
                    Self::count_key(&from_tag, r.seconds, b),
                    Self::distinct_key(&from_tag, r.seconds, b, from),
                    Self::freq_key(&from_tag, r.seconds, b, from),
                    j_key("d", &label),
                    j_key("f", &label),
                ]);
                take.args.push(label);
            }
            let taken = self.run(&self.take, &take).await?;
            let (state, id): (i64, String) = redis::FromRedisValue::from_redis_value(taken)?;
            if state == 2 {
                return Ok(());
            }
            // Step 2: read the journal and add it to `into`, once per id.
            let fields: HashMap<String, String> = redis::cmd("HGETALL")
                .arg(&journal)
                .query_async(&mut self.redis.handle())
                .await?;
            if fields.get("id") != Some(&id) {
                // Another merge finished (or replaced) it meanwhile.
                if state == 1 {
                    return Ok(());
                }
                continue;
            }
            let mut labels: Vec<(&str, &str)> = fields
                .keys()
                .filter_map(|f| f.split_once(':'))
                .filter(|(kind, _)| ["c", "d", "f"].contains(kind))
                .collect();
            labels.sort_unstable();
            let mut pipe = redis::pipe();
            for &(kind, label) in &labels {
                match kind {
                    "d" => pipe.cmd("GET").arg(j_key("d", label)),
                    "f" => pipe
                        .cmd("ZRANGE")
                        .arg(j_key("f", label))
                        .arg(0)
                        .arg(-1)
                        .arg("WITHSCORES"),
                    _ => pipe.cmd("HGET").arg(&journal).arg(format!("c:{label}")),
                };
            }
            let read = self.redis.run_pipeline(pipe).await?;
            let mut give = Call::default();
            give.key(format!("{into_tag}:mm:{id}"));
            give.key(format!("{into_tag}:mtmp"));
            give.args
                .extend([capacity.to_string(), journal_expire.to_string()]);
            // Counts first, so an overflow is refused before anything else.
            let mut order: Vec<usize> = (0..labels.len()).collect();
            order.sort_by_key(|&i| labels[i].0 != "c");
            for i in order {
                let (kind, label) = labels[i];
                let Some(&(r, b)) = expiry.get(label) else {
                    continue; // a bucket that has expired since
                };
                let delta = match kind {
                    "c" => Delta::Sum(int(&read[i])?),
                    "d" => {
                        let Value::BulkString(blob) = &read[i] else {
                            continue; // expired since
                        };
                        // Redis's own HyperLogLog bytes, as they are
                        // (binary-safe), PFMERGEd in `into`'s slot.
                        let k = give.key(Self::distinct_key(&into_tag, r.seconds, b, into));
                        give.args.extend([
                            "2h".into(),
                            k.to_string(),
                            precision::expires(r, b).to_string(),
                        ]);
                        give.args.push(String::new());
                        give.blobs_at.push((give.args.len() - 1, blob.clone()));
                        continue;
                    }
                    _ => {
                        let pairs = score_pairs(read[i].clone())?;
                        let top =
                            TopValue::from_counts(pairs.iter().map(|(k, c)| (k.as_str(), *c)))
                                .map_err(|e| Error::Corrupt(format!("a journaled summary: {e}")))?;
                        Delta::Top(Box::new(top))
                    }
                };
                let cell = Cell {
                    model: model.clone(),
                    key: into.clone(),
                    rollup: r.seconds,
                    bucket: b,
                    expires: precision::expires(r, b),
                };
                push_op(&mut give, &into_tag, &CellAdd { cell, delta })?;
            }
            self.run_give(&give).await?;
            // Step 3: drop the journal.
            let mut done = Call::default();
            done.key(journal.clone());
            for &(kind, label) in &labels {
                if kind != "c" {
                    done.key(j_key(kind, label));
                }
            }
            done.args.push(id);
            self.run(&self.done, &done).await?;
            if state == 1 {
                return Ok(());
            }
        }
    }

    async fn delete(&self, model: &Name, keys: &[Name], spans: &[Span]) -> Result<()> {
        let groups = self.keys_by_tag(model, keys);
        let mut calls = Vec::new();
        for (tag, members) in &groups {
            for chunk in members.chunks(DELETE_CHUNK) {
                let mut call = Call::default();
                for s in spans {
                    for &b in &s.buckets {
                        call.key(Self::count_key(tag, s.precision.seconds, b));
                    }
                }
                let nc = call.keys.len();
                for &i in chunk {
                    for s in spans {
                        for &b in &s.buckets {
                            call.key(Self::distinct_key(tag, s.precision.seconds, b, &keys[i]));
                            call.key(Self::freq_key(tag, s.precision.seconds, b, &keys[i]));
                        }
                    }
                }
                call.args.push(nc.to_string());
                call.args.extend(chunk.iter().map(|&i| keys[i].to_string()));
                calls.push(call);
            }
        }
        try_join_all(calls.iter().map(|call| self.run(&self.delete, call))).await?;
        Ok(())
    }

    /// SCAN of `{<prefix>:ts:*` (every master of a cluster); a HyperLogLog
    /// or summary key names its key, a count hash's keys are its fields
    /// (HKEYS, pipelined per virtual shard, `LIST_CHUNK` shards a round).
    /// Keys of merges in flight and marks are not data and are skipped.
    async fn list(&self, _now: u64) -> Result<Vec<Held>> {
        let pattern = format!("{{{}:ts:*", glob_escape(&self.prefix));
        let mut held = Vec::new();
        let mut hashes: BTreeMap<String, Vec<(Name, u64, String)>> = BTreeMap::new();
        for found in self.redis.scan(&pattern).await? {
            let Some(parsed) = self.parse_key(&found) else {
                continue;
            };
            match parsed {
                (tag, model, Kind::Sum, rollup, None) => {
                    hashes.entry(tag).or_default().push((model, rollup, found));
                }
                (_, model, kind, rollup, Some(key)) => held.push(Held {
                    model,
                    key,
                    rollup,
                    kind,
                }),
                _ => {}
            }
        }
        let groups: Vec<(String, Vec<(Name, u64, String)>)> = hashes.into_iter().collect();
        for chunk in groups.chunks(LIST_CHUNK) {
            let pipes = chunk
                .iter()
                .map(|(_, members)| {
                    let mut pipe = redis::pipe();
                    for (_, _, hash) in members {
                        pipe.cmd("HKEYS").arg(hash);
                    }
                    pipe
                })
                .collect();
            let answers = self.redis.run_pipelines(pipes).await?;
            for ((_, members), answers) in chunk.iter().zip(answers) {
                for ((model, rollup, _), fields) in members.iter().zip(answers) {
                    let fields: Vec<String> = redis::FromRedisValue::from_redis_value(fields)?;
                    held.extend(fields.into_iter().filter_map(|f| {
                        Some(Held {
                            model: model.clone(),
                            key: Name::new(f).ok()?,
                            rollup: *rollup,
                            kind: Kind::Sum,
                        })
                    }));
                }
            }
        }
        sort_held(&mut held);
        Ok(held)
    }

    async fn ping(&self) -> Result<()> {
        self.redis.ping().await
    }
}

/// Virtual shards whose count hashes one round of a listing reads.
const LIST_CHUNK: usize = 64;

impl RedisTsdbStore {
    /// A data key's tag, model, kind, rollup and key (`None` for a count
    /// hash, whose keys are its fields); `None` for a key that holds no
    /// data (a mark, a merge's journal or scratch) or is not this store's.
    fn parse_key(&self, found: &str) -> Option<(String, Name, Kind, u64, Option<Name>)> {
        let inner = found.strip_prefix(&format!("{{{}:ts:", self.prefix))?;
        let (tagged, rest) = inner.split_once("}:")?;
        let (model, _vshard) = tagged.rsplit_once(':')?;
        let model = Name::new(model).ok()?;
        let mut parts = rest.splitn(4, ':');
        let kind = match parts.next()? {
            "c" => Kind::Sum,
            "d" => Kind::Distinct,
            "f" => Kind::Top,
            _ => return None,
        };
        let rollup: u64 = parts.next()?.parse().ok()?;
        let _bucket: u64 = parts.next()?.parse().ok()?;
        let key = match (kind, parts.next()) {
            (Kind::Sum, None) => None,
            (Kind::Sum, Some(_)) | (_, None) => return None,
            (_, Some(key)) => Some(Name::new(key).ok()?),
        };
        let tag = format!("{{{}:ts:{tagged}}}", self.prefix);
        Some((tag, model, kind, rollup, key))
    }
}
