//! Special functions: `constantLine` (Grafana's health check) and `consolidateBy`.

use std::sync::Arc;

use super::{Args, Builtin, Context, Function, Param, ParamType, Signature, Value, series_list};
use crate::{Consolidation, Error, Result, Series};

pub(crate) fn functions() -> Vec<Arc<dyn Function>> {
    vec![
        Builtin::arc(
            Signature::new(
                "consolidateBy",
                "consolidateBy(seriesList, consolidationFunc)",
                "Special",
                "Chooses how points are merged when an answer has more points than \
                 maxDataPoints allows: sum, average (the default), min, max, first, last or \
                 avg_zero.",
            )
            .params(vec![
                series_list(),
                Param::new("consolidationFunc", ParamType::String)
                    .required()
                    .options(&[
                        "sum", "average", "avg", "avg_zero", "min", "max", "first", "last",
                    ]),
            ]),
            consolidate_by,
        ),
        Builtin::arc(
            Signature::new(
                "constantLine",
                "constantLine(value)",
                "Special",
                "A series holding one value across the whole time range (three points: its \
                 start, middle and end).",
            )
            .params(vec![Param::new("value", ParamType::Float).required()]),
            constant_line,
        ),
    ]
}

fn consolidate_by(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let name = args.get(1).map(Value::to_py_str).unwrap_or_default();
    let Some(function) = Consolidation::parse(&name) else {
        return Err(Error::invalid(format!(
            "Invalid consolidation function: '{name}'"
        )));
    };
    Ok(Value::Series(consolidated(
        args.take_series(0),
        function,
        &name,
    )))
}

/// Each series of `list` to be consolidated by `function` (`name` as given), renamed
/// `consolidateBy(name,"function")` and tagged so: what `consolidateBy` and `cumulative`
/// do.
pub(crate) fn consolidated(
    mut list: Vec<Series>,
    function: Consolidation,
    name: &str,
) -> Vec<Series> {
    for series in &mut list {
        series.consolidation = function;
        series.tag("consolidateBy", name.to_owned());
        series.name = format!("consolidateBy({},\"{}\")", series.name, name);
        series.path_expression = series.name.clone();
    }
    list
}

pub(crate) fn constant_line(cx: &Context<'_>, args: Args) -> Result<Value> {
    let (value, raw) = args.number(0, "constantLine", "a number")?;
    let text = raw.to_py_str();
    let mut series = constant_series(cx, "constantLine", Some(value), &text)?;
    series.path_expression = format!("constantLine({text})");
    Ok(Value::Series(vec![series]))
}

/// A series named `text` holding `value` across the whole time range (three points: its
/// start, middle and end), as `constantLine` and `aggregateLine` draw it; `function` names
/// the caller in the error for a range too short.
pub(crate) fn constant_series(
    cx: &Context<'_>,
    function: &str,
    value: Option<f64>,
    text: &str,
) -> Result<Series> {
    let (start, end) = (cx.from(), cx.until());
    let step = ((end - start) as f64 / 2.0) as i64;
    if step <= 0 {
        return Err(Error::invalid(format!(
            "{function} needs a time range of at least two seconds"
        )));
    }
    let mut series = Series::new(text, start, end, step, vec![value; 3]);
    series.x_files_factor = cx.x_files_factor();
    Ok(series)
}
