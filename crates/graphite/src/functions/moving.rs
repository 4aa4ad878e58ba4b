//! Moving-window functions (`movingAverage`, `movingSum`, `movingMin`, `movingMax`): each
//! point the aggregate of the window of points ending at it, a number of points or a span of
//! time, as graphite-web 1.1.10's `movingWindow` computes it.
//!
//! The window of the first points reaches before the range, so the series argument is
//! evaluated again over a range started that much earlier ([`Context::evaluate`], graphite-web's
//! re-evaluation with a copied request context), the series already evaluated serving only
//! to size a window of points (their largest step) and to answer nothing when there is none.
//! The result starts that much later again (the bootstrap trimmed), one value per point past
//! the first window. graphite-web's arithmetic is kept where it is odd: the window of time is
//! counted in steps of the series fetched again (which may be coarser than the range's own),
//! and Python's slices and `int()` decide odd window sizes (zero, negative, fractional).

use std::sync::Arc;

use super::agg::AggFunc;
use super::{Args, Body, Builtin, Context, Function, Param, ParamType, Signature, Value};
use crate::attime::parse_offset;
use crate::{Error, Result};

pub(crate) fn functions() -> Vec<Arc<dyn Function>> {
    [
        ("movingAverage", AggFunc::Average, "average"),
        ("movingSum", AggFunc::Sum, "sum"),
        ("movingMin", AggFunc::Min, "minimum"),
        ("movingMax", AggFunc::Max, "maximum"),
    ]
    .into_iter()
    .map(|(name, agg, what)| {
        let signature = Signature::new(
            name,
            &format!("{name}(seriesList, windowSize, xFilesFactor=None)"),
            "Calculate",
            &format!(
                "Each point becomes the {what} of the non-null values of the window ending at \
                 it: a number of points, or a span of time such as '5min'. The data before \
                 the range that the first windows need is fetched. A window whose share of \
                 non-null values is below xFilesFactor (the series' own unless given) is null."
            ),
        )
        .params(vec![
            Param::new("seriesList", ParamType::SeriesList).required(),
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
                ]),
            Param::new("xFilesFactor", ParamType::Float),
        ]);
        Builtin::arc(signature, Moving { agg, tag: name })
    })
    .collect()
}

/// One moving-window function: its aggregate and the tag (its own name) it sets.
struct Moving {
    agg: AggFunc,
    tag: &'static str,
}

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

#[async_trait::async_trait]
impl Body for Moving {
    async fn call(&self, cx: &Context<'_>, mut args: Args) -> Result<Value> {
        let list = args.take_series(0);
        if list.is_empty() {
            return Ok(Value::Series(list));
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
        let x_files_factor = args.f64(2);
        let from = shift_time(self.tag, cx.from(), preview.saturating_neg())?;
        let Some(expr) = cx.raw_args().first() else {
            return Ok(Value::Series(Vec::new()));
        };
        let previews = cx.evaluate(expr, from, cx.until()).await?;
        let mut out = Vec::with_capacity(previews.len());
        for mut series in previews {
            if series.step <= 0 {
                continue;
            }
            let (name, points) = match size {
                WindowSize::Time(seconds) => (
                    format!(
                        "{}({},\"{}\")",
                        self.tag,
                        series.name,
                        size_value.to_py_str()
                    ),
                    seconds / series.step,
                ),
                WindowSize::Points(n) => (
                    format!("{}({},{})", self.tag, series.name, size_value.to_py_str()),
                    n,
                ),
            };
            series
                .tags
                .insert(self.tag.to_owned(), size_value.to_py_str());
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
                    self.agg.apply(&non_null)
                } else {
                    None
                });
                i += 1;
            }
            let start = series.start.saturating_add(preview);
            let mut result = super::transform::copy_with(&series, name, moved);
            result.start = start;
            out.push(result);
        }
        Ok(Value::Series(out))
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
