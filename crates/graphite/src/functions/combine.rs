//! Combine functions: series merged point by point after `normalize` (graphite-web's
//! `aggregate` and the functions built on it), pairwise across two lists
//! (`aggregateSeriesLists`), by name with nodes left out (`aggregateWithWildcards`), and the
//! combinations with rules of their own (`divideSeries`, `multiplySeries`, `countSeries`,
//! `percentileOfSeries`, `powSeries`).
//!
//! Their errors are graphite-web's own 400s; where graphite-web fails with a 500 instead (a
//! percentile past the values), the answer is a 400 naming the problem. Matching by nodes
//! (`asPercent`, `groupByNode`) lives in `group.rs`.

use std::collections::HashMap;
use std::sync::Arc;

use super::agg::{
    AggFunc, Normalized, Span, common_tags, lcm, made, normalize, path_expressions, rows, safe_div,
    xff_row, zip_longest,
};
use super::{
    Alias, Args, Body, Builtin, Context, Function, Param, ParamType, Signature, Value, series_list,
};
use crate::pyfmt::format_g;
use crate::{Error, Result, Series};

/// The `*Series(*seriesLists)` functions that are `aggregate` with a fixed function.
const AGGREGATORS: &[(&str, &str, &str)] = &[
    (
        "sumSeries",
        "sum",
        "Adds the series together point by point (nulls skipped; null where every series \
         is null). Series of different steps are first consolidated to their least common \
         multiple.",
    ),
    (
        "averageSeries",
        "average",
        "The mean of the series' non-null values at each point (null where all are null), \
         after consolidating them to a common step.",
    ),
    (
        "maxSeries",
        "max",
        "The largest non-null value of the series at each point, after consolidating them \
         to a common step.",
    ),
    (
        "minSeries",
        "min",
        "The smallest non-null value of the series at each point, after consolidating them \
         to a common step.",
    ),
    (
        "diffSeries",
        "diff",
        "The first series' value minus every other series' value at each point (nulls \
         skipped), after consolidating them to a common step. To subtract a constant use \
         offset.",
    ),
    (
        "stddevSeries",
        "stddev",
        "The population standard deviation of the series' non-null values at each point, \
         after consolidating them to a common step.",
    ),
    (
        "rangeOfSeries",
        "rangeOf",
        "The largest minus the smallest non-null value of the series at each point, after \
         consolidating them to a common step.",
    ),
];

/// The `*SeriesLists(first, second)` functions: `aggregateSeriesLists` with a function.
const LIST_AGGREGATORS: &[(&str, &str, &str)] = &[
    (
        "sumSeriesLists",
        "sum",
        "Adds the two lists' series pairwise by position (first with first, second with \
         second, ...); the lists must be as long as each other.",
    ),
    (
        "diffSeriesLists",
        "diff",
        "Subtracts the second list's series from the first list's pairwise by position; the \
         lists must be as long as each other.",
    ),
    (
        "multiplySeriesLists",
        "multiply",
        "Multiplies the two lists' series pairwise by position; the lists must be as long as \
         each other.",
    ),
];

/// The `*SeriesWithWildcards(seriesList, *position)` functions.
const WILDCARD_AGGREGATORS: &[(&str, &str, &str)] = &[
    (
        "sumSeriesWithWildcards",
        "sum",
        "Groups the series by their names without the given node positions and adds each \
         group together; each result is named by its group's remaining nodes.",
    ),
    (
        "averageSeriesWithWildcards",
        "average",
        "Groups the series by their names without the given node positions and averages \
         each group point by point; each result is named by its group's remaining nodes.",
    ),
    (
        "multiplySeriesWithWildcards",
        "multiply",
        "Groups the series by their names without the given node positions and multiplies \
         each group point by point; each result is named by its group's remaining nodes.",
    ),
];

pub(crate) fn functions() -> Vec<Arc<dyn Function>> {
    let series_lists = || {
        vec![
            Param::new("seriesLists", ParamType::SeriesList)
                .required()
                .multiple(),
        ]
    };
    let two_lists = || {
        vec![
            Param::new("seriesListFirstPos", ParamType::SeriesList).required(),
            Param::new("seriesListSecondPos", ParamType::SeriesList).required(),
        ]
    };
    let agg_func = || Param::new("func", ParamType::AggFunc).required();
    let x_files_factor = || Param::new("xFilesFactor", ParamType::Float);
    let position = || Param::new("position", ParamType::Node).multiple();
    let combine = |name: &str, function: &str, description: &str, params: Vec<Param>| {
        Signature::new(name, function, "Combine", description).params(params)
    };
    let mut out: Vec<Arc<dyn Function>> = Vec::new();
    let fixed = [
        (AGGREGATORS, Shape::Lists, "*seriesLists", series_lists()),
        (
            LIST_AGGREGATORS,
            Shape::Pairs,
            "seriesListFirstPos, seriesListSecondPos",
            two_lists(),
        ),
        (
            WILDCARD_AGGREGATORS,
            Shape::Wildcards,
            "seriesList, *position",
            vec![series_list(), position()],
        ),
    ];
    for (aggregators, shape, args, params) in fixed {
        for &(name, func, description) in aggregators {
            let signature =
                Signature::with_args(name, args, "Combine", description).params(params.clone());
            let f = Builtin::arc(signature.aggregator(), Fixed { func, shape });
            match name {
                "sumSeries" => out.push(Alias::arc("sum", &f)),
                "averageSeries" => out.push(Alias::arc("avg", &f)),
                _ => {}
            }
            out.push(f);
        }
    }
    out.extend([
        Builtin::arc(
            combine(
                "aggregate",
                "aggregate(seriesList, func, xFilesFactor=None)",
                "Merges the series into one by an aggregation function applied at each point \
                 (sum, average, median, min, max, diff, stddev, count, range, multiply, \
                 last, ...), after consolidating them to a common step. A point is null \
                 unless at least xFilesFactor of its values are non-null.",
                vec![series_list(), agg_func(), x_files_factor()],
            ),
            aggregate_fn,
        ),
        Builtin::arc(
            combine(
                "aggregateSeriesLists",
                "aggregateSeriesLists(seriesListFirstPos, seriesListSecondPos, func, \
                 xFilesFactor=None)",
                "Merges the two lists' series pairwise by position with an aggregation \
                 function; the lists must be as long as each other.",
                [two_lists(), vec![agg_func(), x_files_factor()]].concat(),
            ),
            aggregate_series_lists_fn,
        ),
        Builtin::arc(
            combine(
                "aggregateWithWildcards",
                "aggregateWithWildcards(seriesList, func, *positions)",
                "Groups the series by their names without the given node positions and \
                 merges each group with an aggregation function; each result is named by \
                 its group's remaining nodes.",
                vec![series_list(), agg_func(), position()],
            ),
            aggregate_with_wildcards_fn,
        ),
        Builtin::arc(
            combine(
                "multiplySeries",
                "multiplySeries(*seriesLists)",
                "Multiplies the series together point by point (null where any is null), \
                 after consolidating them to a common step; a single series comes back \
                 unchanged. To multiply by a constant use scale.",
                series_lists(),
            )
            .aggregator(),
            multiply_series,
        ),
        Builtin::arc(
            combine(
                "divideSeries",
                "divideSeries(dividendSeriesList, divisorSeries)",
                "Divides each series of the first list by the one divisor series point by \
                 point (null where either is null or the divisor is zero). With no divisor \
                 series, each dividend comes back renamed with MISSING and all nulls.",
                vec![
                    Param::new("dividendSeriesList", ParamType::SeriesList).required(),
                    Param::new("divisorSeries", ParamType::SeriesList).required(),
                ],
            ),
            divide_series,
        ),
        Builtin::arc(
            combine(
                "countSeries",
                "countSeries(*seriesLists)",
                "A line at the number of series given (at their common step); with no \
                 argument at all, a line at zero across the time range.",
                vec![Param::new("seriesLists", ParamType::SeriesList).multiple()],
            )
            .aggregator(),
            count_series,
        ),
        Builtin::arc(
            combine(
                "percentileOfSeries",
                "percentileOfSeries(seriesList, n, interpolate=False)",
                "The n-th percentile of the series' non-null values at each point (nearest \
                 rank: one of the values, unless interpolate is true), after consolidating \
                 them to a common step.",
                vec![
                    series_list(),
                    Param::new("n", ParamType::Float).required(),
                    Param::new("interpolate", ParamType::Boolean).default(Value::Bool(false)),
                ],
            ),
            percentile_of_series,
        ),
        Builtin::arc(
            combine(
                "powSeries",
                "powSeries(*seriesLists)",
                "Raises the first series to the power of the second, that to the power of \
                 the third, and so on, point by point (null where a value is null or the \
                 power is undefined or overflows).",
                vec![
                    Param::new("seriesList", ParamType::SeriesList)
                        .required()
                        .multiple(),
                ],
            )
            .aggregator(),
            pow_series,
        ),
    ]);
    out
}

/// How a fixed-function aggregator takes its series.
#[derive(Clone, Copy)]
enum Shape {
    /// `*seriesLists`, merged into one.
    Lists,
    /// Two lists, merged pairwise.
    Pairs,
    /// One list, grouped by name without some nodes.
    Wildcards,
}

/// An aggregator with its function fixed (`sumSeries` is `aggregate(..., "sum")`).
struct Fixed {
    func: &'static str,
    shape: Shape,
}

#[async_trait::async_trait]
impl Body for Fixed {
    async fn call(&self, cx: &Context<'_>, mut args: Args) -> Result<Value> {
        let result = match self.shape {
            Shape::Lists => aggregate(cx, args.take_all_series(0), self.func, None)?,
            Shape::Pairs => {
                let (first, second) = (args.take_series(0), args.take_series(1));
                aggregate_series_lists(cx, first, second, self.func, None)?
            }
            Shape::Wildcards => {
                let positions = positions(args.all(1));
                aggregate_with_wildcards(cx, args.take_series(0), self.func, &positions)?
            }
        };
        Ok(Value::Series(result))
    }
}

/// graphite-web's `aggregate(seriesLists, func, xFilesFactor)`: one series named
/// `<func>Series(<path expressions>)` holding the function of each row of normalized values.
pub(crate) fn aggregate(
    cx: &Context<'_>,
    lists: Vec<Vec<Series>>,
    func: &str,
    x_files_factor: Option<f64>,
) -> Result<Vec<Series>> {
    let raw = func;
    let func = func.strip_suffix("Series").unwrap_or(func);
    let Some(agg) = AggFunc::parse(func) else {
        return Err(Error::invalid(format!(
            "Unsupported aggregation function: {raw}"
        )));
    };
    if lists.iter().all(Vec::is_empty) {
        return Ok(Vec::new());
    }
    let Some(normalized) = normalize(lists) else {
        return Ok(Vec::new());
    };
    let xff = x_files_factor.unwrap_or_else(|| cx.x_files_factor());
    let name = format!("{func}Series({})", path_expressions(&normalized.series));
    let values = rows(&normalized.series)
        .iter()
        .map(|row| {
            if xff_row(row, xff) {
                agg.apply(row)
            } else {
                None
            }
        })
        .collect();
    let mut tags = common_tags(&normalized.series);
    tags.entry("name".to_owned())
        .or_insert_with(|| name.clone());
    tags.insert("aggregatedBy".to_owned(), func.to_owned());
    let mut series = made(&name, normalized.span(), values, xff);
    series.tags = tags;
    Ok(vec![series])
}

fn aggregate_fn(cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let func = required_str(&args, 1, "aggregate", "func")?;
    let xff = args.f64(2);
    let list = args.take_series(0);
    aggregate(cx, vec![list], &func, xff).map(Value::Series)
}

fn aggregate_series_lists_fn(cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let func = required_str(&args, 2, "aggregateSeriesLists", "func")?;
    let xff = args.f64(3);
    let (first, second) = (args.take_series(0), args.take_series(1));
    aggregate_series_lists(cx, first, second, &func, xff).map(Value::Series)
}

fn aggregate_with_wildcards_fn(cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let func = required_str(&args, 1, "aggregateWithWildcards", "func")?;
    let positions = positions(args.all(2));
    aggregate_with_wildcards(cx, args.take_series(0), &func, &positions).map(Value::Series)
}

/// `aggregateSeriesLists`: the i-th series of each list aggregated together, named
/// `<func>Series(<first name>,<second name>)`.
fn aggregate_series_lists(
    cx: &Context<'_>,
    first: Vec<Series>,
    second: Vec<Series>,
    func: &str,
    x_files_factor: Option<f64>,
) -> Result<Vec<Series>> {
    if first.len() != second.len() {
        return Err(Error::invalid(
            "seriesListFirstPos and seriesListSecondPos argument must have equal length",
        ));
    }
    let mut out = Vec::with_capacity(first.len());
    for (a, b) in first.into_iter().zip(second) {
        let names = format!("{},{}", a.name, b.name);
        let Some(mut result) = aggregate(cx, vec![vec![a, b]], func, x_files_factor)?
            .into_iter()
            .next()
        else {
            continue;
        };
        // `name[:name.find('Series(')]`: the function's part of the name (Python's -1 for
        // "not found" drops the last character).
        let prefix = match result.name.find("Series(") {
            Some(at) => &result.name[..at],
            None => {
                let last = result.name.chars().last().map_or(0, char::len_utf8);
                &result.name[..result.name.len() - last]
            }
        };
        result.name = format!("{prefix}Series({names})");
        out.push(result);
    }
    Ok(out)
}

/// The node positions given (validated integers).
fn positions(values: &[Value]) -> Vec<i64> {
    values
        .iter()
        .filter_map(|v| match v {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(*b as i64),
            _ => None,
        })
        .collect()
}

/// `aggregateWithWildcards`: series grouped by their dotted names without the nodes at
/// `positions` (in order of first appearance), each group aggregated and named by its key.
fn aggregate_with_wildcards(
    cx: &Context<'_>,
    list: Vec<Series>,
    func: &str,
    positions: &[i64],
) -> Result<Vec<Series>> {
    let mut keys: Vec<String> = Vec::new();
    let mut groups: HashMap<String, Vec<Series>> = HashMap::new();
    for series in list {
        let key = series
            .name
            .split('.')
            .enumerate()
            .filter(|(i, _)| !positions.contains(&(*i as i64)))
            .map(|(_, part)| part)
            .collect::<Vec<_>>()
            .join(".");
        match groups.get_mut(&key) {
            Some(group) => group.push(series),
            None => {
                keys.push(key.clone());
                groups.insert(key, vec![series]);
            }
        }
    }
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let group = groups.remove(&key).unwrap_or_default();
        if let Some(mut series) = aggregate(cx, vec![group], func, None)?.into_iter().next() {
            series.name = key;
            out.push(series);
        }
    }
    Ok(out)
}

/// A required string argument (validation guarantees it; a missing one names itself).
fn required_str(args: &Args, i: usize, func: &str, param: &str) -> Result<String> {
    match args.get(i) {
        Some(value) => Ok(value.to_py_str()),
        None => Err(Error::invalid(format!(
            "Missing required parameter \"{param}\" for function \"{func}\""
        ))),
    }
}

fn multiply_series(cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let mut lists = args.take_all_series(0);
    // graphite-web's legacy case: one list holding one series comes back as it is.
    if lists.len() == 1 && lists[0].len() == 1 {
        return Ok(Value::Series(lists.remove(0)));
    }
    aggregate(cx, lists, "multiply", None).map(Value::Series)
}

fn divide_series(cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let mut dividends = args.take_series(0);
    let divisors = args.take_series(1);
    let divisor = match divisors.len() {
        0 => {
            for series in &mut dividends {
                series.name = format!("divideSeries({},MISSING)", series.name);
                series.path_expression = series.name.clone();
                series.values.iter_mut().for_each(|v| *v = None);
            }
            return Ok(Value::Series(dividends));
        }
        1 => divisors.into_iter().next(),
        n => {
            return Err(Error::invalid(format!(
                "divideSeries second argument must reference exactly 1 series (got {n})"
            )));
        }
    };
    let Some(mut divisor) = divisor else {
        return Ok(Value::Series(Vec::new()));
    };
    let out = dividends
        .iter_mut()
        .map(|dividend| quotient(dividend, &mut divisor, cx.x_files_factor()))
        .collect();
    Ok(Value::Series(out))
}

/// One quotient of `divideSeries` (and `divideSeriesLists`): `divideSeries(<a>,<b>)`, both
/// series consolidated in place to the least common multiple of their steps, then divided
/// point by point (`safeDiv`, padded with nulls to the longer).
pub(crate) fn quotient(dividend: &mut Series, divisor: &mut Series, x_files_factor: f64) -> Series {
    let name = format!("divideSeries({},{})", dividend.name, divisor.name);
    let step = if dividend.step > 0 && divisor.step > 0 {
        lcm(dividend.step, divisor.step)
    } else {
        dividend.step.max(divisor.step).max(1)
    };
    for s in [&mut *dividend, &mut *divisor] {
        s.values_per_point = if s.step > 0 {
            (step / s.step).max(1) as usize
        } else {
            1
        };
    }
    let start = dividend.start.min(divisor.start);
    let end = dividend.end.max(divisor.end);
    let end = end.saturating_sub(end.saturating_sub(start).rem_euclid(step));
    let values = zip_longest(&dividend.points(), &divisor.points())
        .map(|(a, b)| safe_div(a, b))
        .collect();
    made(&name, Span { start, end, step }, values, x_files_factor)
}

fn count_series(cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let lists = args.take_all_series(0);
    if lists.is_empty() {
        // No argument at all: graphite-web's constantLine(0), renamed in its path expression.
        let (start, end) = (cx.from(), cx.until());
        let step = (end.saturating_sub(start) as f64 / 2.0) as i64;
        if step <= 0 {
            return Err(Error::invalid(
                "countSeries() needs a time range of at least two seconds",
            ));
        }
        let mut series = made(
            "0",
            Span { start, end, step },
            vec![Some(0.0); 3],
            cx.x_files_factor(),
        );
        series.path_expression = "countSeries()".to_owned();
        return Ok(Value::Series(vec![series]));
    }
    let Some(normalized) = normalize(lists) else {
        return Ok(Value::Series(Vec::new()));
    };
    let name = format!("countSeries({})", path_expressions(&normalized.series));
    let count = normalized.series.len() as f64;
    let points = rows(&normalized.series).len();
    let span = normalized.span();
    let mut series = made(&name, span, vec![Some(count); points], cx.x_files_factor());
    series.path_expression = name;
    Ok(Value::Series(vec![series]))
}

fn percentile_of_series(cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let Some(n) = args.f64(1) else {
        return Err(Error::invalid(
            "Missing required parameter \"n\" for function \"percentileOfSeries\"",
        ));
    };
    let interpolate = args.bool(2).unwrap_or(false);
    if n.is_nan() || n <= 0.0 {
        return Err(Error::invalid(
            "The requested percent is required to be greater than 0",
        ));
    }
    let list = args.take_series(0);
    let Some(first) = list.first() else {
        return Ok(Value::Series(Vec::new()));
    };
    let name = format!(
        "percentileOfSeries({},{})",
        first.path_expression,
        format_g(n)
    );
    let Some(normalized) = normalize(vec![list]) else {
        return Ok(Value::Series(Vec::new()));
    };
    let values = rows(&normalized.series)
        .iter()
        .map(|row| percentile(row, n, interpolate))
        .collect::<Result<Vec<_>>>()?;
    one_series(cx, &name, &normalized, values)
}

/// The answer of a function making one series: `values`, named `name`, over the span of
/// the series it was made of.
fn one_series(
    cx: &Context<'_>,
    name: &str,
    normalized: &Normalized,
    values: Vec<Option<f64>>,
) -> Result<Value> {
    let series = made(name, normalized.span(), values, cx.x_files_factor());
    Ok(Value::Series(vec![series]))
}

/// `_getPercentile(points, n, interpolate)`: the NIST nearest-rank percentile of the
/// non-null values (or the interpolation between the two ranks around it). The ranks index
/// the sorted values as Python does (a negative percentile counts from the end); a rank
/// outside them, where graphite-web fails with an `IndexError`, is a 400.
pub(crate) fn percentile(row: &[Option<f64>], n: f64, interpolate: bool) -> Result<Option<f64>> {
    py_percentile(row, n, interpolate).map_err(|_| {
        Error::invalid(format!(
            "percentile {} lies past the {} values of a point",
            format_g(n),
            row.iter().flatten().count()
        ))
    })
}

/// Where `_getPercentile` fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PercentileFault {
    /// A rank outside the values (Python's `IndexError`).
    Index,
    /// A rank that is not a number (`int()` of an infinity or a NaN).
    NotFinite,
}

/// `_getPercentile` exactly: the rank truncated toward zero, then indexed as Python indexes
/// (a negative rank counts from the end), `None` for no non-null values.
pub(crate) fn py_percentile(
    row: &[Option<f64>],
    n: f64,
    interpolate: bool,
) -> std::result::Result<Option<f64>, PercentileFault> {
    let mut sorted: Vec<f64> = row.iter().flatten().copied().collect();
    if sorted.is_empty() {
        return Ok(None);
    }
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let len = sorted.len() as i64;
    let fractional = (n / 100.0) * (len as f64 + 1.0);
    if !fractional.is_finite() {
        return Err(PercentileFault::NotFinite);
    }
    let whole = fractional.trunc();
    // Every rank this far out indexes past the values.
    if whole.abs() > len as f64 + 2.0 {
        return Err(PercentileFault::Index);
    }
    let fraction = fractional - whole;
    let mut rank = whole as i64;
    if !interpolate && fraction > 0.0 {
        rank += 1;
    }
    let at = |i: i64| {
        let i = if i < 0 { i + len } else { i };
        usize::try_from(i)
            .ok()
            .and_then(|i| sorted.get(i))
            .copied()
            .ok_or(PercentileFault::Index)
    };
    let mut value = if rank == 0 {
        sorted[0]
    } else if rank - 1 == len {
        sorted[sorted.len() - 1]
    } else {
        at(rank - 1)?
    };
    if interpolate && rank != len {
        value += fraction * (at(rank)? - value);
    }
    Ok(Some(value))
}

fn pow_series(cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let lists = args.take_all_series(0);
    let Some(normalized) = normalize(lists) else {
        return Ok(Value::Series(Vec::new()));
    };
    let names: Vec<&str> = normalized.series.iter().map(|s| s.name.as_str()).collect();
    let name = format!("powSeries({})", names.join(","));
    let values = rows(&normalized.series)
        .iter()
        .map(|row| {
            let (first, rest) = row.split_first()?;
            rest.iter().fold(*first, |acc, v| safe_pow(acc, *v))
        })
        .collect();
    one_series(cx, &name, &normalized, values)
}

/// `safePow(a, b)`: `math.pow`, null for a null operand and where Python raises (a result
/// that is not a number, or infinite, from finite operands that are not).
pub(crate) fn safe_pow(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    let (a, b) = (a?, b?);
    let result = a.powf(b);
    if result.is_nan() && !a.is_nan() && !b.is_nan() {
        return None;
    }
    if result.is_infinite() && a.is_finite() && b.is_finite() {
        return None;
    }
    Some(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(values: &[f64], n: f64, interpolate: bool) -> Result<Option<f64>> {
        let row: Vec<Option<f64>> = values.iter().map(|v| Some(*v)).collect();
        percentile(&row, n, interpolate)
    }

    #[test]
    fn percentiles_follow_the_nearest_rank_method() {
        // Values checked against graphite-web's _getPercentile.
        let v = [15.0, 20.0, 35.0, 40.0, 50.0];
        assert_eq!(p(&v, 50.0, false), Ok(Some(35.0)));
        assert_eq!(p(&v, 40.0, false), Ok(Some(35.0)));
        assert_eq!(p(&v, 40.0, true), Ok(Some(26.000000000000007)));
        assert_eq!(p(&v, 10.0, true), Ok(Some(15.0)));
        assert_eq!(p(&v, 1.0, false), Ok(Some(15.0)));
        assert_eq!(p(&v, 100.0, false), Ok(Some(50.0)));
        assert_eq!(p(&v, 99.0, true), Ok(Some(50.0)));
        assert_eq!(p(&[], 50.0, false), Ok(None));
        assert_eq!(percentile(&[None, None], 50.0, false), Ok(None));
        // Where graphite-web indexes past the values.
        assert!(p(&v, 100.0, true).is_err());
        assert!(p(&v, 200.0, false).is_err());
        assert!(p(&v, f64::INFINITY, false).is_err());
        assert!(p(&v, 1e300, true).is_err());
        // A negative percentile's rank counts from the end, as Python's indexing does.
        assert_eq!(p(&v, -40.0, false), Ok(Some(35.0)));
        assert_eq!(p(&v, -40.0, true), Ok(Some(33.0)));
        assert_eq!(p(&v, -10.0, false), Ok(Some(15.0)));
        assert_eq!(p(&v, -20.0, false), Ok(Some(40.0)));
        assert_eq!(p(&v, -20.0, true), Ok(Some(38.0)));
        assert_eq!(p(&v, -83.0, false), Ok(Some(15.0)));
        assert!(p(&v, -84.0, false).is_err());
        assert!(p(&v, -100.0, false).is_err());
    }

    #[test]
    fn powers_are_null_where_python_raises() {
        assert_eq!(safe_pow(Some(2.0), Some(3.0)), Some(8.0));
        assert_eq!(safe_pow(Some(-8.0), Some(0.5)), None);
        assert_eq!(safe_pow(Some(0.0), Some(-1.0)), None);
        assert_eq!(safe_pow(Some(10.0), Some(400.0)), None);
        assert_eq!(safe_pow(None, Some(1.0)), None);
        assert_eq!(
            safe_pow(Some(f64::INFINITY), Some(2.0)),
            Some(f64::INFINITY)
        );
        assert_eq!(safe_pow(Some(5.0), Some(0.0)), Some(1.0));
    }
}
