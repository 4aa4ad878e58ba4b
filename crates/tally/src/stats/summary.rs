//! What a statistic reads as: the serde types the API answers with, the
//! figures a ranking orders by, and the bounded top-N that ranks them.
//!
//! Pure: values in, views out. A slice's JSON is
//! `{"start": 1336376400, "count": 3, "sum": 60.0, "min": 10.0, "max":
//! 30.0, "mean": 20.0, "stddev": 10.0, "quantiles": {"0.5": 20.0, "0.9":
//! 30.0, "0.99": 30.0}}`; quantiles are keyed by the shortest decimal form
//! of `q` (whose string order is their numeric order), and a view of a
//! slice kept without a sketch has none. An empty range reads as count 0
//! with `null` min, max, mean and standard deviation.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::engine::kinds::StatsValue;
use crate::error::{Error, Result};

/// Count, sum, min, max, mean, sample standard deviation and quantiles of
/// a set of observations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The number of observations.
    pub count: u64,
    /// Their sum.
    pub sum: f64,
    /// The lowest value; `None` when nothing was observed.
    pub min: Option<f64>,
    /// The highest value.
    pub max: Option<f64>,
    /// The mean.
    pub mean: Option<f64>,
    /// The sample standard deviation (`n − 1`, the book's `get_stats`).
    pub stddev: Option<f64>,
    /// The quantiles asked for, keyed by `q` (`"0.5"`, `"0.99"`); empty
    /// when nothing was observed or no sketch was kept.
    pub quantiles: BTreeMap<String, f64>,
}

impl Summary {
    /// The view of `value` with the quantiles `qs` (already checked to be
    /// in `[0, 1]`): the kind's own summary, quantiles keyed by `q`.
    pub fn of(value: &StatsValue, qs: &[f64]) -> Result<Self> {
        let keys: Vec<String> = qs.iter().map(|&q| quantile_key(q)).collect();
        Self::keyed(value, qs, &keys)
    }

    /// [`Summary::of`] with the keys of `qs` made once by the caller
    /// (`keys[i]` is `quantile_key(qs[i])`): a read of every slice of a
    /// statistic summarises hundreds of slices with the same quantiles.
    pub(crate) fn keyed(value: &StatsValue, qs: &[f64], keys: &[String]) -> Result<Self> {
        debug_assert_eq!(qs.len(), keys.len());
        let quantiles = keys.iter().cloned().zip(value.quantiles(qs)?).collect();
        Ok(Summary {
            count: value.count(),
            sum: value.sum(),
            min: value.min(),
            max: value.max(),
            mean: value.mean(),
            stddev: value.stddev(),
            quantiles,
        })
    }

    /// The quantile `q`, if it was asked for and anything was observed.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        self.quantiles.get(&quantile_key(q)).copied()
    }
}

/// The key of quantile `q` in [`Summary::quantiles`]: its shortest decimal
/// form (`0.5` → `"0.5"`).
pub fn quantile_key(q: f64) -> String {
    format!("{q}")
}

/// One slice of a statistic.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SliceSummary {
    /// Slice start, Unix seconds.
    pub start: u64,
    /// What the slice holds.
    #[serde(flatten)]
    pub summary: Summary,
}

/// Every slice of one precision of a statistic, oldest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatSeries {
    /// Slice length in seconds.
    pub precision: u64,
    /// Whether this precision keeps a quantile sketch (its slices report
    /// quantiles).
    pub sketch: bool,
    /// The slices, oldest first.
    pub slices: Vec<SliceSummary>,
}

/// One statistic (or several merged) over a range of time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RangeSummary {
    /// The range's start, Unix seconds, as asked.
    pub from: u64,
    /// The range's end, Unix seconds, as asked.
    pub to: u64,
    /// The precision it was read at (slices starting in
    /// `[slice_start(from), to]` were merged).
    pub precision: u64,
    /// The merged observations.
    #[serde(flatten)]
    pub summary: Summary,
}

/// What a ranking of statistics orders by.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Figure {
    /// The mean (the book's "slowest pages").
    Mean,
    /// The highest value.
    Max,
    /// The number of observations.
    Count,
    /// The sum.
    Sum,
    /// A quantile, 0 to 1.
    Quantile(f64),
}

impl Figure {
    /// The quantiles a summary needs for this figure.
    pub fn quantiles(&self) -> Vec<f64> {
        match self {
            Figure::Quantile(q) => vec![*q],
            _ => Vec::new(),
        }
    }

    /// Checks the figure (a quantile between 0 and 1).
    pub fn check(&self) -> Result<()> {
        match self {
            Figure::Quantile(q) if !(0.0..=1.0).contains(q) => Err(Error::InvalidInput(format!(
                "a quantile must be between 0 and 1, got {q}"
            ))),
            _ => Ok(()),
        }
    }

    /// This figure of `summary`; `None` when nothing was observed.
    pub fn of(&self, summary: &Summary) -> Option<f64> {
        if summary.count == 0 {
            return None;
        }
        match self {
            Figure::Mean => summary.mean,
            Figure::Max => summary.max,
            Figure::Count => Some(summary.count as f64),
            Figure::Sum => Some(summary.sum),
            Figure::Quantile(q) => summary.quantile(*q),
        }
    }
}

impl fmt::Display for Figure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Figure::Mean => f.write_str("mean"),
            Figure::Max => f.write_str("max"),
            Figure::Count => f.write_str("count"),
            Figure::Sum => f.write_str("sum"),
            Figure::Quantile(q) => write!(f, "q{q}"),
        }
    }
}

impl FromStr for Figure {
    type Err = Error;

    /// `mean`, `max`, `count`, `sum`, `q0.99` (a quantile) or `p99` (a
    /// percentile: `p50`, `p99.9`).
    fn from_str(s: &str) -> Result<Self> {
        let figure = match s {
            "mean" => Figure::Mean,
            "max" => Figure::Max,
            "count" => Figure::Count,
            "sum" => Figure::Sum,
            _ => {
                let q = if let Some(q) = s.strip_prefix('q') {
                    q.parse::<f64>().ok()
                } else if let Some(p) = s.strip_prefix('p') {
                    p.parse::<f64>().ok().map(|p| p / 100.0)
                } else {
                    None
                };
                match q {
                    Some(q) => Figure::Quantile(q),
                    None => {
                        return Err(Error::InvalidInput(format!(
                            "unknown figure {s:?}: expected mean, max, count, sum, q<0..1> \
                             or p<0..100>"
                        )));
                    }
                }
            }
        };
        figure.check()?;
        Ok(figure)
    }
}

/// One statistic in a ranking.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ranked {
    /// The statistic.
    pub name: String,
    /// The figure it was ranked by.
    pub value: f64,
    /// Its summary over the range.
    pub summary: Summary,
}

/// The `n` highest-ranked statistics seen so far, highest first (ties: by
/// name), holding at most `n`.
#[derive(Debug)]
pub struct TopN {
    n: usize,
    kept: Vec<Ranked>,
}

impl TopN {
    /// An empty ranking keeping `n`.
    pub fn new(n: usize) -> Self {
        TopN {
            n,
            kept: Vec::with_capacity(n + 1),
        }
    }

    /// Offers one statistic; kept when it ranks among the `n` highest.
    pub fn offer(&mut self, candidate: Ranked) {
        let at = self.kept.partition_point(|k| ranks_before(k, &candidate));
        if at < self.n {
            self.kept.insert(at, candidate);
            self.kept.truncate(self.n);
        }
    }

    /// The ranking, highest first.
    pub fn into_vec(self) -> Vec<Ranked> {
        self.kept
    }
}

/// True when `a` ranks before `b`: a higher value, or the same and a
/// smaller name.
fn ranks_before(a: &Ranked, b: &Ranked) -> bool {
    match a.value.total_cmp(&b.value) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Equal => a.name < b.name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(values: &[f64]) -> StatsValue {
        let mut s = StatsValue::default();
        for &x in values {
            s.record(x).unwrap();
        }
        s
    }

    #[test]
    fn the_books_example_reads_as_its_figures_and_json() {
        let summary = Summary::of(&of(&[10.0, 20.0, 30.0]), &[0.5, 0.9, 0.99]).unwrap();
        let slice = SliceSummary {
            start: 1336376400,
            summary,
        };
        let json = serde_json::to_string(&slice).unwrap();
        // The median is the sketch's estimate of 20, within 1 %: 19.8866...
        let median = slice.summary.quantile(0.5).unwrap();
        assert!((median - 20.0).abs() <= 0.2, "{median}");
        assert_eq!(
            json,
            format!(
                r#"{{"start":1336376400,"count":3,"sum":60.0,"min":10.0,"max":30.0,"mean":20.0,"stddev":10.0,"quantiles":{{"0.5":{median:?},"0.9":30.0,"0.99":30.0}}}}"#
            )
        );
        let back: SliceSummary = serde_json::from_str(&json).unwrap();
        assert_eq!(back, slice);
        assert_eq!(slice.summary.quantile(0.9), Some(30.0));
        // Nothing observed: nulls and no quantiles.
        let empty = Summary::of(&StatsValue::default(), &[0.5]).unwrap();
        assert_eq!(
            serde_json::to_string(&empty).unwrap(),
            r#"{"count":0,"sum":0.0,"min":null,"max":null,"mean":null,"stddev":null,"quantiles":{}}"#
        );
    }

    #[test]
    fn quantile_keys_sort_as_numbers() {
        let qs = [
            0.0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0,
        ];
        let keys: Vec<String> = qs.iter().map(|&q| quantile_key(q)).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
    }

    #[test]
    fn figures_parse_and_read_their_value() {
        assert_eq!("mean".parse::<Figure>().unwrap(), Figure::Mean);
        assert_eq!("p99".parse::<Figure>().unwrap(), Figure::Quantile(0.99));
        assert_eq!("q0.5".parse::<Figure>().unwrap(), Figure::Quantile(0.5));
        assert_eq!("count".parse::<Figure>().unwrap(), Figure::Count);
        let e = "median".parse::<Figure>().unwrap_err().to_string();
        assert!(e.contains("unknown figure \"median\""), "{e}");
        assert!("p120".parse::<Figure>().is_err());
        let s = Summary::of(&of(&[1.0, 2.0, 6.0]), &[0.5]).unwrap();
        assert_eq!(Figure::Mean.of(&s), Some(3.0));
        assert_eq!(Figure::Max.of(&s), Some(6.0));
        assert_eq!(Figure::Sum.of(&s), Some(9.0));
        assert_eq!(Figure::Count.of(&s), Some(3.0));
        assert!((Figure::Quantile(0.5).of(&s).unwrap() - 2.0).abs() <= 0.02);
        assert_eq!(Figure::Quantile(0.9).of(&s), None, "not asked for");
        let empty = Summary::of(&StatsValue::default(), &[]).unwrap();
        assert_eq!(Figure::Count.of(&empty), None);
        assert_eq!(Figure::Quantile(0.99).to_string(), "q0.99");
    }

    #[test]
    fn top_n_keeps_the_highest_in_order() {
        let s = Summary::of(&of(&[1.0]), &[]).unwrap();
        let mut top = TopN::new(3);
        for (name, value) in [("a", 5.0), ("b", 9.0), ("c", 1.0), ("d", 9.0), ("e", 7.0)] {
            top.offer(Ranked {
                name: name.into(),
                value,
                summary: s.clone(),
            });
        }
        let got: Vec<(String, f64)> = top
            .into_vec()
            .into_iter()
            .map(|r| (r.name, r.value))
            .collect();
        assert_eq!(
            got,
            vec![("b".into(), 9.0), ("d".into(), 9.0), ("e".into(), 7.0)]
        );
    }
}
