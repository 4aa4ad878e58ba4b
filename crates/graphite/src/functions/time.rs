//! Functions over the time axis: `timeShift` (the series argument evaluated again over a
//! shifted range and laid over this one), `summarize` (values bucketed into intervals and
//! aggregated) and `hitcount` (rates turned into totals per interval, optionally over a range
//! started on an interval boundary), as graphite-web 1.1.10 computes them.
//!
//! Owns the bucket arithmetic of `summarize` and `hitcount` with graphite-web's alignment and
//! its xFilesFactor test, and the shifted and aligned ranges these functions evaluate their
//! argument over ([`Context::evaluate`]). Time is UTC throughout: `alignDST` changes nothing
//! there, as in graphite-web under `TZ=UTC`. A bucket count past the answer's point limit is
//! refused (a 400) before anything is allocated; a zero or negative interval, on which
//! graphite-web fails or never returns, is a 400 as soon as there is a series to bucket.

use std::sync::Arc;

use super::agg::AggFunc;
use super::moving::{shift_time, xff_of};
use super::transform::copy_with;
use super::{
    Args, Body, Builtin, Context, Function, Param, ParamType, Signature, Value, series_list,
};
use crate::attime::parse_offset;
use crate::pyfmt::py_sum;
use crate::{Error, Result, Series};

pub(crate) fn functions() -> Vec<Arc<dyn Function>> {
    let interval_suggestions = || {
        vec![
            Value::Str("10min".to_owned()),
            Value::Str("1h".to_owned()),
            Value::Str("1d".to_owned()),
        ]
    };
    vec![
        Builtin::arc(
            Signature::new(
                "timeShift",
                "timeShift(seriesList, timeShift, resetEnd=True, alignDST=False)",
                "Transform",
                "Draws the series as they were a span of time earlier (a span without a sign \
                 goes back; '+1h' goes forward), over the same time axis. With resetEnd (the \
                 default) the shifted series end where the unshifted ones do. alignDST has no \
                 effect: time is UTC.",
            )
            .params(vec![
                series_list(),
                Param::new("timeShift", ParamType::Interval)
                    .required()
                    .suggestions(
                        ["1h", "6h", "12h", "1d", "2d", "7d", "14d", "30d"]
                            .iter()
                            .map(|s| Value::Str((*s).to_owned()))
                            .collect(),
                    ),
                Param::new("resetEnd", ParamType::Boolean).default(Value::Bool(true)),
                Param::new("alignDst", ParamType::Boolean).default(Value::Bool(false)),
            ]),
            TimeShift,
        ),
        Builtin::arc(
            Signature::new(
                "summarize",
                "summarize(seriesList, intervalString, func='sum', alignToFrom=False)",
                "Transform",
                "Buckets the values into intervals (aligned to multiples of the interval, or \
                 to the start of the series with alignToFrom) and aggregates each bucket with \
                 func: sum by default, or average, median, min, max, diff, stddev, count, \
                 range, multiply, last and their aliases.",
            )
            .params(vec![
                series_list(),
                Param::new("intervalString", ParamType::Interval)
                    .required()
                    .suggestions(interval_suggestions()),
                Param::new("func", ParamType::AggFunc).default(Value::Str("sum".to_owned())),
                Param::new("alignToFrom", ParamType::Boolean).default(Value::Bool(false)),
            ]),
            summarize,
        ),
        Builtin::arc(
            Signature::new(
                "hitcount",
                "hitcount(seriesList, intervalString, alignToInterval=False)",
                "Transform",
                "Reads the values as rates per second and gives the total per interval, a \
                 step's hits split between the buckets it overlaps; buckets end at the end of \
                 the range. With alignToInterval the range is first started at a whole day, \
                 hour or minute (as the interval is long).",
            )
            .params(vec![
                series_list(),
                Param::new("intervalString", ParamType::Interval)
                    .required()
                    .suggestions(interval_suggestions()),
                Param::new("alignToInterval", ParamType::Boolean).default(Value::Bool(false)),
            ]),
            Hitcount,
        ),
    ]
}

/// A boolean parameter as the Python function sees it: its default when absent, Python's
/// truth of what was given (`None` is false).
fn flag(args: &Args, i: usize, default: bool) -> bool {
    match args.all(i).first() {
        None => default,
        Some(Value::None) => false,
        Some(_) => args.bool(i).unwrap_or(false),
    }
}

/// A validated interval parameter in seconds (`parseTimeOffset`'s total).
pub(crate) fn interval_of(args: &Args, i: usize, func: &str) -> Result<(String, i64)> {
    let text = args.str(i).unwrap_or_default().to_owned();
    let seconds = parse_offset(&text)
        .map_err(|e| Error::invalid(format!("{func}: invalid interval {text:?}: {}", e.0)))?;
    Ok((text, seconds))
}

/// Refuses a zero or negative interval (graphite-web divides by it or never ends).
pub(crate) fn positive(func: &str, text: &str, interval: i64) -> Result<()> {
    if interval <= 0 {
        return Err(Error::invalid(format!(
            "{func} needs an interval longer than zero, not {text:?}"
        )));
    }
    Ok(())
}

/// The aggregation function `summarize` or `smartSummarize` (`function`) buckets a series
/// with, its interval first refused if not positive: both checked for each series, as
/// graphite-web checks them (an empty list answers without either).
pub(crate) fn bucket_func(
    function: &str,
    text: &str,
    interval: i64,
    func: &str,
) -> Result<AggFunc> {
    positive(function, text, interval)?;
    AggFunc::parse(func)
        .ok_or_else(|| Error::invalid(format!("Unsupported aggregation function: {func}")))
}

/// Refuses more buckets than the answer may hold points.
pub(crate) fn bucket_limit(cx: &Context<'_>, func: &str, buckets: i64) -> Result<usize> {
    let max = cx.eval.limits.max_points;
    usize::try_from(buckets)
        .ok()
        .filter(|&n| n <= max)
        .ok_or_else(|| {
            Error::limit(format!(
                "{func} would make {buckets} buckets, more than the {max} points an answer may \
                 hold (the server's point limit)"
            ))
        })
}

struct TimeShift;

#[async_trait::async_trait]
impl Body for TimeShift {
    async fn call(&self, cx: &Context<'_>, mut args: Args) -> Result<Value> {
        let list = args.take_series(0);
        let mut shift = args.str(1).unwrap_or_default().to_owned();
        let Some(first_char) = shift.chars().next() else {
            return Err(Error::invalid("timeShift needs a non-empty time shift"));
        };
        // A shift without a sign goes back in time.
        if first_char.is_ascii_digit() {
            shift.insert(0, '-');
        }
        let delta = parse_offset(&shift).map_err(|e| {
            Error::invalid(format!("timeShift: invalid time shift {shift:?}: {}", e.0))
        })?;
        let reset_end = flag(&args, 2, true);
        let from = shift_time("timeShift", cx.from(), delta)?;
        let until = shift_time("timeShift", cx.until(), delta)?;
        let Some(first) = list.first() else {
            return Ok(Value::Series(Vec::new()));
        };
        let Some(expr) = cx.raw_args().first() else {
            return Ok(Value::Series(Vec::new()));
        };
        let mut shifted = cx.evaluate(expr, from, until).await?;
        for series in &mut shifted {
            series.tag("timeShift", shift.clone());
            series.name = format!("timeShift({}, \"{shift}\")", series.name);
            series.end = if reset_end {
                first.end
            } else {
                series.end - series.start + first.start
            };
            series.start = first.start;
        }
        Ok(Value::Series(shifted))
    }
}

fn summarize(cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let list = args.take_series(0);
    let (text, interval) = interval_of(&args, 1, "summarize")?;
    let func = args.str(2).unwrap_or("sum").to_owned();
    let align = flag(&args, 3, false);
    let mut out = Vec::with_capacity(list.len());
    for mut series in list {
        let agg = bucket_func("summarize", &text, interval, &func)?;
        let (start, end) = if align {
            (series.start, series.end)
        } else {
            (
                series.start - series.start.rem_euclid(interval),
                (series.end - series.end.rem_euclid(interval)).saturating_add(interval),
            )
        };
        let buckets = (end - start).max(0).div_euclid(interval) + 1;
        bucket_limit(cx, "summarize", buckets)?;
        let (values, aligned_end) = summarize_values(&series, agg, interval, start, end);
        let end = if align { aligned_end } else { end };
        series.tag("summarize", text.clone());
        series.tag("summarizeFunction", func.clone());
        let name = bucketed_name("summarize", &series, &[&text, &func], align);
        let mut result = copy_with(&series, name, values);
        result.start = start;
        result.end = end;
        result.step = interval;
        out.push(result);
    }
    Ok(Value::Series(out))
}

/// The name graphite-web gives `func`'s buckets of `series`: `func(name, "arg", …)`, and
/// `, true` last when they are aligned.
fn bucketed_name(func: &str, series: &Series, quoted: &[&str], align: bool) -> String {
    let quoted: String = quoted.iter().map(|arg| format!(", \"{arg}\"")).collect();
    let align = if align { ", true" } else { "" };
    format!("{func}({}{quoted}{align})", series.name)
}

/// `_summarizeValues`: for each bucket `[t, t + interval)` from `start` while `t < end`, the
/// aggregate of the values from the last one at or before `t` to the last one before
/// `t + interval` when enough values inside the bucket are non-null; and the `t` reached.
pub(crate) fn summarize_values(
    series: &Series,
    agg: AggFunc,
    interval: i64,
    start: i64,
    end: i64,
) -> (Vec<Option<f64>>, i64) {
    let values = series.points();
    let step = series.step.max(1);
    let count = if series.end > series.start {
        ((series.end - series.start) + step - 1) / step
    } else {
        0
    };
    let n = values.len().min(usize::try_from(count).unwrap_or(0));
    let timestamp = |i: usize| series.start + i as i64 * step;
    let interval_points = interval as f64 / series.step as f64;
    let mut out = Vec::new();
    let mut i = 0usize;
    let mut t = start;
    while t < end {
        let mut s = i;
        let mut non_null = 0usize;
        while i < n && timestamp(i) < t.saturating_add(interval) {
            if timestamp(i) <= t {
                s = i;
            }
            if timestamp(i) >= t && values[i].is_some() {
                non_null += 1;
            }
            i += 1;
        }
        out.push(
            if xff_of(non_null as f64, interval_points, series.x_files_factor) {
                agg.apply(&values[s..i])
            } else {
                None
            },
        );
        t = t.saturating_add(interval);
    }
    (out, t)
}

struct Hitcount;

#[async_trait::async_trait]
impl Body for Hitcount {
    async fn call(&self, cx: &Context<'_>, mut args: Args) -> Result<Value> {
        let mut list = args.take_series(0);
        let (text, interval) = interval_of(&args, 1, "hitcount")?;
        let align = flag(&args, 2, false);
        if align {
            // The range started on a whole day, hour or minute (UTC), the argument evaluated
            // again over it, each series' end put on a whole number of intervals.
            let from = cx.from();
            let unit = if interval >= 86_400 {
                86_400
            } else if interval >= 3_600 {
                3_600
            } else if interval >= 60 {
                60
            } else {
                1
            };
            let start = from - from.rem_euclid(unit);
            let Some(expr) = cx.raw_args().first() else {
                return Ok(Value::Series(Vec::new()));
            };
            list = cx.evaluate(expr, start, cx.until()).await?;
            for series in &mut list {
                positive("hitcount", &text, interval)?;
                let intervals = (series.end - series.start).div_euclid(interval);
                series.end = series.start + intervals * interval + interval;
            }
        }
        let mut out = Vec::with_capacity(list.len());
        for mut series in list {
            positive("hitcount", &text, interval)?;
            let (start, values) = hits(cx, &series, interval)?;
            series.tag("hitcount", text.clone());
            let name = bucketed_name("hitcount", &series, &[&text], align);
            let mut result = copy_with(&series, name, values);
            result.start = start;
            result.step = interval;
            out.push(result);
        }
        Ok(Value::Series(out))
    }
}

/// The buckets of `hitcount` (`interval` > 0): as many intervals as cover the series, ending
/// at its end; each value, a rate per second over its step, adds its hits to the buckets its
/// step overlaps, in proportion. The first bucket's start and the bucket totals (null for a
/// bucket no value reached).
fn hits(cx: &Context<'_>, series: &Series, interval: i64) -> Result<(i64, Vec<Option<f64>>)> {
    let span = series.end - series.start;
    let count = (span as f64 / interval as f64).ceil();
    let count = if count.is_finite() { count as i64 } else { 0 }.max(0);
    let n = bucket_limit(cx, "hitcount", count)?;
    let mut buckets: Vec<Vec<f64>> = vec![Vec::new(); n];
    let start = series.end - count * interval;
    let step = series.step;
    let out_of_range = || {
        Error::invalid(format!(
            "hitcount: {} has values past its end (graphite-web fails on it too)",
            series.name
        ))
    };
    for (i, value) in series.points().into_iter().enumerate() {
        let Some(value) = value else { continue };
        let t = series.start + i as i64 * step;
        let (start_bucket, start_mod) = (
            (t - start).div_euclid(interval),
            (t - start).rem_euclid(interval),
        );
        let t_end = t + step;
        let (mut end_bucket, mut end_mod) = (
            (t_end - start).div_euclid(interval),
            (t_end - start).rem_euclid(interval),
        );
        if end_bucket >= count {
            end_bucket = count - 1;
            end_mod = interval;
        }
        let mut add = |bucket: i64, hits: f64| -> Result<()> {
            let slot = usize::try_from(bucket)
                .ok()
                .and_then(|b| buckets.get_mut(b))
                .ok_or_else(out_of_range)?;
            slot.push(hits);
            Ok(())
        };
        if start_bucket == end_bucket {
            if start_bucket >= 0 {
                add(start_bucket, value * (end_mod - start_mod) as f64)?;
            }
        } else {
            if start_bucket >= 0 {
                add(start_bucket, value * (interval - start_mod) as f64)?;
            }
            let per_bucket = value * interval as f64;
            for j in start_bucket + 1..end_bucket {
                add(j, per_bucket)?;
            }
            if end_mod > 0 {
                add(end_bucket, value * end_mod as f64)?;
            }
        }
    }
    let values = buckets
        .iter()
        .map(|b| (!b.is_empty()).then(|| py_sum(b)))
        .collect();
    Ok((start, values))
}
