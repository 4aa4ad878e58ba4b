//! What the series-combining functions share: graphite-web's aggregation functions
//! (`functions/aggfuncs.py` over `functions/safe.py`), `normalize` (a common step, the
//! least common multiple of the steps, by consolidating each series), the xFilesFactor test
//! of a row, the tags an aggregate keeps, and the `safe*` division and product.
//!
//! Owns that arithmetic; each function's naming lives with the function.

use std::collections::BTreeMap;

use crate::Series;
use crate::pyfmt::{py_max, py_min, py_sum};

/// One of graphite-web's aggregation functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AggFunc {
    Average,
    AvgZero,
    Median,
    Sum,
    Min,
    Max,
    Diff,
    Stddev,
    Count,
    Range,
    Multiply,
    Last,
}

impl AggFunc {
    /// `getAggFunc`: by name or alias (`avg`, `total`, `current`, `rangeOf`).
    pub(crate) fn parse(name: &str) -> Option<AggFunc> {
        Some(match name {
            "average" | "avg" => AggFunc::Average,
            "avg_zero" => AggFunc::AvgZero,
            "median" => AggFunc::Median,
            "sum" | "total" => AggFunc::Sum,
            "min" => AggFunc::Min,
            "max" => AggFunc::Max,
            "diff" => AggFunc::Diff,
            "stddev" => AggFunc::Stddev,
            "count" => AggFunc::Count,
            "range" | "rangeOf" => AggFunc::Range,
            "multiply" => AggFunc::Multiply,
            "last" | "current" => AggFunc::Last,
            _ => return None,
        })
    }

    /// Applies the function to a row (or a window) as the `safe*` helpers do.
    pub(crate) fn apply(self, row: &[Option<f64>]) -> Option<f64> {
        let safe: Vec<f64> = row.iter().flatten().copied().collect();
        match self {
            AggFunc::Average => (!safe.is_empty()).then(|| py_sum(&safe) / safe.len() as f64),
            AggFunc::AvgZero => (!row.is_empty()).then(|| {
                let zeroed: Vec<f64> = row.iter().map(|v| v.unwrap_or(0.0)).collect();
                py_sum(&zeroed) / row.len() as f64
            }),
            AggFunc::Median => {
                if safe.is_empty() {
                    return None;
                }
                let mut sorted = safe;
                sort_py(&mut sorted);
                let mid = sorted.len() / 2;
                Some(if sorted.len().is_multiple_of(2) {
                    (sorted[mid - 1] + sorted[mid]) / 2.0
                } else {
                    sorted[mid]
                })
            }
            AggFunc::Sum => (!safe.is_empty()).then(|| py_sum(&safe)),
            AggFunc::Min => (!safe.is_empty()).then(|| py_min(&safe)),
            AggFunc::Max => (!safe.is_empty()).then(|| py_max(&safe)),
            AggFunc::Diff => {
                let (first, rest) = safe.split_first()?;
                let mut values = vec![*first];
                values.extend(rest.iter().map(|v| v * -1.0));
                Some(py_sum(&values))
            }
            AggFunc::Stddev => {
                if safe.is_empty() {
                    return None;
                }
                let n = safe.len() as f64;
                let avg = py_sum(&safe) / n;
                let mut sum = 0.0;
                for v in &safe {
                    sum += (v - avg) * (v - avg);
                }
                Some((sum / n).sqrt())
            }
            AggFunc::Count => Some(safe.len() as f64),
            AggFunc::Range => {
                if safe.is_empty() {
                    return None;
                }
                Some(py_max(&safe) - py_min(&safe))
            }
            AggFunc::Multiply => {
                if row.iter().any(Option::is_none) || row.is_empty() {
                    return None;
                }
                Some(safe.iter().skip(1).fold(safe[0], |acc, v| acc * v))
            }
            AggFunc::Last => row.iter().rev().flatten().next().copied(),
        }
    }
}

/// Python's `sorted()` of floats (NaN compares false both ways; a stable insertion order
/// around it is as good as Python's for finite values).
fn sort_py(values: &mut [f64]) {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
}

/// graphite-web's `lcm` of two steps.
pub(crate) fn lcm(a: i64, b: i64) -> i64 {
    fn gcd(a: i64, b: i64) -> i64 {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    if a == b {
        return a;
    }
    let (a, b) = if a < b { (b, a) } else { (a, b) };
    let g = gcd(a, b);
    if g == 0 { a } else { (a / g).saturating_mul(b) }
}

/// The result of `normalize`: the series (each consolidated to the common step), their
/// earliest start, the end cut to a whole number of steps, and the step.
pub(crate) struct Normalized {
    pub(crate) series: Vec<Series>,
    pub(crate) start: i64,
    pub(crate) end: i64,
    pub(crate) step: i64,
}

impl Normalized {
    /// The common time axis.
    pub(crate) fn span(&self) -> Span {
        Span {
            start: self.start,
            end: self.end,
            step: self.step,
        }
    }
}

/// `normalize(seriesLists)`; `None` where graphite-web raises `NormalizeEmptyResultError`.
pub(crate) fn normalize(lists: Vec<Vec<Series>>) -> Option<Normalized> {
    let mut series: Vec<Series> = lists.into_iter().flatten().collect();
    let all: Vec<usize> = (0..series.len()).collect();
    let span = normalize_at(&mut series, &all)?;
    Some(Normalized {
        series,
        start: span.start,
        end: span.end,
        step: span.step,
    })
}

/// The time axis `normalize` gives a set of series: earliest start, end cut to a whole
/// number of steps, the least common multiple of the steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: i64,
    pub(crate) end: i64,
    pub(crate) step: i64,
}

/// `normalize` of the series at `members` of `arena`, in place (graphite-web mutates the
/// series it normalizes: each keeps its new `valuesPerPoint` until normalized again). A
/// series may be named twice. `None` for no members.
pub(crate) fn normalize_at(arena: &mut [Series], members: &[usize]) -> Option<Span> {
    let members: Vec<usize> = members
        .iter()
        .copied()
        .filter(|&i| i < arena.len())
        .collect();
    if members.is_empty() {
        return None;
    }
    let step = members
        .iter()
        .map(|&i| arena[i].step)
        .filter(|&s| s > 0)
        .reduce(lcm)
        .unwrap_or(1);
    for &i in &members {
        let s = &mut arena[i];
        s.values_per_point = if s.step > 0 {
            (step / s.step).max(1) as usize
        } else {
            1
        };
    }
    let start = members.iter().map(|&i| arena[i].start).min().unwrap_or(0);
    let mut end = members.iter().map(|&i| arena[i].end).max().unwrap_or(0);
    end = end.saturating_sub(end.saturating_sub(start).rem_euclid(step));
    Some(Span { start, end, step })
}

/// A series a function makes (`TimeSeries(name, start, end, step, values,
/// xFilesFactor=...)`): tags from the name, one value per point.
pub(crate) fn made(
    name: &str,
    span: Span,
    values: Vec<Option<f64>>,
    x_files_factor: f64,
) -> Series {
    let mut series = Series::new(name, span.start, span.end, span.step, values);
    series.x_files_factor = x_files_factor;
    series
}

/// `izip_longest(a, b)`: pairs until both are exhausted, the shorter padded with nulls.
pub(crate) fn zip_longest(
    a: &[Option<f64>],
    b: &[Option<f64>],
) -> impl Iterator<Item = (Option<f64>, Option<f64>)> {
    (0..a.len().max(b.len())).map(|i| (a.get(i).copied().flatten(), b.get(i).copied().flatten()))
}

/// `safeDiv(a, b)`: null for a null dividend or a null or zero divisor.
pub(crate) fn safe_div(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b != 0.0 => Some(a / b),
        _ => None,
    }
}

/// `safeMul(safeDiv(a, b), 100.0)`: a percentage, null where either part is.
pub(crate) fn percent(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    safe_div(a, b).map(|q| q * 100.0)
}

/// `safeSum(row)`: the sum of the non-null values, null when there are none.
pub(crate) fn safe_sum(row: &[Option<f64>]) -> Option<f64> {
    AggFunc::Sum.apply(row)
}

/// `xffValues`: a row counts when its share of non-null values reaches the factor.
pub(crate) fn xff_row(row: &[Option<f64>], x_files_factor: f64) -> bool {
    xff(
        row.iter().filter(|v| v.is_some()).count(),
        row.len(),
        x_files_factor,
    )
}

/// `xff(nonNull, total, xFilesFactor)`.
pub(crate) fn xff(non_null: usize, total: usize, x_files_factor: f64) -> bool {
    non_null > 0 && total > 0 && non_null as f64 / total as f64 >= x_files_factor
}

/// The rows of consolidated values across series, padded with nulls (`izip_longest`).
pub(crate) fn rows(series: &[Series]) -> Vec<Vec<Option<f64>>> {
    let columns: Vec<Vec<Option<f64>>> = series.iter().map(Series::points).collect();
    let len = columns.iter().map(Vec::len).max().unwrap_or(0);
    (0..len)
        .map(|i| {
            columns
                .iter()
                .map(|c| c.get(i).copied().flatten())
                .collect()
        })
        .collect()
}

/// The tags every series shares with the first (same value), as `aggregate` keeps them.
pub(crate) fn common_tags(series: &[Series]) -> BTreeMap<String, String> {
    let Some(first) = series.first() else {
        return BTreeMap::new();
    };
    let mut tags = first.tags.clone();
    for s in series {
        tags.retain(|k, v| s.tags.get(k) == Some(v));
    }
    tags
}

/// `formatPathExpressions`: the distinct path expressions in order, joined by commas.
pub(crate) fn path_expressions(series: &[Series]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for s in series {
        if !seen.contains(&s.path_expression.as_str()) {
            seen.push(&s.path_expression);
        }
    }
    seen.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregation_functions_follow_the_safe_helpers() {
        let row = [Some(1.0), None, Some(4.0), Some(2.0)];
        assert_eq!(AggFunc::Sum.apply(&row), Some(7.0));
        assert_eq!(AggFunc::Average.apply(&row), Some(7.0 / 3.0));
        assert_eq!(AggFunc::AvgZero.apply(&row), Some(7.0 / 4.0));
        assert_eq!(AggFunc::Median.apply(&row), Some(2.0));
        assert_eq!(AggFunc::Median.apply(&[Some(1.0), Some(4.0)]), Some(2.5));
        assert_eq!(AggFunc::Diff.apply(&row), Some(1.0 - 4.0 - 2.0));
        assert_eq!(AggFunc::Count.apply(&row), Some(3.0));
        assert_eq!(AggFunc::Range.apply(&row), Some(3.0));
        assert_eq!(AggFunc::Multiply.apply(&row), None);
        assert_eq!(AggFunc::Multiply.apply(&[Some(2.0), Some(3.0)]), Some(6.0));
        assert_eq!(
            AggFunc::Last.apply(&[Some(1.0), Some(5.0), None]),
            Some(5.0)
        );
        assert_eq!(AggFunc::Sum.apply(&[None, None]), None);
        // safeStdDev: population deviation of 1, 4, 2.
        let avg = 7.0 / 3.0;
        let var = ((1.0f64 - avg).powi(2) + (4.0f64 - avg).powi(2) + (2.0f64 - avg).powi(2)) / 3.0;
        assert_eq!(AggFunc::Stddev.apply(&row), Some(var.sqrt()));
    }

    #[test]
    fn normalize_consolidates_to_the_lcm_of_steps() {
        let a = Series::new("a", 0, 60, 10, vec![Some(1.0); 6]);
        let b = Series::new("b", 0, 60, 15, vec![Some(2.0); 4]);
        let n = normalize(vec![vec![a, b]]).unwrap();
        assert_eq!(n.step, 30);
        assert_eq!((n.start, n.end), (0, 60));
        assert_eq!(n.series[0].values_per_point, 3);
        assert_eq!(n.series[1].values_per_point, 2);
        assert_eq!(lcm(4, 6), 12);
        assert_eq!(lcm(60, 60), 60);
        assert!(normalize(vec![vec![], vec![]]).is_none());
    }
}
