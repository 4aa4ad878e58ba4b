//! Functions that evaluate more targets or keep state across a request: `applyByNode`,
//! `useSeriesAbove` and `aliasQuery` (targets built from the series' names), `stacked`
//! (running totals kept
//! per stack name for the whole request, as graphite-web keeps them in its request
//! context), and `compressPeriodicGaps`.
//!
//! Owns those functions; evaluation itself is `eval.rs`'s.

use std::sync::Arc;

use async_trait::async_trait;

use super::time::summarize_values;
use super::transform::copy_with;
use super::{
    Args, Body, Builtin, Context, Function, Param, ParamType, Signature, Value, series_list,
};
use crate::functions::agg::AggFunc;
use crate::grammar::Expr;
use crate::{Error, Result, Series};

/// `stacked`'s stack name when none is given.
const DEFAULT_STACK: &str = "__DEFAULT__";

pub(crate) fn functions() -> Vec<Arc<dyn Function>> {
    vec![
        Builtin::arc(
            Signature::new(
                "applyByNode",
                "applyByNode(seriesList, nodeNum, templateFunction, newName=None)",
                "Combine",
                "For each distinct prefix of the names up to node `nodeNum`, evaluates \
                 `templateFunction` with `%` replaced by the prefix; `newName`, with `%` \
                 replaced the same way, renames the results.",
            )
            .params(vec![
                series_list(),
                Param::new("nodeNum", ParamType::Node).required(),
                Param::new("templateFunction", ParamType::String).required(),
                Param::new("newName", ParamType::String),
            ]),
            ApplyByNode,
        ),
        Builtin::arc(
            Signature::new(
                "useSeriesAbove",
                "useSeriesAbove(seriesList, value, search, replace)",
                "Filter Series",
                "For each series whose largest value is above `value`, the series named by \
                 replacing `search` (a regular expression) with `replace` in its name.",
            )
            .params(vec![
                series_list(),
                Param::new("value", ParamType::Float).required(),
                Param::new("search", ParamType::String).required(),
                Param::new("replace", ParamType::String).required(),
            ]),
            UseSeriesAbove,
        ),
        Builtin::arc(
            Signature::new(
                "aliasQuery",
                "aliasQuery(seriesList, search, replace, newName)",
                "Alias",
                "Renames each series by the last value of another target: the series' name \
                 with `search` (a regular expression) replaced by `replace` is evaluated, and \
                 its first series' last non-null value is written into `newName` by its `%` \
                 conversion (`%d`, `%.2f`, `%s`...).",
            )
            .params(vec![
                series_list(),
                Param::new("search", ParamType::String).required(),
                Param::new("replace", ParamType::String).required(),
                Param::new("newName", ParamType::String).required(),
            ]),
            AliasQuery,
        ),
        Builtin::arc(
            Signature::new(
                "stacked",
                "stacked(seriesLists, stackName='__DEFAULT__')",
                "Graph",
                "Stacks the series: each value becomes the running total of that point over \
                 the series stacked before it in the request under the same stack name.",
            )
            .params(vec![series_list(), Param::new("stack", ParamType::String)]),
            stacked,
        ),
        Builtin::arc(
            Signature::new(
                "compressPeriodicGaps",
                "compressPeriodicGaps(seriesList)",
                "Transform",
                "Guesses the real interval of a series written less often than its step (from \
                 its first values) and takes the last value of each such interval.",
            )
            .params(vec![series_list()]),
            compress_periodic_gaps,
        ),
    ]
}

/// Parses and evaluates `target` over the range being evaluated.
async fn evaluate_text(cx: &Context<'_>, target: &str) -> Result<Vec<Series>> {
    let expr = Expr::parse(target)?;
    cx.evaluate(&expr, cx.from(), cx.until()).await
}

struct ApplyByNode;

#[async_trait]
impl Body for ApplyByNode {
    async fn call(&self, cx: &Context<'_>, mut args: Args) -> Result<Value> {
        let node = args.i64(1).unwrap_or(0);
        let template = args.get(2).map(Value::to_py_str).unwrap_or_default();
        let new_name = args.get(3).map(Value::to_py_str).filter(|n| !n.is_empty());
        let list = args.take_series(0);
        let mut prefixes: Vec<String> = list.iter().map(|s| prefix(&s.name, node)).collect();
        prefixes.sort();
        prefixes.dedup();
        // graphite-web gives every result the time span of the last series of the list.
        let span = list.last().map(|s| (s.start, s.end));
        let mut out = Vec::new();
        for prefix in prefixes {
            for mut series in evaluate_text(cx, &template.replace('%', &prefix)).await? {
                if let Some(name) = &new_name {
                    series.name = name.replace('%', &prefix);
                }
                series.path_expression = prefix.clone();
                if let Some((start, end)) = span {
                    series.start = start;
                    series.end = end;
                }
                out.push(series);
            }
        }
        Ok(Value::Series(out))
    }
}

/// The dotted nodes of `name` up to node `node` (Python's `split('.')[:node + 1]`).
fn prefix(name: &str, node: i64) -> String {
    let nodes: Vec<&str> = name.split('.').collect();
    let len = nodes.len() as i64;
    let end = node.saturating_add(1);
    let end = if end < 0 {
        (len + end).max(0)
    } else {
        end.min(len)
    };
    nodes[..end as usize].join(".")
}

struct UseSeriesAbove;

#[async_trait]
impl Body for UseSeriesAbove {
    async fn call(&self, cx: &Context<'_>, mut args: Args) -> Result<Value> {
        let value = args.f64(1).unwrap_or(0.0);
        let search = args.get(2).map(Value::to_py_str).unwrap_or_default();
        let replace = args.get(3).map(Value::to_py_str).unwrap_or_default();
        let substitution = crate::pyre::Substitution::new(&search, &replace)?;
        let list = args.take_series(0);
        let mut names = Vec::new();
        for series in &list {
            if series.values.iter().any(Option::is_none) {
                // Python's max() cannot compare None with a number.
                return Err(Error::invalid(format!(
                    "useSeriesAbove cannot take the largest value of {}: it has gaps",
                    series.name
                )));
            }
            let Some(max) = AggFunc::Max.apply(&series.values) else {
                return Err(Error::invalid(format!(
                    "useSeriesAbove cannot take the largest value of {}: it has no values",
                    series.name
                )));
            };
            if max > value {
                names.push(substitution.apply(&series.name));
            }
        }
        if names.is_empty() {
            return Ok(Value::Series(Vec::new()));
        }
        // graphite-web evaluates `group(<names>)`: each name's series, in turn.
        let mut found = Vec::new();
        for name in &names {
            found.extend(evaluate_text(cx, name).await?);
        }
        Ok(Value::Series(
            found.into_iter().filter(|s| !s.values.is_empty()).collect(),
        ))
    }
}

struct AliasQuery;

#[async_trait]
impl Body for AliasQuery {
    async fn call(&self, cx: &Context<'_>, mut args: Args) -> Result<Value> {
        let search = args.get(1).map(Value::to_py_str).unwrap_or_default();
        let replace = args.get(2).map(Value::to_py_str).unwrap_or_default();
        let new_name = args.get(3).map(Value::to_py_str).unwrap_or_default();
        let substitution = crate::pyre::Substitution::new(&search, &replace)?;
        let mut list = args.take_series(0);
        for series in &mut list {
            let query = substitution.apply(&series.name);
            let found = evaluate_text(cx, &query).await?;
            let Some(first) = found.first() else {
                return Err(Error::invalid(format!(
                    "No series found with query: {query}"
                )));
            };
            let Some(current) = AggFunc::Last.apply(&first.values) else {
                return Err(Error::invalid(format!(
                    "Cannot get last value of series: {}",
                    first.name
                )));
            };
            series.name = crate::percent::format_one(&new_name, current)?;
        }
        Ok(Value::Series(list))
    }
}

fn stacked(cx: &Context<'_>, mut args: Args) -> Result<Value> {
    if args.get(1).is_some() && cx.raw_args().len() < 2 {
        // graphite-web's function calls this parameter `stackName`: the listed keyword
        // fails there (a TypeError).
        return Err(Error::invalid(
            "stacked takes its stack name by position, not as the keyword stack",
        ));
    }
    let stack = args
        .get(1)
        .map(Value::to_py_str)
        .unwrap_or_else(|| DEFAULT_STACK.to_owned());
    let list = args.take_series(0);
    let mut stacks = cx.eval.stacks.lock().unwrap_or_else(|e| e.into_inner());
    let total = stacks.entry(stack.clone()).or_default();
    let mut out = Vec::with_capacity(list.len());
    for mut series in list {
        let mut values = Vec::with_capacity(series.values.len());
        for (i, value) in series.values.iter().enumerate() {
            if total.len() <= i {
                total.push(0.0);
            }
            values.push(value.map(|v| {
                total[i] += v;
                total[i]
            }));
        }
        let name = if stack == DEFAULT_STACK {
            series.tag("stacked", stack.clone());
            format!("stacked({})", series.name)
        } else {
            series.name.clone()
        };
        out.push(copy_with(&series, name, values));
    }
    Ok(Value::Series(out))
}

fn compress_periodic_gaps(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let list = args.take_series(0);
    let mut out = Vec::with_capacity(list.len());
    for mut series in list {
        series.name = format!("compressPeriodicGaps({})", series.name);
        series.path_expression = series.name.clone();
        out.push(compressed(series));
    }
    Ok(Value::Series(out))
}

/// A series whose values come every few steps with nulls between (the first three non-zero
/// values tell the interval: the third where the first two predict it, with nulls on both
/// sides) summarized by its last value per interval; any other series as it is.
fn compressed(series: Series) -> Series {
    let values = &series.values;
    // Python's truth: a zero is as absent as a null here.
    let truthy = |i: usize| values.get(i).copied().flatten().is_some_and(|v| v != 0.0);
    let (mut first, mut second) = (0usize, 0usize);
    for i in 0..values.len() {
        if truthy(i) {
            if first > 0 {
                second = i;
                break;
            }
            first = i;
        }
    }
    let guess = second as i64 - first as i64;
    let third = second as i64 + guess;
    let predicted = guess > 1
        && third <= values.len() as i64 - 2
        && truthy(third as usize)
        && values[third as usize - 1].is_none()
        && values[third as usize + 1].is_none();
    if !predicted {
        return series;
    }
    let interval = guess * series.step;
    let start = series.start + first as i64 * series.step;
    let (new_values, _) = summarize_values(&series, AggFunc::Last, interval, start, series.end);
    let end = start + interval * (new_values.len() as i64 - 1);
    let mut result = copy_with(&series, series.name.clone(), new_values);
    result.path_expression = series.path_expression.clone();
    result.start = start;
    result.end = end;
    result.step = interval;
    result
}

#[cfg(test)]
mod tests {
    use super::prefix;

    #[test]
    fn prefixes_slice_the_nodes_as_python_does() {
        assert_eq!(prefix("a.b.c", 0), "a");
        assert_eq!(prefix("a.b.c", 1), "a.b");
        assert_eq!(prefix("a.b.c", 5), "a.b.c");
        assert_eq!(prefix("a.b.c", -1), "");
        assert_eq!(prefix("a.b.c", -2), "a.b");
        assert_eq!(prefix("a.b.c", -9), "");
    }
}
