//! Cleaning: each registry walked in batches, one ZRANGEBYLEX and one
//! `engine_clean.lua` call per batch (after one pipeline of DUMP on a pass
//! that knows no earlier visit); the expiring layout has nothing to clean.

use futures::StreamExt;
use redis::Script;

use super::super::Redis;
use super::super::layout::{self, SpaceKeys};
use super::RedisSliceStore;
use super::kinds;
use super::keys::Cleaning;
use super::list::lex_bounds;
use super::list::zrangebylex;
use super::old_fields::at_or_before;
use crate::engine::{CleanJob, CleanReport, Due, Precision, Space};
use crate::error::{Error, Result};
use crate::name::Name;

/// Registry shards cleaned at the same time.
const CLEAN_CONCURRENCY: usize = 4;

impl RedisSliceStore {
    pub(super) async fn clean_space(&self, space: &Space, job: &CleanJob) -> Result<CleanReport> {
        let keys = self.layout.space_keys(space);
        match keys.cleaning() {
            // Redis's expiry does the cleaning: a pass has nothing to do.
            Cleaning::Nothing => return Ok(CleanReport::default()),
            Cleaning::Book => return self.clean_ria(job).await,
            Cleaning::Shards => {}
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

    /// One `engine_clean.lua` call over `entries`; `shared` holds what is
    /// due at each hash position when every entry has the same (the default
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
        let mut cmd = super::super::evalsha(&self.clean, nkeys);
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
                None | Some(Trim::Upto(_) | Trim::Within(..)) => None,
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
                Trim::Upto(_) | Trim::Within(..) => unreachable!("not a window"),
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

    /// Walks one registry in batches of `job.batch` members: one ZRANGEBYLEX
    /// and (when `entries` finds work) one clean call per batch. When a hash
    /// is due up to a cutoff, the batch's fields are read first
    /// ([`RedisSliceStore::read_old`]), and the old fields of entries that
    /// keep one go by one pipeline of HDEL instead of through the script,
    /// or a hash losing many is written back whole
    /// ([`RedisSliceStore::trim_old`]).
    async fn clean_registry(
        &self,
        registry: &str,
        job: &CleanJob,
        book_rule: bool,
        shared: Option<&[Option<Trim>]>,
        pending: Option<(SpaceKeys<'_>, &[Precision], &Script)>,
        entries: impl Fn(&[String]) -> Vec<CleanEntry>,
    ) -> Result<CleanReport> {
        let reading = |t: &Option<Trim>| matches!(t, Some(Trim::Upto(_) | Trim::Within(..)));
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
            if let Some((keys, precisions, fold)) = pending {
                self.fold_pending(fold, keys, precisions, &work).await?;
                report.round_trips += 1;
            }
            if work
                .iter()
                .any(|e| e.hashes.iter().any(|(_, t)| reading(t)))
            {
                // Only a first pass reads under a WATCH (a later full pass
                // takes a few fields a hash, under any rewrite's floor);
                // its rewrites go first: an HDEL of a watched hash would
                // fail its group's EXEC.
                let old = self.trim_old(work, book_rule, job.pass == 0).await?;
                report.round_trips += old.round_trips;
                report.samples_removed += old.rewritten;
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

    /// Folds the pending slices of `entries` into their precisions' slices
    /// (`fold`: the kind's `engine_fold.lua`), before they are trimmed.
    async fn fold_pending(
        &self,
        fold: &Script,
        keys: SpaceKeys<'_>,
        precisions: &[Precision],
        entries: &[CleanEntry],
    ) -> Result<()> {
        // Which entries have a pending slice. A busy counter's pending
        // slice is rare at a pass, so first one EXISTS of all of them (the
        // batch shares its registry's shard, so its keys share a slot):
        // nothing to fold when it answers 0. Else one EXISTS each,
        // pipelined (the fold script's keys cost more than the question).
        let pending: Vec<String> = entries.iter().map(|e| keys.pending(&e.member)).collect();
        if pending.is_empty() {
            return Ok(());
        }
        let any: u64 = redis::cmd("EXISTS")
            .arg(&pending)
            .query_async(&mut self.redis.handle())
            .await?;
        if any == 0 {
            return Ok(());
        }
        let mut ask = redis::pipe();
        for key in &pending {
            ask.exists(key);
        }
        let held = self.redis.run_pipeline(ask).await?;
        let held: Vec<&CleanEntry> = entries
            .iter()
            .zip(held)
            .filter(|(_, exists)| matches!(exists, redis::Value::Int(1)))
            .map(|(e, _)| e)
            .collect();
        let Some(first) = held.first() else {
            return Ok(());
        };
        // Each entry's hashes: one per precision, then its pending slice.
        let n = precisions.len();
        debug_assert_eq!(first.hashes.len(), n + 1);
        let mut cmd = super::super::evalsha(fold, held.len() * (n + 1));
        for entry in held {
            cmd.arg(keys.pending(&entry.member));
            for (key, _) in &entry.hashes[..n] {
                cmd.arg(key.as_str());
            }
        }
        cmd.arg(n);
        for p in precisions {
            cmd.arg(p.seconds);
        }
        self.redis
            .eval_cmd(fold, &cmd)
            .await
            .map_err(Error::from)?;
        Ok(())
    }

    /// Cleans one registry shard of the default or compact layout. The
    /// compact layout's one hash per series stands at every precision's
    /// position, each with that precision's fields.
    async fn clean_shard(
        &self,
        keys: SpaceKeys<'_>,
        shard: u32,
        space: &Space,
        job: &CleanJob,
    ) -> Result<CleanReport> {
        let mut cutoffs: Vec<Option<Trim>> = space
            .precisions
            .iter()
            .map(|r| keys.trim_at(r.seconds, job.due_of(r).map(Trim::from)))
            .collect();
        let registry = keys.registry(shard);
        let fold = self.fold[kinds::index(space.kind)?].as_ref();
        let pending = fold
            .filter(|_| keys.folds(space.kind))
            .map(|fold| (keys, space.precisions.as_slice(), fold));
        // A series' pending slice is one more hash of its entry, with
        // nothing due: the entry is dropped only while it does not exist
        // either (a write may make one between the fold and the trim).
        if pending.is_some() {
            cutoffs.push(None);
        }
        self.clean_registry(&registry, job, false, Some(&cutoffs), pending, |names| {
            names
                .iter()
                .filter_map(|n| Name::new(n.as_str()).ok())
                .map(|name| {
                    let mut hashes: Vec<(String, Option<Trim>)> = space
                        .precisions
                        .iter()
                        .zip(&cutoffs)
                        .map(|(r, c)| (keys.hash(r.seconds, name.as_str()), c.clone()))
                        .collect();
                    if pending.is_some() {
                        hashes.push((keys.pending(name.as_str()), None));
                    }
                    CleanEntry {
                        hashes,
                        member: name.into_string(),
                    }
                })
                .collect()
        })
        .await
    }

    /// Cleans the book's `known:`, with the book's rules: each member's
    /// precision comes from the member itself.
    async fn clean_ria(&self, job: &CleanJob) -> Result<CleanReport> {
        self.clean_registry(layout::RIA_KNOWN, job, true, None, None, |members| {
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
}

/// One registry member to clean and its hashes, each with what is due
/// (`None` when nothing is due in this pass).
pub(super) struct CleanEntry {
    pub(super) member: String,
    pub(super) hashes: Vec<(String, Option<Trim>)>,
}

/// What a clean call removes from one hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Trim {
    /// Every field at or before this cutoff: the client reads the fields
    /// first ([`RedisSliceStore::read_old`]) and sends [`Trim::Fields`].
    Upto(i64),
    /// Exactly these slices, by name (each may be absent).
    Slices(Vec<u64>),
    /// Exactly these fields, as read from the hash.
    Fields(Vec<Vec<u8>>),
    /// Every integer field from the first to the second (the compact
    /// layout's one precision, up to a cutoff): read first, as `Upto`.
    Within(u64, u64),
}

/// Which fields read from a hash are old ([`Trim::old_field`]).
pub(super) enum OldField {
    /// Plain decimal fields at or before this cutoff's text
    /// ([`super::old_fields::at_or_before`]).
    Upto(String),
    /// Fields whose decimal value is within these bounds (the compact
    /// layout's fields of one precision).
    Within(u64, u64),
}

impl OldField {
    /// Whether `field` is old; `number` is its value when it is a plain
    /// decimal number of at most 64 bits (as a listpack stores it, read once
    /// per field however many precisions test it).
    pub(super) fn is_old(&self, field: &[u8], number: Option<u64>) -> bool {
        match self {
            OldField::Upto(cut) => at_or_before(field, cut.as_bytes()),
            OldField::Within(first, last) => number.is_some_and(|n| (*first..=*last).contains(&n)),
        }
    }
}

impl Trim {
    /// What is due at `precision` as the compact layout's fields (`None`
    /// when nothing is).
    pub(super) fn compact(self, precision: u64) -> Option<Trim> {
        match self {
            Trim::Upto(cut) if cut < 0 => None,
            Trim::Upto(cut) => {
                let first = layout::compact_field(precision, 0).ok()?;
                let index = (cut as u64 / precision).min(0xffff_ffff);
                Some(Trim::Within(first, first | index))
            }
            Trim::Slices(slices) => Some(Trim::Slices(
                slices
                    .into_iter()
                    .filter_map(|s| layout::compact_field(precision, s).ok())
                    .collect(),
            )),
            other => Some(other),
        }
    }

    /// Whether a field read from a hash is old by this trim, for those read
    /// first (`Upto` with a cutoff of 0 or more, `Within`).
    pub(super) fn old_field(&self) -> Option<OldField> {
        match *self {
            Trim::Upto(cut) if cut >= 0 => Some(OldField::Upto(cut.to_string())),
            Trim::Within(first, last) => Some(OldField::Within(first, last)),
            _ => None,
        }
    }
}

impl From<Due> for Trim {
    fn from(due: Due) -> Self {
        match due {
            Due::Upto(cut) => Trim::Upto(cut),
            Due::Slices(slices) => Trim::Slices(slices),
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

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::engine::SliceStore;
    use crate::engine::store::FULL_PASS_EVERY;

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
            let old = store.read_old(entries, book_rule, false).await.unwrap();
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
            let work = store.read_old(entries, book_rule, false).await.unwrap().scripted;
            let removed = store
                .clean_entries(&registry, &work, book_rule, None)
                .await
                .unwrap();
            assert_eq!(removed, (1, 1), "book rule: {book_rule}");
        }
    }

    /// Only a cleaner's first pass reads under a `WATCH` and writes a hash
    /// losing many fields back; the periodic full pass, which also knows no
    /// earlier visit, reads plainly and removes by name.
    #[tokio::test]
    async fn only_a_first_pass_reads_under_a_watch() {
        let now = 1_000_000u64;
        let (_server, redis, store, space) = counters_at(now).await;
        let keys = store.layout.space_keys(&space);
        let (registry, hash) = (keys.registry(keys.shard("c")), keys.hash(1, "c"));
        let mut conn = redis.handle();
        for pass in [0, FULL_PASS_EVERY] {
            // 100 one-second slices, of which 10 are kept: 90 go.
            for slice in now - 99..=now {
                hset(&mut conn, &hash, slice, 1).await;
            }
            let _: () = redis::cmd("ZADD").arg(&registry).arg(0).arg("c").query_async(&mut conn).await.unwrap();
            let job = CleanJob {
                pass,
                now: crate::clock::Timestamp::from_secs(now).unwrap(),
                samples: 10,
                interval_secs: 60,
                batch: 100,
                last_visits: Vec::new(),
            };
            let before = (calls(&redis, "watch").await, calls(&redis, "hdel").await);
            let report = store.clean(&space, &job).await.unwrap();
            assert_eq!(report.samples_removed, 90, "pass {pass}");
            let after = (calls(&redis, "watch").await, calls(&redis, "hdel").await);
            let first = pass == 0;
            assert_eq!(after.0 > before.0, first, "WATCH in pass {pass}");
            assert_eq!(after.1 > before.1, !first, "HDEL in pass {pass}");
            let left: Vec<u64> = redis::cmd("HKEYS").arg(&hash).query_async(&mut conn).await.unwrap();
            assert_eq!(left.len(), 10, "pass {pass}");
        }
    }
}
