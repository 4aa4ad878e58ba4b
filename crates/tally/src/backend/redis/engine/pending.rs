//! A series' pending slice as reads take it (`stats_fold.lua`): its
//! fields (the value, a statistic's queue and accumulator) parsed from the
//! hash's reply, and added to the slices a read returns.

use std::collections::BTreeMap;

use redis::Value as Reply;

use super::RedisSliceStore;
use super::read::{reply_bytes, reply_number};
use super::super::layout::SpaceKeys;
use crate::engine::{SliceRead, SliceSel};
use crate::error::{Error, Result};

/// A series' pending slice as read (`stats_fold.lua`).
pub(super) struct Pending<T> {
    /// The second its finest slice starts at.
    pub second: u64,
    /// Its value.
    pub value: T,
    /// The precisions it folds into.
    pub folds_into: Vec<u64>,
    /// A statistic's accumulator: the values, oldest first, of finest
    /// slices folded since the coarser slices last took them.
    pub accumulated: Vec<T>,
    /// The slices (precision, start) the accumulator's values fold into.
    pub accumulated_into: Vec<(u64, u64)>,
}

/// A pending slice's queue as read (`stats_fold.lua`; a statistic's only):
/// the one string of a slice of format 2, or the header (`q0`) and the
/// deltas (`q1` to `q<n>`, in that order) of a slice of format 3.
#[derive(Debug, Default)]
pub(super) struct PendingQueue<'r> {
    /// A format 2 queue (`q`).
    pub string: Option<&'r [u8]>,
    /// A format 3 queue's header (`q0`).
    pub header: Option<&'r [u8]>,
    /// A format 3 queue's deltas, oldest first.
    pub deltas: Vec<&'r [u8]>,
}

impl PendingQueue<'_> {
    /// True when the slice has no queue at all (no field of one).
    pub fn is_none(&self) -> bool {
        self.string.is_none() && self.header.is_none() && self.deltas.is_empty()
    }
}

/// A statistic's accumulator as read (`stats_fold.lua`): `at` and the
/// values `a1` to `a<ak>`.
pub(super) struct Accumulator<'r> {
    /// `at`: the coarser slices its values fold into.
    pub slices: &'r [u8],
    /// `a1` to `a<ak>`, oldest first.
    pub values: Vec<&'r Reply>,
}

/// An accumulator's values, oldest first, and the slices (precision,
/// start) they fold into.
type Accumulated<T> = (Vec<T>, Vec<(u64, u64)>);

impl Accumulator<'_> {
    /// Its values, each read by `parse`, and the slices they fold into,
    /// as (precision, slice start) pairs (`keys`: the series' layout).
    pub fn read<T>(
        &self,
        keys: &SpaceKeys<'_>,
        parse: impl Fn(&Reply) -> std::result::Result<T, String>,
    ) -> std::result::Result<Accumulated<T>, String> {
        let values = self.values.iter().map(|v| parse(v)).collect::<std::result::Result<_, _>>()?;
        let into = slice_tokens(self.slices, "at")?
            .into_iter()
            .map(|(p, f)| {
                keys.slice_of_field(p, f)
                    .map(|start| (p, start))
                    .ok_or_else(|| format!("its at names {f}, not a {p} s slice"))
            })
            .collect::<std::result::Result<_, _>>()?;
        Ok((values, into))
    }
}

/// The `<precision>:<field>` tokens of a pending slice's `t` or `at`
/// (`which`), separated by spaces, as numbers.
pub(super) fn slice_tokens(
    text: &[u8],
    which: &str,
) -> std::result::Result<Vec<(u64, u64)>, String> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|text| {
            text.split_whitespace()
                .map(|token| {
                    let (p, f) = token.split_once(':')?;
                    Some((p.parse().ok()?, f.parse().ok()?))
                })
                .collect()
        })
        .ok_or_else(|| format!("its {which} is not <precision>:<field>"))
}

/// A pending slice's fields, from its HGETALL.
pub(super) struct PendingFields<'r> {
    /// `s`: the finest slice's field.
    pub slice: &'r Reply,
    /// `b`: its value.
    pub value: &'r Reply,
    /// `t`: where it folds.
    pub folds_into: &'r Reply,
    /// A statistic's queue.
    pub queue: PendingQueue<'r>,
    /// A statistic's accumulator, when it holds values.
    pub accumulator: Option<Accumulator<'r>>,
}

impl<'r> PendingFields<'r> {
    /// The fields of an HGETALL reply (RESP2 or RESP3), `None` for a slice
    /// that is not there, or what is wrong with them: a field missing,
    /// unknown, a queue whose deltas are not `q1` to `q<n>`, or an
    /// accumulator whose values are not `a1` to `a<ak>`.
    pub fn of(reply: &'r Reply) -> std::result::Result<Option<Self>, String> {
        let pairs: Vec<(&Reply, &Reply)> = match reply {
            Reply::Map(pairs) => pairs.iter().map(|(f, v)| (f, v)).collect(),
            Reply::Array(flat) if flat.len() % 2 == 0 => {
                flat.chunks_exact(2).map(|p| (&p[0], &p[1])).collect()
            }
            Reply::Nil => Vec::new(),
            other => return Err(format!("it is not a pending slice: {other:?}")),
        };
        if pairs.is_empty() {
            return Ok(None);
        }
        let (mut slice, mut value, mut folds_into) = (None, None, None);
        let mut queue = PendingQueue::default();
        let mut deltas: Vec<(u64, &[u8])> = Vec::new();
        let (mut held, mut into) = (None, None);
        let mut accumulated: Vec<(u64, &Reply)> = Vec::new();
        for (f, v) in pairs {
            let name = reply_bytes(f, "a field")?;
            let unknown = || format!("it has a field {:?}", String::from_utf8_lossy(name));
            let numbered = |digits: &[u8]| -> std::result::Result<u64, String> {
                if !digits.first().is_some_and(|d| (b'1'..=b'9').contains(d)) {
                    return Err(unknown());
                }
                std::str::from_utf8(digits)
                    .ok()
                    .and_then(|d| d.parse().ok())
                    .ok_or_else(unknown)
            };
            match name {
                b"s" => slice = Some(v),
                b"b" => value = Some(v),
                b"t" => folds_into = Some(v),
                b"q" => queue.string = Some(reply_bytes(v, "a queue")?),
                b"q0" => queue.header = Some(reply_bytes(v, "a queue's header")?),
                b"ak" => held = Some(reply_number::<u64>(v, "a count")?),
                b"at" => into = Some(reply_bytes(v, "the accumulator's slices")?),
                [b'q', digits @ ..] => deltas.push((numbered(digits)?, reply_bytes(v, "a delta")?)),
                [b'a', digits @ ..] => accumulated.push((numbered(digits)?, v)),
                _ => return Err(unknown()),
            }
        }
        let missing = |what: &str| format!("it has no {what}");
        deltas.sort_unstable_by_key(|d| d.0);
        if deltas.iter().zip(1..).any(|(d, i)| d.0 != i) {
            return Err(format!("its queue's deltas are not q1 to q{}", deltas.len()));
        }
        if !deltas.is_empty() && queue.header.is_none() {
            return Err(missing("queue header (q0)"));
        }
        queue.deltas = deltas.into_iter().map(|d| d.1).collect();
        accumulated.sort_unstable_by_key(|a| a.0);
        let accumulator = match (held, into) {
            (None, None) if accumulated.is_empty() => None,
            (Some(k), Some(slices))
                if k > 0
                    && accumulated.len() as u64 == k
                    && accumulated.iter().zip(1..).all(|(a, i)| a.0 == i) =>
            {
                Some(Accumulator {
                    slices,
                    values: accumulated.into_iter().map(|a| a.1).collect(),
                })
            }
            (held, _) => {
                return Err(format!(
                    "its accumulator is not ak, at and a1 to a<ak> (ak {held:?}, {} values)",
                    accumulated.len()
                ));
            }
        };
        Ok(Some(PendingFields {
            slice: slice.ok_or_else(|| missing("s"))?,
            value: value.ok_or_else(|| missing("b"))?,
            folds_into: folds_into.ok_or_else(|| missing("t"))?,
            queue,
            accumulator,
        }))
    }
}

impl<'r> PendingFields<'r> {
    /// The fields of an `HMGET s b t q` reply, `None` for a slice that is
    /// not there (no `s`).
    pub fn of_named(reply: &'r Reply) -> std::result::Result<Option<Self>, String> {
        match reply {
            Reply::Array(fields) => match fields.as_slice() {
                [Reply::Nil, ..] => Ok(None),
                [slice, value, folds_into, queue] => Ok(Some(PendingFields {
                    slice,
                    value,
                    folds_into,
                    queue: PendingQueue {
                        string: match queue {
                            Reply::Nil => None,
                            q => Some(reply_bytes(q, "a queue")?),
                        },
                        ..PendingQueue::default()
                    },
                    accumulator: None,
                })),
                other => Err(format!("HMGET answered {other:?}")),
            },
            other => Err(format!("HMGET answered {other:?}")),
        }
    }
}

/// Series read this many at a time or more have their pending slices
/// fetched by one `pending_read.lua` call per slot, which looks them up a
/// run at a time with EXISTS (most series have none) and reads only runs
/// where one exists; fewer, by one command each, which costs Redis less
/// than a script's call.
const PENDING_SCRIPT_MIN: usize = 8;

impl RedisSliceStore {
    /// What each of the pending slices `pending` (their keys; of series
    /// on `shards`, one per key) holds, in order: its HGETALL (`queued`, a
    /// statistic's) or its `HMGET s b t q`.
    pub(super) async fn fetch_pending(
        &self,
        keys: SpaceKeys<'_>,
        pending: &[String],
        shards: &[u32],
        queued: bool,
    ) -> Result<Vec<Reply>> {
        // Grouped as writes are ([`RedisSliceStore::apply_calls`]): every
        // key at once where the layout makes one call, else a shard's (one
        // hash tag, a slot) at a time; one script call where they are
        // many, else a command each.
        let one_call = keys.one_call(self.redis.is_cluster());
        let mut slots: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, &shard) in shards.iter().enumerate() {
            slots.entry(if one_call { 0 } else { shard }).or_default().push(i);
        }
        let (many, few): (Vec<Vec<usize>>, Vec<Vec<usize>>) =
            slots.into_values().partition(|of| of.len() >= PENDING_SCRIPT_MIN);
        let few: Vec<usize> = few.concat();
        let pipes = few
            .iter()
            .map(|&i| {
                let mut pipe = redis::pipe();
                if queued {
                    pipe.cmd("HGETALL").arg(&pending[i]);
                } else {
                    pipe.cmd("HMGET").arg(&pending[i]).arg(&SUM_FIELDS[..]);
                }
                pipe
            })
            .collect();
        let calls = many.iter().map(|of| {
            let mut call = self.pending_read.prepare_invoke();
            for &i in of {
                call.key(&pending[i]);
            }
            if !queued {
                call.arg(&SUM_FIELDS[..]);
            }
            let mut handle = self.redis.handle();
            async move { call.invoke_async::<Vec<Reply>>(&mut handle).await }
        });
        let (singles, scripted) = futures::try_join!(
            self.redis.run_pipelines(pipes),
            async { Ok(futures::future::try_join_all(calls).await?) }
        )?;
        // A key the script does not name has no pending slice: it answers
        // what its command would.
        let none = if queued {
            Reply::Array(Vec::new())
        } else {
            Reply::Array(vec![Reply::Nil; SUM_FIELDS.len()])
        };
        let mut out = vec![none; pending.len()];
        for (&i, reply) in few.iter().zip(singles) {
            out[i] = reply.into_iter().next().ok_or_else(|| {
                Error::Corrupt(format!("{}: redis answered nothing", pending[i]))
            })?;
        }
        for (of, replies) in many.iter().zip(scripted) {
            let mut replies = replies.into_iter();
            while let Some(at) = replies.next() {
                let slot = match &at {
                    Reply::Int(n) => usize::try_from(n - 1).ok().and_then(|n| of.get(n)),
                    _ => None,
                };
                let (Some(&i), Some(reply)) = (slot, replies.next()) else {
                    return Err(Error::Corrupt(format!(
                        "pending_read.lua answered {at:?} where the position of one of {} keys \
                         and its reply were due",
                        of.len()
                    )));
                };
                out[i] = reply;
            }
        }
        Ok(out)
    }
}

/// The fields a read takes of a sum's pending slice (a `q` is refused by
/// its parse).
const SUM_FIELDS: [&str; 4] = ["s", "b", "t", "q"];

/// Adds each series' pending slice (`stats_fold.lua`) to the slice holding
/// it at every precision read that it folds into (those the series kept
/// when it was written: a fold passes over the others), within the read's
/// slices, after the accumulator's values (older) to the coarser slices
/// they fold into; `add` merges two values of one slice.
pub(super) fn add_pending<T: Clone>(
    read: SliceRead<'_>,
    slices: &mut [Vec<Vec<(u64, T)>>],
    pending: Vec<Option<Pending<T>>>,
    add: impl Fn(&mut T, &T) -> Result<()>,
) -> Result<()> {
    for (per, pending) in slices.iter_mut().zip(pending) {
        let Some(pending) = pending else {
            continue;
        };
        for (slices, &r) in per.iter_mut().zip(read.precisions) {
            let Some(precision) = read.space.precisions.iter().find(|p| p.seconds == r) else {
                continue;
            };
            let within = |start: u64| match read.slices {
                SliceSel::Range { from, to } => (from..=to).contains(&start),
                _ => true,
            };
            for &(_, start) in pending.accumulated_into.iter().filter(|(p, _)| *p == r) {
                if within(start) {
                    for value in &pending.accumulated {
                        add_to(slices, start, value, &add)?;
                    }
                }
            }
            if !pending.folds_into.contains(&r) {
                continue;
            }
            let start = precision.slice_of_second(pending.second);
            if within(start) {
                add_to(slices, start, &pending.value, &add)?;
            }
        }
    }
    Ok(())
}

/// Adds `value` to the slice of `slices` (sorted by start) starting at
/// `start`, or inserts it there.
fn add_to<T: Clone>(
    slices: &mut Vec<(u64, T)>,
    start: u64,
    value: &T,
    add: impl Fn(&mut T, &T) -> Result<()>,
) -> Result<()> {
    match slices.binary_search_by_key(&start, |(s, _)| *s) {
        Ok(i) => add(&mut slices[i].1, value),
        Err(i) => {
            slices.insert(i, (start, value.clone()));
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pending slice's HGETALL: its queue's deltas and its accumulator's
    /// values in the order of their numbers whatever the order of the
    /// reply, none for a missing hash, and an error naming what is wrong
    /// otherwise.
    #[test]
    fn pending_fields_order_the_queue_and_name_what_is_wrong() {
        let b = |s: &str| Reply::BulkString(s.as_bytes().to_vec());
        let hash = |fields: &[&str]| {
            Reply::Array(fields.iter().flat_map(|f| [b(f), b(&format!("<{f}>"))]).collect())
        };
        let reply = hash(&["s", "q2", "b", "q0", "t", "q1"]);
        let got = PendingFields::of(&reply).unwrap().unwrap();
        assert_eq!(got.queue.deltas, vec![&b"<q1>"[..], &b"<q2>"[..]]);
        assert_eq!(got.queue.header, Some(&b"<q0>"[..]));
        assert_eq!(got.queue.string, None);
        assert_eq!(got.value, &b("<b>"));
        assert!(PendingFields::of(&Reply::Array(vec![])).unwrap().is_none());
        let reply = hash(&["s", "b", "t", "q"]);
        let old = PendingFields::of(&reply).unwrap().unwrap();
        assert_eq!(old.queue.string, Some(&b"<q>"[..]));
        assert!(!old.queue.is_none());
        for (fields, why) in [
            (&["s", "b", "t", "q0", "q2"][..], "not q1 to q1"),
            (&["s", "b", "t", "q1"][..], "no queue header (q0)"),
            (&["s", "b", "t", "q0", "q1x"][..], "a field \"q1x\""),
            (&["s", "b", "t", "x"][..], "a field \"x\""),
            (&["s", "t"][..], "no b"),
        ] {
            let e = PendingFields::of(&hash(fields)).err().unwrap();
            assert!(e.contains(why), "{e} (wanted {why})");
        }
        // The accumulator: its values in the order of their numbers.
        let with = |fields: &[&str], ak: &str| {
            let Reply::Array(mut flat) = hash(fields) else {
                unreachable!()
            };
            flat.extend([b("ak"), b(ak)]);
            Reply::Array(flat)
        };
        let reply = with(&["s", "a2", "b", "at", "t", "a1"], "2");
        let got = PendingFields::of(&reply).unwrap().unwrap();
        let acc = got.accumulator.unwrap();
        assert_eq!(acc.values, vec![&b("<a1>"), &b("<a2>")]);
        assert_eq!(acc.slices, b"<at>");
        assert!(
            slice_tokens(acc.slices, "at")
                .unwrap_err()
                .contains("its at is not <precision>:<field>")
        );
        assert_eq!(
            slice_tokens(b"5:100 60:60", "at").unwrap(),
            vec![(5, 100), (60, 60)]
        );
        for (reply, why) in [
            (with(&["s", "b", "t", "at", "a1"], "2"), "ak Some(2), 1 values"),
            (with(&["s", "b", "t", "at", "a2"], "1"), "ak Some(1), 1 values"),
            (with(&["s", "b", "t", "a1"], "1"), "ak Some(1), 1 values"),
            (hash(&["s", "b", "t", "a1"]), "ak None, 1 values"),
            (hash(&["s", "b", "t", "a0"]), "a field \"a0\""),
            (with(&["s", "b", "t", "at", "a1"], "x"), "not a count"),
        ] {
            let e = PendingFields::of(&reply).err().unwrap();
            assert!(e.contains(why), "{e} (wanted {why})");
        }
    }
}
