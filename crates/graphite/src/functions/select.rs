//! Selection functions: which series of a list are kept, and in what order, by a statistic
//! of each (`filterSeries` and the `*Above` / `*Below` filters on it, `highest`, `lowest`,
//! `mostDeviant`, `removeEmptySeries`, `averageOutsidePercentile`,
//! `removeBetweenPercentile`, `sortBy`, `sortByTotal`, `sortByMinima`), lists joined or
//! deduplicated (`group`, `unique`, `fallbackSeries`), the values of each series cut at a
//! percentile of its own (`removeAbovePercentile`, `removeBelowPercentile`), and the two
//! combinations over paired lists (`divideSeriesLists`, `weightedAverage`).
//!
//! Statistics are graphite-web's aggregation functions over the points (a null result
//! sorting as minus infinity, comparing as Python's operators lambdas do); sorts are
//! stable, reversed ones included. Where graphite-web fails with a 500 (a null compared
//! with a number, a percentile rank past the values, an assertion), the answer is a 400
//! naming the problem. Filters that only keep or drop series never change them.

use std::sync::Arc;

use super::agg::{AggFunc, Span, made, safe_div, zip_longest};
use super::alias::agg_key;
use super::combine::{PercentileFault, aggregate, py_percentile, quotient};
use super::filter::{first_ranked, integer, number, py_prefix, sort_by_aggregate, sorted};
use super::{Args, Builtin, Context, Function, Param, ParamType, Signature, Value, series_list};
use crate::pyfmt::{format_g, py_sum, repr_f64};
use crate::{Error, Result, Series};

/// `filterSeries`'s operators.
const OPERATORS: &[&str] = &["!=", "<", "<=", "=", ">", ">="];

/// The filters graphite-web defines through `filterSeries`: name, aggregation function,
/// operator, what it keeps.
const FILTERS: &[(&str, &str, &str, &str)] = &[
    (
        "averageAbove",
        "average",
        ">",
        "Keeps the series whose mean value is above n.",
    ),
    (
        "averageBelow",
        "average",
        "<=",
        "Keeps the series whose mean value is n or below (series of nulls only included).",
    ),
    (
        "currentAbove",
        "last",
        ">",
        "Keeps the series whose last non-null value is above n.",
    ),
    (
        "currentBelow",
        "last",
        "<=",
        "Keeps the series whose last non-null value is n or below (series of nulls only \
         included).",
    ),
    (
        "maximumAbove",
        "max",
        ">",
        "Keeps the series whose largest value is above n.",
    ),
    (
        "maximumBelow",
        "max",
        "<=",
        "Keeps the series whose largest value is n or below (series of nulls only \
         included).",
    ),
    (
        "minimumAbove",
        "min",
        ">",
        "Keeps the series whose smallest value is above n.",
    ),
    (
        "minimumBelow",
        "min",
        "<=",
        "Keeps the series whose smallest value is n or below (series of nulls only \
         included).",
    ),
];

pub(crate) fn functions() -> Vec<Arc<dyn Function>> {
    let float_n = || Param::new("n", ParamType::Float).required();
    let integer_n = || Param::new("n", ParamType::Integer).required();
    let agg_func = || Param::new("func", ParamType::AggFunc).default(Value::Str("average".into()));
    let series_lists = || Param::new("seriesLists", ParamType::SeriesList).multiple();
    let sig = |name: &str, args: &str, group: &str, description: &str, params: Vec<Param>| {
        Signature::with_args(name, args, group, description).params(params)
    };
    let mut out: Vec<Arc<dyn Function>> = vec![
        Builtin::arc(
            sig(
                "removeEmptySeries",
                "seriesList, xFilesFactor=None",
                "Filter Series",
                "Drops the series without enough non-null values: none at all by default, \
                 or fewer than the share xFilesFactor of their points.",
                vec![series_list(), Param::new("xFilesFactor", ParamType::Float)],
            ),
            remove_empty_series,
        ),
        Builtin::arc(
            sig(
                "filterSeries",
                "seriesList, func, operator, threshold",
                "Filter Series",
                "Keeps the series whose aggregate (func over all their points) compares with \
                 the threshold as the operator says; a null aggregate passes !=, < and <= \
                 only.",
                vec![
                    series_list(),
                    Param::new("func", ParamType::AggFunc).required(),
                    Param::new("operator", ParamType::String)
                        .required()
                        .options(OPERATORS),
                    Param::new("threshold", ParamType::Float).required(),
                ],
            ),
            filter_series,
        ),
    ];
    for &(name, func, operator, description) in FILTERS {
        out.push(Builtin::arc(
            sig(
                name,
                "seriesList, n",
                "Filter Series",
                description,
                vec![series_list(), float_n()],
            ),
            move |_: &Context<'_>, args: Args| threshold_filter(args, func, operator),
        ));
    }
    // `removeAbovePercentile` and `removeBelowPercentile`.
    let percentile_filter = |above: bool| {
        let side = if above { "above" } else { "below" };
        let name = if above {
            "removeAbovePercentile"
        } else {
            "removeBelowPercentile"
        };
        Builtin::arc(
            sig(
                name,
                "seriesList, n",
                "Filter Data",
                &format!(
                    "Replaces with null each value {side} the nth percentile of its own \
                     series' values."
                ),
                vec![series_list(), float_n()],
            ),
            move |_: &Context<'_>, args: Args| remove_percentile(args, name, above),
        )
    };
    // `highest` and `lowest`: the n series whose aggregate ranks first either way.
    let extreme = |highest: bool| {
        let name = if highest { "highest" } else { "lowest" };
        Builtin::arc(
            sig(
                name,
                "seriesList, n=1, func='average'",
                "Filter Series",
                &format!(
                    "Keeps the n series whose aggregate (func over all their points) is \
                     {name}, {name} first (null aggregates count as lowest of all)."
                ),
                vec![series_list(), integer_n(), agg_func()],
            ),
            move |_: &Context<'_>, args: Args| extreme_of(args, name, highest),
        )
    };
    out.extend([
        extreme(true),
        extreme(false),
        Builtin::arc(
            sig(
                "mostDeviant",
                "seriesList, n",
                "Filter Series",
                "Keeps the n series whose values spread most around their mean (population \
                 standard deviation), most first; series of nulls only are dropped.",
                vec![series_list(), integer_n()],
            ),
            most_deviant,
        ),
        Builtin::arc(
            sig(
                "averageOutsidePercentile",
                "seriesList, n",
                "Filter Series",
                "Drops the series whose mean lies strictly between the (100-n)th and nth \
                 percentiles of all the series' means.",
                vec![series_list(), float_n()],
            ),
            average_outside_percentile,
        ),
        Builtin::arc(
            sig(
                "removeBetweenPercentile",
                "seriesList, n",
                "Filter Series",
                "Keeps the series with at least one value outside the band between the \
                 (100-n)th and nth percentiles of all the series' values at that point.",
                vec![series_list(), float_n()],
            ),
            remove_between_percentile,
        ),
        Builtin::arc(
            sig(
                "unique",
                "*seriesLists",
                "Filter Series",
                "Joins the lists, keeping only the first series of each name.",
                vec![series_lists().required()],
            ),
            unique,
        ),
        Builtin::arc(
            sig(
                "group",
                "*seriesLists",
                "Combine",
                "Joins the lists into one, in order (to pass several lists where one is \
                 taken).",
                vec![series_lists()],
            ),
            group,
        ),
        Builtin::arc(
            sig(
                "fallbackSeries",
                "seriesList, fallback",
                "Special",
                "The series list if it holds any series, else the fallback list.",
                vec![
                    series_list(),
                    Param::new("fallback", ParamType::SeriesList).required(),
                ],
            ),
            fallback_series,
        ),
        Builtin::arc(
            sig(
                "sortBy",
                "seriesList, func='average', reverse=False",
                "Sorting",
                "Orders the series by an aggregate of their points (func), lowest first or, \
                 with reverse, highest first; null aggregates count as lowest of all.",
                vec![
                    series_list(),
                    agg_func(),
                    Param::new("reverse", ParamType::Boolean).default(Value::Bool(false)),
                ],
            ),
            sort_by,
        ),
        Builtin::arc(
            sig(
                "sortByTotal",
                "seriesList",
                "Sorting",
                "Orders the series by the sum of their values, highest first.",
                vec![series_list()],
            ),
            sort_by_total,
        ),
        Builtin::arc(
            sig(
                "sortByMinima",
                "seriesList",
                "Sorting",
                "Keeps the series whose largest value is above zero and orders them by \
                 their smallest value, lowest first.",
                vec![series_list()],
            ),
            sort_by_minima,
        ),
        percentile_filter(true),
        percentile_filter(false),
        Builtin::arc(
            sig(
                "divideSeriesLists",
                "dividendSeriesList, divisorSeriesList",
                "Combine",
                "Divides the first list's series by the second list's pairwise by position \
                 (null where either is null or the divisor is zero); the lists must be as \
                 long as each other.",
                vec![
                    Param::new("dividendSeriesList", ParamType::SeriesList).required(),
                    Param::new("divisorSeriesList", ParamType::SeriesList).required(),
                ],
            ),
            divide_series_lists,
        ),
        Builtin::arc(
            sig(
                "weightedAverage",
                "seriesListAvg, seriesListWeight, *nodes",
                "Combine",
                "The average of the first list's series weighted by the second list's, the \
                 two matched by the given nodes or tags: the sum of the products divided by \
                 the sum of the weights at each point.",
                vec![
                    Param::new("seriesListAvg", ParamType::SeriesList).required(),
                    Param::new("seriesListWeight", ParamType::SeriesList).required(),
                    Param::new("nodes", ParamType::NodeOrTag).multiple(),
                ],
            ),
            weighted_average,
        ),
    ]);
    out
}

/// An aggregation function parameter, by name or alias (`getAggFunc`).
fn agg_func(args: &Args, i: usize) -> Result<AggFunc> {
    let name = args
        .get(i)
        .map_or_else(|| "average".to_owned(), Value::to_py_str);
    AggFunc::parse(&name)
        .ok_or_else(|| Error::invalid(format!("Unsupported aggregation function: {name}")))
}

/// The aggregate of a series' points, as `filterSeries` and the sorts compute it.
fn aggregate_of(series: &Series, func: AggFunc) -> Option<f64> {
    func.apply(&series.points())
}

fn remove_empty_series(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let xff = match args.get(1) {
        None => 0.0,
        Some(_) => number(&args, 1, "removeEmptySeries", "xFilesFactor")?,
    };
    let mut list = args.take_series(0);
    // `xffValues`: the non-null points against the length of the series.
    list.retain(|s| {
        let non_null = s.points().iter().flatten().count();
        let total = s.values.len();
        non_null > 0 && total > 0 && non_null as f64 / total as f64 >= xff
    });
    Ok(Value::Series(list))
}

/// `operatorFuncs[operator](value, threshold)`: a null passes `!=`, `<` and `<=` only.
fn passes(operator: &str, value: Option<f64>, threshold: f64) -> bool {
    match (operator, value) {
        ("=", Some(v)) => v == threshold,
        ("!=", Some(v)) => v != threshold,
        (">", Some(v)) => v > threshold,
        (">=", Some(v)) => v >= threshold,
        ("<", Some(v)) => v < threshold,
        ("<=", Some(v)) => v <= threshold,
        (_, None) => matches!(operator, "!=" | "<" | "<="),
        _ => false,
    }
}

/// `filterSeries(seriesList, func, operator, threshold)`.
fn filter(mut args: Args, func: AggFunc, operator: &str, threshold: f64) -> Result<Value> {
    if !OPERATORS.contains(&operator) {
        return Err(Error::invalid(format!("Unsupported operator: {operator}")));
    }
    let mut list = args.take_series(0);
    list.retain(|s| passes(operator, aggregate_of(s, func), threshold));
    Ok(Value::Series(list))
}

fn filter_series(_cx: &Context<'_>, args: Args) -> Result<Value> {
    let func = agg_func(&args, 1)?;
    let operator = args.get(2).map(Value::to_py_str).unwrap_or_default();
    let threshold = number(&args, 3, "filterSeries", "threshold")?;
    filter(args, func, &operator, threshold)
}

/// A filter graphite-web defines through `filterSeries` with a fixed function and operator.
fn threshold_filter(args: Args, func: &str, operator: &str) -> Result<Value> {
    let func = AggFunc::parse(func).unwrap_or(AggFunc::Average);
    let threshold = number(&args, 1, "filterSeries", "n")?;
    filter(args, func, operator, threshold)
}

/// `highest` / `lowest` (`name`): sorted by the aggregate (stable), the first n kept.
fn extreme_of(args: Args, name: &str, highest: bool) -> Result<Value> {
    let n = integer(&args, 1, name)?;
    let func = agg_func(&args, 2)?;
    Ok(first_ranked(args, n, func, highest))
}

fn sort_by(_cx: &Context<'_>, args: Args) -> Result<Value> {
    let func = agg_func(&args, 1)?;
    let reverse = args.bool(2).unwrap_or(false);
    sorted(args, func, reverse)
}

fn sort_by_total(_cx: &Context<'_>, args: Args) -> Result<Value> {
    sorted(args, AggFunc::Sum, true)
}

fn sort_by_minima(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let mut list = args.take_series(0);
    // `safeMax(series, default=0) > 0`.
    list.retain(|s| aggregate_of(s, AggFunc::Max).unwrap_or(0.0) > 0.0);
    sort_by_aggregate(&mut list, AggFunc::Min, false);
    Ok(Value::Series(list))
}

fn most_deviant(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let n = integer(&args, 1, "mostDeviant")?;
    let mut deviants: Vec<(f64, Series)> = Vec::new();
    for series in args.take_series(0) {
        let values: Vec<f64> = series.points().into_iter().flatten().collect();
        if values.is_empty() {
            continue;
        }
        let mean = py_sum(&values) / values.len() as f64;
        let squares: Vec<f64> = values.iter().map(|v| (v - mean) * (v - mean)).collect();
        deviants.push((py_sum(&squares) / values.len() as f64, series));
    }
    // Stable: equal deviations keep their order.
    deviants.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal));
    let keep = py_prefix(deviants.len(), n);
    Ok(Value::Series(
        deviants.into_iter().take(keep).map(|(_, s)| s).collect(),
    ))
}

/// A percentile where graphite-web would fail computing it: a 400 naming it.
fn percentile_fault(func: &str, n: f64, fault: PercentileFault) -> Error {
    match fault {
        PercentileFault::Index => Error::invalid(format!(
            "{func}: the percentile {} lies past the values",
            format_g(n)
        )),
        PercentileFault::NotFinite => Error::invalid(format!(
            "{func}: the percentile {} has no rank",
            format_g(n)
        )),
    }
}

/// `a < b` as Python 3 compares a value that may be `None` with one that is not: a
/// `TypeError` (here a 400) when either is null.
fn less(a: Option<f64>, b: Option<f64>, func: &str) -> Result<bool> {
    match (a, b) {
        (Some(a), Some(b)) => Ok(a < b),
        _ => Err(Error::invalid(format!(
            "{func} cannot compare a null with a number"
        ))),
    }
}

/// `n` brought to the upper side of 50 (`if n < 50: n = 100 - n`).
fn upper_half(n: f64) -> f64 {
    if n < 50.0 { 100.0 - n } else { n }
}

fn average_outside_percentile(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    const FUNC: &str = "averageOutsidePercentile";
    let n = upper_half(number(&args, 1, FUNC, "n")?);
    let list = args.take_series(0);
    let averages: Vec<Option<f64>> = list
        .iter()
        .map(|s| aggregate_of(s, AggFunc::Average))
        .collect();
    let low = py_percentile(&averages, 100.0 - n, false)
        .map_err(|f| percentile_fault(FUNC, 100.0 - n, f))?;
    let high = py_percentile(&averages, n, false).map_err(|f| percentile_fault(FUNC, n, f))?;
    let mut out = Vec::with_capacity(list.len());
    for (series, average) in list.into_iter().zip(averages) {
        // `not low < average < high`, Python's chained comparison.
        let inside = less(low, average, FUNC)? && less(average, high, FUNC)?;
        if !inside {
            out.push(series);
        }
    }
    Ok(Value::Series(out))
}

fn remove_between_percentile(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    const FUNC: &str = "removeBetweenPercentile";
    let n = upper_half(number(&args, 1, FUNC, "n")?);
    let list = args.take_series(0);
    let points: Vec<Vec<Option<f64>>> = list.iter().map(Series::points).collect();
    // `zip(*seriesList)`: the columns, as many as the shortest series has points.
    let columns = points.iter().map(Vec::len).min().unwrap_or(0);
    let mut lows = Vec::with_capacity(columns);
    let mut highs = Vec::with_capacity(columns);
    for i in 0..columns {
        let column: Vec<Option<f64>> = points.iter().map(|p| p[i]).collect();
        lows.push(
            py_percentile(&column, 100.0 - n, false)
                .map_err(|f| percentile_fault(FUNC, 100.0 - n, f))?,
        );
        highs.push(py_percentile(&column, n, false).map_err(|f| percentile_fault(FUNC, n, f))?);
    }
    let mut out = Vec::with_capacity(list.len());
    for (series, values) in list.into_iter().zip(&points) {
        // Every point is compared (a longer series indexes past the columns), and the
        // series is kept when one lies outside its column's band.
        let mut outside = false;
        for (i, value) in values.iter().enumerate() {
            let (Some(low), Some(high)) = (lows.get(i), highs.get(i)) else {
                return Err(Error::invalid(format!(
                    "{FUNC}: the series are not all as long as each other"
                )));
            };
            let inside = less(*low, *value, FUNC)? && less(*value, *high, FUNC)?;
            outside |= !inside;
        }
        if outside {
            out.push(series);
        }
    }
    Ok(Value::Series(out))
}

/// `removeAbovePercentile` / `removeBelowPercentile` (`func`).
fn remove_percentile(mut args: Args, func: &str, above: bool) -> Result<Value> {
    let n = number(&args, 1, func, "n")?;
    let mut list = args.take_series(0);
    for series in &mut list {
        series.name = format!("{func}({}, {})", series.name, format_g(n));
        series.path_expression = series.name.clone();
        let Some(percentile) = own_percentile(series, n, func)? else {
            continue;
        };
        for (i, value) in series.points().into_iter().enumerate() {
            let remove = match value {
                Some(v) if above => v > percentile,
                Some(v) => v < percentile,
                None => !above,
            };
            if remove && let Some(slot) = series.values.get_mut(i) {
                *slot = None;
            }
        }
    }
    Ok(Value::Series(list))
}

/// `nPercentile(requestContext, [series], n)[0][0]` as the `remove*Percentile` functions
/// read it: `None` where graphite-web skips the series (no non-null values, a rank past
/// them, no points in its time range). On the way it tags the series `nPercentile` (its
/// copy shares the tags) once the percentile is found.
fn own_percentile(series: &mut Series, n: f64, func: &str) -> Result<Option<f64>> {
    if n == 0.0 {
        return Err(Error::invalid(format!(
            "{func}: the requested percent is required to be greater than 0"
        )));
    }
    let points = series.points();
    let percentile = match py_percentile(&points, n, false) {
        Ok(Some(p)) => p,
        Ok(None) | Err(PercentileFault::Index) => return Ok(None),
        Err(fault) => return Err(percentile_fault(func, n, fault)),
    };
    series.tag("nPercentile", repr_f64(n));
    // `int((end - start) / step)` copies of it, and the first of them read.
    let count = if series.step == 0 {
        0.0
    } else {
        ((series.end - series.start) as f64 / series.step as f64).trunc()
    };
    Ok((count >= 1.0).then_some(percentile))
}

fn unique(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for series in args.take_all_series(0).into_iter().flatten() {
        if seen.insert(series.name.clone()) {
            out.push(series);
        }
    }
    Ok(Value::Series(out))
}

fn group(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    Ok(Value::Series(
        args.take_all_series(0).into_iter().flatten().collect(),
    ))
}

fn fallback_series(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let list = args.take_series(0);
    Ok(Value::Series(if list.is_empty() {
        args.take_series(1)
    } else {
        list
    }))
}

fn divide_series_lists(cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let mut dividends = args.take_series(0);
    let mut divisors = args.take_series(1);
    if dividends.len() != divisors.len() {
        return Err(Error::invalid(
            "dividendSeriesList and divisorSeriesList argument must have equal length",
        ));
    }
    let out = dividends
        .iter_mut()
        .zip(&mut divisors)
        .map(|(dividend, divisor)| quotient(dividend, divisor, cx.x_files_factor()))
        .collect();
    Ok(Value::Series(out))
}

fn weighted_average(cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let nodes: Vec<Value> = args.all(2).to_vec();
    let averages = args.take_series(0);
    let weights = args.take_series(1);
    if averages.len() != weights.len() {
        return Err(Error::invalid(format!(
            "weightedAverage must receive the same number of series for seriesListAvg and \
             seriesListWeight but received respectively {} and {}",
            averages.len(),
            weights.len()
        )));
    }
    // Keys in first-appearance order, each with the last average and weight series of it.
    let mut keyed: Vec<(String, Option<usize>, Option<usize>)> = Vec::new();
    for (i, (average, weight)) in averages.iter().zip(&weights).enumerate() {
        let at = key_slot(&mut keyed, agg_key(average, &nodes, None));
        keyed[at].1 = Some(i);
        let at = key_slot(&mut keyed, agg_key(weight, &nodes, None));
        keyed[at].2 = Some(i);
    }
    let products: Vec<Series> = keyed
        .iter()
        .filter_map(|(_, a, w)| Some((&averages[(*a)?], &weights[(*w)?])))
        .map(|(average, weight)| {
            let values = zip_longest(&average.points(), &weight.points())
                .map(|(a, w)| Some(a? * w?))
                .collect();
            let span = Span {
                start: average.start,
                end: average.end,
                step: average.step,
            };
            let name = format!("product({},{})", weight.name, average.name);
            made(&name, span, values, cx.x_files_factor())
        })
        .collect();
    if products.is_empty() {
        return Ok(Value::Series(Vec::new()));
    }
    let path_expressions = |list: &[Series]| {
        let mut names: Vec<&str> = list.iter().map(|s| s.path_expression.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names.join(",")
    };
    let name = format!(
        "weightedAverage({}, {}, {})",
        path_expressions(&averages),
        path_expressions(&weights),
        nodes
            .iter()
            .map(Value::to_py_str)
            .collect::<Vec<_>>()
            .join(",")
    );
    let (Some(sum_products), Some(sum_weights)) = (
        aggregate(cx, vec![products], "sum", None)?.pop(),
        aggregate(cx, vec![weights], "sum", None)?.pop(),
    ) else {
        return Ok(Value::Series(Vec::new()));
    };
    let values = zip_longest(&sum_products.points(), &sum_weights.points())
        .map(|(p, w)| safe_div(p, w))
        .collect();
    let span = Span {
        start: sum_products.start,
        end: sum_products.end,
        step: sum_products.step,
    };
    Ok(Value::Series(vec![made(
        &name,
        span,
        values,
        cx.x_files_factor(),
    )]))
}

/// The index of `key` in `keyed`, added at the end when new.
fn key_slot(keyed: &mut Vec<(String, Option<usize>, Option<usize>)>, key: String) -> usize {
    match keyed.iter().position(|(k, _, _)| *k == key) {
        Some(i) => i,
        None => {
            keyed.push((key, None, None));
            keyed.len() - 1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operators_treat_null_as_python_lambdas_do() {
        for (op, null_passes) in [
            ("=", false),
            ("!=", true),
            (">", false),
            (">=", false),
            ("<", true),
            ("<=", true),
        ] {
            assert_eq!(passes(op, None, 1.0), null_passes, "{op} with None");
        }
        assert!(passes("=", Some(2.0), 2.0));
        assert!(!passes("!=", Some(2.0), 2.0));
        assert!(passes(">=", Some(2.0), 2.0));
        assert!(!passes(">", Some(2.0), 2.0));
        assert!(passes("<=", Some(2.0), 2.0));
        assert!(!passes("<", Some(2.0), 2.0));
    }

    #[test]
    fn percentiles_index_as_python_does() {
        let row: Vec<Option<f64>> = [3.0, 1.0, 2.0, 5.0, 4.0].map(Some).to_vec();
        // Checked against graphite-web's _getPercentile.
        assert_eq!(py_percentile(&row, 50.0, false), Ok(Some(3.0)));
        assert_eq!(py_percentile(&row, -10.0, false), Ok(Some(1.0)));
        assert_eq!(py_percentile(&row, -20.0, false), Ok(Some(4.0)));
        assert_eq!(
            py_percentile(&row, 150.0, false),
            Err(PercentileFault::Index)
        );
        assert_eq!(
            py_percentile(&row, -300.0, false),
            Err(PercentileFault::Index)
        );
        assert_eq!(
            py_percentile(&row, f64::INFINITY, false),
            Err(PercentileFault::NotFinite)
        );
        assert_eq!(py_percentile(&[None], 50.0, false), Ok(None));
    }
}
