//! Combine functions that match series by nodes or tags (graphite-web's `aggKey`):
//! `groupByNode`, `groupByNodes` and `groupByTags` (each group merged by an aggregation
//! function or by a registered aggregating function, such as `sumSeries` or `asPercent`),
//! `mapSeries` and `reduceSeries` (lists by nodes, then a registered function called per
//! name prefix with one series per matcher), and `asPercent` (each series as a percentage
//! of a total: the sum of the list, a number, one series, series matched by name, or series
//! matched by nodes).
//!
//! graphite-web's `asPercent` normalizes series in place and reads back whatever the last
//! normalization left (steps of the series, the time range of a `MISSING` result); this
//! module keeps the series in one arena and replays those steps in graphite-web's order, so
//! its answers match point for point, odd ones included. Where graphite-web fails with a
//! 500 (a `MISSING` result before any time range was computed, a total given as a string),
//! the answer is a 400 naming the problem.

use std::collections::HashMap;
use std::sync::Arc;

use super::agg::{
    Span, made, normalize_at, path_expressions, percent, rows, safe_sum, zip_longest,
};
use super::alias::agg_key;
use super::combine::aggregate;
use super::{
    Alias, Args, Body, Builtin, Context, Function, Param, ParamType, Signature, Value, series_list,
};
use crate::{Error, Result, Series};

pub(crate) fn functions() -> Vec<Arc<dyn Function>> {
    let as_percent = Builtin::arc(
        Signature::new(
            "asPercent",
            "asPercent(seriesList, total=None, *nodes)",
            "Combine",
            "Each series as a percentage of a total: of the list's sum at each point when no \
             total is given, of a number, of one total series, or of the total series with \
             the same name position by position when as many are given. With nodes, series \
             and totals are matched by those nodes (or tags) instead, several totals of one \
             match added together; a series or total without a match gives a MISSING series \
             of nulls.",
        )
        .params(vec![
            series_list(),
            Param::new("total", ParamType::Any),
            Param::new("nodes", ParamType::NodeOrTag).multiple(),
        ])
        .aggregator(),
        as_percent_fn,
    );
    let map_series = Builtin::arc(
        Signature::new(
            "mapSeries",
            "mapSeries(seriesList, *mapNodes)",
            "Combine",
            "Splits the series into lists by some nodes of their names (or tags), in the order \
             the keys first appear: a list of series lists for reduceSeries.",
        )
        .params(vec![
            series_list(),
            Param::new("mapNodes", ParamType::NodeOrTag)
                .required()
                .multiple(),
        ]),
        map_series,
    );
    let reduce_series = Builtin::arc(
        Signature::new(
            "reduceSeries",
            "reduceSeries(seriesLists, reduceFunction, reduceNode, *reduceMatchers)",
            "Combine",
            "Within each list (as mapSeries makes them), takes the series whose node \
             `reduceNode` is each of the matchers, in their order, and calls \
             `reduceFunction` with one argument each (e.g. asPercent of used and total); \
             the result is named `<nodes before reduceNode>.reduce.<reduceFunction>`.",
        )
        .params(vec![
            Param::new("seriesLists", ParamType::SeriesLists).required(),
            Param::new("reduceFunction", ParamType::String).required(),
            Param::new("reduceNode", ParamType::Node).required(),
            Param::new("reduceMatchers", ParamType::String)
                .required()
                .multiple(),
        ]),
        ReduceSeries,
    );
    vec![
        Alias::arc("pct", &as_percent),
        as_percent,
        Builtin::arc(
            Signature::new(
                "groupByNode",
                "groupByNode(seriesList, nodeNum, callback='average')",
                "Combine",
                "Groups the series by one node of their names (or a tag) and merges each \
                 group with the callback: an aggregation function (average by default, sum, \
                 max, ...) or an aggregating function such as sumSeries. Each result is named \
                 by its node.",
            )
            .params(vec![
                series_list(),
                Param::new("nodeNum", ParamType::NodeOrTag).required(),
                Param::new("callback", ParamType::AggOrSeriesFunc)
                    .default(Value::Str("average".to_owned())),
            ]),
            GroupBy { single: true },
        ),
        Builtin::arc(
            Signature::new(
                "groupByNodes",
                "groupByNodes(seriesList, callback, *nodes)",
                "Combine",
                "Groups the series by several nodes of their names (or tags) and merges each \
                 group with the callback (an aggregation function or an aggregating function \
                 such as sumSeries). Each result is named by its nodes joined with dots.",
            )
            .params(vec![
                series_list(),
                Param::new("callback", ParamType::AggOrSeriesFunc).required(),
                Param::new("nodes", ParamType::NodeOrTag).multiple(),
            ]),
            GroupBy { single: false },
        ),
        Builtin::arc(
            Signature::new(
                "groupByTags",
                "groupByTags(seriesList, callback, *tags)",
                "Combine",
                "Groups the series by the values of some tags and merges each group with the \
                 callback (an aggregation function or an aggregating function such as \
                 sumSeries). Each result is named and tagged `<name>;tag=value;...`.",
            )
            .params(vec![
                series_list(),
                Param::new("callback", ParamType::AggOrSeriesFunc).required(),
                Param::new("tags", ParamType::Tag).required().multiple(),
            ]),
            GroupByTags,
        ),
        map_series.clone(),
        Alias::arc("map", &map_series),
        reduce_series.clone(),
        Alias::arc("reduce", &reduce_series),
    ]
}

/// Series in first-appearance order of their keys.
struct Groups<T> {
    keys: Vec<String>,
    members: HashMap<String, Vec<T>>,
}

impl<T> Groups<T> {
    fn new() -> Groups<T> {
        Groups {
            keys: Vec::new(),
            members: HashMap::new(),
        }
    }

    fn add(&mut self, key: String, item: T) {
        match self.members.get_mut(&key) {
            Some(group) => group.push(item),
            None => {
                self.keys.push(key.clone());
                self.members.insert(key, vec![item]);
            }
        }
    }
}

/// `groupByNode` (one node, callback third, `average` by default) and `groupByNodes`.
struct GroupBy {
    single: bool,
}

#[async_trait::async_trait]
impl Body for GroupBy {
    async fn call(&self, cx: &Context<'_>, mut args: Args) -> Result<Value> {
        let name = if self.single {
            "groupByNode"
        } else {
            "groupByNodes"
        };
        let (callback, nodes) = if self.single {
            let callback = args
                .get(2)
                .map_or_else(|| "average".to_owned(), Value::to_py_str);
            (callback, args.all(1).to_vec())
        } else {
            let Some(callback) = args.get(1).map(Value::to_py_str) else {
                return Err(Error::invalid(format!(
                    "Missing required parameter \"callback\" for function \"{name}\""
                )));
            };
            (callback, args.all(2).to_vec())
        };
        if nodes.contains(&Value::None) {
            return Err(Error::invalid(format!(
                "{name}: a node must be a number or a tag name, not None"
            )));
        }
        let mut groups = Groups::new();
        for series in args.take_series(0) {
            groups.add(agg_key(&series, &nodes, None), series);
        }
        let mut out = Vec::with_capacity(groups.keys.len());
        for key in groups.keys {
            let group = groups.members.remove(&key).unwrap_or_default();
            let mut series = merge_group(cx, name, &callback, group, &key).await?;
            series.name = key;
            out.push(series);
        }
        Ok(Value::Series(out))
    }
}

/// A group merged by `callback`: a registered function called with the group as its only
/// argument, unvalidated (as graphite-web calls it), or else the aggregation function of
/// that name; the first series it gives.
async fn merge_group(
    cx: &Context<'_>,
    name: &str,
    callback: &str,
    group: Vec<Series>,
    key: &str,
) -> Result<Series> {
    let merged = match cx.eval.registry.get(callback).cloned() {
        Some(function) => {
            let inner = Context {
                eval: cx.eval,
                range: cx.range,
                raw_args: &[],
            };
            let args = Args {
                slots: vec![vec![Value::Series(group)]],
            };
            match function.call(&inner, args).await? {
                Value::Series(list) => list,
                other => {
                    return Err(Error::invalid(format!(
                        "{name}: callback {callback} gave {} instead of a series list",
                        other.repr()
                    )));
                }
            }
        }
        None => aggregate(cx, vec![group], callback, None)?,
    };
    merged.into_iter().next().ok_or_else(|| {
        Error::invalid(format!(
            "{name}: callback {callback} gave no series for the group {key:?}"
        ))
    })
}

/// `groupByTags`: the series grouped by the values of some tags, each group merged by the
/// callback and named (and tagged) `<name>;tag=value;...`, the tags sorted, where `<name>`
/// is the group's `name` tag when grouping by it, else the one `name` every series shares,
/// else the callback.
struct GroupByTags;

#[async_trait::async_trait]
impl Body for GroupByTags {
    async fn call(&self, cx: &Context<'_>, mut args: Args) -> Result<Value> {
        let name = "groupByTags";
        let callback = args.get(1).map(Value::to_py_str).unwrap_or_default();
        let tags: Vec<String> = args.all(2).iter().map(Value::to_py_str).collect();
        if tags.is_empty() {
            return Err(Error::invalid("groupByTags(): no tags specified"));
        }
        let list = args.take_series(0);
        let tag_of = |series: &Series, tag: &str| series.tags.get(tag).cloned().unwrap_or_default();
        let by_name = tags.iter().any(|t| t == "name");
        let shared_name = {
            let mut names: Vec<String> = list.iter().map(|s| tag_of(s, "name")).collect();
            names.sort();
            names.dedup();
            if names.len() == 1 {
                names.remove(0)
            } else {
                callback.clone()
            }
        };
        let mut groups = Groups::new();
        for series in list {
            let mut pairs: Vec<String> = tags
                .iter()
                .filter(|t| !by_name || *t != "name")
                .map(|t| format!("{t}={}", tag_of(&series, t)))
                .collect();
            pairs.sort();
            let first = if by_name {
                tag_of(&series, "name")
            } else {
                shared_name.clone()
            };
            let key = std::iter::once(first)
                .chain(pairs)
                .collect::<Vec<_>>()
                .join(";");
            groups.add(key, series);
        }
        let mut out = Vec::with_capacity(groups.keys.len());
        for key in groups.keys {
            let group = groups.members.remove(&key).unwrap_or_default();
            let mut series = merge_group(cx, name, &callback, group, &key).await?;
            let Some(tags) = crate::series::parse_tagged(&key) else {
                return Err(Error::invalid(format!(
                    "groupByTags cannot read the tags of the group name {key:?}"
                )));
            };
            series.name = key.clone();
            series.path_expression = key;
            series.tags = tags;
            out.push(series);
        }
        Ok(Value::Series(out))
    }
}

fn map_series(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let nodes: Vec<Value> = args.all(1).to_vec();
    let mut groups = Groups::new();
    for series in args.take_series(0) {
        groups.add(agg_key(&series, &nodes, None), series);
    }
    let lists = groups
        .keys
        .iter()
        .map(|key| groups.members.remove(key).unwrap_or_default())
        .collect();
    Ok(Value::SeriesLists(lists))
}

/// `reduceSeries`: for each name prefix before node `reduceNode`, the series of a list whose
/// node `reduceNode` is each matcher, given in the matchers' order as one argument each to
/// the registered function `reduceFunction`.
struct ReduceSeries;

#[async_trait::async_trait]
impl Body for ReduceSeries {
    async fn call(&self, cx: &Context<'_>, mut args: Args) -> Result<Value> {
        let func = args.get(1).map(Value::to_py_str).unwrap_or_default();
        let node = args.i64(2).unwrap_or(0);
        let matchers: Vec<String> = args.all(3).iter().map(Value::to_py_str).collect();
        let lists = match args.slots.first_mut().and_then(|v| v.first_mut()) {
            Some(Value::SeriesLists(lists)) => std::mem::take(lists),
            Some(Value::Series(list)) if list.is_empty() => Vec::new(),
            // graphite-web reads a plain list's series as lists of values (an
            // AttributeError).
            Some(Value::Series(_)) => {
                return Err(Error::invalid(
                    "reduceSeries needs a list of series lists (as mapSeries gives), not a \
                     series list",
                ));
            }
            _ => Vec::new(),
        };
        // By name, in first-appearance order: a slot per matcher.
        let mut keys: Vec<String> = Vec::new();
        let mut slots_of: HashMap<String, Vec<Option<Series>>> = HashMap::new();
        for series in lists.into_iter().flatten() {
            let nodes: Vec<&str> = series.name.split('.').collect();
            let len = nodes.len() as i64;
            let at = if node < 0 { len + node } else { node };
            let Some(&value) = usize::try_from(at).ok().and_then(|i| nodes.get(i)) else {
                return Err(Error::invalid(format!(
                    "reduceSeries: {} has no node {node}",
                    series.name
                )));
            };
            let Some(i) = matchers.iter().position(|m| m == value) else {
                continue;
            };
            let key = format!("{}.reduce.{func}", nodes[..at as usize].join("."));
            let slots = slots_of.entry(key.clone()).or_insert_with(|| {
                keys.push(key);
                vec![None; matchers.len()]
            });
            slots[i] = Some(series);
        }
        let Some(function) = cx.eval.registry.get(&func).cloned() else {
            if keys.is_empty() {
                return Ok(Value::Series(Vec::new()));
            }
            return Err(Error::invalid(format!(
                "reduceSeries: no function named {func}"
            )));
        };
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            let slots = slots_of.remove(&key).unwrap_or_default();
            let mut values = Vec::with_capacity(slots.len());
            for (slot, matcher) in slots.into_iter().zip(&matchers) {
                let Some(series) = slot else {
                    return Err(Error::invalid(format!(
                        "reduceSeries: {key} has no series for the matcher {matcher}"
                    )));
                };
                values.push(Value::Series(vec![series]));
            }
            let call_args =
                super::validate(cx.eval.registry, function.signature(), values, Vec::new())?;
            let inner = Context {
                eval: cx.eval,
                range: cx.range,
                raw_args: &[],
            };
            let first = match function.call(&inner, call_args).await? {
                Value::Series(list) => list.into_iter().next(),
                _ => None,
            };
            let Some(mut series) = first else {
                return Err(Error::invalid(format!(
                    "reduceSeries: {func} gave no series for {key}"
                )));
            };
            series.name = key;
            out.push(series);
        }
        Ok(Value::Series(out))
    }
}

/// `asPercent` (and its alias `pct`).
fn as_percent_fn(cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let nodes = args.all(2).to_vec();
    let total = match args.get(1) {
        None => Total::Sum,
        Some(Value::Series(_)) => Total::Series(args.take_series(1)),
        Some(v @ (Value::Int(_) | Value::Float(_) | Value::Bool(_))) => Total::Number(v.clone()),
        Some(other) => Total::Other(other.clone()),
    };
    let list = args.take_series(0);
    as_percent(list, total, &nodes, cx.x_files_factor()).map(Value::Series)
}

/// What `asPercent`'s `total` is.
enum Total {
    /// Absent (or `None`): the sum of the list (or of each node group).
    Sum,
    /// A series list.
    Series(Vec<Series>),
    /// A number (Python's `bool` included, which divides as 0 or 1).
    Number(Value),
    /// Anything else (a string): graphite-web fails dividing by it.
    Other(Value),
}

fn as_percent(list: Vec<Series>, total: Total, nodes: &[Value], xff: f64) -> Result<Vec<Series>> {
    // `normalize([seriesList])` first: an empty list raises NormalizeEmptyResultError,
    // which graphite-web's evaluator turns into no series.
    if list.is_empty() {
        return Ok(Vec::new());
    }
    let count = list.len();
    let mut arena = list;
    let all: Vec<usize> = (0..count).collect();
    normalize_at(&mut arena, &all);
    if !nodes.is_empty() {
        return by_nodes(arena, count, total, nodes, xff);
    }
    let (total_values, total_text) = match total {
        Total::Sum => {
            let values = rows(&arena).iter().map(|row| safe_sum(row)).collect();
            let text = format!("sumSeries({})", path_expressions(&arena));
            (values, text)
        }
        Total::Series(totals) => {
            if totals.len() != 1 && totals.len() != count {
                return Err(Error::invalid(
                    "asPercent second argument must be missing, a single digit, reference \
                     exactly 1 series or reference the same number of series as the first \
                     argument",
                ));
            }
            if totals.len() == count {
                return matched_by_name(arena, totals, xff);
            }
            arena.extend(totals);
            let everything: Vec<usize> = (0..arena.len()).collect();
            normalize_at(&mut arena, &everything);
            let Some(total) = arena.pop() else {
                return Ok(Vec::new());
            };
            (total.points(), total.name)
        }
        Total::Number(value) => {
            let number = value.as_f64();
            (vec![number; arena[0].values.len()], value.to_py_str())
        }
        Total::Other(value) => {
            return Err(Error::invalid(format!(
                "asPercent total must be a number or a series list, not {}",
                value.repr()
            )));
        }
    };
    // Each series keeps its own (unconsolidated) step here, as in graphite-web.
    Ok(arena
        .iter()
        .map(|series| {
            let values = zip_longest(&series.points(), &total_values)
                .map(|(v, t)| percent(v, t))
                .collect();
            let name = format!("asPercent({},{})", series.name, total_text);
            let span = Span {
                start: series.start,
                end: series.end,
                step: series.step,
            };
            made(&name, span, values, xff)
        })
        .collect())
}

/// `asPercent(seriesList, totals)` with as many totals as series: paired by sorted names.
fn matched_by_name(list: Vec<Series>, totals: Vec<Series>, xff: f64) -> Result<Vec<Series>> {
    let mut list = list;
    let mut totals = totals;
    list.sort_by(|a, b| a.name.cmp(&b.name));
    totals.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = Vec::with_capacity(list.len());
    for (series, total) in list.into_iter().zip(totals) {
        let name = format!("asPercent({},{})", series.name, total.name);
        let mut pair = [series, total];
        let Some(span) = normalize_at(&mut pair, &[0, 1]) else {
            continue;
        };
        let values = zip_longest(&pair[0].points(), &pair[1].points())
            .map(|(v, t)| percent(v, t))
            .collect();
        out.push(made(&name, span, values, xff));
    }
    Ok(out)
}

/// `asPercent` with nodes: series and totals grouped by `aggKey`, several totals (or, with
/// no total, several series) of one key summed into `sumSeries(...)`.
fn by_nodes(
    arena: Vec<Series>,
    count: usize,
    total: Total,
    nodes: &[Value],
    xff: f64,
) -> Result<Vec<Series>> {
    let mut arena = arena;
    let mut series_groups: Groups<usize> = Groups::new();
    for (i, series) in arena.iter().enumerate().take(count) {
        series_groups.add(agg_key(series, nodes, None), i);
    }
    let mut keys = series_groups.keys.clone();
    // The span graphite-web's last `normalize` left in its local variables.
    let mut last: Option<Span> = None;
    let mut totals: HashMap<String, usize> = HashMap::new();
    match total {
        Total::Sum => {
            for key in &series_groups.keys {
                let members = series_groups.members[key].clone();
                let at = sum_group(&mut arena, &members, &mut last, xff);
                totals.insert(key.clone(), at);
            }
        }
        Total::Series(list) => {
            let mut total_groups: Groups<usize> = Groups::new();
            for series in list {
                let key = agg_key(&series, nodes, None);
                if !keys.contains(&key) {
                    keys.push(key.clone());
                }
                arena.push(series);
                total_groups.add(key, arena.len() - 1);
            }
            for key in &total_groups.keys {
                let members = total_groups.members[key].clone();
                let at = sum_group(&mut arena, &members, &mut last, xff);
                totals.insert(key.clone(), at);
            }
        }
        Total::Number(_) | Total::Other(_) => {
            return Err(Error::invalid("total must be None or a seriesList"));
        }
    }
    let unset = || {
        Error::invalid(
            "asPercent: a series without a matching total comes before any matched pair, \
             so there is no time range to give its MISSING result",
        )
    };
    let mut out = Vec::new();
    for key in &keys {
        let Some(members) = series_groups.members.get(key) else {
            // A total without series.
            let Some(&t) = totals.get(key) else { continue };
            let span = last.ok_or_else(unset)?;
            let name = format!("asPercent(MISSING,{})", arena[t].name);
            let values = vec![None; arena[t].points().len()];
            out.push(made(&name, span, values, xff));
            continue;
        };
        for &s in members {
            let (name, values) = match totals.get(key) {
                None => (
                    format!("asPercent({},MISSING)", arena[s].name),
                    vec![None; arena[s].points().len()],
                ),
                Some(&t) => {
                    let name = format!("asPercent({},{})", arena[s].name, arena[t].name);
                    last = normalize_at(&mut arena, &[s, t]).or(last);
                    let values = zip_longest(&arena[s].points(), &arena[t].points())
                        .map(|(v, t)| percent(v, t))
                        .collect();
                    (name, values)
                }
            };
            let span = last.ok_or_else(unset)?;
            out.push(made(&name, span, values, xff));
        }
    }
    Ok(out)
}

/// A group's total: its one series, or the `sumSeries(...)` of its normalized members
/// (pushed onto the arena), leaving its span as the last normalization's.
fn sum_group(
    arena: &mut Vec<Series>,
    members: &[usize],
    last: &mut Option<Span>,
    xff: f64,
) -> usize {
    if let [only] = members {
        return *only;
    }
    let Some(span) = normalize_at(arena, members) else {
        return members.first().copied().unwrap_or(0);
    };
    let group: Vec<Series> = members.iter().map(|&i| arena[i].clone()).collect();
    let name = format!("sumSeries({})", path_expressions(&group));
    let values = rows(&group).iter().map(|row| safe_sum(row)).collect();
    *last = Some(span);
    arena.push(made(&name, span, values, xff));
    arena.len() - 1
}
