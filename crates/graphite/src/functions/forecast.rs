//! Forecasting and time-window functions as graphite-web 1.1.10 computes them: the
//! Holt-Winters family (`holtWintersForecast`, `holtWintersConfidenceBands`,
//! `holtWintersAberration`, `holtWintersConfidenceArea`), `linearRegression`, `timeStack`,
//! `timeSlice` and `smartSummarize`.
//!
//! Owns the Holt-Winters arithmetic ([`holt_winters`], graphite-web's constants and order of
//! operations, so its floats come out the same), the least-squares line, and the ranges these
//! functions evaluate their argument over again ([`Context::evaluate`]): earlier by a bootstrap
//! interval, over the source times of a regression, shifted by each multiple of a unit, or
//! started on a whole unit of time. The Holt-Winters results drop the bootstrap again and
//! keep graphite-web's naming and tagging, down to the tags it shares between the series it
//! derives from one input. Times are UTC.
//!
//! Where graphite-web fails (a season of fewer than two steps over data, bands shorter than
//! the series they are compared with, a bootstrap that starts the range after its end,
//! anything but a string given as a time, `holtWintersConfidenceArea` over other than one
//! series), this answers a 400. `linearRegression` and `timeSlice` read their times against
//! the request's `now`, where graphite-web reads them against its own clock. The series
//! options `holtWintersConfidenceArea` sets for graphite-web's images (stacked, the lower band
//! invisible) are not kept: no format this crate renders carries them. `timeStack` refuses
//! (a 400) more shifts than the series a request may fetch, before evaluating any.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::moving::{py_slice, shift_time};
use super::time::{bucket_func, bucket_limit, interval_of, summarize_values};
use super::transform::copy_with;
use super::{
    Args, Body, Builtin, Context, Function, Param, ParamType, Signature, Value, series_list,
};
use crate::attime::{civil_from_days, days_from_civil, parse_at_time, parse_offset};
use crate::{Error, Result, Series};

pub(crate) fn functions() -> Vec<Arc<dyn Function>> {
    let strs = |items: &[&str]| -> Vec<Value> {
        items.iter().map(|s| Value::Str((*s).to_owned())).collect()
    };
    let bootstrap = || {
        Param::new("bootstrapInterval", ParamType::Interval)
            .default(Value::Str("7d".to_owned()))
            .suggestions(strs(&["7d", "30d"]))
    };
    let seasonality = || {
        Param::new("seasonality", ParamType::Interval)
            .default(Value::Str("1d".to_owned()))
            .suggestions(strs(&["1d", "7d"]))
    };
    let band_params = || {
        vec![
            series_list(),
            Param::new("delta", ParamType::Integer).default(Value::Int(3)),
            bootstrap(),
            seasonality(),
        ]
    };
    let band_signature = |name: &str, description: &str| {
        Signature::with_args(
            name,
            "seriesList, delta=3, bootstrapInterval='7d', seasonality='1d'",
            "Calculate",
            description,
        )
        .params(band_params())
    };
    let mut align_to = Param::new("alignTo", ParamType::String);
    align_to.options = vec![Value::None, Value::Bool(true), Value::Bool(false)];
    align_to.options.extend(strs(&[
        "years", "months", "weeks", "days", "hours", "minutes", "seconds",
    ]));
    vec![
        Builtin::arc(
            Signature::new(
                "holtWintersForecast",
                "holtWintersForecast(seriesList, bootstrapInterval='7d', seasonality='1d')",
                "Calculate",
                "The value a Holt-Winters model (level, trend and a season of `seasonality`) \
                 predicts for each point, the model trained first on the `bootstrapInterval` \
                 of data before the range, which is fetched for it.",
            )
            .params(vec![series_list(), bootstrap(), seasonality()]),
            HoltWinters(Kind::Forecast),
        ),
        Builtin::arc(
            band_signature(
                "holtWintersConfidenceBands",
                "Two series per input, a lower and an upper band: the Holt-Winters forecast \
                 (as holtWintersForecast makes it) minus and plus `delta` times the \
                 forecast's deviation.",
            ),
            HoltWinters(Kind::Bands),
        ),
        Builtin::arc(
            band_signature(
                "holtWintersAberration",
                "How far each value lies outside the Holt-Winters confidence bands (as \
                 holtWintersConfidenceBands makes them): above the upper band positive, below \
                 the lower one negative, 0 inside them or for a missing value.",
            ),
            HoltWinters(Kind::Aberration),
        ),
        Builtin::arc(
            band_signature(
                "holtWintersConfidenceArea",
                "The Holt-Winters confidence bands of one series (as \
                 holtWintersConfidenceBands makes them), both named for the area between \
                 them, which graphite-web's images fill.",
            ),
            HoltWinters(Kind::Area),
        ),
        Builtin::arc(
            Signature::new(
                "linearRegression",
                "linearRegression(seriesList, startSourceAt=None, endSourceAt=None)",
                "Calculate",
                "The least-squares line through each series' values between startSourceAt \
                 and endSourceAt (the request's range unless given; times in the form of \
                 `from`), drawn over the range. A series with fewer than two values there \
                 is left out.",
            )
            .params(vec![
                series_list(),
                Param::new("startSourceAt", ParamType::Date),
                Param::new("endSourceAt", ParamType::Date),
            ]),
            LinearRegression,
        ),
        Builtin::arc(
            Signature::new(
                "timeStack",
                "timeStack(seriesList, timeShiftUnit='1d', timeShiftStart=0, \
                 timeShiftEnd=7)",
                "Transform",
                "The series as they were timeShiftStart, timeShiftStart + 1, ... (up to \
                 but not including timeShiftEnd) times timeShiftUnit earlier (later for a \
                 unit with '+'), each drawn over the range, as timeShift draws one.",
            )
            .params(vec![
                series_list(),
                Param::new("timeShiftUnit", ParamType::Interval)
                    .default(Value::Str("1d".to_owned()))
                    .suggestions(strs(&["1h", "6h", "12h", "1d", "2d", "7d", "14d", "30d"])),
                Param::new("timeShiftStart", ParamType::Integer).default(Value::Int(0)),
                Param::new("timeShiftEnd", ParamType::Integer).default(Value::Int(7)),
            ]),
            TimeStack,
        ),
        Builtin::arc(
            Signature::new(
                "timeSlice",
                "timeSlice(seriesList, startSliceAt, endSliceAt='now')",
                "Transform",
                "Keeps the values from startSliceAt to endSliceAt (both included; times in \
                 the form of `from`) and makes the others null.",
            )
            .params(vec![
                series_list(),
                Param::new("startSliceAt", ParamType::Date).required(),
                Param::new("endSliceAt", ParamType::Date).default(Value::Str("now".to_owned())),
            ]),
            time_slice,
        ),
        Builtin::arc(
            Signature::new(
                "smartSummarize",
                "smartSummarize(seriesList, intervalString, func='sum', alignTo=None)",
                "Transform",
                "Buckets the values into intervals from the start of the series and \
                 aggregates each with func, as summarize does. With alignTo (years, months, \
                 weeks, days, hours, minutes or seconds) the range first starts at the \
                 beginning of that unit and the data is fetched again; true or false there \
                 are accepted and ignored.",
            )
            .params(vec![
                series_list(),
                Param::new("intervalString", ParamType::Interval)
                    .required()
                    .suggestions(strs(&["10min", "1h", "1d"])),
                Param::new("func", ParamType::AggFunc).default(Value::Str("sum".to_owned())),
                align_to,
            ]),
            SmartSummarize,
        ),
    ]
}

/// graphite-web's smoothing constants: level and season (`alpha`, `gamma`) and trend (`beta`).
const ALPHA: f64 = 0.1;
const GAMMA: f64 = 0.1;
const BETA: f64 = 0.0035;

/// What a Holt-Winters analysis gives per point: the prediction made for it (null where
/// the value before it was) and the deviation (0 where the value is missing).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Analysis {
    pub(crate) predictions: Vec<Option<f64>>,
    pub(crate) deviations: Vec<f64>,
}

/// graphite-web's `holtWintersAnalysis` of `values` with a season of `season` points: the
/// level, trend and seasonal terms updated at each non-null value, in its order of
/// operations. A missing value resets the next prediction and the level is restarted from
/// the next value. `None` when graphite-web fails: a season shorter than two points
/// (it reads a seasonal term not made yet) over any non-null value.
pub(crate) fn holt_winters(values: &[Option<f64>], season: i64) -> Option<Analysis> {
    if season < 2 && values.iter().any(Option::is_some) {
        return None;
    }
    let n = values.len();
    let mut intercepts: Vec<Option<f64>> = Vec::with_capacity(n);
    let mut slopes: Vec<f64> = Vec::with_capacity(n);
    let mut seasonals: Vec<f64> = Vec::with_capacity(n);
    let mut predictions: Vec<Option<f64>> = Vec::with_capacity(n);
    let mut deviations: Vec<f64> = Vec::with_capacity(n);
    // The term of one season before point `i` (0 before the first season).
    let back = |list: &[f64], i: usize| -> f64 {
        match i.checked_sub(season as usize) {
            Some(j) => list[j],
            None => 0.0,
        }
    };
    let mut next_prediction: Option<f64> = None;
    for (i, value) in values.iter().enumerate() {
        let Some(actual) = *value else {
            intercepts.push(None);
            slopes.push(0.0);
            seasonals.push(0.0);
            predictions.push(next_prediction);
            deviations.push(0.0);
            next_prediction = None;
            continue;
        };
        let (last_intercept, last_slope, prediction) = if i == 0 {
            (actual, 0.0, Some(actual))
        } else {
            (
                intercepts[i - 1].unwrap_or(actual),
                slopes[i - 1],
                next_prediction,
            )
        };
        let last_seasonal = back(&seasonals, i);
        let next_last_seasonal = back(&seasonals, i + 1);
        let last_deviation = back(&deviations, i);
        let intercept =
            ALPHA * (actual - last_seasonal) + (1.0 - ALPHA) * (last_intercept + last_slope);
        let slope = BETA * (intercept - last_intercept) + (1.0 - BETA) * last_slope;
        let seasonal = GAMMA * (actual - intercept) + (1.0 - GAMMA) * last_seasonal;
        next_prediction = Some(intercept + slope + next_last_seasonal);
        let deviation =
            GAMMA * (actual - prediction.unwrap_or(0.0)).abs() + (1.0 - GAMMA) * last_deviation;
        intercepts.push(Some(intercept));
        slopes.push(slope);
        seasonals.push(seasonal);
        predictions.push(prediction);
        deviations.push(deviation);
    }
    Some(Analysis {
        predictions,
        deviations,
    })
}

/// `TimeSeries(name, start, end, step, values, tags=tags, xFilesFactor=...)`: a new series
/// (average consolidation, one value per point) with the tags given.
fn made(
    name: String,
    (start, end, step): (i64, i64, i64),
    values: Vec<Option<f64>>,
    tags: BTreeMap<String, String>,
    x_files_factor: f64,
) -> Series {
    let mut series = Series::new(&name, start, end, step, values);
    series.tags = tags;
    series.x_files_factor = x_files_factor;
    series
}

/// The seconds of an interval parameter as `parseTimeOffset` reads it: its default when
/// absent, 0 for an explicit `None`.
fn offset_param(args: &Args, i: usize, name: &str, default: &str) -> Result<i64> {
    let text = match args.all(i).first() {
        None => default,
        Some(Value::None) => "",
        Some(Value::Str(s)) => s,
        Some(other) => {
            return Err(Error::invalid(format!(
                "{name} must be an interval string, not {}",
                other.repr()
            )));
        }
    };
    parse_offset(text).map_err(|e| Error::invalid(format!("invalid {name} {text:?}: {}", e.0)))
}

/// Refuses a range that starts after it ends (graphite-web fails fetching it).
fn ordered(func: &str, from: i64, until: i64) -> Result<()> {
    if from > until {
        return Err(Error::invalid(format!(
            "{func} would read a range starting after its end ({from} > {until})"
        )));
    }
    Ok(())
}

/// Which of the Holt-Winters functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Forecast,
    Bands,
    Aberration,
    Area,
}

struct HoltWinters(Kind);

/// The bands of one input series: lower, then upper.
type Bands = (Series, Series);

/// The tag graphite-web sets to 1 (kept as its text, as its `Tags` keep it).
fn tag(tags: &mut BTreeMap<String, String>, name: &str) {
    tags.insert(name.to_owned(), "1".to_owned());
}

impl HoltWinters {
    /// The argument evaluated again from `bootstrap` seconds before the range, each series
    /// analysed; the analyses with the series, the bootstrap in seconds.
    async fn previews(
        &self,
        cx: &Context<'_>,
        args: &Args,
        first: usize,
        func: &str,
    ) -> Result<(i64, Vec<(Series, Analysis)>)> {
        let bootstrap = offset_param(args, first, "bootstrapInterval", "7d")?;
        let seasonality = offset_param(args, first + 1, "seasonality", "1d")?;
        let from = shift_time(func, cx.from(), bootstrap.saturating_neg())?;
        let Some(expr) = cx.raw_args().first() else {
            return Ok((bootstrap, Vec::new()));
        };
        ordered(func, from, cx.until())?;
        let previews = cx.evaluate(expr, from, cx.until()).await?;
        let mut out = Vec::with_capacity(previews.len());
        for series in previews {
            if series.step <= 0 {
                return Err(Error::invalid(format!(
                    "{func}: {} has no step",
                    series.name
                )));
            }
            let season = seasonality.div_euclid(series.step);
            let analysis = holt_winters(&series.points(), season).ok_or_else(|| {
                Error::invalid(format!(
                    "{func} needs a season of at least two steps of {} ({} s each), not {} s",
                    series.name, series.step, seasonality
                ))
            })?;
            out.push((series, analysis));
        }
        Ok((bootstrap, out))
    }

    /// `holtWintersConfidenceBands`: per series, the lower and upper band, the bootstrap
    /// dropped.
    async fn bands(&self, cx: &Context<'_>, args: &Args, func: &str) -> Result<Vec<Bands>> {
        // An explicit `None` fails in graphite-web only where it multiplies a deviation.
        let delta = match args.all(1).first() {
            None => Some(3.0),
            Some(_) => args.i64(1).map(|d| d as f64),
        };
        let (bootstrap, previews) = self.previews(cx, args, 2, func).await?;
        let mut out = Vec::with_capacity(previews.len());
        for (series, analysis) in previews {
            let (axis, keep) = trimmed(&series, bootstrap, analysis.predictions.len());
            let forecast = &analysis.predictions[keep.clone()];
            let deviation = &analysis.deviations[keep];
            let mut lower = Vec::with_capacity(forecast.len());
            let mut upper = Vec::with_capacity(forecast.len());
            for (f, d) in forecast.iter().zip(deviation) {
                let Some(f) = f else {
                    lower.push(None);
                    upper.push(None);
                    continue;
                };
                let delta = delta
                    .ok_or_else(|| Error::invalid(format!("{func} needs a number for delta")))?;
                let scaled = delta * d;
                lower.push(Some(f - scaled));
                upper.push(Some(f + scaled));
            }
            let mut tags = series.tags.clone();
            for name in [
                "holtWintersForecast",
                "holtWintersDeviation",
                "holtWintersConfidenceUpper",
                "holtWintersConfidenceLower",
            ] {
                tag(&mut tags, name);
            }
            let xff = series.x_files_factor;
            let mut lower = made(
                format!("holtWintersConfidenceLower({})", series.name),
                axis,
                lower,
                tags.clone(),
                xff,
            );
            let mut upper = made(
                format!("holtWintersConfidenceUpper({})", series.name),
                axis,
                upper,
                tags,
                xff,
            );
            lower.path_expression = series.path_expression.clone();
            upper.path_expression = series.path_expression;
            out.push((lower, upper));
        }
        Ok(out)
    }
}

/// The time axis and the points left of an analysed `series` of `len` points once the
/// bootstrap (`bootstrap` seconds, so many whole steps) is dropped: graphite-web's
/// `start + bootstrap` and `values[bootstrap // step:]`.
fn trimmed(
    series: &Series,
    bootstrap: i64,
    len: usize,
) -> ((i64, i64, i64), std::ops::Range<usize>) {
    let window = bootstrap.div_euclid(series.step);
    (
        (
            series.start.saturating_add(bootstrap),
            series.end,
            series.step,
        ),
        py_slice(len, window, len as i64),
    )
}

#[async_trait::async_trait]
impl Body for HoltWinters {
    async fn call(&self, cx: &Context<'_>, mut args: Args) -> Result<Value> {
        let list = args.take_series(0);
        let out = match self.0 {
            Kind::Forecast => {
                let func = "holtWintersForecast";
                let (bootstrap, previews) = self.previews(cx, &args, 1, func).await?;
                previews
                    .into_iter()
                    .map(|(series, analysis)| {
                        let (axis, keep) = trimmed(&series, bootstrap, analysis.predictions.len());
                        let mut tags = series.tags.clone();
                        tag(&mut tags, "holtWintersForecast");
                        tag(&mut tags, "holtWintersDeviation");
                        made(
                            format!("holtWintersForecast({})", series.name),
                            axis,
                            analysis.predictions[keep].to_vec(),
                            tags,
                            series.x_files_factor,
                        )
                    })
                    .collect()
            }
            Kind::Bands => self
                .bands(cx, &args, "holtWintersConfidenceBands")
                .await?
                .into_iter()
                .flat_map(|(lower, upper)| [lower, upper])
                .collect(),
            Kind::Aberration => {
                let bands = self.bands(cx, &args, "holtWintersAberration").await?;
                list.into_iter()
                    .map(|series| aberration(series, &bands))
                    .collect::<Result<Vec<Series>>>()?
            }
            Kind::Area => {
                let mut bands = self.bands(cx, &args, "holtWintersConfidenceArea").await?;
                if bands.len() != 1 {
                    return Err(Error::invalid(format!(
                        "holtWintersConfidenceArea draws the area of exactly one series, not \
                         {}",
                        bands.len()
                    )));
                }
                let (mut lower, mut upper) = bands.remove(0);
                let name = format!("areaBetween({})", upper.path_expression)
                    .replace("areaBetween", "holtWintersConfidenceArea");
                upper.tags.remove("areaBetween");
                tag(&mut upper.tags, "holtWintersConfidenceArea");
                lower.tags = upper.tags.clone();
                for series in [&mut lower, &mut upper] {
                    series.name = name.clone();
                    series.path_expression = name.clone();
                }
                vec![lower, upper]
            }
        };
        Ok(Value::Series(out))
    }
}

/// `holtWintersAberration` of one series of the range against the bands made for the series
/// of its name (graphite-web's last of that name): point by point, what lies above the upper
/// band or below the lower one. An error where graphite-web fails: no bands of that name,
/// or fewer band points than values.
fn aberration(mut series: Series, bands: &[Bands]) -> Result<Series> {
    let lower_name = format!("holtWintersConfidenceLower({})", series.name);
    let upper_name = format!("holtWintersConfidenceUpper({})", series.name);
    let find = |name: &str| {
        bands
            .iter()
            .flat_map(|(l, u)| [l, u])
            .rfind(|s| s.name == name)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "holtWintersAberration found no {name} among the bands of the bootstrap"
                ))
            })
    };
    let (lower, upper) = (find(&lower_name)?, find(&upper_name)?);
    let short = || {
        Error::invalid(format!(
            "holtWintersAberration: the bands of {} have fewer points ({}, of {} s) than the \
             series ({}, of {} s)",
            series.name,
            upper.values.len(),
            upper.step,
            series.values.len(),
            series.step
        ))
    };
    let mut values = Vec::with_capacity(series.values.len());
    for (i, value) in series.points().into_iter().enumerate() {
        let Some(v) = value else {
            values.push(Some(0.0));
            continue;
        };
        let up = *upper.values.get(i).ok_or_else(short)?;
        if let Some(up) = up.filter(|&up| v > up) {
            values.push(Some(v - up));
            continue;
        }
        let low = *lower.values.get(i).ok_or_else(short)?;
        values.push(Some(match low {
            Some(low) if v < low => v - low,
            _ => 0.0,
        }));
    }
    tag(&mut series.tags, "holtWintersAberration");
    let name = format!("holtWintersAberration({})", series.name);
    let axis = (series.start, series.end, series.step);
    let xff = series.x_files_factor;
    Ok(made(name, axis, values, series.tags, xff))
}

/// A `date` parameter read as graphite-web's `parseATTime` reads it (against the request's
/// `now`); `None` when absent or given as `None`.
fn time_param(cx: &Context<'_>, args: &Args, i: usize, name: &str) -> Result<Option<i64>> {
    match args.all(i).first() {
        None | Some(Value::None) => Ok(None),
        Some(Value::Str(s)) => parse_at_time(s, cx.now())
            .map(Some)
            .map_err(|e| Error::invalid(format!("invalid {name} {s:?}: {}", e.0))),
        Some(other) => Err(Error::invalid(format!(
            "{name} must be a time string, not {}",
            other.repr()
        ))),
    }
}

/// `_linearRegressionAnalysis`: the slope per second and the offset at time 0 of the
/// least-squares line through the non-null values of `series` (indices as x); `None` with
/// fewer than two values.
pub(crate) fn regression(series: &Series) -> Option<(f64, f64)> {
    let values = series.points();
    let (mut n, mut sum_i, mut sum_ii) = (0i128, 0i128, 0i128);
    let (mut sum_v, mut sum_iv) = (0.0f64, 0.0f64);
    for (i, v) in values.iter().enumerate() {
        let Some(v) = *v else { continue };
        let i = i as i128;
        n += 1;
        sum_i += i;
        sum_ii += i * i;
        sum_v += v;
        sum_iv += i as f64 * v;
    }
    let denominator = (n * sum_ii - sum_i * sum_i) as f64;
    if denominator == 0.0 {
        return None;
    }
    let (n, sum_i, sum_ii) = (n as f64, sum_i as f64, sum_ii as f64);
    let factor = (n * sum_iv - sum_i * sum_v) / denominator / series.step as f64;
    let offset = (sum_ii * sum_v - sum_iv * sum_i) / denominator - factor * series.start as f64;
    Some((factor, offset))
}

struct LinearRegression;

#[async_trait::async_trait]
impl Body for LinearRegression {
    async fn call(&self, cx: &Context<'_>, mut args: Args) -> Result<Value> {
        let list = args.take_series(0);
        let start = time_param(cx, &args, 1, "startSourceAt")?.unwrap_or(cx.from());
        let end = time_param(cx, &args, 2, "endSourceAt")?.unwrap_or(cx.until());
        let Some(expr) = cx.raw_args().first() else {
            return Ok(Value::Series(Vec::new()));
        };
        ordered("linearRegression", start, end)?;
        let sources = cx.evaluate(expr, start, end).await?;
        let mut out = Vec::new();
        // Paired by position, as graphite-web's zip pairs them.
        for (source, mut series) in sources.iter().zip(list) {
            series.tag("linearRegressions", format!("{start}, {end}"));
            let Some((factor, offset)) = regression(source) else {
                continue;
            };
            let values = (0..series.values.len() as i64)
                .map(|i| Some(offset + (series.start + i * series.step) as f64 * factor))
                .collect();
            let name = format!("linearRegression({}, {start}, {end})", series.name);
            let axis = (series.start, series.end, series.step);
            let xff = series.x_files_factor;
            out.push(made(name, axis, values, series.tags, xff));
        }
        Ok(Value::Series(out))
    }
}

struct TimeStack;

#[async_trait::async_trait]
impl Body for TimeStack {
    async fn call(&self, cx: &Context<'_>, mut args: Args) -> Result<Value> {
        let list = args.take_series(0);
        let mut unit = match args.all(1).first() {
            None => "1d".to_owned(),
            Some(Value::Str(s)) => s.clone(),
            Some(other) => {
                return Err(Error::invalid(format!(
                    "timeShiftUnit must be an interval string, not {}",
                    other.repr()
                )));
            }
        };
        // A unit without a sign goes back in time.
        match unit.chars().next() {
            None => return Err(Error::invalid("timeStack needs a non-empty timeShiftUnit")),
            Some(c) if c.is_ascii_digit() => unit.insert(0, '-'),
            Some(_) => {}
        }
        let delta = parse_offset(&unit).map_err(|e| {
            Error::invalid(format!(
                "timeStack: invalid timeShiftUnit {unit:?}: {}",
                e.0
            ))
        })?;
        let Some(first) = list.first() else {
            return Ok(Value::Series(Vec::new()));
        };
        let bound = |i: usize, name: &str, default: i64| match args.all(i).first() {
            None => Ok(default),
            Some(_) => args
                .i64(i)
                .ok_or_else(|| Error::invalid(format!("timeStack needs an integer {name}"))),
        };
        let shift_start = bound(2, "timeShiftStart", 0)?;
        let shift_end = bound(3, "timeShiftEnd", 7)?;
        let shifts = shift_end.saturating_sub(shift_start).max(0);
        let max = cx.eval.limits.max_series;
        if usize::try_from(shifts).map_or(true, |n| n > max) {
            return Err(Error::limit(format!(
                "timeStack would evaluate its series {shifts} times, more than the {max} \
                 series a request may fetch (the server's series limit)"
            )));
        }
        let Some(expr) = cx.raw_args().first() else {
            return Ok(Value::Series(Vec::new()));
        };
        let mut out = Vec::new();
        for shift in shift_start..shift_end {
            let inner = delta
                .checked_mul(shift)
                .ok_or_else(|| Error::invalid("timeStack shifts the range too far"))?;
            let from = shift_time("timeStack", cx.from(), inner)?;
            let until = shift_time("timeStack", cx.until(), inner)?;
            for mut series in cx.evaluate(expr, from, until).await? {
                series.tag("timeShiftUnit", unit.clone());
                series.tag("timeShift", shift.to_string());
                series.name = format!("timeShift({}, {unit}, {shift})", series.name);
                series.path_expression = series.name.clone();
                series.start = first.start;
                series.end = first.end;
                out.push(series);
            }
        }
        Ok(Value::Series(out))
    }
}

/// `timeSlice`: values outside `[start, end]` nulled, the time of each counted from the
/// range's start (not the series'), as graphite-web counts it. The series keeps its path
/// expression.
fn time_slice(cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let mut list = args.take_series(0);
    let read = |i: usize, name: &str, default: &str| -> Result<i64> {
        let text = match args.all(i).first() {
            None => default,
            Some(Value::Str(s)) => s.as_str(),
            Some(other) => {
                return Err(Error::invalid(format!(
                    "{name} must be a time string, not {}",
                    other.repr()
                )));
            }
        };
        parse_at_time(text, cx.now())
            .map_err(|e| Error::invalid(format!("invalid {name} {text:?}: {}", e.0)))
    };
    let start = read(1, "startSliceAt", "")?;
    let end = read(2, "endSliceAt", "now")?;
    for series in &mut list {
        series.tag("timeSliceStart", start.to_string());
        series.tag("timeSliceEnd", end.to_string());
        series.name = format!("timeSlice({}, {start}, {end})", series.name);
        let mut t = cx.from();
        for value in &mut series.values {
            if t < start || t > end {
                *value = None;
            }
            t = t.saturating_add(series.step);
        }
    }
    Ok(Value::Series(list))
}

/// A time unit `smartSummarize` may align its range to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Years,
    Months,
    Weeks,
    Days,
    Hours,
    Minutes,
    Seconds,
}

impl Unit {
    /// `getUnitString`'s reading of an option (by its prefix).
    fn parse(text: &str) -> Option<Unit> {
        const PREFIXES: [(&str, Unit); 7] = [
            ("s", Unit::Seconds),
            ("min", Unit::Minutes),
            ("h", Unit::Hours),
            ("d", Unit::Days),
            ("w", Unit::Weeks),
            ("mon", Unit::Months),
            ("y", Unit::Years),
        ];
        PREFIXES
            .iter()
            .find(|(prefix, _)| text.starts_with(prefix))
            .map(|&(_, unit)| unit)
    }

    /// The start of the unit `t` (epoch seconds, UTC) falls in; weeks start on Monday.
    fn floor(self, t: i64) -> i64 {
        let days = t.div_euclid(86_400);
        let (year, month, _) = civil_from_days(days);
        match self {
            Unit::Years => days_from_civil(year, 1, 1) * 86_400,
            Unit::Months => days_from_civil(year, month, 1) * 86_400,
            // 1970-01-01 was a Thursday: ISO weekday 4, Monday 1.
            Unit::Weeks => (days - (days + 3).rem_euclid(7)) * 86_400,
            Unit::Days => days * 86_400,
            Unit::Hours => t - t.rem_euclid(3_600),
            Unit::Minutes => t - t.rem_euclid(60),
            Unit::Seconds => t,
        }
    }
}

struct SmartSummarize;

#[async_trait::async_trait]
impl Body for SmartSummarize {
    async fn call(&self, cx: &Context<'_>, mut args: Args) -> Result<Value> {
        let mut list = args.take_series(0);
        let align =
            match args.all(3).first() {
                None | Some(Value::None) | Some(Value::Bool(_)) => None,
                Some(Value::Str(s)) => Some(Unit::parse(s).ok_or_else(|| {
                    Error::invalid(format!("smartSummarize cannot align to {s:?}"))
                })?),
                Some(other) => {
                    return Err(Error::invalid(format!(
                        "smartSummarize aligns to a unit of time, not {}",
                        other.repr()
                    )));
                }
            };
        if let Some(unit) = align {
            // The argument fetched again over the range started at the unit's start.
            if let Some(expr) = cx.raw_args().first() {
                list = cx.evaluate(expr, unit.floor(cx.from()), cx.until()).await?;
            }
        }
        let (text, interval) = interval_of(&args, 1, "smartSummarize")?;
        let func = args.str(2).unwrap_or("sum").to_owned();
        let mut out = Vec::with_capacity(list.len());
        for mut series in list {
            let agg = bucket_func("smartSummarize", &text, interval, &func)?;
            let span = (series.end - series.start).max(0);
            bucket_limit(cx, "smartSummarize", span.div_euclid(interval) + 1)?;
            let (values, aligned_end) =
                summarize_values(&series, agg, interval, series.start, series.end);
            series.tag("smartSummarize", text.clone());
            series.tag("smartSummarizeFunction", func.clone());
            let name = format!("smartSummarize({}, \"{text}\", \"{func}\")", series.name);
            let mut result = copy_with(&series, name, values);
            result.end = aligned_end;
            result.step = interval;
            out.push(result);
        }
        Ok(Value::Series(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_season_shorter_than_two_points_fails_only_over_data() {
        assert!(holt_winters(&[Some(1.0), Some(2.0)], 1).is_none());
        assert!(holt_winters(&[Some(1.0)], 0).is_none());
        let empty = holt_winters(&[None, None], 0).unwrap();
        assert_eq!(empty.predictions, vec![None, None]);
        assert_eq!(empty.deviations, vec![0.0, 0.0]);
    }

    #[test]
    fn the_first_value_is_its_own_prediction_and_a_gap_resets_the_next() {
        let a = holt_winters(&[Some(10.0), Some(12.0), None, Some(11.0)], 2).unwrap();
        assert_eq!(a.predictions[0], Some(10.0));
        // intercept 10, slope 0, no season yet: the next prediction is 10.
        assert_eq!(a.predictions[1], Some(10.0));
        assert!(a.predictions[2].is_some());
        assert_eq!(a.predictions[3], None);
        assert_eq!(a.deviations[0], 0.0);
        assert_eq!(a.deviations[2], 0.0);
    }

    #[test]
    fn regression_needs_two_values_and_fits_a_line_exactly() {
        let line = Series::new(
            "x",
            100,
            140,
            10,
            vec![Some(1.0), None, Some(5.0), Some(7.0)],
        );
        let (factor, offset) = regression(&line).unwrap();
        assert!((factor - 0.2).abs() < 1e-12);
        assert!((offset + 100.0 * 0.2 - 1.0).abs() < 1e-9);
        let single = Series::new("x", 100, 140, 10, vec![None, Some(3.0), None]);
        assert!(regression(&single).is_none());
    }

    #[test]
    fn units_floor_to_their_start() {
        // 2023-11-14 22:13:20 UTC, a Tuesday.
        let t = 1_700_000_000;
        assert_eq!(Unit::Minutes.floor(t), 1_699_999_980);
        assert_eq!(Unit::Hours.floor(t), 1_699_999_200);
        assert_eq!(Unit::Days.floor(t), 1_699_920_000);
        assert_eq!(Unit::Weeks.floor(t), 1_699_833_600);
        assert_eq!(Unit::Months.floor(t), 1_698_796_800);
        assert_eq!(Unit::Years.floor(t), 1_672_531_200);
        assert_eq!(Unit::parse("months"), Some(Unit::Months));
        assert_eq!(Unit::parse("minutes"), Some(Unit::Minutes));
        assert_eq!(Unit::parse("fortnight"), None);
    }
}
