//! A cleaning pass that knows no earlier visit: the old fields of a batch
//! of hashes, read from their DUMP payloads (HKEYS where a payload is not
//! a listpack) and picked in Rust, and removed by name, or, where one
//! listpack loses many, by writing back what it keeps in one step.

use redis::Value as Reply;

use super::super::dump;
use super::RedisSliceStore;
use super::clean::{CleanEntry, Trim};
use super::rewrite::{REWRITE_MIN, Rewrite, WATCH_GROUP, WATCHED_REWRITE_MIN, Watch};
use crate::error::{Error, Result};

/// Chunks of a batch read and rewritten at once, each on its own
/// connection when read under a `WATCH`.
const CHUNKS_INFLIGHT: usize = 8;

impl RedisSliceStore {
    /// A pass that knows no earlier visit over `entries`: each chunk read
    /// ([`RedisSliceStore::read_old`]) and its hashes that lose many
    /// fields written back ([`RedisSliceStore::rewrite_hashes`]). With
    /// `watch` (a cleaner's first pass, which meets the backlog since the
    /// last cleaner ran) and where the server allows a `WATCH`, the chunks
    /// are whole entries reading about [`WATCH_GROUP`] hashes, read under
    /// a `WATCH`, [`CHUNKS_INFLIGHT`] at a time; otherwise (the periodic
    /// full pass, which takes a few fields a hash and rarely rewrites) the
    /// batch is read at once, plainly. Returns what is left to remove by
    /// name and by the clean call, with the fields the rewrites removed
    /// and the round trips taken.
    pub(super) async fn trim_old(
        &self,
        entries: Vec<CleanEntry>,
        book_rule: bool,
        watch: bool,
    ) -> Result<OldFields> {
        use futures::stream::{StreamExt, TryStreamExt};
        let watch = watch && self.redis.can_watch();
        let chunks = match watch {
            true => chunks_of(entries, WATCH_GROUP),
            false => vec![entries],
        };
        let done: Vec<OldFields> = futures::stream::iter(chunks)
            .map(|chunk| async move {
                let mut old = self.read_old(chunk, book_rule, watch).await?;
                old.round_trips += 1;
                let rewrites = std::mem::take(&mut old.rewrites);
                let watches = std::mem::take(&mut old.watches);
                if !rewrites.is_empty() || !watches.is_empty() {
                    old.rewritten += self.rewrite_hashes(rewrites, watches).await?;
                    old.round_trips += 1;
                }
                Ok::<_, Error>(old)
            })
            .buffer_unordered(CHUNKS_INFLIGHT)
            .try_collect()
            .await?;
        let mut all = OldFields::default();
        for old in done {
            all.direct.extend(old.direct);
            all.scripted.extend(old.scripted);
            all.rewritten += old.rewritten;
            all.round_trips += old.round_trips;
        }
        Ok(all)
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
    ///
    /// `watch`: read each hash under a `WATCH` where the server allows
    /// ([`RedisSliceStore::watched_dumps`]), for hashes that may be
    /// rewritten ([`super::rewrite`]).
    pub(super) async fn read_old(
        &self,
        entries: Vec<CleanEntry>,
        book_rule: bool,
        watch: bool,
    ) -> Result<OldFields> {
        let read: Vec<&str> = entries
            .iter()
            .flat_map(|e| &e.hashes)
            .filter(|(_, t)| t.as_ref().is_some_and(|t| t.old_field().is_some()))
            .map(|(key, _)| key.as_str())
            .collect();
        // The compact layout names its one hash at every precision, one
        // after the other: each hash is asked for once.
        let mut unique: Vec<&str> = Vec::with_capacity(read.len());
        let mut at: Vec<usize> = Vec::with_capacity(read.len());
        for key in read {
            if unique.last() != Some(&key) {
                unique.push(key);
            }
            at.push(unique.len() - 1);
        }
        let (mut read, watches) = self.hash_fields(&unique, watch).await?;
        let mut at = at.into_iter();
        let mut old = OldFields::default();
        for mut entry in entries {
            let mut removes = false;
            // Per hash read (its index in `read`), which of its fields are
            // gone (the compact layout reads its one hash once per
            // precision, each naming its own).
            let mut counts: Vec<(usize, String, Vec<bool>)> = Vec::new();
            for (key, trim) in &mut entry.hashes {
                let old = match trim {
                    Some(t @ (Trim::Upto(_) | Trim::Within(..))) => t.old_field(),
                    _ => continue,
                };
                let Some(old) = old else {
                    // A negative cutoff: nothing is old.
                    *trim = None;
                    continue;
                };
                let i = at.next().ok_or_else(|| {
                    Error::Backend("redis answered fewer replies than asked".into())
                })?;
                let (all, numbers) = (&read[i].fields, &read[i].numbers);
                let k = match counts.iter().position(|(j, _, _)| *j == i) {
                    Some(k) => k,
                    None => {
                        counts.push((i, key.clone(), vec![false; all.len()]));
                        counts.len() - 1
                    }
                };
                let mut gone: Vec<Vec<u8>> = Vec::new();
                for ((f, n), was) in all.iter().zip(numbers).zip(counts[k].2.iter_mut()) {
                    if old.is_old(f, *n) {
                        gone.push(f.clone());
                        *was = true;
                    }
                }
                removes |= !gone.is_empty();
                *trim = (!gone.is_empty()).then_some(Trim::Fields(gone));
            }
            let kept = counts.iter().any(|(_, _, gone)| gone.contains(&false));
            let windows = entry
                .hashes
                .iter()
                .any(|(_, t)| matches!(t, Some(Trim::Slices(_))));
            if kept && !windows {
                // A field stays: the entry stays registered whatever else
                // happens, so its removals need no script. A hash losing
                // many of a listpack's fields is written back whole.
                // Each rewritten hash's key and its place in `old.rewrites`.
                let mut rewritten: Vec<(String, usize)> = Vec::new();
                for (i, key, gone) in &counts {
                    let n = gone.iter().filter(|g| **g).count();
                    let Some(dump) = read[*i].dump.take() else {
                        continue;
                    };
                    if n < rewrite_min(!watches.is_empty()) {
                        continue;
                    }
                    if let Some(payload) =
                        dump::hash_payload_keeping(&dump.payload, &dump.listpack, |j| !gone[j])
                    {
                        rewritten.push((key.clone(), old.rewrites.len()));
                        old.rewrites.push(Rewrite {
                            key: key.clone(),
                            read: dump.payload,
                            payload,
                            removes: n,
                            gone: Vec::with_capacity(n),
                            watched: watches.get(i / WATCH_GROUP).map(|w| {
                                (i / WATCH_GROUP, w.expires[i % WATCH_GROUP])
                            }),
                        });
                    }
                }
                // A rewritten hash's fields, named once per precision, are
                // what it loses by name if it changed since the read.
                for (key, trim) in entry.hashes {
                    if let Some(Trim::Fields(gone)) = trim {
                        match rewritten.iter().find(|(k, _)| *k == key) {
                            Some(&(_, r)) => old.rewrites[r].gone.extend(gone),
                            None => old.direct.push((key, gone)),
                        }
                    }
                }
            } else if removes || windows || (!book_rule && !kept) {
                old.scripted.push(entry);
            }
        }
        old.watches = watches;
        Ok(old)
    }

    /// The field names of each hash of `keys` (none for a missing key), in
    /// order, and the payload of those that may be rewritten (more than
    /// [`REWRITE_MIN`] fields, [`WATCHED_REWRITE_MIN`] read watched): one
    /// pipeline of DUMP (under a `WATCH` when `watch` and the server
    /// allows: then the watches too), then HKEYS for those whose payload
    /// is not a listpack (every key, when the server refuses DUMP).
    async fn hash_fields(&self, keys: &[&str], watch: bool) -> Result<(Vec<HashRead>, Vec<Watch>)> {
        let watched = match watch {
            true => self.watched_dumps(keys).await,
            false => None,
        };
        let (replies, watches) = match watched {
            Some(read) => read,
            None => (self.dumps(keys).await, Vec::new()),
        };
        // The payloads kept: of hashes that may be rewritten.
        let least = rewrite_min(!watches.is_empty());
        if replies.len() != keys.len() {
            return Err(Error::Backend(
                "redis answered fewer replies than asked".into(),
            ));
        }
        let mut out: Vec<Option<HashRead>> = replies
            .into_iter()
            .map(|reply| match reply {
                Reply::Nil => Some(HashRead::default()),
                Reply::BulkString(payload) => {
                    let listpack = dump::hash_listpack(&payload)?;
                    let mut read = HashRead::of_listpack(&listpack)?;
                    if read.fields.len() > least {
                        read.dump = Some(Dump { payload, listpack });
                    }
                    Some(read)
                }
                _ => None,
            })
            .collect();
        let again: Vec<usize> = (0..keys.len()).filter(|&i| out[i].is_none()).collect();
        if !again.is_empty() {
            let mut pipe = redis::pipe();
            for &i in &again {
                pipe.cmd("HKEYS").arg(keys[i]);
            }
            let replies = self.redis.run_pipeline(pipe).await?;
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
                let fields: Vec<Vec<u8>> = fields
                    .into_iter()
                    .filter_map(|f| match f {
                        Reply::BulkString(b) => Some(b),
                        _ => None,
                    })
                    .collect();
                out[i] = Some(HashRead {
                    numbers: fields.iter().map(|f| decimal(f)).collect(),
                    fields,
                    dump: None,
                });
            }
        }
        let read = out
            .into_iter()
            .map(|f| {
                f.ok_or_else(|| Error::Backend("redis answered fewer replies than asked".into()))
            })
            .collect::<Result<_>>()?;
        Ok((read, watches))
    }

    /// The DUMP of each of `keys` in one pipeline on the shared connection;
    /// every reply `OK` (each hash then read with HKEYS) when the server
    /// refuses DUMP (an ACL without it).
    async fn dumps(&self, keys: &[&str]) -> Vec<Reply> {
        let mut pipe = redis::pipe();
        for key in keys {
            pipe.cmd("DUMP").arg(*key);
        }
        match self.redis.run_pipeline(pipe).await {
            Ok(replies) => replies,
            Err(e) => {
                tracing::debug!(error = %e, "DUMP refused; reading fields with HKEYS");
                vec![Reply::Okay; keys.len()]
            }
        }
    }

    /// Removes each hash's fields by name: one pipeline of HDEL. Returns
    /// the fields removed.
    pub(super) async fn remove_fields(&self, hashes: &[(String, Vec<Vec<u8>>)]) -> Result<u64> {
        let mut pipe = redis::pipe();
        for (key, fields) in hashes {
            for chunk in fields.chunks(1000) {
                pipe.cmd("HDEL").arg(key.as_str()).arg(chunk);
            }
        }
        let replies = self.redis.run_pipeline(pipe).await?;
        replies
            .into_iter()
            .map(|r| <u64 as redis::FromRedisValue>::from_redis_value(r).map_err(Error::from))
            .sum()
    }
}

/// The old fields a first pass read ([`RedisSliceStore::read_old`]).
#[derive(Default)]
pub(super) struct OldFields {
    /// Entries for the clean call (which may drop them).
    pub(super) scripted: Vec<CleanEntry>,
    /// Hashes and their old fields, of entries that keep a field.
    pub(super) direct: Vec<(String, Vec<Vec<u8>>)>,
    /// Hashes of entries that keep a field, each losing at least
    /// [`rewrite_min`] of its listpack's fields: written back whole.
    pub(super) rewrites: Vec<Rewrite>,
    /// The watches of a watched read, to end ([`RedisSliceStore::rewrite_hashes`]).
    pub(super) watches: Vec<Watch>,
    /// Fields removed by rewrites ([`RedisSliceStore::trim_old`]).
    pub(super) rewritten: u64,
    /// Round trips taken ([`RedisSliceStore::trim_old`]).
    pub(super) round_trips: u64,
}

/// The fewest fields a hash loses to be written back whole: fewer read
/// under a `WATCH`, where the rewrite is one `RESTORE`.
fn rewrite_min(watched: bool) -> usize {
    match watched {
        true => WATCHED_REWRITE_MIN,
        false => REWRITE_MIN,
    }
}

/// `entries` in runs of whole entries, each reading at most `most`
/// distinct hashes (or one entry, if it reads more).
fn chunks_of(entries: Vec<CleanEntry>, most: usize) -> Vec<Vec<CleanEntry>> {
    let mut chunks = Vec::new();
    let mut chunk = Vec::new();
    let mut hashes = 0;
    for entry in entries {
        let n = read_keys(&entry).count();
        if !chunk.is_empty() && hashes + n > most {
            chunks.push(std::mem::take(&mut chunk));
            hashes = 0;
        }
        hashes += n;
        chunk.push(entry);
    }
    if !chunk.is_empty() {
        chunks.push(chunk);
    }
    chunks
}

/// The hashes of `entry` a reading pass reads, each once (the compact
/// layout names its one hash once per precision, one after the other).
fn read_keys(entry: &CleanEntry) -> impl Iterator<Item = &str> {
    let mut last: Option<&str> = None;
    entry
        .hashes
        .iter()
        .filter(|(_, t)| t.as_ref().is_some_and(|t| t.old_field().is_some()))
        .map(|(key, _)| key.as_str())
        .filter(move |key| last.replace(key) != Some(key))
}

/// One hash as [`RedisSliceStore::hash_fields`] read it.
#[derive(Default)]
struct HashRead {
    fields: Vec<Vec<u8>>,
    /// Each field's value when it is a plain decimal number of 64 bits or
    /// less ([`decimal`]).
    numbers: Vec<Option<u64>>,
    /// Its payload and listpack, when it is a listpack of more than
    /// [`REWRITE_MIN`] fields.
    dump: Option<Dump>,
}

impl HashRead {
    /// The fields of a hash's listpack ([`dump::hash_listpack`]), each as
    /// the text `HKEYS` would answer and its value (an integer entry's
    /// own, not parsed back from its text); `None` when it does not add up.
    fn of_listpack(lp: &[u8]) -> Option<HashRead> {
        let entries = dump::listpack_entries(lp)?;
        let (fields, numbers) = entries
            .into_iter()
            .step_by(2)
            .map(|entry| match entry {
                dump::Entry::Int(v) => (v.to_string().into_bytes(), u64::try_from(v).ok()),
                dump::Entry::Bytes(b) => (b.to_vec(), decimal(b)),
            })
            .unzip();
        Some(HashRead {
            fields,
            numbers,
            dump: None,
        })
    }
}

/// The value of a field that is a plain decimal number (digits only) of
/// 64 bits or less.
fn decimal(field: &[u8]) -> Option<u64> {
    if field.is_empty() || !field.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(field).ok()?.parse().ok()
}

struct Dump {
    payload: Vec<u8>,
    listpack: Vec<u8>,
}

/// Whether a hash field is a slice starting at or before `cut` (a
/// non-negative cutoff's decimal text): a plain decimal integer, compared as
/// text (a shorter number is smaller, as the writer writes no leading
/// zeros). Any other field is never removed.
pub(super) fn at_or_before(field: &[u8], cut: &[u8]) -> bool {
    !field.is_empty()
        && field.iter().all(u8::is_ascii_digit)
        && (field.len() < cut.len() || (field.len() == cut.len() && field <= cut))
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

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

    /// A payload rebuilt keeping every pair is what DUMP answers
    /// uncompressed (the checksum included), whatever the entries'
    /// encodings and however the payload read was stored; one keeping some
    /// pairs restores to exactly those fields and values, and passes the
    /// server's deep check of a payload.
    #[tokio::test]
    async fn a_payload_keeping_pairs_restores_to_exactly_those_pairs() {
        let (_server, _store, mut conn) = listpack_server().await;
        config_set(&mut conn, "sanitize-dump-payload", "yes").await;
        let slices: Vec<String> = (0..300).map(|k| (1_700_000_000 + k).to_string()).collect();
        let edges = listpack_edge_texts();
        for (key, fields) in [("odd", &edges), ("slices", &slices)] {
            for (i, f) in fields.iter().enumerate() {
                // Values of every encoding too.
                hset(&mut conn, key, f, &edges[i % edges.len()]).await;
            }
            config_set(&mut conn, "rdbcompression", "no").await;
            let plain = dump_payload(&mut conn, key).await;
            config_set(&mut conn, "rdbcompression", "yes").await;
            let read = dump_payload(&mut conn, key).await;
            let lp = dump::hash_listpack(&read).unwrap();
            assert_eq!(
                dump::hash_payload_keeping(&read, &lp, |_| true),
                Some(plain),
                "{key}"
            );
            assert_eq!(dump::hash_payload_keeping(&read, &lp, |_| false), None);
            let all: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("HGETALL")
                .arg(key)
                .query_async(&mut conn)
                .await
                .unwrap();
            let keep = |j: usize| j % 3 == 1;
            let payload = dump::hash_payload_keeping(&read, &lp, keep).unwrap();
            let _: () = redis::cmd("RESTORE")
                .arg("copy")
                .arg(0)
                .arg(payload)
                .arg("REPLACE")
                .query_async(&mut conn)
                .await
                .unwrap();
            let copy: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("HGETALL")
                .arg("copy")
                .query_async(&mut conn)
                .await
                .unwrap();
            let want: Vec<_> = all.into_iter().enumerate().filter(|(j, _)| keep(*j)).map(|(_, p)| p).collect();
            assert_eq!(copy, want, "{key}");
        }
    }

    /// A first pass removing many fields of one listpack writes the hash
    /// back in one step, keeping its time to live, read under a `WATCH` or
    /// not; when a write lands between the read and the rewrite, the
    /// fields go by name instead and the write is kept. A hash losing fewer
    /// goes by HDEL, as before.
    #[tokio::test]
    async fn a_first_pass_rewrites_a_listpack_losing_many_fields_and_loses_no_write() {
        let (_server, store, mut conn) = listpack_server().await;
        let redis = &store.redis;
        let entry = |key: &str, cut: i64| CleanEntry {
            member: key.to_owned(),
            hashes: vec![(key.to_owned(), Some(Trim::Upto(cut)))],
        };
        // A hash left alone, one written between the read and the
        // rewrite, one whose RESTORE the server refuses (out of memory),
        // one with no time to live.
        for watch in [false, true] {
            for case in ["quiet", "written", "refused", "lasting"] {
                let key = &format!("{case}-{watch}");
                for k in 0..300u64 {
                    hset(&mut conn, key, 1000 + k, k).await;
                }
                if case != "lasting" {
                    let _: () = redis::cmd("EXPIRE").arg(key).arg(1000).query_async(&mut conn).await.unwrap();
                }
                // 1000 to 1149 are old: 150 of 300 fields.
                let old = store.read_old(vec![entry(key, 1149)], false, watch).await.unwrap();
                assert!(old.direct.is_empty() && old.scripted.is_empty());
                assert_eq!(old.rewrites.len(), 1);
                assert_eq!(old.watches.len(), usize::from(watch), "{key}");
                let changed = case == "written";
                if changed {
                    // A writer adds to a kept slice and opens a new one.
                    let _: () = redis::cmd("HINCRBY").arg(key).arg(1200).arg(5).query_async(&mut conn).await.unwrap();
                    let _: () = redis::cmd("HINCRBY").arg(key).arg(5000).arg(1).query_async(&mut conn).await.unwrap();
                }
                if case == "refused" {
                    config_set(&mut conn, "maxmemory", "1").await;
                }
                let (hdel, evalsha) = (calls(redis, "hdel").await, calls(redis, "evalsha").await);
                assert_eq!(store.rewrite_hashes(old.rewrites, old.watches).await.unwrap(), 150, "{key}");
                config_set(&mut conn, "maxmemory", "0").await;
                // The written and the refused hash lose their fields by name.
                let by_name = u64::from(matches!(case, "written" | "refused"));
                assert_eq!(calls(redis, "hdel").await - hdel, by_name, "{key}");
                // Read under a WATCH, only the written one goes through the
                // script; a refused RESTORE never reaches it (a first
                // EVALSHA counts twice: NOSCRIPT, then the call).
                let scripted = case != "refused" && (!watch || changed);
                assert_eq!(calls(redis, "evalsha").await > evalsha, scripted, "{key}");
                let mut want: Vec<(u64, i64)> = (150..300).map(|k| (1000 + k, k as i64)).collect();
                if changed {
                    want[50].1 += 5;
                    want.push((5000, 1));
                }
                let left: Vec<(u64, i64)> = redis::cmd("HGETALL")
                    .arg(key)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                assert_eq!(left, want, "{key}");
                let ttl: i64 = redis::cmd("TTL").arg(key).query_async(&mut conn).await.unwrap();
                if case == "lasting" {
                    assert_eq!(ttl, -1);
                } else {
                    assert!((990..=1000).contains(&ttl), "{key}: ttl {ttl}");
                }
                let temporary: Vec<String> = redis::cmd("KEYS").arg("*rewrite*").query_async(&mut conn).await.unwrap();
                assert!(temporary.is_empty(), "{key}: {temporary:?}");
            }
        }
        // Fewer old fields than a rewrite needs go by name: 127 read plainly,
        // 31 read under a WATCH; 32 read so are written back.
        for k in 0..300u64 {
            hset(&mut conn, "few", 1000 + k, k).await;
        }
        for (watch, cut, n) in [(false, 1126, 127), (true, 1030, 31)] {
            let old = store.read_old(vec![entry("few", cut)], false, watch).await.unwrap();
            assert!(old.rewrites.is_empty(), "watch {watch}");
            assert_eq!(old.direct.len(), 1);
            assert_eq!(old.direct[0].1.len(), n);
            // Its watch ends with nothing to rewrite.
            assert_eq!(store.rewrite_hashes(old.rewrites, old.watches).await.unwrap(), 0);
        }
        let old = store.read_old(vec![entry("few", 1031)], false, true).await.unwrap();
        assert_eq!(old.rewrites.len(), 1);
        assert_eq!(store.rewrite_hashes(old.rewrites, old.watches).await.unwrap(), 32);
        // A watched rewrite of fewer than REWRITE_MIN fields whose EXEC does
        // not run (a write landed) removes its fields by name, not through
        // the script, and keeps the write.
        let old = store.read_old(vec![entry("few", 1071)], false, true).await.unwrap();
        assert_eq!(old.rewrites.len(), 1);
        let _: () = redis::cmd("HINCRBY").arg("few").arg(1299).arg(1).query_async(&mut conn).await.unwrap();
        let (hdel, evalsha) = (calls(redis, "hdel").await, calls(redis, "evalsha").await);
        assert_eq!(store.rewrite_hashes(old.rewrites, old.watches).await.unwrap(), 40);
        assert_eq!((calls(redis, "hdel").await - hdel, calls(redis, "evalsha").await - evalsha), (1, 0));
        let left: Vec<(u64, i64)> = redis::cmd("HGETALL").arg("few").query_async(&mut conn).await.unwrap();
        let mut want: Vec<(u64, i64)> = (72..300).map(|k| (1000 + k, k as i64)).collect();
        want.last_mut().unwrap().1 += 1;
        assert_eq!(left, want);
    }

    /// A watched pass reads whole entries in chunks of about a watch group
    /// of hashes: 4 entries of 7 hashes, 32 of one hash named 7 times.
    #[test]
    fn chunks_hold_whole_entries_of_about_a_watch_group() {
        let entry = |keys: &[String]| CleanEntry {
            member: String::new(),
            hashes: keys.iter().map(|k| (k.clone(), Some(Trim::Upto(5)))).collect(),
        };
        let seven: Vec<String> = (0..7).map(|p| p.to_string()).collect();
        let one = vec!["h".to_owned(); 7];
        let sizes = |keys: &[String]| {
            chunks_of((0..70).map(|_| entry(keys)).collect(), WATCH_GROUP)
                .iter()
                .map(Vec::len)
                .collect::<Vec<_>>()
        };
        assert_eq!(sizes(&seven), [vec![4; 17], vec![2]].concat());
        assert_eq!(sizes(&one), [32, 32, 6]);
    }

    /// The first pass reads fields from DUMP payloads: they name exactly
    /// what HKEYS answers, for every listpack entry encoding, compressed
    /// or not; a hash in another encoding is read with HKEYS instead.
    #[tokio::test]
    async fn fields_read_from_dump_are_those_hkeys_answers() {
        let (server, store, mut conn) = listpack_server().await;
        let fields = listpack_edge_texts();
        // A hash of the shape the cleaner meets: 181 slices in a row.
        let slices: Vec<String> = (0..181).map(|k| (1_700_000_000 + k).to_string()).collect();
        let big: Vec<String> = (0..600).map(|k| k.to_string()).collect();
        // Long values stay in the listpack (12- and 32-bit string lengths);
        // 600 entries do not.
        let hashes = [("odd", &fields), ("slices", &slices), ("big", &big)];
        for compression in ["yes", "no"] {
            config_set(&mut conn, "rdbcompression", compression).await;
            let mut keys = vec!["missing"];
            for (key, fields) in hashes {
                for f in fields.iter() {
                    hset(&mut conn, key, f, 1).await;
                }
                keys.push(key);
            }
            let read: Vec<_> = store
                .hash_fields(&keys, false)
                .await
                .unwrap()
                .0
                .into_iter()
                .map(|r| r.fields)
                .collect();
            assert_eq!(read[0], Vec::<Vec<u8>>::new());
            for (i, key) in keys.iter().enumerate().skip(1) {
                let want: Vec<Vec<u8>> = redis::cmd("HKEYS")
                    .arg(*key)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                assert_eq!(read[i], want, "{key}, compression {compression}");
                let payload = dump_payload(&mut conn, key).await;
                let parsed = dump::hash_listpack(&payload).and_then(|lp| dump::listpack_fields(&lp));
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
        let fields = |read: Vec<HashRead>| read.into_iter().map(|r| r.fields).collect::<Vec<_>>();
        let plain = fields(store.hash_fields(&keys, false).await.unwrap().0);
        assert_eq!(fields(limited.hash_fields(&keys, false).await.unwrap().0), plain);
        // Read under a WATCH: the same fields, one watch a group of keys;
        // refused DUMP, it reads them without.
        let (watched, watches) = store.hash_fields(&keys, true).await.unwrap();
        assert_eq!((fields(watched), watches.len()), (plain.clone(), 1));
        let (watched, watches) = limited.hash_fields(&keys, true).await.unwrap();
        assert_eq!((fields(watched), watches.len()), (plain, 0));
    }
}
