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
//! A write is one `daily_incr.lua` call for the whole batch (on a cluster
//! one per hash slot of its entities, sent concurrently), each entity's
//! views merged per day and its part atomic: the days' counts, with the
//! days older than the window folded into `before` in the same step (no
//! cleaner). A keyed write's call also checks and sets each entity's mark,
//! `{<prefix>:<id>}:applied:<writer hex>` ([`super::once`]). The aggregating
//! writer's calls ([`DailyStore::incr_lane`]) carry instead the record of
//! their writer lane, the last sequence number applied, as the engine's
//! writes do: `<prefix>:daily-writer:<writer hex>:<lane>`, or on a cluster
//! one per slot, `<prefix>:daily-writer:{<tag>}:<writer hex>:<lane>` with a
//! tag that hashes to that slot ([`slot_tag`]). Per entity the script runs
//! one HGETALL and one HSET and makes no table of its own: its sums are
//! plain Lua numbers while every value and sum stays below 2^53, two exact
//! limbs past it, and an earlier Tally's `:stats` total is read only when
//! one EXISTS of all the call's `:stats` keys finds one. Days are read with one
//! HMGET; the total with one `daily_total.lua` call summing the hash (at
//! most retention + 1 fields once Tally has written), exactly (64-bit,
//! whatever Lua's doubles can hold).
//!
//! With [`DailyTotal::Running`] (opt-in, for entities only Tally writes)
//! the batch goes to `daily_running.lua` instead, with the same keys,
//! arguments and answer: each entity's all-time total is a running `total`
//! in `{<prefix>:<id>}:stats`, raised by `HINCRBY`, so a write reads
//! nothing of the views hash (one `HINCRBY` of the total and one per day),
//! and only a write that makes a new day field, once the oldest day the
//! hash may hold (`:stats`'s `first`) left the window, drops the days
//! older than the window. Reads are the same for both totals (the rule for an earlier
//! Tally's `:stats` below), and each total's write converts the other's
//! data.
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
use super::{Redis, once};
use crate::clock::Timestamp;
use crate::daily::{
    DailyHeld, DailyStore, DailyTotal, DailyWrite, DailyWritten, Day, entity_id,
};
use crate::engine::{Applied, WriteSeq};
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
    /// A store on `redis` with entity keys under `prefix` (e.g. `advert`),
    /// keeping each entity's all-time total as `total` says: the views
    /// hash's sum (`daily_incr.lua`) or a running total beside it
    /// (`daily_running.lua`, same call and answer). Reads are the same
    /// for both, and each reads the other's data right.
    pub fn new(redis: Redis, prefix: &str, total: DailyTotal) -> Result<Self> {
        super::layout::check_prefix("entity prefix", prefix)?;
        Ok(RedisDailyStore {
            redis,
            prefix: prefix.to_owned(),
            incr: match total {
                DailyTotal::Hash => lua!("once", "daily_sum", "daily_call", "daily_incr", "daily_each"),
                DailyTotal::Running => lua!("once", "daily_sum", "daily_call", "daily_running", "daily_each"),
            },
            total: lua!("daily_sum", "daily_total"),
        })
    }

    /// `{<prefix>:<id>}`, the hash tag of an entity's keys.
    fn tag(&self, entity: &Name) -> String {
        format!("{{{}:{entity}}}", self.prefix)
    }

    /// `{<prefix>:<id>}:views`, the article's key.
    pub fn views_key(&self, entity: &Name) -> String {
        let mut key = String::new();
        self.push_key(&mut key, entity, "views");
        key
    }

    /// `{<prefix>:<id>}:stats`, where earlier Tally versions kept a running
    /// total (read, then migrated by the next write).
    pub fn stats_key(&self, entity: &Name) -> String {
        let mut key = String::new();
        self.push_key(&mut key, entity, "stats");
        key
    }

    /// Appends `{<prefix>:<id>}:<suffix>` (an entity's views or stats key)
    /// to `out`.
    fn push_key(&self, out: &mut String, entity: &Name, suffix: &str) {
        out.extend(["{", &self.prefix, ":", entity.as_str(), "}:", suffix]);
    }

    /// The key of a writer lane's record for the entities of `slot` (on a
    /// cluster: under a tag that hashes to that slot).
    fn lane_key(&self, seq: &WriteSeq, slot: Option<u16>) -> String {
        match slot {
            None => format!("{}:daily-writer:{}", self.prefix, seq.lane_id()),
            Some(slot) => format!(
                "{}:daily-writer:{{{}}}:{}",
                self.prefix,
                slot_tag(slot),
                seq.lane_id()
            ),
        }
    }

    /// Applies `writes` in one `daily_incr.lua` call per cluster slot (one
    /// call on a standalone server), each entity's part atomic, with the
    /// lane's record of each call or each entity's mark. Answers per
    /// entity group, in the order of `groups`.
    async fn apply(
        &self,
        floor: Day,
        groups: &[&Group<'_>],
        mark: Option<&Mark>,
        seq: Option<WriteSeq>,
    ) -> Result<Vec<Answer>> {
        let mut calls: Vec<(Option<u16>, Vec<usize>)> = Vec::new();
        if self.redis.is_cluster() {
            let mut by_slot: HashMap<u16, usize> = HashMap::new();
            for (g, group) in groups.iter().enumerate() {
                let slot = key_slot(self.tag(group.entity).as_bytes());
                let at = *by_slot.entry(slot).or_insert_with(|| {
                    calls.push((Some(slot), Vec::new()));
                    calls.len() - 1
                });
                calls[at].1.push(g);
            }
        } else {
            calls.push((None, (0..groups.len()).collect()));
        }
        let floor = floor.yyyymmdd();
        let answers = try_join_all(calls.iter().map(|(slot, members)| {
            async move {
                // The command is built in place: no string per argument.
                let per = if mark.is_some() { 3 } else { 2 };
                let mut eval =
                    super::evalsha(&self.incr, usize::from(seq.is_some()) + per * members.len());
                // KEYS: the lane's record, then every views key, then
                // every stats key, then every mark.
                if let Some(seq) = seq {
                    eval.arg(self.lane_key(&seq, *slot));
                }
                let mut key = String::new();
                for suffix in ["views", "stats"] {
                    for &g in members {
                        key.clear();
                        self.push_key(&mut key, groups[g].entity, suffix);
                        eval.arg(key.as_str());
                    }
                }
                if let Some(mark) = mark {
                    for &g in members {
                        eval.arg(once::key(&self.tag(groups[g].entity), mark));
                    }
                }
                match seq {
                    Some(seq) => eval.arg(1).arg(seq.seq),
                    None => eval.arg(0).arg(0),
                };
                eval.arg(u8::from(mark.is_some()))
                    .arg(floor)
                    .arg(members.len());
                for &g in members {
                    let group = &groups[g];
                    eval.arg(group.days.len()).arg(group.before);
                    for (day, count) in &group.days {
                        eval.arg(day.yyyymmdd()).arg(*count);
                    }
                }
                let value = self
                    .redis
                    .eval_cmd(&self.incr, &eval)
                    .await
                    .map_err(Error::from)?;
                let answer = parse_answer(self, value, members.iter().map(|&g| groups[g]))?;
                Ok::<_, Error>(members.iter().copied().zip(answer).collect::<Vec<_>>())
            }
        }))
        .await?;
        let mut out: Vec<Option<Answer>> = (0..groups.len()).map(|_| None).collect();
        for (g, answer) in answers.into_iter().flatten() {
            out[g] = Some(answer);
        }
        out.into_iter()
            .map(|a| a.ok_or_else(|| Error::Backend("daily_incr.lua skipped an entity".into())))
            .collect()
    }
}

/// One entity's part of a call: its days' views merged, the views dated
/// before the window, and what its total gains.
#[derive(Debug)]
struct Group<'a> {
    entity: &'a Name,
    /// The indices of its writes, in order.
    writes: Vec<usize>,
    /// Its days in the window, each once, with the views they gain.
    days: Vec<(Day, i64)>,
    before: i64,
    add: i64,
    /// Its views, saturating (for messages).
    views: i64,
    /// Set when the sums overflow already: refused before sending.
    overflow: Option<&'static str>,
}

/// Groups `writes` by entity (first-seen order), merging each entity's
/// views per day with checked sums.
fn plan_groups(writes: &[DailyWrite]) -> Vec<Group<'_>> {
    let mut groups: Vec<Group<'_>> = Vec::new();
    let mut index: HashMap<&Name, usize> = HashMap::new();
    for (i, w) in writes.iter().enumerate() {
        let g = *index.entry(&w.entity).or_insert_with(|| {
            groups.push(Group {
                entity: &w.entity,
                writes: Vec::new(),
                days: Vec::new(),
                before: 0,
                add: 0,
                views: 0,
                overflow: None,
            });
            groups.len() - 1
        });
        let group = &mut groups[g];
        group.writes.push(i);
        group.views = group.views.saturating_add(w.count);
        match group.add.checked_add(w.count) {
            Some(add) => group.add = add,
            None => group.overflow = group.overflow.or(Some("total")),
        }
        if w.day < w.floor {
            match group.before.checked_add(w.count) {
                Some(b) => group.before = b,
                None => group.overflow = group.overflow.or(Some("total")),
            }
        } else if let Some(d) = group.days.iter_mut().find(|(d, _)| *d == w.day) {
            match d.1.checked_add(w.count) {
                Some(c) => d.1 = c,
                None => group.overflow = group.overflow.or(Some("day")),
            }
        } else {
            group.days.push((w.day, w.count));
        }
    }
    groups
}

/// What the script answered for one entity.
#[derive(Debug)]
enum Answer {
    /// Its days' counts (in the group's order) and its total, after the
    /// write; `applied` says whether this call wrote them.
    Counts {
        days: Vec<i64>,
        total: i64,
        applied: Applied,
    },
    /// Refused, nothing written: the status (2 to 5) and its detail.
    Refused(i64, String),
}

fn parse_answer<'a>(
    store: &RedisDailyStore,
    value: redis::Value,
    groups: impl Iterator<Item = &'a Group<'a>>,
) -> Result<Vec<Answer>> {
    let flat: Vec<redis::Value> = redis::FromRedisValue::from_redis_value(value)?;
    let mut rest = flat.into_iter();
    let mut next = || {
        rest.next()
            .ok_or_else(|| Error::Backend("daily_incr.lua answered too little".into()))
    };
    let int = |v: redis::Value| -> Result<i64> { Ok(redis::FromRedisValue::from_redis_value(v)?) };
    let mut out = Vec::new();
    for group in groups {
        let status = int(next()?)?;
        match status {
            0 | 1 => {
                let days = (0..group.days.len())
                    .map(|_| int(next()?))
                    .collect::<Result<Vec<_>>>()?;
                let (hi, lo) = (int(next()?)?, int(next()?)?);
                let total = from_limbs(hi, lo, &store.views_key(group.entity))?;
                let applied = if status == 1 {
                    Applied::Written
                } else {
                    Applied::Duplicate
                };
                out.push(Answer::Counts {
                    days,
                    total,
                    applied,
                });
            }
            _ => {
                let detail: String = redis::FromRedisValue::from_redis_value(next()?)?;
                out.push(Answer::Refused(status, detail));
            }
        }
    }
    Ok(out)
}

/// The error of an entity refused, nothing written.
fn refusal(group: &Group<'_>, status: i64, detail: &str) -> Error {
    let what = match status {
        2 => "total",
        3 => "day",
        4 => "`before` (the views of days before the window)",
        _ => return Error::Corrupt(format!("{detail} is not an integer")),
    };
    Error::InvalidCount(format!(
        "adding {} views to entity {:?} would overflow its {what}; nothing was written",
        group.views,
        group.entity.as_str()
    ))
}

/// Each write's answer, as if the writes of an entity were applied one by
/// one: a write's counts are the final ones less what the entity's later
/// writes (of its day, for the day's count) added. A repeat answers the
/// stored counts for every write.
fn per_write(
    writes: &[DailyWrite],
    groups: &[Group<'_>],
    answers: Vec<Answer>,
) -> Vec<Result<DailyWritten>> {
    let mut out: Vec<Option<Result<DailyWritten>>> = (0..writes.len()).map(|_| None).collect();
    for (group, answer) in groups.iter().zip(answers) {
        match answer {
            Answer::Refused(status, detail) => {
                for &i in &group.writes {
                    out[i] = Some(Err(refusal(group, status, &detail)));
                }
            }
            Answer::Counts {
                days,
                total,
                applied,
            } => {
                let mut days: Vec<(Day, i64)> =
                    group.days.iter().map(|(d, _)| *d).zip(days).collect();
                let mut total = total;
                for &i in group.writes.iter().rev() {
                    let w = &writes[i];
                    let day = days.iter_mut().find(|(d, _)| *d == w.day && w.day >= w.floor);
                    out[i] = Some(Ok(DailyWritten {
                        day_count: day.as_ref().map_or(0, |(_, c)| *c),
                        total,
                        applied,
                    }));
                    if applied == Applied::Written {
                        total = total.saturating_sub(w.count);
                        if let Some((_, c)) = day {
                            *c = c.saturating_sub(w.count);
                        }
                    }
                }
            }
        }
    }
    out.into_iter()
        .map(|a| a.expect("every write is in a group"))
        .collect()
}

/// Applies `writes` (see [`RedisDailyStore::apply`]) and answers each:
/// an entity whose merged views overflow already is refused unsent.
async fn answer_all(
    store: &RedisDailyStore,
    writes: &[DailyWrite],
    mark: Option<&Mark>,
    seq: Option<WriteSeq>,
) -> Result<Vec<Result<DailyWritten>>> {
    let groups = plan_groups(writes);
    let Some(floor) = writes.iter().map(|w| w.floor).max() else {
        return Ok(Vec::new());
    };
    let sent: Vec<&Group<'_>> = groups.iter().filter(|g| g.overflow.is_none()).collect();
    let mut got = if sent.is_empty() {
        Vec::new()
    } else {
        store.apply(floor, &sent, mark, seq).await?
    }
    .into_iter();
    let answers = groups
        .iter()
        .map(|g| match g.overflow {
            Some("day") => Answer::Refused(3, String::new()),
            Some(_) => Answer::Refused(2, String::new()),
            None => got.next().expect("one answer per group sent"),
        })
        .collect();
    Ok(per_write(writes, &groups, answers))
}

#[async_trait]
impl DailyStore for RedisDailyStore {
    /// One `daily_incr.lua` call for the whole batch (one per cluster
    /// slot of its entities), each entity's writes merged per day; the
    /// first entity refused is the error (the others are written).
    async fn incr(&self, writes: &[DailyWrite], mark: Option<&Mark>) -> Result<Vec<DailyWritten>> {
        answer_all(self, writes, mark, None)
            .await?
            .into_iter()
            .collect()
    }

    /// As [`DailyStore::incr`], with the lane's record in each call
    /// instead of marks: one record per call, so per cluster slot.
    async fn incr_lane(
        &self,
        writes: &[DailyWrite],
        seq: WriteSeq,
        _now: Timestamp,
    ) -> Result<Vec<Result<DailyWritten>>> {
        answer_all(self, writes, None, Some(seq)).await
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

/// The cluster slot of `key`: CRC16 (XMODEM) of its hash tag (the part
/// between the first `{` and the next `}`, when not empty) or of the whole
/// key, mod 16,384, as Redis Cluster computes it.
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16::State::<crc16::XMODEM>::calculate(hashed) % SLOTS
}

/// The slots of a Redis Cluster.
const SLOTS: u16 = 16_384;

/// A short hash tag that lands in `slot`: the first decimal number that
/// does, from a table of all 16,384 made once (about 100,000 CRCs).
pub(crate) fn slot_tag(slot: u16) -> &'static str {
    static TAGS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        let mut tags = vec![String::new(); SLOTS as usize];
        let mut left = SLOTS as usize;
        let mut n: u64 = 0;
        while left > 0 {
            let tag = n.to_string();
            let s = key_slot(tag.as_bytes()) as usize;
            if tags[s].is_empty() {
                tags[s] = tag;
                left -= 1;
            }
            n += 1;
        }
        tags
    });
    &tags[slot as usize % SLOTS as usize]
}

#[cfg(test)]
mod tests {
    use super::{from_limbs, key_slot, slot_tag};

    #[test]
    fn slots_are_redis_cluster_slots_and_each_has_a_tag() {
        // Redis Cluster's specification: CRC16 of "123456789" is 0x31C3.
        assert_eq!(key_slot(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        for slot in [0, 1, 5_000, 16_383] {
            let tag = slot_tag(slot);
            assert_eq!(key_slot(format!("x:{{{tag}}}:y").as_bytes()), slot, "{tag}");
        }
    }

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
