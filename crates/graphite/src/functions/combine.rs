//! Combine functions: series merged point by point after `normalize` (graphite-web's
//! `aggregate` and the `*Series` functions built on it).
//!
//! Holds `sumSeries` (and its alias `sum`); the other combining functions join this file.

use std::sync::Arc;

use super::agg::{AggFunc, common_tags, normalize, path_expressions, rows, xff_row};
use super::{Alias, Args, Builtin, Context, Function, Param, ParamType, Signature, Value};
use crate::{Error, Result, Series};

pub(crate) fn functions() -> Vec<Arc<dyn Function>> {
    let sum = Builtin::arc(
        Signature::new(
            "sumSeries",
            "sumSeries(*seriesLists)",
            "Combine",
            "Adds the series together point by point (nulls skipped; null where every series \
             is null). Series of different steps are first consolidated to their least common \
             multiple.",
        )
        .params(vec![
            Param::new("seriesLists", ParamType::SeriesList)
                .required()
                .multiple(),
        ])
        .aggregator(),
        sum_series,
    );
    let alias = Alias::arc("sum", &sum);
    vec![sum, alias]
}

fn sum_series(cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let lists = args.take_all_series(0);
    aggregate(cx, lists, "sum", None).map(Value::Series)
}

/// graphite-web's `aggregate(seriesLists, func, xFilesFactor)`: one series named
/// `<func>Series(<path expressions>)` holding the function of each row of normalized values.
pub(crate) fn aggregate(
    cx: &Context<'_>,
    lists: Vec<Vec<Series>>,
    func: &str,
    x_files_factor: Option<f64>,
) -> Result<Vec<Series>> {
    let raw = func;
    let func = func.strip_suffix("Series").unwrap_or(func);
    let Some(agg) = AggFunc::parse(func) else {
        return Err(Error::invalid(format!(
            "Unsupported aggregation function: {raw}"
        )));
    };
    if lists.iter().all(Vec::is_empty) {
        return Ok(Vec::new());
    }
    let Some(normalized) = normalize(lists) else {
        return Ok(Vec::new());
    };
    let xff = x_files_factor.unwrap_or_else(|| cx.x_files_factor());
    let name = format!("{func}Series({})", path_expressions(&normalized.series));
    let values = rows(&normalized.series)
        .iter()
        .map(|row| {
            if xff_row(row, xff) {
                agg.apply(row)
            } else {
                None
            }
        })
        .collect();
    let mut tags = common_tags(&normalized.series);
    tags.entry("name".to_owned())
        .or_insert_with(|| name.clone());
    tags.insert("aggregatedBy".to_owned(), func.to_owned());
    let mut series = Series::new(
        &name,
        normalized.start,
        normalized.end,
        normalized.step,
        values,
    );
    series.tags = tags;
    series.x_files_factor = xff;
    Ok(vec![series])
}
