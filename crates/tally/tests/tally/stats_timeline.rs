//! Statistics written along a timeline that goes forward, stays in one
//! second, jumps ahead and comes back, in single writes and batches over
//! several statistics, read at every precision against a model of the same
//! observations: counts, lowest and highest exact, sums within 1e-12, and
//! quantiles within the sketch's accuracy of the exact nearest-rank ones.
//! Every store and key layout must read the same; a store that writes some
//! precisions later than others (issue 20's fold of the finest slice into
//! the coarser ones) must still read as if every precision were written at
//! once.

use crate::common;

use std::collections::BTreeMap;

use common::{Fixture, Kind, T0};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tally::StatsSettings;
use tally::stats::{Observation, SliceSummary};

per_backend!(layouts: a_timeline_reads_as_its_model);
per_backend!(expiring: a_timeline_reads_as_its_model);

const PRECISIONS: [u64; 3] = [1, 5, 60];
const NAMES: [&str; 3] = ["lat:a", "lat:b", "lat:c"];
const ACCURACY: f64 = 0.01;
const QS: [f64; 3] = [0.5, 0.9, 0.99];

/// The observations: seconds before T0 and values, in the order written.
/// First the cases by hand, then a seeded walk that mostly moves forward
/// a little, sometimes stays, sometimes jumps back.
fn timeline() -> Vec<(&'static str, f64, f64)> {
    // T0 is 15.5 s after a minute starts: 55.5 s back is that minute's
    // first instant, 55.6 the last tenth of the minute before.
    let mut t = vec![
        ("lat:a", 100.2, 10.0),
        ("lat:a", 100.4, 12.0), // the same second
        ("lat:a", 99.4, 14.0),  // the next second
        ("lat:a", 103.0, 3.0),  // back, before both
        ("lat:a", 55.6, 100.0), // the last tenth of a minute
        ("lat:a", 55.5, 1.0),   // the next minute's first instant
        ("lat:b", 55.5, 2.0),
        ("lat:a", 20.0, 7.5), // ahead by half a minute
        ("lat:a", 54.0, 8.5), // back into the earlier second's minute
        ("lat:a", 20.3, 0.25),
    ];
    let mut rng = StdRng::seed_from_u64(0x7a11);
    let mut back = 140.0_f64;
    for _ in 0..600 {
        let step: f64 = match rng.random_range(0..10) {
            0 => -rng.random_range(1.0..30.0), // back
            1..=3 => 0.0,                      // the same instant
            _ => rng.random_range(0.0..1.5),   // a little ahead
        };
        back = (back - step).clamp(0.0, 150.0);
        let name = NAMES[rng.random_range(0..NAMES.len())];
        let value = (rng.random_range(-1.5_f64..1.5) * 1.2).exp() * 100.0;
        t.push((name, back, value));
    }
    t
}

/// The values each (name, precision, slice start) holds.
type Model = BTreeMap<(&'static str, u64, u64), Vec<f64>>;

fn model(timeline: &[(&'static str, f64, f64)]) -> Model {
    let mut m = Model::new();
    for &(name, back, value) in timeline {
        let second = (T0 - back).floor() as u64;
        for p in PRECISIONS {
            m.entry((name, p, second - second % p))
                .or_default()
                .push(value);
        }
    }
    m
}

/// The nearest-rank order statistic `x_(⌈q·n⌉)` of `values` (sorted).
fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
    sorted[rank - 1]
}

async fn a_timeline_reads_as_its_model(kind: Kind) {
    let f = Fixture::new(kind).await;
    let stats = f
        .stats(StatsSettings {
            precisions: PRECISIONS.to_vec(),
            samples: 200,
            accuracy: ACCURACY,
            ..StatsSettings::default()
        })
        .await;
    let timeline = timeline();
    // Written in turns of one observation (`record_at`) and batches of 2 to
    // 40 (`record_many`), in timeline order.
    let mut rng = StdRng::seed_from_u64(0xba7c);
    let mut rest = &timeline[..];
    while !rest.is_empty() {
        let n = match rng.random_range(0..3) {
            0 => 1,
            _ => rng.random_range(2..=40).min(rest.len()),
        };
        let (now, later) = rest.split_at(n);
        if let [(name, back, value)] = now {
            stats.record_at(name, *value, T0 - back).await.unwrap();
        } else {
            let batch: Vec<Observation> = now
                .iter()
                .map(|&(name, back, value)| Observation::new(name, value).at(T0 - back))
                .collect();
            stats.record_many(&batch).await.unwrap();
        }
        rest = later;
    }
    let model = model(&timeline);
    for name in NAMES {
        for p in PRECISIONS {
            let read: Vec<SliceSummary> = stats.get(name, p, &QS).await.unwrap();
            let expected: Vec<(u64, &Vec<f64>)> = model
                .range((name, p, 0)..=(name, p, u64::MAX))
                .map(|(&(_, _, start), values)| (start, values))
                .collect();
            let starts: Vec<u64> = read.iter().map(|s| s.start).collect();
            let want: Vec<u64> = expected.iter().map(|(s, _)| *s).collect();
            assert_eq!(starts, want, "{name} at {p} s: the slices read");
            for (slice, (start, values)) in read.iter().zip(expected) {
                let at = format!("{name} at {p} s, slice {start}");
                let s = &slice.summary;
                let mut sorted = values.clone();
                sorted.sort_by(f64::total_cmp);
                let sum: f64 = values.iter().sum();
                assert_eq!(s.count, values.len() as u64, "{at}: count");
                assert_eq!(s.min, sorted.first().copied(), "{at}: lowest");
                assert_eq!(s.max, sorted.last().copied(), "{at}: highest");
                assert!(
                    (s.sum - sum).abs() <= 1e-12 * sum.abs(),
                    "{at}: sum {} against {sum}",
                    s.sum
                );
                for q in QS {
                    let exact = nearest_rank(&sorted, q);
                    let got = s.quantiles[&q.to_string()];
                    assert!(
                        (got - exact).abs() <= (ACCURACY + 1e-9) * exact.abs(),
                        "{at}: quantile {q} read {got}, exact {exact}"
                    );
                }
            }
        }
    }
}
