//! What Graphite sees of a statistic: a branch of leaves, one value each
//! per slice.
//!
//! In Tally's namespace a statistic `N` has the leaves `N.count`, `N.sum`,
//! `N.min`, `N.max`, `N.mean`, `N.stddev` (the book's sample standard
//! deviation, as `GET /v1/stats` reports it) and one `N.p<percentile>` per
//! quantile asked for. In statsd's namespace it is the timer
//! `stats.timers.N` with statsd's leaves: `count`, `count_ps` (count per
//! second of the slice), `lower`, `upper`, `mean`, `median`, `std` (the
//! population standard deviation, as statsd computes it), `sum`,
//! `sum_squares`, and for each percentile P (0.9 → `90`, 0.999 → `99_9`)
//! `count_P`, `mean_P`, `sum_P`, `sum_squares_P` and `upper_P` over the
//! lowest `round(P/100 × count)` values.
//!
//! Accuracy: counts, sums, sums of squares, min, max, mean and standard
//! deviations are exact (f64 sums); `median`, quantile leaves and `upper_P`
//! are the sketch's values (within its relative accuracy, 1 % by default,
//! of a value observed at that rank); `sum_P`, `mean_P` and
//! `sum_squares_P` add the sketch's bucket values clamped to the slice's
//! min and max, so each value counted is within the relative accuracy
//! (`sum_squares_P` within about twice it) of the one observed, and the
//! sums are too where the values share a sign. The ends are exact: the
//! lowest rank is the min and the highest the max (so a `median` of one or
//! two values is statsd's), and a percentile that takes every value
//! (`count_P` = `count`, as 99.9 does up to 500 values) reads the exact
//! sum, sum of squares, mean and max. At a precision that keeps no sketch,
//! every leaf that needs one reads null.
//!
//! Sample rates: statsd counts a timer line sent with `|@0.5` as 2 in
//! `count` and `count_ps` but takes its value once in every other leaf;
//! Tally records it as `round(1/rate)` observations of that value (what
//! the statistic's moments and sketch hold), so all its leaves estimate
//! every event: `count` and `count_ps` agree with statsd's where `1/rate`
//! is whole, `lower` and `upper` always, the others are over the weighted
//! values (`tests/tally/graphite.rs` checks both against statsd itself).

use crate::engine::Value;
use crate::engine::kinds::StatsValue;
use crate::graphite::{Leaf, Namespace, ReadValue, Shape, percentile, quantile_node};
use crate::stats::Stats;

/// The value of a leaf that needs the slice's sketch: `None` where the
/// precision keeps none.
fn with_sketch(
    sketched: &[u64],
    read: impl Fn(&StatsValue) -> Option<f64> + Send + Sync + 'static,
) -> impl ReadValue {
    let sketched = sketched.to_vec();
    move |v, step| match v {
        Value::Stats(s) if sketched.contains(&step) => read(s),
        _ => None,
    }
}

/// The value of a leaf from the moments alone.
fn moments(
    read: impl Fn(&StatsValue, u64) -> Option<f64> + Send + Sync + 'static,
) -> impl ReadValue {
    move |v, step| match v {
        Value::Stats(s) if !s.is_empty() => read(s, step),
        _ => None,
    }
}

/// The value of rank `rank` (1-based): the min and the max at the ends,
/// the sketch's estimate within the observed range between them.
fn at_rank(s: &StatsValue, rank: u64) -> Option<f64> {
    let (lo, hi) = (s.min()?, s.max()?);
    let v = s.sketch().value_at_rank(rank)?;
    Some(if rank == 1 {
        lo
    } else if rank == s.count() {
        hi
    } else {
        v.clamp(lo, hi)
    })
}

/// statsd's count of values at or below percentile `pct` (0 to 100) of
/// `count`: JavaScript's `Math.round(pct / 100 * count)`, or the count
/// itself for a single value.
fn in_threshold(pct: f64, count: u64) -> u64 {
    if count <= 1 {
        return count;
    }
    (pct / 100.0 * count as f64 + 0.5).floor() as u64
}

/// The sum and sum of squares of the lowest `n` values, and the highest of
/// them: exact when they are all the values; else the min, then the
/// sketch's buckets (each value clamped to the observed range).
fn lowest(s: &StatsValue, n: u64) -> Option<(f64, f64, f64)> {
    let (lo, hi) = (s.min()?, s.max()?);
    if n == 0 {
        return None;
    }
    if n >= s.count() {
        return Some((s.sum(), s.sum_of_squares(), hi));
    }
    let (mut left, mut sum, mut sumsq, mut upper) = (n - 1, lo, lo * lo, lo);
    // The min stands for the lowest value, in the first bucket that counts one.
    let mut skip = 1u64;
    for (value, count) in s.sketch().buckets() {
        if left == 0 {
            break;
        }
        let skipped = skip.min(count);
        skip -= skipped;
        let take = (count - skipped).min(left);
        if take == 0 {
            continue;
        }
        let v = value.clamp(lo, hi);
        sum += v * take as f64;
        sumsq += v * v * take as f64;
        upper = v;
        left -= take;
    }
    Some((sum, sumsq, upper))
}

impl Stats {
    /// The statistics' place in the Graphite namespace `ns`, with a leaf
    /// per quantile (or percentile) of `quantiles`.
    pub fn graphite_shapes(&self, ns: Namespace, quantiles: &[f64]) -> Vec<Shape> {
        let sketched: Vec<u64> = self
            .settings()
            .precisions
            .iter()
            .copied()
            .filter(|&p| self.settings().keeps_sketch(p))
            .collect();
        match ns {
            Namespace::Tally => vec![tally_shape(&sketched, quantiles)],
            Namespace::Statsd => vec![statsd_shape(&sketched, quantiles)],
        }
    }
}

fn tally_shape(sketched: &[u64], quantiles: &[f64]) -> Shape {
    let mut leaves = vec![
        Leaf::new("count", moments(|s, _| Some(s.count() as f64))),
        Leaf::new("sum", moments(|s, _| Some(s.sum()))),
        Leaf::new("min", moments(|s, _| s.min())),
        Leaf::new("max", moments(|s, _| s.max())),
        Leaf::new("mean", moments(|s, _| s.mean())),
        Leaf::new("stddev", moments(|s, _| s.stddev())),
    ];
    for &q in quantiles {
        leaves.push(Leaf::new(
            quantile_node(q),
            with_sketch(sketched, move |s| s.quantile(q).ok().flatten()),
        ));
    }
    Shape {
        root: String::new(),
        leaves,
    }
}

fn statsd_shape(sketched: &[u64], quantiles: &[f64]) -> Shape {
    let mut leaves = vec![
        Leaf::new("count", moments(|s, _| Some(s.count() as f64))),
        Leaf::new(
            "count_ps",
            moments(|s, step| Some(s.count() as f64 / step as f64)),
        ),
        Leaf::new("lower", moments(|s, _| s.min())),
        Leaf::new("upper", moments(|s, _| s.max())),
        Leaf::new("mean", moments(|s, _| s.mean())),
        Leaf::new(
            "median",
            with_sketch(sketched, |s| {
                let n = s.count();
                let mid = n / 2;
                if n % 2 == 1 {
                    at_rank(s, mid + 1)
                } else {
                    Some((at_rank(s, mid)? + at_rank(s, mid + 1)?) / 2.0)
                }
            }),
        ),
        Leaf::new(
            "std",
            moments(|s, _| {
                let n = s.count() as f64;
                let mean = s.sum() / n;
                Some((s.sum_of_squares() / n - mean * mean).max(0.0).sqrt())
            }),
        ),
        Leaf::new("sum", moments(|s, _| Some(s.sum()))),
        Leaf::new("sum_squares", moments(|s, _| Some(s.sum_of_squares()))),
    ];
    for &q in quantiles {
        let pct = percentile(q);
        let p: f64 = pct.parse().expect("a percentile is a number");
        let label = pct.replace('.', "_");
        let n = move |s: &StatsValue| in_threshold(p, s.count());
        leaves.push(Leaf::new(
            format!("count_{label}"),
            moments(move |s, _| Some(n(s) as f64).filter(|&c| c > 0.0)),
        ));
        leaves.push(Leaf::new(
            format!("mean_{label}"),
            with_sketch(sketched, move |s| {
                lowest(s, n(s)).map(|(sum, _, _)| sum / n(s) as f64)
            }),
        ));
        leaves.push(Leaf::new(
            format!("sum_{label}"),
            with_sketch(sketched, move |s| lowest(s, n(s)).map(|(sum, _, _)| sum)),
        ));
        leaves.push(Leaf::new(
            format!("sum_squares_{label}"),
            with_sketch(sketched, move |s| lowest(s, n(s)).map(|(_, sq, _)| sq)),
        ));
        leaves.push(Leaf::new(
            format!("upper_{label}"),
            with_sketch(sketched, move |s| lowest(s, n(s)).map(|(_, _, up)| up)),
        ));
    }
    Shape {
        root: "stats.timers".into(),
        leaves,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::kinds::SketchSettings;

    fn stat(values: &[f64]) -> Value {
        let mut s = StatsValue::new(SketchSettings::default());
        for &v in values {
            s.record(v).unwrap();
        }
        Value::Stats(Box::new(s))
    }

    fn leaf<'a>(shape: &'a Shape, node: &str) -> &'a Leaf {
        shape
            .leaves
            .iter()
            .find(|l| l.node == node)
            .unwrap_or_else(|| panic!("no leaf {node} in {:?}", shape.leaves))
    }

    fn read(shape: &Shape, node: &str, v: &Value, step: u64) -> Option<f64> {
        (leaf(shape, node).read)(v, step)
    }

    /// What each of `nodes` reads of `v` at `step`, in that order.
    fn reads(shape: &Shape, nodes: &[&str], v: &Value, step: u64) -> Vec<Option<f64>> {
        nodes.iter().map(|n| read(shape, n, v, step)).collect()
    }

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-12)
    }

    #[test]
    fn tally_leaves_read_the_summary_and_quantiles_where_a_sketch_is_kept() {
        let shape = tally_shape(&[60], &[0.5, 0.99]);
        let nodes: Vec<&str> = shape.leaves.iter().map(|l| l.node.as_str()).collect();
        assert_eq!(
            nodes,
            ["count", "sum", "min", "max", "mean", "stddev", "p50", "p99"]
        );
        let v = stat(&[10.0, 20.0, 30.0]);
        let summary = ["count", "sum", "min", "max", "mean", "stddev"];
        assert_eq!(
            reads(&shape, &summary, &v, 60),
            [3.0, 60.0, 10.0, 30.0, 20.0, 10.0].map(Some)
        );
        assert!(close(read(&shape, "p50", &v, 60).unwrap(), 20.0, 0.01));
        assert_eq!(read(&shape, "p99", &v, 60), Some(30.0));
        // A precision without a sketch shows no quantiles, the rest as ever.
        assert_eq!(read(&shape, "p50", &v, 3600), None);
        assert_eq!(read(&shape, "count", &v, 3600), Some(3.0));
        // An empty slice shows nothing.
        assert_eq!(read(&shape, "count", &stat(&[]), 60), None);
    }

    #[test]
    fn statsd_leaves_follow_statsd_on_exactly_representable_values() {
        let shape = statsd_shape(&[10], &[0.9, 0.999]);
        // 1..=10: statsd's count_90 = round(9) = 9 values, 1..=9.
        let values: Vec<f64> = (1..=10).map(f64::from).collect();
        let v = stat(&values);
        let exact = [
            "count",
            "count_ps",
            "lower",
            "upper",
            "sum",
            "sum_squares",
            "mean",
        ];
        assert_eq!(
            reads(&shape, &exact, &v, 10),
            [10.0, 1.0, 1.0, 10.0, 55.0, 385.0, 5.5].map(Some)
        );
        // Population standard deviation of 1..=10: sqrt(8.25).
        assert!(close(
            read(&shape, "std", &v, 10).unwrap(),
            8.25f64.sqrt(),
            1e-12
        ));
        assert!(close(read(&shape, "median", &v, 10).unwrap(), 5.5, 0.01));
        assert_eq!(read(&shape, "count_90", &v, 10), Some(9.0));
        assert!(close(read(&shape, "sum_90", &v, 10).unwrap(), 45.0, 0.01));
        assert!(close(read(&shape, "mean_90", &v, 10).unwrap(), 5.0, 0.01));
        assert!(close(
            read(&shape, "sum_squares_90", &v, 10).unwrap(),
            285.0,
            0.02
        ));
        assert!(close(read(&shape, "upper_90", &v, 10).unwrap(), 9.0, 0.01));
        // 99.9 % of 10 values rounds to all 10: exact, as statsd's.
        let all = [
            "count_99_9",
            "sum_99_9",
            "mean_99_9",
            "sum_squares_99_9",
            "upper_99_9",
        ];
        assert_eq!(
            reads(&shape, &all, &v, 10),
            [10.0, 55.0, 5.5, 385.0, 10.0].map(Some)
        );
    }

    #[test]
    fn the_ends_are_the_min_and_the_max() {
        let shape = statsd_shape(&[10], &[0.9, 0.5]);
        // Two values: the median is their mean; 90 % of 2 rounds to both.
        let two = stat(&[3.0, 8.0]);
        let nodes = ["median", "upper_90", "sum_90", "sum_squares_90"];
        assert_eq!(
            reads(&shape, &nodes, &two, 10),
            [5.5, 8.0, 11.0, 73.0].map(Some)
        );
        // 50 % of 2 is the lowest alone: the min.
        assert_eq!(
            reads(&shape, &["upper_50", "sum_squares_50"], &two, 10),
            [3.0, 9.0].map(Some)
        );
        // Between the ends, the sketch's values; the lowest still the min.
        let values: Vec<f64> = (1..=10).map(|v| f64::from(v) * 1.1).collect();
        let v = stat(&values);
        assert_eq!(
            read(&shape, "upper_50", &v, 10).map(|u| close(u, 5.5, 0.01)),
            Some(true)
        );
        let sum_50 = read(&shape, "sum_50", &v, 10).unwrap();
        assert!(close(sum_50, 16.5, 0.01), "{sum_50}");
        let (sum, _, upper) = lowest(
            match &v {
                Value::Stats(s) => s,
                _ => unreachable!(),
            },
            1,
        )
        .unwrap();
        assert_eq!((sum, upper), (1.1, 1.1));
    }

    #[test]
    fn statsd_percentiles_of_one_value_and_of_too_few() {
        let shape = statsd_shape(&[10], &[0.9, 0.05]);
        let one = stat(&[7.0]);
        let ninety = ["count_90", "upper_90", "sum_squares_90"];
        assert_eq!(reads(&shape, &ninety, &one, 10), [1.0, 7.0, 49.0].map(Some));
        // 5 % of 4 values rounds to none: statsd writes no percentile metrics.
        let four = stat(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(
            reads(&shape, &["count_5", "upper_5"], &four, 10),
            [None, None]
        );
        assert_eq!(in_threshold(50.0, 5), 3); // Math.round(2.5) = 3
    }

    #[test]
    fn statsd_shape_sits_under_stats_timers() {
        let shape = statsd_shape(&[], &[0.5]);
        assert_eq!(shape.root, "stats.timers");
        assert!(shape.leaves.iter().any(|l| l.node == "upper_50"));
        // Without a sketch anywhere, no leaf that needs one has a value.
        let v = stat(&[1.0, 2.0]);
        assert_eq!(read(&shape, "median", &v, 10), None);
        assert_eq!(read(&shape, "count", &v, 10), Some(2.0));
    }
}
