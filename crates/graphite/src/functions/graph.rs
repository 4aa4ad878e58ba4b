//! Functions of graphite-web's graph styling and legends, and the generated lines:
//! `color`, `alpha`, `lineWidth`, `dashed`, `secondYAxis`, `drawAsInfinite`,
//! `areaBetween` (styles a JSON answer does not carry: some rename and tag their series),
//! `cactiStyle` and `legendValue` (legends written into the names), `identity`,
//! `timeFunction` (`time`), `threshold`, `verticalLine` and `aggregateLine`.
//!
//! Owns those functions' naming and the unit prefixes of graphite-web's legends
//! (`format_units`); the aggregations are `agg.rs`'s.

use std::sync::Arc;

use super::agg::AggFunc;
use super::special::{constant_line, constant_series};
use super::{
    Alias, Args, Builtin, Context, Function, Param, ParamType, Signature, Value, series_list,
};
use crate::pyfmt::{format_g, repr_f64};
use crate::{Error, Result, Series};

pub(crate) fn functions() -> Vec<Arc<dyn Function>> {
    let time = Builtin::arc(
        Signature::new(
            "timeFunction",
            "timeFunction(name, step=60)",
            "Transform",
            "A series named `name` whose value at each step is its own timestamp, one point \
             every `step` seconds across the time range.",
        )
        .params(vec![
            Param::new("name", ParamType::String).required(),
            Param::new("step", ParamType::Integer).default(Value::Int(60)),
        ]),
        time_function,
    );
    vec![
        Builtin::arc(
            Signature::new(
                "color",
                "color(seriesList, theColor)",
                "Graph",
                "Draws the series in a colour (a name or hex RGB[A]); a JSON answer carries \
                 no colour, so it returns them unchanged.",
            )
            .params(vec![
                series_list(),
                Param::new("theColor", ParamType::String).required(),
            ]),
            unchanged,
        ),
        Builtin::arc(
            Signature::new(
                "alpha",
                "alpha(seriesList, alpha)",
                "Graph",
                "Draws the series with a transparency between 0 and 1; unchanged in a JSON \
                 answer.",
            )
            .params(vec![
                series_list(),
                Param::new("alpha", ParamType::Float).required(),
            ]),
            unchanged,
        ),
        Builtin::arc(
            Signature::new(
                "lineWidth",
                "lineWidth(seriesList, width)",
                "Graph",
                "Draws the series with lines of a given width; unchanged in a JSON answer.",
            )
            .params(vec![
                series_list(),
                Param::new("width", ParamType::Float).required(),
            ]),
            unchanged,
        ),
        Builtin::arc(
            Signature::new(
                "dashed",
                "dashed(seriesList, dashLength=5)",
                "Graph",
                "Draws the series as dashed lines of segments `dashLength` long; renames each \
                 `dashed(name, length)` and tags it with the length.",
            )
            .params(vec![
                series_list(),
                Param::new("dashLength", ParamType::Integer).default(Value::Int(5)),
            ]),
            dashed,
        ),
        Builtin::arc(
            Signature::new(
                "secondYAxis",
                "secondYAxis(seriesList)",
                "Graph",
                "Draws the series against the right-hand Y axis; renames each \
                 `secondYAxis(name)`.",
            )
            .params(vec![series_list()]),
            |_: &Context<'_>, args: Args| Ok(wrapped(args, "secondYAxis")),
        ),
        Builtin::arc(
            Signature::new(
                "drawAsInfinite",
                "drawAsInfinite(seriesList)",
                "Graph",
                "Draws a vertical line wherever a value is above zero (on/off metrics such as \
                 exit codes); renames each `drawAsInfinite(name)`.",
            )
            .params(vec![series_list()]),
            |_: &Context<'_>, args: Args| Ok(wrapped(args, "drawAsInfinite")),
        ),
        Builtin::arc(
            Signature::new(
                "areaBetween",
                "areaBetween(seriesList)",
                "Graph",
                "Shades the band between exactly two series (a lower and an upper bound); both \
                 are named `areaBetween(<the second's path expression>)` and share its tags.",
            )
            .params(vec![series_list()]),
            area_between,
        ),
        Builtin::arc(
            Signature::new(
                "cactiStyle",
                "cactiStyle(seriesList, system=None, units=None)",
                "Special",
                "Writes each series' last, largest and smallest values into its name in \
                 aligned columns, optionally with SI or binary unit prefixes and a unit.",
            )
            .params(vec![
                series_list(),
                Param::new("system", ParamType::String).options(&["si", "binary"]),
                Param::new("units", ParamType::String),
            ]),
            cacti_style,
        ),
        Builtin::arc(
            Signature::new(
                "legendValue",
                "legendValue(seriesList, *valueTypes)",
                "Alias",
                "Appends aggregates of each series (`avg`, `max`, `last`...) to its name; a \
                 last argument `si` or `binary` writes them with unit prefixes in columns.",
            )
            .params(vec![series_list(), legend_types()]),
            legend_value,
        ),
        Builtin::arc(
            Signature::new(
                "identity",
                "identity(name)",
                "Calculate",
                "A series named `name` whose value at each minute is its own timestamp.",
            )
            .params(vec![Param::new("name", ParamType::String).required()]),
            identity,
        ),
        Alias::arc("time", &time),
        time,
        Builtin::arc(
            Signature::new(
                "threshold",
                "threshold(value, label=None, color=None)",
                "Graph",
                "A constant line at `value` (as `constantLine`), named `label` when one is \
                 given.",
            )
            .params(vec![
                Param::new("value", ParamType::Float).required(),
                Param::new("label", ParamType::String),
                Param::new("color", ParamType::String),
            ]),
            threshold,
        ),
        Builtin::arc(
            Signature::new(
                "verticalLine",
                "verticalLine(ts, label=None, color=None)",
                "Graph",
                "A vertical line at time `ts` (graphite's time forms, e.g. \"12:00_20231114\"), \
                 named `label`: one point of value 1 there.",
            )
            .params(vec![
                Param::new("ts", ParamType::Date).required(),
                Param::new("label", ParamType::String),
                Param::new("color", ParamType::String),
            ]),
            vertical_line,
        ),
        Builtin::arc(
            Signature::new(
                "aggregateLine",
                "aggregateLine(seriesList, func='average', keepStep=False)",
                "Calculate",
                "For each series a constant line at one aggregate of its values (`average` by \
                 default); with `keepStep` at the series' own step.",
            )
            .params(vec![
                series_list(),
                Param::new("func", ParamType::AggFunc).default(Value::Str("average".into())),
                Param::new("keepStep", ParamType::Boolean).default(Value::Bool(false)),
            ]),
            aggregate_line,
        ),
    ]
}

/// `legendValue`'s `valuesTypes`: any aggregation function, or a unit system last.
fn legend_types() -> Param {
    let deprecated: Vec<String> = super::AGG_FUNCS
        .iter()
        .map(|f| format!("{f}Series"))
        .collect();
    let mut options: Vec<&str> = super::AGG_FUNCS.to_vec();
    options.extend(deprecated.iter().map(String::as_str));
    options.extend(["si", "binary"]);
    Param::new("valuesTypes", ParamType::String)
        .multiple()
        .options(&options)
}

fn unchanged(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    Ok(Value::Series(args.take_series(0)))
}

fn dashed(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let length = args.i64(1).unwrap_or(5);
    let mut list = args.take_series(0);
    for series in &mut list {
        series.tag("dashed", length.to_string());
        series.name = format!("dashed({}, {})", series.name, format_g(length as f64));
    }
    Ok(Value::Series(list))
}

/// Each series renamed `func(name)` and tagged `func: 1` (its path expression kept).
fn wrapped(mut args: Args, func: &str) -> Value {
    let mut list = args.take_series(0);
    for series in &mut list {
        series.tag(func, "1");
        series.name = format!("{func}({})", series.name);
    }
    Value::Series(list)
}

fn area_between(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let mut list = args.take_series(0);
    if list.len() != 2 {
        return Err(Error::invalid(format!(
            "areaBetween needs exactly 2 series, not {}",
            list.len()
        )));
    }
    let upper = &mut list[1];
    upper.tag("areaBetween", "1");
    let name = format!("areaBetween({})", upper.path_expression);
    upper.name = name.clone();
    let tags = upper.tags.clone();
    let lower = &mut list[0];
    lower.tags = tags;
    lower.name = name;
    Ok(Value::Series(list))
}

/// The last non-null value of a series' values (graphite-web's `safeLast`).
fn last_value(series: &Series) -> Option<f64> {
    AggFunc::Last.apply(&series.values)
}

fn cacti_style(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let system = args.str(1).map(str::to_owned);
    let units = args.str(2).map(str::to_owned);
    let mut list = args.take_series(0);
    if list.is_empty() {
        return Ok(Value::Series(list));
    }
    let system = system.filter(|s| !s.is_empty());
    let units = units.filter(|u| !u.is_empty());
    let fmt = |x: f64| -> String {
        match (&system, &units) {
            (Some(system), Some(units)) => {
                let (v, prefix) = format_units(x, system, Some(units));
                format!("{v:.2} {prefix}")
            }
            (Some(system), None) => {
                let (v, prefix) = format_units(x, system, None);
                format!("{v:.2}{prefix}")
            }
            (None, Some(units)) => format!("{x:.2} {units}"),
            (None, None) => format!("{x:.2}"),
        }
    };
    // A column's width: the widest of its values cut to an integer (3 for a missing or
    // zero one), plus three.
    let width = |agg: AggFunc| {
        list.iter()
            .map(|s| {
                let v = agg.apply(&s.values).filter(|v| *v != 0.0).unwrap_or(3.0);
                fmt(v.trunc()).chars().count()
            })
            .max()
            .unwrap_or(0)
            + 3
    };
    let name_len = list
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0);
    let (last_len, max_len, min_len) = (
        width(AggFunc::Last),
        width(AggFunc::Max),
        width(AggFunc::Min),
    );
    for series in &mut list {
        let shown = |v: Option<f64>| v.map_or_else(|| "nan".to_owned(), fmt);
        let last = shown(last_value(series));
        let max = shown(AggFunc::Max.apply(&series.values));
        let min = shown(AggFunc::Min.apply(&series.values));
        series.name = format!(
            "{:<name_len$} Current:{last:<last_len$} Max:{max:<max_len$} Min:{min:<min_len$} ",
            series.name
        );
    }
    Ok(Value::Series(list))
}

/// graphite-web's `format_units` without a step: `v` in the largest unit of `system` it
/// reaches (its magnitude at least the unit) and that unit's prefix (followed by `units`);
/// a result within 1e-11 above an integer, and above 1, is cut to the integer.
fn format_units(v: f64, system: &str, units: Option<&str>) -> (f64, String) {
    let sizes: &[(&str, f64)] = match system {
        "binary" => &[
            ("Pi", 1_125_899_906_842_624.0),
            ("Ti", 1_099_511_627_776.0),
            ("Gi", 1_073_741_824.0),
            ("Mi", 1_048_576.0),
            ("Ki", 1024.0),
        ],
        _ => &[("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)],
    };
    let cut = |x: f64, reference: f64| {
        if x - x.floor() < 0.000_000_000_01 && reference > 1.0 {
            x.floor()
        } else {
            x
        }
    };
    for (prefix, size) in sizes {
        if v.abs() >= *size {
            let prefix = match units {
                Some(units) => format!("{prefix}{units}"),
                None => (*prefix).to_owned(),
            };
            return (cut(v / size, v), prefix);
        }
    }
    (cut(v, v), units.unwrap_or("").to_owned())
}

/// An aggregate as Python's `str()` prints it (`count` is an int there).
fn py_str_of(agg: AggFunc, value: Option<f64>) -> String {
    match value {
        None => "None".to_owned(),
        Some(v) if agg == AggFunc::Count => format!("{}", v as i64),
        Some(v) => repr_f64(v),
    }
}

fn legend_value(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let mut types: Vec<String> = args.all(1).iter().map(Value::to_py_str).collect();
    let Some(last) = types.last() else {
        return Err(Error::invalid("legendValue needs at least one value type"));
    };
    let system = matches!(last.as_str(), "si" | "binary").then(|| last.clone());
    if system.is_some() {
        types.pop();
    }
    let mut list = args.take_series(0);
    for value_type in &types {
        let agg = AggFunc::parse(value_type);
        for series in &mut list {
            let value = agg.map(|a| (a, a.apply(&series.values)));
            match &system {
                None => {
                    let shown = value.map_or_else(|| "(?)".to_owned(), |(a, v)| py_str_of(a, v));
                    series.name = format!("{} ({value_type}: {shown})", series.name);
                }
                Some(system) => {
                    let shown = match value {
                        None => "(?)".to_owned(),
                        Some((_, None)) => "None".to_owned(),
                        Some((_, Some(v))) => {
                            let (v, prefix) = format_units(v, system, None);
                            format!("{v:.2}{prefix}")
                        }
                    };
                    series.name = format!("{:<20}{value_type:<5}{shown:<10}", series.name);
                }
            }
        }
    }
    Ok(Value::Series(list))
}

/// Refuses a generated series of more points than an answer may hold (graphite-web makes
/// them all, however many).
fn points_limit(cx: &Context<'_>, func: &str, start: i64, end: i64, step: i64) -> Result<()> {
    let points = (end - start).max(0).div_euclid(step) + 1;
    let max = cx.eval.limits.max_points;
    if usize::try_from(points).map_or(true, |n| n > max) {
        return Err(Error::limit(format!(
            "{func} would make {points} points, more than the {max} an answer may hold (the \
             server's point limit)"
        )));
    }
    Ok(())
}

fn identity(cx: &Context<'_>, args: Args) -> Result<Value> {
    let name = args.get(0).map(Value::to_py_str).unwrap_or_default();
    let (start, end) = (cx.from(), cx.until());
    points_limit(cx, "identity", start, end, 60)?;
    let values = (start..end).step_by(60).map(|t| Some(t as f64)).collect();
    let mut series = Series::new(&name, start, end, 60, values);
    series.x_files_factor = cx.x_files_factor();
    series.path_expression = format!("identity(\"{name}\")");
    Ok(Value::Series(vec![series]))
}

fn time_function(cx: &Context<'_>, args: Args) -> Result<Value> {
    let name = args.get(0).map(Value::to_py_str).unwrap_or_default();
    let step = args.i64(1).unwrap_or(60);
    if step <= 0 {
        // graphite-web never ends its loop for such a step.
        return Err(Error::invalid(format!(
            "timeFunction needs a step above 0 seconds, not {step}"
        )));
    }
    let (start, end) = (cx.from(), cx.until());
    points_limit(cx, "timeFunction", start, end, step)?;
    let values = (start..end)
        .step_by(step as usize)
        .map(|t| Some(t as f64))
        .collect();
    let mut series = Series::new(&name, start, end, step, values);
    series.x_files_factor = cx.x_files_factor();
    Ok(Value::Series(vec![series]))
}

fn threshold(cx: &Context<'_>, args: Args) -> Result<Value> {
    let label = args.get(1).map(Value::to_py_str).filter(|l| !l.is_empty());
    let Value::Series(mut list) = constant_line(cx, args)? else {
        return Ok(Value::Series(Vec::new()));
    };
    if let (Some(label), Some(series)) = (label, list.first_mut()) {
        series.name = label;
    }
    Ok(Value::Series(list))
}

fn vertical_line(cx: &Context<'_>, args: Args) -> Result<Value> {
    let Some(Value::Str(text)) = args.get(0) else {
        return Err(Error::invalid(
            "verticalLine needs its time as a string (graphite's time forms)",
        ));
    };
    let at = crate::attime::parse_at_time(text, cx.now())
        .map_err(|e| Error::invalid(format!("verticalLine: {e}")))?;
    if at < cx.from() {
        return Err(Error::invalid(format!(
            "verticalLine(): timestamp {at} exists before start of range"
        )));
    }
    if at > cx.until() {
        return Err(Error::invalid(format!(
            "verticalLine(): timestamp {at} exists after end of range"
        )));
    }
    let Some(label) = args.get(1).map(Value::to_py_str) else {
        // graphite-web names the series None, which its JSON writes as a null target.
        return Err(Error::invalid(
            "verticalLine needs a label here (graphite-web answers a series without a name)",
        ));
    };
    let mut series = Series::new(&label, at, at, 1, vec![Some(1.0), Some(1.0)]);
    series.x_files_factor = cx.x_files_factor();
    Ok(Value::Series(vec![series]))
}

fn aggregate_line(cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let func = args.str(1).unwrap_or("average").to_owned();
    let Some(agg) = AggFunc::parse(&func) else {
        return Err(Error::invalid(format!(
            "Unsupported aggregation function: {func}"
        )));
    };
    let keep_step = args.bool(2).unwrap_or(false);
    let list = args.take_series(0);
    let mut out = Vec::with_capacity(list.len());
    for series in list {
        let value = agg.apply(&series.values);
        let name = match value {
            Some(v) => format!("aggregateLine({}, {})", series.name, format_g(v)),
            None => format!("aggregateLine({}, None)", series.name),
        };
        if keep_step {
            let values = vec![value; series.values.len()];
            out.push(super::transform::copy_with(&series, name, values));
        } else {
            let text = py_str_of(agg, value);
            let mut line = constant_series(cx, "aggregateLine", value, &text)?;
            line.name = name.clone();
            line.path_expression = name;
            out.push(line);
        }
    }
    Ok(Value::Series(out))
}
