//! Filter and sorting functions: which series of a list are kept and in what order
//! (`highest*`, `lowest*`, `limit`, `exclude`, `grep`, `sortByMaxima`, `sortByName`), and
//! which values of a series are kept (`removeBelowValue`, `removeAboveValue`).
//!
//! Orders are graphite-web's: Python's stable sort (a reversed sort keeps equal series in
//! their first order), series whose aggregate is null counted as minus infinity, slices
//! with Python's meaning of a negative count. Patterns are Python regular expressions
//! searched anywhere in the name (see `pyre`). Nothing here fetches or renames beyond what
//! graphite-web renames.

use std::cmp::Ordering;
use std::sync::Arc;

use super::agg::AggFunc;
use super::{
    Args, Builtin, Context, Function, Param, ParamType, Signature, SyncBody, Value, series_list,
};
use crate::pyfmt::format_g;
use crate::pyre;
use crate::{Result, Series};

pub(crate) fn functions() -> Vec<Arc<dyn Function>> {
    let list_and_n = |kind: ParamType| vec![series_list(), Param::new("n", kind).required()];
    let list_only = || vec![series_list()];
    let list_and_pattern = || {
        vec![
            series_list(),
            Param::new("pattern", ParamType::String).required(),
        ]
    };
    let filter = |name: &str, description: &str, body: SyncBody| {
        Builtin::arc(
            Signature::with_args(name, "seriesList, n", "Filter Series", description)
                .params(list_and_n(ParamType::Integer)),
            body,
        )
    };
    vec![
        filter(
            "highestCurrent",
            "Keeps the n series whose last non-null value is highest, highest first.",
            highest_current,
        ),
        filter(
            "highestMax",
            "Keeps the n series whose largest value is highest, highest first.",
            highest_max,
        ),
        filter(
            "highestAverage",
            "Keeps the n series whose mean value is highest, highest first.",
            highest_average,
        ),
        filter(
            "lowestCurrent",
            "Keeps the n series whose last non-null value is lowest, lowest first (series \
             of nulls only count as lowest of all).",
            lowest_current,
        ),
        filter(
            "lowestAverage",
            "Keeps the n series whose mean value is lowest, lowest first (series of nulls \
             only count as lowest of all).",
            lowest_average,
        ),
        filter(
            "limit",
            "Keeps the first n series of the list (a negative n drops that many from the \
             end).",
            limit,
        ),
        Builtin::arc(
            Signature::new(
                "exclude",
                "exclude(seriesList, pattern)",
                "Filter Series",
                "Drops the series whose name the regular expression matches anywhere.",
            )
            .params(list_and_pattern()),
            exclude,
        ),
        Builtin::arc(
            Signature::new(
                "grep",
                "grep(seriesList, pattern)",
                "Filter Series",
                "Keeps only the series whose name the regular expression matches anywhere.",
            )
            .params(list_and_pattern()),
            grep,
        ),
        Builtin::arc(
            Signature::new(
                "removeBelowValue",
                "removeBelowValue(seriesList, n)",
                "Filter Data",
                "Replaces every value below n with null.",
            )
            .params(list_and_n(ParamType::Float)),
            remove_below_value,
        ),
        Builtin::arc(
            Signature::new(
                "removeAboveValue",
                "removeAboveValue(seriesList, n)",
                "Filter Data",
                "Replaces every value above n with null.",
            )
            .params(list_and_n(ParamType::Float)),
            remove_above_value,
        ),
        Builtin::arc(
            Signature::new(
                "sortByMaxima",
                "sortByMaxima(seriesList)",
                "Sorting",
                "Orders the series by their largest value, highest first.",
            )
            .params(list_only()),
            sort_by_maxima,
        ),
        Builtin::arc(
            Signature::new(
                "sortByName",
                "sortByName(seriesList, natural=False, reverse=False)",
                "Sorting",
                "Orders the series by name, alphabetically or, with natural, with runs of \
                 digits compared as numbers (host2 before host10); reverse turns the order \
                 around.",
            )
            .params(vec![
                series_list(),
                Param::new("natural", ParamType::Boolean).default(Value::Bool(false)),
                Param::new("reverse", ParamType::Boolean).default(Value::Bool(false)),
            ]),
            sort_by_name,
        ),
    ]
}

/// Parameter `i`, an integer (validation guarantees it; a missing one names itself).
pub(crate) fn integer(args: &Args, i: usize, func: &str) -> Result<i64> {
    args.integer(i, func, "an integer n").map(|(n, _)| n)
}

/// Parameter `i` (named `param`), a number (validation guarantees it; a missing one names
/// itself).
pub(crate) fn number(args: &Args, i: usize, func: &str, param: &str) -> Result<f64> {
    args.number(i, func, &format!("a number {param}"))
        .map(|(x, _)| x)
}

/// How many items `list[:n]` keeps of `len`.
pub(crate) fn py_prefix(len: usize, n: i64) -> usize {
    if n >= 0 {
        usize::try_from(n).map_or(len, |n| n.min(len))
    } else {
        let drop = usize::try_from(n.unsigned_abs()).unwrap_or(usize::MAX);
        len.saturating_sub(drop)
    }
}

/// `keyFunc(func)`: the aggregate of a series' points, null as minus infinity.
fn sort_key(series: &Series, func: AggFunc) -> f64 {
    func.apply(&series.points()).unwrap_or(f64::NEG_INFINITY)
}

/// `list.sort(key=keyFunc(func), reverse=...)`: stable, equal keys keep their order either
/// way.
pub(crate) fn sort_by_aggregate(list: &mut Vec<Series>, func: AggFunc, descending: bool) {
    let mut keyed: Vec<(f64, Series)> = list.drain(..).map(|s| (sort_key(&s, func), s)).collect();
    keyed.sort_by(|a, b| {
        let order = a.0.partial_cmp(&b.0).unwrap_or(Ordering::Equal);
        if descending { order.reverse() } else { order }
    });
    list.extend(keyed.into_iter().map(|(_, s)| s));
}

/// Parameter 0's series sorted by their aggregate `func`, highest first when `descending`.
pub(crate) fn sorted(mut args: Args, func: AggFunc, descending: bool) -> Result<Value> {
    let mut list = args.take_series(0);
    sort_by_aggregate(&mut list, func, descending);
    Ok(Value::Series(list))
}

/// `highestCurrent`, `lowestAverage`, ... (`name`): sorted by the aggregate, the first n
/// kept.
fn select(args: Args, func: AggFunc, highest: bool, name: &str) -> Result<Value> {
    let n = integer(&args, 1, name)?;
    Ok(first_ranked(args, n, func, highest))
}

/// Parameter 0's series sorted by their aggregate `func` (stable, highest first when
/// `highest`), the first `n` kept as `list[:n]` keeps them.
pub(crate) fn first_ranked(mut args: Args, n: i64, func: AggFunc, highest: bool) -> Value {
    let mut list = args.take_series(0);
    sort_by_aggregate(&mut list, func, highest);
    list.truncate(py_prefix(list.len(), n));
    Value::Series(list)
}

fn highest_current(_cx: &Context<'_>, args: Args) -> Result<Value> {
    select(args, AggFunc::Last, true, "highestCurrent")
}

fn highest_max(_cx: &Context<'_>, args: Args) -> Result<Value> {
    select(args, AggFunc::Max, true, "highestMax")
}

fn highest_average(_cx: &Context<'_>, args: Args) -> Result<Value> {
    select(args, AggFunc::Average, true, "highestAverage")
}

fn lowest_current(_cx: &Context<'_>, args: Args) -> Result<Value> {
    select(args, AggFunc::Last, false, "lowestCurrent")
}

fn lowest_average(_cx: &Context<'_>, args: Args) -> Result<Value> {
    select(args, AggFunc::Average, false, "lowestAverage")
}

fn limit(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let n = integer(&args, 1, "limit")?;
    let mut list = args.take_series(0);
    list.truncate(py_prefix(list.len(), n));
    Ok(Value::Series(list))
}

fn sort_by_maxima(_cx: &Context<'_>, args: Args) -> Result<Value> {
    sorted(args, AggFunc::Max, true)
}

fn sort_by_name(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let natural = args.bool(1).unwrap_or(false);
    let reverse = args.bool(2).unwrap_or(false);
    let mut keyed: Vec<(String, Series)> = args
        .take_series(0)
        .into_iter()
        .map(|s| {
            let key = if natural {
                natural_key(&s.name)
            } else {
                s.name.clone()
            };
            (key, s)
        })
        .collect();
    keyed.sort_by(|a, b| {
        let order = a.0.cmp(&b.0);
        if reverse { order.reverse() } else { order }
    });
    Ok(Value::Series(keyed.into_iter().map(|(_, s)| s).collect()))
}

/// `sortByName`'s natural key: each run of ASCII digits as its integer value padded with
/// zeros to ten digits (`"{0:010}".format(int(run))`).
fn natural_key(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 16);
    let mut digits = String::new();
    let flush = |digits: &mut String, out: &mut String| {
        if digits.is_empty() {
            return;
        }
        let significant = digits.trim_start_matches('0');
        let significant = if significant.is_empty() {
            "0"
        } else {
            significant
        };
        for _ in significant.len()..10 {
            out.push('0');
        }
        out.push_str(significant);
        digits.clear();
    };
    for c in name.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            flush(&mut digits, &mut out);
            out.push(c);
        }
    }
    flush(&mut digits, &mut out);
    out
}

fn pattern_filter(mut args: Args, keep_matches: bool) -> Result<Value> {
    let pattern = args.get(1).map(Value::to_py_str).unwrap_or_default();
    let regex = pyre::compile(&pattern)?;
    let mut list = args.take_series(0);
    list.retain(|s| regex.is_match(&s.name) == keep_matches);
    Ok(Value::Series(list))
}

fn exclude(_cx: &Context<'_>, args: Args) -> Result<Value> {
    pattern_filter(args, false)
}

fn grep(_cx: &Context<'_>, args: Args) -> Result<Value> {
    pattern_filter(args, true)
}

/// `removeBelowValue` / `removeAboveValue`: the series renamed `<func>(<name>, <%g of n>)`
/// and each value that fails the test set to null (graphite-web tests the points as the
/// series iterates them and writes by their index).
fn remove_values(
    mut args: Args,
    func: &str,
    remove: impl Fn(Option<f64>) -> bool,
) -> Result<Value> {
    let n = number(&args, 1, func, "n")?;
    let mut list = args.take_series(0);
    for series in &mut list {
        series.name = format!("{func}({}, {})", series.name, format_g(n));
        series.path_expression = series.name.clone();
        let points = series.points();
        for (i, point) in points.iter().enumerate() {
            if remove(*point)
                && let Some(slot) = series.values.get_mut(i)
            {
                *slot = None;
            }
        }
    }
    Ok(Value::Series(list))
}

fn remove_below_value(_cx: &Context<'_>, args: Args) -> Result<Value> {
    let n = args.f64(1).unwrap_or(f64::NAN);
    remove_values(args, "removeBelowValue", move |v| v.is_none_or(|v| v < n))
}

fn remove_above_value(_cx: &Context<'_>, args: Args) -> Result<Value> {
    let n = args.f64(1).unwrap_or(f64::NAN);
    remove_values(args, "removeAboveValue", move |v| v.is_some_and(|v| v > n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_keys_pad_digit_runs_as_python_formats_them() {
        crate::pyfmt::assert_text_cases(
            "natural key",
            natural_key,
            &[
                ("web2", "web0000000002"),
                ("a007b10", "a0000000007b0000000010"),
                ("x0", "x0000000000"),
                ("12345678901234", "12345678901234"),
                ("no digits", "no digits"),
            ],
        );
        assert!(natural_key("web2") < natural_key("web10"));
    }

    #[test]
    fn prefixes_slice_as_python_does() {
        let cases = [
            (2, 2),
            (0, 0),
            (-1, 3),
            (-10, 0),
            (100, 4),
            (i64::MIN, 0),
            (i64::MAX, 4),
        ];
        for (n, want) in cases {
            assert_eq!(py_prefix(4, n), want, "[:{n}] of 4 items");
        }
    }
}
