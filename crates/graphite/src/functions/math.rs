//! Per-value math functions: each value of each series mapped on its own (`invert`, `pow`,
//! `squareRoot`, `log`, `exp`, `round`, `add`, `sigmoid`, `logit`, `isNonNull`), or along the
//! series (`offsetToZero`, `minMax`, `changed`, `delay`, `interpolate`), and the ones that only
//! set how a series is read (`cumulative`, `setXFilesFactor`), and two calculations over a
//! series' own points (`nPercentile`, `stdev`), named and tagged as graphite-web 1.1.10
//! names and tags them.
//!
//! Owns Python's float semantics where these functions show them: `math.log`'s domain,
//! `round(x, n)` (correctly rounded, ties to even), `math.exp`'s overflow (`math.pow`'s
//! domain and range errors are `combine.rs`'s `safePow`). Where graphite-web's Python
//! raises out of the function (a 500 there), the call answers a 400 naming the problem.
//! Moving windows live in `moving.rs`; the `+`/`*` of several series in `combine.rs`.

use std::sync::Arc;

use super::combine::{percentile, safe_pow};
use super::special::consolidated;
use super::transform::{copy_with, null_run_limit, percent_d, rename};
use super::{
    Args, Builtin, Context, Function, Param, ParamType, Signature, SyncBody, Value, series_list,
};
use crate::pyfmt::{format_g, py_max, py_min, repr_f64};
use crate::{Consolidation, Error, Result, Series};

pub(crate) fn functions() -> Vec<Arc<dyn Function>> {
    // The functions of a series list alone.
    let plain = |name: &str, group: &str, description: &str, body: SyncBody| {
        Builtin::arc(
            Signature::with_args(name, "seriesList", group, description)
                .params(vec![series_list()]),
            body,
        )
    };
    let set_x_files_factor = Builtin::arc(
        Signature::new(
            "setXFilesFactor",
            "setXFilesFactor(seriesList, xFilesFactor)",
            "Special",
            "Sets the share of non-null values (0 to 1) a consolidated point needs to be \
             non-null, for these series and for whatever the request evaluates after them \
             (the default of functions with an xFilesFactor parameter). Short form: \
             xFilesFactor.",
        )
        .params(vec![
            series_list(),
            Param::new("xFilesFactor", ParamType::Float).required(),
        ]),
        set_x_files_factor as SyncBody,
    );
    let short = super::Alias::arc("xFilesFactor", &set_x_files_factor);
    vec![
        plain(
            "invert",
            "Transform",
            "Replaces every value x by 1/x (null for 0).",
            invert,
        ),
        Builtin::arc(
            Signature::new(
                "pow",
                "pow(seriesList, factor)",
                "Transform",
                "Raises every value to the power factor; null where the result is not a \
                 real number or is too large.",
            )
            .params(vec![
                series_list(),
                Param::new("factor", ParamType::Float).required(),
            ]),
            pow,
        ),
        plain(
            "squareRoot",
            "Transform",
            "Replaces every value by its square root (null for negative values).",
            square_root,
        ),
        Builtin::arc(
            Signature::new(
                "log",
                "log(seriesList, base=10)",
                "Transform",
                "Replaces every value by its logarithm in the given base (10 unless given); \
                 null for values that are zero or negative.",
            )
            .params(vec![
                series_list(),
                Param::new("base", ParamType::Integer).default(Value::Int(10)),
            ]),
            log,
        ),
        plain(
            "exp",
            "Transform",
            "Replaces every value x by e to the power x.",
            exp,
        ),
        Builtin::arc(
            Signature::new(
                "round",
                "round(seriesList, precision=None)",
                "Transform",
                "Rounds every value to the given number of decimals (whole numbers unless \
                 given; a negative precision rounds to tens, hundreds, ...), halves to the \
                 even neighbour.",
            )
            .params(vec![
                series_list(),
                Param::new("precision", ParamType::Integer).default(Value::Int(0)),
            ]),
            round,
        ),
        plain(
            "offsetToZero",
            "Transform",
            "Subtracts each series' smallest value from all its values, so that its minimum \
             becomes 0.",
            offset_to_zero,
        ),
        Builtin::arc(
            Signature::new(
                "add",
                "add(seriesList, constant)",
                "Transform",
                "Adds a constant to every value (nulls stay null).",
            )
            .params(vec![
                series_list(),
                Param::new("constant", ParamType::Float).required(),
            ]),
            add,
        ),
        plain(
            "sigmoid",
            "Transform",
            "Replaces every value x by the logistic function 1 / (1 + e^-x).",
            sigmoid,
        ),
        plain(
            "logit",
            "Transform",
            "Replaces every value x by log(x / (1 - x)), the inverse of sigmoid; null \
             outside 0 < x < 1.",
            logit,
        ),
        plain(
            "isNonNull",
            "Transform",
            "1 where a series has a value, 0 where it has none; summed across hosts it counts \
             those reporting.",
            is_non_null,
        ),
        plain(
            "changed",
            "Special",
            "1 where a value differs from the last value before it, 0 elsewhere (nulls and \
             the first value included).",
            changed,
        ),
        Builtin::arc(
            Signature::new(
                "delay",
                "delay(seriesList, steps)",
                "Transform",
                "Moves every value the given number of steps later (earlier for a negative \
                 number), nulls filling the points left empty.",
            )
            .params(vec![
                series_list(),
                Param::new("steps", ParamType::Integer).required(),
            ]),
            delay,
        ),
        plain(
            "minMax",
            "Transform",
            "Scales each series to 0..1: (value - minimum) / (maximum - minimum), 0 for a \
             series whose values are all the same.",
            min_max,
        ),
        Builtin::arc(
            Signature::new(
                "interpolate",
                "interpolate(seriesList, limit=inf)",
                "Transform",
                "Fills runs of nulls between two values with the straight line between them, \
                 for runs of at most limit nulls (any length by default); nulls at the start \
                 and the end stay.",
            )
            .params(vec![
                series_list(),
                Param::new("limit", ParamType::IntOrInf).default(Value::Float(f64::INFINITY)),
            ]),
            interpolate,
        ),
        plain(
            "cumulative",
            "Special",
            "Merges points by summing them when an answer has more points than \
             maxDataPoints allows (consolidateBy 'sum').",
            cumulative,
        ),
        set_x_files_factor,
        short,
        Builtin::arc(
            Signature::new(
                "nPercentile",
                "nPercentile(seriesList, n)",
                "Calculate",
                "Each series becomes a flat line at the n-th percentile of its non-null \
                 values (nearest rank); series without values are left out.",
            )
            .params(vec![
                series_list(),
                Param::new("n", ParamType::Float).required(),
            ]),
            n_percentile as SyncBody,
        ),
        Builtin::arc(
            Signature::new(
                "stdev",
                "stdev(seriesList, points, windowTolerance=0.1)",
                "Calculate",
                "Each point becomes the standard deviation of the non-null values of the \
                 window of the given number of points ending at it (from the start of the \
                 range, without earlier data); null where the window's share of non-null \
                 values is below windowTolerance.",
            )
            .params(vec![
                series_list(),
                Param::new("points", ParamType::Integer).required(),
                Param::new("windowTolerance", ParamType::Float).default(Value::Float(0.1)),
            ]),
            stdev,
        ),
    ]
}

/// Each series of parameter 0 tagged `tag` (when given), renamed by `name` (from its name)
/// and each value replaced by `op` of it, in place as graphite-web's loops do.
fn in_place(
    mut args: Args,
    tag: Option<(&str, String)>,
    name: impl Fn(&str) -> String,
    mut op: impl FnMut(&Series, Option<f64>) -> Result<Option<f64>>,
) -> Result<Value> {
    let mut list = args.take_series(0);
    for series in &mut list {
        if let Some((key, value)) = &tag {
            series.tag(key, value.clone());
        }
        rename(series, name(&series.name));
        for i in 0..series.values.len() {
            let v = op(series, series.values[i])?;
            series.values[i] = v;
        }
    }
    Ok(Value::Series(list))
}

/// Python's `math.exp`: an error where a finite value overflows (its `OverflowError`).
fn py_exp(func: &str, series: &Series, x: f64) -> Result<f64> {
    let r = x.exp();
    if r.is_infinite() && x.is_finite() {
        return Err(Error::invalid(format!(
            "{func}: e to the power {} of {} is too large (graphite-web fails on it too)",
            repr_f64(x),
            series.name
        )));
    }
    Ok(r)
}

/// Python's `math.log` of a float: the natural logarithm, `None` where it raises (zero,
/// negative values, minus infinity); NaN stays NaN.
fn py_ln(x: f64) -> Option<f64> {
    if x > 0.0 || x.is_nan() {
        Some(x.ln())
    } else {
        None
    }
}

fn invert(_cx: &Context<'_>, args: Args) -> Result<Value> {
    in_place(
        args,
        Some(("invert", "1".to_owned())),
        |name| format!("invert({name})"),
        |_, v| Ok(safe_pow(v, Some(-1.0))),
    )
}

fn pow(_cx: &Context<'_>, args: Args) -> Result<Value> {
    let (factor, raw) = args.number(1, "pow", "a numeric factor")?;
    let printed = format_g(factor);
    in_place(
        args,
        Some(("pow", raw.to_py_str())),
        |name| format!("pow({name},{printed})"),
        |_, v| Ok(safe_pow(v, Some(factor))),
    )
}

fn square_root(_cx: &Context<'_>, args: Args) -> Result<Value> {
    in_place(
        args,
        Some(("squareRoot", "1".to_owned())),
        |name| format!("squareRoot({name})"),
        |_, v| Ok(safe_pow(v, Some(0.5))),
    )
}

fn log(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    // An explicit None is printed and tagged, and fails the first logarithm taken.
    let base: Option<i64> = match args.all(1).first() {
        None => Some(10),
        Some(Value::None) => None,
        Some(_) => args.i64(1),
    };
    let printed = base.map_or_else(|| "None".to_owned(), |b| b.to_string());
    // Python's `math.log(x, base)`: log(x) / log(base), each as `math.log` takes it.
    let denominator = || -> Result<f64> {
        let base = base.ok_or_else(|| Error::invalid("log needs an integer base, not None"))?;
        let ln = py_ln(base as f64)
            .ok_or_else(|| Error::invalid(format!("log needs a positive base, not {base}")))?;
        if ln == 0.0 {
            return Err(Error::invalid("log cannot take logarithms in base 1"));
        }
        Ok(ln)
    };
    let list = args.take_series(0);
    let mut out = Vec::with_capacity(list.len());
    for mut series in list {
        let mut values = Vec::with_capacity(series.values.len());
        for v in series.points() {
            values.push(match v {
                Some(v) if v > 0.0 => Some(v.ln() / denominator()?),
                _ => None,
            });
        }
        series.tag("log", printed.clone());
        let name = format!("log({}, {printed})", series.name);
        out.push(copy_with(&series, name, values));
    }
    Ok(Value::Series(out))
}

fn exp(_cx: &Context<'_>, args: Args) -> Result<Value> {
    in_place(
        args,
        Some(("exp", "e".to_owned())),
        |name| format!("exp({name})"),
        |series, v| v.map(|v| py_exp("exp", series, v)).transpose(),
    )
}

/// Python 3's `round(x, ndigits)` of a float: `x` correctly rounded to `ndigits` decimals
/// (to tens, hundreds, ... for negative ones), ties to even on its exact binary value; an
/// error where the result overflows.
fn py_round(x: f64, ndigits: i64) -> std::result::Result<f64, &'static str> {
    // CPython's NDIGITS_MAX and NDIGITS_MIN: past them nothing is or everything is rounded.
    if ndigits > 323 || !x.is_finite() {
        return Ok(x);
    }
    if ndigits < -308 {
        return Ok(0.0 * x);
    }
    let text = if ndigits >= 0 {
        // Rust's fixed-precision formatting is exact and rounds ties to even.
        format!("{:.*}", ndigits as usize, x)
    } else {
        round_to_power_of_ten(x, ndigits.unsigned_abs() as usize)
    };
    let r: f64 = text.parse().map_err(|_| "round cannot read its result")?;
    if r.is_infinite() {
        return Err("rounded value too large to represent");
    }
    Ok(r)
}

/// `x` rounded to a multiple of 10^k (k ≥ 1) as decimal text: its exact integral digits
/// and whether a fraction remains decide the direction, ties to an even digit.
fn round_to_power_of_ten(x: f64, k: usize) -> String {
    let a = x.abs();
    let whole = a.trunc();
    let has_fraction = a != whole;
    // Rust prints an integral float's exact digits; leading zeros keep one digit kept.
    let digits = format!("{whole:.0}");
    let digits = format!(
        "{}{digits}",
        "0".repeat((k + 1).saturating_sub(digits.len()))
    );
    let (kept, dropped) = digits.split_at(digits.len() - k);
    let half = format!("5{}", "0".repeat(k - 1));
    let up = match dropped.cmp(half.as_str()) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Equal => {
            has_fraction || kept.as_bytes().last().is_some_and(|d| (d - b'0') % 2 == 1)
        }
    };
    let mut kept: Vec<u8> = kept.bytes().collect();
    if up {
        let mut i = kept.len();
        loop {
            if i == 0 {
                kept.insert(0, b'1');
                break;
            }
            i -= 1;
            if kept[i] == b'9' {
                kept[i] = b'0';
            } else {
                kept[i] += 1;
                break;
            }
        }
    }
    let sign = if x.is_sign_negative() { "-" } else { "" };
    format!("{sign}{}{}", String::from_utf8_lossy(&kept), "0".repeat(k))
}

fn round(_cx: &Context<'_>, args: Args) -> Result<Value> {
    let precision = args.i64(1);
    let digits = precision.unwrap_or(0);
    let name = |name: &str| match precision {
        None => format!("round({name})"),
        Some(p) => format!("round({name},{})", format_g(p as f64)),
    };
    in_place(
        args,
        Some(("round", digits.to_string())),
        name,
        |series, v| {
            v.map(|v| {
                py_round(v, digits).map_err(|e| {
                    Error::invalid(format!(
                        "round of {} in {}: {e} (graphite-web fails on it too)",
                        repr_f64(v),
                        series.name
                    ))
                })
            })
            .transpose()
        },
    )
}

/// The smallest non-null value of the series as iterating it gives them (`safeMin`).
fn safe_min(series: &Series) -> Option<f64> {
    let values: Vec<f64> = series.points().into_iter().flatten().collect();
    (!values.is_empty()).then(|| py_min(&values))
}

fn offset_to_zero(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let mut list = args.take_series(0);
    for series in &mut list {
        let minimum = safe_min(series);
        series.tag(
            "offsetToZero",
            minimum.map_or_else(|| "None".to_owned(), repr_f64),
        );
        rename(series, format!("offsetToZero({})", series.name));
        if let Some(minimum) = minimum {
            for v in series.values.iter_mut().flatten() {
                *v -= minimum;
            }
        }
    }
    Ok(Value::Series(list))
}

fn add(_cx: &Context<'_>, args: Args) -> Result<Value> {
    let (constant, raw) = args.number(1, "add", "a number to add")?;
    if matches!(args.get(0), Some(Value::Series(list)) if !list.is_empty()) {
        // graphite-web prints the constant with `%d`, which fails on inf and nan.
        percent_d(constant).ok_or_else(|| {
            Error::invalid(format!(
                "add needs a finite number to add, not {} (graphite-web fails printing it)",
                raw.repr()
            ))
        })?;
    }
    let printed = percent_d(constant).unwrap_or_default();
    in_place(
        args,
        Some(("add", raw.to_py_str())),
        |name| format!("add({name},{printed})"),
        |_, v| Ok(v.map(|v| v + constant)),
    )
}

fn sigmoid(_cx: &Context<'_>, args: Args) -> Result<Value> {
    in_place(
        args,
        Some(("sigmoid", "sigmoid".to_owned())),
        |name| format!("sigmoid({name})"),
        |series, v| {
            v.map(|v| Ok(1.0 / (1.0 + py_exp("sigmoid", series, -v)?)))
                .transpose()
        },
    )
}

fn logit(_cx: &Context<'_>, args: Args) -> Result<Value> {
    in_place(
        args,
        Some(("logit", "logit".to_owned())),
        |name| format!("logit({name})"),
        // Python's ZeroDivisionError at 1 and math.log's domain error give nulls.
        |_, v| Ok(v.filter(|v| *v != 1.0).and_then(|v| py_ln(v / (1.0 - v)))),
    )
}

fn is_non_null(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let mut list = args.take_series(0);
    for series in &mut list {
        series.tag("isNonNull", "1");
        rename(series, format!("isNonNull({})", series.name));
        // Python appends the new values (of the series as iterated) and deletes as many
        // from its front.
        let values: Vec<Option<f64>> = series
            .points()
            .into_iter()
            .map(|v| Some(if v.is_some() { 1.0 } else { 0.0 }))
            .collect();
        let cut = values.len();
        series.values.extend(values);
        series.values.drain(..cut);
    }
    Ok(Value::Series(list))
}

fn changed(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let mut list = args.take_series(0);
    for series in &mut list {
        rename(series, format!("changed({})", series.name));
        let mut previous: Option<f64> = None;
        for v in &mut series.values {
            let changed = match (previous, *v) {
                (None, value) => {
                    previous = value;
                    false
                }
                (Some(p), Some(value)) if p != value => {
                    previous = Some(value);
                    true
                }
                _ => false,
            };
            *v = Some(if changed { 1.0 } else { 0.0 });
        }
    }
    Ok(Value::Series(list))
}

fn delay(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let (steps, _) = args.integer(1, "delay", "an integer number of steps")?;
    let list = args.take_series(0);
    let mut out = Vec::with_capacity(list.len());
    for mut series in list {
        let len = series.values.len();
        let n = usize::try_from(steps.unsigned_abs())
            .unwrap_or(usize::MAX)
            .min(len);
        let values: Vec<Option<f64>> = if steps < 0 {
            // series[-steps:] + [None] * min(-steps, len)
            let mut v = series.values[n..].to_vec();
            v.extend(std::iter::repeat_n(None, n));
            v
        } else {
            // [None] * min(steps, len) + series[:-steps]: nothing at all for 0 steps
            // (`series[:-0]` is empty).
            let mut v = vec![None; n];
            if steps > 0 {
                v.extend_from_slice(&series.values[..len - n]);
            }
            v
        };
        series.tag("delay", steps.to_string());
        let name = format!("delay({},{steps})", series.name);
        out.push(copy_with(&series, name, values));
    }
    Ok(Value::Series(out))
}

fn min_max(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let mut list = args.take_series(0);
    for series in &mut list {
        rename(series, format!("minMax({})", series.name));
        let values: Vec<f64> = series.points().into_iter().flatten().collect();
        let (min, max) = if values.is_empty() {
            (0.0, 0.0)
        } else {
            (py_min(&values), py_max(&values))
        };
        for v in series.values.iter_mut().flatten() {
            let range = max - min;
            *v = if range == 0.0 {
                0.0
            } else {
                (*v - min) / range
            };
        }
    }
    Ok(Value::Series(list))
}

fn interpolate(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    // An explicit None fails at the first run of nulls that could be filled.
    let limit = null_run_limit(&args);
    let mut list = args.take_series(0);
    for series in &mut list {
        rename(series, format!("interpolate({})", series.name));
        let values = &mut series.values;
        let mut nulls = 0usize;
        for i in 1..values.len() {
            let Some(value) = values[i] else {
                nulls += 1;
                continue;
            };
            if nulls == 0 {
                continue;
            }
            let before = i - nulls - 1;
            let Some(first) = values[before] else {
                nulls = 0;
                continue;
            };
            let Some(limit) = limit else {
                return Err(Error::invalid(
                    "interpolate needs a number for limit, not None",
                ));
            };
            if nulls as f64 <= limit {
                for (k, slot) in values[i - nulls..i].iter_mut().enumerate() {
                    // The k-th null is (k + 1) steps after the value before the run.
                    *slot = Some(first + (k + 1) as f64 * (value - first) / (nulls + 1) as f64);
                }
            }
            nulls = 0;
        }
    }
    Ok(Value::Series(list))
}

fn cumulative(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    Ok(Value::Series(consolidated(
        args.take_series(0),
        Consolidation::Sum,
        "sum",
    )))
}

fn set_x_files_factor(cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let (x_files_factor, raw) = args.number(1, "setXFilesFactor", "a number")?;
    cx.set_x_files_factor(x_files_factor);
    let mut list = args.take_series(0);
    for series in &mut list {
        series.x_files_factor = x_files_factor;
        series.tag("xFilesFactor", raw.to_py_str());
    }
    Ok(Value::Series(list))
}

fn n_percentile(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let (n, raw) = args.number(1, "nPercentile", "a number for n")?;
    if n == 0.0 {
        return Err(Error::invalid(
            "nPercentile needs a percentile other than 0 (graphite-web asserts it)",
        ));
    }
    let list = args.take_series(0);
    let mut out = Vec::with_capacity(list.len());
    for mut series in list {
        let points = series.points();
        let Some(value) = percentile(&points, n, false)? else {
            continue;
        };
        series.tag("nPercentile", raw.to_py_str());
        let name = format!("nPercentile({}, {})", series.name, format_g(n));
        // `int((end - start) / step)` with Python's true division.
        let count = ((series.end - series.start) as f64 / series.step as f64) as usize;
        out.push(copy_with(&series, name, vec![Some(value); count]));
    }
    Ok(Value::Series(out))
}

fn stdev(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let (points, _) = args.integer(1, "stdev", "an integer number of points")?;
    // An explicit None is compared with a share in graphite-web: it fails at the first
    // window with a value.
    let tolerance = match args.all(2).first() {
        None => Some(0.1),
        Some(Value::None) => None,
        Some(_) => args.f64(2),
    };
    let list = args.take_series(0);
    let mut out = Vec::with_capacity(list.len());
    for mut series in list {
        series.tag("stdev", points.to_string());
        let name = format!("stdev({},{points})", series.name);
        let values = &series.values;
        let mut deviations = Vec::with_capacity(values.len());
        let (mut valid, mut sum, mut squares) = (0i64, 0.0f64, 0.0f64);
        for (index, &new) in values.iter().enumerate() {
            // The value leaving the window, once it is full (Python's `series[index -
            // points]`, past the end for a negative number of points).
            let dropped = if (index as i64) < points {
                None
            } else {
                let at = (index as i64)
                    .checked_sub(points)
                    .and_then(|i| usize::try_from(i).ok())
                    .filter(|&i| i < values.len())
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "stdev needs a positive number of points, not {points} \
                             (graphite-web reads past the series)"
                        ))
                    })?;
                values[at]
            };
            if let Some(d) = dropped {
                valid -= 1;
                sum -= d;
                squares -= d * d;
            }
            if let Some(v) = new {
                valid += 1;
                sum += v;
                squares += v * v;
            }
            let enough = valid > 0
                && match tolerance {
                    Some(t) => valid as f64 / points as f64 >= t,
                    None => {
                        return Err(Error::invalid(
                            "stdev needs a number for windowTolerance, not None",
                        ));
                    }
                };
            deviations.push(if enough {
                // Python's ValueError of a square root below zero (rounding) is a null.
                let spread = valid as f64 * squares - sum * sum;
                (spread >= 0.0).then(|| spread.sqrt() / valid as f64)
            } else {
                None
            });
        }
        out.push(copy_with(&series, name, deviations));
    }
    Ok(Value::Series(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_follows_python_3() {
        let r = |x, n| py_round(x, n).unwrap();
        // Exact ties go to the even neighbour; 1.35 is a little above its tie.
        assert_eq!(r(2.5, 0), 2.0);
        assert_eq!(r(3.5, 0), 4.0);
        assert_eq!(r(-2.5, 0), -2.0);
        assert_eq!(r(1.25, 1), 1.2);
        assert_eq!(r(1.35, 1), 1.4);
        assert_eq!(r(0.125, 2), 0.12);
        assert_eq!(r(-0.4, 0).to_string(), "-0");
        // Negative precisions round to tens, hundreds, ...
        assert_eq!(r(125.0, -1), 120.0);
        assert_eq!(r(135.0, -1), 140.0);
        assert_eq!(r(125.5, -1), 130.0);
        assert_eq!(r(-151.0, -2), -200.0);
        assert_eq!(r(999.0, -1), 1000.0);
        assert_eq!(r(49.0, -2), 0.0);
        assert_eq!(r(50.0, -2), 0.0);
        assert_eq!(r(150.0, -2), 200.0);
        assert_eq!(r(3.0, -400), 0.0);
        assert_eq!(r(1.5, 400), 1.5);
        assert!(py_round(1.7976931348623157e308, -308).is_err());
    }

    #[test]
    fn logarithms_follow_math_log() {
        assert_eq!(py_ln(0.0), None);
        assert_eq!(py_ln(-1.0), None);
        assert_eq!(py_ln(f64::NEG_INFINITY), None);
        assert_eq!(py_ln(1.0), Some(0.0));
        assert!(py_ln(f64::NAN).unwrap().is_nan());
    }
}
