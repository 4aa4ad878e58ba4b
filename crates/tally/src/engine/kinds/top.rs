//! The most-frequent kind: exact counts per item, folded into a bounded
//! Space-Saving summary where stored ([`crate::tsdb::topn`]).
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
//! Encoding (SQLite; Redis keeps a summary as a sorted set): a MessagePack
//! array `[1, item, count, item, count, ...]`, items in byte order.

use std::collections::BTreeMap;

use super::msgpack::{Reader, Writer};
use crate::engine::aggregate::{Aggregate, Codec, Undo};
use crate::error::{Error, Result};
use crate::tsdb::topn::{self, ItemCount, Summary};

const FORMAT: i64 = 1;

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
        topn::top(self.counts.iter().map(|(k, &v)| (k.clone(), v)), n)
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
        for (item, count) in topn::ascending(delta.counts.iter().map(|(k, &v)| (k.clone(), v))) {
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
    use crate::engine::kinds::laws::{check_merge, check_round_trip, merged};
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
        for bad in [
            &[0x95, 0x01, 0xa1, 0x62, 0x01, 0xa1, 0x61, 0x01][..],
            &[0x93, 0x01, 0xa1, 0x61, 0x00],
        ] {
            assert!(
                matches!(TopValue::decode(bad), Err(Error::Corrupt(_))),
                "{bad:?}"
            );
        }
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
}
