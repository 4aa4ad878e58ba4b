//! What Graphite sees of a counter: one leaf, its count per slice; in
//! statsd's namespace twice, as statsd's Graphite backend writes a
//! counter: `stats_counts.N` (the count per slice) and `stats.N` (per
//! second: the count divided by the slice's length).

use crate::counters::Counters;
use crate::engine::Value;
use crate::graphite::{Namespace, Shape};

fn count(v: &Value, _step: u64) -> Option<f64> {
    v.as_sum().map(|c| c as f64)
}

fn per_second(v: &Value, step: u64) -> Option<f64> {
    v.as_sum().map(|c| c as f64 / step as f64)
}

impl Counters {
    /// The counters' place in the Graphite namespace `ns`.
    pub fn graphite_shapes(&self, ns: Namespace) -> Vec<Shape> {
        match ns {
            Namespace::Tally => vec![Shape::single("", count)],
            Namespace::Statsd => vec![
                Shape::single("stats_counts", count),
                Shape::single("stats", per_second),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_and_its_rate() {
        assert_eq!(count(&Value::Sum(30), 10), Some(30.0));
        assert_eq!(per_second(&Value::Sum(30), 10), Some(3.0));
        assert_eq!(per_second(&Value::Sum(-5), 10), Some(-0.5));
    }
}
