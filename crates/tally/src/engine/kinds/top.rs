//! The most-frequent kind: exact counts per item, folded into a bounded
//! Space-Saving summary where stored ([`Summary`]). The one implementation
//! of most-frequent items: the time-series store's (`tsdb::topn` is this
//! module) and every space of this kind.
//!
//! A [`TopValue`] is a multiset: items with positive counts. A write's
//! delta is exact, and merging deltas (the aggregating writer, the write
//! path's duplicate merging) is the multiset sum: associative, commutative,
//! with the empty multiset as identity, and undone exactly by subtraction.
//! A read of several slices merges their stored summaries the same way,
//! then ranks the `n` largest ([`TopValue::top`]).
//!
//! What a store keeps per slice is bounded: [`TopValue::fold`] adds a
//! delta's items, lowest count first (ties by item, as Redis's ZRANGE
//! replays them), into a Space-Saving summary of at most `capacity` items.
//! Folding is exact while the items fit; past that it keeps Space-Saving's
//! guarantees (Metwally et al. 2005, tested below): a count never
//! under-estimates, over-estimates by at most the summary's lowest count,
//! and every item whose true count exceeds total / capacity is kept. So a
//! fold is neither associative nor commutative once full (which items are
//! evicted depends on the order), and is not a merge: stores call it, the
//! writer never does. A summary already holding more than `capacity` items
//! (the capacity was lowered) keeps its size.
//!
//! [`Summary`] is Space-Saving itself: while it has room it is exact; when
//! full, a new item replaces the item with the lowest count (ties: the
//! smallest item in byte order) and starts from that count plus its own.
//! The Redis store applies the same rule in Lua (`lua/kind_top.lua`, on a
//! sorted set, where ZRANGE 0 0 picks the same victim), so every store
//! holds the same summary for the same writes. Rankings break ties by
//! item, ascending.
//!
//! Encoding (SQLite; Redis keeps a summary as a sorted set): a MessagePack
//! array `[1, item, count, item, count, ...]`, items in byte order.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::msgpack::{Reader, Writer};
use crate::engine::aggregate::{Aggregate, Codec, Undo};
use crate::error::{Error, Result};

const FORMAT: i64 = 1;

/// The default number of items a summary keeps per key and bucket.
pub const DEFAULT_CAPACITY: usize = 64;
/// The largest count one write may add to an item.
pub const MAX_ITEM_COUNT: i64 = 1 << 32;

/// An item and its (estimated) count.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemCount {
    /// The item.
    pub item: String,
    /// Its count (exact while the summaries involved never filled up).
    pub count: i64,
}

/// A Space-Saving summary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    items: HashMap<String, i64>,
}

impl Summary {
    /// A summary holding `items` as stored.
    pub fn from_items(items: impl IntoIterator<Item = (String, i64)>) -> Self {
        Summary {
            items: items.into_iter().collect(),
        }
    }

    /// Adds `count` to `item`, keeping at most `capacity` items.
    pub fn add(&mut self, item: &str, count: i64, capacity: usize) {
        if let Some(c) = self.items.get_mut(item) {
            *c += count;
            return;
        }
        if self.items.len() < capacity {
            self.items.insert(item.to_owned(), count);
            return;
        }
        let victim = self
            .items
            .iter()
            .min_by(|a, b| {
                a.1.cmp(b.1)
                    .then_with(|| a.0.as_bytes().cmp(b.0.as_bytes()))
            })
            .map(|(k, v)| (k.clone(), *v));
        if let Some((victim, floor)) = victim {
            self.items.remove(&victim);
            self.items.insert(item.to_owned(), floor + count);
        }
    }

    /// The items, in no particular order.
    pub fn items(&self) -> impl Iterator<Item = (&str, i64)> {
        self.items.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// The number of items held.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Items in the order Redis's ZRANGE returns them: count ascending, then
/// item ascending (the order merges replay them in).
pub fn ascending(items: impl IntoIterator<Item = (String, i64)>) -> Vec<(String, i64)> {
    let mut v: Vec<(String, i64)> = items.into_iter().collect();
    v.sort_by(|a, b| {
        a.1.cmp(&b.1)
            .then_with(|| a.0.as_bytes().cmp(b.0.as_bytes()))
    });
    v
}

/// The `n` most frequent of `items` (summed per item): count descending,
/// ties by item ascending.
pub fn top(items: impl IntoIterator<Item = (String, i64)>, n: usize) -> Vec<ItemCount> {
    let mut sums: HashMap<String, i64> = HashMap::new();
    for (item, count) in items {
        *sums.entry(item).or_default() += count;
    }
    let mut ranked: Vec<ItemCount> = sums
        .into_iter()
        .map(|(item, count)| ItemCount { item, count })
        .collect();
    ranked.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.item.as_bytes().cmp(b.item.as_bytes()))
    });
    ranked.truncate(n);
    ranked
}

/// Items and their counts (all positive).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopValue {
    counts: BTreeMap<String, i64>,
}

fn overflow(item: &str) -> Error {
    Error::InvalidCount(format!(
        "the count of item {item:?} would pass 2^63; nothing was changed"
    ))
}

impl TopValue {
    /// Items with counts (each at least 1; repeated items add up).
    pub fn from_counts<'a>(items: impl IntoIterator<Item = (&'a str, i64)>) -> Result<Self> {
        let mut v = TopValue::default();
        for (item, count) in items {
            v.add(item, count)?;
        }
        Ok(v)
    }

    /// Adds `count` (at least 1) to `item`.
    pub fn add(&mut self, item: &str, count: i64) -> Result<()> {
        if count < 1 {
            return Err(Error::InvalidCount(format!(
                "item {item:?}: a count must be at least 1, got {count}"
            )));
        }
        match self.counts.get_mut(item) {
            Some(c) => *c = c.checked_add(count).ok_or_else(|| overflow(item))?,
            None => {
                self.counts.insert(item.to_owned(), count);
            }
        }
        Ok(())
    }

    /// The count of `item` (0 when absent).
    pub fn count(&self, item: &str) -> i64 {
        self.counts.get(item).copied().unwrap_or(0)
    }

    /// The items and counts, in byte order of the items.
    pub fn items(&self) -> impl Iterator<Item = (&str, i64)> {
        self.counts.iter().map(|(k, &v)| (k.as_str(), v))
    }

    /// The number of items.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// True when it holds no item.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// The `n` most frequent items: count descending, ties by item.
    pub fn top(&self, n: usize) -> Vec<ItemCount> {
        top(self.counts.iter().map(|(k, &v)| (k.clone(), v)), n)
    }

    /// Folds a delta into `self`, a stored Space-Saving summary of at most
    /// `capacity` items (see the module docs). Fails, changing nothing,
    /// when a count could pass 2^63.
    pub fn fold(&mut self, delta: &TopValue, capacity: usize) -> Result<()> {
        // No count can end above the highest one plus everything added.
        let highest = self.counts.values().copied().max().unwrap_or(0);
        let added = delta
            .counts
            .values()
            .try_fold(highest, |a, &b| a.checked_add(b));
        if added.is_none() {
            let item = delta.counts.keys().next().map(String::as_str).unwrap_or("");
            return Err(overflow(item));
        }
        let mut summary = Summary::from_items(std::mem::take(&mut self.counts));
        for (item, count) in ascending(delta.counts.iter().map(|(k, &v)| (k.clone(), v))) {
            summary.add(&item, count, capacity);
        }
        self.counts = summary.items().map(|(k, v)| (k.to_owned(), v)).collect();
        Ok(())
    }
}

impl Aggregate for TopValue {
    fn identity() -> Self {
        TopValue::default()
    }

    /// The multiset sum. Fails, changing nothing, when a count would pass
    /// 2^63.
    fn merge(&mut self, other: &Self) -> Result<()> {
        for (item, &c) in &other.counts {
            if self.count(item).checked_add(c).is_none() {
                return Err(overflow(item));
            }
        }
        for (item, &c) in &other.counts {
            *self.counts.entry(item.clone()).or_default() += c;
        }
        Ok(())
    }

    fn is_identity(&self) -> bool {
        self.counts.is_empty()
    }
}

impl Undo for TopValue {
    /// Takes back an earlier merge of `other`. Fails, changing nothing,
    /// when `self` holds less of an item than `other`.
    fn subtract(&mut self, other: &Self) -> Result<()> {
        for (item, &c) in &other.counts {
            let have = self.count(item);
            if have < c {
                return Err(Error::InvalidCount(format!(
                    "cannot take {c} of item {item:?} back from {have}; nothing was changed"
                )));
            }
        }
        for (item, &c) in &other.counts {
            let left = self.counts[item] - c;
            if left == 0 {
                self.counts.remove(item);
            } else {
                self.counts.insert(item.clone(), left);
            }
        }
        Ok(())
    }
}

impl Codec for TopValue {
    fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        w.array(1 + 2 * self.counts.len());
        w.int(FORMAT);
        for (item, &c) in &self.counts {
            w.str(item);
            w.int(c);
        }
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes, "most-frequent summary");
        let len = r.array()?;
        if len % 2 != 1 {
            return Err(r.corrupt(format!("it has {len} fields")));
        }
        r.int_in("the format", FORMAT, FORMAT)?;
        let mut counts = BTreeMap::new();
        let mut previous: Option<&str> = None;
        for _ in 0..len / 2 {
            let item = r.str()?;
            if previous.is_some_and(|p| p >= item) {
                return Err(r.corrupt(format!("item {item:?} is out of order")));
            }
            let count = r.int_in("a count", 1, i64::MAX)?;
            counts.insert(item.to_owned(), count);
            previous = Some(item);
        }
        r.finish()?;
        Ok(TopValue { counts })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::kinds::laws::{check_corrupt, check_merge, check_round_trip, merged};
    use proptest::prelude::*;

    fn arb_top() -> impl Strategy<Value = TopValue> {
        proptest::collection::vec((0u8..12, 1i64..50), 0..15).prop_map(|items| {
            let mut v = TopValue::default();
            for (i, c) in items {
                v.add(&format!("i{i}"), c).unwrap();
            }
            v
        })
    }

    #[test]
    fn counts_are_checked() {
        let mut v = TopValue::default();
        assert!(
            v.add("a", 0)
                .unwrap_err()
                .to_string()
                .contains("at least 1, got 0")
        );
        v.add("a", i64::MAX).unwrap();
        let before = v.clone();
        assert!(
            v.add("a", 1)
                .unwrap_err()
                .to_string()
                .contains("would pass 2^63")
        );
        let one = TopValue::from_counts([("b", 1), ("a", 1)]).unwrap();
        assert!(v.merge(&one).is_err());
        assert!(v.fold(&one, 10).is_err());
        assert_eq!(v, before);
        let err = TopValue::default().subtract(&one).unwrap_err();
        assert!(
            err.to_string()
                .contains("cannot take 1 of item \"a\" back from 0"),
            "{err}"
        );
    }

    #[test]
    fn the_encoding_is_the_documented_msgpack_array() {
        let v = TopValue::from_counts([("b", 300), ("a", 2)]).unwrap();
        let hex: String = v.to_bytes().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "9501a16102a162cd012c");
        check_corrupt::<TopValue>(&[
            &[0x95, 0x01, 0xa1, 0x62, 0x01, 0xa1, 0x61, 0x01][..],
            &[0x93, 0x01, 0xa1, 0x61, 0x00],
        ]);
    }

    #[test]
    fn fold_replays_the_lowest_counts_first() {
        // Capacity 2, stored {a: 5, b: 1}; the delta {c: 3, d: 1} replays
        // d (1) first: it evicts b (1) at 2; then c evicts d (2) at 5.
        let mut stored = TopValue::from_counts([("a", 5), ("b", 1)]).unwrap();
        stored
            .fold(&TopValue::from_counts([("c", 3), ("d", 1)]).unwrap(), 2)
            .unwrap();
        assert_eq!(stored, TopValue::from_counts([("a", 5), ("c", 5)]).unwrap());
    }

    proptest! {
        #[test]
        fn merge_is_associative_and_commutative_with_identity_and_undo(
            a in arb_top(), b in arb_top(), c in arb_top(),
        ) {
            check_merge(&a, &b, &c, true)?;
            let ab_c = merged(&a, &[&b, &c]);
            let bc = merged(&b, &[&c]);
            let mut back = ab_c.clone();
            back.subtract(&bc).unwrap();
            prop_assert_eq!(&back, &a);
        }

        #[test]
        fn encoding_round_trips(a in arb_top()) {
            check_round_trip(&a)?;
        }

        /// Folding deltas: exact while the items fit; then Space-Saving's
        /// guarantees against the exact multiset sum.
        #[test]
        fn folding_keeps_space_saving_guarantees(
            deltas in proptest::collection::vec(arb_top(), 1..30),
            capacity in 1usize..15,
        ) {
            let mut stored = TopValue::default();
            let mut truth = TopValue::default();
            for d in &deltas {
                stored.fold(d, capacity).unwrap();
                truth.merge(d).unwrap();
            }
            prop_assert!(stored.len() <= capacity);
            if truth.len() <= capacity {
                prop_assert_eq!(&stored, &truth);
            }
            let total: i64 = truth.items().map(|(_, c)| c).sum();
            prop_assert_eq!(stored.items().map(|(_, c)| c).sum::<i64>(), total);
            let floor = stored.items().map(|(_, c)| c).min().unwrap_or(0);
            for (item, c) in stored.items() {
                prop_assert!(c >= truth.count(item), "{} under-estimated", item);
                prop_assert!(c - truth.count(item) <= floor, "{} over by more than {}", item, floor);
            }
            for (item, c) in truth.items() {
                if c * capacity as i64 > total {
                    prop_assert!(stored.count(item) > 0, "heavy hitter {} ({}) evicted", item, c);
                }
            }
        }
    }

    #[test]
    fn exact_while_small_then_evicts_the_smallest() {
        let mut s = Summary::default();
        s.add("b", 5, 3);
        s.add("a", 5, 3);
        s.add("c", 7, 3);
        s.add("a", 1, 3);
        assert_eq!(
            top(s.items().map(|(k, v)| (k.to_owned(), v)), 10),
            vec![
                ItemCount {
                    item: "c".into(),
                    count: 7
                },
                ItemCount {
                    item: "a".into(),
                    count: 6
                },
                ItemCount {
                    item: "b".into(),
                    count: 5
                },
            ]
        );
        // Full: "d" replaces the smallest (b, 5) and starts at 5 + 1.
        s.add("d", 1, 3);
        let got: HashMap<&str, i64> = s.items().collect();
        assert_eq!(got, HashMap::from([("a", 6), ("c", 7), ("d", 6)]));
    }

    #[test]
    fn ties_are_ordered_by_item() {
        let ranked = top(vec![("y".into(), 2), ("x".into(), 2), ("z".into(), 3)], 2);
        assert_eq!(ranked[0].item, "z");
        assert_eq!(ranked[1].item, "x");
    }

    proptest! {
        #[test]
        fn heavy_hitters_survive_and_counts_never_under_estimate(
            stream in proptest::collection::vec((0u8..40, 1i64..5), 1..400),
            capacity in 1usize..12,
        ) {
            let mut s = Summary::default();
            let mut truth: HashMap<String, i64> = HashMap::new();
            for (item, count) in &stream {
                let item = format!("i{item}");
                s.add(&item, *count, capacity);
                *truth.entry(item).or_default() += count;
            }
            prop_assert!(s.len() <= capacity);
            let total: i64 = truth.values().sum();
            let kept: HashMap<&str, i64> = s.items().collect();
            for (item, &c) in &kept {
                prop_assert!(c >= truth[*item]);
            }
            for (item, &c) in &truth {
                if c * capacity as i64 > total {
                    prop_assert!(kept.contains_key(item.as_str()), "{} ({}) evicted", item, c);
                }
            }
        }
    }
}
