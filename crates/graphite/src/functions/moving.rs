//! Moving-window functions (`movingAverage`, `movingSum`, `movingMin`, `movingMax`,
//! `movingMedian`, and `movingWindow` with any aggregation function): each point the
//! aggregate of the window of points ending at it, a number of points or a span of time, as
//! graphite-web 1.1.10's `movingWindow` computes it; and `exponentialMovingAverage`, which
//! reads its window the same way.
//!
//! The window of the first points reaches before the range, so the series argument is
//! evaluated again over a range started that much earlier ([`Context::evaluate`], graphite-web's
//! re-evaluation with a copied request context), the series already evaluated serving only
//! to size a window of points (their largest step) and to answer nothing when there is none.
//! The result starts that much later again (the bootstrap trimmed), one value per point past
//! the first window. graphite-web's arithmetic is kept where it is odd: the window of time is
//! counted in steps of the series fetched again (which may be coarser than the range's own),
//! `exponentialMovingAverage`'s constant counts a span of time in seconds, `movingWindow`
//! tags with Python's `capitalize()` of the function's name (`movingRangeof`), and Python's
//! slices, indexes and `int()` decide odd window sizes (zero, negative, fractional).

use std::sync::Arc;

use super::agg::AggFunc;
use super::transform::round6;
use super::{
    Args, Body, Builtin, Context, Function, Param, ParamType, Signature, Value, series_list,
};
use crate::attime::parse_offset;
use crate::pyfmt::py_sum;
use crate::{Error, Result, Series};

pub(crate) fn functions() -> Vec<Arc<dyn Function>> {
    let window_size = || {
        Param::new("windowSize", ParamType::IntOrInterval)
            .required()
            .suggestions(vec![
                Value::Int(5),
                Value::Int(7),
                Value::Int(10),
                Value::Str("1min".to_owned()),
                Value::Str("5min".to_owned()),
                Value::Str("10min".to_owned()),
                Value::Str("30min".to_owned()),
                Value::Str("1hour".to_owned()),
            ])
    };
    let x_files_factor = || Param::new("xFilesFactor", ParamType::Float);
    let mut out: Vec<Arc<dyn Function>> = [
        ("movingAverage", AggFunc::Average, "average"),
        ("movingSum", AggFunc::Sum, "sum"),
        ("movingMin", AggFunc::Min, "minimum"),
        ("movingMax", AggFunc::Max, "maximum"),
        ("movingMedian", AggFunc::Median, "median"),
    ]
    .into_iter()
    .map(|(name, agg, what)| {
        let signature = Signature::with_args(
            name,
            "seriesList, windowSize, xFilesFactor=None",
            "Calculate",
            &format!(
                "Each point becomes the {what} of the non-null values of the window ending at \
                 it: a number of points, or a span of time such as '5min'. The data before \
                 the range that the first windows need is fetched. A window whose share of \
                 non-null values is below xFilesFactor (the series' own unless given) is null."
            ),
        )
        .params(vec![series_list(), window_size(), x_files_factor()]);
        Builtin::arc(
            signature,
            Moving {
                func: Some((agg, name)),
            },
        )
    })
    .collect();
    out.push(Builtin::arc(
        Signature::new(
            "movingWindow",
            "movingWindow(seriesList, windowSize, func='average', xFilesFactor=None)",
            "Calculate",
            "Each point becomes an aggregation function (average unless given: sum, min, \
             max, median, diff, stddev, count, range, multiply, last, ...) of the non-null \
             values of the window ending at it: a number of points, or a span of time such \
             as '5min'. The data before the range that the first windows need is fetched. A \
             window whose share of non-null values is below xFilesFactor (the series' own \
             unless given) is null.",
        )
        .params(vec![
            series_list(),
            window_size(),
            Param::new("func", ParamType::AggFunc).default(Value::Str("average".to_owned())),
            x_files_factor(),
        ]),
        Moving { func: None },
    ));
    out.push(Builtin::arc(
        Signature::new(
            "exponentialMovingAverage",
            "exponentialMovingAverage(seriesList, windowSize)",
            "Calculate",
            "The exponential moving average: it starts at the average of the first window \
             (a number of points, or a span of time such as '5min', fetched before the \
             range) and each later non-null value moves it by 2 / (windowSize + 1) of the \
             difference (for a span of time, windowSize in seconds), rounded to six \
             decimals; nulls stay null.",
        )
        .params(vec![series_list(), window_size()]),
        ExponentialMovingAverage,
    ));
    out
}

/// One moving-window function: its aggregate and the tag (its own name) it sets, or, for
/// `movingWindow`, `None`: both from its `func` argument.
struct Moving {
    func: Option<(AggFunc, &'static str)>,
}

/// `exponentialMovingAverage`.
struct ExponentialMovingAverage;

/// A window size as graphite-web reads it.
enum WindowSize {
    /// A string: a span of time, in seconds (its absolute value).
    Time(i64),
    /// Anything else: `int()` of it, a number of points.
    Points(i64),
}

/// Python's `int(x)` of a non-string argument, or why it has none.
fn py_int(value: &Value) -> Result<i64> {
    let fail = || {
        Error::invalid(format!(
            "windowSize must be a number of points or a time interval, not {}",
            value.repr()
        ))
    };
    match value {
        Value::Int(i) => Ok(*i),
        Value::Bool(b) => Ok(*b as i64),
        Value::Float(f) if f.is_finite() && f.trunc().abs() < 9.2e18 => Ok(f.trunc() as i64),
        _ => Err(fail()),
    }
}

/// The earliest and latest times Python's `datetime` holds (years 1 and 9999), past which
/// graphite-web fails shifting a range.
pub(crate) const DATETIME_MIN: i64 = -62_135_596_800;
pub(crate) const DATETIME_MAX: i64 = 253_402_300_799;

/// `t + delta` where graphite-web computes it on a `datetime`; an error past its years.
pub(crate) fn shift_time(func: &str, t: i64, delta: i64) -> Result<i64> {
    t.checked_add(delta)
        .filter(|t| (DATETIME_MIN..=DATETIME_MAX).contains(t))
        .ok_or_else(|| {
            Error::invalid(format!(
                "{func} moves the time range out of the years 1 to 9999"
            ))
        })
}

/// graphite-web's `xff(nonNull, total, xFilesFactor)` with Python's division, for totals
/// that are not counts of values (a window size, an interval over a step).
pub(crate) fn xff_of(non_null: f64, total: f64, x_files_factor: f64) -> bool {
    non_null != 0.0 && total != 0.0 && non_null / total >= x_files_factor
}

/// Python's `seq[start:stop]` bounds for a sequence of `len` items.
pub(crate) fn py_slice(len: usize, start: i64, stop: i64) -> std::ops::Range<usize> {
    let len_i = len as i64;
    let clamp = |i: i64| -> usize {
        let i = if i < 0 { i + len_i } else { i };
        i.clamp(0, len_i) as usize
    };
    let (a, b) = (clamp(start), clamp(stop));
    a..b.max(a)
}

/// What every moving function reads first: the window size (as given and as read), the
/// seconds of data before the range the first window needs, and the series argument
/// evaluated again over the range started that much earlier. `None` where the series list
/// is empty (graphite-web answers an empty list before reading the window size).
struct Windowed {
    size_value: Value,
    size: WindowSize,
    preview: i64,
    previews: Vec<Series>,
}

impl Windowed {
    /// The window of `args` (a series list, then the window size) for `func`; `check` runs
    /// once the window size is read, before the earlier data is fetched (where
    /// graphite-web checks what depends on it).
    async fn read(
        cx: &Context<'_>,
        func: &str,
        args: &mut Args,
        check: impl FnOnce(&WindowSize) -> Result<()>,
    ) -> Result<Option<Windowed>> {
        let list = args.take_series(0);
        if list.is_empty() {
            return Ok(None);
        }
        let size_value = args.all(1).first().cloned().unwrap_or(Value::None);
        let size = match &size_value {
            Value::Str(s) => WindowSize::Time(
                parse_offset(s)
                    .map_err(|e| {
                        Error::invalid(format!("invalid windowSize {}: {}", size_value.repr(), e.0))
                    })?
                    .checked_abs()
                    .ok_or_else(|| Error::invalid("windowSize is too long"))?,
            ),
            other => WindowSize::Points(py_int(other)?),
        };
        let preview = match size {
            WindowSize::Time(seconds) => seconds,
            WindowSize::Points(n) => {
                let step = list.iter().map(|s| s.step).max().unwrap_or(0);
                step.checked_mul(n)
                    .ok_or_else(|| Error::invalid("windowSize is too large"))?
            }
        };
        check(&size)?;
        let from = shift_time(func, cx.from(), preview.saturating_neg())?;
        let Some(expr) = cx.raw_args().first() else {
            return Ok(None);
        };
        let previews = cx.evaluate(expr, from, cx.until()).await?;
        Ok(Some(Windowed {
            size_value,
            size,
            preview,
            previews,
        }))
    }

    /// The name `func` gives a series named `name`, and the window in points of a series of
    /// `step` seconds.
    fn name_and_points(&self, func: &str, name: &str, step: i64) -> (String, i64) {
        let text = self.size_value.to_py_str();
        match self.size {
            WindowSize::Time(seconds) => (format!("{func}({name},\"{text}\")"), seconds / step),
            WindowSize::Points(n) => (format!("{func}({name},{text})"), n),
        }
    }

    /// What every moving function answers: each earlier-started series of a positive step,
    /// tagged `func: size` and named as `func` names it, holding what `window` makes of it
    /// (given its window in points), and starting where the range starts.
    fn answer(
        mut self,
        func: &str,
        mut window: impl FnMut(&Series, i64) -> Result<Vec<Option<f64>>>,
    ) -> Result<Value> {
        let previews = std::mem::take(&mut self.previews);
        let mut out = Vec::with_capacity(previews.len());
        for mut series in previews {
            if series.step <= 0 {
                continue;
            }
            let (name, points) = self.name_and_points(func, &series.name, series.step);
            series.tag(func, self.size_value.to_py_str());
            let values = window(&series, points)?;
            let mut result = super::transform::copy_with(&series, name, values);
            result.start = series.start.saturating_add(self.preview);
            out.push(result);
        }
        Ok(Value::Series(out))
    }
}

/// Python's `str.capitalize()` of an ASCII name: `movingWindow`'s tag is `moving` and its
/// function's name so (`avg_zero` tags `movingAvg_zero`, `rangeOf` tags `movingRangeof`).
fn capitalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, c) in name.chars().enumerate() {
        if i == 0 {
            out.extend(c.to_uppercase());
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}

#[async_trait::async_trait]
impl Body for Moving {
    async fn call(&self, cx: &Context<'_>, mut args: Args) -> Result<Value> {
        // movingWindow's func (and its tag) and where xFilesFactor is.
        let chosen = match self.func {
            Some((agg, tag)) => Ok((agg, tag.to_owned(), 2)),
            None => {
                let given = args.all(2).first().cloned();
                let name = match &given {
                    None => "average".to_owned(),
                    Some(v) => v.to_py_str(),
                };
                AggFunc::parse(&name)
                    .map(|agg| (agg, format!("moving{}", capitalize(&name)), 3))
                    .ok_or_else(|| format!("Unsupported aggregation function: {name}"))
            }
        };
        // graphite-web looks the function up once the window size is read.
        let check = |_: &WindowSize| match &chosen {
            Ok(_) => Ok(()),
            Err(message) => Err(Error::invalid(message)),
        };
        let func = self.func.map_or("movingWindow", |(_, tag)| tag);
        let Some(windowed) = Windowed::read(cx, func, &mut args, check).await? else {
            return Ok(Value::Series(Vec::new()));
        };
        let (agg, tag, xff_index) = chosen.map_err(Error::invalid)?;
        let x_files_factor = args.f64(xff_index);
        windowed.answer(&tag, |series, points| {
            let xff = x_files_factor.unwrap_or(series.x_files_factor);
            // The values as iterating the series gives them (consolidated, were it so).
            let values = series.points();
            let len = values.len() as i64;
            let first = points.saturating_add(1);
            let mut moved = Vec::with_capacity(usize::try_from(len - first + 1).unwrap_or(0));
            let mut i = first;
            while i <= len {
                let window = &values[py_slice(values.len(), i - points, i)];
                let non_null: Vec<Option<f64>> =
                    window.iter().filter(|v| v.is_some()).copied().collect();
                moved.push(if xff_of(non_null.len() as f64, points as f64, xff) {
                    agg.apply(&non_null)
                } else {
                    None
                });
                i += 1;
            }
            Ok(moved)
        })
    }
}

#[async_trait::async_trait]
impl Body for ExponentialMovingAverage {
    async fn call(&self, cx: &Context<'_>, mut args: Args) -> Result<Value> {
        const FUNC: &str = "exponentialMovingAverage";
        // The smoothing constant 2 / (size + 1), the size in seconds for a span of time
        // (graphite-web's choice), in points otherwise.
        let mut constant = 0.0;
        let check = |size: &WindowSize| -> Result<()> {
            let size = match *size {
                WindowSize::Time(seconds) => seconds,
                WindowSize::Points(n) => n,
            };
            if size == -1 {
                return Err(Error::invalid(
                    "exponentialMovingAverage cannot take a window of -1 (2 / 0)",
                ));
            }
            constant = 2.0 / (size as f64 + 1.0);
            Ok(())
        };
        let Some(windowed) = Windowed::read(cx, FUNC, &mut args, check).await? else {
            return Ok(Value::Series(Vec::new()));
        };
        windowed.answer(FUNC, |series, points| {
            let values = &series.values;
            let len = values.len();
            // `safeAvg(series[:windowPoints]) or 0`.
            let first: Vec<f64> = values[py_slice(len, 0, points)]
                .iter()
                .flatten()
                .copied()
                .collect();
            let mut ema = if first.is_empty() {
                0.0
            } else {
                py_sum(&first) / first.len() as f64
            };
            let mut smoothed = vec![Some(round6(ema))];
            // `range(windowPoints, len(series))`, indexed as Python indexes (from the end
            // for a negative index, failing before the start).
            let mut i = points;
            while i < len as i64 {
                let at = if i < 0 { i + len as i64 } else { i };
                let value = usize::try_from(at)
                    .ok()
                    .and_then(|at| values.get(at))
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "exponentialMovingAverage reads before the start of {} \
                             (graphite-web fails on it too)",
                            series.name
                        ))
                    })?;
                smoothed.push(value.map(|v| {
                    ema = constant * v + (1.0 - constant) * ema;
                    round6(ema)
                }));
                i += 1;
            }
            Ok(smoothed)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_follow_python() {
        assert_eq!(py_slice(5, 1, 3), 1..3);
        assert_eq!(py_slice(5, -1, 5), 4..5);
        assert_eq!(py_slice(5, 1, -1), 1..4);
        assert_eq!(py_slice(5, 3, 1), 3..3);
        assert_eq!(py_slice(5, 7, 9), 5..5);
        assert_eq!(py_slice(5, -9, 2), 0..2);
        assert_eq!(py_slice(0, -1, 0), 0..0);
    }

    #[test]
    fn moving_window_tags_capitalize_as_python_does() {
        crate::pyfmt::assert_text_cases(
            "capitalize",
            capitalize,
            &[
                ("average", "Average"),
                ("rangeOf", "Rangeof"),
                ("avg_zero", "Avg_zero"),
                ("", ""),
            ],
        );
    }

    #[test]
    fn window_sizes_read_as_python_reads_them() {
        assert_eq!(py_int(&Value::Float(2.9)).unwrap(), 2);
        assert_eq!(py_int(&Value::Float(-2.9)).unwrap(), -2);
        assert_eq!(py_int(&Value::Bool(true)).unwrap(), 1);
        assert!(py_int(&Value::Float(f64::INFINITY)).is_err());
        assert!(py_int(&Value::None).is_err());
        assert!(shift_time("f", 0, DATETIME_MIN - 1).is_err());
        assert_eq!(shift_time("f", 100, -50).unwrap(), 50);
    }
}
