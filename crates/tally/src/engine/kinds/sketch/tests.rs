//! The sketch's tests: its settings, bucket math, bounds, merges and walks.

use super::*;
use crate::engine::kinds::laws::{count_refused, refused};
use proptest::prelude::*;

#[test]
fn settings_are_checked_and_say_why() {
    assert!(SketchSettings::new(0.01, 2048).is_ok());
    assert!(SketchSettings::new(MIN_ALPHA, MIN_MAX_BUCKETS).is_ok());
    assert!(SketchSettings::new(MAX_ALPHA, MAX_MAX_BUCKETS).is_ok());
    for alpha in [0.0, 0.00001, 0.2, f64::NAN, -0.01] {
        let err = SketchSettings::new(alpha, 2048).unwrap_err();
        assert!(
            err.to_string()
                .contains("relative accuracy of a quantile sketch must be 0.0001 to 0.1"),
            "{err}"
        );
    }
    let err = SketchSettings::new(0.01, 8).unwrap_err();
    assert!(
        err.to_string().contains("must be 16 to 65536, got 8"),
        "{err}"
    );
}

#[test]
fn a_bucket_reports_a_value_within_alpha_of_all_it_holds() {
    let s = SketchSettings::default();
    for x in [1e-300, 1e-5, 0.3, 1.0, 1.0201, 7.5, 1e6, 1e300, f64::MAX] {
        let v = s.bucket_value(s.index(x));
        assert!(
            ((v - x) / x).abs() <= s.alpha() * (1.0 + 1e-9),
            "{x} -> {v}"
        );
    }
}

#[test]
fn buckets_ascend_and_add_up_to_the_count() {
    let mut s = Sketch::default();
    for (x, w) in [(-5.0, 2), (0.0, 1), (3.0, 4), (-0.5, 1), (100.0, 1)] {
        s.add(x, w).unwrap();
    }
    let b: Vec<(f64, u64)> = s.buckets().collect();
    assert!(b.windows(2).all(|w| w[0].0 < w[1].0), "{b:?}");
    assert_eq!(b.iter().map(|&(_, c)| c).sum::<u64>(), s.count());
    assert_eq!(b.len(), 5);
    assert_eq!(b[2], (0.0, 1));
    assert!((b[0].0 + 5.0).abs() <= 5.0 * s.settings().alpha() * (1.0 + 1e-9));
    assert!(Sketch::default().buckets().next().is_none());
}

/// All ranks at once read what each rank alone reads, through the
/// negative store, the zeros and the positive store.
#[test]
fn values_at_ranks_are_each_rank_alone() {
    let mut s = Sketch::default();
    for (x, w) in [
        (-5.0, 2),
        (0.0, 3),
        (3.0, 4),
        (-0.5, 1),
        (100.0, 1),
        (7.0, 2),
    ] {
        s.add(x, w).unwrap();
    }
    let ranks: Vec<u64> = (1..=s.count()).collect();
    let at_ranks = |s: &Sketch, ranks: &[u64]| {
        let mut got = Vec::new();
        s.values_at_ranks(ranks, |v| got.push(v));
        got
    };
    let want: Vec<f64> = ranks.iter().map(|&r| s.value_at_rank(r).unwrap()).collect();
    assert_eq!(at_ranks(&s, &ranks), want);
    let some = [2, 2, 6, 13];
    assert_eq!(
        at_ranks(&s, &some),
        some.map(|r| s.value_at_rank(r).unwrap())
    );
    assert!(at_ranks(&Sketch::default(), &[]).is_empty());
}

#[test]
fn non_finite_values_and_zero_weights_are_refused() {
    let mut s = Sketch::default();
    let err = s.add(f64::NAN, 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid input: NaN is not a finite number; nothing was recorded"
    );
    assert!(
        s.add(f64::NEG_INFINITY, 1)
            .unwrap_err()
            .to_string()
            .contains("-inf is not a finite")
    );
    assert!(s.add(1.0, 0).is_err());
    assert_eq!(s, Sketch::default());
}

#[test]
fn counts_past_2_53_are_refused_and_change_nothing() {
    let mut s = Sketch::default();
    s.add(1.0, MAX_COUNT - 1).unwrap();
    count_refused(&mut s, |s| s.add(2.0, 2));
    let mut other = Sketch::default();
    other.add(3.0, 2).unwrap();
    refused(&mut s, |s| s.merge(&other));
    s.add(2.0, 1).unwrap();
    assert_eq!(s.count(), MAX_COUNT);
}

#[test]
fn sketches_of_different_accuracy_do_not_merge() {
    let mut a = Sketch::default();
    a.add(1.0, 1).unwrap();
    let mut b = Sketch::new(SketchSettings::new(0.02, 2048).unwrap());
    b.add(1.0, 1).unwrap();
    let before = a.clone();
    let err = a.merge(&b).unwrap_err();
    assert!(
        err.to_string().contains("relative accuracy 0.01 and 0.02"),
        "{err}"
    );
    assert_eq!(a, before);
    // An empty sketch of other settings merges either way.
    let empty = Sketch::new(SketchSettings::new(0.02, 2048).unwrap());
    a.merge(&empty).unwrap();
    assert_eq!(a, before);
    let mut e = empty.clone();
    e.merge(&a).unwrap();
    assert_eq!(e, a);
}

#[test]
fn a_store_spans_at_most_its_bound_keeping_the_highest_values() {
    let settings = SketchSettings::new(0.01, 16).unwrap();
    let mut s = Sketch::new(settings);
    for k in 0..100 {
        s.add(1.05f64.powi(k), 1).unwrap();
        s.add(-(1.05f64.powi(k)), 1).unwrap();
    }
    assert_eq!(s.positive.counts.len(), 16);
    assert_eq!(s.negative.counts.len(), 16);
    // The highest positive values and the negative values nearest zero
    // keep their buckets; the rest is folded into the lowest kept one.
    assert_eq!(s.positive.last(), settings.index(1.05f64.powi(99)));
    assert_eq!(s.negative.first, settings.index(1.0));
    let top = s.value_at_rank(s.count()).unwrap();
    assert!((top / 1.05f64.powi(99) - 1.0).abs() <= 0.01 * (1.0 + 1e-9));
    let bottom = s.value_at_rank(1).unwrap();
    // The most negative values were collapsed towards zero.
    assert!(bottom > -(1.05f64.powi(99)) && bottom < 0.0);
}

fn store(first: i32, counts: &[u64]) -> Store {
    Store {
        first,
        counts: counts.to_vec(),
    }
}

fn arb_store() -> impl Strategy<Value = Store> {
    (-40i32..40, proptest::collection::vec(0u64..5, 0..30)).prop_map(|(first, mut counts)| {
        if let Some(c) = counts.first_mut() {
            *c += 1;
        }
        if let Some(c) = counts.last_mut() {
            *c += 1;
        }
        if counts.is_empty() {
            Store::default()
        } else {
            store(first, &counts)
        }
    })
}

proptest! {
    /// Collapsing commutes with merging: any grouping of merges under a
    /// bound gives the same store, the same as one merge of everything.
    #[test]
    fn store_merge_is_associative_and_commutative_under_a_bound(
        a in arb_store(), b in arb_store(), c in arb_store(), max in 1u32..40,
    ) {
        for keep in [Keep::High, Keep::Low] {
            let mut ab_c = a.clone();
            ab_c.merge(&b, max, keep);
            ab_c.merge(&c, max, keep);
            let mut bc = b.clone();
            bc.merge(&c, max, keep);
            let mut a_bc = a.clone();
            a_bc.merge(&bc, max, keep);
            prop_assert_eq!(&ab_c, &a_bc);
            let mut c_ba = c.clone();
            c_ba.merge(&b, max, keep);
            c_ba.merge(&a, max, keep);
            prop_assert_eq!(&ab_c, &c_ba);
            prop_assert!(ab_c.counts.len() <= max as usize);
            prop_assert_eq!(ab_c.total(), a.total() + b.total() + c.total());
            if let (Some(&x), Some(&y)) = (ab_c.counts.first(), ab_c.counts.last()) {
                prop_assert!(x > 0 && y > 0);
            }
        }
    }

    /// All ranks at once read what each rank alone reads, over stores
    /// of hundreds of buckets (walked in runs) on both sides of zero.
    #[test]
    fn values_at_ranks_are_each_rank_alone_in_long_stores(
        values in proptest::collection::vec(
            (-300i32..300, 0u64..4, any::<bool>()), 0..400,
        ),
        picks in proptest::collection::vec(any::<proptest::sample::Index>(), 0..12),
    ) {
        let mut s = Sketch::default();
        for &(e, w, neg) in &values {
            let x = if e == 0 { 0.0 } else { 1.0101f64.powi(e) };
            s.add(if neg { -x } else { x }, w + 1).unwrap();
        }
        let mut ranks: Vec<u64> = if s.count() == 0 {
            Vec::new()
        } else {
            picks.iter().map(|i| 1 + i.index(s.count() as usize) as u64).collect()
        };
        ranks.sort_unstable();
        let mut got = Vec::new();
        s.values_at_ranks(&ranks, |v| got.push(v));
        let want: Vec<f64> = ranks.iter().map(|&r| s.value_at_rank(r).unwrap()).collect();
        prop_assert_eq!(got, want);
    }

    /// Adding one value at a time under a bound gives the store that
    /// merging single-bucket stores gives.
    #[test]
    fn adding_is_merging_a_single_bucket(
        adds in proptest::collection::vec((-60i32..60, 1u64..4), 0..60), max in 1u32..30,
    ) {
        for keep in [Keep::High, Keep::Low] {
            let mut added = Store::default();
            let mut merged = Store::default();
            for &(i, w) in &adds {
                added.add(i, w, max, keep);
                merged.merge(&store(i, &[w]), max, keep);
            }
            prop_assert_eq!(&added, &merged);
            prop_assert!(added.counts.len() <= max as usize);
        }
    }
}
