//! Name functions: `substr` (some dotted nodes of the path inside a name), `aliasByTags`
//! (graphite-web's `aliasByNode` under another name) and `upper` / `lower` (letter case of
//! a whole name or of some of its characters).
//!
//! Names are cut as graphite-web cuts them: Python's slices (negative indexes from the end,
//! bounds clamped), characters counted as code points. Only names change: values, tags and
//! path expressions stay as they came.

use std::sync::Arc;

use super::alias::alias_by_node;
use super::{
    Args, Builtin, Context, Function, Param, ParamType, Signature, SyncBody, Value, series_list,
};
use crate::Result;

pub(crate) fn functions() -> Vec<Arc<dyn Function>> {
    let case = |name: &str, description: &str, body: SyncBody| {
        Builtin::arc(
            Signature::with_args(name, "seriesList, *pos", "Alias", description).params(vec![
                series_list(),
                Param::new("pos", ParamType::Integer).multiple(),
            ]),
            body,
        )
    };
    vec![
        Builtin::arc(
            Signature::new(
                "substr",
                "substr(seriesList, start=0, stop=0)",
                "Special",
                "Renames each series to the dotted nodes start up to (not including) stop of \
                 the path inside its name (the innermost parentheses, up to any comma); a \
                 stop of 0 runs to the last node, negative positions count from the end.",
            )
            .params(vec![
                series_list(),
                Param::new("start", ParamType::Node).default(Value::Int(0)),
                Param::new("stop", ParamType::Node).default(Value::Int(0)),
            ]),
            substr,
        ),
        Builtin::arc(
            Signature::new(
                "aliasByTags",
                "aliasByTags(seriesList, *tags)",
                "Alias",
                "Renames each series to the values of the given tags (or, for numbers, the \
                 dotted nodes of its path), joined by dots: the same as aliasByNode.",
            )
            .params(vec![
                series_list(),
                Param::new("tags", ParamType::NodeOrTag)
                    .required()
                    .multiple(),
            ]),
            alias_by_node,
        ),
        case(
            "upper",
            "Upper-cases each series' name, or only the characters at the given positions \
             (negative ones counted from the end, those past the name ignored).",
            upper,
        ),
        case(
            "lower",
            "Lower-cases each series' name, or only the characters at the given positions \
             (negative ones counted from the end, those past the name ignored).",
            lower,
        ),
    ]
}

fn substr(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let start = args.i64(1).unwrap_or(0);
    let stop = args.i64(2).unwrap_or(0);
    let mut list = args.take_series(0);
    for series in &mut list {
        series.name = substr_name(&series.name, start, stop);
    }
    Ok(Value::Series(list))
}

/// `substr`'s new name: the text between the last `(` and the first `)` (empty when that
/// `)` comes first), its dotted nodes `[start:stop]` (`[start:]` for a stop of 0) joined by
/// dots, cut at a comma as `re.sub(',.*$', '', name)` cuts.
pub(crate) fn substr_name(name: &str, start: i64, stop: i64) -> String {
    let left = name.rfind('(').map_or(0, |i| i + 1);
    let right = name.find(')').unwrap_or(name.len());
    let clean = if left <= right {
        &name[left..right]
    } else {
        ""
    };
    let nodes: Vec<&str> = clean.split('.').collect();
    let (from, to) = py_slice(nodes.len(), start, (stop != 0).then_some(stop));
    let joined = nodes.get(from..to).unwrap_or_default().join(".");
    cut_at_comma(&joined)
}

/// `re.sub(',.*$', '', text)`: `.` stops at a line break and `$` matches at the end or
/// before a final one, so the first comma of the last line (not counting a final line
/// break) starts what is removed, up to that final line break.
fn cut_at_comma(text: &str) -> String {
    let (body, newline) = match text.strip_suffix('\n') {
        Some(body) => (body, "\n"),
        None => (text, ""),
    };
    let line_start = body.rfind('\n').map_or(0, |i| i + 1);
    match body[line_start..].find(',') {
        Some(comma) => format!("{}{newline}", &body[..line_start + comma]),
        None => text.to_owned(),
    }
}

/// The range Python's `items[start:stop]` takes of `len` items.
fn py_slice(len: usize, start: i64, stop: Option<i64>) -> (usize, usize) {
    let bound = |i: i64| {
        let len = len as i64;
        let i = if i < 0 { (i + len).max(0) } else { i.min(len) };
        i as usize
    };
    let from = bound(start);
    let to = stop.map_or(len, bound);
    (from, to.max(from))
}

fn upper(_cx: &Context<'_>, args: Args) -> Result<Value> {
    recase(args, |s| s.to_uppercase())
}

fn lower(_cx: &Context<'_>, args: Args) -> Result<Value> {
    recase(args, |s| s.to_lowercase())
}

/// `upper` / `lower`: the whole name, or each character at a position (Python's index of
/// the name's characters; one past either end is skipped) in the order given.
fn recase(mut args: Args, change: fn(&str) -> String) -> Result<Value> {
    let positions: Vec<i64> = args
        .all(1)
        .iter()
        .filter_map(|v| match v {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(*b as i64),
            _ => None,
        })
        .collect();
    let mut list = args.take_series(0);
    for series in &mut list {
        if positions.is_empty() {
            series.name = change(&series.name);
            continue;
        }
        let mut chars: Vec<String> = series.name.chars().map(String::from).collect();
        let len = chars.len() as i64;
        for &pos in &positions {
            let at = if pos < 0 { pos + len } else { pos };
            if let Some(c) = usize::try_from(at).ok().and_then(|at| chars.get_mut(at)) {
                *c = change(c);
            }
        }
        series.name = chars.concat();
    }
    Ok(Value::Series(list))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substr_slices_nodes_as_python_does() {
        // Each expectation is graphite-web's substr on the same name.
        let cases = [
            ("app.web1.requests", 0, 0, "app.web1.requests"),
            ("app.web1.requests", 1, 0, "web1.requests"),
            ("app.web1.requests", 1, 2, "web1"),
            ("app.web1.requests", -2, 0, "web1.requests"),
            ("app.web1.requests", 0, -1, "app.web1"),
            ("app.web1.requests", 5, 0, ""),
            ("app.web1.requests", -10, 10, "app.web1.requests"),
            ("sumSeries(app.*.requests)", 1, 0, "*.requests"),
            ("scale(app.web1.requests,2)", 1, 0, "web1.requests"),
            ("app.web1.requests)x(y", 0, 0, ""),
            ("a.b,c.d", 1, 0, "b"),
            ("a.b", 2, 1, ""),
        ];
        for (name, start, stop, want) in cases {
            assert_eq!(
                substr_name(name, start, stop),
                want,
                "substr({name:?}, {start}, {stop})"
            );
        }
    }

    #[test]
    fn commas_cut_the_last_line() {
        assert_eq!(cut_at_comma("b,c\nd,e"), "b,c\nd");
        assert_eq!(cut_at_comma("b,c\n"), "b\n");
        assert_eq!(cut_at_comma("plain"), "plain");
    }
}
