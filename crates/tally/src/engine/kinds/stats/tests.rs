//! The statistics kind's tests: its reads, records, laws and encoding.

use super::*;
use crate::engine::kinds::laws::{check_merge, check_round_trip, count_refused, merged, refused};
use crate::engine::kinds::sketch;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Regression: ⌈q·n⌉ was taken of q·n as binary floating point gives
/// it, so q = 0.07 of 100 values ranked 8 (7.000000000000001 rounded up).
#[test]
fn nearest_ranks_of_decimal_quantiles_are_exact() {
    assert_eq!(nearest_rank(0.07, 100), 7);
    assert_eq!(nearest_rank(0.29, 100), 29);
    assert_eq!(nearest_rank(0.5, 3), 2);
    assert_eq!(nearest_rank(0.999, 1000), 999);
    assert_eq!(nearest_rank(0.9, 7), 7);
    assert_eq!(nearest_rank(0.0, 5), 1);
    assert_eq!(nearest_rank(1.0, 5), 5);
    for n in 1..=1000u64 {
        for pct in 1..=100u64 {
            let q = pct as f64 / 100.0;
            // The rank in whole numbers: ceil(pct * n / 100).
            assert_eq!(
                nearest_rank(q, n),
                (pct * n).div_ceil(100).max(1),
                "{q} of {n}"
            );
        }
    }
}

fn of(values: &[f64]) -> StatsValue {
    let mut s = StatsValue::default();
    for &x in values {
        s.record(x).unwrap();
    }
    s
}

fn merged_all(parts: &[StatsValue]) -> StatsValue {
    merged(&StatsValue::identity(), &parts.iter().collect::<Vec<_>>())
}

/// The exact nearest-rank quantile of `values`.
fn exact_quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if q == 0.0 {
        return sorted[0];
    }
    sorted[nearest_rank(q, sorted.len() as u64) as usize - 1]
}

const QS: [f64; 13] = [
    0.0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.5001, 0.75, 0.9, 0.99, 0.999, 0.9999, 1.0,
];

/// Every quantile of `s` is within its alpha (plus the rounding of the
/// bucket math, 1e-9 of alpha) of the exact one of `values`.
fn assert_accurate(s: &StatsValue, values: &[f64]) -> std::result::Result<(), TestCaseError> {
    let alpha = s.settings().alpha();
    for q in QS {
        let exact = exact_quantile(values, q);
        let got = s.quantile(q).unwrap().unwrap();
        prop_assert!(
            (got - exact).abs() <= alpha * exact.abs() * (1.0 + 1e-9),
            "q {}: got {}, exact {}, alpha {}",
            q,
            got,
            exact,
            alpha
        );
    }
    Ok(())
}

/// A lognormal sample (sigma in log space), by Box-Muller.
pub(crate) fn lognormal(rng: &mut StdRng, mu: f64, sigma: f64) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random();
    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    (mu + sigma * z).exp()
}

#[test]
fn moments_follow_the_book() {
    let s = of(&[1.0, 2.0, 3.0, 4.0]);
    assert_eq!(s.count(), 4);
    assert_eq!(s.sum(), 10.0);
    assert_eq!(s.sum_of_squares(), 30.0);
    assert_eq!(s.mean(), Some(2.5));
    assert_eq!(s.stddev(), Some((5.0f64 / 3.0).sqrt()));
    assert_eq!((s.min(), s.max()), (Some(1.0), Some(4.0)));
    // One value: (x² − x²) / 1.
    assert_eq!(of(&[7.0]).stddev(), Some(0.0));
    // Rounding below zero is clamped at 0.
    assert_eq!(of(&[0.1, 0.1, 0.1]).stddev(), Some(0.0));
    let empty = StatsValue::default();
    assert_eq!(
        (empty.mean(), empty.stddev(), empty.min()),
        (None, None, None)
    );
    assert_eq!(empty.quantile(0.5).unwrap(), None);
}

#[test]
fn non_finite_values_are_refused_by_name_and_change_nothing() {
    let mut s = of(&[1.0]);
    let before = s.clone();
    for (x, shown) in [
        (f64::NAN, "NaN"),
        (f64::INFINITY, "inf"),
        (f64::NEG_INFINITY, "-inf"),
    ] {
        let err = s.record(x).unwrap_err();
        assert!(err.is_bad_input());
        assert_eq!(
            err.to_string(),
            format!(
                "invalid input: the value {shown} is not a finite number; nothing was recorded"
            )
        );
    }
    assert!(
        s.record_weighted(1.0, 0)
            .unwrap_err()
            .to_string()
            .contains("weight 0")
    );
    assert_eq!(s, before);
}

#[test]
fn overflowing_the_count_or_the_sums_is_refused_and_changes_nothing() {
    let mut s = StatsValue::default();
    s.record_weighted(1.0, MAX_COUNT - 1).unwrap();
    let err = count_refused(&mut s, |s| s.record_weighted(1.0, 2));
    assert!(err.to_string().contains("would pass 2^53"), "{err}");
    let mut two = StatsValue::default();
    two.record_weighted(1.0, 2).unwrap();
    refused(&mut s, |s| s.merge(&two));

    // The sum of squares overflows first (|sum| > MAX implies
    // sumsq >= sum² / count > MAX).
    let mut s = of(&[1e154]);
    let err = refused(&mut s, |s| s.record(-1e154));
    assert_eq!(
        err.to_string(),
        "invalid input: recording -1e154 (weight 1) would make the sum of squares of the \
         statistic infinite; nothing was recorded"
    );
    let err = refused(&mut s, |s| s.merge(&of(&[1e154])));
    assert!(
        err.to_string()
            .contains("would make the sums of a statistic infinite"),
        "{err}"
    );
}

#[test]
fn a_weighted_value_counts_as_that_many_observations() {
    let mut weighted = StatsValue::default();
    weighted.record_weighted(3.5, 10).unwrap();
    weighted.record(-2.0).unwrap();
    let mut repeated = StatsValue::default();
    for _ in 0..10 {
        repeated.record(3.5).unwrap();
    }
    repeated.record(-2.0).unwrap();
    assert_eq!(weighted, repeated);
    assert_eq!(weighted.count(), 11);
    assert_eq!(
        weighted.quantile(0.5).unwrap(),
        repeated.quantile(0.5).unwrap()
    );
}

#[test]
fn quantiles_outside_0_to_1_are_refused() {
    let s = of(&[1.0]);
    for q in [-0.1, 1.5, f64::NAN] {
        let err = s.quantile(q).unwrap_err();
        assert!(
            err.to_string()
                .contains("a quantile must be between 0 and 1"),
            "{err}"
        );
        // Several at once fail the same way, on the first one outside.
        for empty in [false, true] {
            let s = if empty {
                StatsValue::default()
            } else {
                s.clone()
            };
            let err = s.quantiles(&[0.5, q, 2.0]).unwrap_err();
            assert_eq!(err.to_string(), s.quantile(q).unwrap_err().to_string());
        }
    }
}

#[test]
fn negative_zero_counts_as_zero() {
    let s = of(&[-0.0]);
    assert_eq!(s.min().unwrap().to_bits(), 0.0f64.to_bits());
    assert_eq!(s.sketch().zeros(), 1);
}

/// The layout, byte by byte: 1.0 falls in bucket 0, 1.03 in bucket 2
/// (ln 1.03 / ln 1.0202 = 1.48), so the positive counts are [1, 0, 1]
/// from index 0, written as differences [1, -1, 1].
#[test]
fn the_encoding_is_the_documented_msgpack_array() {
    let s = of(&[1.0, 1.03]);
    let hex: String = s.to_bytes().iter().map(|b| format!("{b:02x}")).collect();
    let expected = [
        "9d",                 // array of 13
        "01",                 // format 1
        "cb3f847ae147ae147b", // alpha 0.01 (float64)
        "cd0800",             // max_buckets 2048
        "02",                 // count
        "cb40003d70a3d70a3e", // sum 2.03
        "cb40007cb923a29c78", // sumsq 1 + 1.03^2
        "01",                 // min 1 (integral: an int)
        "cb3ff07ae147ae147b", // max 1.03
        "00",                 // zeros
        "00",
        "93",
        "01ff01", // pos_first 0, [1, -1, 1]
        "00",
        "90", // neg_first 0, []
    ]
    .concat();
    assert_eq!(hex, expected);
    assert_eq!(StatsValue::decode(&s.to_bytes()).unwrap(), s);
}

/// A bucket difference written in any integer form, or as an integral
/// float (a script may compute one), reads as the same value.
#[test]
fn bucket_differences_read_in_every_form() {
    let s = of(&[1.0, 1.03]);
    let good = s.to_bytes();
    let head = &good[..good.len() - 7];
    for minus_one in [
        &[0xff][..],
        &[0xd0, 0xff],
        &[0xd1, 0xff, 0xff],
        &[0xd2, 0xff, 0xff, 0xff, 0xff],
        &[0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        &[0xca, 0xbf, 0x80, 0, 0],
        &[0xcb, 0xbf, 0xf0, 0, 0, 0, 0, 0, 0],
    ] {
        for one in [
            &[0x01][..],
            &[0xcc, 0x01],
            &[0xcd, 0, 1],
            &[0xcf, 0, 0, 0, 0, 0, 0, 0, 1],
        ] {
            let bytes = [head, &[0x00, 0x93], one, minus_one, one, &[0x00, 0x90]].concat();
            assert_eq!(StatsValue::decode(&bytes).unwrap(), s, "{bytes:02x?}");
        }
    }
}

#[test]
fn malformed_blobs_are_corrupt_and_say_why() {
    let good = of(&[1.0, 1.03]).to_bytes();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![0x92, 0x01, 0x02], "it has 2 fields, not 13"),
        (good[..good.len() - 1].to_vec(), "it ends early"),
        ([&good[..], &[0x00]].concat(), "1 bytes follow the value"),
        // count 3 where the buckets hold 2
        (
            [&good[..14], &[0x03], &good[15..]].concat(),
            "count 3 differs",
        ),
        // a store ending in an empty bucket: [1, -1]
        (
            [&good[..good.len() - 6], &[0x92, 0x01, 0xff, 0x00, 0x90]].concat(),
            "empty bucket at one end",
        ),
        // format 2
        (
            [&good[..1], &[0x02], &good[2..]].concat(),
            "the format is 2",
        ),
        // The bucket arrays, read by their own loop: a fraction, a count
        // below zero, an array cut short, a number that is not one.
        (
            [
                &good[..good.len() - 7],
                &[0x00, 0x93, 0x01, 0xca, 0x3f, 0xc0, 0, 0, 0x01, 0x00, 0x90],
            ]
            .concat(),
            "a bucket difference is 1.5, not an integer",
        ),
        (
            [
                &good[..good.len() - 7],
                &[0x00, 0x92, 0x01, 0xfe, 0x00, 0x90],
            ]
            .concat(),
            "a bucket count is -1",
        ),
        (
            [&good[..good.len() - 7], &[0x00, 0x93, 0x01, 0xd1, 0xff]].concat(),
            "it ends early",
        ),
        (
            [
                &good[..good.len() - 7],
                &[0x00, 0x93, 0x01, 0xc0, 0x01, 0x00, 0x90],
            ]
            .concat(),
            "expected a number at byte",
        ),
    ];
    for (bytes, why) in cases {
        let err = StatsValue::decode(&bytes).unwrap_err();
        assert!(matches!(err, Error::Corrupt(_)), "{err}");
        assert!(err.to_string().contains(why), "{err} (wanted {why})");
    }
}

/// A Redis pending slice: its value of format 2 (or 1, as written before
/// the queue) and its queue (the accuracy, then deltas of format 1) read as
/// the deltas merged in order; a format past 2, a queue of anything else,
/// or a delta of format 2 is corrupt.
#[test]
fn pending_values_and_queues_read_as_their_merge() {
    let (a, b, c) = (of(&[1.0, 2.5]), of(&[-3.0]), of(&[0.0, 7.0, 7.0]));
    let (value, header) = a.encode_pending();
    assert_eq!(&value[..2], &[0x9d, 0x02]);
    assert_eq!(value[2..], a.to_bytes()[2..]);
    assert_eq!(
        header,
        [0xcb, 0x3f, 0x84, 0x7a, 0xe1, 0x47, 0xae, 0x14, 0x7b]
    );
    assert!(
        StatsValue::decode(&value).is_err(),
        "an older reader refuses it"
    );
    let queue = [&header[..], &b.to_bytes(), &c.to_bytes()].concat();
    let want = merged(&a, &[&b, &c]);
    for v in [&value, &a.to_bytes()] {
        assert_eq!(
            StatsValue::decode_pending(v, Some(&queue), &[]).unwrap(),
            want
        );
        assert_eq!(
            StatsValue::decode_pending(v, Some(&header), &[]).unwrap(),
            a
        );
        assert_eq!(StatsValue::decode_pending(v, None, &[]).unwrap(), a);
        assert_eq!(StatsValue::decode_pending(v, Some(&[]), &[]).unwrap(), a);
    }
    let three = [&value[..1], &[0x03], &value[2..]].concat();
    let bad: Vec<(Vec<u8>, Vec<u8>, &str)> = vec![
        (three, header.clone(), "the format is 3"),
        (value.clone(), vec![0x93], "expected a number"),
        (
            value.clone(),
            [&header[..], &b.to_bytes()[..3]].concat(),
            "does not fit",
        ),
        (
            value.clone(),
            [&header[..], &value[..]].concat(),
            "the format is 2",
        ),
    ];
    for (v, q, why) in bad {
        let err = StatsValue::decode_pending(&v, Some(&q), &[]).unwrap_err();
        assert!(matches!(err, Error::Corrupt(_)), "{err}");
        assert!(err.to_string().contains(why), "{err} (wanted {why})");
    }
}

/// A Redis pending slice of format 3: its value with the array's 16-bit
/// header (which a reader of formats 1 and 2 refuses), and its queue's
/// deltas, one blob each, merged in order after a format 2 queue's; a
/// format 3 value with the one-byte header, a format 2 value with the
/// 16-bit one, or a delta of anything but one value of format 1 is corrupt.
#[test]
fn pending_values_of_format_3_read_with_their_deltas() {
    let (a, b, c) = (of(&[1.0, 2.5]), of(&[-3.0]), of(&[0.0, 7.0, 7.0]));
    let value = a.encode_pending_value();
    assert_eq!(&value[..4], &[0xdc, 0x00, 0x0d, 0x03]);
    assert_eq!(value[4..], a.to_bytes()[2..]);
    let e = StatsValue::decode(&value).unwrap_err().to_string();
    assert!(e.contains("the format is 3"), "{e}");
    let (b2, c2) = (b.to_bytes(), c.to_bytes());
    let deltas = [&b2[..], &c2[..]];
    assert_eq!(
        StatsValue::decode_pending(&value, None, &deltas).unwrap(),
        merged(&a, &[&b, &c])
    );
    assert_eq!(StatsValue::decode_pending(&value, None, &[]).unwrap(), a);
    let (old, header) = a.encode_pending();
    let queue = [&header[..], &b2[..]].concat();
    assert_eq!(
        StatsValue::decode_pending(&old, Some(&queue), &[&c2[..]]).unwrap(),
        merged(&a, &[&b, &c])
    );
    let short = [&[0x9d, 0x03][..], &value[4..]].concat();
    let long_two = [&[0xdc, 0x00, 0x0d, 0x02][..], &value[4..]].concat();
    let two = [&b2[..], &c2[..]].concat();
    let bad: Vec<(&[u8], &[u8], &str)> = vec![
        (&short, &b2, "the format is 3"),
        (&long_two, &b2, "the format is 2"),
        (&value, &two, "follow the value"),
        (&value, &value, "the format is 3"),
        (&value, &b2[..5], "does not fit"),
    ];
    for (v, delta, why) in bad {
        let err = StatsValue::decode_pending(v, None, &[delta]).unwrap_err();
        assert!(matches!(err, Error::Corrupt(_)), "{err}");
        assert!(err.to_string().contains(why), "{err} (wanted {why})");
    }
}

#[test]
fn lognormal_quantiles_are_within_alpha() {
    let mut rng = StdRng::seed_from_u64(7);
    let values: Vec<f64> = (0..100_000)
        .map(|_| lognormal(&mut rng, 3.0, 0.5))
        .collect();
    let one = of(&values);
    assert_accurate(&one, &values).unwrap();
    // The same values as 100 slices of 1,000, merged.
    let slices: Vec<StatsValue> = values.chunks(1000).map(of).collect();
    let all = merged_all(&slices);
    assert_eq!(all.sketch(), one.sketch());
    assert_accurate(&all, &values).unwrap();
    // At the finest accuracy too (sigma 0.5 spans ~40,000 buckets).
    let finest = SketchSettings::new(sketch::MIN_ALPHA, sketch::MAX_MAX_BUCKETS).unwrap();
    let mut fine = StatsValue::new(finest);
    for &x in &values {
        fine.record(x).unwrap();
    }
    assert_accurate(&fine, &values).unwrap();
}

/// A value: sign × mantissa × 10^e, or an exact zero, over 15 decades
/// (within the default bucket bound, so nothing collapses).
fn arb_value() -> impl Strategy<Value = f64> {
    prop_oneof![
        1 => Just(0.0),
        8 => (any::<bool>(), 1.0f64..10.0, -6i32..9)
            .prop_map(|(neg, m, e)| if neg { -m } else { m } * 10f64.powi(e)),
        2 => (-50i32..50).prop_map(f64::from),
    ]
}

/// A value whose sums and squares add up exactly: k/8 for small k.
fn arb_dyadic() -> impl Strategy<Value = f64> {
    (-4000i32..4000).prop_map(|k| f64::from(k) / 8.0)
}

fn arb_stats(values: impl Strategy<Value = f64>) -> impl Strategy<Value = StatsValue> {
    (
        proptest::collection::vec((values, 1u64..4), 0..40),
        prop_oneof![Just(2048u32), 16u32..64],
    )
        .prop_map(|(vs, max)| {
            let mut s = StatsValue::new(SketchSettings::new(0.01, max).unwrap());
            for (x, w) in vs {
                s.record_weighted(x, w).unwrap();
            }
            s
        })
}

proptest! {
    #[test]
    fn merge_is_associative_and_commutative_with_identity(
        a in arb_stats(arb_dyadic()), b in arb_stats(arb_dyadic()), c in arb_stats(arb_dyadic()),
    ) {
        check_merge(&a, &b, &c, true)?;
    }

    /// With arbitrary doubles only the sums may differ, by rounding.
    #[test]
    fn with_any_values_only_the_sums_round(
        a in arb_stats(arb_value()), b in arb_stats(arb_value()), c in arb_stats(arb_value()),
    ) {
        let ab_c = merged(&a, &[&b, &c]);
        let a_bc = merged(&a, &[&merged(&b, &[&c])]);
        prop_assert_eq!(ab_c.count(), a_bc.count());
        prop_assert_eq!((ab_c.min(), ab_c.max()), (a_bc.min(), a_bc.max()));
        prop_assert_eq!(ab_c.sketch(), a_bc.sketch());
        let scale = [&a, &b, &c].iter().map(|s| s.sum_of_squares().sqrt() * (s.count() as f64).sqrt()).sum::<f64>();
        prop_assert!((ab_c.sum() - a_bc.sum()).abs() <= 1e-12 * scale.max(1e-300));
        let sq = a.sum_of_squares() + b.sum_of_squares() + c.sum_of_squares();
        prop_assert!((ab_c.sum_of_squares() - a_bc.sum_of_squares()).abs() <= 1e-12 * sq);
    }

    #[test]
    fn encoding_round_trips(s in arb_stats(arb_value()), alpha in prop_oneof![Just(0.01), 0.0001f64..0.1]) {
        check_round_trip(&s)?;
        let mut other = StatsValue::new(SketchSettings::new(alpha, 100).unwrap());
        other.record(1.5).unwrap();
        let back = StatsValue::decode(&other.to_bytes()).unwrap();
        prop_assert_eq!(back.settings(), other.settings());
        prop_assert_eq!(&back, &other);
    }

    /// `quantiles` answers, in one walk of the sketch, what `quantile`
    /// answers for each q, in any order, repeated or not.
    #[test]
    fn quantiles_at_once_are_each_quantile(
        s in arb_stats(arb_value()),
        qs in proptest::collection::vec(
            prop_oneof![Just(0.0), Just(1.0), Just(0.5), Just(0.999), 0.0f64..=1.0],
            0..12,
        ),
    ) {
        let each: Vec<Option<f64>> = qs.iter().map(|&q| s.quantile(q).unwrap()).collect();
        let want: Vec<f64> = each.into_iter().flatten().collect();
        prop_assert_eq!(s.quantiles(&qs).unwrap(), want);
    }

    /// Quantiles are within alpha of the exact nearest-rank ones for
    /// one slice, for slices merged into a range, and for several
    /// series (each in slices) merged into one.
    #[test]
    fn quantiles_are_within_alpha_of_the_exact_ones(
        series in proptest::collection::vec(proptest::collection::vec(arb_value(), 1..60), 1..5),
        cut in 1usize..20,
        // At 0.0005 the 15 decades of arb_value take 34,539 buckets,
        // within the bound: nothing collapses.
        alpha in prop_oneof![Just(0.01), Just(0.0005), Just(0.1), 0.0005f64..0.1],
    ) {
        let settings = SketchSettings::new(alpha, 65_536).unwrap();
        let record = |values: &[f64]| {
            let mut s = StatsValue::new(settings);
            for &x in values {
                s.record(x).unwrap();
            }
            s
        };
        let mut every_series = Vec::new();
        let mut all_values = Vec::new();
        for values in &series {
            let one = record(values);
            assert_accurate(&one, values)?;
            let slices: Vec<StatsValue> = values.chunks(cut).map(record).collect();
            let range = merged_all(&slices);
            prop_assert_eq!(range.sketch(), one.sketch());
            assert_accurate(&range, values)?;
            every_series.push(range);
            all_values.extend_from_slice(values);
        }
        assert_accurate(&merged_all(&every_series), &all_values)?;
    }

    /// Past the bucket bound, the lowest values collapse: ranks above
    /// the collapsed mass keep the accuracy, ranks inside it are
    /// over-estimated, and each store spans at most the bound.
    #[test]
    fn collapsing_keeps_the_upper_quantiles(
        exponents in proptest::collection::vec(-150.0f64..150.0, 1..300),
        max in 16u32..64,
    ) {
        let settings = SketchSettings::new(0.01, max).unwrap();
        let values: Vec<f64> = exponents.iter().map(|e| 10f64.powf(*e)).collect();
        let mut s = StatsValue::new(settings);
        for &x in &values {
            s.record(x).unwrap();
        }
        let positive = s.sketch().positive();
        prop_assert!(positive.counts().len() <= max as usize);
        // Values above the lowest kept bucket are in their own bucket.
        // Bucket t reports 2γ^t/(γ+1) and holds values up to γ^t.
        let gamma = 1.01 / 0.99;
        let kept_from = settings.bucket_value(positive.first()) * (gamma + 1.0) / 2.0;
        for q in QS {
            let exact = exact_quantile(&values, q);
            let got = s.quantile(q).unwrap().unwrap();
            if exact > kept_from * (1.0 + 1e-12) {
                prop_assert!((got - exact).abs() <= 0.01 * exact * (1.0 + 1e-9), "q {} got {} exact {}", q, got, exact);
            } else {
                prop_assert!(got >= exact * (1.0 - 0.01 * (1.0 + 1e-9)), "q {} got {} exact {}", q, got, exact);
            }
        }
    }
}
