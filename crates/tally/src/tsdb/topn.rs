//! Most frequent items in bounded memory: the Space-Saving summary.
//!
//! A summary holds at most `capacity` items with counts. While it has room
//! it is exact. When full, a new item replaces the item with the lowest
//! count (ties: the smallest item in byte order) and starts from that count
//! plus its own, so counts only ever over-estimate, by at most the evicted
//! count, and every item whose true count exceeds total/capacity is kept
//! (Metwally et al. 2005). The Redis store applies the same rule in Lua on a
//! sorted set (ZRANGE 0 0 picks the same victim), so both backends hold the
//! same summary for the same writes. Rankings break ties by item, ascending.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
