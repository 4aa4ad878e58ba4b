//! Transform functions: each series' values mapped point by point or along the series
//! (`scale`, `scaleToSeconds`, `offset`, `absolute`, `derivative`, `perSecond`,
//! `nonNegativeDerivative`, `integral`, `keepLastValue`, `transformNull`), named and tagged as
//! graphite-web 1.1.10 names and tags them.
//!
//! Owns the per-point arithmetic and graphite-web's rounding (`round(x, 6)` in `perSecond`
//! and `scaleToSeconds`). Where graphite-web's Python fails on an input (a null compared
//! with `maxValue`, `None` given for a number it formats), the call answers a 400 naming the
//! problem instead of its 500. Functions that read other time ranges live in `moving.rs` and
//! `time.rs`.

use std::sync::Arc;

use super::agg::rows;
use super::{
    Args, Builtin, Context, Function, Param, ParamType, Signature, SyncBody, Value, series_list,
};
use crate::pyfmt::format_g;
use crate::{Error, Result, Series};

pub(crate) fn functions() -> Vec<Arc<dyn Function>> {
    // The counter functions: the same parameters, `maxValue` and `minValue` as graphite-web's
    // `_nonNegativeDelta` reads them.
    let counter = |name: &str, description: &str, body: SyncBody| {
        Builtin::arc(
            Signature::with_args(
                name,
                "seriesList, maxValue=None, minValue=None",
                "Transform",
                description,
            )
            .params(vec![
                series_list(),
                Param::new("maxValue", ParamType::Float),
                Param::new("minValue", ParamType::Float),
            ]),
            body,
        )
    };
    vec![
        Builtin::arc(
            Signature::new(
                "scale",
                "scale(seriesList, factor)",
                "Transform",
                "Multiplies every value by a constant factor (nulls stay null).",
            )
            .params(vec![
                series_list(),
                Param::new("factor", ParamType::Float).required(),
            ]),
            scale,
        ),
        Builtin::arc(
            Signature::new(
                "scaleToSeconds",
                "scaleToSeconds(seriesList, seconds)",
                "Transform",
                "Turns each value, a total per step, into the total per the given number of \
                 seconds (value × seconds / step, rounded to six decimals).",
            )
            .params(vec![
                series_list(),
                Param::new("seconds", ParamType::Float).required(),
            ]),
            scale_to_seconds,
        ),
        Builtin::arc(
            Signature::new(
                "offset",
                "offset(seriesList, factor)",
                "Transform",
                "Adds a constant to every value (nulls stay null).",
            )
            .params(vec![
                series_list(),
                Param::new("factor", ParamType::Float).required(),
            ]),
            offset,
        ),
        Builtin::arc(
            Signature::new(
                "absolute",
                "absolute(seriesList)",
                "Transform",
                "Replaces every value by its absolute value.",
            )
            .params(vec![series_list()]),
            absolute,
        ),
        Builtin::arc(
            Signature::new(
                "derivative",
                "derivative(seriesList)",
                "Transform",
                "The change from each value to the next (null where either is null); not \
                 divided by time (see perSecond).",
            )
            .params(vec![series_list()]),
            derivative,
        ),
        counter(
            "perSecond",
            "The increase per second of a counter: nonNegativeDerivative divided by the step, \
             rounded to six decimals; maxValue and minValue as there.",
            per_second,
        ),
        counter(
            "nonNegativeDerivative",
            "The increase of a counter from each value to the next. A decrease is a reset and \
             gives null, unless maxValue (and minValue) say where the counter wraps; values \
             above maxValue or below minValue are left out.",
            non_negative_derivative,
        ),
        Builtin::arc(
            Signature::new(
                "integral",
                "integral(seriesList)",
                "Transform",
                "The running total of the values from the start of the range (nulls stay null \
                 and add nothing).",
            )
            .params(vec![series_list()]),
            integral,
        ),
        Builtin::arc(
            Signature::new(
                "integralByInterval",
                "integralByInterval(seriesList, intervalUnit)",
                "Transform",
                "The running total of the values, starting again from zero at each interval \
                 (`intervalUnit`, e.g. \"1d\") counted from the start of the range; a null \
                 repeats the total so far.",
            )
            .params(vec![
                series_list(),
                Param::new("intervalUnit", ParamType::String).required(),
            ]),
            integral_by_interval,
        ),
        Builtin::arc(
            Signature::new(
                "keepLastValue",
                "keepLastValue(seriesList, limit=inf)",
                "Transform",
                "Fills runs of nulls with the last value before them, for runs of at most \
                 limit nulls (any length by default), including a run at the end.",
            )
            .params(vec![
                series_list(),
                Param::new("limit", ParamType::IntOrInf).default(Value::Float(f64::INFINITY)),
            ]),
            keep_last_value,
        ),
        Builtin::arc(
            Signature::new(
                "transformNull",
                "transformNull(seriesList, default=0, referenceSeries=None)",
                "Transform",
                "Replaces nulls by a default value (0 unless given); with referenceSeries, only \
                 at the points where one of those series has a value.",
            )
            .params(vec![
                series_list(),
                Param::new("default", ParamType::Float).default(Value::Int(0)),
                Param::new("referenceSeries", ParamType::SeriesList),
            ]),
            transform_null,
        ),
    ]
}

/// Renames a series in place as the functions that keep their input do: the name and the
/// path expression both become `name`.
pub(crate) fn rename(series: &mut Series, name: String) {
    series.path_expression = name.clone();
    series.name = name;
}

/// graphite-web's `series.copy(name=..., values=...)`: the same series (its time axis,
/// tags, consolidation and xFilesFactor) under a new name, with new values, one value per
/// point.
pub(crate) fn copy_with(series: &Series, name: String, values: Vec<Option<f64>>) -> Series {
    Series {
        path_expression: name.clone(),
        name,
        start: series.start,
        end: series.end,
        step: series.step,
        values,
        tags: series.tags.clone(),
        consolidation: series.consolidation,
        values_per_point: 1,
        x_files_factor: series.x_files_factor,
    }
}

/// Python's `round(x, 6)` of a float: the value correctly rounded to six decimals (ties to
/// even on the exact binary value), as the shortest decimal text it reads back from.
pub(crate) fn round6(x: f64) -> f64 {
    // Past 2^53 a float has no fraction to round; Python returns it unchanged.
    if !x.is_finite() || x.abs() >= 9_007_199_254_740_992.0 {
        return x;
    }
    format!("{x:.6}").parse().unwrap_or(x)
}

/// A number argument that graphite-web formats or compares: `None` given explicitly fails
/// there (a 500); here a 400 naming the parameter.
fn explicit_none(args: &Args, i: usize, func: &str, param: &str) -> Result<()> {
    if args.all(i).first() == Some(&Value::None) {
        return Err(Error::invalid(format!(
            "{func} needs a number for {param}, not None"
        )));
    }
    Ok(())
}

/// Each series of parameter 0 with `op` applied to its non-null values, tagged `func: tag`
/// and renamed `func(name<printed>)` (`printed`, the arguments as graphite-web prints them,
/// each after a comma).
fn pointwise(
    mut args: Args,
    func: &str,
    tag: String,
    printed: &str,
    op: impl Fn(f64) -> f64,
) -> Result<Value> {
    let mut list = args.take_series(0);
    for series in &mut list {
        series.tag(func, tag.clone());
        rename(series, format!("{func}({}{printed})", series.name));
        for v in series.values.iter_mut().flatten() {
            *v = op(*v);
        }
    }
    Ok(Value::Series(list))
}

fn scale(_cx: &Context<'_>, args: Args) -> Result<Value> {
    let (factor, raw) = args.number(1, "scale", "a numeric factor")?;
    let printed = format!(",{}", format_g(factor));
    pointwise(args, "scale", raw.to_py_str(), &printed, |v| v * factor)
}

/// Python's `'%d' % x` of a float: its integral part in full (`int(x)`), or why it has none.
pub(crate) fn percent_d(x: f64) -> Option<String> {
    if !x.is_finite() {
        return None;
    }
    let t = x.trunc();
    Some(if t == 0.0 {
        "0".to_owned()
    } else {
        format!("{t:.0}")
    })
}

fn scale_to_seconds(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let (seconds, raw) = args.number(1, "scaleToSeconds", "a number of seconds")?;
    let mut list = args.take_series(0);
    if list.is_empty() {
        return Ok(Value::Series(list));
    }
    let Some(whole) = percent_d(seconds) else {
        return Err(Error::invalid(format!(
            "scaleToSeconds needs a finite number of seconds, not {}",
            raw.repr()
        )));
    };
    for series in &mut list {
        series.tag("scaleToSeconds", raw.to_py_str());
        rename(series, format!("scaleToSeconds({},{whole})", series.name));
        let factor = seconds / series.step as f64;
        for v in series.values.iter_mut().flatten() {
            *v = round6(*v * factor);
        }
    }
    Ok(Value::Series(list))
}

fn offset(_cx: &Context<'_>, args: Args) -> Result<Value> {
    let (factor, raw) = args.number(1, "offset", "a number to add")?;
    let printed = format!(",{}", format_g(factor));
    pointwise(args, "offset", raw.to_py_str(), &printed, |v| v + factor)
}

fn absolute(_cx: &Context<'_>, args: Args) -> Result<Value> {
    pointwise(args, "absolute", "1".to_owned(), "", f64::abs)
}

/// Each series of parameter 0 as a copy with the values `values_of` gives, tagged
/// `func: 1` and named `func(name)`.
fn each_copied(
    mut args: Args,
    func: &str,
    mut values_of: impl FnMut(&Series) -> Result<Vec<Option<f64>>>,
) -> Result<Value> {
    let list = args.take_series(0);
    let mut out = Vec::with_capacity(list.len());
    for mut series in list {
        let values = values_of(&series)?;
        series.tag(func, "1");
        let name = format!("{func}({})", series.name);
        out.push(copy_with(&series, name, values));
    }
    Ok(Value::Series(out))
}

fn derivative(_cx: &Context<'_>, args: Args) -> Result<Value> {
    each_copied(args, "derivative", |series| {
        let mut prev: Option<f64> = None;
        Ok(series
            .values
            .iter()
            .map(|&v| {
                let delta = match (prev, v) {
                    (Some(p), Some(v)) => Some(v - p),
                    _ => None,
                };
                prev = v;
                delta
            })
            .collect())
    })
}

fn integral(_cx: &Context<'_>, args: Args) -> Result<Value> {
    each_copied(args, "integral", |series| {
        let mut current = 0.0;
        Ok(series
            .values
            .iter()
            .map(|v| {
                v.map(|v| {
                    current += v;
                    current
                })
            })
            .collect())
    })
}

fn integral_by_interval(cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let unit = args.get(1).map(Value::to_py_str).unwrap_or_default();
    let duration = crate::attime::parse_offset(&unit)
        .map_err(|e| Error::invalid(format!("integralByInterval: {e}")))?
        .saturating_abs();
    if duration == 0 {
        return Err(Error::invalid(format!(
            "integralByInterval needs an interval longer than zero, not {}",
            crate::pyfmt::repr_str(&unit)
        )));
    }
    let start = cx.from();
    let list = args.take_series(0);
    let mut out = Vec::with_capacity(list.len());
    for mut series in list {
        let mut at = series.start;
        let mut current = 0.0;
        let mut values = Vec::with_capacity(series.values.len());
        for value in &series.values {
            // A new interval begins between the previous step and this one.
            if (at - start).div_euclid(duration) != (at - start - series.step).div_euclid(duration)
            {
                current = 0.0;
            }
            if let Some(v) = value {
                current += v;
            }
            values.push(Some(current));
            at += series.step;
        }
        series.tag("integralByInterval", unit.clone());
        let name = format!("integralByInterval({},'{unit}')", series.name);
        out.push(copy_with(&series, name, values));
    }
    Ok(Value::Series(out))
}

/// `_nonNegativeDelta`: the increase from `prev` to `val` and the next `prev`. A value past
/// `max_value` or `min_value` is dropped (and resets `prev`); a decrease wraps at `max_value`
/// (down to `min_value`, 0 unless given) or, with `min_value` alone, restarts there;
/// otherwise it is a reset and gives null. `Err` where graphite-web compares a null with a
/// bound (a `TypeError` there).
fn non_negative_delta(
    val: Option<f64>,
    prev: Option<f64>,
    max_value: Option<f64>,
    min_value: Option<f64>,
) -> std::result::Result<(Option<f64>, Option<f64>), &'static str> {
    if let Some(max) = max_value {
        match val {
            None => return Err("maxValue"),
            Some(v) if v > max => return Ok((None, None)),
            _ => {}
        }
    }
    if let Some(min) = min_value {
        match val {
            None => return Err("minValue"),
            Some(v) if v < min => return Ok((None, None)),
            _ => {}
        }
    }
    let (Some(prev), Some(val)) = (prev, val) else {
        return Ok((None, val));
    };
    if val >= prev {
        return Ok((Some(val - prev), Some(val)));
    }
    if let Some(max) = max_value {
        return Ok((
            Some(max + 1.0 + val - prev - min_value.unwrap_or(0.0)),
            Some(val),
        ));
    }
    if let Some(min) = min_value {
        return Ok((Some(val - min), Some(val)));
    }
    Ok((None, Some(val)))
}

/// The non-negative deltas of a series, each mapped by `per_step` (the step given).
fn non_negative_values(
    func: &str,
    series: &Series,
    max_value: Option<f64>,
    min_value: Option<f64>,
    per_step: impl Fn(f64, i64) -> f64,
) -> Result<Vec<Option<f64>>> {
    let mut prev = None;
    let mut out = Vec::with_capacity(series.values.len());
    for &val in &series.values {
        let (delta, next) =
            non_negative_delta(val, prev, max_value, min_value).map_err(|bound| {
                Error::invalid(format!(
                    "{func} cannot compare a null value of {} with {bound} (graphite-web \
                     fails on it too)",
                    series.name
                ))
            })?;
        prev = next;
        out.push(delta.map(|d| per_step(d, series.step)));
    }
    Ok(out)
}

/// `nonNegativeDerivative` and `perSecond` (`func`): each series' non-negative deltas, each
/// mapped by `per_step` (the step given); parameters 1 and 2 are `maxValue` and `minValue`.
fn counter_increases(args: Args, func: &str, per_step: impl Fn(f64, i64) -> f64) -> Result<Value> {
    let (max_value, min_value) = (args.f64(1), args.f64(2));
    each_copied(args, func, |series| {
        non_negative_values(func, series, max_value, min_value, &per_step)
    })
}

fn non_negative_derivative(_cx: &Context<'_>, args: Args) -> Result<Value> {
    counter_increases(args, "nonNegativeDerivative", |d, _| d)
}

fn per_second(_cx: &Context<'_>, args: Args) -> Result<Value> {
    counter_increases(args, "perSecond", |d, step| round6(d / step as f64))
}

/// The longest run of nulls parameter 1 allows (`keepLastValue`, `interpolate`): infinity
/// when absent, `None` when given as `None` (graphite-web compares that with a count and
/// fails where a run could be filled).
pub(crate) fn null_run_limit(args: &Args) -> Option<f64> {
    match args.all(1).first() {
        None => Some(f64::INFINITY),
        Some(Value::None) => None,
        Some(_) => args.f64(1),
    }
}

fn keep_last_value(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    // An explicit None fails once a run of nulls ends.
    let limit = null_run_limit(&args);
    let mut list = args.take_series(0);
    for series in &mut list {
        rename(series, format!("keepLastValue({})", series.name));
        let within = |run: usize| -> Result<bool> {
            match limit {
                _ if run == 0 => Ok(false),
                Some(limit) => Ok(run as f64 <= limit),
                None => Err(Error::invalid(
                    "keepLastValue needs a number for limit, not None",
                )),
            }
        };
        let mut run = 0usize;
        let mut last: Option<f64> = None;
        for i in 0..series.values.len() {
            match series.values[i] {
                None => run += 1,
                Some(v) => {
                    if within(run)?
                        && let Some(last) = last
                    {
                        series.values[i - run..i].fill(Some(last));
                    }
                    run = 0;
                    last = Some(v);
                }
            }
        }
        let len = series.values.len();
        if within(run)?
            && let Some(last) = last
        {
            series.values[len - run..].fill(Some(last));
        }
    }
    Ok(Value::Series(list))
}

fn transform_null(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let mut list = args.take_series(0);
    if list.is_empty() {
        return Ok(Value::Series(list));
    }
    explicit_none(&args, 1, "transformNull", "default")?;
    let raw = args.get(1).cloned().unwrap_or(Value::Int(0));
    let default = args.f64(1).unwrap_or(0.0);
    let reference = args.take_series(2);
    // Per point of the reference series (iterated together, the shorter padded with nulls):
    // the default where any of them has a value, else null.
    let defaults: Option<Vec<Option<f64>>> = (!reference.is_empty()).then(|| {
        rows(&reference)
            .iter()
            .map(|row| row.iter().any(Option::is_some).then_some(default))
            .collect()
    });
    for series in &mut list {
        series.tag("transformNull", raw.to_py_str());
        let name = if defaults.is_some() {
            series.tag("referenceSeries", "1");
            format!(
                "transformNull({},{},referenceSeries)",
                series.name,
                format_g(default)
            )
        } else {
            format!("transformNull({},{})", series.name, format_g(default))
        };
        rename(series, name);
        // Python iterates the series (consolidated, were it so) into new values, appends
        // them to the series and deletes as many from its front: the series keeps its
        // length, and where the new values are longer (a longer reference), their last ones.
        let points = series.points();
        let values: Vec<Option<f64>> = match defaults.as_deref() {
            // An empty list of defaults counts as none (Python's falsy list).
            Some(defaults) if !defaults.is_empty() => {
                // izip_longest: the longer of the two decides the length.
                let len = points.len().max(defaults.len());
                (0..len)
                    .map(|i| {
                        let v = points.get(i).copied().flatten();
                        v.or_else(|| defaults.get(i).copied().flatten())
                    })
                    .collect()
            }
            _ => points.into_iter().map(|v| v.or(Some(default))).collect(),
        };
        let cut = values.len();
        series.values.extend(values);
        series.values.drain(..cut);
    }
    Ok(Value::Series(list))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round6_follows_pythons_round() {
        assert_eq!(round6(2.0000005), 2.000001);
        assert_eq!(round6(0.0000005), 0.0);
        // 0.1234565 is a little below the tie in binary.
        assert_eq!(round6(0.1234565), 0.123456);
        assert_eq!(round6(0.0000015), 0.000002);
        assert_eq!(round6(1.0 / 3.0), 0.333333);
        assert_eq!(round6(1e300), 1e300);
        assert!(round6(f64::NAN).is_nan());
        assert_eq!(round6(-0.0000001).to_string(), "-0");
    }

    #[test]
    fn percent_d_truncates_as_int_does() {
        assert_eq!(percent_d(2.9).as_deref(), Some("2"));
        assert_eq!(percent_d(-0.5).as_deref(), Some("0"));
        assert_eq!(percent_d(-60.0).as_deref(), Some("-60"));
        assert_eq!(percent_d(1e20).as_deref(), Some("100000000000000000000"));
        assert_eq!(percent_d(f64::INFINITY), None);
    }

    #[test]
    fn non_negative_delta_wraps_and_resets() {
        let d = |v, p, max, min| non_negative_delta(v, p, max, min).unwrap();
        assert_eq!(d(Some(5.0), Some(3.0), None, None), (Some(2.0), Some(5.0)));
        assert_eq!(d(Some(1.0), Some(3.0), None, None), (None, Some(1.0)));
        assert_eq!(d(Some(1.0), None, None, None), (None, Some(1.0)));
        assert_eq!(d(None, Some(1.0), None, None), (None, None));
        // Wrapped at 10: 3 -> 10 -> 0 -> 1 is 8 counts.
        assert_eq!(
            d(Some(1.0), Some(3.0), Some(10.0), None),
            (Some(9.0), Some(1.0))
        );
        assert_eq!(
            d(Some(1.0), Some(3.0), Some(10.0), Some(1.0)),
            (Some(8.0), Some(1.0))
        );
        assert_eq!(
            d(Some(4.0), Some(7.0), None, Some(2.0)),
            (Some(2.0), Some(4.0))
        );
        assert_eq!(d(Some(11.0), Some(3.0), Some(10.0), None), (None, None));
        assert_eq!(d(Some(0.0), Some(3.0), None, Some(1.0)), (None, None));
        assert!(non_negative_delta(None, Some(1.0), Some(10.0), None).is_err());
        assert!(non_negative_delta(None, None, None, Some(0.0)).is_err());
    }
}
