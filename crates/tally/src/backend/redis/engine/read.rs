//! Reading: pipelines of one command per series and precision (one
//! pipeline per slot): DUMP for hashes of sums (a listpack, walked in
//! `dump.rs` straight into slices; HGETALL again for a hash in another
//! encoding), HGETALL for other kinds.

use redis::Value as Reply;

use super::super::dump;
use super::RedisSliceStore;
use super::kinds;
use super::pending::{Pending, PendingFields, PendingQueue, add_pending, slice_tokens};
use crate::engine::store::{Reads, check_stored, check_sums};
use crate::engine::{Kind, SliceRead, SliceSel, Slices};
use crate::error::{Error, Result};

impl RedisSliceStore {
    pub(super) async fn read_slices(&self, read: SliceRead<'_>) -> Result<Vec<Vec<Slices>>> {
        let kind = kinds::of(read.space.kind)?;
        let (parse, dumped) = (kind.parse, kind.dumped);
        let stored = self.read_with(read, |hash, sel, start| {
            parse_hash(hash, sel, start, parse, |e| match dumped {
                Some(dumped) => dumped(e),
                None => Err("this kind is not read from a DUMP".into()),
            })
        });
        if !self.layout.space_keys(read.space).folds(read.space.kind) {
            return stored.await;
        }
        let queued = read.space.kind == Kind::Stats;
        let (mut slices, pending) = futures::try_join!(
            stored,
            self.read_pending(read, queued, kind.parse_pending, kind.parse)
        )?;
        add_pending(read, &mut slices, pending, |a, b| a.merge(b))?;
        Ok(slices)
    }

    pub(super) async fn read_sum_slices(&self, read: SliceRead<'_>) -> Result<Reads<i64>> {
        check_sums(read.space)?;
        let stored = self.read_with(read, |hash, sel, start| {
            parse_hash(hash, sel, start, sum_of, sum_of_entry)
        });
        if !self.layout.space_keys(read.space).folds(read.space.kind) {
            return stored.await;
        }
        let pending = self.read_pending(
            read,
            false,
            |b, q| {
                kinds::no_queue(q)?;
                sum_of(b)
            },
            |_| Err("a sum keeps no accumulator".into()),
        );
        let (mut slices, pending) = futures::try_join!(stored, pending)?;
        let name = read.space.noun();
        add_pending(read, &mut slices, pending, |a, b| {
            *a = a.checked_add(*b).ok_or_else(|| {
                Error::Corrupt(format!("a {name}'s slice and its pending slice overflow together"))
            })?;
            Ok(())
        })?;
        Ok(slices)
    }

    /// Each series' pending slice (`stats_fold.lua`): the second its finest
    /// slice starts at, its value (parsed by `parse` from its `b` and, for
    /// a statistic, its queue), the precisions it folds into (its `t`) and
    /// a statistic's accumulator (each value parsed by `parse_stored`),
    /// `None` when it has none; fetched beside the slices' reads
    /// ([`RedisSliceStore::fetch_pending`]). A statistic's (`queued`) is
    /// read whole (the hash is small: a value, its queue's deltas and the
    /// accumulator's values); a sum's, which has neither, as its `s`, `b`,
    /// `t` and `q` (a `q` is refused by its `parse`).
    async fn read_pending<T>(
        &self,
        read: SliceRead<'_>,
        queued: bool,
        parse: impl Fn(&Reply, &PendingQueue<'_>) -> std::result::Result<T, String>,
        parse_stored: impl Fn(&Reply) -> std::result::Result<T, String>,
    ) -> Result<Vec<Option<Pending<T>>>> {
        let keys = self.layout.space_keys(read.space);
        let finest = read
            .space
            .precisions
            .first()
            .map_or(0, |p| p.seconds);
        let pending: Vec<String> = read.names.iter().map(|n| keys.pending(n.as_str())).collect();
        let shards: Vec<u32> = read.names.iter().map(|n| keys.shard(n.as_str())).collect();
        let replies = self.fetch_pending(keys, &pending, &shards, queued).await?;
        replies
            .into_iter()
            .zip(&pending)
            .map(|(reply, key)| {
                let corrupt = |why: String| Error::Corrupt(format!("{key}: {why}"));
                let fields = if queued {
                    PendingFields::of(&reply)
                } else {
                    PendingFields::of_named(&reply)
                };
                let fields = fields.map_err(corrupt)?;
                match fields {
                    None => Ok(None),
                    Some(PendingFields {
                        slice: field,
                        value: blob,
                        folds_into,
                        queue,
                        accumulator,
                    }) => {
                        let field: u64 = reply_number(field, "a slice").map_err(corrupt)?;
                        // A compact field names its own precision (the
                        // finest when it was written, whatever it is now).
                        let precision = if keys.is_compact() { field >> 32 } else { finest };
                        let second = keys.slice_of_field(precision, field).ok_or_else(|| {
                            corrupt(format!("{field} is not a {precision} s slice"))
                        })?;
                        let folds_into = slice_tokens(reply_bytes(folds_into, "a fold").map_err(corrupt)?, "t")
                            .map_err(corrupt)?
                            .into_iter()
                            .map(|(p, _)| p)
                            .collect();
                        let (accumulated, accumulated_into) = accumulator
                            .map(|acc| acc.read(&keys, &parse_stored))
                            .transpose()
                            .map_err(corrupt)?
                            .unwrap_or_default();
                        Ok(Some(Pending {
                            second,
                            value: parse(blob, &queue).map_err(corrupt)?,
                            folds_into,
                            accumulated,
                            accumulated_into,
                        }))
                    }
                }
            })
            .collect()
    }

    /// Every (series, precision)'s hash, one pipeline per slot (its DUMP
    /// or its HGETALL), each parsed by `parse` with the slices to keep;
    /// `result[i][j]`: `names[i]` at `precisions[j]`. In the expiring
    /// layout, one hash per chunk that may hold a slice of the window at
    /// the clock's now,
    /// and only the window's slices kept (a chunk lingers until its last
    /// slice leaves the window). In the compact layout, one hash per
    /// series, asked for once and parsed once per precision (`parse` is
    /// given what slice each field of the precision's names).
    async fn read_with<T>(
        &self,
        read: SliceRead<'_>,
        parse: impl Fn(
            &HashRead,
            SliceSel,
            &dyn Fn(u64) -> Option<u64>,
        ) -> std::result::Result<Vec<(u64, T)>, String>,
    ) -> Result<Reads<T>> {
        let SliceRead {
            space,
            names,
            precisions,
            slices: sel,
        } = read;
        check_stored(space.kind)?;
        let keys = self.layout.space_keys(space);
        // Per precision: its hashes (chunks, or one stand-in for a single
        // hash) and the slices kept.
        let plan = keys.read_plan(space, precisions, sel, || self.clock.now())?;
        let key = |r: u64, chunk: u64, name: &str| keys.read_key(r, chunk, name);
        let one_hash = keys.one_hash();
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
                if one_hash {
                    return vec![key(0, 0, name.as_str())];
                }
                precisions
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
        let dumped = if kinds::of(space.kind)?.dumped.is_some() {
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
        let mut replies: Vec<Vec<Option<HashRead>>> = match dumped {
            Some(dumped) => dumped
                .into_iter()
                .map(|per| {
                    per.into_iter()
                        .map(|reply| match reply {
                            Reply::Nil => Some(HashRead::Reply(Reply::Nil)),
                            Reply::BulkString(payload) => {
                                dump::hash_listpack(&payload).map(HashRead::Listpack)
                            }
                            _ => None,
                        })
                        .collect()
                })
                .collect(),
            None => hash_keys
                .iter()
                .map(|per| per.iter().map(|_| None).collect())
                .collect(),
        };
        if replies.iter().any(|per| per.iter().any(Option::is_none)) {
            let again = pipes("HGETALL", &|i, k| {
                replies[i].get(k).is_none_or(Option::is_none)
            });
            let again = self.redis.run_pipelines(again).await?;
            for ((per, keys), answers) in replies.iter_mut().zip(&hash_keys).zip(again) {
                per.resize_with(keys.len(), || None);
                let mut answers = answers.into_iter();
                for slot in per.iter_mut().filter(|s| s.is_none()) {
                    *slot = answers.next().map(HashRead::Reply);
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
                    .collect::<Result<Vec<HashRead>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        names
            .iter()
            .zip(values)
            .map(|(name, per)| {
                let mut replies = per.iter();
                precisions
                    .iter()
                    .zip(&plan)
                    .map(|(&r, (chunks, sel))| {
                        // Chunks come oldest first and hold disjoint slices:
                        // their slices, each sorted, concatenate in order.
                        let mut slices = Vec::new();
                        let start = |field: u64| keys.slice_of_field(r, field);
                        for &c in chunks {
                            let reply = if one_hash { per.first() } else { replies.next() };
                            let reply = reply.ok_or_else(|| {
                                Error::Backend("redis answered fewer replies than asked".into())
                            })?;
                            let mut part = parse(reply, *sel, &start).map_err(|why| {
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
}

pub(super) fn reply_bytes<'v>(v: &'v Reply, what: &str) -> std::result::Result<&'v [u8], String> {
    match v {
        Reply::BulkString(b) => Ok(b),
        Reply::SimpleString(s) => Ok(s.as_bytes()),
        other => Err(format!("it holds {other:?} as {what}")),
    }
}

pub(super) fn reply_number<T: std::str::FromStr + TryFrom<i64>>(
    v: &Reply,
    what: &str,
) -> std::result::Result<T, String> {
    match v {
        Reply::Int(i) => int_number(*i, what),
        v => text_number(reply_bytes(v, what)?, what),
    }
}

/// A number from a listpack entry of a DUMP: an integer entry, or text.
fn entry_number<T: std::str::FromStr + TryFrom<i64>>(
    e: dump::Entry<'_>,
    what: &str,
) -> std::result::Result<T, String> {
    match e {
        dump::Entry::Int(i) => int_number(i, what),
        dump::Entry::Bytes(b) => text_number(b, what),
    }
}

fn int_number<T: TryFrom<i64>>(i: i64, what: &str) -> std::result::Result<T, String> {
    T::try_from(i).map_err(|_| format!("it holds {i}, not {what}"))
}

fn text_number<T: std::str::FromStr>(b: &[u8], what: &str) -> std::result::Result<T, String> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| format!("it holds {:?}, not {what}", String::from_utf8_lossy(b)))
}

/// A sum field's value.
pub(super) fn sum_of(v: &Reply) -> std::result::Result<i64, String> {
    reply_number(v, "an integer count")
}

/// A sum field's value, from its listpack entry.
pub(super) fn sum_of_entry(e: dump::Entry<'_>) -> std::result::Result<i64, String> {
    entry_number(e, "an integer count")
}

/// A series hash as read: its `HGETALL` reply, or the listpack of its
/// `DUMP` ([`dump::hash_listpack`]).
enum HashRead {
    Reply(Reply),
    Listpack(Vec<u8>),
}

/// A series hash as its slices selected by `sel`, each field's slice start
/// given by `start` (`None`: another precision's, left out), each value
/// read by `value` from a reply or by `entry` from a listpack entry,
/// oldest first, or what is wrong with it. Parses the reply (RESP2 flat
/// array or RESP3 map) or walks the listpack in place, with no string,
/// map or reply per field: reads of every precision are on the latency
/// path.
fn parse_hash<T>(
    hash: &HashRead,
    sel: SliceSel,
    start: &dyn Fn(u64) -> Option<u64>,
    value: impl Fn(&Reply) -> std::result::Result<T, String>,
    entry: impl Fn(dump::Entry<'_>) -> std::result::Result<T, String>,
) -> std::result::Result<Vec<(u64, T)>, String> {
    let reply = match hash {
        HashRead::Reply(reply) => reply,
        HashRead::Listpack(lp) => {
            let mut slices = Vec::new();
            dump::listpack_pairs(lp, |f, v| {
                if let Some(start) = start(entry_number(f, "a slice start")?)
                    && sel.contains(start)
                {
                    slices.push((start, entry(v)?));
                }
                Ok::<_, String>(())
            })
            .ok_or("its DUMP's listpack does not add up")??;
            slices.sort_unstable_by_key(|s| s.0);
            return Ok(slices);
        }
    };
    let slice = |f: &Reply, v: &Reply| -> std::result::Result<Option<(u64, T)>, String> {
        let Some(start) = start(reply_number(f, "a slice start")?) else {
            return Ok(None);
        };
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

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::engine::{Kind, Value};

    /// A hash of `kind`'s slices, each read by its entry in the table of
    /// kinds.
    fn parse_slices(
        reply: &Reply,
        kind: Kind,
        sel: SliceSel,
    ) -> std::result::Result<Slices, String> {
        let parse = kinds::of(kind).map_err(|e| e.to_string())?.parse;
        parse_hash(&HashRead::Reply(reply.clone()), sel, &Some, parse, |_| {
            Err("not a listpack".into())
        })
    }

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
        assert_eq!(
            parse_hash(
                &HashRead::Reply(resp2.clone()),
                range,
                &Some,
                sum_of,
                sum_of_entry
            )
            .unwrap(),
            vec![(20, -3)]
        );
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

    /// Every field and value of a hash's DUMP payload, as text, in order
    /// (`None`: not a listpack hash, or one that does not add up).
    fn dump_as_hgetall(payload: &[u8]) -> Option<Vec<Vec<u8>>> {
        let text = |e: dump::Entry<'_>| match e {
            dump::Entry::Int(i) => i.to_string().into_bytes(),
            dump::Entry::Bytes(b) => b.to_vec(),
        };
        let lp = dump::hash_listpack(payload)?;
        let mut all = Vec::new();
        dump::listpack_pairs(&lp, |f, v| {
            all.push(text(f));
            all.push(text(v));
            Ok::<_, ()>(())
        })?
        .ok()?;
        Some(all)
    }

    /// Reads of sums take fields and values from DUMP payloads: the same
    /// text HGETALL answers, for every listpack entry encoding, as values
    /// and as fields, compressed or not; another encoding is `None`.
    #[tokio::test]
    async fn entries_read_from_dump_are_those_hgetall_answers() {
        let (_server, _store, mut conn) = listpack_server().await;
        let texts = listpack_edge_texts();
        for compression in ["yes", "no"] {
            config_set(&mut conn, "rdbcompression", compression).await;
            for (i, t) in texts.iter().enumerate() {
                // As a value of a slice, and as a field.
                hset(&mut conn, "values", 1_700_000_000 + i, t).await;
                hset(&mut conn, "values", t, i).await;
            }
            let payload = dump_payload(&mut conn, "values").await;
            let Some(got) = dump_as_hgetall(&payload) else {
                panic!("not read from the DUMP");
            };
            let want: Vec<Vec<u8>> = redis::cmd("HGETALL")
                .arg("values")
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(got, want, "{compression}");
        }
        let big: Vec<String> = (0..600).map(|k| k.to_string()).collect();
        for k in &big {
            hset(&mut conn, "big", k, k).await;
        }
        let payload = dump_payload(&mut conn, "big").await;
        assert_eq!(dump_as_hgetall(&payload), None);
        // A listpack's integers read as numbers where they fit.
        assert_eq!(reply_number::<i64>(&Reply::Int(-1), "n"), Ok(-1));
        assert!(reply_number::<u64>(&Reply::Int(-1), "a slice start").is_err());
    }

    /// A hash of sums read from its DUMP's listpack gives the slices its
    /// HGETALL reply gives, for any selection and any mapping of fields to
    /// slices, and the same error for a field or value that is no number.
    #[tokio::test]
    async fn slices_walked_from_a_listpack_are_those_of_hgetall() {
        let (_server, _store, mut conn) = listpack_server().await;
        let both = async |conn: &mut crate::backend::redis::RedisHandle, key: &str| {
            let lp = dump::hash_listpack(&dump_payload(conn, key).await).unwrap();
            let reply: Reply = redis::cmd("HGETALL")
                .arg(key)
                .query_async(conn)
                .await
                .unwrap();
            (HashRead::Listpack(lp), HashRead::Reply(reply))
        };
        // Fields out of order, values of every integer width and sign.
        let values = [7i64, -3, 0, 1 << 40, i64::MIN, i64::MAX, 127, -129, 40_000];
        for (k, v) in values.iter().enumerate() {
            hset(&mut conn, "sums", 1_000 - 10 * k as u64, v).await;
        }
        let (lp, reply) = both(&mut conn, "sums").await;
        let every_other = |f: u64| f.is_multiple_of(20).then_some(f / 10);
        for start in [&Some as &dyn Fn(u64) -> Option<u64>, &every_other] {
            for sel in [
                SliceSel::All,
                SliceSel::Range { from: 930, to: 980 },
                SliceSel::Range { from: 92, to: 97 },
                SliceSel::Range { from: 2_000, to: 3_000 },
            ] {
                let read = |h: &HashRead| parse_hash(h, sel, start, sum_of, sum_of_entry);
                let got = read(&lp).unwrap();
                assert_eq!(got, read(&reply).unwrap(), "{sel:?}");
                assert!(got.is_sorted_by_key(|s| s.0), "{got:?}");
            }
        }
        assert_eq!(
            parse_hash(&lp, SliceSel::All, &Some, sum_of, sum_of_entry)
                .unwrap()
                .len(),
            values.len()
        );
        for (key, field, value, why) in [
            ("bad-field", "10.0", "1", "\"10.0\", not a slice start"),
            ("bad-count", "10", "x", "\"x\", not an integer count"),
            ("big-count", "10", "9223372036854775808", "not an integer count"),
        ] {
            hset(&mut conn, key, field, value).await;
            let (lp, reply) = both(&mut conn, key).await;
            for h in [&lp, &reply] {
                let err = parse_hash(h, SliceSel::All, &Some, sum_of, sum_of_entry).unwrap_err();
                assert!(err.contains(why), "{err}");
            }
        }
        // A listpack cut short does not add up.
        let HashRead::Listpack(mut cut) = lp else { unreachable!() };
        cut.truncate(cut.len() - 2);
        let err = parse_hash(&HashRead::Listpack(cut), SliceSel::All, &Some, sum_of, sum_of_entry)
            .unwrap_err();
        assert!(err.contains("does not add up"), "{err}");
    }
}
