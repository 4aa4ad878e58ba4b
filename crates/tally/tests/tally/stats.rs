//! The statistics behaviour suite: every test runs on SQLite (memory and
//! file), on a real redis-server in both key layouts (statistics use the
//! tagged keys under the default prefix on a `ria` server) and on a real
//! Redis Cluster.

use crate::common;

use std::time::Duration;

use common::{Fixture, T0};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tally::counters::WriterSettings;
use tally::engine::Applied;
use tally::stats::{Figure, Observation, SliceSummary, StatsWriter};
use tally::{Error, Stats, StatsSettings};

/// The book's example instant: 2012-05-07 07:40:15 UTC.
const BOOK: f64 = 1336376415.0;

fn settings(precisions: &[u64], samples: u64) -> StatsSettings {
    StatsSettings {
        precisions: precisions.to_vec(),
        samples,
        ..StatsSettings::default()
    }
}

per_backend!(layouts: fixture =>
    the_books_example,
    slice_boundaries,
    every_precision_in_one_write,
    batches_span_stats_and_merge,
    a_bad_observation_writes_nothing,
    negatives_and_zeros,
    quantiles_are_within_the_accuracy_of_exact_ranks,
    ranges_read_the_finest_covering_precision,
    precisions_without_a_sketch_report_no_quantiles,
    bad_reads_are_refused_with_a_reason,
    pagination_walks_names_in_order,
    delete_removes_every_precision,
    top_ranks_the_slowest,
    the_cleaner_trims_stats,
    sequenced_writes_apply_once,
    aggregated_writes_are_exact,
    concurrent_writers_are_exact,
);

/// The "done when": three values at the book's instant read as one
/// minute slice of count 3, sum 60, min 10, max 30, mean 20, stddev 10.
async fn the_books_example(f: Fixture) {
    let stats = f.stats(StatsSettings::default()).await;
    stats
        .record_many(&[
            Observation::new("lat", 10.0).at(BOOK),
            Observation::new("lat", 20.0).at(BOOK),
            Observation::new("lat", 30.0).at(BOOK),
        ])
        .await
        .unwrap();
    let minute = stats
        .get("lat", 60, &tally::stats::DEFAULT_QUANTILES)
        .await
        .unwrap();
    assert_eq!(minute.len(), 1);
    let s = &minute[0];
    assert_eq!(s.start, 1336376400);
    assert_eq!(
        (s.summary.count, s.summary.sum, s.summary.min, s.summary.max),
        (3, 60.0, Some(10.0), Some(30.0))
    );
    assert_eq!((s.summary.mean, s.summary.stddev), (Some(20.0), Some(10.0)));
    let median = s.summary.quantile(0.5).unwrap();
    assert!((median - 20.0).abs() <= 0.2, "{median}");
    assert_eq!(s.summary.quantile(0.9), Some(30.0));
    assert_eq!(s.summary.quantile(0.99), Some(30.0));
    let json = serde_json::to_value(s).unwrap();
    assert_eq!(json["start"], 1336376400);
    assert_eq!(json["count"], 3);
    assert_eq!(json["stddev"], 10.0);
    assert_eq!(json["quantiles"]["0.99"], 30.0);
    let back: SliceSummary = serde_json::from_value(json).unwrap();
    assert_eq!(&back, s);
}

async fn slice_boundaries(f: Fixture) {
    let stats = f.stats(settings(&[1, 5, 60], 120)).await;
    stats.record_at("t", 3.0, 1336376415.5).await.unwrap();
    stats.record_at("t", 1.0, 1336376419.999).await.unwrap(); // same 5 s slice
    stats.record_at("t", 2.0, 1336376420.0).await.unwrap(); // next 5 s slice
    stats.record_at("t", 7.0, 1336376400.0).await.unwrap(); // first second of the minute
    let counts = |slices: Vec<SliceSummary>| -> Vec<(u64, u64, f64)> {
        slices
            .into_iter()
            .map(|s| (s.start, s.summary.count, s.summary.sum))
            .collect()
    };
    assert_eq!(
        counts(stats.get("t", 1, &[]).await.unwrap()),
        vec![
            (1336376400, 1, 7.0),
            (1336376415, 1, 3.0),
            (1336376419, 1, 1.0),
            (1336376420, 1, 2.0)
        ]
    );
    assert_eq!(
        counts(stats.get("t", 5, &[]).await.unwrap()),
        vec![
            (1336376400, 1, 7.0),
            (1336376415, 2, 4.0),
            (1336376420, 1, 2.0)
        ]
    );
    let minute = stats.get("t", 60, &[]).await.unwrap();
    assert_eq!(counts(minute.clone()), vec![(1336376400, 4, 13.0)]);
    assert_eq!(
        (minute[0].summary.min, minute[0].summary.max),
        (Some(1.0), Some(7.0))
    );
}

async fn every_precision_in_one_write(f: Fixture) {
    let stats = f.stats(StatsSettings::default()).await;
    stats.record("lat", 4.5).await.unwrap(); // at the clock's T0
    let all = stats.get_all("lat", &[0.5]).await.unwrap();
    let got: Vec<(u64, Vec<(u64, u64)>)> = all
        .iter()
        .map(|s| {
            (
                s.precision,
                s.slices
                    .iter()
                    .map(|x| (x.start, x.summary.count))
                    .collect(),
            )
        })
        .collect();
    let want: Vec<(u64, Vec<(u64, u64)>)> = [1u64, 5, 60, 300, 3600, 18000, 86400]
        .iter()
        .map(|&p| (p, vec![(T0 as u64 / p * p, 1)]))
        .collect();
    assert_eq!(got, want);
    assert!(all.iter().all(|s| s.sketch));
    assert!(
        all.iter()
            .all(|s| s.slices[0].summary.quantile(0.5) == Some(4.5))
    );
}

async fn batches_span_stats_and_merge(f: Fixture) {
    let stats = f.stats(settings(&[1, 60], 120)).await;
    let batch: Vec<Observation> = (0..300)
        .map(|i| {
            Observation::new(format!("api:/r{}", i % 7), f64::from(i)).at(BOOK + f64::from(i % 90))
        })
        .collect();
    stats.record_many(&batch).await.unwrap();
    for r in 0..7 {
        let name = format!("api:/r{r}");
        let mine: Vec<f64> = (0..300).filter(|i| i % 7 == r).map(f64::from).collect();
        let minute = stats.get(&name, 60, &[]).await.unwrap();
        let count: u64 = minute.iter().map(|s| s.summary.count).sum();
        let sum: f64 = minute.iter().map(|s| s.summary.sum).sum();
        assert_eq!(count, mine.len() as u64, "{name}");
        assert_eq!(sum, mine.iter().sum::<f64>(), "{name}");
        let seconds = stats.get(&name, 1, &[]).await.unwrap();
        assert_eq!(
            seconds.iter().map(|s| s.summary.count).sum::<u64>(),
            mine.len() as u64
        );
    }
    // A weighted observation counts as many.
    stats
        .record_many(&[Observation::new("w", 2.0).at(BOOK).weight(10)])
        .await
        .unwrap();
    let w = &stats.get("w", 60, &[]).await.unwrap()[0].summary;
    assert_eq!((w.count, w.sum, w.mean), (10, 20.0, Some(2.0)));
}

/// A batch holding one value that is not finite (or a bad name, weight or
/// time) is refused whole, naming the problem, and writes nothing.
async fn a_bad_observation_writes_nothing(f: Fixture) {
    let stats = f.stats(StatsSettings::default()).await;
    for (bad, why) in [
        (
            Observation::new("b", f64::NAN),
            "NaN is not a finite number",
        ),
        (
            Observation::new("b", f64::INFINITY),
            "inf is not a finite number",
        ),
        (Observation::new("b", 1.0).weight(0), "weight 0"),
        (Observation::new("", 1.0), "invalid name"),
        (Observation::new("b", 1.0).at(-5.0), "invalid time"),
    ] {
        let batch = vec![
            Observation::new("a", 1.0).at(BOOK),
            bad,
            Observation::new("c", 2.0).at(BOOK),
        ];
        let err = stats.record_many(&batch).await.unwrap_err();
        assert!(err.is_bad_input(), "{err}");
        assert!(err.to_string().contains(why), "{err} should say {why}");
    }
    let err = stats.record("lat", f64::NEG_INFINITY).await.unwrap_err();
    assert!(err.to_string().contains("stat \"lat\""), "{err}");
    assert!(stats.record_many(&[]).await.unwrap_err().is_bad_input());
    assert!(stats.list(None, 10).await.unwrap().names.is_empty());
    for name in ["a", "b", "c"] {
        assert!(stats.get(name, 60, &[]).await.unwrap().is_empty());
    }
}

async fn negatives_and_zeros(f: Fixture) {
    let stats = f.stats(settings(&[60], 10)).await;
    for v in [-5.0, 0.0, -0.0, 3.0, -1.5] {
        stats.record_at("delta", v, BOOK).await.unwrap();
    }
    let s = &stats
        .get("delta", 60, &[0.0, 0.2, 0.4, 0.6, 1.0])
        .await
        .unwrap()[0]
        .summary;
    assert_eq!(s.count, 5);
    assert_eq!(s.sum, -3.5);
    assert_eq!((s.min, s.max), (Some(-5.0), Some(3.0)));
    assert_eq!(s.mean, Some(-0.7));
    // Nearest rank over [-5, -1.5, 0, 0, 3].
    assert_eq!(s.quantile(0.0), Some(-5.0));
    let q2 = s.quantile(0.2).unwrap();
    assert!((q2 + 5.0).abs() <= 0.05, "{q2}");
    let q4 = s.quantile(0.4).unwrap();
    assert!((q4 + 1.5).abs() <= 0.015, "{q4}");
    assert_eq!(s.quantile(0.6), Some(0.0));
    assert_eq!(s.quantile(1.0), Some(3.0));
}

/// The exact nearest-rank quantile of `values`.
fn exact(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

const QS: [f64; 9] = [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0];

fn assert_within(summary: &tally::stats::Summary, values: &[f64], alpha: f64, what: &str) {
    assert_eq!(summary.count, values.len() as u64, "{what}");
    for q in QS {
        let want = exact(values, q);
        let got = summary.quantile(q).unwrap();
        assert!(
            (got - want).abs() <= alpha * want.abs() * (1.0 + 1e-9),
            "{what}: q{q} is {got}, the exact nearest-rank value {want}"
        );
    }
}

/// Seeded random data (lognormal latencies and some negatives) on the real
/// backend: every reported quantile is within the accuracy of the exact
/// nearest-rank quantile, for one slice, a range of slices, and several
/// stats merged.
async fn quantiles_are_within_the_accuracy_of_exact_ranks(f: Fixture) {
    let stats = f.stats(settings(&[1, 60, 3600], 120)).await;
    let alpha = stats.settings().accuracy;
    let mut rng = StdRng::seed_from_u64(0x5EED_0009);
    let names = ["route:/a", "route:/b", "route:/c"];
    let mut values: Vec<Vec<(f64, f64)>> = vec![Vec::new(); names.len()];
    let mut batch = Vec::new();
    let start = 1336374000.0; // 07:00 UTC, an hour's start
    for i in 0..3000 {
        let n = rng.random_range(0..names.len());
        // Lognormal (Box-Muller), a tenth of them negated.
        let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-12), rng.random());
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let mut v = (3.0 + 1.2 * z).exp();
        if i % 10 == 0 {
            v = -v;
        }
        let at = start + rng.random_range(0.0..600.0);
        values[n].push((at, v));
        batch.push(Observation::new(names[n], v).at(at));
    }
    for chunk in batch.chunks(1000) {
        stats.record_many(chunk).await.unwrap();
    }
    f.clock.set(start + 900.0);
    // One slice: the busiest minute of route:/a.
    let minutes = stats.get(names[0], 60, &QS).await.unwrap();
    let busiest = minutes.iter().max_by_key(|s| s.summary.count).unwrap();
    let in_slice: Vec<f64> = values[0]
        .iter()
        .filter(|(at, _)| (*at as u64) / 60 * 60 == busiest.start)
        .map(|&(_, v)| v)
        .collect();
    assert_within(&busiest.summary, &in_slice, alpha, "one slice");
    // A range of minutes [start + 120, start + 419]: read at 60 s.
    let (from, to) = (start as u64 + 120, start as u64 + 419);
    let range = stats.summary(&[names[1]], from, to, &QS).await.unwrap();
    assert_eq!(range.precision, 60);
    let in_range: Vec<f64> = values[1]
        .iter()
        .filter(|(at, _)| (from..=to).contains(&(*at as u64)))
        .map(|&(_, v)| v)
        .collect();
    assert_within(&range.summary, &in_range, alpha, "a range");
    // Every stat merged, over the whole ten minutes.
    let all = stats
        .summary(&names, start as u64, start as u64 + 599, &QS)
        .await
        .unwrap();
    let every: Vec<f64> = values.iter().flatten().map(|&(_, v)| v).collect();
    assert_within(&all.summary, &every, alpha, "several stats");
    let exact_sum: f64 = every.iter().sum();
    assert!((all.summary.sum - exact_sum).abs() <= 1e-9 * exact_sum.abs().max(1.0));
    assert_eq!(
        all.summary.min,
        every.iter().copied().reduce(f64::min),
        "min is exact"
    );
    assert_eq!(all.summary.max, every.iter().copied().reduce(f64::max));
}

async fn ranges_read_the_finest_covering_precision(f: Fixture) {
    // 1 s x 10, 60 s x 10 (10 minutes), 3600 s x 10.
    let stats = f.stats(settings(&[1, 60, 3600], 10)).await;
    let now = 1336377600u64; // 08:00 UTC
    f.clock.set(now as f64 + 0.5);
    for (back, v) in [(0u64, 1.0), (5, 2.0), (30, 4.0), (300, 8.0), (3000, 16.0)] {
        stats.record_at("x", v, (now - back) as f64).await.unwrap();
    }
    // The last 6 seconds: 1 s slices reach back that far.
    let r = stats.summary(&["x"], now - 5, now, &[]).await.unwrap();
    assert_eq!((r.precision, r.summary.count, r.summary.sum), (1, 2, 3.0));
    // The last 30 s: beyond 10 x 1 s, read per minute from 07:59:00 on.
    let r = stats.summary(&["x"], now - 30, now, &[0.5]).await.unwrap();
    assert_eq!((r.precision, r.summary.count, r.summary.sum), (60, 3, 7.0));
    // Five minutes back: still minutes.
    let r = stats.summary(&["x"], now - 300, now, &[]).await.unwrap();
    assert_eq!((r.precision, r.summary.sum), (60, 15.0));
    // Fifty minutes back: hours (07:00 to 08:00 holds all five).
    let r = stats.summary(&["x"], now - 3000, now, &[]).await.unwrap();
    assert_eq!(
        (r.precision, r.summary.count, r.summary.sum),
        (3600, 5, 31.0)
    );
    // Nothing in range: count 0, no figures.
    let r = stats.summary(&["y"], now - 5, now, &[0.5]).await.unwrap();
    assert_eq!(r.summary.count, 0);
    assert_eq!((r.summary.min, r.summary.mean), (None, None));
    assert!(r.summary.quantiles.is_empty());
    let err = stats.summary(&["x"], now, now - 1, &[]).await.unwrap_err();
    assert!(matches!(err, Error::InvalidTime(_)), "{err}");
}

/// With `sketch_precisions`, other precisions keep the moments only: the
/// same counts, sums, min and max, no quantiles; a range asked for
/// quantiles is read at a precision that keeps a sketch.
async fn precisions_without_a_sketch_report_no_quantiles(f: Fixture) {
    let stats = f
        .stats(StatsSettings {
            sketch_precisions: Some(vec![60]),
            ..settings(&[1, 60], 120)
        })
        .await;
    f.clock.set(BOOK + 1.0);
    stats
        .record_many(&[
            Observation::new("s", 10.0).at(BOOK),
            Observation::new("s", 30.0).at(BOOK),
        ])
        .await
        .unwrap();
    let writer = StatsWriter::start(stats.clone(), WriterSettings::default()).unwrap();
    writer.record("s", 20.0, Some(BOOK)).await.unwrap();
    writer.flush().await.unwrap();
    let all = stats.get_all("s", &[0.5]).await.unwrap();
    assert_eq!((all[0].precision, all[0].sketch), (1, false));
    let second = &all[0].slices[0].summary;
    assert_eq!(
        (second.count, second.sum, second.min, second.max),
        (3, 60.0, Some(10.0), Some(30.0))
    );
    assert!(second.quantiles.is_empty());
    let minute = &all[1].slices[0].summary;
    assert!(all[1].sketch);
    assert!((minute.quantile(0.5).unwrap() - 20.0).abs() <= 0.2);
    // Without quantiles, the finest covering precision; with, the sketch's.
    let r = stats
        .summary(&["s"], BOOK as u64, BOOK as u64, &[])
        .await
        .unwrap();
    assert_eq!((r.precision, r.summary.count), (1, 3));
    let r = stats
        .summary(&["s"], BOOK as u64, BOOK as u64, &[0.5])
        .await
        .unwrap();
    assert_eq!((r.precision, r.summary.count), (60, 3));
    assert!(r.summary.quantile(0.5).is_some());
    writer.shutdown().await;
}

async fn bad_reads_are_refused_with_a_reason(f: Fixture) {
    let stats = f.stats(settings(&[1, 60], 10)).await;
    let e = stats.get("x", 5, &[]).await.unwrap_err().to_string();
    assert!(
        e.contains("precision 5 s is not configured (configured: 1, 60)"),
        "{e}"
    );
    let e = stats.get("x", 60, &[1.5]).await.unwrap_err().to_string();
    assert!(e.contains("between 0 and 1, got 1.5"), "{e}");
    assert!(stats.get("", 60, &[]).await.unwrap_err().is_bad_input());
    assert!(
        stats
            .summary(&[], 0, 1, &[])
            .await
            .unwrap_err()
            .is_bad_input()
    );
    assert!(stats.list(None, 0).await.unwrap_err().is_bad_input());
    assert!(
        stats
            .top(Figure::Quantile(2.0), "", 0, 1, 5)
            .await
            .unwrap_err()
            .is_bad_input()
    );
    assert!(
        stats
            .top(Figure::Mean, "", 0, 1, 0)
            .await
            .unwrap_err()
            .is_bad_input()
    );
    assert!(stats.delete("").await.unwrap_err().is_bad_input());
}

async fn pagination_walks_names_in_order(f: Fixture) {
    let stats = f.stats(settings(&[60], 10)).await;
    let mut names: Vec<String> = (0..25).map(|i| format!("app:{i:02}")).collect();
    names.push("other".into());
    let batch: Vec<Observation> = names
        .iter()
        .map(|n| Observation::new(n.as_str(), 1.0))
        .collect();
    stats.record_many(&batch).await.unwrap();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = stats.search("app:", cursor.as_deref(), 10).await.unwrap();
        assert!(page.names.len() <= 10);
        seen.extend(page.names);
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, names[..25].to_vec());
    assert_eq!(stats.list(None, 100).await.unwrap().names, names);
    // The counters do not see the stats.
    assert!(f.counters.list(None, 100).await.unwrap().names.is_empty());
}

async fn delete_removes_every_precision(f: Fixture) {
    let stats = f.stats(settings(&[1, 60], 10)).await;
    stats.record("gone", 1.0).await.unwrap();
    stats.record("kept", 2.0).await.unwrap();
    assert!(stats.delete("gone").await.unwrap());
    assert!(!stats.delete("gone").await.unwrap());
    assert!(
        stats
            .get_all("gone", &[])
            .await
            .unwrap()
            .iter()
            .all(|s| s.slices.is_empty())
    );
    assert_eq!(stats.list(None, 10).await.unwrap().names, vec!["kept"]);
    assert_eq!(stats.get("kept", 1, &[]).await.unwrap()[0].summary.count, 1);
}

/// The book's "slowest pages": stats ranked by mean (or a quantile) over a
/// range, top N.
async fn top_ranks_the_slowest(f: Fixture) {
    let stats = f.stats(settings(&[60, 3600], 100)).await;
    f.clock.set(BOOK + 60.0);
    let mut batch = Vec::new();
    for (page, base) in [
        ("page:/a", 10.0),
        ("page:/b", 50.0),
        ("page:/c", 30.0),
        ("page:/d", 40.0),
    ] {
        for k in 0..10 {
            batch.push(Observation::new(page, base + f64::from(k)).at(BOOK));
        }
    }
    // One very slow outlier on /c: its p99 is highest, its mean is not.
    batch.push(Observation::new("page:/c", 10_000.0).at(BOOK));
    batch.push(Observation::new("other", 1e6).at(BOOK));
    // Outside the range: not counted.
    batch.push(Observation::new("page:/a", 1e6).at(BOOK - 3600.0));
    stats.record_many(&batch).await.unwrap();
    let (from, to) = (BOOK as u64 - 15, BOOK as u64 + 44);
    let by_mean = stats.top(Figure::Mean, "page:", from, to, 3).await.unwrap();
    let names: Vec<&str> = by_mean.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, vec!["page:/c", "page:/b", "page:/d"]);
    assert_eq!(by_mean[1].value, 54.5);
    assert_eq!(by_mean[1].summary.count, 10);
    let by_max = stats.top(Figure::Max, "page:", from, to, 1).await.unwrap();
    assert_eq!(
        (by_max[0].name.as_str(), by_max[0].value),
        ("page:/c", 10_000.0)
    );
    let by_p50 = stats
        .top(Figure::Quantile(0.5), "page:", from, to, 4)
        .await
        .unwrap();
    let names: Vec<&str> = by_p50.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, vec!["page:/b", "page:/d", "page:/c", "page:/a"]);
    let everything = stats.top(Figure::Count, "", from, to, 10).await.unwrap();
    assert_eq!(everything.len(), 5);
    assert_eq!(everything[0].name, "page:/c"); // 11 observations
}

async fn the_cleaner_trims_stats(f: Fixture) {
    let stats = f.stats(settings(&[1, 60], 10)).await;
    stats.record("s", 1.0).await.unwrap();
    stats.record_at("old", 1.0, T0 - 3600.0).await.unwrap();
    let mut cleaner = f.cleaner_of(&stats);
    f.clock.advance(30.0);
    let report = cleaner.pass().await.unwrap();
    // s's 1 s slice (older than 10 s) and both of old's slices go; old, empty,
    // leaves the registry.
    assert_eq!(report.samples_removed, 3, "{report:?}");
    assert_eq!(report.counters_removed, 1, "{report:?}");
    assert!(stats.get("s", 1, &[]).await.unwrap().is_empty());
    assert_eq!(stats.get("s", 60, &[]).await.unwrap().len(), 1);
    assert_eq!(stats.list(None, 10).await.unwrap().names, vec!["s"]);
    // The minute slice goes once it is older than 10 minutes.
    f.clock.advance(660.0);
    cleaner.pass().await.unwrap();
    assert!(stats.get("s", 60, &[]).await.unwrap().is_empty());
    assert!(stats.list(None, 10).await.unwrap().names.is_empty());
    // A space that expires by itself is not the cleaner's.
    let expiring = tally::engine::Space::new(
        "sets",
        tally::engine::Kind::Distinct,
        vec![tally::engine::Precision::new(60, 10)],
        tally::engine::Retention::Expire,
    )
    .unwrap();
    let e = cleaner
        .with_space(stats.store().clone(), std::sync::Arc::new(expiring))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("space sets is not trimmed by the cleaner"),
        "{e}"
    );
}

/// A retried write (the same writer, lane and number) is applied once.
async fn sequenced_writes_apply_once(f: Fixture) {
    let stats = f.stats(settings(&[1, 60], 100)).await;
    let mut batch = stats
        .prepare(&[
            Observation::new("s", 5.0).at(BOOK),
            Observation::new("t", 1.0).at(BOOK),
        ])
        .unwrap();
    let steps = [
        (0, 1, Applied::Written),
        (0, 1, Applied::Duplicate),
        (0, 2, Applied::Written),
    ];
    common::apply_numbered(stats.store().as_ref(), &mut batch, 0xfeed, &steps).await;
    let s = &stats.get("s", 60, &[]).await.unwrap()[0].summary;
    assert_eq!((s.count, s.sum), (2, 10.0));
}

/// Observations through the aggregating writer are merged in process and
/// written exactly once: counts, sums, min and max as written one by one.
async fn aggregated_writes_are_exact(f: Fixture) {
    let stats = f.stats(settings(&[1, 60, 3600], 100)).await;
    let writer = StatsWriter::start(
        stats.clone(),
        common::small_chunks(Duration::from_millis(5)),
    )
    .unwrap();
    common::concurrently(4, &writer, |writer, w| async move {
        for i in 0..500u32 {
            let v = f64::from((i * 7 + w) % 100);
            let at = BOOK + f64::from(i % 100); // the 100 slices kept at 1 s
            writer
                .record(&format!("agg:{}", i % 10), v, Some(at))
                .await
                .unwrap();
        }
    })
    .await;
    writer
        .record_many(&[Observation::new("agg:0", -1.0).at(BOOK).weight(3)])
        .await
        .unwrap();
    let bad = writer.record("agg:0", f64::NAN, None).await.unwrap_err();
    assert!(bad.is_bad_input(), "{bad}");
    writer.shutdown().await;
    let figures = writer.stats();
    assert_eq!(figures.accepted, 2001);
    assert_eq!(figures.written, figures.accepted, "{figures:?}");
    for s in 0..10u32 {
        let mut values: Vec<f64> = Vec::new();
        for w in 0..4u32 {
            for i in (0..500u32).filter(|i| i % 10 == s) {
                values.push(f64::from((i * 7 + w) % 100));
            }
        }
        if s == 0 {
            values.extend([-1.0; 3]);
        }
        let hour = stats.get(&format!("agg:{s}"), 3600, &[]).await.unwrap();
        let h = &hour[0].summary;
        assert_eq!(h.count, values.len() as u64);
        assert_eq!(h.sum, values.iter().sum::<f64>());
        assert_eq!(h.min, values.iter().copied().reduce(f64::min));
        assert_eq!(h.max, values.iter().copied().reduce(f64::max));
        let seconds = stats.get(&format!("agg:{s}"), 1, &[]).await.unwrap();
        assert_eq!(
            seconds.iter().map(|x| x.summary.count).sum::<u64>(),
            values.len() as u64
        );
    }
}

/// Writers on separate clients, at once: every observation counted once.
async fn concurrent_writers_are_exact(f: Fixture) {
    let s = settings(&[1, 60], 100);
    let mut tasks = Vec::new();
    for w in 0..4u32 {
        let stats: Stats = f.stats_second_client(s.clone()).await;
        tasks.push(tokio::spawn(async move {
            for i in 0..25u32 {
                let batch: Vec<Observation> = (0..4u32)
                    .map(|k| {
                        Observation::new(format!("c:{}", k % 2), f64::from(w + i + k))
                            .at(BOOK + f64::from(i))
                    })
                    .collect();
                stats.record_many(&batch).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let stats = f.stats(s).await;
    for name in ["c:0", "c:1"] {
        let minute = stats.get(name, 60, &[]).await.unwrap();
        let parity = u32::from(name == "c:1");
        let mut want = 0.0;
        for w in 0..4u32 {
            for i in 0..25u32 {
                for k in (0..4u32).filter(|k| k % 2 == parity) {
                    want += f64::from(w + i + k);
                }
            }
        }
        assert_eq!(minute.iter().map(|x| x.summary.count).sum::<u64>(), 200);
        assert_eq!(minute.iter().map(|x| x.summary.sum).sum::<f64>(), want);
    }
}
