//! Alias functions: new names for series (`alias`, `aliasSub`, `aliasByNode`,
//! `aliasByMetric`), leaving values, tags and path expressions as graphite-web leaves them.

use std::sync::Arc;

use super::{
    Args, Builtin, Context, Function, Param, ParamType, Signature, SyncBody, Value, series_list,
};
use crate::grammar::{Expr, parse_prefix};
use crate::pyre::Substitution;
use crate::{Error, Result, Series};

pub(crate) fn functions() -> Vec<Arc<dyn Function>> {
    // Each renames the series list it takes first.
    let renaming =
        |name: &str, function: &str, description: &str, params: Vec<Param>, body: SyncBody| {
            let params = std::iter::once(series_list()).chain(params).collect();
            Builtin::arc(
                Signature::new(name, function, "Alias", description).params(params),
                body,
            )
        };
    vec![
        renaming(
            "alias",
            "alias(seriesList, newName)",
            "Gives every series of the list the same new name.",
            vec![Param::new("newName", ParamType::String).required()],
            alias,
        ),
        renaming(
            "aliasByNode",
            "aliasByNode(seriesList, *nodes)",
            "Renames each series to some of the dotted nodes of its (first) path, joined by \
             dots; nodes count from 0, negative ones from the end, and a name instead of a \
             number takes that tag's value.",
            vec![
                Param::new("nodes", ParamType::NodeOrTag)
                    .required()
                    .multiple(),
            ],
            alias_by_node,
        ),
        renaming(
            "aliasSub",
            "aliasSub(seriesList, search, replace)",
            "Renames each series by a regular expression substitution on its name; the \
             replacement may refer to groups as \\1 or \\g<name>.",
            vec![
                Param::new("search", ParamType::String).required(),
                Param::new("replace", ParamType::String).required(),
            ],
            alias_sub,
        ),
        renaming(
            "aliasByMetric",
            "aliasByMetric(seriesList)",
            "Renames each series to the last dotted node of the path inside its name \
             (for a function's result, of the innermost parentheses, up to any comma).",
            Vec::new(),
            alias_by_metric,
        ),
    ]
}

fn alias_by_metric(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let mut list = args.take_series(0);
    for series in &mut list {
        series.name = metric_name(&series.name);
    }
    Ok(Value::Series(list))
}

/// `aliasByMetric`: graphite-web's `substr(seriesList, -1, 0)` of the name.
pub(crate) fn metric_name(name: &str) -> String {
    super::names::substr_name(name, -1, 0)
}

fn alias(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let name = args.get(1).map(Value::to_py_str).unwrap_or_default();
    let mut list = args.take_series(0);
    for series in &mut list {
        series.name = name.clone();
    }
    Ok(Value::Series(list))
}

fn alias_sub(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let (Some(search), Some(replace)) = (args.get(1), args.get(2)) else {
        return Err(Error::invalid("aliasSub needs a search and a replacement"));
    };
    let substitution = Substitution::new(&search.to_py_str(), &replace.to_py_str())?;
    let mut list = args.take_series(0);
    for series in &mut list {
        series.name = substitution.apply(&series.name);
    }
    Ok(Value::Series(list))
}

pub(crate) fn alias_by_node(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let nodes: Vec<Value> = args.all(1).to_vec();
    let mut list = args.take_series(0);
    for series in &mut list {
        series.name = agg_key(series, &nodes, None);
    }
    Ok(Value::Series(list))
}

/// `aggKey`: the nodes (or tags) of a series joined by dots, from its name or, when the
/// name ends with `)`, from the first path expression inside it.
pub(crate) fn agg_key(series: &Series, nodes: &[Value], path_expression: Option<&str>) -> String {
    let first;
    let path_expression = match path_expression {
        Some(p) => Some(p),
        None if series.name.ends_with(')') => {
            first = first_path_expression(&series.name);
            first.as_deref()
        }
        None => None,
    };
    nodes
        .iter()
        .map(|n| node_or_tag(series, n, path_expression))
        .collect::<Vec<_>>()
        .join(".")
}

/// `getNodeOrTag`: an integral `n` indexes the dotted nodes of the path (before any `;`
/// tags; negative from the end); anything else, or an index past the nodes, names a tag
/// (empty when absent).
pub(crate) fn node_or_tag(series: &Series, n: &Value, path_expression: Option<&str>) -> String {
    let index = match n {
        Value::Int(i) => Some(*i),
        Value::Bool(b) => Some(*b as i64),
        Value::Float(f) if f.is_finite() && f.fract() == 0.0 => Some(*f as i64),
        _ => None,
    };
    if let Some(i) = index {
        let path = path_expression.unwrap_or(&series.name);
        let path = path.split(';').next().unwrap_or(path);
        let parts: Vec<&str> = path.split('.').collect();
        let at = if i < 0 { parts.len() as i64 + i } else { i };
        if let Some(part) = usize::try_from(at).ok().and_then(|at| parts.get(at)) {
            return (*part).to_owned();
        }
    }
    series.tags.get(&n.to_py_str()).cloned().unwrap_or_default()
}

/// `_getFirstPathExpression`: the first path expression of a name parsed as a target
/// (its longest parsable prefix), descending into first arguments.
pub(crate) fn first_path_expression(name: &str) -> Option<String> {
    let mut expr = parse_prefix(name)?;
    loop {
        match expr {
            Expr::Path(p) => return Some(p),
            Expr::Call(call) => expr = call.args.into_iter().next()?,
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_follow_substr_and_its_comma_cut() {
        // Each expectation is graphite-web's aliasByMetric on the same name.
        crate::pyfmt::assert_text_cases(
            "aliasByMetric",
            metric_name,
            &[
                ("app.web1.requests", "requests"),
                ("sumSeries(app.*.requests)", "requests"),
                ("scale(app.web1.requests,2)", "requests"),
                ("app.web1.requests)x(y", ""),
                ("a,b.c,d", "c"),
                ("plain", "plain"),
                ("a.b,c\nd,e", "b,c\nd"),
                ("a.b,c\n", "b\n"),
                ("", ""),
            ],
        );
    }
}
